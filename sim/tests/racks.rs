//! The fabric study: an exchange on leaf-spine fabrics against the star.

use switchgnn_datasets::synthetic::{generate, Preset};
use switchgnn_datasets::{Dataset, NoProgress};
use switchgnn_partition::{Plan, PlanSpec};
use switchgnn_sim::modes::{exchange_plan, scale_for, ExchangeSetup};
use switchgnn_sim::racks::{rack_study, rack_table, FabricSpec};
use switchgnn_sim::{SimConfig, SimKind, SimMode};

const WORKERS: u16 = 8;

/// The small synthetic graph at half scale and its plan for 8 workers, width 128, 1 MB.
/// The rack study of `mode`'s plan for layer 0 of `p` (one plan for every rack count: these
/// modes' plans do not depend on the racks), with 1 MiB of aggregators.
fn study_on(
    mode: SimMode,
    d: &Dataset,
    p: &Plan,
    cfg: &SimConfig,
    fabrics: &FabricSpec,
) -> switchgnn_sim::racks::RackStudy {
    let setup = ExchangeSetup::new(mode, 1 << 20);
    let xplan = exchange_plan(mode, &d.graph, p, 0, 7, None).unwrap();
    rack_study(
        &xplan,
        &|_| Ok(xplan.clone()),
        mode,
        cfg,
        &setup,
        scale_for(&d.graph),
        fabrics,
    )
    .unwrap()
}

fn small() -> (Dataset, Plan) {
    let d = generate(&Preset::Small.spec(0.5, 3).unwrap(), &NoProgress).unwrap();
    let spec =
        PlanSpec::new("synthetic:small", u32::from(WORKERS), vec![128]).switch_memory(1 << 20);
    let p = Plan::prepare(&d, &spec, &|_| {}).unwrap();
    (d, p)
}

#[test]
fn oversubscribed_racks_slow_a_link_bound_exchange() {
    let (d, p) = small();
    let cfg = SimConfig::paper(WORKERS);
    let fabrics = FabricSpec {
        racks: vec![2, 4],
        spines: 2,
        oversubscription: vec![1.0, 4.0],
        two_level: false,
    };
    let mut studies = Vec::new();
    for mode in [SimMode::of(SimKind::Host), SimMode::of(SimKind::Reduce)] {
        let s = study_on(mode, &d, &p, &cfg, &fabrics);
        assert_eq!(s.fabrics.len(), 4);
        for f in &s.fabrics {
            // One level of aggregation: every byte of the hosts' links crosses the spine layer
            // (but for packets between the two when the last host finishes).
            let gap = f.spine_bytes.abs_diff(f.host_link_bytes);
            assert!(gap < f.host_link_bytes / 1000, "{}: {f:?}", mode.name());
        }
        // A quarter of the uplink bandwidth costs the exchange time.
        for racks in [2, 4] {
            let at = |o: f64| {
                let f = s
                    .fabrics
                    .iter()
                    .find(|f| f.racks == racks && f.oversubscription == o);
                f.unwrap().exchange_ns
            };
            assert!(at(4.0) > at(1.0), "{} on {racks} racks", mode.name());
        }
        studies.push(s);
    }
    // (Reduce crossed the spines with fewer bytes than the host exchange of one 64-lane chunk
    // per packet and an ack per copy; packed to the MTU, the host exchange crosses with fewer:
    // 4.69 against 4.85 MB at two racks, one to one.)
    let table = rack_table(&studies);
    println!("{table}");
    assert_eq!(table.lines().count(), 2 + 2 * 5);
    assert!(table.contains("4 racks × 2, 2 spines, 4:1"), "{table}");

    // Racks must hold the same number of hosts.
    let bad = FabricSpec {
        racks: vec![3],
        ..fabrics.clone()
    };
    assert!(bad
        .check(&[WORKERS])
        .unwrap_err()
        .contains("do not fill 3 racks"));
    let none = FabricSpec {
        spines: 0,
        ..fabrics
    };
    assert!(none.check(&[WORKERS]).is_err());
}

#[test]
fn with_two_levels_leaves_aggregate_and_keep_rack_traffic_in_the_rack() {
    let (d, p) = small();
    let cfg = SimConfig::paper(WORKERS);
    let fabrics = FabricSpec {
        racks: vec![2, 4],
        spines: 1,
        oversubscription: vec![2.0],
        two_level: true,
    };
    let mut studies = Vec::new();
    for mode in [
        SimMode::of(SimKind::Host),
        SimMode::of(SimKind::SwitchGnn),
        SimMode::of(SimKind::Reduce),
    ] {
        let s = study_on(mode, &d, &p, &cfg, &fabrics);
        assert!(s.two_level);
        if mode.kind == SimKind::Host {
            for f in &s.fabrics {
                // Copies between the hosts of a rack never reach the spine layer (with one
                // level, everything does: spine bytes = host-link bytes).
                assert!(f.spine_bytes < f.host_link_bytes * 9 / 10, "{f:?}");
            }
        }
        studies.push(s);
    }
    // The leaves' partial sums cross the spine layer in place of the features they sum.
    let host = &studies[0];
    for s in &studies[1..] {
        for (h, f) in host.fabrics.iter().zip(&s.fabrics) {
            assert!(
                f.spine_bytes < h.spine_bytes,
                "{}: {f:?} against {h:?}",
                s.mode.name()
            );
        }
    }
    let table = rack_table(&studies);
    println!("{table}");
    assert!(table.contains("reduce (two-level)"), "{table}");
}

//! Background traffic in the simulator: the TCP-like flows on an empty star never beat their
//! ideal completion time and come close to it at low load, their ECN response keeps the
//! queues short, the exchange stays exact beside them, and the contention study measures
//! both sides with the workers' rate control on and off.

use switchgnn_datasets::synthetic::{generate, Preset};
use switchgnn_datasets::{Dataset, NoProgress};
use switchgnn_partition::{Plan, PlanSpec};
use switchgnn_sim::background::{Background, BackgroundSpec, FctSummary, FlowSizes};
use switchgnn_sim::contention::{background_alone, contention, contention_table};
use switchgnn_sim::modes::{
    direct_sums, exchange_plan, scale_for, simulate_exchange_beside, ExchangeSetup, RateControl,
};
use switchgnn_sim::racks::FabricShape;
use switchgnn_sim::{SimConfig, SimKind, SimMode};

const WORKERS: u16 = 16;

fn setup(mode: SimMode) -> ExchangeSetup {
    ExchangeSetup::new(mode, 1 << 20)
}

fn flows(cfg: &SimConfig, sizes: FlowSizes, load: f64, ecn: bool) -> Background {
    let spec = BackgroundSpec {
        ecn,
        ..BackgroundSpec::new(sizes, load, 3_000_000, 1)
    };
    Background::new(spec, WORKERS, 100.0, 2_000, cfg.frame_overhead)
}

#[test]
fn flows_alone_take_their_ideal_time_at_low_load_and_ecn_keeps_queues_short() {
    let cfg = SimConfig::paper(WORKERS);
    for sizes in [FlowSizes::WebSearch, FlowSizes::Hadoop] {
        let mut quiet = flows(&cfg, sizes, 0.05, true);
        background_alone(&cfg, &mut quiet).unwrap();
        let records = quiet.records();
        assert_eq!(records.len(), quiet.flows(), "every flow completes");
        assert!(records.len() > 10, "{sizes:?}: {} flows", records.len());
        // Nothing beats serialising its frames over the links.
        let fastest = records
            .iter()
            .map(|r| r.slowdown())
            .fold(f64::MAX, f64::min);
        assert!(fastest >= 0.999, "{sizes:?}: a slowdown of {fastest}");
        let f = FctSummary::of(&records);
        assert!(f.median_slowdown < 1.5, "{sizes:?}: {f:?}");

        // At half load, RFC 3168's halving keeps the switch's queues near the marking
        // threshold; without it they fill the buffer.
        let mut marked = flows(&cfg, sizes, 0.5, true);
        let with = background_alone(&cfg, &mut marked).unwrap();
        let mut unmarked = flows(&cfg, sizes, 0.5, false);
        let without = background_alone(&cfg, &mut unmarked).unwrap();
        assert!(
            with.peak_queue() * 3 < without.peak_queue(),
            "{sizes:?}: peak queues {} with ECN, {} without",
            with.peak_queue(),
            without.peak_queue()
        );
        let (a, b) = (
            FctSummary::of(&marked.records()),
            FctSummary::of(&unmarked.records()),
        );
        assert!(a.p99_slowdown < b.p99_slowdown, "{sizes:?}: {a:?} vs {b:?}");
    }
}

/// The width an exchange of [`graph`]'s plan runs at: bundled, one 64-lane chunk stands for
/// the 128 lanes of the in-network kinds; the host kinds pack their copies and run at 128.
fn simulated_width(mode: SimMode) -> usize {
    if mode.exchange_kind().in_network() {
        switchgnn_dataplane::wire::MAX_LANES
    } else {
        128
    }
}

fn graph() -> (Dataset, Plan) {
    let d = generate(&Preset::Small.spec(0.5, 3).unwrap(), &NoProgress).unwrap();
    let spec =
        PlanSpec::new("synthetic:small", u32::from(WORKERS), vec![128]).switch_memory(1 << 20);
    let p = Plan::prepare(&d, &spec, &|_| {}).unwrap();
    (d, p)
}

#[test]
fn the_exchange_stays_exact_beside_background_flows() {
    let (d, p) = graph();
    let cfg = SimConfig::paper(WORKERS);
    for mode in [SimMode::of(SimKind::Host), SimMode::of(SimKind::SwitchGnn)] {
        for rate_control in RateControl::ALL {
            let xplan = exchange_plan(mode, &d.graph, &p, 0, 7, None).unwrap();
            let mut b = flows(&cfg, FlowSizes::WebSearch, 0.5, true);
            let setup = ExchangeSetup {
                rate_control,
                ..setup(mode)
            };
            let scale = scale_for(&d.graph);
            let (sim, outputs) =
                simulate_exchange_beside(xplan, &cfg, &setup, scale, None, Some(&mut b)).unwrap();
            assert!(b.is_done(), "the run waits for the flows");
            assert!(sim.run.finish_ns > 0);
            let w = simulated_width(mode);
            let want = direct_sums(&d.graph, &p.assignment, w, &scale);
            for (worker, (got, want)) in outputs.iter().zip(&want).enumerate() {
                assert_eq!(got, want, "{}: worker {worker}", mode.name());
            }
        }
    }
}

#[test]
fn the_contention_study_measures_both_sides() {
    let (d, p) = graph();
    let cfg = SimConfig::paper(WORKERS);
    let mut studies = Vec::new();
    for mode in [SimMode::of(SimKind::Host), SimMode::of(SimKind::SwitchGnn)] {
        let xplan = exchange_plan(mode, &d.graph, &p, 0, 7, None).unwrap();
        let scale = scale_for(&d.graph);
        let c = contention(
            &xplan,
            mode,
            &cfg,
            &setup(mode),
            scale,
            None,
            FlowSizes::Hadoop,
            0.5,
            None,
            2,
        )
        .unwrap();
        // The flows arrive over the exchange's time alone.
        let default = c.setting(RateControl::Halve).unwrap();
        assert_eq!(c.duration_ns, default.exchange_alone_ns);
        assert!(c.flows > 20, "{} flows", c.flows);
        let settings: Vec<RateControl> = c.settings.iter().map(|w| w.rate_control).collect();
        assert_eq!(settings, RateControl::ALL);
        for w in &c.settings {
            assert_eq!(w.flows.flows, c.flows, "every flow completes");
            // Other traffic only ever delays the exchange's packets.
            assert!(w.exchange_ratio() >= 0.99, "{}: {w:?}", mode.name());
            assert!(w.p99_ratio.is_finite() && w.p99_ratio > 0.0);
            // The bound takes the flows' share off the exchange's busiest link, and is never
            // below its time alone. (With one 64-lane chunk per packet and an ack per copy
            // the host exchange was link-bound here, its bound above its time alone; packed
            // to the MTU its time is mostly round trips, and the bound is its time alone.)
            assert!(w.share_bound_ns >= w.exchange_alone_ns);
        }
        studies.push(c);
    }
    let table = contention_table(&studies);
    println!("{table}");
    assert_eq!(table.lines().count(), 2 + 3 * studies.len());
}

/// On a leaf-spine the flows take the shortest path: a flow within a rack never crosses the
/// spine layer, one across racks crosses it once each way, ECMP spreads flows over both
/// spines, and no flow beats its ideal time on its path.
#[test]
fn flows_on_a_leaf_spine_stay_in_their_rack_or_spread_over_the_spines() {
    let link = switchgnn_sim::fabric::LinkSpec::hundred_gbps();
    let topology = switchgnn_sim::fabric::Topology::leaf_spine(4, WORKERS / 4, 2, link, 1.0);
    let cfg = SimConfig {
        topology,
        ..SimConfig::paper(WORKERS)
    };
    let mut b = flows(&cfg, FlowSizes::Hadoop, 0.3, true).on(&topology);
    let r = background_alone(&cfg, &mut b).unwrap();
    let records = b.records();
    assert_eq!(records.len(), b.flows(), "every flow completes");
    // Their ideal times follow their paths: four links across racks, and none beats it.
    let fastest = records
        .iter()
        .map(|r| r.slowdown())
        .fold(f64::MAX, f64::min);
    assert!(fastest >= 0.999, "a slowdown of {fastest}");
    let rack = |h: u16| topology.rack_of(h);
    let fastest_across = records
        .iter()
        .filter(|f| rack(f.src) != rack(f.dst))
        .map(|r| r.slowdown())
        .fold(f64::MAX, f64::min);
    assert!(
        fastest_across < 1.05,
        "across racks at best {fastest_across}"
    );
    let payload = |cross: bool| -> u64 {
        records
            .iter()
            .filter(|f| (rack(f.src) != rack(f.dst)) == cross)
            .map(|f| f.size)
            .sum()
    };
    let (cross, within) = (payload(true), payload(false));
    assert!(cross > 0 && within > 0, "{cross} / {within}");
    let sum =
        |ports: &[switchgnn_sim::fabric::PortStats]| -> u64 { ports.iter().map(|p| p.bytes).sum() };
    let (hosts_up, leaves_up) = (sum(&r.uplinks), sum(&r.leaf_uplinks));
    assert!(leaves_up >= cross, "{leaves_up} < {cross}");
    assert!(
        hosts_up - leaves_up >= within,
        "{hosts_up} - {leaves_up} < {within}"
    );
    // What goes up comes down, but for the last acknowledgements, still in flight when the
    // last flow completes.
    let spines_down = sum(&r.spine_downlinks);
    assert!(
        spines_down <= leaves_up && leaves_up - spines_down < leaves_up / 1000,
        "{leaves_up} up, {spines_down} down"
    );
    let racks = 4;
    for spine in 0..2 {
        let down = sum(&r.spine_downlinks[spine * racks..(spine + 1) * racks]);
        assert!(
            down > leaves_up / 4,
            "spine {spine} carries {down} of {leaves_up}"
        );
    }
}

/// On a leaf-spine (4 racks of 4, 2 spines, 2:1) with two-level aggregation the exchange stays
/// exact beside flows that cross the racks, and the contention study runs there: every flow
/// completes, and the share bound counts the spine layer, where the flows crossing racks take
/// most of an oversubscribed uplink — the host exchange's bound there exceeds its bound on the
/// star.
#[test]
fn the_contention_study_runs_on_a_leaf_spine() {
    let (d, p) = graph();
    let star = SimConfig::paper(WORKERS);
    let fabric = FabricShape {
        racks: 4,
        spines: 2,
        oversubscription: 2.0,
        two_level: true,
    };
    let cfg = fabric.config(&star);
    let scale = scale_for(&d.graph);
    for mode in [
        SimMode::of(SimKind::Host),
        SimMode::of(SimKind::SwitchGnn),
        SimMode::of(SimKind::Reduce),
    ] {
        let xplan = exchange_plan(mode, &d.graph, &p, 0, 7, None).unwrap();
        let mut b = flows(&cfg, FlowSizes::Hadoop, 0.5, true);
        let setup = ExchangeSetup {
            two_level: true,
            ..setup(mode)
        };
        let (sim, outputs) =
            simulate_exchange_beside(xplan, &cfg, &setup, scale, None, Some(&mut b)).unwrap();
        assert!(b.is_done(), "the run waits for the flows");
        assert!(sim.run.spine_bytes() > 0);
        let w = simulated_width(mode);
        let want = direct_sums(&d.graph, &p.assignment, w, &scale);
        for (worker, (got, want)) in outputs.iter().zip(&want).enumerate() {
            assert!(got == want, "{}: worker {worker}", mode.name());
        }
    }
    let xplan = exchange_plan(SimMode::of(SimKind::Host), &d.graph, &p, 0, 7, None).unwrap();
    let study = |fabric: Option<FabricShape>| {
        contention(
            &xplan,
            SimMode::of(SimKind::Host),
            &star,
            &setup(SimMode::of(SimKind::Host)),
            scale,
            fabric,
            FlowSizes::Hadoop,
            0.5,
            None,
            2,
        )
        .unwrap()
    };
    let (on_star, on_fabric) = (study(None), study(Some(fabric)));
    assert_eq!(on_fabric.fabric, Some(fabric));
    assert_eq!(on_fabric.place(), "4 racks × 4, 2 spines, 2:1 (two-level)");
    assert_eq!(on_star.place(), "star");
    for w in &on_fabric.settings {
        assert_eq!(w.flows.flows, on_fabric.flows, "every flow completes");
    }
    let bound = |c: &switchgnn_sim::contention::Contention| {
        c.setting(RateControl::Halve).unwrap().share_bound_ns
    };
    assert!(
        bound(&on_fabric) > bound(&on_star),
        "{} ns on the fabric, {} on the star",
        bound(&on_fabric),
        bound(&on_star)
    );
    let table = contention_table(&[on_star, on_fabric]);
    assert!(
        table.contains("| star |") && table.contains("(two-level) |"),
        "{table}"
    );
}

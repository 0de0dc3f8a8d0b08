//! Benchmark: the hybrid exchange's search (`hybrid_plan`).
//!
//! Without arguments: on Amazon-Computers (METIS, 32 workers, width 128; every destination in
//! one block, and again in blocks of 4,096 aggregators) on the ideal chip, a Tofino 2 with 96
//! looped ports and a Tofino 1 (32 ports), the wall time of the whole call (best of five) and
//! the chosen plan's serial estimate, whole and block by block.
//!
//! With `picks`: per shared graph and setting (8 workers on a Tofino 1 with 24 looped ports,
//! 32 on a Tofino 2 with 96), what `switchgnn analyze --width 128` reports of the hybrid (one
//! block) and of the pick among every kind, recomputed here from the same library calls, so
//! that two builds of the search can be compared without building the CLI.
//!
//! `cargo bench -p switchgnn-scheduler --bench hybrid [-- picks]`.

use std::time::Instant;

use switchgnn_chip::{Bound, Chip, ChipChoice, Choice, HostCost, Load, Preset};
use switchgnn_dataplane::plan::{ExchangePlan, Mode};
use switchgnn_dataplane::wire::FRAME_OVERHEAD;
use switchgnn_datasets::testdata::shared_dataset;
use switchgnn_datasets::{load_path, Graph, LoadOptions};
use switchgnn_partition::{Assignment, Method, MetisOptions};
use switchgnn_scheduler::exchange::{
    host_hybrid_plan, host_reduce_plan, reduce_plan, ExchangePlans,
};
use switchgnn_scheduler::hybrid::hybrid_plan;
use switchgnn_scheduler::OrderKind;

const WIDTH: usize = 128;

fn cost() -> HostCost {
    HostCost {
        delays: switchgnn_chip::Delays::NONE,
        link_gbps: 100.0,
        per_packet_ns: 20.0,
        frame_overhead: FRAME_OVERHEAD,
        framing: Default::default(),
    }
}

fn load(file: &str, workers: u32) -> Option<(Graph, Assignment)> {
    let Some(path) = shared_dataset(file) else {
        eprintln!("{file} is not in the shared datasets: left out");
        return None;
    };
    let d = load_path(&path, &LoadOptions::default()).expect("the dataset loads");
    let a = Assignment::compute(&d.graph, workers, &Method::Metis(MetisOptions::default()))
        .expect("METIS partitions it");
    Some((d.graph, a))
}

fn main() {
    if std::env::args().any(|a| a == "picks") {
        picks();
    } else {
        timings();
    }
}

fn timings() {
    let file = "amazon-computers.npz";
    let workers = 32;
    let Some((graph, a)) = load(file, workers) else {
        return;
    };
    let cost = cost();
    let chips = [
        ("ideal", Chip::preset("ideal").unwrap()),
        (
            "tofino2+96",
            Chip::preset("tofino2")
                .unwrap()
                .with_loopback_ports(96, cost.link_gbps)
                .unwrap(),
        ),
        ("tofino1-32", Chip::preset("tofino1-32").unwrap()),
    ];
    println!("{file}, {workers} workers, width {WIDTH}");
    for aggregators in [usize::MAX, 4096] {
        for (name, chip) in &chips {
            let mut best = f64::INFINITY;
            let mut plan = None;
            for _ in 0..5 {
                let t = Instant::now();
                let p = hybrid_plan(&graph, &a, WIDTH, aggregators, chip, &cost).unwrap();
                best = best.min(t.elapsed().as_secs_f64());
                plan = Some(p);
            }
            let plan = plan.unwrap();
            let pooled = Bound::of(chip, &Load::of(&plan, FRAME_OVERHEAD), &cost);
            let by_block: f64 = (0..plan.blocks.len())
                .map(|b| {
                    Bound::of(chip, &Load::of_block(&plan, b, FRAME_OVERHEAD), &cost).serial_seconds
                })
                .sum();
            let senders: usize = plan.blocks.iter().map(|b| b.multicast.len()).sum();
            let partials: usize = plan.blocks.iter().map(|b| b.table.slots.len()).sum();
            let blocks = if aggregators == usize::MAX {
                "one block".to_string()
            } else {
                format!("blocks of {aggregators} aggregators")
            };
            println!(
                "{name:<11} {blocks:<29} {:>4} blocks  {:>8.1} ms  serial {:.4} ms (by block \
                 {:.4} ms), bound {:.4} ms; {senders} multicast senders, {partials} partial sums",
                plan.blocks.len(),
                best * 1e3,
                pooled.serial_seconds * 1e3,
                by_block * 1e3,
                pooled.seconds * 1e3,
            );
        }
    }
}

fn picks() {
    let cost = cost();
    let settings = [(8u32, Preset::Tofino1x32, 24u32), (32, Preset::Tofino2, 96)];
    println!(
        "graph | workers | chip | best host-only (ms) | hybrid bound (ms) | hybrid serial (ms) | \
         hybrid / best host-only | pick | pick / best host-only | pick without the hybrid"
    );
    for file in [
        "cora.npz",
        "amazon-computers.npz",
        "amazon-photo.npz",
        "coauthor-cs.npz",
        "yandex/tolokers.npz",
    ] {
        for &(workers, preset, looped) in &settings {
            let Some((graph, a)) = load(file, workers) else {
                continue;
            };
            let chip = ChipChoice {
                preset: Some(preset),
                loopback_ports: looped,
                ..ChipChoice::default()
            }
            .resolve(workers, cost.link_gbps)
            .unwrap();
            let whole = |mode| {
                ExchangePlan::whole_graph(&graph, &a, WIDTH, mode, OrderKind::Random, 0).unwrap()
            };
            let host = Load::for_cost(&whole(Mode::Host), &cost);
            let host_reduce = Load::for_cost(&host_reduce_plan(&graph, &a, WIDTH).unwrap(), &cost);
            let host_hybrid = Load::for_cost(&host_hybrid_plan(&graph, &a, WIDTH).unwrap(), &cost);
            let switchgnn = Load::of(&whole(Mode::Blocks), FRAME_OVERHEAD);
            let reduce = Load::of(
                &reduce_plan(&graph, &a, WIDTH, usize::MAX).unwrap(),
                FRAME_OVERHEAD,
            );
            let hybrid = Load::of(
                &hybrid_plan(&graph, &a, WIDTH, usize::MAX, &chip, &cost).unwrap(),
                FRAME_OVERHEAD,
            );
            let host_only = [
                ("host", &host),
                ("host-reduce", &host_reduce),
                ("host-hybrid", &host_hybrid),
            ];
            let best = Choice::of(&chip, &cost, host_only).unwrap();
            let without = [("switchgnn", &switchgnn), ("reduce", &reduce)];
            let all = Choice::of(
                &chip,
                &cost,
                host_only
                    .into_iter()
                    .chain(without)
                    .chain([("hybrid", &hybrid)]),
            )
            .unwrap();
            let old = Choice::of(&chip, &cost, host_only.into_iter().chain(without)).unwrap();
            let h = Bound::of(&chip, &hybrid, &cost);
            let base = best.bound().seconds;
            println!(
                "{file} | {workers} | {}+{looped} | {} {:.4} | {:.4} | {:.4} | {:.3} | {} | {:.3} | {} {:.3}",
                preset.name(),
                best.kind(),
                base * 1e3,
                h.seconds * 1e3,
                h.serial_seconds * 1e3,
                h.seconds / base,
                all.kind(),
                all.bound().seconds / base,
                old.kind(),
                old.bound().seconds / base,
            );
        }
    }
}

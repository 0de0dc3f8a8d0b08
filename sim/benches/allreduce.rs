//! The in-switch all-reduce on the simulated 100 Gb/s star, against SwitchML's bound (the time
//! one worker's slices need to cross its link once, framing included), on the real chip the
//! simulator picks for each host count. Also prints the simulator's event rate.
//!
//! `cargo bench -p switchgnn-sim --bench allreduce [-- VALUES [SLOTS]]` (default: 1000000
//! values, 256 slots; 8, 32 and 128 workers).

use std::time::Instant;

use switchgnn_sim::allreduce::simulate_allreduce;
use switchgnn_sim::SimConfig;

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let values = args.first().copied().unwrap_or(1_000_000) as usize;
    let slots = args.get(1).copied().unwrap_or(256) as u16;
    println!("in-switch all-reduce: {values} values per worker, {slots} slots, 100 Gb/s star");
    println!(
        "{:>7}  {:>10}  {:>11}  {:>11}  {:>7}  {:>11}  {:>9}",
        "workers", "chip", "time µs", "link µs", "ratio", "retransmits", "Mevents/s"
    );
    for workers in [8u16, 32, 128] {
        let cfg = SimConfig::paper(workers);
        let began = Instant::now();
        let (sim, _) = simulate_allreduce(&cfg, values, slots, 1).expect("a simulated run");
        let wall = began.elapsed().as_secs_f64();
        println!(
            "{workers:>7}  {:>10}  {:>11.1}  {:>11.1}  {:>6.3}×  {:>11}  {:>9.2}",
            cfg.switch.chip.preset.name(),
            sim.finish_ns as f64 / 1e3,
            sim.link_ns / 1e3,
            sim.ratio(),
            sim.retransmits,
            sim.run.events as f64 / wall / 1e6
        );
    }
}

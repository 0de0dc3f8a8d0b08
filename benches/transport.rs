//! Benchmark: one exchange job as real processes (the switch and 4 workers, `switchgnn
//! exchange`) over the kernel's UDP on loopback and, in a build with `--features dpdk`, over
//! DPDK memif; the same plan, every result checked. For each datapath and exchange kind:
//!
//! - the exchange time (per exchange the slowest worker, summed), against the time its bytes
//!   need at the emulated link rate (spread evenly over the workers' links, both directions):
//!   the physical bound;
//! - packets into the switch per second of exchange, and per second the switch was busy
//!   handling them (its capacity: receive, parse, the switch model);
//! - DPDK against UDP.
//!
//! `cargo bench --features dpdk --bench transport [-- DATASET]` (default: Amazon-Computers from
//! ../shared/datasets when present, else synthetic:small). `SWITCHGNN_BENCH_SWITCH_CORES`
//! (default 1) runs the switch's model on that many cores (`switch --cores`).

mod support;

use std::path::Path;

const WORKERS: u32 = 4;
const GBPS: f64 = 10.0;

struct Row {
    transport: &'static str,
    mode: String,
    exchange_s: f64,
    bound_s: f64,
    packets_in: f64,
    capacity: f64,
}

fn run(dataset: &str, transport: &'static str, plan: &Path, out: &Path) -> Vec<Row> {
    let json = out.join(format!("{transport}.json"));
    let cores = switch_cores().to_string();
    let gbps = GBPS.to_string();
    let args = [
        "--exchange",
        "switch,host",
        "--transport",
        transport,
        "--gbps",
        &gbps,
        "--switch-cores",
        &cores,
    ];
    let what = format!("exchange over {transport}");
    let rate = GBPS * 1e9 / 8.0;
    support::exchange(dataset, WORKERS, &args, plan, &json, &what)
        .iter()
        .map(|m| {
            let exchanges = m["exchanges"].as_array().unwrap();
            let seconds = support::seconds(m);
            let bytes: f64 = exchanges.iter().map(|x| x["bytes"].as_f64().unwrap()).sum();
            let ingress = &m["switch"]["ingress"];
            let datagrams = ingress["datagrams"].as_f64().unwrap();
            let busy = ingress["busy_s"].as_f64().unwrap();
            Row {
                transport,
                mode: m["mode"].as_str().unwrap().to_string(),
                exchange_s: seconds,
                bound_s: bytes / (2.0 * f64::from(WORKERS) * rate),
                packets_in: m["switch"]["counters"]["packets_in"].as_f64().unwrap(),
                capacity: if busy > 0.0 { datagrams / busy } else { 0.0 },
            }
        })
        .collect()
}

/// Cores of the switch's model (`SWITCHGNN_BENCH_SWITCH_CORES`, default 1).
fn switch_cores() -> u16 {
    std::env::var("SWITCHGNN_BENCH_SWITCH_CORES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
}

fn main() {
    let dataset = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .unwrap_or_else(|| {
            let amazon = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../shared/datasets/amazon-computers.npz");
            if amazon.exists() {
                amazon.display().to_string()
            } else {
                "synthetic:small".into()
            }
        });
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan");
    let mut transports = vec!["udp"];
    if cfg!(feature = "dpdk") {
        transports.push("dpdk");
    } else {
        println!("(built without the dpdk feature: UDP only)");
    }
    println!(
        "{dataset}: switch (model on {} core(s)) + {WORKERS} worker processes on this machine, \
         {GBPS} Gb/s emulated links, widths: the dataset's and 16, forward and backward",
        switch_cores()
    );
    println!(
        "{:<6} {:<10} {:>11} {:>12} {:>9} {:>11} {:>14} {:>16}",
        "path",
        "exchange",
        "time (s)",
        "bound (s)",
        "/ bound",
        "packets in",
        "Mpps (time)",
        "Mpps (busy)"
    );
    let mut rows = Vec::new();
    for t in transports {
        for r in run(&dataset, t, &plan, dir.path()) {
            println!(
                "{:<6} {:<10} {:>11.3} {:>12.4} {:>8.0}× {:>11.0} {:>14.3} {:>16.3}",
                r.transport,
                r.mode,
                r.exchange_s,
                r.bound_s,
                r.exchange_s / r.bound_s,
                r.packets_in,
                r.packets_in / r.exchange_s / 1e6,
                r.capacity / 1e6
            );
            rows.push(r);
        }
    }
    for mode in ["switchgnn", "host"] {
        let of = |t: &str| rows.iter().find(|r| r.transport == t && r.mode == mode);
        if let (Some(u), Some(d)) = (of("udp"), of("dpdk")) {
            println!(
                "{mode}: DPDK / UDP exchange time {:.2}×, switch capacity {:.2}×",
                d.exchange_s / u.exchange_s,
                d.capacity / u.capacity
            );
        }
    }
}

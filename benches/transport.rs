//! Benchmark: one exchange job as real processes (the switch and 4 workers, `switchgnn
//! exchange`) over the kernel's UDP on loopback and, in a build with `--features dpdk`, over
//! DPDK memif; the same plan, every result checked. For each datapath and exchange kind:
//!
//! - the exchange time (per exchange the slowest worker, summed), against the time its bytes
//!   need at the emulated link rate (spread evenly over the workers' links, both directions):
//!   the physical bound;
//! - packets into the switch per second of exchange, and per second the switch was busy
//!   handling them (its capacity: receive, parse, the switch model);
//! - each kind's time over the time of the TCP baseline (`--exchange tcp`: the host
//!   exchange's copies over the kernel's TCP between the workers, paced at the same link
//!   rate), run in the same UDP run on the same machine;
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
    // The TCP baseline runs over the kernel whatever the datapath: once, in the UDP run.
    let kinds = if transport == "udp" {
        "switch,host,tcp"
    } else {
        "switch,host"
    };
    let args = [
        "--exchange",
        kinds,
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
    let rows: Vec<Row> = transports
        .into_iter()
        .flat_map(|t| run(&dataset, t, &plan, dir.path()))
        .collect();
    let tcp = rows
        .iter()
        .find(|r| r.mode == "tcp")
        .map(|r| r.exchange_s)
        .expect("the UDP run has the TCP baseline");
    println!(
        "{:<6} {:<10} {:>11} {:>12} {:>9} {:>11} {:>14} {:>16} {:>9}",
        "path",
        "exchange",
        "time (s)",
        "bound (s)",
        "/ bound",
        "packets in",
        "Mpps (time)",
        "Mpps (busy)",
        "/ tcp"
    );
    for r in &rows {
        // The TCP baseline sends nothing through the switch: no switch figures.
        let (packets, mpps_time, mpps_busy) = if r.mode == "tcp" {
            ("-".to_string(), "-".to_string(), "-".to_string())
        } else {
            (
                format!("{:.0}", r.packets_in),
                format!("{:.3}", r.packets_in / r.exchange_s / 1e6),
                format!("{:.3}", r.capacity / 1e6),
            )
        };
        println!(
            "{:<6} {:<10} {:>11.3} {:>12.4} {:>8.0}× {:>11} {:>14} {:>16} {:>8.2}×",
            r.transport,
            r.mode,
            r.exchange_s,
            r.bound_s,
            r.exchange_s / r.bound_s,
            packets,
            mpps_time,
            mpps_busy,
            r.exchange_s / tcp
        );
    }
    for r in rows.iter().filter(|r| r.mode != "tcp") {
        println!(
            "{} over {}: {:.2}× the TCP baseline's exchange time (same machine, same run)",
            r.mode,
            r.transport.to_uppercase(),
            r.exchange_s / tcp
        );
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

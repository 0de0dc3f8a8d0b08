//! Benchmark: exchange jobs as real processes (the switch and 4 workers, `switchgnn exchange`)
//! over the kernel's UDP on loopback and, in a build with `--features dpdk`, over DPDK memif;
//! the same plan, every result checked. Two passes:
//!
//! - **no rate cap** (links emulated at 1,000 Gb/s, far above what loopback carries): every
//!   exchange kind, each kind's time over the time of the TCP host exchange (`--exchange tcp`:
//!   the host exchange's copies over the kernel's TCP between the workers, the yardstick a
//!   user without a switch has), run in the same pass on the same machine;
//! - **10 Gb/s links**: the planner's pick (`auto`), the host exchange and TCP, each against
//!   the time its bytes need at the link rate (spread evenly over the workers' links, both
//!   directions): the physical bound.
//!
//! For each run also packets into the switch per second of exchange, and per second the switch
//! was busy handling them (its capacity: receive, parse, the switch model), and DPDK against
//! UDP. No chip preset applies: the switch is the software model on this machine's cores.
//!
//! `cargo bench --features dpdk --bench transport [-- DATASET]` (default: Amazon-Computers from
//! ../shared/datasets when present, else synthetic:small). `SWITCHGNN_BENCH_SWITCH_CORES`
//! (default 1) runs the switch's model on that many cores (`switch --cores`).

mod support;

use std::path::Path;

const WORKERS: u32 = 4;

/// One pass of the bench: a link rate and the kinds it runs.
struct Pass {
    name: &'static str,
    gbps: f64,
    /// Kinds over UDP (the TCP baseline included); over DPDK, the same less `tcp`.
    kinds: &'static str,
    /// Whether the link rate bounds the time (the bound column means something).
    capped: bool,
}

const PASSES: [Pass; 2] = [
    Pass {
        name: "no rate cap",
        gbps: 1000.0,
        kinds: "tcp,host,host-reduce,host-hybrid,switch,reduce,hybrid,auto",
        capped: false,
    },
    Pass {
        name: "10 Gb/s links",
        gbps: 10.0,
        kinds: "tcp,host,auto",
        capped: true,
    },
];

struct Row {
    transport: &'static str,
    mode: String,
    exchange_s: f64,
    bound_s: f64,
    packets_in: f64,
    capacity: f64,
    syscalls_per_datagram: f64,
}

fn run(dataset: &str, transport: &'static str, pass: &Pass, plan: &Path, out: &Path) -> Vec<Row> {
    let json = out.join(format!("{transport}-{}.json", pass.gbps));
    let cores = switch_cores().to_string();
    let gbps = pass.gbps.to_string();
    // The TCP baseline runs over the kernel whatever the datapath: once, in the UDP run.
    let kinds: String = if transport == "udp" {
        pass.kinds.to_string()
    } else {
        let kinds: Vec<&str> = pass.kinds.split(',').filter(|k| *k != "tcp").collect();
        kinds.join(",")
    };
    let args = [
        "--exchange",
        &kinds,
        "--transport",
        transport,
        "--gbps",
        &gbps,
        "--switch-cores",
        &cores,
    ];
    let what = format!("exchange over {transport} ({})", pass.name);
    let rate = pass.gbps * 1e9 / 8.0;
    support::exchange(dataset, WORKERS, &args, plan, &json, &what)
        .iter()
        .map(|m| {
            let exchanges = m["exchanges"].as_array().unwrap();
            let seconds = support::seconds(m);
            let bytes: f64 = exchanges.iter().map(|x| x["bytes"].as_f64().unwrap()).sum();
            let ingress = &m["switch"]["ingress"];
            let datagrams = ingress["datagrams"].as_f64().unwrap();
            let busy = ingress["busy_s"].as_f64().unwrap();
            let endpoint = &m["switch"]["endpoint"];
            let moved = endpoint["datagrams_sent"].as_f64().unwrap_or(0.0)
                + endpoint["datagrams_received"].as_f64().unwrap_or(0.0);
            let syscalls = endpoint["syscalls"].as_f64().unwrap_or(0.0);
            Row {
                transport,
                mode: m["mode"].as_str().unwrap().to_string(),
                exchange_s: seconds,
                bound_s: bytes / (2.0 * f64::from(WORKERS) * rate),
                packets_in: m["switch"]["counters"]["packets_in"].as_f64().unwrap(),
                capacity: if busy > 0.0 { datagrams / busy } else { 0.0 },
                syscalls_per_datagram: if moved > 0.0 { syscalls / moved } else { 0.0 },
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
        "{dataset}: switch (software model on {} core(s), no chip preset) + {WORKERS} worker \
         processes on this machine; widths: the dataset's and 16, forward and backward",
        switch_cores()
    );
    support::print_background_load();
    for pass in &PASSES {
        let rows: Vec<Row> = transports
            .iter()
            .flat_map(|t| run(&dataset, t, pass, &plan, dir.path()))
            .collect();
        report(pass, &rows);
    }
}

/// One pass's table and the ratios that judge it.
fn report(pass: &Pass, rows: &[Row]) {
    let tcp = rows
        .iter()
        .find(|r| r.mode == "tcp")
        .map(|r| r.exchange_s)
        .expect("the UDP run has the TCP baseline");
    println!("\n{} ({} Gb/s emulated):", pass.name, pass.gbps);
    println!(
        "{:<6} {:<12} {:>9} {:>10} {:>8} {:>11} {:>11} {:>11} {:>10} {:>8}",
        "path",
        "exchange",
        "time (s)",
        "bound (s)",
        "/ bound",
        "packets in",
        "Mpps (time)",
        "Mpps (busy)",
        "calls/dgm",
        "/ tcp"
    );
    for r in rows {
        let bound = if pass.capped {
            (
                format!("{:.4}", r.bound_s),
                format!("{:.0}×", r.exchange_s / r.bound_s),
            )
        } else {
            ("-".to_string(), "-".to_string())
        };
        // The TCP baseline sends nothing through the switch: no switch figures.
        let (packets, mpps_time, mpps_busy, calls) = if r.mode == "tcp" {
            ("-".into(), "-".into(), "-".into(), "-".into())
        } else {
            (
                format!("{:.0}", r.packets_in),
                format!("{:.3}", r.packets_in / r.exchange_s / 1e6),
                format!("{:.3}", r.capacity / 1e6),
                format!("{:.3}", r.syscalls_per_datagram),
            )
        };
        println!(
            "{:<6} {:<12} {:>9.3} {:>10} {:>8} {:>11} {:>11} {:>11} {:>10} {:>7.2}×",
            r.transport,
            r.mode,
            r.exchange_s,
            bound.0,
            bound.1,
            packets,
            mpps_time,
            mpps_busy,
            calls,
            r.exchange_s / tcp
        );
    }
    if let Some(host) = rows
        .iter()
        .find(|r| r.transport == "udp" && r.mode == "host")
    {
        println!(
            "host exchange over UDP: {:.2}× the TCP host exchange's speed (same pass, same \
             machine)",
            tcp / host.exchange_s
        );
    }
    for r in rows.iter().filter(|r| r.mode != "tcp") {
        let bound = if pass.capped {
            format!(", {:.1}× its line-rate time", r.exchange_s / r.bound_s)
        } else {
            String::new()
        };
        println!(
            "{} over {}: {:.2}× the TCP host exchange's time{bound}",
            r.mode,
            r.transport.to_uppercase(),
            r.exchange_s / tcp
        );
    }
    for r in rows.iter().filter(|r| r.transport == "dpdk") {
        if let Some(u) = rows
            .iter()
            .find(|u| u.transport == "udp" && u.mode == r.mode)
        {
            println!(
                "{}: DPDK / UDP exchange time {:.2}×, switch capacity {:.2}×",
                r.mode,
                r.exchange_s / u.exchange_s,
                r.capacity / u.capacity
            );
        }
    }
}

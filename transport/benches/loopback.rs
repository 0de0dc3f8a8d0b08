//! The software switch over loopback UDP: sustained packets/s and aggregated lanes/s with 4
//! workers, against the switch model driven in memory (no sockets, same plan, same engines) in
//! the same run. The switch runs in a thread named `switch`, so `perf record -g` on this
//! binary and `perf report --comm switch` show where its time goes.
//!
//! The UDP run is repeated with the switch model on 2, 3, … cores (`switch --cores`, up to
//! `SWITCHGNN_BENCH_CORES`, default 1), each against the one-core run above it.
//!
//! `cargo bench -p switchgnn-transport --bench loopback [-- DATASET]` (default: synthetic
//! small; any dataset argument of the command line works, e.g. a path to cora.npz).

use std::sync::Arc;
use std::time::Instant;

use switchgnn_dataplane::engine::Timers;
use switchgnn_dataplane::fixed::Scale;
use switchgnn_dataplane::network::{run_exchange, Faults, LinkConfig, NetworkConfig, RunSetup};
use switchgnn_dataplane::switch::SwitchConfig;
use switchgnn_dataplane::ExchangeId;
use switchgnn_datasets::{LoadOptions, NoProgress, Source};
use switchgnn_partition::{Plan, PlanSpec};
use switchgnn_transport::loopback::run_exchange_job;
use switchgnn_transport::server::ServerConfig;
use switchgnn_transport::workload::Workload;
use switchgnn_transport::{ExchangeKind, Session};

const WORKERS: u16 = 4;
const WIDTH: usize = 128;
const MEMORY: u64 = 10_000_000;
const EPOCHS: u32 = 3;

fn main() {
    let name = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .unwrap_or_else(|| "synthetic:small".into());
    let source: Source = name.parse().expect("a dataset argument");
    let dataset = Arc::new(source.load(&LoadOptions::default(), &NoProgress).unwrap());
    let spec = PlanSpec::new(name.clone(), u32::from(WORKERS), vec![WIDTH]).switch_memory(MEMORY);
    let plan = Plan::prepare(&dataset, &spec, &|_| {}).unwrap();
    let session = Arc::new(Session::new(&plan, &dataset.graph, ExchangeKind::Switchgnn).unwrap());
    println!(
        "{name}: {} vertices, {} edges; {WORKERS} workers, width {WIDTH}, {} blocks; {} exchanges",
        dataset.num_vertices(),
        dataset.graph.num_edges(),
        session.layers[0].blocks.len(),
        2 * EPOCHS
    );

    // Over loopback UDP.
    let (udp_pps, report) = over_udp(&dataset, &session, 1);

    // The same exchanges through the in-memory network: protocol work only.
    let scale_for =
        |id: ExchangeId| -> Scale { Workload::new(&dataset, id, WIDTH, 1).unwrap().scale };
    let mut mem_packets = 0;
    let mut mem_lanes = 0;
    let mut mem_seconds = 0.0;
    for epoch in 0..EPOCHS {
        for s in session.schedule(1, epoch) {
            let workload = Workload::new(&dataset, s.id, WIDTH, 1).unwrap();
            let all: Vec<u32> = (0..dataset.num_vertices() as u32).collect();
            let values = workload.rows(&all);
            let setup = RunSetup {
                exchange: s.id,
                scale: scale_for(s.id),
                switch: SwitchConfig {
                    aggregators: (MEMORY / switchgnn_dataplane::switch::AGGREGATOR_BYTES) as usize,
                    ecn_threshold: u64::MAX,
                    ports: WORKERS,
                },
                network: NetworkConfig {
                    link: LinkConfig {
                        rate: f64::INFINITY,
                        delay: 1_000,
                    },
                    ..NetworkConfig::new(Faults::none(), 1)
                },
                timers: Timers::default(),
                paced: false,
                window: usize::MAX,
                framing: Default::default(),
            };
            let t = Instant::now();
            let run = run_exchange(session.layers[0].clone(), &values, &setup).unwrap();
            mem_seconds += t.elapsed().as_secs_f64();
            mem_packets += run.switch.packets_in;
            mem_lanes += run.switch.lane_updates;
        }
    }
    let mem_pps = mem_packets as f64 / mem_seconds;
    let mem_lanes_s = mem_lanes as f64 / mem_seconds;

    println!(
        "in memory    : {:>9} packets in {mem_seconds:.3} s = {:.3} Mpps, {:.1} M lanes/s \
         (switch model + 4 engines + event queue, one thread)",
        mem_packets,
        mem_pps / 1e6,
        mem_lanes_s / 1e6
    );
    println!("UDP / in-memory: {:.3}× packets/s", udp_pps / mem_pps);
    let e = &report.endpoint;
    let datagrams = e.datagrams();
    println!(
        "the switch's system calls: {} for {datagrams} datagrams in and out = {:.3} per datagram \
         ({} send calls, {} receive calls, waits and queue readings the rest)",
        e.syscalls,
        e.syscalls as f64 / datagrams as f64,
        e.send_calls,
        e.recv_calls,
    );
    let most: u16 = std::env::var("SWITCHGNN_BENCH_CORES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    for cores in 2..=most {
        let (pps, _) = over_udp(&dataset, &session, cores);
        println!(
            "switch on {cores} cores / on one: {:.3}× packets/s into the switch",
            pps / udp_pps
        );
    }
}

/// The exchanges over loopback UDP with the switch model on `cores` cores: packets per
/// second into the switch (over the exchanges' time) and the switch's report.
fn over_udp(
    dataset: &Arc<switchgnn_datasets::Dataset>,
    session: &Arc<Session>,
    cores: u16,
) -> (f64, switchgnn_transport::server::ServerReport) {
    let server = ServerConfig {
        cores,
        ..ServerConfig::loopback(
            1,
            WORKERS,
            (MEMORY / switchgnn_dataplane::switch::AGGREGATOR_BYTES) as usize,
        )
    };
    let outcome = run_exchange_job(dataset, session, server, EPOCHS).unwrap();
    let wall = outcome.seconds;
    let report = outcome.switch;
    let reports: Vec<_> = outcome.workers.into_iter().map(Result::unwrap).collect();
    // Exchange time: per exchange, the slowest worker (start-up, handshakes and the final
    // check are left out).
    let udp_seconds: f64 = (0..reports[0].exchanges.len())
        .map(|i| {
            reports
                .iter()
                .map(|r| r.exchanges[i].seconds)
                .fold(0.0, f64::max)
        })
        .sum();
    for r in &reports {
        assert!(
            r.exchanges.iter().all(|x| x.mismatched_rows == 0),
            "inexact"
        );
    }
    let (calls, datagrams) = reports.iter().fold((0, 0), |(c, d), r| {
        (
            c + r.wire.endpoint.syscalls,
            d + r.wire.endpoint.datagrams(),
        )
    });
    println!(
        "the workers' system calls: {calls} for {datagrams} datagrams = {:.3} per datagram",
        calls as f64 / datagrams as f64
    );
    let engines: Vec<_> = reports
        .iter()
        .flat_map(|r| &r.exchanges)
        .map(|x| &x.engine)
        .collect();
    println!(
        "the workers' engines: smoothed round trip {:.0} µs on average, {} ECN echoes",
        engines.iter().map(|e| e.srtt_ns as f64).sum::<f64>() / engines.len() as f64 / 1e3,
        engines.iter().map(|e| e.ecn_echoes).sum::<u64>()
    );
    let k = &report.counters;
    let udp_pps = k.packets_in as f64 / udp_seconds;
    let udp_lanes = k.lane_updates as f64 / udp_seconds;
    let retransmits: u64 = reports
        .iter()
        .flat_map(|r| &r.exchanges)
        .map(|x| x.engine.retransmits)
        .sum();

    println!(
        "loopback UDP, switch on {cores} core(s): {:>9} packets in {udp_seconds:.3} s of \
         exchanges ({wall:.3} s with start-up and checks) = {:.3} Mpps into the switch, {:.1} M \
         lanes/s aggregated ({} retransmissions, {} switch drops)",
        k.packets_in,
        udp_pps / 1e6,
        udp_lanes / 1e6,
        retransmits,
        k.total_drops()
    );
    (udp_pps, report)
}

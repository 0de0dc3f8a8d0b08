//! The gradient all-reduce, in the switch against the TCP parameter server beside it, in one
//! run on loopback: 4 workers (threads) sum the same float vectors both ways through
//! `Participant::all_reduce`, each result checked — the TCP one against the float64 sum in
//! rank order, the in-switch one identical on every worker and within the fixed-point bound
//! of it. Prints the slowest worker's time per operation (the median of three, alternating
//! the two ways), the ratio, and what the payload needs at the emulated link rate (the
//! switch's egress ports drain at it).
//!
//! `cargo bench -p switchgnn-transport --bench allreduce [-- VALUES... [slots=N]]` (default:
//! 1000000 25000000, the job file's default slots). The software switch is one thread reading a kernel UDP socket: the packet rate
//! it sustains bounds the in-switch figure, not the protocol.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Barrier};
use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use switchgnn_datasets::{LoadOptions, NoProgress, Source};
use switchgnn_partition::{Plan, PlanSpec};
use switchgnn_transport::collective::{ReduceOp, ServiceConfig};
use switchgnn_transport::job::AllReduceVia;
use switchgnn_transport::server::ServerConfig;
use switchgnn_transport::{ExchangeKind, JobFile, Participant, Session, SwitchServer, Timeouts};

const WORKERS: u16 = 4;
/// Each size is summed this many times each way (alternating); the median is printed.
const REPEATS: usize = 3;

/// A worker's figures for one size: its times each way, and its last results.
type Row = (usize, Vec<f64>, Vec<f64>, Vec<f32>, Vec<f32>);

fn values(rank: u16, len: usize) -> Vec<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(u64::from(rank));
    (0..len)
        .map(|_| rng.random_range(-1.0f32..1.0) * 1e-2)
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let sizes: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let slots: Option<u16> = args.iter().find_map(|a| {
        a.strip_prefix("slots=")
            .map(|n| n.parse().expect("slots=N"))
    });
    let sizes = if sizes.is_empty() {
        vec![1_000_000, 25_000_000]
    } else {
        sizes
    };
    let source: Source = "synthetic:small,scale=0.05".parse().unwrap();
    let dataset = source.load(&LoadOptions::default(), &NoProgress).unwrap();
    let spec = PlanSpec::new(dataset.name.clone(), u32::from(WORKERS), vec![16]);
    let plan = Plan::prepare(&dataset, &spec, &|_| {}).unwrap();
    let session = Arc::new(Session::new(&plan, &dataset.graph, ExchangeKind::Host).unwrap());
    let mut job = JobFile::loopback(
        PathBuf::new(),
        ExchangeKind::Host,
        SocketAddr::from(([127, 0, 0, 1], 0)),
        WORKERS,
    );
    job.timeouts = Timeouts::loopback();
    if let Some(n) = slots {
        job.allreduce.slots = n;
    }
    let server = ServerConfig {
        timeouts: job.timeouts,
        link: job.link,
        allreduce_slots: job.allreduce.slots,
        ..ServerConfig::loopback(job.job, WORKERS, 1024)
    };
    let service = ServiceConfig::of(job.job, WORKERS, &job.timeouts);
    let (mut switch, collective) =
        SwitchServer::bind_with_service(server, session.clone(), service).unwrap();
    let addr = switch.local_addr().unwrap();
    println!(
        "all-reduce: {WORKERS} workers on loopback, {} slots of 64 values, links {} Gb/s",
        job.allreduce.slots, job.link.gbps
    );
    println!(
        "{:>11}  {:>9}  {:>9}  {:>7}  {:>10}  {:>12}",
        "values", "tcp s", "switch s", "ratio", "link s", "worst error"
    );
    let stop = AtomicBool::new(false);
    let barrier = Barrier::new(usize::from(WORKERS));
    std::thread::scope(|s| {
        let switch = s.spawn(|| switch.run(&stop, None));
        let workers: Vec<_> = (0..WORKERS)
            .map(|rank| {
                let (job, session, sizes, barrier) = (&job, session.clone(), &sizes, &barrier);
                s.spawn(move || {
                    let mut p = Participant::connect(job, session, rank, addr, 0, 1, None)
                        .expect("join the job");
                    let mut rows = Vec::new();
                    for &len in sizes {
                        let mine = values(rank, len);
                        let mut timed = |via, out: &mut Vec<f32>| {
                            p.set_allreduce_via(via);
                            *out = mine.clone();
                            barrier.wait();
                            let began = Instant::now();
                            p.all_reduce(ReduceOp::Sum, out).expect("all-reduce");
                            began.elapsed().as_secs_f64()
                        };
                        let (mut tcp, mut switch) = (Vec::new(), Vec::new());
                        let (mut tcp_s, mut switch_s) = (Vec::new(), Vec::new());
                        for _ in 0..REPEATS {
                            tcp_s.push(timed(AllReduceVia::Tcp, &mut tcp));
                            switch_s.push(timed(AllReduceVia::Switch, &mut switch));
                        }
                        rows.push((len, tcp_s, switch_s, tcp, switch));
                    }
                    p.finish().expect("leave");
                    rows
                })
            })
            .collect();
        let runs: Vec<_> = workers.into_iter().map(|w| w.join().unwrap()).collect();
        switch.join().unwrap().expect("the switch");
        for (i, &len) in sizes.iter().enumerate() {
            let mut sum = vec![0f64; len];
            for rank in 0..WORKERS {
                for (a, v) in sum.iter_mut().zip(values(rank, len)) {
                    *a += f64::from(v);
                }
            }
            let first = &runs[0][i].4;
            let mut worst = 0f64;
            for run in &runs {
                let (_, _, _, tcp, switch) = &run[i];
                assert!(
                    tcp.iter().zip(&sum).all(|(t, s)| *t == *s as f32),
                    "tcp sum"
                );
                assert!(switch == first, "in-switch sums differ between workers");
                for (x, s) in switch.iter().zip(&sum) {
                    worst = worst.max((f64::from(*x) - s).abs());
                }
            }
            // Per repeat the slowest worker's time; the median of the repeats.
            let median = |of: &dyn Fn(&Row) -> &Vec<f64>| {
                let mut t: Vec<f64> = (0..REPEATS)
                    .map(|k| runs.iter().map(|r| of(&r[i])[k]).fold(0.0, f64::max))
                    .collect();
                t.sort_by(f64::total_cmp);
                t[REPEATS / 2]
            };
            let tcp_s = median(&|r| &r.1);
            let switch_s = median(&|r| &r.2);
            // Each worker's slices up and results down: 64 values in a 32-byte header per
            // packet, framing as on Ethernet, at the emulated link rate.
            let packets = len.div_ceil(64) as f64;
            let bytes = packets * (32.0 + 66.0) + len as f64 * 4.0;
            let link_s = bytes * 8.0 / (job.link.gbps * 1e9);
            println!(
                "{len:>11}  {tcp_s:>9.3}  {switch_s:>9.3}  {:>6.2}×  {link_s:>10.3}  {worst:>12.2e}",
                tcp_s / switch_s
            );
        }
    });
    collective
        .finish(std::time::Duration::from_secs(1))
        .expect("the service");
}

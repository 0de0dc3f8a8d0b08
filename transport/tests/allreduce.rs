//! The in-switch all-reduce over real UDP datagrams on loopback: the software switch process's
//! slots and every worker's engine, exact under loss, duplication and reordering, operation
//! after operation. (The protocol itself is tested in memory in the conformance crate.)

// Only the session builder is used here.
#[allow(dead_code)]
mod support;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;
use switchgnn_dataplane::allreduce::ReduceOp;
use switchgnn_datasets::{LoadOptions, NoProgress, Source};
use switchgnn_partition::{Plan, PlanSpec};
use switchgnn_transport::loopback::{run_allreduce_job, run_allreduce_jobs};
use switchgnn_transport::server::{AllReducePool, ServedJob, ServerConfig};
use switchgnn_transport::ShimConfig;
use switchgnn_transport::{ExchangeKind, Session, Timeouts};

const WORKERS: u16 = support::overload::WORKERS;

fn values(rank: u16, op: usize, len: usize) -> Vec<i32> {
    let mut rng = ChaCha8Rng::seed_from_u64(u64::from(rank) << 16 | op as u64);
    let bound = i32::MAX / i32::from(WORKERS);
    (0..len).map(|_| rng.random_range(-bound..=bound)).collect()
}

/// No faults, and loss with duplication and reordering (the shim seeded with `seed`).
fn conditions(seed: u64) -> [(&'static str, ShimConfig); 2] {
    [
        ("no faults", ShimConfig::default()),
        (
            "2% loss, duplication, reordering",
            ShimConfig {
                loss: 0.02,
                duplicate: 0.01,
                reorder: 0.02,
                reorder_delay_us: 300,
                seed,
            },
        ),
    ]
}

/// The rank-ordered combination of every worker's `inputs`, lane by lane.
fn combine(op: ReduceOp, inputs: &[Vec<i32>]) -> Vec<i32> {
    (0..inputs[0].len())
        .map(|k| {
            let column = inputs.iter().map(|v| v[k]);
            match op {
                ReduceOp::Sum => column.map(i64::from).sum::<i64>() as i32,
                ReduceOp::Max => column.max().unwrap(),
            }
        })
        .collect()
}

#[test]
fn every_worker_gets_the_exact_sums_over_udp_under_faults() {
    let (_, session) = support::overload::session(ExchangeKind::Host, 0.05);
    let ops = [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Sum, ReduceOp::Sum];
    let lens = [20_000, 3, 64 * 40 + 1, 0];
    for (name, faults) in conditions(5) {
        let server = ServerConfig {
            timeouts: Timeouts::loopback(),
            faults,
            allreduce_slots: 32,
            ..ServerConfig::loopback(1, WORKERS, 1024)
        };
        let (report, runs) =
            run_allreduce_job(&server, &session, &ops, |r, i| values(r, i, lens[i])).unwrap();
        for (i, op) in ops.iter().enumerate() {
            let inputs: Vec<Vec<i32>> = (0..WORKERS).map(|r| values(r, i, lens[i])).collect();
            let want = combine(*op, &inputs);
            for (rank, run) in runs.iter().enumerate() {
                assert!(
                    run.outputs[i] == want,
                    "{name}: worker {rank}, operation {i}"
                );
            }
        }
        let retransmits: u64 = runs
            .iter()
            .flat_map(|r| &r.stats)
            .map(|s| s.retransmits)
            .sum();
        let c = &report.counters;
        eprintln!(
            "{name}: {} slices combined, {} replays, {} retransmits",
            c.reduce_slices, c.reduce_replays, retransmits
        );
        assert_eq!(c.reduce_slices, (20_000u64.div_ceil(64) + 1 + 41));
        if faults.loss > 0.0 {
            assert!(retransmits > 0, "{name}");
        }
    }
}

/// ATP's best-effort mode over UDP: two jobs at once on one switch process, sharing a pool of
/// slots too small for both, without and with faults. Every worker gets its own job's exact
/// combination; what the pool could not take the switch's host finished, and that is counted.
#[test]
fn best_effort_jobs_share_a_small_pool_exactly_over_udp() {
    // Four workers a job: eight threads on a shared machine, each job with its own plan.
    const PER_JOB: u16 = 4;
    let source: Source = "synthetic:small,scale=0.05".parse().unwrap();
    let dataset = source.load(&LoadOptions::default(), &NoProgress).unwrap();
    let spec = PlanSpec::new(dataset.name.clone(), u32::from(PER_JOB), vec![64]);
    let plan = Plan::prepare(&dataset, &spec, &|_| {}).unwrap();
    let session = Arc::new(Session::new(&plan, &dataset.graph, ExchangeKind::Host).unwrap());
    let ops = [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Sum];
    let lens = [20_000, 5, 64 * 20 + 7];
    let seed = |job: u16, rank: u16| rank + 100 * job;
    for (name, faults) in conditions(8) {
        let server = ServerConfig {
            timeouts: Timeouts::loopback(),
            faults,
            allreduce_pool: Some(AllReducePool {
                slots: 16,
                leak: std::time::Duration::from_millis(2),
            }),
            ..ServerConfig::loopback(1, PER_JOB, 1024)
        };
        let jobs: Vec<ServedJob> = [(1u16, 24u16), (2, 40)]
            .into_iter()
            .map(|(job, window)| ServedJob {
                job,
                allreduce_slots: window,
                allreduce_best_effort: true,
                ..ServedJob::first(&server, session.clone())
            })
            .collect();
        let (report, runs) = run_allreduce_jobs(&server, jobs, &ops, |job, rank, i| {
            values(seed(job, rank), i, lens[i])
        })
        .unwrap();
        for (j, job) in [1u16, 2].into_iter().enumerate() {
            for (i, op) in ops.iter().enumerate() {
                let inputs: Vec<Vec<i32>> = (0..PER_JOB)
                    .map(|r| values(seed(job, r), i, lens[i]))
                    .collect();
                let want = combine(*op, &inputs);
                for (rank, run) in runs[j].iter().enumerate() {
                    assert!(
                        run.outputs[i] == want,
                        "{name}: job {job} worker {rank}, operation {i}"
                    );
                }
            }
        }
        let c = &report.counters;
        eprintln!(
            "{name}: {} slices in the pool, {} finished by the host ({} collisions, {} leaks, \
             {} packets to the host)",
            c.reduce_slices,
            c.reduce_host_slices,
            c.reduce_collisions,
            c.reduce_leaks,
            c.reduce_host_packets
        );
        let slices = 2 * (20_000u64.div_ceil(64) + 1 + 21);
        assert_eq!(c.reduce_slices + c.reduce_host_slices, slices, "{name}");
        // Windows of 24 and 40 slices over 16 shared slots: slices collided.
        assert!(c.reduce_collisions + c.reduce_leaks > 0, "{name}");
        assert!(c.reduce_host_slices > 0, "{name}");
    }
}

//! The in-switch all-reduce over real UDP datagrams on loopback: the software switch process's
//! slots and every worker's engine, exact under loss, duplication and reordering, operation
//! after operation. (The protocol itself is tested in memory in the conformance crate.)

// Only the session builder is used here.
#[allow(dead_code)]
mod support;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use switchgnn_dataplane::allreduce::ReduceOp;
use switchgnn_transport::loopback::run_allreduce_job;
use switchgnn_transport::server::ServerConfig;
use switchgnn_transport::socket::ShimConfig;
use switchgnn_transport::{ExchangeKind, Timeouts};

const WORKERS: u16 = support::overload::WORKERS;

fn values(rank: u16, op: usize, len: usize) -> Vec<i32> {
    let mut rng = ChaCha8Rng::seed_from_u64(u64::from(rank) << 16 | op as u64);
    let bound = i32::MAX / i32::from(WORKERS);
    (0..len).map(|_| rng.random_range(-bound..=bound)).collect()
}

#[test]
fn every_worker_gets_the_exact_sums_over_udp_under_faults() {
    let (_, session) = support::overload::session(ExchangeKind::Host, 0.05);
    let ops = [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Sum, ReduceOp::Sum];
    let lens = [20_000, 3, 64 * 40 + 1, 0];
    for (name, faults) in [
        ("no faults", ShimConfig::default()),
        (
            "2% loss, duplication, reordering",
            ShimConfig {
                loss: 0.02,
                duplicate: 0.01,
                reorder: 0.02,
                reorder_delay_us: 300,
                seed: 5,
            },
        ),
    ] {
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
            let want: Vec<i32> = (0..lens[i])
                .map(|k| {
                    let column = inputs.iter().map(|v| v[k]);
                    match op {
                        ReduceOp::Sum => column.map(i64::from).sum::<i64>() as i32,
                        ReduceOp::Max => column.max().unwrap(),
                    }
                })
                .collect();
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

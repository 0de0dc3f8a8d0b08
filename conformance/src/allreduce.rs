//! Inputs and expected results of the in-switch all-reduce, shared by every test that drives
//! it (the switch model's, the P4 program's transcription).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use switchgnn_dataplane::allreduce::{AllReduceConfig, AllReduceEngine, ReduceOp};
use switchgnn_dataplane::fault::Faults;

/// The network conditions every all-reduce test runs under.
pub fn every_fault() -> [(&'static str, Faults); 4] {
    [
        ("no faults", Faults::none()),
        ("1% loss", Faults::lossy(0.01)),
        ("5% loss", Faults::lossy(0.05)),
        (
            "duplication and reordering",
            Faults {
                duplicate: 0.05,
                reorder: 0.1,
                reorder_delay: 40_000,
                ..Faults::none()
            },
        ),
    ]
}

/// One int32 vector per worker, whose sum over `workers` workers stays inside int32, as an
/// agreed scale makes them.
pub fn inputs(workers: u16, len: usize, seed: u64) -> Vec<Vec<i32>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let bound = i32::MAX / i32::from(workers);
    (0..workers)
        .map(|_| (0..len).map(|_| rng.random_range(-bound..=bound)).collect())
        .collect()
}

/// What every worker must receive: the exact elementwise combination of `inputs`.
///
/// # Panics
/// If a sum leaves int32 (inputs made by [`inputs`] never do).
pub fn combine(op: ReduceOp, inputs: &[Vec<i32>]) -> Vec<i32> {
    (0..inputs[0].len())
        .map(|i| {
            let column = inputs.iter().map(|v| v[i]);
            match op {
                ReduceOp::Sum => {
                    i32::try_from(column.map(i64::from).sum::<i64>()).expect("a sum inside int32")
                }
                ReduceOp::Max => column.max().expect("at least one worker"),
            }
        })
        .collect()
}

/// One engine per worker of job `job` for the operation `operation` on `inputs` (rank order),
/// starting at stream position `start` in `slots` slots, with a 30 µs retransmission floor.
pub fn engines(
    job: u16,
    slots: u16,
    op: ReduceOp,
    operation: u32,
    start: u32,
    inputs: &[Vec<i32>],
) -> Vec<AllReduceEngine> {
    inputs
        .iter()
        .enumerate()
        .map(|(rank, values)| {
            let cfg = AllReduceConfig {
                job,
                rank: rank as u16,
                slots,
                op,
                operation,
                start,
                rto: 30_000,
            };
            AllReduceEngine::new(cfg, values.clone())
        })
        .collect()
}

//! The in-switch all-reduce (SwitchML's protocol, `dataplane::allreduce`), in memory: every
//! worker receives exactly the rank-ordered combination of the inputs, whatever the network
//! loses, duplicates or reorders, operation after operation; and what is not a well-formed
//! slice of an admitted worker changes nothing and is counted.

mod common;

use common::send;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use switchgnn_conformance::allreduce::{combine, engines, every_fault, inputs};
use switchgnn_dataplane::allreduce::{
    from_order_key, order_key, AllReduceConfig, AllReduceEngine, AllReduceError, ReduceOp,
};
use switchgnn_dataplane::network::{Faults, Network, NetworkConfig};
use switchgnn_dataplane::node::{Nanos, Operation};
use switchgnn_dataplane::switch::{DropReason, Switch};
use switchgnn_dataplane::wire::{PacketType, Repr};

/// The job `allreduce_switch` installs.
const JOB: u16 = 1;

/// A switch with job `JOB` of `workers` workers and `slots` all-reduce slots.
fn switch(workers: u16, slots: u16) -> Switch {
    let mut s = switch_without_region(workers);
    s.add_allreduce(JOB, slots).unwrap();
    s
}

/// A switch with job `JOB` of `workers` workers, and no all-reduce region.
fn switch_without_region(workers: u16) -> Switch {
    switchgnn_sim::allreduce::allreduce_switch(workers, 100_000).unwrap()
}

/// Run one operation at stream position `start` on `net`; every worker's engine, finished.
fn run(
    net: &mut Network,
    s: &mut Switch,
    slots: u16,
    op: ReduceOp,
    operation: u32,
    start: u32,
    inputs: &[Vec<i32>],
) -> Vec<AllReduceEngine> {
    let mut engines = engines(JOB, slots, op, operation, start, inputs);
    net.run_while(s, &mut engines, Nanos::MAX, |e| {
        e.iter().all(|e| e.is_finished())
    })
    .unwrap();
    engines
}

#[test]
fn every_worker_gets_the_exact_sum_under_every_fault() {
    let settings = every_fault();
    for (name, faults) in settings {
        for (workers, slots) in [(4u16, 8u16), (5, 64), (8, 3)] {
            let mut net = Network::new(NetworkConfig::new(faults, 7), workers);
            let mut s = switch(workers, slots);
            // Several operations of different lengths, one after another in the stream.
            let (mut start, mut retransmits) = (0, 0);
            for (operation, len) in [1000usize, 1, 64, 65, 0, 3000].into_iter().enumerate() {
                let inputs = inputs(workers, len, operation as u64);
                let want = combine(ReduceOp::Sum, &inputs);
                let engines = run(
                    &mut net,
                    &mut s,
                    slots,
                    ReduceOp::Sum,
                    operation as u32,
                    start,
                    &inputs,
                );
                for e in &engines {
                    assert_eq!(e.failure(), None, "{name}");
                    assert!(
                        e.output() == want.as_slice(),
                        "{name}, {workers} workers, {slots} slots, operation {operation}"
                    );
                }
                start = engines[0].end();
                retransmits += engines.iter().map(|e| e.stats().retransmits).sum::<u64>();
            }
            // Loss, duplication and reordering never look like a sum that cannot complete.
            assert_eq!(s.allreduce_lost(JOB), None, "{name}");
            let c = s.counters();
            if faults.loss > 0.0 {
                // Losses at these rates and sizes: recovered by retransmission, and the switch
                // added no repeat twice.
                assert!(retransmits > 0, "{name}");
                assert!(
                    c.reduce_replays + c.dropped(DropReason::Duplicate) > 0,
                    "{name}"
                );
            }
            assert_eq!(c.overflows, 0);
        }
    }
}

#[test]
fn the_maximum_of_floats_goes_through_their_order_keys() {
    let workers = 4;
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let floats: Vec<Vec<f32>> = (0..workers)
        .map(|_| (0..500).map(|_| rng.random_range(-1e6f32..1e6)).collect())
        .collect();
    let keys: Vec<Vec<i32>> = floats
        .iter()
        .map(|v| v.iter().map(|&x| order_key(x)).collect())
        .collect();
    let mut net = Network::new(NetworkConfig::new(Faults::lossy(0.02), 1), workers);
    let mut s = switch(workers, 16);
    let engines = run(&mut net, &mut s, 16, ReduceOp::Max, 0, 0, &keys);
    for e in &engines {
        for (i, &k) in e.output().iter().enumerate() {
            let want = floats.iter().map(|v| v[i]).fold(f32::MIN, f32::max);
            assert_eq!(from_order_key(k), want, "value {i}");
        }
    }
}

#[test]
fn a_sum_that_leaves_int32_is_reported_to_every_worker() {
    let workers = 2;
    let mut inputs = inputs(workers, 200, 9);
    inputs[0][130] = i32::MAX;
    inputs[1][130] = 5;
    let mut net = Network::new(NetworkConfig::new(Faults::none(), 1), workers);
    let mut s = switch(workers, 8);
    let engines = run(&mut net, &mut s, 8, ReduceOp::Sum, 0, 0, &inputs);
    for e in &engines {
        assert_eq!(e.failure(), Some(AllReduceError::Overflow { slice: 2 }));
    }
    assert_eq!(s.counters().overflows, 1);
}

/// A slice header from worker `w` at stream position `position`, as an engine writes it.
fn slice(w: u16, position: u32, slots: u16, lanes: u8) -> Repr {
    let (slot, bank) = switchgnn_dataplane::allreduce::slot_of(position, slots);
    Repr {
        packet_type: PacketType::Reduce,
        flags: Default::default(),
        layer: ReduceOp::Sum.code(),
        job: JOB,
        src: 0,
        dst: 0,
        block: slot,
        count: 1,
        worker: w,
        chunk: bank,
        lanes,
        epoch: 0,
        sequence: position,
    }
}

#[test]
fn what_is_not_a_slice_of_an_admitted_worker_changes_nothing_and_is_counted() {
    let mut s = switch(2, 4);
    let one = [1i32; 8];
    // Worker 0's slice at position 1 is in; worker 1's will complete it.
    assert!(send(&mut s, 0, &slice(0, 1, 4, 8), &one).is_empty());
    // Another port claiming to be worker 0, or another job's id: refused.
    assert!(send(&mut s, 1, &slice(0, 1, 4, 8), &[100; 8]).is_empty());
    let mut other_job = slice(1, 1, 4, 8);
    other_job.job = 2;
    assert!(send(&mut s, 1, &other_job, &[100; 8]).is_empty());
    // A slot field that is not the position's, a lane count other than the bank's, a result
    // sent upwards.
    let mut wrong_slot = slice(1, 1, 4, 8);
    wrong_slot.block = 2;
    assert!(send(&mut s, 1, &wrong_slot, &[100; 8]).is_empty());
    assert!(send(&mut s, 1, &slice(1, 1, 4, 7), &[100; 7]).is_empty());
    let mut upwards = slice(1, 1, 4, 8);
    upwards.packet_type = PacketType::Reduced;
    assert!(send(&mut s, 1, &upwards, &[100; 8]).is_empty());
    // Worker 0 again before the slot is complete: a duplicate, not added. The bank's next use
    // (position 9) before its sum is complete: refused, the sum in progress kept.
    assert!(send(&mut s, 0, &slice(0, 1, 4, 8), &one).is_empty());
    assert!(send(&mut s, 0, &slice(0, 9, 4, 8), &[100; 8]).is_empty());
    let c = s.counters();
    assert_eq!(c.dropped(DropReason::NotAdmitted), 2);
    assert_eq!(c.dropped(DropReason::OutOfRange), 2);
    assert_eq!(c.dropped(DropReason::BadLanes), 1);
    assert_eq!(c.dropped(DropReason::WrongDirection), 1);
    assert_eq!(c.dropped(DropReason::Duplicate), 1);
    // Worker 1's own slice completes the sum: 1 + 2 on both workers.
    let out = send(&mut s, 1, &slice(1, 1, 4, 8), &[2; 8]);
    assert_eq!(out.len(), 2);
    for (_, r, lanes) in &out {
        assert_eq!(r.packet_type, PacketType::Reduced);
        assert_eq!(r.count, 2);
        assert_eq!(lanes, &vec![3; 8]);
    }
    // A repeat after completion gets the result back, to the sender alone.
    let replay = send(&mut s, 1, &slice(1, 1, 4, 8), &[2; 8]);
    assert_eq!(replay.len(), 1);
    assert_eq!(replay[0].2, vec![3; 8]);
    assert_eq!(s.counters().reduce_replays, 1);
    // Position 17 (same slot and bank, two uses ahead) is no slice a worker can send yet: it
    // is dropped and wipes nothing.
    assert!(send(&mut s, 0, &slice(0, 17, 4, 8), &one).is_empty());
    assert_eq!(s.counters().dropped(DropReason::OutOfRange), 3);
    // The bank moves on to position 9 (same slot and bank, its next use): a copy of position
    // 1 is stale.
    assert!(send(&mut s, 0, &slice(0, 9, 4, 8), &one).is_empty());
    assert!(send(&mut s, 1, &slice(1, 1, 4, 8), &[2; 8]).is_empty());
    assert_eq!(s.counters().dropped(DropReason::Stale), 1);
    // A job without a region.
    let mut bare = switch_without_region(2);
    assert!(send(&mut bare, 0, &slice(0, 0, 4, 8), &one).is_empty());
    assert_eq!(bare.counters().dropped(DropReason::NoAllReduce), 1);
}

#[test]
fn regions_are_sized_and_given_to_configured_jobs_only() {
    let mut s = switch_without_region(2);
    assert!(s.add_allreduce(7, 16).is_err());
    assert!(s.add_allreduce(JOB, 0).is_err());
    assert!(s
        .add_allreduce(JOB, switchgnn_dataplane::switch::MAX_SLOTS + 1)
        .is_err());
    s.add_allreduce(JOB, 16).unwrap();
    assert_eq!(s.allreduce_slots(JOB), Some(16));
}

/// A switch that lost its state (a restart) while workers were in an all-reduce: a worker that
/// had a sum's result moved on, one that had not waits for it forever. The switch recognises
/// the sum that can never complete — a worker missing from it is already past it — so the
/// control plane can end the job instead.
#[test]
fn a_sum_that_can_never_complete_is_recognised() {
    let mut s = switch(2, 4);
    // The fresh switch hears worker 0 ask for position 1 and worker 1 send position 5 (slot 1's
    // next slice, in its other bank), which it sends only after receiving position 1's result
    // (from the switch before the restart).
    assert!(send(&mut s, 0, &slice(0, 1, 4, 8), &[1; 8]).is_empty());
    assert!(send(&mut s, 1, &slice(1, 5, 4, 8), &[1; 8]).is_empty());
    assert_eq!(s.allreduce_lost(JOB), None, "nobody has asked again yet");
    // Worker 0 asks again: position 1 can never complete.
    assert!(send(&mut s, 0, &slice(0, 1, 4, 8), &[1; 8]).is_empty());
    assert_eq!(s.allreduce_lost(JOB), Some((1, 1)));

    // A worker merely ahead in another slot (its copy of position 1 lost, position 2 in) is not
    // past position 1: slots advance independently, and nothing is lost.
    let mut s = switch(2, 4);
    assert!(send(&mut s, 0, &slice(0, 1, 4, 8), &[1; 8]).is_empty());
    assert!(send(&mut s, 1, &slice(1, 2, 4, 8), &[1; 8]).is_empty());
    assert!(send(&mut s, 0, &slice(0, 1, 4, 8), &[1; 8]).is_empty());
    assert_eq!(s.allreduce_lost(JOB), None);
}

/// ATP's best-effort mode: two jobs share a pool too small for both, under every fault. Each
/// worker still gets exactly its own job's combination (what the pool could not take, the
/// host finished), and the fallbacks are counted.
#[test]
fn best_effort_jobs_sharing_a_small_pool_are_exact_and_fall_back_to_the_host() {
    let settings = every_fault();
    // (job id, workers, window)
    let jobs = [(3u16, 4u16, 8u16), (4, 3, 5)];
    for (name, faults) in settings {
        // A leak timeout of 1 ns: every slot another slice holds is taken from it, its
        // partial sum handed to the host (the hardest case for the host's bookkeeping).
        for (pool, leak) in [(4u32, 1_000_000u64), (3, 1), (64, 1_000_000)] {
            let mut s = switchgnn_sim::allreduce::allreduce_switch_for(
                &[(jobs[0].0, jobs[0].1), (jobs[1].0, jobs[1].1)],
                100_000,
            )
            .unwrap();
            s.set_allreduce_pool(pool, leak).unwrap();
            for &(job, _, window) in &jobs {
                s.add_allreduce_best_effort(job, window).unwrap();
                assert_eq!(s.allreduce_slots(job), Some(window));
            }
            let ports: u16 = jobs.iter().map(|j| j.1).sum();
            let mut net = Network::new(NetworkConfig::new(faults, 11), ports);
            let mut start = [0u32; 2];
            for (operation, len) in [700usize, 1, 64, 2000].into_iter().enumerate() {
                let op = if operation == 1 {
                    ReduceOp::Max
                } else {
                    ReduceOp::Sum
                };
                // Both jobs' workers at once, on the ports of their job (job 3 first).
                let inputs: Vec<Vec<Vec<i32>>> = jobs
                    .iter()
                    .map(|&(job, workers, _)| {
                        inputs(workers, len, u64::from(job) << 8 | operation as u64)
                    })
                    .collect();
                let mut engines: Vec<AllReduceEngine> = jobs
                    .iter()
                    .zip(&inputs)
                    .enumerate()
                    .flat_map(|(j, (&(job, _, window), inputs))| {
                        let start = start[j];
                        inputs.iter().enumerate().map(move |(rank, values)| {
                            let cfg = AllReduceConfig {
                                job,
                                rank: rank as u16,
                                slots: window,
                                op,
                                operation: operation as u32,
                                start,
                                rto: 30_000,
                            };
                            AllReduceEngine::new(cfg, values.clone())
                        })
                    })
                    .collect();
                net.run_while(&mut s, &mut engines, Nanos::MAX, |e| {
                    e.iter().all(|e| e.is_finished())
                })
                .unwrap();
                let (first, second) = engines.split_at(usize::from(jobs[0].1));
                for (j, engines) in [first, second].into_iter().enumerate() {
                    let want = combine(op, &inputs[j]);
                    for e in engines {
                        assert_eq!(e.failure(), None, "{name}");
                        assert!(
                            e.output() == want.as_slice(),
                            "{name}, pool {pool}, job {}, operation {operation}",
                            jobs[j].0
                        );
                    }
                    start[j] = engines[0].end();
                }
            }
            let c = s.counters();
            assert_eq!(c.overflows, 0);
            if pool < 8 && (faults.loss > 0.0 || faults.reorder > 0.0) {
                // Windows of 8 and 5 slices cannot fit 4 slots once a lost or late copy keeps
                // a slice incomplete: slices collided (or took a stalled slot, its partial
                // sum to the host), and the host finished some. (Without
                // faults every worker's slice arrives at the same instant here and completes
                // before the other job's comes.)
                assert!(
                    c.reduce_collisions + c.reduce_leaks > 0 && c.reduce_host_slices > 0,
                    "{name}, pool {pool}: {c:?}"
                );
            }
            if leak == 1 && (faults.loss > 0.0 || faults.reorder > 0.0) {
                assert!(c.reduce_leaks > 0, "{name}, pool {pool}: {c:?}");
            }
        }
    }
}

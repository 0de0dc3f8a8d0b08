//! The barriers of an exchange: every worker joins before block 0's go, and every worker
//! reports a block done before the next block's go (or the exchange's end).

use bitvec::vec::BitVec;

use super::counters::DropReason;
use super::output::Pipeline;
use super::racks::Tier;
use super::state::{BlockState, Job, Run};
use crate::node::ExchangeId;
use crate::wire::Repr;

pub(super) fn join(job: &mut Job, f: &mut Pipeline, repr: &Repr) -> Result<(), DropReason> {
    let id = ExchangeId::of(repr);
    let seq = repr.sequence;
    let w = repr.worker;
    if let Some(run) = &mut job.current {
        if run.id == id && run.seq == seq {
            if run.started {
                // The go was lost: repeat it to this worker.
                f.go(&id, seq, run.block, w);
            } else {
                run.joined.set(usize::from(w), true);
                start_if_all_joined(job, f);
            }
            return Ok(());
        }
        // Exchanges run in sequence order; a new one may begin once the current is complete.
        if seq <= run.seq || !run.finished() {
            return Err(DropReason::Stale);
        }
    }
    let plan = job.layers[usize::from(repr.layer)].clone();
    if let Some(old) = job.current.take() {
        job.previous = Some((old.id, old.seq, old.block));
    }
    let workers = usize::from(job.workers);
    let mut joined = BitVec::repeat(false, workers);
    joined.set(usize::from(w), true);
    job.current = Some(Run {
        id,
        seq,
        plan,
        started: false,
        block: 0,
        joined,
        done: BitVec::repeat(false, workers),
        state: None,
    });
    start_if_all_joined(job, f);
    Ok(())
}

pub(super) fn start_if_all_joined(job: &mut Job, f: &mut Pipeline) {
    let run = job.current.as_mut().expect("a run");
    if !run.joined.all() {
        return;
    }
    run.started = true;
    begin_block(run, f, job.workers);
}

/// Load block `run.block` (or finish) and multicast its go.
pub(super) fn begin_block(run: &mut Run, f: &mut Pipeline, workers: u16) {
    let block = usize::from(run.block);
    if block < run.plan.blocks.len() {
        run.state = Some(match &f.tier {
            Tier::Spine(racks) => BlockState::for_spine(&run.plan, block, racks),
            _ => BlockState::new(&run.plan, block),
        });
    } else {
        run.state = None;
        if f.shard.leads() {
            f.counters.exchanges_completed += 1;
        }
    }
    run.done.fill(false);
    for w in 0..workers {
        f.go(&run.id, run.seq, run.block, w);
    }
}

pub(super) fn block_done(job: &mut Job, f: &mut Pipeline, repr: &Repr) -> Result<(), DropReason> {
    let w = repr.worker;
    let workers = job.workers;
    if let Some((prev, seq, blocks)) = job.previous {
        if prev.matches(repr) && !job.current.as_ref().is_some_and(|r| r.id.matches(repr)) {
            // A worker that missed the previous exchange's final go.
            f.go(&prev, seq, blocks, w);
            return Ok(());
        }
    }
    let run = match &mut job.current {
        Some(run) if run.id.matches(repr) && run.started => run,
        _ => return Err(DropReason::Stale),
    };
    if repr.block < run.block {
        f.go(&run.id, run.seq, run.block, w);
        return Ok(());
    }
    if repr.block > run.block || run.finished() {
        return Err(DropReason::Stale);
    }
    run.done.set(usize::from(w), true);
    if run.done.all() {
        // Free what the block still holds (aggregators whose destination finished by fetching
        // raw features from its cache never saw a resend).
        if let Some(state) = run.state.take() {
            state.release(f);
        }
        if f.shard.leads() {
            f.counters.blocks_completed += 1;
        }
        run.block += 1;
        begin_block(run, f, workers);
    }
    Ok(())
}

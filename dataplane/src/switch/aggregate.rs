//! The data path: a worker's features (or partial sums) added into the aggregators of the
//! running block, results sent when a sum completes, and raw copies, packed rows and fetches
//! forwarded to the hosts.

use super::counters::DropReason;
use super::output::{forward_raw, notify_fetch, send_partial, send_result, Pipeline};
use super::state::{running, Agg, Job, Run};
use crate::fixed::checked_add_lanes;
use crate::plan::{ExchangePlan, Mode};
use crate::wire::{Packet, Repr, MAX_LANES};

pub(super) fn data(
    job: &mut Job,
    f: &mut Pipeline,
    repr: &Repr,
    packet: &Packet<&[u8]>,
) -> Result<(), DropReason> {
    let (run, lanes) = data_block(job, repr)?;
    let plan = &run.plan;
    if plan.owner[repr.src as usize] != repr.worker {
        return Err(DropReason::NotInPlan);
    }
    let c = usize::from(repr.chunk);
    let block = &plan.blocks[usize::from(run.block)];
    let table = &block.table;
    let mut one_slot = [0];
    let (sender, targets) = targets(plan, usize::from(run.block), repr, &mut one_slot)?;
    let chunks = plan.chunks();
    let state = run.state.as_mut().expect("a running block has state");
    let mut values = [0i32; MAX_LANES];
    packet.lanes_into(&mut values[..lanes]);
    let mut ack = *repr;
    ack.flags.ack = true;
    ack.lanes = 0;
    // Whether this model acknowledges the packet (a sharded switch's: one shard of those it
    // reaches).
    let acks = f.counting;
    if state.seen.replace(sender * chunks + c, true) {
        // Already counted: acknowledge again (the first ack may be lost), add nothing.
        if acks {
            f.counters.acks += 1;
            f.send(repr.worker, &ack, &[]);
        }
        return Err(DropReason::Duplicate);
    }
    if acks {
        // Its first pass checked it and goes around again to aggregate (one shard counts it).
        f.counters.check_passes += 1;
    }
    // A partial sum its worker could not fit into 32-bit lanes carries nothing to add.
    let unfit = plan.mode == Mode::Reduce && repr.flags.fetch && repr.src != repr.dst;
    // A packet marked on its way in (a queue before this switch, as a leaf's uplink) has its
    // acknowledgement marked too: the P4 program's acknowledgement keeps the packet's flags.
    let mut congested = repr.flags.ecn;
    // The passes touch aggregators scattered over the pool: ask for them all before adding
    // into the first, so that their cache misses overlap instead of following each other.
    for &slot in targets {
        let k = slot as usize * chunks + c;
        if let (true, Agg::Active(a)) = (f.shard.owns(f.job, k), state.agg[k]) {
            prefetch(&f.pool.lanes[a as usize * MAX_LANES..][..MAX_LANES]);
        }
    }
    for &slot in targets {
        let k = slot as usize * chunks + c;
        let dst_rank = table.workers[slot as usize] as u16;
        if acks {
            // The acknowledgement echoes congestion towards every destination it feeds.
            congested |= f.congested(dst_rank);
        }
        if !f.shard.owns(f.job, k) {
            continue;
        }
        f.counters.passes += 1;
        let dst = table.vertices[slot as usize];
        if state.remaining[k] == 0 {
            // Cannot happen with a consistent table: every contribution is counted once.
            continue;
        }
        state.remaining[k] -= 1;
        state.claim(k, f);
        let Agg::Active(a) = state.agg[k] else {
            if unfit {
                if state.agg[k] != Agg::Released {
                    state.agg[k] = Agg::Released;
                    notify_fetch(f, repr, dst, dst_rank);
                }
                continue;
            }
            // No aggregator (pool exhausted, or released): the host aggregates this one.
            forward_raw(f, repr, dst, dst_rank, &values[..lanes]);
            if state.remaining[k] == 0 && state.agg[k] == Agg::Idle {
                state.agg[k] = Agg::Done;
                if state.up.get(slot as usize).is_some_and(|up| *up) {
                    // A leaf whose every contribution went raw still tells the spine its
                    // share is in: none of it.
                    send_partial(f, repr, dst, 0, &[0; MAX_LANES][..lanes]);
                }
            }
            continue;
        };
        let acc = &mut f.pool.lanes[a as usize * MAX_LANES..][..lanes];
        // All lanes are checked before any is written: an overflow leaves no partial update.
        let overflow = !unfit && !checked_add_lanes(acc, &values[..lanes]);
        if overflow || unfit {
            f.counters.overflows += 1;
            f.pool.release(a);
            state.agg[k] = Agg::Released;
            notify_fetch(f, repr, dst, dst_rank);
            if !unfit {
                forward_raw(f, repr, dst, dst_rank, &values[..lanes]);
            }
            continue;
        }
        f.counters.lane_updates += lanes as u64;
        state.counted[k] += 1;
        if state.remaining[k] == 0 {
            let mut sums = [0i32; MAX_LANES];
            sums[..lanes].copy_from_slice(&f.pool.lanes[a as usize * MAX_LANES..][..lanes]);
            let sums = &sums[..lanes];
            if state.up.get(slot as usize).is_some_and(|up| *up) {
                // A leaf's share of a sum the spine finishes.
                send_partial(f, repr, dst, state.counted[k], sums);
            } else {
                send_result(f, repr, dst, dst_rank, state.counted[k], sums);
            }
            // A partial sum's pass ends its packet; a multicast contribution may go on (the P4
            // program reads in place when the completing pass ends its pipe's chain: fewer).
            let partial = plan.mode == Mode::Reduce && repr.src != repr.dst;
            f.counters.count_readout(lanes, partial);
            f.pool.release(a);
            state.agg[k] = Agg::Done;
            f.counters.aggregations += 1;
        }
    }
    if !acks {
        return Ok(());
    }
    ack.flags.ecn = congested;
    if congested {
        f.counters.ecn_marks += 1;
    }
    f.counters.acks += 1;
    f.send(repr.worker, &ack, &[]);
    Ok(())
}

/// A data packet's sender (the index of its seen bits) and the table rows whose aggregators it
/// is added into, in block `block` of `plan`: a vertex's feature goes into every in-block
/// neighbour's aggregator; a partial sum into its destination's only (`one_slot` holds it).
pub(super) fn targets<'a>(
    plan: &'a ExchangePlan,
    block: usize,
    repr: &Repr,
    one_slot: &'a mut [u32; 1],
) -> Result<(usize, &'a [u32]), DropReason> {
    let block = plan.blocks.get(block).ok_or(DropReason::Stale)?;
    if plan.mode == Mode::Reduce && repr.src == repr.dst {
        // A hybrid block's multicast sender: its feature into each of its destinations.
        let i = block
            .multicast
            .index(repr.src)
            .ok_or(DropReason::NotInPlan)?;
        Ok((block.table.slots.len() + i, block.multicast.rows_of(i)))
    } else if plan.mode == Mode::Reduce {
        let row = block.row_of(repr.dst).ok_or(DropReason::NotInPlan)?;
        let pair = block.pair(row, repr.worker).ok_or(DropReason::NotInPlan)?;
        one_slot[0] = row as u32;
        Ok((pair, &one_slot[..]))
    } else {
        let row = block.row_of(repr.src).ok_or(DropReason::NotInPlan)?;
        Ok((row, block.table.row(row)))
    }
}

/// The running block a data packet must belong to, and the lanes of its chunk (the packet's
/// checked against them).
pub(super) fn data_block<'a>(
    job: &'a mut Job,
    repr: &Repr,
) -> Result<(&'a mut Run, usize), DropReason> {
    let run = running(job, repr)?;
    if repr.block != run.block {
        return Err(DropReason::Stale);
    }
    if !run.plan.mode.switch_aggregates() {
        return Err(DropReason::WrongMode);
    }
    let lanes = run.plan.chunk_lanes(usize::from(repr.chunk));
    if usize::from(repr.lanes) != lanes {
        return Err(DropReason::BadLanes);
    }
    Ok((run, lanes))
}

/// Hint the CPU to bring `lanes` into its cache (a no-op where there is no such hint).
#[inline]
pub(super) fn prefetch(lanes: &[i32]) {
    #[cfg(target_arch = "x86_64")]
    for line in lanes.chunks(16) {
        // SAFETY: a prefetch only hints the cache; the address is that of a live slice.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                line.as_ptr().cast(),
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = lanes;
}

pub(super) fn raw(
    job: &mut Job,
    f: &mut Pipeline,
    repr: &Repr,
    bytes: &[u8],
) -> Result<(), DropReason> {
    let run = running(job, repr)?;
    let plan = &run.plan;
    if plan.owner[repr.src as usize] != repr.worker {
        return Err(DropReason::NotInPlan);
    }
    if usize::from(repr.lanes) != plan.chunk_lanes(usize::from(repr.chunk)) {
        return Err(DropReason::BadLanes);
    }
    let dst_rank = plan.owner[repr.dst as usize];
    if repr.flags.resend && plan.mode.switch_aggregates() && repr.block == run.block {
        let block = &plan.blocks[usize::from(run.block)];
        if let (Some(slot), Some(state)) = (block.row_of(repr.dst), run.state.as_mut()) {
            let k = slot * plan.chunks() + usize::from(repr.chunk);
            if f.shard.leads() {
                // The release is a pass of its own after the checks, in the aggregator's pipe.
                f.counters.check_passes += 1;
                f.counters.passes += 1;
            }
            match if f.shard.owns(f.job, k) {
                state.agg[k]
            } else {
                Agg::Done
            } {
                Agg::Active(a) => {
                    f.pool.release(a);
                    state.agg[k] = Agg::Released;
                    f.counters.releases += 1;
                }
                Agg::Idle => {
                    state.agg[k] = Agg::Released;
                    f.counters.releases += 1;
                }
                Agg::Done | Agg::Released => {}
            }
        }
    }
    if f.shard.leads() {
        f.forward(dst_rank, &bytes[..repr.buffer_len()]);
    }
    Ok(())
}

/// Packed host copies, or their receiver's ack of ranges: forwarded whole to the owner of
/// `dst`, as the P4 program forwards them (it parses the header only, and the records or
/// ranges after it are the receiver's to check). Only the host exchange sends them, from the
/// owner of `src`.
pub(super) fn rows(
    job: &mut Job,
    f: &mut Pipeline,
    repr: &Repr,
    bytes: &[u8],
) -> Result<(), DropReason> {
    let run = running(job, repr)?;
    let plan = &run.plan;
    if plan.mode.switch_aggregates() || plan.owner[repr.src as usize] != repr.worker {
        return Err(DropReason::NotInPlan);
    }
    if repr.lanes != 0 {
        return Err(DropReason::BadLanes);
    }
    let dst_rank = plan.owner[repr.dst as usize];
    if f.shard.leads() {
        f.forward(dst_rank, bytes);
    }
    Ok(())
}

pub(super) fn fetch(
    job: &mut Job,
    f: &mut Pipeline,
    repr: &Repr,
    bytes: &[u8],
) -> Result<(), DropReason> {
    let run = running(job, repr)?;
    let plan = &run.plan;
    // Only the destination's owner asks for its contributions.
    if plan.owner[repr.dst as usize] != repr.worker {
        return Err(DropReason::NotInPlan);
    }
    let owner = plan.owner[repr.src as usize];
    f.forward(owner, &bytes[..repr.buffer_len()]);
    Ok(())
}

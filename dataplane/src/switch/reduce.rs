//! The switch's half of the all-reduce ([`crate::allreduce`] says how the protocol works):
//! each job that asked for one has its own region of slots, two banks each, so a job's
//! packets can only ever touch its own sums.

use bitvec::vec::BitVec;

use super::counters::DropReason;
use super::output::Pipeline;
use crate::allreduce::{is_after, slot_of, ReduceOp};
use crate::wire::{Packet, PacketType, Repr, MAX_LANES};

/// The most all-reduce slots one job may have: 4096 slots × 2 banks × 256 bytes = 2 MiB.
pub const MAX_SLOTS: u16 = 4096;

/// One bank of one slot: the slice it holds and how far its combination is.
#[derive(Debug, Clone)]
struct Bank {
    /// Stream position of the slice held; `None` before the bank's first use.
    position: Option<u32>,
    op: u8,
    lanes: u8,
    /// Workers whose contribution is in.
    seen: BitVec,
    count: u16,
    /// A lane left int32: the result is an overflow notice.
    overflow: bool,
    values: [i32; MAX_LANES],
}

/// A job's all-reduce region.
#[derive(Debug)]
pub(super) struct ReduceRegion {
    slots: u16,
    workers: u16,
    /// Bank `b` of slot `s` at `2·s + b`.
    banks: Vec<Bank>,
    /// A sum that can never complete: (its position, a worker already past it).
    lost: Option<(u32, u16)>,
}

impl ReduceRegion {
    pub(super) fn new(slots: u16, workers: u16) -> ReduceRegion {
        let bank = Bank {
            position: None,
            op: 0,
            lanes: 0,
            seen: BitVec::repeat(false, usize::from(workers)),
            count: 0,
            overflow: false,
            values: [0; MAX_LANES],
        };
        ReduceRegion {
            slots,
            workers,
            banks: vec![bank; 2 * usize::from(slots)],
            lost: None,
        }
    }

    pub(super) fn slots(&self) -> u16 {
        self.slots
    }

    /// A sum that can never complete, if the region holds one: its position and a worker
    /// already past it.
    pub(super) fn lost(&self) -> Option<(u32, u16)> {
        self.lost
    }
}

/// A worker's slice (`repr`, `packet`) arriving for `region`.
pub(super) fn reduce(
    region: &mut ReduceRegion,
    f: &mut Pipeline,
    repr: &Repr,
    packet: &Packet<&[u8]>,
) -> Result<(), DropReason> {
    // The P4 program checks a slice on its first pass and counts and adds it on the next, where
    // its region's checks run too: every slice that reaches its region makes that pass.
    f.counters.check_passes += 1;
    let (slot, bank) = slot_of(repr.sequence, region.slots);
    // The slot and bank fields are what a P4 pipeline indexes its registers with: they must be
    // the ones the position says.
    if repr.block != slot || repr.chunk != bank || ReduceOp::from_code(repr.layer).is_none() {
        return Err(DropReason::OutOfRange);
    }
    let lanes = usize::from(repr.lanes);
    if lanes == 0 {
        return Err(DropReason::BadLanes);
    }
    let workers = region.workers;
    let index = 2 * usize::from(slot) + usize::from(bank);
    let b = &mut region.banks[index];
    match b.position {
        Some(p) if p == repr.sequence => {
            if b.op != repr.layer || b.lanes != repr.lanes {
                return Err(DropReason::BadLanes);
            }
        }
        Some(p) if !is_after(repr.sequence, p) => return Err(DropReason::Stale),
        // The bank's next use is two passes over the slots later, and only once its sum is
        // complete (a worker moves on only after every worker had the result). Anything
        // further ahead is no slice a worker can send: it must not wipe a sum in progress.
        Some(p)
            if repr.sequence != p.wrapping_add(2 * u32::from(region.slots))
                || b.count != workers =>
        {
            return Err(DropReason::OutOfRange)
        }
        // A new use of the bank: every worker has the result it held (see the module notes).
        _ => {
            b.position = Some(repr.sequence);
            b.op = repr.layer;
            b.lanes = repr.lanes;
            b.seen.fill(false);
            b.count = 0;
            b.overflow = false;
        }
    }
    let w = usize::from(repr.worker);
    if b.seen[w] {
        if b.count == workers {
            // The result was lost on the way to this worker: send it again, to it alone.
            f.counters.reduce_replays += 1;
            send_result(f, b, repr, repr.worker);
            return Ok(());
        }
        // A worker waiting for this sum asks again. A worker missing from it that already
        // sent the slot's next slice (in the other bank) had this one's result — from a switch
        // that has since lost its state (a restart): the sum can never complete, and the job
        // must be told rather than wait.
        let p = repr.sequence;
        let other = &region.banks[index ^ 1];
        if other.position == Some(p.wrapping_add(u32::from(region.slots))) {
            let b = &region.banks[index];
            if let Some(m) = b.seen.iter_zeros().find(|&m| other.seen[m]) {
                region.lost.get_or_insert((p, m as u16));
            }
        }
        return Err(DropReason::Duplicate);
    }
    let mut values = [0i32; MAX_LANES];
    packet.lanes_into(&mut values[..lanes]);
    let acc = &mut b.values[..lanes];
    if b.count == 0 {
        acc.copy_from_slice(&values[..lanes]);
    } else if !b.overflow {
        match ReduceOp::from_code(b.op) {
            Some(ReduceOp::Max) => {
                for (a, v) in acc.iter_mut().zip(&values[..lanes]) {
                    *a = (*a).max(*v);
                }
            }
            _ => b.overflow = !crate::fixed::checked_add_lanes(acc, &values[..lanes]),
        }
    }
    b.seen.set(w, true);
    b.count += 1;
    f.counters.reduce_lane_updates += lanes as u64;
    if b.count == workers {
        f.counters.reduce_slices += 1;
        if b.overflow {
            f.counters.overflows += 1;
        }
        for to in 0..workers {
            send_result(f, b, repr, to);
        }
    }
    Ok(())
}

/// The bank's result (or its overflow notice) for worker `to`.
fn send_result(f: &mut Pipeline, b: &Bank, repr: &Repr, to: u16) {
    let mut r = *repr;
    r.packet_type = PacketType::Reduced;
    r.worker = to;
    r.count = b.count;
    r.flags.fetch = b.overflow;
    let lanes = if b.overflow {
        r.lanes = 0;
        &[][..]
    } else {
        &b.values[..usize::from(b.lanes)]
    };
    f.send(to, &r, lanes);
}

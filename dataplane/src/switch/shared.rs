//! ATP's best-effort all-reduce: jobs without a region of their own share one pool of slots.
//! A slice's slot is found by hashing (job, stream position); whatever the pool cannot take
//! falls back to the host — the switch's parameter server ([`HostReducer`]), which finishes
//! the sum exactly.
//!
//! - **In the pool**: a contribution claims its slice's slot when the slot is free, or adds
//!   to it when the slot holds the same (job, position) and does not have this worker's yet
//!   (a repeat is dropped; the bitmap sees to that). The last contribution multicasts the
//!   result and frees the slot at once; the host keeps a copy of the result so that a worker
//!   that lost it can be answered.
//! - **Collision**: the slot holds another slice. The contribution goes to the host as it is
//!   (a fallback), unless the slot's holder has made no progress for the leak timeout: then
//!   its partial sum (with the bitmap of who is in it) is handed to the host and the slot is
//!   taken (a leak reclaimed, ATP's timeout).
//! - **Sticky**: once the host holds any part of a slice, every later contribution to it goes
//!   to the host too (on a Tofino: an exact-match entry the host installs). So a slice is
//!   never split between a slot and the host for long — the rest of its contributions follow
//!   its first fallback, no retransmission needed — and a slice has at most one slot's worth
//!   of partial sum, so the host's parts never double-count.
//! - **The host** keeps per slice disjoint parts, each a sum with the bitmap of its workers,
//!   and takes only a part none of whose workers it holds yet (anything else repeats a
//!   contribution). Sums are integers, so however the parts come in, the result is the same
//!   bits as the dedicated region's. When every worker is covered the host multicasts the
//!   result.
//! - **Forgetting**: a worker sends position `q` only once it has the result of `q − window`
//!   (the same slot's previous slice), which every worker contributed to after having the
//!   result of `q − 2·window`; so seeing `q` forgets slice `q − 2·window`, and a slice two
//!   windows behind the newest of its slot is stale. (Slots move on independently: one slot
//!   may be far ahead of another whose slice is still waiting.)

use std::collections::BTreeMap;

use bitvec::vec::BitVec;

use super::counters::DropReason;
use super::output::Pipeline;
use crate::allreduce::{is_after, ReduceOp};
use crate::wire::{Packet, PacketType, Repr, MAX_LANES};
use crate::Nanos;

/// The most slots the shared pool may have (2 MiB of 256-byte slots).
pub const MAX_POOL_SLOTS: u32 = 8192;

/// What a slice's combination holds: its op, width and lanes, or that a lane left int32.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sum {
    op: u8,
    lanes: u8,
    overflow: bool,
    values: [i64; MAX_LANES],
}

impl Sum {
    fn of(op: u8, lanes: &[i32]) -> Sum {
        let mut values = [0i64; MAX_LANES];
        for (v, &x) in values.iter_mut().zip(lanes) {
            *v = i64::from(x);
        }
        Sum {
            op,
            lanes: lanes.len() as u8,
            overflow: false,
            values,
        }
    }

    /// Combine `other` into this one (in `i64`: a sum of int32 parts cannot leave it).
    fn add(&mut self, other: &Sum) {
        self.overflow |= other.overflow;
        let n = usize::from(self.lanes);
        for (a, b) in self.values[..n].iter_mut().zip(&other.values[..n]) {
            *a = match ReduceOp::from_code(self.op) {
                Some(ReduceOp::Max) => (*a).max(*b),
                _ => *a + *b,
            };
        }
        self.overflow |= self.values[..n].iter().any(|&v| i32::try_from(v).is_err());
    }
}

/// One slot of the shared pool.
#[derive(Debug, Clone)]
struct PoolSlot {
    /// The (job, position) it holds; `None` when free.
    owner: Option<(u16, u32)>,
    seen: BitVec,
    count: u16,
    sum: Sum,
    /// When a contribution last came in: the leak timeout runs from it.
    touched: Nanos,
}

/// The pool of slots best-effort jobs share.
#[derive(Debug)]
pub(super) struct SharedPool {
    slots: Vec<PoolSlot>,
    /// A slot whose holder has not progressed for this long may be taken by another slice.
    leak: Nanos,
}

impl SharedPool {
    pub(super) fn new(slots: u32, leak: Nanos) -> SharedPool {
        let slot = PoolSlot {
            owner: None,
            seen: BitVec::new(),
            count: 0,
            sum: Sum::of(0, &[]),
            touched: 0,
        };
        SharedPool {
            slots: vec![slot; slots as usize],
            leak,
        }
    }

    pub(super) fn slots(&self) -> u32 {
        self.slots.len() as u32
    }

    /// The slot of (job, position): a multiplicative hash, as a pipeline's hash unit would
    /// spread them.
    fn index(&self, job: u16, position: u32) -> usize {
        let key = (u64::from(job) << 32) | u64::from(position);
        let h = key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
        (h % self.slots.len() as u64) as usize
    }

    /// Free the slot of (job, position) if it still holds that slice.
    fn release(&mut self, job: u16, position: u32) {
        let i = self.index(job, position);
        if self.slots[i].owner == Some((job, position)) {
            self.slots[i].owner = None;
        }
    }
}

/// One slice at the host: its disjoint parts, or its result once complete.
#[derive(Debug)]
struct HostSlice {
    covered: BitVec,
    /// Parts held: each its workers and their sum.
    parts: Vec<(BitVec, Sum)>,
    /// The whole sum, once every worker is covered.
    result: Option<Sum>,
}

/// A best-effort job at the host.
#[derive(Debug)]
struct HostJob {
    workers: u16,
    /// The switch port of its worker 0.
    first_port: u16,
    /// Slices a worker keeps in flight (the window its welcome advertised).
    window: u16,
    /// Per slot (position modulo the window): the newest position seen from any worker.
    newest: Vec<Option<u32>>,
    slices: BTreeMap<u32, HostSlice>,
}

impl HostJob {
    fn slot(&self, position: u32) -> usize {
        (position % u32::from(self.window)) as usize
    }

    /// Whether every worker has had the result of `position`: a position two windows later
    /// in its slot has been seen.
    fn is_stale(&self, position: u32) -> bool {
        self.newest[self.slot(position)]
            .is_some_and(|n| !is_after(position.wrapping_add(2 * u32::from(self.window)), n))
    }

    /// `position` was seen: move its slot's newest on and forget the slice every worker has.
    fn note(&mut self, position: u32) {
        let slot = self.slot(position);
        if self.newest[slot].is_none_or(|n| is_after(position, n)) {
            self.newest[slot] = Some(position);
            let done = position.wrapping_sub(2 * u32::from(self.window));
            self.slices.remove(&done);
        }
    }
}

/// The switch's parameter server: finishes the best-effort slices the pool could not.
#[derive(Debug, Default)]
pub(super) struct HostReducer {
    jobs: BTreeMap<u16, HostJob>,
}

impl HostReducer {
    pub(super) fn add_job(&mut self, job: u16, workers: u16, first_port: u16, window: u16) {
        self.jobs.insert(
            job,
            HostJob {
                workers,
                first_port,
                window,
                newest: vec![None; usize::from(window)],
                slices: BTreeMap::new(),
            },
        );
    }

    /// Add a part (workers `seen`, their `sum`) of `job`'s slice at `position`; the whole sum
    /// if this completes it. Only a part none of whose workers is in yet is taken: anything
    /// else repeats a contribution the host holds. (A slice's one pool partial reaches the
    /// host before any other part of it — later contributions follow it there — so parts
    /// never overlap in part; were one to, the workers it alone holds would be asked again by
    /// their own retransmissions, which come one worker at a time.)
    fn add_part(&mut self, job: u16, position: u32, seen: &BitVec, sum: &Sum) -> Option<Sum> {
        let j = self.jobs.get_mut(&job)?;
        if j.is_stale(position) {
            return None;
        }
        let workers = usize::from(j.workers);
        let slice = j.slices.entry(position).or_insert_with(|| HostSlice {
            covered: BitVec::repeat(false, workers),
            parts: Vec::new(),
            result: None,
        });
        if slice.result.is_some() || seen.iter_ones().any(|w| slice.covered[w]) {
            return None;
        }
        slice.parts.push((seen.clone(), *sum));
        for w in seen.iter_ones() {
            slice.covered.set(w, true);
        }
        if slice.covered.all() {
            let (_, first) = slice.parts[0].clone();
            let mut total = first;
            for (_, s) in &slice.parts[1..] {
                total.add(s);
            }
            slice.parts.clear();
            slice.result = Some(total);
            return Some(total);
        }
        None
    }

    /// Keep the result the pool completed, to answer a worker that lost it.
    fn store(&mut self, job: u16, position: u32, sum: &Sum) {
        let Some(j) = self.jobs.get_mut(&job) else {
            return;
        };
        let workers = usize::from(j.workers);
        let slice = j.slices.entry(position).or_insert_with(|| HostSlice {
            covered: BitVec::repeat(true, workers),
            parts: Vec::new(),
            result: None,
        });
        slice.covered.fill(true);
        slice.parts.clear();
        slice.result = Some(*sum);
    }

    fn slice(&self, job: u16, position: u32) -> Option<&HostSlice> {
        self.jobs.get(&job)?.slices.get(&position)
    }

    /// The job's window (slices each worker keeps in flight), if it is a best-effort job.
    pub(super) fn window(&self, job: u16) -> Option<u16> {
        Some(self.jobs.get(&job)?.window)
    }
}

/// A best-effort job's slice (`repr`, `packet`) from worker `repr.worker` of `workers`.
#[allow(clippy::too_many_arguments)]
pub(super) fn reduce(
    pool: &mut SharedPool,
    host: &mut HostReducer,
    f: &mut Pipeline,
    workers: u16,
    now: Nanos,
    repr: &Repr,
    packet: &Packet<&[u8]>,
) -> Result<(), DropReason> {
    let lanes = usize::from(repr.lanes);
    if lanes == 0 {
        return Err(DropReason::BadLanes);
    }
    if ReduceOp::from_code(repr.layer).is_none() {
        return Err(DropReason::OutOfRange);
    }
    let (job, position, w) = (repr.job, repr.sequence, usize::from(repr.worker));
    let j = host.jobs.get_mut(&job).ok_or(DropReason::NoAllReduce)?;
    if j.is_stale(position) {
        return Err(DropReason::Stale);
    }
    j.note(position);
    let mut values = [0i32; MAX_LANES];
    packet.lanes_into(&mut values[..lanes]);
    let mine = Sum::of(repr.layer, &values[..lanes]);
    let alone = || {
        let mut seen = BitVec::repeat(false, usize::from(workers));
        seen.set(w, true);
        seen
    };
    if let Some(slice) = host.slice(job, position) {
        let Some(result) = &slice.result else {
            // The host holds part of this slice: the rest goes there too.
            f.counters.reduce_host_packets += 1;
            let seen = alone();
            return to_host(host, pool, f, workers, repr, &seen, &mine);
        };
        // The result was lost on the way to this worker: again, to it alone.
        if result.op != repr.layer || result.lanes != repr.lanes {
            return Err(DropReason::BadLanes);
        }
        f.counters.reduce_replays += 1;
        send_result(f, result, repr, repr.worker, workers);
        return Ok(());
    }
    let i = pool.index(job, position);
    let leak = pool.leak;
    let slot = &mut pool.slots[i];
    match slot.owner {
        Some(o) if o == (job, position) => {
            if slot.sum.op != repr.layer || slot.sum.lanes != repr.lanes {
                return Err(DropReason::BadLanes);
            }
            if slot.seen[w] {
                return Err(DropReason::Duplicate);
            }
            slot.sum.add(&mine);
            slot.seen.set(w, true);
            slot.count += 1;
            slot.touched = now;
        }
        Some(_) if now.saturating_sub(slot.touched) < leak => {
            // Taken by another slice that is still moving: this contribution goes to the host.
            f.counters.reduce_collisions += 1;
            f.counters.reduce_host_packets += 1;
            return to_host(host, pool, f, workers, repr, &alone(), &mine);
        }
        held => {
            if let Some((other_job, other_position)) = held {
                // A leak: the holder has stalled. Its partial sum goes to the host.
                f.counters.reduce_leaks += 1;
                let (seen, sum) = (slot.seen.clone(), slot.sum);
                slot.owner = None;
                if let Some(total) = host.add_part(other_job, other_position, &seen, &sum) {
                    finish_at_host(host, f, other_job, other_position, &total);
                }
            }
            let slot = &mut pool.slots[i];
            slot.owner = Some((job, position));
            slot.seen = alone();
            slot.count = 1;
            slot.sum = mine;
            slot.touched = now;
        }
    }
    f.counters.reduce_lane_updates += lanes as u64;
    let slot = &mut pool.slots[i];
    if slot.count == workers {
        slot.owner = None;
        let total = slot.sum;
        f.counters.reduce_slices += 1;
        if total.overflow {
            f.counters.overflows += 1;
        }
        host.store(job, position, &total);
        for to in 0..workers {
            send_result(f, &total, repr, to, workers);
        }
    }
    Ok(())
}

/// Hand a part to the host; multicast the result if that completes the slice.
fn to_host(
    host: &mut HostReducer,
    pool: &mut SharedPool,
    f: &mut Pipeline,
    workers: u16,
    repr: &Repr,
    seen: &BitVec,
    sum: &Sum,
) -> Result<(), DropReason> {
    match host.add_part(repr.job, repr.sequence, seen, sum) {
        Some(total) => {
            // A pool slot still holding part of this slice has nothing left to do.
            pool.release(repr.job, repr.sequence);
            f.counters.reduce_host_slices += 1;
            if total.overflow {
                f.counters.overflows += 1;
            }
            for to in 0..workers {
                send_result(f, &total, repr, to, workers);
            }
            Ok(())
        }
        None => Ok(()),
    }
}

/// A leaked partial completed a slice of another job (`job`, `position`) at the host: its
/// result goes to that job's workers, on that job's ports.
fn finish_at_host(host: &HostReducer, f: &mut Pipeline, job: u16, position: u32, total: &Sum) {
    let Some(j) = host.jobs.get(&job) else {
        return;
    };
    f.counters.reduce_host_slices += 1;
    if total.overflow {
        f.counters.overflows += 1;
    }
    let (slot, bank) = crate::allreduce::slot_of(position, j.window);
    let r = Repr {
        packet_type: PacketType::Reduced,
        flags: Default::default(),
        layer: total.op,
        job,
        src: 0,
        dst: 0,
        block: slot,
        count: j.workers,
        worker: 0,
        chunk: bank,
        lanes: total.lanes,
        epoch: 0,
        sequence: position,
    };
    let current = std::mem::replace(&mut f.first_port, j.first_port);
    for to in 0..j.workers {
        send_result(f, total, &r, to, j.workers);
    }
    f.first_port = current;
}

/// The result `sum` (or its overflow notice) of `repr`'s slice for worker `to`.
fn send_result(f: &mut Pipeline, sum: &Sum, repr: &Repr, to: u16, workers: u16) {
    let mut r = *repr;
    r.packet_type = PacketType::Reduced;
    r.flags = Default::default();
    r.worker = to;
    r.count = workers;
    r.flags.fetch = sum.overflow;
    let mut lanes = [0i32; MAX_LANES];
    let n = if sum.overflow {
        0
    } else {
        usize::from(sum.lanes)
    };
    r.lanes = n as u8;
    for (l, &v) in lanes.iter_mut().zip(&sum.values[..n]) {
        *l = v as i32;
    }
    f.send(to, &r, &lanes[..n]);
}

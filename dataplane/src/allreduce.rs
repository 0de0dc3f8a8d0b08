//! The gradient all-reduce in the switch, after SwitchML: the worker's half ([`AllReduceEngine`])
//! and what both halves share. The switch's half is in [`crate::switch`].
//!
//! A job owns `slots` aggregators of 64 int32 lanes for all-reduce, each in two banks. Every
//! all-reduce the job runs is cut into 64-lane slices, and the slices of all its operations,
//! one after another, form the job's **stream**: slice `i` of an operation that starts at
//! stream position `p` is at position `p + i`. The position alone fixes where a slice goes:
//! slot `position % slots`, bank `(position / slots) % 2` ([`slot_of`]). Every worker runs the
//! same operations in the same order, so they agree on positions without talking.
//!
//! - **Self-clocking**: a worker starts with the first `slots` slices in flight and sends slice
//!   `i + slots` only when slice `i`'s result arrives; the pool is the window.
//! - **Two banks**: slice `i + slots` lands in the other bank of `i`'s slot, so `i`'s result
//!   stays in the switch until every worker has it — a worker can only send `i + 2·slots`
//!   (which reuses the bank) after `i + slots` completed, which needs every worker's
//!   contribution to it, which each sent only after receiving `i`'s result.
//! - **Exactly once**: each bank keeps the position it holds, a bitmap of the workers that
//!   contributed and their count. A retransmission of a counted slice is not added again; once
//!   the slice is complete, it gets the stored result back (unicast). A slice older than the
//!   bank's is stale and dropped; a bank takes a new slice only at its next use (two passes
//!   over the slots later) and once complete, so nothing further ahead can wipe a sum in
//!   progress. The bank's position is what SwitchML's one-bit version says,
//!   made explicit so that a copy delayed by more than a round trip cannot be mistaken.
//! - **Timeouts**: a slice without a result after `rto` is sent again; nothing else recovers
//!   loss (results are multicast; a worker that missed one asks again by retransmitting).
//!
//! Values are int32 lanes: a sum of fixed-point values whose scale the workers agreed on (the
//! sum of `n` values each within `2³¹/n` cannot overflow; a lane that would is reported, not
//! wrapped), or a maximum of [`order_key`]s, which order like the floats they encode. Integer
//! sums and maxima are exact and order-independent, so every worker receives bit-identical
//! results, equal to the rank-ordered combination of the inputs.

use std::collections::VecDeque;

use bitvec::vec::BitVec;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::engine::RttEstimator;
use crate::node::{Address, HostNode, Nanos, Node, Operation, Transmit};
use crate::wire::{Flags, Packet, PacketType, Repr, MAX_LANES};

/// How the values of an all-reduce combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ReduceOp {
    /// Elementwise sum.
    Sum,
    /// Elementwise maximum.
    Max,
}

impl ReduceOp {
    /// The code on the wire (the header's layer field, the collective service's op byte).
    pub fn code(self) -> u8 {
        match self {
            ReduceOp::Sum => 0,
            ReduceOp::Max => 1,
        }
    }

    /// The operation with wire code `c`, if there is one.
    pub fn from_code(c: u8) -> Option<ReduceOp> {
        match c {
            0 => Some(ReduceOp::Sum),
            1 => Some(ReduceOp::Max),
            _ => None,
        }
    }
}

/// The slot and bank of stream position `position` in a pool of `slots` slots.
pub fn slot_of(position: u32, slots: u16) -> (u16, u8) {
    let slots = u32::from(slots.max(1));
    ((position % slots) as u16, ((position / slots) % 2) as u8)
}

/// An int32 that orders like the float `x` (the IEEE-754 bit pattern, with negative numbers'
/// magnitude bits flipped), so that the switch's integer maximum is the floats' maximum.
/// NaN is not a number to order: it maps to whatever its bits say.
pub fn order_key(x: f32) -> i32 {
    let bits = x.to_bits() as i32;
    if bits < 0 {
        bits ^ i32::MAX
    } else {
        bits
    }
}

/// The float whose [`order_key`] is `key`.
pub fn from_order_key(key: i32) -> f32 {
    let bits = if key < 0 { key ^ i32::MAX } else { key };
    f32::from_bits(bits as u32)
}

/// Whether stream position `a` comes after `b` (serial-number order: the stream may wrap).
pub fn is_after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

/// One worker's all-reduce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllReduceConfig {
    /// The job.
    pub job: u16,
    /// This worker's rank.
    pub rank: u16,
    /// Slots the job has in the switch (the window).
    pub slots: u16,
    /// How the values combine.
    pub op: ReduceOp,
    /// The operation's number in the job (diagnostics: the header's epoch field).
    pub operation: u32,
    /// The stream position of the operation's first slice.
    pub start: u32,
    /// A slice without a result after this long is sent again, at least: the engine measures
    /// round trips and waits longer when they are (a software switch with thousands of
    /// slices queued ahead of a new one takes milliseconds to reach it).
    pub rto: Nanos,
}

impl AllReduceConfig {
    /// Slices `values` values take.
    pub fn slices(values: usize) -> u32 {
        values.div_ceil(MAX_LANES) as u32
    }
}

/// Why an all-reduce failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum AllReduceError {
    /// A sum left int32: the scale the workers agreed on does not cover some worker's values.
    #[error("slice {slice} of the all-reduce overflowed int32 in the switch")]
    Overflow {
        /// The slice.
        slice: u32,
    },
}

/// A worker's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllReduceStats {
    /// Slices of the operation.
    pub slices: u64,
    /// Slice packets sent, retransmissions included.
    pub sent: u64,
    /// Slices sent again after a timeout.
    pub retransmits: u64,
    /// Results received for slices still missing one.
    pub results: u64,
    /// Results for slices that had one already (a replay after a retransmission).
    pub duplicate_results: u64,
    /// Packets that were not a result of this operation for this worker.
    pub ignored: u64,
    /// Bytes of the slices sent (headers included).
    pub bytes_sent: u64,
    /// Bytes of the results taken (headers included).
    pub bytes_received: u64,
}

/// One worker's part in an all-reduce, as a sans-IO state machine.
#[derive(Debug)]
pub struct AllReduceEngine {
    cfg: AllReduceConfig,
    /// The inputs, each slice overwritten by its result when that arrives: a slice with a
    /// result is never sent again, so the values need no second buffer.
    values: Vec<i32>,
    slices: u32,
    done: BitVec,
    remaining: u32,
    /// Slices to send now: first sends and retransmissions.
    pending: VecDeque<u32>,
    /// (deadline, slice) in the order sent; deadlines only grow.
    deadlines: VecDeque<(Nanos, u32)>,
    /// Per slot: when its current slice was first sent, and whether it was sent again (its
    /// round trip is then ambiguous and not measured: Karn's rule).
    first_sent: Vec<Nanos>,
    sent_slice: Vec<u32>,
    resent: BitVec,
    rtt: RttEstimator,
    /// Timeout multiplier (1, 2, … 64): doubled by every expiry, reset by every measurement.
    backoff: u32,
    failure: Option<AllReduceError>,
    stats: AllReduceStats,
}

impl AllReduceEngine {
    /// Combine `values` (int32 lanes) with every other worker's, in place.
    pub fn new(cfg: AllReduceConfig, values: Vec<i32>) -> AllReduceEngine {
        let slices = AllReduceConfig::slices(values.len());
        let first = slices.min(u32::from(cfg.slots.max(1)));
        AllReduceEngine {
            values,
            slices,
            done: BitVec::repeat(false, slices as usize),
            remaining: slices,
            pending: (0..first).collect(),
            deadlines: VecDeque::new(),
            first_sent: vec![0; usize::from(cfg.slots.max(1))],
            sent_slice: vec![u32::MAX; usize::from(cfg.slots.max(1))],
            resent: BitVec::repeat(false, usize::from(cfg.slots.max(1))),
            rtt: RttEstimator::default(),
            backoff: 1,
            failure: None,
            stats: AllReduceStats {
                slices: u64::from(slices),
                ..AllReduceStats::default()
            },
            cfg,
        }
    }

    /// The combined values (complete once finished; before, or after a failure, the slices
    /// still without a result hold their inputs).
    pub fn output(&self) -> &[i32] {
        &self.values
    }

    /// The combined values, taken: the vector the engine was given, so that a caller can
    /// reuse it for its next operation.
    pub fn into_output(self) -> Vec<i32> {
        self.values
    }

    /// The stream position after this operation: where the next one starts.
    pub fn end(&self) -> u32 {
        self.cfg.start.wrapping_add(self.slices)
    }

    /// The failure that ended the operation, if one did.
    pub fn failure(&self) -> Option<AllReduceError> {
        self.failure
    }

    /// The counters.
    pub fn stats(&self) -> &AllReduceStats {
        &self.stats
    }

    fn lanes_of(&self, slice: u32) -> std::ops::Range<usize> {
        let from = slice as usize * MAX_LANES;
        from..(from + MAX_LANES).min(self.values.len())
    }

    /// The header of slice `slice`'s packet.
    fn header(&self, slice: u32) -> Repr {
        let position = self.cfg.start.wrapping_add(slice);
        let (slot, bank) = slot_of(position, self.cfg.slots);
        Repr {
            packet_type: PacketType::Reduce,
            flags: Flags::default(),
            layer: self.cfg.op.code(),
            job: self.cfg.job,
            src: 0,
            dst: 0,
            block: slot,
            count: 1,
            worker: self.cfg.rank,
            chunk: bank,
            lanes: self.lanes_of(slice).len() as u8,
            epoch: self.cfg.operation,
            sequence: position,
        }
    }

    /// Take a result: the slice it completes, or why it is not one of ours.
    fn accept(&mut self, now: Nanos, bytes: &[u8]) -> Option<()> {
        let packet = Packet::new_checked(bytes).ok()?;
        let r = Repr::parse(&packet).ok()?;
        if r.packet_type != PacketType::Reduced
            || r.job != self.cfg.job
            || r.worker != self.cfg.rank
            || r.layer != self.cfg.op.code()
        {
            return None;
        }
        let slice = r.sequence.wrapping_sub(self.cfg.start);
        if slice >= self.slices {
            return None;
        }
        self.stats.bytes_received += bytes.len() as u64;
        if self.done[slice as usize] {
            self.stats.duplicate_results += 1;
            return Some(());
        }
        if r.flags.fetch {
            // The switch's overflow notice: no sum to take.
            self.failure = Some(AllReduceError::Overflow { slice });
            return Some(());
        }
        if usize::from(r.lanes) != self.lanes_of(slice).len() {
            return None;
        }
        let range = self.lanes_of(slice);
        packet.lanes_into(&mut self.values[range]);
        let slot = (slice % u32::from(self.cfg.slots.max(1))) as usize;
        if !self.resent[slot] {
            self.rtt.sample(now.saturating_sub(self.first_sent[slot]));
            self.backoff = 1;
        }
        self.done.set(slice as usize, true);
        self.remaining -= 1;
        self.stats.results += 1;
        let next = slice + u32::from(self.cfg.slots.max(1));
        if next < self.slices {
            self.pending.push_back(next);
        }
        Some(())
    }
}

impl Node for AllReduceEngine {
    fn handle_packet(&mut self, now: Nanos, _from: Address, bytes: &[u8]) {
        if self.accept(now, bytes).is_none() {
            self.stats.ignored += 1;
        }
    }

    fn handle_timeout(&mut self, now: Nanos) {
        let mut expired = false;
        while let Some(&(deadline, slice)) = self.deadlines.front() {
            if deadline > now {
                break;
            }
            self.deadlines.pop_front();
            if !self.done[slice as usize] && !self.pending.contains(&slice) {
                self.stats.retransmits += 1;
                self.pending.push_back(slice);
                expired = true;
            }
        }
        // Once per expiry, however many slices it sends again.
        if expired {
            self.backoff = (self.backoff * 2).min(64);
        }
    }

    fn poll_transmit(&mut self, now: Nanos, buf: &mut [u8]) -> Option<Transmit> {
        if self.failure.is_some() {
            return None;
        }
        while let Some(slice) = self.pending.pop_front() {
            if self.done[slice as usize] {
                continue;
            }
            let slot = (slice % u32::from(self.cfg.slots.max(1))) as usize;
            let again = self.sent_slice[slot] == slice;
            let r = self.header(slice);
            let range = self.lanes_of(slice);
            let len = r.emit_with_lanes(&self.values[range], buf);
            if again {
                self.resent.set(slot, true);
            } else {
                self.first_sent[slot] = now;
                self.resent.set(slot, false);
                self.sent_slice[slot] = slice;
            }
            let rto = self.rtt.rto(self.cfg.rto.max(1)) * Nanos::from(self.backoff);
            self.deadlines.push_back((now + rto, slice));
            self.stats.sent += 1;
            self.stats.bytes_sent += len as u64;
            return Some(Transmit {
                to: Address::Switch,
                len,
            });
        }
        None
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        if self.is_finished() {
            return None;
        }
        self.deadlines.front().map(|&(d, _)| d)
    }
}

impl HostNode for AllReduceEngine {
    fn is_done(&self) -> bool {
        self.is_finished()
    }
}

impl Operation for AllReduceEngine {
    fn is_finished(&self) -> bool {
        self.remaining == 0 || self.failure.is_some()
    }

    fn progress(&self) -> String {
        format!(
            "all-reduce {}: {} of {} slices combined",
            self.cfg.operation,
            self.slices - self.remaining,
            self.slices
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_keys_order_like_the_floats() {
        let xs = [
            f32::NEG_INFINITY,
            -3.5e30,
            -1.0,
            -1e-30,
            -0.0,
            0.0,
            1e-38,
            0.5,
            1.0,
            7.25e20,
            f32::INFINITY,
        ];
        for w in xs.windows(2) {
            assert!(order_key(w[0]) <= order_key(w[1]), "{} {}", w[0], w[1]);
        }
        for x in xs {
            assert_eq!(from_order_key(order_key(x)).to_bits(), x.to_bits());
        }
    }

    #[test]
    fn positions_alternate_banks_per_pass_over_the_slots() {
        assert_eq!(slot_of(0, 4), (0, 0));
        assert_eq!(slot_of(3, 4), (3, 0));
        assert_eq!(slot_of(4, 4), (0, 1));
        assert_eq!(slot_of(9, 4), (1, 0));
        assert!(is_after(1, 0) && !is_after(0, 1) && is_after(0, u32::MAX));
    }
}

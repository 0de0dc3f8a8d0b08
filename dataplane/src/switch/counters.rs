//! What the switch counts and reports: its packet counters, why it dropped a packet, and
//! where a job stands (what a driver prints when a wait times out).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{readout_passes, readout_passes_at, LANES_READ_PER_PAIR_PASS};
use crate::node::ExchangeId;
use crate::wire::{self, PacketType};

/// Why the switch dropped a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum DropReason {
    /// Shorter than the header.
    Truncated,
    /// Not the switchgnn magic.
    BadMagic,
    /// Unsupported header version.
    BadVersion,
    /// Unknown packet type.
    UnknownType,
    /// Reserved flag bits set.
    ReservedFlags,
    /// More lanes announced than an aggregator holds.
    TooManyLanes,
    /// The announced lanes run past the end of the packet.
    LanesBeyondBuffer,
    /// Ids beyond the exchange's plan.
    OutOfRange,
    /// Unknown job, worker beyond the job, or a worker id that is not its ingress port.
    NotAdmitted,
    /// Packet types only the switch emits.
    WrongDirection,
    /// Not the running exchange or block.
    Stale,
    /// A data packet in host mode.
    WrongMode,
    /// The vertex is not in the running block, or not owned by the sender.
    NotInPlan,
    /// Lane count other than the chunk's.
    BadLanes,
    /// A duplicate data packet (re-acknowledged, not added again), or a repeated all-reduce
    /// slice before its slot is complete.
    Duplicate,
    /// An all-reduce slice for a job that has no all-reduce region.
    NoAllReduce,
}

impl DropReason {
    pub(super) const ALL: [DropReason; 16] = [
        DropReason::Truncated,
        DropReason::BadMagic,
        DropReason::BadVersion,
        DropReason::UnknownType,
        DropReason::ReservedFlags,
        DropReason::TooManyLanes,
        DropReason::LanesBeyondBuffer,
        DropReason::OutOfRange,
        DropReason::NotAdmitted,
        DropReason::WrongDirection,
        DropReason::Stale,
        DropReason::WrongMode,
        DropReason::NotInPlan,
        DropReason::BadLanes,
        DropReason::Duplicate,
        DropReason::NoAllReduce,
    ];

    pub(super) fn of(e: wire::Error) -> DropReason {
        match e {
            wire::Error::Truncated(_) => DropReason::Truncated,
            wire::Error::BadMagic(_) => DropReason::BadMagic,
            wire::Error::BadVersion(_) => DropReason::BadVersion,
            wire::Error::UnknownType(_) => DropReason::UnknownType,
            wire::Error::ReservedFlags(_) => DropReason::ReservedFlags,
            wire::Error::TooManyLanes(_) => DropReason::TooManyLanes,
            wire::Error::LanesBeyondBuffer { .. } => DropReason::LanesBeyondBuffer,
            // The switch reads no records (it forwards them whole); a receiver would.
            wire::Error::BadRecords { .. } => DropReason::LanesBeyondBuffer,
            wire::Error::OutOfRange { .. } => DropReason::OutOfRange,
        }
    }
}

/// Counters for everything the switch does.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwitchCounters {
    /// Packets received.
    pub packets_in: u64,
    /// Bytes received.
    pub bytes_in: u64,
    /// Packets processed (every other packet in is a counted drop).
    pub accepted: u64,
    /// Packets sent.
    pub packets_out: u64,
    /// Bytes sent.
    pub bytes_out: u64,
    /// Valid packets in, by [`PacketType`] (index = type code).
    pub in_by_type: [u64; PacketType::CODES],
    /// Packets out, by type.
    pub out_by_type: [u64; PacketType::CODES],
    /// Aggregator passes (recirculations on Tofino).
    pub passes: u64,
    /// First passes that only check: the P4 program runs a packet's checks, its seen word and
    /// its acknowledgement on its first pass and sends it around again before it aggregates
    /// (data, a resend's release, an all-reduce slice), as the chip's stages do not hold both
    /// in one pass (p4/README.md). Counted with the passes that follow it; a packet that ends
    /// on its first pass (a duplicate, a forward) makes only that pass, its arrival.
    #[serde(default)]
    pub check_passes: u64,
    /// Passes a Tofino makes to read finished sums back out of its registers
    /// ([`readout_passes`] per result chunk), counted for the chip's pass budget.
    pub readout_passes: u64,
    /// The same sums' readout passes on a chip that reads both words of a pair register in
    /// one pass ([`LANES_READ_PER_PAIR_PASS`]): what a Tofino 2 program would need.
    pub pair_readout_passes: u64,
    /// Lanes added into aggregators.
    pub lane_updates: u64,
    /// Aggregators that completed and sent their sum.
    pub aggregations: u64,
    /// Contributions sent raw to the destination's host (no free aggregator, or released).
    pub raw_forwarded: u64,
    /// Aggregators released by a lane overflow.
    pub overflows: u64,
    /// Aggregators released by a resend.
    pub releases: u64,
    /// Acknowledgements of data packets sent (duplicates re-acknowledged included).
    pub acks: u64,
    /// ECN marks: packets marked towards a congested egress queue, and acks echoing one.
    pub ecn_marks: u64,
    /// Blocks whose barrier completed.
    pub blocks_completed: u64,
    /// Exchanges that ran past their last block.
    pub exchanges_completed: u64,
    /// Most aggregators in use at once.
    pub peak_aggregators: u64,
    /// All-reduce slices that every worker contributed to.
    pub reduce_slices: u64,
    /// Lanes combined into all-reduce slots.
    pub reduce_lane_updates: u64,
    /// All-reduce results sent again to a worker that repeated its slice.
    pub reduce_replays: u64,
    /// Best-effort all-reduce: contributions whose shared slot held another slice, sent to
    /// the host instead (ATP's collisions).
    #[serde(default)]
    pub reduce_collisions: u64,
    /// Best-effort all-reduce: contributions the host took (collisions, and every later
    /// contribution to a slice the host holds part of).
    #[serde(default)]
    pub reduce_host_packets: u64,
    /// Best-effort all-reduce: slices the host completed (the fallbacks that mattered).
    #[serde(default)]
    pub reduce_host_slices: u64,
    /// Best-effort all-reduce: shared slots taken from a stalled holder after the leak
    /// timeout, its partial sum handed to the host.
    #[serde(default)]
    pub reduce_leaks: u64,
    /// The largest packet received, bytes.
    #[serde(default)]
    pub largest_in: u64,
    /// Drops by [`DropReason`] (index = position in the reason list).
    pub(super) drops: [u64; 16],
}

impl SwitchCounters {
    /// A finished sum of `lanes` lanes read out of the registers, on both kinds of chip.
    pub(super) fn count_readout(&mut self, lanes: usize, in_place: bool) {
        self.readout_passes += readout_passes(lanes, in_place);
        self.pair_readout_passes += readout_passes_at(lanes, in_place, LANES_READ_PER_PAIR_PASS);
    }

    /// Packets dropped for `reason`.
    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.drops[reason as usize]
    }

    /// The non-zero drop counts, by reason.
    pub fn drops(&self) -> BTreeMap<DropReason, u64> {
        DropReason::ALL
            .iter()
            .map(|&r| (r, self.drops[r as usize]))
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    /// Packets dropped, for any reason.
    pub fn total_drops(&self) -> u64 {
        self.drops.iter().sum()
    }

    /// Valid packets of type `t` received.
    pub fn received(&self, t: PacketType) -> u64 {
        self.in_by_type[t as usize]
    }

    /// Packets of type `t` sent.
    pub fn sent(&self, t: PacketType) -> u64 {
        self.out_by_type[t as usize]
    }
}

/// Two switches' counters added up, field by field (the peak too: an upper bound of the
/// fabric's).
impl std::ops::AddAssign<&SwitchCounters> for SwitchCounters {
    fn add_assign(&mut self, o: &SwitchCounters) {
        let add = |a: &mut [u64], b: &[u64]| a.iter_mut().zip(b).for_each(|(a, b)| *a += b);
        add(&mut self.in_by_type, &o.in_by_type);
        add(&mut self.out_by_type, &o.out_by_type);
        add(&mut self.drops, &o.drops);
        for (a, b) in [
            (&mut self.packets_in, o.packets_in),
            (&mut self.bytes_in, o.bytes_in),
            (&mut self.accepted, o.accepted),
            (&mut self.packets_out, o.packets_out),
            (&mut self.bytes_out, o.bytes_out),
            (&mut self.passes, o.passes),
            (&mut self.check_passes, o.check_passes),
            (&mut self.readout_passes, o.readout_passes),
            (&mut self.pair_readout_passes, o.pair_readout_passes),
            (&mut self.lane_updates, o.lane_updates),
            (&mut self.aggregations, o.aggregations),
            (&mut self.raw_forwarded, o.raw_forwarded),
            (&mut self.overflows, o.overflows),
            (&mut self.releases, o.releases),
            (&mut self.acks, o.acks),
            (&mut self.ecn_marks, o.ecn_marks),
            (&mut self.blocks_completed, o.blocks_completed),
            (&mut self.exchanges_completed, o.exchanges_completed),
            (&mut self.peak_aggregators, o.peak_aggregators),
            (&mut self.reduce_slices, o.reduce_slices),
            (&mut self.reduce_lane_updates, o.reduce_lane_updates),
            (&mut self.reduce_replays, o.reduce_replays),
            (&mut self.reduce_collisions, o.reduce_collisions),
            (&mut self.reduce_host_packets, o.reduce_host_packets),
            (&mut self.reduce_host_slices, o.reduce_host_slices),
            (&mut self.reduce_leaks, o.reduce_leaks),
        ] {
            *a += b;
        }
        self.largest_in = self.largest_in.max(o.largest_in);
    }
}

/// A job's progress, for diagnostics.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobStatus {
    /// The job id.
    pub job: u16,
    /// Workers in the job.
    pub workers: u16,
    /// The current (or last) exchange; `None` before the first join.
    pub exchange: Option<ExchangeId>,
    /// The current exchange's sequence number in the job (0 before the first join).
    pub seq: u32,
    /// Whether every worker has joined the current exchange.
    pub started: bool,
    /// The running block; equal to `blocks` once the exchange is finished.
    pub block: u16,
    /// Blocks in the current exchange's plan.
    pub blocks: u16,
    /// Whether the current exchange has run past its last block.
    pub finished: bool,
    /// Workers the running barrier waits for: those that have not joined (before the start)
    /// or not reported the running block done.
    pub waiting_for: Vec<u16>,
}

/// `exchange 3 (layer 0 forward), block 3 of 9, waiting for workers [2] to finish it`: where
/// the job stands, for status lines and errors. The packets' epoch field is named only where it
/// differs from the sequence number: workers over the transport tag each exchange with its
/// sequence number (a trainer's epoch has several exchanges, so calling that count an epoch
/// would mislead; the Python buffer names the trainer's epoch itself).
impl std::fmt::Display for JobStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Some(id) = self.exchange else {
            return f.write_str("no exchange started yet");
        };
        let dir = if id.backward { "backward" } else { "forward" };
        write!(f, "exchange {} (", self.seq)?;
        if id.epoch != self.seq {
            write!(f, "epoch field {}, ", id.epoch)?;
        }
        write!(f, "layer {} {dir})", id.layer)?;
        if self.finished {
            return f.write_str(" complete");
        }
        if !self.started {
            return write!(f, ", waiting for workers {:?} to join", self.waiting_for);
        }
        write!(
            f,
            ", block {} of {}, waiting for workers {:?} to finish it",
            self.block, self.blocks, self.waiting_for
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(epoch: u32, seq: u32) -> JobStatus {
        JobStatus {
            job: 1,
            workers: 4,
            exchange: Some(ExchangeId {
                job: 1,
                epoch,
                layer: 1,
                backward: true,
            }),
            seq,
            started: true,
            block: 3,
            blocks: 9,
            finished: false,
            waiting_for: vec![2],
        }
    }

    #[test]
    fn the_exchange_count_is_not_called_an_epoch() {
        assert_eq!(
            status(27, 27).to_string(),
            "exchange 27 (layer 1 backward), block 3 of 9, waiting for workers [2] to finish it"
        );
        assert_eq!(
            status(5, 27).to_string(),
            "exchange 27 (epoch field 5, layer 1 backward), block 3 of 9, waiting for workers \
             [2] to finish it"
        );
    }
}

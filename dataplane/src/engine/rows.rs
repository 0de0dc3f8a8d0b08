//! The host exchange's packed copies ([`PacketType::Rows`](crate::wire::PacketType::Rows)):
//! how a sender lays a block's copies out in packets of the MTU, one receiving worker each, and
//! how a receiver acknowledges them — one ack of ranges for every few packets from a sender,
//! or at once at a gap or a duplicate, as QUIC's ACK frames do.

use bitvec::slice::BitSlice;
use bitvec::vec::BitVec;

use crate::framing::HostFraming;
use crate::node::Nanos;
use crate::plan::ExchangePlan;
use crate::wire::{record_len, ACK_RANGE_LEN, HEADER_LEN, RECORD_HEADER_LEN};

/// One packed packet of a block: its receiving worker, the vertex of that worker it is
/// addressed to (the switch routes by it) and its records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Packed {
    /// The receiving worker: the path the packet and its ack take.
    pub to: u16,
    /// A vertex the receiver owns (the first record's representative neighbour).
    pub dst: u32,
    /// Its records, `records[start..end]`.
    pub start: u32,
    pub end: u32,
    /// Feature bytes it carries (4 per lane).
    pub payload: u64,
    /// Its number among the packets to its receiver: the sequence on the wire, so that each
    /// receiver sees 0, 1, 2, … and a gap means a loss or a reordering.
    pub nth: u32,
}

/// A block's copies laid out in packets: the reliability layer numbers them by index, the
/// wire by their number per receiver ([`Packed::nth`]). Its buffers are kept from block to
/// block.
#[derive(Debug, Default)]
pub(super) struct Packing {
    pub packets: Vec<Packed>,
    /// (source vertex, chunk) of every record, packet after packet.
    pub records: Vec<(u32, u8)>,
    /// Per record, whether it goes as a zero record (laid out so, built so).
    zeros: BitVec,
    /// Per receiving worker, the packet being filled: its records, bytes and addressee.
    open: Vec<Open>,
    /// Per receiving worker, the indices of its packets in order.
    by_receiver: Vec<Vec<u32>>,
}

#[derive(Debug, Clone, Default)]
struct Open {
    records: Vec<(u32, u8)>,
    zeros: BitVec,
    bytes: usize,
    /// Feature bytes of its records (zero records carry none).
    payload: u64,
    dst: u32,
    /// Pairs waiting for their group to fill ([`crate::framing::row_group`]).
    group: Vec<(u32, u32)>,
}

impl Packing {
    /// Lay out `first` (source, a neighbour on the receiving worker), then `then`, in their
    /// order, as packets of `framing`'s MTU per receiving worker: each pair's chunks go into
    /// its receiver's open packet, and a packet that cannot take the next record is closed —
    /// so packets leave in about the order their first copies were planned. Returns the
    /// number of packets holding records of `first` only (those closed before the first
    /// record of `then`; each later one may mix both). The host two-level exchange's proxies
    /// lay out what must wait for their rack's shares as `then`: packed as one stream per
    /// receiver, as the chip model and the spine count pack it, while every packet before the
    /// split can leave at once. The other strategies have no `then`. A record for which
    /// `zero(vertex, chunk)` holds goes as a zero record ([`crate::wire::RECORD_ZERO`]): a
    /// record header, no lanes.
    pub(crate) fn lay_out_then(
        &mut self,
        plan: &ExchangePlan,
        first: &[(u32, u32)],
        then: &[(u32, u32)],
        framing: HostFraming,
        zero: &mut dyn FnMut(u32, usize) -> bool,
    ) -> usize {
        self.packets.clear();
        self.records.clear();
        self.zeros.clear();
        self.by_receiver
            .resize_with(usize::from(plan.workers), Vec::new);
        self.by_receiver.iter_mut().for_each(Vec::clear);
        let room = framing.record_bytes();
        // Sized once for the block, so that laying out allocates a few times, not per copy.
        let records = (first.len() + then.len()) * plan.chunks();
        self.records.reserve(records);
        self.packets
            .reserve(records.div_ceil(room / record_len(crate::wire::MAX_LANES)) + self.open.len());
        let per_packet = room / record_len(0);
        self.open.resize_with(usize::from(plan.workers), || Open {
            records: Vec::with_capacity(per_packet),
            ..Open::default()
        });
        self.add(plan, first, room, zero);
        self.lay_out_groups(plan, room, zero);
        let split = self.packets.len();
        self.add(plan, then, room, zero);
        self.lay_out_groups(plan, room, zero);
        for to in 0..self.open.len() {
            if !self.open[to].records.is_empty() {
                self.close(to);
            }
        }
        split
    }

    /// `pairs` into their receivers' open packets of `room` record bytes, closing each that
    /// cannot take the next record.
    fn add(
        &mut self,
        plan: &ExchangePlan,
        pairs: &[(u32, u32)],
        room: usize,
        zero: &mut dyn FnMut(u32, usize) -> bool,
    ) {
        let group = crate::framing::row_group(plan);
        for &(u, v) in pairs {
            let to = usize::from(plan.owner[v as usize]);
            self.open[to].group.push((u, v));
            if self.open[to].group.len() >= group {
                self.lay_out_group(plan, to, room, zero);
            }
        }
    }

    /// Every receiver's group so far into its packets, however short.
    fn lay_out_groups(
        &mut self,
        plan: &ExchangePlan,
        room: usize,
        zero: &mut dyn FnMut(u32, usize) -> bool,
    ) {
        for to in 0..self.open.len() {
            self.lay_out_group(plan, to, room, zero);
        }
    }

    /// Worker `to`'s group into its packets, chunk by chunk (see [`crate::framing::ROW_GROUP`]).
    fn lay_out_group(
        &mut self,
        plan: &ExchangePlan,
        to: usize,
        room: usize,
        zero: &mut dyn FnMut(u32, usize) -> bool,
    ) {
        let group = std::mem::take(&mut self.open[to].group);
        for c in 0..plan.chunks() {
            let lanes = plan.chunk_lanes(c);
            for &(u, v) in &group {
                let is_zero = zero(u, c);
                let (len, payload) = if is_zero {
                    (RECORD_HEADER_LEN, 0)
                } else {
                    (record_len(lanes), 4 * lanes as u64)
                };
                if self.open[to].bytes + len > room {
                    self.close(to);
                }
                let open = &mut self.open[to];
                if open.records.is_empty() {
                    open.dst = v;
                }
                open.records.push((u, c as u8));
                open.zeros.push(is_zero);
                open.bytes += len;
                open.payload += payload;
            }
        }
        // The buffer is kept for the next group.
        self.open[to].group = group;
        self.open[to].group.clear();
    }

    /// Close worker `to`'s open packet: it takes the next sequence.
    fn close(&mut self, to: usize) {
        let open = &mut self.open[to];
        let start = self.records.len() as u32;
        let payload = std::mem::take(&mut open.payload);
        self.records.append(&mut open.records);
        self.zeros.extend_from_bitslice(&open.zeros);
        open.zeros.clear();
        let nth = self.by_receiver[to].len() as u32;
        self.by_receiver[to].push(self.packets.len() as u32);
        self.packets.push(Packed {
            to: to as u16,
            dst: open.dst,
            start,
            end: self.records.len() as u32,
            payload,
            nth,
        });
        open.bytes = 0;
    }

    /// The index of the `nth` packet to worker `to`, if there is one.
    pub(crate) fn index_of(&self, to: u16, nth: u32) -> Option<usize> {
        let i = *self.by_receiver.get(usize::from(to))?.get(nth as usize)?;
        Some(i as usize)
    }

    /// Packets to worker `to` in this block.
    pub(crate) fn count_to(&self, to: u16) -> usize {
        self.by_receiver.get(usize::from(to)).map_or(0, Vec::len)
    }

    /// Feature bytes packet `seq` carries.
    pub(crate) fn payload_of(&self, seq: usize) -> u64 {
        self.packets[seq].payload
    }

    /// The records of packet `seq`.
    pub(crate) fn records_of(&self, seq: usize) -> &[(u32, u8)] {
        let p = &self.packets[seq];
        &self.records[p.start as usize..p.end as usize]
    }

    /// Per record of packet `seq`, whether it goes as a zero record.
    pub(crate) fn zeros_of(&self, seq: usize) -> &BitSlice {
        let p = &self.packets[seq];
        &self.zeros[p.start as usize..p.end as usize]
    }
}

/// Most ranges one ack carries: the highest ones, so that it fits the header's buffer.
pub(super) const MAX_ACK_RANGES: usize = (crate::wire::MAX_PACKET_LEN - HEADER_LEN) / ACK_RANGE_LEN;

/// What a receiver holds of one sender's packets in the running block.
#[derive(Debug, Clone, Default)]
struct Peer {
    block: u16,
    /// Sequences received, as ascending ranges apart.
    ranges: Vec<(u32, u32)>,
    /// Packets received since the last ack.
    unacked: u32,
    /// A vertex of the sender and one of ours, to address the ack by.
    sender_vertex: u32,
    our_vertex: u32,
    /// A congestion mark on any packet since the last ack: echoed in it.
    ecn: bool,
    /// When a held-back ack must leave.
    due: Option<Nanos>,
}

/// An ack to send: to whom, and its ranges.
#[derive(Debug)]
pub(super) struct AckOut<'a> {
    pub block: u16,
    pub sender_vertex: u32,
    pub our_vertex: u32,
    pub ecn: bool,
    pub ranges: &'a [(u32, u32)],
}

/// The receiver's acknowledgements of packed copies, per sending worker.
#[derive(Debug, Default)]
pub(super) struct RowAcks {
    peers: Vec<Peer>,
}

/// What a received packet asks of the ack machinery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AckNow {
    /// Send the sender's ack now.
    Yes,
    /// Hold it (until [`RowAcks::deadline`]).
    Later,
}

impl RowAcks {
    pub(crate) fn new(workers: u16) -> RowAcks {
        RowAcks {
            peers: vec![Peer::default(); usize::from(workers)],
        }
    }

    /// Packet `seq` of block `block` from `worker` arrived at `now` (from its vertex
    /// `sender_vertex` to our `our_vertex`, congestion-marked or not, `urgent` when the sender
    /// asked for an ack at once): whether to ack now. An ack leaves at once after `every`
    /// packets, when asked, at a gap (a later packet than the next one expected: something
    /// was lost or reordered) and at a duplicate (its ack was lost); else within `delay`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn on_packet(
        &mut self,
        now: Nanos,
        worker: u16,
        block: u16,
        seq: u32,
        (sender_vertex, our_vertex): (u32, u32),
        (ecn, urgent): (bool, bool),
        every: u32,
        delay: Nanos,
    ) -> AckNow {
        let p = &mut self.peers[usize::from(worker)];
        if p.block != block {
            // A new block: nothing held (the ranges' buffer is kept).
            p.block = block;
            p.ranges.clear();
            p.unacked = 0;
            p.ecn = false;
            p.due = None;
        }
        p.sender_vertex = sender_vertex;
        p.our_vertex = our_vertex;
        p.ecn |= ecn;
        let (duplicate, in_order) = insert(&mut p.ranges, seq);
        p.unacked += 1;
        if urgent || duplicate || !in_order || p.unacked >= every.max(1) {
            return AckNow::Yes;
        }
        p.due.get_or_insert(now + delay);
        AckNow::Later
    }

    /// The ack for `worker` (its ranges, highest last; at most [`MAX_ACK_RANGES`]), now
    /// counted as sent.
    pub(crate) fn take(&mut self, worker: u16) -> AckOut<'_> {
        let p = &mut self.peers[usize::from(worker)];
        p.unacked = 0;
        p.due = None;
        let ecn = std::mem::take(&mut p.ecn);
        let from = p.ranges.len().saturating_sub(MAX_ACK_RANGES);
        AckOut {
            block: p.block,
            sender_vertex: p.sender_vertex,
            our_vertex: p.our_vertex,
            ecn,
            ranges: &p.ranges[from..],
        }
    }

    /// The senders whose held-back acks are due at `now`.
    pub(crate) fn due(&self, now: Nanos) -> impl Iterator<Item = u16> + '_ {
        self.peers
            .iter()
            .enumerate()
            .filter(move |(_, p)| p.due.is_some_and(|t| t <= now))
            .map(|(w, _)| w as u16)
    }

    /// Drop every held-back ack (a new block: their senders have moved on too).
    pub(crate) fn forget_held(&mut self) {
        for p in &mut self.peers {
            p.due = None;
        }
    }

    /// When the next held-back ack is due.
    pub(crate) fn deadline(&self) -> Option<Nanos> {
        self.peers.iter().filter_map(|p| p.due).min()
    }
}

/// Put `seq` into ascending, apart `ranges`: whether it was there already, and whether it
/// extended the highest range by one (in order, no gap).
fn insert(ranges: &mut Vec<(u32, u32)>, seq: u32) -> (bool, bool) {
    // The first range that ends at or after `seq - 1`.
    let i = ranges.partition_point(|&(_, last)| u64::from(last) + 1 < u64::from(seq));
    if let Some(&(first, last)) = ranges.get(i) {
        if first <= seq && seq <= last {
            return (true, false);
        }
    }
    // In order: the next after the highest range, or the very first packet.
    let in_order = ranges
        .last()
        .map_or(seq == 0, |&(_, last)| u64::from(last) + 1 == u64::from(seq));
    match ranges.get(i).copied() {
        // Just below the range at i: extend it down (the range before ends two or more below).
        Some((first, last)) if u64::from(seq) + 1 == u64::from(first) => ranges[i] = (seq, last),
        // Just after the range at i (which ends at seq - 1): extend it, and join the next.
        Some((first, last)) if u64::from(last) + 1 == u64::from(seq) => {
            ranges[i] = (first, seq);
            if let Some(&(nf, nl)) = ranges.get(i + 1) {
                if u64::from(seq) + 1 == u64::from(nf) {
                    ranges[i] = (first, nl);
                    ranges.remove(i + 1);
                }
            }
        }
        _ => ranges.insert(i, (seq, seq)),
    }
    (false, in_order)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Mode, PlanBlock};
    use crate::table::BlockTable;

    /// Vertices `0..n` on worker 0, each with a neighbour `n` on worker 1 (only the owners
    /// matter to a layout), `width` lanes wide (745, Amazon-Computers' features: 11 chunks of
    /// 64 lanes and one of 41, a row longer than a packet).
    fn fan_in(n: u32, width: usize) -> ExchangePlan {
        let table = BlockTable {
            vertices: vec![0, n],
            workers: vec![0, 1],
            expected: vec![1, 1],
            offsets: vec![0, 1, 2],
            slots: vec![1, 0],
        };
        let block = PlanBlock::new(table, &[0, n]).unwrap();
        let mut owner = vec![0; n as usize + 1];
        owner[n as usize] = 1;
        ExchangePlan::new(Mode::Host, width, 2, owner, vec![block]).unwrap()
    }

    #[test]
    fn a_layout_has_the_packets_the_model_counts_mostly_of_one_size() {
        let framing = HostFraming::default();
        for n in [1, 5, 63, 64, 65, 200] {
            let plan = fan_in(n, 745);
            let pairs: Vec<(u32, u32)> = (0..n).map(|u| (u, n)).collect();
            let mut packing = Packing::default();
            packing.lay_out_then(&plan, &pairs, &[], framing, &mut |_, _| false);
            let payload: u64 = packing.packets.iter().map(|p| p.payload).sum();
            let (packets, _) = framing.pack(u64::from(n), &plan);
            assert_eq!(packing.count_to(1) as u64, packets, "{n} rows");
            assert_eq!(payload, u64::from(n) * 745 * 4, "{n} rows");
            // Grouped chunk by chunk, a group's packets come in runs of one size (full
            // records, then the shorter last chunks, and the packets between): four runs per
            // group at most. Row by row, 200 rows made 400 runs of 480 packets (465 now).
            let runs = 1 + packing
                .packets
                .windows(2)
                .filter(|w| w[0].payload != w[1].payload)
                .count();
            let groups = n.div_ceil(crate::framing::ROW_GROUP as u32) as usize;
            assert!(runs <= 4 * groups, "{n} rows: {runs} runs");
        }
        // Whole 64-lane chunks pack equal records row by row: no grouping there.
        assert_eq!(crate::framing::row_group(&fan_in(10, 128)), 1);
        assert_eq!(crate::framing::row_group(&fan_in(10, 64)), 1);
        assert_eq!(
            crate::framing::row_group(&fan_in(10, 745)),
            crate::framing::ROW_GROUP
        );
    }

    #[test]
    fn zero_records_are_laid_out_as_headers_and_kept_per_record() {
        let framing = HostFraming::default();
        let plan = fan_in(200, 128);
        let pairs: Vec<(u32, u32)> = (0..200).map(|u| (u, 200)).collect();
        let mut full = Packing::default();
        full.lay_out_then(&plan, &pairs, &[], framing, &mut |_, _| false);
        // Every even source's chunks are zeros.
        let mut packing = Packing::default();
        packing.lay_out_then(&plan, &pairs, &[], framing, &mut |u, _| u % 2 == 0);
        let payload: u64 = packing.packets.iter().map(|p| p.payload).sum();
        assert_eq!(payload, 100 * 128 * 4);
        assert!(packing.packets.len() < full.packets.len());
        for seq in 0..packing.packets.len() {
            let zeros = packing.zeros_of(seq);
            let records = packing.records_of(seq);
            assert_eq!(zeros.len(), records.len());
            assert!(records
                .iter()
                .zip(zeros)
                .all(|(&(u, _), z)| *z == (u % 2 == 0)));
        }
    }

    #[test]
    fn ranges_merge_and_report_gaps_and_duplicates() {
        let mut r = Vec::new();
        assert_eq!(insert(&mut r, 0), (false, true));
        assert_eq!(insert(&mut r, 1), (false, true));
        assert_eq!(r, [(0, 1)]);
        // 3 before 2: a gap.
        assert_eq!(insert(&mut r, 3), (false, false));
        assert_eq!(r, [(0, 1), (3, 3)]);
        assert_eq!(insert(&mut r, 1), (true, false));
        // 2 fills the hole: one range again, but not in order (it came late).
        assert_eq!(insert(&mut r, 2), (false, false));
        assert_eq!(r, [(0, 3)]);
        assert_eq!(insert(&mut r, 4), (false, true));
        assert_eq!(insert(&mut r, 9), (false, false));
        assert_eq!(insert(&mut r, 7), (false, false));
        assert_eq!(insert(&mut r, 8), (false, false));
        assert_eq!(r, [(0, 4), (7, 9)]);
        // A first packet that is not 0: packet 0 was lost or overtaken.
        let mut r = Vec::new();
        assert_eq!(insert(&mut r, 5), (false, false));
        assert_eq!(insert(&mut r, 4), (false, false));
        assert_eq!(r, [(4, 5)]);
    }

    #[test]
    fn acks_leave_every_few_packets_at_gaps_or_after_the_delay() {
        let mut a = RowAcks::new(2);
        let vs = (10, 20);
        for seq in 0..3 {
            assert_eq!(
                a.on_packet(100, 1, 0, seq, vs, (false, false), 4, 50),
                AckNow::Later
            );
        }
        assert_eq!(a.deadline(), Some(150));
        assert_eq!(a.due(149).count(), 0);
        assert_eq!(a.due(150).collect::<Vec<_>>(), [1]);
        // The fourth packet: an ack of everything at once.
        assert_eq!(
            a.on_packet(120, 1, 0, 3, vs, (true, false), 4, 50),
            AckNow::Yes
        );
        let ack = a.take(1);
        assert_eq!((ack.ranges, ack.ecn), (&[(0, 3)][..], true));
        assert_eq!(a.deadline(), None);
        // A gap: at once, with both ranges.
        assert_eq!(
            a.on_packet(130, 1, 0, 6, vs, (false, false), 4, 50),
            AckNow::Yes
        );
        assert_eq!(a.take(1).ranges, &[(0, 3), (6, 6)]);
        // A packet that asks for it: at once.
        assert_eq!(
            a.on_packet(135, 1, 0, 7, vs, (false, true), 4, 50),
            AckNow::Yes
        );
        assert_eq!(a.take(1).ranges, &[(0, 3), (6, 7)]);
        // A new block starts afresh.
        assert_eq!(
            a.on_packet(140, 1, 1, 0, vs, (false, false), 4, 50),
            AckNow::Later
        );
        assert_eq!(a.take(1).ranges, &[(0, 0)]);
    }

    #[test]
    fn an_ack_keeps_to_its_most_ranges_the_highest() {
        let mut a = RowAcks::new(1);
        for seq in (0..2 * MAX_ACK_RANGES as u32).map(|s| 2 * s) {
            a.on_packet(0, 0, 0, seq, (0, 0), (false, false), 1_000, 1);
        }
        let ack = a.take(0);
        assert_eq!(ack.ranges.len(), MAX_ACK_RANGES);
        assert_eq!(
            ack.ranges.last(),
            Some(&(4 * MAX_ACK_RANGES as u32 - 2, 4 * MAX_ACK_RANGES as u32 - 2))
        );
    }
}

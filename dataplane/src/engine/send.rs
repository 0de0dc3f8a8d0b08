//! The sending half of a worker, one strategy per exchange kind.

use std::fmt::Debug;

use super::relay::Relay;
use super::reliable::Reliable;
use super::rows::Packing;
use super::{EncodedRows, EngineStats};
use crate::framing::HostFraming;
use crate::node::Nanos;
use crate::plan::{ExchangePlan, Mode, PlanBlock};
use crate::wire::{emit_record, emit_zero_record, AckRanges, PacketType, Repr, MAX_LANES};

/// How a worker puts its features on the wire: which (source, destination) pairs it sends in a
/// block, and as what. The in-network strategies send every pair once per chunk (sequence
/// `pair · chunks + chunk`); the host exchange's pack the pairs' chunks into packets of the MTU
/// per receiving worker (sequence: the packet's index, [`Packing`]). Either way one
/// [`Reliable`] layer acknowledges and resends them; the default methods do that over the
/// strategy's [`SendQueue`].
pub trait SendStrategy: Debug + Sized {
    /// The strategy's name, as errors report it.
    const NAME: &'static str;
    /// The packet type of what it sends: [`PacketType::Rows`] for packed host copies.
    const KIND: PacketType;
    /// Whether this strategy runs plans of `mode`.
    fn accepts(mode: Mode) -> bool;
    /// The (source, destination) pairs worker `rank` sends in `block`, in send order.
    fn pairs(plan: &ExchangePlan, rank: u16, block: u16) -> Vec<(u32, u32)>;
    /// Pairs (packed strategies only) laid out after [`SendStrategy::pairs`], each packet
    /// holding one leaving once its contents are complete (a proxy's rack sums, see
    /// [`Relay`]); none by default.
    fn deferred(_plan: &ExchangePlan, _rank: u16, _block: u16) -> Vec<(u32, u32)> {
        Vec::new()
    }
    /// The strategy around `queue`.
    fn from_queue(queue: SendQueue) -> Self;
    /// The strategy's send queue.
    fn queue(&self) -> &SendQueue;
    /// The strategy's send queue, mutably.
    fn queue_mut(&mut self) -> &mut SendQueue;

    /// `window`: packets that may await acknowledgement at once; `framing`: how packed host
    /// copies are framed.
    fn new(plan: &ExchangePlan, _rank: u16, window: usize, framing: HostFraming) -> Self {
        // Host-exchange copies are acknowledged by their receivers, each over its own path.
        // The window counts chunk packets; a packed packet holds about as many bytes as
        // `datagram / chunk packet` of them, so it takes that many places, and the bytes in
        // flight stay what the window allows.
        let packed = Self::KIND == PacketType::Rows;
        let per_packet = if packed {
            (framing.datagram_len() / crate::wire::MAX_PACKET_LEN).max(1)
        } else {
            1
        };
        let rel = if packed {
            Reliable::new(window / per_packet).multi_path()
        } else {
            Reliable::new(window)
        };
        Self::from_queue(SendQueue {
            chunks: plan.chunks(),
            rel,
            framing,
            per_packet,
            ..SendQueue::default()
        })
    }

    /// Forget the previous block and prepare block `block` of the worker's `rows`.
    fn start_block(&mut self, plan: &ExchangePlan, rank: u16, block: u16, rows: &EncodedRows) {
        let pairs = Self::pairs(plan, rank, block);
        let q = self.queue_mut();
        q.block = block;
        if Self::KIND == PacketType::Rows {
            let deferred = Self::deferred(plan, rank, block);
            let (packing, sources) = (&mut q.packing, &mut q.sources);
            let mut zero = |u, c| is_zero_record(plan, rows, sources, rank, block, u, c);
            // Packets before the split hold no deferred record: they may leave at once.
            q.ready = packing.lay_out_then(plan, &pairs, &deferred, q.framing, &mut zero);
            q.relay = Relay::new(plan, rank, block);
            q.rel.reset(q.packing.packets.len());
            q.rel.set_paths(q.packing.packets.iter().map(|p| p.to));
            q.acked_below = vec![0; usize::from(plan.workers)];
            q.release_ready();
        } else {
            q.rel.reset(pairs.len() * q.chunks);
        }
        q.pairs = pairs;
    }

    /// The exchange is over: nothing more to send.
    fn finish(&mut self) {
        let q = self.queue_mut();
        q.pairs.clear();
        q.rel.reset(0);
    }

    /// The congestion controller's window (in chunk packets), on top of the configured one.
    fn set_congestion_window(&mut self, packets: usize) {
        let q = self.queue_mut();
        q.rel.set_congestion_window(packets / q.per_packet.max(1));
    }

    /// Whether a packet is waiting for the pacer.
    fn has_work(&self) -> bool {
        self.queue().rel.has_work()
    }

    /// The next packet, built on `header` (type, ids and worker already set).
    fn next(
        &mut self,
        now: Nanos,
        plan: &ExchangePlan,
        header: &Repr,
        rows: &EncodedRows,
        stats: &mut EngineStats,
        buf: &mut [u8],
    ) -> Option<usize> {
        let q = self.queue_mut();
        let (seq, again) = q.rel.next_seq()?;
        let mut h = *header;
        h.block = q.block;
        let (len, payload) = if Self::KIND == PacketType::Rows {
            // Asks for an ack at once when the sender will wait for one: its window is full,
            // its last packet to that worker in the block, or a resend.
            let p = q.packing.packets[seq as usize];
            let last = p.nth as usize + 1 == q.packing.count_to(p.to);
            h.flags.resend = again || last || q.rel.fills_window();
            rows_packet(&h, plan, rows, q, seq, buf)
        } else {
            let ((u, v), c) = (q.pairs[seq as usize / q.chunks], seq as usize % q.chunks);
            let sources = Some(&mut q.sources);
            feature_packet(&h, Self::KIND, plan, rows, sources, u, v, c, seq, buf)
                .expect("the worker encodes every row it sends")
        };
        if again {
            stats.retransmits += 1;
            stats.payload_resent += payload;
        } else {
            stats.payload_sent += payload;
        }
        q.rel.sent(now, seq, again);
        Some(len)
    }

    /// An acknowledgement of sequence `seq` of source vertex `src`; true when it is new.
    fn on_ack(&mut self, now: Nanos, seq: u32, src: u32) -> bool {
        let q = self.queue_mut();
        let s = seq as usize;
        if Self::KIND == PacketType::Rows
            || s >= q.rel.sequences()
            || q.pairs[s / q.chunks].0 != src
        {
            return false;
        }
        q.rel.on_ack(now, s)
    }

    /// Worker `from`'s acknowledgement of the packed packets in `ranges`: the payload bytes
    /// newly acknowledged (0: nothing new), and whether it shows a packet to `from` lost (a
    /// later one acknowledged, this one not: resent at once, a congestion signal). Sequences
    /// beyond the block or of packets to another worker are ignored.
    fn on_ack_ranges(&mut self, now: Nanos, from: u16, ranges: AckRanges<'_>) -> (u64, bool) {
        let q = self.queue_mut();
        if Self::KIND != PacketType::Rows {
            return (0, false);
        }
        let mut bytes = 0;
        // Sequences on the wire number the packets to `from` alone.
        let sent = q.packing.count_to(from) as u64;
        // A receiver's ranges cover everything it has had in the block (an ack may be lost),
        // so each ack repeats all the earlier ones: start past the prefix known acknowledged,
        // or the host kinds' acks cost the square of a block's packets (11% of their CPU on
        // Amazon-Computers x 4 at width 745).
        let below = q.acked_below.get(usize::from(from)).copied().unwrap_or(0);
        for (first, last) in ranges {
            let from_nth = u64::from(first).max(u64::from(below));
            for nth in from_nth..=u64::from(last).min(sent.saturating_sub(1)) {
                let Some(s) = q.packing.index_of(from, nth as u32) else {
                    continue;
                };
                if q.rel.on_ack(now, s) {
                    bytes += q.packing.payload_of(s);
                }
            }
        }
        if let Some(below) = q.acked_below.get_mut(usize::from(from)) {
            while let Some(s) = q.packing.index_of(from, *below) {
                if !q.rel.is_acked(s) {
                    break;
                }
                *below += 1;
            }
        }
        let lost = q.rel.detect_losses(from);
        (bytes, lost)
    }

    /// Timers at `now`; true when something was lost (a congestion signal). `rto` is the
    /// configured timeout, a floor under the measured round trip.
    fn on_timeout(&mut self, now: Nanos, rto: Nanos) -> bool {
        self.queue_mut().rel.on_timeout(now, rto)
    }

    /// The next retransmission deadline.
    fn deadline(&self, rto: Nanos) -> Option<Nanos> {
        self.queue().rel.deadline(rto)
    }

    /// The smoothed round-trip time measured so far, if any.
    fn srtt(&self) -> Option<Nanos> {
        self.queue().rel.srtt()
    }
}

/// The running block's (source, destination) pairs and their reliability.
#[derive(Debug, Default)]
pub struct SendQueue {
    block: u16,
    pairs: Vec<(u32, u32)>,
    chunks: usize,
    rel: Reliable,
    framing: HostFraming,
    /// Chunk packets' worth of bytes one packet of this strategy holds: 1, or about five for
    /// packed host copies at a 1,500-byte MTU. Windows count chunk packets.
    per_packet: usize,
    /// Packed host copies: the block's packets.
    packing: Packing,
    /// Packed packets below this may leave: every deferred one below has its contents.
    ready: usize,
    /// Packed host copies: per receiver, how many of its packets (from its first) are known
    /// acknowledged.
    acked_below: Vec<u32>,
    /// The host two-level exchange: the shares this worker gathers as a proxy.
    relay: Relay,
    /// The pre-aggregated kinds: where the rows of each partial sum's sources are kept.
    sources: SourceRows,
}

/// Per source of a block's partial sums ([`crate::plan::Partials`]), where [`EncodedRows`]
/// keeps its row: found on a pair's first partial and kept for the block, so that a partial
/// sent chunk after chunk (12 chunks at width 745) looks its sources up once, not per chunk.
#[derive(Debug, Default)]
pub(super) struct SourceRows {
    /// The block the positions are of.
    block: Option<u16>,
    /// Per source of the block's partials, its row's position, or [`SourceRows::UNKNOWN`].
    positions: Vec<u32>,
}

impl SourceRows {
    const UNKNOWN: u32 = u32::MAX;

    /// The positions in `rows` of the sources of pair `pair` of block `index` (`block`);
    /// `None` when the worker does not hold one of them.
    fn of(
        &mut self,
        index: u16,
        block: &PlanBlock,
        pair: usize,
        rows: &EncodedRows,
    ) -> Option<&[u32]> {
        if self.block != Some(index) {
            self.block = Some(index);
            self.positions.clear();
            self.positions
                .resize(block.partials.sources.len(), Self::UNKNOWN);
        }
        let range = block.partials.starts[pair] as usize..block.partials.starts[pair + 1] as usize;
        let positions = &mut self.positions[range.clone()];
        if positions.first() == Some(&Self::UNKNOWN) {
            for (p, &u) in positions.iter_mut().zip(&block.partials.sources[range]) {
                *p = rows.position(u).unwrap_or(Self::UNKNOWN);
            }
            if positions.contains(&Self::UNKNOWN) {
                // Asked again, it is looked up again (and refused again).
                positions[0] = Self::UNKNOWN;
                return None;
            }
        }
        Some(positions)
    }
}

impl SendQueue {
    /// Whether every packet of the block has left at least once.
    pub(super) fn all_sent(&self) -> bool {
        self.rel.all_sent()
    }

    /// Whether worker `w` sends this one, as its rack's proxy for `v`, a share of `v`.
    pub(super) fn expects_share(&self, v: u32, w: u16) -> bool {
        self.relay.expects(v, w)
    }

    /// Worker `w`'s share of `v`'s chunk `c` (no lanes: it overflowed): whether it was new
    /// (`None`: not expected). The proxy's sums that it completes may leave.
    pub(super) fn on_share(&mut self, v: u32, w: u16, c: usize, values: &[i32]) -> Option<bool> {
        let new = self.relay.on_share(v, w, c, values)?;
        if new {
            self.release_ready();
        }
        Some(new)
    }

    /// Let the deferred packets whose every record is complete leave, in order.
    fn release_ready(&mut self) {
        let relay = &self.relay;
        let packing = &self.packing;
        while self.ready < packing.packets.len()
            && packing
                .records_of(self.ready)
                .iter()
                .all(|&(v, c)| relay.complete(v, usize::from(c)))
        {
            self.ready += 1;
        }
        self.rel.set_ready(self.ready);
    }
}

/// Packed packet `seq` of `packing` as a [`PacketType::Rows`] packet built on `header`, written
/// into `buf`: its length and its payload bytes (4 per lane).
fn rows_packet(
    header: &Repr,
    plan: &ExchangePlan,
    rows: &EncodedRows,
    q: &mut SendQueue,
    seq: u32,
    buf: &mut [u8],
) -> (usize, u64) {
    let (packing, relay) = (&q.packing, &q.relay);
    let p = packing.packets[seq as usize];
    let records = packing.records_of(seq as usize);
    let mut r = *header;
    r.packet_type = PacketType::Rows;
    // The switch checks that the sender owns the header's source: a partial sum's record
    // names its destination, so the header names the first partial's lowest source (in the
    // host two-level exchange, the lowest of the sender's own among its pair's).
    let first = records[0].0;
    let two_level = plan.mode == Mode::HostTwoLevel;
    r.src = if two_level {
        own_lowest_source(plan, header, first).expect("the worker sends its own shares")
    } else if is_partial(plan, header.worker, first) {
        lowest_source(plan, header, first).expect("the worker sends its own partials")
    } else {
        first
    };
    r.dst = p.dst;
    r.chunk = 0;
    r.lanes = 0;
    r.count = records.len() as u16;
    r.sequence = p.nth;
    let mut len = r.emit_with_lanes(&[], buf);
    let mut partial = [0i32; MAX_LANES];
    for (&(u, c), zero) in records.iter().zip(packing.zeros_of(seq as usize)) {
        let lanes = plan.chunk_lanes(usize::from(c));
        // As the layout had it.
        if *zero {
            len += emit_zero_record(u, c, lanes, &mut buf[len..]);
            continue;
        }
        let values = if two_level {
            let fits = two_level_sum(plan, rows, relay, header, u, usize::from(c), &mut partial)
                .expect("the worker sends its own shares");
            &partial[..if fits { lanes } else { 0 }]
        } else if is_partial(plan, header.worker, u) {
            // A partial sum beyond 32 bits goes as a record without lanes: its receiver
            // fetches the destination's plain features instead (as the switch's overflow
            // notice has it do in the reduce exchange).
            let out = &mut partial[..lanes];
            let fits = partial_sum(plan, rows, &mut q.sources, header, u, usize::from(c), out)
                .expect("the worker sends its own partials");
            &partial[..if fits { lanes } else { 0 }]
        } else {
            rows.chunk(u, usize::from(c), lanes)
                .expect("the worker encodes every row it sends")
        };
        len += emit_record(u, c, values, &mut buf[len..]);
    }
    (len, p.payload)
}

/// Whether worker `worker`'s packed record of vertex `u`'s chunk `c` in block `block` is all
/// zeros, sent as a zero record: a copy of a row whose chunk is zero, or a partial sum whose
/// every source's chunk is (a rack's shares in the host two-level exchange are never: a
/// proxy's sum waits for them). The layout decides it once per record and keeps it.
fn is_zero_record(
    plan: &ExchangePlan,
    rows: &EncodedRows,
    sources: &mut SourceRows,
    worker: u16,
    block: u16,
    u: u32,
    c: usize,
) -> bool {
    if plan.mode == Mode::HostTwoLevel {
        return false;
    }
    if !is_partial(plan, worker, u) {
        return rows.position(u).is_some_and(|at| rows.is_zero_at(at, c));
    }
    let Some(b) = plan.blocks.get(usize::from(block)) else {
        return false;
    };
    let Some(pair) = b.row_of(u).and_then(|row| b.pair(row, worker)) else {
        return false;
    };
    sources
        .of(block, b, pair, rows)
        .is_some_and(|at| at.iter().all(|&p| rows.is_zero_at(p, c)))
}

/// Whether a packed record of worker `worker` naming vertex `v` is a partial sum (it then
/// names the destination, a vertex of the receiver) rather than a raw copy of `v`, the
/// sender's own vertex: every record of [`Mode::HostReduce`] and [`Mode::HostTwoLevel`]
/// (there it may name a third worker's vertex: a share for its proxy), and in [`Mode::HostHybrid`]
/// those that name another worker's vertex.
pub(super) fn is_partial(plan: &ExchangePlan, worker: u16, v: u32) -> bool {
    match plan.mode {
        Mode::HostReduce | Mode::HostTwoLevel => true,
        Mode::HostHybrid => plan.owner.get(v as usize) != Some(&worker),
        _ => false,
    }
}

/// [`Mode::HostReduce`] and [`Mode::HostHybrid`]: the lowest of worker `header.worker`'s
/// vertices that neighbour `dst` in block `header.block` (the vertex its partial sum for
/// `dst` is named by).
fn lowest_source(plan: &ExchangePlan, header: &Repr, dst: u32) -> Option<u32> {
    let block = plan.blocks.get(usize::from(header.block))?;
    let pair = block.pair(block.row_of(dst)?, header.worker)?;
    block.partials.of(pair).first().copied()
}

/// [`Mode::HostTwoLevel`]: the pair of `dst`'s row that worker `w`'s vertices feed, and
/// whether `w` is that pair's worker (it then sends the owner the pair's sum).
fn two_level_pair(plan: &ExchangePlan, block: u16, w: u16, dst: u32) -> Option<(usize, bool)> {
    let b = plan.blocks.get(usize::from(block))?;
    let row = b.row_of(dst)?;
    let p = b.feeding_pair(row, w, &plan.owner, plan.mode)?;
    Some((p, b.table.slots[p] == u32::from(w)))
}

/// [`Mode::HostTwoLevel`]: the lowest of worker `header.worker`'s own vertices among the
/// sources of the pair it feeds for `dst`.
fn own_lowest_source(plan: &ExchangePlan, header: &Repr, dst: u32) -> Option<u32> {
    let (p, _) = two_level_pair(plan, header.block, header.worker, dst)?;
    let b = &plan.blocks[usize::from(header.block)];
    b.partials
        .of(p)
        .iter()
        .copied()
        .find(|&u| plan.owner[u as usize] == header.worker)
}

/// [`Mode::HostTwoLevel`]: what worker `header.worker` sends for `dst`'s chunk `chunk` into
/// `out` (its first `chunk_lanes` lanes): its own vertices' share of the pair it feeds, plus,
/// when it is that pair's worker (the rack's proxy), the shares its rack's other workers sent
/// it (complete: the packet waited for them). Whether it fits 32-bit lanes (a share that came
/// without lanes makes the sum not fit); `None` when the worker feeds no pair of `dst`.
fn two_level_sum(
    plan: &ExchangePlan,
    rows: &EncodedRows,
    relay: &Relay,
    header: &Repr,
    dst: u32,
    chunk: usize,
    out: &mut [i32; MAX_LANES],
) -> Option<bool> {
    let (p, sums_rack) = two_level_pair(plan, header.block, header.worker, dst)?;
    let b = &plan.blocks[usize::from(header.block)];
    let lanes = plan.chunk_lanes(chunk);
    let mut acc = [0i64; MAX_LANES];
    for &u in b.partials.of(p) {
        if plan.owner[u as usize] != header.worker {
            continue;
        }
        for (a, &x) in acc.iter_mut().zip(rows.chunk(u, chunk, lanes)?) {
            *a += i64::from(x);
        }
    }
    if sums_rack {
        match relay.shares(dst, chunk, lanes) {
            Some(Some(shares)) => {
                for (a, &x) in acc.iter_mut().zip(shares) {
                    *a += x;
                }
            }
            Some(None) => return Some(false),
            None => {}
        }
    }
    let mut fits = true;
    for (o, &a) in out[..lanes].iter_mut().zip(&acc) {
        *o = i32::try_from(a).unwrap_or_else(|_| {
            fits = false;
            0
        });
    }
    Some(fits)
}

/// One chunk of vertex `src`'s feature as a `kind` packet built on `header` (count 1), written
/// into `buf`: the packet's length and its payload bytes; `None` when the worker does not hold
/// `src`. A reduce exchange's data packet carries the worker's partial sum for `dst`, its
/// sources found through `sources` (the sender's; a fetch reply carries plain features).
#[allow(clippy::too_many_arguments)]
pub(super) fn feature_packet(
    header: &Repr,
    kind: PacketType,
    plan: &ExchangePlan,
    rows: &EncodedRows,
    sources: Option<&mut SourceRows>,
    src: u32,
    dst: u32,
    chunk: usize,
    sequence: u32,
    buf: &mut [u8],
) -> Option<(usize, u64)> {
    let lanes = plan.chunk_lanes(chunk);
    let mut partial = [0i32; MAX_LANES];
    let mut fits = true;
    // Reduce mode sends partial sums up; what a fetch is answered with stays a plain feature.
    // A hybrid block's multicast sender sends its own feature (source = destination).
    let values = if plan.mode == Mode::Reduce && kind == PacketType::Data && src != dst {
        let sources = sources.expect("the sender builds its data packets with its source rows");
        fits = partial_sum(
            plan,
            rows,
            sources,
            header,
            dst,
            chunk,
            &mut partial[..lanes],
        )?;
        &partial[..lanes]
    } else {
        rows.chunk(src, chunk, lanes)?
    };
    let mut r = *header;
    // A partial sum beyond 32 bits cannot be added: the flag has the switch release the
    // destination's aggregator and its owner fetch the plain features instead.
    r.flags.fetch = !fits;
    r.packet_type = kind;
    r.src = src;
    r.dst = dst;
    r.chunk = chunk as u8;
    r.lanes = lanes as u8;
    r.count = 1;
    r.sequence = sequence;
    Some((r.emit_with_lanes(values, buf), 4 * lanes as u64))
}

/// The pre-aggregated modes: worker `header.worker`'s partial sum for destination `dst` in
/// block `header.block`, chunk `chunk`, written into `out`; whether it fits 32-bit lanes
/// (`None` when the worker sends none). It always fits under a scale that leaves room for the
/// destination's every contribution (`ExchangePlan::most_contributions`).
fn partial_sum(
    plan: &ExchangePlan,
    rows: &EncodedRows,
    sources: &mut SourceRows,
    header: &Repr,
    dst: u32,
    chunk: usize,
    out: &mut [i32],
) -> Option<bool> {
    let block = plan.blocks.get(usize::from(header.block))?;
    let pair = block.pair(block.row_of(dst)?, header.worker)?;
    let mut acc = [0i64; MAX_LANES];
    for &at in sources.of(header.block, block, pair, rows)? {
        for (a, &x) in acc.iter_mut().zip(rows.chunk_at(at, chunk, out.len())) {
            *a += i64::from(x);
        }
    }
    let mut fits = true;
    for (o, &a) in out.iter_mut().zip(&acc) {
        *o = i32::try_from(a).unwrap_or_else(|_| {
            fits = false;
            0
        });
    }
    Some(fits)
}

/// The worker's rows of `block` in the planned send order (global ids).
fn send_order(plan: &ExchangePlan, rank: u16, block: u16) -> Vec<u32> {
    let b = &plan.blocks[usize::from(block)];
    b.order
        .iter()
        .filter(|&&row| b.table.workers[row as usize] == u32::from(rank))
        .map(|&row| b.table.vertices[row as usize])
        .collect()
}

/// The three [`SendStrategy`] methods of a strategy that is a [`SendQueue`] and nothing more.
macro_rules! around_send_queue {
    ($strategy:ident) => {
        fn from_queue(queue: SendQueue) -> Self {
            $strategy(queue)
        }

        fn queue(&self) -> &SendQueue {
            &self.0
        }

        fn queue_mut(&mut self) -> &mut SendQueue {
            &mut self.0
        }
    };
}

/// In-network aggregation: every chunk of every row goes up to the switch once (source and
/// destination are the vertex itself) and is acknowledged by the switch.
#[derive(Debug)]
pub struct InNetwork(SendQueue);

impl SendStrategy for InNetwork {
    const NAME: &'static str = "in-network";
    const KIND: PacketType = PacketType::Data;

    fn accepts(mode: Mode) -> bool {
        mode.switch_aggregates()
    }

    fn pairs(plan: &ExchangePlan, rank: u16, block: u16) -> Vec<(u32, u32)> {
        send_order(plan, rank, block)
            .into_iter()
            .map(|v| (v, v))
            .collect()
    }

    around_send_queue!(InNetwork);
}

/// The pre-aggregated exchange: for every destination of the block it contributes to, the
/// worker sends one partial sum (the sum of its own vertices that neighbour the destination),
/// named by its lowest such vertex, and the switch acknowledges it; in a hybrid block it also
/// sends each of its multicast senders' features once.
#[derive(Debug)]
pub struct PreAggregated(SendQueue);

impl SendStrategy for PreAggregated {
    const NAME: &'static str = "reduce";
    const KIND: PacketType = PacketType::Data;

    fn accepts(mode: Mode) -> bool {
        mode == Mode::Reduce
    }

    fn pairs(plan: &ExchangePlan, rank: u16, block: u16) -> Vec<(u32, u32)> {
        let b = &plan.blocks[usize::from(block)];
        // A hybrid block's multicast senders of this worker go first, each feature once, those
        // feeding the most destinations first: each pass after a packet's first is a trip
        // around one recirculation path, so a sender's trips are a chain the switch works
        // through one after another, and a long chain started last ends last (on a chip with
        // looped ports, Actor at 32 workers idled its senders 20 µs waiting for such tails).
        let m = &b.multicast;
        let mut senders: Vec<usize> = (0..m.len())
            .filter(|&i| plan.owner[m.vertices[i] as usize] == rank)
            .collect();
        senders.sort_by_key(|&i| (std::cmp::Reverse(m.rows_of(i).len()), m.vertices[i]));
        let mut pairs: Vec<(u32, u32)> = senders
            .into_iter()
            .map(|i| (m.vertices[i], m.vertices[i]))
            .collect();
        pairs.extend(b.order.iter().filter_map(|&row| {
            let pair = b.pair(row as usize, rank)?;
            Some((b.partials.of(pair)[0], b.table.vertices[row as usize]))
        }));
        pairs
    }

    around_send_queue!(PreAggregated);
}

/// The host-only pre-aggregated exchange (DistGNN's partial aggregation): for every remote
/// destination its vertices neighbour, the worker sends the destination's owner one partial
/// sum, packed with the others for that worker into packets of the MTU as the host
/// exchange's copies are ([`PacketType::Rows`]; a record names the destination), and the
/// receiver acknowledges them in ranges. The switch only forwards.
#[derive(Debug)]
pub struct HostPreAggregated(SendQueue);

impl SendStrategy for HostPreAggregated {
    const NAME: &'static str = "host-reduce";
    const KIND: PacketType = PacketType::Rows;

    fn accepts(mode: Mode) -> bool {
        mode == Mode::HostReduce
    }

    /// (destination, destination): the records name the destination, whose owner receives.
    fn pairs(plan: &ExchangePlan, rank: u16, block: u16) -> Vec<(u32, u32)> {
        let b = &plan.blocks[usize::from(block)];
        b.order
            .iter()
            .filter(|&&row| b.pair(row as usize, rank).is_some())
            .map(|&row| {
                let v = b.table.vertices[row as usize];
                (v, v)
            })
            .collect()
    }

    around_send_queue!(HostPreAggregated);
}

/// The host two-level exchange ([`Mode::HostTwoLevel`]): host-only partial sums, where the
/// workers of a rack feeding a destination owned in another rack send their shares to one of
/// them, the rack's proxy for it (a record naming the destination, to the proxy), and the
/// proxy sends the owner the rack's one partial sum. A worker sends its shares first (so that
/// its proxies can start), then its partials that need no one else's (for destinations in
/// its own rack, or where it alone feeds from its rack), and last, as their shares come in,
/// the rack sums it proxies for ([`SendStrategy::deferred`]). All packed per receiving
/// worker into packets of the MTU ([`PacketType::Rows`]) and acknowledged in ranges by their
/// receiver; the switch only forwards.
#[derive(Debug)]
pub struct HostRackProxy(SendQueue);

impl SendStrategy for HostRackProxy {
    const NAME: &'static str = "host-two-level";
    const KIND: PacketType = PacketType::Rows;

    fn accepts(mode: Mode) -> bool {
        mode == Mode::HostTwoLevel
    }

    /// The shares as (destination, the proxy's lowest source of the pair: the packet goes to
    /// the proxy), then the partials needing no share as (destination, destination), each in
    /// the block's order.
    fn pairs(plan: &ExchangePlan, rank: u16, block: u16) -> Vec<(u32, u32)> {
        let b = &plan.blocks[usize::from(block)];
        let mut shares = Vec::new();
        let mut direct = Vec::new();
        for &row in &b.order {
            let row = row as usize;
            let Some(p) = b.feeding_pair(row, rank, &plan.owner, plan.mode) else {
                continue;
            };
            let v = b.table.vertices[row];
            let proxy = b.table.slots[p];
            let sources = b.partials.of(p);
            if proxy != u32::from(rank) {
                let named = sources
                    .iter()
                    .copied()
                    .find(|&u| u32::from(plan.owner[u as usize]) == proxy)
                    .expect("a proxy feeds its own pair");
                shares.push((v, named));
            } else if sources.iter().all(|&u| plan.owner[u as usize] == rank) {
                direct.push((v, v));
            }
        }
        shares.extend(direct);
        shares
    }

    /// The rack sums this worker proxies for, as (destination, destination), in the block's
    /// order: each leaves once every share of its packet is in.
    fn deferred(plan: &ExchangePlan, rank: u16, block: u16) -> Vec<(u32, u32)> {
        let b = &plan.blocks[usize::from(block)];
        b.order
            .iter()
            .filter_map(|&row| {
                let p = b.pair(row as usize, rank)?;
                let v = b.table.vertices[row as usize];
                let gathers = b
                    .partials
                    .of(p)
                    .iter()
                    .any(|&u| plan.owner[u as usize] != rank);
                gathers.then_some((v, v))
            })
            .collect()
    }

    around_send_queue!(HostRackProxy);
}

/// The host hybrid: per remote worker, either the host exchange's raw copies
/// ([`HostExchange`]) or the host-only partial sums ([`HostPreAggregated`]), as the plan
/// chose for that ordered pair (whichever is fewer rows). The plan's multicast senders of this
/// worker go raw, once to every worker owning one of their rows; its (destination, worker)
/// pairs go as partial sums. Both are packed per receiving worker into packets of the MTU
/// ([`PacketType::Rows`]); a record naming the sender's own vertex is a raw copy, one naming
/// the receiver's a partial sum. The switch only forwards.
#[derive(Debug)]
pub struct HostMixed(SendQueue);

impl SendStrategy for HostMixed {
    const NAME: &'static str = "host-hybrid";
    const KIND: PacketType = PacketType::Rows;

    fn accepts(mode: Mode) -> bool {
        mode == Mode::HostHybrid
    }

    /// The partial sums as (destination, destination), in the block's order, and the raw
    /// copies as (sender, its lowest row on the receiving worker), senders ascending, the two
    /// lists merged evenly. They go to different peers (a pair is all one way), so sending
    /// one list before the other would leave the other list's peers idle for half the block
    /// (measured: 2.0x the host exchange's time on reddit-like at 8 workers; merged, 1.0x).
    fn pairs(plan: &ExchangePlan, rank: u16, block: u16) -> Vec<(u32, u32)> {
        let partials = HostPreAggregated::pairs(plan, rank, block);
        let b = &plan.blocks[usize::from(block)];
        let (t, m) = (&b.table, &b.multicast);
        let mut raw: Vec<(u32, u32)> = Vec::new();
        let mut targets: Vec<(u32, u32)> = Vec::new();
        for i in 0..m.len() {
            let u = m.vertices[i];
            if plan.owner[u as usize] != rank {
                continue;
            }
            // Rows ascend, and so do their vertices: the first met on each worker is its lowest.
            targets.clear();
            targets.extend(
                m.rows_of(i)
                    .iter()
                    .map(|&r| (t.workers[r as usize], t.vertices[r as usize])),
            );
            targets.sort_unstable();
            targets.dedup_by_key(|x| x.0);
            raw.extend(targets.iter().map(|&(_, v)| (u, v)));
        }
        merge_evenly(&partials, &raw)
    }

    around_send_queue!(HostMixed);
}

/// `a` and `b` in one list, each in its own order, spread evenly over it: the `i`-th of `a`
/// goes at about `i / a.len()` of the way, and so for `b`.
fn merge_evenly<T: Copy>(a: &[T], b: &[T]) -> Vec<T> {
    let (n, m) = (a.len() as u64, b.len() as u64);
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0u64, 0u64);
    while i < n || j < m {
        // Take from `a` while it is behind `b` in the fraction sent: i/n <= j/m.
        if j == m || (i < n && i * m <= j * n) {
            out.push(a[i as usize]);
            i += 1;
        } else {
            out.push(b[j as usize]);
            j += 1;
        }
    }
    out
}

/// The host exchange: each boundary vertex once to every remote worker that needs it (the
/// receiver applies it to all its neighbours), packed with the other copies for that worker
/// into packets of the MTU ([`PacketType::Rows`]). The receiving worker acknowledges them end
/// to end with ranges, every few packets (as TCP would under BNS-GCN), so copies have a window,
/// retransmission and loss detection per receiver; receivers still fetch what does not arrive.
#[derive(Debug)]
pub struct HostExchange(SendQueue);

impl SendStrategy for HostExchange {
    const NAME: &'static str = "host";
    const KIND: PacketType = PacketType::Rows;

    fn accepts(mode: Mode) -> bool {
        mode == Mode::Host
    }

    fn pairs(plan: &ExchangePlan, rank: u16, block: u16) -> Vec<(u32, u32)> {
        let b = &plan.blocks[usize::from(block)];
        let mut pairs = Vec::new();
        // One buffer for every vertex's (worker, neighbour) list.
        let mut targets: Vec<(u16, u32)> = Vec::new();
        for u in send_order(plan, rank, block) {
            let row = b.row_of(u).expect("a vertex of the block");
            // Sources ascend, so the first neighbour met on each worker is its lowest.
            targets.clear();
            targets.extend(b.sources(row).map(|s| (plan.owner[s as usize], s)));
            targets.sort_unstable();
            targets.dedup_by_key(|t| t.0);
            pairs.extend(targets.iter().map(|&(_, s)| (u, s)));
        }
        pairs
    }

    around_send_queue!(HostExchange);
}

/// G3's balanced host exchange, as modelled here: the same copies as [`HostExchange`], but each
/// worker walks the remote workers in a shifted cyclic order — worker `r` sends everything for
/// `r + 1` first, then for `r + 2`, and so on (mod M) — so that while every worker is in its
/// k-th round each worker receives from exactly one sender, instead of all of them aiming at
/// the same few at once. Within one destination the plan's send order is kept. G3 also overlaps
/// communication with computation, which this model leaves out.
#[derive(Debug)]
pub struct BalancedHostExchange(SendQueue);

impl SendStrategy for BalancedHostExchange {
    const NAME: &'static str = "g3";
    const KIND: PacketType = PacketType::Rows;

    fn accepts(mode: Mode) -> bool {
        mode == Mode::Host
    }

    fn pairs(plan: &ExchangePlan, rank: u16, block: u16) -> Vec<(u32, u32)> {
        let mut pairs = HostExchange::pairs(plan, rank, block);
        let workers = u32::from(plan.workers);
        // Rounds after the sender: r + 1 is round 0. A stable sort keeps the send order within
        // one destination.
        let round = |dst: u32| {
            (u32::from(plan.owner[dst as usize]) + workers - u32::from(rank) - 1) % workers
        };
        pairs.sort_by_key(|&(_, dst)| round(dst));
        pairs
    }

    around_send_queue!(BalancedHostExchange);
}

#[cfg(test)]
mod tests {
    use super::{merge_evenly, PreAggregated, SendStrategy, SourceRows};
    use crate::engine::reliable::RttEstimator;
    use crate::engine::EncodedRows;
    use crate::plan::{ExchangePlan, Mode, Multicast, Partials, PlanBlock};
    use crate::table::BlockTable;

    #[test]
    fn a_hybrid_block_sends_its_longest_multicast_chains_first() {
        // Vertices 0 and 1 on worker 0, 2 and 3 on worker 1. Worker 0 multicasts vertex 0
        // into destination 3 and vertex 1 into 2 and 3; worker 1 sends destination 0 a
        // partial sum of vertex 2.
        let table = BlockTable {
            vertices: vec![0, 2, 3],
            workers: vec![0, 1, 1],
            expected: vec![1, 1, 2],
            offsets: vec![0, 1, 1, 1],
            slots: vec![1],
        };
        let partials = Partials {
            starts: vec![0, 1],
            sources: vec![2],
        };
        let multicast = Multicast {
            vertices: vec![0, 1],
            offsets: vec![0, 1, 3],
            rows: vec![2, 1, 2],
        };
        let block = PlanBlock::hybrid(table, &[0, 2, 3], partials, multicast).unwrap();
        let plan = ExchangePlan::new(Mode::Reduce, 64, 2, vec![0, 0, 1, 1], vec![block]).unwrap();
        // Vertex 1 feeds two destinations, vertex 0 one: 1 goes first although 0 is lower.
        assert_eq!(PreAggregated::pairs(&plan, 0, 0), [(1, 1), (0, 0)]);
        assert_eq!(PreAggregated::pairs(&plan, 1, 0), [(2, 0)]);
    }

    #[test]
    fn a_pairs_sources_are_found_once_and_refused_when_not_held() {
        // Destination 0 (worker 0) gets one pair, from worker 1, of sources 2 and 3.
        let table = BlockTable {
            vertices: vec![0],
            workers: vec![0],
            expected: vec![1],
            offsets: vec![0, 1],
            slots: vec![1],
        };
        let partials = Partials {
            starts: vec![0, 2],
            sources: vec![2, 3],
        };
        let block = PlanBlock::reduce(table, &[0], partials).unwrap();
        let held = EncodedRows::new(&[1, 2, 3], 1, vec![10, 20, 30]);
        let mut sources = SourceRows::default();
        assert_eq!(sources.of(0, &block, 0, &held), Some(&[1, 2][..]));
        // Kept: a second lookup reads the positions found (they hold the rows of 2 and 3).
        assert_eq!(sources.of(0, &block, 0, &held), Some(&[1, 2][..]));
        assert_eq!(held.chunk_at(2, 0, 1), [30]);
        // A worker that lacks source 3 gets none, each time it asks.
        let lacking = EncodedRows::new(&[2], 1, vec![20]);
        let mut sources = SourceRows::default();
        assert_eq!(sources.of(0, &block, 0, &lacking), None);
        assert_eq!(sources.of(0, &block, 0, &lacking), None);
        // Another block starts afresh.
        assert_eq!(sources.of(1, &block, 0, &held), Some(&[1, 2][..]));
    }

    #[test]
    fn two_lists_merge_evenly_each_in_its_order() {
        assert_eq!(merge_evenly(&[1, 2, 3, 4], &[10, 20]), [1, 10, 2, 3, 20, 4]);
        assert_eq!(merge_evenly(&[1, 2], &[] as &[i32]), [1, 2]);
        assert_eq!(merge_evenly(&[] as &[i32], &[7]), [7]);
        // However uneven, no stretch of the longer list runs past its share.
        let a: Vec<u32> = (0..1000).collect();
        let b: Vec<u32> = (1000..1030).collect();
        let out = merge_evenly(&a, &b);
        assert_eq!(out.len(), 1030);
        let firsts: Vec<u32> = out.iter().filter(|&&x| x < 1000).copied().collect();
        assert_eq!(firsts, a);
        let longest_run = out.split(|&x| x >= 1000).map(<[u32]>::len).max().unwrap();
        assert!(longest_run <= 1000 / 30 + 1, "{longest_run}");
    }

    #[test]
    fn the_timeout_follows_the_measured_round_trip_above_the_floor() {
        let mut r = RttEstimator::default();
        assert_eq!(r.rto(50), 50);
        r.sample(1_000);
        // First sample: srtt 1000, rttvar 500 → 3000.
        assert_eq!(r.rto(50), 3_000);
        for _ in 0..100 {
            r.sample(1_000);
        }
        // A steady round trip shrinks the variation; the floor still holds.
        assert!(r.rto(50) < 1_100 && r.rto(50) >= 1_000, "{}", r.rto(50));
        assert_eq!(r.rto(5_000), 5_000);
        // A late ack raises the timeout at once.
        r.sample(20_000);
        assert!(r.rto(50) > 10_000, "{}", r.rto(50));
        assert_eq!(r.srtt(), Some(3_375));
    }
}

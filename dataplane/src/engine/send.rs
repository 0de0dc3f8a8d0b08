//! The sending half of a worker, one strategy per exchange kind.

use std::fmt::Debug;

use super::reliable::Reliable;
use super::{in_network, EncodedRows, EngineStats};
use crate::node::Nanos;
use crate::plan::{ExchangePlan, Mode};
use crate::wire::{PacketType, Repr};

/// How a worker puts its features on the wire.
pub trait SendStrategy: Debug + Sized {
    const NAME: &'static str;
    /// Whether this strategy runs plans of `mode`.
    fn accepts(mode: Mode) -> bool;
    /// `window`: packets that may await acknowledgement at once (where there are acks).
    fn new(plan: &ExchangePlan, rank: u16, window: usize) -> Self;
    /// Forget the previous block and prepare block `block`.
    fn start_block(&mut self, plan: &ExchangePlan, rank: u16, block: u16);
    /// The exchange is over: nothing more to send.
    fn finish(&mut self);
    /// Whether a packet is waiting for the pacer.
    fn has_work(&self) -> bool;
    /// The next packet, built on `header` (type, ids and worker already set).
    fn next(
        &mut self,
        now: Nanos,
        plan: &ExchangePlan,
        header: &Repr,
        rows: &EncodedRows,
        stats: &mut EngineStats,
    ) -> Option<Vec<u8>>;
    /// An acknowledgement of data sequence `seq` from source `src`; true when it is new.
    fn on_ack(&mut self, now: Nanos, seq: u32, src: u32) -> bool;
    /// Timers at `now`; true when something timed out (a congestion signal). `rto` is the
    /// configured timeout, a floor under the strategy's own round-trip estimate.
    fn on_timeout(&mut self, now: Nanos, rto: Nanos) -> bool;
    /// The next retransmission deadline.
    fn deadline(&self, rto: Nanos) -> Option<Nanos>;
    /// The smoothed round-trip time measured so far, if any.
    fn srtt(&self) -> Option<Nanos>;
}

/// One chunk of vertex `src`'s feature as a `kind` packet built on `header` (count 1), and its
/// payload bytes; `None` when the worker does not hold `src`.
#[allow(clippy::too_many_arguments)]
pub(super) fn feature_packet(
    header: &Repr,
    kind: PacketType,
    plan: &ExchangePlan,
    rows: &EncodedRows,
    src: u32,
    dst: u32,
    chunk: usize,
    sequence: u32,
) -> Option<(Vec<u8>, u64)> {
    let lanes = plan.chunk_lanes(chunk);
    let values = rows.chunk(src, chunk, lanes)?;
    let mut r = *header;
    r.packet_type = kind;
    r.src = src;
    r.dst = dst;
    r.chunk = chunk as u8;
    r.lanes = lanes as u8;
    r.count = 1;
    r.sequence = sequence;
    Some((r.to_bytes(values), 4 * lanes as u64))
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

/// In-network aggregation: every chunk of every row goes up once (data sequence
/// `row · chunks + chunk`), is acknowledged by the switch, and is sent again until
/// acknowledged or the block ends (see [`Reliable`]).
#[derive(Debug, Default)]
pub struct InNetwork {
    block: u16,
    vertices: Vec<u32>,
    chunks: usize,
    rel: Reliable,
}

impl SendStrategy for InNetwork {
    const NAME: &'static str = "in-network";

    fn accepts(mode: Mode) -> bool {
        in_network(mode)
    }

    fn new(plan: &ExchangePlan, _rank: u16, window: usize) -> Self {
        InNetwork {
            chunks: plan.chunks(),
            rel: Reliable::new(window),
            ..InNetwork::default()
        }
    }

    fn start_block(&mut self, plan: &ExchangePlan, rank: u16, block: u16) {
        self.block = block;
        self.vertices = send_order(plan, rank, block);
        self.rel.reset(self.vertices.len() * self.chunks);
    }

    fn finish(&mut self) {
        self.vertices.clear();
        self.rel.reset(0);
    }

    fn has_work(&self) -> bool {
        self.rel.has_work()
    }

    fn next(
        &mut self,
        now: Nanos,
        plan: &ExchangePlan,
        header: &Repr,
        rows: &EncodedRows,
        stats: &mut EngineStats,
    ) -> Option<Vec<u8>> {
        let (seq, again) = self.rel.next_seq()?;
        let (i, c) = (seq as usize / self.chunks, seq as usize % self.chunks);
        let v = self.vertices[i];
        let mut h = *header;
        h.block = self.block;
        let (bytes, payload) = feature_packet(&h, PacketType::Data, plan, rows, v, v, c, seq)
            .expect("the worker encodes every row it sends");
        count_payload(stats, payload, again);
        self.rel.sent(now, seq, again);
        Some(bytes)
    }

    fn on_ack(&mut self, now: Nanos, seq: u32, src: u32) -> bool {
        let s = seq as usize;
        if s >= self.rel.len() || self.vertices[s / self.chunks] != src {
            return false;
        }
        self.rel.on_ack(now, s)
    }

    fn on_timeout(&mut self, now: Nanos, rto: Nanos) -> bool {
        self.rel.on_timeout(now, rto)
    }

    fn deadline(&self, rto: Nanos) -> Option<Nanos> {
        self.rel.deadline(rto)
    }

    fn srtt(&self) -> Option<Nanos> {
        self.rel.srtt()
    }
}

/// Count a packet's feature payload as a first send or a resend.
fn count_payload(stats: &mut EngineStats, payload: u64, again: bool) {
    if again {
        stats.retransmits += 1;
        stats.payload_resent += payload;
    } else {
        stats.payload_sent += payload;
    }
}

/// The host exchange: each boundary vertex once to every remote worker that needs it, as a
/// raw packet addressed to the lowest-id neighbour there (the receiver applies it to all its
/// neighbours). The receiving worker acknowledges every copy end to end (as TCP would under
/// BNS-GCN), so copies have the same window and retransmission as in-network data; receivers
/// still fetch what does not arrive.
#[derive(Debug, Default)]
pub struct HostExchange {
    /// (source vertex, representative destination) pairs in send order.
    sends: Vec<(u32, u32)>,
    chunks: usize,
    rel: Reliable,
}

impl SendStrategy for HostExchange {
    const NAME: &'static str = "host";

    fn accepts(mode: Mode) -> bool {
        mode == Mode::Host
    }

    fn new(plan: &ExchangePlan, _rank: u16, window: usize) -> Self {
        HostExchange {
            chunks: plan.chunks(),
            rel: Reliable::new(window),
            ..HostExchange::default()
        }
    }

    fn start_block(&mut self, plan: &ExchangePlan, rank: u16, block: u16) {
        let b = &plan.blocks[usize::from(block)];
        self.sends.clear();
        for u in send_order(plan, rank, block) {
            let row = b.row_of(u).expect("a vertex of the block");
            // Sources ascend, so the first neighbour met on each worker is its lowest.
            let mut targets: Vec<(u16, u32)> = b
                .sources(row)
                .map(|s| (plan.owner[s as usize], s))
                .collect();
            targets.sort_unstable();
            targets.dedup_by_key(|t| t.0);
            self.sends.extend(targets.into_iter().map(|(_, s)| (u, s)));
        }
        self.rel.reset(self.sends.len() * self.chunks);
    }

    fn finish(&mut self) {
        self.sends.clear();
        self.rel.reset(0);
    }

    fn has_work(&self) -> bool {
        self.rel.has_work()
    }

    fn next(
        &mut self,
        now: Nanos,
        plan: &ExchangePlan,
        header: &Repr,
        rows: &EncodedRows,
        stats: &mut EngineStats,
    ) -> Option<Vec<u8>> {
        let (seq, again) = self.rel.next_seq()?;
        let ((u, v), c) = (
            self.sends[seq as usize / self.chunks],
            seq as usize % self.chunks,
        );
        let (bytes, payload) = feature_packet(header, PacketType::Raw, plan, rows, u, v, c, seq)
            .expect("the worker encodes every row it sends");
        count_payload(stats, payload, again);
        self.rel.sent(now, seq, again);
        Some(bytes)
    }

    fn on_ack(&mut self, now: Nanos, seq: u32, src: u32) -> bool {
        let s = seq as usize;
        if s >= self.rel.len() || self.sends[s / self.chunks].0 != src {
            return false;
        }
        self.rel.on_ack(now, s)
    }

    fn on_timeout(&mut self, now: Nanos, rto: Nanos) -> bool {
        self.rel.on_timeout(now, rto)
    }

    fn deadline(&self, rto: Nanos) -> Option<Nanos> {
        self.rel.deadline(rto)
    }

    fn srtt(&self) -> Option<Nanos> {
        self.rel.srtt()
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::reliable::RttEstimator;

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

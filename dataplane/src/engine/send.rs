//! The sending half of a worker, one strategy per exchange kind.

use std::collections::VecDeque;
use std::fmt::Debug;

use bitvec::vec::BitVec;

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
/// `row · chunks + chunk`), is acknowledged by the switch, and is sent again after the
/// retransmission timeout until acknowledged or the block ends.
#[derive(Debug, Default)]
pub struct InNetwork {
    block: u16,
    vertices: Vec<u32>,
    chunks: usize,
    cursor: usize,
    acked: BitVec,
    /// Sent and neither acknowledged nor timed out, and how many.
    outstanding: BitVec,
    outstanding_count: usize,
    window: usize,
    inflight: VecDeque<(Nanos, u32)>,
    resend: VecDeque<u32>,
    /// When each chunk was last sent, and whether it was ever sent again (Karn: the ack of a
    /// retransmitted chunk is no round-trip sample).
    sent_at: Vec<Nanos>,
    resent: BitVec,
    rtt: RttEstimator,
    /// Exponential backoff of the timeout (1, 2, 4, … 64): doubled by every expiry, reset by
    /// every new acknowledgement, so a congested path is not hammered at a constant rate.
    backoff: u32,
    /// Send time of the latest-sent chunk acknowledged so far (RACK, RFC 8985): a chunk sent
    /// more than a reordering window before it and still unacknowledged is lost, without
    /// waiting for the timeout.
    rack: Nanos,
}

/// Smoothed round-trip time and its variation (RFC 6298), so that a switch or host slower
/// than the configured timeout assumes (a loaded software switch, a busy core) does not
/// trigger retransmissions of packets that are merely late.
#[derive(Debug, Default, Clone, Copy)]
pub struct RttEstimator {
    srtt: Option<f64>,
    rttvar: f64,
}

impl RttEstimator {
    pub fn sample(&mut self, rtt: Nanos) {
        let r = rtt as f64;
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2.0;
            }
            Some(s) => {
                self.rttvar = 0.75 * self.rttvar + 0.25 * (s - r).abs();
                self.srtt = Some(0.875 * s + 0.125 * r);
            }
        }
    }

    /// The retransmission timeout: `srtt + 4·rttvar`, never below `floor`.
    pub fn rto(&self, floor: Nanos) -> Nanos {
        match self.srtt {
            None => floor,
            Some(s) => floor.max((s + 4.0 * self.rttvar) as Nanos),
        }
    }

    pub fn srtt(&self) -> Option<Nanos> {
        self.srtt.map(|s| s as Nanos)
    }
}

impl InNetwork {
    /// The retransmission timeout now: the round-trip estimate (at least `floor`), backed off.
    fn timeout(&self, floor: Nanos) -> Nanos {
        self.rtt
            .rto(floor)
            .saturating_mul(Nanos::from(self.backoff.max(1)))
    }

    /// Whether a chunk sent at `sent` was overtaken: a chunk sent more than a quarter of the
    /// round trip after it has been acknowledged.
    fn overtaken(&self, sent: Nanos) -> bool {
        let reordering = self.rtt.srtt().unwrap_or(0) / 4;
        self.rtt.srtt().is_some() && sent + reordering < self.rack
    }

    /// Sequence `s` is no longer awaiting its ack (acknowledged or timed out).
    fn settle(&mut self, s: usize) {
        if self.outstanding.replace(s, false) {
            self.outstanding_count -= 1;
        }
    }
}

impl SendStrategy for InNetwork {
    const NAME: &'static str = "in-network";

    fn accepts(mode: Mode) -> bool {
        in_network(mode)
    }

    fn new(plan: &ExchangePlan, _rank: u16, window: usize) -> Self {
        InNetwork {
            chunks: plan.chunks(),
            window: window.max(1),
            ..InNetwork::default()
        }
    }

    fn start_block(&mut self, plan: &ExchangePlan, rank: u16, block: u16) {
        self.block = block;
        self.vertices = send_order(plan, rank, block);
        self.cursor = 0;
        self.acked = BitVec::repeat(false, self.vertices.len() * self.chunks);
        self.outstanding = BitVec::repeat(false, self.acked.len());
        self.outstanding_count = 0;
        self.inflight.clear();
        self.resend.clear();
        self.sent_at = vec![0; self.acked.len()];
        self.resent = BitVec::repeat(false, self.acked.len());
    }

    fn finish(&mut self) {
        self.vertices.clear();
        self.cursor = 0;
        self.acked.clear();
        self.sent_at.clear();
        self.resent.clear();
        self.outstanding.clear();
        self.outstanding_count = 0;
        self.inflight.clear();
        self.resend.clear();
    }

    fn has_work(&self) -> bool {
        self.outstanding_count < self.window
            && (self.cursor < self.acked.len()
                || self.resend.iter().any(|&s| !self.acked[s as usize]))
    }

    fn next(
        &mut self,
        now: Nanos,
        plan: &ExchangePlan,
        header: &Repr,
        rows: &EncodedRows,
        stats: &mut EngineStats,
    ) -> Option<Vec<u8>> {
        if self.outstanding_count >= self.window {
            return None;
        }
        let mut again = None;
        while let Some(s) = self.resend.pop_front() {
            if !self.acked[s as usize] {
                again = Some(s);
                break;
            }
        }
        let seq = match again {
            Some(s) => s,
            None if self.cursor < self.acked.len() => {
                self.cursor += 1;
                (self.cursor - 1) as u32
            }
            None => return None,
        };
        let (i, c) = (seq as usize / self.chunks, seq as usize % self.chunks);
        let v = self.vertices[i];
        let mut h = *header;
        h.block = self.block;
        let (bytes, payload) = feature_packet(&h, PacketType::Data, plan, rows, v, v, c, seq)
            .expect("the worker encodes every row it sends");
        if again.is_some() {
            stats.retransmits += 1;
            stats.payload_resent += payload;
            self.resent.set(seq as usize, true);
        } else {
            stats.payload_sent += payload;
        }
        self.sent_at[seq as usize] = now;
        self.inflight.push_back((now, seq));
        self.outstanding.set(seq as usize, true);
        self.outstanding_count += 1;
        Some(bytes)
    }

    fn on_ack(&mut self, now: Nanos, seq: u32, src: u32) -> bool {
        let s = seq as usize;
        if s >= self.acked.len() || self.vertices[s / self.chunks] != src {
            return false;
        }
        self.settle(s);
        let new = !self.acked.replace(s, true);
        if new {
            self.backoff = 1;
            self.rack = self.rack.max(self.sent_at[s]);
            if !self.resent[s] {
                self.rtt.sample(now.saturating_sub(self.sent_at[s]));
            }
        }
        new
    }

    fn on_timeout(&mut self, now: Nanos, rto: Nanos) -> bool {
        let rto = self.timeout(rto);
        let mut timed_out = false;
        let mut lost = false;
        while let Some(&(sent, seq)) = self.inflight.front() {
            if self.acked[seq as usize] {
                self.inflight.pop_front();
                continue;
            }
            let overtaken = self.overtaken(sent);
            if !overtaken && sent + rto > now {
                break;
            }
            self.inflight.pop_front();
            self.settle(seq as usize);
            self.resend.push_back(seq);
            lost |= overtaken;
            timed_out |= !overtaken;
        }
        if timed_out {
            self.backoff = (self.backoff.max(1) * 2).min(64);
        }
        timed_out || lost
    }

    fn deadline(&self, rto: Nanos) -> Option<Nanos> {
        let rto = self.timeout(rto);
        self.inflight.front().map(|&(sent, seq)| {
            if !self.acked[seq as usize] && self.overtaken(sent) {
                sent
            } else {
                sent + rto
            }
        })
    }

    fn srtt(&self) -> Option<Nanos> {
        self.rtt.srtt()
    }
}

/// The host exchange: each boundary vertex once to every remote worker that needs it, as a
/// raw packet addressed to the lowest-id neighbour there (the receiver applies it to all its
/// neighbours). No acknowledgements: receivers fetch what does not arrive.
#[derive(Debug, Default)]
pub struct HostExchange {
    /// (source vertex, representative destination) pairs in send order.
    sends: Vec<(u32, u32)>,
    chunks: usize,
    cursor: usize,
}

impl SendStrategy for HostExchange {
    const NAME: &'static str = "host";

    fn accepts(mode: Mode) -> bool {
        mode == Mode::Host
    }

    fn new(plan: &ExchangePlan, _rank: u16, _window: usize) -> Self {
        HostExchange {
            chunks: plan.chunks(),
            ..HostExchange::default()
        }
    }

    fn start_block(&mut self, plan: &ExchangePlan, rank: u16, block: u16) {
        let b = &plan.blocks[usize::from(block)];
        self.sends.clear();
        self.cursor = 0;
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
    }

    fn finish(&mut self) {
        self.sends.clear();
        self.cursor = 0;
    }

    fn has_work(&self) -> bool {
        self.cursor < self.sends.len() * self.chunks
    }

    fn next(
        &mut self,
        _now: Nanos,
        plan: &ExchangePlan,
        header: &Repr,
        rows: &EncodedRows,
        stats: &mut EngineStats,
    ) -> Option<Vec<u8>> {
        if !self.has_work() {
            return None;
        }
        let seq = self.cursor;
        self.cursor += 1;
        let ((u, v), c) = (self.sends[seq / self.chunks], seq % self.chunks);
        let (bytes, payload) =
            feature_packet(header, PacketType::Raw, plan, rows, u, v, c, seq as u32)
                .expect("the worker encodes every row it sends");
        stats.payload_sent += payload;
        Some(bytes)
    }

    fn on_ack(&mut self, _now: Nanos, _seq: u32, _src: u32) -> bool {
        false
    }

    fn on_timeout(&mut self, _now: Nanos, _rto: Nanos) -> bool {
        false
    }

    fn srtt(&self) -> Option<Nanos> {
        None
    }

    fn deadline(&self, _rto: Nanos) -> Option<Nanos> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::RttEstimator;

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

//! Per-packet reliability for the strategies whose packets are acknowledged (the switch acks
//! in-network data; receivers ack host-exchange copies): a send window, retransmission after a
//! timeout taken from the measured round trip (RFC 6298, the configured value as a floor) with
//! exponential backoff, and RACK-style loss detection (RFC 8985) that resends a packet as soon
//! as one sent well after it on the same path has been acknowledged — one path for what the
//! switch acks, one per receiving worker for the host exchange's copies — and a loss probe
//! (RFC 8985, section 7): when packets are in flight and nothing has left for two round
//! trips, one packet goes past the window — over one path the next waiting one, or else the
//! newest in flight on the path of the oldest one again — so that its ack shows what was lost
//! without waiting out the retransmission timeout (QUIC's probes likewise ignore the
//! congestion window: a sender whose window a loss has shrunk to a packet or two would
//! otherwise wait out a timeout for every loss).

use std::collections::VecDeque;

use bitvec::vec::BitVec;

use crate::node::Nanos;

/// Send state of one block's sequences `0..len`.
#[derive(Debug, Default)]
pub struct Reliable {
    /// Next never-sent sequence.
    cursor: usize,
    /// Sequences from here on are not ready to leave yet (their contents are still being
    /// gathered: a proxy's sums in the host two-level exchange); the whole block by default.
    ready: usize,
    acked: BitVec,
    /// Sent and neither acknowledged nor timed out, and how many: the window's count.
    outstanding: BitVec,
    outstanding_count: usize,
    window: usize,
    /// The congestion controller's window, when it keeps one: the effective window is the
    /// smaller of the two.
    congestion_window: Option<usize>,
    /// (send time, sequence) in send order, popped once acknowledged or expired.
    inflight: VecDeque<(Nanos, u32)>,
    resend: VecDeque<u32>,
    /// When each sequence was last sent, and whether it was ever sent again (Karn: the ack of
    /// a retransmitted chunk is no round-trip sample).
    sent_at: Vec<Nanos>,
    resent: BitVec,
    rtt: RttEstimator,
    /// Timeout multiplier (1, 2, 4, … 64): doubled by every expiry, reset by every new
    /// acknowledgement, so a congested path is not hammered at a constant rate.
    backoff: u32,
    /// Send time of the latest-sent sequence acknowledged so far.
    rack: Nanos,
    /// Whether every acknowledgement comes back along one path, so that an ack of a later
    /// chunk proves an earlier one lost (RACK). Off where acks come from many receivers over
    /// paths of their own (the host exchange), which reorder them without any loss: there
    /// each sequence's path is in `paths` and RACK runs per path.
    single_path: bool,
    /// The path (receiving worker) of each sequence, when acks come over many.
    paths: Vec<u16>,
    /// Per path, the send time of the latest-sent sequence acknowledged on it.
    path_racks: Vec<Nanos>,
    /// When the latest packet left.
    last_send: Nanos,
    /// A probe's resend waiting to leave (it goes ahead of the window).
    probe: Option<u32>,
    /// A probe that is the next waiting sequence: one send past the window.
    overdraft: bool,
    /// Probes sent since the latest new ack: each waits twice as long as the one before
    /// (QUIC's probe timeout backs off likewise), so a path that lost its probe too is asked
    /// again soon, and a dead one is not hammered.
    probes: u32,
}

impl Reliable {
    /// `window`: sequences that may await their acknowledgement at once.
    pub fn new(window: usize) -> Reliable {
        Reliable {
            window: window.max(1),
            backoff: 1,
            single_path: true,
            ..Reliable::default()
        }
    }

    /// Acknowledgements come from many receivers: RACK-style loss detection per path once
    /// [`Reliable::set_paths`] names each sequence's, timeouts only before.
    pub fn multi_path(mut self) -> Reliable {
        self.single_path = false;
        self
    }

    /// A new block of `len` sequences (the round-trip estimate carries over).
    pub fn reset(&mut self, len: usize) {
        self.cursor = 0;
        self.ready = len;
        self.acked = BitVec::repeat(false, len);
        self.outstanding = BitVec::repeat(false, len);
        self.outstanding_count = 0;
        self.inflight.clear();
        self.resend.clear();
        self.sent_at = vec![0; len];
        self.resent = BitVec::repeat(false, len);
        self.paths.clear();
        self.path_racks.clear();
        self.probe = None;
        self.overdraft = false;
        self.probes = 0;
    }

    /// The path of every sequence of the block (after [`Reliable::reset`]), for loss detection
    /// per path.
    pub fn set_paths(&mut self, paths: impl IntoIterator<Item = u16>) {
        self.paths.clear();
        self.paths.extend(paths);
        debug_assert_eq!(self.paths.len(), self.acked.len());
        let n = self.paths.iter().max().map_or(0, |&p| usize::from(p) + 1);
        self.path_racks.clear();
        self.path_racks.resize(n, 0);
    }

    /// Only sequences below `ready` may leave for the first time (the rest wait for their
    /// contents); sequences are released in order, so a later one waits for an earlier one.
    pub fn set_ready(&mut self, ready: usize) {
        self.ready = ready.min(self.acked.len());
    }

    /// Whether sequence `s` has been acknowledged.
    pub fn is_acked(&self, s: usize) -> bool {
        self.acked.get(s).is_some_and(|b| *b)
    }

    /// Whether every sequence of the block has been sent at least once.
    pub fn all_sent(&self) -> bool {
        self.cursor >= self.acked.len()
    }

    /// Sequences in the running block.
    pub fn sequences(&self) -> usize {
        self.acked.len()
    }

    /// The congestion controller's current window (at least one packet).
    pub fn set_congestion_window(&mut self, packets: usize) {
        self.congestion_window = Some(packets.max(1));
    }

    /// Whether one more send fills the window: after it the sender waits for an ack.
    pub fn fills_window(&self) -> bool {
        self.outstanding_count + 1 >= self.limit()
    }

    /// Sequences that may await their acknowledgement now.
    fn limit(&self) -> usize {
        self.congestion_window
            .map_or(self.window, |c| c.min(self.window))
    }

    /// Whether a sequence (a resend or a new one) is waiting and the window has room for it.
    pub fn has_work(&self) -> bool {
        if self.probe.is_some_and(|s| !self.acked[s as usize]) {
            return true;
        }
        (self.overdraft || self.outstanding_count < self.limit()) && self.waiting()
    }

    /// Whether a sequence waits to be sent: a resend or a new one.
    fn waiting(&self) -> bool {
        self.cursor < self.ready || self.resend.iter().any(|&s| !self.acked[s as usize])
    }

    /// The sequence to send next — a resend first — and whether it is a resend; `None` when
    /// the window is full or nothing is left.
    pub fn next_seq(&mut self) -> Option<(u32, bool)> {
        if let Some(s) = self.probe.take() {
            if !self.acked[s as usize] {
                return Some((s, true));
            }
        }
        if self.outstanding_count >= self.limit() && !(self.overdraft && self.waiting()) {
            return None;
        }
        // Whatever goes next is the probe's packet (past the window or not).
        self.overdraft = false;
        while let Some(s) = self.resend.pop_front() {
            if !self.acked[s as usize] {
                return Some((s, true));
            }
        }
        if self.cursor < self.ready {
            self.cursor += 1;
            return Some(((self.cursor - 1) as u32, false));
        }
        None
    }

    /// Sequence `seq` left at `now`.
    pub fn sent(&mut self, now: Nanos, seq: u32, again: bool) {
        let s = seq as usize;
        if again {
            self.resent.set(s, true);
        }
        self.sent_at[s] = now;
        self.last_send = now;
        self.inflight.push_back((now, seq));
        if !self.outstanding.replace(s, true) {
            self.outstanding_count += 1;
        }
    }

    /// The acknowledgement of sequence `s` (checked by the caller); true when it is new.
    pub fn on_ack(&mut self, now: Nanos, s: usize) -> bool {
        self.settle(s);
        let new = !self.acked.replace(s, true);
        // Acknowledged entries leave the front at once, so that the next deadline is that of
        // the oldest chunk still unacknowledged (RACK looks there for an overtaken one).
        while let Some(&entry) = self.inflight.front() {
            if self.is_live(entry) {
                break;
            }
            self.inflight.pop_front();
        }
        if new {
            self.backoff = 1;
            self.probes = 0;
            self.rack = self.rack.max(self.sent_at[s]);
            if let Some(&p) = self.paths.get(s) {
                let r = &mut self.path_racks[usize::from(p)];
                *r = (*r).max(self.sent_at[s]);
            }
            if !self.resent[s] {
                self.rtt.sample(now.saturating_sub(self.sent_at[s]));
            }
        }
        new
    }

    /// Queue for resending what timed out or was overtaken; true when anything was lost (a
    /// congestion signal).
    pub fn on_timeout(&mut self, now: Nanos, floor: Nanos) -> bool {
        let rto = self.timeout(floor);
        let mut timed_out = false;
        let mut lost = false;
        while let Some(&(sent, seq)) = self.inflight.front() {
            if !self.is_live((sent, seq)) {
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
        if self.probe_due(floor).is_some_and(|t| t <= now) {
            // Not a loss: no backoff, no congestion signal. Over one path the next waiting
            // packet goes past the window, or the newest in flight again when none waits. Over
            // many, the newest in flight on the path of the oldest one goes again: only an ack
            // on that path shows what it lost.
            if self.single_path && self.waiting() {
                self.overdraft = true;
            } else {
                // The path of the oldest packet in flight (none over one path: any will do).
                let path_of = |seq: u32| self.paths.get(seq as usize).copied();
                let oldest_path = self
                    .inflight
                    .iter()
                    .find(|&&entry| self.is_live(entry))
                    .and_then(|&(_, seq)| path_of(seq));
                self.probe = self
                    .inflight
                    .iter()
                    .rev()
                    .find(|&&(sent, seq)| {
                        self.is_live((sent, seq))
                            && (oldest_path.is_none() || path_of(seq) == oldest_path)
                    })
                    .map(|&(_, seq)| seq);
            }
            self.probes += 1;
        }
        timed_out || lost
    }

    /// When a loss probe is due, when packets are in flight: two round trips after the latest
    /// send, or the round trip plus four times its variation when that is longer (QUIC's
    /// probe timeout: on a busy host whose acks come late, probes must not turn into
    /// spurious resends), at least a thirty-second of the floor (625 µs at the 20 ms of
    /// `Timeouts::default()`; an eighth cost the in-network kinds a tenth of their time on
    /// Cora at 1% loss, a lost tail chunk its receivers cannot fetch around); doubled for
    /// every probe since the latest new acknowledgement, and never later than the timeout.
    fn probe_due(&self, floor: Nanos) -> Option<Nanos> {
        if self.probe.is_some() || self.overdraft || self.outstanding_count == 0 {
            return None;
        }
        let srtt = self.rtt.srtt()?;
        let pto = (2 * srtt).max(self.rtt.rto(floor / 32)) << self.probes.min(16);
        Some(self.last_send + pto.min(self.timeout(floor)))
    }

    /// When [`Reliable::on_timeout`] has something to do next.
    pub fn deadline(&self, floor: Nanos) -> Option<Nanos> {
        let rto = self.timeout(floor);
        let front = self.inflight.front().map(|&(sent, seq)| {
            if self.is_live((sent, seq)) && self.overtaken(sent) {
                sent
            } else {
                sent + rto
            }
        });
        [front, self.probe_due(floor)].into_iter().flatten().min()
    }

    /// After an acknowledgement from `path`: queue for resending every sequence on it that
    /// was overtaken — sent more than a quarter of the round trip before one acknowledged on
    /// the same path (SACK with RACK's reordering window). Whether any was.
    pub fn detect_losses(&mut self, path: u16) -> bool {
        let (Some(srtt), Some(&rack)) = (self.rtt.srtt(), self.path_racks.get(usize::from(path)))
        else {
            return false;
        };
        let before = self.resend.len();
        for i in 0..self.inflight.len() {
            let (sent, seq) = self.inflight[i];
            // In send order: nothing after the first one not overtaken was overtaken either.
            if sent + srtt / 4 >= rack {
                break;
            }
            if self.paths[seq as usize] == path && self.is_live((sent, seq)) {
                self.settle(seq as usize);
                self.resend.push_back(seq);
            }
        }
        self.resend.len() > before
    }

    /// Whether an in-flight entry still stands for its sequence: not acknowledged, not queued
    /// again, and not sent again since (a later entry stands for it then).
    fn is_live(&self, (sent, seq): (Nanos, u32)) -> bool {
        let s = seq as usize;
        !self.acked[s] && self.outstanding[s] && self.sent_at[s] == sent
    }

    /// The smoothed round-trip time, once one has been measured.
    pub fn srtt(&self) -> Option<Nanos> {
        self.rtt.srtt()
    }

    /// The retransmission timeout now: the round-trip estimate (at least `floor`), backed off.
    fn timeout(&self, floor: Nanos) -> Nanos {
        self.rtt
            .rto(floor)
            .saturating_mul(Nanos::from(self.backoff.max(1)))
    }

    /// Whether a chunk sent at `sent` was overtaken: one sent more than a quarter of the
    /// round trip after it has been acknowledged.
    fn overtaken(&self, sent: Nanos) -> bool {
        if !self.single_path {
            return false;
        }
        match self.rtt.srtt() {
            Some(srtt) => sent + srtt / 4 < self.rack,
            None => false,
        }
    }

    /// Sequence `s` no longer awaits its ack (acknowledged or timed out).
    fn settle(&mut self, s: usize) {
        if self.outstanding.replace(s, false) {
            self.outstanding_count -= 1;
        }
    }
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
    /// Take one round-trip measurement into the estimate.
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

    /// The smoothed round-trip time, if any sample has been taken.
    pub fn srtt(&self) -> Option<Nanos> {
        self.srtt.map(|s| s as Nanos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quiet_tail_is_probed_after_a_round_trip_and_its_variation_then_less_often() {
        let mut r = Reliable::new(2);
        r.reset(3);
        for (t, s) in [(0, 0), (0, 1)] {
            assert_eq!(r.next_seq(), Some((s, false)));
            r.sent(t, s, false);
        }
        // The window is full; sequence 0's ack at 1,000 ns frees it (round trip 1,000, its
        // variation 500 after one sample).
        assert_eq!(r.next_seq(), None);
        assert!(r.on_ack(1_000, 0));
        assert_eq!(r.next_seq(), Some((2, false)));
        r.sent(1_000, 2, false);
        // Nothing new is left, 1 and 2 are in flight: a probe is due the round trip plus four
        // variations (3,000) after the latest send, before the 8,000 ns timeout, and never
        // sooner than a thirty-second of the floor.
        assert_eq!(r.deadline(8_000), Some(1_000 + 3_000));
        assert_eq!(r.probe_due(320_000), Some(1_000 + 10_000));
        assert!(!r.on_timeout(4_000, 8_000), "a probe is no loss");
        // The newest packet goes again, ahead of the (full) window.
        assert!(r.has_work());
        assert_eq!(r.next_seq(), Some((2, true)));
        r.sent(4_000, 2, true);
        // No ack: the next probe waits twice as long, never longer than the timeout (which
        // comes first now, for sequence 1 sent at 0).
        assert_eq!(r.probe_due(320_000), Some(4_000 + 20_000));
        assert_eq!(r.probe_due(8_000), Some(4_000 + 6_000));
        assert_eq!(r.probe_due(5_000), Some(4_000 + 5_000));
        assert_eq!(r.deadline(8_000), Some(8_000));
        // A new ack starts over (of a resent packet: no round-trip sample, Karn).
        assert!(r.on_ack(4_500, 2));
        assert_eq!(r.probe_due(8_000), Some(4_000 + 3_000));
    }

    #[test]
    fn a_probe_sends_past_a_full_window_what_waits() {
        let mut r = Reliable::new(1);
        r.reset(3);
        assert_eq!(r.next_seq(), Some((0, false)));
        r.sent(0, 0, false);
        assert!(r.on_ack(1_000, 0));
        assert_eq!(r.next_seq(), Some((1, false)));
        r.sent(1_000, 1, false);
        // Sequence 1 is lost: the window stays full and 2 waits.
        assert!(!r.has_work());
        assert!(!r.on_timeout(3_999, 8_000));
        assert!(!r.has_work());
        assert!(!r.on_timeout(4_000, 8_000));
        // The probe is sequence 2, one past the window: its ack shows 1 lost.
        assert!(r.has_work());
        assert_eq!(r.next_seq(), Some((2, false)));
        r.sent(4_000, 2, false);
        assert_eq!(r.next_seq(), None, "one probe, one packet");
    }

    #[test]
    fn over_many_paths_the_probe_goes_where_the_oldest_packet_waits() {
        let mut r = Reliable::new(8).multi_path();
        r.reset(4);
        r.set_paths([0, 1, 0, 1]);
        for s in 0..4 {
            assert_eq!(r.next_seq(), Some((s, false)));
            r.sent(u64::from(s), s, false);
        }
        // Path 1's packets are acked; path 0's are not (the first of them lost).
        assert!(r.on_ack(1_000, 1));
        assert!(r.on_ack(1_003, 3));
        assert!(!r.detect_losses(1));
        // Probe: the newest packet on path 0 (sequence 2), not the newest of all (3, acked).
        assert!(!r.on_timeout(3_000, 8_000));
        assert_eq!(r.next_seq(), Some((2, true)));
        r.sent(3_000, 2, true);
        // Its ack overtakes sequence 0 on path 0: lost, resent at once.
        assert!(r.on_ack(4_000, 2));
        assert!(r.detect_losses(0));
        assert_eq!(r.next_seq(), Some((0, true)));
    }
}

//! Congestion control behind a trait (as quinn does it): the engine asks for a sending rate and
//! reports acknowledgements, ECN echoes and timeouts; the controller decides.

use std::fmt::Debug;

use crate::Nanos;

/// A sending-rate controller for one worker's uplink.
pub trait Controller: Debug + Send {
    /// Current rate in bytes per second; `f64::INFINITY` sends without pacing.
    fn rate(&self) -> f64;
    /// Packets that may await their acknowledgement at once (a congestion window), on top of
    /// the engine's configured window; `usize::MAX` leaves that window alone.
    fn window(&self) -> usize {
        usize::MAX
    }
    /// An acknowledgement of `bytes` arrived; `ecn` says the switch saw congestion.
    fn on_ack(&mut self, now: Nanos, bytes: usize, ecn: bool);
    /// A retransmission timer fired, or a receiver asked for a packet that was lost.
    fn on_timeout(&mut self, now: Nanos);
    /// A packet left. Lets a controller recover its rate where no acknowledgements come
    /// back (the host exchange).
    fn on_sent(&mut self, _now: Nanos) {}
    /// Bytes a paced sender may send ahead of its rate (the engine caps it at a millisecond's
    /// worth): it sends in bursts of up to this many bytes, the rate still holding on average.
    /// 0 (the default) paces packet by packet, as a simulated link with exact timers can; a
    /// real host wakes up every few tens of microseconds at best, and sends what is due in one
    /// batch (as TCP's TSO bursts do).
    fn burst(&self) -> usize {
        0
    }
}

/// No pacing at all: every packet goes as soon as it is ready (tests, and links that cannot
/// congest).
#[derive(Debug, Clone, Copy, Default)]
pub struct Unpaced;

impl Controller for Unpaced {
    fn rate(&self) -> f64 {
        f64::INFINITY
    }
    fn on_ack(&mut self, _: Nanos, _: usize, _: bool) {}
    fn on_timeout(&mut self, _: Nanos) {}
}

/// A controller that never hears of ECN marks (each acknowledgement is passed on unmarked):
/// what a sender without ECN-based congestion control does, for comparison.
#[derive(Debug, Clone)]
pub struct IgnoreEcn<C>(pub C);

impl<C: Controller> Controller for IgnoreEcn<C> {
    fn rate(&self) -> f64 {
        self.0.rate()
    }
    fn window(&self) -> usize {
        self.0.window()
    }
    fn on_ack(&mut self, now: Nanos, bytes: usize, _ecn: bool) {
        self.0.on_ack(now, bytes, false);
    }
    fn on_timeout(&mut self, now: Nanos) {
        self.0.on_timeout(now);
    }
    fn on_sent(&mut self, now: Nanos) {
        self.0.on_sent(now);
    }
    fn burst(&self) -> usize {
        self.0.burst()
    }
}

/// DCQCN-like AIMD: halve the rate on an ECN echo (at most once per `cut_interval`, so one
/// burst of marks is one cut), and grow it by `increase` bytes/s for every `increase_interval`
/// without a mark, up to the line rate. A loss (a retransmission timeout, a packet overtaken)
/// also halves.
///
/// With [`Aimd::with_window`] it keeps a congestion window as TCP does beside the rate: the
/// same events halve it (never below one packet), and every window's worth of unmarked
/// acknowledged bytes grows it by one packet, up to the given maximum. A packet is a chunk
/// packet's payload ([`WINDOW_UNIT`] bytes): an ack of a packed host packet, about five chunks'
/// worth, grows the window as five chunk acks would (TCP counts bytes acknowledged likewise,
/// RFC 3465), so that acks coalesced or carrying bigger packets do not slow its growth. The rate alone cannot
/// stop a sender whose packets wait in a slow switch's queue; the window can.
///
/// With [`Aimd::proportional`] an ECN cut takes off half the fraction of acknowledgements that
/// came back marked (DCTCP's α, also DCQCN's) instead of half the rate: a queue that is just
/// above the marking threshold costs a few percent, a full one still halves. Losses halve.
#[derive(Debug, Clone)]
pub struct Aimd {
    /// Highest rate, bytes per second.
    pub line_rate: f64,
    /// Lowest rate a cut can reach, bytes per second.
    pub min_rate: f64,
    /// Additive step, bytes per second per `increase_interval`.
    pub increase: f64,
    /// Time without a mark per additive step, nanoseconds.
    pub increase_interval: Nanos,
    /// Shortest time between two cuts, nanoseconds.
    pub cut_interval: Nanos,
    rate: f64,
    last_cut: Option<Nanos>,
    last_growth: Nanos,
    /// The congestion window in packets and its ceiling; `None`: no window.
    cwnd: Option<(f64, usize)>,
    /// The marked fraction an ECN cut scales by; `None`: ECN cuts halve.
    marked: Option<MarkedFraction>,
    /// Bytes the sender may run ahead of the rate ([`Controller::burst`]); 0 by default.
    pub burst: usize,
    /// What a loss keeps of rate and window when no acknowledgement echoed a mark within
    /// two cut intervals before it: 0.5 (a loss is congestion) unless
    /// [`Aimd::with_unmarked_loss_keep`] says otherwise.
    unmarked_loss_keep: f64,
    /// When an acknowledgement last echoed a mark.
    last_mark: Option<Nanos>,
}

/// The payload bytes of one packet of a congestion window: a full chunk, 64 lanes of 4 bytes.
pub const WINDOW_UNIT: usize = 4 * crate::wire::MAX_LANES;

/// DCTCP's running estimate of the fraction of acknowledgements that echo a mark: once per
/// period (a cut interval, about a round trip), `alpha ← (1 − gain)·alpha + gain·F`, with `F`
/// the period's marked fraction.
#[derive(Debug, Clone, Copy)]
struct MarkedFraction {
    alpha: f64,
    gain: f64,
    acked: u32,
    echoed: u32,
    period_start: Nanos,
}

impl MarkedFraction {
    /// Count one acknowledgement; close the period when `period` has passed.
    fn count(&mut self, now: Nanos, ecn: bool, period: Nanos) {
        self.acked += 1;
        self.echoed += u32::from(ecn);
        if now.saturating_sub(self.period_start) >= period {
            let f = f64::from(self.echoed) / f64::from(self.acked);
            self.alpha = (1.0 - self.gain) * self.alpha + self.gain * f;
            self.acked = 0;
            self.echoed = 0;
            self.period_start = now;
        }
    }
}

impl Aimd {
    /// Start at line rate `line_rate` (bytes/s); the additive step is 1/64 of it every 5 µs,
    /// cuts at most every 10 µs, and the rate never falls below 1/1000 of the line rate.
    pub fn new(line_rate: f64) -> Aimd {
        Aimd {
            line_rate,
            min_rate: line_rate / 1000.0,
            increase: line_rate / 64.0,
            increase_interval: 5_000,
            cut_interval: 10_000,
            rate: line_rate,
            last_cut: None,
            last_growth: 0,
            cwnd: None,
            marked: None,
            burst: 0,
            unmarked_loss_keep: 0.5,
            last_mark: None,
        }
    }

    /// Cut on ECN by half the marked fraction (see the type's comment), DCTCP's gain of 1/16,
    /// starting from a fraction of 1 (the first cuts halve, as DCTCP's do).
    pub fn proportional(mut self) -> Aimd {
        self.marked = Some(MarkedFraction {
            alpha: 1.0,
            gain: 1.0 / 16.0,
            acked: 0,
            echoed: 0,
            period_start: 0,
        });
        self
    }

    /// Where the switch marks ECN before its queues overflow, a loss with no mark echoed
    /// in the two cut intervals before it more likely came from a bad link than a full queue: it
    /// keeps `keep` of rate and window (TCP Veno's 4/5 for what it judges random loss, by
    /// its backlog estimate; the marks are this controller's estimate), not half. A loss
    /// after a mark still halves. On a link that loses 1% at random, halving held the
    /// host-only kinds to 1.7× their lossless time on Amazon-Computers.
    pub fn with_unmarked_loss_keep(mut self, keep: f64) -> Aimd {
        self.unmarked_loss_keep = keep.clamp(0.5, 1.0);
        self
    }

    /// The marked-fraction estimate, when ECN cuts are proportional.
    pub fn marked_fraction(&self) -> Option<f64> {
        self.marked.map(|m| m.alpha)
    }

    /// Also keep a congestion window of at most `max` packets, starting full.
    pub fn with_window(mut self, max: usize) -> Aimd {
        let max = max.max(1);
        self.cwnd = Some((max as f64, max));
        self
    }

    /// 100 Gbps, the paper's links.
    pub fn hundred_gbps() -> Aimd {
        Aimd::new(100e9 / 8.0)
    }

    /// Additive increase for every whole interval since the last growth (or cut).
    fn grow(&mut self, now: Nanos) {
        let steps = now.saturating_sub(self.last_growth) / self.increase_interval.max(1);
        if steps > 0 {
            self.rate = (self.rate + steps as f64 * self.increase).min(self.line_rate);
            self.last_growth += steps * self.increase_interval;
        }
    }

    /// Multiply rate and window by `keep`, at most once per cut interval.
    fn cut(&mut self, now: Nanos, keep: f64) {
        if self
            .last_cut
            .is_some_and(|t| now.saturating_sub(t) < self.cut_interval)
        {
            return;
        }
        self.rate = (self.rate * keep).max(self.min_rate);
        if let Some((w, _)) = &mut self.cwnd {
            *w = (*w * keep).max(1.0);
        }
        self.last_cut = Some(now);
        self.last_growth = now;
    }
}

impl Controller for Aimd {
    fn rate(&self) -> f64 {
        self.rate
    }

    fn window(&self) -> usize {
        self.cwnd.map_or(usize::MAX, |(w, _)| w as usize)
    }

    fn burst(&self) -> usize {
        self.burst
    }

    fn on_ack(&mut self, now: Nanos, bytes: usize, ecn: bool) {
        if ecn {
            self.last_mark = Some(now);
        }
        if let Some(m) = &mut self.marked {
            m.count(now, ecn, self.cut_interval);
        }
        if ecn {
            let keep = self.marked.map_or(0.5, |m| 1.0 - m.alpha / 2.0);
            self.cut(now, keep);
            return;
        }
        self.grow(now);
        if let Some((w, max)) = &mut self.cwnd {
            let packets = bytes as f64 / WINDOW_UNIT as f64;
            *w = (*w + packets / *w).min(*max as f64);
        }
    }

    fn on_timeout(&mut self, now: Nanos) {
        // (Two intervals: the mark's own cut holds off any other for one.)
        let marked = self
            .last_mark
            .is_some_and(|t| now.saturating_sub(t) < 2 * self.cut_interval);
        self.cut(now, if marked { 0.5 } else { self.unmarked_loss_keep });
    }

    fn on_sent(&mut self, now: Nanos) {
        self.grow(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loss_after_a_mark_halves_and_an_unmarked_one_keeps_more() {
        let mut cc = Aimd::new(1000.0).with_unmarked_loss_keep(0.8);
        cc.on_timeout(0);
        assert_eq!(cc.rate(), 800.0, "no mark before it: a random loss");
        cc.on_ack(20_000, 100, true);
        assert_eq!(cc.rate(), 400.0, "the mark itself halves");
        cc.on_timeout(35_000);
        assert_eq!(cc.rate(), 200.0, "a loss soon after a mark halves");
        cc.on_timeout(100_000);
        assert_eq!(cc.rate(), 160.0, "long after the mark: random again");
        // Without the option every loss halves.
        let mut plain = Aimd::new(1000.0);
        plain.on_timeout(0);
        assert_eq!(plain.rate(), 500.0);
    }

    #[test]
    fn aimd_halves_once_per_burst_and_recovers_additively() {
        let mut cc = Aimd::new(1000.0);
        cc.on_ack(1_000, 100, true);
        assert_eq!(cc.rate(), 500.0);
        // A second mark inside the cut interval is the same congestion event.
        cc.on_ack(2_000, 100, true);
        assert_eq!(cc.rate(), 500.0);
        cc.on_ack(20_000, 100, true);
        assert_eq!(cc.rate(), 250.0);
        // 3 increase intervals later, 3 steps of 1000/64.
        cc.on_ack(35_000, 100, false);
        assert_eq!(cc.rate(), 250.0 + 3.0 * 1000.0 / 64.0);
        // Never above the line rate, never below the floor.
        cc.on_ack(10_000_000, 100, false);
        assert_eq!(cc.rate(), 1000.0);
        for i in 0..40 {
            cc.on_timeout(20_000_000 + i * 20_000);
        }
        assert_eq!(cc.rate(), 1.0);
        assert_eq!(cc.window(), usize::MAX, "no window unless asked for");
    }

    #[test]
    fn the_window_halves_with_the_rate_and_grows_by_one_per_window() {
        let mut cc = Aimd::new(1000.0).with_window(64);
        assert_eq!(cc.window(), 64);
        cc.on_timeout(1_000);
        assert_eq!(cc.window(), 32);
        // The same loss burst (inside the cut interval) is one cut.
        cc.on_timeout(2_000);
        assert_eq!(cc.window(), 32);
        cc.on_ack(20_000, 100, true);
        assert_eq!(cc.window(), 16);
        // A window's worth of unmarked acks of a packet each (the window grows on the way):
        // one more packet.
        for _ in 0..17 {
            cc.on_ack(30_000, WINDOW_UNIT, false);
        }
        assert_eq!(cc.window(), 17);
        // Growth counts bytes: an ack of five packets' worth grows it as five acks would.
        let mut one_by_one = cc.clone();
        for _ in 0..5 {
            one_by_one.on_ack(30_000, WINDOW_UNIT, false);
        }
        cc.on_ack(30_000, 5 * WINDOW_UNIT, false);
        assert_eq!(cc.window(), 17);
        let (w, w5) = (cc.cwnd.unwrap().0, one_by_one.cwnd.unwrap().0);
        assert!((w - w5).abs() < 0.01, "{w} against {w5}");
        assert!(w > 17.25, "{w}");
        // Never below one packet, never above the maximum.
        for i in 0..20 {
            cc.on_timeout(100_000 + i * 20_000);
        }
        assert_eq!(cc.window(), 1);
        for _ in 0..10_000 {
            cc.on_ack(10_000_000, 100, false);
        }
        assert_eq!(cc.window(), 64);
    }

    #[test]
    fn a_proportional_cut_follows_the_marked_fraction() {
        let mut cc = Aimd::new(1000.0).proportional().with_window(64);
        // The estimate starts at 1: the first cut halves, as DCTCP's first does.
        cc.on_ack(1_000, 100, true);
        assert_eq!(cc.rate(), 500.0);
        assert_eq!(cc.window(), 32);
        // Each period moves the estimate 1/16 of the way to its marked fraction.
        let mut now = 1_000;
        for _ in 0..2_000 {
            now += 1_000;
            cc.on_ack(now, 100, false);
        }
        let settled = cc.marked_fraction().unwrap();
        assert!(settled < 0.01, "no marks for 200 periods: {settled}");
        for _ in 0..100 {
            for i in 0..10 {
                now += 1_100;
                cc.on_ack(now, 100, i == 9);
            }
        }
        let alpha = cc.marked_fraction().unwrap();
        assert!((alpha - 0.1).abs() < 0.02, "one in ten marked: {alpha}");
        // A cut now takes off alpha/2, not half.
        let before = cc.rate();
        now += 20_000;
        cc.on_ack(now, 100, true);
        let kept = cc.rate() / before;
        assert!(kept > 0.9 && kept < 0.97, "kept {kept} of the rate");
        // A loss still halves.
        let before = cc.rate();
        cc.on_timeout(now + 20_000);
        assert_eq!(cc.rate(), before / 2.0);
        assert_eq!(Aimd::new(1000.0).marked_fraction(), None);
    }
}

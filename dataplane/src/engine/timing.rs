//! Pacing and patience: when the engine may send next, and how long it waits before it
//! fetches what is missing.

use super::receive::Receiver;
use super::{Engine, Phase, SendStrategy};
use crate::node::Nanos;

impl<S: SendStrategy> Engine<S> {
    pub(super) fn pace(&mut self, len: usize) {
        self.cc.on_sent(self.now);
        let rate = self.cc.rate();
        let gap = if rate.is_finite() && rate > 0.0 {
            (len as f64 / rate * 1e9) as Nanos
        } else {
            0
        };
        self.next_send = self.next_send.max(self.now) + gap;
    }

    /// How far ahead of the pacer's schedule a packet may leave, ns: the controller's burst at
    /// the current rate, and never more than a millisecond of it (as the kernel sizes TCP's
    /// offload bursts): on a slow link a burst of 64 KiB would be a long stretch unpaced.
    pub(super) fn pacing_slack(&self) -> Nanos {
        const MOST: Nanos = 1_000_000;
        let (burst, rate) = (self.cc.burst(), self.cc.rate());
        if burst == 0 || !rate.is_finite() || rate <= 0.0 {
            return 0;
        }
        ((burst as f64 / rate * 1e9) as Nanos).min(MOST)
    }

    /// When the pacer next lets something go: once half a burst is due, so that a sender
    /// that wakes up for it sends a batch, not one packet per wake-up.
    pub(super) fn pacing_deadline(&self) -> Nanos {
        self.next_send.saturating_sub(self.pacing_slack() / 2)
    }

    /// Let the congestion controller's window bound what the sender has outstanding.
    pub(super) fn sync_window(&mut self) {
        let w = self.cc.window();
        if w != usize::MAX {
            self.sender.set_congestion_window(w);
        }
    }

    pub(super) fn count_sent(&mut self, len: usize) {
        self.stats.packets_sent += 1;
        self.stats.bytes_sent += len as u64;
    }

    /// How long to wait for results before fetching: the result timeout, and never shorter
    /// than a few measured round trips (on a slow path, late results must not set off fetch
    /// rounds) — unless the switch acknowledges what is sent and the round trip is no longer
    /// than the block's floor: the switch's acks leave after the packet's passes, so such a
    /// round trip may be all the chip's own queue, which the floor has waited out already. A
    /// longer one holds the network's queues too, and counts. (Host-exchange copies are
    /// acknowledged by their receivers: that round trip is the network's.)
    ///
    /// Holes in the switch's numbering of what it sent here that account for every sum still
    /// missing are evidence of loss rather than slowness: then a loss's patience is enough
    /// (`losses_explain_the_rest`, `loss_patience`).
    pub(super) fn patience(&self) -> Nanos {
        if self.losses_explain_the_rest() {
            return self.loss_patience();
        }
        let result = self.cfg.timers.result;
        let srtt = self.sender.srtt().unwrap_or(0);
        if self.plan.mode.switch_aggregates() && srtt <= self.block_floor() {
            return result;
        }
        result.max(4 * srtt)
    }

    /// Whether the holes in the switch's numbers could account for every sum still missing:
    /// then what is missing was lost, not late, and a loss's patience is enough. While more
    /// sums are missing than packets were lost, the rest are on their way (other workers
    /// still sending, a slow chip): a round then would fetch sums that are merely late — and a
    /// fetched copy releases the aggregator, so each such fetch turns one destination over to
    /// its host. So a round on holes touches at most as many destinations as were lost.
    pub(super) fn losses_explain_the_rest(&self) -> bool {
        let left = self.receiver.as_ref().map_or(0, Receiver::left);
        left > 0 && left <= self.holes.count()
    }

    /// How long to wait for what a loss has held up: a round trip, and at least the
    /// [`Engine::least_wait`]; at most the result timeout. One round trip is enough because
    /// what it waits for is evidence already: holes in the switch's numbering as many as the
    /// sums missing (only packets reordered between the switch's cores may still fill them),
    /// an unanswered report, a fetch round's replies. (Four round trips and an eighth of the
    /// floor cost SwitchGNN on Cora at 1% loss half its lossless time again: every loss
    /// waited 2.5 ms on an exchange of 30 ms.)
    pub(super) fn loss_patience(&self) -> Nanos {
        let srtt = self.sender.srtt().unwrap_or(0);
        srtt.max(self.least_wait()).min(self.cfg.timers.result)
    }

    /// The shortest wait for anything a loss holds up: a thirty-second of the retransmission
    /// floor (625 µs at the 20 ms of `Timeouts::default()`), so that a process that waits a
    /// moment for a core sets off no storm of repeats. What a wait that short gets wrong costs
    /// a duplicate (a repeated report, a second fetch reply), never exactness.
    pub(super) fn least_wait(&self) -> Nanos {
        self.cfg.timers.rto / 32
    }

    /// How long until the join or block-done report just sent goes again (and count it
    /// sent): after a loss's patience
    /// and at least an eighth of the control timer, doubling with every repeat up to the
    /// control timer. The switch answers neither until every worker has sent its own, so a
    /// lost report and a slow peer look alike: the first repeats come soon (a lost report
    /// costs a fraction of the control timer), later ones seldom (a worker that waits long
    /// for its peers sends few). Not sooner than that eighth: every repeat takes a pass of
    /// the switch's pipeline, and the simulated Tofino 2 with 32 workers ran the hybrid on
    /// Amazon-Computers 1.36× slower when 32 workers repeated every 1.5 µs at first.
    pub(super) fn next_control_interval(&mut self) -> Nanos {
        let n = self.control_sent.min(16);
        self.control_sent = self.control_sent.saturating_add(1);
        let control = self.cfg.timers.control;
        let first = self.loss_patience().max(control / 8);
        (first << n).min(control)
    }

    /// How long a fetch may go unanswered before it is asked again: its owner answers at
    /// once, so the fetches' own round trip and variation (RFC 6298's timeout over the
    /// replies to first requests), at least the least wait. Before any reply came, twice
    /// four round trips of the sender's, at least a quarter of the retransmission floor and
    /// at most twice the result timeout: a round whose replies are all lost (an outage, a
    /// worker cut off) gives no measure, and asking again at the pace of a loss's patience
    /// then only feeds a queue of stale requests.
    pub(super) fn refetch_wait(&self) -> Nanos {
        if self.fetch_rtt.srtt().is_none() {
            let t = self.cfg.timers;
            let srtt = self.sender.srtt().unwrap_or(0);
            return 2 * (4 * srtt).max(t.rto / 8).min(t.result);
        }
        self.fetch_rtt.rto(self.least_wait())
    }

    /// The running block's floor (0 when none is known).
    pub(super) fn block_floor(&self) -> Nanos {
        self.current_block()
            .and_then(|b| self.block_floors.get(usize::from(b)))
            .copied()
            .unwrap_or(0)
    }

    pub(super) fn progress_deadline(&self) -> Option<Nanos> {
        match (self.phase, &self.receiver) {
            (Phase::Running(_), Some(r)) if !r.is_complete() => {
                let floor = self.block_started.saturating_add(self.block_floor());
                Some((self.last_progress + self.patience()).max(floor))
            }
            _ => None,
        }
    }

    /// When to ask the switch where its numbering of what it sends here stands, once this
    /// worker's rows are all out: a loss's patience into a quiet spell that the holes seen
    /// do not explain, then twice, four times … that long (a slow chip sends late sums far
    /// apart), and never once the quiet deadline is due (the round goes out then anyway).
    /// The reply shows the holes at the tail of the stream, where no later packet can; then
    /// the round need not wait for the result timeout.
    pub(super) fn stamps_deadline(&self) -> Option<Nanos> {
        if !self.plan.mode.switch_aggregates()
            || !self.sender.queue().all_sent()
            || self.losses_explain_the_rest()
        {
            return None;
        }
        let quiet = self.progress_deadline()?;
        let asked = if self.stamps_progress == self.last_progress {
            self.stamps_asked
        } else {
            0
        };
        let t = self
            .last_progress
            .saturating_add(self.loss_patience() << asked.min(16));
        (t < quiet).then_some(t)
    }

    /// When the fetches still unanswered are due again: a fetch is answered at once by its
    /// owner, so one unanswered for longer than the fetches' round trips take was lost
    /// (`refetch_wait`).
    pub(super) fn refetch_deadline(&self) -> Option<Nanos> {
        match (self.phase, &self.receiver) {
            (Phase::Running(_), Some(r)) if !r.is_complete() => self.fetch_due,
            _ => None,
        }
    }

    /// The most replies and requests this worker queues: a window's worth from each worker
    /// (what every peer may have asked for in one round).
    pub(super) fn reply_queue_limit(&self) -> usize {
        self.cfg
            .window
            .saturating_mul(usize::from(self.plan.workers).max(1))
    }

    pub(super) fn has_paced_work(&self) -> bool {
        !self.recovery.is_empty() || self.sender.has_work()
    }
}

//! Acknowledgements of the packed host copies this worker receives: held back a moment to
//! cover several packets, then sent in ranges.

use super::{Engine, SendStrategy};
use crate::node::{Address, Nanos};
use crate::wire::{emit_ack_ranges, PacketType};

impl<S: SendStrategy> Engine<S> {
    /// Acknowledge every range held of `worker`'s packed copies, from the vertex of ours they
    /// were addressed to back to a vertex of the sender, echoing any congestion mark (as TCP's
    /// ECE does).
    pub(super) fn send_ack(&mut self, worker: u16) {
        let mut h = self.header(PacketType::Rows);
        let ack = self.acks.take(worker);
        h.flags.ack = true;
        h.flags.ecn = ack.ecn;
        h.block = ack.block;
        h.src = ack.our_vertex;
        h.dst = ack.sender_vertex;
        h.count = ack.ranges.len() as u16;
        h.sequence = ack.ranges.last().map_or(0, |r| r.1);
        let ranges = ack.ranges;
        self.stats.acks_sent += 1;
        self.control.push_with(Address::Switch, |buf| {
            let len = h.emit_with_lanes(&[], buf);
            len + emit_ack_ranges(ranges, &mut buf[len..])
        });
    }

    /// Send the held-back acks due at `now`.
    pub(super) fn send_due_acks(&mut self, now: Nanos) {
        // Sending an ack clears its deadline, so this ends.
        loop {
            let Some(worker) = self.acks.due(now).next() else {
                break;
            };
            self.send_ack(worker);
        }
    }

    /// Send every held-back ack now.
    pub(super) fn flush_acks(&mut self) {
        self.send_due_acks(Nanos::MAX);
    }

    /// How long a receiver holds an ack back waiting for more packets: a quarter of the
    /// retransmission floor, so that a held ack never sets off a retransmission, and at most
    /// 250 µs (a few round trips of a loopback or a data-centre path), so that a sender whose
    /// window holds fewer than `ack_every` packets for this worker does not wait long.
    pub(super) fn ack_delay(&self) -> Nanos {
        (self.cfg.timers.rto / 4).min(250_000)
    }
}

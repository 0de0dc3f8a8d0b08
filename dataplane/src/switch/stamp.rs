//! Egress sequence numbers: the switch numbers what it sends each worker port that the worker
//! does not acknowledge — sums ([`PacketType::Result`]) and raw copies ([`PacketType::Raw`]:
//! forwarded contributions and fetch replies) — 0, 1, 2, … per port, in the order they leave.
//!
//! Nothing else tells a worker that such a packet was lost: it cannot tell a sum that is late
//! (a slow chip) from one that will never come, so without numbers it waits out its result
//! timeout before it fetches. With them, a hole in the numbers that is still open once the
//! stream falls quiet is a loss ([`crate::engine`] then recovers within a few round trips).
//! The P4 program does the same in its egress (`p4/include/egress.p4`, register `stamps`).
//!
//! The numbers cannot show the loss of the last packets of a stream (nothing comes after
//! them), nor of the first ones of an exchange (its engine does not know where its stream
//! began). So a worker may ask ([`PacketType::Stamps`]): the reply leaves behind everything
//! numbered before it and carries the next number, unused.

use crate::node::{Address, Transmit};
use crate::wire::{Packet, PacketType};

/// The next sequence number of each worker port. The switch model numbers what it emits; the
/// simulator numbers again as packets leave its simulated chip, after the passes that finish
/// out of emission order, as a chip's egress does.
#[derive(Debug, Clone, Default)]
pub struct EgressStamps {
    next: Vec<u32>,
}

impl EgressStamps {
    /// Number the packet `t` wrote at the front of `buf` when it is one the switch numbers.
    pub fn stamp(&mut self, t: &Transmit, buf: &mut [u8]) {
        let Address::Worker(port) = t.to else {
            return;
        };
        let Ok(mut packet) = Packet::new_checked(&mut buf[..t.len]) else {
            return;
        };
        let Some(t) = PacketType::from_u8(packet.packet_type()) else {
            return;
        };
        if !t.is_stamped() && t != PacketType::Stamps {
            return;
        }
        let port = usize::from(port);
        if self.next.len() <= port {
            self.next.resize(port + 1, 0);
        }
        packet.set_sequence(self.next[port]);
        // A reply to a worker's question tells the next number without taking it.
        if t.is_stamped() {
            self.next[port] = self.next[port].wrapping_add(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Repr;

    fn packet(t: PacketType, seq: u32) -> Vec<u8> {
        let r = Repr {
            packet_type: t,
            flags: Default::default(),
            layer: 0,
            job: 1,
            src: 5,
            dst: 6,
            block: 0,
            count: 1,
            worker: 1,
            chunk: 0,
            lanes: 0,
            epoch: 0,
            sequence: seq,
        };
        let mut buf = vec![0; r.buffer_len()];
        r.emit(&mut Packet::new_unchecked(&mut buf[..]));
        buf
    }

    #[test]
    fn numbers_sums_and_raw_copies_per_port_and_tells_the_next_number() {
        let mut stamps = EgressStamps::default();
        let mut seqs = Vec::new();
        for (t, to) in [
            (PacketType::Result, Address::Worker(1)),
            (PacketType::Raw, Address::Worker(1)),
            (PacketType::Data, Address::Worker(1)), // an ack: keeps its data sequence
            (PacketType::Result, Address::Worker(3)),
            (PacketType::BlockGo, Address::Worker(1)),
            (PacketType::Result, Address::Switch), // up to a spine: numbered at the leaf
            (PacketType::Stamps, Address::Worker(1)), // the next number, not taken
            (PacketType::Result, Address::Worker(1)),
            (PacketType::Stamps, Address::Worker(3)),
        ] {
            let mut buf = packet(t, 777);
            let len = buf.len();
            stamps.stamp(&Transmit { to, len }, &mut buf);
            seqs.push(Packet::new_checked(&buf[..]).unwrap().sequence());
        }
        assert_eq!(seqs, [0, 1, 777, 0, 777, 777, 2, 2, 1]);
    }
}

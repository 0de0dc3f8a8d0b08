//! The sans-IO contract every protocol participant follows (quinn-proto style): the driver
//! feeds packets and timer expiries with a timestamp, and polls for packets to send and for the
//! next deadline. No sockets, threads or clocks live behind it, so the in-memory network, the
//! simulator and the UDP emulator all drive the same code.

use serde::{Deserialize, Serialize};

use crate::wire::{Flags, PacketType, Repr};

/// Nanoseconds on the driver's clock (simulated or real).
pub type Nanos = u64;

/// Where a packet goes in the star: the switch, or a worker's host port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Address {
    /// The switch.
    Switch,
    /// The host port of the worker with this rank.
    Worker(u16),
}

/// A packet ready to leave a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transmit {
    /// Where the packet goes.
    pub to: Address,
    /// The packet: header and lanes.
    pub bytes: Vec<u8>,
}

/// A protocol participant.
pub trait Node {
    /// A packet arrived from `from` (the ingress port).
    fn handle_packet(&mut self, now: Nanos, from: Address, bytes: &[u8]);
    /// The deadline returned by [`Node::poll_timeout`] has passed.
    fn handle_timeout(&mut self, now: Nanos);
    /// The next packet to send at `now`, if one is due.
    fn poll_transmit(&mut self, now: Nanos) -> Option<Transmit>;
    /// When the node next needs [`Node::handle_timeout`] or can send again.
    fn poll_timeout(&self) -> Option<Nanos>;
}

/// Which exchange a packet belongs to: job, training step, layer and direction. A packet of any
/// other exchange is stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ExchangeId {
    /// Job id.
    pub job: u16,
    /// Training step.
    pub epoch: u32,
    /// GCN layer.
    pub layer: u8,
    /// Gradients (the transposed exchange) rather than features.
    pub backward: bool,
}

impl ExchangeId {
    /// Whether a parsed header belongs to this exchange.
    pub fn matches(&self, r: &Repr) -> bool {
        r.job == self.job
            && r.epoch == self.epoch
            && r.layer == self.layer
            && r.flags.backward == self.backward
    }

    /// The exchange a header names.
    pub fn of(r: &Repr) -> ExchangeId {
        ExchangeId {
            job: r.job,
            epoch: r.epoch,
            layer: r.layer,
            backward: r.flags.backward,
        }
    }

    /// A header of this exchange with everything else zero.
    pub fn header(&self, packet_type: PacketType) -> Repr {
        Repr {
            packet_type,
            flags: Flags {
                backward: self.backward,
                ..Flags::default()
            },
            layer: self.layer,
            job: self.job,
            src: 0,
            dst: 0,
            block: 0,
            count: 0,
            worker: 0,
            chunk: 0,
            lanes: 0,
            epoch: self.epoch,
            sequence: 0,
        }
    }
}

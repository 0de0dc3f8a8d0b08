//! The sans-IO contract every protocol participant follows (quinn-proto style): the driver
//! feeds packets and timer expiries with a timestamp, and polls for packets to send and for the
//! next deadline. No sockets, threads or clocks live behind it, so the in-memory network, the
//! simulator and the UDP emulator all drive the same code.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::wire::{Flags, PacketType, Repr, MAX_PACKET_LEN};

/// The buffer a driver lends [`Node::poll_transmit`]: the UDP payload of an IPv4 packet of a
/// 9,216-byte jumbo MTU ([`crate::framing::HostFraming::MAX_MTU`]). Switch packets and
/// control messages take far less; the host exchange's packed copies fill the link's MTU.
pub const MAX_DATAGRAM_LEN: usize = 9_188;

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

/// A packet a node has written into the driver's buffer, ready to leave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// Where the packet goes.
    pub to: Address,
    /// Bytes written at the front of the buffer: header and lanes.
    pub len: usize,
}

/// A protocol participant.
pub trait Node {
    /// A packet arrived from `from` (the ingress port).
    fn handle_packet(&mut self, now: Nanos, from: Address, bytes: &[u8]);
    /// The deadline returned by [`Node::poll_timeout`] has passed.
    fn handle_timeout(&mut self, now: Nanos);
    /// Write the next packet due at `now` into `buf` (the driver's, at least
    /// [`MAX_DATAGRAM_LEN`] bytes: a socket's send buffer, a DPDK mbuf) and say where it goes;
    /// `None` when nothing is due. Dataplane packets take at most [`MAX_PACKET_LEN`] of it
    /// (the host exchange's packed copies up to the MTU's datagram), and nodes allocate nothing
    /// per packet for them.
    fn poll_transmit(&mut self, now: Nanos, buf: &mut [u8]) -> Option<Transmit>;
    /// When the node next needs [`Node::handle_timeout`] or can send again.
    fn poll_timeout(&self) -> Option<Nanos>;
}

/// A boxed node is a node (drivers hold `Box<dyn Exchange>` and plain nodes alike).
impl<N: Node + ?Sized> Node for Box<N> {
    fn handle_packet(&mut self, now: Nanos, from: Address, bytes: &[u8]) {
        (**self).handle_packet(now, from, bytes)
    }

    fn handle_timeout(&mut self, now: Nanos) {
        (**self).handle_timeout(now)
    }

    fn poll_transmit(&mut self, now: Nanos, buf: &mut [u8]) -> Option<Transmit> {
        (**self).poll_transmit(now, buf)
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        (**self).poll_timeout()
    }
}

/// A worker's part in one operation that ends (an exchange, an all-reduce): what a worker's
/// driver runs until it is over.
pub trait Operation: Node {
    /// Whether the operation is over for this worker.
    fn is_finished(&self) -> bool;
    /// Where it stands, in a few words, for a driver's errors ("block 3", "slice 17 of 400").
    fn progress(&self) -> String;
}

/// What a driver needs from the switch of a star besides [`Node`].
pub trait SwitchNode: Node {
    /// The backlog (bytes) of the egress queue towards `port`, for ECN marking.
    fn set_egress_queue(&mut self, port: u16, bytes: u64);
    /// Aggregator passes made so far: each pass after a packet's first is a recirculation.
    fn passes(&self) -> u64;
    /// The same passes on a chip that reads a finished 64-lane sum out in one pass (Tofino 2;
    /// see `switch::LANES_READ_PER_PAIR_PASS`): fewer readouts. Nodes without readouts make
    /// no difference.
    fn passes_reading_pairs(&self) -> u64 {
        self.passes()
    }
    /// Aggregators holding a partial sum now.
    fn aggregators_in_use(&self) -> usize;
}

/// What a driver needs from a host besides [`Node`].
pub trait HostNode: Node {
    /// The host has all it waits for: a run ends when every host has.
    fn is_done(&self) -> bool;
}

/// Packets waiting to leave a node, in recycled buffers: once the queue has been as deep as it
/// gets, queueing and polling allocate nothing.
#[derive(Debug, Default)]
pub struct Outbox {
    queue: VecDeque<(Address, Vec<u8>)>,
    free: Vec<Vec<u8>>,
}

impl Outbox {
    /// Queue a packet for `to` that `write` puts into the buffer it is given (of
    /// [`MAX_PACKET_LEN`] bytes), returning its length; the queued packet, for last touches.
    pub fn push_with(&mut self, to: Address, write: impl FnOnce(&mut [u8]) -> usize) -> &mut [u8] {
        self.try_push_with(to, |buf| Some(write(buf)))
            .expect("the writer always writes")
    }

    /// [`Outbox::push_with`] for a writer that may have nothing to write (`None`: nothing is
    /// queued).
    pub fn try_push_with(
        &mut self,
        to: Address,
        write: impl FnOnce(&mut [u8]) -> Option<usize>,
    ) -> Option<&mut [u8]> {
        self.push_sized(to, MAX_PACKET_LEN, write)
    }

    /// Queue a packet for `to` that `write` puts into a buffer of `room` bytes.
    fn push_sized(
        &mut self,
        to: Address,
        room: usize,
        write: impl FnOnce(&mut [u8]) -> Option<usize>,
    ) -> Option<&mut [u8]> {
        let mut buf = self.free.pop().unwrap_or_else(|| Vec::with_capacity(room));
        buf.resize(room, 0);
        let Some(len) = write(&mut buf) else {
            self.free.push(buf);
            return None;
        };
        buf.truncate(len);
        self.queue.push_back((to, buf));
        Some(&mut self.queue.back_mut().expect("just pushed").1)
    }

    /// Queue header `r` and its `lanes` for `to`.
    pub fn push_repr(&mut self, to: Address, r: &Repr, lanes: &[i32]) -> &mut [u8] {
        self.push_with(to, |buf| r.emit_with_lanes(lanes, buf))
    }

    /// Queue a copy of `bytes` for `to` (a forwarded packet of any size a datagram holds).
    pub fn push_copy(&mut self, to: Address, bytes: &[u8]) -> &mut [u8] {
        self.push_sized(to, bytes.len(), |buf| {
            buf.copy_from_slice(bytes);
            Some(bytes.len())
        })
        .expect("the copy is always written")
    }

    /// Move the oldest packet into `buf`.
    ///
    /// # Panics
    /// If `buf` is shorter than the packet.
    pub fn pop_into(&mut self, buf: &mut [u8]) -> Option<Transmit> {
        let (to, bytes) = self.queue.pop_front()?;
        let len = bytes.len();
        buf[..len].copy_from_slice(&bytes);
        self.free.push(bytes);
        Some(Transmit { to, len })
    }

    /// Packets queued.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
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

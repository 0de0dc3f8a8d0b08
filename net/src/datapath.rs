//! The packet I/O under an [`Endpoint`](crate::endpoint::Endpoint): what differs between the
//! kernel's UDP stack and a kernel-bypass NIC. The endpoint above keeps everything else once —
//! the send queue, the fault shim, per-peer counters, captures — so the switch process and the
//! worker run unchanged over either.
//!
//! - [`crate::udp::UdpDatapath`]: a kernel UDP socket (recvmmsg / GSO sends, ECN through
//!   control messages);
//! - `crate::dpdk::DpdkDatapath` (cargo feature `dpdk`): Ethernet / IPv4 / UDP frames in DPDK
//!   mbufs, receive and send bursts, the ECN codepoint in the IPv4 header.

use std::fmt::Debug;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use quinn_udp::EcnCodepoint;

/// Largest datagram an endpoint receives: the host exchange's packed copies at the largest
/// MTU a job may set (switch packets are at most 288 bytes; control messages stay below 2 KiB).
pub const MAX_DATAGRAM: usize = switchgnn_dataplane::node::MAX_DATAGRAM_LEN;

/// The receive queue below the endpoint — the kernel's socket queue, or a NIC's receive ring —
/// what waits to be read, what it may hold, and what it dropped because it was full.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RxBacklog {
    /// Bytes queued, as the kernel accounts them (each datagram with its buffer overhead).
    pub queued_bytes: u64,
    /// The receive buffer: the kernel drops datagrams once `queued_bytes` would pass it.
    pub buffer_bytes: u64,
    /// Datagrams dropped at this socket since it was bound.
    pub drops: u64,
}

/// One received datagram, borrowed from the datapath's buffers.
#[derive(Debug, Clone, Copy)]
pub struct Datagram<'a> {
    /// The sender's address.
    pub from: SocketAddr,
    /// The codepoint the IP header carried.
    pub ecn: Option<EcnCodepoint>,
    /// The UDP payload.
    pub bytes: &'a [u8],
}

/// One datagram waiting to leave.
#[derive(Debug, Clone)]
pub struct Outgoing {
    /// The peer's address.
    pub to: SocketAddr,
    /// The codepoint to set in the IP header.
    pub ecn: Option<EcnCodepoint>,
    /// The UDP payload.
    pub bytes: Vec<u8>,
}

/// What one send call did with the front of the queue it was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    /// The first `n` datagrams left (n ≥ 1).
    Left(usize),
    /// The first `n` datagrams were refused for good (no route, no buffer): UDP is unreliable,
    /// the protocol's timers recover them.
    Failed(usize),
    /// Nothing could leave now (the socket buffer or the NIC's ring is full): try later.
    Blocked,
}

/// Packet I/O for an endpoint: batch receive into buffers it owns, batch send from a queue.
pub trait Datapath: Debug + Send {
    /// The address peers send to.
    fn local_addr(&self) -> io::Result<SocketAddr>;

    /// Send a batch from the front of `queue` (never empty).
    fn send(&mut self, queue: &[Outgoing]) -> io::Result<Sent>;

    /// Read one batch of what has arrived, calling `f` for every datagram; `None` when
    /// nothing was waiting (the datapath is drained).
    fn recv(&mut self, f: &mut dyn FnMut(Datagram<'_>)) -> io::Result<Option<usize>>;

    /// Sleep until something may be readable or `timeout` has passed (`None`: no limit).
    /// Returns at once while the last receive stopped before the datapath was drained.
    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()>;

    /// Whether the last receive found nothing left.
    fn is_drained(&self) -> bool;

    /// The largest datagram (UDP payload) this datapath can send. The kernel's takes any
    /// [`MAX_DATAGRAM`] and says at the send when a link cannot carry it.
    fn max_datagram(&self) -> usize {
        MAX_DATAGRAM
    }

    /// The receive queue the system keeps for us, where it says (the kernel's socket queue).
    fn backlog(&mut self) -> Option<RxBacklog> {
        None
    }

    /// Frames this datapath dropped before the endpoint saw them, and the system calls it
    /// made.
    fn counters(&mut self) -> DatapathCounters {
        DatapathCounters::default()
    }

    /// A handle that sends from another thread (a worker's heartbeats while it computes),
    /// past the endpoint's queue, shim and counters.
    fn side_sender(&self) -> io::Result<Box<dyn SideSender>>;

    /// Move into `out` the peers whose port the system said is closed since the last call
    /// (the kernel's ICMP port-unreachable); a datapath that cannot tell adds none.
    fn take_closed(&mut self, out: &mut Vec<SocketAddr>) {
        let _ = out;
    }
}

/// Frames a datapath dropped below the endpoint (a kernel socket has none: the kernel counts
/// its own; frames dropped for a full receive queue are [`RxBacklog::drops`]), and the system
/// calls a kernel datapath made (a kernel-bypass one makes none per packet).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DatapathCounters {
    /// Frames that did not parse (bad lengths, chained buffers).
    pub malformed: u64,
    /// Well-formed frames not for this endpoint (other protocols, other addresses).
    pub foreign: u64,
    /// Send system calls (one GSO send carries several datagrams).
    pub send_calls: u64,
    /// Receive system calls (one reads a batch; each buffer may hold coalesced datagrams).
    pub recv_calls: u64,
    /// Readiness waits that reached the kernel (a wait skipped because data may be waiting is
    /// not one).
    pub polls: u64,
    /// Receive-queue readings ([`Datapath::backlog`]).
    pub backlog_reads: u64,
}

impl DatapathCounters {
    /// Every system call counted.
    pub fn syscalls(&self) -> u64 {
        self.send_calls + self.recv_calls + self.polls + self.backlog_reads
    }
}

/// Sends single datagrams from another thread.
pub trait SideSender: Send {
    /// Send `bytes` to `to` now, or say why not (a full queue is `WouldBlock`).
    fn send_to(&mut self, bytes: &[u8], to: SocketAddr) -> io::Result<()>;
}

impl SideSender for std::net::UdpSocket {
    fn send_to(&mut self, bytes: &[u8], to: SocketAddr) -> io::Result<()> {
        std::net::UdpSocket::send_to(self, bytes, to).map(|_| ())
    }
}

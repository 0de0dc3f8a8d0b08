//! The endpoint of the real-time drivers: one per switch process and per worker, over a
//! [`Datapath`] (the kernel's UDP stack, or DPDK with the `dpdk` feature).
//!
//! - queue datagrams and send them in batches, each with the ECN codepoint the caller chose;
//! - read what arrives in batches, with each datagram's codepoint;
//! - count packets and bytes per peer, as they cross the datapath;
//! - optionally pass every send through the dataplane's seeded fault injector (loss,
//!   duplication, reordering by delay), the same code the in-memory network and the simulator
//!   run;
//! - record a capture, when asked.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::capture::{Capture, CaptureStats};
use crate::datapath::{
    Datagram, Datapath, EcnCodepoint, Outgoing, RxBacklog, Sent, SideSender, MAX_DATAGRAM,
};
use crate::shim::{Shim, ShimConfig, ShimStats};

/// Receive batches read per call before control returns to the driver.
const BATCHES_PER_CALL: usize = 16;
/// Addresses the endpoint keeps traffic counters for, at most. Anyone can send a datagram from
/// a new address, so past this the addresses not pinned ([`Endpoint::pin`]: the peers a
/// driver admitted) are forgotten, their traffic folded into [`EndpointStats::forgotten`].
pub const MAX_PEERS: usize = 1024;

/// Traffic exchanged with one peer, as it crossed the socket (after the fault shim).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerCounters {
    /// Datagrams that left for the peer.
    pub packets_sent: u64,
    /// Their payload bytes.
    pub bytes_sent: u64,
    /// Datagrams that came from the peer.
    pub packets_received: u64,
    /// Their payload bytes.
    pub bytes_received: u64,
    /// Received with the congestion-experienced codepoint.
    pub ce_received: u64,
    /// Sent with the congestion-experienced codepoint.
    pub ce_sent: u64,
}

impl std::ops::AddAssign<&PeerCounters> for PeerCounters {
    fn add_assign(&mut self, c: &PeerCounters) {
        self.packets_sent += c.packets_sent;
        self.bytes_sent += c.bytes_sent;
        self.packets_received += c.packets_received;
        self.bytes_received += c.bytes_received;
        self.ce_received += c.ce_received;
        self.ce_sent += c.ce_sent;
    }
}

/// Counters of the endpoint itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointStats {
    /// Send system calls (each may carry several datagrams).
    pub send_calls: u64,
    /// Receive calls (each may read several datagrams).
    pub recv_calls: u64,
    /// Sends that found the socket buffer full and waited.
    pub send_blocked: u64,
    /// Datagrams the kernel refused (e.g. no route); UDP errors are not fatal.
    pub send_errors: u64,
    /// Datagrams larger than [`MAX_DATAGRAM`] dropped on receipt.
    pub oversized: u64,
    /// Datagrams the kernel dropped because this socket's receive queue was full (the last
    /// reading of [`Endpoint::backlog`]; 0 where the kernel does not say).
    #[serde(default)]
    pub rx_queue_drops: u64,
    /// Deepest receive queue seen by [`Endpoint::backlog`], in bytes.
    #[serde(default)]
    pub peak_rx_queue_bytes: u64,
    /// Frames a kernel-bypass datapath dropped as malformed (the last reading).
    #[serde(default)]
    pub malformed_frames: u64,
    /// Frames a kernel-bypass datapath dropped as not for this endpoint.
    #[serde(default)]
    pub foreign_frames: u64,
    /// Datagrams that left, to every peer.
    #[serde(default)]
    pub datagrams_sent: u64,
    /// Datagrams received and handed on, from every address.
    #[serde(default)]
    pub datagrams_received: u64,
    /// System calls the datapath made (sends, receives, readiness waits, queue readings; a
    /// kernel-bypass datapath makes none per packet), as last read.
    #[serde(default)]
    pub syscalls: u64,
    /// Empty datagrams received (they are handed on like any other).
    #[serde(default)]
    pub empty: u64,
    /// Addresses whose counters were dropped to keep at most [`MAX_PEERS`]...
    #[serde(default)]
    pub forgotten_peers: u64,
    /// ...and the traffic they had, together.
    #[serde(default)]
    pub forgotten: PeerCounters,
    /// What the fault shim did (all zero without one).
    pub shim: ShimStats,
}

impl EndpointStats {
    /// Datagrams sent and received.
    pub fn datagrams(&self) -> u64 {
        self.datagrams_sent + self.datagrams_received
    }
}

/// A datapath with batching, ECN, counters, a fault shim and captures.
#[derive(Debug)]
pub struct Endpoint {
    datapath: Box<dyn Datapath>,
    queue: VecDeque<Outgoing>,
    shim: Option<Shim>,
    peers: Peers,
    stats: EndpointStats,
    /// Where every datagram sent and received is recorded, when capturing.
    capture: Option<Capture>,
    local: SocketAddr,
    /// Buffers of datagrams already sent, kept for the next ones: a switch sends millions of
    /// small datagrams, and a fresh allocation and free for each cost it about 6% of its time.
    spare: Vec<Vec<u8>>,
}

/// Sent datagrams' buffers kept for reuse at most (each at most a datagram long: 1.5 MB at a
/// 1,500-byte MTU, 9 MB with jumbo frames), more than one round's sends.
const SPARE_BUFFERS: usize = 1024;

impl Endpoint {
    /// An endpoint over `datapath`.
    pub fn over(datapath: Box<dyn Datapath>, shim: ShimConfig) -> io::Result<Endpoint> {
        shim.validate()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let local = datapath.local_addr()?;
        Ok(Endpoint {
            datapath,
            queue: VecDeque::new(),
            shim: shim.is_active().then(|| Shim::new(&shim)),
            peers: Peers::default(),
            stats: EndpointStats::default(),
            capture: None,
            local,
            spare: Vec::new(),
        })
    }

    /// Record every datagram sent and received from now on in `capture`.
    pub fn capture_to(&mut self, capture: Capture) {
        self.capture = Some(capture);
    }

    /// Finish the capture, if any: what it holds.
    pub fn finish_capture(&mut self) -> io::Result<Option<CaptureStats>> {
        self.capture.take().map(Capture::finish).transpose()
    }

    /// The receive queue the system keeps for this endpoint now (the kernel's socket queue on
    /// Linux; `None` where nobody says). Also updates the drop and peak figures of
    /// [`Endpoint::stats`]. One system call: cheap enough once per receive round.
    pub fn backlog(&mut self) -> Option<RxBacklog> {
        let c = self.datapath.counters();
        self.stats.malformed_frames = c.malformed;
        self.stats.foreign_frames = c.foreign;
        let b = self.datapath.backlog()?;
        self.stats.rx_queue_drops = b.drops;
        self.stats.peak_rx_queue_bytes = self.stats.peak_rx_queue_bytes.max(b.queued_bytes);
        Some(b)
    }

    /// A handle for sending from another thread (a heartbeat while the owner of the endpoint
    /// computes). Its sends bypass the fault shim and the counters.
    pub fn side_sender(&self) -> io::Result<Box<dyn SideSender>> {
        self.datapath.side_sender()
    }

    /// The peers whose port the system said is closed since the last call.
    pub fn take_closed(&mut self) -> Vec<SocketAddr> {
        let mut out = Vec::new();
        self.datapath.take_closed(&mut out);
        out
    }

    /// The address peers send to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local)
    }

    /// The endpoint's own counters so far.
    pub fn stats(&self) -> &EndpointStats {
        &self.stats
    }

    /// Traffic with the peer at `addr` so far (since it was last forgotten, unless pinned).
    pub fn peer(&self, addr: &SocketAddr) -> PeerCounters {
        self.peers
            .map
            .get(addr)
            .map(|(c, _)| c.clone())
            .unwrap_or_default()
    }

    /// Keep `addr`'s counters however many other addresses send (a peer the driver admitted).
    pub fn pin(&mut self, addr: SocketAddr) {
        self.peers.counters(addr, &mut self.stats);
        if let Some((_, pinned)) = self.peers.map.get_mut(&addr) {
            *pinned = true;
        }
    }

    /// Addresses with counters now (at most [`MAX_PEERS`], and the pinned ones).
    pub fn peers_tracked(&self) -> usize {
        self.peers.map.len()
    }

    /// A buffer holding a copy of `bytes`, for [`Endpoint::send`]: one of a datagram sent
    /// before where there is one, so that a steady stream of sends allocates nothing.
    pub fn buffer(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(bytes);
        buf
    }

    /// Queue a datagram; [`Endpoint::flush`] sends it.
    pub fn send(&mut self, to: SocketAddr, ecn: Option<EcnCodepoint>, bytes: Vec<u8>) {
        let out = Outgoing { to, ecn, bytes };
        match &mut self.shim {
            None => self.queue.push_back(out),
            Some(shim) => {
                shim.apply(out, Instant::now(), &mut self.queue);
                self.stats.shim = shim.stats();
            }
        }
    }

    /// Send what is queued, in batches, until done or the datapath is full.
    ///
    /// What is queued leaves grouped by peer, in the order it was queued for each peer, so that
    /// one segmentation-offload send carries a peer's run of equal-sized datagrams (a round's
    /// sends to several peers may interleave; the order between peers means nothing).
    pub fn flush(&mut self) -> io::Result<()> {
        if let Some(shim) = &mut self.shim {
            shim.release(Instant::now(), &mut self.queue);
        }
        // Drivers flush every round; most rounds of a waiting worker queue nothing.
        if self.queue.is_empty() {
            return Ok(());
        }
        if self.queue.len() > 1 {
            // Stable: each peer's datagrams keep their order.
            self.queue.make_contiguous().sort_by_key(|o| o.to);
        }
        while !self.queue.is_empty() {
            self.stats.send_calls += 1;
            let sent = self.datapath.send(self.queue.make_contiguous())?;
            match sent {
                Sent::Left(n) => {
                    self.stats.datagrams_sent += n as u64;
                    for o in self.queue.drain(..n) {
                        if let Some(capture) = self.capture.as_mut() {
                            capture.record(self.local, o.to, o.ecn, &o.bytes);
                        }
                        let c = self.peers.counters(o.to, &mut self.stats);
                        c.packets_sent += 1;
                        c.bytes_sent += o.bytes.len() as u64;
                        c.ce_sent += u64::from(o.ecn == Some(EcnCodepoint::Ce));
                        if self.spare.len() < SPARE_BUFFERS && o.bytes.capacity() <= MAX_DATAGRAM {
                            self.spare.push(o.bytes);
                        }
                    }
                }
                Sent::Failed(n) => {
                    // UDP is unreliable anyway; the protocol's timers recover what is lost.
                    self.stats.send_errors += n as u64;
                    self.queue.drain(..n);
                }
                Sent::Blocked => {
                    self.stats.send_blocked += 1;
                    break;
                }
            }
        }
        self.stats.syscalls = self.datapath.counters().syscalls();
        Ok(())
    }

    /// Sleep until a datagram may have arrived, a held-back datagram is due, or `deadline`.
    pub fn wait(&mut self, deadline: Option<Instant>) -> io::Result<()> {
        let now = Instant::now();
        let shim_due = self.shim.as_ref().and_then(Shim::next_release);
        let until = [deadline, shim_due].into_iter().flatten().min();
        self.datapath
            .wait(until.map(|t| t.saturating_duration_since(now)))
    }

    /// The largest datagram this endpoint can send.
    pub fn max_datagram(&self) -> usize {
        self.datapath.max_datagram()
    }

    /// Whether the last [`Endpoint::recv`] read the datapath empty.
    pub fn is_drained(&self) -> bool {
        self.datapath.is_drained()
    }

    /// Read what has arrived, calling `f` for every datagram; returns how many.
    pub fn recv(&mut self, f: impl FnMut(Datagram<'_>)) -> io::Result<usize> {
        self.recv_batches(BATCHES_PER_CALL, f)
    }

    /// [`Endpoint::recv`], reading at most `batches` receive batches: a driver that watches
    /// its backlog between batches reads one at a time.
    pub fn recv_batches(
        &mut self,
        batches: usize,
        mut f: impl FnMut(Datagram<'_>),
    ) -> io::Result<usize> {
        let mut total = 0;
        let (stats, peers, capture, local) = (
            &mut self.stats,
            &mut self.peers,
            &mut self.capture,
            self.local,
        );
        for _ in 0..batches.max(1) {
            stats.recv_calls += 1;
            let mut each = |d: Datagram<'_>| {
                let Datagram { from, ecn, bytes } = d;
                if bytes.len() > MAX_DATAGRAM {
                    stats.oversized += 1;
                    return;
                }
                stats.empty += u64::from(bytes.is_empty());
                let c = peers.counters(from, stats);
                c.packets_received += 1;
                c.bytes_received += bytes.len() as u64;
                c.ce_received += u64::from(ecn == Some(EcnCodepoint::Ce));
                total += 1;
                stats.datagrams_received += 1;
                if let Some(capture) = capture.as_mut() {
                    capture.record(from, local, ecn, bytes);
                }
                f(Datagram { from, ecn, bytes });
            };
            if self.datapath.recv(&mut each)?.is_none() || self.datapath.is_drained() {
                break;
            }
        }
        self.stats.syscalls = self.datapath.counters().syscalls();
        Ok(total)
    }
}

/// Traffic counters per address, bounded by [`MAX_PEERS`] (pinned addresses apart).
#[derive(Debug, Default)]
struct Peers {
    /// Each address's counters, and whether it is pinned.
    /// Hashed with foldhash, seeded per table: one lookup per datagram each way, and std's
    /// SipHash took about 6% of a busy switch's time.
    map: HashMap<SocketAddr, (PeerCounters, bool), foldhash::fast::RandomState>,
}

impl Peers {
    /// `addr`'s counters, made room for: when the table is full, every address not pinned is
    /// forgotten (its traffic added to `stats.forgotten`). Amortised, that costs O(1) per new
    /// address, and the table never holds more than [`MAX_PEERS`] addresses not pinned.
    fn counters<'a>(
        &'a mut self,
        addr: SocketAddr,
        stats: &'a mut EndpointStats,
    ) -> &'a mut PeerCounters {
        // One hash lookup per datagram while the table has room (the common case).
        if self.map.len() >= MAX_PEERS && !self.map.contains_key(&addr) {
            let before = self.map.len();
            self.map.retain(|_, (c, pinned)| {
                if !*pinned {
                    stats.forgotten += &*c;
                }
                *pinned
            });
            stats.forgotten_peers += (before - self.map.len()) as u64;
            if self.map.len() >= MAX_PEERS {
                // Every one pinned: count the newcomer with the forgotten.
                return &mut stats.forgotten;
            }
        }
        &mut self.map.entry(addr).or_default().0
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// The `i`-th address of a [`Flood`].
    fn flood_addr(i: u32) -> SocketAddr {
        let [_, a, b, c] = i.to_be_bytes();
        SocketAddr::from(([10, a, b, c], 1 + (i % 60_000) as u16))
    }

    /// A datapath that delivers one datagram from each of `sources` addresses, a batch at a
    /// time.
    #[derive(Debug)]
    struct Flood {
        sources: u32,
        next: u32,
    }

    impl Datapath for Flood {
        fn local_addr(&self) -> io::Result<SocketAddr> {
            Ok(SocketAddr::from(([10, 0, 0, 1], 4791)))
        }
        fn send(&mut self, queue: &[Outgoing]) -> io::Result<Sent> {
            Ok(Sent::Left(queue.len()))
        }
        fn recv(&mut self, f: &mut dyn FnMut(Datagram<'_>)) -> io::Result<Option<usize>> {
            if self.next >= self.sources {
                return Ok(None);
            }
            let end = (self.next + 64).min(self.sources);
            for i in self.next..end {
                f(Datagram {
                    from: flood_addr(i),
                    ecn: None,
                    bytes: &[0x53, 0x47, 1, 2],
                });
            }
            let n = (end - self.next) as usize;
            self.next = end;
            Ok(Some(n))
        }
        fn wait(&mut self, _: Option<Duration>) -> io::Result<()> {
            Ok(())
        }
        fn is_drained(&self) -> bool {
            self.next >= self.sources
        }
        fn side_sender(&self) -> io::Result<Box<dyn SideSender>> {
            Err(io::ErrorKind::Unsupported.into())
        }
    }

    /// 100 000 datagrams from 100 000 addresses leave at most `MAX_PEERS` addresses counted
    /// (before, one entry each, never freed: ~192 bytes per address), a pinned peer's counters
    /// intact, and every datagram counted somewhere.
    #[test]
    fn a_flood_from_new_addresses_leaves_the_peer_table_bounded() {
        let sources = 100_000;
        let mut e =
            Endpoint::over(Box::new(Flood { sources, next: 0 }), ShimConfig::default()).unwrap();
        let worker = SocketAddr::from(([10, 9, 9, 9], 7));
        e.pin(worker);
        e.send(worker, None, vec![1; 40]);
        e.flush().unwrap();
        let mut got = 0;
        loop {
            let n = e.recv(|_| {}).unwrap();
            if n == 0 {
                break;
            }
            got += n;
            assert!(e.peers_tracked() <= MAX_PEERS + 1, "{}", e.peers_tracked());
        }
        assert_eq!(got, sources as usize);
        assert_eq!(e.peer(&worker).bytes_sent, 40);
        let counted = e.stats().forgotten.packets_received
            + (0..sources)
                .map(|i| e.peer(&flood_addr(i)).packets_received)
                .sum::<u64>();
        assert_eq!(counted, u64::from(sources));
        assert!(e.stats().forgotten_peers >= u64::from(sources) - MAX_PEERS as u64);
    }
}

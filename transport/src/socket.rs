//! A non-blocking UDP endpoint for the real-time drivers.
//!
//! - receive in batches (recvmmsg, and GRO where the kernel coalesces) into buffers allocated
//!   once, reading each datagram's ECN codepoint;
//! - send in batches: consecutive datagrams to the same peer of the same size leave in one
//!   GSO send, each with the ECN codepoint the caller chose;
//! - count packets and bytes per peer, as they cross the socket;
//! - optionally pass every send through the dataplane's seeded fault injector (loss,
//!   duplication, reordering by delay), the same code the in-memory network and the simulator
//!   run.
//!
//! quinn-udp does the system calls; mio waits for readiness with a deadline. mio is
//! edge-triggered, so the endpoint remembers when it stopped reading before the socket was
//! drained and does not sleep in that case.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::capture::{Capture, CaptureStats};
use mio::{Events, Interest, Poll, Token};
use quinn_udp::{RecvMeta, UdpSocketState};
use serde::{Deserialize, Serialize};
use switchgnn_dataplane::fault::{FaultError, FaultInjector, Faults};

pub use quinn_udp::EcnCodepoint;

/// Largest datagram the endpoint receives (dataplane packets are at most 160 bytes; control
/// messages stay below this).
pub const MAX_DATAGRAM: usize = 2048;
/// Socket buffers asked of the kernel (it may cap them at `net.core.[rw]mem_max`).
const SOCKET_BUFFER: usize = 4 << 20;
/// Receive batches read per call before control returns to the driver.
const BATCHES_PER_CALL: usize = 16;
const SOCKET: Token = Token(0);

/// One received datagram, borrowed from the endpoint's buffers.
#[derive(Debug, Clone, Copy)]
pub struct Datagram<'a> {
    pub from: SocketAddr,
    pub ecn: Option<EcnCodepoint>,
    pub bytes: &'a [u8],
}

/// Traffic exchanged with one peer, as it crossed the socket (after the fault shim).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerCounters {
    pub packets_sent: u64,
    pub bytes_sent: u64,
    pub packets_received: u64,
    pub bytes_received: u64,
    /// Received with the congestion-experienced codepoint.
    pub ce_received: u64,
    /// Sent with the congestion-experienced codepoint.
    pub ce_sent: u64,
}

/// The kernel's receive queue of the socket: what waits to be read, what it may hold, and what
/// it dropped because it was full.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RxBacklog {
    /// Bytes queued, as the kernel accounts them (each datagram with its buffer overhead).
    pub queued_bytes: u64,
    /// The receive buffer: the kernel drops datagrams once `queued_bytes` would pass it.
    pub buffer_bytes: u64,
    /// Datagrams dropped at this socket since it was bound.
    pub drops: u64,
}

/// Counters of the endpoint itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointStats {
    /// Send system calls (each may carry several datagrams).
    pub send_calls: u64,
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
    pub shim: ShimStats,
}

/// Seeded faults applied to every datagram this endpoint sends.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ShimConfig {
    /// Probability a datagram is dropped.
    pub loss: f64,
    /// Probability a datagram is sent twice.
    pub duplicate: f64,
    /// Probability a datagram is held back by up to `reorder_delay_us`, which reorders it.
    pub reorder: f64,
    pub reorder_delay_us: u64,
    pub seed: u64,
}

impl ShimConfig {
    /// The same faults for the shared injector (delays in nanoseconds).
    pub fn faults(&self) -> Faults {
        Faults {
            loss: self.loss,
            duplicate: self.duplicate,
            reorder: self.reorder,
            reorder_delay: self.reorder_delay_us.saturating_mul(1_000),
            ..Faults::none()
        }
    }

    pub fn is_active(&self) -> bool {
        self.faults().is_active()
    }

    /// Check the probabilities are probabilities.
    pub fn validate(&self) -> Result<(), FaultError> {
        self.faults().validate()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShimStats {
    pub lost: u64,
    pub duplicated: u64,
    pub delayed: u64,
}

#[derive(Debug, Clone)]
struct Outgoing {
    to: SocketAddr,
    ecn: Option<EcnCodepoint>,
    bytes: Vec<u8>,
}

/// The fault injector on the send path: the dataplane's [`FaultInjector`], with the copies it
/// holds back kept here until they are due.
#[derive(Debug)]
struct Shim {
    injector: FaultInjector,
    /// Held-back datagrams by release time (and a sequence number to keep them apart).
    delayed: BTreeMap<(Instant, u64), Outgoing>,
    seq: u64,
}

impl Shim {
    /// Queue what goes now of one datagram; held-back copies are kept.
    fn apply(&mut self, out: Outgoing, now: Instant, queue: &mut VecDeque<Outgoing>) {
        let Outgoing { to, ecn, bytes } = out;
        let (delayed, seq) = (&mut self.delayed, &mut self.seq);
        self.injector.apply(bytes, |bytes, delay| {
            let copy = Outgoing { to, ecn, bytes };
            if delay == 0 {
                queue.push_back(copy);
            } else {
                *seq += 1;
                delayed.insert((now + Duration::from_nanos(delay), *seq), copy);
            }
        });
    }

    fn stats(&self) -> ShimStats {
        let s = self.injector.stats();
        ShimStats {
            lost: s.lost,
            duplicated: s.duplicated,
            delayed: s.reordered,
        }
    }

    fn release(&mut self, now: Instant, queue: &mut VecDeque<Outgoing>) {
        while let Some(entry) = self.delayed.first_entry() {
            if entry.key().0 > now {
                break;
            }
            queue.push_back(entry.remove());
        }
    }

    fn next_release(&self) -> Option<Instant> {
        self.delayed.keys().next().map(|k| k.0)
    }
}

/// A bound, non-blocking UDP socket with batching, ECN and counters.
#[derive(Debug)]
pub struct Endpoint {
    socket: mio::net::UdpSocket,
    state: UdpSocketState,
    poll: Poll,
    events: Events,
    rx_bufs: Vec<Vec<u8>>,
    rx_meta: Vec<RecvMeta>,
    /// The last read stopped before the socket said "would block": read again before sleeping.
    maybe_readable: bool,
    queue: VecDeque<Outgoing>,
    gso: Vec<u8>,
    shim: Option<Shim>,
    peers: HashMap<SocketAddr, PeerCounters>,
    stats: EndpointStats,
    /// The kernel's drop count when the socket was bound (it counts from creation).
    drops_at_bind: u64,
    /// Where every datagram sent and received is recorded, when capturing.
    capture: Option<Capture>,
    local: SocketAddr,
}

impl Endpoint {
    /// Bind `addr` (port 0 picks a free port).
    pub fn bind(addr: SocketAddr, shim: ShimConfig) -> io::Result<Endpoint> {
        Endpoint::bind_with_buffer(addr, shim, SOCKET_BUFFER)
    }

    /// Bind `addr`, asking the kernel for a receive buffer of `recv_buffer` bytes (it may cap
    /// it at `net.core.rmem_max`; tests ask for small ones to provoke an overload).
    pub fn bind_with_buffer(
        addr: SocketAddr,
        shim: ShimConfig,
        recv_buffer: usize,
    ) -> io::Result<Endpoint> {
        let std_socket = std::net::UdpSocket::bind(addr)?;
        std_socket.set_nonblocking(true)?;
        let mut socket = mio::net::UdpSocket::from_std(std_socket);
        let state = UdpSocketState::new((&socket).into())?;
        // Best effort: a smaller buffer only means more kernel drops under load.
        let _ = state.set_recv_buffer_size((&socket).into(), recv_buffer);
        let _ = state.set_send_buffer_size((&socket).into(), SOCKET_BUFFER);
        let drops_at_bind = meminfo::read(&socket).map_or(0, |m| m.drops);
        let local = socket.local_addr()?;
        let poll = Poll::new()?;
        poll.registry()
            .register(&mut socket, SOCKET, Interest::READABLE | Interest::WRITABLE)?;
        let batch = quinn_udp::BATCH_SIZE;
        // GRO may coalesce up to 64 KiB of equal-sized datagrams into one buffer.
        let buf_len = (state.gro_segments() * MAX_DATAGRAM).clamp(MAX_DATAGRAM, 1 << 16);
        shim.validate()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        Ok(Endpoint {
            socket,
            state,
            poll,
            events: Events::with_capacity(16),
            rx_bufs: (0..batch).map(|_| vec![0; buf_len]).collect(),
            rx_meta: vec![RecvMeta::default(); batch],
            maybe_readable: true,
            queue: VecDeque::new(),
            gso: Vec::with_capacity(1 << 16),
            shim: shim.is_active().then(|| Shim {
                injector: FaultInjector::new(shim.faults(), shim.seed),
                delayed: BTreeMap::new(),
                seq: 0,
            }),
            peers: HashMap::new(),
            stats: EndpointStats::default(),
            drops_at_bind,
            capture: None,
            local,
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

    /// The kernel's receive queue now (Linux; `None` elsewhere). Also updates the drop and
    /// peak figures of [`Endpoint::stats`]. One system call: cheap enough once per receive
    /// round.
    pub fn backlog(&mut self) -> Option<RxBacklog> {
        let mut b = meminfo::read(&self.socket)?;
        b.drops = b.drops.saturating_sub(self.drops_at_bind);
        self.stats.rx_queue_drops = b.drops;
        self.stats.peak_rx_queue_bytes = self.stats.peak_rx_queue_bytes.max(b.queued_bytes);
        Some(b)
    }

    /// A plain handle on the same socket, for sending from another thread (a heartbeat while
    /// the owner of the endpoint computes). Its sends bypass the fault shim and the counters.
    pub fn side_sender(&self) -> io::Result<std::net::UdpSocket> {
        use std::os::fd::{AsFd, FromRawFd, IntoRawFd};
        let fd = self.socket.as_fd().try_clone_to_owned()?;
        // SAFETY: `fd` is a freshly duplicated descriptor of a UDP socket that we own.
        Ok(unsafe { std::net::UdpSocket::from_raw_fd(fd.into_raw_fd()) })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    pub fn stats(&self) -> &EndpointStats {
        &self.stats
    }

    /// Traffic with the peer at `addr` so far.
    pub fn peer(&self, addr: &SocketAddr) -> PeerCounters {
        self.peers.get(addr).cloned().unwrap_or_default()
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

    /// Send what is queued, in GSO batches, until done or the socket buffer is full.
    pub fn flush(&mut self) -> io::Result<()> {
        if let Some(shim) = &mut self.shim {
            shim.release(Instant::now(), &mut self.queue);
        }
        let max_segments = self.state.max_gso_segments().max(1);
        while let Some(first) = self.queue.front() {
            let len = first.bytes.len();
            // A GSO batch: same peer, codepoint and size (the last may be shorter), ≤ 64 KiB.
            let mut n = 1;
            while n < max_segments && (n + 1) * len <= 1 << 16 {
                match self.queue.get(n) {
                    Some(o) if o.to == first.to && o.ecn == first.ecn && o.bytes.len() <= len => {
                        n += 1;
                        if o.bytes.len() < len {
                            break;
                        }
                    }
                    _ => break,
                }
            }
            let contents: &[u8] = if n == 1 {
                &first.bytes
            } else {
                self.gso.clear();
                for o in self.queue.range(..n) {
                    self.gso.extend_from_slice(&o.bytes);
                }
                &self.gso
            };
            let transmit = quinn_udp::Transmit {
                destination: first.to,
                ecn: first.ecn,
                contents,
                segment_size: (n > 1).then_some(len),
                src_ip: None,
            };
            self.stats.send_calls += 1;
            match self.state.try_send((&self.socket).into(), &transmit) {
                Ok(()) => {
                    for o in self.queue.drain(..n) {
                        if let Some(capture) = self.capture.as_mut() {
                            capture.record(self.local, o.to, o.ecn, &o.bytes);
                        }
                        let c = self.peers.entry(o.to).or_default();
                        c.packets_sent += 1;
                        c.bytes_sent += o.bytes.len() as u64;
                        c.ce_sent += u64::from(o.ecn == Some(EcnCodepoint::Ce));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.stats.send_blocked += 1;
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // UDP is unreliable anyway; the protocol's timers recover what is lost.
                    tracing::debug!(error = %e, to = %first.to, "send failed");
                    self.stats.send_errors += n as u64;
                    self.queue.drain(..n);
                }
            }
        }
        Ok(())
    }

    /// Sleep until the socket is readable, a held-back datagram is due, or `deadline`.
    pub fn wait(&mut self, deadline: Option<Instant>) -> io::Result<()> {
        let now = Instant::now();
        let shim_due = self.shim.as_ref().and_then(Shim::next_release);
        let until = [deadline, shim_due].into_iter().flatten().min();
        let timeout = if self.maybe_readable {
            Some(Duration::ZERO)
        } else {
            until.map(|t| t.saturating_duration_since(now))
        };
        match self.poll.poll(&mut self.events, timeout) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        if self.events.iter().any(|e| e.is_readable()) {
            self.maybe_readable = true;
        }
        Ok(())
    }

    /// Whether the last [`Endpoint::recv`] read the socket empty.
    pub fn is_drained(&self) -> bool {
        !self.maybe_readable
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
        for _ in 0..batches.max(1) {
            let mut slices: Vec<IoSliceMut<'_>> = self
                .rx_bufs
                .iter_mut()
                .map(|b| IoSliceMut::new(b))
                .collect();
            self.stats.recv_calls += 1;
            let n = match self
                .state
                .recv((&self.socket).into(), &mut slices, &mut self.rx_meta)
            {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.maybe_readable = false;
                    return Ok(total);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // An ICMP error queued by an earlier send (e.g. a closed peer port) surfaces
                // here; it concerns that send, not this read.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
                Err(e) => return Err(e),
            };
            drop(slices);
            for (meta, buf) in self.rx_meta[..n].iter().zip(&self.rx_bufs) {
                let stride = meta.stride.max(1);
                for bytes in buf[..meta.len].chunks(stride) {
                    if bytes.len() > MAX_DATAGRAM {
                        self.stats.oversized += 1;
                        continue;
                    }
                    let c = self.peers.entry(meta.addr).or_default();
                    c.packets_received += 1;
                    c.bytes_received += bytes.len() as u64;
                    c.ce_received += u64::from(meta.ecn == Some(EcnCodepoint::Ce));
                    total += 1;
                    if let Some(capture) = self.capture.as_mut() {
                        capture.record(meta.addr, self.local, meta.ecn, bytes);
                    }
                    f(Datagram {
                        from: meta.addr,
                        ecn: meta.ecn,
                        bytes,
                    });
                }
            }
        }
        // Stopped with data possibly left: the next wait must not sleep.
        self.maybe_readable = true;
        Ok(total)
    }
}

/// `getsockopt(SO_MEMINFO)`: the socket's memory accounting, where Linux keeps the receive
/// queue's size, its limit and the drops at this socket in one call.
#[cfg(target_os = "linux")]
mod meminfo {
    use std::os::fd::AsRawFd;

    use super::RxBacklog;

    // Indexes into the kernel's `sk_meminfo` array (include/uapi/linux/sock_diag.h).
    const RMEM_ALLOC: usize = 0;
    const RCVBUF: usize = 1;
    const DROPS: usize = 8;
    const VARS: usize = 9;

    pub fn read(socket: &impl AsRawFd) -> Option<RxBacklog> {
        let mut info = [0u32; VARS];
        let mut len = std::mem::size_of_val(&info) as libc::socklen_t;
        // SAFETY: the buffer and its length are valid for the call; the kernel writes at
        // most `len` bytes and reports how many.
        let rc = unsafe {
            libc::getsockopt(
                socket.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_MEMINFO,
                info.as_mut_ptr().cast(),
                &mut len,
            )
        };
        if rc != 0 || (len as usize) < (DROPS + 1) * 4 {
            return None;
        }
        Some(RxBacklog {
            queued_bytes: u64::from(info[RMEM_ALLOC]),
            buffer_bytes: u64::from(info[RCVBUF]),
            drops: u64::from(info[DROPS]),
        })
    }
}

#[cfg(not(target_os = "linux"))]
mod meminfo {
    use super::RxBacklog;

    pub fn read(_socket: &impl std::os::fd::AsRawFd) -> Option<RxBacklog> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel's queue accounting is read back: datagrams left unread grow the backlog,
    /// a full small buffer drops and says so, and reading drains it.
    #[cfg(target_os = "linux")]
    #[test]
    fn backlog_and_drops_are_read_from_the_kernel() {
        let local = SocketAddr::from(([127, 0, 0, 1], 0));
        let mut rx = Endpoint::bind_with_buffer(local, ShimConfig::default(), 16 << 10).unwrap();
        let to = rx.local_addr().unwrap();
        let before = rx.backlog().expect("Linux reports SO_MEMINFO");
        assert_eq!(before.queued_bytes, 0);
        assert_eq!(before.drops, 0);
        assert!(before.buffer_bytes > 0);
        let tx = std::net::UdpSocket::bind(local).unwrap();
        let sent = 2_000;
        for _ in 0..sent {
            tx.send_to(&[7u8; 160], to).unwrap();
        }
        let full = rx.backlog().unwrap();
        assert!(full.queued_bytes > 0, "{full:?}");
        assert!(
            full.drops > 0,
            "a 16 KiB buffer cannot hold {sent} datagrams: {full:?}"
        );
        let mut got = 0;
        while got + full.drops < sent {
            rx.wait(Some(Instant::now() + Duration::from_millis(100)))
                .unwrap();
            let n = rx.recv(|_| {}).unwrap();
            if n == 0 {
                break;
            }
            got += n as u64;
        }
        assert_eq!(
            got + full.drops,
            sent,
            "every datagram was read or counted as dropped"
        );
        let after = rx.backlog().unwrap();
        assert_eq!(after.queued_bytes, 0);
        assert_eq!(rx.stats().rx_queue_drops, full.drops);
        assert!(rx.stats().peak_rx_queue_bytes >= full.queued_bytes);
    }
}

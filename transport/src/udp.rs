//! The kernel's UDP stack as a [`Datapath`]:
//!
//! - receive in batches (recvmmsg, and GRO where the kernel coalesces) into buffers allocated
//!   once, reading each datagram's ECN codepoint;
//! - send in batches: consecutive datagrams to the same peer of the same size leave in one
//!   GSO send, each with the ECN codepoint the caller chose.
//!
//! quinn-udp does the system calls; mio waits for readiness with a deadline. mio is
//! edge-triggered, so the datapath remembers when it stopped reading before the socket was
//! drained and does not sleep in that case.

use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::time::Duration;

use mio::{Events, Interest, Poll, Token};
use quinn_udp::{RecvMeta, UdpSocketState};

use crate::datapath::{Datagram, Datapath, Outgoing, Sent, SideSender};
use crate::socket::{RxBacklog, MAX_DATAGRAM};

const SOCKET: Token = Token(0);
/// The most bytes one GSO send may carry: a UDP datagram's payload over IPv4 (65,535 less the
/// IP and UDP headers).
const MAX_GSO_BYTES: usize = 65_507;
/// Socket buffers asked of the kernel (it may cap them at `net.core.[rw]mem_max`).
pub const SOCKET_BUFFER: usize = 4 << 20;

/// A bound, non-blocking UDP socket.
#[derive(Debug)]
pub struct UdpDatapath {
    socket: mio::net::UdpSocket,
    state: UdpSocketState,
    poll: Poll,
    events: Events,
    rx_bufs: Vec<Vec<u8>>,
    rx_meta: Vec<RecvMeta>,
    /// The last read stopped before the socket said "would block": read again before sleeping.
    maybe_readable: bool,
    gso: Vec<u8>,
    /// The kernel's drop count when the socket was bound (it counts from creation).
    drops_at_bind: u64,
}

impl UdpDatapath {
    /// Bind `addr` (port 0 picks a free port), asking the kernel for a receive buffer of
    /// `recv_buffer` bytes (it may cap it at `net.core.rmem_max`).
    pub fn bind(addr: SocketAddr, recv_buffer: usize) -> io::Result<UdpDatapath> {
        let std_socket = std::net::UdpSocket::bind(addr)?;
        std_socket.set_nonblocking(true)?;
        let mut socket = mio::net::UdpSocket::from_std(std_socket);
        let state = UdpSocketState::new((&socket).into())?;
        // Best effort: a smaller buffer only means more kernel drops under load.
        let _ = state.set_recv_buffer_size((&socket).into(), recv_buffer);
        let _ = state.set_send_buffer_size((&socket).into(), SOCKET_BUFFER);
        let drops_at_bind = meminfo::read(&socket).map_or(0, |m| m.drops);
        let poll = Poll::new()?;
        poll.registry()
            .register(&mut socket, SOCKET, Interest::READABLE | Interest::WRITABLE)?;
        let batch = quinn_udp::BATCH_SIZE;
        // GRO may coalesce up to 64 KiB of equal-sized datagrams into one buffer.
        let buf_len = (state.gro_segments() * MAX_DATAGRAM).clamp(MAX_DATAGRAM, 1 << 16);
        Ok(UdpDatapath {
            socket,
            state,
            poll,
            events: Events::with_capacity(16),
            rx_bufs: (0..batch).map(|_| vec![0; buf_len]).collect(),
            rx_meta: vec![RecvMeta::default(); batch],
            maybe_readable: true,
            gso: Vec::with_capacity(1 << 16),
            drops_at_bind,
        })
    }
}

impl Datapath for UdpDatapath {
    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    fn send(&mut self, queue: &[Outgoing]) -> io::Result<Sent> {
        let first = &queue[0];
        let len = first.bytes.len();
        // A GSO batch: same peer, codepoint and size (the last may be shorter), within one
        // UDP datagram's payload.
        let max_segments = self.state.max_gso_segments().max(1);
        let mut n = 1;
        while n < max_segments && (n + 1) * len <= MAX_GSO_BYTES {
            match queue.get(n) {
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
            for o in &queue[..n] {
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
        loop {
            return match self.state.try_send((&self.socket).into(), &transmit) {
                Ok(()) => Ok(Sent::Left(n)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(Sent::Blocked),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // Every later datagram of this size would fail alike, and the protocol would
                // resend it forever: stop with what to change.
                Err(e) if e.raw_os_error() == Some(libc::EMSGSIZE) => Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "a datagram of {len} bytes to {} does not fit the link's MTU ({e}): \
                         lower the job's link.mtu (--mtu) to what every host link carries",
                        first.to
                    ),
                )),
                Err(e) => {
                    tracing::debug!(error = %e, to = %first.to, "send failed");
                    Ok(Sent::Failed(n))
                }
            };
        }
    }

    fn recv(&mut self, f: &mut dyn FnMut(Datagram<'_>)) -> io::Result<Option<usize>> {
        loop {
            let mut slices: Vec<IoSliceMut<'_>> = self
                .rx_bufs
                .iter_mut()
                .map(|b| IoSliceMut::new(b))
                .collect();
            let n = match self
                .state
                .recv((&self.socket).into(), &mut slices, &mut self.rx_meta)
            {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.maybe_readable = false;
                    return Ok(None);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // An ICMP error queued by an earlier send (e.g. a closed peer port) surfaces
                // here; it concerns that send, not this read.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
                Err(e) => return Err(e),
            };
            drop(slices);
            let mut total = 0;
            for (meta, buf) in self.rx_meta[..n].iter().zip(&self.rx_bufs) {
                let stride = meta.stride.max(1);
                if meta.len == 0 {
                    // An empty datagram: `chunks` would yield nothing, and it would go
                    // uncounted.
                    total += 1;
                    f(Datagram {
                        from: meta.addr,
                        ecn: meta.ecn,
                        bytes: &[],
                    });
                    continue;
                }
                for bytes in buf[..meta.len].chunks(stride) {
                    total += 1;
                    f(Datagram {
                        from: meta.addr,
                        ecn: meta.ecn,
                        bytes,
                    });
                }
            }
            // Stopped with data possibly left: the next wait must not sleep.
            self.maybe_readable = true;
            return Ok(Some(total));
        }
    }

    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        let timeout = if self.maybe_readable {
            Some(Duration::ZERO)
        } else {
            timeout
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

    fn is_drained(&self) -> bool {
        !self.maybe_readable
    }

    fn backlog(&mut self) -> Option<RxBacklog> {
        let mut b = meminfo::read(&self.socket)?;
        b.drops = b.drops.saturating_sub(self.drops_at_bind);
        Some(b)
    }

    fn side_sender(&self) -> io::Result<Box<dyn SideSender>> {
        use std::os::fd::{AsFd, FromRawFd, IntoRawFd};
        let fd = self.socket.as_fd().try_clone_to_owned()?;
        // SAFETY: `fd` is a freshly duplicated descriptor of a UDP socket that we own.
        let socket = unsafe { std::net::UdpSocket::from_raw_fd(fd.into_raw_fd()) };
        Ok(Box::new(socket))
    }
}

/// `getsockopt(SO_MEMINFO)`: the socket's memory accounting, where Linux keeps the receive
/// queue's size, its limit and the drops at this socket in one call.
#[cfg(target_os = "linux")]
mod meminfo {
    use std::os::fd::AsRawFd;

    use crate::socket::RxBacklog;

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
    use crate::socket::RxBacklog;

    pub fn read(_socket: &impl std::os::fd::AsRawFd) -> Option<RxBacklog> {
        None
    }
}

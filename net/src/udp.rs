//! The kernel's UDP stack as a [`Datapath`]:
//!
//! - receive in batches (recvmmsg, and GRO where the kernel coalesces) into buffers allocated
//!   once, reading each datagram's ECN codepoint;
//! - send in batches: consecutive datagrams to the same peer of the same size leave in one
//!   GSO send, each with the ECN codepoint the caller chose.
//!
//! quinn-udp does the system calls; `ppoll` waits for readiness with a deadline of nanosecond
//! precision (epoll's millisecond timeouts would turn a pacer's 30 µs wait into a 1 ms
//! sleep). A receive that fills its whole batch may have left data behind: the next wait then
//! returns at once, without a system call. One that fills less found the queue empty
//! (recvmmsg stops at the first "would block"), so the datapath knows it is drained without
//! another, empty, receive call.

use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::time::Duration;

use quinn_udp::{RecvMeta, UdpSocketState};

use crate::datapath::{Datagram, Datapath, DatapathCounters, Outgoing, Sent, SideSender};
use crate::datapath::{RxBacklog, MAX_DATAGRAM};

/// The most bytes one GSO send may carry: a UDP datagram's payload over IPv4 (65,535 less the
/// IP and UDP headers).
const MAX_GSO_BYTES: usize = 65_507;
/// Socket buffers asked of the kernel (it may cap them at `net.core.[rw]mem_max`).
pub const SOCKET_BUFFER: usize = 4 << 20;

/// A bound, non-blocking UDP socket.
#[derive(Debug)]
pub struct UdpDatapath {
    socket: std::net::UdpSocket,
    state: UdpSocketState,
    rx_bufs: Vec<Vec<u8>>,
    rx_meta: Vec<RecvMeta>,
    /// The last read stopped before the socket said "would block": read again before sleeping.
    maybe_readable: bool,
    gso: Vec<u8>,
    /// The kernel's drop count when the socket was bound (it counts from creation).
    drops_at_bind: u64,
    /// Peers whose port the kernel said is closed (ICMP port unreachable), not yet taken.
    closed: Vec<SocketAddr>,
    /// System calls made so far, by kind.
    counters: DatapathCounters,
}

impl UdpDatapath {
    /// Bind `addr` (port 0 picks a free port), asking the kernel for a receive buffer of
    /// `recv_buffer` bytes (it may cap it at `net.core.rmem_max`).
    pub fn bind(addr: SocketAddr, recv_buffer: usize) -> io::Result<UdpDatapath> {
        let socket = std::net::UdpSocket::bind(addr)?;
        socket.set_nonblocking(true)?;
        let state = UdpSocketState::new((&socket).into())?;
        // Best effort: a smaller buffer only means more kernel drops under load.
        let _ = state.set_recv_buffer_size((&socket).into(), recv_buffer);
        let _ = state.set_send_buffer_size((&socket).into(), SOCKET_BUFFER);
        let drops_at_bind = meminfo::read(&socket).map_or(0, |m| m.drops);
        // Best effort: with it, a datagram refused by a closed port says which peer it was.
        let _ = errqueue::enable(&socket, addr.is_ipv6());
        let batch = quinn_udp::BATCH_SIZE;
        // GRO may coalesce up to 64 KiB of equal-sized datagrams into one buffer.
        let buf_len = (state.gro_segments() * MAX_DATAGRAM).clamp(MAX_DATAGRAM, 1 << 16);
        Ok(UdpDatapath {
            socket,
            state,
            rx_bufs: (0..batch).map(|_| vec![0; buf_len]).collect(),
            rx_meta: vec![RecvMeta::default(); batch],
            maybe_readable: true,
            gso: Vec::with_capacity(1 << 16),
            drops_at_bind,
            closed: Vec::new(),
            counters: DatapathCounters::default(),
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
        let mut refused = 0;
        loop {
            self.counters.send_calls += 1;
            return match self.state.try_send((&self.socket).into(), &transmit) {
                Ok(()) => Ok(Sent::Left(n)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(Sent::Blocked),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // The pending error of an earlier send to a closed port, reported by this one
                // (whatever its peer): read the error queue, which clears it, and send again.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused && refused < 2 => {
                    refused += 1;
                    errqueue::drain(&self.socket, &mut self.closed);
                    continue;
                }
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
            self.counters.recv_calls += 1;
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
                // An ICMP error of an earlier send (a closed peer port) surfaces here; it
                // concerns that send, not this read. The error queue says whose port it was.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    errqueue::drain(&self.socket, &mut self.closed);
                    continue;
                }
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
            // A full batch may have left data behind: the next wait must not sleep. A partial
            // one met an empty queue.
            self.maybe_readable = n == self.rx_bufs.len();
            return Ok(Some(total));
        }
    }

    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        if self.maybe_readable {
            // Data may wait: read it first. A pending socket error surfaces on that read too.
            return Ok(());
        }
        self.counters.polls += 1;
        let events = readiness::wait(&self.socket, timeout)?;
        if events.readable {
            self.maybe_readable = true;
        }
        if events.error {
            errqueue::drain(&self.socket, &mut self.closed);
        }
        Ok(())
    }

    fn take_closed(&mut self, out: &mut Vec<SocketAddr>) {
        out.append(&mut self.closed);
    }

    fn counters(&mut self) -> DatapathCounters {
        self.counters
    }

    fn is_drained(&self) -> bool {
        !self.maybe_readable
    }

    fn backlog(&mut self) -> Option<RxBacklog> {
        self.counters.backlog_reads += 1;
        let mut b = meminfo::read(&self.socket)?;
        b.drops = b.drops.saturating_sub(self.drops_at_bind);
        Some(b)
    }

    fn side_sender(&self) -> io::Result<Box<dyn SideSender>> {
        Ok(Box::new(self.socket.try_clone()?))
    }
}

/// Waiting for a socket to become readable, with a deadline of nanosecond precision.
mod readiness {
    use std::io;
    use std::os::fd::AsRawFd;
    use std::time::Duration;

    /// What a wait found.
    pub(super) struct Events {
        /// A datagram waits.
        pub(super) readable: bool,
        /// An error waits on the socket's error queue.
        pub(super) error: bool,
    }

    /// Sleep until `socket` is readable, has an error, or `timeout` has passed (`None`: no
    /// limit).
    pub(super) fn wait(socket: &impl AsRawFd, timeout: Option<Duration>) -> io::Result<Events> {
        let mut fd = libc::pollfd {
            fd: socket.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let r = poll_one(&mut fd, timeout);
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
            fd.revents = 0;
        }
        Ok(Events {
            readable: fd.revents & libc::POLLIN != 0,
            error: fd.revents & libc::POLLERR != 0,
        })
    }

    #[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
    fn poll_one(fd: &mut libc::pollfd, timeout: Option<Duration>) -> libc::c_int {
        let ts = timeout.map(|t| libc::timespec {
            tv_sec: t.as_secs().min(libc::time_t::MAX as u64) as libc::time_t,
            tv_nsec: libc::c_long::from(t.subsec_nanos() as i32),
        });
        let ts_ptr = ts
            .as_ref()
            .map_or(std::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: one valid pollfd, and a timespec (or null) that outlives the call.
        unsafe { libc::ppoll(fd, 1, ts_ptr, std::ptr::null()) }
    }

    /// Elsewhere, `poll` with its millisecond timeout, rounded up so that a short wait is not
    /// a busy loop.
    #[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
    fn poll_one(fd: &mut libc::pollfd, timeout: Option<Duration>) -> libc::c_int {
        let ms = timeout.map_or(-1, |t| {
            libc::c_int::try_from(t.as_nanos().div_ceil(1_000_000)).unwrap_or(libc::c_int::MAX)
        });
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(fd, 1, ms) }
    }
}

/// The socket's error queue (`IP_RECVERR`): the kernel keeps there each ICMP error an earlier
/// send met, with the address that send went to, so that a closed peer port is known at once
/// and by whom (on one host the kernel answers a datagram to a closed port right away).
#[cfg(target_os = "linux")]
mod errqueue {
    use std::io;
    use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
    use std::os::fd::AsRawFd;

    /// Keep ICMP errors on the error queue, with the destination they concern.
    pub(super) fn enable(socket: &impl AsRawFd, ipv6: bool) -> io::Result<()> {
        let on: libc::c_int = 1;
        let (level, name) = if ipv6 {
            (libc::IPPROTO_IPV6, libc::IPV6_RECVERR)
        } else {
            (libc::IPPROTO_IP, libc::IP_RECVERR)
        };
        // SAFETY: a valid descriptor and a c_int option of its size.
        let r = unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                level,
                name,
                (&on as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Read every queued error; a refused datagram (a closed port) adds its destination to
    /// `closed`. Other errors (an unreachable host, a too-big datagram) are left to the
    /// protocol's timers.
    pub(super) fn drain(socket: &impl AsRawFd, closed: &mut Vec<SocketAddr>) {
        loop {
            // SAFETY: zeroed C structs are valid; every pointer below points into this frame
            // and lives through the call.
            let mut name: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
            let mut control = [0u64; 64];
            let mut data = [0u8; 64];
            let mut iov = libc::iovec {
                iov_base: data.as_mut_ptr().cast(),
                iov_len: data.len(),
            };
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_name = (&mut name as *mut libc::sockaddr_storage).cast();
            msg.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = std::mem::size_of_val(&control) as _;
            let n = unsafe {
                libc::recvmsg(
                    socket.as_raw_fd(),
                    &mut msg,
                    libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT,
                )
            };
            if n < 0 {
                return; // EAGAIN: the queue is empty
            }
            if refused(&msg) {
                if let Some(addr) = socket_addr(&name) {
                    if !closed.contains(&addr) {
                        closed.push(addr);
                    }
                }
            }
        }
    }

    /// Whether the message's extended error is a refused datagram (ECONNREFUSED).
    fn refused(msg: &libc::msghdr) -> bool {
        // SAFETY: the kernel filled `msg`'s control buffer; the CMSG macros walk it within
        // `msg_controllen`.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(msg);
            while !c.is_null() {
                let ip = (*c).cmsg_level == libc::IPPROTO_IP && (*c).cmsg_type == libc::IP_RECVERR;
                let ip6 =
                    (*c).cmsg_level == libc::IPPROTO_IPV6 && (*c).cmsg_type == libc::IPV6_RECVERR;
                if ip || ip6 {
                    let e = libc::CMSG_DATA(c).cast::<libc::sock_extended_err>();
                    return (*e).ee_errno == libc::ECONNREFUSED as u32;
                }
                c = libc::CMSG_NXTHDR(msg, c);
            }
        }
        false
    }

    fn socket_addr(s: &libc::sockaddr_storage) -> Option<SocketAddr> {
        match libc::c_int::from(s.ss_family) {
            libc::AF_INET => {
                // SAFETY: the family says it is a sockaddr_in.
                let a =
                    unsafe { &*(s as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
                Some(SocketAddr::V4(SocketAddrV4::new(
                    Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                    u16::from_be(a.sin_port),
                )))
            }
            libc::AF_INET6 => {
                // SAFETY: the family says it is a sockaddr_in6.
                let a =
                    unsafe { &*(s as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
                Some(SocketAddr::V6(SocketAddrV6::new(
                    Ipv6Addr::from(a.sin6_addr.s6_addr),
                    u16::from_be(a.sin6_port),
                    a.sin6_flowinfo,
                    a.sin6_scope_id,
                )))
            }
            _ => None,
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod errqueue {
    use std::io;
    use std::net::SocketAddr;

    pub(super) fn enable<T>(_: &T, _: bool) -> io::Result<()> {
        Ok(())
    }

    pub(super) fn drain<T>(_: &T, _: &mut Vec<SocketAddr>) {}
}

/// `getsockopt(SO_MEMINFO)`: the socket's memory accounting, where Linux keeps the receive
/// queue's size, its limit and the drops at this socket in one call.
#[cfg(target_os = "linux")]
mod meminfo {
    use std::os::fd::AsRawFd;

    use crate::datapath::RxBacklog;

    // Indexes into the kernel's `sk_meminfo` array (include/uapi/linux/sock_diag.h).
    const RMEM_ALLOC: usize = 0;
    const RCVBUF: usize = 1;
    const DROPS: usize = 8;
    const VARS: usize = 9;

    pub(super) fn read(socket: &impl AsRawFd) -> Option<RxBacklog> {
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
    use crate::datapath::RxBacklog;

    pub(super) fn read(_socket: &impl std::os::fd::AsRawFd) -> Option<RxBacklog> {
        None
    }
}

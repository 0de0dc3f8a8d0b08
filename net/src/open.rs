//! Opening an endpoint: a transport setting (the kernel's UDP, or DPDK with its settings)
//! turned into an [`Endpoint`] over the matching [`Datapath`](crate::datapath::Datapath). The
//! one place that knows which datapaths this build has.

use std::io;
use std::net::SocketAddr;

use thiserror::Error;

use crate::dpdk::{DpdkSettings, Role};
use crate::endpoint::Endpoint;
use crate::shim::ShimConfig;
use crate::udp::{UdpDatapath, SOCKET_BUFFER};

/// The transport a switch process or worker opens, with its settings.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Transport {
    /// The kernel's UDP stack.
    #[default]
    Udp,
    /// DPDK with these settings (a build with the `dpdk` feature).
    Dpdk(DpdkSettings),
}

/// Who opens an endpoint, and where.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Opening {
    /// The job's id (DPDK's file prefix names it).
    pub job: u16,
    /// The job's workers (a DPDK switch makes a port for each).
    pub world: u16,
    /// The switch process or a worker.
    pub role: Role,
    /// Where a UDP endpoint binds (port 0: any free port); a DPDK switch answers here.
    pub bind: SocketAddr,
    /// The switch's address: a DPDK worker's own address is derived from it.
    pub switch: SocketAddr,
    /// Faults injected on every send.
    pub faults: ShimConfig,
    /// The kernel receive buffer to ask for (UDP only); default [`SOCKET_BUFFER`].
    pub recv_buffer: Option<usize>,
}

/// Why no endpoint opened.
#[derive(Debug, Error)]
pub enum OpenError {
    /// The system refused (an address in use, DPDK's EAL, no port), or the fault shim's
    /// settings are not probabilities.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// `transport = "dpdk"` in a build without the `dpdk` feature.
    #[error("this build has no DPDK datapath (cargo build --release --features dpdk)")]
    NoDpdk,
    /// The DPDK datapath speaks IPv4 only.
    #[error("the DPDK datapath speaks IPv4; the switch address {0} is not")]
    NotIpv4(SocketAddr),
}

/// An endpoint over `transport`, for `who`.
pub fn open(transport: &Transport, who: &Opening) -> Result<Endpoint, OpenError> {
    match transport {
        Transport::Udp => {
            let buffer = who.recv_buffer.unwrap_or(SOCKET_BUFFER);
            Ok(Endpoint::bind_with_buffer(who.bind, who.faults, buffer)?)
        }
        Transport::Dpdk(settings) => open_dpdk(settings, who),
    }
}

/// A DPDK endpoint: the switch answers at its bind address, a worker at the address the
/// settings give its rank.
fn open_dpdk(settings: &DpdkSettings, who: &Opening) -> Result<Endpoint, OpenError> {
    let local = match who.role {
        Role::Switch => who.bind,
        Role::Worker(rank) => {
            let SocketAddr::V4(switch) = who.switch else {
                return Err(OpenError::NotIpv4(who.switch));
            };
            SocketAddr::V4(settings.worker_addr(rank, switch))
        }
    };
    #[cfg(feature = "dpdk")]
    {
        let datapath =
            crate::dpdk::DpdkDatapath::open(settings, who.job, who.world, who.role, local)?;
        Ok(Endpoint::over(Box::new(datapath), who.faults)?)
    }
    #[cfg(not(feature = "dpdk"))]
    {
        let _ = (settings, local);
        Err(OpenError::NoDpdk)
    }
}

impl Endpoint {
    /// An endpoint over a kernel UDP socket bound to `addr` (port 0 picks a free port).
    pub fn bind(addr: SocketAddr, shim: ShimConfig) -> io::Result<Endpoint> {
        Endpoint::bind_with_buffer(addr, shim, SOCKET_BUFFER)
    }

    /// [`Endpoint::bind`], asking the kernel for a receive buffer of `recv_buffer` bytes (it
    /// may cap it at `net.core.rmem_max`; tests ask for small ones to provoke an overload).
    pub fn bind_with_buffer(
        addr: SocketAddr,
        shim: ShimConfig,
        recv_buffer: usize,
    ) -> io::Result<Endpoint> {
        Endpoint::over(Box::new(UdpDatapath::bind(addr, recv_buffer)?), shim)
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

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

    #[test]
    fn a_dpdk_worker_needs_an_ipv4_switch() {
        let who = Opening {
            job: 1,
            world: 2,
            role: Role::Worker(0),
            bind: "0.0.0.0:0".parse().unwrap(),
            switch: "[::1]:7000".parse().unwrap(),
            faults: ShimConfig::default(),
            recv_buffer: None,
        };
        let err = open(&Transport::Dpdk(DpdkSettings::default()), &who).unwrap_err();
        assert!(matches!(err, OpenError::NotIpv4(_)), "{err}");
    }
}

//! Links, queues and the topology: what a packet costs on its way, in time and bytes.
//!
//! Every link direction is a [`Port`]: a FIFO with a rate, a propagation delay and a buffer.
//! Service is deterministic, so a packet's departure is known when it is queued
//! (`max(now, last departure) + size / rate`) and the backlog at any instant follows from the
//! last departure: no event is needed when a port goes idle. Times inside a port are kept in
//! picoseconds so that serialisation times of a few nanoseconds do not accumulate rounding.

use serde::{Deserialize, Serialize};
use switchgnn_dataplane::Nanos;

/// Picoseconds: the resolution of departures inside ports.
pub type Picos = u64;

pub fn to_picos(ns: Nanos) -> Picos {
    ns.saturating_mul(1_000)
}

/// The first nanosecond at or after `ps`.
pub fn ceil_nanos(ps: Picos) -> Nanos {
    ps.div_ceil(1_000)
}

/// A link: bandwidth and one-way propagation delay.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LinkSpec {
    pub gbps: f64,
    pub delay_ns: Nanos,
}

impl LinkSpec {
    /// The paper's links: 100 Gbps, 2 µs.
    pub fn hundred_gbps() -> LinkSpec {
        LinkSpec {
            gbps: 100.0,
            delay_ns: 2_000,
        }
    }
}

/// The network's shape. A parameter of the core, so that other fabrics (the leaf-spine) can be
/// added beside the star without touching the event loop.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Topology {
    /// `hosts` hosts, each on its own link to one switch.
    Star { hosts: u16, link: LinkSpec },
}

impl Topology {
    /// The paper's star: 128 hosts on 100 Gbps, 2 µs links.
    pub fn paper_star() -> Topology {
        Topology::Star {
            hosts: 128,
            link: LinkSpec::hundred_gbps(),
        }
    }

    pub fn star(hosts: u16, link: LinkSpec) -> Topology {
        Topology::Star { hosts, link }
    }

    pub fn hosts(&self) -> u16 {
        match *self {
            Topology::Star { hosts, .. } => hosts,
        }
    }

    /// The link a host attaches with.
    pub fn host_link(&self) -> LinkSpec {
        match *self {
            Topology::Star { link, .. } => link,
        }
    }
}

impl HostSpec {
    /// The rate a host's uplink runs at: the lower of its NIC's and its link's.
    pub fn uplink_gbps(&self, topology: &Topology) -> f64 {
        topology.host_link().gbps.min(self.nic_gbps)
    }
}

/// The switch's resources besides its aggregators (which the switch model holds).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SwitchSpec {
    /// Buffer of each egress queue, bytes; a packet that does not fit is dropped (drop-tail).
    pub buffer_bytes: u64,
    /// Backlog of an egress queue (bytes) above which the switch marks ECN.
    pub ecn_threshold: u64,
    /// Bandwidth of the recirculation port: every aggregator pass after a packet's first is
    /// one more trip through it.
    pub recirculation_gbps: f64,
}

impl SwitchSpec {
    /// Tofino-like defaults: 10 MB of buffer per egress queue (the strawman's backlog is then
    /// visible before drops hide it), marking at 100 KB, one 100 Gbps recirculation port.
    pub fn tofino_like() -> SwitchSpec {
        SwitchSpec {
            buffer_bytes: 10_000_000,
            ecn_threshold: 100_000,
            recirculation_gbps: 100.0,
        }
    }
}

/// A host's network interface.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HostSpec {
    /// NIC line rate; the uplink runs at the lower of this and the link's bandwidth.
    pub nic_gbps: f64,
    /// Processing cost of each packet sent and of each packet received (two separate
    /// timelines: a send core and a receive core).
    pub per_packet_ns: Nanos,
}

impl HostSpec {
    /// A 100 Gbps NIC and 20 ns per packet (kernel-bypass I/O of about 50 M packets/s).
    pub fn hundred_gbps() -> HostSpec {
        HostSpec {
            nic_gbps: 100.0,
            per_packet_ns: 20,
        }
    }
}

/// One direction of a link, with the queue that feeds it.
#[derive(Debug, Clone)]
pub struct Port {
    /// Picoseconds per byte.
    ps_per_byte: f64,
    pub delay: Nanos,
    /// Drop-tail limit of the backlog (bytes).
    pub buffer: u64,
    /// When the last queued byte leaves.
    last_departure: Picos,
    pub stats: PortStats,
}

/// What crossed one port.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PortStats {
    pub packets: u64,
    pub bytes: u64,
    pub drops: u64,
    pub dropped_bytes: u64,
    /// Deepest backlog right after a packet was queued.
    pub peak_backlog: u64,
}

impl Port {
    pub fn new(gbps: f64, delay: Nanos, buffer: u64) -> Port {
        Port {
            ps_per_byte: 8_000.0 / gbps,
            delay,
            buffer,
            last_departure: 0,
            stats: PortStats::default(),
        }
    }

    /// Serialisation time of `bytes`.
    pub fn serialise(&self, bytes: u64) -> Picos {
        (bytes as f64 * self.ps_per_byte).round() as Picos
    }

    /// Whether the port has nothing queued or on the wire at `now`.
    pub fn idle_at(&self, now: Picos) -> bool {
        self.last_departure <= now
    }

    /// Bytes queued or on the wire at `now`.
    pub fn backlog(&self, now: Picos) -> u64 {
        let left = self.last_departure.saturating_sub(now);
        (left as f64 / self.ps_per_byte).round() as u64
    }

    /// Queue `bytes` that are ready at `ready`: the time its last bit reaches the far end, or
    /// `None` when the buffer is full and the packet is dropped.
    pub fn send(&mut self, ready: Picos, bytes: u64) -> Option<Picos> {
        let backlog = self.backlog(ready);
        if backlog + bytes > self.buffer {
            self.stats.drops += 1;
            self.stats.dropped_bytes += bytes;
            return None;
        }
        let departure = self.last_departure.max(ready) + self.serialise(bytes);
        self.last_departure = departure;
        self.stats.packets += 1;
        self.stats.bytes += bytes;
        self.stats.peak_backlog = self.stats.peak_backlog.max(backlog + bytes);
        Some(departure + to_picos(self.delay))
    }
}

/// The ports of a star: uplink `h` carries host `h`'s packets to the switch, downlink `h` the
/// switch's egress queue towards host `h`.
#[derive(Debug, Clone)]
pub struct Fabric {
    pub uplinks: Vec<Port>,
    pub downlinks: Vec<Port>,
}

impl Fabric {
    pub fn new(topology: &Topology, switch: &SwitchSpec, host: &HostSpec) -> Fabric {
        match *topology {
            Topology::Star { hosts, link } => {
                let up = host.uplink_gbps(topology);
                Fabric {
                    uplinks: (0..hosts)
                        .map(|_| Port::new(up, link.delay_ns, u64::MAX))
                        .collect(),
                    downlinks: (0..hosts)
                        .map(|_| Port::new(link.gbps, link.delay_ns, switch.buffer_bytes))
                        .collect(),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_serialises_back_to_back_and_drops_at_its_buffer() {
        // 8 Gbps: one byte per nanosecond.
        let mut p = Port::new(8.0, 100, 250);
        assert_eq!(p.send(0, 100), Some(to_picos(200)));
        // Queued behind the first: leaves at 200 ns.
        assert_eq!(p.send(0, 100), Some(to_picos(300)));
        assert_eq!(p.backlog(0), 200);
        assert_eq!(p.backlog(to_picos(150)), 50);
        // 200 queued + 100 > 250: dropped.
        assert_eq!(p.send(0, 100), None);
        assert_eq!(p.stats.drops, 1);
        assert_eq!(p.stats.peak_backlog, 200);
        // Idle again later: no queueing.
        assert_eq!(p.send(to_picos(1_000), 10), Some(to_picos(1_110)));
    }
}

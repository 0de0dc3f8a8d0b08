//! Links, queues and the topology: what a packet costs on its way, in time and bytes.
//!
//! Every link direction is a [`Port`], the dataplane's one link model (also the in-memory
//! network's and the switch process's): a FIFO with a rate, a propagation delay and a buffer.

use serde::{Deserialize, Serialize};
use switchgnn_chip::Chip;
pub use switchgnn_dataplane::link::{ceil_nanos, to_picos, Picos, Port, PortStats};
use switchgnn_dataplane::Nanos;

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
    /// The chip: every pass takes a slot of its pipes' packet rate, and every aggregator pass
    /// after a packet's first goes around its recirculation paths.
    pub chip: Chip,
}

impl SwitchSpec {
    /// Tofino-like queues on `chip`: 10 MB of buffer per egress queue (the strawman's backlog
    /// is then visible before drops hide it), marking at 100 KB.
    pub fn on(chip: Chip) -> SwitchSpec {
        SwitchSpec {
            buffer_bytes: 10_000_000,
            ecn_threshold: 100_000,
            chip,
        }
    }

    /// [`SwitchSpec::on`] the smallest real chip that hosts `hosts` at 100 Gb/s (the ideal
    /// switch beyond 128).
    pub fn for_hosts(hosts: u16) -> SwitchSpec {
        let chip = Chip::for_workers(u32::from(hosts), 100.0, 0)
            .or_else(|_| Chip::preset("ideal"))
            .expect("the ideal preset exists");
        SwitchSpec::on(chip)
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

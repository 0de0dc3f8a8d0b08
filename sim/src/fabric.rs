//! Links, queues and the topology: what a packet costs on its way, in time and bytes.
//!
//! Every link direction is a [`Port`], the dataplane's one link model (also the in-memory
//! network's and the switch process's): a FIFO with a rate, a propagation delay and a buffer.

use serde::{Deserialize, Serialize};
use switchgnn_chip::Chip;
use switchgnn_dataplane::framing::HostFraming;
pub use switchgnn_dataplane::link::{ceil_nanos, to_picos, Picos, Port, PortStats};
use switchgnn_dataplane::Nanos;

/// A link: bandwidth and one-way propagation delay.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LinkSpec {
    /// Bandwidth, Gbit/s.
    pub gbps: f64,
    /// One-way propagation delay.
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

/// The network's shape. A parameter of the core: the event loop routes every packet over the
/// ports its topology gives it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Topology {
    /// `hosts` hosts, each on its own link to one switch.
    Star {
        /// Hosts.
        hosts: u16,
        /// Every host's link.
        link: LinkSpec,
    },
    /// `racks` leaf switches with `hosts_per_rack` hosts each (host `h` in rack
    /// `h / hosts_per_rack`), every leaf linked to each of `spines` spine switches by an
    /// `uplink`. The exchange's switch — the switch model, its aggregators and its chip — is
    /// spine 0, so every packet of the exchange goes up to it and down from it (one level of
    /// aggregation); the leaves and the other spines forward. Other traffic takes the
    /// shortest path: within a rack through its leaf, across racks through a spine its flow
    /// hashes to (ECMP).
    LeafSpine {
        /// Leaf switches, one per rack.
        racks: u16,
        /// Hosts in each rack.
        hosts_per_rack: u16,
        /// Spine switches.
        spines: u16,
        /// Every host's link to its leaf.
        link: LinkSpec,
        /// Every leaf's link to each spine.
        uplink: LinkSpec,
    },
}

impl Topology {
    /// The paper's star: 128 hosts on 100 Gbps, 2 µs links.
    pub fn paper_star() -> Topology {
        Topology::Star {
            hosts: 128,
            link: LinkSpec::hundred_gbps(),
        }
    }

    /// `hosts` hosts on one switch, every link `link`.
    pub fn star(hosts: u16, link: LinkSpec) -> Topology {
        Topology::Star { hosts, link }
    }

    /// A leaf-spine fabric whose racks are `oversubscription` times oversubscribed: a leaf's
    /// uplinks together carry `1 / oversubscription` of what its hosts' links do. Uplinks have
    /// the host links' delay.
    pub fn leaf_spine(
        racks: u16,
        hosts_per_rack: u16,
        spines: u16,
        link: LinkSpec,
        oversubscription: f64,
    ) -> Topology {
        let down = f64::from(hosts_per_rack) * link.gbps;
        Topology::LeafSpine {
            racks,
            hosts_per_rack,
            spines,
            link,
            uplink: LinkSpec {
                gbps: down / (f64::from(spines.max(1)) * oversubscription),
                delay_ns: link.delay_ns,
            },
        }
    }

    /// Hosts the topology connects.
    pub fn hosts(&self) -> u16 {
        match *self {
            Topology::Star { hosts, .. } => hosts,
            Topology::LeafSpine {
                racks,
                hosts_per_rack,
                ..
            } => racks * hosts_per_rack,
        }
    }

    /// The link a host attaches with.
    pub fn host_link(&self) -> LinkSpec {
        match *self {
            Topology::Star { link, .. } | Topology::LeafSpine { link, .. } => link,
        }
    }

    /// The one-way delays the exchange's messages wait on: to its switch (a spine on a
    /// fabric: host link and uplink) and, the shortest way, between two hosts.
    pub fn delays(&self) -> switchgnn_chip::Delays {
        let host = self.host_link().delay_ns as f64;
        match *self {
            Topology::Star { .. } => switchgnn_chip::Delays::star(host),
            Topology::LeafSpine { uplink, .. } => switchgnn_chip::Delays {
                to_switch_ns: host + uplink.delay_ns as f64,
                host_to_host_ns: 2.0 * host,
            },
        }
    }

    /// The rack host `h` is in.
    pub fn rack_of(&self, h: u16) -> u16 {
        match *self {
            Topology::Star { .. } => 0,
            Topology::LeafSpine { hosts_per_rack, .. } => h / hosts_per_rack.max(1),
        }
    }

    /// What a rack's hosts can send over what its uplinks carry (1 for a star).
    pub fn oversubscription(&self) -> f64 {
        match *self {
            Topology::Star { .. } => 1.0,
            Topology::LeafSpine {
                hosts_per_rack,
                spines,
                link,
                uplink,
                ..
            } => f64::from(hosts_per_rack) * link.gbps / (f64::from(spines) * uplink.gbps),
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
    /// How the host exchange packs its copies into packets of the MTU and acknowledges them.
    #[serde(default)]
    pub framing: HostFraming,
}

impl HostSpec {
    /// A 100 Gbps NIC and 20 ns per packet (kernel-bypass I/O of about 50 M packets/s).
    pub fn hundred_gbps() -> HostSpec {
        HostSpec {
            nic_gbps: 100.0,
            per_packet_ns: 20,
            framing: HostFraming::default(),
        }
    }
}

/// The fabric's ports. Uplink `h` carries host `h`'s packets to its first switch (the star's
/// switch, or its leaf) and downlink `h` is the last switch's egress queue towards host `h`.
/// A leaf-spine also has, per (rack `r`, spine `s`), the leaf's egress towards the spine
/// (`leaf_up[r · spines + s]`) and the spine's towards the leaf (`spine_down[s · racks + r]`).
#[derive(Debug, Clone)]
pub struct FabricPorts {
    /// Per host: its link to its first switch.
    pub uplinks: Vec<Port>,
    /// Per host: its last switch's egress towards it.
    pub downlinks: Vec<Port>,
    /// Leaves' egresses towards the spines (see [`FabricPorts::leaf_up_port`]).
    pub leaf_up: Vec<Port>,
    /// Spines' egresses towards the leaves (see [`FabricPorts::spine_down`]).
    pub spine_down: Vec<Port>,
    racks: usize,
    spines: usize,
}

impl FabricPorts {
    /// The ports of `topology`, with `switch`'s buffers and `host`'s uplinks.
    pub fn new(topology: &Topology, switch: &SwitchSpec, host: &HostSpec) -> FabricPorts {
        let link = topology.host_link();
        let up = host.uplink_gbps(topology);
        let hosts = topology.hosts();
        let mut fabric = FabricPorts {
            uplinks: (0..hosts)
                .map(|_| Port::new(up, link.delay_ns, u64::MAX))
                .collect(),
            downlinks: (0..hosts)
                .map(|_| Port::new(link.gbps, link.delay_ns, switch.buffer_bytes))
                .collect(),
            leaf_up: Vec::new(),
            spine_down: Vec::new(),
            racks: 1,
            spines: 0,
        };
        if let Topology::LeafSpine {
            racks,
            spines,
            uplink,
            ..
        } = *topology
        {
            let (racks, spines) = (usize::from(racks), usize::from(spines));
            let port = || Port::new(uplink.gbps, uplink.delay_ns, switch.buffer_bytes);
            fabric.leaf_up = (0..racks * spines).map(|_| port()).collect();
            fabric.spine_down = (0..racks * spines).map(|_| port()).collect();
            fabric.racks = racks;
            fabric.spines = spines;
        }
        fabric
    }

    /// Leaf `rack`'s port towards spine `spine`.
    pub fn leaf_up_port(&self, rack: u16, spine: u16) -> &Port {
        &self.leaf_up[usize::from(rack) * self.spines + usize::from(spine)]
    }

    /// Leaf `rack`'s port towards spine `spine`, to queue on.
    pub fn leaf_up_mut(&mut self, rack: u16, spine: u16) -> &mut Port {
        &mut self.leaf_up[usize::from(rack) * self.spines + usize::from(spine)]
    }

    /// Spine `spine`'s port towards leaf `rack`.
    pub fn spine_down(&self, spine: u16, rack: u16) -> &Port {
        &self.spine_down[self.spine_index(spine, rack)]
    }

    /// Spine `spine`'s port towards leaf `rack`, to queue on.
    pub fn spine_down_mut(&mut self, spine: u16, rack: u16) -> &mut Port {
        let i = self.spine_index(spine, rack);
        &mut self.spine_down[i]
    }

    fn spine_index(&self, spine: u16, rack: u16) -> usize {
        usize::from(spine) * self.racks + usize::from(rack)
    }
}

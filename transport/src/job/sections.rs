//! The job file's sections apart from its top level: timers, links, the all-reduce, the
//! two-level fabric, and what carries the exchanges and the packets.

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use switchgnn_dataplane::control::ControlTimers;
use switchgnn_dataplane::engine::Timers;
use switchgnn_dataplane::framing::HostFraming;
use switchgnn_dataplane::ExchangeKind;
use thiserror::Error;

/// Timer settings in human units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Timeouts {
    /// Every worker joins within this of the first one's hello (ms).
    pub join_ms: u64,
    /// A peer silent this long is declared dead (ms).
    pub peer_ms: u64,
    /// The floor of data retransmission (µs).
    pub rto_us: u64,
    /// How often join and block-done messages repeat (µs).
    pub control_us: u64,
    /// No contribution this long: fetch what is missing (µs).
    pub result_us: u64,
}

impl Default for Timeouts {
    /// Suited to loopback and LANs under a general-purpose OS, where a process may wait
    /// milliseconds for a core (the dataplane's own defaults assume a 2 µs fabric).
    fn default() -> Self {
        Timeouts {
            join_ms: 20_000,
            peer_ms: 5_000,
            rto_us: 20_000,
            control_us: 5_000,
            result_us: 50_000,
        }
    }
}

impl Timeouts {
    /// For one machine's loopback, whose round trips are tens of microseconds: recovery
    /// timers of milliseconds keep lossy runs short (a spurious retransmission costs traffic,
    /// never exactness); peers get 10 s.
    pub fn loopback() -> Timeouts {
        Timeouts {
            join_ms: 20_000,
            peer_ms: 10_000,
            rto_us: 2_000,
            control_us: 1_000,
            result_us: 5_000,
        }
    }

    /// `join_ms` as a duration.
    pub fn join(&self) -> Duration {
        Duration::from_millis(self.join_ms)
    }

    /// `peer_ms` as a duration.
    pub fn peer(&self) -> Duration {
        Duration::from_millis(self.peer_ms)
    }

    /// How long a worker may go without an all-reduce: one training epoch of computation, so
    /// far longer than a peer timeout (a dead worker closes its connection at once anyway).
    pub fn collective_idle(&self) -> Duration {
        (120 * self.peer()).max(Duration::from_secs(600))
    }

    /// The control plane's timers (hellos and goodbyes repeat every 100 ms).
    pub fn control(&self) -> ControlTimers {
        ControlTimers {
            join: self.join_ms * 1_000_000,
            peer: self.peer_ms * 1_000_000,
            retry: 100_000_000,
        }
    }

    /// The engine's protocol timers.
    pub fn protocol(&self) -> Timers {
        Timers {
            rto: self.rto_us * 1_000,
            control: self.control_us * 1_000,
            result: self.result_us * 1_000,
        }
    }
}

/// The links' MTU packs the host exchange's copies into datagrams larger than a datapath
/// sends.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "link.mtu = {mtu} packs host copies into datagrams of {datagram} bytes, but {who}'s \
     datapath sends at most {most}: lower the MTU (--mtu)"
)]
pub struct MtuTooLarge {
    /// The job's `link.mtu`.
    pub mtu: u32,
    /// The datagrams the host exchange packs at that MTU.
    pub datagram: usize,
    /// Whose datapath (`worker 3`, `the switch`).
    pub who: String,
    /// The largest datagram that datapath sends.
    pub most: usize,
}

/// The emulated links.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Link {
    /// Rate cap in Gbit/s of each worker's sending and of each switch egress port.
    pub gbps: f64,
    /// The switch's egress queue depth above which it marks ECN; by default
    /// ([`Link::ecn_threshold`]) what the port drains in [`ECN_SOJOURN_US`], at least 64 KiB.
    pub ecn_threshold_bytes: Option<u64>,
    /// Data chunks a worker may have unacknowledged at once: keeps a slow software switch's
    /// socket queue (and with it the round-trip time) short.
    pub window: usize,
    /// Whether workers keep a congestion window below `window` (halved on loss and ECN, as
    /// TCP's). Off only to show what a rate-only sender does to a slow switch.
    pub congestion_window: bool,
    /// The links' MTU, bytes: the host exchange packs its copies into packets this large
    /// (576 to 9216; above 1500 only where every host link takes jumbo frames).
    pub mtu: u32,
    /// The host exchange's receivers acknowledge once per this many packets from a sender.
    pub ack_every: u32,
}

impl Default for Link {
    fn default() -> Self {
        Link {
            gbps: 10.0,
            ecn_threshold_bytes: None,
            window: 512,
            congestion_window: true,
            mtu: HostFraming::default().mtu,
            ack_every: HostFraming::default().ack_every,
        }
    }
}

impl Link {
    /// How the host exchange frames its copies on these links.
    pub fn framing(&self) -> HostFraming {
        HostFraming {
            mtu: self.mtu,
            ack_every: self.ack_every,
        }
    }

    /// Whether `who`'s datapath, which sends datagrams of at most `most` bytes, carries the
    /// host exchange's packed copies; what to change if not.
    pub fn fits_datapath(&self, most: usize, who: &str) -> Result<(), MtuTooLarge> {
        let datagram = self.framing().datagram_len();
        if datagram <= most {
            return Ok(());
        }
        Err(MtuTooLarge {
            mtu: self.mtu,
            datagram,
            who: who.to_string(),
            most,
        })
    }

    /// Bytes per second.
    pub fn rate(&self) -> f64 {
        self.gbps * 1e9 / 8.0
    }

    /// The egress queue depth above which the switch marks ECN: the configured one, or what a
    /// port drains in [`ECN_SOJOURN_US`] at these links' rate, at least [`ECN_THRESHOLD_FLOOR`].
    /// A depth in bytes means a different delay at every rate: 64 KiB is 52 µs at 10 Gb/s,
    /// and at the 1,000 Gb/s of an uncapped run a single GSO burst (64 datagrams, 96 KB) passed
    /// it, so every burst was marked and the senders halved their rates for nothing
    /// (Amazon-Computers × 4, host-reduce at width 745: 7,000 marks per 8 exchanges, 1.25×
    /// the time without them).
    pub fn ecn_threshold(&self) -> u64 {
        self.ecn_threshold_bytes.unwrap_or_else(|| {
            ((self.rate() * ECN_SOJOURN_US * 1e-6) as u64).max(ECN_THRESHOLD_FLOOR)
        })
    }
}

/// The queueing delay at a switch port above which it marks ECN, by default.
pub const ECN_SOJOURN_US: f64 = 50.0;

/// The least default ECN threshold, bytes (about [`ECN_SOJOURN_US`] at 10 Gb/s).
pub const ECN_THRESHOLD_FLOOR: u64 = 64 * 1024;

/// The `[fabric]` section: the job runs on a two-level fabric, a leaf switch per rack (each
/// rack's workers join its leaf) under the spine, which the job's `switch` address names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fabric {
    /// Rack `r`'s leaf switch.
    pub leaves: Vec<SocketAddr>,
    /// Each rank's rack; default: consecutive ranks, as even as can be.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub racks: Option<Vec<u16>>,
}

/// The `[allreduce]` section: where training's all-reduce (weight gradients, the exchanges'
/// scale agreement) runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AllReduce {
    /// `"switch"`: in the switch's own slots, SwitchML's protocol; `"tcp"`: through the
    /// parameter-server service beside the switch (the fallback and the reference).
    pub via: AllReduceVia,
    /// Slots (of 64 values, two banks each) the switch gives the job: the window of slices
    /// each worker keeps in flight. The switch's job file counts; workers learn it from the
    /// switch's welcome.
    pub slots: u16,
    /// ATP's best-effort mode: no slots of its own, but the switch's pool shared by every
    /// best-effort job; what the pool cannot take (a slot another slice holds, a
    /// retransmission) the switch's host finishes. `slots` is then only the window.
    pub best_effort: bool,
}

impl Default for AllReduce {
    fn default() -> Self {
        AllReduce {
            via: AllReduceVia::Switch,
            slots: 128,
            best_effort: false,
        }
    }
}

/// Where an all-reduce runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AllReduceVia {
    /// In the switch.
    #[default]
    Switch,
    /// Through the TCP service beside the switch.
    Tcp,
}

impl AllReduceVia {
    /// The way named `switch` or `tcp`.
    pub fn parse(name: &str) -> Option<AllReduceVia> {
        match name {
            "switch" => Some(AllReduceVia::Switch),
            "tcp" => Some(AllReduceVia::Tcp),
            _ => None,
        }
    }

    /// Its name in job files and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            AllReduceVia::Switch => "switch",
            AllReduceVia::Tcp => "tcp",
        }
    }
}

/// What carries a job's exchanges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExchangeVia {
    /// Packets through the switch (every exchange kind).
    #[default]
    Switch,
    /// The host exchange's copies over one TCP connection per pair of workers, the switch
    /// process only the control path and the rendezvous ([`crate::tcp_exchange`]): the
    /// kernel's own transport, as gloo's all-to-all runs it, for a baseline.
    Tcp,
}

impl ExchangeVia {
    pub(crate) fn is_switch(&self) -> bool {
        *self == ExchangeVia::Switch
    }
}

/// What the command line's `--exchange NAME` runs: `tcp` is the host exchange over TCP, any
/// other name the kind it names through the switch. `None` for an unknown name.
pub fn parse_exchange(name: &str) -> Option<(ExchangeKind, ExchangeVia)> {
    match name {
        "tcp" => Some((ExchangeKind::Host, ExchangeVia::Tcp)),
        _ => ExchangeKind::parse(name).map(|k| (k, ExchangeVia::Switch)),
    }
}

/// Which datapath carries the packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TransportKind {
    /// The kernel's UDP stack.
    #[default]
    Udp,
    /// DPDK: Ethernet frames straight from and to the NIC (cargo feature `dpdk`).
    Dpdk,
}

impl TransportKind {
    /// The transport named `udp` or `dpdk`.
    pub fn parse(name: &str) -> Option<TransportKind> {
        match name {
            "udp" => Some(TransportKind::Udp),
            "dpdk" => Some(TransportKind::Dpdk),
            _ => None,
        }
    }

    /// Whether this build can run it.
    pub fn is_available(self) -> bool {
        self == TransportKind::Udp || switchgnn_net::dpdk::IN_THIS_BUILD
    }
}

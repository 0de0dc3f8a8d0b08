//! What the switch process reports at exit and on request: the switch model's counters, the
//! endpoint's, the ingress backlog, and each job's peers and control plane.

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};
use switchgnn_dataplane::control::ControlCounters;
use switchgnn_dataplane::switch::{JobStatus, SwitchCounters};
use switchgnn_net::{EndpointStats, PeerCounters};

/// What the switch reports at exit (and on request while running).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServerReport {
    /// Seconds since the switch started.
    pub elapsed_s: f64,
    /// The switch model's counters, all jobs together (drops by reason included).
    pub counters: SwitchCounters,
    /// The endpoint's own counters.
    pub endpoint: EndpointStats,
    /// Control messages that did not parse, or that no job expected.
    pub malformed_control: u64,
    /// Packets dropped at a full egress queue.
    pub egress_drops: u64,
    /// The deepest egress queue seen (bytes).
    pub peak_egress_bytes: u64,
    /// The process's own input queue.
    pub ingress: IngressReport,
    /// Each job served, in the order they were configured.
    pub jobs: Vec<JobReport>,
    /// Aggregator passes (readouts not counted) of each of the switch model's cores (one
    /// figure on one core).
    #[serde(default)]
    pub passes_per_core: Vec<u64>,
}

impl ServerReport {
    /// The report of job `job`, if the switch served it.
    pub fn job(&self, job: u16) -> Option<&JobReport> {
        self.jobs.iter().find(|j| j.job == job)
    }
}

/// One job's part of a [`ServerReport`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobReport {
    /// The job's id.
    pub job: u16,
    /// The switch port of its worker 0 (worker `r` is on `first_port + r`).
    pub first_port: u16,
    /// Per rank: its address and the traffic exchanged with it.
    pub peers: Vec<PeerReport>,
    /// Dataplane packets from addresses that had not said hello (the job's id in their
    /// header, or the first job's when it names none served here).
    pub unknown_packets: u64,
    /// Hellos refused.
    pub refused: u64,
    /// The switch model's view of the job's exchanges, if installed.
    pub status: Option<JobStatus>,
    /// The control plane's counters (admissions, challenges, replies to strangers left
    /// unsent, ...).
    pub control: ControlCounters,
    /// Why the job ended badly, if it did.
    pub failure: Option<String>,
}

/// The switch process's own input queue: how deep it got, how often it marked congestion,
/// what the kernel dropped, and how fast the process handled datagrams.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct IngressReport {
    /// The socket's receive buffer (bytes, as the kernel accounts it).
    pub buffer_bytes: u64,
    /// Deepest backlog read (bytes).
    pub peak_backlog_bytes: u64,
    /// Datagrams the kernel dropped at the switch's socket.
    pub socket_drops: u64,
    /// Receive rounds that found the backlog above the marking threshold.
    pub congested_rounds: u64,
    /// Receive rounds.
    pub rounds: u64,
    /// The per-worker window the welcome advertised (data packets awaiting acknowledgement).
    pub advertised_window: u64,
    /// Datagrams handled, and the time spent handling them: the process's capacity is their
    /// ratio.
    pub datagrams: u64,
    /// Seconds spent handling them.
    pub busy_s: f64,
}

impl IngressReport {
    /// Datagrams per second the process handled while busy.
    pub fn capacity(&self) -> f64 {
        if self.busy_s > 0.0 {
            self.datagrams as f64 / self.busy_s
        } else {
            0.0
        }
    }
}

/// One worker as the switch saw it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PeerReport {
    /// Its rank.
    pub rank: u16,
    /// The address its hello came from.
    pub addr: SocketAddr,
    /// Traffic exchanged with it.
    pub traffic: PeerCounters,
}

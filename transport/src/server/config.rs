//! What a switch process is told: its listen address, timers, links, faults, the overload
//! behaviour, the tier it has in a two-level fabric, and each job it serves.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use switchgnn_dataplane::control::Secret;
use switchgnn_dataplane::switch::Racks;
use switchgnn_net::{ShimConfig, Transport};

use crate::job::{Link, Timeouts};
use crate::session::Session;

/// How the switch process protects itself when it cannot keep up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overload {
    /// Mark congestion while the socket's backlog is deep, and cap the workers' windows at
    /// their share of the receive buffer. Off only to show what happens without it.
    pub backlog_signal: bool,
    /// Receive buffer to ask the kernel for (bytes); `None`: the endpoint's default.
    pub recv_buffer: Option<usize>,
    /// Extra processing time per datagram: emulates a slower switch (tests and benchmarks).
    pub per_packet_delay: Duration,
}

impl Default for Overload {
    fn default() -> Self {
        Overload {
            backlog_signal: true,
            recv_buffer: None,
            per_packet_delay: Duration::ZERO,
        }
    }
}

/// How a switch process runs: its address, its first job, timers, links, faults and resources.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The first job's id.
    pub job: u16,
    /// The first job's workers.
    pub world: u16,
    /// Where the switch listens (port 0: any free port).
    pub listen: SocketAddr,
    /// The first job's join, liveness and protocol timers.
    pub timeouts: Timeouts,
    /// The emulated links of every port.
    pub link: Link,
    /// Faults injected on every send (tests).
    pub faults: ShimConfig,
    /// Aggregators of the switch (256 bytes each).
    pub aggregators: usize,
    /// Cores the switch model runs on (`switch --cores`): its aggregators spread over this many
    /// shards by destination, the first on the thread that moves packets, each other on a
    /// thread of its own. A leaf or spine of a two-level fabric runs on one.
    pub cores: u16,
    /// Stop (successfully) once this many exchanges have completed: a switch drained for
    /// maintenance. Workers rejoin the next switch started on the same address.
    pub stop_after_exchanges: Option<u64>,
    /// How the process behaves when it falls behind its senders.
    pub overload: Overload,
    /// The datapath: the kernel's UDP stack or DPDK.
    pub transport: Transport,
    /// Admit only workers that prove they hold this secret (the job file's `secret_file`).
    pub secret: Option<Secret>,
    /// All-reduce slots the job gets in the switch (the job file's `allreduce.slots`); 0 for
    /// none.
    pub allreduce_slots: u16,
    /// The job all-reduces best-effort in the shared pool (`allreduce.best_effort`):
    /// `allreduce_slots` is then its window.
    pub allreduce_best_effort: bool,
    /// The pool best-effort jobs share, if the switch has one.
    pub allreduce_pool: Option<AllReducePool>,
    /// Exchange aggregators each job named here may hold at once: its region of the pool,
    /// so that no job's exchanges take what another's blocks were cut for. Jobs not named
    /// take what is free.
    pub aggregator_quotas: std::collections::BTreeMap<u16, usize>,
}

/// Where a switch process sits in a two-level fabric ([`SwitchServer::bind_tier`](super::SwitchServer::bind_tier)).
#[derive(Debug, Clone)]
pub enum ProcessTier {
    /// The leaf switch of rack `rack`, its uplink to the spine at `spine`.
    Leaf {
        /// The leaf's rack.
        rack: u16,
        /// Every worker's rack.
        racks: Arc<Racks>,
        /// Where the spine listens.
        spine: SocketAddr,
    },
    /// The spine, every rack's leaf on a port of its own.
    Spine {
        /// Every worker's rack.
        racks: Arc<Racks>,
    },
}

/// The switch's pool of all-reduce slots shared by best-effort jobs (ATP).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllReducePool {
    /// Slots in the pool.
    pub slots: u32,
    /// A slot whose slice has not progressed for this long may be taken by another.
    pub leak: Duration,
}

impl Default for AllReducePool {
    fn default() -> Self {
        AllReducePool {
            slots: 256,
            leak: Duration::from_millis(10),
        }
    }
}

impl ServerConfig {
    /// A switch for job `job` of `world` workers with `aggregators`, on a free loopback port,
    /// with the job file's default timeouts and link, no faults, serving until every worker has
    /// left, and protecting itself from overload.
    pub fn loopback(job: u16, world: u16, aggregators: usize) -> ServerConfig {
        ServerConfig {
            job,
            world,
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            timeouts: Timeouts::default(),
            link: Link::default(),
            faults: ShimConfig::default(),
            aggregators,
            cores: 1,
            stop_after_exchanges: None,
            secret: None,
            overload: Overload::default(),
            transport: Transport::Udp,
            allreduce_slots: crate::job::AllReduce::default().slots,
            allreduce_best_effort: false,
            allreduce_pool: None,
            aggregator_quotas: Default::default(),
        }
    }
}

/// One job a switch process serves. The process's first job comes from its
/// [`ServerConfig`] ([`ServedJob::first`]); [`SwitchServer::bind_jobs`](super::SwitchServer::bind_jobs) takes more.
#[derive(Debug, Clone)]
pub struct ServedJob {
    /// The job's id.
    pub job: u16,
    /// The job's workers.
    pub world: u16,
    /// The job's exchange plans and the fingerprint its workers must present.
    pub session: Arc<Session>,
    /// Join, heartbeat and peer timeouts of the job's workers.
    pub timeouts: Timeouts,
    /// Admit only workers that prove they hold this secret.
    pub secret: Option<Secret>,
    /// All-reduce slots the job gets in the switch; 0 for none.
    pub allreduce_slots: u16,
    /// Best-effort in the shared pool, `allreduce_slots` its window.
    pub allreduce_best_effort: bool,
}

impl ServedJob {
    /// The job `cfg` describes, with its plans in `session`.
    pub fn first(cfg: &ServerConfig, session: Arc<Session>) -> ServedJob {
        ServedJob {
            job: cfg.job,
            world: cfg.world,
            session,
            timeouts: cfg.timeouts,
            secret: cfg.secret.clone(),
            allreduce_slots: cfg.allreduce_slots,
            allreduce_best_effort: cfg.allreduce_best_effort,
        }
    }
}

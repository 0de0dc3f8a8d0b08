//! The software switch as a process: the switch model behind a UDP endpoint and a real-time
//! driver.
//!
//! - **Admission**: a worker says hello with its rank, the world size, the exchange mode, the
//!   plan checksum and the protocol versions; any mismatch is refused with a message naming
//!   both sides' values. Dataplane packets from an address that has not said hello are
//!   dropped and answered with `Unknown`, which makes a worker say hello again (this is how
//!   workers rejoin a restarted switch).
//! - **Egress queues**: each worker port drains at the link rate (the dataplane's link model,
//!   the simulator's and the in-memory network's too), so the switch model's ECN marking sees
//!   a real queue depth; a packet leaving a queue above the threshold carries the
//!   congestion-experienced codepoint in its IP header as well.
//! - **Ingress backlog**: the process itself is a queue too — a software switch on a shared
//!   machine can fall behind its senders. After every receive round it reads its socket's
//!   backlog from the kernel; above an eighth of the receive buffer, everything it sends is
//!   ECN-marked, so the workers' rate control backs off before the kernel drops. The welcome
//!   also caps each worker's window at its share of the receive buffer. Kernel drops are
//!   counted in the report and the status line.
//! - **Liveness**: every wait has a deadline. Workers that have not joined in time, a worker
//!   silent for the peer timeout (workers send heartbeats while they compute), or an exchange
//!   that every worker has joined and that stops making progress end the run with an error
//!   naming the workers and what the job was waiting for, and the other workers are told
//!   (`Abort`) so that nobody hangs.
//! - **Several jobs**: one process can serve several jobs at once ([`SwitchServer::bind_jobs`]).
//!   Each job gets its own range of switch ports, its own control plane (admission, secret,
//!   timeouts, liveness) and its own all-reduce region; they share the aggregator pool and the
//!   receive buffer. A job that fails is aborted alone; the others run on.
//! - **Cores** (`ServerConfig::cores`): the switch model can run in shards, its aggregators
//!   spread by destination (`switch::ShardedSwitch`): each receive round's dataplane packets
//!   are handed to every shard at once at the round's end, the first on this thread.
//! - **Two levels** ([`SwitchServer::bind_tier`]): a process can be a leaf switch of a rack or
//!   the spine of a two-level fabric (see the switch model's `Tier`). A leaf admits its rack's
//!   workers and is itself a worker of the spine's control plane: it says hello to the spine
//!   as its rack, keeps it informed with heartbeats, and leaves once its workers have. The
//!   spine's ports are the leaves.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use switchgnn_dataplane::control::{
    Admission, Control, ControlCounters, Hello, Secret, SwitchControl, SwitchControlConfig,
    SwitchFailure, WorkerControl, WorkerState, CONTROL_VERSION,
};
use switchgnn_dataplane::link::{ceil_nanos, to_picos, Port};
use switchgnn_dataplane::switch::{
    JobConfig, JobStatus, Racks, ShardedSwitch, SwitchConfig, SwitchCounters, Tier,
};
use switchgnn_dataplane::{wire, Address, Nanos, Node};
use thiserror::Error;

use crate::job::{Link, Timeouts};
use crate::liveness::Liveness;
use crate::session::Session;
use switchgnn_net::dpdk::Role;
use switchgnn_net::{Datagram, EcnCodepoint, Endpoint, EndpointStats, OpenError, Opening};
use switchgnn_net::{PeerCounters, RxBacklog, ShimConfig, Transport};

/// Bytes an egress queue holds before it drops (a shallow-buffered switch port).
const EGRESS_BUFFER: u64 = 4 << 20;
/// How often the driver wakes to check timeouts when nothing else happens.
const TICK: Duration = Duration::from_millis(20);
/// The receive backlog marks congestion above this fraction of the receive buffer: early
/// enough that the senders' cut takes effect (one round trip, itself this backlog's delay)
/// long before the buffer is full.
const BACKLOG_MARK_FRACTION: u64 = 8;
/// The kernel's accounting of one small datagram in a receive queue (buffer and metadata):
/// 832 bytes for a 160-byte datagram on loopback here (Linux 6), a page or more behind many
/// NIC drivers. The welcome's window assumes the larger.
const DATAGRAM_TRUESIZE: u64 = 2048;

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

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub job: u16,
    pub world: u16,
    pub listen: SocketAddr,
    pub timeouts: Timeouts,
    pub link: Link,
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

/// Where a switch process sits in a two-level fabric ([`SwitchServer::bind_tier`]).
#[derive(Debug, Clone)]
pub enum ProcessTier {
    /// The leaf switch of rack `rack`, its uplink to the spine at `spine`.
    Leaf {
        rack: u16,
        racks: Arc<Racks>,
        spine: SocketAddr,
    },
    /// The spine, every rack's leaf on a port of its own.
    Spine { racks: Arc<Racks> },
}

/// The switch's pool of all-reduce slots shared by best-effort jobs (ATP).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllReducePool {
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
/// [`ServerConfig`] ([`ServedJob::first`]); [`SwitchServer::bind_jobs`] takes more.
#[derive(Debug, Clone)]
pub struct ServedJob {
    pub job: u16,
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

#[derive(Debug, Error)]
pub enum ServerError {
    /// The jobs cannot be served together as configured.
    #[error("{0}")]
    Config(String),
    #[error("switch socket: {0}")]
    Io(#[from] io::Error),
    /// The datapath did not open (an address in use, DPDK's set-up).
    #[error("switch socket: {0}")]
    Open(#[from] OpenError),
    /// A leaf's spine refused it, aborted the job, or fell silent.
    #[error("the spine: {0}")]
    Spine(switchgnn_dataplane::control::WorkerFailure),
    #[error("cannot install the job: {0}")]
    Job(#[from] switchgnn_dataplane::switch::SwitchError),
    /// The control plane ended the job: workers missing, a worker lost, or no progress.
    #[error(transparent)]
    Failed(#[from] SwitchFailure<SocketAddr>),
    #[error("cannot listen on TCP {addr} for the all-reduce service: {source}")]
    Service { addr: SocketAddr, source: io::Error },
}

/// What the switch reports at exit (and on request while running).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServerReport {
    pub elapsed_s: f64,
    /// The switch model's counters, all jobs together (drops by reason included).
    pub counters: SwitchCounters,
    pub endpoint: EndpointStats,
    /// Control messages that did not parse, or that no job expected.
    pub malformed_control: u64,
    /// Packets dropped at a full egress queue.
    pub egress_drops: u64,
    pub peak_egress_bytes: u64,
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
    pub job: u16,
    /// The switch port of its worker 0 (worker `r` is on `first_port + r`).
    pub first_port: u16,
    /// Per rank: its address and the traffic exchanged with it.
    pub peers: Vec<PeerReport>,
    /// Dataplane packets from addresses that had not said hello (the job's id in their
    /// header, or the first job's when it names none served here).
    pub unknown_packets: u64,
    pub refused: u64,
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
    pub rounds: u64,
    /// The per-worker window the welcome advertised (data packets awaiting acknowledgement).
    pub advertised_window: u64,
    /// Datagrams handled, and the time spent handling them: the process's capacity is their
    /// ratio.
    pub datagrams: u64,
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

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PeerReport {
    pub rank: u16,
    pub addr: SocketAddr,
    pub traffic: PeerCounters,
}

/// One egress port: the dataplane's link model decides when each packet has left at the
/// link rate; the packets wait here until then.
#[derive(Debug)]
struct Egress {
    port: Port,
    /// Packets and when they have left (nanoseconds since the switch started).
    queue: VecDeque<(Nanos, Vec<u8>)>,
}

impl Egress {
    fn new(link: &Link) -> Egress {
        Egress {
            port: Port::new(link.gbps, 0, EGRESS_BUFFER),
            queue: VecDeque::new(),
        }
    }

    /// Send to `to` every packet that has left by `t` (nanoseconds), marked
    /// congestion-experienced while the queue is above `threshold` bytes: whether any left.
    fn drain(&mut self, t: Nanos, threshold: u64, to: SocketAddr, endpoint: &mut Endpoint) -> bool {
        let now_ps = to_picos(t);
        let mut sent = false;
        while self.queue.front().is_some_and(|&(left, _)| left <= t) {
            let (_, bytes) = self.queue.pop_front().expect("front");
            let ecn = if self.port.backlog(now_ps) > threshold {
                EcnCodepoint::Ce
            } else {
                EcnCodepoint::Ect0
            };
            endpoint.send(to, Some(ecn), bytes);
            sent = true;
        }
        sent
    }
}

/// A job being served: its ports and its control plane (which knows its id and world).
#[derive(Debug)]
struct Served {
    /// The switch port of its worker 0.
    first_port: u16,
    timeouts: Timeouts,
    /// Admission, heartbeats, liveness, abort and drain: the dataplane's control machine.
    control: SwitchControl<SocketAddr>,
    /// When the switch last heard each worker: for the collective service beside it.
    liveness: Arc<Liveness>,
}

impl Served {
    fn job(&self) -> u16 {
        self.control.config().job
    }

    /// Whether the job is over: every worker left, its drain ended, or it failed.
    fn is_over(&self, now: Nanos) -> bool {
        self.control.is_finished(now) || self.control.failure().is_some()
    }
}

/// Everything but the socket, so that received datagrams can be handled while the endpoint
/// lends its buffers.
#[derive(Debug)]
struct Core {
    cfg: ServerConfig,
    /// The switch model; a receive round's dataplane packets fill its batch, handed to its
    /// cores at the round's end.
    switch: ShardedSwitch,
    /// The jobs, in the order their ports were given out.
    jobs: Vec<Served>,
    /// Per switch port: the job (an index into `jobs`) and the rank of the worker on it.
    ports: Vec<(usize, u16)>,
    epoch: Instant,
    egress: Vec<Egress>,
    malformed_control: u64,
    egress_drops: u64,
    peak_egress_bytes: u64,
    ingress: IngressReport,
    /// A leaf's link to its spine.
    uplink: Option<Uplink>,
}

/// A leaf switch's side of its link to the spine: the spine's address, the leaf's control
/// plane towards it (the leaf is the spine's worker for its rack) and the egress queue up.
#[derive(Debug)]
struct Uplink {
    spine: SocketAddr,
    control: WorkerControl,
    egress: Egress,
}

/// The switch process's driver.
#[derive(Debug)]
pub struct SwitchServer {
    endpoint: Endpoint,
    core: Core,
}

/// Ephemeral ports tried before giving up on a switch and service that share a port number.
const SHARED_PORT_TRIES: usize = 16;

impl SwitchServer {
    /// Bind the switch (UDP) and start the all-reduce service (TCP) on the same address:
    /// workers find the service at the switch's address. When the switch asked for any free
    /// port, the TCP twin of the one it got may be taken (an outgoing connection's local end
    /// holds it), so that port is given up and another tried.
    pub fn bind_with_service(
        cfg: ServerConfig,
        session: Arc<Session>,
        service: crate::collective::ServiceConfig,
    ) -> Result<(SwitchServer, crate::collective::RunningService), ServerError> {
        SwitchServer::bind_jobs_with_service(cfg, session, Vec::new(), vec![service])
    }

    /// [`SwitchServer::bind_jobs`], with one all-reduce service beside the switch for the
    /// jobs of `services` (each judged by the switch's liveness table of its job).
    pub fn bind_jobs_with_service(
        cfg: ServerConfig,
        session: Arc<Session>,
        more: Vec<ServedJob>,
        services: Vec<crate::collective::ServiceConfig>,
    ) -> Result<(SwitchServer, crate::collective::RunningService), ServerError> {
        let ephemeral = cfg.listen.port() == 0;
        let bind = || SwitchServer::bind_jobs(cfg.clone(), session.clone(), more.clone());
        with_service(ephemeral, bind, |server| {
            services
                .iter()
                .map(|s| (s.clone(), server.liveness_of(s.job)))
                .collect()
        })
    }

    /// [`SwitchServer::bind_tier`] for the spine, with the job's all-reduce service beside it
    /// (the leaves do not have one). It judges workers by their rounds alone: the spine hears
    /// leaves, not workers.
    pub fn bind_spine_with_service(
        cfg: ServerConfig,
        session: Arc<Session>,
        racks: Arc<Racks>,
        service: crate::collective::ServiceConfig,
    ) -> Result<(SwitchServer, crate::collective::RunningService), ServerError> {
        let ephemeral = cfg.listen.port() == 0;
        let bind = || {
            let tier = ProcessTier::Spine {
                racks: racks.clone(),
            };
            SwitchServer::bind_tier(cfg.clone(), session.clone(), tier)
        };
        with_service(ephemeral, bind, |_| vec![(service.clone(), None)])
    }

    pub fn bind(cfg: ServerConfig, session: Arc<Session>) -> Result<SwitchServer, ServerError> {
        SwitchServer::bind_jobs(cfg, session, Vec::new())
    }

    /// A switch of a two-level fabric serving `cfg`'s job: a leaf (its rack's workers join it,
    /// it joins the spine) or the spine (the leaves join it, one port each). One job, over
    /// UDP.
    pub fn bind_tier(
        cfg: ServerConfig,
        session: Arc<Session>,
        tier: ProcessTier,
    ) -> Result<SwitchServer, ServerError> {
        if !matches!(cfg.transport, Transport::Udp) {
            return Err(ServerError::Config(
                "a leaf or spine switch runs over UDP only".into(),
            ));
        }
        let racks = match &tier {
            ProcessTier::Leaf { racks, .. } | ProcessTier::Spine { racks } => racks.clone(),
        };
        if cfg.world != session.workers() || racks.workers() != cfg.world {
            return Err(ServerError::Config(format!(
                "job {} is said to have {} workers, its plan {} and its rack map {}",
                cfg.job,
                cfg.world,
                session.workers(),
                racks.workers()
            )));
        }
        let mut endpoint = open_endpoint(&cfg)?;
        let buffer_bytes = endpoint.backlog().map_or(0, |b| b.buffer_bytes);
        let mode = session.mode.name().to_string();
        // A leaf's ports are the job's ranks (its rack's in use); a spine's are the racks.
        let (ports, world, rack, switch_tier, uplink) = match tier {
            ProcessTier::Leaf { rack, racks, spine } => {
                if rack >= racks.racks() {
                    return Err(ServerError::Config(format!(
                        "a leaf of rack {rack} in a fabric of {} racks",
                        racks.racks()
                    )));
                }
                let members: Vec<u16> = (0..cfg.world)
                    .filter(|&w| racks.rack_of(w) == rack)
                    .collect();
                let hello = Hello {
                    control_version: CONTROL_VERSION,
                    wire_version: wire::VERSION,
                    job: cfg.job,
                    rank: rack,
                    world: racks.racks(),
                    mode: mode.clone(),
                    plan_checksum: session.checksum,
                    proof: None,
                };
                let mut control = WorkerControl::new(hello, cfg.timeouts.control(), 0);
                // The spine's heartbeats keep a live one heard: judge its silence throughout.
                control.listen(0, true);
                let uplink = Uplink {
                    spine,
                    control,
                    egress: Egress::new(&cfg.link),
                };
                let tier = Tier::Leaf {
                    rack,
                    racks: racks.clone(),
                };
                (cfg.world, cfg.world, Some(members), tier, Some(uplink))
            }
            ProcessTier::Spine { racks } => {
                let n = racks.racks();
                (n, n, None, Tier::Spine(racks), None)
            }
        };
        let mut switch = switch_model(&cfg, ports)?;
        switch.add_job(JobConfig::new(cfg.job, session.layers.clone()).in_tier(switch_tier))?;
        let is_spine = uplink.is_none();
        if is_spine && cfg.allreduce_slots > 0 {
            // The all-reduce runs at the spine; the leaves pass its slices on.
            switch.add_allreduce(cfg.job, cfg.allreduce_slots)?;
        }
        let advertised = advertised_window(buffer_bytes, ports);
        let control = SwitchControl::new(
            SwitchControlConfig {
                job: cfg.job,
                world,
                mode,
                plan_checksum: session.checksum,
                timers: cfg.timeouts.control(),
                window: if cfg.overload.backlog_signal && !is_spine {
                    advertised
                } else {
                    0
                },
                allreduce_slots: cfg.allreduce_slots,
                rack,
            },
            0,
        );
        let control = match &cfg.secret {
            Some(secret) if !is_spine => control.with_secret(secret.clone(), rand::random()),
            _ => control,
        };
        let served = Served {
            first_port: 0,
            timeouts: cfg.timeouts,
            control,
            liveness: Arc::new(Liveness::new(world, cfg.timeouts.peer())),
        };
        let owners = (0..ports).map(|rank| (0, rank)).collect();
        let ingress = (buffer_bytes, advertised);
        if let Some(up) = &uplink {
            endpoint.pin(up.spine);
        }
        let core = Core::new(cfg, switch, vec![served], owners, ingress, uplink);
        Ok(SwitchServer { endpoint, core })
    }

    /// A switch serving `cfg`'s job and `more` at once, on one address. Each job gets its own
    /// ports (worker `r` of a job on its first port + `r`), its own control plane (admission,
    /// secret, timeouts) and its own all-reduce region; the aggregator pool is shared. A
    /// job's packets cannot reach another job's state: the switch model judges a packet by
    /// the port its sender was admitted on, not by the job id in its header.
    pub fn bind_jobs(
        cfg: ServerConfig,
        session: Arc<Session>,
        more: Vec<ServedJob>,
    ) -> Result<SwitchServer, ServerError> {
        let mut specs = vec![ServedJob::first(&cfg, session)];
        specs.extend(more);
        for (i, a) in specs.iter().enumerate() {
            if let Some(b) = specs[..i].iter().find(|b| b.job == a.job) {
                return Err(ServerError::Config(format!(
                    "job {} is given twice: every job a switch serves needs its own id",
                    b.job
                )));
            }
        }
        if let Some(j) = specs.iter().find(|j| j.world != j.session.workers()) {
            return Err(ServerError::Config(format!(
                "job {} is said to have {} workers but its plan has {}",
                j.job,
                j.world,
                j.session.workers()
            )));
        }
        if specs.len() > 1 && !matches!(cfg.transport, Transport::Udp) {
            return Err(ServerError::Config(
                "a switch serves several jobs over UDP only: DPDK's ports and memif sockets are \
                 set up per job"
                    .into(),
            ));
        }
        let total_ports: u32 = specs.iter().map(|j| u32::from(j.world)).sum();
        let ports = u16::try_from(total_ports).map_err(|_| {
            ServerError::Config(format!(
                "the jobs have {total_ports} workers together; a switch has at most {} ports",
                u16::MAX
            ))
        })?;
        let mut endpoint = open_endpoint(&cfg)?;
        cfg.link
            .fits_datapath(endpoint.max_datagram(), "the switch")
            .map_err(ServerError::Config)?;
        let buffer_bytes = endpoint.backlog().map_or(0, |b| b.buffer_bytes);
        let mut switch = switch_model(&cfg, ports)?;
        // Every worker of every job shares the receive buffer.
        let advertised = advertised_window(buffer_bytes, ports);
        if let Some(pool) = cfg.allreduce_pool {
            switch.set_allreduce_pool(pool.slots, pool.leak.as_nanos() as u64)?;
        }
        let mut jobs = Vec::with_capacity(specs.len());
        let mut port_owner = Vec::with_capacity(usize::from(ports));
        let mut first_port = 0u16;
        for spec in specs {
            let mut job = JobConfig::new(spec.job, spec.session.layers.clone()).at_port(first_port);
            if let Some(&quota) = cfg.aggregator_quotas.get(&spec.job) {
                job = job.with_aggregators(quota);
            }
            switch.add_job(job)?;
            match (spec.allreduce_slots, spec.allreduce_best_effort) {
                (0, _) => {}
                (slots, false) => switch.add_allreduce(spec.job, slots)?,
                (window, true) => switch.add_allreduce_best_effort(spec.job, window)?,
            }
            let control = SwitchControl::new(
                SwitchControlConfig {
                    job: spec.job,
                    world: spec.world,
                    mode: spec.session.mode.name().to_string(),
                    plan_checksum: spec.session.checksum,
                    timers: spec.timeouts.control(),
                    window: if cfg.overload.backlog_signal {
                        advertised
                    } else {
                        0
                    },
                    allreduce_slots: spec.allreduce_slots,
                    rack: None,
                },
                0,
            );
            let control = match &spec.secret {
                // The nonces must be unpredictable: seeded from the operating system.
                Some(secret) => control.with_secret(secret.clone(), rand::random()),
                None => control,
            };
            port_owner.extend((0..spec.world).map(|rank| (jobs.len(), rank)));
            jobs.push(Served {
                first_port,
                timeouts: spec.timeouts,
                control,
                liveness: Arc::new(Liveness::new(spec.world, spec.timeouts.peer())),
            });
            first_port += spec.world;
        }
        let core = Core::new(
            cfg,
            switch,
            jobs,
            port_owner,
            (buffer_bytes, advertised),
            None,
        );
        Ok(SwitchServer { endpoint, core })
    }

    /// Record every datagram the switch sends and receives from now on in `capture`.
    pub fn capture_to(&mut self, capture: switchgnn_net::capture::Capture) {
        self.endpoint.capture_to(capture);
    }

    /// Finish the capture, if any: what it holds.
    pub fn finish_capture(&mut self) -> io::Result<Option<switchgnn_net::capture::CaptureStats>> {
        self.endpoint.finish_capture()
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.endpoint.local_addr()
    }

    /// When the switch last heard each worker of its first job: for the collective service
    /// beside it.
    pub fn liveness(&self) -> Arc<Liveness> {
        self.core.jobs[0].liveness.clone()
    }

    /// The same for job `job`, if the switch serves it.
    pub fn liveness_of(&self, job: u16) -> Option<Arc<Liveness>> {
        Some(
            self.core
                .jobs
                .iter()
                .find(|j| j.job() == job)?
                .liveness
                .clone(),
        )
    }

    pub fn report(&self) -> ServerReport {
        let c = &self.core;
        ServerReport {
            elapsed_s: c.epoch.elapsed().as_secs_f64(),
            counters: c.switch.counters(),
            endpoint: self.endpoint.stats().clone(),
            malformed_control: c.malformed_control
                + c.jobs
                    .iter()
                    .map(|j| j.control.counters().unexpected)
                    .sum::<u64>(),
            egress_drops: c.egress_drops,
            peak_egress_bytes: c.peak_egress_bytes,
            ingress: c.ingress.clone(),
            jobs: c
                .jobs
                .iter()
                .map(|j| JobReport {
                    job: j.job(),
                    first_port: j.first_port,
                    peers: j
                        .control
                        .members()
                        .map(|(rank, addr)| PeerReport {
                            rank,
                            addr: *addr,
                            traffic: self.endpoint.peer(addr),
                        })
                        .collect(),
                    unknown_packets: j.control.counters().unknown_packets,
                    refused: j.control.counters().refused,
                    status: c.switch.lead().job_status(j.job()),
                    control: j.control.counters().clone(),
                    failure: j.control.failure().map(|f| f.to_string()),
                })
                .collect(),
            passes_per_core: c.switch.shard_counters().iter().map(|k| k.passes).collect(),
        }
    }

    /// One line on where the jobs stand.
    pub fn status_line(&self) -> String {
        let c = &self.core;
        let jobs: Vec<String> = c
            .jobs
            .iter()
            .map(|j| {
                let prefix = if c.jobs.len() > 1 {
                    format!("job {}: ", j.job())
                } else {
                    String::new()
                };
                format!(
                    "{prefix}{}/{} workers; {}",
                    j.control.joined(),
                    j.control.config().world,
                    c.switch.lead().describe_job(j.job())
                )
            })
            .collect();
        let k = c.switch.counters();
        format!(
            "switch: {}; {} packets in, {} out, {} aggregations, {} all-reduce slices, {} raw, \
             {} drops, {} ECN marks; socket backlog peak {} KiB of {} KiB, {} socket drops",
            jobs.join("; "),
            k.packets_in,
            k.packets_out,
            k.aggregations,
            k.reduce_slices,
            k.raw_forwarded,
            k.total_drops(),
            k.ecn_marks,
            c.ingress.peak_backlog_bytes >> 10,
            c.ingress.buffer_bytes >> 10,
            c.ingress.socket_drops,
        )
    }

    /// Run until every worker has said goodbye, `stop` is set, or the configured number of
    /// exchanges is done. `status` (if given) is a flag set from outside (a signal) to print
    /// the status line.
    pub fn run(
        &mut self,
        stop: &AtomicBool,
        status: Option<&AtomicBool>,
    ) -> Result<ServerReport, ServerError> {
        loop {
            let deadline = self.core.next_deadline(Instant::now());
            self.endpoint.wait(Some(deadline))?;
            let now = Instant::now();
            let core = &mut self.core;
            // One receive batch per round: the backlog is read, and acknowledgements leave,
            // every few dozen datagrams even when the process is slow.
            let n = self
                .endpoint
                .recv_batches(1, |d| core.on_datagram(now, d))?;
            // The round's dataplane packets, through the switch model's cores at once.
            core.switch.run_batch(core.nanos(now));
            let busy = now.elapsed();
            let backlog = self.endpoint.backlog();
            self.core
                .on_backlog(backlog, n, busy, self.endpoint.is_drained());
            let c = &mut self.core;
            let t = c.nanos(now);
            if let Some(n) = c.cfg.stop_after_exchanges {
                if c.switch.counters().exchanges_completed >= n {
                    // Linger a little to repeat final gos to workers that lost theirs, but
                    // start nothing new.
                    for j in &mut c.jobs {
                        let linger = 4 * j.timeouts.control_us * 1_000;
                        j.control.drain(t, linger);
                    }
                }
            }
            // A member whose port closed is gone now, not after the peer timeout.
            for addr in self.endpoint.take_closed() {
                for j in &mut c.jobs {
                    j.control.port_closed(&addr);
                }
            }
            for j in &mut c.jobs {
                let failed = j.control.failure().is_some();
                j.control.handle_timeout(t, &c.switch);
                if !failed {
                    if let Some(f) = j.control.failure() {
                        tracing::error!(job = j.job(), "the switch ends job {}: {f}", j.job());
                    }
                }
            }
            let workers_over = self.core.jobs.iter().all(|j| j.is_over(t));
            if let Some(up) = &mut self.core.uplink {
                // A leaf leaves the spine once its own workers have (repeating `leave` does
                // nothing more).
                if workers_over {
                    up.control.leave(t);
                }
                up.control.handle_timeout(t);
            }
            self.core.release(now, &mut self.endpoint);
            self.endpoint.flush()?;
            if status.is_some_and(|s| s.swap(false, Ordering::Relaxed)) {
                eprintln!("{}", self.status_line());
            }
            if let Some(up) = &self.core.uplink {
                if let WorkerState::Failed(f) = up.control.state() {
                    tracing::error!(spine = %up.spine, "the leaf loses its spine: {f}");
                    return Err(ServerError::Spine(f.clone()));
                }
            }
            // A failed job has told its workers (its aborts left with this round); the others
            // run on to their own end. A leaf is over once the spine has its goodbye.
            let over = workers_over
                && self
                    .core
                    .uplink
                    .as_ref()
                    .is_none_or(|up| *up.control.state() == WorkerState::Left);
            if over || stop.load(Ordering::Relaxed) {
                self.endpoint.flush()?;
                if let Some(failure) = self.core.jobs.iter().find_map(|j| j.control.failure()) {
                    return Err(failure.clone().into());
                }
                return Ok(self.report());
            }
        }
    }
}

impl Core {
    /// A switch process's state at its start: `owners` gives each port's (job, rank), one
    /// egress queue per port; `ingress` is the receive buffer's size and the window the
    /// welcomes advertise.
    fn new(
        cfg: ServerConfig,
        switch: ShardedSwitch,
        jobs: Vec<Served>,
        owners: Vec<(usize, u16)>,
        ingress: (u64, u64),
        uplink: Option<Uplink>,
    ) -> Core {
        let (buffer_bytes, advertised_window) = ingress;
        Core {
            switch,
            jobs,
            egress: owners.iter().map(|_| Egress::new(&cfg.link)).collect(),
            ports: owners,
            epoch: Instant::now(),
            malformed_control: 0,
            egress_drops: 0,
            peak_egress_bytes: 0,
            ingress: IngressReport {
                buffer_bytes,
                advertised_window,
                ..IngressReport::default()
            },
            uplink,
            cfg,
        }
    }

    fn nanos(&self, now: Instant) -> u64 {
        now.duration_since(self.epoch).as_nanos() as u64
    }

    /// After a receive round of `n` datagrams that took `busy`: read how deep the socket's
    /// backlog is, and mark congestion while it is deep. Without the kernel's figures, a
    /// round that stopped before the socket was drained stands for a deep backlog.
    fn on_backlog(&mut self, backlog: Option<RxBacklog>, n: usize, busy: Duration, drained: bool) {
        let ingress = &mut self.ingress;
        ingress.rounds += 1;
        ingress.datagrams += n as u64;
        if n > 0 {
            ingress.busy_s += busy.as_secs_f64();
        }
        let deep = match backlog {
            Some(b) => {
                ingress.peak_backlog_bytes = ingress.peak_backlog_bytes.max(b.queued_bytes);
                ingress.socket_drops = b.drops;
                ingress.buffer_bytes = b.buffer_bytes;
                b.queued_bytes > b.buffer_bytes / BACKLOG_MARK_FRACTION
            }
            None => !drained,
        };
        let congested = deep && self.cfg.overload.backlog_signal;
        ingress.congested_rounds += u64::from(congested);
        self.switch.set_ingress_congested(congested);
    }

    fn next_deadline(&self, now: Instant) -> Instant {
        let egress = self
            .egress
            .iter()
            .filter_map(|e| e.queue.front().map(|&(t, _)| t));
        let uplink = self.uplink.iter().flat_map(|up| {
            let queued = up.egress.queue.front().map(|&(t, _)| t);
            queued.into_iter().chain(up.control.poll_timeout())
        });
        let due = egress
            .chain(self.jobs.iter().filter_map(|j| j.control.poll_timeout()))
            .chain(uplink)
            .min()
            .map(|t| self.epoch + Duration::from_nanos(t));
        due.map_or(now + TICK, |t| t.min(now + TICK))
    }

    /// The job (an index into `jobs`) whose worker is at `addr`, and its rank.
    fn member(&self, addr: &SocketAddr) -> Option<(usize, u16)> {
        self.jobs
            .iter()
            .enumerate()
            .find_map(|(i, j)| Some((i, j.control.rank_of(addr)?)))
    }

    fn on_datagram(&mut self, now: Instant, d: Datagram<'_>) {
        let t = self.nanos(now);
        if let Some(up) = self.uplink.as_mut().filter(|up| up.spine == d.from) {
            // The spine: its control messages for the leaf's own control plane, its dataplane
            // packets down through the leaf.
            up.control.heard(t);
            match Control::decode(d.bytes) {
                Some(Ok(m)) => up.control.handle_control(t, m),
                Some(Err(_)) => self.malformed_control += 1,
                None => self.switch.take(t, Address::Switch, d.bytes),
            }
            return;
        }
        if let Some(message) = Control::decode(d.bytes) {
            match message {
                Ok(m) => self.on_control(now, d.from, m, d.bytes.len()),
                Err(e) => {
                    self.malformed_control += 1;
                    tracing::debug!(from = %d.from, error = %e, "malformed control message");
                }
            }
            return;
        }
        let delay = self.cfg.overload.per_packet_delay;
        if !delay.is_zero() {
            // A slower switch: spin (a sleep would take tens of microseconds at least).
            let until = Instant::now() + delay;
            while Instant::now() < until {
                std::hint::spin_loop();
            }
        }
        let index = match self.member(&d.from) {
            Some((i, rank)) => {
                self.jobs[i].liveness.heard(rank, now);
                i
            }
            // A stranger: answered (within its budget) by the job its header names, if any.
            None => self.job_named(wire::Packet::new_checked(d.bytes).ok().map(|p| p.job())),
        };
        let j = &mut self.jobs[index];
        if let Admission::Worker(rank) = j.control.on_data(t, &d.from, d.bytes) {
            let port = j.first_port + rank;
            self.switch.take(t, Address::Worker(port), d.bytes);
        }
    }

    /// The index of job `job` if it is served, else of the first job.
    fn job_named(&self, job: Option<u16>) -> usize {
        job.and_then(|id| self.jobs.iter().position(|j| j.job() == id))
            .unwrap_or(0)
    }

    /// A control message of `len` bytes: a hello goes to the job it names, anything else to
    /// the job of its sender.
    fn on_control(&mut self, now: Instant, from: SocketAddr, m: Control, len: usize) {
        let t = self.nanos(now);
        let index = match &m {
            Control::Hello(h) => {
                // Anyone may send hellos: the log says who joined, and who was refused.
                tracing::debug!(job = h.job, rank = h.rank, addr = %from, "worker says hello");
                let named = self.jobs.iter().position(|j| j.job() == h.job);
                let member = self.member(&from).map(|(i, _)| i);
                match (named, member) {
                    (Some(i), None) => i,
                    (Some(i), Some(m)) if i == m => i,
                    (_, Some(m)) => {
                        let reason = format!(
                            "{from} is already worker {} of job {}: one address, one job",
                            self.jobs[m].control.rank_of(&from).unwrap_or_default(),
                            self.jobs[m].job()
                        );
                        self.jobs[m].control.refuse(t, from, reason, len);
                        return;
                    }
                    (None, None) if self.jobs.len() > 1 => {
                        let served: Vec<String> =
                            self.jobs.iter().map(|j| j.job().to_string()).collect();
                        let reason = format!(
                            "worker {}: job id is {}, the switch serves jobs {}",
                            h.rank,
                            h.job,
                            served.join(", ")
                        );
                        self.jobs[0].control.refuse(t, from, reason, len);
                        return;
                    }
                    // One job: its own admission names both job ids.
                    (None, None) => 0,
                }
            }
            _ => self.member(&from).map_or(0, |(i, _)| i),
        };
        let j = &mut self.jobs[index];
        j.control.handle_control(t, from, m);
        if let Some(rank) = j.control.rank_of(&from) {
            j.liveness.heard(rank, now);
        }
    }

    /// Move the switch's output into the egress queues, send what the link rate allows, and
    /// the control messages and heartbeats.
    fn release(&mut self, now: Instant, endpoint: &mut Endpoint) {
        let t = self.nanos(now);
        let now_ps = to_picos(t);
        let mut buf = [0u8; switchgnn_dataplane::node::MAX_DATAGRAM_LEN];
        while let Some(out) = self.switch.poll_transmit(t, &mut buf) {
            let q = match (out.to, self.uplink.as_mut()) {
                (Address::Worker(port), _) => &mut self.egress[usize::from(port)],
                (Address::Switch, Some(up)) => &mut up.egress,
                (Address::Switch, None) => continue,
            };
            match q.port.send(now_ps, out.len as u64) {
                Some(left) => q
                    .queue
                    .push_back((ceil_nanos(left), buf[..out.len].to_vec())),
                None => self.egress_drops += 1,
            }
        }
        let threshold = self.cfg.link.ecn_threshold_bytes;
        for (port, q) in self.egress.iter_mut().enumerate() {
            let (index, rank) = self.ports[port];
            let job = &mut self.jobs[index];
            let Some(&addr) = job.control.addr_of(rank) else {
                // No address for this port (yet): what is queued cannot leave.
                *q = Egress::new(&self.cfg.link);
                continue;
            };
            if q.drain(t, threshold, addr, endpoint) {
                job.control.note_sent(t, rank);
            }
            self.peak_egress_bytes = self.peak_egress_bytes.max(q.port.stats.peak_backlog);
            self.switch
                .set_egress_queue(port as u16, q.port.backlog(now_ps));
        }
        if let Some(up) = &mut self.uplink {
            if up.egress.drain(t, threshold, up.spine, endpoint) {
                up.control.note_sent(t);
            }
            self.switch.set_uplink_queue(up.egress.port.backlog(now_ps));
            while let Some(m) = up.control.poll_control() {
                endpoint.send(up.spine, None, m.encode());
            }
        }
        for j in &mut self.jobs {
            while let Some((to, m)) = j.control.poll_control() {
                match &m {
                    Control::Welcome { rank, .. } => {
                        tracing::info!(job = j.job(), rank, addr = %to, "worker joined");
                        // Its counters stay however many strangers send.
                        endpoint.pin(to);
                    }
                    Control::Refuse { reason } => tracing::warn!(
                        job = j.job(),
                        addr = %to,
                        %reason,
                        // Not in the refusal: whoever learns it can take a free rank of a job
                        // without a secret.
                        switch_plan_checksum = %format_args!(
                            "{:#018x}",
                            j.control.config().plan_checksum
                        ),
                        "worker refused"
                    ),
                    _ => {}
                }
                endpoint.send(to, None, m.encode());
            }
        }
    }
}

/// The switch model `cfg` asks for, with `ports` ports.
/// The switch's endpoint: its transport, answering at its listen address.
fn open_endpoint(cfg: &ServerConfig) -> Result<Endpoint, OpenError> {
    let who = Opening {
        job: cfg.job,
        world: cfg.world,
        role: Role::Switch,
        bind: cfg.listen,
        switch: cfg.listen,
        faults: cfg.faults,
        recv_buffer: cfg.overload.recv_buffer,
    };
    switchgnn_net::open(&cfg.transport, &who)
}

fn switch_model(cfg: &ServerConfig, ports: u16) -> Result<ShardedSwitch, ServerError> {
    let config = SwitchConfig {
        aggregators: cfg.aggregators,
        ecn_threshold: cfg.link.ecn_threshold_bytes,
        ports,
    };
    Ok(ShardedSwitch::new(config, cfg.cores)?)
}

/// Bind a switch with `bind` and start the all-reduce services `jobs` says beside it (TCP on
/// its address). When the switch asked for any free port (`ephemeral`), the TCP twin of the
/// one it got may be taken (an outgoing connection's local end holds it): that port is given
/// up and another tried.
fn with_service(
    ephemeral: bool,
    mut bind: impl FnMut() -> Result<SwitchServer, ServerError>,
    jobs: impl Fn(&SwitchServer) -> Vec<(crate::collective::ServiceConfig, Option<Arc<Liveness>>)>,
) -> Result<(SwitchServer, crate::collective::RunningService), ServerError> {
    let mut tries = 0;
    loop {
        tries += 1;
        let server = bind()?;
        let addr = server.local_addr()?;
        match crate::collective::RunningService::start_jobs(addr, jobs(&server)) {
            Ok(running) => return Ok((server, running)),
            Err(e)
                if ephemeral
                    && e.kind() == io::ErrorKind::AddrInUse
                    && tries < SHARED_PORT_TRIES =>
            {
                tracing::debug!(%addr, "TCP twin of the switch's port is taken; trying another");
            }
            Err(source) => return Err(ServerError::Service { addr, source }),
        }
    }
}

/// The window each worker may keep outstanding so that all `workers` (of every job served)
/// together fill at most half of a `buffer_bytes` receive buffer (at least 4 packets, at most
/// 4096); 0 (no cap) when the buffer is unknown.
fn advertised_window(buffer_bytes: u64, workers: u16) -> u64 {
    if buffer_bytes == 0 {
        return 0;
    }
    (buffer_bytes / 2 / DATAGRAM_TRUESIZE / u64::from(workers.max(1))).clamp(4, 4096)
}

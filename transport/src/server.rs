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

mod config;
mod report;
mod state;

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use switchgnn_dataplane::control::{
    Hello, SwitchControl, SwitchControlConfig, SwitchFailure, WorkerControl, WorkerState,
    CONTROL_VERSION,
};
use switchgnn_dataplane::switch::{JobConfig, Racks, ShardedSwitch, SwitchConfig, Tier};
use switchgnn_dataplane::wire;
use thiserror::Error;

pub use config::{AllReducePool, Overload, ProcessTier, ServedJob, ServerConfig};
pub use report::{IngressReport, JobReport, PeerReport, ServerReport};
use state::{Core, Egress, Served, Uplink};

use crate::liveness::Liveness;
use crate::session::Session;
use switchgnn_net::dpdk::Role;
use switchgnn_net::{Endpoint, OpenError, Opening, Transport};

/// The kernel's accounting of one small datagram in a receive queue (buffer and metadata):
/// 832 bytes for a 160-byte datagram on loopback here (Linux 6), a page or more behind many
/// NIC drivers. The welcome's window assumes the larger.
const DATAGRAM_TRUESIZE: u64 = 2048;

/// Why the switch process could not start, or stopped.
#[derive(Debug, Error)]
pub enum ServerError {
    /// The jobs cannot be served together as configured.
    #[error("{0}")]
    Config(String),
    /// The socket failed.
    #[error("switch socket: {0}")]
    Io(#[from] io::Error),
    /// The datapath did not open (an address in use, DPDK's set-up).
    #[error("switch socket: {0}")]
    Open(#[from] OpenError),
    /// The link's MTU is more than the datapath sends.
    #[error(transparent)]
    Mtu(#[from] crate::job::MtuTooLarge),
    /// A leaf's spine refused it, aborted the job, or fell silent.
    #[error("the spine: {0}")]
    Spine(switchgnn_dataplane::control::WorkerFailure),
    /// The switch model refused a job (its ports, slots or aggregators).
    #[error("cannot install the job: {0}")]
    Job(#[from] switchgnn_dataplane::switch::SwitchError),
    /// The control plane ended the job: workers missing, a worker lost, or no progress.
    #[error(transparent)]
    Failed(#[from] SwitchFailure<SocketAddr>),
    /// The all-reduce service beside the switch could not listen.
    #[error("cannot listen on TCP {addr} for the all-reduce service: {source}")]
    Service {
        /// Where it tried.
        addr: SocketAddr,
        /// What the system said.
        source: io::Error,
    },
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

    /// A switch serving `cfg`'s one job of `session`'s plans.
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
            .fits_datapath(endpoint.max_datagram(), "the switch")?;
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

    /// Where the switch listens.
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

    /// What the switch has done so far.
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
            // A drained socket has no backlog to mark for; its reading would only cost a
            // system call per round.
            let backlog = if self.endpoint.is_drained() {
                None
            } else {
                self.endpoint.backlog()
            };
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
                // Rounds that found the socket drained did not read it: the last figures.
                if let Some(b) = self.endpoint.backlog() {
                    self.core.note_backlog(b);
                }
                if let Some(failure) = self.core.jobs.iter().find_map(|j| j.control.failure()) {
                    return Err(failure.clone().into());
                }
                return Ok(self.report());
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
        ecn_threshold: cfg.link.ecn_threshold(),
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

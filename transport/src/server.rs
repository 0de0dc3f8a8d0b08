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

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use switchgnn_dataplane::link::{ceil_nanos, to_picos, Port};
use switchgnn_dataplane::switch::{JobConfig, JobStatus, Switch, SwitchConfig, SwitchCounters};
use switchgnn_dataplane::{wire, Address, Nanos, Node};
use thiserror::Error;

use crate::control::{Control, Hello, CONTROL_VERSION};
use crate::job::{Link, Timeouts};
use crate::liveness::Liveness;
use crate::session::Session;
use crate::socket::{EcnCodepoint, Endpoint, EndpointStats, PeerCounters, RxBacklog, ShimConfig};

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
    /// Aggregators of the switch (128 bytes each).
    pub aggregators: usize,
    /// Stop (successfully) once this many exchanges have completed: a switch drained for
    /// maintenance. Workers rejoin the next switch started on the same address.
    pub stop_after_exchanges: Option<u64>,
    pub overload: Overload,
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
            stop_after_exchanges: None,
            overload: Overload::default(),
        }
    }
}

#[derive(Debug, Error)]
pub enum ServerError {
    #[error("switch socket: {0}")]
    Io(#[from] io::Error),
    #[error("cannot install the job: {0}")]
    Job(#[from] switchgnn_dataplane::switch::SwitchError),
    #[error(
        "workers {missing:?} did not join within {waited:.1?} (joined: {joined}); are they \
         started with this job file and able to reach the switch?"
    )]
    JoinTimeout {
        missing: Vec<u16>,
        joined: String,
        waited: Duration,
    },
    #[error("worker {rank} ({addr}) fell silent for {silent:.1?} during {during}")]
    WorkerLost {
        rank: u16,
        addr: SocketAddr,
        silent: Duration,
        during: String,
    },
    #[error("no progress for {stalled:.1?}: {during}")]
    Stalled { stalled: Duration, during: String },
}

/// What the switch reports at exit (and on request while running).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServerReport {
    pub elapsed_s: f64,
    pub counters: SwitchCounters,
    /// Per rank: its address and the traffic exchanged with it.
    pub peers: Vec<PeerReport>,
    pub endpoint: EndpointStats,
    /// Dataplane packets from addresses that had not said hello.
    pub unknown_packets: u64,
    pub malformed_control: u64,
    pub refused: u64,
    /// Packets dropped at a full egress queue.
    pub egress_drops: u64,
    pub peak_egress_bytes: u64,
    pub ingress: IngressReport,
    pub status: Option<JobStatus>,
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

#[derive(Debug)]
struct Peer {
    addr: SocketAddr,
    last_heard: Instant,
    last_sent: Instant,
    bye: bool,
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
}

/// Everything but the socket, so that received datagrams can be handled while the endpoint
/// lends its buffers.
#[derive(Debug)]
struct Core {
    cfg: ServerConfig,
    session: Arc<Session>,
    switch: Switch,
    epoch: Instant,
    ranks: HashMap<SocketAddr, u16>,
    peers: Vec<Option<Peer>>,
    egress: Vec<Egress>,
    control_out: Vec<(SocketAddr, Control)>,
    unknown_replied: HashMap<SocketAddr, Instant>,
    unknown_packets: u64,
    malformed_control: u64,
    refused: u64,
    egress_drops: u64,
    peak_egress_bytes: u64,
    progress_mark: (u64, u64, u64, u64),
    last_progress: Instant,
    ingress: IngressReport,
    liveness: Arc<Liveness>,
    /// Set once `stop_after_exchanges` is reached.
    draining: bool,
    drained_joins: u64,
}

/// The switch process's driver.
#[derive(Debug)]
pub struct SwitchServer {
    endpoint: Endpoint,
    core: Core,
}

impl SwitchServer {
    pub fn bind(cfg: ServerConfig, session: Arc<Session>) -> Result<SwitchServer, ServerError> {
        let mut endpoint = match cfg.overload.recv_buffer {
            Some(bytes) => Endpoint::bind_with_buffer(cfg.listen, cfg.faults, bytes)?,
            None => Endpoint::bind(cfg.listen, cfg.faults)?,
        };
        let buffer_bytes = endpoint.backlog().map_or(0, |b| b.buffer_bytes);
        let mut switch = Switch::new(SwitchConfig {
            aggregators: cfg.aggregators,
            ecn_threshold: cfg.link.ecn_threshold_bytes,
            ports: cfg.world,
        });
        switch.add_job(JobConfig {
            job: cfg.job,
            layers: session.layers.clone(),
        })?;
        let now = Instant::now();
        let world = usize::from(cfg.world);
        Ok(SwitchServer {
            endpoint,
            core: Core {
                switch,
                epoch: now,
                ranks: HashMap::new(),
                peers: (0..world).map(|_| None).collect(),
                egress: (0..world).map(|_| Egress::new(&cfg.link)).collect(),
                control_out: Vec::new(),
                unknown_replied: HashMap::new(),
                unknown_packets: 0,
                malformed_control: 0,
                refused: 0,
                egress_drops: 0,
                peak_egress_bytes: 0,
                progress_mark: (0, 0, 0, 0),
                last_progress: now,
                ingress: IngressReport {
                    buffer_bytes,
                    advertised_window: advertised_window(buffer_bytes, cfg.world),
                    ..IngressReport::default()
                },
                liveness: Arc::new(Liveness::new(cfg.world, cfg.timeouts.peer())),
                draining: false,
                drained_joins: 0,
                cfg,
                session,
            },
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.endpoint.local_addr()
    }

    /// When the switch last heard each worker: for the collective service beside it.
    pub fn liveness(&self) -> Arc<Liveness> {
        self.core.liveness.clone()
    }

    pub fn report(&self) -> ServerReport {
        let c = &self.core;
        ServerReport {
            elapsed_s: c.epoch.elapsed().as_secs_f64(),
            counters: c.switch.counters().clone(),
            peers: c
                .peers
                .iter()
                .enumerate()
                .filter_map(|(rank, p)| {
                    let p = p.as_ref()?;
                    Some(PeerReport {
                        rank: rank as u16,
                        addr: p.addr,
                        traffic: self.endpoint.peer(&p.addr),
                    })
                })
                .collect(),
            endpoint: self.endpoint.stats().clone(),
            unknown_packets: c.unknown_packets,
            malformed_control: c.malformed_control,
            refused: c.refused,
            egress_drops: c.egress_drops,
            peak_egress_bytes: c.peak_egress_bytes,
            ingress: c.ingress.clone(),
            status: c.switch.job_status(c.cfg.job),
        }
    }

    /// One line on where the job stands.
    pub fn status_line(&self) -> String {
        let c = &self.core;
        let joined = c.peers.iter().filter(|p| p.is_some()).count();
        let k = c.switch.counters();
        format!(
            "switch: {joined}/{} workers; {}; {} packets in, {} out, {} aggregations, {} raw, \
             {} drops, {} ECN marks; socket backlog peak {} KiB of {} KiB, {} socket drops",
            c.cfg.world,
            c.describe(),
            k.packets_in,
            k.packets_out,
            k.aggregations,
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
        let mut stop_at: Option<Instant> = None;
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
            let busy = now.elapsed();
            let backlog = self.endpoint.backlog();
            self.core
                .on_backlog(backlog, n, busy, self.endpoint.is_drained());
            self.core.release(now, &mut self.endpoint);
            self.endpoint.flush()?;
            if let Err(e) = self.core.check_liveness(now) {
                self.abort_all(&e.to_string())?;
                return Err(e);
            }
            if status.is_some_and(|s| s.swap(false, Ordering::Relaxed)) {
                eprintln!("{}", self.status_line());
            }
            let c = &self.core;
            let world = usize::from(c.cfg.world);
            let byes = c.peers.iter().flatten().filter(|p| p.bye).count();
            if byes == world || stop.load(Ordering::Relaxed) {
                self.endpoint.flush()?;
                return Ok(self.report());
            }
            if let Some(n) = c.cfg.stop_after_exchanges {
                if stop_at.is_none() && c.switch.counters().exchanges_completed >= n {
                    // Linger a little to repeat final gos to workers that lost theirs, but
                    // start nothing new.
                    stop_at = Some(now + 4 * Duration::from_micros(c.cfg.timeouts.control_us));
                    self.core.draining = true;
                }
                if stop_at.is_some_and(|t| now >= t) {
                    return Ok(self.report());
                }
            }
        }
    }

    /// Tell every known worker the job is over, a few times over (UDP may lose one).
    fn abort_all(&mut self, reason: &str) -> io::Result<()> {
        let bytes = Control::Abort {
            reason: reason.to_string(),
        }
        .encode();
        for _ in 0..3 {
            for p in self.core.peers.iter().flatten() {
                self.endpoint.send(p.addr, None, bytes.clone());
            }
        }
        self.endpoint.flush()
    }
}

impl Core {
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

    fn describe(&self) -> String {
        match self.switch.job_status(self.cfg.job) {
            Some(s) => describe_status(&s),
            None => "no job".into(),
        }
    }

    fn next_deadline(&self, now: Instant) -> Instant {
        let egress = self
            .egress
            .iter()
            .filter_map(|e| e.queue.front().map(|&(t, _)| t))
            .min()
            .map(|t| self.epoch + Duration::from_nanos(t));
        egress.map_or(now + TICK, |t| t.min(now + TICK))
    }

    fn on_datagram(&mut self, now: Instant, d: crate::socket::Datagram<'_>) {
        if let Some(message) = Control::decode(d.bytes) {
            match message {
                Ok(m) => self.on_control(now, d.from, m),
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
        let Some(&rank) = self.ranks.get(&d.from) else {
            self.unknown_packets += 1;
            // Rate-limited: one reply per address per 50 ms.
            let due = self
                .unknown_replied
                .get(&d.from)
                .is_none_or(|t| now.duration_since(*t) > Duration::from_millis(50));
            if due {
                self.unknown_replied.insert(d.from, now);
                self.control_out.push((d.from, Control::Unknown));
            }
            return;
        };
        if let Some(p) = self.peers[usize::from(rank)].as_mut() {
            p.last_heard = now;
        }
        self.liveness.heard(rank, now);
        if self.draining && d.bytes.get(3) == Some(&(wire::PacketType::Join as u8)) {
            // Draining: no new exchange may start on this switch.
            self.drained_joins += 1;
            return;
        }
        let t = self.nanos(now);
        self.switch.handle_packet(t, Address::Worker(rank), d.bytes);
    }

    fn on_control(&mut self, now: Instant, from: SocketAddr, message: Control) {
        match message {
            Control::Hello(h) => match self.admit(now, from, &h) {
                Ok(()) => {
                    tracing::info!(rank = h.rank, addr = %from, "worker joined");
                    self.liveness.heard(h.rank, now);
                    let window = if self.cfg.overload.backlog_signal {
                        self.ingress.advertised_window
                    } else {
                        0
                    };
                    self.control_out.push((
                        from,
                        Control::Welcome {
                            job: h.job,
                            rank: h.rank,
                            window,
                        },
                    ));
                }
                Err(reason) => {
                    self.refused += 1;
                    tracing::warn!(addr = %from, %reason, "worker refused");
                    self.control_out.push((from, Control::Refuse { reason }));
                }
            },
            Control::Heartbeat => {
                if let Some(&rank) = self.ranks.get(&from) {
                    if let Some(p) = self.peers[usize::from(rank)].as_mut() {
                        p.last_heard = now;
                    }
                    self.liveness.heard(rank, now);
                }
            }
            Control::Bye { rank } => {
                if self.ranks.get(&from) == Some(&rank) {
                    if let Some(p) = self.peers[usize::from(rank)].as_mut() {
                        p.bye = true;
                        p.last_heard = now;
                    }
                    self.control_out.push((from, Control::ByeAck));
                }
            }
            _ => self.malformed_control += 1,
        }
    }

    fn admit(&mut self, now: Instant, from: SocketAddr, h: &Hello) -> Result<(), String> {
        let want_mode = self.session.mode.name();
        let mismatch = |what: &str, worker: String, switch: String| {
            Err(format!(
                "worker {} at {from}: {what} is {worker}, the switch has {switch}",
                h.rank
            ))
        };
        if h.control_version != CONTROL_VERSION {
            return mismatch(
                "control protocol version",
                h.control_version.to_string(),
                CONTROL_VERSION.to_string(),
            );
        }
        if h.wire_version != wire::VERSION {
            return mismatch(
                "wire version",
                h.wire_version.to_string(),
                wire::VERSION.to_string(),
            );
        }
        if h.job != self.cfg.job {
            return mismatch("job id", h.job.to_string(), self.cfg.job.to_string());
        }
        if h.world != self.cfg.world {
            return mismatch(
                "world size",
                h.world.to_string(),
                self.cfg.world.to_string(),
            );
        }
        if h.rank >= self.cfg.world {
            return Err(format!(
                "rank {} at {from} is not below the world size {}",
                h.rank, self.cfg.world
            ));
        }
        if h.mode != want_mode {
            return mismatch("exchange mode", h.mode.clone(), want_mode.to_string());
        }
        if h.plan_checksum != self.session.checksum {
            return mismatch(
                "plan checksum",
                format!("{:#018x}", h.plan_checksum),
                format!(
                    "{:#018x} (start both with the same plan directory and dataset)",
                    self.session.checksum
                ),
            );
        }
        let slot = &mut self.peers[usize::from(h.rank)];
        if let Some(p) = slot {
            let alive = now.duration_since(p.last_heard) < self.cfg.timeouts.peer();
            if p.addr != from && alive && !p.bye {
                return Err(format!(
                    "rank {} is already taken by {}, which is alive",
                    h.rank, p.addr
                ));
            }
            self.ranks.remove(&p.addr);
        }
        *slot = Some(Peer {
            addr: from,
            last_heard: now,
            last_sent: now,
            bye: false,
        });
        self.ranks.insert(from, h.rank);
        Ok(())
    }

    /// Move the switch's output into the egress queues, send what the link rate allows, and
    /// the control messages and heartbeats.
    fn release(&mut self, now: Instant, endpoint: &mut Endpoint) {
        let t = self.nanos(now);
        let now_ps = to_picos(t);
        let mut buf = [0u8; wire::MAX_PACKET_LEN];
        while let Some(out) = self.switch.poll_transmit(t, &mut buf) {
            let Address::Worker(port) = out.to else {
                continue;
            };
            let q = &mut self.egress[usize::from(port)];
            match q.port.send(now_ps, out.len as u64) {
                Some(left) => q.queue.push_back((ceil_nanos(left), buf[..out.len].to_vec())),
                None => self.egress_drops += 1,
            }
        }
        let threshold = self.cfg.link.ecn_threshold_bytes;
        for (port, q) in self.egress.iter_mut().enumerate() {
            let Some(peer) = self.peers[port].as_mut() else {
                // No address for this port (yet): what is queued cannot leave.
                *q = Egress::new(&self.cfg.link);
                continue;
            };
            while q.queue.front().is_some_and(|&(left, _)| left <= t) {
                let (_, bytes) = q.queue.pop_front().expect("front");
                let ecn = if q.port.backlog(now_ps) > threshold {
                    EcnCodepoint::Ce
                } else {
                    EcnCodepoint::Ect0
                };
                endpoint.send(peer.addr, Some(ecn), bytes);
                peer.last_sent = now;
            }
            self.peak_egress_bytes = self.peak_egress_bytes.max(q.port.stats.peak_backlog);
            self.switch
                .set_egress_queue(port as u16, q.port.backlog(now_ps));
        }
        for (to, m) in self.control_out.drain(..) {
            endpoint.send(to, None, m.encode());
            if let Some(&rank) = self.ranks.get(&to) {
                if let Some(p) = self.peers[usize::from(rank)].as_mut() {
                    p.last_sent = now;
                }
            }
        }
        let quiet = self.cfg.timeouts.peer() / 4;
        for p in self.peers.iter_mut().flatten() {
            if !p.bye && now.duration_since(p.last_sent) > quiet {
                endpoint.send(p.addr, None, Control::Heartbeat.encode());
                p.last_sent = now;
            }
        }
    }

    fn check_liveness(&mut self, now: Instant) -> Result<(), ServerError> {
        let t = &self.cfg.timeouts;
        let missing: Vec<u16> = (0..self.cfg.world)
            .filter(|&r| self.peers[usize::from(r)].is_none())
            .collect();
        if !missing.is_empty() {
            let waited = now.duration_since(self.epoch);
            if waited > t.join() {
                let joined: Vec<String> = self
                    .peers
                    .iter()
                    .enumerate()
                    .filter_map(|(r, p)| p.as_ref().map(|p| format!("{r} at {}", p.addr)))
                    .collect();
                return Err(ServerError::JoinTimeout {
                    missing,
                    joined: if joined.is_empty() {
                        "none".into()
                    } else {
                        joined.join(", ")
                    },
                    waited,
                });
            }
            return Ok(());
        }
        for (rank, p) in self.peers.iter().enumerate() {
            let p = p.as_ref().expect("all joined");
            let silent = now.duration_since(p.last_heard);
            if !p.bye && silent > t.peer() {
                return Err(ServerError::WorkerLost {
                    rank: rank as u16,
                    addr: p.addr,
                    silent,
                    during: self.describe(),
                });
            }
        }
        let k = self.switch.counters();
        let mark = (
            k.exchanges_completed,
            k.blocks_completed,
            k.lane_updates,
            k.sent(wire::PacketType::Raw) + k.sent(wire::PacketType::Result),
        );
        if mark != self.progress_mark {
            self.progress_mark = mark;
            self.last_progress = now;
        }
        // Only an exchange that every worker has joined can stall: before that, the workers
        // that have not joined are computing (alive, as their heartbeats say).
        let running = self.switch.exchange_running(self.cfg.job);
        if !running {
            self.last_progress = now;
        }
        let any_active = self.peers.iter().flatten().any(|p| !p.bye);
        let stalled = now.duration_since(self.last_progress);
        if running && any_active && stalled > 2 * t.peer() {
            return Err(ServerError::Stalled {
                stalled,
                during: self.describe(),
            });
        }
        Ok(())
    }
}

/// `layer 1 forward, block 3 of 9, waiting for workers [2]`.
pub fn describe_status(s: &JobStatus) -> String {
    let Some(id) = s.exchange else {
        return "no exchange started yet".into();
    };
    let dir = if id.backward { "backward" } else { "forward" };
    let what = format!(
        "exchange {} (epoch {}, layer {} {dir})",
        s.seq, id.epoch, id.layer
    );
    if s.finished {
        return format!("{what} complete");
    }
    if !s.started {
        return format!("{what}, waiting for workers {:?} to join", s.waiting_for);
    }
    format!(
        "{what}, block {} of {}, waiting for workers {:?} to finish it",
        s.block, s.blocks, s.waiting_for
    )
}

/// The window each worker may keep outstanding so that all of them together fill at most half
/// of a `buffer_bytes` receive buffer (at least 4 packets, at most 4096); 0 (no cap) when
/// the buffer is unknown.
fn advertised_window(buffer_bytes: u64, world: u16) -> u64 {
    if buffer_bytes == 0 {
        return 0;
    }
    (buffer_bytes / 2 / DATAGRAM_TRUESIZE / u64::from(world.max(1))).clamp(4, 4096)
}

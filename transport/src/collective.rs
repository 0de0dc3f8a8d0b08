//! The all-reduce a training job needs beside its exchanges: the sum of every worker's weight
//! gradients each step, and the maximum magnitude each exchange's fixed-point scale is agreed
//! on. For now it is a parameter server in the switch process, over TCP on the switch's own
//! address and port number; a later step moves the gradient sum into the switch's aggregators.
//!
//! The reduction runs in rank order in `f64` and is rounded to `f32` once, so every worker
//! receives bit-identical values, whatever the timing — which is what lets every worker apply
//! the same optimiser step and keep identical weights.
//!
//! Frames (little-endian):
//! - greeting, server → worker on connect: `SGAR`, version u16, nonce (16 random bytes);
//! - hello, worker → server: `SGAR`, version u16, job u16, rank u16, world u16, agreement u64
//!   (a fingerprint of everything the workers must share, e.g. the training settings), proof
//!   (32 bytes: HMAC-SHA256 under the job's admission secret of the nonce and the hello's
//!   fields; zeros without a secret). A service with a secret refuses a hello whose proof does
//!   not verify, so nobody without it can take a rank or add to the sums;
//! - round, worker → server: op u8 (0 sum, 1 max), round u32, count u32, count × f32;
//! - reply, server → worker: status u8 (0 ok, 1 error); ok: count u32 and count × f32 for a
//!   round, nothing for a hello; error: length u32 and a UTF-8 reason. Before it, any number
//!   of keepalive bytes (2): the service is alive and still waiting for other workers.
//!
//! No fixed deadline ends a round that is making progress. Inside the switch process the
//! service waits for a worker as long as the switch hears from it ([`Liveness`]: workers send
//! heartbeats while they compute), and names the worker that fell silent; workers waiting for
//! a round hear a keepalive every second, so their own patience counts silence, not the
//! length of the round. Standalone (no liveness table), a worker may take `idle` per round.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::liveness::Liveness;
use switchgnn_dataplane::control::Secret;

const MAGIC: [u8; 4] = *b"SGAR";
/// Status byte: still waiting for other workers.
const KEEPALIVE: u8 = 2;
/// How often waiting workers hear a keepalive.
const KEEPALIVE_EVERY: Duration = Duration::from_secs(1);
/// How long a new connection may take to send its hello; a worker sends it as soon as the
/// greeting arrives. Each connection says hello in a thread of its own, so a silent one holds
/// nobody up: it only holds a place among the pending ones until then.
const HELLO_WAIT: Duration = Duration::from_secs(2);
/// Connections still saying hello from one IP address: a new one beyond this closes that
/// address's oldest (a worker's hello takes a round trip; an idle connection, `HELLO_WAIT`).
/// At least twice the job's workers: every worker of a job on one host may connect at once.
const PENDING_PER_IP: usize = 16;
/// Connections still saying hello from everywhere: a new one beyond this closes the oldest.
const PENDING_MAX: usize = 256;
/// At most one warning about bad connections this often; the warning counts the others.
const COMPLAIN_EVERY: Duration = Duration::from_secs(10);
/// A hello thread's stack: it reads 52 bytes.
const HELLO_STACK: usize = 128 * 1024;
const VERSION: u16 = 2;
/// What a hello's proof signs, before the nonce and the hello's fields.
const PROOF_CONTEXT: &[u8] = b"switchgnn collective proof v1\0";
const GREETING_LEN: usize = 22;
const HELLO_LEN: usize = 52;
/// Largest vector one round may carry (256 Mi values, 1 GiB).
const MAX_COUNT: u32 = 1 << 28;
/// How often blocked reads look at the stop flag.
const POLL: Duration = Duration::from_millis(100);

#[derive(Debug, Error)]
pub enum CollectiveError {
    #[error("collective service at {addr}: {source}")]
    Io { addr: SocketAddr, source: io::Error },
    #[error("no collective service answered at {addr} within {waited:.1?}: {last}")]
    NoService {
        addr: SocketAddr,
        waited: Duration,
        last: io::Error,
    },
    #[error("the collective service refused worker {rank}: {reason}")]
    Refused { rank: u16, reason: String },
    #[error("the collective service failed: {0}")]
    Failed(String),
    #[error("collective: {0}")]
    Protocol(String),
    #[error("the collective service was stopped with {connected} workers connected")]
    Stopped { connected: usize },
}

pub use switchgnn_dataplane::allreduce::ReduceOp;

/// What the service did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CollectiveReport {
    pub rounds: u64,
    /// Values received from all workers together.
    pub values_in: u64,
    /// Connections that sent no valid hello in time, or whose hello was refused.
    #[serde(default)]
    pub bad_connections: u64,
    /// Connections closed before their hello to make room for newer ones (over
    /// `PENDING_PER_IP` from one address, or `PENDING_MAX` in all).
    #[serde(default)]
    pub evicted_connections: u64,
}

/// The service's settings.
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    pub job: u16,
    pub world: u16,
    /// Every worker must have connected by then.
    pub join: Duration,
    /// A worker that sends nothing this long is given up (a dead process closes its connection
    /// at once; this catches a hung one).
    pub idle: Duration,
    /// The job's admission secret: workers must prove they hold it.
    pub secret: Option<Secret>,
}

impl ServiceConfig {
    pub fn of(job: u16, world: u16, timeouts: &crate::Timeouts) -> ServiceConfig {
        ServiceConfig {
            job,
            world,
            join: timeouts.join(),
            idle: timeouts.collective_idle(),
            secret: None,
        }
    }

    /// Admit only workers that prove they hold `secret` (if any).
    pub fn with_secret(mut self, secret: Option<Secret>) -> ServiceConfig {
        self.secret = secret;
        self
    }
}

/// Who a worker is to the service.
#[derive(Debug, Clone)]
pub struct Member {
    pub job: u16,
    pub rank: u16,
    pub world: u16,
    /// A fingerprint of every setting the workers must share.
    pub agreement: u64,
    /// The job's admission secret, if it has one.
    pub secret: Option<Secret>,
}

/// The fields a hello's proof covers.
fn proof_parts(nonce: &[u8], job: u16, rank: u16, world: u16, agreement: u64) -> Vec<u8> {
    let mut parts = nonce.to_vec();
    for w in [job, rank, world] {
        parts.extend_from_slice(&w.to_le_bytes());
    }
    parts.extend_from_slice(&agreement.to_le_bytes());
    parts
}

/// A service running in its own thread.
#[derive(Debug)]
pub struct RunningService {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Result<CollectiveReport, CollectiveError>>,
}

impl RunningService {
    /// Bind at `addr` (the switch's address: TCP beside its UDP port) and start; `liveness`
    /// is the switch's view of the workers (see the module's notes).
    pub fn start(
        addr: SocketAddr,
        cfg: ServiceConfig,
        liveness: Option<Arc<Liveness>>,
    ) -> io::Result<RunningService> {
        RunningService::start_jobs(addr, vec![(cfg, liveness)])
    }

    /// [`RunningService::start`] for several jobs at one address: a worker's hello names its
    /// job, and each job's rounds run apart from the others'.
    pub fn start_jobs(
        addr: SocketAddr,
        jobs: Vec<(ServiceConfig, Option<Arc<Liveness>>)>,
    ) -> io::Result<RunningService> {
        let service = CollectiveService::bind_jobs(addr, jobs)?;
        let stop = Arc::new(AtomicBool::new(false));
        let handle = service.spawn(stop.clone());
        Ok(RunningService { stop, handle })
    }

    /// Once the switch is done: give the workers a moment to leave, then stop the service.
    pub fn finish(self, grace: Duration) -> Result<CollectiveReport, CollectiveError> {
        let until = Instant::now() + grace;
        while !self.handle.is_finished() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or_else(|_| {
            Err(CollectiveError::Failed(
                "the service thread panicked".into(),
            ))
        })
    }
}

/// The parameter server: accepts each job's `world` workers, then reduces that job's rounds
/// (in a thread of its own) until they all leave.
#[derive(Debug)]
pub struct CollectiveService {
    jobs: Vec<ServiceJob>,
    listener: TcpListener,
}

/// One job the service serves.
#[derive(Debug)]
struct ServiceJob {
    cfg: ServiceConfig,
    liveness: Option<Arc<Liveness>>,
}

/// A job's workers as they connect.
#[derive(Debug)]
struct Gathering {
    peers: Vec<Option<TcpStream>>,
    /// The first worker's agreement: everyone else's must equal it.
    agreement: Option<u64>,
    /// The join deadline, from the first worker's arrival: a switch serving a job that never
    /// trains waits, harmlessly, until it is stopped.
    deadline: Option<Instant>,
    /// Every worker connected and the rounds were handed to a thread (or the job failed).
    over: bool,
}

impl Gathering {
    fn connected(&self) -> usize {
        self.peers.iter().flatten().count()
    }
}

impl CollectiveService {
    pub fn bind(addr: SocketAddr, cfg: ServiceConfig) -> io::Result<CollectiveService> {
        CollectiveService::bind_jobs(addr, vec![(cfg, None)])
    }

    /// A service for several jobs at `addr` (distinct job ids), each judged by its own
    /// liveness table if it has one.
    pub fn bind_jobs(
        addr: SocketAddr,
        jobs: Vec<(ServiceConfig, Option<Arc<Liveness>>)>,
    ) -> io::Result<CollectiveService> {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        Ok(CollectiveService {
            jobs: jobs
                .into_iter()
                .map(|(cfg, liveness)| ServiceJob { cfg, liveness })
                .collect(),
            listener,
        })
    }

    /// Judge workers by the switch's liveness table instead of a deadline per round.
    pub fn with_liveness(mut self, liveness: Arc<Liveness>) -> CollectiveService {
        for j in &mut self.jobs {
            j.liveness = Some(liveness.clone());
        }
        self
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Run in a thread of its own until every worker has left, an error, or `stop`.
    pub fn spawn(
        self,
        stop: Arc<AtomicBool>,
    ) -> std::thread::JoinHandle<Result<CollectiveReport, CollectiveError>> {
        std::thread::Builder::new()
            .name("collective".into())
            .spawn(move || self.run(&stop))
            .expect("spawn the collective thread")
    }

    /// Until every job's workers have left, or `stop`. The report sums the jobs'; the first
    /// job to fail gives the error (the others run on to their end). Stopped before any worker
    /// connected, it returns an empty report.
    pub fn run(self, stop: &AtomicBool) -> Result<CollectiveReport, CollectiveError> {
        let addr = self
            .listener
            .local_addr()
            .map_err(|source| io_err(addr0(), source))?;
        let mut gathering: Vec<Gathering> = self
            .jobs
            .iter()
            .map(|j| Gathering {
                peers: (0..j.cfg.world).map(|_| None).collect(),
                agreement: None,
                deadline: None,
                over: false,
            })
            .collect();
        let mut strangers = Strangers::default();
        let report = std::thread::scope(|scope| {
            let mut outcomes: Vec<Result<CollectiveReport, CollectiveError>> = Vec::new();
            let mut serving = Vec::new();
            let accepted = self.accept_all(
                &mut gathering,
                stop,
                addr,
                &mut strangers,
                |job, mut peers| {
                    let job = &self.jobs[job];
                    serving.push(scope.spawn(move || job.run(&mut peers, stop)));
                },
            );
            if let Err(e) = accepted {
                outcomes.push(Err(e));
            }
            for h in serving {
                outcomes.push(h.join().unwrap_or_else(|_| {
                    Err(CollectiveError::Failed(
                        "a job's service thread panicked".into(),
                    ))
                }));
            }
            let mut report = CollectiveReport::default();
            for outcome in outcomes {
                let r = outcome?;
                report.rounds += r.rounds;
                report.values_in += r.values_in;
            }
            Ok(report)
        });
        strangers.complaints.flush();
        report.map(|r| CollectiveReport {
            bad_connections: strangers.bad,
            evicted_connections: strangers.evicted,
            ..r
        })
    }

    /// Accept workers until every job has all of its own, handing each complete job's
    /// connections to `serve`. A job whose workers miss the join deadline fails alone.
    ///
    /// Every connection says hello in a thread of its own (see [`greet`]) and comes back here
    /// with its hello to be admitted, so neither a silent connection nor a slow one holds up
    /// the others; the connections still saying hello are capped per address and in all.
    fn accept_all(
        &self,
        gathering: &mut [Gathering],
        stop: &AtomicBool,
        addr: SocketAddr,
        strangers: &mut Strangers,
        mut serve: impl FnMut(usize, Vec<Option<TcpStream>>),
    ) -> Result<(), CollectiveError> {
        let (said, hellos) = std::sync::mpsc::channel::<Greeted>();
        let workers: usize = gathering.iter().map(|g| g.peers.len()).sum();
        let mut pending = Pending::for_workers(workers);
        let outcome = self.gather(
            gathering,
            stop,
            addr,
            strangers,
            &mut pending,
            (&said, &hellos),
            &mut serve,
        );
        // Whoever is still saying hello is not needed any more (their threads end at once).
        pending.close_all();
        outcome
    }

    #[allow(clippy::too_many_arguments)]
    fn gather(
        &self,
        gathering: &mut [Gathering],
        stop: &AtomicBool,
        addr: SocketAddr,
        strangers: &mut Strangers,
        pending: &mut Pending,
        (said, hellos): (
            &std::sync::mpsc::Sender<Greeted>,
            &std::sync::mpsc::Receiver<Greeted>,
        ),
        serve: &mut impl FnMut(usize, Vec<Option<TcpStream>>),
    ) -> Result<(), CollectiveError> {
        let mut failure = None;
        while gathering.iter().any(|g| !g.over) {
            if stop.load(Ordering::Relaxed) {
                let connected: usize = gathering
                    .iter()
                    .filter(|g| !g.over)
                    .map(Gathering::connected)
                    .sum();
                return match (failure, connected) {
                    (Some(e), _) => Err(e),
                    (None, 0) => Ok(()),
                    (None, connected) => Err(CollectiveError::Stopped { connected }),
                };
            }
            for (job, g) in self.jobs.iter().zip(gathering.iter_mut()) {
                if !g.over && g.deadline.is_some_and(|d| Instant::now() > d) {
                    let missing: Vec<usize> = (0..g.peers.len())
                        .filter(|&r| g.peers[r].is_none())
                        .collect();
                    let e = CollectiveError::Failed(format!(
                        "workers {missing:?} of job {} did not connect within {:?}",
                        job.cfg.job, job.cfg.join
                    ));
                    for p in g.peers.iter_mut().flatten() {
                        let _ = send_error(p, &e.to_string());
                    }
                    g.peers.clear();
                    g.over = true;
                    failure.get_or_insert(e);
                }
            }
            let mut idle = true;
            // Hellos that came in: admit them.
            while let Ok(greeted) = hellos.try_recv() {
                idle = false;
                if !pending.done(greeted.id) {
                    // Closed to make room: already counted.
                    continue;
                }
                let Greeted {
                    mut stream,
                    nonce,
                    hello,
                    from,
                    ..
                } = greeted;
                let hello = match hello {
                    Ok(h) => h,
                    Err(e) => {
                        strangers.bad += 1;
                        strangers
                            .complaints
                            .note(format_args!("a bad hello from {from}: {}", describe(&e)));
                        continue;
                    }
                };
                if let Some(index) =
                    self.admit_one(gathering, strangers, &mut stream, from, &nonce, &hello)
                {
                    let (job, g) = (&self.jobs[index], &mut gathering[index]);
                    if let Err(e) = stream.write_all(&[0]) {
                        // Gone right after its hello: it holds no rank.
                        strangers.bad += 1;
                        strangers
                            .complaints
                            .note(format_args!("worker at {from} left after its hello: {e}"));
                        continue;
                    }
                    g.deadline
                        .get_or_insert_with(|| Instant::now() + job.cfg.join);
                    g.agreement = Some(hello.agreement);
                    g.peers[usize::from(hello.rank)] = Some(stream);
                    if g.peers.iter().all(Option::is_some) {
                        g.over = true;
                        serve(index, std::mem::take(&mut g.peers));
                    }
                }
            }
            // New connections: each says hello in a thread of its own.
            loop {
                let (stream, from) = match self.listener.accept() {
                    Ok(accepted) => accepted,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::ConnectionAborted
                                | io::ErrorKind::ConnectionReset
                                | io::ErrorKind::Interrupted
                        ) =>
                    {
                        continue
                    }
                    Err(e) => return Err(io_err(addr, e)),
                };
                idle = false;
                strangers.evicted += pending.make_room(from);
                match greet(stream, from, pending.next_id(), said.clone()) {
                    Ok((id, watch)) => pending.add(id, from, watch),
                    Err(e) => {
                        strangers.bad += 1;
                        strangers
                            .complaints
                            .note(format_args!("a connection from {from} failed: {e}"));
                    }
                }
            }
            if idle {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        failure.map_or(Ok(()), Err)
    }

    /// Judge `hello` from `from` (its connection `stream`, greeted with `nonce`): the index of
    /// the job that takes it, or `None` after telling it why not.
    fn admit_one(
        &self,
        gathering: &[Gathering],
        strangers: &mut Strangers,
        stream: &mut TcpStream,
        from: SocketAddr,
        nonce: &[u8],
        hello: &Hello,
    ) -> Option<usize> {
        let refused = match self.jobs.iter().position(|j| j.cfg.job == hello.job) {
            None => {
                let jobs: Vec<u16> = self.jobs.iter().map(|j| j.cfg.job).collect();
                format!(
                    "job {} of {} workers, but this service runs job{} {}",
                    hello.job,
                    hello.world,
                    if jobs.len() == 1 { "" } else { "s" },
                    jobs.iter()
                        .map(|j| j.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
            Some(index) => match self.jobs[index].admit(&gathering[index], nonce, hello) {
                None => return Some(index),
                Some(reason) => reason,
            },
        };
        let _ = send_error(stream, &refused);
        strangers.bad += 1;
        strangers
            .complaints
            .note(format_args!("refused a worker at {from}: {refused}"));
        None
    }
}

/// A connection back from saying hello.
#[derive(Debug)]
struct Greeted {
    id: u64,
    from: SocketAddr,
    stream: TcpStream,
    nonce: [u8; 16],
    hello: io::Result<Hello>,
}

/// Greet the connection `stream` from `from` and read its hello in a thread of its own, which
/// hands both back on `said` (within [`HELLO_WAIT`], or at once once its connection is shut
/// down). Returns `id` and a handle on the connection to shut it down with.
fn greet(
    stream: TcpStream,
    from: SocketAddr,
    id: u64,
    said: std::sync::mpsc::Sender<Greeted>,
) -> io::Result<(u64, TcpStream)> {
    stream.set_nonblocking(false)?;
    stream.set_nodelay(true)?;
    let watch = stream.try_clone()?;
    std::thread::Builder::new()
        .name("collective-hello".into())
        .stack_size(HELLO_STACK)
        .spawn(move || {
            let mut stream = stream;
            let nonce: [u8; 16] = rand::random();
            let mut greeting = MAGIC.to_vec();
            greeting.extend_from_slice(&VERSION.to_le_bytes());
            greeting.extend_from_slice(&nonce);
            let never = AtomicBool::new(false);
            let hello = stream.write_all(&greeting).and_then(|()| {
                read_hello(&mut stream, &mut until(Instant::now() + HELLO_WAIT), &never)
            });
            // The service may be gone: nobody to tell.
            let _ = said.send(Greeted {
                id,
                from,
                stream,
                nonce,
                hello,
            });
        })?;
    Ok((id, watch))
}

/// The connections still saying hello, oldest first.
#[derive(Debug, Default)]
struct Pending {
    next: u64,
    waiting: std::collections::VecDeque<(u64, SocketAddr, TcpStream)>,
    /// The cap per IP address (at least [`PENDING_PER_IP`]).
    per_ip: usize,
}

impl Pending {
    /// For jobs of `workers` workers in all.
    fn for_workers(workers: usize) -> Pending {
        Pending {
            per_ip: PENDING_PER_IP.max(2 * workers),
            ..Pending::default()
        }
    }

    fn next_id(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    fn add(&mut self, id: u64, from: SocketAddr, watch: TcpStream) {
        self.waiting.push_back((id, from, watch));
    }

    /// Whether `id` was still waiting (it no longer is).
    fn done(&mut self, id: u64) -> bool {
        match self.waiting.iter().position(|(i, ..)| *i == id) {
            Some(at) => {
                self.waiting.remove(at);
                true
            }
            None => false,
        }
    }

    /// Before a connection from `from`: close the oldest ones over the caps (per address and
    /// in all); how many.
    fn make_room(&mut self, from: SocketAddr) -> u64 {
        let mut closed = 0;
        let same = |w: &(u64, SocketAddr, TcpStream)| w.1.ip() == from.ip();
        if self.waiting.iter().filter(|w| same(w)).count() >= self.per_ip {
            if let Some(at) = self.waiting.iter().position(same) {
                close(self.waiting.remove(at));
                closed += 1;
            }
        }
        while self.waiting.len() >= PENDING_MAX {
            close(self.waiting.pop_front());
            closed += 1;
        }
        closed
    }

    fn close_all(&mut self) {
        for w in self.waiting.drain(..) {
            close(Some(w));
        }
    }
}

fn close(waiting: Option<(u64, SocketAddr, TcpStream)>) {
    if let Some((_, _, stream)) = waiting {
        let _ = stream.shutdown(Shutdown::Both);
    }
}

/// What the service holds against connections that are not workers.
#[derive(Debug, Default)]
struct Strangers {
    bad: u64,
    evicted: u64,
    complaints: Complaints,
}

/// Warnings about bad connections, at most one per [`COMPLAIN_EVERY`]: anyone who can reach
/// the port could otherwise fill the log.
#[derive(Debug, Default)]
struct Complaints {
    last: Option<Instant>,
    /// Complaints since the last warning, not logged.
    held: u64,
}

impl Complaints {
    /// Warn about `what` unless a warning went out less than [`COMPLAIN_EVERY`] ago; whether
    /// it did.
    fn note(&mut self, what: std::fmt::Arguments<'_>) -> bool {
        let now = Instant::now();
        if self
            .last
            .is_some_and(|t| now.duration_since(t) < COMPLAIN_EVERY)
        {
            self.held += 1;
            tracing::debug!("collective: {what}");
            return false;
        }
        match std::mem::take(&mut self.held) {
            0 => tracing::warn!("collective: {what}"),
            held => tracing::warn!(
                "collective: {what} ({held} more bad connections in the last {:.0?})",
                self.last.map_or(COMPLAIN_EVERY, |t| now.duration_since(t))
            ),
        }
        self.last = Some(now);
        true
    }

    /// Say how many were held back since the last warning, if any.
    fn flush(&mut self) {
        match std::mem::take(&mut self.held) {
            0 => {}
            held => tracing::warn!("collective: {held} more bad connections"),
        }
    }
}

impl ServiceJob {
    /// Why `hello` (for this job) is refused, if it is.
    fn admit(&self, g: &Gathering, nonce: &[u8], hello: &Hello) -> Option<String> {
        if hello.world != self.cfg.world {
            Some(format!(
                "job {} of {} workers, but this service runs job {} of {}",
                hello.job, hello.world, self.cfg.job, self.cfg.world
            ))
        } else if self.cfg.secret.as_ref().is_some_and(|s| {
            let parts = proof_parts(nonce, hello.job, hello.rank, hello.world, hello.agreement);
            !s.check(PROOF_CONTEXT, &[&parts], &hello.proof)
        }) {
            Some(format!(
                "worker {}'s admission proof does not verify (the worker's secret is not the \
                 switch's: give both the job's `secret_file`)",
                hello.rank
            ))
        } else if hello.rank >= self.cfg.world {
            Some(format!("rank {} out of range", hello.rank))
        } else if g.peers[usize::from(hello.rank)].is_some() {
            Some(format!("rank {} is already connected", hello.rank))
        } else if g.agreement.is_some_and(|a| a != hello.agreement) {
            Some(format!(
                "worker {} runs other settings than the workers before it (agreement \
                 {:#018x}, expected {:#018x}); start every worker with the same options",
                hello.rank,
                hello.agreement,
                g.agreement.unwrap_or_default()
            ))
        } else {
            None
        }
    }

    /// Serve the rounds of this job's connected workers; on an error, tell everyone still
    /// connected why the job ends.
    fn run(
        &self,
        peers: &mut [Option<TcpStream>],
        stop: &AtomicBool,
    ) -> Result<CollectiveReport, CollectiveError> {
        let outcome = self.serve(peers, stop);
        if let Err(e) = &outcome {
            for p in peers.iter_mut().flatten() {
                let _ = send_error(p, &e.to_string());
                let _ = p.shutdown(Shutdown::Both);
            }
        }
        outcome
    }

    fn serve(
        &self,
        peers: &mut [Option<TcpStream>],
        stop: &AtomicBool,
    ) -> Result<CollectiveReport, CollectiveError> {
        let mut report = CollectiveReport::default();
        let mut acc: Vec<f64> = Vec::new();
        let mut values: Vec<f32> = Vec::new();
        loop {
            let mut first: Option<(ReduceOp, u32, u32)> = None;
            let mut left = 0;
            for rank in 0..peers.len() {
                // While waiting for `rank`, the others hear keepalives.
                let (before, rest) = peers.split_at_mut(rank);
                let (this, after) = rest.split_first_mut().expect("rank < world");
                let stream = this.as_mut().expect("all connected");
                let waiting = before.iter_mut().chain(after.iter_mut()).flatten();
                let mut patience = self.patience(rank as u16, waiting.collect());
                let mut head = [0u8; 9];
                match read_full(stream, &mut head, &mut patience, stop) {
                    Ok(()) => {}
                    Err(e) if leaving(&e) && rank == left => {
                        // Leaving is fine when everyone leaves at the same point.
                        left += 1;
                        continue;
                    }
                    Err(e) => {
                        return Err(CollectiveError::Failed(format!(
                            "worker {rank} in round {}: {}",
                            report.rounds,
                            describe(&e)
                        )))
                    }
                }
                if left > 0 {
                    return Err(CollectiveError::Failed(format!(
                        "workers 0..{left} left while worker {rank} started round {}",
                        report.rounds
                    )));
                }
                let op = ReduceOp::from_code(head[0]).ok_or_else(|| {
                    CollectiveError::Protocol(format!("worker {rank}: unknown op {}", head[0]))
                })?;
                let round = u32::from_le_bytes(head[1..5].try_into().expect("4 bytes"));
                let count = u32::from_le_bytes(head[5..9].try_into().expect("4 bytes"));
                if count > MAX_COUNT {
                    return Err(CollectiveError::Protocol(format!(
                        "worker {rank}: {count} values in one round"
                    )));
                }
                match first {
                    None => {
                        first = Some((op, round, count));
                        acc.clear();
                        acc.resize(count as usize, 0.0);
                        if op == ReduceOp::Max {
                            acc.fill(f64::NEG_INFINITY);
                        }
                    }
                    Some(f) if f != (op, round, count) => {
                        return Err(CollectiveError::Failed(format!(
                            "workers disagree: worker 0 sent {:?} round {} of {} values, worker \
                             {rank} {op:?} round {round} of {count}",
                            f.0, f.1, f.2
                        )))
                    }
                    Some(_) => {}
                }
                values.resize(count as usize, 0.0);
                read_f32s(stream, &mut values, &mut patience, stop).map_err(|e| {
                    CollectiveError::Failed(format!("worker {rank}: {}", describe(&e)))
                })?;
                for (a, &v) in acc.iter_mut().zip(&values) {
                    match op {
                        ReduceOp::Sum => *a += f64::from(v),
                        ReduceOp::Max => *a = a.max(f64::from(v)),
                    }
                }
                report.values_in += u64::from(count);
            }
            if left == peers.len() {
                return Ok(report);
            }
            let mut reply = Vec::with_capacity(5 + 4 * acc.len());
            reply.push(0u8);
            reply.extend_from_slice(&(acc.len() as u32).to_le_bytes());
            for &a in &acc {
                reply.extend_from_slice(&(a as f32).to_le_bytes());
            }
            for (rank, peer) in peers.iter_mut().enumerate() {
                let stream = peer.as_mut().expect("all connected");
                stream.write_all(&reply).map_err(|e| {
                    CollectiveError::Failed(format!("worker {rank}: {}", describe(&e)))
                })?;
            }
            report.rounds += 1;
        }
    }
}

impl ServiceJob {
    /// How long to wait for `rank`'s next bytes: while the switch hears from it (or, without
    /// a liveness table, until `idle` has passed); `waiting` hear a keepalive every second
    /// meanwhile.
    fn patience<'a>(
        &'a self,
        rank: u16,
        mut waiting: Vec<&'a mut TcpStream>,
    ) -> impl FnMut() -> io::Result<()> + 'a {
        let deadline = Instant::now() + self.cfg.idle;
        let mut next_keepalive = Instant::now() + KEEPALIVE_EVERY;
        move || {
            let now = Instant::now();
            if now >= next_keepalive {
                next_keepalive = now + KEEPALIVE_EVERY;
                for w in waiting.iter_mut() {
                    // A peer gone is found when its turn comes.
                    let _ = w.write_all(&[KEEPALIVE]);
                }
            }
            match &self.liveness {
                Some(l) => l.check(rank, now).map_err(|silent| {
                    io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!(
                            "the switch has heard nothing from it (no packet, no heartbeat) \
                             for {silent:.1?}"
                        ),
                    )
                }),
                None if now >= deadline => {
                    Err(io::Error::new(io::ErrorKind::TimedOut, "timed out"))
                }
                None => Ok(()),
            }
        }
    }
}

/// Whether a read error at the start of a round is a worker that closed its connection: the
/// end of the stream, or a reset, which is what a keepalive written after the worker closed
/// (racing its goodbye) turns the close into.
fn leaving(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset
    )
}

/// Patience that ends at `deadline`.
fn until(deadline: Instant) -> impl FnMut() -> io::Result<()> {
    move || {
        if Instant::now() >= deadline {
            Err(io::Error::new(io::ErrorKind::TimedOut, "timed out"))
        } else {
            Ok(())
        }
    }
}

#[derive(Debug)]
struct Hello {
    job: u16,
    rank: u16,
    world: u16,
    agreement: u64,
    proof: [u8; 32],
}

fn read_hello(
    stream: &mut TcpStream,
    patience: &mut dyn FnMut() -> io::Result<()>,
    stop: &AtomicBool,
) -> io::Result<Hello> {
    let mut b = [0u8; HELLO_LEN];
    read_full(stream, &mut b, patience, stop)?;
    if b[..4] != MAGIC {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "not a collective hello",
        ));
    }
    let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
    if u16_at(4) != VERSION {
        let _ = send_error(
            stream,
            &format!(
                "collective version {} (this service speaks {VERSION})",
                u16_at(4)
            ),
        );
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "version mismatch",
        ));
    }
    Ok(Hello {
        job: u16_at(6),
        rank: u16_at(8),
        world: u16_at(10),
        agreement: u64::from_le_bytes(b[12..20].try_into().expect("8 bytes")),
        proof: b[20..HELLO_LEN].try_into().expect("32 bytes"),
    })
}

pub(crate) fn send_error(stream: &mut TcpStream, reason: &str) -> io::Result<()> {
    let mut m = vec![1u8];
    m.extend_from_slice(&(reason.len() as u32).to_le_bytes());
    m.extend_from_slice(reason.as_bytes());
    stream.write_all(&m)
}

/// Fill `buf`, asking `patience` every poll interval whether to go on waiting (its error ends
/// the read) and giving up early on `stop`. Unlike `read_exact` under a read timeout, no byte
/// is lost to a timeout.
fn read_full(
    stream: &mut TcpStream,
    buf: &mut [u8],
    patience: &mut dyn FnMut() -> io::Result<()>,
    stop: &AtomicBool,
) -> io::Result<()> {
    let mut at = 0;
    while at < buf.len() {
        patience()?;
        if stop.load(Ordering::Relaxed) {
            return Err(io::Error::new(io::ErrorKind::Interrupted, "stopped"));
        }
        stream.set_read_timeout(Some(POLL))?;
        match stream.read(&mut buf[at..]) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => at += n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn read_f32s(
    stream: &mut TcpStream,
    out: &mut [f32],
    patience: &mut dyn FnMut() -> io::Result<()>,
    stop: &AtomicBool,
) -> io::Result<()> {
    let mut bytes = vec![0u8; 4 * out.len()];
    read_full(stream, &mut bytes, patience, stop)?;
    for (o, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
        *o = f32::from_le_bytes(b.try_into().expect("4 bytes"));
    }
    Ok(())
}

fn describe(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::UnexpectedEof => "the connection closed".into(),
        io::ErrorKind::TimedOut if e.get_ref().is_none_or(|i| i.to_string() == "timed out") => {
            "sent nothing in time".into()
        }
        _ => e.to_string(),
    }
}

fn io_err(addr: SocketAddr, source: io::Error) -> CollectiveError {
    CollectiveError::Io { addr, source }
}

fn addr0() -> SocketAddr {
    SocketAddr::from(([0, 0, 0, 0], 0))
}

/// A worker's connection to the service.
#[derive(Debug)]
pub struct CollectiveClient {
    addr: SocketAddr,
    stream: TcpStream,
    rank: u16,
    round: u32,
    idle: Duration,
    /// Whether the service accepted the hello (an error before that is a refusal).
    joined: bool,
    /// Never set: the client's reads have no stop flag of their own.
    never: AtomicBool,
    /// Bytes written and read, for the traffic figures.
    pub bytes_sent: u64,
    pub bytes_received: u64,
}

impl CollectiveClient {
    /// Connect (retrying until `join` has passed: the service may still be starting) and
    /// introduce this worker, `who`.
    pub fn connect(
        addr: SocketAddr,
        who: &Member,
        join: Duration,
        idle: Duration,
    ) -> Result<CollectiveClient, CollectiveError> {
        let Member {
            job,
            rank,
            world,
            agreement,
            ..
        } = *who;
        let started = Instant::now();
        let mut stream = loop {
            match TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
                Ok(s) => break s,
                Err(last) if started.elapsed() >= join => {
                    return Err(CollectiveError::NoService {
                        addr,
                        waited: started.elapsed(),
                        last,
                    })
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        stream.set_nodelay(true).map_err(|e| io_err(addr, e))?;
        let never = AtomicBool::new(false);
        let mut greeting = [0u8; GREETING_LEN];
        read_full(
            &mut stream,
            &mut greeting,
            &mut until(started + join),
            &never,
        )
        .map_err(|e| io_err(addr, e))?;
        let version = u16::from_le_bytes([greeting[4], greeting[5]]);
        if greeting[..4] != MAGIC || version != VERSION {
            return Err(CollectiveError::Protocol(format!(
                "{addr} greets with another protocol (version {version}, this worker speaks \
                 {VERSION})"
            )));
        }
        let mut hello = Vec::with_capacity(HELLO_LEN);
        hello.extend_from_slice(&MAGIC);
        for w in [VERSION, job, rank, world] {
            hello.extend_from_slice(&w.to_le_bytes());
        }
        hello.extend_from_slice(&agreement.to_le_bytes());
        let proof = who.secret.as_ref().map_or([0; 32], |s| {
            let parts = proof_parts(&greeting[6..], job, rank, world, agreement);
            s.sign(PROOF_CONTEXT, &[&parts])
        });
        hello.extend_from_slice(&proof);
        stream.write_all(&hello).map_err(|e| io_err(addr, e))?;
        let mut client = CollectiveClient {
            addr,
            stream,
            rank,
            round: 0,
            idle,
            joined: false,
            never,
            bytes_sent: HELLO_LEN as u64,
            bytes_received: GREETING_LEN as u64,
        };
        // The hello is answered once every worker has connected; that may take a while.
        client.read_status(Some(started + join.max(idle)))?;
        client.joined = true;
        Ok(client)
    }

    /// Replace `values` by their element-wise reduction over every worker.
    pub fn all_reduce(&mut self, op: ReduceOp, values: &mut [f32]) -> Result<(), CollectiveError> {
        let mut m = Vec::with_capacity(9 + 4 * values.len());
        m.push(op.code());
        m.extend_from_slice(&self.round.to_le_bytes());
        m.extend_from_slice(&(values.len() as u32).to_le_bytes());
        for v in values.iter() {
            m.extend_from_slice(&v.to_le_bytes());
        }
        self.stream
            .write_all(&m)
            .map_err(|e| self.failed("sending", &e))?;
        self.bytes_sent += m.len() as u64;
        self.read_status(None)?;
        let mut patience = until(Instant::now() + self.idle);
        let mut count = [0u8; 4];
        read_full(&mut self.stream, &mut count, &mut patience, &self.never)
            .map_err(|e| self.failed("receiving", &e))?;
        let count = u32::from_le_bytes(count) as usize;
        if count != values.len() {
            return Err(CollectiveError::Protocol(format!(
                "round {} came back with {count} values, {} sent",
                self.round,
                values.len()
            )));
        }
        read_f32s(&mut self.stream, values, &mut patience, &self.never)
            .map_err(|e| self.failed("receiving", &e))?;
        self.bytes_received += 5 + 4 * count as u64;
        self.round += 1;
        Ok(())
    }

    /// This end of the connection: the address this host reaches the service from.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.stream.local_addr()
    }

    /// The maximum of `x` over every worker.
    pub fn max(&mut self, x: f32) -> Result<f32, CollectiveError> {
        let mut v = [x];
        self.all_reduce(ReduceOp::Max, &mut v)?;
        Ok(v[0])
    }

    /// Read the status of a reply, skipping keepalives. `deadline`: a fixed one; `None`: wait
    /// as long as the service says it is alive (at most `idle` of silence).
    fn read_status(&mut self, deadline: Option<Instant>) -> Result<(), CollectiveError> {
        let mut status = [0u8; 1];
        loop {
            let mut patience = until(deadline.unwrap_or_else(|| Instant::now() + self.idle));
            read_full(&mut self.stream, &mut status, &mut patience, &self.never)
                .map_err(|e| self.failed("waiting for the service", &e))?;
            self.bytes_received += 1;
            if status[0] != KEEPALIVE {
                break;
            }
        }
        let mut patience = until(Instant::now() + self.idle);
        match status[0] {
            0 => Ok(()),
            1 => {
                let mut len = [0u8; 4];
                read_full(&mut self.stream, &mut len, &mut patience, &self.never)
                    .map_err(|e| self.failed("reading an error", &e))?;
                let len = (u32::from_le_bytes(len) as usize).min(1 << 16);
                let mut text = vec![0u8; len];
                read_full(&mut self.stream, &mut text, &mut patience, &self.never)
                    .map_err(|e| self.failed("reading an error", &e))?;
                let reason = String::from_utf8_lossy(&text).into_owned();
                Err(if !self.joined {
                    CollectiveError::Refused {
                        rank: self.rank,
                        reason,
                    }
                } else {
                    CollectiveError::Failed(reason)
                })
            }
            other => Err(CollectiveError::Protocol(format!("unknown status {other}"))),
        }
    }

    fn failed(&self, during: &str, e: &io::Error) -> CollectiveError {
        CollectiveError::Failed(format!(
            "worker {} {during} in round {} at {}: {}",
            self.rank,
            self.round,
            self.addr,
            describe(e)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(
        world: u16,
    ) -> (
        SocketAddr,
        std::thread::JoinHandle<Result<CollectiveReport, CollectiveError>>,
    ) {
        let cfg = ServiceConfig {
            job: 3,
            world,
            join: Duration::from_secs(10),
            idle: Duration::from_secs(10),
            secret: None,
        };
        let s = CollectiveService::bind("127.0.0.1:0".parse().unwrap(), cfg).unwrap();
        let addr = s.local_addr().unwrap();
        (addr, s.spawn(Arc::new(AtomicBool::new(false))))
    }

    fn connect(
        addr: SocketAddr,
        rank: u16,
        world: u16,
        agreement: u64,
    ) -> Result<CollectiveClient, CollectiveError> {
        let who = Member {
            job: 3,
            rank,
            world,
            agreement,
            secret: None,
        };
        CollectiveClient::connect(addr, &who, Duration::from_secs(10), Duration::from_secs(10))
    }

    /// While the service waits for worker 0's next round, worker 1 hears keepalives it never
    /// reads (it is done); closing with them unread resets its connection. That is a goodbye,
    /// not a failure.
    #[test]
    fn workers_leaving_at_different_times_end_the_service_cleanly() {
        let (addr, server) = service(2);
        let early = std::thread::spawn(move || {
            let mut c = connect(addr, 1, 2, 0).unwrap();
            c.all_reduce(ReduceOp::Sum, &mut [1.0f32]).unwrap();
            std::thread::sleep(KEEPALIVE_EVERY + Duration::from_millis(300));
        });
        let mut late = connect(addr, 0, 2, 0).unwrap();
        late.all_reduce(ReduceOp::Sum, &mut [1.0f32]).unwrap();
        early.join().unwrap();
        // Before the next keepalive, whose failed write would swallow the reset.
        std::thread::sleep(Duration::from_millis(300));
        drop(late);
        let report = server.join().unwrap().unwrap();
        assert_eq!(report.rounds, 1);
    }

    /// A connection that never says hello is dropped after `HELLO_WAIT`, not at the join
    /// deadline: the workers behind it get in.
    #[test]
    fn a_silent_connection_does_not_hold_up_the_others() {
        let (addr, server) = service(1);
        let silent = TcpStream::connect(addr).unwrap();
        let started = Instant::now();
        let mut c = connect(addr, 0, 1, 0).unwrap();
        let waited = started.elapsed();
        assert!(waited < HELLO_WAIT + Duration::from_secs(1), "{waited:?}");
        assert_eq!(c.max(1.5).unwrap(), 1.5);
        drop((c, silent));
        assert_eq!(server.join().unwrap().unwrap().rounds, 1);
    }

    /// 64 idle and 64 garbage connections opened before a 4-worker job hold nobody up: every
    /// worker joins before an idle connection's hello deadline would even have passed once
    /// (when hellos were read one at a time, they waited 64 of those, two minutes), and the
    /// rounds come back right.
    #[test]
    fn idle_and_garbage_connections_hold_up_nobody() {
        let world = 4u16;
        let (addr, server) = service(world);
        let idle: Vec<TcpStream> = (0..64).map(|_| TcpStream::connect(addr).unwrap()).collect();
        let garbage: Vec<TcpStream> = (0..64u8)
            .map(|i| {
                let mut s = TcpStream::connect(addr).unwrap();
                // Some not even a whole hello, some a whole one of nonsense.
                let _ = s.write_all(&vec![i; if i % 2 == 0 { 7 } else { HELLO_LEN }]);
                s
            })
            .collect();
        let started = Instant::now();
        let workers: Vec<_> = (0..world)
            .map(|rank| {
                std::thread::spawn(move || {
                    let mut c = connect(addr, rank, world, 7).unwrap();
                    let joined = started.elapsed();
                    let mut v = vec![f32::from(rank); 3];
                    for _ in 0..3 {
                        c.all_reduce(ReduceOp::Sum, &mut v).unwrap();
                    }
                    (joined, v)
                })
            })
            .collect();
        for w in workers {
            let (joined, v) = w.join().unwrap();
            assert!(joined < HELLO_WAIT, "a worker joined after {joined:?}");
            // 0+1+2+3, then summed twice more.
            assert_eq!(v, vec![6.0 * 16.0; 3]);
        }
        let report = server.join().unwrap().unwrap();
        assert_eq!(report.rounds, 3);
        // The first 48 idle connections made room for newer ones from the same address.
        assert!(
            report.evicted_connections + report.bad_connections >= 48,
            "{report:?}"
        );
        drop((idle, garbage));
    }

    /// A flood of bad connections logs one warning per `COMPLAIN_EVERY`, not one each.
    #[test]
    fn bad_connections_are_warned_about_once_in_a_while() {
        let mut complaints = Complaints::default();
        let logged = (0..1000)
            .filter(|i| complaints.note(format_args!("bad connection {i}")))
            .count();
        assert_eq!(logged, 1);
        assert_eq!(complaints.held, 999);
    }

    /// Every worker of a large job on one host may be saying hello at once: the cap per
    /// address leaves room for twice the job's workers.
    #[test]
    fn the_cap_per_address_fits_the_job() {
        assert_eq!(Pending::for_workers(4).per_ip, PENDING_PER_IP);
        assert_eq!(Pending::for_workers(40).per_ip, 80);
    }

    /// Connections still saying hello are capped per address (the oldest goes) and in all.
    #[test]
    fn pending_connections_are_capped() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut pending = Pending::for_workers(0);
        let mut evicted = 0;
        let mut kept = Vec::new();
        for _ in 0..PENDING_PER_IP + 5 {
            let client = TcpStream::connect(addr).unwrap();
            let (server_side, from) = listener.accept().unwrap();
            evicted += pending.make_room(from);
            let id = pending.next_id();
            pending.add(id, from, server_side);
            kept.push(client);
        }
        assert_eq!(evicted, 5);
        assert_eq!(pending.waiting.len(), PENDING_PER_IP);
        // The oldest five were shut down: their clients read the end of the stream.
        for (i, mut c) in kept.into_iter().enumerate() {
            c.set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
            let closed = matches!(c.read(&mut [0u8; 1]), Ok(0));
            assert_eq!(closed, i < 5, "connection {i}");
        }
    }

    /// With a secret, a worker without it (or with another) is refused by name and never
    /// adds to the sums; one with it joins.
    #[test]
    fn a_secret_keeps_strangers_out_of_the_sums() {
        let secret = Secret::new(b"the job's secret, long enough".to_vec()).unwrap();
        let cfg = ServiceConfig {
            job: 3,
            world: 1,
            join: Duration::from_secs(10),
            idle: Duration::from_secs(10),
            secret: Some(secret.clone()),
        };
        let s = CollectiveService::bind("127.0.0.1:0".parse().unwrap(), cfg).unwrap();
        let addr = s.local_addr().unwrap();
        let server = s.spawn(Arc::new(AtomicBool::new(false)));
        let other = Secret::new(b"a stranger's guess, long enough".to_vec()).unwrap();
        for stranger in [None, Some(other)] {
            let who = Member {
                job: 3,
                rank: 0,
                world: 1,
                agreement: 0,
                secret: stranger,
            };
            let err = CollectiveClient::connect(
                addr,
                &who,
                Duration::from_secs(5),
                Duration::from_secs(5),
            )
            .unwrap_err();
            assert!(
                matches!(&err, CollectiveError::Refused { reason, .. } if reason.contains("does not verify")),
                "{err}"
            );
        }
        let who = Member {
            job: 3,
            rank: 0,
            world: 1,
            agreement: 0,
            secret: Some(secret),
        };
        let mut c =
            CollectiveClient::connect(addr, &who, Duration::from_secs(5), Duration::from_secs(5))
                .unwrap();
        assert_eq!(c.max(2.5).unwrap(), 2.5);
        drop(c);
        let report = server.join().unwrap().unwrap();
        assert_eq!(report.rounds, 1);
    }

    /// Sums and maxima come back identical to every worker, in any arrival order.
    #[test]
    fn sums_and_maxima_reach_every_worker() {
        let world = 3u16;
        let (addr, server) = service(world);
        let workers: Vec<_> = (0..world)
            .map(|rank| {
                std::thread::spawn(move || {
                    // Join in reverse order to show that rank, not arrival, orders the sum.
                    std::thread::sleep(Duration::from_millis(20 * u64::from(world - rank)));
                    let mut c = connect(addr, rank, world, 7).unwrap();
                    let r = f32::from(rank);
                    let mut v = vec![r, 0.1 * r, -r, 1e-8];
                    c.all_reduce(ReduceOp::Sum, &mut v).unwrap();
                    let m = c.max(r * 2.0 - 3.0).unwrap();
                    (v, m)
                })
            })
            .collect();
        let results: Vec<_> = workers.into_iter().map(|w| w.join().unwrap()).collect();
        for (v, m) in &results {
            assert_eq!(v, &results[0].0, "every worker holds the same bits");
            assert_eq!(v[0], 3.0);
            assert_eq!(v[2], -3.0);
            // Summed in f64, rounded once.
            let tenth = |r: f32| f64::from(0.1 * r);
            assert_eq!(v[1], (tenth(1.0) + tenth(2.0)) as f32);
            assert_eq!(v[3], (3.0 * f64::from(1e-8f32)) as f32);
            assert_eq!(*m, 1.0);
        }
        let report = server.join().unwrap().unwrap();
        assert_eq!(report.rounds, 2);
        assert_eq!(report.values_in, 3 * 5);
    }

    /// Two jobs at one address: each job's rounds sum its own workers only, one job's round
    /// never waits for the other's workers, and a hello for a job the service does not run is
    /// refused by name.
    #[test]
    fn jobs_sharing_the_service_sum_apart() {
        let cfg = |job, world| ServiceConfig {
            job,
            world,
            join: Duration::from_secs(10),
            idle: Duration::from_secs(10),
            secret: None,
        };
        let s = CollectiveService::bind_jobs(
            "127.0.0.1:0".parse().unwrap(),
            vec![(cfg(3, 2), None), (cfg(4, 3), None)],
        )
        .unwrap();
        let addr = s.local_addr().unwrap();
        let server = s.spawn(Arc::new(AtomicBool::new(false)));
        let member = |job, rank, world| Member {
            job,
            rank,
            world,
            agreement: 0,
            secret: None,
        };
        let wait = Duration::from_secs(10);
        let err = CollectiveClient::connect(addr, &member(9, 0, 2), wait, wait).unwrap_err();
        assert!(
            matches!(&err, CollectiveError::Refused { reason, .. } if reason.contains("runs jobs 3, 4")),
            "{err}"
        );
        // Job 4 finishes three rounds while job 3's worker 1 has not even connected.
        let job4: Vec<_> = (0..3u16)
            .map(|rank| {
                std::thread::spawn(move || {
                    let mut c =
                        CollectiveClient::connect(addr, &member(4, rank, 3), wait, wait).unwrap();
                    (0..3)
                        .map(|round| {
                            let mut v = vec![f32::from(rank) + round as f32];
                            c.all_reduce(ReduceOp::Sum, &mut v).unwrap();
                            v[0]
                        })
                        .collect::<Vec<f32>>()
                })
            })
            .collect();
        let early = std::thread::spawn(move || {
            let mut c = CollectiveClient::connect(addr, &member(3, 0, 2), wait, wait).unwrap();
            let mut v = vec![100.0];
            c.all_reduce(ReduceOp::Sum, &mut v).unwrap();
            v[0]
        });
        for w in job4 {
            assert_eq!(w.join().unwrap(), vec![3.0, 6.0, 9.0]);
        }
        let mut late = CollectiveClient::connect(addr, &member(3, 1, 2), wait, wait).unwrap();
        let mut v = vec![1.0];
        late.all_reduce(ReduceOp::Sum, &mut v).unwrap();
        assert_eq!(v[0], 101.0);
        assert_eq!(early.join().unwrap(), 101.0);
        drop(late);
        let report = server.join().unwrap().unwrap();
        assert_eq!(report.rounds, 3 + 1);
        assert_eq!(report.values_in, 3 * 3 + 2);
    }

    #[test]
    fn workers_with_other_settings_are_refused() {
        let (addr, server) = service(2);
        let a = std::thread::spawn(move || connect(addr, 0, 2, 1));
        std::thread::sleep(Duration::from_millis(50));
        match connect(addr, 1, 2, 2) {
            Err(CollectiveError::Refused { reason, .. }) => {
                assert!(reason.contains("other settings"), "{reason}")
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        // A second worker 0 is refused too; then the right worker 1 completes the job.
        match connect(addr, 0, 2, 1) {
            Err(CollectiveError::Refused { reason, .. }) => {
                assert!(reason.contains("already connected"), "{reason}")
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        let b = connect(addr, 1, 2, 1).unwrap();
        let a = a.join().unwrap().unwrap();
        drop((a, b));
        assert_eq!(server.join().unwrap().unwrap().rounds, 0);
    }

    /// A worker that dies mid-job ends the round for everyone with its name.
    #[test]
    fn a_lost_worker_fails_the_others() {
        let (addr, server) = service(2);
        let a = std::thread::spawn(move || {
            let mut c = connect(addr, 0, 2, 0).unwrap();
            let mut v = [1.0f32; 4];
            c.all_reduce(ReduceOp::Sum, &mut v)
        });
        let b = connect(addr, 1, 2, 0).unwrap();
        drop(b);
        let err = a.join().unwrap().unwrap_err().to_string();
        assert!(err.contains("worker 1"), "{err}");
        let err = server.join().unwrap().unwrap_err().to_string();
        assert!(err.contains("worker 1"), "{err}");
    }

    /// With the switch's liveness table, a round waits for a worker as long as the switch
    /// hears from it — far past `idle` — and names it once it falls silent.
    #[test]
    fn a_live_worker_is_waited_for_and_a_silent_one_named() {
        let world = 2;
        let cfg = ServiceConfig {
            job: 3,
            world,
            join: Duration::from_secs(10),
            idle: Duration::from_millis(100),
            secret: None,
        };
        let liveness = Arc::new(Liveness::new(world, Duration::from_millis(300)));
        let service = CollectiveService::bind("127.0.0.1:0".parse().unwrap(), cfg)
            .unwrap()
            .with_liveness(liveness.clone());
        let addr = service.local_addr().unwrap();
        let server = service.spawn(Arc::new(AtomicBool::new(false)));
        // The switch hears both workers until `quiet` is set, then only worker 0.
        let quiet = Arc::new(AtomicBool::new(false));
        let hearing = {
            let (liveness, quiet) = (liveness.clone(), quiet.clone());
            std::thread::spawn(move || {
                for _ in 0..200 {
                    liveness.heard(0, Instant::now());
                    if !quiet.load(Ordering::Relaxed) {
                        liveness.heard(1, Instant::now());
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            })
        };
        let slow = std::thread::spawn(move || {
            let mut c = connect(addr, 1, world, 0).unwrap();
            // Ten times the service's idle time computing, then a round.
            std::thread::sleep(Duration::from_secs(1));
            c.all_reduce(ReduceOp::Sum, &mut [2.0f32]).unwrap();
            c
        });
        let mut fast = connect(addr, 0, world, 0).unwrap();
        let mut v = [1.0f32];
        fast.all_reduce(ReduceOp::Sum, &mut v).unwrap();
        assert_eq!(v, [3.0]);
        let slow = slow.join().unwrap();
        // Worker 1 falls silent (alive but unheard: a hung process) and sends nothing.
        quiet.store(true, Ordering::Relaxed);
        let err = fast
            .all_reduce(ReduceOp::Sum, &mut v)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("worker 1") && err.contains("heard nothing"),
            "{err}"
        );
        drop(slow);
        hearing.join().unwrap();
        let err = server.join().unwrap().unwrap_err().to_string();
        assert!(err.contains("worker 1"), "{err}");
    }

    #[test]
    fn disagreeing_rounds_are_an_error() {
        let (addr, server) = service(2);
        let a = std::thread::spawn(move || {
            let mut c = connect(addr, 0, 2, 0).unwrap();
            c.all_reduce(ReduceOp::Sum, &mut [1.0f32; 4])
        });
        let mut b = connect(addr, 1, 2, 0).unwrap();
        let err = b.all_reduce(ReduceOp::Sum, &mut [1.0f32; 3]).unwrap_err();
        assert!(err.to_string().contains("disagree"), "{err}");
        assert!(a.join().unwrap().is_err());
        assert!(server.join().unwrap().is_err());
    }
}

//! The parameter server beside the switch: it gathers each round's vectors from every worker
//! of a job, reduces them in rank order and answers every worker with the same result.

use std::io::{self, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::admission::{greet, Greeted, Pending, Strangers};
use super::frames::{
    addr0, describe, io_err, leaving, proof_parts, read_f32s, read_full, send_error, Hello,
    KEEPALIVE, MAX_COUNT, PROOF_CONTEXT,
};
use super::{CollectiveError, CollectiveReport, ReduceOp, ServiceConfig};
use crate::liveness::Liveness;

/// How often waiting workers hear a keepalive.
pub(super) const KEEPALIVE_EVERY: Duration = Duration::from_secs(1);

/// A service running in its own thread.
#[derive(Debug)]
pub struct RunningService {
    pub(super) stop: Arc<AtomicBool>,
    pub(super) handle: std::thread::JoinHandle<Result<CollectiveReport, CollectiveError>>,
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
    pub(super) jobs: Vec<ServiceJob>,
    pub(super) listener: TcpListener,
}

/// One job the service serves.
#[derive(Debug)]
pub(super) struct ServiceJob {
    pub(super) cfg: ServiceConfig,
    pub(super) liveness: Option<Arc<Liveness>>,
}

/// A job's workers as they connect.
#[derive(Debug)]
pub(super) struct Gathering {
    pub(super) peers: Vec<Option<TcpStream>>,
    /// The first worker's agreement: everyone else's must equal it.
    pub(super) agreement: Option<u64>,
    /// The join deadline, from the first worker's arrival: a switch serving a job that never
    /// trains waits, harmlessly, until it is stopped.
    pub(super) deadline: Option<Instant>,
    /// Every worker connected and the rounds were handed to a thread (or the job failed).
    pub(super) over: bool,
}

impl Gathering {
    pub(super) fn connected(&self) -> usize {
        self.peers.iter().flatten().count()
    }
}

impl CollectiveService {
    /// Listen at `addr` for one job's workers.
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

    /// Where the service listens (the port, when `addr` asked for any).
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
    pub(super) fn accept_all(
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
    pub(super) fn gather(
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
    pub(super) fn admit_one(
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

impl ServiceJob {
    /// Why `hello` (for this job) is refused, if it is.
    pub(super) fn admit(&self, g: &Gathering, nonce: &[u8], hello: &Hello) -> Option<String> {
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
    pub(super) fn run(
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

    pub(super) fn serve(
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
    pub(super) fn patience<'a>(
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

//! A worker's side of the real network: the dataplane's worker control machine (hello,
//! heartbeats, the switch's silence, goodbye) and one sans-IO exchange engine at a time,
//! driven in real time over UDP — packets in, timer expiries at their deadlines, packets out —
//! never waiting without a deadline.
//!
//! Between exchanges the worker computes and reads nothing; a thread of the client keeps
//! running the control machine's timers meanwhile, so its heartbeats go out and a long
//! computation is never taken for a dead worker.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use switchgnn_dataplane::allreduce::{AllReduceConfig, AllReduceEngine, AllReduceError, ReduceOp};
use switchgnn_dataplane::control::{
    Control, Hello, Secret, WorkerControl, WorkerFailure, WorkerState, CONTROL_VERSION,
};
use switchgnn_dataplane::node::Operation;
use switchgnn_dataplane::node::MAX_DATAGRAM_LEN;
use switchgnn_dataplane::{wire, Address, Nanos};
use thiserror::Error;

use crate::job::{Link, Timeouts};
use switchgnn_dataplane::ExchangeKind;
use switchgnn_net::datapath::SideSender;
use switchgnn_net::dpdk::Role;
use switchgnn_net::{EcnCodepoint, Endpoint, EndpointStats, OpenError, Opening, PeerCounters};
use switchgnn_net::{ShimConfig, Transport};

/// How often the heartbeat thread looks at the control machine's timers at most.
const HEARTBEAT_NAP: Duration = Duration::from_millis(50);

/// How a worker reaches its switch and what it tells it in its hello.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// The job's id.
    pub job: u16,
    /// This worker's rank.
    pub rank: u16,
    /// The job's workers.
    pub world: u16,
    /// The exchange the job runs: the switch refuses a worker that says another.
    pub mode: ExchangeKind,
    /// The checksum of the exchange plans: every worker and the switch must hold the same.
    pub plan_checksum: u64,
    /// Where the switch listens.
    pub switch: SocketAddr,
    /// Where a UDP worker binds (port 0: any free port).
    pub bind: SocketAddr,
    /// Join, liveness and protocol timers.
    pub timeouts: Timeouts,
    /// The link's rate, window and MTU.
    pub link: Link,
    /// Faults injected on every send (tests).
    pub faults: ShimConfig,
    /// The datapath: the kernel's UDP stack (bound at `bind`) or DPDK.
    pub transport: Transport,
    /// The job's admission secret, proven when the switch asks.
    pub secret: Option<Secret>,
}

impl WorkerConfig {
    /// Worker `rank` of `job` against the switch at `switch`, presenting `plan_checksum`:
    /// bound at the job's `bind` (default: any address, a free port), with faults of its own.
    pub fn of_job(
        job: &crate::job::JobFile,
        rank: u16,
        plan_checksum: u64,
        switch: SocketAddr,
        secret: Option<Secret>,
    ) -> WorkerConfig {
        WorkerConfig {
            job: job.job,
            rank,
            world: job.world,
            mode: job.mode,
            plan_checksum,
            switch,
            bind: job
                .bind
                .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0))),
            timeouts: job.timeouts,
            link: job.link,
            faults: ShimConfig {
                // Every worker draws its own faults.
                seed: job.faults.seed ^ (u64::from(rank) << 32),
                ..job.faults
            },
            transport: job.transport(),
            secret,
        }
    }
}

/// Why a worker stopped.
#[derive(Debug, Error)]
pub enum WorkerError {
    /// The socket failed.
    #[error("worker socket: {0}")]
    Io(#[from] std::io::Error),
    /// The datapath did not open (an address in use, DPDK's set-up).
    #[error("worker socket: {0}")]
    Open(#[from] OpenError),
    #[error(
        "the switch at {switch} did not answer within {waited:.1?} ({hellos} hellos sent, \
         {received} other packets received); is `switchgnn switch` running there?"
    )]
    /// No welcome came from the switch within the join timeout.
    NoSwitch {
        /// Where the hellos went.
        switch: SocketAddr,
        /// How long the worker waited.
        waited: Duration,
        /// Hellos sent.
        hellos: u32,
        /// Other packets received meanwhile.
        received: u64,
    },
    /// The switch refused the hello (a mismatch, a bad proof).
    #[error("the switch refused worker {rank}: {reason}")]
    Refused {
        /// This worker's rank.
        rank: u16,
        /// The switch's reason.
        reason: String,
    },
    /// The switch aborted the job; its reason.
    #[error("the switch aborted the job: {0}")]
    Aborted(String),
    #[error(
        "the switch at {switch} fell silent for {silent:.1?} during {during} (at {at}; \
         {received} packets received in it)"
    )]
    /// The switch fell silent during an operation.
    SwitchSilent {
        /// The switch's address.
        switch: SocketAddr,
        /// How long nothing came.
        silent: Duration,
        /// The operation (an exchange, an all-reduce).
        during: String,
        /// Where the operation stood: its block, its slices.
        at: String,
        /// Packets received in the operation.
        received: u64,
    },
    /// The caller's stop flag was raised.
    #[error("cancelled")]
    Cancelled,
    #[error(
        "the switch gives this job no all-reduce slots (an older switch, or P4 entries made \
         with --allreduce-slots 0): run the all-reduce over tcp"
    )]
    /// The switch has no all-reduce slots for this job.
    NoAllReduceSlots,
    /// The in-switch all-reduce's engine failed.
    #[error("in-switch all-reduce: {0}")]
    AllReduce(AllReduceError),
    /// The link's MTU is more than the datapath sends.
    #[error(transparent)]
    Mtu(#[from] crate::job::MtuTooLarge),
}

/// Traffic between this worker and the switch, as it crossed the socket.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct WorkerWire {
    /// Traffic with the switch.
    pub to_switch: PeerCounters,
    /// The endpoint's own counters.
    pub endpoint: EndpointStats,
    /// Packets from addresses other than the switch (dropped).
    pub stray: u64,
    /// Control messages that did not parse.
    pub malformed_control: u64,
    /// Times the switch asked this worker to say hello again (a restarted switch).
    pub rejoins: u64,
}

/// A worker connected to a switch process.
#[derive(Debug)]
pub struct WorkerClient {
    cfg: WorkerConfig,
    endpoint: Endpoint,
    epoch: Instant,
    /// The control machine, shared with the heartbeat thread.
    control: Arc<Mutex<WorkerControl>>,
    cancel: Option<Arc<AtomicBool>>,
    stray: u64,
    malformed_control: u64,
    heartbeat: Option<Heartbeat>,
    /// In-switch all-reduces run so far, and the stream position the next one starts at.
    allreduces: u32,
    stream: u32,
}

/// The thread that runs the control machine's timers while the worker computes: its
/// heartbeats leave through the datapath's side sender (a second handle on the UDP socket, or
/// the DPDK send queue under its lock).
#[derive(Debug)]
struct Heartbeat {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<()>,
}

impl Heartbeat {
    fn start(
        mut socket: Box<dyn SideSender>,
        switch: SocketAddr,
        epoch: Instant,
        control: Arc<Mutex<WorkerControl>>,
        quiet: Duration,
    ) -> std::io::Result<Heartbeat> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let nap = (quiet / 4).clamp(Duration::from_millis(1), HEARTBEAT_NAP);
        let handle = std::thread::Builder::new()
            .name("heartbeat".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(nap);
                    let now = epoch.elapsed().as_nanos() as Nanos;
                    let mut c = lock(&control);
                    // The machine acts only on what is due: a heartbeat after a quiet spell.
                    c.handle_timeout(now);
                    while let Some(m) = c.poll_control() {
                        // A failed send is a lost heartbeat, which the timeout allows for.
                        let _ = socket.send_to(&m.encode(), switch);
                    }
                }
            })?;
        Ok(Heartbeat { stop, handle })
    }

    fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.handle.join();
    }
}

/// The control machine, whatever a panicking holder left behind (its state stays consistent:
/// every method leaves it whole).
fn lock(control: &Mutex<WorkerControl>) -> MutexGuard<'_, WorkerControl> {
    control.lock().unwrap_or_else(|e| e.into_inner())
}

impl Drop for WorkerClient {
    fn drop(&mut self) {
        if let Some(h) = self.heartbeat.take() {
            h.stop();
        }
    }
}

impl WorkerClient {
    /// Bind, say hello and wait for the switch's welcome (or refusal) until the join timeout.
    pub fn connect(cfg: WorkerConfig) -> Result<WorkerClient, WorkerError> {
        WorkerClient::connect_capturing(cfg, None)
    }

    /// [`WorkerClient::connect`], recording every datagram from the first hello on in
    /// `capture` (finished when the client is dropped).
    pub fn connect_capturing(
        cfg: WorkerConfig,
        capture: Option<switchgnn_net::capture::Capture>,
    ) -> Result<WorkerClient, WorkerError> {
        let mut endpoint = switchgnn_net::open(
            &cfg.transport,
            &Opening {
                job: cfg.job,
                world: cfg.world,
                role: Role::Worker(cfg.rank),
                bind: cfg.bind,
                switch: cfg.switch,
                faults: cfg.faults,
                recv_buffer: None,
            },
        )?;
        cfg.link
            .fits_datapath(endpoint.max_datagram(), &format!("worker {}", cfg.rank))?;
        if let Some(c) = capture {
            endpoint.capture_to(c);
        }
        // The switch's counters are read through the job; strangers' may be forgotten.
        endpoint.pin(cfg.switch);
        let hello = Hello {
            control_version: CONTROL_VERSION,
            wire_version: wire::VERSION,
            job: cfg.job,
            rank: cfg.rank,
            world: cfg.world,
            mode: cfg.mode.name().to_string(),
            plan_checksum: cfg.plan_checksum,
            proof: None,
        };
        let mut control = WorkerControl::new(hello, cfg.timeouts.control(), 0);
        if let Some(secret) = &cfg.secret {
            control = control.with_secret(secret.clone());
        }
        let mut client = WorkerClient {
            endpoint,
            epoch: Instant::now(),
            control: Arc::new(Mutex::new(control)),
            cancel: None,
            stray: 0,
            malformed_control: 0,
            heartbeat: None,
            allreduces: 0,
            stream: 0,
            cfg,
        };
        loop {
            client.send_control()?;
            let state = lock(&client.control).state().clone();
            match state {
                WorkerState::Joined => break,
                WorkerState::Failed(f) => return Err(client.error(f, "joining", None, 0)),
                _ => {}
            }
            client.control_round()?;
        }
        client.heartbeat = Some(Heartbeat::start(
            client.endpoint.side_sender()?,
            client.cfg.switch,
            client.epoch,
            client.control.clone(),
            client.cfg.timeouts.peer() / 4,
        )?);
        Ok(client)
    }

    /// The data window to run engines with: `configured`, capped by the switch's share of
    /// its receive queue when the welcome advertised one.
    pub fn window(&self, configured: usize) -> usize {
        match usize::try_from(lock(&self.control).window()) {
            Ok(0) | Err(_) => configured,
            Ok(w) => configured.min(w),
        }
    }

    /// The all-reduce slots the switch gives the job (its welcome says; 0: none).
    pub fn allreduce_slots(&self) -> u16 {
        lock(&self.control).allreduce_slots()
    }

    /// Combine int32 `values` with every other worker's (`op`) in the switch's all-reduce slots
    /// (as many as its welcome advertised); the finished engine, for its output and counters.
    /// The client keeps the job's stream position: every worker runs the same all-reduces in
    /// the same order, so they agree on the positions without talking.
    pub fn all_reduce(
        &mut self,
        op: ReduceOp,
        values: Vec<i32>,
    ) -> Result<AllReduceEngine, WorkerError> {
        let slots = self.allreduce_slots();
        if slots == 0 {
            return Err(WorkerError::NoAllReduceSlots);
        }
        let cfg = AllReduceConfig {
            job: self.cfg.job,
            rank: self.cfg.rank,
            slots,
            op,
            operation: self.allreduces,
            start: self.stream,
            rto: self.cfg.timeouts.protocol().rto,
        };
        let during = format!(
            "all-reduce {} ({op:?} of {} values)",
            self.allreduces,
            values.len()
        );
        let mut engine = AllReduceEngine::new(cfg, values);
        self.allreduces += 1;
        // Whatever happens, the next operation starts after this one's slices, as everyone's.
        self.stream = engine.end();
        self.run(&mut engine, &during)?;
        match engine.failure() {
            Some(e) => Err(WorkerError::AllReduce(e)),
            None => Ok(engine),
        }
    }

    /// Whether engines keep a congestion window (the job's link setting).
    pub fn congestion_window(&self) -> bool {
        self.cfg.link.congestion_window
    }

    /// A flag that makes a running exchange return [`WorkerError::Cancelled`].
    pub fn set_cancel(&mut self, flag: Arc<AtomicBool>) {
        self.cancel = Some(flag);
    }

    /// The driver's clock, to create engines with.
    pub fn now(&self) -> Nanos {
        self.epoch.elapsed().as_nanos() as Nanos
    }

    fn instant(&self, t: Nanos) -> Instant {
        self.epoch + Duration::from_nanos(t)
    }

    /// Send what the control machine has queued.
    fn send_control(&mut self) -> std::io::Result<()> {
        let switch = self.cfg.switch;
        let mut c = lock(&self.control);
        while let Some(m) = c.poll_control() {
            self.endpoint.send(switch, None, m.encode());
        }
        drop(c);
        self.endpoint.flush()
    }

    /// Outside an exchange: wait for the control machine's next deadline or a datagram, take
    /// what arrived, and run the timers that are due.
    fn control_round(&mut self) -> std::io::Result<()> {
        let due = lock(&self.control).poll_timeout();
        self.endpoint.wait(due.map(|t| self.instant(t)))?;
        self.receive(None)?;
        let t = self.now();
        // The machine acts only on what is due at `t`.
        lock(&self.control).handle_timeout(t);
        Ok(())
    }

    /// Read what has arrived: control messages to the control machine, dataplane packets to
    /// `engine` (dropped when there is none).
    fn receive(&mut self, mut engine: Option<&mut dyn Operation>) -> std::io::Result<()> {
        let switch = self.cfg.switch;
        let t = self.now();
        let (mut stray, mut malformed) = (0, 0);
        let mut c = lock(&self.control);
        self.endpoint.recv(|d| {
            if d.from != switch {
                stray += 1;
                return;
            }
            c.heard(t);
            match Control::decode(d.bytes) {
                Some(Ok(m)) => c.handle_control(t, m),
                Some(Err(_)) => malformed += 1,
                None => {
                    if let Some(e) = engine.as_deref_mut() {
                        e.handle_packet(t, Address::Switch, d.bytes);
                    }
                }
            }
        })?;
        self.stray += stray;
        self.malformed_control += malformed;
        Ok(())
    }

    /// The worker error for a control failure; `during` and `engine` say what it was doing.
    fn error(
        &self,
        failure: WorkerFailure,
        during: &str,
        engine: Option<&dyn Operation>,
        received: u64,
    ) -> WorkerError {
        let switch = self.cfg.switch;
        match failure {
            WorkerFailure::NoSwitch { waited, hellos } => WorkerError::NoSwitch {
                switch,
                waited: Duration::from_nanos(waited),
                hellos,
                received: self.endpoint.peer(&switch).packets_received,
            },
            WorkerFailure::Refused { reason } => WorkerError::Refused {
                rank: self.cfg.rank,
                reason,
            },
            WorkerFailure::Aborted { reason } => WorkerError::Aborted(reason),
            WorkerFailure::SwitchSilent { silent } => WorkerError::SwitchSilent {
                switch,
                silent: Duration::from_nanos(silent),
                during: during.to_string(),
                at: engine.map_or("nothing running".into(), |e| e.progress()),
                received,
            },
        }
    }

    /// Run `engine` until its exchange is complete. `during` names the exchange in errors.
    pub fn run(&mut self, engine: &mut dyn Operation, during: &str) -> Result<(), WorkerError> {
        // Between exchanges the caller computes (a training step) and reads nothing; what the
        // switch sent meanwhile waits in the socket. The switch's silence counts from here.
        lock(&self.control).listen(self.now(), true);
        let outcome = self.drive(engine, during);
        lock(&self.control).listen(self.now(), false);
        outcome
    }

    fn drive(&mut self, engine: &mut dyn Operation, during: &str) -> Result<(), WorkerError> {
        let switch = self.cfg.switch;
        let received_before = self.endpoint.peer(&switch).packets_received;
        let mut buf = [0u8; MAX_DATAGRAM_LEN];
        loop {
            let t = self.now();
            let mut sent = false;
            while let Some(out) = engine.poll_transmit(t, &mut buf) {
                debug_assert_eq!(out.to, Address::Switch);
                let bytes = self.endpoint.buffer(&buf[..out.len]);
                self.endpoint.send(switch, Some(EcnCodepoint::Ect0), bytes);
                sent = true;
            }
            if sent {
                lock(&self.control).note_sent(t);
            }
            self.send_control()?;
            if engine.is_finished() {
                return Ok(());
            }
            if self
                .cancel
                .as_ref()
                .is_some_and(|c| c.load(Ordering::Relaxed))
            {
                return Err(WorkerError::Cancelled);
            }
            let mut failure = lock(&self.control).failure().cloned();
            if let Some(WorkerFailure::SwitchSilent { .. }) = failure {
                // Silence judged after a pause (the process was stopped, or starved): what the
                // switch said meanwhile may wait in the socket, an abort naming the cause.
                self.receive(None)?;
                failure = lock(&self.control).failure().cloned();
            }
            if let Some(f) = failure {
                let received = self.endpoint.peer(&switch).packets_received - received_before;
                return Err(self.error(f, during, Some(&*engine), received));
            }
            let control_due = lock(&self.control).poll_timeout();
            let deadline = [engine.poll_timeout(), control_due]
                .into_iter()
                .flatten()
                .min()
                .map(|t| self.instant(t));
            self.endpoint.wait(deadline)?;
            self.receive(Some(&mut *engine))?;
            let t = self.now();
            lock(&self.control).handle_timeout(t);
            if engine.poll_timeout().is_some_and(|d| d <= t) {
                engine.handle_timeout(t);
            }
        }
    }

    /// Say goodbye (a few tries; the switch may already be gone) and report the traffic.
    pub fn finish(mut self) -> Result<WorkerWire, WorkerError> {
        if let Some(h) = self.heartbeat.take() {
            h.stop();
        }
        lock(&self.control).leave(self.now());
        loop {
            self.send_control()?;
            if !matches!(lock(&self.control).state(), WorkerState::Leaving) {
                break;
            }
            self.control_round()?;
        }
        Ok(self.wire())
    }

    /// The traffic so far (the kernel's drop count read now).
    pub fn wire(&mut self) -> WorkerWire {
        // Refresh the socket's drop count (the kernel's figure).
        self.endpoint.backlog();
        let c = lock(&self.control);
        WorkerWire {
            to_switch: self.endpoint.peer(&self.cfg.switch),
            endpoint: self.endpoint.stats().clone(),
            stray: self.stray,
            malformed_control: self.malformed_control + c.unexpected(),
            rejoins: c.rejoins(),
        }
    }
}

//! A worker's side of the real network: the handshake with the switch process, then a
//! real-time driver that runs one sans-IO exchange engine at a time over UDP — packets in,
//! timer expiries at their deadlines, packets out — and never waits without a deadline.
//!
//! Between exchanges the worker computes and reads nothing; a thread of the client keeps
//! sending heartbeats meanwhile, so a long computation is never taken for a dead worker.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use switchgnn_dataplane::engine::Exchange;
use switchgnn_dataplane::{wire, Address, Nanos};
use thiserror::Error;

use crate::control::{Control, Hello, CONTROL_VERSION};
use crate::job::{Link, Timeouts};
use crate::socket::{EcnCodepoint, Endpoint, EndpointStats, PeerCounters, ShimConfig};
use switchgnn_dataplane::ExchangeKind;

/// Hello repetition while waiting for the switch.
const HELLO_EVERY: Duration = Duration::from_millis(100);

#[derive(Debug, Clone)]
pub struct WorkerConfig {
    pub job: u16,
    pub rank: u16,
    pub world: u16,
    pub mode: ExchangeKind,
    pub plan_checksum: u64,
    pub switch: SocketAddr,
    pub bind: SocketAddr,
    pub timeouts: Timeouts,
    pub link: Link,
    pub faults: ShimConfig,
}

#[derive(Debug, Error)]
pub enum WorkerError {
    #[error("worker socket: {0}")]
    Io(#[from] std::io::Error),
    #[error(
        "the switch at {switch} did not answer within {waited:.1?} ({hellos} hellos sent, \
         {received} other packets received); is `switchgnn switch` running there?"
    )]
    NoSwitch {
        switch: SocketAddr,
        waited: Duration,
        hellos: u32,
        received: u64,
    },
    #[error("the switch refused worker {rank}: {reason}")]
    Refused { rank: u16, reason: String },
    #[error("the switch aborted the job: {0}")]
    Aborted(String),
    #[error(
        "the switch at {switch} fell silent for {silent:.1?} during {during} (block {block}; \
         {received} packets received in this exchange)"
    )]
    SwitchSilent {
        switch: SocketAddr,
        silent: Duration,
        during: String,
        block: String,
        received: u64,
    },
    #[error("cancelled")]
    Cancelled,
}

/// Traffic between this worker and the switch, as it crossed the socket.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct WorkerWire {
    pub to_switch: PeerCounters,
    pub endpoint: EndpointStats,
    /// Packets from addresses other than the switch (dropped).
    pub stray: u64,
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
    last_heard: Instant,
    /// When this worker last sent anything (milliseconds since `epoch`), shared with the
    /// heartbeat thread.
    last_sent: Arc<AtomicU64>,
    last_hello: Instant,
    cancel: Option<Arc<AtomicBool>>,
    stray: u64,
    malformed_control: u64,
    rejoins: u64,
    /// The window the switch's welcome advertised (0: none).
    switch_window: u64,
    heartbeat: Option<Heartbeat>,
}

/// The thread that says "alive" while the worker computes.
#[derive(Debug)]
struct Heartbeat {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<()>,
}

impl Heartbeat {
    /// Send a heartbeat from `socket` to `switch` whenever nothing was sent for `quiet`.
    fn start(
        socket: std::net::UdpSocket,
        switch: SocketAddr,
        epoch: Instant,
        last_sent: Arc<AtomicU64>,
        quiet: Duration,
    ) -> std::io::Result<Heartbeat> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let bytes = Control::Heartbeat.encode();
        let nap = (quiet / 4).clamp(Duration::from_millis(1), Duration::from_millis(50));
        let handle = std::thread::Builder::new()
            .name("heartbeat".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(nap);
                    let now = epoch.elapsed().as_millis() as u64;
                    if now.saturating_sub(last_sent.load(Ordering::Relaxed))
                        >= quiet.as_millis() as u64
                    {
                        // UDP: a failed send is a lost heartbeat, which the timeout allows for.
                        let _ = socket.send_to(&bytes, switch);
                        last_sent.fetch_max(now, Ordering::Relaxed);
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
        let endpoint = Endpoint::bind(cfg.bind, cfg.faults)?;
        let now = Instant::now();
        let mut client = WorkerClient {
            endpoint,
            epoch: now,
            last_heard: now,
            last_sent: Arc::new(AtomicU64::new(0)),
            last_hello: now,
            cancel: None,
            stray: 0,
            malformed_control: 0,
            rejoins: 0,
            switch_window: 0,
            heartbeat: None,
            cfg,
        };
        let deadline = now + client.cfg.timeouts.join();
        let mut hellos = 0;
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Err(WorkerError::NoSwitch {
                    switch: client.cfg.switch,
                    waited: now.duration_since(client.epoch),
                    hellos,
                    received: client.endpoint.peer(&client.cfg.switch).packets_received,
                });
            }
            client.send_control(Control::Hello(client.hello()), now);
            hellos += 1;
            client.endpoint.flush()?;
            let until = (now + HELLO_EVERY).min(deadline);
            while Instant::now() < until {
                client.endpoint.wait(Some(until))?;
                let mut reply = None;
                let switch = client.cfg.switch;
                client.endpoint.recv(|d| {
                    if d.from == switch {
                        if let Some(Ok(m)) = Control::decode(d.bytes) {
                            if matches!(m, Control::Welcome { .. } | Control::Refuse { .. }) {
                                reply = Some(m);
                            }
                        }
                    }
                })?;
                match reply {
                    Some(Control::Welcome { window, .. }) => {
                        client.last_heard = Instant::now();
                        client.switch_window = window;
                        client.heartbeat = Some(Heartbeat::start(
                            client.endpoint.side_sender()?,
                            client.cfg.switch,
                            client.epoch,
                            client.last_sent.clone(),
                            client.cfg.timeouts.peer() / 4,
                        )?);
                        return Ok(client);
                    }
                    Some(Control::Refuse { reason }) => {
                        return Err(WorkerError::Refused {
                            rank: client.cfg.rank,
                            reason,
                        })
                    }
                    _ => {}
                }
            }
        }
    }

    /// The data window to run engines with: `configured`, capped by the switch's share of
    /// its receive queue when the welcome advertised one.
    pub fn window(&self, configured: usize) -> usize {
        match usize::try_from(self.switch_window) {
            Ok(0) | Err(_) => configured,
            Ok(w) => configured.min(w),
        }
    }

    /// Whether engines keep a congestion window (the job's link setting).
    pub fn congestion_window(&self) -> bool {
        self.cfg.link.congestion_window
    }

    fn note_sent(&self) {
        let ms = self.epoch.elapsed().as_millis() as u64;
        self.last_sent.fetch_max(ms, Ordering::Relaxed);
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

    fn hello(&self) -> Hello {
        Hello {
            control_version: CONTROL_VERSION,
            wire_version: wire::VERSION,
            job: self.cfg.job,
            rank: self.cfg.rank,
            world: self.cfg.world,
            mode: self.cfg.mode.name().to_string(),
            plan_checksum: self.cfg.plan_checksum,
        }
    }

    fn send_control(&mut self, m: Control, now: Instant) {
        if matches!(m, Control::Hello(_)) {
            self.last_hello = now;
        }
        self.endpoint.send(self.cfg.switch, None, m.encode());
        self.note_sent();
    }

    /// Run `engine` until its exchange is complete. `during` names the exchange in errors.
    pub fn run(&mut self, engine: &mut dyn Exchange, during: &str) -> Result<(), WorkerError> {
        let switch = self.cfg.switch;
        let peer_timeout = self.cfg.timeouts.peer();
        let received_before = self.endpoint.peer(&switch).packets_received;
        // Between exchanges the caller computes (a training step) and reads nothing; what the
        // switch sent meanwhile waits in the socket. Silence counts from here.
        self.last_heard = Instant::now();
        loop {
            let now = Instant::now();
            let t = self.now();
            let mut buf = [0u8; wire::MAX_PACKET_LEN];
            while let Some(out) = engine.poll_transmit(t, &mut buf) {
                debug_assert_eq!(out.to, Address::Switch);
                self.endpoint
                    .send(switch, Some(EcnCodepoint::Ect0), buf[..out.len].to_vec());
                self.note_sent();
            }
            self.endpoint.flush()?;
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
            let silent = now.duration_since(self.last_heard);
            if silent > peer_timeout {
                return Err(WorkerError::SwitchSilent {
                    switch,
                    silent,
                    during: during.to_string(),
                    block: engine
                        .running_block()
                        .map_or("none (joining)".into(), |b| b.to_string()),
                    received: self.endpoint.peer(&switch).packets_received - received_before,
                });
            }
            let engine_due = engine.poll_timeout().map(|t| self.instant(t));
            let housekeeping = now + peer_timeout / 8;
            let deadline = engine_due.map_or(housekeeping, |d| d.min(housekeeping));
            self.endpoint.wait(Some(deadline))?;

            let mut control = Vec::new();
            let mut stray = 0;
            let t = self.now();
            let heard = {
                let mut heard = false;
                self.endpoint.recv(|d| {
                    if d.from != switch {
                        stray += 1;
                        return;
                    }
                    heard = true;
                    match Control::decode(d.bytes) {
                        Some(m) => control.push(m),
                        None => engine.handle_packet(t, Address::Switch, d.bytes),
                    }
                })?;
                heard
            };
            let now = Instant::now();
            self.stray += stray;
            if heard {
                self.last_heard = now;
            }
            for m in control {
                match m {
                    Ok(Control::Abort { reason }) => return Err(WorkerError::Aborted(reason)),
                    Ok(Control::Refuse { reason }) => {
                        return Err(WorkerError::Refused {
                            rank: self.cfg.rank,
                            reason,
                        })
                    }
                    Ok(Control::Unknown) => {
                        // A restarted switch: join it again (at most one hello per 50 ms).
                        if now.duration_since(self.last_hello) > Duration::from_millis(50) {
                            self.rejoins += 1;
                            self.send_control(Control::Hello(self.hello()), now);
                        }
                    }
                    Ok(_) => {}
                    Err(_) => self.malformed_control += 1,
                }
            }
            let t = self.now();
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
        let switch = self.cfg.switch;
        for _ in 0..5 {
            self.send_control(
                Control::Bye {
                    rank: self.cfg.rank,
                },
                Instant::now(),
            );
            self.endpoint.flush()?;
            let until = Instant::now() + HELLO_EVERY;
            let mut acked = false;
            while !acked && Instant::now() < until {
                self.endpoint.wait(Some(until))?;
                self.endpoint.recv(|d| {
                    if d.from == switch
                        && matches!(Control::decode(d.bytes), Some(Ok(Control::ByeAck)))
                    {
                        acked = true;
                    }
                })?;
            }
            if acked {
                break;
            }
        }
        Ok(self.wire())
    }

    pub fn wire(&mut self) -> WorkerWire {
        // Refresh the socket's drop count (the kernel's figure).
        self.endpoint.backlog();
        WorkerWire {
            to_switch: self.endpoint.peer(&self.cfg.switch),
            endpoint: self.endpoint.stats().clone(),
            stray: self.stray,
            malformed_control: self.malformed_control,
            rejoins: self.rejoins,
        }
    }
}

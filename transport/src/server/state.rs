//! The switch process's state apart from its socket: the egress queues, the jobs served, the
//! switch model and a leaf's uplink, and how each received datagram and control message moves
//! them. The driver in the parent module lends it the endpoint's received datagrams.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use switchgnn_dataplane::control::{Admission, Control, SwitchControl, WorkerControl};
use switchgnn_dataplane::link::{ceil_nanos, to_picos, Port};
use switchgnn_dataplane::switch::ShardedSwitch;
use switchgnn_dataplane::{wire, Address, Nanos, Node};
use switchgnn_net::{Datagram, EcnCodepoint, Endpoint, RxBacklog};

use super::config::ServerConfig;
use super::report::IngressReport;
use crate::job::{Link, Timeouts};
use crate::liveness::Liveness;

/// Bytes an egress queue holds before it drops (a shallow-buffered switch port).
pub(super) const EGRESS_BUFFER: u64 = 4 << 20;
/// How often the driver wakes to check timeouts when nothing else happens.
pub(super) const TICK: Duration = Duration::from_millis(20);
/// The receive backlog marks congestion above this fraction of the receive buffer: early
/// enough that the senders' cut takes effect (one round trip, itself this backlog's delay)
/// long before the buffer is full.
pub(super) const BACKLOG_MARK_FRACTION: u64 = 8;
/// An egress port releases its packets up to this long before the link model says they have
/// left, and is woken when half of that is due: the process sends a port's packets in
/// batches (one segmentation-offload send each) instead of one per wake-up, as a NIC's
/// queue takes a burst and drains it at the link rate. The emulated rate holds on average.
pub(super) const EGRESS_SEND_AHEAD: Nanos = 50_000;
/// One egress port: the dataplane's link model decides when each packet has left at the
/// link rate; the packets wait here until then.
#[derive(Debug)]
pub(super) struct Egress {
    pub(super) port: Port,
    /// Packets and when they have left (nanoseconds since the switch started).
    pub(super) queue: VecDeque<(Nanos, Vec<u8>)>,
}

impl Egress {
    pub(super) fn new(link: &Link) -> Egress {
        Egress {
            port: Port::new(link.gbps, 0, EGRESS_BUFFER),
            queue: VecDeque::new(),
        }
    }

    /// When the process should next wake for this port: once half of [`EGRESS_SEND_AHEAD`]
    /// before its first packet leaves (`None`: nothing queued).
    pub(super) fn wake_at(&self) -> Option<Nanos> {
        let &(left, _) = self.queue.front()?;
        Some(left.saturating_sub(EGRESS_SEND_AHEAD / 2))
    }

    /// Send to `to` every packet that has left by `t` (nanoseconds), or will within
    /// [`EGRESS_SEND_AHEAD`], marked congestion-experienced while the queue is above
    /// `threshold` bytes: whether any left.
    pub(super) fn drain(
        &mut self,
        t: Nanos,
        threshold: u64,
        to: SocketAddr,
        endpoint: &mut Endpoint,
    ) -> bool {
        let now_ps = to_picos(t);
        let mut sent = false;
        let until = t.saturating_add(EGRESS_SEND_AHEAD);
        while self.queue.front().is_some_and(|&(left, _)| left <= until) {
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
pub(super) struct Served {
    /// The switch port of its worker 0.
    pub(super) first_port: u16,
    pub(super) timeouts: Timeouts,
    /// Admission, heartbeats, liveness, abort and drain: the dataplane's control machine.
    pub(super) control: SwitchControl<SocketAddr>,
    /// When the switch last heard each worker: for the collective service beside it.
    pub(super) liveness: Arc<Liveness>,
}

impl Served {
    pub(super) fn job(&self) -> u16 {
        self.control.config().job
    }

    /// Whether the job is over: every worker left, its drain ended, or it failed.
    pub(super) fn is_over(&self, now: Nanos) -> bool {
        self.control.is_finished(now) || self.control.failure().is_some()
    }
}

/// Everything but the socket, so that received datagrams can be handled while the endpoint
/// lends its buffers.
#[derive(Debug)]
pub(super) struct Core {
    pub(super) cfg: ServerConfig,
    /// The switch model; a receive round's dataplane packets fill its batch, handed to its
    /// cores at the round's end.
    pub(super) switch: ShardedSwitch,
    /// The jobs, in the order their ports were given out.
    pub(super) jobs: Vec<Served>,
    /// Per switch port: the job (an index into `jobs`) and the rank of the worker on it.
    pub(super) ports: Vec<(usize, u16)>,
    pub(super) epoch: Instant,
    pub(super) egress: Vec<Egress>,
    pub(super) malformed_control: u64,
    pub(super) egress_drops: u64,
    pub(super) peak_egress_bytes: u64,
    pub(super) ingress: IngressReport,
    /// A leaf's link to its spine.
    pub(super) uplink: Option<Uplink>,
}

/// A leaf switch's side of its link to the spine: the spine's address, the leaf's control
/// plane towards it (the leaf is the spine's worker for its rack) and the egress queue up.
#[derive(Debug)]
pub(super) struct Uplink {
    pub(super) spine: SocketAddr,
    pub(super) control: WorkerControl,
    pub(super) egress: Egress,
}

impl Core {
    /// A switch process's state at its start: `owners` gives each port's (job, rank), one
    /// egress queue per port; `ingress` is the receive buffer's size and the window the
    /// welcomes advertise.
    pub(super) fn new(
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

    pub(super) fn nanos(&self, now: Instant) -> u64 {
        now.duration_since(self.epoch).as_nanos() as u64
    }

    /// After a receive round of `n` datagrams that took `busy`: read how deep the socket's
    /// backlog is, and mark congestion while it is deep. Without the kernel's figures, a
    /// round that stopped before the socket was drained stands for a deep backlog.
    pub(super) fn on_backlog(
        &mut self,
        backlog: Option<RxBacklog>,
        n: usize,
        busy: Duration,
        drained: bool,
    ) {
        self.ingress.rounds += 1;
        self.ingress.datagrams += n as u64;
        if n > 0 {
            self.ingress.busy_s += busy.as_secs_f64();
        }
        let deep = match backlog {
            Some(b) => {
                self.note_backlog(b);
                b.queued_bytes > b.buffer_bytes / BACKLOG_MARK_FRACTION
            }
            None => !drained,
        };
        let congested = deep && self.cfg.overload.backlog_signal;
        self.ingress.congested_rounds += u64::from(congested);
        self.switch.set_ingress_congested(congested);
    }

    /// Keep the socket's figures from a reading of its receive queue.
    pub(super) fn note_backlog(&mut self, b: RxBacklog) {
        let ingress = &mut self.ingress;
        ingress.peak_backlog_bytes = ingress.peak_backlog_bytes.max(b.queued_bytes);
        ingress.socket_drops = b.drops;
        ingress.buffer_bytes = b.buffer_bytes;
    }

    pub(super) fn next_deadline(&self, now: Instant) -> Instant {
        let egress = self.egress.iter().filter_map(Egress::wake_at);
        let uplink = self.uplink.iter().flat_map(|up| {
            up.egress
                .wake_at()
                .into_iter()
                .chain(up.control.poll_timeout())
        });
        let due = egress
            .chain(self.jobs.iter().filter_map(|j| j.control.poll_timeout()))
            .chain(uplink)
            .min()
            .map(|t| self.epoch + Duration::from_nanos(t));
        due.map_or(now + TICK, |t| t.min(now + TICK))
    }

    /// The job (an index into `jobs`) whose worker is at `addr`, and its rank.
    pub(super) fn member(&self, addr: &SocketAddr) -> Option<(usize, u16)> {
        self.jobs
            .iter()
            .enumerate()
            .find_map(|(i, j)| Some((i, j.control.rank_of(addr)?)))
    }

    pub(super) fn on_datagram(&mut self, now: Instant, d: Datagram<'_>) {
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
    pub(super) fn job_named(&self, job: Option<u16>) -> usize {
        job.and_then(|id| self.jobs.iter().position(|j| j.job() == id))
            .unwrap_or(0)
    }

    /// A control message of `len` bytes: a hello goes to the job it names, anything else to
    /// the job of its sender.
    pub(super) fn on_control(&mut self, now: Instant, from: SocketAddr, m: Control, len: usize) {
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
    pub(super) fn release(&mut self, now: Instant, endpoint: &mut Endpoint) {
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
                    .push_back((ceil_nanos(left), endpoint.buffer(&buf[..out.len]))),
                None => self.egress_drops += 1,
            }
        }
        let threshold = self.cfg.link.ecn_threshold();
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

//! The switch's side of the control plane: which worker is at which address, who has been
//! silent for too long, and whether the job stops making progress.
//!
//! Every wait has a deadline. Workers that have not joined within the join timeout, a worker
//! silent for the peer timeout (workers send heartbeats while they compute), or an exchange
//! that every worker has joined and that makes no progress for two peer timeouts end the job
//! with a [`SwitchFailure`] naming the workers and what the job was waiting for; every known
//! worker is told (`Abort`) so that nobody hangs.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::hash::Hash;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::admission::{Challenges, ReplyLimiter, Verdict};
use super::{Control, ControlTimers, Hello, Secret, CONTROL_VERSION};
use crate::node::Nanos;
use crate::switch::{ShardedSwitch, Switch};
use crate::wire::{self, PacketType};

/// Copies of an abort sent to each worker (UDP may lose one).
const ABORT_COPIES: usize = 3;

/// What the switch's control plane admits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwitchControlConfig {
    /// Job id.
    pub job: u16,
    /// Workers in the job.
    pub world: u16,
    /// The exchange kind's name the workers must run.
    pub mode: String,
    /// The plan fingerprint the workers must present.
    pub plan_checksum: u64,
    /// Join, silence and retry timers.
    pub timers: ControlTimers,
    /// The window welcomes advertise (data packets per worker; 0: no cap).
    pub window: u64,
    /// The all-reduce slots welcomes advertise (0: the job has none).
    pub allreduce_slots: u16,
    /// A leaf switch's control plane: the ranks of its rack, the only workers it admits and
    /// waits for (`None`: every rank of the world). A leaf does not judge the job's progress:
    /// the spine, which runs the barriers, does.
    pub rack: Option<Vec<u16>>,
}

/// What to do with a dataplane packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// It comes from the worker of this rank: hand it to the switch model.
    Worker(u16),
    /// From an address that has not said hello: dropped (an `Unknown` reply is queued, within
    /// the budget of replies to strangers).
    Unknown,
    /// A join of a new exchange while the switch drains: dropped.
    Drained,
}

/// Why the job ended badly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum SwitchFailure<A> {
    /// Workers that never said hello.
    JoinTimeout {
        /// Ranks missing.
        missing: Vec<u16>,
        /// Ranks that joined, and from where.
        joined: Vec<(u16, A)>,
        /// How long the switch waited, nanoseconds.
        waited: Nanos,
    },
    /// A worker fell silent.
    WorkerLost {
        /// Its rank.
        rank: u16,
        /// Its address.
        addr: A,
        /// How long it has been silent, nanoseconds.
        silent: Nanos,
        /// Where the job stood.
        during: String,
    },
    /// A worker's port is closed: the kernel refused a datagram to it (on one host, or where
    /// an ICMP port-unreachable comes back), so its process is gone — found at once, not
    /// after the peer timeout.
    WorkerGone {
        /// Its rank.
        rank: u16,
        /// Its address.
        addr: A,
        /// How long it had been silent, nanoseconds.
        silent: Nanos,
        /// Where the job stood.
        during: String,
    },
    /// An all-reduce sum can never complete: a worker is past it (it had the result from a
    /// switch that has since lost its state, a restart).
    AllReduceLost {
        /// The sum's position in the job's all-reduce stream.
        position: u32,
        /// A worker already past it.
        worker: u16,
    },
    /// An exchange every worker joined made no progress.
    Stalled {
        /// For how long, nanoseconds.
        stalled: Nanos,
        /// Where the job stood.
        during: String,
    },
}

fn duration(ns: Nanos) -> Duration {
    Duration::from_nanos(ns)
}

impl<A: fmt::Display> fmt::Display for SwitchFailure<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SwitchFailure::JoinTimeout {
                missing,
                joined,
                waited,
            } => {
                write!(
                    f,
                    "workers {missing:?} did not join within {:.1?} of the first worker's \
                     hello (joined: ",
                    duration(*waited)
                )?;
                if joined.is_empty() {
                    f.write_str("none")?;
                }
                for (i, (rank, addr)) in joined.iter().enumerate() {
                    let sep = if i == 0 { "" } else { ", " };
                    write!(f, "{sep}{rank} at {addr}")?;
                }
                f.write_str("); are they started with this job file and able to reach the switch?")
            }
            SwitchFailure::WorkerLost {
                rank,
                addr,
                silent,
                during,
            } => write!(
                f,
                "worker {rank} ({addr}) fell silent for {:.1?} during {during}",
                duration(*silent)
            ),
            SwitchFailure::WorkerGone {
                rank,
                addr,
                silent,
                during,
            } => write!(
                f,
                "worker {rank} ({addr}) is gone: its port is closed (the kernel refused a \
                 datagram to it; the process exited?), silent for {:.1?} during {during}",
                duration(*silent)
            ),
            SwitchFailure::AllReduceLost { position, worker } => write!(
                f,
                "the all-reduce slice at stream position {position} can never complete: worker \
                 {worker} is already past it (did the switch restart during an all-reduce?)"
            ),
            SwitchFailure::Stalled { stalled, during } => {
                write!(f, "no progress for {:.1?}: {during}", duration(*stalled))
            }
        }
    }
}

impl<A: fmt::Debug + fmt::Display> std::error::Error for SwitchFailure<A> {}

/// What the control plane saw.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ControlCounters {
    /// Welcomes sent (a rejoin counts again).
    pub admitted: u64,
    /// Hellos refused.
    pub refused: u64,
    /// Dataplane packets from addresses that had not said hello.
    pub unknown_packets: u64,
    /// Messages the switch does not take (a welcome sent to it, say).
    pub unexpected: u64,
    /// Joins of new exchanges dropped while draining.
    pub drained_joins: u64,
    /// Replies to addresses that have not joined (`Unknown`, `Refuse`, `Challenge`) left
    /// unsent: over the budget of replies to strangers.
    pub replies_suppressed: u64,
    /// Replies to addresses that have not joined left unsent because they would have been
    /// larger than what the address sent (a datagram shorter than an `Unknown`, empty ones
    /// included): the switch amplifies nothing.
    pub replies_too_large: u64,
    /// Challenges sent (jobs with an admission secret).
    pub challenges: u64,
    /// Hellos whose proof did not verify: another secret.
    pub bad_proofs: u64,
    /// Hellos with a proof for a nonce their address does not hold (a replay, another
    /// address's, used or expired): challenged again, like a first hello.
    pub stale_proofs: u64,
    /// Heartbeats sent and received.
    pub heartbeats_sent: u64,
    /// Heartbeats received.
    pub heartbeats_received: u64,
}

#[derive(Debug, Clone)]
struct Peer<A> {
    addr: A,
    last_heard: Nanos,
    last_sent: Nanos,
    /// The kernel refused a datagram to its address: its port is closed.
    gone: bool,
    bye: bool,
}

/// The switch's control plane, for peers at addresses of type `A` (a socket address, or the
/// port of a simulated star).
#[derive(Debug)]
pub struct SwitchControl<A> {
    cfg: SwitchControlConfig,
    /// When the first worker joined: the join window runs from then, not from the switch's
    /// start, so that a switch may be started long before its workers have loaded their data
    /// (a launcher starts it first). Before the first hello it waits without a deadline.
    first_joined: Option<Nanos>,
    peers: Vec<Option<Peer<A>>>,
    /// Looked up for every datagram the switch receives: foldhash, not std's SipHash.
    ranks: HashMap<A, u16, foldhash::fast::RandomState>,
    out: VecDeque<(A, Control)>,
    /// The budget of replies to addresses that have not joined.
    replies: ReplyLimiter<A>,
    /// With an admission secret: the nonces sent out.
    challenges: Option<Challenges<A>>,
    counters: ControlCounters,
    progress_mark: [u64; 4],
    last_progress: Nanos,
    failure: Option<SwitchFailure<A>>,
    /// Set by [`SwitchControl::drain`]: no new exchange starts, and the switch is done at
    /// this time.
    drain_until: Option<Nanos>,
    /// The drain's deadline has been handled (it is no longer a timer).
    drain_over: bool,
}

impl<A: Clone + Eq + Hash + fmt::Display> SwitchControl<A> {
    /// A control plane that starts waiting for hellos at `now`.
    pub fn new(cfg: SwitchControlConfig, now: Nanos) -> SwitchControl<A> {
        SwitchControl {
            peers: (0..cfg.world).map(|_| None).collect(),
            cfg,
            first_joined: None,
            ranks: HashMap::default(),
            out: VecDeque::new(),
            replies: ReplyLimiter::new(now),
            challenges: None,
            counters: ControlCounters::default(),
            progress_mark: [0; 4],
            last_progress: now,
            failure: None,
            drain_until: None,
            drain_over: false,
        }
    }

    /// Admit only workers that prove they hold `secret`; `seed` (the driver's randomness)
    /// draws the challenges' nonces.
    pub fn with_secret(mut self, secret: Secret, seed: u64) -> SwitchControl<A> {
        self.challenges = Some(Challenges::new(secret, seed));
        self
    }

    /// The configuration.
    pub fn config(&self) -> &SwitchControlConfig {
        &self.cfg
    }

    /// A control message from `from`.
    pub fn handle_control(&mut self, now: Nanos, from: A, message: Control) {
        match message {
            Control::Hello(h) => {
                // What the address sent: no reply to it before it joins may be longer.
                let asked = Control::Hello(h.clone()).encode().len();
                self.on_hello(now, from, h, asked)
            }
            Control::Heartbeat => {
                self.counters.heartbeats_received += 1;
                self.heard(now, &from);
            }
            Control::Bye { rank } => {
                if self.ranks.get(&from) == Some(&rank) {
                    if let Some(p) = self.peers[usize::from(rank)].as_mut() {
                        p.bye = true;
                        p.last_heard = now;
                    }
                    self.send(now, from, Control::ByeAck);
                }
            }
            _ => self.counters.unexpected += 1,
        }
    }

    /// A hello of `asked` bytes: welcome, refusal or challenge.
    fn on_hello(&mut self, now: Nanos, from: A, h: Hello, asked: usize) {
        match self
            .prove(now, &from, &h, asked)
            .and_then(|()| self.admit(now, &from, &h).map_err(Some))
        {
            Ok(()) => {
                self.counters.admitted += 1;
                self.send(
                    now,
                    from,
                    Control::Welcome {
                        job: h.job,
                        rank: h.rank,
                        window: self.cfg.window,
                        allreduce_slots: self.cfg.allreduce_slots,
                    },
                );
            }
            Err(Some(reason)) => {
                self.counters.refused += 1;
                self.reply(now, from, Control::Refuse { reason }, asked);
            }
            // Challenged (or over the budget to be).
            Err(None) => {}
        }
    }

    /// Refuse `to` for `reason` (a driver serving several jobs, for a hello none of them
    /// takes) in at most `asked` bytes (the hello's), within the budget of replies to
    /// addresses that have not joined.
    pub fn refuse(&mut self, now: Nanos, to: A, reason: String, asked: usize) {
        self.counters.refused += 1;
        self.reply(now, to, Control::Refuse { reason }, asked);
    }

    /// A dataplane packet `bytes` from `from`: whose it is, if anyone's.
    pub fn on_data(&mut self, now: Nanos, from: &A, bytes: &[u8]) -> Admission {
        let Some(rank) = self.heard(now, from) else {
            self.counters.unknown_packets += 1;
            self.reply(now, from.clone(), Control::Unknown, bytes.len());
            return Admission::Unknown;
        };
        let is_join = bytes.get(3) == Some(&(PacketType::Join as u8));
        if self.drain_until.is_some() && is_join {
            self.counters.drained_joins += 1;
            return Admission::Drained;
        }
        Admission::Worker(rank)
    }

    /// The driver sent something (data) to `rank` at `now`: no heartbeat is due for a while.
    pub fn note_sent(&mut self, now: Nanos, rank: u16) {
        if let Some(Some(p)) = self.peers.get_mut(usize::from(rank)) {
            p.last_sent = p.last_sent.max(now);
        }
    }

    /// Timers at `now`: heartbeats to quiet workers, the join deadline, silent workers, a
    /// stalled exchange of `switch`. A failure is kept (see [`SwitchControl::failure`]) and
    /// every known worker is sent an abort.
    pub fn handle_timeout(&mut self, now: Nanos, switch: &impl WatchedSwitch) {
        if self.failure.is_some() {
            return;
        }
        if self.drain_until.is_some_and(|t| t <= now) {
            self.drain_over = true;
        }
        let quiet = self.cfg.timers.quiet();
        for p in self.peers.iter_mut().flatten() {
            if !p.bye && now.saturating_sub(p.last_sent) >= quiet {
                p.last_sent = now;
                self.counters.heartbeats_sent += 1;
                self.out.push_back((p.addr.clone(), Control::Heartbeat));
            }
        }
        if let Err(failure) = self.check(now, switch) {
            let reason = failure.to_string();
            for _ in 0..ABORT_COPIES {
                for p in self.peers.iter().flatten() {
                    self.out.push_back((
                        p.addr.clone(),
                        Control::Abort {
                            reason: reason.clone(),
                        },
                    ));
                }
            }
            self.failure = Some(failure);
        }
    }

    /// The datapath says the port at `addr` is closed (the kernel refused a datagram to it).
    /// A member that has not said goodbye is gone: the next [`SwitchControl::handle_timeout`]
    /// ends the job naming it. Anyone else's closed port means nothing here.
    pub fn port_closed(&mut self, addr: &A) {
        if let Some(&rank) = self.ranks.get(addr) {
            if let Some(p) = self.peers[usize::from(rank)].as_mut() {
                p.gone |= !p.bye;
            }
        }
    }

    /// The next message to send, and to whom.
    pub fn poll_control(&mut self) -> Option<(A, Control)> {
        self.out.pop_front()
    }

    /// When [`SwitchControl::handle_timeout`] is next due. Only deadlines that
    /// [`SwitchControl::handle_timeout`] acts on count: while ranks are missing, only the join
    /// deadline and heartbeats (silence and stalls are judged once everyone has joined), and a
    /// leaf judges no stall. So after `handle_timeout(now)` the next deadline is after `now`,
    /// and a driver that sleeps until it sleeps: a switch waiting for slow workers does not
    /// spin.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        if self.failure.is_some() {
            return None;
        }
        let t = &self.cfg.timers;
        let serving = (0..usize::from(self.cfg.world))
            .filter(|&r| self.serves(r))
            .count();
        let everyone = self.joined() >= serving;
        let active = self.peers.iter().flatten().filter(|p| !p.bye);
        let heartbeats = active.clone().map(|p| p.last_sent + t.quiet());
        let silences = active
            .map(|p| p.last_heard + t.peer + 1)
            .filter(|_| everyone);
        let join = self
            .first_joined
            .filter(|_| !everyone)
            .map(|first| first + t.join + 1);
        let stall =
            (everyone && self.cfg.rack.is_none()).then_some(self.last_progress + 2 * t.peer + 1);
        let drain = self.drain_until.filter(|_| !self.drain_over);
        heartbeats
            .chain(silences)
            .chain(join)
            .chain(stall)
            .chain(drain)
            .min()
    }

    /// Why the job failed, once it has.
    pub fn failure(&self) -> Option<&SwitchFailure<A>> {
        self.failure.as_ref()
    }

    /// Start no new exchange from now on, and be done after `linger` (long enough to repeat
    /// final messages to workers that lost theirs): a switch drained for maintenance, whose
    /// workers rejoin the next one started at its address.
    pub fn drain(&mut self, now: Nanos, linger: Nanos) {
        if self.drain_until.is_none() {
            self.drain_until = Some(now + linger);
        }
    }

    /// Whether the switch is draining.
    pub fn is_draining(&self) -> bool {
        self.drain_until.is_some()
    }

    /// Whether the switch's part is over at `now`: every worker said goodbye, or the drain's
    /// linger has passed.
    pub fn is_finished(&self, now: Nanos) -> bool {
        self.all_left() || self.drain_until.is_some_and(|t| now >= t)
    }

    /// Whether every worker of the job has said goodbye.
    pub fn all_left(&self) -> bool {
        self.peers
            .iter()
            .enumerate()
            .all(|(r, p)| !self.serves(r) || p.as_ref().is_some_and(|p| p.bye))
    }

    /// The rank of the worker at `addr`.
    pub fn rank_of(&self, addr: &A) -> Option<u16> {
        self.ranks.get(addr).copied()
    }

    /// The address of rank `rank`, once it has joined.
    pub fn addr_of(&self, rank: u16) -> Option<&A> {
        Some(&self.peers.get(usize::from(rank))?.as_ref()?.addr)
    }

    /// Ranks that have joined, and their addresses.
    pub fn members(&self) -> impl Iterator<Item = (u16, &A)> {
        self.peers
            .iter()
            .enumerate()
            .filter_map(|(r, p)| Some((r as u16, &p.as_ref()?.addr)))
    }

    /// Workers that have joined.
    pub fn joined(&self) -> usize {
        self.peers.iter().filter(|p| p.is_some()).count()
    }

    /// What the control plane saw.
    pub fn counters(&self) -> &ControlCounters {
        &self.counters
    }

    /// `from` was heard at `now`; its rank if it has joined.
    fn heard(&mut self, now: Nanos, from: &A) -> Option<u16> {
        let rank = *self.ranks.get(from)?;
        if let Some(p) = self.peers[usize::from(rank)].as_mut() {
            p.last_heard = p.last_heard.max(now);
        }
        Some(rank)
    }

    /// A reply to an address that has not joined, which sent `asked` bytes: within the budget
    /// for those, and in no more bytes than it sent.
    fn reply(&mut self, now: Nanos, to: A, message: Control, asked: usize) {
        let Some(message) = self.fitted(&message, asked) else {
            return;
        };
        if self.replies.allow(now, &to) {
            self.out.push_back((to, message));
        } else {
            self.counters.replies_suppressed += 1;
        }
    }

    /// `message` in at most `asked` bytes (see [`Control::fit`]); `None`, counted, when it
    /// cannot be.
    fn fitted(&mut self, message: &Control, asked: usize) -> Option<Control> {
        let fitted = message.fit(asked);
        self.counters.replies_too_large += u64::from(fitted.is_none());
        fitted
    }

    /// Addresses the reply budget remembers (bounded by [`super::MAX_TRACKED`]).
    pub fn strangers_tracked(&self) -> usize {
        self.replies.tracked()
    }

    /// With an admission secret: whether `h` proves it. `Err(None)`: not (a challenge, or a
    /// refusal of a wrong proof, was queued).
    fn prove(
        &mut self,
        now: Nanos,
        from: &A,
        h: &Hello,
        asked: usize,
    ) -> Result<(), Option<String>> {
        // `Option<String>` so that `admit`'s refusals (`Some`) chain after it.
        let Some(challenges) = self.challenges.as_mut() else {
            return Ok(());
        };
        let verdict = challenges.judge(now, from, h);
        match verdict {
            Verdict::Proven => Ok(()),
            Verdict::Wrong => {
                // Sent outside the reply budget: the address echoed a nonce, so it is no forged
                // victim, and each wrong proof used up a challenge the budget paid for.
                self.counters.bad_proofs += 1;
                self.counters.refused += 1;
                let reason = format!(
                    "worker {}: its admission proof does not verify (the worker's secret is \
                     not the switch's: give both the job's `secret` or `secret_file`)",
                    h.rank
                );
                if let Some(refusal) = self.fitted(&Control::Refuse { reason }, asked) {
                    self.out.push_back((from.clone(), refusal));
                }
                Err(None)
            }
            Verdict::Unproven | Verdict::Stale => {
                if verdict == Verdict::Stale {
                    self.counters.stale_proofs += 1;
                }
                // A challenge (two fields) is shorter than any hello (eight); checked all the
                // same, before a nonce is spent on it.
                let challenge = Control::Challenge {
                    nonce: "0".repeat(32),
                };
                if self.fitted(&challenge, asked).is_none() {
                    return Err(None);
                }
                if self.replies.allow(now, from) {
                    let challenges = self.challenges.as_mut().expect("checked above");
                    if let Some(nonce) = challenges.issue(now, from) {
                        self.counters.challenges += 1;
                        self.out
                            .push_back((from.clone(), Control::Challenge { nonce }));
                        return Err(None);
                    }
                }
                self.counters.replies_suppressed += 1;
                Err(None)
            }
        }
    }

    fn send(&mut self, now: Nanos, to: A, message: Control) {
        if let Some(rank) = self.ranks.get(&to) {
            self.note_sent(now, *rank);
        }
        self.out.push_back((to, message));
    }

    fn admit(&mut self, now: Nanos, from: &A, h: &Hello) -> Result<(), String> {
        let cfg = &self.cfg;
        // Said to an address that has not joined: no longer than its hello (see `reply`).
        let mismatch = |what: &str, worker: String, switch: String| {
            Err(format!(
                "worker {}: {what} is {worker}, the switch has {switch}",
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
        if h.job != cfg.job {
            return mismatch("job id", h.job.to_string(), cfg.job.to_string());
        }
        if h.world != cfg.world {
            return mismatch("world size", h.world.to_string(), cfg.world.to_string());
        }
        if h.rank >= cfg.world {
            return Err(format!(
                "rank {} is not below the world size {}",
                h.rank, cfg.world
            ));
        }
        if let Some(rack) = &cfg.rack {
            if !rack.contains(&h.rank) {
                return Err(format!(
                    "worker {}: this leaf switch serves ranks {rack:?} (another rack's leaf \
                     serves it)",
                    h.rank
                ));
            }
        }
        if h.mode != cfg.mode {
            return mismatch("exchange mode", h.mode.clone(), cfg.mode.clone());
        }
        if h.plan_checksum != cfg.plan_checksum {
            // Not the switch's value: whoever learns it can take a rank of a job without a
            // secret. The switch logs its own when it logs the refusal.
            return Err(format!(
                "worker {}: plan checksum {:#018x} is not the switch's (same plan directory \
                 and dataset?)",
                h.rank, h.plan_checksum
            ));
        }
        let peer_timeout = cfg.timers.peer;
        let slot = &mut self.peers[usize::from(h.rank)];
        if let Some(p) = slot {
            let alive = now.saturating_sub(p.last_heard) < peer_timeout;
            if p.addr != *from && alive && !p.bye {
                return Err(format!(
                    "rank {} is already taken by {}, which is alive",
                    h.rank, p.addr
                ));
            }
            self.ranks.remove(&p.addr);
        }
        *slot = Some(Peer {
            addr: from.clone(),
            last_heard: now,
            last_sent: now,
            gone: false,
            bye: false,
        });
        self.ranks.insert(from.clone(), h.rank);
        self.first_joined.get_or_insert(now);
        Ok(())
    }

    /// Whether rank `r` is one this control plane serves.
    fn serves(&self, r: usize) -> bool {
        self.cfg
            .rack
            .as_ref()
            .is_none_or(|rack| rack.contains(&(r as u16)))
    }

    fn check(&mut self, now: Nanos, switch: &impl WatchedSwitch) -> Result<(), SwitchFailure<A>> {
        let t = self.cfg.timers;
        let missing: Vec<u16> = (0..self.cfg.world)
            .filter(|&r| self.serves(usize::from(r)) && self.peers[usize::from(r)].is_none())
            .collect();
        if !missing.is_empty() {
            // Nothing can stall before everyone has joined: the stall clock starts then.
            self.last_progress = now;
            let Some(first) = self.first_joined else {
                return Ok(());
            };
            let waited = now.saturating_sub(first);
            if waited > t.join {
                return Err(SwitchFailure::JoinTimeout {
                    missing,
                    joined: self.members().map(|(r, a)| (r, a.clone())).collect(),
                    waited,
                });
            }
            return Ok(());
        }
        for (rank, p) in self.peers.iter().enumerate() {
            let Some(p) = p.as_ref() else { continue };
            let silent = now.saturating_sub(p.last_heard);
            if !p.bye && p.gone {
                return Err(SwitchFailure::WorkerGone {
                    rank: rank as u16,
                    addr: p.addr.clone(),
                    silent,
                    during: switch.describe_job(self.cfg.job),
                });
            }
            if !p.bye && silent > t.peer {
                return Err(SwitchFailure::WorkerLost {
                    rank: rank as u16,
                    addr: p.addr.clone(),
                    silent,
                    during: switch.describe_job(self.cfg.job),
                });
            }
        }
        if let Some((position, worker)) = switch.allreduce_lost(self.cfg.job) {
            return Err(SwitchFailure::AllReduceLost { position, worker });
        }
        if self.cfg.rack.is_some() {
            return Ok(());
        }
        let mark = switch.progress();
        // Only an exchange that every worker has joined can stall: before that, the workers
        // that have not joined are computing (alive, as their heartbeats say).
        let running = switch.exchange_running(self.cfg.job);
        let any_active = self.peers.iter().flatten().any(|p| !p.bye);
        if mark != self.progress_mark || !running || !any_active {
            self.progress_mark = mark;
            self.last_progress = now;
        }
        let stalled = now.saturating_sub(self.last_progress);
        if stalled > 2 * t.peer {
            return Err(SwitchFailure::Stalled {
                stalled,
                during: switch.describe_job(self.cfg.job),
            });
        }
        Ok(())
    }
}

/// What the control plane reads from the switch model it watches: one [`Switch`], or a
/// [`ShardedSwitch`] (whose progress is every shard's).
pub trait WatchedSwitch {
    /// Where job `job` stands, in words.
    fn describe_job(&self, job: u16) -> String;
    /// A sum of job `job`'s all-reduce that can never complete ([`Switch::allreduce_lost`]).
    fn allreduce_lost(&self, job: u16) -> Option<(u32, u16)>;
    /// Whether job `job` has an exchange every worker joined that is not finished.
    fn exchange_running(&self, job: u16) -> bool;
    /// Figures that grow while the switch makes progress: exchanges and blocks completed,
    /// lanes added, results and raw copies sent.
    fn progress(&self) -> [u64; 4];
}

fn progress_of(k: &crate::switch::SwitchCounters) -> [u64; 4] {
    [
        k.exchanges_completed,
        k.blocks_completed,
        k.lane_updates,
        k.sent(PacketType::Raw) + k.sent(PacketType::Rows) + k.sent(PacketType::Result),
    ]
}

impl WatchedSwitch for Switch {
    fn describe_job(&self, job: u16) -> String {
        Switch::describe_job(self, job)
    }

    fn allreduce_lost(&self, job: u16) -> Option<(u32, u16)> {
        Switch::allreduce_lost(self, job)
    }

    fn exchange_running(&self, job: u16) -> bool {
        Switch::exchange_running(self, job)
    }

    fn progress(&self) -> [u64; 4] {
        progress_of(self.counters())
    }
}

/// The lead keeps the barriers and the all-reduce; the aggregation is every shard's.
impl WatchedSwitch for ShardedSwitch {
    fn describe_job(&self, job: u16) -> String {
        self.lead().describe_job(job)
    }

    fn allreduce_lost(&self, job: u16) -> Option<(u32, u16)> {
        self.lead().allreduce_lost(job)
    }

    fn exchange_running(&self, job: u16) -> bool {
        self.lead().exchange_running(job)
    }

    fn progress(&self) -> [u64; 4] {
        progress_of(&self.counters())
    }
}

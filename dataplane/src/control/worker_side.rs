//! A worker's side of the control plane: say hello until welcomed (or refused, or the join
//! timeout passes), send heartbeats whenever it has sent nothing for a quarter of the peer
//! timeout — also while it computes between exchanges, so that a long training step is never
//! taken for a dead worker — watch the switch's silence while it waits on an exchange, say
//! hello again to a restarted switch, and say goodbye.

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

use serde::Serialize;

use super::{Control, ControlTimers, Hello, Proof, Secret};
use crate::node::Nanos;

/// A restarted switch's `Unknown` replies make the worker say hello at most this often.
const REJOIN_EVERY: Nanos = 50_000_000;
/// Goodbyes sent before the worker leaves unacknowledged (the switch may be gone already).
const BYE_TRIES: u32 = 5;

/// Why a worker cannot go on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum WorkerFailure {
    /// No welcome within the join timeout.
    NoSwitch {
        /// How long the worker waited, nanoseconds.
        waited: Nanos,
        /// Hellos sent.
        hellos: u32,
    },
    /// The switch refused the worker.
    Refused {
        /// Its reason.
        reason: String,
    },
    /// The switch ended the job.
    Aborted {
        /// Its reason.
        reason: String,
    },
    /// The switch was silent for the peer timeout while the worker waited on an exchange.
    SwitchSilent {
        /// How long, nanoseconds.
        silent: Nanos,
    },
}

impl fmt::Display for WorkerFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorkerFailure::NoSwitch { waited, hellos } => write!(
                f,
                "no answer from the switch within {:.1?} ({hellos} hellos sent)",
                Duration::from_nanos(*waited)
            ),
            WorkerFailure::Refused { reason } => write!(f, "the switch refused: {reason}"),
            WorkerFailure::Aborted { reason } => {
                write!(f, "the switch aborted the job: {reason}")
            }
            WorkerFailure::SwitchSilent { silent } => write!(
                f,
                "the switch fell silent for {:.1?}",
                Duration::from_nanos(*silent)
            ),
        }
    }
}

impl std::error::Error for WorkerFailure {}

/// Where the worker stands with the switch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum WorkerState {
    /// Saying hello.
    Joining,
    /// Welcomed: exchanges may run.
    Joined,
    /// Saying goodbye.
    Leaving,
    /// Gone (goodbye acknowledged, or given up on).
    Left,
    /// Cannot go on.
    Failed(WorkerFailure),
}

/// A worker's control plane.
#[derive(Debug)]
pub struct WorkerControl {
    hello: Hello,
    timers: ControlTimers,
    state: WorkerState,
    started: Nanos,
    last_heard: Nanos,
    last_sent: Nanos,
    last_hello: Nanos,
    hellos: u32,
    byes: u32,
    window: u64,
    allreduce_slots: u16,
    listening: bool,
    rejoins: u64,
    unexpected: u64,
    heartbeats_sent: u64,
    /// The job's admission secret, if it has one.
    secret: Option<Secret>,
    /// The answer to the switch's last challenge, sent with every hello until the next.
    proof: Option<Proof>,
    out: VecDeque<Control>,
}

impl WorkerControl {
    /// A worker that starts saying `hello` at `now`.
    pub fn new(hello: Hello, timers: ControlTimers, now: Nanos) -> WorkerControl {
        let mut w = WorkerControl {
            hello,
            timers,
            state: WorkerState::Joining,
            started: now,
            last_heard: now,
            last_sent: now,
            last_hello: now,
            hellos: 0,
            byes: 0,
            window: 0,
            allreduce_slots: 0,
            listening: false,
            rejoins: 0,
            unexpected: 0,
            heartbeats_sent: 0,
            secret: None,
            proof: None,
            out: VecDeque::new(),
        };
        w.say_hello(now);
        w
    }

    /// Answer the switch's challenges with proofs under `secret` (the job's admission secret).
    pub fn with_secret(mut self, secret: Secret) -> WorkerControl {
        self.secret = Some(secret);
        self
    }

    /// Where the worker stands.
    pub fn state(&self) -> &WorkerState {
        &self.state
    }

    /// Whether the switch has welcomed the worker and nothing has gone wrong since.
    pub fn is_joined(&self) -> bool {
        self.state == WorkerState::Joined
    }

    /// The failure, once there is one.
    pub fn failure(&self) -> Option<&WorkerFailure> {
        match &self.state {
            WorkerState::Failed(f) => Some(f),
            _ => None,
        }
    }

    /// The window the welcome advertised (0: none).
    pub fn window(&self) -> u64 {
        self.window
    }

    /// The all-reduce slots the switch's welcome advertised (0: none).
    pub fn allreduce_slots(&self) -> u16 {
        self.allreduce_slots
    }

    /// The hello this worker presents.
    pub fn hello(&self) -> &Hello {
        &self.hello
    }

    /// Times a restarted switch made this worker say hello again.
    pub fn rejoins(&self) -> u64 {
        self.rejoins
    }

    /// Messages a worker does not take (a hello sent to it, say).
    pub fn unexpected(&self) -> u64 {
        self.unexpected
    }

    /// Heartbeats sent.
    pub fn heartbeats_sent(&self) -> u64 {
        self.heartbeats_sent
    }

    /// Hellos sent.
    pub fn hellos(&self) -> u32 {
        self.hellos
    }

    /// Anything at all arrived from the switch at `now`.
    pub fn heard(&mut self, now: Nanos) {
        self.last_heard = self.last_heard.max(now);
    }

    /// The driver sent something (data) to the switch at `now`.
    pub fn note_sent(&mut self, now: Nanos) {
        self.last_sent = self.last_sent.max(now);
    }

    /// Whether the worker waits on the switch from `now` (an exchange runs) or not (it
    /// computes, reading nothing). Only a listening worker judges the switch's silence, which
    /// counts from when it starts listening.
    pub fn listen(&mut self, now: Nanos, listening: bool) {
        if listening && !self.listening {
            self.last_heard = now;
        }
        self.listening = listening;
    }

    /// A control message from the switch.
    pub fn handle_control(&mut self, now: Nanos, message: Control) {
        self.heard(now);
        // The switch's abort names the cause; a worker that judged the switch silent first (it
        // was stopped, and the abort waited in its socket meanwhile) takes the abort instead.
        if let (
            WorkerState::Failed(WorkerFailure::SwitchSilent { .. }),
            Control::Abort { reason },
        ) = (&self.state, &message)
        {
            self.state = WorkerState::Failed(WorkerFailure::Aborted {
                reason: reason.clone(),
            });
            return;
        }
        if matches!(self.state, WorkerState::Failed(_) | WorkerState::Left) {
            return;
        }
        match message {
            Control::Welcome {
                window,
                allreduce_slots,
                ..
            } => {
                if self.state == WorkerState::Joining {
                    self.state = WorkerState::Joined;
                }
                self.window = window;
                self.allreduce_slots = allreduce_slots;
            }
            Control::Refuse { reason } => {
                self.state = WorkerState::Failed(WorkerFailure::Refused { reason })
            }
            Control::Abort { reason } => {
                self.state = WorkerState::Failed(WorkerFailure::Aborted { reason })
            }
            Control::Unknown => {
                // A restarted switch: join it again.
                let due = now.saturating_sub(self.last_hello) >= REJOIN_EVERY;
                if self.state == WorkerState::Joined && due {
                    self.rejoins += 1;
                    self.say_hello(now);
                }
            }
            Control::Challenge { nonce } => match &self.secret {
                None => {
                    self.state = WorkerState::Failed(WorkerFailure::Refused {
                        reason: "the switch admits only workers that hold the job's admission \
                                 secret: give this worker the same `secret` or `secret_file` in \
                                 its job file"
                            .into(),
                    })
                }
                Some(secret) => {
                    if matches!(self.state, WorkerState::Joining | WorkerState::Joined) {
                        self.proof = Some(secret.prove(&nonce, &self.hello));
                        self.say_hello(now);
                    }
                }
            },
            Control::ByeAck => {
                if self.state == WorkerState::Leaving {
                    self.state = WorkerState::Left;
                }
            }
            Control::Heartbeat => {}
            Control::Hello(_) | Control::Bye { .. } => self.unexpected += 1,
        }
    }

    /// Say goodbye from `now` on (repeated until acknowledged, a few times at most).
    pub fn leave(&mut self, now: Nanos) {
        if matches!(self.state, WorkerState::Joining | WorkerState::Joined) {
            self.state = WorkerState::Leaving;
            self.say_bye(now);
        }
    }

    /// Timers at `now`: hello and goodbye repetition, heartbeats, the join deadline, the
    /// switch's silence. Only what is due at `now` happens, so a driver may call it at any
    /// time.
    pub fn handle_timeout(&mut self, now: Nanos) {
        let t = self.timers;
        match self.state {
            WorkerState::Joining => {
                let waited = now.saturating_sub(self.started);
                if waited >= t.join {
                    self.state = WorkerState::Failed(WorkerFailure::NoSwitch {
                        waited,
                        hellos: self.hellos,
                    });
                } else if now.saturating_sub(self.last_hello) >= t.retry {
                    self.say_hello(now);
                }
            }
            WorkerState::Joined => {
                let silent = now.saturating_sub(self.last_heard);
                if self.listening && silent > t.peer {
                    self.state = WorkerState::Failed(WorkerFailure::SwitchSilent { silent });
                } else if now.saturating_sub(self.last_sent) >= t.quiet() {
                    self.heartbeats_sent += 1;
                    self.queue(now, Control::Heartbeat);
                }
            }
            WorkerState::Leaving => {
                if now.saturating_sub(self.last_sent) >= t.retry {
                    if self.byes >= BYE_TRIES {
                        self.state = WorkerState::Left;
                    } else {
                        self.say_bye(now);
                    }
                }
            }
            WorkerState::Left | WorkerState::Failed(_) => {}
        }
    }

    /// The next message for the switch.
    pub fn poll_control(&mut self) -> Option<Control> {
        self.out.pop_front()
    }

    /// When [`WorkerControl::handle_timeout`] is next due.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        let t = self.timers;
        match self.state {
            WorkerState::Joining => Some((self.last_hello + t.retry).min(self.started + t.join)),
            WorkerState::Joined => {
                let beat = self.last_sent + t.quiet();
                let silence = self.listening.then_some(self.last_heard + t.peer + 1);
                Some(silence.map_or(beat, |s| s.min(beat)))
            }
            WorkerState::Leaving => Some(self.last_sent + t.retry),
            WorkerState::Left | WorkerState::Failed(_) => None,
        }
    }

    fn queue(&mut self, now: Nanos, message: Control) {
        self.note_sent(now);
        self.out.push_back(message);
    }

    fn say_hello(&mut self, now: Nanos) {
        self.hellos += 1;
        self.last_hello = now;
        let hello = Hello {
            proof: self.proof.clone(),
            ..self.hello.clone()
        };
        self.queue(now, Control::Hello(hello));
    }

    fn say_bye(&mut self, now: Nanos) {
        self.byes += 1;
        let rank = self.hello.rank;
        self.queue(now, Control::Bye { rank });
    }
}

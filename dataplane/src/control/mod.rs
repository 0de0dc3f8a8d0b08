//! The control plane as sans-IO state machines beside the switch model: admission (hello,
//! welcome, refuse), heartbeats and peer liveness, abort, drain, and rejoining a restarted
//! switch. Like the dataplane nodes, they take messages and timer expiries with a timestamp and
//! hand back messages and their next deadline; the UDP processes, the in-memory network and the
//! simulator all drive the same machines.
//!
//! - [`SwitchControl`]: the switch's side — who is in the job at which address, who has been
//!   silent too long, whether the job stalls;
//! - [`WorkerControl`]: a worker's side — joining, heartbeats while it computes, the switch's
//!   silence while it waits on an exchange, leaving;
//! - [`nodes`]: both wrapped around the switch model and an engine as [`crate::Node`]s, for
//!   drivers that move every byte themselves (the in-memory network, the simulator).
//!
//! Control messages share the data path but never reach the switch model: they start with
//! [`MAGIC`], which no dataplane packet does (those begin `SG` and a version byte of 1). The
//! body is JSON — small, versioned by [`CONTROL_VERSION`] and readable in a packet capture. A
//! Tofino deployment carries the same exchange on the switch CPU's port.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::node::Nanos;

mod admission;
pub mod nodes;
mod switch_side;
mod worker_side;

pub use admission::{
    Proof, Secret, CHALLENGE_TTL, MAX_TRACKED, MIN_SECRET_LEN, REPLIES_PER_SECOND, REPLY_BURST,
    REPLY_EVERY,
};
pub use switch_side::{
    Admission, ControlCounters, SwitchControl, SwitchControlConfig, SwitchFailure, WatchedSwitch,
};
pub use worker_side::{WorkerControl, WorkerFailure, WorkerState};

/// The first four bytes of every control message.
pub const MAGIC: &[u8; 4] = b"SGCT";
/// Bumped whenever a message changes meaning.
pub const CONTROL_VERSION: u32 = 1;

/// What a worker presents when it joins a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// The worker's [`CONTROL_VERSION`].
    pub control_version: u32,
    /// The dataplane header version the worker speaks.
    pub wire_version: u8,
    /// Job id.
    pub job: u16,
    /// The worker's rank.
    pub rank: u16,
    /// Workers in the job.
    pub world: u16,
    /// The exchange kind's name (`switchgnn`, `strawman`, `host`, `g3`).
    pub mode: String,
    /// Fingerprint of every layer's exchange plan.
    pub plan_checksum: u64,
    /// The answer to the switch's challenge, when the job has an admission secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proof: Option<Proof>,
}

/// One control message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Control {
    /// A worker asks to join.
    Hello(Hello),
    /// The switch admits the worker.
    Welcome {
        /// Job id.
        job: u16,
        /// The rank admitted.
        rank: u16,
        /// Data packets the worker may keep unacknowledged at once: its share of what the
        /// switch's receive queue holds (0: no cap).
        #[serde(default)]
        window: u64,
        /// All-reduce slots the switch gives the job (0: none, or an older switch).
        #[serde(default)]
        allreduce_slots: u16,
    },
    /// The switch asks a worker of a job with an admission secret to prove it holds it: say
    /// hello again with a [`Proof`] for this nonce.
    Challenge {
        /// Random, for this address, good for one use.
        nonce: String,
    },
    /// The switch refuses the worker, saying why: what did not match, and the worker's value
    /// (the switch's plan checksum is never told to an address that has not joined). No
    /// longer than the hello it answers.
    Refuse {
        /// What did not match.
        reason: String,
    },
    /// Sent when nothing else has been sent for a while, so silence means a dead peer.
    Heartbeat,
    /// From the switch to an address that has not said hello (e.g. after a switch restart):
    /// say hello again.
    Unknown,
    /// The job cannot go on (a worker died, a wait timed out); the reason names who and what.
    Abort {
        /// Who and what.
        reason: String,
    },
    /// A worker has finished its part of the job.
    Bye {
        /// Its rank.
        rank: u16,
    },
    /// The switch heard the goodbye.
    ByeAck,
}

/// Why a buffer that starts with the control magic is not a control message.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("malformed control message: {0}")]
pub struct MalformedControl(String);

impl Control {
    /// The message on the wire: [`MAGIC`], then JSON.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        serde_json::to_writer(&mut out, self).expect("control messages serialise");
        out
    }

    /// Write the message into `buf` (at least [`crate::node::MAX_DATAGRAM_LEN`] bytes), its
    /// length; a reason too long for the buffer is cut short.
    ///
    /// # Panics
    /// If even a message without its reason does not fit.
    pub fn encode_into(&self, buf: &mut [u8]) -> usize {
        let mut message = self.clone();
        loop {
            let bytes = message.encode();
            if bytes.len() <= buf.len() {
                buf[..bytes.len()].copy_from_slice(&bytes);
                return bytes.len();
            }
            let reason = match &mut message {
                Control::Refuse { reason } | Control::Abort { reason } if !reason.is_empty() => {
                    reason
                }
                _ => panic!(
                    "a {}-byte control message in a {}-byte buffer",
                    bytes.len(),
                    buf.len()
                ),
            };
            let mut keep = reason
                .len()
                .saturating_sub(bytes.len() - buf.len())
                .min(reason.len() - 1);
            while !reason.is_char_boundary(keep) {
                keep -= 1;
            }
            reason.truncate(keep);
        }
    }

    /// This message in at most `limit` bytes on the wire: a refusal's or abort's reason is cut
    /// short to fit; `None` when even that does not fit. The switch answers an address that
    /// has not joined with no more bytes than it sent, so that nobody can use it to amplify a
    /// flood sent from forged addresses.
    pub fn fit(&self, limit: usize) -> Option<Control> {
        let mut message = self.clone();
        loop {
            let len = message.encode().len();
            if len <= limit {
                return Some(message);
            }
            let reason = match &mut message {
                Control::Refuse { reason } | Control::Abort { reason } if !reason.is_empty() => {
                    reason
                }
                _ => return None,
            };
            let mut keep = reason.len().saturating_sub(len - limit);
            while !reason.is_char_boundary(keep) {
                keep -= 1;
            }
            reason.truncate(keep);
        }
    }

    /// `None` when `bytes` is not a control message at all (a dataplane packet).
    pub fn decode(bytes: &[u8]) -> Option<Result<Control, MalformedControl>> {
        let body = bytes.strip_prefix(MAGIC)?;
        Some(serde_json::from_slice(body).map_err(|e| MalformedControl(e.to_string())))
    }
}

/// The control plane's timers, nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControlTimers {
    /// How long the switch waits for every worker to say hello, and a worker for its welcome.
    pub join: Nanos,
    /// Silence after which a peer is taken for dead. Each side sends a heartbeat after a
    /// quarter of it without sending anything else, so a live peer is heard four times per
    /// timeout.
    pub peer: Nanos,
    /// Repetition of an unanswered hello or goodbye.
    pub retry: Nanos,
}

impl ControlTimers {
    /// How long a side may stay quiet before it sends a heartbeat.
    pub fn quiet(&self) -> Nanos {
        self.peer / 4
    }
}

impl Default for ControlTimers {
    /// Suited to processes on a general-purpose OS: 20 s to join, 5 s of silence, hellos
    /// every 100 ms.
    fn default() -> Self {
        ControlTimers {
            join: 20_000_000_000,
            peer: 5_000_000_000,
            retry: 100_000_000,
        }
    }
}

#[cfg(test)]
mod tests;

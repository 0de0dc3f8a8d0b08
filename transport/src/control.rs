//! Control messages between the switch process and the workers: the start-up handshake,
//! liveness and shutdown. They share the data socket but never reach the switch model: they
//! start with [`MAGIC`], which no dataplane packet does (those begin `SG` and a version byte
//! of 1). A Tofino deployment carries the same exchange on the switch CPU's port.
//!
//! Encoding: the 4-byte magic, then the message as JSON — small, versioned by
//! [`CONTROL_VERSION`], and readable in a packet capture.

use serde::{Deserialize, Serialize};

pub const MAGIC: &[u8; 4] = b"SGCT";
/// Bumped whenever a message changes meaning.
pub const CONTROL_VERSION: u32 = 1;

/// What a worker presents when it joins a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    pub control_version: u32,
    /// The dataplane header version the worker speaks.
    pub wire_version: u8,
    pub job: u16,
    pub rank: u16,
    pub world: u16,
    /// `switchgnn`, `strawman` or `host`.
    pub mode: String,
    /// Fingerprint of every layer's exchange plan.
    pub plan_checksum: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Control {
    Hello(Hello),
    /// The switch admits the worker.
    Welcome {
        job: u16,
        rank: u16,
        /// Data packets the worker may keep unacknowledged at once: its share of what the
        /// switch's receive queue holds (0: no cap).
        #[serde(default)]
        window: u64,
    },
    /// The switch refuses the worker, saying why.
    Refuse {
        reason: String,
    },
    /// Sent when nothing else has been sent for a while, so silence means a dead peer.
    Heartbeat,
    /// From the switch to an address that has not said hello (e.g. after a switch restart):
    /// say hello again.
    Unknown,
    /// The job cannot go on (a worker died, a wait timed out); the reason names who and what.
    Abort {
        reason: String,
    },
    /// A worker has finished its part of the job.
    Bye {
        rank: u16,
    },
    ByeAck,
}

/// Why a buffer that starts with the control magic is not a control message.
#[derive(Debug, thiserror::Error)]
#[error("malformed control message: {0}")]
pub struct ControlError(String);

impl Control {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        serde_json::to_writer(&mut out, self).expect("control messages serialise");
        out
    }

    /// `None` when `bytes` is not a control message at all (a dataplane packet).
    pub fn decode(bytes: &[u8]) -> Option<Result<Control, ControlError>> {
        let body = bytes.strip_prefix(MAGIC)?;
        Some(serde_json::from_slice(body).map_err(|e| ControlError(e.to_string())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejection() {
        let msgs = [
            Control::Hello(Hello {
                control_version: CONTROL_VERSION,
                wire_version: 1,
                job: 3,
                rank: 2,
                world: 4,
                mode: "host".into(),
                plan_checksum: u64::MAX,
            }),
            Control::Refuse {
                reason: "no".into(),
            },
            Control::Heartbeat,
            Control::Welcome {
                job: 1,
                rank: 2,
                window: 48,
            },
            Control::Bye { rank: 1 },
        ];
        for m in msgs {
            assert_eq!(Control::decode(&m.encode()).unwrap().unwrap(), m);
        }
        // A welcome without a window (an older switch) means no cap.
        assert_eq!(
            Control::decode(b"SGCT{\"type\":\"welcome\",\"job\":1,\"rank\":0}")
                .unwrap()
                .unwrap(),
            Control::Welcome {
                job: 1,
                rank: 0,
                window: 0
            }
        );
        // A dataplane header is not a control message.
        assert!(Control::decode(&[0x53, 0x47, 1, 1]).is_none());
        // The magic with garbage behind it is an error, not a panic.
        assert!(Control::decode(b"SGCT{\"type\":").unwrap().is_err());
        assert!(Control::decode(b"SGCT{\"type\":\"launch\"}")
            .unwrap()
            .is_err());
    }
}

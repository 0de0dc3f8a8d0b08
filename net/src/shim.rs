//! The seeded fault shim on an endpoint's send path: loss, duplication and reordering by
//! delay, from the dataplane's own fault injector (the one the in-memory network and the
//! simulator run), with the copies it holds back kept until they are due.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use switchgnn_dataplane::fault::{FaultError, FaultInjector, Faults};

use crate::datapath::Outgoing;

/// Seeded faults applied to every datagram this endpoint sends.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ShimConfig {
    /// Probability a datagram is dropped.
    pub loss: f64,
    /// Probability a datagram is sent twice.
    pub duplicate: f64,
    /// Probability a datagram is held back by up to `reorder_delay_us`, which reorders it.
    pub reorder: f64,
    /// The longest a held-back datagram waits, in microseconds.
    pub reorder_delay_us: u64,
    /// Seeds the injector's random draws, so a faulty run repeats exactly.
    pub seed: u64,
}

impl ShimConfig {
    /// The same faults for the shared injector (delays in nanoseconds).
    pub fn faults(&self) -> Faults {
        Faults {
            loss: self.loss,
            duplicate: self.duplicate,
            reorder: self.reorder,
            reorder_delay: self.reorder_delay_us.saturating_mul(1_000),
            ..Faults::none()
        }
    }

    /// Whether any fault may happen (an inactive shim is not installed at all).
    pub fn is_active(&self) -> bool {
        self.faults().is_active()
    }

    /// Check the probabilities are probabilities.
    pub fn validate(&self) -> Result<(), FaultError> {
        self.faults().validate()
    }
}

/// What the shim did to the datagrams sent so far.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShimStats {
    /// Datagrams dropped.
    pub lost: u64,
    /// Datagrams sent twice.
    pub duplicated: u64,
    /// Datagrams held back (and so reordered).
    pub delayed: u64,
}

/// The fault injector on the send path: the dataplane's [`FaultInjector`], with the copies it
/// holds back kept here until they are due.
#[derive(Debug)]
pub(crate) struct Shim {
    injector: FaultInjector,
    /// Held-back datagrams by release time (and a sequence number to keep them apart).
    delayed: BTreeMap<(Instant, u64), Outgoing>,
    seq: u64,
}

impl Shim {
    /// A shim drawing `config`'s faults from its seed.
    pub(crate) fn new(config: &ShimConfig) -> Shim {
        Shim {
            injector: FaultInjector::new(config.faults(), config.seed),
            delayed: BTreeMap::new(),
            seq: 0,
        }
    }

    /// Queue what goes now of one datagram; held-back copies are kept.
    pub(crate) fn apply(&mut self, out: Outgoing, now: Instant, queue: &mut VecDeque<Outgoing>) {
        let Outgoing { to, ecn, bytes } = out;
        let (delayed, seq) = (&mut self.delayed, &mut self.seq);
        self.injector.apply(bytes, |bytes, delay| {
            let copy = Outgoing { to, ecn, bytes };
            if delay == 0 {
                queue.push_back(copy);
            } else {
                *seq += 1;
                delayed.insert((now + Duration::from_nanos(delay), *seq), copy);
            }
        });
    }

    /// What it did so far.
    pub(crate) fn stats(&self) -> ShimStats {
        let s = self.injector.stats();
        ShimStats {
            lost: s.lost,
            duplicated: s.duplicated,
            delayed: s.reordered,
        }
    }

    /// Queue the held-back copies due by `now`.
    pub(crate) fn release(&mut self, now: Instant, queue: &mut VecDeque<Outgoing>) {
        while let Some(entry) = self.delayed.first_entry() {
            if entry.key().0 > now {
                break;
            }
            queue.push_back(entry.remove());
        }
    }

    /// When the next held-back copy is due.
    pub(crate) fn next_release(&self) -> Option<Instant> {
        self.delayed.keys().next().map(|k| k.0)
    }
}

//! One fault injector for every driver (smoltcp's `FaultInjector` is the model: one wrapper,
//! any device). It decides, per packet and hop, whether the packet is lost, sent twice, has a
//! bit flipped, or is held back by an extra delay (which reorders it); the driver then puts the
//! surviving copies on its own links, simulated or real. The in-memory network, the simulator
//! and the UDP endpoint all run this code, so a fault setting means the same everywhere.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::node::Nanos;

/// Fault probabilities, each applied per packet per hop.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Faults {
    /// Probability that a packet is lost.
    pub loss: f64,
    /// Probability that a packet is delivered twice.
    pub duplicate: f64,
    /// Probability of an extra delay of up to `reorder_delay`, which reorders the packet.
    pub reorder: f64,
    /// Upper bound (exclusive) of that extra delay, nanoseconds.
    pub reorder_delay: Nanos,
    /// Probability that a copy has one bit flipped.
    pub corrupt: f64,
    /// Drop corrupted frames at the receiver, as the Ethernet frame check does. With `false`
    /// the corrupted bytes reach the protocol (to test that it rejects them without panicking).
    pub check_frames: bool,
}

impl Default for Faults {
    fn default() -> Self {
        Faults::none()
    }
}

impl Faults {
    /// No faults at all (the frame check on).
    pub fn none() -> Faults {
        Faults {
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_delay: 0,
            corrupt: 0.0,
            check_frames: true,
        }
    }

    /// Loss with probability `loss`, no other fault.
    pub fn lossy(loss: f64) -> Faults {
        Faults {
            loss,
            ..Faults::none()
        }
    }

    /// Whether any fault can happen.
    pub fn is_active(&self) -> bool {
        self.loss > 0.0
            || self.duplicate > 0.0
            || (self.reorder > 0.0 && self.reorder_delay > 0)
            || self.corrupt > 0.0
    }

    /// `Err` naming the first setting that is not a probability in [0, 1].
    pub fn validate(&self) -> Result<(), FaultError> {
        for (name, p) in [
            ("loss", self.loss),
            ("duplicate", self.duplicate),
            ("reorder", self.reorder),
            ("corrupt", self.corrupt),
        ] {
            if !(0.0..=1.0).contains(&p) {
                return Err(FaultError { name, value: p });
            }
        }
        Ok(())
    }
}

/// A fault setting that is not a probability.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[error("fault `{name}` = {value} is not a probability in [0, 1]")]
pub struct FaultError {
    /// The setting's name.
    pub name: &'static str,
    /// Its value.
    pub value: f64,
}

/// What the injector did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultStats {
    /// Packets offered to the injector.
    pub packets: u64,
    /// Packets lost.
    pub lost: u64,
    /// Packets sent twice.
    pub duplicated: u64,
    /// Copies held back by an extra delay.
    pub reordered: u64,
    /// Copies with a bit flipped.
    pub corrupted: u64,
    /// Corrupted copies dropped by the frame check.
    pub frame_errors: u64,
}

/// The seeded decision-maker. Deterministic for a seed and a sequence of packets.
#[derive(Debug, Clone)]
pub struct FaultInjector {
    faults: Faults,
    rng: ChaCha8Rng,
    stats: FaultStats,
}

impl FaultInjector {
    /// An injector of `faults`, its random choices seeded by `seed`.
    pub fn new(faults: Faults, seed: u64) -> FaultInjector {
        FaultInjector {
            faults,
            rng: ChaCha8Rng::seed_from_u64(seed),
            stats: FaultStats::default(),
        }
    }

    /// What the injector has done so far.
    pub fn stats(&self) -> &FaultStats {
        &self.stats
    }

    /// Decide the fate of one packet: `deliver(bytes, extra_delay)` is called once per copy
    /// that goes on (none when it is lost, two when it is duplicated), with the copy's bytes
    /// (a bit flipped when it was corrupted and the frame check is off) and the delay to add
    /// to its arrival (non-zero when it is held back).
    pub fn apply(&mut self, bytes: Vec<u8>, mut deliver: impl FnMut(Vec<u8>, Nanos)) {
        let f = self.faults;
        self.stats.packets += 1;
        if self.rng.random_bool(f.loss.clamp(0.0, 1.0)) {
            self.stats.lost += 1;
            return;
        }
        let twice = self.rng.random_bool(f.duplicate.clamp(0.0, 1.0));
        self.stats.duplicated += u64::from(twice);
        let mut first = Some(bytes);
        let copies = if twice { 2 } else { 1 };
        for i in 0..copies {
            let mut copy = if i + 1 == copies {
                first.take().expect("one packet")
            } else {
                first.clone().expect("one packet")
            };
            if !copy.is_empty() && self.rng.random_bool(f.corrupt.clamp(0.0, 1.0)) {
                self.stats.corrupted += 1;
                let bit = self.rng.random_range(0..copy.len() * 8);
                copy[bit / 8] ^= 1 << (bit % 8);
                if f.check_frames {
                    self.stats.frame_errors += 1;
                    continue;
                }
            }
            let mut delay = 0;
            if f.reorder_delay > 0 && self.rng.random_bool(f.reorder.clamp(0.0, 1.0)) {
                self.stats.reordered += 1;
                delay = self.rng.random_range(0..f.reorder_delay);
            }
            deliver(copy, delay);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fates(faults: Faults, n: usize) -> (Vec<(Vec<u8>, Nanos)>, FaultStats) {
        let mut inj = FaultInjector::new(faults, 9);
        let mut out = Vec::new();
        for i in 0..n {
            inj.apply(vec![i as u8; 8], |b, d| out.push((b, d)));
        }
        (out, *inj.stats())
    }

    #[test]
    fn no_faults_delivers_everything_once_on_time() {
        let (out, stats) = fates(Faults::none(), 100);
        assert_eq!(out.len(), 100);
        assert!(out.iter().all(|(_, d)| *d == 0));
        assert_eq!(stats.packets, 100);
        assert_eq!(stats.lost + stats.duplicated + stats.reordered, 0);
    }

    const MIXED: Faults = Faults {
        loss: 0.1,
        duplicate: 0.05,
        reorder: 0.2,
        reorder_delay: 1_000,
        corrupt: 0.0,
        check_frames: true,
    };

    #[test]
    fn each_fault_happens_about_as_often_as_asked() {
        let n = 20_000;
        let (out, s) = fates(MIXED, n);
        let near =
            |got: u64, p: f64, of: u64| (got as f64 - p * of as f64).abs() < 0.02 * of as f64;
        assert!(near(s.lost, 0.1, n as u64), "{s:?}");
        assert!(near(s.duplicated, 0.05, n as u64 - s.lost), "{s:?}");
        assert_eq!(out.len() as u64, n as u64 - s.lost + s.duplicated);
        let held_back = out.iter().filter(|(_, d)| *d > 0).count() as u64;
        assert!(held_back <= s.reordered && s.reordered > 0, "{s:?}");
        assert!(out.iter().all(|(_, d)| *d < 1_000));
        // Same seed, same fates.
        let (again, _) = fates(MIXED, n);
        assert_eq!(out, again);
    }

    #[test]
    fn corruption_flips_one_bit_or_is_caught_by_the_frame_check() {
        let all = Faults {
            corrupt: 1.0,
            check_frames: false,
            ..Faults::none()
        };
        let (out, s) = fates(all, 50);
        assert_eq!(s.corrupted, 50);
        for (i, (b, _)) in out.iter().enumerate() {
            let flipped: u32 = b.iter().map(|&x| (x ^ i as u8).count_ones()).sum();
            assert_eq!(flipped, 1);
        }
        let (out, s) = fates(
            Faults {
                check_frames: true,
                ..all
            },
            50,
        );
        assert!(out.is_empty());
        assert_eq!(s.frame_errors, 50);
        assert!(Faults {
            loss: 1.5,
            ..Faults::none()
        }
        .validate()
        .is_err());
    }
}

//! Who the switch answers, and who it admits, when any host can send it a datagram.
//!
//! - **Replies to strangers are rate-limited.** An address that has not joined gets an
//!   `Unknown`, `Refuse` or `Challenge` at most once per [`REPLY_EVERY`], and all such replies
//!   together at most [`REPLY_BURST`] at once and [`REPLIES_PER_SECOND`] after that; the
//!   addresses remembered for this are at most [`MAX_TRACKED`]. A flood of datagrams with
//!   forged sources therefore makes the switch send a few hundred small replies a second at
//!   most: no reflection amplifier, and no memory that grows with the flood.
//! - **An admission secret.** With a secret in the job file, a hello must carry a proof: the
//!   switch answers a hello without one with a `Challenge` (a fresh random nonce, bound to the
//!   address it was sent to and good for one use within [`CHALLENGE_TTL`]); the worker answers
//!   with HMAC-SHA256 of the nonce and its hello under the secret. Whoever does not hold the
//!   secret cannot take a rank, and a proof seen on the wire is worthless from another address
//!   or a second time.

use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::sync::Arc;

use hmac::{Hmac, Mac};
use rand::RngCore;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use super::Hello;
use crate::node::Nanos;

/// One reply to a given stranger at most this often.
pub const REPLY_EVERY: Nanos = 50_000_000;
/// Replies to strangers the switch may send at once...
pub const REPLY_BURST: u64 = 64;
/// ...and per second after that.
pub const REPLIES_PER_SECOND: u64 = 256;
/// Strangers (and outstanding challenges) remembered at most.
pub const MAX_TRACKED: usize = 4096;
/// How long a challenge's nonce stays good.
pub const CHALLENGE_TTL: Nanos = 10_000_000_000;
/// The shortest secret accepted (bytes).
pub const MIN_SECRET_LEN: usize = 16;

/// What the MAC covers, before the nonce and the hello: names the protocol and its version.
const PROOF_CONTEXT: &[u8] = b"switchgnn admission proof v1\0";

/// A job's admission secret. Its `Debug` shows no byte of it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Arc<[u8]>);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret({} bytes)", self.0.len())
    }
}

impl Secret {
    /// A secret of at least [`MIN_SECRET_LEN`] bytes.
    pub fn new(bytes: impl Into<Vec<u8>>) -> Result<Secret, String> {
        let bytes = bytes.into();
        if bytes.len() < MIN_SECRET_LEN {
            return Err(format!(
                "an admission secret of {} bytes is too short to resist guessing ({} at least)",
                bytes.len(),
                MIN_SECRET_LEN
            ));
        }
        Ok(Secret(bytes.into()))
    }

    /// HMAC-SHA256 under the secret of `parts` after `context` (the name and version of what
    /// is signed, so that a MAC made for one use never passes for another).
    fn keyed(&self, context: &[u8], parts: &[&[u8]]) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key length");
        mac.update(context);
        for p in parts {
            mac.update(p);
        }
        mac
    }

    /// The MAC of `parts` under `context`, for protocols beside the control plane (the
    /// all-reduce service's hello).
    pub fn sign(&self, context: &[u8], parts: &[&[u8]]) -> [u8; 32] {
        self.keyed(context, parts).finalize().into_bytes().into()
    }

    /// Whether `mac` is [`Secret::sign`]'s for `parts` (compared in constant time).
    pub fn check(&self, context: &[u8], parts: &[&[u8]], mac: &[u8]) -> bool {
        self.keyed(context, parts).verify_slice(mac).is_ok()
    }

    fn mac(&self, nonce: &str, hello: &Hello) -> Hmac<Sha256> {
        let mut mac = self.keyed(PROOF_CONTEXT, &[nonce.as_bytes()]);
        mac.update(&hello.control_version.to_le_bytes());
        mac.update(&[hello.wire_version]);
        mac.update(&hello.job.to_le_bytes());
        mac.update(&hello.rank.to_le_bytes());
        mac.update(&hello.world.to_le_bytes());
        mac.update(&hello.plan_checksum.to_le_bytes());
        mac.update(hello.mode.as_bytes());
        mac
    }

    /// The proof of `hello` for the switch's `nonce`.
    pub fn prove(&self, nonce: &str, hello: &Hello) -> Proof {
        Proof {
            nonce: nonce.to_string(),
            mac: hex::encode(self.mac(nonce, hello).finalize().into_bytes()),
        }
    }

    /// Whether `proof` is `hello`'s under this secret (compared in constant time).
    pub fn verify(&self, hello: &Hello, proof: &Proof) -> bool {
        match hex::decode(&proof.mac) {
            Ok(bytes) => self.mac(&proof.nonce, hello).verify_slice(&bytes).is_ok(),
            Err(_) => false,
        }
    }
}

/// A hello's answer to a challenge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proof {
    /// The nonce of the challenge answered.
    pub nonce: String,
    /// HMAC-SHA256 under the secret of the nonce and the hello's fields, in hex.
    pub mac: String,
}

/// The budget of replies to addresses that have not joined.
#[derive(Debug)]
pub(crate) struct ReplyLimiter<A> {
    last: HashMap<A, Nanos>,
    /// Accumulated credit, in nanoseconds of refill; a reply costs one refill interval.
    credit: Nanos,
    refilled: Nanos,
}

const REFILL: Nanos = 1_000_000_000 / REPLIES_PER_SECOND;

impl<A: Clone + Eq + Hash> ReplyLimiter<A> {
    pub(crate) fn new(now: Nanos) -> ReplyLimiter<A> {
        ReplyLimiter {
            last: HashMap::new(),
            credit: REPLY_BURST * REFILL,
            refilled: now,
        }
    }

    /// Whether a reply to `to` may go out at `now` (and if so, it is counted).
    pub(crate) fn allow(&mut self, now: Nanos, to: &A) -> bool {
        self.credit = (self.credit + now.saturating_sub(self.refilled)).min(REPLY_BURST * REFILL);
        self.refilled = self.refilled.max(now);
        if self
            .last
            .get(to)
            .is_some_and(|&t| now.saturating_sub(t) < REPLY_EVERY)
        {
            return false;
        }
        if self.credit < REFILL {
            return false;
        }
        if !self.last.contains_key(to) && self.last.len() >= MAX_TRACKED {
            self.last
                .retain(|_, t| now.saturating_sub(*t) < REPLY_EVERY);
            if self.last.len() >= MAX_TRACKED {
                return false;
            }
        }
        self.credit -= REFILL;
        self.last.insert(to.clone(), now);
        true
    }

    /// Addresses remembered.
    pub(crate) fn tracked(&self) -> usize {
        self.last.len()
    }
}

/// What a hello proves under a secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// A proof of this hello for the nonce sent to its address.
    Proven,
    /// No proof: a first hello.
    Unproven,
    /// A proof for a nonce this address does not hold (stale, used, another's): a replay, or
    /// a worker whose challenge expired.
    Stale,
    /// A proof for the right nonce that does not verify: another secret.
    Wrong,
}

/// Outstanding challenges, one per address.
#[derive(Debug)]
pub(crate) struct Challenges<A> {
    secret: Secret,
    rng: ChaCha8Rng,
    issued: HashMap<A, (String, Nanos)>,
}

impl<A: Clone + Eq + Hash> Challenges<A> {
    /// Challenges under `secret`, their nonces drawn from `seed` (the driver's randomness: the
    /// machine itself stays deterministic).
    pub(crate) fn new(secret: Secret, seed: u64) -> Challenges<A> {
        Challenges {
            secret,
            rng: ChaCha8Rng::seed_from_u64(seed),
            issued: HashMap::new(),
        }
    }

    /// Judge `hello` from `from`; a proven nonce is used up.
    pub(crate) fn judge(&mut self, now: Nanos, from: &A, hello: &Hello) -> Verdict {
        let Some(proof) = &hello.proof else {
            return Verdict::Unproven;
        };
        let fresh = self
            .issued
            .get(from)
            .is_some_and(|(n, t)| *n == proof.nonce && now.saturating_sub(*t) < CHALLENGE_TTL);
        if !fresh {
            return Verdict::Stale;
        }
        // Used up either way: a wrong guess does not get to try the same nonce again.
        self.issued.remove(from);
        if self.secret.verify(hello, proof) {
            Verdict::Proven
        } else {
            Verdict::Wrong
        }
    }

    /// A fresh nonce for `to`, replacing any earlier one; `None` when too many are
    /// outstanding.
    pub(crate) fn issue(&mut self, now: Nanos, to: &A) -> Option<String> {
        if !self.issued.contains_key(to) && self.issued.len() >= MAX_TRACKED {
            self.issued
                .retain(|_, (_, t)| now.saturating_sub(*t) < CHALLENGE_TTL);
            if self.issued.len() >= MAX_TRACKED {
                return None;
            }
        }
        let mut bytes = [0u8; 16];
        self.rng.fill_bytes(&mut bytes);
        let nonce = hex::encode(bytes);
        self.issued.insert(to.clone(), (nonce.clone(), now));
        Some(nonce)
    }
}

//! When the switch process last heard from each worker, shared between the switch's driver
//! (which hears every datagram, heartbeats included) and the collective service (which would
//! otherwise only know that a worker has not sent its round yet). A worker is judged by
//! whether it is alive, not by how long its computation takes: workers send heartbeats while
//! they compute, so a silent worker is a dead or hung one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Last-heard times per rank, readable from any thread.
#[derive(Debug)]
pub struct Liveness {
    epoch: Instant,
    /// Milliseconds since `epoch` plus one; 0 = never heard.
    last_heard: Vec<AtomicU64>,
    peer_timeout: Duration,
}

impl Liveness {
    /// A table for `world` workers, none heard yet; one silent for `peer_timeout` is gone.
    pub fn new(world: u16, peer_timeout: Duration) -> Liveness {
        Liveness {
            epoch: Instant::now(),
            last_heard: (0..world).map(|_| AtomicU64::new(0)).collect(),
            peer_timeout,
        }
    }

    /// Rank `rank` was heard at `now`.
    pub fn heard(&self, rank: u16, now: Instant) {
        if let Some(slot) = self.last_heard.get(usize::from(rank)) {
            let ms = now.saturating_duration_since(self.epoch).as_millis() as u64 + 1;
            slot.fetch_max(ms, Ordering::Relaxed);
        }
    }

    /// How long rank `rank` has been silent (since this table was made, if never heard).
    pub fn silent_for(&self, rank: u16, now: Instant) -> Duration {
        let since = now.saturating_duration_since(self.epoch);
        let heard = self
            .last_heard
            .get(usize::from(rank))
            .map_or(0, |s| s.load(Ordering::Relaxed));
        since.saturating_sub(Duration::from_millis(heard.saturating_sub(1)))
    }

    /// `Err` with the silence when rank `rank` has been silent for longer than the peer
    /// timeout.
    pub fn check(&self, rank: u16, now: Instant) -> Result<(), Duration> {
        let silent = self.silent_for(rank, now);
        if silent > self.peer_timeout {
            Err(silent)
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silence_counts_from_the_last_datagram() {
        let l = Liveness::new(2, Duration::from_millis(100));
        let t0 = Instant::now();
        l.heard(0, t0 + Duration::from_millis(50));
        let at = t0 + Duration::from_millis(120);
        assert!(l.silent_for(0, at) <= Duration::from_millis(72));
        assert!(l.check(0, at).is_ok());
        assert!(l.check(1, at).is_err(), "rank 1 was never heard");
        assert!(l.check(0, t0 + Duration::from_millis(300)).is_err());
        // Out-of-range ranks are never alive.
        assert!(l.check(9, at).is_err());
    }
}

//! One model of a link direction and the queue that feeds it, for every driver: the
//! simulator's links, the in-memory network's links and the switch process's egress ports.
//!
//! A [`Port`] is a FIFO with a rate, a propagation delay and a drop-tail buffer. Service is
//! deterministic, so a packet's departure is known when it is queued
//! (`max(now, last departure) + size / rate`) and the backlog at any instant follows from the
//! last departure: no event is needed when a port goes idle. Times inside a port are kept in
//! picoseconds so that serialisation times of a few nanoseconds do not accumulate rounding.

use serde::{Deserialize, Serialize};

use crate::node::Nanos;

/// Picoseconds: the resolution of departures inside ports.
pub type Picos = u64;

/// `ns` nanoseconds in picoseconds.
pub fn to_picos(ns: Nanos) -> Picos {
    ns.saturating_mul(1_000)
}

/// The first nanosecond at or after `ps`.
pub fn ceil_nanos(ps: Picos) -> Nanos {
    ps.div_ceil(1_000)
}

/// Link rate (bytes per second; infinite for no serialisation) and one-way delay.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LinkConfig {
    /// Bytes per second; infinite for no serialisation delay.
    pub rate: f64,
    /// One-way delay, nanoseconds.
    pub delay: Nanos,
}

impl LinkConfig {
    /// One direction of such a link, with an unbounded queue.
    pub fn port(&self) -> Port {
        Port::new(self.rate * 8.0 / 1e9, self.delay, u64::MAX)
    }

    /// The paper's links: 100 Gbps, 2 µs.
    pub fn hundred_gbps() -> LinkConfig {
        LinkConfig {
            rate: 100e9 / 8.0,
            delay: 2_000,
        }
    }
}

/// One direction of a link, with the queue that feeds it.
#[derive(Debug, Clone)]
pub struct Port {
    /// Picoseconds per byte.
    ps_per_byte: f64,
    /// One-way propagation delay.
    pub delay: Nanos,
    /// Drop-tail limit of the backlog (bytes).
    pub buffer: u64,
    /// When the last queued byte leaves.
    last_departure: Picos,
    /// What crossed the port so far.
    pub stats: PortStats,
}

/// What crossed one port.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PortStats {
    /// Packets queued (and so sent).
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Packets dropped at the full buffer.
    pub drops: u64,
    /// Their bytes.
    pub dropped_bytes: u64,
    /// Deepest backlog right after a packet was queued.
    pub peak_backlog: u64,
}

impl Port {
    /// A port of `gbps` (infinite: no serialisation), `delay` and a buffer of `buffer` bytes.
    pub fn new(gbps: f64, delay: Nanos, buffer: u64) -> Port {
        Port {
            ps_per_byte: 8_000.0 / gbps,
            delay,
            buffer,
            last_departure: 0,
            stats: PortStats::default(),
        }
    }

    /// Serialisation time of `bytes`.
    pub fn serialise(&self, bytes: u64) -> Picos {
        (bytes as f64 * self.ps_per_byte).round() as Picos
    }

    /// Whether the port has nothing queued or on the wire at `now`.
    pub fn idle_at(&self, now: Picos) -> bool {
        self.last_departure <= now
    }

    /// Bytes queued or on the wire at `now`.
    pub fn backlog(&self, now: Picos) -> u64 {
        let left = self.last_departure.saturating_sub(now);
        if left == 0 || self.ps_per_byte == 0.0 {
            return 0;
        }
        (left as f64 / self.ps_per_byte).round() as u64
    }

    /// Queue `bytes` that are ready at `ready`: the time its last bit reaches the far end, or
    /// `None` when the buffer is full and the packet is dropped.
    pub fn send(&mut self, ready: Picos, bytes: u64) -> Option<Picos> {
        let backlog = self.backlog(ready);
        if backlog + bytes > self.buffer {
            self.stats.drops += 1;
            self.stats.dropped_bytes += bytes;
            return None;
        }
        let departure = self.last_departure.max(ready) + self.serialise(bytes);
        self.last_departure = departure;
        self.stats.packets += 1;
        self.stats.bytes += bytes;
        self.stats.peak_backlog = self.stats.peak_backlog.max(backlog + bytes);
        Some(departure + to_picos(self.delay))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_serialises_back_to_back_and_drops_at_its_buffer() {
        // 8 Gbps: one byte per nanosecond.
        let mut p = Port::new(8.0, 100, 250);
        assert_eq!(p.send(0, 100), Some(to_picos(200)));
        // Queued behind the first: leaves at 200 ns.
        assert_eq!(p.send(0, 100), Some(to_picos(300)));
        assert_eq!(p.backlog(0), 200);
        assert_eq!(p.backlog(to_picos(150)), 50);
        // 200 queued + 100 > 250: dropped.
        assert_eq!(p.send(0, 100), None);
        assert_eq!(p.stats.drops, 1);
        assert_eq!(p.stats.peak_backlog, 200);
        // Idle again later: no queueing.
        assert_eq!(p.send(to_picos(1_000), 10), Some(to_picos(1_110)));
    }
}

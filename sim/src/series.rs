//! Time series of a run, in fixed buckets of simulated time, filled as events happen (no
//! sampling events): what was sent and delivered, how deep the egress queues got, how many
//! aggregators were held and how busy the recirculation paths were.

use serde::{Deserialize, Serialize};
use switchgnn_dataplane::wire::{Packet, PacketType};
use switchgnn_dataplane::Nanos;

/// Bytes delivered to hosts, by what they carried.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Traffic {
    /// Sums aggregated in the switch (`Result` packets with lanes).
    pub aggregated: u64,
    /// Contributions that reached a host unaggregated (host exchange, overflow, fetch replies).
    pub raw: u64,
    /// Everything else: acknowledgements, fetch requests, barriers.
    pub other: u64,
}

impl Traffic {
    /// Count `wire` frame bytes of `class`.
    pub fn add(&mut self, class: Class, wire: u64) {
        match class {
            Class::Aggregated => self.aggregated += wire,
            Class::Raw => self.raw += wire,
            Class::Other => self.other += wire,
        }
    }

    /// Frame bytes of every class.
    pub fn total(&self) -> u64 {
        self.aggregated + self.raw + self.other
    }

    /// Share of the feature bytes delivered that the switch aggregated.
    pub fn aggregation_share(&self) -> f64 {
        let features = self.aggregated + self.raw;
        if features == 0 {
            0.0
        } else {
            self.aggregated as f64 / features as f64
        }
    }
}

/// What a packet delivered to a host carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// A sum from the switch, with lanes.
    Aggregated,
    /// Features sent unaggregated: raw copies and packed host rows.
    Raw,
    /// Anything else: acknowledgements, fetch requests, barriers.
    Other,
}

impl Class {
    /// The class of a dataplane packet (anything unparsable is `Other`).
    pub fn of(packet: &Packet<&[u8]>) -> Class {
        let t = packet.packet_type();
        if packet.is_packed_rows() {
            Class::Raw
        } else if packet.lanes() == 0 {
            Class::Other
        } else if t == PacketType::Result as u8 {
            Class::Aggregated
        } else if t == PacketType::Raw as u8 {
            Class::Raw
        } else {
            Class::Other
        }
    }
}

/// One bucket.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Bucket {
    /// Frame bytes hosts put on their uplinks.
    pub sent: u64,
    /// Frame bytes delivered to hosts, by what they carried.
    pub delivered: Traffic,
    /// Frame bytes dropped at full queues.
    pub dropped: u64,
    /// Deepest egress backlog seen in the bucket (bytes).
    pub queue_max: u64,
    /// Most aggregators held at once.
    pub aggregators_max: usize,
    /// Time the recirculation paths were busy within the bucket, as a share of their whole
    /// capacity.
    pub recirculation_ns: f64,
}

/// Measurements over time, in buckets of equal width.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Series {
    /// Width of a bucket.
    pub bucket_ns: Nanos,
    /// The buckets from time 0.
    pub buckets: Vec<Bucket>,
}

impl Series {
    /// An empty series of `bucket_ns` buckets (at least 1 ns).
    pub fn new(bucket_ns: Nanos) -> Series {
        Series {
            bucket_ns: bucket_ns.max(1),
            buckets: Vec::new(),
        }
    }

    fn at(&mut self, now: Nanos) -> &mut Bucket {
        let i = (now / self.bucket_ns) as usize;
        if i >= self.buckets.len() {
            self.buckets.resize(i + 1, Bucket::default());
        }
        &mut self.buckets[i]
    }

    /// Hosts sent `wire` frame bytes at `now`.
    pub fn sent(&mut self, now: Nanos, wire: u64) {
        self.at(now).sent += wire;
    }

    /// `wire` frame bytes of `class` reached a host at `now`.
    pub fn delivered(&mut self, now: Nanos, class: Class, wire: u64) {
        self.at(now).delivered.add(class, wire);
    }

    /// `wire` frame bytes were dropped at `now`.
    pub fn dropped(&mut self, now: Nanos, wire: u64) {
        self.at(now).dropped += wire;
    }

    /// An egress backlog of `backlog` bytes at `now`.
    pub fn queue(&mut self, now: Nanos, backlog: u64) {
        let b = self.at(now);
        b.queue_max = b.queue_max.max(backlog);
    }

    /// `in_use` aggregators held at `now`.
    pub fn aggregators(&mut self, now: Nanos, in_use: usize) {
        let b = self.at(now);
        b.aggregators_max = b.aggregators_max.max(in_use);
    }

    /// A recirculation path that is `share` of the chip's recirculation capacity is busy from
    /// `from_ns` to `to_ns`: each bucket gets its part of the time, times that share.
    pub fn recirculated(&mut self, from_ns: f64, to_ns: f64, share: f64) {
        let width = self.bucket_ns as f64;
        let mut t = from_ns;
        while t < to_ns {
            let end = ((t / width).floor() + 1.0) * width;
            let piece = end.min(to_ns) - t;
            self.at(t as Nanos).recirculation_ns += piece * share;
            t = end;
        }
    }

    /// Gbit/s of `bytes` over one bucket.
    pub fn gbps(&self, bytes: u64) -> f64 {
        bytes as f64 * 8.0 / self.bucket_ns as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recirculation_time_is_split_across_buckets() {
        let mut s = Series::new(100);
        s.recirculated(50.0, 320.0, 1.0);
        let busy: Vec<f64> = s.buckets.iter().map(|b| b.recirculation_ns).collect();
        assert_eq!(busy, vec![50.0, 100.0, 100.0, 20.0]);
        s.recirculated(320.0, 320.0, 1.0);
        s.recirculated(0.0, 100.0, 0.25);
        assert_eq!(s.buckets[0].recirculation_ns, 75.0);
        assert_eq!(s.buckets.len(), 4);
    }
}

//! The cost model the search scores moves with: a block's loads as the chip model counts
//! them, and what one row of a candidate adds to them either way.

use switchgnn_chip::{Chip, HostCost, PASS_HEADER};
use switchgnn_dataplane::switch::{readout_passes, readout_passes_at, LANES_READ_PER_PAIR_PASS};
use switchgnn_dataplane::wire::{HEADER_LEN, MAX_LANES};

/// One (source, block, destination worker) unit of choice: the source's neighbours in that
/// block on that worker are `neighbours[start..end]`. `key` is `block · workers + worker`;
/// `group` numbers the (source, block) pairs: a source goes up once per block it multicasts
/// into, whatever the workers.
#[derive(Debug, Clone, Copy)]
pub(super) struct Candidate {
    pub(super) u: u32,
    pub(super) key: u32,
    pub(super) start: u32,
    pub(super) end: u32,
    pub(super) group: u32,
}

impl Candidate {
    pub(super) fn rows(&self) -> u32 {
        self.end - self.start
    }
}

/// One block's loads, as `switchgnn_chip::Load::of_block` counts them for the plan, and the
/// serial estimate of `switchgnn_chip::Bound` on them. Every figure is a whole number (well
/// below 2^53), so adding and taking back a move leaves it exactly as it was.
#[derive(Debug, Clone)]
pub(super) struct BlockModel {
    pub(super) sent_bytes: Vec<f64>,
    pub(super) received_bytes: Vec<f64>,
    pub(super) sent_packets: Vec<f64>,
    pub(super) received_packets: Vec<f64>,
    pub(super) passes: f64,
    pub(super) recirculated_bytes: f64,
    pub(super) lane_updates: f64,
}

pub(super) fn time(x: f64, rate: f64) -> f64 {
    if rate.is_infinite() {
        0.0
    } else {
        x / rate
    }
}

impl BlockModel {
    pub(super) fn new(workers: usize) -> BlockModel {
        BlockModel {
            sent_bytes: vec![0.0; workers],
            received_bytes: vec![0.0; workers],
            sent_packets: vec![0.0; workers],
            received_packets: vec![0.0; workers],
            passes: 0.0,
            recirculated_bytes: 0.0,
            lane_updates: 0.0,
        }
    }

    pub(super) fn host(&self, cost: &HostCost, w: usize) -> f64 {
        let bytes = self.sent_bytes[w].max(self.received_bytes[w]);
        let packets = self.sent_packets[w].max(self.received_packets[w]);
        let link = cost.link_gbps * 1e9 / 8.0;
        (bytes / link).max(packets * cost.per_packet_ns * 1e-9)
    }

    pub(super) fn switch(&self, chip: &Chip) -> f64 {
        time(self.lane_updates, chip.lane_rate())
            .max(time(self.passes, chip.pass_rate()))
            .max(time(self.recirculated_bytes, chip.loopback_bytes_per_s()))
    }

    /// The busiest host and the block's serial estimate (its busiest host's time plus its
    /// switch's).
    pub(super) fn estimate(&self, chip: &Chip, cost: &HostCost) -> (usize, f64) {
        let (busiest, host) = (0..self.sent_bytes.len())
            .map(|w| (w, self.host(cost, w)))
            .fold((0, 0.0), |a, b| if b.1 > a.1 { b } else { a });
        (busiest, host + self.switch(chip))
    }

    pub(super) fn apply(&mut self, m: &Move, sign: f64) {
        self.sent_packets[m.w] += sign * m.packets;
        self.received_packets[m.w] += sign * m.packets;
        self.sent_bytes[m.w] += sign * m.bytes;
        self.received_bytes[m.w] += sign * m.ack_bytes;
        self.passes += sign * m.passes;
        self.recirculated_bytes += sign * m.recirculated;
        self.lane_updates += sign * m.lanes;
    }
}

/// What moving one candidate from partial sums to multicast changes: host `w`'s packets and
/// bytes each way (uplink packets and their acknowledgements), and the switch's passes,
/// recirculated bytes and lane updates. Moving it back takes the same away.
pub(super) struct Move {
    pub(super) w: usize,
    pub(super) packets: f64,
    pub(super) bytes: f64,
    pub(super) ack_bytes: f64,
    pub(super) passes: f64,
    pub(super) recirculated: f64,
    pub(super) lanes: f64,
}

/// The figures of one exchanged row at the plan's width.
#[derive(Debug, Clone, Copy)]
pub(super) struct Row {
    pub(super) chunks: f64,
    pub(super) width: f64,
    /// Header and frame of one packet.
    pub(super) header: f64,
    /// Every chunk's packet, frames included.
    pub(super) feature_bytes: f64,
    /// What one more aggregator pass of every chunk recirculates.
    pub(super) recirculated_per_pass: f64,
    /// The readout passes of one finished sum, and what they recirculate.
    pub(super) readouts: f64,
    pub(super) readout_bytes: f64,
}

impl Row {
    pub(super) fn new(width: usize, chip: &Chip, cost: &HostCost) -> Row {
        let chunks = width.div_ceil(MAX_LANES);
        let header = HEADER_LEN as u64 + cost.frame_overhead;
        let (mut readouts, mut readout_bytes) = (0u64, 0u64);
        for c in 0..chunks {
            let lanes = (width - c * MAX_LANES).min(MAX_LANES);
            // A sum is completed in place by its last partial (as `Load` counts it for every
            // row of a reduce block).
            let reads = if chip.reads_pairs {
                readout_passes_at(lanes, true, LANES_READ_PER_PAIR_PASS)
            } else {
                readout_passes(lanes, true)
            };
            readouts += reads;
            readout_bytes += reads * (header + 4 * lanes as u64 + PASS_HEADER);
        }
        let feature_bytes = chunks as u64 * header + 4 * width as u64;
        Row {
            chunks: chunks as f64,
            width: width as f64,
            header: header as f64,
            feature_bytes: feature_bytes as f64,
            recirculated_per_pass: (feature_bytes + chunks as u64 * PASS_HEADER) as f64,
            readouts: readouts as f64,
            readout_bytes: readout_bytes as f64,
        }
    }

    /// Moving a candidate of `rows` rows from `w` to multicast, where `removed` of its
    /// destinations' partial sums disappear and `upload` says whether its source goes up into
    /// this block for the first time.
    pub(super) fn move_of(&self, w: usize, rows: u32, removed: u32, upload: bool) -> Move {
        let (d, r) = (f64::from(rows), f64::from(removed));
        let new = if upload { 1.0 } else { 0.0 };
        Move {
            w,
            packets: self.chunks * (new - r),
            bytes: self.feature_bytes * (new - r),
            ack_bytes: self.chunks * self.header * (new - r),
            // A partial sum makes two passes (its checks, its aggregator); a feature one for its
            // checks if it is new, then one per destination, each a trip.
            passes: self.chunks * (new + d - 2.0 * r),
            recirculated: (d - r) * self.recirculated_per_pass,
            lanes: self.width * (d - r),
        }
    }
}

//! How the host exchange puts rows on the wire: as many 64-lane chunks as fit one packet of
//! the link's MTU, per receiving worker, and one acknowledgement of ranges for every few
//! packets — what TCP or a tuned datagram transport does, rather than one chunk per packet
//! and an ack per packet. The engines pack by this rule and the chip model counts by it.

use serde::{Deserialize, Serialize};

use crate::plan::{ExchangePlan, Mode, PlanBlock};
use crate::wire::{record_len, HEADER_LEN};

/// IPv4 and UDP headers, bytes: the part of the MTU that carries no switchgnn bytes.
pub const IP_UDP_HEADERS: usize = 28;

/// Rows to one receiver laid out together, chunk by chunk, where a row's last chunk is
/// shorter than the others: the group's first chunks, then its second chunks, and so on.
/// Records of one length then fill packets of one size, and a segmentation-offload send
/// carries a run of equal-sized datagrams; row by row, the short last chunk made nearly every
/// packet a different size (0.27 system calls per datagram at the software switch at width
/// 745, against 0.03 for the one-chunk packets of the in-network kinds). Small enough that a
/// destination's chunks still arrive close together.
pub const ROW_GROUP: usize = 64;

/// The rows `plan`'s packed streams group ([`ROW_GROUP`]), or 1 (row by row) where grouping
/// gains nothing or must not be: a width of whole 64-lane chunks packs equal records either
/// way (and in the simulator, at width 128 and 32 workers, grouping made the host hybrid's
/// bursts to one receiver cross the ECN threshold: 1.4x slower), and the host two-level
/// exchange's proxies must send their own rows before those that wait for their rack's shares
/// (a group mixing both would hold a proxy's own rows back, and two proxies could wait on each
/// other).
pub fn row_group(plan: &ExchangePlan) -> usize {
    let uneven = plan.chunks() > 1 && plan.width % crate::wire::MAX_LANES != 0;
    if uneven && plan.mode != Mode::HostTwoLevel {
        ROW_GROUP
    } else {
        1
    }
}

/// The MTU and the packets per acknowledgement of the host exchange's packed copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostFraming {
    /// The largest IP packet on a host link, bytes: 1,500, or 9,000 with jumbo frames.
    pub mtu: u32,
    /// A receiver acknowledges once per this many packets from one sender (sooner at a gap,
    /// a duplicate or the end of a burst), each ack covering every range it holds. TCP's
    /// delayed acks cover two; QUIC and tuned stacks coalesce more.
    pub ack_every: u32,
}

impl Default for HostFraming {
    fn default() -> Self {
        HostFraming {
            mtu: 1_500,
            ack_every: 8,
        }
    }
}

impl HostFraming {
    /// The smallest MTU accepted: IPv4's minimum datagram every host must take.
    pub const MIN_MTU: u32 = 576;
    /// The largest accepted: a 9,216-byte jumbo frame, a common switch limit (the drivers'
    /// datagram buffers, [`crate::node::MAX_DATAGRAM_LEN`], hold its payload).
    pub const MAX_MTU: u32 = (crate::node::MAX_DATAGRAM_LEN + IP_UDP_HEADERS) as u32;

    /// Bytes of one packed packet, IP and UDP headers aside: what a driver sends.
    pub fn datagram_len(&self) -> usize {
        self.mtu as usize - IP_UDP_HEADERS
    }

    /// Bytes of records one packet carries: the datagram less the switchgnn header.
    pub fn record_bytes(&self) -> usize {
        self.datagram_len() - HEADER_LEN
    }

    /// Packets that carry `rows` rows of `plan`'s width from one host to another, and the
    /// bytes of their records (record headers and lanes, not the packet headers). A row goes
    /// as its 64-lane chunks, a record each (the unit a receiver counts and a fetch asks for),
    /// laid out [`row_group`] rows at a time, chunk by chunk; each packet takes records in
    /// order while they fit, then the next one opens.
    pub fn pack(&self, rows: u64, plan: &ExchangePlan) -> (u64, u64) {
        let group = row_group(plan) as u64;
        let lens: Vec<usize> = (0..plan.chunks())
            .map(|c| record_len(plan.chunk_lanes(c)))
            .collect();
        let groups = (0..rows.div_ceil(group)).map(|g| (rows - g * group).min(group));
        self.pack_records(groups.flat_map(|n| {
            lens.iter()
                .flat_map(move |&len| std::iter::repeat_n(len, n as usize))
        }))
    }

    /// Packets that carry records of the lengths `records` (bytes, in order) and their bytes:
    /// each packet takes records while they fit, then the next one opens.
    pub fn pack_records(&self, records: impl IntoIterator<Item = usize>) -> (u64, u64) {
        let room = self.record_bytes();
        let (mut packets, mut bytes, mut left) = (0u64, 0u64, 0usize);
        for record in records {
            if left < record {
                packets += 1;
                left = room;
            }
            left -= record;
            bytes += record as u64;
        }
        (packets, bytes)
    }

    /// Acknowledgements a receiver sends for `packets` packets from one sender, at least.
    pub fn acks(&self, packets: u64) -> u64 {
        packets.div_ceil(u64::from(self.ack_every.max(1)))
    }
}

/// The host-to-host rows in `block` of a `plan` the switch only forwards, per ordered worker
/// pair: entry `from · workers + to` counts the rows `from` sends `to` — in the host exchange
/// each boundary vertex once to every other worker that holds a neighbour of it, in the
/// host-only pre-aggregated exchange one partial sum per destination of `to` that `from`'s
/// vertices neighbour, in the host hybrid those partial sums plus each multicast sender once
/// to every worker owning one of its rows (its raw copies), in the host two-level exchange
/// each pair's partial sum from its worker (the rack's proxy, or a worker of the owner's rack)
/// plus one partial per (destination, other worker of the proxy's rack feeding it) to the
/// proxy. What the chip model and the spine count pack.
pub fn copies_per_pair(plan: &ExchangePlan, block: &PlanBlock) -> Vec<u64> {
    let n = usize::from(plan.workers);
    let mut copies = vec![0u64; n * n];
    let t = &block.table;
    let mut targets: Vec<u16> = Vec::new();
    if plan.mode.pre_aggregated() {
        // Row `i` is a destination; its slots are the workers sending it partials.
        for row in 0..t.len() {
            let owner = t.workers[row] as usize;
            for &from in t.row(row) {
                copies[from as usize * n + owner] += 1;
            }
        }
        if plan.mode == Mode::HostTwoLevel && block.partials.known() {
            // A proxy's pair sums its rack: every other worker owning some of its sources
            // sends the proxy one partial first.
            for (p, &proxy) in t.slots.iter().enumerate() {
                targets.clear();
                targets.extend(
                    block
                        .partials
                        .of(p)
                        .iter()
                        .map(|&u| plan.owner[u as usize])
                        .filter(|&w| u32::from(w) != proxy),
                );
                targets.sort_unstable();
                targets.dedup();
                for &from in &targets {
                    copies[usize::from(from) * n + proxy as usize] += 1;
                }
            }
        }
        let m = &block.multicast;
        for i in 0..m.len() {
            let from = usize::from(plan.owner[m.vertices[i] as usize]);
            targets.clear();
            targets.extend(m.rows_of(i).iter().map(|&r| t.workers[r as usize] as u16));
            targets.sort_unstable();
            targets.dedup();
            for &to in &targets {
                copies[from * n + usize::from(to)] += 1;
            }
        }
        return copies;
    }
    for row in 0..t.len() {
        let owner = t.workers[row] as u16;
        targets.clear();
        targets.extend(
            block
                .sources(row)
                .map(|s| plan.owner[s as usize])
                .filter(|&w| w != owner),
        );
        targets.sort_unstable();
        targets.dedup();
        for &to in &targets {
            copies[usize::from(owner) * n + usize::from(to)] += 1;
        }
    }
    copies
}

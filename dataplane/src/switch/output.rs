//! What leaves the switch: the pipeline's shared resources (aggregator pool, queue depths,
//! outbox, counters), the ECN marking and accounting of every packet sent, and the packets the
//! data path builds (results, fetch notices, raw copies and a leaf's partial sums).

use super::counters::{DropReason, SwitchCounters};
use super::pool::Pool;
use super::racks::Tier;
use super::SwitchConfig;
use crate::node::{Address, ExchangeId, Outbox};
use crate::wire::{self, Packet, PacketType, Repr};

/// Everything a handler touches besides the job: outputs, counters, pool, queue depths.
#[derive(Debug)]
pub(super) struct Pipeline {
    pub(super) config: SwitchConfig,
    pub(super) pool: Pool,
    pub(super) egress: Vec<u64>,
    /// The driver's own input queue is above its threshold (a software switch that cannot
    /// keep up): everything leaving is marked, as a queue in front of the pipeline would be.
    pub(super) ingress_congested: bool,
    pub(super) out: Outbox,
    pub(super) counters: SwitchCounters,
    /// The port of the worker 0 of the job whose packet is being handled: handlers speak of
    /// workers by rank, and this turns a rank into the port it is on.
    pub(super) first_port: u16,
    /// The job whose packet is being handled (whose quota an allocation counts against).
    pub(super) job: u16,
    /// That job's tier: how a rank turns into a port (or the uplink).
    pub(super) tier: Tier,
    /// A leaf's: depth (bytes) of the queue up to the spine.
    pub(super) uplink: u64,
    /// Which aggregators this model keeps, when it is one shard of a [`ShardedSwitch`].
    pub(super) shard: Shard,
    /// Whether this model acknowledges and counts the packet in hand: always on a whole
    /// switch; in a sharded one, the one shard the packet was routed to for that.
    pub(super) counting: bool,
}

/// One shard of a switch whose aggregators are spread over cores by destination
/// ([`ShardedSwitch`]). Every shard keeps the barriers; a shard adds only into the
/// (destination, chunk) aggregators it owns and sends only their results and raw copies. A
/// data packet reaches the shards that own its aggregators, one of which acknowledges and
/// counts it. The lead (shard 0) is the rest of the switch: it multicasts the gos, forwards,
/// runs the all-reduce and counts the other packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Shard {
    pub(super) index: u16,
    pub(super) count: u16,
}

impl Shard {
    /// The whole switch on one core.
    pub(super) const WHOLE: Shard = Shard { index: 0, count: 1 };

    /// Whether this shard keeps job `job`'s aggregator of key `key` (a block's row × chunks
    /// + chunk).
    #[inline]
    pub(super) fn owns(&self, job: u16, key: usize) -> bool {
        self.count == 1 || shard_of(job, key, usize::from(self.count)) == usize::from(self.index)
    }

    /// Whether this shard does the switch's work that is not an aggregator's.
    #[inline]
    pub(super) fn leads(&self) -> bool {
        self.index == 0
    }
}

/// The shard of `shards` keeping job `job`'s aggregator of key `key`: keys in turn, from a
/// shard that moves with the job (so that jobs' leftover keys do not all fall on the first).
#[inline]
pub(super) fn shard_of(job: u16, key: usize, shards: usize) -> usize {
    (key + usize::from(job)) % shards
}

/// Count a packet leaving the switch, marking ECN on it when its port (or the ingress) is
/// congested.
pub(super) fn account(counters: &mut SwitchCounters, congested: bool, bytes: &mut [u8]) {
    if congested {
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        let mut flags = wire::Flags::from_u8(p.flags()).unwrap_or_default();
        if !flags.ecn {
            flags.ecn = true;
            p.set_flags(flags);
            counters.ecn_marks += 1;
        }
    }
    counters.packets_out += 1;
    counters.bytes_out += bytes.len() as u64;
    let t = usize::from(bytes[3]).min(counters.out_by_type.len() - 1);
    counters.out_by_type[t] += 1;
}

impl Pipeline {
    pub(super) fn drop(&mut self, reason: DropReason) {
        self.counters.drops[reason as usize] += 1;
    }

    /// Where a packet for worker `rank` of the current job leaves: the port it is on, the port
    /// of its rack's leaf (at a spine) or the uplink (at a leaf, for another rack's worker).
    pub(super) fn address_of(&self, rank: u16) -> Address {
        match &self.tier {
            Tier::Star => Address::Worker(self.first_port + rank),
            Tier::Leaf { rack, racks } if racks.rack_of(rank) != *rack => Address::Switch,
            Tier::Leaf { .. } => Address::Worker(self.first_port + rank),
            Tier::Spine(racks) => Address::Worker(self.first_port + racks.rack_of(rank)),
        }
    }

    /// Whether the queue out towards `to` (or the ingress) is congested.
    pub(super) fn congested_towards(&self, to: Address) -> bool {
        let depth = match to {
            Address::Worker(port) => self.egress.get(usize::from(port)).copied(),
            Address::Switch => Some(self.uplink),
        };
        self.ingress_congested || depth.is_some_and(|q| q > self.config.ecn_threshold)
    }

    /// Whether the egress queue towards worker `rank` (or the ingress) is congested.
    pub(super) fn congested(&self, rank: u16) -> bool {
        self.congested_towards(self.address_of(rank))
    }

    /// Queue header `r` and its `lanes` for worker `rank`.
    pub(super) fn send(&mut self, rank: u16, r: &Repr, lanes: &[i32]) {
        self.send_to(self.address_of(rank), r, lanes);
    }

    /// Queue header `r` and its `lanes` up to the spine (a leaf's partial sum).
    pub(super) fn send_up(&mut self, r: &Repr, lanes: &[i32]) {
        self.send_to(Address::Switch, r, lanes);
    }

    pub(super) fn send_to(&mut self, to: Address, r: &Repr, lanes: &[i32]) {
        let congested = self.congested_towards(to);
        let bytes = self.out.push_repr(to, r, lanes);
        account(&mut self.counters, congested, bytes);
    }

    /// Queue a copy of a packet passing through (`bytes`, trimmed to its header's length) for
    /// worker `rank`.
    pub(super) fn forward(&mut self, rank: u16, bytes: &[u8]) {
        self.forward_to(self.address_of(rank), bytes);
    }

    /// Queue a copy of a worker's packet up to the spine (a leaf passing on barriers).
    pub(super) fn forward_up(&mut self, bytes: &[u8]) {
        self.forward_to(Address::Switch, bytes);
    }

    pub(super) fn forward_to(&mut self, to: Address, bytes: &[u8]) {
        let congested = self.congested_towards(to);
        let bytes = self.out.push_copy(to, bytes);
        account(&mut self.counters, congested, bytes);
    }

    pub(super) fn note_occupancy(&mut self) {
        let used = self.pool.in_use() as u64;
        self.counters.peak_aggregators = self.counters.peak_aggregators.max(used);
    }

    pub(super) fn go(&mut self, id: &ExchangeId, seq: u32, block: u16, rank: u16) {
        if !self.shard.leads() {
            return;
        }
        let mut r = id.header(PacketType::BlockGo);
        r.block = block;
        r.worker = rank;
        r.sequence = seq;
        self.send(rank, &r, &[]);
    }
}

/// Send `dst`'s finished sum of `count` contributions to its worker `rank`.
pub(super) fn send_result(
    f: &mut Pipeline,
    repr: &Repr,
    dst: u32,
    rank: u16,
    count: u16,
    sums: &[i32],
) {
    let mut result = *repr;
    result.packet_type = PacketType::Result;
    result.flags.partial = false;
    result.src = dst;
    result.dst = dst;
    result.count = count;
    result.worker = rank;
    f.send(rank, &result, sums);
}

/// Tell `dst`'s owner that its aggregator was released unfinished: fetch the raw
/// contributions.
pub(super) fn notify_fetch(f: &mut Pipeline, repr: &Repr, dst: u32, rank: u16) {
    let mut notice = *repr;
    notice.packet_type = PacketType::Result;
    notice.flags.fetch = true;
    notice.src = dst;
    notice.dst = dst;
    notice.count = 0;
    notice.lanes = 0;
    notice.worker = rank;
    f.send(rank, &notice, &[]);
}

/// Send one contribution of `repr.src` to `dst`'s host unaggregated (count 1, no resend flag).
pub(super) fn forward_raw(f: &mut Pipeline, repr: &Repr, dst: u32, rank: u16, lanes: &[i32]) {
    let mut r = *repr;
    r.packet_type = PacketType::Raw;
    r.dst = dst;
    r.count = 1;
    f.counters.raw_forwarded += 1;
    f.send(rank, &r, lanes);
}

/// A leaf's finished share of a sum, up to the spine: `count` contributions of its rack in
/// `lanes` (all zero when every one of them went to the host raw).
pub(super) fn send_partial(f: &mut Pipeline, repr: &Repr, dst: u32, count: u16, lanes: &[i32]) {
    let Tier::Leaf { rack, .. } = f.tier else {
        unreachable!("only a leaf sends partial sums")
    };
    let mut up = *repr;
    up.packet_type = PacketType::Data;
    up.flags.ack = false;
    up.flags.fetch = false;
    up.flags.resend = false;
    up.flags.ecn = false;
    up.flags.partial = true;
    up.src = dst;
    up.dst = dst;
    up.count = count;
    up.worker = rack;
    up.lanes = lanes.len() as u8;
    f.send_up(&up, lanes);
}

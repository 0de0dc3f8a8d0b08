//! The switch model: exactly what the P4 program does, as a sans-IO state machine.
//!
//! Per packet, in order:
//! 1. parse (malformed → dropped and counted by reason), admission (a configured job whose
//!    worker `r` is on the ingress port: each job has its own range of ports), ids in range for
//!    the exchange's plan;
//! 2. **Data**: look the source vertex up in the current block's vertex → aggregators table;
//!    drop a duplicate (a per-source, per-chunk seen bit) but acknowledge it again; otherwise
//!    make one pass per destination aggregator (each a recirculation on Tofino): allocate on
//!    first arrival from the aggregator pool, add the lanes with overflow detection, count,
//!    and at the expected count send the sum to the destination's worker and free the
//!    aggregator. No free aggregator, or an aggregator already released, sends the
//!    contribution raw to the destination's host. A lane overflow releases the aggregator,
//!    tells the destination to fetch (a `Result` with the fetch flag), and sends the
//!    contribution raw. Every data packet is acknowledged to its sender, with ECN set when an
//!    egress queue it feeds is above the threshold. In reduce mode a data packet is a worker's
//!    partial sum for its destination vertex: the seen bit is per (destination, worker), and
//!    it makes exactly one pass, into the destination's aggregator, which completes when every
//!    contributing worker's partial is in (its count is of partials, not vertices). A hybrid
//!    block's multicast sender (source = destination field) is added into each of its
//!    destinations' aggregators, one pass each, as in SwitchGNN, and counted there beside the
//!    partials.
//! 3. **Raw** with the resend flag releases the destination's aggregator (its partial sum is
//!    dropped; the host aggregates raw features instead) and goes to the destination's host;
//!    **Fetch** goes to the owner of the source vertex; in host mode both are plain forwarding.
//! 4. **Join** and **BlockDone** run the barriers: when every worker has joined, the switch
//!    multicasts `BlockGo(0)`; when every worker reports a block done, it frees what the block
//!    still holds and multicasts `BlockGo(next)`; `BlockGo(blocks)` ends the exchange. A worker
//!    that repeats a report after a lost go gets the go again.
//!
//! Blocks and strawman differ only in the table they run: the plan's blocks (each fits the
//! aggregator memory, so allocation never fails) or one block of every cross edge (allocation
//! fails once the pool is exhausted, and the overflow goes to the hosts).

use std::collections::BTreeMap;
use std::sync::Arc;

use bitvec::vec::BitVec;
use serde::{Deserialize, Serialize};
use thiserror::Error;

mod reduce;
mod sharded;
mod shared;
mod stamp;
mod tier;

pub use reduce::MAX_SLOTS;
pub use sharded::{ShardedSwitch, MAX_SHARDS};
pub use shared::MAX_POOL_SLOTS;
pub use tier::{spine_traffic, two_level, Racks, SpineTraffic, Tier, MAX_RACKS};

use crate::fixed::checked_add_lanes;
use crate::node::{Address, ExchangeId, Nanos, Node, Outbox, SwitchNode, Transmit};
use crate::plan::{ExchangePlan, Mode};
use crate::wire::{self, Packet, PacketType, PlanLimits, Repr, MAX_LANES};

/// Bytes of one aggregator: [`MAX_LANES`] int32 lanes.
pub const AGGREGATOR_BYTES: u64 = 4 * MAX_LANES as u64;

/// Words a Tofino pass reads back from the aggregator registers: a 64-lane aggregator lives
/// in 32 pair registers (lanes `i` and `i + 32` in register `i`), and a stateful ALU returns one
/// 32-bit word per pass, so a finished sum leaves the switch after [`readout_passes`] more
/// passes (SwitchML harvests its second half the same way).
pub const LANES_READ_PER_PASS: usize = 32;

/// Passes that read a finished sum of `lanes` lanes out of the registers. A pass that completes
/// the sum and has nothing left to add elsewhere (`in_place`: a partial sum's only pass) writes
/// the low half into its own lanes as it adds, so only the high half takes a pass of its own;
/// a pass whose packet goes on to other aggregators must keep its lanes and reads both.
pub fn readout_passes(lanes: usize, in_place: bool) -> u64 {
    readout_passes_at(lanes, in_place, LANES_READ_PER_PASS)
}

/// Lanes a readout pass returns on a chip whose register actions output both words of a pair
/// register (Tofino 2 returns up to four 32-bit words per action): a 64-lane sum in one pass.
pub const LANES_READ_PER_PAIR_PASS: usize = 2 * LANES_READ_PER_PASS;

/// [`readout_passes`] on a chip that reads `per_pass` lanes in one pass.
pub fn readout_passes_at(lanes: usize, in_place: bool, per_pass: usize) -> u64 {
    let reads = lanes.div_ceil(per_pass) as u64;
    if in_place {
        reads.saturating_sub(1)
    } else {
        reads
    }
}

/// Switch resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SwitchConfig {
    /// Aggregators of 256 bytes (64 int32 lanes) in the pool.
    pub aggregators: usize,
    /// Egress queue depth (bytes) above which packets towards a port are ECN-marked.
    pub ecn_threshold: u64,
    /// Ports (workers) the switch has.
    pub ports: u16,
}

impl SwitchConfig {
    /// A switch with `memory` bytes of aggregators, 128 ports and a 100 KB marking threshold.
    pub fn with_memory(memory: u64) -> SwitchConfig {
        SwitchConfig {
            aggregators: (memory / AGGREGATOR_BYTES) as usize,
            ecn_threshold: 100_000,
            ports: 128,
        }
    }
}

/// Why the switch refuses a job.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum SwitchError {
    /// A job with this id is already configured.
    #[error("job {0} is already configured")]
    DuplicateJob(u16),
    /// The job has no layer plans.
    #[error("job {0} has no layers")]
    NoLayers(u16),
    /// The job's layers differ in workers or vertex owners.
    #[error("the layers of job {0} disagree on workers or vertex owners")]
    InconsistentLayers(u16),
    /// No job with this id is configured.
    #[error("job {0} is not configured")]
    NoSuchJob(u16),
    /// A best-effort all-reduce on a switch without a shared pool.
    #[error("job {0} asks for a best-effort all-reduce but the switch has no shared pool")]
    NoPool(u16),
    /// A shared pool of no slots, or of more than [`MAX_POOL_SLOTS`].
    #[error("a shared all-reduce pool of {0} slots; 1 to {MAX_POOL_SLOTS} are possible")]
    BadPool(u32),
    /// An all-reduce region of no slots, or of more than [`MAX_SLOTS`].
    #[error("job {job} asks for {slots} all-reduce slots; 1 to {MAX_SLOTS} are possible")]
    BadSlots {
        /// The job id.
        job: u16,
        /// Slots asked for.
        slots: u16,
    },
    /// The job's workers do not fit on the switch's ports from its first port on.
    #[error(
        "job {job} has {workers} workers from port {first_port} on, but the switch has {ports} ports"
    )]
    TooManyWorkers {
        /// The job id.
        job: u16,
        /// Workers in the job.
        workers: u16,
        /// The port of its worker 0.
        first_port: u16,
        /// Ports the switch has.
        ports: u16,
    },
    /// A worker-to-rack map a fabric cannot use, or one that does not fit the job.
    #[error("racks: {0}")]
    BadRacks(String),
    /// A sharded switch of no shards, or of more than [`MAX_SHARDS`].
    #[error("a switch in {0} shards; 1 to {MAX_SHARDS} are possible")]
    BadShards(u16),
    /// A leaf or spine on a sharded switch (only a star's switch can be sharded).
    #[error("job {0} is a leaf's or a spine's: a two-level fabric's switches run on one core")]
    ShardedTier(u16),
    /// The shards' threads could not be started.
    #[error("cannot start the switch's shard threads: {0}")]
    Threads(String),
    /// The job's ports overlap another job's.
    #[error("job {job}'s ports {first}..{end} overlap job {other}'s")]
    PortsTaken {
        /// The job id.
        job: u16,
        /// Its first port.
        first: u16,
        /// One past its last port.
        end: u32,
        /// The job already on some of them.
        other: u16,
    },
}

/// Why the switch dropped a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum DropReason {
    /// Shorter than the header.
    Truncated,
    /// Not the switchgnn magic.
    BadMagic,
    /// Unsupported header version.
    BadVersion,
    /// Unknown packet type.
    UnknownType,
    /// Reserved flag bits set.
    ReservedFlags,
    /// More lanes announced than an aggregator holds.
    TooManyLanes,
    /// The announced lanes run past the end of the packet.
    LanesBeyondBuffer,
    /// Ids beyond the exchange's plan.
    OutOfRange,
    /// Unknown job, worker beyond the job, or a worker id that is not its ingress port.
    NotAdmitted,
    /// Packet types only the switch emits.
    WrongDirection,
    /// Not the running exchange or block.
    Stale,
    /// A data packet in host mode.
    WrongMode,
    /// The vertex is not in the running block, or not owned by the sender.
    NotInPlan,
    /// Lane count other than the chunk's.
    BadLanes,
    /// A duplicate data packet (re-acknowledged, not added again), or a repeated all-reduce
    /// slice before its slot is complete.
    Duplicate,
    /// An all-reduce slice for a job that has no all-reduce region.
    NoAllReduce,
}

impl DropReason {
    const ALL: [DropReason; 16] = [
        DropReason::Truncated,
        DropReason::BadMagic,
        DropReason::BadVersion,
        DropReason::UnknownType,
        DropReason::ReservedFlags,
        DropReason::TooManyLanes,
        DropReason::LanesBeyondBuffer,
        DropReason::OutOfRange,
        DropReason::NotAdmitted,
        DropReason::WrongDirection,
        DropReason::Stale,
        DropReason::WrongMode,
        DropReason::NotInPlan,
        DropReason::BadLanes,
        DropReason::Duplicate,
        DropReason::NoAllReduce,
    ];

    fn of(e: wire::Error) -> DropReason {
        match e {
            wire::Error::Truncated(_) => DropReason::Truncated,
            wire::Error::BadMagic(_) => DropReason::BadMagic,
            wire::Error::BadVersion(_) => DropReason::BadVersion,
            wire::Error::UnknownType(_) => DropReason::UnknownType,
            wire::Error::ReservedFlags(_) => DropReason::ReservedFlags,
            wire::Error::TooManyLanes(_) => DropReason::TooManyLanes,
            wire::Error::LanesBeyondBuffer { .. } => DropReason::LanesBeyondBuffer,
            // The switch reads no records (it forwards them whole); a receiver would.
            wire::Error::BadRecords { .. } => DropReason::LanesBeyondBuffer,
            wire::Error::OutOfRange { .. } => DropReason::OutOfRange,
        }
    }
}

/// Counters for everything the switch does.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwitchCounters {
    /// Packets received.
    pub packets_in: u64,
    /// Bytes received.
    pub bytes_in: u64,
    /// Packets processed (every other packet in is a counted drop).
    pub accepted: u64,
    /// Packets sent.
    pub packets_out: u64,
    /// Bytes sent.
    pub bytes_out: u64,
    /// Valid packets in, by [`PacketType`] (index = type code).
    pub in_by_type: [u64; 11],
    /// Packets out, by type.
    pub out_by_type: [u64; 11],
    /// Aggregator passes (recirculations on Tofino).
    pub passes: u64,
    /// Passes a Tofino makes to read finished sums back out of its registers
    /// ([`readout_passes`] per result chunk), counted for the chip's pass budget.
    pub readout_passes: u64,
    /// The same sums' readout passes on a chip that reads both words of a pair register in
    /// one pass ([`LANES_READ_PER_PAIR_PASS`]): what a Tofino 2 program would need.
    pub pair_readout_passes: u64,
    /// Lanes added into aggregators.
    pub lane_updates: u64,
    /// Aggregators that completed and sent their sum.
    pub aggregations: u64,
    /// Contributions sent raw to the destination's host (no free aggregator, or released).
    pub raw_forwarded: u64,
    /// Aggregators released by a lane overflow.
    pub overflows: u64,
    /// Aggregators released by a resend.
    pub releases: u64,
    /// Acknowledgements of data packets sent (duplicates re-acknowledged included).
    pub acks: u64,
    /// ECN marks: packets marked towards a congested egress queue, and acks echoing one.
    pub ecn_marks: u64,
    /// Blocks whose barrier completed.
    pub blocks_completed: u64,
    /// Exchanges that ran past their last block.
    pub exchanges_completed: u64,
    /// Most aggregators in use at once.
    pub peak_aggregators: u64,
    /// All-reduce slices that every worker contributed to.
    pub reduce_slices: u64,
    /// Lanes combined into all-reduce slots.
    pub reduce_lane_updates: u64,
    /// All-reduce results sent again to a worker that repeated its slice.
    pub reduce_replays: u64,
    /// Best-effort all-reduce: contributions whose shared slot held another slice, sent to
    /// the host instead (ATP's collisions).
    #[serde(default)]
    pub reduce_collisions: u64,
    /// Best-effort all-reduce: contributions the host took (collisions, and every later
    /// contribution to a slice the host holds part of).
    #[serde(default)]
    pub reduce_host_packets: u64,
    /// Best-effort all-reduce: slices the host completed (the fallbacks that mattered).
    #[serde(default)]
    pub reduce_host_slices: u64,
    /// Best-effort all-reduce: shared slots taken from a stalled holder after the leak
    /// timeout, its partial sum handed to the host.
    #[serde(default)]
    pub reduce_leaks: u64,
    /// The largest packet received, bytes.
    #[serde(default)]
    pub largest_in: u64,
    /// Drops by [`DropReason`] (index = position in the reason list).
    drops: [u64; 16],
}

impl SwitchCounters {
    /// A finished sum of `lanes` lanes read out of the registers, on both kinds of chip.
    fn count_readout(&mut self, lanes: usize, in_place: bool) {
        self.readout_passes += readout_passes(lanes, in_place);
        self.pair_readout_passes += readout_passes_at(lanes, in_place, LANES_READ_PER_PAIR_PASS);
    }

    /// Packets dropped for `reason`.
    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.drops[reason as usize]
    }

    /// The non-zero drop counts, by reason.
    pub fn drops(&self) -> BTreeMap<DropReason, u64> {
        DropReason::ALL
            .iter()
            .map(|&r| (r, self.drops[r as usize]))
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    /// Packets dropped, for any reason.
    pub fn total_drops(&self) -> u64 {
        self.drops.iter().sum()
    }

    /// Valid packets of type `t` received.
    pub fn received(&self, t: PacketType) -> u64 {
        self.in_by_type[t as usize]
    }

    /// Packets of type `t` sent.
    pub fn sent(&self, t: PacketType) -> u64 {
        self.out_by_type[t as usize]
    }
}

/// Two switches' counters added up, field by field (the peak too: an upper bound of the
/// fabric's).
impl std::ops::AddAssign<&SwitchCounters> for SwitchCounters {
    fn add_assign(&mut self, o: &SwitchCounters) {
        let add = |a: &mut [u64], b: &[u64]| a.iter_mut().zip(b).for_each(|(a, b)| *a += b);
        add(&mut self.in_by_type, &o.in_by_type);
        add(&mut self.out_by_type, &o.out_by_type);
        add(&mut self.drops, &o.drops);
        for (a, b) in [
            (&mut self.packets_in, o.packets_in),
            (&mut self.bytes_in, o.bytes_in),
            (&mut self.accepted, o.accepted),
            (&mut self.packets_out, o.packets_out),
            (&mut self.bytes_out, o.bytes_out),
            (&mut self.passes, o.passes),
            (&mut self.readout_passes, o.readout_passes),
            (&mut self.pair_readout_passes, o.pair_readout_passes),
            (&mut self.lane_updates, o.lane_updates),
            (&mut self.aggregations, o.aggregations),
            (&mut self.raw_forwarded, o.raw_forwarded),
            (&mut self.overflows, o.overflows),
            (&mut self.releases, o.releases),
            (&mut self.acks, o.acks),
            (&mut self.ecn_marks, o.ecn_marks),
            (&mut self.blocks_completed, o.blocks_completed),
            (&mut self.exchanges_completed, o.exchanges_completed),
            (&mut self.peak_aggregators, o.peak_aggregators),
            (&mut self.reduce_slices, o.reduce_slices),
            (&mut self.reduce_lane_updates, o.reduce_lane_updates),
            (&mut self.reduce_replays, o.reduce_replays),
            (&mut self.reduce_collisions, o.reduce_collisions),
            (&mut self.reduce_host_packets, o.reduce_host_packets),
            (&mut self.reduce_host_slices, o.reduce_host_slices),
            (&mut self.reduce_leaks, o.reduce_leaks),
        ] {
            *a += b;
        }
        self.largest_in = self.largest_in.max(o.largest_in);
    }
}

/// A job's progress, for diagnostics.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobStatus {
    /// The job id.
    pub job: u16,
    /// Workers in the job.
    pub workers: u16,
    /// The current (or last) exchange; `None` before the first join.
    pub exchange: Option<ExchangeId>,
    /// The current exchange's sequence number in the job (0 before the first join).
    pub seq: u32,
    /// Whether every worker has joined the current exchange.
    pub started: bool,
    /// The running block; equal to `blocks` once the exchange is finished.
    pub block: u16,
    /// Blocks in the current exchange's plan.
    pub blocks: u16,
    /// Whether the current exchange has run past its last block.
    pub finished: bool,
    /// Workers the running barrier waits for: those that have not joined (before the start)
    /// or not reported the running block done.
    pub waiting_for: Vec<u16>,
}

/// `exchange 3 (epoch 1, layer 0 forward), block 3 of 9, waiting for workers [2] to finish
/// it`: where the job stands, for status lines and errors.
impl std::fmt::Display for JobStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Some(id) = self.exchange else {
            return f.write_str("no exchange started yet");
        };
        let dir = if id.backward { "backward" } else { "forward" };
        write!(
            f,
            "exchange {} (epoch {}, layer {} {dir})",
            self.seq, id.epoch, id.layer
        )?;
        if self.finished {
            return f.write_str(" complete");
        }
        if !self.started {
            return write!(f, ", waiting for workers {:?} to join", self.waiting_for);
        }
        write!(
            f,
            ", block {} of {}, waiting for workers {:?} to finish it",
            self.block, self.blocks, self.waiting_for
        )
    }
}

/// One job: its workers, the ports they are on and one exchange plan per layer.
#[derive(Debug, Clone)]
pub struct JobConfig {
    /// The job id.
    pub job: u16,
    /// The exchange plan of each layer, indexed by layer.
    pub layers: Vec<Arc<ExchangePlan>>,
    /// The port of the job's worker 0; worker `r` is on port `first_port + r`. Jobs sharing a
    /// switch get ranges of ports that do not overlap, so a packet's ingress port says whose
    /// it is whatever its header claims.
    pub first_port: u16,
    /// Aggregators the job may hold at once (its region of the pool); `None`: as many as
    /// are free.
    pub aggregators: Option<usize>,
    /// Where this switch sits in the job's fabric (the star's switch by default).
    pub tier: Tier,
}

impl JobConfig {
    /// Job `job` with `layers`, its workers on ports 0, 1, … (a switch of its own).
    pub fn new(job: u16, layers: Vec<Arc<ExchangePlan>>) -> JobConfig {
        JobConfig {
            job,
            layers,
            first_port: 0,
            aggregators: None,
            tier: Tier::Star,
        }
    }

    /// The same job on a switch of a two-level fabric: a leaf or the spine.
    pub fn in_tier(mut self, tier: Tier) -> JobConfig {
        self.tier = tier;
        self
    }

    /// The same job holding at most `aggregators` of the pool at once.
    pub fn with_aggregators(mut self, aggregators: usize) -> JobConfig {
        self.aggregators = Some(aggregators);
        self
    }

    /// The same job with its worker 0 on port `first_port`.
    pub fn at_port(mut self, first_port: u16) -> JobConfig {
        self.first_port = first_port;
        self
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Agg {
    Idle,
    Active(u32),
    Done,
    Released,
}

/// Aggregator state of the running block, per (slot, chunk).
#[derive(Debug)]
struct BlockState {
    seen: BitVec,
    agg: Vec<Agg>,
    counted: Vec<u16>,
    remaining: Vec<u16>,
    /// A leaf's: per table row, whether the spine finishes its sum (the leaf sends its share
    /// up instead of a result down). Empty elsewhere.
    up: BitVec,
    /// The spine's: per table row, the racks whose partials it waits for (a bit each). Empty
    /// elsewhere.
    racks_in: Vec<u64>,
}

impl BlockState {
    fn new(plan: &ExchangePlan, block: usize) -> BlockState {
        let c = plan.chunks();
        let t = &plan.blocks[block].table;
        let n = t.len() * c;
        // One seen bit per sender and chunk: a source vertex, or in reduce mode a
        // (destination, worker) pair and then each multicast sender.
        let senders = if plan.mode.pre_aggregated() {
            t.slots.len() + plan.blocks[block].multicast.len()
        } else {
            t.len()
        };
        BlockState {
            seen: BitVec::repeat(false, senders * c),
            agg: vec![Agg::Idle; n],
            counted: vec![0; n],
            remaining: t
                .expected
                .iter()
                .flat_map(|&e| std::iter::repeat_n(e as u16, c))
                .collect(),
            up: BitVec::new(),
            racks_in: Vec::new(),
        }
    }

    /// Take an aggregator from the pool for `k` on its first contribution (none when the pool,
    /// or the job's region of it, is exhausted).
    fn claim(&mut self, k: usize, f: &mut Fabric) {
        if self.agg[k] == Agg::Idle {
            if let Some(a) = f.pool.alloc(f.job) {
                self.agg[k] = Agg::Active(a);
                f.note_occupancy();
            }
        }
    }

    /// Give back every aggregator the block still holds (those of destinations that finished
    /// by fetching raw features never saw a resend).
    fn release(self, f: &mut Fabric) {
        for a in self.agg {
            if let Agg::Active(i) = a {
                f.pool.release(i);
            }
        }
    }
}

#[derive(Debug)]
struct Run {
    id: ExchangeId,
    seq: u32,
    plan: Arc<ExchangePlan>,
    started: bool,
    /// The running block; `plan.blocks.len()` once the exchange is complete.
    block: u16,
    joined: BitVec,
    done: BitVec,
    state: Option<BlockState>,
}

impl Run {
    fn finished(&self) -> bool {
        self.started && usize::from(self.block) == self.plan.blocks.len()
    }
}

#[derive(Debug)]
struct Job {
    workers: u16,
    /// The port of worker 0 (see [`JobConfig::first_port`]).
    first_port: u16,
    layers: Vec<Arc<ExchangePlan>>,
    current: Option<Run>,
    /// The exchange before `current`, its sequence number and block count, to repeat its
    /// final go to a worker that missed it.
    previous: Option<(ExchangeId, u32, u16)>,
    /// Where the job's all-reduce runs, if it has one.
    reduce: Option<AllReduce>,
    /// Where this switch sits in the job's fabric.
    tier: Tier,
}

/// Where a job's all-reduce runs.
#[derive(Debug)]
enum AllReduce {
    /// A region of slots of its own (SwitchML).
    Region(reduce::ReduceRegion),
    /// The pool shared by best-effort jobs, with the host behind it (ATP).
    BestEffort,
}

/// The aggregator pool, shared by all jobs; a job with a quota holds at most that many at
/// once (its region of the memory), whatever the others do.
#[derive(Debug)]
struct Pool {
    lanes: Vec<i32>,
    free: Vec<u32>,
    capacity: usize,
    /// The job holding each aggregator.
    owner: Vec<u16>,
    /// Per job with a quota: (aggregators held, quota).
    quotas: BTreeMap<u16, (usize, usize)>,
}

impl Pool {
    fn alloc(&mut self, job: u16) -> Option<u32> {
        if let Some((held, quota)) = self.quotas.get_mut(&job) {
            if *held >= *quota || self.free.is_empty() {
                return None;
            }
            *held += 1;
        }
        let a = self.free.pop()?;
        self.owner[a as usize] = job;
        self.lanes[a as usize * MAX_LANES..][..MAX_LANES].fill(0);
        Some(a)
    }

    fn release(&mut self, a: u32) {
        if let Some((held, _)) = self.quotas.get_mut(&self.owner[a as usize]) {
            *held -= 1;
        }
        self.free.push(a);
    }

    fn in_use(&self) -> usize {
        self.capacity - self.free.len()
    }
}

/// Everything a handler touches besides the job: outputs, counters, pool, queue depths.
#[derive(Debug)]
struct Fabric {
    config: SwitchConfig,
    pool: Pool,
    egress: Vec<u64>,
    /// The driver's own input queue is above its threshold (a software switch that cannot
    /// keep up): everything leaving is marked, as a queue in front of the pipeline would be.
    ingress_congested: bool,
    out: Outbox,
    counters: SwitchCounters,
    /// The port of the worker 0 of the job whose packet is being handled: handlers speak of
    /// workers by rank, and this turns a rank into the port it is on.
    first_port: u16,
    /// The job whose packet is being handled (whose quota an allocation counts against).
    job: u16,
    /// That job's tier: how a rank turns into a port (or the uplink).
    tier: Tier,
    /// A leaf's: depth (bytes) of the queue up to the spine.
    uplink: u64,
    /// Which aggregators this model keeps, when it is one shard of a [`ShardedSwitch`].
    shard: Shard,
    /// Whether this model acknowledges and counts the packet in hand: always on a whole
    /// switch; in a sharded one, the one shard the packet was routed to for that.
    counting: bool,
}

/// One shard of a switch whose aggregators are spread over cores by destination
/// ([`ShardedSwitch`]). Every shard keeps the barriers; a shard adds only into the
/// (destination, chunk) aggregators it owns and sends only their results and raw copies. A
/// data packet reaches the shards that own its aggregators, one of which acknowledges and
/// counts it. The lead (shard 0) is the rest of the switch: it multicasts the gos, forwards,
/// runs the all-reduce and counts the other packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Shard {
    index: u16,
    count: u16,
}

impl Shard {
    /// The whole switch on one core.
    const WHOLE: Shard = Shard { index: 0, count: 1 };

    /// Whether this shard keeps job `job`'s aggregator of key `key` (a block's row × chunks
    /// + chunk).
    #[inline]
    fn owns(&self, job: u16, key: usize) -> bool {
        self.count == 1 || shard_of(job, key, usize::from(self.count)) == usize::from(self.index)
    }

    /// Whether this shard does the switch's work that is not an aggregator's.
    #[inline]
    fn leads(&self) -> bool {
        self.index == 0
    }
}

/// The shard of `shards` keeping job `job`'s aggregator of key `key`: keys in turn, from a
/// shard that moves with the job (so that jobs' leftover keys do not all fall on the first).
#[inline]
fn shard_of(job: u16, key: usize, shards: usize) -> usize {
    (key + usize::from(job)) % shards
}

/// Count a packet leaving the switch, marking ECN on it when its port (or the ingress) is
/// congested.
fn account(counters: &mut SwitchCounters, congested: bool, bytes: &mut [u8]) {
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

impl Fabric {
    fn drop(&mut self, reason: DropReason) {
        self.counters.drops[reason as usize] += 1;
    }

    /// Where a packet for worker `rank` of the current job leaves: the port it is on, the port
    /// of its rack's leaf (at a spine) or the uplink (at a leaf, for another rack's worker).
    fn address_of(&self, rank: u16) -> Address {
        match &self.tier {
            Tier::Star => Address::Worker(self.first_port + rank),
            Tier::Leaf { rack, racks } if racks.rack_of(rank) != *rack => Address::Switch,
            Tier::Leaf { .. } => Address::Worker(self.first_port + rank),
            Tier::Spine(racks) => Address::Worker(self.first_port + racks.rack_of(rank)),
        }
    }

    /// Whether the queue out towards `to` (or the ingress) is congested.
    fn congested_towards(&self, to: Address) -> bool {
        let depth = match to {
            Address::Worker(port) => self.egress.get(usize::from(port)).copied(),
            Address::Switch => Some(self.uplink),
        };
        self.ingress_congested || depth.is_some_and(|q| q > self.config.ecn_threshold)
    }

    /// Whether the egress queue towards worker `rank` (or the ingress) is congested.
    fn congested(&self, rank: u16) -> bool {
        self.congested_towards(self.address_of(rank))
    }

    /// Queue header `r` and its `lanes` for worker `rank`.
    fn send(&mut self, rank: u16, r: &Repr, lanes: &[i32]) {
        self.send_to(self.address_of(rank), r, lanes);
    }

    /// Queue header `r` and its `lanes` up to the spine (a leaf's partial sum).
    fn send_up(&mut self, r: &Repr, lanes: &[i32]) {
        self.send_to(Address::Switch, r, lanes);
    }

    fn send_to(&mut self, to: Address, r: &Repr, lanes: &[i32]) {
        let congested = self.congested_towards(to);
        let bytes = self.out.push_repr(to, r, lanes);
        account(&mut self.counters, congested, bytes);
    }

    /// Queue a copy of a packet passing through (`bytes`, trimmed to its header's length) for
    /// worker `rank`.
    fn forward(&mut self, rank: u16, bytes: &[u8]) {
        self.forward_to(self.address_of(rank), bytes);
    }

    /// Queue a copy of a worker's packet up to the spine (a leaf passing on barriers).
    fn forward_up(&mut self, bytes: &[u8]) {
        self.forward_to(Address::Switch, bytes);
    }

    fn forward_to(&mut self, to: Address, bytes: &[u8]) {
        let congested = self.congested_towards(to);
        let bytes = self.out.push_copy(to, bytes);
        account(&mut self.counters, congested, bytes);
    }

    fn note_occupancy(&mut self) {
        let used = self.pool.in_use() as u64;
        self.counters.peak_aggregators = self.counters.peak_aggregators.max(used);
    }

    fn go(&mut self, id: &ExchangeId, seq: u32, block: u16, rank: u16) {
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

/// The switch model.
#[derive(Debug)]
pub struct Switch {
    jobs: BTreeMap<u16, Job>,
    fabric: Fabric,
    /// The slots best-effort jobs share, if the switch has them.
    pool: Option<shared::SharedPool>,
    /// The parameter server behind the pool.
    host: shared::HostReducer,
    /// Sequence numbers of what leaves for each worker port (a [`ShardedSwitch`] numbers
    /// the output of all its shards with its own).
    stamps: stamp::EgressStamps,
}

impl Switch {
    /// A switch with `config`'s resources and no jobs.
    pub fn new(config: SwitchConfig) -> Switch {
        Switch::shard(config, Shard::WHOLE)
    }

    /// Shard `shard` of a sharded switch, `config`'s aggregators its own.
    fn shard(config: SwitchConfig, shard: Shard) -> Switch {
        Switch {
            jobs: BTreeMap::new(),
            pool: None,
            host: shared::HostReducer::default(),
            stamps: stamp::EgressStamps::default(),
            fabric: Fabric {
                pool: Pool {
                    lanes: vec![0; config.aggregators * MAX_LANES],
                    free: (0..config.aggregators as u32).rev().collect(),
                    capacity: config.aggregators,
                    owner: vec![0; config.aggregators],
                    quotas: BTreeMap::new(),
                },
                egress: vec![0; usize::from(config.ports)],
                ingress_congested: false,
                out: Outbox::default(),
                counters: SwitchCounters::default(),
                first_port: 0,
                job: 0,
                tier: Tier::Star,
                uplink: 0,
                shard,
                counting: true,
                config,
            },
        }
    }

    /// Admit a job (the control plane installing its tables).
    pub fn add_job(&mut self, job: JobConfig) -> Result<(), SwitchError> {
        if self.jobs.contains_key(&job.job) {
            return Err(SwitchError::DuplicateJob(job.job));
        }
        let first = job.layers.first().ok_or(SwitchError::NoLayers(job.job))?;
        if job
            .layers
            .iter()
            .any(|p| p.workers != first.workers || p.owner != first.owner)
        {
            return Err(SwitchError::InconsistentLayers(job.job));
        }
        if let Some(racks) = job.tier.racks() {
            if racks.workers() != first.workers {
                return Err(SwitchError::BadRacks(format!(
                    "job {} has {} workers, its rack map {}",
                    job.job,
                    first.workers,
                    racks.workers()
                )));
            }
        }
        if let Tier::Leaf { rack, racks } = &job.tier {
            if *rack >= racks.racks() {
                return Err(SwitchError::BadRacks(format!(
                    "a leaf of rack {rack} in a fabric of {} racks",
                    racks.racks()
                )));
            }
        }
        let ports = job.tier.ports(first.workers);
        let end = u32::from(job.first_port) + u32::from(ports);
        if end > u32::from(self.fabric.config.ports) {
            return Err(SwitchError::TooManyWorkers {
                job: job.job,
                workers: ports,
                first_port: job.first_port,
                ports: self.fabric.config.ports,
            });
        }
        let overlapping = self.jobs.iter().find(|(_, j)| {
            u32::from(j.first_port) < end
                && u32::from(job.first_port)
                    < u32::from(j.first_port) + u32::from(j.tier.ports(j.workers))
        });
        if let Some((&other, _)) = overlapping {
            return Err(SwitchError::PortsTaken {
                job: job.job,
                first: job.first_port,
                end,
                other,
            });
        }
        if let Some(quota) = job.aggregators {
            self.fabric.pool.quotas.insert(job.job, (0, quota));
        }
        self.jobs.insert(
            job.job,
            Job {
                workers: first.workers,
                first_port: job.first_port,
                layers: job.layers,
                current: None,
                previous: None,
                reduce: None,
                tier: job.tier,
            },
        );
        Ok(())
    }

    /// Give job `job` a region of `slots` all-reduce slots (two banks of one aggregator
    /// each), or replace the one it has (its sums are lost).
    pub fn add_allreduce(&mut self, job: u16, slots: u16) -> Result<(), SwitchError> {
        let j = self.jobs.get_mut(&job).ok_or(SwitchError::NoSuchJob(job))?;
        if slots == 0 || slots > MAX_SLOTS {
            return Err(SwitchError::BadSlots { job, slots });
        }
        j.reduce = Some(AllReduce::Region(reduce::ReduceRegion::new(
            slots, j.workers,
        )));
        Ok(())
    }

    /// Give the switch a pool of `slots` all-reduce slots that best-effort jobs share, taken
    /// from a holder that has not progressed for `leak` (nanoseconds).
    pub fn set_allreduce_pool(&mut self, slots: u32, leak: Nanos) -> Result<(), SwitchError> {
        if slots == 0 || slots > MAX_POOL_SLOTS {
            return Err(SwitchError::BadPool(slots));
        }
        self.pool = Some(shared::SharedPool::new(slots, leak));
        Ok(())
    }

    /// Slots of the shared pool (0 without one).
    pub fn allreduce_pool(&self) -> u32 {
        self.pool.as_ref().map_or(0, |p| p.slots())
    }

    /// Let job `job` all-reduce best-effort in the shared pool, its workers keeping `window`
    /// slices in flight each; what the pool cannot take, the host finishes.
    pub fn add_allreduce_best_effort(&mut self, job: u16, window: u16) -> Result<(), SwitchError> {
        let j = self.jobs.get_mut(&job).ok_or(SwitchError::NoSuchJob(job))?;
        if self.pool.is_none() {
            return Err(SwitchError::NoPool(job));
        }
        if window == 0 || window > MAX_SLOTS {
            return Err(SwitchError::BadSlots { job, slots: window });
        }
        j.reduce = Some(AllReduce::BestEffort);
        self.host.add_job(job, j.workers, j.first_port, window);
        Ok(())
    }

    /// A sum of job `job`'s all-reduce that can never complete: its stream position and a
    /// worker already past it (which had its result from a switch that has since lost its
    /// state). The control plane ends the job when it sees one.
    pub fn allreduce_lost(&self, job: u16) -> Option<(u32, u16)> {
        match self.jobs.get(&job)?.reduce.as_ref()? {
            AllReduce::Region(r) => r.lost(),
            // The host finishes whatever the pool loses.
            AllReduce::BestEffort => None,
        }
    }

    /// Job `job`'s all-reduce slots: its region's, or its window in the shared pool (`None`
    /// without an all-reduce).
    pub fn allreduce_slots(&self, job: u16) -> Option<u16> {
        match self.jobs.get(&job)?.reduce.as_ref()? {
            AllReduce::Region(r) => Some(r.slots()),
            AllReduce::BestEffort => self.host.window(job),
        }
    }

    /// The driver reports the depth (bytes) of the egress queue towards `port`.
    pub fn set_egress_queue(&mut self, port: u16, bytes: u64) {
        if let Some(q) = self.fabric.egress.get_mut(usize::from(port)) {
            *q = bytes;
        }
    }

    /// A leaf's driver reports the depth (bytes) of the queue up to the spine.
    pub fn set_uplink_queue(&mut self, bytes: u64) {
        self.fabric.uplink = bytes;
    }

    /// The driver reports whether its input queue (a software switch's socket backlog) is
    /// above its marking threshold. While it is, every packet the switch sends carries ECN, so
    /// the senders slow down before that queue overflows. A hardware pipeline runs at line
    /// rate and has no such queue; its drivers never set this.
    pub fn set_ingress_congested(&mut self, congested: bool) {
        self.fabric.ingress_congested = congested;
    }

    /// The switch's counters.
    pub fn counters(&self) -> &SwitchCounters {
        &self.fabric.counters
    }

    /// The switch's resources.
    pub fn config(&self) -> &SwitchConfig {
        &self.fabric.config
    }

    /// Where a job stands and whom its barrier waits for: what a driver reports when a wait
    /// times out.
    pub fn job_status(&self, job: u16) -> Option<JobStatus> {
        let j = self.jobs.get(&job)?;
        let mut status = JobStatus {
            job,
            workers: j.workers,
            exchange: None,
            seq: 0,
            started: false,
            block: 0,
            blocks: 0,
            finished: false,
            waiting_for: Vec::new(),
        };
        if let Some(run) = &j.current {
            let missing =
                |bits: &BitVec| -> Vec<u16> { bits.iter_zeros().map(|w| w as u16).collect() };
            status.exchange = Some(run.id);
            status.seq = run.seq;
            status.started = run.started;
            status.block = run.block;
            status.blocks = run.plan.blocks.len() as u16;
            status.finished = run.finished();
            status.waiting_for = match (run.started, run.finished()) {
                (false, _) => missing(&run.joined),
                (true, false) => missing(&run.done),
                (true, true) => Vec::new(),
            };
        }
        Some(status)
    }

    /// Where job `job` stands, in words (`no job` when it is not installed).
    pub fn describe_job(&self, job: u16) -> String {
        self.job_status(job)
            .map_or_else(|| "no job".into(), |s| s.to_string())
    }

    /// Whether `job` has an exchange that every worker has joined and that is not finished
    /// (cheap: a driver asks after every receive round).
    pub fn exchange_running(&self, job: u16) -> bool {
        self.jobs
            .get(&job)
            .and_then(|j| j.current.as_ref())
            .is_some_and(|run| run.started && !run.finished())
    }

    /// Aggregators in use now.
    pub fn aggregators_in_use(&self) -> usize {
        self.fabric.pool.in_use()
    }

    /// Handle a packet; `counts`: this model acknowledges it and counts it in (a sharded
    /// switch's routing picks one shard per packet for that).
    pub(super) fn handle_routed(&mut self, now: Nanos, from: Address, bytes: &[u8], counts: bool) {
        self.fabric.counting = counts;
        let result = self.process(now, from, bytes);
        if counts {
            self.fabric.counters.packets_in += 1;
            self.fabric.counters.bytes_in += bytes.len() as u64;
            let largest = &mut self.fabric.counters.largest_in;
            *largest = (*largest).max(bytes.len() as u64);
            match result {
                Ok(()) => self.fabric.counters.accepted += 1,
                Err(reason) => self.fabric.drop(reason),
            }
        }
    }

    fn process(&mut self, now: Nanos, from: Address, bytes: &[u8]) -> Result<(), DropReason> {
        let packet = Packet::new_checked(bytes).map_err(DropReason::of)?;
        let repr = Repr::parse(&packet).map_err(DropReason::of)?;
        let f = &mut self.fabric;
        if f.counting {
            f.counters.in_by_type[repr.packet_type as usize] += 1;
        }
        let job = self
            .jobs
            .get_mut(&repr.job)
            .ok_or(DropReason::NotAdmitted)?;
        f.first_port = job.first_port;
        f.job = repr.job;
        if !f.tier.is(&job.tier) {
            f.tier = job.tier.clone();
        }
        if let Tier::Leaf { .. } = job.tier {
            return tier::leaf(job, f, from, &repr, &packet, bytes);
        }
        // The ingress port decides whose packet it is: a job's packets cannot reach another
        // job's state, whatever job id or rank their header carries. A spine has a leaf on
        // each port: a worker's packet comes in on its rack's, a partial sum on the rack it
        // names.
        let Address::Worker(port) = from else {
            return Err(DropReason::NotAdmitted);
        };
        let expected_port = match &job.tier {
            Tier::Spine(racks) if repr.flags.partial => {
                (repr.worker < racks.racks()).then_some(repr.worker)
            }
            // A leaf's overflow notice on its way to another rack's worker.
            Tier::Spine(racks) if repr.packet_type == PacketType::Result && repr.flags.fetch => {
                let leaf = port.wrapping_sub(job.first_port);
                (repr.worker < job.workers && leaf < racks.racks()).then_some(leaf)
            }
            Tier::Spine(racks) => (repr.worker < job.workers).then(|| racks.rack_of(repr.worker)),
            _ if repr.flags.partial => None,
            _ => (repr.worker < job.workers).then_some(repr.worker),
        };
        if expected_port.map(|p| u32::from(job.first_port) + u32::from(p)) != Some(port.into()) {
            return Err(DropReason::NotAdmitted);
        }
        // All-reduce slices name no exchange plan: their own region checks them.
        match repr.packet_type {
            PacketType::Reduce => {
                return match job.reduce.as_mut().ok_or(DropReason::NoAllReduce)? {
                    AllReduce::Region(region) => reduce::reduce(region, f, &repr, &packet),
                    AllReduce::BestEffort => {
                        let pool = self.pool.as_mut().ok_or(DropReason::NoAllReduce)?;
                        let workers = job.workers;
                        shared::reduce(pool, &mut self.host, f, workers, now, &repr, &packet)
                    }
                };
            }
            PacketType::Reduced => return Err(DropReason::WrongDirection),
            _ => {}
        }
        check_limits(job, &repr)?;
        match repr.packet_type {
            PacketType::Join => join(job, f, &repr),
            PacketType::BlockDone => block_done(job, f, &repr),
            PacketType::Data if repr.flags.partial => tier::partial(job, f, &repr, &packet),
            // Workers' features reach a spine only as their leaves' partial sums.
            PacketType::Data if matches!(job.tier, Tier::Spine(_)) => Err(DropReason::NotAdmitted),
            PacketType::Data => data(job, f, &repr, &packet),
            PacketType::Result if repr.flags.fetch && matches!(job.tier, Tier::Spine(_)) => {
                f.forward(repr.worker, &bytes[..repr.buffer_len()]);
                Ok(())
            }
            PacketType::Raw => raw(job, f, &repr, bytes),
            PacketType::Rows => rows(job, f, &repr, bytes),
            PacketType::Fetch => fetch(job, f, &repr, bytes),
            // (The all-reduce types were taken care of above.)
            PacketType::Result | PacketType::BlockGo | PacketType::Reduce | PacketType::Reduced => {
                Err(DropReason::WrongDirection)
            }
        }
    }
}

/// Ids in range for the layer's plan.
fn check_limits(job: &Job, repr: &Repr) -> Result<(), DropReason> {
    let plan = job
        .layers
        .get(usize::from(repr.layer))
        .ok_or(DropReason::OutOfRange)?;
    let limits = PlanLimits {
        vertices: plan.owner.len() as u32,
        blocks: plan.blocks.len() as u32 + 1,
        workers: u32::from(job.workers),
        layers: job.layers.len() as u32,
        chunks: plan.chunks() as u32,
    };
    repr.check_plan(&limits).map_err(DropReason::of)
}

/// The running exchange and block a packet must belong to.
fn running<'a>(job: &'a mut Job, repr: &Repr) -> Result<&'a mut Run, DropReason> {
    match &mut job.current {
        Some(run) if run.id.matches(repr) && run.started && !run.finished() => Ok(run),
        _ => Err(DropReason::Stale),
    }
}

fn join(job: &mut Job, f: &mut Fabric, repr: &Repr) -> Result<(), DropReason> {
    let id = ExchangeId::of(repr);
    let seq = repr.sequence;
    let w = repr.worker;
    if let Some(run) = &mut job.current {
        if run.id == id && run.seq == seq {
            if run.started {
                // The go was lost: repeat it to this worker.
                f.go(&id, seq, run.block, w);
            } else {
                run.joined.set(usize::from(w), true);
                start_if_all_joined(job, f);
            }
            return Ok(());
        }
        // Exchanges run in sequence order; a new one may begin once the current is complete.
        if seq <= run.seq || !run.finished() {
            return Err(DropReason::Stale);
        }
    }
    let plan = job.layers[usize::from(repr.layer)].clone();
    if let Some(old) = job.current.take() {
        job.previous = Some((old.id, old.seq, old.block));
    }
    let workers = usize::from(job.workers);
    let mut joined = BitVec::repeat(false, workers);
    joined.set(usize::from(w), true);
    job.current = Some(Run {
        id,
        seq,
        plan,
        started: false,
        block: 0,
        joined,
        done: BitVec::repeat(false, workers),
        state: None,
    });
    start_if_all_joined(job, f);
    Ok(())
}

fn start_if_all_joined(job: &mut Job, f: &mut Fabric) {
    let run = job.current.as_mut().expect("a run");
    if !run.joined.all() {
        return;
    }
    run.started = true;
    begin_block(run, f, job.workers);
}

/// Load block `run.block` (or finish) and multicast its go.
fn begin_block(run: &mut Run, f: &mut Fabric, workers: u16) {
    let block = usize::from(run.block);
    if block < run.plan.blocks.len() {
        run.state = Some(match &f.tier {
            Tier::Spine(racks) => BlockState::for_spine(&run.plan, block, racks),
            _ => BlockState::new(&run.plan, block),
        });
    } else {
        run.state = None;
        if f.shard.leads() {
            f.counters.exchanges_completed += 1;
        }
    }
    run.done.fill(false);
    for w in 0..workers {
        f.go(&run.id, run.seq, run.block, w);
    }
}

fn block_done(job: &mut Job, f: &mut Fabric, repr: &Repr) -> Result<(), DropReason> {
    let w = repr.worker;
    let workers = job.workers;
    if let Some((prev, seq, blocks)) = job.previous {
        if prev.matches(repr) && !job.current.as_ref().is_some_and(|r| r.id.matches(repr)) {
            // A worker that missed the previous exchange's final go.
            f.go(&prev, seq, blocks, w);
            return Ok(());
        }
    }
    let run = match &mut job.current {
        Some(run) if run.id.matches(repr) && run.started => run,
        _ => return Err(DropReason::Stale),
    };
    if repr.block < run.block {
        f.go(&run.id, run.seq, run.block, w);
        return Ok(());
    }
    if repr.block > run.block || run.finished() {
        return Err(DropReason::Stale);
    }
    run.done.set(usize::from(w), true);
    if run.done.all() {
        // Free what the block still holds (aggregators whose destination finished by fetching
        // raw features from its cache never saw a resend).
        if let Some(state) = run.state.take() {
            state.release(f);
        }
        if f.shard.leads() {
            f.counters.blocks_completed += 1;
        }
        run.block += 1;
        begin_block(run, f, workers);
    }
    Ok(())
}

fn data(
    job: &mut Job,
    f: &mut Fabric,
    repr: &Repr,
    packet: &Packet<&[u8]>,
) -> Result<(), DropReason> {
    let (run, lanes) = data_block(job, repr)?;
    let plan = &run.plan;
    if plan.owner[repr.src as usize] != repr.worker {
        return Err(DropReason::NotInPlan);
    }
    let c = usize::from(repr.chunk);
    let block = &plan.blocks[usize::from(run.block)];
    let table = &block.table;
    let mut one_slot = [0];
    let (sender, targets) = targets(plan, usize::from(run.block), repr, &mut one_slot)?;
    let chunks = plan.chunks();
    let state = run.state.as_mut().expect("a running block has state");
    let mut values = [0i32; MAX_LANES];
    packet.lanes_into(&mut values[..lanes]);
    let mut ack = *repr;
    ack.flags.ack = true;
    ack.lanes = 0;
    // Whether this model acknowledges the packet (a sharded switch's: one shard of those it
    // reaches).
    let acks = f.counting;
    if state.seen.replace(sender * chunks + c, true) {
        // Already counted: acknowledge again (the first ack may be lost), add nothing.
        if acks {
            f.counters.acks += 1;
            f.send(repr.worker, &ack, &[]);
        }
        return Err(DropReason::Duplicate);
    }
    // A partial sum its worker could not fit into 32-bit lanes carries nothing to add.
    let unfit = plan.mode == Mode::Reduce && repr.flags.fetch && repr.src != repr.dst;
    // A packet marked on its way in (a queue before this switch, as a leaf's uplink) has its
    // acknowledgement marked too: the P4 program's acknowledgement keeps the packet's flags.
    let mut congested = repr.flags.ecn;
    // The passes touch aggregators scattered over the pool: ask for them all before adding
    // into the first, so that their cache misses overlap instead of following each other.
    for &slot in targets {
        let k = slot as usize * chunks + c;
        if let (true, Agg::Active(a)) = (f.shard.owns(f.job, k), state.agg[k]) {
            prefetch(&f.pool.lanes[a as usize * MAX_LANES..][..MAX_LANES]);
        }
    }
    for &slot in targets {
        let k = slot as usize * chunks + c;
        let dst_rank = table.workers[slot as usize] as u16;
        if acks {
            // The acknowledgement echoes congestion towards every destination it feeds.
            congested |= f.congested(dst_rank);
        }
        if !f.shard.owns(f.job, k) {
            continue;
        }
        f.counters.passes += 1;
        let dst = table.vertices[slot as usize];
        if state.remaining[k] == 0 {
            // Cannot happen with a consistent table: every contribution is counted once.
            continue;
        }
        state.remaining[k] -= 1;
        state.claim(k, f);
        let Agg::Active(a) = state.agg[k] else {
            if unfit {
                if state.agg[k] != Agg::Released {
                    state.agg[k] = Agg::Released;
                    notify_fetch(f, repr, dst, dst_rank);
                }
                continue;
            }
            // No aggregator (pool exhausted, or released): the host aggregates this one.
            forward_raw(f, repr, dst, dst_rank, &values[..lanes]);
            if state.remaining[k] == 0 && state.agg[k] == Agg::Idle {
                state.agg[k] = Agg::Done;
                if state.up.get(slot as usize).is_some_and(|up| *up) {
                    // A leaf whose every contribution went raw still tells the spine its
                    // share is in: none of it.
                    tier::send_partial(f, repr, dst, 0, &[0; MAX_LANES][..lanes]);
                }
            }
            continue;
        };
        let acc = &mut f.pool.lanes[a as usize * MAX_LANES..][..lanes];
        // All lanes are checked before any is written: an overflow leaves no partial update.
        let overflow = !unfit && !checked_add_lanes(acc, &values[..lanes]);
        if overflow || unfit {
            f.counters.overflows += 1;
            f.pool.release(a);
            state.agg[k] = Agg::Released;
            notify_fetch(f, repr, dst, dst_rank);
            if !unfit {
                forward_raw(f, repr, dst, dst_rank, &values[..lanes]);
            }
            continue;
        }
        f.counters.lane_updates += lanes as u64;
        state.counted[k] += 1;
        if state.remaining[k] == 0 {
            let mut sums = [0i32; MAX_LANES];
            sums[..lanes].copy_from_slice(&f.pool.lanes[a as usize * MAX_LANES..][..lanes]);
            let sums = &sums[..lanes];
            if state.up.get(slot as usize).is_some_and(|up| *up) {
                // A leaf's share of a sum the spine finishes.
                tier::send_partial(f, repr, dst, state.counted[k], sums);
            } else {
                send_result(f, repr, dst, dst_rank, state.counted[k], sums);
            }
            // A partial sum's pass ends its packet; a multicast contribution may go on (the P4
            // program reads in place when the completing pass ends its pipe's chain: fewer).
            let partial = plan.mode == Mode::Reduce && repr.src != repr.dst;
            f.counters.count_readout(lanes, partial);
            f.pool.release(a);
            state.agg[k] = Agg::Done;
            f.counters.aggregations += 1;
        }
    }
    if !acks {
        return Ok(());
    }
    ack.flags.ecn = congested;
    if congested {
        f.counters.ecn_marks += 1;
    }
    f.counters.acks += 1;
    f.send(repr.worker, &ack, &[]);
    Ok(())
}

/// A data packet's sender (the index of its seen bits) and the table rows whose aggregators it
/// is added into, in block `block` of `plan`: a vertex's feature goes into every in-block
/// neighbour's aggregator; a partial sum into its destination's only (`one_slot` holds it).
fn targets<'a>(
    plan: &'a ExchangePlan,
    block: usize,
    repr: &Repr,
    one_slot: &'a mut [u32; 1],
) -> Result<(usize, &'a [u32]), DropReason> {
    let block = plan.blocks.get(block).ok_or(DropReason::Stale)?;
    if plan.mode == Mode::Reduce && repr.src == repr.dst {
        // A hybrid block's multicast sender: its feature into each of its destinations.
        let i = block
            .multicast
            .index(repr.src)
            .ok_or(DropReason::NotInPlan)?;
        Ok((block.table.slots.len() + i, block.multicast.rows_of(i)))
    } else if plan.mode == Mode::Reduce {
        let row = block.row_of(repr.dst).ok_or(DropReason::NotInPlan)?;
        let pair = block.pair(row, repr.worker).ok_or(DropReason::NotInPlan)?;
        one_slot[0] = row as u32;
        Ok((pair, &one_slot[..]))
    } else {
        let row = block.row_of(repr.src).ok_or(DropReason::NotInPlan)?;
        Ok((row, block.table.row(row)))
    }
}

/// The running block a data packet must belong to, and the lanes of its chunk (the packet's
/// checked against them).
fn data_block<'a>(job: &'a mut Job, repr: &Repr) -> Result<(&'a mut Run, usize), DropReason> {
    let run = running(job, repr)?;
    if repr.block != run.block {
        return Err(DropReason::Stale);
    }
    if !run.plan.mode.switch_aggregates() {
        return Err(DropReason::WrongMode);
    }
    let lanes = run.plan.chunk_lanes(usize::from(repr.chunk));
    if usize::from(repr.lanes) != lanes {
        return Err(DropReason::BadLanes);
    }
    Ok((run, lanes))
}

/// Send `dst`'s finished sum of `count` contributions to its worker `rank`.
fn send_result(f: &mut Fabric, repr: &Repr, dst: u32, rank: u16, count: u16, sums: &[i32]) {
    let mut result = *repr;
    result.packet_type = PacketType::Result;
    result.flags.partial = false;
    result.src = dst;
    result.dst = dst;
    result.count = count;
    result.worker = rank;
    f.send(rank, &result, sums);
}

/// Hint the CPU to bring `lanes` into its cache (a no-op where there is no such hint).
#[inline]
fn prefetch(lanes: &[i32]) {
    #[cfg(target_arch = "x86_64")]
    for line in lanes.chunks(16) {
        // SAFETY: a prefetch only hints the cache; the address is that of a live slice.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                line.as_ptr().cast(),
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = lanes;
}

/// Tell `dst`'s owner that its aggregator was released unfinished: fetch the raw
/// contributions.
fn notify_fetch(f: &mut Fabric, repr: &Repr, dst: u32, rank: u16) {
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
fn forward_raw(f: &mut Fabric, repr: &Repr, dst: u32, rank: u16, lanes: &[i32]) {
    let mut r = *repr;
    r.packet_type = PacketType::Raw;
    r.dst = dst;
    r.count = 1;
    f.counters.raw_forwarded += 1;
    f.send(rank, &r, lanes);
}

fn raw(job: &mut Job, f: &mut Fabric, repr: &Repr, bytes: &[u8]) -> Result<(), DropReason> {
    let run = running(job, repr)?;
    let plan = &run.plan;
    if plan.owner[repr.src as usize] != repr.worker {
        return Err(DropReason::NotInPlan);
    }
    if usize::from(repr.lanes) != plan.chunk_lanes(usize::from(repr.chunk)) {
        return Err(DropReason::BadLanes);
    }
    let dst_rank = plan.owner[repr.dst as usize];
    if repr.flags.resend && plan.mode.switch_aggregates() && repr.block == run.block {
        let block = &plan.blocks[usize::from(run.block)];
        if let (Some(slot), Some(state)) = (block.row_of(repr.dst), run.state.as_mut()) {
            let k = slot * plan.chunks() + usize::from(repr.chunk);
            match if f.shard.owns(f.job, k) {
                state.agg[k]
            } else {
                Agg::Done
            } {
                Agg::Active(a) => {
                    f.pool.release(a);
                    state.agg[k] = Agg::Released;
                    f.counters.releases += 1;
                }
                Agg::Idle => {
                    state.agg[k] = Agg::Released;
                    f.counters.releases += 1;
                }
                Agg::Done | Agg::Released => {}
            }
        }
    }
    if f.shard.leads() {
        f.forward(dst_rank, &bytes[..repr.buffer_len()]);
    }
    Ok(())
}

/// Packed host copies, or their receiver's ack of ranges: forwarded whole to the owner of
/// `dst`, as the P4 program forwards them (it parses the header only, and the records or
/// ranges after it are the receiver's to check). Only the host exchange sends them, from the
/// owner of `src`.
fn rows(job: &mut Job, f: &mut Fabric, repr: &Repr, bytes: &[u8]) -> Result<(), DropReason> {
    let run = running(job, repr)?;
    let plan = &run.plan;
    if plan.mode.switch_aggregates() || plan.owner[repr.src as usize] != repr.worker {
        return Err(DropReason::NotInPlan);
    }
    if repr.lanes != 0 {
        return Err(DropReason::BadLanes);
    }
    let dst_rank = plan.owner[repr.dst as usize];
    if f.shard.leads() {
        f.forward(dst_rank, bytes);
    }
    Ok(())
}

fn fetch(job: &mut Job, f: &mut Fabric, repr: &Repr, bytes: &[u8]) -> Result<(), DropReason> {
    let run = running(job, repr)?;
    let plan = &run.plan;
    // Only the destination's owner asks for its contributions.
    if plan.owner[repr.dst as usize] != repr.worker {
        return Err(DropReason::NotInPlan);
    }
    let owner = plan.owner[repr.src as usize];
    f.forward(owner, &bytes[..repr.buffer_len()]);
    Ok(())
}

impl Switch {
    /// The next packet out, not yet numbered (see [`stamp`]).
    fn pop_unstamped(&mut self, buf: &mut [u8]) -> Option<Transmit> {
        self.fabric.out.pop_into(buf)
    }
}

impl Node for Switch {
    fn handle_packet(&mut self, now: Nanos, from: Address, bytes: &[u8]) {
        let counts = self.fabric.shard.leads();
        self.handle_routed(now, from, bytes, counts);
    }

    fn handle_timeout(&mut self, _now: Nanos) {}

    fn poll_transmit(&mut self, _now: Nanos, buf: &mut [u8]) -> Option<Transmit> {
        let t = self.pop_unstamped(buf)?;
        self.stamps.stamp(&t, buf);
        Some(t)
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        None
    }
}

impl SwitchNode for Switch {
    fn set_egress_queue(&mut self, port: u16, bytes: u64) {
        Switch::set_egress_queue(self, port, bytes)
    }

    fn passes(&self) -> u64 {
        let c = self.counters();
        c.passes + c.readout_passes
    }

    fn passes_reading_pairs(&self) -> u64 {
        let c = self.counters();
        c.passes + c.pair_readout_passes
    }

    fn aggregators_in_use(&self) -> usize {
        Switch::aggregators_in_use(self)
    }
}

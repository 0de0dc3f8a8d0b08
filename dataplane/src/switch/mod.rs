//! The switch model: exactly what the P4 program does, as a sans-IO state machine.
//!
//! Per packet, in order:
//! 1. parse (malformed → dropped and counted by reason), admission (a configured job whose
//!    worker `r` is on the ingress port: each job has its own range of ports), ids in range for
//!    the exchange's plan;
//! 2. **Data**: look the source vertex up in the current block's vertex → aggregators table;
//!    drop a duplicate (a per-source, per-chunk seen bit) but acknowledge it again; otherwise
//!    make one pass per destination aggregator, each a recirculation on Tofino after the first
//!    pass, which only checks the packet (the P4 program's stages hold the checks or the
//!    aggregation, not both in sequence: `SwitchCounters::check_passes`): allocate on
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
use serde::Serialize;
use thiserror::Error;

mod aggregate;
mod barrier;
mod counters;
mod output;
mod pool;
mod racks;
mod reduce;
mod sharded;
mod shared;
mod stamp;
mod state;
mod tier;

pub use counters::{DropReason, JobStatus, SwitchCounters};
pub use racks::{Racks, Tier, MAX_RACKS};
pub use reduce::MAX_SLOTS;
pub use sharded::{ShardedSwitch, MAX_SHARDS};
pub use shared::MAX_POOL_SLOTS;
pub use stamp::EgressStamps;
pub use tier::{spine_traffic, two_level, SpineTraffic};

use aggregate::{data, fetch, raw, rows};
use barrier::{block_done, join};
use output::{Pipeline, Shard};
use pool::Pool;
use state::{check_limits, AllReduce, Job};

use crate::node::{Address, Nanos, Node, Outbox, SwitchNode, Transmit};
use crate::plan::ExchangePlan;
use crate::wire::{Packet, PacketType, Repr, MAX_LANES};

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

/// The switch model.
#[derive(Debug)]
pub struct Switch {
    jobs: BTreeMap<u16, Job>,
    pipeline: Pipeline,
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
            pipeline: Pipeline {
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
        if end > u32::from(self.pipeline.config.ports) {
            return Err(SwitchError::TooManyWorkers {
                job: job.job,
                workers: ports,
                first_port: job.first_port,
                ports: self.pipeline.config.ports,
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
            self.pipeline.pool.quotas.insert(job.job, (0, quota));
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
        if let Some(q) = self.pipeline.egress.get_mut(usize::from(port)) {
            *q = bytes;
        }
    }

    /// A leaf's driver reports the depth (bytes) of the queue up to the spine.
    pub fn set_uplink_queue(&mut self, bytes: u64) {
        self.pipeline.uplink = bytes;
    }

    /// The driver reports whether its input queue (a software switch's socket backlog) is
    /// above its marking threshold. While it is, every packet the switch sends carries ECN, so
    /// the senders slow down before that queue overflows. A hardware pipeline runs at line
    /// rate and has no such queue; its drivers never set this.
    pub fn set_ingress_congested(&mut self, congested: bool) {
        self.pipeline.ingress_congested = congested;
    }

    /// The switch's counters.
    pub fn counters(&self) -> &SwitchCounters {
        &self.pipeline.counters
    }

    /// The switch's resources.
    pub fn config(&self) -> &SwitchConfig {
        &self.pipeline.config
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
        self.pipeline.pool.in_use()
    }

    /// Handle a packet; `counts`: this model acknowledges it and counts it in (a sharded
    /// switch's routing picks one shard per packet for that).
    pub(super) fn handle_routed(&mut self, now: Nanos, from: Address, bytes: &[u8], counts: bool) {
        self.pipeline.counting = counts;
        let result = self.process(now, from, bytes);
        if counts {
            self.pipeline.counters.packets_in += 1;
            self.pipeline.counters.bytes_in += bytes.len() as u64;
            let largest = &mut self.pipeline.counters.largest_in;
            *largest = (*largest).max(bytes.len() as u64);
            match result {
                Ok(()) => self.pipeline.counters.accepted += 1,
                Err(reason) => self.pipeline.drop(reason),
            }
        }
    }

    fn process(&mut self, now: Nanos, from: Address, bytes: &[u8]) -> Result<(), DropReason> {
        let packet = Packet::new_checked(bytes).map_err(DropReason::of)?;
        let repr = Repr::parse(&packet).map_err(DropReason::of)?;
        let f = &mut self.pipeline;
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
            // A spine numbers nothing for workers: their leaves do.
            PacketType::Stamps if !repr.flags.ack && !matches!(job.tier, Tier::Spine(_)) => {
                answer_stamps(f, &repr)
            }
            PacketType::Stamps => Err(DropReason::WrongDirection),
            // (The all-reduce types were taken care of above.)
            PacketType::Result | PacketType::BlockGo | PacketType::Reduce | PacketType::Reduced => {
                Err(DropReason::WrongDirection)
            }
        }
    }
}

/// A worker asks where the numbering of what this switch sends it stands: the reply goes back
/// at once, and its number is filled in as it leaves, behind everything numbered before it
/// (`stamp.rs`).
fn answer_stamps(f: &mut Pipeline, repr: &Repr) -> Result<(), DropReason> {
    if repr.lanes != 0 {
        return Err(DropReason::BadLanes);
    }
    let mut reply = *repr;
    reply.flags.ack = true;
    let mut buf = [0u8; crate::wire::HEADER_LEN];
    reply.emit(&mut Packet::new_unchecked(&mut buf[..]));
    f.forward(repr.worker, &buf);
    Ok(())
}

impl Switch {
    /// The next packet out, not yet numbered (see [`stamp`]).
    fn pop_unstamped(&mut self, buf: &mut [u8]) -> Option<Transmit> {
        self.pipeline.out.pop_into(buf)
    }
}

impl Node for Switch {
    fn handle_packet(&mut self, now: Nanos, from: Address, bytes: &[u8]) {
        let counts = self.pipeline.shard.leads();
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
        c.check_passes + c.passes + c.readout_passes
    }

    fn passes_reading_pairs(&self) -> u64 {
        let c = self.counters();
        c.check_passes + c.passes + c.pair_readout_passes
    }

    fn aggregators_in_use(&self) -> usize {
        Switch::aggregators_in_use(self)
    }
}

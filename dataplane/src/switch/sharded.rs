//! The switch model spread over cores by destination: a software switch whose one core cannot
//! keep up with its ports.
//!
//! A data packet's work is one pass per destination aggregator, and destinations are
//! independent: shard `s` of `n` keeps the aggregators of the (row, chunk) keys with
//! `key % n == s` — keys run over a block's destinations and chunks, so each shard holds at
//! most `⌈keys / n⌉` of a block's aggregators, and `⌈aggregators / n⌉` of the pool is enough for
//! any plan that fits the whole. Every shard sees every packet, in the same order, so the
//! barriers and the seen bits (small, and read by every pass) are the same in all of them
//! without any exchange between cores; only the lead (shard 0) acknowledges, multicasts the
//! gos, forwards, runs the all-reduce and counts what comes in. What a packet makes every
//! shard do besides its own passes — parse it and find its row — is a few dozen nanoseconds,
//! so the shards scale while the passes dominate (a feature sent to many destinations).
//!
//! A driver hands a received burst to [`ShardedSwitch::handle_batch`], which runs the shards in
//! parallel (one thread each) and returns when all are done; their output is then polled shard
//! after shard. Per packet ([`Node::handle_packet`]) the shards run one after another on the
//! caller's thread, the same result: what the in-memory network and the tests drive.

use std::ops::Range;

use super::{JobConfig, Shard, Switch, SwitchConfig, SwitchCounters, SwitchError, Tier};
use crate::node::{Address, Nanos, Node, SwitchNode, Transmit};

/// Shards a switch can have.
pub const MAX_SHARDS: u16 = 64;

/// Packets received together, handed to the shards at once: their bytes back to back.
#[derive(Debug, Default)]
pub struct Batch {
    bytes: Vec<u8>,
    packets: Vec<(Address, Range<usize>)>,
}

impl Batch {
    /// Add a copy of `bytes`, arrived from `from`.
    pub fn push(&mut self, from: Address, bytes: &[u8]) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(bytes);
        self.packets.push((from, start..self.bytes.len()));
    }

    /// Packets in the batch.
    pub fn len(&self) -> usize {
        self.packets.len()
    }

    /// Whether the batch holds no packet.
    pub fn is_empty(&self) -> bool {
        self.packets.is_empty()
    }

    /// Empty the batch, keeping its buffers.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.packets.clear();
    }

    fn iter(&self) -> impl Iterator<Item = (Address, &[u8])> {
        self.packets
            .iter()
            .map(|(from, r)| (*from, &self.bytes[r.clone()]))
    }
}

/// A switch model in `n` shards, one core each (see the module's docs). With one shard it is
/// the plain [`Switch`].
#[derive(Debug)]
pub struct ShardedSwitch {
    shards: Vec<Switch>,
    /// One thread per shard, for [`ShardedSwitch::handle_batch`]; none with one shard.
    threads: Option<rayon::ThreadPool>,
    /// The shard whose output [`Node::poll_transmit`] takes next.
    polling: usize,
}

impl ShardedSwitch {
    /// A switch of `config`'s resources in `shards` shards (1 to [`MAX_SHARDS`]), each with
    /// `⌈config.aggregators / shards⌉` aggregators.
    pub fn new(config: SwitchConfig, shards: u16) -> Result<ShardedSwitch, SwitchError> {
        if shards == 0 || shards > MAX_SHARDS {
            return Err(SwitchError::BadShards(shards));
        }
        let per_shard = SwitchConfig {
            aggregators: config.aggregators.div_ceil(usize::from(shards)),
            ..config
        };
        let threads = if shards > 1 {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(usize::from(shards))
                .thread_name(|i| format!("switch-shard-{i}"))
                .build()
                .map_err(|e| SwitchError::Threads(e.to_string()))?;
            Some(pool)
        } else {
            None
        };
        Ok(ShardedSwitch {
            shards: (0..shards)
                .map(|index| {
                    let shard = Shard {
                        index,
                        count: shards,
                    };
                    Switch::shard(if shards == 1 { config } else { per_shard }, shard)
                })
                .collect(),
            threads,
            polling: 0,
        })
    }

    /// Shards of the switch.
    pub fn shards(&self) -> u16 {
        self.shards.len() as u16
    }

    /// The lead shard: the barriers, the all-reduce and what came in (what a control plane
    /// asks about a job: [`Switch::job_status`], [`Switch::exchange_running`]).
    pub fn lead(&self) -> &Switch {
        &self.shards[0]
    }

    /// Admit a job on every shard, its aggregator quota (if any) split as the pool is. Only a
    /// star's switch can be sharded: a leaf's and a spine's partial sums are not split by
    /// destination.
    pub fn add_job(&mut self, job: JobConfig) -> Result<(), SwitchError> {
        let n = self.shards.len();
        if n > 1 && !matches!(job.tier, Tier::Star) {
            return Err(SwitchError::ShardedTier(job.job));
        }
        for s in &mut self.shards {
            let mut j = job.clone();
            j.aggregators = job.aggregators.map(|q| q.div_ceil(n));
            s.add_job(j)?;
        }
        Ok(())
    }

    /// Give job `job` an all-reduce region (in the lead, which runs the all-reduce).
    pub fn add_allreduce(&mut self, job: u16, slots: u16) -> Result<(), SwitchError> {
        self.shards[0].add_allreduce(job, slots)
    }

    /// Give the switch a shared all-reduce pool (in the lead).
    pub fn set_allreduce_pool(&mut self, slots: u32, leak: Nanos) -> Result<(), SwitchError> {
        self.shards[0].set_allreduce_pool(slots, leak)
    }

    /// Let job `job` all-reduce best-effort in the shared pool (in the lead).
    pub fn add_allreduce_best_effort(&mut self, job: u16, window: u16) -> Result<(), SwitchError> {
        self.shards[0].add_allreduce_best_effort(job, window)
    }

    /// The driver reports the depth of the egress queue towards `port` (every shard marks
    /// what it sends there).
    pub fn set_egress_queue(&mut self, port: u16, bytes: u64) {
        for s in &mut self.shards {
            s.set_egress_queue(port, bytes);
        }
    }

    /// A leaf's driver reports the depth of the queue up to the spine.
    pub fn set_uplink_queue(&mut self, bytes: u64) {
        for s in &mut self.shards {
            s.set_uplink_queue(bytes);
        }
    }

    /// The driver reports whether its input queue is above its marking threshold.
    pub fn set_ingress_congested(&mut self, congested: bool) {
        for s in &mut self.shards {
            s.set_ingress_congested(congested);
        }
    }

    /// Every shard's counters added up: what the switch did. `peak_aggregators` is the sum of
    /// the shards' peaks (an upper bound of the switch's).
    pub fn counters(&self) -> SwitchCounters {
        let mut sum = self.shards[0].counters().clone();
        for s in &self.shards[1..] {
            sum += s.counters();
        }
        sum
    }

    /// Each shard's counters (how evenly the passes spread).
    pub fn shard_counters(&self) -> Vec<SwitchCounters> {
        self.shards.iter().map(|s| s.counters().clone()).collect()
    }

    /// Aggregators in use now, over all shards.
    pub fn aggregators_in_use(&self) -> usize {
        self.shards.iter().map(Switch::aggregators_in_use).sum()
    }

    /// Handle every packet of `batch`, all received by `now`: each shard on its own thread,
    /// in the batch's order. Returns when every shard is done; poll the output then.
    pub fn handle_batch(&mut self, now: Nanos, batch: &Batch) {
        let run = |s: &mut Switch| {
            for (from, bytes) in batch.iter() {
                s.handle_packet(now, from, bytes);
            }
        };
        match &self.threads {
            Some(pool) => pool.scope(|scope| {
                for s in &mut self.shards {
                    scope.spawn(move |_| run(s));
                }
            }),
            None => run(&mut self.shards[0]),
        }
    }
}

impl Node for ShardedSwitch {
    fn handle_packet(&mut self, now: Nanos, from: Address, bytes: &[u8]) {
        for s in &mut self.shards {
            s.handle_packet(now, from, bytes);
        }
    }

    fn handle_timeout(&mut self, _now: Nanos) {}

    fn poll_transmit(&mut self, now: Nanos, buf: &mut [u8]) -> Option<Transmit> {
        while self.polling < self.shards.len() {
            if let Some(t) = self.shards[self.polling].poll_transmit(now, buf) {
                return Some(t);
            }
            self.polling += 1;
        }
        self.polling = 0;
        None
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        None
    }
}

impl SwitchNode for ShardedSwitch {
    fn set_egress_queue(&mut self, port: u16, bytes: u64) {
        ShardedSwitch::set_egress_queue(self, port, bytes)
    }

    fn passes(&self) -> u64 {
        self.shards.iter().map(SwitchNode::passes).sum()
    }

    fn aggregators_in_use(&self) -> usize {
        ShardedSwitch::aggregators_in_use(self)
    }
}

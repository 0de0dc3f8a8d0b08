//! The switch model spread over cores by destination: a software switch whose one core cannot
//! keep up with its ports.
//!
//! A data packet's work is one pass per destination aggregator, and destinations are
//! independent: of job `j`'s (row, chunk) keys, shard `s` of `n` keeps the aggregators of
//! those with `(key + j) % n == s`. Keys run over a block's destinations and chunks, so a
//! block of `k` keys needs at most `⌈k / n⌉` aggregators of any shard: each shard's pool is
//! `⌈aggregators / n⌉` (up to `n − 1` aggregators more than the whole switch's, so that every
//! block that fits the switch fits each shard), and a job's quota is split exactly, by the
//! rule its keys follow ([`share`]), so that the job holds no more than its quota in all and a
//! block within the quota fits each shard's part. With several jobs, a shard can run out of its
//! pool a little before the whole switch would (two jobs' leftover keys on the same shard);
//! what finds no aggregator goes to its host, exact, as on any switch whose pool is full.
//!
//! **Routing.** A data packet goes to the shards that own one of its aggregators (found from
//! its header and the plan's table, as the shards find them), and the owner of its first
//! aggregator acknowledges and counts it. A retransmission takes the same route, so each
//! shard's seen bits stay exact for the packets it sees. The barriers (join, block done) go to
//! every shard, which all keep them; the lead (shard 0) multicasts the gos. Everything else —
//! forwarding, the all-reduce, what does not parse — goes to the lead, and a resend's raw copy
//! also to the shard whose aggregator it releases.
//!
//! **Threads.** A driver hands each received packet to [`ShardedSwitch::take`] (on one core
//! it is handled at once) and calls [`ShardedSwitch::run_batch`] at the end of a burst: the
//! lead runs on the caller's thread and every other shard on a thread of its own, each routing
//! the whole burst and handling what comes to it (routing on one thread first would leave the
//! others waiting); the call returns when all are done, and their output is then polled shard
//! after shard. Between bursts a shard's thread spins for
//! [`SPIN`] (the next burst of a busy switch comes sooner than a sleeping thread wakes), then
//! sleeps until it is woken: an idle switch takes no CPU. Per packet ([`Node::handle_packet`])
//! the shards run one after another on the caller's thread, with the same result: what the
//! in-memory network and the tests drive.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::aggregate::targets;
use super::output::{shard_of, Shard};
use super::{JobConfig, Switch, SwitchConfig, SwitchCounters, SwitchError, Tier};
use crate::node::{Address, Nanos, Node, SwitchNode, Transmit};
use crate::plan::ExchangePlan;
use crate::wire::{Packet, PacketType, Repr};

/// Shards a switch can have.
pub const MAX_SHARDS: u16 = 64;

/// How long a shard's thread waits for the next burst, spinning, before it sleeps.
pub(crate) const SPIN: Duration = Duration::from_micros(50);

/// Packets received together, handed to the shards at once: their bytes back to back.
#[derive(Debug, Default)]
struct Batch {
    bytes: Vec<u8>,
    packets: Vec<(Address, Range<usize>)>,
}

impl Batch {
    /// Add a copy of `bytes`, arrived from `from`.
    fn push(&mut self, from: Address, bytes: &[u8]) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(bytes);
        self.packets.push((from, start..self.bytes.len()));
    }

    /// Packets in the batch.
    fn len(&self) -> usize {
        self.packets.len()
    }

    /// Whether the batch holds no packet.
    fn is_empty(&self) -> bool {
        self.packets.is_empty()
    }

    /// Empty the batch, keeping its buffers.
    fn clear(&mut self) {
        self.bytes.clear();
        self.packets.clear();
    }

    fn get(&self, i: usize) -> (Address, &[u8]) {
        let (from, r) = &self.packets[i];
        (*from, &self.bytes[r.clone()])
    }
}

/// Where a packet goes: a set of shards (a bit each), and the one that acknowledges and
/// counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Route {
    shards: u64,
    counter: u16,
}

impl Route {
    const LEAD: Route = Route {
        shards: 1,
        counter: 0,
    };
}

/// A switch model in `n` shards, one core each (see the module's docs). With one shard it is
/// the plain [`Switch`].
#[derive(Debug)]
pub struct ShardedSwitch {
    /// Shard 0, run on the caller's thread.
    lead: Switch,
    /// Shards 1.., each run on a thread of its own (and locked by the caller only between
    /// bursts).
    others: Vec<Arc<Mutex<Switch>>>,
    router: Arc<Router>,
    /// The burst being filled, shared with the threads while they run it.
    batch: Arc<Batch>,
    crew: Option<Crew>,
    /// The shard whose output [`Node::poll_transmit`] takes next.
    polling: usize,
    /// Sequence numbers of what leaves for each worker port, from whichever shard.
    stamps: super::stamp::EgressStamps,
}

/// The threads of shards 1.. and how the caller hands them a burst.
#[derive(Debug)]
struct Crew {
    signal: Arc<Signal>,
    threads: Vec<JoinHandle<()>>,
}

#[derive(Debug, Default)]
struct Signal {
    /// Bumped once per burst (and to stop).
    generation: AtomicU64,
    /// Threads done with the current burst.
    done: AtomicUsize,
    stop: AtomicBool,
    /// The current burst.
    work: Mutex<Option<Work>>,
}

/// A burst handed to the shard threads: its time, its packets and the routes' plans.
type Work = (Nanos, Arc<Batch>, Arc<Router>);

/// What a shard's thread does: wait for a burst, handle its part, say so; until stopped.
fn shard_thread(index: usize, shard: Arc<Mutex<Switch>>, signal: Arc<Signal>) {
    let mut seen = 0;
    loop {
        let idle = Instant::now();
        loop {
            let g = signal.generation.load(Ordering::Acquire);
            if g != seen {
                seen = g;
                break;
            }
            if idle.elapsed() < SPIN {
                std::hint::spin_loop();
            } else {
                // The caller unparks after bumping the generation: no wake-up is lost.
                std::thread::park();
            }
        }
        if signal.stop.load(Ordering::Acquire) {
            return;
        }
        let work = lock(&signal.work).clone();
        if let Some((now, batch, router)) = work {
            run_shard(index, &mut lock(&shard), &router, now, &batch);
        }
        signal.done.fetch_add(1, Ordering::AcqRel);
    }
}

/// Shard `index`'s part of `batch`.
fn run_shard(index: usize, s: &mut Switch, router: &Router, now: Nanos, batch: &Batch) {
    for i in 0..batch.len() {
        let (from, bytes) = batch.get(i);
        let route = router.route(bytes);
        if route.shards & (1 << index) != 0 {
            s.handle_routed(now, from, bytes, usize::from(route.counter) == index);
        }
    }
}

/// A shard's lock: a thread that panicked holding it leaves a switch no worse than its last
/// packet, and the panic is reported where the thread is joined.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl ShardedSwitch {
    /// A switch of `config`'s resources in `shards` shards (1 to [`MAX_SHARDS`]), each with
    /// `⌈config.aggregators / shards⌉` aggregators; a thread for each shard but the first.
    pub fn new(config: SwitchConfig, shards: u16) -> Result<ShardedSwitch, SwitchError> {
        if shards == 0 || shards > MAX_SHARDS {
            return Err(SwitchError::BadShards(shards));
        }
        let n = usize::from(shards);
        let config = SwitchConfig {
            aggregators: config.aggregators.div_ceil(n),
            ..config
        };
        let shard = |index: u16| {
            Switch::shard(
                config,
                Shard {
                    index,
                    count: shards,
                },
            )
        };
        let others: Vec<_> = (1..shards)
            .map(|i| Arc::new(Mutex::new(shard(i))))
            .collect();
        let crew = if shards > 1 {
            let mut crew = Crew {
                signal: Arc::new(Signal::default()),
                threads: Vec::new(),
            };
            for (i, s) in others.iter().enumerate() {
                let (s, signal) = (s.clone(), crew.signal.clone());
                let spawned = std::thread::Builder::new()
                    .name(format!("switch-shard-{}", i + 1))
                    .spawn(move || shard_thread(i + 1, s, signal));
                match spawned {
                    Ok(thread) => crew.threads.push(thread),
                    Err(e) => {
                        // Those already started are stopped.
                        crew.stop();
                        return Err(SwitchError::Threads(e.to_string()));
                    }
                }
            }
            Some(crew)
        } else {
            None
        };
        Ok(ShardedSwitch {
            lead: shard(0),
            others,
            router: Arc::new(Router {
                plans: BTreeMap::new(),
                shards: usize::from(shards),
            }),
            batch: Arc::default(),
            crew,
            polling: 0,
            stamps: Default::default(),
        })
    }

    /// Shards of the switch.
    pub fn shards(&self) -> u16 {
        1 + self.others.len() as u16
    }

    /// The lead shard: the barriers, the all-reduce and what came in (what a control plane
    /// asks about a job: [`Switch::job_status`], [`Switch::exchange_running`]).
    pub fn lead(&self) -> &Switch {
        &self.lead
    }

    /// `f` on every shard (with its index), the lead first.
    fn each<T>(&mut self, mut f: impl FnMut(usize, &mut Switch) -> T) -> Vec<T> {
        let mut out = vec![f(0, &mut self.lead)];
        for (i, s) in self.others.iter().enumerate() {
            out.push(f(i + 1, &mut lock(s)));
        }
        out
    }

    /// `f` of every shard, the lead first.
    fn of_each<T>(&self, f: impl Fn(&Switch) -> T) -> Vec<T> {
        std::iter::once(f(&self.lead))
            .chain(self.others.iter().map(|s| f(&lock(s))))
            .collect()
    }

    /// Admit a job on every shard, its aggregator quota (if any) split as the pool is. Only a
    /// star's switch can be sharded: a leaf's and a spine's partial sums are not split by
    /// destination.
    pub fn add_job(&mut self, job: JobConfig) -> Result<(), SwitchError> {
        let n = usize::from(self.shards());
        if n > 1 && !matches!(job.tier, Tier::Star) {
            return Err(SwitchError::ShardedTier(job.job));
        }
        // The shards are alike: one refuses the job when all do.
        self.each(|i, s| {
            let mut j = job.clone();
            j.aggregators = job
                .aggregators
                .map(|q| share(q, n, i, usize::from(job.job)));
            s.add_job(j)
        })
        .into_iter()
        .collect::<Result<(), _>>()?;
        // No burst is running: the threads hold no router.
        let mut router = (*self.router).clone();
        router.plans.insert(job.job, job.layers);
        self.router = Arc::new(router);
        Ok(())
    }

    /// Give job `job` an all-reduce region (in the lead, which runs the all-reduce).
    pub fn add_allreduce(&mut self, job: u16, slots: u16) -> Result<(), SwitchError> {
        self.lead.add_allreduce(job, slots)
    }

    /// Give the switch a shared all-reduce pool (in the lead).
    pub fn set_allreduce_pool(&mut self, slots: u32, leak: Nanos) -> Result<(), SwitchError> {
        self.lead.set_allreduce_pool(slots, leak)
    }

    /// Let job `job` all-reduce best-effort in the shared pool (in the lead).
    pub fn add_allreduce_best_effort(&mut self, job: u16, window: u16) -> Result<(), SwitchError> {
        self.lead.add_allreduce_best_effort(job, window)
    }

    /// The driver reports the depth of the egress queue towards `port` (every shard marks
    /// what it sends there).
    pub fn set_egress_queue(&mut self, port: u16, bytes: u64) {
        self.each(|_, s| s.set_egress_queue(port, bytes));
    }

    /// A leaf's driver reports the depth of the queue up to the spine.
    pub fn set_uplink_queue(&mut self, bytes: u64) {
        self.each(|_, s| s.set_uplink_queue(bytes));
    }

    /// The driver reports whether its input queue is above its marking threshold.
    pub fn set_ingress_congested(&mut self, congested: bool) {
        self.each(|_, s| s.set_ingress_congested(congested));
    }

    /// Every shard's counters added up: what the switch did. `peak_aggregators` is the sum of
    /// the shards' peaks (an upper bound of the switch's).
    pub fn counters(&self) -> SwitchCounters {
        let mut sum = self.lead.counters().clone();
        for s in &self.others {
            sum += lock(s).counters();
        }
        sum
    }

    /// Each shard's counters (how evenly the passes spread).
    pub fn shard_counters(&self) -> Vec<SwitchCounters> {
        self.of_each(|s| s.counters().clone())
    }

    /// Aggregators in use now, over all shards.
    pub fn aggregators_in_use(&self) -> usize {
        self.of_each(Switch::aggregators_in_use).into_iter().sum()
    }

    /// Hand over a packet received from `from` by `now`: on one core it is handled at once;
    /// on several it joins the burst that [`ShardedSwitch::run_batch`] hands to all cores.
    pub fn take(&mut self, now: Nanos, from: Address, bytes: &[u8]) {
        if self.crew.is_none() {
            self.lead.handle_routed(now, from, bytes, true);
        } else {
            self.batch().push(from, bytes);
        }
    }

    /// The burst being filled.
    fn batch(&mut self) -> &mut Batch {
        Arc::get_mut(&mut self.batch).expect("no shard holds the burst between runs")
    }

    /// Handle every packet of the burst, all received by `now`: each shard on its own thread,
    /// in the burst's order. Returns when every shard is done, the burst emptied; poll the
    /// output then.
    pub fn run_batch(&mut self, now: Nanos) {
        if self.batch.is_empty() {
            return;
        }
        let alone = |batch: &Batch| (0..batch.len()).all(|i| Router::lead_only(batch.get(i).1));
        let Some(crew) = self.crew.as_ref().filter(|_| !alone(&self.batch)) else {
            // One shard, or a burst only the lead handles (a host exchange's forwarding):
            // nobody else to wake.
            run_shard(0, &mut self.lead, &self.router, now, &self.batch);
            self.batch().clear();
            return;
        };
        let signal = &crew.signal;
        *lock(&signal.work) = Some((now, self.batch.clone(), self.router.clone()));
        signal.done.store(0, Ordering::Release);
        signal.generation.fetch_add(1, Ordering::AcqRel);
        for t in &crew.threads {
            t.thread().unpark();
        }
        run_shard(0, &mut self.lead, &self.router, now, &self.batch);
        let mut spins = 0u32;
        while signal.done.load(Ordering::Acquire) < crew.threads.len() {
            if spins < 1 << 12 {
                spins += 1;
                std::hint::spin_loop();
            } else {
                // A shard thread that died (a bug: no packet may panic the model) would
                // otherwise be waited for forever.
                if let Some(i) = crew.threads.iter().position(JoinHandle::is_finished) {
                    panic!("the switch's shard {} stopped", i + 1);
                }
                std::thread::yield_now();
            }
        }
        lock(&signal.work).take();
        self.batch().clear();
    }
}

impl Drop for ShardedSwitch {
    fn drop(&mut self) {
        if let Some(crew) = self.crew.take() {
            crew.stop();
        }
    }
}

impl Crew {
    /// Stop the threads and wait for them.
    fn stop(self) {
        self.signal.stop.store(true, Ordering::Release);
        self.signal.generation.fetch_add(1, Ordering::AcqRel);
        for t in self.threads {
            t.thread().unpark();
            // A shard thread that panicked has nothing left to say here.
            let _ = t.join();
        }
    }
}

/// Shard `shard`'s part of `total` (a job's aggregator quota) split over `shards`: the whole
/// parts to all, the remainder to the shards from `rotation` on — those that own the remainder
/// of a job's keys when `rotation` is the job's id ([`Router::owner`]). The parts add up to
/// `total`.
pub(crate) fn share(total: usize, shards: usize, shard: usize, rotation: usize) -> usize {
    let after_rotation = (shard + shards - rotation % shards) % shards;
    total / shards + usize::from(after_rotation < total % shards)
}

/// Finds each packet's shards (see the module's docs).
#[derive(Debug, Clone)]
struct Router {
    /// Each job's layer plans.
    plans: BTreeMap<u16, Vec<Arc<ExchangePlan>>>,
    shards: usize,
}

impl Router {
    /// The shard owning job `job`'s aggregator key `key`.
    fn owner(&self, job: u16, key: usize) -> u16 {
        shard_of(job, key, self.shards) as u16
    }

    /// Whether `bytes` certainly goes to the lead alone (a cheap look at its type and flags,
    /// before any shard thread is woken).
    fn lead_only(bytes: &[u8]) -> bool {
        let Ok(packet) = Packet::new_checked(bytes) else {
            return true;
        };
        let resend = crate::wire::Flags::from_u8(packet.flags()).is_ok_and(|f| f.resend);
        match PacketType::from_u8(packet.packet_type()) {
            Some(PacketType::Data | PacketType::Join | PacketType::BlockDone) => false,
            Some(PacketType::Raw) => !resend,
            _ => true,
        }
    }

    /// Where `bytes` goes.
    fn route(&self, bytes: &[u8]) -> Route {
        if self.shards == 1 {
            return Route::LEAD;
        }
        let Ok(packet) = Packet::new_checked(bytes) else {
            return Route::LEAD;
        };
        let Ok(repr) = Repr::parse(&packet) else {
            return Route::LEAD;
        };
        let plan = || {
            self.plans
                .get(&repr.job)?
                .get(usize::from(repr.layer))
                .filter(|p| p.mode.switch_aggregates())
        };
        let all = u64::MAX >> (64 - self.shards);
        match repr.packet_type {
            PacketType::Join | PacketType::BlockDone => Route {
                shards: all,
                counter: 0,
            },
            PacketType::Data if !repr.flags.partial => {
                let Some(plan) = plan() else {
                    return Route::LEAD;
                };
                let mut one_slot = [0];
                let block = usize::from(repr.block);
                let Ok((_, rows)) = targets(plan, block, &repr, &mut one_slot) else {
                    return Route::LEAD;
                };
                let (chunks, c) = (plan.chunks(), usize::from(repr.chunk));
                let mut route = Route {
                    shards: 0,
                    counter: 0,
                };
                for (i, &row) in rows.iter().enumerate() {
                    let owner = self.owner(repr.job, row as usize * chunks + c);
                    if i == 0 {
                        route.counter = owner;
                    }
                    route.shards |= 1 << owner;
                }
                if route.shards == 0 {
                    return Route::LEAD;
                }
                route
            }
            PacketType::Raw if repr.flags.resend => {
                // The lead forwards it; the owner of the aggregator it releases releases it.
                let row = plan().and_then(|p| {
                    let b = p.blocks.get(usize::from(repr.block))?;
                    Some(b.row_of(repr.dst)? * p.chunks() + usize::from(repr.chunk))
                });
                Route {
                    shards: 1 | row.map_or(0, |k| 1 << self.owner(repr.job, k)),
                    counter: 0,
                }
            }
            _ => Route::LEAD,
        }
    }
}

impl Node for ShardedSwitch {
    fn handle_packet(&mut self, now: Nanos, from: Address, bytes: &[u8]) {
        let route = self.router.route(bytes);
        if route.shards & 1 != 0 {
            self.lead
                .handle_routed(now, from, bytes, route.counter == 0);
        }
        for (i, s) in self.others.iter().enumerate() {
            if route.shards & (1 << (i + 1)) != 0 {
                lock(s).handle_routed(now, from, bytes, usize::from(route.counter) == i + 1);
            }
        }
    }

    fn handle_timeout(&mut self, _now: Nanos) {}

    fn poll_transmit(&mut self, _now: Nanos, buf: &mut [u8]) -> Option<Transmit> {
        while self.polling <= self.others.len() {
            let t = match self.polling {
                0 => self.lead.pop_unstamped(buf),
                i => lock(&self.others[i - 1]).pop_unstamped(buf),
            };
            if let Some(t) = t {
                self.stamps.stamp(&t, buf);
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
        self.of_each(SwitchNode::passes).into_iter().sum()
    }

    fn passes_reading_pairs(&self) -> u64 {
        self.of_each(SwitchNode::passes_reading_pairs)
            .into_iter()
            .sum()
    }

    fn aggregators_in_use(&self) -> usize {
        ShardedSwitch::aggregators_in_use(self)
    }
}

#[cfg(test)]
mod tests {
    use super::share;

    #[test]
    fn a_quota_split_adds_up_and_holds_the_keys_of_any_block_within_it() {
        for shards in 1..=5usize {
            for job in 0..7usize {
                for quota in 0..40usize {
                    let parts: Vec<usize> =
                        (0..shards).map(|s| share(quota, shards, s, job)).collect();
                    assert_eq!(parts.iter().sum::<usize>(), quota);
                    for keys in 0..=quota {
                        for (s, part) in parts.iter().enumerate() {
                            let owned = (0..keys).filter(|k| (k + job) % shards == s).count();
                            assert!(
                                owned <= *part,
                                "{keys} keys of job {job} on shard {s} of {shards}: {owned} > {part}"
                            );
                        }
                    }
                }
            }
        }
    }
}

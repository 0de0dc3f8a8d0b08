//! The host protocol engine: one worker, one exchange (a layer and a direction), sans-IO.
//!
//! The engine takes the exchange plan, the worker's features and the driver's clock. It joins
//! the exchange, then runs the blocks one after another:
//! - **send**: the worker's rows of the block in the planned order, paced by a congestion
//!   [`Controller`]; what is sent depends on the [`SendStrategy`] — feature chunks to the
//!   switch's aggregators, acknowledged by the switch ([`InNetwork`]), or each boundary vertex
//!   once to every remote worker that needs it, packed per worker into packets of the MTU and
//!   acknowledged by that worker with ranges every few packets ([`HostExchange`], BNS-GCN with
//!   p = 1; [`crate::framing`]); both share one [`Reliable`] layer (a send window, a timeout
//!   from the measured round trip with backoff, RACK-style loss detection per path);
//! - **receive**: per destination vertex and chunk, either the switch's sum (complete when its
//!   count plus the contributions that arrived raw equals the expected count) or every
//!   contribution raw (a per-source bitmap keeps each counted once); raw features that reach
//!   the worker are cached and reused;
//! - **recover**: when no contribution has arrived for the result timeout (at least four
//!   round trips, see `Engine::patience`) after the worker's own rows are out, and the block
//!   has run for at least the switch's known least time for it
//!   ([`Exchange::set_block_floors`]), fetch the missing raw
//!   contributions from their owners — at most a window of them unanswered at once, each asked
//!   again when its reply is overdue (twice a loss's patience: a fetch is answered at once;
//!   the replies carry the resend flag, which releases the switch's aggregator); a switch that
//!   reports an overflow triggers the same fetch at once. The switch numbers the sums and raw
//!   copies it sends each worker (`switch/stamp.rs`): holes in those numbers as many as the
//!   sums still missing are evidence that those were lost, and then a few round trips of quiet
//!   are enough before the round (`holes.rs`);
//! - **barrier**: report the block done, and start the next block on the switch's go (or on
//!   any packet of the next block, which proves the go was sent).
//!
//! The output is, for every local vertex with remote neighbours, the exact integer sum of its
//! remote contributions (`i64` lanes), and its decoded floats.

mod holes;
mod receive;
mod relay;
mod reliable;
mod rows;
mod send;

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::cc::Controller;
use crate::fixed::Scale;
use crate::framing::HostFraming;
use crate::node::{Address, ExchangeId, HostNode, Nanos, Node, Operation, Outbox, Transmit};
use crate::plan::{ExchangePlan, Mode};
use crate::wire::{emit_ack_ranges, AckRanges, Packet, PacketType, Records, Repr, HEADER_LEN};

use holes::StreamHoles;
use receive::{Raw, Receiver};
pub use reliable::{Reliable, RttEstimator};
use rows::{AckNow, RowAcks};
pub use send::{
    BalancedHostExchange, HostExchange, HostMixed, HostPreAggregated, HostRackProxy, InNetwork,
    PreAggregated, SendQueue, SendStrategy,
};

/// Which of the missing contributions a fetch round may ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ask {
    /// Any, new or asked for before (a round after the quiet deadline).
    Any,
    /// Only those asked for before whose replies are overdue (a round at the refetch deadline).
    Again,
}

/// An exchange engine behind one interface, whatever its strategy.
/// [`Operation::is_finished`]: the switch's go past the last block has arrived.
pub trait Exchange: Operation {
    /// The sums received so far (complete once finished).
    fn output(&self) -> &ExchangeOutput;
    /// The engine's counters.
    fn stats(&self) -> &EngineStats;
    /// The block being exchanged (`None` while joining and once finished): for diagnostics.
    fn running_block(&self) -> Option<u16>;
    /// The least time the switch needs for each block's sums, by block (on a chip, the chip
    /// model's bound for the block alone): no fetch round goes out before the block has run
    /// this long. On a switch that is slow rather than lossy (a recirculation-bound chip) sums
    /// arrive far apart, and a fetch sent in a gap only doubles what crosses the network;
    /// after a loss the block cannot end before this anyway. None by default (a software
    /// switch: nothing is known).
    fn set_block_floors(&mut self, floors: Vec<Nanos>);
    /// When the switch's go for the first block arrived (`None` while joining): the exchange
    /// proper runs from there, after the wait for every worker to join.
    fn started_at(&self) -> Option<Nanos>;
}

impl HostNode for dyn Exchange {
    fn is_done(&self) -> bool {
        self.is_finished()
    }
}

/// The in-network (SwitchGNN or strawman) engine.
pub type InNetworkEngine = Engine<InNetwork>;
/// The pre-aggregated exchange's engine.
pub type ReduceEngine = Engine<PreAggregated>;
/// The host-exchange baseline engine.
pub type HostEngine = Engine<HostExchange>;
/// The host exchange with G3-style balanced rounds.
pub type BalancedHostEngine = Engine<BalancedHostExchange>;
/// The host-only pre-aggregated exchange's engine.
pub type HostReduceEngine = Engine<HostPreAggregated>;
/// The host hybrid's engine (raw copies or partial sums per ordered worker pair).
pub type HostHybridEngine = Engine<HostMixed>;
/// The host two-level exchange's engine (a rack's shares summed by a proxy of the rack).
pub type HostTwoLevelEngine = Engine<HostRackProxy>;

/// Why an engine cannot be built.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum EngineError {
    /// The rank is not below the plan's worker count.
    #[error("worker {rank} is not in a plan of {workers} workers")]
    NoSuchWorker {
        /// The rank asked for.
        rank: u16,
        /// Workers in the plan.
        workers: u16,
    },
    /// The host exchange's framing is out of range.
    #[error(
        "host copies need an MTU of {min} to {max} bytes and at least one packet per ack, not \
         {mtu} and {ack_every}",
        min = HostFraming::MIN_MTU,
        max = HostFraming::MAX_MTU
    )]
    Framing {
        /// The MTU asked for.
        mtu: u32,
        /// The packets per acknowledgement asked for.
        ack_every: u32,
    },
    /// The features' width differs from the plan's.
    #[error("features have width {got}, the exchange needs {want}")]
    Width {
        /// Width of the features given.
        got: usize,
        /// Width of the plan.
        want: usize,
    },
    /// The features lack a vertex this worker sends.
    #[error("features are missing vertex {0}, which this worker sends")]
    MissingVertex(u32),
    /// Vertices not strictly ascending, or not width × vertices values.
    #[error("feature vertices must be ascending and hold width × vertices values")]
    BadFeatures,
    /// A reduce plan without the sources of its partial sums (a switch's view of it).
    #[error("the reduce plan lists no sources for its partial sums (a switch's view of it)")]
    NoSources,
    /// The engine's send strategy does not run plans of this mode.
    #[error("a {engine} engine cannot run a {mode} plan")]
    WrongMode {
        /// The strategy's name.
        engine: &'static str,
        /// The plan's mode.
        mode: &'static str,
    },
}

/// Timer settings; the defaults suit 100 Gbps links with microseconds of delay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Timers {
    /// A data chunk unacknowledged this long is sent again.
    pub rto: Nanos,
    /// Join and block-done reports repeat at this interval until the go arrives.
    pub control: Nanos,
    /// No contribution for this long: fetch what is missing.
    pub result: Nanos,
}

impl Default for Timers {
    fn default() -> Self {
        Timers {
            rto: 50_000,
            control: 50_000,
            result: 200_000,
        }
    }
}

/// What a worker runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EngineConfig {
    /// The exchange (job, step, layer, direction) this engine runs.
    pub exchange: ExchangeId,
    /// Position of this exchange in the job's sequence (strictly increasing): the switch starts
    /// a new exchange only for a higher number.
    pub seq: u32,
    /// This worker's rank.
    pub rank: u16,
    /// Fixed-point scale every worker agreed on for this exchange.
    pub scale: Scale,
    /// Timer settings.
    pub timers: Timers,
    /// Data chunks a worker keeps unacknowledged at once (in-network modes): bounds the queue
    /// a slow switch builds up. `usize::MAX` leaves sending to the pacer alone.
    pub window: usize,
    /// How the host exchange packs its copies and acknowledges them.
    pub framing: HostFraming,
}

/// The worker's own features: ascending vertex ids and their rows, row-major.
#[derive(Debug, Clone, Copy)]
pub struct LocalFeatures<'a> {
    /// Vertices the worker owns, ascending (global ids).
    pub vertices: &'a [u32],
    /// Feature width: values per vertex.
    pub width: usize,
    /// The features, `width` values per vertex in the order of `vertices`.
    pub values: &'a [f32],
}

/// Per local vertex with remote neighbours, the exact sum of its remote contributions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExchangeOutput {
    /// Vertices that receive, ascending (global ids).
    pub vertices: Vec<u32>,
    /// Lanes per vertex: the feature width.
    pub width: usize,
    /// The sums, row-major: `width` per vertex in the order of `vertices`.
    pub sums: Vec<i64>,
}

impl ExchangeOutput {
    /// All-zero sums for `vertices` at `width`.
    pub fn zeros(vertices: Vec<u32>, width: usize) -> ExchangeOutput {
        let sums = vec![0; vertices.len() * width];
        ExchangeOutput {
            vertices,
            width,
            sums,
        }
    }

    /// Sum of vertex `v`, if it receives anything.
    pub fn row(&self, v: u32) -> Option<&[i64]> {
        let i = self.vertices.binary_search(&v).ok()?;
        Some(&self.sums[i * self.width..(i + 1) * self.width])
    }

    /// The sums as floats under `scale`.
    pub fn decode(&self, scale: &Scale) -> Vec<f32> {
        self.sums.iter().map(|&q| scale.decode(q)).collect()
    }
}

/// Counters of one engine. Payload counts feature bytes only (4 per lane), as the partition
/// crate's traffic model does.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineStats {
    /// Packets sent.
    pub packets_sent: u64,
    /// Bytes sent, headers included.
    pub bytes_sent: u64,
    /// Packets received, dropped ones included.
    pub packets_received: u64,
    /// Bytes received, headers included.
    pub bytes_received: u64,
    /// Feature payload sent the first time (data chunks, or host-exchange copies).
    pub payload_sent: u64,
    /// Feature payload sent again: retransmissions and fetch replies.
    pub payload_resent: u64,
    /// Feature payload received: sums and raw contributions.
    pub payload_received: u64,
    /// Data chunks or copies sent again after a timeout or a detected loss.
    pub retransmits: u64,
    /// Fetch requests sent to the owners of missing contributions.
    pub fetches_sent: u64,
    /// Fetch requests answered with a raw feature.
    pub fetch_replies: u64,
    /// Result packets of the running block received (sums and overflow notices).
    pub results: u64,
    /// Raw feature packets received.
    pub raws: u64,
    /// Wanted contributions taken from the raw-feature cache instead of fetched.
    pub cache_hits: u64,
    /// Destinations (per chunk) completed from raw contributions rather than a switch sum.
    pub host_aggregated: u64,
    /// Overflow notices from the switch (results with the fetch flag).
    pub overflow_notices: u64,
    /// Switch acks of data chunks that carried an ECN mark.
    pub ecn_echoes: u64,
    /// Malformed, stale or unexpected packets dropped, in all and by [`EngineDrop`] (index =
    /// position in [`EngineDrop::ALL`]).
    pub dropped: u64,
    /// Dropped packets per reason (index = position in [`EngineDrop::ALL`]).
    #[serde(default)]
    pub drops: [u64; EngineDrop::COUNT],
    /// Feature values beyond the scale's bound (saturated on encoding).
    pub saturated: u64,
    /// Smoothed round-trip time of data chunks (in-network modes; 0 before the first ack).
    pub srtt_ns: u64,
    /// Acknowledgements of packed host copies this worker sent (one covers several packets).
    #[serde(default)]
    pub acks_sent: u64,
    /// Fetches left unanswered because this worker's queue of replies and requests was full
    /// (the requester asks again).
    #[serde(default)]
    pub fetches_shed: u64,
}

/// Why the engine dropped a packet, counted in [`EngineStats::drops`] as the switch counts
/// its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum EngineDrop {
    /// Not a valid header (too short, bad magic or version, unknown type, reserved flags).
    Malformed,
    /// Another job, exchange or direction, or a go of another exchange sequence.
    OtherExchange,
    /// Ids beyond the plan (vertex, block, worker, layer, chunk).
    OutOfPlan,
    /// For a block that is not the running one (late, or early before the go).
    Stale,
    /// A fetch for a vertex this worker does not hold.
    NotOwned,
    /// A result for a vertex or count this worker does not expect.
    Unexpected,
    /// A packet type, flag or lane count the engine never receives.
    Unsupported,
}

impl EngineDrop {
    /// Number of drop reasons.
    pub const COUNT: usize = 7;
    /// Every drop reason, in index order.
    pub const ALL: [EngineDrop; EngineDrop::COUNT] = [
        EngineDrop::Malformed,
        EngineDrop::OtherExchange,
        EngineDrop::OutOfPlan,
        EngineDrop::Stale,
        EngineDrop::NotOwned,
        EngineDrop::Unexpected,
        EngineDrop::Unsupported,
    ];
}

impl EngineStats {
    /// Packets dropped for `reason`.
    pub fn dropped_for(&self, reason: EngineDrop) -> u64 {
        self.drops[reason as usize]
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Joining,
    Running(u16),
    Finished,
}

/// The worker's encoded rows, for the vertices it sends.
#[derive(Debug)]
pub struct EncodedRows {
    vertices: Vec<u32>,
    width: usize,
    lanes: Vec<i32>,
}

impl EncodedRows {
    /// Lanes `c·32 .. c·32 + lanes` of vertex `v`, if the worker holds it.
    pub fn chunk(&self, v: u32, c: usize, lanes: usize) -> Option<&[i32]> {
        let i = self.vertices.binary_search(&v).ok()?;
        Some(&self.lanes[i * self.width + c * crate::wire::MAX_LANES..][..lanes])
    }
}

/// The lanes of `packet` copied into `lanes` (an aggregator's worth on the stack).
fn copy_lanes<'a>(
    packet: &Packet<&[u8]>,
    lanes: &'a mut [i32; crate::wire::MAX_LANES],
) -> &'a [i32] {
    let mut n = 0;
    for (slot, v) in lanes.iter_mut().zip(packet.payload()) {
        *slot = v;
        n += 1;
    }
    &lanes[..n]
}

/// Raw features received from other workers in this exchange, by (source, chunk): a fetch is
/// answered from here before it goes to the network. One growing arena rather than a buffer
/// per packet.
#[derive(Debug, Default)]
struct RawCache {
    at: HashMap<(u32, u8), (usize, usize)>,
    lanes: Vec<i32>,
}

impl RawCache {
    fn insert(&mut self, key: (u32, u8), values: &[i32]) {
        match self.at.get(&key) {
            Some(&(start, len)) if len == values.len() => {
                self.lanes[start..start + len].copy_from_slice(values)
            }
            _ => {
                self.at.insert(key, (self.lanes.len(), values.len()));
                self.lanes.extend_from_slice(values);
            }
        }
    }

    fn get(&self, key: &(u32, u8)) -> Option<&[i32]> {
        let &(start, len) = self.at.get(key)?;
        Some(&self.lanes[start..start + len])
    }
}

/// The engine, generic over how it sends.
#[derive(Debug)]
pub struct Engine<S: SendStrategy> {
    cfg: EngineConfig,
    plan: Arc<ExchangePlan>,
    rows: EncodedRows,
    phase: Phase,
    control: Outbox,
    control_due: Option<Nanos>,
    /// Fetch requests and fetch replies: paced like data (a fetch round can ask for many
    /// contributions at once) and sent ahead of it.
    recovery: Outbox,
    next_send: Nanos,
    cc: Box<dyn Controller>,
    sender: S,
    receiver: Option<Receiver>,
    cache: RawCache,
    /// Acknowledgements of the packed host copies this worker receives.
    acks: RowAcks,
    /// When each contribution (source, destination, chunk) fetched in this block may be asked
    /// for again, and how often it has been asked for.
    requested: HashMap<(u32, u32, u8), (Nanos, u32)>,
    /// When the earliest of those falls due (see `Engine::refetch_deadline`).
    fetch_due: Option<Nanos>,
    /// Holes in the switch's numbering of the sums and raw copies it sent here: evidence of
    /// loss, which shortens the wait before a fetch round.
    holes: StreamHoles,
    output: ExchangeOutput,
    last_progress: Nanos,
    /// When the running block started here.
    block_started: Nanos,
    /// When the first block started here.
    first_started: Option<Nanos>,
    /// See [`Exchange::set_block_floors`].
    block_floors: Vec<Nanos>,
    now: Nanos,
    stats: EngineStats,
}

impl<S: SendStrategy> Engine<S> {
    /// An engine for worker `cfg.rank`; `now` is when it starts (it joins at once).
    pub fn new(
        cfg: EngineConfig,
        plan: Arc<ExchangePlan>,
        features: LocalFeatures<'_>,
        cc: Box<dyn Controller>,
        now: Nanos,
    ) -> Result<Self, EngineError> {
        if !S::accepts(plan.mode) {
            return Err(EngineError::WrongMode {
                engine: S::NAME,
                mode: plan.mode.name(),
            });
        }
        if plan.mode.pre_aggregated()
            && plan
                .blocks
                .iter()
                .any(|b| !b.partials.known() && !b.table.slots.is_empty())
        {
            return Err(EngineError::NoSources);
        }
        let framing = cfg.framing;
        let framed = (HostFraming::MIN_MTU..=HostFraming::MAX_MTU).contains(&framing.mtu)
            && framing.ack_every >= 1;
        // Only what the switch forwards is packed.
        if !framed && !plan.mode.switch_aggregates() {
            return Err(EngineError::Framing {
                mtu: framing.mtu,
                ack_every: framing.ack_every,
            });
        }
        if cfg.rank >= plan.workers {
            return Err(EngineError::NoSuchWorker {
                rank: cfg.rank,
                workers: plan.workers,
            });
        }
        if features.width != plan.width {
            return Err(EngineError::Width {
                got: features.width,
                want: plan.width,
            });
        }
        if features.values.len() != features.vertices.len() * features.width
            || features.vertices.windows(2).any(|w| w[0] >= w[1])
        {
            return Err(EngineError::BadFeatures);
        }
        // The graph is symmetric: the vertices that receive are exactly those that send. A
        // reduce plan names its senders too; they are taken in, whatever the graph.
        let receivers = plan.receivers(cfg.rank);
        let mut vertices = receivers.clone();
        if plan.mode.pre_aggregated() {
            let own = |u: &&u32| plan.owner[**u as usize] == cfg.rank;
            for b in &plan.blocks {
                for (p, &w) in b.table.slots.iter().enumerate() {
                    if w == u32::from(cfg.rank) {
                        // A proxy's pair (host two-level) holds its rack's other sources too.
                        vertices.extend(b.partials.of(p).iter().filter(own));
                    } else if plan.mode == Mode::HostTwoLevel {
                        // Its share of its rack's proxy's pair.
                        vertices.extend(b.partials.of(p).iter().filter(own));
                    }
                }
                vertices.extend(b.multicast.vertices.iter().filter(own));
            }
            vertices.sort_unstable();
            vertices.dedup();
        }
        let width = plan.width;
        let mut lanes = vec![0i32; vertices.len() * width];
        let mut saturated = 0;
        for (i, &v) in vertices.iter().enumerate() {
            let j = features
                .vertices
                .binary_search(&v)
                .map_err(|_| EngineError::MissingVertex(v))?;
            saturated += cfg.scale.encode_row(
                &features.values[j * width..(j + 1) * width],
                &mut lanes[i * width..(i + 1) * width],
            ) as u64;
        }
        let output = ExchangeOutput::zeros(receivers, width);
        let mut engine = Engine {
            sender: S::new(&plan, cfg.rank, cfg.window, cfg.framing),
            rows: EncodedRows {
                vertices,
                width,
                lanes,
            },
            phase: Phase::Joining,
            control: Outbox::default(),
            control_due: None,
            recovery: Outbox::default(),
            next_send: now,
            cc,
            receiver: None,
            cache: RawCache::default(),
            acks: RowAcks::new(plan.workers),
            requested: HashMap::new(),
            holes: StreamHoles::default(),
            fetch_due: None,
            output,
            last_progress: now,
            block_started: now,
            first_started: None,
            block_floors: Vec::new(),
            now,
            stats: EngineStats {
                saturated,
                ..EngineStats::default()
            },
            cfg,
            plan,
        };
        engine.sync_window();
        engine.send_join();
        Ok(engine)
    }

    fn header(&self, t: PacketType) -> Repr {
        let mut r = self.cfg.exchange.header(t);
        r.worker = self.cfg.rank;
        r
    }

    fn send_join(&mut self) {
        let mut r = self.header(PacketType::Join);
        r.sequence = self.cfg.seq;
        self.control.push_repr(Address::Switch, &r, &[]);
        self.control_due = Some(self.now + self.cfg.timers.control);
    }

    fn send_done(&mut self, block: u16) {
        let mut r = self.header(PacketType::BlockDone);
        r.block = block;
        r.sequence = self.cfg.seq;
        self.control.push_repr(Address::Switch, &r, &[]);
        self.control_due = Some(self.now + self.cfg.timers.control);
    }

    /// Move to block `b` (or finish when `b` is past the last block).
    fn start_block(&mut self, b: u16) {
        self.control_due = None;
        if usize::from(b) >= self.plan.blocks.len() {
            self.phase = Phase::Finished;
            self.receiver = None;
            self.sender.finish();
            return;
        }
        self.phase = Phase::Running(b);
        self.acks.forget_held();
        self.last_progress = self.now;
        self.block_started = self.now;
        self.first_started.get_or_insert(self.now);
        self.requested.clear();
        self.fetch_due = None;
        self.sender.start_block(&self.plan, self.cfg.rank, b);
        let receiver = Receiver::new(&self.plan, self.cfg.rank, b, &self.output);
        self.receiver = Some(receiver);
        self.check_block_done();
    }

    /// A packet of block `b` (a go, or any packet of that block) arrived.
    fn observe_block(&mut self, b: u16) {
        let ready = match self.phase {
            Phase::Joining => b == 0,
            Phase::Running(cur) => {
                b == cur + 1 && self.receiver.as_ref().is_some_and(|r| r.is_complete())
            }
            Phase::Finished => false,
        };
        if ready {
            self.start_block(b);
        }
    }

    fn check_block_done(&mut self) {
        if let (Phase::Running(b), Some(r)) = (self.phase, &self.receiver) {
            if r.is_complete() && self.control_due.is_none() {
                // Acks held back go now, ahead of the report: once every worker's report is
                // in the switch moves on, and an ack after that would be dropped as stale
                // (its sender stops resending at the go anyway).
                self.flush_acks();
                self.send_done(b);
            }
        }
    }

    fn current_block(&self) -> Option<u16> {
        match self.phase {
            Phase::Running(b) => Some(b),
            _ => None,
        }
    }

    fn on_packet(&mut self, bytes: &[u8]) -> Result<(), EngineDrop> {
        use EngineDrop::*;
        let packet = Packet::new_checked(bytes).map_err(|_| Malformed)?;
        let repr = Repr::parse(&packet).map_err(|_| Malformed)?;
        // Numbered by the switch as it left, whichever exchange it belongs to.
        if repr.packet_type.is_stamped() {
            self.holes.saw(repr.sequence);
        }
        if !self.cfg.exchange.matches(&repr) {
            return Err(OtherExchange);
        }
        let limits = crate::wire::PlanLimits {
            vertices: self.plan.owner.len() as u32,
            blocks: self.plan.blocks.len() as u32 + 1,
            workers: u32::from(self.plan.workers),
            layers: u32::from(repr.layer) + 1,
            chunks: self.plan.chunks() as u32,
        };
        repr.check_plan(&limits).map_err(|_| OutOfPlan)?;
        let c = usize::from(repr.chunk);
        let lanes_ok = usize::from(repr.lanes) == self.plan.chunk_lanes(c);
        match repr.packet_type {
            PacketType::BlockGo => {
                if repr.sequence != self.cfg.seq {
                    return Err(OtherExchange);
                }
                self.observe_block(repr.block);
            }
            PacketType::Data if repr.flags.ack => {
                if self.current_block() != Some(repr.block) {
                    return Err(Stale);
                }
                let bytes = 4 * self.plan.chunk_lanes(c);
                if repr.flags.ecn {
                    self.stats.ecn_echoes += 1;
                }
                if self.sender.on_ack(self.now, repr.sequence, repr.src) {
                    self.cc.on_ack(self.now, bytes, repr.flags.ecn);
                    self.sync_window();
                    self.stats.srtt_ns = self.sender.srtt().unwrap_or(0);
                }
            }
            PacketType::Fetch => {
                // A receiver missed this contribution. Not a congestion signal for this
                // sender: what was lost is as likely the switch's sum on the receiver's link as
                // this worker's packet, and this worker's own losses show in its own acks (a
                // cut per fetch shrank every owner's window to one packet at 5% loss).
                // Features do not depend on the block: answer whatever the phase.
                if self.recovery.len() >= self.reply_queue_limit() {
                    // Behind on replies already: the requester asks again later (waiting longer
                    // once it has asked twice), and no flood of requests grows this queue.
                    self.stats.fetches_shed += 1;
                    return Ok(());
                }
                let mut h = self.header(PacketType::Raw);
                h.flags.resend = true;
                h.block = repr.block;
                let (plan, rows) = (&self.plan, &self.rows);
                self.recovery
                    .try_push_with(Address::Switch, |buf| {
                        let (len, _) = send::feature_packet(
                            &h,
                            PacketType::Raw,
                            plan,
                            rows,
                            repr.src,
                            repr.dst,
                            c,
                            repr.sequence,
                            buf,
                        )?;
                        Some(len)
                    })
                    .ok_or(NotOwned)?;
                self.stats.fetch_replies += 1;
            }
            PacketType::Result if lanes_ok || repr.flags.fetch => {
                self.observe_block(repr.block);
                if self.current_block() != Some(repr.block) {
                    return Err(Stale);
                }
                self.stats.results += 1;
                self.stats.payload_received += 4 * u64::from(repr.lanes);
                let receiver = self.receiver.as_mut().ok_or(Stale)?;
                if repr.flags.fetch {
                    self.stats.overflow_notices += 1;
                    let wants = receiver.overflowed(repr.dst, c).ok_or(Unexpected)?;
                    self.fetch(wants, usize::MAX, Ask::Any);
                } else {
                    let mut lanes = [0i32; crate::wire::MAX_LANES];
                    let values = copy_lanes(&packet, &mut lanes);
                    receiver
                        .on_result(
                            repr.dst,
                            c,
                            repr.count,
                            values,
                            &mut self.output,
                            &mut self.stats,
                        )
                        .ok_or(Unexpected)?;
                    self.last_progress = self.now;
                }
            }
            PacketType::Rows if repr.flags.ack => {
                // A receiver's acknowledgement of our packed copies, in ranges.
                if self.current_block() != Some(repr.block) {
                    return Err(Stale);
                }
                let ranges = AckRanges::new_checked(&bytes[HEADER_LEN..], repr.count)
                    .map_err(|_| Malformed)?;
                if repr.flags.ecn {
                    self.stats.ecn_echoes += 1;
                }
                let (acked, lost) = self.sender.on_ack_ranges(self.now, repr.worker, ranges);
                if acked > 0 {
                    self.cc.on_ack(self.now, acked as usize, repr.flags.ecn);
                    self.stats.srtt_ns = self.sender.srtt().unwrap_or(0);
                }
                if lost {
                    self.cc.on_timeout(self.now);
                }
                self.sync_window();
            }
            PacketType::Rows if !self.plan.mode.switch_aggregates() && repr.lanes == 0 => {
                self.on_rows(&repr, &bytes[HEADER_LEN..])?;
            }
            PacketType::Raw if lanes_ok => {
                self.stats.raws += 1;
                self.stats.payload_received += 4 * u64::from(repr.lanes);
                let mut lanes = [0i32; crate::wire::MAX_LANES];
                let values = copy_lanes(&packet, &mut lanes);
                self.observe_block(repr.block);
                let for_block = self.current_block() == Some(repr.block);
                if for_block {
                    let receiver = self.receiver.as_mut().ok_or(Stale)?;
                    let raw = Raw {
                        u: repr.src,
                        v: repr.dst,
                        c,
                        values,
                        overflow: !repr.flags.resend,
                    };
                    let progressed = receiver.on_raw(raw, &mut self.output, &mut self.stats);
                    if progressed {
                        self.last_progress = self.now;
                    }
                }
                // A partial sum forwarded by the switch serves one destination only: only
                // plain features are kept.
                if !self.plan.mode.pre_aggregated() || repr.flags.resend {
                    self.cache.insert((repr.src, repr.chunk), values);
                }
            }
            _ => return Err(Unsupported),
        }
        self.check_block_done();
        Ok(())
    }

    /// A packet of packed host copies from worker `repr.worker`, its records in `payload`:
    /// checked whole, acknowledged (now or soon), then each record taken as a raw copy.
    fn on_rows(&mut self, repr: &Repr, payload: &[u8]) -> Result<(), EngineDrop> {
        use EngineDrop::*;
        let records = Records::new_checked(payload, repr.count).map_err(|_| Malformed)?;
        let (plan, sender, me) = (&self.plan, repr.worker, self.cfg.rank);
        // A copy names a vertex of its sender; a partial sum names a destination of ours, and
        // comes without lanes when it did not fit them. In the host hybrid a packet may carry
        // either: which one, the record's vertex says.
        let partial = |r: &crate::wire::Record| send::is_partial(plan, sender, r.src);
        // In the host two-level exchange a partial naming another worker's destination is a
        // share for this worker to add up as its rack's proxy.
        let queue = self.sender.queue();
        let share = |r: &crate::wire::Record| {
            plan.mode == Mode::HostTwoLevel && plan.owner.get(r.src as usize) != Some(&me)
        };
        let fits = |r: &crate::wire::Record| {
            let c = usize::from(r.chunk);
            if share(r) {
                let lanes = r.lane_count() == plan.chunk_lanes(c) || r.lane_count() == 0;
                return c < plan.chunks() && lanes && queue.expects_share(r.src, sender);
            }
            let (lanes, named_by) = if partial(r) {
                (
                    r.lane_count() == plan.chunk_lanes(c) || r.lane_count() == 0,
                    me,
                )
            } else {
                (r.lane_count() == plan.chunk_lanes(c), sender)
            };
            c < plan.chunks() && lanes && plan.owner.get(r.src as usize) == Some(&named_by)
        };
        if repr.count == 0 || !records.clone().all(|r| fits(&r)) {
            return Err(Unexpected);
        }
        self.observe_block(repr.block);
        if self.current_block() != Some(repr.block) {
            return Err(Stale);
        }
        let ack = self.acks.on_packet(
            self.now,
            sender,
            repr.block,
            repr.sequence,
            (repr.src, repr.dst),
            (repr.flags.ecn, repr.flags.resend),
            self.cfg.framing.ack_every,
            self.ack_delay(),
        );
        if ack == AckNow::Yes {
            self.send_ack(sender);
        }
        let hybrid = self.plan.mode == Mode::HostHybrid;
        let receiver = self.receiver.as_mut().ok_or(Stale)?;
        let mut lanes = [0i32; crate::wire::MAX_LANES];
        let mut overflowed = Vec::new();
        for r in records {
            self.stats.raws += 1;
            self.stats.payload_received += 4 * r.lane_count() as u64;
            let values = r.lanes_into(&mut lanes);
            let c = usize::from(r.chunk);
            if self.plan.mode == Mode::HostTwoLevel && self.plan.owner[r.src as usize] != me {
                let new = self.sender.queue_mut().on_share(r.src, sender, c, values);
                if new.ok_or(Unexpected)? {
                    self.last_progress = self.now;
                }
                continue;
            }
            if send::is_partial(&self.plan, sender, r.src) {
                if values.is_empty() {
                    // Its sender's partial overflowed: the destination's plain features.
                    self.stats.overflow_notices += 1;
                    overflowed.extend(receiver.overflowed(r.src, c).ok_or(Unexpected)?);
                } else if receiver.on_partial(
                    r.src,
                    sender,
                    c,
                    values,
                    &mut self.output,
                    &mut self.stats,
                ) {
                    self.last_progress = self.now;
                }
                continue;
            }
            let progressed = if hybrid {
                receiver.on_copy(r.src, c, values, &mut self.output, &mut self.stats)
            } else {
                let raw = Raw {
                    u: r.src,
                    v: repr.dst,
                    c,
                    values,
                    overflow: false,
                };
                receiver.on_raw(raw, &mut self.output, &mut self.stats)
            };
            if progressed {
                self.last_progress = self.now;
            }
            self.cache.insert((r.src, r.chunk), values);
        }
        if !overflowed.is_empty() {
            self.fetch(overflowed, usize::MAX, Ask::Any);
        }
        Ok(())
    }

    /// Acknowledge every range held of `worker`'s packed copies, from the vertex of ours they
    /// were addressed to back to a vertex of the sender, echoing any congestion mark (as TCP's
    /// ECE does).
    fn send_ack(&mut self, worker: u16) {
        let mut h = self.header(PacketType::Rows);
        let ack = self.acks.take(worker);
        h.flags.ack = true;
        h.flags.ecn = ack.ecn;
        h.block = ack.block;
        h.src = ack.our_vertex;
        h.dst = ack.sender_vertex;
        h.count = ack.ranges.len() as u16;
        h.sequence = ack.ranges.last().map_or(0, |r| r.1);
        let ranges = ack.ranges;
        self.stats.acks_sent += 1;
        self.control.push_with(Address::Switch, |buf| {
            let len = h.emit_with_lanes(&[], buf);
            len + emit_ack_ranges(ranges, &mut buf[len..])
        });
    }

    /// Send the held-back acks due at `now`.
    fn send_due_acks(&mut self, now: Nanos) {
        // Sending an ack clears its deadline, so this ends.
        loop {
            let Some(worker) = self.acks.due(now).next() else {
                break;
            };
            self.send_ack(worker);
        }
    }

    /// Send every held-back ack now.
    fn flush_acks(&mut self) {
        self.send_due_acks(Nanos::MAX);
    }

    /// How long a receiver holds an ack back waiting for more packets: a quarter of the
    /// retransmission floor, so that a held ack never sets off a retransmission, and at most
    /// 250 µs (a few round trips of a loopback or a data-centre path), so that a sender whose
    /// window holds fewer than `ack_every` packets for this worker does not wait long.
    fn ack_delay(&self) -> Nanos {
        (self.cfg.timers.rto / 4).min(250_000)
    }

    /// Fetch the contributions listed (source, destination, chunk): from the cache when they
    /// are there, else from their owners — among the first `budget` of them not in the cache,
    /// those not asked for recently (with [`Ask::Again`], only those asked for before).
    fn fetch(&mut self, wants: Vec<(u32, u32, u8)>, mut budget: usize, ask: Ask) {
        let Some(b) = self.current_block() else {
            return;
        };
        // In the host exchange one raw copy serves every local neighbour: ask once.
        let mut asked = std::collections::HashSet::new();
        // A fetch is answered by its owner at once, over two round trips: one still unanswered
        // after twice a loss's patience was lost, whatever the switch's sums are doing.
        let retry = 2 * self.loss_patience();
        // The next time an unanswered fetch falls due (see `refetch_deadline`).
        let mut next_due: Option<Nanos> = None;
        for (u, v, c) in wants {
            if self.plan.mode == Mode::Host && !asked.insert((u, c)) {
                continue;
            }
            if let Some(values) = self.cache.get(&(u, c)) {
                self.stats.cache_hits += 1;
                if let Some(r) = self.receiver.as_mut() {
                    let raw = Raw {
                        u,
                        v,
                        c: usize::from(c),
                        values,
                        overflow: false,
                    };
                    r.on_raw(raw, &mut self.output, &mut self.stats);
                }
                continue;
            }
            // Ask again only when an earlier request had time to be answered: repeating
            // requests whose replies are merely queued would feed a storm.
            let key = if self.plan.mode == Mode::Host {
                (u, u32::MAX, c)
            } else {
                (u, v, c)
            };
            // What is not in the cache spends the round's budget, asked again or not: a round
            // looks at no more than its share of the network's backlog.
            let asked_before = self.requested.get(&key).copied();
            if ask == Ask::Again && asked_before.is_none() {
                continue;
            }
            if budget == 0 {
                // Cut short: what is left is asked for once this round's requests had time.
                next_due = [next_due, Some(self.now + retry)]
                    .into_iter()
                    .flatten()
                    .min();
                continue;
            }
            budget -= 1;
            let due = match asked_before {
                // Asked for, and the reply may still come.
                Some((t, _)) if self.now < t => t,
                _ => {
                    // After two requests went unanswered, each further one doubles the wait
                    // for the next (up to 64 times): when the reply is merely queued at a busy
                    // owner, asking again at the same pace would only lengthen that queue. Not
                    // from the first: at 5% loss a reply lost once or twice is common, and
                    // doubling then cost SwitchGNN a third of its time on Cora.
                    let times = asked_before.map_or(0, |(_, n)| n + 1);
                    let doublings = times.saturating_sub(2).min(6);
                    let t = self.now + retry.saturating_mul(1 << doublings);
                    self.requested.insert(key, (t, times));
                    self.send_fetch(b, u, v, c);
                    t
                }
            };
            next_due = [next_due, Some(due)].into_iter().flatten().min();
        }
        // (A round cleared the deadline first; an overflow's fetch adds to it.)
        self.fetch_due = [self.fetch_due, next_due].into_iter().flatten().min();
    }

    /// Ask `u`'s owner, through the switch, for `u`'s chunk `c` (for destination `v`).
    fn send_fetch(&mut self, block: u16, u: u32, v: u32, c: u8) {
        let mut r = self.header(PacketType::Fetch);
        r.flags.fetch = true;
        r.src = u;
        r.dst = v;
        r.block = block;
        r.chunk = c;
        self.recovery.push_repr(Address::Switch, &r, &[]);
        self.stats.fetches_sent += 1;
    }

    fn pace(&mut self, len: usize) {
        self.cc.on_sent(self.now);
        let rate = self.cc.rate();
        let gap = if rate.is_finite() && rate > 0.0 {
            (len as f64 / rate * 1e9) as Nanos
        } else {
            0
        };
        self.next_send = self.next_send.max(self.now) + gap;
    }

    /// Let the congestion controller's window bound what the sender has outstanding.
    fn sync_window(&mut self) {
        let w = self.cc.window();
        if w != usize::MAX {
            self.sender.set_congestion_window(w);
        }
    }

    fn count_sent(&mut self, len: usize) {
        self.stats.packets_sent += 1;
        self.stats.bytes_sent += len as u64;
    }

    /// How long to wait for results before fetching: the result timeout, and never shorter
    /// than a few measured round trips (on a slow path, late results must not set off fetch
    /// rounds) — unless the switch acknowledges what is sent and the round trip is no longer
    /// than the block's floor: the switch's acks leave after the packet's passes, so such a
    /// round trip may be all the chip's own queue, which the floor has waited out already. A
    /// longer one holds the network's queues too, and counts. (Host-exchange copies are
    /// acknowledged by their receivers: that round trip is the network's.)
    ///
    /// Holes in the switch's numbering of what it sent here that account for every sum still
    /// missing are evidence of loss rather than slowness: then a loss's patience is enough
    /// (`losses_explain_the_rest`, `loss_patience`).
    fn patience(&self) -> Nanos {
        if self.losses_explain_the_rest() {
            return self.loss_patience();
        }
        let result = self.cfg.timers.result;
        let srtt = self.sender.srtt().unwrap_or(0);
        if self.plan.mode.switch_aggregates() && srtt <= self.block_floor() {
            return result;
        }
        result.max(4 * srtt)
    }

    /// Whether the holes in the switch's numbers could account for every sum still missing:
    /// then what is missing was lost, not late, and a loss's patience is enough. While more
    /// sums are missing than packets were lost, the rest are on their way (other workers
    /// still sending, a slow chip): a round then would fetch sums that are merely late — and a
    /// fetched copy releases the aggregator, so each such fetch turns one destination over to
    /// its host. So a round on holes touches at most as many destinations as were lost.
    fn losses_explain_the_rest(&self) -> bool {
        let left = self.receiver.as_ref().map_or(0, Receiver::left);
        left > 0 && left <= self.holes.count()
    }

    /// How long to wait for what a loss has held up: four round trips, at least an eighth
    /// of the retransmission floor (so that a process that waits a moment for a core sets off
    /// nothing; the loss probes keep the same floor), at most the result timeout.
    fn loss_patience(&self) -> Nanos {
        let t = self.cfg.timers;
        let srtt = self.sender.srtt().unwrap_or(0);
        (4 * srtt).max(t.rto / 8).min(t.result)
    }

    /// The running block's floor (0 when none is known).
    fn block_floor(&self) -> Nanos {
        self.current_block()
            .and_then(|b| self.block_floors.get(usize::from(b)))
            .copied()
            .unwrap_or(0)
    }

    fn progress_deadline(&self) -> Option<Nanos> {
        match (self.phase, &self.receiver) {
            (Phase::Running(_), Some(r)) if !r.is_complete() => {
                let floor = self.block_started.saturating_add(self.block_floor());
                Some((self.last_progress + self.patience()).max(floor))
            }
            _ => None,
        }
    }

    /// When the fetches still unanswered are due again: a fetch is answered at once by its
    /// owner, so one unanswered for twice a loss's patience was lost.
    fn refetch_deadline(&self) -> Option<Nanos> {
        match (self.phase, &self.receiver) {
            (Phase::Running(_), Some(r)) if !r.is_complete() => self.fetch_due,
            _ => None,
        }
    }

    /// The most replies and requests this worker queues: a window's worth from each worker
    /// (what every peer may have asked for in one round).
    fn reply_queue_limit(&self) -> usize {
        self.cfg
            .window
            .saturating_mul(usize::from(self.plan.workers).max(1))
    }

    fn has_paced_work(&self) -> bool {
        !self.recovery.is_empty() || self.sender.has_work()
    }
}

impl<S: SendStrategy> Node for Engine<S> {
    fn handle_packet(&mut self, now: Nanos, _from: Address, bytes: &[u8]) {
        self.now = self.now.max(now);
        self.stats.packets_received += 1;
        self.stats.bytes_received += bytes.len() as u64;
        if let Err(reason) = self.on_packet(bytes) {
            self.stats.dropped += 1;
            self.stats.drops[reason as usize] += 1;
        }
    }

    fn handle_timeout(&mut self, now: Nanos) {
        self.now = self.now.max(now);
        if self.control_due.is_some_and(|t| t <= now) {
            match self.phase {
                Phase::Joining => self.send_join(),
                Phase::Running(b) => self.send_done(b),
                Phase::Finished => self.control_due = None,
            }
        }
        let quiet = self.progress_deadline().is_some_and(|t| t <= now);
        let again = self.refetch_deadline().is_some_and(|t| t <= now);
        if quiet || again {
            // At most one window of fetches is out at once (those unanswered count, and so do
            // requests and replies still queued here): a stalled block must not turn into a
            // storm of requests and replies at a switch that is merely slow, nor a worker that
            // sends slower than rounds come pile up copies of the same requests (what is left
            // is asked for in a later round). Not the congestion window: that measures this
            // worker's sending, and the replies come the other way (with it, at 5% loss a
            // round asked for one contribution). What the cache holds costs nothing and is
            // taken at once.
            let budget = self.cfg.window.saturating_sub(self.recovery.len());
            let wants = self
                .receiver
                .as_ref()
                .map(|r| r.missing(self.cfg.window.saturating_mul(4)))
                .unwrap_or_default();
            self.fetch_due = None;
            if quiet {
                self.last_progress = now;
            }
            let ask = if quiet { Ask::Any } else { Ask::Again };
            self.fetch(wants, budget, ask);
            self.check_block_done();
        }
        if self.sender.on_timeout(now, self.cfg.timers.rto) {
            self.cc.on_timeout(now);
            self.sync_window();
        }
        self.send_due_acks(now);
    }

    fn poll_transmit(&mut self, now: Nanos, buf: &mut [u8]) -> Option<Transmit> {
        self.now = self.now.max(now);
        if let Some(t) = self.control.pop_into(buf) {
            self.count_sent(t.len);
            return Some(t);
        }
        if now < self.next_send {
            return None;
        }
        let t = if let Some(t) = self.recovery.pop_into(buf) {
            self.stats.payload_resent += (t.len - crate::wire::HEADER_LEN) as u64;
            t
        } else {
            let header = self.header(PacketType::Data);
            let len =
                self.sender
                    .next(now, &self.plan, &header, &self.rows, &mut self.stats, buf)?;
            // While this worker still sends, the others probably do too: waiting for results
            // only starts once its own rows are out.
            self.last_progress = now;
            Transmit {
                to: Address::Switch,
                len,
            }
        };
        self.pace(t.len);
        self.count_sent(t.len);
        Some(t)
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        let paced = self.has_paced_work().then_some(self.next_send);
        [
            self.control_due,
            self.progress_deadline(),
            self.refetch_deadline(),
            self.sender.deadline(self.cfg.timers.rto),
            self.acks.deadline(),
            paced,
        ]
        .into_iter()
        .flatten()
        .min()
    }
}

impl<S: SendStrategy> Operation for Engine<S> {
    fn is_finished(&self) -> bool {
        self.phase == Phase::Finished
    }

    fn progress(&self) -> String {
        match self.current_block() {
            Some(b) => format!("block {b}"),
            None if self.is_finished() => "finished".into(),
            None => "none (joining)".into(),
        }
    }
}

impl<S: SendStrategy> Exchange for Engine<S> {
    fn output(&self) -> &ExchangeOutput {
        &self.output
    }

    fn stats(&self) -> &EngineStats {
        &self.stats
    }

    fn running_block(&self) -> Option<u16> {
        self.current_block()
    }

    fn set_block_floors(&mut self, floors: Vec<Nanos>) {
        self.block_floors = floors;
    }

    fn started_at(&self) -> Option<Nanos> {
        self.first_started
    }
}

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
//!   again when its reply is overdue (by the fetches' measured round trip: a fetch is answered
//!   at once; the replies carry the resend flag, which releases the switch's aggregator); a
//!   switch that reports an overflow triggers the same fetch at once. The switch numbers the
//!   sums and raw copies it sends each worker (`switch/stamp.rs`): holes in those numbers as
//!   many as the sums still missing are evidence that those were lost, and then a round trip
//!   of quiet is enough before the round (`holes.rs`). The worker asks the switch where that
//!   numbering stands ([`PacketType::Stamps`]) when it joins and when a quiet spell is not
//!   explained by holes: the reply shows the holes at the tail of the stream;
//! - **barrier**: report the block done, and start the next block on the switch's go (or on
//!   any packet of the next block, which proves the go was sent).
//!
//! The output is, for every local vertex with remote neighbours, the exact integer sum of its
//! remote contributions (`i64` lanes), and its decoded floats.

mod acks;
mod cache;
mod config;
mod holes;
mod incoming;
mod output;
mod receive;
mod recovery;
mod relay;
mod reliable;
mod rows;
mod send;
mod stats;
mod timing;

use std::collections::HashMap;
use std::sync::Arc;

use crate::cc::Controller;
use crate::framing::HostFraming;
use crate::node::{Address, HostNode, Nanos, Node, Operation, Outbox, Transmit};
use crate::plan::{ExchangePlan, Mode};
use crate::wire::{PacketType, Repr};

use cache::RawCache;
pub use config::{EngineConfig, EngineError, LocalFeatures, Timers};
use holes::StreamHoles;
pub use output::{EncodedRows, ExchangeOutput};
use receive::Receiver;
use recovery::{Ask, Asked};
pub use reliable::{Reliable, RttEstimator};
use rows::RowAcks;
pub use send::{
    BalancedHostExchange, HostExchange, HostMixed, HostPreAggregated, HostRackProxy, InNetwork,
    PreAggregated, SendQueue, SendStrategy,
};
pub use stats::{EngineDrop, EngineStats};

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Joining,
    Running(u16),
    Finished,
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
    /// How often the pending join or block-done report has been sent (its repeats back off).
    control_sent: u32,
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
    requested: HashMap<(u32, u32, u8), Asked>,
    /// The round trip of a fetch and its reply (first requests only, Karn's rule): when an
    /// unanswered fetch is asked again.
    fetch_rtt: RttEstimator,
    /// When the earliest of those falls due (see `Engine::refetch_deadline`).
    fetch_due: Option<Nanos>,
    /// Holes in the switch's numbering of the sums and raw copies it sent here: evidence of
    /// loss, which shortens the wait before a fetch round.
    holes: StreamHoles,
    /// Questions to the switch about its numbering since `last_progress` was
    /// `stamps_progress` (they back off while nothing arrives).
    stamps_asked: u32,
    stamps_progress: Nanos,
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
            rows: if S::KIND == PacketType::Rows {
                EncodedRows::new(&vertices, width, lanes).with_zero_chunks()
            } else {
                EncodedRows::new(&vertices, width, lanes)
            },
            phase: Phase::Joining,
            control: Outbox::default(),
            control_due: None,
            control_sent: 0,
            recovery: Outbox::default(),
            next_send: now,
            cc,
            receiver: None,
            cache: RawCache::default(),
            acks: RowAcks::new(plan.workers),
            requested: HashMap::new(),
            fetch_rtt: RttEstimator::default(),
            holes: StreamHoles::default(),
            stamps_asked: 0,
            stamps_progress: now,
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
        self.control_due = Some(self.now + self.next_control_interval());
        // Where this exchange's numbered packets start: without it the loss of the first
        // of them shows no hole.
        if self.plan.mode.switch_aggregates() && !self.holes.started() {
            self.ask_stamps();
        }
    }

    /// Ask the switch where its numbering of what it sends this worker stands.
    fn ask_stamps(&mut self) {
        let mut r = self.header(PacketType::Stamps);
        r.block = self.current_block().unwrap_or(0);
        self.control.push_repr(Address::Switch, &r, &[]);
        self.stats.stamp_queries += 1;
    }

    fn send_done(&mut self, block: u16) {
        let mut r = self.header(PacketType::BlockDone);
        r.block = block;
        r.sequence = self.cfg.seq;
        self.control.push_repr(Address::Switch, &r, &[]);
        self.control_due = Some(self.now + self.next_control_interval());
    }

    /// Move to block `b` (or finish when `b` is past the last block).
    fn start_block(&mut self, b: u16) {
        self.control_due = None;
        self.control_sent = 0;
        if usize::from(b) >= self.plan.blocks.len() {
            self.phase = Phase::Finished;
            self.receiver = None;
            self.sender.finish();
            return;
        }
        tracing::debug!(
            rank = self.cfg.rank,
            now = self.now,
            block = b,
            "block starts"
        );
        self.phase = Phase::Running(b);
        self.acks.forget_held();
        self.last_progress = self.now;
        self.block_started = self.now;
        self.first_started.get_or_insert(self.now);
        self.requested.clear();
        self.fetch_due = None;
        self.sender
            .start_block(&self.plan, self.cfg.rank, b, &self.rows);
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
                tracing::debug!(
                    rank = self.cfg.rank,
                    now = self.now,
                    block = b,
                    "block complete"
                );
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
            tracing::debug!(rank = self.cfg.rank, now, phase = ?self.phase, "control report repeated");
            match self.phase {
                Phase::Joining => self.send_join(),
                Phase::Running(b) => self.send_done(b),
                Phase::Finished => self.control_due = None,
            }
        }
        if self.stamps_deadline().is_some_and(|t| t <= now) {
            if self.stamps_progress != self.last_progress {
                self.stamps_progress = self.last_progress;
                self.stamps_asked = 0;
            }
            self.stamps_asked += 1;
            tracing::debug!(
                rank = self.cfg.rank,
                now,
                asked = self.stamps_asked,
                "numbering asked"
            );
            self.ask_stamps();
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
            tracing::debug!(
                rank = self.cfg.rank,
                now,
                quiet,
                left = self.receiver.as_ref().map_or(0, Receiver::left),
                holes = self.holes.count(),
                wants = wants.len(),
                budget,
                "fetch round"
            );
            self.fetch(wants, budget, ask);
            self.check_block_done();
        }
        if self.sender.on_timeout(now, self.cfg.timers.rto) {
            tracing::debug!(rank = self.cfg.rank, now, "retransmission timeout");
            self.stats.timer_losses += 1;
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
        if now.saturating_add(self.pacing_slack()) < self.next_send {
            return None;
        }
        let t = if let Some(t) = self.recovery.pop_into(buf) {
            self.stats.payload_resent += (t.len - crate::wire::HEADER_LEN) as u64;
            self.fetch_left(&buf[..t.len]);
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
        let paced = self.has_paced_work().then(|| self.pacing_deadline());
        [
            self.control_due,
            self.progress_deadline(),
            self.stamps_deadline(),
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

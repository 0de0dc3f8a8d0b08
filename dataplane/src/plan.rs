//! What one exchange (one layer, one direction) needs at run time: the block tables in the
//! order they run, each block's send order, and which worker owns each vertex.
//!
//! Three modes share this shape so that every engine and the switch read the same structure:
//! - [`Mode::Blocks`]: SwitchGNN — the plan's blocks, one after another, aggregators assigned
//!   by the control plane (slot `s`, chunk `c` → aggregator `s·C + c`);
//! - [`Mode::Strawman`]: one block holding every cross edge, aggregators allocated on first
//!   arrival from a bounded pool, overflow forwarded raw to the destination's host;
//! - [`Mode::Host`]: the host exchange (BNS-GCN with p = 1) over a plain switch; the single
//!   table tells each worker which remote workers need which of its vertices;
//! - [`Mode::HostReduce`]: the same partial sums sent host to host, packed to the MTU as the
//!   host exchange's copies are, through a switch that only forwards them (DistGNN's partial
//!   aggregation): the best a cluster without in-network aggregation can do on upload-bound
//!   workers; its blocks have [`Mode::Reduce`]'s shape;
//! - [`Mode::HostHybrid`]: the host hybrid — per ordered worker pair (sender, owner), the
//!   host exchange's raw copies or host-only partial sums, whichever is fewer rows, packed to
//!   the MTU host to host through a switch that only forwards them. Its blocks have a hybrid
//!   [`Mode::Reduce`] block's shape: [`Partials`] for the partial-sum pairs, and a
//!   [`Multicast`] sender for every vertex sent raw, whose rows say which of the receiver's
//!   destinations it is added into (the receiver adds it there itself);
//! - [`Mode::HostTwoLevel`]: the host-only answer to two-level aggregation on a leaf-spine
//!   fabric (hierarchical all-reduce's shape) — host-only partial sums as
//!   [`Mode::HostReduce`]'s, but for a destination in another rack the workers of a rack that
//!   feed it send their partials to one of them, the rack's proxy for that destination, which
//!   adds them to its own and sends the rack's one partial across the spine to the owner. Its
//!   blocks have [`Mode::Reduce`]'s shape; a pair's worker is the proxy, and its sources are
//!   every vertex of the rack that neighbours the destination (owned by several workers);
//! - [`Mode::Reduce`]: the pre-aggregated exchange — each worker sums, per remote destination,
//!   its own vertices' contributions and sends that partial sum once; the switch adds each
//!   partial into the destination's aggregator in one pass and sends the sum down when every
//!   contributing worker's partial is in. A block's rows are its destinations only; row `i`'s
//!   `slots` are the workers that send partials for it, and [`Partials`] lists, per
//!   (destination, worker) pair, the worker's vertices that neighbour the destination.
//!
//! Plans are built from a prepared plan or a graph on the planning side
//! (`switchgnn_scheduler::exchange`); this crate only runs them.

use serde::Serialize;
use thiserror::Error;

use crate::table::BlockTable;
use crate::wire::MAX_LANES;

/// Why a plan cannot be built or used.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum PlanError {
    /// A layer the plan does not have.
    #[error("layer {layer} is not in the plan (it has {layers} layers)")]
    NoLayer {
        /// The layer asked for.
        layer: usize,
        /// Layers the plan has.
        layers: usize,
    },
    /// The width needs more 64-lane chunks than the wire's chunk field can number.
    #[error("width {0} needs more than 255 chunks of {MAX_LANES} lanes")]
    TooWide(usize),
    /// A width of zero.
    #[error("width must be positive")]
    ZeroWidth,
    /// A count beyond what the wire format can carry.
    #[error("{what} {value} does not fit the wire format (limit {limit})")]
    TooLarge {
        /// What is counted.
        what: &'static str,
        /// The count.
        value: u64,
        /// The largest count the wire format carries.
        limit: u64,
    },
    /// `auto` on a plan that records no usable choice of kind per layer.
    #[error("{0}")]
    NoChoice(String),
    /// A send order that does not list each of its block's vertices exactly once.
    #[error("the plan's orders do not match its blocks: {0}")]
    BadOrder(String),
}

/// How the switch treats an exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Mode {
    /// SwitchGNN: the plan's blocks in turn, aggregators assigned by the control plane.
    Blocks,
    /// One block of every cross edge, aggregators allocated on first arrival.
    Strawman,
    /// The host exchange over a plain switch.
    Host,
    /// Pre-aggregated partial sums, one pass each.
    Reduce,
    /// Pre-aggregated partial sums sent host to host; the switch only forwards them.
    HostReduce,
    /// Per ordered worker pair, raw copies or partial sums (the fewer rows), host to host;
    /// the switch only forwards them.
    HostHybrid,
    /// Host-only partial sums, a rack's for a destination in another rack summed by one
    /// proxy worker of the rack first; the switch only forwards them.
    HostTwoLevel,
}

impl Mode {
    /// The mode's name, as errors and reports give it.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Blocks => "switchgnn",
            Mode::Strawman => "strawman",
            Mode::Host => "host",
            Mode::Reduce => "reduce",
            Mode::HostReduce => "host-reduce",
            Mode::HostHybrid => "host-hybrid",
            Mode::HostTwoLevel => "host-two-level",
        }
    }

    /// Whether the switch adds contributions up (else it only forwards host-to-host packets).
    pub fn switch_aggregates(self) -> bool {
        matches!(self, Mode::Blocks | Mode::Strawman | Mode::Reduce)
    }

    /// Whether the blocks are of destinations with one partial sum per contributing worker
    /// ([`PlanBlock::reduce`]; in a hybrid block, [`PlanBlock::hybrid`], also multicast
    /// senders), summed in the switch or by the destination's owner.
    pub fn pre_aggregated(self) -> bool {
        matches!(
            self,
            Mode::Reduce | Mode::HostReduce | Mode::HostHybrid | Mode::HostTwoLevel
        )
    }
}

/// What the partial sums of a [`Mode::Reduce`] block add up. Pair `p = offsets[row] + j` of
/// the block's table is (destination `vertices[row]`, its `j`-th contributing worker
/// `slots[p]`); that worker's vertices neighbouring the destination are
/// `sources[starts[p]..starts[p + 1]]`, ascending.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Partials {
    /// Where each pair's sources start in `sources` (one more entry than pairs).
    pub starts: Vec<u64>,
    /// Source vertices (global ids), pair by pair.
    pub sources: Vec<u32>,
}

impl Partials {
    /// The sources summed into pair `p`.
    pub fn of(&self, p: usize) -> &[u32] {
        &self.sources[self.starts[p] as usize..self.starts[p + 1] as usize]
    }

    /// Whether the sources are known (a switch's view of a reduce block lists none).
    pub fn known(&self) -> bool {
        !self.starts.is_empty()
    }
}

/// The multicast senders of a hybrid [`Mode::Reduce`] block: vertices whose whole feature
/// goes up once (source = destination field = the vertex) and is added, one pass each, into
/// `rows[offsets[i]..offsets[i + 1]]` (table rows of destinations, ascending) — SwitchGNN's
/// way — while every other remote neighbour of a destination comes in its worker's partial
/// sum. Empty in a plain reduce block. In a [`Mode::HostHybrid`] block they are the vertices
/// sent raw: each goes once to every worker owning one of its rows, which adds it into them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Multicast {
    /// Sender vertices, ascending (global ids).
    pub vertices: Vec<u32>,
    /// Where each sender's rows start (one more entry than senders).
    pub offsets: Vec<u64>,
    /// Destination rows, sender by sender.
    pub rows: Vec<u32>,
}

impl Multicast {
    /// Senders.
    pub fn len(&self) -> usize {
        self.vertices.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.vertices.is_empty()
    }

    /// The index of sender `v`, if it is one.
    pub fn index(&self, v: u32) -> Option<usize> {
        self.vertices.binary_search(&v).ok()
    }

    /// Destination rows sender `i` is added into.
    pub fn rows_of(&self, i: usize) -> &[u32] {
        &self.rows[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    /// Per table row of `rows` rows, the multicast senders added into it.
    pub fn incoming(&self, rows: usize) -> Vec<u32> {
        let mut n = vec![0u32; rows];
        for &r in &self.rows {
            n[r as usize] += 1;
        }
        n
    }
}

/// One block at run time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanBlock {
    /// The block's lookup table.
    pub table: BlockTable,
    /// Table rows in send order (every worker sends its own rows in this relative order).
    pub order: Vec<u32>,
    /// The sources of each partial sum ([`Mode::Reduce`] only; empty otherwise).
    pub partials: Partials,
    /// The multicast senders of a hybrid [`Mode::Reduce`] block (empty otherwise).
    pub multicast: Multicast,
}

impl PlanBlock {
    /// Table row of global vertex `v`, if it is in this block.
    pub fn row_of(&self, v: u32) -> Option<usize> {
        self.table.vertices.binary_search(&v).ok()
    }

    /// [`Mode::Reduce`]: the pair of destination row `row` and contributing worker `w`, if `w`
    /// sends a partial for it.
    pub fn pair(&self, row: usize, w: u16) -> Option<usize> {
        let j = self.table.row(row).binary_search(&u32::from(w)).ok()?;
        Some(self.table.offsets[row] as usize + j)
    }

    /// The pair of destination row `row` that worker `w`'s own vertices go into, if any: its
    /// own ([`PlanBlock::pair`]), or in a [`Mode::HostTwoLevel`] block the pair of its rack's
    /// proxy whose sources include a vertex of `w` (`owner`: the plan's owners).
    pub fn feeding_pair(&self, row: usize, w: u16, owner: &[u16], mode: Mode) -> Option<usize> {
        if let Some(p) = self.pair(row, w) {
            return Some(p);
        }
        if mode != Mode::HostTwoLevel || !self.partials.known() {
            return None;
        }
        self.table.pairs_of(row).find(|&p| {
            self.partials
                .of(p)
                .iter()
                .any(|&u| owner.get(u as usize) == Some(&w))
        })
    }

    /// Global ids of the sources that feed row `i`'s aggregator (its in-block neighbours),
    /// ascending.
    pub fn sources(&self, i: usize) -> impl ExactSizeIterator<Item = u32> + '_ {
        self.table
            .row(i)
            .iter()
            .map(|&s| self.table.vertices[s as usize])
    }
}

/// Everything one exchange needs, shared by the switch and every worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExchangePlan {
    /// How the switch treats the exchange.
    pub mode: Mode,
    /// Feature width `D` of the exchange.
    pub width: usize,
    /// Workers taking part.
    pub workers: u16,
    /// Owner worker of every vertex.
    pub owner: Vec<u16>,
    /// The blocks, in the order they run.
    pub blocks: Vec<PlanBlock>,
}

impl ExchangePlan {
    /// An exchange of `width` over `blocks`, each vertex `v` owned by worker `owner[v]` of
    /// `workers`; checked against what the wire format can carry.
    pub fn new(
        mode: Mode,
        width: usize,
        workers: u32,
        owner: Vec<u16>,
        blocks: Vec<PlanBlock>,
    ) -> Result<ExchangePlan, PlanError> {
        if width == 0 {
            return Err(PlanError::ZeroWidth);
        }
        if width.div_ceil(MAX_LANES) > u8::MAX as usize {
            return Err(PlanError::TooWide(width));
        }
        let fits = |what, value: u64, limit: u64| {
            if value > limit {
                Err(PlanError::TooLarge { what, value, limit })
            } else {
                Ok(())
            }
        };
        fits("workers", u64::from(workers), u64::from(u16::MAX))?;
        // Block ids leave one value above the last for "exchange finished".
        fits("blocks", blocks.len() as u64, u64::from(u16::MAX) - 1)?;
        for b in &blocks {
            let most = b.table.expected.iter().copied().max().unwrap_or(0);
            fits(
                "contributions per aggregator",
                u64::from(most),
                u64::from(u16::MAX),
            )?;
        }
        if mode.pre_aggregated() {
            check_partials(&owner, &blocks)?;
        }
        Ok(ExchangePlan {
            mode,
            width,
            workers: workers as u16,
            owner,
            blocks,
        })
    }

    /// 64-lane chunks per feature.
    pub fn chunks(&self) -> usize {
        self.width.div_ceil(MAX_LANES)
    }

    /// Lanes of chunk `c` (the last one may be short).
    pub fn chunk_lanes(&self, c: usize) -> usize {
        (self.width - c * MAX_LANES).min(MAX_LANES)
    }

    /// Every vertex of worker `w` that receives remote contributions, ascending: the rows of
    /// an exchange's output.
    pub fn receivers(&self, w: u16) -> Vec<u32> {
        let mut out: Vec<u32> = self
            .blocks
            .iter()
            .flat_map(|b| {
                b.table
                    .vertices
                    .iter()
                    .zip(&b.table.workers)
                    .filter(move |(_, &o)| o == u32::from(w))
                    .map(|(&v, _)| v)
            })
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// A fingerprint of everything the switch and the workers must agree on (mode, width,
    /// owners, every table and order), compared at start-up so that processes started with
    /// different plans refuse to run together.
    pub fn checksum(&self) -> u64 {
        fn put<T: Copy + Into<u64>>(h: &mut xxhash_rust::xxh3::Xxh3, words: &[T]) {
            h.update(&(words.len() as u64).to_le_bytes());
            for &w in words {
                h.update(&w.into().to_le_bytes());
            }
        }
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        put(
            &mut h,
            &[self.mode as u32, self.width as u32, u32::from(self.workers)],
        );
        put(&mut h, &self.owner);
        for b in &self.blocks {
            let t = &b.table;
            put(&mut h, &t.vertices);
            put(&mut h, &t.workers);
            put(&mut h, &t.expected);
            put(&mut h, &t.offsets);
            put(&mut h, &t.slots);
            put(&mut h, &b.order);
            put(&mut h, &b.partials.starts);
            put(&mut h, &b.partials.sources);
            put(&mut h, &b.multicast.vertices);
            put(&mut h, &b.multicast.offsets);
            put(&mut h, &b.multicast.rows);
        }
        h.digest()
    }

    /// Aggregators the largest block holds at once (slots × chunks).
    pub fn peak_aggregators(&self) -> usize {
        self.blocks
            .iter()
            .map(|b| b.table.len() * self.chunks())
            .max()
            .unwrap_or(0)
    }

    /// Worker `w`'s vertices (ascending) and their rows of `features`, a row-major matrix of
    /// every vertex of the graph: what that worker's engine is built from.
    pub fn local_rows(&self, w: u16, features: &[f32]) -> (Vec<u32>, Vec<f32>) {
        let width = self.width;
        let vertices: Vec<u32> = (0..self.owner.len() as u32)
            .filter(|&v| self.owner[v as usize] == w)
            .collect();
        let rows = vertices
            .iter()
            .flat_map(|&v| &features[v as usize * width..(v as usize + 1) * width])
            .copied()
            .collect();
        (vertices, rows)
    }

    /// The most contributions any aggregator adds up (at least 1): what a fixed-point scale
    /// must leave room for so that no sum in the switch overflows. In [`Mode::Reduce`] a
    /// contribution is a source vertex, however many partial sums carry them.
    pub fn most_contributions(&self) -> u64 {
        if self.mode.pre_aggregated() {
            return self
                .blocks
                .iter()
                .flat_map(|b| {
                    let t = &b.table;
                    let incoming = b.multicast.incoming(t.len());
                    (0..t.len()).map(move |row| {
                        if !b.partials.known() {
                            return u64::from(t.expected[row]);
                        }
                        let pairs = t.pairs_of(row);
                        b.partials.starts[pairs.end] - b.partials.starts[pairs.start]
                            + u64::from(incoming[row])
                    })
                })
                .max()
                .unwrap_or(1)
                .max(1);
        }
        self.blocks
            .iter()
            .flat_map(|b| b.table.expected.iter())
            .map(|&e| u64::from(e))
            .max()
            .unwrap_or(1)
            .max(1)
    }
}

impl PlanBlock {
    /// A block of `table` sent in `order` (global vertex ids, each of the block's vertices once).
    pub fn new(table: BlockTable, order: &[u32]) -> Result<PlanBlock, PlanError> {
        plan_block(table, order)
    }

    /// A [`Mode::Reduce`] block: `table`'s rows are destinations, row `i`'s slots the workers
    /// that send it partial sums (ascending), and `partials` the sources of each pair;
    /// destinations are sent in `order` (global ids). A switch needs no sources: empty
    /// `partials` make the switch's view of the block (engines refuse it).
    pub fn reduce(
        table: BlockTable,
        order: &[u32],
        partials: Partials,
    ) -> Result<PlanBlock, PlanError> {
        PlanBlock::hybrid(table, order, partials, Multicast::default())
    }

    /// A hybrid [`Mode::Reduce`] block: as [`PlanBlock::reduce`], plus `multicast` senders;
    /// a destination's expected count is its contributing workers plus the senders added into
    /// it.
    pub fn hybrid(
        table: BlockTable,
        order: &[u32],
        partials: Partials,
        multicast: Multicast,
    ) -> Result<PlanBlock, PlanError> {
        let pairs = table.slots.len();
        let bad = |why: String| Err(PlanError::BadOrder(why));
        let switch_view = partials == Partials::default();
        let bad_ranges = partials.starts.len() != pairs + 1
            || partials.starts.first() != Some(&0)
            || partials.starts.last().copied() != Some(partials.sources.len() as u64)
            || partials.starts.windows(2).any(|w| w[0] >= w[1]);
        if !switch_view && bad_ranges {
            return bad(format!(
                "{} partial-sum ranges for {pairs} (destination, worker) pairs",
                partials.starts.len().saturating_sub(1)
            ));
        }
        let m = &multicast;
        let bad_multicast = m.offsets.len() != m.vertices.len() + 1
            || m.offsets.first() != Some(&0)
            || m.offsets.last().copied() != Some(m.rows.len() as u64)
            || m.vertices.windows(2).any(|w| w[0] >= w[1])
            || (0..m.len()).any(|i| {
                let rows = m.rows_of(i);
                rows.is_empty()
                    || rows.windows(2).any(|w| w[0] >= w[1])
                    || rows.iter().any(|&r| r as usize >= table.len())
            });
        if *m != Multicast::default() && bad_multicast {
            return bad(
                "multicast senders must ascend, each with ascending rows of the block".into(),
            );
        }
        let incoming = m.incoming(table.len());
        for (row, &multicast_in) in incoming.iter().enumerate() {
            let workers = table.row(row);
            if workers.windows(2).any(|w| w[0] >= w[1])
                || workers.len() as u32 + multicast_in != table.expected[row]
            {
                return bad(format!(
                    "destination {}: its contributing workers must ascend and, with its multicast senders, number its expected count",
                    table.vertices[row]
                ));
            }
        }
        let mut block = plan_block(table, order)?;
        block.partials = partials;
        block.multicast = multicast;
        Ok(block)
    }
}

/// Every partial sum of a reduce plan is summed by its worker over vertices that worker owns,
/// for a destination another worker owns.
fn check_partials(owner: &[u16], blocks: &[PlanBlock]) -> Result<(), PlanError> {
    let owner_of = |v: u32| owner.get(v as usize).map(|&o| u32::from(o));
    for b in blocks {
        let t = &b.table;
        let m = &b.multicast;
        for i in 0..m.len() {
            let u = m.vertices[i];
            if let Some(&r) = m
                .rows_of(i)
                .iter()
                .find(|&&r| owner_of(t.vertices[r as usize]) == owner_of(u))
            {
                return Err(PlanError::BadOrder(format!(
                    "multicast sender {u} feeds destination {} of its own worker",
                    t.vertices[r as usize]
                )));
            }
        }
        if !b.partials.known() {
            continue;
        }
        for row in 0..t.len() {
            let v = t.vertices[row];
            for (j, &w) in t.row(row).iter().enumerate() {
                let p = t.offsets[row] as usize + j;
                let foreign = b.partials.of(p).iter().find(|&&u| owner_of(u) != Some(w));
                if owner_of(v) == Some(w) || foreign.is_some() {
                    return Err(PlanError::BadOrder(format!(
                        "the partial sum of worker {w} for vertex {v} is not over remote vertices that worker owns"
                    )));
                }
            }
        }
    }
    Ok(())
}

fn plan_block(table: BlockTable, order: &[u32]) -> Result<PlanBlock, PlanError> {
    if order.len() != table.len() {
        return Err(PlanError::BadOrder(format!(
            "an order of {} vertices for a block of {}",
            order.len(),
            table.len()
        )));
    }
    let mut seen = vec![false; table.len()];
    let rows = order
        .iter()
        .map(|v| {
            let i = table
                .vertices
                .binary_search(v)
                .map_err(|_| PlanError::BadOrder(format!("vertex {v} is not in its block")))?;
            if std::mem::replace(&mut seen[i], true) {
                return Err(PlanError::BadOrder(format!("vertex {v} is listed twice")));
            }
            Ok(i as u32)
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(PlanBlock {
        table,
        order: rows,
        partials: Partials::default(),
        multicast: Multicast::default(),
    })
}

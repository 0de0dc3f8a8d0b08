//! The receiving half of a worker: per destination vertex and chunk of the running block, the
//! bitmaps and partial sums that decide when its remote sum is complete.
//!
//! A destination `(v, c)` with `n` expected contributions completes in one of two ways:
//! - **switch sum**: a sum of `k` contributions from the switch, plus the `n − k` that the
//!   switch forwarded raw because it had no aggregator for them (the strawman's overflow);
//!   the switch counts each contribution once, so the two sets are disjoint;
//! - **host sum**: all `n` contributions raw (fetched after a timeout or an overflow notice,
//!   taken from the cache, or pushed by the host exchange), one per source by a bitmap.
//!
//! Both are exact integer sums of the same values, so the result is the same either way.
//!
//! In reduce mode the switch way counts *partial sums* (one per contributing worker; a partial
//! the switch forwards raw is one of them), while the host way still counts every remote source
//! vertex raw: a fetch asks a source's owner for that vertex's feature, as in the other modes,
//! so a destination whose partials are lost or overflowed completes from plain features.

use std::collections::HashMap;
use std::sync::Arc;

use bitvec::vec::BitVec;

use super::{EngineStats, ExchangeOutput};
use crate::plan::{ExchangePlan, Mode};
use crate::wire::MAX_LANES;

/// Which sources of one destination have been seen: inline up to 128 sources (most
/// destinations), on the heap beyond.
#[derive(Debug, Clone)]
enum Seen {
    Inline([u64; 2]),
    Heap(BitVec),
}

impl Seen {
    fn new(sources: usize) -> Seen {
        if sources <= 128 {
            Seen::Inline([0; 2])
        } else {
            Seen::Heap(BitVec::repeat(false, sources))
        }
    }

    fn get(&self, j: usize) -> bool {
        match self {
            Seen::Inline(words) => words[j / 64] >> (j % 64) & 1 == 1,
            Seen::Heap(bits) => bits[j],
        }
    }

    /// Set source `j`'s bit; whether it was set before.
    fn replace(&mut self, j: usize) -> bool {
        match self {
            Seen::Inline(words) => {
                let was = words[j / 64] >> (j % 64) & 1 == 1;
                words[j / 64] |= 1 << (j % 64);
                was
            }
            Seen::Heap(bits) => bits.replace(j, true),
        }
    }
}

/// One destination chunk whose sum is on its way: plain data, so that keeping thousands of
/// them (the host exchange) allocates nothing per destination beyond the map's own growth.
#[derive(Debug)]
struct Pending {
    /// The switch's partial or complete sum: its count and lanes.
    result: Option<(u16, [i32; MAX_LANES])>,
    /// Lanes of this chunk.
    lanes: usize,
    /// Contributions the switch forwarded raw (no aggregator); in reduce mode, partial sums by
    /// worker.
    overflow_seen: Seen,
    overflow_count: u32,
    overflow_sum: [i64; MAX_LANES],
    /// Every raw contribution, however it came.
    raw_seen: Seen,
    raw_count: u32,
    raw_sum: [i64; MAX_LANES],
}

/// The destination chunks whose sums are on their way, found by key (destination position ×
/// chunks + chunk) through a dense index into a slab whose slots completed chunks free for
/// the next: no hashing per contribution, and a [`Pending`] (about 1.3 KB) written once in
/// place rather than moved as a hash table grows. The slab grows by segments that never move:
/// as one vector it was copied at every doubling, and a host hybrid receiver holds 17,000 of
/// its 29,000 chunks pending at once on Amazon-Computers × 4 at width 745 (24 MB, copied and
/// its fresh pages zeroed by the kernel again: 15% of that run's samples).
#[derive(Debug, Default)]
struct PendingSlab {
    /// Per key, its slot, or [`PendingSlab::NONE`].
    index: Vec<u32>,
    /// The slots, [`PendingSlab::SEGMENT`] to a segment: slot `i` is
    /// `segments[i / SEGMENT][i % SEGMENT]`.
    segments: Vec<Vec<Pending>>,
    /// Slots in use or freed so far.
    len: u32,
    /// Slots of completed chunks, to be reused.
    free: Vec<u32>,
}

impl PendingSlab {
    const NONE: u32 = u32::MAX;
    /// Slots per segment: 256 of about 1.3 KB, a third of a megabyte.
    const SEGMENT: usize = 256;

    fn new(keys: usize) -> PendingSlab {
        PendingSlab {
            index: vec![Self::NONE; keys],
            ..PendingSlab::default()
        }
    }

    fn slot(&self, slot: u32) -> &Pending {
        let i = slot as usize;
        &self.segments[i / Self::SEGMENT][i % Self::SEGMENT]
    }

    fn slot_mut(&mut self, slot: u32) -> &mut Pending {
        let i = slot as usize;
        &mut self.segments[i / Self::SEGMENT][i % Self::SEGMENT]
    }

    fn get(&self, key: usize) -> Option<&Pending> {
        match self.index[key] {
            Self::NONE => None,
            slot => Some(self.slot(slot)),
        }
    }

    fn contains(&self, key: usize) -> bool {
        self.index[key] != Self::NONE
    }

    fn get_or_insert_with(&mut self, key: usize, new: impl FnOnce() -> Pending) -> &mut Pending {
        if self.index[key] == Self::NONE {
            let slot = match self.free.pop() {
                Some(slot) => {
                    *self.slot_mut(slot) = new();
                    slot
                }
                None => {
                    let slot = self.len;
                    if slot as usize % Self::SEGMENT == 0 {
                        self.segments.push(Vec::with_capacity(Self::SEGMENT));
                    }
                    self.segments
                        .last_mut()
                        .expect("a segment with room")
                        .push(new());
                    self.len += 1;
                    slot
                }
            };
            self.index[key] = slot;
        }
        let slot = self.index[key];
        self.slot_mut(slot)
    }

    /// Forget `key`'s chunk: its slot goes to the free list, its contents stay readable
    /// (the returned slot, [`PendingSlab::slot`]) until the next insertion.
    fn release(&mut self, key: usize) -> u32 {
        let slot = std::mem::replace(&mut self.index[key], Self::NONE);
        debug_assert_ne!(slot, Self::NONE, "released a chunk that is not pending");
        self.free.push(slot);
        slot
    }
}

/// Which way a destination's sum completed.
#[derive(Debug, Clone, Copy)]
enum Way {
    /// The switch's sum plus the contributions it forwarded raw.
    Switch,
    /// Every contribution raw.
    Host,
}

impl Pending {
    fn new(senders: usize, sources: usize, lanes: usize) -> Pending {
        Pending {
            result: None,
            lanes,
            overflow_seen: Seen::new(senders),
            overflow_count: 0,
            overflow_sum: [0; MAX_LANES],
            raw_seen: Seen::new(sources),
            raw_count: 0,
            raw_sum: [0; MAX_LANES],
        }
    }

    /// Whether either way is complete, and which: the switch's way needs `senders`
    /// contributions (sum and forwarded; without `switch_sums`, the partial sums alone), the
    /// host's way `sources` raw ones.
    fn complete(&self, senders: u32, sources: u32, switch_sums: bool) -> Option<Way> {
        let summed = match &self.result {
            Some((count, _)) => Some(u32::from(*count)),
            None => (!switch_sums).then_some(0),
        };
        if summed.is_some_and(|n| n + self.overflow_count == senders) {
            return Some(Way::Switch);
        }
        (self.raw_count == sources).then_some(Way::Host)
    }

    /// The switch's sum (if any) plus the raw contributions it forwarded.
    fn switch_sum(&self) -> impl Iterator<Item = i64> + '_ {
        let result = self.result.as_ref().map(|(_, l)| l);
        (0..self.lanes).map(move |i| result.map_or(0, |l| i64::from(l[i])) + self.overflow_sum[i])
    }

    /// Every raw contribution summed.
    fn raw_sum(&self) -> impl Iterator<Item = i64> + '_ {
        self.raw_sum[..self.lanes].iter().copied()
    }
}

fn add(acc: &mut [i64], values: &[i32]) {
    for (a, &v) in acc.iter_mut().zip(values) {
        *a += i64::from(v);
    }
}

/// One raw contribution: source `u`'s chunk `c` for destination `v`; `overflow` when the
/// switch forwarded it for lack of an aggregator (it is then also part of the switch-sum way;
/// in reduce mode it is then a partial sum named by its lowest source, and only that).
#[derive(Debug, Clone, Copy)]
pub(super) struct Raw<'a> {
    pub u: u32,
    pub v: u32,
    pub c: usize,
    pub values: &'a [i32],
    pub overflow: bool,
}

/// Which count of a destination a raw packet adds to.
#[derive(Debug, Clone, Copy)]
enum Taken {
    /// Source `j`'s feature, for the host way.
    Source(usize),
    /// The switch way's `j`-th forwarded contribution only (a partial sum in reduce mode).
    Partial(usize),
    /// Both: a forwarded single contribution (outside reduce mode, or a hybrid block's
    /// multicast sender): its index in the switch way's count and in the host way's.
    Both { switch: usize, host: usize },
}

/// Receive state of one block.
#[derive(Debug)]
pub(super) struct Receiver {
    plan: Arc<ExchangePlan>,
    block: usize,
    chunks: usize,
    /// Table rows of this worker's vertices (ascending vertex id).
    dests: Vec<u32>,
    /// Their vertex ids, side by side: searched for every sum received (through the table
    /// each step of the search was a cache miss).
    dest_vertices: Vec<u32>,
    /// Their contributions expected (the table's, side by side: read for every sum).
    dest_expected: Vec<u32>,
    /// Output row of each destination.
    out_rows: Vec<u32>,
    done: BitVec,
    left: usize,
    pending: PendingSlab,
    /// [`Mode::Host`]: per destination chunk, the sources seen and how many. The host way is
    /// that mode's only one, so its raw features add straight into the output row: no
    /// [`Pending`] (about 1.3 KB, hashed and moved per destination chunk) and no copy of the
    /// sum at the end — per received row, the host exchange's main cost at the receiver.
    host: Vec<(Seen, u32)>,
    /// Host mode: (source vertex, destination position, the source's index in the
    /// destination's row), sorted, so one raw feature serves every local vertex it neighbours
    /// without a search per neighbour. [`Mode::HostHybrid`]: the same for the multicast
    /// senders (the raw copies), the index being the sender's among those of the destination.
    by_source: Vec<(u32, u32, u32)>,
    /// Host modes: where each source's entries start and end in `by_source` (a hash lookup
    /// instead of a binary search through a large array for every raw feature).
    source_ranges: HashMap<u32, (u32, u32), foldhash::fast::RandomState>,
    /// Hybrid reduce blocks: (destination row, multicast sender) for this worker's
    /// destinations, sorted.
    multicast_in: Vec<(u32, u32)>,
    /// Pre-aggregated modes: per destination position, the raw contributions its host way
    /// needs (counted once here: asked for on every contribution received).
    raw_sources: Vec<u32>,
}

impl Receiver {
    pub(super) fn new(
        plan: &Arc<ExchangePlan>,
        rank: u16,
        block: u16,
        output: &ExchangeOutput,
    ) -> Receiver {
        let b = &plan.blocks[usize::from(block)];
        let t = &b.table;
        let dests: Vec<u32> = (0..t.len() as u32)
            .filter(|&i| t.workers[i as usize] == u32::from(rank))
            .collect();
        let out_rows = dests
            .iter()
            .map(|&i| {
                output
                    .vertices
                    .binary_search(&t.vertices[i as usize])
                    .expect("every destination is an output row") as u32
            })
            .collect();
        let mut by_source = Vec::new();
        if plan.mode == Mode::Host {
            for (pos, &row) in dests.iter().enumerate() {
                by_source.extend(
                    b.sources(row as usize)
                        .enumerate()
                        .map(|(j, u)| (u, pos as u32, j as u32)),
                );
            }
            by_source.sort_unstable();
        }
        let mut multicast_in = Vec::new();
        let m = &b.multicast;
        for i in 0..m.len() {
            let mine = m
                .rows_of(i)
                .iter()
                .filter(|&&r| t.workers[r as usize] == u32::from(rank));
            multicast_in.extend(mine.map(|&r| (r, m.vertices[i])));
        }
        multicast_in.sort_unstable();
        if plan.mode == Mode::HostHybrid {
            // Grouped by destination row, senders ascending: the index within its group.
            for (k, &(row, u)) in multicast_in.iter().enumerate() {
                let first = multicast_in[..k].partition_point(|&(r, _)| r < row);
                let pos = dests
                    .binary_search(&row)
                    .expect("a destination of this worker");
                by_source.push((u, pos as u32, (k - first) as u32));
            }
            by_source.sort_unstable();
        }
        let mut source_ranges = HashMap::default();
        let mut start = 0;
        for (i, e) in by_source.iter().enumerate() {
            if by_source.get(i + 1).is_none_or(|next| next.0 != e.0) {
                source_ranges.insert(e.0, (start as u32, i as u32 + 1));
                start = i + 1;
            }
        }
        let mut raw_sources = Vec::new();
        if plan.mode.pre_aggregated() {
            raw_sources = dests
                .iter()
                .map(|&row| {
                    let pairs = t.pairs_of(row as usize);
                    (b.partials.starts[pairs.end] - b.partials.starts[pairs.start]) as u32
                })
                .collect();
            for &(row, _) in &multicast_in {
                let pos = dests
                    .binary_search(&row)
                    .expect("a destination of this worker");
                raw_sources[pos] += 1;
            }
        }
        let chunks = plan.chunks();
        let host = if plan.mode == Mode::Host {
            dests
                .iter()
                .flat_map(|&row| {
                    let seen = Seen::new(b.table.expected[row as usize] as usize);
                    std::iter::repeat_n((seen, 0), chunks)
                })
                .collect()
        } else {
            Vec::new()
        };
        // The host exchange keeps no Pending (see `host`).
        let pending = PendingSlab::new(if plan.mode == Mode::Host {
            0
        } else {
            dests.len() * chunks
        });
        Receiver {
            host,
            multicast_in,
            raw_sources,
            dest_vertices: dests.iter().map(|&row| t.vertices[row as usize]).collect(),
            dest_expected: dests.iter().map(|&row| t.expected[row as usize]).collect(),
            plan: Arc::clone(plan),
            block: usize::from(block),
            chunks,
            left: dests.len() * chunks,
            done: BitVec::repeat(false, dests.len() * chunks),
            dests,
            out_rows,
            pending,
            by_source,
            source_ranges,
        }
    }

    pub(super) fn is_complete(&self) -> bool {
        self.left == 0
    }

    fn position(&self, v: u32) -> Option<usize> {
        self.dest_vertices.binary_search(&v).ok()
    }

    /// Contributions the switch adds up for destination position `pos` (partial sums in
    /// reduce mode).
    fn expected(&self, pos: usize) -> u32 {
        self.dest_expected[pos]
    }

    /// Reduce mode: the range of `partials.sources` holding every source of `pos`, grouped by
    /// worker.
    fn partial_sources(&self, pos: usize) -> std::ops::Range<usize> {
        let b = &self.plan.blocks[self.block];
        let pairs = b.table.pairs_of(self.dests[pos] as usize);
        b.partials.starts[pairs.start] as usize..b.partials.starts[pairs.end] as usize
    }

    /// Hybrid reduce blocks: the multicast senders added into `pos`, ascending.
    fn multicast_sources(&self, pos: usize) -> impl ExactSizeIterator<Item = u32> + '_ {
        let row = self.dests[pos];
        let start = self.multicast_in.partition_point(|&(r, _)| r < row);
        let end = self.multicast_in.partition_point(|&(r, _)| r <= row);
        self.multicast_in[start..end].iter().map(|&(_, u)| u)
    }

    /// The index of `u` among the multicast senders added into `pos`.
    fn multicast_index(&self, pos: usize, u: u32) -> Option<usize> {
        self.multicast_sources(pos).position(|x| x == u)
    }

    /// Raw contributions the host way needs for `pos`: one per remote source vertex.
    fn sources(&self, pos: usize) -> u32 {
        if self.plan.mode.pre_aggregated() {
            debug_assert_eq!(
                self.raw_sources[pos] as usize,
                self.partial_sources(pos).len() + self.multicast_sources(pos).len()
            );
            self.raw_sources[pos]
        } else {
            self.expected(pos)
        }
    }

    fn finish(
        &mut self,
        key: usize,
        sum: impl IntoIterator<Item = i64>,
        host: bool,
        output: &mut ExchangeOutput,
        stats: &mut EngineStats,
    ) {
        let start = self.output_start(key, output.width);
        for (o, s) in output.sums[start..].iter_mut().zip(sum) {
            *o += s;
        }
        self.mark_done(key, host, stats);
    }

    /// Where destination chunk `key`'s lanes start in the output's sums.
    fn output_start(&self, key: usize, width: usize) -> usize {
        let (pos, c) = (key / self.chunks, key % self.chunks);
        self.out_rows[pos] as usize * width + c * MAX_LANES
    }

    /// Destination chunk `key` is complete (`host`: from raw contributions).
    fn mark_done(&mut self, key: usize, host: bool, stats: &mut EngineStats) {
        self.done.set(key, true);
        self.left -= 1;
        if host {
            stats.host_aggregated += 1;
        }
    }

    fn try_complete(&mut self, key: usize, output: &mut ExchangeOutput, stats: &mut EngineStats) {
        let pos = key / self.chunks;
        let (senders, sources) = (self.expected(pos), self.sources(pos));
        let switch_sums = self.plan.mode.switch_aggregates();
        let Some(way) = self
            .pending
            .get(key)
            .and_then(|p| p.complete(senders, sources, switch_sums))
        else {
            return;
        };
        let slot = self.pending.release(key);
        let p = self.pending.slot(slot);
        // Copied out, so that `finish` may borrow the receiver.
        let mut sum = [0i64; MAX_LANES];
        let host = match way {
            Way::Switch => {
                sum.iter_mut().zip(p.switch_sum()).for_each(|(s, x)| *s = x);
                p.overflow_count > 0
            }
            Way::Host => {
                sum.iter_mut().zip(p.raw_sum()).for_each(|(s, x)| *s = x);
                true
            }
        };
        let lanes = p.lanes;
        self.finish(key, sum[..lanes].iter().copied(), host, output, stats);
    }

    fn pending(&mut self, key: usize) -> &mut Pending {
        let pos = key / self.chunks;
        let (senders, sources) = (self.expected(pos) as usize, self.sources(pos) as usize);
        let lanes = self.plan.chunk_lanes(key % self.chunks);
        self.pending
            .get_or_insert_with(key, || Pending::new(senders, sources, lanes))
    }

    /// The switch's sum of `count` contributions for `(v, c)`.
    pub(super) fn on_result(
        &mut self,
        v: u32,
        c: usize,
        count: u16,
        values: &[i32],
        output: &mut ExchangeOutput,
        stats: &mut EngineStats,
    ) -> Option<()> {
        // The host exchange's sums are the receiver's own: a switch sum there is unexpected
        // (and would count twice beside the rows added straight into the output).
        if self.plan.mode == Mode::Host {
            return None;
        }
        let pos = self.position(v)?;
        let key = pos * self.chunks + c;
        if self.done[key] {
            return Some(());
        }
        if u32::from(count) > self.expected(pos) {
            return None;
        }
        if u32::from(count) == self.expected(pos) && !self.pending.contains(key) {
            // The common case: the whole sum in one packet.
            self.finish(
                key,
                values.iter().map(|&x| i64::from(x)),
                false,
                output,
                stats,
            );
            return Some(());
        }
        let p = self.pending(key);
        if p.result.is_none() {
            let mut lanes = [0; MAX_LANES];
            lanes[..values.len()].copy_from_slice(values);
            p.result = Some((count, lanes));
        }
        self.try_complete(key, output, stats);
        Some(())
    }

    /// Index of source `u` among the sources of destination position `pos`.
    fn source_index(&self, pos: usize, u: u32) -> Option<usize> {
        let b = &self.plan.blocks[self.block];
        if self.plan.mode.pre_aggregated() {
            let all = self.partial_sources(pos);
            // Multicast senders come after every partial sum's sources.
            if let Some(i) = self.multicast_index(pos, u) {
                return Some(all.len() + i);
            }
            // Its owner's pair, or in the host two-level exchange its rack's proxy's.
            let w = *self.plan.owner.get(u as usize)?;
            let pair = b.feeding_pair(
                self.dests[pos] as usize,
                w,
                &self.plan.owner,
                self.plan.mode,
            )?;
            let i = b.partials.of(pair).binary_search(&u).ok()?;
            return Some(b.partials.starts[pair] as usize - all.start + i);
        }
        let t = &b.table;
        let slot = t.vertices.binary_search(&u).ok()? as u32;
        t.row(self.dests[pos] as usize).binary_search(&slot).ok()
    }

    /// A raw contribution for its destination; in host mode it serves every local
    /// destination its source neighbours. Returns whether anything was new.
    pub(super) fn on_raw(
        &mut self,
        raw: Raw<'_>,
        output: &mut ExchangeOutput,
        stats: &mut EngineStats,
    ) -> bool {
        // (destination position, index of the source among its sources): in host mode a
        // range of `by_source`, otherwise at most the one destination `raw.v`.
        let (range, single) = if self.plan.mode == Mode::Host {
            let (start, end) = self.source_ranges.get(&raw.u).copied().unwrap_or((0, 0));
            (start as usize..end as usize, None)
        } else if self.plan.mode.pre_aggregated() && raw.overflow {
            // What the switch could not add: a multicast sender's feature serves both ways
            // (after the partials in the switch's count, after their sources in the host's);
            // a partial sum only the switch way, by worker.
            let single = self.position(raw.v).and_then(|pos| {
                if let Some(i) = self.multicast_index(pos, raw.u) {
                    let row = self.dests[pos] as usize;
                    let workers = self.plan.blocks[self.block].table.row(row).len();
                    let host = self.partial_sources(pos).len() + i;
                    return Some((
                        pos,
                        Taken::Both {
                            switch: workers + i,
                            host,
                        },
                    ));
                }
                let w = *self.plan.owner.get(raw.u as usize)?;
                Some((pos, Taken::Partial(self.partial_slot(pos, w)?)))
            });
            (0..0, single)
        } else {
            let single = self.position(raw.v).and_then(|pos| {
                let j = self.source_index(pos, raw.u)?;
                // Outside reduce mode a forwarded contribution serves both ways.
                let as_partial = raw.overflow && !self.plan.mode.pre_aggregated();
                Some((
                    pos,
                    if as_partial {
                        Taken::Both { switch: j, host: j }
                    } else {
                        Taken::Source(j)
                    },
                ))
            });
            (0..0, single)
        };
        let mut progressed = false;
        for i in range {
            let (_, pos, j) = self.by_source[i];
            progressed |= self.take_raw(
                pos as usize,
                Taken::Source(j as usize),
                raw.c,
                raw.values,
                output,
                stats,
            );
        }
        if let Some((pos, taken)) = single {
            progressed |= self.take_raw(pos, taken, raw.c, raw.values, output, stats);
        }
        progressed
    }

    /// [`Mode::HostReduce`]: worker `w`'s partial sum of destination `v`'s chunk `c`, straight
    /// from that worker; whether it was new.
    pub(super) fn on_partial(
        &mut self,
        v: u32,
        w: u16,
        c: usize,
        values: &[i32],
        output: &mut ExchangeOutput,
        stats: &mut EngineStats,
    ) -> bool {
        let Some((pos, j)) = self
            .position(v)
            .and_then(|pos| Some((pos, self.partial_slot(pos, w)?)))
        else {
            return false;
        };
        self.take_raw(pos, Taken::Partial(j), c, values, output, stats)
    }

    /// [`Mode::HostHybrid`]: sender vertex `u`'s raw copy of chunk `c`, straight from its
    /// worker, added into every destination of ours the plan multicasts it to (it counts
    /// both ways: after the partial sums among the senders, after their sources among the
    /// raw contributions); whether anything was new.
    pub(super) fn on_copy(
        &mut self,
        u: u32,
        c: usize,
        values: &[i32],
        output: &mut ExchangeOutput,
        stats: &mut EngineStats,
    ) -> bool {
        let (start, end) = self.source_ranges.get(&u).copied().unwrap_or((0, 0));
        let mut progressed = false;
        for k in start as usize..end as usize {
            let (_, pos, i) = self.by_source[k];
            let (pos, i) = (pos as usize, i as usize);
            let row = self.dests[pos] as usize;
            let workers = self.plan.blocks[self.block].table.row(row).len();
            let taken = Taken::Both {
                switch: workers + i,
                host: self.partial_sources(pos).len() + i,
            };
            progressed |= self.take_raw(pos, taken, c, values, output, stats);
        }
        progressed
    }

    /// Pre-aggregated modes: the index of worker `w`'s partial sum among those of destination
    /// position `pos`, if it sends one.
    fn partial_slot(&self, pos: usize, w: u16) -> Option<usize> {
        let row = self.dests[pos] as usize;
        let slots = self.plan.blocks[self.block].table.row(row);
        slots.binary_search(&u32::from(w)).ok()
    }

    /// Chunk `c`'s `values` as contribution `taken` of destination position `pos`; whether it
    /// was new.
    fn take_raw(
        &mut self,
        pos: usize,
        taken: Taken,
        c: usize,
        values: &[i32],
        output: &mut ExchangeOutput,
        stats: &mut EngineStats,
    ) -> bool {
        let key = pos * self.chunks + c;
        if self.done[key] {
            return false;
        }
        if let (Taken::Source(j), Some((seen, count))) = (taken, self.host.get_mut(key)) {
            if seen.replace(j) {
                return false;
            }
            *count += 1;
            let complete = *count == self.expected(pos);
            let start = self.output_start(key, output.width);
            add(&mut output.sums[start..start + values.len()], values);
            if complete {
                self.mark_done(key, true, stats);
            }
            return true;
        }
        let p = self.pending(key);
        let mut progressed = false;
        if let Taken::Source(j) | Taken::Both { host: j, .. } = taken {
            if !p.raw_seen.replace(j) {
                p.raw_count += 1;
                add(&mut p.raw_sum, values);
                progressed = true;
            }
        }
        if let Taken::Partial(j) | Taken::Both { switch: j, .. } = taken {
            if !p.overflow_seen.replace(j) {
                p.overflow_count += 1;
                add(&mut p.overflow_sum, values);
                progressed = true;
            }
        }
        self.try_complete(key, output, stats);
        progressed
    }

    /// The raw contributions `key` still lacks: (source, destination, chunk).
    fn wants(&self, key: usize) -> impl Iterator<Item = (u32, u32, u8)> + '_ {
        let pos = key / self.chunks;
        let b = &self.plan.blocks[self.block];
        let row = self.dests[pos] as usize;
        let v = b.table.vertices[row];
        let seen = match self.host.get(key) {
            Some((seen, _)) => Some(seen),
            None => self.pending.get(key).map(|p| &p.raw_seen),
        };
        // In reduce mode the sources are the partials' (grouped by worker, each group
        // ascending, as `source_index` counts them).
        let reduce = self
            .plan
            .mode
            .pre_aggregated()
            .then(|| self.partial_sources(pos));
        let sources: Box<dyn Iterator<Item = u32> + '_> = match reduce {
            Some(range) => Box::new(
                b.partials.sources[range]
                    .iter()
                    .copied()
                    .chain(self.multicast_sources(pos)),
            ),
            None => Box::new(b.sources(row)),
        };
        sources
            .enumerate()
            .filter(move |&(j, _)| !seen.is_some_and(|s| s.get(j)))
            .map(move |(_, u)| (u, v, (key % self.chunks) as u8))
    }

    /// The switch released `(v, c)`'s aggregator after an overflow: every contribution not
    /// yet here raw must be fetched.
    pub(super) fn overflowed(&mut self, v: u32, c: usize) -> Option<Vec<(u32, u32, u8)>> {
        let pos = self.position(v)?;
        let key = pos * self.chunks + c;
        if self.done[key] {
            return Some(Vec::new());
        }
        Some(self.wants(key).collect())
    }

    /// The first `limit` contributions still missing raw (source, destination, chunk), for
    /// destinations not complete, in order. The order never changes (completing only takes
    /// pairs out), so what a round asked for is among the first again in the next round: a
    /// round looks at a bounded front of the block, not at every missing contribution (at
    /// Amazon-Computers scale that was hundreds of thousands per round).
    pub(super) fn missing(&self, limit: usize) -> Vec<(u32, u32, u8)> {
        self.done
            .iter_zeros()
            .flat_map(|key| self.wants(key))
            .take(limit)
            .collect()
    }

    /// How many (destination, chunk) pairs are not complete.
    pub(super) fn left(&self) -> usize {
        self.left
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slab_reuses_a_released_slot_and_forgets_its_key() {
        let mut slab = PendingSlab::new(4);
        slab.get_or_insert_with(1, || Pending::new(2, 3, 8))
            .raw_count = 5;
        slab.get_or_insert_with(3, || Pending::new(2, 3, 8));
        assert_eq!(slab.get(1).map(|p| p.raw_count), Some(5));
        // Asking again keeps what is there.
        assert_eq!(slab.get_or_insert_with(1, || unreachable!()).raw_count, 5);
        let slot = slab.release(1);
        assert!(!slab.contains(1) && slab.get(1).is_none() && slab.contains(3));
        // The next new chunk takes the freed slot, fresh.
        let p = slab.get_or_insert_with(2, || Pending::new(2, 3, 16));
        assert_eq!((p.raw_count, p.lanes), (0, 16));
        assert_eq!(slab.index[2], slot);
        assert_eq!(slab.len, 2);
    }

    #[test]
    fn slab_slots_keep_their_contents_across_segments() {
        let keys = 3 * PendingSlab::SEGMENT + 5;
        let mut slab = PendingSlab::new(keys);
        for key in 0..keys {
            slab.get_or_insert_with(key, || Pending::new(1, 1, 8))
                .raw_count = key as u32;
        }
        assert_eq!(slab.segments.len(), 4);
        assert!((0..keys).all(|key| slab.get(key).map(|p| p.raw_count) == Some(key as u32)));
        // A slot freed in the first segment is the next one taken, not a new one.
        let slot = slab.release(7);
        slab.get_or_insert_with(7, || Pending::new(1, 1, 8));
        assert_eq!((slab.index[7], slab.len as usize), (slot, keys));
    }
}

//! The hybrid exchange's plan: per (source vertex, block, destination worker) unit, either
//! SwitchGNN's multicast (the source's feature goes up once into the block and is added, one
//! pass each, into its neighbours there) or pre-aggregation (it is folded into its own worker's
//! partial sum for each of those neighbours).
//!
//! What the search minimises is the chip model's serial estimate (the busiest host's time plus
//! the switch's: passes, recirculation, lane updates; `switchgnn_chip::Bound::serial_seconds`)
//! of each block alone, as `switchgnn_chip::Load::of_block` counts it (its own barriers), summed
//! over the blocks: blocks run one after another, so each pays its own switch time out of its
//! own recirculation budget, and a busy host in one block does not hide another block's. With
//! one block that is the serial estimate of the whole plan. A source goes up once into each
//! block it multicasts into and a partial sum belongs to its destination's block, so no move in
//! one block changes another's loads: each block is searched alone. The search's own figure is
//! the chip model's for the plan it builds, to the last bit (a test checks it).
//!
//! Per block the search runs from both ends and keeps the lower estimate, so the plan is never
//! above pure reduce or pure multicast:
//! - From pure pre-aggregation, moves to multicast. Only the busiest host's load can lower the
//!   estimate, and a move helps that host only where the source is the last pre-aggregated one
//!   of some partial sum (the partial then disappears) or already goes up into the block. So it
//!   takes, on the busiest host, first single units (most partial sums removed per row first),
//!   then whole partial sums (every source still folded into one, fewest first). A move that
//!   does not lower the estimate but leaves the busiest host no busier is kept for a while:
//!   other hosts may be as busy, and their moves together may lower it; if none does, they are
//!   taken back.
//! - From pure multicast, moves units back to partial sums while the estimate falls, those that
//!   add the fewest partial sums per multicast row they save first (a unit whose destinations'
//!   partials exist already adds none).
//!
//! On a chip with little recirculation bandwidth the first end wins and few units move; with
//! free recirculation or many looped ports, on graphs where one upload serves several partial
//! sums, the second does and most units are multicast. On small random graphs (at most 14
//! units) the result is within 1.01x of the best of every subset (a test).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rayon::prelude::*;

use switchgnn_chip::{Chip, ChipChoice, HostCost, HostFraming, PASS_HEADER};
use switchgnn_dataplane::plan::{ExchangePlan, Mode, Multicast, Partials, PlanBlock, PlanError};
use switchgnn_dataplane::switch::{readout_passes, readout_passes_at, LANES_READ_PER_PAIR_PASS};
use switchgnn_dataplane::table::BlockTable;
use switchgnn_dataplane::wire::{FRAME_OVERHEAD, HEADER_LEN, MAX_LANES};
use switchgnn_datasets::Graph;
use switchgnn_partition::{Assignment, Plan, PlannedOn};

/// The chip and host costs `plan`'s exchange choice was made for (every process of a job
/// rebuilds a hybrid plan for them), or the defaults: the smallest real chip that hosts the
/// workers at 100 Gb/s, 20 ns per packet.
pub fn planned_on(plan: &Plan) -> Result<(Chip, HostCost), PlanError> {
    let default = PlannedOn {
        preset: String::new(),
        loopback_ports: 0,
        recirculation_ports: None,
        link_gbps: 100.0,
        host_packet_ns: 20.0,
        host_mtu: None,
        host_ack_every: None,
    };
    let on = plan
        .manifest
        .exchange
        .as_ref()
        .and_then(|c| c.planned_on.clone())
        .unwrap_or(default);
    let bad = |e: String| PlanError::NoChoice(format!("the plan's chip: {e}"));
    let preset = if on.preset.is_empty() {
        None
    } else {
        Some(
            on.preset
                .parse()
                .map_err(|e: switchgnn_chip::ChipError| bad(e.to_string()))?,
        )
    };
    let choice = ChipChoice {
        preset,
        loopback_ports: on.loopback_ports,
        recirculation_ports: on.recirculation_ports,
        // The plan records the ports its choice was made with.
        spare_loopback: false,
    };
    let chip = choice
        .resolve(plan.manifest.spec.workers, on.link_gbps)
        .map_err(|e| bad(e.to_string()))?;
    let cost = HostCost {
        link_gbps: on.link_gbps,
        per_packet_ns: on.host_packet_ns,
        frame_overhead: FRAME_OVERHEAD,
        framing: HostFraming {
            mtu: on.host_mtu.unwrap_or(HostFraming::default().mtu),
            ack_every: on
                .host_ack_every
                .unwrap_or(HostFraming::default().ack_every),
        },
    };
    Ok((chip, cost))
}

/// Consecutive rejected moves after which one phase of a search stops.
const PATIENCE: usize = 64;

/// Candidate moves by score, then lowest index.
type MoveHeap = BinaryHeap<(u64, Reverse<u32>)>;

/// One (source, block, destination worker) unit of choice: the source's neighbours in that
/// block on that worker are `neighbours[start..end]`. `key` is `block · workers + worker`;
/// `group` numbers the (source, block) pairs: a source goes up once per block it multicasts
/// into, whatever the workers.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    u: u32,
    key: u32,
    start: u32,
    end: u32,
    group: u32,
}

impl Candidate {
    fn rows(&self) -> u32 {
        self.end - self.start
    }
}

/// One block's loads, as `switchgnn_chip::Load::of_block` counts them for the plan, and the
/// serial estimate of `switchgnn_chip::Bound` on them. Every figure is a whole number (well
/// below 2^53), so adding and taking back a move leaves it exactly as it was.
#[derive(Debug, Clone)]
struct BlockModel {
    sent_bytes: Vec<f64>,
    received_bytes: Vec<f64>,
    sent_packets: Vec<f64>,
    received_packets: Vec<f64>,
    passes: f64,
    recirculated_bytes: f64,
    lane_updates: f64,
}

fn time(x: f64, rate: f64) -> f64 {
    if rate.is_infinite() {
        0.0
    } else {
        x / rate
    }
}

impl BlockModel {
    fn new(workers: usize) -> BlockModel {
        BlockModel {
            sent_bytes: vec![0.0; workers],
            received_bytes: vec![0.0; workers],
            sent_packets: vec![0.0; workers],
            received_packets: vec![0.0; workers],
            passes: 0.0,
            recirculated_bytes: 0.0,
            lane_updates: 0.0,
        }
    }

    fn host(&self, cost: &HostCost, w: usize) -> f64 {
        let bytes = self.sent_bytes[w].max(self.received_bytes[w]);
        let packets = self.sent_packets[w].max(self.received_packets[w]);
        let link = cost.link_gbps * 1e9 / 8.0;
        (bytes / link).max(packets * cost.per_packet_ns * 1e-9)
    }

    fn switch(&self, chip: &Chip) -> f64 {
        time(self.lane_updates, chip.lane_rate())
            .max(time(self.passes, chip.pass_rate()))
            .max(time(self.recirculated_bytes, chip.loopback_bytes_per_s()))
    }

    /// The busiest host and the block's serial estimate (its busiest host's time plus its
    /// switch's).
    fn estimate(&self, chip: &Chip, cost: &HostCost) -> (usize, f64) {
        let (busiest, host) = (0..self.sent_bytes.len())
            .map(|w| (w, self.host(cost, w)))
            .fold((0, 0.0), |a, b| if b.1 > a.1 { b } else { a });
        (busiest, host + self.switch(chip))
    }

    fn apply(&mut self, m: &Move, sign: f64) {
        self.sent_packets[m.w] += sign * m.packets;
        self.received_packets[m.w] += sign * m.packets;
        self.sent_bytes[m.w] += sign * m.bytes;
        self.received_bytes[m.w] += sign * m.ack_bytes;
        self.passes += sign * m.passes;
        self.recirculated_bytes += sign * m.recirculated;
        self.lane_updates += sign * m.lanes;
    }
}

/// What moving one candidate from partial sums to multicast changes: host `w`'s packets and
/// bytes each way (uplink packets and their acknowledgements), and the switch's passes,
/// recirculated bytes and lane updates. Moving it back takes the same away.
struct Move {
    w: usize,
    packets: f64,
    bytes: f64,
    ack_bytes: f64,
    passes: f64,
    recirculated: f64,
    lanes: f64,
}

/// The figures of one exchanged row at the plan's width.
#[derive(Debug, Clone, Copy)]
struct Row {
    chunks: f64,
    width: f64,
    /// Header and frame of one packet.
    header: f64,
    /// Every chunk's packet, frames included.
    feature_bytes: f64,
    /// What one more aggregator pass of every chunk recirculates.
    recirculated_per_pass: f64,
    /// The readout passes of one finished sum, and what they recirculate.
    readouts: f64,
    readout_bytes: f64,
}

impl Row {
    fn new(width: usize, chip: &Chip, cost: &HostCost) -> Row {
        let chunks = width.div_ceil(MAX_LANES);
        let header = HEADER_LEN as u64 + cost.frame_overhead;
        let (mut readouts, mut readout_bytes) = (0u64, 0u64);
        for c in 0..chunks {
            let lanes = (width - c * MAX_LANES).min(MAX_LANES);
            // A sum is completed in place by its last partial (as `Load` counts it for every
            // row of a reduce block).
            let reads = if chip.reads_pairs {
                readout_passes_at(lanes, true, LANES_READ_PER_PAIR_PASS)
            } else {
                readout_passes(lanes, true)
            };
            readouts += reads;
            readout_bytes += reads * (header + 4 * lanes as u64 + PASS_HEADER);
        }
        let feature_bytes = chunks as u64 * header + 4 * width as u64;
        Row {
            chunks: chunks as f64,
            width: width as f64,
            header: header as f64,
            feature_bytes: feature_bytes as f64,
            recirculated_per_pass: (feature_bytes + chunks as u64 * PASS_HEADER) as f64,
            readouts: readouts as f64,
            readout_bytes: readout_bytes as f64,
        }
    }

    /// Moving a candidate of `rows` rows from `w` to multicast, where `removed` of its
    /// destinations' partial sums disappear and `upload` says whether its source goes up into
    /// this block for the first time.
    fn move_of(&self, w: usize, rows: u32, removed: u32, upload: bool) -> Move {
        let (d, r) = (f64::from(rows), f64::from(removed));
        let new = if upload { 1.0 } else { 0.0 };
        Move {
            w,
            packets: self.chunks * (new - r),
            bytes: self.feature_bytes * (new - r),
            ack_bytes: self.chunks * self.header * (new - r),
            passes: self.chunks * (d - r),
            recirculated: (d - new) * self.recirculated_per_pass,
            lanes: self.width * (d - r),
        }
    }
}

/// One block: its candidates, its partial sums (a range of [`Pairs`]) and its loads with every
/// pair pre-aggregated.
struct Block {
    candidates: Vec<u32>,
    pairs: std::ops::Range<usize>,
    reduce: BlockModel,
}

/// What the search needs that no choice changes.
struct Problem<'a> {
    graph: &'a Graph,
    part: &'a (dyn Fn(u32) -> u16 + Sync),
    workers: usize,
    chip: &'a Chip,
    cost: &'a HostCost,
    row: Row,
    /// Per destination, its block (`u32::MAX`: not a destination).
    block_of: Vec<u32>,
    blocks: Vec<Block>,
    pairs: Pairs,
    /// Per candidate row (`start..end` of a candidate), the partial sum that row's
    /// destination takes from the source's worker.
    row_pair: Vec<u32>,
    candidates: Vec<Candidate>,
    /// Source `u`'s candidates are `candidates[first_candidate[u]..first_candidate[u + 1]]`,
    /// by key.
    first_candidate: Vec<u32>,
}

/// One search's choice: which candidates are multicast, how many pre-aggregated sources each
/// partial sum still has, and how many rows each (source, block) multicasts to.
#[derive(Clone)]
struct State {
    chosen: Vec<bool>,
    count: Vec<u32>,
    rows: Vec<u32>,
}

impl Problem<'_> {
    fn key(&self, v: u32) -> u32 {
        self.block_of[v as usize] * self.workers as u32 + u32::from((self.part)(v))
    }

    /// The candidate of source `u` whose destinations have key `key`.
    fn candidate_of(&self, u: u32, key: u32) -> Option<usize> {
        let (a, z) = (
            self.first_candidate[u as usize] as usize,
            self.first_candidate[u as usize + 1] as usize,
        );
        self.candidates[a..z]
            .binary_search_by_key(&key, |c| c.key)
            .ok()
            .map(|i| a + i)
    }

    /// The partial sums among `c`'s destinations with exactly `n` pre-aggregated sources.
    fn partials_at(&self, state: &State, c: &Candidate, n: u32) -> u32 {
        self.pairs_of(c)
            .iter()
            .filter(|&&p| state.count[p as usize] == n)
            .count() as u32
    }

    /// The partial sums `c`'s source is folded into when it is not multicast, row by row.
    fn pairs_of(&self, c: &Candidate) -> &[u32] {
        &self.row_pair[c.start as usize..c.end as usize]
    }

    /// Move candidate `i` to the other way (multicast to partial sums or back), in `state` and
    /// `model`. Flipping it again restores both exactly.
    fn flip(&self, state: &mut State, model: &mut BlockModel, i: usize) {
        let c = self.candidates[i];
        let w = (self.part)(c.u);
        let d = c.rows();
        let g = c.group as usize;
        if state.chosen[i] {
            // Back to partial sums: the partials it is alone in come back, and its source no
            // longer goes up into this block if these were its only rows there.
            let m = self.row.move_of(
                usize::from(w),
                d,
                self.partials_at(state, &c, 0),
                state.rows[g] == d,
            );
            model.apply(&m, -1.0);
            state.rows[g] -= d;
            for &p in self.pairs_of(&c) {
                state.count[p as usize] += 1;
            }
        } else {
            let m = self.row.move_of(
                usize::from(w),
                d,
                self.partials_at(state, &c, 1),
                state.rows[g] == 0,
            );
            model.apply(&m, 1.0);
            state.rows[g] += d;
            for &p in self.pairs_of(&c) {
                state.count[p as usize] -= 1;
            }
        }
        state.chosen[i] = !state.chosen[i];
    }

    /// From block `b` pre-aggregated: first single moves to multicast on the busiest host, the
    /// candidates that remove most partial sums per row first; then whole partial sums (every
    /// source still folded into one moves at once), fewest sources first. Only moves that lower
    /// the estimate are kept. Returns the block's estimate.
    fn reduce_end(&self, state: &mut State, b: usize) -> f64 {
        let block = &self.blocks[b];
        let (chip, cost) = (self.chip, self.cost);
        let mut model = block.reduce.clone();
        let score = |removed: u32, d: u32| u64::from(removed) * 1_000_000 / u64::from(d.max(1));
        let mut by_host: Vec<Vec<u32>> = vec![Vec::new(); self.workers];
        for &i in &block.candidates {
            by_host[usize::from((self.part)(self.candidates[i as usize].u))].push(i);
        }
        // A host's heap is built when it is first the busiest (from the counts then): most
        // hosts never are.
        let mut heaps: Vec<Option<MoveHeap>> = vec![None; self.workers];
        let (_, mut best) = model.estimate(chip, cost);
        // Moves made since the best state so far.
        let mut pending: Vec<usize> = Vec::new();
        let mut rejected = 0;
        while rejected < PATIENCE {
            let (h, _) = model.estimate(chip, cost);
            let heap = heaps[h].get_or_insert_with(|| {
                by_host[h]
                    .iter()
                    .filter_map(|&i| {
                        let c = &self.candidates[i as usize];
                        let r = self.partials_at(state, c, 1);
                        (r > 0).then(|| (score(r, c.rows()), Reverse(i)))
                    })
                    .collect()
            });
            let Some((s, Reverse(i))) = heap.pop() else {
                break;
            };
            let i = i as usize;
            if state.chosen[i] {
                continue;
            }
            let c = self.candidates[i];
            let r = self.partials_at(state, &c, 1);
            if r == 0 {
                continue;
            }
            let now = score(r, c.rows());
            if now < s {
                // Stale: earlier moves took some of its partial sums; weigh it again.
                heap.push((now, Reverse(i as u32)));
                continue;
            }
            let before = model.host(cost, h);
            self.flip(state, &mut model, i);
            let (_, estimate) = model.estimate(chip, cost);
            if estimate < best {
                best = estimate;
                rejected = 0;
                pending.clear();
            } else if model.host(cost, h) <= before {
                // Not better yet, but the busiest host is less busy: other hosts may be as
                // busy, and their moves together may be. Kept until the estimate falls or the
                // search gives up.
                pending.push(i);
                rejected += 1;
            } else {
                self.flip(state, &mut model, i);
                rejected += 1;
            }
        }
        for &i in pending.iter().rev() {
            self.flip(state, &mut model, i);
        }
        pending.clear();

        // Whole partial sums: a partial disappears only once every source still folded into it
        // is multicast, which single moves never reach where partials have several sources.
        let mut dissolve: Vec<BinaryHeap<(Reverse<u32>, Reverse<u32>)>> =
            vec![BinaryHeap::new(); self.workers];
        for p in block.pairs.clone() {
            let count = state.count[p];
            if count > 0 {
                dissolve[usize::from(self.pairs.workers[p])]
                    .push((Reverse(count), Reverse(p as u32)));
            }
        }
        let mut rejected = 0;
        while rejected < PATIENCE {
            let (h, _) = model.estimate(chip, cost);
            let Some((Reverse(count), Reverse(p))) = dissolve[h].pop() else {
                break;
            };
            let p = p as usize;
            let now = state.count[p];
            if now == 0 {
                continue;
            }
            if now < count {
                dissolve[h].push((Reverse(now), Reverse(p as u32)));
                continue;
            }
            let (v, w) = (self.pairs.destination[p], self.pairs.workers[p]);
            let key = self.key(v);
            let before = model.host(cost, h);
            let start = pending.len();
            for &u in self.graph.neighbors(v) {
                if (self.part)(u) != w {
                    continue;
                }
                let i = self
                    .candidate_of(u, key)
                    .expect("u neighbours v in v's block");
                if !state.chosen[i] {
                    self.flip(state, &mut model, i);
                    pending.push(i);
                }
            }
            let (_, estimate) = model.estimate(chip, cost);
            rejected += 1;
            if estimate < best {
                best = estimate;
                rejected = 0;
                pending.clear();
            } else if model.host(cost, h) >= before {
                for &i in pending[start..].iter().rev() {
                    self.flip(state, &mut model, i);
                }
                pending.truncate(start);
            }
        }
        for &i in pending.iter().rev() {
            self.flip(state, &mut model, i);
        }
        best
    }

    /// From block `b` all multicast: candidates go back to partial sums, those that save most
    /// rows of multicast per partial sum they add first (one that folds only into partials
    /// that exist already adds none), while the estimate falls. Returns the block's estimate.
    fn multicast_end(&self, state: &mut State, b: usize) -> f64 {
        let block = &self.blocks[b];
        let (chip, cost) = (self.chip, self.cost);
        let mut model = block.reduce.clone();
        for &i in &block.candidates {
            self.flip(state, &mut model, i as usize);
        }
        let score = |added: u32, d: u32| u64::from(d) * 1_000_000 / u64::from(added + 1);
        let mut heap: MoveHeap = block
            .candidates
            .iter()
            .map(|&i| {
                // No partial sum is left: each row would make one.
                let d = self.candidates[i as usize].rows();
                (score(d, d), Reverse(i))
            })
            .collect();
        let (_, mut best) = model.estimate(chip, cost);
        let mut rejected = 0;
        while rejected < PATIENCE {
            let Some((s, Reverse(i))) = heap.pop() else {
                break;
            };
            let i = i as usize;
            if !state.chosen[i] {
                continue;
            }
            let c = self.candidates[i];
            let now = score(self.partials_at(state, &c, 0), c.rows());
            if now < s {
                heap.push((now, Reverse(i as u32)));
                continue;
            }
            // A score only rises as moves make partial sums (it may have risen since it was
            // weighed: it is tried now, not weighed again).
            self.flip(state, &mut model, i);
            let (_, estimate) = model.estimate(chip, cost);
            if estimate < best {
                best = estimate;
                rejected = 0;
            } else {
                self.flip(state, &mut model, i);
                rejected += 1;
            }
        }
        best
    }
}

/// The search's choice, its estimate and the two ends' (each the sum over blocks of the
/// blocks' serial estimates).
struct Selection<'a> {
    problem: Problem<'a>,
    chosen: Vec<bool>,
    /// Per source, whether it multicasts anywhere: most do not, and are answered at once.
    multicasts: Vec<bool>,
    estimate: f64,
    from_reduce: f64,
    from_multicast: f64,
}

impl Selection<'_> {
    /// Whether source `u`'s feature is multicast to destination `v`.
    fn multicast(&self, u: u32, v: u32) -> bool {
        let p = &self.problem;
        self.multicasts[u as usize]
            && p.block_of[v as usize] != u32::MAX
            && p.candidate_of(u, p.key(v)).is_some_and(|i| self.chosen[i])
    }
}

/// The destinations (vertices with a remote neighbour), ascending, and how many of them one
/// block holds: as many as `aggregators` aggregators of 64 lanes take at `width`.
fn block_cut(
    graph: &Graph,
    part: &(impl Fn(u32) -> u16 + Sync),
    width: usize,
    aggregators: usize,
) -> (Vec<u32>, usize) {
    let per_block = (aggregators / width.div_ceil(MAX_LANES).max(1)).max(1);
    let destinations: Vec<u32> = (0..graph.num_vertices() as u32)
        .into_par_iter()
        .filter(|&v| graph.neighbors(v).iter().any(|&u| part(u) != part(v)))
        .collect();
    (destinations, per_block)
}

/// Choose, block by block, each candidate's way for `chip` and hosts costing `cost`: from both
/// ends (all pre-aggregated, all multicast), keeping per block the end with the lower estimate.
fn search<'a>(
    graph: &'a Graph,
    part: &'a (dyn Fn(u32) -> u16 + Sync),
    workers: usize,
    width: usize,
    aggregators: usize,
    chip: &'a Chip,
    cost: &'a HostCost,
) -> Result<Selection<'a>, PlanError> {
    let n = graph.num_vertices();
    let (destinations, per_block) = block_cut(graph, &part, width, aggregators);
    let blocks = destinations.len().div_ceil(per_block);
    let keys = blocks as u64 * workers as u64;
    if keys > u64::from(u32::MAX) {
        return Err(PlanError::TooLarge {
            what: "blocks times workers",
            value: keys,
            limit: u64::from(u32::MAX),
        });
    }
    let mut block_of = vec![u32::MAX; n];
    for (i, &v) in destinations.iter().enumerate() {
        block_of[v as usize] = (i / per_block) as u32;
    }
    let key = |u: u32, y: u32| -> Option<u32> {
        let w = part(y);
        (w != part(u)).then(|| block_of[y as usize] * workers as u32 + u32::from(w))
    };
    // The partial sums and the candidates need nothing of each other: built side by side.
    let (pairs, (neighbours, candidates, first_candidate)) = rayon::join(
        || Pairs::of(graph, &part, &mut WorkerGroups::new(workers)),
        || candidates_of(graph, &key, workers, &mut WorkerGroups::new(keys as usize)),
    );
    let pair = |v: u32, w: u16| -> u32 {
        let (a, z) = (
            pairs.first[v as usize] as usize,
            pairs.first[v as usize + 1] as usize,
        );
        let i = pairs.workers[a..z]
            .binary_search(&w)
            .expect("a remote neighbour's worker contributes");
        (a + i) as u32
    };
    let row_pair: Vec<u32> = candidates
        .par_iter()
        .flat_map_iter(|c| {
            let w = part(c.u);
            neighbours[c.start as usize..c.end as usize]
                .iter()
                .map(move |&v| pair(v, w))
        })
        .collect();
    let row = Row::new(width, chip, cost);
    let mut in_block: Vec<Vec<u32>> = vec![Vec::new(); blocks];
    for (i, c) in candidates.iter().enumerate() {
        in_block[c.key as usize / workers].push(i as u32);
    }
    let groups = candidates.last().map_or(0, |c| c.group as usize + 1);
    let blocks: Vec<Block> = in_block
        .into_par_iter()
        .zip(destinations.par_chunks(per_block))
        .map(|(candidates, chunk)| {
            let last = *chunk.last().expect("a block has a destination");
            let range =
                pairs.first[chunk[0] as usize] as usize..pairs.first[last as usize + 1] as usize;
            let mut m = BlockModel::new(workers);
            // Each worker's join and done, and the block's go and the final go it receives.
            for w in 0..workers {
                m.sent_packets[w] += 2.0;
                m.sent_bytes[w] += 2.0 * row.header;
                m.received_packets[w] += 2.0;
                m.received_bytes[w] += 2.0 * row.header;
                m.passes += 2.0;
            }
            // Each destination's sum read out and sent down to its owner.
            for &v in chunk {
                let owner = usize::from(part(v));
                m.passes += row.readouts;
                m.recirculated_bytes += row.readout_bytes;
                m.received_packets[owner] += row.chunks;
                m.received_bytes[owner] += row.feature_bytes;
            }
            // Every partial sum: each chunk up in one packet (one pass), acknowledged.
            for p in range.clone() {
                let w = usize::from(pairs.workers[p]);
                m.sent_packets[w] += row.chunks;
                m.sent_bytes[w] += row.feature_bytes;
                m.received_packets[w] += row.chunks;
                m.received_bytes[w] += row.chunks * row.header;
                m.passes += row.chunks;
                m.lane_updates += row.width;
            }
            Block {
                candidates,
                pairs: range,
                reduce: m,
            }
        })
        .collect();
    let problem = Problem {
        graph,
        part,
        workers,
        chip,
        cost,
        row,
        block_of,
        blocks,
        pairs,
        row_pair,
        candidates,
        first_candidate,
    };
    let p = &problem;
    let fresh = State {
        chosen: vec![false; p.candidates.len()],
        count: p.pairs.count.clone(),
        rows: vec![0; groups],
    };
    // The two ends need nothing of each other: searched side by side, each block in turn.
    let search = |end: &dyn Fn(&mut State, usize) -> f64| {
        let mut state = fresh.clone();
        let at: Vec<f64> = (0..p.blocks.len()).map(|b| end(&mut state, b)).collect();
        (state, at)
    };
    let ((low, low_at), (high, high_at)) = rayon::join(
        || search(&|state, b| p.reduce_end(state, b)),
        || search(&|state, b| p.multicast_end(state, b)),
    );
    drop(fresh);
    // Per block, the better end (a tie to the one from partial sums).
    let mut chosen = low.chosen;
    let mut estimate = 0.0;
    for (b, block) in p.blocks.iter().enumerate() {
        if high_at[b] < low_at[b] {
            for &i in &block.candidates {
                chosen[i as usize] = high.chosen[i as usize];
            }
        }
        estimate += low_at[b].min(high_at[b]);
    }
    let mut multicasts = vec![false; n];
    for (i, c) in p.candidates.iter().enumerate() {
        multicasts[c.u as usize] |= chosen[i];
    }
    Ok(Selection {
        chosen,
        multicasts,
        estimate,
        from_reduce: low_at.iter().sum(),
        from_multicast: high_at.iter().sum(),
        problem,
    })
}

/// The hybrid exchange of `graph` under `assignment` at `width`, chosen for `chip` and hosts
/// costing `cost`; destinations cut, in id order, into blocks that fit `aggregators`.
pub fn hybrid_plan(
    graph: &Graph,
    assignment: &Assignment,
    width: usize,
    aggregators: usize,
    chip: &Chip,
    cost: &HostCost,
) -> Result<ExchangePlan, PlanError> {
    let workers = workers_of(assignment)?;
    let part = |v: u32| assignment.part(v) as u16;
    let selection = search(graph, &part, workers, width, aggregators, chip, cost)?;
    tracing::debug!(
        estimate = selection.estimate,
        from_reduce = selection.from_reduce,
        from_multicast = selection.from_multicast,
        "hybrid: the serial estimate, summed over blocks"
    );
    mixed_plan(graph, assignment, width, aggregators, &|u, v| {
        selection.multicast(u, v)
    })
}

/// The workers of `assignment`, as many as a `u16` numbers.
fn workers_of(assignment: &Assignment) -> Result<usize, PlanError> {
    u16::try_from(assignment.num_parts())
        .map(usize::from)
        .map_err(|_| PlanError::TooLarge {
            what: "workers",
            value: u64::from(assignment.num_parts()),
            limit: u64::from(u16::MAX),
        })
}

/// The partial sums: per destination `v`, its contributing workers
/// (`workers[first[v]..first[v + 1]]`, ascending) and how many of their sources are still
/// pre-aggregated (`count`, at first all of them).
struct Pairs {
    first: Vec<u64>,
    workers: Vec<u16>,
    count: Vec<u32>,
    destination: Vec<u32>,
}

impl Pairs {
    fn of(graph: &Graph, part: &impl Fn(u32) -> u16, groups: &mut WorkerGroups) -> Pairs {
        let n = graph.num_vertices();
        let mut p = Pairs {
            first: vec![u64::MAX; n + 1],
            workers: Vec::new(),
            count: Vec::new(),
            destination: Vec::new(),
        };
        for v in 0..n as u32 {
            p.first[v as usize] = p.workers.len() as u64;
            let home = part(v);
            groups.count(graph.neighbors(v), &|y| {
                let w = part(y);
                (w != home).then_some(u32::from(w))
            });
            for &w in &groups.touched {
                p.workers.push(w as u16);
                p.count.push(groups.count[w as usize]);
                p.destination.push(v);
            }
        }
        p.first[n] = p.workers.len() as u64;
        p
    }
}

/// The candidates: each source with its remote neighbours grouped by `key(source, neighbour)`
/// (`block · workers + worker`, ascending), the neighbour lists they index, and where each
/// source's candidates start (one entry more than there are vertices).
fn candidates_of(
    graph: &Graph,
    key: &impl Fn(u32, u32) -> Option<u32>,
    workers: usize,
    groups: &mut WorkerGroups,
) -> (Vec<u32>, Vec<Candidate>, Vec<u32>) {
    let n = graph.num_vertices();
    let mut neighbours: Vec<u32> = Vec::new();
    let mut candidates: Vec<Candidate> = Vec::new();
    let mut first = Vec::with_capacity(n + 1);
    // The (source, block) pairs seen so far.
    let mut group = 0u32;
    for u in 0..n as u32 {
        first.push(candidates.len() as u32);
        groups.group(graph.neighbors(u), &|y| key(u, y), &mut neighbours);
        let mut block = None;
        for &(k, start, end) in &groups.ranges {
            let b = k as usize / workers;
            if block.is_some_and(|x| x != b) {
                group += 1;
            }
            block = Some(b);
            candidates.push(Candidate {
                u,
                key: k,
                start: start as u32,
                end: end as u32,
                group,
            });
        }
        if block.is_some() {
            group += 1;
        }
    }
    first.push(candidates.len() as u32);
    (neighbours, candidates, first)
}

/// One vertex's neighbours counted, or grouped, per key (a worker, or a block and a worker;
/// `None`: left out): a counting sort over the keys it touches (a stamp per key says whether
/// the current call has seen it). `touched` lists the keys in ascending order and `count[k]`
/// how many neighbours each has, valid for touched keys only; after [`WorkerGroups::group`],
/// `ranges` says where each key's neighbours went.
struct WorkerGroups {
    /// The call that last touched each key; calls are numbered from 1.
    stamp: Vec<u64>,
    call: u64,
    count: Vec<u32>,
    touched: Vec<u32>,
    ranges: Vec<(u32, usize, usize)>,
}

impl WorkerGroups {
    fn new(keys: usize) -> WorkerGroups {
        WorkerGroups {
            stamp: vec![0; keys],
            call: 0,
            count: vec![0; keys],
            touched: Vec::new(),
            ranges: Vec::new(),
        }
    }

    /// Count the `neighbours` per `key`.
    fn count(&mut self, neighbours: &[u32], key: &impl Fn(u32) -> Option<u32>) {
        self.touched.clear();
        self.call += 1;
        for &y in neighbours {
            let Some(k) = key(y) else {
                continue;
            };
            let i = k as usize;
            if self.stamp[i] != self.call {
                self.stamp[i] = self.call;
                self.count[i] = 0;
                self.touched.push(k);
            }
            self.count[i] += 1;
        }
        self.touched.sort_unstable();
    }

    /// Append the neighbours [`WorkerGroups::count`] counts to `out`, grouped by key in
    /// ascending order, each group in neighbour order.
    fn group(&mut self, neighbours: &[u32], key: &impl Fn(u32) -> Option<u32>, out: &mut Vec<u32>) {
        self.count(neighbours, key);
        let base = out.len();
        self.ranges.clear();
        let mut end = 0u32;
        for &k in &self.touched {
            let n = self.count[k as usize];
            self.ranges
                .push((k, base + end as usize, base + (end + n) as usize));
            // From here on, the next free place of the key's group.
            self.count[k as usize] = end;
            end += n;
        }
        out.resize(base + end as usize, 0);
        for &y in neighbours {
            if let Some(k) = key(y) {
                let next = &mut self.count[k as usize];
                out[base + *next as usize] = y;
                *next += 1;
            }
        }
    }
}

/// The pre-aggregated exchange of `graph` under `assignment`: every vertex with remote
/// neighbours is a destination, fed one partial sum by each worker holding some of them.
/// Destinations are cut, in id order, into blocks that fit `aggregators` aggregators of 32
/// lanes at `width`.
pub fn reduce_plan(
    graph: &Graph,
    assignment: &Assignment,
    width: usize,
    aggregators: usize,
) -> Result<ExchangePlan, PlanError> {
    // The hybrid exchange with no pair multicast.
    mixed_plan(graph, assignment, width, aggregators, &|_, _| false)
}

/// The reduce plan whose edges `multicast(u, v)` says are multicast (source `u`'s feature
/// added in the switch into destination `v`), the others folded into partial sums: every
/// vertex with remote neighbours is a destination, and destinations are cut, in id order, into
/// blocks that fit `aggregators`.
pub(crate) fn mixed_plan(
    graph: &Graph,
    assignment: &Assignment,
    width: usize,
    aggregators: usize,
    multicast: &(dyn Fn(u32, u32) -> bool + Sync),
) -> Result<ExchangePlan, PlanError> {
    let part = |v: u32| assignment.part(v) as u16;
    let (destinations, per_block) = block_cut(graph, &part, width, aggregators);
    // Blocks need nothing of each other: built in parallel, each thread with its own scratch.
    let workers = assignment.num_parts() as usize;
    let blocks = destinations
        .par_chunks(per_block)
        .map_init(
            || (WorkerGroups::new(workers), Vec::new()),
            |(groups, remote), chunk| mixed_block(graph, &part, multicast, chunk, groups, remote),
        )
        .collect::<Result<Vec<_>, _>>()?;
    let owner = assignment.parts().iter().map(|&p| p as u16).collect();
    ExchangePlan::new(Mode::Reduce, width, assignment.num_parts(), owner, blocks)
}

/// One block of [`mixed_plan`]: the destinations of `chunk`, in order.
fn mixed_block(
    graph: &Graph,
    part: &impl Fn(u32) -> u16,
    multicast: &(dyn Fn(u32, u32) -> bool + Sync),
    chunk: &[u32],
    groups: &mut WorkerGroups,
    remote: &mut Vec<u32>,
) -> Result<PlanBlock, PlanError> {
    let mut table = BlockTable {
        offsets: vec![0],
        ..BlockTable::default()
    };
    let mut partials = Partials {
        starts: vec![0],
        sources: Vec::new(),
    };
    // (sender, destination row) of every multicast edge into this block.
    let mut edges: Vec<(u32, u32)> = Vec::new();
    for (row, &v) in chunk.iter().enumerate() {
        let home = part(v);
        let adjacent = graph.neighbors(v);
        for &u in adjacent {
            if part(u) != home && multicast(u, v) {
                edges.push((u, row as u32));
            }
        }
        // The partial sums: the other remote neighbours, grouped by their worker.
        remote.clear();
        let folded = |u: u32| {
            let w = part(u);
            (w != home && !multicast(u, v)).then_some(u32::from(w))
        };
        groups.group(adjacent, &folded, remote);
        for &(w, start, end) in &groups.ranges {
            table.slots.push(w);
            partials.sources.extend_from_slice(&remote[start..end]);
            partials.starts.push(partials.sources.len() as u64);
        }
        table.vertices.push(v);
        table.workers.push(u32::from(home));
        table.expected.push(groups.ranges.len() as u32);
        table.offsets.push(table.slots.len() as u64);
    }
    edges.sort_unstable();
    let mut m = Multicast {
        offsets: vec![0],
        ..Multicast::default()
    };
    for (i, &(u, row)) in edges.iter().enumerate() {
        if i > 0 && edges[i - 1].0 != u {
            m.offsets.push(m.rows.len() as u64);
        }
        if i == 0 || edges[i - 1].0 != u {
            m.vertices.push(u);
        }
        m.rows.push(row);
        table.expected[row as usize] += 1;
    }
    if edges.is_empty() {
        m = Multicast::default();
    } else {
        m.offsets.push(m.rows.len() as u64);
    }
    let order = table.vertices.clone();
    PlanBlock::hybrid(table, &order, partials, m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use switchgnn_chip::{Bound, Load};
    use switchgnn_datasets::BuildOptions;

    fn cost() -> HostCost {
        HostCost {
            link_gbps: 100.0,
            per_packet_ns: 20.0,
            frame_overhead: FRAME_OVERHEAD,
            framing: HostFraming::default(),
        }
    }

    /// The chips the tests weigh: free recirculation, Tofino 1 and 2 with only their
    /// recirculation ports, and both with front-panel ports looped.
    fn chips() -> Vec<(&'static str, Chip)> {
        let looped = |name: &str, ports: u32| {
            Chip::preset(name)
                .unwrap()
                .with_loopback_ports(ports, cost().link_gbps)
                .unwrap()
        };
        vec![
            ("ideal", Chip::preset("ideal").unwrap()),
            ("tofino1-32", Chip::preset("tofino1-32").unwrap()),
            ("tofino1-32+24", looped("tofino1-32", 24)),
            ("tofino2", Chip::preset("tofino2").unwrap()),
            ("tofino2+96", looped("tofino2", 96)),
        ]
    }

    /// The serial estimate of `plan` as the chip model counts it, block by block (each block
    /// alone, with its own barriers), summed: what the search estimates.
    fn by_block(plan: &ExchangePlan, chip: &Chip) -> f64 {
        (0..plan.blocks.len())
            .map(|b| {
                Bound::of(chip, &Load::of_block(plan, b, FRAME_OVERHEAD), &cost()).serial_seconds
            })
            .sum()
    }

    /// A random graph of `n` vertices and `edges` edges on `workers` workers (seeded).
    fn random_case(n: u32, edges: usize, workers: u32, seed: u64) -> (Graph, Assignment) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let list: Vec<(u32, u32)> = (0..edges)
            .map(|_| (rng.random_range(0..n), rng.random_range(0..n)))
            .collect();
        let graph = Graph::from_edges(n as usize, &list, BuildOptions::default()).unwrap();
        let parts = (0..n).map(|_| rng.random_range(0..workers)).collect();
        (graph, Assignment::new(parts, workers).unwrap())
    }

    /// The units the search chooses among, as the plan's blocks cut them: (source, block,
    /// destination worker), found here from the edges, not from the search's own tables.
    fn units(graph: &Graph, a: &Assignment, width: usize, aggregators: usize) -> Vec<(u32, u32)> {
        let part = |v: u32| a.part(v) as u16;
        let (destinations, per_block) = block_cut(graph, &part, width, aggregators);
        let key = unit_key(&destinations, per_block, a);
        let mut units: Vec<(u32, u32)> = graph
            .edges()
            .flat_map(|(u, v)| [(u, v), (v, u)])
            .filter(|&(u, v)| part(u) != part(v))
            .map(|(u, v)| (u, key(v)))
            .collect();
        units.sort_unstable();
        units.dedup();
        units
    }

    /// A destination's block and worker as one number.
    fn unit_key<'a>(
        destinations: &'a [u32],
        per_block: usize,
        a: &'a Assignment,
    ) -> impl Fn(u32) -> u32 + 'a {
        move |v: u32| {
            let i = destinations.binary_search(&v).unwrap();
            (i / per_block) as u32 * a.num_parts() + a.part(v)
        }
    }

    fn search_of<'a>(
        graph: &'a Graph,
        part: &'a (dyn Fn(u32) -> u16 + Sync),
        a: &Assignment,
        width: usize,
        aggregators: usize,
        chip: &'a Chip,
        cost: &'a HostCost,
    ) -> Selection<'a> {
        search(
            graph,
            part,
            a.num_parts() as usize,
            width,
            aggregators,
            chip,
            cost,
        )
        .unwrap()
    }

    /// The search's own estimate is the chip model's serial estimate of the plan it produces,
    /// summed over the plan's blocks, to the last bit (every count is a whole number, added in
    /// the same order); with one block it is `Bound::serial_seconds` of the whole plan's load.
    /// Never above either end's.
    #[test]
    fn the_estimate_is_the_chip_models_block_by_block() {
        let cost = cost();
        for seed in 0..12 {
            let (graph, a) = random_case(60, 150 + 20 * seed as usize, 2 + seed as u32 % 4, seed);
            let part = |v: u32| a.part(v) as u16;
            for width in [40usize, 128] {
                // Every destination in one block, and blocks of about ten destinations.
                for aggregators in [usize::MAX, 10 * width.div_ceil(MAX_LANES)] {
                    for (name, chip) in chips() {
                        let s = search_of(&graph, &part, &a, width, aggregators, &chip, &cost);
                        let plan =
                            mixed_plan(&graph, &a, width, aggregators, &|u, v| s.multicast(u, v))
                                .unwrap();
                        let what = format!(
                            "seed {seed}, width {width}, {name}, {} blocks",
                            plan.blocks.len()
                        );
                        assert_eq!(s.estimate, by_block(&plan, &chip), "{what}");
                        if aggregators == usize::MAX {
                            assert_eq!(plan.blocks.len(), 1);
                            let whole = Bound::of(&chip, &Load::of(&plan, FRAME_OVERHEAD), &cost);
                            assert_eq!(s.estimate, whole.serial_seconds, "{what}");
                        } else {
                            assert!(plan.blocks.len() > 2, "{what}");
                        }
                        let end = |all: bool| {
                            let p =
                                mixed_plan(&graph, &a, width, aggregators, &|_, _| all).unwrap();
                            by_block(&p, &chip)
                        };
                        assert_eq!(s.from_reduce.min(end(false)), s.from_reduce, "{what}");
                        assert_eq!(s.from_multicast.min(end(true)), s.from_multicast, "{what}");
                        assert!(s.estimate <= s.from_reduce.min(s.from_multicast), "{what}");
                    }
                }
            }
        }
    }

    /// On a dense graph (mean degree about 30, 4 workers) one upload serves many partial sums:
    /// with free recirculation, or a Tofino 2 with 96 looped ports, the search multicasts most
    /// units; on a Tofino 1 with only its two recirculation ports it stays near reduce.
    #[test]
    fn dense_graphs_multicast_where_recirculation_is_cheap() {
        let cost = cost();
        let (graph, a) = random_case(200, 3000, 4, 7);
        let part = |v: u32| a.part(v) as u16;
        for (name, chip) in chips() {
            let s = search_of(&graph, &part, &a, 128, usize::MAX, &chip, &cost);
            let units = s.chosen.len();
            let moved = s.chosen.iter().filter(|&&x| x).count();
            eprintln!(
                "{name}: {moved} of {units} units multicast; estimate {:.4e} s (from reduce \
                 {:.4e}, from multicast {:.4e})",
                s.estimate, s.from_reduce, s.from_multicast
            );
            match name {
                "ideal" | "tofino2+96" => assert!(moved * 10 > units * 9, "{name}: {moved}"),
                "tofino1-32" => assert!(moved * 20 <= units, "{name}: {moved}"),
                _ => {}
            }
        }
    }

    /// How far above the best choice of all the search may land.
    const WITHIN: f64 = 1.05;

    /// On small random graphs (2–4 workers, at most 14 units of choice, one block or several),
    /// every subset of the units is weighed by the chip model on the plan it makes: the search
    /// lands within [`WITHIN`] of the best of them on every chip. With free recirculation or
    /// many looped ports it multicasts most units; on a Tofino 1 with only its recirculation
    /// ports, few.
    #[test]
    fn the_search_is_near_the_exhaustive_optimum() {
        let cost = cost();
        let (mut cases, mut seed) = (0, 0u64);
        // Per chip: units multicast by the search and by the best subset, and units in all.
        let mut moved = vec![(0usize, 0usize, 0usize); chips().len()];
        let mut worst = (1.0f64, String::new());
        let mut over: Vec<String> = Vec::new();
        while cases < 60 {
            seed += 1;
            let workers = 2 + (seed % 3) as u32;
            let (graph, a) = random_case(9, 7 + (seed % 5) as usize, workers, 1000 + seed);
            let width: usize = if seed % 2 == 0 { 128 } else { 40 };
            // One block, or blocks of three destinations.
            let aggregators = if seed % 3 == 0 {
                3 * width.div_ceil(MAX_LANES)
            } else {
                usize::MAX
            };
            let all = units(&graph, &a, width, aggregators);
            if all.len() < 6 || all.len() > 14 {
                continue;
            }
            cases += 1;
            let part = |v: u32| a.part(v) as u16;
            let (destinations, per_block) = block_cut(&graph, &part, width, aggregators);
            let key = unit_key(&destinations, per_block, &a);
            // Every subset's plan, counted block by block (the counts do not depend on the chip).
            let loads: Vec<Vec<Load>> = (0..1u32 << all.len())
                .map(|mask| {
                    let multicast = |u: u32, v: u32| {
                        let i = all.binary_search(&(u, key(v))).unwrap();
                        mask >> i & 1 == 1
                    };
                    let plan = mixed_plan(&graph, &a, width, aggregators, &multicast).unwrap();
                    (0..plan.blocks.len())
                        .map(|b| Load::of_block(&plan, b, FRAME_OVERHEAD))
                        .collect()
                })
                .collect();
            for (c, (name, chip)) in chips().into_iter().enumerate() {
                let s = search_of(&graph, &part, &a, width, aggregators, &chip, &cost);
                let chosen = all
                    .iter()
                    .filter(|&&(u, k)| {
                        let remote = |&v: &u32| part(v) != part(u) && key(v) == k;
                        let v = graph.neighbors(u).iter().copied().find(remote).unwrap();
                        s.multicast(u, v)
                    })
                    .count();
                let (mut best, mut best_mask) = (f64::INFINITY, 0u32);
                for (mask, blocks) in loads.iter().enumerate() {
                    let e: f64 = blocks
                        .iter()
                        .map(|l| Bound::of(&chip, l, &cost).serial_seconds)
                        .sum();
                    if e < best {
                        (best, best_mask) = (e, mask as u32);
                    }
                }
                let what = format!(
                    "seed {seed}: {} units, {workers} workers, width {width}, {name}: search \
                     {:.4e} s ({chosen} multicast), best {best:.4e} s ({} multicast)",
                    all.len(),
                    s.estimate,
                    best_mask.count_ones()
                );
                let ratio = s.estimate / best;
                if ratio > worst.0 {
                    worst = (ratio, what.clone());
                }
                if ratio > WITHIN {
                    over.push(format!("{ratio:.4}x: {what}"));
                }
                moved[c].0 += chosen;
                moved[c].1 += best_mask.count_ones() as usize;
                moved[c].2 += all.len();
            }
        }
        eprintln!("worst: {:.4}x ({})", worst.0, worst.1);
        assert!(
            over.is_empty(),
            "above {WITHIN}x the best:\n{}",
            over.join("\n")
        );
        for (c, (name, _)) in chips().into_iter().enumerate() {
            let (chosen, best, all) = moved[c];
            eprintln!(
                "{name}: the search multicasts {chosen} of {all} units, the best subsets {best}"
            );
        }
        // These graphs are sparse (a source rarely feeds several partial sums), so even the best
        // subsets multicast few units on the ideal chip; the dense test checks "most". Here: a
        // Tofino 1 without looped ports stays near reduce, and cheaper recirculation never
        // multicasts fewer units.
        let count = |name: &str| moved[chips().iter().position(|c| c.0 == name).unwrap()].0;
        let all = moved[0].2;
        assert!(count("tofino1-32") * 10 <= all, "{moved:?}");
        assert!(count("ideal") >= count("tofino1-32") && count("tofino2+96") >= count("tofino2"));
    }

    /// The counting sort groups exactly what sorting (worker, neighbour) pairs would, in the
    /// same order, whatever order the neighbours come in; one call's stamps never leak into
    /// the next one's counts, also for the same vertex.
    #[test]
    fn worker_groups_match_a_sort() {
        let part = |v: u32| (v * 7 % 5) as u16;
        let keep = |v: u32| v % 11 != 3;
        let mut groups = WorkerGroups::new(5);
        for (x, len) in [0u32, 1, 2, 9, 40, 3, 40].into_iter().enumerate() {
            let x = x as u32;
            let neighbours: Vec<u32> = (0..len).map(|i| (i * 37 + x * 13) % 97).collect();
            let home = part(x);
            let mut want: Vec<(u16, u32)> = neighbours
                .iter()
                .map(|&v| (part(v), v))
                .filter(|&(w, v)| w != home && keep(v))
                .collect();
            want.sort_by_key(|&(w, _)| w);
            let mut out = vec![u32::MAX];
            let key = |v: u32| (part(v) != home && keep(v)).then_some(u32::from(part(v)));
            groups.group(&neighbours, &key, &mut out);
            let got: Vec<(u16, u32)> = groups
                .ranges
                .iter()
                .flat_map(|&(w, a, z)| out[a..z].iter().map(move |&v| (w as u16, v)))
                .collect();
            assert_eq!(got, want, "vertex {x}");
            assert_eq!(out[0], u32::MAX, "what was in `out` stays");
            assert_eq!(out.len(), 1 + want.len());
            // Counting the same neighbours again (a new call) gives the same sizes.
            groups.count(&neighbours, &key);
            let counts: Vec<u32> = groups
                .touched
                .iter()
                .map(|&w| groups.count[w as usize])
                .collect();
            let sizes: Vec<u32> = groups
                .ranges
                .iter()
                .map(|&(_, a, z)| (z - a) as u32)
                .collect();
            assert_eq!(counts, sizes);
        }
    }
}

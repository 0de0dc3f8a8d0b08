//! The search itself: the problem (destinations cut into blocks, partial sums, candidates),
//! the moves from each end, and the selection that keeps the better end per block.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rayon::prelude::*;
use switchgnn_chip::{Chip, HostCost};
use switchgnn_dataplane::plan::PlanError;
use switchgnn_datasets::Graph;

use super::block_cut;
use super::candidates::{candidates_of, Pairs, WorkerGroups};
use super::model::{BlockModel, Candidate, Row};

/// Consecutive rejected moves after which one phase of a search stops.
pub(super) const PATIENCE: usize = 64;

/// Candidate moves by score, then lowest index.
pub(super) type MoveHeap = BinaryHeap<(u64, Reverse<u32>)>;

/// One block: its candidates, its partial sums (a range of [`Pairs`]) and its loads with every
/// pair pre-aggregated.
pub(super) struct Block {
    pub(super) candidates: Vec<u32>,
    pub(super) pairs: std::ops::Range<usize>,
    pub(super) reduce: BlockModel,
}

/// What the search needs that no choice changes.
pub(super) struct Problem<'a> {
    pub(super) graph: &'a Graph,
    pub(super) part: &'a (dyn Fn(u32) -> u16 + Sync),
    pub(super) workers: usize,
    pub(super) chip: &'a Chip,
    pub(super) cost: &'a HostCost,
    pub(super) row: Row,
    /// Per destination, its block (`u32::MAX`: not a destination).
    pub(super) block_of: Vec<u32>,
    pub(super) blocks: Vec<Block>,
    pub(super) pairs: Pairs,
    /// Per candidate row (`start..end` of a candidate), the partial sum that row's
    /// destination takes from the source's worker.
    pub(super) row_pair: Vec<u32>,
    pub(super) candidates: Vec<Candidate>,
    /// Source `u`'s candidates are `candidates[first_candidate[u]..first_candidate[u + 1]]`,
    /// by key.
    pub(super) first_candidate: Vec<u32>,
}

/// One search's choice: which candidates are multicast, how many pre-aggregated sources each
/// partial sum still has, and how many rows each (source, block) multicasts to.
#[derive(Clone)]
pub(super) struct State {
    pub(super) chosen: Vec<bool>,
    pub(super) count: Vec<u32>,
    pub(super) rows: Vec<u32>,
}

impl Problem<'_> {
    pub(super) fn key(&self, v: u32) -> u32 {
        self.block_of[v as usize] * self.workers as u32 + u32::from((self.part)(v))
    }

    /// The candidate of source `u` whose destinations have key `key`.
    pub(super) fn candidate_of(&self, u: u32, key: u32) -> Option<usize> {
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
    pub(super) fn partials_at(&self, state: &State, c: &Candidate, n: u32) -> u32 {
        self.pairs_of(c)
            .iter()
            .filter(|&&p| state.count[p as usize] == n)
            .count() as u32
    }

    /// The partial sums `c`'s source is folded into when it is not multicast, row by row.
    pub(super) fn pairs_of(&self, c: &Candidate) -> &[u32] {
        &self.row_pair[c.start as usize..c.end as usize]
    }

    /// Move candidate `i` to the other way (multicast to partial sums or back), in `state` and
    /// `model`. Flipping it again restores both exactly.
    pub(super) fn flip(&self, state: &mut State, model: &mut BlockModel, i: usize) {
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
    pub(super) fn reduce_end(&self, state: &mut State, b: usize) -> f64 {
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
    pub(super) fn multicast_end(&self, state: &mut State, b: usize) -> f64 {
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
pub(super) struct Selection<'a> {
    pub(super) problem: Problem<'a>,
    pub(super) chosen: Vec<bool>,
    /// Per source, whether it multicasts anywhere: most do not, and are answered at once.
    pub(super) multicasts: Vec<bool>,
    pub(super) estimate: f64,
    pub(super) from_reduce: f64,
    pub(super) from_multicast: f64,
}

impl Selection<'_> {
    /// Whether source `u`'s feature is multicast to destination `v`.
    pub(super) fn multicast(&self, u: u32, v: u32) -> bool {
        let p = &self.problem;
        self.multicasts[u as usize]
            && p.block_of[v as usize] != u32::MAX
            && p.candidate_of(u, p.key(v)).is_some_and(|i| self.chosen[i])
    }
}

/// Choose, block by block, each candidate's way for `chip` and hosts costing `cost`: from both
/// ends (all pre-aggregated, all multicast), keeping per block the end with the lower estimate.
pub(super) fn search<'a>(
    graph: &'a Graph,
    part: &'a (dyn Fn(u32) -> u16 + Sync),
    workers: usize,
    width: usize,
    aggregators: usize,
    chip: &'a Chip,
    cost: &'a HostCost,
) -> Result<Selection<'a>, PlanError> {
    let n = graph.num_vertices();
    let problem = Problem::new(graph, part, workers, width, aggregators, chip, cost)?;
    let groups = problem
        .candidates
        .last()
        .map_or(0, |c| c.group as usize + 1);
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

impl<'a> Problem<'a> {
    /// The search's problem: destinations cut into blocks, the partial sums and the
    /// candidates, and each block's loads with every candidate pre-aggregated.
    pub(super) fn new(
        graph: &'a Graph,
        part: &'a (dyn Fn(u32) -> u16 + Sync),
        workers: usize,
        width: usize,
        aggregators: usize,
        chip: &'a Chip,
        cost: &'a HostCost,
    ) -> Result<Problem<'a>, PlanError> {
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
        let blocks: Vec<Block> = in_block
            .into_par_iter()
            .zip(destinations.par_chunks(per_block))
            .map(|(candidates, chunk)| {
                let last = *chunk.last().expect("a block has a destination");
                let range = pairs.first[chunk[0] as usize] as usize
                    ..pairs.first[last as usize + 1] as usize;
                let reduce = reduce_model(chunk, range.clone(), &pairs, part, workers, &row);
                Block {
                    candidates,
                    pairs: range,
                    reduce,
                }
            })
            .collect();
        Ok(Problem {
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
        })
    }
}

/// A block's loads with every one of its candidates pre-aggregated: the barriers, each
/// destination of `chunk` read out and sent to its owner, and every partial sum of `pairs` up
/// and acknowledged.
pub(super) fn reduce_model(
    chunk: &[u32],
    pairs: std::ops::Range<usize>,
    all_pairs: &Pairs,
    part: &(dyn Fn(u32) -> u16 + Sync),
    workers: usize,
    row: &Row,
) -> BlockModel {
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
    // Every partial sum: each chunk up in one packet, acknowledged, in two passes (its checks,
    // then a trip to its aggregator).
    for p in pairs {
        let w = usize::from(all_pairs.workers[p]);
        m.sent_packets[w] += row.chunks;
        m.sent_bytes[w] += row.feature_bytes;
        m.received_packets[w] += row.chunks;
        m.received_bytes[w] += row.chunks * row.header;
        m.passes += 2.0 * row.chunks;
        m.recirculated_bytes += row.recirculated_per_pass;
        m.lane_updates += row.width;
    }
    m
}

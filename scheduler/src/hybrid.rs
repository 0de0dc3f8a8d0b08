//! The hybrid exchange's plan: per (source vertex, destination worker) pair, either SwitchGNN's
//! multicast (the source's feature goes up once and is added, one pass each, into its
//! neighbours on that worker) or pre-aggregation (it is folded into its own worker's partial
//! sum for each of those neighbours).
//!
//! The choice starts from the pure pre-aggregated exchange and moves pairs to multicast greedily
//! while the chip model's serial estimate (the busiest host's time plus the switch's,
//! `switchgnn_chip::Bound::serial_seconds`) goes down. Only the busiest host's load can lower
//! the estimate, and a move helps that host only where the source is the last pre-aggregated
//! one of some partial sum (the partial then disappears). So the search takes, on the busiest
//! host, first single pairs (most partial sums removed per pass added first), then whole
//! partial sums (every source still folded into one moves at once, fewest first). The switch
//! pays every pass and recirculation of a move, so on a chip with little recirculation
//! bandwidth few pairs move, and with free recirculation many do.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rayon::prelude::*;

use switchgnn_chip::{Chip, ChipChoice, HostCost, HostFraming, Load, PASS_HEADER};
use switchgnn_dataplane::plan::{ExchangePlan, Mode, Multicast, Partials, PlanBlock, PlanError};
use switchgnn_dataplane::table::BlockTable;
use switchgnn_dataplane::wire::{FRAME_OVERHEAD, HEADER_LEN, MAX_LANES};
use switchgnn_datasets::Graph;
use switchgnn_partition::{Assignment, Plan, PlannedOn};

use crate::exchange::reduce_plan;

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

/// Consecutive rejected moves on the busiest host after which the search stops.
const PATIENCE: usize = 64;

/// A host's candidate moves by score (partial sums removed per pass), then lowest index.
type MoveHeap = BinaryHeap<(u64, Reverse<u32>)>;

/// One (source, destination worker) pair: the source's neighbours on that worker are
/// `neighbours[start..end]`.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    u: u32,
    start: u32,
    end: u32,
}

/// The loads a move changes, and the chip's rates, to evaluate the serial estimate.
struct Model<'a> {
    chip: &'a Chip,
    cost: &'a HostCost,
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

impl Model<'_> {
    fn host(&self, w: usize) -> f64 {
        let bytes = self.sent_bytes[w].max(self.received_bytes[w]);
        let packets = self.sent_packets[w].max(self.received_packets[w]);
        let link = self.cost.link_gbps * 1e9 / 8.0;
        (bytes / link).max(packets * self.cost.per_packet_ns * 1e-9)
    }

    fn switch(&self) -> f64 {
        time(self.passes, self.chip.pass_rate())
            .max(time(
                self.recirculated_bytes,
                self.chip.loopback_bytes_per_s(),
            ))
            .max(time(self.lane_updates, self.chip.lane_rate()))
    }

    /// The busiest host and the serial estimate.
    fn estimate(&self) -> (usize, f64) {
        let (busiest, host) = (0..self.sent_bytes.len())
            .map(|w| (w, self.host(w)))
            .fold((0, 0.0), |a, b| if b.1 > a.1 { b } else { a });
        (busiest, host + self.switch())
    }
}

/// What moving one pair to multicast changes: host `w`'s packets and bytes each way (uplink
/// packets and their acknowledgements), and the switch's passes, recirculated bytes and lane
/// updates.
struct Move {
    w: usize,
    packets: f64,
    bytes: f64,
    ack_bytes: f64,
    passes: f64,
    recirculated: f64,
    lanes: f64,
}

impl Model<'_> {
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
    let n = graph.num_vertices();
    let part = |v: u32| assignment.part(v) as u16;
    let workers =
        usize::from(
            u16::try_from(assignment.num_parts()).map_err(|_| PlanError::TooLarge {
                what: "workers",
                value: u64::from(assignment.num_parts()),
                limit: u64::from(u16::MAX),
            })?,
        );
    // The loads of the pure pre-aggregated exchange (every destination in one block) and the
    // search's partial sums and candidates need nothing of each other: built side by side.
    let (start, (pairs, (neighbours, candidates))) = rayon::join(
        || {
            reduce_plan(graph, assignment, width, usize::MAX)
                .map(|plan| Load::of(&plan, cost.frame_overhead))
        },
        || {
            let mut groups = WorkerGroups::new(workers);
            let pairs = Pairs::of(graph, &part, &mut groups);
            (pairs, candidates_of(graph, &part, &mut groups))
        },
    );
    let start = start?;
    let Pairs {
        first: first_pair,
        workers: pair_workers,
        count: mut pair_count,
        destination: pair_destination,
    } = pairs;
    let pair = |v: u32, w: u16| -> usize {
        let (a, z) = (
            first_pair[v as usize] as usize,
            first_pair[v as usize + 1] as usize,
        );
        a + pair_workers[a..z]
            .binary_search(&w)
            .expect("a remote neighbour's worker contributes")
    };

    let f64s = |x: &[u64]| x.iter().map(|&b| b as f64).collect::<Vec<_>>();
    let switch = start.switch_work_on(chip);
    let mut model = Model {
        chip,
        cost,
        sent_bytes: f64s(&start.sent_bytes),
        received_bytes: f64s(&start.received_bytes),
        sent_packets: f64s(&start.sent_packets),
        received_packets: f64s(&start.received_packets),
        passes: switch.passes as f64,
        recirculated_bytes: switch.recirculated_bytes as f64,
        lane_updates: start.lane_updates as f64,
    };
    let chunks = width.div_ceil(MAX_LANES);
    let header = (HEADER_LEN as u64 + cost.frame_overhead) as f64;
    let feature_bytes = chunks as f64 * header + 4.0 * width as f64;
    let recirculated_per_pass = feature_bytes + (chunks as u64 * PASS_HEADER) as f64;
    // Destinations each source already multicasts to.
    let mut multicast_to = vec![0u32; n];
    let mut chosen = vec![false; candidates.len()];
    let removed = |c: &Candidate, count: &[u32]| -> u32 {
        neighbours[c.start as usize..c.end as usize]
            .iter()
            .filter(|&&v| count[pair(v, part(c.u))] == 1)
            .count() as u32
    };
    let move_of = |c: &Candidate, removed: u32, already: u32| -> Move {
        let d = (c.end - c.start) as f64;
        let r = f64::from(removed);
        let new = if already == 0 { 1.0 } else { 0.0 };
        Move {
            w: usize::from(part(c.u)),
            packets: chunks as f64 * (new - r),
            bytes: feature_bytes * (new - r),
            ack_bytes: chunks as f64 * header * (new - r),
            passes: chunks as f64 * (d - r),
            recirculated: (d - new) * recirculated_per_pass,
            lanes: width as f64 * (d - r),
        }
    };
    // Per host, its candidates that remove a partial sum, most removed per pass first. The
    // search only ever takes from the busiest host's heap, so a host's heap is built when it
    // is first the busiest (from the counts then): most hosts never are.
    let score = |removed: u32, d: u32| u64::from(removed) * 1_000_000 / u64::from(d.max(1));
    let mut by_host: Vec<Vec<u32>> = vec![Vec::new(); workers];
    for (i, c) in candidates.iter().enumerate() {
        by_host[usize::from(part(c.u))].push(i as u32);
    }
    let mut heaps: Vec<Option<MoveHeap>> = vec![None; workers];
    let (_, mut best) = model.estimate();
    let mut rejected = 0;
    let (mut pops, mut stale, mut work) = (0u64, 0u64, 0u64);
    let phase = std::time::Instant::now();
    while rejected < PATIENCE {
        let (h, _) = model.estimate();
        let heap = heaps[h].get_or_insert_with(|| {
            by_host[h]
                .iter()
                .filter_map(|&i| {
                    let c = &candidates[i as usize];
                    let r = removed(c, &pair_count);
                    (r > 0).then(|| (score(r, c.end - c.start), Reverse(i)))
                })
                .collect()
        });
        let Some((s, Reverse(i))) = heap.pop() else {
            break;
        };
        pops += 1;
        let c = candidates[i as usize];
        if chosen[i as usize] {
            continue;
        }
        let r = removed(&c, &pair_count);
        work += u64::from(c.end - c.start);
        if r == 0 {
            continue;
        }
        let now = score(r, c.end - c.start);
        if now < s {
            stale += 1;
            // Stale: earlier moves took some of its partial sums; weigh it again.
            heap.push((now, Reverse(i)));
            continue;
        }
        let m = move_of(&c, r, multicast_to[c.u as usize]);
        model.apply(&m, 1.0);
        let (_, estimate) = model.estimate();
        if estimate < best {
            best = estimate;
            chosen[i as usize] = true;
            multicast_to[c.u as usize] += c.end - c.start;
            for &v in &neighbours[c.start as usize..c.end as usize] {
                pair_count[pair(v, part(c.u))] -= 1;
            }
            rejected = 0;
        } else {
            model.apply(&m, -1.0);
            rejected += 1;
        }
    }

    tracing::debug!(pops, stale, work, elapsed = ?phase.elapsed(), "hybrid: single moves");

    // The candidate of (u, destination worker w).
    let first_candidate = {
        let mut first = vec![u32::MAX; n + 1];
        for (i, c) in candidates.iter().enumerate().rev() {
            first[c.u as usize] = i as u32;
        }
        first
    };
    // u's candidates are consecutive and sorted by destination worker: a binary search.
    let candidate_of = |u: u32, w: u16| -> Option<usize> {
        let first = first_candidate[u as usize] as usize;
        if first >= candidates.len() {
            return None;
        }
        let end = first + candidates[first..].partition_point(|c| c.u == u);
        let worker = |c: &Candidate| part(neighbours[c.start as usize]);
        let i = first + candidates[first..end].partition_point(|c| worker(c) < w);
        (i < end && worker(&candidates[i]) == w).then_some(i)
    };

    // Second, whole partial sums: a partial disappears only once every source still folded
    // into it is multicast, which single moves never reach where partials have several
    // sources. Per host, its partials with the fewest such sources first; all their moves are
    // taken together or not at all.
    let mut dissolve: Vec<BinaryHeap<(Reverse<u32>, Reverse<u32>)>> =
        vec![BinaryHeap::new(); workers];
    for (p, &count) in pair_count.iter().enumerate() {
        if count > 0 {
            dissolve[usize::from(pair_workers[p])].push((Reverse(count), Reverse(p as u32)));
        }
    }
    let mut rejected = 0;
    let mut group: Vec<(usize, Move)> = Vec::new();
    while rejected < PATIENCE {
        let (h, _) = model.estimate();
        let Some((Reverse(count), Reverse(p))) = dissolve[h].pop() else {
            break;
        };
        let p = p as usize;
        let now = pair_count[p];
        if now == 0 {
            continue;
        }
        if now < count {
            dissolve[h].push((Reverse(now), Reverse(p as u32)));
            continue;
        }
        let (v, w) = (pair_destination[p], pair_workers[p]);
        group.clear();
        for &u in graph.neighbors(v) {
            if part(u) != w {
                continue;
            }
            let i = candidate_of(u, part(v)).expect("u neighbours v on v's worker");
            if chosen[i] {
                continue;
            }
            let c = candidates[i];
            let m = move_of(&c, removed(&c, &pair_count), multicast_to[c.u as usize]);
            model.apply(&m, 1.0);
            chosen[i] = true;
            multicast_to[c.u as usize] += c.end - c.start;
            for &x in &neighbours[c.start as usize..c.end as usize] {
                pair_count[pair(x, w)] -= 1;
            }
            group.push((i, m));
        }
        let (_, estimate) = model.estimate();
        if estimate < best {
            best = estimate;
            rejected = 0;
            continue;
        }
        for (i, m) in group.drain(..).rev() {
            let c = candidates[i];
            model.apply(&m, -1.0);
            chosen[i] = false;
            multicast_to[c.u as usize] -= c.end - c.start;
            for &x in &neighbours[c.start as usize..c.end as usize] {
                pair_count[pair(x, w)] += 1;
            }
        }
        rejected += 1;
    }

    // Whether u's feature is multicast to worker w.
    // Most sources multicast to no worker at all: they are answered without a search.
    let multicast = |u: u32, w: u16| -> bool {
        multicast_to[u as usize] > 0 && candidate_of(u, w).is_some_and(|i| chosen[i])
    };
    mixed_plan(graph, assignment, width, aggregators, &multicast)
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
            groups.count(graph.neighbors(v), part(v), part, &|_| true);
            for &w in &groups.touched {
                p.workers.push(w);
                p.count.push(groups.count[usize::from(w)]);
                p.destination.push(v);
            }
        }
        p.first[n] = p.workers.len() as u64;
        p
    }
}

/// The candidates: each source with its neighbours on each remote worker (workers ascending),
/// and the neighbour lists they index.
fn candidates_of(
    graph: &Graph,
    part: &impl Fn(u32) -> u16,
    groups: &mut WorkerGroups,
) -> (Vec<u32>, Vec<Candidate>) {
    let mut neighbours: Vec<u32> = Vec::new();
    let mut candidates: Vec<Candidate> = Vec::new();
    for u in 0..graph.num_vertices() as u32 {
        groups.group(
            graph.neighbors(u),
            part(u),
            part,
            &|_| true,
            &mut neighbours,
        );
        for &(_, start, end) in &groups.ranges {
            candidates.push(Candidate {
                u,
                start: start as u32,
                end: end as u32,
            });
        }
    }
    (neighbours, candidates)
}

/// One vertex's remote neighbours counted, or grouped, per worker: a counting sort over the
/// workers it touches (a stamp per worker says whether the current call has seen it).
/// `touched` lists the workers in ascending order and `count[w]` how many neighbours each
/// has, valid for touched workers only; after [`WorkerGroups::group`], `ranges` says where
/// each worker's neighbours went.
struct WorkerGroups {
    /// The call that last touched each worker; calls are numbered from 1.
    stamp: Vec<u64>,
    call: u64,
    count: Vec<u32>,
    touched: Vec<u16>,
    ranges: Vec<(u16, usize, usize)>,
}

impl WorkerGroups {
    fn new(workers: usize) -> WorkerGroups {
        WorkerGroups {
            stamp: vec![0; workers],
            call: 0,
            count: vec![0; workers],
            touched: Vec::new(),
            ranges: Vec::new(),
        }
    }

    /// Count the `neighbours` that `keep` keeps on workers other than their vertex's, `home`.
    fn count(
        &mut self,
        neighbours: &[u32],
        home: u16,
        part: &impl Fn(u32) -> u16,
        keep: &impl Fn(u32) -> bool,
    ) {
        self.touched.clear();
        self.call += 1;
        for &y in neighbours {
            let w = part(y);
            if w == home || !keep(y) {
                continue;
            }
            let i = usize::from(w);
            if self.stamp[i] != self.call {
                self.stamp[i] = self.call;
                self.count[i] = 0;
                self.touched.push(w);
            }
            self.count[i] += 1;
        }
        self.touched.sort_unstable();
    }

    /// Append the neighbours [`WorkerGroups::count`] counts to `out`, grouped by worker in
    /// ascending order, each group in neighbour order.
    fn group(
        &mut self,
        neighbours: &[u32],
        home: u16,
        part: &impl Fn(u32) -> u16,
        keep: &impl Fn(u32) -> bool,
        out: &mut Vec<u32>,
    ) {
        self.count(neighbours, home, part, keep);
        let base = out.len();
        self.ranges.clear();
        let mut end = 0u32;
        for &w in &self.touched {
            let n = self.count[usize::from(w)];
            self.ranges
                .push((w, base + end as usize, base + (end + n) as usize));
            // From here on, the next free place of the worker's group.
            self.count[usize::from(w)] = end;
            end += n;
        }
        out.resize(base + end as usize, 0);
        for &y in neighbours {
            let w = part(y);
            if w != home && keep(y) {
                let next = &mut self.count[usize::from(w)];
                out[base + *next as usize] = y;
                *next += 1;
            }
        }
    }
}

/// The reduce plan whose (source, destination worker) pairs `multicast(u, w)` says are
/// multicast, the others folded into partial sums: every vertex with remote neighbours is a
/// destination, and destinations are cut, in id order, into blocks that fit `aggregators`.
pub(crate) fn mixed_plan(
    graph: &Graph,
    assignment: &Assignment,
    width: usize,
    aggregators: usize,
    multicast: &(dyn Fn(u32, u16) -> bool + Sync),
) -> Result<ExchangePlan, PlanError> {
    let part = |v: u32| assignment.part(v) as u16;
    let per_block = (aggregators / width.div_ceil(MAX_LANES).max(1)).max(1);
    let destinations: Vec<u32> = (0..graph.num_vertices() as u32)
        .filter(|&v| graph.neighbors(v).iter().any(|&u| part(u) != part(v)))
        .collect();
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
    multicast: &(dyn Fn(u32, u16) -> bool + Sync),
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
            if part(u) != home && multicast(u, home) {
                edges.push((u, row as u32));
            }
        }
        // The partial sums: the other remote neighbours, grouped by their worker.
        remote.clear();
        let folded = |u: u32| !multicast(u, home);
        groups.group(adjacent, home, part, &folded, remote);
        for &(w, start, end) in &groups.ranges {
            table.slots.push(u32::from(w));
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
            groups.group(&neighbours, home, &part, &keep, &mut out);
            let got: Vec<(u16, u32)> = groups
                .ranges
                .iter()
                .flat_map(|&(w, a, z)| out[a..z].iter().map(move |&v| (w, v)))
                .collect();
            assert_eq!(got, want, "vertex {x}");
            assert_eq!(out[0], u32::MAX, "what was in `out` stays");
            assert_eq!(out.len(), 1 + want.len());
            // Counting the same neighbours again (a new call) gives the same sizes.
            groups.count(&neighbours, home, &part, &keep);
            let counts: Vec<u32> = groups
                .touched
                .iter()
                .map(|&w| groups.count[usize::from(w)])
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

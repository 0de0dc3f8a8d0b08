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

use rayon::prelude::*;

use switchgnn_chip::{Chip, ChipChoice, HostCost, HostFraming};
use switchgnn_dataplane::plan::{ExchangePlan, Mode, Multicast, Partials, PlanBlock, PlanError};
use switchgnn_dataplane::table::BlockTable;
use switchgnn_dataplane::wire::{FRAME_OVERHEAD, MAX_LANES};
use switchgnn_datasets::Graph;
use switchgnn_partition::{Assignment, Plan, PlannedOn};

mod candidates;
mod model;
mod search;

use candidates::WorkerGroups;
use search::search;

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
        to_switch_delay_ns: 0.0,
        host_to_host_delay_ns: 0.0,
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
        delays: switchgnn_chip::Delays {
            to_switch_ns: on.to_switch_delay_ns,
            host_to_host_ns: on.host_to_host_delay_ns,
        },
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
    use super::search::Selection;
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use switchgnn_chip::{Bound, Load};
    use switchgnn_datasets::BuildOptions;

    fn cost() -> HostCost {
        HostCost {
            delays: switchgnn_chip::Delays::NONE,
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
        // Tofino 1 without looped ports, whose recirculation is scarcest, multicasts fewer than
        // the ideal chip (not none: a partial sum takes a trip too, after the pass that checks
        // it), and cheaper recirculation never multicasts fewer units.
        let count = |name: &str| moved[chips().iter().position(|c| c.0 == name).unwrap()].0;
        assert!(count("ideal") > count("tofino1-32"), "{moved:?}");
        assert!(count("tofino1-32+24") >= count("tofino1-32"), "{moved:?}");
        assert!(count("tofino2+96") >= count("tofino2"), "{moved:?}");
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

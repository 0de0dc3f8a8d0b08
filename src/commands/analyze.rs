//! `switchgnn analyze`: will in-network aggregation help this graph? Boundary size, host and
//! in-network traffic for one layer, what a switch of a given memory achieves with blocks, and
//! the verdict on a real chip: the chip model's bound on the in-network exchange against the
//! best host-only kind's (the host exchange, host-only pre-aggregation or the host hybrid,
//! whichever is fastest).

use anyhow::{Context, Result};
use comfy_table::{presets::UTF8_BORDERS_ONLY, Table};
use serde::Serialize;
use switchgnn_chip::{Chip, Choice, HostCost, Load, Verdict};
use switchgnn_dataplane::plan::{ExchangePlan, Mode};
use switchgnn_dataplane::switch::{spine_traffic, Racks, SpineTraffic};
use switchgnn_dataplane::wire::FRAME_OVERHEAD;
use switchgnn_datasets::Progress;
use switchgnn_partition::size::format_bytes;
use switchgnn_partition::traffic::{reduction, row_bytes};
use switchgnn_partition::{Assignment, Blocks, Boundary, Traffic};

use switchgnn_scheduler::exchange::{
    blocks_plan, host_hybrid_plan, host_reduce_plan, host_two_level_plan, reduce_plan,
    ExchangePlans,
};
use switchgnn_scheduler::hybrid::hybrid_plan;
use switchgnn_scheduler::OrderKind;

use crate::chip_args::{note_spare, LoopedPorts, VerdictArgs};
use crate::partition_args::{default_width, parse_list, parse_sizes, PlanInputs};
use crate::progress::Bars;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub input: PlanInputs,
    /// Worker counts to analyse, comma-separated.
    #[arg(long, default_value = "4")]
    pub workers: String,
    /// Feature width of the exchanged layer (default: the dataset's feature width).
    #[arg(long)]
    pub width: Option<usize>,
    /// Switch aggregator memories to plan blocks for, comma-separated (e.g. 10MB,100MB).
    #[arg(long)]
    pub switch_memory: Option<String>,
    #[command(flatten)]
    pub verdict: VerdictArgs,
    /// Also count what crosses the spine layer of leaf-spine fabrics of these rack counts
    /// (comma-separated, workers in racks of consecutive ranks) with two-level aggregation,
    /// for the host exchange, switchgnn and reduce (one block each).
    #[arg(long, value_name = "RACKS")]
    pub racks: Option<String>,
    /// Also judge every kind at these host costs per packet, ns, comma-separated (e.g.
    /// 0,5,10,20,40): which verdicts flip with the hosts' per-packet cost.
    #[arg(long, value_name = "NS")]
    pub sweep_packet_ns: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Serialize)]
struct Row {
    workers: u32,
    /// The chip preset the verdicts are for.
    chip: String,
    boundary: Boundary,
    traffic: Traffic,
    /// The fastest kind without in-network aggregation, by its bound: every verdict's baseline.
    best_host_only: Pick,
    /// All of the boundary in one block (a switch with memory for it).
    verdict: Verdict,
    /// The pre-aggregated exchange (`reduce`: one partial sum per worker and destination, one
    /// pass per packet), every destination in one block.
    reduce: Verdict,
    /// The hybrid (per source and destination worker, multicast or a partial sum, chosen for
    /// this chip and host cost), every destination in one block.
    hybrid: Verdict,
    /// The planner's pick for this layer on the chip among host, host-reduce, host-hybrid,
    /// switchgnn, reduce and hybrid, every destination in one block (`prepare --exchange auto`
    /// weighs the same kinds, on the plan's blocks).
    pick: Pick,
    /// Per host cost of `--sweep-packet-ns`: the verdicts again.
    sweep: Vec<SweepRow>,
    plans: Vec<PlanRow>,
    /// Per rack count of `--racks`: frame bytes across the spine layer.
    fabrics: Vec<FabricRow>,
}

/// A kind and its lower bound on the row's chip.
#[derive(Debug, Clone, Serialize)]
struct Pick {
    kind: String,
    seconds: f64,
}

impl Pick {
    /// The least bound among `kinds` (name and load) on `chip` under `cost`; the first wins a
    /// tie.
    fn among<'a>(
        chip: &Chip,
        cost: &HostCost,
        kinds: impl IntoIterator<Item = (&'a str, &'a Load)>,
    ) -> Pick {
        let choice = Choice::of(chip, cost, kinds).expect("a candidate");
        Pick {
            kind: choice.kind().to_string(),
            seconds: choice.bound().seconds,
        }
    }
}

/// What crosses the links between leaves and spine with two-level aggregation (no loss; data
/// packets, each link crossed counted).
#[derive(Debug, Serialize)]
struct FabricRow {
    racks: u16,
    host: SpineTraffic,
    host_reduce: SpineTraffic,
    host_hybrid: SpineTraffic,
    /// The host two-level exchange, its proxies chosen for these racks: the host-only answer
    /// to two-level aggregation (one partial per rack and destination across the spine).
    host_two_level: SpineTraffic,
    switchgnn: SpineTraffic,
    reduce: SpineTraffic,
}

/// The one-block verdicts at one host cost per packet.
#[derive(Debug, Serialize)]
struct SweepRow {
    host_packet_ns: f64,
    /// The best host-only kind at this cost.
    best_host_only: Pick,
    /// The in-network (SwitchGNN, one block) bound over the best host-only kind's.
    switchgnn_vs_host: f64,
    /// The pre-aggregated exchange's bound over the best host-only kind's.
    reduce_vs_host: f64,
    /// The pick at this cost (the hybrid among the kinds as chosen for the row's own cost).
    pick: Pick,
}

#[derive(Debug, Serialize)]
struct PlanRow {
    switch_memory: u64,
    blocks: usize,
    levels: u32,
    mean_fill: f64,
    bytes: u64,
    reduction: f64,
    verdict: Verdict,
}

pub fn run(args: Args) -> Result<()> {
    let dataset = args.input.dataset.load()?;
    let width = args.width.unwrap_or_else(|| default_width(&dataset));
    let workers: Vec<u32> = parse_list(&args.workers, "--workers")?;
    let memories = match &args.switch_memory {
        Some(s) => parse_sizes(s)?,
        None => Vec::new(),
    };
    let rack_counts: Vec<u16> = match &args.racks {
        Some(s) => parse_list(s, "--racks")?,
        None => Vec::new(),
    };
    if let Some(&(r, m)) = rack_counts
        .iter()
        .flat_map(|&r| workers.iter().map(move |&m| (r, m)))
        .find(|&(r, m)| r == 0 || u32::from(r) > m)
        .as_ref()
    {
        anyhow::bail!("--racks {r}: {m} workers cannot fill {r} racks");
    }
    let method = args.input.partition.method();
    let choice = args.verdict.chip.choice(LoopedPorts::Spare)?;
    let cost = args.verdict.cost()?;
    let packet_costs: Vec<f64> = match &args.sweep_packet_ns {
        Some(s) => parse_list(s, "--sweep-packet-ns")?,
        None => Vec::new(),
    };
    if packet_costs
        .iter()
        .any(|ns| !(*ns >= 0.0 && ns.is_finite()))
    {
        anyhow::bail!("--sweep-packet-ns: every cost must be a finite number of ns, not negative");
    }
    let bars = Bars::new();
    let mut rows = Vec::new();
    for &m in &workers {
        bars.stage(&format!("{m} workers: partition"), None);
        let assignment = Assignment::compute(&dataset.graph, m, &method)?;
        let boundary = Boundary::analyze(&dataset.graph, &assignment);
        let traffic = Traffic::estimate(&boundary, width);
        let chip = choice
            .resolve(m, cost.link_gbps)
            .with_context(|| format!("{m} workers"))?;
        note_spare(&choice, &chip, m);
        bars.stage(
            &format!("{m} workers: loads on {}", chip.preset.name()),
            None,
        );
        let whole = |mode| {
            ExchangePlan::whole_graph(
                &dataset.graph,
                &assignment,
                width,
                mode,
                OrderKind::Random,
                0,
            )
        };
        let fabrics_of = |plan: &ExchangePlan| -> Result<Vec<SpineTraffic>> {
            rack_counts
                .iter()
                .map(|&r| {
                    Ok(spine_traffic(
                        plan,
                        &Racks::even(m as u16, r)?,
                        FRAME_OVERHEAD,
                        cost.framing,
                    ))
                })
                .collect()
        };
        let host_plan = whole(Mode::Host)?;
        let host_load = Load::for_cost(&host_plan, &cost);
        let host_fabrics = fabrics_of(&host_plan)?;
        drop(host_plan);
        let partials_plan = host_reduce_plan(&dataset.graph, &assignment, width)?;
        let partials_load = Load::for_cost(&partials_plan, &cost);
        let partials_fabrics = fabrics_of(&partials_plan)?;
        drop(partials_plan);
        let mixed_plan = host_hybrid_plan(&dataset.graph, &assignment, width)?;
        let mixed_load = Load::for_cost(&mixed_plan, &cost);
        let mixed_fabrics = fabrics_of(&mixed_plan)?;
        drop(mixed_plan);
        // Its plan depends on the racks (who proxies for whom): one per rack count.
        let two_level_fabrics = rack_counts
            .iter()
            .map(|&r| {
                let racks = Racks::even(m as u16, r)?;
                let plan = host_two_level_plan(&dataset.graph, &assignment, width, &racks)?;
                Ok(spine_traffic(&plan, &racks, FRAME_OVERHEAD, cost.framing))
            })
            .collect::<Result<Vec<_>>>()?;
        // Every verdict's baseline: the fastest host-only kind at this cost.
        let host_only = |cost: &HostCost| {
            let kinds = [
                ("host", &host_load),
                ("host-reduce", &partials_load),
                ("host-hybrid", &mixed_load),
            ];
            let best = Pick::among(&chip, cost, kinds);
            let (_, load) = kinds
                .into_iter()
                .find(|(kind, _)| *kind == best.kind)
                .expect("the pick is a candidate");
            (best, load)
        };
        let (best_host_only, base_load) = host_only(&cost);
        let host = (best_host_only.kind.as_str(), base_load);
        let reduce_xplan = reduce_plan(&dataset.graph, &assignment, width, usize::MAX)?;
        let reduce_load = Load::of(&reduce_xplan, FRAME_OVERHEAD);
        let reduce_fabrics = fabrics_of(&reduce_xplan)?;
        drop(reduce_xplan);
        let reduce = Verdict::of(&chip, &reduce_load, host, &cost);
        let hybrid_load = Load::of(
            &hybrid_plan(&dataset.graph, &assignment, width, usize::MAX, &chip, &cost)?,
            FRAME_OVERHEAD,
        );
        let hybrid = Verdict::of(&chip, &hybrid_load, host, &cost);
        let blocks_xplan = whole(Mode::Blocks)?;
        let blocks_load = Load::of(&blocks_xplan, FRAME_OVERHEAD);
        let blocks_fabrics = fabrics_of(&blocks_xplan)?;
        drop(blocks_xplan);
        let fabrics = rack_counts
            .iter()
            .enumerate()
            .map(|(i, &racks)| FabricRow {
                racks,
                host: host_fabrics[i],
                host_reduce: partials_fabrics[i],
                host_hybrid: mixed_fabrics[i],
                host_two_level: two_level_fabrics[i],
                switchgnn: blocks_fabrics[i],
                reduce: reduce_fabrics[i],
            })
            .collect();
        let verdict = Verdict::of(&chip, &blocks_load, host, &cost);
        // What `prepare --exchange auto` would pick (with every destination in one block).
        let pick_at = |cost: &HostCost| {
            Pick::among(
                &chip,
                cost,
                [
                    ("host", &host_load),
                    ("host-reduce", &partials_load),
                    ("host-hybrid", &mixed_load),
                    ("switchgnn", &blocks_load),
                    ("reduce", &reduce_load),
                    ("hybrid", &hybrid_load),
                ],
            )
        };
        let pick = pick_at(&cost);
        let sweep = packet_costs
            .iter()
            .map(|&ns| {
                let at = HostCost {
                    per_packet_ns: ns,
                    ..cost
                };
                let (best_host_only, load) = host_only(&at);
                let versus = |x: &Load| {
                    let base = (best_host_only.kind.as_str(), load);
                    1.0 / Verdict::of(&chip, x, base, &at).speedup_at_best
                };
                let (switchgnn_vs_host, reduce_vs_host) =
                    (versus(&blocks_load), versus(&reduce_load));
                SweepRow {
                    host_packet_ns: ns,
                    best_host_only,
                    switchgnn_vs_host,
                    reduce_vs_host,
                    pick: pick_at(&at),
                }
            })
            .collect();
        drop(blocks_load);
        let mut plans = Vec::new();
        for &memory in &memories {
            bars.stage(
                &format!("{m} workers: blocks for {}", format_bytes(memory)),
                None,
            );
            let params = args.input.partition.block_params(memory, width);
            let blocks = Blocks::build(&dataset.graph, &assignment, &params)?;
            let fill = blocks.fill();
            // Every block endpoint sends once and receives once.
            let bytes = 2 * row_bytes(fill.vertex_slots, width);
            let load = Load::of(&blocks_plan(&blocks, &assignment, width)?, FRAME_OVERHEAD);
            plans.push(PlanRow {
                switch_memory: memory,
                blocks: fill.blocks,
                levels: blocks.levels,
                mean_fill: fill.mean,
                bytes,
                reduction: reduction(bytes, traffic.host_bytes),
                verdict: Verdict::of(&chip, &load, host, &cost),
            });
        }
        rows.push(Row {
            workers: m,
            chip: chip.preset.name().to_string(),
            boundary,
            best_host_only,
            verdict,
            reduce,
            hybrid,
            pick,
            sweep,
            traffic,
            plans,
            fabrics,
        });
    }
    bars.finish();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    println!(
        "{}: {} vertices, {} edges; one layer of width {width}, payload bytes on host links",
        dataset.name,
        dataset.num_vertices(),
        dataset.graph.num_edges()
    );
    println!("{}", table(&rows, &memories));
    println!(
        "every ratio is against the best host-only kind, by its bound: the host exchange (each \
         boundary row once to every worker that needs it), host-only pre-aggregation \
         (host-reduce: one partial sum per remote destination, sent to its owner) or the host \
         hybrid (host-hybrid: per worker pair, whichever of the two moves fewer rows), all packed \
         into {}-byte packets with an ack per {} packets, {} ns per packet at each host, {} \
         Gb/s links (--mtu, --ack-every, --host-packet-ns, --gbps)",
        cost.framing.mtu, cost.framing.ack_every, cost.per_packet_ns, cost.link_gbps
    );
    for r in &rows {
        println!(
            "{} workers on {}: in-network aggregation {} (one block; the best host-only kind, \
             {}, bound {:.3} ms; the in-network one's {:.3} ms)",
            r.workers,
            r.verdict.chip,
            r.verdict.sentence(),
            r.best_host_only.kind,
            r.verdict.host_exchange.seconds * 1e3,
            r.verdict.in_network.seconds * 1e3
        );
        for p in &r.plans {
            println!(
                "  with {} of aggregators: {}",
                format_bytes(p.switch_memory),
                p.verdict.sentence()
            );
        }
        println!(
            "  pre-aggregated (`reduce`: one partial sum per worker and destination): {}",
            r.reduce.sentence()
        );
        println!(
            "  the hybrid (per source and destination worker, multicast or a partial sum, chosen \
             for this chip): {}",
            r.hybrid.sentence()
        );
        println!(
            "  the planner's pick among host, host-reduce, host-hybrid, switchgnn, reduce and \
             hybrid (one block): {} ({:.3} ms, {:.3}x the best host-only kind's)",
            r.pick.kind,
            r.pick.seconds * 1e3,
            r.pick.seconds / r.best_host_only.seconds
        );
        for w in &r.sweep {
            println!(
                "  at {} ns per packet: best host-only {}; switchgnn {:.3}x its time, reduce \
                 {:.3}x, the pick {}",
                w.host_packet_ns,
                w.best_host_only.kind,
                w.switchgnn_vs_host,
                w.reduce_vs_host,
                w.pick.kind
            );
        }
        for f in &r.fabrics {
            let versus = |t: &SpineTraffic| t.bytes as f64 / f.host.bytes.max(1) as f64;
            println!(
                "  across the spine layer of {} racks, two-level aggregation (frames, one \
                 block): host exchange {}, host-reduce {} ({:.2}×), host-hybrid {} ({:.2}×), \
                 host-two-level {} ({:.2}×), switchgnn {} ({:.2}×), reduce {} ({:.2}×)",
                f.racks,
                format_bytes(f.host.bytes),
                format_bytes(f.host_reduce.bytes),
                versus(&f.host_reduce),
                format_bytes(f.host_hybrid.bytes),
                versus(&f.host_hybrid),
                format_bytes(f.host_two_level.bytes),
                versus(&f.host_two_level),
                format_bytes(f.switchgnn.bytes),
                versus(&f.switchgnn),
                format_bytes(f.reduce.bytes),
                versus(&f.reduce)
            );
        }
    }
    println!("the chip model's figures and their sources:");
    for s in switchgnn_chip::SOURCES {
        println!("  {}: {} ({})", s.figure, s.value, s.source);
    }
    Ok(())
}

/// The in-network bound over the best host-only kind's: below 1, in-network aggregation can
/// win.
fn best(v: &Verdict) -> String {
    format!("{:.3}", 1.0 / v.speedup_at_best)
}

fn table(rows: &[Row], memories: &[u64]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY);
    let mut header: Vec<String> = [
        "workers",
        "chip",
        "boundary vertices",
        "cross edges",
        "mean fan-out",
        "host exchange",
        "in-network ideal",
        "ideal saving",
        "largest component aggregators",
        "best host-only",
        "best ÷ best host-only (one block)",
        "reduce best ÷ best host-only",
        "auto picks",
    ]
    .map(String::from)
    .to_vec();
    for &m in memories {
        header.push(format!(
            "{} switch: blocks / traffic / saving / best ÷ best host-only",
            format_bytes(m)
        ));
    }
    t.set_header(header);
    for r in rows {
        let mut cells = vec![
            r.workers.to_string(),
            r.chip.clone(),
            r.boundary.boundary_vertices.to_string(),
            r.boundary.cross_edges.to_string(),
            format!("{:.2}", r.boundary.mean_fanout()),
            format_bytes(r.traffic.host_bytes),
            format_bytes(r.traffic.ideal_bytes()),
            format!("{:.1}%", 100.0 * r.traffic.ideal_reduction()),
            format_bytes(r.traffic.largest_component_aggregator_bytes),
            r.best_host_only.kind.clone(),
            best(&r.verdict),
            best(&r.reduce),
            r.pick.kind.clone(),
        ];
        for p in &r.plans {
            cells.push(format!(
                "{} / {} / {:.1}% / {}",
                p.blocks,
                format_bytes(p.bytes),
                100.0 * p.reduction,
                best(&p.verdict)
            ));
        }
        t.add_row(cells);
    }
    t
}

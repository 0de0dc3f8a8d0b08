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
use switchgnn_datasets::Graph;
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
pub(crate) struct Args {
    #[command(flatten)]
    pub(crate) input: PlanInputs,
    /// Worker counts to analyse, comma-separated.
    #[arg(long, default_value = "4")]
    pub(crate) workers: String,
    /// Feature width of the exchanged layer (default: the dataset's feature width).
    #[arg(long)]
    pub(crate) width: Option<usize>,
    /// Switch aggregator memories to plan blocks for, comma-separated (e.g. 10MB,100MB).
    #[arg(long)]
    pub(crate) switch_memory: Option<String>,
    #[command(flatten)]
    pub(crate) verdict: VerdictArgs,
    /// Also count what crosses the spine layer of leaf-spine fabrics of these rack counts
    /// (comma-separated, workers in racks of consecutive ranks) with two-level aggregation,
    /// for the host exchange, switchgnn and reduce (one block each).
    #[arg(long, value_name = "RACKS")]
    pub(crate) racks: Option<String>,
    /// Also judge every kind at these host costs per packet, ns, comma-separated (e.g.
    /// 0,5,10,20,40): which verdicts flip with the hosts' per-packet cost.
    #[arg(long, value_name = "NS")]
    pub(crate) sweep_packet_ns: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
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

/// What `analyze` was asked, checked: the worker counts, memories, rack counts and host costs
/// of its flags.
#[derive(Debug)]
pub(crate) struct Request {
    workers: Vec<u32>,
    memories: Vec<u64>,
    rack_counts: Vec<u16>,
    packet_costs: Vec<f64>,
}

impl TryFrom<&Args> for Request {
    type Error = anyhow::Error;

    fn try_from(args: &Args) -> Result<Request> {
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
        let packet_costs: Vec<f64> = match &args.sweep_packet_ns {
            Some(s) => parse_list(s, "--sweep-packet-ns")?,
            None => Vec::new(),
        };
        if packet_costs
            .iter()
            .any(|ns| !(*ns >= 0.0 && ns.is_finite()))
        {
            anyhow::bail!(
                "--sweep-packet-ns: every cost must be a finite number of ns, not negative"
            );
        }
        Ok(Request {
            workers,
            memories,
            rack_counts,
            packet_costs,
        })
    }
}

pub(crate) fn run(args: Args) -> Result<()> {
    let request = Request::try_from(&args)?;
    let dataset = args.input.dataset.load()?;
    let width = args.width.unwrap_or_else(|| default_width(&dataset));
    let choice = args.verdict.chip.choice(LoopedPorts::Spare)?;
    let cost = args.verdict.cost()?;
    let bars = Bars::new();
    let mut rows = Vec::new();
    for &m in &request.workers {
        bars.stage(&format!("{m} workers: partition"), None);
        let assignment = Assignment::compute(&dataset.graph, m, &args.input.partition.method())?;
        let chip = choice
            .resolve(m, cost.link_gbps)
            .with_context(|| format!("{m} workers"))?;
        note_spare(&choice, &chip, m);
        bars.stage(
            &format!("{m} workers: loads on {}", chip.preset.name()),
            None,
        );
        let layer = Layer {
            graph: &dataset.graph,
            assignment: &assignment,
            width,
            workers: m,
            rack_counts: &request.rack_counts,
            chip: &chip,
            cost: &cost,
        };
        rows.push(layer.row(&args, &request, &bars)?);
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
    println!("{}", table(&rows, &request.memories));
    print_verdicts(&rows, &cost);
    Ok(())
}

/// One layer of one worker count on its chip: what every row is computed from.
struct Layer<'a> {
    graph: &'a Graph,
    assignment: &'a Assignment,
    width: usize,
    workers: u32,
    rack_counts: &'a [u16],
    chip: &'a Chip,
    cost: &'a HostCost,
}

/// A kind's load on the chip and what it sends across the spine layer of each rack count.
struct Measured {
    load: Load,
    fabrics: Vec<SpineTraffic>,
}

/// The host-only kinds, measured: every verdict's baseline is the fastest of them.
struct HostOnly {
    host: Measured,
    partials: Measured,
    mixed: Measured,
    /// Per rack count: the host two-level exchange, its proxies chosen for those racks.
    two_level: Vec<SpineTraffic>,
}

impl HostOnly {
    /// The fastest host-only kind at `cost` and its load.
    fn best(&self, chip: &Chip, cost: &HostCost) -> (Pick, &Load) {
        let kinds = [
            ("host", &self.host.load),
            ("host-reduce", &self.partials.load),
            ("host-hybrid", &self.mixed.load),
        ];
        let best = Pick::among(chip, cost, kinds);
        let (_, load) = kinds
            .into_iter()
            .find(|(kind, _)| *kind == best.kind)
            .expect("the pick is a candidate");
        (best, load)
    }
}

/// The in-network kinds, every destination in one block.
struct InNetwork {
    /// The pre-aggregated exchange (`reduce`).
    reduce: Measured,
    /// The hybrid, chosen for the chip and host cost (its fabrics are not counted).
    hybrid: Load,
    /// SwitchGNN's blocks.
    blocks: Measured,
}

impl Layer<'_> {
    /// The row of this worker count: the kinds measured, judged against the best host-only
    /// one, at the sweep's costs, and with blocks for each memory asked for.
    fn row(&self, args: &Args, request: &Request, bars: &Bars) -> Result<Row> {
        let boundary = Boundary::analyze(self.graph, self.assignment);
        let traffic = Traffic::estimate(&boundary, self.width);
        let host_only = self.host_only()?;
        let (best_host_only, base_load) = host_only.best(self.chip, self.cost);
        let host = (best_host_only.kind.as_str(), base_load);
        let in_network = self.in_network()?;
        let (chip, cost) = (self.chip, self.cost);
        let fabrics = self
            .rack_counts
            .iter()
            .enumerate()
            .map(|(i, &racks)| FabricRow {
                racks,
                host: host_only.host.fabrics[i],
                host_reduce: host_only.partials.fabrics[i],
                host_hybrid: host_only.mixed.fabrics[i],
                host_two_level: host_only.two_level[i],
                switchgnn: in_network.blocks.fabrics[i],
                reduce: in_network.reduce.fabrics[i],
            })
            .collect();
        let plans = self.plan_rows(args, &request.memories, host, traffic.host_bytes, bars)?;
        Ok(Row {
            workers: self.workers,
            chip: chip.preset.name().to_string(),
            boundary,
            verdict: Verdict::of(chip, &in_network.blocks.load, host, cost),
            reduce: Verdict::of(chip, &in_network.reduce.load, host, cost),
            hybrid: Verdict::of(chip, &in_network.hybrid, host, cost),
            pick: self.pick(&host_only, &in_network, cost),
            sweep: self.sweep(&host_only, &in_network, &request.packet_costs),
            best_host_only,
            traffic,
            plans,
            fabrics,
        })
    }

    /// What `plan` sends across the spine layer of each rack count.
    fn fabrics(&self, plan: &ExchangePlan) -> Result<Vec<SpineTraffic>> {
        self.rack_counts
            .iter()
            .map(|&r| {
                Ok(spine_traffic(
                    plan,
                    &Racks::even(self.workers as u16, r)?,
                    FRAME_OVERHEAD,
                    self.cost.framing,
                ))
            })
            .collect()
    }

    /// A kind's load at the host cost (packets each host handles) and its fabrics; the plan is
    /// dropped before the next kind's is built.
    fn measure_at_cost(&self, plan: &ExchangePlan) -> Result<Measured> {
        Ok(Measured {
            load: Load::for_cost(plan, self.cost),
            fabrics: self.fabrics(plan)?,
        })
    }

    fn host_only(&self) -> Result<HostOnly> {
        let (graph, assignment, width) = (self.graph, self.assignment, self.width);
        let host = self.measure_at_cost(&ExchangePlan::whole_graph(
            graph,
            assignment,
            width,
            Mode::Host,
            OrderKind::Random,
            0,
        )?)?;
        let partials = self.measure_at_cost(&host_reduce_plan(graph, assignment, width)?)?;
        let mixed = self.measure_at_cost(&host_hybrid_plan(graph, assignment, width)?)?;
        // Its plan depends on the racks (who proxies for whom): one per rack count.
        let two_level = self
            .rack_counts
            .iter()
            .map(|&r| {
                let racks = Racks::even(self.workers as u16, r)?;
                let plan = host_two_level_plan(graph, assignment, width, &racks)?;
                Ok(spine_traffic(
                    &plan,
                    &racks,
                    FRAME_OVERHEAD,
                    self.cost.framing,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(HostOnly {
            host,
            partials,
            mixed,
            two_level,
        })
    }

    /// An in-network kind's load, counted per pipe and path of the row's chip too (its blocks
    /// in `switch_memory`; the one-block plans, `None`, in as much as they need).
    fn on_chip(&self, plan: &ExchangePlan, switch_memory: Option<u64>) -> Load {
        Load::of(plan, FRAME_OVERHEAD).spread_on(plan, self.chip, switch_memory, FRAME_OVERHEAD)
    }

    fn in_network(&self) -> Result<InNetwork> {
        let (graph, assignment, width) = (self.graph, self.assignment, self.width);
        let measure = |plan: &ExchangePlan| -> Result<Measured> {
            Ok(Measured {
                load: self.on_chip(plan, None),
                fabrics: self.fabrics(plan)?,
            })
        };
        let reduce = measure(&reduce_plan(graph, assignment, width, usize::MAX)?)?;
        let hybrid = self.on_chip(
            &hybrid_plan(graph, assignment, width, usize::MAX, self.chip, self.cost)?,
            None,
        );
        let blocks = measure(&ExchangePlan::whole_graph(
            graph,
            assignment,
            width,
            Mode::Blocks,
            OrderKind::Random,
            0,
        )?)?;
        Ok(InNetwork {
            reduce,
            hybrid,
            blocks,
        })
    }

    /// What `prepare --exchange auto` would pick at `cost` (with every destination in one
    /// block).
    fn pick(&self, host_only: &HostOnly, in_network: &InNetwork, cost: &HostCost) -> Pick {
        Pick::among(
            self.chip,
            cost,
            [
                ("host", &host_only.host.load),
                ("host-reduce", &host_only.partials.load),
                ("host-hybrid", &host_only.mixed.load),
                ("switchgnn", &in_network.blocks.load),
                ("reduce", &in_network.reduce.load),
                ("hybrid", &in_network.hybrid),
            ],
        )
    }

    /// The one-block verdicts again at each host cost per packet of `--sweep-packet-ns`.
    fn sweep(
        &self,
        host_only: &HostOnly,
        in_network: &InNetwork,
        packet_costs: &[f64],
    ) -> Vec<SweepRow> {
        packet_costs
            .iter()
            .map(|&ns| {
                let at = HostCost {
                    per_packet_ns: ns,
                    ..*self.cost
                };
                let (best_host_only, load) = host_only.best(self.chip, &at);
                let versus = |x: &Load| {
                    let base = (best_host_only.kind.as_str(), load);
                    1.0 / Verdict::of(self.chip, x, base, &at).speedup_at_best
                };
                let (switchgnn_vs_host, reduce_vs_host) = (
                    versus(&in_network.blocks.load),
                    versus(&in_network.reduce.load),
                );
                SweepRow {
                    host_packet_ns: ns,
                    best_host_only,
                    switchgnn_vs_host,
                    reduce_vs_host,
                    pick: self.pick(host_only, in_network, &at),
                }
            })
            .collect()
    }

    /// Blocks for each switch memory, judged against the best host-only kind `host`.
    fn plan_rows(
        &self,
        args: &Args,
        memories: &[u64],
        host: (&str, &Load),
        host_bytes: u64,
        bars: &Bars,
    ) -> Result<Vec<PlanRow>> {
        let (graph, assignment, width) = (self.graph, self.assignment, self.width);
        let mut plans = Vec::new();
        for &memory in memories {
            bars.stage(
                &format!(
                    "{} workers: blocks for {}",
                    self.workers,
                    format_bytes(memory)
                ),
                None,
            );
            let params = args.input.partition.block_params(memory, width);
            let blocks = Blocks::build(graph, assignment, &params)?;
            let fill = blocks.fill();
            // Every block endpoint sends once and receives once.
            let bytes = 2 * row_bytes(fill.vertex_slots, width);
            let xplan = blocks_plan(&blocks, assignment, width)?;
            let load = self.on_chip(&xplan, Some(memory));
            plans.push(PlanRow {
                switch_memory: memory,
                blocks: fill.blocks,
                levels: blocks.levels,
                mean_fill: fill.mean,
                bytes,
                reduction: reduction(bytes, host_bytes),
                verdict: Verdict::of(self.chip, &load, host, self.cost),
            });
        }
        Ok(plans)
    }
}

/// The sentences under the table: each row's verdicts, sweep and fabrics, and the chip
/// model's sources.
fn print_verdicts(rows: &[Row], cost: &HostCost) {
    println!(
        "every ratio is against the best host-only kind, by its bound: the host exchange (each \
         boundary row once to every worker that needs it), host-only pre-aggregation \
         (host-reduce: one partial sum per remote destination, sent to its owner) or the host \
         hybrid (host-hybrid: per worker pair, whichever of the two moves fewer rows), all packed \
         into {}-byte packets with an ack per {} packets, {} ns per packet at each host, {} \
         Gb/s links (--mtu, --ack-every, --host-packet-ns, --gbps)",
        cost.framing.mtu, cost.framing.ack_every, cost.per_packet_ns, cost.link_gbps
    );
    if cost.delays.to_switch_ns > 0.0 {
        println!(
            "every bound adds the latency of the exchange's messages: (2 + 4 x blocks) one-way \
             link delays of {:.1} µs (--link-delay-us), to what must fall between them",
            cost.delays.to_switch_ns / 1e3
        );
    }
    for r in rows {
        print_row(r);
    }
    println!("the chip model's figures and their sources:");
    for s in switchgnn_chip::SOURCES {
        println!("  {}: {} ({})", s.figure, s.value, s.source);
    }
}

fn print_row(r: &Row) {
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

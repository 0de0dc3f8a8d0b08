//! `switchgnn analyze`: will in-network aggregation help this graph? Boundary size, host and
//! in-network traffic for one layer, and what a switch of a given memory achieves with blocks.

use anyhow::Result;
use comfy_table::{presets::UTF8_BORDERS_ONLY, Table};
use serde::Serialize;
use switchgnn_datasets::Progress;
use switchgnn_partition::size::format_bytes;
use switchgnn_partition::traffic::{reduction, row_bytes};
use switchgnn_partition::{Assignment, Blocks, Boundary, Traffic};

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
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Serialize)]
struct Row {
    workers: u32,
    boundary: Boundary,
    traffic: Traffic,
    plans: Vec<PlanRow>,
}

#[derive(Debug, Serialize)]
struct PlanRow {
    switch_memory: u64,
    blocks: usize,
    levels: u32,
    mean_fill: f64,
    bytes: u64,
    reduction: f64,
}

pub fn run(args: Args) -> Result<()> {
    let dataset = args.input.dataset.load()?;
    let width = args.width.unwrap_or_else(|| default_width(&dataset));
    let workers: Vec<u32> = parse_list(&args.workers, "--workers")?;
    let memories = match &args.switch_memory {
        Some(s) => parse_sizes(s)?,
        None => Vec::new(),
    };
    let method = args.input.partition.method();
    let bars = Bars::new();
    let mut rows = Vec::new();
    for &m in &workers {
        bars.stage(&format!("{m} workers: partition"), None);
        let assignment = Assignment::compute(&dataset.graph, m, &method)?;
        let boundary = Boundary::analyze(&dataset.graph, &assignment);
        let traffic = Traffic::estimate(&boundary, width);
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
            plans.push(PlanRow {
                switch_memory: memory,
                blocks: fill.blocks,
                levels: blocks.levels,
                mean_fill: fill.mean,
                bytes,
                reduction: reduction(bytes, traffic.host_bytes),
            });
        }
        rows.push(Row {
            workers: m,
            boundary,
            traffic,
            plans,
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
    Ok(())
}

fn table(rows: &[Row], memories: &[u64]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY);
    let mut header: Vec<String> = [
        "workers",
        "boundary vertices",
        "cross edges",
        "mean fan-out",
        "host exchange",
        "in-network ideal",
        "ideal saving",
        "largest component aggregators",
    ]
    .map(String::from)
    .to_vec();
    for &m in memories {
        header.push(format!(
            "{} switch: blocks / traffic / saving",
            format_bytes(m)
        ));
    }
    t.set_header(header);
    for r in rows {
        let mut cells = vec![
            r.workers.to_string(),
            r.boundary.boundary_vertices.to_string(),
            r.boundary.cross_edges.to_string(),
            format!("{:.2}", r.boundary.mean_fanout()),
            format_bytes(r.traffic.host_bytes),
            format_bytes(r.traffic.ideal_bytes()),
            format!("{:.1}%", 100.0 * r.traffic.ideal_reduction()),
            format_bytes(r.traffic.largest_component_aggregator_bytes),
        ];
        for p in &r.plans {
            cells.push(format!(
                "{} / {} / {:.1}%",
                p.blocks,
                format_bytes(p.bytes),
                100.0 * p.reduction
            ));
        }
        t.add_row(cells);
    }
    t
}

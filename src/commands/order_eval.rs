//! `switchgnn order-eval`: score send orders with the time-slot model before running anything.

use anyhow::Result;
use comfy_table::{presets::UTF8_BORDERS_ONLY, Table};
use serde::Serialize;
use switchgnn_partition::size::parse_bytes;
use switchgnn_partition::{Assignment, Blocks};
use switchgnn_scheduler::blocks::block_reports;
use switchgnn_scheduler::{evaluate, order, Adjacency, OrderKind, SlotReport};

use super::prepare::order_kind;
use crate::partition_args::{default_width, parse_list, PlanInputs};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    pub(crate) input: PlanInputs,
    /// Orders to compare, comma-separated.
    #[arg(long, default_value = "priority-bfs,random,bfs,degree")]
    pub(crate) order: String,
    /// Packets entering (and results leaving) the switch per time slot.
    #[arg(long, default_value_t = 1)]
    pub(crate) k: u64,
    /// Seed of the orders.
    #[arg(long, default_value_t = 0)]
    pub(crate) order_seed: u64,
    /// Score the blocks of a plan for this many workers instead of the whole graph.
    #[arg(long)]
    pub(crate) workers: Option<u32>,
    /// Switch aggregator memory of that plan.
    #[arg(long, default_value = "100MB")]
    pub(crate) switch_memory: String,
    /// Feature width of that plan's blocks (default: the dataset's feature width).
    #[arg(long)]
    pub(crate) width: Option<usize>,
    /// Print every block, not only the totals.
    #[arg(long)]
    pub(crate) per_block: bool,
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Serialize)]
struct Scored {
    order: &'static str,
    /// One report per block (one for the whole graph).
    blocks: Vec<SlotReport>,
    total_completion: u64,
    max_queue: u64,
    idle_outputs: u64,
}

pub(crate) fn run(args: Args) -> Result<()> {
    let dataset = args.input.dataset.load()?;
    let kinds: Vec<OrderKind> = parse_list::<String>(&args.order, "--order")?
        .iter()
        .map(|n| order_kind(n))
        .collect::<Result<_>>()?;
    let scope;
    let scored: Vec<Scored> = match args.workers {
        None => {
            scope = format!("whole graph ({} vertices)", dataset.num_vertices());
            let adj = Adjacency::of_graph(&dataset.graph);
            kinds
                .iter()
                .map(|&kind| {
                    summarise(
                        kind,
                        vec![evaluate(adj, &order(adj, kind, args.order_seed), args.k)],
                    )
                })
                .collect()
        }
        Some(workers) => {
            let assignment =
                Assignment::compute(&dataset.graph, workers, &args.input.partition.method())?;
            let width = args.width.unwrap_or_else(|| default_width(&dataset));
            let params = args
                .input
                .partition
                .block_params(parse_bytes(&args.switch_memory)?, width);
            let blocks = Blocks::build(&dataset.graph, &assignment, &params)?;
            scope = format!(
                "{} blocks of {workers} workers, width {}",
                blocks.blocks.len(),
                params.width
            );
            kinds
                .iter()
                .map(|&kind| {
                    summarise(
                        kind,
                        block_reports(&blocks, &assignment, kind, args.order_seed, args.k),
                    )
                })
                .collect()
        }
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&scored)?);
        return Ok(());
    }
    println!("{}: {scope}, k = {}", dataset.name, args.k);
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY);
    t.set_header(vec![
        "order",
        "block",
        "completion slot",
        "max queue",
        "idle output slots",
    ]);
    for s in &scored {
        if args.per_block {
            for (b, r) in s.blocks.iter().enumerate() {
                t.add_row(vec![
                    s.order.to_string(),
                    b.to_string(),
                    r.completion.to_string(),
                    r.max_queue.to_string(),
                    r.idle_outputs.to_string(),
                ]);
            }
        }
        t.add_row(vec![
            s.order.to_string(),
            "total".into(),
            s.total_completion.to_string(),
            s.max_queue.to_string(),
            s.idle_outputs.to_string(),
        ]);
    }
    println!("{t}");
    println!("(blocks run one after another: total completion is the sum over blocks, max queue the largest)");
    Ok(())
}

fn summarise(kind: OrderKind, blocks: Vec<SlotReport>) -> Scored {
    Scored {
        order: kind.name(),
        total_completion: blocks.iter().map(|r| r.completion).sum(),
        max_queue: blocks.iter().map(|r| r.max_queue).max().unwrap_or(0),
        idle_outputs: blocks.iter().map(|r| r.idle_outputs).sum(),
        blocks,
    }
}

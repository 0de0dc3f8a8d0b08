//! `switchgnn inspect`: statistics of a dataset as a table or JSON.

use anyhow::Result;
use comfy_table::{presets::UTF8_BORDERS_ONLY, Table};
use switchgnn_datasets::{SplitSource, Stats};

use crate::dataset_args::DatasetArgs;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    pub(crate) dataset: DatasetArgs,
    /// Print the statistics as JSON instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
}

pub(crate) fn run(args: Args) -> Result<()> {
    let dataset = args.dataset.load()?;
    let stats = Stats::of(&dataset);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&stats)?);
    } else {
        println!("{}", table(&stats));
    }
    Ok(())
}

fn table(s: &Stats) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY);
    t.set_header(vec!["dataset", &s.name]);
    let mut row = |k: &str, v: String| {
        t.add_row(vec![k.to_string(), v]);
    };
    row("vertices", s.vertices.to_string());
    row("edges (undirected)", s.edges.to_string());
    row("self-loops", s.self_loops.to_string());
    row("isolated vertices", s.isolated_vertices.to_string());
    row(
        "connected components",
        format!("{} (largest {})", s.components, s.largest_component),
    );
    let d = &s.degree;
    row(
        "degree mean / median / max",
        format!("{:.2} / {} / {}", d.mean, d.median, d.max),
    );
    row("degree share of top 20%", format!("{:.3}", d.top20_share));
    row("degree Gini", format!("{:.3}", d.gini));
    match &s.features {
        Some(f) => {
            let kind = if f.sparse { "sparse CSR" } else { "dense" };
            row("features", format!("{} ({kind})", f.width));
            row(
                "feature density",
                format!(
                    "{:.4} ({} non-zeros, {:.1} MB)",
                    f.density,
                    f.nonzeros,
                    f.bytes as f64 / 1e6
                ),
            );
        }
        None => row("features", "none".into()),
    }
    match &s.classes {
        Some(c) => {
            row("classes", c.count.to_string());
            row(
                "class balance",
                format!(
                    "majority {:.3}, largest/smallest {:.1}",
                    c.majority_share, c.imbalance
                ),
            );
            row("edge homophily", format!("{:.3}", c.edge_homophily));
        }
        None => row("classes", "no labels".into()),
    }
    let source = match &s.split.source {
        SplitSource::Given { name } => format!("given ({name})"),
        SplitSource::Random { seed, train, val } => {
            format!("random {train}/{val}/rest, seed {seed}")
        }
    };
    row(
        "split train / val / test",
        format!(
            "{} / {} / {}  [{source}]",
            s.split.train, s.split.val, s.split.test
        ),
    );
    t
}

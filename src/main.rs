//! `switchgnn`: the command line of the switchgnn framework. Each subcommand lives in its own
//! file under `commands/` and stays thin: the work happens in the library crates.

mod capture_args;
mod chip_args;
mod commands;
mod dataset_args;
mod framing_args;
mod job_args;
mod loopback_args;
mod partition_args;
mod progress;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

/// Distributed full-graph GNN training with in-network multicast and aggregation.
#[derive(Debug, Parser)]
#[command(name = "switchgnn", version, propagate_version = true)]
struct Cli {
    /// More log output (-v info, -vv debug, -vvv trace); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print statistics of a dataset: size, degree skew, components, features, classes, split.
    Inspect(commands::inspect::Args),
    /// Write a dataset to switchgnn's binary cache, so later runs skip parsing.
    Convert(commands::convert::Args),
    /// Generate a synthetic dataset from a preset and write it as a binary cache.
    Generate(commands::generate::Args),
    /// Boundary size and the traffic of host exchange, ideal in-network aggregation and block
    /// plans, for one or more worker counts.
    Analyze(commands::analyze::Args),
    /// Partition a graph across workers, cut its boundary into blocks that fit the switch, and
    /// write the plan directory.
    Prepare(commands::prepare::Args),
    /// Cut a plan's dataset into one shard per worker (and save the exchange plans a job
    /// needs), so that workers and the switch never load the whole graph.
    Shard(commands::shard::Args),
    /// Re-read a plan directory and check its checksums and invariants against its graph.
    VerifyPlan(commands::verify_plan::Args),
    /// Score send orders with the time-slot model: completion slot, maximum queue and idle
    /// output slots, for the whole graph or the blocks of a plan.
    OrderEval(commands::order_eval::Args),
    /// Run the software switch as a process, serving one job over UDP.
    Switch(commands::switch::Args),
    /// Run one worker of a job: exchange every layer through the switch and check the sums.
    Worker(commands::worker::Args),
    /// Start a switch and M workers on loopback, run every layer's exchange forward and
    /// backward in each mode, check them, and report time and bytes against the host exchange.
    Exchange(commands::exchange::Args),
    /// Train a GCN (or GraphSAGE): distributed over the software switch on loopback, in one
    /// process (--workers 1, the reference), or as one worker of a multi-host job (--job).
    Train(commands::train::Args),
    /// Simulate every exchange mode at paper scale (a 100 Gbps star of up to 128 workers) with
    /// the project's own switch model and engines; write tables, series and plots.
    Simulate(commands::simulate::Args),
    /// The Tofino program's control plane: what a plan needs of the switch, and the table
    /// entries that install it.
    P4(commands::p4::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.verbose);
    let result = match cli.command {
        Command::Inspect(args) => commands::inspect::run(args),
        Command::Convert(args) => commands::convert::run(args),
        Command::Generate(args) => commands::generate::run(args),
        Command::Analyze(args) => commands::analyze::run(args),
        Command::Prepare(args) => commands::prepare::run(args),
        Command::Shard(args) => commands::shard::run(args),
        Command::VerifyPlan(args) => commands::verify_plan::run(args),
        Command::OrderEval(args) => commands::order_eval::run(args),
        Command::Switch(args) => commands::switch::run(args),
        Command::Worker(args) => commands::worker::run(args),
        Command::Exchange(args) => commands::exchange::run(args),
        Command::Train(args) => commands::train::run(args),
        Command::Simulate(args) => commands::simulate::run(args),
        Command::P4(args) => commands::p4::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    // usvg warns once per label when the system has no fonts; the report says it once.
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(format!("{default},usvg=error")));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

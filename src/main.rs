//! `switchgnn`: the command line of the switchgnn framework. Each subcommand lives in its own
//! file under `commands/` and stays thin: the work happens in the library crates.

mod commands;
mod dataset_args;
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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.verbose);
    let result = match cli.command {
        Command::Inspect(args) => commands::inspect::run(args),
        Command::Convert(args) => commands::convert::run(args),
        Command::Generate(args) => commands::generate::run(args),
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
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

//! `switchgnn simulate`: the paper-scale question — epoch time, traffic, queues and aggregator
//! use of every exchange mode on a 100 Gbps star of up to 128 workers — answered by the
//! discrete-event simulator running the project's own switch model and engines. Writes a report
//! folder with tables, series and plots. With `--background`, instead: each exchange beside
//! other jobs' TCP flows, in each setting of the workers' rate control. With `--racks`,
//! instead: each exchange on leaf-spine fabrics against the star. With both, the first on each
//! fabric of the second.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use switchgnn_dataplane::engine::Timers;
use switchgnn_partition::size::parse_bytes;
use switchgnn_sim::background::FlowSizes;
use switchgnn_sim::contention::contention_table;
use switchgnn_sim::modes::RateControl;
use switchgnn_sim::racks::{rack_table, FabricSpec};
use switchgnn_sim::report::{epoch_table, write_report};
use switchgnn_sim::sweep::{
    contention_sweep, rack_sweep, sweep, ContentionSpec, PcapSpec, SweepSpec,
};
use switchgnn_sim::{HostSpec, LinkSpec, SimKind, SimMode};

use crate::partition_args::{default_width, parse_list, parse_sizes, PlanInputs};
use crate::progress::Bars;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    pub(crate) input: PlanInputs,
    /// Worker counts, comma-separated (one host per worker on the star).
    #[arg(long, default_value = "32,64,96,128")]
    pub(crate) workers: String,
    /// Switch aggregator memories, comma-separated.
    #[arg(long, default_value = "10MB,100MB")]
    pub(crate) switch_memory: String,
    /// Modes, comma-separated: host, g3, host-reduce (host-only partial sums), host-hybrid
    /// (per worker pair, raw copies or partial sums, the fewer rows), strawman, switchgnn,
    /// switchgnn-nogamr, reduce (partial sums added in the switch), hybrid (per source and
    /// destination worker, multicast or a partial sum, chosen for the chip), auto (per run, the
    /// kind the planner predicts fastest on the chip among host, host-reduce, host-hybrid,
    /// switchgnn, reduce and hybrid), best-host (per run, the fastest host-only kind by the
    /// chip model: the baseline).
    #[arg(long, default_value = "host,g3,strawman,switchgnn,reduce,hybrid,auto")]
    pub(crate) modes: String,
    /// Width exchanged at each layer (default: the paper's 4-layer GCN with 128 hidden units,
    /// each layer exchanging the narrower of its input and output: min(F,128),128,128,min(128,C)).
    #[arg(long)]
    pub(crate) feature_dims: Option<String>,
    /// Compute time of one epoch, ms (what `switchgnn train` logs as train minus comm seconds).
    #[arg(long, default_value_t = 0.0)]
    pub(crate) compute_ms: f64,
    /// Link bandwidth, Gbit/s.
    #[arg(long, default_value_t = 100.0)]
    pub(crate) gbps: f64,
    /// One-way link delay, µs.
    #[arg(long, default_value_t = 2.0)]
    pub(crate) delay_us: f64,
    /// Buffer of each switch egress queue (drop-tail).
    #[arg(long, default_value = "10MB")]
    pub(crate) buffer: String,
    /// Egress backlog above which the switch marks ECN.
    #[arg(long, default_value = "100KB")]
    pub(crate) ecn_threshold: String,
    #[command(flatten)]
    pub(crate) chip: crate::chip_args::ChipArgs,
    /// Host processing cost per packet sent and per packet received, ns.
    #[arg(long, default_value_t = 20)]
    pub(crate) host_packet_ns: u64,
    #[command(flatten)]
    pub(crate) framing: crate::framing_args::FramingArgs,
    /// Data chunks a worker keeps unacknowledged.
    #[arg(long, default_value_t = 512)]
    pub(crate) window: usize,
    /// How the workers' rate control answers ECN echoes: halve (the rate halves, once per
    /// cut interval), proportional (by half the fraction of acks that came back marked, as
    /// DCTCP does), off (echoes ignored).
    #[arg(long, default_value = "halve", value_parser = parse_rate_control)]
    pub(crate) rate_control: RateControl,
    /// Retransmission timeout floor of the engines, µs.
    #[arg(long, default_value_t = 50.0)]
    pub(crate) rto_us: f64,
    /// A worker that receives no contribution for this long fetches what is missing, µs.
    #[arg(long, default_value_t = 200.0)]
    pub(crate) result_timeout_us: f64,
    /// Width of a time-series bucket, µs.
    #[arg(long, default_value_t = 10.0)]
    pub(crate) sample_us: f64,
    /// Simulate every 32-lane chunk as its own packet (slower; the default sends one packet per
    /// vertex standing for all of its chunks, which the tests show changes times by at most 2.1%).
    #[arg(long)]
    pub(crate) exact_chunks: bool,
    /// Probability that a packet is lost on each hop (seeded by --seed): the engines'
    /// retransmissions and fetches under loss.
    #[arg(long, default_value_t = 0.0)]
    pub(crate) loss: f64,
    /// Simulations run at once (each holds its plan and engines in memory).
    #[arg(long, default_value_t = 2)]
    pub(crate) jobs: usize,
    /// Capture each run's packets at the switch's ports (Ethernet, IP, UDP and the switchgnn
    /// header; decode with tools/wireshark/switchgnn.lua): one pcap per run, named FILE with
    /// the run's id before the extension; simulated time from 0. Bundled runs capture one
    /// packet per bundle (use --exact-chunks for every chunk).
    #[arg(long, value_name = "FILE")]
    pub(crate) pcap: Option<PathBuf>,
    /// Stop each run's capture after this many packets.
    #[arg(long, default_value_t = 100_000, value_name = "N")]
    pub(crate) pcap_packets: u64,
    /// Instead of the sweep: run each exchange (first layer) beside background TCP flows of
    /// these flow-size distributions (websearch, hadoop), in each setting of the workers' ECN
    /// rate control (halve, proportional, off), against the exchange alone, its share bound
    /// and the flows alone; writes contention.json, contention.md and contention.svg. With
    /// --racks, on each of those leaf-spine fabrics instead of the star.
    #[arg(long, value_name = "SIZES")]
    pub(crate) background: Option<String>,
    /// Background load: the fraction of each host's link the flows offer.
    #[arg(long, default_value_t = 0.5)]
    pub(crate) load: f64,
    /// Background flows arrive over this span (default: each exchange's time alone).
    #[arg(long, value_name = "MS")]
    pub(crate) background_ms: Option<f64>,
    /// Instead of the sweep: run each exchange (first layer) on the star and on leaf-spine
    /// fabrics of these rack counts (comma-separated; each must divide the worker counts),
    /// with two-level aggregation: every leaf sums its rack's contributions, spine 0 finishes;
    /// writes fabric.json, fabric.md and fabric.svg. With --background: the background study
    /// on each of these fabrics instead of the star.
    #[arg(long, value_name = "RACKS")]
    pub(crate) racks: Option<String>,
    /// Spine switches of the leaf-spine fabrics.
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub(crate) spines: u16,
    /// Oversubscriptions of the leaf-spine fabrics, comma-separated: a rack's hosts' bandwidth
    /// over its uplinks' (2 = 2:1).
    #[arg(long, default_value = "1,2", value_name = "RATIOS")]
    pub(crate) oversubscription: String,
    /// With --racks: one level of aggregation instead of two (the leaves only forward, the
    /// exchange's one switch is spine 0).
    #[arg(long, requires = "racks")]
    pub(crate) one_level: bool,
    /// Report folder.
    #[arg(short, long)]
    pub(crate) out: PathBuf,
}

fn parse_rate_control(name: &str) -> Result<RateControl, String> {
    RateControl::from_name(name).ok_or_else(|| {
        let names: Vec<_> = RateControl::ALL.iter().map(|r| r.name()).collect();
        format!("one of: {}", names.join(", "))
    })
}

fn parse_modes(text: &str) -> Result<Vec<SimMode>> {
    text.split(',')
        .map(|m| {
            SimMode::from_name(m.trim()).with_context(|| {
                let names: Vec<_> = SimMode::ALL
                    .iter()
                    .chain(&[SimMode::of(SimKind::Auto), SimMode::of(SimKind::BestHost)])
                    .map(|m| m.name())
                    .collect();
                format!("unknown mode `{m}` (one of: {})", names.join(", "))
            })
        })
        .collect()
}

/// What `simulate` studies besides the plain grid, from its flags.
#[derive(Debug)]
pub(crate) enum Study {
    /// The grid of the sweep on the star.
    Grid,
    /// Each exchange on leaf-spine fabrics (`--racks`).
    Fabrics(FabricSpec),
    /// Each exchange beside background TCP flows (`--background`), on the star or on the
    /// fabrics of `--racks`.
    Contention(ContentionSpec),
}

impl TryFrom<&Args> for Study {
    type Error = anyhow::Error;

    fn try_from(args: &Args) -> Result<Study> {
        let fabrics = match &args.racks {
            Some(text) => Some(FabricSpec {
                racks: parse_list(text, "--racks")?,
                spines: args.spines,
                oversubscription: args
                    .oversubscription
                    .split(',')
                    .map(|x| {
                        x.trim().parse::<f64>().with_context(|| {
                            format!("--oversubscription: `{x}` is not a ratio like 2 or 1.5")
                        })
                    })
                    .collect::<Result<_>>()?,
                two_level: !args.one_level,
            }),
            None => None,
        };
        let Some(text) = &args.background else {
            return Ok(fabrics.map_or(Study::Grid, Study::Fabrics));
        };
        let sizes = text
            .split(',')
            .map(|s| {
                FlowSizes::from_name(s.trim())
                    .with_context(|| format!("unknown flow sizes `{s}` (websearch or hadoop)"))
            })
            .collect::<Result<Vec<_>>>()?;
        let duration_ns = match args.background_ms {
            Some(ms) if ms > 0.0 && ms.is_finite() => Some((ms * 1e6).round() as u64),
            Some(ms) => bail!("--background-ms {ms} must be positive"),
            None => None,
        };
        Ok(Study::Contention(ContentionSpec {
            sizes,
            load: args.load,
            duration_ns,
            fabrics,
        }))
    }
}

/// The sweep's settings from the flags and the dataset (its name, and its widths when
/// `--feature-dims` names none), checked by [`SweepSpec::validate`].
fn sweep_spec(args: &Args, dataset: &switchgnn_datasets::Dataset) -> Result<SweepSpec> {
    let feature_dims = match &args.feature_dims {
        Some(s) => parse_list(s, "--feature-dims")?,
        None => {
            let f = default_width(dataset);
            let c = dataset
                .labels
                .as_ref()
                .map_or(2, |l| l.num_classes().max(2)) as usize;
            vec![f.min(128), 128, 128, c.min(128)]
        }
    };
    let spec = SweepSpec {
        dataset: dataset.name.clone(),
        workers: parse_list(&args.workers, "--workers")?,
        memories: parse_sizes(&args.switch_memory)?,
        modes: parse_modes(&args.modes)?,
        feature_dims,
        compute_ms: args.compute_ms,
        link: LinkSpec {
            gbps: args.gbps,
            delay_ns: (args.delay_us * 1e3).round() as u64,
        },
        buffer_bytes: parse_bytes(&args.buffer)?,
        ecn_threshold: parse_bytes(&args.ecn_threshold)?,
        chip: args.chip.choice(crate::chip_args::LoopedPorts::Ports(0))?,
        host: HostSpec {
            nic_gbps: args.gbps,
            per_packet_ns: args.host_packet_ns,
            framing: args.framing.framing(),
        },
        frame_overhead: switchgnn_sim::driver::FRAME_OVERHEAD,
        sample_ns: (args.sample_us * 1e3).round().max(1.0) as u64,
        window: args.window.max(1),
        rate_control: args.rate_control,
        timers: Timers {
            rto: (args.rto_us * 1e3).round().max(1.0) as u64,
            result: (args.result_timeout_us * 1e3).round().max(1.0) as u64,
            ..Timers::default()
        },
        bundle: !args.exact_chunks,
        seed: args.input.partition.seed,
        loss: args.loss,
        jobs: args.jobs.max(1),
        pcap: args.pcap.clone().map(|path| PcapSpec {
            path,
            packets: args.pcap_packets,
        }),
    };
    if args.sample_us.is_nan() || args.sample_us <= 0.0 {
        bail!("--gbps and --sample-us must be positive");
    }
    spec.validate()?;
    Ok(spec)
}

pub(crate) fn run(args: Args) -> Result<()> {
    let study = Study::try_from(&args)?;
    if let Some(dir) = args.pcap.as_ref().and_then(|p| p.parent()) {
        if !dir.as_os_str().is_empty() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {} for the captures", dir.display()))?;
        }
    }
    let mut dataset = args.input.dataset.load()?;
    let spec = sweep_spec(&args, &dataset)?;
    // The simulator sends made-up values of the right width: the dataset's own features would
    // only take memory (Reddit's are 0.56 GB).
    dataset.features = None;
    let bars = Bars::new();
    let plan_spec = |w: u16, memory: u64| {
        args.input.partition.plan_spec(
            &args.input.dataset.dataset,
            u32::from(w),
            memory,
            spec.feature_dims.clone(),
        )
    };
    let started = std::time::Instant::now();
    match study {
        Study::Contention(background) => {
            let studies = contention_sweep(&dataset, &spec, &background, &plan_spec, &bars)?;
            bars.finish();
            write_contention(&args.out, &studies, started)
        }
        Study::Fabrics(fabrics) => {
            let studies = rack_sweep(&dataset, &spec, &fabrics, &plan_spec, &bars)?;
            bars.finish();
            write_fabrics(&args.out, &fabrics, &studies, started)
        }
        Study::Grid => {
            let result = sweep(&dataset, &spec, &plan_spec, &bars)?;
            bars.finish();
            write_grid(&args.out, &result, started)
        }
    }
}

/// The contention study's report.
fn write_contention(
    out: &std::path::Path,
    studies: &[switchgnn_sim::contention::Contention],
    started: std::time::Instant,
) -> Result<()> {
    let table = contention_table(studies);
    write_study(
        out,
        "contention",
        "The exchange beside background traffic",
        "Times on the chip each row names; slowdowns are completion times over each flow's \
         time on an empty fabric; `p99 ×` is the flows' p99 slowdown over theirs with no \
         exchange running.",
        &table,
        studies,
        &switchgnn_sim::plot::contention_figure(studies)?,
        started,
    )
}

/// The fabric study's report.
fn write_fabrics(
    out: &std::path::Path,
    fabrics: &FabricSpec,
    studies: &[switchgnn_sim::racks::RackStudy],
    started: std::time::Instant,
) -> Result<()> {
    let table = rack_table(studies);
    write_study(
        out,
        "fabric",
        "The exchange on leaf-spine fabrics",
        if fabrics.two_level {
            "Times on the chip each row names. Two-level aggregation: every leaf is such a \
             chip running the switch model for its rack (it sums its workers' \
             contributions, finishes the sums they alone feed, relays the rest and sends \
             partial sums up) and spine 0 finishes the other sums; the other spines \
             forward. `× star`: over the same exchange on the star. `spine layer`: frame \
             bytes on the links between leaves and spines, both directions; `spine × \
             host`: over the host exchange's on the same fabric."
        } else {
            "Times on the chip each row names, which is the exchange's switch on spine 0 \
             (one level of aggregation: every packet goes up to it and down again); leaves \
             and the other spines forward. `× star`: over the same exchange on the star. \
             `spine layer`: frame bytes on the links between leaves and spines, both \
             directions; `spine × host`: over the host exchange's on the same fabric."
        },
        &table,
        studies,
        &switchgnn_sim::plot::rack_figure(studies)?,
        started,
    )
}

/// The grid's report folder, its epoch table and the simulator's pace.
fn write_grid(
    out: &std::path::Path,
    result: &switchgnn_sim::sweep::SweepResult,
    started: std::time::Instant,
) -> Result<()> {
    let command: Vec<String> = std::env::args().collect();
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    write_report(out, result, &command.join(" "))?;
    println!("{}", epoch_table(result));
    let events: u64 = result.runs.iter().map(|r| r.events).sum();
    let sim_seconds: f64 = result.runs.iter().map(|r| r.wall_seconds).sum();
    println!(
        "{} simulations, {:.1} M events at {:.2} M events/s; {:.0} s in all. Report: {}",
        result.runs.len(),
        events as f64 / 1e6,
        events as f64 / sim_seconds.max(1e-9) / 1e6,
        started.elapsed().as_secs_f64(),
        out.display()
    );
    Ok(())
}

/// Write a study's report into `out`: `NAME.json` (the studies), `NAME.md` (title, the command,
/// `about`, the table) and the figure as `NAME.svg` and `NAME.png`, each atomically; then print
/// the table and how long the studies took since `started`.
#[allow(clippy::too_many_arguments)]
fn write_study<T: serde::Serialize>(
    out: &std::path::Path,
    name: &str,
    title: &str,
    about: &str,
    table: &str,
    studies: &[T],
    svg: &str,
    started: std::time::Instant,
) -> Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    crate::job_args::write_json(&out.join(format!("{name}.json")), &studies)?;
    let command: Vec<String> = std::env::args().collect();
    let md = format!("# {title}\n\n`{}`\n\n{about}\n\n{table}", command.join(" "));
    let png = switchgnn_sim::plot::to_png(svg)
        .map_err(|e| anyhow::anyhow!("cannot draw {name}.png: {e}"))?;
    let files: [(&str, &[u8]); 3] = [
        ("md", md.as_bytes()),
        ("svg", svg.as_bytes()),
        ("png", &png),
    ];
    for (ext, bytes) in files {
        let path = out.join(format!("{name}.{ext}"));
        switchgnn_datasets::atomic::write_atomically(&path, |w| {
            std::io::Write::write_all(w, bytes)
        })
        .with_context(|| format!("cannot write {}", path.display()))?;
    }
    println!("{table}");
    println!(
        "{} studies in {:.0} s. Report: {}",
        studies.len(),
        started.elapsed().as_secs_f64(),
        out.display()
    );
    Ok(())
}

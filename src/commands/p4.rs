//! `switchgnn p4`: the Tofino program's control plane — what a plan needs of the switch
//! (`resources`) and the table entries that install it (`entries`).

use std::net::Ipv4Addr;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use comfy_table::{presets::UTF8_BORDERS_ONLY, Table};
use switchgnn_p4::entries::Part;
use switchgnn_p4::resources::{self, Assumptions, Report};
use switchgnn_p4::{bfrt, p4runtime, Entries, Install};
use switchgnn_partition::size::parse_bytes;
use switchgnn_transport::{ExchangeKind, Session};

use crate::job_args::{load_dataset, parse_mode, read_plan, write_json};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    pub(crate) command: P4Command,
}

#[derive(Debug, clap::Subcommand)]
pub(crate) enum P4Command {
    /// What one or more plans need of a Tofino 1 running p4/switchgnn.p4 (stages, register
    /// memory, table entries, recirculation, reloads), against its limits, with the planner
    /// options that make a plan fit.
    Resources(ResourcesArgs),
    /// The table entries, multicast groups and mirror sessions that install a plan's job, as
    /// P4Runtime JSON or a bfrt_python script (`switchgnn switch --entries` loads the JSON).
    Entries(EntriesArgs),
    /// Compile the program with p4c's Tofino back end (built by scripts/p4c.sh) and print what
    /// it used next to the resource model's figures; the compiler's logs and outputs stay in
    /// --out. Exits non-zero when it does not compile.
    Compile(CompileArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct CompileArgs {
    /// The chip: tofino (Tofino 1, TNA) or tofino2 (Tofino 2, T2NA).
    #[arg(long, default_value = "tofino")]
    pub(crate) target: String,
    /// Build the exchange alone, without the in-switch all-reduce region
    /// (-DSWITCHGNN_NO_ALLREDUCE: slices are dropped, as for a job without a region).
    #[arg(long)]
    pub(crate) no_allreduce: bool,
    /// Where the compiler writes (default: target/p4c/<target>-<full|exchange>).
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,
    /// The p4c install folder (default: $SWITCHGNN_P4C/install, else
    /// ~/.cache/switchgnn/p4c-<commit>/install, where scripts/p4c.sh puts it).
    #[arg(long, value_name = "DIR")]
    pub(crate) p4c: Option<PathBuf>,
    /// Also write the figures as JSON.
    #[arg(long, value_name = "FILE")]
    pub(crate) json: Option<PathBuf>,
    /// More options for p4c-barefoot, after `--` (e.g. `-- --create-graphs`).
    #[arg(last = true, value_name = "P4C_OPTION")]
    pub(crate) p4c_options: Vec<String>,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ResourcesArgs {
    /// Plan directories written by `switchgnn prepare`.
    #[arg(long = "plan", value_name = "DIR", required = true)]
    pub(crate) plans: Vec<PathBuf>,
    /// Also write the reports as JSON.
    #[arg(long, value_name = "FILE")]
    pub(crate) json: Option<PathBuf>,
    /// Assumed usable share of an exact-match table's words.
    #[arg(long, default_value_t = 0.8)]
    pub(crate) load_factor: f64,
    /// Assumed table entries the control plane installs per second.
    #[arg(long, default_value_t = 100_000.0)]
    pub(crate) entry_rate: f64,
    /// Host link rate, Gb/s.
    #[arg(long, default_value_t = 100.0)]
    pub(crate) link_gbps: f64,
    /// Bandwidth of each pipe's internal recirculation port, Gb/s.
    #[arg(long, default_value_t = 100.0)]
    pub(crate) recirc_gbps: f64,
    /// Pipes the program spreads aggregators and passes over (4 on a Tofino 1, 2 on its
    /// 32-port parts).
    #[arg(long, default_value_t = switchgnn_p4::program::MAX_PIPES)]
    pub(crate) pipes: u8,
    /// The chip whose bound is reported beside (default: the smallest real chip that hosts
    /// the plan's workers).
    #[command(flatten)]
    pub(crate) chip: crate::chip_args::ChipArgs,
    /// Host processing cost per packet sent and per packet received, ns (for the bound).
    #[arg(long, default_value_t = 20.0)]
    pub(crate) host_packet_ns: f64,
    /// Slots of the job's all-reduce region, as `p4 entries --allreduce-slots` installs it
    /// (its banks take aggregators of the home pipe).
    #[arg(long, default_value_t = switchgnn_transport::job::AllReduce::default().slots)]
    pub(crate) allreduce_slots: u16,
}

/// One plan's report with the chip model's bound on each layer's exchange.
#[derive(Debug, serde::Serialize)]
struct PlanResources {
    #[serde(flatten)]
    report: Report,
    chip: String,
    bounds: Vec<LayerBound>,
}

#[derive(Debug, serde::Serialize)]
struct LayerBound {
    layer: usize,
    width: usize,
    bound: switchgnn_chip::Bound,
}

/// The chip model's bound on every layer's exchange of `plan` on the chip `args` pick.
fn layer_bounds(
    plan: &switchgnn_partition::Plan,
    args: &ResourcesArgs,
) -> Result<(switchgnn_chip::Chip, Vec<LayerBound>)> {
    use switchgnn_scheduler::exchange::ExchangePlans;
    let chip = args
        .chip
        .choice(crate::chip_args::LoopedPorts::Ports(0))?
        .resolve(plan.manifest.spec.workers, args.link_gbps)?;
    let cost = switchgnn_chip::HostCost {
        delays: switchgnn_chip::Delays::NONE,
        link_gbps: args.link_gbps,
        per_packet_ns: args.host_packet_ns,
        frame_overhead: switchgnn_dataplane::wire::FRAME_OVERHEAD,
        framing: Default::default(),
    };
    let mut bounds = Vec::new();
    for (layer, &width) in plan.manifest.spec.feature_dims.iter().enumerate() {
        let xplan = switchgnn_dataplane::plan::ExchangePlan::from_plan(plan, layer)
            .context("cannot build the exchange plan")?;
        let load = switchgnn_chip::Load::of(&xplan, cost.frame_overhead).spread_on(
            &xplan,
            &chip,
            Some(plan.manifest.spec.switch_memory),
            cost.frame_overhead,
        );
        bounds.push(LayerBound {
            layer,
            width,
            bound: switchgnn_chip::Bound::of(&chip, &load, &cost),
        });
    }
    Ok((chip, bounds))
}

#[derive(Debug, clap::Args)]
pub(crate) struct EntriesArgs {
    /// The plan directory.
    #[arg(long, value_name = "DIR")]
    pub(crate) plan: PathBuf,
    /// `p4runtime` (JSON WriteRequests) or `bfrt` (a bfrt_python script).
    #[arg(long, value_parser = ["p4runtime", "bfrt"])]
    pub(crate) format: String,
    /// Where to write them.
    #[arg(long, short, value_name = "FILE")]
    pub(crate) out: PathBuf,
    /// The exchange: switch (SwitchGNN blocks), reduce (pre-aggregated partial sums) or host
    /// (plain forwarding).
    #[arg(long, default_value = "switch")]
    pub(crate) exchange: String,
    /// The job id (as in the job file).
    #[arg(long, default_value_t = 1)]
    pub(crate) job: u16,
    /// The dataset (host and reduce exchanges; default: the one the plan was prepared from).
    #[arg(long)]
    pub(crate) dataset: Option<String>,
    /// Worker ports and addresses: CSV with the header `rank,port,mac,ip,udp_port` (default:
    /// Tofino 1 front-panel ports in order, MACs 02:53:47:00:*, IPs 10.0.*.*, UDP 47000).
    #[arg(long, value_name = "FILE")]
    pub(crate) hosts: Option<PathBuf>,
    /// The switch's own IPv4 address (the job file's switch address).
    #[arg(long, default_value = "10.0.255.254")]
    pub(crate) switch_ip: Ipv4Addr,
    /// The job's index in the program's per-job registers (0-63); jobs sharing a switch need
    /// distinct slots and disjoint aggregator ranges.
    #[arg(long, default_value_t = 0)]
    pub(crate) job_slot: u16,
    /// First aggregator of the job's range.
    #[arg(long, default_value_t = 0)]
    pub(crate) agg_base: u64,
    /// The internal recirculation port of the job's home pipe, where its first passes and its
    /// barrier run (68, 196, 324 or 452: the port of pipe 0, 1, 2 or 3).
    #[arg(long, default_value_t = 68)]
    pub(crate) recirc_port: u16,
    /// Pipes whose registers hold the job's aggregators, each reached through its own
    /// recirculation port (4 on a Tofino 1; 2 on its 32-port parts).
    #[arg(long, default_value_t = switchgnn_p4::program::MAX_PIPES)]
    pub(crate) pipes: u8,
    /// First multicast group id of the job: its block go, then its pass groups (1 + 256 ids
    /// per recirculation path). Jobs sharing a switch need disjoint ranges.
    #[arg(long, default_value_t = 1)]
    pub(crate) group_base: u16,
    /// Front-panel ports to put in loopback as recirculation paths, the same local numbers in
    /// each of the --pipes pipes (so a multiple of --pipes): the lowest 100G ports no worker
    /// uses. The bfrt script loops them; a P4Runtime file lists them for the operator.
    #[arg(long, default_value_t = 0)]
    pub(crate) loopback_ports: u32,
    /// Slots of the job's in-switch all-reduce region (a power of two; the job file's
    /// `[allreduce] slots` default): 0 installs none, and the workers sum over tcp.
    #[arg(long, default_value_t = switchgnn_transport::job::AllReduce::default().slots)]
    pub(crate) allreduce_slots: u16,
    /// First aggregator of the all-reduce's banks in the home pipe (default: counted down from
    /// the top of the pipe as the bank words count up, above the exchange's aggregators).
    #[arg(long)]
    pub(crate) allreduce_base: Option<u64>,
    /// First word of the job's region in the program's bank registers (default: --job-slot
    /// x 2 x slots); jobs sharing a switch need disjoint ranges of 2 x slots words.
    #[arg(long)]
    pub(crate) allreduce_bank_base: Option<u64>,
    /// Egress queue depth that marks ECN (e.g. 64KiB, the job file's default).
    #[arg(long, default_value = "64KiB")]
    pub(crate) ecn_threshold: String,
    /// Which entries: `all` (every block's tables stay loaded), `static` (what the job needs
    /// whatever block runs), or `S:B` (the tables of block B of block set S, within half of
    /// each table) for a control plane that reloads blocks.
    #[arg(long, default_value = "all")]
    pub(crate) part: String,
    /// bfrt only: a script that deletes these table rows instead of adding them (for the
    /// block a reloading control plane is done with).
    #[arg(long)]
    pub(crate) remove: bool,
}

pub(crate) fn run(args: Args) -> Result<()> {
    match args.command {
        P4Command::Resources(a) => resources_cmd(a),
        P4Command::Entries(a) => entries_cmd(a),
        P4Command::Compile(a) => compile_cmd(a),
    }
}

fn compile_cmd(args: CompileArgs) -> Result<()> {
    use switchgnn_p4::compile::{self, Build, Target};
    let target: Target = args.target.parse()?;
    let build = Build {
        target,
        allreduce: !args.no_allreduce,
    };
    let install = args.p4c.unwrap_or_else(compile::default_install);
    let driver = compile::find_compiler(&install)?;
    let out = args
        .out
        .unwrap_or_else(|| PathBuf::from("target/p4c").join(build.name()));
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    let spinner = indicatif::ProgressBar::new_spinner();
    spinner.set_message(format!(
        "p4c-barefoot --target {} ({}): minutes; output in {}",
        target.name(),
        if build.allreduce {
            "with the all-reduce"
        } else {
            "exchange only"
        },
        out.display()
    ));
    spinner.enable_steady_tick(std::time::Duration::from_millis(200));
    let outcome = compile::compile(&driver, build, &out, &args.p4c_options);
    spinner.finish_and_clear();
    let outcome = outcome?;
    let log = &outcome.log;
    let model = resources::ProgramModel::of(build.allreduce);
    println!(
        "{} ({}), p4c {} — {}",
        target.name(),
        if build.allreduce {
            "with the all-reduce region"
        } else {
            "exchange only"
        },
        &compile::P4C_COMMIT[..7],
        match &outcome.binary {
            Some(bin) => format!("compiled: {}", bin.display()),
            None => format!(
                "did not compile (status {}); log: {}",
                outcome.status.map_or("none".to_string(), |s| s.to_string()),
                out.join("compile.log").display()
            ),
        }
    );
    if !log.ingress_stages.is_empty() {
        println!(
            "table placement, each round: ingress stages {:?} of {}, egress {:?}, critical path {:?}",
            log.ingress_stages,
            target.stages(),
            log.egress_stages,
            log.critical_path
        );
    }
    for e in &log.errors {
        println!("  {e}");
    }
    if let Some(c) = &outcome.compiled {
        let mut t = Table::new();
        t.load_preset(UTF8_BORDERS_ONLY);
        t.set_header(["per pipe", "compiler", "model (p4 resources)", "difference"]);
        for fig in compile::side_by_side(c, &model) {
            let (want, diff) = match fig.model {
                Some(w) => (
                    w.to_string(),
                    format!("{:+}", fig.compiled as i64 - w as i64),
                ),
                None => ("-".to_string(), "-".to_string()),
            };
            t.add_row([fig.what.to_string(), fig.compiled.to_string(), want, diff]);
        }
        println!("{t}");
        println!(
            "The model's stages are the Tofino 1 layout it assumes (p4/README.md, \"Where it \
             stands\"); its stateful ALUs count one per register; its SRAM counts the \
             registers' words, without the spare bank each stage of registers takes."
        );
    }
    if let Some(path) = &args.json {
        let figures = outcome
            .compiled
            .as_ref()
            .map(|c| compile::side_by_side(c, &model));
        write_json(
            path,
            &serde_json::json!({ "outcome": outcome, "beside_the_model": figures }),
        )?;
    }
    if outcome.binary.is_none() {
        bail!(
            "the program did not compile for {} (see {})",
            target.name(),
            out.join("compile.log").display()
        );
    }
    Ok(())
}

/// `--loopback-ports` as the program loops them: the same number in every pipe.
fn looped_per_pipe(ports: u32, pipes: u8) -> Result<u32> {
    let pipes = u32::from(pipes.max(1));
    if ports % pipes != 0 {
        bail!(
            "--loopback-ports {ports} over {pipes} pipes: the program loops the same local port \
             numbers in every pipe, so give a multiple of {pipes}"
        );
    }
    Ok(ports / pipes)
}

fn resources_cmd(args: ResourcesArgs) -> Result<()> {
    let assumptions = Assumptions {
        load_factor: args.load_factor,
        entry_rate: args.entry_rate,
        link_gbps: args.link_gbps,
        recirc_gbps: args.recirc_gbps,
        pipes: args.pipes,
        allreduce_slots: args.allreduce_slots,
        looped_per_pipe: looped_per_pipe(args.chip.loopback_count()?, args.pipes)?,
    };
    if !(assumptions.load_factor > 0.0 && assumptions.load_factor <= 1.0) {
        bail!("--load-factor must lie in (0, 1]");
    }
    if !(1..=switchgnn_p4::program::MAX_PIPES).contains(&assumptions.pipes) {
        bail!(
            "--pipes must lie in 1..={}",
            switchgnn_p4::program::MAX_PIPES
        );
    }
    let mut reports = Vec::new();
    for dir in &args.plans {
        let plan = read_plan(dir)?;
        let report = Report::of(&plan, &assumptions);
        print_report(dir, &report);
        let (chip, bounds) = layer_bounds(&plan, &args)?;
        println!(
            "the chip model's bound on {}, passes spread over every pipe as the program \
             spreads them:",
            chip.describe()
        );
        for b in &bounds {
            println!(
                "  layer {} (width {}): {:.3} ms, by {} (recirculation {:.3} ms, host link {:.3} ms)",
                b.layer,
                b.width,
                b.bound.seconds * 1e3,
                b.bound.dominant.name(),
                b.bound.recirculation_s * 1e3,
                b.bound.host_link_s * 1e3
            );
        }
        reports.push(PlanResources {
            report,
            chip: chip.preset.name().to_string(),
            bounds,
        });
    }
    println!(
        "The program does not compile for Tofino 1 yet (p4/README.md, \"Where it stands\"; \
         `switchgnn p4 compile`): the checks above are the plan's. Its ingress stages as p4c \
         placed it for Tofino 2:"
    );
    for (stage, tables, registers) in resources::STAGES {
        println!("  stage {stage}: tables {tables}; registers {registers}");
    }
    println!("Tofino 1 figures assumed (sources):");
    for s in resources::SOURCES {
        println!("  {}: {} ({})", s.figure, s.value, s.source);
    }
    println!(
        "Assumptions without a public source: exact-match load factor {}, {} entries/s \
         installed, recirculation {} Gb/s per pipe's internal port over {} pipes.",
        assumptions.load_factor, assumptions.entry_rate, assumptions.recirc_gbps, assumptions.pipes
    );
    if assumptions.looped_per_pipe > 0 {
        println!(
            "Looped ports: {} per pipe at {} Gb/s; with the internal port, {} paths per pipe \
             carry {:.0} Gb/s as the program spreads its {} hash slots over them.",
            assumptions.looped_per_pipe,
            assumptions.link_gbps,
            assumptions.paths(),
            resources::path_gbps(
                assumptions.looped_per_pipe,
                assumptions.recirc_gbps,
                assumptions.link_gbps
            ),
            switchgnn_p4::program::PATH_SLOTS
        );
    }
    if let Some(path) = &args.json {
        write_json(path, &reports)?;
    }
    Ok(())
}

fn print_report(dir: &std::path::Path, r: &Report) {
    let memory = r.switch_memory as f64 / 1e6;
    let limit = r
        .table_entries
        .map_or("none".to_string(), |n| n.to_string());
    println!(
        "\n{} — {} on {} workers, {memory} MB aggregator memory, table-entry limit {limit}, \
         {} boundary vertices",
        dir.display(),
        r.dataset,
        r.workers,
        r.boundary_vertices
    );
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY);
    t.set_header(["resource", "needs", "Tofino 1", "fits", "what"]);
    for c in &r.checks {
        t.add_row([
            c.resource.clone(),
            c.need.to_string(),
            c.have.to_string(),
            if c.fits { "yes" } else { "NO" }.to_string(),
            c.note.clone(),
        ]);
    }
    println!("{t}");
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY);
    t.set_header([
        "width",
        "blocks",
        "peak aggregators",
        "pass entries (all / largest block)",
        "vertices (all / largest)",
        "recirculated per exchange",
        "uploads at line rate",
        "recirculation time",
        "table loads per exchange",
    ]);
    for s in &r.sets {
        t.add_row([
            s.width.to_string(),
            s.blocks.to_string(),
            s.peak_aggregators.to_string(),
            format!("{} / {}", s.pairs_total, s.pairs_peak),
            format!("{} / {}", s.vertices_total, s.vertices_peak),
            format!(
                "{} packets, {:.1} MB",
                s.recirc_packets,
                s.recirc_bytes as f64 / 1e6
            ),
            format!("{:.3} ms", s.host_s * 1e3),
            format!(
                "{:.3} ms ({:.1}x)",
                s.recirc_s * 1e3,
                s.recirc_s / s.host_s.max(1e-12)
            ),
            format!("{:.3} s", s.reload_s),
        ]);
    }
    println!("{t}");
    let verdict = if r.fits_resident {
        "fits a Tofino 1 with every block's tables resident"
    } else if r.fits_with_reloads {
        "fits a Tofino 1 if the control plane reloads the block tables between blocks (double-buffered)"
    } else {
        "does NOT fit a Tofino 1 as planned"
    };
    println!("verdict: {verdict}");
    if !r.advice.is_empty() {
        println!("to make it fit, prepare with: {}", r.advice.join(" "));
    } else if !r.fits_resident && !r.fits_with_reloads {
        println!("no prepare option fixes this: see the rows marked NO");
    }
}

fn entries_cmd(args: EntriesArgs) -> Result<()> {
    let plan = read_plan(&args.plan)?;
    let mode = parse_mode(&args.exchange)?;
    let session = match mode {
        ExchangeKind::Switchgnn => {
            Session::switchgnn(&plan).context("cannot build the exchange plans")?
        }
        ExchangeKind::Host
        | ExchangeKind::BalancedHost
        | ExchangeKind::HostReduce
        | ExchangeKind::HostHybrid
        | ExchangeKind::HostTwoLevel
        | ExchangeKind::Reduce
        | ExchangeKind::Hybrid => {
            let name = args
                .dataset
                .clone()
                .unwrap_or_else(|| plan.manifest.spec.dataset.clone());
            let dataset = load_dataset(&name)?;
            crate::job_args::check_plan_fits(&plan, &dataset.graph, &args.plan)?;
            Session::new(&plan, &dataset.graph, mode).context("cannot build the exchange plans")?
        }
        ExchangeKind::Auto => bail!(
            "the P4 entries are for one exchange kind: name it (--exchange switch, reduce or host; \
             `switchgnn verify-plan` shows what the plan chose per layer)"
        ),
        ExchangeKind::Strawman => bail!(
            "the strawman has no Tofino program: it allocates aggregators from a free pool on \
             first arrival, which one pipeline pass cannot do (see p4/README.md)"
        ),
    };
    let workers = session.workers();
    let mut install = Install::defaults(workers);
    if let Some(path) = &args.hosts {
        install.read_hosts(path, workers)?;
    }
    install.switch.ip = u32::from(args.switch_ip);
    install.job_slot = args.job_slot;
    install.agg_base = args.agg_base;
    install.recirc_port = args.recirc_port;
    install.pipes = args.pipes;
    install.loop_ports(args.loopback_ports)?;
    // The plan's exchange choice may have counted looped ports these entries do not loop (or
    // fewer): the bound it was chosen by would then be too good. Say so.
    let planned = plan
        .manifest
        .exchange
        .as_ref()
        .and_then(|c| c.planned_on.as_ref())
        .map_or(0, |on| on.loopback_ports);
    if planned > args.loopback_ports {
        eprintln!(
            "note: the plan's exchange choice counted {planned} front-panel ports in loopback; \
             these entries loop {} (--loopback-ports): its recirculation runs slower than it \
             weighed",
            args.loopback_ports
        );
    }
    install.go_group = args.group_base;
    install.allreduce_slots = args.allreduce_slots;
    install.allreduce_agg_base = args.allreduce_base;
    install.allreduce_bank_base = args.allreduce_bank_base;
    install.ecn_threshold_bytes = parse_bytes(&args.ecn_threshold)?;
    let part = Part::parse(&args.part)
        .with_context(|| format!("--part `{}`: give all, static or SET:BLOCK", args.part))?;
    if args.remove && args.format != "bfrt" {
        bail!("--remove writes a bfrt_python script: add --format bfrt");
    }
    let entries = Entries::build(args.job, &session.layers, session.checksum, &install)
        .and_then(|e| e.part(part))
        .with_context(|| format!("cannot install the plan in {}", args.plan.display()))?;
    let text = match args.format.as_str() {
        "p4runtime" => p4runtime::to_json(&entries),
        _ => bfrt::to_script(&entries, args.remove),
    };
    switchgnn_datasets::atomic::write_atomically(&args.out, |w| {
        std::io::Write::write_all(w, text.as_bytes())
    })
    .with_context(|| format!("cannot write {}", args.out.display()))?;
    let counts = switchgnn_p4::entries::count_by_table(&entries.tables);
    let region = match install.allreduce_region() {
        Some((agg, bank, banks)) if !entries.clears.is_empty() => format!(
            "; all-reduce: {} slots, {banks} banks at aggregator {agg} of pipe {} and bank word \
             {bank}, {} register words cleared",
            args.allreduce_slots,
            install.home_pipe(),
            entries.clears.iter().map(|c| c.count).sum::<u64>()
        ),
        _ => String::new(),
    };
    let looped = if install.looped.is_empty() {
        String::new()
    } else {
        format!(
            "; {} recirculation paths per pipe (dev ports {:?} in loopback)",
            1 + install.looped.len(),
            install.looped_ports()
        )
    };
    eprintln!(
        "p4 entries ({}): job {} ({} workers): {} table entries ({}), {} multicast groups, {} \
         mirror sessions{region}{looped} -> {}",
        entries.meta.part,
        args.job,
        workers,
        entries.tables.len(),
        counts
            .iter()
            .map(|(t, n)| format!("{} {n}", t.rsplit('.').next().unwrap_or(t)))
            .collect::<Vec<_>>()
            .join(", "),
        entries.groups.len(),
        entries.sessions.len(),
        args.out.display()
    );
    Ok(())
}

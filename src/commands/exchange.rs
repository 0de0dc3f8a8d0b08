//! `switchgnn exchange`: the whole dataplane on one machine. Prepares (or reuses) a plan,
//! then for each exchange mode starts `switchgnn switch` and M `switchgnn worker` processes on
//! loopback, runs every layer forward and backward, checks every result against the direct
//! computation, and prints time, packets and bytes on the wire against the traffic model and
//! against the host exchange.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use comfy_table::{presets::UTF8_BORDERS_ONLY, Table};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use switchgnn_datasets::cache;
use switchgnn_partition::Plan;
use switchgnn_scheduler::exchange::chosen_kind;
use switchgnn_transport::job::{DpdkSettings, ExchangeVia, TransportKind};
use switchgnn_transport::runner::WorkerReport;
use switchgnn_transport::server::ServerReport;
use switchgnn_transport::{ExchangeKind, JobFile};

use crate::job_args::{parse_exchange, write_json};
use crate::loopback_args::LoopbackArgs;
use crate::partition_args::{parse_list, reuse_or_prepare, PlanInputs};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    pub(crate) input: PlanInputs,
    /// Number of worker processes.
    #[arg(long, default_value_t = 4)]
    pub(crate) workers: u32,
    /// Exchanges to run, comma-separated: switch (SwitchGNN blocks), host, g3, host-reduce,
    /// host-hybrid, host-two-level (one rack here: host-reduce's sums), strawman, reduce, hybrid, auto (per layer, the kind the planner picks), tcp (the host
    /// exchange over TCP between the workers, the kernel's own transport: the baseline; over
    /// udp only).
    #[arg(long, default_value = "switch,host")]
    pub(crate) exchange: String,
    /// Width exchanged at each layer, comma-separated (default: the dataset's feature width,
    /// then 16, a two-layer GCN's hidden width).
    #[arg(long)]
    pub(crate) feature_dims: Option<String>,
    /// Plan directory to reuse, or to create when it does not exist.
    #[arg(long, value_name = "DIR")]
    pub(crate) plan: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) net: LoopbackArgs,
    /// Rounds of the schedule (every layer forward, then backward).
    #[arg(long, default_value_t = 1)]
    pub(crate) epochs: u32,
    /// Keep the run folder (job files, logs, reports) here instead of a temporary one.
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,
    /// Write the summary as JSON.
    #[arg(long, value_name = "FILE")]
    pub(crate) json: Option<PathBuf>,
    /// Give up on a mode after this many seconds.
    #[arg(long, default_value_t = 600)]
    pub(crate) timeout: u64,
    /// Cores of the switch process's model (`switch --cores`): its aggregators spread over
    /// this many shards by destination, each on a core of its own.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub(crate) switch_cores: u16,
    /// The datapath: udp (the kernel's loopback), or dpdk (a build with the `dpdk` feature:
    /// DPDK's memif between the processes, without hugepages or PCI devices).
    #[arg(long, default_value = "udp")]
    pub(crate) transport: String,
}

/// One mode's measured run, per exchange and in total.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ModeSummary {
    pub(crate) mode: String,
    pub(crate) seconds: f64,
    pub(crate) exchanges: Vec<ExchangeRow>,
    /// UDP payload bytes (headers included) of every packet, counted at the workers'
    /// sockets in both directions, control messages included; over TCP, plus the stream
    /// bytes of the workers' connections (packets: plus the kernel's TCP segments).
    pub(crate) wire_bytes: u64,
    pub(crate) wire_packets: u64,
    pub(crate) switch: ServerReport,
    /// `auto`: the kind each layer ran and the chip its pick was made for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) picked: Option<Picked>,
}

/// What `auto` ran: the plan's pick per layer, by the chip model's bound on `chip`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Picked {
    pub(crate) kinds: Vec<String>,
    pub(crate) chip: String,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct ExchangeRow {
    pub(crate) seq: u32,
    pub(crate) name: String,
    pub(crate) width: usize,
    pub(crate) blocks: usize,
    /// The slowest worker's time.
    pub(crate) seconds: f64,
    /// Dataplane packets and bytes (header + lanes) sent plus received by the workers; over
    /// TCP, the kernel's segments and the stream bytes (frames: vertex ids and lanes).
    pub(crate) packets: u64,
    pub(crate) bytes: u64,
    /// Feature payload (4 B per lane) up and down, first sends and resends.
    pub(crate) payload: u64,
    /// The partition crate's traffic model for this layer and mode (none for the hybrid
    /// exchange, whose mix the model does not know).
    pub(crate) model: Option<u64>,
    pub(crate) exact: bool,
}

pub(crate) fn run(args: Args) -> Result<()> {
    let modes: Vec<(ExchangeKind, ExchangeVia)> = args
        .exchange
        .split(',')
        .map(|m| parse_exchange(m.trim()))
        .collect::<Result<_>>()?;
    let transport = TransportKind::parse(&args.transport)
        .with_context(|| format!("unknown transport `{}` (udp or dpdk)", args.transport))?;
    if transport == TransportKind::Dpdk && modes.iter().any(|m| m.1 == ExchangeVia::Tcp) {
        bail!(
            "--exchange tcp runs over the kernel's TCP, not --transport dpdk: run it in a udp \
             run beside the others"
        );
    }
    if modes.iter().any(|m| m.1 == ExchangeVia::Tcp) {
        args.net.check_tcp()?;
    }
    if !transport.is_available() {
        bail!(
            "--transport {} needs a build with DPDK: cargo build --release --features dpdk",
            args.transport
        );
    }
    if args.workers < 2 || args.workers > 512 {
        bail!("--workers {} must be between 2 and 512", args.workers);
    }
    args.net.check()?;
    let run_dir = RunDir::new(args.out.clone())?;
    let dataset = args.input.dataset.load()?;
    // Children read the graph from a cache file: exactly this graph, loaded fast.
    let cache_path = run_dir.path().join("dataset.sgnn");
    cache::write(&dataset, &cache_path)
        .with_context(|| format!("cannot write {}", cache_path.display()))?;
    let plan_dir = args
        .plan
        .clone()
        .unwrap_or_else(|| run_dir.path().join("plan"));
    let plan = plan_for(&args, &dataset, &plan_dir)?;
    println!(
        "{} ({} vertices, {} edges) on {} workers; widths {:?}; run folder {}",
        dataset.name,
        dataset.num_vertices(),
        dataset.graph.num_edges(),
        args.workers,
        plan.manifest.spec.feature_dims,
        run_dir.path().display()
    );

    let mut summaries = Vec::new();
    for (mode, exchange_via) in modes {
        let mut job = JobFile {
            job: 1,
            plan: absolute(&plan_dir)?,
            dataset: Some(absolute(&cache_path)?.display().to_string()),
            mode,
            exchange_via,
            switch: "127.0.0.1:0".parse().expect("an address"),
            world: args.workers as u16,
            bind: Some("127.0.0.1:0".parse().expect("an address")),
            collective: None,
            transport: TransportKind::Udp,
            dpdk: DpdkSettings::default(),
            timeouts: Default::default(),
            link: args.net.link(),
            faults: args.net.faults(),
            secret_file: None,
            allreduce: Default::default(),
            fabric: None,
            chip: None,
        };
        if exchange_via == ExchangeVia::Tcp {
            job.validate()?;
        }
        if transport == TransportKind::Dpdk {
            // memif between the processes; addresses only tell the workers apart.
            job.transport = transport;
            job.switch = "10.0.0.1:47000".parse().expect("an address");
            job.bind = None;
            job.dpdk = DpdkSettings {
                eal: ["--no-huge", "--no-pci", "-m", "192"]
                    .map(String::from)
                    .to_vec(),
                memif: Some(
                    absolute(run_dir.path())?.join(format!("{}.memif", job.exchange_name())),
                ),
                ..DpdkSettings::default()
            };
            job.validate()?;
        }
        let summary = run_mode(&args, &job, &plan, run_dir.path())?;
        print_mode(&summary);
        summaries.push(summary);
    }
    print_comparison(&summaries);
    if let Some(path) = &args.json {
        write_json(path, &summaries)?;
    }
    let inexact: Vec<&str> = summaries
        .iter()
        .filter(|s| s.exchanges.iter().any(|x| !x.exact))
        .map(|s| s.mode.as_str())
        .collect();
    if !inexact.is_empty() {
        bail!("{inexact:?} differ from the direct computation");
    }
    Ok(())
}

/// Reuse the plan in `dir` when it fits this dataset and request; prepare it otherwise.
fn plan_for(args: &Args, dataset: &switchgnn_datasets::Dataset, dir: &Path) -> Result<Plan> {
    let feature_dims = match &args.feature_dims {
        Some(text) => parse_list(text, "--feature-dims")?,
        None => vec![crate::partition_args::default_width(dataset), 16],
    };
    let spec = args.input.partition.plan_spec(
        &args.input.dataset.dataset,
        args.workers,
        args.net.memory()?,
        feature_dims,
    );
    reuse_or_prepare(dataset, &spec, dir, false)
}

fn absolute(path: &Path) -> Result<PathBuf> {
    std::path::absolute(path).with_context(|| format!("cannot resolve {}", path.display()))
}

/// The folder of a run: kept when the user named it, removed otherwise.
struct RunDir {
    path: PathBuf,
    _temp: Option<tempfile::TempDir>,
}

impl RunDir {
    fn new(out: Option<PathBuf>) -> Result<RunDir> {
        match out {
            Some(path) => {
                std::fs::create_dir_all(&path)
                    .with_context(|| format!("cannot create {}", path.display()))?;
                Ok(RunDir { path, _temp: None })
            }
            None => {
                let temp = tempfile::Builder::new()
                    .prefix("switchgnn-exchange-")
                    .tempdir()?;
                Ok(RunDir {
                    path: temp.path().to_owned(),
                    _temp: Some(temp),
                })
            }
        }
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

/// A child process and where its output goes.
struct Proc {
    name: String,
    child: Child,
    log: PathBuf,
}

impl Proc {
    fn spawn(name: String, args: &[String], log: PathBuf) -> Result<Proc> {
        let exe = std::env::current_exe().context("cannot find the switchgnn executable")?;
        let out = std::fs::File::create(&log)
            .with_context(|| format!("cannot create {}", log.display()))?;
        let child = Command::new(exe)
            .args(args)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .with_context(|| format!("cannot start the {name}"))?;
        Ok(Proc { name, child, log })
    }

    /// The last lines of its log, for an error message.
    fn tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(8)..].join("\n    ")
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn run_mode(args: &Args, job: &JobFile, plan: &Plan, dir: &Path) -> Result<ModeSummary> {
    let name = job.exchange_name();
    let mode_dir = dir.join(name);
    std::fs::create_dir_all(&mode_dir)?;
    let job_path = mode_dir.join("job.toml");
    std::fs::write(&job_path, job.to_toml())
        .with_context(|| format!("cannot write {}", job_path.display()))?;
    let s = |p: &Path| p.display().to_string();
    let ready = mode_dir.join("switch.addr");
    let switch_report = mode_dir.join("switch.json");
    // A kept run folder may hold an earlier run's files: never read those.
    for stale in std::iter::once(ready.clone())
        .chain(std::iter::once(switch_report.clone()))
        .chain((0..job.world).map(|r| mode_dir.join(format!("worker-{r}.json"))))
    {
        match std::fs::remove_file(&stale) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("cannot remove {}", stale.display()))
            }
            _ => {}
        }
    }
    let started = Instant::now();
    let deadline = started + Duration::from_secs(args.timeout);
    let mut procs = vec![Proc::spawn(
        "switch".into(),
        &[
            "switch".into(),
            "--job".into(),
            s(&job_path),
            "--ready-file".into(),
            s(&ready),
            "--report".into(),
            s(&switch_report),
            "--cores".into(),
            args.switch_cores.to_string(),
        ],
        mode_dir.join("switch.log"),
    )?];
    let addr = wait_ready(&mut procs[0], &ready, deadline)?;
    for rank in 0..job.world {
        procs.push(Proc::spawn(
            format!("worker {rank}"),
            &[
                "worker".into(),
                "--job".into(),
                s(&job_path),
                "--switch".into(),
                addr.clone(),
                "--rank".into(),
                rank.to_string(),
                "--epochs".into(),
                args.epochs.to_string(),
                "--report".into(),
                s(&mode_dir.join(format!("worker-{rank}.json"))),
            ],
            mode_dir.join(format!("worker-{rank}.log")),
        )?);
    }
    let bar = ProgressBar::new_spinner().with_style(
        ProgressStyle::with_template("{spinner} {msg} {elapsed}").expect("valid template"),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    let result = wait_all(&mut procs, deadline, &bar, name);
    bar.finish_and_clear();
    result?;
    let seconds = started.elapsed().as_secs_f64();

    let switch: ServerReport = read_json(&switch_report)?;
    let workers: Vec<WorkerReport> = (0..job.world)
        .map(|r| read_json(&mode_dir.join(format!("worker-{r}.json"))))
        .collect::<Result<_>>()?;
    Ok(summarise(job, plan, seconds, switch, &workers))
}

fn wait_ready(switch: &mut Proc, ready: &Path, deadline: Instant) -> Result<String> {
    loop {
        if let Ok(text) = std::fs::read_to_string(ready) {
            return Ok(serde_json::from_str(&text)?);
        }
        if let Some(status) = switch.child.try_wait()? {
            bail!(
                "the switch exited ({status}) before listening:\n    {}",
                switch.tail()
            );
        }
        if Instant::now() > deadline {
            bail!("the switch did not start listening in time");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Wait for every process; the first failure stops the others and names itself.
fn wait_all(procs: &mut [Proc], deadline: Instant, bar: &ProgressBar, mode: &str) -> Result<()> {
    let mut running: Vec<bool> = vec![true; procs.len()];
    while running.iter().any(|&r| r) {
        for (i, p) in procs.iter_mut().enumerate() {
            if !running[i] {
                continue;
            }
            if let Some(status) = p.child.try_wait()? {
                running[i] = false;
                if !status.success() {
                    bail!(
                        "{mode}: the {} failed ({status}); its log ({}) ends:\n    {}",
                        p.name,
                        p.log.display(),
                        p.tail()
                    );
                }
            }
        }
        let left = running.iter().filter(|&&r| r).count();
        bar.set_message(format!(
            "{mode}: {left} of {} processes running",
            procs.len()
        ));
        if Instant::now() > deadline {
            let names: Vec<&str> = procs
                .iter()
                .zip(&running)
                .filter(|(_, &r)| r)
                .map(|(p, _)| p.name.as_str())
                .collect();
            bail!("{mode}: timed out waiting for {names:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let text =
        std::fs::read(path).with_context(|| format!("cannot read report {}", path.display()))?;
    serde_json::from_slice(&text).with_context(|| format!("malformed report {}", path.display()))
}

fn summarise(
    job: &JobFile,
    plan: &Plan,
    seconds: f64,
    switch: ServerReport,
    workers: &[WorkerReport],
) -> ModeSummary {
    let first = &workers[0];
    let exchanges = first
        .exchanges
        .iter()
        .enumerate()
        .map(|(i, x)| {
            let all = workers.iter().map(|w| &w.exchanges[i]);
            let traffic = &plan.manifest.traffic[usize::from(x.layer)];
            // `auto` runs the kind the plan records for the layer (it ran, so there is one).
            let kind = match job.mode {
                ExchangeKind::Auto => chosen_kind(plan, usize::from(x.layer)).ok(),
                k => Some(k),
            };
            // Over TCP, the host exchange's copies: its model.
            let model = match kind {
                Some(ExchangeKind::Switchgnn) => Some(traffic.plan_bytes),
                Some(ExchangeKind::Strawman) => Some(traffic.ideal_bytes),
                // One partial sum per destination and remote worker, host to host, up and
                // down: on a symmetric graph as many rows as the host exchange's copies.
                Some(
                    ExchangeKind::Host | ExchangeKind::BalancedHost | ExchangeKind::HostReduce,
                ) => Some(traffic.host_bytes),
                // Partial sums go up as host-exchange copies would (one per vertex and remote
                // worker, mirrored); one sum per destination comes down.
                Some(ExchangeKind::Reduce) => {
                    Some(traffic.host_bytes / 2 + traffic.ideal_bytes / 2)
                }
                // The traffic model does not know the hybrids' mix (the host hybrid's per
                // pair choice included: at most the host exchange's rows).
                // Nor where the host two-level exchange's proxies are.
                Some(
                    ExchangeKind::Hybrid
                    | ExchangeKind::HostHybrid
                    | ExchangeKind::HostTwoLevel
                    | ExchangeKind::Auto,
                )
                | None => None,
            };
            let dir = if x.backward { "backward" } else { "forward" };
            ExchangeRow {
                seq: x.seq,
                name: format!("layer {} {dir}", x.layer),
                width: x.width,
                blocks: x.blocks,
                seconds: all.clone().map(|e| e.seconds).fold(0.0, f64::max),
                packets: all
                    .clone()
                    .map(|e| e.engine.packets_sent + e.engine.packets_received)
                    .sum(),
                bytes: all
                    .clone()
                    .map(|e| e.engine.bytes_sent + e.engine.bytes_received)
                    .sum(),
                payload: all
                    .clone()
                    .map(|e| {
                        e.engine.payload_sent + e.engine.payload_resent + e.engine.payload_received
                    })
                    .sum(),
                model,
                exact: all.clone().all(|e| e.mismatched_rows == 0),
            }
        })
        .collect();
    let wire = workers.iter().map(|w| &w.wire.to_switch);
    // Over TCP, the workers' connections besides their control traffic with the switch.
    let tcp = workers.iter().filter_map(|w| w.tcp.as_ref());
    let picked = match (job.mode, &plan.manifest.exchange) {
        (ExchangeKind::Auto, Some(choice)) => Some(Picked {
            kinds: choice.layers.iter().map(|l| l.kind.clone()).collect(),
            chip: choice.chip.clone(),
        }),
        _ => None,
    };
    ModeSummary {
        mode: job.exchange_name().to_string(),
        seconds,
        exchanges,
        picked,
        wire_bytes: wire
            .clone()
            .map(|c| c.bytes_sent + c.bytes_received)
            .sum::<u64>()
            + tcp
                .clone()
                .map(|t| t.bytes_sent + t.bytes_received)
                .sum::<u64>(),
        wire_packets: wire
            .map(|c| c.packets_sent + c.packets_received)
            .sum::<u64>()
            + tcp
                .map(|t| t.segments_sent + t.segments_received)
                .sum::<u64>(),
        switch,
    }
}

fn mb(bytes: u64) -> String {
    format!("{:.3}", bytes as f64 / 1e6)
}

fn print_mode(s: &ModeSummary) {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY);
    t.set_header(vec![
        "exchange",
        "width",
        "blocks",
        "time (ms)",
        "packets",
        "wire MB",
        "payload MB",
        "model MB",
        "payload / model",
        "exact",
    ]);
    for x in &s.exchanges {
        t.add_row(vec![
            x.name.clone(),
            x.width.to_string(),
            x.blocks.to_string(),
            format!("{:.1}", 1e3 * x.seconds),
            x.packets.to_string(),
            mb(x.bytes),
            mb(x.payload),
            x.model.map_or("-".into(), mb),
            x.model.map_or("-".into(), |m| {
                format!("{:.3}", x.payload as f64 / m.max(1) as f64)
            }),
            if x.exact { "yes" } else { "NO" }.to_string(),
        ]);
    }
    let k = &s.switch.counters;
    println!("\n{} exchange: {:.2} s in all", s.mode, s.seconds);
    if let Some(p) = &s.picked {
        // The pick is for a chip; say so where it runs on the software switch instead.
        println!(
            "auto ran {} (by layer): the planner's pick by the chip model's bound on {}; this \
             run goes through the software switch, which that model does not describe: to \
             find the fastest kind here, name several (--exchange host,host-reduce,switchgnn)",
            p.kinds.join(", "),
            p.chip
        );
    }
    println!("{t}");
    let what = if s.mode == "tcp" {
        "TCP segments and stream bytes between the workers, and UDP control with the switch"
    } else {
        "UDP payloads"
    };
    println!(
        "on the wire: {} packets, {} MB ({what}, both directions, control included); \
         switch: {} aggregations, {} raw forwards, {} drops, {} ECN marks, peak {} aggregators",
        s.wire_packets,
        mb(s.wire_bytes),
        k.aggregations,
        k.raw_forwarded,
        k.total_drops(),
        k.ecn_marks,
        k.peak_aggregators
    );
}

/// Each kind against the host exchange, and against the host exchange over TCP when it ran.
fn print_comparison(summaries: &[ModeSummary]) {
    for (base, what) in [
        ("host", "host exchange"),
        ("tcp", "tcp (the kernel's transport)"),
    ] {
        let Some(b) = summaries.iter().find(|s| s.mode == base) else {
            continue;
        };
        let base_time: f64 = b.exchanges.iter().map(|x| x.seconds).sum();
        for s in summaries.iter().filter(|s| s.mode != base) {
            let time: f64 = s.exchanges.iter().map(|x| x.seconds).sum();
            println!(
                "{} vs {what}: wire bytes {:.3}×, packets {:.3}×, exchange time {:.3}×",
                s.mode,
                s.wire_bytes as f64 / b.wire_bytes.max(1) as f64,
                s.wire_packets as f64 / b.wire_packets.max(1) as f64,
                time / base_time.max(1e-9)
            );
        }
    }
}

//! The report folder of a sweep: tables as CSV and JSON, every run's time series and per-link
//! bytes, the plots, and a README with the command and the parameters. Every file is written
//! atomically; `report.json` carries a format version and is checked when read back.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use switchgnn_datasets::atomic::write_atomically;
use switchgnn_partition::size::format_bytes;
use thiserror::Error;

use crate::modes::RateControl;
use crate::plot;
use crate::sweep::{EpochRow, LayerRow, RunRow, SweepResult, SweepSpec};

/// 2: `runs` hold the full run rows (bytes by kind, nanoseconds) instead of a summary.
/// 3: runs and epochs name their chip and carry the chip model's bound; the spec holds the
/// chip choice, the egress buffer and the ECN threshold instead of a switch spec.
pub const FORMAT_VERSION: u32 = 3;

/// Why a report could not be written or read.
#[derive(Debug, Error)]
pub enum ReportError {
    /// A table could not be written.
    #[error(transparent)]
    Write(#[from] switchgnn_datasets::Error),
    /// A file could not be written or read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What failed.
        #[source]
        source: std::io::Error,
    },
    /// A report file is not one this build reads.
    #[error("{path}: {message}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// A figure could not be drawn.
    #[error(transparent)]
    Plot(#[from] plot::PlotError),
}

/// `report.json`: everything but the series and per-link rows (those have their own files).
/// Written from the sweep's rows without copying them; read back owned.
#[derive(Debug, Serialize, Deserialize)]
pub struct ReportFile<'a> {
    /// The version of this file's layout.
    pub format_version: u32,
    /// The command line that made it.
    pub command: String,
    /// The sweep it reports.
    pub spec: SweepSpec,
    /// Per-epoch rows.
    pub epochs: Cow<'a, [EpochRow]>,
    /// Per-layer rows.
    pub layers: Cow<'a, [LayerRow]>,
    /// Per-run rows.
    pub runs: Cow<'a, [RunRow]>,
}

#[derive(Debug, Serialize)]
struct EpochCsv {
    workers: u16,
    switch_memory_bytes: String,
    mode: &'static str,
    comm_ms: f64,
    compute_ms: f64,
    epoch_ms: f64,
    link_bytes: u64,
    peak_queue_bytes: u64,
}

#[derive(Debug, Serialize)]
struct LayerCsv {
    workers: u16,
    switch_memory_bytes: String,
    mode: &'static str,
    layer: usize,
    direction: &'static str,
    width: usize,
    comm_ns: u64,
    link_bytes: u64,
}

#[derive(Debug, Serialize)]
struct LinkCsv {
    host: usize,
    uplink_bytes: u64,
    downlink_bytes: u64,
    downlink_peak_backlog_bytes: u64,
    downlink_drops: u64,
}

#[derive(Debug, Serialize)]
struct SeriesCsv {
    time_us: f64,
    sent_gbps: f64,
    delivered_gbps: f64,
    aggregated_gbps: f64,
    raw_gbps: f64,
    dropped_bytes: u64,
    queue_max_bytes: u64,
    aggregators_max: usize,
    recirculation_utilisation: f64,
}

fn memory_text(m: Option<u64>) -> String {
    m.map_or(String::new(), |m| m.to_string())
}

fn csv_bytes<T: Serialize>(rows: impl IntoIterator<Item = T>) -> std::io::Result<Vec<u8>> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for r in rows {
        w.serialize(r).map_err(std::io::Error::other)?;
    }
    w.into_inner()
        .map_err(|e| std::io::Error::other(e.to_string()))
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), ReportError> {
    write_atomically(path, |w| w.write_all(bytes))?;
    Ok(())
}

fn mkdir(path: &Path) -> Result<(), ReportError> {
    std::fs::create_dir_all(path).map_err(|source| ReportError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Write the report folder `dir` (created if missing); `command` is the command line that
/// produced it.
pub fn write_report(dir: &Path, result: &SweepResult, command: &str) -> Result<(), ReportError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ReportError::Io { path, source }
    };
    for sub in ["series", "links", "plots"] {
        mkdir(&dir.join(sub))?;
    }
    let epochs = csv_bytes(result.epochs.iter().map(|e| EpochCsv {
        workers: e.workers,
        switch_memory_bytes: memory_text(e.switch_memory),
        mode: e.mode.name(),
        comm_ms: e.comm_ms,
        compute_ms: e.compute_ms,
        epoch_ms: e.epoch_ms,
        link_bytes: e.link_bytes,
        peak_queue_bytes: e.peak_queue_bytes,
    }))
    .map_err(io(&dir.join("epochs.csv")))?;
    write(&dir.join("epochs.csv"), &epochs)?;
    let layers = csv_bytes(result.layers.iter().map(|l| LayerCsv {
        workers: l.workers,
        switch_memory_bytes: memory_text(l.switch_memory),
        mode: l.mode.name(),
        layer: l.layer,
        direction: if l.backward { "backward" } else { "forward" },
        width: l.width,
        comm_ns: l.comm_ns,
        link_bytes: l.link_bytes,
    }))
    .map_err(io(&dir.join("layers.csv")))?;
    write(&dir.join("layers.csv"), &layers)?;
    let runs = csv_bytes(&result.runs).map_err(io(&dir.join("runs.csv")))?;
    write(&dir.join("runs.csv"), &runs)?;

    for r in &result.runs {
        let id = r.id();
        let links = csv_bytes(
            r.links
                .iter()
                .enumerate()
                .map(|(host, &(u, d, p, x))| LinkCsv {
                    host,
                    uplink_bytes: u,
                    downlink_bytes: d,
                    downlink_peak_backlog_bytes: p,
                    downlink_drops: x,
                }),
        )
        .map_err(io(&dir.join("links")))?;
        write(&dir.join("links").join(format!("{id}.csv")), &links)?;
        let s = &r.series;
        let rows = s.buckets.iter().enumerate().map(|(i, b)| SeriesCsv {
            time_us: (i as u64 * s.bucket_ns) as f64 / 1e3,
            sent_gbps: s.gbps(b.sent),
            delivered_gbps: s.gbps(b.delivered.total()),
            aggregated_gbps: s.gbps(b.delivered.aggregated),
            raw_gbps: s.gbps(b.delivered.raw),
            dropped_bytes: b.dropped,
            queue_max_bytes: b.queue_max,
            aggregators_max: b.aggregators_max,
            recirculation_utilisation: b.recirculation_ns / s.bucket_ns as f64,
        });
        let series = csv_bytes(rows).map_err(io(&dir.join("series")))?;
        write(&dir.join("series").join(format!("{id}.csv")), &series)?;
        let json = serde_json::to_vec(s).map_err(|e| io(&dir.join("series"))(e.into()))?;
        write(&dir.join("series").join(format!("{id}.json")), &json)?;
    }

    let report = ReportFile {
        format_version: FORMAT_VERSION,
        command: command.to_string(),
        spec: result.spec.clone(),
        epochs: Cow::Borrowed(&result.epochs),
        layers: Cow::Borrowed(&result.layers),
        runs: Cow::Borrowed(&result.runs),
    };
    let json = serde_json::to_vec_pretty(&report).map_err(|e| io(dir)(e.into()))?;
    write(&dir.join("report.json"), &json)?;

    if !plot::fonts_available() {
        tracing::warn!(
            "no system fonts: the PNG plots have no labels (Debian: apt install fonts-dejavu-core); the SVGs do"
        );
    }
    for (name, svg) in plot::figures(result)? {
        write(
            &dir.join("plots").join(format!("{name}.svg")),
            svg.as_bytes(),
        )?;
        let png = plot::to_png(&svg).map_err(|e| plot::PlotError::Draw {
            name: name.clone(),
            message: e.to_string(),
        })?;
        write(&dir.join("plots").join(format!("{name}.png")), &png)?;
    }
    write(&dir.join("README.md"), readme(result, command).as_bytes())?;
    Ok(())
}

/// Read `report.json` back, checking its version.
pub fn read_report(dir: &Path) -> Result<ReportFile<'static>, ReportError> {
    let path = dir.join("report.json");
    let bytes = std::fs::read(&path).map_err(|source| ReportError::Io {
        path: path.clone(),
        source,
    })?;
    let report: ReportFile = serde_json::from_slice(&bytes).map_err(|e| ReportError::Format {
        path: path.clone(),
        message: e.to_string(),
    })?;
    if report.format_version != FORMAT_VERSION {
        return Err(ReportError::Format {
            path,
            message: format!(
                "format version {} (this build reads {FORMAT_VERSION})",
                report.format_version
            ),
        });
    }
    Ok(report)
}

fn memory_label(m: Option<u64>) -> String {
    m.map_or("—".into(), format_bytes)
}

/// The epoch table as Markdown, with each mode's epoch time against the best host-only kind's
/// (the fastest of the host exchange, G3 and host-only pre-aggregation run at the same worker
/// count; its bound against the least host-only bound).
pub fn epoch_table(result: &SweepResult) -> String {
    let mut t = String::from(
        "| workers | chip | switch memory | mode | comm ms | bound ms | epoch ms | best host-only | ÷ it | best ÷ its best | traffic | ÷ its traffic | peak queue |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for e in &result.epochs {
        let host_only = || {
            result
                .epochs
                .iter()
                .filter(|h| h.workers == e.workers && !h.mode.exchange_kind().in_network())
        };
        let base = host_only().min_by(|a, b| a.epoch_ms.total_cmp(&b.epoch_ms));
        let least_bound = host_only().map(|h| h.bound_ms).min_by(f64::total_cmp);
        let ratio = |a: f64, b: Option<f64>| b.map_or("—".into(), |b| format!("{:.2}", a / b));
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {:.3} | {:.3} | {:.3} | {} | {} | {} | {} | {} | {} |",
            e.workers,
            e.chip,
            memory_label(e.switch_memory),
            e.mode.name(),
            e.comm_ms,
            e.bound_ms,
            e.epoch_ms,
            base.map_or("—", |h| h.mode.name()),
            ratio(e.epoch_ms, base.map(|h| h.epoch_ms)),
            // The most any schedule could gain over the host-only kinds: the bounds' ratio.
            ratio(e.bound_ms, least_bound),
            format_bytes(e.link_bytes),
            ratio(e.link_bytes as f64, base.map(|h| h.link_bytes as f64)),
            format_bytes(e.peak_queue_bytes),
        );
    }
    t
}

/// The sweep's chip in words.
fn chip_choice(c: &switchgnn_chip::ChipChoice) -> String {
    let mut s = match c.preset {
        Some(p) => p.name().to_string(),
        None => "the smallest real one that hosts each worker count (tofino1-32 up to 32, \
                 tofino1-64 up to 64, tofino2 up to 128)"
            .to_string(),
    };
    if c.spare_loopback {
        s += " with every front-panel port no worker needs in loopback";
    } else if c.loopback_ports > 0 {
        s += &format!(" with {} front-panel ports in loopback", c.loopback_ports);
    }
    if let Some(n) = c.recirculation_ports {
        s += &format!(", {n} recirculation ports used");
    }
    s
}

fn readme(result: &SweepResult, command: &str) -> String {
    let s = &result.spec;
    let mut out = String::new();
    let _ = writeln!(out, "# Simulation report: {}\n", s.dataset);
    let _ = writeln!(out, "Made by:\n\n```sh\n{command}\n```\n");
    let _ = writeln!(
        out,
        "Star of N hosts, {} Gbps links with {} µs delay; {} of buffer per egress queue, ECN \
         marking above {}, chip {}; host NICs {} Gbps, {} ns per packet \
         sent or received; {} bytes of framing per packet. Layer widths {:?}; compute {} ms per \
         epoch. Chunk bundling: {}. Window {} chunks per worker; ECN echoes {}. Seed {}.\n",
        s.link.gbps,
        s.link.delay_ns as f64 / 1e3,
        format_bytes(s.buffer_bytes),
        format_bytes(s.ecn_threshold),
        chip_choice(&s.chip),
        s.host.nic_gbps,
        s.host.per_packet_ns,
        s.frame_overhead,
        s.feature_dims,
        s.compute_ms,
        if s.bundle { "on" } else { "off" },
        s.window,
        match s.rate_control {
            RateControl::Halve => "halve the rate",
            RateControl::Proportional => "cut by half the marked fraction (DCTCP)",
            RateControl::Off => "ignored",
        },
        s.seed
    );
    out.push_str("## Epochs\n\n");
    out.push_str(&epoch_table(result));
    out.push_str(
        "\n## Runs (one exchange of each width)\n\n| run | comm ms | traffic | peak queue | drops | aggregated share | peak aggregators | recirculations | events/s |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in &result.runs {
        let _ = writeln!(
            out,
            "| {} | {:.3} | {} | {} | {} | {:.3} | {} | {} | {:.2} M |",
            r.id(),
            r.comm_ns as f64 / 1e6,
            format_bytes(r.link_bytes),
            format_bytes(r.peak_queue_bytes),
            r.drops,
            r.aggregation_share,
            r.peak_aggregators,
            r.recirculations,
            r.events as f64 / r.wall_seconds.max(1e-9) / 1e6
        );
    }
    let _ = writeln!(
        out,
        "\nFiles: `epochs.csv`, `layers.csv`, `runs.csv`, `report.json` (format version \
         {FORMAT_VERSION}); `series/<run>.csv|json` (time series per bucket), `links/<run>.csv` \
         (bytes per link); `plots/*.svg|png`."
    );
    out
}

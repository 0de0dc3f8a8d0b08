//! The report's figures: line charts drawn as SVG with plotters, rasterised to PNG with resvg
//! (text uses the system's fonts; without any, the PNG has the lines but no labels).

use std::collections::BTreeMap;

use plotters::coord::ranged1d::{Ranged, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use switchgnn_partition::size::format_bytes;
use thiserror::Error;

use crate::sweep::{RunRow, SweepResult};
use crate::SimMode;

const COLOURS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

type Line = (String, Vec<(f64, f64)>);
/// (workers, epoch ms, traffic GB, peak queue MB) of one configuration.
type EpochPoint = (f64, f64, f64, f64);
/// (memory MB, peak queue MB, traffic GB).
type MemoryPoint = (f64, f64, f64);

/// Why a figure could not be drawn or rasterised.
#[derive(Debug, Error)]
pub enum PlotError {
    /// Drawing figure `name` failed in the plotting backend.
    #[error("plot {name}: {message}")]
    Draw {
        /// The figure's file name, without extension.
        name: String,
        /// What the backend reported.
        message: String,
    },
    /// The SVG could not be parsed or rendered to PNG.
    #[error("{0}")]
    Raster(String),
}

fn plot_err(name: &str) -> impl Fn(&dyn std::fmt::Display) -> PlotError + '_ {
    move |e| PlotError::Draw {
        name: name.to_string(),
        message: e.to_string(),
    }
}

/// Draw `lines` into `area` with a title and axis labels. When the values span more than two
/// orders of magnitude (a collapsing strawman beside a fast SwitchGNN) the y axis is
/// logarithmic, so every line stays readable.
fn chart<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    name: &str,
    title: &str,
    x_label: &str,
    y_label: &str,
    lines: &[Line],
) -> Result<(), PlotError> {
    let err = plot_err(name);
    let points = lines.iter().flat_map(|(_, p)| p.iter());
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0.0f64);
    let mut y_min_positive = f64::MAX;
    for &(x, y) in points {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
        if y > 0.0 {
            y_min_positive = y_min_positive.min(y);
        }
    }
    if x0 > x1 {
        (x0, x1) = (0.0, 1.0);
    }
    if x1 - x0 < 1e-12 {
        x1 = x0 + 1.0;
    }
    // A margin on both sides, so that no point sits on the frame.
    let pad = (x1 - x0) * 0.04;
    let (x0, x1) = (x0 - pad, x1 + pad);
    let y1 = if y1 <= 0.0 { 1.0 } else { y1 * 1.08 };
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70);
    if y_min_positive < f64::MAX && y1 / y_min_positive > 100.0 {
        let c = builder
            .build_cartesian_2d(x0..x1, (y_min_positive / 1.5..y1).log_scale())
            .map_err(|e| err(&e))?;
        draw_lines(c, name, x_label, &format!("{y_label} (log scale)"), lines)
    } else {
        let c = builder
            .build_cartesian_2d(x0..x1, 0.0..y1)
            .map_err(|e| err(&e))?;
        draw_lines(c, name, x_label, y_label, lines)
    }
}

fn draw_lines<'a, DB: DrawingBackend + 'a, Y>(
    mut c: ChartContext<'a, DB, Cartesian2d<RangedCoordf64, Y>>,
    name: &str,
    x_label: &str,
    y_label: &str,
    lines: &[Line],
) -> Result<(), PlotError>
where
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let err = plot_err(name);
    c.configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .draw()
        .map_err(|e| err(&e))?;
    for (i, (label, pts)) in lines.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let style = colour.stroke_width(2);
        // Past the palette, the colours come back dashed, then dotted.
        let (dash, gap) = match i / COLOURS.len() {
            0 => (0, 0),
            1 => (8, 5),
            _ => (2, 4),
        };
        if dash == 0 {
            c.draw_series(LineSeries::new(pts.iter().copied(), style))
                .map_err(|e| err(&e))?
                .label(label.clone())
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], style));
        } else {
            c.draw_series(DashedLineSeries::new(pts.iter().copied(), dash, gap, style))
                .map_err(|e| err(&e))?
                .label(label.clone())
                .legend(move |(x, y)| {
                    DashedPathElement::new([(x, y), (x + 18, y)], dash, gap, style)
                });
        }
        if pts.len() < 40 {
            c.draw_series(pts.iter().map(|&p| Circle::new(p, 3, colour.filled())))
                .map_err(|e| err(&e))?;
        }
    }
    c.configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| err(&e))?;
    Ok(())
}

fn single(name: &str, title: &str, x: &str, y: &str, lines: &[Line]) -> Result<String, PlotError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 560)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| plot_err(name)(&e))?;
        chart(&root, name, title, x, y, lines)?;
        root.present().map_err(|e| plot_err(name)(&e))?;
    }
    Ok(svg)
}

fn config_label(mode: SimMode, memory: Option<u64>) -> String {
    match memory {
        Some(m) => format!("{} {}", mode.name(), format_bytes(m)),
        None => mode.name().to_string(),
    }
}

/// Every figure of a sweep, as (file stem, SVG).
pub fn figures(result: &SweepResult) -> Result<Vec<(String, String)>, PlotError> {
    let mut out = Vec::new();
    let mut by_config: BTreeMap<(SimMode, Option<u64>), Vec<EpochPoint>> = BTreeMap::new();
    for e in &result.epochs {
        by_config
            .entry((e.mode, e.switch_memory))
            .or_default()
            .push((
                f64::from(e.workers),
                e.epoch_ms,
                e.link_bytes as f64 / 1e9,
                e.peak_queue_bytes as f64 / 1e6,
            ));
    }
    let lines = |pick: fn(&EpochPoint) -> f64| -> Vec<Line> {
        by_config
            .iter()
            .map(|(&(m, mem), pts)| {
                (
                    config_label(m, mem),
                    pts.iter().map(|p| (p.0, pick(p))).collect(),
                )
            })
            .collect()
    };
    let ds = &result.spec.dataset;
    out.push((
        "epoch-time".into(),
        single(
            "epoch-time",
            &format!("{ds}: epoch time (communication + compute)"),
            "workers",
            "ms per epoch",
            &lines(|p| p.1),
        )?,
    ));
    out.push((
        "traffic".into(),
        single(
            "traffic",
            &format!("{ds}: bytes on all links per epoch"),
            "workers",
            "GB",
            &lines(|p| p.2),
        )?,
    ));
    out.push((
        "peak-queue".into(),
        single(
            "peak-queue",
            &format!("{ds}: deepest switch egress queue"),
            "workers",
            "MB",
            &lines(|p| p.3),
        )?,
    ));
    // Against memory, per in-network mode and worker count.
    let mut vs_memory: BTreeMap<(SimMode, u16), Vec<MemoryPoint>> = BTreeMap::new();
    for e in result.epochs.iter().filter(|e| e.mode.uses_memory()) {
        if let Some(m) = e.switch_memory {
            vs_memory.entry((e.mode, e.workers)).or_default().push((
                m as f64 / 1e6,
                e.peak_queue_bytes as f64 / 1e6,
                e.link_bytes as f64 / 1e9,
            ));
        }
    }
    if result.spec.memories.len() > 1 && !vs_memory.is_empty() {
        let mem_lines = |pick: fn(&MemoryPoint) -> f64| -> Vec<Line> {
            vs_memory
                .iter()
                .map(|(&(m, w), pts)| {
                    (
                        format!("{} ×{w}", m.name()),
                        pts.iter().map(|p| (p.0, pick(p))).collect(),
                    )
                })
                .collect()
        };
        out.push((
            "queue-vs-memory".into(),
            single(
                "queue-vs-memory",
                &format!("{ds}: deepest egress queue against aggregator memory"),
                "switch memory (MB)",
                "MB",
                &mem_lines(|p| p.1),
            )?,
        ));
        out.push((
            "traffic-vs-memory".into(),
            single(
                "traffic-vs-memory",
                &format!("{ds}: traffic per epoch against aggregator memory"),
                "switch memory (MB)",
                "GB",
                &mem_lines(|p| p.2),
            )?,
        ));
    }
    // Timelines of the widest exchange at the largest worker count.
    let most = result.runs.iter().map(|r| r.workers).max();
    let widest = result.runs.iter().map(|r| r.width).max();
    for r in result
        .runs
        .iter()
        .filter(|r| Some(r.workers) == most && Some(r.width) == widest)
    {
        let name = format!("timeline-{}", r.id());
        out.push((name.clone(), timeline(&name, r)?));
    }
    Ok(out)
}

/// Four panels over one exchange: queue, throughput, aggregators, recirculation.
fn timeline(name: &str, r: &RunRow) -> Result<String, PlotError> {
    let s = &r.series;
    let t = |i: usize| (i as u64 * s.bucket_ns) as f64 / 1e3;
    let pts = |f: &dyn Fn(&crate::series::Bucket) -> f64| -> Vec<(f64, f64)> {
        s.buckets
            .iter()
            .enumerate()
            .map(|(i, b)| (t(i), f(b)))
            .collect()
    };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1000, 900)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| plot_err(name)(&e))?;
        let panels = root.split_evenly((2, 2));
        let id = r.id();
        chart(
            &panels[0],
            name,
            &format!("{id}: deepest egress queue"),
            "µs",
            "MB",
            &[("queue".into(), pts(&|b| b.queue_max as f64 / 1e6))],
        )?;
        chart(
            &panels[1],
            name,
            "throughput delivered to hosts",
            "µs",
            "Gbit/s",
            &[
                ("total".into(), pts(&|b| s.gbps(b.delivered.total()))),
                (
                    "aggregated in switch".into(),
                    pts(&|b| s.gbps(b.delivered.aggregated)),
                ),
                ("raw features".into(), pts(&|b| s.gbps(b.delivered.raw))),
            ],
        )?;
        chart(
            &panels[2],
            name,
            "aggregators held",
            "µs",
            "aggregators",
            &[("in use".into(), pts(&|b| b.aggregators_max as f64))],
        )?;
        chart(
            &panels[3],
            name,
            "recirculation port",
            "µs",
            "utilisation",
            &[(
                "busy share".into(),
                pts(&|b| b.recirculation_ns / s.bucket_ns as f64),
            )],
        )?;
        root.present().map_err(|e| plot_err(name)(&e))?;
    }
    Ok(svg)
}

/// Whether the system has fonts for the PNGs' labels.
pub fn fonts_available() -> bool {
    let mut db = resvg::usvg::fontdb::Database::new();
    db.load_system_fonts();
    !db.is_empty()
}

/// Rasterise an SVG document to PNG (labels need system fonts; see [`fonts_available`]).
pub fn to_png(svg: &str) -> Result<Vec<u8>, PlotError> {
    let mut opt = resvg::usvg::Options::default();
    let db = opt.fontdb_mut();
    db.load_system_fonts();
    // fontdb maps `sans-serif` to Arial; point it at a family this system has.
    let families: Vec<String> = db
        .faces()
        .flat_map(|f| f.families.iter().map(|(name, _)| name.clone()))
        .collect();
    let preferred = ["DejaVu Sans", "Liberation Sans", "Noto Sans", "Arial"];
    if let Some(family) = preferred
        .iter()
        .map(|p| p.to_string())
        .find(|p| families.contains(p))
        .or_else(|| families.first().cloned())
    {
        db.set_sans_serif_family(family);
    }

    let raster = |e: &dyn std::fmt::Display| PlotError::Raster(e.to_string());
    let tree = resvg::usvg::Tree::from_str(svg, &opt).map_err(|e| raster(&e))?;
    let size = tree.size().to_int_size();
    let mut pixmap = resvg::tiny_skia::Pixmap::new(size.width(), size.height())
        .ok_or_else(|| raster(&"an empty picture"))?;
    pixmap.fill(resvg::tiny_skia::Color::WHITE);
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::default(),
        &mut pixmap.as_mut(),
    );
    pixmap.encode_png().map_err(|e| raster(&e))
}

/// The background study as one figure: per exchange and flow-size distribution, the exchange's
/// time beside the flows over its time alone (x) against the flows' p99 slowdown over theirs
/// alone (y), a line through the rate-control settings in the study's order (halve,
/// proportional, off).
pub fn contention_figure(studies: &[crate::contention::Contention]) -> Result<String, PlotError> {
    let lines: Vec<Line> = studies
        .iter()
        .map(|c| {
            let point = |w: &crate::contention::WithTraffic| (w.exchange_ratio(), w.p99_ratio);
            (
                format!(
                    "{} workers, {} {}, {}, {} flows: rate control {}",
                    c.workers,
                    c.mode.name(),
                    format_bytes(c.memory),
                    c.place(),
                    c.sizes.name(),
                    c.settings
                        .iter()
                        .map(|w| w.rate_control.name())
                        .collect::<Vec<_>>()
                        .join(" → ")
                ),
                c.settings.iter().map(point).collect(),
            )
        })
        .collect();
    single(
        "contention",
        "The exchange beside background TCP flows",
        "exchange time ÷ alone",
        "flows' p99 slowdown ÷ with no exchange",
        &lines,
    )
}

/// The fabric study as one figure: per exchange and rack count, its time on the leaf-spine
/// over its time on the star (y) against the racks' oversubscription (x).
pub fn rack_figure(studies: &[crate::racks::RackStudy]) -> Result<String, PlotError> {
    let mut lines: Vec<Line> = Vec::new();
    for s in studies {
        let mut racks: Vec<u16> = s.fabrics.iter().map(|f| f.racks).collect();
        racks.dedup();
        for r in racks {
            let points = s
                .fabrics
                .iter()
                .filter(|f| f.racks == r)
                .map(|f| (f.oversubscription, f.over_star(s)))
                .collect();
            lines.push((
                format!(
                    "{} workers, {} {}, {r} racks",
                    s.workers,
                    s.mode.name(),
                    format_bytes(s.memory)
                ),
                points,
            ));
        }
    }
    let title = if studies.iter().all(|s| s.two_level) {
        "The exchange on a leaf-spine (two-level aggregation: leaves, then spine 0)"
    } else {
        "The exchange on a leaf-spine (one level of aggregation, on spine 0)"
    };
    single(
        "fabric",
        title,
        "oversubscription (hosts' bandwidth ÷ uplinks')",
        "exchange time ÷ on the star",
        &lines,
    )
}

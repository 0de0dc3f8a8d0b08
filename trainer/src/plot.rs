//! Loss and accuracy curves as an SVG: losses above, accuracies below, one line per run and
//! series.

use std::io::Write;
use std::path::Path;

use plotters::prelude::*;
use switchgnn_datasets::atomic::write_atomically;

use crate::error::{Result, TrainError};
use crate::log::TrainLog;
use crate::train::EpochRecord;

type Series = (&'static str, RGBColor, fn(&EpochRecord) -> Option<f64>);

const LOSSES: [Series; 2] = [
    ("train loss", RGBColor(31, 119, 180), |e| Some(e.train_loss)),
    ("val loss", RGBColor(255, 127, 14), |e| Some(e.val_loss)),
];
const ACCURACIES: [Series; 3] = [
    ("train", RGBColor(31, 119, 180), |e| Some(e.train_accuracy)),
    ("val", RGBColor(255, 127, 14), |e| Some(e.val_accuracy)),
    ("test", RGBColor(44, 160, 44), |e| e.test_accuracy),
];

/// Draw `log` as an SVG document.
pub fn render_svg(log: &TrainLog) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 700)).into_drawing_area();
        let plot_err = |e: &dyn std::fmt::Display| TrainError::Plot(e.to_string());
        root.fill(&WHITE).map_err(|e| plot_err(&e))?;
        let (top, bottom) = root.split_vertically(350);
        let epochs = log
            .runs
            .iter()
            .map(|r| r.epochs.len())
            .max()
            .unwrap_or(1)
            .max(2);
        let max_loss = log
            .runs
            .iter()
            .flat_map(|r| &r.epochs)
            .flat_map(|e| [e.train_loss, e.val_loss])
            .filter(|x| x.is_finite())
            .fold(0.0f64, f64::max)
            .max(1e-3)
            * 1.05;
        let title = format!(
            "{}: {} {}x{} ({} run{})",
            log.dataset.name,
            log.config.model.kind.name(),
            log.config.model.layers,
            log.config.model.hidden,
            log.runs.len(),
            if log.runs.len() == 1 { "" } else { "s" }
        );
        let losses = Panel {
            title: &title,
            y_label: "loss",
            y_range: 0.0..max_loss,
            series: &LOSSES,
            legend: SeriesLabelPosition::UpperRight,
        };
        let accuracies = Panel {
            title: "",
            y_label: "accuracy",
            y_range: 0.0..1.0,
            series: &ACCURACIES,
            legend: SeriesLabelPosition::LowerRight,
        };
        losses.draw(&top, epochs, log).map_err(|e| plot_err(&e))?;
        accuracies
            .draw(&bottom, epochs, log)
            .map_err(|e| plot_err(&e))?;
        root.present().map_err(|e| plot_err(&e))?;
    }
    Ok(svg)
}

/// One chart: some series of every run against the epoch.
struct Panel<'a> {
    title: &'a str,
    y_label: &'a str,
    y_range: std::ops::Range<f64>,
    series: &'a [Series],
    legend: SeriesLabelPosition,
}

impl Panel<'_> {
    fn draw<DB: DrawingBackend>(
        self,
        area: &DrawingArea<DB, plotters::coord::Shift>,
        epochs: usize,
        log: &TrainLog,
    ) -> std::result::Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        let Panel {
            title,
            y_label,
            y_range,
            series,
            legend,
        } = self;
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 20))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(55)
            .build_cartesian_2d(1f64..epochs as f64, y_range)?;
        chart
            .configure_mesh()
            .x_desc("epoch")
            .y_desc(y_label)
            .light_line_style(WHITE.mix(0.0))
            .draw()?;
        for &(name, color, value) in series {
            for (i, run) in log.runs.iter().enumerate() {
                let points: Vec<(f64, f64)> = run
                    .epochs
                    .iter()
                    .filter_map(|e| {
                        value(e)
                            .filter(|v| v.is_finite())
                            .map(|v| (e.epoch as f64, v))
                    })
                    .collect();
                let drawn = chart.draw_series(LineSeries::new(points, color.stroke_width(1)))?;
                if i == 0 {
                    drawn.label(name).legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                    });
                }
            }
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(legend)
            .draw()?;
        Ok(())
    }
}

/// Write the curves of `log` to `path` atomically.
pub fn write_svg(log: &TrainLog, path: &Path) -> Result<()> {
    let svg = render_svg(log)?;
    write_atomically(path, |w| w.write_all(svg.as_bytes()))?;
    Ok(())
}

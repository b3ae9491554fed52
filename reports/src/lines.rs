//! Line plots: named series of (x, y) points, each axis linear or logarithmic (for sweeps).
//!
//! Each series is drawn as a polyline through its points in the order given (sort them first
//! for a function of x) with a small marker on each point, in its own colour (series order,
//! colours in a fixed order), and has a legend entry. The legend goes to the corner of the plot
//! area that covers the fewest points.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::axis::Axis;
use crate::draw::{self, Figure};
use crate::error::{check_size, check_value};
use crate::{Error, legend, palette};

/// One named series.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub name: String,
    /// (x, y) points, finite; > 0 on a logarithmic axis. May be empty (legend entry only).
    pub points: Vec<(f64, f64)>,
    /// Joined by a polyline (else markers only, for points in no particular order).
    pub line: bool,
}

impl Series {
    /// A series drawn as a polyline with markers.
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series { name: name.into(), points, line: true }
    }
    /// A series drawn as markers only.
    pub fn markers(name: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series { name: name.into(), points, line: false }
    }
}

/// A line plot: see the module documentation.
#[derive(Clone, Debug, PartialEq)]
pub struct LinePlot {
    pub title: String,
    /// Axis descriptions, units included (e.g. `matrix size (elements)`).
    pub x_label: String,
    pub y_label: String,
    /// Logarithmic (base 10) axes.
    pub x_log: bool,
    pub y_log: bool,
    pub series: Vec<Series>,
    /// Width and height in pixels (SVG user units); at least 200 × 150.
    pub size: (u32, u32),
}

/// The size [`LinePlot::new`] gives.
pub const DEFAULT_SIZE: (u32, u32) = (900, 600);

impl LinePlot {
    /// A plot with linear axes, no series and [`DEFAULT_SIZE`].
    pub fn new(title: impl Into<String>, x_label: impl Into<String>, y_label: impl Into<String>) -> LinePlot {
        LinePlot {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            x_log: false,
            y_log: false,
            series: Vec::new(),
            size: DEFAULT_SIZE,
        }
    }
}

/// The plot as an SVG document (the same bytes for the same plot).
///
/// Errors: [`Error::Empty`] when no series has a point; [`Error::NotFinite`] or
/// [`Error::NotPositive`] (logarithmic axis) naming the series and the point's index;
/// [`Error::BadSize`].
pub fn render_svg(plot: &LinePlot) -> Result<String, Error> {
    draw::svg(&Prepared::new(plot)?)
}

/// Writes the plot as a PNG file (`path` must end in `.png`); the same errors as
/// [`render_svg`], checked before the file is created, and [`Error::Png`] when it cannot be
/// written.
pub fn write_png(plot: &LinePlot, path: impl AsRef<Path>) -> Result<(), Error> {
    draw::png(&Prepared::new(plot)?, path.as_ref())
}

/// A checked plot with its layout decided.
struct Prepared<'a> {
    plot: &'a LinePlot,
    x: Axis,
    y: Axis,
    /// Each series' points in plot space.
    points: Vec<Vec<(f64, f64)>>,
    legend_at: SeriesLabelPosition,
}

impl<'a> Prepared<'a> {
    fn new(plot: &'a LinePlot) -> Result<Prepared<'a>, Error> {
        check_size(plot.size)?;
        for s in &plot.series {
            for (i, &(x, y)) in s.points.iter().enumerate() {
                let label = || format!("{}[{i}]", s.name);
                check_value(label, "x", x, plot.x_log)?;
                check_value(label, "y", y, plot.y_log)?;
            }
        }
        let all = || plot.series.iter().flat_map(|s| s.points.iter().copied());
        if all().next().is_none() {
            return Err(Error::Empty);
        }
        let bounds = |f: fn((f64, f64)) -> f64| {
            all().map(f).fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)))
        };
        let (x0, x1) = bounds(|p| p.0);
        let (y0, y1) = bounds(|p| p.1);
        let x = Axis::new(x0, x1, plot.x_log);
        let y = Axis::new(y0, y1, plot.y_log);
        let points: Vec<Vec<(f64, f64)>> = plot
            .series
            .iter()
            .map(|s| s.points.iter().map(|&(px, py)| (x.to_plot(px), y.to_plot(py))).collect())
            .collect();
        let flat: Vec<(f64, f64)> = points.iter().flatten().copied().collect();
        let widest = plot.series.iter().map(|s| s.name.chars().count()).max().unwrap_or(0);
        let legend_at = legend::best_corner(&flat, &x, &y, plot.series.len(), widest, draw::plot_area_px(plot.size));
        Ok(Prepared { plot, x, y, points, legend_at })
    }
}

impl Figure for Prepared<'_> {
    fn size(&self) -> (u32, u32) {
        self.plot.size
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), Error> {
        let p = self.plot;
        let mut chart = draw::chart(root, &p.title, &self.x, &self.y, &p.x_label, &p.y_label)?;
        for (i, (s, pts)) in p.series.iter().zip(&self.points).enumerate() {
            let line = palette::colour(i).stroke_width(2);
            let marker = palette::colour(i).filled();
            if s.line {
                chart.draw_series(LineSeries::new(pts.iter().copied(), line))?;
            }
            chart.draw_series(pts.iter().map(|&q| Circle::new(q, 3, marker)))?.label(s.name.as_str()).legend(
                move |(x, y)| {
                    EmptyElement::at((x, y))
                        + PathElement::new([(0, 0), (16, 0)], line)
                        + Circle::new((8, 0), 3, marker)
                },
            );
        }
        if !p.series.is_empty() {
            draw::legend(&mut chart, self.legend_at.clone())?;
        }
        Ok(())
    }
}

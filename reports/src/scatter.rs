//! Simulated against measured: one point per case on log-log axes.
//!
//! The x axis is the measured (published) value, the y axis the simulated one; both axes span
//! the same range, so the y = x line is the diagonal. A shaded band marks
//! `measured·(1 − band) ≤ simulated ≤ measured·(1 + band)`. Points are coloured by
//! [`ScatterPoint::group`] (groups sorted by name, colours in a fixed order), with one legend
//! entry per group.
//!
//! The raw values are plotted, not the ratio simulated/measured: cases of different metrics
//! (cycles, GB/s, TFLOP/s) share the plot, told apart by their group's colour, and their
//! distance from the diagonal is their error on a log scale whatever the unit. When every point
//! has the same unit the axis descriptions name it; otherwise each group whose points share a
//! unit names it in its legend entry.

use std::collections::BTreeMap;
use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::axis::{Axis, format_value};
use crate::draw::{self, Figure};
use crate::error::{check_size, check_value};
use crate::{Error, legend, palette};

/// One case.
#[derive(Clone, Debug, PartialEq)]
pub struct ScatterPoint {
    /// The case's name (used in error messages; not drawn).
    pub label: String,
    /// The group it is coloured by (e.g. `gemm`, `latency`, `bandwidth`).
    pub group: String,
    /// The unit of both values (e.g. `GB/s`); empty when unknown.
    pub unit: String,
    /// The measured (reference) value: finite and > 0.
    pub measured: f64,
    /// The simulated value: finite and > 0.
    pub simulated: f64,
}

/// A scatter plot: see the module documentation.
#[derive(Clone, Debug, PartialEq)]
pub struct ScatterPlot {
    pub title: String,
    pub points: Vec<ScatterPoint>,
    /// Half-width of the shaded band as a fraction (0.1: ±10 %); 0 draws no band. In [0, 1).
    pub band: f64,
    /// Width and height in pixels (SVG user units); at least 200 × 150.
    pub size: (u32, u32),
}

/// The size [`ScatterPlot::new`] gives: a roughly square plot area.
pub const DEFAULT_SIZE: (u32, u32) = (800, 810);

impl ScatterPlot {
    /// A plot with no points, a ±10 % band and [`DEFAULT_SIZE`].
    pub fn new(title: impl Into<String>) -> ScatterPlot {
        ScatterPlot { title: title.into(), points: Vec::new(), band: 0.1, size: DEFAULT_SIZE }
    }
}

/// The plot as an SVG document (the same bytes for the same plot).
///
/// Errors: [`Error::Empty`] without points; [`Error::NotFinite`] or [`Error::NotPositive`]
/// naming the first bad point; [`Error::BadBand`], [`Error::BadSize`].
pub fn render_svg(plot: &ScatterPlot) -> Result<String, Error> {
    draw::svg(&Prepared::new(plot)?)
}

/// Writes the plot as a PNG file (`path` must end in `.png`); the same errors as
/// [`render_svg`], checked before the file is created, and [`Error::Png`] when it cannot be
/// written.
pub fn write_png(plot: &ScatterPlot, path: impl AsRef<Path>) -> Result<(), Error> {
    draw::png(&Prepared::new(plot)?, path.as_ref())
}

/// The points of one group, in plot space.
struct Group {
    entry: String,
    colour: RGBColor,
    points: Vec<(f64, f64)>,
}

/// A checked plot with its layout decided.
struct Prepared<'a> {
    plot: &'a ScatterPlot,
    axis: Axis,
    groups: Vec<Group>,
    x_desc: String,
    y_desc: String,
    band_entry: String,
    legend_at: SeriesLabelPosition,
}

impl<'a> Prepared<'a> {
    fn new(plot: &'a ScatterPlot) -> Result<Prepared<'a>, Error> {
        check_size(plot.size)?;
        if !(plot.band.is_finite() && (0.0..1.0).contains(&plot.band)) {
            return Err(Error::BadBand(plot.band));
        }
        if plot.points.is_empty() {
            return Err(Error::Empty);
        }
        for p in &plot.points {
            check_value(|| p.label.clone(), "measured", p.measured, true)?;
            check_value(|| p.label.clone(), "simulated", p.simulated, true)?;
        }
        let values = plot.points.iter().flat_map(|p| [p.measured, p.simulated]);
        let min = values.clone().fold(f64::INFINITY, f64::min);
        let max = values.fold(0.0, f64::max);
        let axis = Axis::new(min, max, true);

        let shared_unit = |pts: &[&ScatterPoint]| -> Option<String> {
            let u = &pts[0].unit;
            (!u.is_empty() && pts.iter().all(|p| &p.unit == u)).then(|| u.clone())
        };
        let all: Vec<&ScatterPoint> = plot.points.iter().collect();
        let common = shared_unit(&all);
        let mut by_group: BTreeMap<&str, Vec<&ScatterPoint>> = BTreeMap::new();
        for p in &plot.points {
            by_group.entry(p.group.as_str()).or_default().push(p);
        }
        let groups: Vec<Group> = by_group
            .iter()
            .enumerate()
            .map(|(i, (name, pts))| Group {
                entry: match (&common, shared_unit(pts)) {
                    (None, Some(u)) => format!("{name} ({u})"),
                    _ => name.to_string(),
                },
                colour: palette::colour(i),
                points: pts.iter().map(|p| (axis.to_plot(p.measured), axis.to_plot(p.simulated))).collect(),
            })
            .collect();
        let desc = |what: &str| match &common {
            Some(u) => format!("{what} ({u})"),
            None => what.to_string(),
        };
        let band_entry = if plot.band > 0.0 {
            let inside = plot
                .points
                .iter()
                .filter(|p| (p.simulated / p.measured - 1.0).abs() <= plot.band * (1.0 + 1e-12))
                .count();
            format!("±{}%: {inside} of {} points", format_value(plot.band * 100.0), plot.points.len())
        } else {
            String::new()
        };
        let mut entries: Vec<&str> = groups.iter().map(|g| g.entry.as_str()).collect();
        entries.push("y = x");
        if plot.band > 0.0 {
            entries.push(&band_entry);
        }
        let widest = entries.iter().map(|e| e.chars().count()).max().unwrap_or(0);
        let all_points: Vec<(f64, f64)> = groups.iter().flat_map(|g| g.points.iter().copied()).collect();
        let legend_at =
            legend::best_corner(&all_points, &axis, &axis, entries.len(), widest, draw::plot_area_px(plot.size));
        Ok(Prepared { plot, axis, groups, x_desc: desc("measured"), y_desc: desc("simulated"), band_entry, legend_at })
    }

    /// The band between the lines y = x·(1 − band) and y = x·(1 + band), clipped to the plot
    /// area (a square in plot space), as a polygon.
    fn band_polygon(&self) -> Vec<(f64, f64)> {
        let (lo, hi) = (self.axis.lo, self.axis.hi);
        let below = (1.0 - self.plot.band).log10();
        let above = (1.0 + self.plot.band).log10();
        vec![
            (lo, lo),
            ((lo - below).min(hi), lo),
            (hi, (hi + below).max(lo)),
            (hi, hi),
            ((hi - above).max(lo), hi),
            (lo, (lo + above).min(hi)),
        ]
    }
}

impl Figure for Prepared<'_> {
    fn size(&self) -> (u32, u32) {
        self.plot.size
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), Error> {
        let a = &self.axis;
        let mut chart = draw::chart(root, &self.plot.title, a, a, &self.x_desc, &self.y_desc)?;
        if self.plot.band > 0.0 {
            let style = RGBColor(120, 120, 120).mix(0.25).filled();
            chart
                .draw_series(std::iter::once(Polygon::new(self.band_polygon(), style)))?
                .label(self.band_entry.as_str())
                .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 16, y + 6)], style));
        }
        let diagonal = RGBColor(60, 60, 60).stroke_width(1);
        chart
            .draw_series(LineSeries::new([(a.lo, a.lo), (a.hi, a.hi)], diagonal))?
            .label("y = x")
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], diagonal));
        for g in &self.groups {
            let style = g.colour.mix(0.85).filled();
            chart
                .draw_series(g.points.iter().map(|&p| Circle::new(p, 4, style)))?
                .label(g.entry.as_str())
                .legend(move |(x, y)| Circle::new((x + 8, y), 4, style));
        }
        draw::legend(&mut chart, self.legend_at.clone())
    }
}

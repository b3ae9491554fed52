//! What the plot modules share: the two outputs, and a chart with its axes and grid.

use std::path::Path;

use std::ops::Range;

use plotters::coord::Shift;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use crate::axis::Axis;
use crate::bitmap::PngBackend;
use crate::font::{FAMILY, ensure_registered};
use crate::palette::{GRID_BOLD, GRID_LIGHT};
use crate::{Error, palette};

/// A validated plot, ready to draw on any plotters backend.
pub(crate) trait Figure {
    fn size(&self) -> (u32, u32);
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), Error>;
}

/// The figure as an SVG document.
pub(crate) fn svg(f: &impl Figure) -> Result<String, Error> {
    ensure_registered()?;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, f.size()).into_drawing_area();
        f.draw(&root)?;
        root.present()?;
    }
    Ok(out)
}

/// Writes the figure as a PNG file; `path` must end in `.png`.
pub(crate) fn png(f: &impl Figure, path: &Path) -> Result<(), Error> {
    let png_err = |message: String| Error::Png { path: path.to_path_buf(), message };
    if !path.extension().is_some_and(|e| e.eq_ignore_ascii_case("png")) {
        return Err(png_err("the file name must end in .png".into()));
    }
    ensure_registered()?;
    let root = PngBackend::new(path, f.size())?.into_drawing_area();
    f.draw(&root)?;
    root.present().map_err(|e| png_err(e.to_string()))
}

/// One chart coordinate: plot space (see [`crate::axis`]) mapped linearly, with the axis'
/// ticks as plotters' bold key points and its minor grid as the light ones.
pub(crate) struct PlotCoord {
    linear: RangedCoordf64,
    ticks: Vec<f64>,
    minor: Vec<f64>,
}

impl PlotCoord {
    fn new(a: &Axis) -> PlotCoord {
        PlotCoord { linear: (a.lo..a.hi).into(), ticks: a.ticks.clone(), minor: a.minor.clone() }
    }
}

impl Ranged for PlotCoord {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.linear.map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() { self.minor.clone() } else { self.ticks.clone() }
    }

    fn range(&self) -> Range<f64> {
        self.linear.range()
    }
}

/// Chart coordinates.
pub(crate) type Coords = Cartesian2d<PlotCoord, PlotCoord>;

/// Text sizes, pixels.
pub(crate) const TITLE_PX: u32 = 22;
pub(crate) const AXIS_DESC_PX: u32 = 16;
pub(crate) const LABEL_PX: u32 = 14;
pub(crate) const LEGEND_PX: u32 = 14;

/// Space reserved left of the plot area for the y tick labels and description, pixels.
pub(crate) const Y_LABEL_AREA: u32 = 78;
/// Space below the plot area for the x tick labels and description, pixels.
pub(crate) const X_LABEL_AREA: u32 = 48;
/// Margin around the chart, pixels.
pub(crate) const MARGIN: u32 = 18;

/// The plot area's size in a figure of `size`, roughly (the caption's height is estimated).
pub(crate) fn plot_area_px((w, h): (u32, u32)) -> (u32, u32) {
    let caption = TITLE_PX + 2 * MARGIN;
    (w.saturating_sub(Y_LABEL_AREA + 2 * MARGIN), h.saturating_sub(X_LABEL_AREA + caption + MARGIN))
}

/// Fills `root` white and draws the title, the axes with their ticks and descriptions, and the
/// grid; returns the chart to draw series on.
pub(crate) fn chart<'a, DB: DrawingBackend>(
    root: &'a DrawingArea<DB, Shift>,
    title: &str,
    x: &Axis,
    y: &Axis,
    x_desc: &str,
    y_desc: &str,
) -> Result<ChartContext<'a, DB, Coords>, Error> {
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(root)
        .caption(title, (FAMILY, TITLE_PX))
        .margin(MARGIN)
        .x_label_area_size(X_LABEL_AREA)
        .y_label_area_size(Y_LABEL_AREA)
        .build_cartesian_2d(PlotCoord::new(x), PlotCoord::new(y))?;
    let x_fmt = |v: &f64| x.label(*v);
    let y_fmt = |v: &f64| y.label(*v);
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .label_style((FAMILY, LABEL_PX))
        .axis_desc_style((FAMILY, AXIS_DESC_PX))
        .bold_line_style(GRID_BOLD)
        .light_line_style(GRID_LIGHT)
        .draw()?;
    Ok(chart)
}

/// Draws the legend of the series labelled so far at `pos`.
pub(crate) fn legend<'a, DB: DrawingBackend + 'a>(
    chart: &mut ChartContext<'a, DB, Coords>,
    pos: SeriesLabelPosition,
) -> Result<(), Error> {
    chart
        .configure_series_labels()
        .position(pos)
        .margin(10)
        .label_font((FAMILY, LEGEND_PX))
        .background_style(WHITE.mix(0.9))
        .border_style(palette::GRID_BOLD)
        .draw()?;
    Ok(())
}

//! Heatmaps: a value per cell of a grid of two categorical axes (for a sweep over two
//! parameters), each cell coloured on a fixed sequential scale from its value and labelled with
//! it. A missing cell (an unfinished point) is drawn hatched grey and labelled `—`.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::draw::{self, Figure, LABEL_PX, MARGIN, TITLE_PX};
use crate::error::{check_size, check_value};
use crate::font::FAMILY;
use crate::{Error, axis};

/// A heatmap: see the module documentation.
#[derive(Clone, Debug, PartialEq)]
pub struct Heatmap {
    pub title: String,
    /// Axis descriptions, units included.
    pub x_label: String,
    pub y_label: String,
    /// Column labels, left to right.
    pub x_values: Vec<String>,
    /// Row labels, bottom to top.
    pub y_values: Vec<String>,
    /// `cells[row][column]`, rows as `y_values`, columns as `x_values`; `None` for a missing value.
    pub cells: Vec<Vec<Option<f64>>>,
    /// Width and height in pixels; at least 200 × 150.
    pub size: (u32, u32),
}

impl Heatmap {
    /// An empty heatmap of the default size.
    pub fn new(title: impl Into<String>, x_label: impl Into<String>, y_label: impl Into<String>) -> Heatmap {
        Heatmap {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            x_values: Vec::new(),
            y_values: Vec::new(),
            cells: Vec::new(),
            size: crate::lines::DEFAULT_SIZE,
        }
    }
}

/// The heatmap as an SVG document (the same bytes for the same heatmap).
///
/// Errors: [`Error::Empty`] without rows, columns or any value; [`Error::Shape`] when `cells`
/// does not match the labels; [`Error::NotFinite`] naming the cell; [`Error::BadSize`].
pub fn render_svg(h: &Heatmap) -> Result<String, Error> {
    draw::svg(&Prepared::new(h)?)
}

/// Writes the heatmap as a PNG file (`path` must end in `.png`), checked first as [`render_svg`].
pub fn write_png(h: &Heatmap, path: impl AsRef<Path>) -> Result<(), Error> {
    draw::png(&Prepared::new(h)?, path.as_ref())
}

struct Prepared<'a> {
    h: &'a Heatmap,
    lo: f64,
    hi: f64,
}

impl<'a> Prepared<'a> {
    fn new(h: &'a Heatmap) -> Result<Prepared<'a>, Error> {
        check_size(h.size)?;
        if h.cells.len() != h.y_values.len() || h.cells.iter().any(|r| r.len() != h.x_values.len()) {
            return Err(Error::Shape(format!(
                "{} rows of cells for {} row labels, each needing {} cells",
                h.cells.len(),
                h.y_values.len(),
                h.x_values.len()
            )));
        }
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for (r, row) in h.cells.iter().enumerate() {
            for (c, v) in row.iter().enumerate() {
                if let Some(v) = *v {
                    check_value(|| format!("{},{}", h.x_values[c], h.y_values[r]), "value", v, false)?;
                    lo = lo.min(v);
                    hi = hi.max(v);
                }
            }
        }
        if !lo.is_finite() {
            return Err(Error::Empty);
        }
        Ok(Prepared { h, lo, hi })
    }

    /// The cell colour of `v`: a blue-to-yellow sequential scale (viridis' end points and
    /// middle), linear in the value.
    fn colour(&self, v: f64) -> RGBColor {
        const STOPS: [(f64, f64, f64); 3] = [(68.0, 1.0, 84.0), (33.0, 145.0, 140.0), (253.0, 231.0, 37.0)];
        let t = if self.hi > self.lo { (v - self.lo) / (self.hi - self.lo) } else { 0.5 };
        let (i, f) = if t < 0.5 { (0, t * 2.0) } else { (1, (t - 0.5) * 2.0) };
        let mix = |a: f64, b: f64| (a + (b - a) * f).round() as u8;
        let (a, b) = (STOPS[i], STOPS[i + 1]);
        RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
    }
}

impl Figure for Prepared<'_> {
    fn size(&self) -> (u32, u32) {
        self.h.size
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), Error> {
        let h = self.h;
        root.fill(&WHITE)?;
        let (w, ht) = (h.size.0 as i32, h.size.1 as i32);
        let m = MARGIN as i32;
        let centre = |hp, vp| Pos::new(hp, vp);
        let title = TextStyle::from((FAMILY, TITLE_PX)).color(&BLACK).pos(centre(HPos::Center, VPos::Top));
        root.draw(&Text::new(h.title.clone(), (w / 2, m), title))?;
        // Plot area: room for row labels left, column labels and the x description below.
        let widest = h.y_values.iter().map(|s| s.chars().count()).max().unwrap_or(0) as i32;
        let (x0, x1) = (m + 30 + widest * 8 + 8, w - m);
        let (y0, y1) = (m + TITLE_PX as i32 + 16, ht - m - 48);
        let (nc, nr) = (h.x_values.len() as i32, h.y_values.len() as i32);
        let (cw, ch) = ((x1 - x0) / nc.max(1), (y1 - y0) / nr.max(1));
        let label = TextStyle::from((FAMILY, LABEL_PX)).color(&BLACK);
        for (r, row) in h.cells.iter().enumerate() {
            // Row 0 at the bottom.
            let top = y0 + (nr - 1 - r as i32) * ch;
            for (c, v) in row.iter().enumerate() {
                let left = x0 + c as i32 * cw;
                let (fill, text, ink) = match *v {
                    Some(v) => {
                        let col = self.colour(v);
                        let light = (col.0 as u32 * 299 + col.1 as u32 * 587 + col.2 as u32 * 114) > 128_000;
                        (col, axis::format_value(v), if light { BLACK } else { WHITE })
                    }
                    None => (RGBColor(220, 220, 220), "—".to_string(), BLACK),
                };
                root.draw(&Rectangle::new([(left, top), (left + cw, top + ch)], fill.filled()))?;
                root.draw(&Rectangle::new([(left, top), (left + cw, top + ch)], WHITE.stroke_width(1)))?;
                let style = label.clone().color(&ink).pos(centre(HPos::Center, VPos::Center));
                root.draw(&Text::new(text, (left + cw / 2, top + ch / 2), style))?;
            }
            let style = label.clone().pos(centre(HPos::Right, VPos::Center));
            root.draw(&Text::new(h.y_values[r].clone(), (x0 - 6, top + ch / 2), style))?;
        }
        for (c, s) in h.x_values.iter().enumerate() {
            let style = label.clone().pos(centre(HPos::Center, VPos::Top));
            root.draw(&Text::new(s.clone(), (x0 + c as i32 * cw + cw / 2, y0 + nr * ch + 6), style))?;
        }
        let desc = TextStyle::from((FAMILY, draw::AXIS_DESC_PX)).color(&BLACK);
        root.draw(&Text::new(
            h.x_label.clone(),
            ((x0 + x1) / 2, ht - m - 8),
            desc.clone().pos(centre(HPos::Center, VPos::Bottom)),
        ))?;
        let ydesc = desc.transform(FontTransform::Rotate270).pos(centre(HPos::Center, VPos::Top));
        root.draw(&Text::new(h.y_label.clone(), (m, (y0 + y1) / 2), ydesc))?;
        Ok(())
    }
}

//! Stacked horizontal bars: each bar a sequence of named segments (for stall reasons per
//! kernel), drawn as shares of the bar's total so that bars of different sizes compare. A
//! segment name keeps one colour across bars (first-seen order) and has one legend entry.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::draw::{self, Figure, LABEL_PX, LEGEND_PX, MARGIN, TITLE_PX};
use crate::error::{check_size, check_value};
use crate::font::FAMILY;
use crate::{Error, palette};

/// One bar.
#[derive(Clone, Debug, PartialEq)]
pub struct Bar {
    pub label: String,
    /// (segment name, value ≥ 0), drawn left to right.
    pub segments: Vec<(String, f64)>,
}

/// A stacked bar chart: see the module documentation.
#[derive(Clone, Debug, PartialEq)]
pub struct StackedBars {
    pub title: String,
    /// What the segments' values are (e.g. `share of warp-cycles`).
    pub value_label: String,
    pub bars: Vec<Bar>,
    /// Width in pixels; the height follows from the number of bars and legend entries.
    pub width: u32,
}

impl StackedBars {
    pub fn new(title: impl Into<String>, value_label: impl Into<String>) -> StackedBars {
        StackedBars { title: title.into(), value_label: value_label.into(), bars: Vec::new(), width: 900 }
    }
}

/// The chart as an SVG document (the same bytes for the same chart).
///
/// Errors: [`Error::Empty`] when no bar has a positive total; [`Error::NotFinite`] or
/// [`Error::Negative`] naming the bar and segment; [`Error::BadSize`].
pub fn render_svg(b: &StackedBars) -> Result<String, Error> {
    draw::svg(&Prepared::new(b)?)
}

/// Writes the chart as a PNG file (`path` must end in `.png`), checked first as [`render_svg`].
pub fn write_png(b: &StackedBars, path: impl AsRef<Path>) -> Result<(), Error> {
    draw::png(&Prepared::new(b)?, path.as_ref())
}

const BAR_PX: i32 = 26;
const GAP_PX: i32 = 10;
const LEGEND_ROW_PX: i32 = 20;
const LEGEND_COLS: usize = 3;

struct Prepared<'a> {
    b: &'a StackedBars,
    /// Segment names in first-seen order (their colour index).
    names: Vec<&'a str>,
    height: u32,
}

impl<'a> Prepared<'a> {
    fn new(b: &'a StackedBars) -> Result<Prepared<'a>, Error> {
        let mut names: Vec<&str> = Vec::new();
        for bar in &b.bars {
            for (n, v) in &bar.segments {
                let label = || format!("{}/{n}", bar.label);
                check_value(label, "value", *v, false)?;
                if *v < 0.0 {
                    return Err(Error::Negative { label: label(), value: *v });
                }
                if !names.contains(&n.as_str()) {
                    names.push(n);
                }
            }
        }
        if !b.bars.iter().any(|bar| bar.segments.iter().map(|s| s.1).sum::<f64>() > 0.0) {
            return Err(Error::Empty);
        }
        let rows = b.bars.len() as i32;
        let legend_rows = names.len().div_ceil(LEGEND_COLS) as i32;
        let h = MARGIN as i32 * 3 + TITLE_PX as i32 + 24 + rows * (BAR_PX + GAP_PX) + legend_rows * LEGEND_ROW_PX + 24;
        let height = (h as u32).max(150);
        check_size((b.width, height))?;
        Ok(Prepared { b, names, height })
    }
}

impl Figure for Prepared<'_> {
    fn size(&self) -> (u32, u32) {
        (self.b.width, self.height)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), Error> {
        let b = self.b;
        root.fill(&WHITE)?;
        let w = b.width as i32;
        let m = MARGIN as i32;
        let pos = Pos::new;
        let title = TextStyle::from((FAMILY, TITLE_PX)).color(&BLACK).pos(pos(HPos::Center, VPos::Top));
        root.draw(&Text::new(b.title.clone(), (w / 2, m), title))?;
        let widest = b.bars.iter().map(|x| x.label.chars().count()).max().unwrap_or(0).min(40) as i32;
        let (x0, x1) = (m + widest * 8 + 10, w - m - 50);
        let mut y = m + TITLE_PX as i32 + 16;
        let label = TextStyle::from((FAMILY, LABEL_PX)).color(&BLACK);
        let colour = |n: &str| palette::colour_many(self.names.iter().position(|x| *x == n).unwrap_or(0));
        for bar in &b.bars {
            let total: f64 = bar.segments.iter().map(|s| s.1).sum();
            let mut x = x0 as f64;
            for (n, v) in &bar.segments {
                let share = if total > 0.0 { v / total } else { 0.0 };
                let dx = share * (x1 - x0) as f64;
                let (l, r) = (x.round() as i32, (x + dx).round() as i32);
                if r > l {
                    root.draw(&Rectangle::new([(l, y), (r, y + BAR_PX)], colour(n).filled()))?;
                }
                x += dx;
            }
            root.draw(&Rectangle::new([(x0, y), (x1, y + BAR_PX)], palette::GRID_BOLD.stroke_width(1)))?;
            let name: String = bar.label.chars().take(40).collect();
            root.draw(&Text::new(name, (x0 - 6, y + BAR_PX / 2), label.clone().pos(pos(HPos::Right, VPos::Center))))?;
            y += BAR_PX + GAP_PX;
        }
        let desc = TextStyle::from((FAMILY, LABEL_PX)).color(&BLACK).pos(pos(HPos::Center, VPos::Top));
        root.draw(&Text::new(format!("{} (each bar 100%)", b.value_label), ((x0 + x1) / 2, y), desc))?;
        y += 24;
        let col_w = (w - 2 * m) / LEGEND_COLS as i32;
        let legend = TextStyle::from((FAMILY, LEGEND_PX)).color(&BLACK).pos(pos(HPos::Left, VPos::Center));
        for (i, n) in self.names.iter().enumerate() {
            let (cx, cy) = (m + (i % LEGEND_COLS) as i32 * col_w, y + (i / LEGEND_COLS) as i32 * LEGEND_ROW_PX);
            root.draw(&Rectangle::new([(cx, cy + 3), (cx + 14, cy + 15)], colour(n).filled()))?;
            root.draw(&Text::new(n.to_string(), (cx + 20, cy + 9), legend.clone()))?;
        }
        Ok(())
    }
}

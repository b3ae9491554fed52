//! Where the legend goes: the corner of the plot area that covers the fewest points.

use plotters::chart::SeriesLabelPosition;

use crate::axis::Axis;

/// The corner, among upper left, upper right, lower right and lower left (ties in that order),
/// whose box of the legend's estimated size holds the fewest of `points` (plot space).
/// `entries` and `widest` (characters of the longest entry) estimate the box as a fraction of
/// the plot area of `plot_px` pixels.
pub(crate) fn best_corner(
    points: &[(f64, f64)],
    x: &Axis,
    y: &Axis,
    entries: usize,
    widest: usize,
    plot_px: (u32, u32),
) -> SeriesLabelPosition {
    // About 20 px per entry plus padding; 8 px per character plus the marker and padding.
    let h = ((entries as f64 * 20.0 + 16.0) / plot_px.1.max(1) as f64).min(1.0);
    let w = ((widest as f64 * 8.0 + 48.0) / plot_px.0.max(1) as f64).min(1.0);
    let corners = [
        (SeriesLabelPosition::UpperLeft, false, true),
        (SeriesLabelPosition::UpperRight, true, true),
        (SeriesLabelPosition::LowerRight, true, false),
        (SeriesLabelPosition::LowerLeft, false, false),
    ];
    let mut best = (usize::MAX, SeriesLabelPosition::UpperLeft);
    for (pos, right, upper) in corners {
        let n = points
            .iter()
            .filter(|&&(px, py)| {
                let fx = (px - x.lo) / (x.hi - x.lo);
                let fy = (py - y.lo) / (y.hi - y.lo);
                let in_x = if right { fx >= 1.0 - w } else { fx <= w };
                let in_y = if upper { fy >= 1.0 - h } else { fy <= h };
                in_x && in_y
            })
            .count();
        if n < best.0 {
            best = (n, pos);
        }
    }
    best.1
}

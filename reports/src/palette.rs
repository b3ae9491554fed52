//! Colours: the Okabe–Ito palette (distinguishable with the common colour-vision
//! deficiencies), in a fixed order, yellow last (weak on white).

use plotters::style::RGBColor;

const COLOURS: [RGBColor; 8] = [
    RGBColor(0, 114, 178),   // blue
    RGBColor(213, 94, 0),    // vermillion
    RGBColor(0, 158, 115),   // bluish green
    RGBColor(204, 121, 167), // reddish purple
    RGBColor(230, 159, 0),   // orange
    RGBColor(86, 180, 233),  // sky blue
    RGBColor(0, 0, 0),       // black
    RGBColor(240, 228, 66),  // yellow
];

/// The colour of the `i`-th group or series; repeats after 8.
pub(crate) fn colour(i: usize) -> RGBColor {
    COLOURS[i % COLOURS.len()]
}

/// Grid lines.
pub(crate) const GRID_BOLD: RGBColor = RGBColor(205, 205, 205);
pub(crate) const GRID_LIGHT: RGBColor = RGBColor(238, 238, 238);

/// The colour of the `i`-th of many groups (stacked bar segments): the palette, then the palette
/// again lightened halfway to white, so 16 groups stay distinct.
pub(crate) fn colour_many(i: usize) -> RGBColor {
    let c = COLOURS[i % COLOURS.len()];
    if (i / COLOURS.len()).is_multiple_of(2) {
        c
    } else {
        let light = |v: u8| ((v as u16 + 255) / 2) as u8;
        RGBColor(light(c.0), light(c.1), light(c.2))
    }
}

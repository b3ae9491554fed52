//! The embedded font: DejaVu Sans (Bitstream Vera license, `fonts/LICENSE-DejaVu`).
//!
//! plotters looks fonts up by family name; with the `ab_glyph` feature it knows only the fonts
//! registered with [`plotters::style::register_font`], never the system's. Every text of this
//! crate uses [`FAMILY`] in [`FontStyle::Normal`] (other
//! styles would fall back to it), which [`ensure_registered`] registers once per process.

use std::sync::OnceLock;

use plotters::style::{FontStyle, register_font};

use crate::Error;

/// The family name every text of this crate uses, and the one written into SVG files.
pub const FAMILY: &str = "sans-serif";

/// DejaVuSans.ttf 2.37, from Debian's fonts-dejavu-core 2.37-6.
pub static DEJAVU_SANS: &[u8] = include_bytes!("../fonts/DejaVuSans.ttf");

/// Registers [`DEJAVU_SANS`] as [`FAMILY`] (normal style) the first time it is called; later
/// calls return the first outcome. Every drawing function calls it before drawing.
pub fn ensure_registered() -> Result<(), Error> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    if *REGISTERED.get_or_init(|| register_font(FAMILY, FontStyle::Normal, DEJAVU_SANS).is_ok()) {
        Ok(())
    } else {
        Err(Error::Font)
    }
}

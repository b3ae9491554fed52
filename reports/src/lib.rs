//! Plots for gpusim: plain data in, an SVG string or a PNG file out.
//!
//! - [`scatter`]: simulated against measured values, one point per case, on log-log axes with
//!   the y = x line and a ±band (the correlation plot of `gpusim correlate --report`).
//! - [`lines`]: named series of (x, y) points, each axis linear or logarithmic (for sweeps).
//! - [`heatmap`]: a value per cell of two categorical axes (a sweep over two parameters).
//! - [`bars`]: stacked horizontal bars of named segments (stall reasons per kernel).
//! - [`roofline`]: compute and bandwidth ceilings with achieved points, as a log-log [`lines`] plot.
//! - [`doc`] and [`html`]: the one document model (sections of paragraphs, provenance, sortable
//!   tables and these figures) and its rendering to one self-contained HTML page.
//!
//! Each plot module has `render_svg(&plot) -> Result<String, Error>` and
//! `write_png(&plot, path) -> Result<(), Error>`.
//!
//! Contract:
//! - **No simulation and no I/O** besides the explicit `write_png` functions; nothing is read,
//!   not even system fonts. Text is laid out (SVG) and drawn (PNG) with DejaVu Sans, embedded
//!   from `fonts/DejaVuSans.ttf` and registered with plotters as `sans-serif` before the first
//!   drawing (see [`font`]). An SVG names the family `sans-serif`, so a viewer draws its own
//!   sans-serif face at the positions computed with DejaVu's metrics. PNG text is drawn by
//!   this crate's backend (`bitmap.rs`), which places glyphs where plotters 0.3.7 misplaces
//!   them.
//! - **Validated input**: a value that cannot be drawn (not finite, or not positive on a log
//!   axis), an empty plot, a bad band or size is an [`Error`] naming the point; nothing panics
//!   on bad data, and `write_png` creates no file when the data is rejected.
//! - **Deterministic**: the same plot gives the same SVG bytes and the same PNG bytes.
//!   Colours are assigned in a fixed order; nothing depends on hashing, time or the machine.

mod axis;
pub mod bars;
mod bitmap;
pub mod doc;
mod draw;
pub mod error;
pub mod font;
pub mod heatmap;
pub mod html;
mod legend;
pub mod lines;
mod palette;
pub mod roofline;
pub mod scatter;

pub use error::Error;

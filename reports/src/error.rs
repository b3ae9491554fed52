//! The one error type of the crate.

use std::path::PathBuf;

/// Why a plot could not be drawn or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A value is NaN or infinite. `what` names the coordinate (`measured`, `simulated`, `x`,
    /// `y`), `label` the point (scatter) or the series and index (lines).
    #[error("{what} of `{label}` is {value}, not a finite number")]
    NotFinite { label: String, what: &'static str, value: f64 },
    /// A value on a logarithmic axis is zero or negative.
    #[error("{what} of `{label}` is {value}: a logarithmic axis needs values > 0")]
    NotPositive { label: String, what: &'static str, value: f64 },
    /// A bar segment is negative.
    #[error("value of `{label}` is {value}: bar segments must be ≥ 0")]
    Negative { label: String, value: f64 },
    /// The data's dimensions disagree (a heatmap's cells and labels).
    #[error("mismatched shape: {0}")]
    Shape(String),
    /// The plot has no point at all.
    #[error("nothing to plot: no points")]
    Empty,
    /// The scatter plot's band is not a fraction in [0, 1).
    #[error("band = {0}: must be a fraction in [0, 1) (0.1 for ±10 %)")]
    BadBand(f64),
    /// The image is too small to hold the axes (at least 200 × 150 pixels).
    #[error("size {0} × {1}: at least 200 × 150 pixels are needed")]
    BadSize(u32, u32),
    /// The embedded font could not be registered with plotters.
    #[error("the embedded font could not be loaded")]
    Font,
    /// plotters failed while drawing.
    #[error("drawing failed: {0}")]
    Draw(String),
    /// The PNG file could not be written.
    #[error("{}: cannot write the PNG: {message}", path.display())]
    Png { path: PathBuf, message: String },
}

impl<E: std::error::Error + Send + Sync> From<plotters::drawing::DrawingAreaErrorKind<E>> for Error {
    fn from(e: plotters::drawing::DrawingAreaErrorKind<E>) -> Error {
        Error::Draw(e.to_string())
    }
}

/// Checks one coordinate: finite, and positive when `log`.
pub(crate) fn check_value(
    label: impl FnOnce() -> String,
    what: &'static str,
    value: f64,
    log: bool,
) -> Result<(), Error> {
    if !value.is_finite() {
        return Err(Error::NotFinite { label: label(), what, value });
    }
    if log && value <= 0.0 {
        return Err(Error::NotPositive { label: label(), what, value });
    }
    Ok(())
}

/// Checks the image size.
pub(crate) fn check_size((w, h): (u32, u32)) -> Result<(), Error> {
    if w < 200 || h < 150 { Err(Error::BadSize(w, h)) } else { Ok(()) }
}

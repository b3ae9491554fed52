//! Rooflines: a compute ceiling and one bandwidth ceiling per memory level on log-log axes of
//! arithmetic intensity (FLOP/byte) and FLOP/s, with the kernels' achieved points. Built as a
//! [`LinePlot`] (one drawing mechanism): each ceiling is a series `min(peak, bandwidth × I)`
//! through its ridge point, each kernel point a one-point series.

use crate::Error;
use crate::lines::{LinePlot, Series};

/// A roofline: see the module documentation.
#[derive(Clone, Debug, PartialEq)]
pub struct Roofline {
    pub title: String,
    /// Name and peak of the compute ceiling, FLOP/s.
    pub compute: (String, f64),
    /// (level name, peak bandwidth B/s), one ceiling each.
    pub levels: Vec<(String, f64)>,
    /// (label, intensity FLOP/B, achieved FLOP/s).
    pub points: Vec<(String, f64, f64)>,
}

fn check(label: &str, what: &'static str, v: f64) -> Result<(), Error> {
    crate::error::check_value(|| label.to_string(), what, v, true)
}

/// The roofline as a line plot (log-log), ready for [`crate::lines::render_svg`].
///
/// Errors: a peak, bandwidth, intensity or FLOP/s that is not finite and positive
/// ([`Error::NotFinite`], [`Error::NotPositive`]) naming it; [`Error::Empty`] without a level.
pub fn plot(r: &Roofline) -> Result<LinePlot, Error> {
    check(&r.compute.0, "peak", r.compute.1)?;
    if r.levels.is_empty() {
        return Err(Error::Empty);
    }
    for (n, bw) in &r.levels {
        check(n, "bandwidth", *bw)?;
    }
    for (n, i, f) in &r.points {
        check(n, "intensity", *i)?;
        check(n, "FLOP/s", *f)?;
    }
    // The intensity range: every ridge and point, a decade beyond on each side.
    let ridges: Vec<f64> = r.levels.iter().map(|(_, bw)| r.compute.1 / bw).collect();
    let all = ridges.iter().copied().chain(r.points.iter().map(|p| p.1));
    let (lo, hi) = all.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| (a.min(v), b.max(v)));
    let (lo, hi) = (lo / 10.0, hi * 10.0);
    let mut p = LinePlot::new(r.title.clone(), "arithmetic intensity (FLOP/byte)", "FLOP/s");
    p.x_log = true;
    p.y_log = true;
    for ((name, bw), ridge) in r.levels.iter().zip(&ridges) {
        let points = vec![(lo, bw * lo), (*ridge, r.compute.1), (hi, r.compute.1)];
        p.series.push(Series::new(format!("{name} ceiling"), points));
    }
    for (label, i, f) in &r.points {
        p.series.push(Series::markers(label.clone(), vec![(*i, *f)]));
    }
    Ok(p)
}

//! Axis ranges, ticks and tick labels.
//!
//! Charts are drawn in *plot space*: the value itself on a linear axis, its base-10 logarithm
//! on a logarithmic one. This module picks the range (the data padded a little), the labelled
//! ticks and the unlabelled grid lines in plot space, and formats a tick's value. Doing it
//! here rather than with plotters' log coordinates keeps ticks on round values (1-2-5 steps,
//! decades) and labels short.

/// One axis, in plot space.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Axis {
    pub log: bool,
    pub lo: f64,
    pub hi: f64,
    /// Labelled ticks (bold grid lines).
    pub ticks: Vec<f64>,
    /// Unlabelled grid lines.
    pub minor: Vec<f64>,
    /// Decimals of a linear axis' labels (enough for its step); None: [`format_value`].
    decimals: Option<usize>,
}

impl Axis {
    /// An axis covering `min..=max` (values, not plot space; both > 0 when `log`), padded by
    /// a few percent of the span on each side.
    pub fn new(min: f64, max: f64, log: bool) -> Axis {
        if log { log_axis(min, max) } else { linear_axis(min, max) }
    }

    /// A value's position in plot space.
    pub fn to_plot(&self, v: f64) -> f64 {
        if self.log { v.log10() } else { v }
    }

    /// The label of a tick at plot-space position `p`.
    pub fn label(&self, p: f64) -> String {
        match (self.log, self.decimals) {
            (true, _) => format_value(10f64.powf(p)),
            (false, Some(d)) => format!("{:.d$}", if p.abs() < 1e-12 { 0.0 } else { p }),
            (false, None) => format_value(p),
        }
    }
}

fn log_axis(min: f64, max: f64) -> Axis {
    let (a, b) = (min.log10(), max.log10());
    let pad = ((b - a) * 0.06).max(0.12);
    let (lo, hi) = (a - pad, b + pad);
    let decades = hi - lo;
    // Multiples of each decade that get a labelled tick, and those that get a grid line only.
    let (major, minor): (&[f64], &[f64]) = if decades <= 1.2 {
        (&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0], &[1.5, 2.5, 3.5, 4.5])
    } else if decades <= 3.0 {
        (&[1.0, 2.0, 5.0], &[3.0, 4.0, 6.0, 7.0, 8.0, 9.0])
    } else if decades <= 7.0 {
        (&[1.0], &[2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])
    } else {
        (&[1.0], &[])
    };
    // Beyond 7 decades, label every `stride`-th decade and grid the others.
    let stride = ((decades / 7.0).ceil() as i64).max(1);
    let (mut ticks, mut grid) = (Vec::new(), Vec::new());
    for e in (lo.floor() as i64)..=(hi.ceil() as i64) {
        let labelled_decade = e.rem_euclid(stride) == 0;
        for &m in major {
            let p = e as f64 + m.log10();
            if p >= lo && p <= hi {
                if labelled_decade || m != 1.0 { ticks.push(p) } else { grid.push(p) }
            }
        }
        for &m in minor {
            let p = e as f64 + m.log10();
            if p >= lo && p <= hi {
                grid.push(p);
            }
        }
    }
    grid.sort_by(f64::total_cmp);
    Axis { log: true, lo, hi, ticks, minor: grid, decimals: None }
}

fn linear_axis(min: f64, max: f64) -> Axis {
    let span = max - min;
    let pad = if span > 0.0 { span * 0.05 } else { (min.abs() * 0.1).max(1.0) };
    let (lo, hi) = (min - pad, max + pad);
    let step = nice_step((hi - lo) / 6.0);
    let ticks = (((lo / step).ceil() as i64)..=((hi / step).floor() as i64)).map(|i| i as f64 * step).collect();
    let minor = (((lo / step * 2.0).ceil() as i64)..=((hi / step * 2.0).floor() as i64))
        .filter(|i| i % 2 != 0)
        .map(|i| i as f64 * step / 2.0)
        .collect();
    // Plain decimals while they stay short, else 2.5e6-style labels.
    let d = (-step.log10().floor()).max(0.0) as usize;
    let decimals = (lo.abs().max(hi.abs()) < 1e6 && d <= 6).then_some(d);
    Axis { log: false, lo, hi, ticks, minor, decimals }
}

/// The 1-2-5 step nearest to `raw` (on a log scale, roughly).
fn nice_step(raw: f64) -> f64 {
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let m = if f < 1.5 {
        1.0
    } else if f < 3.0 {
        2.0
    } else if f < 7.0 {
        5.0
    } else {
        10.0
    };
    m * mag
}

/// A short label: plain decimals for 0.001 ≤ |v| < 100 000 (up to 4 significant digits,
/// trailing zeros dropped), else `2e6`, `1.5e-5`.
pub(crate) fn format_value(v: f64) -> String {
    let a = v.abs();
    if a < 1e-12 {
        return "0".into();
    }
    if (1e-3..1e5).contains(&a) {
        let decimals = (3 - a.log10().floor() as i32).max(0) as usize;
        trim(format!("{v:.decimals$}"))
    } else {
        let e = a.log10().floor() as i32;
        let m = v / 10f64.powi(e);
        // Rounding the mantissa can reach 10.
        let (m, e) = if (m.abs() * 100.0).round() >= 1000.0 { (m / 10.0, e + 1) } else { (m, e) };
        format!("{}e{e}", trim(format!("{m:.2}")))
    }
}

fn trim(s: String) -> String {
    if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels() {
        let cases = [
            (1.0, "1"),
            (20.0, "20"),
            (0.002, "0.002"),
            (1500.0, "1500"),
            (20000.0, "20000"),
            (1e5, "1e5"),
            (2.5e6, "2.5e6"),
            (1e-4, "1e-4"),
            (-3.0, "-3"),
            (0.0, "0"),
            (9.999e6, "1e7"),
        ];
        for (v, s) in cases {
            assert_eq!(format_value(v), s, "{v}");
        }
    }

    #[test]
    fn log_ticks_are_decades_over_a_wide_range() {
        let a = Axis::new(4.0, 19000.0, true);
        let labels: Vec<String> = a.ticks.iter().map(|&t| a.label(t)).collect();
        assert_eq!(labels, ["10", "100", "1000", "10000"]);
        assert!(a.lo < 4f64.log10() && a.hi > 19000f64.log10());
    }

    #[test]
    fn log_ticks_are_1_2_5_over_two_decades() {
        let a = Axis::new(3.0, 300.0, true);
        let labels: Vec<String> = a.ticks.iter().map(|&t| a.label(t)).collect();
        assert_eq!(labels, ["5", "10", "20", "50", "100", "200"]);
    }

    #[test]
    fn one_value_gets_a_range() {
        let a = Axis::new(7.0, 7.0, true);
        assert!(a.lo < a.hi && !a.ticks.is_empty());
        let b = Axis::new(0.0, 0.0, false);
        assert!(b.lo < b.hi && b.ticks.contains(&0.0));
    }

    #[test]
    fn very_wide_log_range_thins_labels() {
        let a = Axis::new(1e-3, 1e12, true);
        assert!(a.ticks.len() <= 8, "{:?}", a.ticks);
    }

    #[test]
    fn linear_ticks() {
        let a = Axis::new(0.0, 10.0, false);
        assert_eq!(a.ticks, [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        let b = Axis::new(1000.0, 1000.003, false);
        let labels: Vec<String> = b.ticks.iter().map(|&t| b.label(t)).collect();
        assert_eq!(labels, ["1000.0000", "1000.0005", "1000.0010", "1000.0015", "1000.0020", "1000.0025", "1000.0030"]);
        let c = Axis::new(-1.0, 1.0, false);
        let labels: Vec<String> = c.ticks.iter().map(|&t| c.label(t)).collect();
        assert_eq!(labels, ["-1.0", "-0.5", "0.0", "0.5", "1.0"]);
    }
}

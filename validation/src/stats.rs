//! Error statistics of simulated against measured values.
//!
//! Conventions (all errors are fractions, 0.05 = 5%):
//! - relative error `e = (sim − measured) / measured` ([`rel_error`]);
//! - MAPE = mean |e| ([`mape`]); median |e| ([`median`] of the |e|);
//! - Pearson and Spearman correlation of `ln sim` against `ln measured` ([`pearson`],
//!   [`spearman`]; Spearman is rank-based, so the log changes nothing for it);
//! - the trust-weighted mean |ln(sim/measured)| ([`weighted_abs_log_error`]), the quantity
//!   calibration minimises: `Σ wᵢ·|ln(simᵢ/measᵢ)| / Σ wᵢ`.
//!
//! [`summarize`] computes all of them for a set of [`Point`]s, overall and per group (kind).
//! Functions return `None` where a statistic is undefined (no points, zero variance,
//! non-positive values under a log).

use std::collections::BTreeMap;

use serde::Serialize;

/// `(sim − measured) / measured`.
pub fn rel_error(sim: f64, measured: f64) -> f64 {
    (sim - measured) / measured
}

/// `|ln(sim / measured)|`; `None` unless both are positive and finite.
pub fn abs_log_ratio(sim: f64, measured: f64) -> Option<f64> {
    (sim > 0.0 && measured > 0.0 && sim.is_finite() && measured.is_finite()).then(|| (sim / measured).ln().abs())
}

/// Arithmetic mean; `None` when empty.
pub fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

/// Median (the mean of the two middle values for an even count); `None` when empty.
pub fn median(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { 0.5 * (v[n / 2 - 1] + v[n / 2]) })
}

/// Mean absolute relative error of `(sim, measured)` pairs: mean of |sim − meas| / |meas|.
pub fn mape(pairs: &[(f64, f64)]) -> Option<f64> {
    let e: Vec<f64> = pairs.iter().map(|&(s, m)| rel_error(s, m).abs()).collect();
    mean(&e)
}

/// Pearson's correlation coefficient; `None` for fewer than two points, unequal lengths or
/// zero variance in either.
pub fn pearson(x: &[f64], y: &[f64]) -> Option<f64> {
    if x.len() != y.len() || x.len() < 2 {
        return None;
    }
    let (mx, my) = (mean(x)?, mean(y)?);
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        let (dx, dy) = (a - mx, b - my);
        sxy += dx * dy;
        sxx += dx * dx;
        syy += dy * dy;
    }
    if sxx <= 0.0 || syy <= 0.0 {
        return None;
    }
    Some((sxy / (sxx.sqrt() * syy.sqrt())).clamp(-1.0, 1.0))
}

/// Ranks from 1, ties getting the mean of the ranks they span (fractional ranking).
pub fn ranks(xs: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..xs.len()).collect();
    idx.sort_by(|&a, &b| xs[a].total_cmp(&xs[b]).then(a.cmp(&b)));
    let mut r = vec![0.0; xs.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && xs[idx[j + 1]] == xs[idx[i]] {
            j += 1;
        }
        let rank = (i + j) as f64 / 2.0 + 1.0;
        for &k in &idx[i..=j] {
            r[k] = rank;
        }
        i = j + 1;
    }
    r
}

/// Spearman's rank correlation: Pearson's on the [`ranks`].
pub fn spearman(x: &[f64], y: &[f64]) -> Option<f64> {
    if x.len() != y.len() {
        return None;
    }
    pearson(&ranks(x), &ranks(y))
}

/// `Σ wᵢ·|ln(simᵢ/measᵢ)| / Σ wᵢ` over `(sim, measured, weight)`; `None` when the weights sum
/// to zero or a value is not positive.
pub fn weighted_abs_log_error(points: &[(f64, f64, f64)]) -> Option<f64> {
    let (mut num, mut den) = (0.0, 0.0);
    for &(s, m, w) in points {
        num += w * abs_log_ratio(s, m)?;
        den += w;
    }
    (den > 0.0).then(|| num / den)
}

/// One simulated case for the statistics.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    pub id: String,
    /// Group for the per-group breakdown (the case's kind).
    pub group: String,
    pub sim: f64,
    pub measured: f64,
    /// Trust weight ([`crate::case::Trust::weight`]).
    pub weight: f64,
}

/// A case among the worst.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Worst {
    pub id: String,
    pub group: String,
    /// Relative error (signed).
    pub error: f64,
}

/// Statistics of a set of points. Errors are fractions.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Stats {
    pub n: usize,
    pub mape: Option<f64>,
    pub median_abs_error: Option<f64>,
    pub max_abs_error: Option<f64>,
    /// Mean signed relative error (bias): positive when the simulation overestimates.
    pub mean_error: Option<f64>,
    /// Pearson correlation of ln(sim) against ln(measured).
    pub pearson_log: Option<f64>,
    /// Spearman rank correlation of ln(sim) against ln(measured).
    pub spearman_log: Option<f64>,
    /// Trust-weighted mean |ln(sim/measured)|.
    pub weighted_abs_log_error: Option<f64>,
}

/// [`Stats`] overall, per group, and the worst cases.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    pub overall: Stats,
    /// By group (kind), in name order.
    pub by_group: BTreeMap<String, Stats>,
    /// The cases with the largest |error|, largest first (ties by id).
    pub worst: Vec<Worst>,
}

/// Statistics of `points`. The order of `points` does not matter: they are sorted by id first,
/// so that sums run in one order and the result is bit-identical.
pub fn stats(points: &[Point]) -> Stats {
    let mut sorted = points.to_vec();
    sorted.sort_by(|a, b| a.id.cmp(&b.id).then_with(|| a.group.cmp(&b.group)));
    let points = &sorted[..];
    let pairs: Vec<(f64, f64)> = points.iter().map(|p| (p.sim, p.measured)).collect();
    let abs_err: Vec<f64> = pairs.iter().map(|&(s, m)| rel_error(s, m).abs()).collect();
    let signed: Vec<f64> = pairs.iter().map(|&(s, m)| rel_error(s, m)).collect();
    let all_positive = pairs.iter().all(|&(s, m)| s > 0.0 && m > 0.0);
    let (ls, lm): (Vec<f64>, Vec<f64>) =
        if all_positive { pairs.iter().map(|&(s, m)| (s.ln(), m.ln())).unzip() } else { (Vec::new(), Vec::new()) };
    let weighted: Vec<(f64, f64, f64)> = points.iter().map(|p| (p.sim, p.measured, p.weight)).collect();
    Stats {
        n: points.len(),
        mape: mape(&pairs),
        median_abs_error: median(&abs_err),
        max_abs_error: abs_err.iter().copied().reduce(f64::max),
        mean_error: mean(&signed),
        pearson_log: pearson(&lm, &ls),
        spearman_log: spearman(&lm, &ls),
        weighted_abs_log_error: weighted_abs_log_error(&weighted),
    }
}

/// [`Stats`] of all points and of each group, and the `worst_n` cases with the largest |error|.
pub fn summarize(points: &[Point], worst_n: usize) -> Summary {
    let mut groups: BTreeMap<String, Vec<Point>> = BTreeMap::new();
    for p in points {
        groups.entry(p.group.clone()).or_default().push(p.clone());
    }
    let mut worst: Vec<Worst> = points
        .iter()
        .map(|p| Worst { id: p.id.clone(), group: p.group.clone(), error: rel_error(p.sim, p.measured) })
        .collect();
    worst.sort_by(|a, b| b.error.abs().total_cmp(&a.error.abs()).then_with(|| a.id.cmp(&b.id)));
    worst.truncate(worst_n);
    Summary { overall: stats(points), by_group: groups.into_iter().map(|(g, ps)| (g, stats(&ps))).collect(), worst }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-12, "{a} != {b}");
    }

    fn pt(id: &str, group: &str, sim: f64, measured: f64, weight: f64) -> Point {
        Point { id: id.into(), group: group.into(), sim, measured, weight }
    }

    #[test]
    fn errors_and_means() {
        close(rel_error(110.0, 100.0), 0.1);
        close(rel_error(90.0, 100.0), -0.1);
        close(mape(&[(110.0, 100.0), (80.0, 100.0), (100.0, 100.0)]).unwrap(), 0.1);
        assert_eq!(mape(&[]), None);
        close(mean(&[1.0, 2.0, 6.0]).unwrap(), 3.0);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        close(abs_log_ratio(200.0, 100.0).unwrap(), std::f64::consts::LN_2);
        close(abs_log_ratio(50.0, 100.0).unwrap(), std::f64::consts::LN_2);
        assert_eq!(abs_log_ratio(0.0, 100.0), None);
    }

    #[test]
    fn pearson_known_values() {
        close(pearson(&[1.0, 2.0, 3.0], &[2.0, 4.0, 6.0]).unwrap(), 1.0);
        close(pearson(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]).unwrap(), -1.0);
        // x = 1..5, y = 2,4,5,4,5: r = 6 / sqrt(10 · 6) = 0.7745966692414834.
        close(pearson(&[1.0, 2.0, 3.0, 4.0, 5.0], &[2.0, 4.0, 5.0, 4.0, 5.0]).unwrap(), 0.7745966692414834);
        assert_eq!(pearson(&[1.0, 1.0], &[1.0, 2.0]), None, "zero variance");
        assert_eq!(pearson(&[1.0], &[1.0]), None);
        assert_eq!(pearson(&[1.0, 2.0], &[1.0]), None);
    }

    #[test]
    fn ranks_and_spearman_known_values() {
        assert_eq!(ranks(&[10.0, 30.0, 20.0]), vec![1.0, 3.0, 2.0]);
        assert_eq!(ranks(&[5.0, 1.0, 5.0, 2.0]), vec![3.5, 1.0, 3.5, 2.0]);
        // Monotone but not linear: Spearman 1, Pearson below 1.
        let x = [1.0, 2.0, 3.0, 4.0];
        let y = [1.0, 8.0, 27.0, 1000.0];
        close(spearman(&x, &y).unwrap(), 1.0);
        assert!(pearson(&x, &y).unwrap() < 0.99);
        // One swapped pair among 5: rho = 1 − 6·Σd²/(n(n²−1)) = 1 − 6·2/120 = 0.9.
        close(spearman(&[1.0, 2.0, 3.0, 4.0, 5.0], &[1.0, 2.0, 4.0, 3.0, 5.0]).unwrap(), 0.9);
    }

    #[test]
    fn weighted_log_error_known_value() {
        // |ln 2| with weight 1, |ln 1| with weight 0.5, |ln 0.5| with weight 0.25.
        let v = weighted_abs_log_error(&[(2.0, 1.0, 1.0), (1.0, 1.0, 0.5), (1.0, 2.0, 0.25)]).unwrap();
        close(v, 1.25 * std::f64::consts::LN_2 / 1.75);
        assert_eq!(weighted_abs_log_error(&[]), None);
        assert_eq!(weighted_abs_log_error(&[(1.0, -1.0, 1.0)]), None);
    }

    #[test]
    fn summary_of_known_points() {
        let pts = [
            pt("a", "gemm", 110.0, 100.0, 1.0),
            pt("b", "gemm", 180.0, 200.0, 0.5),
            pt("c", "latency", 30.0, 30.0, 1.0),
            pt("d", "latency", 60.0, 40.0, 0.25),
        ];
        let s = summarize(&pts, 2);
        assert_eq!(s.overall.n, 4);
        // |e| = 0.1, 0.1, 0, 0.5.
        close(s.overall.mape.unwrap(), 0.175);
        close(s.overall.median_abs_error.unwrap(), 0.1);
        close(s.overall.max_abs_error.unwrap(), 0.5);
        close(s.overall.mean_error.unwrap(), (0.1 - 0.1 + 0.0 + 0.5) / 4.0);
        let w = (1.1f64.ln().abs() + 0.5 * 0.9f64.ln().abs() + 0.25 * 1.5f64.ln()) / 2.75;
        close(s.overall.weighted_abs_log_error.unwrap(), w);
        // Measured 100, 200, 30, 40 → sim 110, 180, 30, 60: same ranks except 40 vs 30 order kept.
        close(s.overall.spearman_log.unwrap(), 1.0);
        assert!(s.overall.pearson_log.unwrap() > 0.9);
        assert_eq!(s.by_group.keys().collect::<Vec<_>>(), ["gemm", "latency"]);
        close(s.by_group["gemm"].mape.unwrap(), 0.1);
        close(s.by_group["latency"].mape.unwrap(), 0.25);
        assert_eq!(s.worst.iter().map(|w| w.id.as_str()).collect::<Vec<_>>(), ["d", "a"], "ties by id");
        close(s.worst[0].error, 0.5);
        // The order of the points does not matter.
        let mut rev = pts.to_vec();
        rev.reverse();
        assert_eq!(summarize(&rev, 2), s);
    }

    #[test]
    fn empty_summary_has_no_statistics() {
        let s = summarize(&[], 3);
        assert_eq!(s.overall.n, 0);
        assert_eq!((s.overall.mape, s.overall.pearson_log, s.overall.spearman_log), (None, None, None));
        assert!(s.by_group.is_empty() && s.worst.is_empty());
    }
}

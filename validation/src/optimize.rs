//! Nelder–Mead minimisation, derivative-free, for `gpusim calibrate`.
//!
//! Deterministic: a fixed initial simplex (`x0` and `x0 + step·eᵢ`, stepping down where up
//! would leave the unit box), a fixed iteration cap, and ties broken by vertex order. Each
//! iteration evaluates its candidates (reflection, expansion and both contractions,
//! speculatively) in parallel with rayon, as does the initial simplex and a shrink; results are
//! collected in order, so the outcome does not depend on the number of threads.

use rayon::prelude::*;

/// Settings of [`nelder_mead`].
#[derive(Clone, Debug)]
pub struct NmOptions {
    /// Iterations at most.
    pub max_iter: usize,
    /// Size of the initial simplex's edges.
    pub step: f64,
    /// Clamp every point to the unit box `[0, 1]ⁿ` (normalised parameters).
    pub unit_box: bool,
    /// Stop when every vertex is within this distance (max norm) of the best.
    pub x_tol: f64,
}

impl Default for NmOptions {
    fn default() -> Self {
        NmOptions { max_iter: 40, step: 0.1, unit_box: true, x_tol: 1e-4 }
    }
}

/// The best point found.
#[derive(Clone, Debug, PartialEq)]
pub struct NmResult {
    pub x: Vec<f64>,
    pub fx: f64,
    pub iterations: usize,
    pub evaluations: usize,
}

/// Minimises `f` from `x0`. Non-finite values of `f` count as +∞.
pub fn nelder_mead<F: Fn(&[f64]) -> f64 + Sync>(f: F, x0: &[f64], o: &NmOptions) -> NmResult {
    let n = x0.len();
    let fix = |mut x: Vec<f64>| {
        if o.unit_box {
            x.iter_mut().for_each(|v| *v = v.clamp(0.0, 1.0));
        }
        x
    };
    let eval = |xs: &[Vec<f64>]| -> Vec<f64> {
        xs.par_iter().with_max_len(1).map(|x| f(x)).map(|v| if v.is_nan() { f64::INFINITY } else { v }).collect()
    };
    let mut pts = vec![fix(x0.to_vec())];
    for i in 0..n {
        let mut x = pts[0].clone();
        x[i] += if o.unit_box && x[i] + o.step > 1.0 { -o.step } else { o.step };
        pts.push(fix(x));
    }
    let mut fs = eval(&pts);
    let mut evaluations = pts.len();
    let mut iterations = 0;
    let lerp = |a: &[f64], b: &[f64], t: f64| -> Vec<f64> { a.iter().zip(b).map(|(a, b)| a + t * (b - a)).collect() };
    while iterations < o.max_iter && n > 0 {
        // Sort best first (stable: ties keep vertex order).
        let mut idx: Vec<usize> = (0..=n).collect();
        idx.sort_by(|&a, &b| fs[a].total_cmp(&fs[b]));
        pts = idx.iter().map(|&i| pts[i].clone()).collect();
        fs = idx.iter().map(|&i| fs[i]).collect();
        let spread =
            pts[1..].iter().flat_map(|p| p.iter().zip(&pts[0]).map(|(a, b)| (a - b).abs())).fold(0.0, f64::max);
        if spread < o.x_tol {
            break;
        }
        iterations += 1;
        let centroid: Vec<f64> = (0..n).map(|j| pts[..n].iter().map(|p| p[j]).sum::<f64>() / n as f64).collect();
        let worst = &pts[n];
        // Reflection, expansion, outside and inside contraction, evaluated together.
        let cand: Vec<Vec<f64>> = [-1.0, -2.0, -0.5, 0.5].iter().map(|&t| fix(lerp(&centroid, worst, t))).collect();
        let fc = eval(&cand);
        evaluations += cand.len();
        let (fr, fe, fo, fi) = (fc[0], fc[1], fc[2], fc[3]);
        let replace = if fr < fs[0] {
            Some(if fe < fr { 1 } else { 0 })
        } else if fr < fs[n - 1] {
            Some(0)
        } else if fr < fs[n] {
            (fo <= fr).then_some(2)
        } else {
            (fi < fs[n]).then_some(3)
        };
        match replace {
            Some(k) => {
                pts[n] = cand[k].clone();
                fs[n] = fc[k];
            }
            None => {
                let shrunk: Vec<Vec<f64>> = pts[1..].iter().map(|p| fix(lerp(&pts[0], p, 0.5))).collect();
                let fsh = eval(&shrunk);
                evaluations += shrunk.len();
                for (i, (p, v)) in shrunk.into_iter().zip(fsh).enumerate() {
                    pts[i + 1] = p;
                    fs[i + 1] = v;
                }
            }
        }
    }
    let best = (0..pts.len()).min_by(|&a, &b| fs[a].total_cmp(&fs[b]).then(a.cmp(&b))).unwrap_or(0);
    NmResult { x: pts[best].clone(), fx: fs[best], iterations, evaluations }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quadratic_in_the_unit_box() {
        let f = |x: &[f64]| (x[0] - 0.3).powi(2) + 2.0 * (x[1] - 0.7).powi(2) + 0.5 * (x[2] - 0.55).powi(2);
        let r = nelder_mead(f, &[0.5, 0.5, 0.5], &NmOptions { max_iter: 200, x_tol: 1e-7, ..NmOptions::default() });
        for (a, b) in r.x.iter().zip([0.3, 0.7, 0.55]) {
            assert!((a - b).abs() < 1e-3, "{r:?}");
        }
        // A minimum outside the box ends on its face.
        let r = nelder_mead(|x: &[f64]| (x[0] - 2.0).powi(2), &[0.5], &NmOptions::default());
        assert!((r.x[0] - 1.0).abs() < 1e-9, "{r:?}");
    }

    #[test]
    fn rosenbrock() {
        let f = |x: &[f64]| 100.0 * (x[1] - x[0] * x[0]).powi(2) + (1.0 - x[0]).powi(2);
        let o = NmOptions { max_iter: 2000, step: 0.5, unit_box: false, x_tol: 1e-9 };
        let r = nelder_mead(f, &[-1.2, 1.0], &o);
        assert!((r.x[0] - 1.0).abs() < 1e-3 && (r.x[1] - 1.0).abs() < 2e-3, "{r:?}");
    }

    #[test]
    fn thread_count_does_not_change_the_result() {
        let f = |x: &[f64]| (x[0] - 0.42).abs() + (x[1] - 0.1).powi(2);
        let run = |t| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(t)
                .build()
                .unwrap()
                .install(|| nelder_mead(f, &[0.9, 0.9], &NmOptions::default()))
        };
        assert_eq!(run(1), run(4));
    }
}

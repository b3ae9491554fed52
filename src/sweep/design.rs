//! From axes to points: the full factorial (default) or a Latin hypercube with a seed; axes in a
//! zipped group move together (their i-th values form one level). Pure and deterministic.
//!
//! Factorial order: nested loops in the axes' order, the last group fastest. Latin hypercube:
//! `n` samples; each group's range is cut into `n` strata and every stratum is used exactly
//! once, in an order shuffled per group. A group of one range axis is sampled continuously
//! within its stratum (its `:N` count is not used); a list, or a zipped group, picks the level
//! its stratum falls in, so samples may repeat: repeats are dropped and counted.

use std::collections::HashSet;

use super::spec::Spec;

/// The most points one study may have (full factorial, Latin hypercube, or values of one range).
/// Before the first point runs, every point's chip is built and validated and kept in memory
/// (`prepare`), and the manifest lists every point: at 100,000 points that is about a minute on
/// 2 cores and a manifest of tens of MB. A bigger design is a Latin hypercube of fewer points, or
/// several studies; a product of axes that exceeds this is refused before anything is built
/// (it used to overflow, or to spend minutes validating).
pub const MAX_POINTS: usize = 100_000;

/// One varied parameter.
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    pub key: String,
    pub spec: Spec,
}

/// How points are drawn from the axes.
#[derive(Clone, Debug, PartialEq)]
pub enum Method {
    Factorial,
    LatinHypercube { points: usize, seed: u64 },
}

/// One point: `(key, override text)` in the axes' order.
pub type Point = Vec<(String, String)>;

/// The points of a study, and for a Latin hypercube how many repeated samples were dropped.
#[derive(Debug)]
pub struct Expanded {
    pub points: Vec<Point>,
    pub dropped: usize,
}

/// Expands `axes` (zipped as `zip` says) by `method`.
pub fn expand(axes: &[Axis], zip: &[Vec<String>], method: &Method) -> Result<Expanded, String> {
    let groups = groups(axes, zip)?;
    let levels: Vec<Vec<String>> =
        axes.iter().map(|a| a.spec.levels().map_err(|e| format!("`{}`: {e}", a.key))).collect::<Result<_, _>>()?;
    let mut lens = Vec::new();
    for g in &groups {
        let n = levels[g[0]].len();
        if let Some(&other) = g.iter().find(|&&a| levels[a].len() != n) {
            return Err(format!(
                "zipped `{}` ({n} values) and `{}` ({} values) must have as many values",
                axes[g[0]].key,
                axes[other].key,
                levels[other].len()
            ));
        }
        lens.push(n);
    }
    // Each point as a level (or a rendered value) per axis.
    let mut rows: Vec<Vec<String>> = Vec::new();
    match method {
        Method::Factorial => {
            let total = lens.iter().try_fold(1usize, |acc, &n| acc.checked_mul(n)).filter(|&t| t <= MAX_POINTS);
            let Some(total) = total else {
                let sizes: Vec<String> = lens.iter().map(|n| n.to_string()).collect();
                return Err(format!(
                    "the full factorial has {} points, more than the {MAX_POINTS} a study may have; \
                     use a latin hypercube of fewer points, or split the study",
                    sizes.join(" × ")
                ));
            };
            for mut i in 0..total {
                let mut row = vec![String::new(); axes.len()];
                for (g, &len) in groups.iter().zip(&lens).rev() {
                    let level = i % len;
                    i /= len;
                    for &a in g {
                        row[a] = levels[a][level].clone();
                    }
                }
                rows.push(row);
            }
        }
        Method::LatinHypercube { points, seed } => {
            let n = *points;
            if n == 0 {
                return Err("a Latin hypercube needs at least 1 point".into());
            }
            if n > MAX_POINTS {
                return Err(format!("a Latin hypercube of {n} points: a study may have at most {MAX_POINTS}"));
            }
            let mut rng = gpusim_workloads::rng::SplitMix64(*seed);
            rows = vec![vec![String::new(); axes.len()]; n];
            for (g, &len) in groups.iter().zip(&lens) {
                let mut perm: Vec<usize> = (0..n).collect();
                for i in (1..n).rev() {
                    perm.swap(i, rng.below(i as u64 + 1) as usize);
                }
                for (row, &stratum) in rows.iter_mut().zip(&perm) {
                    let t = (stratum as f64 + rng.unit()) / n as f64;
                    match (&g[..], &axes[g[0]].spec) {
                        ([a], Spec::Range(r)) => row[*a] = r.render(r.at(t)),
                        _ => {
                            let level = ((t * len as f64) as usize).min(len - 1);
                            for &a in g {
                                row[a] = levels[a][level].clone();
                            }
                        }
                    }
                }
            }
        }
    }
    let mut points: Vec<Point> = Vec::new();
    let mut seen: HashSet<Point> = HashSet::new();
    let mut dropped = 0;
    for row in rows {
        let p: Point = axes.iter().map(|a| a.key.clone()).zip(row).collect();
        if !seen.insert(p.clone()) {
            if *method == Method::Factorial {
                return Err(format!("the point {} comes twice", show(&p)));
            }
            dropped += 1;
        } else {
            points.push(p);
        }
    }
    Ok(Expanded { points, dropped })
}

/// `key=value, key=value`, for messages.
pub fn show(p: &Point) -> String {
    if p.is_empty() {
        return "the base chip".into();
    }
    p.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ")
}

/// Axis indices grouped: each zip group (in the order of its first axis), every other axis
/// alone.
fn groups(axes: &[Axis], zip: &[Vec<String>]) -> Result<Vec<Vec<usize>>, String> {
    let mut group_of: Vec<Option<usize>> = vec![None; axes.len()];
    for (gi, g) in zip.iter().enumerate() {
        if g.len() < 2 {
            return Err(format!("a zipped group needs at least two keys: {g:?}"));
        }
        for key in g {
            let a = axes
                .iter()
                .position(|a| &a.key == key)
                .ok_or_else(|| format!("zipped key `{key}` is not a varied parameter"))?;
            if group_of[a].is_some() {
                return Err(format!("`{key}` is zipped twice"));
            }
            group_of[a] = Some(gi);
        }
    }
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut placed: Vec<Option<usize>> = vec![None; zip.len()];
    for (a, g) in group_of.iter().enumerate() {
        match g {
            None => out.push(vec![a]),
            Some(gi) => match placed[*gi] {
                Some(o) => out[o].push(a),
                None => {
                    placed[*gi] = Some(out.len());
                    out.push(vec![a]);
                }
            },
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::spec::parse_cli;
    use super::*;
    use gpusim_configs::ParamKind;

    fn axis(key: &str, spec: &str, kind: ParamKind) -> Axis {
        Axis { key: key.into(), spec: parse_cli(spec, kind).unwrap() }
    }

    fn values(p: &Point) -> Vec<&str> {
        p.iter().map(|(_, v)| v.as_str()).collect()
    }

    #[test]
    fn factorial_is_nested_loops_last_axis_fastest() {
        let axes = [
            axis("sm.count", "[66, 132]", ParamKind::Integer),
            axis("l2.size", r#"["40 MiB", "50 MiB", "60 MiB"]"#, ParamKind::Bytes),
        ];
        let e = expand(&axes, &[], &Method::Factorial).unwrap();
        assert_eq!(e.points.len(), 6);
        assert_eq!(values(&e.points[0]), ["66", "40 MiB"]);
        assert_eq!(values(&e.points[1]), ["66", "50 MiB"]);
        assert_eq!(values(&e.points[3]), ["132", "40 MiB"]);
        assert_eq!(e.points[5][0].0, "sm.count");
        assert!(expand(&[], &[], &Method::Factorial).unwrap().points == vec![Vec::new()]);
    }

    #[test]
    fn zipped_axes_move_together() {
        let axes = [
            axis("l2.size", r#"["50 MiB", "128 MiB"]"#, ParamKind::Bytes),
            axis("sm.count", "[66, 132]", ParamKind::Integer),
            axis("l2.slices", "[80, 128]", ParamKind::Integer),
        ];
        let zip = vec![vec!["l2.slices".to_string(), "l2.size".to_string()]];
        let e = expand(&axes, &zip, &Method::Factorial).unwrap();
        let got: Vec<Vec<&str>> = e.points.iter().map(values).collect();
        assert_eq!(
            got,
            [["50 MiB", "66", "80"], ["50 MiB", "132", "80"], ["128 MiB", "66", "128"], ["128 MiB", "132", "128"]]
        );
        let bad = [axis("l2.size", "[1, 2]", ParamKind::Bytes), axis("l2.slices", "[1, 2, 3]", ParamKind::Integer)];
        let zip = vec![vec!["l2.size".to_string(), "l2.slices".to_string()]];
        assert!(expand(&bad, &zip, &Method::Factorial).unwrap_err().contains("as many values"));
        let zip = vec![vec!["l2.size".to_string(), "nope".to_string()]];
        assert!(expand(&bad, &zip, &Method::Factorial).unwrap_err().contains("not a varied"));
    }

    #[test]
    fn latin_hypercube_uses_every_stratum_once_and_is_seeded() {
        let axes = [
            axis("hbm.bandwidth", r#""2 TB/s".."4 TB/s":2"#, ParamKind::BytesPerSec),
            axis("clocks.sm", r#""1 GHz".."2 GHz":2"#, ParamKind::Hertz),
        ];
        let m = Method::LatinHypercube { points: 8, seed: 7 };
        let a = expand(&axes, &[], &m).unwrap();
        assert_eq!(a.points.len(), 8);
        assert_eq!(a.dropped, 0);
        for (i, (unit, lo, hi)) in [("TB/s", 2.0, 4.0), ("GHz", 1.0, 2.0)].into_iter().enumerate() {
            let mut strata: Vec<usize> = a
                .points
                .iter()
                .map(|p| {
                    let x: f64 = p[i].1.trim_end_matches(unit).trim().parse().unwrap();
                    assert!((lo..=hi).contains(&x), "{x}");
                    ((x - lo) / (hi - lo) * 8.0).floor() as usize
                })
                .collect();
            strata.sort();
            assert_eq!(strata, (0..8).collect::<Vec<_>>(), "axis {i}");
        }
        assert_eq!(expand(&axes, &[], &m).unwrap().points, a.points, "same seed, same points");
        let b = expand(&axes, &[], &Method::LatinHypercube { points: 8, seed: 8 }).unwrap();
        assert_ne!(b.points, a.points);
    }

    #[test]
    fn latin_hypercube_over_lists_drops_repeats() {
        let axes = [axis("sm.count", "[66, 132]", ParamKind::Integer)];
        let e = expand(&axes, &[], &Method::LatinHypercube { points: 4, seed: 1 }).unwrap();
        assert_eq!(e.points.len(), 2);
        assert_eq!(e.dropped, 2);
    }

    #[test]
    fn designs_past_the_point_limit_are_refused_before_any_point_is_built() {
        // 10 axes of 100 values: 10^20 points, which overflowed a 64-bit product.
        let axes: Vec<Axis> = (0..10).map(|i| axis(&format!("k{i}"), "1..100:100", ParamKind::Float)).collect();
        let e = expand(&axes, &[], &Method::Factorial).unwrap_err();
        assert!(e.contains("100 × 100 × 100") && e.contains("more than the 100000"), "{e}");
        // Just over the limit without overflow.
        let axes = [axis("a", "1..1000:1000", ParamKind::Float), axis("b", "1..101:101", ParamKind::Float)];
        assert!(expand(&axes, &[], &Method::Factorial).unwrap_err().contains("1000 × 101"));
        // At the limit it expands.
        let axes = [axis("a", "1..1000:1000", ParamKind::Float), axis("b", "1..100:100", ParamKind::Float)];
        assert_eq!(expand(&axes, &[], &Method::Factorial).unwrap().points.len(), MAX_POINTS);
        let lhs = Method::LatinHypercube { points: MAX_POINTS + 1, seed: 1 };
        assert!(expand(&axes, &[], &lhs).unwrap_err().contains("at most"));
        assert!(parse_cli("1..2:100001", ParamKind::Float).unwrap_err().contains("at most"));
    }
}

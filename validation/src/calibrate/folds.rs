//! Stratified k-fold cross-validation of a fit.

use super::evaluate::Evaluator;
use super::{CrossValidation, Fold, OutOfFold};
use crate::hash::hash_str;
use crate::reference::Case;
use crate::stats::mape;

/// The order whose i-th case goes to fold i mod k: by stratum (kind, then level), then by the
/// hash of the id. Without strata, one fold of an A100 memory fit held out the only L1 latency
/// case and both DRAM latency cases at once, and its fit, with nothing to pin the HBM latency,
/// moved it 50% (33% error out of fold); stratified, each DRAM latency case is held out with
/// the other in training. With one stratum (GEMM cases) the order is the hash order alone.
fn fold_order(cases: &[&Case]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..cases.len()).collect();
    order.sort_by_key(|&i| {
        let c = cases[i];
        (c.kind.to_string(), c.level.clone().unwrap_or_default(), hash_str(&c.id), i)
    });
    order
}

pub(super) fn cross_validate(ev: &Evaluator, folds: usize, max_iter: usize) -> Option<CrossValidation> {
    let n = ev.cases.len();
    let k = folds.min(n);
    if k < 2 {
        return None;
    }
    let order = fold_order(&ev.cases);
    let mut out = Vec::new();
    let mut oof: Vec<Option<OutOfFold>> = vec![None; n];
    for f in 0..k {
        let test: Vec<usize> = order.iter().enumerate().filter(|(r, _)| r % k == f).map(|(_, &i)| i).collect();
        let mut train: Vec<usize> = order.iter().enumerate().filter(|(r, _)| r % k != f).map(|(_, &i)| i).collect();
        train.sort_unstable();
        let values = ev.fit(&train, max_iter);
        // Simulated once already for the fold's validation error: these come from the cache.
        for (&i, sim) in test.iter().zip(ev.simulate(&values, &test)) {
            let c = ev.cases[i];
            oof[i] = Some(OutOfFold {
                id: c.id.clone(),
                kind: c.kind.to_string(),
                measured: c.value,
                predicted: sim.ok().filter(|v| *v > 0.0 && v.is_finite()),
                fold: f + 1,
            });
        }
        out.push(Fold {
            held_out: test.iter().map(|&i| ev.cases[i].id.clone()).collect(),
            train: ev.errors(&values, &train),
            validation: ev.errors(&values, &test),
            values,
        });
    }
    let m = |g: &dyn Fn(&Fold) -> f64| out.iter().map(g).sum::<f64>() / out.len() as f64;
    let out_of_fold: Vec<OutOfFold> = oof.into_iter().flatten().collect();
    let mut kinds: Vec<&str> = out_of_fold.iter().map(|o| o.kind.as_str()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    let by_kind = kinds
        .into_iter()
        .map(|kind| {
            // A failed simulation counts as a 100% error, as in the fold errors.
            let pairs: Vec<(f64, f64)> = out_of_fold
                .iter()
                .filter(|o| o.kind == kind)
                .map(|o| (o.predicted.unwrap_or(0.0), o.measured))
                .collect();
            let max = pairs.iter().map(|(p, m)| ((p - m) / m).abs()).fold(0.0, f64::max);
            (kind.to_string(), pairs.len(), mape(&pairs).unwrap_or(f64::NAN), max)
        })
        .collect();
    Some(CrossValidation {
        k,
        out_of_fold,
        by_kind,
        train_mape: m(&|f| f.train.mape),
        train_wlog: m(&|f| f.train.wlog),
        validation_mape: m(&|f| f.validation.mape),
        validation_wlog: m(&|f| f.validation.wlog),
        folds: out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::Kind;

    #[test]
    fn folds_are_stratified_by_kind_and_level() {
        use crate::reference::Metric;
        let case = |id: &str, kind: Kind, level: &str| {
            let mut c = Case::new(id, kind, Metric::Cycles, 1.0);
            c.level = Some(level.into());
            c
        };
        let cases = [
            case("lat-dram-a", Kind::Latency, "DRAM"),
            case("lat-l1", Kind::Latency, "L1"),
            case("bw-dram-a", Kind::Bandwidth, "DRAM"),
            case("lat-dram-b", Kind::Latency, "DRAM"),
            case("bw-dram-b", Kind::Bandwidth, "DRAM"),
            case("bw-dram-c", Kind::Bandwidth, "DRAM"),
            case("lat-l2", Kind::Latency, "L2"),
        ];
        let refs: Vec<&Case> = cases.iter().collect();
        let order = fold_order(&refs);
        let fold_of = |id: &str| order.iter().position(|&i| cases[i].id == id).unwrap() % 3;
        // Same stratum, different folds: each is predicted by a fit that trained on the other.
        assert_ne!(fold_of("lat-dram-a"), fold_of("lat-dram-b"));
        let bw: Vec<usize> = ["bw-dram-a", "bw-dram-b", "bw-dram-c"].iter().map(|id| fold_of(id)).collect();
        assert!(bw[0] != bw[1] && bw[1] != bw[2] && bw[0] != bw[2], "{bw:?}");
        // One stratum: the hash order alone, as before strata.
        let gemm: Vec<Case> = (0..6).map(|i| Case::new(format!("g{i}"), Kind::Gemm, Metric::Tflops, 1.0)).collect();
        let refs: Vec<&Case> = gemm.iter().collect();
        let mut by_hash: Vec<usize> = (0..6).collect();
        by_hash.sort_by_key(|&i| (hash_str(&gemm[i].id), i));
        assert_eq!(fold_order(&refs), by_hash);
    }
}

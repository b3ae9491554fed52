//! Calibration of a preset's model parameters against reference measurements
//! (`gpusim calibrate`).
//!
//! - **Cases**: those of the selected kinds whose hardware maps to the preset, planned as in
//!   [`crate::correlate`] ([`crate::correlate::plan_case`]); GEMM cases above `max_flops` and disputed cases
//!   ([`crate::memory_cases::DISPUTED`]) are skipped (listed).
//! - **Parameters**: dotted config keys ([`resolve_params`]). Datasheet-fixed ones (`sm.count`,
//!   `clocks.*`, `tensor.flops_per_clk_per_sm.*`, `hbm.bandwidth`, sizes) are refused unless
//!   allowed. Bounds: the schema's declared range ([`gpusim_configs::ParamInfo::min`], `max`) where it
//!   gives one; a missing lower bound is 0, a missing upper bound 4× the preset's value (20000
//!   in the parameter's unit when the preset's value is 0).
//! - **Candidates**: the preset's `Arch` with the fitted keys set by
//!   [`gpusim_configs::Arch::with_overrides`] (cycles and integers rounded to whole numbers, durations to whole
//!   picoseconds, other units to three decimals, as a config file would write them).
//! - **Objective**: the trust-weighted mean |ln(sim/measured)|
//!   ([`crate::stats::weighted_abs_log_error`]); a failed simulation counts as |ln| = 5.
//! - **Optimiser**: [`crate::optimize::nelder_mead`] over the parameters normalised to [0, 1] within their bounds,
//!   from the preset's values, 40 iterations at most.
//! - **Cross-validation**: stratified k-fold (`folds::fold_order`): cases are ordered by stratum
//!   (kind and level: L1 latency, DRAM bandwidth, ...) and within it by the hash of their id,
//!   and the i-th case of that order goes to fold i mod k (k ≤ the number of cases). So the
//!   cases of one stratum, which pin the same parameters, fall into different folds, and a fold
//!   holds out every case of a stratum only when the stratum has one case. Each fold is fitted
//!   on the other folds and evaluated on itself; training and validation errors are means over
//!   folds.
//! - **Cache**: simulations are cached by (config hash, simulation) within a run; cases with the
//!   same simulation share it. A [`SimStore`] ([`CalOptions::store`]) keeps them beyond the run,
//!   so that an interrupted calibration resumes where it stopped.
//!
//! Deterministic: the result does not depend on the number of threads.
//!
//! Files: `params.rs` (the fitted parameters and their bounds), `evaluate.rs` (the cases, the
//! cached simulations, the objective and the fit), `folds.rs` (cross-validation), `render.rs`
//! (reports); this file holds the options, the results, [`calibrate`] and [`transfer`].

use std::sync::atomic::Ordering;

use serde::Serialize;

use crate::correlate::KindSelection;
use crate::hash::hash_str;
use crate::reference::Case;

mod evaluate;
mod folds;
mod params;
mod render;

use evaluate::evaluator;
use folds::cross_validate;
pub use params::{
    CalParam, DEFAULT_FIT_GEMM, DEFAULT_FIT_MEMORY, ValueKind, apply_values, is_datasheet, resolve_params,
};

/// A failure of [`calibrate`] (bad input: unknown or datasheet parameter, no usable case).
#[derive(Clone, Debug, PartialEq)]
pub struct CalError {
    pub message: String,
    /// Stopped by [`CalOptions::stop`]: nothing was fitted.
    pub interrupted: bool,
}

impl std::fmt::Display for CalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

fn err<T>(m: impl Into<String>) -> Result<T, CalError> {
    Err(CalError { message: m.into(), interrupted: false })
}

/// How to calibrate.
#[derive(Clone, Debug)]
pub struct CalOptions {
    /// The built-in preset calibrated (whose hardware picks the cases, and which the written
    /// config inherits).
    pub preset: String,
    /// The config to start from when it is not the built-in `preset` itself: a file of that
    /// name (a calibrated preset regenerated but not yet built in, refined by a second fit).
    pub base: Option<gpusim_configs::Arch>,
    pub kinds: KindSelection,
    /// Dotted keys; empty: [`DEFAULT_FIT_GEMM`] when GEMM cases are selected, else
    /// [`DEFAULT_FIT_MEMORY`].
    pub fit: Vec<String>,
    pub allow_datasheet: bool,
    pub folds: usize,
    pub threads: usize,
    /// GEMM cases above this many FLOPs are skipped.
    pub max_flops: Option<f64>,
    pub max_iter: usize,
    pub data_files: Vec<String>,
    /// Once set (by a Ctrl-C handler), no further simulation starts and the running ones stop;
    /// `calibrate` then fails with [`CalError::interrupted`] and fits nothing.
    pub stop: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// Counts the simulations run so far (cache hits are not simulations), for a caller's
    /// progress display; `None`: counted privately.
    pub progress: Option<std::sync::Arc<std::sync::atomic::AtomicUsize>>,
    /// Sample long kernels (`calibrate --sample`, as `correlate --sample`): every simulation of
    /// the fit, its folds and its transfers. `None`: full detail.
    pub sample: Option<gpusim_sim_core::SampleOptions>,
    /// Where finished simulations are kept and looked up before simulating (`calibrate
    /// --resume DIR`); `None`: within this run only.
    pub store: Option<std::sync::Arc<dyn SimStore>>,
}

/// Finished simulations kept beyond one calibration, so that a fit that was stopped (Ctrl-C,
/// SIGKILL, the end of a session) resumes without simulating again what it had simulated.
///
/// Contract: `key` names one simulation completely within one build of gpusim: the candidate
/// chip (the hash of its resolved TOML), the case's simulation ([`crate::correlate::Job`]) and
/// the sampling. The store must tell builds apart itself (a result depends on the model's code,
/// which the key does not see). `get` returns what a `put` of the same key stored, or `None`;
/// `put` is called once per finished simulation, from any worker thread, never for a
/// simulation that was interrupted. A store that cannot keep a result loses only resumability:
/// the calibration's results do not depend on it.
pub trait SimStore: Send + Sync + std::fmt::Debug {
    fn get(&self, key: &str) -> Option<Result<f64, String>>;
    /// `what`: a line saying which simulation it was (the candidate's values, its config hash
    /// and the job), for a reader of the store.
    fn put(&self, key: &str, what: &str, result: &Result<f64, String>);
}

impl Default for CalOptions {
    fn default() -> Self {
        CalOptions {
            preset: String::new(),
            base: None,
            kinds: KindSelection::default_kinds(),
            fit: Vec::new(),
            allow_datasheet: false,
            folds: 5,
            threads: 1,
            max_flops: None,
            max_iter: 40,
            data_files: Vec::new(),
            stop: None,
            progress: None,
            sample: None,
            store: None,
        }
    }
}

/// Errors of a set of cases under one config.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Errors {
    pub n: usize,
    pub mape: f64,
    /// Trust-weighted mean |ln(sim/measured)|.
    pub wlog: f64,
}

/// One fold of the cross-validation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Fold {
    pub held_out: Vec<String>,
    pub values: Vec<f64>,
    pub train: Errors,
    pub validation: Errors,
}

/// k-fold cross-validation: means over folds, and every case's out-of-fold prediction (the
/// fit of the fold that held it out).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CrossValidation {
    pub k: usize,
    pub folds: Vec<Fold>,
    pub train_mape: f64,
    pub train_wlog: f64,
    pub validation_mape: f64,
    pub validation_wlog: f64,
    /// Each case once, predicted by the fold that held it out (case order).
    pub out_of_fold: Vec<OutOfFold>,
    /// Out-of-fold MAPE per kind of case, pooled over the folds: (kind, cases, MAPE, max |error|).
    pub by_kind: Vec<(String, usize, f64, f64)>,
}

/// A case's prediction by the fit that did not see it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OutOfFold {
    pub id: String,
    pub kind: String,
    pub measured: f64,
    /// `None`: the simulation failed.
    pub predicted: Option<f64>,
    pub fold: usize,
}

/// A case in the calibration.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CalCase {
    pub id: String,
    pub kind: String,
    pub measured: f64,
    pub weight: f64,
    pub before: Option<f64>,
    pub after: Option<f64>,
}

/// The result of [`calibrate`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Calibration {
    pub preset: String,
    pub data_files: Vec<String>,
    pub params: Vec<CalParam>,
    pub fitted: Vec<f64>,
    pub before: Errors,
    pub after: Errors,
    pub cv: Option<CrossValidation>,
    pub cases: Vec<CalCase>,
    /// `(id, reason)` of the cases not used.
    pub skipped: Vec<(String, String)>,
    pub simulations: usize,
    /// Simulations found in [`CalOptions::store`], kept by an earlier run, not run again.
    pub reused: usize,
    pub preset_hash: String,
    /// `--sample`'s options when long kernels were sampled; `None`: full detail.
    pub sampled: Option<String>,
}

fn pool(threads: usize) -> Result<rayon::ThreadPool, CalError> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads.max(1))
        .build()
        .map_err(|e| CalError { message: format!("cannot start {threads} threads: {e}"), interrupted: false })
}

/// Calibrates `opts.fit` of `opts.preset` on `cases`.
pub fn calibrate(cases: &[Case], opts: &CalOptions) -> Result<Calibration, CalError> {
    let (ev, skipped, rendered) = evaluator(&opts.preset, opts.base.as_ref(), cases, opts, &opts.fit)?;
    let params = ev.params.clone();
    let pool = pool(opts.threads)?;
    let n = ev.cases.len();
    let all: Vec<usize> = (0..n).collect();
    let preset_values: Vec<f64> = params.iter().map(|p| p.preset_value).collect();
    pool.install(|| {
        let before = ev.errors(&preset_values, &all);
        let cv = cross_validate(&ev, opts.folds, opts.max_iter);
        let fitted = ev.fit(&all, opts.max_iter);
        let after = ev.errors(&fitted, &all);
        let cases = ev.compare(&preset_values, &fitted);
        if ev.stopped() {
            return Err(CalError {
                message: format!(
                    "interrupted after {} simulations: nothing was fitted{}",
                    ev.sims.load(Ordering::Relaxed),
                    if opts.store.is_some() { " (what finished is kept: rerun the command to resume)" } else { "" }
                ),
                interrupted: true,
            });
        }
        Ok(Calibration {
            preset: opts.preset.clone(),
            data_files: opts.data_files.clone(),
            params: params.clone(),
            fitted,
            before,
            after,
            cv,
            cases,
            skipped,
            simulations: ev.sims.load(Ordering::Relaxed),
            reused: ev.reused.load(Ordering::Relaxed),
            preset_hash: hash_str(&rendered),
            sampled: opts.sample.map(|o| o.to_string()),
        })
    })
}

/// A calibration carried to another chip: its fitted values set on `target` (a preset of
/// another part, with that part's datasheet values), evaluated on the target's cases.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Transfer {
    pub from: String,
    pub target: String,
    pub params: Vec<CalParam>,
    /// The values carried over (those fitted on `from`).
    pub values: Vec<f64>,
    /// Errors on the target's cases with its own preset values.
    pub before: Errors,
    /// With the carried values.
    pub after: Errors,
    pub cases: Vec<CalCase>,
    pub skipped: Vec<(String, String)>,
}

/// Sets `cal`'s fitted parameters on `target` and compares the errors on `target`'s cases
/// (selected as `opts` selects them) before and after: the cross-generation check (calibrate on
/// one generation, predict the next). Nothing is fitted to the target's cases.
pub fn transfer(cal: &Calibration, target: &str, cases: &[Case], opts: &CalOptions) -> Result<Transfer, CalError> {
    let keys: Vec<String> = cal.params.iter().map(|p| p.key.clone()).collect();
    let (ev, skipped, _) = evaluator(target, None, cases, opts, &keys)?;
    let own: Vec<f64> = ev.params.iter().map(|p| p.preset_value).collect();
    let all: Vec<usize> = (0..ev.cases.len()).collect();
    pool(opts.threads)?.install(|| {
        let before = ev.errors(&own, &all);
        let after = ev.errors(&cal.fitted, &all);
        let cases = ev.compare(&own, &cal.fitted);
        Ok(Transfer {
            from: cal.preset.clone(),
            target: target.to_string(),
            params: ev.params.clone(),
            values: cal.fitted.clone(),
            before,
            after,
            cases,
            skipped,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fit_carries_to_another_part_unchanged() {
        // One cheap case per part: the L1 hit latency of an A100 and of an H800 PCIe.
        let all = crate::reference::load_default().unwrap();
        let cases: Vec<Case> =
            all.into_iter().filter(|c| c.id == "lat-a10080-l1-rrze" || c.id == "lat-h800pcie-l1-hpmll").collect();
        assert_eq!(cases.len(), 2);
        let opts = CalOptions {
            preset: "a100-sxm4-80gb".into(),
            fit: vec!["l1.hit_latency".into()],
            folds: 0,
            max_iter: 4,
            ..CalOptions::default()
        };
        let cal = calibrate(&cases, &opts).unwrap();
        assert_eq!(cal.cases.len(), 1, "only the A100 case is fitted");
        let t = transfer(&cal, "h800-pcie", &cases, &opts).unwrap();
        assert_eq!(t.values, cal.fitted);
        assert_eq!(t.cases.len(), 1);
        assert_eq!(t.cases[0].id, "lat-h800pcie-l1-hpmll");
        // The H800's own L1 latency (32 cycles measured) against the A100's (33): the carried
        // value makes the prediction the A100's.
        let (before, after) = (t.cases[0].before.unwrap(), t.cases[0].after.unwrap());
        assert!((before - 32.0).abs() < 1.0 && (after - cal.fitted[0]).abs() < 1.0, "{before} {after}");
        assert!(t.markdown().contains("h800-pcie") && t.text().contains("carried to h800-pcie"));
        // A part with no case of the selection is an error the CLI reports as a note.
        assert!(transfer(&cal, "h200-sxm", &cases, &opts).is_err());
    }

    #[test]
    fn disputed_cases_neither_train_nor_validate() {
        // The two A100 L1 latencies contradict each other (33 and 39 cycles): only the
        // high-trust one is fitted; the other is listed as skipped with the case it contradicts.
        let all = crate::reference::load_default().unwrap();
        let cases: Vec<Case> =
            all.into_iter().filter(|c| c.id == "lat-a10080-l1-rrze" || c.id == "lat-a100sxm-l1-dewing").collect();
        assert_eq!(cases.len(), 2);
        let opts = CalOptions {
            preset: "a100-sxm4-80gb".into(),
            fit: vec!["l1.hit_latency".into()],
            folds: 0,
            max_iter: 4,
            ..CalOptions::default()
        };
        let cal = calibrate(&cases, &opts).unwrap();
        assert_eq!(cal.cases.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), ["lat-a10080-l1-rrze"]);
        let (id, why) = &cal.skipped[0];
        assert_eq!(id, "lat-a100sxm-l1-dewing");
        assert!(why.contains("disputed") && why.contains("lat-a10080-l1-rrze"), "{why}");
    }

    #[test]
    fn every_case_is_predicted_once_out_of_fold() {
        // Three cheap H800 PCIe cases, three folds: each fold holds out one case.
        let all = crate::reference::load_default().unwrap();
        let ids = ["lat-h800pcie-l1-hpmll", "lat-h800-dsm-local", "lat-h800-dpx-viaddmax"];
        let cases: Vec<Case> = all.into_iter().filter(|c| ids.contains(&c.id.as_str())).collect();
        assert_eq!(cases.len(), 3);
        let opts = CalOptions {
            preset: "h800-pcie".into(),
            fit: vec!["l1.hit_latency".into()],
            folds: 3,
            max_iter: 3,
            ..CalOptions::default()
        };
        let cal = calibrate(&cases, &opts).unwrap();
        let cv = cal.cv.as_ref().unwrap();
        let mut seen: Vec<&str> = cv.out_of_fold.iter().map(|o| o.id.as_str()).collect();
        seen.sort_unstable();
        let mut want = ids.to_vec();
        want.sort_unstable();
        assert_eq!(seen, want);
        // One case per fold: its out-of-fold error is that fold's validation error.
        for o in &cv.out_of_fold {
            let f = &cv.folds[o.fold - 1];
            assert_eq!(f.held_out, std::slice::from_ref(&o.id));
            let err = (o.predicted.unwrap() - o.measured).abs() / o.measured;
            assert!((err - f.validation.mape).abs() < 1e-12, "{err} vs {}", f.validation.mape);
        }
        assert_eq!(cv.by_kind.len(), 1);
        assert_eq!((cv.by_kind[0].0.as_str(), cv.by_kind[0].1), ("latency", 3));
        assert!(cal.markdown().contains("## Out-of-fold predictions") && cal.text().contains("out-of-fold, by kind"));
    }
}

//! The objective: simulating the cases under a candidate's values (cached), their errors, and
//! the Nelder–Mead fit.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use gpusim_configs::{Arch, load_preset, to_toml};
use rayon::prelude::*;

use super::params::{CalParam, DEFAULT_FIT_GEMM, DEFAULT_FIT_MEMORY, ValueKind, apply_values, resolve_params};
use super::{CalCase, CalError, CalOptions, Errors, SimStore, err};
use crate::correlate::{ArchChoice, CasePlan, Job, arch_hash, plan_case, simulate_on};
use crate::hash::hash_str;
use crate::memory_cases;
use crate::optimize::{NmOptions, nelder_mead};
use crate::reference::{Case, Kind};
use crate::stats::{mape, weighted_abs_log_error};

/// |ln(sim/measured)| charged for a case whose simulation fails.
const FAILED_LOG_ERROR: f64 = 5.0;

pub(super) struct Evaluator<'a> {
    base: Arch,
    pub(super) params: Vec<CalParam>,
    pub(super) cases: Vec<&'a Case>,
    /// Unique simulations, and each case's index into them.
    pub(super) jobs: Vec<Job>,
    pub(super) case_job: Vec<usize>,
    pub(super) cache: Mutex<HashMap<(String, usize), Result<f64, String>>>,
    pub(super) sims: AtomicUsize,
    /// Simulations found in the store (not counted in `sims`).
    pub(super) reused: AtomicUsize,
    /// [`super::CalOptions::progress`].
    pub(super) progress: Option<Arc<AtomicUsize>>,
    pub(super) stop: Option<Arc<AtomicBool>>,
    /// [`super::CalOptions::sample`].
    sample: Option<gpusim_sim_core::SampleOptions>,
    /// [`super::CalOptions::store`].
    store: Option<Arc<dyn SimStore>>,
}

/// The error of a simulation not run (or stopped) because the calibration was interrupted.
const INTERRUPTED: &str = "interrupted";

impl Evaluator<'_> {
    /// Whether [`CalOptions::stop`] was raised.
    pub(super) fn stopped(&self) -> bool {
        self.stop.as_ref().is_some_and(|s| s.load(Ordering::Relaxed))
    }

    /// Simulated values of `subset` (case indices) under `values`.
    pub(super) fn simulate(&self, values: &[f64], subset: &[usize]) -> Vec<Result<f64, String>> {
        let arch = apply_values(&self.base, &self.params, values);
        let hash = match &arch {
            Ok(a) => arch_hash(a),
            Err(e) => return subset.iter().map(|_| Err(e.clone())).collect(),
        };
        let arch = arch.expect("checked");
        let mut needed: Vec<usize> = subset.iter().map(|&i| self.case_job[i]).collect();
        needed.sort_unstable();
        needed.dedup();
        needed.sort_by(|a, b| self.jobs[*b].cost().total_cmp(&self.jobs[*a].cost()).then(a.cmp(b)));
        let results: Vec<(usize, Result<f64, String>)> = needed
            .par_iter()
            .with_max_len(1)
            .map(|&j| {
                let key = (hash.clone(), j);
                if let Some(r) = self.cache.lock().expect("cache").get(&key) {
                    return (j, r.clone());
                }
                let stored =
                    self.store.as_ref().map(|_| hash_str(&format!("{hash}\n{:?}\n{:?}", self.jobs[j], self.sample)));
                if let (Some(store), Some(k)) = (&self.store, &stored)
                    && let Some(r) = store.get(k)
                {
                    self.reused.fetch_add(1, Ordering::Relaxed);
                    self.cache.lock().expect("cache").insert(key, r.clone());
                    return (j, r);
                }
                if self.stopped() {
                    return (j, Err(INTERRUPTED.to_string()));
                }
                let r = crate::sim_options::with_options(self.stop.clone(), self.sample, || {
                    simulate_on(&self.jobs[j], &arch)
                });
                if self.stopped() {
                    // Stopped part-way: not a result, and never cached as one.
                    return (j, Err(INTERRUPTED.to_string()));
                }
                self.sims.fetch_add(1, Ordering::Relaxed);
                if let Some(p) = &self.progress {
                    p.fetch_add(1, Ordering::Relaxed);
                }
                if let (Some(store), Some(k)) = (&self.store, &stored) {
                    let set: Vec<String> = self
                        .params
                        .iter()
                        .zip(values)
                        .map(|(p, v)| format!("{} = {}", p.key, p.toml_value(*v)))
                        .collect();
                    store.put(k, &format!("{} (config {hash}): {:?}", set.join(", "), self.jobs[j]), &r);
                }
                self.cache.lock().expect("cache").insert(key, r.clone());
                (j, r)
            })
            .collect();
        let map: HashMap<usize, Result<f64, String>> = results.into_iter().collect();
        subset.iter().map(|&i| map[&self.case_job[i]].clone()).collect()
    }

    pub(super) fn errors(&self, values: &[f64], subset: &[usize]) -> Errors {
        let sims = self.simulate(values, subset);
        let mut pairs = Vec::new();
        let (mut num, mut den) = (0.0, 0.0);
        for (&i, s) in subset.iter().zip(&sims) {
            let c = self.cases[i];
            let w = c.trust.weight();
            match s {
                Ok(v) if *v > 0.0 && v.is_finite() => {
                    pairs.push((*v, c.value));
                    num += w * weighted_abs_log_error(&[(*v, c.value, 1.0)]).unwrap_or(FAILED_LOG_ERROR);
                }
                _ => {
                    pairs.push((0.0, c.value));
                    num += w * FAILED_LOG_ERROR;
                }
            }
            den += w;
        }
        Errors {
            n: subset.len(),
            mape: mape(&pairs).unwrap_or(f64::NAN),
            wlog: if den > 0.0 { num / den } else { f64::NAN },
        }
    }

    pub(super) fn fit(&self, subset: &[usize], max_iter: usize) -> Vec<f64> {
        let x0: Vec<f64> = self.params.iter().map(|p| p.normalise(p.preset_value)).collect();
        let f = |x: &[f64]| self.errors(&self.values(x), subset).wlog;
        // Whole-number parameters: stop once the simplex is within half a step of the grid.
        let x_tol = self
            .params
            .iter()
            .filter(|p| matches!(p.kind, ValueKind::Cycles | ValueKind::Int) && p.hi > p.lo)
            .map(|p| 0.5 / (p.hi - p.lo))
            .fold(1e-4, f64::max);
        let r = nelder_mead(f, &x0, &NmOptions { max_iter, x_tol, ..NmOptions::default() });
        self.values(&r.x)
    }

    /// Every case simulated under `before` and under `after`.
    pub(super) fn compare(&self, before: &[f64], after: &[f64]) -> Vec<CalCase> {
        let all: Vec<usize> = (0..self.cases.len()).collect();
        let b = self.simulate(before, &all);
        let a = self.simulate(after, &all);
        self.cases
            .iter()
            .zip(b.into_iter().zip(a))
            .map(|(c, (b, a))| CalCase {
                id: c.id.clone(),
                kind: c.kind.to_string(),
                measured: c.value,
                weight: c.trust.weight(),
                before: b.ok(),
                after: a.ok(),
            })
            .collect()
    }

    fn values(&self, x: &[f64]) -> Vec<f64> {
        self.params.iter().zip(x).map(|(p, x)| p.denormalise(*x)).collect()
    }
}

/// `(case id, reason)` of the cases a calibration leaves out.
pub(super) type Skipped = Vec<(String, String)>;

/// The cases of `cases` that `preset` simulates (selected kinds, `max_flops`), as an
/// [`Evaluator`] of the parameters `fit` (empty: the defaults for the cases' kinds); also the
/// skipped cases with their reasons and the preset's rendered TOML.
/// `base`: the config to start from, when not the built-in `preset` (see [`CalOptions::base`]).
pub(super) fn evaluator<'a>(
    preset: &str,
    base: Option<&Arch>,
    cases: &'a [Case],
    opts: &CalOptions,
    fit: &[String],
) -> Result<(Evaluator<'a>, Skipped, String), CalError> {
    let arch = match base {
        Some(a) => a.clone(),
        None => load_preset(preset).map_err(|e| CalError { message: e.to_string(), interrupted: false })?,
    };
    let rendered = to_toml(&arch);
    let choice = ArchChoice::Preset(preset.to_string());
    let mut used: Vec<&Case> = Vec::new();
    let mut jobs: Vec<Job> = Vec::new();
    let mut case_job = Vec::new();
    let mut skipped = Vec::new();
    for c in cases.iter().filter(|c| opts.kinds.contains(&c.kind)) {
        // A case that contradicts a higher-trust one on the same part would pull the fit towards
        // it and, held out, charge the fit for not matching both: neither trains nor validates.
        if let Some((_, with, _)) = memory_cases::DISPUTED.iter().find(|d| d.0 == c.id) {
            skipped.push((c.id.clone(), format!("disputed: contradicts {with} (see gpusim correlate)")));
            continue;
        }
        match plan_case(c, &choice) {
            CasePlan::Skip(why) => skipped.push((c.id.clone(), why)),
            CasePlan::Run(job) => {
                if let (Job::Gemm { shape, .. }, Some(max)) = (&job, opts.max_flops)
                    && shape.flops() > max
                {
                    skipped.push((c.id.clone(), format!("{:.3e} FLOPs is above --max-flops {max:.3e}", shape.flops())));
                    continue;
                }
                let j = match jobs.iter().position(|u| *u == job) {
                    Some(j) => j,
                    None => {
                        jobs.push(job);
                        jobs.len() - 1
                    }
                };
                used.push(c);
                case_job.push(j);
            }
        }
    }
    if used.is_empty() {
        return err(format!("no case of the selected kinds is simulated on {preset}"));
    }
    let fit: Vec<String> = if fit.is_empty() {
        let d = if used.iter().any(|c| c.kind == Kind::Gemm) { DEFAULT_FIT_GEMM } else { DEFAULT_FIT_MEMORY };
        d.iter().map(|s| s.to_string()).collect()
    } else {
        fit.to_vec()
    };
    let params = resolve_params(&arch, &fit, opts.allow_datasheet)?;
    let ev = Evaluator {
        base: arch,
        params,
        cases: used,
        jobs,
        case_job,
        cache: Mutex::new(HashMap::new()),
        sims: AtomicUsize::new(0),
        reused: AtomicUsize::new(0),
        progress: opts.progress.clone(),
        stop: opts.stop.clone(),
        sample: opts.sample,
        store: opts.store.clone(),
    };
    Ok((ev, skipped, rendered))
}

//! Calibration of a preset's model parameters against reference measurements
//! (`gpusim calibrate`).
//!
//! - **Cases**: those of the selected kinds whose hardware maps to the preset, planned as in
//!   [`crate::correlate`] ([`plan_case`]); GEMM cases above `max_flops` and disputed cases
//!   ([`memory_cases::DISPUTED`]) are skipped (listed).
//! - **Parameters**: dotted config keys ([`resolve_params`]). Datasheet-fixed ones (`sm.count`,
//!   `clocks.*`, `tensor.flops_per_clk_per_sm.*`, `hbm.bandwidth`, sizes) are refused unless
//!   allowed. Bounds: the schema's declared range ([`gpusim_configs::ParamInfo::range`]) where it
//!   gives one; a missing lower bound is 0, a missing upper bound 4× the preset's value (20000
//!   in the parameter's unit when the preset's value is 0).
//! - **Candidates**: the preset rendered by [`to_toml`], the fitted keys overridden (cycles and
//!   integers rounded to whole numbers, durations to whole picoseconds, written with the
//!   parameter's unit), loaded with [`load_str`].
//! - **Objective**: the trust-weighted mean |ln(sim/measured)|
//!   ([`stats::weighted_abs_log_error`]); a failed simulation counts as |ln| = 5.
//! - **Optimiser**: [`nelder_mead`] over the parameters normalised to [0, 1] within their bounds,
//!   from the preset's values, 40 iterations at most.
//! - **Cross-validation**: stratified k-fold ([`fold_order`]): cases are ordered by stratum
//!   (kind and level: L1 latency, DRAM bandwidth, ...) and within it by the hash of their id,
//!   and the i-th case of that order goes to fold i mod k (k ≤ the number of cases). So the
//!   cases of one stratum, which pin the same parameters, fall into different folds, and a fold
//!   holds out every case of a stratum only when the stratum has one case. Each fold is fitted
//!   on the other folds and evaluated on itself; training and validation errors are means over
//!   folds.
//! - **Cache**: simulations are cached by (config hash, simulation) within a run; cases with the
//!   same simulation share it.
//!
//! Deterministic: the result does not depend on the number of threads.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use gpusim_configs::{Arch, explain, load_preset, load_str, to_toml};
use rayon::prelude::*;
use serde::Serialize;

use crate::correlate::{ArchChoice, CasePlan, Job, KindSelection, plan_case, simulate_on};
use crate::hash::hash_str;
use crate::memory_cases;
use crate::optimize::{NmOptions, nelder_mead};
use crate::reference::{Case, Kind};
use crate::stats::{mape, weighted_abs_log_error};

mod render;

/// Default parameters when GEMM cases are selected.
pub const DEFAULT_FIT_GEMM: &[&str] = &["sim.kernel_launch_latency", "tensor.wgmma_base_latency"];
/// Default parameters when only latency/bandwidth cases are selected.
pub const DEFAULT_FIT_MEMORY: &[&str] = &["l1.hit_latency", "l2.hit_latency", "hbm.latency"];
/// |ln(sim/measured)| charged for a case whose simulation fails.
const FAILED_LOG_ERROR: f64 = 5.0;

/// A failure of [`calibrate`] (bad input: unknown or datasheet parameter, no usable case).
#[derive(Clone, Debug, PartialEq)]
pub struct CalError {
    pub message: String,
}

impl std::fmt::Display for CalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

fn err<T>(m: impl Into<String>) -> Result<T, CalError> {
    Err(CalError { message: m.into() })
}

/// How a parameter's value is written.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum ValueKind {
    /// `"N cycles"`, whole.
    Cycles,
    /// `"X ns"`, whole picoseconds.
    Nanos,
    /// A bare integer.
    Int,
    /// A bare float.
    Float,
    /// `"X unit"`.
    Unit(String),
}

/// A parameter to fit.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CalParam {
    pub key: String,
    pub kind: ValueKind,
    pub preset_value: f64,
    pub lo: f64,
    pub hi: f64,
    /// Where the bounds come from.
    pub bounds_from: String,
}

impl CalParam {
    /// Rounds a value as the config stores it.
    pub fn round(&self, v: f64) -> f64 {
        let v = v.clamp(self.lo, self.hi);
        match self.kind {
            ValueKind::Cycles | ValueKind::Int => v.round(),
            // Three decimals, as a config would be written (and so the fit's grid).
            ValueKind::Nanos | ValueKind::Unit(_) => (v * 1000.0).round() / 1000.0,
            ValueKind::Float => v,
        }
    }

    /// The TOML value.
    pub fn toml_value(&self, v: f64) -> toml::Value {
        match &self.kind {
            ValueKind::Cycles => toml::Value::String(format!("{} cycles", v.round() as i64)),
            ValueKind::Nanos => toml::Value::String(format!("{} ns", (v * 1000.0).round() / 1000.0)),
            ValueKind::Int => toml::Value::Integer(v.round() as i64),
            ValueKind::Float => toml::Value::Float(v),
            ValueKind::Unit(u) => toml::Value::String(format!("{} {u}", (v * 1000.0).round() / 1000.0)),
        }
    }

    /// For people: `300 cycles`, `219.5 ns`, `8`.
    pub fn show(&self, v: f64) -> String {
        match self.toml_value(v) {
            toml::Value::String(s) => s,
            other => other.to_string(),
        }
    }

    fn normalise(&self, v: f64) -> f64 {
        if self.hi > self.lo { ((v - self.lo) / (self.hi - self.lo)).clamp(0.0, 1.0) } else { 0.0 }
    }

    fn denormalise(&self, x: f64) -> f64 {
        self.round(self.lo + x.clamp(0.0, 1.0) * (self.hi - self.lo))
    }
}

/// Whether a datasheet fixes the parameter (`unit` from the schema).
pub fn is_datasheet(key: &str, unit: &str) -> bool {
    key.starts_with("clocks.")
        || key.starts_with("tensor.flops_per_clk_per_sm")
        || matches!(key, "sm.count" | "hbm.bandwidth")
        || unit == "bytes"
        || key.ends_with(".size")
}

fn lookup<'a>(t: &'a toml::Table, key: &str) -> Option<&'a toml::Value> {
    let mut parts = key.split('.').peekable();
    let mut table = t;
    while let Some(p) = parts.next() {
        let v = table.get(p)?;
        if parts.peek().is_none() {
            return Some(v);
        }
        table = v.as_table()?;
    }
    None
}

fn set(t: &mut toml::Table, key: &str, value: toml::Value) -> bool {
    let parts: Vec<&str> = key.split('.').collect();
    let mut table = t;
    for p in &parts[..parts.len() - 1] {
        match table.get_mut(*p).and_then(|v| v.as_table_mut()) {
            Some(next) => table = next,
            None => return false,
        }
    }
    table.insert(parts[parts.len() - 1].to_string(), value);
    true
}

fn parse_num(s: &str) -> Option<f64> {
    let t: String = s.trim().chars().take_while(|c| c.is_ascii_digit() || matches!(c, '.' | '-' | 'e' | 'E')).collect();
    t.parse().ok()
}

/// `(lo, hi)` of a schema range such as `≥ 1 cycle`, `1 ..= 255`, `> 0`.
fn parse_range(r: &str) -> (Option<f64>, Option<f64>) {
    let r = r.trim();
    if let Some((a, b)) = r.split_once("..=").or_else(|| r.split_once("..")) {
        return (parse_num(a), parse_num(b.trim_start_matches('<')));
    }
    for p in ["≥", ">=", ">"] {
        if let Some(rest) = r.strip_prefix(p) {
            return (parse_num(rest), None);
        }
    }
    for p in ["≤", "<=", "<"] {
        if let Some(rest) = r.strip_prefix(p) {
            return (None, parse_num(rest));
        }
    }
    (None, None)
}

/// Resolves `keys` against the preset's fully resolved TOML `base`: value kind, preset value,
/// bounds. Datasheet parameters are refused unless `allow_datasheet`.
pub fn resolve_params(base: &toml::Table, keys: &[String], allow_datasheet: bool) -> Result<Vec<CalParam>, CalError> {
    let mut out: Vec<CalParam> = Vec::new();
    for key in keys {
        if out.iter().any(|p| &p.key == key) {
            continue;
        }
        let info = explain(key).map_err(|e| CalError { message: e.to_string() })?;
        if is_datasheet(key, info.unit) && !allow_datasheet {
            return err(format!(
                "`{key}` is fixed by the datasheet (SM count, clocks, peak rates, bandwidths, sizes are inputs, \
                 not fitted); pass --allow-datasheet to fit it anyway"
            ));
        }
        let Some(v) = lookup(base, key) else {
            return err(format!("`{key}` has no value in the preset's resolved config"));
        };
        let (kind, value) = match v {
            toml::Value::Integer(i) => (ValueKind::Int, *i as f64),
            toml::Value::Float(f) => (ValueKind::Float, *f),
            toml::Value::String(s) => {
                let (n, unit) = s.trim().split_once(' ').unwrap_or((s.as_str(), ""));
                let Ok(n) = n.parse::<f64>() else {
                    return err(format!("`{key}` = {s:?} is not a number"));
                };
                match unit.trim() {
                    "cycle" | "cycles" => (ValueKind::Cycles, n),
                    "ps" => (ValueKind::Nanos, n / 1e3),
                    "ns" => (ValueKind::Nanos, n),
                    "us" | "µs" => (ValueKind::Nanos, n * 1e3),
                    "ms" => (ValueKind::Nanos, n * 1e6),
                    "" => (ValueKind::Float, n),
                    u => (ValueKind::Unit(u.to_string()), n),
                }
            }
            other => return err(format!("`{key}` = {other} is not a number")),
        };
        let (rlo, rhi) = info.range.as_deref().map(parse_range).unwrap_or((None, None));
        let lo = rlo.unwrap_or(0.0);
        let default_hi = if value > 0.0 { 4.0 * value } else { 20000.0 };
        let hi = rhi.unwrap_or(default_hi).max(lo);
        let bounds_from = match (&info.range, rlo, rhi) {
            (Some(r), _, Some(_)) => format!("schema range {r}"),
            (Some(r), Some(_), None) => {
                format!("schema range {r}; upper {}", if value > 0.0 { "4× preset" } else { "20000 (preset 0)" })
            }
            _ => format!("[0, {}]", if value > 0.0 { "4× preset" } else { "20000 (preset 0)" }),
        };
        out.push(CalParam { key: key.clone(), kind, preset_value: value, lo, hi, bounds_from });
    }
    Ok(out)
}

/// The preset's resolved TOML with `values` set for `params`, loaded.
pub fn apply_values(preset: &str, base: &toml::Table, params: &[CalParam], values: &[f64]) -> Result<Arch, String> {
    let mut t = base.clone();
    for (p, v) in params.iter().zip(values) {
        if !set(&mut t, &p.key, p.toml_value(*v)) {
            return Err(format!("cannot set `{}`", p.key));
        }
    }
    let text = toml::to_string(&t).map_err(|e| e.to_string())?;
    load_str(preset, &text).map_err(|e| e.to_string())
}

/// How to calibrate.
#[derive(Clone, Debug)]
pub struct CalOptions {
    pub preset: String,
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
}

impl Default for CalOptions {
    fn default() -> Self {
        CalOptions {
            preset: String::new(),
            kinds: KindSelection::default_kinds(),
            fit: Vec::new(),
            allow_datasheet: false,
            folds: 5,
            threads: 1,
            max_flops: None,
            max_iter: 40,
            data_files: Vec::new(),
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
    pub preset_hash: String,
}

struct Evaluator<'a> {
    preset: String,
    base: toml::Table,
    params: Vec<CalParam>,
    cases: Vec<&'a Case>,
    /// Unique simulations, and each case's index into them.
    jobs: Vec<Job>,
    case_job: Vec<usize>,
    cache: Mutex<HashMap<(String, usize), Result<f64, String>>>,
    sims: AtomicUsize,
}

impl Evaluator<'_> {
    /// Simulated values of `subset` (case indices) under `values`.
    fn simulate(&self, values: &[f64], subset: &[usize]) -> Vec<Result<f64, String>> {
        let arch = apply_values(&self.preset, &self.base, &self.params, values);
        let hash = match &arch {
            Ok(a) => hash_str(&to_toml(a)),
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
                let r = simulate_on(&self.jobs[j], &arch);
                self.sims.fetch_add(1, Ordering::Relaxed);
                self.cache.lock().expect("cache").insert(key, r.clone());
                (j, r)
            })
            .collect();
        let map: HashMap<usize, Result<f64, String>> = results.into_iter().collect();
        subset.iter().map(|&i| map[&self.case_job[i]].clone()).collect()
    }

    fn errors(&self, values: &[f64], subset: &[usize]) -> Errors {
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

    fn fit(&self, subset: &[usize], max_iter: usize) -> Vec<f64> {
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
    fn compare(&self, before: &[f64], after: &[f64]) -> Vec<CalCase> {
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
type Skipped = Vec<(String, String)>;

/// The cases of `cases` that `preset` simulates (selected kinds, `max_flops`), as an
/// [`Evaluator`] of the parameters `fit` (empty: the defaults for the cases' kinds); also the
/// skipped cases with their reasons and the preset's rendered TOML.
fn evaluator<'a>(
    preset: &str,
    cases: &'a [Case],
    opts: &CalOptions,
    fit: &[String],
) -> Result<(Evaluator<'a>, Skipped, String), CalError> {
    let arch = load_preset(preset).map_err(|e| CalError { message: e.to_string() })?;
    let rendered = to_toml(&arch);
    let base: toml::Table =
        toml::from_str(&rendered).map_err(|e| CalError { message: format!("the preset's rendering: {e}") })?;
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
    let params = resolve_params(&base, &fit, opts.allow_datasheet)?;
    let ev = Evaluator {
        preset: preset.to_string(),
        base,
        params,
        cases: used,
        jobs,
        case_job,
        cache: Mutex::new(HashMap::new()),
        sims: AtomicUsize::new(0),
    };
    Ok((ev, skipped, rendered))
}

fn pool(threads: usize) -> Result<rayon::ThreadPool, CalError> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads.max(1))
        .build()
        .map_err(|e| CalError { message: format!("cannot start {threads} threads: {e}") })
}

/// Calibrates `opts.fit` of `opts.preset` on `cases`.
pub fn calibrate(cases: &[Case], opts: &CalOptions) -> Result<Calibration, CalError> {
    let (ev, skipped, rendered) = evaluator(&opts.preset, cases, opts, &opts.fit)?;
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
            preset_hash: hash_str(&rendered),
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
    let (ev, skipped, _) = evaluator(target, cases, opts, &keys)?;
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

fn cross_validate(ev: &Evaluator, folds: usize, max_iter: usize) -> Option<CrossValidation> {
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

    fn base(preset: &str) -> toml::Table {
        toml::from_str(&to_toml(&load_preset(preset).unwrap())).unwrap()
    }

    #[test]
    fn params_get_kinds_values_and_bounds() {
        let b = base("h800-pcie");
        let keys: Vec<String> = ["l2.hit_latency", "hbm.latency", "sm.lsu_queue_depth", "sim.kernel_launch_latency"]
            .map(String::from)
            .into();
        let p = resolve_params(&b, &keys, false).unwrap();
        assert_eq!((p[0].kind.clone(), p[0].preset_value, p[0].lo, p[0].hi), (ValueKind::Cycles, 264.0, 1.0, 1056.0));
        assert_eq!((p[1].kind.clone(), p[1].preset_value), (ValueKind::Nanos, 219.0));
        assert_eq!((p[2].kind.clone(), p[2].lo), (ValueKind::Int, 1.0));
        // 2 µs from the H100 preset, in ns; no schema maximum, so the upper bound is 4× that.
        assert_eq!((p[3].kind.clone(), p[3].preset_value, p[3].hi), (ValueKind::Nanos, 2000.0, 8000.0));
        assert_eq!(p[1].show(219.5), "219.5 ns");
        let arch = apply_values("h800-pcie", &b, &p, &[300.0, 250.5, 12.0, 1000.0]).unwrap();
        assert_eq!(arch.name, load_preset("h800-pcie").unwrap().name);
        for k in ["sm.count", "clocks.sm", "hbm.bandwidth", "l2.size", "tensor.flops_per_clk_per_sm.fp8"] {
            let e = resolve_params(&b, &[k.to_string()], false).unwrap_err();
            assert!(e.message.contains("datasheet"), "{k}: {e}");
        }
        assert!(resolve_params(&b, &["l2.hit_latancy".into()], false).is_err());
        // Values with a unit read as a config would write them, not as binary fractions.
        let bw = resolve_params(&b, &["l2.slice_bandwidth".into()], false).unwrap();
        assert_eq!(bw[0].show(68.59999999999998), "68.6 B/clk");
    }

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

    #[test]
    fn ranges() {
        assert_eq!(parse_range("≥ 1 cycle"), (Some(1.0), None));
        assert_eq!(parse_range("1 ..= 255"), (Some(1.0), Some(255.0)));
        assert_eq!(parse_range("> 0"), (Some(0.0), None));
    }
}

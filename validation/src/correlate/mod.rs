//! Correlation of simulations with the reference measurements (`gpusim correlate`).
//!
//! [`correlate`] takes cases ([`crate::reference`]), keeps those of the requested kinds, maps
//! each to a preset and a simulation ([`plan_case`], in `plan.rs` with the kind and preset
//! choices), runs the simulations in parallel on a
//! rayon pool, and returns a [`Correlation`]: one [`CaseRow`] per case (simulated, skipped with
//! the reason, or failed with the error), the [`stats::Summary`](crate::stats::Summary) of the
//! simulated ones, and the provenance. [`Correlation::markdown`], [`Correlation::csv`] and
//! [`Correlation::text`] render it; the binary writes the files.
//!
//! - **GEMM**: [`crate::gemm_cases`]: the workloads crate's default recipe at the case's shape
//!   and dtype; simulated TFLOP/s = 2·M·N·K·batch / simulated time.
//! - **Latency, bandwidth**: [`crate::memory_cases`]' plan and microbenchmark.
//! - **Kernel** (one measured launch, e.g. from Nsight Compute): [`crate::kernel_cases`]: the
//!   launch's kernel simulated alone from a trace of it, in µs or SM cycles.
//! - **MoE** grouped-GEMM cases run the DeepGEMM-style grouped GEMM (`crate::moe_cases`).
//! - **Other kinds** (attention, peak) are listed with the reason they are not simulated.
//!
//! Clock: the case's `clock_mhz` where it states one, else the preset's SM clock.
//!
//! Determinism: every simulation is deterministic and results are kept in input order, so the
//! result (wall times apart) is the same for any number of threads.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use gpusim_configs::{load_preset, to_toml};
use rayon::prelude::*;
use serde::Serialize;

use crate::attention_cases::run_attention;
use crate::case::Case;
use crate::gemm_cases::run_gemm;
use crate::hash::hash_str;
use crate::kernel_cases::{run_kernel_job, trace_hash};
use crate::memory_cases;
use crate::moe_cases::run_moe;
use crate::panic::panic_message;
use crate::stats::{Point, Summary, summarize};

/// What became of a case.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Simulated,
    Skipped,
    Failed,
}

/// One case of the correlation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CaseRow {
    pub id: String,
    pub kind: String,
    /// The group of its statistics and of the accuracy gate: the kind, but attention cases by
    /// implementation (`attention-fa2`, `attention-fa3`, `attention-standard`,
    /// [`crate::attention_cases::family`]).
    pub family: String,
    /// `file:line` of its `[[case]]`.
    pub location: String,
    pub hardware: String,
    pub trust: String,
    pub weight: f64,
    pub metric: String,
    pub published: f64,
    pub status: Status,
    /// Why it was skipped, or the error of a failed simulation.
    pub reason: Option<String>,
    pub preset: Option<String>,
    pub simulated: Option<f64>,
    /// (simulated − published) / published.
    pub error: Option<f64>,
    /// |ln(simulated / published)|.
    pub abs_log_ratio: Option<f64>,
    /// SM clock simulated: the case's or the preset's, or for a GEMM the average clock its
    /// kernels ran at (lower under tensor load where the preset has `clocks.sm_tensor_load`).
    pub clock_simulated_mhz: Option<f64>,
    /// The case's `clock_mhz` (None: not stated).
    pub clock_measured_mhz: Option<f64>,
    /// Hash of the resolved preset ([`config_hash`]).
    pub config_hash: Option<String>,
    /// What was simulated: the GEMM shape and recipe, the microbenchmark, or the trace and
    /// kernel (kernel cases).
    pub workload: Option<String>,
    /// Hash of the recipe (GEMM) or the microbenchmark plan (memory cases).
    pub recipe_hash: Option<String>,
    /// Hash of the generated trace's text form (GEMM), or of the trace files read (kernel
    /// cases, [`crate::kernel_cases::trace_hash`]).
    pub trace_hash: Option<String>,
    /// Simulated kernel time, µs (GEMM, kernel cases).
    pub sim_time_us: Option<f64>,
    pub warp_instructions: Option<u64>,
    pub detail: Option<String>,
    /// When the case contradicts a higher-trust case on the same part
    /// ([`memory_cases::DISPUTED`]): which, and why.
    pub disputed: Option<String>,
    /// Wall time of the simulation, s (the one field that varies between runs).
    pub wall_s: f64,
}

/// Provenance of a correlation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Provenance {
    pub gpusim_version: String,
    pub git_hash: String,
    pub arch: String,
    pub kinds: Vec<String>,
    pub data_files: Vec<String>,
    /// Hash of each preset used ([`config_hash`]), by name.
    pub config_hashes: BTreeMap<String, String>,
    pub memory_model: String,
    /// `--sample`'s `WARMUP:MEASURE:TAIL:REWARM` when long kernels were sampled
    /// (sim_core::sample); absent for a correlation in full detail.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampled: Option<String>,
}

/// The result of [`correlate`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Correlation {
    pub provenance: Provenance,
    /// Every selected case, in input order.
    pub cases: Vec<CaseRow>,
    /// Statistics of the simulated cases, grouped by kind.
    pub summary: Summary,
    pub threads: usize,
    pub wall_s: f64,
    /// Stopped early ([`Options::stop`]): the cases left unrun are `Skipped` with the reason
    /// "not run: interrupted", and the summary covers only those that ran.
    pub interrupted: bool,
}

/// Stable hash of a preset's fully resolved TOML ([`gpusim_configs::to_toml`]).
pub fn config_hash(preset: &str) -> Result<String, String> {
    Ok(arch_hash(&load_preset(preset).map_err(|e| e.to_string())?))
}

/// Stable hash of a chip's fully resolved TOML: what [`config_hash`] gives for a preset.
pub fn arch_hash(arch: &gpusim_configs::Arch) -> String {
    hash_str(&to_toml(arch))
}

/// The outcome of one simulation (shared by every case with the same [`Job`]).
#[derive(Clone, Debug, Default)]
struct JobResult {
    config_hash: Option<String>,
    clock_simulated_mhz: Option<f64>,
    value: Option<Result<f64, String>>,
    workload: Option<String>,
    recipe_hash: Option<String>,
    trace_hash: Option<String>,
    sim_time_us: Option<f64>,
    warp_instructions: Option<u64>,
    detail: Option<String>,
    wall_s: f64,
    /// Not run: the correlation was interrupted first.
    interrupted: bool,
}

impl Options {
    /// The chip the jobs on `preset` simulate: the stand-in named after it, or the preset.
    fn chip(&self, preset: &str) -> Result<gpusim_configs::Arch, String> {
        match &self.stand_in {
            Some(s) if s.arch.name == preset => Ok(s.arch.clone()),
            _ => load_preset(preset).map_err(|e| e.to_string()),
        }
    }
}

/// Runs one job on `chip` (its preset's, at the job's clock); a panic in a generator or the
/// simulator becomes its error.
fn run_job(job: &Job, chip: Result<gpusim_configs::Arch, String>) -> JobResult {
    let t0 = Instant::now();
    let mut r = JobResult { config_hash: chip.as_ref().ok().map(arch_hash), ..JobResult::default() };
    let clock = job.clock_mhz();
    let res: Result<f64, String> = chip.and_then(|a| memory_cases::lock_clock(a, clock)).and_then(|arch| {
        r.clock_simulated_mhz = Some(arch.clocks.sm.0 as f64 / 1e6);
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| -> Result<f64, String> {
            match job {
                Job::Gemm { shape, .. } => {
                    let g = run_gemm(&arch, shape)?;
                    r.workload = Some(format!("GEMM {}, {}", shape.describe(), g.recipe));
                    r.recipe_hash = Some(g.recipe_hash);
                    r.trace_hash = Some(g.trace_hash);
                    r.sim_time_us = Some(g.time_us);
                    r.clock_simulated_mhz = Some(g.clock_mhz);
                    r.warp_instructions = Some(g.warp_instructions);
                    r.detail = Some(format!("{} kernel(s), {:.2} µs simulated", g.kernels, g.time_us));
                    Ok(g.tflops)
                }
                Job::Attention { spec, .. } => {
                    let a = run_attention(&arch, spec)?;
                    r.workload = Some(a.description);
                    r.recipe_hash = Some(a.recipe_hash);
                    r.trace_hash = Some(a.trace_hash);
                    r.sim_time_us = Some(a.time_us);
                    r.clock_simulated_mhz = Some(a.clock_mhz);
                    r.warp_instructions = Some(a.warp_instructions);
                    r.detail = Some(format!("{} kernel(s), {:.2} µs simulated", a.kernels, a.time_us));
                    Ok(a.tflops)
                }
                Job::Moe { shape, .. } => {
                    let g = run_moe(&arch, shape)?;
                    r.workload = Some(format!("grouped GEMM {}, {}", shape.describe(), g.recipe));
                    r.recipe_hash = Some(g.recipe_hash);
                    r.trace_hash = Some(g.trace_hash);
                    r.sim_time_us = Some(g.time_us);
                    r.clock_simulated_mhz = Some(g.clock_mhz);
                    r.warp_instructions = Some(g.warp_instructions);
                    r.detail = Some(format!("1 kernel, {:.2} µs simulated", g.time_us));
                    Ok(g.tflops)
                }
                Job::Memory { bench, .. } => {
                    let m = bench.run(&arch)?;
                    let plan = format!("{bench:?}");
                    r.recipe_hash = Some(hash_str(&plan));
                    r.workload = Some(plan);
                    r.warp_instructions = Some(m.warp_instructions);
                    r.detail = Some(m.detail);
                    Ok(m.value)
                }
                Job::Kernel { job, .. } => {
                    let k = run_kernel_job(&arch, job)?;
                    r.workload = Some(format!(
                        "kernel {} `{}` of the trace {}",
                        k.kernel_index,
                        k.kernel_name,
                        job.trace.display()
                    ));
                    r.trace_hash = trace_hash(&job.trace, k.kernel_index).ok();
                    r.sim_time_us = Some(k.time_us);
                    r.clock_simulated_mhz = Some(k.sim_clock_mhz);
                    r.warp_instructions = Some(k.warp_instructions);
                    let mut detail = k.detail;
                    if !k.diagnostics.is_empty() {
                        detail += &format!("; {} trace warning(s), first: {}", k.diagnostics.len(), k.diagnostics[0]);
                    }
                    r.detail = Some(detail);
                    Ok(k.value)
                }
            }
        }))
        .unwrap_or_else(|p| Err(format!("panicked: {}", panic_message(p))))
    });
    r.value = Some(res);
    r.wall_s = t0.elapsed().as_secs_f64();
    r
}

/// Simulates `job` on `base` (a chip, e.g. a candidate of `gpusim calibrate`) instead of its
/// preset: the job's clock applies ([`memory_cases::lock_clock`]); the value is in the case's
/// metric. A panic in a generator or the simulator becomes the error.
pub fn simulate_on(job: &Job, base: &gpusim_configs::Arch) -> Result<f64, String> {
    let arch = memory_cases::lock_clock(base.clone(), job.clock_mhz())?;
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match job {
        Job::Gemm { shape, .. } => run_gemm(&arch, shape).map(|g| g.tflops),
        Job::Memory { bench, .. } => bench.run(&arch).map(|m| m.value),
        Job::Attention { spec, .. } => run_attention(&arch, spec).map(|a| a.tflops),
        Job::Moe { shape, .. } => run_moe(&arch, shape).map(|g| g.tflops),
        Job::Kernel { job, .. } => run_kernel_job(&arch, job).map(|k| k.value),
    }))
    .unwrap_or_else(|p| Err(format!("panicked: {}", panic_message(p))))
}

/// Fills `row` (of `case`, simulated by `job`) from the job's result.
fn apply(job: &Job, r: &JobResult, case: &Case, row: &mut CaseRow) {
    row.preset = Some(job.preset().to_string());
    row.config_hash = r.config_hash.clone();
    row.clock_simulated_mhz = r.clock_simulated_mhz;
    row.workload = r.workload.clone();
    row.recipe_hash = r.recipe_hash.clone();
    row.trace_hash = r.trace_hash.clone();
    row.sim_time_us = r.sim_time_us;
    row.warp_instructions = r.warp_instructions;
    row.detail = r.detail.clone();
    row.wall_s = r.wall_s;
    match &r.value {
        Some(Ok(s)) if s.is_finite() && *s > 0.0 => {
            row.status = Status::Simulated;
            row.simulated = Some(*s);
            row.error = Some(crate::stats::rel_error(*s, case.value));
            row.abs_log_ratio = crate::stats::abs_log_ratio(*s, case.value);
        }
        Some(Ok(s)) => {
            row.status = Status::Failed;
            row.simulated = Some(*s);
            row.reason = Some(format!("the simulation gave {s}"));
        }
        Some(Err(e)) => {
            row.status = Status::Failed;
            row.reason = Some(e.clone());
        }
        None if r.interrupted => {
            row.status = Status::Skipped;
            row.reason = Some("not run: interrupted".into());
        }
        None => {
            row.status = Status::Failed;
            row.reason = Some("not run".into());
        }
    }
}

fn base_row(case: &Case) -> CaseRow {
    CaseRow {
        id: case.id.clone(),
        kind: case.kind.to_string(),
        family: crate::attention_cases::family(case),
        location: case.location(),
        hardware: case.hardware.clone(),
        trust: case.trust.to_string(),
        weight: case.trust.weight(),
        metric: case.metric.to_string(),
        published: case.value,
        status: Status::Skipped,
        reason: None,
        preset: None,
        simulated: None,
        error: None,
        abs_log_ratio: None,
        clock_simulated_mhz: None,
        clock_measured_mhz: case.clock_mhz,
        config_hash: None,
        workload: None,
        recipe_hash: None,
        trace_hash: None,
        sim_time_us: None,
        warp_instructions: None,
        detail: None,
        disputed: memory_cases::DISPUTED
            .iter()
            .find(|d| d.0 == case.id)
            .map(|(_, with, why)| format!("contradicts {with}: {why}")),
        wall_s: 0.0,
    }
}

/// What a caller is told while a correlation runs (a command line's progress bar and its table
/// printed as cases finish). Calls come from the worker threads, one at a time.
pub trait Progress: Sync {
    /// Before any simulation: how many distinct simulations will run.
    fn start(&self, _simulations: usize) {}
    /// One more simulation finished (`done` of the total so far, its wall seconds).
    fn simulated(&self, _done: usize, _wall_s: f64) {}
    /// Row `index` (in case order) is final, and so is every row before it: rows come in case
    /// order, each as soon as it and those before it are done.
    fn row(&self, _index: usize, _row: &CaseRow) {}
}

/// No progress reporting.
pub struct Quiet;
impl Progress for Quiet {}

/// Correlates `cases` (those of `opts.kinds`) with their simulations. Fails only when the
/// thread pool cannot be built; a case that cannot be simulated is a row with its reason.
pub fn correlate(cases: &[Case], opts: &Options) -> Result<Correlation, String> {
    correlate_with(cases, opts, &Quiet)
}

/// Rows and results while the simulations run: each finished job fills its cases' rows, and
/// rows are handed to the [`Progress`] in order as far as they are final.
struct Streaming<'a> {
    rows: Vec<CaseRow>,
    /// Per row: the index of its job in `unique`, or `None` when it runs nothing.
    job_of: Vec<Option<usize>>,
    finished: Vec<bool>,
    next_row: usize,
    done: usize,
    interrupted: bool,
    progress: &'a dyn Progress,
}

impl Streaming<'_> {
    fn emit_ready(&mut self) {
        while self.next_row < self.rows.len() && self.job_of[self.next_row].is_none_or(|j| self.finished[j]) {
            self.progress.row(self.next_row, &self.rows[self.next_row]);
            self.next_row += 1;
        }
    }
}

/// [`correlate`], telling `progress` as simulations and rows finish.
pub fn correlate_with(cases: &[Case], opts: &Options, progress: &dyn Progress) -> Result<Correlation, String> {
    let t0 = Instant::now();
    let selected: Vec<&Case> = cases.iter().filter(|c| opts.kinds.contains(&c.kind)).collect();
    let plans: Vec<CasePlan> = selected.iter().map(|c| plan_case(c, &opts.arch)).collect();
    let mut rows: Vec<CaseRow> = selected.iter().map(|c| base_row(c)).collect();
    for (row, plan) in rows.iter_mut().zip(&plans) {
        if let CasePlan::Skip(why) = plan {
            row.reason = Some(why.clone());
            if let Some(p) = preset_for_hardware(&row.hardware) {
                row.preset = Some(p.to_string());
            }
        }
    }

    // Cases with the same simulation (part, clock, shape or microbenchmark) share one run; runs
    // go longest first (for load balance) and each result goes back to its cases' slots.
    let mut unique: Vec<(&Job, Vec<usize>)> = Vec::new();
    for (i, p) in plans.iter().enumerate() {
        if let CasePlan::Run(j) = p {
            match unique.iter_mut().find(|(u, _)| *u == j) {
                Some((_, ids)) => ids.push(i),
                None => unique.push((j, vec![i])),
            }
        }
    }
    unique.sort_by(|a, b| b.0.cost().total_cmp(&a.0.cost()).then(a.1[0].cmp(&b.1[0])));
    let mut job_of = vec![None; rows.len()];
    for (j, (_, ids)) in unique.iter().enumerate() {
        for &i in ids {
            job_of[i] = Some(j);
        }
    }
    // Each run's sampling: `--sample`'s, or none for a family `sample_families` leaves out.
    let job_sample: Vec<Option<gpusim_sim_core::SampleOptions>> = unique
        .iter()
        .map(|(_, ids)| {
            let family = &rows[ids[0]].family;
            opts.sample.filter(|_| opts.sample_families.as_ref().is_none_or(|f| f.contains(family)))
        })
        .collect();
    let threads = opts.threads.max(1);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| format!("cannot start {threads} threads: {e}"))?;
    let stopped = || opts.stop.as_ref().is_some_and(|s| s.load(std::sync::atomic::Ordering::Relaxed));
    progress.start(unique.len());
    let state = std::sync::Mutex::new(Streaming {
        rows,
        job_of,
        finished: vec![false; unique.len()],
        next_row: 0,
        done: 0,
        interrupted: false,
        progress,
    });
    // Rows that run nothing and come first are final already.
    state.lock().expect("no worker has panicked yet").emit_ready();
    pool.install(|| {
        unique.par_iter().enumerate().with_max_len(1).for_each(|(j, (job, ids))| {
            let r = match stopped() {
                true => JobResult { interrupted: true, ..JobResult::default() },
                false => {
                    let r = crate::sim_options::with_options(opts.stop.clone(), job_sample[j], || {
                        run_job(job, opts.chip(job.preset()))
                    });
                    // A job stopped part-way is as good as not run.
                    if stopped() && r.value.as_ref().is_some_and(|v| v.is_err()) {
                        JobResult { interrupted: true, ..JobResult::default() }
                    } else {
                        r
                    }
                }
            };
            // A worker that panicked inside `run_job` has already been turned into an error
            // row (run_job catches panics), so the lock is never poisoned in practice; if it
            // were, the rows are still whole.
            let mut st = state.lock().unwrap_or_else(|p| p.into_inner());
            for &i in ids {
                apply(job, &r, selected[i], &mut st.rows[i]);
            }
            st.interrupted |= r.interrupted;
            st.finished[j] = true;
            if !r.interrupted {
                st.done += 1;
                progress.simulated(st.done, r.wall_s);
            }
            st.emit_ready();
        })
    });
    let st = state.into_inner().unwrap_or_else(|p| p.into_inner());
    let (rows, interrupted) = (st.rows, st.interrupted);

    let points: Vec<Point> = rows
        .iter()
        .filter(|r| r.status == Status::Simulated)
        .map(|r| Point {
            id: r.id.clone(),
            group: r.family.clone(),
            sim: r.simulated.unwrap_or(f64::NAN),
            measured: r.published,
            weight: r.weight,
        })
        .collect();
    let summary = summarize(&points, opts.worst);
    let presets: BTreeSet<&str> = plans
        .iter()
        .filter_map(|p| match p {
            CasePlan::Run(j) => Some(j.preset()),
            CasePlan::Skip(_) => None,
        })
        .collect();
    // The memory model each preset names (`sim.memory_model`): the simulations use it.
    let chips: BTreeMap<&str, gpusim_configs::Arch> =
        presets.iter().filter_map(|p| Some((*p, opts.chip(p).ok()?))).collect();
    let models: BTreeSet<String> = chips.values().map(|a| a.sim.memory_model.clone()).collect();
    let memory_model =
        if models.is_empty() { "hierarchy".to_string() } else { models.into_iter().collect::<Vec<_>>().join(", ") };
    let config_hashes = chips.iter().map(|(p, a)| (p.to_string(), arch_hash(a))).collect();
    Ok(Correlation {
        provenance: Provenance {
            gpusim_version: opts.info.gpusim_version.clone(),
            git_hash: opts.info.git_hash.clone(),
            arch: opts.stand_in.as_ref().map_or(opts.arch.as_str(), |s| &s.file).to_string(),
            kinds: opts.kinds.names(),
            data_files: opts.info.data_files.clone(),
            config_hashes,
            memory_model,
            sampled: opts.sample.map(|o| match &opts.sample_families {
                Some(f) => format!("{o} ({})", f.iter().cloned().collect::<Vec<_>>().join(", ")),
                None => o.to_string(),
            }),
        },
        cases: rows,
        summary,
        threads,
        wall_s: t0.elapsed().as_secs_f64(),
        interrupted,
    })
}

mod plan;
mod render;

pub use plan::*;

pub use render::{StreamTable, num};

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::gemm_cases::{GemmShape, TWIN_KIND};
    use crate::kernel_cases::KERNEL_KIND;
    use crate::reference::{Kind, load_default, parse_cases};

    const DATA: &str = r#"
[[case]]
id = "l1"
kind = "latency"
hardware = "H800 PCIe"
clock_mhz = 1755
level = "L1"
metric = "cycles"
value = 32.1
trust = "high"
how_read = "h"
source = "s"
locator = "l"

[[case]]
id = "l1-again"
kind = "latency"
hardware = "H800 PCIe"
clock_mhz = 1755
level = "L1"
metric = "cycles"
value = 30
trust = "low"
how_read = "h"
source = "s"
locator = "l"

[[case]]
id = "att"
kind = "attention"
hardware = "H100 80GB SXM5"
metric = "tflops"
value = 300
trust = "medium"
how_read = "h"
source = "s"
locator = "l"

[[case]]
id = "v100"
kind = "latency"
hardware = "V100"
level = "L1"
metric = "cycles"
value = 28
trust = "high"
how_read = "h"
source = "s"
locator = "l"
"#;

    #[test]
    fn twin_cases_are_simulated_with_their_own_design() {
        use crate::case::{Kind, Metric};
        use gpusim_workloads::gemm::Twin;
        let twin = |id: &str, hardware: &str| {
            let mut c = Case::new(id, Kind::Other(TWIN_KIND.into()), Metric::Tflops, 100.0);
            c.hardware = hardware.into();
            (c.m, c.n, c.k) = (Some(512), Some(512), Some(512));
            c.dtype = Some("bf16 in, fp32 accumulate, bf16 out".into());
            c
        };
        let run = |c: &Case| match plan_case(c, &ArchChoice::Auto) {
            CasePlan::Run(job @ Job::Gemm { .. }) => job,
            other => panic!("{}: {other:?}", c.id),
        };
        let ampere = run(&twin("gemm-twin-mma-sm80-512x512x512", "A100 80GB"));
        let Job::Gemm { preset, shape, .. } = &ampere else { unreachable!() };
        assert_eq!((*preset, shape.twin), ("a100-sxm4-80gb", Some(Twin::Ampere)));
        // The twin's 128×128×32 tile and 4 stages, where the default recipe picks another.
        let arch = gpusim_configs::load_preset(preset).unwrap();
        let g = run_gemm(&arch, shape).unwrap();
        assert!(g.recipe.contains("cta_m=128 cta_n=128 cta_k=32") && g.recipe.contains("stages=4"), "{}", g.recipe);
        let default = run_gemm(&arch, &GemmShape { twin: None, ..*shape }).unwrap();
        assert_ne!(default.recipe, g.recipe);
        // The Hopper twin runs on sm_90 only: on an A100 its case is a failure with the reason.
        let hopper = run(&twin("gemm-twin-wgmma-sm90a-512x512x512", "A100 80GB"));
        let Job::Gemm { shape, .. } = &hopper else { unreachable!() };
        assert!(run_gemm(&arch, shape).unwrap_err().contains("compute capability 80"));
        // An id that names no twin is skipped with the ids it should have.
        match plan_case(&twin("gemm-twin-mystery-512x512x512", "A100 80GB"), &ArchChoice::Auto) {
            CasePlan::Skip(why) => assert!(why.contains("gemm-twin-mma-sm80-MxNxK"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert!(parse_kinds(&["gemm_twin".into()]).unwrap().contains(&Kind::Other(TWIN_KIND.into())));
        assert!(KindSelection::default_kinds().contains(&Kind::Other(TWIN_KIND.into())));
    }

    #[test]
    fn every_reference_case_gets_a_plan_or_a_reason() {
        let cases = load_default().unwrap();
        for c in &cases {
            match plan_case(c, &ArchChoice::Auto) {
                CasePlan::Run(j) => {
                    load_preset(j.preset()).unwrap();
                }
                CasePlan::Skip(why) => assert!(why.len() > 15, "{}: {why}", c.id),
            }
        }
        // Every GEMM case maps to a preset.
        for c in cases.iter().filter(|c| c.kind == Kind::Gemm) {
            assert!(matches!(plan_case(c, &ArchChoice::Auto), CasePlan::Run(Job::Gemm { .. })), "{}", c.id);
        }
        let h200 = cases.iter().find(|c| c.id == "gemm-h200-torch-bf16-8192").unwrap();
        assert!(matches!(plan_case(h200, &ArchChoice::Auto), CasePlan::Run(Job::Gemm { preset: "h200-sxm", .. })));
        let CasePlan::Skip(why) = plan_case(h200, &ArchChoice::Preset("h100-sxm5-80gb".into())) else { panic!() };
        assert!(why.contains("h200-sxm") && why.contains("h100-sxm5-80gb"), "{why}");
    }

    #[test]
    fn arch_and_kind_arguments() {
        assert_eq!(ArchChoice::parse("auto"), Ok(ArchChoice::Auto));
        assert_eq!(ArchChoice::parse("h200-sxm"), Ok(ArchChoice::Preset("h200-sxm".into())));
        let e = ArchChoice::parse("h900").unwrap_err();
        assert!(e.contains("h900") && e.contains("h100-sxm5-80gb"), "{e}");
        assert_eq!(parse_kinds(&[]).unwrap(), KindSelection::default_kinds());
        assert_eq!(parse_kinds(&["all".into()]).unwrap(), KindSelection::All);
        assert_eq!(
            parse_kinds(&["gemm,latency".into()]).unwrap(),
            KindSelection::Only([Kind::Gemm, Kind::Latency].into_iter().collect())
        );
        assert_eq!(
            parse_kinds(&["memory".into()]).unwrap(),
            parse_kinds(&["latency".into(), "bandwidth".into()]).unwrap()
        );
        assert!(parse_kinds(&["flops".into()]).unwrap_err().contains("flops"));
        let kernel = Kind::Other(KERNEL_KIND.into());
        assert_eq!(
            parse_kinds(&["kernel".into()]).unwrap(),
            KindSelection::Only([kernel.clone()].into_iter().collect())
        );
        assert!(KindSelection::All.contains(&kernel) && KindSelection::default_kinds().contains(&kernel));
        assert!(parse_kinds(&["kernels".into()]).unwrap_err().contains("kernel,"));
    }

    /// The kernel case of the ffma_bound fixture, with the workspace's trace of it.
    fn kernel_case() -> Case {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
        let csv = dir.join("tests/fixtures/ncu/ffma_bound.csv");
        let kernels = crate::nsight::load_ncu_csv(&csv).unwrap();
        let mut cases = crate::nsight::to_cases(&csv, &kernels, None);
        crate::kernel_cases::attach_traces(&mut cases, &dir.join("../examples/ffma_bound.trace")).unwrap();
        cases.remove(0)
    }

    #[test]
    fn kernel_cases_plan_to_kernel_jobs() {
        let case = kernel_case();
        let CasePlan::Run(job) = plan_case(&case, &ArchChoice::Auto) else { panic!() };
        assert_eq!((job.preset(), job.clock_mhz()), ("h100-sxm5-80gb", Some(1755.0)));
        let Job::Kernel { job: k, .. } = &job else { panic!("{job:?}") };
        assert_eq!(k.preset, Some("h100-sxm5-80gb"));
        // 1024 blocks of 128 threads.
        assert_eq!(job.cost(), 131072.0 * 1e5);
        // Another preset: the job and the kernel job it holds both move.
        let moved = job.clone().with_preset("h200-sxm");
        let Job::Kernel { preset, job: k } = &moved else { panic!() };
        assert_eq!((*preset, k.preset), ("h200-sxm", Some("h200-sxm")));
        let CasePlan::Run(cal) = plan_case(&case, &ArchChoice::Calibrated) else { panic!() };
        assert_eq!(cal.preset(), calibrated_preset("h100-sxm5-80gb"));
        let CasePlan::Skip(why) = plan_case(&case, &ArchChoice::Preset("h200-sxm".into())) else { panic!() };
        assert!(why.contains("h100-sxm5-80gb"), "{why}");
        // The part's calibrated preset, named: it models what its preset models (another
        // part's calibrated preset does not).
        let CasePlan::Run(named) = plan_case(&case, &ArchChoice::Preset("h100-sxm5-80gb-calibrated".into())) else {
            panic!()
        };
        assert_eq!(named.preset(), "h100-sxm5-80gb-calibrated");
        assert!(matches!(plan_case(&case, &ArchChoice::Preset("h200-sxm-calibrated".into())), CasePlan::Skip(_)));

        // No preset for the part: skipped, with a hint where the export did not name it.
        let mut anon = case.clone();
        anon.hardware = "GPU 0 (CC 9.0), name not exported".into();
        let CasePlan::Skip(why) = plan_case(&anon, &ArchChoice::Auto) else { panic!() };
        assert!(why.contains("--hardware"), "{why}");
        // No trace: skipped with the planner's reason.
        let mut bare = case.clone();
        bare.extra.remove(crate::kernel_cases::EXTRA_TRACE);
        let CasePlan::Skip(why) = plan_case(&bare, &ArchChoice::Auto) else { panic!() };
        assert!(why.contains("no `trace`"), "{why}");
    }

    #[test]
    fn rows_stream_in_case_order_once_final() {
        #[derive(Default)]
        struct Record {
            calls: std::sync::Mutex<Vec<String>>,
            rows: std::sync::Mutex<Vec<(usize, CaseRow)>>,
        }
        impl Progress for Record {
            fn start(&self, n: usize) {
                self.calls.lock().unwrap().push(format!("start {n}"));
            }
            fn simulated(&self, done: usize, _wall_s: f64) {
                self.calls.lock().unwrap().push(format!("simulated {done}"));
            }
            fn row(&self, i: usize, r: &CaseRow) {
                self.calls.lock().unwrap().push(format!("row {i}"));
                self.rows.lock().unwrap().push((i, r.clone()));
            }
        }
        // A skipped case first (final before anything runs), then two cases sharing one
        // simulation, then another skipped one.
        let run = kernel_case();
        let mut skip = run.clone();
        skip.id = "skipped".into();
        skip.hardware = "GPU 0 (CC 9.0), name not exported".into();
        let mut twin = run.clone();
        twin.id = "twin".into();
        let mut last = skip.clone();
        last.id = "last".into();
        let cases = [skip, run, twin, last];
        let rec = Record::default();
        let c = correlate_with(&cases, &Options { threads: 2, ..Options::default() }, &rec).unwrap();
        assert_eq!(*rec.calls.lock().unwrap(), ["start 1", "row 0", "simulated 1", "row 1", "row 2", "row 3"]);
        let rows = rec.rows.lock().unwrap();
        for (i, r) in rows.iter() {
            assert_eq!(r, &c.cases[*i], "a streamed row is the final row");
        }
        assert_eq!(c.cases[1].status, Status::Simulated);
        assert_eq!(c.cases[0].status, Status::Skipped);
    }

    #[test]
    fn kernel_cases_are_simulated_with_provenance() {
        let case = kernel_case();
        let c = correlate(std::slice::from_ref(&case), &Options::default()).unwrap();
        let r = &c.cases[0];
        assert_eq!(r.status, Status::Simulated, "{r:?}");
        assert_eq!((r.kind.as_str(), r.metric.as_str(), r.clock_simulated_mhz), ("kernel", "us", Some(1755.0)));
        assert!(r.error.is_some_and(f64::is_finite));
        assert_eq!(r.sim_time_us, r.simulated);
        let w = r.workload.as_deref().unwrap();
        assert!(w.contains("ffma_bound") && w.contains("ffma_bound.trace"), "{w}");
        let trace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/ffma_bound.trace");
        assert_eq!(r.trace_hash, Some(crate::hash::hash_str(&std::fs::read_to_string(&trace).unwrap())));
        // Calibrate's path: the same value on the preset's chip.
        let CasePlan::Run(job) = plan_case(&case, &ArchChoice::Auto) else { panic!() };
        let base = load_preset("h100-sxm5-80gb").unwrap();
        assert_eq!(simulate_on(&job, &base), Ok(r.simulated.unwrap()));
    }

    #[test]
    fn cases_are_simulated_or_listed_with_a_reason() {
        let cases = parse_cases(Path::new("t.toml"), DATA).unwrap();
        let opts = Options { kinds: KindSelection::All, threads: 2, ..Options::default() };
        let c = correlate(&cases, &opts).unwrap();
        assert_eq!(c.cases.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["l1", "l1-again", "att", "v100"]);
        let l1 = &c.cases[0];
        assert_eq!(l1.status, Status::Simulated, "{l1:?}");
        assert_eq!((l1.preset.as_deref(), l1.clock_simulated_mhz), (Some("h800-pcie"), Some(1755.0)));
        assert!(l1.error.unwrap().abs() < 0.1, "{l1:?}");
        assert!(l1.config_hash.as_ref().is_some_and(|h| h.len() == 16));
        // The same simulation serves both L1 cases; each gets its own error.
        let again = &c.cases[1];
        assert_eq!((again.simulated, again.recipe_hash.as_ref()), (l1.simulated, l1.recipe_hash.as_ref()));
        assert_ne!(again.error, l1.error);
        assert_eq!(c.cases[2].status, Status::Skipped);
        assert!(c.cases[2].reason.as_ref().unwrap().contains("names no impl"));
        assert_eq!(c.cases[3].status, Status::Skipped);
        assert!(c.cases[3].reason.as_ref().unwrap().contains("V100"));
        assert_eq!(c.summary.overall.n, 2);
        assert_eq!(c.provenance.config_hashes.keys().collect::<Vec<_>>(), ["h800-pcie"]);
        let md = c.markdown();
        assert!(md.contains("| l1 | latency | h800-pcie | 1755 / 1755 |"), "{md}");
        assert!(md.contains("### Not simulated") && md.contains("| att |"), "{md}");
        let csv = c.csv();
        assert_eq!(csv.lines().count(), 5, "{csv}");
        assert!(md.contains("| median \\|err\\| |"), "a `|` in a header is escaped: {md}");
        assert!(c.text().contains("l1"));

        // The default kinds leave attention out; an explicit other preset skips the H800 case.
        let opts = Options { arch: ArchChoice::Preset("h100-pcie".into()), ..Options::default() };
        let c = correlate(&cases, &opts).unwrap();
        assert_eq!(c.cases.len(), 3);
        assert_eq!(c.cases[0].status, Status::Skipped);
        assert!(c.cases[0].reason.as_ref().unwrap().contains("h800-pcie"));
        assert_eq!(c.summary.overall.n, 0);
    }

    #[test]
    fn config_hash_is_stable_and_distinguishes_presets() {
        let a = config_hash("h100-sxm5-80gb").unwrap();
        assert_eq!(a, config_hash("h100-sxm5-80gb").unwrap());
        assert_ne!(a, config_hash("h200-sxm").unwrap());
        assert!(config_hash("nope").is_err());
    }
}

//! Planning: which cases a run takes ([`parse_kinds`], [`KindSelection`]), on which preset
//! ([`ArchChoice`], the preset from `gpusim_configs::preset_for_hardware`), and what simulation answers each ([`plan_case`]:
//! a [`Job`], or the reason there is none). Nothing here simulates; `super` runs the jobs.

use std::collections::BTreeSet;

use crate::attention_cases::attention_spec;
use crate::case::{Case, Kind};
use crate::gemm_cases::{GemmShape, TWIN_KIND, gemm_shape, twin_shape};
use crate::kernel_cases::{KERNEL_KIND, KernelJob, plan_kernel_case};
use crate::memory_cases::{Bench, Plan, memory_case_plan};
use crate::moe_cases::{MoeShape, moe_shape};

pub use gpusim_configs::preset_for_hardware;

/// Suffix of the built-in calibrated presets (`h100-sxm5-80gb-calibrated`).
pub const CALIBRATED_SUFFIX: &str = "-calibrated";

/// The built-in calibrated preset of `preset`, or `preset` itself where none is shipped.
pub fn calibrated_preset(preset: &'static str) -> &'static str {
    let want = format!("{preset}{CALIBRATED_SUFFIX}");
    gpusim_configs::presets().iter().map(|(n, _)| *n).find(|n| *n == want).unwrap_or(preset)
}

/// Which preset(s) to correlate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArchChoice {
    /// Every case on the preset its hardware maps to.
    Auto,
    /// Every case on the calibrated preset of its part (`<preset>-calibrated`, built in; the
    /// plain preset where none is shipped).
    Calibrated,
    /// Only the cases whose hardware maps to this preset (or, for a part's built-in calibrated
    /// preset, to the preset it calibrates); the others are skipped.
    Preset(String),
}

impl ArchChoice {
    /// `auto` or a built-in preset name; anything else is an error naming the presets.
    pub fn parse(s: &str) -> Result<ArchChoice, String> {
        if s == "auto" {
            return Ok(ArchChoice::Auto);
        }
        if s == "calibrated" {
            return Ok(ArchChoice::Calibrated);
        }
        let names: Vec<&str> = gpusim_configs::presets().iter().map(|(n, _)| *n).collect();
        if names.contains(&s) {
            Ok(ArchChoice::Preset(s.to_string()))
        } else {
            Err(format!("unknown preset `{s}`: correlate takes `auto`, `calibrated` or one of {}", names.join(", ")))
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            ArchChoice::Auto => "auto",
            ArchChoice::Calibrated => "calibrated",
            ArchChoice::Preset(p) => p,
        }
    }
}

/// Kinds selected by `--kind`: `gemm`, `latency`, `bandwidth`, `memory` (latency and bandwidth),
/// `kernel`, `attention`, `moe`, `peak` or `all`; comma-separated lists are accepted.
pub fn parse_kinds(specs: &[String]) -> Result<KindSelection, String> {
    if specs.is_empty() {
        return Ok(KindSelection::default_kinds());
    }
    let mut kinds = BTreeSet::new();
    for spec in specs {
        for s in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match s {
                "all" => return Ok(KindSelection::All),
                "memory" => {
                    kinds.insert(Kind::Latency);
                    kinds.insert(Kind::Bandwidth);
                }
                KERNEL_KIND | TWIN_KIND => {
                    kinds.insert(Kind::Other(s.to_string()));
                }
                _ => match Kind::from(s.to_string()) {
                    Kind::Other(o) => {
                        return Err(format!(
                            "unknown kind `{o}`: use gemm, gemm_twin, latency, bandwidth, memory, kernel, attention, moe, peak or all"
                        ));
                    }
                    k => {
                        kinds.insert(k);
                    }
                },
            }
        }
    }
    Ok(KindSelection::Only(kinds))
}

/// The kinds to correlate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KindSelection {
    All,
    Only(BTreeSet<Kind>),
}

impl KindSelection {
    /// GEMM, GEMM twins, latency, bandwidth and kernel: every kind with a simulation today.
    pub fn default_kinds() -> KindSelection {
        KindSelection::Only(
            [
                Kind::Gemm,
                Kind::Other(TWIN_KIND.to_string()),
                Kind::Latency,
                Kind::Bandwidth,
                Kind::Other(KERNEL_KIND.to_string()),
            ]
            .into_iter()
            .collect(),
        )
    }

    pub fn contains(&self, k: &Kind) -> bool {
        match self {
            KindSelection::All => true,
            KindSelection::Only(s) => s.contains(k),
        }
    }

    pub fn names(&self) -> Vec<String> {
        match self {
            KindSelection::All => vec!["all".into()],
            KindSelection::Only(s) => s.iter().map(|k| k.to_string()).collect(),
        }
    }
}

/// What the caller knows about itself and its inputs, recorded in the provenance.
#[derive(Clone, Debug, Default)]
pub struct RunInfo {
    /// The gpusim version (`CARGO_PKG_VERSION` of the binary).
    pub gpusim_version: String,
    /// `git rev-parse HEAD` of the build, or "unknown".
    pub git_hash: String,
    /// The data files, as given.
    pub data_files: Vec<String>,
}

/// How to correlate.
#[derive(Clone, Debug)]
pub struct Options {
    pub arch: ArchChoice,
    pub kinds: KindSelection,
    /// Worker threads (≥ 1).
    pub threads: usize,
    /// How many worst cases the summary lists.
    pub worst: usize,
    pub info: RunInfo,
    /// Once set (by a Ctrl-C handler), cases not yet started are left unrun; the result is then
    /// marked interrupted. Cases already running finish.
    pub stop: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// Sample long kernels (`gpusim correlate --sample`; validated in `tests/sampling.rs`):
    /// faster, within the sampling's error.
    pub sample: Option<gpusim_sim_core::SampleOptions>,
    /// When set, `sample` applies only to the cases of these families (`CaseRow::family`):
    /// the accuracy gate samples the families its file marks `sampled` and runs the others in
    /// full detail.
    pub sample_families: Option<std::collections::BTreeSet<String>>,
    /// A config that stands in for the built-in preset it is named after (`--arch FILE.toml`,
    /// [`load_stand_in`]): every case that preset would run simulates this chip instead.
    pub stand_in: Option<StandIn>,
}

/// A chip loaded from a file, simulated in place of the built-in preset of its name (a variant
/// of that preset: a staged fit, a what-if), so that the preset's cases judge it.
#[derive(Clone, Debug)]
pub struct StandIn {
    /// The file as the user named it (the provenance's `arch`).
    pub file: String,
    pub arch: gpusim_configs::Arch,
}

/// Loads `name_or_path` with the loader `gpusim run --arch` uses and checks that the chip is
/// named after a built-in preset: its name is what picks the cases (and what a calibrated result
/// inherits).
pub fn load_stand_in(name_or_path: &str) -> Result<gpusim_configs::Arch, String> {
    let arch = gpusim_configs::load(name_or_path).map_err(|e| e.to_string())?;
    if !gpusim_configs::presets().iter().any(|(n, _)| *n == arch.name) {
        return Err(format!(
            "its name `{}` is not a built-in preset (a config stands in for the preset it is named after: set `name` to one of {})",
            arch.name,
            gpusim_configs::presets().iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
        ));
    }
    Ok(arch)
}

impl Default for Options {
    fn default() -> Self {
        Options {
            arch: ArchChoice::Auto,
            kinds: KindSelection::default_kinds(),
            threads: 1,
            worst: 5,
            info: RunInfo::default(),
            stop: None,
            sample: None,
            sample_families: None,
            stand_in: None,
        }
    }
}

/// The simulation of one case.
#[derive(Clone, Debug, PartialEq)]
pub enum Job {
    Gemm {
        preset: &'static str,
        clock_mhz: Option<f64>,
        shape: GemmShape,
    },
    Memory {
        preset: &'static str,
        clock_mhz: Option<f64>,
        bench: Bench,
    },
    /// An attention problem's recipe trace ([`crate::attention_cases`]).
    Attention {
        preset: &'static str,
        clock_mhz: Option<f64>,
        spec: gpusim_workloads::attention::AttnSpec,
    },
    /// A grouped GEMM (MoE experts, [`crate::moe_cases`]).
    Moe {
        preset: &'static str,
        clock_mhz: Option<f64>,
        shape: MoeShape,
    },
    /// One traced kernel, simulated alone ([`crate::kernel_cases`]). `preset` is the one
    /// simulated, kept equal to `job.preset` (the part's preset, or its calibrated one); the
    /// clock is `job.clock_mhz`. Build it with [`Job::kernel`].
    Kernel {
        preset: &'static str,
        job: KernelJob,
    },
}

impl Job {
    /// The kernel job on its own preset; None when no preset models the case's hardware.
    pub fn kernel(job: KernelJob) -> Option<Job> {
        Some(Job::Kernel { preset: job.preset?, job })
    }

    pub fn preset(&self) -> &'static str {
        match self {
            Job::Gemm { preset, .. }
            | Job::Memory { preset, .. }
            | Job::Attention { preset, .. }
            | Job::Moe { preset, .. }
            | Job::Kernel { preset, .. } => preset,
        }
    }

    /// The measured SM clock the simulation runs at (None: the preset's).
    pub fn clock_mhz(&self) -> Option<f64> {
        match self {
            Job::Gemm { clock_mhz, .. }
            | Job::Memory { clock_mhz, .. }
            | Job::Attention { clock_mhz, .. }
            | Job::Moe { clock_mhz, .. } => *clock_mhz,
            Job::Kernel { job, .. } => job.clock_mhz,
        }
    }

    /// The same simulation on another preset.
    pub fn with_preset(mut self, to: &'static str) -> Job {
        match &mut self {
            Job::Gemm { preset, .. }
            | Job::Memory { preset, .. }
            | Job::Attention { preset, .. }
            | Job::Moe { preset, .. } => *preset = to,
            Job::Kernel { preset, job } => {
                *preset = to;
                job.preset = Some(to);
            }
        }
        self
    }

    /// A rough cost, for starting the longest simulations first.
    pub fn cost(&self) -> f64 {
        match self {
            Job::Gemm { shape, .. } => shape.flops(),
            Job::Attention { spec, .. } => spec.flops() as f64,
            Job::Moe { shape, .. } => shape.flops(),
            // A memory microbenchmark costs about as much as a mid-sized GEMM.
            Job::Memory { .. } => 1e11,
            // The trace is not opened to plan: the launch's threads (grid × block, where the
            // measurement gives them) at ~1e5 GEMM FLOPs each (a few thousand instructions per
            // thread), else a mid-sized GEMM.
            Job::Kernel { job, .. } => match (job.grid, job.block) {
                (Some(g), Some(b)) => g.iter().chain(&b).map(|&d| f64::from(d)).product::<f64>() * 1e5,
                _ => 1e11,
            },
        }
    }
}

/// A case's plan: a simulation, or why there is none.
#[derive(Clone, Debug, PartialEq)]
pub enum CasePlan {
    Run(Job),
    Skip(String),
}

/// Maps a case to its simulation under `arch`, or to the reason it is not simulated.
pub fn plan_case(case: &Case, arch: &ArchChoice) -> CasePlan {
    let job = match &case.kind {
        Kind::Latency | Kind::Bandwidth => match memory_case_plan(case) {
            Plan::Run { preset, clock_mhz, bench, .. } => Job::Memory { preset, clock_mhz, bench },
            Plan::NotApplicable(why) => return CasePlan::Skip(why),
        },
        Kind::Gemm => {
            let Some(preset) = preset_for_hardware(&case.hardware) else {
                return CasePlan::Skip(format!("no preset models the {}", case.hardware));
            };
            match gemm_shape(case) {
                Ok(shape) => Job::Gemm { preset, clock_mhz: case.clock_mhz, shape },
                Err(e) => return CasePlan::Skip(e),
            }
        }
        k if k.as_str() == TWIN_KIND => {
            let Some(preset) = preset_for_hardware(&case.hardware) else {
                return CasePlan::Skip(format!("no preset models the {}", case.hardware));
            };
            match twin_shape(case) {
                Ok(shape) => Job::Gemm { preset, clock_mhz: case.clock_mhz, shape },
                Err(e) => return CasePlan::Skip(e),
            }
        }
        k if k.as_str() == KERNEL_KIND => match plan_kernel_case(case) {
            Ok(job) => match Job::kernel(job) {
                Some(job) => job,
                None => {
                    let hint = if case.hardware.ends_with("name not exported") {
                        " (the export does not name the GPU: give its name with --hardware)"
                    } else {
                        ""
                    };
                    return CasePlan::Skip(format!("no preset models the {}{hint}", case.hardware));
                }
            },
            Err(e) => return CasePlan::Skip(e),
        },
        Kind::Attention => {
            let Some(preset) = preset_for_hardware(&case.hardware) else {
                return CasePlan::Skip(format!("no preset models the {}", case.hardware));
            };
            match attention_spec(case) {
                Ok(spec) => Job::Attention { preset, clock_mhz: case.clock_mhz, spec },
                Err(e) => return CasePlan::Skip(e),
            }
        }
        Kind::Moe => {
            let Some(preset) = preset_for_hardware(&case.hardware) else {
                return CasePlan::Skip(format!("no preset models the {}", case.hardware));
            };
            match moe_shape(case) {
                Ok(shape) => Job::Moe { preset, clock_mhz: case.clock_mhz, shape },
                Err(e) => return CasePlan::Skip(e),
            }
        }
        Kind::Peak => {
            return CasePlan::Skip(
                "peak rates are datasheet inputs of the presets (tensor.flops_per_clk_per_sm), not a simulation result"
                    .into(),
            );
        }
        k => return CasePlan::Skip(format!("kind `{k}` has no simulation")),
    };
    if *arch == ArchChoice::Calibrated {
        let to = calibrated_preset(job.preset());
        return CasePlan::Run(job.with_preset(to));
    }
    if let ArchChoice::Preset(p) = arch
        && job.preset() != p
    {
        // A part's built-in calibrated preset models what its preset models.
        let calibrated = calibrated_preset(job.preset());
        if calibrated == p {
            return CasePlan::Run(job.with_preset(calibrated));
        }
        return CasePlan::Skip(format!(
            "{} is modelled by {}, not {p} (use --arch auto or --arch {})",
            case.hardware,
            job.preset(),
            job.preset()
        ));
    }
    CasePlan::Run(job)
}

//! `gpusim sweep`: what-if studies. A study (a TOML file, [`study`], or `--arch/--vary/
//! --workload` flags) is expanded into points ([`spec`], [`design`]), every point's chip and
//! workload is built and checked before anything runs ([`prepare`]), and the points of the
//! shard ([`shard`]) run in parallel into a study directory ([`execute`], [`output`]) that a
//! rerun resumes, `gpusim sweep merge` joins ([`merge`]) and `gpusim report` reads.
//! `--emit-slurm` writes a job-array script instead of running ([`slurm`]).
//!
//! The study directory (docs/distributed.md; the contract with `gpusim report`):
//! - `manifest.json`: the study, its parameters (key, unit, description), workloads (name,
//!   source, hash, `per_point`), points (index, id, config hash, override text, SI numbers, cost);
//! - `points/<point id>/<workload>.json`: `{point, id, workload, key, report}` with the run's
//!   report exactly as `gpusim run --json` writes it, `key` the hash of (config, workload,
//!   gpusim version) the result is valid for;
//! - `results.csv`: one line per finished (point, workload).

mod cost;
mod design;
mod execute;
mod merge;
pub(crate) mod output;
mod prepare;
mod shard;
mod shared_trace;
mod slurm;
mod spec;
mod study;

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::error::{CliError, CliResult};
use shard::Shard;

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct SweepArgs {
    #[command(subcommand)]
    pub cmd: Option<SweepCmd>,
    /// Study file (examples/whatif/*.toml); or describe the study with --arch, --vary and
    /// --workload.
    pub study: Option<PathBuf>,
    /// Study directory to write (and resume).
    #[arg(short, long)]
    pub out: Option<PathBuf>,
    /// Base chip: a preset name or a TOML file (without a study file).
    #[arg(long)]
    pub arch: Option<String>,
    /// A parameter to vary, `KEY=SPEC`: a TOML value or list (`sm.count=[66,132]`), or a range
    /// `A..B:N` / `log:A..B:N` (`hbm.bandwidth="3.35 TB/s".."8 TB/s":5`). Repeatable.
    #[arg(long, value_name = "KEY=SPEC")]
    pub vary: Vec<String>,
    /// A workload: a trace file, or a generator with parameters (`gemm m=8192 n=8192 k=8192`).
    /// Repeatable.
    #[arg(long = "workload", value_name = "TRACE|GENERATOR K=V...")]
    pub workloads: Vec<String>,
    /// Varied keys that move together, comma-separated (`l2.size,l2.slices`). Repeatable.
    #[arg(long, value_name = "KEY,KEY...")]
    pub zip: Vec<String>,
    /// Sample this many points by a Latin hypercube instead of the full factorial.
    #[arg(long, value_name = "POINTS")]
    pub lhs: Option<usize>,
    /// Seed of --lhs.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Cost of a point for the report's Pareto front, e.g. `sm.count * clocks.sm`.
    #[arg(long)]
    pub cost: Option<String>,
    /// Name of a study given by flags.
    #[arg(long)]
    pub name: Option<String>,
    /// Points simulated at once (default: RAYON_NUM_THREADS, else one per core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Sample long kernels as `gpusim run --sample` does (validated against full detail on
    /// GEMM, attention, MoE and streaming kernels: tests/sampling.rs), or `sample = "..."` in
    /// the study file. Sampled results are stored under their own keys.
    #[arg(long, num_args = 0..=1, default_missing_value = crate::run::SAMPLE_DEFAULT, value_name = "WARMUP:MEASURE:TAIL[:REWARM]", value_parser = crate::run::parse_sample)]
    pub sample: Option<gpusim_sim_core::SampleOptions>,
    /// Run only shard I of N (`I/N`, 0-based): the points whose index is I modulo N.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<String>,
    /// Print an sbatch job-array script running the study in --shards tasks, and run nothing.
    #[arg(long, requires = "shards")]
    pub emit_slurm: bool,
    /// Tasks of the --emit-slurm job array.
    #[arg(long, value_name = "N")]
    pub shards: Option<usize>,
    /// An extra `#SBATCH` line for --emit-slurm (`--partition=gpu`). Repeatable.
    #[arg(long = "sbatch", value_name = "OPTION", allow_hyphen_values = true)]
    pub sbatch: Vec<String>,
    /// Check every point and workload, list the points, and run nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print nothing but errors.
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Subcommand)]
pub enum SweepCmd {
    /// Join the directories of a study's shards into one, equal to an unsharded run.
    Merge {
        /// Shard directories.
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// Merged study directory.
        #[arg(short, long)]
        out: PathBuf,
    },
}

pub fn sweep(a: SweepArgs) -> CliResult {
    if let Some(SweepCmd::Merge { dirs, out }) = &a.cmd {
        let m = merge::merge(dirs, out)?;
        if !a.quiet {
            println!(
                "merged {} shard director{} into {}: {} of {} results finished",
                dirs.len(),
                if dirs.len() == 1 { "y" } else { "ies" },
                out.display(),
                m.finished,
                m.total
            );
        }
        return Ok(());
    }
    let study = load_study(&a)?;
    let out = a.out.clone().ok_or_else(|| CliError::input("sweep: name the study directory with -o DIR"))?;
    if a.threads == Some(0) {
        return Err(CliError::input("--threads: must be at least 1"));
    }
    let shard = a.shard.as_deref().map(Shard::parse).transpose().map_err(CliError::input)?.unwrap_or(Shard::ALL);
    let prep = prepare::prepare(&study)?;
    if a.emit_slurm {
        return emit_slurm(&a, &study, &out);
    }
    if a.dry_run {
        let m = &prep.manifest;
        for p in m.points.iter().filter(|p| shard.contains(p.index)) {
            let values: Vec<String> = m.params.iter().map(|k| format!("{}={}", k.key, p.values[&k.key])).collect();
            println!("point {} {}  {}", p.index, p.id, values.join(" "));
        }
        for w in &m.workloads {
            println!("workload {}  {}{}", w.name, w.source, if w.per_point { "  (regenerated per point)" } else { "" });
        }
        println!("{} point(s) × {} workload(s), all valid; nothing run", m.points.len(), m.workloads.len());
        return Ok(());
    }
    let interrupt = crate::interrupt::global()?.clone();
    let s = execute::run(&prep, &out, shard, a.threads, &interrupt)?;
    let m = &prep.manifest;
    if !a.quiet {
        let of_shard =
            if shard == Shard::ALL { String::new() } else { format!(" (shard {}/{})", shard.index, shard.count) };
        println!(
            "sweep `{}`: {} point(s) × {} workload(s){of_shard}: {} result(s), {} run now, {} already done{}; {}",
            m.study,
            m.points.len(),
            m.workloads.len(),
            s.total,
            s.ran,
            s.skipped,
            if s.failed.is_empty() { String::new() } else { format!(", {} failed", s.failed.len()) },
            out.join("results.csv").display()
        );
    }
    if let Some(code) = s.interrupted {
        return Err(CliError {
            message: format!(
                "interrupted: {} of {} result(s) finished and kept in {}; run the same command again to go on",
                s.skipped + s.ran,
                s.total,
                out.display()
            ),
            code,
        });
    }
    if !s.failed.is_empty() {
        return Err(CliError::input(format!(
            "{} result(s) failed (the others are kept):\n  {}",
            s.failed.len(),
            s.failed.join("\n  ")
        )));
    }
    Ok(())
}

/// Checks a study file's text as `gpusim sweep --dry-run` does, and runs nothing: it parses,
/// its design expands, every point's chip validates and every generated workload builds on it.
/// Returns the numbers of points and workloads. With `traces` false a workload that names a
/// trace file is refused unread (the `study_file` fuzz target does not read the files a mutated
/// study names). The contract that target holds it to: whatever the text, `Ok` or an `Err`
/// saying what is wrong, never a panic, in bounded time and memory.
pub fn check_study(file: &str, text: &str, traces: bool) -> Result<(usize, usize), String> {
    let s = study::parse(file, text, std::path::Path::new(".")).map_err(|e| e.to_string())?;
    if !traces && let Some(w) = s.workloads.iter().find(|w| matches!(w.source, study::Source::Trace(_))) {
        return Err(format!("{file}: workload `{}` names a trace file, which this check does not read", w.name));
    }
    let p = prepare::prepare(&s).map_err(|e| e.message)?;
    Ok((p.manifest.points.len(), p.manifest.workloads.len()))
}

fn load_study(a: &SweepArgs) -> CliResult<study::Study> {
    let flags_given = a.arch.is_some()
        || !a.vary.is_empty()
        || !a.workloads.is_empty()
        || !a.zip.is_empty()
        || a.lhs.is_some()
        || a.cost.is_some();
    match &a.study {
        Some(path) => {
            if flags_given {
                return Err(CliError::input(
                    "sweep: give a study file or --arch/--vary/--workload/--zip/--lhs/--cost, not both",
                ));
            }
            let text = std::fs::read_to_string(path)
                .map_err(|e| CliError::input(format!("{}: cannot read: {e}", path.display())))?;
            let base = path.parent().unwrap_or(std::path::Path::new("")).to_path_buf();
            let mut s = study::parse(&path.display().to_string(), &text, &base).map_err(CliError::input)?;
            if let Some(n) = &a.name {
                s.name = n.clone();
            }
            if a.sample.is_some() {
                s.sample = a.sample;
            }
            Ok(s)
        }
        None => {
            let arch = a
                .arch
                .as_deref()
                .ok_or_else(|| CliError::input("sweep: give a study file, or --arch with --workload"))?;
            let flags = study::Flags {
                name: a.name.as_deref(),
                arch,
                vary: &a.vary,
                workloads: &a.workloads,
                zip: &a.zip,
                lhs: a.lhs,
                seed: a.seed,
                cost: a.cost.as_deref(),
            };
            let mut s =
                study::from_flags(&flags, &|g| gpusim_workloads::registry::find(g).is_ok()).map_err(CliError::input)?;
            s.sample = a.sample;
            Ok(s)
        }
    }
}

/// Prints the job-array script; creates the study directory (Slurm writes the tasks' logs there).
fn emit_slurm(a: &SweepArgs, study: &study::Study, out: &std::path::Path) -> CliResult {
    let shards = a.shards.unwrap_or(1);
    if shards == 0 {
        return Err(CliError::input("--shards: must be at least 1"));
    }
    if a.shard.is_some() {
        return Err(CliError::input("--emit-slurm: the script gives each task its --shard; do not give one"));
    }
    let cwd =
        std::env::current_dir().map_err(|e| CliError::input(format!("cannot read the current directory: {e}")))?;
    let exe =
        std::env::current_exe().map_err(|e| CliError::input(format!("cannot find the gpusim executable: {e}")))?;
    let out = cwd.join(out);
    std::fs::create_dir_all(&out).map_err(|e| CliError::input(format!("{}: cannot create: {e}", out.display())))?;
    let q = |s: &str| slurm::quote(s);
    let mut cmd = Vec::new();
    match &a.study {
        Some(p) => cmd.push(q(&p.display().to_string())),
        None => {
            let mut flag = |name: &str, v: &str| {
                cmd.push(name.to_string());
                cmd.push(q(v));
            };
            flag("--arch", a.arch.as_deref().unwrap_or_default());
            a.vary.iter().for_each(|v| flag("--vary", v));
            a.workloads.iter().for_each(|v| flag("--workload", v));
            a.zip.iter().for_each(|v| flag("--zip", v));
            if let Some(n) = a.lhs {
                flag("--lhs", &n.to_string());
                flag("--seed", &a.seed.to_string());
            }
            if let Some(c) = &a.cost {
                flag("--cost", c);
            }
        }
    }
    if let Some(n) = &a.name {
        cmd.push("--name".into());
        cmd.push(q(n));
    }
    cmd.push("--quiet".into());
    let (workdir, exe, out) = (cwd.display().to_string(), exe.display().to_string(), out.display().to_string());
    let job = slurm::Job {
        name: &study.name,
        shards,
        threads: a.threads.unwrap_or(1),
        workdir: &workdir,
        exe: &exe,
        command: &cmd,
        out: &out,
        extra: &a.sbatch,
    };
    print!("{}", slurm::script(&job));
    Ok(())
}

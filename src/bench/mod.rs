//! `gpusim bench`: simulation speed (warp instructions and simulated cycles per host second)
//! and peak memory, per case of a built-in suite covering every family (`suite`), or on named
//! trace files. Each case runs in a child process of this binary (`child`) so its peak RSS is
//! its own; `--markdown FILE` rewrites the table between the markers of a document
//! (`markdown`, docs/performance.md).
//!
//! A case's host seconds run from making its trace source (generating, or opening and parsing a
//! file) to the finished report: parsing is part of the figure. The best of `--repeat` runs
//! counts; peak RSS is the child's over all its repeats.

mod child;
mod markdown;
mod suite;

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use gpusim_sim_core::{SimOptions, simulate};

use crate::error::{CliError, CliResult};
use crate::print::thousands;
use child::Figures;
use markdown::Row;
pub use suite::Suite;

#[derive(Args)]
pub struct BenchArgs {
    /// Chip preset or TOML file for trace files named on the command line (the suite's cases
    /// name their own chips).
    #[arg(long, default_value = "h100-sxm5-80gb")]
    pub arch: String,
    /// Runs per case; the fastest counts.
    #[arg(long, default_value_t = 3)]
    pub repeat: u32,
    /// The built-in suite: `quick` (small sizes) or `full` (8192³ GEMMs too). The default when
    /// no trace file is named.
    #[arg(long, value_enum)]
    pub suite: Option<Suite>,
    /// Only these cases of the suite (comma-separated names).
    #[arg(long, value_delimiter = ',', value_name = "NAME[,NAME]")]
    pub only: Vec<String>,
    /// Rewrite the table between `<!-- bench:begin -->` and `<!-- bench:end -->` in this file.
    #[arg(long, value_name = "FILE.md")]
    pub markdown: Option<PathBuf>,
    /// Internal: run one case (a suite name, or `trace:PATH`) in this process and print its
    /// figures; what the parent starts for each case.
    #[arg(long, hide = true)]
    pub child: Option<String>,
    /// Run every case sampled, as `gpusim run --sample` does (warp instructions per second then
    /// count the skipped instructions too: the figure is what a sampled run delivers).
    #[arg(long, num_args = 0..=1, default_missing_value = crate::run::SAMPLE_DEFAULT, value_name = "WARMUP:MEASURE:TAIL[:REWARM]", value_parser = crate::run::parse_sample)]
    pub sample: Option<gpusim_sim_core::SampleOptions>,
    /// Trace files to run (gpusim text or binary, Accel-Sim); with none, the suite.
    pub traces: Vec<PathBuf>,
}

/// One case to run: a suite case or a file.
enum Job {
    Case(&'static suite::Case),
    File(PathBuf),
}

impl Job {
    fn spec(&self) -> String {
        match self {
            Job::Case(c) => c.name.to_string(),
            Job::File(p) => format!("trace:{}", p.display()),
        }
    }
}

pub fn bench(a: BenchArgs) -> CliResult {
    let repeat = a.repeat.max(1);
    if let Some(spec) = &a.child {
        return run_child(spec, &a.arch, repeat, a.sample);
    }
    if !a.traces.is_empty() && (a.suite.is_some() || !a.only.is_empty()) {
        return Err(CliError::input("name trace files or choose --suite/--only, not both"));
    }
    let jobs: Vec<Job> = if !a.traces.is_empty() {
        a.traces.iter().cloned().map(Job::File).collect()
    } else if !a.only.is_empty() {
        a.only.iter().map(|n| suite::find(n.trim()).map(Job::Case)).collect::<CliResult<_>>()?
    } else {
        a.suite.unwrap_or(Suite::Quick).cases().into_iter().map(Job::Case).collect()
    };
    if let Some(md) = &a.markdown
        && let Err(e) = std::fs::read_to_string(md).map_err(|e| e.to_string()).and_then(|d| markdown::rewrite(&d, ""))
    {
        return Err(CliError::input(format!("--markdown {}: {e}", md.display())));
    }
    println!(
        "{:<16} {:<16} {:>14} {:>14} {:>9} {:>13} {:>14} {:>9}",
        "case", "chip", "warp insts", "sim cycles", "host s", "warp inst/s", "sim cycles/s", "RSS MiB"
    );
    let mut rows = Vec::new();
    for job in &jobs {
        if let Job::Case(c) = job {
            c.prepare()?;
        }
        let mut args = vec![job.spec(), "--repeat".to_string(), repeat.to_string()];
        if let Job::File(_) = job {
            args.extend(["--arch".to_string(), a.arch.clone()]);
        }
        if let Some(s) = &a.sample {
            args.extend(["--sample".to_string(), s.to_string()]);
        }
        let f = child::run(&args)?;
        let (name, arch, what) = match job {
            Job::Case(c) => (c.name.to_string(), c.arch.to_string(), c.what.to_string()),
            Job::File(p) => (p.display().to_string(), a.arch.clone(), "trace file".to_string()),
        };
        let secs = f.seconds.max(1e-9);
        println!(
            "{:<16} {:<16} {:>14} {:>14} {:>9.3} {:>13} {:>14} {:>9.0}",
            name,
            arch,
            thousands(f.warp_instructions),
            thousands(f.cycles),
            f.seconds,
            thousands((f.warp_instructions as f64 / secs) as u64),
            thousands((f.cycles as f64 / secs) as u64),
            f.peak_rss as f64 / (1024.0 * 1024.0)
        );
        rows.push(Row { name, arch, what, figures: f });
    }
    let build = if cfg!(debug_assertions) { "debug" } else { "release" };
    if build == "debug" {
        println!("note: a debug build; build with --release for meaningful figures");
    }
    if let Some(md) = &a.markdown {
        let sampled = a.sample.as_ref().map_or(String::new(), |s| format!(" --sample {s}"));
        let note =
            format!("{build} build, best of {repeat}, one thread; `gpusim bench {}{sampled}`", describe_selection(&a));
        let doc =
            std::fs::read_to_string(md).map_err(|e| CliError::input(format!("--markdown {}: {e}", md.display())))?;
        let out = markdown::rewrite(&doc, &markdown::table(&rows, &note))
            .map_err(|e| CliError::input(format!("--markdown {}: {e}", md.display())))?;
        crate::output::write_atomic(md, out.as_bytes())?;
        println!("wrote the table into {}", md.display());
    }
    Ok(())
}

fn describe_selection(a: &BenchArgs) -> String {
    if !a.only.is_empty() {
        format!("--only {}", a.only.join(","))
    } else {
        format!("--suite {}", if a.suite == Some(Suite::Full) { "full" } else { "quick" })
    }
}

/// The child's side: run the case `repeat` times, print the figures of the fastest.
fn run_child(spec: &str, arch_name: &str, repeat: u32, sample: Option<gpusim_sim_core::SampleOptions>) -> CliResult {
    let opts = SimOptions { sample, ..SimOptions::default() };
    let mut best = Figures { seconds: f64::INFINITY, ..Figures::default() };
    for _ in 0..repeat {
        let start;
        let report = if let Some(path) = spec.strip_prefix("trace:") {
            let arch = crate::run::load_arch(arch_name, None)?;
            start = Instant::now();
            // One thread, as every case of the bench (`accelsim-flat-ahead` names its second one).
            let read = gpusim_isa::open::ReadOptions { read_ahead: false };
            crate::run::simulate_file(&arch, std::path::Path::new(path), read, &opts).map_err(|(e, _)| e)?
        } else {
            let case = suite::find(spec)?;
            let arch = crate::run::load_arch(case.arch, None)?;
            start = Instant::now();
            let mut src = case.source(&arch)?;
            simulate(&arch, &mut *src, &opts).map_err(|e| CliError::input(format!("bench case {spec}: {e}")))?
        };
        let secs = start.elapsed().as_secs_f64();
        if secs < best.seconds {
            best = Figures {
                warp_instructions: report.warp_instructions,
                cycles: report.total_cycles,
                seconds: secs,
                peak_rss: 0,
            };
        }
    }
    println!("{}", child::result_line(best.warp_instructions, best.cycles, best.seconds));
    Ok(())
}

//! The `gpusim` command line: the only part of gpusim that prints or touches files.
//!
//! A library so that the fuzz targets (fuzz/) can reach the entry points that only the command
//! line has, such as the study-file checks of `gpusim sweep`; src/main.rs only calls [`main`].
//! Nothing here is a stable API.

mod arch_cmd;
mod attention_cmd;
mod bench;
mod calibrate_cmd;
mod calibrate_store;
mod correlate_cmd;
mod error;
mod gemm_cmd;
mod grouped_gemm_cmd;
mod interrupt;
mod measure_cmd;
mod moe_cmd;
mod output;
mod print;
mod progress;
mod report_cmd;
mod run;
mod sweep;
mod timeline;
mod trace_cmd;
mod ubench_cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use error::CliResult;
pub use sweep::check_study;

/// The exit codes, shown by `--help` (and in the README).
const EXIT_CODES: &str = "Exit codes:
  0    success
  1    a failed check (the accuracy gate of `gpusim correlate --gate`)
  2    bad input: a file, parameter or value gpusim cannot use (the message names it)
  130  interrupted (Ctrl-C)";

/// gpusim: a cycle-approximate GPU performance simulator.
#[derive(Parser)]
#[command(name = "gpusim", version, about, long_about = None, after_help = EXIT_CODES)]
struct Cli {
    /// Print nothing but errors (and no progress).
    #[arg(long, short, global = true, conflicts_with = "verbose")]
    quiet: bool,
    /// Say more on stderr: timings and the files written.
    #[arg(long, short, global = true)]
    verbose: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Simulate a trace on a chip and report time, throughput, utilisation and stall reasons.
    Run(run::RunArgs),
    /// Inspect chip descriptions: list, show, validate, explain, diff.
    Arch {
        #[command(subcommand)]
        cmd: arch_cmd::ArchCmd,
    },
    /// Work with trace files (convert between text and binary, summarise).
    Trace {
        #[command(subcommand)]
        cmd: trace_cmd::TraceCmd,
    },
    /// Measure simulation speed (warp instructions and simulated cycles per second, peak RSS) on
    /// the built-in suite of every family, or on trace files (docs/performance.md).
    Bench(bench::BenchArgs),
    /// Simulate reference measurements (GEMM, latency, bandwidth, Nsight Compute kernels) and
    /// report the error.
    Correlate(correlate_cmd::CorrelateArgs),
    /// Fit a preset's model parameters to reference measurements (k-fold cross-validated).
    Calibrate(calibrate_cmd::CalibrateArgs),
    /// Write a study directory's results (`gpusim sweep`) as one self-contained HTML report.
    Report(report_cmd::ReportArgs),
    /// Print a shell completion script: `gpusim completions bash > /etc/bash_completion.d/gpusim`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Measure this machine's GPU (microbenchmarks, cuBLAS GEMMs) into a measurement file
    /// (needs a build with `--features cuda`).
    Measure(measure_cmd::MeasureArgs),
    /// Run a what-if study: vary chip parameters over workloads, in parallel, resumable,
    /// shardable (`--shard`, `--emit-slurm`, `sweep merge`).
    Sweep(sweep::SweepArgs),
}

/// Rust ignores SIGPIPE, so `gpusim ... | head` would make `println!` panic once the reader has
/// gone. Restore the default action: like any Unix filter, gpusim then ends quietly when its
/// output is closed.
fn restore_default_sigpipe() {
    #[cfg(unix)]
    // SAFETY: called first thing in main, before any thread exists; only resets a signal action.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// The `gpusim` command: parses the arguments, runs the command, and maps its result to the
/// exit code.
pub fn main() -> ExitCode {
    restore_default_sigpipe();
    let cli = Cli::parse();
    let (quiet, verbose) = (cli.quiet, cli.verbose);
    let res: CliResult = match cli.cmd {
        Cmd::Run(mut a) => {
            (a.quiet, a.verbose) = (quiet, verbose);
            run::run(a)
        }
        Cmd::Arch { cmd } => arch_cmd::arch(cmd),
        Cmd::Trace { cmd } => trace_cmd::trace(cmd),
        Cmd::Bench(a) => bench::bench(a),
        Cmd::Correlate(mut a) => {
            a.quiet = quiet;
            correlate_cmd::correlate_cmd(a)
        }
        Cmd::Calibrate(mut a) => {
            a.quiet = quiet;
            calibrate_cmd::calibrate_cmd(a)
        }
        Cmd::Report(a) => report_cmd::report_cmd(a, quiet),
        Cmd::Completions { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(shell, &mut Cli::command(), "gpusim", &mut std::io::stdout());
            Ok(())
        }
        Cmd::Measure(a) => measure_cmd::measure_cmd(a),
        Cmd::Sweep(a) => sweep::sweep(a),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.code as u8)
        }
    }
}

//! The `gpusim` command line: the only part of gpusim that prints or touches files.

mod arch_cmd;
mod bench;
mod calibrate_cmd;
mod correlate_cmd;
mod error;
mod gemm_cmd;
mod grouped_gemm_cmd;
mod measure_cmd;
mod moe_cmd;
mod print;
mod run;
mod trace_cmd;
mod ubench_cmd;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use error::CliResult;

/// gpusim: a cycle-approximate GPU performance simulator.
#[derive(Parser)]
#[command(name = "gpusim", version, about, long_about = None)]
struct Cli {
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
    /// Measure simulation speed (simulated warp instructions per second) on traces.
    Bench {
        /// Chip preset or TOML file.
        #[arg(long, default_value = "h100-sxm5-80gb")]
        arch: String,
        /// Runs per trace; the fastest counts.
        #[arg(long, default_value_t = 3)]
        repeat: u32,
        /// Traces to run (default: the shipped examples under examples/).
        traces: Vec<PathBuf>,
    },
    /// Simulate reference measurements (GEMM, latency, bandwidth, Nsight Compute kernels) and
    /// report the error.
    Correlate(correlate_cmd::CorrelateArgs),
    /// Fit a preset's model parameters to reference measurements (k-fold cross-validated).
    Calibrate(calibrate_cmd::CalibrateArgs),
    /// Measure this machine's GPU (microbenchmarks, cuBLAS GEMMs) into a measurement file
    /// (needs a build with `--features cuda`).
    Measure(measure_cmd::MeasureArgs),
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

fn main() -> ExitCode {
    restore_default_sigpipe();
    let cli = Cli::parse();
    let res: CliResult = match cli.cmd {
        Cmd::Run(a) => run::run(a),
        Cmd::Arch { cmd } => arch_cmd::arch(cmd),
        Cmd::Trace { cmd } => trace_cmd::trace(cmd),
        Cmd::Bench { arch, repeat, traces } => bench::bench(&arch, repeat, traces),
        Cmd::Correlate(a) => correlate_cmd::correlate_cmd(a),
        Cmd::Calibrate(a) => calibrate_cmd::calibrate_cmd(a),
        Cmd::Measure(a) => measure_cmd::measure_cmd(a),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.code as u8)
        }
    }
}

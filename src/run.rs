//! `gpusim run`.

use std::path::{Path, PathBuf};

use clap::Args;
use gpusim_configs::{Arch, Hertz};
use gpusim_sim_core::{Report, SimErrorKind, SimOptions, simulate};

use crate::error::{CliError, CliResult};
use crate::print;

#[derive(Args)]
pub struct RunArgs {
    /// Chip: a built-in preset name (see `gpusim arch list`) or a TOML file.
    #[arg(long)]
    pub arch: String,
    /// Write the report as JSON (docs/report-schema.md) to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Override the SM clock, in MHz.
    #[arg(long)]
    pub clock_mhz: Option<f64>,
    /// Memory model by name, overriding the chip's `sim.memory_model`: `hierarchy` (L1, L2
    /// partitions, HBM) or `simple` (latency and bandwidth only).
    #[arg(long)]
    pub memory_model: Option<String>,
    /// Print nothing but errors (with --json).
    #[arg(long, short)]
    pub quiet: bool,
    /// Trace: gpusim text or binary, an Accel-Sim kernelslist.g, or a folder holding one.
    pub trace: PathBuf,
}

/// Loads the chip and applies `--clock-mhz`.
pub fn load_arch(name: &str, clock_mhz: Option<f64>) -> CliResult<Arch> {
    let mut arch = gpusim_configs::load(name)?;
    if let Some(mhz) = clock_mhz {
        if !(mhz.is_finite() && mhz > 0.0 && mhz < 100_000.0) {
            return Err(CliError::input(format!("--clock-mhz: `{mhz}` is not a plausible clock (0 < MHz < 100000)")));
        }
        arch.clocks.lock_sm(Hertz((mhz * 1e6).round() as u64));
        gpusim_configs::validate(&arch).map_err(|e| CliError::input(format!("--clock-mhz {mhz}: {e}")))?;
    }
    Ok(arch)
}

fn write_json(path: &Path, r: &Report) -> CliResult {
    let text =
        serde_json::to_string_pretty(r).map_err(|e| CliError::input(format!("cannot encode the report: {e}")))?;
    std::fs::write(path, text + "\n").map_err(|e| CliError::input(format!("{}: cannot write: {e}", path.display())))
}

/// Simulates `trace` on `arch`; on failure the partial report of finished kernels is returned
/// alongside the error.
pub fn simulate_file(arch: &Arch, trace: &Path, opts: &SimOptions) -> Result<Report, (CliError, Option<Box<Report>>)> {
    let (_fmt, mut src) = gpusim_isa::open::open(trace).map_err(|e| (CliError::from(e), None))?;
    let res = simulate(arch, &mut *src, opts);
    for d in src.take_diagnostics() {
        eprintln!("{d}");
    }
    res.map_err(|mut e| {
        let partial = e.partial.take();
        let msg = match &e.kind {
            SimErrorKind::Trace(_) => e.to_string(),
            _ => format!("{}: {e}", trace.display()),
        };
        (CliError::input(msg), partial)
    })
}

pub fn run(a: RunArgs) -> CliResult {
    let arch = load_arch(&a.arch, a.clock_mhz)?;
    let opts = SimOptions { memory_model: a.memory_model.clone() };
    match simulate_file(&arch, &a.trace, &opts) {
        Ok(r) => {
            if !a.quiet {
                print!("{}", print::report(&r, &a.trace.display().to_string()));
            }
            if let Some(j) = &a.json {
                write_json(j, &r)?;
            }
            Ok(())
        }
        Err((e, partial)) => {
            // Never lose finished results: print and save what completed before the error.
            if let Some(r) = partial {
                eprintln!("the kernels that finished before the error:");
                eprint!("{}", print::report(&r, &a.trace.display().to_string()));
                if let Some(j) = &a.json
                    && let Err(w) = write_json(j, &r)
                {
                    eprintln!("error: {w}");
                }
            }
            Err(e)
        }
    }
}

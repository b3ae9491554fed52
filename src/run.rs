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
    /// Refuse a chip whose model state would exceed this much memory (e.g. `4 GiB`, `512 MiB`):
    /// an `l2.size` typo asks for gigabytes of tags. The bound is worked out before anything is
    /// built (sim_core::footprint).
    #[arg(long, default_value = "4 GiB", value_parser = parse_bytes)]
    pub max_memory: gpusim_configs::Bytes,
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

fn parse_bytes(s: &str) -> Result<gpusim_configs::Bytes, String> {
    s.parse::<gpusim_configs::Bytes>().map_err(|e| format!("`{s}`: {e} (e.g. `4 GiB`)"))
}

/// Fails with exit code 2 when the chip's model would need more than `limit` bytes, naming the
/// parts and the parameters that size them.
pub fn check_footprint(arch: &Arch, limit: gpusim_configs::Bytes) -> CliResult {
    let f = gpusim_sim_core::footprint(arch);
    if f.total() <= limit.0 {
        return Ok(());
    }
    let parts: Vec<String> = f
        .parts()
        .iter()
        .filter(|p| p.1 > 0)
        .map(|(what, b, keys)| format!("{what} {} ({keys})", print::bytes(*b)))
        .collect();
    Err(CliError::input(format!(
        "chip `{}`: its model needs up to {} of memory, more than --max-memory {}: {}",
        arch.name,
        print::bytes(f.total()),
        print::bytes(limit.0),
        parts.join(", ")
    )))
}

fn write_json(path: &Path, r: &Report) -> CliResult {
    let text =
        serde_json::to_string_pretty(r).map_err(|e| CliError::input(format!("cannot encode the report: {e}")))?;
    crate::output::write_atomic(path, (text + "\n").as_bytes())
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
        let err = match (&e.kind, crate::interrupt::exit_code()) {
            (SimErrorKind::Interrupted { .. }, Some(code)) => CliError::interrupted(msg, code),
            _ => CliError::input(msg),
        };
        (err, partial)
    })
}

pub fn run(a: RunArgs) -> CliResult {
    let arch = load_arch(&a.arch, a.clock_mhz)?;
    check_footprint(&arch, a.max_memory)?;
    if let Some(j) = &a.json {
        crate::output::check_writable(j, "--json")?;
    }
    let stop = crate::interrupt::install()?;
    let opts = SimOptions { memory_model: a.memory_model.clone(), stop: Some(stop) };
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
                if r.partial.as_ref().is_none_or(|p| p.reason != "interrupted") {
                    eprintln!("the kernels that finished before the error:");
                }
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

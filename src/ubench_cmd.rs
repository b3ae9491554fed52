//! `gpusim trace ubench NAME`, `gpusim trace NAME` and `gpusim trace params [NAME]`: write the
//! trace of any generator of `gpusim_workloads::registry()` (the microbenchmarks, GEMM), or list
//! the generators and their parameters.

use std::path::{Path, PathBuf};

use clap::{Args, CommandFactory, FromArgMatches};
use gpusim_isa::Trace;
use gpusim_workloads::params::split_key_values;
use gpusim_workloads::registry::{self, Generator};
use gpusim_workloads::ubench::Measure;

use crate::error::{CliError, CliResult};
use crate::print::thousands;

fn ubench_help() -> String {
    format!(
        "Generators:\n{}\nParameters are listed by `gpusim trace params NAME` (or `gpusim trace NAME --help`), e.g. \
`-p footprint_bytes=\"16 MiB\" -p random=false`; an unknown one lists the valid ones. For a latency, write the \
pointer chase with passes=1 and passes=2 and divide the difference of their cycles by the difference of their \
accesses.",
        registry::summary_table()
    )
}

#[derive(Args)]
#[command(after_help = ubench_help())]
pub struct UbenchArgs {
    /// The generator (pointer-chase, stream-triad, l2-read, ...).
    pub name: String,
    #[command(flatten)]
    pub common: GenArgs,
}

/// What every generator takes on the command line.
#[derive(Args)]
pub struct GenArgs {
    /// A parameter `KEY=VALUE` (repeatable): sizes take units ("16 MiB"), integers may be hex.
    #[arg(short = 'p', long = "param", value_name = "KEY=VALUE")]
    pub params: Vec<String>,
    /// Chip preset or TOML file that sizes the grid (SM count, shared memory, compute capability).
    #[arg(long, default_value = "h100-sxm5-80gb")]
    pub arch: String,
    /// Output trace: gpusim text, or binary when the name ends in `.gtb`.
    #[arg(short = 'o', long)]
    pub output: PathBuf,
}

/// The `gpusim trace NAME ...` form: `args[0]` is the generator's name.
#[derive(clap::Parser)]
struct GenCli {
    #[command(flatten)]
    common: GenArgs,
}

pub fn ubench(args: UbenchArgs) -> CliResult {
    if !gpusim_workloads::ubench::NAMES.contains(&args.name.as_str()) {
        return Err(CliError::input(format!(
            "unknown microbenchmark `{}`; valid names: {}",
            args.name,
            gpusim_workloads::ubench::NAMES.join(", ")
        )));
    }
    let g = registry::find(&args.name).map_err(|e| CliError::input(e.0))?;
    generate(g, args.common)
}

/// `gpusim trace NAME [-p KEY=VALUE]... --arch A -o OUT`, and `gpusim trace NAME --help` with the
/// generator's parameters.
pub fn external(args: Vec<String>) -> CliResult {
    let name = args.first().cloned().unwrap_or_default();
    let g = registry::find(&name).map_err(|e| CliError::input(format!("trace: {e}")))?;
    let cmd = GenCli::command().name(g.name).about(g.summary).after_help(g.help());
    let m = match cmd.try_get_matches_from(&args) {
        Ok(m) => m,
        Err(e) if !e.use_stderr() => {
            // --help: clap's text, with the parameter listing.
            print!("{e}");
            return Ok(());
        }
        Err(e) => return Err(CliError::input(e.to_string())),
    };
    let cli = GenCli::from_arg_matches(&m).map_err(|e| CliError::input(e.to_string()))?;
    generate(g, cli.common)
}

/// `gpusim trace params [NAME]`.
pub fn params(name: Option<String>) -> CliResult {
    match name {
        None => {
            println!("generators (parameters: gpusim trace params NAME):\n{}", registry::summary_table());
        }
        Some(n) => print!("{}", registry::find(&n).map_err(|e| CliError::input(e.0))?.help()),
    }
    Ok(())
}

/// Writes `trace` to `out`: binary when the name ends in `.gtb`, gpusim text otherwise.
pub(crate) fn write_trace(trace: &Trace, out: &Path) -> CliResult {
    crate::trace_cmd::write(trace, out, out.extension().is_some_and(|e| e == "gtb"))
}

fn generate(g: &Generator, args: GenArgs) -> CliResult {
    let params = split_key_values(&args.params).map_err(|e| CliError::input(format!("--param {e}")))?;
    let arch = crate::run::load_arch(&args.arch, None)?;
    let u = g.generate(&params, &arch).map_err(|e| CliError::input(e.0))?;

    let out = &args.output;
    write_trace(&u.trace, out)?;
    let size = std::fs::metadata(out).map(|m| m.len()).unwrap_or(0);
    println!(
        "wrote {} ({} bytes, {} kernel(s)) for {}",
        out.display(),
        thousands(size),
        u.trace.kernels.len(),
        arch.name
    );
    println!("{}", u.description);
    let k = u.timed_kernel;
    match u.measure {
        Some(Measure::LatencyPerAccess { accesses }) => println!(
            "measure: latency per access from kernel {k}: {accesses} timed accesses; difference two runs that differ \
             in accesses"
        ),
        Some(Measure::Bandwidth { bytes }) => {
            println!("measure: bandwidth of kernel {k}: {} bytes / its time", thousands(bytes))
        }
        Some(Measure::Cycles) => println!("measure: cycles of kernel {k}"),
        None => {}
    }
    Ok(())
}

//! `gpusim trace ubench`: write the trace of a microbenchmark (pointer chase, STREAM, L2
//! bandwidth, bank conflicts, copy pipelines, distributed shared memory).

use std::io::BufWriter;
use std::path::PathBuf;

use clap::Args;
use gpusim_isa::{binary, text};
use gpusim_workloads::ubench::{self, Measure};

use crate::error::{CliError, CliResult};
use crate::print::thousands;

#[derive(Args)]
#[command(
    after_help = "Microbenchmarks: pointer-chase, stream-read, stream-write, stream-copy, stream-triad, l2-read, \
shared-banks, cp-async-pipeline, tma-pipeline, dsmem-latency. Parameters are the fields of the generator's \
parameter struct (gpusim_workloads::ubench), e.g. `-p footprint_bytes=\"16 MiB\" -p random=false`; an unknown \
one lists the valid ones. For a latency, write the pointer chase with passes=1 and passes=2 and divide the \
difference of their cycles by the difference of their accesses."
)]
pub struct UbenchArgs {
    /// The microbenchmark (pointer-chase, stream-triad, l2-read, ...).
    pub name: String,
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

pub fn ubench(args: UbenchArgs) -> CliResult {
    let mut params = Vec::with_capacity(args.params.len());
    for p in &args.params {
        let (k, v) = p.split_once('=').ok_or_else(|| CliError::input(format!("--param `{p}`: expected KEY=VALUE")))?;
        params.push((k.trim().to_string(), v.trim().to_string()));
    }
    if !ubench::NAMES.contains(&args.name.as_str()) {
        return Err(CliError::input(format!(
            "unknown microbenchmark `{}`; valid names: {}",
            args.name,
            ubench::NAMES.join(", ")
        )));
    }
    let arch = crate::run::load_arch(&args.arch, None)?;
    let u = ubench::by_name(&args.name, &params, &arch).map_err(CliError::input)?;

    let out = &args.output;
    let binary_out = out.extension().is_some_and(|e| e == "gtb");
    let f =
        std::fs::File::create(out).map_err(|e| CliError::input(format!("{}: cannot create: {e}", out.display())))?;
    let mut w = BufWriter::new(f);
    let res = if binary_out { binary::write_trace(&u.trace, &mut w) } else { text::write_trace(&u.trace, &mut w) };
    res.and_then(|_| std::io::Write::flush(&mut w))
        .map_err(|e| CliError::input(format!("{}: cannot write: {e}", out.display())))?;

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
        Measure::LatencyPerAccess { accesses } => println!(
            "measure: latency per access from kernel {k}: {accesses} timed accesses; difference two runs that differ \
             in accesses"
        ),
        Measure::Bandwidth { bytes } => {
            println!("measure: bandwidth of kernel {k}: {} bytes / its time", thousands(bytes))
        }
        Measure::Cycles => println!("measure: cycles of kernel {k}"),
    }
    Ok(())
}

//! `gpusim trace`: convert and summarise trace files.

use std::collections::HashMap;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Subcommand;
use gpusim_isa::{CtaLayout, KernelTrace, Program, Trace, TraceSource, binary, text};

use crate::error::{CliError, CliResult};
use crate::print::thousands;

#[derive(Subcommand)]
pub enum TraceCmd {
    /// Convert any readable trace to gpusim text (`.trace`) or binary (`.gtb`), chosen by --to
    /// or the output's extension.
    Convert {
        input: PathBuf,
        output: PathBuf,
        /// `text` or `binary`.
        #[arg(long)]
        to: Option<String>,
    },
    /// Summarise a trace: kernels, launch shapes, programs and instruction counts.
    Info { input: PathBuf },
    /// Write the trace of a microbenchmark (pointer chase, STREAM, L2 bandwidth, bank conflicts,
    /// cp.async/TMA pipelines, distributed shared memory).
    Ubench(crate::ubench_cmd::UbenchArgs),
    /// Write the trace of a GEMM recipe (Ampere multistage or Hopper warp-specialised) for a
    /// problem.
    Gemm(crate::gemm_cmd::GemmArgs),
    /// Write the trace of a DeepGEMM-style M-grouped GEMM (MoE experts): contiguous or masked
    /// layout, fp8 block-scaled or bf16.
    GroupedGemm(crate::grouped_gemm_cmd::GroupedGemmArgs),
    /// Write one trace of a whole MoE layer: router, top-k, permutation, expert GEMMs (Triton
    /// fused_moe or DeepGEMM grouped), activation, combine; shared experts on a second stream.
    Moe(crate::moe_cmd::MoeArgs),
    /// List the generators, or one generator's parameters (name, description, unit, default,
    /// valid range).
    Params { name: Option<String> },
    /// `gpusim trace NAME -p KEY=VALUE ... -o OUT`: any generator of the registry by name (see
    /// `gpusim trace params`).
    #[command(external_subcommand)]
    Generator(Vec<String>),
}

/// Reads a whole trace into memory (CTAs with their own programs become per-CTA overrides).
fn collect(src: &mut dyn TraceSource) -> Result<Trace, gpusim_isa::TraceError> {
    let mut trace = Trace::default();
    while let Some(mut ks) = src.next_kernel()? {
        let info = ks.info().clone();
        let mut programs: Vec<Arc<Program>> = Vec::new();
        let mut index: HashMap<*const Program, u32> = HashMap::new();
        let mut layouts: Vec<Vec<u32>> = Vec::new();
        while let Some(cta) = ks.next_cta()? {
            let l = cta
                .warps
                .iter()
                .map(|p| {
                    *index.entry(Arc::as_ptr(p)).or_insert_with(|| {
                        programs.push(p.clone());
                        (programs.len() - 1) as u32
                    })
                })
                .collect();
            layouts.push(l);
        }
        let ops = ks.ops().clone();
        // The most common layout becomes the default; the others are overrides.
        let mut counts: HashMap<&Vec<u32>, usize> = HashMap::new();
        for l in &layouts {
            *counts.entry(l).or_default() += 1;
        }
        let mut ranked: Vec<(&Vec<u32>, usize)> = counts.into_iter().collect();
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        let default = ranked.first().map(|(l, _)| (*l).clone()).unwrap_or_default();
        let overrides =
            layouts.iter().enumerate().filter(|(_, l)| **l != default).map(|(i, l)| (i as u64, l.clone())).collect();
        trace.kernels.push(KernelTrace { info, ops, programs, layout: CtaLayout { default, overrides } });
    }
    Ok(trace)
}

pub(crate) fn write(trace: &Trace, out: &Path, binary_out: bool) -> CliResult {
    let f =
        std::fs::File::create(out).map_err(|e| CliError::input(format!("{}: cannot create: {e}", out.display())))?;
    let mut w = BufWriter::new(f);
    let res = if binary_out { binary::write_trace(trace, &mut w) } else { text::write_trace(trace, &mut w) };
    res.and_then(|_| std::io::Write::flush(&mut w))
        .map_err(|e| CliError::input(format!("{}: cannot write: {e}", out.display())))
}

pub fn trace(cmd: TraceCmd) -> CliResult {
    match cmd {
        TraceCmd::Ubench(args) => crate::ubench_cmd::ubench(args),
        TraceCmd::Gemm(args) => crate::gemm_cmd::gemm(args),
        TraceCmd::GroupedGemm(args) => crate::grouped_gemm_cmd::grouped_gemm(args),
        TraceCmd::Moe(args) => crate::moe_cmd::moe(args),
        TraceCmd::Params { name } => crate::ubench_cmd::params(name),
        TraceCmd::Generator(args) => crate::ubench_cmd::external(args),
        TraceCmd::Convert { input, output, to } => {
            let binary_out = match to.as_deref() {
                Some("binary") => true,
                Some("text") => false,
                Some(x) => return Err(CliError::input(format!("--to: `{x}` is neither `text` nor `binary`"))),
                None => output.extension().is_some_and(|e| e == "gtb"),
            };
            let (_, mut src) = gpusim_isa::open::open(&input)?;
            let t = collect(&mut *src)?;
            write(&t, &output, binary_out)?;
            let size = std::fs::metadata(&output).map(|m| m.len()).unwrap_or(0);
            println!("wrote {} ({} bytes, {} kernel(s))", output.display(), thousands(size), t.kernels.len());
            Ok(())
        }
        TraceCmd::Info { input } => {
            let (fmt, mut src) = gpusim_isa::open::open(&input)?;
            println!("{}: {fmt:?} trace", input.display());
            while let Some(mut ks) = src.next_kernel()? {
                let info = ks.info().clone();
                let mut ctas = 0u64;
                let mut dynamic = 0u64;
                // Saturated: the true total is at least `dynamic`.
                let mut saturated = false;
                while let Some(c) = ks.next_cta()? {
                    ctas += 1;
                    for (w, p) in c.warps.iter().enumerate() {
                        let n = p.dynamic_len_for(c.coord.as_array(), w as u32);
                        saturated |= n == u64::MAX;
                        dynamic = dynamic.checked_add(n).unwrap_or_else(|| {
                            saturated = true;
                            u64::MAX
                        });
                    }
                }
                let dynamic = if saturated { format!("≥{}", thousands(dynamic)) } else { thousands(dynamic) };
                println!(
                    "kernel {} `{}`: grid {} block {} cluster {}, {} regs, {} B smem, stream {}, {} CTAs, {} warp instructions, {} opcodes",
                    info.id,
                    info.name,
                    info.grid,
                    info.block,
                    info.cluster,
                    info.regs_per_thread,
                    info.smem_bytes,
                    info.stream,
                    thousands(ctas),
                    dynamic,
                    ks.ops().len()
                );
                let unknown: Vec<&str> =
                    ks.ops().iter().filter(|(_, d)| !d.known).map(|(_, d)| d.mnemonic.as_str()).collect();
                if !unknown.is_empty() {
                    println!("  warning[W001]: unknown opcodes (run as the misc class): {}", unknown.join(", "));
                }
            }
            Ok(())
        }
    }
}

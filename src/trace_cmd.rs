//! `gpusim trace`: convert and summarise trace files.

use std::collections::HashMap;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Subcommand;
use gpusim_isa::{CtaLayout, KernelSource, KernelTrace, Program, Trace, TraceSource, binary, text};

use crate::error::{CliError, CliResult};
use crate::print::{thousands, thousands_wide};

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
    /// Write the trace of an attention recipe (FlashAttention-2/-3, decode, MLA decode, unfused)
    /// for a problem.
    Attention(crate::attention_cmd::AttentionArgs),
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

/// What `trace info` counts of one kernel.
struct KernelCount {
    ctas: u64,
    /// Warp instructions of the CTAs counted (exact in 128 bits, saturating beyond).
    instructions: u128,
    /// Whether CTAs whose count depends on their index were left uncounted past the budget.
    capped: bool,
    ctas_counted: u64,
}

/// CTAs whose programs depend on the CTA index are counted one by one, up to this many; runs of
/// CTAs with index-independent programs are counted in closed form, whatever their number.
const PER_CTA_BUDGET: u64 = 1 << 22;

/// Counts a kernel's CTAs and warp instructions. A run of CTAs that share their programs costs
/// one walk of those programs when no program has per-CTA parameters, so a 2^40-CTA grid of one
/// layout is counted at once.
fn count_kernel(ks: &mut dyn KernelSource) -> Result<KernelCount, gpusim_isa::TraceError> {
    let total = ks.info().num_ctas();
    let grid = ks.info().grid;
    let mut c = KernelCount { ctas: total, instructions: 0, capped: false, ctas_counted: 0 };
    let mut walked = 0u64;
    let warps_of = |warps: &[Arc<Program>], coord: [u32; 3]| -> u128 {
        warps.iter().enumerate().fold(0u128, |n, (w, p)| n.saturating_add(p.dynamic_len_wide(coord, w as u32)))
    };
    loop {
        if let Some(run) = ks.skip_run(u64::MAX)? {
            if run.warps.iter().all(|p| p.params.is_empty()) {
                c.instructions =
                    c.instructions.saturating_add(warps_of(&run.warps, [0; 3]).saturating_mul(run.count as u128));
                c.ctas_counted += run.count;
                continue;
            }
            // Index-dependent programs: each CTA of the run within the budget.
            let take = run.count.min(PER_CTA_BUDGET.saturating_sub(walked));
            for i in run.first..run.first + take {
                c.instructions = c.instructions.saturating_add(warps_of(&run.warps, grid.unlinear(i).as_array()));
            }
            walked += take;
            c.ctas_counted += take;
            if take < run.count {
                c.capped = true;
                break;
            }
            continue;
        }
        if walked >= PER_CTA_BUDGET {
            c.capped = true;
            break;
        }
        let Some(cta) = ks.next_cta()? else { break };
        c.instructions = c.instructions.saturating_add(warps_of(&cta.warps, cta.coord.as_array()));
        walked += 1;
        c.ctas_counted += 1;
    }
    c.capped |= c.ctas_counted < total;
    Ok(c)
}

/// Reads a whole trace into memory (CTAs with their own programs become per-CTA overrides).
fn collect(src: &mut dyn TraceSource) -> Result<Trace, gpusim_isa::TraceError> {
    let mut trace = Trace::default();
    while let Some(mut ks) = src.next_kernel()? {
        let info = ks.info().clone();
        let mut programs: Vec<Arc<Program>> = Vec::new();
        let mut index: HashMap<*const Program, u32> = HashMap::new();
        let mut layout_of = |warps: &[Arc<Program>]| -> Vec<u32> {
            warps
                .iter()
                .map(|p| {
                    *index.entry(Arc::as_ptr(p)).or_insert_with(|| {
                        programs.push(p.clone());
                        (programs.len() - 1) as u32
                    })
                })
                .collect()
        };
        // Runs of CTAs sharing the source's default layout come whole (`skip_run`), so a huge
        // grid of one layout costs one entry, not one per CTA.
        let mut runs: Vec<(u64, u64, Vec<u32>)> = Vec::new();
        let mut next = 0u64;
        loop {
            if let Some(run) = ks.skip_run(u64::MAX)? {
                runs.push((run.first, run.count, layout_of(&run.warps)));
                next = run.first + run.count;
                continue;
            }
            let Some(cta) = ks.next_cta()? else { break };
            runs.push((next, 1, layout_of(&cta.warps)));
            next += 1;
        }
        let ops = ks.ops().clone();
        // The most common layout becomes the default; the others are overrides.
        let mut counts: HashMap<&Vec<u32>, u64> = HashMap::new();
        for (_, n, l) in &runs {
            *counts.entry(l).or_default() += n;
        }
        let mut ranked: Vec<(&Vec<u32>, u64)> = counts.into_iter().collect();
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        let default = ranked.first().map(|(l, _)| (*l).clone()).unwrap_or_default();
        let overrides = runs
            .iter()
            .filter(|(_, _, l)| *l != default)
            .flat_map(|(first, n, l)| (*first..first + n).map(move |i| (i, l.clone())))
            .collect();
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
        TraceCmd::Attention(args) => crate::attention_cmd::attention(args),
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
                let count = count_kernel(&mut *ks)?;
                let dynamic = match count.instructions {
                    n if n > u64::MAX as u128 => format!(
                        "{} (more than the {} gpusim can simulate in one kernel)",
                        thousands_wide(n),
                        thousands(u64::MAX)
                    ),
                    n if count.capped => {
                        format!("≥{} (counted the first {} CTAs)", thousands_wide(n), thousands(count.ctas_counted))
                    }
                    n => thousands_wide(n),
                };
                let ctas = count.ctas;
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

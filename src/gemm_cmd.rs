//! `gpusim trace gemm`: write the trace of a GEMM recipe for a problem.

use std::io::BufWriter;
use std::path::PathBuf;

use clap::Args;
use gpusim_isa::{binary, text};
use gpusim_workloads::gemm::{self, Dtype, GemmProblem, Style};

use crate::error::{CliError, CliResult};
use crate::print::thousands;

#[derive(Args)]
#[command(
    after_help = "Recipes: `ampere` (cp.async + ldmatrix + mma.sync multistage) and `hopper` (TMA producer + wgmma \
consumers, mbarriers, clusters with multicast, persistent scheduler). Without --recipe the chip's style is used \
(hopper from compute capability 9.0) with the tile and split-K a tuned library would pick. Parameters override \
fields of the recipe, e.g. `-p cta_n=128 -p stages=3 -p multicast=false -p epilogue=direct`; an unknown one lists \
the valid ones."
)]
pub struct GemmArgs {
    #[arg(long)]
    pub m: u64,
    #[arg(long)]
    pub n: u64,
    #[arg(long)]
    pub k: u64,
    /// Input type: bf16, fp16, tf32 or fp8 (fp32 accumulation).
    #[arg(long, default_value = "bf16")]
    pub dtype: String,
    /// fp8 with DeepGEMM-style 1×128 (A) / 128×128 (B) block scaling.
    #[arg(long)]
    pub block_scaled: bool,
    #[arg(long, default_value_t = 1)]
    pub batch: u64,
    /// Chip preset or TOML file (SM count, shared memory, compute capability, tensor rates).
    #[arg(long, default_value = "h100-sxm5-80gb")]
    pub arch: String,
    /// `ampere` or `hopper`; default: the chip's style.
    #[arg(long)]
    pub recipe: Option<String>,
    /// A recipe parameter `KEY=VALUE` (repeatable).
    #[arg(short = 'p', long = "param", value_name = "KEY=VALUE")]
    pub params: Vec<String>,
    /// Output trace: gpusim text, or binary when the name ends in `.gtb`.
    #[arg(short = 'o', long)]
    pub output: PathBuf,
}

pub fn gemm(args: GemmArgs) -> CliResult {
    let dtype = Dtype::parse(&args.dtype)
        .ok_or_else(|| CliError::input(format!("--dtype `{}`: expected bf16, fp16, tf32 or fp8", args.dtype)))?;
    let p = GemmProblem { m: args.m, n: args.n, k: args.k, batch: args.batch, dtype, block_scaled: args.block_scaled };
    p.validate().map_err(CliError::input)?;
    let mut params = Vec::with_capacity(args.params.len());
    for s in &args.params {
        let (k, v) = s.split_once('=').ok_or_else(|| CliError::input(format!("--param `{s}`: expected KEY=VALUE")))?;
        params.push((k.trim().to_string(), v.trim().to_string()));
    }
    let arch = crate::run::load_arch(&args.arch, None)?;
    let base = match &args.recipe {
        None => gemm::default_recipe(&arch, &p),
        Some(name) => {
            let style = Style::parse(name)
                .ok_or_else(|| CliError::input(format!("--recipe `{name}`: expected ampere or hopper")))?;
            gemm::tuned_recipe(&arch, &p, style)
        }
    };
    let recipe = gemm::recipe_from_params(base, &params).map_err(CliError::input)?;
    let trace = gemm::generate(&arch, &p, &recipe).map_err(|e| CliError::input(format!("{recipe}: {e}")))?;

    let out = &args.output;
    let binary_out = out.extension().is_some_and(|e| e == "gtb");
    let f =
        std::fs::File::create(out).map_err(|e| CliError::input(format!("{}: cannot create: {e}", out.display())))?;
    let mut w = BufWriter::new(f);
    let res = if binary_out { binary::write_trace(&trace, &mut w) } else { text::write_trace(&trace, &mut w) };
    res.and_then(|_| std::io::Write::flush(&mut w))
        .map_err(|e| CliError::input(format!("{}: cannot write: {e}", out.display())))?;

    let size = std::fs::metadata(out).map(|m| m.len()).unwrap_or(0);
    println!(
        "wrote {} ({} bytes, {} kernel(s)) for {} on {}",
        out.display(),
        thousands(size),
        trace.kernels.len(),
        p,
        arch.name
    );
    println!("recipe: {recipe}");
    for k in &trace.kernels {
        let i = &k.info;
        println!(
            "kernel {} `{}`: grid {} block {} cluster {}, {} regs, {} B smem",
            i.id, i.name, i.grid, i.block, i.cluster, i.regs_per_thread, i.smem_bytes
        );
    }
    println!(
        "FLOPs: {} (2·M·N·K·batch); tensor-core FLOPs executed: {}",
        thousands(p.flops()),
        thousands(gemm::tensor_flops(&trace))
    );
    Ok(())
}

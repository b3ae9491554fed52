//! `gpusim trace gemm`: write the trace of a GEMM recipe for a problem.

use std::path::PathBuf;

use clap::Args;
use gpusim_workloads::gemm::params::{GemmSpec, PROBLEM};
use gpusim_workloads::gemm::{self, Dtype, Style};
use gpusim_workloads::params::{apply, split_key_values};

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
    /// Rows of A and C (or `-p m=...`).
    #[arg(long)]
    pub m: Option<u64>,
    /// Columns of B and C (or `-p n=...`).
    #[arg(long)]
    pub n: Option<u64>,
    /// The reduction dimension (or `-p k=...`).
    #[arg(long)]
    pub k: Option<u64>,
    /// Input type: bf16, fp16, tf32 or fp8 (fp32 accumulation); default bf16.
    #[arg(long)]
    pub dtype: Option<String>,
    /// fp8 with DeepGEMM-style 1×128 (A) / 128×128 (B) block scaling.
    #[arg(long)]
    pub block_scaled: bool,
    /// Independent products; default 1.
    #[arg(long)]
    pub batch: Option<u64>,
    /// Chip preset or TOML file (SM count, shared memory, compute capability, tensor rates).
    #[arg(long, default_value = "h100-sxm5-80gb")]
    pub arch: String,
    /// `ampere` or `hopper`; default: the chip's style.
    #[arg(long)]
    pub recipe: Option<String>,
    /// A problem or recipe parameter `KEY=VALUE` (repeatable; `gpusim trace params gemm`).
    #[arg(short = 'p', long = "param", value_name = "KEY=VALUE")]
    pub params: Vec<String>,
    /// Output trace: gpusim text, or binary when the name ends in `.gtb`.
    #[arg(short = 'o', long)]
    pub output: PathBuf,
}

pub fn gemm(args: GemmArgs) -> CliResult {
    // The flags are the problem parameters of the registry's table, given another way.
    let mut problem = Vec::new();
    for (key, v) in [("m", args.m), ("n", args.n), ("k", args.k), ("batch", args.batch)] {
        if let Some(v) = v {
            problem.push((key.to_string(), v.to_string()));
        }
    }
    if let Some(d) = &args.dtype {
        let dtype = Dtype::parse(d)
            .ok_or_else(|| CliError::input(format!("--dtype `{d}`: expected bf16, fp16, tf32 or fp8")))?;
        problem.push(("dtype".into(), dtype.name().into()));
    }
    if args.block_scaled {
        problem.push(("block_scaled".into(), "true".into()));
    }
    if let Some(name) = &args.recipe {
        Style::parse(name).ok_or_else(|| CliError::input(format!("--recipe `{name}`: expected ampere or hopper")))?;
        problem.push(("recipe".into(), name.to_ascii_lowercase()));
    }
    let given = split_key_values(&args.params).map_err(|e| CliError::input(format!("--param {e}")))?;
    let (from_p, overrides): (Vec<_>, Vec<_>) =
        given.into_iter().partition(|(k, _)| PROBLEM.iter().any(|p| p.name == k));
    problem.extend(from_p);
    for key in ["m", "n", "k"] {
        if !problem.iter().any(|(k, _)| k == key) {
            return Err(CliError::input(format!("the problem needs --{key} (or -p {key}=...)")));
        }
    }
    let mut spec = GemmSpec::default();
    apply("gemm", PROBLEM, &problem, &mut spec).map_err(|e| CliError::input(e.0))?;
    let arch = crate::run::load_arch(&args.arch, None)?;
    let (trace, p, recipe) = gemm::generate_spec(&arch, &spec, &overrides).map_err(CliError::input)?;

    let out = &args.output;
    crate::ubench_cmd::write_trace(&trace, out)?;

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

//! `gpusim trace grouped-gemm`: write the trace of a DeepGEMM-style M-grouped GEMM (contiguous or
//! masked layout, fp8 block-scaled or bf16).

use std::path::PathBuf;

use clap::Args;
use gpusim_workloads::gemm::grouped::{Layout, computed_rows, generate_grouped, grouped_recipe};
use gpusim_workloads::gemm::grouped_params::{GROUPED, GroupedSpec};
use gpusim_workloads::gemm::{Dtype, HOPPER_PARAMS, Recipe, recipe_from_params, tensor_flops};
use gpusim_workloads::params::{apply, split_key_values};

use crate::error::{CliError, CliResult};
use crate::print::thousands;

#[derive(Args)]
#[command(after_help = "The recipe is DeepGEMM's (BLOCK_M/BLOCK_N and multicast chosen as its heuristic does, \
never split-K); `-p` overrides fields of it (`gpusim trace params gemm`, hopper recipe) or sets problem parameters \
(`groups`, `m_per_group`, `n`, `k`, `layout`, `dtype`, `block_scaled`, `capacity`).")]
pub struct GroupedGemmArgs {
    /// Groups (experts), each with --m-per-group rows.
    #[arg(long)]
    pub groups: Option<u64>,
    /// Rows of each group (contiguous: tokens per expert; masked: valid rows per group).
    #[arg(long)]
    pub m_per_group: Option<u64>,
    /// Rows of each group, comma separated (instead of --groups and --m-per-group).
    #[arg(long, value_delimiter = ',')]
    pub m_list: Vec<u64>,
    #[arg(long)]
    pub n: Option<u64>,
    #[arg(long)]
    pub k: Option<u64>,
    /// `contiguous` or `masked`.
    #[arg(long)]
    pub layout: Option<String>,
    /// `fp8` (block scaled, DeepGEMM) or `bf16`.
    #[arg(long)]
    pub dtype: Option<String>,
    /// Masked: rows per group the launch is sized for (default: the largest group).
    #[arg(long)]
    pub capacity: Option<u64>,
    #[arg(long, default_value = "h800-sxm5")]
    pub arch: String,
    /// A problem or recipe parameter `KEY=VALUE` (repeatable).
    #[arg(short = 'p', long = "param", value_name = "KEY=VALUE")]
    pub params: Vec<String>,
    /// Output trace: gpusim text, or binary when the name ends in `.gtb`.
    #[arg(short = 'o', long)]
    pub output: PathBuf,
}

pub fn grouped_gemm(args: GroupedGemmArgs) -> CliResult {
    let mut problem = Vec::new();
    for (key, v) in [
        ("groups", args.groups),
        ("m_per_group", args.m_per_group),
        ("n", args.n),
        ("k", args.k),
        ("capacity", args.capacity),
    ] {
        if let Some(v) = v {
            problem.push((key.to_string(), v.to_string()));
        }
    }
    if let Some(l) = &args.layout {
        Layout::parse(l).ok_or_else(|| CliError::input(format!("--layout `{l}`: expected contiguous or masked")))?;
        problem.push(("layout".into(), l.to_ascii_lowercase()));
    }
    if let Some(d) = &args.dtype {
        let dtype = Dtype::parse(d).ok_or_else(|| CliError::input(format!("--dtype `{d}`: expected fp8 or bf16")))?;
        problem.push(("dtype".into(), dtype.name().into()));
    }
    let given = split_key_values(&args.params).map_err(|e| CliError::input(format!("--param {e}")))?;
    let (from_p, overrides): (Vec<_>, Vec<_>) =
        given.into_iter().partition(|(k, _)| GROUPED.iter().any(|p| p.name == k));
    problem.extend(from_p);
    if let Some((k, _)) = overrides.iter().find(|(k, _)| !HOPPER_PARAMS.contains(&k.as_str())) {
        let mut known: Vec<&str> = GROUPED.iter().map(|p| p.name).collect();
        known.extend(HOPPER_PARAMS);
        return Err(CliError::input(format!("--param `{k}`: not a parameter; valid: {}", known.join(", "))));
    }
    if !args.m_list.is_empty() && (args.groups.is_some() || args.m_per_group.is_some()) {
        return Err(CliError::input("--m-list replaces --groups and --m-per-group; give one or the other"));
    }
    for key in ["n", "k"] {
        if !problem.iter().any(|(k, _)| k == key) {
            return Err(CliError::input(format!("the problem needs --{key} (or -p {key}=...)")));
        }
    }
    let mut spec = GroupedSpec::default();
    apply("grouped-gemm", GROUPED, &problem, &mut spec).map_err(|e| CliError::input(e.0))?;
    spec.m_list = args.m_list.clone();
    let p = spec.problem();
    p.validate().map_err(CliError::input)?;
    let arch = crate::run::load_arch(&args.arch, None)?;
    let base = grouped_recipe(&arch, &p);
    let Recipe::Hopper(r) = recipe_from_params(Recipe::Hopper(base), &overrides).map_err(CliError::input)? else {
        unreachable!("a hopper recipe stays one")
    };
    let trace = generate_grouped(&arch, &p, &r).map_err(|e| CliError::input(format!("{}: {e}", Recipe::Hopper(r))))?;

    let out = &args.output;
    crate::ubench_cmd::write_trace(&trace, out)?;
    let size = std::fs::metadata(out).map(|m| m.len()).unwrap_or(0);
    println!("wrote {} ({} bytes) for {} on {}", out.display(), thousands(size), p, arch.name);
    println!("recipe: {}", Recipe::Hopper(r));
    for k in &trace.kernels {
        let i = &k.info;
        println!(
            "kernel {} `{}`: grid {} block {} cluster {}, {} regs, {} B smem",
            i.id, i.name, i.grid, i.block, i.cluster, i.regs_per_thread, i.smem_bytes
        );
    }
    println!(
        "FLOPs: {} (DeepGEMM's count); rows computed {}; tensor-core FLOPs executed: {}",
        thousands(p.flops()),
        thousands(computed_rows(&p, &r)),
        thousands(tensor_flops(&trace))
    );
    Ok(())
}

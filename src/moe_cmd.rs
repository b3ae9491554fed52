//! `gpusim trace moe`: write one trace of a whole MoE layer (router, top-k, permutation, expert
//! GEMMs, activation, combine; shared experts on a second stream).

use std::path::PathBuf;

use clap::Args;
use gpusim_workloads::moe::params::MOE;
use gpusim_workloads::moe::{MoeLayer, Routing, generate_layer, parse_counts};
use gpusim_workloads::params::{apply, split_key_values};

use crate::error::{CliError, CliResult};
use crate::print::thousands;

#[derive(Args)]
#[command(after_help = "Routing: `uniform`, `zipf:S` (Zipf popularity with exponent S over a seeded permutation \
of the experts), `list:N,N,...` (tokens per expert, summing to tokens·topk) or a file of those numbers. Deterministic \
for --seed. Problem parameters may also be given as `-p key=value` (`tokens`, `experts`, `topk`, `hidden`, \
`intermediate`, `shared_experts`, `recipe`, `layout`, `seed`, `dtype`), and the fused recipe's Triton \
configuration as `-p block_m=64 -p block_n=128 -p block_k=128 -p group_size_m=32 -p num_warps=4 -p num_stages=3` \
(each left out takes vLLM's default).")]
pub struct MoeArgs {
    #[arg(long)]
    pub tokens: Option<u64>,
    #[arg(long)]
    pub experts: Option<u64>,
    #[arg(long)]
    pub topk: Option<u64>,
    #[arg(long)]
    pub hidden: Option<u64>,
    #[arg(long)]
    pub intermediate: Option<u64>,
    /// Shared experts, on a second stream.
    #[arg(long)]
    pub shared_experts: Option<u64>,
    /// `fused` (Triton fused_moe) or `deepgemm` (grouped GEMMs).
    #[arg(long)]
    pub recipe: Option<String>,
    /// `contiguous` or `masked` (deepgemm).
    #[arg(long)]
    pub layout: Option<String>,
    /// `uniform`, `zipf:S`, `list:N,...` or a file of per-expert token counts.
    #[arg(long, default_value = "uniform")]
    pub routing: String,
    #[arg(long)]
    pub seed: Option<u64>,
    /// `fp8` or `bf16`.
    #[arg(long)]
    pub dtype: Option<String>,
    #[arg(long, default_value = "h800-sxm5")]
    pub arch: String,
    #[arg(short = 'p', long = "param", value_name = "KEY=VALUE")]
    pub params: Vec<String>,
    /// Output trace: gpusim text, or binary when the name ends in `.gtb`.
    #[arg(short = 'o', long)]
    pub output: PathBuf,
}

fn routing(s: &str) -> Result<Routing, CliError> {
    let looks_named = s.eq_ignore_ascii_case("uniform") || s.starts_with("zipf:") || s.starts_with("list:");
    if looks_named {
        return Routing::parse(s).map_err(|e| CliError::input(format!("--routing: {e}")));
    }
    let text = std::fs::read_to_string(s).map_err(|e| {
        CliError::input(format!("--routing `{s}`: not uniform, zipf:S or list:..., and not a readable file ({e})"))
    })?;
    parse_counts(&text).map(Routing::Counts).map_err(|e| CliError::input(format!("{s}: {e}")))
}

pub fn moe(args: MoeArgs) -> CliResult {
    let mut given = Vec::new();
    for (key, v) in [
        ("tokens", args.tokens),
        ("experts", args.experts),
        ("topk", args.topk),
        ("hidden", args.hidden),
        ("intermediate", args.intermediate),
        ("shared_experts", args.shared_experts),
        ("seed", args.seed),
    ] {
        if let Some(v) = v {
            given.push((key.to_string(), v.to_string()));
        }
    }
    for (key, v) in [("recipe", &args.recipe), ("layout", &args.layout), ("dtype", &args.dtype)] {
        if let Some(v) = v {
            given.push((key.to_string(), v.to_ascii_lowercase()));
        }
    }
    given.extend(split_key_values(&args.params).map_err(|e| CliError::input(format!("--param {e}")))?);
    let mut layer = MoeLayer::default();
    apply("moe", MOE, &given, &mut layer).map_err(|e| CliError::input(e.0))?;
    layer.routing = routing(&args.routing)?;
    let arch = crate::run::load_arch(&args.arch, None)?;
    let lt = generate_layer(&arch, &layer).map_err(CliError::input)?;

    let out = &args.output;
    crate::ubench_cmd::write_trace(&lt.trace, out)?;
    let size = std::fs::metadata(out).map(|m| m.len()).unwrap_or(0);
    println!(
        "wrote {} ({} bytes, {} kernels) for a MoE layer of {} tokens, {} experts top-{} on {}",
        out.display(),
        thousands(size),
        lt.trace.kernels.len(),
        layer.tokens,
        layer.experts,
        layer.topk,
        arch.name
    );
    let (busiest, n) =
        lt.counts.iter().enumerate().max_by_key(|(e, n)| (**n, std::cmp::Reverse(*e))).unwrap_or((0, &0));
    let hit = lt.counts.iter().filter(|&&c| c > 0).count();
    println!(
        "routing {}: {hit} experts hit, busiest expert {busiest} with {n} tokens (mean {:.1}); expert weights hit {} bytes",
        layer.routing,
        (layer.tokens * layer.topk) as f64 / layer.experts as f64,
        thousands(lt.expert_weight_bytes_hit)
    );
    for (k, (id, role)) in lt.trace.kernels.iter().zip(&lt.roles) {
        let i = &k.info;
        println!("kernel {id} {role} `{}`: grid {} stream {} deps {:?}", i.name, i.grid, i.stream, i.deps);
    }
    Ok(())
}

//! `gpusim trace attention`: write the trace of an attention recipe for a problem.

use std::path::PathBuf;

use clap::Args;
use gpusim_workloads::attention::{self, AttnSpec, PROBLEM, Pass, Recipe};
use gpusim_workloads::gemm::{Dtype, tensor_flops};
use gpusim_workloads::params::{apply, split_key_values};

use crate::error::{CliError, CliResult};
use crate::print::thousands;

#[derive(Args)]
#[command(after_help = "Recipes: `fa2` (FlashAttention-2, sm80: mma.sync, cp.async, ldmatrix; backward as its three \
kernels), `fa3` (FlashAttention-3, sm90a warp-specialised), `decode` (split-KV, paged KV cache), `mla-decode` \
(FlashMLA), `standard` (unfused PyTorch attention). Without --recipe: decode for few queries against a long cache, \
FA3 on compute capability 9.x, FA2 otherwise. Every flag is a parameter of `gpusim trace params attention`, which \
-p KEY=VALUE also sets.")]
pub struct AttentionArgs {
    /// Requests in the batch (or `-p batch=...`).
    #[arg(long)]
    pub batch: Option<u64>,
    /// Query heads.
    #[arg(long)]
    pub heads: Option<u64>,
    /// Key/value heads (GQA/MQA when fewer than --heads); default: --heads.
    #[arg(long)]
    pub kv_heads: Option<u64>,
    /// Query length.
    #[arg(long)]
    pub seqlen: Option<u64>,
    /// Key/value length; default: --seqlen.
    #[arg(long)]
    pub seqlen_kv: Option<u64>,
    /// Head dim of Q and K.
    #[arg(long)]
    pub headdim: Option<u64>,
    /// Head dim of V and O; default: --headdim.
    #[arg(long)]
    pub headdim_v: Option<u64>,
    /// Causal mask (bottom-right aligned).
    #[arg(long)]
    pub causal: bool,
    /// fwd, bwd or fwdbwd; default fwd.
    #[arg(long)]
    pub pass: Option<String>,
    /// bf16, fp16 or fp8; default bf16.
    #[arg(long)]
    pub dtype: Option<String>,
    /// fa2, fa3, decode, mla-decode or standard; default: the chip's and the shape's.
    #[arg(long)]
    pub recipe: Option<String>,
    /// Tokens per page of a paged KV cache (decode recipes).
    #[arg(long)]
    pub page_size: Option<u64>,
    /// Per-request lengths: a comma-separated list, or a file of numbers (commas, spaces or lines).
    #[arg(long)]
    pub varlen: Option<String>,
    /// Chip preset or TOML file.
    #[arg(long, default_value = "h100-sxm5-80gb")]
    pub arch: String,
    /// A problem parameter `KEY=VALUE` (repeatable; `gpusim trace params attention`).
    #[arg(short = 'p', long = "param", value_name = "KEY=VALUE")]
    pub params: Vec<String>,
    /// Output trace: gpusim text, or binary when the name ends in `.gtb`.
    #[arg(short = 'o', long)]
    pub output: PathBuf,
}

/// `--varlen`: a list, or the name of a file holding one.
fn varlen_list(arg: &str) -> Result<String, CliError> {
    let path = std::path::Path::new(arg);
    if !path.exists() {
        return Ok(arg.to_string());
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::input(format!("--varlen {}: cannot read: {e}", path.display())))?;
    let mut items = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("");
        for item in line.split(|c: char| c == ',' || c.is_whitespace()).filter(|s| !s.is_empty()) {
            if item.parse::<u64>().is_err() {
                return Err(CliError::input(format!(
                    "--varlen {}:{}: `{item}` is not a length (a non-negative integer)",
                    path.display(),
                    n + 1
                )));
            }
            items.push(item.to_string());
        }
    }
    Ok(items.join(","))
}

pub fn attention(args: AttentionArgs) -> CliResult {
    // The flags are the problem parameters of the registry's table, given another way.
    let mut given = Vec::new();
    for (key, v) in [
        ("batch", args.batch),
        ("heads", args.heads),
        ("kv_heads", args.kv_heads),
        ("seqlen", args.seqlen),
        ("seqlen_kv", args.seqlen_kv),
        ("headdim", args.headdim),
        ("headdim_v", args.headdim_v),
        ("page_size", args.page_size),
    ] {
        if let Some(v) = v {
            given.push((key.to_string(), v.to_string()));
        }
    }
    if args.causal {
        given.push(("causal".into(), "true".into()));
    }
    if let Some(p) = &args.pass {
        let pass =
            Pass::parse(p).ok_or_else(|| CliError::input(format!("--pass `{p}`: expected fwd, bwd or fwdbwd")))?;
        given.push(("pass".into(), pass.name().into()));
    }
    if let Some(d) = &args.dtype {
        let dtype = Dtype::parse(d)
            .filter(|d| *d != Dtype::Tf32)
            .ok_or_else(|| CliError::input(format!("--dtype `{d}`: expected bf16, fp16 or fp8")))?;
        given.push(("dtype".into(), dtype.name().into()));
    }
    if let Some(name) = &args.recipe {
        let r = Recipe::parse(name).ok_or_else(|| {
            CliError::input(format!("--recipe `{name}`: expected fa2, fa3, decode, mla-decode or standard"))
        })?;
        given.push(("recipe".into(), r.name().into()));
    }
    if let Some(v) = &args.varlen {
        given.push(("varlen".into(), varlen_list(v)?));
    }
    given.extend(split_key_values(&args.params).map_err(|e| CliError::input(format!("--param {e}")))?);
    let mut spec = AttnSpec::default();
    apply("attention", PROBLEM, &given, &mut spec).map_err(|e| CliError::input(e.0))?;
    let arch = crate::run::load_arch(&args.arch, None)?;
    let a = attention::generate(&spec, &arch).map_err(|e| CliError::input(e.0))?;

    let out = &args.output;
    crate::ubench_cmd::write_trace(&a.trace, out)?;
    let size = std::fs::metadata(out).map(|m| m.len()).unwrap_or(0);
    println!("wrote {} ({} bytes, {} kernel(s))", out.display(), thousands(size), a.trace.kernels.len());
    println!("{}", a.description);
    let mut insts = 0u64;
    for k in &a.trace.kernels {
        let i = &k.info;
        let n = warp_instructions(k);
        insts += n;
        println!(
            "kernel {} `{}`: grid {} block {}, {} regs, {} B smem, {} warp instructions",
            i.id,
            i.name,
            i.grid,
            i.block,
            i.regs_per_thread,
            i.smem_bytes,
            thousands(n)
        );
    }
    println!("warp instructions: {}", thousands(insts));
    println!(
        "FLOPs: {} (FlashAttention's convention, {}); tensor-core FLOPs executed: {}",
        thousands(a.flops),
        spec.pass.name(),
        thousands(tensor_flops(&a.trace))
    );
    if matches!(a.recipe, Recipe::Decode | Recipe::MlaDecode) {
        println!("KV bytes read: {}", thousands(a.kv_bytes));
    }
    Ok(())
}

/// Dynamic warp instructions of a kernel (each CTA's trip counts).
fn warp_instructions(k: &gpusim_isa::KernelTrace) -> u64 {
    let mut seen = std::collections::BTreeMap::new();
    let mut total = 0u64;
    for linear in 0..k.info.num_ctas() {
        let coord = k.info.grid.unlinear(linear).as_array();
        let layout = k.layout.overrides.get(&linear).unwrap_or(&k.layout.default);
        for (w, &p) in layout.iter().enumerate() {
            let prog = &k.programs[p as usize];
            let params = prog.eval_params(coord, w as u32);
            total += *seen.entry((p, params)).or_insert_with(|| prog.dynamic_len_for(coord, w as u32));
        }
    }
    total
}

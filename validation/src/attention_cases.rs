//! Attention cases of the reference data as simulations: the case's problem as an
//! [`AttnSpec`] (implementation → recipe, direction → pass, shape, causal), the workloads crate's
//! trace of that recipe (`attention::generate`), simulated whole, and the throughput by
//! FlashAttention's benchmark FLOP convention ([`AttnSpec::flops`]) over the simulated time, the
//! count the published figures use.
//!
//! Batch and heads: the FA2 cases state them; the FA3 cases do not (their figure shows only head
//! dim and length), and take the benchmark setup both papers describe: 16k tokens per batch
//! (`batch = 16384 / seqlen`) and hidden 2048 (`heads = 2048 / headdim`).

use std::time::Instant;

use gpusim_configs::Arch;
use gpusim_isa::MemTraceSource;
use gpusim_sim_core::simulate;
use gpusim_workloads::attention::{self, AttnSpec, Pass, Recipe};
use gpusim_workloads::gemm::Dtype;

use crate::case::{Case, Metric};
use crate::hash::{hash_str, hash_trace};

/// Tokens per batch and hidden size of the FlashAttention benchmarks (FA2 README, FA3 paper §4.1).
const BENCH_TOKENS: u64 = 16384;
const BENCH_HIDDEN: u64 = 2048;

/// The recipe an implementation name means.
fn recipe_of(implementation: &str) -> Result<Recipe, String> {
    let l = implementation.to_ascii_lowercase();
    if l.contains("flashattention-2") || l.contains("flashattention2") || l.contains("flash-attention 2") {
        Ok(Recipe::Fa2)
    } else if l.contains("flashattention-3") || l.contains("flashattention3") {
        Ok(Recipe::Fa3)
    } else if l.contains("standard") || l.contains("pytorch") {
        Ok(Recipe::Standard)
    } else if l.contains("flashmla") {
        Ok(Recipe::MlaDecode)
    } else {
        Err(format!("impl `{implementation}`: no attention recipe (FlashAttention-2/-3, PyTorch standard, FlashMLA)"))
    }
}

/// The statistics group of a case: its kind, but an attention case by its implementation's
/// recipe (`attention-fa2`, `attention-fa3`, `attention-standard`, `attention-mla`), because
/// the families differ in what limits them and are gated apart.
pub fn family(case: &Case) -> String {
    if case.kind != crate::case::Kind::Attention {
        return case.kind.to_string();
    }
    let recipe = case.implementation.as_deref().map(recipe_of);
    match recipe {
        Some(Ok(Recipe::Fa2)) => "attention-fa2",
        Some(Ok(Recipe::Fa3)) => "attention-fa3",
        Some(Ok(Recipe::Standard)) => "attention-standard",
        Some(Ok(Recipe::MlaDecode)) => "attention-mla",
        _ => "attention",
    }
    .into()
}

/// The problem an attention case describes, or why it has none.
pub fn attention_spec(case: &Case) -> Result<AttnSpec, String> {
    if case.metric != Metric::Tflops {
        return Err(format!("metric `{}`: attention cases are compared in tflops", case.metric));
    }
    let recipe = recipe_of(case.implementation.as_deref().ok_or("the case names no impl")?)?;
    let pass = match case.direction.as_deref() {
        None => Pass::Fwd,
        Some(d) => Pass::parse(d).ok_or_else(|| format!("direction `{d}`: expected fwd, bwd or fwd+bwd"))?,
    };
    let (Some(seqlen), Some(headdim)) = (case.seqlen, case.headdim) else {
        return Err("the case does not state seqlen and headdim".into());
    };
    if seqlen == 0 || headdim == 0 {
        return Err(format!("empty problem: seqlen {seqlen}, headdim {headdim}"));
    }
    let batch = case.batch.unwrap_or_else(|| (BENCH_TOKENS / seqlen).max(1));
    let heads = case.heads.unwrap_or_else(|| (BENCH_HIDDEN / headdim).max(1));
    let dtype = match case.dtype.as_deref().map(|s| s.to_ascii_lowercase()) {
        Some(s) if s.starts_with("bf16") => Dtype::Bf16,
        Some(s) if s.starts_with("fp8") || s.starts_with("e4m3") => Dtype::Fp8,
        // "fp16", "fp16/bf16": the same kernels and rates.
        _ => Dtype::Fp16,
    };
    let spec = AttnSpec {
        batch,
        heads,
        seqlen,
        headdim,
        causal: case.causal.unwrap_or(false),
        pass,
        dtype,
        recipe: Some(recipe),
        ..AttnSpec::default()
    };
    spec.validate().map_err(|e| e.0)?;
    Ok(spec)
}

/// One simulated attention problem.
#[derive(Clone, Debug)]
pub struct AttnRun {
    /// Convention FLOPs / time, TFLOP/s.
    pub tflops: f64,
    pub time_us: f64,
    pub clock_mhz: f64,
    pub warp_instructions: u64,
    pub kernels: usize,
    pub description: String,
    pub recipe_hash: String,
    pub trace_hash: String,
    pub wall_s: f64,
}

/// Generates `spec`'s trace on `arch` and simulates it whole.
pub fn run_attention(arch: &Arch, spec: &AttnSpec) -> Result<AttnRun, String> {
    let t0 = Instant::now();
    let a = attention::generate(spec, arch).map_err(|e| format!("generate: {e}"))?;
    let trace_hash = hash_trace(&a.trace)?;
    let kernels = a.trace.kernels.len();
    let mut src = MemTraceSource::new(a.trace);
    let report = simulate(arch, &mut src, &crate::sim_options::options()).map_err(|e| format!("simulate: {e}"))?;
    if report.time_us.is_nan() || report.time_us <= 0.0 {
        return Err(format!("simulated time {} µs", report.time_us));
    }
    Ok(AttnRun {
        tflops: a.flops as f64 / (report.time_us * 1e-6) / 1e12,
        time_us: report.time_us,
        clock_mhz: report.total_cycles as f64 / report.time_us,
        warp_instructions: report.warp_instructions,
        kernels,
        recipe_hash: hash_str(&format!("{spec:?} {}", a.recipe)),
        description: a.description,
        trace_hash,
        wall_s: t0.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::{Kind, load_default};

    #[test]
    fn every_reference_attention_case_has_a_problem() {
        let cases = load_default().unwrap();
        let attn: Vec<&Case> = cases.iter().filter(|c| c.kind == Kind::Attention).collect();
        assert_eq!(attn.len(), 51);
        let mut by_recipe = std::collections::BTreeMap::new();
        for c in &attn {
            let s = attention_spec(c).unwrap_or_else(|e| panic!("{}: {e}", c.id));
            *by_recipe.entry(s.recipe.unwrap().name()).or_insert(0) += 1;
            // Every case is 16k tokens at hidden 2048.
            assert_eq!(s.batch * s.seqlen, BENCH_TOKENS, "{}", c.id);
            assert_eq!(s.heads * s.headdim, BENCH_HIDDEN, "{}", c.id);
        }
        assert_eq!(by_recipe.get("fa2"), Some(&22));
        assert_eq!(by_recipe.get("fa3"), Some(&24));
        assert_eq!(by_recipe.get("standard"), Some(&5));
        let fa2 = attn.iter().find(|c| c.id == "attn-a100-flashattention2-fwd+bwd-causal-d128-s2048").unwrap();
        let s = attention_spec(fa2).unwrap();
        assert_eq!((s.batch, s.heads, s.pass, s.causal), (8, 16, Pass::FwdBwd, true));
        // Per-CTA trip counts need the text format's version 2 to hash.
        let arch = gpusim_configs::load_preset("a100-sxm4-80gb").unwrap();
        let small = AttnSpec { batch: 1, heads: 1, seqlen: 256, ..s };
        let t = attention::generate(&small, &arch).unwrap().trace;
        assert_eq!(hash_trace(&t).unwrap().len(), 16);
    }
}

//! MoE cases of the reference data as simulations: DeepGEMM's M-grouped fp8 GEMM (contiguous or
//! masked layout) with `experts` groups of `tokens_per_expert` rows, the workloads crate's grouped
//! recipe with DeepGEMM's block selection (`gemm::grouped`), and the simulated throughput in
//! DeepGEMM's FLOP count (`2·M·N·K`, contiguous M with its padding, masked M the valid rows).

use std::time::Instant;

use gpusim_configs::Arch;
use gpusim_isa::MemTraceSource;
use gpusim_sim_core::simulate;
use gpusim_workloads::gemm::grouped::{GroupedProblem, Layout, generate_grouped, grouped_recipe};
use gpusim_workloads::gemm::{Dtype, Recipe};

use crate::case::{Case, Metric};
use crate::gemm_cases::{GemmDtype, parse_dtype};
use crate::hash::{hash_str, hash_trace};

/// The grouped GEMM a MoE case describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MoeShape {
    pub experts: u64,
    pub tokens_per_expert: u64,
    pub n: u64,
    pub k: u64,
    /// fp8 (block scaled, DeepGEMM) or bf16.
    pub fp8: bool,
    pub masked: bool,
}

impl MoeShape {
    pub fn problem(&self) -> GroupedProblem {
        GroupedProblem {
            m: vec![self.tokens_per_expert; self.experts as usize],
            n: self.n,
            k: self.k,
            dtype: if self.fp8 { Dtype::Fp8 } else { Dtype::Bf16 },
            block_scaled: self.fp8,
            layout: if self.masked { Layout::Masked } else { Layout::Contiguous },
            capacity: 0,
        }
    }

    /// DeepGEMM's FLOP count.
    pub fn flops(&self) -> f64 {
        self.problem().flops() as f64
    }

    pub fn describe(&self) -> String {
        format!(
            "{} experts × {} tokens, {}x{} {} {}",
            self.experts,
            self.tokens_per_expert,
            self.n,
            self.k,
            if self.fp8 { "fp8 block-scaled" } else { "bf16" },
            if self.masked { "masked" } else { "contiguous" }
        )
    }
}

/// The shape of a MoE case, or why it has none: the grouped-GEMM cases (`layout` naming grouped
/// contiguous or masked, `experts`, `tokens_per_expert`, `n`, `k`, metric tflops).
pub fn moe_shape(case: &Case) -> Result<MoeShape, String> {
    if case.metric != Metric::Tflops {
        return Err(format!("metric `{}`: grouped-GEMM MoE cases are compared in tflops", case.metric));
    }
    let layout = case.layout.as_deref().unwrap_or("").to_ascii_lowercase();
    let masked = layout.contains("masked");
    if !layout.contains("grouped") || !(masked || layout.contains("contiguous")) {
        return Err(format!("layout `{layout}`: only grouped GEMM cases (contiguous or masked) are simulated"));
    }
    let (Some(experts), Some(tokens), Some(n), Some(k)) = (case.experts, case.tokens_per_expert, case.n, case.k) else {
        return Err("the case does not state all of experts, tokens_per_expert, n, k".into());
    };
    if experts == 0 || tokens == 0 || n == 0 || k == 0 {
        return Err(format!("empty problem: {experts} experts × {tokens} tokens, {n}x{k}"));
    }
    let fp8 = match parse_dtype(case.dtype.as_deref().ok_or("the case states no dtype")?)? {
        GemmDtype::Fp8 => true,
        GemmDtype::Bf16 => false,
        d => return Err(format!("dtype {}: the grouped GEMM takes fp8 or bf16", d.as_str())),
    };
    Ok(MoeShape { experts, tokens_per_expert: tokens, n, k, fp8, masked })
}

/// One simulated grouped GEMM.
#[derive(Clone, Debug)]
pub struct MoeRun {
    /// DeepGEMM's FLOPs over the simulated time, TFLOP/s.
    pub tflops: f64,
    pub time_us: f64,
    /// Average SM clock of the run (cycles over time).
    pub clock_mhz: f64,
    pub warp_instructions: u64,
    pub recipe: String,
    pub recipe_hash: String,
    pub trace_hash: String,
    pub wall_s: f64,
}

/// Generates the grouped GEMM of `shape` with DeepGEMM's selection for `arch` and simulates it.
pub fn run_moe(arch: &Arch, shape: &MoeShape) -> Result<MoeRun, String> {
    let t0 = Instant::now();
    let p = shape.problem();
    let r = grouped_recipe(arch, &p);
    let recipe = Recipe::Hopper(r).to_string();
    let trace = generate_grouped(arch, &p, &r).map_err(|e| format!("generate: {e}"))?;
    let trace_hash = hash_trace(&trace)?;
    let mut src = MemTraceSource::new(trace);
    let report = simulate(arch, &mut src, &crate::sim_options::options()).map_err(|e| format!("simulate: {e}"))?;
    if report.time_us.is_nan() || report.time_us <= 0.0 {
        return Err(format!("simulated time {} µs", report.time_us));
    }
    Ok(MoeRun {
        tflops: shape.flops() / (report.time_us * 1e-6) / 1e12,
        time_us: report.time_us,
        clock_mhz: report.total_cycles as f64 / report.time_us,
        warp_instructions: report.warp_instructions,
        recipe_hash: hash_str(&recipe),
        recipe,
        trace_hash,
        wall_s: t0.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::Kind;
    use crate::reference::load_default;

    #[test]
    fn the_reference_moe_cases_have_shapes() {
        let cases = load_default().unwrap();
        let moe: Vec<&Case> = cases.iter().filter(|c| c.kind == Kind::Moe).collect();
        assert!(moe.len() >= 4);
        for c in moe {
            let s = moe_shape(c).unwrap_or_else(|e| panic!("{}: {e}", c.id));
            assert!(s.fp8 && !s.masked, "{}", c.id);
            // The README's rows: 4 × 8192 or 8 × 4096 tokens.
            assert_eq!(s.experts * s.tokens_per_expert, 32768, "{}", c.id);
        }
    }
}

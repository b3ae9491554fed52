//! GEMM cases of the reference data as simulations: the case's shape and data type, the
//! workloads crate's default recipe for the chip (`gemm::default_recipe`), its trace
//! (`gemm::generate`), and the simulated throughput `2·M·N·K·batch / simulated time`, the FLOP
//! count the reference data uses.

use std::time::Instant;

use gpusim_configs::Arch;
use gpusim_isa::MemTraceSource;
use gpusim_sim_core::simulate;
use gpusim_workloads::gemm::{self, Dtype, GemmProblem, Twin};

use crate::case::{Case, Metric};
use crate::hash::{hash_str, hash_trace};

/// Input data type of a GEMM case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GemmDtype {
    Bf16,
    Fp16,
    Tf32,
    Fp8,
}

impl GemmDtype {
    pub fn as_str(self) -> &'static str {
        match self {
            GemmDtype::Bf16 => "bf16",
            GemmDtype::Fp16 => "fp16",
            GemmDtype::Tf32 => "tf32",
            GemmDtype::Fp8 => "fp8",
        }
    }

    fn to_workloads(self) -> Dtype {
        match self {
            GemmDtype::Bf16 => Dtype::Bf16,
            GemmDtype::Fp16 => Dtype::Fp16,
            GemmDtype::Tf32 => Dtype::Tf32,
            GemmDtype::Fp8 => Dtype::Fp8,
        }
    }
}

/// The problem a GEMM case describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmShape {
    pub m: u64,
    pub n: u64,
    pub k: u64,
    pub batch: u64,
    pub dtype: GemmDtype,
    /// DeepGEMM-style fp8 with 1×128 / 128×128 block scaling.
    pub block_scaled: bool,
    /// A CUDA twin's fixed design (a `gemm_twin` case); `None`: the default recipe, what a tuned
    /// library would pick.
    pub twin: Option<Twin>,
}

impl GemmShape {
    /// `2·M·N·K·batch`.
    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64 * self.batch as f64
    }

    /// `MxNxK bf16`, with `, batch B` and `, block-scaled` where they apply.
    pub fn describe(&self) -> String {
        let mut s = format!("{}x{}x{} {}", self.m, self.n, self.k, self.dtype.as_str());
        if self.batch != 1 {
            s += &format!(", batch {}", self.batch);
        }
        if self.block_scaled {
            s += ", block-scaled";
        }
        if let Some(t) = self.twin {
            s += &format!(", twin {}", t.short());
        }
        s
    }
}

/// The input type of a `dtype` string as the reference data writes it: its first word
/// ("bf16 x bf16 -> bf16", "bf16 in, fp32 accumulate", "fp16", "fp8 e4m3 ...", "fp16/bf16").
pub fn parse_dtype(s: &str) -> Result<GemmDtype, String> {
    let first = s
        .split(|c: char| c.is_whitespace() || c == ',' || c == '/' || c == '(')
        .find(|t| !t.is_empty())
        .unwrap_or("")
        .to_ascii_lowercase();
    Ok(match first.as_str() {
        "bf16" | "bfloat16" => GemmDtype::Bf16,
        "fp16" | "f16" | "half" | "float16" => GemmDtype::Fp16,
        "tf32" => GemmDtype::Tf32,
        f if f.starts_with("fp8") || f.starts_with("e4m3") || f.starts_with("e5m2") => GemmDtype::Fp8,
        _ => return Err(format!("dtype `{s}`: no GEMM data type (bf16, fp16, tf32, fp8) is named first")),
    })
}

/// Whether a case names DeepGEMM-style block scaling (its `impl`, `dtype` or `source`).
fn names_block_scaling(case: &Case) -> bool {
    let says = |s: &str| {
        let l = s.to_ascii_lowercase();
        l.contains("deepgemm")
            || l.contains("block-scaled")
            || l.contains("block scaled")
            || l.contains("block scaling")
    };
    case.implementation.as_deref().is_some_and(says) || case.dtype.as_deref().is_some_and(says) || says(&case.source)
}

/// The shape of a GEMM case, or why it has none.
pub fn gemm_shape(case: &Case) -> Result<GemmShape, String> {
    if case.metric != Metric::Tflops {
        return Err(format!("metric `{}`: GEMM cases are compared in tflops", case.metric));
    }
    let (Some(m), Some(n), Some(k)) = (case.m, case.n, case.k) else {
        return Err("the case does not state all of m, n, k".into());
    };
    if m == 0 || n == 0 || k == 0 || case.batch == Some(0) {
        return Err(format!("empty problem {m}x{n}x{k}, batch {:?}", case.batch));
    }
    let dtype = parse_dtype(case.dtype.as_deref().ok_or("the case states no dtype")?)?;
    let block_scaled = names_block_scaling(case);
    if block_scaled && dtype != GemmDtype::Fp8 {
        return Err(format!("block scaling is an fp8 recipe; the case's dtype is {}", dtype.as_str()));
    }
    Ok(GemmShape { m, n, k, batch: case.batch.unwrap_or(1), dtype, block_scaled, twin: None })
}

/// Kind of the cases `gpusim measure` writes for the CUDA twins.
pub const TWIN_KIND: &str = "gemm_twin";

/// The shape of a `gemm_twin` case and the twin its id names (`gemm-twin-mma-sm80-MxNxK`).
pub fn twin_shape(case: &Case) -> Result<GemmShape, String> {
    let twin = Twin::from_case_id(&case.id).ok_or_else(|| {
        let known: Vec<String> = Twin::ALL.iter().map(|t| format!("gemm-twin-{}-MxNxK", t.short())).collect();
        format!("a {TWIN_KIND} case id names its twin ({}); `{}` does not", known.join(" or "), case.id)
    })?;
    Ok(GemmShape { twin: Some(twin), ..gemm_shape(case)? })
}

/// One simulated GEMM.
#[derive(Clone, Debug)]
pub struct GemmRun {
    /// `2·M·N·K·batch / time`, in TFLOP/s.
    pub tflops: f64,
    /// Simulated time, all kernels (first start to last end), µs.
    pub time_us: f64,
    /// The SM clock the simulated cycles ran at on average (total cycles over time): below the
    /// configured clock when the chip's clock drops under tensor load (`clocks.sm_tensor_load`).
    pub clock_mhz: f64,
    pub warp_instructions: u64,
    pub kernels: usize,
    /// The recipe (its `Display` form: style and every parameter).
    pub recipe: String,
    pub recipe_hash: String,
    pub trace_hash: String,
    /// Wall time of generation and simulation, s.
    pub wall_s: f64,
}

/// Generates the trace of `shape`'s recipe (its twin's, else the default one for `arch`) and
/// simulates it.
pub fn run_gemm(arch: &Arch, shape: &GemmShape) -> Result<GemmRun, String> {
    let t0 = Instant::now();
    let problem = GemmProblem {
        m: shape.m,
        n: shape.n,
        k: shape.k,
        batch: shape.batch,
        dtype: shape.dtype.to_workloads(),
        block_scaled: shape.block_scaled,
    };
    let recipe = match shape.twin {
        Some(t) if !t.runs_on(arch.compute_capability) => {
            return Err(format!(
                "the {} twin does not run on compute capability {}",
                t.short(),
                arch.compute_capability
            ));
        }
        Some(t) => t.recipe(),
        None => gemm::default_recipe(arch, &problem),
    };
    let recipe_text = recipe.to_string();
    let trace = gemm::generate(arch, &problem, &recipe).map_err(|e| format!("generate: {e}"))?;
    let trace_hash = hash_trace(&trace)?;
    let kernels = trace.kernels.len();
    let mut src = MemTraceSource::new(trace);
    let report = simulate(arch, &mut src, &crate::sim_options::options()).map_err(|e| format!("simulate: {e}"))?;
    if report.time_us.is_nan() || report.time_us <= 0.0 {
        return Err(format!("simulated time {} µs", report.time_us));
    }
    Ok(GemmRun {
        tflops: shape.flops() / (report.time_us * 1e-6) / 1e12,
        time_us: report.time_us,
        clock_mhz: report.total_cycles as f64 / report.time_us,
        warp_instructions: report.warp_instructions,
        kernels,
        recipe_hash: hash_str(&recipe_text),
        recipe: recipe_text,
        trace_hash,
        wall_s: t0.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::load_default;

    #[test]
    fn dtypes_of_the_reference_data_parse() {
        assert_eq!(parse_dtype("bf16 x bf16 -> bf16"), Ok(GemmDtype::Bf16));
        assert_eq!(parse_dtype("bf16 in, fp32 accumulate, bf16 out"), Ok(GemmDtype::Bf16));
        assert_eq!(parse_dtype("fp16"), Ok(GemmDtype::Fp16));
        assert_eq!(parse_dtype("fp16/bf16"), Ok(GemmDtype::Fp16));
        assert_eq!(parse_dtype("FP8 e4m3, block-scaled"), Ok(GemmDtype::Fp8));
        assert_eq!(parse_dtype("tf32"), Ok(GemmDtype::Tf32));
        assert!(parse_dtype("int4").is_err());
        for c in load_default().unwrap().iter().filter(|c| c.kind == crate::reference::Kind::Gemm) {
            let s = gemm_shape(c).unwrap_or_else(|e| panic!("{}: {e}", c.id));
            assert_eq!(s.dtype, GemmDtype::Bf16, "{}", c.id);
            assert!(!s.block_scaled);
            assert_eq!(s.batch, c.batch.unwrap_or(1));
        }
    }

    #[test]
    fn a_small_gemm_simulates_deterministically() {
        let arch = gpusim_configs::load_preset("h100-sxm5-80gb").unwrap();
        let shape =
            GemmShape { m: 1024, n: 1024, k: 1024, batch: 1, dtype: GemmDtype::Bf16, block_scaled: false, twin: None };
        let a = run_gemm(&arch, &shape).unwrap();
        assert!((a.tflops - shape.flops() / (a.time_us * 1e-6) / 1e12).abs() < 1e-9 * a.tflops);
        assert!(a.tflops > 10.0 && a.recipe.starts_with("hopper"), "{a:?}");
        let b = run_gemm(&arch, &shape).unwrap();
        assert_eq!((a.tflops, &a.trace_hash, &a.recipe_hash), (b.tflops, &b.trace_hash, &b.recipe_hash));
        let batched = GemmShape { batch: 2, ..shape };
        assert_eq!(batched.flops(), 2.0 * shape.flops());
        assert_ne!(run_gemm(&arch, &batched).unwrap().trace_hash, a.trace_hash);
    }
}

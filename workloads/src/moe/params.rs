//! The parameter table of the MoE layer ([`crate::params!`]): `gpusim trace moe`'s flags are
//! these parameters given another way. The routing (`uniform`, `zipf:S`, counts or a file) is not
//! a scalar kind of the table: the CLI parses it with [`super::Routing::parse`].

use crate::gemm::Dtype;
use crate::gemm::grouped::Layout;
use crate::gemm::grouped_params::LAYOUTS;
use crate::params;
use crate::params::{Field, Param, Value};

use super::layer::{MoeLayer, MoeRecipe};
use super::routing::Routing;

const DTYPES: &[&str] = &["fp8", "bf16"];
const RECIPES: &[&str] = &["fused", "deepgemm"];

impl Default for MoeLayer {
    /// DeepSeek-V3's routed experts at 4096 tokens.
    fn default() -> Self {
        MoeLayer {
            tokens: 4096,
            experts: 256,
            topk: 8,
            hidden: 7168,
            intermediate: 2048,
            shared_experts: 0,
            recipe: MoeRecipe::DeepGemm,
            layout: Layout::Contiguous,
            routing: Routing::Uniform,
            seed: 0,
            dtype: Dtype::Fp8,
            block_m: 0,
            block_n: 0,
            block_k: 0,
            group_size_m: 0,
            num_warps: 0,
            num_stages: 0,
        }
    }
}

impl Field for MoeRecipe {
    fn get(&self) -> Value {
        Value::Choice(match self {
            MoeRecipe::Fused => "fused",
            MoeRecipe::DeepGemm => "deepgemm",
        })
    }
    fn set(&mut self, v: Value) {
        if let Value::Choice(s) = v {
            *self = MoeRecipe::parse(s).unwrap_or(*self);
        }
    }
}

pub const MOE: &[Param<MoeLayer>] = params!(MoeLayer {
    tokens: Int [1, 1 << 20] "tokens in the batch",
    experts: Int [1, 4096] "routed experts",
    topk: Int [1, 4096] "experts each token is routed to (distinct)",
    hidden: Int [1, 1 << 16] "hidden size (K of gate/up, N of down)",
    intermediate: Int [1, 1 << 16] "expert intermediate size (gate/up N = 2·intermediate)",
    shared_experts: Int [0, 64] "shared experts, run on a second stream",
    recipe: Choice(RECIPES) "expert kernels: fused (Triton fused_moe) or deepgemm (grouped GEMMs)",
    layout: Choice(LAYOUTS) "deepgemm: contiguous or masked grouped GEMMs",
    seed: Int [0, u64::MAX] "routing seed",
    dtype: Choice(DTYPES) "fp8 (block scaled / w8a8) or bf16",
    block_m: Int [0, 256] "fused: Triton BLOCK_SIZE_M, rows per token block (0: vLLM's default)",
    block_n: Int [0, 256] "fused: Triton BLOCK_SIZE_N (0: vLLM's default)",
    block_k: Int [0, 512] "fused: Triton BLOCK_SIZE_K (0: vLLM's default)",
    group_size_m: Int [0, 1024] "fused: Triton GROUP_SIZE_M, m-blocks per launch-order swizzle group (0: vLLM's default)",
    num_warps: Int [0, 16] "fused: Triton num_warps (0: vLLM's default)",
    num_stages: Int [0, 8] "fused: Triton num_stages, cp.async pipeline depth (0: vLLM's default)",
});

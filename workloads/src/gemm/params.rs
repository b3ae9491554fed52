//! The parameter tables of the GEMM generator ([`crate::params!`]): the problem, and the fields
//! of each recipe (overrides of the tuned recipe; they are checked against the problem and the
//! chip when the trace is generated).

use crate::params;
use crate::params::{Field, Param, Value};

use super::{AmpereRecipe, Dtype, Epilogue, HopperRecipe, Style};

const U32: u64 = u32::MAX as u64;

/// The problem and the recipe's style, as `gpusim trace gemm -p` sets them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmSpec {
    pub m: u64,
    pub n: u64,
    pub k: u64,
    pub batch: u64,
    pub dtype: Dtype,
    pub block_scaled: bool,
    /// The recipe's style; `None`: the chip's (hopper from compute capability 9.0).
    pub recipe: Option<Style>,
}

impl Default for GemmSpec {
    fn default() -> Self {
        GemmSpec { m: 4096, n: 4096, k: 4096, batch: 1, dtype: Dtype::Bf16, block_scaled: false, recipe: None }
    }
}

pub(crate) const DTYPES: &[&str] = &["bf16", "fp16", "tf32", "fp8"];
pub(crate) const EPILOGUES: &[&str] = &["tma-store", "shared-store", "direct"];
pub(crate) const STYLES: &[&str] = &["auto", "ampere", "hopper"];

impl Field for Dtype {
    fn get(&self) -> Value {
        Value::Choice(self.name())
    }
    fn set(&mut self, v: Value) {
        if let Value::Choice(s) = v {
            *self = Dtype::parse(s).unwrap_or(*self);
        }
    }
}

impl Field for Epilogue {
    fn get(&self) -> Value {
        Value::Choice(self.name())
    }
    fn set(&mut self, v: Value) {
        if let Value::Choice(s) = v {
            *self = Epilogue::parse(s).unwrap_or(*self);
        }
    }
}

impl Field for Option<Style> {
    fn get(&self) -> Value {
        Value::Choice(match self {
            None => "auto",
            Some(Style::Ampere) => "ampere",
            Some(Style::Hopper) => "hopper",
        })
    }
    fn set(&mut self, v: Value) {
        if let Value::Choice(s) = v {
            *self = Style::parse(s);
        }
    }
}

pub const PROBLEM: &[Param<GemmSpec>] = params!(GemmSpec {
    m: Int [1, 1 << 22] "rows of A and C",
    n: Int [1, 1 << 22] "columns of B and C",
    k: Int [1, 1 << 22] "the reduction dimension",
    batch: Int [1, 1 << 16] "independent products (strided batched)",
    dtype: Choice(DTYPES) "input type (fp32 accumulation)",
    block_scaled: Bool "fp8 with DeepGEMM-style 1×128 / 128×128 block scaling",
    recipe: Choice(STYLES) "kernel design: ampere (multistage mma.sync), hopper (warp-specialised wgmma), auto",
});

pub const AMPERE: &[Param<AmpereRecipe>] = params!(AmpereRecipe {
    cta_m: Int [1, 4096] "CTA tile rows",
    cta_n: Int [1, 4096] "CTA tile columns",
    cta_k: Int [1, 4096] "K per stage (elements)",
    warp_m: Int [1, 4096] "warp tile rows",
    warp_n: Int [1, 4096] "warp tile columns",
    stages: Int [1, 64] "pipeline stages",
    split_k: Int [1, 32] "CTAs sharing a tile's K range",
    swizzle: Int [1, 1 << 16] "CTA rasterisation (a power of two; 1 = none)",
});

pub const HOPPER: &[Param<HopperRecipe>] = params!(HopperRecipe {
    cta_m: Int [1, 4096] "CTA tile rows",
    cta_n: Int [1, 4096] "CTA tile columns",
    cta_k: Int [1, 4096] "K per stage (elements)",
    stages: Int [1, 64] "pipeline stages",
    consumers: Int [1, 4] "consumer warpgroups (1 or 2)",
    cluster_m: Int [1, 16] "cluster extent along M",
    cluster_n: Int [1, 16] "cluster extent along N",
    multicast: Bool "TMA multicast within the cluster",
    persistent: Bool "persistent tile scheduler",
    raster_swizzle: Int [0, U32] "tiles along M a wave covers (0: chosen)",
    split_k: Int [1, 32] "CTAs sharing a tile's K range",
    epilogue: Choice(EPILOGUES) "how C is written: tma-store, shared-store or direct",
});

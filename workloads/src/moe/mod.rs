//! Mixture-of-experts layers: routing ([`routing`]), the layer as a graph of kernels
//! ([`layer`]) and its small streaming kernels (`crate::streaming`). The expert GEMMs are the grouped
//! GEMMs of [`crate::gemm::grouped`] (DeepGEMM) or Triton's fused_moe kernel ([`fused_moe`]).

pub mod fused_moe;
pub mod layer;
pub mod params;
pub mod routing;

pub use fused_moe::{FusedMoeGemm, TritonConfig, generate_fused_moe};
pub use layer::{LayerTrace, MoeLayer, MoeRecipe, generate_layer};
pub use routing::{Routing, expert_counts, parse_counts};

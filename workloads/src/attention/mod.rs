//! Attention trace generators ("recipes"): each a parameterised kernel design that emits the
//! SASS-level trace of that design for an [`AttnSpec`] (batch, heads, KV heads, lengths, head
//! dims, causal, pass, dtype, paging, varlen).
//!
//! - [`Recipe::Fa2`]: FlashAttention-2's sm80 kernels (forward; backward as its three kernels).
//! - [`Recipe::Fa3`]: FlashAttention-3's warp-specialised sm90a forward ([`fa3`]) and backward
//!   ([`fa3_bwd`]: preprocess, the TMA/wgmma dQ/dK/dV kernel with its bulk reduce-add of dQ,
//!   postprocess; under GQA two more postprocess kernels for dK and dV).
//! - [`Recipe::Decode`]: split-KV decode (flash-decoding) over a contiguous or paged KV cache,
//!   with its combine kernel.
//! - [`Recipe::MlaDecode`]: FlashMLA's dense MLA decode.
//! - [`Recipe::Standard`]: unfused "PyTorch standard attention" (GEMMs from [`crate::gemm`] and a
//!   softmax kernel).
//!
//! [`generate`] picks the recipe ([`AttnSpec::select_recipe`]: FA3 on 9.x, FA2 on 8.x, decode for
//! few queries over a long cache), builds the kernels of each pass and chains them in one stream
//! ([`chain`]): `--pass fwdbwd` is the forward kernels, then the backward ones.
//!
//! FLOPs follow FlashAttention's benchmark convention ([`AttnSpec::flops`]); a decode also reports
//! the KV bytes read ([`AttnSpec::kv_bytes`]).
//!
//! # Contract of a recipe's pass builder
//! `fn(&AttnSpec, &Arch) -> Result<Trace, WorkloadError>`: the spec is validated, the kernels
//! are numbered from 0 in launch order with stream 0, and `deps` name only kernels of the same
//! builder; errors name the field or the combination the recipe does not support. Tensors sit
//! where [`Tensors`] puts them, so every pass of a trace agrees on the addresses.

pub mod decode;
pub mod fa2;
pub mod fa2_bwd;
pub mod fa3;
pub mod fa3_bwd;
mod fa3_bwd_plan;
pub mod fa3_schedule;
mod fa3_steps;
pub mod mla;
mod sm80;
mod spec;
mod standard;
mod tensors;

use gpusim_configs::Arch;
use gpusim_isa::Trace;

pub use spec::{AttnSpec, MAX_SEQLEN, PROBLEM, Pass, Recipe};
pub use tensors::Tensors;

use crate::params::WorkloadError;

/// A recipe's kernels for one pass.
pub type PassFn = fn(&AttnSpec, &Arch) -> Result<Trace, WorkloadError>;

/// What [`generate`] built.
#[derive(Clone, Debug)]
pub struct Attention {
    pub trace: Trace,
    /// The recipe used (the one given, or the one selected).
    pub recipe: Recipe,
    /// FLOPs by the benchmark convention ([`AttnSpec::flops`]).
    pub flops: u64,
    /// KV-cache bytes read ([`AttnSpec::kv_bytes`]); for a decode's bandwidth.
    pub kv_bytes: u64,
    /// One line: problem, recipe and chip.
    pub description: String,
}

/// The trace of `spec` on `arch`: the recipe's kernels of each pass, in one stream.
pub fn generate(spec: &AttnSpec, arch: &Arch) -> Result<Attention, WorkloadError> {
    spec.validate()?;
    let recipe = spec.select_recipe(arch);
    let trace = build(recipe, spec, arch)?;
    Ok(Attention {
        description: format!("attention {spec} on {}: recipe {recipe}", arch.name),
        flops: spec.flops(),
        kv_bytes: spec.kv_bytes(recipe),
        recipe,
        trace,
    })
}

/// The kernels of `recipe` for `spec`'s passes.
fn build(recipe: Recipe, spec: &AttnSpec, arch: &Arch) -> Result<Trace, WorkloadError> {
    match recipe {
        Recipe::Fa2 => passes(spec, arch, fa2::forward, Some(fa2_bwd::backward)),
        Recipe::Standard => passes(spec, arch, standard::forward, Some(standard::backward)),
        Recipe::Fa3 => passes(spec, arch, fa3::fwd, Some(fa3_bwd::backward)),
        Recipe::Decode => passes(spec, arch, decode::fwd, None),
        Recipe::MlaDecode => passes(spec, arch, mla::fwd, None),
    }
}

/// The kernels of `spec.pass`: `fwd`'s, then `bwd`'s (the error names the recipe when it has no
/// backward).
pub fn passes(spec: &AttnSpec, arch: &Arch, fwd: PassFn, bwd: Option<PassFn>) -> Result<Trace, WorkloadError> {
    let mut parts = Vec::new();
    if spec.pass.has_fwd() {
        parts.push(fwd(spec, arch)?);
    }
    if spec.pass.has_bwd() {
        let Some(bwd) = bwd else {
            return Err(WorkloadError(format!(
                "pass = {}: this recipe has no backward; use pass = fwd",
                spec.pass.name()
            )));
        };
        parts.push(bwd(spec, arch)?);
    }
    Ok(chain(parts))
}

/// Concatenates traces into one: kernel ids renumbered in order, each part's `deps` shifted with
/// it. Every kernel keeps its stream, so a single-stream chain runs part after part.
pub fn chain(parts: Vec<Trace>) -> Trace {
    let mut kernels = Vec::new();
    for part in parts {
        let offset = kernels.len() as u32;
        for mut k in part.kernels {
            k.info.id += offset;
            for d in &mut k.info.deps {
                *d += offset;
            }
            kernels.push(k);
        }
    }
    Trace { kernels }
}

//! The MoE layer as a registry entry (`gpusim sweep` workloads, `trace params moe`): the layer's
//! parameters ([`MOE`]) plus `routing`, which is not a scalar of the table and is parsed by
//! [`Routing::parse`] (`uniform`, `zipf:S`, `list:N,...`; a file of counts only through
//! `gpusim trace moe --routing FILE`).

use gpusim_configs::Arch;

use super::{Generated, Generator, ParamGroup};
use crate::moe::params::MOE;
use crate::moe::{MoeLayer, Routing, generate_layer};
use crate::params::{WorkloadError, apply, describe};

pub(super) const MOE_LAYER: Generator = Generator {
    name: "moe",
    summary: "a whole MoE layer (router, top-k, permutation, expert GEMMs, combine) as one multi-kernel trace; \
              routing=uniform|zipf:S|list:N,... besides the parameters",
    params: || vec![ParamGroup { title: "layer", params: describe(MOE, Some(&MoeLayer::default())) }],
    build,
};

fn build(name: &str, given: &[(String, String)], arch: &Arch) -> Result<Generated, WorkloadError> {
    let mut layer = MoeLayer::default();
    let (routing, rest): (Vec<_>, Vec<_>) = given.iter().cloned().partition(|(k, _)| k == "routing");
    apply(name, MOE, &rest, &mut layer)?;
    if let Some((_, r)) = routing.last() {
        layer.routing = Routing::parse(r).map_err(|e| WorkloadError(format!("{name}: routing: {e}")))?;
    }
    let lt = generate_layer(arch, &layer).map_err(|e| WorkloadError(format!("{name}: {e}")))?;
    let description = format!(
        "MoE layer: {} tokens, {} experts top-{}, hidden {}, intermediate {}, {} routing, {} kernels",
        layer.tokens,
        layer.experts,
        layer.topk,
        layer.hidden,
        layer.intermediate,
        layer.routing,
        lt.trace.kernels.len()
    );
    Ok(Generated { trace: lt.trace, description, measure: None, timed_kernel: 0 })
}

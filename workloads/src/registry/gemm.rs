//! The GEMM recipes as a registry entry: problem parameters, then overrides of the tuned recipe.

use gpusim_configs::Arch;

use super::{Generated, Generator, ParamGroup};
use crate::gemm;
use crate::gemm::params::{AMPERE, GemmSpec, HOPPER, PROBLEM};
use crate::params::{WorkloadError, apply, describe};

pub(super) const GEMM: Generator = Generator {
    name: "gemm",
    summary: "a GEMM recipe (Ampere multistage or Hopper warp-specialised) for an M×N×K problem",
    params: || {
        vec![
            ParamGroup { title: "problem", params: describe(PROBLEM, Some(&GemmSpec::default())) },
            ParamGroup { title: "ampere recipe (overrides of the tuned recipe)", params: describe(AMPERE, None) },
            ParamGroup { title: "hopper recipe (overrides of the tuned recipe)", params: describe(HOPPER, None) },
        ]
    },
    build,
};

fn build(name: &str, given: &[(String, String)], arch: &Arch) -> Result<Generated, WorkloadError> {
    let (problem, recipe): (Vec<_>, Vec<_>) =
        given.iter().cloned().partition(|(k, _)| PROBLEM.iter().any(|p| p.name == k.trim()));
    let mut s = GemmSpec::default();
    apply(name, PROBLEM, &problem, &mut s)?;
    let (trace, p, r) = gemm::generate_spec(arch, &s, &recipe)?;
    let description = format!("GEMM {p} on {}: {r}", arch.name);
    Ok(Generated { trace, description, measure: None, timed_kernel: 0 })
}

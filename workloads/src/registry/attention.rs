//! The attention recipes as a registry entry: the problem's parameters ([`PROBLEM`]).

use gpusim_configs::Arch;

use super::{Generated, Generator, ParamGroup};
use crate::attention::{self, AttnSpec, PROBLEM};
use crate::params::{WorkloadError, apply, describe};

pub(super) const ATTENTION: Generator = Generator {
    name: "attention",
    summary: "an attention recipe (FlashAttention-2/-3, split-KV decode, MLA decode, unfused) for a batch of heads",
    params: || vec![ParamGroup { title: "problem", params: describe(PROBLEM, Some(&AttnSpec::default())) }],
    build,
};

fn build(name: &str, given: &[(String, String)], arch: &Arch) -> Result<Generated, WorkloadError> {
    let mut s = AttnSpec::default();
    apply(name, PROBLEM, given, &mut s)?;
    let a = attention::generate(&s, arch)?;
    Ok(Generated { trace: a.trace, description: a.description, measure: None, timed_kernel: 0 })
}

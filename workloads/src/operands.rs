//! What both trace assemblers (`ubench::asm`, `gemm::asm`) share: register operands and the
//! checked assembly of a kernel from its programs and CTA layout.

use std::collections::BTreeMap;
use std::sync::Arc;

use gpusim_isa::{CtaLayout, KernelInfo, KernelTrace, OpTable, Program, Reg, RegRange};

/// `Rn`.
pub(crate) const fn r(n: u8) -> RegRange {
    RegRange::one(Reg::r(n))
}

/// `Rn` .. `Rn+count-1` (a 64- or 128-bit operand, an accumulator block).
pub(crate) const fn rr(n: u8, count: u8) -> RegRange {
    RegRange::new(Reg::r(n), count)
}

/// `Pn`.
pub(crate) const fn p(n: u8) -> RegRange {
    RegRange::one(Reg::p(n))
}

/// `URn`.
pub(crate) const fn ur(n: u8) -> RegRange {
    RegRange::one(Reg::ur(n))
}

/// `URn` .. `URn+count-1`.
pub(crate) const fn urr(n: u8, count: u8) -> RegRange {
    RegRange::new(Reg::ur(n), count)
}

/// `SBn` (dependency-barrier slot).
pub(crate) const fn sb(n: u8) -> RegRange {
    RegRange::one(Reg::sb(n))
}

/// Assembles a kernel and checks it ([`KernelTrace::check`]).
pub(crate) fn assemble(
    info: KernelInfo,
    ops: OpTable,
    programs: Vec<Program>,
    default: Vec<u32>,
    overrides: BTreeMap<u64, Vec<u32>>,
) -> Result<KernelTrace, String> {
    let k = KernelTrace {
        info,
        ops,
        programs: programs.into_iter().map(Arc::new).collect(),
        layout: CtaLayout { default, overrides },
    };
    k.check().map_err(|e| format!("generated kernel `{}` is malformed: {e}", k.info.name))?;
    Ok(k)
}

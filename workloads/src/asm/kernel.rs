//! Kernels from programs: checked assembly, kernel information, one-kernel traces.

use std::collections::BTreeMap;
use std::sync::Arc;

use gpusim_isa::{CtaLayout, Dim3, KernelInfo, KernelTrace, OpTable, Program, Trace};

/// Assembles a kernel and checks it ([`KernelTrace::check`]).
pub fn assemble(
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

/// [`assemble`] for kernels whose parameters were checked before: a malformed kernel is a bug in
/// its generator.
pub fn kernel(
    info: KernelInfo,
    ops: OpTable,
    programs: Vec<Program>,
    default: Vec<u32>,
    overrides: BTreeMap<u64, Vec<u32>>,
) -> KernelTrace {
    assemble(info, ops, programs, default, overrides).unwrap_or_else(|e| panic!("{e}"))
}

/// A trace of one kernel whose CTAs all run `layout` (no overrides).
pub fn one_kernel(info: KernelInfo, ops: OpTable, programs: Vec<Program>, layout: Vec<u32>) -> Trace {
    Trace { kernels: vec![kernel(info, ops, programs, layout, BTreeMap::new())] }
}

/// Kernel information with the fields the generators set.
pub fn info(id: u32, name: &str, grid: Dim3, block: Dim3, regs: u32, smem: u32, sm: u32) -> KernelInfo {
    let mut i = KernelInfo::new(id, name, grid, block);
    i.regs_per_thread = regs;
    i.smem_bytes = smem;
    i.sm_version = sm;
    i
}

/// Rounds `x` up to a multiple of `unit` (`x` itself for a unit of 0).
pub fn round_up(x: u64, unit: u64) -> u64 {
    x.div_ceil(unit.max(1)) * unit.max(1)
}

//! What the attention recipe tests share: a generated trace, checked as every test needs it.

use gpusim_configs::Arch;
use gpusim_isa::Trace;
use gpusim_sim_core::occupancy;
use gpusim_workloads::attention::{self, AttnSpec};

/// The trace of `s` on `arch`, after checking that every kernel passes `KernelTrace::check`,
/// uses only known opcodes and fits an SM.
pub fn checked_trace(s: &AttnSpec, arch: &Arch) -> Trace {
    let t = attention::generate(s, arch).unwrap_or_else(|e| panic!("{s}: {e}")).trace;
    for k in &t.kernels {
        k.check().unwrap();
        let unknown: Vec<&str> = k.ops.iter().filter(|(_, d)| !d.known).map(|(_, d)| d.mnemonic.as_str()).collect();
        assert!(unknown.is_empty(), "{s}: unknown opcodes {unknown:?}");
        let o = occupancy(arch, &k.info).unwrap();
        assert!(o.ctas_per_sm >= 1, "{s}: {}: {o:?}", k.info.name);
    }
    t
}

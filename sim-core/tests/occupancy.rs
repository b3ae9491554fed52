//! Occupancy against the CUDA occupancy calculator (cuda_occupancy.h rules: registers per warp
//! rounded to 256 and allocated per sub-partition, shared memory rounded to 128 B plus 1 KiB
//! reserved per CTA). Expected values worked out by those rules for A100 (sm_80: 164 KiB shared
//! per SM) and H100 (sm_90: 228 KiB).

mod common;

use common::arch;
use gpusim_configs::Bytes;
use gpusim_isa::{Dim3, KernelInfo};
use gpusim_sim_core::{Limiter, occupancy};

fn a100() -> gpusim_configs::Arch {
    let mut a = arch(108);
    a.sm.shared_mem_per_sm = Bytes(164 * 1024);
    a.sm.shared_mem_per_cta = Bytes(163 * 1024);
    a
}

fn h100() -> gpusim_configs::Arch {
    arch(132)
}

fn kernel(threads: u32, regs: u32, smem: u32) -> KernelInfo {
    let mut k = KernelInfo::new(0, "k", Dim3::new(1000, 1, 1), Dim3::new(threads, 1, 1));
    k.regs_per_thread = regs;
    k.smem_bytes = smem;
    k
}

#[test]
fn matches_the_occupancy_calculator() {
    // (chip, threads, regs, smem bytes) → (CTAs per SM, limiter, occupancy %)
    let cases: &[(&str, u32, u32, u32, u32, Limiter, f64)] = &[
        ("a100", 256, 32, 0, 8, Limiter::Warps, 100.0),
        ("a100", 256, 64, 0, 4, Limiter::Registers, 50.0),
        ("a100", 128, 32, 0, 16, Limiter::Warps, 100.0),
        ("a100", 32, 16, 0, 32, Limiter::CtaSlots, 50.0),
        ("a100", 1024, 32, 0, 2, Limiter::Warps, 100.0),
        ("a100", 128, 32, 48 * 1024, 3, Limiter::SharedMemory, 18.75),
        ("a100", 96, 40, 0, 16, Limiter::Registers, 75.0),
        ("a100", 256, 255, 0, 1, Limiter::Registers, 12.5),
        ("h100", 384, 168, 0, 1, Limiter::Registers, 18.75),
        ("h100", 128, 32, 100 * 1024, 2, Limiter::SharedMemory, 12.5),
        ("h100", 128, 32, 48 * 1024, 4, Limiter::SharedMemory, 25.0),
    ];
    for &(chip, threads, regs, smem, ctas, limiter, pct) in cases {
        let a = if chip == "a100" { a100() } else { h100() };
        let o = occupancy(&a, &kernel(threads, regs, smem)).unwrap();
        let case = format!("{chip} {threads} threads {regs} regs {smem} B");
        assert_eq!(o.ctas_per_sm, ctas, "{case}");
        assert_eq!(o.limiter, limiter, "{case}");
        assert!((o.fraction(&a) * 100.0 - pct).abs() < 1e-9, "{case}: {}", o.fraction(&a) * 100.0);
    }
}

#[test]
fn impossible_kernels_are_rejected_with_a_reason() {
    let a = h100();
    assert!(occupancy(&a, &kernel(2048, 32, 0)).unwrap_err().contains("1024"));
    assert!(occupancy(&a, &kernel(256, 300, 0)).unwrap_err().contains("registers per thread"));
    assert!(occupancy(&a, &kernel(256, 32, 300 * 1024)).unwrap_err().contains("shared memory"));
    // 1024 threads × 255 registers cannot fit the 64K register file.
    assert!(occupancy(&a, &kernel(1024, 255, 0)).unwrap_err().contains("registers"));
}

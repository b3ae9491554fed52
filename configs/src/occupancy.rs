//! How many CTAs of a kernel fit on one SM at once, by the CUDA occupancy calculator's rules
//! (cuda_occupancy.h): warps, threads, CTA slots, registers allocated per warp in units of
//! `register_alloc_unit` and split over the sub-cores' register files, and shared memory
//! allocated per CTA in units of `shared_mem_alloc_unit` plus the per-CTA reservation.

use crate::Arch;
use gpusim_isa::KernelInfo;
use serde::Serialize;

/// The resource that bounds occupancy.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Limiter {
    Warps,
    Threads,
    CtaSlots,
    Registers,
    SharedMemory,
}

/// Theoretical occupancy of a kernel on a chip.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize)]
pub struct Occupancy {
    pub ctas_per_sm: u32,
    pub warps_per_cta: u32,
    /// Registers one warp holds, after allocation rounding.
    pub regs_per_warp: u32,
    /// Shared memory one CTA holds, after rounding and the per-CTA reservation.
    pub smem_per_cta: u64,
    pub limiter: Limiter,
}

impl Occupancy {
    /// Resident warps per SM over the SM's warp limit.
    pub fn fraction(&self, arch: &Arch) -> f64 {
        (self.ctas_per_sm * self.warps_per_cta) as f64 / arch.sm.max_warps as f64
    }
}

fn round_up(x: u64, unit: u64) -> u64 {
    if unit == 0 { x } else { x.div_ceil(unit) * unit }
}

/// Computes the occupancy, or says why not even one CTA fits.
pub fn occupancy(arch: &Arch, k: &KernelInfo) -> Result<Occupancy, String> {
    let sm = &arch.sm;
    let threads = k.threads_per_cta();
    if threads == 0 {
        return Err("the block has no threads".into());
    }
    if threads > 1024 {
        return Err(format!("{threads} threads per CTA exceed the limit of 1024"));
    }
    if k.regs_per_thread > sm.max_registers_per_thread {
        return Err(format!(
            "{} registers per thread exceed the limit of {}",
            k.regs_per_thread, sm.max_registers_per_thread
        ));
    }
    if k.smem_bytes as u64 > sm.shared_mem_per_cta.0 {
        return Err(format!(
            "{} bytes of shared memory per CTA exceed the limit of {}",
            k.smem_bytes, sm.shared_mem_per_cta
        ));
    }
    let cluster = k.cluster.count();
    if cluster > sm.max_cluster_size as u64 {
        return Err(format!("cluster of {cluster} CTAs exceeds the limit of {}", sm.max_cluster_size));
    }
    let warps = k.warps_per_cta();
    let by_warps = sm.max_warps / warps;
    let by_threads = sm.max_threads / threads;
    let by_ctas = sm.max_ctas;

    let regs_per_warp = round_up(k.regs_per_thread.max(1) as u64 * 32, sm.register_alloc_unit as u64) as u32;
    let sub = sm.sub_cores.max(1);
    let regs_per_sub = sm.registers / sub;
    let warps_per_sub = regs_per_sub / regs_per_warp;
    let by_regs = (warps_per_sub * sub) / warps;
    // The calculator's hardware check: a CTA's warps, rounded up to whole sub-core groups, must
    // fit the per-block register limit (the SM's register file).
    let regs_assumed = regs_per_warp as u64 * (warps.div_ceil(sub) * sub) as u64;
    if regs_assumed > sm.registers as u64 {
        return Err(format!(
            "{warps} warps × {regs_per_warp} registers per warp need {regs_assumed} registers, more than the {} a CTA may use",
            sm.registers
        ));
    }

    let smem_per_cta =
        round_up(k.smem_bytes as u64, sm.shared_mem_alloc_unit.0.max(1)) + sm.shared_mem_reserved_per_cta.0;
    let by_smem = (sm.shared_mem_per_sm.0 / smem_per_cta.max(1)).min(u32::MAX as u64) as u32;

    let candidates = [
        (by_warps, Limiter::Warps),
        (by_threads, Limiter::Threads),
        (by_ctas, Limiter::CtaSlots),
        (by_regs, Limiter::Registers),
        (by_smem, Limiter::SharedMemory),
    ];
    let (ctas, limiter) = candidates.iter().copied().min_by_key(|c| c.0).unwrap();
    if ctas == 0 {
        let why = match limiter {
            Limiter::Registers => {
                format!("{} registers per warp do not fit in a sub-core's {regs_per_sub}", regs_per_warp)
            }
            Limiter::SharedMemory => {
                format!("{smem_per_cta} bytes of shared memory do not fit in {}", sm.shared_mem_per_sm)
            }
            _ => format!("{warps} warps per CTA exceed the SM's {} warps", sm.max_warps),
        };
        return Err(format!("no CTA fits on an SM: {why}"));
    }
    Ok(Occupancy { ctas_per_sm: ctas, warps_per_cta: warps, regs_per_warp, smem_per_cta, limiter })
}

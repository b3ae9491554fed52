//! Register reallocation between the warps of a CTA (`setmaxnreg`, SASS `USETMAXREG`).
//!
//! A CTA is launched with `regs_per_thread` registers for every warp; occupancy is decided by
//! that and never changes. Warp-specialised kernels then move registers from producer to
//! consumer warpgroups: `USETMAXREG.DEALLOC N` shrinks the warp to `N` registers per thread and
//! puts the difference into the CTA's pool; `USETMAXREG.TRY_ALLOC N` grows it to `N`, taking the
//! difference from the pool, and waits (stall reason `barrier`) until other warps of the CTA have
//! released enough. Counts are per warp (32 lanes), rounded up to the register allocation unit as
//! at launch. A request that no release can ever satisfy leaves the warp waiting for good, which
//! the engine's watchdog reports (a kernel that would hang on hardware too).
//!
//! Contract: the pool never goes negative and a warp never holds more than it was given at launch
//! plus what it took from the pool, so the CTA's registers (and thus the SM's) stay within its
//! launch allocation.

use gpusim_isa::Inst;

use super::Sm;
use crate::kernel_run::KernelRun;
use crate::timing::OpKind;

impl Sm {
    /// Registers per warp that `USETMAXREG N` asks for.
    fn regs_target(&self, inst: &Inst) -> Option<u32> {
        let n = u32::try_from(inst.imm).ok().filter(|&n| n > 0)?;
        let unit = self.p.register_alloc_unit;
        Some((n * 32).div_ceil(unit) * unit)
    }

    /// Whether warp `s` can grow to the registers `inst` asks for now (always, when it asks for
    /// no more than it holds).
    pub(super) fn can_acquire(&self, s: usize, inst: &Inst) -> bool {
        let Some(target) = self.regs_target(inst) else { return true };
        let held = self.w.regs_held[s];
        target <= held || target - held <= self.ctas[self.w.cta_slot[s] as usize].reg_pool
    }

    /// `TRY_ALLOC` after [`Sm::can_acquire`] said yes.
    pub(super) fn acquire_regs(&mut self, s: usize, inst: &Inst) {
        let Some(target) = self.regs_target(inst) else { return };
        let held = self.w.regs_held[s];
        if target > held {
            let c = &mut self.ctas[self.w.cta_slot[s] as usize];
            c.reg_pool -= target - held;
            self.w.regs_held[s] = target;
        }
    }

    /// `DEALLOC`: shrinks warp `s` and wakes the CTA's warps waiting to grow, to try again.
    pub(super) fn release_regs(&mut self, s: usize, inst: &Inst, now: u64, k: &KernelRun) {
        let Some(target) = self.regs_target(inst) else { return };
        let held = self.w.regs_held[s];
        if target >= held {
            return;
        }
        self.w.regs_held[s] = target;
        let cs = self.w.cta_slot[s] as usize;
        self.ctas[cs].reg_pool += held - target;
        for i in 0..self.ctas[cs].slots.len() {
            let w = self.ctas[cs].slots[i] as usize;
            let waits_to_grow = self.w.ready_at[w] == u64::MAX
                && self.w.phase[w] == super::Phase::Running
                && self.w.next[w].is_some_and(|i| k.timing[i.op as usize].kind == OpKind::RegAcquire);
            if w != s && waits_to_grow {
                self.wake_warp(w, now + 1);
            }
        }
    }

    /// For a warp whose next instruction is a `TRY_ALLOC` the pool cannot serve: (registers
    /// asked for beyond those held, registers in the pool).
    pub(super) fn acquire_pending(&self, s: usize, k: &KernelRun) -> Option<(u32, u32)> {
        let inst = self.w.next[s]?;
        if k.timing.get(inst.op as usize)?.kind != OpKind::RegAcquire || self.can_acquire(s, &inst) {
            return None;
        }
        let target = self.regs_target(&inst)?;
        Some((target - self.w.regs_held[s], self.ctas[self.w.cta_slot[s] as usize].reg_pool))
    }
}

//! Shared-memory bank conflicts: an n-way conflicting `LDS`/`STS` loop and its conflict-free twin.
//!
//! Lane `l` accesses the 4-byte word `l · ways` (the classic `s[threadIdx.x * ways]`): with 32
//! banks of 4 bytes, the 32 lanes fall into `32 / ways` banks, `ways` distinct words each, so one
//! warp access takes `ways` wavefronts. Every warp of the CTA uses the same words. The loop is the
//! SASS nvcc makes of `#pragma unroll 8` over `acc += vs[(threadIdx.x * ways) % N]` on a
//! `volatile` array:
//!
//! ```text
//! loop iterations / unroll
//!   LDS R8 <- R6 addr=0 lanes=4·ways     # unroll independent loads
//!   ...
//!   FADD R5 <- R5 R8                     # the running sum
//!   ...
//!   IADD3 R3 <- R3; ISETP.NE.AND P1 <- R3; BRA <- P1
//! end
//! EXIT
//! ```
//!
//! With `store`, the loads become `STS <- R6 R5` and the sum goes. Kernel 0 (`timed_kernel`) has
//! the conflicts, kernel 1 is the same kernel with `ways = 1`; once the warps keep the shared
//! memory port busy, kernel 0 takes about `ways` times as long.

use std::collections::BTreeMap;

use gpusim_isa::{AddrExpr, Dim3, OpTable, Trace};

use super::{Measure, UbenchTrace};
use crate::WorkloadError;
use crate::asm::{Code, info, kernel, p as pred, r};

/// Parameters of [`shared_bank_conflicts`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedBanks {
    /// Conflict degree: 1, 2, 4, 8, 16 or 32 (lane `l` accesses word `l · ways`).
    pub ways: u32,
    /// Shared-memory accesses per thread (a multiple of `unroll`).
    pub iterations: u32,
    /// Stores (`STS`) instead of loads (`LDS`).
    pub store: bool,
    /// Threads of the one CTA (a multiple of 32, at most 1024).
    pub threads_per_cta: u32,
    /// Independent accesses per loop iteration (1 to 32).
    pub unroll: u32,
}

impl Default for SharedBanks {
    fn default() -> Self {
        SharedBanks { ways: 32, iterations: 1024, store: false, threads_per_cta: 256, unroll: 8 }
    }
}

impl SharedBanks {
    /// Checks the parameters; [`shared_bank_conflicts`] returns this message as its error.
    pub fn validate(&self) -> Result<(), String> {
        if !self.ways.is_power_of_two() || self.ways > 32 {
            return Err(format!("ways = {} must be 1, 2, 4, 8, 16 or 32", self.ways));
        }
        if !(1..=32).contains(&self.unroll) {
            return Err(format!("unroll = {} must be between 1 and 32", self.unroll));
        }
        if self.iterations == 0 || !self.iterations.is_multiple_of(self.unroll) {
            return Err(format!(
                "iterations = {} must be a positive multiple of unroll = {}",
                self.iterations, self.unroll
            ));
        }
        let t = self.threads_per_cta;
        if t == 0 || t > 1024 || !t.is_multiple_of(32) {
            return Err(format!("threads_per_cta = {t} must be a multiple of 32 between 32 and 1024"));
        }
        Ok(())
    }
}

/// The bank-conflict trace: kernel 0 with `ways`-way conflicts (`Measure::Cycles` of it), kernel 1
/// its conflict-free twin.
///
/// # Errors
/// When [`SharedBanks::validate`] fails.
pub fn shared_bank_conflicts(p: &SharedBanks) -> Result<UbenchTrace, WorkloadError> {
    p.validate().map_err(|e| WorkloadError(format!("shared_bank_conflicts: {e}")))?;
    Ok(build(p))
}

/// [`shared_bank_conflicts`] of checked parameters.
fn build(p: &SharedBanks) -> UbenchTrace {
    let op = if p.store { "sts" } else { "lds" };
    let kernels = [p.ways, 1]
        .into_iter()
        .enumerate()
        .map(|(id, ways)| {
            let mut ops = OpTable::new();
            let prog = program(p, ways, &mut ops);
            let name = if ways == 1 { format!("{op}_conflict_free") } else { format!("{op}_{ways}way_conflict") };
            let kinfo =
                info(id as u32, &name, Dim3::ONE, Dim3::new(p.threads_per_cta, 1, 1), 16 + p.unroll, 128 * ways, 0);
            kernel(kinfo, ops, vec![prog], vec![0; p.threads_per_cta as usize / 32], BTreeMap::new())
        })
        .collect();
    let description = format!(
        "shared-memory bank conflicts: one CTA of {} threads, {} {} per thread, lane l at word l·{} ({}-way \
         conflict) in kernel 0, conflict-free twin in kernel 1; compare the cycles of the two",
        p.threads_per_cta,
        p.iterations,
        if p.store { "STS" } else { "LDS" },
        p.ways,
        p.ways
    );
    UbenchTrace { trace: Trace { kernels }, description, measure: Measure::Cycles, timed_kernel: 0 }
}

fn program(p: &SharedBanks, ways: u32, ops: &mut OpTable) -> gpusim_isa::Program {
    let mut c = Code::new(ops, "banks");
    c.op("S2R", &[r(0)], &[]).op("IMAD.SHL.U32", &[r(6)], &[r(0)]).op("IMAD.MOV.U32", &[r(5)], &[]);
    c.op("IMAD.MOV.U32", &[r(3)], &[]);
    c.begin(p.iterations / p.unroll);
    let stride = 4 * ways as i32;
    for k in 0..p.unroll as u8 {
        if p.store {
            c.mem_stride("STS", &[], &[r(6), r(5)], AddrExpr::constant(0), stride);
        } else {
            c.mem_stride("LDS", &[r(8 + k)], &[r(6)], AddrExpr::constant(0), stride);
        }
    }
    if !p.store {
        for k in 0..p.unroll as u8 {
            c.op("FADD", &[r(5)], &[r(5), r(8 + k)]);
        }
    }
    c.op("IADD3", &[r(3)], &[r(3)]).op("ISETP.NE.AND", &[pred(1)], &[r(3)]).op("BRA", &[], &[pred(1)]);
    c.end();
    c.op("EXIT", &[], &[]);
    c.finish()
}

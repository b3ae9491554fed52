//! L2 read bandwidth: RRZE's `gpu-l2-cache` kernel.
//!
//! RRZE's `sumKernel<N = 32, BLOCKSIZE = 1024>` reads, in CTA `b`, the elements
//! `idx = 1024·blockRun·i + (b % blockRun)·1024 + threadIdx.x` for `i = 0..N` and sums them; the
//! data set is `blockRun · 1024 · N` elements and the grid of 100 000 CTAs reads it over and over.
//! The generator writes the grid as `(blockRun, reps, 1)`, so that `cta.x = b % blockRun` and the
//! CTA's addresses are affine (CUDA launches x fastest, so the CTA order is RRZE's). N is fully
//! unrolled in the real kernel; here the N loads form a loop whose body holds 64 bytes of
//! independent loads per thread (4 × `LDG.E.128`, or 8 × `LDG.E.64`), which keeps the loads in
//! flight of the unrolled code within the 32 registers two 1024-thread CTAs per SM allow:
//!
//! ```text
//! S2R R0; S2R R1; IMAD R0 <- R1 R0; IMAD.WIDE R2x2 <- R0
//! loop N / 4
//!   LDG.E.128.STRONG.GPU R8x4  <- R2x2 addr=base + w·(1024·cta.x + 32·warp + 1024·blockRun·(4·i0 + 0))
//!   ... 4 loads, then FADD R4 <- R4 R8 ... (the running sum; DADD for 8-byte loads)
//! end
//! FMUL R4 <- R4; FSETP.NEU.AND P0 <- R4   # if (sum == 23.12) A[tid] = sum: never taken
//! EXIT
//! ```
//!
//! RRZE loads `double`s through the read-only path (`LDG.E.64.CONSTANT`) and keeps them out of
//! the L1 only by reading each line once per CTA; `bypass_l1` (default) marks the loads
//! `.STRONG.GPU` (`ld.global.cg`) so that a simulated L1 cannot serve them either, and
//! `width_bytes = 8` gives RRZE's exact access size.
//!
//! The trace has two kernels: kernel 0 reads the data set once (the warm-up RRZE's repeated runs
//! provide, so the data is L2-resident), kernel 1 (`timed_kernel`) reads it `reps` times.

use std::collections::BTreeMap;

use gpusim_configs::Arch;
use gpusim_isa::{AddrExpr, Dim3, OpTable, Trace, Var};

use super::{Measure, UbenchTrace};
use crate::WorkloadError;
use crate::asm::{Code, info, kernel, p as pred, r, rr};

/// Parameters of [`l2_read`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct L2Read {
    /// Bytes of the data set every rep reads (RRZE's "data set": 16896 kB for the A100 80GB case,
    /// 23552 kB for H100 PCIe). Rounded to a whole number of CTA slices
    /// (`threads_per_cta · loads_per_thread · width_bytes`, 512 KiB by default).
    pub footprint_bytes: u64,
    /// Bytes the timed kernel reads in all: `reps = round(total_bytes_read / footprint)` passes
    /// over the data set (at least 1).
    pub total_bytes_read: u64,
    /// Mark the loads `.STRONG.GPU` (skip the L1).
    pub bypass_l1: bool,
    /// Bytes per lane per load: 16 (`LDG.E.128`) or 8 (`LDG.E.64`, RRZE's `double`).
    pub width_bytes: u32,
    /// Threads per CTA (RRZE: 1024; a multiple of 32).
    pub threads_per_cta: u32,
    /// Loads per thread (RRZE's template parameter N = 32); a multiple of `64 / width_bytes`.
    pub loads_per_thread: u32,
    /// Address of the data set.
    pub base_address: u64,
}

impl Default for L2Read {
    fn default() -> Self {
        L2Read {
            footprint_bytes: 16896 << 10,
            total_bytes_read: 256 << 20,
            bypass_l1: true,
            width_bytes: 16,
            threads_per_cta: 1024,
            loads_per_thread: 32,
            base_address: 0x7f00_0000_0000,
        }
    }
}

impl L2Read {
    /// Bytes one CTA reads: the unit the data set is made of.
    pub fn slice_bytes(&self) -> u64 {
        self.threads_per_cta as u64 * self.loads_per_thread as u64 * self.width_bytes as u64
    }

    /// RRZE's `blockRun`: CTA slices in the data set.
    pub fn block_run(&self) -> u64 {
        ((self.footprint_bytes + self.slice_bytes() / 2) / self.slice_bytes()).max(1)
    }

    /// The data set actually read: `block_run · slice_bytes`.
    pub fn effective_footprint(&self) -> u64 {
        self.block_run() * self.slice_bytes()
    }

    /// Passes over the data set in the timed kernel.
    pub fn reps(&self) -> u64 {
        let f = self.effective_footprint();
        ((self.total_bytes_read + f / 2) / f).max(1)
    }

    fn unroll(&self) -> u32 {
        64 / self.width_bytes
    }

    /// Checks the parameters; [`l2_read`] returns this message as its error.
    pub fn validate(&self) -> Result<(), String> {
        if self.width_bytes != 8 && self.width_bytes != 16 {
            return Err(format!("width_bytes = {} must be 8 or 16", self.width_bytes));
        }
        let t = self.threads_per_cta;
        if t == 0 || t > 1024 || !t.is_multiple_of(32) {
            return Err(format!("threads_per_cta = {t} must be a multiple of 32 between 32 and 1024"));
        }
        if self.loads_per_thread == 0 || !self.loads_per_thread.is_multiple_of(self.unroll()) {
            return Err(format!(
                "loads_per_thread = {} must be a positive multiple of {}",
                self.loads_per_thread,
                self.unroll()
            ));
        }
        if self.footprint_bytes == 0 {
            return Err("footprint_bytes must be positive".into());
        }
        if self.block_run() > u32::MAX as u64 {
            return Err("footprint_bytes is too large".into());
        }
        if self.reps() > 65535 {
            return Err(format!(
                "total_bytes_read / footprint_bytes = {} passes exceed the grid's y limit of 65535",
                self.reps()
            ));
        }
        if self.base_address.checked_add(self.effective_footprint()).is_none() {
            return Err("base_address + footprint_bytes overflows the address space".into());
        }
        Ok(())
    }
}

/// The L2 bandwidth trace: a warm-up kernel and the timed kernel (index 1), whose
/// `Measure::Bandwidth` is the bytes it reads. `arch` gives the compute capability only: the grid
/// is RRZE's, independent of the chip.
///
/// # Errors
/// When [`L2Read::validate`] fails.
pub fn l2_read(p: &L2Read, arch: &Arch) -> Result<UbenchTrace, WorkloadError> {
    p.validate().map_err(|e| WorkloadError(format!("l2_read: {e}")))?;
    Ok(build(p, arch))
}

/// [`l2_read`] of checked parameters.
fn build(p: &L2Read, arch: &Arch) -> UbenchTrace {
    let block_run = p.block_run() as u32;
    let reps = p.reps() as u32;
    let mut kernels = Vec::new();
    for (id, (name, y)) in [("l2_read_warmup", 1), ("l2_read", reps)].into_iter().enumerate() {
        let mut ops = OpTable::new();
        let prog = program(p, &mut ops);
        let kinfo = info(
            id as u32,
            name,
            Dim3::new(block_run, y, 1),
            Dim3::new(p.threads_per_cta, 1, 1),
            REGS,
            0,
            arch.compute_capability,
        );
        let warps = p.threads_per_cta / 32;
        kernels.push(kernel(kinfo, ops, vec![prog], vec![0; warps as usize], BTreeMap::new()));
    }
    let bytes = reps as u64 * p.effective_footprint();
    let description = format!(
        "L2 read bandwidth (RRZE gpu-l2-cache): data set {} B = {block_run} CTA slices of {} B, timed kernel \
         (index 1) reads it {reps} times with grid ({block_run}, {reps}) × {} threads, {} loads of {} B per thread{}; \
         kernel 0 reads it once to warm the L2; bandwidth = {bytes} B / time of kernel 1",
        p.effective_footprint(),
        p.slice_bytes(),
        p.threads_per_cta,
        p.loads_per_thread,
        p.width_bytes,
        if p.bypass_l1 { ", bypassing L1" } else { "" },
    );
    UbenchTrace { trace: Trace { kernels }, description, measure: Measure::Bandwidth { bytes }, timed_kernel: 1 }
}

/// Registers per thread: R0..R7 for indices, pointer and sum, 16 data registers from R8.
const REGS: u32 = 24;

fn program(p: &L2Read, ops: &mut OpTable) -> gpusim_isa::Program {
    let mut c = Code::new(ops, "sum");
    let w = p.width_bytes as i64;
    let t = p.threads_per_cta as i64;
    let block_run = p.block_run() as i64;
    let u = p.unroll();
    let regs = (w / 4) as u8;
    let mnemonic = match (p.width_bytes, p.bypass_l1) {
        (16, true) => "LDG.E.128.STRONG.GPU",
        (16, false) => "LDG.E.128.CONSTANT",
        (_, true) => "LDG.E.64.STRONG.GPU",
        (_, false) => "LDG.E.64.CONSTANT",
    };
    c.op("S2R", &[r(0)], &[]).op("S2R", &[r(1)], &[]).op("IMAD", &[r(0)], &[r(1), r(0)]);
    c.op("IMAD.WIDE", &[rr(2, 2)], &[r(0)]).op("CS2R", &[rr(4, 2)], &[]);
    c.begin(p.loads_per_thread / u);
    for k in 0..u as i64 {
        let addr = AddrExpr::constant(p.base_address + (w * t * block_run * k) as u64)
            .with(Var::CtaX, w * t)
            .with(Var::Warp, w * 32)
            .with(Var::Loop(0), w * t * block_run * u as i64);
        c.mem(mnemonic, &[rr(8 + regs * k as u8, regs)], &[rr(2, 2)], addr);
    }
    for k in 0..u as u8 {
        if p.width_bytes == 8 {
            // RRZE's `double` sum.
            c.op("DADD", &[rr(4, 2)], &[rr(4, 2), rr(8 + regs * k, 2)]);
        } else {
            for q in 0..regs {
                c.op("FADD", &[r(4)], &[r(4), r(8 + regs * k + q)]);
            }
        }
    }
    c.end();
    c.op("FMUL", &[r(4)], &[r(4)]).op("FSETP.NEU.AND", &[pred(0)], &[r(4)]).op("EXIT", &[], &[]);
    c.finish()
}

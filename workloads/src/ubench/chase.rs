//! Pointer chase: the latency of one dependent global load at a given footprint.
//!
//! The kernel is the one HPMLL's `random_latency` and RRZE's `gpu-latency` time: a single thread
//! follows a chain of pointers, `p = *p`, so each load's address is the previous load's result
//! and the loads serialise. The SASS (checked against nvcc 13.5 for sm_90, with `__ldcg` for the
//! L1-bypassing variant) is
//!
//! ```text
//! @00000001 IMAD.MOV.U32 R2                # p = chain head (kernel parameter)
//! @00000001 IMAD.MOV.U32 R3
//! @00000001 LDC.64 R4x2                    # &sink
//! loop passes+1                            # pass 0 is the warm-up, the others are timed
//!   @00000001 LDG.E.64 R2x2 <- R2x2 addr=base+element(0)·stride
//!   @00000001 LDG.E.64 R2x2 <- R2x2 addr=base+element(1)·stride
//!   ...                                    # K loads, one per chain element
//! end
//! @00000001 STG.E.64 <- R4x2 R2x2 addr=sink   # keeps the chain alive
//! @00000001 EXIT
//! ```
//!
//! (`LDG.E.64.STRONG.GPU` with `bypass_l1`.) The chain's addresses are not affine (a random
//! permutation), so each of the K loads carries its own constant address; the pass loop keeps the
//! program at K + 6 instructions whatever the number of passes. With `cover_footprint` and a
//! footprint of more than K elements, a second loop inside the pass loop repeats the K loads with
//! `+ (K · stride)·i1` on every address, walking the footprint window by window. The loop control of a real kernel
//! (an `ISETP` and a `BRA` every 8 to 32 unrolled steps) runs off the dependent path and is left
//! out.

use std::collections::BTreeMap;

use gpusim_isa::{AddrExpr, Dim3, OpTable, Trace, Var};

use super::{Measure, UbenchTrace};
use crate::WorkloadError;
use crate::asm::{Code, info, kernel, r, round_up, rr};

/// Parameters of [`pointer_chase`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PointerChase {
    /// Bytes the chain's elements are spread over: the chain has `footprint_bytes / stride_bytes`
    /// candidate elements (at most `max_steps` of them are visited).
    pub footprint_bytes: u64,
    /// Distance in bytes between consecutive elements (multiple of 8, at least 8). 128 puts each
    /// element on its own cache line; RRZE's `gpu-latency` uses 64.
    pub stride_bytes: u64,
    /// Visit the elements in a fixed-seed pseudo-random cyclic order (defeats prefetching and
    /// spreads the chain over the cache sets); false: in address order.
    pub random: bool,
    /// Timed passes over the chain after the warm-up pass (at least 1).
    pub passes: u32,
    /// Longest chain: with more elements than this, the chain visits `max_steps` of them (the
    /// first `max_steps` of the random permutation, or the first ones in address order), each on a
    /// distinct line. Bounds the program at `max_steps` instructions.
    pub max_steps: u64,
    /// Address of element 0 (multiple of 8).
    pub base_address: u64,
    /// Load with `LDG.E.64.STRONG.GPU` (`ld.global.cg`, as `__ldcg` compiles), which skips the L1;
    /// false: plain `LDG.E.64`.
    pub bypass_l1: bool,
    /// Seed of the permutation (SplitMix64).
    pub seed: u64,
    /// When the footprint has more elements than `max_steps`: cover all of it by windows instead
    /// of visiting only `max_steps` elements. The chain is then a cyclic permutation of the
    /// `max_steps` elements of a window of `max_steps · stride_bytes` bytes, and a loop steps the
    /// window across the footprint (rounded down to whole windows), so every line of the
    /// footprint is loaded once per pass with `max_steps` instructions. Without it, a chain of
    /// `max_steps` lines (8 MiB by default) stays L2-resident on chips with a larger L2, whatever
    /// the footprint: set it for DRAM latency.
    pub cover_footprint: bool,
}

impl Default for PointerChase {
    fn default() -> Self {
        PointerChase {
            footprint_bytes: 4 << 20,
            stride_bytes: 128,
            random: true,
            passes: 1,
            max_steps: 65536,
            base_address: 0x7f00_0000_0000,
            bypass_l1: false,
            seed: 0x6770_7573_696d_0001,
            cover_footprint: false,
        }
    }
}

impl PointerChase {
    /// Checks the parameters; [`pointer_chase`] returns this message as its error.
    pub fn validate(&self) -> Result<(), String> {
        if self.stride_bytes < 8 || !self.stride_bytes.is_multiple_of(8) {
            return Err(format!("stride_bytes = {} must be a multiple of 8 (a pointer)", self.stride_bytes));
        }
        if self.footprint_bytes < self.stride_bytes {
            return Err(format!(
                "footprint_bytes = {} is smaller than one element of stride_bytes = {}",
                self.footprint_bytes, self.stride_bytes
            ));
        }
        if self.passes == 0 || self.passes >= u32::MAX - 1 {
            return Err(format!("passes = {} must be between 1 and {}", self.passes, u32::MAX - 2));
        }
        if self.max_steps == 0 || self.max_steps > 1 << 24 {
            return Err(format!("max_steps = {} must be between 1 and {}", self.max_steps, 1u64 << 24));
        }
        if self.max_steps > 0 && self.windows() > u32::MAX as u64 {
            return Err("footprint_bytes / (max_steps · stride_bytes) exceeds 2^32 windows".into());
        }
        if !self.base_address.is_multiple_of(8) {
            return Err(format!("base_address = {:#x} must be 8-byte aligned", self.base_address));
        }
        let end = self.footprint_bytes.checked_add(self.base_address).and_then(|e| e.checked_add(4 << 20));
        if end.is_none() {
            return Err("base_address + footprint_bytes overflows the address space".into());
        }
        Ok(())
    }

    /// Elements the footprint holds.
    pub fn elements(&self) -> u64 {
        self.footprint_bytes / self.stride_bytes
    }

    /// Load instructions in the chain: `min(elements, max_steps)`.
    pub fn steps(&self) -> u64 {
        self.elements().min(self.max_steps)
    }

    /// Windows per pass: `elements / max_steps` with `cover_footprint` (at least 1), else 1.
    pub fn windows(&self) -> u64 {
        if self.cover_footprint { (self.elements() / self.steps()).max(1) } else { 1 }
    }

    /// Dependent loads per pass: `steps · windows`.
    pub fn accesses_per_pass(&self) -> u64 {
        self.steps() * self.windows()
    }

    /// The chain: element indices in visiting order, `steps()` of them, all distinct. The last
    /// element points back to the first, so the chain is one cycle. With more than one window
    /// (`cover_footprint`), these are the elements of window 0; window `w` adds `w · steps`, and
    /// the last element of each window points to the first of the next.
    pub fn chain(&self) -> Vec<u64> {
        let n = if self.windows() > 1 { self.steps() } else { self.elements() };
        let k = self.steps();
        if !self.random {
            return (0..k).collect();
        }
        // The first k entries of a Fisher–Yates shuffle of 0..n: a uniformly random k-subset in
        // random order. Entries moved so far live in `moved`; the rest are the identity.
        let mut rng = crate::rng::SplitMix64(self.seed);
        let mut moved: BTreeMap<u64, u64> = BTreeMap::new();
        let mut out = Vec::with_capacity(k as usize);
        for i in 0..k {
            let j = i + rng.below(n - i);
            let vi = *moved.get(&i).unwrap_or(&i);
            let vj = *moved.get(&j).unwrap_or(&j);
            moved.insert(j, vi);
            out.push(vj);
        }
        out
    }

    /// Address of the sink the final pointer is stored to: past the footprint, on its own page.
    pub fn sink_address(&self) -> u64 {
        self.base_address + round_up(self.footprint_bytes, 2 << 20)
    }
}

/// The pointer-chase trace: one CTA of one thread (lane 0 of warp 0), a warm-up pass and
/// `passes` timed passes over the chain.
///
/// `Measure::LatencyPerAccess { accesses }` counts the timed loads (`accesses_per_pass · passes`). The
/// kernel's cycles also hold launch, the warm-up pass (cold misses) and the drain, so do not
/// divide them by `accesses`: run the two traces of [`pointer_chase_pair`] and take
/// `(cycles₂ − cycles₁) / extra`.
///
/// # Errors
/// When [`PointerChase::validate`] fails.
pub fn pointer_chase(p: &PointerChase) -> Result<UbenchTrace, WorkloadError> {
    p.validate().map_err(|e| WorkloadError(format!("pointer_chase: {e}")))?;
    Ok(build(p))
}

/// [`pointer_chase`] of checked parameters.
fn build(p: &PointerChase) -> UbenchTrace {
    let chain = p.chain();
    let k = chain.len() as u64;
    let mut ops = OpTable::new();
    let load = if p.bypass_l1 { "LDG.E.64.STRONG.GPU" } else { "LDG.E.64" };
    let mut c = Code::new(&mut ops, "chase");
    c.set_mask(1);
    c.op("IMAD.MOV.U32", &[r(2)], &[]).op("IMAD.MOV.U32", &[r(3)], &[]).op("LDC.64", &[rr(4, 2)], &[]);
    c.begin(p.passes + 1);
    let windows = p.windows();
    if windows > 1 {
        c.begin(windows as u32);
    }
    let window_bytes = (p.steps() * p.stride_bytes) as i64;
    // Every address is distinct, so the builder's expression table is one entry per load.
    for &e in &chain {
        let a = AddrExpr::constant(p.base_address + e * p.stride_bytes);
        let a = if windows > 1 { a.with(Var::Loop(1), window_bytes) } else { a };
        c.mem_stride(load, &[rr(2, 2)], &[rr(2, 2)], a, 8);
    }
    if windows > 1 {
        c.end();
    }
    c.end();
    c.mem_stride("STG.E.64", &[], &[rr(4, 2), rr(2, 2)], AddrExpr::constant(p.sink_address()), 8);
    c.op("EXIT", &[], &[]);
    let prog = c.finish();

    let kinfo = info(0, "pointer_chase", Dim3::ONE, Dim3::ONE, 8, 0, 0);
    let kt = kernel(kinfo, ops, vec![prog], vec![0], BTreeMap::new());
    let visited = if windows > 1 {
        format!(", {windows} windows of {k} elements")
    } else if k < p.elements() {
        format!(", only the first {k} visited")
    } else {
        String::new()
    };
    let description = format!(
        "pointer chase: one thread, {} dependent {load} per pass over {} elements of {} B \
         ({} B footprint, {} order{visited}), 1 warm-up + {} timed pass(es); latency per access = \
         Δcycles / Δaccesses between the two traces of pointer_chase_pair",
        p.accesses_per_pass(),
        p.elements(),
        p.stride_bytes,
        p.footprint_bytes,
        if p.random { "random" } else { "sequential" },
        p.passes
    );
    UbenchTrace {
        trace: Trace { kernels: vec![kt] },
        description,
        measure: Measure::LatencyPerAccess { accesses: p.accesses_per_pass() * p.passes as u64 },
        timed_kernel: 0,
    }
}

/// Two pointer-chase traces that differ only in one more timed pass, and the number of extra
/// accesses in the second (`accesses_per_pass`). Simulate both; the latency of one dependent access is
/// `(cycles₂ − cycles₁) / extra`, free of launch, warm-up and drain overheads.
///
/// # Errors
/// When [`PointerChase::validate`] fails.
pub fn pointer_chase_pair(p: &PointerChase) -> Result<(UbenchTrace, UbenchTrace, u64), WorkloadError> {
    let first = pointer_chase(p)?;
    let second = pointer_chase(&PointerChase { passes: p.passes.saturating_add(1), ..p.clone() })?;
    Ok((first, second, p.accesses_per_pass()))
}

//! Distributed shared memory (Hopper thread-block clusters): the latency of a dependent load from
//! the shared memory of another CTA of the cluster (`remote`), or from the CTA's own shared memory.
//!
//! nvcc 13.5 compiles `ld.shared::cluster.u32` on sm_90 to a *generic* `LD.E` on a 64-bit address
//! whose high word is the shared window (`S2R SR_SWINHI`) and whose low word holds the target
//! CTA's rank in bits 24..31 (`mapa` becomes `PRMT ... 0x654`). The dependent chain it emits is
//!
//! ```text
//! S2R R4                           # SR_SWINHI: the shared window, high word
//! PRMT R3 <- R3 R0                 # mapa: rank << 24 | shared offset of the buffer
//! loop steps / chain
//!   loop chain
//!     @00000001 LD.E R6 <- R6x2 addr=window + rank·0x1000000 + 128·i1
//!     @00000001 IMAD.IADD R5 <- R6 R3   # next offset + mapped base
//!     @00000001 MOV R6 <- R5
//!     @00000001 MOV R7 <- R4
//!   end
//! end
//! ```
//!
//! so a step's latency is the `LD.E` plus two dependent integer operations, as on the hardware
//! (HPMLL's published 181 cycles remote, 33 local, are of this kind of chain). The chain walks a
//! 16 KiB buffer at a 128-byte stride. With `generic = false` (local only) the chain is
//! `LDS R6 <- R6` on the CTA's own shared memory (`ld.shared::cta`).
//!
//! **Limitations.** The addresses use the documented window `0x0000_7e00_0000_0000 + rank ·
//! 0x100_0000 + offset` (the hardware's layout below the window base: rank in bits 24..31); the
//! SM model sends a generic access inside it to the addressed CTA's shared memory (sim-core
//! `sm/issue.rs`, `cluster_target`), a remote rank at `sm.dsmem_latency`. The cluster barriers
//! around the chain (`UCGABAR_ARV`, `UCGABAR_WAIT`) and `MAPA` are not in the isa's opcode table
//! and are left out, so the remote CTA does not wait for rank 0 to finish: harmless here, as the
//! chain only reads.

use std::collections::BTreeMap;

use gpusim_isa::{AddrExpr, Dim3, OpTable, Program, Trace, Var};

use super::{Measure, UbenchTrace};
use crate::WorkloadError;
use crate::asm::{Code, info, kernel, r, rr};

/// Bytes of the window per CTA rank.
pub use gpusim_isa::opcode::CLUSTER_SHARED_RANK_STRIDE;
/// Base of the distributed-shared-memory window in generic addresses (an assumption; the
/// hardware's is in `SR_SWINHI`).
pub use gpusim_isa::opcode::CLUSTER_SHARED_WINDOW;

/// Bytes of the buffer the chain walks, and the stride of the walk.
const BUFFER: u64 = 16 << 10;
const STRIDE: u64 = 128;

/// Parameters of [`dsmem_latency`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dsmem {
    /// CTAs per cluster (2 to 16; the chip's `sm.max_cluster_size` bounds what launches).
    pub cluster_size: u32,
    /// Read the shared memory of rank 1 (true) or the CTA's own, rank 0 (false).
    pub remote: bool,
    /// Dependent loads (a multiple of 128, the chain length through the buffer).
    pub steps: u64,
    /// Cluster (generic `LD.E`) addressing; false: `LDS` on the CTA's own shared memory (only
    /// with `remote = false`).
    pub generic: bool,
}

impl Default for Dsmem {
    fn default() -> Self {
        Dsmem { cluster_size: 2, remote: true, steps: 2048, generic: true }
    }
}

impl Dsmem {
    /// Checks the parameters; [`dsmem_latency`] returns this message as its error.
    pub fn validate(&self) -> Result<(), String> {
        if !(2..=16).contains(&self.cluster_size) {
            return Err(format!("cluster_size = {} must be between 2 and 16", self.cluster_size));
        }
        let chain = BUFFER / STRIDE;
        if self.steps == 0 || !self.steps.is_multiple_of(chain) || self.steps / chain > u32::MAX as u64 {
            return Err(format!("steps = {} must be a positive multiple of {chain}", self.steps));
        }
        if self.remote && !self.generic {
            return Err("a remote access needs cluster (generic) addressing: set generic = true".into());
        }
        Ok(())
    }
}

/// The DSMEM latency trace: one cluster of `cluster_size` CTAs of one warp; lane 0 of rank 0 runs
/// the chain. `Measure::LatencyPerAccess { accesses: steps }`; as for the pointer chase, take the
/// difference of two runs ([`dsmem_latency_pair`]) to cancel launch and set-up.
///
/// # Errors
/// When [`Dsmem::validate`] fails.
pub fn dsmem_latency(p: &Dsmem) -> Result<UbenchTrace, WorkloadError> {
    p.validate().map_err(|e| WorkloadError(format!("dsmem_latency: {e}")))?;
    Ok(build(p))
}

/// [`dsmem_latency`] of checked parameters.
fn build(p: &Dsmem) -> UbenchTrace {
    let mut ops = OpTable::new();
    let chaser = chase_program(p, &mut ops);
    let idle = idle_program(&mut ops);
    let kinfo = info(0, "dsmem_latency", Dim3::new(p.cluster_size, 1, 1), Dim3::new(32, 1, 1), 16, BUFFER as u32, 90);
    let mut kinfo = kinfo;
    kinfo.cluster = Dim3::new(p.cluster_size, 1, 1);
    let mut overrides = BTreeMap::new();
    overrides.insert(0, vec![0]);
    let kt = kernel(kinfo, ops, vec![chaser, idle], vec![1], overrides);
    let target = if p.remote { 1 } else { 0 };
    let description = format!(
        "distributed shared memory latency: cluster of {} CTAs, rank 0 lane 0 chases {} dependent {} through {} B \
         of rank {target}'s shared memory{}; latency = Δcycles / Δsteps between the traces of dsmem_latency_pair",
        p.cluster_size,
        p.steps,
        if p.generic { "LD.E (ld.shared::cluster)" } else { "LDS" },
        BUFFER,
        if p.generic { format!(" at window {:#x}", window(target)) } else { String::new() },
    );
    UbenchTrace {
        trace: Trace { kernels: vec![kt] },
        description,
        measure: Measure::LatencyPerAccess { accesses: p.steps },
        timed_kernel: 0,
    }
}

/// Two DSMEM traces, the second with twice the steps, and the extra steps (`p.steps`).
///
/// # Errors
/// When [`Dsmem::validate`] fails.
pub fn dsmem_latency_pair(p: &Dsmem) -> Result<(UbenchTrace, UbenchTrace, u64), WorkloadError> {
    let steps = p
        .steps
        .checked_mul(2)
        .ok_or_else(|| WorkloadError(format!("dsmem_latency: steps = {} is too large", p.steps)))?;
    Ok((dsmem_latency(p)?, dsmem_latency(&Dsmem { steps, ..p.clone() })?, p.steps))
}

/// Generic address of the buffer of CTA `rank`.
pub fn window(rank: u64) -> u64 {
    CLUSTER_SHARED_WINDOW + rank * CLUSTER_SHARED_RANK_STRIDE
}

/// Every CTA initialises its buffer (`p[i] = offset of i+1`), rank 0 then chases.
fn init(c: &mut Code) {
    c.op("S2R", &[r(0)], &[]).op("S2R", &[r(4)], &[]).op("IMAD.SHL.U32", &[r(2)], &[r(0)]);
    c.begin((BUFFER / 4 / 32) as u32);
    let addr = AddrExpr::constant(0).with(Var::Loop(0), 128);
    c.op("IADD3", &[r(8)], &[r(2)]).mem("STS", &[], &[r(2), r(8)], addr);
    c.end();
}

fn chase_program(p: &Dsmem, ops: &mut OpTable) -> Program {
    let mut c = Code::new(ops, "chase");
    init(&mut c);
    let chain = BUFFER / STRIDE;
    c.set_mask(1);
    c.op("PRMT", &[r(3)], &[r(3), r(0)]).op("IMAD.MOV.U32", &[r(6)], &[]);
    c.begin((p.steps / chain) as u32);
    c.begin(chain as u32);
    if p.generic {
        let target = if p.remote { 1 } else { 0 };
        let addr = AddrExpr::constant(window(target)).with(Var::Loop(1), STRIDE as i64);
        c.mem("LD.E", &[r(6)], &[rr(6, 2)], addr);
        c.op("IMAD.IADD", &[r(5)], &[r(6), r(3)]).op("MOV", &[r(6)], &[r(5)]).op("MOV", &[r(7)], &[r(4)]);
    } else {
        c.mem("LDS", &[r(6)], &[r(6)], AddrExpr::constant(0).with(Var::Loop(1), STRIDE as i64));
    }
    c.end().end();
    c.mem("STG.E", &[], &[rr(10, 2), r(6)], AddrExpr::constant(0x7f00_0000_0000));
    c.op("EXIT", &[], &[]);
    c.finish()
}

fn idle_program(ops: &mut OpTable) -> Program {
    let mut c = Code::new(ops, "peer");
    init(&mut c);
    c.op("EXIT", &[], &[]);
    c.finish()
}

//! Per-opcode timing resolved against a chip: what the hot loop looks up by op id.
//!
//! Latency and issue interval: `[opcodes.<BASE>]` in the config when present. Otherwise the
//! `[pipes.<class>]` timing of the opcode's unit class is the timing of the class's
//! representative opcode ([`gpusim_isa::opcode::representative`]: FFMA for fp32, ...), and
//! every other opcode keeps its difference from the representative in the ISA table: latency by
//! offset (`MUFU.SIN` is 4 cycles slower than `MUFU.EX2`), issue interval by ratio (`IMAD.WIDE`
//! occupies the int pipe twice as long as `IADD3`). Tensor instructions with a known shape take
//! their issue interval from the config's FLOP/clk/SM rate for their input type (shared by the
//! SM's sub-cores), so a chip with twice the tensor rate runs MMAs twice as fast.

use gpusim_configs::Arch;
use gpusim_isa::opcode::{lookup, representative};
use gpusim_isa::{MemSpace, OpDesc, Semantics, TensorType, UnitClass};

use crate::stats::StallReason;

/// What kind of work the issue stage must do for an instruction.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum OpKind {
    /// Fixed-latency arithmetic/logic on a pipe.
    Alu,
    /// Global, local, generic or texture memory through the LD/ST unit and the memory system.
    GlobalMem,
    /// Shared memory (LDS/STS/LDSM/STSM/ATOMS), serialised by bank conflicts.
    SharedMem,
    /// `LDGSTS`: global read whose data lands in shared memory, tracked by async groups.
    AsyncCopy,
    AsyncCommit,
    AsyncWait,
    /// TMA or bulk copy (or bulk reduction): one instruction moves `bulk_bytes`.
    Bulk,
    Branch,
    Exit,
    BarrierSync,
    BarrierArrive,
    MemBarrier,
    WgmmaAsync,
    WgmmaWait,
    /// mbarrier try-wait: waits for the next phase of the barrier (see `sm/mbarrier.rs`).
    MbarWait,
    MbarArrive,
    MbarInit,
    /// `USETMAXREG.DEALLOC` (`setmaxnreg.dec`): gives registers back to the CTA's pool.
    RegRelease,
    /// `USETMAXREG.TRY_ALLOC` (`setmaxnreg.inc`): takes registers from the CTA's pool, waiting
    /// until other warps have released enough (see `sm/regalloc.rs`).
    RegAcquire,
    /// Memory-class instructions without a data access (`CCTL`, `UTMAPF`, ...): fixed latency.
    Other,
}

/// Timing of one op id, resolved for one chip.
#[derive(Clone, Copy, Debug)]
pub struct OpTiming {
    pub kind: OpKind,
    pub class: UnitClass,
    pub latency: u32,
    pub interval: u32,
    /// What a dependent instruction's wait counts as.
    pub dep_reason: StallReason,
    pub mem: MemSpace,
    /// Bytes per active lane of a memory access.
    pub width: u32,
    pub load: bool,
    pub store: bool,
    pub bypass_l1: bool,
    /// `LDSM`/`STSM` matrix count.
    pub matrices: u32,
    /// CUDA-core FLOPs per active lane (FFMA 2, FADD 1, HFMA2 4, DFMA 2, ...).
    pub flops_per_lane: u32,
    /// Tensor FLOPs of one warp's instruction.
    pub tensor_flops: u64,
    /// Shared-memory operand bytes one warp's share of a warpgroup MMA reads (A and B from
    /// shared memory, a quarter each per warp); 0 for other instructions.
    pub smem_operand_bytes: u64,
    /// The B operand's part of it: what the warp reads when A comes from registers (the RS form,
    /// `HGMMA ... R_acc, R_a, gdesc[UR_b]`).
    pub smem_b_bytes: u64,
    pub known: bool,
}

fn cuda_core_flops(d: &OpDesc) -> u32 {
    match d.base.as_str() {
        "FFMA" | "FFMA32I" | "DFMA" => 2,
        "FADD" | "FADD32I" | "FMUL" | "FMUL32I" | "DADD" | "DMUL" => 1,
        "HFMA2" | "HFMA2_32I" => 4,
        "HADD2" | "HADD2_32I" | "HMUL2" | "HMUL2_32I" => 2,
        _ => 0,
    }
}

/// Resolves the timing of `d` on `arch`.
pub fn resolve(d: &OpDesc, arch: &Arch) -> OpTiming {
    let class_timing = arch.pipes.get(d.unit);
    let over = arch.opcodes.get(&d.base);
    let (mut latency, mut interval) = match (over, lookup(representative(d.unit))) {
        (Some(o), _) => (o.latency.0.max(1) as u32, o.issue_interval.0.max(1) as u32),
        (None, Some(rep)) if d.known => {
            let lat = class_timing.latency.0 as i64 + d.latency as i64 - rep.latency as i64;
            let iv =
                (class_timing.issue_interval.0 * d.issue_interval as u64).div_ceil(rep.issue_interval.max(1) as u64);
            (lat.max(1) as u32, iv.max(1) as u32)
        }
        _ => (class_timing.latency.0.max(1) as u32, class_timing.issue_interval.0.max(1) as u32),
    };

    let kind = match d.semantics {
        Semantics::Exit => OpKind::Exit,
        Semantics::Branch => OpKind::Branch,
        Semantics::BarrierSync => OpKind::BarrierSync,
        Semantics::BarrierArrive => OpKind::BarrierArrive,
        Semantics::MemBarrier => OpKind::MemBarrier,
        Semantics::AsyncCopy => OpKind::AsyncCopy,
        Semantics::AsyncCommit => OpKind::AsyncCommit,
        Semantics::AsyncWait => OpKind::AsyncWait,
        Semantics::TmaLoad | Semantics::TmaStore | Semantics::BulkCopy | Semantics::BulkReduce => OpKind::Bulk,
        Semantics::WgmmaAsync => OpKind::WgmmaAsync,
        Semantics::WgmmaWait => OpKind::WgmmaWait,
        Semantics::MbarWait => OpKind::MbarWait,
        Semantics::MbarArrive => OpKind::MbarArrive,
        Semantics::MbarInit => OpKind::MbarInit,
        Semantics::SetMaxReg if d.mnemonic.contains(".DEALLOC") || d.mnemonic.contains(".DEC") => OpKind::RegRelease,
        Semantics::SetMaxReg => OpKind::RegAcquire,
        _ => match d.mem {
            MemSpace::Shared => OpKind::SharedMem,
            MemSpace::Global | MemSpace::Local | MemSpace::Generic | MemSpace::Texture | MemSpace::SharedCluster => {
                OpKind::GlobalMem
            }
            MemSpace::Const | MemSpace::None => {
                if d.unit == UnitClass::Mem {
                    OpKind::Other
                } else {
                    OpKind::Alu
                }
            }
        },
    };

    let mut tensor_flops = 0;
    let mut smem_operand_bytes = 0;
    let mut smem_b_bytes = 0;
    if let Some(shape) = d.tensor {
        if d.semantics == Semantics::WgmmaAsync {
            let elem = match shape.input {
                TensorType::Tf32 => 4.0,
                TensorType::F16 | TensorType::Bf16 => 2.0,
                TensorType::E4m3 | TensorType::E5m2 | TensorType::S8 | TensorType::U8 => 1.0,
                TensorType::Fp6 => 0.75,
                TensorType::Fp4 | TensorType::S4 => 0.5,
                TensorType::F64 => 8.0,
                TensorType::B1 => 0.125,
            };
            let whole = (shape.m as f64 + shape.n as f64) * shape.k as f64 * elem;
            smem_operand_bytes = (whole / 4.0).ceil() as u64;
            smem_b_bytes = (shape.n as f64 * shape.k as f64 * elem / 4.0).ceil() as u64;
        }
        let whole = shape.flops();
        // A warpgroup MMA is issued by each of the 4 warps of the group; each warp's share is a quarter.
        let per_warp = if d.semantics == Semantics::WgmmaAsync { whole / 4 } else { whole };
        tensor_flops = per_warp;
        if over.is_none() {
            let key = shape.input.rate_key();
            // Hopper's mma.sync runs below its wgmma rate: the two paths have rates of their own.
            let rate = if d.semantics == Semantics::WgmmaAsync {
                arch.tensor.flops_per_clk_per_sm.get(key).copied().unwrap_or(0.0)
            } else {
                arch.tensor.mma_sync_rate(key)
            };
            if rate > 0.0 {
                let per_sub = rate / arch.sm.sub_cores.max(1) as f64;
                interval = ((per_warp as f64 / per_sub).ceil() as u32).max(1);
                latency = if d.semantics == Semantics::WgmmaAsync {
                    arch.tensor.wgmma_base_latency.0 as u32 + interval
                } else {
                    (arch.tensor.mma_latency.0 as u32).max(interval)
                };
            }
        }
    }

    let dep_reason = match (kind, d.unit) {
        (OpKind::GlobalMem | OpKind::Bulk | OpKind::AsyncCopy, _) => StallReason::LongScoreboard,
        (OpKind::SharedMem, _) | (_, UnitClass::Mufu | UnitClass::Conv) => StallReason::ShortScoreboard,
        (OpKind::Other, _) => StallReason::ShortScoreboard,
        (OpKind::WgmmaAsync, _) => StallReason::MathDependency,
        (OpKind::MbarWait, _) => StallReason::Barrier,
        _ if matches!(d.base.as_str(), "S2R" | "S2UR" | "SHFL" | "MATCH" | "LDC") => StallReason::ShortScoreboard,
        _ => StallReason::Wait,
    };

    OpTiming {
        kind,
        class: d.unit,
        latency,
        interval,
        dep_reason,
        mem: d.mem,
        width: d.width as u32,
        load: d.load,
        store: d.store,
        bypass_l1: d.bypass_l1,
        matrices: d.matrices as u32,
        flops_per_lane: cuda_core_flops(d),
        tensor_flops,
        smem_operand_bytes,
        smem_b_bytes,
        known: d.known,
    }
}

//! Unfused "PyTorch standard attention" (the baseline of FlashAttention's benchmarks,
//! `attention_pytorch`): the kernels it really launches, in one stream.
//!
//! Forward: `S = Q·Kᵀ·scale` (batched GEMM over `b·h`, `baddbmm`), the causal `masked_fill` folded
//! into the softmax kernel's read, `P = softmax(S)` (a memory-bound row kernel), `O = P·V`
//! (batched GEMM). Backward: `dV = Pᵀ·dO`, `dP = dO·Vᵀ`, `dS = softmax_backward(dP, P)` (row
//! kernel), `dQ = dS·K`, `dK = dSᵀ·Q`. The GEMMs are the workloads crate's tuned GEMM recipe
//! ([`crate::gemm::default_recipe`]) at each product's shape; the scores `S`, `P`, `dP`, `dS` are
//! `[b·h, sq, sk]` tensors of the input type.
//!
//! # Row kernels (PyTorch's `softmax_warp_forward` up to 1024 columns, `cunn_SoftMaxForward` above)
//! One warp per row (4 rows per 128-thread CTA) up to 1024 columns, else one CTA of
//! `min(1024, sk/8)` threads per row. Per 16-byte vector a thread issues `LDG.E.128`; per element
//! the forward does FMNMX, FFMA + MUFU.EX2 (exp), FADD (sum), FMUL (1/sum), the backward FMUL
//! (dP·P), FADD (row sum), FADD + FMUL (dS); row reductions by SHFL.BFLY (plus shared memory and a
//! barrier across warps); results packed (F2FP) and stored with `STG.E.128`.
//!
//! # Simplifications
//! The GEMM recipe's operand layout is fixed (A row-major, B by rows of K); the real transposed
//! products (`Kᵀ`, `Pᵀ`, `dSᵀ`) run cuBLAS's TN/NT kernels of the same tiles. Each GEMM addresses
//! the GEMM recipe's own regions, so the traffic between kernels is not shared through L2 (at
//! these sizes the scores, `b·h·sq·sk·2` bytes, exceed the L2 anyway). Dropout with p = 0 and the
//! layout copies of `rearrange` are not launched.

use std::collections::BTreeMap;

use gpusim_configs::Arch;
use gpusim_isa::{Dim3, KernelInfo, KernelTrace, OpTable, Trace, Var};

use super::{AttnSpec, Tensors, chain};
use crate::asm::{Addr, Code, assemble, r, rr};
use crate::gemm::{self, GemmProblem};
use crate::params::WorkloadError;

fn check(s: &AttnSpec, arch: &Arch) -> Result<(), WorkloadError> {
    if s.varlen.is_some() || s.page_size.is_some() || s.num_splits.is_some() {
        return Err(WorkloadError("the standard recipe takes no varlen, page_size or num_splits".into()));
    }
    if s.kv_heads() != s.heads {
        return Err(WorkloadError(format!(
            "kv_heads = {}: the standard recipe is multi-head attention (kv_heads = heads)",
            s.kv_heads()
        )));
    }
    if s.dtype == gemm::Dtype::Fp8 {
        return Err(WorkloadError("dtype = fp8: the standard recipe is bf16/fp16".into()));
    }
    if arch.compute_capability < 80 {
        return Err(WorkloadError(format!(
            "the standard recipe needs compute capability 8.0; {} is {}",
            arch.name, arch.compute_capability
        )));
    }
    Ok(())
}

/// A batched GEMM of the tuned recipe.
fn gemm_part(arch: &Arch, s: &AttnSpec, m: u64, n: u64, k: u64) -> Result<Trace, WorkloadError> {
    let p = GemmProblem { m, n, k, batch: s.batch * s.heads, dtype: s.dtype, block_scaled: false };
    let r = gemm::default_recipe(arch, &p);
    gemm::generate(arch, &p, &r).map_err(|e| WorkloadError(format!("standard attention GEMM {m}x{n}x{k}: {e}")))
}

/// Which row kernel.
#[derive(Clone, Copy)]
enum RowOp {
    Softmax,
    SoftmaxBackward,
}

/// The row kernel over `b·h·sq` rows of `sk` columns: reads `inputs` score tensors at `srcs`,
/// writes one at `dst`.
fn row_kernel(s: &AttnSpec, arch: &Arch, op: RowOp, srcs: &[u64], dst: u64) -> Result<KernelTrace, WorkloadError> {
    let e = s.dtype.bytes();
    let cols = s.seqlen_kv();
    let rows = s.batch * s.heads * s.seqlen;
    let row_bytes = cols * e;
    let vecs = row_bytes.div_ceil(16);
    // Threads per row and rows per CTA.
    let (tpr, rows_per_cta) =
        if cols <= 1024 { (32u64, 4u64) } else { ((cols / 8).clamp(32, 1024).next_multiple_of(32), 1) };
    let threads = tpr * rows_per_cta;
    let per_thread = vecs.div_ceil(tpr);
    let ctas = rows.div_ceil(rows_per_cta);
    if ctas > u32::MAX as u64 {
        return Err(WorkloadError("the softmax grid is too large".into()));
    }
    let mut ops = OpTable::new();
    let mut c = Code::new(&mut ops, "softmax_rows");
    c.op("S2R", &[r(0)], &[]).op("S2R", &[r(1)], &[]).op("IMAD.WIDE", &[rr(2, 2)], &[r(0), r(1)]);
    // Row `cta.x·rows_per_cta + warp` (warp per row) or `cta.x` (CTA per row); thread chunk `l`
    // and, per vector index i, `i·tpr·16` bytes on.
    let row_addr = |base: u64, i: u64| {
        let mut a = Addr::at(base + i * tpr * 16).term(Var::CtaX, (rows_per_cta * row_bytes) as i64);
        a = if rows_per_cta > 1 { a.term(Var::Warp, row_bytes as i64) } else { a.term(Var::Warp, 512) };
        a
    };
    let warps_per_row = tpr / 32;
    let reduce = |c: &mut Code, v: u8| {
        for _ in 0..5 {
            c.op("SHFL.BFLY", &[r(12)], &[r(v)]).op("FMNMX", &[r(v)], &[r(v), r(12)]);
        }
        if warps_per_row > 1 {
            c.mem("STS", &[], &[r(9), r(v)], Addr::at(0).term(Var::Warp, 4));
            c.op("BAR.SYNC.DEFER_BLOCKING", &[], &[]);
            c.mem_stride("LDS", &[r(v)], &[r(9)], Addr::at(0), 0);
            for _ in 0..warps_per_row.trailing_zeros() {
                c.op("SHFL.BFLY", &[r(12)], &[r(v)]).op("FMNMX", &[r(v)], &[r(v), r(12)]);
            }
        }
    };
    let vr = |i: u64, t: u64| 16 + ((t * per_thread + i) * 4 % 96) as u8;
    for (t, &src) in srcs.iter().enumerate() {
        for i in 0..per_thread {
            c.mem("LDG.E.128", &[rr(vr(i, t as u64), 4)], &[rr(2, 2)], row_addr(src, i));
        }
    }
    let elems = per_thread * 8;
    let x = |k: u64| r(16 + (k % 96) as u8);
    match op {
        RowOp::Softmax => {
            for k in 0..elems {
                c.op("HADD2.F32", &[x(k)], &[x(k)]).op("FMNMX", &[r(10)], &[r(10), x(k)]);
            }
            reduce(&mut c, 10);
            for k in 0..elems {
                c.op("FFMA", &[x(k)], &[x(k), r(13), r(10)]).op("MUFU.EX2", &[x(k)], &[x(k)]);
                c.op("FADD", &[r(11)], &[r(11), x(k)]);
            }
            reduce(&mut c, 11);
            c.op("MUFU.RCP", &[r(11)], &[r(11)]);
            for k in 0..elems {
                c.op("FMUL", &[x(k)], &[x(k), r(11)]);
            }
        }
        RowOp::SoftmaxBackward => {
            for k in 0..elems {
                let y = r(16 + ((k + 32) % 96) as u8);
                c.op("HADD2.F32", &[x(k)], &[x(k)]).op("FMUL", &[y], &[x(k), y]);
                c.op("FADD", &[r(11)], &[r(11), y]);
            }
            reduce(&mut c, 11);
            for k in 0..elems {
                c.op("FADD", &[x(k)], &[x(k), r(11)]).op("FMUL", &[x(k)], &[x(k), r(16 + ((k + 32) % 96) as u8)]);
            }
        }
    }
    for k in 0..elems / 2 {
        c.op(s.dtype.pack(), &[r(16 + (k % 96) as u8)], &[rr(16 + (2 * k % 96) as u8, 2)]);
    }
    for i in 0..per_thread {
        c.mem("STG.E.128", &[], &[rr(2, 2), rr(vr(i, 0), 4)], row_addr(dst, i));
    }
    c.op("EXIT", &[], &[]);
    let prog = c.finish();
    let name = match op {
        RowOp::Softmax => format!("softmax_forward_{cols}"),
        RowOp::SoftmaxBackward => format!("softmax_backward_{cols}"),
    };
    let mut info = KernelInfo::new(0, name, Dim3::new(ctas as u32, 1, 1), Dim3::new(threads as u32, 1, 1));
    info.regs_per_thread = 128;
    info.smem_bytes = if warps_per_row > 1 { 4 * 32 } else { 0 };
    info.sm_version = arch.compute_capability.max(80);
    let warps = threads / 32;
    Ok(assemble(info, ops, vec![prog], vec![0; warps as usize], BTreeMap::new())?)
}

/// Scores tensors `[b·h, sq, sk]`: S, P, dP, dS.
fn scores(s: &AttnSpec) -> [u64; 4] {
    let base = Tensors::new(s).scratch;
    let size = (s.batch * s.heads * s.seqlen * s.seqlen_kv() * s.dtype.bytes()).next_multiple_of(2 << 20) + (2 << 20);
    [base, base + size, base + 2 * size, base + 3 * size]
}

pub(crate) fn forward(s: &AttnSpec, arch: &Arch) -> Result<Trace, WorkloadError> {
    check(s, arch)?;
    let (sq, sk, d) = (s.seqlen, s.seqlen_kv(), s.headdim);
    let [sc, p, _, _] = scores(s);
    let softmax = Trace { kernels: vec![row_kernel(s, arch, RowOp::Softmax, &[sc], p)?] };
    Ok(chain(vec![gemm_part(arch, s, sq, sk, d)?, softmax, gemm_part(arch, s, sq, s.headdim_v(), sk)?]))
}

pub(crate) fn backward(s: &AttnSpec, arch: &Arch) -> Result<Trace, WorkloadError> {
    check(s, arch)?;
    let (sq, sk, d, dv) = (s.seqlen, s.seqlen_kv(), s.headdim, s.headdim_v());
    let [_, p, dp, ds] = scores(s);
    let softmax_bwd = Trace { kernels: vec![row_kernel(s, arch, RowOp::SoftmaxBackward, &[dp, p], ds)?] };
    Ok(chain(vec![
        gemm_part(arch, s, sk, dv, sq)?, // dV = Pᵀ·dO
        gemm_part(arch, s, sq, sk, dv)?, // dP = dO·Vᵀ
        softmax_bwd,
        gemm_part(arch, s, sq, d, sk)?, // dQ = dS·K
        gemm_part(arch, s, sk, d, sq)?, // dK = dSᵀ·Q
    ]))
}

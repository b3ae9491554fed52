//! Unfused "PyTorch standard attention" (the baseline of FlashAttention's benchmarks,
//! `attention_pytorch`): the kernels it really launches, in one stream.
//!
//! Forward: the `rearrange` copies of Q (`(b h) t d`) and K (`(b h) d s`, transposing) out of the
//! packed qkv, `S = Q·Kᵀ·scale` (batched GEMM over `b·h`, `baddbmm`), the causal mask added
//! (`scores + triu(-10000)`, an elementwise kernel over the scores), `P = softmax(S)` (a
//! memory-bound row kernel), the einsum's copy of V to `(b h) s d`, `O = P·V` (batched GEMM).
//! Backward: the copy of dO to `(b h) t d`, `dV = Pᵀ·dO`, `dP = dO·Vᵀ`, `dS =
//! softmax_backward(dP, P)` (row kernel), `dQ = dS·K` and `dK = dSᵀ·Q`, each then multiplied by
//! the softmax scale (`baddbmm`'s alpha), and `stack(dq, dk, dv)` into the qkv gradient
//! (unbind's backward). Copies and elementwise kernels are memory streams of the bytes they
//! move ([`crate::streaming`]). The GEMMs are the workloads crate's tuned GEMM recipe
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
//! these sizes the scores, `b·h·sq·sk·2` bytes, exceed the L2 anyway). Dropout with p = 0
//! launches nothing (ATen returns its input). The transposing copy of K is a stream of the same
//! bytes (PyTorch's copy kernel reads one side strided; its sectors are reused through L1/L2).

use std::collections::BTreeMap;

use gpusim_configs::Arch;
use gpusim_isa::{Dim3, KernelInfo, KernelTrace, OpTable, Trace, Var};

use super::{AttnSpec, Tensors, chain};
use crate::asm::{Addr, Code, assemble, r, rr};
use crate::gemm::{self, GemmProblem};
use crate::params::WorkloadError;
use crate::streaming::{Stream, stream_kernel};

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
    // 128 registers, or what fits one CTA on an SM: a 1024-thread CTA (`cunn_SoftMaxForward`
    // above 2048 columns) is compiled for its launch bound, 64 registers on sm_80/sm_90.
    info.regs_per_thread = (arch.sm.registers / threads as u32 / 8 * 8).clamp(16, 128);
    info.smem_bytes = if warps_per_row > 1 { 4 * 32 } else { 0 };
    info.sm_version = arch.compute_capability.max(80);
    let warps = threads / 32;
    Ok(assemble(info, ops, vec![prog], vec![0; warps as usize], BTreeMap::new())?)
}

/// Scores tensors `[b·h, sq, sk]`: S, P, dP, dS.
fn scores(s: &AttnSpec) -> [u64; 4] {
    let base = Tensors::new(s).scratch;
    let size = score_slot(s);
    [base, base + size, base + 2 * size, base + 3 * size]
}

fn score_slot(s: &AttnSpec) -> u64 {
    (s.batch * s.heads * s.seqlen * s.seqlen_kv() * s.dtype.bytes()).next_multiple_of(2 << 20) + (2 << 20)
}

/// Bytes of a `[b, s, h, d]` tensor (`kv`: of K/V's sequence).
fn layout_bytes(s: &AttnSpec, kv: bool, d: u64) -> u64 {
    s.batch * if kv { s.seqlen_kv() } else { s.seqlen } * s.heads * d * s.dtype.bytes()
}

/// The contiguous copies PyTorch makes, after the scores: `[(b h), s, d]` Q, `[(b h), d, s]` K,
/// `[(b h), s, d]` V and dO.
fn copies(s: &AttnSpec) -> [u64; 4] {
    let base = scores(s)[3] + score_slot(s);
    let slot =
        layout_bytes(s, true, s.headdim.max(s.headdim_v())).max(layout_bytes(s, false, s.headdim.max(s.headdim_v())));
    let slot = slot.next_multiple_of(2 << 20) + (2 << 20);
    [base, base + slot, base + 2 * slot, base + 3 * slot]
}

/// A layout copy or an elementwise kernel of PyTorch's: `read` bytes at `src`, `write` at `dst`.
fn elementwise(
    arch: &Arch,
    name: &str,
    src: u64,
    read: u64,
    dst: u64,
    write: u64,
    ffma: u32,
) -> Result<Trace, WorkloadError> {
    let k = stream_kernel(&Stream { name, src, read, dst, write, ffma, exp: false }, arch.compute_capability.max(80))
        .map_err(WorkloadError)?;
    Ok(Trace { kernels: vec![k] })
}

pub(crate) fn forward(s: &AttnSpec, arch: &Arch) -> Result<Trace, WorkloadError> {
    check(s, arch)?;
    let (sq, sk, d) = (s.seqlen, s.seqlen_kv(), s.headdim);
    let t = Tensors::new(s);
    let [sc, p, _, _] = scores(s);
    let [qc, kc, vc, _] = copies(s);
    let (qb, kb, vb) = (layout_bytes(s, false, d), layout_bytes(s, true, d), layout_bytes(s, true, s.headdim_v()));
    let score_bytes = s.batch * s.heads * sq * sk * s.dtype.bytes();
    let mut parts = vec![
        // rearrange(q, 'b t h d -> (b h) t d') and rearrange(k, 'b s h d -> (b h) d s') of the
        // unbound (strided) qkv: two copies.
        elementwise(arch, "copy_rearrange_q", t.q, qb, qc, qb, 0)?,
        elementwise(arch, "copy_transpose_k", t.k, kb, kc, kb, 0)?,
        gemm_part(arch, s, sq, sk, d)?, // baddbmm: S = scale·Q·Kᵀ
    ];
    if s.causal {
        // scores + triu(-10000): the mask is one [sq, sk] matrix, broadcast (cached).
        parts.push(elementwise(arch, "add_causal_mask", sc, score_bytes, sc, score_bytes, 1)?);
    }
    parts.push(Trace { kernels: vec![row_kernel(s, arch, RowOp::Softmax, &[sc], p)?] });
    // einsum('bhts,bshd->bthd', P, v): v to [(b h), s, d], then a batched GEMM.
    parts.push(elementwise(arch, "copy_v", t.v, vb, vc, vb, 0)?);
    parts.push(gemm_part(arch, s, sq, s.headdim_v(), sk)?);
    Ok(chain(parts))
}

pub(crate) fn backward(s: &AttnSpec, arch: &Arch) -> Result<Trace, WorkloadError> {
    check(s, arch)?;
    let (sq, sk, d, dv) = (s.seqlen, s.seqlen_kv(), s.headdim, s.headdim_v());
    let t = Tensors::new(s);
    let [_, p, dp, ds] = scores(s);
    let [qc, kc, _, doc] = copies(s);
    let (qb, kb, ob) = (layout_bytes(s, false, d), layout_bytes(s, true, d), layout_bytes(s, false, dv));
    let vb = layout_bytes(s, true, dv);
    let softmax_bwd = Trace { kernels: vec![row_kernel(s, arch, RowOp::SoftmaxBackward, &[dp, p], ds)?] };
    Ok(chain(vec![
        // The einsum's backward takes dO as [(b h), t, d]: a copy of the [b, t, h, d] gradient.
        elementwise(arch, "copy_dout", t.d_o, ob, doc, ob, 0)?,
        gemm_part(arch, s, sk, dv, sq)?, // dV = Pᵀ·dO
        gemm_part(arch, s, sq, sk, dv)?, // dP = dO·Vᵀ
        softmax_bwd,
        gemm_part(arch, s, sq, d, sk)?, // dQ = dS·K
        // baddbmm's backward scales each product by alpha (softmax_scale ≠ 1): two multiplies.
        elementwise(arch, "mul_scale_dq", qc, qb, qc, qb, 1)?,
        gemm_part(arch, s, sk, d, sq)?, // dK = dSᵀ·Q
        elementwise(arch, "mul_scale_dk", kc, kb, kc, kb, 1)?,
        // unbind's backward: stack(dq, dk, dv) into the packed qkv gradient.
        elementwise(arch, "cat_qkv_grad", qc, qb + kb + vb, t.d_q, qb + kb + vb, 0)?,
    ]))
}

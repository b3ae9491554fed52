//! FlashAttention-2 backward, the sm80 code path (../shared/notes/kernel-designs.md §2): three
//! kernels in one stream.
//!
//! 1. `flash_bwd_dot_do_o` on `grid(⌈sq/128⌉, b, h)`, 256 threads: `D = rowsum(dO∘O)` (fp32) and
//!    the zeroing of the fp32 `dQaccum`.
//! 2. `flash_bwd_dq_dk_dv_loop_seqk_parallel` on `grid(⌈sk/BN⌉, b, h)`, 8 warps: each CTA keeps
//!    one K/V block in shared memory and walks the query blocks `m = m_max−1 … m_min` (causal:
//!    `m_min = ⌊(n·BN + sq − sk)/BM⌋`), per block the five GEMMs S = QKᵀ, dP = dO·Vᵀ,
//!    dV += Pᵀ·dO, dQ = dS·K, dK += dSᵀ·Q, with `P = exp2(S·scale − LSE)` (no running max),
//!    `dS = P∘(dP − D)`, P and dS staged in shared memory, and dQ added element by element into
//!    `dQaccum` with `RED.E.ADD.F32` (FA2's non-deterministic `atomicAdd`). Q is double-buffered,
//!    dO single (3 buffers), the next blocks loaded with `cp.async` during the current one.
//! 3. `flash_bwd_convert_dq` on `grid(⌈sq/128⌉, b, h)`: dQaccum × scale → dQ in the input type.
//!
//! # SASS per warp and query block (8 warps; warp tiles of each GEMM from FA2's atom layouts)
//! ```text
//! DEPBAR.LE SB0 0; BAR.SYNC                                   # Q(m), dO(m) have landed
//! LDG.E LSE, D (the warp's rows)
//! S:   LDSM Q, LDSM K, HMMA;  then LDGSTS Q(m−1); LDGDEPBAR   # Q double-buffered
//! per S element FFMA, then per S element MUFU.EX2 (P); masked: ISETP + FSEL
//! dP:  LDSM dO, LDSM V, HMMA; per element FADD, then per element FMUL (dS)
//! F2FP P, dS; STS P, dS; BAR.SYNC
//! dV:  LDSM.T Pᵀ, LDSM.T dO, HMMA;  then LDGSTS dO(m−1); LDGDEPBAR
//! dQ:  LDSM dS, LDSM.T K, HMMA;  per dQ element RED.E.ADD.F32.FTZ.RN
//! dK:  LDSM.T dSᵀ, LDSM.T Q, HMMA
//! BAR.SYNC; IADD3; ISETP; BRA
//! epilogue: FMUL (dK·scale); F2FP; STS; BAR.SYNC; LDS; STG.E.128 dK, dV; EXIT
//! ```
//! Tensor FLOPs per query block: `10·BM·BN·d`, 2.5× the forward's `4·BM·BN·d`, the convention.
//!
//! # Simplifications
//! Under GQA FA2 writes per-query-head dK/dV (`dk_expanded`) and sums them over the group with a
//! PyTorch reduction; here each query head's CTAs write their own dK/dV slice and that sum kernel
//! is left out. V stays in shared memory (`Is_V_in_regs` configurations re-read it). Partial
//! blocks are computed whole; fragment addresses are conflict-free, as FA2's swizzle makes them.

use std::collections::BTreeMap;

use gpusim_configs::Arch;
use gpusim_isa::{Dim3, KernelInfo, KernelTrace, OpTable, Trace, Var};

use super::sm80::{copies_per_thread, copy_tile, kv_head, loop_tail, mma_name, pitch, store_tile, trip_params};
use super::tensors::{DQ_COL_ROUND, DQ_ROW_ROUND};
use super::{AttnSpec, Tensors};
use crate::asm::{Addr, Code, assemble, p as pred, r, rr, sb};
use crate::params::WorkloadError;

/// The dq_dk_dv kernel's configuration: `Flash_bwd_kernel_traits<d, BM, BN, 8, SdP, dKV, dQ>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BwdTile {
    pub block_m: u64,
    pub block_n: u64,
    /// Warps along M of the S/dP GEMMs, along N of dK/dV, along M of dQ.
    pub atom_sdp: u64,
    pub atom_dkv: u64,
    pub atom_dq: u64,
    pub double_buffer: bool,
}

const WARPS: u64 = 8;
const THREADS: u64 = 256;
/// Rows per CTA of the preprocessing and conversion kernels (FA2's kBlockM there).
const PRE_ROWS: u64 = 128;

/// FA2's `run_mha_bwd_hdim*` choice (no dropout): the A100 column of the notes' table where the
/// chip grants ≥ 144 KB of shared memory per CTA, the smaller-smem column otherwise.
pub fn bwd_tile(arch: &Arch, d: u64) -> Result<BwdTile, WorkloadError> {
    let big = arch.sm.shared_mem_per_cta.0 >= 144 << 10;
    let t =
        |m, n, a, b, c, db| BwdTile { block_m: m, block_n: n, atom_sdp: a, atom_dkv: b, atom_dq: c, double_buffer: db };
    Ok(match d {
        32 => t(128, 128, 4, 4, 4, true),
        64 if big => t(128, 128, 4, 4, 4, true),
        64 => t(64, 128, 2, 4, 4, true),
        128 if big => t(64, 128, 2, 4, 2, true),
        128 => t(64, 64, 4, 2, 2, true),
        256 if arch.sm.shared_mem_per_cta.0 >= 176 << 10 => t(64, 64, 4, 2, 2, true),
        256 if big => t(64, 64, 4, 2, 2, false),
        256 => t(64, 32, 4, 1, 2, false),
        _ => {
            return Err(WorkloadError(format!(
                "headdim = {d}: the fa2 recipe generates head dims 32, 64, 128 and 256"
            )));
        }
    })
}

/// Shared memory of the dq_dk_dv kernel: Q (2 buffers, 1 without double buffering), dO, K, V,
/// P and dS.
pub fn bwd_smem(t: &BwdTile, d: u64, e: u64) -> u64 {
    let q_bufs = if t.double_buffer { 2 } else { 1 };
    ((q_bufs + 1) * t.block_m * d + 2 * t.block_n * d + 2 * t.block_m * t.block_n) * e
}

/// The backward kernels of `s` (the recipe's [`super::PassFn`]).
pub(crate) fn backward(s: &AttnSpec, arch: &Arch) -> Result<Trace, WorkloadError> {
    super::fa2::check(s, arch)?;
    let d = s.headdim;
    let t = bwd_tile(arch, d)?;
    let e = s.dtype.bytes();
    let smem = bwd_smem(&t, d, e);
    if smem > arch.sm.shared_mem_per_cta.0 {
        return Err(WorkloadError(format!(
            "headdim = {d}: the backward's {} KB of shared memory exceed the {} KB per CTA of {}",
            smem >> 10,
            arch.sm.shared_mem_per_cta.0 >> 10,
            arch.name
        )));
    }
    let tens = Tensors::new(s);
    let sm = arch.compute_capability.max(80);
    let kernels = vec![dot_do_o(s, &tens, sm)?, dq_dk_dv(s, &t, &tens, sm, smem)?, convert_dq(s, &tens, sm)?];
    Ok(Trace { kernels })
}

fn info(id: u32, name: String, grid: Dim3, regs: u32, smem: u64, sm: u32) -> KernelInfo {
    let mut i = KernelInfo::new(id, name, grid, Dim3::new(THREADS as u32, 1, 1));
    i.regs_per_thread = regs;
    i.smem_bytes = smem as u32;
    i.sm_version = sm;
    i
}

fn row_grid(s: &AttnSpec) -> Dim3 {
    Dim3::new(s.seqlen.div_ceil(PRE_ROWS) as u32, s.batch as u32, s.heads as u32)
}

/// `[b, s, h, d]` tile of `rows` rows starting at row `cta.x·rows` of head `cta.z`.
fn head_tile(base: u64, seqlen: u64, rows: u64, pitch: u64, col: u64) -> Addr {
    Addr::at(base)
        .term(Var::CtaY, (seqlen * pitch) as i64)
        .term(Var::CtaX, (rows * pitch) as i64)
        .term(Var::CtaZ, col as i64)
}

/// Lane offsets of 16-byte loads of `rows_bytes`-long rows, as [`super::sm80::row_lanes`].
fn lanes(row_bytes: u64, pitch: u64) -> Vec<i64> {
    super::sm80::row_lanes(row_bytes, pitch)
}

/// Loads of a `rows × row_bytes` tile by the CTA's threads with `LDG.E.128` into `dst..`.
fn load_tile(c: &mut Code, src: Addr, rows: u64, row_bytes: u64, pitch: u64, dst: u8) -> u64 {
    let cpr = row_bytes / 16;
    let n = copies_per_thread(rows, row_bytes, THREADS);
    let l = lanes(row_bytes, pitch);
    for i in 0..n {
        let a = src.plus(i * THREADS / cpr * pitch).term(Var::Warp, (32 / cpr * pitch) as i64);
        c.mem_lanes("LDG.E.128", &[rr(dst + 4 * (i % 8) as u8, 4)], &[rr(2, 2)], a, &l);
    }
    n
}

fn dot_do_o(s: &AttnSpec, tens: &Tensors, sm: u32) -> Result<KernelTrace, WorkloadError> {
    let (d, e) = (s.headdim, s.dtype.bytes());
    let p = pitch(s.heads, d, e);
    let mut ops = OpTable::new();
    let mut c = Code::new(&mut ops, "dot_do_o");
    c.op("S2R", &[r(0)], &[]).op("S2R", &[r(1)], &[]).op("IMAD.WIDE", &[rr(2, 2)], &[r(0), r(1)]);
    let n = load_tile(&mut c, head_tile(tens.d_o, s.seqlen, PRE_ROWS, p, d * e), PRE_ROWS, d * e, p, 16);
    load_tile(&mut c, head_tile(tens.o, s.seqlen, PRE_ROWS, p, d * e), PRE_ROWS, d * e, p, 48);
    // 8 elements per 16-byte load: unpack (PRMT/IMAD.U32) and multiply-add.
    for i in 0..n * 8 {
        let (a, b) = (16 + (i % 32) as u8, 48 + (i % 32) as u8);
        c.op("FFMA", &[r(12)], &[r(a), r(b), r(12)]);
    }
    // Row sum across the threads of a row, then one fp32 per row.
    let threads_per_row = (d * e / 16).min(32);
    for _ in 0..threads_per_row.trailing_zeros() {
        c.op("SHFL.BFLY", &[r(13)], &[r(12)]).op("FADD", &[r(12)], &[r(12), r(13)]);
    }
    let rows_per_warp = 32 / threads_per_row;
    let dq_rows = Addr::at(tens.softmax_d)
        .term(Var::CtaY, (s.heads * s.seqlen * 4) as i64)
        .term(Var::CtaZ, (s.seqlen * 4) as i64)
        .term(Var::CtaX, (PRE_ROWS * 4) as i64)
        .term(Var::Warp, (rows_per_warp * 4) as i64);
    for i in 0..PRE_ROWS.div_ceil(WARPS * rows_per_warp) {
        let lanes_d: Vec<i64> = (0..32).map(|l| (l / threads_per_row * 4) as i64).collect();
        c.mem_lanes("STG.E", &[], &[rr(2, 2), r(12)], dq_rows.plus(i * WARPS * rows_per_warp * 4), &lanes_d);
    }
    // Zero dQaccum's rows of this block: [b, sq_r, h, d_r] fp32.
    let dr = d.next_multiple_of(DQ_COL_ROUND);
    let pa = s.heads * dr * 4;
    let sq_r = s.seqlen.next_multiple_of(DQ_ROW_ROUND);
    let acc = head_tile(tens.dq_accum, sq_r, PRE_ROWS, pa, dr * 4);
    if dr * 4 <= 512 && (dr * 4).is_power_of_two() {
        store_tile(&mut c, acc, PRE_ROWS, dr * 4, pa, THREADS, 16);
    } else {
        // d_r·4 = 1024 (d = 256): two halves of 512 B.
        store_tile(&mut c, acc, PRE_ROWS, 512, pa, THREADS, 16);
        store_tile(&mut c, acc.plus(512), PRE_ROWS, 512, pa, THREADS, 16);
    }
    c.op("EXIT", &[], &[]);
    let prog = c.finish();
    let name = format!("flash_bwd_dot_do_o_kernel_hdim{d}");
    Ok(assemble(info(0, name, row_grid(s), 64, 0, sm), ops, vec![prog], vec![0; WARPS as usize], BTreeMap::new())?)
}

fn convert_dq(s: &AttnSpec, tens: &Tensors, sm: u32) -> Result<KernelTrace, WorkloadError> {
    let (d, e) = (s.headdim, s.dtype.bytes());
    let dr = d.next_multiple_of(DQ_COL_ROUND);
    let pa = s.heads * dr * 4;
    let sq_r = s.seqlen.next_multiple_of(DQ_ROW_ROUND);
    let mut ops = OpTable::new();
    let mut c = Code::new(&mut ops, "convert_dq");
    c.op("S2R", &[r(0)], &[]).op("S2R", &[r(1)], &[]).op("IMAD.WIDE", &[rr(2, 2)], &[r(0), r(1)]);
    let acc = head_tile(tens.dq_accum, sq_r, PRE_ROWS, pa, dr * 4);
    let n = if d * 4 <= 512 {
        load_tile(&mut c, acc, PRE_ROWS, d * 4, pa, 16)
    } else {
        load_tile(&mut c, acc, PRE_ROWS, 512, pa, 16) + load_tile(&mut c, acc.plus(512), PRE_ROWS, 512, pa, 48)
    };
    for i in 0..n * 4 {
        let x = r(16 + (i % 64) as u8);
        c.op("FMUL", &[x], &[x, r(12)]);
    }
    for i in 0..n * 2 {
        c.op(s.dtype.pack(), &[r(16 + (i % 32) as u8)], &[rr(16 + (2 * i % 64) as u8, 2)]);
    }
    let p = pitch(s.heads, d, e);
    store_tile(&mut c, head_tile(tens.d_q, s.seqlen, PRE_ROWS, p, d * e), PRE_ROWS, d * e, p, THREADS, 16);
    c.op("EXIT", &[], &[]);
    let prog = c.finish();
    let name = format!("flash_bwd_convert_dq_kernel_hdim{d}");
    let mut i = info(2, name, row_grid(s), 96, 0, sm);
    i.deps = vec![1];
    Ok(assemble(i, ops, vec![prog], vec![0; WARPS as usize], BTreeMap::new())?)
}

/// Register bases of the main kernel.
struct Regs {
    fa: u8,
    fb: u8,
    s: u8,
    dp: u8,
    dq: u8,
    dk: u8,
    dv: u8,
    total: u64,
}

/// A warp's share of an `m × n × k` GEMM with `wm` warps along M (of 8): its LDSM and HMMA.
struct Gemm {
    /// m-atoms (16) and n-atoms (8) of the warp tile; k-slices (16).
    mi: u64,
    nj: u64,
    ks: u64,
}

impl Gemm {
    fn new(m: u64, n: u64, k: u64, wm: u64) -> Gemm {
        let wn = WARPS / wm;
        Gemm { mi: (m / wm / 16).max(1), nj: (n / wn / 8).max(1), ks: k / 16 }
    }

    fn acc_regs(&self) -> u64 {
        self.mi * self.nj * 4
    }

    /// Emits the GEMM: per k-slice the A fragments (`mi` LDSM.x4) and B fragments (`nj/2`), then
    /// the `mi·nj` HMMAs into `acc`. Shared-memory operands at `a_off`/`b_off`, 512 B per LDSM.
    #[allow(clippy::too_many_arguments)]
    fn emit(&self, c: &mut Code, mma: &str, a: (&str, u64), b: (&str, u64), acc: u8, g: &Regs, accumulate: bool) {
        let per_warp_a = self.mi * self.ks * 512;
        for ks in 0..self.ks {
            for i in 0..self.mi {
                let addr = Addr::at(a.1 + (i * self.ks + ks) * 512).term(Var::Warp, per_warp_a as i64);
                c.mem(a.0, &[rr(g.fa + 4 * (i % 2) as u8, 4)], &[r(9)], addr);
            }
            for j2 in 0..self.nj.div_ceil(2) {
                let fb = g.fb + 4 * (j2 % 2) as u8;
                c.mem(b.0, &[rr(fb, 4)], &[r(9)], Addr::at(b.1 + (j2 * self.ks + ks) * 512));
                for i in 0..self.mi {
                    for h in 0..2.min(self.nj - 2 * j2) {
                        let j = 2 * j2 + h;
                        let x = rr(acc + (4 * (i * self.nj + j)) as u8, 4);
                        let (fa, fbh) = (rr(g.fa + 4 * (i % 2) as u8, 4), rr(fb + 2 * h as u8, 2));
                        if ks == 0 && !accumulate {
                            c.op(mma, &[x], &[fa, fbh])
                        } else {
                            c.op(mma, &[x], &[fa, fbh, x])
                        };
                    }
                }
            }
        }
    }
}

fn dq_dk_dv(s: &AttnSpec, t: &BwdTile, tens: &Tensors, sm: u32, smem: u64) -> Result<KernelTrace, WorkloadError> {
    let (d, e) = (s.headdim, s.dtype.bytes());
    let (bm, bn) = (t.block_m, t.block_n);
    let gs = Gemm::new(bm, bn, d, t.atom_sdp);
    let gv = Gemm::new(bn, d, bm, t.atom_dkv);
    let gq = Gemm::new(bm, d, bn, t.atom_dq);
    let n_s = gs.acc_regs();
    let base = 16u8;
    let (fa, fb) = (base, base + 8);
    let sr = fb + 8;
    let dp = sr + n_s as u8;
    let after_sdp = dp as u64 + n_s;
    // dQ's accumulators reuse S and dP (both staged in shared memory by then) when they fit.
    let (dq, after_dq) =
        if gq.acc_regs() <= 2 * n_s { (sr, after_sdp) } else { (after_sdp as u8, after_sdp + gq.acc_regs()) };
    let dk = after_dq as u8;
    let total = after_dq + 2 * gv.acc_regs();
    if total > 255 {
        return Err(WorkloadError(format!("headdim = {d}: {total} registers per thread exceed 255 in the backward")));
    }
    let g = Regs { fa, fb, s: sr, dp, dq, dk, dv: dk + gv.acc_regs() as u8, total: total.next_multiple_of(8).min(255) };
    let mma = mma_name(s.dtype);
    let pq = pitch(s.heads, d, e);
    let pkv = pitch(s.kv_heads(), d, e);
    let tiles_n = s.seqlen_kv().div_ceil(bn);
    let even = s.varlen.is_none() && s.seqlen.is_multiple_of(bm) && s.seqlen_kv().is_multiple_of(bn);
    let mask_steps = if s.causal { bn.div_ceil(bm) + u64::from(!even) } else { u64::from(!even) };
    // Shared memory: Q buffers, dO, K, V, P, dS.
    let q_bufs = if t.double_buffer { 2 } else { 1 };
    let s_q = 0;
    let s_do = q_bufs * bm * d * e;
    let s_k = s_do + bm * d * e;
    let s_v = s_k + bn * d * e;
    let s_p = s_v + bn * d * e;
    let s_ds = s_p + bm * bn * e;

    let mut ops = OpTable::new();
    let mut c = Code::new(&mut ops, "dq_dk_dv");
    let hk = kv_head(&mut c, s.group());
    // Trip counts of KV block n: unmasked blocks first (m from m_max−1 down), the masked ones
    // (the diagonal) last; the last iteration prefetches nothing.
    let [valid, tu, tm, tlm, tlu] = trip_params(&mut c, s, tiles_n, |b, n| {
        let (sq_b, sk_b) = s.lengths(b);
        if n * bn >= sk_b {
            return [0; 5];
        }
        let m_max = sq_b.div_ceil(bm) as i64;
        let m_min = if s.causal { ((n * bn + sq_b) as i64 - sk_b as i64).div_euclid(bm as i64).max(0) } else { 0 };
        let total = (m_max - m_min).max(0) as u64;
        let masked = mask_steps.min(total);
        let unmasked = total - masked;
        let c4 = if total == 0 {
            [0; 4]
        } else if masked > 0 {
            [unmasked as i64, masked as i64 - 1, 1, 0]
        } else {
            [unmasked as i64 - 1, 0, 0, 1]
        };
        [1, c4[0], c4[1], c4[2], c4[3]]
    });
    c.op("S2R", &[r(0)], &[]).op("S2R", &[r(1)], &[]);
    let wrap = s.varlen.is_some();
    if wrap {
        c.begin_param(valid);
    }
    for q in 2..8 {
        c.op("IMAD.WIDE", &[rr(2 * (q / 2), 2)], &[r(0), r(1)]);
    }
    let row = d * e;
    let kv = |base: u64| {
        Addr::at(base)
            .term(Var::CtaY, (s.seqlen_kv() * pkv) as i64)
            .term(Var::CtaX, (bn * pkv) as i64)
            .term(hk, (d * e) as i64)
    };
    // Query block m = konst + Σ coef·var of tensor `base` ([b, sq, h, d]).
    let qblk = |base: u64, n: &[(Var, i64)], konst: i64| {
        let tile = (bm * pq) as i64;
        let mut a = Addr::at(base)
            .term(Var::CtaY, (s.seqlen * pq) as i64)
            .term(Var::CtaZ, (d * e) as i64)
            .plus_signed(konst * tile);
        for &(v, k) in n {
            a = a.term(v, k * tile);
        }
        a
    };
    copy_tile(&mut c, kv(tens.k), bn, row, pkv, THREADS, (8, 4));
    copy_tile(&mut c, kv(tens.v), bn, row, pkv, THREADS, (8, 6));
    let all = [(tu, 1), (tm, 1), (tlm, 1), (tlu, 1)];
    // m_max − 1 = m_min + trips − 1; m_min is 0 for non-causal, else per CTA: read it from
    // the trip counts' complement (m_max − trips).
    let m_top: Vec<(Var, i64)> = all.to_vec();
    let top_konst = -1;
    let m_min_p = if s.causal {
        let p = trip_params(&mut c, s, tiles_n, |b, n| {
            let (sq_b, sk_b) = s.lengths(b);
            [((n * bn + sq_b) as i64 - sk_b as i64).div_euclid(bm as i64).max(0)]
        });
        Some(p[0])
    } else {
        None
    };
    let with_min = |mut v: Vec<(Var, i64)>| {
        if let Some(p) = m_min_p {
            v.push((p, 1));
        }
        v
    };
    copy_tile(&mut c, qblk(tens.q, &with_min(m_top.clone()), top_konst), bm, row, pq, THREADS, (8, 2));
    copy_tile(&mut c, qblk(tens.d_o, &with_min(m_top.clone()), top_konst), bm, row, pq, THREADS, (8, 2));
    c.op("LDGDEPBAR", &[], &[]);
    // The dQ warp tile: warp w covers rows (w % atom_dq) and columns (w / atom_dq).
    let wcol =
        c.param(gpusim_isa::CtaParam { div: t.atom_dq as i64, ..gpusim_isa::CtaParam::default().with(Var::Warp, 1) });
    let ctx = Ctx {
        s,
        t,
        tens,
        g: &g,
        gs: &gs,
        gv: &gv,
        gq: &gq,
        mma,
        pq,
        s_q,
        s_do,
        s_k,
        s_v,
        s_p,
        s_ds,
        qblk: &qblk,
        wcol,
    };
    // Unmasked iterations (with prefetch): m = m_top − i.
    let i = c.begin_param(tu);
    ctx.iteration(&mut c, &with_min(vec![(tu, 1), (tm, 1), (tlm, 1), (tlu, 1), (i, -1)]), -1, false, true);
    c.end();
    if mask_steps > 0 {
        let i = c.begin_param(tm);
        ctx.iteration(&mut c, &with_min(vec![(tm, 1), (tlm, 1), (i, -1)]), -1, true, true);
        c.end();
        c.begin_param(tlm);
        ctx.iteration(&mut c, &with_min(vec![]), 0, true, false);
        c.end();
    }
    c.begin_param(tlu);
    ctx.iteration(&mut c, &with_min(vec![]), 0, false, false);
    c.end();
    // Epilogue: dK·scale, pack, through shared memory, 16-byte rows of dK and dV.
    let kv_acc = gv.acc_regs();
    for k in 0..kv_acc {
        c.op("FMUL", &[r(g.dk + k as u8)], &[r(g.dk + k as u8), r(12)]);
    }
    for k in 0..kv_acc {
        c.op(s.dtype.pack(), &[r(g.dk + k as u8)], &[rr(g.dk + (2 * k % (2 * kv_acc)) as u8, 2)]);
    }
    c.op("BAR.SYNC.DEFER_BLOCKING", &[], &[]);
    let warp_bytes = bn * d * e / WARPS;
    for k in 0..2 * warp_bytes / 512 {
        let addr = Addr::at(s_k + k * 512).term(Var::Warp, 2 * warp_bytes as i64);
        c.mem("STS.128", &[], &[r(9), rr(g.dk + (4 * k % (2 * kv_acc)) as u8, 4)], addr);
    }
    c.op("BAR.SYNC.DEFER_BLOCKING", &[], &[]);
    let per = copies_per_thread(bn, row, THREADS);
    for k in 0..2 * per {
        let addr = Addr::at(s_k + k * THREADS * 16).term(Var::Warp, 512);
        c.mem("LDS.128", &[rr(g.dk + (4 * k % (2 * kv_acc)) as u8, 4)], &[r(9)], addr);
    }
    // dK/dV of the query head (see the module documentation for GQA).
    let out = |base: u64| {
        Addr::at(base)
            .term(Var::CtaY, (s.seqlen_kv() * pkv) as i64)
            .term(Var::CtaX, (bn * pkv) as i64)
            .term(hk, (d * e) as i64)
    };
    store_tile(&mut c, out(tens.d_k), bn, row, pkv, THREADS, g.dk);
    store_tile(&mut c, out(tens.d_v), bn, row, pkv, THREADS, g.dv);
    if wrap {
        c.end();
    }
    c.op("EXIT", &[], &[]);
    let prog = c.finish();
    let name = format!(
        "flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel_hdim{d}_{bm}x{bn}{}",
        if s.causal { "_causal" } else { "" }
    );
    let grid = Dim3::new(tiles_n as u32, s.batch as u32, s.heads as u32);
    let mut i = info(1, name, grid, g.total as u32, smem, sm);
    i.deps = vec![0];
    Ok(assemble(i, ops, vec![prog], vec![0; WARPS as usize], BTreeMap::new())?)
}

type QBlock<'a> = dyn Fn(u64, &[(Var, i64)], i64) -> Addr + 'a;

/// What one query-block iteration of the main kernel needs.
struct Ctx<'a> {
    s: &'a AttnSpec,
    t: &'a BwdTile,
    tens: &'a Tensors,
    g: &'a Regs,
    gs: &'a Gemm,
    gv: &'a Gemm,
    gq: &'a Gemm,
    mma: &'static str,
    pq: u64,
    s_q: u64,
    s_do: u64,
    s_k: u64,
    s_v: u64,
    s_p: u64,
    s_ds: u64,
    qblk: &'a QBlock<'a>,
    wcol: Var,
}

impl Ctx<'_> {
    /// One query block `m = konst + Σ coef·var`.
    fn iteration(&self, c: &mut Code, m: &[(Var, i64)], konst: i64, masked: bool, prefetch: bool) {
        let (s, g) = (self.s, self.g);
        let (d, e) = (s.headdim, s.dtype.bytes());
        let (bm, bn) = (self.t.block_m, self.t.block_n);
        let row = d * e;
        c.op_imm("DEPBAR.LE", &[sb(0)], &[], 0).op("BAR.SYNC.DEFER_BLOCKING", &[], &[]);
        // LSE and D of the warp's rows (fp32 [b, h, sq]).
        for (base, reg) in [(self.tens.lse, 13u8), (self.tens.softmax_d, 14u8)] {
            let mut a = Addr::at(base)
                .term(Var::CtaY, (s.heads * s.seqlen * 4) as i64)
                .term(Var::CtaZ, (s.seqlen * 4) as i64)
                .plus_signed(konst * (bm * 4) as i64);
            for &(v, k) in m {
                a = a.term(v, k * (bm * 4) as i64);
            }
            c.mem_stride("LDG.E", &[r(reg)], &[rr(2, 2)], a, 0);
        }
        let n_s = self.gs.acc_regs();
        self.gs.emit(c, self.mma, ("LDSM.16.M88.4", self.s_q), ("LDSM.16.M88.4", self.s_k), g.s, g, false);
        if prefetch {
            copy_tile(c, (self.qblk)(self.tens.q, m, konst - 1), bm, row, self.pq, THREADS, (8, 2));
            c.op("LDGDEPBAR", &[], &[]);
        }
        // P = exp2(S·scale − LSE): every FFMA before the first MUFU.EX2, as ptxas orders them (a
        // warp issues in order: FFMA → MUFU per element would wait out the FFMA latency at each).
        for k in 0..n_s {
            let x = r(g.s + k as u8);
            c.op("FFMA", &[x], &[x, r(12), r(13)]);
        }
        for k in 0..n_s {
            let x = r(g.s + k as u8);
            c.op("MUFU.EX2", &[x], &[x]);
        }
        if masked {
            for k in 0..n_s {
                let x = r(g.s + k as u8);
                c.op("ISETP.GE.AND", &[pred(1)], &[r(1)]).op("FSEL", &[x], &[x, pred(1)]);
            }
        }
        self.gs.emit(c, self.mma, ("LDSM.16.M88.4", self.s_do), ("LDSM.16.M88.4", self.s_v), g.dp, g, false);
        // dS = P∘(dP − D), the FADDs first for the same reason.
        for k in 0..n_s {
            let x = r(g.dp + k as u8);
            c.op("FADD", &[x], &[x, r(14)]);
        }
        for k in 0..n_s {
            let (x, p) = (r(g.dp + k as u8), r(g.s + k as u8));
            c.op("FMUL", &[x], &[x, p]);
        }
        for k in 0..n_s / 2 {
            c.op(s.dtype.pack(), &[r(g.s + k as u8)], &[rr(g.s + 2 * k as u8, 2)]);
            c.op(s.dtype.pack(), &[r(g.dp + k as u8)], &[rr(g.dp + 2 * k as u8, 2)]);
        }
        let warp_share = bm * bn * e / WARPS;
        for (off, reg) in [(self.s_p, g.s), (self.s_ds, g.dp)] {
            for k in 0..warp_share / 512 {
                let addr = Addr::at(off + k * 512).term(Var::Warp, warp_share as i64);
                c.mem("STS.128", &[], &[r(9), rr(reg + (4 * k % n_s.max(4)) as u8, 4)], addr);
            }
        }
        c.op("BAR.SYNC.DEFER_BLOCKING", &[], &[]);
        self.gv.emit(c, self.mma, ("LDSM.16.MT88.4", self.s_p), ("LDSM.16.MT88.4", self.s_do), g.dv, g, true);
        if prefetch {
            copy_tile(c, (self.qblk)(self.tens.d_o, m, konst - 1), bm, row, self.pq, THREADS, (8, 2));
            c.op("LDGDEPBAR", &[], &[]);
        }
        self.gq.emit(c, self.mma, ("LDSM.16.M88.4", self.s_ds), ("LDSM.16.MT88.4", self.s_k), g.dq, g, false);
        // dQ into dQaccum, one fp32 atomic per accumulator element: lane l of the warp holds
        // row l/4, columns 2·(l%4) + {0, 1} of each 16×8 atom (the mma accumulator layout).
        let dr = d.next_multiple_of(DQ_COL_ROUND);
        let pa = s.heads * dr * 4;
        let sq_r = s.seqlen.next_multiple_of(DQ_ROW_ROUND);
        let wn = WARPS / self.t.atom_dq;
        let (wrows, wcols) = (bm / self.t.atom_dq, d / wn);
        let lanes: Vec<i64> = (0..32).map(|l| ((l / 4) * pa + (l % 4) * 8) as i64).collect();
        for i in 0..self.gq.mi {
            for j in 0..self.gq.nj {
                for k in 0..4u64 {
                    let off = (i * 16 + (k / 2) * 8) * pa + (j * 8) * 4 + (k % 2) * 4;
                    // Warp w: rows (w % atom_dq)·wrows, columns (w / atom_dq)·wcols.
                    let mut a = Addr::at(self.tens.dq_accum + off)
                        .term(Var::CtaY, (sq_r * pa) as i64)
                        .term(Var::CtaZ, (dr * 4) as i64)
                        .plus_signed(konst * (bm * pa) as i64)
                        .term(Var::Warp, (wrows * pa) as i64)
                        .term(self.wcol, (wcols * 4) as i64 - (self.t.atom_dq * wrows * pa) as i64);
                    for &(v, c2) in m {
                        a = a.term(v, c2 * (bm * pa) as i64);
                    }
                    let x = r(g.dq + (4 * (i * self.gq.nj + j) + k) as u8);
                    c.mem_lanes("RED.E.ADD.F32.FTZ.RN.STRONG.GPU", &[], &[rr(2, 2), x], a, &lanes);
                }
            }
        }
        self.gv.emit(c, self.mma, ("LDSM.16.MT88.4", self.s_ds), ("LDSM.16.MT88.4", self.s_q), g.dk, g, true);
        c.op("BAR.SYNC.DEFER_BLOCKING", &[], &[]);
        loop_tail(c, 10);
    }
}

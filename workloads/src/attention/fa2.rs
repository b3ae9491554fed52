//! FlashAttention-2 forward, the sm80 code path (`flash_fwd_kernel`, `compute_attn_1rowblock`;
//! ../shared/notes/kernel-designs.md §1), one kernel on `grid(⌈sq/BM⌉, b, h)`.
//!
//! # SASS per warp (warps split the BM rows; each sees the whole BN extent)
//! ```text
//! S2R ×2; IMAD.WIDE ×3; MOV ×2
//! LDGSTS Q tile; LDGSTS K(n_max−1); LDGDEPBAR
//! per KV block n = n_max−1 down to 0 (masked iterations first, the last without K prefetch):
//!   DEPBAR.LE SB0 0; BAR.SYNC; LDGSTS V(n); LDGDEPBAR                 # K(n) has landed
//!   d/16 × [ms × LDSM.16.M88.4 (Q); BN/16 × (LDSM.16.M88.4 (K); 2·ms × HMMA)]   # S = QKᵀ
//!   masked only: BN/8 × IADD3; per S element ISETP.GE.AND + FSEL        # causal / boundary
//!   DEPBAR.LE SB0 0; BAR.SYNC; LDGSTS K(n−1); LDGDEPBAR                # V(n) has landed
//!   softmax_rescale_o: per S element FMNMX; per row 2 × (SHFL.BFLY; FMNMX), FADD, FMUL,
//!     MUFU.EX2, FMUL (m·scale), FMUL (row sum rescale); per S element FFMA; per S element
//!     MUFU.EX2, the per-O-element rescale FMULs between them; per S element FADD (row sum)
//!   per S pair F2FP.PACK_AB                                              # P in registers
//!   BN/16 × [d/16 × (LDSM.16.MT88.4 (Vᵀ); 2·ms × HMMA)]                  # O += P·V
//!   IADD3; ISETP.GT.AND; BRA
//! epilogue: per row 2 × (SHFL.BFLY; FADD), MUFU.RCP, MUFU.LG2, FFMA; per O element FMUL;
//!   F2FP; BAR.SYNC; STS.128; BAR.SYNC; LDS.128; STG.E.128 (O); STG.E (LSE); EXIT
//! ```
//! `ms = BM/(16·warps)` m-atoms per warp. For d = 128 (128×64, 4 warps) that is per warp and
//! iteration 256 HMMA, 80 LDSM (16 Q, 32 K, 32 Vᵀ), 16 LDGSTS, 68 MUFU.EX2, 128 rescale FMUL,
//! 8 SHFL, 2 BAR, the counts of the notes' table (pinned by `workloads/tests/attention_fa2.rs`).
//!
//! # Per-CTA work
//! `n_block_max = ⌈sk/BN⌉`, capped for causal at `⌈((m+1)·BM + sk − sq)/BN⌉` (bottom-right
//! aligned); fully masked blocks are never visited. The first `n_masking_steps` iterations mask:
//! `⌈BM/BN⌉` for causal (+1 unless the lengths are whole tiles), 1 for non-causal with ragged
//! lengths, else none. The four trip counts (masked/unmasked, with/without K prefetch) are
//! per-CTA parameters read from tables indexed by the query tile (and the request under varlen),
//! so one program serves every CTA. Under varlen a CTA whose tile starts past its request's
//! length runs nothing but its `EXIT` (FA2 returns at once); partial tiles are computed whole
//! (FA2 zero-fills the rows past the end: same instructions, fewer bytes; here the bytes of the
//! whole tile are read).
//!
//! # Simplifications
//! Shared-memory fragments are addressed conflict-free (FA2's `Swizzle<3,3,3>` layout is); head
//! dims 96 and 192 (non-power-of-two rows) are not generated; dropout, ALiBi, local windows and
//! softcap are not modelled. Registers: the accumulators, fragments and row state the code
//! keeps live, rounded up to 8 (FA2's kernels sit near the 255 cap; the occupancy is the same:
//! 2 CTAs/SM for the 4-warp configurations, 1 for the 8-warp one).

use std::collections::BTreeMap;

use gpusim_configs::Arch;
use gpusim_isa::{Dim3, KernelInfo, OpTable, Program, Trace, Var};

use super::sm80::{copies_per_thread, copy_tile, fwd_trips, kv_head, loop_tail, mma_name, pitch, trip_params};
use super::{AttnSpec, Tensors};
use crate::asm::{Addr, Code, assemble, p as pred, r, rr, sb};
use crate::gemm::Dtype;
use crate::params::WorkloadError;

/// Tile configuration of the forward kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fa2Tile {
    pub block_m: u64,
    pub block_n: u64,
    pub warps: u64,
}

/// FA2's `run_mha_fwd_hdim*` choice for head dim `d` (no dropout) on `arch`: the A100 row of the
/// notes' table where the SM has ≥ 160 KB of shared memory (A100, H100), the sm86/89 variants
/// otherwise.
pub fn fwd_tile(arch: &Arch, d: u64, causal: bool) -> Result<Fa2Tile, WorkloadError> {
    let big_smem = arch.sm.shared_mem_per_sm.0 >= 160 << 10;
    let t = |m, n, w| Fa2Tile { block_m: m, block_n: n, warps: w };
    Ok(match d {
        32 | 64 => t(128, 128, 4),
        128 if big_smem => t(128, 64, 4),
        128 if causal => t(64, 64, 4),
        128 => t(128, 32, 4),
        256 if arch.sm.shared_mem_per_cta.0 >= 128 << 10 && arch.sm.shared_mem_per_sm.0 < 192 << 10 => t(128, 64, 8),
        256 => t(64, 64, 4),
        _ => {
            return Err(WorkloadError(format!(
                "headdim = {d}: the fa2 recipe generates head dims 32, 64, 128 and 256"
            )));
        }
    })
}

/// Everything the forward program needs.
struct Plan {
    t: Fa2Tile,
    d: u64,
    e: u64,
    dtype: Dtype,
    threads: u64,
    /// m-atoms (16 rows) per warp.
    ms: u64,
    /// 8-column n-atoms of S per warp (BN/8) and of O (d/8).
    nn: u64,
    nd: u64,
    tiles_m: u64,
    mask_steps: u64,
    tens: Tensors,
    pitch_q: u64,
    pitch_kv: u64,
    regs: Regs,
}

/// Register bases.
#[derive(Clone, Copy)]
struct Regs {
    /// Row max, row sum, rescale factor, scaled max (one per row of the thread).
    m: u8,
    l: u8,
    sc: u8,
    t: u8,
    qf: u8,
    fr: u8,
    s: u8,
    o: u8,
    total: u64,
}

const TID: u8 = 0;
const GQ: u8 = 2;
const GK: u8 = 4;
const GV: u8 = 6;
const SW: u8 = 8;
const SR: u8 = 9;
const CNT: u8 = 10;
const SCALE: u8 = 11;
const TMP: u8 = 12;

/// Checks the problem against what the forward generates, and the chip.
pub(crate) fn check(s: &AttnSpec, arch: &Arch) -> Result<(), WorkloadError> {
    let err = |m: String| Err(WorkloadError(m));
    if arch.compute_capability < 80 {
        return err(format!(
            "the fa2 recipe needs compute capability 8.0; {} is {}",
            arch.name, arch.compute_capability
        ));
    }
    if s.dtype == Dtype::Fp8 {
        return err("dtype = fp8: the fa2 recipe is bf16/fp16 (fp8 attention is fa3's)".into());
    }
    if s.headdim_v() != s.headdim {
        return err(format!("headdim_v = {} must equal headdim = {} for fa2", s.headdim_v(), s.headdim));
    }
    if s.page_size.is_some() || s.num_splits.is_some() {
        return err("page_size and num_splits are decode parameters (recipe decode)".into());
    }
    Ok(())
}

fn plan(s: &AttnSpec, arch: &Arch) -> Result<Plan, WorkloadError> {
    check(s, arch)?;
    let d = s.headdim;
    let t = fwd_tile(arch, d, s.causal)?;
    let e = s.dtype.bytes();
    let threads = 32 * t.warps;
    let ms = t.block_m / (16 * t.warps);
    let (nn, nd) = (t.block_n / 8, d / 8);
    let even = s.varlen.is_none() && s.seqlen.is_multiple_of(t.block_m) && s.seqlen_kv().is_multiple_of(t.block_n);
    let mask_steps = if s.causal { t.block_m.div_ceil(t.block_n) + u64::from(!even) } else { u64::from(!even) };
    let rows = 2 * ms as u8;
    let base = 16u8;
    let (m, l, sc, tt) = (base, base + rows, base + 2 * rows, base + 3 * rows);
    let qf = base + 4 * rows;
    let fr = qf + 4 * ms as u8;
    let sacc = fr + 16;
    let s_regs = ms * nn * 4;
    let o_regs = ms * nd * 4;
    let total = sacc as u64 + s_regs + o_regs;
    if total > 255 {
        return Err(WorkloadError(format!("headdim = {d}: {total} registers per thread exceed 255")));
    }
    let o = sacc + s_regs as u8;
    let tiles_m = s.seqlen.div_ceil(t.block_m);
    if tiles_m > u32::MAX as u64 / 2 || s.batch * s.heads > u32::MAX as u64 / 2 {
        return Err(WorkloadError("the grid is too large".into()));
    }
    Ok(Plan {
        t,
        d,
        e,
        dtype: s.dtype,
        threads,
        ms,
        nn,
        nd,
        tiles_m,
        mask_steps,
        tens: Tensors::new(s),
        pitch_q: pitch(s.heads, d, e),
        pitch_kv: pitch(s.kv_heads(), d, e),
        regs: Regs { m, l, sc, t: tt, qf, fr, s: sacc, o, total: total.next_multiple_of(8).min(255) },
    })
}

/// Shared memory of the forward: Q, K and V tiles, single-buffered.
pub fn fwd_smem(t: &Fa2Tile, d: u64, e: u64) -> u64 {
    (t.block_m + 2 * t.block_n) * d * e
}

/// The forward kernel of `s` (the recipe's [`super::PassFn`]).
pub(crate) fn forward(s: &AttnSpec, arch: &Arch) -> Result<Trace, WorkloadError> {
    let pl = plan(s, arch)?;
    let smem = fwd_smem(&pl.t, pl.d, pl.e);
    if smem > arch.sm.shared_mem_per_cta.0 {
        return Err(WorkloadError(format!(
            "headdim = {}: {} KB of shared memory exceed the {} KB per CTA of {}",
            pl.d,
            smem >> 10,
            arch.sm.shared_mem_per_cta.0 >> 10,
            arch.name
        )));
    }
    let mut ops = OpTable::new();
    let prog = program(s, &pl, &mut ops);
    let grid = Dim3::new(pl.tiles_m as u32, s.batch as u32, s.heads as u32);
    let name = format!(
        "flash_fwd_kernel_hdim{}_{}x{}_{}w{}",
        pl.d,
        pl.t.block_m,
        pl.t.block_n,
        pl.t.warps,
        if s.causal { "_causal" } else { "" }
    );
    let mut info = KernelInfo::new(0, name, grid, Dim3::new(pl.threads as u32, 1, 1));
    info.regs_per_thread = pl.regs.total as u32;
    info.smem_bytes = smem as u32;
    info.sm_version = arch.compute_capability.max(80);
    let default = vec![0; pl.t.warps as usize];
    let k = assemble(info, ops, vec![prog], default, BTreeMap::new())?;
    Ok(Trace { kernels: vec![k] })
}

/// KV block `n` (`konst + Σ coef·var`) of the K or V tensor at `base` for the CTA's request and
/// KV head.
fn kv_tile(s: &AttnSpec, pl: &Plan, base: u64, hk: Var, n: &[(Var, i64)], konst: i64) -> Addr {
    let tile = (pl.t.block_n * pl.pitch_kv) as i64;
    let mut a = Addr::at(base)
        .term(Var::CtaY, (s.seqlen_kv() * pl.pitch_kv) as i64)
        .term(hk, (pl.d * pl.e) as i64)
        .plus_signed(konst * tile);
    for &(v, c) in n {
        a = a.term(v, c * tile);
    }
    a
}

fn program(s: &AttnSpec, pl: &Plan, ops: &mut OpTable) -> Program {
    let mut c = Code::new(ops, "flash_fwd");
    let (bm, bn) = (pl.t.block_m, pl.t.block_n);
    let hk = kv_head(&mut c, s.group());
    let [valid, ta, tb, tc, td] = trip_params(&mut c, s, pl.tiles_m, |b, m| {
        let (sq_b, sk_b) = s.lengths(b);
        if m * bm >= sq_b {
            return [0; 5];
        }
        let nb = sk_b.div_ceil(bn) as i64;
        let n_max = if s.causal {
            let cap = (((m + 1) * bm + sk_b) as i64 - sq_b as i64 + bn as i64 - 1).div_euclid(bn as i64);
            nb.min(cap).max(0)
        } else {
            nb
        };
        let [a, b2, c2, d2] = fwd_trips(n_max as u64, pl.mask_steps);
        [1, a, b2, c2, d2]
    });
    c.op("S2R", &[r(TID)], &[]).op("S2R", &[r(1)], &[]);
    let wrap = s.varlen.is_some();
    if wrap {
        c.begin_param(valid);
    }
    c.op("IMAD.WIDE", &[rr(GQ, 2)], &[r(1), r(TID)]);
    c.op("IMAD.WIDE", &[rr(GK, 2)], &[r(1), r(TID)]).op("IMAD.WIDE", &[rr(GV, 2)], &[r(1), r(TID)]);
    c.op("MOV", &[r(SCALE)], &[]).op("MOV", &[r(CNT)], &[]);
    let row_bytes = pl.d * pl.e;
    let q_tile = Addr::at(pl.tens.q)
        .term(Var::CtaY, (s.seqlen * pl.pitch_q) as i64)
        .term(Var::CtaX, (bm * pl.pitch_q) as i64)
        .term(Var::CtaZ, (pl.d * pl.e) as i64);
    copy_tile(&mut c, q_tile, bm, row_bytes, pl.pitch_q, pl.threads, (SW, GQ));
    // K(n_max − 1), n_max = ta + tb + tc + td.
    let all = [(ta, 1), (tb, 1), (tc, 1), (td, 1)];
    copy_tile(&mut c, kv_tile(s, pl, pl.tens.k, hk, &all, -1), bn, row_bytes, pl.pitch_kv, pl.threads, (SW, GK));
    c.op("LDGDEPBAR", &[], &[]);
    // Masked iterations with prefetch: n = n_max − 1 − i (none when nothing is masked).
    let masks = pl.mask_steps > 0;
    if masks {
        let i = c.begin_param(ta);
        iteration(s, pl, &mut c, hk, &[(ta, 1), (tb, 1), (tc, 1), (td, 1), (i, -1)], -1, true, true);
        c.end();
    }
    // Unmasked with prefetch: n = n_max − 1 − ta − i.
    let i = c.begin_param(tb);
    iteration(s, pl, &mut c, hk, &[(tb, 1), (tc, 1), (td, 1), (i, -1)], -1, false, true);
    c.end();
    // The last iteration (n = 0), masked or not.
    if masks {
        c.begin_param(tc);
        iteration(s, pl, &mut c, hk, &[], 0, true, false);
        c.end();
    }
    c.begin_param(td);
    iteration(s, pl, &mut c, hk, &[], 0, false, false);
    c.end();
    epilogue(s, pl, &mut c);
    if wrap {
        c.end();
    }
    c.op("EXIT", &[], &[]);
    c.finish()
}

/// Register of S element `k` (0..4) of m-atom `i`, n-atom `j`.
fn s_reg(pl: &Plan, i: u64, j: u64, k: u64) -> u8 {
    pl.regs.s + (4 * (i * pl.nn + j) + k) as u8
}

/// Register of O element `k` of m-atom `i`, n-atom `j` (of d).
fn o_reg(pl: &Plan, i: u64, j: u64, k: u64) -> u8 {
    pl.regs.o + (4 * (i * pl.nd + j) + k) as u8
}

/// One KV iteration for block `n = konst + Σ coef·var`.
#[allow(clippy::too_many_arguments)]
fn iteration(
    s: &AttnSpec,
    pl: &Plan,
    c: &mut Code,
    hk: Var,
    n: &[(Var, i64)],
    konst: i64,
    masked: bool,
    prefetch: bool,
) {
    let g = pl.regs;
    let (bm, bn, d, e) = (pl.t.block_m, pl.t.block_n, pl.d, pl.e);
    let row_bytes = d * e;
    let (sq_off, sk_off, sv_off) = (0, bm * d * e, (bm + bn) * d * e);
    let mma = mma_name(pl.dtype);
    let ks_q = d / 16;
    c.op_imm("DEPBAR.LE", &[sb(0)], &[], 0).op("BAR.SYNC.DEFER_BLOCKING", &[], &[]);
    copy_tile(c, kv_tile(s, pl, pl.tens.v, hk, n, konst), bn, row_bytes, pl.pitch_kv, pl.threads, (SW, GV));
    c.op("LDGDEPBAR", &[], &[]);
    // S = Q·Kᵀ over d/16 k-slices.
    for ks in 0..ks_q {
        for i in 0..pl.ms {
            let addr = Addr::at(sq_off + (i * ks_q + ks) * 512).term(Var::Warp, (pl.ms * ks_q * 512) as i64);
            c.mem("LDSM.16.M88.4", &[rr(g.qf + 4 * i as u8, 4)], &[r(SR)], addr);
        }
        for j16 in 0..bn / 16 {
            let f = g.fr + 4 * (j16 % 4) as u8;
            c.mem("LDSM.16.M88.4", &[rr(f, 4)], &[r(SR)], Addr::at(sk_off + (j16 * ks_q + ks) * 512));
            for i in 0..pl.ms {
                for h in 0..2 {
                    let j = 2 * j16 + h;
                    let acc = rr(s_reg(pl, i, j, 0), 4);
                    let (a, b) = (rr(g.qf + 4 * i as u8, 4), rr(f + 2 * h as u8, 2));
                    if ks == 0 {
                        c.op(mma, &[acc], &[a, b])
                    } else {
                        c.op(mma, &[acc], &[a, b, acc])
                    };
                }
            }
        }
    }
    if masked {
        for j in 0..pl.nn {
            c.op("IADD3", &[r(TMP + (j % 4) as u8)], &[r(TID)]);
        }
        for i in 0..pl.ms {
            for j in 0..pl.nn {
                for k in 0..4 {
                    let x = s_reg(pl, i, j, k);
                    c.op("ISETP.GE.AND", &[pred(1)], &[r(TMP + (j % 4) as u8)]);
                    c.op("FSEL", &[r(x)], &[r(x), pred(1)]);
                }
            }
        }
    }
    c.op_imm("DEPBAR.LE", &[sb(0)], &[], 0).op("BAR.SYNC.DEFER_BLOCKING", &[], &[]);
    if prefetch {
        copy_tile(c, kv_tile(s, pl, pl.tens.k, hk, n, konst - 1), bn, row_bytes, pl.pitch_kv, pl.threads, (SW, GK));
        c.op("LDGDEPBAR", &[], &[]);
    }
    softmax_rescale(pl, c);
    // P → 16-bit pairs in place (register k from S registers 2k, 2k+1).
    for k in 0..pl.ms * pl.nn * 2 {
        c.op(pl.dtype.pack(), &[r(g.s + k as u8)], &[rr(g.s + 2 * k as u8, 2)]);
    }
    // O += P·V over BN/16 k-slices; Vᵀ fragments by LDSM.T.
    let ks_v = bn / 16;
    for ks in 0..ks_v {
        for jd in 0..d / 16 {
            let f = g.fr + 4 * (jd % 4) as u8;
            c.mem("LDSM.16.MT88.4", &[rr(f, 4)], &[r(SR)], Addr::at(sv_off + (ks * (d / 16) + jd) * 512));
            for i in 0..pl.ms {
                for h in 0..2 {
                    let acc = rr(o_reg(pl, i, 2 * jd + h, 0), 4);
                    let a = rr(g.s + (2 * (i * pl.nn + 2 * ks)) as u8, 4);
                    c.op(mma, &[acc], &[a, rr(f + 2 * h as u8, 2), acc]);
                }
            }
        }
    }
    loop_tail(c, CNT);
}

/// FA2's `softmax_rescale_o`: row max, rescale of O and the row sum, P = exp2(S·scale − m·scale).
///
/// The order is the compiled kernel's (workloads/cuda/sass/fa2_fwd_sm80.sass), not the source's
/// element-by-element one, because a warp issues in order and waits at the first instruction
/// whose operands are pending: the reductions visit the thread's rows interleaved (consecutive
/// FMNMX and FADD belong to different rows' chains), every FFMA comes before the first
/// MUFU.EX2, the O rescale FMULs fill the MUFU pipe's issue gaps, and the row sums are added
/// after the last exponential. Per element FFMA → MUFU.EX2 → FADD would hold the warp for the
/// MUFU latency at every S element, which ptxas never emits.
fn softmax_rescale(pl: &Plan, c: &mut Code) {
    let g = pl.regs;
    let rows = (2 * pl.ms) as u8;
    // S elements column pair by column pair, the rows interleaved; with the element's row.
    let (ms, nn) = (pl.ms, pl.nn);
    let by_column = move || {
        (0..nn).flat_map(move |j| {
            (0..2).flat_map(move |k| {
                (0..ms).flat_map(move |i| (0..2).map(move |h| (s_reg(pl, i, j, 2 * h + k), (2 * i + h) as u8)))
            })
        })
    };
    for (x, row) in by_column() {
        c.op("FMNMX", &[r(g.m + row)], &[r(g.m + row), r(x)]);
    }
    // The quad's 4 threads: the scaled-max register is free until its FMUL below.
    for _ in 0..2 {
        for row in 0..rows {
            c.op("SHFL.BFLY", &[r(g.t + row)], &[r(g.m + row)]);
        }
        for row in 0..rows {
            c.op("FMNMX", &[r(g.m + row)], &[r(g.m + row), r(g.t + row)]);
        }
    }
    for row in 0..rows {
        c.op("FADD", &[r(g.sc + row)], &[r(g.m + row), r(g.sc + row)]);
    }
    for row in 0..rows {
        c.op("FMUL", &[r(g.sc + row)], &[r(g.sc + row), r(SCALE)]);
    }
    for row in 0..rows {
        c.op("MUFU.EX2", &[r(g.sc + row)], &[r(g.sc + row)]);
    }
    for row in 0..rows {
        c.op("FMUL", &[r(g.t + row)], &[r(g.m + row), r(SCALE)]);
    }
    for row in 0..rows {
        c.op("FMUL", &[r(g.l + row)], &[r(g.l + row), r(g.sc + row)]);
    }
    for (x, row) in by_column() {
        c.op("FFMA", &[r(x)], &[r(x), r(SCALE), r(g.t + row)]);
    }
    // One MUFU.EX2 per element, the O rescale spread evenly between them.
    let o: Vec<(u8, u8)> = (0..pl.ms)
        .flat_map(|i| (0..pl.nd).flat_map(move |j| (0..4).map(move |k| (o_reg(pl, i, j, k), (2 * i + k / 2) as u8))))
        .collect();
    let n_el = (pl.ms * pl.nn * 4) as usize;
    let mut next_o = 0;
    for (e, (x, _)) in by_column().enumerate() {
        c.op("MUFU.EX2", &[r(x)], &[r(x)]);
        while next_o < o.len() * (e + 1) / n_el {
            let (y, row) = o[next_o];
            c.op("FMUL", &[r(y)], &[r(y), r(g.sc + row)]);
            next_o += 1;
        }
    }
    for (x, row) in by_column() {
        c.op("FADD", &[r(g.l + row)], &[r(g.l + row), r(x)]);
    }
}

fn epilogue(s: &AttnSpec, pl: &Plan, c: &mut Code) {
    let g = pl.regs;
    let (bm, d, e) = (pl.t.block_m, pl.d, pl.e);
    for row in 0..2 * pl.ms as u8 {
        let l = r(g.l + row);
        for _ in 0..2 {
            c.op("SHFL.BFLY", &[r(TMP)], &[l]).op("FADD", &[l], &[l, r(TMP)]);
        }
        c.op("MUFU.RCP", &[r(g.sc + row)], &[l]).op("MUFU.LG2", &[r(g.t + row)], &[l]);
        c.op("FFMA", &[r(g.t + row)], &[r(g.m + row), r(SCALE), r(g.t + row)]);
    }
    for i in 0..pl.ms {
        for j in 0..pl.nd {
            for k in 0..4 {
                let x = r(o_reg(pl, i, j, k));
                c.op("FMUL", &[x], &[x, r(g.sc + (2 * i + k / 2) as u8)]);
            }
        }
    }
    let o_regs = pl.ms * pl.nd * 4;
    for k in 0..o_regs / 2 {
        c.op(pl.dtype.pack(), &[r(g.o + k as u8)], &[rr(g.o + 2 * k as u8, 2)]);
    }
    // O through shared memory (reusing sQ), then 16-byte coalesced rows.
    c.op("BAR.SYNC.DEFER_BLOCKING", &[], &[]);
    let warp_bytes = bm / pl.t.warps * d * e;
    let q = warp_bytes / 512;
    for k in 0..q {
        let addr = Addr::at(k * 512).term(Var::Warp, warp_bytes as i64);
        c.mem("STS.128", &[], &[r(SR), rr(g.o + 4 * k as u8, 4)], addr);
    }
    c.op("BAR.SYNC.DEFER_BLOCKING", &[], &[]);
    let per_thread = copies_per_thread(bm, d * e, pl.threads);
    for k in 0..per_thread {
        let addr = Addr::at(k * pl.threads * 16).term(Var::Warp, 512);
        c.mem("LDS.128", &[rr(g.o + 4 * k as u8, 4)], &[r(SR)], addr);
    }
    let o_tile = Addr::at(pl.tens.o)
        .term(Var::CtaY, (s.seqlen * pl.pitch_q) as i64)
        .term(Var::CtaX, (bm * pl.pitch_q) as i64)
        .term(Var::CtaZ, (d * e) as i64);
    super::sm80::store_tile(c, o_tile, bm, d * e, pl.pitch_q, pl.threads, g.o);
    // LSE: fp32 [b, h, sq], one value per row; lanes 0..rows_per_warp of each warp.
    let rw = bm / pl.t.warps;
    let lse = Addr::at(pl.tens.lse)
        .term(Var::CtaY, (s.heads * s.seqlen * 4) as i64)
        .term(Var::CtaZ, (s.seqlen * 4) as i64)
        .term(Var::CtaX, (bm * 4) as i64)
        .term(Var::Warp, (rw * 4) as i64);
    let mask = if rw >= 32 { u32::MAX } else { (1u32 << rw) - 1 };
    let old = c.mask();
    c.set_mask(mask);
    c.mem("STG.E", &[], &[rr(GQ, 2), r(g.t)], lse);
    c.set_mask(old);
}

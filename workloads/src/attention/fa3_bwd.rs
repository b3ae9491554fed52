//! FlashAttention-3's warp-specialised sm90a backward (`hopper/flash_bwd_launch_template.h`,
//! `flash_bwd_kernel_sm90.h`, `mainloop_bwd_sm90_tma_gmma_ws.hpp`, `epilogue_bwd.hpp`,
//! `flash_bwd_preprocess_kernel.h`, `flash_bwd_postprocess_kernel.h`, `tile_scheduler.hpp`;
//! ../shared/notes/kernel-designs.md §3): three kernels in one stream, five under GQA.
//!
//! # Kernels
//! 1. `flash_bwd_preprocess` on `grid(⌈sq/kBlockM⌉, h, b)`, 256 threads: `dPsum = rowsum(dO∘O)`
//!    (`LDG.128` of both tiles, `FFMA` per element, `SHFL.BFLY` + `FADD` across a row's
//!    threads), `LSE·log2(e)` into `LSE_log2`, and `dQaccum` (fp32) zeroed with `STG.128`.
//! 2. The main kernel, non-persistent: one CTA per KV block `n_block` (`SingleTileScheduler`,
//!    `grid(⌈sk/kBlockN⌉, h, b)`; causal `SingleTileBwdLPTScheduler`: a 1-D grid whose heads run
//!    fastest within L2-sized sections of `swizzle` heads, then `n_block` ascending, the longest
//!    first). Each CTA keeps its K and V blocks and walks the query blocks
//!    `m = m_block_min … m_block_max−1` (causal: `m_block_min = ⌊(n·kBlockN + sq − sk)/kBlockM⌋`).
//!    - **Producer warp** (warp 0 of WG0, one lane): K and V once (`UTMALDG`, one mbarrier whose
//!      expect-tx is both blocks), then per query block Q + LSE_log2 and dO + dPsum into 2-stage
//!      rings (1-stage dO for d ≥ 192): wait the stage's "empty" mbarrier, arrive on its "full"
//!      one with expect-tx = tile + 4·kBlockM bytes, `UTMALDG` the tile, `UBLKCP` the row
//!      statistics. Order: Q(m_min), K, V, then per step dO(m), Q(m+1), last dO(m_max−1); then
//!      one more wait per stage (`load_tail`).
//!    - **dQ writer warp** (`store_dq`, warp 1 of WG0, d < 256): per query block and MMA
//!      warpgroup `BAR.SYNC dQFullWGi` (128 + 32 threads), one `UBLKRED.G.S.ADD.F32` of the
//!      warpgroup's `kBlockM·d·4/WGs` bytes of dQ from shared memory into `dQaccum`,
//!      `UTMACMDFLUSH`; then per warpgroup `DEPBAR.LE SB0, WGs−1−i` (`tma_store_wait`) and
//!      `BAR.ARV dQEmptyWGi`. Warps 2–3 (and 1 at d = 256) give their registers back and leave.
//!    - **MMA warpgroups** (2; 3 for d192), `setmaxnreg` 24/240 (2 WGs) or 32/160 (3 WGs). Per
//!      query block, five wgmma GEMMs per warpgroup ([`BwdPlan::gemm_s`], [`BwdPlan::gemm_dkv`],
//!      [`BwdPlan::gemm_dq`]): S = QKᵀ and dP = dO·Vᵀ (SS; with `SdP_swapAB` the warpgroup
//!      computes Sᵀ = K·Qᵀ over its 64 key rows; d96 keeps V in registers, loaded once with
//!      `LDSM`, and runs dP RS), `P = exp2(S·scale_log2 − LSE_log2)` (`FFMA` + `MUFU.EX2` per
//!      element, no running max), `dS = P∘(dP − dPsum)` (`FADD` + `FMUL`), dS (and P when the dK/dV
//!      GEMMs are SS) to shared memory by `STSM`, dV += Pᵀ·dO and dK += dSᵀ·Q (RS from the P and
//!      dS registers when `Mma_dKV_is_RS`: d ≤ 128; SS from shared memory for d192/d256), and
//!      dQ = dS·K (SS, dS from shared memory). dQ goes to shared memory (`STS.128`) for the
//!      writer warp between `BAR.SYNC dQEmptyWGi` and `BAR.ARV dQFullWGi`; at d256 it is sliced
//!      in two halves added to `dQaccum` by `REDG.E.ADD.F32x4` per 16 bytes (`Slice_dQKV_Mma`).
//!      Named barrier `PdS` (all MMA threads) orders the P/dS stores and reads. Epilogue: dK
//!      scaled; without GQA dK and dV converted, `STSM` to shared memory and stored by one lane of
//!      the last MMA warp (`UTMASTG`); with GQA the fp32 dK and dV go through shared memory and
//!      one `UBLKRED` each into `dKaccum`/`dVaccum`.
//! 3. `flash_bwd_postprocess` on `grid(⌈sq/kBlockM⌉, h, b)`, the MMA threads: `UBLKCP` of the
//!    block's `dQaccum` into shared memory (one mbarrier), `LDS.128`, `FMUL` by the softmax scale,
//!    `F2FP`, `STSM`, `LDS.128` + `STG.128` of dQ. With GQA the same kernel converts `dKaccum`
//!    and `dVaccum` on `grid(⌈sk/kBlockN⌉, hk, b)` (scale 1).
//!
//! # Tiles ([`bwd_tile`], `run_mha_bwd_hdim*`)
//! | d | kBlockM×kBlockN | WGs | dO/dS stages | SdP/dKV/dQ swapAB | atoms SdP/dKV/dQ | V in regs |
//! |---|---|---|---|---|---|---|
//! | 64 | 128×128 | 2 | 2/2 | T/F/F | 1/2/2 | no |
//! | 96 | 64×128 | 2 | 2/2 | T/F/F | 1/2/1 | yes |
//! | 128 causal | 64×128 | 2 | 2/2 | T/F/F | 1/2/1 | no |
//! | 128 | 80×128 | 2 | 2/2 | T/F/T | 1/2/1 | no |
//! | 192 | 64×96 | 3 | 1/1 | F/T/F | 1/1/1 | no |
//! | 256 | 64×80 | 2 | 1/1 | F/T/T | 1/1/1 | no |
//!
//! Other head dims run the kernel of the next of these (FA3's `round_up_headdim`): the GEMMs
//! and registers are the kernel's, the bytes the problem's. FA3's backward takes fp16 and bf16
//! only and needs `headdim_v = headdim`; fp8 is refused.
//!
//! # Simulator conventions (approximations)
//! - Tensors are addressed head-blocked, as in [`super::fa3`]: a (batch, head)'s rows are one
//!   contiguous run (`sq·d·e` bytes per head of Q, O, dO, dQ; `sk·d·e` per KV head), a tile one
//!   contiguous bulk copy. `LSE_log2`, FA3's `[b, h, sq_rounded·d_rounded]` `dQaccum` and the
//!   GQA `dKaccum`/`dVaccum` live in the trace's scratch space ([`super::Tensors::scratch`]).
//! - The causal scheduler's section width is FA3's swizzle rounded down to a power of two that
//!   divides `batch·heads`, so that no residual section is left (the CTA order is otherwise FA3's).
//! - A CTA's causal mask is applied in every query block at d > 64 (as FA3 does) and in the first
//!   one at d ≤ 64 (`SeparateMaskingIterations`; exact when `sq = sk`). Non-causal blocks are
//!   unmasked. Address arithmetic, descriptor set-up (`R2UR`, `UMOV`), predication and the
//!   fp16/bf16 → fp32 unpacking of the preprocess are not emitted; loop control is.
//! - `tma_store_wait` (a `.read` wait) is modelled as waiting for the reduce-add's completion at
//!   the L2. The `torch.zeros` of the GQA accumulators (PyTorch kernels) and the deterministic
//!   mode (semaphores) are left out; the register counts of the pre- and postprocess kernels are
//!   not ptxas's.

use std::collections::BTreeMap;

use gpusim_configs::Arch;
use gpusim_isa::{CtaParam, Dim3, KernelInfo, KernelTrace, OpTable, Program, Trace, Var};

use super::AttnSpec;
use super::fa3::{Count, PHASE, TID, TX, gmma, idle, kv_steps, loop_control, named, wait};
use super::fa3_bwd_plan::Bar;
pub use super::fa3_bwd_plan::{BwdPlan, BwdTile, Gemm, Smem, bwd_plan, bwd_tile, kernel_headdim};
use crate::asm::{Addr, Affine, Code, assemble, p as pred, r, rr, urr};
use crate::gemm::Dtype;
use crate::params::WorkloadError;

/// Named barriers: FA3's `BwdNamedBarriers` after CUTLASS's 8 reserved ids, and CUTLASS's
/// `EpilogueBarrier`.
const EPILOGUE_BAR: u8 = 1;
const PDS_BAR: u8 = 9;
const DQ_EMPTY_BAR: u8 = 10;
const DQ_FULL_BAR: u8 = 13;

/// The backward kernels of `spec` (the recipe's [`super::PassFn`]).
pub(crate) fn backward(spec: &AttnSpec, arch: &Arch) -> Result<Trace, WorkloadError> {
    let pl = bwd_plan(spec, arch)?;
    let mut kernels = vec![preprocess(&pl)?, main_kernel(&pl)?];
    let tens = &pl.tensors;
    let t = &pl.t;
    let q_rows = pl.m_blocks * t.block_m;
    let dq = Convert {
        what: "dq",
        rows: t.block_m,
        grid: Dim3::new(pl.m_blocks as u32, pl.heads as u32, pl.batch as u32),
        heads: pl.heads,
        src: (pl.dq_accum, q_rows * pl.kd * 4),
        dst: (tens.d_q, pl.sq * pl.d * pl.e),
        swap: t.dq_swap,
    };
    kernels.push(convert(&pl, 2, &dq)?);
    if pl.gqa() {
        let k_rows = pl.n_blocks * t.block_n;
        for (id, what, src, dst) in [(3, "dk", pl.dk_accum, tens.d_k), (4, "dv", pl.dv_accum, tens.d_v)] {
            let c = Convert {
                what,
                rows: t.block_n,
                grid: Dim3::new(pl.n_blocks as u32, pl.kv_heads as u32, pl.batch as u32),
                heads: pl.kv_heads,
                src: (src, k_rows * pl.kd * 4),
                dst: (dst, pl.sk * pl.d * pl.e),
                swap: t.dkv_swap,
            };
            kernels.push(convert(&pl, id, &c)?);
        }
    }
    Ok(Trace { kernels })
}

fn info(id: u32, name: String, grid: Dim3, threads: u64, regs: u64, smem: u64) -> KernelInfo {
    let mut i = KernelInfo::new(id, name, grid, Dim3::new(threads as u32, 1, 1));
    i.regs_per_thread = regs as u32;
    i.smem_bytes = smem as u32;
    i.sm_version = 90;
    i
}

/// The instructions `op` (a load `LD…` or a store) moving `bytes` contiguous bytes at `at`, 16
/// bytes per lane and `threads` lanes per instruction (CUTLASS's 128-bit copy partition: thread
/// `t`'s `i`-th access is chunk `i·threads + t`), into or out of the registers from `reg`, 4 per
/// access, cycling through `span` of them.
fn contiguous(c: &mut Code, op: &str, at: Addr, bytes: u64, threads: u64, reg: u8, span: u8) {
    let load = op.starts_with("LD");
    for i in 0..bytes.div_ceil(16 * threads) {
        let v = rr(reg + ((4 * i) % span.max(4) as u64) as u8, 4);
        let a = at.plus(i * 16 * threads).term(Var::Warp, 512);
        if load {
            c.mem(op, &[v], &[rr(2, 2)], a);
        } else {
            c.mem(op, &[], &[rr(2, 2), v], a);
        }
    }
}

/// `flash_bwd_preprocess`: dPsum, LSE_log2 and the zeroed dQaccum of one query block.
fn preprocess(pl: &BwdPlan) -> Result<KernelTrace, WorkloadError> {
    const THREADS: u64 = 256;
    let (bm, d, e, kd) = (pl.t.block_m, pl.d, pl.e, pl.kd);
    let tens = &pl.tensors;
    // Threads per row of the dot product: kBlockKGmem / 8 elements per 16-byte load.
    let kbk = if kd.is_multiple_of(128) {
        128
    } else if kd.is_multiple_of(64) {
        64
    } else {
        32
    };
    let tpr = kbk / 8;
    let rows_per_thread = (bm * tpr).div_ceil(THREADS);
    let bh = Affine::konst(0).with(Var::CtaY, 1).with(Var::CtaZ, pl.heads);
    let m = Affine::konst(0).with(Var::CtaX, 1);
    let tile = bm * d * e;
    let mut ops = OpTable::new();
    let mut programs = Vec::new();
    for w in 0..THREADS / 32 {
        let mut c = Code::new(&mut ops, &format!("preprocess_w{w}"));
        c.op("S2R", &[r(0)], &[]).op("S2R", &[r(1)], &[]).op("IMAD.WIDE", &[rr(2, 2)], &[r(0), r(1)]);
        // The LSE of the block's rows: thread t < kBlockM loads row t.
        let first = 32 * w;
        let lse_mask = if first >= bm { 0 } else { u32::MAX >> (32 - (bm - first).min(32)) };
        let at = |base: u64| Addr::at(base).index(&bh, pl.sq * 4).index(&m, bm * 4).plus(first * 4);
        if lse_mask != 0 {
            c.set_mask(lse_mask);
            c.mem("LDG.E", &[r(10)], &[rr(2, 2)], at(tens.lse));
            c.set_mask(u32::MAX);
        }
        contiguous(&mut c, "LDG.E.128", pl.q_tile(tens.o, &bh, &m), tile, THREADS, 16, 32);
        contiguous(&mut c, "LDG.E.128", pl.q_tile(tens.d_o, &bh, &m), tile, THREADS, 48, 32);
        let loads = tile.div_ceil(16 * THREADS);
        for i in 0..loads * 8 {
            let acc = r(12 + (i % rows_per_thread.max(1)).min(3) as u8);
            c.op("FFMA", &[acc], &[r(16 + (i % 32) as u8), r(48 + (i % 32) as u8), acc]);
        }
        // Row sums across the row's threads, then one fp32 per row from its first thread.
        for k in 0..rows_per_thread {
            let acc = r(12 + k.min(3) as u8);
            for _ in 0..tpr.trailing_zeros() {
                c.op("SHFL.BFLY", &[r(11)], &[acc]).op("FADD", &[acc], &[acc, r(11)]);
            }
        }
        let lanes: Vec<i64> = (0..32u64).filter(|l| l % tpr == 0).map(|l| (l / tpr * 4) as i64).collect();
        let leaders = (0..32u32).filter(|l| (*l as u64).is_multiple_of(tpr)).fold(0u32, |m, l| m | (1 << l));
        c.set_mask(leaders);
        for k in 0..rows_per_thread {
            let row0 = first / tpr + k * (THREADS / tpr);
            let a = pl.stat_rows(tens.softmax_d, &bh, &m).plus(row0 * 4);
            c.mem_lanes("STG.E", &[], &[rr(2, 2), r(12 + k.min(3) as u8)], a, &lanes);
        }
        c.set_mask(u32::MAX);
        if lse_mask != 0 {
            c.set_mask(lse_mask);
            c.op("FMUL", &[r(10)], &[r(10)]);
            c.mem("STG.E", &[], &[rr(2, 2), r(10)], pl.stat_rows(pl.lse_log2, &bh, &m).plus(first * 4));
            c.set_mask(u32::MAX);
        }
        // dQaccum's block, zeroed.
        contiguous(&mut c, "STG.E.128", pl.dq_acc(&bh, &m), bm * kd * 4, THREADS, 80, 4);
        c.op("EXIT", &[], &[]);
        programs.push(c.finish());
    }
    let name = format!("flash_bwd_preprocess_sm90_hdim{kd}_{bm}");
    let grid = Dim3::new(pl.m_blocks as u32, pl.heads as u32, pl.batch as u32);
    let layout = (0..THREADS / 32).map(|w| w as u32).collect();
    assemble(info(0, name, grid, THREADS, 64, 0), ops, programs, layout, BTreeMap::new()).map_err(WorkloadError)
}

/// One postprocess kernel: an fp32 accumulator of `rows`-row blocks into the input type.
struct Convert {
    what: &'static str,
    rows: u64,
    grid: Dim3,
    /// Heads of the grid's y (query heads for dQ, KV heads for dK/dV).
    heads: u64,
    /// Accumulator base and bytes per head.
    src: (u64, u64),
    /// Output base and bytes per head.
    dst: (u64, u64),
    /// The accumulator's MMA layout is transposed (`dQ_swapAB` / `dKV_swapAB`): `STSM.T`.
    swap: bool,
}

/// `flash_bwd_postprocess` (`FlashAttnBwdPostprocessConvertdQ`) of `cv`.
fn convert(pl: &BwdPlan, id: u32, cv: &Convert) -> Result<KernelTrace, WorkloadError> {
    let threads = 128 * pl.t.wgs;
    let (rows, kd, d, e) = (cv.rows, pl.kd, pl.d, pl.e);
    let acc_bytes = rows * kd * 4;
    let out_smem = acc_bytes;
    let bar = (out_smem + rows * kd * e).next_multiple_of(16);
    let smem = bar + 16;
    let head = Affine::konst(0).with(Var::CtaY, 1).with(Var::CtaZ, cv.heads);
    let blk = Affine::konst(0).with(Var::CtaX, 1);
    let src = Addr::at(cv.src.0).index(&head, cv.src.1).index(&blk, acc_bytes);
    let dst = Addr::at(cv.dst.0).index(&head, cv.dst.1).index(&blk, rows * d * e);
    let per_thread = rows * kd / threads;
    let mut ops = OpTable::new();
    let mut programs = Vec::new();
    for lead in [true, false] {
        let mut c = Code::new(&mut ops, if lead { "convert_lead" } else { "convert" });
        c.op("S2R", &[r(TID)], &[]).op("MOV", &[r(PHASE)], &[]);
        if lead {
            // Thread 0: the block's accumulator into shared memory, one bulk copy.
            c.set_mask(1);
            c.mem_imm("SYNCS.EXCH.64", &[], &[urr(4, 2)], Addr::at(bar), 1);
            c.mem_imm("SYNCS.ARRIVE.TRANS64", &[], &[r(TX)], Addr::at(bar), acc_bytes as i32);
            c.bulk("UBLKCP.S.G", &[], &[urr(8, 2), urr(4, 2)], src, acc_bytes as u32);
            c.set_mask(u32::MAX);
        }
        c.op("BAR.SYNC.DEFER_BLOCKING", &[], &[]);
        wait(&mut c, Addr::at(bar));
        contiguous(&mut c, "LDS.128", Addr::at(0), acc_bytes, threads, 16, 64);
        for i in 0..per_thread {
            let x = r(16 + (i % 64) as u8);
            c.op("FMUL", &[x], &[x]);
        }
        for i in 0..per_thread / 2 {
            c.op(pl.dtype.pack(), &[r(16 + (i % 32) as u8)], &[rr(16 + (2 * i % 64) as u8, 2)]);
        }
        stsm(&mut c, cv.swap, per_thread / 2, 16, Addr::at(out_smem).term(Var::Warp, (per_thread * 64) as i64));
        c.op("BAR.SYNC.DEFER_BLOCKING", &[], &[]);
        contiguous(&mut c, "LDS.128", Addr::at(out_smem), rows * d * e, threads, 16, 32);
        contiguous(&mut c, "STG.E.128", dst, rows * d * e, threads, 16, 32);
        c.op("EXIT", &[], &[]);
        programs.push(c.finish());
    }
    let mut layout = vec![1u32; (threads / 32) as usize];
    layout[0] = 0;
    let name = format!("flash_bwd_postprocess_{}_sm90_hdim{kd}_{rows}", cv.what);
    let mut i = info(id, name, cv.grid, threads, 64, smem);
    i.deps = vec![1];
    assemble(i, ops, programs, layout, BTreeMap::new()).map_err(WorkloadError)
}

/// `STSM` of `regs` packed registers from `reg` (4 per `.4`, 2 per `.2`), 512 bytes per `.4` at
/// `at`: transposed (`STSM.16.MT88`) when the accumulator is the transpose of the stored tile.
fn stsm(c: &mut Code, transposed: bool, regs: u64, reg: u8, at: Addr) {
    let kind = if transposed { "MT88" } else { "M88" };
    let (per, n) = if regs.is_multiple_of(4) { (4, regs / 4) } else { (2, regs / 2) };
    let op = format!("STSM.16.{kind}.{per}");
    for k in 0..n {
        let v = rr(reg + ((per * k) % 64) as u8, per as u8);
        c.mem(&op, &[], &[r(TID), v], at.plus(k * 128 * per));
    }
}

/// Where a main-kernel CTA works: its KV block, its (batch, head), its KV head, the first query
/// block, and how many it visits.
struct CtaAt {
    n: Affine,
    bh: Affine,
    kvh: Affine,
    m_min: Affine,
    count: Count,
}

/// Defines the CTA's parameters in the program under construction: causal CTAs have their own
/// `m_block_min` and trip count; under GQA the KV head is the head / group.
fn cta_at(c: &mut Code, pl: &BwdPlan, need_kvh: bool) -> CtaAt {
    let (nv, bh) = if pl.causal {
        (Var::CtaY, Affine::konst(0).with(Var::CtaX, 1).with(Var::CtaZ, pl.swizzle))
    } else {
        (Var::CtaX, Affine::konst(0).with(Var::CtaY, 1).with(Var::CtaZ, pl.heads))
    };
    let n = Affine::konst(0).with(nv, 1);
    let kvh = if pl.gqa() && need_kvh {
        let mut p = CtaParam { div: pl.group as i64, ..CtaParam::default() };
        for (v, k) in &bh.terms {
            p = p.with(*v, *k as i64);
        }
        Affine::konst(0).with(c.param(p), 1)
    } else {
        bh.clone()
    };
    if !pl.causal {
        return CtaAt { n, bh, kvh, m_min: Affine::konst(0), count: Count::Fixed(pl.m_blocks) };
    }
    let (bm, bn) = (pl.t.block_m, pl.t.block_n);
    let m_min = c.param(
        CtaParam { offset: pl.sq as i64 - pl.sk as i64, div: bm as i64, lo: 0, ..CtaParam::default() }
            .with(nv, bn as i64),
    );
    let trips = c.param(CtaParam::constant(pl.m_blocks as i64).with(m_min, -1));
    CtaAt { n, bh, kvh, m_min: Affine::konst(0).with(m_min, 1), count: Count::Param(trips) }
}

/// `a + b`.
fn sum(a: &Affine, b: &Affine) -> Affine {
    let mut s = a.clone().plus(b.konst);
    s.terms.extend(b.terms.iter().copied());
    s
}

/// `a − 1`.
fn minus_one(a: &Affine) -> Affine {
    Affine { konst: a.konst.wrapping_sub(1), terms: a.terms.clone() }
}

/// The main kernel (`FlashAttnBwdSm90`).
fn main_kernel(pl: &BwdPlan) -> Result<KernelTrace, WorkloadError> {
    let t = &pl.t;
    let mut ops = OpTable::new();
    let mut programs = vec![producer(pl, &mut ops)];
    programs.push(if pl.dq_tma() { dq_writer(pl, &mut ops) } else { idle(pl.prod_regs, &mut ops) });
    programs.push(idle(pl.prod_regs, &mut ops));
    let mut layout = vec![0u32, 1, 2, 2];
    let mut variants: BTreeMap<(u64, bool, bool), u32> = BTreeMap::new();
    for wg in 0..t.wgs {
        for w in 0..4 {
            let init_dq = pl.dq_tma() && w == 0;
            let lead = if pl.gqa() { wg == 0 && w == 0 } else { wg == t.wgs - 1 && w == 3 };
            let key = (wg, init_dq, lead);
            let idx = match variants.get(&key) {
                Some(&i) => i,
                None => {
                    programs.push(consumer(pl, &mut ops, wg, init_dq, lead));
                    let i = programs.len() as u32 - 1;
                    variants.insert(key, i);
                    i
                }
            };
            layout.push(idx);
        }
    }
    let grid = if pl.causal {
        let bh = pl.batch * pl.heads;
        Dim3::new(pl.swizzle as u32, pl.n_blocks as u32, (bh / pl.swizzle) as u32)
    } else {
        Dim3::new(pl.n_blocks as u32, pl.heads as u32, pl.batch as u32)
    };
    let name = format!(
        "flash_bwd_sm90_{}_hdim{}_{}x{}{}{}",
        if pl.dtype == Dtype::Fp16 { "fp16" } else { "bf16" },
        pl.kd,
        t.block_m,
        t.block_n,
        if pl.causal { "_causal" } else { "" },
        if pl.gqa() { "_gqa" } else { "" }
    );
    let mut i = info(1, name, grid, pl.threads, pl.regs, pl.smem.total);
    i.deps = vec![0];
    assemble(i, ops, programs, layout, BTreeMap::new()).map_err(WorkloadError)
}

/// Warp 0 of the producer warpgroup: the barriers, then K and V once and Q, LSE_log2, dO and
/// dPsum per query block.
fn producer(pl: &BwdPlan, ops: &mut OpTable) -> Program {
    let t = &pl.t;
    let tens = &pl.tensors;
    let mut c = Code::new(ops, "producer_tma");
    c.op_imm("USETMAXREG.DEALLOC.CTAPOOL", &[], &[], pl.prod_regs);
    c.op("S2R", &[r(TID)], &[]).op("MOV", &[r(TX)], &[]).op("MOV", &[r(PHASE)], &[]);
    let at = cta_at(&mut c, pl, true);
    let consumers = (4 * t.wgs) as i32;
    c.set_mask(1);
    c.mem_imm("SYNCS.EXCH.64", &[], &[urr(4, 2)], pl.mbar(Bar::Kv, 0), 1);
    for s in 0..2 {
        c.mem_imm("SYNCS.EXCH.64", &[], &[urr(4, 2)], pl.mbar(Bar::QFull, s), 1);
        c.mem_imm("SYNCS.EXCH.64", &[], &[urr(4, 2)], pl.mbar(Bar::QEmpty, s), consumers);
    }
    for s in 0..t.stages_do {
        c.mem_imm("SYNCS.EXCH.64", &[], &[urr(4, 2)], pl.mbar(Bar::DoFull, s), 1);
        c.mem_imm("SYNCS.EXCH.64", &[], &[urr(4, 2)], pl.mbar(Bar::DoEmpty, s), consumers);
    }
    c.set_mask(u32::MAX);
    c.op("BAR.SYNC.DEFER_BLOCKING", &[], &[]);
    c.set_mask(1);
    let (bm, bn) = (t.block_m, t.block_n);
    let tile = bm * pl.d * pl.e;
    let rows = bm * 4;
    // A query-side tile and its row statistics into a stage: wait until empty, arm, copy.
    let load = |c: &mut Code, full: Bar, empty: Bar, st: u64, base: u64, stats: u64, j: &Affine| {
        let m = sum(&at.m_min, j);
        wait(c, pl.mbar(empty, st));
        c.mem_imm("SYNCS.ARRIVE.TRANS64", &[], &[r(TX)], pl.mbar(full, st), (tile + rows) as i32);
        c.bulk("UTMALDG.4D", &[], &[urr(8, 2), urr(4, 2)], pl.q_tile(base, &at.bh, &m), tile as u32);
        c.bulk("UBLKCP.S.G", &[], &[urr(12, 2), urr(4, 2)], pl.stat_rows(stats, &at.bh, &m), rows as u32);
    };
    let q = |c: &mut Code, st: u64, j: &Affine| load(c, Bar::QFull, Bar::QEmpty, st, tens.q, pl.lse_log2, j);
    let d_o = |c: &mut Code, st: u64, j: &Affine| {
        load(c, Bar::DoFull, Bar::DoEmpty, pl.do_stage(st), tens.d_o, tens.softmax_d, j)
    };
    q(&mut c, 0, &Affine::konst(0));
    let kv = bn * pl.d * pl.e;
    c.mem_imm("SYNCS.ARRIVE.TRANS64", &[], &[r(TX)], pl.mbar(Bar::Kv, 0), (2 * kv) as i32);
    c.bulk("UTMALDG.4D", &[], &[urr(16, 2), urr(4, 2)], pl.kv_block(tens.k, &at.kvh, &at.n), kv as u32);
    c.bulk("UTMALDG.4D", &[], &[urr(20, 2), urr(4, 2)], pl.kv_block(tens.v, &at.kvh, &at.n), kv as u32);
    // Step j: dO(j−1) into its stage, Q(j) into stage j % 2; last: dO of the last block.
    kv_steps(
        &mut c,
        &at.count,
        &mut |c, j, st| {
            d_o(c, 1 - st, &minus_one(j));
            q(c, st, j);
            c.set_mask(u32::MAX);
            loop_control(c);
            c.set_mask(1);
        },
        &mut |c, j, st| d_o(c, st, j),
    )
    .expect("the trip counts are within the loop limits");
    // load_tail: every stage released once more.
    for s in 0..2 {
        wait(&mut c, pl.mbar(Bar::QEmpty, s));
    }
    if t.stages_do == 1 {
        wait(&mut c, pl.mbar(Bar::DoEmpty, 0));
    } else {
        for s in 0..2 {
            wait(&mut c, pl.mbar(Bar::DoEmpty, s));
        }
    }
    c.set_mask(u32::MAX);
    c.op("EXIT", &[], &[]);
    c.finish()
}

/// Warp 1 of the producer warpgroup (`store_dq`): each query block's dQ, per MMA warpgroup,
/// bulk reduce-added into `dQaccum`.
fn dq_writer(pl: &BwdPlan, ops: &mut OpTable) -> Program {
    let t = &pl.t;
    let mut c = Code::new(ops, "store_dq");
    c.op_imm("USETMAXREG.DEALLOC.CTAPOOL", &[], &[], pl.prod_regs);
    c.op("S2R", &[r(TID)], &[]);
    let at = cta_at(&mut c, pl, false);
    c.op("BAR.SYNC.DEFER_BLOCKING", &[], &[]);
    let i = match at.count {
        Count::Param(n) => c.begin_param(n),
        _ => c.begin(pl.m_blocks as u32),
    };
    let m = sum(&at.m_min, &Affine::konst(0).with(i, 1));
    let part = t.block_m * pl.kd * 4 / t.wgs;
    let pair = 128 + 32;
    for wg in 0..t.wgs {
        c.op_imm("BAR.SYNC", &[], &[], named(DQ_FULL_BAR + wg as u8, pair));
        c.set_mask(1);
        let a = pl.dq_acc(&at.bh, &m).plus(wg * part);
        c.bulk("UBLKRED.G.S.ADD.F32.RN", &[], &[urr(8, 2), urr(4, 2)], a, part as u32);
        c.op("UTMACMDFLUSH", &[], &[]);
        c.set_mask(u32::MAX);
    }
    for wg in 0..t.wgs {
        c.set_mask(1);
        c.op_imm("DEPBAR.LE", &[], &[], (t.wgs - 1 - wg) as i32);
        c.set_mask(u32::MAX);
        c.op_imm("BAR.ARV", &[], &[], named(DQ_EMPTY_BAR + wg as u8, pair));
    }
    loop_control(&mut c);
    c.end();
    c.op("EXIT", &[], &[]);
    c.finish()
}

/// Registers of an MMA thread.
struct Regs {
    /// S, then P packed into its first half and dS into its second.
    s: u8,
    dp: u8,
    dv: u8,
    dk: u8,
    dq: u8,
    /// V's fragments (d96).
    v: u8,
    el: u8,
    kv: u8,
}

/// LSE_log2 and dPsum values (4 of each), the softmax scale.
const LSE: u8 = 8;
const DPSUM: u8 = 12;
const SCALE: u8 = 6;
const ACC0: u8 = 16;

fn regs(pl: &BwdPlan) -> Regs {
    let el = pl.elems() as u8;
    let kv = pl.kv_elems() as u8;
    let dq_n = if pl.sliced() { pl.dq_elems() / 2 } else { pl.dq_elems() } as u8;
    let s = ACC0;
    let dp = s + el;
    let dv = dp + el;
    let dk = dv + kv;
    let end = dk + kv;
    // dQ reuses dP's registers (dS is packed into S's by then) when it fits.
    let (dq, end) = if dq_n <= el { (dp, end) } else { (end, end + dq_n) };
    Regs { s, dp, dv, dk, dq, v: end, el, kv }
}

/// Everything one MMA warpgroup's program needs.
struct Mma<'a> {
    pl: &'a BwdPlan,
    wg: u64,
    g: Regs,
    s_op: String,
    kv_op: String,
    dq_op: String,
    at: CtaAt,
}

impl Mma<'_> {
    /// The 4·WGs MMA warps together (`NumMmaThreads`).
    fn all(&self) -> u64 {
        128 * self.pl.t.wgs
    }

    /// `at` plus this warp's `bytes`-long share among the MMA warps (warps 4.. of the CTA).
    fn per_warp(&self, at: u64, bytes: u64) -> Addr {
        Addr::at(at).plus_signed(-4 * bytes as i64).term(Var::Warp, bytes as i64)
    }

    /// `at` plus this warp's `bytes`-long share within its warpgroup.
    fn in_wg(&self, at: u64, bytes: u64) -> Addr {
        Addr::at(at).plus_signed(-(4 * (self.wg as i64 + 1)) * bytes as i64).term(Var::Warp, bytes as i64)
    }

    /// The LSE_log2 (or dPsum) values of the thread's rows from shared memory.
    fn stats(&self, c: &mut Code, smem: u64, dst: u8) {
        let pl = self.pl;
        let t = &pl.t;
        if !t.sdp_swap {
            // Rows l/4 and l/4 + 8 of each of the warp's 16-row slices.
            let lanes: Vec<i64> = (0..32).map(|l| (l / 4 * 4) as i64).collect();
            for k in 0..2 * t.block_m / (64 * t.atom_sdp) {
                let a = self.in_wg(smem + 32 * (k % 2) + 256 * (k / 2), 64);
                c.mem_lanes("LDS", &[r(dst + (k % 4) as u8)], &[r(TID)], a, &lanes);
            }
        } else if pl.shuffle_stats() {
            // Spread over the 8 threads that share a column, shuffled when used.
            let lanes: Vec<i64> = (0..32).map(|l| (l / 4 * 4) as i64).collect();
            for k in 0..(t.block_m / t.atom_sdp / 4).div_ceil(8) {
                c.mem_lanes("LDS", &[r(dst + (k % 4) as u8)], &[r(TID)], Addr::at(smem + 32 * k), &lanes);
            }
        } else {
            // The thread's columns of Sᵀ: 2 adjacent per 8.
            let lanes: Vec<i64> = (0..32).map(|l| (l % 4 * 8) as i64).collect();
            for k in 0..t.block_m / t.atom_sdp / 8 {
                c.mem_lanes("LDS.64", &[rr(dst + 2 * (k % 2) as u8, 2)], &[r(TID)], Addr::at(smem + 32 * k), &lanes);
            }
        }
    }

    /// A GEMM of `n` instructions into `acc`: SS from descriptors, or RS with `a` holding the A
    /// fragments (4 registers per k-slice).
    fn gemm(&self, c: &mut Code, op: &str, acc: gpusim_isa::RegRange, n: u64, a: Option<(u8, u8)>) {
        c.op("WARPGROUP.ARRIVE", &[], &[]);
        for k in 0..n {
            match a {
                Some((base, span)) => {
                    let f = rr(base + (4 * k as u8) % span.max(4), 4);
                    c.op(op, &[acc], &[f, urr(12, 2), acc])
                }
                None => c.op(op, &[acc], &[urr(8, 2), urr(10, 2), acc]),
            };
        }
    }

    fn release(&self, c: &mut Code, which: Bar, st: u64) {
        c.mem("SYNCS.ARRIVE.TRANS64.RED.A1T0", &[], &[], self.pl.mbar(which, st));
    }

    /// One query block `m` whose Q sits in stage `qs`.
    fn step(&self, c: &mut Code, m: &Affine, qs: u64, masked: bool) {
        let (pl, g) = (self.pl, &self.g);
        let t = &pl.t;
        let sm = &pl.smem;
        let (ds, ps) = (pl.do_stage(qs), pl.pds_stage(qs));
        let el = g.el as u64;
        let s_acc = rr(g.s, g.el);
        let dp_acc = rr(g.dp, g.el);
        let gs = pl.gemm_s();
        // S = QKᵀ, then dP = dO·Vᵀ, both in flight.
        wait(c, pl.mbar(Bar::QFull, qs));
        self.gemm(c, &self.s_op, s_acc, gs.count, None);
        self.stats(c, sm.lse + qs * sm.stat_stage, LSE);
        wait(c, pl.mbar(Bar::DoFull, ds));
        let v_regs = (64 * pl.kd / 256) as u8;
        self.gemm(c, &self.s_op, dp_acc, gs.count, t.v_in_regs.then_some((g.v, v_regs)));
        c.op_imm("WARPGROUP.DEPBAR.LE", &[], &[], 1);
        let s = |i: u64| r(g.s + i as u8);
        let dp = |i: u64| r(g.dp + i as u8);
        if masked {
            for i in 0..el {
                c.op("ISETP.GE.AND", &[pred(1)], &[r(TID)]).op("FSEL", &[s(i)], &[s(i), pred(1)]);
            }
        }
        // P = exp2(S·scale_log2 − LSE_log2).
        let rows = t.block_m / t.atom_sdp / 4;
        for i in 0..el {
            let lse = r(LSE + (i / 2 % 4) as u8);
            if pl.shuffle_stats() && i % (el / rows).max(1) == 0 {
                c.op("SHFL.IDX", &[lse], &[lse]);
            }
            c.op("FFMA", &[s(i)], &[s(i), r(SCALE), lse]).op("MUFU.EX2", &[s(i)], &[s(i)]);
        }
        self.stats(c, sm.dpsum + ds * sm.stat_stage, DPSUM);
        c.op_imm("WARPGROUP.DEPBAR.LE", &[], &[], 0);
        // dS = P∘(dP − dPsum).
        for i in 0..el {
            let sum = r(DPSUM + (i / 2 % 4) as u8);
            if pl.shuffle_stats() && i % (el / rows).max(1) == 0 {
                c.op("SHFL.IDX", &[sum], &[sum]);
            }
            c.op("FADD", &[dp(i)], &[dp(i), sum]).op("FMUL", &[dp(i)], &[dp(i), s(i)]);
        }
        let half = g.el / 2;
        let pack = pl.dtype.pack();
        for i in 0..half {
            c.op(pack, &[r(g.s + i)], &[rr(g.s + 2 * i, 2)]);
        }
        let pds = pl.e * el * 32;
        let all = self.all();
        if !pl.dkv_rs() {
            if t.stages_ds == 1 {
                // The previous block's P is read by its dV GEMM before it is overwritten.
                c.op_imm("BAR.SYNC", &[], &[], named(PDS_BAR, all));
            }
            let buf = sm.p + ps * t.block_m * t.block_n * pl.e;
            stsm(c, t.sdp_swap, half as u64, g.s, self.per_warp(buf, pds));
        }
        for i in 0..half {
            c.op(pack, &[r(g.s + half + i)], &[rr(g.dp + 2 * i, 2)]);
        }
        if !pl.dkv_rs() || t.stages_ds == 1 {
            c.op("FENCE.VIEW.ASYNC.S", &[], &[]);
            c.op_imm("BAR.SYNC", &[], &[], named(PDS_BAR, all));
        }
        let buf = sm.ds + ps * t.block_m * t.block_n * pl.e;
        stsm(c, t.sdp_swap, half as u64, g.s + half, self.per_warp(buf, pds));
        let (gkv, gq) = (pl.gemm_dkv(), pl.gemm_dq());
        let dv_acc = rr(g.dv, g.kv);
        let dk_acc = rr(g.dk, g.kv);
        let p_regs = pl.dkv_rs().then_some((g.s, half));
        let ds_regs = pl.dkv_rs().then_some((g.s + half, half));
        let dq_el = if pl.sliced() { pl.dq_elems() / 2 } else { pl.dq_elems() };
        let dq_acc = rr(g.dq, dq_el as u8);
        if !pl.sliced() {
            self.gemm(c, &self.kv_op, dv_acc, gkv.count, p_regs);
            c.op("FENCE.VIEW.ASYNC.S", &[], &[]);
            c.op_imm("BAR.SYNC", &[], &[], named(PDS_BAR, all));
            self.gemm(c, &self.dq_op, dq_acc, gq.count, None);
            c.op_imm("WARPGROUP.DEPBAR.LE", &[], &[], 1);
            self.release(c, Bar::DoEmpty, ds);
            self.gemm(c, &self.kv_op, dk_acc, gkv.count, ds_regs);
            c.op_imm("WARPGROUP.DEPBAR.LE", &[], &[], 1);
            // dQ to shared memory for the writer warp.
            let pair = 128 + 32;
            c.op_imm("BAR.SYNC", &[], &[], named(DQ_EMPTY_BAR + self.wg as u8, pair));
            let part = t.block_m * pl.kd * 4 / t.wgs;
            let base = sm.dq + self.wg * part;
            for k in 0..dq_el / 4 {
                let a = self.in_wg(base + k * 2048, 512);
                c.mem("STS.128", &[], &[r(TID), rr(g.dq + (4 * k) as u8, 4)], a);
            }
            c.op("FENCE.VIEW.ASYNC.S", &[], &[]);
            c.op_imm("BAR.ARV", &[], &[], named(DQ_FULL_BAR + self.wg as u8, pair));
        } else {
            // d256: each GEMM in two halves; dQ added by 16-byte atomics between them.
            let (hv, hq) = (gkv.count / 2, gq.count / 2);
            let part = t.block_m * pl.kd * 4 / t.wgs;
            let dq_red = |c: &mut Code, first: u64| {
                // Thread t of the warpgroup adds float4 i at `(i·128 + t)·16` of its part.
                for k in 0..dq_el / 4 {
                    let a = pl.dq_acc(&self.at.bh, m).plus(self.wg * part + (first + k) * 2048);
                    let a = a.plus_signed(-(4 * (self.wg as i64 + 1)) * 512).term(Var::Warp, 512);
                    c.mem("REDG.E.ADD.F32x4.FTZ.RN.STRONG.GPU", &[], &[rr(2, 2), rr(g.dq + (4 * k) as u8, 4)], a);
                }
            };
            self.gemm(c, &self.kv_op, dv_acc, hv, None);
            c.op("FENCE.VIEW.ASYNC.S", &[], &[]);
            c.op_imm("BAR.SYNC", &[], &[], named(PDS_BAR, all));
            self.gemm(c, &self.dq_op, dq_acc, hq, None);
            self.gemm(c, &self.kv_op, dv_acc, gkv.count - hv, None);
            c.op_imm("WARPGROUP.DEPBAR.LE", &[], &[], 1);
            dq_red(c, 0);
            self.gemm(c, &self.kv_op, dk_acc, hv, None);
            c.op_imm("WARPGROUP.DEPBAR.LE", &[], &[], 1);
            self.release(c, Bar::DoEmpty, ds);
            self.gemm(c, &self.dq_op, dq_acc, gq.count - hq, None);
            c.op_imm("WARPGROUP.DEPBAR.LE", &[], &[], 0);
            dq_red(c, dq_el / 4);
            self.gemm(c, &self.kv_op, dk_acc, gkv.count - hv, None);
        }
        c.op_imm("WARPGROUP.DEPBAR.LE", &[], &[], 0);
        self.release(c, Bar::QEmpty, qs);
        loop_control(c);
    }

    /// After the last block: dK scaled, then dK and dV out (TMA stores, or reduce-adds into the
    /// fp32 accumulators under GQA).
    fn epilogue(&self, c: &mut Code, lead: bool) {
        let (pl, g) = (self.pl, &self.g);
        let t = &pl.t;
        let tens = &pl.tensors;
        let kv = g.kv as u64;
        for i in 0..kv {
            c.op("FMUL", &[r(g.dk + i as u8)], &[r(g.dk + i as u8), r(SCALE)]);
        }
        let all = self.all();
        if !pl.gqa() {
            let pack = pl.dtype.pack();
            for acc in [g.dv, g.dk] {
                for i in 0..g.kv / 2 {
                    c.op(pack, &[r(acc + i)], &[rr(acc + 2 * i, 2)]);
                }
            }
            c.op_imm("BAR.SYNC", &[], &[], named(EPILOGUE_BAR, all));
            let share = kv / 2 * 4 * 32;
            let tile = t.block_n * pl.kd * pl.e;
            stsm(c, t.dkv_swap, kv / 2, g.dv, self.per_warp(0, share));
            stsm(c, t.dkv_swap, kv / 2, g.dk, self.per_warp(tile, share));
            c.op("FENCE.VIEW.ASYNC.S", &[], &[]);
            c.op_imm("BAR.ARV", &[], &[], named(EPILOGUE_BAR, all + 32));
            if lead {
                c.op_imm("BAR.SYNC", &[], &[], named(EPILOGUE_BAR, all + 32));
                let bytes = t.block_n * pl.d * pl.e;
                c.set_mask(1);
                for (base, desc) in [(tens.d_v, 8), (tens.d_k, 12)] {
                    let a = pl.kv_block(base, &self.at.kvh, &self.at.n);
                    c.bulk("UTMASTG.4D", &[], &[urr(desc, 2), urr(4, 2)], a, bytes as u32);
                }
                c.op("UTMACMDFLUSH", &[], &[]);
                c.op_imm("DEPBAR.LE", &[], &[], 0);
                c.set_mask(u32::MAX);
            }
            return;
        }
        // GQA: fp32 dV, then dK, through shared memory into the accumulators of the KV head.
        let part = t.block_n * pl.kd * 4 / t.wgs;
        let bytes = t.block_n * pl.kd * 4;
        c.op_imm("BAR.SYNC", &[], &[], named(EPILOGUE_BAR, all));
        for (i, (acc, base)) in [(g.dv, pl.dv_accum), (g.dk, pl.dk_accum)].into_iter().enumerate() {
            if i > 0 {
                c.op_imm("BAR.SYNC", &[], &[], named(EPILOGUE_BAR, all));
            }
            for k in 0..kv / 4 {
                let a = self.in_wg(self.wg * part + k * 2048, 512);
                c.mem("STS.128", &[], &[r(TID), rr(acc + (4 * k) as u8, 4)], a);
            }
            c.op("FENCE.VIEW.ASYNC.S", &[], &[]);
            c.op_imm("BAR.SYNC", &[], &[], named(EPILOGUE_BAR, all));
            if lead {
                c.set_mask(1);
                let a = pl.kv_acc(base, &self.at.kvh, &self.at.n);
                c.bulk("UBLKRED.G.S.ADD.F32.RN", &[], &[urr(8, 2), urr(4, 2)], a, bytes as u32);
                c.op("UTMACMDFLUSH", &[], &[]);
                c.op_imm("DEPBAR.LE", &[], &[], 0);
                c.set_mask(u32::MAX);
            }
        }
    }
}

/// A warp of MMA warpgroup `wg`: `init_dq` (its warp 0) opens the dQ hand-over, `lead` issues
/// the epilogue's bulk stores.
fn consumer(pl: &BwdPlan, ops: &mut OpTable, wg: u64, init_dq: bool, lead: bool) -> Program {
    let t = &pl.t;
    let name = format!("mma_wg{}{}{}", wg + 1, if init_dq { "_w0" } else { "" }, if lead { "_epilogue" } else { "" });
    let mut c = Code::new(ops, &name);
    c.op_imm("USETMAXREG.TRY_ALLOC.CTAPOOL", &[], &[], pl.cons_regs);
    c.op("S2R", &[r(TID)], &[]).op("MOV", &[r(PHASE)], &[]);
    let at = cta_at(&mut c, pl, true);
    c.op("BAR.SYNC.DEFER_BLOCKING", &[], &[]);
    let x = Mma {
        pl,
        wg,
        g: regs(pl),
        s_op: gmma(pl.dtype, pl.gemm_s().n),
        kv_op: gmma(pl.dtype, pl.gemm_dkv().n),
        dq_op: gmma(pl.dtype, pl.gemm_dq().n),
        at,
    };
    // Every stage starts empty.
    for s in 0..2 {
        x.release(&mut c, Bar::QEmpty, s);
    }
    for s in 0..t.stages_do {
        x.release(&mut c, Bar::DoEmpty, s);
    }
    if init_dq {
        c.op_imm("BAR.ARV", &[], &[], named(DQ_EMPTY_BAR + wg as u8, 128 + 32));
    }
    wait(&mut c, pl.mbar(Bar::Kv, 0));
    if t.v_in_regs {
        // V's A fragments of the warpgroup's 64 key rows, once.
        let n = 64 * pl.kd / 256 / 4;
        for k in 0..n {
            let a = x.in_wg(pl.smem.v + wg * 64 * pl.kd * pl.e + k * 512, n * 512);
            c.mem("LDSM.16.M88.4", &[rr(x.g.v + 4 * k as u8, 4)], &[r(TID)], a);
        }
    }
    // The first block (masked at d ≤ 64 causal: the diagonal), then the rest in stage pairs.
    let causal_all = pl.causal && pl.kd > 64;
    x.step(&mut c, &x.at.m_min, 0, pl.causal);
    let m_min = x.at.m_min.clone();
    kv_steps(&mut c, &x.at.count, &mut |c, j, st| x.step(c, &sum(&m_min, j), st, causal_all), &mut |_, _, _| {})
        .expect("the trip counts are within the loop limits");
    x.epilogue(&mut c, lead);
    c.op("EXIT", &[], &[]);
    c.finish()
}

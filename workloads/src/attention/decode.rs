//! Decode attention: a few query tokens per request against a long (paged) KV cache, as
//! FlashAttention's split-KV kernel (`compute_attn_1rowblock_splitkv`, flash-decoding) runs it,
//! followed by its combine kernel (`combine_attn_seqk_parallel`); ../shared/notes/
//! kernel-designs.md §1 (split-KV) and §4 (paged KV).
//!
//! # Design
//! - **GQA** (`seqlenq_ngroups_swapped`): the `group` query heads of one KV head and the `sq`
//!   queries form the M rows of one 64-row tile, so a KV head is read once for its whole group
//!   (GQA reads `1/group` of the KV bytes MHA would). M rows beyond `sq·group` are computed and
//!   not stored. More than 64 such rows is a prefill-like problem: use fa2/fa3.
//! - **Tiles**: kBlockM = 64, 4 warps (128 threads); kBlockN = 256 (d ≤ 64), 128 (d ≤ 128), 64.
//! - **Grid** `(num_splits, kv_heads, batch)`; split s handles KV blocks
//!   `[s·nps, min((s+1)·nps, n))` of its request, `nps = ceil(n_max/num_splits)`.
//!   `num_splits` is FlashAttention's `num_splits_heuristic(b·hk·m_blocks, 2·SMs, n_blocks, 128)`
//!   ([`num_splits`]) unless given. Per-request lengths (varlen) give per-CTA trip counts.
//! - **Per KV block** (every thread): `DEPBAR` + `BAR.SYNC`, `cp.async` (`LDGSTS.128`) of V(j);
//!   S = QKᵀ (`LDSM` of Q and K, `HMMA.16816`, each warp 16 rows × kBlockN); `DEPBAR` +
//!   `BAR.SYNC`, `cp.async` of K(j+1) (not after the last block); online softmax (`FMNMX`,
//!   `SHFL.BFLY`, `FFMA` + `MUFU.EX2`, `FADD`), O rescale, P converted (`F2FP`); O += PV
//!   (`LDSM.16.MT88.4` of V, `HMMA`). A split writes its fp32 partial O and LSE, or O itself
//!   when there is one split.
//! - **Paged KV** (`page_size` = P): the cache is `[pages, P, hk, d]`; a KV block's rows are
//!   found through the block table: one `LDG` of the table entries per block, on which the
//!   block's `cp.async` addresses depend (a dependent global load). Page `i` of request `r` is
//!   physical page `i·batch + r`: consecutive pages of a request are not adjacent, so a block of
//!   several small pages is that many separate runs. P must divide kBlockN or be a multiple of
//!   it (then blocks run in bodies of P/kBlockN and each split's count is rounded to whole pages).
//! - **Combine** (split > 1, a second kernel after the first in its stream):
//!   `ceil(b·hk·rows / kBlockM_c)` CTAs of 128 threads, kBlockM_c = 4 (dv % 128 = 0), 8
//!   (dv % 64 = 0) or 16: the LSEs through shared memory, then per split one 16-byte load of
//!   the partial O per thread and its `FFMA`s, then O.
//!
//! # Approximations
//! - The partials are `[split, b·hk·rows, dv]` fp32 rows after the shared tensors; address
//!   arithmetic is not emitted; the causal mask of `sq > 1` is not applied (every query sees the
//!   whole cache, which is exact for `sq = 1`).

use std::sync::Arc;

use gpusim_configs::Arch;
use gpusim_isa::{CtaParam, Dim3, KernelInfo, KernelTrace, OpTable, Program, RegRange, Trace, Var};

use super::{AttnSpec, Tensors};
use crate::asm::{Addr, Affine, Code, assemble, p as pred, r, rr};
use crate::gemm::Dtype;
use crate::params::WorkloadError;

fn err(s: String) -> WorkloadError {
    WorkloadError(s)
}

/// FlashAttention's `num_splits_heuristic` (`flash_api.cpp`): one split when the tiles fill
/// 80% of `sms2` (twice the SMs), else the smallest eligible split count whose wave efficiency
/// is within 85% of the best, up to `max_splits`.
pub fn num_splits(tiles: u64, sms2: u64, n_blocks: u64, max_splits: u64) -> u64 {
    if tiles as f64 >= 0.8 * sms2 as f64 {
        return 1;
    }
    let max = max_splits.min(sms2).min(n_blocks).max(1);
    let eligible = |s: u64| s == 1 || n_blocks.div_ceil(s) != n_blocks.div_ceil(s - 1);
    let eff = |s: u64| {
        let waves = (tiles * s) as f64 / sms2 as f64;
        waves / waves.ceil()
    };
    let best = (1..=max).filter(|&s| eligible(s)).map(eff).fold(0.0, f64::max);
    (1..=max).find(|&s| eligible(s) && eff(s) >= 0.85 * best).unwrap_or(1)
}

/// Everything derived from the problem and the chip.
#[derive(Clone, Debug)]
pub struct Plan {
    pub bn: u64,
    pub d: u64,
    pub dv: u64,
    pub e: u64,
    pub hk: u64,
    pub group: u64,
    pub sq: u64,
    pub batch: u64,
    /// Valid M rows of the 64-row tile (`sq·group`).
    pub rows: u64,
    pub splits: u64,
    /// KV blocks per split (a multiple of `per_body`).
    pub nps: u64,
    /// KV blocks of each request.
    pub n_blocks: Vec<u64>,
    /// Rows of the longest request's cache (the padded batch stride).
    pub max_rows: u64,
    pub page: Option<u64>,
    /// KV blocks per loop body (a page larger than kBlockN holds several).
    pub per_body: u64,
}

pub fn plan(spec: &AttnSpec, arch: &Arch) -> Result<Plan, WorkloadError> {
    let (d, dv) = (spec.headdim, spec.headdim_v());
    if d > 256 || dv > 256 || !d.is_multiple_of(16) || !dv.is_multiple_of(16) {
        return Err(err(format!(
            "recipe decode builds head dims that are multiples of 16 up to 256; headdim = {d}, headdim_v = {dv} (MLA's \
             576/512: recipe = mla-decode)"
        )));
    }
    if spec.dtype == Dtype::Fp8 {
        return Err(err("recipe decode runs bf16/fp16 (FlashAttention's split-KV kernel has no fp8)".into()));
    }
    let group = spec.group();
    let rows = spec.seqlen * group;
    if rows > 64 {
        return Err(err(format!(
            "seqlen·heads/kv_heads = {rows} query rows per KV head exceed the decode kernel's 64-row tile; use recipe = \
             fa2 or fa3"
        )));
    }
    let bn: u64 = match d {
        0..=64 => 256,
        65..=128 => 128,
        _ => 64,
    };
    let page = spec.page_size.map(u64::from);
    if let Some(p) = page
        && !(bn.is_multiple_of(p) || p.is_multiple_of(bn))
    {
        return Err(err(format!(
            "page_size = {p}: the decode recipe needs pages that divide kBlockN = {bn} or are a multiple of it"
        )));
    }
    let per_body = page.map_or(1, |p| (p / bn).max(1));
    let n_blocks: Vec<u64> = (0..spec.batch).map(|b| spec.lengths(b).1.div_ceil(bn)).collect();
    let n_max = n_blocks.iter().copied().max().unwrap_or(1).max(1);
    let hk = spec.kv_heads();
    let splits = match spec.num_splits {
        Some(s) => (s as u64).min(n_max),
        None => num_splits(spec.batch * hk, 2 * arch.sm.count as u64, n_max, 128),
    }
    .max(1);
    let nps = n_max.div_ceil(splits).next_multiple_of(per_body);
    let splits = n_max.div_ceil(nps);
    if spec.batch * hk * splits > u32::MAX as u64 || hk > u16::MAX as u64 || spec.batch > u16::MAX as u64 {
        return Err(err("too many CTAs for one grid".into()));
    }
    Ok(Plan {
        bn,
        d,
        dv,
        e: spec.dtype.bytes(),
        hk,
        group,
        sq: spec.seqlen,
        batch: spec.batch,
        rows,
        splits,
        nps,
        max_rows: n_max * bn,
        n_blocks,
        page,
        per_body,
    })
}

/// The decode kernels of `spec`: the split-KV kernel, then (with more than one split) the
/// combine kernel, in one stream.
pub fn fwd(spec: &AttnSpec, arch: &Arch) -> Result<Trace, WorkloadError> {
    let pl = plan(spec, arch)?;
    let t = Tensors::new(spec);
    let mut kernels = vec![split_kernel(&pl, &t)?];
    if pl.splits > 1 {
        kernels.push(combine_kernel(&pl, &t)?);
    }
    Ok(Trace { kernels })
}

/// Registers.
const TID: u8 = 0;
const PAGE: u8 = 2;
const CNT: u8 = 4;
const MAX: u8 = 8;
const SUM: u8 = 12;
const SCALE: u8 = 16;
const QF: u8 = 20;
const KF: u8 = 28;
const S_ACC: u8 = 36;

const HMMA: &str = "HMMA.16816.F32.BF16";

/// Where the partial O (fp32) of the splits starts.
fn oaccum(t: &Tensors) -> u64 {
    t.scratch + (1 << 24)
}

fn split_kernel(pl: &Plan, t: &Tensors) -> Result<KernelTrace, WorkloadError> {
    let mut ops = OpTable::new();
    let table: Arc<[i64]> = Arc::from(pl.n_blocks.iter().map(|&n| n as i64).collect::<Vec<_>>());
    let programs =
        (0..4u64).map(|w| split_program(pl, t, &mut ops, w, table.clone())).collect::<Result<Vec<Program>, _>>()?;
    let name = format!(
        "flash_fwd_splitkv_kernel_hdim{}_64x{}{}_splits{}",
        pl.d,
        pl.bn,
        pl.page.map_or(String::new(), |p| format!("_paged{p}")),
        pl.splits
    );
    let grid = Dim3::new(pl.splits as u32, pl.hk as u32, pl.batch as u32);
    let mut info = KernelInfo::new(0, name, grid, Dim3::new(128, 1, 1));
    info.regs_per_thread = 255;
    info.smem_bytes = (64 * pl.d * pl.e + pl.bn * (pl.d + pl.dv) * pl.e) as u32;
    info.sm_version = 80;
    assemble(info, ops, programs, vec![0, 1, 2, 3], Default::default()).map_err(err)
}

/// Lane offsets of a 16-byte copy instruction: lane `l` copies chunk `l % tpr` of row `l / tpr`.
fn copy_lanes(row_stride: u64, tpr: u64) -> Vec<i64> {
    (0..32u64).map(|l| ((l / tpr) * row_stride + (l % tpr) * 16) as i64).collect()
}

/// Byte offset of KV row `row` within a KV block's first row, for a cache of `stride` bytes per
/// row: across small pages the rows jump to the next physical page.
fn row_offset(pl: &Plan, row: u64, stride: u64) -> u64 {
    match pl.page.filter(|&p| p < pl.bn) {
        Some(p) => (row / p) * p * stride * pl.batch + (row % p) * stride,
        None => row * stride,
    }
}

fn split_program(
    pl: &Plan,
    t: &Tensors,
    ops: &mut OpTable,
    warp: u64,
    table: Arc<[i64]>,
) -> Result<Program, WorkloadError> {
    let mut c = Code::new(ops, &format!("splitkv_warp{warp}"));
    let e = pl.e;
    let (ks, vs) = (pl.hk * pl.d * e, pl.hk * pl.dv * e);
    // Per-CTA parameters: the request's blocks, this split's count, loop bodies.
    let tab = c.table(table);
    let n = c.param(CtaParam { table: Some(tab), ..CtaParam::constant(0).with(Var::CtaZ, 1) });
    let cnt = c.param(CtaParam {
        lo: 0,
        hi: pl.nps as i64,
        ..CtaParam::constant(0).with(n, 1).with(Var::CtaX, -(pl.nps as i64))
    });
    let per = pl.per_body as i64;
    let bodies = c.param(CtaParam { offset: per - 1, div: per, lo: 0, ..CtaParam::default() }.with(cnt, 1));
    let first = c.param(CtaParam { offset: -1, lo: 0, ..CtaParam::default() }.with(bodies, 1));
    let last = c.param(CtaParam { lo: 0, hi: 1, ..CtaParam::default() }.with(bodies, 1));

    // Row 0 of block `j` of this split (j counts blocks from the split's first), K or V.
    let kv_addr = |base: u64, stride: u64, head_bytes: u64, j: &Affine| -> Addr {
        let a = Addr::at(base).term(Var::CtaY, head_bytes as i64);
        match pl.page {
            None => a
                .term(Var::CtaZ, (pl.max_rows * stride) as i64)
                .term(Var::CtaX, (pl.nps * pl.bn * stride) as i64)
                .index(j, pl.bn * stride),
            Some(p) => {
                // Physical page i·batch + r.
                let page_stride = p * stride * pl.batch;
                let a = a.term(Var::CtaZ, (p * stride) as i64);
                if p >= pl.bn {
                    // j = body·per_body + k: page `body`, block k within it.
                    let k = j.konst % pl.per_body;
                    let page = Affine { konst: j.konst / pl.per_body, terms: j.terms.clone() };
                    a.term(Var::CtaX, ((pl.nps / pl.per_body) * page_stride) as i64)
                        .plus(k * pl.bn * stride)
                        .index(&page, page_stride)
                } else {
                    let pages = pl.bn / p;
                    a.term(Var::CtaX, (pl.nps * pages * page_stride) as i64).index(j, pages * page_stride)
                }
            }
        }
    };
    let (tpr_k, tpr_v) = ((pl.d * e / 16).min(32), (pl.dv * e / 16).min(32));
    let (rk, rv) = (32 / tpr_k, 32 / tpr_v);
    // The 4 warps' instructions interleave: instruction i of warp w covers rows (4i + w)·r...
    let copy = |c: &mut Code, base: Addr, stride: u64, tpr: u64, rpi: u64| {
        let lanes = copy_lanes(stride, tpr);
        let paged = pl.page.is_some();
        for i in 0..pl.bn / (4 * rpi) {
            let row0 = (4 * i + warp) * rpi;
            let src: &[RegRange] = if paged { &[r(TID), r(PAGE)] } else { &[r(TID)] };
            c.mem_lanes("LDGSTS.E.BYPASS.128", &[], src, base.plus(row_offset(pl, row0, stride)), &lanes);
        }
        c.op("LDGDEPBAR", &[], &[]);
    };
    let table_load = |c: &mut Code, j: &Affine| {
        if let Some(p) = pl.page {
            // The block table entries (int32 [b, pages]) of the pages block j touches.
            let pages = (pl.bn / p).max(1);
            let per_req = pl.max_rows.div_ceil(p) * 4;
            let page0 = Affine { konst: j.konst / pl.per_body, terms: j.terms.clone() };
            let step = if p >= pl.bn { 4 } else { 4 * pages };
            let a = Addr::at(t.scratch)
                .term(Var::CtaZ, per_req as i64)
                .term(Var::CtaX, ((pl.nps / pl.per_body) * step) as i64)
                .index(&page0, step);
            let lanes: Vec<i64> = (0..32).map(|l| 4 * (l % pages as i64)).collect();
            c.mem_lanes("LDG.E", &[r(PAGE)], &[r(TID)], a, &lanes);
        }
    };

    c.op("S2R", &[r(TID)], &[]).op("S2R", &[r(1)], &[]).op("MOV", &[r(CNT)], &[]);
    // Q: the tile's valid rows (sq·group query rows of this KV head), by 16-byte copies.
    let q = Addr::at(t.q)
        .term(Var::CtaZ, (pl.sq * pl.hk * pl.group * pl.d * e) as i64)
        .term(Var::CtaY, (pl.group * pl.d * e) as i64);
    let q_insts = (pl.rows * pl.d * e).div_ceil(16 * 128);
    for i in 0..q_insts {
        let lanes = copy_lanes(pl.d * e, tpr_k);
        c.mem_lanes("LDGSTS.E.BYPASS.128", &[], &[r(TID)], q.plus((4 * i + warp) * rk * pl.d * e), &lanes);
    }
    let j0 = Affine::konst(0);
    table_load(&mut c, &j0);
    copy(&mut c, kv_addr(t.k, ks, pl.d * e, &j0), ks, tpr_k, rk);

    let el = (pl.bn / 2) as u8;
    let o = S_ACC + el;
    let ov = (pl.dv / 2) as u8;
    let q_smem = 64 * pl.d * e;
    let block = |c: &mut Code, j: &Affine, prefetch: bool, table_next: bool| {
        c.op_imm("DEPBAR.LE", &[], &[], 0);
        c.op("BAR.SYNC.DEFER_BLOCKING", &[], &[]);
        copy(c, kv_addr(t.v, vs, pl.dv * e, j), vs, tpr_v, rv);
        // S = QKᵀ: per 16-wide k-slice one LDSM of Q, kBlockN/16 of K, kBlockN/8 HMMA.
        for kslice in 0..pl.d / 16 {
            c.mem(
                "LDSM.16.M88.4",
                &[rr(QF, 4)],
                &[r(TID)],
                Addr::at(kslice * 512).term(Var::Warp, (16 * pl.d * e) as i64),
            );
            for nb in 0..pl.bn / 16 {
                c.mem("LDSM.16.M88.4", &[rr(KF, 4)], &[r(TID)], Addr::at(q_smem + (nb * pl.d / 16 + kslice) * 512));
                for h in 0..2u8 {
                    let acc = rr(S_ACC + (4 * (2 * nb as u8 + h)) % el, 4);
                    c.op(HMMA, &[acc], &[rr(QF, 4), rr(KF + 2 * h, 2), acc]);
                }
            }
        }
        if prefetch {
            c.op_imm("DEPBAR.LE", &[], &[], 0);
            c.op("BAR.SYNC.DEFER_BLOCKING", &[], &[]);
            let jn = Affine { konst: j.konst + 1, terms: j.terms.clone() };
            if table_next {
                table_load(c, &jn);
            }
            copy(c, kv_addr(t.k, ks, pl.d * e, &jn), ks, tpr_k, rk);
        }
        // Online softmax over the thread's kBlockN/2 scores (2 rows).
        for i in 0..el {
            c.op("FMNMX", &[r(MAX + i % 2)], &[r(MAX + i % 2), r(S_ACC + i)]);
        }
        for k in 0..2u8 {
            for _ in 0..2 {
                c.op("SHFL.BFLY", &[r(MAX + 2 + k)], &[r(MAX + k)]);
                c.op("FMNMX", &[r(MAX + k)], &[r(MAX + k), r(MAX + 2 + k)]);
            }
            c.op("FADD", &[r(SCALE + k)], &[r(SCALE + 2 + k), r(MAX + k)]);
            c.op("MUFU.EX2", &[r(SCALE + k)], &[r(SCALE + k)]);
        }
        for i in 0..el {
            c.op("FFMA", &[r(S_ACC + i)], &[r(S_ACC + i), r(MAX + i % 2)]);
            c.op("MUFU.EX2", &[r(S_ACC + i)], &[r(S_ACC + i)]);
            c.op("FADD", &[r(SUM + i % 2)], &[r(SUM + i % 2), r(S_ACC + i)]);
        }
        for i in 0..ov {
            c.op("FMUL", &[r(o + i)], &[r(o + i), r(SCALE + i % 2)]);
        }
        for i in 0..el / 2 {
            c.op("F2FP.BF16.F32.PACK_AB", &[r(S_ACC + i)], &[rr(S_ACC + 2 * i, 2)]);
        }
        // O += P·V: per 16-wide slice of kBlockN, dv/16 LDSM.T of V and dv/8 HMMA.
        for kslice in 0..pl.bn / 16 {
            for nb in 0..pl.dv / 16 {
                let a = Addr::at(q_smem + pl.bn * pl.d * e + (kslice * pl.dv / 16 + nb) * 512);
                c.mem("LDSM.16.MT88.4", &[rr(KF, 4)], &[r(TID)], a);
                for h in 0..2u8 {
                    let acc = rr(o + (4 * (2 * nb as u8 + h)) % ov, 4);
                    let pa = rr(S_ACC + (4 * kslice as u8) % (el / 2).max(4), 4);
                    c.op(HMMA, &[acc], &[pa, rr(KF + 2 * h, 2), acc]);
                }
            }
        }
    };
    let body = |c: &mut Code, j0: Affine, prefetch_last: bool| {
        for k in 0..pl.per_body {
            let j = Affine { konst: j0.konst + k, terms: j0.terms.clone() };
            let last_in_body = k + 1 == pl.per_body;
            block(c, &j, !last_in_body || prefetch_last, last_in_body);
        }
    };
    // All bodies but the last prefetch the next block's K; the last body (if any) does not.
    let v = c.begin_param(first);
    body(&mut c, Affine::konst(0).with(v, pl.per_body), true);
    c.op("IADD3", &[r(CNT)], &[r(CNT)]).op("ISETP.NE.AND", &[pred(1)], &[r(CNT)]).op("BRA", &[], &[pred(1)]);
    c.end();
    c.begin_param(last);
    body(&mut c, Affine::konst(0).with(first, pl.per_body), false);
    c.end();

    // Epilogue: the quad's row sums, then O (one split) or the fp32 partial O and LSE.
    for k in 0..2u8 {
        for _ in 0..2 {
            c.op("SHFL.BFLY", &[r(SUM + 2 + k)], &[r(SUM + k)]);
            c.op("FADD", &[r(SUM + k)], &[r(SUM + k), r(SUM + 2 + k)]);
        }
        c.op("MUFU.RCP", &[r(SCALE + k)], &[r(SUM + k)]);
    }
    // Valid rows of this warp: lane l holds rows l/4 and l/4 + 8 of the warp's 16.
    let valid = pl.rows.saturating_sub(16 * warp).min(16);
    let split = pl.splits > 1;
    let (out, ob) = if split { (oaccum(t), 4) } else { (t.o, e) };
    let row_bytes = pl.dv * ob;
    let split_stride = pl.batch * pl.hk * pl.rows * row_bytes;
    for half in 0..2u64 {
        let rows = valid.saturating_sub(8 * half).min(8);
        if rows == 0 {
            continue;
        }
        c.set_mask(if rows >= 8 { u32::MAX } else { (1u32 << (4 * rows)) - 1 });
        let lanes: Vec<i64> =
            (0..4 * rows as i64).map(|l| (l / 4) * row_bytes as i64 + (l % 4) * 2 * ob as i64).collect();
        let base = Addr::at(out + (16 * warp + 8 * half) * row_bytes)
            .term(Var::CtaZ, (pl.hk * pl.rows * row_bytes) as i64)
            .term(Var::CtaY, (pl.rows * row_bytes) as i64)
            .term(Var::CtaX, if split { split_stride as i64 } else { 0 });
        for q in 0..pl.dv / 8 {
            let v = rr(o + (2 * q as u8) % ov, 2);
            let st = if split { "STG.E.64" } else { "STG.E" };
            c.mem_lanes(st, &[], &[r(TID), v], base.plus(q * 8 * ob), &lanes);
        }
        if split {
            let lse: Vec<i64> = (0..4 * rows as i64).map(|l| (l / 4) * 4).collect();
            let a = Addr::at(t.scratch + (1 << 23) + (16 * warp + 8 * half) * 4)
                .term(Var::CtaZ, (pl.hk * pl.rows * 4) as i64)
                .term(Var::CtaY, (pl.rows * 4) as i64)
                .term(Var::CtaX, (pl.batch * pl.hk * pl.rows * 4) as i64);
            c.mem_lanes("STG.E", &[], &[r(TID), r(SCALE)], a, &lse);
        }
        c.set_mask(u32::MAX);
    }
    c.op("EXIT", &[], &[]);
    Ok(c.finish())
}

/// `combine_attn_seqk_parallel`: merges the splits' partial O with their LSE weights.
fn combine_kernel(pl: &Plan, t: &Tensors) -> Result<KernelTrace, WorkloadError> {
    let kc = if pl.dv.is_multiple_of(128) {
        4
    } else if pl.dv.is_multiple_of(64) {
        8
    } else {
        16
    };
    let total_rows = pl.batch * pl.hk * pl.rows;
    let ctas = total_rows.div_ceil(kc);
    let mut ops = OpTable::new();
    let mut c = Code::new(&mut ops, "combine");
    let split_stride = total_rows * pl.dv * 4;
    c.op("S2R", &[r(TID)], &[]);
    // The CTA's rows' LSEs of every split into shared memory, then their log-sum-exp.
    let lse = t.scratch + (1 << 23);
    for i in 0..(kc * pl.splits).div_ceil(128) {
        let a = Addr::at(lse + i * 512).term(Var::CtaX, (kc * 4) as i64).term(Var::Warp, 128);
        c.mem("LDG.E", &[r(2)], &[r(TID)], a);
        c.mem("STS", &[], &[r(TID), r(2)], Addr::at(i * 512).term(Var::Warp, 128));
    }
    c.op("BAR.SYNC.DEFER_BLOCKING", &[], &[]);
    for s in 0..pl.splits.min(8) {
        c.mem("LDS", &[r(3)], &[r(TID)], Addr::at(4 * s));
        c.op("FMNMX", &[r(MAX)], &[r(MAX), r(3)]);
        c.op("FADD", &[r(3)], &[r(3), r(MAX)]).op("MUFU.EX2", &[r(3)], &[r(3)]).op("FADD", &[r(SUM)], &[r(SUM), r(3)]);
    }
    c.op("MUFU.LG2", &[r(SUM)], &[r(SUM)]);
    c.op("BAR.SYNC.DEFER_BLOCKING", &[], &[]);
    // Per split: kc·dv/512 16-byte loads of the partial O per thread, 4 FFMAs each.
    let loads = (kc * pl.dv).div_ceil(512);
    let s = c.begin(pl.splits as u32);
    c.mem("LDS", &[r(3)], &[r(TID)], Addr::at(0).term(s, 4));
    c.op("MUFU.EX2", &[r(3)], &[r(3)]);
    for i in 0..loads as u8 {
        let a = Addr::at(oaccum(t) + i as u64 * 2048)
            .term(Var::CtaX, (kc * pl.dv * 4) as i64)
            .term(Var::Warp, 512)
            .term(s, split_stride as i64);
        c.mem("LDG.E.128", &[rr(20 + 4 * i, 4)], &[r(TID)], a);
        for k in 0..4u8 {
            c.op("FFMA", &[r(40 + 4 * i + k)], &[r(20 + 4 * i + k), r(3), r(40 + 4 * i + k)]);
        }
    }
    c.end();
    for i in 0..loads as u8 {
        c.op("F2FP.BF16.F32.PACK_AB", &[rr(40 + 4 * i, 2)], &[rr(40 + 4 * i, 4)]);
        let a = Addr::at(t.o + i as u64 * 1024).term(Var::CtaX, (kc * pl.dv * pl.e) as i64).term(Var::Warp, 256);
        c.mem("STG.E.64", &[], &[r(TID), rr(40 + 4 * i, 2)], a);
    }
    c.op("EXIT", &[], &[]);
    let p = c.finish();
    let name = format!("flash_fwd_splitkv_combine_kernel_hdim{}_kBlockM{kc}_splits{}", pl.dv, pl.splits);
    let mut info = KernelInfo::new(1, name, Dim3::new(ctas as u32, 1, 1), Dim3::new(128, 1, 1));
    info.regs_per_thread = 64;
    info.smem_bytes = (kc * pl.splits * 4 + 128) as u32;
    info.sm_version = 80;
    assemble(info, ops, vec![p], vec![0, 0, 0, 0], Default::default()).map_err(err)
}

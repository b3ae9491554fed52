//! Building blocks of the sm80 attention kernels (FA2 forward and backward): tile copies by
//! `cp.async`, `ldmatrix` fragment loads, `mma.sync` blocks, per-CTA KV trip-count tables, the
//! CTA coordinates' address terms.

use std::sync::Arc;

use gpusim_isa::{CtaParam, Var};

use super::AttnSpec;
use crate::asm::{Addr, Code, r, rr};
use crate::gemm::Dtype;

/// `HMMA.16816` of the input type (fp32 accumulation).
pub(crate) fn mma_name(d: Dtype) -> &'static str {
    match d {
        Dtype::Fp16 => "HMMA.16816.F32",
        _ => "HMMA.16816.F32.BF16",
    }
}

/// Lane offsets of a warp copying rows of `row_bytes` (a power of two, 64 to 512) in 16-byte
/// chunks: lane `l` takes chunk `l % cpr` of row `l / cpr`, rows `pitch` bytes apart.
pub(crate) fn row_lanes(row_bytes: u64, pitch: u64) -> Vec<i64> {
    let cpr = (row_bytes / 16).max(1);
    (0..32u64).map(|l| ((l / cpr) * pitch + (l % cpr) * 16) as i64).collect()
}

/// A tile of `rows` rows of `row_bytes` (global rows `pitch` apart, starting at `src`) copied by
/// the CTA's `threads` into shared memory with `LDGSTS.E.BYPASS.128`, as CUTLASS's copy
/// partitions it: thread `t`'s `i`-th copy is chunk `i·threads + t`. `row_bytes` is a power of two
/// from 64 to 512 (head dims 32 to 256 of 16-bit elements).
pub(crate) fn copy_tile(c: &mut Code, src: Addr, rows: u64, row_bytes: u64, pitch: u64, threads: u64, regs: (u8, u8)) {
    let cpr = row_bytes / 16;
    let per_thread = (rows * cpr).div_ceil(threads);
    let rows_per_warp_inst = 32 / cpr;
    let lanes = row_lanes(row_bytes, pitch);
    for i in 0..per_thread {
        let first_row = i * threads / cpr;
        let addr = src.plus(first_row * pitch).term(Var::Warp, (rows_per_warp_inst * pitch) as i64);
        c.mem_lanes("LDGSTS.E.BYPASS.128", &[], &[r(regs.0), rr(regs.1, 2)], addr, &lanes);
    }
}

/// Number of `LDGSTS.128` per thread for a tile.
pub(crate) fn copies_per_thread(rows: u64, row_bytes: u64, threads: u64) -> u64 {
    (rows * (row_bytes / 16)).div_ceil(threads)
}

/// A global tile store by the CTA's threads, 16 B per lane (`STG.E.128`), chunks partitioned as
/// [`copy_tile`]; `vals` is the register block holding the thread's data, 4 per store.
pub(crate) fn store_tile(c: &mut Code, dst: Addr, rows: u64, row_bytes: u64, pitch: u64, threads: u64, vals: u8) {
    let cpr = row_bytes / 16;
    let per_thread = (rows * cpr).div_ceil(threads);
    let rows_per_warp_inst = 32 / cpr;
    let lanes = row_lanes(row_bytes, pitch);
    for i in 0..per_thread {
        let first_row = i * threads / cpr;
        let addr = dst.plus(first_row * pitch).term(Var::Warp, (rows_per_warp_inst * pitch) as i64);
        c.mem_lanes("STG.E.128", &[], &[rr(2, 2), rr(vals.wrapping_add((4 * i) as u8), 4)], addr, &lanes);
    }
}

/// Row pitch in bytes of a `[b, s, heads, d]` tensor.
pub(crate) fn pitch(heads: u64, d: u64, e: u64) -> u64 {
    heads * d * e
}

/// The per-CTA KV trip counts of a query tile, as FA2's `compute_attn_1rowblock` runs them: the
/// masked iterations first (from `n_block_max − 1` down), then the unmasked ones; the last
/// iteration issues no K prefetch. `[masked with prefetch, unmasked with prefetch, last masked,
/// last unmasked]`.
pub(crate) fn fwd_trips(n_block_max: u64, mask_steps: u64) -> [i64; 4] {
    if n_block_max == 0 {
        return [0; 4];
    }
    let masked = mask_steps.min(n_block_max);
    let unmasked = n_block_max - masked;
    if unmasked > 0 { [masked as i64, unmasked as i64 - 1, 0, 1] } else { [masked as i64 - 1, 0, 1, 0] }
}

/// Per-CTA trip counts as parameters read from tables indexed by the CTA's tile (`cta.x`) and,
/// under varlen, request (`cta.y`): `trips(request, tile)` gives each CTA's counts. Returns one
/// parameter per count. Tables hold `tiles` (or `batch·tiles`) entries.
pub(crate) fn trip_params<const N: usize>(
    c: &mut Code,
    s: &AttnSpec,
    tiles: u64,
    trips: impl Fn(u64, u64) -> [i64; N],
) -> [Var; N] {
    let per_request = s.varlen.is_some();
    let rows = if per_request { s.batch } else { 1 };
    let mut cols: Vec<Vec<i64>> = vec![Vec::with_capacity((rows * tiles) as usize); N];
    for b in 0..rows {
        for t in 0..tiles {
            let v = trips(b, t);
            for (k, col) in cols.iter_mut().enumerate() {
                col.push(v[k]);
            }
        }
    }
    let mut out = [Var::CtaX; N];
    for (k, col) in cols.into_iter().enumerate() {
        // A count that is the same for every CTA is a constant parameter (no table).
        let p = if col.iter().all(|&x| x == col[0]) {
            CtaParam::constant(col[0])
        } else {
            let t = c.table(Arc::from(col));
            let mut p = CtaParam::default().with(Var::CtaX, 1);
            if per_request {
                p = p.with(Var::CtaY, tiles as i64);
            }
            p.table = Some(t);
            p
        };
        out[k] = c.param(p);
    }
    out
}

/// `cta.z / group`: the KV head of a query head under GQA (`cta.z` itself without).
pub(crate) fn kv_head(c: &mut Code, group: u64) -> Var {
    if group == 1 {
        Var::CtaZ
    } else {
        c.param(CtaParam { div: group as i64, ..CtaParam::default().with(Var::CtaZ, 1) })
    }
}

/// The loop-control tail of an iteration: counter, compare, branch.
pub(crate) fn loop_tail(c: &mut Code, cnt: u8) {
    use crate::asm::p as pred;
    c.op("IADD3", &[r(cnt)], &[r(cnt)]).op("ISETP.GT.AND", &[pred(0)], &[r(cnt)]);
    c.op("BRA", &[], &[pred(0)]);
}

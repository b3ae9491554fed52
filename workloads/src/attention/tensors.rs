//! Where an attention problem's tensors live, shared by every recipe and pass so a forward and
//! its backward in one trace touch the same bytes.
//!
//! Layout (FlashAttention's `bshd`, row-major): Q and dQ `[b, sq, h, d]`, K and dK `[b, sk, hk, d]`,
//! V and dV `[b, sk, hk, dv]`, O and dO `[b, sq, h, dv]` in the input type; LSE and the softmax
//! row sums `D` `[b, h, sq]` fp32; the backward's fp32 `dQaccum` `[b, sq_r, h, d_r]` (`sq`
//! rounded to 128 rows, `d` to 32 columns, as FA2 allocates it). Under varlen each request keeps
//! the stride of the longest one (a padded batch): the bytes each request touches are those of the
//! packed layout, and its rows start at an address affine in the request index, which keeps every
//! kernel's addresses affine in the CTA coordinates. Each tensor starts 2 MiB aligned after a
//! 2 MiB gap.

use super::AttnSpec;

/// First byte of the first tensor (clear of the null page and of the GEMM regions' start).
const BASE: u64 = 1 << 32;

/// Base addresses of the tensors of one problem (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tensors {
    pub q: u64,
    pub k: u64,
    pub v: u64,
    pub o: u64,
    /// fp32 `[b, h, sq]`.
    pub lse: u64,
    pub d_o: u64,
    pub d_q: u64,
    pub d_k: u64,
    pub d_v: u64,
    /// fp32 `[b, sq_r, h, d_r]`.
    pub dq_accum: u64,
    /// fp32 `rowsum(dO∘O)`, `[b, h, sq]`.
    pub softmax_d: u64,
    /// Free space after the last tensor, for a recipe's own buffers (split-KV partials, page
    /// tables, the unfused recipe's scores).
    pub scratch: u64,
}

/// Rows of `dQaccum` are `sq` rounded up to this.
pub const DQ_ROW_ROUND: u64 = 128;
/// Columns of `dQaccum` are `d` rounded up to this.
pub const DQ_COL_ROUND: u64 = 32;

impl Tensors {
    pub fn new(s: &AttnSpec) -> Tensors {
        let e = s.dtype.bytes();
        let (b, h, hk, sq, sk) = (s.batch, s.heads, s.kv_heads(), s.seqlen, s.seqlen_kv());
        let (d, dv) = (s.headdim, s.headdim_v());
        let q = b * sq * h * d * e;
        let k = b * sk * hk * d * e;
        let v = b * sk * hk * dv * e;
        let o = b * sq * h * dv * e;
        let lse = b * h * sq * 4;
        let acc = b * sq.next_multiple_of(DQ_ROW_ROUND) * h * d.next_multiple_of(DQ_COL_ROUND) * 4;
        let mut at = BASE;
        let mut next = |size: u64| {
            let here = at;
            at = (at + size).div_ceil(2 << 20) * (2 << 20) + (2 << 20);
            here
        };
        Tensors {
            q: next(q),
            k: next(k),
            v: next(v),
            o: next(o),
            lse: next(lse),
            d_o: next(o),
            d_q: next(q),
            d_k: next(k),
            d_v: next(v),
            dq_accum: next(acc),
            softmax_d: next(lse),
            scratch: next(0),
        }
    }
}

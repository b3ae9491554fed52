//! The attention problem ([`AttnSpec`]) as `gpusim trace attention` and `-p key=value` set it,
//! its parameter table ([`PROBLEM`], declared once with [`crate::params!`]), its checks, the
//! FLOP and byte conventions of the libraries' benchmarks, and the recipe a tuned library picks.

use std::fmt;

use gpusim_configs::Arch;

use crate::gemm::Dtype;
use crate::params;
use crate::params::{Field, Param, Value, WorkloadError};

/// Which passes the trace holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass {
    Fwd,
    Bwd,
    /// The forward kernels, then the backward kernels, in one stream.
    FwdBwd,
}

impl Pass {
    pub const fn name(self) -> &'static str {
        match self {
            Pass::Fwd => "fwd",
            Pass::Bwd => "bwd",
            Pass::FwdBwd => "fwdbwd",
        }
    }

    pub fn parse(s: &str) -> Option<Pass> {
        match s.to_ascii_lowercase().replace(['+', '_', '-'], "").as_str() {
            "fwd" | "forward" => Some(Pass::Fwd),
            "bwd" | "backward" => Some(Pass::Bwd),
            "fwdbwd" | "both" => Some(Pass::FwdBwd),
            _ => None,
        }
    }

    pub const fn has_fwd(self) -> bool {
        matches!(self, Pass::Fwd | Pass::FwdBwd)
    }

    pub const fn has_bwd(self) -> bool {
        matches!(self, Pass::Bwd | Pass::FwdBwd)
    }
}

/// A kernel design.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recipe {
    /// FlashAttention-2 (sm80 code path: `mma.sync`, `cp.async`, `ldmatrix`).
    Fa2,
    /// FlashAttention-3 (sm90a: TMA, warp-specialised `wgmma`).
    Fa3,
    /// Decode with a (paged) KV cache, split-KV with its combine kernel.
    Decode,
    /// DeepSeek MLA decode (FlashMLA): 576-wide QK, 512-wide V over one latent KV head.
    MlaDecode,
    /// Unfused "PyTorch standard attention": GEMM, softmax kernel, GEMM.
    Standard,
}

impl Recipe {
    pub const fn name(self) -> &'static str {
        match self {
            Recipe::Fa2 => "fa2",
            Recipe::Fa3 => "fa3",
            Recipe::Decode => "decode",
            Recipe::MlaDecode => "mla-decode",
            Recipe::Standard => "standard",
        }
    }

    pub fn parse(s: &str) -> Option<Recipe> {
        match s.to_ascii_lowercase().replace('_', "-").as_str() {
            "fa2" | "flash2" | "flashattention2" | "flashattention-2" => Some(Recipe::Fa2),
            "fa3" | "flash3" | "flashattention3" | "flashattention-3" => Some(Recipe::Fa3),
            "decode" | "flash-decoding" => Some(Recipe::Decode),
            "mla-decode" | "mla" | "flashmla" => Some(Recipe::MlaDecode),
            "standard" | "unfused" | "pytorch" => Some(Recipe::Standard),
            _ => None,
        }
    }
}

impl fmt::Display for Recipe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An attention problem: `batch` requests of `heads` query heads over `kv_heads` KV heads,
/// `seqlen` queries against `seqlen_kv` keys, head dims `headdim` (Q, K) and `headdim_v` (V, O).
/// Layout: Q, K, V, O are `[batch, seqlen, heads, d]` (FlashAttention's `bshd`), row strides
/// `heads·d` elements.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttnSpec {
    pub batch: u64,
    pub heads: u64,
    /// KV heads (GQA/MQA when fewer than `heads`, which they must divide); 0: `heads`.
    pub kv_heads: u64,
    /// Query length (the maximum one under varlen).
    pub seqlen: u64,
    /// Key/value length; 0: `seqlen`.
    pub seqlen_kv: u64,
    pub headdim: u64,
    /// Head dim of V and O; 0: `headdim`.
    pub headdim_v: u64,
    /// Causal mask, bottom-right aligned (FlashAttention's convention when `seqlen ≠ seqlen_kv`).
    pub causal: bool,
    pub pass: Pass,
    pub dtype: Dtype,
    /// `None`: what a tuned library picks ([`AttnSpec::select_recipe`]).
    pub recipe: Option<Recipe>,
    /// Tokens per page of a paged KV cache; `None`: one contiguous cache per request.
    pub page_size: Option<u32>,
    /// Per-request lengths (varlen): of queries and keys for self-attention
    /// (`seqlen == seqlen_kv`), of the KV cache otherwise (decode); `batch` entries, each at most
    /// `seqlen_kv`. `None`: every request has the full lengths.
    pub varlen: Option<Vec<u32>>,
    /// KV splits of a split-KV (flash-decoding) kernel; `None`: the library's heuristic.
    pub num_splits: Option<u32>,
}

impl Default for AttnSpec {
    fn default() -> Self {
        AttnSpec {
            batch: 1,
            heads: 16,
            kv_heads: 0,
            seqlen: 2048,
            seqlen_kv: 0,
            headdim: 128,
            headdim_v: 0,
            causal: false,
            pass: Pass::Fwd,
            dtype: Dtype::Bf16,
            recipe: None,
            page_size: None,
            varlen: None,
            num_splits: None,
        }
    }
}

pub(crate) const DTYPES: &[&str] = &["bf16", "fp16", "fp8"];
pub(crate) const PASSES: &[&str] = &["fwd", "bwd", "fwdbwd"];
pub(crate) const RECIPES: &[&str] = &["auto", "fa2", "fa3", "decode", "mla-decode", "standard"];

impl Field for Pass {
    fn get(&self) -> Value {
        Value::Choice(self.name())
    }
    fn set(&mut self, v: Value) {
        if let Value::Choice(s) = v {
            *self = Pass::parse(s).unwrap_or(*self);
        }
    }
}

impl Field for Option<Recipe> {
    fn get(&self) -> Value {
        Value::Choice(self.map_or("auto", Recipe::name))
    }
    fn set(&mut self, v: Value) {
        if let Value::Choice(s) = v {
            *self = Recipe::parse(s);
        }
    }
}

/// Longest sequence accepted (queries or keys).
pub const MAX_SEQLEN: u64 = 1 << 21;

pub const PROBLEM: &[Param<AttnSpec>] = params!(AttnSpec {
    batch: Int [1, 1 << 16] "requests (sequences) in the batch",
    heads: Int [1, 1024] "query heads",
    kv_heads: Int [0, 1024] "key/value heads (GQA/MQA when fewer; they divide heads); 0: heads",
    seqlen: Int [1, MAX_SEQLEN] "query length (the longest request's under varlen)",
    seqlen_kv: Int [0, MAX_SEQLEN] "key/value length; 0: seqlen",
    headdim: Int [16, 1024] "head dim of Q and K",
    headdim_v: Int [0, 1024] "head dim of V and O; 0: headdim",
    causal: Bool "causal mask (bottom-right aligned)",
    pass: Choice(PASSES) "forward, backward, or forward then backward",
    dtype: Choice(DTYPES) "input type (fp32 accumulation; fp8 on the fa3 and mla-decode recipes)",
    recipe: Choice(RECIPES) "kernel design: fa2, fa3, decode (split-KV, paged), mla-decode, standard (unfused), auto",
    page_size: OptInt [1, 1 << 20] "tokens per page of a paged KV cache (decode recipes); all: contiguous",
    varlen: List [1, MAX_SEQLEN] "per-request lengths (batch entries, each ≤ seqlen_kv); none: all full",
    num_splits: OptInt [1, 256] "KV splits of the split-KV kernel (decode recipes); all: the library heuristic",
});

impl AttnSpec {
    pub fn kv_heads(&self) -> u64 {
        if self.kv_heads == 0 { self.heads } else { self.kv_heads }
    }

    pub fn seqlen_kv(&self) -> u64 {
        if self.seqlen_kv == 0 { self.seqlen } else { self.seqlen_kv }
    }

    pub fn headdim_v(&self) -> u64 {
        if self.headdim_v == 0 { self.headdim } else { self.headdim_v }
    }

    /// Query heads per KV head.
    pub fn group(&self) -> u64 {
        self.heads / self.kv_heads().max(1)
    }

    /// Self-attention: queries and keys of one length (varlen then sets both per request).
    pub fn is_self_attention(&self) -> bool {
        self.seqlen == self.seqlen_kv()
    }

    /// `(seqlen_q, seqlen_kv)` of request `b`.
    pub fn lengths(&self, b: u64) -> (u64, u64) {
        match &self.varlen {
            Some(v) => {
                let l = v.get(b as usize).copied().unwrap_or(0) as u64;
                if self.is_self_attention() { (l, l) } else { (self.seqlen, l) }
            }
            None => (self.seqlen, self.seqlen_kv()),
        }
    }

    /// Checks the problem on its own (each recipe checks what it supports); errors name the field.
    pub fn validate(&self) -> Result<(), WorkloadError> {
        let err = |s: String| Err(WorkloadError(s));
        let hk = self.kv_heads();
        if hk > self.heads || !self.heads.is_multiple_of(hk) {
            return err(format!("kv_heads = {hk} must divide heads = {}", self.heads));
        }
        if !self.headdim.is_multiple_of(8) || !self.headdim_v().is_multiple_of(8) {
            return err(format!(
                "headdim = {} and headdim_v = {} must be multiples of 8 (16-byte rows)",
                self.headdim,
                self.headdim_v()
            ));
        }
        if let Some(v) = &self.varlen {
            if v.len() as u64 != self.batch {
                return err(format!("varlen has {} entries; batch = {} needs one per request", v.len(), self.batch));
            }
            let max = self.seqlen_kv();
            if let Some((i, l)) = v.iter().enumerate().find(|(_, l)| **l as u64 > max || **l == 0) {
                return err(format!("varlen entry {i} = {l} must be between 1 and seqlen_kv = {max}"));
            }
        }
        let elems = self.batch as u128 * self.seqlen_kv().max(self.seqlen) as u128 * self.heads as u128;
        let bytes = elems * (self.headdim + self.headdim_v()) as u128 * 4;
        if bytes > 1 << 42 {
            return err("the tensors exceed 4 TiB: reduce batch, heads or the lengths".into());
        }
        Ok(())
    }

    /// Forward FLOPs by FlashAttention's benchmark convention
    /// (`hopper/benchmark_attn.py`; FA2's `4·b·s²·h·d`, halved for causal, is the case
    /// `sq = sk`, `d = dv`): `2·b·h·sq·avg_sk·(d + dv)` with causal
    /// `avg_sk = (max(0, sk − sq) + sk) / 2`, summed per request under varlen.
    pub fn fwd_flops(&self) -> u64 {
        let (d, dv) = (self.headdim, self.headdim_v());
        (0..self.batch)
            .map(|b| {
                let (sq, sk) = self.lengths(b);
                // 2·sq·avg_sk, exact in integers: causal 2·avg_sk = max(0, sk − sq) + sk.
                let two_sq_sk = if self.causal { sq * (sk.saturating_sub(sq) + sk) } else { 2 * sq * sk };
                self.heads * two_sq_sk * (d + dv)
            })
            .sum()
    }

    /// FLOPs of the trace's passes: forward, backward = 2.5× forward, both = 3.5× forward
    /// (FlashAttention's `benchmark_flash_attention.py`).
    pub fn flops(&self) -> u64 {
        let f = self.fwd_flops();
        match self.pass {
            Pass::Fwd => f,
            Pass::Bwd => f * 5 / 2,
            Pass::FwdBwd => f * 7 / 2,
        }
    }

    /// Bytes of the KV cache a decode reads once: `b·h_kv·sk·(d + dv)·e` (per request's length
    /// under varlen); for MLA `b·sk·d·e`, since V aliases the first `dv` columns of the latent K
    /// (FlashMLA's benchmark).
    pub fn kv_bytes(&self, recipe: Recipe) -> u64 {
        let e = self.dtype.bytes();
        let width = match recipe {
            Recipe::MlaDecode => self.headdim,
            _ => self.headdim + self.headdim_v(),
        };
        (0..self.batch).map(|b| self.kv_heads() * self.lengths(b).1 * width * e).sum()
    }

    /// Whether the problem is a decode: few queries against a long cache. `seqlen ≤ 16` covers
    /// one token plus speculative drafts (FlashAttention's split-KV path serves `sq` up to a
    /// 64-row tile, FlashInfer's decode kernels one token per request), and `seqlen_kv ≥ 8·seqlen`
    /// keeps prefill-like chunks (comparable lengths, where a tiled prefill kernel fills the
    /// tensor cores) on the prefill recipes.
    pub fn is_decode(&self) -> bool {
        self.seqlen <= 16 && self.seqlen_kv() >= 8 * self.seqlen
    }

    /// The recipe given, or what the part's best library picks: decode for a decode problem
    /// (MLA decode for the 576/512 MLA head), FlashAttention-3 on compute capability 9.x,
    /// FlashAttention-2 on 8.x (and others).
    pub fn select_recipe(&self, arch: &Arch) -> Recipe {
        if let Some(r) = self.recipe {
            return r;
        }
        if self.is_decode() {
            if self.headdim == 576 && self.headdim_v() == 512 { Recipe::MlaDecode } else { Recipe::Decode }
        } else if (90..100).contains(&arch.compute_capability) {
            Recipe::Fa3
        } else {
            Recipe::Fa2
        }
    }
}

impl fmt::Display for AttnSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "b={} h={} hk={} sq={} sk={} d={} dv={}{} {} {}",
            self.batch,
            self.heads,
            self.kv_heads(),
            self.seqlen,
            self.seqlen_kv(),
            self.headdim,
            self.headdim_v(),
            if self.causal { " causal" } else { "" },
            self.pass.name(),
            self.dtype
        )?;
        if let Some(p) = self.page_size {
            write!(f, " page={p}")?;
        }
        if self.varlen.is_some() {
            f.write_str(" varlen")?;
        }
        Ok(())
    }
}

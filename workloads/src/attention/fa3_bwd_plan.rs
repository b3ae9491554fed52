//! The plan of FlashAttention-3's backward (`attention::fa3_bwd`): the main kernel's tile
//! configuration from the head dim (`run_mha_bwd_dispatch`'s template arguments), its shared
//! memory, and the derived shapes, GEMMs and addresses its kernels are written from.

use gpusim_configs::Arch;

use super::{AttnSpec, Tensors};
use crate::asm::{Addr, Affine};
use crate::gemm::Dtype;
use crate::params::WorkloadError;

/// The main kernel's configuration: `run_mha_bwd_dispatch<…, kBlockM, kBlockN, kHeadDim, …,
/// Stages_dO, Stages_dS, SdP_swapAB, dKV_swapAB, dQ_swapAB, NumMmaWarpGroups, AtomLayoutMSdP,
/// AtomLayoutNdKV, AtomLayoutMdQ, V_in_regs>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BwdTile {
    pub block_m: u64,
    pub block_n: u64,
    /// MMA warpgroups.
    pub wgs: u64,
    pub stages_do: u64,
    pub stages_ds: u64,
    pub sdp_swap: bool,
    pub dkv_swap: bool,
    pub dq_swap: bool,
    pub atom_sdp: u64,
    pub atom_dkv: u64,
    pub atom_dq: u64,
    /// dP = dO·Vᵀ with V in registers (`Mma_dP_is_RS`).
    pub v_in_regs: bool,
}

/// The kernel head dim FA3 dispatches `d` to (`round_up_headdim`).
pub fn kernel_headdim(d: u64) -> u64 {
    match d {
        0..=64 => 64,
        65..=96 => 96,
        97..=128 => 128,
        129..=192 => 192,
        _ => 256,
    }
}

/// FA3's sm90 backward tile for kernel head dim `kd` (`run_mha_bwd_hdim*`, no softcap, no local
/// window, `headdim_v = headdim`).
pub fn bwd_tile(kd: u64, causal: bool) -> BwdTile {
    #[allow(clippy::too_many_arguments)]
    let t = |m, n, wgs, sdo, sds, swaps: (bool, bool, bool), atoms: (u64, u64, u64), v| BwdTile {
        block_m: m,
        block_n: n,
        wgs,
        stages_do: sdo,
        stages_ds: sds,
        sdp_swap: swaps.0,
        dkv_swap: swaps.1,
        dq_swap: swaps.2,
        atom_sdp: atoms.0,
        atom_dkv: atoms.1,
        atom_dq: atoms.2,
        v_in_regs: v,
    };
    match kd {
        64 => t(128, 128, 2, 2, 2, (true, false, false), (1, 2, 2), false),
        96 => t(64, 128, 2, 2, 2, (true, false, false), (1, 2, 1), true),
        128 if causal => t(64, 128, 2, 2, 2, (true, false, false), (1, 2, 1), false),
        128 => t(80, 128, 2, 2, 2, (true, false, true), (1, 2, 1), false),
        192 => t(64, 96, 3, 1, 1, (false, true, false), (1, 1, 1), false),
        _ => t(64, 80, 2, 1, 1, (false, true, true), (1, 1, 1), false),
    }
}

/// One warpgroup's share of a GEMM: `count` instructions of `64×n×16`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gemm {
    pub n: u64,
    pub count: u64,
}

/// Shared-memory offsets of the main kernel (bytes).
#[derive(Clone, Copy, Debug)]
pub struct Smem {
    pub k: u64,
    pub v: u64,
    pub dq: u64,
    pub q: u64,
    pub d_o: u64,
    pub lse: u64,
    pub dpsum: u64,
    /// Bytes of one stage of LSE (or dPsum).
    pub stat_stage: u64,
    pub p: u64,
    pub ds: u64,
    pub bars: u64,
    pub total: u64,
}

/// Everything the backward's kernels derive from the problem and the chip.
#[derive(Clone, Debug)]
pub struct BwdPlan {
    pub t: BwdTile,
    /// The problem's head dim (bytes) and the kernel's (GEMMs, registers).
    pub d: u64,
    pub kd: u64,
    pub e: u64,
    pub dtype: Dtype,
    pub causal: bool,
    pub batch: u64,
    pub heads: u64,
    pub kv_heads: u64,
    pub group: u64,
    pub sq: u64,
    pub sk: u64,
    pub m_blocks: u64,
    pub n_blocks: u64,
    /// Heads per section of the causal scheduler (1 when non-causal).
    pub swizzle: u64,
    pub threads: u64,
    pub regs: u64,
    pub prod_regs: i32,
    pub cons_regs: i32,
    pub smem: Smem,
    pub tensors: Tensors,
    /// fp32 buffers of the backward in the scratch space.
    pub lse_log2: u64,
    pub dq_accum: u64,
    pub dk_accum: u64,
    pub dv_accum: u64,
}

/// The backward's plan of `spec` on `arch`, or why FA3 does not run it.
pub fn bwd_plan(spec: &AttnSpec, arch: &Arch) -> Result<BwdPlan, WorkloadError> {
    super::fa3::check(spec, arch)?;
    let (d, dv) = (spec.headdim, spec.headdim_v());
    if spec.dtype != Dtype::Fp16 && spec.dtype != Dtype::Bf16 {
        return Err(WorkloadError(format!(
            "dtype = {}: FlashAttention-3's backward takes fp16 and bf16 only (its fp8 kernels are forward-only)",
            spec.dtype
        )));
    }
    if d > 256 || !d.is_multiple_of(8) || dv != d {
        return Err(WorkloadError(format!(
            "FlashAttention-3's backward takes head dims that are multiples of 8 up to 256 with headdim_v = \
             headdim; headdim = {d}, headdim_v = {dv}"
        )));
    }
    let kd = kernel_headdim(d);
    let t = bwd_tile(kd, spec.causal);
    let e = spec.dtype.bytes();
    let (bm, bn) = (t.block_m, t.block_n);
    let (sq, sk) = (spec.seqlen, spec.seqlen_kv());
    let m_blocks = sq.div_ceil(bm);
    let n_blocks = sk.div_ceil(bn);
    let (prod_regs, cons_regs) = if t.wgs == 2 { (24, 240) } else { (32, 160) };
    let threads = 128 * (t.wgs + 1);
    let regs = ((65536 / threads) / 8 * 8).min(arch.sm.max_registers_per_thread as u64);
    // TensorStorage: K, V, dQ (d < 256), Q (2 stages), dO, LSE and dPsum, P (SS dK/dV), dS.
    let stat_stage = bm.next_multiple_of(64) * 4;
    let k = 0;
    let v = k + bn * kd * e;
    let dq = v + bn * kd * e;
    let q = dq + if kd < 256 { bm * kd * 4 } else { 0 };
    let d_o = q + 2 * bm * kd * e;
    let lse = d_o + t.stages_do * bm * kd * e;
    let dpsum = lse + 2 * stat_stage;
    let p = dpsum + 2 * stat_stage;
    let dkv_rs = t.atom_sdp == 1 && t.atom_dkv == t.wgs && t.sdp_swap && !t.dkv_swap;
    let ds = p + if dkv_rs { 0 } else { t.stages_ds * bm * bn * e };
    let bars = ds + t.stages_ds * bm * bn * e;
    let smem = Smem { k, v, dq, q, d_o, lse, dpsum, stat_stage, p, ds, bars, total: bars + 128 };
    let limit = arch.sm.shared_mem_per_cta.0;
    if smem.total > limit {
        return Err(WorkloadError(format!(
            "the {bm}x{bn} backward tile of head dim {kd} needs {} B of shared memory; {} allows {limit} per CTA",
            smem.total, arch.name
        )));
    }
    if crate::gemm::ctas_per_sm(arch, threads, regs, smem.total) == 0 {
        return Err(WorkloadError(format!(
            "a CTA of {threads} threads and {} B does not fit an SM of {}",
            smem.total, arch.name
        )));
    }
    let (b, h, hk) = (spec.batch, spec.heads, spec.kv_heads());
    let bh = b * h;
    if n_blocks * bh > u32::MAX as u64 || m_blocks * bh > u32::MAX as u64 {
        return Err(WorkloadError(format!("{} CTAs are too many for one grid", n_blocks.max(m_blocks) * bh)));
    }
    // SingleTileBwdLPTScheduler's section: as many heads' Q, dO and dQaccum as fit 40 MB, a power
    // of two; here also a divisor of batch·heads.
    let swizzle = if spec.causal {
        let one_head = sq * 2 * d * e + sq * d * 4;
        let fit = (40u64 << 20) / one_head.max(1);
        let s = if fit == 0 { 1 } else { 1u64 << fit.ilog2() };
        s.min(1 << bh.trailing_zeros())
    } else {
        1
    };
    let tensors = Tensors::new(spec);
    let next = |at: u64, size: u64| (at + size).div_ceil(2 << 20) * (2 << 20) + (2 << 20);
    let lse_log2 = tensors.scratch;
    let dq_accum = next(lse_log2, bh * m_blocks * bm * 4);
    let dk_accum = next(dq_accum, bh * m_blocks * bm * kd * 4);
    let dv_accum = next(dk_accum, b * hk * n_blocks * bn * kd * 4);
    Ok(BwdPlan {
        t,
        d,
        kd,
        e,
        dtype: spec.dtype,
        causal: spec.causal,
        batch: b,
        heads: h,
        kv_heads: hk,
        group: spec.group(),
        sq,
        sk,
        m_blocks,
        n_blocks,
        swizzle,
        threads,
        regs,
        prod_regs,
        cons_regs,
        smem,
        tensors,
        lse_log2,
        dq_accum,
        dk_accum,
        dv_accum,
    })
}

impl BwdPlan {
    /// dV and dK take P and dS from registers (`Mma_dKV_is_RS`).
    pub fn dkv_rs(&self) -> bool {
        let t = &self.t;
        t.atom_sdp == 1 && t.atom_dkv == t.wgs && t.sdp_swap && !t.dkv_swap
    }

    /// dQ leaves through shared memory and the writer warp's bulk reduce-add (`dQacc_use_TMA`).
    pub fn dq_tma(&self) -> bool {
        self.kd < 256
    }

    /// d256: dQ and dK/dV GEMMs in two halves, dQ added by atomics (`Slice_dQKV_Mma`).
    pub fn sliced(&self) -> bool {
        let t = &self.t;
        !self.dq_tma() && t.dq_swap && t.atom_dq == 1 && t.wgs == 2
    }

    /// LSE and dPsum shared by the 8 threads of a row and shuffled (`ShuffleLSE`).
    pub(super) fn shuffle_stats(&self) -> bool {
        self.t.sdp_swap && self.kd <= 64
    }

    pub fn gqa(&self) -> bool {
        self.group > 1
    }

    /// S = QKᵀ (and dP = dO·Vᵀ) per warpgroup: K-extent d.
    pub fn gemm_s(&self) -> Gemm {
        let t = &self.t;
        let (n, tiles) = if t.sdp_swap {
            (t.block_m / t.atom_sdp, t.block_n * t.atom_sdp / (64 * t.wgs))
        } else {
            (t.block_n * t.atom_sdp / t.wgs, t.block_m / (64 * t.atom_sdp))
        };
        Gemm { n, count: tiles * self.kd / 16 }
    }

    /// dV += Pᵀ·dO (and dK += dSᵀ·Q) per warpgroup: K-extent kBlockM.
    pub fn gemm_dkv(&self) -> Gemm {
        let t = &self.t;
        let (n, tiles) = if t.dkv_swap {
            (t.block_n / t.atom_dkv, self.kd * t.atom_dkv / (64 * t.wgs))
        } else {
            (self.kd * t.atom_dkv / t.wgs, t.block_n / (64 * t.atom_dkv))
        };
        Gemm { n, count: tiles * t.block_m / 16 }
    }

    /// dQ = dS·K per warpgroup: K-extent kBlockN.
    pub fn gemm_dq(&self) -> Gemm {
        let t = &self.t;
        let (n, tiles) = if t.dq_swap {
            (t.block_m / t.atom_dq, self.kd * t.atom_dq / (64 * t.wgs))
        } else {
            (self.kd * t.atom_dq / t.wgs, t.block_m / (64 * t.atom_dq))
        };
        Gemm { n, count: tiles * t.block_n / 16 }
    }

    /// S (and P, dP, dS) elements per MMA thread.
    pub fn elems(&self) -> u64 {
        self.t.block_m * self.t.block_n / (128 * self.t.wgs)
    }

    /// dK (and dV) accumulators per MMA thread.
    pub fn kv_elems(&self) -> u64 {
        self.t.block_n * self.kd / (128 * self.t.wgs)
    }

    /// dQ accumulators per MMA thread.
    pub fn dq_elems(&self) -> u64 {
        self.t.block_m * self.kd / (128 * self.t.wgs)
    }

    pub(super) fn mbar(&self, which: Bar, stage: u64) -> Addr {
        let i = match which {
            Bar::Kv => 0,
            Bar::QFull => 1 + stage,
            Bar::QEmpty => 3 + stage,
            Bar::DoFull => 5 + stage,
            Bar::DoEmpty => 7 + stage,
        };
        Addr::at(self.smem.bars + 8 * i)
    }

    /// dO's stage for Q's stage `qs` (one dO stage at d ≥ 192).
    pub(super) fn do_stage(&self, qs: u64) -> u64 {
        if self.t.stages_do == 2 { qs } else { 0 }
    }

    /// P's and dS's shared-memory buffer for Q's stage `qs`.
    pub(super) fn pds_stage(&self, qs: u64) -> u64 {
        if self.t.stages_ds == 2 { qs } else { 0 }
    }

    /// Tile `m` of a `[b, h, sq, d]` tensor (Q, O, dO, dQ) of head `bh`.
    pub(super) fn q_tile(&self, base: u64, bh: &Affine, m: &Affine) -> Addr {
        Addr::at(base).index(bh, self.sq * self.d * self.e).index(m, self.t.block_m * self.d * self.e)
    }

    /// Block `n` of a `[b, hk, sk, d]` tensor (K, V, dK, dV) of KV head `kvh`.
    pub(super) fn kv_block(&self, base: u64, kvh: &Affine, n: &Affine) -> Addr {
        Addr::at(base).index(kvh, self.sk * self.d * self.e).index(n, self.t.block_n * self.d * self.e)
    }

    /// The `kBlockM` fp32 row statistics (LSE, LSE_log2, dPsum) of block `m` of head `bh`.
    pub(super) fn stat_rows(&self, base: u64, bh: &Affine, m: &Affine) -> Addr {
        let rows = self.m_blocks * self.t.block_m;
        Addr::at(base).index(bh, rows * 4).index(m, self.t.block_m * 4)
    }

    /// Block `m` of FA3's `dQaccum` `[b, h, sq_rounded·d_rounded]` fp32.
    pub(super) fn dq_acc(&self, bh: &Affine, m: &Affine) -> Addr {
        let rows = self.m_blocks * self.t.block_m;
        Addr::at(self.dq_accum).index(bh, rows * self.kd * 4).index(m, self.t.block_m * self.kd * 4)
    }

    /// Block `n` of `dKaccum` / `dVaccum` `[b, hk, sk_rounded·d_rounded]` fp32 (GQA).
    pub(super) fn kv_acc(&self, base: u64, kvh: &Affine, n: &Affine) -> Addr {
        let rows = self.n_blocks * self.t.block_n;
        Addr::at(base).index(kvh, rows * self.kd * 4).index(n, self.t.block_n * self.kd * 4)
    }
}

/// The main kernel's mbarriers (`BwdPlan::mbar`).
#[derive(Clone, Copy)]
pub(super) enum Bar {
    Kv,
    QFull,
    QEmpty,
    DoFull,
    DoEmpty,
}

//! DeepSeek MLA decode as FlashMLA's dense sm90 kernel runs it (`csrc/sm90/decode/dense/
//! splitkv_mla.cuh`; ../shared/notes/kernel-designs.md §5).
//!
//! # Design
//! - **Shape**: d_qk = 576 (512 latent + 64 RoPE), d_v = 512; V is the first 512 columns of the
//!   cached K tile, so the KV cache is read once. The `sq·h_q/h_kv` query rows of a KV head form
//!   M; a CTA holds 64 of them (`BLOCK_SIZE_M`), so h_q = 128, sq = 1 is two m-blocks.
//! - **Grid** `(m_blocks, h_kv, num_sm_parts)`, 256 threads (2 warpgroups), one CTA per SM
//!   (sQ, sK0, sK1 of 64×576 each); `num_sm_parts = max(SMs/h_kv/m_blocks, 1)`. The scheduler
//!   metadata (`get_mla_metadata`) gives each part a contiguous run of (request, block) pairs of
//!   nearly equal length; here every part runs `ceil(Σ blocks / parts)` blocks (the last ones
//!   fewer), and a combine kernel merges the parts' fp32 partials (as FlashMLA does, overlapped
//!   by PDL there, after the main kernel here).
//! - **Seesaw schedule**, per pair of 64-token KV blocks: WG0 computes S0 = q·K0ᵀ, WG1 S1 = q·K1ᵀ,
//!   each 36 × `HGMMA.64x64x16` as its K block's 9 TMA pieces (64×64 each, own mbarrier) land;
//!   each WG's softmax on its S; the row maxima are exchanged through shared memory and named
//!   barriers; P0 and P1 go to shared memory (`STSM`); each WG updates its half of O (64×256):
//!   O_w += P0·V0[:, w] + P1·V1[:, w], 8 × `HGMMA.64x256x16` (its own P from registers, the
//!   other's from shared memory); when both WGs are done with a buffer, its owner issues the 9
//!   TMA copies of its next block.
//! - **fp8 KV** (`dtype = fp8`): 656 B per token (512 e4m3, 4 fp32 scales, 64 bf16 RoPE); each WG
//!   dequantises its block to bf16 in shared memory (`LDS.128`, `F2FP` unpack, `HMUL2` by the
//!   scale, `STS.128`) before its GEMM, then the bf16 MMAs run as above (FlashMLA's fp8 kernel
//!   has a dedicated dequantising warpgroup; its cost is the same per token, here on the
//!   consumers: an approximation).
//! - **Paged**: FlashMLA's page size is 64 tokens (one block per page); a page's address comes
//!   from the block table (one `LDG` per block, on which its TMA depends).
//!
//! # Approximations
//! - A block's buffer is refilled only when both WGs have finished the pair (QKᵀ and both PV
//!   halves), so a CTA's loads and its GEMMs of a pair do not overlap; FlashMLA overlaps them
//!   more (its seesaw issues the next half-tiles as soon as each is consumed), reaching ~3 TB/s
//!   on H800 where this recipe reaches ~1.3 TB/s of latent cache on H100 (16 heads, 4k tokens).
//!   Modelling the per-piece release is the missing step.
//! - The parts' block ranges ignore request boundaries (the KV cache is addressed as one
//!   concatenation of the requests' blocks); no causal mask for `sq > 1`.

use gpusim_configs::Arch;
use gpusim_isa::{BarrierOperand, CtaParam, Dim3, KernelInfo, KernelTrace, OpTable, Program, Trace, Var};

use super::{AttnSpec, Tensors};
use crate::asm::{Addr, Affine, Code, assemble, p as pred, r, rr, urr};
use crate::gemm::Dtype;
use crate::params::WorkloadError;

fn err(s: String) -> WorkloadError {
    WorkloadError(s)
}

/// Tokens per KV block (and per page).
const BLOCK: u64 = 64;

/// Everything derived from the problem and the chip.
#[derive(Clone, Debug)]
pub struct Plan {
    pub m_blocks: u64,
    pub hk: u64,
    pub parts: u64,
    /// KV blocks each part runs (block pairs are its loop).
    pub per_part: u64,
    pub total_blocks: u64,
    pub fp8: bool,
    /// Bytes of one cached token.
    pub token_bytes: u64,
    pub paged: bool,
    pub rows: u64,
}

pub fn plan(spec: &AttnSpec, arch: &Arch) -> Result<Plan, WorkloadError> {
    if !(90..100).contains(&arch.compute_capability) {
        return Err(err(format!(
            "recipe mla-decode (FlashMLA) needs compute capability 9.x; {} is {}",
            arch.name, arch.compute_capability
        )));
    }
    if spec.headdim != 576 || spec.headdim_v() != 512 {
        return Err(err(format!(
            "recipe mla-decode is DeepSeek's MLA: headdim = 576, headdim_v = 512 (got {}, {})",
            spec.headdim,
            spec.headdim_v()
        )));
    }
    if spec.page_size.is_some_and(|p| p as u64 != BLOCK) {
        return Err(err(format!("page_size: FlashMLA's pages are {BLOCK} tokens")));
    }
    if spec.dtype == Dtype::Fp16 {
        return Err(err("recipe mla-decode runs a bf16 or fp8 KV cache (dtype = bf16 or fp8)".into()));
    }
    let hk = spec.kv_heads();
    let rows = spec.seqlen * spec.group();
    let m_blocks = rows.div_ceil(64);
    let parts = (arch.sm.count as u64 / hk / m_blocks).max(1);
    let total_blocks: u64 = (0..spec.batch).map(|b| spec.lengths(b).1.div_ceil(BLOCK)).sum();
    let per_part = total_blocks.div_ceil(parts).next_multiple_of(2).max(2);
    let fp8 = spec.dtype == Dtype::Fp8;
    if m_blocks * hk * parts > u32::MAX as u64 {
        return Err(err("too many CTAs for one grid".into()));
    }
    Ok(Plan {
        m_blocks,
        hk,
        parts,
        per_part,
        total_blocks,
        fp8,
        token_bytes: if fp8 { 656 } else { 576 * 2 },
        paged: spec.page_size.is_some(),
        rows,
    })
}

/// The main kernel and the combine kernel of `spec`.
pub fn fwd(spec: &AttnSpec, arch: &Arch) -> Result<Trace, WorkloadError> {
    let pl = plan(spec, arch)?;
    let t = Tensors::new(spec);
    let main = main_kernel(&pl, &t, spec)?;
    let combine = combine_kernel(&pl, &t, spec)?;
    Ok(Trace { kernels: vec![main, combine] })
}

/// Registers.
const TID: u8 = 0;
const PHASE: u8 = 1;
const TX: u8 = 2;
const PAGE: u8 = 3;
const CNT: u8 = 4;
const MAX: u8 = 8;
const SUM: u8 = 12;
const SCALE: u8 = 16;
const S_ACC: u8 = 20;
const P_REG: u8 = 52;
const O_ACC: u8 = 68;

fn named(id: u8, threads: u32) -> i32 {
    BarrierOperand::named(id, threads).map(|b| b.imm()).unwrap_or(0)
}

fn partials(t: &Tensors) -> u64 {
    t.scratch + (1 << 24)
}

fn main_kernel(pl: &Plan, t: &Tensors, spec: &AttnSpec) -> Result<KernelTrace, WorkloadError> {
    let mut ops = OpTable::new();
    let programs = vec![wg_program(pl, t, &mut ops, 0), wg_program(pl, t, &mut ops, 1)];
    let name = format!(
        "flash_fwd_splitkv_mla_kernel_{}_m{}_parts{}",
        if pl.fp8 { "fp8kv" } else { "bf16" },
        pl.m_blocks,
        pl.parts
    );
    let grid = Dim3::new(pl.m_blocks as u32, pl.hk as u32, pl.parts as u32);
    let mut info = KernelInfo::new(0, name, grid, Dim3::new(256, 1, 1));
    info.regs_per_thread = 255;
    // sQ, sK0, sK1 (64×576 bf16 each), sP0 and the row statistics.
    info.smem_bytes = (3 * 64 * 576 * 2 + 64 * 64 * 2 + 2048) as u32;
    info.sm_version = 90;
    let _ = spec;
    assemble(info, ops, programs, vec![0, 0, 0, 0, 1, 1, 1, 1], Default::default()).map_err(err)
}

/// One warpgroup of the seesaw schedule: `wg` 0 owns sK0 (even blocks) and the left half of O.
fn wg_program(pl: &Plan, t: &Tensors, ops: &mut OpTable, wg: u64) -> Program {
    let mut c = Code::new(ops, &format!("mla_wg{wg}"));
    let k_tile = BLOCK * 576 * 2;
    let bar = |buf: u64, piece: u64| Addr::at(4 * k_tile + 64 * 64 * 2 + 8 * (9 * buf + piece));
    let k_smem = |buf: u64| (1 + buf) * k_tile;
    c.op("S2R", &[r(TID)], &[]).op("MOV", &[r(PHASE)], &[]).op("MOV", &[r(TX)], &[]).op("MOV", &[r(CNT)], &[]);
    // This part's blocks: [part·per_part, min(+per_part, total)), in pairs.
    let pairs = c.param(
        CtaParam {
            offset: pl.total_blocks as i64 + 1,
            div: 2,
            lo: 0,
            hi: (pl.per_part / 2) as i64,
            ..CtaParam::default()
        }
        .with(Var::CtaZ, -(pl.per_part as i64)),
    );
    let first_block = Affine::konst(wg).with(Var::CtaZ, pl.per_part);
    // The KV block `g` (of the concatenated cache) at `k + g·64·token_bytes`.
    let kv = |g: &Affine| Addr::at(t.k).index(g, BLOCK * pl.token_bytes);
    let issue_block = |c: &mut Code, g: &Affine, buf: u64| {
        c.set_mask(1);
        if pl.paged {
            let a = Addr::at(t.scratch).index(g, 4);
            c.mem("LDG.E", &[r(PAGE)], &[r(TID)], a);
        }
        let piece = BLOCK * pl.token_bytes / 9;
        for k in 0..9 {
            c.mem_imm("SYNCS.ARRIVE.TRANS64", &[], &[r(TX)], bar(buf, k), piece as i32);
            let src: &[gpusim_isa::RegRange] = if pl.paged { &[urr(8, 2), r(PAGE)] } else { &[urr(8, 2), urr(4, 2)] };
            c.bulk("UTMALDG.4D", &[], src, kv(g).plus(k * piece), piece as u32);
        }
        c.set_mask(u32::MAX);
    };
    // Set-up: warp 0 of each WG initialises its buffer's 9 barriers; Q; the first blocks.
    c.set_mask(1);
    for k in 0..9 {
        c.mem_imm("SYNCS.EXCH.64", &[], &[urr(4, 2)], bar(wg, k), 1);
    }
    c.set_mask(u32::MAX);
    c.op("BAR.SYNC.DEFER_BLOCKING", &[], &[]);
    if wg == 0 {
        // Q: 64 rows × 576 bf16 of this m-block and KV head.
        let q = Addr::at(t.q).term(Var::CtaX, 64 * 576 * 2).term(Var::CtaY, (pl.m_blocks * 64 * 576 * 2) as i64);
        c.set_mask(1);
        c.bulk("UTMALDG.3D", &[], &[urr(12, 2), urr(4, 2)], q, (64 * 576 * 2) as u32);
        c.set_mask(u32::MAX);
    }
    issue_block(&mut c, &first_block, wg);
    c.op("BAR.SYNC.DEFER_BLOCKING", &[], &[]);
    let s_acc = rr(S_ACC, 32);
    let v = c.begin_param(pairs);
    // Block g = part·per_part + 2·pair + wg.
    let g = Affine::konst(wg).with(Var::CtaZ, pl.per_part).with(v, 2);
    if pl.fp8 {
        // Dequantise this WG's block to bf16: 64 tokens × 512 e4m3 over 128 threads.
        for k in 0..9 {
            c.mem("SYNCS.PHASECHK.TRANS64.TRYWAIT", &[pred(0)], &[r(PHASE)], bar(wg, k));
            c.op("BRA", &[], &[pred(0)]);
        }
        for i in 0..16u64 {
            let x = rr(36 + 4 * (i % 4) as u8, 4);
            c.mem("LDS.128", &[x], &[r(TID)], Addr::at(k_smem(wg) + 2048 * i).term(Var::Warp, 512));
            for h in 0..4u8 {
                c.op("F2FP.BF16.E4M3.UNPACK_B", &[r(S_ACC + 2 * h)], &[r(36 + 4 * (i % 4) as u8 + h)]);
                c.op("HMUL2.BF16", &[r(S_ACC + 2 * h)], &[r(S_ACC + 2 * h), r(SCALE)]);
                c.op("F2FP.BF16.E4M3.UNPACK_B", &[r(S_ACC + 2 * h + 1)], &[r(36 + 4 * (i % 4) as u8 + h)]);
                c.op("HMUL2.BF16", &[r(S_ACC + 2 * h + 1)], &[r(S_ACC + 2 * h + 1), r(SCALE)]);
            }
            for h in 0..2u64 {
                let y = rr(S_ACC + 4 * h as u8, 4);
                c.mem("STS.128", &[], &[r(TID), y], Addr::at(k_smem(wg) + 4096 * i + 2048 * h).term(Var::Warp, 512));
            }
        }
        c.op_imm("BAR.SYNC", &[], &[], named(4 + wg as u8, 128));
    }
    // S = q·Kᵀ (64×64, k = 576) as the 9 pieces land: 4 k-steps of 16 per 64-wide piece.
    c.op("WARPGROUP.ARRIVE", &[], &[]);
    for k in 0..9 {
        if !pl.fp8 {
            c.mem("SYNCS.PHASECHK.TRANS64.TRYWAIT", &[pred(0)], &[r(PHASE)], bar(wg, k));
            c.op("BRA", &[], &[pred(0)]);
        }
        for _ in 0..4 {
            c.op("HGMMA.64x64x16.F32.BF16", &[s_acc], &[urr(16, 2), urr(18, 2), s_acc]);
        }
    }
    c.op_imm("WARPGROUP.DEPBAR.LE", &[], &[], 0);
    // Softmax on S: 32 scores per thread (2 rows); the row maxima meet in shared memory.
    for i in 0..32u8 {
        c.op("FMNMX", &[r(MAX + i % 2)], &[r(MAX + i % 2), r(S_ACC + i)]);
    }
    for k in 0..2u8 {
        for _ in 0..2 {
            c.op("SHFL.BFLY", &[r(MAX + 2 + k)], &[r(MAX + k)]);
            c.op("FMNMX", &[r(MAX + k)], &[r(MAX + k), r(MAX + 2 + k)]);
        }
    }
    c.mem("STS.64", &[], &[r(TID), rr(MAX, 2)], Addr::at(4 * k_tile + 8192 + 512 * wg).term(Var::Warp, 128));
    c.op_imm("BAR.SYNC", &[], &[], named(1, 256));
    c.mem("LDS.64", &[rr(MAX + 2, 2)], &[r(TID)], Addr::at(4 * k_tile + 8192 + 512 * (1 - wg)).term(Var::Warp, 128));
    for k in 0..2u8 {
        c.op("FMNMX", &[r(MAX + k)], &[r(MAX + k), r(MAX + 2 + k)]);
        c.op("FADD", &[r(SCALE + k)], &[r(SCALE + 2 + k), r(MAX + k)]);
        c.op("MUFU.EX2", &[r(SCALE + k)], &[r(SCALE + k)]);
        c.op("FMUL", &[r(SUM + k)], &[r(SUM + k), r(SCALE + k)]);
    }
    for i in 0..32u8 {
        c.op("FFMA", &[r(S_ACC + i)], &[r(S_ACC + i), r(MAX + i % 2)]);
        c.op("MUFU.EX2", &[r(S_ACC + i)], &[r(S_ACC + i)]);
        c.op("FADD", &[r(SUM + i % 2)], &[r(SUM + i % 2), r(S_ACC + i)]);
    }
    for i in 0..16u8 {
        c.op("F2FP.BF16.F32.PACK_AB", &[r(P_REG + i)], &[rr(S_ACC + 2 * i, 2)]);
    }
    // P to shared memory for the other WG (64×64 bf16: 2 KB per warp), O rescaled.
    for k in 0..4u64 {
        let pv = rr(P_REG + 4 * k as u8, 4);
        c.mem("STSM.16.M88.4", &[], &[r(TID), pv], Addr::at(3 * k_tile + 8192 * wg + 512 * k).term(Var::Warp, 2048));
    }
    for i in 0..128u8 {
        c.op("FMUL", &[r(O_ACC + i)], &[r(O_ACC + i), r(SCALE + i % 2)]);
    }
    c.op("FENCE.VIEW.ASYNC.S", &[], &[]);
    c.op_imm("BAR.SYNC", &[], &[], named(2, 256));
    // O_w += P0·V0[:, w] + P1·V1[:, w]: 4 + 4 HGMMA.64x256x16, own P from registers.
    let o_acc = rr(O_ACC, 128);
    c.op("WARPGROUP.ARRIVE", &[], &[]);
    for src in 0..2u64 {
        for k in 0..4u8 {
            if src == wg {
                c.op("HGMMA.64x256x16.F32.BF16", &[o_acc], &[rr(P_REG + 4 * k, 4), urr(20, 2), o_acc]);
            } else {
                c.op("HGMMA.64x256x16.F32.BF16", &[o_acc], &[urr(22, 2), urr(20, 2), o_acc]);
            }
        }
    }
    c.op_imm("WARPGROUP.DEPBAR.LE", &[], &[], 0);
    // Both WGs are done with both buffers: each refills its own with its next block.
    c.op_imm("BAR.SYNC", &[], &[], named(3, 256));
    let next = Affine { konst: g.konst + 2, terms: g.terms.clone() };
    issue_block(&mut c, &next, wg);
    c.op("IADD3", &[r(CNT)], &[r(CNT)]).op("ISETP.NE.AND", &[pred(1)], &[r(CNT)]).op("BRA", &[], &[pred(1)]);
    c.end();
    // Epilogue: row sums, 1/sum, the partial O (fp32, 64 rows × 256 of this WG) and LSE.
    for k in 0..2u8 {
        for _ in 0..2 {
            c.op("SHFL.BFLY", &[r(SUM + 2 + k)], &[r(SUM + k)]);
            c.op("FADD", &[r(SUM + k)], &[r(SUM + k), r(SUM + 2 + k)]);
        }
        c.op("MUFU.RCP", &[r(SCALE + k)], &[r(SUM + k)]);
        c.op("MUFU.LG2", &[r(SCALE + 2 + k)], &[r(SUM + k)]);
    }
    let row_bytes = 512 * 4;
    let lanes: Vec<i64> = (0..32).map(|l| (l / 4) * row_bytes + (l % 4) * 8).collect();
    let base = Addr::at(partials(t) + 1024 * wg)
        .plus_signed(-(16 * 4 * wg as i64) * row_bytes)
        .term(Var::Warp, 16 * row_bytes)
        .term(Var::CtaX, 64 * row_bytes)
        .term(Var::CtaY, (pl.m_blocks * 64) as i64 * row_bytes)
        .term(Var::CtaZ, (pl.hk * pl.m_blocks * 64) as i64 * row_bytes);
    for q in 0..64u64 {
        let (h, cg) = (q % 2, q / 2);
        let val = rr(O_ACC + (2 * q) as u8 % 128, 2);
        c.mem_lanes("STG.E.64", &[], &[r(TID), val], base.plus(8 * h * row_bytes as u64 + 32 * cg), &lanes);
    }
    c.op("EXIT", &[], &[]);
    c.finish()
}

/// FlashMLA's combine: one warp per (request, query row) merges the parts' partials by LSE.
fn combine_kernel(pl: &Plan, t: &Tensors, spec: &AttnSpec) -> Result<KernelTrace, WorkloadError> {
    let rows = spec.batch * pl.hk * pl.rows;
    let ctas = rows.div_ceil(8);
    let mut ops = OpTable::new();
    let mut c = Code::new(&mut ops, "mla_combine");
    c.op("S2R", &[r(TID)], &[]);
    // Each part's LSE, then per part 512 fp32 of the row: 4 16-byte loads per lane.
    // A request's blocks span about blocks/per_part + 1 parts.
    let parts_per_row = ((pl.total_blocks / spec.batch.max(1)).div_ceil(pl.per_part) + 1).clamp(1, pl.parts);
    let row_bytes = 512 * 4;
    let s = c.begin(parts_per_row as u32);
    c.mem("LDG.E", &[r(2)], &[r(TID)], Addr::at(t.scratch + (1 << 23)).term(Var::Warp, 4).term(s, 4));
    c.op("MUFU.EX2", &[r(2)], &[r(2)]);
    for i in 0..4u8 {
        let a = Addr::at(partials(t) + 512 * i as u64)
            .term(Var::CtaX, 8 * row_bytes)
            .term(Var::Warp, row_bytes)
            .term(s, (rows * row_bytes as u64) as i64);
        c.mem("LDG.E.128", &[rr(8 + 4 * i, 4)], &[r(TID)], a);
        for k in 0..4u8 {
            c.op("FFMA", &[r(24 + 4 * i + k)], &[r(8 + 4 * i + k), r(2), r(24 + 4 * i + k)]);
        }
    }
    c.end();
    for i in 0..4u8 {
        c.op("F2FP.BF16.F32.PACK_AB", &[rr(24 + 4 * i, 2)], &[rr(24 + 4 * i, 4)]);
        let a = Addr::at(t.o + 256 * i as u64).term(Var::CtaX, 8 * 1024).term(Var::Warp, 1024);
        c.mem("STG.E.64", &[], &[r(TID), rr(24 + 4 * i, 2)], a);
    }
    c.op("EXIT", &[], &[]);
    let p = c.finish();
    let mut info =
        KernelInfo::new(1, "flash_mla_combine_kernel".to_string(), Dim3::new(ctas as u32, 1, 1), Dim3::new(256, 1, 1));
    info.regs_per_thread = 64;
    info.sm_version = 90;
    assemble(info, ops, vec![p], vec![0; 8], Default::default()).map_err(err)
}

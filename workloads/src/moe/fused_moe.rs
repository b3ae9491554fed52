//! The Triton `fused_moe_kernel` of vLLM and SGLang (../shared/notes/kernel-designs.md §7): one
//! launch per expert GEMM over the token blocks that `moe_align_block_size` sorted by expert.
//!
//! **Launch.** A 1-D grid of `⌈EM/BLOCK_M⌉ · ⌈N/BLOCK_N⌉` CTAs, `EM = M·topk + E·(BLOCK_M − 1)`
//! (the length of `sorted_token_ids`), shrunk to `M·topk·BLOCK_M` rows when `M < BLOCK_M`. CTA
//! `pid` takes m-block `pid_m` and n-block `pid_n` by Triton's `GROUP_SIZE_M` swizzle. The
//! m-blocks past `num_tokens_post_padded` return at once (their CTAs still launch). Each block
//! reads its expert from `expert_ids`; its valid rows are a prefix (the rest are the sentinel,
//! masked).
//!
//! **Kernel** (`num_warps` warps, `num_stages` stages, not warp specialised, several CTAs per
//! SM): every thread copies its share of the A and B tiles with `cp.async` (Triton's software
//! pipeline; masked A rows are zero-filled, so they move no bytes), `tl.dot` runs as `wgmma` on
//! sm_90 when a warpgroup has 64 rows (`BLOCK_M ≥ 64`, warps a multiple of 4), else as `mma.sync`
//! with `ldmatrix` fragments (`BLOCK_M` 16 or 32, and on sm_80). Block-FP8 (w8a8, 128×128
//! weight scales, 1×128 activation scales) multiplies each k-block's dot by `a_scale[row]
//! · b_scale` as it accumulates: the dot goes to fresh registers, then one FFMA per accumulator.
//! GEMM2 multiplies the router weight in its epilogue. The output is stored from the
//! accumulator layout, masked to the valid rows.
//!
//! ```text
//! S2R ×2; LDG num_tokens_post_padded; ISETP; BRA            # early exit
//! loop p4 (0 or 1: the block has rows) {
//!   LDG expert_ids[pid_m]; LDG sorted_token_ids; IMAD ×4
//!   prologue: S−1 × { loop p6 { LDGSTS A } ; n_b × LDGSTS B ; [LDG scales ×3] ; LDGDEPBAR }
//!   k-tiles: DEPBAR.LE SB0, S−2; BAR.SYNC
//!            wgmma: WARPGROUP.ARRIVE; BK/kinst × HGMMA|QGMMA; WARPGROUP.DEPBAR.LE
//!            mma.sync: per k-step LDSM A, LDSM B, HMMA × cols/8
//!            loop p6 { LDGSTS A } ; n_b × LDGSTS B ; [LDG scales ×3] ; LDGDEPBAR  # tile kt+S−1
//!            [FMUL ×2; FFMA × acc]  IADD3 ×2; ISETP; BRA
//!   [router weight: LDG ×2; FMUL × acc]; F2FP × acc/2; loop p7 { STG.E × cols/8 }
//! }
//! EXIT
//! ```
//!
//! Per-CTA parameters: `p0` m-block and `p1` n-block (tables over the CTA index, in launch order),
//! `p2` the block's expert (−1 past the padded tokens: no CTA group), `p3` its valid rows, `p4`
//! whether it computes, `p5` its first A row, `p6` the A copies of this warp that hold valid rows,
//! `p7` the 8-row halves of this warp's accumulator rows that are stored.
//!
//! Simulator conventions, all approximations of a gather we cannot replay without the token
//! ids: a block's A rows are taken as consecutive rows from `p5` = (the block's first sorted
//! position) / `a_div` (GEMM1 reads `hidden` at `sorted_id / topk`, GEMM2 its own rows), which keeps
//! A's footprint at the real matrix's rows and each row read by about `topk` blocks. C rows are
//! written at the block's padded sorted position (the bytes stored are the valid rows'). A row
//! copy that is partly valid is copied whole (at most one per warp). An n-block or k-block
//! past the matrix edge is loaded whole (MoE widths are multiples of 128).

use std::collections::BTreeMap;
use std::sync::Arc;

use gpusim_configs::Arch;
use gpusim_isa::{CtaGroup, CtaParam, Dim3, KernelTrace, OpTable, Program, Var};

use crate::asm::{Addr, Affine, Code, assemble, info, p as pred, r, rr, sb};
use crate::gemm::{Dtype, ctas_per_sm, lay_out, row_lanes};

/// A Triton fused_moe launch configuration (`BLOCK_SIZE_M/N/K`, `GROUP_SIZE_M`, `num_warps`,
/// `num_stages`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TritonConfig {
    pub block_m: u64,
    pub block_n: u64,
    pub block_k: u64,
    pub group_m: u64,
    pub warps: u64,
    pub stages: u64,
}

impl TritonConfig {
    /// What vLLM runs on a part without a tuned config file (`get_default_config`; a new chip
    /// has none): block-FP8 `64 × 128 × 128` (block_n and block_k the 128×128 scale block),
    /// `GROUP_SIZE_M` 32; otherwise `16 × 32 × 64`, group 1, when `tokens ≤ experts`, else
    /// `64 × 64 × 32`, group 8. Warps and stages: 4 and 3 (the block-FP8 default's, and Triton's
    /// own defaults for the others).
    pub fn vllm_default(dtype: Dtype, block_scaled: bool, tokens: u64, experts: u64) -> TritonConfig {
        let (block_m, block_n, block_k, group_m) = if dtype == Dtype::Fp8 && block_scaled {
            (64, 128, 128, 32)
        } else if tokens <= experts {
            (16, 32, 64, 1)
        } else {
            (64, 64, 32, 8)
        };
        TritonConfig { block_m, block_n, block_k, group_m, warps: 4, stages: 3 }
    }
}

/// One fused_moe GEMM: `C[sorted rows] = A[rows] · B[expert]ᵀ` over the blocks of every expert.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FusedMoeGemm {
    /// Rows routed to each expert (their sum is `tokens · topk`).
    pub counts: Vec<u64>,
    /// Tokens of the batch (`M`).
    pub tokens: u64,
    /// The layer's top-k (the length of the sorted ids).
    pub topk: u64,
    /// A row of a sorted position: `position / a_div` (GEMM1: topk; GEMM2: 1).
    pub a_div: u64,
    pub n: u64,
    pub k: u64,
    /// fp8 (w8a8) or bf16 (fp16).
    pub dtype: Dtype,
    /// fp8 with 1×128 activation and 128×128 weight scales.
    pub block_scaled: bool,
    /// Multiply by the router weight in the epilogue (GEMM2).
    pub mul_routed_weight: bool,
}

/// The m-blocks of the sorted tokens: expert (−1 past the padded tokens), valid rows, first
/// sorted position (without padding); `grid_m` entries.
struct Blocks {
    expert: Vec<i64>,
    valid: Vec<i64>,
    pos: Vec<i64>,
}

/// The length of `sorted_token_ids`: `M·topk + E·(BLOCK_M − 1)`.
fn sorted_ids(p: &FusedMoeGemm, bm: u64) -> u64 {
    p.counts.iter().sum::<u64>() + p.counts.len() as u64 * (bm - 1)
}

fn blocks(p: &FusedMoeGemm, bm: u64) -> Blocks {
    // The launch covers the sorted ids, shrunk to `M·topk·BLOCK_M` rows when `M < BLOCK_M`.
    let mut em = sorted_ids(p, bm);
    if p.tokens < bm {
        em = em.min(p.tokens * p.topk * bm);
    }
    let grid_m = em.div_ceil(bm) as usize;
    let (mut expert, mut valid, mut pos) = (Vec::new(), Vec::new(), Vec::new());
    let mut start = 0;
    for (e, &c) in p.counts.iter().enumerate() {
        for b in 0..c.div_ceil(bm) {
            expert.push(e as i64);
            valid.push((c - b * bm).min(bm) as i64);
            pos.push((start + b * bm) as i64);
        }
        start += c;
    }
    expert.resize(grid_m.max(expert.len()), -1);
    valid.resize(expert.len(), 0);
    pos.resize(expert.len(), 0);
    Blocks { expert, valid, pos }
}

/// Triton's launch order: CTA `pid` takes `(pid_m, pid_n)` by the `GROUP_SIZE_M` swizzle.
fn launch_order(num_m: u64, num_n: u64, group: u64) -> (Vec<i64>, Vec<i64>) {
    let per_group = group * num_n;
    let (mut ms, mut ns) = (Vec::new(), Vec::new());
    for pid in 0..num_m * num_n {
        let first = pid / per_group * group;
        let size = (num_m - first).min(group);
        let within = pid % per_group;
        ms.push((first + within % size) as i64);
        ns.push((within / size) as i64);
    }
    (ms, ns)
}

/// How `tl.dot` compiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mma {
    /// `wgmma` (sm_90): one 64-row block per warpgroup.
    Wgmma,
    /// `mma.sync` with `ldmatrix` fragments: one 16-row block per warp.
    Sync,
}

/// Everything derived from a problem and a configuration.
struct Plan {
    c: TritonConfig,
    mma: Mma,
    elt: u64,
    /// Bytes of one A or B row of a k-tile, and rows per copy instruction.
    row_bytes: u64,
    rows_inst: u64,
    /// A rows per warp, and its copy instructions.
    a_rows_w: u64,
    a_inst_w: u64,
    /// B copy instructions per warp.
    b_inst_w: u64,
    /// Warps per column group of the accumulator tile, column groups, columns per warp.
    warps_per_col: u64,
    col_groups: u64,
    cols_w: u64,
    kt: u64,
    stage_bytes: u64,
    smem: u64,
    regs: u64,
    threads: u64,
    /// Output element bytes (bf16 / fp16).
    oe: u64,
    at: Tensors,
}

/// Base addresses of the kernel's tensors.
struct Tensors {
    a: u64,
    b: u64,
    c: u64,
    a_scale: u64,
    b_scale: u64,
    sorted_ids: u64,
    expert_ids: u64,
    router_weights: u64,
    post_padded: u64,
}

const MAX_WARPS: u64 = 16;

fn plan(arch: &Arch, p: &FusedMoeGemm, c: &TritonConfig) -> Result<Plan, String> {
    let cc = arch.compute_capability;
    if cc < 80 {
        return Err(format!("the fused_moe recipe needs compute capability 8.0 (mma.sync); {} is {cc}", arch.name));
    }
    if p.dtype == Dtype::Fp8 && cc < 89 {
        return Err(format!("fp8 fused_moe needs compute capability 8.9; {} is {cc}", arch.name));
    }
    if !matches!(p.dtype, Dtype::Fp8 | Dtype::Bf16 | Dtype::Fp16) {
        return Err(format!("fused_moe takes fp8, bf16 or fp16, not {}", p.dtype));
    }
    if p.block_scaled && p.dtype != Dtype::Fp8 {
        return Err("block scaling is for fp8 (w8a8)".into());
    }
    if p.counts.is_empty() || p.counts.iter().all(|&c| c == 0) {
        return Err("no tokens are routed to any expert".into());
    }
    if p.tokens == 0 || p.topk == 0 || p.a_div == 0 || p.n == 0 || p.k == 0 {
        return Err("tokens, topk, a_div, n and k must be at least 1".into());
    }
    let (bm, bn, bk) = (c.block_m, c.block_n, c.block_k);
    if ![16, 32, 64, 128, 256].contains(&bm) {
        return Err(format!("block_m = {bm} must be 16, 32, 64, 128 or 256"));
    }
    if !c.warps.is_power_of_two() || c.warps > MAX_WARPS {
        return Err(format!("num_warps = {} must be a power of two up to {MAX_WARPS}", c.warps));
    }
    if !(2..=8).contains(&c.stages) {
        return Err(format!("num_stages = {} must be between 2 and 8", c.stages));
    }
    if c.group_m == 0 {
        return Err("group_size_m must be at least 1".into());
    }
    let elt = p.dtype.bytes();
    let kinst = crate::gemm::hopper::k_inst(p.dtype);
    let row_bytes = bk * elt;
    if bk == 0 || !bk.is_multiple_of(kinst) || !row_bytes.is_power_of_two() || !(16..=512).contains(&row_bytes) {
        return Err(format!(
            "block_k = {bk} must be a multiple of {kinst} whose rows ({row_bytes} B of {}) are a power of two from 16 to \
             512 bytes",
            p.dtype
        ));
    }
    if p.block_scaled && (!128u64.is_multiple_of(bk) || bn > 128 || !128u64.is_multiple_of(bn)) {
        return Err(format!(
            "block-FP8 needs block_k and block_n dividing the 128×128 scale block (block_k = {bk}, block_n = {bn})"
        ));
    }
    let mma = if cc >= 90 && bm >= 64 && c.warps.is_multiple_of(4) { Mma::Wgmma } else { Mma::Sync };
    let (warps_per_col, col_groups) = match mma {
        Mma::Wgmma => {
            let wgs = c.warps / 4;
            let wg_m = (bm / 64).min(wgs);
            if bm / 64 > wg_m {
                return Err(format!(
                    "block_m = {bm} with {} warps puts several 64-row wgmma blocks on a warpgroup (not modelled): use {} \
                     warps",
                    c.warps,
                    4 * bm / 64
                ));
            }
            (4 * wg_m, wgs / wg_m)
        }
        Mma::Sync => {
            let wm = (bm / 16).min(c.warps);
            if bm / 16 > wm {
                return Err(format!(
                    "block_m = {bm} with {} warps puts several 16-row mma blocks on a warp (not modelled): use {} warps",
                    c.warps,
                    bm / 16
                ));
            }
            (wm, c.warps / wm)
        }
    };
    if bn == 0 || !bn.is_multiple_of(8 * col_groups) || bn / col_groups > 256 {
        return Err(format!(
            "block_n = {bn} must split into {col_groups} column groups of a multiple of 8 up to 256 columns"
        ));
    }
    let cols_w = bn / col_groups;
    let rows_inst = 32 / (row_bytes / 16);
    if !bm.is_multiple_of(c.warps) || !bn.is_multiple_of(c.warps) {
        return Err(format!("block_m = {bm} and block_n = {bn} must be multiples of num_warps = {}", c.warps));
    }
    let a_rows_w = bm / c.warps;
    let b_rows_w = bn / c.warps;
    if !a_rows_w.is_multiple_of(rows_inst) || !b_rows_w.is_multiple_of(rows_inst) {
        return Err(format!(
            "each warp copies {a_rows_w} A and {b_rows_w} B rows of {row_bytes} B: not whole copies of {rows_inst} rows \
             (change block_k or num_warps)"
        ));
    }
    let acc = cols_w / 2 * if p.block_scaled { 2 } else { 1 };
    // Triton's register use: the accumulators (and the block-scaled dot's fresh ones) plus about
    // 40 for pointers, masks and loop state (an estimate: ptxas decides).
    let regs = (acc + 40).div_ceil(8) * 8;
    let regs = regs.min(arch.sm.max_registers_per_thread as u64).min(255);
    if acc + 16 > regs {
        return Err(format!("{acc} accumulator registers per thread do not fit (use a smaller block_n)"));
    }
    let stage_bytes = (bm + bn) * row_bytes;
    let smem = c.stages * stage_bytes;
    if smem > arch.sm.shared_mem_per_cta.0 {
        return Err(format!(
            "{} stages of {stage_bytes} B need {smem} B of shared memory; a CTA may have {} on {}",
            c.stages, arch.sm.shared_mem_per_cta.0, arch.name
        ));
    }
    let threads = 32 * c.warps;
    if ctas_per_sm(arch, threads, regs, smem) == 0 {
        return Err(format!("a CTA of {threads} threads × {regs} registers and {smem} B does not fit an SM"));
    }
    let kt = p.k.div_ceil(bk);
    let experts = p.counts.len() as u64;
    let rows: u64 = p.counts.iter().sum();
    let (np, kp) = (p.n.div_ceil(bn) * bn, kt * bk);
    let em = sorted_ids(p, bm);
    let oe = p.dtype.out_bytes();
    let a_rows = rows.div_ceil(p.a_div) + bm;
    let kblocks = kp.div_ceil(128);
    let sizes = [
        a_rows * kp * elt,
        experts * np * kp * elt,
        em.div_ceil(bm) * bm * np * oe,
        if p.block_scaled { a_rows * kblocks * 4 } else { 0 },
        if p.block_scaled { experts * np.div_ceil(128) * kblocks * 4 } else { 0 },
        em * 4,
        em.div_ceil(bm) * 4,
        rows * 4,
        4,
    ];
    if sizes.iter().sum::<u64>() > 1 << 42 {
        return Err("the operands exceed 4 TiB".into());
    }
    Ok(Plan {
        c: *c,
        mma,
        elt,
        row_bytes,
        rows_inst,
        a_rows_w,
        a_inst_w: a_rows_w / rows_inst,
        b_inst_w: b_rows_w / rows_inst,
        warps_per_col,
        col_groups,
        cols_w,
        kt,
        stage_bytes,
        smem,
        regs,
        threads,
        oe,
        at: {
            let [a, b, c, a_scale, b_scale, sorted_ids, expert_ids, router_weights, post_padded] = lay_out(sizes);
            Tensors { a, b, c, a_scale, b_scale, sorted_ids, expert_ids, router_weights, post_padded }
        },
    })
}

/// The kernel of `p` with configuration `c` (id 0, stream 0; the layer sets both).
pub fn generate_fused_moe(arch: &Arch, p: &FusedMoeGemm, c: &TritonConfig) -> Result<KernelTrace, String> {
    let pl = plan(arch, p, c)?;
    let b = blocks(p, c.block_m);
    let num_m = b.expert.len() as u64;
    let num_n = p.n.div_ceil(c.block_n);
    let ctas = num_m * num_n;
    if ctas > u32::MAX as u64 {
        return Err(format!("{ctas} CTAs do not fit a 1-D grid"));
    }
    let (ms, ns) = launch_order(num_m, num_n, c.group_m);
    let t = Tables {
        m: Arc::from(ms),
        n: Arc::from(ns),
        expert: Arc::from(b.expert),
        valid: Arc::from(b.valid),
        arow: Arc::from(b.pos.iter().map(|&x| x / p.a_div as i64).collect::<Vec<_>>()),
    };
    let mut ops = OpTable::new();
    let programs: Vec<Program> = (0..pl.col_groups).map(|g| program(&pl, p, &t, &mut ops, g)).collect();
    // Warp w is in column group w / warps_per_col.
    let layout = (0..c.warps).map(|w| (w / pl.warps_per_col) as u32).collect();
    let name = format!(
        "fused_moe_kernel_{}{}_{}x{}x{}_g{}_w{}_s{}{}",
        p.dtype,
        if p.block_scaled { "_w8a8_block" } else { "" },
        c.block_m,
        c.block_n,
        c.block_k,
        c.group_m,
        c.warps,
        c.stages,
        if p.mul_routed_weight { "_mul_routed_weight" } else { "" }
    );
    let mut i = info(
        0,
        &name,
        Dim3::new(ctas as u32, 1, 1),
        Dim3::new(pl.threads as u32, 1, 1),
        pl.regs as u32,
        pl.smem as u32,
        arch.compute_capability.max(80),
    );
    i.cta_group = Some(CtaGroup { name: "expert".into(), param: 2 });
    assemble(i, ops, programs, layout, BTreeMap::new())
}

/// The launch's tables: per CTA its m- and n-block, per m-block its expert, valid rows and first
/// A row.
struct Tables {
    m: Arc<[i64]>,
    n: Arc<[i64]>,
    expert: Arc<[i64]>,
    valid: Arc<[i64]>,
    arow: Arc<[i64]>,
}

/// Registers.
const TID: u8 = 0;
const CTAID: u8 = 1;
const GA: u8 = 2;
const GB: u8 = 4;
const CNT: u8 = 6;
const OUTP: u8 = 8;
/// Block scales: three per stage (the lane's two rows' and the weight's), then two products.
const SCALE: u8 = 10;
const SCALE_PRODUCT: u8 = SCALE + 3 * 8;
const FRAG: u8 = 36;
const ACC: u8 = 48;

/// The program of the warps of column group `g`.
fn program(pl: &Plan, p: &FusedMoeGemm, t: &Tables, ops: &mut OpTable, g: u64) -> Program {
    let mut c = Code::new(ops, &format!("fused_moe_cols{g}"));
    let s = pl.c.stages;
    let bm = pl.c.block_m as i64;
    let first_w = (g * pl.warps_per_col) as i64;
    let by_cta = |c: &mut Code, table: &Arc<[i64]>| {
        let table = Some(c.table(table.clone()));
        c.param(CtaParam { table, ..CtaParam::constant(0).with(Var::CtaX, 1) })
    };
    let mb = by_cta(&mut c, &t.m);
    let nb = by_cta(&mut c, &t.n);
    let by_block = |c: &mut Code, table: &Arc<[i64]>| {
        let table = Some(c.table(table.clone()));
        c.param(CtaParam { table, ..CtaParam::constant(0).with(mb, 1) })
    };
    let expert = by_block(&mut c, &t.expert);
    let valid = by_block(&mut c, &t.valid);
    let active = c.param(CtaParam { lo: 0, hi: 1, ..CtaParam::constant(0).with(valid, 1) });
    let arow = by_block(&mut c, &t.arow);
    // This warp's A copies with valid rows: rows [w·a_rows_w + i·rows_inst, ...) for i below
    // ⌈(valid − w·a_rows_w)/rows_inst⌉, clamped to its copies.
    let ri = pl.rows_inst as i64;
    let a_copies = c.param(CtaParam {
        div: ri,
        lo: 0,
        hi: pl.a_inst_w as i64,
        ..CtaParam::constant(ri - 1).with(valid, 1).with(Var::Warp, -(pl.a_rows_w as i64))
    });
    // This warp's accumulator rows start at 16·(w − first_w): its stored 8-row halves.
    let halves = c.param(CtaParam {
        div: 8,
        lo: 0,
        hi: 2,
        ..CtaParam::constant(7 + 16 * first_w).with(valid, 1).with(Var::Warp, -16)
    });

    c.op("S2R", &[r(TID)], &[]).op("S2R", &[r(CTAID)], &[]);
    c.mem_stride("LDG.E", &[r(CNT)], &[rr(GA, 2)], Addr::at(pl.at.post_padded), 0);
    c.op("ISETP.GE.AND", &[pred(0)], &[r(CTAID), r(CNT)]).op("BRA", &[], &[pred(0)]);
    c.begin_param(active);
    c.mem_stride("LDG.E", &[r(CNT)], &[rr(GA, 2)], Addr::at(pl.at.expert_ids).term(mb, 4), 0);
    c.mem("LDG.E", &[r(SCALE)], &[rr(GA, 2)], Addr::at(pl.at.sorted_ids).term(mb, 4 * bm));
    c.op("IMAD.WIDE", &[rr(GA, 2)], &[r(SCALE), r(TID)]).op("IMAD.WIDE", &[rr(GB, 2)], &[r(CNT), r(TID)]);
    c.op("IMAD.SHL.U32", &[r(OUTP)], &[r(TID)]).op("MOV", &[r(CNT)], &[]);
    let k = Kernel { pl, p, mb, nb, expert, arow, a_copies, group: g, first_w };
    for tile in 0..(s - 1).min(pl.kt) {
        k.copies(&mut c, &Affine::konst(tile), tile % s);
    }
    for _ in pl.kt..s - 1 {
        c.op("LDGDEPBAR", &[], &[]);
    }
    // k-tiles that fetch tile kt + S − 1: rounds of S (the stage of a tile is kt mod S), then the
    // rest written out; the last S − 1 fetch nothing.
    let fetching = pl.kt.saturating_sub(s - 1);
    let rounds = fetching / s;
    if rounds > 0 {
        let v = c.begin(rounds as u32);
        for st in 0..s {
            k.k_tile(&mut c, &Affine::konst(st).with(v, s), st, true);
        }
        c.end();
    }
    for kt in rounds * s..pl.kt {
        k.k_tile(&mut c, &Affine::konst(kt), kt % s, kt < fetching);
    }
    k.epilogue(&mut c, halves);
    c.end();
    c.op("EXIT", &[], &[]);
    c.finish()
}

/// What the parts of a program share.
struct Kernel<'a> {
    pl: &'a Plan,
    p: &'a FusedMoeGemm,
    mb: Var,
    nb: Var,
    expert: Var,
    arow: Var,
    a_copies: Var,
    /// This program's column group and its first warp.
    group: u64,
    first_w: i64,
}

impl Kernel<'_> {
    /// The copies of k-tile `kt`, whose stage is `stage` (A rows of this warp that are valid, all
    /// its B rows), one commit group; its block scales.
    fn copies(&self, c: &mut Code, kt: &Affine, stage: u64) {
        let (pl, p) = (self.pl, self.p);
        let kp = pl.kt * pl.c.block_k;
        let pitch = kp * pl.elt;
        let lanes = row_lanes(pl.row_bytes, pitch);
        let ri = pl.rows_inst;
        // A: rows arow + w·a_rows_w + i·rows_inst.
        let i = c.begin_param(self.a_copies);
        let a = Addr::at(pl.at.a)
            .term(self.arow, pitch as i64)
            .term(Var::Warp, (pl.a_rows_w * pitch) as i64)
            .term(i, (ri * pitch) as i64)
            .index(kt, pl.row_bytes);
        c.mem_lanes("LDGSTS.E.BYPASS.128", &[], &[r(OUTP), rr(GA, 2)], a, &lanes);
        c.end();
        // B[expert]: rows nb·BN + w·b_rows + q·rows_inst of the expert's N'×K' matrix.
        let np = p.n.div_ceil(pl.c.block_n) * pl.c.block_n;
        let b_rows_w = pl.b_inst_w * ri;
        for q in 0..pl.b_inst_w {
            let b = Addr::at(pl.at.b + q * ri * pitch)
                .term(self.expert, (np * pitch) as i64)
                .term(self.nb, (pl.c.block_n * pitch) as i64)
                .term(Var::Warp, (b_rows_w * pitch) as i64)
                .index(kt, pl.row_bytes);
            c.mem_lanes("LDGSTS.E.BYPASS.128", &[], &[r(OUTP), rr(GB, 2)], b, &lanes);
        }
        if p.block_scaled {
            // The tile's block scales, pipelined with its copies (Triton's pipeliner schedules
            // every load of the loop S − 1 iterations ahead), into the stage's registers:
            // a_scale of the lane's rows (lane/4 and lane/4 + 8 of the warp's 16) at k-block
            // kt·BK/128, and the weight scale of the block's 128 columns.
            let kb = (pl.kt * pl.c.block_k).div_ceil(128);
            let per_kt = pl.c.block_k * 4 / 128;
            let sc = SCALE + 3 * stage as u8;
            let lanes: Vec<i64> = (0..32).map(|l| (l / 4) * kb as i64 * 4).collect();
            for h in 0..2u64 {
                let a = Addr::at(pl.at.a_scale + h * 8 * kb * 4).term(self.arow, kb as i64 * 4).index(kt, per_kt);
                c.mem_lanes("LDG.E", &[r(sc + h as u8)], &[rr(GA, 2)], self.rows(a, kb * 4), &lanes);
            }
            let nblocks = (p.n.div_ceil(pl.c.block_n) * pl.c.block_n).div_ceil(128);
            let bsc = Addr::at(pl.at.b_scale)
                .term(self.expert, (nblocks * kb * 4) as i64)
                .term(self.nb, (pl.c.block_n * kb * 4 / 128) as i64)
                .index(kt, per_kt);
            c.mem_stride("LDG.E", &[r(sc + 2)], &[rr(GB, 2)], bsc, 0);
        }
        c.op("LDGDEPBAR", &[], &[]);
    }

    /// `a` plus the accumulator row of lane 0 of warp `w` in this program, `16·(w − first_w)`,
    /// times `pitch` bytes.
    fn rows(&self, a: Addr, pitch: u64) -> Addr {
        a.plus_signed(-16 * self.first_w * pitch as i64).term(Var::Warp, 16 * pitch as i64)
    }

    /// The first accumulator column of this program's warps.
    fn col0(&self) -> u64 {
        self.group * self.pl.cols_w
    }

    fn k_tile(&self, c: &mut Code, kt: &Affine, stage: u64, fetch: bool) {
        let (pl, p) = (self.pl, self.p);
        let s = pl.c.stages;
        c.op_imm("DEPBAR.LE", &[sb(0)], &[], s as i32 - 2);
        c.op("BAR.SYNC.DEFER_BLOCKING", &[], &[]);
        let acc_n = pl.cols_w / 2;
        let acc = rr(ACC, acc_n as u8);
        let dot = if p.block_scaled { rr(ACC + acc_n as u8, acc_n as u8) } else { acc };
        match pl.mma {
            Mma::Wgmma => {
                let name = crate::gemm::hopper::mma_name(p.dtype, pl.cols_w);
                let steps = pl.c.block_k / crate::gemm::hopper::k_inst(p.dtype);
                c.op("WARPGROUP.ARRIVE", &[], &[]);
                for _ in 0..steps {
                    c.op(&name, &[dot], &[rr(GA, 2), rr(GB, 2), dot]);
                }
                c.op_imm("WARPGROUP.DEPBAR.LE", &[], &[], 0);
            }
            Mma::Sync => self.mma_sync(c, stage, dot),
        }
        if fetch {
            self.copies(c, &kt.clone().plus(s - 1), (stage + s - 1) % s);
        } else {
            c.op("LDGDEPBAR", &[], &[]);
        }
        if p.block_scaled {
            let sc = SCALE + 3 * stage as u8;
            c.op("FMUL", &[r(SCALE_PRODUCT)], &[r(sc), r(sc + 2)]);
            c.op("FMUL", &[r(SCALE_PRODUCT + 1)], &[r(sc + 1), r(sc + 2)]);
            // acc += dot · a_scale(row) · b_scale: registers 2k, 2k+1 hold row lane/4, the next
            // two row lane/4 + 8 (the accumulator layout of both mma forms).
            for i in 0..acc_n {
                let half = (i / 2) % 2;
                c.op(
                    "FFMA",
                    &[r(ACC + i as u8)],
                    &[r(ACC + (acc_n + i) as u8), r(SCALE_PRODUCT + half as u8), r(ACC + i as u8)],
                );
            }
        }
        c.op("IADD3", &[rr(GA, 2)], &[rr(GA, 2)]).op("IADD3", &[rr(GB, 2)], &[rr(GB, 2)]);
        c.op("ISETP.NE.AND", &[pred(1)], &[r(CNT)]).op("BRA", &[], &[pred(1)]);
    }

    /// One k-tile of `mma.sync`: per k-step the warp's A fragment (16 rows, `LDSM.x4`), its B
    /// fragments (8 columns each, two per `LDSM.x4`) and one HMMA per 8 columns.
    fn mma_sync(&self, c: &mut Code, stage: u64, dot: gpusim_isa::RegRange) {
        let (pl, p) = (self.pl, self.p);
        let name = crate::gemm::ampere::mma_name(p.dtype);
        let steps = pl.c.block_k / crate::gemm::hopper::k_inst(p.dtype);
        let nn = pl.cols_w / 8;
        let base = stage * pl.stage_bytes;
        let a_bytes = pl.c.block_m * pl.row_bytes;
        for kk in 0..steps {
            // A: the warp's 16 rows, 512 B per LDSM.x4 (conflict-free: XOR-swizzled).
            let a = self.rows(Addr::at(base + kk * 512), steps * 32);
            c.mem("LDSM.16.M88.4", &[rr(FRAG, 4)], &[r(OUTP)], a);
            // B: 8 columns × one k-step (256 B) per fragment, two per LDSM.x4.
            for j in 0..nn.div_ceil(2) {
                let b = Addr::at(base + a_bytes + ((self.col0() / 8 + 2 * j) * steps + kk) * 256);
                let x = if 2 * j + 1 < nn { "LDSM.16.M88.4" } else { "LDSM.16.M88.2" };
                c.mem(x, &[rr(FRAG + 4 + 4 * (j % 2) as u8, 4)], &[r(OUTP)], b);
            }
            for j in 0..nn {
                let d = rr(dot.first.0 as u8 + (4 * j) as u8, 4);
                let b = rr(FRAG + 4 + 4 * ((j / 2) % 2) as u8 + 2 * (j % 2) as u8, 2);
                c.op(name, &[d], &[rr(FRAG, 4), b, d]);
            }
        }
    }

    /// Router weight (GEMM2), conversion to 16 bits, and the masked stores of the valid rows.
    fn epilogue(&self, c: &mut Code, halves: Var) {
        let (pl, p) = (self.pl, self.p);
        let acc_n = pl.cols_w / 2;
        if p.mul_routed_weight {
            // The router weight of the lane's two rows (sorted position mb·BM + row).
            let lanes: Vec<i64> = (0..32).map(|l| (l / 4) * 4).collect();
            for h in 0..2u64 {
                let a = Addr::at(pl.at.router_weights + h * 32).term(self.mb, pl.c.block_m as i64 * 4);
                c.mem_lanes("LDG.E", &[r(SCALE + h as u8)], &[rr(GA, 2)], self.rows(a, 4), &lanes);
            }
            for i in 0..acc_n {
                let half = (i / 2) % 2;
                c.op("FMUL", &[r(ACC + i as u8)], &[r(ACC + i as u8), r(SCALE + half as u8)]);
            }
        }
        for q in 0..acc_n / 2 {
            c.op(p.dtype.pack(), &[r(ACC + q as u8)], &[rr(ACC + 2 * q as u8, 2)]);
        }
        // C rows at the block's padded position mb·BM + row (+ 8 for the second half); lane l
        // stores row l/4, columns 2·(l%4) + {0, 1} of each group of 8.
        let np = p.n.div_ceil(pl.c.block_n) * pl.c.block_n;
        let ldc = np * pl.oe;
        let lanes: Vec<i64> = (0..32).map(|l| ((l / 4) * ldc + (l % 4) * 2 * pl.oe) as i64).collect();
        let h = c.begin_param(halves);
        for cg in 0..pl.cols_w / 8 {
            let a = Addr::at(pl.at.c + (self.col0() + 8 * cg) * pl.oe)
                .term(self.mb, pl.c.block_m as i64 * ldc as i64)
                .term(self.nb, (pl.c.block_n * pl.oe) as i64)
                .term(h, 8 * ldc as i64);
            c.mem_lanes("STG.E", &[], &[rr(OUTP, 2), r(ACC + 2 * cg as u8)], self.rows(a, ldc), &lanes);
        }
        c.end();
    }
}

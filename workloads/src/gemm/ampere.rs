//! The sm_80 multistage GEMM (CUTLASS `MmaMultistage`, cuBLAS `ampere_*_s16816gemm_*`): every
//! thread copies its share of the A and B tiles with `cp.async`, fragments come from shared
//! memory by `ldmatrix`, `mma.sync` accumulates in registers. The SASS is in the module
//! documentation of [`super`].

use std::collections::BTreeMap;

use gpusim_configs::Arch;
use gpusim_isa::{Dim3, KernelInfo, OpTable, Program, Trace, Var};

use super::row_lanes;
use super::{AmpereRecipe, Dtype, GemmProblem, Geom, ctas_per_sm, reduce, round_up};
use crate::asm::{Addr, Affine, Code, assemble, p as pred, r, rr, sb};

/// Everything derived from a recipe and a problem.
pub(crate) struct Plan {
    pub g: Geom,
    pub r: AmpereRecipe,
    pub dtype: Dtype,
    pub stages: u64,
    pub wm_count: u64,
    pub wn_count: u64,
    pub warps: u64,
    pub threads: u64,
    /// k-groups (MMA steps) per k-tile.
    pub kg: u64,
    /// MMA tiles per warp along M (16 rows) and N (8 columns).
    pub mn: u64,
    pub nn: u64,
    /// LDGSTS per thread per stage for A and B.
    pub a_inst: u64,
    pub b_inst: u64,
    /// B is `K×N` with N contiguous (`LDSM.16.MT88.4`), else `N×K`.
    pub b_rowmajor: bool,
    pub a_bytes: u64,
    pub stage_bytes: u64,
    pub smem: u64,
    pub regs: u64,
    /// Register bases.
    pub acc: u8,
    pub fa: u8,
    pub fb: u8,
    /// The grid and the tile coordinates as affine functions of the CTA index.
    pub grid: Dim3,
    pub mt: Affine,
    pub nt: Affine,
    pub zt: Affine,
}

pub(crate) fn mma_name(d: Dtype) -> &'static str {
    match d {
        Dtype::Bf16 => "HMMA.16816.F32.BF16",
        Dtype::Fp16 => "HMMA.16816.F32",
        Dtype::Tf32 => "HMMA.1688.F32.TF32",
        Dtype::Fp8 => "HMMA.16832.F32.E4M3.E4M3",
    }
}

fn pow2_between(x: u64, lo: u64, hi: u64) -> bool {
    x.is_power_of_two() && (lo..=hi).contains(&x)
}

pub(crate) fn plan(arch: &Arch, p: &GemmProblem, rc: &AmpereRecipe) -> Result<Plan, String> {
    if arch.compute_capability < 80 {
        return Err(format!(
            "the ampere recipe needs compute capability 8.0; {} is {}",
            arch.name, arch.compute_capability
        ));
    }
    if p.dtype == Dtype::Fp8 && arch.compute_capability < 89 {
        return Err(format!("fp8 mma.sync needs compute capability 8.9; {} is {}", arch.name, arch.compute_capability));
    }
    if p.block_scaled {
        return Err("block-scaled fp8 is a hopper recipe (DeepGEMM style)".into());
    }
    let (bm, bn, bk) = (rc.cta_m as u64, rc.cta_n as u64, rc.cta_k as u64);
    let (wm, wn) = (rc.warp_m as u64, rc.warp_n as u64);
    if wm == 0 || wn == 0 || !wm.is_multiple_of(16) || !wn.is_multiple_of(16) {
        return Err(format!("warp tile {wm}x{wn} must be multiples of 16"));
    }
    if bm == 0 || bn == 0 || !bm.is_multiple_of(wm) || !bn.is_multiple_of(wn) {
        return Err(format!("CTA tile {bm}x{bn} must be a multiple of the warp tile {wm}x{wn}"));
    }
    let (wm_count, wn_count) = (bm / wm, bn / wn);
    let warps = wm_count * wn_count;
    if warps > 32 {
        return Err(format!("{warps} warps per CTA; at most 32"));
    }
    let threads = 32 * warps;
    let kstep = match p.dtype {
        Dtype::Bf16 | Dtype::Fp16 => 16,
        Dtype::Tf32 => 8,
        Dtype::Fp8 => 32,
    };
    if bk == 0 || !bk.is_multiple_of(2 * kstep) {
        return Err(format!("cta_k = {bk} must be a multiple of {} for {} (two mma k-steps)", 2 * kstep, p.dtype));
    }
    let stages = rc.stages as u64;
    if !(2..=8).contains(&stages) {
        return Err(format!("stages = {stages} must be between 2 and 8"));
    }
    if !rc.swizzle.is_power_of_two() || rc.swizzle > 16 {
        return Err(format!("swizzle = {} must be 1, 2, 4, 8 or 16", rc.swizzle));
    }
    let elt = p.dtype.bytes();
    let b_rowmajor = matches!(p.dtype, Dtype::Bf16 | Dtype::Fp16);
    let a_row = bk * elt;
    let b_row = if b_rowmajor { bn * elt } else { bk * elt };
    if !pow2_between(a_row, 16, 512) || !pow2_between(b_row, 16, 512) {
        return Err(format!(
            "the copy rows (A: {a_row} B, B: {b_row} B) must be powers of two from 16 to 512 bytes: change cta_k or cta_n"
        ));
    }
    let (a_tile, b_tile) = (bm * bk * elt, bn * bk * elt);
    let per = 16 * threads;
    if !a_tile.is_multiple_of(per) || !b_tile.is_multiple_of(per) {
        return Err(format!(
            "the A ({a_tile} B) and B ({b_tile} B) tiles must be multiples of 16 bytes × {threads} threads"
        ));
    }
    let g = Geom::new(p, bm, bn, bk, rc.split_k as u64)?;
    let (mn, nn) = (wm / 16, wn / 8);
    let acc_regs = 4 * mn * nn;
    let frag = 2 * (4 * mn + 2 * nn);
    let used = 16 + acc_regs + frag;
    if used > 240 {
        return Err(format!("warp tile {wm}x{wn} needs {used} registers per thread; at most 240"));
    }
    if g.oe == 2 && acc_regs / 2 > frag {
        return Err("internal: the packed epilogue does not fit the fragment registers".into());
    }
    let regs = round_up(used + 24, 8).min(arch.sm.max_registers_per_thread as u64).min(255);
    let stage_bytes = a_tile + b_tile;
    let staging = warps * wm * wn * g.oe;
    let smem = (stages * stage_bytes).max(staging);
    if smem > arch.sm.shared_mem_per_cta.0 {
        return Err(format!(
            "{stages} stages of {stage_bytes} B need {smem} B of shared memory; a CTA may have {} on {}",
            arch.sm.shared_mem_per_cta.0, arch.name
        ));
    }
    if ctas_per_sm(arch, threads, regs, smem) == 0 {
        return Err(format!("a CTA of {threads} threads × {regs} registers and {smem} B does not fit an SM"));
    }
    // Rasterisation: CUTLASS's identity swizzle as a 3-D grid when one k-slice, else plain.
    let mut swz = rc.swizzle as u64;
    while swz > 1 && !g.tn.is_multiple_of(swz) {
        swz /= 2;
    }
    let (grid, mt, nt, zt) = if g.z == 1 && swz > 1 {
        (
            Dim3::new(swz as u32, g.tm as u32, (g.tn / swz) as u32),
            Affine::konst(0).with(Var::CtaY, 1),
            Affine::konst(0).with(Var::CtaX, 1).with(Var::CtaZ, swz),
            Affine::konst(0),
        )
    } else {
        (
            Dim3::new(g.tm as u32, g.tn as u32, g.z as u32),
            Affine::konst(0).with(Var::CtaX, 1),
            Affine::konst(0).with(Var::CtaY, 1),
            Affine::konst(0).with(Var::CtaZ, 1),
        )
    };
    let acc = 16u8;
    let fa = acc + acc_regs as u8;
    let fb = fa + (2 * 4 * mn) as u8;
    Ok(Plan {
        g,
        r: *rc,
        dtype: p.dtype,
        stages,
        wm_count,
        wn_count,
        warps,
        threads,
        kg: bk / kstep,
        mn,
        nn,
        a_inst: a_tile / per,
        b_inst: b_tile / per,
        b_rowmajor,
        a_bytes: a_tile,
        stage_bytes,
        smem,
        regs,
        acc,
        fa,
        fb,
        grid,
        mt,
        nt,
        zt,
    })
}

pub(crate) fn generate(arch: &Arch, p: &GemmProblem, rc: &AmpereRecipe) -> Result<Trace, String> {
    let pl = plan(arch, p, rc)?;
    let mut ops = OpTable::new();
    let programs: Vec<Program> = (0..pl.wn_count).map(|wn| program(&pl, &mut ops, wn)).collect();
    // Warp w = wm + wm_count·wn runs the program of its column of warps.
    let default = (0..pl.warps).map(|w| (w / pl.wm_count) as u32).collect();
    let split = if pl.g.split > 1 { format!("_splitk{}", pl.g.split) } else { String::new() };
    let name = format!(
        "ampere_{}_s{}gemm_{}x{}x{}_stages{}_warps{}x{}{}",
        p.dtype,
        match p.dtype {
            Dtype::Tf32 => "1688",
            Dtype::Fp8 => "16832",
            _ => "16816",
        },
        pl.g.bm,
        pl.g.bn,
        pl.g.bk,
        pl.stages,
        pl.wm_count,
        pl.wn_count,
        split
    );
    let mut info = KernelInfo::new(0, name, pl.grid, Dim3::new(pl.threads as u32, 1, 1));
    info.regs_per_thread = pl.regs as u32;
    info.smem_bytes = pl.smem as u32;
    info.sm_version = arch.compute_capability.max(80);
    let mut kernels = vec![assemble(info, ops, programs, default, BTreeMap::new())?];
    if pl.g.split > 1 {
        kernels.push(reduce::kernel_trace(1, &pl.g, p.dtype, info_sm(arch))?);
    }
    Ok(Trace { kernels })
}

fn info_sm(arch: &Arch) -> u32 {
    arch.compute_capability.max(80)
}

/// Registers of the setup code.
const TID: u8 = 0;
const CTAID: u8 = 1;
const GA: u8 = 2;
const GB: u8 = 4;
const SW: u8 = 6;
const SR: u8 = 7;
const CNT: u8 = 8;
const OUTP: u8 = 10;

/// Global address of the A or B copy `q` (0..a_inst+b_inst) of warp `warp` for k-tile `kt`.
fn copy_addr(pl: &Plan, q: u64, kt: &Affine) -> (Addr, Vec<i64>) {
    let g = &pl.g;
    let e = g.elt;
    let lda = g.batch * g.kp; // elements; batches side by side along K
    if q < pl.a_inst {
        let row_bytes = g.bk * e;
        let rows_inst = 32 / (row_bytes / 16);
        let rows_pass = pl.warps * rows_inst;
        let addr = Addr::at(g.regions.a + q * rows_pass * lda * e)
            .index(&pl.mt, g.bm * lda * e)
            .index(&pl.zt, g.kps * g.bk * e)
            .index(kt, g.bk * e)
            .term(Var::Warp, (rows_inst * lda * e) as i64);
        (addr, row_lanes(row_bytes, lda * e))
    } else {
        let q = q - pl.a_inst;
        if pl.b_rowmajor {
            // B is K×N (rows of k), N contiguous; batch/split planes stack along K.
            let row_bytes = g.bn * e;
            let rows_inst = 32 / (row_bytes / 16);
            let rows_pass = pl.warps * rows_inst;
            let ldb = g.np * e;
            let addr = Addr::at(g.regions.b + q * rows_pass * ldb)
                .index(&pl.nt, g.bn * e)
                .index(&pl.zt, g.kps * g.bk * ldb)
                .index(kt, g.bk * ldb)
                .term(Var::Warp, (rows_inst * ldb) as i64);
            (addr, row_lanes(row_bytes, ldb))
        } else {
            let row_bytes = g.bk * e;
            let rows_inst = 32 / (row_bytes / 16);
            let rows_pass = pl.warps * rows_inst;
            let addr = Addr::at(g.regions.b + q * rows_pass * lda * e)
                .index(&pl.nt, g.bn * lda * e)
                .index(&pl.zt, g.kps * g.bk * e)
                .index(kt, g.bk * e)
                .term(Var::Warp, (rows_inst * lda * e) as i64);
            (addr, row_lanes(row_bytes, lda * e))
        }
    }
}

fn copy(pl: &Plan, c: &mut Code, q: u64, kt: &Affine) {
    let (addr, lanes) = copy_addr(pl, q, kt);
    c.mem_lanes("LDGSTS.E.BYPASS.128", &[], &[r(SW), rr(if q < pl.a_inst { GA } else { GB }, 2)], addr, &lanes);
}

/// Loads the fragments of k-group `kk` of the tile in `stage` into fragment set `set`.
fn fragments(pl: &Plan, c: &mut Code, wn: u64, stage: u64, kk: u64, set: u64) {
    let base = stage * pl.stage_bytes;
    // A: warp row wm = warp - wm_count·wn; 512 B (16×16 16-bit) per ldmatrix.x4, conflict-free
    // (the XOR-swizzled layout CUTLASS uses).
    let per_warp = pl.mn * pl.kg * 512;
    for i in 0..pl.mn {
        let addr = Addr::at(base + (i * pl.kg + kk) * 512)
            .plus((pl.wm_count * wn * per_warp).wrapping_neg())
            .term(Var::Warp, per_warp as i64);
        let dst = rr(pl.fa + (set * 4 * pl.mn + 4 * i) as u8, 4);
        c.mem("LDSM.16.M88.4", &[dst], &[r(SR)], addr);
    }
    let bname = if pl.b_rowmajor { "LDSM.16.MT88.4" } else { "LDSM.16.M88.4" };
    for j in 0..pl.nn / 2 {
        let addr = Addr::at(base + pl.a_bytes + ((wn * pl.nn / 2 + j) * pl.kg + kk) * 512);
        let dst = rr(pl.fb + (set * 2 * pl.nn + 4 * j) as u8, 4);
        c.mem(bname, &[dst], &[r(SR)], addr);
    }
}

/// The MMAs of one k-group on fragment set `set` (serpentine over N, as CUTLASS orders them).
fn mmas(pl: &Plan, c: &mut Code, set: u64) {
    let name = mma_name(pl.dtype);
    for i in 0..pl.mn {
        for jj in 0..pl.nn {
            let j = if i % 2 == 0 { jj } else { pl.nn - 1 - jj };
            let acc = rr(pl.acc + (4 * (i * pl.nn + j)) as u8, 4);
            let a = rr(pl.fa + (set * 4 * pl.mn + 4 * i) as u8, 4);
            let b = rr(pl.fb + (set * 2 * pl.nn + 2 * j) as u8, 2);
            c.op(name, &[acc], &[a, b, acc]);
        }
    }
}

/// One k-tile: `kt` (its stage is `kt % S`), issuing the copies of tile `kt + S − 1` when `fetch`.
fn k_tile(pl: &Plan, c: &mut Code, wn: u64, stage: u64, kt: &Affine, fetch: bool) {
    let s = pl.stages;
    let nq = pl.a_inst + pl.b_inst;
    let groups = pl.kg - 1; // copies are spread over k-groups 0..KG-2
    let next_tile = kt.clone().plus(s - 1);
    for kk in 0..pl.kg {
        // Fragments of the next k-group (the next tile's first group at the end).
        let (ns, nk) = if kk + 1 < pl.kg { (stage, kk + 1) } else { ((stage + 1) % s, 0) };
        fragments(pl, c, wn, ns, nk, (kk + 1) % 2);
        if fetch && kk < groups {
            for q in (kk * nq / groups)..((kk + 1) * nq / groups) {
                copy(pl, c, q, &next_tile);
            }
        }
        mmas(pl, c, kk % 2);
        if kk + 2 == pl.kg {
            c.op("LDGDEPBAR", &[], &[]);
            c.op_imm("DEPBAR.LE", &[sb(0)], &[], s as i32 - 2);
            c.op("BAR.SYNC.DEFER_BLOCKING", &[], &[]);
        }
    }
    c.op("IADD3", &[rr(GA, 2)], &[rr(GA, 2)]).op("IADD3", &[rr(GB, 2)], &[rr(GB, 2)]);
    c.op("IADD3", &[r(CNT)], &[r(CNT)]).op("ISETP.NE.AND", &[pred(0)], &[r(CNT)]);
    c.op("BRA", &[], &[pred(0)]);
}

fn program(pl: &Plan, ops: &mut OpTable, wn: u64) -> Program {
    let mut c = Code::new(ops, &format!("mma_wn{wn}"));
    let s = pl.stages;
    let kt_count = pl.g.kps;
    c.op("S2R", &[r(TID)], &[]).op("S2R", &[r(CTAID)], &[]);
    c.op("IMAD.WIDE", &[rr(GA, 2)], &[r(CTAID), r(TID)]).op("IMAD.WIDE", &[rr(GB, 2)], &[r(CTAID), r(TID)]);
    c.op("IMAD.SHL.U32", &[r(SW)], &[r(TID)]).op("IMAD.SHL.U32", &[r(SR)], &[r(TID)]);
    c.op("MOV", &[r(CNT)], &[]);
    // Prologue: tiles 0..S-2, one commit group each (empty when there are fewer tiles).
    for t in 0..s - 1 {
        if t < kt_count {
            for q in 0..pl.a_inst + pl.b_inst {
                copy(pl, &mut c, q, &Affine::konst(t));
            }
        }
        c.op("LDGDEPBAR", &[], &[]);
    }
    c.op_imm("DEPBAR.LE", &[sb(0)], &[], s as i32 - 2);
    c.op("BAR.SYNC.DEFER_BLOCKING", &[], &[]);
    fragments(pl, &mut c, wn, 0, 0, 0);
    // Tiles that fetch tile t+S-1 run in a loop of rounds of S (stage addresses repeat), the
    // last S-1 tiles fetch nothing.
    let fetching = kt_count.saturating_sub(s - 1);
    let rounds = fetching / s;
    if rounds > 0 {
        let v = c.begin(rounds as u32);
        for k in 0..s {
            k_tile(pl, &mut c, wn, k, &Affine::konst(k).with(v, s), true);
        }
        c.end();
    }
    for t in rounds * s..kt_count {
        k_tile(pl, &mut c, wn, t % s, &Affine::konst(t), t < fetching);
    }
    c.op_imm("DEPBAR.LE", &[sb(0)], &[], 0);
    c.op("BAR.SYNC.DEFER_BLOCKING", &[], &[]);
    epilogue(pl, &mut c, wn);
    c.op("EXIT", &[], &[]);
    c.finish()
}

/// Accumulators → (F2FP) → shared staging → coalesced 16-byte global stores of the warp tile.
fn epilogue(pl: &Plan, c: &mut Code, wn: u64) {
    let g = &pl.g;
    let (wm, wnn) = (pl.r.warp_m as u64, pl.r.warp_n as u64);
    let acc_regs = 4 * pl.mn * pl.nn;
    let vals = if g.oe == 2 {
        for k in 0..acc_regs / 2 {
            let src = rr(pl.acc + (2 * k) as u8, 2);
            c.op(pl.dtype.pack(), &[r(pl.fa + k as u8)], &[src]);
        }
        pl.fa
    } else {
        pl.acc
    };
    let q_count = wm * wnn * g.oe / 512;
    let warp_bytes = wm * wnn * g.oe;
    for q in 0..q_count {
        let addr = Addr::at(q * 512).term(Var::Warp, warp_bytes as i64);
        c.mem("STS.128", &[], &[r(SR), rr(vals + (4 * q) as u8, 4)], addr);
    }
    c.op("BAR.SYNC.DEFER_BLOCKING", &[], &[]);
    for q in 0..q_count {
        let addr = Addr::at(q * 512).term(Var::Warp, warp_bytes as i64);
        c.mem("LDS.128", &[rr(vals + (4 * q) as u8, 4)], &[r(SR)], addr);
    }
    let ldc = g.np * g.oe;
    let row_bytes = wnn * g.oe;
    let rows_inst = 32 / (row_bytes / 16);
    let lanes = row_lanes(row_bytes, ldc);
    for q in 0..q_count {
        // Row of the warp tile: wm_i·warp_m + q·rows_inst with wm_i = warp − wm_count·wn.
        let addr = Addr::at(g.out_base() + q * rows_inst * ldc + wn * wnn * g.oe)
            .plus((pl.wm_count * wn * wm * ldc).wrapping_neg())
            .term(Var::Warp, (wm * ldc) as i64)
            .index(&pl.mt, g.bm * ldc)
            .index(&pl.nt, g.bn * g.oe)
            .index(&pl.zt, g.mp * ldc);
        c.mem_lanes("STG.E.128", &[], &[rr(OUTP, 2), rr(vals + (4 * q) as u8, 4)], addr, &lanes);
    }
}

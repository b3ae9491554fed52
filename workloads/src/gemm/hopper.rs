//! The sm_90a warp-specialised GEMM (CUTLASS `KernelTmaWarpSpecializedCooperative` /
//! `...Persistent`, DeepGEMM for block-scaled fp8): a producer warpgroup feeds a ring of shared
//! memory stages by TMA, consumer warpgroups run `wgmma` on them, mbarriers hand the stages over.
//! The SASS and the simulator conventions are in the module documentation of [`super`].

use std::collections::BTreeMap;
use std::sync::Arc;

use gpusim_configs::Arch;
use gpusim_isa::program::CtaParam;
use gpusim_isa::{Dim3, KernelInfo, OpTable, Program, Trace, Var};

use super::row_lanes;
use super::{Dtype, Epilogue, GemmProblem, Geom, HopperRecipe, concurrent_ctas, ctas_per_sm, reduce, round_up};
use crate::asm::{Addr, Affine, Code, assemble, p as pred, r, rr, urr};

/// Everything derived from a recipe and a problem.
pub(crate) struct Plan {
    pub g: Geom,
    pub r: HopperRecipe,
    pub dtype: Dtype,
    pub block_scaled: bool,
    pub stages: u64,
    pub cons: u64,
    /// Blocks of 64 rows per consumer warpgroup.
    pub rblk: u64,
    /// wgmma instructions per stage per row block.
    pub mmas: u64,
    pub mma: String,
    pub cm: u64,
    pub cn: u64,
    pub multicast: bool,
    pub tile_a: u64,
    pub tile_b: u64,
    pub tile_sf: u64,
    pub stage_bytes: u64,
    pub epi_base: u64,
    /// Bytes one consumer warp stores per row block and 32-column subtile.
    pub chunk: u64,
    pub bar_base: u64,
    pub sfb_addr: u64,
    pub smem: u64,
    pub regs: u64,
    pub threads: u64,
    /// The persistent grid: CTA (x, y, z) runs tiles (x + gx·i, y + gy·j, z + gz·k).
    pub gx: u64,
    pub gy: u64,
    pub gz: u64,
    /// Tiles of the busiest CTA (waves).
    pub waves: u64,
    /// M-grouped (MoE) GEMM: which expert each m-block belongs to and whether it does work.
    pub grouping: Option<Grouping>,
}

/// The M-grouped form of the recipe (DeepGEMM's grouped GEMMs, [`super::grouped`]): A holds the
/// groups' rows one after another in m-blocks of `cta_m`, B one `N×K` matrix per group. One CTA
/// per tile, in the scheduler's order: grid `(gx, tiles_n, ⌈tiles_m/gx⌉)` with `gx` = 16 m-blocks
/// (DeepGEMM's swizzle group: m fastest within 16 m-blocks, then n, then the next 16), so m-block
/// `cta.x + gx·cta.z`. Each CTA reads two per-CTA parameters from tables indexed by its m-block:
/// `p0` its expert (B is at `b + p0·N'·K'`), `p1` 1 when the m-block has valid rows, 0 when it is
/// padding (a masked group's tiles past its valid count): such a CTA initialises its barriers and
/// exits, loading and computing nothing.
#[derive(Clone, Debug)]
pub(crate) struct Grouping {
    pub groups: u64,
    /// Expert of each m-block (padded with 0 to `gx·gz` entries).
    pub expert: Arc<[i64]>,
    /// 1 for an m-block that computes, 0 for padding (same length).
    pub active: Arc<[i64]>,
    /// The persistent form's tiles in the scheduler's order (`None`: one CTA per m-block).
    pub tiles: Option<GroupTiles>,
    /// A short name for the kernel (`contiguous`, `masked`).
    pub layout: &'static str,
}

/// The tiles of a persistent grouped GEMM in the order its CTAs take them (CTA `c` of `G` runs
/// tiles `c, c + G, ...`): each tile's expert, m-block and n-block (same lengths, ≥ 1).
#[derive(Clone, Debug)]
pub(crate) struct GroupTiles {
    pub expert: Arc<[i64]>,
    pub m: Arc<[i64]>,
    pub n: Arc<[i64]>,
}

pub(crate) fn mma_name(d: Dtype, n: u64) -> String {
    match d {
        Dtype::Bf16 => format!("HGMMA.64x{n}x16.F32.BF16"),
        Dtype::Fp16 => format!("HGMMA.64x{n}x16.F32"),
        Dtype::Tf32 => format!("HGMMA.64x{n}x8.F32.TF32"),
        Dtype::Fp8 => format!("QGMMA.64x{n}x32.F32.E4M3.E4M3"),
    }
}

/// K of one warpgroup MMA.
pub(crate) fn k_inst(d: Dtype) -> u64 {
    match d {
        Dtype::Bf16 | Dtype::Fp16 => 16,
        Dtype::Tf32 => 8,
        Dtype::Fp8 => 32,
    }
}

/// Registers per thread a launch of `threads` gets (what the kernel is compiled with).
fn launch_regs(threads: u64) -> u64 {
    ((65536 / threads.max(1)) / 8 * 8).min(248)
}

/// How many of the tiles `x, x + g, x + 2g, ...` lie below `t`.
fn count(x: u64, g: u64, t: u64) -> u64 {
    if x < t { (t - x).div_ceil(g) } else { 0 }
}

pub(crate) fn plan(arch: &Arch, p: &GemmProblem, rc: &HopperRecipe) -> Result<Plan, String> {
    plan_grouped(arch, p, rc, None)
}

/// The plan of `rc` for `p`, M-grouped when `grouping` is given (`p.m` is then the rows of all
/// m-blocks, `p.batch` 1).
pub(crate) fn plan_grouped(
    arch: &Arch,
    p: &GemmProblem,
    rc: &HopperRecipe,
    grouping: Option<Grouping>,
) -> Result<Plan, String> {
    if arch.compute_capability < 90 {
        return Err(format!(
            "the hopper recipe (TMA, wgmma) needs compute capability 9.0; {} is {}",
            arch.name, arch.compute_capability
        ));
    }
    let (bm, bn, bk) = (rc.cta_m as u64, rc.cta_n as u64, rc.cta_k as u64);
    let cons = rc.consumers as u64;
    if !(1..=2).contains(&cons) {
        return Err(format!("consumers = {cons} must be 1 or 2"));
    }
    if bm == 0 || !bm.is_multiple_of(64 * cons) || bm / (64 * cons) > 2 {
        return Err(format!("cta_m = {bm} must be 64, or 128 rows per consumer warpgroup ({cons} of them)"));
    }
    let rblk = bm / (64 * cons);
    if bn == 0 || bn > 256 || !bn.is_multiple_of(32) {
        return Err(format!("cta_n = {bn} must be a multiple of 32 up to 256 (the wgmma N)"));
    }
    let ki = k_inst(p.dtype);
    let elt = p.dtype.bytes();
    if bk == 0 || !bk.is_multiple_of(ki) || !(bk * elt).is_multiple_of(64) {
        return Err(format!("cta_k = {bk} must be a multiple of {ki} and of 64 bytes of {}", p.dtype));
    }
    if p.block_scaled && bk != 128 {
        return Err(format!("block-scaled fp8 works on k-blocks of 128 (cta_k = {bk})"));
    }
    let stages = rc.stages as u64;
    if !(2..=8).contains(&stages) {
        return Err(format!("stages = {stages} must be between 2 and 8"));
    }
    let (cm, cn) = (rc.cluster_m.max(1) as u64, rc.cluster_n.max(1) as u64);
    if rc.cluster_m == 0 || rc.cluster_n == 0 {
        return Err("cluster_m and cluster_n must be at least 1".into());
    }
    if cm * cn > arch.sm.max_cluster_size as u64 {
        return Err(format!(
            "a {cm}x{cn} cluster exceeds the {} CTAs a cluster may have on {}",
            arch.sm.max_cluster_size, arch.name
        ));
    }
    let acc = rblk * bn / 2 * if p.block_scaled { 2 } else { 1 };
    if acc > 168 {
        return Err(format!("{acc} accumulator registers per consumer thread; at most 168 (use a smaller tile)"));
    }
    let mut g = Geom::new(p, bm, bn, bk, rc.split_k as u64)?;
    if let Some(gr) = &grouping {
        if g.z != 1 || cm != 1 {
            return Err("a grouped GEMM has no batch or split-K, and multicasts only A (cluster_m = 1)".into());
        }
        // One B per group.
        let a = g.mp * g.kp * g.elt;
        let b = gr.groups * g.np * g.kp * g.elt;
        let c = g.mp * g.np * p.dtype.out_bytes();
        let sfa = if p.block_scaled { g.mp * (g.kp / 128).max(1) * 4 } else { 0 };
        g.regions = super::Regions::new([a, b, c, 0, sfa]);
    }
    let (tile_a, tile_b) = (bm * bk * elt, bn * bk * elt);
    let multicast = rc.multicast && cm * cn > 1;
    if multicast && (!tile_b.is_multiple_of(cm * 16) || !tile_a.is_multiple_of(cn * 16)) {
        return Err("the tiles do not split evenly over the cluster for multicast".into());
    }
    let tile_sf = if p.block_scaled { bm * 4 } else { 0 };
    let stage_bytes = tile_a + tile_b + tile_sf;
    let chunk = 16 * 32 * g.oe;
    let epi_bytes = match rc.epilogue {
        Epilogue::Direct => 0,
        _ => cons * 4 * rblk * chunk * 2,
    };
    let epi_base = stages * stage_bytes;
    let bar_base = epi_base + epi_bytes;
    let sfb_addr = bar_base + 16 * stages;
    let smem = round_up(sfb_addr + if p.block_scaled { 64 } else { 0 }, 128);
    if smem > arch.sm.shared_mem_per_cta.0 {
        return Err(format!(
            "{stages} stages of {stage_bytes} B and a {epi_bytes} B epilogue buffer need {smem} B of shared memory; a CTA \
             may have {} on {}",
            arch.sm.shared_mem_per_cta.0, arch.name
        ));
    }
    let warps = 4 + 4 * cons;
    let threads = 32 * warps;
    let regs = launch_regs(threads).min(arch.sm.max_registers_per_thread as u64);
    let per_sm = ctas_per_sm(arch, threads, regs, smem);
    if per_sm == 0 {
        return Err(format!("a CTA of {threads} threads × {regs} registers and {smem} B does not fit an SM"));
    }
    let gmax = concurrent_ctas(arch, per_sm, cm * cn);
    if gmax == 0 {
        return Err(format!("no {cm}x{cn} cluster fits in a GPC of {}", arch.name));
    }
    let (gxmax, gymax) = (round_up(g.tm, cm), round_up(g.tn, cn));
    let (gx, gy, gz) = if let Some(tiles) = grouping.as_ref().and_then(|gr| gr.tiles.as_ref()) {
        // One CTA per SM the kernel can hold at once, in whole clusters along y, at most one per
        // tile (pairs of tiles under multicast).
        let t = tiles.m.len() as u64;
        let ctas = (gmax.min(round_up(t, cn)) / cn).max(1);
        (ctas, cn, 1)
    } else if grouping.is_some() {
        let gx = g.tm.min(16);
        (gx, gymax, g.tm.div_ceil(gx))
    } else if !rc.persistent {
        (gxmax, gymax, g.z)
    } else {
        // Raster widths: the swizzle's, or every multiple of the cluster's M up to the grid's
        // (and to the wave's: a wider raster leaves no room for a cluster's column, so the
        // search below would take none; a grid of 2^31 rows has millions of widths).
        let (lo, hi) = if rc.raster_swizzle > 0 {
            let x = round_up(rc.raster_swizzle as u64, cm).min(gxmax) / cm;
            (x, x)
        } else {
            (1, gxmax.min(gmax / cn) / cm)
        };
        let mut best: Option<(Triple, Triple)> = None;
        for gx in (lo..=hi).map(|i| i * cm) {
            for gy in (1..=gymax / cn).map(|i| i * cn) {
                if gx * gy > gmax {
                    break;
                }
                let gz = (gmax / (gx * gy)).min(g.z).max(1);
                let waves = g.tm.div_ceil(gx) * g.tn.div_ceil(gy) * g.z.div_ceil(gz);
                let touched = gz * (gx * bm + gy * bn);
                let key = (waves, touched, gmax - gx * gy * gz);
                if best.is_none_or(|(k, _)| key < k) {
                    best = Some((key, (gx, gy, gz)));
                }
            }
        }
        best.map(|(_, d)| d)
            .ok_or_else(|| format!("raster_swizzle = {} leaves no room for a wave", rc.raster_swizzle))?
    };
    let waves = if let Some(tiles) = grouping.as_ref().and_then(|gr| gr.tiles.as_ref()) {
        (tiles.m.len() as u64).div_ceil(gx * gy)
    } else if grouping.is_some() {
        (gx * gy * gz).div_ceil(gmax)
    } else {
        g.tm.div_ceil(gx) * g.tn.div_ceil(gy) * g.z.div_ceil(gz)
    };
    if let Some(gr) = &grouping
        && gr.tiles.is_none()
        && (gr.expert.len() as u64) < gx * gz
    {
        return Err(format!("{} expert entries for {} m-blocks", gr.expert.len(), gx * gz));
    }
    for (what, v) in [("x", gx), ("y", gy), ("z", gz)] {
        if v > u32::MAX as u64 {
            return Err(format!("grid {what} = {v} is too large"));
        }
    }
    Ok(Plan {
        g,
        r: *rc,
        dtype: p.dtype,
        block_scaled: p.block_scaled,
        stages,
        cons,
        rblk,
        mmas: bk / ki,
        mma: mma_name(p.dtype, bn),
        cm,
        cn,
        multicast,
        tile_a,
        tile_b,
        tile_sf,
        stage_bytes,
        epi_base,
        chunk,
        bar_base,
        sfb_addr,
        smem,
        regs,
        threads,
        gx,
        gy,
        gz,
        waves,
        grouping,
    })
}

/// Tile coordinates as affine indices.
struct Tile {
    mt: Affine,
    nt: Affine,
    z: Affine,
    /// The expert (grouped GEMMs): selects B.
    expert: Option<Var>,
}

/// Tiles per CTA along (z, n, m).
type Counts = (u64, u64, u64);

/// A key or a grid shape of three numbers.
type Triple = (u64, u64, u64);

pub(crate) fn generate(arch: &Arch, p: &GemmProblem, rc: &HopperRecipe) -> Result<Trace, String> {
    generate_plan(p, rc, plan(arch, p, rc)?)
}

/// The trace of a plan (dense or grouped).
pub(crate) fn generate_plan(p: &GemmProblem, rc: &HopperRecipe, pl: Plan) -> Result<Trace, String> {
    let mut ops = OpTable::new();
    let mut programs: Vec<Program> = Vec::new();
    let mut producers: BTreeMap<Counts, u32> = BTreeMap::new();
    let mut consumers: BTreeMap<Counts, u32> = BTreeMap::new();
    let idle = {
        programs.push(idle_program(&mut ops));
        0u32
    };
    let grid = Dim3::new(pl.gx as u32, pl.gy as u32, pl.gz as u32);
    let mut layouts: Vec<Vec<u32>> = Vec::with_capacity(grid.count() as usize);
    for lin in 0..grid.count() {
        let c = grid.unlinear(lin);
        let (x, y, z) = (c.x as u64, c.y as u64, c.z as u64);
        // CTAs of a multicast cluster run the same number of tiles: a peer whose tile falls
        // outside the matrix still loads (TMA fills out-of-bounds boxes) and multicasts its
        // slice, or the others' barriers would never get their bytes. Rank 0 has the most.
        let (cx, cy) = if pl.multicast { (x - x % pl.cm, y - y % pl.cn) } else { (x, y) };
        let counts = if pl.grouping.is_some() {
            (1, 1, 1)
        } else {
            (count(z, pl.gz, pl.g.z), count(cy, pl.gy, pl.g.tn), count(cx, pl.gx, pl.g.tm))
        };
        // One producer serves every rank of a cluster: its slice's offset is a per-CTA parameter.
        let pidx = *producers.entry(counts).or_insert_with(|| {
            programs.push(producer(&pl, &mut ops, counts));
            (programs.len() - 1) as u32
        });
        let cidx = *consumers.entry(counts).or_insert_with(|| {
            programs.push(consumer(&pl, &mut ops, counts));
            (programs.len() - 1) as u32
        });
        let mut l = vec![pidx, idle, idle, idle];
        l.extend(std::iter::repeat_n(cidx, 4 * pl.cons as usize));
        layouts.push(l);
    }
    // The most common layout is the default; the others are per-CTA overrides.
    let mut freq: BTreeMap<&Vec<u32>, u64> = BTreeMap::new();
    for l in &layouts {
        *freq.entry(l).or_insert(0) += 1;
    }
    let default =
        freq.iter().max_by_key(|(l, n)| (**n, std::cmp::Reverse(*l))).map(|(l, _)| (*l).clone()).unwrap_or_default();
    let overrides: BTreeMap<u64, Vec<u32>> =
        layouts.iter().enumerate().filter(|(_, l)| **l != default).map(|(i, l)| (i as u64, l.clone())).collect();

    let mut name = format!(
        "sm90_xmma_gemm{}_{}{}_{}x{}x{}_{}stage_{}cons_cluster{}x{}",
        pl.grouping.as_ref().map_or(String::new(), |gr| format!("_grouped_{}", gr.layout)),
        p.dtype,
        if p.block_scaled { "_blockscaled" } else { "" },
        pl.g.bm,
        pl.g.bn,
        pl.g.bk,
        pl.stages,
        pl.cons,
        pl.cm,
        pl.cn
    );
    if pl.multicast {
        name.push_str("_multicast");
    }
    if rc.persistent {
        name.push_str("_persistent");
    }
    if pl.g.split > 1 {
        name.push_str(&format!("_splitk{}", pl.g.split));
    }
    let mut info = KernelInfo::new(0, name, grid, Dim3::new(pl.threads as u32, 1, 1));
    info.cluster = Dim3::new(pl.cm as u32, pl.cn as u32, 1);
    info.regs_per_thread = pl.regs as u32;
    info.smem_bytes = pl.smem as u32;
    info.sm_version = 90;
    if pl.grouping.is_some() {
        // Every program's first parameter is the CTA's expert (`tile_loops`).
        info.cta_group = Some(gpusim_isa::CtaGroup { name: "expert".into(), param: 0 });
    }
    let mut kernels = vec![assemble(info, ops, programs, default, overrides)?];
    if pl.g.split > 1 {
        kernels.push(reduce::kernel_trace(1, &pl.g, p.dtype, 90)?);
    }
    Ok(Trace { kernels })
}

/// Shared address of the "full" (`empty == false`) or "empty" mbarrier of `stage`.
fn bar(pl: &Plan, empty: bool, stage: u64) -> Addr {
    Addr::at(pl.bar_base + 8 * (stage + if empty { pl.stages } else { 0 }))
}

/// Emits iterations `j` in `start..end` of a k-loop whose code depends on `j % stages`: whole
/// rounds of `stages` iterations in a loop, the rest written out.
fn iterations(c: &mut Code, start: u64, end: u64, s: u64, body: &mut dyn FnMut(&mut Code, &Affine, u64)) {
    let n = end.saturating_sub(start);
    let rounds = n / s;
    if rounds > 0 {
        let v = c.begin(rounds as u32);
        for k in 0..s {
            body(c, &Affine::konst(start + k).with(v, s), (start + k) % s);
        }
        c.end();
    }
    for j in start + rounds * s..end {
        body(c, &Affine::konst(j), j % s);
    }
}

/// The tiles of a CTA: loops over z, n and m blocks (a loop only where the CTA has more than one).
fn tile_loops(c: &mut Code, pl: &Plan, counts: Counts, body: &mut dyn FnMut(&mut Code, &Tile)) {
    let (cz, cnn, cmm) = counts;
    if cz == 0 || cnn == 0 || cmm == 0 {
        return;
    }
    if let Some(tiles) = pl.grouping.as_ref().and_then(|gr| gr.tiles.as_ref()) {
        // Persistent: CTA c = cta.x·gy + cta.y of G runs tiles c + G·i0 (the tile loop is the
        // program's outermost loop, i0); each tile's expert (p0, the kernel's CTA group),
        // m-block and n-block are tile parameters.
        let (gy, grid) = (pl.gy as i64, (pl.gx * pl.gy) as i64);
        let at = |c: &mut Code, t: &Arc<[i64]>| {
            let table = Some(c.table(t.clone()));
            c.param(CtaParam {
                table,
                ..CtaParam::constant(0).with(Var::CtaX, gy).with(Var::CtaY, 1).with(Var::Loop(0), grid)
            })
        };
        let expert = at(c, &tiles.expert);
        let mb = at(c, &tiles.m);
        let nb = at(c, &tiles.n);
        // Its tile count ⌈(T − c)/G⌉; a multicast cluster's CTAs all run rank 0's count (the
        // list has an even length, so the counts agree).
        let rank_y = if pl.multicast { 0 } else { -1 };
        let n = c.param(CtaParam {
            div: grid,
            lo: 0,
            ..CtaParam::constant(tiles.m.len() as i64 + grid - 1).with(Var::CtaX, -gy).with(Var::CtaY, rank_y)
        });
        let t = Tile {
            mt: Affine::konst(0).with(mb, 1),
            nt: Affine::konst(0).with(nb, 1),
            z: Affine::konst(0),
            expert: Some(expert),
        };
        c.begin_param(n);
        body(c, &t);
        c.end();
        return;
    }
    if let Some(gr) = &pl.grouping {
        // m-block = cta.x + gx·cta.z; its expert and whether it computes from the tables.
        let at = |c: &mut Code, t: &Arc<[i64]>| {
            let table = Some(c.table(t.clone()));
            c.param(CtaParam { table, ..CtaParam::constant(0).with(Var::CtaX, 1).with(Var::CtaZ, pl.gx as i64) })
        };
        let expert = at(c, &gr.expert);
        let active = at(c, &gr.active);
        let t = Tile {
            mt: Affine::konst(0).with(Var::CtaX, 1).with(Var::CtaZ, pl.gx),
            nt: Affine::konst(0).with(Var::CtaY, 1),
            z: Affine::konst(0),
            expert: Some(expert),
        };
        c.begin_param(active);
        body(c, &t);
        c.end();
        return;
    }
    let mut t = Tile {
        mt: Affine::konst(0).with(Var::CtaX, 1),
        nt: Affine::konst(0).with(Var::CtaY, 1),
        z: Affine::konst(0).with(Var::CtaZ, 1),
        expert: None,
    };
    let mut open = 0;
    if cz > 1 {
        let v = c.begin(cz as u32);
        t.z = t.z.with(v, pl.gz);
        open += 1;
    }
    if cnn > 1 {
        let v = c.begin(cnn as u32);
        t.nt = t.nt.with(v, pl.gy);
        open += 1;
    }
    if cmm > 1 {
        let v = c.begin(cmm as u32);
        t.mt = t.mt.with(v, pl.gx);
        open += 1;
    }
    body(c, &t);
    for _ in 0..open {
        c.end();
    }
}

/// Registers.
const TID: u8 = 0;
const PHASE: u8 = 1;
const TX: u8 = 2;
const OUTP: u8 = 2;
const CNT: u8 = 4;
const TILES: u8 = 5;
const SPTR: u8 = 6;
const SCALE: u8 = 8;
const PACK: u8 = 16;
const ACC: u8 = 24;

fn loop_control(c: &mut Code) {
    c.op("IADD3", &[r(CNT)], &[r(CNT)]).op("ISETP.NE.AND", &[pred(1)], &[r(CNT)]);
    c.op("BRA", &[], &[pred(1)]);
}

fn next_tile(c: &mut Code) {
    c.op("IADD3", &[r(TILES)], &[r(TILES)]).op("ISETP.GE.AND", &[pred(2)], &[r(TILES)]);
    c.op("BRA", &[], &[pred(2)]);
}

fn idle_program(ops: &mut OpTable) -> Program {
    let mut c = Code::new(ops, "producer_idle");
    c.op_imm("USETMAXREG.DEALLOC.CTAPOOL", &[], &[], 40);
    c.op("BAR.SYNC.DEFER_BLOCKING", &[], &[]);
    c.op("EXIT", &[], &[]);
    c.finish()
}

/// Warp 0: barrier initialisation, then per tile and k-iteration the TMA loads of one stage.
fn producer(pl: &Plan, ops: &mut OpTable, counts: Counts) -> Program {
    let name = if pl.multicast { "producer_multicast".to_string() } else { "producer".to_string() };
    let name = if counts.0 * counts.1 * counts.2 == 0 { format!("{name}_notile") } else { name };
    let mut c = Code::new(ops, &name);
    let s = pl.stages;
    let g = &pl.g;
    c.op_imm("USETMAXREG.DEALLOC.CTAPOOL", &[], &[], 40);
    c.op("S2R", &[r(TID)], &[]).op("MOV", &[r(TX)], &[]).op("MOV", &[r(PHASE)], &[]);
    c.set_mask(1);
    for st in 0..s {
        c.mem_imm("SYNCS.EXCH.64", &[], &[urr(4, 2)], bar(pl, false, st), 1);
    }
    for st in 0..s {
        c.mem_imm("SYNCS.EXCH.64", &[], &[urr(4, 2)], bar(pl, true, st), (4 * pl.cons) as i32);
    }
    c.set_mask(u32::MAX);
    c.op("BAR.SYNC.DEFER_BLOCKING", &[], &[]);
    // A multicast cluster splits A across its n-ranks and B across its m-ranks: each CTA loads
    // its slice (at rank · slice) and multicasts it to the others.
    let (split_a, split_b) = (pl.multicast && pl.cn > 1, pl.multicast && pl.cm > 1);
    let a_bytes = if split_a { pl.tile_a / pl.cn } else { pl.tile_a };
    let b_bytes = if split_b { pl.tile_b / pl.cm } else { pl.tile_b };
    let load = |mc: bool| if mc { "UTMALDG.2D.MULTICAST" } else { "UTMALDG.2D" };
    tile_loops(&mut c, pl, counts, &mut |c, t| {
        // Defined here, after the grouped form's expert parameter (p0, the kernel's CTA group).
        let rank_n = split_a.then(|| cluster_rank(c, Var::CtaY, pl.cn));
        let rank_m = split_b.then(|| cluster_rank(c, Var::CtaX, pl.cm));
        iterations(c, 0, g.kps, s, &mut |c, j, st| {
            c.set_mask(1);
            c.mem("SYNCS.PHASECHK.TRANS64.TRYWAIT", &[pred(0)], &[r(PHASE)], bar(pl, true, st));
            c.op("BRA", &[], &[pred(0)]);
            // expect_tx: the whole stage (A and B tiles, scales), including the slices the other
            // CTAs of the cluster multicast into this CTA's shared memory. It arms the copies
            // that follow.
            c.mem_imm(
                "SYNCS.ARRIVE.TRANS64",
                &[],
                &[r(TX)],
                bar(pl, false, st),
                (pl.tile_a + pl.tile_b + pl.tile_sf) as i32,
            );
            // Tile (mt, z, j) of A is at ((mt·Z + z)·kps + j)·tile_a in the blocked layout.
            let mut a = Addr::at(g.regions.a)
                .index(&t.mt, g.z * g.kps * pl.tile_a)
                .index(&t.z, g.kps * pl.tile_a)
                .index(j, pl.tile_a);
            if let Some(v) = rank_n {
                a = a.term(v, a_bytes as i64);
            }
            c.bulk(load(pl.multicast && pl.cn > 1), &[], &[urr(8, 2), urr(4, 2)], a, a_bytes as u32);
            if pl.block_scaled {
                let sf = Addr::at(g.regions.sfa)
                    .index(&t.mt, g.z * g.kps * pl.tile_sf)
                    .index(&t.z, g.kps * pl.tile_sf)
                    .index(j, pl.tile_sf);
                c.bulk("UTMALDG.2D", &[], &[urr(12, 2), urr(4, 2)], sf, pl.tile_sf as u32);
            }
            let mut b = Addr::at(g.regions.b)
                .index(&t.nt, g.z * g.kps * pl.tile_b)
                .index(&t.z, g.kps * pl.tile_b)
                .index(j, pl.tile_b);
            if let Some(e) = t.expert {
                b = b.term(e, (g.tn * g.kps * pl.tile_b) as i64);
            }
            if let Some(v) = rank_m {
                b = b.term(v, b_bytes as i64);
            }
            c.bulk(load(pl.multicast && pl.cm > 1), &[], &[urr(16, 2), urr(4, 2)], b, b_bytes as u32);
            c.set_mask(u32::MAX);
            loop_control(c);
        });
        next_tile(c);
    });
    c.op("EXIT", &[], &[]);
    c.finish()
}

/// The CTA's rank along one cluster dimension, `coord mod n`, as a per-CTA parameter (`q =
/// floor(coord / n)`, then `coord − n·q`).
fn cluster_rank(c: &mut Code, coord: Var, n: u64) -> Var {
    let q = c.param(CtaParam { div: n as i64, ..CtaParam::constant(0).with(coord, 1) });
    c.param(CtaParam::constant(0).with(coord, 1).with(q, -(n as i64)))
}

/// Row of consumer warp/// Row of consumer warp `warp` (4..) in row block `ri` is `row0(ri) + 16·warp`: row block `ri` of
/// warpgroup `wg` holds rows `ri·64·consumers + wg·64 + 16·(warp in group)`.
fn row0(pl: &Plan, ri: u64) -> i64 {
    (ri * 64 * pl.cons) as i64 - 64
}

/// Consumer warps: wait for a stage, wgmma on it, release it; the epilogue per tile.
fn consumer(pl: &Plan, ops: &mut OpTable, counts: Counts) -> Program {
    let name = if counts.0 * counts.1 * counts.2 == 0 { "consumer_notile" } else { "consumer" };
    let mut c = Code::new(ops, name);
    let s = pl.stages;
    let g = &pl.g;
    let bn2 = g.bn / 2;
    c.op_imm("USETMAXREG.TRY_ALLOC.CTAPOOL", &[], &[], if pl.cons == 2 { 232 } else { 240 });
    c.op("S2R", &[r(TID)], &[]).op("MOV", &[r(PHASE)], &[]).op("IMAD.SHL.U32", &[r(SPTR)], &[r(TID)]);
    c.op("BAR.SYNC.DEFER_BLOCKING", &[], &[]);
    // Every stage starts empty.
    for st in 0..s {
        c.mem("SYNCS.ARRIVE.TRANS64.RED.A1T0", &[], &[], bar(pl, true, st));
    }
    let acc = |ri: u64| rr(ACC + (ri * bn2) as u8, bn2 as u8);
    let fin = |ri: u64| rr(ACC + ((pl.rblk + ri) * bn2) as u8, bn2 as u8);
    let wait_full = |c: &mut Code, st: u64| {
        c.mem("SYNCS.PHASECHK.TRANS64.TRYWAIT", &[pred(0)], &[r(PHASE)], bar(pl, false, st));
        c.op("BRA", &[], &[pred(0)]);
    };
    let wgmma = |c: &mut Code| {
        c.op("WARPGROUP.ARRIVE", &[], &[]);
        for _ in 0..pl.mmas {
            for ri in 0..pl.rblk {
                c.op(&pl.mma, &[acc(ri)], &[urr(8, 2), urr(10, 2), acc(ri)]);
            }
        }
    };
    tile_loops(&mut c, pl, counts, &mut |c, t| {
        if pl.block_scaled {
            iterations(c, 0, g.kps, s, &mut |c, _j, st| {
                wait_full(c, st);
                // Scales of A (rows lane/4 and lane/4 + 8 of the warp's 16, per row block) and B.
                let lanes: Vec<i64> = (0..32).map(|l| (l / 4) * 4).collect();
                for ri in 0..pl.rblk {
                    for h in 0..2u64 {
                        let a = Addr::at(st * pl.stage_bytes + pl.tile_a + pl.tile_b)
                            .plus_signed(4 * (row0(pl, ri) + 8 * h as i64))
                            .term(Var::Warp, 64);
                        c.mem_lanes("LDS", &[r(SCALE + (2 * ri + h) as u8)], &[r(SPTR)], a, &lanes);
                    }
                }
                c.mem_lanes("LDS", &[r(SCALE + 4)], &[r(SPTR)], Addr::at(pl.sfb_addr), &[0; 32]);
                wgmma(c);
                c.op_imm("WARPGROUP.DEPBAR.LE", &[], &[], 0);
                c.mem("SYNCS.ARRIVE.TRANS64.RED.A1T0", &[], &[], bar(pl, true, st));
                for k in 0..2 * pl.rblk {
                    c.op("FMUL", &[r(SCALE + 5 + k as u8)], &[r(SCALE + k as u8), r(SCALE + 4)]);
                }
                // Promotion: final += scale(row) · partial, one FFMA per accumulator register.
                for ri in 0..pl.rblk {
                    for i in 0..bn2 {
                        let half = (i / 2) % 2;
                        let tmp = r(ACC + (ri * bn2 + i) as u8);
                        let f = r(ACC + ((pl.rblk + ri) * bn2 + i) as u8);
                        c.op("FFMA", &[f], &[tmp, r(SCALE + 5 + (2 * ri + half) as u8), f]);
                    }
                }
                loop_control(c);
            });
        } else {
            wait_full(c, 0);
            wgmma(c);
            iterations(c, 1, g.kps, s, &mut |c, _j, st| {
                wait_full(c, st);
                wgmma(c);
                c.op_imm("WARPGROUP.DEPBAR.LE", &[], &[], 1);
                c.mem("SYNCS.ARRIVE.TRANS64.RED.A1T0", &[], &[], bar(pl, true, (st + s - 1) % s));
                loop_control(c);
            });
            c.op_imm("WARPGROUP.DEPBAR.LE", &[], &[], 0);
            c.mem("SYNCS.ARRIVE.TRANS64.RED.A1T0", &[], &[], bar(pl, true, (g.kps - 1) % s));
        }
        let vals = |ri: u64| if pl.block_scaled { fin(ri) } else { acc(ri) };
        epilogue(pl, c, t, &vals);
        next_tile(c);
    });
    c.op("EXIT", &[], &[]);
    c.finish()
}

/// Stores the tile by 32-column subtiles; each consumer warp writes its 16 rows of each row block.
fn epilogue(pl: &Plan, c: &mut Code, t: &Tile, vals: &dyn Fn(u64) -> gpusim_isa::RegRange) {
    let g = &pl.g;
    let subs = g.bn / 32;
    let sub = if subs > 1 { Affine::konst(0).with(c.begin(subs as u32), 1) } else { Affine::konst(0) };
    let oe = g.oe;
    let ldc = g.np * oe;
    let n_st = pl.chunk / 512;
    for ri in 0..pl.rblk {
        let v0 = vals(ri).first.0 as u8;
        let row = row0(pl, ri); // + 16·warp
        // Row-major C: out + z·M'·ldc + (mt·bm + row)·ldc + (nt·bn + 32·sub)·oe.
        let rowmajor = |extra_row: u64, extra_col: u64| {
            Addr::at(g.out_base())
                .plus_signed((row + extra_row as i64) * ldc as i64)
                .plus(extra_col * oe)
                .term(Var::Warp, (16 * ldc) as i64)
                .index(&t.z, g.mp * ldc)
                .index(&t.mt, g.bm * ldc)
                .index(&t.nt, g.bn * oe)
                .index(&sub, 32 * oe)
        };
        let vregs: Vec<gpusim_isa::RegRange> = if oe == 2 {
            for k in 0..8u8 {
                c.op(pl.dtype.pack(), &[r(PACK + k)], &[rr(v0 + 2 * k, 2)]);
            }
            vec![rr(PACK, 4), rr(PACK + 4, 4)]
        } else {
            (0..4u8).map(|q| rr(v0 + 4 * q, 4)).collect()
        };
        if pl.r.epilogue == Epilogue::Direct {
            // Fragment layout: lane l holds rows l/4 and l/4 + 8, columns 2·(l%4) + {0, 1} of each
            // group of 8 columns.
            let lanes: Vec<i64> = (0..32).map(|l| ((l / 4) * ldc + (l % 4) * 2 * oe) as i64).collect();
            for k in 0..8u64 {
                let (h, cg) = (k % 2, k / 2);
                let addr = rowmajor(8 * h, 8 * cg);
                if oe == 2 {
                    c.mem_lanes("STG.E", &[], &[rr(OUTP, 2), r(PACK + k as u8)], addr, &lanes);
                } else {
                    c.mem_lanes("STG.E.64", &[], &[rr(OUTP, 2), rr(v0 + 2 * k as u8, 2)], addr, &lanes);
                }
            }
            continue;
        }
        let slot = Addr::at(pl.epi_base).plus_signed(row / 16 * pl.chunk as i64).term(Var::Warp, pl.chunk as i64);
        for (q, v) in vregs.iter().enumerate().take(n_st as usize) {
            let a = slot.plus(q as u64 * 512);
            c.mem(if oe == 2 { "STSM.16.M88.4" } else { "STS.128" }, &[], &[r(SPTR), *v], a);
        }
        match pl.r.epilogue {
            Epilogue::TmaStore => {
                // Blocked C: subtile (tile, sub) holds bm rows of 32 columns; the warp's 16 rows.
                let a = Addr::at(g.out_base())
                    .plus_signed(row / 16 * pl.chunk as i64)
                    .term(Var::Warp, pl.chunk as i64)
                    .index(&t.z, g.tm * g.tn * subs * g.bm * 32 * oe)
                    .index(&t.mt, g.tn * subs * g.bm * 32 * oe)
                    .index(&t.nt, subs * g.bm * 32 * oe)
                    .index(&sub, g.bm * 32 * oe);
                c.set_mask(1);
                c.bulk("UTMASTG.2D", &[], &[urr(8, 2), urr(4, 2)], a, pl.chunk as u32);
                c.set_mask(u32::MAX);
            }
            Epilogue::SharedStore => {
                let lanes = row_lanes(32 * oe, ldc);
                let rows_inst = 32 / (32 * oe / 16);
                for q in 0..n_st {
                    let v = rr(PACK + 4 * (q % 2) as u8, 4);
                    c.mem("LDS.128", &[v], &[r(SPTR)], slot.plus(q * 512));
                    c.mem_lanes("STG.E.128", &[], &[rr(OUTP, 2), v], rowmajor(q * rows_inst, 0), &lanes);
                }
            }
            Epilogue::Direct => {}
        }
    }
    if subs > 1 {
        c.end();
    }
}

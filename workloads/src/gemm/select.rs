//! The default recipe: what a tuned library (cuBLAS's heuristics, CUTLASS's profiler) picks.
//!
//! Each style has a small candidate set of tiles per dtype (the kernels cuBLAS ships for A100 and
//! H100). For each candidate and split-K factor the time is estimated as
//! `waves × tile time + split-K reduction`, with
//! - `waves = ⌈tiles / concurrent CTAs⌉` (wave quantisation; the persistent Hopper scheduler's
//!   blocked waves), tiles counted with padding, so partial tiles cost as whole ones;
//! - `tile time = k-iterations × max(MMA time, copy time) + fill`, the MMA time from the chip's
//!   tensor rate shared by the CTAs on an SM, the copy time from the SM's share of the L2
//!   bandwidth (multicast halves the shared operand);
//! - split-K (only when the output tiles leave SMs idle and K is long) adds the reduction kernel:
//!   its launch and the fp32 partials read from memory.
//!
//! The candidate with the smallest estimate wins; ties go to the earlier (larger) tile.
//!
//! Block-scaled fp8 (the DeepGEMM recipe) is chosen as DeepGEMM chooses instead
//! ([`deepgemm_recipe`]): never split-K, BLOCK_M/BLOCK_N (and multicast) so that the persistent
//! tiles fill the SMs; the rules of its legacy Python heuristic (`get_best_configs`,
//! ../shared/notes/kernel-designs.md §6).

use gpusim_configs::Arch;

use super::{
    AmpereRecipe, Dtype, Epilogue, GemmProblem, HopperRecipe, Recipe, ampere, concurrent_ctas, ctas_per_sm, hopper,
};

/// Which family of kernel designs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    Ampere,
    Hopper,
}

impl Style {
    pub fn parse(s: &str) -> Option<Style> {
        match s.to_ascii_lowercase().as_str() {
            "ampere" | "sm80" | "cp.async" | "mma.sync" => Some(Style::Ampere),
            "hopper" | "sm90" | "wgmma" | "tma" => Some(Style::Hopper),
            _ => None,
        }
    }
}

const SPLITS: [u32; 10] = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32];

fn ampere_candidates(d: Dtype) -> Vec<AmpereRecipe> {
    // (cta_m, cta_n, cta_k in 16-bit elements, warp_m, warp_n, stages)
    let base: [(u32, u32, u32, u32, u32, u32); 7] = [
        (256, 128, 64, 64, 64, 3), // cuBLAS ampere_bf16_s16816gemm_256x128_64x3 (the large-GEMM kernel)
        (128, 256, 64, 64, 64, 3),
        (128, 128, 64, 64, 64, 4),
        (128, 128, 32, 64, 64, 4),
        (128, 64, 64, 64, 32, 4),
        (64, 128, 64, 32, 64, 4),
        (64, 64, 64, 32, 32, 5),
    ];
    base.iter()
        .map(|&(m, n, k, wm, wn, s)| {
            // Keep 128-byte rows of K: half the elements for tf32, twice for fp8.
            let k = match d {
                Dtype::Tf32 => k / 2,
                Dtype::Fp8 => k * 2,
                _ => k,
            };
            AmpereRecipe { cta_m: m, cta_n: n, cta_k: k, warp_m: wm, warp_n: wn, stages: s, split_k: 1, swizzle: 1 }
        })
        .collect()
}

fn hopper_candidates(p: &GemmProblem) -> Vec<HopperRecipe> {
    let bk = (128 / p.dtype.bytes()) as u32;
    let tiles: &[(u32, u32, u32)] = if p.block_scaled {
        // (cta_m, cta_n, consumers): DeepGEMM's BLOCK_M 64/128 with BLOCK_N up to 128 here.
        &[(128, 128, 2), (128, 64, 2), (64, 128, 1), (64, 64, 1)]
    } else {
        &[(128, 256, 2), (256, 128, 2), (128, 128, 2), (128, 64, 2), (64, 256, 1), (64, 128, 1), (64, 64, 1)]
    };
    tiles
        .iter()
        .map(|&(m, n, c)| HopperRecipe {
            cta_m: m,
            cta_n: n,
            cta_k: bk,
            stages: 4,
            consumers: c,
            cluster_m: 2,
            cluster_n: 1,
            multicast: true,
            persistent: true,
            raster_swizzle: 0,
            split_k: 1,
            epilogue: Epilogue::TmaStore,
        })
        .collect()
}

/// The most stages (up to 8, at least 2) whose shared memory fits.
fn fit_stages(arch: &Arch, p: &GemmProblem, r: Recipe) -> Option<Recipe> {
    let mut best = None;
    for s in 2..=8u32 {
        let mut c = r;
        match &mut c {
            Recipe::Ampere(a) => {
                if s > a.stages {
                    break;
                }
                a.stages = s;
            }
            Recipe::Hopper(h) => h.stages = s,
        }
        if super::smem_bytes(arch, p, &c).is_ok() {
            best = Some(c);
        }
    }
    best
}

/// Estimated cycles of recipe `r` for `p` on `arch` (the selection's cost model).
pub(crate) fn estimate(arch: &Arch, p: &GemmProblem, r: &Recipe) -> Option<f64> {
    let rate = arch.tensor.flops_per_clk_per_sm.get(p.dtype.rate_key()).copied().filter(|&x| x > 0.0)?;
    let l2 = arch.l2.slices as f64 * arch.l2.slice_bandwidth.0 / arch.sm.count.max(1) as f64;
    let port = arch.noc.sm_port_bandwidth.0.max(1.0);
    let sm_bw = l2.min(port);
    let dram = arch.hbm.bandwidth.per_cycle(arch.clocks.sm).0.max(1.0);
    let elt = p.dtype.bytes() as f64;
    let (g, per_sm, waves, a_share, b_share, fill, warps_per_sm) = match r {
        Recipe::Ampere(a) => {
            let pl = ampere::plan(arch, p, a).ok()?;
            let per_sm = ctas_per_sm(arch, pl.threads, pl.regs, pl.smem);
            let conc = concurrent_ctas(arch, per_sm, 1);
            let tiles = pl.g.tm * pl.g.tn * pl.g.z;
            (pl.g, per_sm, tiles.div_ceil(conc.max(1)), 1.0, 1.0, 1500.0, per_sm * pl.warps)
        }
        Recipe::Hopper(h) => {
            let pl = hopper::plan(arch, p, h).ok()?;
            let per_sm = ctas_per_sm(arch, pl.threads, pl.regs, pl.smem);
            let (sa, sb) = if pl.multicast { (1.0 / pl.cn as f64, 1.0 / pl.cm as f64) } else { (1.0, 1.0) };
            let fill = if h.persistent { 600.0 } else { 1500.0 };
            (pl.g, per_sm, pl.waves, sa, sb, fill, 8)
        }
    };
    let per_sm = per_sm.max(1) as f64;
    let (bm, bn, bk) = (g.bm as f64, g.bn as f64, g.bk as f64);
    let mut mma = 2.0 * bm * bn * bk / (rate / per_sm);
    if warps_per_sm < 8 {
        // Too few warps to hide ldmatrix and barrier latency behind the tensor pipe.
        mma *= 1.2;
    }
    let copy = (bm * a_share + bn * b_share) * bk * elt / (sm_bw / per_sm);
    let epilogue = bm * bn * g.oe as f64 / (sm_bw / per_sm);
    let tile = g.kps as f64 * mma.max(copy) + fill + epilogue;
    let mut total = waves as f64 * tile;
    if g.split > 1 {
        let bytes = (g.batch * g.mp * g.np) as f64 * (4.0 * g.split as f64 + p.dtype.out_bytes() as f64);
        total += arch.sim.kernel_launch_overhead.0 as f64 + 1500.0 + bytes / dram;
    }
    Some(total)
}

/// The tuned recipe of `style` for `p` on `arch` (see the module documentation). Falls back to the
/// first candidate when none fits (its [`super::generate`] then says why).
pub fn tuned_recipe(arch: &Arch, p: &GemmProblem, style: Style) -> Recipe {
    if p.block_scaled && style == Style::Hopper && p.batch == 1 {
        let m_blocks = |bm: u64| p.m.div_ceil(bm);
        let bms: &[u32] = if p.m <= 64 { &[64] } else { &[128] };
        return Recipe::Hopper(deepgemm_recipe(arch, p, bms, &m_blocks, p.m, MulticastRule::Dense));
    }
    let mut cands: Vec<Recipe> = match style {
        Style::Ampere => ampere_candidates(p.dtype).into_iter().map(Recipe::Ampere).collect(),
        Style::Hopper => hopper_candidates(p).into_iter().map(Recipe::Hopper).collect(),
    };
    let fallback = cands[0];
    // Swizzle as CUTLASS's get_log_tile with N = 8; no clusters where the chip has none.
    for c in &mut cands {
        match c {
            Recipe::Ampere(a) => {
                let tn = p.n.div_ceil(a.cta_n as u64);
                a.swizzle = if tn >= 6 {
                    8
                } else if tn >= 3 {
                    4
                } else if tn >= 2 {
                    2
                } else {
                    1
                };
            }
            Recipe::Hopper(h) => {
                if arch.sm.max_cluster_size < 2 || p.m.div_ceil(h.cta_m as u64) < 2 {
                    h.cluster_m = 1;
                    h.multicast = false;
                }
            }
        }
    }
    let mut best: Option<(f64, Recipe)> = None;
    for c in cands {
        let Some(c) = fit_stages(arch, p, c) else { continue };
        let (bm, bn, bk) = match c {
            Recipe::Ampere(a) => (a.cta_m, a.cta_n, a.cta_k),
            Recipe::Hopper(h) => (h.cta_m, h.cta_n, h.cta_k),
        };
        let mn_tiles = p.m.div_ceil(bm as u64) * p.n.div_ceil(bn as u64) * p.batch;
        let k_tiles = p.k.div_ceil(bk as u64);
        let sms = arch.sm.count as u64;
        for split in SPLITS {
            let split64 = split as u64;
            if split > 1 && (mn_tiles >= sms || k_tiles < 4 * split64 || mn_tiles * split64 > 2 * sms) {
                continue;
            }
            let mut c = c;
            match &mut c {
                Recipe::Ampere(a) => {
                    a.split_k = split;
                    if split > 1 {
                        a.swizzle = 1;
                    }
                }
                Recipe::Hopper(h) => h.split_k = split,
            }
            if super::generate_check(arch, p, &c).is_err() {
                continue;
            }
            let Some(t) = estimate(arch, p, &c) else { continue };
            if best.is_none_or(|(bt, _)| t < bt * 0.999) {
                best = Some((t, c));
            }
        }
    }
    best.map(|(_, r)| r).unwrap_or(fallback)
}

/// Which operand DeepGEMM may multicast.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MulticastRule {
    /// Dense GEMM: on A or on B, the larger block side first.
    Dense,
    /// M-grouped GEMM: only A (two CTAs of one m-block, so of one expert, share its rows); the
    /// peer m-block of a B multicast may belong to another expert (DeepGEMM's newer heuristic
    /// multicasts B on contiguous layouts when the peer has the same expert; not built here).
    /// DeepGEMM's `is_tma_multicast_legal(n, BLOCK_N, 2, num_sms, require_divisible)` asks only
    /// for an even SM count, and an even number of n-blocks when `even_n_blocks` (the masked
    /// layout); an odd last pair's peer loads an out-of-bounds box.
    OnlyA { even_n_blocks: bool },
}

/// BLOCK_N candidates of DeepGEMM's legacy heuristic (16..=128 by 8, 144, 160) that this recipe can
/// build: its epilogue stores 32-column subtiles, so multiples of 32.
const DEEPGEMM_BLOCK_NS: [u32; 5] = [32, 64, 96, 128, 160];

/// DeepGEMM's choice for block-scaled fp8, and the same rules for the bf16 grouped GEMM (legacy `get_best_configs`, notes §6): for each BLOCK_M of
/// `block_ms` and each BLOCK_N, the tiles (`m_blocks(BLOCK_M)·⌈N/BLOCK_N⌉`) over the persistent CTAs
/// (one per SM) give the waves; the fewest waves win, then the fullest last wave, then the larger
/// BLOCK_N. Never split-K. Stages: the most of 8..2 that are ≤ the k-blocks and fit. Multicast 2
/// when `m_hint ≥ 512` and the multicast side is legal (dense: `n` into 2·BLOCK_N for A, M into
/// 2·BLOCK_M for B; grouped: [`MulticastRule::OnlyA`]), tried on the larger block side first, and only when there is more than one
/// wave (the current C++ heuristic rejects multicast with a single wave).
pub fn deepgemm_recipe(
    arch: &Arch,
    p: &GemmProblem,
    block_ms: &[u32],
    m_blocks: &dyn Fn(u64) -> u64,
    m_hint: u64,
    rule: MulticastRule,
) -> HopperRecipe {
    // K per stage: 128 bytes of the input (DeepGEMM's BLOCK_K = 128 for fp8; 64 for bf16).
    let bk = (128 / p.dtype.bytes()) as u32;
    let sms = concurrent_ctas(arch, 1, 1).max(1);
    let mut best: Option<((u64, i64, i64), HopperRecipe)> = None;
    for &bm in block_ms {
        let consumers = if bm > 64 { 2 } else { 1 };
        for bn in DEEPGEMM_BLOCK_NS {
            let tiles = m_blocks(bm as u64) * p.n.div_ceil(bn as u64);
            let waves = tiles.div_ceil(sms).max(1);
            let last = tiles - (waves - 1) * sms;
            let r = HopperRecipe {
                cta_m: bm,
                cta_n: bn,
                cta_k: bk,
                stages: 2,
                consumers,
                cluster_m: 1,
                cluster_n: 1,
                multicast: false,
                persistent: true,
                raster_swizzle: 0,
                split_k: 1,
                epilogue: Epilogue::TmaStore,
            };
            let Some(Recipe::Hopper(r)) = fit_stages(arch, p, Recipe::Hopper(r)) else { continue };
            let key = (waves, -(last as i64), -(bn as i64));
            if best.is_none_or(|(k, _)| key < k) {
                best = Some((key, r));
            }
        }
    }
    let Some(((waves, _, _), mut r)) = best else {
        return HopperRecipe {
            cta_m: block_ms.first().copied().unwrap_or(128),
            cta_n: 128,
            cta_k: bk,
            stages: 4,
            consumers: 2,
            cluster_m: 1,
            cluster_n: 1,
            multicast: false,
            persistent: true,
            raster_swizzle: 0,
            split_k: 1,
            epilogue: Epilogue::TmaStore,
        };
    };
    // Stages: no more than the k-blocks (DeepGEMM's `≤ k/128`), at least the recipe's 2.
    r.stages = r.stages.min(p.k.div_ceil(bk as u64).max(2) as u32);
    if m_hint >= 512 && waves > 1 && arch.sm.max_cluster_size >= 2 {
        let on_a = match rule {
            MulticastRule::Dense => p.n.is_multiple_of(2 * r.cta_n as u64),
            MulticastRule::OnlyA { even_n_blocks } => {
                sms.is_multiple_of(2) && (!even_n_blocks || p.n.div_ceil(r.cta_n as u64).is_multiple_of(2))
            }
        };
        let on_b = rule == MulticastRule::Dense && m_blocks(r.cta_m as u64).is_multiple_of(2);
        let order = if r.cta_m > r.cta_n { [true, false] } else { [false, true] };
        for a_side in order {
            if (a_side && on_a) || (!a_side && on_b) {
                // Multicast on A: the pair shares an m-block (a cluster along N); on B: along M.
                let mut c = r;
                (c.cluster_m, c.cluster_n, c.multicast) = if a_side { (1, 2, true) } else { (2, 1, true) };
                if super::generate_check(arch, p, &Recipe::Hopper(c)).is_ok() {
                    r = c;
                    break;
                }
            }
        }
    }
    r
}

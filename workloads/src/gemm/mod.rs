//! GEMM trace generators ("recipes"): a recipe is a parameterised kernel design that emits the
//! SASS-level trace of that design for a problem `C[b] = A[b] · B[b]` of `M×N×K` (`batch` times).
//! FLOPs are counted as `2·M·N·K·batch` ([`GemmProblem::flops`]).
//!
//! - [`Recipe::Ampere`] ([`AmpereRecipe`]): the sm_80 multistage kernel of CUTLASS/cuBLAS
//!   (`cp.async` + `ldmatrix` + `mma.sync`), every warp symmetric.
//! - [`Recipe::Hopper`] ([`HopperRecipe`]): the sm_90a warp-specialised kernel (TMA producer
//!   warpgroup, `wgmma` consumer warpgroups, mbarrier pipeline), clusters with TMA multicast, a
//!   persistent tile scheduler, fp8 with DeepGEMM-style block scaling.
//! - Split-K (both styles): `split_k` CTAs share a tile's K range and write fp32 partials; a second
//!   kernel (`splitKreduce`, as cuBLAS launches) sums them and converts.
//!
//! [`default_recipe`] picks what a tuned library would for a chip and problem; [`generate`] emits
//! the trace; [`recipe_from_params`] applies `key=value` overrides (the CLI's `-p`);
//! [`k_iteration_mix`] measures the steady-state instruction mix per k-iteration of a recipe.
//!
//! # Data layout
//! A is `M×K` with K contiguous. B is `K×N` with N contiguous for bf16/fp16 on the Ampere recipe
//! (loaded with `LDSM.16.MT88.4`), `N×K` with K contiguous otherwise (tf32 and 8-bit `ldmatrix`
//! cannot transpose). Batches sit side by side along K (`lda = batch·K'`, batch `b` starts at column
//! `b·K'`), a legal strided-batched layout that keeps every address affine in the CTA index: split
//! `s` of batch `b` is column block `(b·split_k + s)·K'/split_k`. `K'`, `M'`, `N'` are padded to whole
//! tiles (partial tiles are computed in full, so executed FLOPs are ≥ `2·M·N·K`, equal when the
//! problem is tile aligned). The Hopper recipe addresses A, B and C in a tile-blocked layout (each
//! TMA box one contiguous run of bytes, since the simulator's bulk copies are contiguous); the
//! bytes, and which CTAs share them, are those of the row-major tensors.
//!
//! # Ampere recipe: SASS per CTA (every warp; `S` stages, `KG = cta_k / k_mma` k-groups)
//! ```text
//! S2R ×2; IMAD.WIDE ×2; IMAD.SHL.U32 ×2; MOV                   # pointers, k counter
//! tiles 0..S-2:  n × LDGSTS.E.BYPASS.128 <- R6 R2x2 addr=A/B row + lanes   # n = (BM+BN)·BK·e/(16·threads)
//!                LDGDEPBAR
//! DEPBAR.LE SB0 imm=S-2; BAR.SYNC.DEFER_BLOCKING                # tile 0 has landed
//! LDSM fragments of k-group 0
//! k-tile t (loop, unrolled by S for the stage addresses), k-group g in 0..KG:
//!     WM/16 × LDSM.16.M88.4 (A) + WN/16 × LDSM.16.MT88.4 (B)    # fragments of group g+1 (double-buffered)
//!     share of the n LDGSTS for tile t+S-1 (groups 0..KG-2)
//!     (WM/16)·(WN/8) × HMMA.16816.F32.BF16 Racc x4 <- RA x4 RB x2 Racc x4   # distinct accumulators
//!     at g = KG-2: LDGDEPBAR; DEPBAR.LE SB0 imm=S-2; BAR.SYNC   # tile t+1 has landed
//!   IADD3 ×3; ISETP.NE.AND; BRA                                 # loop control
//! DEPBAR.LE SB0 imm=0; BAR.SYNC
//! epilogue: F2FP.BF16.F32.PACK_AB ×acc/2; STS.128 ×q; BAR.SYNC; LDS.128 ×q; STG.E.128 ×q; EXIT
//! ```
//! fp16 uses `HMMA.16816.F32`, tf32 `HMMA.1688.F32.TF32` (k = 8), fp8 (sm_89+) `HMMA.16832.F32.E4M3.E4M3`
//! (k = 32). The last `S-1` k-tiles issue no copies but commit an empty group, as CUTLASS does.
//! The grid is CUTLASS's `GemmIdentityThreadblockSwizzle<swizzle>` as a 3-D grid
//! `(swizzle, tiles_m, tiles_n/swizzle)` (tile `(cta.y, swizzle·cta.z + cta.x)`, launch order
//! identical), or `(tiles_m, tiles_n, batch·split_k)` for batched or split problems and when the
//! swizzle does not divide `tiles_n` (the largest power of two that does is used).
//! Per k-tile and warp, the 256×128×64 bf16 default (8 warps of 64×64) issues 128 HMMA, 32 LDSM,
//! 12 LDGSTS, 1 LDGDEPBAR, 1 DEPBAR, 1 BAR (pinned by `workloads/tests/gemm.rs`).
//!
//! # Hopper recipe: SASS per CTA (`1 + consumers` warpgroups of 128 threads)
//! ```text
//! warp 0 (producer, elected lane: mask 0x1):
//!   USETMAXREG.DEALLOC.CTAPOOL imm=40
//!   SYNCS.EXCH.64 addr=full[s] imm=1; SYNCS.EXCH.64 addr=empty[s] imm=4·consumers   # s in 0..S
//!   BAR.SYNC.DEFER_BLOCKING
//!   per tile, per k-iteration j (stage s = j % S):
//!     SYNCS.PHASECHK.TRANS64.TRYWAIT P0 addr=empty[s]; BRA <- P0    # the stage is free
//!     UTMALDG.2D addr=A tile bytes=BM·BK·e                          # (+ scales A when block scaled)
//!     SYNCS.ARRIVE.TRANS64 addr=full[s] imm=stage bytes              # expect_tx; arms the copies
//!     UTMALDG.2D.MULTICAST addr=B slice bytes=BN·BK·e/cluster_m     # (.2D without multicast)
//!     IADD3; ISETP.NE.AND; BRA
//!   per tile: IADD3; ISETP.GE.AND; BRA                              # next tile of the scheduler
//! warps 1..3: USETMAXREG.DEALLOC; BAR.SYNC; EXIT
//! warps 4.. (consumers, each warp of a warpgroup issues the warpgroup's instructions):
//!   USETMAXREG.TRY_ALLOC.CTAPOOL imm=232; BAR.SYNC
//!   SYNCS.ARRIVE.TRANS64.RED.A1T0 addr=empty[s] for every s                     # the pipeline starts empty
//!   per tile:
//!     j = 0:  TRYWAIT full[0]; BRA; WARPGROUP.ARRIVE; (BK/k)·r × HGMMA.64xBNx16.F32.BF16 R24x(BN/2)
//!     j ≥ 1:  TRYWAIT full[s]; BRA; WARPGROUP.ARRIVE; (BK/k)·r × HGMMA; WARPGROUP.DEPBAR.LE imm=1;
//!             SYNCS.ARRIVE.TRANS64.RED.A1T0 addr=empty[(j-1)%S]; IADD3; ISETP.NE.AND; BRA
//!     WARPGROUP.DEPBAR.LE imm=0; SYNCS.ARRIVE.TRANS64.RED.A1T0 addr=empty[last]
//!     epilogue per 32-column subtile: 8 F2FP.BF16.F32.PACK_AB; 2 STSM.16.M88.4; @1 UTMASTG.2D
//!     (SharedStore: + LDS.128, STG.E.128; Direct: F2FP + STG.E from the fragments)
//!     IADD3; ISETP.GE.AND; BRA                                      # next tile of the scheduler
//! ```
//! Each consumer warpgroup owns `r = BM/(64·consumers)` blocks of 64 rows (accumulators
//! `R24x(BN/2)` per block: 64×256 fp32 = 128 registers per thread). Per k-iteration the 128×256×64
//! bf16 default issues, in the producer warp, 2 SYNCS, 2 UTMALDG, 2 BRA, IADD3, ISETP, and in each
//! consumer warp 4 HGMMA, 2 SYNCS, 2 WARPGROUP, 2 BRA, IADD3, ISETP (pinned by the tests, measured
//! by [`k_iteration_mix`]). fp16 is `HGMMA.64xNx16.F32`,
//! tf32 `HGMMA.64xNx8.F32.TF32`, fp8 `QGMMA.64xNx32.F32.E4M3.E4M3`. Block-scaled fp8 (DeepGEMM,
//! 1×128 scales for A, 128×128 for B, BK = 128): per k-iteration `LDS` ×3 (two A scales, one B
//! scale), `QGMMA` into temporaries, `WARPGROUP.DEPBAR.LE imm=0`, release, `FMUL` ×2 and one `FFMA`
//! per accumulator register (`final += scale · tmp`); the producer also loads the A scales by TMA.
//!
//! Simulator conventions (and where they differ from the real kernel):
//! - mbarriers are identified by their shared address; the full barrier expects one arrival (the
//!   producer's expect-tx arrive, whose immediate is the stage's bytes), the empty barrier one
//!   per consumer warp. The copies after the arrive, and the peers' multicast slices, count
//!   towards those bytes.
//! - Consumer releases are `SYNCS.ARRIVE.TRANS64.RED.A1T0` (transaction count 0: a plain arrival).
//! - The pipeline starts with the consumers' arrivals on every empty barrier (CUTLASS starts the
//!   producer on the opposite phase); the instruction mix per k-iteration is unaffected.
//! - Multicast: each CTA of a cluster loads its `1/cluster_m` slice of the B tile (and `1/cluster_n`
//!   of the A tile) with `.MULTICAST`, so L2 and DRAM traffic are those of multicast, and the
//!   simulator delivers each slice to every CTA of the cluster. Consumer releases are not sent
//!   to the peer CTAs' empty barriers (CUTLASS does), so a producer may run one stage ahead of a
//!   slower peer.
//! - Named barriers between the consumer warpgroups (epilogue) are omitted (the simulator's
//!   `BAR.SYNC` is CTA-wide); each consumer warp stores its own 16-row slice. The
//!   `fence.proxy.async` before the TMA store is omitted (the simulator's fences wait for all
//!   outstanding memory).
//! - Persistent scheduler: the grid is `(gx, gy, gz)` ≤ the CTAs that fit at once (clusters within
//!   a GPC), and CTA `(x, y, z)` runs the tiles `(x + gx·p, y + gy·q, z + gz·u)`: each wave covers
//!   a `gx × gy` block of tiles (rasterisation: `raster_swizzle` fixes the block's extent along M;
//!   0 picks the block that minimises waves, then the bytes a wave touches). Tile coordinates are
//!   affine in the loop counters, so one program serves every CTA; CTAs at ragged edges get
//!   variants with fewer tiles. A linear scheduler (CUTLASS) fills partial waves with the next
//!   panel's tiles; this one leaves them partial.
//! - Stages restart at 0 for each tile (CUTLASS carries the pipeline state over); identical when
//!   the k-iterations per tile are a multiple of the stages.
//!
//! `KernelInfo::regs_per_thread` is what a launch of `1 + consumers` warpgroups gets (168 for
//! three); the producer's `USETMAXREG.DEALLOC` to 40 gives back exactly what the consumers'
//! `TRY_ALLOC` to 232 (240 for one consumer) take from the CTA's pool, which the simulator
//! checks (sim-core `sm/regalloc.rs`: a consumer waits for the release).

pub(crate) mod ampere;
pub mod grouped;
pub mod grouped_params;
pub(crate) mod hopper;
pub mod params;
mod reduce;
mod select;
mod twins;

use std::collections::BTreeMap;
use std::fmt;

use gpusim_configs::Arch;
use gpusim_isa::{Semantics, Trace};

pub use select::{MulticastRule, Style, deepgemm_recipe, tuned_recipe};
pub use twins::{Twin, grouped_hopper_twin, grouped_twin_problem};

/// Input element type; accumulation is fp32.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dtype {
    Bf16,
    Fp16,
    Tf32,
    /// FP8 E4M3.
    Fp8,
}

impl Dtype {
    pub const ALL: [Dtype; 4] = [Dtype::Bf16, Dtype::Fp16, Dtype::Tf32, Dtype::Fp8];

    /// Bytes per input element.
    pub const fn bytes(self) -> u64 {
        match self {
            Dtype::Bf16 | Dtype::Fp16 => 2,
            Dtype::Tf32 => 4,
            Dtype::Fp8 => 1,
        }
    }

    /// Bytes per output element (bf16 for fp8, as DeepGEMM writes; fp32 for tf32).
    pub const fn out_bytes(self) -> u64 {
        match self {
            Dtype::Tf32 => 4,
            _ => 2,
        }
    }

    pub const fn name(self) -> &'static str {
        match self {
            Dtype::Bf16 => "bf16",
            Dtype::Fp16 => "fp16",
            Dtype::Tf32 => "tf32",
            Dtype::Fp8 => "fp8",
        }
    }

    /// The chip's `tensor.flops_per_clk_per_sm` key.
    pub const fn rate_key(self) -> &'static str {
        self.name()
    }

    pub fn parse(s: &str) -> Option<Dtype> {
        match s.to_ascii_lowercase().as_str() {
            "bf16" => Some(Dtype::Bf16),
            "fp16" | "f16" | "half" => Some(Dtype::Fp16),
            "tf32" => Some(Dtype::Tf32),
            "fp8" | "e4m3" | "fp8e4m3" => Some(Dtype::Fp8),
            _ => None,
        }
    }

    /// The conversion that packs two fp32 results into the output type.
    pub(crate) fn pack(self) -> &'static str {
        match self {
            Dtype::Fp16 => "F2FP.F16.F32.PACK_AB",
            _ => "F2FP.BF16.F32.PACK_AB",
        }
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A GEMM problem: `batch` independent `M×N×K` products.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmProblem {
    pub m: u64,
    pub n: u64,
    pub k: u64,
    pub batch: u64,
    pub dtype: Dtype,
    /// DeepGEMM-style fp8 with 1×128 (A) and 128×128 (B) scaling blocks.
    pub block_scaled: bool,
}

/// Largest M, N or K accepted.
const MAX_DIM: u64 = 1 << 22;

impl GemmProblem {
    pub fn new(m: u64, n: u64, k: u64, dtype: Dtype) -> GemmProblem {
        GemmProblem { m, n, k, batch: 1, dtype, block_scaled: false }
    }

    /// `2·M·N·K·batch`.
    pub fn flops(&self) -> u64 {
        2 * self.m * self.n * self.k * self.batch
    }

    pub fn validate(&self) -> Result<(), String> {
        for (name, v) in [("m", self.m), ("n", self.n), ("k", self.k)] {
            if v == 0 || v > MAX_DIM {
                return Err(format!("{name} = {v} must be between 1 and {MAX_DIM}"));
            }
        }
        if self.batch == 0 || self.batch > 1 << 16 {
            return Err(format!("batch = {} must be between 1 and 65536", self.batch));
        }
        if self.block_scaled && self.dtype != Dtype::Fp8 {
            return Err(format!("block scaling is for fp8 inputs, not {}", self.dtype));
        }
        let bytes = self.m.max(self.n) as u128 * self.k as u128 * self.batch as u128 * self.dtype.bytes() as u128;
        let out = self.m as u128 * self.n as u128 * self.batch as u128 * 4;
        if bytes.max(out) > 1 << 40 {
            return Err("the operands exceed 1 TiB".into());
        }
        Ok(())
    }
}

impl fmt::Display for GemmProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}x{} {}", self.m, self.n, self.k, self.dtype)?;
        if self.block_scaled {
            f.write_str(" block-scaled")?;
        }
        if self.batch > 1 {
            write!(f, " batch {}", self.batch)?;
        }
        Ok(())
    }
}

/// How the Hopper recipe writes C.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Epilogue {
    /// Registers → shared memory (`STSM`) → TMA store (`UTMASTG`).
    TmaStore,
    /// Registers → shared memory → `LDS.128` → `STG.E.128`.
    SharedStore,
    /// `STG.E` straight from the accumulator fragments.
    Direct,
}

impl Epilogue {
    pub const fn name(self) -> &'static str {
        match self {
            Epilogue::TmaStore => "tma-store",
            Epilogue::SharedStore => "shared-store",
            Epilogue::Direct => "direct",
        }
    }

    pub fn parse(s: &str) -> Option<Epilogue> {
        match s.to_ascii_lowercase().replace('_', "-").as_str() {
            "tma-store" | "tma" => Some(Epilogue::TmaStore),
            "shared-store" | "shared" | "smem" => Some(Epilogue::SharedStore),
            "direct" | "stg" => Some(Epilogue::Direct),
            _ => None,
        }
    }
}

/// The sm_80 multistage kernel (see the module documentation for its SASS).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AmpereRecipe {
    pub cta_m: u32,
    pub cta_n: u32,
    /// K per stage (elements).
    pub cta_k: u32,
    pub warp_m: u32,
    pub warp_n: u32,
    pub stages: u32,
    pub split_k: u32,
    /// CTA rasterisation: `GemmIdentityThreadblockSwizzle<swizzle>` (a power of two, 1 = none). The
    /// largest power of two up to it that divides the N tiles is used; none when `batch·split_k > 1`.
    pub swizzle: u32,
}

/// The sm_90a warp-specialised kernel (see the module documentation for its SASS).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HopperRecipe {
    pub cta_m: u32,
    pub cta_n: u32,
    pub cta_k: u32,
    pub stages: u32,
    /// Consumer warpgroups (1 or 2).
    pub consumers: u32,
    pub cluster_m: u32,
    pub cluster_n: u32,
    pub multicast: bool,
    pub persistent: bool,
    /// Extent along M (in tiles) of the block of tiles a wave of the persistent scheduler covers;
    /// 0: chosen automatically.
    pub raster_swizzle: u32,
    pub split_k: u32,
    pub epilogue: Epilogue,
}

/// A kernel design.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recipe {
    Ampere(AmpereRecipe),
    Hopper(HopperRecipe),
}

impl Recipe {
    pub fn style(&self) -> Style {
        match self {
            Recipe::Ampere(_) => Style::Ampere,
            Recipe::Hopper(_) => Style::Hopper,
        }
    }

    pub fn split_k(&self) -> u32 {
        match self {
            Recipe::Ampere(a) => a.split_k,
            Recipe::Hopper(h) => h.split_k,
        }
    }
}

impl fmt::Display for Recipe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Recipe::Ampere(a) => write!(
                f,
                "ampere cta_m={} cta_n={} cta_k={} warp_m={} warp_n={} stages={} split_k={} swizzle={}",
                a.cta_m, a.cta_n, a.cta_k, a.warp_m, a.warp_n, a.stages, a.split_k, a.swizzle
            ),
            Recipe::Hopper(h) => write!(
                f,
                "hopper cta_m={} cta_n={} cta_k={} stages={} consumers={} cluster_m={} cluster_n={} multicast={} \
                 persistent={} raster_swizzle={} split_k={} epilogue={}",
                h.cta_m,
                h.cta_n,
                h.cta_k,
                h.stages,
                h.consumers,
                h.cluster_m,
                h.cluster_n,
                h.multicast,
                h.persistent,
                h.raster_swizzle,
                h.split_k,
                h.epilogue.name()
            ),
        }
    }
}

/// What a tuned library picks for `p` on `arch`: the Hopper recipe on compute capability 9.0 and
/// later, the Ampere recipe before; the tile (from a small candidate set per style and dtype) and
/// split-K factor that minimise the estimated time (waves × tile time, with partial tiles and the
/// split-K reduction counted).
pub fn default_recipe(arch: &Arch, p: &GemmProblem) -> Recipe {
    let style = if arch.compute_capability >= 90 { Style::Hopper } else { Style::Ampere };
    tuned_recipe(arch, p, style)
}

/// The trace of recipe `r` for problem `p` on `arch`: the GEMM kernel, plus the split-K reduction
/// kernel when `split_k > 1`. Errors say which parameter does not fit the problem or the chip.
pub fn generate(arch: &Arch, p: &GemmProblem, r: &Recipe) -> Result<Trace, String> {
    p.validate()?;
    match r {
        Recipe::Ampere(a) => ampere::generate(arch, p, a),
        Recipe::Hopper(h) => hopper::generate(arch, p, h),
    }
}

/// Checks that `r` can be generated for `p` on `arch`, without generating it.
pub(crate) fn generate_check(arch: &Arch, p: &GemmProblem, r: &Recipe) -> Result<(), String> {
    p.validate()?;
    match r {
        Recipe::Ampere(a) => ampere::plan(arch, p, a).map(|_| ()),
        Recipe::Hopper(h) => hopper::plan(arch, p, h).map(|_| ()),
    }
}

/// Shared memory per CTA of the main kernel of `r` for `p` (what [`generate`] puts in
/// `KernelInfo::smem_bytes`).
pub fn smem_bytes(arch: &Arch, p: &GemmProblem, r: &Recipe) -> Result<u32, String> {
    match r {
        Recipe::Ampere(a) => ampere::plan(arch, p, a).map(|pl| pl.smem as u32),
        Recipe::Hopper(h) => hopper::plan(arch, p, h).map(|pl| pl.smem as u32),
    }
}

/// The parameter names [`recipe_from_params`] accepts for each style ([`params::AMPERE`],
/// [`params::HOPPER`]).
pub const AMPERE_PARAMS: &[&str] = &["cta_m", "cta_n", "cta_k", "warp_m", "warp_n", "stages", "split_k", "swizzle"];
pub const HOPPER_PARAMS: &[&str] = &[
    "cta_m",
    "cta_n",
    "cta_k",
    "stages",
    "consumers",
    "cluster_m",
    "cluster_n",
    "multicast",
    "persistent",
    "raster_swizzle",
    "split_k",
    "epilogue",
];

/// `base` with each `(key, value)` override applied through the style's parameter table
/// ([`params::AMPERE`], [`params::HOPPER`]); values are range-checked here, and checked against
/// the problem and the chip when the trace is generated.
pub fn recipe_from_params(base: Recipe, params: &[(String, String)]) -> Result<Recipe, String> {
    let mut r = base;
    match &mut r {
        Recipe::Ampere(a) => crate::params::apply("ampere recipe", params::AMPERE, params, a)?,
        Recipe::Hopper(h) => crate::params::apply("hopper recipe", params::HOPPER, params, h)?,
    }
    Ok(r)
}

/// The problem of `s`, the recipe (tuned for it, then `overrides` applied) and its trace.
pub fn generate_spec(
    arch: &Arch,
    s: &params::GemmSpec,
    overrides: &[(String, String)],
) -> Result<(Trace, GemmProblem, Recipe), String> {
    let p = GemmProblem { m: s.m, n: s.n, k: s.k, batch: s.batch, dtype: s.dtype, block_scaled: s.block_scaled };
    p.validate()?;
    let base = match s.recipe {
        None => default_recipe(arch, &p),
        Some(style) => tuned_recipe(arch, &p, style),
    };
    let r = recipe_from_params(base, overrides)?;
    let t = generate(arch, &p, &r).map_err(|e| format!("{r}: {e}"))?;
    Ok((t, p, r))
}

/// The steady-state instructions one warp of a role issues per k-iteration (one stage of
/// `cta_k`), by base mnemonic (`HMMA`, `HGMMA`, `LDGSTS`, `UTMALDG`, `LDSM`, `BAR`, `SYNCS`, ...).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoleMix {
    /// The warp program's name (`mma_wn0`, `producer`, `consumer`, ...).
    pub role: String,
    /// Warps of a CTA that run it.
    pub warps: Vec<u32>,
    pub per_iteration: BTreeMap<String, u64>,
}

/// Measures the per-k-iteration instruction mix of recipe `r` (with `split_k = 1`) for inputs of
/// `dtype`: the difference between the dynamic instruction counts of one CTA for two values of K
/// one round of stages apart, divided by the k-iterations in between. Roles that issue nothing per
/// k-iteration are left out.
pub fn k_iteration_mix(arch: &Arch, dtype: Dtype, block_scaled: bool, r: &Recipe) -> Result<Vec<RoleMix>, String> {
    let (bm, bn, bk, stages, cm, cn) = match r {
        Recipe::Ampere(a) => (a.cta_m, a.cta_n, a.cta_k, a.stages, 1, 1),
        Recipe::Hopper(h) => (h.cta_m, h.cta_n, h.cta_k, h.stages, h.cluster_m.max(1), h.cluster_n.max(1)),
    };
    let mut r1 = *r;
    match &mut r1 {
        Recipe::Ampere(a) => a.split_k = 1,
        Recipe::Hopper(h) => h.split_k = 1,
    }
    let base = |k: u64| GemmProblem { m: (bm * cm) as u64, n: (bn * cn) as u64, k, batch: 1, dtype, block_scaled };
    let round = stages.max(1) as u64 * bk as u64;
    let (k1, k2) = (4 * round, 5 * round);
    type WarpCounts = Vec<(String, u32, BTreeMap<String, u64>)>;
    let count = |k: u64| -> Result<WarpCounts, String> {
        let t = generate(arch, &base(k), &r1)?;
        let kt = &t.kernels[0];
        let cta = kt.cta(0);
        let mut out = Vec::new();
        for (w, prog) in cta.warps.iter().enumerate() {
            let mut m = BTreeMap::new();
            for (op, n) in dynamic_op_counts(prog) {
                let base = kt.ops.get(op).base.clone();
                *m.entry(base).or_insert(0) += n;
            }
            out.push((prog.name.clone(), w as u32, m));
        }
        Ok(out)
    };
    let (c1, c2) = (count(k1)?, count(k2)?);
    let iters = (k2 - k1) / bk as u64;
    let mut roles: Vec<RoleMix> = Vec::new();
    for ((name, w, a), (_, _, b)) in c1.iter().zip(&c2) {
        let mut per = BTreeMap::new();
        for (op, n2) in b {
            let n1 = a.get(op).copied().unwrap_or(0);
            let d = n2.saturating_sub(n1);
            if d == 0 {
                continue;
            }
            if d % iters != 0 {
                return Err(format!("{name}: {op} count grows by {d} over {iters} k-iterations (not uniform)"));
            }
            per.insert(op.clone(), d / iters);
        }
        if per.is_empty() {
            continue;
        }
        match roles.iter_mut().find(|r| r.role == *name && r.per_iteration == per) {
            Some(r) => r.warps.push(*w),
            None => roles.push(RoleMix { role: name.clone(), warps: vec![*w], per_iteration: per }),
        }
    }
    Ok(roles)
}

/// Dynamic count of each op id one execution of `prog` issues (loops multiplied out, not walked),
/// with the per-CTA parameters of CTA (0, 0, 0), warp 0.
pub fn dynamic_op_counts(prog: &gpusim_isa::Program) -> BTreeMap<gpusim_isa::OpId, u64> {
    dynamic_op_counts_with(prog, &prog.eval_params([0, 0, 0], 0))
}

/// [`dynamic_op_counts`] for the per-CTA parameter values `params` (a CTA's trip counts).
pub fn dynamic_op_counts_with(
    prog: &gpusim_isa::Program,
    params: &[i64; gpusim_isa::program::MAX_PARAMS],
) -> BTreeMap<gpusim_isa::OpId, u64> {
    use gpusim_isa::Step;
    let mut out = BTreeMap::new();
    let mut mult: Vec<u64> = vec![1];
    for s in &prog.steps {
        match *s {
            Step::Inst(i) => *out.entry(i.op).or_insert(0) += *mult.last().unwrap_or(&1),
            Step::Loop { count, .. } => {
                let m = mult.last().copied().unwrap_or(1).saturating_mul(count.resolve(params) as u64);
                mult.push(m);
            }
            Step::EndLoop { .. } => {
                mult.pop();
            }
        }
    }
    out
}

/// Tensor-core FLOPs the trace executes: the sum over every warp of every CTA of its MMA
/// instructions' FLOPs, a warpgroup MMA counting a quarter per warp (as the simulator counts).
pub fn tensor_flops(t: &Trace) -> u64 {
    let mut total = 0u64;
    for k in &t.kernels {
        let per_op: Vec<u64> = k
            .ops
            .iter()
            .map(|(_, d)| match d.tensor {
                Some(s) if d.semantics == Semantics::WgmmaAsync => s.flops() / 4,
                Some(s) => s.flops(),
                None => 0,
            })
            .collect();
        let flops_with = |p: &gpusim_isa::Program, params: &[i64; gpusim_isa::program::MAX_PARAMS]| -> u64 {
            dynamic_op_counts_with(p, params).into_iter().map(|(op, n)| per_op[op as usize] * n).sum()
        };
        if k.programs.iter().any(|p| p.has_param_loops()) {
            // Per-CTA trip counts: every CTA's warps, each distinct parameter vector counted once.
            let mut seen: BTreeMap<(usize, [i64; gpusim_isa::program::MAX_PARAMS]), u64> = BTreeMap::new();
            for linear in 0..k.info.num_ctas() {
                let coord = k.info.grid.unlinear(linear);
                let layout = k.layout.overrides.get(&linear).unwrap_or(&k.layout.default);
                for (w, &pi) in layout.iter().enumerate() {
                    let p = &k.programs[pi as usize];
                    let params = p.eval_params(coord.as_array(), w as u32);
                    total += *seen.entry((pi as usize, params)).or_insert_with(|| flops_with(p, &params));
                }
            }
            continue;
        }
        // Per-program FLOPs, then per CTA layout.
        let prog_flops: Vec<u64> = k.programs.iter().map(|p| flops_with(p, &p.eval_params([0, 0, 0], 0))).collect();
        let layout_flops = |l: &Vec<u32>| -> u64 { l.iter().map(|&p| prog_flops[p as usize]).sum() };
        let ctas = k.info.num_ctas();
        let overridden = k.layout.overrides.len() as u64;
        if ctas > overridden {
            total += layout_flops(&k.layout.default) * (ctas - overridden);
        }
        for l in k.layout.overrides.values() {
            total += layout_flops(l);
        }
    }
    total
}

/// Where the tensors live (generated traces use their own address space from here).
pub(crate) const REGION_BASE: u64 = 0x7f00_0000_0000;

/// Byte addresses of the operands, each region padded to whole tiles.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Regions {
    pub a: u64,
    pub b: u64,
    /// Output C (the problem's output type).
    pub c: u64,
    /// fp32 split-K partials (`batch·split_k` planes of `M'×N'`).
    pub w: u64,
    /// fp8 block scales of A.
    pub sfa: u64,
}

impl Regions {
    /// Lays out regions of the given sizes one after another, 2 MiB aligned with a 2 MiB gap.
    pub(crate) fn new(sizes: [u64; 5]) -> Regions {
        let [a, b, c, w, sfa] = lay_out(sizes);
        Regions { a, b, c, w, sfa }
    }
}

/// Start addresses of regions of the given sizes laid out one after another from [`REGION_BASE`],
/// each 2 MiB aligned with a 2 MiB gap (every generated kernel's tensors).
pub(crate) fn lay_out<const N: usize>(sizes: [u64; N]) -> [u64; N] {
    let mut at = REGION_BASE;
    sizes.map(|size| {
        let here = at;
        at = (at + size).div_ceil(2 << 20) * (2 << 20) + (2 << 20);
        here
    })
}

/// Problem dimensions in tiles, shared by both styles.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Geom {
    pub bm: u64,
    pub bn: u64,
    pub bk: u64,
    pub tm: u64,
    pub tn: u64,
    pub split: u64,
    /// k-tiles per split.
    pub kps: u64,
    /// `batch · split`.
    pub z: u64,
    pub batch: u64,
    /// Input element bytes.
    pub elt: u64,
    /// Element bytes of what the main kernel writes (4 for split-K partials).
    pub oe: u64,
    pub mp: u64,
    pub np: u64,
    /// K padded per batch: `split · kps · bk`.
    pub kp: u64,
    pub regions: Regions,
}

impl Geom {
    pub(crate) fn new(p: &GemmProblem, bm: u64, bn: u64, bk: u64, split: u64) -> Result<Geom, String> {
        if split == 0 || split > 32 {
            return Err(format!("split_k = {split} must be between 1 and 32"));
        }
        let kt = p.k.div_ceil(bk);
        if split > kt {
            return Err(format!("split_k = {split} exceeds the {kt} k-tiles of {} elements", bk));
        }
        let kps = kt.div_ceil(split);
        let tm = p.m.div_ceil(bm);
        let tn = p.n.div_ceil(bn);
        let (mp, np, kp) = (tm * bm, tn * bn, split * kps * bk);
        let elt = p.dtype.bytes();
        let oe = if split > 1 { 4 } else { p.dtype.out_bytes() };
        let z = p.batch * split;
        let a = mp * p.batch * kp * elt;
        let b = np * p.batch * kp * elt;
        let c = p.batch * mp * np * p.dtype.out_bytes();
        let w = if split > 1 { z * mp * np * 4 } else { 0 };
        let sfa = if p.block_scaled { mp * p.batch * (kp / 128).max(1) * 4 } else { 0 };
        let total = a + b + c + w + sfa;
        if total > 1 << 42 {
            return Err("the padded operands exceed 4 TiB".into());
        }
        for (what, v) in [("tiles along M", tm), ("tiles along N", tn), ("batch·split_k", z)] {
            if v > u32::MAX as u64 / 16 {
                return Err(format!("too many {what}: {v}"));
            }
        }
        Ok(Geom {
            bm,
            bn,
            bk,
            tm,
            tn,
            split,
            kps,
            z,
            batch: p.batch,
            elt,
            oe,
            mp,
            np,
            kp,
            regions: Regions::new([a, b, c, w, sfa]),
        })
    }

    /// Where the main kernel writes (C, or the split-K partials).
    pub(crate) fn out_base(&self) -> u64 {
        if self.split > 1 { self.regions.w } else { self.regions.c }
    }
}

pub(crate) use crate::asm::round_up;

/// Lane offsets of a warp copying rows of `row_bytes` bytes (a power of two from 16 to 512) in
/// 16-byte chunks: lane `l` takes chunk `l % cpr` of row `l / cpr`, rows `pitch` bytes apart.
pub(crate) fn row_lanes(row_bytes: u64, pitch: u64) -> Vec<i64> {
    let cpr = (row_bytes / 16).max(1);
    (0..32u64).map(|l| ((l / cpr) * pitch + (l % cpr) * 16) as i64).collect()
}

/// CTAs of one kernel that fit on an SM by warps, threads, CTA slots, registers (per sub-core, in
/// the allocation unit) and shared memory: [`gpusim_configs::occupancy`] (the simulator's own
/// calculator), 0 where no CTA fits.
pub(crate) fn ctas_per_sm(arch: &Arch, threads: u64, regs: u64, smem: u64) -> u64 {
    let (Ok(threads), Ok(regs), Ok(smem)) = (u32::try_from(threads), u32::try_from(regs), u32::try_from(smem)) else {
        return 0;
    };
    let mut k =
        gpusim_isa::KernelInfo::new(0, "occupancy", gpusim_isa::Dim3::ONE, gpusim_isa::Dim3::new(threads, 1, 1));
    k.regs_per_thread = regs;
    k.smem_bytes = smem;
    gpusim_configs::occupancy::occupancy(arch, &k).map_or(0, |o| o.ctas_per_sm as u64)
}

/// CTAs that run at once: clusters of `cluster` CTAs are placed within one GPC
/// ([`gpusim_configs::Sm::gpc_of`], as the simulator spreads them).
/// One pass over the SMs: `gpc_of` never decreases with the SM index, so each GPC's SMs
/// are a run (the GEMM tuner asks for every candidate tile).
pub(crate) fn concurrent_ctas(arch: &Arch, per_sm: u64, cluster: u64) -> u64 {
    let cluster = cluster.max(1);
    let in_gpc = |n: u64| (n * per_sm / cluster) * cluster;
    let (mut total, mut run, mut gpc) = (0, 0, 0);
    for s in 0..arch.sm.count {
        let g = arch.sm.gpc_of(s);
        if g != gpc {
            total += in_gpc(run);
            (run, gpc) = (0, g);
        }
        run += 1;
    }
    total + in_gpc(run)
}

#[cfg(test)]
mod tests {
    /// The one-pass count equals the count per GPC of the SMs `gpc_of` puts there.
    #[test]
    fn concurrent_ctas_counts_each_gpc_whole_clusters() {
        let mut arch = gpusim_configs::load_preset("h100-sxm5-80gb").unwrap();
        for count in [1, 7, 108, 114, 132, 144] {
            for gpcs in [1, 3, 7, 8, 200] {
                (arch.sm.count, arch.sm.gpcs) = (count, gpcs);
                for per_sm in 0..4 {
                    for cluster in [0, 1, 2, 3, 4, 16] {
                        let by_gpc: u64 = (0..arch.sm.gpcs_clamped())
                            .map(|g| {
                                let n = (0..count).filter(|&s| arch.sm.gpc_of(s) == g).count() as u64;
                                (n * per_sm / cluster.max(1)) * cluster.max(1)
                            })
                            .sum();
                        assert_eq!(
                            super::concurrent_ctas(&arch, per_sm, cluster),
                            by_gpc,
                            "{count} {gpcs} {per_sm} {cluster}"
                        );
                    }
                }
            }
        }
    }
}

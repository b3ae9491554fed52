//! CUDA twins: the GEMM recipes against real compiled SASS.
//!
//! `workloads/cuda/` holds our own CUDA C++ for the GEMM designs the recipes model: an
//! Ampere-style multistage `cp.async` + `ldmatrix` + `mma.sync` kernel (sm_80), a Hopper-style
//! warp-specialised TMA + mbarrier + `wgmma` kernel (sm_90a), and its M-grouped contiguous form
//! (DeepGEMM style, the MoE expert GEMMs; recipe `gemm::grouped_hopper_twin` through
//! `grouped::generate_grouped`). These tests compile them with NVRTC
//! and disassemble the cubins with nvdisasm (`scripts/sass.py`, PyPI wheels, no GPU), find the
//! main k-loop in the SASS and check that the matching recipe's trace issues the same instruction
//! mix per k-iteration: HMMA/HGMMA, LDGSTS/UTMALDG, LDSM, BAR and SYNCS, summed over the warps of
//! one CTA.
//!
//! The wheels live in `$GPUSIM_WHEEL_CACHE` (default `$HOME/.cache/gpusim-wheels`), where
//! `scripts/test.sh` (the README's test command, which CI runs) installs them. Without them these tests fail with a message that says how to
//! install them: they never skip.
//!
//! The toolchain, SASS-parsing, loop-finding and comparison helpers are in `common/mod.rs`, shared
//! with the attention twins' test (`attention_twins.rs`).
//!
//! ## How a k-iteration is counted
//! - **SASS.** A loop is a label and a later `BRA` back to it with no unconditional `BRA`/`EXIT`
//!   between them (that excludes the out-of-line mbarrier retry blocks, which jump back into the
//!   middle of a loop). The k-loop of a role is the smallest loop that contains that role's key
//!   instruction (a tensor op for the MMA warps, a global-to-shared copy for a producer) and a
//!   synchronisation (BAR, SYNCS). Its instructions are counted statically, once each: the
//!   mbarrier retry paths that ptxas moves out of line are not counted (they run only while the
//!   data is late). A SASS program is what every warp that runs it executes, so its counts are
//!   multiplied by the number of warps that run the loop, which the kernel's source fixes (8 for
//!   the Ampere twin; 8 consumer warps and 1 producer warp for both Hopper twins).
//! - **Trace.** Each warp of one CTA runs a `Program`. Its k-loop is found by the same rule over
//!   `Step::Loop`s; one iteration is counted with nested loops expanded. A loop body may hold
//!   several k-tiles (an unrolled ring of stages): the body's tensor FLOPs (for MMA warps) or
//!   copied bytes (for copy-only warps), summed over the warps of that role, divided by one CTA
//!   k-tile's, give the k-tiles per iteration, which must be a whole number and divides the
//!   counts.
//!
//! Both sides must then agree exactly on HMMA, HGMMA, LDGSTS, UTMALDG, LDSM, BAR and SYNCS per
//! CTA k-tile, and on the tensor instruction's shape. Everything else (address arithmetic,
//! `DEPBAR`, `LDGDEPBAR`, `WARPGROUP.*`, `R2UR`, ...) is printed, not compared. The k-loop found
//! in the trace is also checked against the recipe's own measurement, `gemm::k_iteration_mix`.
//!
//! ## Differences that are not compared (as of CUDA 13.5.37)
//! - Address and descriptor arithmetic: the recipes emit only the loop control (`IADD3`,
//!   `ISETP`, `BRA`). Per warp and k-tile the Ampere twin issues 77 instructions against the
//!   recipe's 56 (the extra are `IMAD`/`IADD3`/`LOP3` for stage addresses and predicates; not
//!   counting 3 never-executed `@!PT LDS`); a Hopper consumer warp 55 against 12 (`R2UR`,
//!   `UMOV`, `ULOP3` building wgmma descriptors), the producer warp 27 against 8.
//! - Hopper consumers: the twin waits for its own wgmma batch (`wgmma.wait_group 0`,
//!   `WARPGROUP.DEPBAR.LE gsb0, 0x0`) and then releases the stage it read; the recipe keeps one
//!   batch in flight (`WARPGROUP.DEPBAR.LE imm=1`) and releases the previous stage, as CUTLASS
//!   does. One `WARPGROUP.DEPBAR` and one release per k-tile either way.
//! - Hopper releases: the twin's 256 consumer threads each arrive (`SYNCS.ARRIVE.TRANS64.A1T0`,
//!   one instruction per warp), the recipe's consumer warps arrive once each (`SYNCS.ARRIVE.A1T0`,
//!   a barrier count of 8); the producer's expect-tx arrive comes before both TMA copies in the
//!   twin and between them in the recipe (see the recipe's documentation for why).
//! - The grouped twin's k-loop is the Hopper twin's with a 128-column tile (a consumer warp 55
//!   instructions per k-tile against the recipe's 12, the producer warp 22 against 8), and the
//!   same two differences. Its per-tile part differs once, asserted by
//!   `grouped_twin_reads_its_expert_once_per_tile`: each of the twin's 12 warps loads the
//!   m-block's expert with one `LDG` before the CTA barrier, where the recipe reads it as the
//!   per-CTA parameter p0 from a table and issues nothing (a 4-byte load per warp per tile, off
//!   the k-loop).

mod common;

use std::collections::BTreeMap;
use std::sync::OnceLock;

use common::{
    Mix, Role, Work, add_scaled, by_base, check_reference, compare, compile, parse_sass, sass_kloop, sass_loops,
    sass_mix, trace_mix,
};
use gpusim_isa::{KernelTrace, Program, Step};

/// The instruction classes (base mnemonics) that must match exactly.
const COMPARED: [&str; 7] = ["HMMA", "HGMMA", "LDGSTS", "UTMALDG", "LDSM", "BAR", "SYNCS"];

/// Intentional differences between a twin and its recipe, as (twin, base mnemonic, why). A class
/// listed here is printed but not asserted. Empty: the recipes reproduce the twins exactly.
const KNOWN_DIFFERENCES: &[(&str, &str, &str)] = &[];

fn ampere_sass() -> &'static str {
    static S: OnceLock<String> = OnceLock::new();
    S.get_or_init(|| compile("gemm_mma_sm80", "sm_80"))
}

fn hopper_sass() -> &'static str {
    static S: OnceLock<String> = OnceLock::new();
    S.get_or_init(|| compile("gemm_wgmma_sm90a", "sm_90a"))
}

fn grouped_hopper_sass() -> &'static str {
    static S: OnceLock<String> = OnceLock::new();
    S.get_or_init(|| compile("grouped_gemm_wgmma_sm90a", "sm_90a"))
}

/// The tile of one CTA k-iteration.
#[derive(Clone, Copy, Debug)]
struct Tile {
    m: u64,
    n: u64,
    k: u64,
    /// Bytes per operand element.
    elem: u64,
}

impl Tile {
    fn flops(&self) -> u64 {
        2 * self.m * self.n * self.k
    }
    fn operand_bytes(&self) -> u64 {
        (self.m + self.n) * self.k * self.elem
    }
    fn work(&self) -> Work {
        Work { name: "k-tile", flops: self.flops(), bytes: self.operand_bytes() }
    }
}

/// The k-loop found in the trace must give what the recipe's own steady-state measurement
/// (`gemm::k_iteration_mix`, a difference of dynamic counts between two values of K) gives, for
/// the compared classes.
fn check_against_measured(trace: &BTreeMap<Role, Mix>, measured: &BTreeMap<String, u64>) {
    let mut all = Mix::new();
    for m in trace.values() {
        add_scaled(&mut all, m, 1);
    }
    let found = by_base(&all);
    for class in COMPARED {
        assert_eq!(
            found.get(class).copied().unwrap_or(0),
            measured.get(class).copied().unwrap_or(0),
            "{class}: the trace's k-loop and gemm::k_iteration_mix disagree (found {found:?}, measured {measured:?})"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The recipes

use gpusim_workloads::gemm::grouped::{GroupedProblem, Layout, generate_grouped, grouped_recipe};
use gpusim_workloads::gemm::{self, Dtype, GemmProblem, Recipe};

const AMPERE_TILE: Tile = Tile { m: 128, n: 128, k: 32, elem: 2 };
const HOPPER_TILE: Tile = Tile { m: 128, n: 256, k: 64, elem: 2 };
const GROUPED_TILE: Tile = Tile { m: 128, n: 128, k: 64, elem: 2 };

fn ampere_recipe() -> Recipe {
    gemm::Twin::Ampere.recipe()
}

fn hopper_recipe() -> Recipe {
    gemm::Twin::Hopper.recipe()
}

fn arch(preset: &str) -> gpusim_configs::Arch {
    gpusim_configs::load_preset(preset).unwrap_or_else(|e| panic!("preset {preset}: {e}"))
}

/// The recipe's GEMM kernel for a problem of a few CTAs and 64 k-tiles.
fn recipe_kernel(preset: &str, r: &Recipe, tile: Tile) -> KernelTrace {
    let p = GemmProblem::new(2 * tile.m, 2 * tile.n, 64 * tile.k, Dtype::Bf16);
    let mut t = gemm::generate(&arch(preset), &p, r).unwrap_or_else(|e| panic!("{r}: {e}"));
    assert_eq!(t.kernels.len(), 1, "{r}: expected one kernel (no split-K reduction)");
    let k = t.kernels.remove(0);
    k.check().expect("well-formed kernel");
    k
}

/// The grouped twin's recipe's kernel for the grouped problem `p`, through `generate_grouped`.
fn grouped_kernel(preset: &str, p: &GroupedProblem) -> KernelTrace {
    let r = gemm::grouped_hopper_twin();
    let mut t = generate_grouped(&arch(preset), p, &r).unwrap_or_else(|e| panic!("{p}: {e}"));
    assert_eq!(t.kernels.len(), 1, "{p}: expected one kernel");
    let k = t.kernels.remove(0);
    k.check().expect("well-formed kernel");
    k
}

/// The recipe's own steady-state measurement ([`gemm::k_iteration_mix`]), per CTA k-tile, by base
/// mnemonic: a cross-check of the k-loop found here.
fn recipe_measured_mix(preset: &str, r: &Recipe) -> BTreeMap<String, u64> {
    let roles = gemm::k_iteration_mix(&arch(preset), Dtype::Bf16, false, r).expect("k_iteration_mix");
    let mut out = BTreeMap::new();
    for role in roles {
        for (op, n) in role.per_iteration {
            *out.entry(op).or_default() += n * role.warps.len() as u64;
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Tests

#[test]
fn ampere_twin_matches_the_ampere_recipe() {
    let r = ampere_recipe();
    let sass = sass_mix(ampere_sass(), &[(Role::Mma, 8)], AMPERE_TILE.work());
    let (trace, notes) = trace_mix(&recipe_kernel("a100-sxm4-80gb", &r, AMPERE_TILE), AMPERE_TILE.work());
    compare("gemm_mma_sm80", "k-tile", &COMPARED, KNOWN_DIFFERENCES, &sass, &trace, &notes);
    check_against_measured(&trace, &recipe_measured_mix("a100-sxm4-80gb", &r));
}

#[test]
fn hopper_twin_matches_the_hopper_recipe() {
    // 2 consumer warpgroups run the MMA loop; one elected thread of warp 0 runs the producer loop.
    let r = hopper_recipe();
    let sass = sass_mix(hopper_sass(), &[(Role::Mma, 8), (Role::Producer, 1)], HOPPER_TILE.work());
    let (trace, notes) = trace_mix(&recipe_kernel("h100-sxm5-80gb", &r, HOPPER_TILE), HOPPER_TILE.work());
    compare("gemm_wgmma_sm90a", "k-tile", &COMPARED, KNOWN_DIFFERENCES, &sass, &trace, &notes);
    check_against_measured(&trace, &recipe_measured_mix("h100-sxm5-80gb", &r));
}

#[test]
fn grouped_hopper_twin_matches_the_grouped_recipe() {
    let r = gemm::grouped_hopper_twin();
    let p = gemm::grouped_twin_problem();
    // The twin's tile is the one DeepGEMM's bf16 selection picks for the reference problem (the
    // selection's cluster, stages and epilogue are not the twin's: see `grouped_hopper_twin`).
    let picked = grouped_recipe(&arch("h800-sxm5"), &p);
    assert_eq!(
        (picked.cta_m, picked.cta_n, picked.cta_k, picked.consumers),
        (r.cta_m, r.cta_n, r.cta_k, r.consumers),
        "grouped_recipe no longer picks the twin's tile for {p}: {picked:?}"
    );
    // As for the Hopper twin: 8 consumer warps run the MMA loop, one elected thread of warp 0 the
    // producer loop.
    let sass = sass_mix(grouped_hopper_sass(), &[(Role::Mma, 8), (Role::Producer, 1)], GROUPED_TILE.work());
    let (trace, notes) = trace_mix(&grouped_kernel("h800-sxm5", &p), GROUPED_TILE.work());
    compare("grouped_gemm_wgmma_sm90a", "k-tile", &COMPARED, KNOWN_DIFFERENCES, &sass, &trace, &notes);
    // The grouped form changes only the per-tile part: its k-loop is the dense recipe's.
    check_against_measured(&trace, &recipe_measured_mix("h800-sxm5", &Recipe::Hopper(r)));
}

/// Per tile, the grouped twin loads its m-block's expert with one `LDG` per warp before the CTA
/// barrier; the recipe reads it as the per-CTA parameter p0 from a table, with no instruction
/// (the asserted difference: 12 `LDG` per CTA in the twin, 0 in the trace), and B's address
/// follows p0.
#[test]
fn grouped_twin_reads_its_expert_once_per_tile() {
    // SASS: exactly one LDG, in no loop, before the first BAR: each warp runs it once per tile.
    let s = parse_sass(grouped_hopper_sass());
    let ldg: Vec<usize> = (0..s.insts.len()).filter(|&i| s.insts[i].base() == "LDG").collect();
    assert_eq!(ldg.len(), 1, "the twin should load the expert with one LDG, found {ldg:?}");
    let at = ldg[0];
    assert!(
        !sass_loops(&s).iter().any(|&(a, b)| a <= at && at <= b),
        "the expert LDG (/*{:04x}*/) is inside a loop",
        s.insts[at].pc
    );
    let first_bar = s.insts.iter().position(|x| x.base() == "BAR").expect("a CTA barrier");
    assert!(at < first_bar, "the expert LDG comes after the CTA barrier: not every warp runs it");

    // Trace: groups of 300, 0, 128 and 2500 rows: m-blocks 3 + 0 + 1 + 20 = 24, so a grid of
    // (16, N/128, 2) whose last 8 m-blocks are padding.
    let (n, k) = (256u64, 512u64);
    let m = vec![300, 0, 128, 2500];
    let p = GroupedProblem {
        m: m.clone(),
        n,
        k,
        dtype: Dtype::Bf16,
        block_scaled: false,
        layout: Layout::Contiguous,
        capacity: 0,
    };
    let kt = grouped_kernel("h800-sxm5", &p);
    let expert_of: Vec<i64> = m
        .iter()
        .enumerate()
        .flat_map(|(g, &rows)| std::iter::repeat_n(g as i64, rows.div_ceil(128) as usize))
        .collect();
    assert_eq!(expert_of.len(), 24);
    let grid = kt.info.grid;
    assert_eq!((grid.x, grid.y, grid.z), (16, (n / 128) as u32, 2));
    assert_eq!(kt.info.cta_group.as_ref().map(|g| g.param), Some(0), "the kernel's CTA group is p0, the expert");
    for prog in &kt.programs {
        let loads =
            prog.steps.iter().filter(|st| matches!(st, Step::Inst(i) if kt.ops.get(i.op).base == "LDG")).count();
        assert_eq!(loads, 0, "program {:?} loads something: the recipe's expert lookup is a parameter", prog.name);
    }
    let count = |prog: &Program, cta: [u32; 3], base: &str| {
        let mut n = 0;
        prog.for_each_executed(cta, 0, |i, times| {
            if kt.ops.get(i.op).base == base {
                n += times;
            }
        });
        n
    };
    let kps = k / 64;
    for lin in 0..grid.count() {
        let c = grid.unlinear(lin);
        let cta = [c.x, c.y, c.z];
        let mb = (c.x + grid.x * c.z) as usize;
        let warps = &kt.cta(lin).warps;
        let (producer, consumer) = (&warps[0], &warps[4]);
        let params = producer.eval_params(cta, 0);
        let (copies, mmas) = (count(producer, cta, "UTMALDG"), count(consumer, cta, "HGMMA"));
        if let Some(&e) = expert_of.get(mb) {
            assert_eq!(params[0], e, "CTA {cta:?} (m-block {mb}): p0 is not its expert");
            assert_eq!((copies, mmas), (2 * kps, 4 * kps), "CTA {cta:?} (m-block {mb}) computes its tile");
        } else {
            assert_eq!((copies, mmas), (0, 0), "CTA {cta:?}: padding m-block {mb} should load and compute nothing");
        }
    }
    // B's address moves by one expert's N×K bf16 matrix per unit of p0; A's does not depend on it.
    let prog = &kt.cta(0).warps[0];
    let mut coefs: BTreeMap<i64, u64> = BTreeMap::new();
    for st in &prog.steps {
        if let Step::Inst(i) = st
            && kt.ops.get(i.op).base == "UTMALDG"
        {
            let m = i.mem.expect("a TMA load has an address");
            *coefs.entry(prog.exprs[m.addr as usize].coef[gpusim_isa::Var::Param(0).index()]).or_default() += 1;
        }
    }
    let loads: u64 = coefs.values().sum();
    assert_eq!(
        coefs,
        BTreeMap::from([(0, loads / 2), ((n * k * 2) as i64, loads / 2)]),
        "the producer's TMA loads: half (A) independent of p0, half (B) at b + p0·N·K·2"
    );
}

#[test]
fn reference_sass_is_current() {
    check_reference("gemm_mma_sm80", ampere_sass(), "sm_80");
    check_reference("gemm_wgmma_sm90a", hopper_sass(), "sm_90a");
    check_reference("grouped_gemm_wgmma_sm90a", grouped_hopper_sass(), "sm_90a");
}

#[test]
fn sass_loop_finder_skips_out_of_line_retry_blocks() {
    let text = "
        /*0000*/                   MOV R1, c[0x0][0x28] ;
.L_x_6:
        /*0010*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR7+0x30000], R6 ;
        /*0020*/              @!P0 BRA `(.L_x_5) ;
.L_x_9:
        /*0030*/                   HGMMA.64x256x16.F32.BF16 R24, gdesc[UR12], R24, gsb0 ;
        /*0040*/                   SYNCS.ARRIVE.TRANS64.A1T0 RZ, [UR7+0x30020], RZ ;
        /*0050*/              @!P0 BRA `(.L_x_6) ;
        /*0060*/                   EXIT ;
.L_x_5:
        /*0070*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR7+0x30000], R6 ;
        /*0080*/              @!P0 BRA `(.L_x_5) ;
        /*0090*/                   BRA `(.L_x_9) ;
.L_x_11:
        /*00a0*/                   BRA `(.L_x_11);
";
    let s = parse_sass(text);
    let loops = sass_loops(&s);
    // The k-loop, the retry spin and the trap; not the jump from the retry block back to .L_x_9.
    assert_eq!(loops, vec![(1, 5), (7, 8), (10, 10)]);
    let (mix, pcs) = sass_kloop(&s, Role::Mma).unwrap();
    assert_eq!(pcs, (0x10, 0x50));
    let b = by_base(&mix);
    assert_eq!((b["HGMMA"], b["SYNCS"], b["BRA"]), (1, 2, 2));
    assert!(sass_kloop(&s, Role::Producer).is_none());
}

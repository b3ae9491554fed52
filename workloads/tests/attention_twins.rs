//! CUDA twins of the attention recipes: the FA2 and FA3 forward recipes against real compiled SASS.
//!
//! `workloads/cuda/` holds our own CUDA C++ for the two forward designs (head dim 128,
//! non-causal): `fa2_fwd_sm80.cu`, FlashAttention-2's sm80 kernel (128×64 tile, 4 warps,
//! `cp.async` + `ldmatrix` + `mma.sync`, online softmax in registers), and `fa3_fwd_sm90a.cu`,
//! FlashAttention-3's warp-specialised kernel (128×176 tile, a TMA producer warp with mbarriers,
//! two consumer warpgroups doing `wgmma` QKᵀ (SS) and PV (RS), online softmax, named-barrier
//! ping-pong, `setmaxnreg`, static persistent tiles). These tests compile them with NVRTC and
//! nvdisasm (`scripts/sass.py`, the PyPI wheels `scripts/test.sh` installs; without them the
//! tests fail with a message that says how to install them, they never skip), find the KV loop of
//! each role in the SASS and in the recipe's trace, and check that per CTA KV block both issue the
//! same HMMA/HGMMA, LDGSTS/UTMALDG, LDSM, MUFU, BAR and SYNCS, and the same tensor shapes.
//!
//! Loops are found and counted as in `cuda_twins.rs` (helpers in `common/mod.rs`): the smallest
//! SASS loop holding a role's key instruction (tensor op for MMA warps, global→shared copy for a
//! producer) and a synchronisation, counted statically once and times the warps that run it; in
//! the trace the innermost such `Step::Loop` that runs most often, normalised by the FLOPs (MMA
//! warps) or bytes (producer) of one CTA KV block. The recipes' KV loops are cross-checked against
//! dynamic counts: the difference between two KV lengths, per added block.
//!
//! ## Per KV block (CUDA 13.5.37), SASS = recipe
//! - FA2, per warp (× 4): 256 `HMMA.16816.F32.BF16`, 80 `LDSM` (48 `.M88.4` for Q and K, 32
//!   `.MT88.4` for Vᵀ), 16 `LDGSTS.E.BYPASS.128`, 68 `MUFU.EX2`, 2 `BAR.SYNC`; no `SYNCS`.
//! - FA3 consumer warp (× 8): 19 HGMMA (8 `64x176x16`, 11 `64x128x16`, `.F32.BF16`), 4 `SYNCS`
//!   (2 full waits, 2 releases), 2 `BAR` (`BAR.SYNC` own scheduler barrier, `BAR.ARV` the other's),
//!   90 `MUFU.EX2`. Producer warp (× 1): 2 `UTMALDG`, 4 `SYNCS` (2 empty waits, 2 expect-tx
//!   arrives).
//!
//! ## Order, where it decides timing
//! A warp issues in order, so the order of a dependent pair matters as much as its count:
//! `fa2_recipe_reads_its_exponentials_as_late_as_the_twin` checks that the FA2 recipe reads no
//! more of its KV loop's `MUFU.EX2` results within the next two instructions than the twin does
//! (none). Until 7 December the recipe read every one at once (`FFMA → MUFU.EX2 → FADD` per score
//! element), which held each warp for the MUFU latency 64 times per KV block.
//!
//! ## Differences, asserted or not compared
//! - FA2: ptxas pads the `cp.async` groups of the twin's loop with 6 never-executed `@!PT LDS`
//!   (asserted by `fa2_twin_matches_the_fa2_recipe`: 6 in the SASS loop, no `LDS` in the recipe's).
//! - Address, descriptor and loop arithmetic (`IMAD`, `LEA`, `R2UR`, `UIADD3`, ...), the
//!   `DEPBAR`/`LDGDEPBAR`/`WARPGROUP.*` counts and the retry branches of the mbarrier waits are
//!   printed, not compared: the recipes emit loop control only. Per warp and KV block the FA2 twin
//!   issues 868 instructions against the recipe's 813 (the softmax's FMNMX/FFMA/FADD/FMUL and the
//!   F2FP packs the two share nearly one for one); an FA3 consumer warp 689 against 511 (`R2UR`,
//!   `UIADD3`, `ULOP3` building wgmma descriptors), the producer warp 51 against 8.
//! - FA3: the recipe unrolls its KV loop by two (the ring stage is static), the twin computes the
//!   stage from a running block count; the recipe's consumers pre-arrive on the empty barriers,
//!   the twin's producer waits with the parity of the phase before the first; the twin's 256
//!   consumer threads each arrive on an empty barrier (one instruction per warp), the recipe's
//!   warps once each. None of these changes a compared count.
//! - Outside the KV loop: both twins store O straight from the accumulators (the recipes go
//!   through shared memory: FA2 `STS`/`LDS`/`STG`, FA3 `STSM` + one `UTMASTG`).

mod common;

use std::collections::BTreeMap;
use std::sync::OnceLock;

use common::{Mix, Role, Work, add_scaled, by_base, check_reference, compare, compile, sass_mix, trace_mix};
use gpusim_isa::{KernelTrace, Step};
use gpusim_workloads::attention::{self, AttnSpec, Recipe, fa2, fa3};
use gpusim_workloads::gemm::Dtype;

/// The instruction classes (base mnemonics) that must match exactly, per role.
const COMPARED: [&str; 8] = ["HMMA", "HGMMA", "LDGSTS", "UTMALDG", "LDSM", "MUFU", "BAR", "SYNCS"];

/// Intentional differences in a compared class, as (twin, class, why). Empty: none.
const KNOWN_DIFFERENCES: &[(&str, &str, &str)] = &[];

const D: u64 = 128;

fn fa2_sass() -> &'static str {
    static S: OnceLock<String> = OnceLock::new();
    S.get_or_init(|| compile("fa2_fwd_sm80", "sm_80"))
}

fn fa3_sass() -> &'static str {
    static S: OnceLock<String> = OnceLock::new();
    S.get_or_init(|| compile("fa3_fwd_sm90a", "sm_90a"))
}

fn arch(preset: &str) -> gpusim_configs::Arch {
    gpusim_configs::load_preset(preset).unwrap_or_else(|e| panic!("preset {preset}: {e}"))
}

fn spec(recipe: Recipe, heads: u64, seqlen: u64, seqlen_kv: u64) -> AttnSpec {
    AttnSpec {
        batch: 1,
        heads,
        seqlen,
        seqlen_kv,
        headdim: D,
        dtype: Dtype::Bf16,
        recipe: Some(recipe),
        ..AttnSpec::default()
    }
}

/// The recipe's forward kernel for `s` on `preset`.
fn kernel(preset: &str, s: &AttnSpec) -> KernelTrace {
    let a = attention::generate(s, &arch(preset)).unwrap_or_else(|e| panic!("{s}: {e}"));
    assert_eq!(a.recipe, s.recipe.unwrap());
    let mut t = a.trace;
    assert_eq!(t.kernels.len(), 1, "{s}: expected one forward kernel");
    let k = t.kernels.remove(0);
    k.check().expect("well-formed kernel");
    k
}

/// One CTA KV block: S = QKᵀ and O += PV, 2·BM·BN·d FLOPs each; K and V blocks copied.
fn kv_block(bm: u64, bn: u64) -> Work {
    Work { name: "KV block", flops: 4 * bm * bn * D, bytes: 2 * bn * D * 2 }
}

/// Dynamic counts by base mnemonic over every warp of CTA 0.
fn cta0_counts(k: &KernelTrace) -> BTreeMap<String, u64> {
    let cta = k.cta(0);
    let mut out = BTreeMap::new();
    for (w, prog) in cta.warps.iter().enumerate() {
        prog.for_each_executed([0, 0, 0], w as u32, |i, times| {
            *out.entry(k.ops.get(i.op).base.clone()).or_default() += times;
        });
    }
    out
}

/// The KV loop found in the trace must give what the recipe's dynamic counts give per added KV
/// block (CTA 0, KV lengths `sk` and `sk + extra·BN`), for the compared classes.
fn check_against_dynamic(trace: &BTreeMap<Role, Mix>, short: &KernelTrace, long: &KernelTrace, extra: u64) {
    let mut all = Mix::new();
    for m in trace.values() {
        add_scaled(&mut all, m, 1);
    }
    let found = by_base(&all);
    let (a, b) = (cta0_counts(short), cta0_counts(long));
    for class in COMPARED {
        let (x, y) = (a.get(class).copied().unwrap_or(0), b.get(class).copied().unwrap_or(0));
        assert!(y >= x && (y - x).is_multiple_of(extra), "{class}: {x} → {y} over {extra} more blocks");
        assert_eq!(
            found.get(class).copied().unwrap_or(0),
            (y - x) / extra,
            "{class}: the trace's KV loop and the dynamic counts per KV block disagree (loop {found:?}; dynamic \
             {a:?} → {b:?})"
        );
    }
}

/// Compares role by role.
fn compare_roles(twin: &str, sass: &BTreeMap<Role, Mix>, trace: &BTreeMap<Role, Mix>, notes: &[String]) {
    let roles: Vec<Role> =
        sass.keys().chain(trace.keys()).copied().collect::<std::collections::BTreeSet<_>>().into_iter().collect();
    for role in roles {
        let one = |m: &BTreeMap<Role, Mix>| -> BTreeMap<Role, Mix> {
            BTreeMap::from([(role, m.get(&role).cloned().unwrap_or_default())])
        };
        compare(
            &format!("{twin} ({role:?} warps)"),
            "KV block",
            &COMPARED,
            KNOWN_DIFFERENCES,
            &one(sass),
            &one(trace),
            notes,
        );
    }
}

/// Instructions of a mix whose key (mnemonic, or `@!PT mnemonic` for never-executed ones) starts
/// with `prefix`.
fn count_prefixed(mix: &Mix, prefix: &str) -> u64 {
    mix.iter().filter(|(m, _)| m.starts_with(prefix)).map(|(_, n)| n).sum()
}

// ---------------------------------------------------------------------------------------------
// Tests

#[test]
fn fa2_twin_matches_the_fa2_recipe() {
    let a100 = arch("a100-sxm4-80gb");
    // The twin's tile is what the recipe picks for d = 128 on A100 (FA2's run_mha_fwd_hdim128).
    let t = fa2::fwd_tile(&a100, D, false).expect("d128 tile");
    assert_eq!((t.block_m, t.block_n, t.warps), (128, 64, 4), "the recipe's d128 tile on A100 is no longer the twin's");
    let work = kv_block(t.block_m, t.block_n);
    // One query tile against 8 (and 10) KV blocks: whole tiles, so no masked iterations.
    let short = kernel("a100-sxm4-80gb", &spec(Recipe::Fa2, 1, 128, 8 * 64));
    let long = kernel("a100-sxm4-80gb", &spec(Recipe::Fa2, 1, 128, 10 * 64));
    let sass = sass_mix(fa2_sass(), &[(Role::Mma, 4)], work);
    let (trace, notes) = trace_mix(&short, work);
    assert_eq!(trace.keys().copied().collect::<Vec<_>>(), vec![Role::Mma], "FA2's warps all run the MMA loop");
    compare_roles("fa2_fwd_sm80", &sass, &trace, &notes);
    check_against_dynamic(&trace, &short, &long, 2);
    // The asserted difference: ptxas pads the twin's cp.async groups with never-executed
    // `@!PT LDS` (6 in the loop per warp); the recipe's loop loads nothing from shared memory
    // with LDS.
    assert_eq!(count_prefixed(&sass[&Role::Mma], "@!PT LDS"), 6 * 4, "never-executed @!PT LDS in the twin's loop");
    assert_eq!(count_prefixed(&trace[&Role::Mma], "LDS."), 0, "the recipe's KV loop issues no LDS");
}

#[test]
fn fa3_twin_matches_the_fa3_recipe() {
    // The twin's tile is FA3's for 16-bit d = 128 non-causal: 128×176, P from registers.
    assert_eq!(fa3::tile(D, D, false, false), (128, 176, true), "the recipe's d128 tile is no longer the twin's");
    let s = spec(Recipe::Fa3, 2, 256, 8 * 176);
    let pl = fa3::plan(&s, &arch("h100-sxm5-80gb")).expect("plan");
    assert_eq!((pl.cons, pl.pingpong, pl.prod_regs, pl.cons_regs), (2, true, 24, 240), "{pl:?}");
    // 4 tiles on a persistent grid of more CTAs: each CTA runs one tile.
    assert_eq!(pl.grid, pl.tiles);
    let work = kv_block(pl.bm, pl.bn);
    let short = kernel("h100-sxm5-80gb", &s);
    let long = kernel("h100-sxm5-80gb", &AttnSpec { seqlen_kv: 10 * 176, ..s.clone() });
    // 2 consumer warpgroups run the MMA loop; one elected lane of warp 0 the producer loop.
    let sass = sass_mix(fa3_sass(), &[(Role::Mma, 8), (Role::Producer, 1)], work);
    let (trace, notes) = trace_mix(&short, work);
    assert_eq!(trace.keys().copied().collect::<Vec<_>>(), vec![Role::Mma, Role::Producer]);
    compare_roles("fa3_fwd_sm90a", &sass, &trace, &notes);
    check_against_dynamic(&trace, &short, &long, 2);
    // The producer's loop copies one K and one V block per KV block.
    let prod = by_base(&sass[&Role::Producer]);
    assert_eq!((prod.get("UTMALDG").copied(), prod.get("HGMMA").copied()), (Some(2), None));
}

#[test]
fn attention_reference_sass_is_current() {
    check_reference("fa2_fwd_sm80", fa2_sass(), "sm_80");
    check_reference("fa3_fwd_sm90a", fa3_sass(), "sm_90a");
}

/// The FA3 twin's loop counts its retries of the mbarrier waits in line; the loop finder must
/// still pick the KV loop (tensor ops and a synchronisation), not a wait's spin, for each role.
#[test]
fn fa3_loops_are_the_kv_loops() {
    let s = common::parse_sass(fa3_sass());
    let (mma, _) = common::sass_kloop(&s, Role::Mma).expect("consumer KV loop");
    let (prod, _) = common::sass_kloop(&s, Role::Producer).expect("producer KV loop");
    assert_eq!(by_base(&mma).get("HGMMA"), Some(&19));
    assert_eq!(by_base(&prod).get("UTMALDG"), Some(&2));
    // The trace's consumer loop holds two KV blocks (the recipe's static ring stage).
    let k = kernel("h100-sxm5-80gb", &spec(Recipe::Fa3, 2, 256, 8 * 176));
    let consumer = k.programs.iter().find(|p| p.name.starts_with("consumer")).expect("a consumer program");
    let loops = consumer.steps.iter().filter(|st| matches!(st, Step::Loop { .. })).count();
    assert!(loops >= 2, "the persistent tile loop and the KV loop");
}

/// One instruction of a straight-line loop body: is it a MUFU.EX2, the registers it writes and
/// those it reads (`"R209"`).
struct Issued {
    ex2: bool,
    dst: Vec<String>,
    src: Vec<String>,
}

/// Share of the body's exponentials whose result one of the next `near` instructions reads. A
/// warp issues in order, so a read right after the exponential holds it for the MUFU latency;
/// ptxas schedules the reads late.
fn ex2_read_soon(body: &[Issued], near: usize) -> f64 {
    let ex2: Vec<usize> = (0..body.len()).filter(|&i| body[i].ex2).collect();
    assert!(ex2.len() >= 64, "expected FA2's 64 + 4 exponentials in the body, found {}", ex2.len());
    let soon = |i: usize| body[i + 1..].iter().take(near).any(|x| x.src.iter().any(|s| body[i].dst.contains(s)));
    ex2.iter().filter(|&&i| soon(i)).count() as f64 / ex2.len() as f64
}

#[test]
fn fa2_recipe_reads_its_exponentials_as_late_as_the_twin() {
    // The twin's KV loop, as the mix comparison finds it; operands as registers ("R209").
    let sass = common::parse_sass(fa2_sass());
    let (a, b) = common::sass_kloop_range(&sass, Role::Mma).expect("the twin's KV loop");
    let regs = |ops: &str| -> Vec<String> {
        ops.split([',', ' ', '[', ']', '+', '-', '|'])
            .map(|t| t.split('.').next().unwrap_or(""))
            .filter(|t| t.starts_with('R') && t[1..].parse::<u32>().is_ok())
            .map(str::to_string)
            .collect()
    };
    let twin: Vec<Issued> = sass.insts[a..=b]
        .iter()
        .map(|x| {
            let mut src = regs(&x.operands);
            let dst = if src.is_empty() { vec![] } else { vec![src.remove(0)] };
            Issued { ex2: x.mnemonic == "MUFU.EX2", dst, src }
        })
        .collect();
    // The recipe's: the same tile's MMA loop (8 KV blocks, whole tiles: no masked iteration).
    let k = kernel("a100-sxm4-80gb", &spec(Recipe::Fa2, 1, 128, 8 * 64));
    let p = &k.cta(0).warps[0];
    let (_, start) = common::program_kloop(p, &k, Role::Mma).expect("the recipe's KV loop");
    let Step::Loop { end, .. } = p.steps[start] else { panic!("not a loop step") };
    let names = |rs: &[gpusim_isa::RegRange]| -> Vec<String> {
        rs.iter().flat_map(|r| (0..r.count as u16).map(move |j| format!("R{}", r.first.0 + j))).collect()
    };
    let recipe: Vec<Issued> = p.steps[start + 1..end as usize]
        .iter()
        .filter_map(|s| match s {
            Step::Inst(i) => {
                Some(Issued { ex2: k.ops.get(i.op).mnemonic == "MUFU.EX2", dst: names(&i.dst), src: names(&i.src) })
            }
            _ => None,
        })
        .collect();
    let (t, r) = (ex2_read_soon(&twin, 2), ex2_read_soon(&recipe, 2));
    assert!(t < 0.1, "the twin reads {:.0}% of its exponentials within 2 instructions", 100.0 * t);
    assert!(
        r <= t + 0.05,
        "the recipe reads {:.0}% of its exponentials within 2 instructions, the twin {:.0}%",
        100.0 * r,
        100.0 * t
    );
}

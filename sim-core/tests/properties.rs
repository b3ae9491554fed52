//! Whole-model properties: scaling with SM count, wave quantisation, determinism.

mod common;

use common::*;
use gpusim_isa::{AddrExpr, KernelTrace, Lanes, ProgramBuilder, Var};
use proptest::prelude::*;

/// `ctas` CTAs of `warps` warps, each warp running `n` FFMAs in 4 independent chains.
fn compute_kernel(ctas: u32, warps: u32, n: u32) -> KernelTrace {
    let mut kb = KB::new("compute", ctas, 32 * warps);
    let p = ffma_program(&mut kb, n, 4);
    let p = kb.program(p);
    kb.all_warps(p);
    kb.build()
}

proptest! {
    // A fixed seed keeps CI reproducible (each case is a simulation); change it to explore.
    #![proptest_config(ProptestConfig { cases: 12, rng_seed: proptest::test_runner::RngSeed::Fixed(0x5EED), ..ProptestConfig::default() })]

    #[test]
    fn doubling_sms_halves_a_compute_bound_kernel(waves in 4u32..8, warps in 1u32..5, n in 50u32..150) {
        let small = arch(2);
        let big = arch(4);
        // Enough CTAs for `waves` full waves on the bigger chip.
        let per_sm = 64 / (warps * 2).max(1);
        let ctas = waves * per_sm.min(32) * 4;
        let k = compute_kernel(ctas, warps * 2, n);
        let t_small = run1(&small, k.clone()).kernels[0].cycles as f64;
        let t_big = run1(&big, k).kernels[0].cycles as f64;
        let ratio = t_small / t_big;
        prop_assert!((1.8..=2.2).contains(&ratio), "ratio {ratio} ({t_small} vs {t_big})");
    }

    #[test]
    fn one_more_cta_than_a_wave_costs_about_one_wave(warps in 4u32..9, n in 100u32..300) {
        let a = arch(4);
        // One CTA per SM per wave: limit each SM to one resident CTA through shared memory.
        let mut k = compute_kernel(4, warps, n);
        k.info.smem_bytes = 200 * 1024;
        let mut k1 = k.clone();
        k1.info.grid.x = 5;
        let wave = run1(&a, k).kernels[0].cycles as f64;
        let plus_one = run1(&a, k1).kernels[0].cycles as f64;
        let extra = plus_one - wave;
        prop_assert!((extra / wave - 1.0).abs() < 0.1, "one wave {wave}, plus one CTA {plus_one}");
    }
}

fn mixed_kernel() -> KernelTrace {
    let mut kb = KB::new("mixed", 24, 128);
    let mut b = ProgramBuilder::new("p");
    b.begin_loop(8).unwrap();
    let ld = kb.inst("LDG.E.128", Some(4), &[2]);
    let f = kb.inst("FFMA", Some(8), &[4, 5, 8]);
    let sts = kb.inst("STS", None, &[6, 8]);
    let bar = kb.inst("BAR.SYNC.DEFER_BLOCKING", None, &[]);
    let lds = kb.inst("LDS", Some(9), &[6]);
    let st = kb.inst("STG.E", None, &[2, 9]);
    b.mem_inst(
        ld,
        AddrExpr::constant(1 << 32).with(Var::CtaX, 65536).with(Var::Warp, 512).with(Var::Loop(0), 2048),
        Lanes::Stride(16),
        0,
    );
    b.inst(f);
    b.mem_inst(sts, AddrExpr::constant(0).with(Var::Warp, 128), Lanes::Stride(4), 0);
    b.inst(bar);
    b.mem_inst(lds, AddrExpr::constant(0).with(Var::Warp, 4), Lanes::Stride(128), 0);
    b.mem_inst(
        st,
        AddrExpr::constant(1 << 34).with(Var::CtaX, 4096).with(Var::Warp, 128).with(Var::Loop(0), 1 << 20),
        Lanes::Stride(4),
        0,
    );
    b.end_loop().unwrap();
    kb.build_with(b)
}

#[test]
fn repeated_runs_are_identical() {
    let a = arch(8);
    let r1 = run1(&a, mixed_kernel());
    let r2 = run1(&a, mixed_kernel());
    assert_eq!(r1, r2);
    assert_eq!(serde_json::to_string(&r1).unwrap(), serde_json::to_string(&r2).unwrap());
    let k = &r1.kernels[0];
    assert!(k.stalls.contains_key("long_scoreboard"));
    assert!(k.memory.traffic.shared.requests > 0);
    assert_eq!(k.resident_warp_cycles, k.stalls.values().sum::<u64>());
}

#[test]
fn shared_memory_bank_conflicts_serialise() {
    let a = arch(1);
    let cycles = |stride_words: i32| {
        let mut kb = KB::new("banks", 1, 32);
        let mut b = ProgramBuilder::new("p");
        b.begin_loop(200).unwrap();
        // Stores have no result to wait for: only the banks limit them.
        let sts = kb.inst("STS", None, &[2, 3]);
        b.mem_inst(sts, AddrExpr::constant(0), Lanes::Stride(4 * stride_words), 0);
        b.end_loop().unwrap();
        let exit = kb.inst("EXIT", None, &[]);
        b.inst(exit);
        let p = kb.program(b.finish().unwrap());
        kb.all_warps(p);
        run1(&a, kb.build()).kernels[0].cycles
    };
    let free = cycles(1);
    let conflict = cycles(32);
    // 200 stores: conflict-free one wavefront each, 32-way conflicts 32 wavefronts each; the
    // shared-memory port is the bottleneck in both, so the difference is exactly 200 × 31.
    assert_eq!(conflict - free, 200 * 31, "{free} vs {conflict}");
}

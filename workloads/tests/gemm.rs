//! The GEMM recipes: well-formed, small traces whose tensor work is exactly the problem's, with
//! the per-k-iteration instruction mix of the real kernels, resources that fit the chip, and the
//! choices a tuned library makes.

use std::collections::BTreeMap;

use gpusim_configs::{Arch, load_preset, presets};
use gpusim_isa::{MemTraceSource, Trace, binary, text};
use gpusim_sim_core::{SimOptions, occupancy, simulate};
use gpusim_workloads::gemm::*;

fn h100() -> Arch {
    load_preset("h100-sxm5-80gb").unwrap()
}

fn a100() -> Arch {
    load_preset("a100-sxm4-80gb").unwrap()
}

fn prob(m: u64, n: u64, k: u64, dtype: Dtype) -> GemmProblem {
    GemmProblem::new(m, n, k, dtype)
}

/// Checks every kernel: well formed, opcodes known, resources within the chip.
fn check_trace(arch: &Arch, t: &Trace, what: &str) {
    assert!(!t.kernels.is_empty(), "{what}: no kernels");
    for k in &t.kernels {
        k.check().unwrap_or_else(|e| panic!("{what}: {e}"));
        let unknown: Vec<&str> = k.ops.iter().filter(|(_, d)| !d.known).map(|(_, d)| d.mnemonic.as_str()).collect();
        assert!(unknown.is_empty(), "{what}: unknown opcodes {unknown:?}");
        assert!(
            k.info.smem_bytes as u64 <= arch.sm.shared_mem_per_cta.0,
            "{what}: {} B of shared memory per CTA",
            k.info.smem_bytes
        );
        let o = occupancy(arch, &k.info).unwrap_or_else(|e| panic!("{what} `{}`: {e}", k.info.name));
        assert!(o.ctas_per_sm >= 1, "{what}: occupancy {o:?}");
        assert!(k.info.cluster.count() <= arch.sm.max_cluster_size as u64, "{what}: cluster {}", k.info.cluster);
    }
}

fn hopper_base(arch: &Arch, p: &GemmProblem) -> HopperRecipe {
    match tuned_recipe(arch, p, Style::Hopper) {
        Recipe::Hopper(h) => h,
        r => panic!("not a hopper recipe: {r}"),
    }
}

fn ampere_base(arch: &Arch, p: &GemmProblem) -> AmpereRecipe {
    match tuned_recipe(arch, p, Style::Ampere) {
        Recipe::Ampere(a) => a,
        r => panic!("not an ampere recipe: {r}"),
    }
}

/// The recipes the tests sweep: defaults, and each parameter of each style moved.
fn variants(arch: &Arch, p: &GemmProblem) -> Vec<Recipe> {
    let mut out = vec![default_recipe(arch, p)];
    if arch.compute_capability >= 90 {
        let h = hopper_base(arch, p);
        out.push(Recipe::Hopper(h));
        out.push(Recipe::Hopper(HopperRecipe { persistent: false, ..h }));
        out.push(Recipe::Hopper(HopperRecipe { multicast: false, ..h }));
        out.push(Recipe::Hopper(HopperRecipe { cluster_m: 1, cluster_n: 2, ..h }));
        out.push(Recipe::Hopper(HopperRecipe { cluster_m: 1, cluster_n: 1, multicast: false, ..h }));
        out.push(Recipe::Hopper(HopperRecipe { epilogue: Epilogue::SharedStore, ..h }));
        out.push(Recipe::Hopper(HopperRecipe { epilogue: Epilogue::Direct, ..h }));
        out.push(Recipe::Hopper(HopperRecipe { raster_swizzle: 4, ..h }));
        out.push(Recipe::Hopper(HopperRecipe { split_k: 2, ..h }));
    }
    if p.dtype != Dtype::Fp8 || arch.compute_capability >= 89 {
        let a = ampere_base(arch, p);
        out.push(Recipe::Ampere(a));
        out.push(Recipe::Ampere(AmpereRecipe { swizzle: 1, ..a }));
        out.push(Recipe::Ampere(AmpereRecipe { split_k: 3, ..a }));
    }
    out.retain(|r| !(p.block_scaled && matches!(r, Recipe::Ampere(_))));
    out.dedup();
    out
}

#[test]
fn every_recipe_gives_well_formed_kernels_with_exact_tensor_work() {
    let problems = [
        prob(1024, 1024, 1024, Dtype::Bf16),
        prob(512, 768, 256, Dtype::Fp16),
        prob(256, 512, 512, Dtype::Tf32),
        prob(1024, 512, 1024, Dtype::Fp8),
        GemmProblem { block_scaled: true, ..prob(512, 512, 1024, Dtype::Fp8) },
        GemmProblem { batch: 3, ..prob(256, 256, 512, Dtype::Bf16) },
    ];
    let mut checked = 0;
    for arch in [h100(), a100()] {
        for p in &problems {
            if p.dtype == Dtype::Fp8 && arch.compute_capability < 89 {
                assert!(generate(&arch, p, &default_recipe(&arch, p)).is_err(), "fp8 on {}", arch.name);
                continue;
            }
            for r in variants(&arch, p) {
                let what = format!("{} {p} {r}", arch.name);
                let t = generate(&arch, p, &r).unwrap_or_else(|e| panic!("{what}: {e}"));
                check_trace(&arch, &t, &what);
                // Tile-aligned problems: exactly 2·M·N·K of tensor work (split-K's padding aside).
                let kt = (p.k as f64 / r_cta_k(&r) as f64).ceil() as u64;
                let flops = tensor_flops(&t);
                if kt.is_multiple_of(r.split_k() as u64) {
                    assert_eq!(flops, p.flops(), "{what}");
                } else {
                    assert!(flops >= p.flops(), "{what}");
                }
                checked += 1;
            }
        }
    }
    assert!(checked >= 60, "{checked} recipes checked");
}

fn r_cta_k(r: &Recipe) -> u32 {
    match r {
        Recipe::Ampere(a) => a.cta_k,
        Recipe::Hopper(h) => h.cta_k,
    }
}

#[test]
fn padded_problems_do_at_least_the_work() {
    for arch in [h100(), a100()] {
        for p in
            [prob(1000, 999, 1001, Dtype::Bf16), prob(77, 4096, 300, Dtype::Fp16), prob(64, 8192, 8192, Dtype::Bf16)]
        {
            for r in variants(&arch, &p) {
                let what = format!("{} {p} {r}", arch.name);
                let t = generate(&arch, &p, &r).unwrap_or_else(|e| panic!("{what}: {e}"));
                check_trace(&arch, &t, &what);
                let f = tensor_flops(&t);
                assert!(f >= p.flops(), "{what}: {f} < {}", p.flops());
            }
        }
    }
}

#[test]
fn traces_round_trip_through_both_formats() {
    let arch = h100();
    for p in
        [prob(2048, 1024, 512, Dtype::Bf16), GemmProblem { block_scaled: true, ..prob(1024, 1024, 512, Dtype::Fp8) }]
    {
        for r in variants(&arch, &p).into_iter().take(4) {
            let t = generate(&arch, &p, &r).unwrap();
            assert_eq!(text::read_trace("g.trace", &text::to_string(&t).unwrap()).unwrap(), t, "{r}");
            assert_eq!(binary::read_trace("g.gtb", &binary::to_bytes(&t).unwrap()).unwrap(), t, "{r}");
        }
    }
    let a = a100();
    let p = prob(1024, 1024, 1024, Dtype::Bf16);
    let t = generate(&a, &p, &default_recipe(&a, &p)).unwrap();
    assert_eq!(binary::read_trace("g.gtb", &binary::to_bytes(&t).unwrap()).unwrap(), t);
}

#[test]
fn gemm_8192_cubed_trace_is_under_1_mb() {
    for (preset, limit) in [("h100-sxm5-80gb", 1u64 << 20), ("a100-sxm4-80gb", 1 << 20)] {
        let arch = load_preset(preset).unwrap();
        let p = prob(8192, 8192, 8192, Dtype::Bf16);
        let r = default_recipe(&arch, &p);
        let t = generate(&arch, &p, &r).unwrap();
        let txt = text::to_string(&t).unwrap();
        let bin = binary::to_bytes(&t).unwrap();
        eprintln!("{preset} 8192^3 bf16 {r}: text {} B, binary {} B", txt.len(), bin.len());
        assert!((txt.len() as u64) < limit, "{preset}: text {} B", txt.len());
        assert!((bin.len() as u64) < limit, "{preset}: binary {} B", bin.len());
        assert_eq!(tensor_flops(&t), p.flops());
    }
}

fn mix(arch: &Arch, dtype: Dtype, block_scaled: bool, r: &Recipe) -> BTreeMap<String, BTreeMap<String, u64>> {
    k_iteration_mix(arch, dtype, block_scaled, r)
        .unwrap()
        .into_iter()
        .map(|m| (format!("{}{:?}", m.role, m.warps), m.per_iteration))
        .collect()
}

fn counts(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

/// The steady-state instruction mix per k-iteration and warp, as the module docs describe it and
/// as the compiled CUDA twins are checked against.
#[test]
fn k_iteration_mix_is_pinned() {
    let p = prob(8192, 8192, 8192, Dtype::Bf16);
    // Ampere default on A100: 256×128×64, 8 warps of 64×64, 3 stages.
    let a = a100();
    let r = default_recipe(&a, &p);
    assert_eq!(
        r,
        Recipe::Ampere(AmpereRecipe {
            cta_m: 256,
            cta_n: 128,
            cta_k: 64,
            warp_m: 64,
            warp_n: 64,
            stages: 3,
            split_k: 1,
            swizzle: 8
        })
    );
    let m = mix(&a, Dtype::Bf16, false, &r);
    let per_warp = counts(&[
        ("HMMA", 128),  // (64/16)·(64/8) per k-group × 4 k-groups
        ("LDSM", 32),   // (4 A + 4 B) × 4 k-groups
        ("LDGSTS", 12), // (256+128)·64·2 B / (256 threads · 16 B)
        ("LDGDEPBAR", 1),
        ("DEPBAR", 1),
        ("BAR", 1),
        ("IADD3", 3),
        ("ISETP", 1),
        ("BRA", 1),
    ]);
    assert_eq!(
        m,
        BTreeMap::from([("mma_wn0[0, 1, 2, 3]".into(), per_warp.clone()), ("mma_wn1[4, 5, 6, 7]".into(), per_warp)])
    );

    // Hopper default on H100: 128×256×64, 4 stages, producer warp + 2 consumer warpgroups.
    let h = h100();
    let r = default_recipe(&h, &p);
    let Recipe::Hopper(hr) = r else { panic!("{r}") };
    assert_eq!((hr.cta_m, hr.cta_n, hr.cta_k, hr.stages, hr.consumers), (128, 256, 64, 4, 2));
    assert_eq!((hr.cluster_m, hr.cluster_n, hr.multicast, hr.persistent), (2, 1, true, true));
    let m = mix(&h, Dtype::Bf16, false, &r);
    let producer = counts(&[("SYNCS", 2), ("UTMALDG", 2), ("BRA", 2), ("IADD3", 1), ("ISETP", 1)]);
    let consumer = counts(&[("SYNCS", 2), ("HGMMA", 4), ("WARPGROUP", 2), ("BRA", 2), ("IADD3", 1), ("ISETP", 1)]);
    assert_eq!(m.len(), 2, "{m:?}");
    assert_eq!(m["producer_multicast[0]"], producer);
    assert_eq!(m["consumer[4, 5, 6, 7, 8, 9, 10, 11]"], consumer);

    // DeepGEMM-style fp8: 128×128×128, the A scales by TMA, FFMA promotion per k-block.
    let p8 = GemmProblem { block_scaled: true, ..prob(8192, 8192, 8192, Dtype::Fp8) };
    let r = default_recipe(&h, &p8);
    let Recipe::Hopper(hr) = r else { panic!("{r}") };
    // DeepGEMM's selection: 64 m-blocks × 52 n-blocks of 160 columns are 26 waves on 132 SMs,
    // fewer than the 32 of 128 columns; never split-K. The mix below is that of 128 columns.
    assert_eq!((hr.cta_m, hr.cta_n, hr.cta_k, hr.split_k), (128, 160, 128, 1));
    let r = Recipe::Hopper(HopperRecipe { cta_n: 128, ..hr });
    let m = mix(&h, Dtype::Fp8, true, &r);
    let consumer = &m["consumer[4, 5, 6, 7, 8, 9, 10, 11]"];
    assert_eq!(consumer["QGMMA"], 4);
    assert_eq!(consumer["FFMA"], 64);
    assert_eq!(consumer["FMUL"], 2);
    assert_eq!(consumer["LDS"], 3);
    assert_eq!(consumer["SYNCS"], 2);
    assert_eq!(m["producer_multicast[0]"]["UTMALDG"], 3);
}

#[test]
fn default_recipe_follows_the_chip_and_the_shape() {
    let p = prob(4096, 4096, 4096, Dtype::Bf16);
    for (name, _) in presets() {
        let arch = load_preset(name).unwrap();
        let r = default_recipe(&arch, &p);
        match arch.compute_capability {
            cc if cc >= 90 => assert!(matches!(r, Recipe::Hopper(_)), "{name}: {r}"),
            _ => assert!(matches!(r, Recipe::Ampere(_)), "{name}: {r}"),
        }
        let t = generate(&arch, &p, &r).unwrap_or_else(|e| panic!("{name}: {e}"));
        check_trace(&arch, &t, name);
    }
    // Few output tiles, long K: split-K with a reduction kernel.
    for arch in [h100(), a100()] {
        let p = prob(256, 256, 16384, Dtype::Bf16);
        let r = default_recipe(&arch, &p);
        assert!(r.split_k() > 1, "{}: {r}", arch.name);
        let t = generate(&arch, &p, &r).unwrap();
        assert_eq!(t.kernels.len(), 2);
        assert!(t.kernels[1].info.name.starts_with("splitKreduce"));
        check_trace(&arch, &t, "split-K");
        // Enough output tiles: no split.
        let big = default_recipe(&arch, &prob(8192, 8192, 16384, Dtype::Bf16));
        assert_eq!(big.split_k(), 1, "{}: {big}", arch.name);
    }
    // A skinny M takes a 64-row tile on Hopper rather than wasting half of a 128-row one.
    let r = default_recipe(&h100(), &prob(64, 8192, 8192, Dtype::Bf16));
    let Recipe::Hopper(h) = r else { panic!("{r}") };
    assert_eq!(h.cta_m, 64, "{r}");
}

/// Tensor FLOPs of the busiest CTA: the kernel's makespan in tensor work when every CTA has an SM.
fn busiest_cta_flops(t: &Trace) -> u64 {
    let k = &t.kernels[0];
    let per_prog: Vec<u64> = k
        .programs
        .iter()
        .map(|p| {
            dynamic_op_counts(p)
                .into_iter()
                .map(|(op, n)| {
                    let d = k.ops.get(op);
                    let f = d.tensor.map(|s| s.flops()).unwrap_or(0);
                    n * if d.semantics == gpusim_isa::Semantics::WgmmaAsync { f / 4 } else { f }
                })
                .sum()
        })
        .collect();
    (0..k.info.num_ctas())
        .map(|c| {
            let l = k.layout.overrides.get(&c).unwrap_or(&k.layout.default);
            l.iter().map(|&p| per_prog[p as usize]).sum::<u64>()
        })
        .max()
        .unwrap_or(0)
}

#[test]
fn default_recipe_minimises_wave_quantisation() {
    // The persistent grid never exceeds the CTAs that run at once, so the busiest CTA's tensor
    // work is the makespan. The chosen tile must not do worse than the large 128×256 tile, which
    // wastes a wave where its tile count just exceeds a multiple of the grid.
    let arch = h100();
    let mut smaller = 0;
    for (m, n) in [(2304, 2304), (8192, 8448), (1536, 4096), (3072, 3072), (8192, 8192)] {
        let p = prob(m, n, 4096, Dtype::Bf16);
        let r = default_recipe(&arch, &p);
        let Recipe::Hopper(h) = r else { panic!("{r}") };
        let big = Recipe::Hopper(HopperRecipe { cta_m: 128, cta_n: 256, consumers: 2, stages: 4, ..h });
        let t = generate(&arch, &p, &r).unwrap();
        assert!(t.kernels[0].info.num_ctas() <= arch.sm.count as u64, "{p}: {r}");
        let (chosen, large) = (busiest_cta_flops(&t), busiest_cta_flops(&generate(&arch, &p, &big).unwrap()));
        eprintln!("{p}: {r}: busiest CTA {chosen} vs {large} FLOP with 128x256");
        assert!(chosen <= large, "{p}: {r}: {chosen} > {large}");
        if (h.cta_m, h.cta_n) != (128, 256) {
            smaller += 1;
        }
    }
    assert!(smaller >= 1, "no shape picked a smaller tile against wave quantisation");
}

#[test]
fn recipe_parameters_override_and_bad_values_are_named() {
    let arch = h100();
    let p = prob(4096, 4096, 4096, Dtype::Bf16);
    let base = default_recipe(&arch, &p);
    let kv = |k: &str, v: &str| (k.to_string(), v.to_string());
    let r = recipe_from_params(base, &[kv("cta_n", "128"), kv("stages", "5"), kv("epilogue", "direct")]).unwrap();
    let Recipe::Hopper(h) = r else { panic!() };
    assert_eq!((h.cta_n, h.stages, h.epilogue), (128, 5, Epilogue::Direct));
    generate(&arch, &p, &r).unwrap();
    let e = recipe_from_params(base, &[kv("warp_m", "64")]).unwrap_err();
    assert!(e.contains("warp_m") && e.contains("cluster_m"), "{e}");
    let e = recipe_from_params(base, &[kv("stages", "many")]).unwrap_err();
    assert!(e.contains("stages"), "{e}");
    let bad = recipe_from_params(base, &[kv("stages", "9")]).unwrap();
    assert!(generate(&arch, &p, &bad).unwrap_err().contains("stages"));
    let bad = recipe_from_params(base, &[kv("stages", "8")]).unwrap();
    assert!(generate(&arch, &p, &bad).unwrap_err().contains("shared memory"));
    // Hopper designs need sm_90; fp8 mma.sync needs sm_89.
    assert!(generate(&a100(), &p, &base).unwrap_err().contains("9.0"));
    let a = tuned_recipe(&a100(), &p, Style::Ampere);
    assert!(generate(&a100(), &prob(256, 256, 256, Dtype::Fp8), &a).is_err());
    assert!(GemmProblem { block_scaled: true, ..p }.validate().is_err());
}

fn simulate_tensor_flops(arch: &Arch, t: Trace) -> (u64, f64) {
    let r = simulate(arch, &mut MemTraceSource::new(t), &SimOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    (r.kernels.iter().map(|k| k.tensor_flops).sum(), r.tflops)
}

#[test]
fn small_gemms_simulate_with_the_problems_tensor_flops() {
    for arch in [h100(), a100()] {
        let p = prob(1024, 1024, 1024, Dtype::Bf16);
        let r = default_recipe(&arch, &p);
        let t = generate(&arch, &p, &r).unwrap();
        let (flops, tflops) = simulate_tensor_flops(&arch, t);
        eprintln!("{} 1024^3 bf16 {r}: {tflops:.1} TFLOP/s", arch.name);
        assert_eq!(flops, p.flops(), "{}", arch.name);
        assert!(tflops > 10.0, "{}: {tflops} TFLOP/s", arch.name);
    }
    // The split-K pair (GEMM + reduction) runs too.
    let arch = h100();
    let p = prob(256, 256, 8192, Dtype::Bf16);
    let r = default_recipe(&arch, &p);
    assert!(r.split_k() > 1);
    let (flops, _) = simulate_tensor_flops(&arch, generate(&arch, &p, &r).unwrap());
    assert_eq!(flops, p.flops());
}

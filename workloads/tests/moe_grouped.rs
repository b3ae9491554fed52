//! The DeepGEMM recipe's block selection (dense and grouped) and the M-grouped GEMM traces:
//! never split-K, tiles that fill the SMs, one B per expert, masked tiles that do no work, and
//! exactly the tensor work each layout should execute.

use gpusim_configs::{Arch, load_preset};
use gpusim_isa::{Var, binary, text};
use gpusim_workloads::gemm::grouped::{GroupedProblem, Layout, computed_rows, generate_grouped, grouped_recipe};
use gpusim_workloads::gemm::*;

fn h800() -> Arch {
    load_preset("h800-sxm5").unwrap()
}

fn grouped(m: Vec<u64>, n: u64, k: u64, layout: Layout, dtype: Dtype) -> GroupedProblem {
    GroupedProblem { m, n, k, dtype, block_scaled: dtype == Dtype::Fp8, layout, capacity: 0 }
}

#[test]
fn block_scaled_small_m_is_one_kernel_whose_tiles_fill_the_sms() {
    let arch = h800();
    let p = GemmProblem { block_scaled: true, ..GemmProblem::new(64, 4096, 7168, Dtype::Fp8) };
    let r = default_recipe(&arch, &p);
    let Recipe::Hopper(h) = r else { panic!("{r}") };
    // BLOCK_M 64 (m ≤ 64); BLOCK_N 32: 128 tiles in one wave of 132 SMs (64 would leave half idle).
    assert_eq!((h.cta_m, h.cta_n, h.split_k, h.multicast), (64, 32, 1, false), "{r}");
    let t = generate(&arch, &p, &r).unwrap();
    assert_eq!(t.kernels.len(), 1, "no split-K reduction kernel");
    assert_eq!(t.kernels[0].info.num_ctas(), 128);
    assert_eq!(tensor_flops(&t), p.flops());
    // A large problem: 128-row blocks, many waves, multicast.
    let big = GemmProblem { block_scaled: true, ..GemmProblem::new(4096, 7168, 2048, Dtype::Fp8) };
    let Recipe::Hopper(h) = default_recipe(&arch, &big) else { panic!() };
    assert_eq!((h.cta_m, h.split_k, h.multicast), (128, 1, true), "{h:?}");
    // Never split-K, whatever the shape.
    for (m, n, k) in [(16, 512, 16384), (128, 128, 65536), (256, 1024, 7168)] {
        let p = GemmProblem { block_scaled: true, ..GemmProblem::new(m, n, k, Dtype::Fp8) };
        assert_eq!(default_recipe(&arch, &p).split_k(), 1, "{p}");
    }
}

#[test]
fn contiguous_grouped_gemm_computes_every_expert_with_its_own_b() {
    let arch = h800();
    let p = grouped(vec![256, 384, 0, 128], 1024, 512, Layout::Contiguous, Dtype::Fp8);
    let r = grouped_recipe(&arch, &p);
    assert_eq!((r.cta_m, r.split_k, r.cluster_m), (128, 1, 1), "{r:?}");
    assert!(r.persistent, "DeepGEMM's grouped GEMMs are persistent");
    let t = generate_grouped(&arch, &p, &r).unwrap();
    assert_eq!(t.kernels.len(), 1);
    let k = &t.kernels[0];
    k.check().unwrap();
    let tn = 1024u64.div_ceil(r.cta_n as u64);
    let np = tn * r.cta_n as u64;
    assert_eq!(tensor_flops(&t), 2 * 768 * np * 512);
    assert_eq!(computed_rows(&p, &r), 768);
    assert_eq!(p.flops(), 2 * 768 * 1024 * 512);
    // m-blocks 0-1 are expert 0, 2-4 expert 1, 5 expert 3 (the empty group has none).
    let want = [0i64, 0, 1, 1, 1, 3];
    // Persistent: at most one CTA per SM, in whole clusters, each walking tiles c, c + G, ...
    let ctas = k.info.num_ctas();
    assert!(ctas <= arch.sm.count as u64 && ctas.is_multiple_of(r.cluster_n as u64), "{ctas} CTAs");
    let producer = k.cta(0).warps[0].clone();
    let [expert, mb, nb] = [0, 1, 2].map(|i| producer.tables[i].clone());
    // The tile list covers every (m-block, n-block) once, each with its m-block's expert.
    let mut seen: Vec<(i64, i64)> = mb.iter().copied().zip(nb.iter().copied()).collect();
    for (t, (&m, &e)) in mb.iter().zip(expert.iter()).enumerate() {
        assert_eq!(e, want[m as usize], "tile {t}");
    }
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len() as u64, 6 * tn);
    assert_eq!(mb.len() as u64, 6 * tn + (r.multicast && (6 * tn) % 2 == 1) as u64);
    // Each CTA's tile count is ⌈(tiles − c)/G⌉: the tiles are shared out exactly.
    let runs: u64 = (0..ctas).map(|c| producer_tiles(k, c)).sum();
    assert_eq!(runs, mb.len() as u64);
    let uses_expert = producer.exprs.iter().any(|e| e.coef[Var::Param(0).index()] != 0);
    assert!(uses_expert, "B's address depends on the expert");
    // Round trip through both formats.
    assert_eq!(text::read_trace("g.trace", &text::to_string(&t).unwrap()).unwrap(), t);
    assert_eq!(binary::read_trace("g.gtb", &binary::to_bytes(&t).unwrap()).unwrap(), t);

    // One CTA per tile (`persistent = false`, the CUDA twin's form): grid (m-blocks in swizzle
    // groups of 16, n-blocks, groups of 16), expert and activity read per CTA.
    let r1 = HopperRecipe { persistent: false, ..r };
    let t = generate_grouped(&arch, &p, &r1).unwrap();
    let k = &t.kernels[0];
    assert_eq!((k.info.grid.x, k.info.grid.z), (6, 1));
    assert_eq!(tensor_flops(&t), 2 * 768 * np * 512);
    let producer = k.cta(0).warps[0].clone();
    for (x, e) in want.iter().enumerate() {
        let params = producer.eval_params([x as u32, 0, 0], 0);
        assert_eq!((params[0], params[1]), (*e, 1), "m-block {x}");
    }
}

/// Tiles CTA `c` (linear) of a persistent grouped kernel runs: its tile loop's trip count.
fn producer_tiles(k: &gpusim_isa::KernelTrace, c: u64) -> u64 {
    let coord = k.info.grid.unlinear(c);
    let prog = k.cta(c).warps[0].clone();
    let params = prog.eval_params(coord.as_array(), 0);
    let step = prog.steps.iter().find_map(|s| match s {
        gpusim_isa::Step::Loop { count, .. } => Some(*count),
        _ => None,
    });
    step.map_or(0, |n| n.resolve(&params) as u64)
}

#[test]
fn masked_layout_wastes_exactly_the_padding_it_should() {
    let arch = h800();
    let (n, k) = (2048u64, 1024u64);
    let valid = vec![100u64, 0, 300, 5, 256];
    let p = GroupedProblem { capacity: 512, ..grouped(valid.clone(), n, k, Layout::Masked, Dtype::Fp8) };
    for bm in [64u32, 128] {
        let r = HopperRecipe { cta_m: bm, consumers: bm / 64, ..grouped_recipe(&arch, &p) };
        let np = n.div_ceil(r.cta_n as u64) * r.cta_n as u64;
        let rows: u64 = valid.iter().map(|&v| v.div_ceil(bm as u64) * bm as u64).sum();
        // Persistent: the scheduler's tiles are the valid m-blocks' only.
        let t = generate_grouped(&arch, &p, &r).unwrap();
        let kt = &t.kernels[0];
        let tiles = kt.cta(0).warps[0].tables[1].len() as u64;
        assert_eq!(tiles, rows / bm as u64 * (np / r.cta_n as u64), "BLOCK_M {bm}");
        assert_eq!(tensor_flops(&t), 2 * rows * np * k, "BLOCK_M {bm}");
        // One CTA per tile: the launch is sized for the capacity (every group's 512 rows) and
        // the CTAs past a group's valid rows do no work.
        let r = HopperRecipe { persistent: false, ..r };
        let t = generate_grouped(&arch, &p, &r).unwrap();
        let kt = &t.kernels[0];
        let m_blocks = 5 * 512 / bm as u64;
        assert_eq!(kt.info.num_ctas(), m_blocks.div_ceil(16) * 16 * np / r.cta_n as u64, "BLOCK_M {bm}");
        // Computed: each group's valid rows rounded up to whole m-blocks, nothing more.
        assert_eq!(computed_rows(&p, &r), rows);
        assert_eq!(tensor_flops(&t), 2 * rows * np * k, "BLOCK_M {bm}");
        let padding = rows - valid.iter().sum::<u64>();
        assert_eq!(
            padding,
            if bm == 64 { (128 - 100) + (320 - 300) + (64 - 5) } else { (128 - 100) + (384 - 300) + (128 - 5) }
        );
        // DeepGEMM counts the valid rows only.
        assert_eq!(p.flops(), 2 * 661 * n * k);
    }
}

#[test]
fn bf16_grouped_and_bad_problems() {
    let arch = h800();
    let p = grouped(vec![64; 8], 4096, 7168, Layout::Contiguous, Dtype::Bf16);
    let r = grouped_recipe(&arch, &p);
    assert_eq!(r.cta_k, 64);
    let t = generate_grouped(&arch, &p, &r).unwrap();
    assert!(t.kernels[0].ops.iter().any(|(_, d)| d.mnemonic.starts_with("HGMMA")));
    assert_eq!(tensor_flops(&t), 2 * 8 * 128 * 4096 * 7168);
    let bad = |p: GroupedProblem| generate_grouped(&arch, &p, &r).unwrap_err();
    assert!(bad(grouped(vec![], 128, 128, Layout::Contiguous, Dtype::Fp8)).contains("groups"));
    assert!(bad(grouped(vec![0, 0], 128, 128, Layout::Contiguous, Dtype::Fp8)).contains("empty"));
    assert!(bad(grouped(vec![8], 128, 128, Layout::Contiguous, Dtype::Tf32)).contains("fp8 or bf16"));
    let over = GroupedProblem { capacity: 64, ..grouped(vec![65], 128, 128, Layout::Masked, Dtype::Fp8) };
    assert!(bad(over).contains("capacity"));
}

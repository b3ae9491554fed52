//! The Triton fused_moe recipe: its launch (grid size, GROUP_SIZE_M order, early-exit blocks),
//! and per CTA the instructions a k-tile issues and the rows it loads and stores.

use std::collections::BTreeMap;

use gpusim_configs::load_preset;
use gpusim_isa::KernelTrace;
use gpusim_workloads::gemm::{Dtype, dynamic_op_counts_with};
use gpusim_workloads::moe::{FusedMoeGemm, TritonConfig, generate_fused_moe};

fn gemm(counts: Vec<u64>, tokens: u64, topk: u64, n: u64, k: u64) -> FusedMoeGemm {
    FusedMoeGemm {
        counts,
        tokens,
        topk,
        a_div: topk,
        n,
        k,
        dtype: Dtype::Fp8,
        block_scaled: true,
        mul_routed_weight: false,
    }
}

const BLOCK_FP8: TritonConfig =
    TritonConfig { block_m: 64, block_n: 128, block_k: 128, group_m: 2, warps: 4, stages: 3 };

/// Executed instructions of warp `w` of CTA `cta`, by mnemonic prefix (`LDGSTS`, `QGMMA`, ...),
/// and the CTA's parameters.
fn mix(k: &KernelTrace, cta: u64, w: usize) -> (BTreeMap<String, u64>, [i64; 8]) {
    let c = k.cta(cta);
    let prog = &c.warps[w];
    let params = prog.eval_params([c.coord.x, c.coord.y, c.coord.z], w as u32);
    let mut out = BTreeMap::new();
    for (op, n) in dynamic_op_counts_with(prog, &params) {
        let m = &k.ops.get(op).mnemonic;
        let head = m.split('.').next().unwrap_or(m).to_string();
        *out.entry(head).or_insert(0) += n;
    }
    (out, params)
}

#[test]
fn the_launch_covers_the_sorted_ids_in_triton_group_order() {
    let arch = load_preset("h800-sxm5").unwrap();
    // 3 experts with 70, 0 and 130 rows: m-blocks 2 + 0 + 3 = 5 with rows; EM = 200 + 3·63 =
    // 389 ids, ⌈389/64⌉ = 7 m-blocks; N = 384 gives 3 n-blocks: 21 CTAs.
    let p = gemm(vec![70, 0, 130], 100, 2, 384, 256);
    let k = generate_fused_moe(&arch, &p, &BLOCK_FP8).unwrap();
    assert_eq!(k.info.grid.x, 21);
    assert_eq!((k.info.grid.y, k.info.grid.z), (1, 1));
    // Triton: group = pid / (G·num_n); m = first + (pid mod G·num_n) mod size; n = ... / size,
    // with size = min(num_m − first, G). G = 2, num_n = 3.
    let mut expect = Vec::new();
    for pid in 0..21u64 {
        let first = pid / 6 * 2;
        let size = (7 - first).min(2);
        expect.push(((first + (pid % 6) % size) as i64, ((pid % 6) / size) as i64));
    }
    let expert_of_block = [0, 0, 2, 2, 2, -1, -1];
    let valid_of_block = [64, 6, 64, 64, 2, 0, 0];
    for (pid, &(m, n)) in expect.iter().enumerate() {
        let (ops, params) = mix(&k, pid as u64, 0);
        assert_eq!((params[0], params[1]), (m, n), "CTA {pid}");
        assert_eq!(params[2], expert_of_block[m as usize], "CTA {pid}: expert");
        assert_eq!(params[3], valid_of_block[m as usize], "CTA {pid}: valid rows");
        let gmma = ops.get("QGMMA").copied().unwrap_or(0);
        if expert_of_block[m as usize] < 0 {
            // Past num_tokens_post_padded: the CTA checks and returns.
            assert_eq!(gmma, 0, "CTA {pid}");
            assert_eq!(ops.get("LDGSTS").copied().unwrap_or(0), 0, "CTA {pid}");
        } else {
            // K = 256: two k-tiles of four k32 wgmma each.
            assert_eq!(gmma, 8, "CTA {pid}");
        }
    }
    // The CTAs are grouped by expert (parameter 2); −1 is no group.
    assert_eq!(k.info.cta_group.as_ref().map(|g| (g.name.as_str(), g.param)), Some(("expert", 2)));
}

#[test]
fn fewer_tokens_than_a_block_shrink_the_launch() {
    let arch = load_preset("h800-sxm5").unwrap();
    // One token, top-2: EM = 2 + 4·63 = 254 ids, shrunk to M·topk·BLOCK_M = 128: 2 m-blocks.
    let p = gemm(vec![1, 0, 1, 0], 1, 2, 256, 128);
    let k = generate_fused_moe(&arch, &p, &BLOCK_FP8).unwrap();
    assert_eq!(k.info.grid.x, 2 * 2);
}

#[test]
fn a_k_tile_issues_what_the_block_fp8_kernel_does_and_loads_only_valid_rows() {
    let arch = load_preset("h800-sxm5").unwrap();
    // One expert with 70 rows: block 0 full, block 1 with 6 valid rows. K = 2048: 16 k-tiles.
    let p = gemm(vec![70], 70, 1, 128, 2048);
    let k = generate_fused_moe(&arch, &p, &BLOCK_FP8).unwrap();
    assert_eq!(k.info.block.x, 128);
    let kt = 16;
    for (cta, valid) in [(0u64, 64u64), (1, 6)] {
        for w in 0..4u64 {
            let (ops, params) = mix(&k, cta, w as usize);
            assert_eq!(params[3], valid as i64);
            // Per k-tile: 4 × QGMMA.64x128x32, 64 FFMA (acc += dot · scale) and 2 FMUL, one
            // wait and one barrier, one commit group; the tile's copies: 8 B rows-copies of 4
            // rows each (this warp's 32 of the 128 weight rows), A copies of the warp's 16 rows
            // that hold valid tokens, and three scale loads.
            assert_eq!(ops["QGMMA"], 4 * kt, "CTA {cta} warp {w}");
            assert_eq!(ops["FFMA"], 64 * kt);
            assert_eq!(ops["FMUL"], 2 * kt);
            assert_eq!(ops["DEPBAR"], kt);
            assert_eq!(ops["BAR"], kt);
            assert_eq!(ops["LDGDEPBAR"], kt + 2, "two prologue groups, then one per k-tile");
            let rows_w = valid.saturating_sub(16 * w).min(16);
            let a_copies = rows_w.div_ceil(4);
            assert_eq!(ops["LDGSTS"], kt * (8 + a_copies), "CTA {cta} warp {w}: {rows_w} valid rows");
            // LDG: num_tokens_post_padded, expert id, sorted ids, 3 scales per k-tile.
            assert_eq!(ops["LDG"], 3 + 3 * kt);
            // Stores: 16 columns-groups of 8 per 8-row half holding a valid row.
            let halves = rows_w.div_ceil(8);
            assert_eq!(ops.get("STG").copied().unwrap_or(0), 16 * halves, "CTA {cta} warp {w}");
        }
    }
}

#[test]
fn small_blocks_compile_to_mma_sync_and_ampere_runs_the_recipe() {
    // BLOCK_M 16 (vLLM's bf16 default for M ≤ E): mma.sync with ldmatrix fragments, on Hopper
    // and on Ampere alike.
    let cfg = TritonConfig::vllm_default(Dtype::Bf16, false, 4, 8);
    assert_eq!((cfg.block_m, cfg.block_n, cfg.block_k, cfg.group_m), (16, 32, 64, 1));
    let p =
        FusedMoeGemm { dtype: Dtype::Bf16, block_scaled: false, ..gemm(vec![3, 0, 5, 0, 0, 0, 0, 0], 4, 2, 256, 512) };
    for preset in ["h800-sxm5", "a100-sxm4-80gb"] {
        let arch = load_preset(preset).unwrap();
        let k = generate_fused_moe(&arch, &p, &cfg).unwrap();
        // 4 warps over 32 columns: 8 columns (one HMMA.16816) per warp and k16 step; K = 512 is
        // 8 k-tiles of 4 steps.
        let (ops, _) = mix(&k, 0, 1);
        assert_eq!(ops["HMMA"], 8 * 4, "{preset}");
        assert_eq!(ops.get("QGMMA").or(ops.get("HGMMA")).copied().unwrap_or(0), 0, "{preset}");
        assert_eq!(ops["LDSM"], 8 * 4 * 2, "{preset}: A and B fragments per step");
    }
    // fp8 needs sm_89.
    let arch = load_preset("a100-sxm4-80gb").unwrap();
    let err = generate_fused_moe(&arch, &gemm(vec![8], 8, 1, 128, 128), &BLOCK_FP8).unwrap_err();
    assert!(err.contains("8.9"), "{err}");
}

#[test]
fn configurations_triton_would_compile_otherwise_are_refused_with_the_reason() {
    let arch = load_preset("h800-sxm5").unwrap();
    let p = gemm(vec![64], 64, 1, 256, 256);
    for (c, fragment) in [
        (TritonConfig { block_m: 128, ..BLOCK_FP8 }, "8 warps"),
        (TritonConfig { block_m: 48, ..BLOCK_FP8 }, "block_m = 48"),
        (TritonConfig { stages: 1, ..BLOCK_FP8 }, "num_stages"),
        (TritonConfig { block_n: 256, ..BLOCK_FP8 }, "128×128 scale block"),
        (TritonConfig { stages: 8, block_k: 128, block_n: 128, block_m: 256, warps: 16, group_m: 1 }, "shared memory"),
    ] {
        let err = generate_fused_moe(&arch, &p, &c).unwrap_err();
        assert!(err.contains(fragment), "{c:?}: {err}");
    }
}

//! The FlashAttention-2 recipe: well-formed compact traces with the per-iteration instruction mix
//! of FA2's sm80 kernels (../shared/notes/kernel-designs.md §1-2), per-CTA causal trip counts,
//! GQA address sharing and varlen early exits.

mod attention_common;

use std::collections::BTreeMap;

use gpusim_configs::{Arch, load_preset};
use gpusim_isa::{Cursor, KernelTrace, Trace, binary};
use gpusim_workloads::attention::{self, AttnSpec, Pass, Recipe};
use gpusim_workloads::gemm::tensor_flops;

fn a100() -> Arch {
    load_preset("a100-sxm4-80gb").unwrap()
}

fn fa2(b: u64, h: u64, s: u64, d: u64) -> AttnSpec {
    AttnSpec { batch: b, heads: h, seqlen: s, headdim: d, recipe: Some(Recipe::Fa2), ..AttnSpec::default() }
}

fn trace(s: &AttnSpec) -> Trace {
    attention_common::checked_trace(s, &a100())
}

/// Dynamic instruction counts by base mnemonic of warp `w` of CTA `cta`.
fn warp_mix(k: &KernelTrace, cta: [u32; 3], w: u32) -> BTreeMap<String, u64> {
    let linear = k.info.grid.linear(gpusim_isa::Dim3::new(cta[0], cta[1], cta[2]));
    let c = k.cta(linear);
    let prog = &c.warps[w as usize];
    let mut cur = Cursor::new(prog, cta, w);
    let mut m = BTreeMap::new();
    while let Some(i) = cur.peek(prog) {
        *m.entry(k.ops.get(i.op).base.clone()).or_insert(0) += 1;
        cur.advance();
    }
    m
}

#[test]
fn d128_iteration_mix_is_fa2s() {
    // One query tile (128 rows) against 4 and 5 KV blocks of 64: the difference is one iteration.
    let at = |sk| {
        let s = AttnSpec { seqlen_kv: sk, ..fa2(1, 1, 128, 128) };
        let t = trace(&s);
        warp_mix(&t.kernels[0], [0, 0, 0], 1)
    };
    let (a, b) = (at(256), at(320));
    let per = |op: &str| b.get(op).copied().unwrap_or(0) - a.get(op).copied().unwrap_or(0);
    assert_eq!(per("HMMA"), 256);
    assert_eq!(per("LDSM"), 16 + 32 + 32);
    assert_eq!(per("LDGSTS"), 16);
    assert_eq!(per("MUFU"), 64 + 4);
    assert_eq!(per("SHFL"), 8);
    assert_eq!(per("BAR"), 2);
    assert_eq!(per("FMUL") - 4 * 3, 128, "rescale FMULs beyond the per-row ones");
}

#[test]
fn tensor_work_is_the_problem_s() {
    // Non-causal, whole tiles: executed MMA FLOPs equal the convention exactly.
    for d in [64, 128, 256] {
        let s = fa2(2, 4, 512, d);
        assert_eq!(tensor_flops(&trace(&s)), s.fwd_flops(), "d = {d}");
    }
    // Causal: the visited blocks of each query tile (fully masked ones skipped).
    let s = AttnSpec { causal: true, ..fa2(2, 4, 1024, 128) };
    let (bm, bn) = (128u64, 64u64);
    let blocks: u64 = (0..1024 / bm).map(|m| ((m + 1) * bm).div_ceil(bn).min(1024 / bn)).sum();
    assert_eq!(tensor_flops(&trace(&s)), 2 * 4 * blocks * 4 * bm * bn * 128);
    assert!(blocks * 4 * bm * bn * 128 * 8 > s.fwd_flops(), "the diagonal tiles are computed whole");
}

#[test]
fn causal_ctas_run_their_own_trip_counts_and_mask_the_diagonal() {
    let s = AttnSpec { causal: true, ..fa2(1, 1, 1024, 128) };
    let t = trace(&s);
    let k = &t.kernels[0];
    // Tile m visits 2(m+1) blocks of 64; the first ⌈128/64⌉ = 2 are masked (FSEL per S element).
    for m in [0u32, 3, 7] {
        let mix = warp_mix(k, [m, 0, 0], 0);
        assert_eq!(mix["HMMA"], 256 * 2 * (m as u64 + 1), "tile {m}");
        assert_eq!(mix["FSEL"], 2 * 64, "tile {m}");
    }
    let nc = trace(&fa2(1, 1, 1024, 128));
    assert!(!nc.kernels[0].ops.iter().any(|(_, d)| d.base == "FSEL"), "whole tiles, no mask");
}

#[test]
fn gqa_heads_share_their_kv_head_s_addresses() {
    let s = AttnSpec { kv_heads: 2, ..fa2(1, 8, 256, 64) };
    let t = trace(&s);
    let k = &t.kernels[0];
    // The first K copy of the prologue follows the Q copies.
    let first_k = |z: u32| {
        let c = k.cta(k.info.grid.linear(gpusim_isa::Dim3::new(0, 0, z)));
        let prog = &c.warps[0];
        let mut cur = Cursor::new(prog, [0, 0, z], 0);
        let mut seen = Vec::new();
        while let Some(i) = cur.peek(prog) {
            if k.ops.get(i.op).base == "LDGSTS" {
                seen.push(cur.base_address(prog, i).unwrap());
            }
            cur.advance();
        }
        seen
    };
    let (h0, h3, h4) = (first_k(0), first_k(3), first_k(4));
    let q_copies = 128 * 128 / (128 * 16); // 128 rows of 128 B by 128 threads
    assert_ne!(h0[0], h3[0], "Q differs per head");
    assert_eq!(h0[q_copies..], h3[q_copies..], "heads 0 and 3 share KV head 0");
    assert_ne!(h0[q_copies..], h4[q_copies..], "head 4 reads KV head 1");
}

#[test]
fn varlen_ctas_past_their_request_exit_at_once() {
    let s = AttnSpec { varlen: Some(vec![1024, 300]), ..fa2(2, 2, 1024, 64) };
    let t = trace(&s);
    let k = &t.kernels[0];
    // Request 1 (300 tokens) has 3 of the 8 query tiles; tile 5 exits at once.
    let past: u64 = warp_mix(k, [5, 1, 0], 0).values().sum();
    assert_eq!(past, 3, "S2R ×2 and EXIT");
    let inside = warp_mix(k, [2, 1, 0], 0);
    assert_eq!(inside["HMMA"], 3 * 256, "3 KV blocks of 128 at d = 64");
    let full = warp_mix(k, [2, 0, 0], 0);
    assert_eq!(full["HMMA"], 8 * 256);
}

#[test]
fn a_long_forward_stays_compact() {
    let s = fa2(16, 16, 16384, 128);
    let t = trace(&s);
    let mut bytes = Vec::new();
    binary::write_trace(&t, &mut bytes).unwrap();
    assert!(bytes.len() < 2 << 20, "{} bytes", bytes.len());
    let c = AttnSpec { causal: true, ..s };
    let mut bytes = Vec::new();
    binary::write_trace(&trace(&c), &mut bytes).unwrap();
    assert!(bytes.len() < 2 << 20, "causal: {} bytes", bytes.len());
}

#[test]
fn unsupported_combinations_name_the_field() {
    let arch = a100();
    let e = |s: AttnSpec| attention::generate(&s, &arch).unwrap_err().0;
    assert!(e(fa2(1, 1, 256, 96)).contains("headdim = 96"));
    assert!(e(AttnSpec { headdim_v: 64, ..fa2(1, 1, 256, 128) }).contains("headdim_v = 64"));
    assert!(e(AttnSpec { dtype: gpusim_workloads::gemm::Dtype::Fp8, ..fa2(1, 1, 256, 128) }).contains("fp8"));
    let _ = Pass::Fwd;
}

#[test]
fn backward_is_three_kernels_with_five_gemms_and_dq_atomics() {
    let s = AttnSpec { pass: Pass::Bwd, ..fa2(1, 2, 512, 128) };
    let t = trace(&s);
    let names: Vec<&str> = t.kernels.iter().map(|k| k.info.name.as_str()).collect();
    assert_eq!(t.kernels.len(), 3, "{names:?}");
    assert!(names[0].starts_with("flash_bwd_dot_do_o") && names[2].starts_with("flash_bwd_convert_dq"), "{names:?}");
    assert_eq!(t.kernels[1].info.deps, vec![0]);
    assert_eq!(t.kernels[2].info.deps, vec![1]);
    // 10·BM·BN·d tensor FLOPs per query block: 2.5× the forward, the convention.
    assert_eq!(tensor_flops(&t), s.fwd_flops() / 2 * 5);
    // Per warp and query block (64×128 at d = 128): 320 HMMA and one RED per dQ element.
    let at = |sq| warp_mix(&trace(&AttnSpec { pass: Pass::Bwd, ..fa2(1, 1, sq, 128) }).kernels[1], [0, 0, 0], 3);
    let (a, b) = (at(256), at(320));
    let per = |op: &str| b.get(op).copied().unwrap_or(0) - a.get(op).copied().unwrap_or(0);
    assert_eq!(per("HMMA"), 320);
    assert_eq!(per("RED") * 32 * 8, 64 * 128, "element-wise fp32 atomics");
    assert_eq!(per("MUFU"), 64 * 128 / 256);
}

#[test]
fn fwdbwd_chains_the_passes_and_causal_backward_skips_masked_blocks() {
    let s = AttnSpec { pass: Pass::FwdBwd, causal: true, ..fa2(1, 2, 1024, 64) };
    let t = trace(&s);
    assert_eq!(t.kernels.len(), 4);
    let ids: Vec<u32> = t.kernels.iter().map(|k| k.info.id).collect();
    assert_eq!(ids, vec![0, 1, 2, 3]);
    assert_eq!(t.kernels[3].info.deps, vec![2]);
    // KV block n of 128 visits the query blocks m ≥ n (128 rows): 8 − n of them.
    let k = &t.kernels[2];
    for n in [0u32, 5, 7] {
        let mix = warp_mix(k, [n, 0, 0], 0);
        let per_block = 10 * 128 * 128 * 64 / 4096 / 8;
        assert_eq!(mix["HMMA"], per_block * (8 - n as u64), "block {n}");
    }
}

//! The FlashAttention-3 backward recipe (`attention::fa3_bwd`): FA3's tile table, the
//! per-query-block instruction mix of each warp role of the main kernel (producer, dQ writer, MMA
//! warps), causal CTAs' trip counts from `m_block_min` in longest-first order, GQA's extra
//! postprocess kernels, the kernel chain, the refusals, and one simulated trend against the
//! forward on H100.

mod attention_common;

use std::collections::BTreeMap;

use gpusim_configs::{Arch, load_preset};
use gpusim_isa::{Cursor, Dim3, KernelTrace, MemTraceSource, Trace};
use gpusim_sim_core::{SimOptions, simulate};
use gpusim_workloads::attention::fa3_bwd::{BwdTile, bwd_plan, bwd_tile, kernel_headdim};
use gpusim_workloads::attention::{self, AttnSpec, Pass, Recipe};
use gpusim_workloads::gemm::{Dtype, tensor_flops};

fn h100() -> Arch {
    load_preset("h100-sxm5-80gb").unwrap()
}

fn bwd(b: u64, h: u64, s: u64, d: u64) -> AttnSpec {
    AttnSpec {
        batch: b,
        heads: h,
        seqlen: s,
        headdim: d,
        pass: Pass::Bwd,
        recipe: Some(Recipe::Fa3),
        ..AttnSpec::default()
    }
}

fn trace(s: &AttnSpec) -> Trace {
    attention_common::checked_trace(s, &h100())
}

/// Dynamic instruction counts by base mnemonic (and by full mnemonic, prefixed `=`) of warp `w`
/// of CTA `cta`.
fn warp_mix(k: &KernelTrace, cta: [u32; 3], w: u32) -> BTreeMap<String, u64> {
    let c = k.cta(k.info.grid.linear(Dim3::new(cta[0], cta[1], cta[2])));
    let prog = &c.warps[w as usize];
    let mut cur = Cursor::new(prog, cta, w);
    let mut m = BTreeMap::new();
    while let Some(i) = cur.peek(prog) {
        let d = k.ops.get(i.op);
        *m.entry(d.base.clone()).or_insert(0) += 1;
        *m.entry(format!("={}", d.mnemonic)).or_insert(0) += 1;
        cur.advance();
    }
    m
}

fn get(m: &BTreeMap<String, u64>, k: &str) -> u64 {
    m.get(k).copied().unwrap_or(0)
}

#[test]
fn tiles_are_fa3s_run_mha_bwd_table() {
    let t = |m, n, wgs, sdo, swaps, atoms, v| {
        let (sdp_swap, dkv_swap, dq_swap) = swaps;
        let (atom_sdp, atom_dkv, atom_dq) = atoms;
        BwdTile {
            block_m: m,
            block_n: n,
            wgs,
            stages_do: sdo,
            stages_ds: sdo,
            sdp_swap,
            dkv_swap,
            dq_swap,
            atom_sdp,
            atom_dkv,
            atom_dq,
            v_in_regs: v,
        }
    };
    // hopper/flash_bwd_launch_template.h, Arch >= 90, no softcap.
    assert_eq!(bwd_tile(64, false), t(128, 128, 2, 2, (true, false, false), (1, 2, 2), false));
    assert_eq!(bwd_tile(64, true), bwd_tile(64, false));
    assert_eq!(bwd_tile(96, false), t(64, 128, 2, 2, (true, false, false), (1, 2, 1), true));
    assert_eq!(bwd_tile(128, false), t(80, 128, 2, 2, (true, false, true), (1, 2, 1), false));
    assert_eq!(bwd_tile(128, true), t(64, 128, 2, 2, (true, false, false), (1, 2, 1), false));
    assert_eq!(bwd_tile(192, false), t(64, 96, 3, 1, (false, true, false), (1, 1, 1), false));
    assert_eq!(bwd_tile(256, true), t(64, 80, 2, 1, (false, true, true), (1, 1, 1), false));
    assert_eq!([40, 64, 72, 96, 136, 192, 200].map(kernel_headdim), [64, 64, 96, 96, 192, 192, 256]);
    // setmaxnreg and the CTA: 24/240 with 2 MMA warpgroups, 32/160 with 3; all within 227 KB.
    let arch = h100();
    for (d, causal, threads, regs) in
        [(64, false, 384, (24, 240)), (128, true, 384, (24, 240)), (192, false, 512, (32, 160))]
    {
        let pl = bwd_plan(&AttnSpec { causal, ..bwd(1, 1, 1024, d) }, &arch).unwrap();
        assert_eq!(pl.threads, threads);
        assert_eq!((pl.prod_regs, pl.cons_regs), regs);
        assert!(pl.smem.total <= 227 << 10, "d{d}: {} B", pl.smem.total);
    }
}

/// Per query block: the instruction mix of each role of the main kernel's CTA 0, from the
/// difference between 3 and 2 query blocks (non-causal, 4 KV blocks).
fn per_block(d: u64) -> [BTreeMap<String, u64>; 4] {
    let pl = bwd_plan(&bwd(1, 1, 1024, d), &h100()).unwrap();
    let bm = pl.t.block_m;
    let mixes = |blocks: u64| {
        let s = AttnSpec { seqlen: blocks * bm, seqlen_kv: 4 * pl.t.block_n, ..bwd(1, 1, 0, d) };
        let t = trace(&s);
        let k = &t.kernels[1];
        // Producer (warp 0), dQ writer (1), an MMA warp without a special role (5), warp 0 of WG1.
        [0, 1, 5, 4].map(|w| warp_mix(k, [0, 0, 0], w))
    };
    let (a, b) = (mixes(2), mixes(3));
    let mut out: [BTreeMap<String, u64>; 4] = Default::default();
    for r in 0..4 {
        for (op, n) in &b[r] {
            let d = n - get(&a[r], op);
            if d > 0 {
                out[r].insert(op.clone(), d);
            }
        }
    }
    out
}

#[test]
fn each_role_runs_fa3s_per_block_mix() {
    // (d, S/dP HGMMA per GEMM, dV/dK per GEMM, dQ, exp2 per thread = kBlockM·kBlockN/(128·WGs),
    //  MMA warpgroups, dQ through the writer warp)
    for (d, n_s, n_kv, n_q, ex2, wgs, writer) in [
        (64, 4, 8, 8, 64, 2, true),
        (96, 6, 4, 8, 32, 2, true),
        (128, 8, 5, 8, 40, 2, true),
        (192, 12, 4, 6, 16, 3, true),
        (256, 16, 8, 10, 20, 2, false),
    ] {
        let [prod, wr, mma, _] = per_block(d);
        // Five GEMMs per warpgroup; each HGMMA.64xNx16 of K-extent 16.
        assert_eq!(get(&mma, "HGMMA"), 2 * n_s + 2 * n_kv + n_q, "d{d}: {mma:?}");
        let flops: u64 = mma
            .iter()
            .filter(|(k, _)| k.starts_with("=HGMMA"))
            .map(|(k, n)| {
                let n_dim: u64 = k.split('.').nth(1).unwrap().split('x').nth(1).unwrap().parse().unwrap();
                n * 2 * 64 * n_dim * 16
            })
            .sum();
        let pl = bwd_plan(&bwd(1, 1, 1024, d), &h100()).unwrap();
        assert_eq!(flops * wgs, 10 * pl.t.block_m * pl.t.block_n * d, "d{d}: 10·M·N·d per block");
        assert_eq!(get(&mma, "MUFU"), ex2, "d{d}: one exp2 per S element");
        assert_eq!(get(&mma, "FFMA"), ex2, "d{d}");
        assert_eq!(get(&mma, "F2FP"), ex2, "d{d}: P and dS packed");
        // Producer: Q and dO by TMA, LSE_log2 and dPsum by bulk copies, one wait on each empty stage.
        assert_eq!((get(&prod, "UTMALDG"), get(&prod, "UBLKCP")), (2, 2), "d{d}: {prod:?}");
        assert_eq!(get(&prod, "=SYNCS.PHASECHK.TRANS64.TRYWAIT"), 2, "d{d}");
        assert_eq!(get(&prod, "=SYNCS.ARRIVE.TRANS64"), 2, "d{d}");
        // The dQ writer: one bulk reduce-add per MMA warpgroup (d < 256), or none; the MMA warps
        // hand dQ over in shared memory, or add it with 16-byte atomics at d256.
        if writer {
            assert_eq!(get(&wr, "UBLKRED"), wgs, "d{d}: {wr:?}");
            assert_eq!((get(&wr, "UTMACMDFLUSH"), get(&wr, "DEPBAR")), (wgs, wgs), "d{d}");
            assert_eq!(get(&wr, "BAR"), 2 * wgs, "d{d}");
            let dq_floats = pl.t.block_m * d / (128 * wgs);
            assert_eq!(get(&mma, "STS"), dq_floats / 4, "d{d}: dQ to shared memory");
            assert_eq!(get(&mma, "REDG"), 0);
        } else {
            assert!(wr.is_empty(), "d{d}: warp 1 only leaves: {wr:?}");
            assert_eq!(get(&mma, "REDG"), 64 * 256 / 256 / 4, "d{d}: dQ by float4 atomics");
            assert_eq!(get(&mma, "STS"), 0);
        }
    }
    // RS where FA3 has it: P and dS from registers for dV/dK at d ≤ 128, V in registers at d96;
    // SS with P in shared memory at d192 and d256.
    let [_, _, m128, _] = per_block(128);
    assert_eq!(get(&m128, "STSM"), 5, "d128: only dS (40 per thread, 8 per STSM.x4)");
    let [_, _, m192, _] = per_block(192);
    assert_eq!(get(&m192, "STSM"), 4, "d192: P and dS, 16 per thread each");
    let [_, _, m256, _] = per_block(256);
    assert_eq!(get(&m256, "=STSM.16.M88.2"), 10, "d256: 20 per thread each, .2");
}

#[test]
fn causal_ctas_start_at_their_diagonal_longest_first() {
    // d128 causal: 64×128 tiles; seqlen 1024 = 16 query blocks, 8 KV blocks; KV block n visits
    // the query blocks m ≥ ⌊128·n/64⌋ = 2n, 16 − 2n of them, each with the causal mask.
    let s = AttnSpec { causal: true, ..bwd(1, 2, 1024, 128) };
    let t = trace(&s);
    let k = &t.kernels[1];
    let pl = bwd_plan(&s, &h100()).unwrap();
    assert_eq!(pl.swizzle, 2, "both heads in one section");
    assert_eq!(k.info.grid, Dim3::new(2, 8, 1), "heads fastest, then KV blocks from 0 (longest)");
    for n in [0u32, 3, 7] {
        let trips = 16 - 2 * n as u64;
        let mma = warp_mix(k, [1, n, 0], 5);
        assert_eq!(get(&mma, "HGMMA"), trips * (8 + 8 + 4 + 4 + 8), "block {n}");
        assert_eq!(get(&mma, "FSEL"), trips * 32, "block {n}: masked everywhere at d > 64");
        let prod = warp_mix(k, [1, n, 0], 0);
        assert_eq!(get(&prod, "UTMALDG"), 2 + 2 * trips, "block {n}: K, V, then Q and dO per block");
        assert_eq!(get(&warp_mix(k, [1, n, 0], 1), "UBLKRED"), 2 * trips, "block {n}");
    }
    // d64: the diagonal block alone is masked (SeparateMaskingIterations).
    let s = AttnSpec { causal: true, ..bwd(1, 1, 1024, 64) };
    let k = &trace(&s).kernels[1];
    for n in [0u32, 4] {
        let mma = warp_mix(k, [0, n, 0], 4);
        assert_eq!(get(&mma, "HGMMA"), (8 - n as u64) * 32, "block {n}");
        assert_eq!(get(&mma, "FSEL"), 64, "block {n}");
    }
    let nc = trace(&bwd(1, 1, 1024, 64));
    assert!(!nc.kernels[1].ops.iter().any(|(_, d)| d.base == "FSEL"), "non-causal blocks are unmasked");
}

#[test]
fn kernels_chain_in_one_stream_and_gqa_adds_the_dk_dv_postprocess() {
    let s = bwd(2, 8, 512, 128);
    let t = trace(&s);
    let names: Vec<&str> = t.kernels.iter().map(|k| k.info.name.as_str()).collect();
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(names[0].starts_with("flash_bwd_preprocess") && names[2].starts_with("flash_bwd_postprocess_dq"));
    assert_eq!(names[1], "flash_bwd_sm90_bf16_hdim128_80x128");
    let deps: Vec<Vec<u32>> = t.kernels.iter().map(|k| k.info.deps.clone()).collect();
    assert_eq!(deps, vec![vec![], vec![0], vec![1]]);
    assert!(t.kernels.iter().all(|k| k.info.stream == 0));
    // 10·M·N·d per (query block, KV block): 2.5× the forward's FLOPs, with 80-row blocks
    // covering 560 of the 512 query rows.
    assert_eq!(tensor_flops(&t), 2 * 8 * 7 * 4 * 10 * 80 * 128 * 128);
    assert_eq!(s.flops(), s.fwd_flops() / 2 * 5);
    // Without GQA one lane of the last MMA warp stores dK and dV by TMA.
    let k = &t.kernels[1];
    let last = k.info.warps_per_cta() - 1;
    let epi = warp_mix(k, [0, 0, 0], last);
    assert_eq!((get(&epi, "UTMASTG"), get(&epi, "UBLKRED")), (2, 0), "{epi:?}");
    assert_eq!(get(&warp_mix(k, [0, 0, 0], 4), "UTMASTG"), 0);

    // GQA, 8 heads over 2 KV heads: fp32 dK/dV reduce-added, then two more postprocess kernels.
    let g = AttnSpec { kv_heads: 2, ..s.clone() };
    let t = trace(&g);
    let names: Vec<&str> = t.kernels.iter().map(|k| k.info.name.as_str()).collect();
    assert_eq!(names.len(), 5, "{names:?}");
    assert!(names[1].ends_with("_gqa") && names[3].contains("_dk_") && names[4].contains("_dv_"), "{names:?}");
    for k in &t.kernels[3..] {
        assert_eq!(k.info.deps, vec![1]);
        assert_eq!(k.info.grid, Dim3::new(4, 2, 2), "{}: KV blocks × KV heads × batch", k.info.name);
    }
    let k = &t.kernels[1];
    let lead = warp_mix(k, [0, 0, 0], 4);
    assert_eq!((get(&lead, "UBLKRED"), get(&lead, "UTMASTG")), (2, 0), "{lead:?}");
    assert_eq!(get(&warp_mix(k, [0, 0, 0], last), "UTMASTG"), 0);
    // Heads 0..3 share KV head 0's K block; head 4 reads KV head 1's.
    let first_k = |h: u32| {
        let c = k.cta(k.info.grid.linear(Dim3::new(0, h, 0)));
        let prog = &c.warps[0];
        let mut cur = Cursor::new(prog, [0, h, 0], 0);
        let mut tma = Vec::new();
        while let Some(i) = cur.peek(prog) {
            if k.ops.get(i.op).base == "UTMALDG" {
                tma.push(cur.base_address(prog, i).unwrap());
            }
            cur.advance();
        }
        tma[1]
    };
    assert_eq!(first_k(0), first_k(3));
    assert_ne!(first_k(0), first_k(4));

    // fwd+bwd: the forward kernel, then the three, renumbered.
    let t = trace(&AttnSpec { pass: Pass::FwdBwd, ..s });
    let deps: Vec<Vec<u32>> = t.kernels.iter().map(|k| k.info.deps.clone()).collect();
    assert_eq!(deps, vec![vec![], vec![], vec![1], vec![2]]);
    assert!(t.kernels[0].info.name.starts_with("flash_fwd_sm90"));
}

#[test]
fn hopper_s_default_recipe_builds_fwdbwd_and_fp8_backward_is_refused() {
    let arch = h100();
    let s = AttnSpec { pass: Pass::FwdBwd, recipe: None, ..bwd(1, 4, 1024, 128) };
    let a = attention::generate(&s, &arch).unwrap();
    assert_eq!(a.recipe, Recipe::Fa3);
    assert_eq!(a.trace.kernels.len(), 4);
    let e = |s: AttnSpec| attention::generate(&s, &arch).unwrap_err().0;
    let fp8 = e(AttnSpec { dtype: Dtype::Fp8, ..bwd(1, 4, 1024, 128) });
    assert!(fp8.contains("fp8") && fp8.contains("fp16 and bf16"), "{fp8}");
    // The fp8 forward alone still builds.
    assert!(
        attention::generate(&AttnSpec { dtype: Dtype::Fp8, pass: Pass::Fwd, ..bwd(1, 4, 1024, 128) }, &arch).is_ok()
    );
    assert!(e(AttnSpec { headdim_v: 64, ..bwd(1, 4, 1024, 128) }).contains("headdim_v = 64"));
    assert!(e(AttnSpec { headdim: 264, headdim_v: 264, ..bwd(1, 4, 1024, 128) }).contains("headdim = 264"));
    let a100 = load_preset("a100-sxm4-80gb").unwrap();
    assert!(attention::generate(&bwd(1, 4, 1024, 128), &a100).unwrap_err().0.contains("compute capability 9.x"));
}

/// Simulated time (µs) of `s` on H100.
fn time_us(s: &AttnSpec) -> f64 {
    let arch = h100();
    let a = attention::generate(s, &arch).unwrap();
    let r = simulate(&arch, &mut MemTraceSource::new(a.trace), &SimOptions::default()).unwrap();
    r.time_us
}

#[test]
fn backward_takes_longer_than_the_forward_by_its_work() {
    // Same problem, d128 non-causal, about 2 waves of backward CTAs. The backward runs 2.5× the
    // forward's tensor work (five GEMMs per block against two) and adds what the forward does not
    // have: P/dS and dQ through shared memory, the dQ reduce-add at the L2 and two more kernels;
    // what it saves is the online softmax's running max and rescaling. So it takes 2.5× as long
    // at equal efficiency, somewhat less only if its GEMMs overlap better, and up to ~3.5× at the
    // efficiency gap FA3's paper reports (~550 against ~750 TFLOP/s at d128): 2× to 3.5×.
    let s = AttnSpec { pass: Pass::Bwd, ..bwd(1, 16, 2048, 128) };
    let (b, f) = (time_us(&s), time_us(&AttnSpec { pass: Pass::Fwd, ..s.clone() }));
    let ratio = b / f;
    assert!((2.0..=3.5).contains(&ratio), "bwd {b:.1} µs vs fwd {f:.1} µs: {ratio:.2}×");
}

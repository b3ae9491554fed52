//! The FlashAttention-3 forward recipe (`attention::fa3`): the persistent causal schedule
//! (every tile exactly once, persistent CTAs first and no more than fit, the tail longest
//! first), the tensor work each CTA's consumer warps issue against FA3's per-tile KV block
//! counts, and the masked blocks on the causal diagonal.

mod attention_common;

use std::collections::{BTreeMap, BTreeSet};

use gpusim_configs::{Arch, load_preset};
use gpusim_isa::{Cursor, KernelTrace};
use gpusim_workloads::attention::fa3::plan;
use gpusim_workloads::attention::fa3_schedule::{Chunk, causal_blocks, causal_persistent};
use gpusim_workloads::attention::{AttnSpec, Recipe};
use gpusim_workloads::gemm::Dtype;

fn h100() -> Arch {
    load_preset("h100-sxm5-80gb").unwrap()
}

fn fwd(b: u64, h: u64, s: u64, d: u64, causal: bool) -> AttnSpec {
    AttnSpec {
        batch: b,
        heads: h,
        seqlen: s,
        headdim: d,
        causal,
        dtype: Dtype::Fp16,
        recipe: Some(Recipe::Fa3),
        ..AttnSpec::default()
    }
}

/// Dynamic counts by base mnemonic (and by full mnemonic, prefixed `=`) of warp `w` of the CTA at linear index `cta`.
fn warp_mix(k: &KernelTrace, cta: u64, w: u32) -> BTreeMap<String, u64> {
    let c = k.cta(cta);
    let prog = &c.warps[w as usize];
    let g = k.info.grid;
    let (gx, gy) = (g.x as u64, g.y as u64);
    let mut cur = Cursor::new(prog, [(cta % gx) as u32, (cta / gx % gy) as u32, (cta / (gx * gy)) as u32], w);
    let mut m = BTreeMap::new();
    while let Some(i) = cur.peek(prog) {
        let d = k.ops.get(i.op);
        *m.entry(d.base.clone()).or_insert(0) += 1;
        *m.entry(format!("={}", d.mnemonic)).or_insert(0) += 1;
        cur.advance();
    }
    m
}

/// The problems of the published FA3 causal cases (16k tokens, 2048 wide) at the lengths where
/// the persistent schedule applies, plus GQA and a ragged length.
fn persistent_cases() -> Vec<AttnSpec> {
    let mut v: Vec<AttnSpec> = [(128, 512), (128, 2048), (128, 8192), (64, 512), (64, 4096)]
        .iter()
        .map(|&(d, s)| fwd(16384 / s, 2048 / d, s, d, true))
        .collect();
    v.push(AttnSpec { kv_heads: 4, ..fwd(4, 32, 1024, 128, true) });
    v.push(fwd(6, 16, 1000, 128, true));
    v
}

#[test]
fn the_persistent_causal_schedule_runs_every_tile_once() {
    let arch = h100();
    for s in persistent_cases() {
        let pl = plan(&s, &arch).unwrap();
        let chunks = causal_persistent(&pl, s.seqlen, s.seqlen_kv()).unwrap_or_else(|| panic!("{s}: not persistent"));
        let mut seen = BTreeSet::new();
        for ch in &chunks {
            assert!(!ch.hb.is_empty(), "{s}: an empty CTA");
            for &hb in &ch.hb {
                assert!(ch.m < pl.m_blocks && hb < pl.heads * pl.batch, "{s}: tile ({}, {hb}) out of range", ch.m);
                assert!(seen.insert((ch.m, hb)), "{s}: tile ({}, {hb}) twice", ch.m);
            }
        }
        assert_eq!(seen.len() as u64, pl.tiles, "{s}: tiles missing");
        // Persistent CTAs (more than one tile) come first, at most one per CTA slot; the tail
        // that follows is single tiles, longest first.
        let bulk = chunks.iter().take_while(|ch| ch.hb.len() > 1).count();
        assert!(
            bulk > 0 && bulk as u64 <= pl.slots,
            "{s}: {bulk} persistent CTAs for {} slots: {:?}",
            pl.slots,
            &chunks[..chunks.len().min(8)]
        );
        let tail = &chunks[bulk..];
        assert!(tail.iter().all(|ch| ch.hb.len() == 1), "{s}: a multi-tile CTA in the tail");
        let n = |m| causal_blocks(&pl, s.seqlen, s.seqlen_kv(), m);
        assert!(tail.windows(2).all(|w| n(w[0].m) >= n(w[1].m)), "{s}: the tail is not longest first");
        // The tail is at least the tenth of the work the bulk leaves, and not the bulk of it.
        let work = |chs: &[Chunk]| -> u64 { chs.iter().map(|ch| ch.hb.len() as u64 * (n(ch.m) + 1)).sum() };
        let (w_bulk, w_tail) = (work(&chunks[..bulk]), work(tail));
        assert!(
            w_tail * 20 >= w_bulk + w_tail && w_tail * 2 < w_bulk + w_tail,
            "{s}: tail {w_tail} of {}",
            w_bulk + w_tail
        );
        // A persistent CTA's work is at most 9/10 of a slot's mean share.
        let mean = (w_bulk + w_tail) / pl.slots;
        for ch in &chunks[..bulk] {
            assert!(
                ch.hb.len() as u64 * (n(ch.m) + 1) <= mean,
                "{s}: a CTA of {} tiles of m-block {}",
                ch.hb.len(),
                ch.m
            );
        }
    }
}

#[test]
fn long_causal_sequences_keep_one_cta_per_tile() {
    let arch = h100();
    // 128 m-blocks of 128 rows: more than half as many as the 132 SMs.
    let s = fwd(1, 16, 16384, 128, true);
    let pl = plan(&s, &arch).unwrap();
    assert!(causal_persistent(&pl, s.seqlen, s.seqlen_kv()).is_none());
    let t = attention_common::checked_trace(&s, &arch);
    assert_eq!(t.kernels[0].info.grid.count(), pl.tiles);
}

#[test]
fn consumers_issue_each_tiles_gemms_and_mask_its_diagonal_blocks() {
    let arch = h100();
    let mut cases = persistent_cases();
    cases.push(fwd(1, 16, 16384, 128, true));
    for s in cases {
        let pl = plan(&s, &arch).unwrap();
        let t = attention_common::checked_trace(&s, &arch);
        let k = &t.kernels[0];
        let (sq, sk) = (s.seqlen, s.seqlen_kv());
        // FA3's per-tile KV blocks over every tile, from the schedule-free closed form.
        let blocks: u64 = (0..pl.m_blocks).map(|m| causal_blocks(&pl, sq, sk, m)).sum::<u64>() * pl.heads * pl.batch;
        let (mut hgmma, mut masked, mut stores) = (0, 0, 0);
        for cta in 0..k.info.grid.count() {
            // Warp 4 is the first consumer warpgroup's first warp; every consumer warp issues alike.
            let mix = warp_mix(k, cta, 4);
            hgmma += mix.get("HGMMA").copied().unwrap_or(0);
            masked += mix.get("=ISETP.GE.AND").copied().unwrap_or(0);
            stores += mix.get("UTMASTG").copied().unwrap_or(0);
        }
        assert_eq!(stores, pl.tiles, "{s}: O stores");
        // Per KV block a consumer warp issues d/16 QKᵀ and kBlockN/16 PV HGMMAs (one per its WG).
        assert_eq!(hgmma, blocks * (pl.d / 16 + pl.bn / 16), "{s}: HGMMA");
        // Masked blocks: n_masking_steps per tile, capped by the fewest blocks of any tile (the
        // same for every tile of the grid), kBlockN/2 elements each per thread.
        let fewest = (0..pl.m_blocks).map(|m| causal_blocks(&pl, sq, sk, m)).min().unwrap();
        assert_eq!(masked, pl.mask_steps.min(fewest) * pl.tiles * (pl.bn / 2), "{s}: masked elements");
    }
}

#[test]
fn non_causal_masks_only_a_ragged_last_block() {
    let arch = h100();
    for (s, want) in [(fwd(8, 16, 2048, 128, false), 1), (fwd(8, 16, 2048, 64, false), 1)] {
        let pl = plan(&s, &arch).unwrap();
        let even = s.seqlen.is_multiple_of(pl.bm) && s.seqlen.is_multiple_of(pl.bn);
        assert_eq!(pl.mask_steps, u64::from(!even), "{s}");
        assert_eq!(pl.mask_steps, want, "{s}: 2048 is a multiple of neither 176 nor 192");
    }
    let s = AttnSpec { seqlen: 128 * 176, ..fwd(1, 16, 128 * 176, 128, false) };
    assert_eq!(plan(&s, &arch).unwrap().mask_steps, 0, "whole tiles are not masked");
}

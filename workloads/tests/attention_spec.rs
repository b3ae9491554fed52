//! The attention problem: its parameter table, checks, FLOP convention and recipe selection.

use gpusim_configs::{Arch, load_preset};
use gpusim_workloads::attention::{AttnSpec, PROBLEM, Pass, Recipe};
use gpusim_workloads::params::apply;
use gpusim_workloads::registry;

fn a100() -> Arch {
    load_preset("a100-sxm4-80gb").unwrap()
}

fn h100() -> Arch {
    load_preset("h100-sxm5-80gb").unwrap()
}

fn spec(kv: &[(&str, &str)]) -> Result<AttnSpec, String> {
    let given: Vec<(String, String)> = kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let mut s = AttnSpec::default();
    apply("attention", PROBLEM, &given, &mut s).map_err(|e| e.0)?;
    s.validate().map_err(|e| e.0)?;
    Ok(s)
}

#[test]
fn flops_follow_the_flashattention_benchmarks() {
    // FA2's benchmark: 4·b·s²·h·d, halved for causal; bwd 2.5×, fwd+bwd 3.5×.
    let s = spec(&[("batch", "8"), ("heads", "16"), ("seqlen", "2048"), ("headdim", "128")]).unwrap();
    let fwd = 4 * 8 * 2048 * 2048 * 16 * 128u64;
    assert_eq!(s.flops(), fwd);
    let c = AttnSpec { causal: true, ..s.clone() };
    assert_eq!(c.flops(), fwd / 2);
    assert_eq!(AttnSpec { pass: Pass::Bwd, ..s.clone() }.flops(), fwd / 2 * 5);
    assert_eq!(AttnSpec { pass: Pass::FwdBwd, ..s.clone() }.flops(), fwd / 2 * 7);
    // FA3's: 2·b·h·sq·avg_sk·(d + dv), causal avg_sk = (max(0, sk − sq) + sk)/2.
    let d =
        spec(&[("seqlen", "128"), ("seqlen_kv", "1024"), ("headdim", "192"), ("headdim_v", "128"), ("causal", "true")])
            .unwrap();
    assert_eq!(d.flops(), 2 * 16 * 128 * (896 + 1024) / 2 * (192 + 128));
    // Varlen: per request.
    let v = spec(&[("batch", "2"), ("seqlen", "1024"), ("varlen", "1024,512")]).unwrap();
    assert_eq!(v.flops(), 4 * 16 * 128 * (1024 * 1024 + 512 * 512));
}

#[test]
fn kv_bytes_count_the_cache_once() {
    let s =
        spec(&[("batch", "4"), ("heads", "32"), ("kv_heads", "8"), ("seqlen", "1"), ("seqlen_kv", "4096")]).unwrap();
    assert_eq!(s.kv_bytes(Recipe::Decode), 4 * 8 * 4096 * 256 * 2);
    let m = spec(&[
        ("heads", "128"),
        ("kv_heads", "1"),
        ("seqlen", "1"),
        ("seqlen_kv", "4096"),
        ("headdim", "576"),
        ("headdim_v", "512"),
    ])
    .unwrap();
    assert_eq!(m.kv_bytes(Recipe::MlaDecode), 4096 * 576 * 2);
}

#[test]
fn recipe_selection_follows_the_chip_and_the_shape() {
    let s = spec(&[]).unwrap();
    assert_eq!(s.select_recipe(&a100()), Recipe::Fa2);
    assert_eq!(s.select_recipe(&h100()), Recipe::Fa3);
    let d = spec(&[("seqlen", "1"), ("seqlen_kv", "8192")]).unwrap();
    assert_eq!(d.select_recipe(&h100()), Recipe::Decode);
    let prefill_chunk = spec(&[("seqlen", "16"), ("seqlen_kv", "64")]).unwrap();
    assert_eq!(prefill_chunk.select_recipe(&a100()), Recipe::Fa2);
    let m = spec(&[
        ("seqlen", "1"),
        ("seqlen_kv", "8192"),
        ("headdim", "576"),
        ("headdim_v", "512"),
        ("heads", "128"),
        ("kv_heads", "1"),
    ])
    .unwrap();
    assert_eq!(m.select_recipe(&h100()), Recipe::MlaDecode);
    let given = spec(&[("recipe", "standard")]).unwrap();
    assert_eq!(given.select_recipe(&h100()), Recipe::Standard);
}

#[test]
fn bad_problems_name_the_field() {
    let e = spec(&[("heads", "12"), ("kv_heads", "5")]).unwrap_err();
    assert!(e.contains("kv_heads = 5") && e.contains("heads = 12"), "{e}");
    let e = spec(&[("batch", "3"), ("varlen", "10,20")]).unwrap_err();
    assert!(e.contains("varlen has 2 entries") && e.contains("batch = 3"), "{e}");
    let e = spec(&[("batch", "2"), ("varlen", "10,4096")]).unwrap_err();
    assert!(e.contains("varlen entry 1 = 4096"), "{e}");
    let e = spec(&[("varlen", "10,x")]).unwrap_err();
    assert!(e.contains("`varlen`") && e.contains("comma-separated"), "{e}");
    let e = spec(&[("headdim", "100")]).unwrap_err();
    assert!(e.contains("headdim = 100"), "{e}");
    let e = spec(&[("recipe", "fa9")]).unwrap_err();
    assert!(e.contains("`recipe`") && e.contains("mla-decode"), "{e}");
    let e = spec(&[("seqlen", "0")]).unwrap_err();
    assert!(e.contains("`seqlen`") && e.contains("out of range"), "{e}");
}

#[test]
fn the_registry_lists_every_field() {
    let g = registry::find("attention").unwrap();
    let help = g.help();
    for p in PROBLEM {
        assert!(help.contains(p.name), "{} missing from:\n{help}", p.name);
    }
    assert!(help.contains("varlen") && help.contains("default none"), "{help}");
}

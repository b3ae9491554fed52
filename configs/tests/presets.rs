//! The built-in presets and `configs/arch/next.toml`: they load, validate, carry the datasheet
//! numbers, survive `to_toml` round trips, and compare with `diff`.

use gpusim_configs::{
    Arch, Bytes, BytesPerSec, Cycles, Hertz, diff, load, load_file, load_preset, load_str, presets, to_toml, validate,
};
use gpusim_isa::UnitClass;

fn next_toml() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("arch/next.toml")
}

fn rate(a: &Arch, key: &str) -> Option<f64> {
    a.tensor.flops_per_clk_per_sm.get(key).copied()
}

#[test]
fn every_preset_loads_and_validates() {
    let list = presets();
    let names: Vec<&str> = list.iter().map(|(n, _)| *n).collect();
    for want in
        ["a100-sxm4-80gb", "a100-pcie-40gb", "h100-sxm5-80gb", "h100-pcie", "h800-sxm5", "h800-pcie", "h200-sxm"]
    {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    for (name, description) in list {
        let a = load_preset(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        validate(&a).unwrap();
        assert_eq!(a.name, *name);
        assert_eq!(a.description, *description);
        assert!(description.len() > 20, "{name} has a description");
        assert_eq!(load(name).unwrap(), a, "load() takes preset names too");
    }
}

#[test]
fn presets_carry_the_datasheet_numbers() {
    let h = load_preset("h100-sxm5-80gb").unwrap();
    assert_eq!((h.compute_capability, h.sm.count, h.sm.gpcs), (90, 132, 8));
    assert_eq!(h.clocks.sm, Hertz(1_980_000_000));
    assert_eq!(h.l2.size, Bytes(50 << 20));
    assert_eq!(h.hbm.bandwidth, BytesPerSec(3.35e12));
    assert_eq!((h.hbm.stacks, h.hbm.size), (5, Bytes(80 << 30)));
    assert_eq!(h.sm.shared_mem_per_sm, Bytes(228 << 10));
    assert_eq!(h.l1.sram, Bytes(256 << 10));
    for (k, v) in
        [("bf16", 4096.0), ("fp16", 4096.0), ("fp8", 8192.0), ("tf32", 2048.0), ("int8", 8192.0), ("fp64", 256.0)]
    {
        assert_eq!(rate(&h, k), Some(v), "h100 {k}");
    }
    assert_eq!(h.pipes.get(UnitClass::Fp32).issue_interval, Cycles(1));
    assert_eq!(h.pipes.get(UnitClass::Fp64).issue_interval, Cycles(2));
    assert_eq!(h.pipes.get(UnitClass::Mufu).issue_interval, Cycles(8));
    assert_eq!(h.l1.hit_latency, Cycles(32));
    assert_eq!(h.l2.hit_latency, Cycles(264));

    let a = load_preset("a100-sxm4-80gb").unwrap();
    assert_eq!((a.compute_capability, a.sm.count, a.sm.max_cluster_size), (80, 108, 1));
    assert_eq!(a.clocks.sm, Hertz(1_410_000_000));
    assert_eq!((a.l2.size, a.l2.partitions), (Bytes(40 << 20), 2));
    assert_eq!(a.hbm.bandwidth, BytesPerSec(2039e9));
    assert_eq!(a.hbm.stacks, 5);
    assert_eq!(a.sm.shared_mem_per_sm, Bytes(164 << 10));
    assert_eq!(a.l1.sram, Bytes(192 << 10));
    assert_eq!((a.sm.max_warps, a.sm.max_ctas, a.sm.max_threads, a.sm.registers), (64, 32, 2048, 65536));
    assert_eq!((a.sm.register_alloc_unit, a.sm.shared_mem_alloc_unit, a.sm.sub_cores), (256, Bytes(128), 4));
    assert_eq!((a.l1.shared_banks, a.l1.shared_bank_width), (32, Bytes(4)));
    for (k, v) in [("bf16", 2048.0), ("fp16", 2048.0), ("tf32", 1024.0), ("int8", 4096.0), ("fp64", 128.0)] {
        assert_eq!(rate(&a, k), Some(v), "a100 {k}");
    }
    assert_eq!(rate(&a, "fp8"), None, "A100 has no fp8 tensor cores");
    assert_eq!(a.pipes.get(UnitClass::Fp32).issue_interval, Cycles(2));
    assert_eq!(a.pipes.get(UnitClass::Fp64).issue_interval, Cycles(4));
    assert_eq!((a.l1.hit_latency, a.l2.hit_latency, a.l2.far_extra_latency), (Cycles(33), Cycles(206), Cycles(207)));

    let ap = load_preset("a100-pcie-40gb").unwrap();
    assert_eq!((ap.sm.count, ap.hbm.size, ap.hbm.bandwidth), (108, Bytes(40 << 30), BytesPerSec(1555e9)));
    assert_eq!(ap.l2.hit_latency, Cycles(203));

    let hp = load_preset("h100-pcie").unwrap();
    assert_eq!((hp.sm.count, hp.clocks.sm), (114, Hertz(1_755_000_000)));
    assert_eq!(hp.l2.size, Bytes(50 << 20));

    let h8p = load_preset("h800-pcie").unwrap();
    assert_eq!((h8p.sm.count, h8p.clocks.sm), (114, Hertz(1_755_000_000)));

    let h2 = load_preset("h200-sxm").unwrap();
    assert_eq!((h2.hbm.bandwidth, h2.hbm.stacks), (BytesPerSec(4.8e12), 6));
    assert_eq!(h2.hbm.size, Bytes(141_000_000_000));
    assert_eq!((h2.l2.size, h2.l2.slices), (Bytes(60 << 20), 96));
    assert_eq!(h2.sm, h.sm, "H200 has the H100's SM");
    assert_eq!(h2.pipes, h.pipes);
    assert_eq!(h2.tensor, h.tensor);
}

#[test]
fn h800_is_an_h100_with_cut_fp64() {
    let h = load_preset("h100-sxm5-80gb").unwrap();
    let h8 = load_preset("h800-sxm5").unwrap();
    let keys: Vec<String> = diff(&h, &h8).into_iter().map(|d| d.key).collect();
    assert_eq!(keys, ["name", "description", "pipes.fp64.issue_interval", "tensor.flops_per_clk_per_sm.fp64"]);
}

#[test]
fn to_toml_round_trips_every_preset_and_next() {
    let mut chips: Vec<Arch> = presets().iter().map(|(n, _)| load_preset(n).unwrap()).collect();
    chips.push(load_file(&next_toml()).unwrap());
    for a in chips {
        let text = to_toml(&a);
        let back = load_str("round-trip", &text).unwrap_or_else(|e| panic!("{}: {e}\n{text}", a.name));
        assert_eq!(back, a, "{}", a.name);
        assert_eq!(to_toml(&back), text, "{}: to_toml is a fixed point", a.name);
    }
}

#[test]
fn diff_a100_h100_lists_sm_count() {
    let a = load_preset("a100-sxm4-80gb").unwrap();
    let h = load_preset("h100-sxm5-80gb").unwrap();
    let d = diff(&a, &h);
    let count = d.iter().find(|d| d.key == "sm.count").expect("sm.count differs");
    assert_eq!((count.a.as_deref(), count.b.as_deref()), (Some("108"), Some("132")));
    let l2 = d.iter().find(|d| d.key == "l2.size").unwrap();
    assert_eq!((l2.a.as_deref(), l2.b.as_deref()), (Some("40 MiB"), Some("50 MiB")));
    let fp8 = d.iter().find(|d| d.key == "tensor.flops_per_clk_per_sm.fp8").unwrap();
    assert_eq!((fp8.a.as_deref(), fp8.b.as_deref()), (None, Some("8192")));
    assert!(!d.iter().any(|d| d.key == "sm.max_warps"), "equal parameters are not listed");
    assert!(diff(&h, &h).is_empty());
}

#[test]
fn next_generation_what_if() {
    let h = load_preset("h100-sxm5-80gb").unwrap();
    let n = load(next_toml().to_str().unwrap()).unwrap();
    assert_eq!(n.name, "next");
    assert_eq!(n.sm.count, 160);
    assert_eq!(n.hbm.bandwidth, BytesPerSec(8e12));
    assert_eq!(n.hbm.stacks, 8);
    assert_eq!(n.l2.size, Bytes(128 << 20));
    assert_eq!(rate(&n, "fp8"), Some(2.0 * rate(&h, "fp8").unwrap()));
    assert!(rate(&n, "fp6").is_some() && rate(&n, "fp4").is_some());
    assert_eq!(rate(&n, "bf16"), rate(&h, "bf16"), "inherited");
    assert_eq!(n.l1, h.l1, "inherited");
}

#[test]
fn calibrated_presets_inherit_their_part_and_set_only_fitted_parameters() {
    for base in
        ["a100-sxm4-80gb", "a100-pcie-40gb", "h100-sxm5-80gb", "h100-pcie", "h800-sxm5", "h800-pcie", "h200-sxm"]
    {
        let name = format!("{base}-calibrated");
        let text = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("presets/{name}.toml")),
        )
        .unwrap();
        let table: toml::Table = toml::from_str(&text).unwrap();
        assert_eq!(table["inherits"].as_str(), Some(base), "{name}");
        // Every value other than the header keys is a fitted one and says so, with its error.
        for line in text.lines().filter(|l| !l.starts_with('#') && l.contains(" = ")) {
            let key = line.split(" = ").next().unwrap();
            if ["inherits", "name", "description"].contains(&key) {
                continue;
            }
            assert!(line.contains("# fitted") && line.contains("CV validation MAPE"), "{name}: `{line}`");
        }
        let cal = load_preset(&name).unwrap();
        let plain = load_preset(base).unwrap();
        // Datasheet figures are the part's own.
        assert_eq!(
            (cal.sm.count, cal.clocks.sm, cal.hbm.bandwidth),
            (plain.sm.count, plain.clocks.sm, plain.hbm.bandwidth)
        );
    }
}

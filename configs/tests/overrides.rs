//! `Arch::with_override`: one field changes, values parse as in a file, bad values fail naming
//! the key; `param()` gives the schema's kinds and ranges as numbers.

use gpusim_configs::{ConfigError, ParamKind, diff, load_preset, param};

fn h100() -> gpusim_configs::Arch {
    load_preset("h100-sxm5-80gb").unwrap()
}

fn changed(a: &gpusim_configs::Arch, b: &gpusim_configs::Arch) -> Vec<String> {
    diff(a, b).into_iter().map(|d| d.key).collect()
}

#[test]
fn an_override_changes_exactly_that_field() {
    let a = h100();
    for (key, text) in [
        ("sm.count", "100"),
        ("l2.hit_latency", "\"300 cycles\""),
        ("hbm.latency", "\"250 ns\""),
        ("pipes.fp32.latency", "7"),
        ("tensor.flops_per_clk_per_sm.bf16", "2048"),
    ] {
        let b = a.with_override_str(key, text).unwrap_or_else(|e| panic!("{key}: {e}"));
        assert_eq!(changed(&a, &b), [key], "{key}");
    }
    // An opcode without an override of its own gets one: the other field keeps its effective
    // value (the pipe class's), shown as newly set.
    let b = a.with_override_str("opcodes.DFMA.latency", "\"9 cycles\"").unwrap();
    assert_eq!(changed(&a, &b), ["opcodes.DFMA.latency", "opcodes.DFMA.issue_interval"]);
    assert_eq!(b.value("opcodes.DFMA.latency"), Some(9.0));
    assert_eq!(b.value("opcodes.DFMA.issue_interval"), a.value("opcodes.DFMA.issue_interval"));
    let b = a.with_override("l1.hit_latency", &toml::Value::Integer(40)).unwrap();
    assert_eq!(b.value("l1.hit_latency"), Some(40.0));
    assert_eq!(changed(&a, &b), ["l1.hit_latency"]);
    // The value the chip already has changes nothing.
    let same = a.with_override_str("sm.count", &a.sm.count.to_string()).unwrap();
    assert_eq!(same, a);
}

#[test]
fn units_parse_as_in_a_file() {
    let a = h100();
    let b = a.with_override_str("hbm.bandwidth", "\"3.35 TB/s\"").unwrap();
    assert_eq!(b.hbm.bandwidth.0, 3.35e12);
    // Bare text that is not TOML is taken as a string.
    let b = a.with_override_str("hbm.bandwidth", "2 TB/s").unwrap();
    assert_eq!(b.value("hbm.bandwidth"), Some(2e12));
    let b = a.with_override_str("l2.size", "\"50 MiB\"").unwrap();
    assert_eq!(b.l2.size.0, 50 << 20);
    let b = a.with_override_str("clocks.sm", "\"2 GHz\"").unwrap();
    assert_eq!(b.clocks.sm.0, 2_000_000_000);
    let b = a.with_override_str("hbm.latency", "\"219.5 ns\"").unwrap();
    assert_eq!(b.value("hbm.latency"), Some(219_500.0));
}

#[test]
fn several_text_overrides_are_checked_together() {
    // 128 MiB of L2 is whole sets only over more slices: alone, either change is an impossible
    // chip; together (as a sweep point sets them) they are one valid chip.
    let a = h100();
    assert!(a.with_override_str("l2.size", "128 MiB").is_err());
    let b = a.with_overrides_str(&[("l2.size", "128 MiB"), ("l2.slices", "128")]).unwrap();
    assert_eq!((b.value("l2.size"), b.value("l2.slices")), (Some(134_217_728.0), Some(128.0)));
    assert_eq!(changed(&a, &b), ["l2.size", "l2.slices"]);
    let e = a.with_overrides_str(&[("l2.size", "128 MiB"), ("sm.count", "0")]).unwrap_err();
    names(&e, "sm.count");
}

fn names(e: &ConfigError, key: &str) {
    let m = e.to_string();
    assert!(m.contains(key), "`{key}` not in: {m}");
}

#[test]
fn bad_overrides_fail_naming_the_key() {
    let a = h100();
    // Out of range.
    let e = a.with_override_str("sm.count", "0").unwrap_err();
    assert!(matches!(e, ConfigError::OutOfRange { .. }), "{e}");
    names(&e, "sm.count");
    // Wrong type.
    let e = a.with_override_str("l2.hit_latency", "\"fast\"").unwrap_err();
    assert!(matches!(e, ConfigError::BadValue { .. }), "{e}");
    names(&e, "l2.hit_latency");
    // Unknown key, with the nearest valid one.
    let e = a.with_override_str("l2.hit_latancy", "3").unwrap_err();
    names(&e, "l2.hit_latancy");
    assert!(e.to_string().contains("l2.hit_latency"), "{e}");
    // A cross-field rule: warps must divide over sub-cores.
    let e = a.with_override_str("sm.sub_cores", "3").unwrap_err();
    assert!(matches!(e, ConfigError::Invalid { .. }), "{e}");
    names(&e, "sm.sub_cores");
}

#[test]
fn param_ranges_match_the_schema() {
    let p = param("sm.count").unwrap();
    assert_eq!((p.kind, p.min, p.max), (ParamKind::Integer, Some(1.0), Some(4096.0)));
    let p = param("l2.hit_latency").unwrap();
    assert_eq!((p.kind, p.min, p.max), (ParamKind::Cycles, Some(1.0), Some(1e6)));
    assert_eq!(p.range.as_deref(), Some("1 cycle ..= 1000000 cycles"));
    let p = param("hbm.row_size").unwrap();
    assert_eq!((p.kind, p.min), (ParamKind::Bytes, Some(32.0)));
    let p = param("sm.max_registers_per_thread").unwrap();
    assert_eq!((p.min, p.max), (Some(1.0), Some(255.0)));
    let p = param("hbm.latency").unwrap();
    assert_eq!((p.kind, p.min, p.max), (ParamKind::Time, None, Some(1e8)));
    assert_eq!(param("clocks.sm").unwrap().kind, ParamKind::Hertz);
    assert_eq!(param("hbm.bandwidth").unwrap().kind, ParamKind::BytesPerSec);
    assert_eq!(param("l2.slice_bandwidth").unwrap().kind, ParamKind::BytesPerCycle);
    assert_eq!(param("opcodes.DFMA.latency").unwrap().kind, ParamKind::Cycles);
    let p = param("tensor.flops_per_clk_per_sm.bf16").unwrap();
    assert_eq!((p.kind, p.min), (ParamKind::Float, Some(0.0)));
    assert!(param("l2.slice").is_none());
}

//! Loading files: inheritance and deep merge, cycles, and every kind of error with its file,
//! line, column and dotted key.

use std::path::{Path, PathBuf};

use gpusim_configs::{ConfigError, Cycles, load, load_file, load_preset, load_str, to_toml};
use gpusim_isa::UnitClass;

/// A fresh directory for one test's files.
fn dir(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gpusim-configs-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn err(text: &str) -> ConfigError {
    load_str("t.toml", text).unwrap_err()
}

#[test]
fn inheritance_overrides_field_by_field_through_a_chain() {
    let d = dir("chain");
    write(
        &d,
        "base.toml",
        "inherits = \"a100-sxm4-80gb\"\n[sm]\ncount = 100\n[pipes.fp32]\nlatency = 5\n\
         [opcodes.MUFU]\nlatency = \"22 cycles\"\n[tensor.flops_per_clk_per_sm]\nb1 = 0\n",
    );
    std::fs::create_dir_all(d.join("sub")).unwrap();
    let leaf = write(
        &d,
        "sub/leaf.toml",
        "inherits = \"../base.toml\"\ndescription = \"leaf\"\n[pipes.fp32]\nissue_interval = 3\n[l2]\nhit_latency = 250\n",
    );
    let a100 = load_preset("a100-sxm4-80gb").unwrap();
    let a = load_file(&leaf).unwrap();
    assert_eq!(a.name, "leaf", "name defaults to the file stem, not inherited");
    assert_eq!(a.description, "leaf");
    assert_eq!(a.sm.count, 100, "from base.toml");
    assert_eq!(a.sm.max_warps, a100.sm.max_warps, "from the preset");
    let fp32 = a.pipes.get(UnitClass::Fp32);
    assert_eq!((fp32.latency, fp32.issue_interval), (Cycles(5), Cycles(3)), "deep merge within [pipes.fp32]");
    assert_eq!(a.l2.hit_latency, Cycles(250));
    assert_eq!(a.l2.far_extra_latency, a100.l2.far_extra_latency);
    let mufu = a.opcodes["MUFU"];
    assert_eq!(mufu.latency, Cycles(22));
    assert_eq!(mufu.issue_interval, a.pipes.get(UnitClass::Mufu).issue_interval, "falls back to the class pipe");
    assert!(!a.tensor.flops_per_clk_per_sm.contains_key("b1"), "0 drops an inherited tensor type");
    assert_eq!(a.tensor.flops_per_clk_per_sm["bf16"], 2048.0);
    let base = load_file(&d.join("base.toml")).unwrap();
    assert_eq!(base.description, "Based on a100-sxm4-80gb.");
    assert_eq!(load(leaf.to_str().unwrap()).unwrap(), a);
}

#[test]
fn inheritance_cycles_are_detected() {
    let d = dir("cycle");
    let a = write(&d, "a.toml", "inherits = \"b.toml\"\n");
    write(&d, "b.toml", "inherits = \"c.toml\"\n");
    write(&d, "c.toml", "inherits = \"a.toml\"\n");
    let e = load_file(&a).unwrap_err();
    let ConfigError::InheritanceCycle { chain } = &e else { panic!("{e}") };
    assert_eq!(chain.len(), 4, "{e}");
    assert!(chain[0].ends_with("a.toml") && chain[3].ends_with("a.toml"), "{e}");
    assert!(e.to_string().starts_with("inheritance cycle: "), "{e}");
    assert!(e.to_string().contains("b.toml → ") && e.to_string().contains("c.toml → "), "{e}");

    let selfish = write(&d, "self.toml", "inherits = \"self.toml\"\n");
    assert!(matches!(load_file(&selfish), Err(ConfigError::InheritanceCycle { .. })));
}

#[test]
fn unknown_key_names_file_line_column_and_suggests() {
    let d = dir("unknown");
    let text = "# a what-if\ninherits = \"h100-sxm5-80gb\"\n\n[sm]\ncount = 160\n\n\n\n\n\n[l2]\nslice = 96\n";
    let p = write(&d, "next.toml", text);
    let e = load_file(&p).unwrap_err();
    assert_eq!(e.to_string(), format!("unknown key `l2.slice` in {}:12:1; did you mean `l2.slices`?", p.display()));
    assert_eq!(e.key(), Some("l2.slice"));
    assert_eq!(e.loc().map(|l| (l.line, l.col)), Some((12, 1)));

    let e = err("[pipes.fp33]\nlatency = 4\n");
    assert!(e.to_string().contains("did you mean `pipes.fp32`?"), "{e}");
    let e = err("[opcodes.DFAM]\nlatency = 4\n");
    assert!(e.to_string().contains("did you mean `opcodes.DFMA`?"), "{e}");
    let e = err("[clocks]\nsm = \"1 GHz\"\n  mem = \"1 GHz\"\n");
    assert_eq!(e.to_string(), "unknown key `clocks.mem` in t.toml:3:3; did you mean `clocks.memory`?");
}

#[test]
fn bad_units_negative_sizes_and_wrong_types() {
    let e = err("inherits = \"h100-sxm5-80gb\"\n[l2]\nsize = \"50 furlongs\"\n");
    let s = e.to_string();
    assert!(s.starts_with("`l2.size`: expected a size such as \"50 MiB\""), "{s}");
    assert!(s.contains("t.toml:3:8") && s.contains("unknown size unit `furlongs`"), "{s}");

    let e = err("inherits = \"h100-sxm5-80gb\"\n[l2]\nsize = \"-4 MiB\"\n");
    assert!(e.to_string().contains("negative") && e.key() == Some("l2.size"), "{e}");
    let e = err("inherits = \"h100-sxm5-80gb\"\n[hbm]\nsize = -4\n");
    assert!(e.to_string().contains("negative") && e.key() == Some("hbm.size"), "{e}");

    let e = err("[sm]\ncount = \"many\"\n");
    assert_eq!(
        e.to_string(),
        "`sm.count`: expected a positive integer, found `\"many\"` in t.toml:2:9 (invalid type: string \"many\", expected u32)"
    );
    let e = err("[sm]\ncount = -3\n");
    assert!(e.to_string().starts_with("`sm.count`: expected a positive integer, found `-3`"), "{e}");
    let e = err("[clocks]\nsm = 1980\n");
    assert!(e.to_string().contains("`clocks.sm`") && e.to_string().contains("needs a unit"), "{e}");
    let e = err("l2 = 5\n");
    assert_eq!(e.key(), Some("l2"), "{e}");
    let e = err("[sm]\nshared_mem_carveouts = \"8 KiB\"\n");
    assert!(e.to_string().contains("an array of sizes"), "{e}");
}

#[test]
fn bare_numbers_where_the_unit_is_obvious() {
    let a = load_str(
        "t",
        "inherits = \"h100-sxm5-80gb\"\ncompute_capability = 90\n[l2]\nhit_latency = 270\nline = 128\n\
         slice_bandwidth = 64.5\n",
    )
    .unwrap();
    assert_eq!((a.l2.hit_latency.0, a.l2.line.0, a.l2.slice_bandwidth.0), (270, 128, 64.5));
    assert_eq!(a.compute_capability, 90);
}

#[test]
fn out_of_range_values() {
    let e = err("inherits = \"h100-sxm5-80gb\"\n[sm]\ncount = 0\n");
    assert_eq!(e.to_string(), "`sm.count` = 0 in t.toml:3:9 is out of range: must be 1 ..= 4096");
    let e = err("inherits = \"h100-sxm5-80gb\"\n[pipes.fp32]\nissue_interval = 0\n");
    assert_eq!(e.key(), Some("pipes.fp32.issue_interval"), "{e}");
    let e = err("inherits = \"h100-sxm5-80gb\"\n[tensor.flops_per_clk_per_sm]\nbf16 = -1.0\n");
    assert_eq!(e.key(), Some("tensor.flops_per_clk_per_sm.bf16"), "{e}");
}

#[test]
fn missing_required_keys_are_named() {
    let full = to_toml(&load_preset("h100-sxm5-80gb").unwrap());
    assert!(load_str("full", &full).is_ok());
    let without = full.replace("slices = 80\n", "");
    let e = load_str("partial.toml", &without).unwrap_err();
    assert_eq!(e.to_string(), "missing required key `l2.slices`: set it in partial.toml");
    // Defaults fill what is not required.
    let without_default = full.replace("lsu_queue_depth = 8\n", "");
    assert_eq!(load_str("d", &without_default).unwrap().sm.lsu_queue_depth, 8);
    let e = err("name = \"x\"\n");
    assert_eq!(e.key(), Some("compute_capability"));
}

#[test]
fn unknown_presets_list_the_valid_ones() {
    let e = load_preset("h100").unwrap_err();
    let s = e.to_string();
    assert!(s.starts_with("unknown preset `h100`; did you mean `h100-pcie`?"), "{s}");
    assert!(s.contains("a100-sxm4-80gb") && s.contains("h200-sxm"), "{s}");
    assert!(matches!(load("h100-sxm"), Err(ConfigError::UnknownPreset { .. })));
    assert!(matches!(load("no/such/file.toml"), Err(ConfigError::Io { .. })));

    let e = err("inherits = \"h100-sxm\"\n");
    assert_eq!(e.key(), Some("inherits"));
    assert!(e.to_string().contains("did you mean `h100-sxm5-80gb`?") && e.to_string().contains("t.toml:1:12"), "{e}");
}

#[test]
fn syntax_errors_have_a_location() {
    let e = err("[sm]\ncount = 1\n[l2\n");
    assert!(matches!(&e, ConfigError::Syntax { at, .. } if at.line == 3), "{e}");
    let e = err("[sm]\ncount = 1\ncount = 2\n");
    assert!(matches!(&e, ConfigError::Syntax { at, .. } if at.line == 3), "{e}");
}

#[test]
fn impossible_chips_name_the_fields_and_where_they_were_set() {
    let e = err("inherits = \"h100-sxm5-80gb\"\n[sm]\ngpcs = 200\n");
    let ConfigError::Invalid { keys, at, .. } = &e else { panic!("{e}") };
    assert_eq!(keys, &["sm.gpcs", "sm.count"]);
    assert_eq!(at.as_ref().map(|l| l.to_string()).as_deref(), Some("t.toml:3:8"));
    assert!(e.to_string().contains("sm.gpcs, sm.count"), "{e}");

    let e = err("inherits = \"h100-sxm5-80gb\"\n[scheduler]\npolicy = \"fifo\"\n");
    assert!(e.to_string().contains("unknown scheduling policy `fifo`"), "{e}");
    let e = err("inherits = \"a100-sxm4-80gb\"\n[sm]\nmax_warps = 62\n");
    assert_eq!(e.key(), Some("sm.max_warps"), "{e}");
}

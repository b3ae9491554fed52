//! `gpusim correlate` end to end, on a small synthetic reference file: three cheap latency
//! cases, one small GEMM, one attention case (naming no implementation: not simulated, listed with its reason).

mod common;

use std::path::{Path, PathBuf};

use common::*;

const DATA: &str = r#"
[[case]]
id = "t-lat-l1"
kind = "latency"
hardware = "H800 PCIe"
clock_mhz = 1755
level = "L1"
metric = "cycles"
value = 32.1
trust = "high"
how_read = "synthetic"
source = "test"
locator = "test"

[[case]]
id = "t-lat-dsm-local"
kind = "latency"
hardware = "H800 PCIe"
level = "shared (via cluster addressing, local)"
metric = "cycles"
value = 33.0
trust = "medium"
how_read = "synthetic"
source = "test"
locator = "test"

[[case]]
id = "t-lat-dpx"
kind = "latency"
hardware = "H800"
level = "instruction (DPX viaddmax)"
metric = "cycles"
value = 4.0
trust = "low"
how_read = "synthetic"
source = "test"
locator = "test"

[[case]]
id = "t-gemm-1024"
kind = "gemm"
hardware = "H100 SXM"
dtype = "bf16 in, fp32 accumulate"
m = 1024
n = 1024
k = 1024
metric = "tflops"
value = 300.0
trust = "medium"
how_read = "synthetic"
source = "test"
locator = "test"

[[case]]
id = "t-attn"
kind = "attention"
hardware = "H100 80GB SXM5"
dtype = "bf16"
batch = 2
heads = 16
seqlen = 1024
headdim = 128
metric = "tflops"
value = 400.0
trust = "low"
how_read = "synthetic"
source = "test"
locator = "test"
"#;

/// A fresh directory under the system temp dir holding the synthetic data file.
fn data_dir(name: &str) -> PathBuf {
    let d = workdir(&format!("correlate-{name}"));
    std::fs::write(d.join("cases.toml"), DATA).unwrap();
    d
}

/// Runs correlate on the synthetic file; returns (stdout, JSON, csv, md).
fn run(dir: &Path, tag: &str, extra: &[&str]) -> (String, serde_json::Value, String, String) {
    let data = dir.join("cases.toml");
    let json = dir.join(format!("{tag}.json"));
    let report = dir.join(tag);
    let mut args = vec!["correlate", "--arch", "auto", "--data", s(&data), "--kind", "all"];
    args.extend(["--json", s(&json), "--report", s(&report)]);
    args.extend(extra);
    let o = gpusim(&args);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{args:?}\nstdout: {out}\nstderr: {err}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let csv = std::fs::read_to_string(report.join("correlation.csv")).unwrap();
    let md = std::fs::read_to_string(report.join("correlation.md")).unwrap();
    // The same results as one page of the document model: every case in its table, and the
    // scatter plot's SVG inline where there is one.
    let html = std::fs::read_to_string(report.join("correlation.html")).unwrap();
    assert!(html.contains("<table class=\"sortable\">"));
    for c in v["cases"].as_array().unwrap() {
        assert!(html.contains(&format!("<td>{}</td>", c["id"].as_str().unwrap())), "case {} not in the page", c["id"]);
    }
    assert_eq!(html.contains("<figure><svg"), report.join("scatter.svg").exists());
    (out, v, csv, md)
}

fn case<'a>(v: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    v["cases"].as_array().unwrap().iter().find(|c| c["id"] == id).unwrap_or_else(|| panic!("no case {id}"))
}

/// The JSON without the fields that measure wall time or name the thread count.
fn without_timing(mut v: serde_json::Value) -> serde_json::Value {
    let o = v.as_object_mut().unwrap();
    o.remove("wall_s");
    o.remove("threads");
    for c in v["cases"].as_array_mut().unwrap() {
        c.as_object_mut().unwrap().remove("wall_s");
    }
    v
}

#[test]
fn correlate_prints_the_table_and_writes_json_csv_and_markdown() {
    let dir = data_dir("table");
    let (out, v, csv, md) = run(&dir, "r", &["--threads", "2"]);

    // Terminal table: every simulated case with preset, values, error and trust; statistics.
    for id in ["t-lat-l1", "t-lat-dsm-local", "t-lat-dpx", "t-gemm-1024"] {
        let line = out.lines().find(|l| l.starts_with(id)).unwrap_or_else(|| panic!("{id} not in\n{out}"));
        assert!(line.contains('%'), "{line}");
    }
    assert!(out.contains("h100-sxm5-80gb") && out.contains("h800-pcie"), "{out}");
    assert!(out.contains("MAPE") && out.contains("Spearman") && out.contains("worst cases"), "{out}");
    assert!(out.contains("t-attn") && out.contains("names no impl"), "attention is listed with its reason:\n{out}");

    // JSON: provenance, per-case fields, statistics.
    let p = &v["provenance"];
    assert_eq!(p["gpusim_version"], env!("CARGO_PKG_VERSION"));
    assert!(p["git_hash"].as_str().is_some_and(|h| !h.is_empty()));
    assert_eq!(p["arch"], "auto");
    for preset in ["h100-sxm5-80gb", "h800-pcie"] {
        assert!(p["config_hashes"][preset].as_str().is_some_and(|h| h.len() == 16), "{p}");
    }
    let l1 = case(&v, "t-lat-l1");
    assert_eq!(l1["status"], "simulated");
    assert_eq!(l1["preset"], "h800-pcie");
    assert_eq!((l1["clock_simulated_mhz"].as_f64(), l1["clock_measured_mhz"].as_f64()), (Some(1755.0), Some(1755.0)));
    assert_eq!(l1["trust"], "high");
    assert!(l1["error"].as_f64().unwrap().abs() < 0.1, "{l1}");
    for f in ["published", "simulated", "error", "abs_log_ratio", "config_hash", "recipe_hash", "workload"] {
        assert!(!l1[f].is_null(), "t-lat-l1 lacks {f}: {l1}");
    }
    let g = case(&v, "t-gemm-1024");
    assert_eq!(g["status"], "simulated", "{g}");
    assert_eq!(g["preset"], "h100-sxm5-80gb");
    assert_eq!(g["clock_measured_mhz"], serde_json::Value::Null);
    let tflops = g["simulated"].as_f64().unwrap();
    let time_us = g["sim_time_us"].as_f64().unwrap();
    assert!((tflops - 2.0 * 1024f64.powi(3) / (time_us * 1e-6) / 1e12).abs() < 1e-6 * tflops, "{g}");
    assert!(tflops > 10.0 && tflops < 1000.0, "{g}");
    for f in ["trace_hash", "recipe_hash", "config_hash", "clock_simulated_mhz"] {
        assert!(g[f].is_string() || g[f].is_number(), "t-gemm-1024 lacks {f}: {g}");
    }
    let a = case(&v, "t-attn");
    assert_eq!(a["status"], "skipped");
    assert!(a["reason"].as_str().unwrap().contains("no impl"), "{a}");
    let sum = &v["summary"];
    assert_eq!(sum["overall"]["n"], 4);
    for f in ["mape", "median_abs_error", "pearson_log", "spearman_log", "weighted_abs_log_error"] {
        assert!(sum["overall"][f].is_number(), "summary lacks {f}: {sum}");
    }
    assert_eq!(sum["by_group"]["latency"]["n"], 3);
    assert_eq!(sum["by_group"]["gemm"]["n"], 1);
    assert!(!sum["worst"].as_array().unwrap().is_empty());

    // CSV: a header and one line per case; Markdown: the table and the statistics.
    assert_eq!(csv.lines().count(), 6, "{csv}");
    assert!(csv.starts_with("id,kind,status,"), "{csv}");
    assert!(csv.lines().any(|l| l.starts_with("t-gemm-1024,gemm,simulated,")), "{csv}");
    assert!(md.contains("| case | kind | preset |") && md.contains("| t-gemm-1024 | gemm | h100-sxm5-80gb |"), "{md}");
    assert!(md.contains("### Statistics") && md.contains("### Not simulated") && md.contains("### Provenance"));
}

#[test]
fn results_do_not_depend_on_the_thread_count() {
    let dir = data_dir("threads");
    let (_, v1, csv1, md1) = run(&dir, "t1", &["--threads", "1"]);
    let (_, v2, csv2, md2) = run(&dir, "t2", &["--threads", "2"]);
    assert_eq!(csv1, csv2);
    assert_eq!(md1, md2);
    assert_eq!(without_timing(v1), without_timing(v2));
}

#[test]
fn an_explicit_preset_runs_only_its_cases() {
    let dir = data_dir("preset");
    let data = dir.join("cases.toml");
    let o =
        gpusim(&["correlate", "--arch", "h800-pcie", "--data", s(&data), "--kind", "latency,gemm", "--threads", "2"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    let gemm = out.lines().find(|l| l.starts_with("t-gemm-1024")).unwrap_or_else(|| panic!("{out}"));
    assert!(gemm.contains("skipped") && gemm.contains("h100-sxm5-80gb"), "{gemm}");
    assert!(!out.contains("t-attn"), "attention is not selected:\n{out}");
    assert!(out.lines().any(|l| l.starts_with("t-lat-l1") && l.contains("h800-pcie")), "{out}");
}

/// A config file named after a built-in preset stands in for it: that preset's cases simulate
/// the file's chip (an unchanged copy gives the preset's numbers, a changed parameter moves
/// them), and the provenance names the file.
#[test]
fn a_config_file_stands_in_for_the_preset_it_is_named_after() {
    let dir = data_dir("stand-in");
    let data = dir.join("cases.toml");
    let same = dir.join("same.toml");
    std::fs::write(&same, "inherits = \"h800-pcie\"\nname = \"h800-pcie\"\n").unwrap();
    let slower = dir.join("slower-l1.toml");
    std::fs::write(&slower, "inherits = \"h800-pcie\"\nname = \"h800-pcie\"\n[l1]\nhit_latency = \"60 cycles\"\n")
        .unwrap();
    let json = |arch: &Path, tag: &str| {
        let out = dir.join(format!("{tag}.json"));
        let o =
            gpusim(&["correlate", "--arch", s(arch), "--data", s(&data), "--kind", "latency", "--json", s(&out), "-q"]);
        let (stdout, err) = text(&o);
        assert!(o.status.success(), "{stdout}\n{err}");
        serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(&out).unwrap()).unwrap()
    };
    let preset = json(Path::new("h800-pcie"), "preset");
    let (a, b) = (json(&same, "same"), json(&slower, "slower"));
    let l1 = |v: &serde_json::Value| case(v, "t-lat-l1")["simulated"].as_f64().unwrap();
    assert_eq!(l1(&a), l1(&preset));
    assert!(l1(&b) > l1(&preset) + 20.0, "{} vs {}", l1(&b), l1(&preset));
    // The hash is of the resolved chip (the copy's differs from the preset's only in its
    // description, which a file that inherits sets afresh).
    assert_ne!(case(&b, "t-lat-l1")["config_hash"], case(&a, "t-lat-l1")["config_hash"]);
    assert_eq!(b["provenance"]["arch"], s(&slower));
    // The preset's choice of cases holds: the GEMM case of another part is skipped.
    assert_eq!(case(&b, "t-lat-dpx")["status"], case(&preset, "t-lat-dpx")["status"]);
}

#[test]
fn bad_input_exits_2_with_a_message() {
    let fails_with = |args: &[&str], needle: &str| {
        let o = gpusim(args);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}\nstdout: {out}\nstderr: {err}");
        assert!(err.contains(needle), "{args:?}: `{needle}` not in stderr:\n{err}");
        assert!(!err.contains("panicked"), "{err}");
    };
    fails_with(&["correlate", "--arch", "auto", "--data", "no/such/cases.toml"], "no/such/cases.toml");
    let dir = data_dir("bad");
    let data = dir.join("cases.toml");
    fails_with(&["correlate", "--arch", "h900-sxm", "--data", s(&data)], "unknown preset `h900-sxm`");
    let unnamed = dir.join("unnamed.toml");
    std::fs::write(&unnamed, "inherits = \"h800-pcie\"\nname = \"next\"\n").unwrap();
    fails_with(&["correlate", "--arch", s(&unnamed), "--data", s(&data)], "`next` is not a built-in preset");
    fails_with(&["correlate", "--arch", "auto", "--data", s(&data), "--kind", "flops"], "unknown kind `flops`");
    fails_with(&["correlate", "--arch", "auto", "--data", s(&data), "--threads", "0"], "--threads");
    fails_with(&["correlate", "--arch", "auto", "--data", s(&data), "--data", s(&data)], "duplicate id");
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "[[case]]\nid = \"x\"\nvalue = = 1\n").unwrap();
    fails_with(&["correlate", "--arch", "auto", "--data", s(&bad)], "bad.toml:3:");
}

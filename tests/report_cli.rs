//! `gpusim report DIR` on a study directory (the format of the sweep: manifest.json and
//! points/<id>/<workload>.json) built here from real `gpusim run --json` reports, and `gpusim
//! run --report`. The same builder writes tests/fixtures/study-small (the study that
//! scripts/test-html.sh renders in Chromium); a test checks the committed copy is current
//! (`UPDATE_FIXTURES=1` rewrites it).

mod common;

use std::path::Path;

use common::*;
use serde_json::{Value, json};

const WORKLOADS: [(&str, &str); 2] = [("copy", "examples/stream_copy.trace"), ("ffma", "examples/ffma_bound.trace")];
const SMS: [u32; 2] = [66, 132];
const BWS: [(&str, f64); 2] = [("2 TB/s", 2e12), ("3.35 TB/s", 3.35e12)];

/// FNV-1a, 64 bits, as hex: a stand-in for the sweep's hashes (only their presence matters).
fn hash(s: &str) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in s.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x100000001b3);
    }
    format!("{h:016x}")
}

/// Writes a 2 × 2 study (sm.count × hbm.bandwidth on H100, two workloads) into `dir` by running
/// each point; the run of point 3 and workload `copy` is left out (an unfinished study).
fn build_study(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir.join("points")).unwrap();
    let tmp = workdir("study-archs");
    let mut points = Vec::new();
    for (i, (sms, (bw, bw_n))) in SMS.iter().flat_map(|s| BWS.iter().map(move |b| (*s, *b))).enumerate() {
        let toml = format!(
            "inherits = \"h100-sxm5-80gb\"\nname = \"h100-p{i}\"\n[sm]\ncount = {sms}\n[hbm]\nbandwidth = \"{bw}\"\n"
        );
        let arch = tmp.join(format!("p{i}.toml"));
        std::fs::write(&arch, &toml).unwrap();
        let id = hash(&toml);
        std::fs::create_dir_all(dir.join("points").join(&id)).unwrap();
        for (w, trace) in WORKLOADS {
            if i == 3 && w == "copy" {
                continue;
            }
            let out = tmp.join("r.json");
            ok(&["--quiet", "run", "--arch", s(&arch), trace, "--json", s(&out)]);
            let file =
                json!({"point": i, "id": id, "workload": w, "key": hash(&format!("{toml}{w}")), "report": json(&out)});
            let text = serde_json::to_string_pretty(&file).unwrap() + "\n";
            std::fs::write(dir.join("points").join(&id).join(format!("{w}.json")), text).unwrap();
        }
        points.push(json!({"index": i, "id": id, "config_hash": hash(&toml),
            "values": {"sm.count": sms.to_string(), "hbm.bandwidth": format!("\"{bw}\"")},
            "numeric": {"sm.count": sms as f64, "hbm.bandwidth": bw_n}}));
    }
    let manifest = json!({"schema": 1, "study": "small", "base_arch": "h100-sxm5-80gb", "gpusim_version": "0.1.0",
        "git_hash": null,
        "params": [{"key": "sm.count", "unit": "SMs", "description": "Streaming multiprocessors."},
                   {"key": "hbm.bandwidth", "unit": "B/s", "description": "Peak bandwidth of all stacks together."}],
        "cost": {"expr": "sm.count * clocks.sm"},
        "workloads": WORKLOADS.iter().map(|(n, t)| json!({"name": n, "source": t,
            "hash": hash(&std::fs::read_to_string(root().join(t)).unwrap()), "per_point": false, "flops": null})).collect::<Vec<Value>>(),
        "points": points});
    std::fs::write(dir.join("manifest.json"), serde_json::to_string_pretty(&manifest).unwrap() + "\n").unwrap();
}

fn files(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push((p.strip_prefix(dir).unwrap().display().to_string(), std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn the_committed_study_fixture_is_what_the_builder_writes() {
    let fixture = root().join("tests/fixtures/study-small");
    if std::env::var_os("UPDATE_FIXTURES").is_some() {
        build_study(&fixture);
    }
    let fresh = workdir("study-fresh").join("s");
    build_study(&fresh);
    let (a, b) = (files(&fixture), files(&fresh));
    assert_eq!(a.len(), b.len(), "files differ; rerun with UPDATE_FIXTURES=1");
    for (x, y) in a.iter().zip(&b) {
        assert!(x == y, "{} differs from a fresh build; rerun with UPDATE_FIXTURES=1", x.0);
    }
}

#[test]
fn study_report_has_provenance_tables_plots_sensitivity_pareto_and_kernels() {
    let out = workdir("study-report").join("report.html");
    let study = root().join("tests/fixtures/study-small");
    let (_, err) = ok(&["report", s(&study), "-o", s(&out)]);
    assert!(err.contains("1 of 8 point runs missing"), "{err}");
    let page = std::fs::read_to_string(&out).unwrap();
    for needle in [
        "gpusim study: small",
        "1 of 8 point runs have no result file",
        "sm.count (SMs)",
        "Sensitivity",
        "Pareto front",
        "Kernels of copy",
        "Kernels of ffma",
        "Speed of light",
        "compute-bound: FMA (fp32) pipe",
        "missing",
    ] {
        assert!(page.contains(needle), "`{needle}` missing from the report");
    }
    // 2 parameters × (time, TFLOP/s) lines, a heatmap and a Pareto plot per workload, per
    // workload a warp-state stack, and a roofline for ffma (the copy executes no FLOP).
    assert_eq!(page.matches("<figure><svg").count(), 4 + 2 + 2 + 2 + 1, "figures");
    assert_eq!(page.matches("No roofline: no kernel shown executed a FLOP.").count(), 1);
    assert!(page.matches("<table class=\"sortable\">").count() >= 6);
    // The FMA-bound kernel's time moves with the SM count, not with HBM bandwidth: rank 1.
    let sens = &page[page.find("<h2>Sensitivity").unwrap()..];
    let ffma = sens.find("<td>ffma</td><td class=\"n\" data-v=\"1e0\">1</td><td>sm.count</td>");
    assert!(ffma.is_some(), "sm.count is not ffma's first parameter:\n{}", &sens[..sens.len().min(3000)]);
}

#[test]
fn report_input_errors_name_the_file_and_exit_2() {
    let d = workdir("study-bad");
    let out = d.join("x.html");
    fails_with(&["report", s(&d), "-o", s(&out)], &["no manifest.json"]);
    let study = d.join("s");
    build_dir_copy(&root().join("tests/fixtures/study-small"), &study);
    let m = study.join("manifest.json");
    let text = std::fs::read_to_string(&m).unwrap();
    std::fs::write(&m, text.replace("\"schema\": 1", "\"schema\": 9")).unwrap();
    fails_with(&["report", s(&study), "-o", s(&out)], &["manifest.json", "schema 9"]);
    std::fs::write(&m, &text).unwrap();
    let point = files(&study).into_iter().find(|f| f.0.ends_with("ffma.json")).unwrap().0;
    std::fs::write(study.join(&point), "{\"point\": 0,\n oops}").unwrap();
    fails_with(&["report", s(&study), "-o", s(&out)], &[&format!("{point}:2:")]);
    assert!(!out.exists());
}

fn build_dir_copy(from: &Path, to: &Path) {
    for (rel, text) in files(from) {
        let p = to.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

#[test]
fn run_report_is_one_page_with_the_sol_table_verdict_and_figures() {
    let out = workdir("run-report").join("run.html");
    ok(&["--quiet", "run", "--arch", "h100-sxm5-80gb", "examples/ffma_bound.trace", "--report", s(&out)]);
    let page = std::fs::read_to_string(&out).unwrap();
    for needle in ["gpusim run: examples/ffma_bound.trace", "Speed of light", "HBM %", "verdict", "<figure><svg"] {
        assert!(page.contains(needle), "`{needle}` missing");
    }
    assert_eq!(page.matches("<figure><svg").count(), 2, "warp states and roofline");
    let (text, _) = ok(&["run", "--arch", "h100-sxm5-80gb", "examples/ffma_bound.trace"]);
    let verdict =
        text.lines().find(|l| l.trim_start().starts_with("verdict")).unwrap().trim_start()["verdict".len()..].trim();
    assert!(page.contains(verdict), "the page's verdict is the text's: {verdict}");
    // A kernel without FLOPs has no roofline point, and the page says so.
    ok(&["--quiet", "run", "--arch", "h100-sxm5-80gb", "examples/stream_copy.trace", "--report", s(&out)]);
    let page = std::fs::read_to_string(&out).unwrap();
    assert!(page.contains("No roofline: no kernel shown executed a FLOP."));
    assert_eq!(page.matches("<figure><svg").count(), 1, "warp states only");
}

#[test]
fn help_documents_exit_codes_and_completions_are_printed() {
    let (help, _) = ok(&["--help"]);
    for code in ["0 ", "1 ", "2 ", "130"] {
        assert!(help.contains(&format!("  {code}")), "exit code {code} not in --help:\n{help}");
    }
    for shell in ["bash", "zsh", "fish"] {
        let (script, _) = ok(&["completions", shell]);
        assert!(script.contains("gpusim") && script.contains("report") && script.contains("timeline"), "{shell}");
    }
    fails_with(&["completions", "tcsh"], &["tcsh"]);
}

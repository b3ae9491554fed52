//! SIGINT and SIGTERM during long commands: the process stops at a safe point, writes what it
//! has marked as partial, and exits 130 / 143.
#![cfg(unix)]

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// Starts `gpusim args`, sends `signal` once `ready` says the run is under way (or after
/// `after`), and returns (exit code, stdout, stderr, seconds from the signal to the exit).
fn interrupt(args: &[&str], signal: &str, after: Duration) -> (Option<i32>, String, String, f64) {
    let child = Command::new(env!("CARGO_BIN_EXE_gpusim"))
        .args(args)
        .current_dir(root())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(after);
    let sent = Instant::now();
    let k = Command::new("kill").args([signal, &child.id().to_string()]).status().unwrap();
    assert!(k.success());
    let o = child.wait_with_output().unwrap();
    let (out, err) = text(&o);
    (o.status.code(), out, err, sent.elapsed().as_secs_f64())
}

/// A GEMM long enough to be mid-kernel after two seconds in any build.
fn long_gemm() -> std::path::PathBuf {
    let t = std::env::temp_dir().join(format!("gpusim-interrupt-gemm-{}.gtb", std::process::id()));
    ok(&[
        "trace",
        "gemm",
        "--m",
        "8192",
        "--n",
        "8192",
        "--k",
        "8192",
        "--arch",
        "h100-sxm5-80gb",
        "-o",
        t.to_str().unwrap(),
    ]);
    t
}

#[test]
fn sigint_during_run_writes_a_partial_report_and_exits_130() {
    let trace = long_gemm();
    let json = std::env::temp_dir().join(format!("gpusim-interrupt-run-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&json);
    let (code, out, err, took) = interrupt(
        &["run", "--arch", "h100-sxm5-80gb", "--json", json.to_str().unwrap(), trace.to_str().unwrap()],
        "-INT",
        Duration::from_secs(2),
    );
    assert_eq!(code, Some(130), "{out}\n{err}");
    assert!(took < 5.0, "stopping took {took:.1} s");
    assert!(err.contains("PARTIAL (interrupted)"), "{err}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["partial"]["reason"], "interrupted");
    assert_eq!(v["partial"]["cut_short"], serde_json::json!([0]));
    assert!(v["warp_instructions"].as_u64().unwrap() > 0, "the work done so far is counted");
    // Stall reasons still add up to the resident warp-cycles of the cut-short kernel.
    let k = &v["kernels"][0];
    let stalls: u64 = k["stalls"].as_object().unwrap().values().map(|x| x.as_u64().unwrap()).sum();
    assert_eq!(stalls, k["resident_warp_cycles"].as_u64().unwrap());
    let _ = std::fs::remove_file(&trace);
}

#[test]
fn sigterm_during_run_exits_143() {
    let trace = long_gemm();
    let (code, out, err, _) =
        interrupt(&["run", "--arch", "h100-sxm5-80gb", "-q", trace.to_str().unwrap()], "-TERM", Duration::from_secs(2));
    assert_eq!(code, Some(143), "{out}\n{err}");
    assert!(err.contains("interrupted at cycle"), "{err}");
    let _ = std::fs::remove_file(&trace);
}

#[test]
fn sigint_during_correlate_keeps_the_finished_cases_and_exits_130() {
    let json = std::env::temp_dir().join(format!("gpusim-interrupt-correlate-{}.json", std::process::id()));
    let data = root().join("../shared/reference/published.toml");
    let (code, out, err, took) = interrupt(
        &[
            "correlate",
            "--arch",
            "auto",
            "--data",
            data.to_str().unwrap(),
            "--kind",
            "gemm",
            "--threads",
            "1",
            "--json",
            json.to_str().unwrap(),
        ],
        "-INT",
        Duration::from_secs(3),
    );
    assert_eq!(code, Some(130), "{out}\n{err}");
    assert!(took < 10.0, "stopping took {took:.1} s: the running simulation must stop too");
    // The rows that finished stream first; the banner comes before the summary.
    let banner = out.find("PARTIAL: interrupted").unwrap_or_else(|| panic!("no PARTIAL banner:\n{out}"));
    assert!(banner < out.find("not simulated:").unwrap_or(usize::MAX), "{out}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["interrupted"], true);
    let unrun = v["cases"].as_array().unwrap().iter().filter(|c| c["reason"] == "not run: interrupted").count();
    assert!(unrun > 0, "{v}");
}

#[test]
fn sigint_during_calibrate_fits_nothing_and_says_so() {
    let dir = std::env::temp_dir().join(format!("gpusim-interrupt-calibrate-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out_toml = dir.join("fit.toml");
    let data = root().join("../shared/reference/published.toml");
    let (code, out, err, took) = interrupt(
        &[
            "calibrate",
            "--arch",
            "a100-sxm4-80gb",
            "--data",
            data.to_str().unwrap(),
            "--kind",
            "memory",
            "--threads",
            "1",
            "-o",
            out_toml.to_str().unwrap(),
            "--report",
            dir.to_str().unwrap(),
        ],
        "-INT",
        Duration::from_secs(3),
    );
    assert_eq!(code, Some(130), "{out}\n{err}");
    assert!(took < 10.0, "stopping took {took:.1} s");
    assert!(err.contains("nothing was fitted"), "{err}");
    assert!(!out_toml.exists(), "a fit cut short must not be written as a preset");
    let md = std::fs::read_to_string(dir.join("calibration.md")).unwrap();
    assert!(md.contains("PARTIAL"), "{md}");
}

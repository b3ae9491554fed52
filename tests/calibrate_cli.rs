//! `gpusim calibrate` end to end on a small synthetic data set: pointer-chase latencies on the
//! H800 PCIe whose L2 reads 300 cycles (the preset says 264), fitting `l2.hit_latency`. No
//! far-L2 case: its chase first fills the far partition (1.1 M warp instructions, 2 s of a
//! release build a simulation), which made this test 90% of a 107 s debug run for nothing the
//! near cases do not already test; the accuracy gate and `memory_cases` simulate it.

mod common;

use std::path::{Path, PathBuf};

use common::*;

const DATA: &str = r#"
[[case]]
id = "syn-l1"
kind = "latency"
hardware = "H800 PCIe"
clock_mhz = 1755
level = "L1"
metric = "cycles"
value = 32.1
trust = "high"
how_read = "synthetic"
source = "synthetic"
locator = "none"

[[case]]
id = "syn-l2"
kind = "latency"
hardware = "H800 PCIe"
clock_mhz = 1755
level = "L2"
metric = "cycles"
value = 300
trust = "high"
how_read = "synthetic"
source = "synthetic"
locator = "none"

[[case]]
id = "syn-l2-again"
kind = "latency"
hardware = "H800 PCIe"
clock_mhz = 1755
level = "L2"
metric = "cycles"
value = 300
trust = "medium"
how_read = "synthetic"
source = "synthetic"
locator = "none"

"#;

fn dir() -> PathBuf {
    let d = workdir("calibrate");
    std::fs::write(d.join("lat.toml"), DATA).unwrap();
    d
}

/// `gpusim calibrate` of `l2.hit_latency` on `d`'s cases, writing `out` and the report `rep`,
/// with `extra` arguments.
fn run_calibrate(d: &Path, out: &Path, rep: &Path, extra: &[&str]) -> std::process::Output {
    let data = d.join("lat.toml");
    let mut args = vec!["calibrate", "--arch", "h800-pcie", "--data", data.to_str().unwrap()];
    args.extend(["--kind", "latency", "--fit", "l2.hit_latency", "-o", out.to_str().unwrap()]);
    args.extend(["--report", rep.to_str().unwrap()]);
    args.extend(extra);
    gpusim(&args)
}

/// Calibrates `l2.hit_latency` on `threads` threads; returns stdout, the config and the report.
fn calibrate(d: &Path, threads: &str) -> (String, String, String) {
    let out = d.join(format!("out-{threads}.toml"));
    let rep = d.join(format!("report-{threads}"));
    let o = run_calibrate(d, &out, &rep, &["--threads", threads]);
    let stdout = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&o.stderr));
    // The same report as one page of the document model.
    let html = std::fs::read_to_string(rep.join("calibration.html")).unwrap();
    assert!(html.contains("<table") && html.contains("l2.hit_latency") && !html.contains("http"), "{html}");
    (stdout, std::fs::read_to_string(out).unwrap(), std::fs::read_to_string(rep.join("calibration.md")).unwrap())
}

#[test]
fn fits_l2_latency_with_cross_validation_independent_of_threads() {
    let d = dir();
    let (stdout, config, report) = calibrate(&d, "1");

    // The simulated L2 pointer chase reads `l2.hit_latency`, so 300 cycles is the target.
    let preset = gpusim_configs::load_preset("h800-pcie").unwrap();
    let cal = gpusim_configs::load_file(&d.join("out-1.toml")).unwrap();
    let fitted = cal.l2.hit_latency.0 as f64;
    assert!((fitted - 300.0).abs() / 300.0 < 0.03, "fitted {fitted}\n{stdout}");
    assert!(config.contains("inherits = \"h800-pcie\""), "{config}");
    assert!(config.contains("hit_latency = \"") && config.contains("# fitted (preset 264 cycles"), "{config}");
    // Everything not fitted comes from the preset.
    assert_eq!(
        (cal.sm.count, cal.clocks.sm, cal.l1.hit_latency),
        (preset.sm.count, preset.clocks.sm, preset.l1.hit_latency)
    );

    // Training and validation errors are reported separately, before and after.
    for needle in ["before (preset), all cases", "after (final fit), all cases", "CV training", "CV validation"] {
        assert!(report.contains(needle) && stdout.contains(needle), "{needle}:\n{report}");
    }
    let val_line = report.lines().find(|l| l.contains("CV validation")).unwrap();
    assert!(val_line.contains('%'), "{val_line}");
    assert!(report.contains("| l2.hit_latency | 264 cycles |"), "{report}");

    // The thread count does not change the result.
    let (_, config4, report4) = calibrate(&d, "4");
    assert_eq!(config, config4);
    assert_eq!(report, report4);
    let _ = std::fs::remove_dir_all(&d);
}

/// `--sample` reaches the fit's simulations and is recorded: these short chases are not long
/// enough to be sampled, so the fit is the full-detail one, and the config and the report say
/// that long kernels would have been.
#[test]
fn a_sampled_calibration_says_so() {
    let d = workdir("calibrate-sample");
    std::fs::write(d.join("lat.toml"), DATA).unwrap();
    let run = |extra: &[&str], name: &str| {
        let (out, rep) = (d.join(name), d.join(format!("{name}.report")));
        let mut args = vec!["--folds", "0", "--max-iter", "6", "-q"];
        args.extend(extra);
        let o = run_calibrate(&d, &out, &rep, &args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        (std::fs::read_to_string(&out).unwrap(), std::fs::read_to_string(rep.join("calibration.md")).unwrap())
    };
    let (full, _) = run(&[], "full.toml");
    let (sampled, report) = run(&["--sample"], "sampled.toml");
    assert!(sampled.contains("sampled --sample 2:4:1:1") && !full.contains("sampled"), "{sampled}");
    assert!(report.contains("Long kernels sampled (`--sample 2:4:1:1`"), "{report}");
    let value =
        |c: &str| c.lines().find(|l| l.starts_with("hit_latency")).map(|l| l.split('#').next().unwrap().to_string());
    assert_eq!(value(&full), value(&sampled));
    let _ = std::fs::remove_dir_all(&d);
}

/// `--resume DIR` keeps every finished simulation: a rerun simulates nothing and writes the same
/// fit; a run killed part-way (SIGKILL) resumes to the result of an uninterrupted one; a
/// directory of another build is refused.
#[test]
fn a_resumed_calibration_simulates_only_what_is_missing() {
    let d = workdir("calibrate-resume");
    std::fs::write(d.join("lat.toml"), DATA).unwrap();
    let store = d.join("sims");
    let args = |out: &Path, rep: &Path| -> Vec<String> {
        let data = d.join("lat.toml");
        [
            "calibrate",
            "--arch",
            "h800-pcie",
            "--data",
            s(&data),
            "--kind",
            "latency",
            "--fit",
            "l2.hit_latency",
            "--folds",
            "2",
            "--max-iter",
            "6",
            "--threads",
            "1",
            "--resume",
            s(&store),
            "-o",
            s(out),
            "--report",
            s(rep),
        ]
        .iter()
        .map(|a| a.to_string())
        .collect()
    };
    // Kept results; a killed run's temporary file (hidden) is not one.
    let kept = || {
        std::fs::read_dir(store.join("sims"))
            .map_or(0, |r| r.flatten().filter(|e| !e.file_name().to_string_lossy().starts_with('.')).count())
    };
    let all_files = || std::fs::read_dir(store.join("sims")).map_or(0, |r| r.count());
    let run = |name: &str| {
        let (out, rep) = (d.join(format!("{name}.toml")), d.join(name));
        let a = args(&out, &rep);
        let o = gpusim(&a.iter().map(String::as_str).collect::<Vec<_>>());
        let (stdout, err) = text(&o);
        assert!(o.status.success(), "{stdout}\n{err}");
        let line = stdout.lines().find(|l| l.contains(" simulation(s)")).unwrap_or_else(|| panic!("{stdout}"));
        let sims: usize = line.split(' ').next().unwrap().parse().unwrap();
        // What the store held is said, not hidden in the count.
        let kept = kept();
        assert_eq!(line.contains(&format!(", {} more kept by an earlier run", kept - sims)), kept > sims, "{line}");
        (std::fs::read_to_string(&out).unwrap(), std::fs::read_to_string(rep.join("calibration.md")).unwrap(), sims)
    };

    // Killed part-way: what finished is kept, whole.
    let (out, rep) = (d.join("killed.toml"), d.join("killed"));
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_gpusim"))
        .args(args(&out, &rep))
        .current_dir(root())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while kept() < 2 && t0.elapsed().as_secs() < 300 && child.try_wait().unwrap().is_none() {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    let before = kept();
    assert!(before >= 1, "nothing kept after {:?}", t0.elapsed());

    let (config, report, sims) = run("resumed");
    eprintln!("kept {before} before the kill, {sims} simulated on resuming");
    assert_eq!(kept(), before + sims);
    assert_eq!(all_files(), kept(), "the killed run's temporary files are cleared on resuming");
    let (config2, report2, sims2) = run("again");
    assert_eq!(sims2, 0, "a complete store leaves nothing to simulate");
    assert_eq!((&config, &report), (&config2, &report2));

    // The same fit as a calibration that kept nothing.
    let (out, rep) = (d.join("plain.toml"), d.join("plain"));
    let a: Vec<String> = args(&out, &rep).into_iter().filter(|a| *a != "--resume" && *a != s(&store)).collect();
    let o = gpusim(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", text(&o).1);
    assert_eq!(config, std::fs::read_to_string(&out).unwrap());
    assert_eq!(report, std::fs::read_to_string(rep.join("calibration.md")).unwrap());

    // Another build's results are refused.
    let build: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(store.join("build.json")).unwrap()).unwrap();
    assert_eq!(build["model_hash"].as_str().map(str::len), Some(16), "{build}");
    std::fs::write(
        store.join("build.json"),
        r#"{"gpusim_version": "0.1.0", "model_hash": "0123456789abcdef", "git_hash": "0123abc"}"#,
    )
    .unwrap();
    let (out, rep) = (d.join("other.toml"), d.join("other"));
    let a = args(&out, &rep);
    fails_with(&a.iter().map(String::as_str).collect::<Vec<_>>(), &["another build", "0123456789abcdef"]);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn datasheet_parameters_are_refused() {
    let d = workdir("calibrate-ds");
    let data = d.join("lat.toml");
    std::fs::write(&data, DATA).unwrap();
    let out = d.join("out.toml");
    for p in ["sm.count", "clocks.sm", "hbm.bandwidth", "l2.size", "tensor.flops_per_clk_per_sm.fp8"] {
        let o = gpusim(&[
            "calibrate",
            "--arch",
            "h800-pcie",
            "--data",
            data.to_str().unwrap(),
            "--fit",
            p,
            "-o",
            out.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(2), "{p}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("datasheet") && err.contains("--allow-datasheet"), "{p}: {err}");
        assert!(!out.exists());
    }
    // An unknown parameter is an input error too.
    let o = gpusim(&[
        "calibrate",
        "--arch",
        "h800-pcie",
        "--data",
        data.to_str().unwrap(),
        "--fit",
        "l2.hit_latancy",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&d);
}

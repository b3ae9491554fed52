//! `gpusim correlate` and `gpusim calibrate` on Nsight Compute CSV exports (`--data run.csv
//! --traces TRACE --hardware NAME`), end to end: the fixtures of validation/tests/fixtures/ncu
//! with the traces of examples/.

mod common;

use common::*;

const FFMA_CSV: &str = "validation/tests/fixtures/ncu/ffma_bound.csv";
const ACCELSIM_CSV: &str = "validation/tests/fixtures/ncu/accelsim_example.csv";

#[test]
fn an_ncu_export_with_its_trace_is_simulated() {
    let dir = workdir("ffma");
    let out_json = dir.join("out.json");
    let (out, err) = ok(&[
        "correlate",
        "--arch",
        "auto",
        "--data",
        FFMA_CSV,
        "--traces",
        "examples/ffma_bound.trace",
        "--hardware",
        "NVIDIA H100 80GB HBM3",
        "--kind",
        "kernel",
        "--json",
        s(&out_json),
        "--report",
        s(&dir.join("report")),
    ]);
    assert!(!err.contains("warning"), "{err}");
    assert!(out.lines().any(|l| l.starts_with("ffma_bound-0") && l.contains("h100-sxm5-80gb")), "{out}");
    let v = json(&out_json);
    let cases = v["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 1);
    let c = &cases[0];
    assert_eq!(
        (c["id"].as_str(), c["kind"].as_str(), c["status"].as_str()),
        (Some("ffma_bound-0"), Some("kernel"), Some("simulated"))
    );
    assert_eq!((c["metric"].as_str(), c["published"].as_f64()), (Some("us"), Some(18.94)));
    let error = c["error"].as_f64().unwrap();
    assert!(error.is_finite() && error.abs() < 1.0, "{c}");
    assert_eq!((c["clock_simulated_mhz"].as_f64(), c["clock_measured_mhz"].as_f64()), (Some(1755.0), Some(1755.0)));
    assert_eq!(c["location"].as_str(), Some("validation/tests/fixtures/ncu/ffma_bound.csv:3"));
    assert!(c["workload"].as_str().unwrap().contains("ffma_bound.trace"), "{c}");
    assert_eq!(c["trace_hash"].as_str().map(str::len), Some(16));
    assert_eq!(v["provenance"]["data_files"][0].as_str(), Some(FFMA_CSV));
    assert_eq!(v["summary"]["by_group"]["kernel"]["n"].as_u64(), Some(1), "{}", v["summary"]);
    let csv = std::fs::read_to_string(dir.join("report/correlation.csv")).unwrap();
    assert!(csv.lines().nth(1).unwrap().starts_with("ffma_bound-0,kernel,simulated,"), "{csv}");

    // The default kinds include kernel cases.
    let (out, _) = ok(&["correlate", "--arch", "auto", "--data", FFMA_CSV, "--traces", "examples/ffma_bound.trace"]);
    assert!(out.contains("1 cases: 1 simulated"), "{out}");
}

#[test]
fn launches_without_a_trace_kernel_are_skipped_with_the_reason() {
    let dir = workdir("unmatched");
    let out_json = dir.join("out.json");
    let args = [
        "correlate",
        "--arch",
        "auto",
        "--data",
        ACCELSIM_CSV,
        "--traces",
        "examples/accelsim",
        "--hardware",
        "NVIDIA A100-SXM4-80GB",
        "--kind",
        "kernel",
        "--json",
        s(&out_json),
    ];
    let (out, err) = ok(&args);
    // A warning line on stderr names the launch ...
    let warning: Vec<&str> = err.lines().filter(|l| l.starts_with("warning:")).collect();
    assert_eq!(warning.len(), 1, "{err}");
    assert!(warning[0].contains("accelsim_example.csv") && warning[0].contains("accelsim_example-1"), "{err}");
    // ... and the correlation lists it as skipped, with the reason.
    assert!(out.contains("not simulated:") && out.contains("3 cases: 2 simulated, 1 skipped, 0 failed"), "{out}");
    let v = json(&out_json);
    let c = v["cases"].as_array().unwrap().iter().find(|c| c["id"] == "accelsim_example-1").unwrap();
    assert_eq!(c["status"].as_str(), Some("skipped"));
    let reason = c["reason"].as_str().unwrap();
    assert!(reason.contains("no kernel of the trace") && reason.contains("fill_kernel"), "{reason}");
    for id in ["accelsim_example-0", "accelsim_example-2"] {
        let c = v["cases"].as_array().unwrap().iter().find(|c| c["id"] == id).unwrap();
        assert_eq!((c["status"].as_str(), c["preset"].as_str()), (Some("simulated"), Some("a100-sxm4-80gb")), "{c}");
    }
    // --quiet prints nothing.
    let mut quiet = args.to_vec();
    quiet.push("--quiet");
    let (out, err) = ok(&quiet);
    assert!(out.is_empty() && err.is_empty(), "{out}\n{err}");

    // Without --traces and --hardware the details page's launches are skipped, saying why.
    let (out, _) = ok(&["correlate", "--arch", "auto", "--data", ACCELSIM_CSV, "--kind", "kernel"]);
    assert!(out.contains("3 cases: 0 simulated, 3 skipped") && out.contains("no `trace`"), "{out}");
}

#[test]
fn calibrate_reads_ncu_exports() {
    let dir = workdir("calibrate");
    let cfg = dir.join("cal.toml");
    let (out, err) = ok(&[
        "calibrate",
        "--arch",
        "a100-sxm4-80gb",
        "--data",
        ACCELSIM_CSV,
        "--traces",
        "examples/accelsim",
        "--hardware",
        "NVIDIA A100-SXM4-80GB",
        "--fit",
        "l2.hit_latency",
        "--max-iter",
        "2",
        "--folds",
        "0",
        "-o",
        s(&cfg),
    ]);
    assert!(out.contains("on 2 case(s)") && out.contains("skipped accelsim_example-1"), "{out}");
    assert!(err.contains("accelsim_example-1"), "{err}");
    assert!(std::fs::read_to_string(&cfg).unwrap().contains("a100-sxm4-80gb"));
}

#[test]
fn bad_ncu_input_exits_2_naming_file_and_line() {
    let fails_with = |args: &[&str], needle: &str| {
        let o = gpusim(args);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}\nstdout: {out}\nstderr: {err}");
        assert!(err.contains(needle), "{args:?}: `{needle}` not in stderr:\n{err}");
        assert!(!err.contains("panicked"), "{err}");
    };
    let dir = workdir("bad");
    let bad = dir.join("bad.csv");
    std::fs::write(
        &bad,
        "\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\"\n\"0\",\"k\",\"1.5\"\n\"1\",\"k\",\"fast\"\n",
    )
    .unwrap();
    let at_line = format!("{}:3:", bad.display());
    fails_with(&["correlate", "--arch", "auto", "--data", s(&bad)], &at_line);
    fails_with(&["calibrate", "--arch", "h100-sxm5-80gb", "--data", s(&bad), "-o", s(&dir.join("c.toml"))], &at_line);
    // Too many fields.
    let wide = dir.join("wide.csv");
    std::fs::write(&wide, "\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\"\n\"0\",\"k\",\"1.5\",\"x\",\"y\"\n")
        .unwrap();
    fails_with(&["correlate", "--arch", "auto", "--data", s(&wide)], &format!("{}:2:", wide.display()));
    fails_with(&["correlate", "--arch", "auto", "--data", "no/such/run.csv"], "no/such/run.csv");
    fails_with(&["correlate", "--arch", "auto", "--data", FFMA_CSV, "--traces", "no/such/trace"], "no/such/trace");
    fails_with(&["correlate", "--arch", "auto", "--data", "run.ncu-rep"], "--csv");
    // The same export twice: duplicate ids.
    fails_with(&["correlate", "--arch", "auto", "--data", FFMA_CSV, "--data", FFMA_CSV], "duplicate id `ffma_bound-0`");
}

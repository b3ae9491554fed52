//! `gpusim run --timeline`: Chrome trace-event JSON (Perfetto, chrome://tracing). Checks the
//! format (every event's fields present and typed), that every CTA of the GEMM example appears
//! exactly once, the kernel and counter tracks, GPC tracks, and the CTA cap's aggregation.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::*;
use serde_json::Value;

fn gemm_trace(dir: &Path) -> String {
    let t = dir.join("gemm.trace");
    ok(&["trace", "gemm", "--m", "1024", "--n", "1024", "--k", "1024", "--arch", "h100-sxm5-80gb", "-o", s(&t)]);
    s(&t).to_string()
}

fn timeline(args: &[&str], out: &Path) -> Value {
    let mut a = vec!["--quiet", "run", "--arch", "h100-sxm5-80gb", "--timeline", s(out)];
    a.extend(args);
    ok(&a);
    json(out)
}

/// Every event has a string `ph` and `name`, integer `pid` and `tid`, a number `ts`; complete
/// events a number `dur` ≥ 0, counters numeric args. Returns the events.
fn check_format(t: &Value) -> &Vec<Value> {
    let events = t["traceEvents"].as_array().expect("traceEvents is an array");
    assert!(!events.is_empty());
    for e in events {
        assert!(e["ph"].is_string() && e["name"].is_string(), "{e}");
        assert!(e["pid"].is_u64() && e["tid"].is_u64(), "{e}");
        assert!(e["ts"].is_f64() || e["ts"].is_u64(), "{e}");
        assert!(e["ts"].as_f64().unwrap() >= 0.0, "{e}");
        match e["ph"].as_str().unwrap() {
            "X" => assert!(e["dur"].as_f64().is_some_and(|d| d >= 0.0), "{e}"),
            "C" => assert!(e["args"].as_object().unwrap().values().all(Value::is_number), "{e}"),
            "M" => assert!(e["args"]["name"].is_string() || e["args"]["sort_index"].is_u64(), "{e}"),
            other => panic!("unexpected phase {other}: {e}"),
        }
    }
    events
}

#[test]
fn the_gemm_timeline_is_valid_trace_event_json_with_every_cta_once() {
    let d = workdir("timeline-gemm");
    let trace = gemm_trace(&d);
    let out = d.join("t.json");
    let t = timeline(&[&trace, "--json", s(&d.join("r.json"))], &out);
    let events = check_format(&t);
    let report = json(&d.join("r.json"));
    let k = &report["kernels"][0];
    let mut seen: BTreeMap<(u64, Vec<u64>), u32> = BTreeMap::new();
    for e in events.iter().filter(|e| e["cat"] == "cta") {
        let cta: Vec<u64> = e["args"]["cta"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
        *seen.entry((e["args"]["kernel"].as_u64().unwrap(), cta)).or_default() += 1;
        assert!(e["name"].as_str().unwrap().starts_with(k["name"].as_str().unwrap()), "labelled by kernel: {e}");
    }
    let grid: Vec<u64> = k["grid"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
    assert_eq!(seen.len() as u64, grid.iter().product::<u64>(), "every CTA of the grid");
    assert!(seen.values().all(|&n| n == 1), "each CTA once");
    assert_eq!(t["otherData"]["aggregated"], false);
    assert_eq!(t["otherData"]["ctas"].as_u64(), k["ctas"].as_u64());
    // CTAs on one track never overlap (Perfetto needs nested spans on a thread).
    let mut by_track: BTreeMap<u64, Vec<(f64, f64)>> = BTreeMap::new();
    for e in events.iter().filter(|e| e["cat"] == "cta") {
        let ts = e["ts"].as_f64().unwrap();
        by_track.entry(e["tid"].as_u64().unwrap()).or_default().push((ts, ts + e["dur"].as_f64().unwrap()));
    }
    for spans in by_track.values_mut() {
        spans.sort_by(|a, b| a.0.total_cmp(&b.0));
        assert!(spans.windows(2).all(|w| w[1].0 >= w[0].1 - 1e-9), "{spans:?}");
    }
    // One kernel span on its stream, lasting the report's kernel time at the configured clock.
    let kernels: Vec<&Value> = events.iter().filter(|e| e["cat"] == "kernel").collect();
    assert_eq!(kernels.len(), 1);
    let mhz = report["sm_clock_mhz"].as_f64().unwrap();
    let cycles = k["cycles"].as_f64().unwrap();
    assert!((kernels[0]["dur"].as_f64().unwrap() - cycles / mhz).abs() < 1e-6);
    // Counters: DRAM bandwidth and L2 hit rate, samples in time order, the hit rate a percentage.
    let dram: Vec<&Value> = events.iter().filter(|e| e["name"] == "DRAM bandwidth").collect();
    let l2: Vec<&Value> = events.iter().filter(|e| e["name"] == "L2 hit rate").collect();
    assert!(!dram.is_empty() && dram.len() == l2.len());
    assert!(l2.iter().all(|e| (0.0..=100.0).contains(&e["args"]["%"].as_f64().unwrap())));
    assert!(dram.iter().any(|e| e["args"]["GB/s"].as_f64().unwrap() > 0.0), "the GEMM reads DRAM");
}

#[test]
fn past_the_cap_ctas_are_aggregated_and_the_file_says_so() {
    let d = workdir("timeline-cap");
    let trace = gemm_trace(&d);
    let out = d.join("t.json");
    let t = timeline(&[&trace, "--timeline-max-ctas", "10", "--timeline-by", "gpc"], &out);
    let events = check_format(&t);
    let spans = events.iter().filter(|e| e["cat"] == "cta").count() as u64;
    let agg: u64 =
        events.iter().filter(|e| e["cat"] == "cta_aggregate").map(|e| e["args"]["ctas"].as_u64().unwrap()).sum();
    let meta = &t["otherData"];
    assert!(spans <= 10, "{spans} spans over the cap");
    assert_eq!(meta["aggregated"], true);
    assert_eq!(meta["tracks"], "GPC");
    assert_eq!(
        spans + agg + meta["ctas_counted_only"].as_u64().unwrap(),
        meta["ctas"].as_u64().unwrap(),
        "every CTA accounted once"
    );
    assert_eq!(agg, meta["ctas_aggregated"].as_u64().unwrap());
    let names: Vec<&str> =
        events.iter().filter(|e| e["name"] == "thread_name").map(|e| e["args"]["name"].as_str().unwrap()).collect();
    assert!(names.iter().any(|n| n.starts_with("GPC ") && n.ends_with("aggregated")), "{names:?}");
    fails_with(
        &["run", "--arch", "h100-sxm5-80gb", &trace, "--timeline", s(&out), "--timeline-max-ctas", "0"],
        &["--timeline-max-ctas"],
    );
}

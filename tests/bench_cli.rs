//! `gpusim bench` end to end: it runs a case in a child, reports what a plain `gpusim run` of
//! the same trace reports, and `--markdown` replaces the table between the markers and nothing
//! else. Speeds are not checked (the bench is not a timed test).

mod common;

use std::process::Command;

use common::*;

fn bench(cache: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_gpusim"))
        .arg("bench")
        .args(args)
        .env("GPUSIM_BENCH_CACHE", cache)
        .current_dir(root())
        .output()
        .expect("runs")
}

/// The digits of a figure printed with thousands separators.
fn number(s: &str) -> u64 {
    s.replace(',', "").parse().unwrap_or_else(|_| panic!("not a number: `{s}`"))
}

#[test]
fn a_case_runs_and_the_markdown_rewrite_keeps_the_prose() {
    let d = workdir("bench");
    let doc = d.join("perf.md");
    let prose_before = "# Title\n\nSome prose.\n\n<!-- bench:begin -->\n";
    let prose_after = "<!-- bench:end -->\n\nMore prose, kept.\n";
    std::fs::write(&doc, format!("{prose_before}| old | table |\n{prose_after}")).unwrap();
    let o = bench(&d, &["--only", "tiny", "--repeat", "2", "--markdown", s(&doc)]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");

    // The row's figures: warp instructions and cycles as `gpusim run` gives them on the trace
    // the bench wrote, and a peak RSS that was measured.
    let row: Vec<&str> =
        out.lines().find(|l| l.starts_with("tiny ")).expect("a row for the case").split_whitespace().collect();
    let (insts, cycles, rss) = (number(row[2]), number(row[3]), number(row[7]));
    let trace = d.join("accelsim-flat-v2-ffma-2");
    assert!(trace.join("kernelslist.g").is_file(), "the flat trace is cached in GPUSIM_BENCH_CACHE");
    let report = d.join("r.json");
    ok(&["run", "--arch", "h100-sxm5-80gb", "--json", s(&report), s(&trace)]);
    let r = json(&report);
    assert_eq!(insts, r["warp_instructions"].as_u64().unwrap());
    assert_eq!(cycles, r["total_cycles"].as_u64().unwrap());
    assert!(rss > 0, "peak RSS measured: {out}");

    let new = std::fs::read_to_string(&doc).unwrap();
    assert!(new.starts_with(prose_before), "{new}");
    assert!(new.ends_with(prose_after), "{new}");
    assert!(!new.contains("| old | table |"), "{new}");
    assert!(new.contains("| tiny | h100-sxm5-80gb |"), "{new}");
    assert!(new.contains(&format!("| {} |", row[2])), "the table holds the printed figures: {new}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn bad_bench_requests_are_errors() {
    fails_with(&["bench", "--only", "nope"], &["nope", "gemm-h100-4k", "accelsim-flat"]);
    let d = workdir("bench-bad");
    let doc = d.join("no-markers.md");
    std::fs::write(&doc, "just prose\n").unwrap();
    fails_with(&["bench", "--only", "tiny", "--markdown", s(&doc)], &["no-markers.md", "bench:begin"]);
    assert_eq!(std::fs::read_to_string(&doc).unwrap(), "just prose\n", "left as it was");
    fails_with(&["bench", "--suite", "quick", "examples/ffma_bound.trace"], &["not both"]);
    let _ = std::fs::remove_dir_all(&d);
}

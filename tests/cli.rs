//! End-to-end tests of the `gpusim` binary: the README's commands, and bad input of every kind
//! giving exit code 2 and a message that names the place.

mod common;

use std::path::Path;

use common::*;

#[test]
fn readme_example_runs() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    // The first shell command of the README is the main job; run it (without cargo).
    let line = readme.lines().find(|l| l.contains("cargo run --release -- run")).expect("README names the run command");
    let args: Vec<&str> = line.split("-- ").nth(1).unwrap().split_whitespace().collect();
    let o = gpusim(&args);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("TFLOP/s") && out.contains("warp states"), "{out}");
}

#[test]
fn every_shipped_example_runs_on_a_preset() {
    let mut n = 0;
    for e in std::fs::read_dir(root().join("examples")).unwrap() {
        let p = e.unwrap().path();
        let is_trace = p.extension().is_some_and(|x| x == "trace") || p.join("kernelslist.g").is_file();
        if !is_trace {
            continue;
        }
        let json =
            std::env::temp_dir().join(format!("gpusim-example-{}.json", p.file_stem().unwrap().to_string_lossy()));
        let o = gpusim(&["run", "--arch", "a100-sxm4-80gb", "--json", json.to_str().unwrap(), p.to_str().unwrap()]);
        let (out, err) = text(&o);
        assert!(o.status.success(), "{}: {out}\n{err}", p.display());
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert!(v["time_us"].as_f64().unwrap() > 0.0, "{}", p.display());
        assert!(v["kernels"][0]["tflops"].is_number());
        n += 1;
    }
    assert!(n >= 4, "expected at least four shipped examples, found {n}");
}

#[test]
fn missing_file_is_named() {
    fails_with(&["run", "--arch", "h100-sxm5-80gb", "no/such/file.trace"], &["no/such/file.trace"]);
}

#[test]
fn truncated_trace_names_file_and_line() {
    fails_with(
        &["run", "--arch", "h100-sxm5-80gb", "tests/fixtures/truncated.trace"],
        &["tests/fixtures/truncated.trace:"],
    );
}

#[test]
fn bad_number_names_file_line_and_column() {
    fails_with(
        &["run", "--arch", "h100-sxm5-80gb", "tests/fixtures/bad_number.trace"],
        &["tests/fixtures/bad_number.trace:3:"],
    );
}

#[test]
fn unknown_opcode_warns_counts_and_runs() {
    let o = gpusim(&["run", "--arch", "h100-sxm5-80gb", "tests/fixtures/unknown_opcode.trace"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("W001") && out.contains("FROBNICATE.X"), "{out}");
}

#[test]
fn unknown_config_key_suggests_the_nearest() {
    fails_with(
        &["run", "--arch", "tests/fixtures/unknown_key.toml", "examples/ffma_bound.trace"],
        &["unknown_key.toml:5", "slices"],
    );
    fails_with(&["arch", "validate", "tests/fixtures/unknown_key.toml"], &["unknown_key.toml:5", "slices"]);
}

#[test]
fn negative_size_is_rejected() {
    fails_with(
        &["arch", "validate", "tests/fixtures/negative_size.toml"],
        &["negative_size.toml:5", "l2.size", "negative"],
    );
}

#[test]
fn unknown_preset_lists_the_known_ones() {
    fails_with(&["run", "--arch", "h100-sxm9", "examples/ffma_bound.trace"], &["h100-sxm9", "h100-sxm5-80gb"]);
}

#[test]
fn watchdog_names_stuck_warps_and_keeps_finished_results() {
    let o = gpusim(&["run", "--arch", "tests/fixtures/watchdog.toml", "examples/stream_copy.trace"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}\n{err}");
    assert!(err.contains("watchdog") && err.contains("warp"), "{err}");
}

#[test]
fn bad_clock_is_rejected() {
    fails_with(&["run", "--arch", "h100-sxm5-80gb", "--clock-mhz", "0", "examples/ffma_bound.trace"], &["--clock-mhz"]);
}

#[test]
fn clock_override_scales_time() {
    // Without the fixed per-kernel launch time (a time, not cycles), the whole run is SM work.
    let arch = std::env::temp_dir().join(format!("gpusim-clock-{}.toml", std::process::id()));
    std::fs::write(&arch, "inherits = \"h100-sxm5-80gb\"\n[sim]\nkernel_launch_latency = \"0 us\"\n").unwrap();
    let run = |mhz: &str| {
        let json = std::env::temp_dir().join(format!("gpusim-clock-{mhz}.json"));
        let o = gpusim(&[
            "run",
            "--arch",
            arch.to_str().unwrap(),
            "--clock-mhz",
            mhz,
            "-q",
            "--json",
            json.to_str().unwrap(),
            "examples/ffma_bound.trace",
        ]);
        assert!(o.status.success(), "{:?}", text(&o));
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        (v["total_cycles"].as_u64().unwrap(), v["time_us"].as_f64().unwrap())
    };
    let (c1, t1) = run("1000");
    let (c2, t2) = run("2000");
    // A compute-bound kernel takes nearly the same SM cycles at any clock (only its final
    // stores see DRAM latency, which is fixed in nanoseconds), so its time halves.
    assert!((c1 as f64 - c2 as f64).abs() / (c1 as f64) < 0.01, "{c1} vs {c2}");
    assert!((t1 / t2 - 2.0).abs() < 0.02, "{t1} vs {t2}");
}

#[test]
fn arch_commands_work() {
    let o = gpusim(&["arch", "list"]);
    let (out, _) = text(&o);
    assert!(o.status.success());
    for p in ["a100-sxm4-80gb", "h100-sxm5-80gb", "h100-pcie", "h800-sxm5", "h800-pcie", "h200-sxm"] {
        assert!(out.contains(p), "{p} missing from:\n{out}");
    }
    let o = gpusim(&["arch", "explain", "l2.slices"]);
    assert!(o.status.success(), "{:?}", text(&o));
    let o = gpusim(&["arch", "diff", "a100-sxm4-80gb", "h100-sxm5-80gb"]);
    assert!(text(&o).0.contains("sm.count"));
    let o = gpusim(&["arch", "validate", "configs/arch/next.toml"]);
    assert!(o.status.success(), "{:?}", text(&o));
    // `show` prints TOML that validates again.
    let o = gpusim(&["arch", "show", "h200-sxm"]);
    let shown = std::env::temp_dir().join("gpusim-shown-h200.toml");
    std::fs::write(&shown, &o.stdout).unwrap();
    let o = gpusim(&["arch", "validate", shown.to_str().unwrap()]);
    assert!(o.status.success(), "{:?}", text(&o));
}

#[test]
fn reading_an_accel_sim_trace_ahead_changes_no_result() {
    // `--threads 2` parses each kernel on a thread of its own; the reports are the same.
    let dir = std::env::temp_dir();
    let report = |threads: &str| {
        let json = dir.join(format!("gpusim-read-ahead-{}-{threads}.json", std::process::id()));
        let args = ["run", "--arch", "a100-sxm4-80gb", "--threads", threads, "-q", "--json", json.to_str().unwrap()];
        let o = gpusim(&[&args[..], &["examples/accelsim"]].concat());
        assert!(o.status.success(), "{:?}", text(&o));
        let r = std::fs::read_to_string(&json).unwrap();
        let _ = std::fs::remove_file(json);
        r
    };
    assert_eq!(report("1"), report("2"));
    fails_with(&["run", "--arch", "a100-sxm4-80gb", "--threads", "0", "examples/accelsim"], &["--threads"]);
}

#[test]
fn text_and_binary_traces_give_the_same_report() {
    let dir = std::env::temp_dir();
    let bin = dir.join("gpusim-barrier.gtb");
    let o = gpusim(&["trace", "convert", "examples/barrier_divergence.trace", bin.to_str().unwrap()]);
    assert!(o.status.success(), "{:?}", text(&o));
    let report = |p: &Path, name: &str| {
        let json = dir.join(name);
        let o =
            gpusim(&["run", "--arch", "h100-sxm5-80gb", "-q", "--json", json.to_str().unwrap(), p.to_str().unwrap()]);
        assert!(o.status.success(), "{:?}", text(&o));
        std::fs::read_to_string(json).unwrap()
    };
    assert_eq!(report(Path::new("examples/barrier_divergence.trace"), "a.json"), report(&bin, "b.json"));
}

#[test]
fn ubench_traces_are_written_and_run() {
    let out = std::env::temp_dir().join("gpusim-chase.trace");
    let o = gpusim(&[
        "trace",
        "ubench",
        "pointer-chase",
        "--arch",
        "h800-pcie",
        "-p",
        "footprint_bytes=64 KiB",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{:?}", text(&o));
    let o = gpusim(&["run", "--arch", "h800-pcie", out.to_str().unwrap()]);
    assert!(o.status.success(), "{:?}", text(&o));
    fails_with(&["trace", "ubench", "no-such-bench", "-o", out.to_str().unwrap()], &["no-such-bench", "pointer-chase"]);
    fails_with(
        &["trace", "ubench", "pointer-chase", "-p", "footprint=1", "-o", out.to_str().unwrap()],
        &["footprint", "footprint_bytes"],
    );
}

#[test]
fn the_two_streams_example_runs_its_streams_side_by_side() {
    let json = std::env::temp_dir().join("gpusim-two-streams.json");
    let trace = root().join("examples/two_streams.trace");
    let o = gpusim(&["run", "--arch", "h100-sxm5-80gb", "--json", json.to_str().unwrap(), trace.to_str().unwrap()]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("critical path: kernel 0 -> 2"), "{out}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let k = |i: usize, f: &str| v["kernels"][i][f].as_u64().unwrap();
    assert_eq!((k(0, "stream"), k(1, "stream"), k(2, "stream"), k(3, "stream")), (0, 1, 0, 2));
    assert!(k(1, "start_cycle") < k(0, "end_cycle"), "streams 0 and 1 overlap");
    assert!(k(2, "start_cycle") >= k(0, "end_cycle") && k(2, "start_cycle") >= k(1, "end_cycle"));
    assert!(k(3, "end_cycle") < k(2, "start_cycle"), "kernel 3 is not held back by kernel 2's wait");
    assert_eq!(v["streams"].as_array().unwrap().len(), 3);
}

#[test]
fn generators_are_reached_by_name_and_list_their_parameters() {
    let dir = std::env::temp_dir();
    let a = dir.join("gpusim-gen-a.trace");
    let b = dir.join("gpusim-gen-b.trace");
    // `trace NAME` and `trace ubench NAME` write the same trace.
    let o = gpusim(&["trace", "pointer-chase", "-p", "footprint_bytes=64 KiB", "-o", a.to_str().unwrap()]);
    assert!(o.status.success(), "{:?}", text(&o));
    let o = gpusim(&["trace", "ubench", "pointer-chase", "-p", "footprint_bytes=64 KiB", "-o", b.to_str().unwrap()]);
    assert!(o.status.success(), "{:?}", text(&o));
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    // `trace gemm` with flags or with -p gives the same trace.
    let o = gpusim(&["trace", "gemm", "--m", "512", "--n", "256", "--k", "128", "-o", a.to_str().unwrap()]);
    assert!(o.status.success(), "{:?}", text(&o));
    let o = gpusim(&["trace", "gemm", "-p", "m=512", "-p", "n=256", "-p", "k=128", "-o", b.to_str().unwrap()]);
    assert!(o.status.success(), "{:?}", text(&o));
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    // Listings.
    let o = gpusim(&["trace", "params"]);
    assert!(o.status.success() && text(&o).0.contains("stream-triad") && text(&o).0.contains("gemm"));
    let o = gpusim(&["trace", "params", "l2-read"]);
    assert!(o.status.success() && text(&o).0.contains("footprint_bytes") && text(&o).0.contains("default"));
    let o = gpusim(&["trace", "stream-triad", "--help"]);
    assert!(o.status.success() && text(&o).0.contains("bytes_per_array"), "{:?}", text(&o));
    // Errors name the generator or the parameter and its range.
    fails_with(&["trace", "no-such-gen", "-o", a.to_str().unwrap()], &["no-such-gen", "pointer-chase"]);
    fails_with(
        &["trace", "stream-triad", "-p", "threads_per_cta=4096", "-o", a.to_str().unwrap()],
        &["threads_per_cta", "32 to 1024"],
    );
    fails_with(&["trace", "gemm", "--n", "8", "--k", "8", "-o", a.to_str().unwrap()], &["--m"]);
}

/// A trace of `n` small kernels on one stream, the last cut off inside its program.
fn truncated_trace(n: usize) -> String {
    let kernel = |i: usize| {
        format!(
            "kernel k{i}\n  grid 4 1 1\n  block 64 1 1\n  program p\n    loop 50\n      FFMA R8 <- R5 R6 R8\n    end\n    EXIT\n  end\n  warps 0..1 p\nend\n"
        )
    };
    let mut s = "gpusim-trace 1\n".to_string();
    for i in 0..n - 1 {
        s += &kernel(i);
    }
    let last = kernel(n - 1);
    s += &last[..last.find("EXIT").unwrap()];
    s
}

#[test]
fn a_run_that_stops_part_way_keeps_every_kernel_that_finished() {
    for n in [2usize, 3] {
        let dir = std::env::temp_dir();
        let trace = dir.join(format!("gpusim-truncated-{n}.trace"));
        let json = dir.join(format!("gpusim-truncated-{n}.json"));
        std::fs::write(&trace, truncated_trace(n)).unwrap();
        let _ = std::fs::remove_file(&json);
        let o = gpusim(&["run", "--arch", "a100-sxm4-80gb", "--json", json.to_str().unwrap(), trace.to_str().unwrap()]);
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains("the kernels that finished before the error"), "{err}");
        assert!(err.contains(trace.file_name().unwrap().to_str().unwrap()), "the error names the file: {err}");
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let names: Vec<&str> = v["kernels"].as_array().unwrap().iter().map(|k| k["name"].as_str().unwrap()).collect();
        let expect: Vec<String> = (0..n - 1).map(|i| format!("k{i}")).collect();
        assert_eq!(names, expect, "every kernel before the truncated one is kept");
        assert_eq!(v["partial"]["reason"], "error", "the report says it is partial, and why");
        assert_eq!(v["memory_model"], "hierarchy", "and still names the model it ran");
    }
}

#[test]
fn per_cta_loop_counts_run_in_both_formats_with_the_closed_form_count() {
    // examples/causal_tiles.trace: CTA x of 64 runs its loop of 10 instructions x + 1 times,
    // after 3 others; 4 warps per CTA.
    let (t, per_cta_fixed, body, warps) = (64u64, 3u64, 10u64, 4u64);
    let closed = warps * (t * per_cta_fixed + body * t * (t + 1) / 2);
    let dir = std::env::temp_dir();
    let text_trace = root().join("examples/causal_tiles.trace");
    let bin = dir.join("gpusim-causal-tiles.gtb");
    let o = gpusim(&["trace", "convert", text_trace.to_str().unwrap(), bin.to_str().unwrap()]);
    assert!(o.status.success(), "{:?}", text(&o));
    let mut reports = Vec::new();
    for (i, t) in [text_trace, bin].iter().enumerate() {
        let json = dir.join(format!("gpusim-causal-tiles-{i}.json"));
        let o = gpusim(&["run", "--arch", "h100-sxm5-80gb", "--json", json.to_str().unwrap(), t.to_str().unwrap()]);
        assert!(o.status.success(), "{:?}", text(&o));
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(v["warp_instructions"].as_u64().unwrap(), closed, "{}", t.display());
        reports.push(v);
    }
    assert_eq!(reports[0], reports[1], "text and binary run identically");
}

#[test]
fn the_memory_model_comes_from_the_chip_and_the_flag_overrides_it() {
    let dir = std::env::temp_dir();
    let chip = dir.join("gpusim-simple-memory.toml");
    std::fs::write(&chip, "inherits = \"a100-sxm4-80gb\"\nname = \"simple-a100\"\n[sim]\nmemory_model = \"simple\"\n")
        .unwrap();
    let trace = root().join("examples/stream_copy.trace");
    let run = |extra: &[&str]| {
        let json = dir.join("gpusim-memory-model.json");
        let mut args = vec!["run", "--arch", chip.to_str().unwrap(), "--json", json.to_str().unwrap(), "-q"];
        args.extend_from_slice(extra);
        args.push(trace.to_str().unwrap());
        let o = gpusim(&args);
        assert!(o.status.success(), "{:?}", text(&o));
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        v["memory_model"].as_str().unwrap().to_string()
    };
    assert_eq!(run(&[]), "simple");
    assert_eq!(run(&["--memory-model", "hierarchy"]), "hierarchy");
    let bad = dir.join("gpusim-bad-memory.toml");
    std::fs::write(&bad, "inherits = \"a100-sxm4-80gb\"\n[sim]\nmemory_model = \"magic\"\n").unwrap();
    fails_with(&["arch", "validate", bad.to_str().unwrap()], &["sim.memory_model", "magic", "hierarchy"]);
}

#[test]
fn cuda_graph_sets_the_graph_launch_mode_and_shortens_the_gaps_on_the_critical_path() {
    let dir = workdir("cuda-graph");
    let chip = dir.join("graph.toml");
    std::fs::write(&chip, "inherits = \"h100-sxm5-80gb\"\nname = \"graph-h100\"\n[sim]\nlaunch = \"graph\"\n").unwrap();
    let trace = root().join("examples/two_streams.trace");
    let run = |arch: &str, extra: &[&str]| {
        let json = dir.join("report.json");
        let mut args = vec!["run", "--arch", arch, "--json", json.to_str().unwrap(), "-q"];
        args.extend_from_slice(extra);
        args.push(trace.to_str().unwrap());
        ok(&args);
        serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(&json).unwrap()).unwrap()
    };
    let eager = run("h100-sxm5-80gb", &[]);
    let flag = run("h100-sxm5-80gb", &["--cuda-graph"]);
    let file = run(chip.to_str().unwrap(), &[]);
    assert_eq!(flag["kernels"], file["kernels"], "--cuda-graph is `sim.launch = \"graph\"`");
    assert_eq!(flag["total_cycles"], file["total_cycles"]);
    // The report says how the kernels were launched.
    assert_eq!((eager["launch"].as_str(), flag["launch"].as_str()), (Some("eager"), Some("graph")));
    let (text, _) = ok(&["run", "--arch", "h100-sxm5-80gb", "--cuda-graph", trace.to_str().unwrap()]);
    assert!(text.lines().next().unwrap().contains("launched as a CUDA graph"), "{text}");
    // The example's critical path is kernel 0 then kernel 2 (one launch gap); with the
    // defaults (2000 and 1000 cycles) the graph run ends that gap's difference earlier.
    let a = gpusim_configs::load_preset("h100-sxm5-80gb").unwrap();
    let saved_per_gap = a.sim.kernel_launch_overhead.0 - a.sim.graph_launch_overhead.0;
    let path = |v: &serde_json::Value| v["critical_path"].as_array().unwrap().len() as u64;
    assert_eq!((path(&eager), path(&flag)), (2, 2), "{}", eager["critical_path"]);
    let total = |v: &serde_json::Value| v["total_cycles"].as_u64().unwrap();
    assert_eq!(total(&eager) - total(&flag), (path(&eager) - 1) * saved_per_gap);
    // A mode the model does not know is refused, naming the field and the modes.
    let bad = dir.join("bad-launch.toml");
    std::fs::write(&bad, "inherits = \"h100-sxm5-80gb\"\n[sim]\nlaunch = \"lazy\"\n").unwrap();
    fails_with(
        &["arch", "validate", bad.to_str().unwrap()],
        &["sim.launch", "lazy", "eager, graph", "bad-launch.toml"],
    );
    fails_with(&["run", "--arch", bad.to_str().unwrap(), trace.to_str().unwrap()], &["sim.launch", "lazy"]);
    let (out, _) = ok(&["arch", "explain", "sim.graph_launch_overhead"]);
    assert!(out.contains("cycles") && out.contains("CUDA graph"), "{out}");
}

#[test]
fn a_trace_can_come_through_a_pipe() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let trace = std::fs::read(root().join("examples/ffma_bound.trace")).unwrap();
    let (file_out, _) = ok(&["run", "--arch", "h100-sxm5-80gb", "examples/ffma_bound.trace"]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_gpusim"))
        .args(["run", "--arch", "h100-sxm5-80gb", "/dev/stdin"])
        .current_dir(root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&trace));
    let o = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    // The same report but for the trace's name.
    assert_eq!(out.replace("/dev/stdin", "examples/ffma_bound.trace"), file_out);
}

#[cfg(unix)]
#[test]
fn a_trace_can_come_from_a_fifo_or_from_dash() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let trace = std::fs::read(root().join("examples/two_streams.trace")).unwrap();
    let (file_out, _) =
        ok(&["run", "--arch", "h100-sxm5-80gb", "-q", "--json", "/dev/stdout", "examples/two_streams.trace"]);
    // A FIFO: detection must not open it twice (a second open would wait for a second writer).
    let fifo = std::env::temp_dir().join(format!("gpusim-fifo-{}", std::process::id()));
    let _ = std::fs::remove_file(&fifo);
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let (f, t) = (fifo.clone(), trace.clone());
    let writer = std::thread::spawn(move || std::fs::OpenOptions::new().write(true).open(&f)?.write_all(&t));
    let (fifo_out, _) = ok(&["run", "--arch", "h100-sxm5-80gb", "-q", "--json", "/dev/stdout", fifo.to_str().unwrap()]);
    writer.join().unwrap().unwrap();
    let _ = std::fs::remove_file(&fifo);
    assert_eq!(fifo_out, file_out);
    // `-`: standard input.
    let mut child = Command::new(env!("CARGO_BIN_EXE_gpusim"))
        .args(["run", "--arch", "h100-sxm5-80gb", "-q", "--json", "/dev/stdout", "-"])
        .current_dir(root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let w = std::thread::spawn(move || stdin.write_all(&trace));
    let o = child.wait_with_output().unwrap();
    w.join().unwrap().unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert_eq!(out, file_out);
    // `--json /dev/stdout` wrote through the device: it is still what it was, not a plain file
    // renamed over it.
    assert!(!std::fs::symlink_metadata("/dev/stdout").unwrap().is_file());
}

/// `--sample` on a grid long enough: the text report says what was skipped and the JSON carries
/// `sampled` with the same instruction count as a detailed run.
#[test]
fn sampled_run_says_so_and_keeps_exact_counts() {
    let dir = std::env::temp_dir().join(format!("gpusim-sample-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("gemm.trace");
    let o = gpusim(&[
        "trace",
        "gemm",
        "--m",
        "8192",
        "--n",
        "8192",
        "--k",
        "256",
        "--arch",
        "a100-sxm4-80gb",
        "-q",
        "-o",
        trace.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{:?}", text(&o));
    let run = |extra: &[&str]| {
        let json = dir.join(format!("r{}.json", extra.len()));
        let mut args = vec!["run", "--arch", "a100-sxm4-80gb", "--json", json.to_str().unwrap()];
        args.extend_from_slice(extra);
        args.push(trace.to_str().unwrap());
        let o = gpusim(&args);
        assert!(o.status.success(), "{:?}", text(&o));
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        (text(&o).0, v)
    };
    let (out, s) = run(&["--sample", "1:2:1:0"]);
    let (_, full) = run(&[]);
    assert!(out.contains("sampled") && out.contains("CTAs skipped"), "{out}");
    let k = &s["kernels"][0];
    assert_eq!(k["sampled"]["method"], "waves");
    assert!(k["sampled"]["skipped_ctas"].as_u64().unwrap() > 0);
    assert!(full["kernels"][0].get("sampled").is_none());
    assert_eq!(s["warp_instructions"], full["warp_instructions"]);
    assert_eq!(k["ctas"], full["kernels"][0]["ctas"]);
}

/// `gpusim run` of a skewed MoE layer names, in its text and its JSON, the expert `gpusim trace
/// moe` routed the most tokens to (the straggler) and the imbalance, which is well above that of
/// the same layer under uniform routing. (DeepGEMM's persistent grouped GEMMs: the groups are
/// per run of tiles.)
#[test]
fn a_moe_layer_report_names_the_busiest_expert() {
    let dir = workdir("moe-report");
    let layer = |routing: &str, trace: &Path| {
        let args = ["--tokens", "512", "--experts", "16", "--topk", "2", "--hidden", "1024", "--intermediate", "512"];
        let mut a = vec!["trace", "moe"];
        a.extend(args);
        a.extend(["--routing", routing, "--seed", "3", "-o", s(trace)]);
        ok(&a).0
    };
    let imbalance = |v: &serde_json::Value| v["cta_groups"][0]["imbalance"].as_f64().unwrap();
    let even = dir.join("uniform.trace");
    layer("uniform", &even);
    let ju = dir.join("uniform.json");
    ok(&["run", "--arch", "h800-sxm5", s(&even), "--json", s(&ju), "-q"]);
    let uniform = imbalance(&json(&ju));
    let trace = dir.join("moe.trace");
    let j = dir.join("moe.json");
    let out = layer("zipf:1.2", &trace);
    let busiest: i64 = out
        .split("busiest expert ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no busiest expert in {out}"));
    let (report, _) = ok(&["run", "--arch", "h800-sxm5", s(&trace), "--json", s(&j)]);
    let line =
        report.lines().find(|l| l.starts_with("expert imbalance over kernel")).unwrap_or_else(|| panic!("{report}"));
    assert!(line.contains(&format!("busiest expert {busiest} with ")), "{line}");
    let v = json(&j);
    let g = &v["cta_groups"][0];
    assert_eq!((g["name"].as_str(), g["busiest"].as_i64()), (Some("expert"), Some(busiest)), "{g}");
    assert!(imbalance(&v) > 1.5 * uniform, "skewed {g} against uniform {uniform}");
    let grouped: Vec<&serde_json::Value> =
        v["kernels"].as_array().unwrap().iter().filter(|k| k.get("groups").is_some()).collect();
    assert_eq!(grouped.len(), 2, "the gate/up and down GEMMs");
}

/// The fused recipe's Triton configuration comes in as `-p` parameters: a valid one names the
/// kernel it built, an invalid one is refused with the parameter and exit 2, and the DeepGEMM
/// recipe refuses them.
#[test]
fn the_fused_recipe_takes_its_triton_configuration_as_parameters() {
    let dir = workdir("moe-triton");
    let out = dir.join("moe.trace");
    let base = ["trace", "moe", "--tokens", "16", "--experts", "8", "--topk", "2", "--hidden", "512"];
    let with = |extra: &[&'static str]| {
        let mut a: Vec<&str> = base.to_vec();
        a.extend(["--intermediate", "256", "-o", s(&out)]);
        a.extend(extra.iter().copied());
        a
    };
    let (text, _) = ok(&with(&["--recipe", "fused", "-p", "block_n=64", "-p", "num_stages=4"]));
    assert!(text.contains("fused_moe_kernel_fp8_w8a8_block_64x64x128_g32_w4_s4"), "{text}");
    fails_with(&with(&["--recipe", "fused", "-p", "block_m=48"]), &["block_m = 48"]);
    fails_with(&with(&["--recipe", "fused", "-p", "num_warps=32"]), &["num_warps"]);
    fails_with(&with(&["--recipe", "deepgemm", "-p", "block_m=64"]), &["--recipe fused"]);
}

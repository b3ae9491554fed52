//! `gpusim sweep` end to end on small studies: expansion into the manifest, every point checked
//! before any runs, resume after SIGKILL, SIGINT/SIGTERM stopping cleanly, shards merging to the
//! unsharded run byte for byte, and the emitted Slurm script run task by task.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// A study of `points` chips (SM counts 64, 68, ...: 8-CTA clusters need 8 SMs per GPC) over the two-streams example: each point
/// takes a fraction of a second, so a kill lands mid-run.
fn study(dir: &Path, points: usize) -> PathBuf {
    let counts: Vec<String> = (0..points).map(|i| (64 + 4 * i).to_string()).collect();
    let text = format!(
        "name = \"small\"\narch = \"h100-sxm5-80gb\"\n\n[vary]\n\"sm.count\" = [{}]\n\n[[workload]]\ntrace = {:?}\n",
        counts.join(", "),
        s(&root().join("examples/two_streams.trace"))
    );
    let p = dir.join("study.toml");
    std::fs::write(&p, text).unwrap();
    p
}

fn subdir(d: &Path, name: &str) -> PathBuf {
    let p = d.join(name);
    std::fs::create_dir_all(&p).unwrap();
    p
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Every `points/*/*.json` under `dir`, sorted (temporary files start with a dot).
fn point_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(points) = std::fs::read_dir(dir.join("points")) else { return out };
    for p in points.flatten() {
        for f in std::fs::read_dir(p.path()).unwrap().flatten() {
            let name = f.file_name().to_string_lossy().into_owned();
            if name.ends_with(".json") && !name.starts_with('.') {
                out.push(f.path());
            }
        }
    }
    out.sort();
    out
}

/// The CSV's data lines.
fn rows(dir: &Path) -> Vec<String> {
    read(&dir.join("results.csv")).lines().skip(1).map(String::from).collect()
}

fn spawn(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_gpusim"))
        .args(args)
        .current_dir(root())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits until `dir` holds at least `n` point files; false if the child ended first.
fn wait_for_points(child: &mut Child, dir: &Path, n: usize) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(300) {
        if point_files(dir).len() >= n {
            return true;
        }
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("no {n} point files in {} after 300 s", dir.display());
}

/// Both directories hold the same manifest, CSV and point files, byte for byte.
fn assert_same_dirs(a: &Path, b: &Path) {
    assert_eq!(read(&a.join("manifest.json")), read(&b.join("manifest.json")));
    assert_eq!(read(&a.join("results.csv")), read(&b.join("results.csv")));
    let fa = point_files(a);
    let fb = point_files(b);
    assert_eq!(fa.len(), fb.len());
    for (x, y) in fa.iter().zip(&fb) {
        assert_eq!(x.strip_prefix(a).unwrap(), y.strip_prefix(b).unwrap());
        assert_eq!(read(x), read(y), "{}", x.display());
    }
}

#[test]
fn ranges_and_latin_hypercubes_reach_the_manifest_and_csv() {
    let d = workdir("sweep-expand");
    let out = d.join("out");
    let (_, stderr) = ok(&[
        "sweep",
        "--arch",
        "h100-sxm5-80gb",
        "--vary",
        r#"hbm.bandwidth="2 TB/s".."3 TB/s":3"#,
        "--vary",
        "sm.count=[66,132]",
        "--workload",
        "examples/two_streams.trace",
        "--cost",
        "sm.count * 2",
        "-o",
        s(&out),
    ]);
    assert_eq!(stderr, "", "no progress bar when stderr is not a terminal");
    let m = json(&out.join("manifest.json"));
    let points = m["points"].as_array().unwrap();
    assert_eq!(points.len(), 6);
    let bw: Vec<f64> = points.iter().map(|p| p["numeric"]["hbm.bandwidth"].as_f64().unwrap()).collect();
    assert_eq!(bw, [2e12, 2e12, 2.5e12, 2.5e12, 3e12, 3e12]);
    assert_eq!(points[2]["values"]["hbm.bandwidth"], "2.5 TB/s");
    assert_eq!(points[1]["cost"].as_f64(), Some(264.0));
    assert_eq!(m["params"][0]["key"], "hbm.bandwidth");
    assert_eq!(m["workloads"][0]["per_point"], false);
    let csv = read(&out.join("results.csv"));
    let header = csv.lines().next().unwrap();
    assert!(header.starts_with("point,id,hbm.bandwidth,sm.count,workload,time_us,tflops,bottleneck"), "{header}");
    assert_eq!(rows(&out).len(), 6);
    assert!(
        rows(&out)[3].starts_with(&format!("3,{},2500000000000,132,two_streams,", points[3]["id"].as_str().unwrap()))
    );
    // More SMs never slow this trace down.
    let time = |r: &str| r.split(',').nth(5).unwrap().parse::<f64>().unwrap();
    let r = rows(&out);
    // The bottleneck is the longest kernel's speed-of-light verdict, `bound:limiter`, the same
    // as its point file's report says.
    let bottleneck = r[0].split(',').nth(7).unwrap();
    let (bound, limiter) = bottleneck.split_once(':').unwrap_or_else(|| panic!("{bottleneck}"));
    assert!(["memory", "compute", "latency"].contains(&bound), "{bottleneck}");
    let point = json(&out.join("points").join(points[0]["id"].as_str().unwrap()).join("two_streams.json"));
    let longest = point["report"]["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .max_by(|a, b| a["time_us"].as_f64().unwrap().total_cmp(&b["time_us"].as_f64().unwrap()))
        .unwrap()
        .clone();
    assert_eq!(longest["sol"]["limiter"], limiter);
    assert_eq!(longest["sol"]["bound"], bound);
    assert!(time(&r[1]) <= time(&r[0]), "{r:?}");

    // A seeded Latin hypercube: every stratum of each range once, the same points for the same seed.
    let lhs = |seed: &str, dir: &Path| {
        ok(&[
            "sweep",
            "--arch",
            "h100-sxm5-80gb",
            "--vary",
            r#"hbm.bandwidth="2 TB/s".."4 TB/s":2"#,
            "--vary",
            "sm.count=66..132:2",
            "--lhs",
            "5",
            "--seed",
            seed,
            "--workload",
            "stream-read bytes_per_array=1048576",
            "--dry-run",
            "-o",
            s(dir),
        ])
        .0
    };
    let a = lhs("3", &d.join("lhs"));
    assert_eq!(a, lhs("3", &d.join("lhs")));
    assert_ne!(a, lhs("4", &d.join("lhs")));
    let mut strata: Vec<usize> = a
        .lines()
        .filter(|l| l.starts_with("point "))
        .map(|l| {
            let v = l.split("hbm.bandwidth=").nth(1).unwrap().split(" TB/s").next().unwrap();
            ((v.parse::<f64>().unwrap() - 2.0) / 2.0 * 5.0) as usize
        })
        .collect();
    strata.sort();
    assert_eq!(strata, [0, 1, 2, 3, 4], "{a}");
    assert!(a.contains("5 point(s) × 1 workload(s), all valid"), "{a}");
    assert!(a.contains("(regenerated per point)"), "the stream recipe's grid depends on the SM count:\n{a}");
    assert!(!d.join("lhs").join("manifest.json").exists(), "a dry run writes nothing");
}

#[test]
fn an_impossible_chip_at_any_point_stops_the_sweep_before_it_starts() {
    let d = workdir("sweep-invalid");
    let p = d.join("bad.toml");
    std::fs::write(
        &p,
        format!(
            "arch = \"h100-sxm5-80gb\"\n[vary]\n\"sm.count\" = [66, 132]\n\"l2.size\" = [\"50 MiB\", \"51 MiB\"]\n\
             [[workload]]\ntrace = {:?}\n",
            s(&root().join("examples/two_streams.trace"))
        ),
    )
    .unwrap();
    let out = d.join("out");
    fails_with(
        &["sweep", s(&p), "-o", s(&out)],
        &[
            s(&p),
            "2 of 4 point(s) give an impossible chip",
            "point 1 (sm.count=66, l2.size=51 MiB)",
            "point 3",
            "l2.size",
            "nothing was run",
        ],
    );
    assert!(!out.exists(), "nothing is written");
    fails_with(
        &[
            "sweep",
            "--arch",
            "h100-sxm5-80gb",
            "--vary",
            "sm.count=[1,5000]",
            "--workload",
            "examples/two_streams.trace",
            "-o",
            s(&out),
        ],
        &["point 1 (sm.count=5000)", "1 ..= 4096"],
    );
    fails_with(
        &["sweep", "--arch", "h100-sxm5-80gb", "--vary", "sm.cuont=[1]", "--workload", "x.trace", "-o", s(&out)],
        &["--vary", "sm.cuont", "sm.count"],
    );
    fails_with(
        &["sweep", "--arch", "h100-sxm5-80gb", "--vary", "sm.count=1..2", "--workload", "x.trace", "-o", s(&out)],
        &["number of values"],
    );
    fails_with(
        &["sweep", "--arch", "h100-sxm5-80gb", "--workload", "gemm m=0", "-o", s(&out)],
        &["workload `gemm-m0`", "m"],
    );
    fails_with(
        &["sweep", "--arch", "h100-sxm5-80gb", "--workload", "no/such.trace", "-o", s(&out)],
        &["no/such.trace"],
    );
    fails_with(
        &[
            "sweep",
            "--arch",
            "h100-sxm5-80gb",
            "--workload",
            "examples/two_streams.trace",
            "--shard",
            "3/3",
            "-o",
            s(&out),
        ],
        &["--shard", "I/N"],
    );
    std::fs::write(&p, "arch = \"h100-sxm5-80gb\"\ncolour = 3\n[[workload]]\ntrace = \"x.trace\"\n").unwrap();
    fails_with(&["sweep", s(&p), "-o", s(&out)], &[&format!("{}:2:1", s(&p)), "colour"]);
}

#[test]
fn a_study_varies_the_launch_mode_by_name_and_refuses_an_unknown_one() {
    let d = workdir("sweep-launch");
    let study = |modes: &str| {
        let p = d.join("launch.toml");
        let text = format!(
            "arch = \"h100-sxm5-80gb\"\n[vary]\n\"sim.launch\" = [{modes}]\n[[workload]]\ntrace = {:?}\n",
            s(&root().join("examples/two_streams.trace"))
        );
        std::fs::write(&p, text).unwrap();
        p
    };
    let out = d.join("out");
    ok(&["sweep", s(&study(r#""eager", "graph""#)), "-o", s(&out)]);
    let m = json(&out.join("manifest.json"));
    let modes: Vec<&str> =
        m["points"].as_array().unwrap().iter().map(|p| p["values"]["sim.launch"].as_str().unwrap()).collect();
    assert_eq!(modes, ["eager", "graph"]);
    // The example's critical path (kernel 0, then kernel 2) has one launch gap: the graph point
    // ends the difference of the two gaps earlier.
    let a = gpusim_configs::load_preset("h100-sxm5-80gb").unwrap();
    let csv = read(&out.join("results.csv"));
    let col = csv.lines().next().unwrap().split(',').position(|c| c == "cycles").expect("a cycles column");
    let cycles: Vec<u64> = rows(&out).iter().map(|r| r.split(',').nth(col).unwrap().parse().unwrap()).collect();
    assert_eq!(cycles[0] - cycles[1], a.sim.kernel_launch_overhead.0 - a.sim.graph_launch_overhead.0, "{cycles:?}");
    fails_with(
        &["sweep", s(&study(r#""eager", "lazy""#)), "-o", s(&d.join("bad"))],
        &["point 1 (sim.launch=lazy)", "sim.launch", "eager, graph", "nothing was run"],
    );
}

#[test]
fn resume_after_sigkill_loses_and_duplicates_nothing() {
    let d = workdir("sweep-kill");
    let st = study(&d, 12);
    let clean = d.join("clean");
    ok(&["sweep", s(&st), "--threads", "2", "-q", "-o", s(&clean)]);
    assert_eq!(point_files(&clean).len(), 12);

    let out = d.join("killed");
    let mut child = spawn(&["sweep", s(&st), "--threads", "1", "-o", s(&out)]);
    assert!(wait_for_points(&mut child, &out, 3), "the sweep ended before it could be killed");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let files = point_files(&out);
    assert!(files.len() < 12, "killed mid-run");
    // What is there is whole, and the CSV lists only finished results (it is written after each
    // result's file, so at most the last one is not in it yet).
    for f in &files {
        let v = json(f);
        assert!(v["report"]["time_us"].as_f64().unwrap() > 0.0, "{}", f.display());
    }
    let r = rows(&out);
    assert!(r.len() <= files.len() && r.len() + 1 >= files.len(), "{} rows, {} files", r.len(), files.len());

    let (stdout, _) = ok(&["sweep", s(&st), "--threads", "2", "-o", s(&out)]);
    let done = files.len();
    assert!(stdout.contains(&format!("{} run now, {done} already done", 12 - done)), "{stdout}");
    assert_same_dirs(&clean, &out);
    let dir_entries: Vec<_> = std::fs::read_dir(&out).unwrap().flatten().map(|e| e.file_name()).collect();
    assert!(dir_entries.iter().all(|n| !n.to_string_lossy().contains(".tmp-")), "{dir_entries:?}");

    // A third run finds everything done.
    let (stdout, _) = ok(&["sweep", s(&st), "-o", s(&out)]);
    assert!(stdout.contains("0 run now, 12 already done"), "{stdout}");
    // Another study may not reuse the directory.
    let other = study(&subdir(&d, "other-study"), 3);
    fails_with(&["sweep", s(&other), "-o", s(&out)], &["another study"]);
}

#[test]
fn sigint_and_sigterm_stop_cleanly_keeping_finished_points() {
    for (signal, code) in [("-INT", 130), ("-TERM", 143)] {
        let d = workdir(&format!("sweep-signal{code}"));
        let st = study(&d, 12);
        let out = d.join("out");
        let mut child = spawn(&["sweep", s(&st), "--threads", "1", "-o", s(&out)]);
        assert!(wait_for_points(&mut child, &out, 2), "the sweep ended before the signal");
        let status = Command::new("kill").args([signal, &child.id().to_string()]).status().unwrap();
        assert!(status.success());
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{err}");
        assert!(err.contains("interrupted") && err.contains("run the same command again"), "{err}");
        let files = point_files(&out);
        assert!(files.len() < 12, "stopped early");
        // The CSV lists exactly the finished results: the one in flight was finished first.
        assert_eq!(rows(&out).len(), files.len());
    }
}

#[test]
fn shards_merge_to_the_unsharded_run_byte_for_byte() {
    let d = workdir("sweep-shards");
    let st = study(&d, 5);
    let whole = d.join("whole");
    ok(&["sweep", s(&st), "-q", "-o", s(&whole)]);
    let mut dirs = Vec::new();
    for i in 0..3 {
        let dir = d.join(format!("shard-{i}"));
        ok(&["sweep", s(&st), "--shard", &format!("{i}/3"), "-q", "-o", s(&dir)]);
        let expect = (0..5).filter(|p| p % 3 == i).count();
        assert_eq!(point_files(&dir).len(), expect, "shard {i}");
        dirs.push(dir);
    }
    // A shard's CSV is its own points.
    assert!(rows(&dirs[1]).iter().all(|r| r.starts_with("1,") || r.starts_with("4,")));
    let merged = d.join("merged");
    let mut args = vec!["sweep", "merge"];
    args.extend(dirs.iter().map(|p| s(p)));
    args.extend(["-o", s(&merged)]);
    let (stdout, _) = ok(&args);
    assert!(stdout.contains("5 of 5 results finished"), "{stdout}");
    assert_same_dirs(&whole, &merged);
    // Shards of another study do not merge.
    let other = d.join("other");
    let st2 = study(&subdir(&d, "other-study"), 2);
    ok(&["sweep", s(&st2), "-q", "-o", s(&other)]);
    fails_with(&["sweep", "merge", s(&dirs[0]), s(&other), "-o", s(&d.join("m2"))], &["not shards of the same study"]);
}

#[test]
fn the_emitted_slurm_script_runs_one_shard_per_array_task() {
    let d = workdir("sweep-slurm");
    let st = study(&d, 4);
    let out = d.join("out");
    let (script, _) = ok(&["sweep", s(&st), "--emit-slurm", "--shards", "2", "--sbatch", "--time=10", "-o", s(&out)]);
    assert!(script.starts_with("#!/bin/bash\n"), "{script}");
    assert!(script.contains("#SBATCH --array=0-1\n") && script.contains("#SBATCH --time=10\n"), "{script}");
    let job = d.join("job.sbatch");
    std::fs::write(&job, &script).unwrap();
    // Run each array task as Slurm would, by its SLURM_ARRAY_TASK_ID.
    for i in 0..2 {
        let o = Command::new("bash").arg(&job).env("SLURM_ARRAY_TASK_ID", i.to_string()).output().unwrap();
        assert!(o.status.success(), "task {i}: {}", String::from_utf8_lossy(&o.stderr));
    }
    let merged = out.join("merged");
    ok(&["sweep", "merge", s(&out.join("shard-0")), s(&out.join("shard-1")), "-o", s(&merged)]);
    let whole = d.join("whole");
    ok(&["sweep", s(&st), "-q", "-o", s(&whole)]);
    assert_same_dirs(&whole, &merged);
}

#[test]
fn the_next_gen_example_study_is_valid() {
    // The README's study: every point's chip and workload builds (a dry run simulates nothing).
    let d = workdir("sweep-next-gen");
    let (out, _) = ok(&["sweep", "examples/whatif/next-gen.toml", "--dry-run", "-o", s(&d.join("out"))]);
    assert!(out.contains("8 point(s) × 5 workload(s), all valid"), "{out}");
    assert!(
        out.contains("point 7 ") && out.contains("sm.count=160 hbm.bandwidth=8 TB/s l2.size=128 MiB l2.slices=128"),
        "{out}"
    );
    for w in ["gemm-8192", "gemm-xla-4096x4096x256", "stream-read", "attention-fwd-s2048", "moe-layer"] {
        assert!(out.contains(&format!("workload {w} ")), "{w}: {out}");
    }
}

#[test]
fn a_study_on_a_chip_file_with_a_cost_reports_to_html() {
    // The README's pair of commands on a chip file (not a preset name) with a cost expression:
    // the report takes each point's cost from the manifest, as the sweep worked it out.
    let d = workdir("sweep-report-file-arch");
    let study = d.join("study.toml");
    let text = format!(
        "name = \"file-arch\"\narch = {:?}\ncost = \"sm.count * clocks.sm\"\n\n[vary]\n\"sm.count\" = [128, 160]\n\n[[workload]]\ntrace = {:?}\n",
        s(&root().join("configs/arch/next.toml")),
        s(&root().join("examples/two_streams.trace"))
    );
    std::fs::write(&study, text).unwrap();
    let out = d.join("out");
    ok(&["sweep", s(&study), "-o", s(&out)]);
    let html = d.join("report.html");
    ok(&["report", s(&out), "-o", s(&html)]);
    let page = read(&html);
    assert!(page.contains("Pareto"), "the cost gives a Pareto front");
}

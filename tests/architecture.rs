//! The invariants of absence that ARCHITECTURE.md states: which crate does not depend on which,
//! and what sim-core's source never uses. Checked against `cargo metadata` and the sources, so a
//! change that breaks one fails here rather than drifting from the document.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Each workspace crate's normal (not dev, not build) dependencies on other workspace crates.
fn workspace_deps() -> BTreeMap<String, BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(root())
        .output()
        .expect("cargo metadata runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let m: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut deps = BTreeMap::new();
    for p in m["packages"].as_array().unwrap() {
        let name = p["name"].as_str().unwrap().to_string();
        let d: BTreeSet<String> = p["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["kind"].is_null() && d["name"].as_str().unwrap().starts_with("gpusim"))
            .map(|d| d["name"].as_str().unwrap().to_string())
            .collect();
        deps.insert(name, d);
    }
    deps
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[test]
fn crate_dependencies_point_one_way() {
    let d = workspace_deps();
    assert_eq!(d["gpusim-isa"], set(&[]), "isa depends on no gpusim crate");
    assert_eq!(d["gpusim-configs"], set(&["gpusim-isa"]), "configs depends only on isa");
    assert_eq!(d["gpusim-sim-core"], set(&["gpusim-isa", "gpusim-configs"]), "sim-core: isa and configs only");
    assert!(!d["gpusim-workloads"].contains("gpusim-sim-core"), "workloads does not depend on sim-core");
    assert!(!d["gpusim-workloads"].contains("gpusim-validation"), "workloads does not depend on validation");
    assert_eq!(d["gpusim-reports"], set(&[]), "reports depends on no gpusim crate");
    assert!(!d["gpusim-validation"].contains("gpusim-reports"), "validation draws nothing");
    for (krate, deps) in &d {
        assert!(!deps.contains("gpusim"), "{krate} depends on the binary");
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn sim_core_does_no_io_and_nothing_nondeterministic() {
    let mut files = Vec::new();
    rust_files(&root().join("sim-core/src"), &mut files);
    assert!(files.len() > 10);
    // I/O, clocks, threads and hash iteration order: none of them may reach a result.
    let banned = [
        "std::fs",
        "std::io",
        "std::net",
        "std::env",
        "std::time",
        "std::thread",
        "Instant::",
        "println!",
        "eprintln!",
        "print!(",
        "dbg!(",
        "HashMap",
        "HashSet",
        "Mutex",
    ];
    // Host-specific code (`unsafe`, `std::arch`) only in host.rs, the prefetch hints, which
    // change nothing in a result.
    let host_only = ["unsafe", "std::arch"];
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let is_host = f.ends_with("sim-core/src/host.rs");
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap();
            for b in banned {
                assert!(!code.contains(b), "{}:{}: sim-core uses `{b}`: {line}", f.display(), n + 1);
            }
            for b in host_only {
                assert!(is_host || !code.contains(b), "{}:{}: `{b}` outside host.rs: {line}", f.display(), n + 1);
            }
        }
    }
}

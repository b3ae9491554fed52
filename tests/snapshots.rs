//! Snapshot tests: `gpusim run` on fixed traces and presets must print exactly the report
//! stored in tests/snapshots/<case>.txt (cases in tests/snapshots/cases.toml). The model is
//! deterministic, so a difference is a change in what gpusim predicts: intended ones are
//! accepted with `UPDATE_SNAPSHOTS=1 cargo test --test snapshots` and reviewed in the diff.

mod common;

use std::path::Path;

use common::*;
use serde::Deserialize;

#[derive(Deserialize)]
struct Cases {
    case: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    #[allow(dead_code)]
    why: String,
    /// A `gpusim trace ...` command writing `{trace}` (its `-o` is added).
    #[serde(default)]
    trace: Vec<String>,
    run: Vec<String>,
}

/// The case's report with the machine-specific trace path replaced by `{trace}`.
fn report(case: &Case, dir: &Path) -> String {
    let trace = dir.join(format!("{}.trace", case.name));
    if !case.trace.is_empty() {
        let mut args: Vec<&str> = case.trace.iter().map(String::as_str).collect();
        args.extend(["-o", s(&trace)]);
        ok(&args);
    }
    let args: Vec<String> = case.run.iter().map(|a| a.replace("{trace}", s(&trace))).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (out, _) = ok(&args);
    out.replace(s(&trace), "{trace}")
}

/// The first differing line, with a little context, for the failure message.
fn first_difference(expected: &str, actual: &str) -> String {
    let (e, a): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), actual.lines().collect());
    let i = (0..e.len().max(a.len())).find(|&i| e.get(i) != a.get(i)).unwrap_or(0);
    format!(
        "line {}:\n  expected: {}\n  actual:   {}",
        i + 1,
        e.get(i).unwrap_or(&"<end>"),
        a.get(i).unwrap_or(&"<end>")
    )
}

#[test]
fn reports_match_their_snapshots() {
    let dir = root().join("tests/snapshots");
    let cases: Cases = toml::from_str(&std::fs::read_to_string(dir.join("cases.toml")).unwrap()).unwrap();
    assert!(cases.case.len() >= 8, "the snapshot set shrank to {} cases", cases.case.len());
    let update = std::env::var_os("UPDATE_SNAPSHOTS").is_some();
    let work = workdir("snapshots");
    let mut failures = Vec::new();
    for case in &cases.case {
        let actual = report(case, &work);
        let path = dir.join(format!("{}.txt", case.name));
        if update {
            std::fs::write(&path, &actual).unwrap();
            continue;
        }
        match std::fs::read_to_string(&path) {
            Ok(expected) if expected == actual => {}
            Ok(expected) => failures.push(format!("{}: {}", case.name, first_difference(&expected, &actual))),
            Err(_) => failures.push(format!("{}: no snapshot {}", case.name, path.display())),
        }
    }
    assert!(
        failures.is_empty(),
        "{} report(s) differ from their snapshots; if the change is intended, run \
         `UPDATE_SNAPSHOTS=1 cargo test --test snapshots` and review `git diff tests/snapshots`:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

//! Runs the bad-input corpus (tests/bad-inputs/cases.toml): each case's exit code and message
//! fragments. Every input that once crashed, hung or misled gpusim is one case.

mod common;

use common::*;

#[derive(serde::Deserialize)]
struct Corpus {
    case: Vec<Case>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    name: String,
    args: Vec<String>,
    exit: i32,
    #[serde(default)]
    stderr: Vec<String>,
    #[serde(default)]
    stdout: Vec<String>,
}

#[test]
fn every_bad_input_gets_its_exit_code_and_message() {
    let dir = root().join("tests/bad-inputs");
    let corpus: Corpus = toml::from_str(&std::fs::read_to_string(dir.join("cases.toml")).unwrap()).unwrap();
    assert!(corpus.case.len() >= 20, "the corpus lost cases");
    let mut failures = Vec::new();
    for c in &corpus.case {
        let args: Vec<String> = c.args.iter().map(|a| a.replace("{dir}", dir.to_str().unwrap())).collect();
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = gpusim(&refs);
        let (out, err) = text(&o);
        let code = o.status.code();
        let missing: Vec<&String> = c
            .stderr
            .iter()
            .filter(|f| !err.contains(f.as_str()))
            .chain(c.stdout.iter().filter(|f| !out.contains(f.as_str())))
            .collect();
        if code != Some(c.exit) || !missing.is_empty() || err.contains("panicked") {
            failures.push(format!("{}: exit {code:?} (want {}), missing {missing:?}\n{out}\n{err}", c.name, c.exit));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n---\n"));
}

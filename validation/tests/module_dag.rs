//! The crate's top-level modules form a DAG, and the CUDA harness (`measure/`) is a boundary.
//!
//! Every `validation/src/**/*.rs` is read; its `crate::X` paths and `super::` uses name the
//! top-level modules it depends on (the first segment after `crate::`). The graph of those edges
//! must have no cycle (a failure names the modules of each one), and `measure` may depend only on
//! [`MEASURE_MAY_USE`]: it produces `Case`s and nothing else reaches into it but through the
//! re-exports of `measure/mod.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use petgraph::algo::tarjan_scc;
use petgraph::graphmap::DiGraphMap;

/// The modules `measure/` may import.
const MEASURE_MAY_USE: &[&str] = &["case", "measurement", "hash"];

/// What `measure/mod.rs` re-exports (and declares public) for the rest of the crate.
const MEASURE_PUBLIC: &[&str] = &[
    "MeasureError",
    "Options",
    "Outcome",
    "Suite",
    "GROUPS",
    "Plan",
    "BUILT_WITH_CUDA",
    "check_groups",
    "run",
    "host",
    "kernels",
    "suite",
];

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
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

/// The module path of a source file (`["memory_cases", "traces"]`; `[]` for lib.rs).
fn module_path(file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src_dir()).unwrap();
    let mut parts: Vec<String> = rel.iter().map(|s| s.to_string_lossy().into_owned()).collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_string());
    }
    parts
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Code with `//` comments (doc comments included) removed, so intra-doc links are no edges.
fn code(text: &str) -> String {
    text.lines().map(|l| l.find("//").map_or(l, |i| &l[..i])).collect::<Vec<_>>().join("\n")
}

/// `(target top-level module, item path after it)` for every `crate::X…` in the code, and every
/// `crate::{X, …}` group entry.
fn crate_refs(code: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (i, _) in code.match_indices("crate::") {
        if i > 0 && is_ident(code[..i].chars().next_back().unwrap()) {
            continue; // `gpusim_validation_crate::`, say
        }
        let rest = &code[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let inner = &group[..group.find('}').unwrap_or(group.len())];
            for item in inner.split(',') {
                let item = item.trim();
                let head: String = item.chars().take_while(|&c| is_ident(c)).collect();
                if !head.is_empty() {
                    out.push((head, item.to_string()));
                }
            }
            continue;
        }
        let head: String = rest.chars().take_while(|&c| is_ident(c)).collect();
        let tail: String = rest[head.len()..].chars().take_while(|&c| is_ident(c) || c == ':').collect();
        out.push((head, tail.trim_start_matches(':').to_string()));
    }
    out
}

/// Top-level modules reached with `super::` from a file at `module` (only those that climb to
/// the crate root: `super::` in a top-level module's file, `super::super::` one level down, ...).
fn super_refs(code: &str, module: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in code.match_indices("super::") {
        if i > 0 && (is_ident(code[..i].chars().next_back().unwrap()) || code[..i].ends_with("::")) {
            continue; // the second and later `super::` of a chain
        }
        let mut rest = &code[i..];
        let mut ups = 0;
        while let Some(r) = rest.strip_prefix("super::") {
            ups += 1;
            rest = r;
        }
        // A file's own `mod tests` adds one level; `super::` there is the file itself.
        let in_tests = code[..i].rfind("mod tests").is_some_and(|t| code[t..i].contains('{'));
        let depth = module.len() + usize::from(in_tests);
        if ups == depth {
            let head: String = rest.chars().take_while(|&c| is_ident(c)).collect();
            if !head.is_empty() {
                out.push(head);
            }
        }
    }
    out
}

struct Crate {
    /// `(from, to)` -> the files that make the edge.
    edges: BTreeMap<(String, String), BTreeSet<String>>,
    /// `(file, what it names)` for every path from outside `measure/` into it.
    into_measure: Vec<(String, String)>,
    modules: BTreeSet<String>,
}

fn read_crate() -> Crate {
    let mut files = Vec::new();
    rust_files(&src_dir(), &mut files);
    files.sort();
    let mut edges: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    let mut into_measure = Vec::new();
    let mut modules = BTreeSet::new();
    for f in &files {
        let module = module_path(f);
        let Some(top) = module.first().cloned() else { continue }; // lib.rs: re-exports only
        modules.insert(top.clone());
        let code = code(&std::fs::read_to_string(f).unwrap());
        let name = f.strip_prefix(src_dir()).unwrap().display().to_string();
        let mut targets: Vec<String> = Vec::new();
        for (to, item) in crate_refs(&code) {
            if to == "measure" && top != "measure" {
                into_measure.push((name.clone(), item));
            }
            targets.push(to);
        }
        targets.extend(super_refs(&code, &module));
        for to in targets {
            if to != top && to != "self" {
                edges.entry((top.clone(), to)).or_default().insert(name.clone());
            }
        }
    }
    Crate { edges, into_measure, modules }
}

/// The cycles (strongly connected components of more than one module) of the edges, each named
/// with the files that make its edges.
fn cycles(edges: &BTreeMap<(String, String), BTreeSet<String>>) -> Vec<String> {
    let mut g = DiGraphMap::<&str, ()>::new();
    for (from, to) in edges.keys() {
        g.add_edge(from.as_str(), to.as_str(), ());
    }
    let mut out = Vec::new();
    for mut scc in tarjan_scc(&g) {
        if scc.len() < 2 {
            continue;
        }
        scc.sort();
        let inside: BTreeSet<&str> = scc.iter().copied().collect();
        let how: Vec<String> = edges
            .iter()
            .filter(|((a, b), _)| inside.contains(a.as_str()) && inside.contains(b.as_str()))
            .map(|((a, b), files)| format!("{a} -> {b} ({})", files.iter().cloned().collect::<Vec<_>>().join(", ")))
            .collect();
        out.push(format!("cycle among {{{}}}: {}", scc.join(", "), how.join("; ")));
    }
    out
}

#[test]
fn top_level_modules_form_a_dag() {
    let c = read_crate();
    assert!(c.modules.contains("case") && c.modules.contains("reference") && c.modules.contains("measure"));
    assert!(c.edges.contains_key(&("reference".into(), "case".into())), "the scan sees `use crate::case`");
    let found = cycles(&c.edges);
    assert!(found.is_empty(), "validation's modules must form a DAG:\n{}", found.join("\n"));
}

#[test]
fn measure_depends_only_on_the_allowed_modules() {
    let c = read_crate();
    let bad: Vec<String> = c
        .edges
        .iter()
        .filter(|((from, to), _)| from == "measure" && !MEASURE_MAY_USE.contains(&to.as_str()))
        .map(|((_, to), files)| format!("measure -> {to} ({})", files.iter().cloned().collect::<Vec<_>>().join(", ")))
        .collect();
    assert!(bad.is_empty(), "measure/ may use only {MEASURE_MAY_USE:?}:\n{}", bad.join("\n"));
}

#[test]
fn nothing_reaches_into_measure_but_its_reexports() {
    let c = read_crate();
    let bad: Vec<String> = c
        .into_measure
        .iter()
        .filter(|(_, item)| {
            let first: String = item.chars().take_while(|&ch| is_ident(ch)).collect();
            !first.is_empty() && !MEASURE_PUBLIC.contains(&first.as_str())
        })
        .map(|(file, item)| format!("{file}: crate::measure::{item}"))
        .collect();
    assert!(bad.is_empty(), "outside measure/, use only what measure/mod.rs exports:\n{}", bad.join("\n"));
}

#[test]
fn a_back_import_is_a_cycle() {
    let mut c = read_crate();
    c.edges.entry(("case".into(), "reference".into())).or_default().insert("case.rs".into());
    let found = cycles(&c.edges);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("case") && found[0].contains("reference") && found[0].contains("case -> reference"),
        "{}",
        found[0]
    );
}

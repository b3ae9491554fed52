//! The reference measurements: `[[case]]` tables of `published.toml` and `measured-h200.toml`
//! (schema in `shared/reference/README.md`).
//!
//! Every case keeps all of its fields: the ones the schema names are typed fields of [`Case`],
//! anything else lands in [`Case::extra`] (so a new field in the data never breaks loading).
//! Errors name the file and the line of the offending `[[case]]` (or of the TOML syntax error).
//!
//! Files written by `gpusim measure` ([`crate::measurement`]) add a file-level `[device]` and
//! `[method]`; a case without its own `[case.device]` / `[case.method]` gets the file's, so every
//! measured case carries the clocks it was measured at. Other top-level tables are ignored.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;

pub use crate::case::{Case, Error, Kind, Metric, Trust};
use crate::case::{Device, Method};

/// The `[[case]]` array of one file, and the file-level `[device]` and `[method]` of measurement
/// files.
#[derive(Deserialize)]
struct File {
    #[serde(default)]
    case: Vec<toml::Value>,
    #[serde(default)]
    device: Option<toml::Value>,
    #[serde(default)]
    method: Option<toml::Value>,
    #[serde(flatten)]
    _rest: BTreeMap<String, toml::Value>,
}

/// 1-based line and column of byte `at` in `text`.
fn line_col(text: &str, at: usize) -> (usize, usize) {
    let at = at.min(text.len());
    let before = &text.as_bytes()[..at];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let start = before.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let col = String::from_utf8_lossy(&before[start..]).chars().count() + 1;
    (line, col)
}

/// Lines (1-based) of the `[[case]]` headers, in order.
fn case_header_lines(text: &str) -> Vec<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| {
            let code = l.split('#').next().unwrap_or("");
            let compact: String = code.chars().filter(|c| !c.is_whitespace()).collect();
            compact == "[[case]]"
        })
        .map(|(i, _)| i + 1)
        .collect()
}

/// Line (1-based) of the top-level table header `[name]`, or 1.
fn table_header_line(text: &str, name: &str) -> usize {
    text.lines()
        .position(|l| {
            let code = l.split('#').next().unwrap_or("");
            let compact: String = code.chars().filter(|c| !c.is_whitespace()).collect();
            compact == format!("[{name}]")
        })
        .map_or(1, |i| i + 1)
}

/// A file-level table (`[device]`, `[method]`) as its type; errors name the table's line.
fn file_table<T: serde::de::DeserializeOwned>(
    path: &Path,
    text: &str,
    name: &str,
    v: Option<toml::Value>,
) -> Result<Option<T>, Error> {
    v.map(|v| {
        v.try_into().map_err(|e: toml::de::Error| Error::Syntax {
            path: path.to_path_buf(),
            line: table_header_line(text, name),
            col: 1,
            message: format!("[{name}]: {}", e.message().trim()),
        })
    })
    .transpose()
}

/// Parses reference cases from TOML text; `path` names the file in errors and in
/// [`Case::file`]. A file-level `[device]` / `[method]` is given to every case that has none of
/// its own.
pub fn parse_cases(path: &Path, text: &str) -> Result<Vec<Case>, Error> {
    parse_file(path, text).map(|(cases, _, _)| cases)
}

/// The cases of a file with its file-level `[device]` and `[method]`.
pub(crate) type ParsedFile = (Vec<Case>, Option<Device>, Option<Method>);

/// [`parse_cases`], also returning the file-level `[device]` and `[method]`.
pub(crate) fn parse_file(path: &Path, text: &str) -> Result<ParsedFile, Error> {
    let file: File = toml::from_str(text).map_err(|e| {
        let (line, col) = e.span().map(|s| line_col(text, s.start)).unwrap_or((1, 1));
        Error::Syntax { path: path.to_path_buf(), line, col, message: e.message().trim().to_string() }
    })?;
    let device: Option<Device> = file_table(path, text, "device", file.device)?;
    let method: Option<Method> = file_table(path, text, "method", file.method)?;
    let headers = case_header_lines(text);
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(file.case.len());
    for (index, v) in file.case.into_iter().enumerate() {
        let line = headers.get(index).copied().unwrap_or(0);
        let id = v.get("id").and_then(|i| i.as_str()).map(str::to_string);
        let bad = |message: String| Error::Case { path: path.to_path_buf(), line, index, id: id.clone(), message };
        let mut c: Case = v.try_into().map_err(|e: toml::de::Error| bad(e.message().trim().to_string()))?;
        if c.id.trim().is_empty() {
            return Err(bad("`id` is empty".into()));
        }
        if !c.value.is_finite() {
            return Err(bad(format!("`value` = {} is not a finite number", c.value)));
        }
        if !seen.insert(c.id.clone()) {
            return Err(bad(format!("duplicate id `{}`", c.id)));
        }
        if c.device.is_none() {
            c.device.clone_from(&device);
        }
        if c.method.is_none() {
            c.method.clone_from(&method);
        }
        c.file = path.to_path_buf();
        c.line = line;
        out.push(c);
    }
    Ok((out, device, method))
}

/// Loads the cases of one reference file.
pub fn load_cases(path: impl AsRef<Path>) -> Result<Vec<Case>, Error> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
    parse_cases(path, &text)
}

/// Loads every `*.toml` file of a reference directory, in file-name order. Ids must be unique
/// across the files.
pub fn load_dir(dir: impl AsRef<Path>) -> Result<Vec<Case>, Error> {
    let dir = dir.as_ref();
    let rd = std::fs::read_dir(dir).map_err(|source| Error::Io { path: dir.to_path_buf(), source })?;
    let mut files: Vec<PathBuf> =
        rd.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "toml")).collect();
    files.sort();
    let mut all: Vec<Case> = Vec::new();
    for f in files {
        for c in load_cases(&f)? {
            if let Some(first) = all.iter().find(|o| o.id == c.id) {
                return Err(Error::Case {
                    path: c.file.clone(),
                    line: c.line,
                    index: 0,
                    id: Some(c.id.clone()),
                    message: format!("duplicate id, first defined at {}", first.location()),
                });
            }
            all.push(c);
        }
    }
    Ok(all)
}

/// Environment variable that overrides [`default_reference_dir`].
pub const REFERENCE_DIR_ENV: &str = "GPUSIM_REFERENCE_DIR";

/// The reference directory: `$GPUSIM_REFERENCE_DIR` when set, else `shared/reference` beside
/// the workspace root (`<workspace>/../shared/reference`), else inside it
/// (`<workspace>/shared/reference`). When none exists, the first candidate is returned (and
/// loading it reports the missing file).
pub fn default_reference_dir() -> PathBuf {
    if let Some(d) = std::env::var_os(REFERENCE_DIR_ENV).filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap_or(Path::new(".")).to_path_buf();
    let candidates = [root.join("../shared/reference"), root.join("shared/reference")];
    candidates.iter().find(|c| c.is_dir()).unwrap_or(&candidates[0]).clone()
}

/// `published.toml` and `measured-h200.toml` of [`default_reference_dir`], in that order.
pub fn load_default() -> Result<Vec<Case>, Error> {
    let dir = default_reference_dir();
    let mut v = load_cases(dir.join("published.toml"))?;
    v.extend(load_cases(dir.join("measured-h200.toml"))?);
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
# comment
[[case]]
id = "a"
kind = "latency"
hardware = "H800 PCIe"
clock_mhz = 1755
level = "L1"
metric = "cycles"
value = 32
trust = "high"
how_read = "raw log"
source = "s"
locator = "l"
brand_new_field = [1, 2]

[[case]]
id = "b"
kind = "warp_speed"
hardware = "X"
metric = "furlongs"
value = 1.5
trust = "low"
how_read = "h"
source = "s"
locator = "l"
"#;

    #[test]
    fn reference_files_parse_and_every_case_is_complete() {
        let dir = default_reference_dir();
        for f in ["published.toml", "measured-h200.toml"] {
            let cases = load_cases(dir.join(f)).unwrap_or_else(|e| panic!("{e}"));
            assert!(!cases.is_empty(), "{f}: no cases");
            for c in &cases {
                assert!(!c.id.is_empty(), "{}", c.location());
                assert!(!c.kind.as_str().is_empty(), "{}", c.location());
                assert!(!matches!(c.kind, Kind::Other(_)), "{}: unknown kind {}", c.location(), c.kind);
                assert!(c.value.is_finite(), "{}", c.location());
                assert!(c.line > 0, "{}", c.id);
                assert!(!c.source.is_empty() && !c.locator.is_empty() && !c.how_read.is_empty(), "{}", c.id);
            }
        }
        let all = load_default().unwrap();
        assert!(all.iter().filter(|c| c.kind == Kind::Latency).count() >= 20);
        assert!(all.iter().any(|c| c.id == "bw-h200-d2d-copy" && c.trust == Trust::Medium));
        let l2 = all.iter().find(|c| c.id == "bw-a100-l2-rrze").unwrap();
        assert_eq!(l2.footprint_bytes(), Some(16896 << 10));
        assert_eq!(l2.metric, Metric::Gbps);
        let l1 = all.iter().find(|c| c.id == "lat-h800pcie-l1-hpmll").unwrap();
        assert_eq!((l1.clock_mhz, l1.value, l1.trust), (Some(1755.0), 32.1, Trust::High));
        // A case's line is its header's.
        let text = std::fs::read_to_string(dir.join("published.toml")).unwrap();
        let line = text.lines().nth(l1.line - 1).unwrap();
        assert_eq!(line.trim(), "[[case]]");
        assert!(text.lines().nth(l1.line).unwrap().contains("lat-h800pcie-l1-hpmll"));
    }

    #[test]
    fn unknown_fields_and_kinds_are_kept() {
        let cases = parse_cases(Path::new("t.toml"), MINIMAL).unwrap();
        assert_eq!(cases.len(), 2);
        assert_eq!(cases[0].line, 3);
        assert_eq!(cases[0].value, 32.0);
        assert_eq!(cases[0].clock_mhz, Some(1755.0));
        assert!(cases[0].extra.contains_key("brand_new_field"));
        assert_eq!(cases[1].kind, Kind::Other("warp_speed".into()));
        assert_eq!(cases[1].metric, Metric::Other("furlongs".into()));
        assert_eq!(cases[1].line, 17);
        assert_eq!(Trust::High.weight(), 1.0);
        assert!(Trust::Low.weight() < Trust::Medium.weight());
    }

    #[test]
    fn errors_name_file_and_line() {
        let e = parse_cases(Path::new("bad.toml"), "[[case]]\nid = \"x\"\nvalue = = 3\n").unwrap_err();
        assert!(e.to_string().starts_with("bad.toml:3:"), "{e}");

        let missing = MINIMAL.replace("trust = \"low\"\n", "");
        let e = parse_cases(Path::new("m.toml"), &missing).unwrap_err().to_string();
        assert!(e.starts_with("m.toml:17: case #1 `b`") && e.contains("trust"), "{e}");

        let bad_trust = MINIMAL.replace("trust = \"low\"", "trust = \"sure\"");
        let e = parse_cases(Path::new("t.toml"), &bad_trust).unwrap_err().to_string();
        assert!(e.contains("t.toml:17") && e.contains("sure"), "{e}");

        let dup = MINIMAL.replace("id = \"b\"", "id = \"a\"");
        let e = parse_cases(Path::new("d.toml"), &dup).unwrap_err().to_string();
        assert!(e.contains("d.toml:17") && e.contains("duplicate"), "{e}");

        let e = load_cases("/nonexistent/ref.toml").unwrap_err().to_string();
        assert!(e.contains("/nonexistent/ref.toml"), "{e}");
    }
}

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
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::measurement::{Device, Method};

/// What a case measures (`kind`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Latency,
    Bandwidth,
    Peak,
    Gemm,
    Attention,
    Moe,
    SimAccuracy,
    /// A kind this crate does not know yet, kept as written.
    Other(String),
}

impl Kind {
    pub fn as_str(&self) -> &str {
        match self {
            Kind::Latency => "latency",
            Kind::Bandwidth => "bandwidth",
            Kind::Peak => "peak",
            Kind::Gemm => "gemm",
            Kind::Attention => "attention",
            Kind::Moe => "moe",
            Kind::SimAccuracy => "sim_accuracy",
            Kind::Other(s) => s,
        }
    }
}

impl From<String> for Kind {
    fn from(s: String) -> Kind {
        match s.as_str() {
            "latency" => Kind::Latency,
            "bandwidth" => Kind::Bandwidth,
            "peak" => Kind::Peak,
            "gemm" => Kind::Gemm,
            "attention" => Kind::Attention,
            "moe" => Kind::Moe,
            "sim_accuracy" => Kind::SimAccuracy,
            _ => Kind::Other(s),
        }
    }
}

impl<'de> Deserialize<'de> for Kind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Kind, D::Error> {
        String::deserialize(d).map(Kind::from)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How far a case can be trusted (`trust`); errors against it are weighted by [`Trust::weight`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Trust {
    High,
    Medium,
    Low,
}

impl Trust {
    /// Weight of an error against a case of this trust: 1, 0.5, 0.25.
    pub fn weight(self) -> f64 {
        match self {
            Trust::High => 1.0,
            Trust::Medium => 0.5,
            Trust::Low => 0.25,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Trust::High => "high",
            Trust::Medium => "medium",
            Trust::Low => "low",
        }
    }
}

impl fmt::Display for Trust {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The unit of `value` (`metric`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Metric {
    /// SM clock cycles.
    Cycles,
    /// 1e9 bytes per second.
    Gbps,
    /// 2^30 bytes per second.
    Gibps,
    /// 1e12 FLOP per second.
    Tflops,
    /// Microseconds.
    Us,
    FlopsPerClkPerSm,
    BytesPerClkPerSm,
    Other(String),
}

impl Metric {
    pub fn as_str(&self) -> &str {
        match self {
            Metric::Cycles => "cycles",
            Metric::Gbps => "gbps",
            Metric::Gibps => "gibps",
            Metric::Tflops => "tflops",
            Metric::Us => "us",
            Metric::FlopsPerClkPerSm => "flops_per_clk_per_sm",
            Metric::BytesPerClkPerSm => "bytes_per_clk_per_sm",
            Metric::Other(s) => s,
        }
    }
}

impl From<String> for Metric {
    fn from(s: String) -> Metric {
        match s.as_str() {
            "cycles" => Metric::Cycles,
            "gbps" => Metric::Gbps,
            "gibps" => Metric::Gibps,
            "tflops" => Metric::Tflops,
            "us" => Metric::Us,
            "flops_per_clk_per_sm" => Metric::FlopsPerClkPerSm,
            "bytes_per_clk_per_sm" => Metric::BytesPerClkPerSm,
            _ => Metric::Other(s),
        }
    }
}

impl<'de> Deserialize<'de> for Metric {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Metric, D::Error> {
        String::deserialize(d).map(Metric::from)
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One `[[case]]`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct Case {
    pub id: String,
    pub kind: Kind,
    /// The part exactly as the source states it ("A100 80GB", "H800 PCIe", ...).
    pub hardware: String,
    /// SM clock during the measurement, where the source states it.
    #[serde(default)]
    pub clock_mhz: Option<f64>,
    pub metric: Metric,
    pub value: f64,
    /// Raw FLOP/s where the source gives them beside the rounded value.
    #[serde(default)]
    pub value_raw_flops_per_s: Option<f64>,

    // Shape fields (which ones a case has depends on its kind).
    /// Memory level or unit measured (`L1`, `L2`, `L2-far`, `DRAM`, `TMA load, DRAM`, ...).
    #[serde(default)]
    pub level: Option<String>,
    /// Data-set size in kB (1024 bytes, as the RRZE benchmarks count).
    #[serde(default)]
    pub footprint_kb: Option<f64>,
    /// Which kernel of a benchmark (`read`, `triad`, `init`).
    #[serde(default)]
    pub kernel: Option<String>,
    #[serde(default)]
    pub dtype: Option<String>,
    #[serde(default)]
    pub layout: Option<String>,
    #[serde(default)]
    pub m: Option<u64>,
    #[serde(default)]
    pub n: Option<u64>,
    #[serde(default)]
    pub k: Option<u64>,
    #[serde(default)]
    pub batch: Option<u64>,
    #[serde(default)]
    pub heads: Option<u64>,
    #[serde(default)]
    pub seqlen: Option<u64>,
    #[serde(default)]
    pub headdim: Option<u64>,
    #[serde(default)]
    pub causal: Option<bool>,
    /// `fwd`, `bwd`, `fwd_bwd` (attention).
    #[serde(default)]
    pub direction: Option<String>,
    /// The implementation that produced the number (FlashAttention-2, cuBLAS, ...).
    #[serde(default, rename = "impl")]
    pub implementation: Option<String>,
    #[serde(default)]
    pub experts: Option<u64>,
    #[serde(default)]
    pub topk: Option<u64>,
    #[serde(default)]
    pub tokens: Option<u64>,
    #[serde(default)]
    pub tokens_per_expert: Option<u64>,
    #[serde(default)]
    pub hidden: Option<u64>,
    #[serde(default)]
    pub memory_gbps: Option<f64>,

    // Provenance.
    pub source: String,
    pub locator: String,
    pub how_read: String,
    pub trust: Trust,
    #[serde(default)]
    pub notes: Option<String>,

    /// The GPU and its clocks during the measurement: the case's own `[case.device]`, else the
    /// file's `[device]` (measurement files; `None` for published figures).
    #[serde(default)]
    pub device: Option<Device>,
    /// How the number was measured: the case's own `[case.method]`, else the file's `[method]`.
    #[serde(default)]
    pub method: Option<Method>,

    /// Fields the schema above does not name, as written.
    #[serde(flatten)]
    pub extra: BTreeMap<String, toml::Value>,

    /// File the case was read from (set by [`load_cases`]).
    #[serde(skip)]
    pub file: PathBuf,
    /// Line of its `[[case]]` header (1-based; set by [`load_cases`]).
    #[serde(skip)]
    pub line: usize,
}

impl Case {
    /// A case with its identity and value and every optional field empty: `trust` high,
    /// `hardware`, `source`, `locator` and `how_read` empty for the caller to set. For readers of
    /// other formats (measurement files, Nsight Compute exports).
    pub fn new(id: impl Into<String>, kind: Kind, metric: Metric, value: f64) -> Case {
        Case {
            id: id.into(),
            kind,
            hardware: String::new(),
            clock_mhz: None,
            metric,
            value,
            value_raw_flops_per_s: None,
            level: None,
            footprint_kb: None,
            kernel: None,
            dtype: None,
            layout: None,
            m: None,
            n: None,
            k: None,
            batch: None,
            heads: None,
            seqlen: None,
            headdim: None,
            causal: None,
            direction: None,
            implementation: None,
            experts: None,
            topk: None,
            tokens: None,
            tokens_per_expert: None,
            hidden: None,
            memory_gbps: None,
            source: String::new(),
            locator: String::new(),
            how_read: String::new(),
            trust: Trust::High,
            notes: None,
            device: None,
            method: None,
            extra: BTreeMap::new(),
            file: PathBuf::new(),
            line: 0,
        }
    }

    /// `file:line` of the case's `[[case]]` header.
    pub fn location(&self) -> String {
        format!("{}:{}", self.file.display(), self.line)
    }

    /// The footprint in bytes (`footprint_kb · 1024`).
    pub fn footprint_bytes(&self) -> Option<u64> {
        self.footprint_kb.map(|kb| (kb * 1024.0).round() as u64)
    }
}

/// Why reference data could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{}: cannot read: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{}:{line}:{col}: {message}", path.display())]
    Syntax { path: PathBuf, line: usize, col: usize, message: String },
    #[error("{}:{line}: case #{index}{}: {message}", path.display(), id.as_ref().map(|i| format!(" `{i}`")).unwrap_or_default())]
    Case { path: PathBuf, line: usize, index: usize, id: Option<String>, message: String },
}

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

//! The study directory (the contract with `gpusim report`, in the sweep's module docs):
//! `manifest.json`, `points/<id>/<workload>.json` and `results.csv`, every file written
//! atomically (a temporary file in the same folder, synced, then renamed over the name), so a
//! reader or a killed sweep never sees half a file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{CliError, CliResult};

/// `manifest.json`: the study as run, written before any point runs.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    pub schema: u32,
    pub study: String,
    pub base_arch: String,
    pub gpusim_version: String,
    pub git_hash: Option<String>,
    pub params: Vec<ParamEntry>,
    pub cost: Option<CostEntry>,
    /// `WARMUP:MEASURE:TAIL:REWARM` when the study sampled long kernels; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampled: Option<String>,
    pub workloads: Vec<WorkloadEntry>,
    pub points: Vec<PointEntry>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ParamEntry {
    pub key: String,
    #[serde(default)]
    pub unit: String,
    #[serde(default)]
    pub description: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct CostEntry {
    pub expr: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct WorkloadEntry {
    pub name: String,
    pub source: String,
    /// The trace's hash: of the file's bytes, or of the generated trace's text on the base chip.
    pub hash: String,
    /// Generated again for each point because the recipe differs between the points' chips.
    #[serde(default)]
    pub per_point: bool,
    /// The workload's FLOPs when known before running; the sweep leaves it `null` (every
    /// point's report has the FLOPs it simulated).
    pub flops: Option<f64>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PointEntry {
    pub index: usize,
    pub id: String,
    pub config_hash: String,
    /// Override text per varied key, as given to `Arch::with_override_str`.
    pub values: BTreeMap<String, String>,
    /// The same values in SI base units (`Arch::value`); text parameters are absent.
    pub numeric: BTreeMap<String, f64>,
    /// The study's cost expression at this point (an addition to the first contract).
    #[serde(default)]
    pub cost: Option<f64>,
}

pub const MANIFEST_SCHEMA: u32 = 1;

/// One finished (point, workload), as `results.csv` shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The key the point file was written under (hash of config, workload, gpusim version).
    pub key: String,
    pub time_us: f64,
    pub tflops: f64,
    pub cycles: u64,
    pub dram_gbps: f64,
    pub bottleneck: String,
    pub bound_pct: f64,
}

fn io_err(path: &Path, what: &str, e: std::io::Error) -> CliError {
    CliError::input(format!("{}: cannot {what}: {e}", path.display()))
}

pub use crate::output::{remove_stale_temporaries, write_atomic};

pub fn manifest_path(dir: &Path) -> PathBuf {
    dir.join("manifest.json")
}

pub fn point_path(dir: &Path, point_id: &str, workload: &str) -> PathBuf {
    dir.join("points").join(point_id).join(format!("{workload}.json"))
}

/// The manifest as written: pretty JSON and a newline.
pub fn manifest_text(m: &Manifest) -> String {
    serde_json::to_string_pretty(m).expect("a manifest encodes") + "\n"
}

pub fn read_manifest(dir: &Path) -> CliResult<(Manifest, String)> {
    let path = manifest_path(dir);
    let text = std::fs::read_to_string(&path).map_err(|e| io_err(&path, "read", e))?;
    let m: Manifest = serde_json::from_str(&text)
        .map_err(|e| CliError::input(format!("{}: not a sweep manifest: {e}", path.display())))?;
    if m.schema != MANIFEST_SCHEMA {
        return Err(CliError::input(format!(
            "{}: manifest schema {} (this gpusim writes {MANIFEST_SCHEMA})",
            path.display(),
            m.schema
        )));
    }
    Ok((m, text))
}

/// A point file's text: `{point, id, workload, key, report}`, `report` exactly the run JSON.
pub fn point_file_text(point: &PointEntry, workload: &str, key: &str, report: &serde_json::Value) -> String {
    let v = serde_json::json!({
        "point": point.index,
        "id": point.id,
        "workload": workload,
        "key": key,
        "report": report,
    });
    // `json!` keeps the keys sorted; write them in the contract's order instead.
    let mut s = String::from("{\n");
    let fields = ["point", "id", "workload", "key", "report"];
    for (i, f) in fields.iter().enumerate() {
        let body = serde_json::to_string_pretty(&v[*f]).expect("JSON encodes").replace('\n', "\n  ");
        s.push_str(&format!("  \"{f}\": {body}{}\n", if i + 1 < fields.len() { "," } else { "" }));
    }
    s.push_str("}\n");
    s
}

/// The row of a point file, or `None` when it is missing, unreadable or of another point.
pub fn read_point(path: &Path, point: &PointEntry, workload: &str) -> Option<Row> {
    let text = std::fs::read_to_string(path).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    if v["point"].as_u64()? as usize != point.index || v["id"] != point.id.as_str() || v["workload"] != workload {
        return None;
    }
    row(v["key"].as_str()?, &v["report"])
}

/// The CSV row's figures from a run report (JSON, docs/report-schema.md).
pub fn row(key: &str, report: &serde_json::Value) -> Option<Row> {
    let (bottleneck, bound_pct) = serde_json::from_value::<crate::report_cmd::view::RunView>(report.clone())
        .map_or_else(|_| ("-".to_string(), 0.0), |v| v.bottleneck());
    let kernels = report["kernels"].as_array()?;
    let dram_bytes: f64 = kernels
        .iter()
        .map(|k| k["memory"]["dram_gbps"].as_f64().unwrap_or(0.0) * k["time_us"].as_f64().unwrap_or(0.0))
        .sum();
    let time_us = report["time_us"].as_f64()?;
    Some(Row {
        key: key.to_string(),
        time_us,
        tflops: report["tflops"].as_f64()?,
        cycles: report["total_cycles"].as_u64()?,
        dram_gbps: if time_us > 0.0 { dram_bytes / time_us } else { 0.0 },
        bottleneck,
        bound_pct,
    })
}

/// `results.csv`: one line per finished (point, workload), by point index then workload order.
/// Columns: `point,id,<each varied key, SI base units>,workload,time_us,tflops,bottleneck`, then
/// `cycles,dram_gbps,bound_pct` and `cost` when the study has one.
pub fn csv(m: &Manifest, rows: &BTreeMap<(usize, usize), Row>) -> String {
    let mut s = String::from("point,id");
    for p in &m.params {
        s.push(',');
        s.push_str(&p.key);
    }
    s.push_str(",workload,time_us,tflops,bottleneck,cycles,dram_gbps,bound_pct");
    if m.cost.is_some() {
        s.push_str(",cost");
    }
    s.push('\n');
    for ((pi, wi), r) in rows {
        let p = &m.points[*pi];
        s.push_str(&format!("{},{}", p.index, p.id));
        for k in &m.params {
            s.push(',');
            match p.numeric.get(&k.key) {
                Some(x) => s.push_str(&x.to_string()),
                None => s.push_str(&p.values.get(&k.key).cloned().unwrap_or_default()),
            }
        }
        s.push_str(&format!(
            ",{},{},{},{},{},{},{}",
            m.workloads[*wi].name, r.time_us, r.tflops, r.bottleneck, r.cycles, r.dram_gbps, r.bound_pct
        ));
        if m.cost.is_some() {
            s.push_str(&format!(",{}", p.cost.map_or(String::new(), |c| c.to_string())));
        }
        s.push('\n');
    }
    s
}

/// The finished rows found in `dir` for `m`'s points and workloads, whatever their key (the
/// caller compares keys).
pub fn finished_rows(dir: &Path, m: &Manifest) -> BTreeMap<(usize, usize), Row> {
    let mut out = BTreeMap::new();
    for p in &m.points {
        for (wi, w) in m.workloads.iter().enumerate() {
            if let Some(r) = read_point(&point_path(dir, &p.id, &w.name), p, &w.name) {
                out.insert((p.index, wi), r);
            }
        }
    }
    out
}

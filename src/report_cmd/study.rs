//! Reading a study directory (the format of docs/study-format.md: `manifest.json` and
//! `points/<id>/<workload>.json`). Point files not yet written are counted as missing, not an
//! error: a report of an unfinished study shows what is there.

use std::path::Path;

use serde::Deserialize;

use super::view::RunView;
use crate::error::{CliError, CliResult};

// The manifest is the sweep's own type: one definition of the study format, written by
// `gpusim sweep` and read here.
pub use crate::sweep::output::{Manifest, ParamEntry as Param};

#[derive(Debug, Deserialize)]
struct PointFile {
    point: usize,
    id: String,
    workload: String,
    report: RunView,
}

/// The manifest schema this reader knows.
pub use crate::sweep::output::MANIFEST_SCHEMA;

/// A study as read: the manifest and each finished (point, workload) run.
pub struct Study {
    pub manifest: Manifest,
    /// `runs[point position][workload position]`, `None` where the file is missing.
    pub runs: Vec<Vec<Option<RunView>>>,
}

impl Study {
    pub fn missing(&self) -> usize {
        self.runs.iter().flatten().filter(|r| r.is_none()).count()
    }
    pub fn total(&self) -> usize {
        self.runs.iter().map(Vec::len).sum()
    }
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> CliResult<T> {
    let text =
        std::fs::read_to_string(path).map_err(|e| CliError::input(format!("{}: cannot read: {e}", path.display())))?;
    serde_json::from_str(&text)
        .map_err(|e| CliError::input(format!("{}:{}:{}: {e}", path.display(), e.line(), e.column())))
}

/// Reads the study in `dir`. Errors (exit 2): no or malformed manifest, an unknown manifest
/// schema, a point file that does not parse or does not belong where it lies.
pub fn load(dir: &Path) -> CliResult<Study> {
    let mpath = dir.join("manifest.json");
    if !mpath.is_file() {
        return Err(CliError::input(format!(
            "{}: not a study directory (no manifest.json; `gpusim sweep STUDY.toml -o DIR` writes one)",
            dir.display()
        )));
    }
    let manifest: Manifest = read_json(&mpath)?;
    if manifest.schema != MANIFEST_SCHEMA {
        return Err(CliError::input(format!(
            "{}: schema {}: this gpusim reads study schema {MANIFEST_SCHEMA}",
            mpath.display(),
            manifest.schema
        )));
    }
    for p in &manifest.params {
        if let Some(pt) = manifest.points.iter().find(|pt| !pt.numeric.contains_key(&p.key)) {
            return Err(CliError::input(format!(
                "{}: point {} has no numeric value for parameter `{}`",
                mpath.display(),
                pt.index,
                p.key
            )));
        }
    }
    let mut runs = Vec::new();
    for pt in &manifest.points {
        let mut row = Vec::new();
        for w in &manifest.workloads {
            let path = dir.join("points").join(&pt.id).join(format!("{}.json", w.name));
            if !path.is_file() {
                row.push(None);
                continue;
            }
            let f: PointFile = read_json(&path)?;
            if f.point != pt.index || f.id != pt.id || f.workload != w.name {
                return Err(CliError::input(format!(
                    "{}: holds point {} `{}` workload `{}`, expected point {} `{}` workload `{}`",
                    path.display(),
                    f.point,
                    f.id,
                    f.workload,
                    pt.index,
                    pt.id,
                    w.name
                )));
            }
            row.push(Some(f.report));
        }
        runs.push(row);
    }
    Ok(Study { manifest, runs })
}

//! `gpusim sweep merge DIR... -o OUT`: joins the directories of a study's shards. They must
//! hold the same manifest (the same study, the same gpusim); every finished point file is copied
//! (atomically) and `results.csv` is written by the same code a sweep uses, so a merge of all
//! shards equals an unsharded run byte for byte.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::output;
use crate::error::{CliError, CliResult};

/// What a merge found.
pub struct Merged {
    pub finished: usize,
    pub total: usize,
}

pub fn merge(dirs: &[PathBuf], out: &Path) -> CliResult<Merged> {
    let Some(first) = dirs.first() else {
        return Err(CliError::input("sweep merge: name at least one study directory"));
    };
    let (m, text) = output::read_manifest(first)?;
    for d in &dirs[1..] {
        let (_, other) = output::read_manifest(d)?;
        if other != text {
            return Err(CliError::input(format!(
                "{}: its manifest differs from {}'s: not shards of the same study (or of another gpusim)",
                d.display(),
                first.display()
            )));
        }
    }
    std::fs::create_dir_all(out.join("points"))
        .map_err(|e| CliError::input(format!("{}: cannot create: {e}", out.display())))?;
    if output::manifest_path(out).exists() && !dirs.iter().any(|d| same_dir(d, out)) {
        let (_, existing) = output::read_manifest(out)?;
        if existing != text {
            return Err(CliError::input(format!("{}: holds another study; choose another -o", out.display())));
        }
    }
    output::write_atomic(&output::manifest_path(out), text.as_bytes())?;
    let mut rows = BTreeMap::new();
    for d in dirs {
        for (pw, row) in output::finished_rows(d, &m) {
            let (p, w) = (&m.points[pw.0], &m.workloads[pw.1]);
            if let Some(prev) = rows.get(&pw) {
                if *prev != row {
                    return Err(CliError::input(format!(
                        "point {} ({}), workload `{}`: two shards hold different results",
                        p.index, p.id, w.name
                    )));
                }
                continue;
            }
            let from = output::point_path(d, &p.id, &w.name);
            let to = output::point_path(out, &p.id, &w.name);
            if from != to {
                let bytes = std::fs::read(&from).map_err(|e| CliError::input(format!("{}: {e}", from.display())))?;
                std::fs::create_dir_all(to.parent().expect("a point file has a folder"))
                    .map_err(|e| CliError::input(format!("{}: {e}", to.display())))?;
                output::write_atomic(&to, &bytes)?;
            }
            rows.insert(pw, row);
        }
    }
    output::write_atomic(&out.join("results.csv"), output::csv(&m, &rows).as_bytes())?;
    Ok(Merged { finished: rows.len(), total: m.points.len() * m.workloads.len() })
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

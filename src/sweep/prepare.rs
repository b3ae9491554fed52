//! Everything a sweep checks and builds before its first point runs: the base chip, every
//! point's chip (all of them, so an impossible chip at point 17 stops the sweep before point 1),
//! the trace files (each read once, shared by all points), the generated workloads (built on
//! every point's chip, which also tells which recipes depend on the chip), and the manifest.

use std::collections::BTreeMap;
use std::sync::Arc;

use gpusim_configs::Arch;
use gpusim_validation::hash::{Fnv64, hash_str, hash_trace};
use rayon::prelude::*;

use super::design::{self, Point};
use super::output::{CostEntry, MANIFEST_SCHEMA, Manifest, ParamEntry, PointEntry, WorkloadEntry};
use super::shared_trace::SharedTrace;
use super::study::{Source, Study};
use crate::error::{CliError, CliResult};

/// A point ready to run.
pub struct PreparedPoint {
    pub arch: Arch,
    /// Per workload: the key its result is stored under.
    pub keys: Vec<String>,
}

/// How a workload's trace is had at run time.
pub enum Input {
    File(Arc<SharedTrace>),
    Generator { generator: &'static gpusim_workloads::registry::Generator, params: Vec<(String, String)> },
}

pub struct Prepared {
    pub manifest: Manifest,
    /// The study's sampling, for every simulation.
    pub sample: Option<gpusim_sim_core::SampleOptions>,
    pub points: Vec<PreparedPoint>,
    pub inputs: Vec<Input>,
}

/// The most invalid points listed in one error.
const MAX_LISTED: usize = 10;

/// Checks and builds `study`. Every failure is bad input (exit 2) and names the study, the
/// point and the key.
pub fn prepare(study: &Study) -> CliResult<Prepared> {
    let sample = study.sample.map(|o| o.to_string());
    let base =
        gpusim_configs::load(&study.arch).map_err(|e| CliError::input(format!("{}: arch: {e}", study.origin)))?;
    let expanded = design::expand(&study.axes, &study.zip, &study.method)
        .map_err(|e| CliError::input(format!("{}: {e}", study.origin)))?;
    if expanded.dropped > 0 {
        eprintln!(
            "note: {}: {} of the latin hypercube's samples repeat earlier ones (discrete axes) and are dropped",
            study.origin, expanded.dropped
        );
    }
    let points = expanded.points;
    // Every point's chip, in parallel; every failure listed (up to MAX_LISTED).
    let over = base.override_base().map_err(|e| CliError::input(format!("{}: arch: {e}", study.origin)))?;
    let archs: Vec<Result<Arch, String>> = points
        .par_iter()
        .map(|p| {
            let pairs: Vec<(&str, &str)> = p.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            over.apply_str(&pairs).map_err(|e| e.to_string())
        })
        .collect();
    let bad: Vec<String> = archs
        .iter()
        .enumerate()
        .filter_map(|(i, a)| a.as_ref().err().map(|e| format!("  point {i} ({}): {e}", design::show(&points[i]))))
        .collect();
    if !bad.is_empty() {
        return Err(invalid(study, points.len(), &bad, "an impossible chip"));
    }
    let archs: Vec<Arch> = archs.into_iter().map(|a| a.expect("checked")).collect();

    let mut inputs = Vec::new();
    let mut entries = Vec::new();
    // Per workload, per point: the trace's hash.
    let mut hashes: Vec<Vec<String>> = Vec::new();
    for w in &study.workloads {
        let wl = |e: String| CliError::input(format!("{}: workload `{}`: {e}", study.origin, w.name));
        match &w.source {
            Source::Trace(path) => {
                let (trace, diags) = SharedTrace::read(path).map_err(|e| wl(e.to_string()))?;
                for d in diags {
                    eprintln!("{d}");
                }
                let hash = hash_path(path).map_err(wl)?;
                hashes.push(vec![hash.clone(); points.len()]);
                entries.push(WorkloadEntry {
                    name: w.name.clone(),
                    source: w.source_text(),
                    hash,
                    per_point: false,
                    flops: None,
                });
                inputs.push(Input::File(Arc::new(trace)));
            }
            Source::Generator { generator, params } => {
                let g = gpusim_workloads::registry::find(generator).map_err(|e| wl(e.to_string()))?;
                let base_trace = g.generate(params, &base).map_err(|e| wl(e.to_string()))?.trace;
                let base_hash = hash_trace(&base_trace).map_err(wl)?;
                let per: Vec<Result<String, String>> =
                    archs.par_iter().map(|a| generated_hash(g, params, a, &base_trace, &base_hash)).collect();
                let bad: Vec<String> = per
                    .iter()
                    .enumerate()
                    .filter_map(|(i, h)| {
                        h.as_ref().err().map(|e| format!("  point {i} ({}): {e}", design::show(&points[i])))
                    })
                    .collect();
                if !bad.is_empty() {
                    return Err(invalid(study, points.len(), &bad, &format!("workload `{}` cannot be built", w.name)));
                }
                let per: Vec<String> = per.into_iter().map(|h| h.expect("checked")).collect();
                let per_point = per.iter().any(|h| *h != base_hash);
                entries.push(WorkloadEntry {
                    name: w.name.clone(),
                    source: w.source_text(),
                    hash: base_hash,
                    per_point,
                    flops: None,
                });
                hashes.push(per);
                inputs.push(Input::Generator { generator: g, params: params.clone() });
            }
        }
    }

    let version = env!("CARGO_PKG_VERSION");
    let mut point_entries = Vec::new();
    let mut prepared = Vec::new();
    for (i, (p, arch)) in points.iter().zip(archs).enumerate() {
        let config_hash = hash_str(&gpusim_configs::to_toml(&arch));
        let numeric: BTreeMap<String, f64> =
            p.iter().filter_map(|(k, _)| arch.value(k).map(|x| (k.clone(), x))).collect();
        let cost = match &study.cost {
            None => None,
            Some((text, e)) => Some(
                e.eval(&|k| arch.value(k))
                    .map_err(|err| CliError::input(format!("{}: cost `{text}` at point {i}: {err}", study.origin)))?,
            ),
        };
        let keys = hashes.iter().map(|h| result_key(&config_hash, &h[i], version, sample.as_deref())).collect();
        point_entries.push(PointEntry {
            index: i,
            id: point_id(p),
            config_hash,
            values: p.iter().cloned().collect(),
            numeric,
            cost,
        });
        prepared.push(PreparedPoint { arch, keys });
    }
    let git = crate::correlate_cmd::git_hash();
    let manifest = Manifest {
        schema: MANIFEST_SCHEMA,
        study: study.name.clone(),
        base_arch: base.name.clone(),
        gpusim_version: version.to_string(),
        git_hash: (git != "unknown").then_some(git),
        params: study
            .axes
            .iter()
            .map(|a| {
                let info = gpusim_configs::param(&a.key);
                ParamEntry {
                    key: a.key.clone(),
                    unit: info.as_ref().map_or(String::new(), |i| i.unit.to_string()),
                    description: info.map_or(String::new(), |i| i.description),
                }
            })
            .collect(),
        cost: study.cost.as_ref().map(|(t, _)| CostEntry { expr: t.clone() }),
        sampled: sample.clone(),
        workloads: entries,
        points: point_entries,
    };
    Ok(Prepared { manifest, sample: study.sample, points: prepared, inputs })
}

fn invalid(study: &Study, total: usize, bad: &[String], what: &str) -> CliError {
    let mut msg = format!("{}: {} of {total} point(s) give {what}; nothing was run:\n", study.origin, bad.len());
    for line in bad.iter().take(MAX_LISTED) {
        msg.push_str(line);
        msg.push('\n');
    }
    if bad.len() > MAX_LISTED {
        msg.push_str(&format!("  ... and {} more\n", bad.len() - MAX_LISTED));
    }
    CliError::input(msg.trim_end().to_string())
}

/// A point's id: the hash of its `key=value` lines (so the same values give the same folder).
pub fn point_id(p: &Point) -> String {
    let mut h = Fnv64::default();
    for (k, v) in p {
        h.update(format!("{k}={v}\n").as_bytes());
    }
    h.hex()
}

/// What a stored result is valid for: the chip, the trace and the simulator's version.
pub fn result_key(config_hash: &str, workload_hash: &str, version: &str, sample: Option<&str>) -> String {
    // A sampled result is another result: its own key (a detailed study's keys are unchanged).
    let sample = sample.map_or(String::new(), |s| format!("sample {s}\n"));
    hash_str(&format!("config {config_hash}\nworkload {workload_hash}\ngpusim {version}\n{sample}"))
}

/// The hash of the trace `g` generates for `arch`. A trace equal to the base chip's (most
/// points of most studies: the swept parameter does not change the recipe's choices) has the
/// base's hash without writing its text again: equal traces write equal text. That is what
/// made a `--dry-run` of many points spend three quarters of its time formatting traces.
fn generated_hash(
    g: &gpusim_workloads::registry::Generator,
    params: &[(String, String)],
    arch: &Arch,
    base_trace: &gpusim_isa::Trace,
    base_hash: &str,
) -> Result<String, String> {
    let t = g.generate(params, arch).map_err(|e| e.to_string())?;
    if t.trace == *base_trace { Ok(base_hash.to_string()) } else { hash_trace(&t.trace) }
}

/// The hash of a trace file's bytes (of every file, by name, in a trace folder).
fn hash_path(path: &std::path::Path) -> Result<String, String> {
    let mut h = Fnv64::default();
    let mut files = vec![path.to_path_buf()];
    if path.is_dir() {
        let mut entries: Vec<_> = std::fs::read_dir(path)
            .map_err(|e| format!("{}: {e}", path.display()))?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_file())
            .collect();
        entries.sort();
        files = entries;
    }
    for f in files {
        let bytes = std::fs::read(&f).map_err(|e| format!("{}: {e}", f.display()))?;
        if path.is_dir() {
            h.update(f.file_name().map_or(&[][..], |n| n.as_encoded_bytes()));
        }
        h.update(&bytes);
    }
    Ok(h.hex())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_keys_depend_on_what_they_name() {
        let a = vec![("sm.count".to_string(), "66".to_string())];
        let b = vec![("sm.count".to_string(), "132".to_string())];
        assert_eq!(point_id(&a), point_id(&a.clone()));
        assert_ne!(point_id(&a), point_id(&b));
        assert_eq!(point_id(&a).len(), 16);
        let k = result_key("c", "w", "0.1.0", None);
        assert_ne!(k, result_key("c", "w", "0.1.1", None));
        assert_ne!(k, result_key("c2", "w", "0.1.0", None));
        assert_ne!(k, result_key("c", "w2", "0.1.0", None));
        assert_ne!(k, result_key("c", "w", "0.1.0", Some("2:4:1:1")));
    }

    /// The shortcut for a trace equal to the base chip's never changes a hash: on a point whose
    /// chip changes the recipe's grid (the SM count of a persistent GEMM) and on one whose chip
    /// does not change the trace (HBM bandwidth), the hash is the regenerated trace's own.
    #[test]
    fn a_point_hashes_as_its_own_trace() {
        let g = gpusim_workloads::registry::find("gemm").unwrap();
        let params: Vec<(String, String)> =
            [("m", "2048"), ("n", "2048"), ("k", "1024")].iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let base = gpusim_configs::load_preset("h100-sxm5-80gb").unwrap();
        let base_trace = g.generate(&params, &base).unwrap().trace;
        let base_hash = hash_trace(&base_trace).unwrap();
        let over = base.override_base().unwrap();
        let mut differs = 0;
        for point in [[("sm.count", "66")], [("hbm.bandwidth", "\"8 TB/s\"")]] {
            let arch = over.apply_str(&point).unwrap();
            let own = hash_trace(&g.generate(&params, &arch).unwrap().trace).unwrap();
            assert_eq!(generated_hash(g, &params, &arch, &base_trace, &base_hash).unwrap(), own, "{point:?}");
            differs += (own != base_hash) as u32;
        }
        assert_eq!(differs, 1, "the SM count changes the persistent grid, the HBM bandwidth nothing");
    }
}

//! Running a prepared sweep into its directory: the shard's unfinished (point, workload) pairs
//! in parallel (rayon), each result written atomically as it finishes and `results.csv`
//! rewritten after it, so at any moment (a SIGKILL included) the directory holds only whole
//! results and a CSV that lists exactly finished ones. A result whose file holds the key the
//! point would be stored under now is skipped: rerunning resumes.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;

use gpusim_isa::MemTraceSource;
use gpusim_sim_core::{Report, SimOptions, simulate};
use indicatif::{ProgressBar, ProgressStyle};
use rayon::prelude::*;

use super::output::{self, Manifest, Row};
use super::prepare::{Input, Prepared};
use super::shard::Shard;
use crate::error::{CliError, CliResult};
use crate::interrupt::Interrupt;

/// What a run did.
pub struct Summary {
    /// (point, workload) pairs of the shard.
    pub total: usize,
    /// Already finished before this run.
    pub skipped: usize,
    /// Finished by this run.
    pub ran: usize,
    /// Failed: the message of each.
    pub failed: Vec<String>,
    /// The exit code of the signal that stopped the run (130, 143).
    pub interrupted: Option<i32>,
}

/// Runs `prep`'s points of `shard` into `dir` with `threads` threads (`None`: rayon's default,
/// which honours RAYON_NUM_THREADS).
pub fn run(
    prep: &Prepared,
    dir: &Path,
    shard: Shard,
    threads: Option<usize>,
    interrupt: &Interrupt,
) -> CliResult<Summary> {
    let m = &prep.manifest;
    std::fs::create_dir_all(dir.join("points"))
        .map_err(|e| CliError::input(format!("{}: cannot create: {e}", dir.display())))?;
    check_same_study(dir, m)?;
    output::remove_stale_temporaries(dir);
    for p in &m.points {
        output::remove_stale_temporaries(&dir.join("points").join(&p.id));
    }
    output::write_atomic(&output::manifest_path(dir), output::manifest_text(m).as_bytes())?;

    // Results already there, for the points' current keys; stale ones are run again.
    let mut rows = output::finished_rows(dir, m);
    rows.retain(|&(pi, wi), r| r.key == prep.points[pi].keys[wi]);
    let mut tasks = Vec::new();
    let mut total = 0;
    for p in m.points.iter().filter(|p| shard.contains(p.index)) {
        for wi in 0..m.workloads.len() {
            total += 1;
            if !rows.contains_key(&(p.index, wi)) {
                tasks.push((p.index, wi));
            }
        }
    }
    let skipped = total - tasks.len();
    write_csv(dir, m, &rows)?;

    let rows = Mutex::new(rows);
    let failed = Mutex::new(Vec::new());
    let bar = progress(tasks.len());
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads.unwrap_or(0))
        .build()
        .map_err(|e| CliError::input(format!("--threads: {e}")))?;
    let ran = std::sync::atomic::AtomicUsize::new(0);
    pool.install(|| {
        tasks.par_iter().with_max_len(1).for_each(|&(pi, wi)| {
            if interrupt.signal().is_some() {
                return;
            }
            let p = &m.points[pi];
            let w = &m.workloads[wi];
            bar.set_message(format!("point {pi} ({}) {}", p.id, w.name));
            let done = simulate_one(prep, pi, wi, interrupt.stop_flag()).and_then(|report| {
                let key = &prep.points[pi].keys[wi];
                let json = serde_json::to_value(&report).map_err(|e| format!("cannot encode the report: {e}"))?;
                let path = output::point_path(dir, &p.id, &w.name);
                std::fs::create_dir_all(path.parent().expect("a point file has a folder"))
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                let text = output::point_file_text(p, &w.name, key, &json);
                output::write_atomic(&path, text.as_bytes()).map_err(|e| e.message)?;
                // The row from the text as written, parsed as a resumed run or a merge parses
                // it (serde_json's float parsing may differ from the value in the last bit), so
                // results.csv is the same bytes however the results came together.
                let written: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
                let row = output::row(key, &written["report"]).ok_or("the report lacks time_us, tflops or kernels")?;
                let mut rows = rows.lock().expect("no panic holds the lock");
                rows.insert((pi, wi), row);
                write_csv(dir, m, &rows).map_err(|e| e.message)
            });
            match done {
                Ok(()) => {
                    ran.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                // Stopped part-way by the signal: not a result and not a failure; a rerun does it.
                Err(_) if interrupt.signal().is_some() => {}
                Err(e) => failed.lock().expect("no panic holds the lock").push(format!(
                    "point {pi} ({}), workload `{}`: {e}",
                    super::design::show(&p.values.iter().map(|(k, v)| (k.clone(), v.clone())).collect::<Vec<_>>()),
                    w.name
                )),
            }
            bar.inc(1);
        });
    });
    bar.finish_and_clear();
    let mut failed = failed.into_inner().expect("no panic holds the lock");
    failed.sort();
    Ok(Summary { total, skipped, ran: ran.into_inner(), failed, interrupted: interrupt.exit_code() })
}

/// Simulates workload `wi` at point `pi`; a signal stops it part-way (`stop`).
fn simulate_one(
    prep: &Prepared,
    pi: usize,
    wi: usize,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Result<Report, String> {
    let arch = &prep.points[pi].arch;
    let opts = SimOptions { stop: Some(stop), sample: prep.sample, ..SimOptions::default() };
    let res = match &prep.inputs[wi] {
        Input::File(t) => simulate(arch, &mut t.source(), &opts),
        Input::Generator { generator, params } => {
            let g = generator.generate(params, arch).map_err(|e| e.to_string())?;
            simulate(arch, &mut MemTraceSource::new(g.trace), &opts)
        }
    };
    res.map_err(|e| e.to_string())
}

fn write_csv(dir: &Path, m: &Manifest, rows: &BTreeMap<(usize, usize), Row>) -> CliResult {
    output::write_atomic(&dir.join("results.csv"), output::csv(m, rows).as_bytes())
}

/// A directory may be resumed only by the study that made it: the same points and workloads.
fn check_same_study(dir: &Path, m: &Manifest) -> CliResult {
    if !output::manifest_path(dir).exists() {
        return Ok(());
    }
    let (old, _) = output::read_manifest(dir)?;
    let ids = |m: &Manifest| m.points.iter().map(|p| p.id.clone()).collect::<Vec<_>>();
    let names = |m: &Manifest| m.workloads.iter().map(|w| w.name.clone()).collect::<Vec<_>>();
    if ids(&old) != ids(m) || names(&old) != names(m) {
        return Err(CliError::input(format!(
            "{}: holds the results of another study (`{}`: other points or workloads); choose another -o",
            dir.display(),
            old.study
        )));
    }
    Ok(())
}

/// done/total, elapsed, ETA and the current point on stderr; indicatif draws nothing when
/// stderr is not a terminal.
fn progress(len: usize) -> ProgressBar {
    let bar = ProgressBar::new(len as u64);
    bar.set_style(
        ProgressStyle::with_template("{pos}/{len} [{bar:30}] {elapsed} elapsed, ETA {eta}  {wide_msg}")
            .expect("the template is valid")
            .progress_chars("=> "),
    );
    bar
}

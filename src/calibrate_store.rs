//! `gpusim calibrate --resume DIR`: the calibration's finished simulations, one file each, so
//! that a fit stopped by Ctrl-C, SIGKILL or the end of a session resumes where it stopped.
//!
//! Layout: `DIR/build.json` (the gpusim version and model hash that wrote the results, checked
//! on every resume: a result depends on the model's code, which the keys do not see; the hash
//! is of the model's sources, build.rs, so commits that change only the CLI, docs or tests
//! resume, and uncommitted model changes do not) and
//! `DIR/sims/<key>.json`, one per simulation, each written atomically ([`write_atomic`]), so a
//! killed run leaves whole files or none. A result is kept only once its simulation finished;
//! an interrupted one is never written.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use gpusim_validation::calibrate::SimStore;
use serde::{Deserialize, Serialize};

use crate::error::{CliError, CliResult};
use crate::output::write_atomic;

#[derive(Serialize, Deserialize, Debug)]
struct Build {
    gpusim_version: String,
    /// `GPUSIM_MODEL_HASH` (build.rs): what must match.
    #[serde(default)]
    model_hash: String,
    /// The commit of the build that began the directory: for a reader only.
    git_hash: String,
}

impl Build {
    fn same_model(&self, other: &Build) -> bool {
        self.gpusim_version == other.gpusim_version && self.model_hash == other.model_hash
    }
}

/// One kept simulation.
#[derive(Serialize, Deserialize)]
struct Kept {
    /// Which simulation (the candidate's config hash and the case's job), for a reader.
    what: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    value: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

#[derive(Debug)]
pub struct DirStore {
    sims: PathBuf,
    /// Set once a result could not be written (said once on stderr).
    warned: AtomicBool,
}

impl DirStore {
    /// Opens `dir` (created if missing) for the build `git_hash`; a directory written by another
    /// build is refused.
    pub fn open(dir: &Path, git_hash: &str) -> CliResult<DirStore> {
        let here = Build {
            gpusim_version: env!("CARGO_PKG_VERSION").to_string(),
            model_hash: env!("GPUSIM_MODEL_HASH").to_string(),
            git_hash: git_hash.to_string(),
        };
        let sims = dir.join("sims");
        std::fs::create_dir_all(&sims)
            .map_err(|e| CliError::input(format!("--resume {}: cannot create: {e}", dir.display())))?;
        let build = dir.join("build.json");
        if build.exists() {
            let text = std::fs::read_to_string(&build)
                .map_err(|e| CliError::input(format!("{}: cannot read: {e}", build.display())))?;
            let old: Build = serde_json::from_str(&text)
                .map_err(|e| CliError::input(format!("{}: not a calibration's build record: {e}", build.display())))?;
            if !old.same_model(&here) {
                let model = |b: &Build| {
                    if b.model_hash.is_empty() {
                        "no model hash".to_string()
                    } else {
                        format!("model {}", b.model_hash)
                    }
                };
                return Err(CliError::input(format!(
                    "--resume {}: holds simulations of another build's model (gpusim {}, {}, begun at commit {}); this is gpusim {}, {}: they are not reused; choose another directory or delete it",
                    dir.display(),
                    old.gpusim_version,
                    model(&old),
                    old.git_hash,
                    here.gpusim_version,
                    model(&here)
                )));
            }
        } else {
            let text = serde_json::to_string_pretty(&here).expect("serialisable") + "\n";
            write_atomic(&build, text.as_bytes())?;
        }
        // A run killed while writing a result leaves its temporary file: the result itself was
        // not kept, and is simulated again.
        crate::output::remove_stale_temporaries(&sims);
        Ok(DirStore { sims, warned: AtomicBool::new(false) })
    }

    fn path(&self, key: &str) -> PathBuf {
        self.sims.join(format!("{key}.json"))
    }
}

impl SimStore for DirStore {
    fn get(&self, key: &str) -> Option<Result<f64, String>> {
        // A file that does not parse (edited by hand) is as good as absent: simulated again and
        // rewritten.
        let k: Kept = serde_json::from_str(&std::fs::read_to_string(self.path(key)).ok()?).ok()?;
        match (k.value, k.error) {
            (Some(v), None) => Some(Ok(v)),
            (None, Some(e)) => Some(Err(e)),
            _ => None,
        }
    }

    fn put(&self, key: &str, what: &str, result: &Result<f64, String>) {
        let k = Kept { what: what.to_string(), value: result.as_ref().ok().copied(), error: result.clone().err() };
        let text = serde_json::to_string_pretty(&k).expect("serialisable") + "\n";
        if let Err(e) = write_atomic(&self.path(key), text.as_bytes())
            && !self.warned.swap(true, Ordering::Relaxed)
        {
            eprintln!("warning: {e}; the calibration goes on, but what it simulates from now on may not be kept");
        }
    }
}

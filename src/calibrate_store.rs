//! `gpusim calibrate --resume DIR`: the calibration's finished simulations, one file each, so
//! that a fit stopped by Ctrl-C, SIGKILL or the end of a session resumes where it stopped.
//!
//! Layout: `DIR/build.json` (the gpusim version and commit that wrote the results, checked on
//! every resume: a result depends on the model's code, which the keys do not see) and
//! `DIR/sims/<key>.json`, one per simulation, each written atomically ([`write_atomic`]), so a
//! killed run leaves whole files or none. A result is kept only once its simulation finished;
//! an interrupted one is never written.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use gpusim_validation::calibrate::SimStore;
use serde::{Deserialize, Serialize};

use crate::error::{CliError, CliResult};
use crate::output::write_atomic;

#[derive(Serialize, Deserialize, PartialEq, Debug)]
struct Build {
    gpusim_version: String,
    git_hash: String,
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
        let here = Build { gpusim_version: env!("CARGO_PKG_VERSION").to_string(), git_hash: git_hash.to_string() };
        let sims = dir.join("sims");
        std::fs::create_dir_all(&sims)
            .map_err(|e| CliError::input(format!("--resume {}: cannot create: {e}", dir.display())))?;
        let build = dir.join("build.json");
        if build.exists() {
            let text = std::fs::read_to_string(&build)
                .map_err(|e| CliError::input(format!("{}: cannot read: {e}", build.display())))?;
            let old: Build = serde_json::from_str(&text)
                .map_err(|e| CliError::input(format!("{}: not a calibration's build record: {e}", build.display())))?;
            if old != here {
                return Err(CliError::input(format!(
                    "--resume {}: holds simulations of gpusim {} ({}), this is gpusim {} ({}): results of another build are not reused; choose another directory or delete it",
                    dir.display(),
                    old.gpusim_version,
                    old.git_hash,
                    here.gpusim_version,
                    here.git_hash
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

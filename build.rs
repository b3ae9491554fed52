//! Records the git commit of the build (`GPUSIM_GIT_HASH`, "unknown" outside a git checkout) for
//! the provenance of correlation reports, and the hash of the model's sources
//! (`GPUSIM_MODEL_HASH`): every file that can change a simulated number (the ISA tables, the
//! configs and presets, sim-core, the workload generators, the case planning of validation and
//! the locked dependency versions). Two builds with the same model hash simulate alike whatever
//! else differs (the CLI, docs, tests, uncommitted changes elsewhere), which is what lets
//! `calibrate --resume` reuse a result across commits and refuse one across model changes.

use std::path::{Path, PathBuf};
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string()).filter(|s| !s.is_empty())
}

/// The folders and files whose contents make the model (see the module doc).
const MODEL_SOURCES: &[&str] =
    &["isa/src", "configs/src", "configs/presets", "sim-core/src", "workloads/src", "validation/src", "Cargo.lock"];

/// Every file under `path` (or `path` itself), sorted.
fn files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        let mut entries: Vec<PathBuf> =
            std::fs::read_dir(path).into_iter().flatten().flatten().map(|e| e.path()).collect();
        entries.sort();
        for e in entries {
            files(&e, out);
        }
    } else if path.is_file() {
        out.push(path.to_path_buf());
    }
}

/// FNV-1a (64 bits) of every model file's path and contents, in path order.
fn model_hash() -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h = (h ^ *b as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for root in MODEL_SOURCES {
        let mut all = Vec::new();
        files(Path::new(root), &mut all);
        for f in all {
            eat(f.to_string_lossy().as_bytes());
            eat(&[0]);
            eat(&std::fs::read(&f).unwrap_or_default());
            eat(&[0]);
        }
        println!("cargo:rerun-if-changed={root}");
    }
    format!("{h:016x}")
}

fn main() {
    println!("cargo:rustc-env=GPUSIM_MODEL_HASH={}", model_hash());
    let hash = git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=GPUSIM_GIT_HASH={hash}");
    // Rerun when HEAD moves: HEAD itself (a checkout), the branch it points at (a commit) and
    // packed refs. Only paths that exist: a missing one would rerun this script on every build.
    let mut watch = vec!["HEAD".to_string(), "packed-refs".to_string()];
    if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watch.push(r);
    }
    for w in watch {
        if let Some(p) = git(&["rev-parse", "--path-format=absolute", "--git-path", &w]).map(PathBuf::from)
            && p.exists()
        {
            println!("cargo:rerun-if-changed={}", p.display());
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}

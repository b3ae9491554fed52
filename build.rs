//! Records the git commit of the build (`GPUSIM_GIT_HASH`, "unknown" outside a git checkout) for
//! the provenance of correlation reports.

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string()).filter(|s| !s.is_empty())
}

fn main() {
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

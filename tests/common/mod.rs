//! Helpers shared by the end-to-end tests of the `gpusim` binary.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root (the examples, fixtures and reference data are found from there).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs the binary under test in the repository root.
pub fn gpusim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gpusim")).args(args).current_dir(root()).output().expect("runs")
}

/// (stdout, stderr) as text.
pub fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// Runs the command, which must succeed; returns (stdout, stderr).
pub fn ok(args: &[&str]) -> (String, String) {
    let o = gpusim(args);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{args:?}\nstdout: {out}\nstderr: {err}");
    (out, err)
}

/// Runs the command, which must exit 2 without panicking, with every needle in stderr.
pub fn fails_with(args: &[&str], needles: &[&str]) {
    let o = gpusim(args);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{args:?}\nstdout: {out}\nstderr: {err}");
    for n in needles {
        assert!(err.contains(n), "{args:?}: `{n}` not in stderr:\n{err}");
    }
    assert!(!err.contains("panicked"), "{err}");
}

/// A fresh, empty directory under the system temp dir, unique to this test process.
pub fn workdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gpusim-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

pub fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

//! Output files: checked before any work starts, written atomically.
//!
//! A run that simulates for minutes must not find out at the end that it cannot write its JSON,
//! and a reader must never see half a file: [`check_writable`] tries the output's folder up
//! front, [`write_atomic`] writes a temporary file beside the target, syncs it and renames it
//! over the target, so the file is either the old one or the whole new one.
//!
//! Only regular files (or paths not there yet) go through a temporary file. Anything else that
//! exists — `/dev/stdout`, a FIFO, a terminal, a symlink to one — is written in place: renaming
//! over it would replace the device or the link with a plain file.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{CliError, CliResult};

/// The temporary file `path` is written through: in the same folder, so the rename is atomic,
/// and unique per process and write, so threads writing at once never share one. Its name
/// (`.NAME.tmp-PID-SEQ`) is what [`remove_stale_temporaries`] recognises.
fn temp_for(path: &Path) -> PathBuf {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let name = path.file_name().map_or("file".into(), |n| n.to_string_lossy().into_owned());
    path.with_file_name(format!(".{name}.tmp-{}-{}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed)))
}

/// Removes the temporary files a killed writer left in `dir`.
pub fn remove_stale_temporaries(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') && name.contains(".tmp-") {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// Whether `path` is written through a temporary file: a regular file, or nothing yet. A
/// symlink counts by what it points at.
fn replaceable(path: &Path) -> bool {
    match std::fs::metadata(path) {
        Ok(m) => m.is_file(),
        Err(_) => std::fs::symlink_metadata(path).is_err(),
    }
}

/// Fails with exit code 2 unless `path` can be written: its folder exists and accepts a new
/// file, and `path` is not a folder. Leaves nothing behind.
pub fn check_writable(path: &Path, what: &str) -> CliResult {
    if path.is_dir() {
        return Err(CliError::input(format!("{what} {}: is a folder, not a file", path.display())));
    }
    if !replaceable(path) {
        // A device, FIFO or terminal: it exists, and is written in place.
        return Ok(());
    }
    let tmp = temp_for(path);
    std::fs::File::create(&tmp)
        .map_err(|e| CliError::input(format!("{what} {}: cannot write there: {e}", path.display())))?;
    let _ = std::fs::remove_file(&tmp);
    Ok(())
}

/// Writes `bytes` to `path` atomically (temporary file, fsync, rename).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> CliResult {
    let err = |e: std::io::Error| CliError::input(format!("{}: cannot write: {e}", path.display()));
    if !replaceable(path) {
        return std::fs::OpenOptions::new().write(true).open(path).and_then(|mut f| f.write_all(bytes)).map_err(err);
    }
    let tmp = temp_for(path);
    let res = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res.map_err(err)
}

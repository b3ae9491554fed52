//! Shared by the test files: a fresh directory under the system's temp dir.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A new, empty directory unique to this process and call; removed by [`TempDir`]'s drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("gpusim-reports-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub const PNG_MAGIC: &[u8] = b"\x89PNG\r\n\x1a\n";

//! Opening a trace by looking at it: gpusim binary (magic `GPUSIMTB`), gpusim text
//! (`gpusim-trace` header), or Accel-Sim (`kernelslist.g`, or a folder holding one).

use std::io::Read;
use std::path::{Path, PathBuf};

use gpusim_isa::{TraceSource, accelsim, binary, text};

use crate::error::{CliError, CliResult};

/// The trace formats the CLI reads.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Format {
    Text,
    Binary,
    AccelSim,
}

/// Decides the format of `path` (a file, or a folder with `kernelslist.g`).
pub fn detect(path: &Path) -> CliResult<(Format, PathBuf)> {
    if path.is_dir() {
        let list = path.join("kernelslist.g");
        if list.is_file() {
            return Ok((Format::AccelSim, list));
        }
        return Err(CliError::input(format!("{}: a folder, and it holds no kernelslist.g", path.display())));
    }
    let mut f =
        std::fs::File::open(path).map_err(|e| CliError::input(format!("{}: cannot open: {e}", path.display())))?;
    let mut head = vec![0u8; 64 * 1024];
    let mut n = 0;
    while n < head.len() {
        match f.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) => return Err(CliError::input(format!("{}: cannot read: {e}", path.display()))),
        }
    }
    let head = &head[..n];
    // (64 KiB is enough to get past any header comment a person writes.)
    if head.starts_with(b"GPUSIMTB") {
        return Ok((Format::Binary, path.to_path_buf()));
    }
    let name = path.file_name().and_then(|s| s.to_str()).unwrap_or("");
    let text_head = String::from_utf8_lossy(head);
    let first = text_head.lines().map(str::trim).find(|l| !l.is_empty() && !l.starts_with('#')).unwrap_or("");
    if first.starts_with("gpusim-trace") {
        return Ok((Format::Text, path.to_path_buf()));
    }
    if name.ends_with(".g") || first.starts_with("MemcpyHtoD") || first.starts_with("kernel-") {
        return Ok((Format::AccelSim, path.to_path_buf()));
    }
    if name.ends_with(".traceg") {
        return Err(CliError::input(format!(
            "{}: an Accel-Sim kernel trace; run its kernelslist.g (or the folder holding it) instead",
            path.display()
        )));
    }
    Err(CliError::input(format!(
        "{}:1:1: not a trace gpusim knows: expected a `gpusim-trace` text header, the `GPUSIMTB` binary magic, or an Accel-Sim kernelslist.g",
        path.display()
    )))
}

/// Opens `path` as a streaming trace source.
pub fn open(path: &Path) -> CliResult<(Format, Box<dyn TraceSource>)> {
    let (fmt, p) = detect(path)?;
    let src: Box<dyn TraceSource> = match fmt {
        Format::Text => Box::new(text::TextReader::open(&p)?),
        Format::Binary => Box::new(binary::BinaryReader::open(&p)?),
        Format::AccelSim => Box::new(accelsim::AccelSimTrace::open(&p)?),
    };
    Ok((fmt, src))
}

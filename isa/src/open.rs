//! The one trace opener: a path is looked at, not judged by its name. gpusim binary (magic
//! `GPUSIMTB`), gpusim text (a `gpusim-trace` header after any comments), or Accel-Sim (a
//! `kernelslist.g`, or a folder holding one).
//!
//! A gpusim trace is read through the handle its first bytes were looked at on: the bytes read
//! to decide go back in front of the rest. So a pipe, a FIFO or `/dev/stdin` works as a trace,
//! and a file is opened once; `-` is standard input. Accel-Sim traces are folders of files,
//! opened by path.
//!
//! Any file (or standard input) compressed with zstd or xz is decompressed as a stream on the
//! way in, recognised by its magic bytes whatever its name ([`decompressed`]): a `.gtb.zst`, a
//! `.trace.xz`, a compressed `kernelslist.g` and the `kernel-N.traceg.xz` files it lists.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use crate::error::{Location, TraceError, TraceErrorKind};
use crate::source::TraceSource;
use crate::{accelsim, binary, text};

/// The trace formats gpusim reads.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Format {
    Text,
    Binary,
    AccelSim,
}

/// Bytes looked at to decide: enough to get past any header comment a person writes.
const HEAD: u64 = 64 * 1024;

/// The zstd frame magic (RFC 8878).
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
/// The xz stream header magic (the .xz file format, section 2.1.1.1).
const XZ_MAGIC: [u8; 6] = [0xfd, b'7', b'z', b'X', b'Z', 0x00];

/// A compression a stream is recognised by.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Compression {
    None,
    Zstd,
    Xz,
}

/// The compression whose magic `head` (a stream's first bytes) starts with.
pub fn compression_of(head: &[u8]) -> Compression {
    if head.starts_with(&ZSTD_MAGIC) {
        Compression::Zstd
    } else if head.starts_with(&XZ_MAGIC) {
        Compression::Xz
    } else {
        Compression::None
    }
}

/// `input` as its decompressed bytes: the first bytes are looked at (and put back) and a zstd or
/// xz stream is decoded as it is read, in bounded memory; anything else passes through. xz input
/// may be several concatenated streams, as `xz` itself accepts.
pub fn decompress(mut input: Box<dyn Read + Send>) -> std::io::Result<Box<dyn Read + Send>> {
    let mut head = Vec::with_capacity(XZ_MAGIC.len());
    (&mut input).take(XZ_MAGIC.len() as u64).read_to_end(&mut head)?;
    let kind = compression_of(&head);
    let whole: Box<dyn Read + Send> = Box::new(std::io::Cursor::new(head).chain(input));
    Ok(match kind {
        Compression::None => whole,
        Compression::Zstd => Box::new(zstd::stream::read::Decoder::new(whole)?),
        Compression::Xz => {
            Box::new(liblzma::read::XzDecoder::new_multi_decoder(BufReader::with_capacity(1 << 16, whole)))
        }
    })
}

/// Opens the file `path` (or standard input for `-`) as its decompressed bytes ([`decompress`]).
/// The one way every reader opens a trace file, the members of a `kernelslist.g` included.
pub fn decompressed(path: &Path) -> std::io::Result<Box<dyn Read + Send>> {
    let f: Box<dyn Read + Send> = if is_stdin(path) { Box::new(std::io::stdin()) } else { Box::new(File::open(path)?) };
    decompress(f)
}

/// The bytes a detection read, followed by the rest of the stream.
pub type Rest = std::io::Chain<std::io::Cursor<Vec<u8>>, Box<dyn Read + Send>>;

/// Whether `path` names standard input (`-`).
pub fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// What [`detect`] found: the format, and for a gpusim trace the open stream.
pub enum Detected {
    /// A gpusim text or binary trace, with its stream (the head already read put back).
    Stream(Format, Rest),
    /// An Accel-Sim trace: the path of its `kernelslist.g`.
    AccelSim(PathBuf),
}

fn io_error(path: &Path, what: &str, e: std::io::Error) -> TraceError {
    let name = path.display().to_string();
    TraceError::new(TraceErrorKind::Io, Location { file: name.clone(), line: 0, col: 0 }, format!("{what}: {e}"))
}

/// Decides the format of `path` (a file, a pipe, or a folder with `kernelslist.g`).
pub fn detect(path: &Path) -> Result<Detected, TraceError> {
    let name = if is_stdin(path) { "<stdin>".to_string() } else { path.display().to_string() };
    let invalid =
        |msg: String| TraceError::new(TraceErrorKind::Invalid, Location { file: name.clone(), line: 1, col: 1 }, msg);
    if !is_stdin(path) && path.is_dir() {
        let list = path.join("kernelslist.g");
        if list.is_file() {
            return Ok(Detected::AccelSim(list));
        }
        return Err(invalid("a folder, and it holds no kernelslist.g".to_string()));
    }
    let mut f: Box<dyn Read + Send> = if is_stdin(path) {
        Box::new(std::io::stdin())
    } else {
        Box::new(File::open(path).map_err(|e| io_error(path, "cannot open", e))?)
    };
    f = decompress(f).map_err(|e| io_error(path, "cannot read", e))?;
    let mut head = Vec::with_capacity(HEAD as usize);
    (&mut f).take(HEAD).read_to_end(&mut head).map_err(|e| io_error(path, "cannot read", e))?;
    let format = if binary::is_binary(&head) {
        Some(Format::Binary)
    } else {
        let text_head = String::from_utf8_lossy(&head);
        let first = text_head.lines().map(str::trim).find(|l| !l.is_empty() && !l.starts_with('#')).unwrap_or("");
        let file = path.file_name().and_then(|s| s.to_str()).unwrap_or("");
        if first.starts_with("gpusim-trace") {
            Some(Format::Text)
        } else if file.ends_with(".g") || first.starts_with("MemcpyHtoD") || first.starts_with("kernel-") {
            if is_stdin(path) {
                return Err(invalid(
                    "an Accel-Sim kernelslist.g names kernel files beside it; give its path, not standard input"
                        .to_string(),
                ));
            }
            return Ok(Detected::AccelSim(path.to_path_buf()));
        } else if file.ends_with(".traceg") || file.contains(".traceg.") {
            return Err(invalid(
                "an Accel-Sim kernel trace; run its kernelslist.g (or the folder holding it) instead".to_string(),
            ));
        } else if head.is_empty() {
            return Err(TraceError::new(
                TraceErrorKind::Truncated,
                Location { file: name.clone(), line: 1, col: 1 },
                "empty input".to_string(),
            ));
        } else {
            None
        }
    };
    match format {
        Some(fmt) => Ok(Detected::Stream(fmt, std::io::Cursor::new(head).chain(f))),
        None => Err(invalid(
            "not a trace gpusim knows: expected a `gpusim-trace` text header, the `GPUSIMTB` binary magic, or an Accel-Sim kernelslist.g"
                .to_string(),
        )),
    }
}

/// How a trace is read: what [`open_with`] takes.
#[derive(Clone, Copy, Debug)]
pub struct ReadOptions {
    /// Parse each Accel-Sim kernel on a thread of its own, ahead of the simulation within a
    /// memory budget ([`accelsim::AccelSimTrace::set_read_ahead`]); the trace read is the same
    /// either way.
    /// Default: where the machine has more than one core.
    pub read_ahead: bool,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions { read_ahead: std::thread::available_parallelism().is_ok_and(|n| n.get() > 1) }
    }
}

/// Opens `path` as a streaming trace source, whatever its format, with the default
/// [`ReadOptions`].
pub fn open(path: &Path) -> Result<(Format, Box<dyn TraceSource>), TraceError> {
    open_with(path, ReadOptions::default())
}

/// Opens `path` as a streaming trace source, whatever its format.
pub fn open_with(path: &Path, opts: ReadOptions) -> Result<(Format, Box<dyn TraceSource>), TraceError> {
    let name = if is_stdin(path) { "<stdin>".to_string() } else { path.display().to_string() };
    Ok(match detect(path)? {
        Detected::Stream(Format::Binary, rest) => {
            (Format::Binary, Box::new(binary::BinaryReader::from_reader(name, BufReader::with_capacity(1 << 16, rest))))
        }
        Detected::Stream(_, rest) => {
            (Format::Text, Box::new(text::TextReader::from_reader(name, BufReader::with_capacity(1 << 16, rest))))
        }
        Detected::AccelSim(list) => {
            let mut trace = accelsim::AccelSimTrace::open(&list)?;
            trace.set_read_ahead(opts.read_ahead);
            (Format::AccelSim, Box::new(trace))
        }
    })
}

/// The file(s) that hold `path`'s trace, for hashing: the file itself for a gpusim trace, the
/// `kernelslist.g` for an Accel-Sim one (whose kernels are the files it lists).
pub fn trace_files(path: &Path) -> Result<(Format, PathBuf), TraceError> {
    Ok(match detect(path)? {
        Detected::Stream(fmt, _) => (fmt, path.to_path_buf()),
        Detected::AccelSim(list) => (Format::AccelSim, list),
    })
}

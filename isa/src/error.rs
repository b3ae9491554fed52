//! Errors of the trace readers: every one names the file, line and column.

use std::fmt;

/// Where in an input something went wrong. `line` and `col` are 1-based; 0 means unknown
/// (binary inputs give a byte offset in `col` and `line` 0).
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct Location {
    pub file: String,
    pub line: u64,
    pub col: u64,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.col) {
            (0, 0) => write!(f, "{}", self.file),
            (0, off) => write!(f, "{}: byte {}", self.file, off),
            (l, c) => write!(f, "{}:{}:{}", self.file, l, c),
        }
    }
}

/// What kind of trace error happened.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum TraceErrorKind {
    /// The file could not be opened or read.
    Io,
    /// Text or bytes that do not follow the format.
    Syntax,
    /// The input ends in the middle of something.
    Truncated,
    /// A well-formed construct this version cannot handle (a future format version, ...).
    Unsupported,
    /// Well-formed but inconsistent (a CTA outside the grid, a missing program, ...).
    Invalid,
}

/// A trace input error with its location.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct TraceError {
    pub kind: TraceErrorKind,
    pub at: Location,
    pub message: String,
}

impl TraceError {
    pub fn new(kind: TraceErrorKind, at: Location, message: impl Into<String>) -> TraceError {
        TraceError { kind, at, message: message.into() }
    }
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.at, self.message)
    }
}

impl std::error::Error for TraceError {}

/// Opens a trace file for buffered reading; a failure is a [`TraceErrorKind::Io`] error that
/// names the file. Returns the name used in error locations and the reader.
pub(crate) fn open_trace_file(
    path: &std::path::Path,
) -> Result<(String, std::io::BufReader<std::fs::File>), TraceError> {
    let name = path.display().to_string();
    match std::fs::File::open(path) {
        Ok(f) => Ok((name, std::io::BufReader::with_capacity(1 << 16, f))),
        Err(e) => Err(TraceError::new(
            TraceErrorKind::Io,
            Location { file: name.clone(), line: 0, col: 0 },
            format!("cannot open `{name}`: {e}"),
        )),
    }
}

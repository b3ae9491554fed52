//! gpusim's own trace format, text form (version 1). The full specification is
//! docs/trace-format.md; in short:
//!
//! ```text
//! gpusim-trace 1
//! kernel "stream_copy"
//!   grid 256 1 1
//!   block 256 1 1
//!   program copy
//!     loop 64
//!       LDG.E.128 R4x4 <- R2x2 addr=0x7f0000000000+512*warp+4096*cta.x+1048576*i0 lanes=16
//!       STG.E.128 <- R8x2 R4x4 addr=0x7f0004000000+512*warp+4096*cta.x+1048576*i0
//!     end
//!     EXIT
//!   end
//!   warps 0..7 copy
//! end
//! ```
//!
//! [`TextReader`] streams: [`TraceSource::next_kernel`] reads a kernel's header, kernel-level
//! programs and default layout; the kernel's [`crate::source::KernelSource::next_cta`] reads
//! `cta` sections only as the CTAs are asked for, so memory stays bounded by one section.
//! [`read_trace`] and [`write_trace`] convert whole traces.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::path::Path;

use crate::error::TraceError;
use crate::kernel::Trace;
use crate::source::{KernelSource, TraceSource};

pub(crate) mod common;
mod inst;
mod lex;
mod param;
mod parse;
pub(crate) mod stream;
mod write;

pub use write::TextWriter;

/// The format version this module reads and writes.
/// Version 2 adds per-CTA parameters, tables and parameter loops; a trace that uses none of
/// them is written as version 1, and readers read both.
pub const VERSION: u32 = 2;
/// The first word of every text trace.
pub const MAGIC: &str = parse::MAGIC;

/// Streaming reader of the text form over any [`BufRead`].
pub struct TextReader<R> {
    inner: stream::Streamer<parse::TextParser<R>>,
}

impl<R: BufRead> TextReader<R> {
    /// A reader over `reader`; `name` is the file name used in error locations.
    pub fn from_reader(name: impl Into<String>, reader: R) -> Self {
        TextReader { inner: stream::Streamer::new(parse::TextParser::new(name.into(), reader)) }
    }

    /// The number of lines read so far (for progress reports).
    pub fn line(&self) -> u64 {
        self.inner.parser().line()
    }
}

impl TextReader<BufReader<File>> {
    /// Opens a file. Errors are [`crate::TraceErrorKind::Io`].
    pub fn open(path: impl AsRef<Path>) -> Result<Self, TraceError> {
        let (name, reader) = crate::error::open_trace_file(path.as_ref())?;
        Ok(TextReader::from_reader(name, reader))
    }
}

impl<R: BufRead> TraceSource for TextReader<R> {
    fn next_kernel(&mut self) -> Result<Option<Box<dyn KernelSource + '_>>, TraceError> {
        self.inner.next_kernel()
    }
}

/// Reads a whole text trace; `name` names it in errors. `cta` section programs are appended to
/// their kernel's `programs` and the sections become `layout.overrides`.
pub fn read_trace(name: &str, text: &str) -> Result<Trace, TraceError> {
    stream::collect(parse::TextParser::new(name.to_string(), text.as_bytes()))
}

/// Writes a whole trace in the text form. Fails with [`io::ErrorKind::InvalidInput`] when a
/// kernel is not well formed (see [`TextWriter::write_kernel`]).
pub fn write_trace<W: Write + ?Sized>(trace: &Trace, out: &mut W) -> io::Result<()> {
    let v = if trace.kernels.iter().any(write::kernel_needs_v2) { VERSION } else { 1 };
    let mut w = TextWriter::with_version(out, v)?;
    for k in &trace.kernels {
        w.write_kernel(k)?;
    }
    w.finish().map(|_| ())
}

/// [`write_trace`] into a string.
pub fn to_string(trace: &Trace) -> io::Result<String> {
    let mut v = Vec::new();
    write_trace(trace, &mut v)?;
    String::from_utf8(v).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

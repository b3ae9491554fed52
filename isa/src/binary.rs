//! gpusim's own trace format, binary form (version 1): the same model as the text form
//! ([`crate::text`]) in LEB128 varints, a few bytes per instruction. The byte layout is specified
//! in docs/trace-format.md.
//!
//! [`BinaryReader`] streams exactly like [`crate::text::TextReader`]: a kernel's record holds its
//! header, opcode table, kernel-level programs and default layout; `cta` section records follow
//! and are read only as their CTAs are asked for.

use std::fs::File;
use std::io::{self, BufReader, Read, Write};
use std::path::Path;

use crate::error::TraceError;
use crate::kernel::Trace;
use crate::source::{KernelSource, TraceSource};
use crate::text::stream;

mod format;
mod read;
mod write;

pub use format::{MAGIC, VERSION};
pub use write::BinaryWriter;

/// Streaming reader of the binary form over any [`Read`] (buffer it: the reader reads byte by
/// byte; [`BinaryReader::open`] does).
pub struct BinaryReader<R> {
    inner: stream::Streamer<read::BinParser<R>>,
}

impl<R: Read> BinaryReader<R> {
    /// A reader over `reader`; `name` is the file name used in error locations.
    pub fn from_reader(name: impl Into<String>, reader: R) -> Self {
        BinaryReader { inner: stream::Streamer::new(read::BinParser::new(name.into(), reader)) }
    }

    /// The number of bytes read so far (for progress reports).
    pub fn offset(&self) -> u64 {
        self.inner.parser().offset()
    }
}

impl BinaryReader<BufReader<File>> {
    /// Opens a file. Errors are [`crate::TraceErrorKind::Io`].
    pub fn open(path: impl AsRef<Path>) -> Result<Self, TraceError> {
        let (name, reader) = crate::error::open_trace_file(path.as_ref())?;
        Ok(BinaryReader::from_reader(name, reader))
    }
}

impl<R: Read> TraceSource for BinaryReader<R> {
    fn next_kernel(&mut self) -> Result<Option<Box<dyn KernelSource + '_>>, TraceError> {
        self.inner.next_kernel()
    }
}

/// Whether `bytes` (the start of a file) look like a binary trace.
pub fn is_binary(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}

/// Reads a whole binary trace; `name` names it in errors. `cta` section programs are appended to
/// their kernel's `programs` and the sections become `layout.overrides`.
pub fn read_trace(name: &str, bytes: &[u8]) -> Result<Trace, TraceError> {
    stream::collect(read::BinParser::new(name.to_string(), bytes))
}

/// Writes a whole trace in the binary form. Fails with [`io::ErrorKind::InvalidInput`] when a
/// kernel is not well formed (see [`BinaryWriter::write_kernel`]).
pub fn write_trace<W: Write + ?Sized>(trace: &Trace, out: &mut W) -> io::Result<()> {
    let mut w = BinaryWriter::new(io::BufWriter::new(out))?;
    for k in &trace.kernels {
        w.write_kernel(k)?;
    }
    w.finish().map(|_| ())
}

/// [`write_trace`] into a byte vector.
pub fn to_bytes(trace: &Trace) -> io::Result<Vec<u8>> {
    let mut v = Vec::new();
    write_trace(trace, &mut v)?;
    Ok(v)
}

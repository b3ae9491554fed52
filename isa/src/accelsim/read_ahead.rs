//! One kernel's `.traceg` parsed on a thread of its own, ahead of the simulation that consumes
//! its CTAs: on a machine with a core to spare, parsing (about half of a flat trace's run time)
//! and decompression overlap the simulation instead of adding to it.
//!
//! What the consumer sees is exactly what [`TracegReader`] itself would answer, call for call:
//! the same CTAs in the same order, the op table as it stood after each CTA was read (a trace
//! names new opcodes as it goes), the same warnings, the same error at the same CTA (sticky, as
//! the reader's are). Only the time at which the parsing happens moves, so a run's results do
//! not depend on whether the kernel was read ahead.
//!
//! Memory stays bounded: the parsed CTAs waiting for the consumer hold at most [`BUDGET`]
//! bytes of programs (at least one CTA, however large). A kernel of one wave gains nothing (the
//! engine takes every CTA before the first cycle); one of many waves has the next wave's CTAs
//! parsed while the simulation runs this one's. The thread ends after the kernel's last CTA or
//! its first error, or at its next CTA once the consumer is dropped (a run stopped early, a
//! kernel broken by a simulation error).

use std::io::BufRead;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Condvar, Mutex};

use super::header::TracegHeader;
use super::reader::TracegReader;
use crate::diag::Diagnostic;
use crate::error::{Location, TraceError, TraceErrorKind};
use crate::kernel::{CtaTrace, KernelInfo, OpTable};
use crate::source::KernelSource;

/// Bytes of parsed programs that may wait for the consumer: a few thousand folded CTAs of a
/// flat trace (about a wave of an H100's), and little against the 256 MiB the whole run may
/// take (tests/long_trace_rss.rs; 64 MiB of steps alone, without the rest of the programs,
/// let that test's RSS grow with the trace).
const BUDGET: u64 = 16 << 20;

/// What the parsing thread sends per CTA.
struct Parsed {
    cta: Result<Option<CtaTrace>, TraceError>,
    /// What it counts against the budget.
    bytes: u64,
    /// The op table after this CTA, when the CTA added opcodes to it.
    ops: Option<OpTable>,
    diags: Vec<Diagnostic>,
}

/// The bytes of parsed CTAs sent and not yet taken, and whether the consumer is gone.
#[derive(Default)]
struct InFlight {
    state: Mutex<(u64, bool)>,
    changed: Condvar,
}

/// What a CTA holds, as the budget counts it: each warp's program with what its vectors hold
/// (a program shared by several warps counts for each, the lookup tables the kernel's programs
/// share for none).
fn cta_bytes(c: &CtaTrace) -> u64 {
    use std::mem::size_of;
    let program = |p: &crate::program::Program| {
        size_of::<crate::program::Program>()
            + p.name.capacity()
            + p.steps.capacity() * size_of::<crate::program::Step>()
            + p.exprs.capacity() * size_of::<crate::program::AddrExpr>()
            + p.lane_offsets.capacity() * size_of::<i64>()
            + p.params.capacity() * size_of::<crate::program::CtaParam>()
    };
    (size_of::<CtaTrace>() + c.warps.iter().map(|p| program(p)).sum::<usize>()) as u64
}

/// The consumer's end: a [`TracegReader`] running on its own thread.
pub(super) struct ReadAhead {
    rx: Receiver<Parsed>,
    in_flight: Arc<InFlight>,
    info: KernelInfo,
    header: TracegHeader,
    ops: OpTable,
    /// The answer after the last CTA or an error, repeated from then on.
    end: Option<Result<Option<CtaTrace>, TraceError>>,
    file: String,
}

impl ReadAhead {
    /// Moves `reader` (its header read) to a new thread that parses its CTAs ahead.
    pub(super) fn start<R: BufRead + Send + 'static>(
        mut reader: TracegReader<R>,
        file: String,
    ) -> std::io::Result<ReadAhead> {
        let info = reader.info.clone();
        let header = reader.header().clone();
        let ops = reader.ops().clone();
        let (tx, rx) = channel();
        let in_flight = Arc::new(InFlight::default());
        let shared = in_flight.clone();
        std::thread::Builder::new()
            .name(format!("read {}", info.name))
            .spawn(move || parse(&mut reader, &tx, &shared))?;
        Ok(ReadAhead { rx, in_flight, info, header, ops, end: None, file })
    }

    pub(super) fn info(&self) -> &KernelInfo {
        &self.info
    }

    pub(super) fn header(&self) -> &TracegHeader {
        &self.header
    }

    pub(super) fn ops(&self) -> &OpTable {
        &self.ops
    }

    /// The next CTA; the warnings reading it gave go to `diags`.
    pub(super) fn next_cta(&mut self, diags: &mut Vec<Diagnostic>) -> Result<Option<CtaTrace>, TraceError> {
        if let Some(end) = &self.end {
            return end.clone();
        }
        let cta = match self.rx.recv() {
            Ok(p) => {
                if let Ok(mut s) = self.in_flight.state.lock() {
                    s.0 -= p.bytes;
                }
                self.in_flight.changed.notify_one();
                if let Some(ops) = p.ops {
                    self.ops = ops;
                }
                diags.extend(p.diags);
                p.cta
            }
            // The thread ended without its last answer: it panicked.
            Err(_) => Err(TraceError::new(
                TraceErrorKind::Io,
                Location { file: self.file.clone(), line: 0, col: 0 },
                "the thread reading this kernel trace stopped unexpectedly".to_string(),
            )),
        };
        if !matches!(cta, Ok(Some(_))) {
            self.end = Some(cta.clone());
        }
        cta
    }
}

impl Drop for ReadAhead {
    /// Lets a parsing thread that waits for room go.
    fn drop(&mut self) {
        if let Ok(mut s) = self.in_flight.state.lock() {
            s.1 = true;
        }
        self.in_flight.changed.notify_one();
    }
}

/// The parsing thread: every CTA of `reader` in order, until the last, an error, or a consumer
/// that has gone away; it waits while the CTAs the consumer has not taken fill the budget.
fn parse<R: BufRead>(reader: &mut TracegReader<R>, tx: &Sender<Parsed>, in_flight: &InFlight) {
    let mut known = reader.ops().len();
    loop {
        let cta = reader.next_cta();
        let len = reader.ops().len();
        let ops = (len != known).then(|| reader.ops().clone());
        known = len;
        let last = !matches!(cta, Ok(Some(_)));
        let bytes = cta.as_ref().ok().and_then(Option::as_ref).map_or(0, cta_bytes);
        {
            let Ok(mut s) = in_flight.state.lock() else { return };
            while !s.1 && s.0 > 0 && s.0 + bytes > BUDGET {
                let Ok(next) = in_flight.changed.wait(s) else { return };
                s = next;
            }
            if s.1 {
                return;
            }
            s.0 += bytes;
        }
        if tx.send(Parsed { cta, bytes, ops, diags: reader.take_diagnostics() }).is_err() || last {
            return;
        }
    }
}

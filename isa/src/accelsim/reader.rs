//! Streaming reader of one `.traceg` file: header first, then one `#BEGIN_TB ... #END_TB`
//! block per [`KernelSource::next_cta`] call.

use std::collections::HashMap;
use std::io::BufRead;
use std::sync::Arc;

use super::fold::{Flat, Piece, fold};
use super::header::{TracegHeader, parse_header};
use super::inst::{Decoded, LanePat, LineMemo, Ops, parse_inst};
use super::lines::{DiagSink, LineReader, Tokens, key_value, parse_dec_u64, parse_triple};
use crate::diag::{self, Diagnostic};
use crate::error::{TraceError, TraceErrorKind};
use crate::kernel::{CtaTrace, Dim3, KernelInfo, OpTable};
use crate::program::{AddrExpr, Lanes, MemRef, Program, Step, TripCount, Var};
use crate::source::KernelSource;

/// Reads one Accel-Sim `.traceg` kernel trace from any buffered input, one CTA at a time.
///
/// [`TracegReader::new`] reads the header; each [`KernelSource::next_cta`] reads one thread
/// block, so memory stays bounded by the largest CTA. Errors are sticky: after one, every later
/// call returns it again.
pub struct TracegReader<R> {
    lines: LineReader<R>,
    header: TracegHeader,
    pub(super) info: KernelInfo,
    ops: Ops,
    diags: DiagSink,
    next_linear: u64,
    done: bool,
    failed: Option<TraceError>,
    offsets: [i64; 32],
    memo: LineMemo,
}

impl<R: BufRead> TracegReader<R> {
    /// Reads the header of `input`. `file` names the input in errors; `kernel_id` becomes
    /// [`KernelInfo::id`]. [`KernelInfo::stream`] is 0 for the null stream and 1 otherwise
    /// ([`super::AccelSimTrace`] numbers the streams of a whole trace).
    pub fn new(input: R, file: impl Into<String>, kernel_id: u32) -> Result<Self, TraceError> {
        let mut lines = LineReader::new(input, file.into());
        let mut diags = DiagSink::default();
        let header = parse_header(&mut lines, &mut diags)?;
        let mut info = KernelInfo::new(kernel_id, header.kernel_name.clone(), header.grid, header.block);
        info.cluster = header.cluster.unwrap_or(Dim3::ONE);
        if let Some(n) = header.nregs {
            info.regs_per_thread = n;
        }
        info.smem_bytes = header.shmem;
        info.stream = u32::from(header.cuda_stream_id != 0);
        info.sm_version = header.binary_version;
        Ok(TracegReader {
            lines,
            header,
            info,
            ops: Ops::default(),
            diags,
            next_linear: 0,
            done: false,
            failed: None,
            offsets: [0; 32],
            memo: LineMemo::default(),
        })
    }

    pub fn header(&self) -> &TracegHeader {
        &self.header
    }

    /// Warnings so far (lines skipped, unknown header keys).
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.diags.list
    }

    /// Moves the warnings so far out of the reader.
    pub fn take_diagnostics(&mut self) -> Vec<Diagnostic> {
        std::mem::take(&mut self.diags.list)
    }

    /// Number of CTAs returned so far.
    pub fn ctas_read(&self) -> u64 {
        self.next_linear
    }

    fn read_cta(&mut self) -> Result<Option<CtaTrace>, TraceError> {
        let num_ctas = self.info.num_ctas();
        // Up to `#BEGIN_TB`, or the end of the input.
        loop {
            if !self.lines.advance()? {
                if self.next_linear == num_ctas {
                    self.diags.finish(diag::IGNORED_LINE, self.lines.file());
                    return Ok(None);
                }
                return Err(TraceError::new(
                    TraceErrorKind::Truncated,
                    self.lines.eof_location(),
                    format!(
                        "the trace ends after {} of the {} thread blocks of grid {}",
                        self.next_linear, num_ctas, self.info.grid
                    ),
                ));
            }
            let at = self.lines.at();
            let t = at.text.trim_start();
            let lead = at.text.len() - t.len();
            let Some((_, first)) = Tokens::new(t).next_tok() else { continue };
            match first {
                "#BEGIN_TB" => break,
                "#END_TB" => return Err(at.syntax(lead, "`#END_TB` without `#BEGIN_TB`")),
                _ if first.starts_with('#') => {
                    self.diags.push(diag::IGNORED_LINE, at.loc(lead), format!("line ignored: `{}`", short(t)));
                }
                _ => return Err(at.syntax(lead, format!("expected `#BEGIN_TB`, found `{}`", short(t)))),
            }
        }
        let begin = self.lines.line();
        let lineinfo = self.header.lineinfo;
        let grid = self.info.grid;
        let nwarps = self.info.warps_per_cta() as usize;
        let mut warps: Vec<Option<Program>> = (0..nwarps).map(|_| None).collect();
        let mut cur: Option<WarpBuilder> = None;
        let mut coord: Option<Dim3> = None;
        loop {
            if !self.lines.advance()? {
                return Err(TraceError::new(
                    TraceErrorKind::Truncated,
                    self.lines.eof_location(),
                    format!("the trace ends inside the thread block begun at line {begin} (no `#END_TB`)"),
                ));
            }
            let at = self.lines.at();
            // A line decoded before is an instruction line, and the same instruction: what the
            // instruction path below would push, without classifying and parsing it again.
            if let Some(w) = cur.as_mut()
                && w.expected.is_some_and(|n| w.got < n)
                && let Some(inst) = self.memo.get(at.text)
            {
                w.push(Decoded { inst, mem: None }, &self.offsets)
                    .map_err(|m| at.err(TraceErrorKind::Invalid, 0, m))?;
                continue;
            }
            let t = at.text.trim_start();
            let lead = at.text.len() - t.len();
            let Some((_, first)) = Tokens::new(t).next_tok() else { continue };
            if first.starts_with('#') {
                match first {
                    "#END_TB" => {
                        let Some(c) = coord else {
                            return Err(at.syntax(
                                lead,
                                format!("the block begun at line {begin} has no `thread block = x,y,z` line"),
                            ));
                        };
                        if let Some(w) = cur.take() {
                            let idx = w.index;
                            warps[idx] = Some(w.finish(&at, lead, c)?);
                        }
                        self.next_linear += 1;
                        let warps = warps
                            .into_iter()
                            .enumerate()
                            .map(|(i, p)| Arc::new(p.unwrap_or_else(|| empty_program(c, i))))
                            .collect();
                        return Ok(Some(CtaTrace { coord: c, warps }));
                    }
                    "#BEGIN_TB" => {
                        return Err(
                            at.syntax(lead, format!("`#BEGIN_TB` inside the thread block begun at line {begin}"))
                        );
                    }
                    _ => {
                        self.diags.push(diag::IGNORED_LINE, at.loc(lead), format!("line ignored: `{}`", short(t)));
                        continue;
                    }
                }
            }
            if let Some((key, value, voff)) = key_value(at.text) {
                match key.as_str() {
                    "thread block" => {
                        if coord.is_some() || cur.is_some() || warps.iter().any(Option::is_some) {
                            return Err(at.syntax(
                                lead,
                                format!("unexpected `thread block` line in the block begun at line {begin}"),
                            ));
                        }
                        let [x, y, z] = parse_triple(&at, value, voff, "thread block")?;
                        let c = Dim3::new(x, y, z);
                        if x >= grid.x || y >= grid.y || z >= grid.z {
                            return Err(at.err(
                                TraceErrorKind::Invalid,
                                voff,
                                format!("thread block {c} is outside the grid {grid}"),
                            ));
                        }
                        let linear = grid.linear(c);
                        if linear != self.next_linear {
                            let next = self.next_linear;
                            let msg = if next >= grid.count() {
                                format!("thread block {c} comes after all {} blocks of the grid", grid.count())
                            } else if linear < next {
                                format!(
                                    "thread block {c} repeats or comes out of launch order (blocks come in launch \
                                     order, x fastest; {} is next)",
                                    grid.unlinear(next)
                                )
                            } else {
                                format!(
                                    "thread block {c} comes out of launch order: {} is next (blocks missing?)",
                                    grid.unlinear(next)
                                )
                            };
                            return Err(at.err(TraceErrorKind::Invalid, voff, msg));
                        }
                        coord = Some(c);
                        continue;
                    }
                    "cluster id" | "cluster cta" => {
                        parse_triple(&at, value, voff, &key)?;
                        continue;
                    }
                    "cluster rank" => {
                        parse_dec_u64(value)
                            .ok_or_else(|| at.syntax(voff, format!("cluster rank: bad number `{value}`")))?;
                        continue;
                    }
                    "warp" => {
                        let Some(c) = coord else {
                            return Err(at.syntax(
                                lead,
                                format!("`warp` before `thread block` in the block begun at line {begin}"),
                            ));
                        };
                        if let Some(w) = cur.take() {
                            let idx = w.index;
                            warps[idx] = Some(w.finish(&at, lead, c)?);
                        }
                        let w = parse_dec_u64(value)
                            .ok_or_else(|| at.syntax(voff, format!("warp: bad number `{value}`")))?;
                        if w >= nwarps as u64 {
                            return Err(at.err(
                                TraceErrorKind::Invalid,
                                voff,
                                format!(
                                    "warp {w} does not exist: blocks of {} threads have {nwarps} warps",
                                    self.info.threads_per_cta()
                                ),
                            ));
                        }
                        if warps[w as usize].is_some() {
                            return Err(at.err(
                                TraceErrorKind::Invalid,
                                voff,
                                format!("warp {w} appears twice in thread block {c}"),
                            ));
                        }
                        cur = Some(WarpBuilder::new(c, w as usize, at.line));
                        continue;
                    }
                    "insts" => {
                        let Some(w) = cur.as_mut().filter(|w| w.expected.is_none()) else {
                            return Err(at.syntax(lead, "`insts = N` without a `warp = W` line before it"));
                        };
                        let n = parse_dec_u64(value)
                            .ok_or_else(|| at.syntax(voff, format!("insts: bad number `{value}`")))?;
                        w.expected = Some(n);
                        w.insts_line = at.line;
                        w.flat.reserve(n.min(4096) as usize);
                        continue;
                    }
                    _ => {}
                }
            }
            // An instruction line.
            let Some(w) = cur.as_mut() else {
                return Err(at.syntax(lead, "instruction line before `warp = W` and `insts = N`"));
            };
            let Some(n) = w.expected else {
                return Err(at.syntax(lead, format!("instruction line before `insts = N` of warp {}", w.index)));
            };
            if w.got == n {
                return Err(at.err(
                    TraceErrorKind::Invalid,
                    lead,
                    format!(
                        "warp {} of thread block {} has more instructions than the {n} that `insts` announced at line {}",
                        w.index, w.coord, w.insts_line
                    ),
                ));
            }
            let d = parse_inst(&at, lineinfo, &mut self.ops, &mut self.offsets)?;
            if d.mem.is_none() {
                self.memo.insert(at.text, d.inst);
            }
            w.push(d, &self.offsets).map_err(|m| at.err(TraceErrorKind::Invalid, lead, m))?;
        }
    }
}

impl<R: BufRead> KernelSource for TracegReader<R> {
    fn info(&self) -> &KernelInfo {
        &self.info
    }

    fn ops(&self) -> &OpTable {
        &self.ops.table
    }

    fn next_cta(&mut self) -> Result<Option<CtaTrace>, TraceError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if self.done {
            return Ok(None);
        }
        match self.read_cta() {
            Ok(None) => {
                self.done = true;
                Ok(None)
            }
            Ok(c) => Ok(c),
            Err(e) => {
                self.failed = Some(e.clone());
                Err(e)
            }
        }
    }
}

/// The program of one warp being read: its instructions as listed, folded into loops when the
/// warp ends ([`super::fold`]).
struct WarpBuilder {
    coord: Dim3,
    index: usize,
    warp_line: u64,
    insts_line: u64,
    expected: Option<u64>,
    got: u64,
    /// The instructions so far, each memory operand's expression not yet made.
    flat: Vec<Flat>,
    prog: Program,
    /// Index in `prog.exprs` of each expression made: (base, stride per iteration).
    exprs: HashMap<(u64, i64), u32>,
    /// Start in `prog.lane_offsets` of each offset pattern seen.
    patterns: HashMap<Vec<i64>, u32>,
}

impl WarpBuilder {
    fn new(coord: Dim3, index: usize, warp_line: u64) -> Self {
        WarpBuilder {
            coord,
            index,
            warp_line,
            insts_line: 0,
            expected: None,
            got: 0,
            flat: Vec::new(),
            prog: Program { name: program_name(coord, index), ..Program::default() },
            exprs: HashMap::new(),
            patterns: HashMap::new(),
        }
    }

    fn too_big(&self) -> String {
        format!("warp {} of thread block {} is too large", self.index, self.coord)
    }

    fn push(&mut self, d: Decoded, offsets: &[i64; 32]) -> Result<(), String> {
        let mut inst = d.inst;
        let mut base = 0;
        if let Some((b, pat)) = d.mem {
            base = b;
            let lanes = match pat {
                LanePat::Stride(s) => Lanes::Stride(s),
                LanePat::Offsets(n) => {
                    let key = &offsets[..n];
                    let start = match self.patterns.get(key) {
                        Some(&s) => s,
                        None => {
                            let s = u32::try_from(self.prog.lane_offsets.len()).map_err(|_| self.too_big())?;
                            self.prog.lane_offsets.extend_from_slice(key);
                            self.patterns.insert(key.to_vec(), s);
                            s
                        }
                    };
                    Lanes::Offsets { start }
                }
            };
            // The expression is made when the warp ends (`finish`), once it is known whether
            // the instruction is in a loop.
            inst.mem = Some(MemRef { addr: 0, lanes, bulk_bytes: 0 });
        }
        self.flat.push(Flat { inst, base });
        self.got += 1;
        Ok(())
    }

    /// The index of the expression `base + stride·i0`, made if new.
    fn expr(&mut self, base: u64, stride: i64) -> Result<u32, String> {
        if let Some(&i) = self.exprs.get(&(base, stride)) {
            return Ok(i);
        }
        let i = u32::try_from(self.prog.exprs.len()).map_err(|_| self.too_big())?;
        let e = AddrExpr::constant(base);
        self.prog.exprs.push(if stride == 0 { e } else { e.with(Var::Loop(0), stride) });
        self.exprs.insert((base, stride), i);
        Ok(i)
    }

    /// Appends instruction `f` of the flat list, its address `f.base + stride·i0`.
    fn emit(&mut self, f: Flat, stride: i64) -> Result<(), String> {
        let mut inst = f.inst;
        if let Some(m) = inst.mem.as_mut() {
            m.addr = self.expr(f.base, stride)?;
        }
        self.prog.steps.push(Step::Inst(inst));
        Ok(())
    }

    /// The warp's program: the flat list folded into loops.
    fn build(&mut self) -> Result<(), String> {
        let flat = std::mem::take(&mut self.flat);
        for piece in fold(&flat) {
            match piece {
                Piece::One(i) => self.emit(flat[i], 0)?,
                Piece::Loop { start, len, trips } => {
                    let open = self.prog.steps.len();
                    self.prog.steps.push(Step::Loop { count: TripCount::Fixed(trips), end: 0 });
                    for q in 0..len {
                        let f = flat[start + q];
                        let stride = if f.inst.mem.is_some() { Piece::delta(&flat, start, len, q) } else { 0 };
                        self.emit(f, stride)?;
                    }
                    let close = u32::try_from(self.prog.steps.len()).map_err(|_| self.too_big())?;
                    self.prog.steps.push(Step::EndLoop { start: open as u32 });
                    self.prog.steps[open] = Step::Loop { count: TripCount::Fixed(trips), end: close };
                }
            }
        }
        Ok(())
    }

    /// Ends the warp at the line `at` (the next `warp` line or `#END_TB`).
    fn finish(mut self, at: &super::lines::At, lead: usize, c: Dim3) -> Result<Program, TraceError> {
        match self.expected {
            None => Err(at.syntax(
                lead,
                format!("`warp = {}` at line {} is not followed by `insts = N`", self.index, self.warp_line),
            )),
            Some(n) if self.got < n => Err(at.err(
                TraceErrorKind::Truncated,
                lead,
                format!(
                    "warp {} of thread block {c} has {} of the {n} instructions that `insts` announced at line {}",
                    self.index, self.got, self.insts_line
                ),
            )),
            Some(_) => {
                self.build().map_err(|m| at.err(TraceErrorKind::Invalid, lead, m))?;
                debug_assert!(self.prog.check().is_ok());
                Ok(self.prog)
            }
        }
    }
}

fn program_name(c: Dim3, warp: usize) -> String {
    format!("cta({},{},{}).w{warp}", c.x, c.y, c.z)
}

/// The program of a warp the block does not list: it has no instructions.
fn empty_program(c: Dim3, warp: usize) -> Program {
    Program { name: program_name(c, warp), ..Program::default() }
}

/// A line shortened for messages.
fn short(t: &str) -> String {
    let t = t.trim_end();
    match t.char_indices().nth(60) {
        Some((i, _)) => format!("{}...", &t[..i]),
        None => t.to_string(),
    }
}

//! Import of Accel-Sim traces: `kernelslist.g` plus one `kernel-N.traceg` per kernel, as written
//! by Accel-Sim's NVBit tracer and its post-processing step (`post-traces-processing`).
//!
//! # Format
//!
//! `kernelslist.g` lists, one per line, `MemcpyHtoD,0x<addr>,<bytes>` (kept as
//! [`MemcpyHtoD`] information) and `kernel-N.traceg` (a path relative to the list; as in
//! Accel-Sim, any line starting with `kernel`). Blank lines are skipped; any other line
//! (`MemcpyDtoH,...`) is skipped with a [`crate::diag::IGNORED_LINE`] warning.
//!
//! A `.traceg` file starts with a header of `-key = value` lines (see [`TracegHeader`]) that
//! ends at the first line starting with `#` (the tracer writes a `#traces format = ...` comment
//! there). Unknown keys are skipped with a warning. The body is a sequence of thread blocks:
//!
//! ```text
//! #BEGIN_TB
//! thread block = 0,0,0
//! cluster id = 0,0,0          (newer post-processing; checked for syntax, otherwise unused)
//! cluster cta = 0,0,0
//! cluster rank = 0
//! warp = 0
//! insts = 2
//! 0000 ffffffff 1 R1 IMAD.MOV.U32 2 R255 R255 0 0
//! 0010 ffffffff 0 EXIT 0 0 0
//! #END_TB
//! ```
//!
//! An instruction line is
//! `[line_num] PC mask ndst {Rd} OPCODE nsrc {Rs} mem_width [mode addresses] [imm]`:
//! PC and mask in hex (a `0x` prefix is accepted), counts and widths in decimal. When
//! `mem_width > 0` an address block follows, in one of three compression modes:
//!
//! - `0 a1 a2 ...`: one hex address per active lane, in lane order;
//! - `1 base stride`: hex base address of the first active lane, decimal stride per lane (the
//!   tracer uses it only for a contiguous run of at least two active lanes; for other masks this
//!   importer reads it as `base + (lane - first_lane)·stride`);
//! - `2 base d1 d2 ...`: hex base of the first active lane, then popcount−1 signed decimal deltas,
//!   each from the previous active lane's address.
//!
//! Every file (the list and each kernel) may be zstd- or xz-compressed (`kernel-1.traceg.xz`, as
//! the tracer's scripts leave them); it is decoded as a stream, recognised by its magic bytes
//! ([`crate::open::decompressed`]).
//!
//! Modes 3 and 4 (TMA transfer lists of some newer tracer forks) are reported as
//! [`TraceErrorKind::Unsupported`].
//!
//! # Tracer versions
//!
//! `-accelsim tracer version` must be 3, 4 or 5 (else [`TraceErrorKind::Unsupported`]).
//!
//! - **3**: no `-enable lineinfo` header, no line numbers, no immediate.
//! - **4**: adds the `-enable lineinfo = 0|1` header; with 1 every instruction line starts with a
//!   decimal source line number (read and discarded).
//! - **5**: every line ends with a decimal immediate: the instruction's unsigned-immediate operand
//!   where it has one (`DEPBAR.LE SB0, 0x1` → 1), else 0. It becomes [`Inst::imm`].
//!
//! Accel-Sim's own parser reads a trailing immediate whatever the version (missing means 0), so
//! this importer does too: one optional decimal token after the address block, in any version.
//! Anything after it is a syntax error. The address block itself is the same in all three
//! versions. Body lines `cluster id/cta/rank` come from the post-processing tool, not the tracer
//! version, and are accepted in any version.
//!
//! # Mapping to the model
//!
//! - One kernel per `.traceg`. [`KernelInfo::id`] is the position in `kernelslist.g` (0-based;
//!   `-kernel id`, the tracer's own 1-based counter, stays in [`TracegHeader::kernel_id`]);
//!   `grid`, `block`, `-cluster dim`, `-nregs`, `-shmem` (static plus dynamic bytes),
//!   `-binary version` (→ `sm_version`) come from the header. `deps` stay empty: kernels of a
//!   stream run in stream order.
//! - [`KernelInfo::stream`] numbers the distinct `-cuda stream id` values (raw `CUstream` handles)
//!   of a trace in order of first appearance, the null stream (0) being 0. A lone `.traceg` read
//!   with [`parse_traceg_str`] or [`TracegReader`] gets 0 for the null stream and 1 otherwise.
//! - Each warp's instruction list becomes its own [`Program`] (no loops), named `cta(x,y,z).wN`.
//!   A warp the block does not list gets an empty program.
//! - Addresses: an [`AddrExpr::constant`] base plus [`Lanes::Stride`] when the active lanes'
//!   addresses form an exact arithmetic progression in lane index whose step fits `i32`
//!   (always for mode 1, and detected for modes 0 and 2), else [`Lanes::Offsets`] relative to the
//!   first active lane's address. Identical bases and offset patterns are shared within a warp.
//! - Registers: a trace line names only the *first* register of each operand (`R255` is `RZ`),
//!   and only general registers (no predicates, uniform registers or constants). The importer
//!   widens the destination to a [`RegRange`] of `mem_width/4` registers for loads wider than
//!   4 bytes (`LDG.E.128` → 4), to the matrix count for `LDSM` (`.x4` → 4), and to the
//!   accumulator registers of tensor-core instructions ([`crate::opcode::OpDesc::tensor`]: `m·n`
//!   accumulators over 32 threads, 128 for warpgroup `*GMMA`; 4 bytes each for F32/S32, 2 for F16,
//!   8 for F64; `HMMA.16816.F32` → 4, `HMMA.16816.F16` → 2, `HGMMA.64x128x16.F32` → 64). The
//!   data sources of stores and atomics wider than 4 bytes (every source after the first, which
//!   is the address register) are widened the same way. Address registers stay one register
//!   (`[R2.64]` is recorded as `R2`), as do the A/B/C sources of tensor-core instructions.
//! - Opcodes are interned in the kernel's [`OpTable`] as they appear; unknown mnemonics are kept
//!   (the simulator warns about them).
//!
//! # Errors
//!
//! Every error is a [`TraceError`] with the file, 1-based line and column of the offending token:
//! `Io` (a file that cannot be opened, named in the message), `Syntax` (bad numbers, registers,
//! keywords), `Truncated` (the input ends inside a block, a warp has fewer instructions than
//! `insts = N` said, or fewer blocks than the grid has), `Unsupported` (tracer versions outside
//! 3..=5, unprocessed `.trace` files, address modes 3/4), `Invalid`
//! (a block outside the grid, repeated or out of launch order, a warp that does not exist or
//! repeats, more instructions than `insts = N`). Blocks must come in launch order (linear index,
//! x fastest), as the post-processing tool writes them.
//!
//! [`Inst::imm`]: crate::program::Inst::imm
//! [`Program`]: crate::program::Program
//! [`AddrExpr::constant`]: crate::program::AddrExpr::constant
//! [`Lanes::Stride`]: crate::program::Lanes::Stride
//! [`Lanes::Offsets`]: crate::program::Lanes::Offsets
//! [`RegRange`]: crate::reg::RegRange
//! [`KernelInfo::id`]: crate::kernel::KernelInfo::id
//! [`KernelInfo::stream`]: crate::kernel::KernelInfo::stream

mod fold;
mod header;
mod inst;
mod lines;
mod read_ahead;
mod reader;
mod writer;

use std::io::BufReader;
use std::path::{Path, PathBuf};

pub use header::{SUPPORTED_TRACER_VERSIONS, TracegHeader};
pub use reader::TracegReader;
pub use writer::write_traceg;

use crate::diag::{self, Diagnostic};
use crate::error::{Location, TraceError, TraceErrorKind};
use crate::kernel::{CtaLayout, KernelInfo, KernelTrace, OpTable, Trace};
use crate::source::{KernelSource, TraceSource};
use lines::{At, LineReader, parse_dec_u64, parse_hex_u64};

/// Parses a whole `.traceg` held in memory into a kernel (id 0). `name` names the input in
/// errors. Never panics, whatever the input.
pub fn parse_traceg_str(name: &str, text: &str) -> Result<KernelTrace, TraceError> {
    parse_traceg_str_with_diagnostics(name, text).map(|(k, _)| k)
}

/// [`parse_traceg_str`], also returning the warnings (skipped lines and header keys).
pub fn parse_traceg_str_with_diagnostics(name: &str, text: &str) -> Result<(KernelTrace, Vec<Diagnostic>), TraceError> {
    let mut r = TracegReader::new(text.as_bytes(), name, 0)?;
    let k = collect_kernel(&mut r)?;
    Ok((k, r.take_diagnostics()))
}

/// Reads every remaining CTA of `src` into a [`KernelTrace`] (each CTA's warps get their own
/// programs, listed in [`CtaLayout::overrides`]).
fn collect_kernel(src: &mut dyn KernelSource) -> Result<KernelTrace, TraceError> {
    let mut programs = Vec::new();
    let mut layout = CtaLayout::default();
    let mut linear = 0u64;
    while let Some(cta) = src.next_cta()? {
        let idx = cta
            .warps
            .into_iter()
            .map(|p| {
                programs.push(p);
                (programs.len() - 1) as u32
            })
            .collect();
        layout.overrides.insert(linear, idx);
        linear += 1;
    }
    Ok(KernelTrace { info: src.info().clone(), ops: src.ops().clone(), programs, layout })
}

/// A `MemcpyHtoD,0x<addr>,<bytes>` line of `kernelslist.g`.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct MemcpyHtoD {
    pub addr: u64,
    pub bytes: u64,
    /// Number of kernels listed before it (the copy precedes kernel id `before_kernel`).
    pub before_kernel: u32,
    pub at: Location,
}

#[derive(Clone, Debug)]
struct KernelEntry {
    path: PathBuf,
    at: Location,
}

/// An Accel-Sim trace opened through its `kernelslist.g`, read kernel by kernel and CTA by CTA.
///
/// [`AccelSimTrace::open`] reads only the (small) list. Each `.traceg` is opened when
/// [`TraceSource::next_kernel`] reaches it, its header is read at once, and its thread blocks
/// are read one per [`KernelSource::next_cta`] call, so memory stays bounded by one CTA.
pub struct AccelSimTrace {
    list: String,
    kernels: Vec<KernelEntry>,
    memcpys: Vec<MemcpyHtoD>,
    next: usize,
    /// Raw non-null stream handles in order of first appearance; stream number = index + 1.
    streams: Vec<u64>,
    /// Shared with the kernels handed out, which may outlive a borrow of the trace (a kernel
    /// kept running by the engine while it reads the next ones: [`KernelSource::detach`]).
    diags: Diags,
    /// Each kernel's CTAs are parsed on a thread of its own, ahead of the consumer
    /// ([`AccelSimTrace::set_read_ahead`]).
    read_ahead: bool,
}

type Diags = std::rc::Rc<std::cell::RefCell<Vec<Diagnostic>>>;

impl AccelSimTrace {
    /// Reads `kernelslist.g`. Kernel paths are relative to its directory.
    pub fn open(kernelslist: &Path) -> Result<AccelSimTrace, TraceError> {
        let name = kernelslist.display().to_string();
        let file = crate::open::decompressed(kernelslist).map_err(|e| {
            TraceError::new(
                TraceErrorKind::Io,
                Location { file: name.clone(), line: 0, col: 0 },
                format!("cannot open `{name}`: {e}"),
            )
        })?;
        let dir = kernelslist.parent().map(Path::to_path_buf).unwrap_or_default();
        let mut lines = LineReader::new(BufReader::new(file), name.clone());
        let mut t = AccelSimTrace {
            list: name,
            kernels: Vec::new(),
            memcpys: Vec::new(),
            next: 0,
            streams: Vec::new(),
            diags: Diags::default(),
            read_ahead: crate::open::ReadOptions::default().read_ahead,
        };
        while lines.advance()? {
            let at = lines.at();
            let text = at.text.trim();
            let lead = at.text.len() - at.text.trim_start().len();
            if text.is_empty() {
                continue;
            }
            if text.starts_with("MemcpyHtoD") {
                let (addr, bytes) = parse_memcpy(&at, text, lead)?;
                let before_kernel = t.kernels.len() as u32;
                t.memcpys.push(MemcpyHtoD { addr, bytes, before_kernel, at: at.loc(lead) });
            } else if text.starts_with("kernel") {
                t.kernels.push(KernelEntry { path: dir.join(text), at: at.loc(lead) });
            } else {
                t.diags.borrow_mut().push(Diagnostic {
                    code: diag::IGNORED_LINE,
                    at: at.loc(lead),
                    message: format!("kernel list line ignored: `{text}`"),
                });
            }
        }
        Ok(t)
    }

    /// Whether the kernels opened from now on are parsed on threads of their own, ahead of the
    /// consumer within a memory budget. What they yield is the same either way (`read_ahead`'s
    /// module doc); only where the parsing time goes differs. Default: on where the machine has
    /// more than one core.
    pub fn set_read_ahead(&mut self, on: bool) {
        self.read_ahead = on;
    }

    /// The kernel trace files, in launch order.
    pub fn kernel_paths(&self) -> impl Iterator<Item = &Path> {
        self.kernels.iter().map(|k| k.path.as_path())
    }

    pub fn num_kernels(&self) -> usize {
        self.kernels.len()
    }

    /// The host-to-device copies the list records.
    pub fn memcpys(&self) -> &[MemcpyHtoD] {
        &self.memcpys
    }

    /// Warnings so far: skipped list lines, and skipped header keys and body lines of the kernels
    /// read so far.
    pub fn diagnostics(&self) -> Vec<Diagnostic> {
        self.diags.borrow().clone()
    }

    /// Moves the warnings so far out.
    pub fn take_diagnostics(&mut self) -> Vec<Diagnostic> {
        std::mem::take(&mut *self.diags.borrow_mut())
    }

    /// The next kernel as a concrete [`AccelSimKernel`] (which also gives its header).
    /// After an error the next call moves on to the following kernel.
    pub fn next_accelsim_kernel(&mut self) -> Result<Option<AccelSimKernel>, TraceError> {
        let Some(entry) = self.kernels.get(self.next).cloned() else { return Ok(None) };
        let id = self.next as u32;
        self.next += 1;
        let shown = entry.path.display().to_string();
        let unsupported = |m: String| TraceError::new(TraceErrorKind::Unsupported, entry.at.clone(), m);
        if shown.ends_with(".trace") {
            return Err(unsupported(format!(
                "`{shown}` is a raw tracer output; run Accel-Sim's post-traces-processing to make `.traceg` files"
            )));
        }
        let file = crate::open::decompressed(&entry.path).map_err(|e| {
            TraceError::new(TraceErrorKind::Io, entry.at.clone(), format!("cannot open kernel trace `{shown}`: {e}"))
        })?;
        let mut reader = TracegReader::new(BufReader::with_capacity(1 << 16, file), shown.clone(), id)?;
        reader.info.stream = self.stream_number(reader.header().cuda_stream_id);
        self.diags.borrow_mut().extend(reader.take_diagnostics());
        let feed = if self.read_ahead {
            let no_thread = |e: std::io::Error| {
                TraceError::new(
                    TraceErrorKind::Io,
                    entry.at.clone(),
                    format!("cannot start a thread to read `{shown}`: {e}"),
                )
            };
            Feed::Ahead(Box::new(read_ahead::ReadAhead::start(reader, shown.clone()).map_err(no_thread)?))
        } else {
            Feed::Inline(Box::new(reader))
        };
        Ok(Some(AccelSimKernel { feed: Some(feed), left: None, diags: self.diags.clone() }))
    }

    /// Reads every remaining kernel into memory (for small traces and tests).
    pub fn read_all(&mut self) -> Result<Trace, TraceError> {
        let mut trace = Trace::default();
        while let Some(mut k) = self.next_accelsim_kernel()? {
            trace.kernels.push(collect_kernel(&mut k)?);
        }
        Ok(trace)
    }

    /// The path of `kernelslist.g` as given.
    pub fn list_path(&self) -> &str {
        &self.list
    }

    fn stream_number(&mut self, raw: u64) -> u32 {
        if raw == 0 {
            return 0;
        }
        let i = match self.streams.iter().position(|&s| s == raw) {
            Some(i) => i,
            None => {
                self.streams.push(raw);
                self.streams.len() - 1
            }
        };
        u32::try_from(i + 1).unwrap_or(u32::MAX)
    }
}

impl TraceSource for AccelSimTrace {
    fn next_kernel(&mut self) -> Result<Option<Box<dyn KernelSource + '_>>, TraceError> {
        Ok(self.next_accelsim_kernel()?.map(|k| Box::new(k) as Box<dyn KernelSource + '_>))
    }

    fn take_diagnostics(&mut self) -> Vec<Diagnostic> {
        AccelSimTrace::take_diagnostics(self)
    }
}

/// One kernel of an [`AccelSimTrace`] being read; its warnings go to the trace's
/// [`AccelSimTrace::diagnostics`].
/// It reads a file of its own, so it can be detached from the trace at no cost.
pub struct AccelSimKernel {
    /// `None` once detached: the rest of the kernel went to the detached one, and `left` keeps
    /// what this one still answers.
    feed: Option<Feed>,
    left: Option<Box<(KernelInfo, OpTable, TracegHeader)>>,
    diags: Diags,
}

type KernelReader = TracegReader<BufReader<Box<dyn std::io::Read + Send>>>;

/// Where a kernel's CTAs come from: parsed when asked for, or by a thread of their own
/// ([`read_ahead`]), which answers the same.
enum Feed {
    Inline(Box<KernelReader>),
    Ahead(Box<read_ahead::ReadAhead>),
}

impl AccelSimKernel {
    pub fn header(&self) -> &TracegHeader {
        match (&self.feed, &self.left) {
            (Some(Feed::Inline(r)), _) => r.header(),
            (Some(Feed::Ahead(r)), _) => r.header(),
            (None, Some(l)) => &l.2,
            (None, None) => unreachable!("detaching keeps `left`"),
        }
    }
}

impl KernelSource for AccelSimKernel {
    fn info(&self) -> &KernelInfo {
        match (&self.feed, &self.left) {
            (Some(Feed::Inline(r)), _) => &r.info,
            (Some(Feed::Ahead(r)), _) => r.info(),
            (None, Some(l)) => &l.0,
            (None, None) => unreachable!("detaching keeps `left`"),
        }
    }

    fn ops(&self) -> &OpTable {
        match (&self.feed, &self.left) {
            (Some(Feed::Inline(r)), _) => r.ops(),
            (Some(Feed::Ahead(r)), _) => r.ops(),
            (None, Some(l)) => &l.1,
            (None, None) => unreachable!("detaching keeps `left`"),
        }
    }

    fn next_cta(&mut self) -> Result<Option<crate::kernel::CtaTrace>, TraceError> {
        match self.feed.as_mut() {
            None => Ok(None),
            Some(Feed::Inline(reader)) => {
                let r = reader.next_cta();
                self.diags.borrow_mut().extend(reader.take_diagnostics());
                r
            }
            Some(Feed::Ahead(ahead)) => ahead.next_cta(&mut self.diags.borrow_mut()),
        }
    }

    fn detach(&mut self) -> Option<Box<dyn KernelSource>> {
        let feed = self.feed.take()?;
        let left = match &feed {
            Feed::Inline(r) => (r.info.clone(), r.ops().clone(), r.header().clone()),
            Feed::Ahead(r) => (r.info().clone(), r.ops().clone(), r.header().clone()),
        };
        self.left = Some(Box::new(left));
        Some(Box::new(AccelSimKernel { feed: Some(feed), left: None, diags: self.diags.clone() }))
    }
}

/// `MemcpyHtoD,0x<addr>,<bytes>`.
fn parse_memcpy(at: &At, text: &str, lead: usize) -> Result<(u64, u64), TraceError> {
    let parts: Vec<&str> = text.split(',').collect();
    if parts.len() != 3 {
        return Err(at.syntax(lead, format!("expected `MemcpyHtoD,0x<address>,<bytes>`, found `{text}`")));
    }
    let off2 = lead + parts[0].len() + 1;
    let off3 = off2 + parts[1].len() + 1;
    let addr = parse_hex_u64(parts[1].trim())
        .ok_or_else(|| at.syntax(off2, format!("bad copy address `{}`", parts[1].trim())))?;
    let bytes = parse_dec_u64(parts[2].trim())
        .ok_or_else(|| at.syntax(off3, format!("bad copy size `{}`", parts[2].trim())))?;
    Ok((addr, bytes))
}

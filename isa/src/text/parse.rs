//! The text reader: lines to kernels, programs and `cta` sections (docs/trace-format.md).

use std::collections::HashMap;
use std::io::BufRead;
use std::sync::Arc;

use super::common::{check_block, check_cluster, check_grid, check_program};
use super::inst::ProgState;
use super::lex::{Tok, parse_u32, tokenize};
use super::param::parse_param;
use super::stream::{KernelHead, Parser, Section};
use crate::error::{Location, TraceError, TraceErrorKind};
use crate::kernel::{Dim3, KernelInfo, OpTable};
use crate::program::{CtaParam, MAX_LOOP_DEPTH, MAX_PARAMS, Program, Step, TripCount};

use TraceErrorKind::{Invalid, Io, Syntax, Truncated, Unsupported};

/// The magic word of the first line.
pub(crate) const MAGIC: &str = "gpusim-trace";

const HEADER_KEYS: [&str; 10] = ["grid", "block", "cluster", "regs", "smem", "stream", "after", "sm", "ops", "group"];

/// Which programs a `warps` line can name.
struct Scope<'a> {
    /// Number of kernel-level programs.
    kernel: usize,
    /// In a `cta` section: the kernel-wide number of its first program, how many it has defined
    /// so far, and their names (latest definition wins).
    local: Option<(u32, usize, &'a HashMap<String, u32>)>,
}

pub(crate) struct TextParser<R> {
    file: String,
    input: R,
    raw: Vec<u8>,
    text: String,
    pub(super) toks: Vec<Tok>,
    pub(super) line_no: u64,
    started: bool,
    // The kernel being read.
    in_kernel: bool,
    kernel_line: u64,
    kernel_name: String,
    warps: u32,
    pending_cta: Option<u64>,
    last_cta: Option<u64>,
    kernel_names: HashMap<String, u32>,
    kernel_programs: usize,
    /// Programs defined in this kernel so far, kernel-level and in sections (`%N` numbering).
    total_programs: u32,
}

impl<R: BufRead> TextParser<R> {
    pub(crate) fn new(file: String, input: R) -> Self {
        TextParser {
            file,
            input,
            raw: Vec::new(),
            text: String::new(),
            toks: Vec::new(),
            line_no: 0,
            started: false,
            in_kernel: false,
            kernel_line: 0,
            kernel_name: String::new(),
            warps: 0,
            pending_cta: None,
            last_cta: None,
            kernel_names: HashMap::new(),
            kernel_programs: 0,
            total_programs: 0,
        }
    }

    /// Lines read so far.
    pub(crate) fn line(&self) -> u64 {
        self.line_no
    }

    fn loc(&self, line: u64, col: u64) -> Location {
        Location { file: self.file.clone(), line, col }
    }

    pub(super) fn err(&self, kind: TraceErrorKind, line: u64, col: u64, msg: impl Into<String>) -> TraceError {
        TraceError::new(kind, self.loc(line, col), msg)
    }

    /// An error at token `i` of the current line.
    pub(super) fn err_tok(&self, kind: TraceErrorKind, i: usize, msg: impl Into<String>) -> TraceError {
        let col = self.toks.get(i).map_or(1, |t| t.col);
        self.err(kind, self.line_no, col, msg)
    }

    /// The input ended inside something.
    fn eof(&self, msg: impl Into<String>) -> TraceError {
        self.err(Truncated, self.line_no + 1, 1, format!("unexpected end of input: {}", msg.into()))
    }

    /// Reads the next line that has tokens. Returns false at the end of the input.
    fn next_line(&mut self) -> Result<bool, TraceError> {
        loop {
            self.raw.clear();
            let n = self
                .input
                .read_until(b'\n', &mut self.raw)
                .map_err(|e| self.err(Io, self.line_no + 1, 1, format!("read error: {e}")))?;
            if n == 0 {
                return Ok(false);
            }
            self.line_no += 1;
            if self.raw.last() == Some(&b'\n') {
                self.raw.pop();
            }
            if self.raw.last() == Some(&b'\r') {
                self.raw.pop();
            }
            self.text.clear();
            match std::str::from_utf8(&self.raw) {
                // A UTF-8 byte order mark at the very start is not part of the text.
                Ok(s) => self.text.push_str(if self.line_no == 1 { s.trim_start_matches('\u{feff}') } else { s }),
                Err(e) => {
                    let col = String::from_utf8_lossy(&self.raw[..e.valid_up_to()]).chars().count() as u64 + 1;
                    return Err(self.err(Syntax, self.line_no, col, "the line is not valid UTF-8"));
                }
            }
            tokenize(&self.text, &mut self.toks).map_err(|(col, m)| self.err(Syntax, self.line_no, col, m))?;
            if !self.toks.is_empty() {
                return Ok(true);
            }
        }
    }

    pub(super) fn tok(&self, i: usize) -> &str {
        let t = &self.toks[i];
        match &t.quoted {
            Some(s) => s,
            None => &self.text[t.start..t.end],
        }
    }

    /// Token `i` when it is bare (unquoted).
    pub(super) fn bare(&self, i: usize) -> Option<&str> {
        let t = self.toks.get(i)?;
        if t.quoted.is_some() { None } else { Some(&self.text[t.start..t.end]) }
    }

    /// The current line must have exactly `n` tokens.
    fn expect_len(&self, n: usize, usage: &str) -> Result<(), TraceError> {
        if self.toks.len() == n {
            return Ok(());
        }
        let i = self.toks.len().min(n);
        let msg = if self.toks.len() > n {
            format!("unexpected `{}`: expected `{usage}`", self.tok(i))
        } else {
            format!("missing operand: expected `{usage}`")
        };
        let col = match self.toks.get(i) {
            Some(t) => t.col,
            None => self.text.chars().count() as u64 + 1,
        };
        Err(self.err(Syntax, self.line_no, col, msg))
    }

    fn u32_at(&self, i: usize) -> Result<u32, TraceError> {
        let t = self.tok(i);
        parse_u32(t)
            .ok_or_else(|| self.err_tok(Syntax, i, format!("bad number `{t}`: expected an integer 0..=4294967295")))
    }

    fn dim3_at(&self, i: usize) -> Result<[u32; 3], TraceError> {
        Ok([self.u32_at(i)?, self.u32_at(i + 1)?, self.u32_at(i + 2)?])
    }

    fn read_magic(&mut self) -> Result<(), TraceError> {
        if !self.next_line()? {
            return Err(self.err(Truncated, 1, 1, format!("empty input: expected `{MAGIC} 1`")));
        }
        if self.bare(0) != Some(MAGIC) {
            return Err(self.err_tok(Syntax, 0, format!("not a gpusim text trace: expected `{MAGIC} 1` first")));
        }
        self.expect_len(2, "gpusim-trace VERSION")?;
        let v = self.u32_at(1)?;
        if !(1..=super::VERSION).contains(&v) {
            return Err(self.err_tok(
                Unsupported,
                1,
                format!(
                    "trace format version {v} is not supported (this reader reads versions 1 to {})",
                    super::VERSION
                ),
            ));
        }
        Ok(())
    }

    /// Parses the current `cta X Y Z` line; checks it is inside the grid and after the previous
    /// section. Returns the CTA's linear index.
    fn cta_line(&mut self, grid: Dim3) -> Result<u64, TraceError> {
        self.expect_len(4, "cta X Y Z")?;
        let c = self.dim3_at(1)?;
        let coord = Dim3::new(c[0], c[1], c[2]);
        if c[0] >= grid.x || c[1] >= grid.y || c[2] >= grid.z {
            return Err(self.err_tok(Invalid, 1, format!("CTA {coord} is outside the grid {grid}")));
        }
        let linear = grid.linear(coord);
        if let Some(last) = self.last_cta
            && linear <= last
        {
            return Err(self.err_tok(
                Invalid,
                1,
                format!("`cta` sections must come in ascending order: CTA {coord} after CTA {}", grid.unlinear(last)),
            ));
        }
        self.last_cta = Some(linear);
        Ok(linear)
    }

    fn parse_program(&mut self, ops: &mut OpTable) -> Result<(String, Arc<Program>), TraceError> {
        self.expect_len(2, "program NAME")?;
        let name = self.tok(1).to_string();
        if self.total_programs == u32::MAX {
            return Err(self.err_tok(Unsupported, 0, "too many programs in one kernel"));
        }
        let start = self.line_no;
        let mut st = ProgState::default();
        let mut params: Vec<CtaParam> = Vec::new();
        let mut tables: Vec<Arc<[i64]>> = Vec::new();
        let mut table_names: Vec<String> = Vec::new();
        loop {
            if !self.next_line()? {
                let what = match st.open.last() {
                    Some((_, l)) => format!("the `loop` at line {l} in program `{name}` is never closed with `end`"),
                    None => format!("program `{name}` (line {start}) is never closed with `end`"),
                };
                return Err(self.eof(what));
            }
            match self.bare(0) {
                Some("table") => {
                    if self.toks.len() < 4 || self.bare(2) != Some("=") {
                        return Err(self.err_tok(Syntax, 0, "expected `table NAME = V1 V2 ...`"));
                    }
                    let mut t = Vec::with_capacity(self.toks.len() - 3);
                    for i in 3..self.toks.len() {
                        let s = self.tok(i);
                        let v = s.parse::<i64>().ok().ok_or_else(|| {
                            self.err_tok(Syntax, i, format!("bad table entry `{s}`: expected a 64-bit integer"))
                        })?;
                        t.push(v);
                    }
                    if table_names.len() >= u32::MAX as usize {
                        return Err(self.err_tok(Unsupported, 0, "too many tables"));
                    }
                    table_names.push(self.tok(1).to_string());
                    tables.push(t.into());
                }
                Some("param") => {
                    let k = params.len();
                    if self.toks.len() < 4 || self.bare(2) != Some("=") {
                        return Err(self.err_tok(Syntax, 0, format!("expected `param p{k} = EXPR`")));
                    }
                    if k >= MAX_PARAMS {
                        return Err(self.err_tok(Unsupported, 0, format!("more than {MAX_PARAMS} parameters")));
                    }
                    if self.tok(1) != format!("p{k}") {
                        return Err(self.err_tok(
                            Syntax,
                            1,
                            format!("expected `p{k}`: parameters are defined in order"),
                        ));
                    }
                    let t = &self.toks[3];
                    let rhs = &self.text[t.start..self.toks.last().map_or(t.end, |l| l.end)];
                    let col0 = t.col;
                    let q = parse_param(rhs, k, &table_names).map_err(|(off, m)| {
                        let col = col0 + rhs[..off.min(rhs.len())].chars().count() as u64;
                        self.err(Syntax, self.line_no, col, m)
                    })?;
                    params.push(q);
                }
                Some("loop") => {
                    self.expect_len(2, "loop COUNT")?;
                    let count =
                        if let Some(k) = self.bare(1).and_then(|t| t.strip_prefix('p')).filter(|s| !s.is_empty()) {
                            match k.parse::<u8>() {
                                Ok(k) if (k as usize) < params.len() => TripCount::Param(k),
                                _ => {
                                    return Err(self.err_tok(
                                        Invalid,
                                        1,
                                        format!("loop count `{}` is not a defined parameter", self.tok(1)),
                                    ));
                                }
                            }
                        } else {
                            TripCount::Fixed(self.u32_at(1)?)
                        };
                    if st.open.len() >= MAX_LOOP_DEPTH {
                        return Err(self.err_tok(Unsupported, 0, format!("loops nest deeper than {MAX_LOOP_DEPTH}")));
                    }
                    self.push_step(&mut st, Step::Loop { count, end: 0 })?;
                    st.open.push((st.steps.len() - 1, self.line_no));
                }
                Some("end") => {
                    self.expect_len(1, "end")?;
                    match st.open.pop() {
                        Some((s, _)) => {
                            let end = st.steps.len() as u32;
                            self.push_step(&mut st, Step::EndLoop { start: s as u32 })?;
                            st.steps[s] = match st.steps[s] {
                                Step::Loop { count, .. } => Step::Loop { count, end },
                                other => other,
                            };
                        }
                        None => break,
                    }
                }
                _ => self.parse_inst(&mut st, ops)?,
            }
        }
        let mut p = Program {
            name: name.clone(),
            steps: st.steps,
            exprs: st.exprs,
            lane_offsets: st.lane_offsets,
            params,
            tables,
        };
        check_program(&p, ops.len()).map_err(|e| self.err(Invalid, start, 1, format!("program `{name}`: {e}")))?;
        p.drop_empty_loops();
        Ok((name, Arc::new(p)))
    }

    pub(super) fn push_step(&self, st: &mut ProgState, s: Step) -> Result<(), TraceError> {
        if st.steps.len() >= u32::MAX as usize {
            return Err(self.err_tok(Unsupported, 0, "program has more than 2^32 steps"));
        }
        st.steps.push(s);
        Ok(())
    }

    /// Parses the current `warps A..B PROGRAM` line into `layout`.
    fn parse_warps(&self, layout: &mut [Option<u32>], scope: &Scope) -> Result<(), TraceError> {
        self.expect_len(3, "warps A..B PROGRAM")?;
        let r = self.tok(1);
        let (a, b) = match r.split_once("..") {
            Some((a, b)) => (a, b),
            None => (r, r),
        };
        let bad = || self.err_tok(Syntax, 1, format!("bad warp range `{r}`: expected `A..B` or `A`"));
        let (a, b) = (parse_u32(a).ok_or_else(bad)?, parse_u32(b).ok_or_else(bad)?);
        if a > b {
            return Err(self.err_tok(Invalid, 1, format!("empty warp range {a}..{b}")));
        }
        if b as usize >= layout.len() {
            return Err(self.err_tok(
                Invalid,
                1,
                format!("warp {b} is outside the CTA, which has {} warps (0..{})", layout.len(), layout.len() - 1),
            ));
        }
        let p = self.resolve(2, scope)?;
        for w in a..=b {
            if layout[w as usize].replace(p).is_some() {
                return Err(self.err_tok(Invalid, 1, format!("warp {w} is given a program twice")));
            }
        }
        Ok(())
    }

    /// Resolves the program reference at token `i` to a visible index.
    fn resolve(&self, i: usize, scope: &Scope) -> Result<u32, TraceError> {
        if let Some(num) = self.bare(i).and_then(|t| t.strip_prefix('%')) {
            let n = parse_u32(num).ok_or_else(|| self.err_tok(Syntax, i, format!("bad program number `%{num}`")))?;
            if (n as usize) < scope.kernel {
                return Ok(n);
            }
            if let Some((base, len, _)) = scope.local
                && n >= base
                && ((n - base) as usize) < len
            {
                return Ok((scope.kernel + (n - base) as usize) as u32);
            }
            return Err(self.err_tok(Invalid, i, format!("program %{n} is not defined here")));
        }
        let name = self.tok(i);
        if let Some((_, _, names)) = scope.local
            && let Some(&l) = names.get(name)
        {
            return Ok((scope.kernel + l as usize) as u32);
        }
        self.kernel_names
            .get(name)
            .copied()
            .ok_or_else(|| self.err_tok(Invalid, i, format!("unknown program `{name}`")))
    }

    /// The warps without a program, as text (`3..7, 9`), or `None` when all are covered.
    fn gaps(layout: &[Option<u32>]) -> Option<String> {
        let mut out: Vec<String> = Vec::new();
        let mut w = 0;
        while w < layout.len() {
            if layout[w].is_none() {
                let s = w;
                while w < layout.len() && layout[w].is_none() {
                    w += 1;
                }
                out.push(if w - 1 == s { format!("{s}") } else { format!("{s}..{}", w - 1) });
            } else {
                w += 1;
            }
        }
        if out.is_empty() { None } else { Some(out.join(", ")) }
    }

    fn not_closed(&self) -> TraceError {
        self.eof(format!("kernel `{}` (line {}) is never closed with `end`", self.kernel_name, self.kernel_line))
    }
}

impl<R: BufRead> Parser for TextParser<R> {
    fn read_head(&mut self, id: u32) -> Result<Option<KernelHead>, TraceError> {
        if !self.started {
            self.read_magic()?;
            self.started = true;
        }
        if self.in_kernel {
            return Err(self.err(
                Invalid,
                self.line_no,
                1,
                "internal error: the previous kernel was not read to its end",
            ));
        }
        if !self.next_line()? {
            return Ok(None);
        }
        match self.bare(0) {
            Some("kernel") => self.expect_len(2, "kernel NAME")?,
            Some("end") => return Err(self.err_tok(Syntax, 0, "`end` without an open kernel, program or loop")),
            _ => return Err(self.err_tok(Syntax, 0, format!("expected `kernel NAME`, found `{}`", self.tok(0)))),
        }
        self.kernel_name = self.tok(1).to_string();
        self.kernel_line = self.line_no;
        self.in_kernel = true;
        self.pending_cta = None;
        self.last_cta = None;
        self.kernel_names.clear();
        self.total_programs = 0;
        let mut info = KernelInfo::new(id, self.kernel_name.clone(), Dim3::ZERO, Dim3::ZERO);
        let mut ops = OpTable::new();
        let mut seen = [false; HEADER_KEYS.len()];
        // Header lines.
        loop {
            if !self.next_line()? {
                return Err(self.not_closed());
            }
            let Some(kw) = self.bare(0) else {
                return Err(self.err_tok(
                    Syntax,
                    0,
                    format!("expected a kernel directive, found `\"{}\"`", self.tok(0)),
                ));
            };
            let Some(k) = HEADER_KEYS.iter().position(|h| *h == kw) else {
                if matches!(kw, "program" | "warps" | "cta" | "end") {
                    break;
                }
                return Err(self.err_tok(Syntax, 0, format!("unknown kernel directive `{kw}`")));
            };
            if std::mem::replace(&mut seen[k], true) {
                return Err(self.err_tok(Syntax, 0, format!("`{kw}` given twice")));
            }
            match HEADER_KEYS[k] {
                "grid" | "block" | "cluster" => {
                    self.expect_len(4, &format!("{} X Y Z", HEADER_KEYS[k]))?;
                    let d = self.dim3_at(1)?;
                    let check = match HEADER_KEYS[k] {
                        "grid" => check_grid(d),
                        "block" => check_block(d),
                        _ => check_cluster(d),
                    };
                    check.map_err(|e| self.err_tok(Invalid, 1, e))?;
                    let d = Dim3::new(d[0], d[1], d[2]);
                    match HEADER_KEYS[k] {
                        "grid" => info.grid = d,
                        "block" => info.block = d,
                        _ => info.cluster = d,
                    }
                }
                "after" => {
                    for i in 1..self.toks.len() {
                        let d = self.u32_at(i)?;
                        if d >= id {
                            return Err(self.err_tok(
                                Invalid,
                                i,
                                format!("kernel {id} cannot depend on kernel {d}: dependencies must come earlier"),
                            ));
                        }
                        info.deps.push(d);
                    }
                }
                "ops" => {
                    for i in 1..self.toks.len() {
                        ops.intern(self.tok(i)).map_err(|e| self.err_tok(Unsupported, i, e))?;
                    }
                }
                "group" => {
                    self.expect_len(3, "group NAME pK")?;
                    let param = self
                        .bare(2)
                        .and_then(|t| t.strip_prefix('p'))
                        .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
                        .and_then(|d| d.parse::<u8>().ok())
                        .ok_or_else(|| {
                            self.err_tok(Syntax, 2, format!("expected a parameter `pK`, found `{}`", self.tok(2)))
                        })?;
                    let g = crate::CtaGroup { name: self.tok(1).to_string(), param };
                    g.check().map_err(|e| self.err_tok(Invalid, if e.contains("parameter") { 2 } else { 1 }, e))?;
                    info.cta_group = Some(g);
                }
                key => {
                    self.expect_len(2, &format!("{key} N"))?;
                    let v = self.u32_at(1)?;
                    match key {
                        "regs" => info.regs_per_thread = v,
                        "smem" => info.smem_bytes = v,
                        "stream" => info.stream = v,
                        _ => info.sm_version = v,
                    }
                }
            }
        }
        for (k, what) in [(0, "grid"), (1, "block")] {
            if !seen[k] {
                return Err(self.err(
                    Syntax,
                    self.kernel_line,
                    1,
                    format!("kernel `{}` has no `{what}` line", self.kernel_name),
                ));
            }
        }
        self.warps = info.warps_per_cta();
        // Kernel-level programs and the default layout, up to the first `cta` section or `end`.
        let mut programs = Vec::new();
        let mut layout = vec![None; self.warps as usize];
        let mut any_warps = false;
        loop {
            match self.bare(0) {
                Some("program") => {
                    let (name, p) = self.parse_program(&mut ops)?;
                    self.kernel_names.insert(name, programs.len() as u32);
                    programs.push(p);
                    self.total_programs += 1;
                }
                Some("warps") => {
                    let scope = Scope { kernel: programs.len(), local: None };
                    self.parse_warps(&mut layout, &scope)?;
                    any_warps = true;
                }
                Some("cta") => {
                    self.pending_cta = Some(self.cta_line(info.grid)?);
                    break;
                }
                Some("end") => {
                    self.expect_len(1, "end")?;
                    self.in_kernel = false;
                    break;
                }
                Some(kw) if HEADER_KEYS.contains(&kw) => {
                    return Err(self.err_tok(
                        Syntax,
                        0,
                        format!("`{kw}` must come before the kernel's programs and layout"),
                    ));
                }
                _ => {
                    return Err(self.err_tok(
                        Syntax,
                        0,
                        format!("expected `program`, `warps`, `cta` or `end`, found `{}`", self.tok(0)),
                    ));
                }
            }
            if !self.next_line()? {
                return Err(self.not_closed());
            }
        }
        let default = if any_warps {
            if let Some(g) = Self::gaps(&layout) {
                return Err(self.err_tok(Invalid, 0, format!("warps {g} have no program in the default layout")));
            }
            layout.into_iter().flatten().collect()
        } else {
            Vec::new()
        };
        self.kernel_programs = programs.len();
        Ok(Some(KernelHead { info, ops, programs, default, at: self.loc(self.kernel_line, 1) }))
    }

    fn read_section(&mut self, head: &mut KernelHead) -> Result<Option<Section>, TraceError> {
        if !self.in_kernel {
            return Ok(None);
        }
        let linear = match self.pending_cta.take() {
            Some(l) => l,
            None => {
                if !self.next_line()? {
                    return Err(self.not_closed());
                }
                match self.bare(0) {
                    Some("cta") => self.cta_line(head.info.grid)?,
                    Some("end") => {
                        self.expect_len(1, "end")?;
                        self.in_kernel = false;
                        return Ok(None);
                    }
                    Some(kw @ ("program" | "warps")) => {
                        return Err(self.err_tok(Syntax, 0, format!("kernel-level `{kw}` after a `cta` section")));
                    }
                    _ => {
                        return Err(self.err_tok(
                            Syntax,
                            0,
                            format!("expected `cta` or `end`, found `{}`", self.tok(0)),
                        ));
                    }
                }
            }
        };
        let start = self.line_no;
        let base = self.total_programs;
        let mut locals: Vec<Arc<Program>> = Vec::new();
        let mut names: HashMap<String, u32> = HashMap::new();
        let mut layout = vec![None; self.warps as usize];
        loop {
            if !self.next_line()? {
                return Err(self.eof(format!("the `cta` section at line {start} is never closed with `end`")));
            }
            match self.bare(0) {
                Some("program") => {
                    let (name, p) = self.parse_program(&mut head.ops)?;
                    names.insert(name, locals.len() as u32);
                    locals.push(p);
                    self.total_programs += 1;
                }
                Some("warps") => {
                    let scope = Scope { kernel: self.kernel_programs, local: Some((base, locals.len(), &names)) };
                    self.parse_warps(&mut layout, &scope)?;
                }
                Some("end") => {
                    self.expect_len(1, "end")?;
                    break;
                }
                _ => {
                    return Err(self.err_tok(
                        Syntax,
                        0,
                        format!("expected `program`, `warps` or `end` in a `cta` section, found `{}`", self.tok(0)),
                    ));
                }
            }
        }
        if let Some(g) = Self::gaps(&layout) {
            return Err(self.err_tok(Invalid, 0, format!("warps {g} of this `cta` section have no program")));
        }
        Ok(Some(Section { linear, locals, warps: layout.into_iter().flatten().collect() }))
    }

    fn here(&self) -> Location {
        self.loc(self.line_no, 1)
    }
}

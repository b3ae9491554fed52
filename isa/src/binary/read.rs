//! The binary reader.

use std::io::{ErrorKind, Read};
use std::sync::Arc;

use super::format::*;
use crate::error::{Location, TraceError, TraceErrorKind};
use crate::kernel::{Dim3, KernelInfo, OpTable};
use crate::program::{
    AddrExpr, CtaParam, Inst, Lanes, MAX_LOOP_DEPTH, MAX_PARAMS, MemRef, NUM_VARS, Program, Step, TripCount,
};
use crate::reg::{Reg, RegRange};
use crate::text::common::{check_block, check_cluster, check_grid, check_loop_vars, check_program, check_reg_range};
use crate::text::stream::{KernelHead, Parser, Section};

use TraceErrorKind::{Invalid, Io, Syntax, Truncated, Unsupported};

pub(crate) struct BinParser<R> {
    file: String,
    input: R,
    pos: u64,
    started: bool,
    done: bool,
    in_kernel: bool,
    last_cta: Option<u64>,
    num_ctas: u64,
    warps: u32,
    kernel_programs: usize,
    /// Format version of the input (set by the header).
    version: u32,
}

type Res<T> = Result<T, TraceError>;

impl<R: Read> BinParser<R> {
    pub(crate) fn new(file: String, input: R) -> Self {
        BinParser {
            file,
            input,
            pos: 0,
            started: false,
            done: false,
            in_kernel: false,
            last_cta: None,
            version: VERSION,
            num_ctas: 0,
            warps: 0,
            kernel_programs: 0,
        }
    }

    /// Bytes read so far.
    pub(crate) fn offset(&self) -> u64 {
        self.pos
    }

    fn err(&self, kind: TraceErrorKind, at: u64, msg: impl Into<String>) -> TraceError {
        TraceError::new(kind, Location { file: self.file.clone(), line: 0, col: at }, msg)
    }

    fn byte_opt(&mut self) -> Res<Option<u8>> {
        let mut b = [0u8];
        loop {
            match self.input.read(&mut b) {
                Ok(0) => return Ok(None),
                Ok(_) => {
                    self.pos += 1;
                    return Ok(Some(b[0]));
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(self.err(Io, self.pos, format!("read error: {e}"))),
            }
        }
    }

    fn byte(&mut self, what: &str) -> Res<u8> {
        self.byte_opt()?
            .ok_or_else(|| self.err(Truncated, self.pos, format!("unexpected end of input: expected {what}")))
    }

    fn uv(&mut self, what: &str) -> Res<u64> {
        let start = self.pos;
        let mut v = 0u64;
        for i in 0..10 {
            let b = self.byte(what)?;
            if i == 9 && b > 1 {
                break;
            }
            v |= ((b & 0x7F) as u64) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(self.err(Syntax, start, format!("varint for {what} is longer than 64 bits")))
    }

    fn u32v(&mut self, what: &str) -> Res<u32> {
        let start = self.pos;
        let v = self.uv(what)?;
        u32::try_from(v).map_err(|_| self.err(Syntax, start, format!("{what} {v} does not fit in 32 bits")))
    }

    fn zz(&mut self, what: &str) -> Res<i64> {
        Ok(unzigzag(self.uv(what)?))
    }

    fn string(&mut self, what: &str) -> Res<String> {
        let start = self.pos;
        let len = self.uv(what)?;
        if len > MAX_STRING {
            return Err(self.err(Unsupported, start, format!("{what} is {len} bytes long, more than {MAX_STRING}")));
        }
        let mut v = Vec::new();
        let got = (&mut self.input)
            .take(len)
            .read_to_end(&mut v)
            .map_err(|e| self.err(Io, self.pos, format!("read error: {e}")))?;
        self.pos += got as u64;
        if (got as u64) < len {
            return Err(self.err(Truncated, self.pos, format!("unexpected end of input inside {what}")));
        }
        String::from_utf8(v).map_err(|_| self.err(Syntax, start, format!("{what} is not valid UTF-8")))
    }

    fn dim3(&mut self, what: &str, check: fn([u32; 3]) -> Result<(), String>) -> Res<Dim3> {
        let start = self.pos;
        let d = [self.u32v(what)?, self.u32v(what)?, self.u32v(what)?];
        check(d).map_err(|e| self.err(Invalid, start, e))?;
        Ok(Dim3::new(d[0], d[1], d[2]))
    }

    fn read_header(&mut self) -> Res<()> {
        for (i, &m) in MAGIC.iter().enumerate() {
            let b = self.byte_opt()?.ok_or_else(|| {
                let msg =
                    if i == 0 { "empty input: expected a gpusim binary trace" } else { "input ends inside the magic" };
                self.err(Truncated, self.pos, msg)
            })?;
            if b != m {
                return Err(self.err(Syntax, 0, "not a gpusim binary trace (the magic `GPUSIMTB` is missing)"));
            }
        }
        let mut v = [0u8; 4];
        for b in &mut v {
            *b = self.byte("the format version")?;
        }
        let v = u32::from_le_bytes(v);
        if !(MIN_VERSION..=VERSION).contains(&v) {
            return Err(self.err(
                Unsupported,
                MAGIC.len() as u64,
                format!("binary trace format version {v} is not supported (this reader reads versions {MIN_VERSION} to {VERSION})"),
            ));
        }
        self.version = v;
        Ok(())
    }

    /// A coefficient bitmap and the non-zero coefficients (version 1: a byte over the first 8
    /// variables; later: a varint over all [`NUM_VARS`]).
    fn coefs(&mut self, coef: &mut [i64; NUM_VARS]) -> Res<()> {
        let at = self.pos;
        let bits = if self.version == 1 {
            self.byte("an expression's variable bitmap")? as u64
        } else {
            self.uv("a variable bitmap")?
        };
        if bits >> NUM_VARS != 0 {
            return Err(self.err(Invalid, at, format!("variable bitmap {bits:#x} names unknown variables")));
        }
        for (v, c) in coef.iter_mut().enumerate() {
            if bits & (1 << v) != 0 {
                *c = self.zz("a coefficient")?;
            }
        }
        Ok(())
    }

    /// Reads `n` mnemonics into the table; each must be new.
    fn opcodes(&mut self, ops: &mut OpTable) -> Res<()> {
        let n = self.u32v("an opcode count")?;
        for _ in 0..n {
            let start = self.pos;
            let m = self.string("an opcode mnemonic")?;
            let before = ops.len();
            ops.intern(&m).map_err(|e| self.err(Unsupported, start, e))?;
            if ops.len() == before {
                return Err(self.err(Invalid, start, format!("opcode `{m}` is listed twice")));
            }
        }
        Ok(())
    }

    fn reg(&mut self) -> Res<RegRange> {
        let start = self.pos;
        let v = self.u32v("a register")?;
        if v == 0 {
            return Ok(RegRange::NONE);
        }
        let first = (v >> 1).checked_sub(1).and_then(|f| u16::try_from(f).ok());
        let Some(first) = first else {
            return Err(self.err(Syntax, start, format!("bad register code {v}")));
        };
        let count = if v & 1 == 1 {
            let c = self.byte("a register count")?;
            if c < 2 {
                return Err(self.err(Syntax, start, format!("bad register count {c}")));
            }
            c
        } else {
            1
        };
        let r = RegRange { first: Reg(first), count };
        check_reg_range(r).map_err(|e| self.err(Invalid, start, e))?;
        Ok(r)
    }

    fn program(&mut self, ops: &OpTable) -> Res<Arc<Program>> {
        let start = self.pos;
        let name = self.string("a program name")?;
        let n = self.u32v("an expression count")? as usize;
        let mut exprs = Vec::with_capacity(n.min(MAX_PREALLOC));
        for _ in 0..n {
            let mut e = AddrExpr::constant(self.uv("an expression base")?);
            self.coefs(&mut e.coef)?;
            exprs.push(e);
        }
        let n = self.u32v("a lane offset count")? as usize;
        let mut lane_offsets = Vec::with_capacity(n.min(MAX_PREALLOC));
        for _ in 0..n {
            lane_offsets.push(self.zz("a lane offset")?);
        }
        let mut tables: Vec<Arc<[i64]>> = Vec::new();
        let mut params = Vec::new();
        if self.version >= 2 {
            let n = self.u32v("a table count")? as usize;
            for _ in 0..n {
                let len = self.u32v("a table length")? as usize;
                let mut t = Vec::with_capacity(len.min(MAX_PREALLOC));
                for _ in 0..len {
                    t.push(self.zz("a table entry")?);
                }
                tables.push(t.into());
            }
            let at = self.pos;
            let n = self.u32v("a parameter count")? as usize;
            if n > MAX_PARAMS {
                return Err(self.err(Unsupported, at, format!("{n} parameters, at most {MAX_PARAMS} allowed")));
            }
            for _ in 0..n {
                let mut q = CtaParam::constant(self.zz("a parameter offset")?);
                self.coefs(&mut q.coef)?;
                q.div = self.zz("a parameter divisor")?;
                q.lo = self.zz("a parameter lower bound")?;
                q.hi = self.zz("a parameter upper bound")?;
                let t = self.uv("a parameter table")?;
                q.table = if t == 0 { None } else { Some(u32::try_from(t - 1).unwrap_or(u32::MAX)) };
                params.push(q);
            }
        }
        let n = self.u32v("a step count")? as usize;
        let mut steps = Vec::with_capacity(n.min(MAX_PREALLOC));
        let mut open: Vec<usize> = Vec::new();
        for _ in 0..n {
            let at = self.pos;
            let tag = self.byte("a step")?;
            match tag {
                STEP_LOOP => {
                    let count = self.u32v("a loop count")?;
                    if open.len() >= MAX_LOOP_DEPTH {
                        return Err(self.err(Unsupported, at, format!("loops nest deeper than {MAX_LOOP_DEPTH}")));
                    }
                    open.push(steps.len());
                    steps.push(Step::Loop { count: TripCount::Fixed(count), end: 0 });
                }
                STEP_LOOP_PARAM if self.version >= 2 => {
                    let k = self.byte("a loop's parameter")?;
                    if open.len() >= MAX_LOOP_DEPTH {
                        return Err(self.err(Unsupported, at, format!("loops nest deeper than {MAX_LOOP_DEPTH}")));
                    }
                    if k as usize >= params.len() {
                        return Err(self.err(Invalid, at, format!("loop count p{k} is not defined")));
                    }
                    open.push(steps.len());
                    steps.push(Step::Loop { count: TripCount::Param(k), end: 0 });
                }
                STEP_END_LOOP => {
                    let Some(s) = open.pop() else {
                        return Err(self.err(Syntax, at, "end of loop without a loop"));
                    };
                    let end = steps.len() as u32;
                    if let Step::Loop { count, .. } = steps[s] {
                        steps[s] = Step::Loop { count, end };
                    }
                    steps.push(Step::EndLoop { start: s as u32 });
                }
                _ => {
                    let inst = self.inst(tag, at, ops, &exprs, lane_offsets.len(), open.len())?;
                    steps.push(Step::Inst(inst));
                }
            }
        }
        if !open.is_empty() {
            return Err(self.err(Syntax, self.pos, format!("program `{name}` ends inside {} loop(s)", open.len())));
        }
        let mut p = Program { name, steps, exprs, lane_offsets, params, tables };
        check_program(&p, ops.len()).map_err(|e| self.err(Invalid, start, format!("program `{}`: {e}", p.name)))?;
        p.drop_empty_loops();
        Ok(Arc::new(p))
    }

    fn inst(&mut self, tag: u8, at: u64, ops: &OpTable, exprs: &[AddrExpr], noffs: usize, depth: usize) -> Res<Inst> {
        let regs = tag >> 4;
        if regs > 14 {
            return Err(self.err(Syntax, at, format!("bad step tag {tag:#04x}")));
        }
        let (nd, ns) = ((regs / 5) as usize, (regs % 5) as usize);
        let op_at = self.pos;
        let op = self.u32v("an opcode id")?;
        let op = u16::try_from(op)
            .ok()
            .filter(|&o| (o as usize) < ops.len())
            .ok_or_else(|| self.err(Invalid, op_at, format!("opcode id {op} is not in the kernel's table")))?;
        let mut inst = Inst::new(op);
        if tag & INST_MASK != 0 {
            let mut m = [0u8; 4];
            for b in &mut m {
                *b = self.byte("an active mask")?;
            }
            inst.mask = u32::from_le_bytes(m);
        }
        for d in &mut inst.dst[..nd] {
            *d = self.reg()?;
        }
        for s in &mut inst.src[..ns] {
            *s = self.reg()?;
        }
        if tag & INST_MEM != 0 {
            let f_at = self.pos;
            let flags = self.uv("memory operand flags")?;
            if flags & !(3 | MEM_BULK) != 0 || flags & 3 == 3 {
                return Err(self.err(Syntax, f_at, format!("bad memory operand flags {flags:#x}")));
            }
            let a_at = self.pos;
            let addr = self.u32v("an expression index")?;
            let Some(e) = exprs.get(addr as usize) else {
                return Err(self.err(Invalid, a_at, format!("expression {addr} does not exist")));
            };
            check_loop_vars(&e.coef, depth).map_err(|m| self.err(Invalid, a_at, m))?;
            let lanes = match flags & 3 {
                LANES_DEFAULT => Lanes::Stride(ops.get(op).width as i32),
                LANES_STRIDE => {
                    let s_at = self.pos;
                    let s = self.zz("a lane stride")?;
                    Lanes::Stride(
                        i32::try_from(s)
                            .map_err(|_| self.err(Syntax, s_at, format!("lane stride {s} out of range")))?,
                    )
                }
                _ => {
                    let s_at = self.pos;
                    let start = self.u32v("a lane offset index")?;
                    if start as u64 + inst.mask.count_ones() as u64 > noffs as u64 {
                        return Err(self.err(Invalid, s_at, format!("lane offsets {start}.. out of range")));
                    }
                    Lanes::Offsets { start }
                }
            };
            let bulk_bytes = if flags & MEM_BULK != 0 { self.u32v("a byte count")? } else { 0 };
            inst.mem = Some(MemRef { addr, lanes, bulk_bytes });
        }
        if tag & INST_IMM != 0 {
            let i_at = self.pos;
            let v = self.zz("an immediate")?;
            inst.imm = i32::try_from(v).map_err(|_| self.err(Syntax, i_at, format!("immediate {v} out of range")))?;
        }
        if tag & INST_PC != 0 {
            inst.pc = self.u32v("a program counter")?;
        }
        Ok(inst)
    }

    /// Reads layout runs over `visible` programs. The total must be the CTA's warp count, or 0
    /// when `allow_empty`.
    fn layout(&mut self, visible: usize, allow_empty: bool) -> Res<Vec<u32>> {
        let start = self.pos;
        let runs = self.u32v("a layout run count")?;
        let w = self.warps as usize;
        let mut l = Vec::with_capacity(w);
        for _ in 0..runs {
            let p_at = self.pos;
            let p = self.u32v("a program index")?;
            if p as usize >= visible {
                return Err(self.err(Invalid, p_at, format!("program {p} does not exist here")));
            }
            let n_at = self.pos;
            let n = self.u32v("a warp count")? as usize;
            if n == 0 || l.len() + n > w {
                return Err(self.err(
                    Invalid,
                    n_at,
                    format!("layout run of {n} warps does not fit the CTA's {w} warps"),
                ));
            }
            l.resize(l.len() + n, p);
        }
        if l.len() != w && !(allow_empty && l.is_empty()) {
            return Err(self.err(Invalid, start, format!("layout covers {} of the CTA's {w} warps", l.len())));
        }
        Ok(l)
    }
}

impl<R: Read> Parser for BinParser<R> {
    fn read_head(&mut self, id: u32) -> Res<Option<KernelHead>> {
        if !self.started {
            self.read_header()?;
            self.started = true;
        }
        if self.done {
            return Ok(None);
        }
        if self.in_kernel {
            return Err(self.err(Invalid, self.pos, "internal error: the previous kernel was not read to its end"));
        }
        let at = self.pos;
        let tag = self.byte("a kernel record or the end-of-trace record")?;
        match tag {
            TAG_END_TRACE => {
                self.done = true;
                if self.byte_opt()?.is_some() {
                    return Err(self.err(Syntax, self.pos - 1, "trailing bytes after the end-of-trace record"));
                }
                return Ok(None);
            }
            TAG_KERNEL => {}
            t => {
                return Err(self.err(
                    Syntax,
                    at,
                    format!("unknown record tag {t:#04x} (expected a kernel or the end of the trace)"),
                ));
            }
        }
        let name = self.string("a kernel name")?;
        let mut info = KernelInfo::new(id, name, Dim3::ONE, Dim3::ONE);
        info.grid = self.dim3("the grid", check_grid)?;
        info.block = self.dim3("the block", check_block)?;
        info.cluster = self.dim3("the cluster", check_cluster)?;
        info.regs_per_thread = self.u32v("registers per thread")?;
        info.smem_bytes = self.u32v("shared memory bytes")?;
        info.stream = self.u32v("a stream")?;
        info.sm_version = self.u32v("an sm version")?;
        if self.version >= 3 && self.byte("the CTA group flag")? != 0 {
            let at = self.pos;
            let name = self.string("a CTA group name")?;
            let param = self.byte("a CTA group parameter")?;
            let g = crate::CtaGroup { name, param };
            g.check().map_err(|e| self.err(Invalid, at, e))?;
            info.cta_group = Some(g);
        }
        let n = self.u32v("a dependency count")?;
        for _ in 0..n {
            let d_at = self.pos;
            let d = self.u32v("a dependency")?;
            if d >= id {
                return Err(self.err(
                    Invalid,
                    d_at,
                    format!("kernel {id} cannot depend on kernel {d}: dependencies must come earlier"),
                ));
            }
            info.deps.push(d);
        }
        let mut ops = OpTable::new();
        self.opcodes(&mut ops)?;
        self.warps = info.warps_per_cta();
        self.num_ctas = info.num_ctas();
        let n = self.u32v("a program count")? as usize;
        let mut programs = Vec::with_capacity(n.min(MAX_PREALLOC));
        for _ in 0..n {
            programs.push(self.program(&ops)?);
        }
        let default = self.layout(programs.len(), true)?;
        self.kernel_programs = programs.len();
        self.in_kernel = true;
        self.last_cta = None;
        Ok(Some(KernelHead {
            info,
            ops,
            programs,
            default,
            at: Location { file: self.file.clone(), line: 0, col: at },
        }))
    }

    fn read_section(&mut self, head: &mut KernelHead) -> Res<Option<Section>> {
        if !self.in_kernel {
            return Ok(None);
        }
        let at = self.pos;
        match self.byte("a `cta` section or the end of the kernel")? {
            TAG_END_KERNEL => {
                self.in_kernel = false;
                return Ok(None);
            }
            TAG_CTA => {}
            t => {
                return Err(self.err(
                    Syntax,
                    at,
                    format!("unknown record tag {t:#04x} (expected a `cta` section or the end of the kernel)"),
                ));
            }
        }
        let d_at = self.pos;
        let delta = self.uv("a CTA index delta")?;
        let linear = self.last_cta.map_or(Some(0), |l| l.checked_add(1)).and_then(|b| b.checked_add(delta));
        let linear = linear.filter(|&l| l < self.num_ctas).ok_or_else(|| {
            self.err(Invalid, d_at, format!("`cta` section is outside the grid of {} CTAs", self.num_ctas))
        })?;
        self.last_cta = Some(linear);
        self.opcodes(&mut head.ops)?;
        let n = self.u32v("a program count")? as usize;
        let mut locals = Vec::with_capacity(n.min(MAX_PREALLOC));
        for _ in 0..n {
            locals.push(self.program(&head.ops)?);
        }
        let warps = self.layout(self.kernel_programs + locals.len(), false)?;
        Ok(Some(Section { linear, locals, warps }))
    }

    fn here(&self) -> Location {
        Location { file: self.file.clone(), line: 0, col: self.pos }
    }
}

//! The text writer.

use std::fmt::Write as _;
use std::io::{self, Write};

use super::common::{NameScope, Plan, check_kernel_for_write};
use super::lex::{format_expr, write_token};
use crate::kernel::{Dim3, KernelTrace, OpTable};
use crate::program::{Inst, Lanes, Program, Step, TripCount};
use crate::reg::RegRange;

/// Flush the text buffer to the output when it grows past this.
const FLUSH_AT: usize = 1 << 16;

/// Writes kernels one at a time in the text form. [`TextWriter::finish`] flushes.
pub struct TextWriter<W: Write> {
    out: W,
    kernels: usize,
    buf: String,
    version: u32,
}

/// Whether a kernel uses version-2 features (parameters, tables, parameter loops).
pub(crate) fn kernel_needs_v2(k: &KernelTrace) -> bool {
    k.info.cta_group.is_some() || k.programs.iter().any(|p| !p.params.is_empty() || !p.tables.is_empty())
}

impl<W: Write> TextWriter<W> {
    /// Starts a trace: writes the `gpusim-trace 1` line. Such a writer refuses kernels with
    /// per-CTA parameters; use [`TextWriter::with_version`] with version 2 for those.
    pub fn new(out: W) -> io::Result<Self> {
        Self::with_version(out, 1)
    }

    /// Starts a trace of format `version` (1 or 2; others are written as 2).
    pub fn with_version(mut out: W, version: u32) -> io::Result<Self> {
        let version = if version == 1 { 1 } else { super::VERSION };
        writeln!(out, "{} {version}", super::parse::MAGIC)?;
        Ok(TextWriter { out, kernels: 0, buf: String::new(), version })
    }

    /// Appends a kernel. Its `info.id` must be the number of kernels written before it. Fails
    /// with [`io::ErrorKind::InvalidInput`] when the kernel is not well formed or cannot be read
    /// back equal (see docs/trace-format.md, "Writing").
    pub fn write_kernel(&mut self, k: &KernelTrace) -> io::Result<()> {
        check_kernel_for_write(k, self.kernels).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        if self.version < 2 && kernel_needs_v2(k) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "kernel `{}` uses per-CTA parameters: the trace needs format version 2 (TextWriter::with_version)",
                    k.info.name
                ),
            ));
        }
        let info = &k.info;
        let b = &mut self.buf;
        b.push_str("\nkernel ");
        write_token(&info.name, b);
        b.push('\n');
        dim(b, "grid", info.grid);
        dim(b, "block", info.block);
        if info.cluster != Dim3::ONE {
            dim(b, "cluster", info.cluster);
        }
        for (key, v, default) in
            [("regs", info.regs_per_thread, 32), ("smem", info.smem_bytes, 0), ("stream", info.stream, 0)]
        {
            if v != default {
                let _ = writeln!(b, "  {key} {v}");
            }
        }
        if !info.deps.is_empty() {
            b.push_str("  after");
            for d in &info.deps {
                let _ = write!(b, " {d}");
            }
            b.push('\n');
        }
        if info.sm_version != 0 {
            let _ = writeln!(b, "  sm {}", info.sm_version);
        }
        if let Some(g) = &info.cta_group {
            let _ = writeln!(b, "  group {} p{}", g.name, g.param);
        }
        if !ops_in_appearance_order(k) {
            b.push_str("  ops");
            for (_, d) in k.ops.iter() {
                b.push(' ');
                write_token(&d.mnemonic, b);
            }
            b.push('\n');
        }
        let plan = Plan::new(k);
        let scope = NameScope::new(&k.programs, plan.kernel_level);
        for p in &k.programs[..plan.kernel_level] {
            write_program(&mut self.buf, p, &k.ops, 1);
            self.flush_some()?;
        }
        let b = &mut self.buf;
        write_layout(b, k, &scope, &k.layout.default, 0..0, 1);
        for ((&cta, l), locals) in k.layout.overrides.iter().zip(&plan.locals) {
            let b = &mut self.buf;
            let c = info.grid.unlinear(cta);
            let _ = writeln!(b, "  cta {} {} {}", c.x, c.y, c.z);
            for p in &k.programs[locals.clone()] {
                write_program(&mut self.buf, p, &k.ops, 2);
            }
            let b = &mut self.buf;
            write_layout(b, k, &scope, l, locals.clone(), 2);
            b.push_str("  end\n");
            self.flush_some()?;
        }
        self.buf.push_str("end\n");
        self.kernels += 1;
        self.flush_some()
    }

    fn flush_some(&mut self) -> io::Result<()> {
        if self.buf.len() >= FLUSH_AT {
            self.out.write_all(self.buf.as_bytes())?;
            self.buf.clear();
        }
        Ok(())
    }

    /// Writes out what is buffered, flushes, and returns the output.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.write_all(self.buf.as_bytes())?;
        self.buf.clear();
        self.out.flush()?;
        Ok(self.out)
    }
}

fn dim(b: &mut String, key: &str, d: Dim3) {
    let _ = writeln!(b, "  {key} {} {} {}", d.x, d.y, d.z);
}

/// Whether reading the programs in order interns the opcodes in table order, so that no `ops`
/// line is needed.
fn ops_in_appearance_order(k: &KernelTrace) -> bool {
    let mut next = 0usize;
    let mut seen = vec![false; k.ops.len()];
    for p in &k.programs {
        for s in &p.steps {
            if let Step::Inst(i) = s
                && !seen[i.op as usize]
            {
                if i.op as usize != next {
                    return false;
                }
                seen[next] = true;
                next += 1;
            }
        }
    }
    next == k.ops.len()
}

fn write_layout(
    b: &mut String,
    k: &KernelTrace,
    scope: &NameScope,
    l: &[u32],
    locals: std::ops::Range<usize>,
    depth: usize,
) {
    let mut w = 0;
    while w < l.len() {
        let p = l[w];
        let s = w;
        while w < l.len() && l[w] == p {
            w += 1;
        }
        indent(b, depth);
        if w - 1 == s {
            let _ = write!(b, "warps {s} ");
        } else {
            let _ = write!(b, "warps {s}..{} ", w - 1);
        }
        if scope.name_resolves(&k.programs, locals.clone(), p) {
            write_token(&k.programs[p as usize].name, b);
        } else {
            let _ = write!(b, "%{p}");
        }
        b.push('\n');
    }
}

fn indent(b: &mut String, depth: usize) {
    for _ in 0..depth {
        b.push_str("  ");
    }
}

fn write_program(b: &mut String, p: &Program, ops: &OpTable, depth: usize) {
    indent(b, depth);
    b.push_str("program ");
    write_token(&p.name, b);
    b.push('\n');
    let mut d = depth + 1;
    for (t, tab) in p.tables.iter().enumerate() {
        indent(b, d);
        let _ = write!(b, "table t{t} =");
        for v in tab.iter() {
            let _ = write!(b, " {v}");
        }
        b.push('\n');
    }
    for (k, q) in p.params.iter().enumerate() {
        indent(b, d);
        let _ = write!(b, "param p{k} = ");
        super::param::format_param(q, b);
        b.push('\n');
    }
    for s in &p.steps {
        match s {
            Step::Inst(i) => {
                indent(b, d);
                write_inst(b, p, i, ops);
                b.push('\n');
            }
            Step::Loop { count, .. } => {
                indent(b, d);
                match count {
                    TripCount::Fixed(n) => writeln!(b, "loop {n}"),
                    TripCount::Param(k) => writeln!(b, "loop p{k}"),
                }
                .ok();
                d += 1;
            }
            Step::EndLoop { .. } => {
                d -= 1;
                indent(b, d);
                b.push_str("end\n");
            }
        }
    }
    indent(b, depth);
    b.push_str("end\n");
}

fn used(regs: &[RegRange]) -> &[RegRange] {
    let n = regs.iter().rposition(|r| !r.is_none()).map_or(0, |i| i + 1);
    &regs[..n]
}

fn write_inst(b: &mut String, p: &Program, i: &Inst, ops: &OpTable) {
    if i.mask != u32::MAX {
        let _ = write!(b, "@{:08x} ", i.mask);
    }
    let desc = ops.get(i.op);
    write_token(&desc.mnemonic, b);
    for r in used(&i.dst) {
        let _ = write!(b, " {r}");
    }
    let src = used(&i.src);
    if !src.is_empty() {
        b.push_str(" <-");
        for r in src {
            let _ = write!(b, " {r}");
        }
    }
    if let Some(m) = i.mem {
        b.push_str(" addr=");
        format_expr(&p.exprs[m.addr as usize], b);
        match m.lanes {
            Lanes::Stride(s) if s == desc.width as i32 => {}
            Lanes::Stride(s) => {
                let _ = write!(b, " lanes={s}");
            }
            Lanes::Offsets { start } => {
                b.push_str(" lanes=[");
                let n = i.mask.count_ones() as usize;
                for (j, o) in p.lane_offsets[start as usize..start as usize + n].iter().enumerate() {
                    if j > 0 {
                        b.push(',');
                    }
                    let _ = write!(b, "{o}");
                }
                b.push(']');
            }
        }
        if m.bulk_bytes != 0 {
            let _ = write!(b, " bytes={}", m.bulk_bytes);
        }
    }
    if i.imm != 0 {
        let _ = write!(b, " imm={}", i.imm);
    }
    if i.pc != 0 {
        let _ = write!(b, " pc={:#x}", i.pc);
    }
}

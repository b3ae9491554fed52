//! The binary writer.

use std::io::{self, Write};

use super::format::*;
use crate::kernel::{KernelTrace, OpTable};
use crate::program::{Lanes, NUM_VARS, Program, Step, TripCount};
use crate::reg::RegRange;
use crate::text::common::{Plan, check_kernel_for_write};

/// Writes kernels one at a time in the binary form. [`BinaryWriter::finish`] writes the
/// end-of-trace record; a trace without it reads as truncated.
pub struct BinaryWriter<W: Write> {
    out: W,
    kernels: usize,
    buf: Vec<u8>,
}

impl<W: Write> BinaryWriter<W> {
    /// Starts a trace: writes the magic and the version.
    pub fn new(mut out: W) -> io::Result<Self> {
        out.write_all(MAGIC)?;
        out.write_all(&VERSION.to_le_bytes())?;
        Ok(BinaryWriter { out, kernels: 0, buf: Vec::new() })
    }

    /// Appends a kernel. Its `info.id` must be the number of kernels written before it. Fails
    /// with [`io::ErrorKind::InvalidInput`] when the kernel is not well formed.
    pub fn write_kernel(&mut self, k: &KernelTrace) -> io::Result<()> {
        check_kernel_for_write(k, self.kernels).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let info = &k.info;
        let b = &mut self.buf;
        b.clear();
        b.push(TAG_KERNEL);
        put_str(b, &info.name);
        for d in [info.grid, info.block, info.cluster] {
            for v in d.as_array() {
                put_uv(b, v as u64);
            }
        }
        for v in [info.regs_per_thread, info.smem_bytes, info.stream, info.sm_version] {
            put_uv(b, v as u64);
        }
        match &info.cta_group {
            None => b.push(0),
            Some(g) => {
                b.push(1);
                put_str(b, &g.name);
                b.push(g.param);
            }
        }
        put_uv(b, info.deps.len() as u64);
        for &d in &info.deps {
            put_uv(b, d as u64);
        }
        put_uv(b, k.ops.len() as u64);
        for (_, d) in k.ops.iter() {
            put_str(b, &d.mnemonic);
        }
        let plan = Plan::new(k);
        let kl = plan.kernel_level;
        put_uv(b, kl as u64);
        for p in &k.programs[..kl] {
            put_program(b, p, &k.ops);
        }
        put_layout(b, &k.layout.default, |p| p);
        self.out.write_all(b)?;
        let mut prev: Option<u64> = None;
        for ((&cta, l), locals) in k.layout.overrides.iter().zip(&plan.locals) {
            let b = &mut self.buf;
            b.clear();
            b.push(TAG_CTA);
            put_uv(b, cta - prev.map_or(0, |p| p + 1));
            prev = Some(cta);
            put_uv(b, 0); // no new opcodes: the kernel record has the whole table
            put_uv(b, locals.len() as u64);
            for p in &k.programs[locals.clone()] {
                put_program(b, p, &k.ops);
            }
            put_layout(b, l, |p| if (p as usize) < kl { p } else { (kl + p as usize - locals.start) as u32 });
            self.out.write_all(b)?;
        }
        self.out.write_all(&[TAG_END_KERNEL])?;
        self.kernels += 1;
        Ok(())
    }

    /// Writes the end-of-trace record, flushes, and returns the output.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.write_all(&[TAG_END_TRACE])?;
        self.out.flush()?;
        Ok(self.out)
    }
}

fn put_layout(b: &mut Vec<u8>, l: &[u32], map: impl Fn(u32) -> u32) {
    let mut runs = Vec::new();
    let mut w = 0;
    while w < l.len() {
        let s = w;
        while w < l.len() && l[w] == l[s] {
            w += 1;
        }
        runs.push((map(l[s]), w - s));
    }
    put_uv(b, runs.len() as u64);
    for (p, n) in runs {
        put_uv(b, p as u64);
        put_uv(b, n as u64);
    }
}

fn put_reg(b: &mut Vec<u8>, r: RegRange) {
    if r.is_none() {
        b.push(0);
    } else if r.count == 1 {
        put_uv(b, (r.first.0 as u64 + 1) << 1);
    } else {
        put_uv(b, ((r.first.0 as u64 + 1) << 1) | 1);
        b.push(r.count);
    }
}

fn used(regs: &[RegRange]) -> &[RegRange] {
    let n = regs.iter().rposition(|r| !r.is_none()).map_or(0, |i| i + 1);
    &regs[..n]
}

fn put_program(b: &mut Vec<u8>, p: &Program, ops: &OpTable) {
    put_str(b, &p.name);
    fn put_coefs(b: &mut Vec<u8>, coef: &[i64; NUM_VARS]) {
        let mut bits = 0u64;
        for (v, &c) in coef.iter().enumerate() {
            if c != 0 {
                bits |= 1 << v;
            }
        }
        put_uv(b, bits);
        for &c in coef.iter().filter(|&&c| c != 0) {
            put_zz(b, c);
        }
    }
    put_uv(b, p.exprs.len() as u64);
    for e in &p.exprs {
        put_uv(b, e.base);
        put_coefs(b, &e.coef);
    }
    put_uv(b, p.lane_offsets.len() as u64);
    for &o in &p.lane_offsets {
        put_zz(b, o);
    }
    put_uv(b, p.tables.len() as u64);
    for t in &p.tables {
        put_uv(b, t.len() as u64);
        for &x in t.iter() {
            put_zz(b, x);
        }
    }
    put_uv(b, p.params.len() as u64);
    for q in &p.params {
        put_zz(b, q.offset);
        put_coefs(b, &q.coef);
        put_zz(b, q.div);
        put_zz(b, q.lo);
        put_zz(b, q.hi);
        put_uv(b, q.table.map_or(0, |t| t as u64 + 1));
    }
    put_uv(b, p.steps.len() as u64);
    for s in &p.steps {
        match s {
            Step::Loop { count: TripCount::Fixed(n), .. } => {
                b.push(STEP_LOOP);
                put_uv(b, *n as u64);
            }
            Step::Loop { count: TripCount::Param(k), .. } => {
                b.push(STEP_LOOP_PARAM);
                b.push(*k);
            }
            Step::EndLoop { .. } => b.push(STEP_END_LOOP),
            Step::Inst(i) => {
                let (dst, src) = (used(&i.dst), used(&i.src));
                let mut tag = ((dst.len() * 5 + src.len()) as u8) << 4;
                if i.mask != u32::MAX {
                    tag |= INST_MASK;
                }
                if i.mem.is_some() {
                    tag |= INST_MEM;
                }
                if i.imm != 0 {
                    tag |= INST_IMM;
                }
                if i.pc != 0 {
                    tag |= INST_PC;
                }
                b.push(tag);
                put_uv(b, i.op as u64);
                if i.mask != u32::MAX {
                    b.extend_from_slice(&i.mask.to_le_bytes());
                }
                for &r in dst.iter().chain(src) {
                    put_reg(b, r);
                }
                if let Some(m) = i.mem {
                    let width = ops.get(i.op).width as i32;
                    let (kind, extra) = match m.lanes {
                        Lanes::Stride(s) if s == width => (LANES_DEFAULT, None),
                        Lanes::Stride(s) => (LANES_STRIDE, Some(zigzag(s as i64))),
                        Lanes::Offsets { start } => (LANES_OFFSETS, Some(start as u64)),
                    };
                    put_uv(b, kind | if m.bulk_bytes != 0 { MEM_BULK } else { 0 });
                    put_uv(b, m.addr as u64);
                    if let Some(x) = extra {
                        put_uv(b, x);
                    }
                    if m.bulk_bytes != 0 {
                        put_uv(b, m.bulk_bytes as u64);
                    }
                }
                if i.imm != 0 {
                    put_zz(b, i.imm as i64);
                }
                if i.pc != 0 {
                    put_uv(b, i.pc as u64);
                }
            }
        }
    }
}

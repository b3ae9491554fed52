//! Random traces for the round-trip and binary tests, driven by a tape of numbers so that
//! proptest can shrink them (a shorter tape gives a smaller trace).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;

use gpusim_isa::program::{AddrExpr, CtaParam, Inst, Lanes, ProgramBuilder, Var};
use gpusim_isa::{CtaLayout, Dim3, KernelInfo, KernelTrace, OpTable, Program, Reg, RegRange, Trace};

pub struct Tape<'a> {
    data: &'a [u32],
    i: usize,
}

impl<'a> Tape<'a> {
    pub fn new(data: &'a [u32]) -> Self {
        Tape { data, i: 0 }
    }

    fn raw(&mut self) -> u32 {
        let v = self.data.get(self.i).copied().unwrap_or(0);
        self.i += 1;
        v
    }

    /// A number in `0..n` (0 once the tape is used up).
    pub fn pick(&mut self, n: u32) -> u32 {
        if n == 0 { 0 } else { self.raw() % n }
    }

    /// True one time in `one_in`; false once the tape is used up.
    pub fn chance(&mut self, one_in: u32) -> bool {
        one_in > 0 && self.pick(one_in) == one_in - 1
    }

    pub fn u64(&mut self) -> u64 {
        ((self.raw() as u64) << 32) | self.raw() as u64
    }

    pub fn i64(&mut self) -> i64 {
        // Mix small and huge magnitudes.
        match self.pick(3) {
            0 => self.pick(4096) as i64 - 2048,
            _ => self.u64() as i64,
        }
    }
}

const MNEMONICS: &[&str] = &[
    "FFMA",
    "LDG.E.128",
    "STG.E",
    "LDS",
    "HMMA.16816.F32.BF16",
    "BAR.SYNC.DEFER_BLOCKING",
    "UBLKCP.S.G",
    "DEPBAR.LE",
    "FROB.X",
    "end",
    "loop",
    "warps",
    "@at",
    "has space",
    "quo\"te\\",
    "%pct",
    "",
    "é.Ü",
    "a=b",
    "<-",
];

const NAMES: &[&str] =
    &["main", "main", "p1", "", "a b", "#hash", "%3", "end", "x\ny", "tab\t", "ü", "\u{1}", "[x]", "loop", "q"];

fn reg(t: &mut Tape) -> RegRange {
    let (base, len): (u16, u16) = match t.pick(8) {
        0 => return RegRange::NONE,
        1 | 2 => (0, 255),
        3 => (256, 64),
        4 => (320, 7),
        5 => (328, 7),
        6 => (336, 16),
        _ => (352, 8),
    };
    let first = t.pick(len as u32) as u16;
    let max = (len - first).min(8) as u32;
    let count = if t.chance(2) { 1 } else { 1 + t.pick(max) } as u8;
    RegRange::new(Reg(base + first), count)
}

fn inst(t: &mut Tape, b: &mut ProgramBuilder, ops: &OpTable, depth: usize) {
    let op = t.pick(ops.len() as u32) as u16;
    let mut i = Inst::new(op);
    i.mask = match t.pick(4) {
        0 | 1 => u32::MAX,
        2 => 0x0000_ffff,
        _ => t.u64() as u32,
    };
    for d in 0..t.pick(3) as usize {
        i.dst[d] = reg(t);
    }
    for s in 0..t.pick(5) as usize {
        i.src[s] = reg(t);
    }
    if t.chance(3) {
        i.imm = t.u64() as i32;
    }
    if t.chance(3) {
        i.pc = t.u64() as u32;
    }
    if t.chance(2) {
        let mut e = AddrExpr::constant(if t.chance(2) { t.u64() } else { t.pick(1 << 20) as u64 });
        for v in Var::ALL {
            let usable = match v {
                Var::Loop(d) => (d as usize) < depth,
                Var::Param(k) => (k as usize) < b.num_params(),
                _ => true,
            };
            if usable && t.chance(3) {
                e.coef[v.index()] = t.i64();
            }
        }
        let lanes = match t.pick(3) {
            0 => Lanes::Stride(ops.get(op).width as i32),
            1 => Lanes::Stride(t.u64() as i32),
            _ => {
                let offs: Vec<i64> = (0..i.mask.count_ones()).map(|_| t.i64()).collect();
                b.offsets(&offs)
            }
        };
        let bulk = if t.chance(3) { t.u64() as u32 } else { 0 };
        b.mem_inst(i, e, lanes, bulk);
    } else {
        b.inst(i);
    }
}

fn body(t: &mut Tape, b: &mut ProgramBuilder, ops: &OpTable, budget: &mut u32) {
    while *budget > 0 && t.pick(6) != 0 {
        *budget -= 1;
        if b.depth() < 4 && t.chance(4) {
            if b.num_params() > 0 && t.chance(2) {
                b.begin_loop_param(t.pick(b.num_params() as u32) as u8).unwrap();
            } else {
                b.begin_loop(if t.chance(2) { t.pick(5) } else { t.u64() as u32 }).unwrap();
            }
            body(t, b, ops, budget);
            b.end_loop().unwrap();
        } else if !ops.is_empty() {
            inst(t, b, ops, b.depth());
        }
    }
}

pub fn program(t: &mut Tape, ops: &OpTable) -> Program {
    let mut b = ProgramBuilder::new(NAMES[t.pick(NAMES.len() as u32) as usize]);
    // Tables and per-CTA parameters (format version 2) in about a third of the programs.
    if t.chance(3) {
        let mut ntables = 0;
        for _ in 0..t.pick(3) {
            let n = 1 + t.pick(6) as usize;
            let tab: Vec<i64> = (0..n).map(|_| if t.chance(2) { t.pick(9) as i64 } else { t.i64() }).collect();
            b.add_table(tab.into());
            ntables += 1;
        }
        for k in 0..t.pick(9) as usize {
            let mut q = CtaParam::constant(if t.chance(2) { t.pick(5) as i64 } else { t.i64() });
            for v in Var::ALL {
                let ok = match v {
                    Var::Loop(_) => false,
                    Var::Param(j) => (j as usize) < k,
                    _ => true,
                };
                if ok && t.chance(3) {
                    q.coef[v.index()] = if t.chance(2) { t.pick(4) as i64 } else { t.i64() };
                }
            }
            if t.chance(2) {
                q.div = if t.chance(2) { 1 + t.pick(200) as i64 } else { (t.u64() >> 1).max(1) as i64 };
            }
            if t.chance(2) {
                let (a, c) = (t.i64(), t.i64());
                let (a, c) = if t.chance(2) { (a.min(c), a.max(c)) } else { (0, t.pick(64) as i64) };
                q.lo = if t.chance(4) { i64::MIN } else { a };
                q.hi = if t.chance(4) { i64::MAX } else { c };
            }
            if ntables > 0 && t.chance(2) {
                q.table = Some(t.pick(ntables as u32));
            }
            b.add_param(q).unwrap();
        }
    }
    let mut budget = 12;
    body(t, &mut b, ops, &mut budget);
    b.finish().unwrap()
}

pub fn kernel(t: &mut Tape, id: u32) -> KernelTrace {
    let grid = Dim3::new(1 + t.pick(4), 1 + t.pick(3), 1 + t.pick(2));
    let block = Dim3::new(1 + t.pick(96), 1 + t.pick(2), 1);
    let mut info = KernelInfo::new(id, NAMES[t.pick(NAMES.len() as u32) as usize], grid, block);
    if t.chance(4) {
        info.cluster = Dim3::new(1 + t.pick(2), 1, 1 + t.pick(2));
    }
    if t.chance(2) {
        info.regs_per_thread = t.pick(256);
    }
    info.smem_bytes = if t.chance(2) { 0 } else { t.u64() as u32 };
    info.stream = t.pick(3);
    info.sm_version = [0, 80, 86, 90][t.pick(4) as usize];
    for d in 0..id {
        if t.chance(2) {
            info.deps.push(d);
        }
    }
    let mut ops = OpTable::new();
    for _ in 0..t.pick(7) {
        ops.intern(MNEMONICS[t.pick(MNEMONICS.len() as u32) as usize]).unwrap();
    }
    let mut programs: Vec<Arc<Program>> = (0..1 + t.pick(4)).map(|_| Arc::new(program(t, &ops))).collect();
    let warps = info.warps_per_cta() as usize;
    let num_ctas = info.num_ctas();
    let all_overridden = num_ctas <= 6 && t.chance(5);
    let default = if all_overridden { Vec::new() } else { (0..warps).map(|_| t.pick(programs.len() as u32)).collect() };
    let mut overrides = BTreeMap::new();
    for cta in 0..num_ctas {
        if all_overridden || t.chance(3) {
            let mut l: Vec<u32> = (0..warps).map(|_| t.pick(programs.len() as u32)).collect();
            // Sometimes a program of this CTA's own (written inside its `cta` section).
            while t.chance(3) {
                programs.push(Arc::new(program(t, &ops)));
                let w = t.pick(warps as u32) as usize;
                l[w] = programs.len() as u32 - 1;
            }
            overrides.insert(cta, l);
        }
    }
    KernelTrace { info, ops, programs, layout: CtaLayout { default, overrides } }
}

pub fn trace(t: &mut Tape) -> Trace {
    let n = 1 + t.pick(3);
    Trace { kernels: (0..n).map(|id| kernel(t, id)).collect() }
}

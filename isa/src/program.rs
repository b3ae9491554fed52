//! A warp's instruction stream as a small program: instructions, loops whose addresses advance
//! by strides, and address expressions that depend on the CTA and warp.
//!
//! A trace is a program, not a list: the trace of an 8192³ GEMM is one loop body per warp role,
//! and CTAs that differ only in base addresses share it. The simulator walks the program with a
//! [`crate::cursor::Cursor`] and evaluates addresses only when an instruction issues.

use crate::reg::RegRange;

/// Maximum loop nesting depth. Loop counters are the variables `i0` (outermost) .. `i3`.
pub const MAX_LOOP_DEPTH: usize = 4;

/// Number of variables an address expression may depend on.
pub const NUM_VARS: usize = 4 + MAX_LOOP_DEPTH;

/// A variable of an address expression.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub enum Var {
    /// `cta.x`, `cta.y`, `cta.z`: the CTA's coordinates in the grid.
    CtaX,
    CtaY,
    CtaZ,
    /// `warp`: the warp's index within its CTA.
    Warp,
    /// `i0`..`i3`: iteration counters of the enclosing loops, outermost first.
    Loop(u8),
}

impl Var {
    pub const ALL: [Var; NUM_VARS] =
        [Var::CtaX, Var::CtaY, Var::CtaZ, Var::Warp, Var::Loop(0), Var::Loop(1), Var::Loop(2), Var::Loop(3)];

    pub const fn index(self) -> usize {
        match self {
            Var::CtaX => 0,
            Var::CtaY => 1,
            Var::CtaZ => 2,
            Var::Warp => 3,
            Var::Loop(d) => 4 + d as usize,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Var::CtaX => "cta.x",
            Var::CtaY => "cta.y",
            Var::CtaZ => "cta.z",
            Var::Warp => "warp",
            Var::Loop(0) => "i0",
            Var::Loop(1) => "i1",
            Var::Loop(2) => "i2",
            Var::Loop(_) => "i3",
        }
    }

    pub fn from_name(s: &str) -> Option<Var> {
        Var::ALL.into_iter().find(|v| v.name() == s)
    }
}

/// `base + Σ coef[v] · v`, evaluated with wrapping 64-bit arithmetic.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct AddrExpr {
    pub base: u64,
    pub coef: [i64; NUM_VARS],
}

impl AddrExpr {
    pub const fn constant(base: u64) -> AddrExpr {
        AddrExpr { base, coef: [0; NUM_VARS] }
    }

    pub fn with(mut self, v: Var, coef: i64) -> AddrExpr {
        self.coef[v.index()] = coef;
        self
    }

    #[inline]
    pub fn eval(&self, vars: &[i64; NUM_VARS]) -> u64 {
        let mut a = self.base;
        for (c, v) in self.coef.iter().zip(vars) {
            a = a.wrapping_add(c.wrapping_mul(*v) as u64);
        }
        a
    }
}

/// How the addresses of the active lanes follow from the instruction's base address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Lanes {
    /// Lane `l` accesses `base + l·stride` (`stride` 0: every lane the same address).
    Stride(i32),
    /// Explicit offsets from `base`, one per *active* lane in lane order, stored in
    /// [`Program::lane_offsets`] from index `start` (popcount(mask) entries).
    Offsets { start: u32 },
}

/// The memory operand of an instruction.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct MemRef {
    /// Index into [`Program::exprs`].
    pub addr: u32,
    pub lanes: Lanes,
    /// For bulk copies (TMA, `UBLKCP`): bytes moved by the whole instruction; 0 otherwise.
    pub bulk_bytes: u32,
}

/// Index of an opcode in the kernel's [`crate::kernel::OpTable`].
pub type OpId = u16;

/// One warp instruction.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Inst {
    pub op: OpId,
    /// Active lanes.
    pub mask: u32,
    pub dst: [RegRange; 2],
    pub src: [RegRange; 4],
    /// Immediate operand where timing depends on it (`DEPBAR.LE SB0, N`: N).
    pub imm: i32,
    pub mem: Option<MemRef>,
    /// Program counter in the original binary (informational; 0 when unknown).
    pub pc: u32,
}

impl Inst {
    pub fn new(op: OpId) -> Inst {
        Inst { op, mask: u32::MAX, dst: [RegRange::NONE; 2], src: [RegRange::NONE; 4], imm: 0, mem: None, pc: 0 }
    }
}

/// One step of a program.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Step {
    Inst(Inst),
    /// Repeat the steps up to the matching `EndLoop` (at index `end`) `count` times.
    Loop {
        count: u32,
        end: u32,
    },
    /// Closes the loop that starts at index `start`.
    EndLoop {
        start: u32,
    },
}

/// A warp program. Built with [`ProgramBuilder`] or by a trace reader; immutable once built.
#[derive(Clone, PartialEq, Debug, Default)]
pub struct Program {
    pub name: String,
    pub steps: Vec<Step>,
    pub exprs: Vec<AddrExpr>,
    pub lane_offsets: Vec<i64>,
}

impl Program {
    /// Number of warp instructions one execution of the program issues (loops expanded).
    pub fn dynamic_len(&self) -> u64 {
        fn walk(steps: &[Step], mut i: usize, end: usize) -> u64 {
            let mut n = 0u64;
            while i < end {
                match steps[i] {
                    Step::Inst(_) => {
                        n += 1;
                        i += 1;
                    }
                    Step::Loop { count, end: e } => {
                        n = n.saturating_add(walk(steps, i + 1, e as usize).saturating_mul(count as u64));
                        i = e as usize + 1;
                    }
                    Step::EndLoop { .. } => i += 1,
                }
            }
            n
        }
        walk(&self.steps, 0, self.steps.len())
    }

    /// Checks the structural invariants that readers and builders must guarantee: loops are
    /// balanced and nest at most [`MAX_LOOP_DEPTH`] deep, every `MemRef` points inside `exprs`
    /// and `lane_offsets`. Returns a description of the first violation.
    pub fn check(&self) -> Result<(), String> {
        let mut stack: Vec<usize> = Vec::new();
        for (i, s) in self.steps.iter().enumerate() {
            match *s {
                Step::Loop { end, .. } => {
                    stack.push(i);
                    if stack.len() > MAX_LOOP_DEPTH {
                        return Err(format!("step {i}: loops nest deeper than {MAX_LOOP_DEPTH}"));
                    }
                    if end as usize <= i || end as usize >= self.steps.len() {
                        return Err(format!("step {i}: loop end {end} out of range"));
                    }
                }
                Step::EndLoop { start } => {
                    let Some(open) = stack.pop() else {
                        return Err(format!("step {i}: `end` without a loop"));
                    };
                    if open != start as usize {
                        return Err(format!("step {i}: loop end does not match its start"));
                    }
                    if !matches!(self.steps[open], Step::Loop { end, .. } if end as usize == i) {
                        return Err(format!("step {i}: loop start does not point here"));
                    }
                }
                Step::Inst(inst) => {
                    if let Some(m) = inst.mem {
                        if m.addr as usize >= self.exprs.len() {
                            return Err(format!("step {i}: address expression {} out of range", m.addr));
                        }
                        if let Lanes::Offsets { start } = m.lanes {
                            let need = start as usize + inst.mask.count_ones() as usize;
                            if need > self.lane_offsets.len() {
                                return Err(format!("step {i}: lane offsets out of range"));
                            }
                        }
                    }
                }
            }
        }
        if let Some(open) = stack.pop() {
            return Err(format!("step {open}: loop is never closed"));
        }
        Ok(())
    }
}

/// Builds a [`Program`] with balanced loops.
#[derive(Default)]
pub struct ProgramBuilder {
    prog: Program,
    open: Vec<usize>,
    /// Start of each distinct lane offset list already added.
    offset_lists: std::collections::HashMap<Vec<i64>, u32>,
    /// Index of each distinct address expression already added.
    expr_index: std::collections::HashMap<AddrExpr, u32>,
}

impl ProgramBuilder {
    pub fn new(name: impl Into<String>) -> Self {
        ProgramBuilder { prog: Program { name: name.into(), ..Program::default() }, ..ProgramBuilder::default() }
    }

    /// Current loop depth (0 outside any loop).
    pub fn depth(&self) -> usize {
        self.open.len()
    }

    pub fn inst(&mut self, inst: Inst) -> &mut Self {
        self.prog.steps.push(Step::Inst(inst));
        self
    }

    /// Adds an address expression and returns its index for a [`MemRef`].
    pub fn expr(&mut self, e: AddrExpr) -> u32 {
        let next = self.prog.exprs.len() as u32;
        let i = *self.expr_index.entry(e).or_insert(next);
        if i == next {
            self.prog.exprs.push(e);
        }
        i
    }

    /// Adds explicit per-active-lane offsets and returns the [`Lanes`] that refers to them.
    /// Identical lists are stored once (as the text trace reader does).
    pub fn offsets(&mut self, offs: &[i64]) -> Lanes {
        if let Some(&start) = self.offset_lists.get(offs) {
            return Lanes::Offsets { start };
        }
        let start = self.prog.lane_offsets.len() as u32;
        self.prog.lane_offsets.extend_from_slice(offs);
        self.offset_lists.insert(offs.to_vec(), start);
        Lanes::Offsets { start }
    }

    /// A memory instruction: sets `inst.mem` from the expression and lane pattern.
    pub fn mem_inst(&mut self, mut inst: Inst, addr: AddrExpr, lanes: Lanes, bulk_bytes: u32) -> &mut Self {
        let addr = self.expr(addr);
        inst.mem = Some(MemRef { addr, lanes, bulk_bytes });
        self.inst(inst)
    }

    /// Opens a loop; fails when nesting would exceed [`MAX_LOOP_DEPTH`].
    pub fn begin_loop(&mut self, count: u32) -> Result<&mut Self, String> {
        if self.open.len() >= MAX_LOOP_DEPTH {
            return Err(format!("loops nest deeper than {MAX_LOOP_DEPTH}"));
        }
        self.open.push(self.prog.steps.len());
        self.prog.steps.push(Step::Loop { count, end: 0 });
        Ok(self)
    }

    pub fn end_loop(&mut self) -> Result<&mut Self, String> {
        let start = self.open.pop().ok_or_else(|| "`end` without a loop".to_string())?;
        let end = self.prog.steps.len() as u32;
        if let Step::Loop { end: e, .. } = &mut self.prog.steps[start] {
            *e = end;
        }
        self.prog.steps.push(Step::EndLoop { start: start as u32 });
        Ok(self)
    }

    pub fn finish(self) -> Result<Program, String> {
        if !self.open.is_empty() {
            return Err(format!("{} loop(s) never closed", self.open.len()));
        }
        self.prog.check()?;
        Ok(self.prog)
    }
}

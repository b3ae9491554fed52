//! A small assembler over [`ProgramBuilder`] for the GEMM recipes: interns mnemonics in the
//! kernel's [`OpTable`], fills register operands, the active mask and the immediate, and keeps
//! programs in the canonical form of the text format (a lane stride equal to the opcode's width
//! is the default; identical lane-offset lists are stored once).

use gpusim_isa::{AddrExpr, Inst, Lanes, OpTable, Program, ProgramBuilder, RegRange, Var};

pub(crate) use crate::operands::{p, r, rr, sb, urr};

/// An affine address under construction: `base + Σ coef · var`, built from terms in any order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Addr(pub AddrExpr);

impl Addr {
    pub(crate) fn at(base: u64) -> Addr {
        Addr(AddrExpr::constant(base))
    }

    /// Adds `k` bytes to the base.
    pub(crate) fn plus(mut self, k: u64) -> Addr {
        self.0.base = self.0.base.wrapping_add(k);
        self
    }

    /// Adds a signed number of bytes to the base.
    pub(crate) fn plus_signed(mut self, k: i64) -> Addr {
        self.0.base = self.0.base.wrapping_add(k as u64);
        self
    }

    /// Adds `coef · v` (coefficients of the same variable add up).
    pub(crate) fn term(mut self, v: Var, coef: i64) -> Addr {
        let c = &mut self.0.coef[v.index()];
        *c = c.wrapping_add(coef);
        self
    }

    /// Adds `scale` times an affine index (see [`Affine`]).
    pub(crate) fn index(mut self, a: &Affine, scale: u64) -> Addr {
        self = self.plus(a.konst.wrapping_mul(scale));
        for (v, c) in &a.terms {
            self = self.term(*v, (*c as i64).wrapping_mul(scale as i64));
        }
        self
    }
}

/// An index that is affine in CTA coordinates and loop counters: `konst + Σ c · v`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Affine {
    pub konst: u64,
    pub terms: Vec<(Var, u64)>,
}

impl Affine {
    pub(crate) fn konst(k: u64) -> Affine {
        Affine { konst: k, terms: Vec::new() }
    }

    pub(crate) fn with(mut self, v: Var, c: u64) -> Affine {
        if c != 0 {
            self.terms.push((v, c));
        }
        self
    }

    pub(crate) fn plus(mut self, k: u64) -> Affine {
        self.konst += k;
        self
    }
}

/// Builds one warp program of a kernel.
pub(crate) struct Code<'a> {
    ops: &'a mut OpTable,
    b: ProgramBuilder,
    mask: u32,
}

impl<'a> Code<'a> {
    pub(crate) fn new(ops: &'a mut OpTable, name: &str) -> Self {
        Code { ops, b: ProgramBuilder::new(name), mask: u32::MAX }
    }

    /// Sets the active mask of the instructions emitted from now on.
    pub(crate) fn set_mask(&mut self, mask: u32) -> &mut Self {
        self.mask = mask;
        self
    }

    fn make(&mut self, mnemonic: &str, dst: &[RegRange], src: &[RegRange], imm: i32) -> Inst {
        // A GEMM kernel holds a few dozen distinct mnemonics, far below the table's limit.
        let op = self.ops.intern(mnemonic).expect("opcode table has room");
        let mut i = Inst::new(op);
        i.mask = self.mask;
        i.dst[..dst.len()].copy_from_slice(dst);
        i.src[..src.len()].copy_from_slice(src);
        i.imm = imm;
        i
    }

    /// An instruction without memory operand.
    pub(crate) fn op(&mut self, mnemonic: &str, dst: &[RegRange], src: &[RegRange]) -> &mut Self {
        self.op_imm(mnemonic, dst, src, 0)
    }

    /// An instruction with an immediate operand (`DEPBAR.LE SB0, N`, `USETMAXREG`).
    pub(crate) fn op_imm(&mut self, mnemonic: &str, dst: &[RegRange], src: &[RegRange], imm: i32) -> &mut Self {
        let i = self.make(mnemonic, dst, src, imm);
        self.b.inst(i);
        self
    }

    /// A memory instruction whose lane `l` accesses `addr + l·width` (the opcode's default).
    pub(crate) fn mem(&mut self, mnemonic: &str, dst: &[RegRange], src: &[RegRange], addr: Addr) -> &mut Self {
        self.mem_imm(mnemonic, dst, src, addr, 0)
    }

    /// A memory instruction with the default lane stride and an immediate (`SYNCS.EXCH.64`).
    pub(crate) fn mem_imm(
        &mut self,
        mnemonic: &str,
        dst: &[RegRange],
        src: &[RegRange],
        addr: Addr,
        imm: i32,
    ) -> &mut Self {
        let i = self.make(mnemonic, dst, src, imm);
        let width = self.ops.get(i.op).width as i32;
        self.b.mem_inst(i, addr.0, Lanes::Stride(width), 0);
        self
    }

    /// A memory instruction with explicit per-lane offsets (one per active lane).
    pub(crate) fn mem_lanes(
        &mut self,
        mnemonic: &str,
        dst: &[RegRange],
        src: &[RegRange],
        addr: Addr,
        offsets: &[i64],
    ) -> &mut Self {
        let i = self.make(mnemonic, dst, src, 0);
        debug_assert_eq!(offsets.len(), i.mask.count_ones() as usize);
        let lanes = self.b.offsets(offsets);
        self.b.mem_inst(i, addr.0, lanes, 0);
        self
    }

    /// A bulk copy (TMA) of `bytes` contiguous bytes at `addr`.
    pub(crate) fn bulk(
        &mut self,
        mnemonic: &str,
        dst: &[RegRange],
        src: &[RegRange],
        addr: Addr,
        bytes: u32,
    ) -> &mut Self {
        let i = self.make(mnemonic, dst, src, 0);
        let width = self.ops.get(i.op).width as i32;
        self.b.mem_inst(i, addr.0, Lanes::Stride(width), bytes);
        self
    }

    /// Opens a loop of `count` ≥ 1 iterations and returns its counter variable.
    pub(crate) fn begin(&mut self, count: u32) -> Var {
        debug_assert!(count >= 1);
        let v = Var::Loop(self.b.depth() as u8);
        // The recipes nest at most 4 loops deep (three tile loops and one k or epilogue loop).
        self.b.begin_loop(count).expect("loop depth within the limit");
        v
    }

    pub(crate) fn end(&mut self) -> &mut Self {
        self.b.end_loop().expect("balanced loops");
        self
    }

    pub(crate) fn finish(self) -> Program {
        self.b.finish().expect("generated programs are well formed")
    }
}

pub(crate) use crate::operands::assemble as kernel;

/// Lane offsets of a warp copying rows of `row_bytes` bytes (a power of two from 16 to 512) in
/// 16-byte chunks: lane `l` takes chunk `l % cpr` of row `l / cpr`, rows `pitch` bytes apart.
pub(crate) fn row_lanes(row_bytes: u64, pitch: u64) -> Vec<i64> {
    let cpr = (row_bytes / 16).max(1);
    (0..32u64).map(|l| ((l / cpr) * pitch + (l % cpr) * 16) as i64).collect()
}

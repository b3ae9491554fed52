//! [`Code`]: one warp program.

use std::sync::Arc;

use gpusim_isa::program::CtaParam;
use gpusim_isa::{AddrExpr, Inst, Lanes, OpTable, Program, ProgramBuilder, RegRange, Var};

/// Builds one warp program of a kernel.
pub struct Code<'a> {
    ops: &'a mut OpTable,
    b: ProgramBuilder,
    mask: u32,
    min_stride: i32,
}

impl<'a> Code<'a> {
    pub fn new(ops: &'a mut OpTable, name: &str) -> Self {
        Code { ops, b: ProgramBuilder::new(name), mask: u32::MAX, min_stride: 0 }
    }

    /// Sets the active mask of the instructions emitted from now on.
    pub fn set_mask(&mut self, mask: u32) -> &mut Self {
        self.mask = mask;
        self
    }

    pub fn mask(&self) -> u32 {
        self.mask
    }

    /// The default lane stride of memory operands is at least `s` bytes (opcodes without a width,
    /// `SYNCS`, `UTMALDG`, have 0). The validation memory cases use 1, as their traces always did.
    pub fn set_min_lane_stride(&mut self, s: i32) -> &mut Self {
        self.min_stride = s;
        self
    }

    fn make(&mut self, mnemonic: &str, dst: &[RegRange], src: &[RegRange], imm: i32) -> Inst {
        // A generated kernel holds a few dozen distinct mnemonics, far below the table's limit.
        let op = self.ops.intern(mnemonic).expect("opcode table has room");
        let mut i = Inst::new(op);
        i.mask = self.mask;
        i.dst[..dst.len()].copy_from_slice(dst);
        i.src[..src.len()].copy_from_slice(src);
        i.imm = imm;
        i
    }

    fn default_stride(&self, i: &Inst) -> i32 {
        (self.ops.get(i.op).width as i32).max(self.min_stride)
    }

    /// An instruction without memory operand.
    pub fn op(&mut self, mnemonic: &str, dst: &[RegRange], src: &[RegRange]) -> &mut Self {
        self.op_imm(mnemonic, dst, src, 0)
    }

    /// An instruction with an immediate operand (`DEPBAR.LE SB0, N`, `USETMAXREG`).
    pub fn op_imm(&mut self, mnemonic: &str, dst: &[RegRange], src: &[RegRange], imm: i32) -> &mut Self {
        let i = self.make(mnemonic, dst, src, imm);
        self.b.inst(i);
        self
    }

    /// A memory instruction whose lane `l` accesses `addr + l·width` (the opcode's default).
    pub fn mem(&mut self, mnemonic: &str, dst: &[RegRange], src: &[RegRange], addr: impl Into<AddrExpr>) -> &mut Self {
        self.mem_imm(mnemonic, dst, src, addr, 0)
    }

    /// A memory instruction with the default lane stride and an immediate (`SYNCS.EXCH.64`).
    pub fn mem_imm(
        &mut self,
        mnemonic: &str,
        dst: &[RegRange],
        src: &[RegRange],
        addr: impl Into<AddrExpr>,
        imm: i32,
    ) -> &mut Self {
        let i = self.make(mnemonic, dst, src, imm);
        let stride = self.default_stride(&i);
        self.b.mem_inst(i, addr.into(), Lanes::Stride(stride), 0);
        self
    }

    /// A memory instruction whose lane `l` accesses `addr + l·stride`.
    pub fn mem_stride(
        &mut self,
        mnemonic: &str,
        dst: &[RegRange],
        src: &[RegRange],
        addr: impl Into<AddrExpr>,
        stride: i32,
    ) -> &mut Self {
        let i = self.make(mnemonic, dst, src, 0);
        self.b.mem_inst(i, addr.into(), Lanes::Stride(stride), 0);
        self
    }

    /// A memory instruction with explicit per-lane offsets (one per active lane).
    pub fn mem_lanes(
        &mut self,
        mnemonic: &str,
        dst: &[RegRange],
        src: &[RegRange],
        addr: impl Into<AddrExpr>,
        offsets: &[i64],
    ) -> &mut Self {
        let i = self.make(mnemonic, dst, src, 0);
        debug_assert_eq!(offsets.len(), i.mask.count_ones() as usize);
        let lanes = self.b.offsets(offsets);
        self.b.mem_inst(i, addr.into(), lanes, 0);
        self
    }

    /// A bulk copy (TMA, `UBLKCP`) of `bytes` contiguous bytes at `addr`.
    pub fn bulk(
        &mut self,
        mnemonic: &str,
        dst: &[RegRange],
        src: &[RegRange],
        addr: impl Into<AddrExpr>,
        bytes: u32,
    ) -> &mut Self {
        let i = self.make(mnemonic, dst, src, 0);
        let stride = self.default_stride(&i);
        self.b.mem_inst(i, addr.into(), Lanes::Stride(stride), bytes);
        self
    }

    /// Opens a loop of `count` ≥ 1 iterations (callers skip empty loops) and returns its counter
    /// variable.
    pub fn begin(&mut self, count: u32) -> Var {
        debug_assert!(count >= 1);
        let v = Var::Loop(self.b.depth() as u8);
        // The generators nest at most 4 loops deep (three tile loops and one k or epilogue loop).
        self.b.begin_loop(count).expect("loop depth within the limit");
        v
    }

    /// Opens a loop whose trip count is the per-CTA parameter `p` (a [`Var::Param`] from
    /// [`Code::param`]; 0 iterations skip the body) and returns its counter variable.
    pub fn begin_param(&mut self, p: Var) -> Var {
        let Var::Param(k) = p else { panic!("begin_param takes a per-CTA parameter, not {p:?}") };
        let v = Var::Loop(self.b.depth() as u8);
        self.b.begin_loop_param(k).expect("loop depth within the limit");
        v
    }

    /// Adds a per-CTA parameter (evaluated once per CTA and warp, in order) and returns it as an
    /// address and trip-count variable. Generators use at most `MAX_PARAMS` of them.
    pub fn param(&mut self, p: CtaParam) -> Var {
        Var::Param(self.b.add_param(p).expect("a well-formed parameter within the limit"))
    }

    /// Adds a lookup table for [`CtaParam::table`] (shared, not copied) and returns its index.
    pub fn table(&mut self, t: &Arc<[i64]>) -> u32 {
        self.b.add_table(t.clone())
    }

    pub fn end(&mut self) -> &mut Self {
        self.b.end_loop().expect("balanced loops");
        self
    }

    pub fn finish(self) -> Program {
        self.b.finish().expect("generated programs are well formed")
    }
}

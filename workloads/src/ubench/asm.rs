//! A small assembler over [`ProgramBuilder`]: interns mnemonics in the kernel's [`OpTable`], fills
//! register operands and the active mask, and gives memory operands the opcode's default lane
//! stride so that programs stay in the canonical form of the text format.

use std::collections::BTreeMap;

use gpusim_isa::{AddrExpr, Dim3, Inst, KernelInfo, KernelTrace, Lanes, OpTable, Program, ProgramBuilder, RegRange};

pub(crate) use crate::operands::{p, r, rr, sb, ur};

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

    pub(crate) fn mask(&self) -> u32 {
        self.mask
    }

    fn make(&mut self, mnemonic: &str, dst: &[RegRange], src: &[RegRange]) -> Inst {
        // A kernel of these generators holds a few dozen distinct mnemonics, far below the limit.
        let op = self.ops.intern(mnemonic).expect("opcode table has room");
        let mut i = Inst::new(op);
        i.mask = self.mask;
        i.dst[..dst.len()].copy_from_slice(dst);
        i.src[..src.len()].copy_from_slice(src);
        i
    }

    /// An instruction without memory operand.
    pub(crate) fn op(&mut self, mnemonic: &str, dst: &[RegRange], src: &[RegRange]) -> &mut Self {
        let i = self.make(mnemonic, dst, src);
        self.b.inst(i);
        self
    }

    /// An instruction with an immediate operand (`DEPBAR.LE SB0, N`).
    pub(crate) fn op_imm(&mut self, mnemonic: &str, dst: &[RegRange], src: &[RegRange], imm: i32) -> &mut Self {
        let mut i = self.make(mnemonic, dst, src);
        i.imm = imm;
        self.b.inst(i);
        self
    }

    /// A memory instruction whose lanes access `addr + lane·width` (the opcode's default).
    pub(crate) fn mem(&mut self, mnemonic: &str, dst: &[RegRange], src: &[RegRange], addr: AddrExpr) -> &mut Self {
        let i = self.make(mnemonic, dst, src);
        let width = self.ops.get(i.op).width as i32;
        self.b.mem_inst(i, addr, Lanes::Stride(width), 0);
        self
    }

    /// A memory instruction whose lane `l` accesses `addr + l·stride`.
    pub(crate) fn mem_stride(
        &mut self,
        mnemonic: &str,
        dst: &[RegRange],
        src: &[RegRange],
        addr: AddrExpr,
        stride: i32,
    ) -> &mut Self {
        let i = self.make(mnemonic, dst, src);
        self.b.mem_inst(i, addr, Lanes::Stride(stride), 0);
        self
    }

    /// A bulk copy (TMA, `UBLKCP`) of `bytes` contiguous bytes at `addr`.
    pub(crate) fn bulk(
        &mut self,
        mnemonic: &str,
        dst: &[RegRange],
        src: &[RegRange],
        addr: AddrExpr,
        bytes: u32,
    ) -> &mut Self {
        let i = self.make(mnemonic, dst, src);
        let width = self.ops.get(i.op).width as i32;
        self.b.mem_inst(i, addr, Lanes::Stride(width), bytes);
        self
    }

    /// Opens a loop of `count` iterations (count ≥ 1; callers skip empty loops).
    pub(crate) fn begin(&mut self, count: u32) -> &mut Self {
        debug_assert!(count >= 1);
        // Generators nest at most 2 loops deep, within MAX_LOOP_DEPTH.
        self.b.begin_loop(count).expect("loop depth within the limit");
        self
    }

    pub(crate) fn end(&mut self) -> &mut Self {
        self.b.end_loop().expect("balanced loops");
        self
    }

    pub(crate) fn finish(self) -> Program {
        self.b.finish().expect("generated programs are well formed")
    }
}

/// Assembles a kernel and checks it; a malformed kernel is a bug in its generator.
pub(crate) fn kernel(
    info: KernelInfo,
    ops: OpTable,
    programs: Vec<Program>,
    default: Vec<u32>,
    overrides: BTreeMap<u64, Vec<u32>>,
) -> KernelTrace {
    crate::operands::assemble(info, ops, programs, default, overrides).unwrap_or_else(|e| panic!("{e}"))
}

/// Kernel information with the fields the generators set.
pub(crate) fn info(id: u32, name: &str, grid: Dim3, block: Dim3, regs: u32, smem: u32, sm: u32) -> KernelInfo {
    let mut i = KernelInfo::new(id, name, grid, block);
    i.regs_per_thread = regs;
    i.smem_bytes = smem;
    i.sm_version = sm;
    i
}

/// Rounds `x` up to a multiple of `unit`.
pub(crate) fn round_up(x: u64, unit: u64) -> u64 {
    x.div_ceil(unit) * unit
}

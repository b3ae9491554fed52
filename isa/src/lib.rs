//! # gpusim-isa
//!
//! The SASS instruction set as data, and the trace formats.
//!
//! - [`opcode`]: the opcode table for sm_80/sm_86/sm_90/sm_90a (room for sm_100) and the decoder
//!   for full mnemonics with modifiers.
//! - [`reg`]: register names as small integers, one numbering for all register files.
//! - [`program`] and [`cursor`]: a warp's instruction stream as a compact program with loops and
//!   affine address expressions, and the cursor that walks it without allocating.
//! - [`kernel`]: kernel launch information, the interned opcode table, CTAs.
//! - [`source`]: the streaming traits the simulator pulls kernels and CTAs through.
//! - [`text`], [`binary`]: gpusim's own trace format (docs/trace-format.md).
//! - [`accelsim`]: import of Accel-Sim `kernelslist.g` + `kernel-N.traceg` traces.
//!
//! Invariant: what a reader hands out is well formed ([`program::Program::check`] holds,
//! every op id is in the table). Every reader error names file, line and column.

pub mod accelsim;
pub mod barrier;
pub mod binary;
pub mod cursor;
pub mod diag;
pub mod error;
pub mod kernel;
pub mod opcode;
pub mod open;
pub mod program;
pub mod reg;
pub mod source;
pub mod text;

pub use barrier::{BarrierOperand, NAMED_BARRIERS};
pub use cursor::Cursor;
pub use error::{Location, TraceError, TraceErrorKind};
pub use kernel::{CtaGroup, CtaLayout, CtaTrace, Dim3, KernelInfo, KernelTrace, OpTable, Trace};
pub use opcode::{MemSpace, OpDesc, Semantics, TensorShape, TensorType, UnitClass};
pub use program::{
    AddrExpr, CtaParam, Inst, Lanes, LoopNest, MemRef, OpId, Program, ProgramBuilder, Step, TripCount, Var,
};
pub use reg::{Reg, RegRange};
pub use source::{BufferedKernel, CtaRun, KernelSource, MemKernelSource, MemTraceSource, TraceSource};

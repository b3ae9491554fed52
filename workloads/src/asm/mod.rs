//! The one trace assembler of the generators (GEMM recipes, microbenchmarks, and the
//! validation crate's memory-case traces), over [`gpusim_isa::ProgramBuilder`]:
//!
//! - [`regs`]: register operands (`r(2)`, `rr(4, 2)`, `p(0)`, `ur(4)`, `urr(8, 2)`, `sb(0)`).
//! - [`addr`]: affine addresses built from terms ([`Addr`], [`Affine`]).
//! - [`code`]: [`Code`], one warp program: interns mnemonics in the kernel's `OpTable`, fills
//!   operands, the active mask and the immediate, gives memory operands the opcode's default
//!   lane stride, and opens loops only through the builder (never a `Step` by hand).
//! - [`kernel`](mod@kernel): a checked `KernelTrace` from programs and a CTA layout ([`assemble`]), kernel
//!   information ([`info`]), one-kernel traces ([`one_kernel`]).
//!
//! Programs come out in the canonical form of the text format, so text and binary round trips
//! are exact.

pub mod addr;
pub mod code;
pub mod kernel;
pub mod regs;

pub use addr::{Addr, Affine};
pub use code::Code;
pub use kernel::{assemble, info, kernel, one_kernel, round_up};
pub use regs::{p, r, rr, sb, ur, urr};

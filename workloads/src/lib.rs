//! # gpusim-workloads
//!
//! Trace generators: kernels built in code as [`gpusim_isa::Trace`]s, with the SASS a real CUDA
//! kernel of the kind compiles to, ready for `gpusim_sim_core::simulate` through
//! [`gpusim_isa::MemTraceSource`] or for writing with `gpusim_isa::text::write_trace` /
//! `gpusim_isa::binary::write_trace`.
//!
//! So far: [`ubench`], the microbenchmarks behind published latency and bandwidth measurements
//! (pointer chase, STREAM, L2 bandwidth, shared-memory bank conflicts, cp.async/TMA pipelines,
//! distributed shared memory), [`gemm`], the GEMM recipes (Ampere multistage, Hopper
//! warp-specialised, split-K, block-scaled fp8), and [`attention`] (FlashAttention-2/-3, decode,
//! MLA decode, unfused attention). MoE generators are to come.
//!
//! ## Invariants
//! - **Pure.** Generators do no I/O and read no clock or environment; a chip description
//!   ([`gpusim_configs::Arch`]) enters only as an argument (grid sizes from `sm.count`, the
//!   shared-memory carveout, the compute capability).
//! - **Deterministic.** The same parameters give the same trace, bit for bit (pseudo-random
//!   choices use a fixed-seed generator of the crate's own; no `HashMap` iteration).
//! - **Well formed.** Every kernel passes [`gpusim_isa::KernelTrace::check`] and its programs
//!   are in the canonical form of the text format, so text and binary round trips are exact.
//! - **Small.** Loops and affine address expressions (coefficients on `cta.x`, `warp`,
//!   `i0..i3`) carry every affine access pattern, so a trace's size depends on the kernel's
//!   shape, not on the bytes it moves; explicit addresses appear only where the pattern is not
//!   affine (a pointer chase), bounded by a parameter.
//! - **Checked parameters.** Each parameter struct has a `validate` and a [`params!`] table
//!   (name, kind and unit, valid range, description). Generators return
//!   `Result<_, WorkloadError>` and never panic on user input; the [`registry`](mod@registry) builds any of
//!   them by name from `key=value` pairs.
//!
//! ## The foundation
//! [`asm`] (the one assembler), [`params`](mod@params) (parameter tables), [`registry`](mod@registry) (generators by name,
//! materialised or lazy: [`registry::LazySource`]). See ARCHITECTURE.md for adding a recipe.

pub mod asm;
pub mod attention;
pub mod gemm;
pub mod moe;
pub mod params;
pub mod registry;
pub mod rng;
pub(crate) mod streaming;
pub mod ubench;

pub use params::WorkloadError;
pub use registry::{Generated, Generator, find, registry};

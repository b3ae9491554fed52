//! # gpusim-validation
//!
//! Compares simulations with measurements of real GPUs.
//!
//! - [`case`]: the shared types every other module speaks: [`Case`] (its [`Kind`], [`Metric`],
//!   [`Trust`]), [`case::Device`], [`case::Method`] and the loading [`case::Error`].
//! - [`mod@reference`]: the reference measurements (`shared/reference/*.toml`), parsed into
//!   [`Case`]s.
//! - [`memory_cases`]: every latency and bandwidth case mapped to a microbenchmark simulation
//!   ([`memory_cases::Plan`]) or to an explicit reason why none applies; running a plan gives the
//!   simulated value in the case's metric. [`memory_cases::latency_sweep`] gives simulated
//!   pointer-chase latency against footprint.
//! - [`attention_cases`]: attention cases as simulations (the case's problem, the workloads
//!   crate's recipe for its implementation, FlashAttention's FLOP convention).
//! - [`gemm_cases`]: GEMM cases as simulations (shape and dtype of the case, the workloads
//!   crate's default recipe, TFLOP/s = 2·M·N·K·batch / simulated time).
//! - [`nsight`]: Nsight Compute CSV exports (raw and details pages) read into launches, and
//!   turned into `kernel` cases ([`nsight::to_cases`]).
//! - [`kernel_cases`]: `kernel` cases (one measured launch) simulated alone from a trace of the
//!   same kernel (gpusim or Accel-Sim), and traces attached to an export's launches
//!   ([`kernel_cases::attach_traces`]).
//! - [`data`]: measurement files by type for `--data` (`*.toml` reference cases, `*.csv` Nsight
//!   Compute exports with `--hardware` and `--traces`).
//! - [`correlate`]: every selected case simulated (in parallel, deterministically) or listed with
//!   the reason it is not, with statistics and provenance; rendered as text, Markdown and CSV
//!   (`gpusim correlate`).
//! - [`calibrate`]: fitting a preset's model parameters to the cases (Nelder–Mead on the
//!   trust-weighted |ln(sim/measured)|, k-fold cross-validated), rendered as a config that
//!   inherits the preset (`gpusim calibrate`); [`optimize`] holds the optimiser.
//! - [`gate`]: the accuracy gate CI applies to a correlation (per-family MAPE limits that may
//!   only be tightened, `validation/accuracy-gate.toml`).
//! - [`measurement`]: the measurement file schema (`[[case]]`s plus file-level `[device]` and
//!   `[method]`), its writer and reader, and the device-name-to-hardware mapping.
//! - [`measure`]: the measurement harness behind `gpusim measure` (feature `cuda`: cudarc,
//!   libraries loaded at run time; our own CUDA kernels in `validation/cuda/`, compiled with NVRTC
//!   to a cubin for the device; cuBLAS GEMMs). Without the feature it only says so.
//! - [`stats`]: MAPE, median |error|, Pearson/Spearman on logs, trust-weighted |ln(sim/meas)|.
//! - [`hash`]: the stable content hash (FNV-1a) of configs, recipes and traces.
//!
//! Like the rest of the workspace apart from the binary, this crate prints nothing; it reads the
//! measurement and trace files it is asked to read.

pub mod attention_cases;
pub mod calibrate;
pub mod case;
pub mod correlate;
pub mod data;
pub mod gate;
pub mod gemm_cases;
pub mod hash;
pub mod kernel_cases;
pub mod measure;
pub mod measurement;
pub mod memory_cases;
pub mod moe_cases;
pub mod nsight;
pub mod optimize;
mod panic;
pub mod reference;
pub mod sim_options;
pub mod stats;

pub use case::{Case, Kind, Metric, Trust};
pub use memory_cases::{Bench, Plan, latency_sweep, memory_case_plan};
pub use reference::{default_reference_dir, load_cases};

//! Microbenchmark traces: the SASS of the microbenchmarks that published GPU latencies and
//! bandwidths come from, as [`Trace`]s the simulator replays.
//!
//! | generator | published source | measures |
//! |---|---|---|
//! | [`pointer_chase`] / [`pointer_chase_pair`] | HPMLL `random_latency`, RRZE `gpu-latency` | load latency at a footprint |
//! | [`stream`] | RRZE `gpu-stream` (STREAM) | DRAM bandwidth: read, write, copy, triad |
//! | [`l2_read`] | RRZE `gpu-l2-cache` | L2 read bandwidth at a data-set size |
//! | [`shared_bank_conflicts`] | the textbook n-way conflict | shared-memory wavefronts |
//! | [`async_copy_pipeline`] | cp.async / TMA multistage loops | copy latency hiding |
//! | [`dsmem_latency`] / [`dsmem_latency_pair`] | HPMLL `DSM/Latency` | distributed shared memory latency |
//!
//! Each returns a [`UbenchTrace`]: the trace, a one-line description, what to measure
//! ([`Measure`]) and on which kernel ([`UbenchTrace::timed_kernel`]). Each module's
//! documentation shows the SASS it emits. [`by_name`] builds them from `key=value` parameters
//! (the CLI's `gpusim trace ubench`).
//!
//! Parameter structs have `Default`s, a `validate` method and a parameter table ([`params`]);
//! the generator functions return `validate`'s message as a [`crate::WorkloadError`].

mod banks;
mod chase;
mod dsmem;
mod l2;
pub mod params;
mod pipeline;
mod stream;

use gpusim_configs::Arch;
use gpusim_isa::Trace;

pub use banks::{SharedBanks, shared_bank_conflicts};
pub use chase::{PointerChase, pointer_chase, pointer_chase_pair};
pub use dsmem::{CLUSTER_SHARED_RANK_STRIDE, CLUSTER_SHARED_WINDOW, Dsmem, dsmem_latency, dsmem_latency_pair};
pub use l2::{L2Read, l2_read};
pub use pipeline::{CopyEngine, CopyPipeline, async_copy_pipeline};
pub use stream::{Stream, StreamKind, stream, two_cta_spoiler};

/// A microbenchmark trace and how to read its simulation.
#[derive(Clone, Debug)]
pub struct UbenchTrace {
    pub trace: Trace,
    /// One line: what the kernel does, its shape, and how to compute the result.
    pub description: String,
    pub measure: Measure,
    /// Index in `trace.kernels` of the kernel `measure` refers to. The others are set-up (the L2
    /// warm-up) or a reference (the conflict-free twin of the bank-conflict kernel).
    pub timed_kernel: usize,
}

/// What a microbenchmark measures, and how to compute it from the simulated cycles of the kernel
/// [`UbenchTrace::timed_kernel`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measure {
    /// Latency of one dependent access. `accesses` is the number of timed dependent accesses in
    /// the kernel, but its cycles also hold launch, warm-up and drain: the latency is
    /// `(cycles₂ − cycles₁) / (accesses₂ − accesses₁)` over the two traces of
    /// [`pointer_chase_pair`] or [`dsmem_latency_pair`], which differ only in the timed part.
    LatencyPerAccess { accesses: u64 },
    /// Bytes moved through the level of interest by the kernel (read plus written, as STREAM and
    /// RRZE count them): bandwidth = `bytes / (cycles / clock)`.
    Bandwidth { bytes: u64 },
    /// The kernel's cycles themselves (compare across parameters or with the reference kernel).
    Cycles,
}

/// The names [`by_name`] knows, in the order `gpusim trace ubench` lists them.
pub const NAMES: &[&str] = &[
    "pointer-chase",
    "stream-read",
    "stream-write",
    "stream-copy",
    "stream-triad",
    "l2-read",
    "shared-banks",
    "cp-async-pipeline",
    "tma-pipeline",
    "dsmem-latency",
];

/// Builds the microbenchmark `name` (one of [`NAMES`]) with parameters given as `(key, value)`
/// pairs named like the fields of its parameter struct (`footprint_bytes`, `stages`, ...). Sizes
/// take units (`"16 MiB"`), integers may be hexadecimal (`0x7f0000000000`), booleans are
/// `true`/`false`, optional counts take `all` or `default`. Errors name the unknown generator or
/// parameter with the valid ones, or say which value is wrong.
///
/// `pointer-chase` gives one trace (with `passes` timed passes); for the latency, build it with
/// `passes` = P and P + 1 and difference the cycles, as [`pointer_chase_pair`] does.
pub fn by_name(name: &str, params: &[(String, String)], arch: &Arch) -> Result<UbenchTrace, String> {
    if !NAMES.contains(&name) {
        return Err(format!("unknown microbenchmark `{name}`; valid names: {}", NAMES.join(", ")));
    }
    let g = crate::registry::find(name)?.generate(params, arch)?;
    Ok(UbenchTrace {
        trace: g.trace,
        description: g.description,
        measure: g.measure.unwrap_or(Measure::Cycles),
        timed_kernel: g.timed_kernel,
    })
}

//! # gpusim-sim-core
//!
//! The timing model. It replays warp instruction streams from an [`gpusim_isa::TraceSource`]
//! on a chip described by a [`gpusim_configs::Arch`] and returns a [`Report`].
//!
//! Invariants:
//! - No I/O: it reads nothing and prints nothing; trace sources are called through a trait.
//! - Deterministic: the same arch and trace give a bit-identical report on every machine. No
//!   hash-map iteration order, no threads in a run (yet); timing uses integer arithmetic (bandwidth
//!   servers in fixed point, [`rate`]) or single exactly-rounded IEEE operations, never a
//!   platform math library.
//! - No heap allocation per simulated instruction; idle cycles are skipped, not stepped.
//!
//! Reading order: [`engine`] (the loop; [`deps`] for when kernels may start, [`observer`] for
//! watching a run), [`sm`] (one SM: `mod.rs`, then `issue.rs`),
//! [`sm::scheduler`], [`timing`], [`occupancy`](mod@occupancy), [`mem`], [`stats`], [`report`].

pub mod cta_groups;
pub mod deps;
pub mod engine;
pub mod error;
pub mod footprint;
mod host;
pub mod kernel_run;
pub mod mem;
pub mod observer;
pub mod occupancy;
pub mod rate;
pub mod report;
pub mod sample;
pub mod sm;
pub mod sol;
pub mod stats;
#[cfg(test)]
mod test_rng;
pub mod timing;

pub use engine::{LOOKAHEAD_KERNELS, STOP_POLL, SimOptions, simulate, simulate_observed};
pub use error::{SimError, SimErrorKind};
pub use footprint::{Footprint, footprint};
pub use observer::{CtaEvent, MemSample, NoObserver, Observer, SmSample};
pub use occupancy::{Limiter, Occupancy, occupancy};
pub use report::{KernelReport, Partial, Report, SteadyWindow, StreamReport};
pub use sample::{SampleOptions, Sampled};
pub use sol::{Bound, Roofline, RooflineLevel, SolEntry, SpeedOfLight};
pub use stats::{MemTraffic, StallReason};

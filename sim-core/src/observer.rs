//! Watching a run as it happens: kernel and CTA events, and periodic per-SM counters.
//!
//! The engine is generic over its [`Observer`], so a run without one ([`NoObserver`], what
//! [`crate::simulate`] uses) compiles every call away: observing costs nothing when absent.
//! Timelines (Chrome trace-event JSON for Perfetto) and sweeps' progress are built on it, in the
//! binary; sim-core itself only calls it.

use gpusim_isa::{Dim3, KernelInfo};

/// A CTA placed on or retired from an SM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CtaEvent {
    /// The kernel's id in the trace ([`KernelInfo::id`]).
    pub kernel: u32,
    pub cta: Dim3,
    pub sm: u32,
    /// SM cycle of the placement or retirement.
    pub cycle: u64,
}

/// One SM's counters at a sampling point.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SmSample {
    pub sm: u32,
    pub resident_ctas: u32,
    pub resident_warps: u32,
    /// Warp instructions the SM has issued since the run began (all kernels).
    pub warp_instructions: u64,
}

/// The memory system's counters at a sampling point, summed over every kernel since the run
/// began. Bytes and hits are counted when the accesses issue, as in the report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemSample {
    pub dram_bytes: u64,
    pub l2_bytes: u64,
    pub l2_hits: u64,
    pub l2_misses: u64,
}

/// Receives the events of a run, in simulated-time order (non-decreasing cycles; within a
/// cycle, retirements before placements). Every method has an empty default.
///
/// Contract: the events are a function of the run alone (deterministic), and an observer cannot
/// change the run: it gets values, never the engine's state.
pub trait Observer {
    /// A kernel's time starts (its launch; its first CTA follows after the launch latency).
    /// `cycle` is the report's `start_cycle`.
    fn kernel_start(&mut self, _kernel: &KernelInfo, _cycle: u64) {}
    /// The last CTA of a kernel retired; `cycle` is the report's `end_cycle`.
    fn kernel_end(&mut self, _kernel: &KernelInfo, _cycle: u64) {}
    fn cta_launch(&mut self, _e: &CtaEvent) {}
    fn cta_retire(&mut self, _e: &CtaEvent) {}
    /// Cycles between [`Observer::sample`] calls; `None` (the default) for no sampling. Asked once,
    /// when the run starts.
    fn sample_interval(&self) -> Option<u64> {
        None
    }
    /// The counters of every SM, in SM order, at `cycle` (a multiple of the interval). Idle
    /// stretches the engine skips are sampled too, with the unchanged counters.
    fn sample(&mut self, _cycle: u64, _sms: &[SmSample]) {}
    /// The memory counters at the same sampling point, right after [`Observer::sample`].
    fn memory_sample(&mut self, _cycle: u64, _mem: &MemSample) {}
}

/// The observer of a run nobody watches.
pub struct NoObserver;

impl Observer for NoObserver {}

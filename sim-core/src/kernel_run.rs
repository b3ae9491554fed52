//! A kernel while it runs: its resolved opcode timing, occupancy, progress and statistics.

use gpusim_configs::Arch;
use gpusim_isa::{KernelInfo, OpDesc, OpTable, UnitClass};

use crate::occupancy::Occupancy;
use crate::stats::{MemTraffic, StallCounts, StallReason};
use crate::timing::{OpTiming, resolve};

/// Counters of one kernel, summed over all SMs.
#[derive(Clone, Debug, Default)]
pub struct KernelStats {
    pub warp_insts: u64,
    /// Instructions times active lanes.
    pub thread_insts: u64,
    pub stalls: StallCounts,
    pub traffic: MemTraffic,
    /// Cycles each pipe class was busy, summed over sub-cores.
    pub pipe_busy: [u64; UnitClass::ALL.len()],
    pub cuda_core_flops: u64,
    pub tensor_flops: u64,
    /// Executed warp instructions per op id.
    pub op_counts: Vec<u64>,
    /// Cycles during which an SM held at least one CTA of the kernel, summed over SMs.
    pub sm_active_cycles: u64,
    /// Launch-to-drain lifetime of every warp, summed: counted apart from the stall reasons,
    /// which must add up to it.
    pub resident_warp_cycles: u64,
}

impl KernelStats {
    #[inline]
    pub fn stall(&mut self, r: StallReason, n: u64) {
        self.stalls.add(r, n);
    }
}

/// The kernel's traffic counters at one cycle (a boundary of its steady window).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TrafficMark {
    pub cycle: u64,
    pub requested_bytes: u64,
    pub l2_bytes: u64,
    pub dram_bytes: u64,
}

pub struct KernelRun {
    pub info: KernelInfo,
    pub descs: Vec<OpDesc>,
    pub timing: Vec<OpTiming>,
    pub occupancy: Occupancy,
    pub stats: KernelStats,
    /// Cycle the kernel's time starts: its launch (the first CTA follows after the launch
    /// latency).
    pub start: Option<u64>,
    /// Cycle the kernel was launched (its dependencies done, plus the launch overhead).
    pub launched_at: u64,
    /// Cycle the last CTA finished.
    pub end: u64,
    pub ctas_dispatched: u64,
    pub ctas_done: u64,
    /// Whether every CTA has been pulled from the trace.
    pub source_done: bool,
    /// The trace of the kernel failed part-way: it gets no more CTAs and never finishes.
    pub broken: bool,
    /// Earliest cycle CTAs may launch (dependencies plus launch overhead); `None` while a
    /// dependency is still running.
    pub launchable_at: Option<u64>,
    /// The predecessor (its kernel id) whose end set this kernel's launch, if one did: the link of
    /// the critical path.
    pub gated_by: Option<u32>,
    /// Per SM: resident CTAs of this kernel and since when the count has been non-zero.
    pub sm_resident: Vec<(u32, u64)>,
    /// When the first CTA retired: the ramp-up is over (the steady window's start).
    pub first_retire: Option<TrafficMark>,
    /// When a CTA slot first freed with no CTA left to fill it: the tail begins (the steady
    /// window's end). Set only after `first_retire`.
    pub first_idle_slot: Option<TrafficMark>,
    /// How the kernel was sampled ([`crate::sample`]); `None` when every CTA ran in detail.
    pub sampled: Option<crate::sample::Sampled>,
    /// Per-group CTA times when the kernel's CTAs are grouped (`KernelInfo::cta_group`).
    pub groups: Option<crate::cta_groups::GroupTimes>,
}

impl KernelRun {
    pub fn new(info: KernelInfo, occupancy: Occupancy, sms: usize) -> KernelRun {
        let groups = info.cta_group.as_ref().map(|_| crate::cta_groups::GroupTimes::default());
        KernelRun {
            groups,
            info,
            descs: Vec::new(),
            timing: Vec::new(),
            occupancy,
            stats: KernelStats::default(),
            start: None,
            launched_at: 0,
            end: 0,
            ctas_dispatched: 0,
            ctas_done: 0,
            source_done: false,
            broken: false,
            launchable_at: None,
            gated_by: None,
            sm_resident: vec![(0, 0); sms],
            first_retire: None,
            first_idle_slot: None,
            sampled: None,
        }
    }

    /// Resolves timing for op ids the table gained since the last call.
    pub fn sync_ops(&mut self, ops: &OpTable, arch: &Arch) {
        for id in self.timing.len()..ops.len() {
            let d = ops.get(id as u16).clone();
            self.timing.push(resolve(&d, arch));
            self.descs.push(d);
        }
        self.stats.op_counts.resize(self.timing.len(), 0);
    }

    /// The traffic counters now, stamped with `cycle`.
    pub fn mark(&self, cycle: u64) -> TrafficMark {
        let t = &self.stats.traffic;
        TrafficMark { cycle, requested_bytes: t.requested_bytes, l2_bytes: t.l2.bytes, dram_bytes: t.dram.bytes }
    }

    pub fn finished(&self) -> bool {
        self.source_done && !self.broken && self.ctas_done == self.ctas_dispatched
    }
}

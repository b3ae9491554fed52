//! Plain statistics: counters as value structs, kept apart from the printers that format them.
//! Every counter has a name, a unit and a description ([`StallReason::describe`],
//! [`crate::report`] field docs) so reports and `--json` can explain themselves.

use serde::Serialize;

/// Why a resident warp did not issue in a cycle, with Nsight Compute's names
/// (`smsp__pcsamp_warps_issue_stalled_*`). Every resident warp is counted in exactly one reason
/// every cycle, so the counters of a kernel add up to its resident warp-cycles.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StallReason {
    /// The warp issued this cycle.
    Selected,
    /// Ready, but the scheduler picked another warp.
    NotSelected,
    /// Waiting on a global/local memory (L1TEX) result.
    LongScoreboard,
    /// Waiting on a shared-memory, MUFU or other MIO result.
    ShortScoreboard,
    /// Waiting on a fixed-latency dependency.
    Wait,
    /// The target math pipe is busy.
    MathPipeThrottle,
    /// The MIO (shared memory) instruction queue is full.
    MioThrottle,
    /// The LSU (global/local memory) instruction queue is full.
    LgThrottle,
    /// Waiting at a CTA barrier or an mbarrier.
    Barrier,
    /// Waiting at a memory barrier for outstanding accesses.
    Membar,
    /// Waiting for a branch target to resolve.
    BranchResolving,
    /// No instruction fetched yet (warp start).
    NoInstruction,
    /// Exited, waiting for outstanding stores to drain.
    Drain,
    /// Sleeping (`NANOSLEEP`).
    Sleeping,
    /// Waiting on asynchronous tensor work (`WARPGROUP.DEPBAR`).
    MathDependency,
}

impl StallReason {
    pub const COUNT: usize = 15;
    pub const ALL: [StallReason; StallReason::COUNT] = [
        StallReason::Selected,
        StallReason::NotSelected,
        StallReason::LongScoreboard,
        StallReason::ShortScoreboard,
        StallReason::Wait,
        StallReason::MathPipeThrottle,
        StallReason::MioThrottle,
        StallReason::LgThrottle,
        StallReason::Barrier,
        StallReason::Membar,
        StallReason::BranchResolving,
        StallReason::NoInstruction,
        StallReason::Drain,
        StallReason::Sleeping,
        StallReason::MathDependency,
    ];

    pub const fn index(self) -> usize {
        self as usize
    }

    /// Nsight Compute's name.
    pub const fn name(self) -> &'static str {
        match self {
            StallReason::Selected => "selected",
            StallReason::NotSelected => "not_selected",
            StallReason::LongScoreboard => "long_scoreboard",
            StallReason::ShortScoreboard => "short_scoreboard",
            StallReason::Wait => "wait",
            StallReason::MathPipeThrottle => "math_pipe_throttle",
            StallReason::MioThrottle => "mio_throttle",
            StallReason::LgThrottle => "lg_throttle",
            StallReason::Barrier => "barrier",
            StallReason::Membar => "membar",
            StallReason::BranchResolving => "branch_resolving",
            StallReason::NoInstruction => "no_instruction",
            StallReason::Drain => "drain",
            StallReason::Sleeping => "sleeping",
            StallReason::MathDependency => "math_dependency",
        }
    }

    pub const fn describe(self) -> &'static str {
        match self {
            StallReason::Selected => "issued an instruction",
            StallReason::NotSelected => "ready, but another warp was issued",
            StallReason::LongScoreboard => "waiting for a global/local memory result",
            StallReason::ShortScoreboard => "waiting for a shared-memory or MUFU result",
            StallReason::Wait => "waiting for a fixed-latency dependency",
            StallReason::MathPipeThrottle => "the math pipe was busy",
            StallReason::MioThrottle => "the shared-memory (MIO) queue was full",
            StallReason::LgThrottle => "the global-memory (LSU) queue was full",
            StallReason::Barrier => "waiting at a CTA barrier or mbarrier",
            StallReason::Membar => "waiting at a memory barrier",
            StallReason::BranchResolving => "waiting for a branch to resolve",
            StallReason::NoInstruction => "no instruction fetched yet",
            StallReason::Drain => "exited, draining outstanding stores",
            StallReason::Sleeping => "sleeping",
            StallReason::MathDependency => "waiting for asynchronous tensor-core work",
        }
    }
}

/// Warp-cycles per stall reason.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct StallCounts(pub [u64; StallReason::COUNT]);

impl StallCounts {
    #[inline]
    pub fn add(&mut self, r: StallReason, n: u64) {
        self.0[r.index()] += n;
    }
    pub fn get(&self, r: StallReason) -> u64 {
        self.0[r.index()]
    }
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
    pub fn merge(&mut self, o: &StallCounts) {
        for i in 0..StallReason::COUNT {
            self.0[i] += o.0[i];
        }
    }
}

/// Bytes and requests at one level of the memory hierarchy.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize)]
pub struct LevelTraffic {
    /// Requests (warp-level accesses or sector requests, as the level counts them).
    pub requests: u64,
    /// 32-byte sectors moved.
    pub sectors: u64,
    /// Bytes moved.
    pub bytes: u64,
    pub hits: u64,
    pub misses: u64,
}

impl LevelTraffic {
    pub fn merge(&mut self, o: &LevelTraffic) {
        self.requests += o.requests;
        self.sectors += o.sectors;
        self.bytes += o.bytes;
        self.hits += o.hits;
        self.misses += o.misses;
    }
}

/// Traffic per level of the memory hierarchy.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize)]
pub struct MemTraffic {
    /// Bytes the warps asked for (global/local loads and stores, before coalescing).
    pub requested_bytes: u64,
    /// L1 data cache (global/local through L1).
    pub l1: LevelTraffic,
    /// Shared memory (LDS/STS/LDSM/async-copy writes), with bank-conflict wavefronts as requests.
    pub shared: LevelTraffic,
    pub l2: LevelTraffic,
    pub dram: LevelTraffic,
}

impl MemTraffic {
    pub fn merge(&mut self, o: &MemTraffic) {
        self.requested_bytes += o.requested_bytes;
        self.l1.merge(&o.l1);
        self.shared.merge(&o.shared);
        self.l2.merge(&o.l2);
        self.dram.merge(&o.dram);
    }
}

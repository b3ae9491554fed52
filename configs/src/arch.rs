//! The validated chip description the simulator consumes.
//!
//! An `Arch` that exists is a chip that makes sense: [`crate::load()`] builds it from TOML (with
//! inheritance), fills defaults, and runs the cross-field checks ([`crate::validate()`]). Every
//! field is in typed units. The TOML schema, parameter descriptions, units, defaults and valid
//! ranges are declared in `schema.rs` and available through [`crate::explain`] and
//! [`crate::all_params`]; the TOML key of a field is `<section>.<field>` (`l2.slices`). This file
//! is the contract with `sim-core`.

use std::collections::BTreeMap;

use gpusim_isa::UnitClass;

use crate::units::{Bytes, BytesPerCycle, BytesPerSec, Cycles, Hertz, Picos};

/// A whole chip.
#[derive(Clone, Debug, PartialEq)]
pub struct Arch {
    /// Preset or file name.
    pub name: String,
    pub description: String,
    /// Compute capability as major·10 + minor (80, 86, 90, 100).
    pub compute_capability: u32,
    pub clocks: Clocks,
    pub sm: Sm,
    pub scheduler: Scheduler,
    pub pipes: Pipes,
    /// Per-opcode timing that overrides the pipe class (`DFMA`, `MUFU`, ...), by base mnemonic.
    pub opcodes: BTreeMap<String, PipeTiming>,
    pub tensor: Tensor,
    pub l1: L1,
    pub l2: L2,
    pub noc: Noc,
    pub hbm: Hbm,
    pub sim: SimParams,
}

/// Clock domains.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Clocks {
    /// SM (graphics) clock: the clock of every `Cycles` in `sm`, `pipes`, `tensor`, `l1`, `l2`, `noc`.
    pub sm: Hertz,
    /// Memory (HBM) clock; `hbm` timings are in this domain.
    pub memory: Hertz,
    /// SM clock under full tensor load (power-limited); `Hertz(0)` means no power limit. Use
    /// [`Clocks::effective_sm`] rather than reading it directly.
    pub sm_tensor_load: Hertz,
}

impl Clocks {
    /// Locks the SM clock at `hz` (as `nvidia-smi -lgc` does, or as a measurement that states its
    /// clock implies): every kernel runs at it, whatever its tensor load.
    pub fn lock_sm(&mut self, hz: Hertz) {
        self.sm = hz;
        self.sm_tensor_load = Hertz(0);
    }

    /// The SM clock of a kernel whose tensor pipes are busy `tensor_utilization` (0..=1) of its
    /// cycles: linear between `sm` (idle) and `sm_tensor_load` (saturated). A first-order model
    /// of a power-capped part: dynamic power grows with tensor activity, and the governor trades
    /// clock for it so that a saturated part sits at the clock its tensor peak is quoted at.
    pub fn effective_sm(&self, tensor_utilization: f64) -> Hertz {
        if self.sm_tensor_load.0 == 0 || self.sm_tensor_load.0 >= self.sm.0 {
            return self.sm;
        }
        let u = if tensor_utilization.is_finite() { tensor_utilization.clamp(0.0, 1.0) } else { 0.0 };
        let drop = (self.sm.0 - self.sm_tensor_load.0) as f64 * u;
        Hertz(self.sm.0 - drop.round() as u64)
    }
}

/// Streaming multiprocessor resources and occupancy limits.
#[derive(Clone, Debug, PartialEq)]
pub struct Sm {
    pub count: u32,
    /// Graphics processing clusters; SMs are spread evenly over them. Thread-block clusters
    /// are placed within one GPC.
    pub gpcs: u32,
    /// Sub-cores (SM sub-partitions, SMSPs) per SM, each with one warp scheduler.
    pub sub_cores: u32,
    pub max_warps: u32,
    pub max_ctas: u32,
    pub max_threads: u32,
    /// 32-bit registers per SM.
    pub registers: u32,
    pub max_registers_per_thread: u32,
    /// Registers are allocated per warp in units of this many registers (256 on sm_80/sm_90).
    pub register_alloc_unit: u32,
    /// Largest shared memory carveout per SM.
    pub shared_mem_per_sm: Bytes,
    pub shared_mem_per_cta: Bytes,
    /// Shared memory is allocated per CTA in units of this size.
    pub shared_mem_alloc_unit: Bytes,
    /// Shared memory the system reserves per CTA (1 KiB on sm_80 and later).
    pub shared_mem_reserved_per_cta: Bytes,
    /// Carveout sizes the hardware supports, ascending.
    pub shared_mem_carveouts: Vec<Bytes>,
    pub max_cluster_size: u32,
    /// Memory instructions the LD/ST path accepts per sub-core before `lg_throttle`/`mio_throttle`.
    pub lsu_queue_depth: u32,
    /// Cycles from a branch's issue until the warp may fetch again.
    pub branch_resolve: Cycles,
    /// Load-to-use latency of a distributed-shared-memory load from another CTA of the cluster.
    pub dsmem_latency: Cycles,
}

/// Most sectors an L2 line may hold: the memory model keeps a line's valid and dirty sectors
/// as 32-bit masks.
pub const MAX_SECTORS_PER_LINE: u64 = 32;

impl Arch {
    /// The line and sector sizes the memory model works with: the L2 line rounded up to a
    /// power of two of at least 32 bytes, the L1 sector to one of at least 8 bytes, at most a
    /// line. The one rounding the hierarchy and validation share.
    pub fn model_line_and_sector(&self) -> (u64, u64) {
        let line = self.l2.line.0.max(32).next_power_of_two();
        (line, self.l1.sector.0.max(8).next_power_of_two().min(line))
    }
}

impl Sm {
    /// The GPC SM `sm` belongs to: SMs are spread evenly, SM `s` of `n` in GPC `s·gpcs/n`, with
    /// `gpcs` clamped to `[1, n]`. The one mapping the engine (cluster placement), the memory
    /// hierarchy (near L2 partition) and the generators (concurrent clusters) share.
    pub fn gpc_of(&self, sm: u32) -> u32 {
        let sms = self.count.max(1) as u64;
        (sm as u64 * self.gpcs_clamped() as u64 / sms) as u32
    }

    /// `gpcs` clamped to `[1, count]` (a description with no GPC count has one).
    pub fn gpcs_clamped(&self) -> u32 {
        self.gpcs.clamp(1, self.count.max(1))
    }
}

/// Warp scheduling policy, chosen by name.
#[derive(Clone, Debug, PartialEq)]
pub struct Scheduler {
    /// `gto` (greedy-then-oldest), `lrr` (loose round-robin) or `two_level`.
    pub policy: String,
    /// Size of the active set for `two_level`.
    pub active_warps: u32,
}

/// Latency and issue interval of one pipe or opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PipeTiming {
    /// Cycles from issue until a dependent instruction may issue.
    pub latency: Cycles,
    /// Cycles the pipe is busy with one warp instruction.
    pub issue_interval: Cycles,
}

/// One [`PipeTiming`] per unit class, per sub-core.
#[derive(Clone, Debug, PartialEq)]
pub struct Pipes {
    pub by_class: [PipeTiming; UnitClass::ALL.len()],
}

impl Pipes {
    pub fn get(&self, c: UnitClass) -> PipeTiming {
        self.by_class[c.index()]
    }
}

/// Tensor-core rates and latencies.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    /// Dense FLOP per clock per SM by input type key (`fp16`, `bf16`, `tf32`, `fp8`, `int8`
    /// (ops), `fp6`, `fp4`, `fp64`). A missing key means the chip has no tensor support for it.
    pub flops_per_clk_per_sm: BTreeMap<String, f64>,
    /// Synchronous (`mma.sync`) rate by input type key, where it differs from
    /// `flops_per_clk_per_sm`; read it through [`Tensor::mma_sync_rate`].
    pub mma_sync_flops_per_clk_per_sm: BTreeMap<String, f64>,
    /// Latency of a synchronous `mma.sync` (HMMA m16n8k16) from issue to result.
    pub mma_latency: Cycles,
    /// Latency of an asynchronous warpgroup MMA with N = 8; grows with N at the tensor rate.
    pub wgmma_base_latency: Cycles,
}

impl Tensor {
    /// FLOP per clock per SM of a synchronous warp MMA on input type `key`: the part's own
    /// `mma.sync` rate where it states one, else its dense tensor rate; 0 where neither has the
    /// type (no tensor support for it).
    pub fn mma_sync_rate(&self, key: &str) -> f64 {
        self.mma_sync_flops_per_clk_per_sm
            .get(key)
            .or_else(|| self.flops_per_clk_per_sm.get(key))
            .copied()
            .unwrap_or(0.0)
    }
}

/// L1 data cache and shared memory: one SRAM per SM.
#[derive(Clone, Debug, PartialEq)]
pub struct L1 {
    /// Unified SRAM per SM (L1 + shared memory).
    pub sram: Bytes,
    pub line: Bytes,
    pub sector: Bytes,
    pub assoc: u32,
    pub hit_latency: Cycles,
    /// L1 data bandwidth per SM.
    pub bandwidth: BytesPerCycle,
    /// Rate of the L1's miss path for LDG loads; 0: no limit of its own.
    pub miss_bandwidth: BytesPerCycle,
    pub shared_banks: u32,
    pub shared_bank_width: Bytes,
    pub shared_latency: Cycles,
}

/// The L2 cache.
#[derive(Clone, Debug, PartialEq)]
pub struct L2 {
    pub size: Bytes,
    pub slices: u32,
    /// Partitions (2 on A100/H100: near and far halves).
    pub partitions: u32,
    pub assoc: u32,
    pub line: Bytes,
    /// Load-to-use latency of a hit in the near partition, as seen by an SM.
    pub hit_latency: Cycles,
    /// Extra latency of a hit in the far partition.
    pub far_extra_latency: Cycles,
    pub slice_bandwidth: BytesPerCycle,
    /// Extra latency of a TMA load over an ordinary load from the same level.
    pub tma_extra_latency: Cycles,
}

/// The network between SMs and L2 slices.
#[derive(Clone, Debug, PartialEq)]
pub struct Noc {
    /// Bandwidth of one SM's port into the network.
    pub sm_port_bandwidth: BytesPerCycle,
}

/// High-bandwidth memory.
#[derive(Clone, Debug, PartialEq)]
pub struct Hbm {
    pub size: Bytes,
    pub stacks: u32,
    pub channels_per_stack: u32,
    /// Peak bandwidth of all stacks together (datasheet).
    pub bandwidth: BytesPerSec,
    /// Unloaded latency of a random (row-miss) DRAM access beyond the L2 miss path.
    pub latency: Picos,
    pub banks_per_channel: u32,
    /// Row (page) size per bank.
    pub row_size: Bytes,
    /// Extra time to open a row that is not open (tRP + tRCD).
    pub row_miss_penalty: Picos,
    /// tREFI.
    pub refresh_interval: Picos,
    /// tRFC: time a channel is unavailable per refresh.
    pub refresh_time: Picos,
    /// Bytes of consecutive addresses on one channel before the next.
    pub interleave: Bytes,
}

/// Simulation controls that are not properties of the chip.
#[derive(Clone, Debug, PartialEq)]
pub struct SimParams {
    /// Stop with an error naming the stuck warps when nothing retires for this many cycles.
    pub watchdog_cycles: Cycles,
    /// How kernels are launched: `eager` or `graph` ([`LAUNCH_MODES`](crate::LAUNCH_MODES));
    /// it picks which gap [`SimParams::launch_gap`] gives.
    pub launch: String,
    /// Time between one kernel finishing and a dependent kernel starting, launched eagerly.
    pub kernel_launch_overhead: Cycles,
    /// Time between one kernel finishing and a dependent kernel starting, in one CUDA graph.
    pub graph_launch_overhead: Cycles,
    /// Time from a kernel's launch until its first CTA starts, part of the kernel's time.
    pub kernel_launch_latency: Picos,
    /// The memory system's model by name (`hierarchy`, `simple`).
    pub memory_model: String,
}

impl SimParams {
    /// The gap between a kernel's last predecessor ending and the kernel launching, for the
    /// launch mode: `sim.graph_launch_overhead` under `graph`, else `sim.kernel_launch_overhead`
    /// (a valid chip names one of [`LAUNCH_MODES`](crate::LAUNCH_MODES)).
    pub fn launch_gap(&self) -> Cycles {
        if self.launch == "graph" { self.graph_launch_overhead } else { self.kernel_launch_overhead }
    }
}

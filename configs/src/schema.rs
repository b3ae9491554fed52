//! The TOML schema: every section and parameter, each declared once with its description, unit,
//! default and valid range (gem5 style). From these declarations come the serde layer, the merge
//! of a file over what it inherits, resolution into an [`Arch`], `to_toml`, and `explain`.
//!
//! ```toml
//! name = "my-chip"                 # default: the file or preset name
//! inherits = "h100-sxm5-80gb"      # optional: a preset name or a path relative to this file
//! compute_capability = "9.0"
//! [clocks]  [sm]  [scheduler]  [pipes.<class>]  [opcodes.<BASE>]
//! [tensor]  [tensor.flops_per_clk_per_sm]  [tensor.mma_sync_flops_per_clk_per_sm]  [l1]  [l2]  [noc]  [hbm]  [sim]
//! ```

use std::collections::BTreeMap;

use gpusim_isa::UnitClass;

use crate::arch::{Arch, Clocks, Hbm, L1, L2, Noc, PipeTiming, Pipes, Scheduler, SimParams, Sm, Tensor};
use crate::error::{ConfigError, Loc, Source};
use crate::field::{Cx, Merge, Opt, Rates, join, paragraph, section};
use crate::introspect::ParamInfo;
use crate::units::{Bytes, BytesPerCycle, BytesPerSec, Cycles, Hertz, Picos};
use crate::value::{ComputeCapability, ParamValue};

section! {
    /// `[clocks]`
    struct RawClocks => Clocks, "clocks" {
        /// SM (graphics) clock. Every cycle count in `sm`, `pipes`, `opcodes`, `tensor`, `l1`, `l2` and
        /// `noc` is a cycle of this clock.
        /// Range: 100 MHz to 10 GHz, beyond any shipped or announced GPU (a typo such as "1 Hz"
        /// would otherwise turn every cycle into a second).
        sm: Opt<Hertz>, "Hz", min Hertz(100_000_000), max Hertz(10_000_000_000);
        /// Memory (HBM) interface clock (not the data rate, which is twice this). Descriptive:
        /// the model takes DRAM timing from `hbm.bandwidth` and nanosecond latencies.
        /// Range: 100 MHz to 20 GHz.
        memory: Opt<Hertz>, "Hz", min Hertz(100_000_000), max Hertz(20_000_000_000);
        /// SM clock the part sustains while its tensor cores are busy every cycle: the power
        /// limit's clock, the one vendors quote tensor peaks at. A kernel runs at a clock between
        /// `sm` (tensor pipes idle) and this one (tensor pipes saturated), linear in its tensor-pipe
        /// utilisation; its cycles convert to time at that clock. 0 (default): no power limit, every
        /// kernel runs at `sm`.
        /// At most 10 GHz, as `sm`.
        sm_tensor_load: Opt<Hertz>, "Hz", default Hertz(0), max Hertz(10_000_000_000);
    }
}

section! {
    /// `[sm]`
    struct RawSm => Sm, "sm" {
        /// Streaming multiprocessors on the chip.
        count: Opt<u32>, "SMs", min 1, max 4096;
        /// Graphics processing clusters. SMs are spread over them as evenly as possible; a thread-block
        /// cluster is placed within one GPC.
        gpcs: Opt<u32>, "GPCs", min 1, max 4096;
        /// Sub-cores (SM sub-partitions, SMSPs) per SM, each with its own warp scheduler and pipes.
        sub_cores: Opt<u32>, "sub-cores", default 4, min 1, max 64;
        /// Resident warps per SM.
        /// At most 1024 (64 on sm_80/sm_90): per-warp state is allocated per resident warp.
        max_warps: Opt<u32>, "warps", min 1, max 1024;
        /// Resident CTAs (thread blocks) per SM.
        max_ctas: Opt<u32>, "CTAs", min 1, max 1024;
        /// Resident threads per SM.
        max_threads: Opt<u32>, "threads", min 1, max 32768;
        /// 32-bit registers per SM.
        /// At most 16 Mi (64 Ki on sm_80/sm_90).
        registers: Opt<u32>, "registers", min 1, max 16_777_216;
        /// Most registers one thread may use (255 on sm_80 and sm_90; R255 is the zero register).
        max_registers_per_thread: Opt<u32>, "registers", default 255, min 1, max 255;
        /// Registers are allocated per warp in units of this many registers (256 on sm_80 and sm_90).
        register_alloc_unit: Opt<u32>, "registers", default 256, min 1, max 65_536;
        /// Largest shared-memory carveout per SM; must be the last of `shared_mem_carveouts`.
        /// At most 64 MiB (228 KiB on H100).
        shared_mem_per_sm: Opt<Bytes>, "bytes", max Bytes(64 << 20);
        /// Most shared memory one CTA may use (with the opt-in attribute).
        shared_mem_per_cta: Opt<Bytes>, "bytes", max Bytes(64 << 20);
        /// Shared memory is allocated per CTA in units of this size (128 B on sm_80 and sm_90).
        shared_mem_alloc_unit: Opt<Bytes>, "bytes", default Bytes(128), min Bytes(1), max Bytes(64 << 10);
        /// Shared memory the system reserves per CTA (1 KiB on sm_80 and later).
        shared_mem_reserved_per_cta: Opt<Bytes>, "bytes", default Bytes(1024), max Bytes(64 << 10);
        /// Shared-memory carveouts the hardware supports, ascending; the rest of `l1.sram` is L1 cache.
        shared_mem_carveouts: Opt<Vec<Bytes>>, "bytes";
        /// Most CTAs in one thread-block cluster (1: no clusters, as before sm_90). Must fit in a GPC.
        max_cluster_size: Opt<u32>, "CTAs", default 1, min 1, max 64;
        /// Memory instructions the LD/ST path of one sub-core accepts before issue stalls with
        /// `lg_throttle`/`mio_throttle`. Default 8 is an estimate: NVIDIA documents no figure.
        lsu_queue_depth: Opt<u32>, "instructions", default 8, min 1, max 4096;
        /// Cycles from a branch's issue until the warp may fetch again. Default 4 is the ISA table's
        /// BRA latency (an estimate: NVIDIA documents no figure).
        branch_resolve: Opt<Cycles>, "cycles", default Cycles(4), max Cycles(1_000_000);
        /// Load-to-use latency of a distributed-shared-memory load from another CTA of the cluster
        /// (Hopper and later). Default 0: the part has no clusters.
        dsmem_latency: Opt<Cycles>, "cycles", default Cycles(0), max Cycles(1_000_000);
    }
}

section! {
    /// `[scheduler]`
    struct RawScheduler => Scheduler, "scheduler" {
        /// Warp scheduling policy of each sub-core: `gto` (greedy-then-oldest), `lrr` (loose
        /// round-robin) or `two_level`.
        policy: Opt<String>, "policy name", default "gto".to_string();
        /// Warps in the active set of the `two_level` policy, per sub-core (the other policies ignore
        /// it). Default 8, the fetch-group size of Narasiman et al., MICRO 2011.
        active_warps: Opt<u32>, "warps", default 8, min 1, max 1024;
    }
}

section! {
    /// `[pipes.<class>]` and `[opcodes.<BASE>]`
    struct RawPipe => PipeTiming, "pipes.<class>" {
        /// Cycles from issue until a dependent instruction may issue.
        latency: Opt<Cycles>, "cycles", min Cycles(1), max Cycles(1_000_000);
        /// Cycles the pipe of one sub-core is busy with one warp instruction: 32 threads divided by
        /// the pipe's lanes per sub-core (2 for 16 FP32 lanes).
        issue_interval: Opt<Cycles>, "cycles", min Cycles(1), max Cycles(1_000_000);
    }
}

section! {
    /// `[tensor]`
    struct RawTensor => Tensor, "tensor" {
        /// Latency of a synchronous `mma.sync` (HMMA m16n8k16) from issue to result. Default: the
        /// HMMA latency of the ISA opcode table.
        mma_latency: Opt<Cycles>, "cycles", default isa_timing("HMMA").latency, min Cycles(1), max Cycles(1_000_000);
        /// Latency of an asynchronous warpgroup MMA with N = 8; larger N adds time at the tensor rate.
        /// Default: the HGMMA latency of the ISA opcode table.
        wgmma_base_latency: Opt<Cycles>, "cycles", default isa_timing("HGMMA").latency, min Cycles(1), max Cycles(1_000_000);
        /// Dense tensor-core throughput, FLOP (multiply and add counted separately; ops for integer
        /// types) per clock per SM, by input type: fp16, bf16, tf32, fp64, fp8 (E4M3 and E5M2), fp6, fp4,
        /// int8, int4, b1. A type left out or set to 0 is not supported by the chip.
        flops_per_clk_per_sm: Rates, "FLOP/clk/SM";
        /// Throughput of the synchronous warp-level MMA (`mma.sync`: HMMA, IMMA, DMMA), FLOP per
        /// clock per SM, by the same input type keys. A type left out (or set to 0) runs at
        /// `flops_per_clk_per_sm`'s rate, which is right where the part's only MMA is synchronous
        /// (Volta to Ada). Hopper runs `mma.sync` below its warpgroup (`wgmma`) rate, so a
        /// FlashAttention-2-style kernel there cannot reach the chip's tensor peak.
        mma_sync_flops_per_clk_per_sm: Rates, "FLOP/clk/SM";
    }
}

section! {
    /// `[l1]`
    struct RawL1 => L1, "l1" {
        /// Unified SRAM per SM shared between the L1 data cache and shared memory.
        /// At most 64 MiB (256 KiB on H100): the model keeps tags for the L1 part of every SM.
        sram: Opt<Bytes>, "bytes", min Bytes(1), max Bytes(64 << 20);
        /// Cache line (tag granularity), 16 B to 4 KiB.
        line: Opt<Bytes>, "bytes", default Bytes(128), min Bytes(16), max Bytes(4096);
        /// Sector (fill granularity) within a line.
        sector: Opt<Bytes>, "bytes", default Bytes(32), min Bytes(1), max Bytes(4096);
        /// Ways per set of the L1 data cache (at most 1024: a lookup scans the set).
        assoc: Opt<u32>, "ways", min 1, max 1024;
        /// Load-to-use latency of an L1 hit (pointer chase).
        hit_latency: Opt<Cycles>, "cycles", min Cycles(1), max Cycles(1_000_000);
        /// Data bandwidth between the L1/shared SRAM and the SM's registers.
        bandwidth: Opt<BytesPerCycle>, "B/clk", max BytesPerCycle(65_536.0);
        /// Bytes per cycle one SM's L1 sends on to the L2 for LDG loads that miss or bypass it:
        /// the rate an SM streams L2-resident data with ordinary loads, below the SM's port
        /// (`noc.sm_port_bandwidth`), which async copies (LDGSTS, TMA) and stores use at full
        /// rate. 0: no limit of its own.
        miss_bandwidth: Opt<BytesPerCycle>, "B/clk", default BytesPerCycle(0.0), max BytesPerCycle(65_536.0);
        /// Shared-memory banks.
        shared_banks: Opt<u32>, "banks", default 32, min 1, max 1024;
        /// Width of one shared-memory bank.
        shared_bank_width: Opt<Bytes>, "bytes", default Bytes(4), min Bytes(1), max Bytes(1024);
        /// Load-to-use latency of a conflict-free shared-memory load.
        shared_latency: Opt<Cycles>, "cycles", min Cycles(1), max Cycles(1_000_000);
    }
}

section! {
    /// `[l2]`
    struct RawL2 => L2, "l2" {
        /// Total L2 capacity. At most 4 GiB (50 MiB on H100, 126 MiB on B200): the model keeps
        /// 24 B of state per line (`Cache::BYTES_PER_LINE`), allocated as lines are touched.
        size: Opt<Bytes>, "bytes", min Bytes(1), max Bytes(4 << 30);
        /// L2 slices (banks with their own tags and data port); addresses are hashed over them.
        slices: Opt<u32>, "slices", min 1, max 4096;
        /// Partitions the slices are split into (2 on A100 and H100: a near and a far half).
        partitions: Opt<u32>, "partitions", min 1, max 64;
        /// Ways per set (at most 1024: a lookup scans the set).
        assoc: Opt<u32>, "ways", min 1, max 1024;
        /// Cache line, 16 B to 4 KiB.
        line: Opt<Bytes>, "bytes", default Bytes(128), min Bytes(16), max Bytes(4096);
        /// Load-to-use latency of a hit in the near partition as an SM sees it (pointer chase),
        /// including the trip through the network.
        hit_latency: Opt<Cycles>, "cycles", min Cycles(1), max Cycles(1_000_000);
        /// Extra latency of a hit in the far partition (0 for a uniform L2).
        far_extra_latency: Opt<Cycles>, "cycles", default Cycles(0), max Cycles(1_000_000);
        /// Bandwidth of one slice.
        slice_bandwidth: Opt<BytesPerCycle>, "B/clk", max BytesPerCycle(65_536.0);
        /// Extra latency of a TMA (bulk tensor) load over an ordinary load from the same level:
        /// the copy engine's descriptor and transaction handling. 0 for parts without TMA.
        tma_extra_latency: Opt<Cycles>, "cycles", default Cycles(0), max Cycles(1_000_000);
    }
}

section! {
    /// `[noc]`
    struct RawNoc => Noc, "noc" {
        /// Bandwidth of one SM's port into the network.
        sm_port_bandwidth: Opt<BytesPerCycle>, "B/clk", max BytesPerCycle(65_536.0);
    }
}

section! {
    /// `[hbm]`
    struct RawHbm => Hbm, "hbm" {
        /// DRAM capacity. Descriptive: the model does not bound addresses by it.
        size: Opt<Bytes>, "bytes", min Bytes(1), max Bytes(1 << 50);
        /// HBM stacks (at most 64; 5 to 8 on current parts).
        stacks: Opt<u32>, "stacks", min 1, max 64;
        /// Independent channels per stack (8 for HBM2/HBM2e, 16 for HBM3/HBM3e).
        /// At most 256 (pseudo-channels included).
        channels_per_stack: Opt<u32>, "channels", min 1, max 256;
        /// Peak bandwidth of all stacks together (datasheet).
        /// 1 GB/s to 1 PB/s (3.35 TB/s on H100).
        bandwidth: Opt<BytesPerSec>, "B/s", min BytesPerSec(1e9), max BytesPerSec(1e15);
        /// Unloaded latency of a random DRAM access (a row miss) beyond the L2 miss path: such a
        /// load takes `l2.hit_latency` plus this. A row-buffer hit is `row_miss_penalty` faster.
        latency: Opt<Picos>, "time", max Picos(100_000_000);
        /// Banks per channel; each keeps one row open. Default 16: JEDEC HBM2/HBM3 (estimate for
        /// NVIDIA parts, which do not state it). At most 1024: the model keeps each bank's open row.
        banks_per_channel: Opt<u32>, "banks", default 16, min 1, max 1024;
        /// Row (page) size per bank. Default 1 KiB: JEDEC HBM2 pseudo-channel page size.
        row_size: Opt<Bytes>, "bytes", default Bytes(1024), min Bytes(32), max Bytes(1 << 20);
        /// Extra time to open a row that is not the bank's open one (precharge + activate,
        /// tRP + tRCD). Default 28 ns: JEDEC HBM2 speed bins, about 14 ns each.
        row_miss_penalty: Opt<Picos>, "time", default Picos(28_000), max Picos(100_000_000);
        /// Average interval between refresh commands (tREFI). Default 3.9 µs: JEDEC HBM2.
        refresh_interval: Opt<Picos>, "time", default Picos(3_900_000), max Picos(1_000_000_000_000);
        /// Time a channel cannot transfer data per refresh (tRFC). Default 260 ns: JEDEC 8 Gb
        /// HBM2 dies.
        refresh_time: Opt<Picos>, "time", default Picos(260_000), max Picos(1_000_000_000);
        /// Bytes of consecutive addresses mapped to one channel before the next.
        /// Default 256 B (estimate). At most 1 GiB.
        interleave: Opt<Bytes>, "bytes", default Bytes(256), min Bytes(32), max Bytes(1 << 30);
    }
}

section! {
    /// `[sim]`
    struct RawSim => SimParams, "sim" {
        /// Stop with an error naming the stuck warps when nothing retires for this many cycles.
        watchdog_cycles: Opt<Cycles>, "cycles", default Cycles(1_000_000), min Cycles(1), max Cycles(1 << 40);
        /// How the host launches the trace's kernels, which sets the gap between a kernel and a
        /// dependent one: `eager` (one launch call per kernel on a stream; the gap is
        /// `sim.kernel_launch_overhead`) or `graph` (the kernels replayed as one instantiated CUDA
        /// graph; the gap is `sim.graph_launch_overhead`). `gpusim run --cuda-graph` sets `graph`.
        launch: Opt<String>, "mode name", default "eager".to_string();
        /// GPU-side gap between one kernel finishing and a dependent kernel (same stream, or an
        /// `after` edge) launching, kernels launched eagerly (`sim.launch = "eager"`). The host's
        /// own launch cost is not modelled: a trace carries no host timing and every launch is
        /// taken as queued ahead. Default 2000 cycles, about 1 µs at 2 GHz. Source: NVIDIA's
        /// "Getting Started with CUDA Graphs" (developer.nvidia.com/blog/cuda-graphs, V100, 20
        /// back-to-back short kernels per stream synchronisation): 3.8 µs per kernel for a
        /// 2.9 µs kernel, a gap of about 0.9 µs. The blog's own text could not be checked here;
        /// the figures are those of a public code note that transcribes its measurement.
        kernel_launch_overhead: Opt<Cycles>, "cycles", default Cycles(2000), max Cycles(1 << 32);
        /// GPU-side gap between one kernel finishing and a dependent kernel launching when the
        /// kernels run as one CUDA graph (`sim.launch = "graph"`); the host launches the graph
        /// once, which is not modelled. Default 1000 cycles, about 0.5 µs at 2 GHz. Source: the
        /// same V100 measurement replayed as a graph, 3.4 µs per 2.9 µs kernel, a gap of about
        /// 0.5 µs (figures as transcribed, see `sim.kernel_launch_overhead`). NVIDIA's "Constant
        /// Time Launch for Straight-Line Graphs" (CUDA 12.x) was looked up for a newer figure:
        /// only its summary could be read, which states none, so none is taken from it.
        graph_launch_overhead: Opt<Cycles>, "cycles", default Cycles(1000), max Cycles(1 << 32);
        /// Fixed time a kernel costs beyond its CTAs' work: from its launch until its first CTA
        /// starts, counted in the kernel's time, as profiler (CUPTI) and CUDA-event timings of one
        /// kernel count it (grid set-up, parameter and descriptor fetch, cold instruction caches,
        /// the final memory flush). Default 0; presets give an estimate and `gpusim calibrate`
        /// fits it.
        kernel_launch_latency: Opt<Picos>, "time", default Picos(0), max Picos(1_000_000_000_000);
        /// Model of everything between the SMs' LD/ST units and DRAM: `hierarchy` (sectored
        /// L1s, partitioned L2, HBM channels with banks; docs/memory-model.md) or `simple` (one
        /// bandwidth server per SM port and one for DRAM, fixed latencies). `gpusim run
        /// --memory-model` overrides it for one run.
        memory_model: Opt<String>, "model name", default "hierarchy".to_string();
    }
}

/// A whole file (or a file merged over what it inherits).
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawConfig {
    pub name: Opt<String>,
    pub description: Opt<String>,
    pub compute_capability: Opt<ComputeCapability>,
    pub inherits: Opt<String>,
    pub clocks: RawClocks,
    pub sm: RawSm,
    pub scheduler: RawScheduler,
    pub pipes: BTreeMap<String, RawPipe>,
    pub opcodes: BTreeMap<String, RawPipe>,
    pub tensor: RawTensor,
    pub l1: RawL1,
    pub l2: RawL2,
    pub noc: RawNoc,
    pub hbm: RawHbm,
    pub sim: RawSim,
}

impl RawConfig {
    /// Merges what this file inherits under it. `name`, `description` and `inherits` belong to
    /// the file itself and are not inherited.
    pub fn merge_parent(&mut self, parent: RawConfig) {
        self.compute_capability.merge_from(parent.compute_capability);
        self.clocks.merge_from(parent.clocks);
        self.sm.merge_from(parent.sm);
        self.scheduler.merge_from(parent.scheduler);
        self.pipes.merge_from(parent.pipes);
        self.opcodes.merge_from(parent.opcodes);
        self.tensor.merge_from(parent.tensor);
        self.l1.merge_from(parent.l1);
        self.l2.merge_from(parent.l2);
        self.noc.merge_from(parent.noc);
        self.hbm.merge_from(parent.hbm);
        self.sim.merge_from(parent.sim);
    }

    /// Records the location of every value, which all came from `src`.
    pub fn locate(&mut self, src: &Source) {
        self.name.locate(src);
        self.description.locate(src);
        self.compute_capability.locate(src);
        self.inherits.locate(src);
        self.clocks.locate(src);
        self.sm.locate(src);
        self.scheduler.locate(src);
        self.pipes.locate(src);
        self.opcodes.locate(src);
        self.tensor.locate(src);
        self.l1.locate(src);
        self.l2.locate(src);
        self.noc.locate(src);
        self.hbm.locate(src);
        self.sim.locate(src);
    }

    /// `dotted key → location` of every value set.
    pub fn locs(&self) -> BTreeMap<String, Loc> {
        let mut out = BTreeMap::new();
        self.name.locs("name", &mut out);
        self.description.locs("description", &mut out);
        self.compute_capability.locs("compute_capability", &mut out);
        self.inherits.locs("inherits", &mut out);
        self.clocks.locs(RawClocks::PATH, &mut out);
        self.sm.locs(RawSm::PATH, &mut out);
        self.scheduler.locs(RawScheduler::PATH, &mut out);
        self.pipes.locs("pipes", &mut out);
        self.opcodes.locs("opcodes", &mut out);
        self.tensor.locs(RawTensor::PATH, &mut out);
        self.l1.locs(RawL1::PATH, &mut out);
        self.l2.locs(RawL2::PATH, &mut out);
        self.noc.locs(RawNoc::PATH, &mut out);
        self.hbm.locs(RawHbm::PATH, &mut out);
        self.sim.locs(RawSim::PATH, &mut out);
        out
    }

    /// The typed chip. `name` and `description` are used where the file sets none.
    pub fn resolve(&self, name: &str, description: &str, cx: &Cx) -> Result<Arch, ConfigError> {
        let cc = self.compute_capability.as_ref().ok_or_else(|| cx.missing("compute_capability"))?;
        let mut by_class = Vec::with_capacity(UnitClass::ALL.len());
        for class in UnitClass::ALL {
            let raw = self.pipes.get(class.name()).cloned().unwrap_or_default();
            by_class.push(raw.resolve(&join("pipes", class.name()), Some(&isa_pipe(class)), cx)?);
        }
        let pipes = Pipes { by_class: by_class.try_into().expect("one timing per unit class") };
        let mut opcodes = BTreeMap::new();
        for (base, raw) in &self.opcodes {
            // Unknown mnemonics were rejected with the document's keys (keys.rs).
            let class = gpusim_isa::opcode::lookup(base).map_or(UnitClass::Misc, |e| e.unit);
            opcodes.insert(base.clone(), raw.resolve(&join("opcodes", base), Some(&pipes.get(class)), cx)?);
        }
        Ok(Arch {
            name: self.name.as_ref().map_or_else(|| name.to_string(), |v| v.v.clone()),
            description: self.description.as_ref().map_or_else(|| description.to_string(), |v| v.v.clone()),
            compute_capability: cc.v.0,
            clocks: self.clocks.resolve(RawClocks::PATH, None, cx)?,
            sm: self.sm.resolve(RawSm::PATH, None, cx)?,
            scheduler: self.scheduler.resolve(RawScheduler::PATH, None, cx)?,
            pipes,
            opcodes,
            tensor: self.tensor.resolve(RawTensor::PATH, None, cx)?,
            l1: self.l1.resolve(RawL1::PATH, None, cx)?,
            l2: self.l2.resolve(RawL2::PATH, None, cx)?,
            noc: self.noc.resolve(RawNoc::PATH, None, cx)?,
            hbm: self.hbm.resolve(RawHbm::PATH, None, cx)?,
            sim: self.sim.resolve(RawSim::PATH, None, cx)?,
        })
    }
}

/// Every parameter of `a` as `(dotted key, TOML literal)`, in schema order, grouped by table.
pub(crate) fn emit(a: &Arch) -> Vec<(String, String)> {
    let mut s = vec![
        ("name".to_string(), a.name.to_toml()),
        ("description".to_string(), a.description.to_toml()),
        ("compute_capability".to_string(), ComputeCapability(a.compute_capability).to_toml()),
    ];
    RawClocks::emit(&a.clocks, RawClocks::PATH, &mut s);
    RawSm::emit(&a.sm, RawSm::PATH, &mut s);
    RawScheduler::emit(&a.scheduler, RawScheduler::PATH, &mut s);
    for class in UnitClass::ALL {
        RawPipe::emit(&a.pipes.get(class), &join("pipes", class.name()), &mut s);
    }
    for (base, t) in &a.opcodes {
        RawPipe::emit(t, &join("opcodes", base), &mut s);
    }
    RawTensor::emit(&a.tensor, RawTensor::PATH, &mut s);
    RawL1::emit(&a.l1, RawL1::PATH, &mut s);
    RawL2::emit(&a.l2, RawL2::PATH, &mut s);
    RawNoc::emit(&a.noc, RawNoc::PATH, &mut s);
    RawHbm::emit(&a.hbm, RawHbm::PATH, &mut s);
    RawSim::emit(&a.sim, RawSim::PATH, &mut s);
    s
}

/// The parameter `key` of `a` (dotted, as in a file) as a number in its kind's base unit;
/// `opcodes.<BASE>.*` of an opcode without an override is its pipe class's timing. `None`: no
/// such numeric parameter.
pub(crate) fn number(a: &Arch, key: &str) -> Option<f64> {
    let (head, rest) = key.split_once('.')?;
    match head {
        "clocks" => RawClocks::number(&a.clocks, rest),
        "sm" => RawSm::number(&a.sm, rest),
        "scheduler" => RawScheduler::number(&a.scheduler, rest),
        "tensor" => RawTensor::number(&a.tensor, rest),
        "l1" => RawL1::number(&a.l1, rest),
        "l2" => RawL2::number(&a.l2, rest),
        "noc" => RawNoc::number(&a.noc, rest),
        "hbm" => RawHbm::number(&a.hbm, rest),
        "sim" => RawSim::number(&a.sim, rest),
        "pipes" => {
            let (class, field) = rest.split_once('.')?;
            let class = UnitClass::ALL.into_iter().find(|c| c.name() == class)?;
            RawPipe::number(&a.pipes.get(class), field)
        }
        "opcodes" => {
            let (base, field) = rest.split_once('.')?;
            let timing = match a.opcodes.get(base) {
                Some(t) => *t,
                None => a.pipes.get(gpusim_isa::opcode::lookup(base)?.unit),
            };
            RawPipe::number(&timing, field)
        }
        _ => None,
    }
}

/// The placeholder that stands for any known base mnemonic in `opcodes.<BASE>.*` parameter names.
pub(crate) const OPCODE_PLACEHOLDER: &str = "<BASE>";

/// [`describe_all`], built once per process: describing formats every parameter's
/// documentation, and loading a file, expanding a study's `[vary]` keys and explaining a key
/// all look parameters up.
pub(crate) fn params() -> &'static [ParamInfo] {
    static PARAMS: std::sync::OnceLock<Vec<ParamInfo>> = std::sync::OnceLock::new();
    PARAMS.get_or_init(describe_all)
}

/// Metadata of every parameter, in schema order. Pipes are listed per class (with the class's
/// default from the ISA table); per-opcode overrides once, as `opcodes.<BASE>.*`.
pub(crate) fn describe_all() -> Vec<ParamInfo> {
    let top = |name: &str, description: &str, unit, default: Option<&str>, expected, kind| ParamInfo {
        name: name.to_string(),
        description: paragraph(description),
        unit,
        default: default.map(str::to_string),
        range: None,
        expected,
        kind,
        min: None,
        max: None,
    };
    let mut out = vec![
        top(
            "name",
            "Name of the chip in reports.",
            "text",
            Some("the preset name or the file name without `.toml`"),
            String::EXPECTED,
            String::KIND,
        ),
        top("description", "One line saying what the chip is.", "text", Some("empty"), String::EXPECTED, String::KIND),
        top(
            "compute_capability",
            "CUDA compute capability, major.minor (\"8.0\" for A100, \"9.0\" for H100).",
            "major.minor",
            None,
            ComputeCapability::EXPECTED,
            ComputeCapability::KIND,
        ),
        top(
            "inherits",
            "A preset name, or a path relative to this file, whose parameters this file overrides \
             field by field. Chains are allowed; cycles are an error.",
            "preset or path",
            Some("none"),
            String::EXPECTED,
            String::KIND,
        ),
    ];
    RawClocks::describe(RawClocks::PATH, None, &mut out);
    RawSm::describe(RawSm::PATH, None, &mut out);
    RawScheduler::describe(RawScheduler::PATH, None, &mut out);
    for class in UnitClass::ALL {
        let start = out.len();
        RawPipe::describe(&join("pipes", class.name()), Some(&isa_pipe(class)), &mut out);
        for p in &mut out[start..] {
            p.description = format!(
                "{} Pipe class `{}`; default: the ISA opcode table's {} timing.",
                p.description,
                class.name(),
                representative(class)
            );
        }
    }
    let start = out.len();
    RawPipe::describe(&join("opcodes", OPCODE_PLACEHOLDER), None, &mut out);
    for p in &mut out[start..] {
        p.description =
            format!("{} Overrides the pipe-class timing for one base mnemonic (`[opcodes.DFMA]`).", p.description);
        p.default = Some("the chip's timing of the opcode's pipe class".into());
    }
    RawTensor::describe(RawTensor::PATH, None, &mut out);
    RawL1::describe(RawL1::PATH, None, &mut out);
    RawL2::describe(RawL2::PATH, None, &mut out);
    RawNoc::describe(RawNoc::PATH, None, &mut out);
    RawHbm::describe(RawHbm::PATH, None, &mut out);
    RawSim::describe(RawSim::PATH, None, &mut out);
    out
}

use gpusim_isa::opcode::representative;

/// Timing of one opcode in the ISA table.
pub(crate) fn isa_timing(base: &str) -> PipeTiming {
    let e = gpusim_isa::opcode::lookup(base).unwrap_or_else(|| panic!("{base} is in the ISA opcode table"));
    PipeTiming { latency: Cycles(e.latency.into()), issue_interval: Cycles(e.issue_interval.into()) }
}

/// Default timing of a pipe class: its representative opcode's.
pub(crate) fn isa_pipe(class: UnitClass) -> PipeTiming {
    isa_timing(representative(class))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn representatives_are_in_their_class() {
        for class in UnitClass::ALL {
            let e = gpusim_isa::opcode::lookup(representative(class)).unwrap();
            assert_eq!(e.unit, class, "{}", e.name);
        }
    }

    #[test]
    fn every_parameter_has_a_description_and_unit() {
        let all = describe_all();
        assert!(all.len() > 80, "{}", all.len());
        for p in &all {
            assert!(p.description.len() > 10, "{}", p.name);
            assert!(!p.unit.is_empty(), "{}", p.name);
        }
        let mut names: Vec<_> = all.iter().map(|p| p.name.as_str()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), all.len(), "parameter names are unique");
    }
}

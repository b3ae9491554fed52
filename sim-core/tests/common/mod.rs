//! Shared helpers for sim-core tests: a small synthetic chip and a kernel builder.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;

use gpusim_configs::*;
use gpusim_isa::*;
use gpusim_sim_core::{Report, SimOptions, simulate};

/// An H100-like chip with round numbers, independent of the presets so that timing tests pin
/// the model and not the preset values.
pub fn arch(sms: u32) -> Arch {
    let t = |l: u64, i: u64| PipeTiming { latency: Cycles(l), issue_interval: Cycles(i) };
    let mut by_class = [t(4, 1); UnitClass::ALL.len()];
    by_class[UnitClass::Fp64.index()] = t(8, 2);
    by_class[UnitClass::Mufu.index()] = t(18, 8);
    by_class[UnitClass::Conv.index()] = t(14, 4);
    by_class[UnitClass::Tensor.index()] = t(32, 4);
    by_class[UnitClass::Mem.index()] = t(30, 1);
    by_class[UnitClass::Uniform.index()] = t(2, 1);
    let mut rates = BTreeMap::new();
    rates.insert("bf16".to_string(), 4096.0);
    rates.insert("fp16".to_string(), 4096.0);
    Arch {
        name: "test-chip".into(),
        description: "synthetic".into(),
        compute_capability: 90,
        clocks: Clocks { sm: Hertz(1_000_000_000), memory: Hertz(1_000_000_000), sm_tensor_load: Hertz(0) },
        sm: Sm {
            count: sms,
            gpcs: 1,
            sub_cores: 4,
            max_warps: 64,
            max_ctas: 32,
            max_threads: 2048,
            registers: 65536,
            max_registers_per_thread: 255,
            register_alloc_unit: 256,
            shared_mem_per_sm: Bytes(228 * 1024),
            shared_mem_per_cta: Bytes(227 * 1024),
            shared_mem_alloc_unit: Bytes(128),
            shared_mem_reserved_per_cta: Bytes(1024),
            shared_mem_carveouts: vec![Bytes(0), Bytes(228 * 1024)],
            max_cluster_size: 16,
            lsu_queue_depth: 16,
            branch_resolve: Cycles(6),
            dsmem_latency: Cycles(180),
        },
        scheduler: Scheduler { policy: "gto".into(), active_warps: 8 },
        pipes: Pipes { by_class },
        opcodes: BTreeMap::new(),
        tensor: Tensor {
            flops_per_clk_per_sm: rates,
            mma_sync_flops_per_clk_per_sm: Default::default(),
            mma_latency: Cycles(32),
            wgmma_base_latency: Cycles(64),
        },
        l1: L1 {
            sram: Bytes(256 * 1024),
            line: Bytes(128),
            sector: Bytes(32),
            assoc: 4,
            hit_latency: Cycles(33),
            bandwidth: BytesPerCycle(128.0),
            miss_bandwidth: BytesPerCycle(0.0),
            shared_banks: 32,
            shared_bank_width: Bytes(4),
            shared_latency: Cycles(30),
        },
        l2: L2 {
            size: Bytes(50 << 20),
            slices: 80,
            partitions: 2,
            assoc: 16,
            line: Bytes(128),
            hit_latency: Cycles(200),
            far_extra_latency: Cycles(200),
            slice_bandwidth: BytesPerCycle(64.0),
            tma_extra_latency: Cycles(0),
        },
        noc: Noc { sm_port_bandwidth: BytesPerCycle(64.0) },
        hbm: Hbm {
            size: Bytes(80 << 30),
            stacks: 5,
            channels_per_stack: 16,
            bandwidth: BytesPerSec(2e12),
            latency: Picos(300_000),
            banks_per_channel: 16,
            row_size: Bytes(1024),
            row_miss_penalty: Picos(28_000),
            refresh_interval: Picos(3_900_000),
            refresh_time: Picos(260_000),
            interleave: Bytes(256),
        },
        sim: SimParams {
            watchdog_cycles: Cycles(100_000),
            launch: "eager".into(),
            kernel_launch_overhead: Cycles(0),
            graph_launch_overhead: Cycles(0),
            kernel_launch_latency: Picos(0),
            memory_model: "hierarchy".into(),
        },
    }
}

/// Builds one kernel: programs are added with [`KB::program`], warps map to programs in order.
pub struct KB {
    pub info: KernelInfo,
    pub ops: OpTable,
    pub programs: Vec<Arc<Program>>,
    pub layout: Vec<u32>,
}

impl KB {
    pub fn new(name: &str, grid: u32, threads: u32) -> KB {
        KB {
            info: KernelInfo::new(0, name, Dim3::new(grid, 1, 1), Dim3::new(threads, 1, 1)),
            ops: OpTable::new(),
            programs: Vec::new(),
            layout: Vec::new(),
        }
    }

    pub fn op(&mut self, m: &str) -> OpId {
        self.ops.intern(m).unwrap()
    }

    /// An instruction `m` writing `dst` and reading `srcs` (register numbers of R registers).
    pub fn inst(&mut self, m: &str, dst: Option<u8>, srcs: &[u8]) -> Inst {
        let mut i = Inst::new(self.op(m));
        if let Some(d) = dst {
            i.dst[0] = RegRange::one(Reg::r(d));
        }
        for (k, s) in srcs.iter().enumerate() {
            i.src[k] = RegRange::one(Reg::r(*s));
        }
        i
    }

    /// Adds a program and returns its index.
    pub fn program(&mut self, p: Program) -> u32 {
        self.programs.push(Arc::new(p));
        (self.programs.len() - 1) as u32
    }

    /// Every warp runs program `p`.
    pub fn all_warps(&mut self, p: u32) {
        self.layout = vec![p; self.info.warps_per_cta() as usize];
    }

    /// Ends `b` with `EXIT`, makes it the program of every warp and builds the kernel.
    pub fn build_with(mut self, mut b: ProgramBuilder) -> KernelTrace {
        let exit = self.inst("EXIT", None, &[]);
        b.inst(exit);
        let p = self.program(b.finish().unwrap());
        self.all_warps(p);
        self.build()
    }

    pub fn build(self) -> KernelTrace {
        let k = KernelTrace {
            info: self.info,
            ops: self.ops,
            programs: self.programs,
            layout: CtaLayout { default: self.layout, overrides: Default::default() },
        };
        k.check().unwrap();
        k
    }
}

pub fn run(arch: &Arch, kernels: Vec<KernelTrace>) -> Report {
    let mut src = MemTraceSource::new(Trace { kernels });
    simulate(arch, &mut src, &SimOptions::default()).unwrap_or_else(|e| panic!("{e}"))
}

pub fn run1(arch: &Arch, k: KernelTrace) -> Report {
    run(arch, vec![k])
}

/// A program of `n` FFMAs: a dependent chain (`R1 = R1*R2+R1`) or `chains` independent ones.
pub fn ffma_program(kb: &mut KB, n: u32, chains: u8) -> Program {
    let mut b = ProgramBuilder::new("ffma");
    for i in 0..n {
        let r = 10 + (i % chains as u32) as u8;
        let inst = kb.inst("FFMA", Some(r), &[r, 2, r]);
        b.inst(inst);
    }
    let exit = kb.inst("EXIT", None, &[]);
    b.inst(exit);
    b.finish().unwrap()
}

/// A compute kernel with id `id` on `stream`: `ctas` CTAs of 4 warps, each running `n` FFMAs.
pub fn ffma_kernel(id: u32, stream: u32, ctas: u32, n: u32) -> KernelTrace {
    let mut kb = KB::new(&format!("k{id}"), ctas, 128);
    let p = ffma_program(&mut kb, n, 4);
    let p = kb.program(p);
    kb.all_warps(p);
    let mut k = kb.build();
    k.info.id = id;
    k.info.stream = stream;
    k
}

//! Device-timing tests in the manner of Ramulator 2: each pins the earliest cycle at which
//! something may happen on the synthetic chip of `common::arch`.

mod common;

use common::*;
use gpusim_isa::ProgramBuilder;

fn chain_cycles(n: u32, latency: u64) -> u64 {
    let mut a = arch(1);
    a.pipes.by_class[gpusim_isa::UnitClass::Fp32.index()].latency = gpusim_configs::Cycles(latency);
    let mut kb = KB::new("chain", 1, 32);
    let p = ffma_program(&mut kb, n, 1);
    let p = kb.program(p);
    kb.all_warps(p);
    run1(&a, kb.build()).kernels[0].cycles
}

#[test]
fn dependent_ffma_chain_takes_n_times_latency() {
    for lat in [4u64, 5, 8] {
        let a = chain_cycles(50, lat);
        let b = chain_cycles(150, lat);
        assert_eq!(b - a, 100 * lat, "latency {lat}: {a} vs {b}");
        // Fetch (1 cycle), 49 waits of `lat` between the 50 FFMAs, the FFMA's own issue cycle,
        // EXIT's issue cycle: nothing else. EXIT does not wait for the unused last result.
        assert_eq!(a, 1 + 49 * lat + 1 + 1, "latency {lat}");
    }
}

fn independent_cycles(n: u32, warps: u32) -> u64 {
    let a = arch(1);
    let mut kb = KB::new("indep", 1, 32 * warps);
    let p = ffma_program(&mut kb, n, 8);
    let p = kb.program(p);
    kb.all_warps(p);
    run1(&a, kb.build()).kernels[0].cycles
}

#[test]
fn independent_ffmas_issue_one_per_cycle_per_scheduler() {
    // One warp per sub-core: one FFMA per cycle each.
    let d1 = independent_cycles(400, 4) - independent_cycles(200, 4);
    assert_eq!(d1, 200);
    // Two warps per sub-core share its scheduler: twice as long.
    let d2 = independent_cycles(400, 8) - independent_cycles(200, 8);
    assert_eq!(d2, 400);
}

#[test]
fn issue_interval_limits_throughput() {
    let mut a = arch(1);
    a.pipes.by_class[gpusim_isa::UnitClass::Fp32.index()].issue_interval = gpusim_configs::Cycles(2);
    let cyc = |n| {
        let mut kb = KB::new("indep", 1, 32);
        let p = ffma_program(&mut kb, n, 8);
        let p = kb.program(p);
        kb.all_warps(p);
        run1(&a, kb.build()).kernels[0].cycles
    };
    assert_eq!(cyc(400) - cyc(200), 400);
}

#[test]
fn barrier_releases_only_when_every_warp_arrived() {
    let a = arch(1);
    let mut kb = KB::new("bar", 1, 64);
    // Warp 0: barrier at once, then one FFMA. Warp 1: a 100-long dependent chain, then barrier.
    let mut b0 = ProgramBuilder::new("early");
    let bar = kb.inst("BAR.SYNC.DEFER_BLOCKING", None, &[]);
    let f = kb.inst("FFMA", Some(10), &[10, 2, 10]);
    let exit = kb.inst("EXIT", None, &[]);
    b0.inst(bar).inst(f).inst(exit);
    let p0 = kb.program(b0.finish().unwrap());
    let mut b1 = ProgramBuilder::new("late");
    for _ in 0..100 {
        b1.inst(f);
    }
    b1.inst(bar).inst(exit);
    let p1 = kb.program(b1.finish().unwrap());
    kb.layout = vec![p0, p1];
    let r = run1(&a, kb.build());
    let k = &r.kernels[0];
    // Warp 1 arrives after its chain (fetch + 100·4 cycles); warp 0 waits for it the whole time.
    // Warp 1 issues its FFMAs at cycles 1, 5, ..., 397 and arrives (issues BAR) at 398. Warp 0
    // issued BAR at cycle 1 and waits from cycle 2 until the release: exactly 397 cycles.
    assert_eq!(k.stalls["barrier"], 397);
    // Released at 398, warp 0 issues its FFMA at 399 and EXIT at 400; the CTA ends at 401.
    assert_eq!(k.cycles, 401);
    assert_eq!(k.resident_warp_cycles, k.stalls.values().sum::<u64>());
}

#[test]
fn stall_reasons_add_up_to_resident_warp_cycles() {
    let a = arch(2);
    let mut kb = KB::new("mix", 8, 256);
    let p = ffma_program(&mut kb, 64, 2);
    let p = kb.program(p);
    kb.all_warps(p);
    let r = run1(&a, kb.build());
    let k = &r.kernels[0];
    assert_eq!(k.resident_warp_cycles, k.stalls.values().sum::<u64>());
    assert_eq!(k.stalls["selected"], k.warp_instructions);
    assert!(k.stalls.contains_key("not_selected"));
    assert!(k.stalls.contains_key("wait"));
}

#[test]
fn exited_warps_count_as_arrived_at_a_barrier() {
    // Warps 0–3 (one per sub-core) wait at the barrier; warps 4–7 exit at once. The last exit
    // releases the waiting warps, also those of sub-cores already stepped in that cycle.
    let a = arch(1);
    let mut kb = KB::new("bar_exit", 1, 256);
    let bar = kb.inst("BAR.SYNC.DEFER_BLOCKING", None, &[]);
    let exit = kb.inst("EXIT", None, &[]);
    let mut b = ProgramBuilder::new("wait");
    b.inst(bar).inst(exit);
    let p_wait = kb.program(b.finish().unwrap());
    let mut b = ProgramBuilder::new("leave");
    b.inst(exit);
    let p_leave = kb.program(b.finish().unwrap());
    kb.layout = vec![p_wait, p_wait, p_wait, p_wait, p_leave, p_leave, p_leave, p_leave];
    let r = run1(&a, kb.build());
    let k = &r.kernels[0];
    assert_eq!(k.warp_instructions, 4 * 2 + 4);
    assert!(k.cycles <= 6, "{}", k.cycles);
    assert_eq!(k.resident_warp_cycles, k.stalls.values().sum::<u64>());
}

#[test]
fn watchdog_names_the_stuck_warps() {
    let mut a = arch(1);
    a.sim.watchdog_cycles = gpusim_configs::Cycles(50);
    let mut kb = KB::new("slow_load", 1, 32);
    let mut b = ProgramBuilder::new("p");
    let ld = kb.inst("LDG.E", Some(4), &[2]);
    let use_it = kb.inst("FADD", Some(5), &[4, 4]);
    let exit = kb.inst("EXIT", None, &[]);
    b.mem_inst(ld, gpusim_isa::AddrExpr::constant(1 << 30), gpusim_isa::Lanes::Stride(4), 0);
    b.inst(use_it).inst(exit);
    let p = kb.program(b.finish().unwrap());
    kb.all_warps(p);
    let mut src = gpusim_isa::MemTraceSource::new(gpusim_isa::Trace { kernels: vec![kb.build()] });
    let err = gpusim_sim_core::simulate(&a, &mut src, &gpusim_sim_core::SimOptions::default()).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("watchdog"), "{msg}");
    assert!(msg.contains("slow_load") && msg.contains("FADD") && msg.contains("long_scoreboard"), "{msg}");
}

#[test]
fn mbarrier_wait_waits_for_the_ctas_bulk_copies() {
    let a = arch(1);
    let cycles = |with_wait: bool| {
        let mut kb = KB::new("tma", 1, 32);
        let mut b = ProgramBuilder::new("p");
        let tma = kb.inst("UTMALDG.2D", None, &[]);
        let wait = kb.inst("SYNCS.PHASECHK.TRANS64.TRYWAIT", None, &[]);
        let exit = kb.inst("EXIT", None, &[]);
        b.mem_inst(tma, gpusim_isa::AddrExpr::constant(1 << 30), gpusim_isa::Lanes::Stride(0), 16384);
        if with_wait {
            b.inst(wait);
        }
        b.inst(exit);
        let p = kb.program(b.finish().unwrap());
        kb.all_warps(p);
        run1(&a, kb.build())
    };
    let r = cycles(true);
    let k = &r.kernels[0];
    // 16 KiB from DRAM: at least the unloaded L2 + DRAM latency (200 + 300 cycles) before release.
    assert!(k.stalls["barrier"] >= 500, "{:?}", k.stalls);
    assert!(k.memory.traffic.dram.bytes >= 16384);
}

#[test]
fn clusters_launch_together_within_one_gpc() {
    let mut a = arch(4);
    a.sm.gpcs = 2;
    a.sm.max_ctas = 1;
    let mut kb = KB::new("clustered", 8, 32);
    kb.info.cluster = gpusim_isa::Dim3::new(2, 1, 1);
    let p = ffma_program(&mut kb, 100, 1);
    let p = kb.program(p);
    kb.all_warps(p);
    let r = run1(&a, kb.build());
    let k = &r.kernels[0];
    assert_eq!(k.ctas, 8);
    // One CTA per SM, 4 SMs: two waves of two clusters each.
    let one_wave = 1 + 99 * 4 + 1 + 1;
    assert!(k.cycles >= 2 * one_wave && k.cycles <= 2 * one_wave + 10, "{}", k.cycles);
}

fn wgmma_cycles(a: &gpusim_configs::Arch, n: u32) -> u64 {
    // One warpgroup (4 warps, one per sub-core) issuing `n` chained HGMMA.64x256x16 (bf16) and
    // waiting for them: each warp's quarter is 2·64·256·16/4 = 131072 FLOP, at the synthetic
    // chip's 4096 FLOP/clk/SM = 1024 per sub-core, 128 cycles.
    let mut kb = KB::new("wgmma", 1, 128);
    let mut b = ProgramBuilder::new("p");
    let fence = kb.inst("WARPGROUP.ARRIVE", None, &[]);
    b.inst(fence);
    for _ in 0..n {
        let mut h = kb.inst("HGMMA.64x256x16.F32.BF16", None, &[]);
        h.dst[0] = gpusim_isa::RegRange::new(gpusim_isa::Reg::r(24), 128);
        h.src[0] = gpusim_isa::RegRange::new(gpusim_isa::Reg::r(24), 128);
        b.inst(h);
    }
    let mut wait = kb.inst("WARPGROUP.DEPBAR.LE", None, &[]);
    wait.imm = 0;
    let exit = kb.inst("EXIT", None, &[]);
    b.inst(wait).inst(exit);
    let p = kb.program(b.finish().unwrap());
    kb.all_warps(p);
    run1(a, kb.build()).kernels[0].cycles
}

#[test]
fn warpgroup_mma_runs_at_the_configured_tensor_rate() {
    let a = arch(1);
    let d = wgmma_cycles(&a, 16) - wgmma_cycles(&a, 8);
    assert_eq!(d, 8 * 128, "8 more chained HGMMA.64x256x16 take 8 × 128 cycles");
}

fn hmma_cycles(a: &gpusim_configs::Arch, n: u32) -> u64 {
    // One warp issuing `n` HMMA.16816.F32.BF16 (2·16·8·16 = 4096 FLOP each) over 16 accumulators,
    // so that no result is waited for: the sub-core's tensor pipe alone sets the pace.
    let mut kb = KB::new("hmma", 1, 32);
    let mut b = ProgramBuilder::new("p");
    for i in 0..n {
        let acc = gpusim_isa::RegRange::new(gpusim_isa::Reg::r(40 + 4 * (i % 16) as u8), 4);
        let mut h = kb.inst("HMMA.16816.F32.BF16", None, &[]);
        h.dst[0] = acc;
        h.src[0] = gpusim_isa::RegRange::new(gpusim_isa::Reg::r(10), 4);
        h.src[1] = gpusim_isa::RegRange::new(gpusim_isa::Reg::r(14), 2);
        h.src[2] = acc;
        b.inst(h);
    }
    run1(a, kb.build_with(b)).kernels[0].cycles
}

#[test]
fn synchronous_mma_runs_at_its_own_rate_where_the_chip_gives_one() {
    // The synthetic chip's dense bf16 rate, 4096 FLOP/clk/SM, is 1024 per sub-core: 4 cycles per
    // HMMA.16816 when no mma.sync rate is given (Volta to Ada: one tensor path).
    let mut a = arch(1);
    assert_eq!(hmma_cycles(&a, 128) - hmma_cycles(&a, 64), 64 * 4);
    // Hopper's mma.sync at 2/3 of the dense rate: 2731 FLOP/clk/SM, 682.75 per sub-core, 6 cycles.
    a.tensor.mma_sync_flops_per_clk_per_sm.insert("bf16".into(), 2731.0);
    assert_eq!(hmma_cycles(&a, 128) - hmma_cycles(&a, 64), 64 * 6);
    // A rate for another type leaves bf16 at its own.
    let mut other = arch(1);
    other.tensor.mma_sync_flops_per_clk_per_sm.insert("fp16".into(), 2731.0);
    assert_eq!(hmma_cycles(&other, 128) - hmma_cycles(&other, 64), 64 * 4);
}

#[test]
fn warpgroup_mma_ignores_the_synchronous_rate() {
    let mut a = arch(1);
    a.tensor.mma_sync_flops_per_clk_per_sm.insert("bf16".into(), 1024.0);
    assert_eq!(wgmma_cycles(&a, 16) - wgmma_cycles(&a, 8), 8 * 128, "HGMMA keeps the dense rate");
}

#[test]
fn multicast_copies_complete_on_every_cta_of_the_cluster() {
    // Two CTAs of a cluster each multicast half of a 16 KiB tile; each CTA's barrier expects the
    // whole tile, so neither consumer may go on before the slower CTA's half has landed.
    let mut a = arch(2);
    a.sm.max_ctas = 1;
    let build = |delay: bool| {
        let mut kb = KB::new("multicast", 2, 64);
        kb.info.cluster = gpusim_isa::Dim3::new(2, 1, 1);
        let bar = gpusim_isa::AddrExpr::constant(0x100);
        let z = gpusim_isa::Lanes::Stride(0);
        let mut init = kb.inst("SYNCS.EXCH.64", None, &[]);
        init.imm = 1;
        let mut arrive = kb.inst("SYNCS.ARRIVE.TRANS64", None, &[]);
        arrive.imm = 16384;
        let tma = kb.inst("UTMALDG.2D.MULTICAST", None, &[]);
        let wait = kb.inst("SYNCS.PHASECHK.TRANS64.TRYWAIT", None, &[]);
        let exit = kb.inst("EXIT", None, &[]);
        let f = kb.inst("FFMA", Some(10), &[10, 2, 10]);
        let producer = |kb: &mut KB, slow: bool| {
            let mut b = ProgramBuilder::new(if slow { "slow_producer" } else { "producer" });
            b.mem_inst(init, bar, z, 0).mem_inst(arrive, bar, z, 0);
            if slow {
                for _ in 0..200 {
                    b.inst(f);
                }
            }
            let src = gpusim_isa::AddrExpr::constant(1 << 32).with(gpusim_isa::Var::CtaX, 8192);
            b.mem_inst(tma, src, z, 8192).inst(exit);
            kb.program(b.finish().unwrap())
        };
        let p_fast = producer(&mut kb, false);
        let p_slow = producer(&mut kb, delay);
        let mut b = ProgramBuilder::new("consumer");
        b.mem_inst(wait, bar, z, 0).inst(exit);
        let p_cons = kb.program(b.finish().unwrap());
        kb.layout = vec![p_fast, p_cons];
        let mut k = kb.build();
        k.layout.overrides.insert(1, vec![p_slow, p_cons]);
        k.check().unwrap();
        run1(&a, k)
    };
    let quick = build(false);
    let slow = build(true);
    let (q, s) = (&quick.kernels[0], &slow.kernels[0]);
    // The fast CTA's consumer waits for the slow CTA's 200-FFMA delay too.
    assert!(s.stalls["barrier"] >= q.stalls["barrier"] + 2 * 200 * 4 - 50, "{:?} vs {:?}", q.stalls, s.stalls);
    assert_eq!(s.resident_warp_cycles, s.stalls.values().sum::<u64>());
}

#[test]
fn launch_latency_is_part_of_each_kernels_time() {
    let time = |latency: u64| {
        let mut a = arch(1);
        // 1 GHz: one cycle per nanosecond.
        a.sim.kernel_launch_latency = gpusim_configs::Picos(latency * 1000);
        let mut kernels = Vec::new();
        for id in 0..2 {
            let mut kb = KB::new("k", 1, 32);
            kb.info.id = id;
            let p = ffma_program(&mut kb, 10, 1);
            let p = kb.program(p);
            kb.all_warps(p);
            kernels.push(kb.build());
        }
        let r = run(&a, kernels);
        (r.kernels[0].cycles, r.kernels[1].cycles, r.total_cycles)
    };
    let (a0, a1, at) = time(0);
    let (b0, b1, bt) = time(500);
    assert_eq!((b0 - a0, b1 - a1), (500, 500), "each kernel pays the latency once");
    assert_eq!(bt - at, 1000, "two kernels in one stream pay it twice");
}

/// Two kernels on one stream, the second after the first: it launches exactly the launch mode's
/// gap after the first ends (`sim.kernel_launch_overhead` eager, `sim.graph_launch_overhead` in
/// a CUDA graph), and with no launch latency its CTA starts then.
fn second_kernel_gap(launch: &str) -> (u64, u64) {
    let mut a = arch(1);
    a.sim.launch = launch.to_string();
    a.sim.kernel_launch_overhead = gpusim_configs::Cycles(700);
    a.sim.graph_launch_overhead = gpusim_configs::Cycles(250);
    let mut kernels = Vec::new();
    for id in 0..2 {
        let mut kb = KB::new("k", 1, 32);
        kb.info.id = id;
        let p = ffma_program(&mut kb, 10, 1);
        let p = kb.program(p);
        kb.all_warps(p);
        kernels.push(kb.build());
    }
    let r = run(&a, kernels);
    let (k0, k1) = (&r.kernels[0], &r.kernels[1]);
    assert_eq!(k0.start_cycle, 0, "{launch}: the first kernel has no predecessor");
    assert_eq!(k1.cycles, k0.cycles, "{launch}: the same kernel takes the same time");
    assert_eq!(r.total_cycles, k1.end_cycle, "{launch}");
    (k0.end_cycle, k1.start_cycle)
}

#[test]
fn a_dependent_kernel_launches_the_launch_modes_gap_after_its_predecessor() {
    let (end, start) = second_kernel_gap("eager");
    assert_eq!(start, end + 700, "eager: sim.kernel_launch_overhead");
    let (end_g, start_g) = second_kernel_gap("graph");
    assert_eq!(end_g, end, "the first kernel does not depend on the mode");
    assert_eq!(start_g, end + 250, "graph: sim.graph_launch_overhead");
}

/// Warp 0 runs a 100-long dependent FFMA chain, then gives registers back (`USETMAXREG.DEALLOC`
/// to 32 per thread); warp 1 first asks to grow to `grow_to` per thread. Both start with 64.
fn register_reallocation(grow_to: i32) -> Result<gpusim_sim_core::Report, String> {
    let mut a = arch(1);
    a.sim.watchdog_cycles = gpusim_configs::Cycles(2000);
    let mut kb = KB::new("realloc", 1, 64);
    kb.info.regs_per_thread = 64;
    let f = kb.inst("FFMA", Some(10), &[10, 2, 10]);
    let exit = kb.inst("EXIT", None, &[]);
    let mut dealloc = kb.inst("USETMAXREG.DEALLOC.CTAPOOL", None, &[]);
    dealloc.imm = 32;
    let mut alloc = kb.inst("USETMAXREG.TRY_ALLOC.CTAPOOL", None, &[]);
    alloc.imm = grow_to;
    let mut b = ProgramBuilder::new("producer");
    for _ in 0..100 {
        b.inst(f);
    }
    b.inst(dealloc).inst(exit);
    let p0 = kb.program(b.finish().unwrap());
    let mut b = ProgramBuilder::new("consumer");
    b.inst(alloc).inst(f).inst(exit);
    let p1 = kb.program(b.finish().unwrap());
    kb.layout = vec![p0, p1];
    let mut src = gpusim_isa::MemTraceSource::new(gpusim_isa::Trace { kernels: vec![kb.build()] });
    gpusim_sim_core::simulate(&a, &mut src, &gpusim_sim_core::SimOptions::default()).map_err(|e| e.to_string())
}

#[test]
fn register_allocation_waits_for_another_warps_release() {
    // Growing from 64 to 96 per thread takes the 32 × 32 registers warp 0 releases after its
    // chain, not before. Its FFMAs issue at cycles 1, 5, ..., 397; the DEALLOC reads no register,
    // so it issues at 398. Warp 1's attempt at cycle 1 does not issue; it waits from then until
    // woken at 399: 398 cycles. It grows at 399, issues its FFMA at 400 and EXIT at 401; the CTA ends at 402.
    let r = register_reallocation(96).unwrap();
    let k = &r.kernels[0];
    assert_eq!(k.stalls["barrier"], 398, "{:?}", k.stalls);
    assert_eq!(k.cycles, 402);
    assert_eq!(k.resident_warp_cycles, k.stalls.values().sum::<u64>());
    // Shrinking or keeping the count never waits.
    let r = register_reallocation(64).unwrap();
    assert!(r.kernels[0].stalls.get("barrier").copied().unwrap_or(0) == 0, "{:?}", r.kernels[0].stalls);
}

#[test]
fn register_allocation_beyond_the_ctas_registers_is_reported_not_hung() {
    // 128 per thread needs 64 × 32 more registers; only 32 × 32 are ever released.
    let msg = register_reallocation(128).unwrap_err();
    assert!(
        msg.contains("realloc")
            && msg.contains("USETMAXREG")
            && msg.contains("2048 registers")
            && msg.contains("holds 1024"),
        "{msg}"
    );
}

/// `n` chained HGMMA.64x256x16 (bf16) of one warpgroup on a chip whose shared-memory port moves
/// 32 B/cycle, with A from shared memory (SS) or from registers R200..R203 (RS).
fn wgmma_port_cycles(n: u32, a_in_regs: bool) -> u64 {
    let mut a = arch(1);
    a.l1.bandwidth = gpusim_configs::BytesPerCycle(32.0);
    let mut kb = KB::new("wgmma_port", 1, 128);
    let mut b = ProgramBuilder::new("p");
    let fence = kb.inst("WARPGROUP.ARRIVE", None, &[]);
    b.inst(fence);
    for _ in 0..n {
        let mut h = kb.inst("HGMMA.64x256x16.F32.BF16", None, &[]);
        h.dst[0] = gpusim_isa::RegRange::new(gpusim_isa::Reg::r(24), 128);
        h.src[0] = gpusim_isa::RegRange::new(gpusim_isa::Reg::r(24), 128);
        if a_in_regs {
            h.src[1] = gpusim_isa::RegRange::new(gpusim_isa::Reg::r(200), 4);
        }
        b.inst(h);
    }
    let mut wait = kb.inst("WARPGROUP.DEPBAR.LE", None, &[]);
    wait.imm = 0;
    let exit = kb.inst("EXIT", None, &[]);
    b.inst(wait).inst(exit);
    let p = kb.program(b.finish().unwrap());
    kb.all_warps(p);
    run1(&a, kb.build()).kernels[0].cycles
}

#[test]
fn warpgroup_mma_operands_from_shared_memory_occupy_the_port() {
    // SS: each warp's quarter of A (64×16) and B (256×16) bf16 is 2560 B, 80 cycles at 32 B/cycle;
    // four warps, 320 cycles per instruction, more than the 128 of the tensor rate.
    let ss = wgmma_port_cycles(16, false) - wgmma_port_cycles(8, false);
    assert_eq!(ss, 8 * 320);
    // RS: only B, 2048 B per warp, 64 cycles, 256 per instruction.
    let rs = wgmma_port_cycles(16, true) - wgmma_port_cycles(8, true);
    assert_eq!(rs, 8 * 256);
}

/// One warp: `op` (a bulk copy or reduction) of `bytes` at a cold global address, then (when
/// `wait`) `UTMACMDFLUSH` + `DEPBAR.LE SB0, 0`, FlashAttention-3's `tma_store_arrive` and
/// `tma_store_wait<0>` after its dQ reduce-add.
fn bulk_store_run(op: &str, bytes: u32, wait: bool) -> gpusim_sim_core::Report {
    let a = arch(1);
    let mut kb = KB::new("bulk", 1, 32);
    let mut b = ProgramBuilder::new("p");
    let copy = kb.inst(op, None, &[]);
    b.mem_inst(copy, gpusim_isa::AddrExpr::constant(1 << 30), gpusim_isa::Lanes::Stride(0), bytes);
    if wait {
        let flush = kb.inst("UTMACMDFLUSH", None, &[]);
        let mut dep = kb.inst("DEPBAR.LE", None, &[]);
        dep.imm = 0;
        b.inst(flush).inst(dep);
    }
    let exit = kb.inst("EXIT", None, &[]);
    b.inst(exit);
    let p = kb.program(b.finish().unwrap());
    kb.all_warps(p);
    run1(&a, kb.build())
}

#[test]
fn bulk_reduce_add_writes_global_at_the_l2_and_completes_in_the_bulk_group() {
    // 4 KiB reduce-added shared → global: the L2 takes its 128 sectors as a `RED` write (no DRAM
    // read of the destination), where a bulk load of the same bytes reads them from DRAM.
    let red = bulk_store_run("UBLKRED.G.S.ADD.F32.RN", 4096, true);
    let k = &red.kernels[0];
    assert_eq!(k.memory.traffic.l2.bytes, 4096, "{:?}", k.memory.traffic);
    assert_eq!(k.memory.traffic.dram.bytes, 0, "{:?}", k.memory.traffic);
    let load = bulk_store_run("UBLKCP.S.G", 4096, false);
    assert!(load.kernels[0].memory.traffic.dram.bytes >= 4096);
    // The group's wait lasts until the L2 has acknowledged the last line, with no DRAM round trip:
    // the 32nd 128-byte line leaves the SM's 64 B/cycle port 62 cycles after the first, the L2
    // acknowledges it 200 cycles later, and the wait starts 3 cycles after the reduction issued
    // (flush, then the DEPBAR's next cycle).
    assert_eq!(k.stalls["long_scoreboard"], 200 + 62 - 3, "{:?}", k.stalls);
    let no_wait = bulk_store_run("UBLKRED.G.S.ADD.F32.RN", 4096, false);
    assert_eq!(no_wait.kernels[0].stalls.get("long_scoreboard"), None, "{:?}", no_wait.kernels[0].stalls);
}

#[test]
fn a_bulk_reduction_does_not_complete_the_warps_armed_mbarrier() {
    // The warp arms a barrier for 4 KiB, reduce-adds 4 KiB elsewhere, then after a 200-FFMA
    // dependent chain (800 cycles) loads the 4 KiB the barrier waits for: the phase completes
    // with that load (≥ 500 cycles later), not with the reduction.
    let a = arch(1);
    let mut kb = KB::new("armed", 1, 32);
    let bar = gpusim_isa::AddrExpr::constant(0x100);
    let z = gpusim_isa::Lanes::Stride(0);
    let mut b = ProgramBuilder::new("p");
    let mut init = kb.inst("SYNCS.EXCH.64", None, &[]);
    init.imm = 1;
    let mut arrive = kb.inst("SYNCS.ARRIVE.TRANS64", None, &[]);
    arrive.imm = 4096;
    let red = kb.inst("UBLKRED.G.S.ADD.F32.RN", None, &[]);
    let load = kb.inst("UBLKCP.S.G", None, &[]);
    let wait = kb.inst("SYNCS.PHASECHK.TRANS64.TRYWAIT", None, &[]);
    b.mem_inst(init, bar, z, 0).mem_inst(arrive, bar, z, 0);
    b.mem_inst(red, gpusim_isa::AddrExpr::constant(1 << 30), z, 4096);
    for _ in 0..200 {
        let f = kb.inst("FFMA", Some(10), &[10, 2, 10]);
        b.inst(f);
    }
    b.mem_inst(load, gpusim_isa::AddrExpr::constant(1 << 31), z, 4096).mem_inst(wait, bar, z, 0);
    let k = kb.build_with(b);
    let r = run1(&a, k);
    let st = &r.kernels[0].stalls;
    assert!(st["barrier"] >= 500, "{st:?}");
}

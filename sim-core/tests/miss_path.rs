//! The L1's miss path (`l1.miss_bandwidth`): the rate at which one SM streams L2-resident data
//! with ordinary loads. Stores and a chip without the limit run at the SM port's rate.

mod common;

use common::*;
use gpusim_configs::BytesPerCycle;
use gpusim_isa::{AddrExpr, KernelTrace, Lanes, ProgramBuilder, Var};

/// One CTA of 16 warps; each warp does `iters` × 4 accesses of 512 B (`mnemonic`, 16 B per
/// lane) to 32 KiB per iteration, the same 32 KiB each time (`fresh` false: the L2, or an L1
/// the loads go through, holds it after the first pass) or new data each time.
fn kernel(mnemonic: &str, iters: u32, fresh: bool) -> KernelTrace {
    let mut kb = KB::new("stream", 1, 512);
    let mut b = ProgramBuilder::new("p");
    b.begin_loop(iters).unwrap();
    let store = mnemonic.starts_with("STG");
    for k in 0..4u8 {
        let i = if store { kb.inst(mnemonic, None, &[2, 8]) } else { kb.inst(mnemonic, Some(8 + 4 * k), &[2]) };
        b.mem_inst(
            i,
            AddrExpr::constant((1 << 32) + 512 * k as u64)
                .with(Var::Warp, 2048)
                .with(Var::Loop(0), if fresh { 32 << 10 } else { 0 }),
            Lanes::Stride(16),
            0,
        );
    }
    if !store {
        for k in 0..4u8 {
            let f = kb.inst("FADD", Some(4), &[4, 8 + 4 * k]);
            b.inst(f);
        }
    }
    b.end_loop().unwrap();
    kb.build_with(b)
}

/// Bytes per cycle of `mnemonic` on one SM with the miss path at `miss` B/clk (0: none),
/// rereading the same data or (`fresh`) new data every iteration.
fn rate(mnemonic: &str, miss: f64, fresh: bool) -> f64 {
    let mut a = arch(1);
    a.l1.miss_bandwidth = BytesPerCycle(miss);
    let k = &run1(&a, kernel(mnemonic, 64, fresh)).kernels[0];
    k.memory.traffic.requested_bytes as f64 / k.cycles as f64
}

#[test]
fn loads_that_bypass_the_l1_stream_at_the_miss_path_rate() {
    let capped = rate("LDG.E.128.STRONG.GPU", 16.0, false);
    assert!((14.5..=16.0).contains(&capped), "{capped:.2} B/clk with a 16 B/clk miss path");
    let free = rate("LDG.E.128.STRONG.GPU", 0.0, false);
    assert!(free > 48.0, "{free:.2} B/clk without a miss-path limit");
}

#[test]
fn loads_that_miss_the_l1_are_held_to_it_too() {
    // New data every iteration: every load through the L1 misses it.
    let misses = rate("LDG.E.128", 16.0, true);
    assert!((14.5..=16.0).contains(&misses), "{misses:.2} B/clk of L1 misses with a 16 B/clk miss path");
}

#[test]
fn l1_hits_do_not_use_the_miss_path() {
    // Through the L1: the 32 KiB fit, so only the first pass misses; the limit must not slow
    // the hits, which run at the L1's 128 B/clk.
    let hits = rate("LDG.E.128", 16.0, false);
    assert!(hits > 64.0, "{hits:.2} B/clk: L1 hits do not use the miss path");
}

#[test]
fn stores_use_the_port_at_its_full_rate() {
    let stores = rate("STG.E.128", 16.0, false);
    assert!(stores > 48.0, "{stores:.2} B/clk of stores with a 16 B/clk miss path for loads");
}

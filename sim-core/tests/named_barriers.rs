//! Exact-cycle tests of the CTA's named barriers (`BAR.SYNC id, n`, `BAR.ARV id, n`): a barrier
//! with a thread count completes when that many warps have arrived, independently of the other
//! barriers and of warps that never reach it; `BAR.ARV` arrives without waiting. This is the
//! ping-pong of FlashAttention-3's consumer warpgroups.

mod common;

use common::*;
use gpusim_isa::{BarrierOperand, Inst, ProgramBuilder};

fn bar(kb: &mut KB, mnemonic: &str, id: u8, threads: u32) -> Inst {
    let mut i = kb.inst(mnemonic, None, &[]);
    i.imm = BarrierOperand::named(id, threads).unwrap().imm();
    i
}

/// A program: `before` dependent FFMAs, then `insts`, then `after` dependent FFMAs and EXIT.
fn prog(kb: &mut KB, name: &str, before: u32, insts: &[Inst], after: u32) -> u32 {
    let f = kb.inst("FFMA", Some(10), &[10, 2, 10]);
    let exit = kb.inst("EXIT", None, &[]);
    let mut b = ProgramBuilder::new(name);
    for _ in 0..before {
        b.inst(f);
    }
    for &i in insts {
        b.inst(i);
    }
    for _ in 0..after {
        b.inst(f);
    }
    b.inst(exit);
    kb.program(b.finish().unwrap())
}

#[test]
fn named_barrier_completes_with_its_count_not_the_whole_cta() {
    let a = arch(1);
    let mut kb = KB::new("named", 1, 128);
    // Warp 0 syncs on barrier 1 (64 threads) at once; warp 1 arrives there after a 100-long
    // chain; warps 2 and 3 sync on barrier 2 (64 threads) at once, then run 200-long chains.
    let sync1 = bar(&mut kb, "BAR.SYNC.DEFER_BLOCKING", 1, 64);
    let arv1 = bar(&mut kb, "BAR.ARV", 1, 64);
    let sync2 = bar(&mut kb, "BAR.SYNC.DEFER_BLOCKING", 2, 64);
    let p0 = prog(&mut kb, "wait", 0, &[sync1], 1);
    let p1 = prog(&mut kb, "arrive", 100, &[arv1], 0);
    let p2 = prog(&mut kb, "pair", 0, &[sync2], 200);
    kb.layout = vec![p0, p1, p2, p2];
    let r = run1(&a, kb.build());
    let k = &r.kernels[0];
    // Warp 1 issues its FFMAs at 1, 5, ..., 397 and BAR.ARV at 398; warp 0 waits from cycle 2
    // until that release: 397 cycles. Warps 2 and 3 both arrive at cycle 1 and go on at 2 with
    // no barrier stall. A CTA-wide barrier would hold warp 0 until warps 2 and 3 exit (~800).
    assert_eq!(k.stalls["barrier"], 397);
    // Warps 2 and 3: sync at 1, FFMAs at 2, 6, ..., 798, EXIT at 799; the CTA ends at 800.
    assert_eq!(k.cycles, 800);
    assert_eq!(k.resident_warp_cycles, k.stalls.values().sum::<u64>());
}

#[test]
fn an_early_arrival_is_remembered() {
    let a = arch(1);
    let mut kb = KB::new("early", 1, 96);
    // Warp 1 arrives at barrier 1 (64 threads) at once and exits; warp 0 reaches its sync after
    // a 100-long chain and finds the barrier complete: no barrier stall, although warp 2 (a
    // 300-long chain) never arrives. The barrier counts arrivals, not which warp made them, as
    // the hardware does: one warp arriving twice would complete it alone.
    let sync1 = bar(&mut kb, "BAR.SYNC", 1, 64);
    let arv1 = bar(&mut kb, "BAR.ARV", 1, 64);
    let p0 = prog(&mut kb, "late_sync", 100, &[sync1], 0);
    let p1 = prog(&mut kb, "early_arrival", 0, &[arv1], 0);
    let p2 = prog(&mut kb, "bystander", 300, &[], 0);
    kb.layout = vec![p0, p1, p2];
    let r = run1(&a, kb.build());
    let k = &r.kernels[0];
    assert_eq!(k.stalls.get("barrier").copied().unwrap_or(0), 0, "{:?}", k.stalls);
    assert_eq!(k.resident_warp_cycles, k.stalls.values().sum::<u64>());
}

#[test]
fn a_second_generation_waits_for_new_arrivals() {
    let a = arch(1);
    let mut kb = KB::new("generations", 1, 64);
    // Warp 1 arrives once at once and once more after a 50-long chain; warp 0 syncs twice at
    // once. The first sync passes at cycle 2; the second waits for the second arrival.
    let sync1 = bar(&mut kb, "BAR.SYNC", 1, 64);
    let arv1 = bar(&mut kb, "BAR.ARV", 1, 64);
    let f = kb.inst("FFMA", Some(10), &[10, 2, 10]);
    let exit = kb.inst("EXIT", None, &[]);
    let mut b = ProgramBuilder::new("second_arrival_late");
    b.inst(arv1);
    for _ in 0..50 {
        b.inst(f);
    }
    b.inst(arv1).inst(exit);
    let p1 = kb.program(b.finish().unwrap());
    let p0 = prog(&mut kb, "two_syncs", 0, &[sync1, sync1], 0);
    kb.layout = vec![p0, p1];
    let r = run1(&a, kb.build());
    let k = &r.kernels[0];
    // Warp 1: ARV at 1, FFMAs at 2, 6, ..., 198, ARV at 199. Warp 0: sync at 1 (completes with
    // the ARV of cycle 1), sync again at 2, waits from 3 until it goes on at 200: 197 cycles.
    assert_eq!(k.stalls["barrier"], 197);
    assert_eq!(k.resident_warp_cycles, k.stalls.values().sum::<u64>());
}

#[test]
fn an_incomplete_named_barrier_is_reported_by_the_watchdog() {
    let mut a = arch(1);
    a.sim.watchdog_cycles = gpusim_configs::Cycles(50);
    let mut kb = KB::new("short_count", 1, 64);
    // Barrier 3 expects 96 threads but only two warps ever arrive.
    let sync = bar(&mut kb, "BAR.SYNC", 3, 96);
    let p = prog(&mut kb, "p", 0, &[sync], 0);
    kb.all_warps(p);
    let mut src = gpusim_isa::MemTraceSource::new(gpusim_isa::Trace { kernels: vec![kb.build()] });
    let err = gpusim_sim_core::simulate(&a, &mut src, &gpusim_sim_core::SimOptions::default()).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("barrier 3 (2 of 3 warps arrived)"), "{msg}");
}

//! The steady window of a kernel report: the stretch during which every CTA slot was busy,
//! whose throughput a benchmark with hundreds of waves is compared with.

mod common;

use common::*;
use gpusim_isa::{AddrExpr, KernelTrace, Lanes, ProgramBuilder, Var};
use gpusim_sim_core::KernelReport;

/// `ctas` CTAs of 4 warps, one CTA per SM at a time (shared memory), each warp streaming
/// `iters` × 512 B of loads from its own addresses.
fn stream_kernel(ctas: u32, iters: u32) -> KernelTrace {
    let mut kb = KB::new("stream", ctas, 128);
    kb.info.smem_bytes = 200 * 1024;
    let mut b = ProgramBuilder::new("p");
    b.begin_loop(iters).unwrap();
    for k in 0..4u8 {
        let ld = kb.inst("LDG.E.128", Some(8 + 4 * k), &[2]);
        b.mem_inst(
            ld,
            AddrExpr::constant((1 << 32) + 512 * k as u64)
                .with(Var::CtaX, 1 << 20)
                .with(Var::Warp, 1 << 16)
                .with(Var::Loop(0), 2048),
            Lanes::Stride(16),
            0,
        );
    }
    for k in 0..4u8 {
        let f = kb.inst("FADD", Some(4), &[4, 8 + 4 * k]);
        b.inst(f);
    }
    b.end_loop().unwrap();
    kb.build_with(b)
}

fn kernel(ctas: u32) -> KernelReport {
    run1(&arch(4), stream_kernel(ctas, 24)).kernels.remove(0)
}

fn average_bytes_per_cycle(k: &KernelReport) -> f64 {
    k.memory.traffic.requested_bytes as f64 / k.cycles as f64
}

fn steady_bytes_per_cycle(k: &KernelReport) -> f64 {
    let w = k.steady.as_ref().expect("a grid of several waves has a steady window");
    w.requested_bytes as f64 / w.cycles() as f64
}

#[test]
fn a_grid_of_one_wave_has_no_steady_window() {
    assert_eq!(kernel(4).steady, None);
    assert_eq!(kernel(3).steady, None);
}

#[test]
fn the_window_runs_from_the_first_retirement_to_the_first_slot_left_empty() {
    let k = kernel(4 * 6 + 1);
    let w = k.steady.clone().unwrap();
    // 6 full waves and one CTA: the first wave ends at about 1/7 of the kernel, the last full
    // wave at about 6/7 (the lone CTA of wave 7 runs faster than a wave, alone on the chip).
    let frac = |c: u64| (c - k.start_cycle) as f64 / k.cycles as f64;
    assert!(w.start_cycle > k.start_cycle && w.end_cycle < k.end_cycle);
    assert!((0.08..0.2).contains(&frac(w.start_cycle)), "starts at {:.3}", frac(w.start_cycle));
    assert!((0.75..0.97).contains(&frac(w.end_cycle)), "ends at {:.3}", frac(w.end_cycle));
    assert!(w.requested_bytes < k.memory.traffic.requested_bytes);
    assert_eq!(w.l2_bytes, w.requested_bytes, "every load misses the L1 and goes to the L2 once");
}

#[test]
fn the_steady_window_leaves_the_tail_of_a_partial_last_wave_out() {
    // Whole waves: the average is close to the steady rate.
    let whole = kernel(4 * 6);
    // One CTA more: a whole extra wave's time for a quarter of a wave's work, so the average
    // falls; the steady window's rate does not.
    let tail = kernel(4 * 6 + 1);
    let (avg_whole, avg_tail) = (average_bytes_per_cycle(&whole), average_bytes_per_cycle(&tail));
    let steady = steady_bytes_per_cycle(&tail);
    assert!(avg_tail < 0.95 * avg_whole, "tail {avg_tail:.2} vs whole waves {avg_whole:.2} B/clk");
    assert!((steady / avg_whole - 1.0).abs() < 0.08, "steady {steady:.2} vs whole waves {avg_whole:.2} B/clk");
}

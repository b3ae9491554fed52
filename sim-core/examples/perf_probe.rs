//! Quick throughput probe on synthetic kernels: `cargo run --release -p gpusim-sim-core --example perf_probe`.
//! The tracked benchmark is `gpusim bench`; this probe needs no trace files or presets.

#[path = "../tests/common/mod.rs"]
mod common;

use common::*;
use gpusim_isa::{AddrExpr, Lanes, ProgramBuilder, Var};
use std::time::Instant;

fn main() {
    let a = arch(132);
    // Compute-bound: 132·8 CTAs × 8 warps × 2000 FFMAs.
    let mut kb = KB::new("ffma", 132 * 8, 256);
    let mut b = ProgramBuilder::new("p");
    b.begin_loop(250).unwrap();
    for i in 0..8u8 {
        let f = kb.inst("FFMA", Some(10 + i), &[10 + i, 2, 10 + i]);
        b.inst(f);
    }
    b.end_loop().unwrap();
    let exit = kb.inst("EXIT", None, &[]);
    b.inst(exit);
    let p = kb.program(b.finish().unwrap());
    kb.all_warps(p);
    let k1 = kb.build();

    // Memory-bound: streaming LDG/STG.
    let mut kb = KB::new("copy", 132 * 4, 256);
    let mut b = ProgramBuilder::new("p");
    b.begin_loop(64).unwrap();
    let ld = kb.inst("LDG.E.128", Some(4), &[2]);
    let st = kb.inst("STG.E.128", None, &[2, 4]);
    let base = AddrExpr::constant(1 << 40).with(Var::Warp, 4096).with(Var::CtaX, 32768).with(Var::Loop(0), 32768 * 528);
    b.mem_inst(ld, base, Lanes::Stride(16), 0);
    b.mem_inst(st, AddrExpr { base: 1 << 41, ..base }, Lanes::Stride(16), 0);
    b.end_loop().unwrap();
    b.inst(exit);
    let p = kb.program(b.finish().unwrap());
    kb.all_warps(p);
    let k2 = kb.build();

    for (name, k) in [("ffma", k1), ("copy", k2)] {
        let t = Instant::now();
        let r = run1(&a, k);
        let dt = t.elapsed().as_secs_f64();
        let n = r.warp_instructions;
        println!(
            "{name}: {n} warp insts, {} cycles, {:.3} s, {:.2} M warp inst/s",
            r.total_cycles,
            dt,
            n as f64 / dt / 1e6
        );
    }
}

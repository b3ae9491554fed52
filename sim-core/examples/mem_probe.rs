//! Memory-hierarchy probe: pointer-chase latency against footprint, and streaming bandwidth.
//! `cargo run --release -p gpusim-sim-core --example mem_probe -- a100-sxm4-80gb`

#[path = "../tests/common/mod.rs"]
mod common;

use common::*;
use gpusim_isa::{AddrExpr, Lanes, ProgramBuilder, Var};

fn chase(a: &gpusim_configs::Arch, footprint: u64, passes: u32) -> u64 {
    let stride = 128u64;
    let n = (footprint / stride).min(1 << 20);
    // Fixed-seed permutation (xorshift) as one cycle.
    let mut perm: Vec<u64> = (0..n).collect();
    let mut x = 0x9E3779B97F4A7C15u64;
    for i in (1..n as usize).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        perm.swap(i, (x % (i as u64 + 1)) as usize);
    }
    let mut kb = KB::new("chase", 1, 32);
    let mut b = ProgramBuilder::new("p");
    b.begin_loop(passes).unwrap();
    for &e in &perm {
        let mut ld = kb.inst("LDG.E.64", Some(2), &[2]);
        ld.mask = 1;
        b.mem_inst(ld, AddrExpr::constant((1 << 40) + e * stride), Lanes::Stride(0), 0);
    }
    b.end_loop().unwrap();
    let exit = kb.inst("EXIT", None, &[]);
    b.inst(exit);
    let p = kb.program(b.finish().unwrap());
    kb.all_warps(p);
    let _ = n;
    run1(a, kb.build()).kernels[0].cycles
}

fn stream(a: &gpusim_configs::Arch, kind: &str) -> f64 {
    let ctas = a.sm.count * 2;
    let threads = 1024u32;
    let per_iter = ctas as u64 * threads as u64 * 16;
    let iters: u32 = std::env::var("ITERS").ok().and_then(|x| x.parse().ok()).unwrap_or(24);
    let mut kb = KB::new("stream", ctas, threads);
    let mut b = ProgramBuilder::new("p");
    b.begin_loop(iters).unwrap();
    let base = |arr: u64| {
        AddrExpr::constant((1 << 40) + arr * (1 << 34))
            .with(Var::CtaX, threads as i64 * 16)
            .with(Var::Warp, 512)
            .with(Var::Loop(0), per_iter as i64)
    };
    let (loads, stores) = match kind {
        "read" => (1, 0),
        "write" => (0, 1),
        "copy" => (1, 1),
        _ => (3, 1),
    };
    for l in 0..loads {
        let ld = kb.inst("LDG.E.128", Some(4 + 4 * l as u8), &[2]);
        b.mem_inst(ld, base(l), Lanes::Stride(16), 0);
    }
    for _ in 0..stores {
        let st = kb.inst("STG.E.128", None, &[2, 4]);
        b.mem_inst(st, base(7), Lanes::Stride(16), 0);
    }
    b.end_loop().unwrap();
    let exit = kb.inst("EXIT", None, &[]);
    b.inst(exit);
    let p = kb.program(b.finish().unwrap());
    kb.all_warps(p);
    let mut k = kb.build();
    k.info.smem_bytes = (a.sm.shared_mem_per_sm.0 / 2 - 2048) as u32;
    let r = run1(a, k);
    for l in &r.links {
        let t = r.total_cycles as f64 * l.instances as f64;
        println!(
            "    {}: busy {:.1}%, mean wait {:.1} cycles, {:.1} GB/s",
            l.name,
            100.0 * l.busy_cycles as f64 / t,
            l.queue_cycles as f64 / l.requests.max(1) as f64,
            l.bytes as f64 / (r.time_us * 1e3)
        );
    }
    let bytes = per_iter * iters as u64 * (loads + stores);
    bytes as f64 / (r.kernels[0].time_us * 1e-6) / 1e9
}

fn main() {
    let name = std::env::args().nth(1).unwrap_or("a100-sxm4-80gb".into());
    let a = gpusim_configs::load(&name).unwrap();
    println!("{name}: pointer chase (cycles per load)");
    for kind in ["read", "write", "copy", "triad"] {
        println!("  stream {kind}: {:.0} GB/s", stream(&a, kind));
    }
    if std::env::args().nth(2).is_some() {
        return;
    }
    for kb in [16u64, 128, 1024, 8 << 10, 16 << 10, 24 << 10, 28 << 10, 36 << 10, 64 << 10] {
        let f = kb * 1024;
        let c1 = chase(&a, f, 2);
        let c2 = chase(&a, f, 3);
        let n = (f / 128).min(1 << 20);
        println!("  {:>8} KiB: {:.1}", kb, (c2 - c1) as f64 / n as f64);
    }
    for kind in ["read", "write", "copy", "triad"] {
        println!("  stream {kind}: {:.0} GB/s", stream(&a, kind));
    }
}

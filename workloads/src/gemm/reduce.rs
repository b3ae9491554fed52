//! The split-K reduction kernel (cuBLAS launches `splitKreduce_kernel` after a split-K GEMM):
//! each thread sums four consecutive fp32 partials over the `split_k` planes and writes them in
//! the output type.
//!
//! ```text
//! S2R ×2; IMAD.WIDE
//! split_k × LDG.E.128 R(8+4s)x4 <- R2x2 addr=W + (b·split_k + s)·M'N'·4 + 4096·cta.x + 512·warp
//! 4·(split_k − 1) × FADD
//! F2FP.BF16.F32.PACK_AB ×2; STG.E.64 addr=C + b·M'N'·2 + 2048·cta.x + 256·warp   # fp32 out: STG.E.128
//! EXIT
//! ```
//! Grid `(⌈M'N'/1024⌉, batch)`, 256 threads.

use std::collections::BTreeMap;

use gpusim_isa::{Dim3, KernelInfo, KernelTrace, OpTable, Var};

use super::Dtype;
use super::Geom;
use crate::asm::{Addr, Code, assemble, r, rr};

pub(crate) fn kernel_trace(id: u32, g: &Geom, dtype: Dtype, sm: u32) -> Result<KernelTrace, String> {
    let mut ops = OpTable::new();
    let mut c = Code::new(&mut ops, "splitk_reduce");
    let plane = g.mp * g.np;
    let out = dtype.out_bytes();
    c.op("S2R", &[r(0)], &[]).op("S2R", &[r(1)], &[]);
    c.op("IMAD.WIDE", &[rr(2, 2)], &[r(0), r(1)]);
    for s in 0..g.split {
        let addr = Addr::at(g.regions.w + s * plane * 4)
            .term(Var::CtaY, (g.split * plane * 4) as i64)
            .term(Var::CtaX, 4096)
            .term(Var::Warp, 512);
        c.mem("LDG.E.128", &[rr(8 + 4 * s as u8, 4)], &[rr(2, 2)], addr);
    }
    for s in 1..g.split {
        for j in 0..4u8 {
            c.op("FADD", &[r(8 + j)], &[r(8 + j), r(8 + 4 * s as u8 + j)]);
        }
    }
    let addr = Addr::at(g.regions.c)
        .term(Var::CtaY, (plane * out) as i64)
        .term(Var::CtaX, (1024 * out) as i64)
        .term(Var::Warp, (128 * out) as i64);
    if out == 2 {
        c.op(dtype.pack(), &[r(4)], &[rr(8, 2)]).op(dtype.pack(), &[r(5)], &[rr(10, 2)]);
        c.mem("STG.E.64", &[], &[rr(2, 2), rr(4, 2)], addr);
    } else {
        c.mem("STG.E.128", &[], &[rr(2, 2), rr(8, 4)], addr);
    }
    c.op("EXIT", &[], &[]);
    let prog = c.finish();
    let grid = Dim3::new(plane.div_ceil(1024) as u32, g.batch as u32, 1);
    let mut info =
        KernelInfo::new(id, format!("splitKreduce_kernel_{}x{}", g.split, dtype), grid, Dim3::new(256, 1, 1));
    info.regs_per_thread = (8 + 4 * g.split as u32 + 8).div_ceil(8) * 8;
    info.sm_version = sm;
    info.deps = vec![id - 1];
    assemble(info, ops, vec![prog], vec![0; 8], BTreeMap::new())
}

//! `BufferedKernel`: the rest of a kernel read into memory when the engine lets go of a
//! sequential trace's kernel. It must hand out exactly the CTAs the source would have, in order,
//! and hold them as runs of one layout, not one `CtaTrace` each.

use std::collections::BTreeMap;
use std::sync::Arc;

use gpusim_isa::program::{Inst, ProgramBuilder};
use gpusim_isa::text::{self, TextReader};
use gpusim_isa::{
    BufferedKernel, CtaLayout, CtaTrace, Dim3, KernelInfo, KernelSource, KernelTrace, MemKernelSource, OpTable, Trace,
    TraceSource,
};

/// A grid of 6×5 CTAs of two warps: a default layout, and CTAs 7 and 8 and 29 with their own.
fn kernel() -> KernelTrace {
    let mut ops = OpTable::new();
    ops.intern("FFMA").unwrap();
    let prog = |name: &str, n: usize| {
        let mut b = ProgramBuilder::new(name);
        for _ in 0..n {
            b.inst(Inst::new(0));
        }
        Arc::new(b.finish().unwrap())
    };
    let mut overrides = BTreeMap::new();
    overrides.insert(7, vec![1, 0]);
    overrides.insert(8, vec![1, 1]);
    overrides.insert(29, vec![0, 1]);
    KernelTrace {
        info: KernelInfo::new(0, "k", Dim3::new(6, 5, 1), Dim3::new(64, 1, 1)),
        ops,
        programs: vec![prog("a", 3), prog("b", 5)],
        layout: CtaLayout { default: vec![0, 0], overrides },
    }
}

/// Every CTA of `ks` as (coordinate, each warp's program name and length).
fn all(ks: &mut dyn KernelSource) -> Vec<(Dim3, Vec<(String, usize)>)> {
    let mut out = Vec::new();
    while let Some(CtaTrace { coord, warps }) = ks.next_cta().unwrap() {
        out.push((coord, warps.iter().map(|p| (p.name.clone(), p.steps.len())).collect()));
    }
    out
}

#[test]
fn a_drained_kernel_yields_the_sources_ctas_in_order() {
    let k = Arc::new(kernel());
    let expected = all(&mut MemKernelSource::new(k.clone()));
    assert_eq!(expected.len(), 30);

    // Drained after three CTAs were pulled, as the engine does part-way into a kernel.
    let mut src = MemKernelSource::new(k.clone());
    let head: Vec<_> = (0..3).map(|_| src.next_cta().unwrap().unwrap().coord).collect();
    let mut buffered = BufferedKernel::drain(&mut src);
    assert!(src.next_cta().unwrap().is_none(), "the source is read to its end");
    let rest = all(&mut buffered);
    assert_eq!(head, expected[..3].iter().map(|c| c.0).collect::<Vec<_>>());
    assert_eq!(rest, expected[3..]);

    // From the text reader, which skips runs of default-layout CTAs.
    let written = text::to_string(&Trace { kernels: vec![kernel()] }).unwrap();
    let mut reader = TextReader::from_reader("k.trace", written.as_bytes());
    let mut ks = reader.next_kernel().unwrap().unwrap();
    let first = ks.next_cta().unwrap().unwrap();
    assert_eq!(first.coord, expected[0].0);
    let mut buffered = BufferedKernel::drain(&mut *ks);
    assert_eq!(all(&mut buffered), expected[1..]);
}

#[test]
fn runs_hand_out_in_parts_and_hold_one_entry_per_layout_run() {
    let k = Arc::new(kernel());
    let mut buffered = BufferedKernel::drain(&mut MemKernelSource::new(k));
    // Runs: 0..7 default, 7, 8, 9..29 default, 29: the first is handed out in parts of 4.
    let a = buffered.skip_run(4).unwrap().unwrap();
    assert_eq!((a.first, a.count), (0, 4));
    let b = buffered.skip_run(100).unwrap().unwrap();
    assert_eq!((b.first, b.count), (4, 3));
    let c = buffered.next_cta().unwrap().unwrap();
    assert_eq!((c.coord, c.warps[0].name.as_str()), (Dim3::new(1, 1, 0), "b"));
    let mut counts = Vec::new();
    while let Some(r) = buffered.skip_run(u64::MAX).unwrap() {
        counts.push((r.first, r.count));
    }
    assert_eq!(counts, vec![(8, 1), (9, 20), (29, 1)]);
    assert!(buffered.next_cta().unwrap().is_none());
}

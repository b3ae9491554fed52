//! `accelsim::write_traceg` writes a kernel that the Accel-Sim reader reads back as the same
//! dynamic instruction stream: per warp, the same opcodes, masks, first registers, immediates
//! and lane addresses, in the same order (loops unrolled).

use std::path::Path;

use gpusim_isa::accelsim::{TracegReader, write_traceg};
use gpusim_isa::{Cursor, Dim3, KernelSource, MemTraceSource, Program, TraceSource};

/// One warp instruction as the trace shows it.
type Dynamic = (String, u32, Vec<u16>, Vec<u16>, i32, Vec<u64>);

fn walk(ks: &dyn KernelSource, coord: Dim3, w: usize, prog: &Program) -> Vec<Dynamic> {
    let mut out = Vec::new();
    let mut cur = Cursor::new(prog, [coord.x, coord.y, coord.z], w as u32);
    let mut addrs = [0u64; 32];
    while let Some(i) = cur.peek(prog) {
        let lanes = if i.mem.is_some() && cur.lane_addresses(prog, i, &mut addrs) {
            (0..32).filter(|l| i.mask & (1 << l) != 0).map(|l| addrs[l]).collect()
        } else {
            Vec::new()
        };
        let firsts = |rs: &[gpusim_isa::RegRange]| rs.iter().filter(|r| !r.is_none()).map(|r| r.first.0).collect();
        out.push((ks.ops().get(i.op).mnemonic.clone(), i.mask, firsts(&i.dst), firsts(&i.src), i.imm, lanes));
        cur.advance();
    }
    out
}

fn every_warp(ks: &mut dyn KernelSource) -> Vec<(Dim3, Vec<Vec<Dynamic>>)> {
    let mut out = Vec::new();
    while let Some(c) = ks.next_cta().unwrap() {
        let warps = c.warps.iter().enumerate().map(|(w, p)| walk(ks, c.coord, w, p)).collect();
        out.push((c.coord, warps));
    }
    out
}

#[test]
fn written_kernels_read_back_as_the_same_instruction_streams() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    for (file, ctas) in [("ffma_bound.trace", 3), ("causal_tiles.trace", 0), ("stream_copy.trace", 4)] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        let mut trace = gpusim_isa::text::read_trace(file, &text).unwrap();
        for k in &mut trace.kernels {
            if ctas > 0 {
                k.info.grid = Dim3::new(ctas, 1, 1);
            }
        }
        let (mut a, mut b) = (MemTraceSource::new(trace.clone()), MemTraceSource::new(trace));
        let mut n = 0;
        while let Some(mut k) = a.next_kernel().unwrap() {
            let mut bytes = Vec::new();
            let written = write_traceg(&mut *k, &mut bytes, "out").unwrap();
            let mut orig = b.next_kernel().unwrap().unwrap();
            let want = every_warp(&mut *orig);
            assert_eq!(written, want.iter().flat_map(|c| &c.1).map(|w| w.len() as u64).sum::<u64>());
            let mut back = TracegReader::new(&bytes[..], "out", orig.info().id).unwrap();
            assert_eq!(back.info().grid, orig.info().grid);
            assert_eq!(back.info().block, orig.info().block);
            let got = every_warp(&mut back);
            assert!(got == want, "{file}: kernel {n} reads back differently");
            n += 1;
        }
        assert!(n > 0, "{file} has kernels");
    }
}

/// A flat trace's loops come back as loops: the FFMA example's 128 iterations of 32 FFMAs and
/// the streaming copy's grid-stride loop (addresses advancing by a stride per iteration) are
/// each one loop again, not thousands of steps, and walk as the flat list did (above).
#[test]
fn flat_loops_fold_back_into_loops() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    for (file, most_steps) in [("ffma_bound.trace", 80), ("stream_copy.trace", 40)] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        let mut trace = gpusim_isa::text::read_trace(file, &text).unwrap();
        trace.kernels[0].info.grid = Dim3::new(2, 1, 1);
        let mut src = MemTraceSource::new(trace);
        let mut k = src.next_kernel().unwrap().unwrap();
        let mut bytes = Vec::new();
        let written = write_traceg(&mut *k, &mut bytes, "out").unwrap();
        let mut back = TracegReader::new(&bytes[..], "out", 0).unwrap();
        let cta = back.next_cta().unwrap().unwrap();
        let p = &cta.warps[0];
        let loops = p.steps.iter().filter(|s| matches!(s, gpusim_isa::Step::Loop { .. })).count();
        assert!(loops >= 1, "{file}: no loop folded");
        assert!(p.steps.len() <= most_steps, "{file}: {} steps for {written} instructions", p.steps.len());
    }
}

//! Memory-streaming kernels: the small kernels of a MoE layer (top-k softmax, token
//! permutation, activation, combine) and the layout copies and elementwise scalings of unfused
//! attention. What bounds them is the bytes they move, so each is modelled by its reads, its
//! writes and a few arithmetic instructions per 16 bytes.
//!
//! ```text
//! S2R ×2; IMAD.WIDE                                    # pointers
//! R × { LDG.E.128 addr=src + cta.x·256·16·R + 4096·i + 512·warp ; A × FFMA ; MUFU.EX2 }
//! W × STG.E.128 addr=dst + cta.x·256·16·W + 4096·j + 512·warp
//! EXIT
//! ```
//! 256 threads per CTA; the grid covers the larger of the reads and the writes at 4 chunks of 16
//! bytes per thread, the other side gets its share `R` or `W` (at least 1 chunk). Approximation: gathers and scatters (token
//! permutation, combine) are modelled as streams of the same bytes (their rows are whole
//! `hidden`-wide rows, so their accesses are as coalesced as a stream's).

use std::collections::BTreeMap;

use gpusim_isa::{Dim3, KernelTrace, OpTable, Var};

use crate::asm::{Addr, Code, assemble, info, r, rr};

/// Chunks of 16 bytes each thread reads.
const READS: u64 = 4;
const THREADS: u64 = 256;

/// One streaming kernel.
pub(crate) struct Stream<'a> {
    pub name: &'a str,
    pub src: u64,
    pub read: u64,
    pub dst: u64,
    pub write: u64,
    /// FFMA per 16 bytes read (the kernel's arithmetic).
    pub ffma: u32,
    /// Whether each chunk needs an exponential (softmax, SiLU).
    pub exp: bool,
}

/// The kernel of `s` (id 0, stream 0; the layer sets both).
pub(crate) fn stream_kernel(s: &Stream, sm: u32) -> Result<KernelTrace, String> {
    // The grid covers the larger of the reads and the writes at `READS` chunks per thread; the
    // smaller side gets its share (at least one chunk per thread).
    let most = s.read.max(s.write).max(16);
    let grid = most.div_ceil(THREADS * 16 * READS).max(1);
    if grid > u32::MAX as u64 {
        return Err(format!("{}: {most} bytes need too many CTAs", s.name));
    }
    let reads = (s.read * READS).div_ceil(most).max(1);
    let writes = (s.write * READS).div_ceil(most).max(1);
    let per_cta = THREADS * 16 * reads;
    let mut ops = OpTable::new();
    let mut c = Code::new(&mut ops, s.name);
    c.op("S2R", &[r(0)], &[]).op("S2R", &[r(1)], &[]).op("IMAD.WIDE", &[rr(2, 2)], &[r(0), r(1)]);
    for i in 0..reads {
        let a = Addr::at(s.src).plus(4096 * i).term(Var::CtaX, per_cta as i64).term(Var::Warp, 512);
        c.mem("LDG.E.128", &[rr(8, 4)], &[rr(2, 2)], a);
        for _ in 0..s.ffma {
            c.op("FFMA", &[r(12)], &[r(8), r(9), r(12)]);
        }
        if s.exp {
            c.op("MUFU.EX2", &[r(13)], &[r(10)]);
        }
    }
    for j in 0..writes {
        let a = Addr::at(s.dst).plus(4096 * j).term(Var::CtaX, (THREADS * 16 * writes) as i64).term(Var::Warp, 512);
        c.mem("STG.E.128", &[], &[rr(2, 2), rr(8, 4)], a);
    }
    c.op("EXIT", &[], &[]);
    let prog = c.finish();
    let i = info(0, s.name, Dim3::new(grid as u32, 1, 1), Dim3::new(THREADS as u32, 1, 1), 32, 0, sm);
    assemble(i, ops, vec![prog], vec![0; (THREADS / 32) as usize], BTreeMap::new())
}

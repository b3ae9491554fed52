//! STREAM-style DRAM bandwidth kernels: read, write ("init"), copy and triad.
//!
//! The published numbers come from RRZE's `gpu-stream`: 1024-thread blocks pinned to 2 blocks
//! per SM by a shared-memory "spoiler" array, one `double` per thread, a grid covering the array.
//! The generator keeps the residency (2 CTAs of `threads_per_cta` per SM, the spoiler sized for
//! this chip) but writes the kernel as the persistent grid-stride loop nvcc makes of
//! `for (i = tid; i < n; i += stride)` over `float4` (16 B per thread per access), with the grid
//! exactly 2 CTAs per active SM. In steady state each SM then holds the same threads with the same
//! loads in flight, and the trace is a few instructions whatever the array size.
//!
//! Per grid-stride iteration (`unroll` elements per thread, `T` = grid × threads):
//!
//! ```text
//! S2R R0; S2R R1; IMAD R0 <- R1 R0                 # i = blockIdx.x·blockDim.x + threadIdx.x
//! IMAD.WIDE R2x2 <- R0 (a) ... R8x2 (d)            # &x[i] per array
//! loop n / (T·unroll)
//!   LDG.E.128.CONSTANT R20x4 <- R4x2 addr=b+16·(i + k·T)      # per load array, per k
//!   FADD / FFMA ...                                 # read: sum += x; triad: b + s·c (+ d)
//!   STG.E.128 <- R2x2 R20x4 addr=a+16·(i + k·T)               # per store, per k
//!   IADD3 Rp <- Rp R12; IADD3.X Rp+1 <- Rp+1 R13   # advance each pointer by unroll·T·16
//!   IADD3 R0 <- R0 R11; ISETP.GE.AND P0 <- R0 R10; BRA <- P0
//! end
//! EXIT
//! ```
//!
//! Triad: the notes of the RRZE cases in `published.toml` describe it as 3 loads + 1 store, which
//! is the default (`a = b + s·c + d`); RRZE's gpu-stream source (the versions of `main.cu` seen)
//! computes `A = B·1.2 + C`, 2 loads + 1 store, and counts 3 streams: `triad_loads = 2`.
//!
//! The element count need not divide evenly: threads whose index falls in the last partial
//! grid-stride step run one more iteration (their warps get a second program, a partial last warp
//! a third with a partial mask), so every element of every array is touched exactly once.

use std::collections::BTreeMap;

use gpusim_configs::Arch;
use gpusim_isa::{AddrExpr, Dim3, OpTable, Program, RegRange, Trace, Var};

use super::{Measure, UbenchTrace};
use crate::WorkloadError;
use crate::asm::{Code, info, kernel, p as pred_reg, r, round_up, rr};

/// Which STREAM kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamKind {
    /// Load-only, with a reduction so the loads are not dead (RRZE `read`).
    Read,
    /// Store-only (RRZE `init`, STREAM's fill).
    Write,
    /// `a[i] = b[i]`: one load and one store.
    Copy,
    /// `a[i] = b[i] + s·c[i] (+ d[i])`: `triad_loads` loads and one store.
    Triad,
}

impl StreamKind {
    pub fn name(self) -> &'static str {
        match self {
            StreamKind::Read => "read",
            StreamKind::Write => "write",
            StreamKind::Copy => "copy",
            StreamKind::Triad => "triad",
        }
    }
}

/// Parameters of [`stream`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stream {
    pub kind: StreamKind,
    /// Bytes of each array (a multiple of 16: one `float4` per thread per access).
    pub bytes_per_array: u64,
    /// Number of SMs' worth of CTAs (2 per SM); `None`: every SM of the chip. Where the CTAs run
    /// is the simulator's choice: a round-robin dispatcher spreads them over up to twice as many
    /// SMs.
    pub active_sms: Option<u32>,
    /// Threads per CTA (a multiple of 32, at most 1024); two CTAs of it must fit an SM.
    pub threads_per_cta: u32,
    /// Elements per thread per loop iteration, loaded before any is used (nvcc unrolls such
    /// loops by 4 when registers allow). 1 to 8; with 1024-thread CTAs, 2 CTAs per SM leave 32
    /// registers per thread, which allows 1 for triad, up to 3 for read and copy.
    pub unroll: u32,
    /// Loads of the triad: 3 (`a = b + s·c + d`, 3 loads + 1 store, as the notes of the RRZE
    /// cases in published.toml describe it) or 2 (STREAM's `a = b + s·c`, which is also what
    /// RRZE's gpu-stream source computes and counts as 3 streams).
    pub triad_loads: u32,
    /// Address of the first array; the others follow, each aligned to 2 MiB.
    pub base_address: u64,
}

impl Default for Stream {
    fn default() -> Self {
        Stream {
            kind: StreamKind::Copy,
            bytes_per_array: 256 << 20,
            active_sms: None,
            threads_per_cta: 1024,
            unroll: 1,
            triad_loads: 3,
            base_address: 0x7f00_0000_0000,
        }
    }
}

/// Register layout of the stream kernels.
const IDX: u8 = 0;
const CTAID: u8 = 1;
/// Pointer pairs of arrays a, b, c, d.
const PTR: [u8; 4] = [2, 4, 6, 8];
const BOUND: u8 = 10;
const ISTEP: u8 = 11;
const PSTEP: u8 = 12;
const SCALAR: u8 = 14;
/// Read: accumulators; write: the stored value.
const ACC: u8 = 16;
/// First data register of unrolled element 0.
const DATA: u8 = 20;

impl Stream {
    /// Arrays loaded (indices into a, b, c, d).
    fn loads(&self) -> &'static [usize] {
        match self.kind {
            StreamKind::Read | StreamKind::Copy => &[1],
            StreamKind::Write => &[],
            StreamKind::Triad if self.triad_loads == 2 => &[1, 2],
            StreamKind::Triad => &[1, 2, 3],
        }
    }

    /// Whether array a is stored.
    fn stores(&self) -> bool {
        self.kind != StreamKind::Read
    }

    /// Arrays the kernel touches.
    pub fn arrays(&self) -> u64 {
        self.loads().len() as u64 + self.stores() as u64
    }

    /// Registers per thread the kernel uses.
    pub fn registers(&self) -> u32 {
        let data = 4 * self.loads().len() as u32 * self.unroll;
        (DATA as u32 + data).max(ACC as u32 + 4)
    }

    /// CTAs in the grid on `arch`.
    pub fn grid(&self, arch: &Arch) -> u32 {
        2 * self.active_sms.unwrap_or(arch.sm.count)
    }

    /// Distance between the arrays.
    fn array_stride(&self) -> u64 {
        round_up(self.bytes_per_array, 2 << 20)
    }

    /// Checks the parameters against `arch`; [`stream`] returns this message as its error.
    pub fn validate(&self, arch: &Arch) -> Result<(), String> {
        let t = self.threads_per_cta;
        if t == 0 || t > 1024 || !t.is_multiple_of(32) {
            return Err(format!("threads_per_cta = {t} must be a multiple of 32 between 32 and 1024"));
        }
        if 2 * t > arch.sm.max_threads {
            return Err(format!("2 CTAs of {t} threads exceed the {} threads of an SM", arch.sm.max_threads));
        }
        if let Some(n) = self.active_sms
            && (n == 0 || n > arch.sm.count)
        {
            return Err(format!("active_sms = {n} must be between 1 and the chip's {} SMs", arch.sm.count));
        }
        if !(1..=8).contains(&self.unroll) {
            return Err(format!("unroll = {} must be between 1 and 8", self.unroll));
        }
        if !(2..=3).contains(&self.triad_loads) {
            return Err(format!("triad_loads = {} must be 2 or 3", self.triad_loads));
        }
        if self.bytes_per_array < 16 || !self.bytes_per_array.is_multiple_of(16) {
            return Err(format!("bytes_per_array = {} must be a positive multiple of 16", self.bytes_per_array));
        }
        let regs = round_up(self.registers() as u64 * 32, arch.sm.register_alloc_unit.max(1) as u64);
        let need = regs * (t as u64 / 32) * 2;
        if need > arch.sm.registers as u64 {
            return Err(format!(
                "unroll = {} needs {} registers per thread; 2 CTAs of {t} threads would need {need} of the SM's {} \
                 registers: lower unroll or threads_per_cta",
                self.unroll,
                self.registers(),
                arch.sm.registers
            ));
        }
        let units = self.bytes_per_array / 16;
        let per_step = self.grid(arch) as u64 * t as u64;
        if units / per_step / self.unroll as u64 > u32::MAX as u64 {
            return Err("bytes_per_array needs more than 2^32 loop iterations".into());
        }
        let end = self.base_address.checked_add(self.array_stride().saturating_mul(4));
        if end.is_none() || !self.base_address.is_multiple_of(16) {
            return Err(format!(
                "base_address = {:#x} must be 16-byte aligned and leave room for 4 arrays",
                self.base_address
            ));
        }
        Ok(())
    }
}

/// Shared memory per CTA that lets exactly 2 CTAs share an SM of `arch` (RRZE's "spoiler"):
/// half the SM's shared memory less the per-CTA reservation, in allocation units. 0 when no
/// such size exists.
pub fn two_cta_spoiler(arch: &Arch) -> u32 {
    let s = arch.sm.shared_mem_per_sm.0;
    let unit = arch.sm.shared_mem_alloc_unit.0.max(1);
    let reserved = arch.sm.shared_mem_reserved_per_cta.0;
    let Some(half) = (s / 2).checked_sub(reserved) else { return 0 };
    let smem = half / unit * unit;
    let alloc = smem + reserved;
    let ok = smem > 0 && smem <= arch.sm.shared_mem_per_cta.0 && alloc > 0 && s / alloc == 2;
    if ok { smem.min(u32::MAX as u64) as u32 } else { 0 }
}

/// The STREAM kernel `p.kind` on `arch`: one kernel, `Measure::Bandwidth` with the bytes read
/// plus written (STREAM's and RRZE's convention).
///
/// # Errors
/// When [`Stream::validate`] fails.
pub fn stream(p: &Stream, arch: &Arch) -> Result<UbenchTrace, WorkloadError> {
    p.validate(arch).map_err(|e| WorkloadError(format!("stream: {e}")))?;
    Ok(build(p, arch))
}

/// [`stream`] of checked parameters.
fn build(p: &Stream, arch: &Arch) -> UbenchTrace {
    let grid = p.grid(arch) as u64;
    let threads = p.threads_per_cta as u64;
    let warps = threads / 32;
    let total = grid * threads;
    let units = p.bytes_per_array / 16;
    let full = units / total;
    let rem = units % total;
    let (tail_warps, tail_lanes) = (rem / 32, (rem % 32) as u32);

    let mut ops = OpTable::new();
    let mut programs: Vec<Program> = Vec::new();
    let mut index: BTreeMap<(u64, u32), u32> = BTreeMap::new();
    let mut layouts: Vec<Vec<u32>> = Vec::with_capacity(grid as usize);
    for cta in 0..grid {
        let mut l = Vec::with_capacity(warps as usize);
        for w in 0..warps {
            let gw = cta * warps + w;
            let key = if gw < tail_warps {
                (full + 1, 0)
            } else if gw == tail_warps && tail_lanes > 0 {
                (full, (1u32 << tail_lanes) - 1)
            } else {
                (full, 0)
            };
            let id = *index.entry(key).or_insert_with(|| {
                programs.push(program(p, &mut ops, total, key.0, key.1));
                (programs.len() - 1) as u32
            });
            l.push(id);
        }
        layouts.push(l);
    }
    let (default, overrides) = majority_layout(layouts);
    let name = format!("stream_{}", p.kind.name());
    let kinfo = info(
        0,
        &name,
        Dim3::new(grid as u32, 1, 1),
        Dim3::new(p.threads_per_cta, 1, 1),
        p.registers(),
        two_cta_spoiler(arch),
        arch.compute_capability,
    );
    let kt = kernel(kinfo, ops, programs, default, overrides);
    let bytes = p.arrays() * p.bytes_per_array;
    let description = format!(
        "STREAM {}: {} load + {} store array(s) of {} B, grid {grid} × {threads} threads (2 CTAs per SM on {} SMs, \
         smem spoiler {} B), grid-stride loop of LDG/STG.E.128 unrolled {}; bandwidth = {bytes} B / kernel time",
        p.kind.name(),
        p.loads().len(),
        p.stores() as u32,
        p.bytes_per_array,
        grid / 2,
        two_cta_spoiler(arch),
        p.unroll,
    );
    UbenchTrace {
        trace: Trace { kernels: vec![kt] },
        description,
        measure: Measure::Bandwidth { bytes },
        timed_kernel: 0,
    }
}

/// The most common per-CTA layout becomes the default (ties: the smallest); the others are
/// overrides.
pub(crate) fn majority_layout(layouts: Vec<Vec<u32>>) -> (Vec<u32>, BTreeMap<u64, Vec<u32>>) {
    let mut counts: BTreeMap<&Vec<u32>, usize> = BTreeMap::new();
    for l in &layouts {
        *counts.entry(l).or_default() += 1;
    }
    let best = counts.iter().max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0))).map(|(l, _)| (*l).clone());
    let default = best.unwrap_or_default();
    let overrides =
        layouts.into_iter().enumerate().filter(|(_, l)| *l != default).map(|(i, l)| (i as u64, l)).collect();
    (default, overrides)
}

/// The program of a warp that processes `count` elements per thread with all lanes, then, when
/// `partial` is non-zero, one more element with the lanes of `partial`.
fn program(p: &Stream, ops: &mut OpTable, total: u64, count: u64, partial: u32) -> Program {
    let name = match (count, partial) {
        (c, 0) => format!("{}_x{c}", p.kind.name()),
        (c, m) => format!("{}_x{c}_tail{}", p.kind.name(), m.count_ones()),
    };
    let mut c = Code::new(ops, &name);
    let used: Vec<usize> =
        if p.stores() { std::iter::once(0).chain(p.loads().iter().copied()).collect() } else { p.loads().to_vec() };
    c.op("S2R", &[r(IDX)], &[]).op("S2R", &[r(CTAID)], &[]).op("IMAD", &[r(IDX)], &[r(CTAID), r(IDX)]);
    for &a in &used {
        c.op("IMAD.WIDE", &[rr(PTR[a], 2)], &[r(IDX)]);
    }
    match p.kind {
        StreamKind::Read | StreamKind::Write => {
            c.op("CS2R", &[rr(ACC, 2)], &[]).op("CS2R", &[rr(ACC + 2, 2)], &[]);
        }
        _ => {}
    }
    let u = p.unroll as u64;
    let iters = count / u;
    if iters > 0 {
        c.begin(iters as u32);
        body(p, &mut c, total, Elem::Loop { unroll: u }, &used);
        c.end();
    }
    for j in iters * u..count {
        body(p, &mut c, total, Elem::Const(j), &used);
    }
    if partial != 0 {
        c.set_mask(partial);
        body(p, &mut c, total, Elem::Const(count), &used);
        c.set_mask(u32::MAX);
    }
    c.op("EXIT", &[], &[]);
    c.finish()
}

/// Which elements of each thread one emitted iteration handles.
#[derive(Clone, Copy)]
enum Elem {
    /// Elements `i0·unroll + k`, k in 0..unroll, inside the loop.
    Loop { unroll: u64 },
    /// Element `j` only.
    Const(u64),
}

fn body(p: &Stream, c: &mut Code, total: u64, e: Elem, used: &[usize]) {
    let loads = p.loads();
    let ks = match e {
        Elem::Loop { unroll } => unroll,
        Elem::Const(_) => 1,
    };
    let addr = |array: usize, k: u64| -> AddrExpr {
        let base = p.base_address + array as u64 * p.array_stride();
        let (j, per_iter) = match e {
            Elem::Loop { unroll } => (k, Some(16 * total as i64 * unroll as i64)),
            Elem::Const(j) => (j, None),
        };
        let x = AddrExpr::constant(base + 16 * total * j)
            .with(Var::CtaX, 16 * p.threads_per_cta as i64)
            .with(Var::Warp, 512);
        match per_iter {
            Some(step) => x.with(Var::Loop(0), step),
            None => x,
        }
    };
    let data = |k: u64, l: usize| DATA + 4 * (k as u8 * loads.len() as u8 + l as u8);
    for k in 0..ks {
        for (l, &a) in loads.iter().enumerate() {
            c.mem("LDG.E.128.CONSTANT", &[rr(data(k, l), 4)], &[rr(PTR[a], 2)], addr(a, k));
        }
    }
    for k in 0..ks {
        match p.kind {
            StreamKind::Read => {
                for q in 0..4 {
                    c.op("FADD", &[r(ACC + q)], &[r(ACC + q), r(data(k, 0) + q)]);
                }
            }
            StreamKind::Triad => {
                let (b, cc) = (data(k, 0), data(k, 1));
                for q in 0..4 {
                    c.op("FFMA", &[r(b + q)], &[r(cc + q), r(SCALAR), r(b + q)]);
                }
                if loads.len() == 3 {
                    let d = data(k, 2);
                    for q in 0..4 {
                        c.op("FADD", &[r(b + q)], &[r(b + q), r(d + q)]);
                    }
                }
            }
            StreamKind::Write | StreamKind::Copy => {}
        }
    }
    if p.stores() {
        for k in 0..ks {
            let val = if p.kind == StreamKind::Write { ACC } else { data(k, 0) };
            c.mem("STG.E.128", &[], &[rr(PTR[0], 2), rr(val, 4)], addr(0, k));
        }
    }
    // Loop control with all lanes (the exit test of the last, partial step included).
    let mask = c.mask();
    c.set_mask(u32::MAX);
    for &a in used {
        c.op("IADD3", &[r(PTR[a])], &[r(PTR[a]), r(PSTEP)]).op(
            "IADD3.X",
            &[r(PTR[a] + 1)],
            &[r(PTR[a] + 1), r(PSTEP + 1)],
        );
    }
    let pred: RegRange = pred_reg(0);
    c.op("IADD3", &[r(IDX)], &[r(IDX), r(ISTEP)]).op("ISETP.GE.AND", &[pred], &[r(IDX), r(BOUND)]).op(
        "BRA",
        &[],
        &[pred],
    );
    c.set_mask(mask);
}

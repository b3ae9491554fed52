//! Traces the memory cases need that `gpusim_workloads::ubench` has no generator for yet (a
//! pointer chase through TMA, a dependent instruction chain, an L1-resident read), written with
//! the workloads assembler ([`gpusim_workloads::asm`]).

use super::*;

use gpusim_workloads::asm::Code;
pub(super) use gpusim_workloads::asm::{one_kernel, p as prg, r as rg, rr, ur as urg};

/// A program of these traces: an all-zero lane stride is 1 (as these traces always had it).
fn asm<'a>(ops: &'a mut OpTable, name: &str, mask: u32) -> Code<'a> {
    let mut c = Code::new(ops, name);
    c.set_mask(mask).set_min_lane_stride(1);
    c
}

/// Shared-memory layout of the TMA chase: the landing buffer at 0, the mbarrier after it.
pub(super) const TMA_BOX: u32 = 16;
const TMA_MBAR: u64 = 128;

/// The pointer chase `p` issued through TMA, as HPMLL's `tma_lat_random` does it: one thread
/// loads each chain element with a bulk tensor copy into shared memory and waits on an
/// mbarrier, then reads the next pointer from shared memory:
///
/// ```text
/// @1 SYNCS.EXCH.64 <- UR4 addr=mbar                  # mbarrier.init
/// loop passes+1 (loop windows)
///   per element e:
///     @1 SYNCS.ARRIVE.TRANS64 <- R12 addr=mbar       # expect_tx(16)
///     @1 UTMALDG.2D <- UR4 UR8 addr=base+e·stride bytes=16   # coordinates from the last pointer
///     @1 SYNCS.PHASECHK.TRANS64.TRYWAIT P1 <- R10 addr=mbar
///     @1 BRA <- P1
///     @1 LDS R6 <- R9 addr=0                         # the next pointer
///     @1 R2UR UR8 <- R6
/// @1 STG.E <- R2x2 R6; EXIT
/// ```
///
/// `LatencyPerAccess` as for [`gpusim_workloads::ubench::pointer_chase`]: use the pair `passes`, `passes + 1`.
pub fn tma_chase(p: &PointerChase, arch: &Arch) -> Result<Trace, String> {
    p.validate().map_err(|e| format!("tma_chase: {e}"))?;
    let mut ops = OpTable::new();
    let mut a = asm(&mut ops, "tma_chase", 1);
    let mbar = AddrExpr::constant(TMA_MBAR);
    a.op("S2R", &[rg(9)], &[]).op("IMAD.MOV.U32", &[rg(6)], &[]).op("R2UR", &[urg(8)], &[rg(6)]);
    a.mem("SYNCS.EXCH.64", &[], &[urg(4)], mbar);
    a.begin(p.passes + 1);
    let windows = p.windows();
    if windows > 1 {
        a.begin(windows as u32);
    }
    let window_bytes = (p.steps() * p.stride_bytes) as i64;
    for e in p.chain() {
        let g = AddrExpr::constant(p.base_address + e * p.stride_bytes);
        let g = if windows > 1 { g.with(Var::Loop(1), window_bytes) } else { g };
        a.mem("SYNCS.ARRIVE.TRANS64", &[], &[rg(12)], mbar);
        a.bulk("UTMALDG.2D", &[], &[urg(4), urg(8)], g, TMA_BOX);
        a.mem("SYNCS.PHASECHK.TRANS64.TRYWAIT", &[prg(1)], &[rg(10)], mbar);
        a.op("BRA", &[], &[prg(1)]);
        a.mem("LDS", &[rg(6)], &[rg(9)], AddrExpr::constant(0));
        a.op("R2UR", &[urg(8)], &[rg(6)]);
    }
    if windows > 1 {
        a.end();
    }
    a.end();
    a.mem("STG.E", &[], &[rr(2, 2), rg(6)], AddrExpr::constant(p.sink_address()));
    a.op("EXIT", &[], &[]);
    let prog = a.finish();
    let mut info = KernelInfo::new(0, "tma_chase", Dim3::ONE, Dim3::new(32, 1, 1));
    info.regs_per_thread = 16;
    info.smem_bytes = (TMA_MBAR + 8) as u32;
    info.sm_version = arch.compute_capability.max(90);
    Ok(one_kernel(info, ops, vec![prog], vec![0]))
}

/// A dependent chain of `steps` (a multiple of 8) `mnemonic R2 <- R2 R3 R4` in one warp.
pub fn inst_chain(mnemonic: &str, steps: u32, arch: &Arch) -> Result<Trace, String> {
    if steps < 8 || !steps.is_multiple_of(8) {
        return Err(format!("inst_chain: steps = {steps} must be a positive multiple of 8"));
    }
    let mut ops = OpTable::new();
    let mut a = asm(&mut ops, "chain", u32::MAX);
    a.op("IMAD.MOV.U32", &[rg(2)], &[]).op("IMAD.MOV.U32", &[rg(3)], &[]).op("IMAD.MOV.U32", &[rg(4)], &[]);
    a.begin(steps / 8);
    for _ in 0..8 {
        a.op(mnemonic, &[rg(2)], &[rg(2), rg(3), rg(4)]);
    }
    a.end();
    a.mem("STG.E", &[], &[rr(6, 2), rg(2)], AddrExpr::constant(0x7f00_0000_0000));
    a.op("EXIT", &[], &[]);
    let prog = a.finish();
    let mut info = KernelInfo::new(0, "inst_chain", Dim3::ONE, Dim3::new(32, 1, 1));
    info.regs_per_thread = 16;
    info.sm_version = arch.compute_capability;
    Ok(one_kernel(info, ops, vec![prog], vec![0]))
}

/// Threads per CTA of [`l1_read`].
pub const L1_READ_THREADS: u32 = 256;

/// L1 read bandwidth (RRZE `gpu-cache` at a small data set): `ctas_per_sm · sm.count` CTAs of
/// 256 threads; every CTA reads the same `footprint_bytes` (rounded to 4 KiB, one
/// `LDG.E.128` per thread) `iterations` times, consuming each load with two `FFMA`s:
///
/// ```text
/// loop iterations
///   per 4 KiB slice j:  LDG.E.128 R(8+4(j%4))x4 <- R2x2 addr=base + 4096·j + 512·warp
///                       FFMA R4 <- R(8+4(j%4)) R(9+4(j%4)) R4; FFMA R5 <- ... R5
/// end
/// ```
///
/// Bytes read: `ctas · 256 · 16 · slices · iterations`. Each SM's first pass fills its L1 from
/// the L2; take the difference of two lengths for the steady state.
pub fn l1_read(footprint_bytes: u64, iterations: u32, ctas_per_sm: u32, arch: &Arch) -> (Trace, u64) {
    let slice = L1_READ_THREADS as u64 * 16;
    let slices = (footprint_bytes / slice).max(1);
    let mut ops = OpTable::new();
    let mut a = asm(&mut ops, "l1_read", u32::MAX);
    a.op("S2R", &[rg(0)], &[]).op("S2R", &[rg(1)], &[]).op("IMAD", &[rg(0)], &[rg(1), rg(0)]);
    a.op("IMAD.WIDE", &[rr(2, 2)], &[rg(0)]).op("CS2R", &[rr(4, 2)], &[]);
    a.begin(iterations);
    for j in 0..slices {
        let d = 8 + 4 * (j % 4) as u8;
        let addr = AddrExpr::constant(0x7f00_0000_0000 + slice * j).with(Var::Warp, 512);
        a.mem("LDG.E.128", &[rr(d, 4)], &[rr(2, 2)], addr);
        a.op("FFMA", &[rg(4)], &[rg(d), rg(d + 1), rg(4)]).op("FFMA", &[rg(5)], &[rg(d + 2), rg(d + 3), rg(5)]);
    }
    a.end();
    a.op("FSETP.NEU.AND", &[prg(0)], &[rg(4), rg(5)]).op("EXIT", &[], &[]);
    let prog = a.finish();
    let ctas = ctas_per_sm * arch.sm.count;
    let mut info = KernelInfo::new(0, "l1_read", Dim3::new(ctas, 1, 1), Dim3::new(L1_READ_THREADS, 1, 1));
    info.regs_per_thread = 24;
    info.sm_version = arch.compute_capability;
    let warps = L1_READ_THREADS / 32;
    let bytes = ctas as u64 * L1_READ_THREADS as u64 * 16 * slices * iterations as u64;
    (one_kernel(info, ops, vec![prog], vec![0; warps as usize]), bytes)
}

/// A trace with `t`'s single kernel twice (same stream: the second starts after the first).
pub(super) fn twice(t: &Trace) -> Trace {
    let mut k2 = t.kernels[0].clone();
    k2.info.id = 1;
    k2.info.name = format!("{}_timed", k2.info.name);
    Trace { kernels: vec![t.kernels[0].clone(), k2] }
}

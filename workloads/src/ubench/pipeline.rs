//! The multistage copy pipeline: global → shared copies of tile `t + stages − 1` (cp.async) or
//! `t + stages` (TMA) in flight while tile `t` is computed on.
//!
//! Each CTA streams `tiles` tiles of `tile_bytes` from its own region of global memory through
//! `stages` shared-memory buffers (tile `t` in stage `t % stages`). The SASS follows what nvcc 13.5
//! emits for the textbook loops (sm_80 `cp.async`, sm_90a TMA with mbarriers):
//!
//! **cp.async** (every warp runs the same program; `n = tile_bytes / (16 · threads)`):
//!
//! ```text
//! prologue, tiles 0..stages-2:   n × LDGSTS.E.BYPASS.128 <- R9 R2x2 addr=src+tile·B+16·tid+k·16·threads
//!                                LDGDEPBAR
//! tile t:  n × LDGSTS.E.BYPASS.128 (tile t+stages-1, when it exists)
//!          LDGDEPBAR                         # an empty group when nothing was issued (CUTLASS)
//!          DEPBAR.LE SB0 imm=stages-1        # tile t has landed
//!          BAR.SYNC.DEFER_BLOCKING
//!          n × LDS.128 (stage t % stages)    # the warp's share of the tile
//!          loop compute/8: 8 × FFMA          # independent chains on the loaded registers
//!          BAR.SYNC.DEFER_BLOCKING           # the stage may be overwritten
//!          IADD3; ISETP.NE.AND P2; BRA       # loop control
//! ```
//!
//! With `stages = 1` the wait is `DEPBAR.LE SB0, 0` right after the copy is issued: the whole copy
//! latency is exposed every tile.
//!
//! **TMA** (warp 0 lane 0 is the elected producer; its instructions carry the mask `0x1`):
//!
//! ```text
//! warp 0:   @1 SYNCS.EXCH.64 addr=mbar(s)              # mbarrier.init, s in 0..stages
//!           BAR.SYNC.DEFER_BLOCKING                    # (all warps)
//! warp 0:   @1 SYNCS.ARRIVE.TRANS64 <- R12 addr=mbar(s)  # expect_tx(tile_bytes)
//!           @1 UTMALDG.2D <- UR4 UR8 addr=src+s·B bytes=B  # tiles 0..stages-1
//! tile t:   SYNCS.PHASECHK.TRANS64.TRYWAIT P1 <- R10 addr=mbar(t % stages)
//!           BRA <- P1                                  # to the retry loop, not taken
//!           n × LDS.128 (stage t % stages); loop compute/8: 8 × FFMA
//!           BAR.SYNC.DEFER_BLOCKING                    # everyone is done with the stage
//! warp 0:   @1 SYNCS.ARRIVE.TRANS64; @1 UTMALDG.2D     # tile t+stages into the freed stage
//!           IADD3; ISETP.NE.AND P2; BRA
//! ```
//!
//! The mbarrier's shared-memory address rides on the `SYNCS` instructions as their memory operand
//! (shared offset `stages · tile_bytes + 8 · stage`); a `UTMALDG` completes on the mbarrier of the
//! `SYNCS.ARRIVE.TRANS64` just before it in the same warp, as in the real code. The TMA box is one
//! contiguous run of `tile_bytes` (a 2-D box whose rows span the tensor's full width).
//!
//! Addresses depend on `t % stages`, which is not affine in a loop counter; the tile loop is
//! therefore unrolled by `stages` (one loop iteration per round of `stages` tiles), followed by the
//! last tiles, which issue no copy, written out. The dynamic instruction stream is that of the
//! real loop.

use std::collections::BTreeMap;

use gpusim_configs::Arch;
use gpusim_isa::{AddrExpr, Dim3, OpTable, Program, Trace, Var};

use super::{Measure, UbenchTrace};
use crate::WorkloadError;
use crate::asm::{Code, info, kernel, p as pred, r, rr, sb, ur};

/// How tiles move from global to shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyEngine {
    /// `cp.async` (`LDGSTS`), every thread copies 16 bytes per instruction; groups and
    /// `cp.async.wait_group` (`LDGDEPBAR`, `DEPBAR.LE SB0`). sm_80 and later.
    CpAsync,
    /// The Tensor Memory Accelerator (`UTMALDG`) issued by one thread, completion on an
    /// mbarrier. sm_90 and later.
    Tma,
}

/// Parameters of [`async_copy_pipeline`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopyPipeline {
    pub engine: CopyEngine,
    /// Shared-memory buffers (1 to 8): copies of `stages − 1` (cp.async) or `stages` (TMA) tiles
    /// ahead are in flight while one tile is computed on.
    pub stages: u32,
    /// Tiles each CTA streams (at least 1).
    pub tiles: u32,
    /// Bytes per tile, a multiple of `16 · threads_per_cta`.
    pub tile_bytes: u32,
    /// Independent FFMAs per warp per tile. The default (2048) keeps a tile's compute longer than
    /// a DRAM copy's latency and than its transfer at each SM's share of the DRAM bandwidth, so
    /// 3 stages can hide the copies and 1 stage cannot.
    pub compute_per_tile: u32,
    /// CTAs in the grid; `None`: one per SM.
    pub ctas: Option<u32>,
    /// Threads per CTA (a multiple of 32, at most 1024).
    pub threads_per_cta: u32,
    /// Address of CTA 0's first tile; CTA `c` streams `tiles · tile_bytes` bytes from
    /// `base + c · tiles · tile_bytes`.
    pub base_address: u64,
}

impl Default for CopyPipeline {
    fn default() -> Self {
        CopyPipeline {
            engine: CopyEngine::CpAsync,
            stages: 3,
            tiles: 16,
            tile_bytes: 16 << 10,
            compute_per_tile: 2048,
            ctas: None,
            threads_per_cta: 128,
            base_address: 0x7f00_0000_0000,
        }
    }
}

impl CopyPipeline {
    /// 16-byte copies (and `LDS.128` reads) per thread per tile.
    pub fn per_thread(&self) -> u32 {
        self.tile_bytes / (16 * self.threads_per_cta)
    }

    /// Shared memory per CTA: the stage buffers, plus one 8-byte mbarrier per stage for TMA.
    pub fn smem_bytes(&self) -> u32 {
        let bars = if self.engine == CopyEngine::Tma { 8 * self.stages } else { 0 };
        self.stages * self.tile_bytes + bars
    }

    /// How many tiles ahead of the one computed on the copies run.
    fn lookahead(&self) -> u32 {
        match self.engine {
            CopyEngine::CpAsync => self.stages - 1,
            CopyEngine::Tma => self.stages,
        }
    }

    /// Checks the parameters against `arch`; [`async_copy_pipeline`] returns this message as its error.
    pub fn validate(&self, arch: &Arch) -> Result<(), String> {
        if !(1..=8).contains(&self.stages) {
            return Err(format!("stages = {} must be between 1 and 8", self.stages));
        }
        if self.tiles == 0 {
            return Err("tiles must be at least 1".into());
        }
        let t = self.threads_per_cta;
        if t == 0 || t > 1024 || !t.is_multiple_of(32) {
            return Err(format!("threads_per_cta = {t} must be a multiple of 32 between 32 and 1024"));
        }
        if self.tile_bytes == 0 || !self.tile_bytes.is_multiple_of(16 * t) {
            return Err(format!(
                "tile_bytes = {} must be a positive multiple of 16 · threads_per_cta = {}",
                self.tile_bytes,
                16 * t
            ));
        }
        if self.per_thread() > 64 {
            return Err(format!(
                "tile_bytes = {} means {} copies per thread per tile; at most 64 (use more threads)",
                self.tile_bytes,
                self.per_thread()
            ));
        }
        let smem = self.stages as u64 * self.tile_bytes as u64 + 64;
        if smem > arch.sm.shared_mem_per_cta.0 {
            return Err(format!(
                "{} stages of {} B need {smem} B of shared memory; a CTA may have {} on {}",
                self.stages, self.tile_bytes, arch.sm.shared_mem_per_cta.0, arch.name
            ));
        }
        if self.engine == CopyEngine::Tma && arch.compute_capability < 90 {
            return Err(format!("TMA needs compute capability 9.0; {} is {}", arch.name, arch.compute_capability));
        }
        if self.ctas == Some(0) {
            return Err("ctas must be at least 1".into());
        }
        let span = self.tiles as u64 * self.tile_bytes as u64 * self.ctas.unwrap_or(arch.sm.count) as u64;
        if self.base_address.checked_add(span).is_none() {
            return Err("base_address + the data streamed overflows the address space".into());
        }
        Ok(())
    }
}

/// Registers.
const TID: u8 = 0;
const CTAID: u8 = 1;
const GPTR: u8 = 2;
const SPTR: u8 = 9;
const PHASE: u8 = 10;
const COUNTER: u8 = 11;
const TX: u8 = 12;
const LDS_DATA: u8 = 16;
const ACC: u8 = 40;

/// A tile index: `konst + per_iter · i0` (per_iter = 0 outside the tile loop).
#[derive(Clone, Copy)]
struct TileRef {
    konst: u64,
    per_iter: u64,
}

/// The copy-pipeline trace: one kernel, `Measure::Cycles` of it.
///
/// # Errors
/// When [`CopyPipeline::validate`] fails.
pub fn async_copy_pipeline(p: &CopyPipeline, arch: &Arch) -> Result<UbenchTrace, WorkloadError> {
    p.validate(arch).map_err(|e| WorkloadError(format!("async_copy_pipeline: {e}")))?;
    Ok(build(p, arch))
}

/// [`async_copy_pipeline`] of checked parameters.
fn build(p: &CopyPipeline, arch: &Arch) -> UbenchTrace {
    let ctas = p.ctas.unwrap_or(arch.sm.count);
    let warps = (p.threads_per_cta / 32) as usize;
    let mut ops = OpTable::new();
    let (programs, default) = match p.engine {
        CopyEngine::CpAsync => (vec![program(p, &mut ops, true)], vec![0; warps]),
        CopyEngine::Tma if warps == 1 => (vec![program(p, &mut ops, true)], vec![0]),
        CopyEngine::Tma => {
            let progs = vec![program(p, &mut ops, true), program(p, &mut ops, false)];
            let mut l = vec![1; warps];
            l[0] = 0;
            (progs, l)
        }
    };
    let (name, sm) = match p.engine {
        CopyEngine::CpAsync => ("cp_async_pipeline", arch.compute_capability.max(80)),
        CopyEngine::Tma => ("tma_pipeline", arch.compute_capability.max(90)),
    };
    let kinfo = info(0, name, Dim3::new(ctas, 1, 1), Dim3::new(p.threads_per_cta, 1, 1), 48, p.smem_bytes(), sm);
    let kt = kernel(kinfo, ops, programs, default, BTreeMap::new());
    let description = format!(
        "{} pipeline: {ctas} CTAs × {} threads, {} tiles of {} B each through {} stage(s) ({} tile(s) in flight \
         ahead), {} FFMAs per warp per tile; compare cycles across stage counts",
        match p.engine {
            CopyEngine::CpAsync => "cp.async (LDGSTS)",
            CopyEngine::Tma => "TMA (UTMALDG + mbarrier)",
        },
        p.threads_per_cta,
        p.tiles,
        p.tile_bytes,
        p.stages,
        p.lookahead(),
        p.compute_per_tile
    );
    UbenchTrace { trace: Trace { kernels: vec![kt] }, description, measure: Measure::Cycles, timed_kernel: 0 }
}

fn program(p: &CopyPipeline, ops: &mut OpTable, producer: bool) -> Program {
    let name = match (p.engine, producer) {
        (CopyEngine::Tma, true) => "producer_consumer",
        (CopyEngine::Tma, false) => "consumer",
        (CopyEngine::CpAsync, _) => "pipeline",
    };
    let mut c = Code::new(ops, name);
    let s = p.stages as u64;
    let t = p.tiles as u64;
    let d = p.lookahead() as u64;
    c.op("S2R", &[r(TID)], &[]).op("S2R", &[r(CTAID)], &[]);
    c.op("IMAD.WIDE", &[rr(GPTR, 2)], &[r(CTAID), r(TID)]).op("IMAD.SHL.U32", &[r(SPTR)], &[r(TID)]);
    c.op("IMAD.MOV.U32", &[r(COUNTER)], &[]);
    match p.engine {
        CopyEngine::CpAsync => {
            for tile in 0..(s - 1).min(t) {
                issue(p, &mut c, TileRef { konst: tile, per_iter: 0 });
                c.op("LDGDEPBAR", &[], &[]);
            }
        }
        CopyEngine::Tma => {
            c.op("IMAD.MOV.U32", &[r(TX)], &[]).op("IMAD.MOV.U32", &[r(PHASE)], &[]);
            if producer {
                c.set_mask(1);
                for stage in 0..s {
                    c.mem("SYNCS.EXCH.64", &[], &[ur(4)], mbar(p, stage));
                }
                c.set_mask(u32::MAX);
            }
            c.op("BAR.SYNC.DEFER_BLOCKING", &[], &[]);
            if producer {
                for tile in 0..s.min(t) {
                    issue(p, &mut c, TileRef { konst: tile, per_iter: 0 });
                }
            }
        }
    }
    // Tiles 0..issuing issue tile t + d; the tile loop covers whole rounds of `stages` of them.
    let issuing = t.saturating_sub(d);
    let rounds = issuing / s;
    if rounds > 0 {
        c.begin(rounds as u32);
        for k in 0..s {
            let next = TileRef { konst: k + d, per_iter: s };
            tile_body(p, &mut c, TileRef { konst: k, per_iter: s }, Some(next), producer);
        }
        c.end();
    }
    for tile in rounds * s..t {
        let next = (tile < issuing).then_some(TileRef { konst: tile + d, per_iter: 0 });
        tile_body(p, &mut c, TileRef { konst: tile, per_iter: 0 }, next, producer);
    }
    c.op("EXIT", &[], &[]);
    c.finish()
}

/// Global address of byte `offset` of tile `tile` of this CTA.
fn global(p: &CopyPipeline, tile: TileRef, offset: u64) -> AddrExpr {
    let tb = p.tile_bytes as u64;
    let e = AddrExpr::constant(p.base_address + tile.konst * tb + offset).with(Var::CtaX, (p.tiles as u64 * tb) as i64);
    if tile.per_iter > 0 { e.with(Var::Loop(0), (tile.per_iter * tb) as i64) } else { e }
}

/// Shared address of the mbarrier of `stage`.
fn mbar(p: &CopyPipeline, stage: u64) -> AddrExpr {
    AddrExpr::constant(p.stages as u64 * p.tile_bytes as u64 + 8 * stage)
}

/// Issues the copy of `tile` (cp.async: every thread's share and the commit; TMA: the elected
/// thread's expect-tx arrive and bulk tensor load).
fn issue(p: &CopyPipeline, c: &mut Code, tile: TileRef) {
    match p.engine {
        CopyEngine::CpAsync => {
            let threads = p.threads_per_cta as u64;
            for k in 0..p.per_thread() as u64 {
                let addr = global(p, tile, 16 * threads * k).with(Var::Warp, 512);
                c.mem("LDGSTS.E.BYPASS.128", &[], &[r(SPTR), rr(GPTR, 2)], addr);
            }
        }
        CopyEngine::Tma => {
            let stage = tile.konst % p.stages as u64;
            c.set_mask(1);
            c.mem("SYNCS.ARRIVE.TRANS64", &[], &[r(TX)], mbar(p, stage));
            c.bulk("UTMALDG.2D", &[], &[ur(4), ur(8)], global(p, tile, 0), p.tile_bytes);
            c.set_mask(u32::MAX);
        }
    }
}

fn tile_body(p: &CopyPipeline, c: &mut Code, tile: TileRef, next: Option<TileRef>, producer: bool) {
    let stage = tile.konst % p.stages as u64;
    match p.engine {
        CopyEngine::CpAsync => {
            if let Some(n) = next {
                issue(p, c, n);
            }
            c.op("LDGDEPBAR", &[], &[]);
            c.op_imm("DEPBAR.LE", &[sb(0)], &[], p.stages as i32 - 1);
            c.op("BAR.SYNC.DEFER_BLOCKING", &[], &[]);
            consume(p, c, stage);
            c.op("BAR.SYNC.DEFER_BLOCKING", &[], &[]);
        }
        CopyEngine::Tma => {
            c.mem("SYNCS.PHASECHK.TRANS64.TRYWAIT", &[pred(1)], &[r(PHASE)], mbar(p, stage));
            c.op("BRA", &[], &[pred(1)]);
            consume(p, c, stage);
            c.op("BAR.SYNC.DEFER_BLOCKING", &[], &[]);
            if let (Some(n), true) = (next, producer) {
                issue(p, c, n);
            }
        }
    }
    c.op("IADD3", &[r(COUNTER)], &[r(COUNTER)]).op("ISETP.NE.AND", &[pred(2)], &[r(COUNTER)]);
    c.op("BRA", &[], &[pred(2)]);
}

/// Reads the warp's share of stage `stage` and computes on it.
fn consume(p: &CopyPipeline, c: &mut Code, stage: u64) {
    let threads = p.threads_per_cta as u64;
    for k in 0..p.per_thread() as u64 {
        let addr = AddrExpr::constant(stage * p.tile_bytes as u64 + 16 * threads * k).with(Var::Warp, 512);
        c.mem("LDS.128", &[rr(LDS_DATA + 4 * (k % 4) as u8, 4)], &[r(SPTR)], addr);
    }
    let ffma = |c: &mut Code, j: u8| {
        c.op("FFMA", &[r(ACC + j)], &[r(LDS_DATA + 2 * j), r(LDS_DATA + 2 * j + 1), r(ACC + j)]);
    };
    let n = p.compute_per_tile;
    if n >= 8 {
        c.begin(n / 8);
        for j in 0..8 {
            ffma(c, j);
        }
        c.end();
    }
    for j in 0..(n % 8) as u8 {
        ffma(c, j);
    }
}

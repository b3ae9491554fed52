//! Which inner nests the inner mode may skip in: the looping warps of a persistent CTA must skip
//! alike, or their barriers stop pairing up.
//!
//! The simple case is warps whose main nests and inner nests have the same trips (a
//! FlashAttention-3 producer and its consumers walk the same key blocks). A persistent GEMM's
//! consumers peel the first K block and the last stages out of their K loop, so their inner nest
//! runs one trip fewer than the producer's (31 against 32 at K = 8192, four K blocks per
//! iteration): the two walk the same K blocks, shifted by one, and skipping the same *number* of
//! iterations in both keeps every mbarrier's arrivals and waits paired, provided an iteration of
//! each is the same unit of work. That is checked on the barriers: one flat iteration of every
//! looping warp must touch the same mbarriers (by address) and named barriers (by id) the same
//! number of times. A producer unrolled over twice the stages of its consumers touches each of
//! them twice per iteration and is refused; so is an iteration whose barrier addresses move with
//! a loop counter or a tile parameter (they cannot be told apart without running it).

use gpusim_isa::program::{MAX_LOOP_DEPTH, MAX_PARAMS, NUM_VARS, PARAM_BASE, Var};
use gpusim_isa::{BarrierOperand, LoopNest, Program};

use super::warp_nests;
use crate::timing::{OpKind, OpTiming};

/// Inner trips may differ between looping warps by at most 1/`MAX_TRIP_SPREAD` of the longest
/// (peeled iterations), and then only with the same barrier profile.
const MAX_TRIP_SPREAD: u64 = 8;

/// One looping warp of a CTA, as the inner-mode check sees it.
pub(crate) struct LoopingWarp<'a> {
    pub prog: &'a Program,
    pub params: &'a [i64; MAX_PARAMS],
    /// The warp's variables before its first instruction (CTA coordinate, warp index,
    /// parameters; loop counters 0).
    pub vars: [i64; NUM_VARS],
}

/// The main and inner trips that every looping warp of a CTA can skip alike: `(outer trips,
/// inner trips)`, the inner ones the fewest of any warp (each warp then skips the same number of
/// inner iterations from the same head). `None` when a looping warp has no inner nest, the warps'
/// main nests differ in trips, or their inner nests differ in trips by more than the spread and
/// barrier profile allow (see the module doc); also without any looping warp.
pub(crate) fn shared_inner_trips<'a>(
    warps: impl IntoIterator<Item = LoopingWarp<'a>>,
    timing: &[OpTiming],
) -> Option<(u64, u64)> {
    let mut looping: Vec<(LoopingWarp<'a>, LoopNest)> = Vec::new();
    let (mut outer_trips, mut min, mut max) = (None, u64::MAX, 0u64);
    for w in warps {
        let Some((outer, inner)) = warp_nests(w.prog, w.params)? else { continue };
        if *outer_trips.get_or_insert(outer.trips) != outer.trips {
            return None;
        }
        min = min.min(inner.trips);
        max = max.max(inner.trips);
        looping.push((w, inner));
    }
    let outer = outer_trips?;
    if min == max {
        return Some((outer, min));
    }
    if (max - min).saturating_mul(MAX_TRIP_SPREAD) > max {
        return None;
    }
    let mut profiles = looping.iter().map(|(w, inner)| barrier_profile(w, inner, timing));
    let first = profiles.next()??;
    for p in profiles {
        if p? != first {
            return None;
        }
    }
    Some((outer, min))
}

/// A barrier an instruction touches: an mbarrier by address, a named barrier by id.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum BarrierKey {
    Mbarrier(u64),
    Named(u8),
}

/// How often one flat iteration of `inner` touches each barrier (arrivals, waits and syncs
/// alike), sorted by barrier. `None` when an mbarrier's address moves with a loop counter or a
/// tile parameter.
fn barrier_profile(w: &LoopingWarp<'_>, inner: &LoopNest, timing: &[OpTiming]) -> Option<Vec<(BarrierKey, u64)>> {
    let mut counts: Vec<(BarrierKey, u64)> = Vec::new();
    let mut movable = false;
    w.prog.for_each_in_nest_body(w.params, inner, 1, |inst, n| {
        let Some(t) = timing.get(inst.op as usize) else { return };
        let key = match t.kind {
            OpKind::MbarArrive | OpKind::MbarWait => {
                let Some(m) = inst.mem else { return };
                let e = &w.prog.exprs[m.addr as usize];
                let by_loop = (0..MAX_LOOP_DEPTH).any(|d| e.coef[Var::Loop(d as u8).index()] != 0);
                let by_tile = (0..MAX_PARAMS).any(|k| e.coef[PARAM_BASE + k] != 0 && w.prog.is_tile_param(k));
                movable |= by_loop || by_tile;
                BarrierKey::Mbarrier(e.eval(&w.vars))
            }
            OpKind::BarrierSync | OpKind::BarrierArrive => BarrierKey::Named(BarrierOperand::from_imm(inst.imm).id),
            _ => return,
        };
        match counts.iter_mut().find(|(k, _)| *k == key) {
            Some((_, c)) => *c += n,
            None => counts.push((key, n)),
        }
    });
    if movable {
        return None;
    }
    counts.sort_unstable();
    Some(counts)
}

#[cfg(test)]
mod tests {
    use gpusim_isa::kernel::OpTable;
    use gpusim_isa::program::{AddrExpr, Inst, Lanes, ProgramBuilder};
    use gpusim_isa::{Cursor, OpId};

    use super::*;

    /// The op ids and their timing on H100.
    struct Ops {
        wait: OpId,
        arrive: OpId,
        mma: OpId,
        timing: Vec<OpTiming>,
    }

    fn ops() -> Ops {
        let mut t = OpTable::new();
        let wait = t.intern("SYNCS.PHASECHK.TRANS64.TRYWAIT").unwrap();
        let arrive = t.intern("SYNCS.ARRIVE.TRANS64.RED.A1T0").unwrap();
        let mma = t.intern("HGMMA.64x256x16.F32.BF16").unwrap();
        let arch = gpusim_configs::load_preset("h100-sxm5-80gb").unwrap();
        let timing = t.iter().map(|(_, d)| crate::timing::resolve(d, &arch)).collect();
        Ops { wait, arrive, mma, timing }
    }

    /// A persistent warp: 4 tiles, each an inner loop of `trips` iterations that touch the
    /// `stages` mbarriers at 0x100, 0x108, ... (`per_stage` times each: wait then arrive) around
    /// an MMA, after `peeled` iterations' worth of the same outside the loop, then an epilogue.
    fn warp(o: &Ops, trips: u32, stages: u64, per_stage: u32, peeled: u32) -> gpusim_isa::Program {
        let mut b = ProgramBuilder::new("w");
        b.begin_loop(4).unwrap();
        let iteration = |b: &mut ProgramBuilder| {
            for s in 0..stages {
                for _ in 0..per_stage {
                    let at = AddrExpr::constant(0x100 + 8 * s);
                    b.mem_inst(Inst::new(o.wait), at, Lanes::Stride(0), 0);
                    b.inst(Inst::new(o.mma));
                    b.mem_inst(Inst::new(o.arrive), at, Lanes::Stride(0), 0);
                }
            }
        };
        for _ in 0..peeled {
            iteration(&mut b);
        }
        b.begin_loop(trips).unwrap();
        iteration(&mut b);
        b.end_loop().unwrap();
        // The epilogue.
        b.inst(Inst::new(o.mma));
        b.end_loop().unwrap();
        b.finish().unwrap()
    }

    fn trips(o: &Ops, progs: &[gpusim_isa::Program]) -> Option<(u64, u64)> {
        let params: Vec<_> = progs.iter().enumerate().map(|(w, p)| p.eval_params([0; 3], w as u32)).collect();
        let warps = progs.iter().zip(&params).enumerate().map(|(w, (prog, params))| LoopingWarp {
            prog,
            params,
            vars: Cursor::new(prog, [0; 3], w as u32).vars(),
        });
        shared_inner_trips(warps, &o.timing)
    }

    #[test]
    fn warps_skip_alike_when_an_iteration_is_the_same_unit_of_work() {
        let o = ops();
        // Same trips: no barrier check needed.
        assert_eq!(trips(&o, &[warp(&o, 32, 4, 1, 0), warp(&o, 32, 4, 1, 0)]), Some((4, 32)));
        // A consumer that peels an iteration: the fewest trips, as every warp touches every
        // barrier once per iteration.
        assert_eq!(trips(&o, &[warp(&o, 32, 4, 1, 0), warp(&o, 31, 4, 1, 1)]), Some((4, 31)));
        // A producer unrolled over twice the stages per iteration: refused, though its trips
        // are within the spread of the other's.
        assert_eq!(trips(&o, &[warp(&o, 30, 4, 2, 0), warp(&o, 31, 4, 1, 1)]), None);
        // Trips too far apart.
        assert_eq!(trips(&o, &[warp(&o, 32, 4, 1, 0), warp(&o, 16, 4, 1, 16)]), None);
    }
}

//! Loop-mode sampling on the SM ([`crate::sample`]): how far each resident CTA's warps are in
//! their main loop nests, and making them all skip the same iterations.

use std::sync::Arc;

use gpusim_isa::program::MAX_PARAMS;
use gpusim_isa::{LoopNest, Program};

use super::Sm;
use super::warps::Phase;
use crate::sample::{LoopingWarp, shared_inner_trips, warp_nests};
use crate::timing::OpTiming;

impl Sm {
    /// Where the warps of CTA slot `cs` stand in their main loop nests: the nest's flat trips
    /// and the first iteration none of them has begun (skipped iterations count). `None` when
    /// the CTA cannot skip: a warp has left its nest (or exited after it), has yet to reach an
    /// earlier skip's jump, or its warps' nests differ in length. Warps without a loop (an idle
    /// producer) do not count.
    fn cta_loop_position(&self, cs: usize) -> Option<(u64, u64)> {
        let c = &self.ctas[cs];
        let mut trips = None;
        let mut next = 0u64;
        for &slot in &c.slots {
            let s = slot as usize;
            let Some(prog) = self.w.program[s].as_deref() else { continue };
            let cur = &self.w.cursor[s];
            let Some(nest) = prog.loop_nest(cur.params()) else { continue };
            if *trips.get_or_insert(nest.trips) != nest.trips {
                return None;
            }
            if self.w.phase[s] == Phase::Draining || self.w.phase[s] == Phase::Free || cur.skip_pending() {
                return None;
            }
            next = next.max(cur.nest_iteration(&nest)? + 1);
        }
        trips.map(|t| (t, next))
    }

    /// The most iterations every resident CTA of kernel `kidx` could skip, keeping
    /// `tail_eighths`/8 of its loop (at least one iteration) in detail after the skip; 0 when
    /// one of them cannot skip; `u64::MAX` with none resident.
    pub(crate) fn loop_skip_room(&self, kidx: u32, tail_eighths: u32) -> u64 {
        let mut room = u64::MAX;
        for cs in 0..self.ctas.len() {
            if !self.ctas[cs].active || self.ctas[cs].kernel != kidx {
                continue;
            }
            let Some((trips, next)) = self.cta_loop_position(cs) else { return 0 };
            let tail = (trips * tail_eighths as u64 / 8).max(1);
            room = room.min(trips.saturating_sub(next + tail));
        }
        room
    }

    /// Makes every warp of every resident CTA of kernel `kidx` skip `count` iterations of its
    /// main loop nest, from the first iteration none of its CTA's warps has begun; calls
    /// `skipped(program, params, nest)` for each warp that will skip. The caller checked
    /// [`Sm::loop_skip_room`].
    pub(crate) fn skip_loop_iterations(
        &mut self,
        kidx: u32,
        count: u64,
        skipped: &mut dyn FnMut(&Program, &[i64; MAX_PARAMS], &LoopNest),
    ) {
        for cs in 0..self.ctas.len() {
            if !self.ctas[cs].active || self.ctas[cs].kernel != kidx {
                continue;
            }
            let Some((_, from)) = self.cta_loop_position(cs) else { continue };
            for i in 0..self.ctas[cs].slots.len() {
                let s = self.ctas[cs].slots[i] as usize;
                let Some(prog) = self.w.program[s].clone() else { continue };
                let cur = &mut self.w.cursor[s];
                let Some(nest) = prog.loop_nest(cur.params()) else { continue };
                cur.skip_iterations(&nest, from, from + count);
                skipped(&prog, cur.params(), &nest);
            }
        }
    }
}

/// Told, for each warp that will skip, its program, parameters, nest and the flat iterations
/// it skips.
pub(crate) type SkippedBody<'a> = dyn FnMut(&Arc<Program>, &[i64; MAX_PARAMS], &LoopNest, u64) + 'a;

impl Sm {
    /// Iterations-mode sampling: makes every looping warp of CTA slot `cs` run flat iterations
    /// `0..head` of its longest loop nest ([`Program::longest_nest`]), skip to `trips - tail`
    /// and run the rest; calls `skipped(program, params, nest, count)` for each warp that skips.
    /// Returns the nest (of its first looping warp), the head run (`head`, or less when the
    /// loop is shorter than `head + tail`: it then runs whole, its skip rule only naming the
    /// nest for [`Sm::cta_iteration`]) and the iterations skipped; `None`, skipping nothing,
    /// when its looping warps' nests differ in depth or trips (a producer warp and its
    /// consumers run different programs, but walk the same key blocks) or the loop has no
    /// iteration before its tail. Warps without a loop (an idle producer) skip nothing. Called
    /// right after [`Sm::launch`], before any warp has issued.
    pub(crate) fn skip_cta_iterations(
        &mut self,
        cs: u16,
        head: u64,
        tail: u64,
        skipped: &mut SkippedBody<'_>,
    ) -> Option<(LoopNest, u64, u64)> {
        let c = &self.ctas[cs as usize];
        let mut shared: Option<LoopNest> = None;
        for &slot in &c.slots {
            let s = slot as usize;
            let prog = self.w.program[s].as_deref()?;
            let Some(nest) = prog.longest_nest(self.w.cursor[s].params()) else { continue };
            match &shared {
                None => shared = Some(nest),
                Some(n) if n.trips == nest.trips && n.levels == nest.levels => {}
                Some(_) => return None,
            }
        }
        let nest = shared?;
        let head = head.min(nest.trips.saturating_sub(tail));
        if head == 0 {
            return None;
        }
        let count = nest.trips - tail - head;
        for i in 0..self.ctas[cs as usize].slots.len() {
            let s = self.ctas[cs as usize].slots[i] as usize;
            let Some(prog) = self.w.program[s].clone() else { continue };
            let cur = &mut self.w.cursor[s];
            let Some(own) = prog.longest_nest(cur.params()) else { continue };
            cur.skip_iterations(&own, head, head + count);
            if count > 0 {
                skipped(&prog, cur.params(), &own, count);
            }
        }
        Some((nest, head, count))
    }

    /// The flat iteration (skipped ones counted) that CTA slot `cs` is measured at in the nest
    /// it skips in ([`gpusim_isa::Cursor::skip_nest_iteration`]); `None` once it has left it.
    ///
    /// Warps whose skipped nests begin at the same step are copies of one loop (an Ampere
    /// GEMM's warp columns run programs that differ only in their addresses): they run in
    /// lockstep between barriers, the CTA is at its furthest warp's iteration, and it has left
    /// once any warp has. Warps whose nests begin at different steps are a producer and its
    /// consumers: the CTA is at its slowest looping warp's iteration (a producer runs ahead by
    /// the pipeline's stages while it fills them, and its start would make the rate
    /// optimistic), and it has left when every looping warp has.
    pub(crate) fn cta_iteration(&self, cs: u16) -> Option<u64> {
        let slots = &self.ctas[cs as usize].slots;
        let cursor = |s: u16| &self.w.cursor[s as usize];
        let step = slots.first().map(|&s| cursor(s).skip_nest_step());
        if slots.iter().all(|&s| Some(cursor(s).skip_nest_step()) == step) {
            slots.iter().try_fold(0, |far, &s| cursor(s).skip_nest_iteration().map(|i| far.max(i)))
        } else {
            slots.iter().filter_map(|&s| cursor(s).skip_nest_iteration()).min()
        }
    }

    /// The flat iterations of the longest loop nest of CTA slot `cs` (the most over its
    /// warps; 0 without a loop).
    pub(crate) fn cta_longest_trips(&self, cs: u16) -> u64 {
        let slots = &self.ctas[cs as usize].slots;
        slots
            .iter()
            .filter_map(|&s| {
                let prog = self.w.program[s as usize].as_deref()?;
                prog.longest_nest(self.w.cursor[s as usize].params()).map(|n| n.trips)
            })
            .max()
            .unwrap_or(0)
    }
}

/// What a persistent CTA skips in the inner mode ([`Sm::skip_cta_inner`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct InnerSkip {
    /// The inner nest of the CTA's first looping warp.
    pub inner: LoopNest,
    /// Flat iterations of the outer nest (tiles), those that skip (the last ones), and the
    /// inner iterations each skips.
    pub tiles: u64,
    pub entries: u64,
    pub per_entry: u64,
}

impl Sm {
    /// Inner-mode sampling of a persistent CTA: makes every looping warp of CTA slot `cs` skip
    /// `trips - head - tail` flat iterations of the nest inside its main loop nest's body, from
    /// iteration `head` on, `trips` being the fewest of any of its warps
    /// ([`gpusim_isa::Cursor::skip_inner`]), in every flat iteration of the main nest from
    /// `from` on (the ones before run whole: the sampler measures its rate there), and calls
    /// `skipped(program, params, inner, count)` with the inner iterations each warp skips in
    /// all. `None`, skipping nothing, when its looping warps cannot skip alike
    /// ([`shared_inner_trips`]: their barriers would no longer pair up) or the inner nest leaves
    /// nothing between `head` and `tail`, or the main nest has no iteration from `from` on.
    /// Called right after [`Sm::launch`].
    pub(crate) fn skip_cta_inner(
        &mut self,
        cs: u16,
        head: u64,
        tail: u64,
        from: u64,
        timing: &[OpTiming],
        skipped: &mut SkippedBody<'_>,
    ) -> Option<InnerSkip> {
        // A warp without a program: the CTA cannot be judged.
        let warps: Vec<LoopingWarp<'_>> = self.ctas[cs as usize]
            .slots
            .iter()
            .map(|&slot| {
                let prog = self.w.program[slot as usize].as_deref()?;
                let cur = &self.w.cursor[slot as usize];
                Some(LoopingWarp { prog, params: cur.params(), vars: cur.vars() })
            })
            .collect::<Option<_>>()?;
        let (outer_trips, trips) = shared_inner_trips(warps, timing)?;
        let per_entry = trips.checked_sub(head + tail).filter(|&n| n > 0)?;
        let entries = outer_trips.checked_sub(from).filter(|&n| n > 0)?;
        let mut first = None;
        for i in 0..self.ctas[cs as usize].slots.len() {
            let s = self.ctas[cs as usize].slots[i] as usize;
            let Some(prog) = self.w.program[s].clone() else { continue };
            let cur = &mut self.w.cursor[s];
            let Some(Some((o, n))) = warp_nests(&prog, cur.params()) else { continue };
            cur.skip_inner(&o, &n, head, n.trips - head - per_entry, from);
            skipped(&prog, cur.params(), &n, entries * per_entry);
            first.get_or_insert(n);
        }
        Some(InnerSkip { inner: first?, tiles: outer_trips, entries, per_entry })
    }

    /// The inner-mode progress of CTA slot `cs`'s slowest skipping warp
    /// ([`gpusim_isa::Cursor::inner_progress`]); `None` once one of them has left its main nest.
    /// The slowest, not the furthest: a producer warp runs ahead of its consumers by the
    /// pipeline's stages while it fills them, so its own start would make the rate optimistic.
    pub(crate) fn cta_inner_slowest(&self, cs: u16) -> Option<(u64, u64)> {
        let mut slowest: Option<(u64, u64)> = None;
        for &slot in &self.ctas[cs as usize].slots {
            let cur = &self.w.cursor[slot as usize];
            if !cur.skips_inner() {
                continue;
            }
            let p = cur.inner_progress()?;
            slowest = Some(slowest.map_or(p, |s| s.min(p)));
        }
        slowest
    }
}

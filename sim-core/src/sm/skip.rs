//! Loop-mode sampling on the SM ([`crate::sample`]): how far each resident CTA's warps are in
//! their main loop nests, and making them all skip the same iterations.

use gpusim_isa::program::MAX_PARAMS;
use gpusim_isa::{LoopNest, Program};

use super::Sm;
use super::warps::Phase;

impl Sm {
    /// Where the warps of CTA slot `cs` stand in their main loop nests: the nest's flat trips
    /// and the first iteration none of them has begun. `None` when the CTA cannot skip: a warp
    /// has left its nest (or exited after it), or its warps' nests differ in length. Warps
    /// without a loop (an idle producer) do not count.
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
            if self.w.phase[s] == Phase::Draining || self.w.phase[s] == Phase::Free {
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

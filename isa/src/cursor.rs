//! Walking a [`Program`]: the position of one warp in its instruction stream.
//!
//! A cursor is a few words of plain data (no allocation), so the simulator keeps one per warp
//! slot and advances it as the warp issues.

use crate::program::{Inst, Lanes, LoopNest, MAX_LOOP_DEPTH, MAX_PARAMS, NUM_VARS, PARAM_BASE, Program, Step, Var};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct LoopFrame {
    /// Index of the `Loop` step.
    start: u32,
    /// Iteration counter (0-based).
    iter: u32,
    count: u32,
}

/// Position in a program plus the loop counters and CTA/warp variables for address evaluation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cursor {
    pc: u32,
    depth: u8,
    frames: [LoopFrame; MAX_LOOP_DEPTH],
    /// Values of `cta.x, cta.y, cta.z, warp` (loop variables are filled in on evaluation).
    fixed: [i64; 4],
    /// Values of the program's parameters `p0..p7` for this CTA and warp.
    params: [i64; MAX_PARAMS],
    /// A pending skip of the main loop nest ([`Cursor::skip_iterations`]): when flat iteration
    /// `skip_at` (never 0) is about to begin, jump to `skip_to`. `skip_at == 0`: none.
    skip_at: u64,
    skip_to: u64,
    skip_step: u32,
    skip_levels: u8,
    /// A skip repeated at every entry of an inner nest ([`Cursor::skip_inner`]): in each flat
    /// iteration of the outer nest at step `outer_step`, the inner nest at step `inner_step`
    /// (loop frame `inner_depth`, `inner_levels` deep) runs flat iterations `0..inner_head`,
    /// then jumps to `inner_to`, from the outer nest's flat iteration `inner_from` on.
    /// `inner_depth == 0`: none (an inner nest is never at frame 0).
    outer_step: u32,
    inner_step: u32,
    inner_depth: u8,
    inner_levels: u8,
    inner_head: u64,
    inner_to: u64,
    inner_from: u64,
    /// [`Program::tile_levels`]: the loop levels whose counters the tile parameters follow.
    tile_levels: u8,
}

impl Cursor {
    /// A cursor at the start of `prog` for warp `warp` of CTA `cta`; evaluates the program's
    /// per-CTA parameters.
    pub fn new(prog: &Program, cta: [u32; 3], warp: u32) -> Cursor {
        let params = prog.eval_params(cta, warp);
        let tile_levels = if prog.params.is_empty() { 0 } else { prog.tile_levels() };
        Cursor {
            fixed: [cta[0] as i64, cta[1] as i64, cta[2] as i64, warp as i64],
            params,
            tile_levels,
            ..Cursor::default()
        }
    }

    /// Evaluates the tile parameters again after the counter of loop level `d` changed (entered,
    /// advanced or skipped); a no-op unless a parameter follows that level.
    #[inline]
    fn level_changed(&mut self, prog: &Program, d: usize) {
        if self.tile_levels & (1 << d) != 0 {
            let mut v = self.vars();
            for (k, p) in prog.params.iter().take(MAX_PARAMS).enumerate() {
                v[PARAM_BASE + k] = p.eval(&v, &prog.tables);
            }
            self.params.copy_from_slice(&v[PARAM_BASE..]);
        }
    }

    /// The parameter values `p0..p7` (unused ones 0).
    pub fn params(&self) -> &[i64; MAX_PARAMS] {
        &self.params
    }

    /// The next instruction to issue, without moving. Skips loop markers (entering zero-trip
    /// loops skips their body). `None` at the end of the program.
    #[inline]
    pub fn peek<'p>(&mut self, prog: &'p Program) -> Option<&'p Inst> {
        loop {
            match prog.steps.get(self.pc as usize)? {
                Step::Inst(i) => return Some(i),
                Step::Loop { count, end } => {
                    let count = count.resolve(&self.params);
                    if count == 0 {
                        self.pc = end + 1;
                    } else {
                        // Program::check guarantees depth < MAX_LOOP_DEPTH here.
                        let d = self.depth as usize;
                        self.frames[d] = LoopFrame { start: self.pc, iter: 0, count };
                        self.depth += 1;
                        self.pc += 1;
                        self.level_changed(prog, d);
                    }
                }
                Step::EndLoop { .. } => {
                    let d = self.depth as usize - 1;
                    if self.inner_depth != 0 && d + 1 == (self.inner_depth + self.inner_levels) as usize {
                        let id = self.inner_depth as usize;
                        if self.frames[id].start == self.inner_step {
                            let flat = self.frames[id..=d].iter().fold(0u64, |n, f| n * f.count as u64 + f.iter as u64);
                            if flat + 1 == self.inner_head && self.outer_flat() >= self.inner_from {
                                let mut t = self.inner_to;
                                for f in self.frames[id..=d].iter_mut().rev() {
                                    f.iter = (t % f.count as u64) as u32;
                                    t /= f.count as u64;
                                }
                                self.pc = self.frames[d].start + 1;
                                let inner_tiles = self.tile_levels >> id << id;
                                if inner_tiles != 0 {
                                    self.level_changed(prog, inner_tiles.trailing_zeros() as usize);
                                }
                                continue;
                            }
                        }
                    }
                    if self.skip_at != 0 && d + 1 == self.skip_levels as usize && self.frames[0].start == self.skip_step
                    {
                        let flat = self.frames[..=d].iter().fold(0u64, |n, f| n * f.count as u64 + f.iter as u64);
                        if flat + 1 == self.skip_at {
                            // Jump over flat iterations skip_at..skip_to: set every level's
                            // counter to iteration skip_to and run its body.
                            let mut t = self.skip_to;
                            for f in self.frames[..=d].iter_mut().rev() {
                                f.iter = (t % f.count as u64) as u32;
                                t /= f.count as u64;
                            }
                            self.skip_at = 0;
                            self.pc = self.frames[d].start + 1;
                            if self.tile_levels != 0 {
                                self.level_changed(prog, self.tile_levels.trailing_zeros() as usize);
                            }
                            continue;
                        }
                    }
                    let f = &mut self.frames[d];
                    f.iter += 1;
                    if f.iter < f.count {
                        self.pc = f.start + 1;
                        self.level_changed(prog, d);
                    } else {
                        // Leaving the loop: its tile parameters keep their last iteration's
                        // values.
                        self.depth -= 1;
                        self.pc += 1;
                    }
                }
            }
        }
    }

    /// Makes the warp skip flat iterations `from..to` of its main loop nest `nest` (from
    /// [`Program::loop_nest`] with this cursor's parameters): it runs iterations `0..from`, then
    /// `to..`, with loop variables (and so addresses) of the iterations it runs. Ignored unless
    /// `0 < from <= to < nest.trips`; `from == to` skips nothing but names the nest for
    /// [`Cursor::skip_nest_iteration`] (a CTA measured over its whole loop). Every warp of a CTA
    /// that synchronises with the others must skip the same iterations, so that barrier
    /// arrivals and waits still pair up.
    pub fn skip_iterations(&mut self, nest: &LoopNest, from: u64, to: u64) {
        if from == 0 || from > to || to >= nest.trips {
            return;
        }
        // `skip_at == 0`: no jump pending.
        self.skip_at = if from < to { from } else { 0 };
        self.skip_to = to;
        self.skip_step = nest.step;
        self.skip_levels = nest.levels;
    }

    /// Makes the warp skip flat iterations `head..inner.trips - tail` of `inner` in every flat
    /// iteration of `outer` from `from` on: `outer` is the program's main loop nest
    /// ([`Program::loop_nest`]) and `inner` a nest inside its body ([`Program::inner_nest`]),
    /// both with this cursor's parameters. Trip counts never follow loop counters, so every
    /// entry skips the same iterations. Ignored unless `0 < head` and `head + tail <
    /// inner.trips`. As with [`Cursor::skip_iterations`], every warp that synchronises with
    /// others must skip alike.
    pub fn skip_inner(&mut self, outer: &LoopNest, inner: &LoopNest, head: u64, tail: u64, from: u64) {
        let to = inner.trips.saturating_sub(tail);
        if head == 0 || head >= to || outer.levels as usize + inner.levels as usize > MAX_LOOP_DEPTH {
            return;
        }
        self.outer_step = outer.step;
        self.inner_step = inner.step;
        self.inner_depth = outer.levels;
        self.inner_levels = inner.levels;
        self.inner_head = head;
        self.inner_to = to;
        self.inner_from = from;
    }

    /// The outer nest's flat iteration, with a [`Cursor::skip_inner`] rule and inside its
    /// nest's levels.
    fn outer_flat(&self) -> u64 {
        self.frames[..self.inner_depth as usize].iter().fold(0u64, |n, f| n * f.count as u64 + f.iter as u64)
    }

    /// Whether a [`Cursor::skip_iterations`] jump is set and the warp has not reached it yet: a
    /// second skip must wait for it (setting one replaces the pending one).
    pub fn skip_pending(&self) -> bool {
        self.skip_at != 0
    }

    /// Whether a [`Cursor::skip_inner`] rule is set.
    pub fn skips_inner(&self) -> bool {
        self.inner_depth != 0
    }

    /// Where the warp stands against its [`Cursor::skip_inner`] rule: the outer nest's flat
    /// iteration and the inner iterations it has executed in it (the one begun counts, the
    /// skipped ones do not, and there are none before the rule's first outer iteration;
    /// `u64::MAX` once past the inner nest in that iteration). `(0, 0)`
    /// before the outer nest; `None` once it has left it, or without a rule. Meaningful after
    /// a [`Cursor::peek`].
    pub fn inner_progress(&self) -> Option<(u64, u64)> {
        let id = self.inner_depth as usize;
        if id == 0 {
            return None;
        }
        let depth = self.depth as usize;
        if depth == 0 || self.frames[0].start != self.outer_step {
            let before = if depth == 0 { self.pc <= self.outer_step } else { self.frames[0].start < self.outer_step };
            return before.then_some((0, 0));
        }
        if depth < id {
            // Only between the levels of a perfectly nested outer nest, never after a peek.
            return None;
        }
        let outer = self.outer_flat();
        let levels = self.inner_levels as usize;
        let inner = if depth >= id + levels && self.frames[id].start == self.inner_step {
            let pos = self.frames[id..id + levels].iter().fold(0u64, |n, f| n * f.count as u64 + f.iter as u64);
            if pos >= self.inner_to && outer >= self.inner_from { pos - (self.inner_to - self.inner_head) } else { pos }
        } else {
            // In the outer body around the inner nest: before it, or after it.
            let at = if depth == id { self.pc } else { self.frames[id].start };
            if at <= self.inner_step { 0 } else { u64::MAX }
        };
        Some((outer, inner))
    }

    /// The flat iteration of `nest` the warp is in (0 while still before the nest), or `None`
    /// once it has left the nest. Meaningful after a [`Cursor::peek`] (which steps over loop
    /// markers).
    pub fn nest_iteration(&self, nest: &LoopNest) -> Option<u64> {
        self.iteration_of(nest.step, nest.levels)
    }

    /// [`Cursor::nest_iteration`] of the nest the last [`Cursor::skip_iterations`] named (its
    /// flat iteration counts the skipped ones); `None` without one.
    pub fn skip_nest_iteration(&self) -> Option<u64> {
        if self.skip_levels == 0 {
            return None;
        }
        self.iteration_of(self.skip_step, self.skip_levels)
    }

    /// The first step of the nest the last [`Cursor::skip_iterations`] named; `None` without
    /// one.
    pub fn skip_nest_step(&self) -> Option<u32> {
        (self.skip_levels != 0).then_some(self.skip_step)
    }

    fn iteration_of(&self, step: u32, levels: u8) -> Option<u64> {
        let levels = levels as usize;
        if self.depth as usize >= levels && self.frames[0].start == step {
            return Some(self.frames[..levels].iter().fold(0u64, |n, f| n * f.count as u64 + f.iter as u64));
        }
        // Before the nest: at top level before its step, or in an earlier top-level loop.
        let before = if self.depth == 0 { self.pc <= step } else { self.frames[0].start < step };
        before.then_some(0)
    }

    /// The index in the program's steps of the instruction the last [`Cursor::peek`] returned:
    /// a static position, the same in every iteration of a loop (a trace writer's PC).
    #[inline]
    pub fn step(&self) -> u32 {
        self.pc
    }

    /// Moves past the instruction returned by the last [`Cursor::peek`].
    #[inline]
    pub fn advance(&mut self) {
        self.pc += 1;
    }

    /// The variable values for address evaluation at the current position.
    #[inline]
    pub fn vars(&self) -> [i64; NUM_VARS] {
        let mut v = [0i64; NUM_VARS];
        v[..4].copy_from_slice(&self.fixed);
        v[PARAM_BASE..].copy_from_slice(&self.params);
        for d in 0..self.depth as usize {
            v[Var::Loop(d as u8).index()] = self.frames[d].iter as i64;
        }
        v
    }

    /// The address of each active lane of `inst`'s memory operand, written into `out` by lane
    /// index (inactive lanes are left untouched). Returns false when the instruction has no
    /// memory operand.
    #[inline]
    pub fn lane_addresses(&self, prog: &Program, inst: &Inst, out: &mut [u64; 32]) -> bool {
        let Some(m) = inst.mem else { return false };
        let base = prog.exprs[m.addr as usize].eval(&self.vars());
        let mut mask = inst.mask;
        match m.lanes {
            Lanes::Stride(s) => {
                while mask != 0 {
                    let l = mask.trailing_zeros();
                    out[l as usize] = base.wrapping_add((s as i64 * l as i64) as u64);
                    mask &= mask - 1;
                }
            }
            Lanes::Offsets { start } => {
                let mut k = start as usize;
                while mask != 0 {
                    let l = mask.trailing_zeros();
                    out[l as usize] = base.wrapping_add(prog.lane_offsets[k] as u64);
                    k += 1;
                    mask &= mask - 1;
                }
            }
        }
        true
    }

    /// The evaluated base address of `inst`'s memory operand.
    #[inline]
    pub fn base_address(&self, prog: &Program, inst: &Inst) -> Option<u64> {
        inst.mem.map(|m| prog.exprs[m.addr as usize].eval(&self.vars()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::{AddrExpr, CtaParam, Inst, ProgramBuilder};

    #[test]
    fn walks_nested_loops_and_evaluates_addresses() {
        let mut b = ProgramBuilder::new("p");
        b.inst(Inst::new(0));
        b.begin_loop(3).unwrap();
        b.begin_loop(2).unwrap();
        let e = AddrExpr::constant(1000).with(Var::Loop(0), 100).with(Var::Loop(1), 10).with(Var::CtaX, 7);
        b.mem_inst(Inst::new(1), e, Lanes::Stride(4), 0);
        b.end_loop().unwrap();
        b.end_loop().unwrap();
        b.begin_loop(0).unwrap();
        b.inst(Inst::new(9));
        b.end_loop().unwrap();
        b.inst(Inst::new(2));
        let p = b.finish().unwrap();
        assert_eq!(p.dynamic_len(), 1 + 6 + 1);

        let mut c = Cursor::new(&p, [2, 0, 0], 0);
        let mut seen = Vec::new();
        while let Some(i) = c.peek(&p) {
            let i = *i;
            let mut a = [0u64; 32];
            if c.lane_addresses(&p, &i, &mut a) {
                seen.push((i.op, a[0], a[1]));
            } else {
                seen.push((i.op, 0, 0));
            }
            c.advance();
        }
        let addrs: Vec<u64> = seen.iter().filter(|s| s.0 == 1).map(|s| s.1).collect();
        assert_eq!(addrs, vec![1014, 1024, 1114, 1124, 1214, 1224]);
        assert_eq!(seen.first().unwrap().0, 0);
        assert_eq!(seen.last().unwrap().0, 2);
        assert!(seen.iter().all(|s| s.0 != 9));
        assert_eq!(seen[1].2, seen[1].1 + 4);
    }

    /// A two-level nest (3 × 4 flat iterations, each with an inner loop of 2) skipped from flat
    /// iteration 2 to 9: the warp runs iterations 0, 1, 9, 10, 11 with their own loop variables,
    /// and issues what `loop_nest` says it skips fewer instructions.
    #[test]
    fn tile_parameters_follow_the_loop_counters() {
        // A persistent CTA's tiles are cta.x + 2·i0; p0 is each tile's table entry, p1 = 3·p0.
        let mut b = ProgramBuilder::new("persistent");
        let t = b.add_table(std::sync::Arc::from(vec![10i64, 20, 30, 40]));
        let p0 = b
            .add_param(CtaParam { table: Some(t), ..CtaParam::constant(0).with(Var::CtaX, 1).with(Var::Loop(0), 2) })
            .unwrap();
        let p1 = b.add_param(CtaParam::constant(0).with(Var::Param(p0), 3)).unwrap();
        b.begin_loop(2).unwrap();
        b.begin_loop(2).unwrap();
        b.mem_inst(
            Inst::new(1),
            AddrExpr::constant(0).with(Var::Param(p1), 1).with(Var::Loop(1), 1),
            Lanes::Stride(0),
            0,
        );
        b.end_loop().unwrap();
        b.end_loop().unwrap();
        b.mem_inst(Inst::new(2), AddrExpr::constant(0).with(Var::Param(p0), 1), Lanes::Stride(0), 0);
        let p = b.finish().unwrap();
        assert_eq!(p.tile_levels(), 1);
        assert!(p.is_tile_param(1));
        // The tile loop is the main nest: every tile issues the same instructions.
        let nest = p.loop_nest(&[0; MAX_PARAMS]).expect("the tile loop is a nest");
        assert_eq!((nest.levels, nest.trips, nest.body), (2, 4, 1));
        let mut c = Cursor::new(&p, [1, 0, 0], 0);
        let mut seen = Vec::new();
        while let Some(i) = c.peek(&p) {
            let i = *i;
            seen.push(c.base_address(&p, &i).unwrap());
            c.advance();
        }
        // Tiles 1 and 3 (entries 20 and 40), inner counter added; after the loop p0 keeps its
        // last tile's value.
        assert_eq!(seen, vec![60, 61, 120, 121, 40]);
    }

    #[test]
    fn a_trip_count_may_not_follow_loop_counters() {
        let mut b = ProgramBuilder::new("bad");
        let k = b.add_param(CtaParam::constant(1).with(Var::Loop(0), 1)).unwrap();
        b.begin_loop(2).unwrap();
        b.begin_loop_param(k).unwrap();
        b.inst(Inst::new(0));
        b.end_loop().unwrap();
        b.end_loop().unwrap();
        let e = b.finish().unwrap_err();
        assert!(e.contains("follows loop counters"), "{e}");
    }

    #[test]
    fn skips_flat_iterations_of_the_main_nest() {
        let mut b = ProgramBuilder::new("p");
        b.inst(Inst::new(0));
        b.begin_loop(3).unwrap();
        b.begin_loop(4).unwrap();
        let e = AddrExpr::constant(0).with(Var::Loop(0), 100).with(Var::Loop(1), 10);
        b.mem_inst(Inst::new(1), e, Lanes::Stride(4), 0);
        b.begin_loop(2).unwrap();
        b.inst(Inst::new(2));
        b.end_loop().unwrap();
        b.end_loop().unwrap();
        b.end_loop().unwrap();
        b.inst(Inst::new(3));
        let p = b.finish().unwrap();
        let c0 = Cursor::new(&p, [0, 0, 0], 0);
        let nest = p.loop_nest(c0.params()).expect("a nest");
        assert_eq!((nest.levels, nest.trips, nest.before, nest.body), (2, 12, 1, 3));
        let mut body = 0;
        p.for_each_in_nest_body(c0.params(), &nest, 7, |_, n| body += n);
        assert_eq!(body, 7 * 3);

        let mut c = c0;
        c.skip_iterations(&nest, 2, 9);
        let (mut n, mut addrs) = (0u64, Vec::new());
        while let Some(i) = c.peek(&p) {
            let i = *i;
            if let Some(a) = c.base_address(&p, &i) {
                addrs.push(a);
            }
            c.advance();
            n += 1;
        }
        assert_eq!(addrs, vec![0, 10, 210, 220, 230]);
        assert_eq!(c.nest_iteration(&nest), None, "past the nest");
        let mut c = c0;
        assert_eq!(c.nest_iteration(&nest), Some(0), "before the nest");
        for _ in 0..1 + 3 * 6 {
            c.peek(&p);
            c.advance();
        }
        c.peek(&p);
        assert_eq!(c.nest_iteration(&nest), Some(6));
        assert_eq!(n, p.dynamic_len() - 7 * nest.body);
        // Out-of-range skips are ignored.
        let mut c = c0;
        c.skip_iterations(&nest, 0, 5);
        c.skip_iterations(&nest, 3, 12);
        let mut m = 0;
        while c.peek(&p).is_some() {
            c.advance();
            m += 1;
        }
        assert_eq!(m, p.dynamic_len());
        // A zero-length skip runs everything but names the nest measured.
        let mut c = c0;
        c.skip_iterations(&nest, 4, 4);
        let (mut m, mut seen) = (0, Vec::new());
        while c.peek(&p).is_some() {
            seen.push(c.skip_nest_iteration());
            c.advance();
            m += 1;
        }
        assert_eq!(m, p.dynamic_len());
        assert_eq!(seen[1 + 3 * 6], Some(6));
    }

    /// A persistent kernel's shape: 3 tiles (a two-level tile nest, 3 × 1), each a prologue, a
    /// key-block loop of 10 with a short loop before it, and an epilogue. Skipping inner
    /// iterations 2..7 runs 0, 1, 7, 8, 9 of every tile, with their own loop variables, and
    /// `inner_progress` counts the executed ones.
    #[test]
    fn skips_the_middle_of_an_inner_nest_in_every_tile() {
        let mut b = ProgramBuilder::new("persistent");
        b.inst(Inst::new(0));
        b.begin_loop(3).unwrap();
        b.begin_loop(1).unwrap();
        b.inst(Inst::new(1));
        b.begin_loop(2).unwrap();
        b.inst(Inst::new(5));
        b.end_loop().unwrap();
        b.begin_loop(10).unwrap();
        let e = AddrExpr::constant(0).with(Var::Loop(0), 100).with(Var::Loop(2), 1);
        b.mem_inst(Inst::new(2), e, Lanes::Stride(4), 0);
        b.inst(Inst::new(3));
        b.end_loop().unwrap();
        b.inst(Inst::new(4));
        b.end_loop().unwrap();
        b.end_loop().unwrap();
        b.inst(Inst::new(9));
        let p = b.finish().unwrap();
        let c0 = Cursor::new(&p, [0, 0, 0], 0);
        let outer = p.loop_nest(c0.params()).expect("the tile nest");
        assert_eq!((outer.levels, outer.trips, outer.body), (2, 3, 1 + 2 + 20 + 1));
        let inner = p.inner_nest(c0.params(), &outer).expect("the key-block loop");
        assert_eq!((inner.levels, inner.trips, inner.body, inner.before), (1, 10, 2, 1 + 2));
        let mut skipped = 0;
        p.for_each_in_nest_body(c0.params(), &inner, 3 * 5, |_, n| skipped += n);
        assert_eq!(skipped, 3 * 5 * 2);

        let mut c = c0;
        assert_eq!(c.inner_progress(), None, "no rule yet");
        c.skip_inner(&outer, &inner, 2, 3, 0);
        assert_eq!(c.inner_progress(), Some((0, 0)), "before the tile nest");
        let (mut n, mut addrs, mut progress) = (0u64, Vec::new(), Vec::new());
        while let Some(i) = c.peek(&p) {
            let i = *i;
            if let Some(a) = c.base_address(&p, &i) {
                addrs.push(a);
                progress.push(c.inner_progress().unwrap());
            }
            if i.op == 4 {
                assert_eq!(c.inner_progress().map(|x| x.1), Some(u64::MAX), "past the inner nest");
            }
            c.advance();
            n += 1;
        }
        let tile = |t: u64| [0, 1, 7, 8, 9].map(|k| 100 * t + k);
        assert_eq!(addrs, [tile(0), tile(1), tile(2)].concat());
        let executed = |t: u64| (0..5).map(move |k| (t, k));
        assert_eq!(progress, executed(0).chain(executed(1)).chain(executed(2)).collect::<Vec<_>>());
        assert_eq!(c.inner_progress(), None, "past the tile nest");
        assert_eq!(n, p.dynamic_len() - skipped);
        // From the second tile on: the first runs its inner nest whole.
        let mut c = c0;
        c.skip_inner(&outer, &inner, 2, 3, 1);
        let (mut addrs, mut progress) = (Vec::new(), Vec::new());
        while let Some(i) = c.peek(&p) {
            let i = *i;
            if let Some(a) = c.base_address(&p, &i) {
                addrs.push(a);
                progress.push(c.inner_progress().unwrap());
            }
            c.advance();
        }
        assert_eq!(addrs, [(0..10).collect::<Vec<u64>>(), tile(1).to_vec(), tile(2).to_vec()].concat());
        let whole = (0..10).map(|k| (0, k));
        assert_eq!(progress, whole.chain(executed(1)).chain(executed(2)).collect::<Vec<_>>());
        // Out-of-range rules are ignored.
        for (head, tail) in [(0, 3), (5, 5), (8, 3)] {
            let mut c = c0;
            c.skip_inner(&outer, &inner, head, tail, 0);
            let mut m = 0;
            while c.peek(&p).is_some() {
                c.advance();
                m += 1;
            }
            assert_eq!(m, p.dynamic_len(), "head {head} tail {tail}");
        }
    }

    /// A FlashAttention-2-like program: a 2-trip loop (the masked key blocks) before a 10-trip
    /// one (the unmasked). `loop_nest` finds the first, `longest_nest` the second, counting the
    /// first loop's instructions as before it; a warp in the first loop is before the second.
    #[test]
    fn the_longest_nest_may_follow_a_shorter_loop() {
        let mut b = ProgramBuilder::new("fa2");
        b.inst(Inst::new(0));
        b.begin_loop(2).unwrap();
        b.inst(Inst::new(1));
        b.inst(Inst::new(1));
        b.end_loop().unwrap();
        b.begin_loop(10).unwrap();
        let e = AddrExpr::constant(0).with(Var::Loop(0), 100);
        b.mem_inst(Inst::new(2), e, Lanes::Stride(4), 0);
        b.end_loop().unwrap();
        b.inst(Inst::new(3));
        let p = b.finish().unwrap();
        let c0 = Cursor::new(&p, [0, 0, 0], 0);
        assert_eq!(p.loop_nest(c0.params()).map(|n| n.trips), Some(2));
        let nest = p.longest_nest(c0.params()).expect("a nest");
        assert_eq!((nest.levels, nest.trips, nest.before, nest.body), (1, 10, 5, 1));
        let mut c = c0;
        c.peek(&p);
        c.advance();
        c.peek(&p);
        assert_eq!(c.nest_iteration(&nest), Some(0), "in the earlier loop: before the nest");
        c.skip_iterations(&nest, 3, 8);
        let mut addrs = Vec::new();
        while let Some(i) = c.peek(&p) {
            let i = *i;
            if let Some(a) = c.base_address(&p, &i) {
                addrs.push(a);
            }
            c.advance();
        }
        assert_eq!(addrs, vec![0, 100, 200, 800, 900]);
    }
}

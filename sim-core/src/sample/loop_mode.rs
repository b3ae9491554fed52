//! The loop mode's plan (see the module doc of [`crate::sample`]): a one-wave grid measured by
//! segments of its CTAs' main loop until steady, then skipped in blocks with a measured segment
//! between them. The engine polls it (`Engine::poll_samplers`) and makes the SMs skip.

use gpusim_isa::program::MAX_PARAMS;
use gpusim_isa::{LoopNest, Program};

use super::{Block, KernelSampler, Mark, Phase, Skipped};
use crate::kernel_run::KernelRun;

/// Loop mode's state.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct LoopPlan {
    /// Over every warp placed: instructions before its main loop nest (all of a warp without
    /// one), and of one flat iteration. Milestone `j` (the kernel has run `j` iterations) is
    /// `base + j × body` instructions.
    pub(super) base: u64,
    pub(super) body: u64,
    /// Flat iterations of the longest nest, and how many every CTA skipped in all (0 until
    /// steady).
    pub(super) trips: u64,
    pub(super) skip: u64,
    /// Milestones passed (marks are dropped once steady; this keeps counting).
    passed: u64,
    /// Once steady: blocks still to skip, the next one included.
    blocks_left: u32,
    /// The measured segment (mark index pair) the next block is extrapolated from.
    before: (usize, usize),
    /// A block was skipped and the segment after it (its second window) is not measured yet.
    after_pending: bool,
}

impl LoopPlan {
    fn segment(&self) -> u64 {
        loop_segment(self.trips)
    }
}

/// Loop mode's measurement segment of a loop of `trips` flat iterations: 1/16 of it, at least
/// one iteration (a single iteration of a memory-bound loop is a burst of loads, a wait and a
/// burst of stores).
pub(super) fn loop_segment(trips: u64) -> u64 {
    (trips / 16).max(1)
}

/// Loop mode: three consecutive segments agree (the throughput is steady) when their
/// cycles per instruction differ by at most this fraction of their mean.
const STEADY_TOLERANCE: f64 = 0.02;

impl KernelSampler {
    /// Loop mode, still measuring.
    pub(crate) fn loop_mode(&self) -> bool {
        self.plan.is_some() && matches!(self.phase, Phase::Measuring)
    }

    /// Loop mode: records a milestone each time the kernel's instruction count passes the
    /// equivalent of one more segment of every warp's loop. True when a block is to be skipped
    /// now: first once three consecutive segments after the first (the ramp-up) agree (steady;
    /// gives up at half the loop), then after each later measured segment while blocks are left
    /// (each the segment right after the block before it). The caller then asks
    /// [`KernelSampler::plan_skip`] how many iterations.
    pub(crate) fn poll(&mut self, k: &KernelRun, now: u64) -> bool {
        let Some(plan) = self.plan.as_mut() else { return false };
        let segment = plan.segment();
        let at = plan.base.saturating_add((plan.passed + 1).saturating_mul(segment).saturating_mul(plan.body));
        if !matches!(self.phase, Phase::Measuring) || plan.body == 0 || k.stats.warp_insts < at {
            return false;
        }
        plan.passed += 1;
        self.marks.push(Mark { cycle: now, stats: k.stats.clone() });
        let n = self.marks.len();
        if plan.blocks_left > 0 {
            // Between blocks: the segment after a block is measured; it closes the block before
            // it and opens the next. No re-warm segment: a looping grid's CTAs all skip the same
            // iterations, so the tiles that share data with a measured one run beside it, not
            // in the skipped iterations (the grouped GEMM's segment after a block ran within
            // 1.2% and 2.5% of the same iterations in full detail, no slower). When the next
            // block cannot start yet (a warp behind its CTA has not reached the last jump), the
            // next segment opens it instead. A segment counts in the error estimate once a block
            // is extrapolated from it.
            let w = (n - 2, n - 1);
            if plan.after_pending
                && let Some(b) = self.blocks.last_mut()
            {
                b.windows.push(w);
                self.measured.push(w);
            }
            plan.after_pending = false;
            plan.before = w;
            return true;
        }
        if n >= 4 {
            let cpi = |a: &Mark, b: &Mark| {
                (b.cycle - a.cycle) as f64 / b.stats.warp_insts.saturating_sub(a.stats.warp_insts).max(1) as f64
            };
            let c = [
                cpi(&self.marks[n - 4], &self.marks[n - 3]),
                cpi(&self.marks[n - 3], &self.marks[n - 2]),
                cpi(&self.marks[n - 2], &self.marks[n - 1]),
            ];
            let mean = (c[0] + c[1] + c[2]) / 3.0;
            let (lo, hi) = c.iter().fold((f64::INFINITY, 0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
            if mean > 0.0 && hi - lo <= STEADY_TOLERANCE * mean {
                // The three steady segments are measured; the first block is extrapolated from
                // the last of them (and the segment measured after it), as every later block
                // from one segment on either side.
                self.marks.drain(..n - 4);
                self.measured = vec![(0, 1), (1, 2), (2, 3)];
                plan.before = (2, 3);
                plan.blocks_left = self.opts.measure_waves;
                self.active_sms = k.sm_resident.iter().filter(|r| r.0 > 0).count() as u64;
                return true;
            }
        }
        if n as u64 * segment * 2 >= plan.trips {
            self.cancel();
        }
        false
    }

    /// Loop mode, when [`KernelSampler::poll`] said to skip: the iterations every CTA skips in
    /// this block, given `room`, the most that every CTA could skip keeping its tail in detail
    /// (0 when one cannot skip now). The blocks left share what their measured segments between
    /// them leave, each at least a segment long: a short loop gets fewer blocks. 0: none now.
    pub(crate) fn plan_skip(&mut self, room: u64) -> u64 {
        let Some(plan) = self.plan.as_mut() else { return 0 };
        let segment = plan.segment();
        let share = |left: u64| room.saturating_sub((left - 1) * segment) / left;
        let mut left = (plan.blocks_left as u64).max(1);
        while left > 1 && share(left) < segment {
            left -= 1;
        }
        plan.blocks_left = left as u32;
        share(left)
    }

    /// Loop mode: no block can be skipped now. Before the first (another kernel runs, a CTA
    /// cannot skip) the kernel runs in detail. After it, with `retry` (a CTA cannot skip yet: a
    /// warp behind may not have reached the last jump), the block is tried again a segment
    /// later; otherwise (another kernel runs, a CTA finished, too little loop is left) the
    /// blocks skipped so far are extrapolated and the rest runs in detail.
    pub(crate) fn stop_skipping(&mut self, retry: bool) {
        if self.blocks.is_empty() {
            self.cancel();
        } else if !retry {
            self.phase = Phase::Tail;
        }
    }

    /// Loop mode: tail length, in eighths of the loop.
    pub(crate) fn tail_eighths(&self) -> u32 {
        self.opts.tail_waves
    }

    /// Loop mode: a warp running `prog` with `params` will skip `count` iterations of `nest`.
    pub(crate) fn skip_body(
        &mut self,
        k: &KernelRun,
        prog: &Program,
        params: &[i64; MAX_PARAMS],
        nest: &LoopNest,
        count: u64,
    ) {
        let Some(b) = self.blocks.last_mut() else { return };
        prog.for_each_in_nest_body(params, nest, count, |i, m| b.skipped.count(k, i, m));
    }

    /// Loop mode: a block opens, extrapolated from the segment measured before it (call before
    /// [`KernelSampler::skip_body`]).
    pub(crate) fn open_block(&mut self) {
        if let Some(plan) = self.plan {
            if self.measured.last() != Some(&plan.before) {
                self.measured.push(plan.before);
            }
            self.blocks.push(Block { skipped: Skipped::default(), windows: vec![plan.before] });
        }
    }

    /// Loop mode: every CTA skips `count` more of the (at most) `trips` iterations of its loop
    /// (the block [`KernelSampler::open_block`] opened). After the last block, the tail.
    pub(crate) fn skipping_loops(&mut self, count: u64) {
        let Some(plan) = self.plan.as_mut() else { return };
        plan.skip += count;
        plan.blocks_left = plan.blocks_left.saturating_sub(1);
        plan.after_pending = true;
        if plan.blocks_left == 0 {
            self.phase = Phase::Tail;
        }
    }
}

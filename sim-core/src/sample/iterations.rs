//! Iterations mode: sampling a grid of waves of long CTAs (FlashAttention-2 at long
//! sequences: CTAs looping over hundreds of key blocks), which a persistent loop it is not.
//!
//! Every CTA placed while its kernel runs alone skips the middle of its longest loop nest
//! ([`gpusim_isa::Program::longest_nest`]): it runs its first [`HEAD`] flat iterations and its
//! last [`TAIL`] in detail, all its looping warps skipping the same ones (barriers stay paired:
//! a producer warp and its consumers run different programs but walk the same key blocks, so
//! their nests must agree in depth and trips), and the skipped iterations' instructions are
//! counted exactly. Each CTA's own cycles per iteration are measured on its head, from the
//! start of iteration 1 (the pipeline filled) to the start of iteration `HEAD`, by polling its
//! warps every [`POLL_CYCLES`] ([`Sm::cta_iteration`]: the furthest warp's iteration when they
//! all run one program, the slowest looping warp's when a producer warp fills the pipeline's
//! stages ahead of its consumers and would start the measurement early); a CTA whose head the
//! polls missed takes the mean of the others.
//!
//! A head is not always the loop's rate: the CTAs of a wave start together, and in a
//! memory-bound loop they contend in step until their loads drift apart (the unfused
//! attention's batched P·V GEMM: the first iterations 20% slower than the last, over 20
//! iterations), which shortened CTAs never live long enough to do. So in a grid of at least
//! three waves the second wave is a reference ([`IterSampler::plan_ctas`]): its CTAs run
//! [`REF_HEAD`] iterations before their skip (a shorter loop whole, but its tail), and their rate
//! after the head against their head's rate scales every later CTA's head rate
//! ([`IterSampler::extrapolate`]). The first wave keeps its own: it starts cold and all at once,
//! and its head is measured exactly as in the full run.
//!
//! The time the skipped iterations would have taken is not a constant per CTA: a CTA that runs
//! longer holds its SM slot longer, so the CTAs after it start later, and only the ones on the
//! critical path lengthen the kernel. The sampler replays the grid's dispatch at CTA-slot level
//! (each CTA in launch order takes the slot that frees first) twice: with the durations the
//! detailed run measured, and with each CTA lengthened by its skipped iterations times its own
//! cycles per iteration. The difference of the two makespans is the kernel's extrapolated
//! cycles. The replay is only a model of the dispatch, but the same model on both sides: its
//! error cancels to first order, and the measured part keeps everything the replay leaves out
//! (memory contention, the ramp-up, the tail's drain).
//!
//! A grid of enough waves for the waves mode also skips whole CTAs at dispatch, laid out as
//! the waves mode lays out its blocks ([`IterSampler::plan_ctas`]: warm-up waves, measured
//! waves each followed by a skipped block and re-warm waves, the tail): FlashAttention-2's
//! backward at 16k tokens has 38 waves of 4,096 CTAs, and every detailed CTA still runs its
//! head and tail. A CTA skipped whole enters the full replay with the mean lengthened duration
//! of the detailed CTAs of its class (the trips of its longest nest: a causal grid's CTAs walk
//! from one key block to all of them), or, for a class none of them had, with their mean life
//! less their iterations at the mean rate plus its own iterations at that rate. Its counts are
//! exact, its traffic and stalls extrapolated with the skipped iterations'.
//!
//! The inner mode ([`IterSampler::new_inner`], a persistent grid of one wave) skips instead,
//! in every CTA, the middle of the nest inside the main loop nest, in every flat iteration of
//! it after the first [`REF_TILES`]: each later tile runs the first `HEAD` and last `TAIL`
//! iterations of its key-block (or K) loop. Each CTA's rate is the mean of its skipping tiles'
//! head rates (from the slowest warp), scaled by the ratio of middle to head over the last whole
//! tile of every CTA ([`poll_tiles`]). The replay is the same; with one wave it is the latest
//! CTA's lengthened end.
//!
//! What this does not see: a CTA's rate changing within its skipped iterations beyond what the
//! reference wave's first [`REF_HEAD`] iterations show (its co-resident CTA finishing, the L2
//! working set growing as the CTA walks further through memory), or a drift that differs from
//! wave to wave. tests/sampling.rs bounds the error against full detail.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::sync::Arc;

use gpusim_isa::program::MAX_PARAMS;
use gpusim_isa::{LoopNest, Program};

use super::{SkipMemo, Skipped};
use crate::kernel_run::KernelRun;
use crate::sm::Sm;

/// Flat iterations every CTA runs in detail before its skip: iteration 0 fills the pipeline,
/// iterations 1..HEAD are its measured rate.
pub(crate) const HEAD: u64 = 5;
/// Flat iterations run in detail after the skip: the loop's drain and the epilogue's start.
pub(crate) const TAIL: u64 = 2;
/// The inner mode's tiles (flat iterations of the main nest) that run whole before every later
/// tile skips the middle of its inner nest. Each later tile's skipped middle is extrapolated
/// from its own head, scaled by the ratio of middle to head in the last whole tile, the
/// reference. Not the first tile: all CTAs start it together, cold, and on the persistent H100
/// GEMM at 8192³ its head ran 7% faster than its middle, the later tiles' heads within 2-5% of
/// theirs. A tile's middle also drifts along the tile loop (5% slower from the first tile to the
/// tenth, there), which a rate measured on one tile alone would miss.
pub(crate) const REF_TILES: u64 = 2;
/// Flat iterations the CTAs of the reference wave run before their skip (all of a shorter
/// loop but its tail): their rate over iterations `HEAD..REF_HEAD` against their head's
/// corrects every later CTA's head rate ([`IterSampler::extrapolate`]).
pub(crate) const REF_HEAD: u64 = 4 * HEAD;
/// Reference CTAs needed, with both rates measured, to correct the others' rates.
const MIN_REFERENCE: usize = 8;
/// How often the heads of CTAs being measured are looked at. An iteration of a long loop is
/// thousands of cycles; the polls' offset is the same at both ends of the measured stretch, so
/// it adds noise, not bias.
pub(crate) const POLL_CYCLES: u64 = 64;
/// A grid of enough waves for the waves mode uses the iterations mode only when its first CTA's
/// longest loop has at least this many flat iterations (twice those kept in detail) and the
/// mode would keep a smaller share of the grid in detail ([`super`]'s choice).
pub(crate) const MIN_TRIPS: u64 = 2 * (HEAD + TAIL);

/// The main loop nest of a warp running `prog` with `params` and the nest inside its body:
/// `Some(None)` for a warp without a loop (an idle producer), `None` for a looping warp without
/// an inner nest.
pub(crate) fn warp_nests(prog: &Program, params: &[i64; MAX_PARAMS]) -> Option<Option<(LoopNest, LoopNest)>> {
    let Some(outer) = prog.loop_nest(params) else { return Some(None) };
    let inner = prog.inner_nest(params, &outer)?;
    Some(Some((outer, inner)))
}

/// The flat iterations of the longest loop nest of a CTA whose warps run `warps` at `coord`
/// (the most over its warps; 0 without a loop).
pub(crate) fn longest_trips(warps: &[Arc<Program>], coord: [u32; 3]) -> u64 {
    warps
        .iter()
        .enumerate()
        .filter_map(|(w, p)| {
            let params = p.eval_params(coord, w as u32);
            p.longest_nest(&params).map(|n| n.trips)
        })
        .max()
        .unwrap_or(0)
}

/// Whether the looping warps of a CTA whose warps run `warps` at `coord` share the depth and
/// trips of their longest loop nests, as the iterations mode needs to skip alike in all of them
/// ([`Sm::skip_cta_iterations`]).
pub(crate) fn longest_nests_agree(warps: &[Arc<Program>], coord: [u32; 3]) -> bool {
    let mut shared = None;
    for (w, p) in warps.iter().enumerate() {
        let params = p.eval_params(coord, w as u32);
        let Some(n) = p.longest_nest(&params) else { continue };
        if *shared.get_or_insert((n.levels, n.trips)) != (n.levels, n.trips) {
            return false;
        }
    }
    true
}

/// One CTA of the grid, in placement order.
#[derive(Clone, Debug)]
struct IterCta {
    sm: u32,
    slot: u16,
    placed: u64,
    retired: Option<u64>,
    /// Skipped whole at dispatch (never placed).
    whole: bool,
    /// Flat iterations of its longest loop nest.
    trips: u64,
    /// In a wave measured for the CTAs skipped whole (the one before each skipped block).
    measured: bool,
    /// In the reference wave: runs [`REF_HEAD`] iterations before its skip.
    reference: bool,
    /// What it skips; `None`: nothing.
    skip: Option<CtaSkip>,
    /// Cycle and (executed) iteration of the first poll that saw iteration 1 begun.
    first: Option<(u64, u64)>,
    /// Measured cycles per flat iteration over its head (iterations `1..HEAD`).
    rate: Option<f64>,
    /// A reference CTA: cycle and executed iteration where its head ended, and its cycles per
    /// flat iteration from there to its skip.
    head_end: Option<(u64, u64)>,
    later: Option<f64>,
    /// Inner mode: the tiles' heads and the reference tile's middle ([`TileMarks`]).
    tiles: TileMarks,
}

/// What the inner mode measures of one CTA: the head of each tile that skips (the CTA's
/// `rate` is their mean), and the head and middle of the reference tile (the last whole one),
/// whose ratio scales every head rate ([`IterSampler::extrapolate`]).
#[derive(Clone, Copy, Debug, Default)]
struct TileMarks {
    /// The tile being measured, how far (0: waiting for its iteration 1, 1: for iteration
    /// `HEAD`, 2: for the middle's end, 3: done) and the mark where that stretch began.
    tile: u64,
    stage: u8,
    mark: (u64, u64),
    /// Sum and count of the head rates of the tiles that skip.
    heads: (f64, u32),
    /// The reference tile's head and middle rates.
    reference: (Option<f64>, Option<f64>),
}

impl IterCta {
    /// A CTA skipped whole at dispatch, whose longest nest has `trips` flat iterations.
    fn whole(trips: u64) -> IterCta {
        IterCta {
            sm: 0,
            slot: 0,
            placed: 0,
            retired: None,
            whole: true,
            trips,
            measured: false,
            reference: false,
            skip: None,
            first: None,
            rate: None,
            head_end: None,
            later: None,
            tiles: TileMarks::default(),
        }
    }
}

/// The ratio of the second rates to the first over `pairs` (each a CTA's), and its relative
/// standard error: the spread of `second − ratio × first`. `(1, 0)` with fewer than
/// [`MIN_REFERENCE`] pairs.
fn ratio_estimate(pairs: impl Iterator<Item = (f64, f64)>) -> (f64, f64) {
    let pairs: Vec<(f64, f64)> = pairs.collect();
    if pairs.len() < MIN_REFERENCE {
        return (1.0, 0.0);
    }
    let n = pairs.len() as f64;
    let (head, later) = pairs.iter().fold((0.0, 0.0), |(h, l), &(a, b)| (h + a, l + b));
    if head <= 0.0 {
        return (1.0, 0.0);
    }
    let scale = later / head;
    let resid = pairs.iter().map(|&(h, l)| (l - scale * h) * (l - scale * h)).sum::<f64>() / (n - 1.0);
    let rel = (resid / n).sqrt() / (later / n);
    (scale, rel)
}

/// Inner mode: one poll of CTA `c` whose slowest skipping warp stands at `at` (tile, inner
/// iterations executed in it; [`Sm::cta_inner_slowest`]). From the reference tile on, every
/// tile's head is measured from the start of iteration 1 (the pipeline filled) to the start of
/// iteration `HEAD`, and the reference tile's middle on to the start of iteration `HEAD +
/// per_entry` (what the later tiles skip). A stretch whose start a poll missed is not measured.
/// Whether to poll the CTA again.
fn poll_tiles(c: &mut IterCta, skip: CtaSkip, at: Option<(u64, u64)>, now: u64) -> bool {
    let Some((tile, e)) = at else { return false };
    let reference = REF_TILES - 1;
    if tile < reference {
        return true;
    }
    let m = &mut c.tiles;
    if tile != m.tile {
        m.tile = tile;
        m.stage = 0;
    }
    if e == u64::MAX {
        // Past the inner nest of this tile: wait for the next.
        return true;
    }
    let rate = |(t, from): (u64, u64)| (now - t) as f64 / (e - from).max(1) as f64;
    match m.stage {
        0 if e >= skip.head => m.stage = 3,
        0 if e >= 1 => {
            m.mark = (now, e);
            m.stage = 1;
        }
        1 if e >= skip.head => {
            let r = rate(m.mark);
            if tile == reference {
                m.reference.0 = Some(r);
                m.mark = (now, e);
                m.stage = 2;
            } else {
                m.heads = (m.heads.0 + r, m.heads.1 + 1);
                c.rate = Some(m.heads.0 / m.heads.1 as f64);
                m.stage = 3;
            }
        }
        2 if e >= skip.head + skip.per_entry => {
            m.reference.1 = Some(rate(m.mark));
            m.stage = 3;
        }
        _ => {}
    }
    true
}

/// The iterations a CTA skips.
#[derive(Clone, Copy, Debug)]
struct CtaSkip {
    /// The nest skipped in: the CTA's longest loop nest, or (inner mode) the nest inside its
    /// main nest's body.
    nest: LoopNest,
    /// Flat iterations run before the skip (iterations mode; [`HEAD`] in the inner mode).
    head: u64,
    /// Flat iterations of `nest` skipped in all (inner mode: over every entry), and run.
    count: u64,
    run: u64,
    /// Skipped in one entry of `nest` (`count` but in the inner mode).
    per_entry: u64,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct IterSampler {
    /// The inner mode: every CTA skips the middle of the nest inside its main loop nest, in
    /// every flat iteration of it (a persistent grid's key-block loop in every tile).
    pub(crate) inner: bool,
    ctas: Vec<IterCta>,
    /// Resident CTAs by `(sm, slot)`: their index in `ctas`.
    live: BTreeMap<(u32, u16), usize>,
    /// CTAs whose head is still being measured (the inner mode: every tile's, until the CTA
    /// leaves its main nest).
    measuring: Vec<usize>,
    next_poll: u64,
    /// CTA slots of the whole GPU (one wave).
    pub(crate) slots: u64,
    pub(crate) skipped: Skipped,
    pub(crate) overlapped: bool,
    /// The skipped iterations counted once per program, parameters and count.
    memo: SkipMemo,
    /// A grid of many waves: CTAs skipped whole at dispatch, as ranges `from..to` of the
    /// grid's CTAs in order ([`IterSampler::plan_ctas`]), and CTAs pulled so far.
    skip_ranges: Vec<(u64, u64)>,
    pulled: u64,
    /// The reference wave, as a range of the grid's CTAs in order ([`IterSampler::plan_ctas`]);
    /// empty without one.
    reference: std::ops::Range<u64>,
}

impl IterSampler {
    pub(crate) fn new(slots: u64) -> IterSampler {
        IterSampler { slots: slots.max(1), ..IterSampler::default() }
    }

    /// Lays out the reference wave and the CTAs to skip whole in a grid of `ctas` CTAs, `slots`
    /// of them resident at once (a wave).
    ///
    /// The reference wave is the second, in a grid of at least three waves: its CTAs run
    /// [`REF_HEAD`] iterations before their skip (the first wave starts cold and all at once,
    /// unlike any later one). The CTAs skipped whole are laid out as the waves mode lays out its
    /// blocks ([`super`]): `warmup` waves in detail, then `measure` detailed waves each followed
    /// by a skipped block and `rewarm` detailed waves (but the last), then `tail` full waves and
    /// the partial last wave in detail; none when the grid has too few waves to leave a block.
    /// The reference wave is among the warm-up waves or the first measured one.
    pub(crate) fn plan_ctas(&mut self, ctas: u64, opts: &super::SampleOptions) {
        let o = opts.clamped();
        let (wave, full) = (self.slots, ctas / self.slots);
        if full >= 3 {
            self.reference = wave..2 * wave;
        }
        let m = o.measure_waves as u64;
        let detailed = o.warmup_waves as u64 + m + (m - 1) * o.rewarm_waves as u64 + o.tail_waves as u64;
        let Some(skippable) = full.checked_sub(detailed).filter(|&n| n > 0) else { return };
        let mut at = o.warmup_waves as u64;
        for b in 0..m {
            let n = skippable / m + u64::from(b < skippable % m);
            at += 1;
            if n > 0 {
                self.skip_ranges.push((at * wave, (at + n) * wave));
            }
            at += n + o.rewarm_waves as u64;
        }
    }

    /// Whether the next CTA pulled is to be skipped whole.
    pub(crate) fn skips_next(&self) -> bool {
        self.skip_ranges.iter().any(|&(a, b)| (a..b).contains(&self.pulled))
    }

    /// `cta` of `k` is skipped whole at dispatch; `alone`: its kernel is the only one running.
    pub(crate) fn skip_whole(&mut self, k: &KernelRun, cta: &gpusim_isa::CtaTrace, alone: bool) {
        let coord = cta.coord.as_array();
        for (w, prog) in cta.warps.iter().enumerate() {
            let params = prog.eval_params(coord, w as u32);
            self.memo.add(&mut self.skipped, k, prog, &params, None);
        }
        self.skipped.ctas += 1;
        self.overlapped |= !alone;
        self.pulled += 1;
        self.ctas.push(IterCta::whole(longest_trips(&cta.warps, coord)));
    }

    /// The inner mode's sampler (see the module doc).
    pub(crate) fn new_inner(slots: u64) -> IterSampler {
        IterSampler { inner: true, ..IterSampler::new(slots) }
    }

    /// CTA slot `slot` of SM `sm` was just given a CTA of `k` at `now`. It skips when the
    /// kernel runs `alone`.
    pub(crate) fn placed(&mut self, k: &KernelRun, sm: &mut Sm, slot: u16, now: u64, alone: bool) {
        let in_reference = self.reference.contains(&self.pulled);
        let mut skip = None;
        if alone {
            let (sk, memo) = (&mut self.skipped, &mut self.memo);
            let mut count = |prog: &Arc<Program>, params: &[i64; MAX_PARAMS], nest: &LoopNest, n: u64| {
                memo.add(sk, k, prog, params, Some((nest, n)));
            };
            skip = if self.inner {
                sm.skip_cta_inner(slot, HEAD, TAIL, REF_TILES, &k.timing, &mut count).map(|s| CtaSkip {
                    nest: s.inner,
                    head: HEAD,
                    count: s.entries * s.per_entry,
                    run: s.tiles * s.inner.trips - s.entries * s.per_entry,
                    per_entry: s.per_entry,
                })
            } else {
                // A reference CTA is measured even when its loop is too short to skip anything.
                let head = if in_reference { REF_HEAD } else { HEAD };
                sm.skip_cta_iterations(slot, head, TAIL, &mut count)
                    .filter(|&(_, head, count)| count > 0 || (in_reference && head >= HEAD))
                    .map(|(nest, head, count)| CtaSkip { nest, head, count, run: nest.trips - count, per_entry: count })
            };
        } else if self.skipped.warp_insts > 0 {
            self.overlapped = true;
        }
        let i = self.ctas.len();
        if skip.is_some() {
            self.measuring.push(i);
        }
        let reference = in_reference && skip.is_some();
        // The CTA's class, for the CTAs skipped whole (only those grids need it).
        let trips = if self.skip_ranges.is_empty() { 0 } else { sm.cta_longest_trips(slot) };
        let measured =
            self.skip_ranges.iter().any(|&(from, _)| (from.saturating_sub(self.slots)..from).contains(&self.pulled));
        self.pulled += 1;
        self.ctas.push(IterCta {
            sm: sm.id,
            slot,
            placed: now,
            retired: None,
            whole: false,
            trips,
            measured,
            reference,
            skip,
            first: None,
            rate: None,
            head_end: None,
            later: None,
            tiles: TileMarks::default(),
        });
        self.live.insert((sm.id, slot), i);
    }

    /// The CTA in `slot` of SM `sm` retired at `now`; `alone`: its kernel is the only one
    /// running.
    pub(crate) fn retired(&mut self, sm: u32, slot: u16, now: u64, alone: bool) {
        if let Some(i) = self.live.remove(&(sm, slot)) {
            self.ctas[i].retired = Some(now);
            self.measuring.retain(|&j| j != i);
        }
        if !alone && self.skipped.warp_insts > 0 {
            self.overlapped = true;
        }
    }

    /// Looks at the heads being measured, at most every [`POLL_CYCLES`].
    pub(crate) fn poll(&mut self, now: u64, sms: &[Sm]) {
        if now < self.next_poll || self.measuring.is_empty() {
            return;
        }
        self.next_poll = now + POLL_CYCLES;
        let (ctas, inner) = (&mut self.ctas, self.inner);
        self.measuring.retain(|&i| {
            let c = &mut ctas[i];
            let Some(skip) = c.skip else { return false };
            let sm = &sms[c.sm as usize];
            if inner {
                return poll_tiles(c, skip, sm.cta_inner_slowest(c.slot), now);
            }
            // The CTA's iteration ([`Sm::cta_iteration`]), counted in iterations executed
            // (past the skip, iteration `head + count` is the `head`-th executed).
            let Some(begun) = sm.cta_iteration(c.slot) else { return false };
            let executed = if begun >= skip.head + skip.count { begun - skip.count } else { begun };
            let per_iteration = |(at, from): (u64, u64)| (now - at) as f64 / (executed - from) as f64;
            match (c.first, c.head_end) {
                (None, _) if executed >= HEAD => false,
                (None, _) if executed >= 1 => {
                    c.first = Some((now, executed));
                    true
                }
                (None, _) => true,
                (Some(first), None) if executed >= HEAD => {
                    c.rate = Some(per_iteration(first));
                    // A reference CTA goes on to its skip.
                    c.head_end = Some((now, executed));
                    c.reference && executed < skip.head
                }
                (Some(_), Some(end)) if executed >= skip.head => {
                    c.later = Some(per_iteration(end));
                    false
                }
                (Some(_), _) => true,
            }
        });
    }

    /// Total iterations skipped, and the longest nest's trips with its skip.
    /// Inner mode: per entry of the inner nest.
    pub(crate) fn iterations(&self) -> (u64, u64) {
        self.ctas
            .iter()
            .filter_map(|c| c.skip)
            .fold((0, 0), |(t, s), k| if k.nest.trips > t { (k.nest.trips, k.per_entry) } else { (t, s) })
    }

    /// CTAs whose rate was measured.
    pub(crate) fn measured(&self) -> usize {
        self.ctas.iter().filter(|c| c.rate.is_some()).count()
    }

    /// SMs that ran a CTA of the kernel.
    pub(crate) fn sms_used(&self) -> u64 {
        let mut seen: Vec<u32> = self.ctas.iter().filter(|c| !c.whole).map(|c| c.sm).collect();
        seen.sort_unstable();
        seen.dedup();
        seen.len() as u64
    }

    /// The cycles the skipped iterations and CTAs add to the kernel (see the module doc), and
    /// the relative standard error of the measured rates (the error estimate's spread).
    pub(crate) fn extrapolate(&self, start: u64) -> (u64, f64) {
        let (scale, scale_rel) = self.head_correction();
        // Each CTA's rate: a reference CTA's own after its head; a CTA after the reference
        // wave's start its head's, corrected; a first-wave CTA its head's.
        let rate_of = |(i, c): (usize, &IterCta)| -> Option<f64> {
            if c.reference {
                c.later.or(c.rate)
            } else if i as u64 >= self.reference.start {
                c.rate.map(|r| r * scale)
            } else {
                c.rate
            }
        };
        let rates: Vec<Option<f64>> = self.ctas.iter().enumerate().map(rate_of).collect();
        let measured: Vec<f64> = rates.iter().flatten().copied().collect();
        let n = measured.len() as f64;
        let mean = measured.iter().sum::<f64>() / n.max(1.0);
        let var = if n > 1.0 { measured.iter().map(|r| (r - mean) * (r - mean)).sum::<f64>() / (n - 1.0) } else { 0.0 };
        let rel = if mean > 0.0 { ((var / n) / (mean * mean) + scale_rel * scale_rel).sqrt() } else { 0.0 };
        let duration = |c: &IterCta| c.retired.map_or(0, |r| r.saturating_sub(c.placed));
        let lengthened = |i: usize, c: &IterCta| -> f64 {
            let Some(skip) = c.skip else { return duration(c) as f64 };
            // A CTA whose head the polls missed takes the others' mean; with none measured, its
            // own life per iteration run (an overestimate: it includes the prologue).
            let rate = rates[i].unwrap_or(if mean > 0.0 { mean } else { duration(c) as f64 / skip.run.max(1) as f64 });
            duration(c) as f64 + skip.count as f64 * rate
        };
        // A CTA skipped whole lasts what the CTAs of its class (trips) in the measured waves
        // lasted lengthened, on average; a class none of them had, their mean life less its
        // iterations at the mean rate, plus its own iterations at that rate. As in the waves
        // mode, the warm-up, re-warm and tail waves are left out: the first wave starts cold and
        // all at once, the one after a skipped block reads what the skipped CTAs would have
        // brought into the L2.
        let any_measured = self.ctas.iter().any(|c| c.measured && c.retired.is_some());
        let mut classes: BTreeMap<u64, (f64, u64)> = BTreeMap::new();
        let (mut fixed, mut runs) = (0.0f64, 0u64);
        for (i, c) in self
            .ctas
            .iter()
            .enumerate()
            .filter(|(_, c)| !c.whole && c.retired.is_some() && (c.measured || !any_measured))
        {
            let l = lengthened(i, c);
            let e = classes.entry(c.trips).or_default();
            e.0 += l;
            e.1 += 1;
            fixed += l - mean * c.trips as f64;
            runs += 1;
        }
        let fixed = fixed / runs.max(1) as f64;
        let full = |i: usize, c: &IterCta| -> u64 {
            if !c.whole {
                return lengthened(i, c).round() as u64;
            }
            match classes.get(&c.trips) {
                Some(&(sum, n)) => (sum / n as f64).round() as u64,
                None => (fixed + mean * c.trips as f64).max(0.0).round() as u64,
            }
        };
        let all = self.replay(start, self.ctas.iter().enumerate(), full);
        let detailed = self.replay(start, self.ctas.iter().enumerate().filter(|(_, c)| !c.whole), |_, c| duration(c));
        (all.saturating_sub(detailed), rel)
    }

    /// The factor from a CTA's head rate to its rate over the rest of its loop, and its
    /// relative standard error: over the reference wave's CTAs, their mean rate after their
    /// head against their mean head rate. A loop's first iterations can be slower than the
    /// rest: a memory-bound wave's CTAs start together and contend in step until their loads
    /// drift apart (the unfused attention's batched GEMMs: 20% over 20 iterations), which the
    /// shortened CTAs, never drifting apart, cannot show. `(1, 0)` without enough reference
    /// CTAs measured. In the inner mode, over every CTA's reference tile: its middle's rate
    /// against its head's.
    fn head_correction(&self) -> (f64, f64) {
        if self.inner {
            return ratio_estimate(self.ctas.iter().filter_map(|c| Some((c.tiles.reference.0?, c.tiles.reference.1?))));
        }
        ratio_estimate(self.ctas.iter().filter(|c| c.reference).filter_map(|c| Some((c.rate?, c.later?))))
    }

    /// The makespan of the grid dispatched in order onto `slots` CTA slots freed at `start`,
    /// each CTA taking `time(index, cta)` cycles (`index` in the grid's order).
    fn replay<'a>(
        &self,
        start: u64,
        ctas: impl Iterator<Item = (usize, &'a IterCta)>,
        time: impl Fn(usize, &IterCta) -> u64,
    ) -> u64 {
        let mut free: BinaryHeap<Reverse<u64>> =
            (0..self.slots.min(self.ctas.len() as u64)).map(|_| Reverse(start)).collect();
        let mut end = start;
        for (i, c) in ctas {
            let Reverse(at) = free.pop().unwrap_or(Reverse(start));
            let done = at + time(i, c);
            end = end.max(done);
            free.push(Reverse(done));
        }
        end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cta(placed: u64, retired: u64, skip: u64, rate: Option<f64>) -> IterCta {
        let mut b = gpusim_isa::ProgramBuilder::new("loop");
        b.begin_loop((skip + HEAD + TAIL) as u32).unwrap();
        b.inst(gpusim_isa::Inst::new(0));
        b.end_loop().unwrap();
        let nest = b.finish().unwrap().longest_nest(&[0; MAX_PARAMS]).unwrap();
        let skip = Some(CtaSkip { nest, head: HEAD, count: skip, run: HEAD + TAIL, per_entry: skip });
        IterCta {
            sm: 0,
            slot: 0,
            placed,
            retired: Some(retired),
            whole: false,
            trips: 0,
            measured: false,
            reference: false,
            skip,
            first: None,
            rate,
            head_end: None,
            later: None,
            tiles: TileMarks::default(),
        }
    }

    /// The inner mode measures every tile's head from tile `REF_TILES - 1` on, and the
    /// reference tile's middle; a CTA's rate is its heads' mean, scaled by the reference
    /// tiles' ratio of middle to head.
    #[test]
    fn the_inner_mode_scales_every_tile_head_by_the_reference_tile() {
        assert_eq!(REF_TILES, 2, "the walk below has tile 1 as the reference");
        let mut s = IterSampler::new_inner(16);
        let per_entry = 10;
        // Tile 0 whole (not measured); tile 1's head at 100 cycles per iteration and its middle
        // at 120; tile 2's head at 200, tile 3's at 300 (the polls see iterations begin
        // exactly).
        let walk = |c: &mut IterCta| {
            let mut now = 0;
            let mut step = |c: &mut IterCta, tile: u64, e: u64, cost: u64| {
                assert!(poll_tiles(c, c.skip.unwrap(), Some((tile, e)), now));
                now += cost;
            };
            for e in 0..HEAD + per_entry + TAIL {
                step(c, 0, e, 50);
            }
            for e in 0..HEAD + per_entry + TAIL {
                step(c, 1, e, if e < HEAD { 100 } else { 120 });
            }
            for (tile, cost) in [(2, 200), (3, 300)] {
                for e in 0..HEAD + TAIL {
                    step(c, tile, e, cost);
                }
                step(c, tile, u64::MAX, 0);
            }
            assert!(!poll_tiles(c, c.skip.unwrap(), None, now), "left the main nest");
        };
        for _ in 0..MIN_REFERENCE {
            let mut c = cta(0, 1_000_000, 2 * per_entry, None);
            c.skip.as_mut().unwrap().per_entry = per_entry;
            walk(&mut c);
            assert_eq!(c.tiles.reference, (Some(100.0), Some(120.0)));
            assert_eq!(c.rate, Some(250.0), "the mean of tiles 2 and 3");
            s.ctas.push(c);
        }
        assert_eq!(s.head_correction(), (1.2, 0.0));
    }

    /// Three CTAs on two slots: the third starts when the first slot frees, so the skipped time
    /// of the first and the third is on the critical path, the second's is not.
    #[test]
    fn the_replay_adds_the_critical_path_of_the_lengthened_grid() {
        let mut s = IterSampler::new(2);
        s.ctas = vec![cta(0, 100, 10, Some(5.0)), cta(0, 100, 10, Some(5.0)), cta(100, 200, 10, Some(5.0))];
        // Detailed makespan 200; lengthened by 50 each: 150 + 150 = 300.
        assert_eq!(s.extrapolate(0).0, 100);
        // A slow CTA on the other slot becomes the critical path: 100 + 10 × 30 = 400 against 300.
        s.ctas[1].rate = Some(30.0);
        assert_eq!(s.extrapolate(0).0, 200);
        // A CTA whose rate was not measured takes the mean of the others' (5 and 30).
        s.ctas[2].rate = None;
        let mean: f64 = (5.0 + 30.0) / 2.0;
        let third = 100 + (10.0 * mean).round() as u64;
        assert_eq!(s.extrapolate(0).0, (150 + third).max(400) - 200);
    }

    /// 20 waves of 10 CTAs with the default options: waves 0–1 warm up, 2, 7, 12 and 16 are
    /// measured, 6, 11 and 15 re-warm, 19 is the tail; the other ten are skipped whole.
    #[test]
    fn whole_ctas_are_skipped_in_blocks_between_measured_waves() {
        let mut s = IterSampler::new(10);
        s.plan_ctas(200, &crate::SampleOptions::default());
        assert_eq!(s.skip_ranges, vec![(30, 60), (80, 110), (130, 150), (170, 190)]);
        let skipped: u64 = s.skip_ranges.iter().map(|(a, b)| b - a).sum();
        assert_eq!(skipped, 100);
        // Too few waves for a block: none.
        let mut short = IterSampler::new(10);
        short.plan_ctas(100, &crate::SampleOptions::default());
        assert!(short.skip_ranges.is_empty());
    }

    /// The reference wave's ratio of its rate after the head to its head's (8 / 10) scales the
    /// head rates of the CTAs after its start; the first wave's CTA keeps its own.
    #[test]
    fn the_reference_wave_corrects_later_head_rates() {
        let mut s = IterSampler::new(1);
        s.reference = 1..9;
        s.ctas.push(cta(0, 100, 10, Some(10.0)));
        for i in 1..9 {
            let mut r = cta(100 * i, 100 * (i + 1), 0, Some(10.0));
            (r.reference, r.later) = (true, Some(8.0));
            s.ctas.push(r);
        }
        s.ctas.push(cta(900, 1000, 10, Some(10.0)));
        assert_eq!(s.head_correction(), (0.8, 0.0));
        // One slot: the skipped time adds up, 10 × 10 for the first CTA, 10 × 10 × 0.8 for the
        // last; the reference CTAs skipped nothing.
        assert_eq!(s.extrapolate(0).0, 100 + 80);
        // Too few reference CTAs measured: no correction.
        s.ctas[8].later = None;
        assert_eq!(s.head_correction(), (1.0, 0.0));
        assert_eq!(s.extrapolate(0).0, 200);
    }

    /// A CTA skipped whole lasts its class's mean lengthened duration; a class no detailed CTA
    /// had, their mean life less their iterations at the mean rate, plus its own.
    #[test]
    fn a_ctas_skipped_whole_takes_its_class_duration() {
        let whole = IterCta::whole;
        let mut s = IterSampler::new(2);
        let (mut a, mut b) = (cta(0, 100, 10, Some(5.0)), cta(0, 100, 10, Some(5.0)));
        (a.trips, b.trips) = (17, 17);
        s.ctas = vec![a, b, whole(17)];
        // Detailed makespan 100; in full, 150 on both slots, then the whole CTA's 150.
        assert_eq!(s.extrapolate(0).0, 300 - 100);
        // Trips 27: 150 - 5 × 17 = 65 of fixed life, plus 5 × 27.
        s.ctas[2] = whole(27);
        assert_eq!(s.extrapolate(0).0, 150 + 65 + 135 - 100);
    }
}

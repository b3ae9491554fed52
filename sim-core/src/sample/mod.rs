//! Sampling (`SimOptions::sample`): simulate part of a long kernel in detail and extrapolate
//! the rest from what the detailed part measured.
//!
//! A kernel of many waves of CTAs reaches a steady state after its first wave: later waves
//! repeat the same pattern of issue, stalls and traffic, drifting slowly as the grid moves
//! through memory (a grouped GEMM's experts, a raster order). The sampler lets the detailed
//! model run `warmup_waves` waves (ramp-up, caches filling) and then on until the kernel has
//! moved twice the L2's size through it and two consecutive waves agree within 5% in cycles
//! per instruction (a memory-bound grid's queues may still be filling; it gives up, and runs
//! in detail, at a third of the grid), then alternates: one measured window of waves, then a
//! block of whole waves *skipped* at dispatch (a skipped CTA never reaches an SM), so that the
//! `measure_waves` measured windows are spread evenly over the grid. The last `tail_waves`
//! waves plus the grid's partial last wave run in detail, so the tail's imbalance and drain are
//! simulated, not estimated. Each block is extrapolated from the measured windows on either
//! side of it (skipping takes no simulated time, so the two form one detailed stretch).
//!
//! Skipped CTAs touch no memory, so the L2 keeps the state the detailed waves left it in. The
//! waves mode therefore measures only once that state is the kernel's own: until the kernel has
//! replaced what earlier kernels left (twice the L2's size: once left a streaming kernel's
//! waves still 6% slow, the softmax of unfused attention at 1024 tokens), its waves evict
//! another mix of dirty and clean lines than its later waves do (unfused attention's softmax
//! backward at 4096 tokens measured 60% slow). Its detailed tail moves as much again, so the
//! kernels after it find the L2 as the full grid would leave it. A window spans up to 8 waves
//! where the grid has waves to spare (see `lay_out_blocks`): a single wave's length jitters by
//! a good part of a CTA's lifetime, and a few single waves missed the grid's mean by 4% on a GEMM
//! of short CTAs.
//!
//! What a skipped CTA adds to the kernel:
//! - **exactly**, from its programs: warp and thread instructions, per-op counts, pipe busy
//!   cycles and FLOPs ([`gpusim_isa::Program::for_each_executed`] with the kernel's op timing);
//! - **by extrapolation**, in proportion to its warp instructions against the measured waves':
//!   cycles (the kernel's end moves later by them), memory traffic, stall reasons and resident
//!   warp-cycles (kept equal to the stalls' sum), SM-active cycles.
//!
//! Heterogeneous CTAs (causal attention, skewed grouped GEMM) are weighted by their own
//! instruction counts, so a skipped heavy CTA costs more time than a light one: the
//! extrapolation assumes the steady waves' cycles per warp instruction, not their cycles per CTA.
//!
//! The error estimate treats the measured waves (or iterations) as samples of the skipped
//! ones: twice the standard error of their cycles per instruction, relative to its mean, over
//! the extrapolated cycles. It does not cover effects the measured part could not show (an L2
//! working set that would only overflow later); the validation test in `tests/sampling.rs`
//! checks the sampled time against full detail on every workload family.
//!
//! A grid of one wave (a persistent kernel: GEMM or FlashAttention-3 tiles looped over by a
//! CTA per SM, DeepGEMM's grouped GEMM walking its tile list through tile parameters, a
//! grid-stride STREAM loop) has no waves to skip. There the sampler skips
//! iterations of every CTA's main loop nest instead ([`gpusim_isa::Program::loop_nest`]). It
//! records the kernel's cycles each time its instruction count passes one more segment of
//! every warp's loop (1/16 of it, at least one flat iteration); once three consecutive
//! segments after the first (the ramp-up) agree within 2% in cycles per instruction, the
//! throughput is steady. The rest of the loop is then skipped in `measure_waves` blocks: every
//! warp of every CTA skips the same number of flat iterations, starting after the furthest
//! iteration any warp of its CTA has begun, then runs one segment in detail, measured, before
//! the next block; together the blocks leave every CTA `tail_waves`/8 of its loop (at least one
//! iteration) in detail. Each block is extrapolated from the segment measured before it and
//! the one after it (the last block from the one before): a kernel can change its pace along
//! its loop, which its first steady segments cannot show (DeepGEMM's grouped GEMM over 4
//! experts of 8192 rows runs 10% slower per instruction from 70% of its tiles on; extrapolated
//! from the first segments alone it came out 2.3% fast). `rewarm_waves` does not apply: the
//! CTAs all skip the same iterations, so the tiles that share data with a measured one run
//! beside it. Skipping the same iterations in every warp of a CTA keeps producer/consumer
//! barriers paired; skipping the same count in every CTA keeps the imbalance of CTAs with one
//! tile more in the detailed tail. A block waits a segment while a warp has not reached the
//! previous block's jump yet. When no three iterations agree by half the loop (a memory-bound
//! loop whose queues are still filling), or a CTA cannot skip (a warp already left its loop,
//! its warps' loops differ), the kernel runs in detail.
//!
//! A grid of several waves whose CTAs are long loops (FlashAttention-2 at long sequences: ten
//! waves of CTAs walking hundreds of key blocks) uses the iterations mode instead
//! (`iterations`): every CTA skips the middle of its longest loop nest, and the skipped time
//! comes from replaying the grid's dispatch with each CTA lengthened by its skipped iterations
//! at its own measured rate, corrected by a reference wave that runs longer heads (a
//! memory-bound loop's first iterations can be slower than the rest); a grid of enough waves
//! also skips whole CTAs, as the waves mode would, their time modelled on the detailed CTAs of
//! their class. It is chosen at the grid's first CTA when the grid has fewer waves
//! than the waves mode needs, or when it would simulate a smaller share of the grid in detail:
//! `HEAD + TAIL` of each CTA's longest loop, over 64 CTAs spread over the grid running the
//! first CTA's programs (a causal grid's CTAs walk from one key block to all of them; the
//! longest at least `iterations::MIN_TRIPS` flat iterations), against the waves mode's
//! minimum of waves out of the grid's; never for a kernel of clusters.
//!
//! A grid of one wave whose tiles are themselves long loops (FlashAttention-3's persistent
//! forward at long sequences: 21 tiles per CTA, each 42 iterations over key blocks; a persistent
//! Hopper GEMM at K = 8192: 16 tiles, each 32 iterations of four K blocks) uses the inner mode
//! instead of the loop mode when it keeps a smaller share in detail: the loop mode keeps the
//! ramp-up, its measured segments and its tail (8 of the 21 tiles, 10 of the 16), the inner mode
//! its first two tiles whole and `HEAD + TAIL` of every later tile's inner loop (7 of 42, 7 of
//! 32). Every looping warp of every CTA skips the middle of the nest inside its main nest
//! ([`gpusim_isa::Program::inner_nest`]) in every tile after the second
//! ([`gpusim_isa::Cursor::skip_inner`]), and the iterations mode's measurement and replay
//! extrapolate it: each skipped middle at its own tile's head rate, scaled by the ratio of the
//! second tile's middle to its head (measured on the slowest warp). The first tile is no
//! reference: all CTAs start it together, cold (on the 8192³ GEMM its head ran 7% faster than
//! its middle, later tiles' heads within 2-5% of theirs); and one tile alone would miss the
//! drift along the tile loop (the same GEMM's middles run 5% slower by its tenth tile). It is
//! chosen at the grid's first CTA when the looping warps can skip alike (`inner_nests`: the
//! same tiles, and inner loops of the same trips, or within an eighth of each other with the
//! same barriers touched per iteration, as a GEMM's consumers that peel their first K block).
//! Clusters are no obstacle: every CTA skips the same iterations, so a multicast load still
//! lands in CTAs that wait for it.
//!
//! A kernel is sampled only when it runs alone when the measurement ends (no other kernel
//! pulled and unfinished): the skipped time is added to its end, so kernels that depend on it
//! launch that much later, but a kernel of another stream that starts during its tail would run
//! as if the skipped time were not there; such a kernel is flagged `overlapped`.

mod inner_nests;
mod iterations;
mod loop_mode;
mod skipped;

use gpusim_isa::{CtaTrace, Dim3};

pub(crate) use inner_nests::{LoopingWarp, shared_inner_trips};
pub(crate) use iterations::{IterSampler, warp_nests};
use iterations::{longest_nests_agree, longest_trips};
use serde::Serialize;
pub(crate) use skipped::{SkipMemo, Skipped};

use crate::kernel_run::{KernelRun, KernelStats};
use crate::stats::{MemTraffic, StallReason};
use crate::timing::OpTiming;
use loop_mode::{LoopPlan, loop_segment};

/// How a run samples long grids. `SimOptions::sample = None` simulates everything in detail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SampleOptions {
    /// Waves simulated in detail before measuring: the ramp-up (at least 1).
    pub warmup_waves: u32,
    /// Waves measured, spread evenly over the grid, each followed by a block of skipped waves
    /// (at least 2: their spread is the error estimate). In a grid of one wave (the loop mode),
    /// the blocks its loop is skipped in, each after a measured segment (see the module doc).
    pub measure_waves: u32,
    /// Full waves simulated in detail at the end, besides the grid's partial last wave (at least
    /// 1: the drain of a full wave is part of the tail).
    pub tail_waves: u32,
    /// Waves simulated in detail, not measured, after each skipped block before the next
    /// measured wave: the L2 held the skipped CTAs' data, which the next CTAs share; the first
    /// wave after a skip reads it cold. Not in the loop mode (see the module doc).
    pub rewarm_waves: u32,
}

impl Default for SampleOptions {
    fn default() -> Self {
        SampleOptions { warmup_waves: 2, measure_waves: 4, tail_waves: 1, rewarm_waves: 1 }
    }
}

/// `WARMUP:MEASURE:TAIL:REWARM`, the form `--sample` takes and reports record.
impl std::fmt::Display for SampleOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}:{}", self.warmup_waves, self.measure_waves, self.tail_waves, self.rewarm_waves)
    }
}

impl SampleOptions {
    /// The options with their minimums enforced.
    pub fn clamped(self) -> SampleOptions {
        SampleOptions {
            warmup_waves: self.warmup_waves.max(1),
            measure_waves: self.measure_waves.max(2),
            tail_waves: self.tail_waves.max(1),
            rewarm_waves: self.rewarm_waves,
        }
    }

    /// The fewest full waves a grid needs to be sampled: the detailed ones plus one to skip.
    pub fn min_waves(&self) -> u64 {
        let o = self.clamped();
        (o.warmup_waves + o.measure_waves + o.tail_waves + (o.measure_waves - 1) * o.rewarm_waves) as u64 + 1
    }
}

/// How a kernel was sampled, in its report.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Sampled {
    /// `waves`: CTAs of steady waves skipped and extrapolated; `loop`: iterations of every
    /// CTA's main loop skipped (a grid of one wave); `iterations`: the middle of every CTA's
    /// longest loop skipped (a grid of a few waves of long CTAs); `inner`: the middle of the
    /// loop inside every tile skipped (a persistent grid of long tiles).
    pub method: String,
    /// `loop`: flat iterations of the main loop nest of the first CTA, and how many of them
    /// every CTA skipped (0 for `waves`). `iterations`: the longest CTA's, and what it skipped.
    /// `inner`: the inner loop's, per tile, and what every tile skipped.
    pub loop_iterations: u64,
    pub skipped_loop_iterations: u64,
    /// CTAs simulated in detail, and CTAs skipped.
    pub detailed_ctas: u64,
    pub skipped_ctas: u64,
    /// Warp instructions of the skipped CTAs (counted exactly; included in the kernel's total).
    pub skipped_warp_instructions: u64,
    /// Cycles added for the skipped CTAs (included in the kernel's cycles).
    pub extrapolated_cycles: u64,
    /// Waves (loop mode: loop segments; iterations mode: CTAs) the extrapolation was measured on.
    pub measured_waves: u32,
    /// Estimated error of the kernel's cycles, in percent of them: the measured waves' spread of
    /// cycles per warp instruction over the extrapolated cycles.
    pub error_pct: f64,
    /// Another kernel ran while this one's tail did: its timing ignores the skipped cycles.
    pub overlapped: bool,
}

/// A kernel's counters at a wave boundary.
#[derive(Clone, Debug)]
struct Mark {
    cycle: u64,
    stats: KernelStats,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Not sampled (too short, alone check failed, or done measuring without a skip).
    Off,
    /// Detailed, counting retired CTAs up to the next wave boundary (waves mode), or
    /// instructions up to the next iteration milestone (loop mode).
    Measuring,
    /// Skipping this many more CTAs at dispatch.
    Skipping(u64),
    /// Detailed to the end; the extrapolation is applied when the kernel finishes.
    Tail,
}

/// Waves mode: two consecutive waves agree (steady: skipping may start) when their cycles per
/// instruction differ by at most this fraction of their mean. Looser than the loop's: waves of
/// a GEMM differ by 1–3% as the grid moves through memory, and the measured waves spread over
/// the grid average that out; a filling memory queue differs by far more.
const WAVES_STEADY_TOLERANCE: f64 = 0.05;

/// Whether the two stretches `a..b` and `b..c` agree in cycles per instruction within
/// [`WAVES_STEADY_TOLERANCE`].
fn steady(a: &Mark, b: &Mark, c: &Mark) -> bool {
    let cpi = |x: &Mark, y: &Mark| {
        (y.cycle - x.cycle) as f64 / y.stats.warp_insts.saturating_sub(x.stats.warp_insts).max(1) as f64
    };
    let (c1, c2) = (cpi(a, b), cpi(b, c));
    let mean = (c1 + c2) / 2.0;
    mean > 0.0 && (c1 - c2).abs() <= WAVES_STEADY_TOLERANCE * mean
}

/// Waves mode: the measured windows together span at most this fraction (1/N) of the waves
/// left once steady, each at least one wave and at most [`MAX_WINDOW_WAVES`].
const WINDOW_SHARE: u64 = 16;
const MAX_WINDOW_WAVES: u64 = 8;

/// CTAs of a grid whose longest loops decide between the waves and the iterations mode.
const DECIDE_SAMPLES: u64 = 64;

/// The sampling state of one kernel.
#[derive(Clone, Debug)]
pub(crate) struct KernelSampler {
    opts: SampleOptions,
    phase: Phase,
    /// `Some` in loop mode (a grid of one wave).
    plan: Option<LoopPlan>,
    /// CTAs resident at once on a full GPU: one wave.
    wave: u64,
    /// Wave boundaries: the warm-up's end, then each measured wave's end.
    marks: Vec<Mark>,
    /// SMs that held a CTA of the kernel when the measurement ended.
    active_sms: u64,
    /// Skipped blocks in order, each with the marks of the detailed stretch it is
    /// extrapolated from.
    blocks: Vec<Block>,
    /// Waves mode: CTAs of each block to skip, in order (filled at the first retirement).
    block_ctas: Vec<u64>,
    /// Waves mode: retirements at which the next mark falls.
    next_boundary: u64,
    /// The measured waves (iterations) as mark index pairs: the error estimate's samples.
    measured: Vec<(usize, usize)>,
    overlapped: bool,
    /// A grid of several waves whose mode (waves or iterations) is chosen at its first CTA.
    undecided: bool,
    /// A grid of one wave whose mode (loop or inner) is chosen at its first CTA.
    one_wave_undecided: bool,
    /// Waves mode: bytes the kernel must move through the L2 before its waves may count as
    /// steady, and its detailed tail at least (twice the L2's size; see the module doc).
    l2_turnover: u64,
    /// Waves mode: waves in each measured window (see [`KernelSampler::lay_out_blocks`]).
    window_waves: u64,
    /// CTA slots of the GPU for the kernel (a wave), and whether it launches clusters.
    slots: u64,
    clustered: bool,
    ctas: u64,
    /// `Some` in iterations mode.
    pub(crate) iters: Option<IterSampler>,
    /// Waves mode: the skipped CTAs' warps counted once per program and parameters.
    memo: SkipMemo,
    /// At the finish: the iterations sampler was in its inner mode.
    iters_inner: bool,
}

/// A run of skipped work and the detailed stretches it is extrapolated from.
#[derive(Clone, Debug, Default)]
struct Block {
    skipped: Skipped,
    /// Detailed stretches (mark index pairs): the measured wave before the block and, but for
    /// the last block, the one after it.
    windows: Vec<(usize, usize)>,
}

impl KernelSampler {
    /// The sampler of a kernel of `ctas` CTAs. Whether its grid is long enough is decided at its
    /// first retirement, when the number of CTAs resident at once (a wave) is known.
    /// `one_wave`: the whole grid is resident at once (loop mode).
    /// `slots`: CTAs resident at once on the whole GPU; `clustered`: it launches clusters.
    /// `l2_bytes`: the L2's size; the kernel's traffic must reach twice it before its waves
    /// count as steady.
    pub(crate) fn new(
        opts: SampleOptions,
        ctas: u64,
        slots: u64,
        clustered: bool,
        l2_bytes: u64,
    ) -> Option<KernelSampler> {
        let opts = opts.clamped();
        let one_wave = ctas <= slots;
        Some(KernelSampler {
            opts,
            phase: Phase::Measuring,
            plan: one_wave.then(LoopPlan::default),
            wave: 0,
            marks: Vec::with_capacity(opts.measure_waves as usize + 1),
            active_sms: 0,
            blocks: Vec::new(),
            block_ctas: Vec::new(),
            next_boundary: 0,
            measured: Vec::new(),
            overlapped: false,
            undecided: !one_wave,
            one_wave_undecided: one_wave,
            l2_turnover: l2_bytes.saturating_mul(2),
            window_waves: 1,
            slots,
            clustered,
            ctas,
            iters: None,
            memo: SkipMemo::default(),
            iters_inner: false,
        })
    }

    /// Chooses between waves and iterations mode at the grid's first CTA (see
    /// [`iterations`]): iterations when the grid has too few waves for the waves mode, or when
    /// it would keep a smaller share of the grid in detail, unless the kernel launches clusters
    /// or the first CTA's looping warps differ in their longest nests (they could not skip
    /// alike).
    ///
    /// The share is estimated over [`DECIDE_SAMPLES`] CTAs spread evenly over the grid, each
    /// running the first CTA's programs at its own coordinate: a causal grid's first CTA walks
    /// one key block and its last the whole sequence, so the first CTA alone would judge the
    /// grid by its lightest CTA.
    fn decide(&mut self, first: &CtaTrace, grid: Dim3) {
        self.undecided = false;
        let n = self.ctas.clamp(1, DECIDE_SAMPLES);
        let trips: Vec<u64> = (0..n)
            .map(|i| {
                let linear = if n > 1 { i * (self.ctas - 1) / (n - 1) } else { 0 };
                let coord = if i == 0 { first.coord } else { grid.unlinear(linear) }.as_array();
                longest_trips(&first.warps, coord)
            })
            .collect();
        // The share of the grid each mode simulates in detail: the waves mode about its minimum
        // of waves out of the grid's, the iterations mode HEAD + TAIL of each CTA's trips.
        let waves = self.ctas as f64 / self.slots.max(1) as f64;
        let few_waves = waves < self.opts.min_waves() as f64;
        let kept = iterations::HEAD + iterations::TAIL;
        let all: u64 = trips.iter().sum();
        let detailed: u64 = trips.iter().map(|&t| t.min(kept)).sum();
        let longest = trips.iter().copied().max().unwrap_or(0);
        let iterations_gain =
            longest >= iterations::MIN_TRIPS && (detailed as f64) * waves < self.opts.min_waves() as f64 * all as f64;
        let agree = longest_nests_agree(&first.warps, first.coord.as_array());
        if !self.clustered && agree && (few_waves || iterations_gain) {
            let mut it = IterSampler::new(self.slots);
            it.plan_ctas(self.ctas, &self.opts);
            self.iters = Some(it);
            self.phase = Phase::Off;
        }
    }

    /// Chooses between the loop and the inner mode at a one-wave grid's first CTA: inner when
    /// its looping warps can skip alike in a nest inside their main nest of at least
    /// `iterations::MIN_TRIPS` flat iterations ([`shared_inner_trips`]), and the inner mode
    /// keeps a smaller share in detail (its whole first tiles and `HEAD + TAIL` of every later
    /// one) than the loop mode keeps of the main nest (its ramp-up segment, three measured
    /// ones, the segments between its blocks, the iteration in flight and the tail).
    /// FlashAttention-3's persistent forward at 16k tokens: 21 tiles (the loop mode keeps 8),
    /// each 42 key-block iterations (the inner mode keeps 7).
    fn decide_one_wave(&mut self, first: &CtaTrace, timing: &[OpTiming]) {
        self.one_wave_undecided = false;
        let coord = first.coord.as_array();
        let params: Vec<_> = first.warps.iter().enumerate().map(|(w, p)| p.eval_params(coord, w as u32)).collect();
        let warps = first.warps.iter().zip(&params).enumerate().map(|(w, (p, params))| LoopingWarp {
            prog: p,
            params,
            vars: gpusim_isa::Cursor::new(p, coord, w as u32).vars(),
        });
        let Some((outer, inner)) = shared_inner_trips(warps, timing) else { return };
        let segment = loop_segment(outer);
        let between = self.opts.measure_waves as u64 - 1;
        let loop_kept = ((4 + between) * segment + 1 + (outer * self.opts.tail_waves as u64 / 8).max(1)).min(outer);
        // Tiles run whole, then HEAD + TAIL of every later tile's inner nest.
        let whole = iterations::REF_TILES;
        let inner_kept = whole * inner + outer.saturating_sub(whole) * (iterations::HEAD + iterations::TAIL);
        if inner >= iterations::MIN_TRIPS && outer > whole && inner_kept < loop_kept * inner {
            self.plan = None;
            self.iters = Some(IterSampler::new_inner(self.slots));
            self.phase = Phase::Off;
        }
    }

    /// A CTA of `k` retired at `now`. `alone`: no other kernel is pulled and unfinished.
    pub(crate) fn on_retire(&mut self, k: &KernelRun, now: u64, alone: bool) {
        if self.iters.is_some() {
            return;
        }
        if self.plan.is_some() {
            if !alone && !matches!(self.phase, Phase::Off) {
                self.overlapped = true;
            }
            return;
        }
        if !alone && self.phase != Phase::Off {
            if self.phase == Phase::Measuring {
                self.phase = Phase::Off;
            } else {
                self.overlapped = true;
            }
        }
        if self.phase != Phase::Measuring {
            return;
        }
        if self.wave == 0 && !self.plan_waves(k) {
            self.cancel();
            return;
        }
        if k.ctas_done < self.next_boundary {
            return;
        }
        self.marks.push(Mark { cycle: now, stats: k.stats.clone() });
        self.next_boundary = k.ctas_done + self.wave;
        if self.block_ctas.is_empty() {
            // Not steady yet: the first block is skipped only once the kernel has moved twice
            // the L2's size through it (until then the L2 holds what earlier kernels left, dirty
            // or not, and a streaming grid's first waves evict it at another cost than its own
            // lines later: a skipped block would freeze that state) and two consecutive waves
            // agree (a memory-bound grid's queues may still be filling); the later measured
            // waves then follow the plan. Gives up at a third of the grid.
            let n = self.marks.len();
            let turned_over = k.stats.traffic.l2.bytes >= self.l2_turnover;
            if n >= 3
                && turned_over
                && steady(&self.marks[n - 3], &self.marks[n - 2], &self.marks[n - 1])
                && self.lay_out_blocks(k)
            {
                self.marks.drain(..n - 2);
                if self.window_waves > 1 {
                    // The first measured window is the steady wave and the waves after it.
                    self.marks.pop();
                    self.next_boundary = k.ctas_done + (self.window_waves - 1) * self.wave;
                }
            } else {
                if k.ctas_dispatched.saturating_mul(3) > k.info.num_ctas() {
                    self.cancel();
                }
                return;
            }
        }
        // After the warm-up (mark 0): a measured window, its block skipped, `rewarm_waves`
        // waves not measured, the next measured window, and so on.
        let i = self.marks.len() - 1;
        if i == 0 {
            return;
        }
        let cycle = 1 + self.opts.rewarm_waves as usize;
        if i.is_multiple_of(cycle) {
            self.next_boundary = k.ctas_done + self.window_waves * self.wave;
        }
        if !(i - 1).is_multiple_of(cycle) {
            return;
        }
        let w = (i - 1, i);
        self.measured.push(w);
        if let Some(b) = self.blocks.last_mut() {
            b.windows.push(w);
        }
        match self.block_ctas.get(self.blocks.len()) {
            Some(&n) => {
                self.blocks.push(Block { skipped: Skipped::default(), windows: vec![w] });
                self.active_sms = k.sm_resident.iter().filter(|r| r.0 > 0).count() as u64;
                self.phase = Phase::Skipping(n);
            }
            None => self.phase = Phase::Tail,
        }
    }

    /// Waves mode, at the first retirement, when a wave's size is known (every CTA placed so far
    /// was resident at once). False when the grid is too short.
    fn plan_waves(&mut self, k: &KernelRun) -> bool {
        self.wave = k.ctas_dispatched.max(1);
        self.next_boundary = self.opts.warmup_waves as u64 * self.wave;
        k.info.num_ctas() / self.wave >= self.opts.min_waves()
    }

    /// Waves mode, once steady (the wave just measured is the first measured wave): lays out
    /// the skipped blocks and the waves measured between them over the CTAs not yet placed.
    /// False when too few are left.
    fn lay_out_blocks(&mut self, k: &KernelRun) -> bool {
        let o = self.opts;
        let left = k.info.num_ctas().saturating_sub(k.ctas_dispatched) / self.wave;
        let m = o.measure_waves as u64;
        // The detailed tail also moves twice the L2's size through it (at the last measured
        // wave's bytes per wave), so the kernel leaves the L2 as the full grid would: holding
        // its last lines, as dirty as they would be. The kernels after it read that state.
        let n = self.marks.len();
        let wave_bytes =
            self.marks[n - 1].stats.traffic.l2.bytes.saturating_sub(self.marks[n - 2].stats.traffic.l2.bytes);
        let turnover = self.l2_turnover.div_ceil(wave_bytes.max(1));
        let tail = (o.tail_waves as u64).max(turnover);
        // A measured window spans several waves where the grid is long enough: its ends fall
        // at a wave's last retirement, which jitters by a good part of a CTA's lifetime (a
        // GEMM of short CTAs: single waves of 8,000 to 12,800 cycles around a mean of 9,500,
        // a late wave followed by a short one), so a window of `k` waves errs about `k` times
        // less. Together the windows cover at most 1/WINDOW_SHARE of the waves left, each at
        // most MAX_WINDOW_WAVES.
        self.window_waves = (left / (WINDOW_SHARE * m)).clamp(1, MAX_WINDOW_WAVES);
        let k = self.window_waves;
        let detailed = (k - 1) + (m - 1) * (k + o.rewarm_waves as u64) + tail;
        let Some(skippable) = left.checked_sub(detailed).filter(|&n| n > 0) else { return false };
        // Whole waves only: the grid's partial last wave takes nearly a full wave's time, so it
        // stays in the detailed tail, as in the full grid. Blocks as even as whole waves allow.
        self.block_ctas = (0..m).map(|b| (skippable / m + u64::from(b < skippable % m)) * self.wave).collect();
        true
    }

    /// A CTA of the kernel is placed.
    pub(crate) fn placed(&mut self, cta: &CtaTrace, grid: Dim3, timing: &[OpTiming]) {
        if self.undecided {
            self.decide(cta, grid);
        }
        if self.one_wave_undecided {
            self.decide_one_wave(cta, timing);
        }
        if let Some(plan) = self.plan.as_mut() {
            let coord = cta.coord.as_array();
            for (w, p) in cta.warps.iter().enumerate() {
                let params = p.eval_params(coord, w as u32);
                match p.loop_nest(&params) {
                    Some(n) => {
                        plan.base = plan.base.saturating_add(n.before);
                        plan.body = plan.body.saturating_add(n.body);
                        plan.trips = plan.trips.max(n.trips);
                    }
                    None => plan.base = plan.base.saturating_add(p.dynamic_len_for(coord, w as u32)),
                }
            }
        }
    }

    /// No sampling for this kernel after all.
    pub(crate) fn cancel(&mut self) {
        self.phase = Phase::Off;
        self.marks.clear();
        self.measured.clear();
    }

    /// Whether the next CTA pulled is to be skipped.
    pub(crate) fn skipping(&self) -> bool {
        if let Some(it) = &self.iters {
            return it.skips_next();
        }
        matches!(self.phase, Phase::Skipping(n) if n > 0)
    }

    /// Counts `cta` of `k` as skipped (the kernel's op timing must cover its ops); `alone`: the
    /// kernel is the only one running.
    pub(crate) fn skip(&mut self, k: &KernelRun, cta: &CtaTrace, alone: bool) {
        if let Some(it) = self.iters.as_mut() {
            it.skip_whole(k, cta, alone);
            return;
        }
        let Some(b) = self.blocks.last_mut() else { return };
        let coord = cta.coord.as_array();
        for (w, prog) in cta.warps.iter().enumerate() {
            let params = prog.eval_params(coord, w as u32);
            self.memo.add(&mut b.skipped, k, prog, &params, None);
        }
        b.skipped.ctas += 1;
        if let Phase::Skipping(n) = self.phase {
            let last = self.blocks.len() >= self.block_ctas.len();
            self.phase = match n {
                2.. => Phase::Skipping(n - 1),
                _ if last => Phase::Tail,
                _ => Phase::Measuring,
            };
        }
    }

    /// The kernel finished (its last detailed CTA retired): adds the skipped work's exact
    /// counts and extrapolated cycles, traffic and stalls to `k`, and records how it was
    /// sampled.
    pub(crate) fn finish(mut self, k: &mut KernelRun) {
        // Iterations mode: one block, the whole detailed run its stretch; the cycles come from
        // the dispatch replay, not from the stretch's cycles per instruction.
        let mut replayed = None;
        if let Some(it) = self.iters.take() {
            self.iters_inner = it.inner;
            let start = k.start.unwrap_or(0);
            self.marks = vec![
                Mark { cycle: start, stats: KernelStats::default() },
                Mark { cycle: k.end, stats: k.stats.clone() },
            ];
            self.blocks = vec![Block { skipped: it.skipped.clone(), windows: vec![(0, 1)] }];
            self.measured.clear();
            self.overlapped = it.overlapped;
            self.active_sms = it.sms_used();
            replayed = Some((it.extrapolate(start), it.iterations(), it.measured()));
            // The steady window's marks were taken in the shortened run: no window.
            if it.skipped.warp_insts > 0 {
                k.first_retire = None;
                k.first_idle_slot = None;
            }
        }
        let mut all = Skipped::default();
        let mut extra = 0u64;
        let mut traffic = MemTraffic::default();
        let mut stalls = [0u64; StallReason::COUNT];
        for b in &self.blocks {
            let sk = &b.skipped;
            if b.windows.iter().any(|&(lo, hi)| hi >= self.marks.len() || lo > hi) {
                continue;
            }
            // A counter's growth over the block's detailed stretches.
            let d = |f: &dyn Fn(&Mark) -> u64| -> u64 {
                b.windows.iter().map(|&(lo, hi)| f(&self.marks[hi]).saturating_sub(f(&self.marks[lo]))).sum()
            };
            let win_insts = d(&|m| m.stats.warp_insts);
            if sk.warp_insts == 0 || win_insts == 0 {
                continue;
            }
            // x × skipped instructions / the stretch's instructions, rounded, in integers.
            let scale = |x: u64| -> u64 {
                let num = x as u128 * sk.warp_insts as u128;
                let d = win_insts as u128;
                u64::try_from((num + d / 2) / d).unwrap_or(u64::MAX)
            };
            extra += match replayed {
                Some(((cycles, _), _, _)) => cycles,
                None => scale(d(&|m| m.cycle)),
            };
            for r in StallReason::ALL {
                stalls[r.index()] += scale(d(&|m| m.stats.stalls.get(r)));
            }
            let mut t =
                MemTraffic { requested_bytes: scale(d(&|m| m.stats.traffic.requested_bytes)), ..MemTraffic::default() };
            type Level = fn(&MemTraffic) -> &crate::stats::LevelTraffic;
            let levels: [(Level, &mut crate::stats::LevelTraffic); 4] = [
                (|t| &t.l1, &mut t.l1),
                (|t| &t.shared, &mut t.shared),
                (|t| &t.l2, &mut t.l2),
                (|t| &t.dram, &mut t.dram),
            ];
            for (level, out) in levels {
                out.requests = scale(d(&|m| level(&m.stats.traffic).requests));
                out.sectors = scale(d(&|m| level(&m.stats.traffic).sectors));
                out.bytes = scale(d(&|m| level(&m.stats.traffic).bytes));
                out.hits = scale(d(&|m| level(&m.stats.traffic).hits));
                out.misses = scale(d(&|m| level(&m.stats.traffic).misses));
            }
            traffic.merge(&t);
            all.add(sk);
        }
        if all.warp_insts == 0 {
            return;
        }

        let st = &mut k.stats;
        st.warp_insts += all.warp_insts;
        st.thread_insts += all.thread_insts;
        for (i, n) in all.op_counts.iter().enumerate() {
            if let Some(c) = st.op_counts.get_mut(i) {
                *c += n;
            }
        }
        for (i, n) in all.pipe_busy.iter().enumerate() {
            st.pipe_busy[i] += n;
        }
        st.cuda_core_flops += all.cuda_core_flops;
        st.tensor_flops += all.tensor_flops;
        // Resident warp-cycles stay the stalls' sum.
        for r in StallReason::ALL {
            st.stalls.add(r, stalls[r.index()]);
        }
        st.resident_warp_cycles += stalls.iter().sum::<u64>();
        st.sm_active_cycles += extra.saturating_mul(self.active_sms);
        st.traffic.merge(&traffic);

        // The tail ran after the skipped work: its boundary moves with it.
        let first_skip = self.blocks.first().and_then(|b| b.windows.first()).map_or(0, |&(_, hi)| self.marks[hi].cycle);
        if let Some(m) = k.first_idle_slot.as_mut()
            && m.cycle >= first_skip
        {
            m.cycle += extra;
            m.requested_bytes += traffic.requested_bytes;
            m.l2_bytes += traffic.l2.bytes;
            m.dram_bytes += traffic.dram.bytes;
        }
        k.end += extra;

        // The measured waves (iterations) as samples of the skipped ones: twice the standard
        // error of their cycles per instruction, relative to the mean.
        let cpi: Vec<f64> = self
            .measured
            .iter()
            .filter(|&&(lo, hi)| hi < self.marks.len() && lo < hi)
            .map(|&(lo, hi)| {
                let (a, z) = (&self.marks[lo], &self.marks[hi]);
                (z.cycle - a.cycle) as f64 / z.stats.warp_insts.saturating_sub(a.stats.warp_insts).max(1) as f64
            })
            .collect();
        let n = cpi.len() as f64;
        let mean = cpi.iter().sum::<f64>() / n.max(1.0);
        let var = if n > 1.0 { cpi.iter().map(|c| (c - mean) * (c - mean)).sum::<f64>() / (n - 1.0) } else { 0.0 };
        let mut rel = if mean > 0.0 { 2.0 * (var / n).sqrt() / mean } else { 0.0 };
        let cycles = k.end.saturating_sub(k.start.unwrap_or(0)).max(1);
        let plan = self.plan.unwrap_or_default();
        let (mut method, mut trips, mut skip, mut measured) =
            (if self.plan.is_some() { "loop" } else { "waves" }, plan.trips, plan.skip, cpi.len() as u32);
        if self.plan.is_none() {
            // Waves measured: each window spans `window_waves` (the estimate's samples are the
            // windows).
            measured = measured.saturating_mul(self.window_waves as u32);
        }
        if let Some(((_, spread), (t, s), m)) = replayed {
            let name = if self.iters_inner { "inner" } else { "iterations" };
            (method, trips, skip, measured) = (name, t, s, m as u32);
            rel = 2.0 * spread;
        }
        k.sampled = Some(Sampled {
            method: method.into(),
            loop_iterations: trips,
            skipped_loop_iterations: skip,
            detailed_ctas: k.ctas_done,
            skipped_ctas: all.ctas,
            skipped_warp_instructions: all.warp_insts,
            extrapolated_cycles: extra,
            measured_waves: measured,
            error_pct: 100.0 * rel * extra as f64 / cycles as f64,
            overlapped: self.overlapped,
        });
    }
}

#[cfg(test)]
mod tests {
    use gpusim_isa::KernelInfo;

    use super::*;
    use crate::occupancy::{Limiter, Occupancy};

    /// A kernel of `ctas` CTAs of one warp, 100 resident at once.
    fn kernel(ctas: u32) -> KernelRun {
        let info = KernelInfo::new(0, "k", Dim3::new(ctas, 1, 1), Dim3::new(32, 1, 1));
        let occ = Occupancy {
            ctas_per_sm: 100,
            warps_per_cta: 1,
            regs_per_warp: 0,
            smem_per_cta: 0,
            limiter: Limiter::CtaSlots,
        };
        KernelRun::new(info, occ, 1)
    }

    /// Retires CTAs of `k` one by one, each 10 cycles, 10 warp instructions and 10 KiB of L2
    /// traffic after the last (a steady grid whose waves move 1,000 KiB), a new one dispatched
    /// for each, until the sampler starts skipping or gives up. Returns the retirements.
    fn run_until_decided(s: &mut KernelSampler, k: &mut KernelRun) -> u64 {
        k.ctas_dispatched = 100;
        let mut now = 0;
        while k.ctas_done < k.info.num_ctas() {
            now += 10;
            k.ctas_done += 1;
            k.stats.warp_insts += 10;
            k.stats.traffic.l2.bytes += 10 << 10;
            s.on_retire(k, now, true);
            if s.skipping() || s.phase == Phase::Off {
                break;
            }
            k.ctas_dispatched = (k.ctas_dispatched + 1).min(k.info.num_ctas());
        }
        k.ctas_done
    }

    #[test]
    fn the_waves_mode_measures_after_twice_the_l2_and_keeps_a_tail_of_as_much() {
        // 1,000 waves; an L2 of 4 MiB: steady from the third wave on, but skipping starts only
        // once 8 MiB (eight and a bit waves) went through the L2.
        let (l2, ctas) = (4u64 << 20, 100_000);
        let mut s = KernelSampler::new(SampleOptions::default(), ctas, 100, false, l2).expect("sampler");
        let mut k = kernel(ctas as u32);
        let done = run_until_decided(&mut s, &mut k);
        assert!(s.skipping(), "a long steady grid is sampled");
        assert!(k.stats.traffic.l2.bytes >= 2 * l2, "skipping began after {} bytes", k.stats.traffic.l2.bytes);
        // Windows of 8 waves: the measured one ends 8 waves after the steady mark.
        assert_eq!(s.window_waves, 8);
        let waves_to_turnover = (2 * l2).div_ceil(1000 << 10);
        assert_eq!(done, (waves_to_turnover + 7) * 100, "the first window spans 8 waves");
        // The blocks leave the windows, the re-warm waves and a tail of the same traffic (9
        // waves) out of the 990 full waves not yet dispatched at the steady mark (retirement
        // 900, 999 CTAs dispatched).
        let o = SampleOptions::default();
        let left = (ctas - (100 + waves_to_turnover * 100 - 1)) / 100;
        let detailed = 7 + (o.measure_waves as u64 - 1) * (8 + o.rewarm_waves as u64) + waves_to_turnover;
        let skipped: u64 = s.block_ctas.iter().sum();
        assert_eq!((left, detailed), (990, 43));
        assert_eq!(skipped, (left - detailed) * 100);
    }

    /// Loop mode on a loop of 160 flat iterations of 10 warp instructions, one iteration a step,
    /// its pace `cpi(iteration)` cycles per instruction; the engine's part (the room left
    /// before the tail, the skipped iterations' exact counts) played by the test. Returns the
    /// sampled kernel's cycles and its skipped iterations, with the blocks' windows.
    fn run_loop(cpi: impl Fn(u64) -> f64, opts: SampleOptions) -> (u64, u64, Vec<Vec<(usize, usize)>>) {
        let (trips, body) = (160u64, 10u64);
        let mut s = KernelSampler::new(opts, 1, 100, false, 1 << 20).expect("sampler");
        s.one_wave_undecided = false;
        let mut plan = LoopPlan::default();
        (plan.body, plan.trips) = (body, trips);
        s.plan = Some(plan);
        let mut k = kernel(1);
        k.start = Some(0);
        k.sm_resident = vec![(1, 0)];
        let tail = (trips * opts.tail_waves as u64 / 8).max(1);
        let (mut iteration, mut now) = (0u64, 0f64);
        while iteration < trips {
            now += body as f64 * cpi(iteration);
            k.stats.warp_insts += body;
            iteration += 1;
            if s.loop_mode() && s.poll(&k, now as u64) {
                let room = trips.saturating_sub(iteration + tail);
                let count = s.plan_skip(room);
                if count == 0 {
                    s.stop_skipping(room == 0);
                    continue;
                }
                s.open_block();
                s.blocks.last_mut().expect("block").skipped.warp_insts += count * body;
                s.skipping_loops(count);
                iteration += count;
            }
        }
        k.end = now as u64;
        let windows = s.blocks.iter().map(|b| b.windows.clone()).collect();
        let skipped = s.plan.map_or(0, |p| p.skip);
        s.finish(&mut k);
        (k.end, skipped, windows)
    }

    #[test]
    fn the_loop_mode_measures_between_its_blocks() {
        // Steady at 1 cycle per instruction, 10% slower from iteration 112 (70%) on: 1,712
        // cycles in full detail. Measured on its first steady segments alone, the skipped
        // iterations would all be extrapolated at the early pace.
        let cpi = |i: u64| if i < 112 { 1.0 } else { 1.1 };
        let full: f64 = (0..160).map(|i| 10.0 * cpi(i)).sum();
        let (cycles, skipped, windows) = run_loop(cpi, SampleOptions::default());
        // Steady after segment 4 (iteration 40; the ramp-up segment is as steady here); 20 in
        // the tail; the other 100 go to the 3 segments of 10 measured between the blocks and to
        // 4 blocks, each a share of what is left when it is skipped: 17, 17, 18 and 18.
        assert_eq!(skipped, 70);
        assert_eq!(windows, vec![vec![(2, 3), (3, 4)], vec![(3, 4), (4, 5)], vec![(4, 5), (5, 6)], vec![(5, 6)]]);
        let err = cycles as f64 / full - 1.0;
        assert!(err.abs() < 0.01, "sampled {cycles} cycles against {full} in full detail ({:+.2}%)", 100.0 * err);
        // A constant pace is extrapolated exactly.
        let (cycles, _, _) = run_loop(|_| 2.0, SampleOptions::default());
        assert_eq!(cycles, 3_200);
    }

    #[test]
    fn a_grid_shorter_than_its_l2_turnover_runs_in_detail() {
        // 30 waves of 1,000 KiB against an L2 of 40 MiB: the turnover (82 waves) is never
        // reached, and the sampler gives up at a third of the grid.
        let mut s = KernelSampler::new(SampleOptions::default(), 3_000, 100, false, 40 << 20).expect("sampler");
        let mut k = kernel(3_000);
        let done = run_until_decided(&mut s, &mut k);
        assert_eq!(s.phase, Phase::Off);
        assert!(!s.skipping());
        assert!(done <= 1_100, "gave up after {done} retirements");
    }
}

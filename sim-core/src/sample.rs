//! Wave sampling (`SimOptions::sample`): simulate a long grid's ramp-up, a few steady waves and
//! its tail in detail, and extrapolate the waves in between from the measured ones.
//!
//! A kernel of many waves of CTAs reaches a steady state after its first wave: every wave after
//! it repeats the same pattern of issue, stalls and traffic. The sampler lets the detailed model
//! run `warmup_waves` waves (ramp-up, caches filling), measures the next `measure_waves` waves
//! (their cycles and every counter, wave by wave), then *skips* CTAs at dispatch: a skipped CTA
//! never reaches an SM. The last `tail_waves` waves plus the grid's partial last wave run in
//! detail again, so the tail's imbalance and drain are simulated, not estimated.
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
//! The error estimate is the spread of the measured waves' cycles per instruction, applied to
//! the extrapolated cycles: if the skipped waves ran anywhere within the measured range, the
//! kernel's time is within the bound. It does not cover effects the measured waves could not
//! show (an L2 working set that would only overflow later); the validation test in
//! `tests/sampling.rs` checks the sampled time against full detail on every workload family.
//!
//! A kernel is sampled only when it runs alone when the measurement ends (no other kernel
//! pulled and unfinished): the skipped time is added to its end, so kernels that depend on it
//! launch that much later, but a kernel of another stream that starts during its tail would run
//! as if the skipped time were not there; such a kernel is flagged `overlapped`.

use gpusim_isa::CtaTrace;
use serde::Serialize;

use crate::kernel_run::{KernelRun, KernelStats};
use crate::stats::StallReason;

/// How a run samples long grids. `SimOptions::sample = None` simulates everything in detail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SampleOptions {
    /// Waves simulated in detail before measuring: the ramp-up (at least 1).
    pub warmup_waves: u32,
    /// Waves measured, each on its own (at least 2: the spread between them is the error
    /// estimate).
    pub measure_waves: u32,
    /// Full waves simulated in detail at the end, besides the grid's partial last wave (at least
    /// 1: the drain of a full wave is part of the tail).
    pub tail_waves: u32,
}

impl Default for SampleOptions {
    fn default() -> Self {
        SampleOptions { warmup_waves: 1, measure_waves: 2, tail_waves: 1 }
    }
}

impl SampleOptions {
    /// The options with their minimums enforced.
    pub fn clamped(self) -> SampleOptions {
        SampleOptions {
            warmup_waves: self.warmup_waves.max(1),
            measure_waves: self.measure_waves.max(2),
            tail_waves: self.tail_waves.max(1),
        }
    }

    /// The fewest full waves a grid needs to be sampled: the detailed ones plus one to skip.
    pub fn min_waves(&self) -> u64 {
        let o = self.clamped();
        (o.warmup_waves + o.measure_waves + o.tail_waves) as u64 + 1
    }
}

/// How a kernel was sampled, in its report.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Sampled {
    /// `waves`: CTAs of steady waves skipped and extrapolated.
    pub method: String,
    /// CTAs simulated in detail, and CTAs skipped.
    pub detailed_ctas: u64,
    pub skipped_ctas: u64,
    /// Warp instructions of the skipped CTAs (counted exactly; included in the kernel's total).
    pub skipped_warp_instructions: u64,
    /// Cycles added for the skipped CTAs (included in the kernel's cycles).
    pub extrapolated_cycles: u64,
    /// Waves the extrapolation was measured on.
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
    /// Detailed, counting retired CTAs up to the next wave boundary.
    Measuring,
    /// Skipping this many more CTAs at dispatch.
    Skipping(u64),
    /// Detailed to the end; the extrapolation is applied when the kernel finishes.
    Tail,
}

/// Exact counts of the skipped CTAs.
#[derive(Clone, Debug, Default)]
struct Skipped {
    ctas: u64,
    warp_insts: u64,
    thread_insts: u64,
    op_counts: Vec<u64>,
    pipe_busy: [u64; gpusim_isa::UnitClass::ALL.len()],
    cuda_core_flops: u64,
    tensor_flops: u64,
}

/// The sampling state of one kernel.
#[derive(Clone, Debug)]
pub(crate) struct KernelSampler {
    opts: SampleOptions,
    phase: Phase,
    /// CTAs resident at once on a full GPU: one wave.
    wave: u64,
    /// Wave boundaries: the warm-up's end, then each measured wave's end.
    marks: Vec<Mark>,
    /// SMs that held a CTA of the kernel when the measurement ended.
    active_sms: u64,
    skipped: Skipped,
    overlapped: bool,
}

impl KernelSampler {
    /// The sampler of a kernel of `ctas` CTAs. Whether its grid is long enough is decided at its
    /// first retirement, when the number of CTAs resident at once (a wave) is known.
    pub(crate) fn new(opts: SampleOptions, ctas: u64) -> Option<KernelSampler> {
        let opts = opts.clamped();
        (ctas >= opts.min_waves()).then(|| KernelSampler {
            opts,
            phase: Phase::Measuring,
            wave: 0,
            marks: Vec::with_capacity(opts.measure_waves as usize + 1),
            active_sms: 0,
            skipped: Skipped::default(),
            overlapped: false,
        })
    }

    /// A CTA of `k` retired at `now`. `alone`: no other kernel is pulled and unfinished.
    pub(crate) fn on_retire(&mut self, k: &KernelRun, now: u64, alone: bool) {
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
        if self.wave == 0 {
            // The first retirement: every CTA placed so far was resident at once.
            self.wave = k.ctas_dispatched;
            if k.info.num_ctas() < self.wave.saturating_mul(self.opts.min_waves()) {
                self.phase = Phase::Off;
                return;
            }
        }
        let boundary = (self.opts.warmup_waves as u64 + self.marks.len() as u64) * self.wave;
        if k.ctas_done < boundary {
            return;
        }
        self.marks.push(Mark { cycle: now, stats: k.stats.clone() });
        if self.marks.len() <= self.opts.measure_waves as usize {
            return;
        }
        let tail = self.opts.tail_waves as u64 * self.wave;
        let left = k.info.num_ctas().saturating_sub(k.ctas_dispatched).saturating_sub(tail);
        let (first, last) = (&self.marks[0], &self.marks[self.marks.len() - 1]);
        let measured = last.stats.warp_insts > first.stats.warp_insts && last.cycle > first.cycle;
        if left >= self.wave && measured {
            self.active_sms = k.sm_resident.iter().filter(|r| r.0 > 0).count() as u64;
            self.phase = Phase::Skipping(left);
        } else {
            self.phase = Phase::Off;
        }
    }

    /// Whether the next CTA pulled is to be skipped.
    pub(crate) fn skipping(&self) -> bool {
        matches!(self.phase, Phase::Skipping(n) if n > 0)
    }

    /// Counts `cta` of `k` as skipped (the kernel's op timing must cover its ops).
    pub(crate) fn skip(&mut self, k: &KernelRun, cta: &CtaTrace) {
        let s = &mut self.skipped;
        s.op_counts.resize(k.timing.len(), 0);
        for (w, prog) in cta.warps.iter().enumerate() {
            prog.for_each_executed(cta.coord.as_array(), w as u32, |inst, n| {
                let Some(t) = k.timing.get(inst.op as usize) else { return };
                let lanes = inst.mask.count_ones() as u64;
                s.warp_insts = s.warp_insts.saturating_add(n);
                s.thread_insts = s.thread_insts.saturating_add(n.saturating_mul(lanes));
                s.op_counts[inst.op as usize] = s.op_counts[inst.op as usize].saturating_add(n);
                let busy = &mut s.pipe_busy[t.class.index()];
                *busy = busy.saturating_add(n.saturating_mul(t.interval as u64));
                s.cuda_core_flops =
                    s.cuda_core_flops.saturating_add(n.saturating_mul(t.flops_per_lane as u64).saturating_mul(lanes));
                s.tensor_flops = s.tensor_flops.saturating_add(n.saturating_mul(t.tensor_flops));
            });
        }
        s.ctas += 1;
        if let Phase::Skipping(n) = self.phase {
            self.phase = if n > 1 { Phase::Skipping(n - 1) } else { Phase::Tail };
        }
    }

    /// The kernel finished (its last detailed CTA retired): adds the skipped CTAs' counts and
    /// extrapolated cycles to `k` and records how it was sampled.
    pub(crate) fn finish(&self, k: &mut KernelRun) {
        let sk = &self.skipped;
        if sk.ctas == 0 || self.marks.len() < 2 {
            return;
        }
        let (first, last) = (&self.marks[0], &self.marks[self.marks.len() - 1]);
        let win_insts = last.stats.warp_insts - first.stats.warp_insts;
        // x × skipped instructions / window instructions, rounded to nearest, in integers.
        let scale = |x: u64| -> u64 {
            let num = x as u128 * sk.warp_insts as u128;
            let d = win_insts.max(1) as u128;
            u64::try_from((num + d / 2) / d).unwrap_or(u64::MAX)
        };
        let (a, b) = (&first.stats, &last.stats);
        let extra = scale(last.cycle - first.cycle);

        let st = &mut k.stats;
        st.warp_insts += sk.warp_insts;
        st.thread_insts += sk.thread_insts;
        for (i, n) in sk.op_counts.iter().enumerate() {
            if let Some(c) = st.op_counts.get_mut(i) {
                *c += n;
            }
        }
        for (i, n) in sk.pipe_busy.iter().enumerate() {
            st.pipe_busy[i] += n;
        }
        st.cuda_core_flops += sk.cuda_core_flops;
        st.tensor_flops += sk.tensor_flops;
        let mut resident = 0u64;
        for r in StallReason::ALL {
            let n = scale(b.stalls.get(r) - a.stalls.get(r));
            st.stalls.add(r, n);
            resident += n;
        }
        st.resident_warp_cycles += resident;
        st.sm_active_cycles += extra.saturating_mul(self.active_sms);
        let mut traffic = crate::stats::MemTraffic::default();
        {
            let (ta, tb) = (&a.traffic, &b.traffic);
            traffic.requested_bytes = scale(tb.requested_bytes - ta.requested_bytes);
            for (out, (la, lb)) in [
                (&mut traffic.l1, (&ta.l1, &tb.l1)),
                (&mut traffic.shared, (&ta.shared, &tb.shared)),
                (&mut traffic.l2, (&ta.l2, &tb.l2)),
                (&mut traffic.dram, (&ta.dram, &tb.dram)),
            ] {
                out.requests = scale(lb.requests - la.requests);
                out.sectors = scale(lb.sectors - la.sectors);
                out.bytes = scale(lb.bytes - la.bytes);
                out.hits = scale(lb.hits - la.hits);
                out.misses = scale(lb.misses - la.misses);
            }
        }
        st.traffic.merge(&traffic);

        // The tail ran after the skipped waves: its boundary moves with them.
        let decided = last.cycle;
        if let Some(m) = k.first_idle_slot.as_mut()
            && m.cycle >= decided
        {
            m.cycle += extra;
            m.requested_bytes += traffic.requested_bytes;
            m.l2_bytes += traffic.l2.bytes;
            m.dram_bytes += traffic.dram.bytes;
        }
        k.end += extra;

        // Spread of the measured waves' cycles per instruction, relative to their mean.
        let cpi: Vec<f64> = self
            .marks
            .windows(2)
            .map(|w| {
                let i = w[1].stats.warp_insts.saturating_sub(w[0].stats.warp_insts).max(1);
                (w[1].cycle - w[0].cycle) as f64 / i as f64
            })
            .collect();
        let mean = (last.cycle - first.cycle) as f64 / win_insts.max(1) as f64;
        let (lo, hi) = cpi.iter().fold((f64::INFINITY, 0f64), |(lo, hi), &c| (lo.min(c), hi.max(c)));
        let spread = if mean > 0.0 { ((hi - mean).max(mean - lo)) / mean } else { 0.0 };
        let cycles = k.end.saturating_sub(k.start.unwrap_or(0)).max(1);
        k.sampled = Some(Sampled {
            method: "waves".into(),
            detailed_ctas: k.ctas_done,
            skipped_ctas: sk.ctas,
            skipped_warp_instructions: sk.warp_insts,
            extrapolated_cycles: extra,
            measured_waves: (self.marks.len() - 1) as u32,
            error_pct: 100.0 * spread * extra as f64 / cycles as f64,
            overlapped: self.overlapped,
        });
    }
}

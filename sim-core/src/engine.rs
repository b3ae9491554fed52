//! The main loop: pulls kernels and CTAs from the trace, dispatches CTAs to SMs in launch order
//! while occupancy allows, steps the SMs that can issue, and skips cycles in which none can.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use gpusim_configs::Arch;
use gpusim_isa::{BufferedKernel, CtaTrace, KernelSource, TraceSource};

use crate::deps::Deps;
use crate::error::{SimError, SimErrorKind};
use crate::kernel_run::KernelRun;
use crate::mem::{self, MemorySystem};
use crate::observer::{CtaEvent, MemSample, NoObserver, Observer, SmSample};
use crate::occupancy::occupancy;
use crate::report::{Partial, Report, build_report, build_report_refs};
use crate::sample::{KernelSampler, SampleOptions};
use crate::sm::{CtaDone, Sm};

mod clusters;

/// Options of one run that are not properties of the chip.
#[derive(Clone, Debug, Default)]
pub struct SimOptions {
    /// Memory model by name (see [`crate::mem::MODELS`]), overriding the chip's
    /// `sim.memory_model`; `None` to use the chip's.
    pub memory_model: Option<String>,
    /// Stop at the next safe point once this is set (a caller's Ctrl-C handler sets it): the
    /// run ends with [`SimErrorKind::Interrupted`] and a partial report of everything so far.
    /// Read with a relaxed load every [`STOP_POLL`] steps of the event loop.
    pub stop: Option<Arc<AtomicBool>>,
    /// Sample long grids ([`crate::sample`]): skip steady waves and extrapolate them. `None`
    /// simulates every CTA in detail.
    pub sample: Option<SampleOptions>,
}

/// Event-loop steps between two looks at [`SimOptions::stop`].
pub const STOP_POLL: u32 = 1024;

impl SimOptions {
    /// The memory model a run of `arch` with these options uses.
    pub fn memory_model<'a>(&'a self, arch: &'a Arch) -> &'a str {
        self.memory_model.as_deref().unwrap_or(&arch.sim.memory_model)
    }
}

/// (kernel index, cluster index in launch order).
type ClusterKey = (u32, u64);
/// (rank in the cluster, SM, CTA slot on that SM).
type ClusterMember = (u64, u32, u16);

/// How many kernels the engine holds that still have CTAs to hand out, at most. A kernel that
/// waits (on its stream or a dependency) while the GPU has room lets the engine read on to later
/// kernels of the trace, up to this many: each may be read into memory to get past it. The CUDA
/// driver's default number of hardware work queues (`CUDA_DEVICE_MAX_CONNECTIONS`, 8) bounds
/// how far ahead a real GPU's front end looks in the same way.
pub const LOOKAHEAD_KERNELS: usize = 8;

/// Where a kernel's CTAs come from while it is not the trace's current kernel.
#[derive(Default)]
struct Feed {
    /// A source of its own (detached, or read into memory); `None` while it is the trace's
    /// current kernel or once every CTA has been handed out.
    src: Option<Box<dyn KernelSource>>,
    /// CTAs of clusters not yet complete, by cluster index in launch order.
    cluster_buf: BTreeMap<u64, Vec<CtaTrace>>,
    /// `Engine::retired` when the last search found no SM (no GPC, for a cluster) with room for
    /// the kernel's next CTA. Only a retirement frees resources, so until the count moves the
    /// search would fail again: it is skipped (on a grid of many waves, a search of every SM
    /// every cycle was most of the engine's own time, and cold host cache lines for the steps).
    full_at: Option<u64>,
}

/// Why [`Engine::run`] returned with the trace's current kernel still held.
enum Stop {
    /// The current kernel has handed out every CTA: pull the next kernel.
    CurrentDone,
    /// The current kernel cannot place a CTA now (it waits for a predecessor, or the GPU has no
    /// room for it while it may have room for another): let go of it and pull the next kernel.
    LookAhead,
}

struct Engine<'a, O: Observer> {
    arch: &'a Arch,
    obs: &'a mut O,
    memory_model: String,
    sms: Vec<Sm>,
    /// Each SM's `wake_at`, kept beside the SMs after every call that may change it (a step, a
    /// launch, a multicast landing): the loop scans this dense array every cycle instead of
    /// touching every SM's state.
    wake: Vec<u64>,
    mem: Box<dyn MemorySystem>,
    kernels: Vec<KernelRun>,
    feeds: Vec<Feed>,
    deps: Deps,
    /// Kernels pulled and not finished, in launch order.
    active: Vec<usize>,
    /// Per kernel: which SMs have received one of its CTAs (bit per SM).
    arrived: Vec<Vec<u64>>,
    events: BinaryHeap<Reverse<CtaDone>>,
    done_buf: Vec<CtaDone>,
    ready_buf: Vec<u32>,
    order_buf: Vec<usize>,
    now: u64,
    last_issue: u64,
    next_sm: usize,
    next_gpc: usize,
    /// CTAs retired so far (see `Feed::full_at`).
    retired: u64,
    /// Where each resident cluster's CTAs are: (kernel, cluster) → (rank, SM, CTA slot).
    clusters: BTreeMap<ClusterKey, Vec<ClusterMember>>,
    /// `sim.kernel_launch_latency` in SM cycles.
    launch_latency_cycles: u64,
    /// An error met while reading ahead of the kernels still running: raised once they have
    /// finished, so that their results are kept (`SimError::partial`).
    deferred: Option<SimErrorKind>,
    /// [`SimOptions::stop`], and the steps left until the next look at it.
    stop: Option<Arc<AtomicBool>>,
    stop_countdown: u32,
    /// Sampling: the interval, the next cycle to sample, and the buffer the samples go out in.
    sample_every: Option<u64>,
    next_sample: u64,
    samples: Vec<SmSample>,
    /// [`SimOptions::sample`], and each kernel's sampler (`None`: detailed throughout).
    sample: Option<SampleOptions>,
    samplers: Vec<Option<KernelSampler>>,
}

/// Whether kernel `kidx` runs alone: every other kernel pulled and unfinished waits for a
/// predecessor (so it cannot start before `kidx` ends). What sampling needs: it moves the
/// kernel's end, not what runs beside it.
fn runs_alone(active: &[usize], kernels: &[KernelRun], kidx: usize) -> bool {
    active.iter().all(|&j| j == kidx || kernels[j].launchable_at.is_none())
}

/// Runs every kernel of `source` on `arch`.
pub fn simulate(arch: &Arch, source: &mut dyn TraceSource, opts: &SimOptions) -> Result<Report, SimError> {
    simulate_observed(arch, source, opts, &mut NoObserver)
}

/// [`simulate`], telling `obs` what happens as it happens.
pub fn simulate_observed<O: Observer>(
    arch: &Arch,
    source: &mut dyn TraceSource,
    opts: &SimOptions,
    obs: &mut O,
) -> Result<Report, SimError> {
    let mut e = Engine::new(arch, opts, obs)?;
    let res = (|| {
        while e.deferred.is_none() {
            let mut ks = match source.next_kernel() {
                Ok(Some(ks)) => ks,
                Ok(None) => break,
                Err(t) => {
                    e.deferred = Some(SimErrorKind::Trace(t));
                    break;
                }
            };
            let Some(kidx) = e.add_kernel(&*ks) else { break };
            if let Stop::LookAhead = e.run(Some((kidx, &mut *ks)))? {
                e.detach(kidx, &mut *ks);
            }
        }
        e.run(None).map(|_| ())
    })();
    res.map(|_| build_report(arch, &e.memory_model, &e.kernels, e.now, e.mem.links()))
}

impl<'a, O: Observer> Engine<'a, O> {
    fn new(arch: &'a Arch, opts: &SimOptions, obs: &'a mut O) -> Result<Engine<'a, O>, SimError> {
        let err = |m: String| SimError { kind: SimErrorKind::Config(m), partial: None };
        let sms = (0..arch.sm.count).map(|i| Sm::new(i, arch)).collect::<Result<Vec<_>, _>>().map_err(err)?;
        let memory_model = opts.memory_model(arch).to_string();
        let mem = mem::build(&memory_model, arch).map_err(err)?;
        let sample_every = obs.sample_interval().filter(|&n| n > 0);
        Ok(Engine {
            arch,
            obs,
            memory_model,
            wake: vec![u64::MAX; sms.len()],
            sms,
            mem,
            kernels: Vec::new(),
            feeds: Vec::new(),
            deps: Deps::default(),
            active: Vec::new(),
            arrived: Vec::new(),
            events: BinaryHeap::new(),
            done_buf: Vec::new(),
            ready_buf: Vec::new(),
            order_buf: Vec::new(),
            now: 0,
            last_issue: 0,
            next_sm: 0,
            next_gpc: 0,
            retired: 0,
            clusters: BTreeMap::new(),
            launch_latency_cycles: arch.sim.kernel_launch_latency.to_cycles(arch.clocks.sm).0,
            deferred: None,
            stop: opts.stop.clone(),
            stop_countdown: STOP_POLL,
            sample_every,
            next_sample: sample_every.unwrap_or(u64::MAX),
            samples: Vec::new(),
            sample: opts.sample,
            samplers: Vec::new(),
        })
    }

    /// An error that keeps the report of the kernels that finished.
    fn fail(&self, kind: SimErrorKind) -> SimError {
        let finished: Vec<&KernelRun> = self.kernels.iter().filter(|k| k.finished()).collect();
        let partial = if finished.is_empty() {
            None
        } else {
            let end = finished.iter().map(|k| k.end).max().unwrap_or(0);
            let mut r = build_report_refs(self.arch, &self.memory_model, &finished, end, self.mem.links());
            r.partial = Some(Partial { reason: "error".into(), at_cycle: self.now, cut_short: Vec::new() });
            Some(Box::new(r))
        };
        SimError { kind, partial }
    }

    /// Stopped on request at cycle `now`: the report holds the finished kernels and, cut at
    /// `now`, those that had started (their counts are what they did so far).
    fn interrupted(&mut self) -> SimError {
        let now = self.now;
        for sm in &mut self.sms {
            sm.account_until(now, &mut self.kernels);
        }
        let mut cut_short = Vec::new();
        for k in self.kernels.iter_mut().filter(|k| !k.finished() && k.start.is_some()) {
            k.end = now;
            cut_short.push(k.info.id);
        }
        let shown: Vec<&KernelRun> = self.kernels.iter().filter(|k| k.start.is_some()).collect();
        let mut r = build_report_refs(self.arch, &self.memory_model, &shown, now, self.mem.links());
        r.partial = Some(Partial { reason: "interrupted".into(), at_cycle: now, cut_short });
        SimError { kind: SimErrorKind::Interrupted { cycle: now }, partial: Some(Box::new(r)) }
    }

    /// Registers a kernel pulled from the trace. `None` when it cannot launch at all (the error
    /// is deferred until the kernels before it have run).
    fn add_kernel(&mut self, ks: &dyn KernelSource) -> Option<usize> {
        let info = ks.info().clone();
        let occ = match occupancy(self.arch, &info) {
            Ok(o) => o,
            Err(reason) => {
                self.deferred = Some(SimErrorKind::Launch { kernel: info.name.clone(), reason });
                return None;
            }
        };
        let idx = self.kernels.len();
        let mut k = KernelRun::new(info, occ, self.sms.len());
        k.sync_ops(ks.ops(), self.arch);
        let kernels = &self.kernels;
        let ready = self.deps.add(idx, k.info.stream, &k.info.deps, |d| kernels[d].finished().then(|| kernels[d].end));
        let slots = k.occupancy.ctas_per_sm as u64 * self.sms.len() as u64;
        let clustered = k.info.cluster.count() > 1;
        self.samplers.push(
            self.sample.and_then(|o| KernelSampler::new(o, k.info.num_ctas(), slots, clustered, self.arch.l2.size.0)),
        );
        self.kernels.push(k);
        self.feeds.push(Feed::default());
        self.arrived.push(vec![0; self.sms.len().div_ceil(64)]);
        self.active.push(idx);
        if ready {
            self.set_launchable(idx);
        }
        Some(idx)
    }

    /// Kernel `idx` has no unfinished predecessor: it launches the launch mode's gap
    /// (`SimParams::launch_gap`: `sim.kernel_launch_overhead` eager, `sim.graph_launch_overhead`
    /// under a CUDA graph) after the last of them ended, or at cycle 0 when it has none (the host queues every
    /// launch at once; a trace carries no host timing), and its CTAs may start
    /// `sim.kernel_launch_latency` later. The launch may lie before `now` when the engine reads
    /// the kernel late (behind a kernel of another stream): its time still runs from it.
    fn set_launchable(&mut self, idx: usize) {
        let pred = self.deps.latest_predecessor(idx);
        let launched = match pred {
            Some((end, _)) => end + self.arch.sim.launch_gap().0,
            None => 0,
        };
        let gated_by = pred.map(|(_, p)| self.kernels[p as usize].info.id);
        let k = &mut self.kernels[idx];
        k.launched_at = launched;
        k.launchable_at = Some(launched + self.launch_latency_cycles);
        k.gated_by = gated_by;
    }

    /// Lets go of the trace's current kernel `kidx`, keeping the rest of its CTAs: detached at no
    /// cost where its source allows, else read into memory.
    fn detach(&mut self, kidx: usize, ks: &mut dyn KernelSource) {
        if self.feeds[kidx].src.is_some() {
            return; // detached already (`should_look_ahead`)
        }
        let src = match ks.detach() {
            Some(s) => s,
            None => Box::new(BufferedKernel::drain(ks)),
        };
        self.feeds[kidx].src = Some(src);
    }

    /// Simulates until the current kernel (`Some`) has handed out every CTA or should be let go
    /// of ([`Stop`]), or (with `None`) until every kernel pulled has finished.
    fn run(&mut self, mut current: Option<(usize, &mut dyn KernelSource)>) -> Result<Stop, SimError> {
        let watchdog = self.arch.sim.watchdog_cycles.0.max(1);
        loop {
            self.stop_countdown -= 1;
            if self.stop_countdown == 0 {
                self.stop_countdown = STOP_POLL;
                if self.stop.as_ref().is_some_and(|s| s.load(Ordering::Relaxed)) {
                    return Err(self.interrupted());
                }
            }
            self.retire_due();
            // CTAs go out in launch order of their kernels: a later kernel gets what an earlier
            // one leaves free.
            let mut order = std::mem::take(&mut self.order_buf);
            order.clear();
            order.extend_from_slice(&self.active);
            for &kidx in &order {
                match current.as_mut() {
                    Some((cur, ks)) if *cur == kidx => self.dispatch(kidx, &mut **ks)?,
                    _ => {
                        if let Some(mut src) = self.feeds[kidx].src.take() {
                            let r = self.dispatch(kidx, &mut *src);
                            if !self.handed_out(kidx) {
                                self.feeds[kidx].src = Some(src);
                            }
                            r?;
                        }
                    }
                }
            }
            self.order_buf = order;
            if let Some((kidx, ks)) = current.as_mut() {
                let kidx = *kidx;
                if self.handed_out(kidx) {
                    return Ok(Stop::CurrentDone);
                }
                if self.should_look_ahead(kidx, &mut **ks) {
                    return Ok(Stop::LookAhead);
                }
            } else if self.active.is_empty() {
                return match self.deferred.take() {
                    Some(kind) => Err(self.fail(kind)),
                    None => Ok(Stop::CurrentDone),
                };
            }

            let now = self.now;
            // The SMs due this cycle, in order; the next one due is prefetched while this one
            // steps. One pass over the wake cycles also finds the earliest of them after the
            // step (`wake_min`): an SM passed over is not due, and a stepped one gives its new
            // wake cycle. A step changes no other SM's wake cycle; a multicast it sends may, so
            // after a delivery the next one due is looked for again and the minimum is taken
            // over every SM.
            let mut wake_min = u64::MAX;
            let mut rescan = false;
            let mut due = due_from(&self.wake, 0, now, &mut wake_min);
            while let Some(i) = due {
                due = due_from(&self.wake, i + 1, now, &mut wake_min);
                if let Some(j) = due {
                    self.sms[j].prefetch();
                }
                if self.sms[i].step(now, &mut self.kernels, &mut *self.mem, &mut self.done_buf) {
                    self.last_issue = now;
                }
                self.wake[i] = self.sms[i].wake_at;
                wake_min = wake_min.min(self.wake[i]);
                // Only a step fills the outbox.
                if !self.sms[i].outbox.is_empty() {
                    self.deliver_multicast(i, now);
                    rescan = true;
                    due = due_from(&self.wake, i + 1, now, &mut wake_min);
                }
            }
            for d in self.done_buf.drain(..) {
                self.events.push(Reverse(d));
            }
            if self.sample.is_some() {
                self.poll_samplers(now);
            }

            // Next cycle at which anything can happen.
            let mut next = if rescan { self.wake.iter().copied().min().unwrap_or(u64::MAX) } else { wake_min };
            if let Some(Reverse(d)) = self.events.peek() {
                next = next.min(d.at);
            }
            for &kidx in &self.active {
                if let Some(at) = self.kernels[kidx].launchable_at
                    && at > now
                {
                    next = next.min(at);
                }
            }
            if next == u64::MAX {
                if let Some(kind) = self.deferred.take() {
                    return Err(self.fail(kind));
                }
                return Err(self.watchdog(now));
            }
            let next = next.max(now + 1);
            if next - self.last_issue > watchdog
                && self.events.peek().is_none_or(|Reverse(d)| d.at > self.last_issue + watchdog)
            {
                return Err(self.watchdog(next));
            }
            self.sample_until(next);
            self.now = next;
        }
    }

    /// Loop-mode sampling: records each sampled kernel's measurement milestones and, once its
    /// throughput is steady, makes every CTA skip the same iterations of its main loop.
    fn poll_samplers(&mut self, now: u64) {
        for i in 0..self.active.len() {
            let kidx = self.active[i];
            let k = &self.kernels[kidx];
            let Some(s) = self.samplers[kidx].as_mut() else { continue };
            if let Some(it) = s.iters.as_mut() {
                it.poll(now, &self.sms);
                continue;
            }
            // Milestones count from every CTA placed (a one-wave grid places them all at once;
            // its source learns it is exhausted only when a slot frees, at the end).
            if k.ctas_dispatched < k.info.num_ctas() || !s.loop_mode() || !s.poll(k, now) {
                continue;
            }
            let alone = runs_alone(&self.active, &self.kernels, kidx);
            let tail = s.tail_eighths();
            // Every CTA must skip the same number of iterations (or none may): the room each has
            // left before its tail bounds it.
            let mut room = u64::MAX;
            let all_resident = k.ctas_done == 0;
            for sm in &self.sms {
                room = room.min(sm.loop_skip_room(kidx as u32, tail));
            }
            let count = if room == u64::MAX { 0 } else { s.plan_skip(room) };
            if !alone || !all_resident || count == 0 {
                // `room` 0: a CTA cannot skip now (a warp short of the last jump); a positive
                // room too small for a block only shrinks.
                s.stop_skipping(alone && all_resident && room == 0);
                continue;
            }
            s.open_block();
            for sm in &mut self.sms {
                sm.skip_loop_iterations(kidx as u32, count, &mut |prog, params, nest| {
                    s.skip_body(&self.kernels[kidx], prog, params, nest, count);
                });
            }
            s.skipping_loops(count);
        }
    }

    /// Whether kernel `kidx` has placed every CTA of its grid.
    fn handed_out(&self, kidx: usize) -> bool {
        self.kernels[kidx].source_done && self.feeds[kidx].cluster_buf.is_empty()
    }

    /// Whether to let go of the current kernel `kidx` and read the next one: it is waiting for a
    /// predecessor, or it is running but no SM has room for its next CTA and it can be detached
    /// at no cost (another stream's kernel may fit where it does not). Never beyond
    /// [`LOOKAHEAD_KERNELS`] kernels with CTAs left.
    fn should_look_ahead(&mut self, kidx: usize, ks: &mut dyn KernelSource) -> bool {
        let pending = self.active.iter().filter(|&&k| !self.kernels[k].source_done).count();
        if pending >= LOOKAHEAD_KERNELS {
            return false;
        }
        match self.kernels[kidx].launchable_at {
            None => true,
            Some(at) if at <= self.now => match ks.detach() {
                Some(src) => {
                    self.feeds[kidx].src = Some(src);
                    true
                }
                None => false,
            },
            Some(_) => false,
        }
    }

    /// Calls the observer's `sample` for every sampling point before `next`.
    fn sample_until(&mut self, next: u64) {
        let Some(every) = self.sample_every else { return };
        while self.next_sample < next {
            self.samples.clear();
            self.samples.extend(self.sms.iter().map(|s| {
                let (ctas, warps) = s.resident();
                SmSample { sm: s.id, resident_ctas: ctas, resident_warps: warps, warp_instructions: s.issued }
            }));
            self.obs.sample(self.next_sample, &self.samples);
            let mut m = MemSample::default();
            for k in &self.kernels {
                let t = &k.stats.traffic;
                m.dram_bytes += t.dram.bytes;
                m.l2_bytes += t.l2.bytes;
                m.l2_hits += t.l2.hits;
                m.l2_misses += t.l2.misses;
            }
            self.obs.memory_sample(self.next_sample, &m);
            self.next_sample = self.next_sample.saturating_add(every);
        }
    }

    fn watchdog(&self, cycle: u64) -> SimError {
        let mut stuck = Vec::new();
        for sm in &self.sms {
            sm.describe_stuck(&self.kernels, &mut stuck);
        }
        self.fail(SimErrorKind::Watchdog { cycle, idle_cycles: cycle.saturating_sub(self.last_issue), stuck })
    }

    /// Frees CTAs that finished by now and updates kernel completion.
    fn retire_due(&mut self) {
        while let Some(Reverse(d)) = self.events.peek().copied() {
            if d.at > self.now {
                break;
            }
            self.events.pop();
            let kidx = self.sms[d.sm as usize].cta_kernel(d.cta_slot) as usize;
            if self.kernels[kidx].info.cluster.count() > 1 {
                let (sm, slot) = (d.sm, d.cta_slot);
                self.clusters.retain(|_, v| {
                    v.retain(|&(_, s2, c2)| !(s2 == sm && c2 == slot));
                    !v.is_empty()
                });
            }
            let coord = self.sms[d.sm as usize].cta_coord(d.cta_slot);
            let k = &mut self.kernels[kidx];
            self.sms[d.sm as usize].retire(d.cta_slot, d.at, k);
            self.retired += 1;
            k.ctas_done += 1;
            let alone = runs_alone(&self.active, &self.kernels, kidx);
            let k = &mut self.kernels[kidx];
            if let Some(s) = self.samplers[kidx].as_mut() {
                if let Some(it) = s.iters.as_mut() {
                    it.retired(d.sm, d.cta_slot, d.at, alone);
                }
                s.on_retire(k, d.at, alone);
            }
            if k.first_retire.is_none() {
                k.first_retire = Some(k.mark(d.at));
            }
            k.end = k.end.max(d.at);
            self.last_issue = self.last_issue.max(d.at);
            self.obs.cta_retire(&CtaEvent { kernel: k.info.id, cta: coord, sm: d.sm, cycle: d.at });
            if k.finished() {
                self.finish_kernel(kidx);
            }
        }
    }

    /// Kernel `kidx` retired its last CTA: its successors may launch.
    fn finish_kernel(&mut self, kidx: usize) {
        if let Some(s) = self.samplers[kidx].take() {
            // The skipped waves' cycles: the kernel ends that much later, and the engine idles
            // through them (nothing else runs: sampling needs the kernel to be alone).
            s.finish(&mut self.kernels[kidx]);
            self.last_issue = self.last_issue.max(self.kernels[kidx].end);
        }
        let end = self.kernels[kidx].end;
        self.obs.kernel_end(&self.kernels[kidx].info, end);
        self.active.retain(|&k| k != kidx);
        self.feeds[kidx] = Feed::default();
        let mut ready = std::mem::take(&mut self.ready_buf);
        self.deps.finish(kidx, end, &mut ready);
        for &j in &ready {
            self.set_launchable(j as usize);
        }
        ready.clear();
        self.ready_buf = ready;
    }

    /// Launches CTAs of `kidx` in order while SMs have room. CTAs of a thread-block cluster
    /// launch together, on SMs of one GPC.
    fn dispatch(&mut self, kidx: usize, ks: &mut dyn KernelSource) -> Result<(), SimError> {
        let Some(at) = self.kernels[kidx].launchable_at else { return Ok(()) };
        if at > self.now || self.handed_out(kidx) {
            return Ok(());
        }
        if self.kernels[kidx].info.cluster.count() > 1 {
            return self.dispatch_clusters(kidx, ks);
        }
        if self.feeds[kidx].full_at == Some(self.retired) {
            return Ok(());
        }
        let n = self.sms.len();
        loop {
            let Some(off) = (0..n).find(|&o| self.sms[(self.next_sm + o) % n].fits(&self.kernels[kidx])) else {
                self.feeds[kidx].full_at = Some(self.retired);
                return Ok(());
            };
            let sm = (self.next_sm + off) % n;
            let Some(cta) = self.pull(kidx, ks)? else {
                self.note_idle_slot(kidx);
                return Ok(());
            };
            self.place(kidx, sm, cta);
        }
    }

    /// A slot of `kidx` is free and the grid has no CTA left for it: the steady window ends here
    /// (if it began: a grid of one wave has none).
    fn note_idle_slot(&mut self, kidx: usize) {
        let k = &mut self.kernels[kidx];
        if k.first_retire.is_some() && k.first_idle_slot.is_none() {
            k.first_idle_slot = Some(k.mark(self.now));
        }
    }

    /// The next CTA from the trace (checked), or `None` when the kernel has handed out all.
    fn pull(&mut self, kidx: usize, ks: &mut dyn KernelSource) -> Result<Option<CtaTrace>, SimError> {
        loop {
            let cta = self.pull_one(kidx, ks)?;
            if let Some(c) = &cta
                && self.kernels[kidx].info.cluster.count() <= 1
                && self.samplers[kidx].as_ref().is_some_and(|s| s.skipping())
            {
                let alone = runs_alone(&self.active, &self.kernels, kidx);
                if let Some(s) = self.samplers[kidx].as_mut() {
                    s.skip(&self.kernels[kidx], c, alone);
                }
                continue;
            }
            return Ok(cta);
        }
    }

    /// [`Engine::pull`] without sampling.
    fn pull_one(&mut self, kidx: usize, ks: &mut dyn KernelSource) -> Result<Option<CtaTrace>, SimError> {
        let cta = match ks.next_cta() {
            Ok(Some(c)) => c,
            Ok(None) => {
                let k = &mut self.kernels[kidx];
                k.source_done = true;
                if k.ctas_dispatched == 0 {
                    // An empty grid: it starts and ends here.
                    k.start = Some(self.now);
                    k.end = self.now;
                    self.obs.kernel_start(&self.kernels[kidx].info, self.now);
                }
                if self.kernels[kidx].finished() {
                    // Its last CTA retired before the source said it had no more.
                    self.finish_kernel(kidx);
                }
                return Ok(None);
            }
            Err(t) => {
                self.break_kernel(kidx, SimErrorKind::Trace(t));
                return Ok(None);
            }
        };
        let k = &mut self.kernels[kidx];
        k.sync_ops(ks.ops(), self.arch);
        if cta.warps.len() as u32 != k.occupancy.warps_per_cta {
            let reason = format!(
                "CTA {} has {} warp programs, the block needs {}",
                cta.coord,
                cta.warps.len(),
                k.occupancy.warps_per_cta
            );
            let kernel = self.kernels[kidx].info.name.clone();
            self.break_kernel(kidx, SimErrorKind::Launch { kernel, reason });
            return Ok(None);
        }
        Ok(Some(cta))
    }

    /// Kernel `kidx` cannot go on (its trace is malformed or truncated): it gets no more CTAs and
    /// never finishes. The error is raised once the other kernels have run as far as they can,
    /// so that every kernel that can finish is in the partial report.
    fn break_kernel(&mut self, kidx: usize, kind: SimErrorKind) {
        let k = &mut self.kernels[kidx];
        k.broken = true;
        k.source_done = true;
        self.feeds[kidx].cluster_buf.clear();
        if self.deferred.is_none() {
            self.deferred = Some(kind);
        }
    }

    /// Launches `cta` of `kidx` on SM `sm`.
    fn place(&mut self, kidx: usize, sm: usize, cta: CtaTrace) {
        let k = &mut self.kernels[kidx];
        if k.start.is_none() {
            // The kernel's time runs from its launch: the launch latency is part of it.
            let start = k.launched_at.min(self.now);
            k.start = Some(start);
            self.obs.kernel_start(&k.info, start);
        }
        let bit = &mut self.arrived[kidx][sm / 64];
        if *bit & (1 << (sm % 64)) == 0 {
            *bit |= 1 << (sm % 64);
            let shared = k.occupancy.smem_per_cta * k.occupancy.ctas_per_sm as u64;
            let idle = self.sms[sm].resident().0 == 0;
            self.mem.kernel_arrives(sm as u32, shared, idle);
        }
        self.obs.cta_launch(&CtaEvent { kernel: k.info.id, cta: cta.coord, sm: sm as u32, cycle: self.now });
        k.ctas_dispatched += 1;
        let clustered = k.info.cluster.count() > 1;
        let key = (kidx as u32, crate::sm::cluster_id(&k.info, cta.coord));
        let rank = crate::sm::cluster_rank_of(&k.info, cta.coord);
        if let Some(s) = self.samplers[kidx].as_mut() {
            s.placed(&cta, k.info.grid, &k.timing);
        }
        let slot = self.sms[sm].launch(self.now, kidx as u32, k, cta, &mut self.done_buf);
        if let Some(it) = self.samplers[kidx].as_mut().and_then(|s| s.iters.as_mut()) {
            let alone = runs_alone(&self.active, &self.kernels, kidx);
            it.placed(&self.kernels[kidx], &mut self.sms[sm], slot, self.now, alone);
        }
        self.wake[sm] = self.sms[sm].wake_at;
        if clustered {
            self.clusters.entry(key).or_default().push((rank, sm as u32, slot));
        }
        self.next_sm = (sm + 1) % self.sms.len();
        self.last_issue = self.last_issue.max(self.now);
        for d in self.done_buf.drain(..) {
            self.events.push(Reverse(d));
        }
    }
}

/// The first SM at or after `from` due at `now` (its wake cycle is not later), folding the wake
/// cycles of the SMs passed over into `min`.
///
/// Four wake cycles at a time, each group's minimum a tree of its four: while few SMs are due
/// (a pointer chase, a kernel's tail, a grid of a few CTAs), this scan is the engine's main
/// work every cycle, and one running minimum over 132 SMs is a chain of 132 dependent
/// compare-and-moves. The answer is that of the plain loop.
#[inline]
fn due_from(wake: &[u64], from: usize, now: u64, min: &mut u64) -> Option<usize> {
    let rest = &wake[from..];
    // A dense run (every SM due every cycle) finds the next one due at once.
    if rest.first().is_some_and(|&w| w <= now) {
        return Some(from);
    }
    let mut groups = rest.chunks_exact(4);
    let mut at = from;
    for g in &mut groups {
        if (g[0] <= now) | (g[1] <= now) | (g[2] <= now) | (g[3] <= now) {
            return due_in(g, at, now, min);
        }
        *min = (*min).min(g[0].min(g[1]).min(g[2].min(g[3])));
        at += 4;
    }
    due_in(groups.remainder(), at, now, min)
}

/// [`due_from`] over a few wake cycles, one at a time (`at`: the first one's SM).
#[inline]
fn due_in(wake: &[u64], at: usize, now: u64, min: &mut u64) -> Option<usize> {
    for (j, &w) in wake.iter().enumerate() {
        if w <= now {
            return Some(at + j);
        }
        *min = (*min).min(w);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::due_from;

    /// The grouped scan answers as the plain loop: the same SM due and the same minimum over the
    /// SMs passed over, from every start, on chips of any size (groups and remainders).
    #[test]
    fn due_from_answers_as_the_plain_scan() {
        fn plain(wake: &[u64], from: usize, now: u64, min: &mut u64) -> Option<usize> {
            for (j, &w) in wake[from..].iter().enumerate() {
                if w <= now {
                    return Some(from + j);
                }
                *min = (*min).min(w);
            }
            None
        }
        let mut next = crate::test_rng::xorshift(0x1234_5678_9abc_def1u64);
        for _ in 0..20_000 {
            let n = 1 + next(140) as usize;
            let wake: Vec<u64> = (0..n).map(|_| if next(4) == 0 { u64::MAX } else { next(100) }).collect();
            let (from, now) = (next(n as u64 + 1) as usize, next(100));
            let min0 = next(200);
            let (mut a, mut b) = (min0, min0);
            assert_eq!(due_from(&wake, from, now, &mut a), plain(&wake, from, now, &mut b), "{wake:?} {from} {now}");
            assert_eq!(a, b, "{wake:?} {from} {now}");
        }
    }
}

//! The main loop: pulls kernels and CTAs from the trace, dispatches CTAs to SMs in launch order
//! while occupancy allows, steps the SMs that can issue, and skips cycles in which none can.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use gpusim_configs::Arch;
use gpusim_isa::{CtaTrace, KernelSource, TraceSource};

use crate::error::{SimError, SimErrorKind};
use crate::kernel_run::KernelRun;
use crate::mem::{self, MemorySystem};
use crate::occupancy::occupancy;
use crate::report::{Report, build_report};
use crate::sm::{CtaDone, Sm};

/// Options of one run that are not properties of the chip.
#[derive(Clone, Debug)]
pub struct SimOptions {
    /// Memory model by name (see [`crate::mem::MODELS`]).
    pub memory_model: String,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions { memory_model: "hierarchy".into() }
    }
}

/// (kernel index, cluster index in launch order).
type ClusterKey = (u32, u64);
/// (rank in the cluster, SM, CTA slot on that SM).
type ClusterMember = (u64, u32, u16);

struct Engine<'a> {
    arch: &'a Arch,
    sms: Vec<Sm>,
    mem: Box<dyn MemorySystem>,
    kernels: Vec<KernelRun>,
    events: BinaryHeap<Reverse<CtaDone>>,
    done_buf: Vec<CtaDone>,
    now: u64,
    last_issue: u64,
    next_sm: usize,
    next_gpc: usize,
    /// CTAs of clusters not yet complete, by cluster index in launch order.
    cluster_buf: BTreeMap<u64, Vec<CtaTrace>>,
    /// Where each resident cluster's CTAs are: (kernel, cluster) → (rank, SM, CTA slot).
    clusters: BTreeMap<ClusterKey, Vec<ClusterMember>>,
    /// `sim.kernel_launch_latency` in SM cycles.
    launch_latency_cycles: u64,
}

/// Runs every kernel of `source` on `arch`.
pub fn simulate(arch: &Arch, source: &mut dyn TraceSource, opts: &SimOptions) -> Result<Report, SimError> {
    let mut e = Engine::new(arch, opts)?;
    let res = (|| {
        while let Some(mut ks) = source.next_kernel().map_err(|t| e.fail(SimErrorKind::Trace(t)))? {
            let kidx = e.add_kernel(&*ks)?;
            e.run(Some((kidx, &mut *ks)))?;
        }
        e.run(None)
    })();
    res.map(|_| build_report(arch, opts, &e.kernels, e.now, e.mem.links()))
}

impl<'a> Engine<'a> {
    fn new(arch: &'a Arch, opts: &SimOptions) -> Result<Engine<'a>, SimError> {
        let err = |m: String| SimError { kind: SimErrorKind::Config(m), partial: None };
        let sms = (0..arch.sm.count).map(|i| Sm::new(i, arch)).collect::<Result<Vec<_>, _>>().map_err(err)?;
        let mem = mem::build(&opts.memory_model, arch).map_err(err)?;
        Ok(Engine {
            arch,
            sms,
            mem,
            kernels: Vec::new(),
            events: BinaryHeap::new(),
            done_buf: Vec::new(),
            now: 0,
            last_issue: 0,
            next_sm: 0,
            next_gpc: 0,
            cluster_buf: BTreeMap::new(),
            clusters: BTreeMap::new(),
            launch_latency_cycles: arch.sim.kernel_launch_latency.to_cycles(arch.clocks.sm).0,
        })
    }

    /// An error that keeps the report of the kernels that finished.
    fn fail(&self, kind: SimErrorKind) -> SimError {
        let finished: Vec<usize> = (0..self.kernels.len()).filter(|&i| self.kernels[i].finished()).collect();
        let partial = if finished.is_empty() {
            None
        } else {
            let end = finished.iter().map(|&i| self.kernels[i].end).max().unwrap_or(0);
            let ks: Vec<&KernelRun> = finished.iter().map(|&i| &self.kernels[i]).collect();
            Some(Box::new(crate::report::build_report_refs(self.arch, "partial", &ks, end, self.mem.links())))
        };
        SimError { kind, partial }
    }

    fn add_kernel(&mut self, ks: &dyn KernelSource) -> Result<usize, SimError> {
        let info = ks.info().clone();
        let occ = occupancy(self.arch, &info)
            .map_err(|reason| self.fail(SimErrorKind::Launch { kernel: info.name.clone(), reason }))?;
        let idx = self.kernels.len();
        let mut k = KernelRun::new(info, occ, self.sms.len());
        k.sync_ops(ks.ops(), self.arch);
        self.kernels.push(k);
        self.update_launchable(idx);
        Ok(idx)
    }

    /// Kernels this one waits for: its explicit dependencies and the previous kernel of its stream.
    fn deps(&self, idx: usize) -> Vec<usize> {
        let k = &self.kernels[idx];
        let mut d: Vec<usize> = k.info.deps.iter().map(|&x| x as usize).filter(|&x| x < idx).collect();
        if let Some(prev) = (0..idx).rev().find(|&j| self.kernels[j].info.stream == k.info.stream) {
            d.push(prev);
        }
        d
    }

    fn update_launchable(&mut self, idx: usize) {
        if self.kernels[idx].launchable_at.is_some() {
            return;
        }
        let deps = self.deps(idx);
        if deps.iter().all(|&d| self.kernels[d].finished()) {
            let after = deps.iter().map(|&d| self.kernels[d].end).max();
            let at = match after {
                Some(end) => end + self.arch.sim.kernel_launch_overhead.0,
                None => self.now,
            };
            let launched = at.max(self.now);
            self.kernels[idx].launched_at = launched;
            self.kernels[idx].launchable_at = Some(launched + self.launch_latency_cycles);
        }
    }

    /// Simulates until `current`'s trace has handed out every CTA, or (with `None`) until every
    /// kernel has finished.
    fn run(&mut self, mut current: Option<(usize, &mut dyn KernelSource)>) -> Result<(), SimError> {
        let watchdog = self.arch.sim.watchdog_cycles.0.max(1);
        loop {
            self.retire_due();
            if let Some((kidx, ks)) = current.as_mut() {
                self.dispatch(*kidx, &mut **ks)?;
                if self.kernels[*kidx].source_done && self.cluster_buf.is_empty() {
                    return Ok(());
                }
            } else if self.kernels.iter().all(|k| k.finished()) {
                return Ok(());
            }

            let now = self.now;
            for i in 0..self.sms.len() {
                if self.sms[i].wake_at <= now
                    && self.sms[i].step(now, &mut self.kernels, &mut *self.mem, &mut self.done_buf)
                {
                    self.last_issue = now;
                }
                if !self.sms[i].outbox.is_empty() {
                    self.deliver_multicast(i, now);
                }
            }
            for d in self.done_buf.drain(..) {
                self.events.push(Reverse(d));
            }

            // Next cycle at which anything can happen.
            let mut next = self.sms.iter().map(|s| s.wake_at).min().unwrap_or(u64::MAX);
            if let Some(Reverse(d)) = self.events.peek() {
                next = next.min(d.at);
            }
            if let Some((kidx, _)) = current.as_ref()
                && let Some(at) = self.kernels[*kidx].launchable_at
                && at > now
            {
                next = next.min(at);
            }
            if next == u64::MAX {
                return Err(self.watchdog(now));
            }
            let next = next.max(now + 1);
            if next - self.last_issue > watchdog
                && self.events.peek().is_none_or(|Reverse(d)| d.at > self.last_issue + watchdog)
            {
                return Err(self.watchdog(next));
            }
            self.now = next;
        }
    }

    fn watchdog(&self, cycle: u64) -> SimError {
        let mut stuck = Vec::new();
        for sm in &self.sms {
            sm.describe_stuck(&self.kernels, &mut stuck);
        }
        self.fail(SimErrorKind::Watchdog { cycle, idle_cycles: cycle.saturating_sub(self.last_issue), stuck })
    }

    /// Hands the multicast bytes SM `from` produced this cycle to the other CTAs of their clusters.
    fn deliver_multicast(&mut self, from: usize, now: u64) {
        let out = std::mem::take(&mut self.sms[from].outbox);
        for tx in &out {
            let Some(members) = self.clusters.get(&(tx.kernel, tx.cluster)) else { continue };
            for &(rank, sm, slot) in members {
                if rank < 32 && tx.ranks & (1 << rank) != 0 {
                    self.sms[sm as usize].mbar_remote_tx(slot, tx.addr, tx.done, tx.bytes, now);
                }
            }
        }
        let mut out = out;
        out.clear();
        self.sms[from].outbox = out;
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
            let k = &mut self.kernels[kidx];
            self.sms[d.sm as usize].retire(d.cta_slot, d.at, k);
            k.ctas_done += 1;
            if k.first_retire.is_none() {
                k.first_retire = Some(k.mark(d.at));
            }
            k.end = k.end.max(d.at);
            self.last_issue = self.last_issue.max(d.at);
            if k.finished() {
                for j in 0..self.kernels.len() {
                    self.update_launchable(j);
                }
            }
        }
    }

    /// Launches CTAs of `kidx` in order while SMs have room. CTAs of a thread-block cluster
    /// launch together, on SMs of one GPC.
    fn dispatch(&mut self, kidx: usize, ks: &mut dyn KernelSource) -> Result<(), SimError> {
        let Some(at) = self.kernels[kidx].launchable_at else { return Ok(()) };
        if at > self.now || self.kernels[kidx].source_done && self.cluster_buf.is_empty() {
            return Ok(());
        }
        if self.kernels[kidx].info.cluster.count() > 1 {
            return self.dispatch_clusters(kidx, ks);
        }
        let n = self.sms.len();
        loop {
            let Some(off) = (0..n).find(|&o| self.sms[(self.next_sm + o) % n].fits(&self.kernels[kidx])) else {
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
        let cta = match ks.next_cta() {
            Ok(Some(c)) => c,
            Ok(None) => {
                let k = &mut self.kernels[kidx];
                k.source_done = true;
                if k.ctas_dispatched == 0 {
                    k.start = Some(self.now);
                    k.end = self.now;
                }
                return Ok(None);
            }
            Err(t) => return Err(self.fail(SimErrorKind::Trace(t))),
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
            return Err(self.fail(SimErrorKind::Launch { kernel: self.kernels[kidx].info.name.clone(), reason }));
        }
        Ok(Some(cta))
    }

    /// Launches `cta` of `kidx` on SM `sm`.
    fn place(&mut self, kidx: usize, sm: usize, cta: CtaTrace) {
        let k = &mut self.kernels[kidx];
        if k.start.is_none() {
            // The kernel's time runs from its launch: the launch latency is part of it.
            k.start = Some(k.launched_at.min(self.now));
            let shared = k.occupancy.smem_per_cta * k.occupancy.ctas_per_sm as u64;
            self.mem.begin_kernel(shared);
        }
        k.ctas_dispatched += 1;
        let clustered = k.info.cluster.count() > 1;
        let key = (kidx as u32, crate::sm::cluster_id(&k.info, cta.coord));
        let rank = crate::sm::cluster_rank_of(&k.info, cta.coord);
        let slot = self.sms[sm].launch(self.now, kidx as u32, k, cta, &mut self.done_buf);
        if clustered {
            self.clusters.entry(key).or_default().push((rank, sm as u32, slot));
        }
        self.next_sm = (sm + 1) % self.sms.len();
        self.last_issue = self.last_issue.max(self.now);
        for d in self.done_buf.drain(..) {
            self.events.push(Reverse(d));
        }
    }

    /// Cluster launch: pulls CTAs until the first cluster (in launch order) is complete, then
    /// places all its CTAs at once on SMs of one GPC that have room, or waits.
    fn dispatch_clusters(&mut self, kidx: usize, ks: &mut dyn KernelSource) -> Result<(), SimError> {
        let info = &self.kernels[kidx].info;
        let (grid, cl) = (info.grid, info.cluster);
        let size = cl.count() as usize;
        let clusters_x = grid.x.div_ceil(cl.x.max(1)) as u64;
        let clusters_y = grid.y.div_ceil(cl.y.max(1)) as u64;
        loop {
            // Fill the buffer until its first cluster is complete.
            while self.cluster_buf.first_key_value().is_none_or(|(_, v)| v.len() < size) {
                if self.kernels[kidx].source_done {
                    break;
                }
                let Some(cta) = self.pull(kidx, ks)? else { break };
                let c = cta.coord;
                let id = (c.x / cl.x.max(1)) as u64
                    + clusters_x * ((c.y / cl.y.max(1)) as u64 + clusters_y * (c.z / cl.z.max(1)) as u64);
                self.cluster_buf.entry(id).or_default().push(cta);
            }
            let Some((_, members)) = self.cluster_buf.first_key_value() else {
                if (0..self.sms.len()).any(|s| self.sms[s].fits(&self.kernels[kidx])) {
                    self.note_idle_slot(kidx);
                }
                return Ok(());
            };
            // A partial cluster at the grid's edge (grid not a multiple of the cluster) goes as is.
            if members.len() < size && !self.kernels[kidx].source_done {
                return Ok(());
            }
            let Some(plan) = self.plan_cluster(kidx, members.len()) else { return Ok(()) };
            let (_, members) = self.cluster_buf.pop_first().expect("checked above");
            for (cta, sm) in members.into_iter().zip(plan) {
                self.place(kidx, sm, cta);
            }
        }
    }

    /// SMs of one GPC (searched round-robin) that can take `n` CTAs of `kidx` now.
    fn plan_cluster(&mut self, kidx: usize, n: usize) -> Option<Vec<usize>> {
        let sms = self.sms.len();
        let gpcs = (self.arch.sm.gpcs as usize).clamp(1, sms);
        let k = &self.kernels[kidx];
        for g in 0..gpcs {
            let gpc = (self.next_gpc + g) % gpcs;
            let members: Vec<usize> = (0..sms).filter(|&s| s * gpcs / sms == gpc).collect();
            let mut room: Vec<usize> = members.iter().map(|&s| self.sms[s].capacity(k) as usize).collect();
            let mut plan = Vec::with_capacity(n);
            // Spread the cluster over the GPC's SMs, one CTA per SM per round.
            while plan.len() < n && room.iter().any(|&r| r > 0) {
                for (i, r) in room.iter_mut().enumerate() {
                    if *r > 0 && plan.len() < n {
                        *r -= 1;
                        plan.push(members[i]);
                    }
                }
            }
            if plan.len() == n {
                self.next_gpc = (gpc + 1) % gpcs;
                return Some(plan);
            }
        }
        None
    }
}

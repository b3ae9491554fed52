//! One streaming multiprocessor: warp slots, sub-cores with their schedulers and pipes, CTA
//! slots and the LD/ST path into the memory system.
//!
//! Time advances only through [`Sm::step`], which the engine calls at cycles when the SM may
//! issue; the SM reports the next cycle at which it could. Stall reasons are attributed to
//! every resident warp for every cycle, lazily: a warp remembers why it waits and since when,
//! and the interval is counted when it becomes eligible again.

pub mod banks;
pub mod coalesce;
mod issue;
mod mbarrier;
mod regalloc;
pub mod scheduler;
mod scoreboard;
mod skip;
pub mod warps;

use gpusim_configs::Arch;
use gpusim_isa::{CtaTrace, Cursor, Dim3};

use crate::kernel_run::KernelRun;
use crate::mem::MemorySystem;
use crate::stats::StallReason;
use coalesce::Sectors;
use scheduler::{WarpScheduler, WarpView};
use warps::{GroupRing, Phase, Warps};

/// A CTA finished on an SM at cycle `at`; the engine frees its resources then.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct CtaDone {
    pub at: u64,
    pub sm: u32,
    pub cta_slot: u16,
}

struct SubCore {
    /// Warp slots resident on this sub-core, oldest first.
    resident: Vec<u16>,
    /// Cycle at which each pipe class can accept a new instruction.
    pipe_free: [u64; gpusim_isa::UnitClass::ALL.len()],
    scheduler: Box<dyn WarpScheduler>,
    /// Registers in use in this sub-core's register file.
    regs_used: u32,
    free_slots: Vec<u16>,
    /// Memory instructions accepted by the LD/ST path but not yet started on the SM's data
    /// port: the cycle each starts, oldest first (a FIFO of at most `lsu_queue_depth`).
    mem_queue: std::collections::VecDeque<u64>,
    /// Earliest cycle at which a warp of this sub-core may issue.
    wake_at: u64,
    order: Vec<u16>,
}

/// One of a CTA's hardware barriers: warps arrived in the current generation, and the warps
/// that complete it (0: every live warp of the CTA, which is how exited warps count as arrived).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct NamedBar {
    arrived: u32,
    expected: u32,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct CtaSlot {
    active: bool,
    kernel: u32,
    coord: Dim3,
    slots: Vec<u16>,
    live_warps: u32,
    /// The CTA's hardware barriers (`BAR.SYNC id, n`, `BAR.ARV id, n`).
    bars: [NamedBar; gpusim_isa::NAMED_BARRIERS],
    done_at: u64,
    /// Completion of every bulk/TMA copy issued by the CTA so far (what an mbarrier wait
    /// waits for in this model).
    bulk_done: u64,
    regs_per_warp: u32,
    /// Registers released by `USETMAXREG.DEALLOC` and not yet taken by `TRY_ALLOC`.
    reg_pool: u32,
    smem: u64,
    threads: u32,
    mbars: Vec<mbarrier::Mbar>,
    mbar_waiters: Vec<mbarrier::MbarWaiter>,
    /// Cycle the CTA launched, and its group (`KernelInfo::cta_group`; 0 without one). When the
    /// group is a tile parameter (a persistent kernel's per-tile expert), `started` is where the
    /// current run of tiles began and `group` its value: the CTA's last warp (`group_warp`)
    /// records the run each time its value changes. The last warp, because in a
    /// warp-specialised kernel it is a math warp: the producer (warp 0) runs a pipeline ahead.
    started: u64,
    group: i64,
    tile_group: bool,
    group_warp: u32,
}

/// Bytes of a multicast copy for other CTAs of a cluster: the engine delivers them to the
/// barrier at `addr` of each CTA whose rank is in `ranks`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteTx {
    pub kernel: u32,
    pub cluster: u64,
    pub ranks: u32,
    pub addr: u64,
    pub bytes: u64,
    pub done: u64,
}

/// The linear index (launch order) of the cluster holding the CTA at `coord`.
pub fn cluster_id(k: &gpusim_isa::KernelInfo, coord: Dim3) -> u64 {
    let cl = k.cluster;
    let clusters_x = k.grid.x.div_ceil(cl.x.max(1)) as u64;
    let clusters_y = k.grid.y.div_ceil(cl.y.max(1)) as u64;
    (coord.x / cl.x.max(1)) as u64
        + clusters_x * ((coord.y / cl.y.max(1)) as u64 + clusters_y * (coord.z / cl.z.max(1)) as u64)
}

/// The CTA's rank within its cluster.
pub fn cluster_rank_of(k: &gpusim_isa::KernelInfo, c: Dim3) -> u64 {
    let d = k.cluster;
    let (cx, cy, cz) = (d.x.max(1) as u64, d.y.max(1) as u64, d.z.max(1) as u64);
    (c.x as u64 % cx) + cx * ((c.y as u64 % cy) + cy * (c.z as u64 % cz))
}

/// Static per-SM parameters derived from the chip once.
struct SmParams {
    max_warps: u32,
    max_ctas: u32,
    max_threads: u32,
    regs_per_sub: u32,
    register_alloc_unit: u32,
    smem: u64,
    sub_cores: u32,
    lsu_depth: usize,
    l1_bytes_per_cycle: f64,
    shared_banks: u32,
    shared_bank_width: u32,
    shared_latency: u64,
    branch_resolve: u64,
    sector: u64,
    sector_shift: u32,
    tma_extra_latency: u64,
    dsmem_latency: u64,
}

/// One SM.
pub struct Sm {
    pub id: u32,
    p: SmParams,
    subs: Vec<SubCore>,
    w: Warps,
    ctas: Vec<CtaSlot>,
    warps_used: u32,
    threads_used: u32,
    smem_used: u64,
    ctas_used: u32,
    /// Cycle at which the L1/shared data port is next free (backlog of the LD/ST path).
    port_free: u64,
    next_age: u64,
    rr_sub: u32,
    /// Earliest cycle any sub-core may issue.
    pub wake_at: u64,
    sectors: Sectors,
    lane_addrs: [u64; 32],
    /// Multicast bytes for CTAs on other SMs, collected during a step for the engine.
    pub outbox: Vec<RemoteTx>,
    /// Warp instructions issued since the run began, all kernels (for observers).
    pub issued: u64,
}

/// Why a warp could not issue this cycle, and until when.
pub(crate) struct Blocked {
    pub reason: StallReason,
    pub until: u64,
}

impl Sm {
    pub fn new(id: u32, arch: &Arch) -> Result<Sm, String> {
        let s = &arch.sm;
        let subs = (0..s.sub_cores)
            .map(|_| {
                Ok(SubCore {
                    resident: Vec::with_capacity(64),
                    pipe_free: [0; gpusim_isa::UnitClass::ALL.len()],
                    scheduler: scheduler::build(&arch.scheduler.policy, arch.scheduler.active_warps)?,
                    regs_used: 0,
                    free_slots: Vec::new(),
                    mem_queue: std::collections::VecDeque::with_capacity(s.lsu_queue_depth.max(1) as usize),
                    wake_at: u64::MAX,
                    order: Vec::with_capacity(64),
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let mut sm = Sm {
            id,
            p: SmParams {
                max_warps: s.max_warps,
                max_ctas: s.max_ctas,
                max_threads: s.max_threads,
                regs_per_sub: s.registers / s.sub_cores.max(1),
                register_alloc_unit: s.register_alloc_unit.max(1),
                smem: s.shared_mem_per_sm.0,
                sub_cores: s.sub_cores.max(1),
                lsu_depth: s.lsu_queue_depth.max(1) as usize,
                l1_bytes_per_cycle: arch.l1.bandwidth.0.max(1.0),
                shared_banks: arch.l1.shared_banks,
                shared_bank_width: arch.l1.shared_bank_width.0 as u32,
                shared_latency: arch.l1.shared_latency.0,
                branch_resolve: s.branch_resolve.0,
                sector: arch.l1.sector.0.max(1).next_power_of_two(),
                sector_shift: arch.l1.sector.0.max(1).next_power_of_two().trailing_zeros(),
                tma_extra_latency: arch.l2.tma_extra_latency.0,
                dsmem_latency: s.dsmem_latency.0,
            },
            subs,
            w: Warps::new(s.max_warps as usize),
            ctas: vec![CtaSlot::default(); s.max_ctas as usize],
            warps_used: 0,
            threads_used: 0,
            smem_used: 0,
            ctas_used: 0,
            port_free: 0,
            next_age: 0,
            rr_sub: 0,
            wake_at: u64::MAX,
            sectors: Sectors::default(),
            lane_addrs: [0; 32],
            outbox: Vec::new(),
            issued: 0,
        };
        let nsub = sm.p.sub_cores as usize;
        for slot in (0..s.max_warps as usize).rev() {
            sm.subs[slot % nsub].free_slots.push(slot as u16);
        }
        Ok(sm)
    }

    /// Whether a CTA of kernel `k` fits now.
    pub fn fits(&self, k: &KernelRun) -> bool {
        let o = &k.occupancy;
        let threads = k.info.threads_per_cta();
        if self.ctas_used + 1 > self.p.max_ctas
            || self.warps_used + o.warps_per_cta > self.p.max_warps
            || self.threads_used + threads > self.p.max_threads
            || self.smem_used + o.smem_per_cta > self.p.smem
        {
            return false;
        }
        let n = self.subs.len() as u32;
        let (warps, rpw) = (o.warps_per_cta, o.regs_per_warp);
        self.subs.iter().enumerate().all(|(i, sc)| {
            // Warp w of the CTA goes to sub-core (rr_sub + w) % n.
            let rel = (i as u32 + n - self.rr_sub) % n;
            let need = warps / n + u32::from(rel < warps % n);
            sc.free_slots.len() as u32 >= need && sc.regs_used + need * rpw <= self.p.regs_per_sub
        })
    }

    /// How many more CTAs of kernel `k` fit now (registers approximated per sub-core).
    pub fn capacity(&self, k: &KernelRun) -> u32 {
        let o = &k.occupancy;
        let w = o.warps_per_cta.max(1);
        let threads = k.info.threads_per_cta().max(1);
        let by_ctas = self.p.max_ctas - self.ctas_used;
        let by_warps = (self.p.max_warps - self.warps_used) / w;
        let by_threads = (self.p.max_threads - self.threads_used) / threads;
        let by_smem = ((self.p.smem - self.smem_used) / o.smem_per_cta.max(1)) as u32;
        let warps_by_regs: u32 = self
            .subs
            .iter()
            .map(|sc| ((self.p.regs_per_sub - sc.regs_used) / o.regs_per_warp.max(1)).min(sc.free_slots.len() as u32))
            .sum();
        let cap = by_ctas.min(by_warps).min(by_threads).min(by_smem).min(warps_by_regs / w);
        // Never promise more than `fits` grants for the first one.
        if cap > 0 && !self.fits(k) { 0 } else { cap }
    }

    /// Places a CTA of kernel `kidx` on this SM at cycle `now`. The caller checked [`Sm::fits`].
    /// Returns the CTA slot used.
    pub fn launch(&mut self, now: u64, kidx: u32, k: &mut KernelRun, cta: CtaTrace, done: &mut Vec<CtaDone>) -> u16 {
        let o = k.occupancy;
        let slot_c = self.ctas.iter().position(|c| !c.active).expect("fits() checked CTA slots");
        let nsub = self.subs.len();
        let first_sub = self.rr_sub as usize;
        self.rr_sub = (self.rr_sub + 1) % self.p.sub_cores;
        let mut c = std::mem::take(&mut self.ctas[slot_c]);
        c.slots.clear();
        c.active = true;
        c.kernel = kidx;
        c.coord = cta.coord;
        c.live_warps = cta.warps.len() as u32;
        c.bars = Default::default();
        c.done_at = now;
        c.bulk_done = 0;
        c.mbars.clear();
        c.mbar_waiters.clear();
        c.regs_per_warp = o.regs_per_warp;
        c.reg_pool = 0;
        c.smem = o.smem_per_cta;
        c.threads = k.info.threads_per_cta();
        self.ctas_used += 1;
        self.warps_used += cta.warps.len() as u32;
        self.threads_used += c.threads;
        self.smem_used += c.smem;

        let res = &mut k.sm_resident[self.id as usize];
        if res.0 == 0 {
            res.1 = now;
        }
        res.0 += 1;

        let mut empty = Vec::new();
        for (wi, prog) in cta.warps.into_iter().enumerate() {
            let sc = (first_sub + wi) % nsub;
            let sub = &mut self.subs[sc];
            let slot = sub.free_slots.pop().expect("fits() checked warp slots");
            sub.regs_used += o.regs_per_warp;
            // Appended with the next age: `resident` stays oldest first, as the scheduler's
            // contract requires.
            debug_assert!(sub.resident.last().is_none_or(|&l| self.w.age[l as usize] < self.next_age));
            sub.resident.push(slot);
            sub.wake_at = sub.wake_at.min(now);
            let s = slot as usize;
            let w = &mut self.w;
            w.phase[s] = Phase::Running;
            w.cta_slot[s] = slot_c as u16;
            w.kernel[s] = kidx;
            w.warp_in_cta[s] = wi as u32;
            w.age[s] = self.next_age;
            w.launched_at[s] = now;
            self.next_age += 1;
            w.mem_drain[s] = 0;
            w.long_wait[s] = false;
            w.tx_mbar[s] = u16::MAX;
            w.async_groups[s] = GroupRing::default();
            w.wgmma_groups[s] = GroupRing::default();
            w.scoreboard[s].reset();
            w.regs_held[s] = o.regs_per_warp;
            w.cursor[s] = Cursor::new(&prog, cta.coord.as_array(), wi as u32);
            w.next[s] = w.cursor[s].peek(&prog).copied();
            w.program[s] = Some(prog);
            // The first instruction arrives after one fetch/decode cycle.
            w.ready_at[s] = now + 1;
            w.wait_reason[s] = StallReason::NoInstruction;
            w.acct_from[s] = now;
            c.slots.push(slot);
            if w.next[s].is_none() {
                empty.push(slot);
            }
        }
        c.started = now;
        (c.group, c.tile_group) = match (&k.info.cta_group, c.slots.first(), c.slots.last()) {
            (Some(g), Some(&s0), Some(&sl)) => {
                let p = g.param as usize % gpusim_isa::program::MAX_PARAMS;
                let sl = sl as usize;
                let tile = self.w.program[sl].as_deref().is_some_and(|prog| prog.is_tile_param(p));
                let at = if tile { sl } else { s0 as usize };
                (self.w.cursor[at].params()[p], tile)
            }
            _ => (0, false),
        };
        c.group_warp = c.slots.len().saturating_sub(1) as u32;
        self.ctas[slot_c] = c;
        self.wake_at = self.wake_at.min(now);
        for slot in empty {
            // A warp with an empty program exits at once.
            self.exit_warp(slot as usize, now, k, done);
        }
        slot_c as u16
    }

    /// The group warp of a CTA whose group is a tile parameter moved on: when the group
    /// changed, the run of tiles that ended is recorded and the next one begins now.
    #[cold]
    pub(super) fn tile_group_moved(&mut self, s: usize, now: u64, k: &mut KernelRun) {
        let c = &mut self.ctas[self.w.cta_slot[s] as usize];
        let Some(g) = &k.info.cta_group else { return };
        let v = self.w.cursor[s].params()[g.param as usize % gpusim_isa::program::MAX_PARAMS];
        if v != c.group {
            if let Some(t) = k.groups.as_mut() {
                t.record(c.group, c.started, now);
            }
            (c.group, c.started) = (v, now);
        }
    }

    /// Frees the resources of a finished CTA (called by the engine at `done.at`).
    pub fn retire(&mut self, cta_slot: u16, now: u64, k: &mut KernelRun) {
        let c = &mut self.ctas[cta_slot as usize];
        debug_assert!(c.active && c.live_warps == 0);
        c.active = false;
        if let Some(g) = k.groups.as_mut() {
            g.record(c.group, c.started, now);
        }
        let nsub = self.subs.len();
        for &slot in &c.slots {
            let s = slot as usize;
            self.w.phase[s] = Phase::Free;
            self.w.program[s] = None;
            let sub = &mut self.subs[s % nsub];
            sub.free_slots.push(slot);
            sub.regs_used -= c.regs_per_warp;
        }
        self.ctas_used -= 1;
        self.warps_used -= c.slots.len() as u32;
        self.threads_used -= c.threads;
        self.smem_used -= c.smem;
        let res = &mut k.sm_resident[self.id as usize];
        res.0 -= 1;
        if res.0 == 0 {
            k.stats.sm_active_cycles += now - res.1;
        }
    }

    /// The kernel index of the CTA in `cta_slot`.
    pub fn cta_kernel(&self, cta_slot: u16) -> u32 {
        self.ctas[cta_slot as usize].kernel
    }

    /// The grid coordinate of the CTA in `cta_slot`.
    pub fn cta_coord(&self, cta_slot: u16) -> Dim3 {
        self.ctas[cta_slot as usize].coord
    }

    /// CTAs and warps resident now.
    pub fn resident(&self) -> (u32, u32) {
        (self.ctas_used, self.warps_used)
    }

    /// Asks the host to bring what a step reads first into its caches (see `crate::host`):
    /// the engine calls it for the next SM due while it steps this one. No effect on the model.
    #[inline]
    pub fn prefetch(&self) {
        for sub in &self.subs {
            crate::host::prefetch(&sub.wake_at);
        }
        crate::host::prefetch(self.w.phase.as_ptr());
        crate::host::prefetch(self.w.ready_at.as_ptr());
    }

    /// Issues for one cycle; returns whether any warp issued. `wake_at` says when to call again.
    pub fn step(
        &mut self,
        now: u64,
        kernels: &mut [KernelRun],
        mem: &mut dyn MemorySystem,
        done: &mut Vec<CtaDone>,
    ) -> bool {
        let mut any = false;
        let nsub = self.subs.len();
        let mut wake = u64::MAX;
        for sc in 0..nsub {
            if self.subs[sc].wake_at > now {
                wake = wake.min(self.subs[sc].wake_at);
                continue;
            }
            let mut order = std::mem::take(&mut self.subs[sc].order);
            // Events during this step (a barrier release) lower it again through `wake_warp`.
            self.subs[sc].wake_at = u64::MAX;
            {
                let sub = &mut self.subs[sc];
                let view = WarpView { now, ready_at: &self.w.ready_at, age: &self.w.age, long_wait: &self.w.long_wait };
                sub.scheduler.order(&sub.resident, &view, &mut order);
            }
            let mut issued = false;
            let mut sub_wake = u64::MAX;
            for &slot in &order {
                let s = slot as usize;
                if self.w.phase[s] != Phase::Running {
                    continue;
                }
                if self.w.ready_at[s] > now {
                    sub_wake = sub_wake.min(self.w.ready_at[s]);
                    continue;
                }
                let k = &mut kernels[self.w.kernel[s] as usize];
                let from = self.w.acct_from[s];
                if now > from {
                    k.stats.stall(self.w.wait_reason[s], now - from);
                }
                if issued {
                    k.stats.stall(StallReason::NotSelected, 1);
                    self.w.acct_from[s] = now + 1;
                    sub_wake = sub_wake.min(now + 1);
                    continue;
                }
                match self.issue(sc, s, now, k, mem, done) {
                    Ok(()) => {
                        issued = true;
                        any = true;
                        let sched = &mut self.subs[sc].scheduler;
                        sched.issued(slot);
                        match self.w.phase[s] {
                            Phase::Running => sub_wake = sub_wake.min(self.w.ready_at[s]),
                            // It issued its EXIT, which removed it before `issued`: the
                            // contract's order is `issued`, then `removed` (GTO kept the slot
                            // as its last warp and put the next warp launched into it first).
                            Phase::Draining | Phase::Free => sched.removed(slot),
                            Phase::Barrier | Phase::Mbar => {}
                        }
                    }
                    Err(b) => {
                        self.w.ready_at[s] = b.until;
                        self.w.wait_reason[s] = b.reason;
                        self.w.acct_from[s] = now;
                        sub_wake = sub_wake.min(b.until);
                    }
                }
            }
            self.subs[sc].order = order;
            let sub = &mut self.subs[sc];
            sub.wake_at = sub.wake_at.min(sub_wake);
        }
        // A release in one sub-core may have woken warps of sub-cores stepped before it.
        for sub in &self.subs {
            wake = wake.min(sub.wake_at);
        }
        self.wake_at = wake;
        any
    }

    /// Marks `slot` ready at `at` (an event released it) and wakes its sub-core.
    fn wake_warp(&mut self, slot: usize, at: u64) {
        self.w.ready_at[slot] = at;
        let nsub = self.subs.len();
        let sub = &mut self.subs[slot % nsub];
        sub.wake_at = sub.wake_at.min(at);
        // Also when called from outside `step` (a multicast landing from another SM).
        self.wake_at = self.wake_at.min(at);
    }

    /// The warp leaves: stalls until its stores drain, then its slot waits for the CTA to finish.
    fn exit_warp(&mut self, s: usize, now: u64, k: &mut KernelRun, done: &mut Vec<CtaDone>) {
        let drain_end = (now + 1).max(self.w.mem_drain[s]);
        k.stats.stall(StallReason::Drain, drain_end - (now + 1));
        k.stats.resident_warp_cycles += drain_end - self.w.launched_at[s];
        self.w.phase[s] = Phase::Draining;
        self.w.ready_at[s] = u64::MAX;
        self.w.next[s] = None;
        let nsub = self.subs.len();
        let sub = &mut self.subs[s % nsub];
        sub.resident.retain(|&x| x as usize != s);
        sub.scheduler.removed(s as u16);
        let cs = self.w.cta_slot[s] as usize;
        let c = &mut self.ctas[cs];
        c.live_warps -= 1;
        c.done_at = c.done_at.max(drain_end);
        if c.live_warps == 0 {
            done.push(CtaDone { at: c.done_at, sm: self.id, cta_slot: cs as u16 });
        } else {
            // A CTA-wide barrier waits for one warp fewer now.
            for id in 0..gpusim_isa::NAMED_BARRIERS {
                if self.ctas[cs].bars[id].expected == 0 {
                    self.try_release_barrier(cs, id, now);
                }
            }
        }
    }

    /// Charges every live warp's wait up to `now` and its residency so far, as retirement
    /// would: what a report of a run stopped at `now` needs so that its stall reasons still add
    /// up to `resident_warp_cycles`. Only for a run that ends here.
    pub fn account_until(&mut self, now: u64, kernels: &mut [KernelRun]) {
        for s in 0..self.w.len() {
            if matches!(self.w.phase[s], Phase::Free | Phase::Draining) {
                continue;
            }
            let k = &mut kernels[self.w.kernel[s] as usize];
            let from = self.w.acct_from[s];
            if now > from {
                k.stats.stall(self.w.wait_reason[s], now - from);
                self.w.acct_from[s] = now;
            }
            k.stats.resident_warp_cycles += now.saturating_sub(self.w.launched_at[s]);
        }
    }

    /// A warp of CTA `cs` arrives at barrier `id`, which `warps` warps complete (0: every live
    /// warp); releases the barrier if that completes it.
    fn arrive_barrier(&mut self, cs: usize, id: u8, warps: u32, now: u64) {
        let b = &mut self.ctas[cs].bars[id as usize];
        b.arrived += 1;
        // Every participant names the same count (PTX requires it); the latest one is kept.
        b.expected = warps;
        self.try_release_barrier(cs, id as usize, now);
    }

    /// Releases barrier `id` of CTA `cs` when the warps that complete it have arrived (for a
    /// CTA-wide barrier: every live warp; exited warps count as arrived). Arrivals beyond the
    /// count (a `BAR.ARV` for the next generation) carry over.
    fn try_release_barrier(&mut self, cs: usize, id: usize, now: u64) {
        let c = &self.ctas[cs];
        let b = c.bars[id];
        let need = if b.expected == 0 { c.live_warps } else { b.expected };
        if b.arrived == 0 || b.arrived < need {
            return;
        }
        self.ctas[cs].bars[id].arrived = b.arrived - need.min(b.arrived);
        for i in 0..self.ctas[cs].slots.len() {
            let s = self.ctas[cs].slots[i] as usize;
            if self.w.phase[s] == Phase::Barrier && self.w.bar_id[s] as usize == id {
                self.w.phase[s] = Phase::Running;
                let at = self.w.held_ready[s].max(now + 1);
                self.wake_warp(s, at);
            }
        }
    }

    /// Describes every resident warp, for the watchdog.
    pub fn describe_stuck(&self, kernels: &[KernelRun], out: &mut Vec<String>) {
        for s in 0..self.w.len() {
            let phase = self.w.phase[s];
            if phase == Phase::Free || phase == Phase::Draining {
                continue;
            }
            let k = &kernels[self.w.kernel[s] as usize];
            let c = &self.ctas[self.w.cta_slot[s] as usize];
            let what = match self.w.next[s] {
                Some(i) => k.descs.get(i.op as usize).map(|d| d.mnemonic.clone()).unwrap_or_default(),
                None => "(end of program)".into(),
            };
            let waits = match phase {
                _ if self.w.ready_at[s] == u64::MAX && self.acquire_pending(s, k).is_some() => {
                    let (need, free) = self.acquire_pending(s, k).unwrap_or_default();
                    format!(
                        "{need} registers from its CTA's pool, which holds {free} (USETMAXREG asks for more than was released)"
                    )
                }
                Phase::Barrier => {
                    let id = self.w.bar_id[s] as usize;
                    let b = c.bars[id];
                    let need = if b.expected == 0 { c.live_warps } else { b.expected };
                    format!("barrier {id} ({} of {need} warps arrived)", b.arrived)
                }
                Phase::Mbar => "an mbarrier phase that never completes (missing arrivals or copies)".to_string(),
                _ if self.w.ready_at[s] == u64::MAX => {
                    format!("an event that never comes ({})", self.w.wait_reason[s].name())
                }
                _ => format!("{} until cycle {}", self.w.wait_reason[s].name(), self.w.ready_at[s]),
            };
            out.push(format!(
                "kernel `{}` CTA {} warp {} on SM {}: next `{}`, waiting for {}",
                k.info.name, c.coord, self.w.warp_in_cta[s], self.id, what, waits
            ));
        }
    }
}

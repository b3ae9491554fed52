//! Issuing one warp instruction: structural checks, effects per instruction kind, and fetching
//! the next instruction with its register dependencies.

use gpusim_isa::{Inst, MemSpace};

use super::{Blocked, CtaDone, RemoteTx, Sm, banks, cluster_id, scoreboard};
use crate::kernel_run::KernelRun;
use crate::mem::{AccessKind, BulkRequest, MemRequest, MemorySystem};
use crate::sm::warps::Phase;
use crate::stats::StallReason;
use crate::timing::{OpKind, OpTiming};

impl Sm {
    /// Issues the next instruction of slot `s` on sub-core `sc` at `now`, or says why it cannot.
    pub(super) fn issue(
        &mut self,
        sc: usize,
        s: usize,
        now: u64,
        k: &mut KernelRun,
        mem: &mut dyn MemorySystem,
        done: &mut Vec<CtaDone>,
    ) -> Result<(), Blocked> {
        let inst = self.w.next[s].expect("a running warp has a next instruction");
        let t = k.timing[inst.op as usize];
        let pipe = t.class.index();
        if t.kind == OpKind::RegAcquire && !self.can_acquire(s, &inst) {
            // Woken by the next release in the CTA (`release_regs`).
            return Err(Blocked { reason: StallReason::Barrier, until: u64::MAX });
        }

        // Structural hazards: the pipe, and the backlog of the LD/ST data port.
        let pipe_free = self.subs[sc].pipe_free[pipe];
        if pipe_free > now {
            let reason = match t.kind {
                OpKind::SharedMem => StallReason::MioThrottle,
                OpKind::GlobalMem | OpKind::AsyncCopy | OpKind::Bulk => StallReason::LgThrottle,
                _ => StallReason::MathPipeThrottle,
            };
            return Err(Blocked { reason, until: pipe_free });
        }
        let uses_port = matches!(t.kind, OpKind::GlobalMem | OpKind::SharedMem | OpKind::AsyncCopy | OpKind::Bulk);
        if uses_port {
            let q = &mut self.subs[sc].mem_queue;
            while q.front().is_some_and(|&start| start <= now) {
                q.pop_front();
            }
            if q.len() >= self.p.lsu_depth {
                let reason =
                    if t.kind == OpKind::SharedMem { StallReason::MioThrottle } else { StallReason::LgThrottle };
                return Err(Blocked { reason, until: q[0] });
            }
        }
        if t.kind == OpKind::GlobalMem && t.load && !t.store {
            // The L1's miss path backs up: the load waits to issue (mem::Hierarchy).
            let ready = mem.load_ready_at(self.id, now);
            if ready > now {
                return Err(Blocked { reason: StallReason::LgThrottle, until: ready });
            }
        }

        // Issue.
        self.subs[sc].pipe_free[pipe] = now + t.interval as u64;
        let port_before = self.port_free;
        let active = inst.mask.count_ones() as u64;
        self.issued += 1;
        let st = &mut k.stats;
        st.stall(StallReason::Selected, 1);
        st.warp_insts += 1;
        st.thread_insts += active;
        st.op_counts[inst.op as usize] += 1;
        st.pipe_busy[pipe] += t.interval as u64;
        st.cuda_core_flops += t.flops_per_lane as u64 * active;
        st.tensor_flops += t.tensor_flops;

        // Effects. `result` is when destination registers are written and with what reason.
        let mut result = (now + t.latency as u64, t.dep_reason);
        match t.kind {
            OpKind::Alu | OpKind::Other => {}
            OpKind::RegRelease => self.release_regs(s, &inst, now, k),
            OpKind::RegAcquire => self.acquire_regs(s, &inst),
            OpKind::Branch => {
                self.set_dsts(s, &inst, result);
                self.w.cursor[s].advance();
                return self.fetch(s, now, now + self.p.branch_resolve.max(1), StallReason::BranchResolving, k, done);
            }
            OpKind::Exit => {
                // In a trace, an EXIT followed by more instructions is a predicated exit of
                // some lanes (`@P0 EXIT`): the warp goes on. It leaves at the end of its stream.
                self.w.cursor[s].advance();
                return self.fetch(s, now, now + 1, StallReason::Wait, k, done);
            }
            OpKind::GlobalMem if t.mem == MemSpace::Generic && self.cluster_target(s, &inst).is_some() => {
                // A generic access into the cluster shared window: distributed shared memory.
                let target = self.cluster_target(s, &inst).unwrap_or(0);
                let mut d = self.shared_access(s, &inst, &t, now, k);
                if target != self.cluster_rank(s, k) {
                    d = d - self.p.shared_latency.max(1) + self.p.dsmem_latency.max(1);
                }
                result = if t.load { (d, StallReason::ShortScoreboard) } else { (now + 1, StallReason::Wait) };
                self.w.mem_drain[s] = self.w.mem_drain[s].max(d);
            }
            OpKind::GlobalMem => {
                let d = self.global_access(s, &inst, &t, now, k, mem);
                if t.load || t.kind == OpKind::GlobalMem && t.mem == MemSpace::Texture {
                    result = (d, StallReason::LongScoreboard);
                } else {
                    result = (now + 1, StallReason::Wait);
                }
                self.w.mem_drain[s] = self.w.mem_drain[s].max(d);
            }
            OpKind::SharedMem => {
                let d = self.shared_access(s, &inst, &t, now, k);
                result = if t.load { (d, StallReason::ShortScoreboard) } else { (now + 1, StallReason::Wait) };
                self.w.mem_drain[s] = self.w.mem_drain[s].max(d);
            }
            OpKind::AsyncCopy => {
                let d = self.global_access(s, &inst, &t, now, k, mem);
                let g = &mut self.w.async_groups[s];
                g.open = g.open.max(d);
                self.w.mem_drain[s] = self.w.mem_drain[s].max(d);
            }
            OpKind::AsyncCommit => self.w.async_groups[s].commit(),
            OpKind::AsyncWait => {
                let g = &mut self.w.async_groups[s];
                if g.open > 0 {
                    g.commit();
                }
                let until = g.wait_all_but(inst.imm.max(0) as u32).max(now + 1);
                self.w.cursor[s].advance();
                return self.fetch(s, now, until, StallReason::LongScoreboard, k, done);
            }
            OpKind::Bulk if t.store => {
                // Shared → global (a bulk reduction; `UTMASTG` is not marked a store yet): the
                // warp's bulk async-group tracks it (`UTMACMDFLUSH`, `DEPBAR.LE SB0, N`); it
                // completes on no mbarrier.
                let d = self.bulk_access(s, &inst, &t, now, k, mem);
                let g = &mut self.w.async_groups[s];
                g.open = g.open.max(d);
                self.w.mem_drain[s] = self.w.mem_drain[s].max(d);
            }
            OpKind::Bulk => {
                let d = self.bulk_access(s, &inst, &t, now, k, mem);
                let cs = self.w.cta_slot[s] as usize;
                self.ctas[cs].bulk_done = self.ctas[cs].bulk_done.max(d);
                let bytes = inst.mem.map_or(0, |m| m.bulk_bytes as u64);
                if let Some(addr) = self.mbar_tx(s, d, bytes, now)
                    && k.descs[inst.op as usize].multicast
                    && k.info.cluster.count() > 1
                {
                    // The same bytes land in the other CTAs of the cluster (immediate: a CTA mask;
                    // 0: all), completing on the barrier at the same address there.
                    let own = self.cluster_rank(s, k);
                    let all =
                        if k.info.cluster.count() >= 32 { u32::MAX } else { (1u32 << k.info.cluster.count()) - 1 };
                    let mask = if inst.imm > 0 { inst.imm as u32 & all } else { all } & !(1u32 << own);
                    if mask != 0 {
                        let c = self.ctas[cs].coord;
                        self.outbox.push(RemoteTx {
                            kernel: self.w.kernel[s],
                            cluster: cluster_id(&k.info, c),
                            ranks: mask,
                            addr,
                            bytes,
                            done: d,
                        });
                    }
                }
                self.w.mem_drain[s] = self.w.mem_drain[s].max(d);
            }
            OpKind::MemBarrier => {
                let until = (now + t.latency as u64).max(self.w.mem_drain[s]);
                self.w.cursor[s].advance();
                return self.fetch(s, now, until, StallReason::Membar, k, done);
            }
            OpKind::BarrierArrive => {
                let cs = self.w.cta_slot[s] as usize;
                let b = gpusim_isa::BarrierOperand::from_imm(inst.imm);
                self.arrive_barrier(cs, b.id, b.warps(), now);
            }
            OpKind::BarrierSync => {
                let cs = self.w.cta_slot[s] as usize;
                let b = gpusim_isa::BarrierOperand::from_imm(inst.imm);
                self.w.cursor[s].advance();
                self.fetch(s, now, now + 1, StallReason::Barrier, k, done)?;
                if self.w.phase[s] == Phase::Running {
                    // Hold the dependency-ready time of the next instruction until release.
                    self.w.held_ready[s] = self.w.ready_at[s];
                    self.w.phase[s] = Phase::Barrier;
                    self.w.ready_at[s] = u64::MAX;
                    self.w.wait_reason[s] = StallReason::Barrier;
                    self.w.acct_from[s] = now + 1;
                    self.w.bar_id[s] = b.id;
                    self.arrive_barrier(cs, b.id, b.warps(), now);
                } else if b.threads > 0 {
                    // The warp's last instruction: it still arrives at a counted barrier (a
                    // CTA-wide one counts it as arrived by its exit).
                    self.arrive_barrier(cs, b.id, b.warps(), now);
                }
                return Ok(());
            }
            OpKind::WgmmaAsync => {
                // The tensor cores read their shared-memory operands (A: m×k, B: n×k, shared by
                // the warpgroup's four warps) through the SM's shared-memory data port. A source
                // of general registers other than the accumulator is A in registers (RS): then
                // only B comes from shared memory.
                let acc = inst.dst[0];
                let a_in_regs = inst.src.iter().any(|r| !r.is_none() && r.first.is_general() && *r != acc);
                let bytes = if a_in_regs { t.smem_b_bytes } else { t.smem_operand_bytes };
                if bytes > 0 {
                    let occ = ((bytes as f64 / self.p.l1_bytes_per_cycle).ceil() as u64).max(1);
                    let start = self.port_free.max(now);
                    self.port_free = start + occ;
                    result.0 = result.0.max(start + occ);
                    k.stats.traffic.shared.bytes += bytes;
                    k.stats.traffic.shared.requests += 1;
                }
                let g = &mut self.w.wgmma_groups[s];
                g.open = g.open.max(result.0);
                result.1 = StallReason::MathDependency;
            }
            OpKind::MbarInit => {
                if let Some(addr) = self.mem_base(s, &inst) {
                    self.mbar_init(s, addr, inst.imm.max(1) as u32);
                }
            }
            OpKind::MbarArrive => {
                if let Some(addr) = self.mem_base(s, &inst) {
                    let tx = k.descs[inst.op as usize].expect_tx;
                    self.mbar_arrive(s, addr, now, tx, inst.imm.max(0) as u64);
                }
            }
            OpKind::MbarWait => {
                let cs = self.w.cta_slot[s] as usize;
                self.set_dsts(s, &inst, result);
                self.w.cursor[s].advance();
                match self.mem_base(s, &inst) {
                    Some(addr) => match self.mbar_wait(s, addr) {
                        Some(at) => return self.fetch(s, now, at.max(result.0), StallReason::Barrier, k, done),
                        None => {
                            self.fetch(s, now, result.0, StallReason::Barrier, k, done)?;
                            if self.w.phase[s] == Phase::Running {
                                self.block_on_mbar(s, now);
                            }
                            return Ok(());
                        }
                    },
                    // Without the barrier's address (an imported trace), wait for every bulk
                    // copy the CTA has issued so far.
                    None => {
                        let until = result.0.max(self.ctas[cs].bulk_done);
                        return self.fetch(s, now, until, StallReason::Barrier, k, done);
                    }
                }
            }
            OpKind::WgmmaWait => {
                let g = &mut self.w.wgmma_groups[s];
                if g.open > 0 {
                    g.commit();
                }
                let until = g.wait_all_but(inst.imm.max(0) as u32).max(now + 1);
                self.w.cursor[s].advance();
                return self.fetch(s, now, until, StallReason::MathDependency, k, done);
            }
        }
        if uses_port {
            // The instruction waits in the sub-core's queue until the data port takes it.
            let start = port_before.max(now);
            if start > now {
                self.subs[sc].mem_queue.push_back(start);
            }
        }
        if t.kind == OpKind::Alu && k.descs[inst.op as usize].semantics == gpusim_isa::Semantics::WgmmaFence {
            let g = &mut self.w.wgmma_groups[s];
            if g.open > 0 {
                g.commit();
            }
        }
        self.set_dsts(s, &inst, result);
        self.w.cursor[s].advance();
        self.fetch(s, now, now + 1, StallReason::Wait, k, done)
    }

    /// For a generic access into the cluster shared window, the CTA rank it addresses.
    fn cluster_target(&self, s: usize, inst: &Inst) -> Option<u64> {
        use gpusim_isa::opcode::{CLUSTER_SHARED_RANK_STRIDE, CLUSTER_SHARED_WINDOW};
        let a = self.mem_base(s, inst)?;
        let off = a.checked_sub(CLUSTER_SHARED_WINDOW)?;
        (off < 16 * CLUSTER_SHARED_RANK_STRIDE).then_some(off / CLUSTER_SHARED_RANK_STRIDE)
    }

    /// This warp's CTA rank within its thread-block cluster.
    fn cluster_rank(&self, s: usize, k: &KernelRun) -> u64 {
        super::cluster_rank_of(&k.info, self.ctas[self.w.cta_slot[s] as usize].coord)
    }

    /// The evaluated base address of the instruction's memory operand, if it has one.
    fn mem_base(&self, s: usize, inst: &Inst) -> Option<u64> {
        let prog = self.w.program[s].as_deref()?;
        self.w.cursor[s].base_address(prog, inst)
    }

    fn set_dsts(&mut self, s: usize, inst: &Inst, (at, reason): (u64, StallReason)) {
        let sb = &mut self.w.scoreboard[s];
        for d in &inst.dst {
            sb.write(scoreboard::span(d), at, reason as u8);
        }
    }

    /// Loads the next instruction into the instruction buffer. The warp may issue it at the
    /// later of `earliest` (with `reason` for the wait) and its register dependencies.
    fn fetch(
        &mut self,
        s: usize,
        now: u64,
        earliest: u64,
        reason: StallReason,
        k: &mut KernelRun,
        done: &mut Vec<CtaDone>,
    ) -> Result<(), Blocked> {
        let prog = self.w.program[s].as_deref().expect("running warp has a program");
        let next = self.w.cursor[s].peek(prog).copied();
        self.w.next[s] = next;
        let c = &self.ctas[self.w.cta_slot[s] as usize];
        if c.tile_group && self.w.warp_in_cta[s] == c.group_warp {
            self.tile_group_moved(s, now, k);
        }
        let Some(inst) = next else {
            // Falling off the end of the program is an implicit EXIT.
            self.exit_warp(s, now, k, done);
            return Ok(());
        };
        let chains_accumulators = k.timing.get(inst.op as usize).is_some_and(|t| t.kind == OpKind::WgmmaAsync);
        let sb = &self.w.scoreboard[s];
        // Warpgroup MMAs accumulate into registers an earlier MMA still writes: the tensor pipe
        // orders them, so they do not wait for each other's results. Sources, then destinations
        // (a write waits for a pending write to the same registers): the order picks the reason
        // on a tie. Two plain loops: a chained iterator's `Option` checks cost the hot path 2%.
        let mut wait = (earliest, reason as u8);
        for range in inst.src.iter() {
            wait = sb.wait_for(scoreboard::span(range), chains_accumulators, wait);
        }
        for range in inst.dst.iter() {
            wait = sb.wait_for(scoreboard::span(range), chains_accumulators, wait);
        }
        let ready = wait.0;
        let why = StallReason::ALL[wait.1 as usize];
        self.w.ready_at[s] = ready;
        self.w.wait_reason[s] = why;
        self.w.acct_from[s] = now + 1;
        self.w.long_wait[s] = why == StallReason::LongScoreboard;
        Ok(())
    }

    /// A global/local access through the LD/ST port and the memory system; returns completion.
    fn global_access(
        &mut self,
        s: usize,
        inst: &Inst,
        t: &OpTiming,
        now: u64,
        k: &mut KernelRun,
        mem: &mut dyn MemorySystem,
    ) -> u64 {
        let prog = self.w.program[s].as_deref().expect("running warp has a program");
        let contiguous = inst.mask == u32::MAX
            && matches!(inst.mem, Some(m) if m.lanes == gpusim_isa::Lanes::Stride(t.width.max(1) as i32));
        if contiguous {
            // Fully coalesced: the sectors follow from the base address alone.
            let Some(base) = self.w.cursor[s].base_address(prog, inst) else { return now + t.latency as u64 };
            self.sectors.contiguous(base, 32 * t.width.max(1) as u64, self.p.sector_shift);
        } else {
            if !self.w.cursor[s].lane_addresses(prog, inst, &mut self.lane_addrs) {
                return now + t.latency as u64;
            }
            self.sectors.coalesce(&self.lane_addrs, inst.mask, t.width.max(1), self.p.sector_shift);
        }
        let bytes = self.sectors.len() as u64 * self.p.sector;
        let occupancy = ((bytes as f64 / self.p.l1_bytes_per_cycle).ceil() as u64).max(1);
        let start = self.port_free.max(now);
        self.port_free = start + occupancy;
        let kind = match t.kind {
            OpKind::AsyncCopy => AccessKind::AsyncLoad,
            _ if t.load && t.store => AccessKind::Atomic,
            _ if t.store && k.descs[inst.op as usize].semantics == gpusim_isa::Semantics::Reduction => {
                AccessKind::Reduction
            }
            _ if t.store => AccessKind::Store,
            _ => AccessKind::Load,
        };
        let req = MemRequest {
            sm: self.id,
            kind,
            space: t.mem,
            sectors: self.sectors.as_slice(),
            bypass_l1: t.bypass_l1 || t.kind == OpKind::AsyncCopy,
        };
        let out = mem.access(start, &req);
        let tr = &mut k.stats.traffic;
        tr.requested_bytes += inst.mask.count_ones() as u64 * t.width as u64;
        tr.l1.merge(&out.l1);
        tr.l2.merge(&out.l2);
        tr.dram.merge(&out.dram);
        if t.kind == OpKind::AsyncCopy {
            // The data is also written into shared memory.
            tr.shared.requests += 1;
            tr.shared.bytes += bytes;
            tr.shared.sectors += self.sectors.len() as u64;
        }
        out.done.max(start + occupancy)
    }

    /// A shared-memory access: bank-conflict wavefronts on the data port; returns completion.
    fn shared_access(&mut self, s: usize, inst: &Inst, t: &OpTiming, now: u64, k: &mut KernelRun) -> u64 {
        let prog = self.w.program[s].as_deref().expect("running warp has a program");
        let (wavefronts, mask, width) = if self.w.cursor[s].lane_addresses(prog, inst, &mut self.lane_addrs) {
            let (mask, width) = if t.matrices > 0 {
                // ldmatrix/stmatrix: 8 lanes give the 16-byte rows of each matrix.
                let lanes = 8 * t.matrices.min(4);
                (if lanes >= 32 { u32::MAX } else { (1u32 << lanes) - 1 } & inst.mask, 16)
            } else {
                (inst.mask, t.width.max(1))
            };
            (
                banks::wavefronts(&self.lane_addrs, mask, width, self.p.shared_banks, self.p.shared_bank_width),
                mask,
                width,
            )
        } else {
            (1, inst.mask, t.width.max(1))
        };
        let start = self.port_free.max(now);
        self.port_free = start + wavefronts as u64;
        let tr = &mut k.stats.traffic.shared;
        tr.requests += wavefronts as u64;
        tr.bytes += mask.count_ones() as u64 * width as u64;
        start + self.p.shared_latency.max(1) + wavefronts as u64 - 1
    }

    /// A bulk copy or reduction of `bytes` contiguous bytes at the instruction's base address.
    fn bulk_access(
        &mut self,
        s: usize,
        inst: &Inst,
        t: &OpTiming,
        now: u64,
        k: &mut KernelRun,
        mem: &mut dyn MemorySystem,
    ) -> u64 {
        let prog = self.w.program[s].as_deref().expect("running warp has a program");
        let Some(base) = self.w.cursor[s].base_address(prog, inst) else {
            return now + t.latency as u64;
        };
        let bytes = inst.mem.map(|m| m.bulk_bytes as u64).unwrap_or(0).max(1);
        let sector = self.p.sector;
        let first = base & !(sector - 1);
        let n = (base.saturating_add(bytes - 1) - first) / sector + 1;
        let start = self.port_free.max(now);
        // A bulk reduction read-modify-writes at the L2 as `RED` does (shared memory is its
        // source); a bulk load's data goes to shared memory.
        let kind = match k.descs[inst.op as usize].semantics {
            gpusim_isa::Semantics::BulkReduce => AccessKind::Reduction,
            _ if t.store => AccessKind::Store,
            _ => AccessKind::AsyncLoad,
        };
        let out = mem.access_bulk(start, &BulkRequest { sm: self.id, kind, first, step: sector, count: n });
        let tr = &mut k.stats.traffic;
        tr.l2.merge(&out.l2);
        tr.dram.merge(&out.dram);
        tr.shared.bytes += n * sector;
        tr.requested_bytes += bytes;
        out.done + self.p.tma_extra_latency
    }
}

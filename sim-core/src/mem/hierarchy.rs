//! The memory hierarchy: a sectored L1 per SM, the network from SMs to L2 slices, a partitioned
//! L2, and HBM channels with banks and row buffers.
//!
//! Timing is by reservation: each access walks its path at once, reserving bandwidth on every
//! server it crosses (SM port, L2 slice, HBM bank and bus) in call order, and learns when its
//! data is back. Latency = the unloaded latency of the level that serves it + every queueing
//! delay on the way.
//!
//! **L1** (per SM): sectored, LRU; loads allocate, global stores write through and invalidate
//! the sectors they write (no allocate on write); `.BYPASS`/`.CG` loads and async copies skip
//! it. A hit waits for an in-flight fill of its line (MSHR merging). Its capacity is the unified
//! SRAM minus the shared-memory carveout of the kernels on the SM, and it is invalidated when
//! a kernel's first CTA arrives on the SM (each SM on its own, as kernels of several streams
//! come and go). LDG loads that miss it or bypass it then pass the SM's miss path, a server of
//! `l1.miss_bandwidth` (when set): it holds an SM streaming L2-resident data with ordinary
//! loads to the ~36 B/clk that A100 and H100 measure, while async copies and stores use the
//! port at its full rate. A load waits to issue (`lg_throttle`) while the miss path has more
//! than `MISS_PATH_BACKLOG` cycles queued, so that no access is reserved far ahead of the
//! others.
//!
//! **L2**: `partitions` caches, each the near partition of the SMs of half the GPCs. A load
//! looks in its near partition (`l2.hit_latency`); on a miss it looks in the far partitions
//! (`l2.far_extra_latency` more) and copies what it finds into the near one; on a miss
//! everywhere it reads HBM and fills the near partition. Lines the near partition evicts move to
//! a far partition, which so acts as a victim store: from one SM's view, the near partition
//! holds the most recent `size/partitions` bytes and the two together `size`, which is what
//! pointer chases on A100 and H100 show (near plateau, far plateau, DRAM). Stores allocate
//! sectors without fetching (write-back, write-allocate); dirty lines leaving the L2 are
//! written to HBM. The L2 keeps its contents from kernel to kernel.

use gpusim_configs::Arch;
use gpusim_isa::MemSpace;

use super::cache::{SectorCache, Set, Victim};
use super::hbm::Hbm;
use super::server::Server;
use super::{AccessKind, AccessOutcome, BULK_CHUNK, BulkRequest, MemRequest, MemorySystem};
use crate::rate::FRAC;

/// Cycles of work the miss path may have queued before the next load waits to issue: enough
/// to keep it busy, little enough that no access is sent far ahead of the others (the servers
/// are reserved in call order).
const MISS_PATH_BACKLOG: u64 = 32;

/// How far ahead of a bulk copy's walk its lines' L2 sets are prefetched into the host's caches
/// (below 4: `access_bulk` keeps the sets it found for four lines).
const PREFETCH_LINES: u64 = 3;
const _: () = assert!(PREFETCH_LINES < 4);

pub struct Hierarchy {
    l1: Vec<SectorCache>,
    /// Per SM: the shared-memory carveout its L1 is sized for.
    l1_carve: Vec<u64>,
    l1_assoc: u32,
    l1_sram: u64,
    carveouts: Vec<u64>,
    l1_latency: u64,
    sector_shift: u32,
    line_shift: u32,
    sector_bytes: u64,
    ports: Vec<Server>,
    /// Per SM: the L1's miss path for LSU loads (`l1.miss_bandwidth`); `None` when unlimited.
    miss_paths: Option<Vec<Server>>,
    slices: Vec<Server>,
    slices_per_part: u64,
    /// The partitions, built alike (same lines, ways and hashing), so a line has one `Set` in all.
    parts: Vec<SectorCache>,
    sm_side: Vec<u32>,
    l2_latency: u64,
    far_extra: u64,
    dram_latency: u64,
    hbm: Hbm,
}

impl Hierarchy {
    pub fn new(arch: &Arch) -> Hierarchy {
        let (line, sector) = arch.model_line_and_sector();
        let parts = arch.l2.partitions.max(1);
        let part_lines = arch.l2.size.0 / parts as u64 / line;
        let sms = arch.sm.count.max(1);
        let gpcs = arch.sm.gpcs_clamped();
        let sm_side = (0..sms)
            .map(|s| {
                let gpc = arch.sm.gpc_of(s) as u64;
                (gpc * parts as u64 / gpcs as u64) as u32
            })
            .collect();
        let hbm = Hbm::new(arch);
        let hbm_cycles = arch.hbm.latency.to_cycles(arch.clocks.sm).0;
        let mut carveouts: Vec<u64> = arch.sm.shared_mem_carveouts.iter().map(|b| b.0).collect();
        carveouts.sort_unstable();
        let mut h = Hierarchy {
            l1: Vec::new(),
            l1_carve: vec![0; sms as usize],
            l1_assoc: arch.l1.assoc,
            l1_sram: arch.l1.sram.0,
            carveouts,
            l1_latency: arch.l1.hit_latency.0,
            sector_shift: sector.trailing_zeros(),
            line_shift: line.trailing_zeros(),
            sector_bytes: sector,
            ports: (0..sms).map(|_| Server::new(arch.noc.sm_port_bandwidth.0)).collect(),
            miss_paths: (arch.l1.miss_bandwidth.0 > 0.0)
                .then(|| (0..sms).map(|_| Server::new(arch.l1.miss_bandwidth.0)).collect()),
            slices: (0..arch.l2.slices.max(parts)).map(|_| Server::new(arch.l2.slice_bandwidth.0)).collect(),
            slices_per_part: (arch.l2.slices.max(parts) / parts) as u64,
            parts: (0..parts).map(|_| SectorCache::new(part_lines, arch.l2.assoc, true)).collect(),
            sm_side,
            l2_latency: arch.l2.hit_latency.0,
            far_extra: arch.l2.far_extra_latency.0,
            // `hbm.latency` is the mean unloaded latency of a random access, which pays a row
            // miss and, now and then, a refresh: those come from the HBM model itself.
            dram_latency: hbm_cycles.saturating_sub(hbm.row_miss_cycles() + hbm.mean_refresh_wait_cycles()),
            hbm,
        };
        h.l1 = (0..sms).map(|_| SectorCache::new(1, h.l1_assoc, false)).collect();
        for sm in 0..sms as usize {
            h.size_l1(sm, 0);
        }
        h
    }

    /// Sizes SM `sm`'s L1 for `shared` bytes of shared memory: the carveout is the smallest
    /// supported one that holds it, the L1 gets the rest of the SRAM. The L1 starts empty.
    fn size_l1(&mut self, sm: usize, shared: u64) {
        let carve = self.carveouts.iter().copied().find(|&c| c >= shared).unwrap_or(shared);
        let l1_bytes = self.l1_sram.saturating_sub(carve).max(1 << self.line_shift);
        let lines = l1_bytes >> self.line_shift;
        self.l1_carve[sm] = carve;
        let assoc = self.l1_assoc.max(1) as u64;
        if self.l1[sm].lines() == (lines / assoc).max(1) * assoc {
            // Same capacity: empty the cache in place.
            self.l1[sm].invalidate_all();
        } else {
            self.l1[sm] = SectorCache::new(lines, self.l1_assoc, false);
        }
    }

    #[inline]
    fn sectors_of(&self, mask: u32) -> u64 {
        mask.count_ones() as u64
    }

    /// The L2 set of `line`: the same in every partition, which are built alike.
    #[inline]
    fn l2_set(&self, line: u64) -> Set {
        self.parts[0].set(line)
    }

    /// Moves a line evicted from partition `from` into the next partition, as a victim; dirty
    /// lines that leave the L2 are written to HBM. Returns when that write-back is done (0 when
    /// there is none): the eviction holds up the access that caused it until then.
    /// `set` is the set the victim left (so its set in every partition); `now_fp` the issue
    /// time of the access that caused the eviction, `at_fp` when the eviction happens.
    fn place_victim(&mut self, from: usize, set: Set, v: Victim, now_fp: u64, at_fp: u64) -> u64 {
        let parts = self.parts.len();
        if parts > 1 {
            let to = (from + 1) % parts;
            match self.parts[to].fill_in(set, v.line, v.valid_sectors, 0, v.dirty_sectors != 0) {
                Some(v2) => self.write_back(v2, now_fp, at_fp),
                None => 0,
            }
        } else {
            self.write_back(v, now_fp, at_fp)
        }
    }

    fn write_back(&mut self, v: Victim, now_fp: u64, at_fp: u64) -> u64 {
        if v.dirty_sectors == 0 {
            return 0;
        }
        let bytes = v.dirty_sectors.count_ones() as u64 * self.sector_bytes;
        self.hbm.access(now_fp, at_fp, v.line << self.line_shift, bytes, true).div_ceil(FRAC)
    }

    /// When a load's `mask` sectors, missing the L1 of `sm` at `at`, leave the SM: after the
    /// miss path has moved what is queued before them. Other kinds of access skip it.
    fn through_miss_path(&mut self, at: u64, sm: usize, mask: u32, kind: AccessKind) -> u64 {
        if kind != AccessKind::Load || self.miss_paths.is_none() {
            return at;
        }
        let bytes = self.sectors_of(mask) * self.sector_bytes;
        let paths = self.miss_paths.as_mut().expect("checked above");
        paths[sm].reserve(at * FRAC, bytes).div_ceil(FRAC)
    }

    /// Brings every partition's set of `line` into the host's caches (see
    /// `SectorCache::prefetch`): a miss in the near partition looks in the far ones and places
    /// its victim there.
    #[inline]
    fn prefetch_l2(&self, line: u64) -> Set {
        let set = self.l2_set(line);
        for p in &self.parts {
            p.prefetch_in(set);
        }
        set
    }

    /// An L2 access for `mask` sectors of `line` from `sm`, leaving the SM at `at` (cycles).
    /// Returns when the data is back at the SM, and counts traffic.
    /// `set` is the line's L2 set ([`Hierarchy::l2_set`]).
    #[allow(clippy::too_many_arguments)]
    fn l2_access(
        &mut self,
        at: u64,
        sm: usize,
        line: u64,
        set: Set,
        mask: u32,
        write: bool,
        out: &mut AccessOutcome,
    ) -> u64 {
        let n = self.sectors_of(mask);
        let bytes = n * self.sector_bytes;
        let at_fp = at * FRAC;
        let side = self.sm_side[sm] as usize;
        let p_start = self.ports[sm].reserve(at_fp, bytes);
        let hash = line ^ (line >> 9) ^ (line >> 19);
        let slice_in_part = (hash % self.slices_per_part) as usize;
        let s_idx = side * self.slices_per_part as usize + slice_in_part;
        let s_start = self.slices[s_idx].reserve(p_start, bytes);
        let base = at + self.l2_latency + (s_start - at_fp) / FRAC;
        out.l2.requests += 1;
        out.l2.sectors += n;
        out.l2.bytes += bytes;

        if write {
            out.l2.hits += n;
            let mut ack = base;
            if let Some(v) = self.parts[side].fill_in(set, line, mask, base, true) {
                ack = ack.max(self.place_victim(side, set, v, at_fp, s_start));
            }
            return ack;
        }

        // Near partition.
        let (need, ready) = self.parts[side].probe_in(set, line, mask, base);
        out.l2.hits += n - self.sectors_of(need);
        if need == 0 {
            return ready;
        }
        out.l2.misses += self.sectors_of(need);

        // Far partitions: copy into the near one.
        let parts = self.parts.len();
        for k in 1..parts {
            let q = (side + k) % parts;
            if let Some(r) = self.parts[q].take_if_present_in(set, line, need) {
                let far_bytes = self.sectors_of(need) * self.sector_bytes;
                let f_start =
                    self.slices[q * self.slices_per_part as usize + slice_in_part].reserve(s_start, far_bytes);
                let mut t = (at + self.l2_latency + self.far_extra + (f_start - at_fp) / FRAC).max(r);
                if let Some(v) = self.parts[side].fill_in(set, line, need, t, false) {
                    t = t.max(self.place_victim(side, set, v, at_fp, f_start));
                }
                return ready.max(t);
            }
        }

        // HBM.
        let d = self.sectors_of(need);
        let end = self.hbm.access(at_fp, s_start, line << self.line_shift, d * self.sector_bytes, false);
        let t = at + self.l2_latency + self.dram_latency + (end - at_fp).div_ceil(FRAC);
        out.dram.requests += 1;
        out.dram.sectors += d;
        out.dram.bytes += d * self.sector_bytes;
        out.dram.misses += d;
        let mut t = t;
        if let Some(v) = self.parts[side].fill_in(set, line, need, t, false) {
            t = t.max(self.place_victim(side, set, v, at_fp, end));
        }
        ready.max(t)
    }
    /// One line's part of an access leaving SM `sm`'s port at `at`: `mask` sectors of `line`.
    /// Counts its traffic in `out`; returns when its data is back (loads) or it is
    /// acknowledged. Inlined into both callers: it is most of an access's host work.
    /// `set`: the line's L2 set if already found (a bulk walk finds it when it prefetches).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn line_access(
        &mut self,
        at: u64,
        sm: usize,
        line: u64,
        set: Option<Set>,
        mask: u32,
        how: Access,
        out: &mut AccessOutcome,
    ) -> u64 {
        if how.through_l1 {
            let n = mask.count_ones() as u64;
            out.l1.requests += 1;
            out.l1.sectors += n;
            out.l1.bytes += n * self.sector_bytes;
            let (miss, mut ready) = self.l1[sm].probe(line, mask, at + self.l1_latency);
            out.l1.hits += n - miss.count_ones() as u64;
            out.l1.misses += miss.count_ones() as u64;
            if miss != 0 {
                let leave = self.through_miss_path(at, sm, miss, how.kind);
                let set = set.unwrap_or_else(|| self.l2_set(line));
                let t = self.l2_access(leave, sm, line, set, miss, false, out);
                self.l1[sm].fill(line, miss, t, false);
                ready = ready.max(t);
            }
            return ready;
        }
        if how.write || how.atomic {
            self.l1[sm].invalidate_sectors(line, mask);
        }
        let leave = self.through_miss_path(at, sm, mask, how.kind);
        let set = set.unwrap_or_else(|| self.l2_set(line));
        let t = self.l2_access(leave, sm, line, set, mask, how.write, out);
        if how.atomic {
            // The read-modify-write leaves the line dirty at the L2.
            let side = self.sm_side[sm] as usize;
            if let Some(v) = self.parts[side].fill_in(set, line, mask, t, true) {
                let _ = self.place_victim(side, set, v, at * FRAC, t * FRAC);
            }
        }
        t
    }
}

/// How an access treats each of its lines.
#[derive(Clone, Copy)]
struct Access {
    kind: AccessKind,
    /// Stores and reductions: write-back at the L2, the L1's copies dropped.
    write: bool,
    atomic: bool,
    /// Loads that allocate in the L1.
    through_l1: bool,
}

impl Access {
    fn of(kind: AccessKind, space: MemSpace, bypass_l1: bool) -> Access {
        let write = matches!(kind, AccessKind::Store | AccessKind::Reduction);
        let atomic = kind == AccessKind::Atomic;
        Access { kind, write, atomic, through_l1: !bypass_l1 && !write && !atomic && space != MemSpace::Shared }
    }
}

impl MemorySystem for Hierarchy {
    fn name(&self) -> &'static str {
        "hierarchy"
    }

    fn kernel_arrives(&mut self, sm: u32, shared_per_sm: u64, sm_idle: bool) {
        let sm = sm as usize;
        // An SM holding other kernels' CTAs keeps at least the carveout they were placed with.
        let need = if sm_idle { shared_per_sm } else { shared_per_sm.max(self.l1_carve[sm]) };
        self.size_l1(sm, need);
    }

    fn links(&self) -> Vec<super::LinkStats> {
        vec![
            super::server::summarize("sm_port", &self.ports),
            super::server::summarize("l2_slice", &self.slices),
            self.hbm.link_stats(),
        ]
    }

    fn load_ready_at(&self, sm: u32, now: u64) -> u64 {
        match &self.miss_paths {
            Some(paths) => {
                let free = paths[sm as usize].free_at() / FRAC;
                if free > now + MISS_PATH_BACKLOG { free - MISS_PATH_BACKLOG } else { now }
            }
            None => now,
        }
    }

    fn access(&mut self, at: u64, req: &MemRequest<'_>) -> AccessOutcome {
        let mut out = AccessOutcome { done: at + 1, ..AccessOutcome::default() };
        let how = Access::of(req.kind, req.space, req.bypass_l1);
        let sm = req.sm as usize;
        let spl_mask = (1u64 << (self.line_shift - self.sector_shift)) - 1;
        let mut i = 0;
        let secs = req.sectors;
        // The L2 set of the line being accessed, when the previous line's prefetch found it.
        let mut set = None;
        while i < secs.len() {
            // One line's sectors at a time (the slice is sorted).
            let line = secs[i] >> self.line_shift;
            let mut mask = 0u32;
            while i < secs.len() && secs[i] >> self.line_shift == line {
                mask |= 1 << ((secs[i] >> self.sector_shift) & spl_mask);
                i += 1;
            }
            let this = set.take();
            if i < secs.len() {
                set = Some(self.prefetch_l2(secs[i] >> self.line_shift));
            }
            let t = self.line_access(at, sm, line, this, mask, how, &mut out);
            out.done = out.done.max(t);
        }
        out
    }

    /// The chunks' `access` calls without listing their sectors: per chunk, its lines in
    /// order with the sectors the chunk holds of each (a line split between two chunks is
    /// accessed once per chunk, as the calls would). Sectors of another size than the L1's go
    /// through the listed calls.
    fn access_bulk(&mut self, at: u64, req: &BulkRequest) -> AccessOutcome {
        if req.step != self.sector_bytes {
            return super::bulk_by_chunks(self, at, req);
        }
        let mut out = AccessOutcome { done: at + 1, ..AccessOutcome::default() };
        let how = Access::of(req.kind, MemSpace::Global, true);
        let sm = req.sm as usize;
        let spl_mask = (1u64 << (self.line_shift - self.sector_shift)) - 1;
        // The copy's lines are known up front: ask for their L2 sets a few lines ahead of
        // the walk (one line ahead hides too little of the host's memory latency).
        let req_last = (req.first + (req.count.max(1) - 1) * req.step) >> self.line_shift;
        let req_first = req.first >> self.line_shift;
        // The sets the prefetches found, by line (`PREFETCH_LINES` < 4: a line's entry is not
        // overwritten before its last visit, a line split between chunks being visited twice).
        let mut sets = [(u64::MAX, None); 4];
        for l in req_first..=req_last.min(req_first + PREFETCH_LINES - 1) {
            sets[(l & 3) as usize] = (l, Some(self.prefetch_l2(l)));
        }
        let mut i = 0;
        while i < req.count {
            let m = (req.count - i).min(BULK_CHUNK as u64);
            // The chunk's sectors: byte addresses `lo..=hi`, sector-aligned.
            let lo = req.first + i * req.step;
            let hi = lo + (m - 1) * req.step;
            let (first_line, last_line) = (lo >> self.line_shift, hi >> self.line_shift);
            for line in first_line..=last_line {
                let a = if line == first_line { lo } else { line << self.line_shift };
                let b = if line == last_line { hi } else { ((line + 1) << self.line_shift) - self.sector_bytes };
                let (s0, s1) = ((a >> self.sector_shift) & spl_mask, (b >> self.sector_shift) & spl_mask);
                let mask = ((1u64 << (s1 + 1)) - (1u64 << s0)) as u32;
                if line + PREFETCH_LINES <= req_last {
                    let l = line + PREFETCH_LINES;
                    sets[(l & 3) as usize] = (l, Some(self.prefetch_l2(l)));
                }
                let memo = sets[(line & 3) as usize];
                let set = if memo.0 == line { memo.1 } else { None };
                let t = self.line_access(at, sm, line, set, mask, how, &mut out);
                out.done = out.done.max(t);
            }
            i += m;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `access_bulk` walks a bulk copy's lines as the chunked `access` calls it stands for:
    /// the same outcomes, and the same state after (later loads through the L1, the links'
    /// statistics), on an L2 small enough to evict and write back, with copies that start
    /// anywhere in a line and straddle chunk boundaries.
    #[test]
    fn bulk_walk_equals_the_chunked_calls() {
        let mut arch = gpusim_configs::load_preset("h100-sxm5-80gb").unwrap();
        arch.l2.size = gpusim_configs::Bytes(512 << 10);
        let (mut walk, mut listed) = (Hierarchy::new(&arch), Hierarchy::new(&arch));
        let mut next = crate::test_rng::xorshift(0x2545_f491_4f6c_dd1du64);
        let same = |a: &AccessOutcome, b: &AccessOutcome| (a.done, a.l1, a.l2, a.dram) == (b.done, b.l1, b.l2, b.dram);
        let mut at = 0;
        for step in 0..4000 {
            let sm = next(arch.sm.count as u64) as u32;
            let kind = [AccessKind::AsyncLoad, AccessKind::Store, AccessKind::Reduction][next(3) as usize];
            let req = BulkRequest { sm, kind, first: (1 << 32) + next(1 << 15) * 32, step: 32, count: 1 + next(400) };
            let (a, b) = (walk.access_bulk(at, &req), crate::mem::bulk_by_chunks(&mut listed, at, &req));
            assert!(same(&a, &b), "step {step}: {req:?}\n{a:?}\n{b:?}");
            // An ordinary load of the same lines sees the same L1 and L2.
            let sectors: Vec<u64> = (0..4).map(|k| (req.first & !127) + 32 * k).collect();
            let load =
                MemRequest { sm, kind: AccessKind::Load, space: MemSpace::Global, sectors: &sectors, bypass_l1: false };
            let (a, b) = (walk.access(at, &load), listed.access(at, &load));
            assert!(same(&a, &b), "step {step}: load\n{a:?}\n{b:?}");
            at += next(64);
        }
        assert_eq!(walk.links(), listed.links());
    }
}

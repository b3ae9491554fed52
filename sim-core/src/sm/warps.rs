//! Per-warp-slot state of one SM, as struct-of-arrays indexed by slot.

use std::sync::Arc;

use gpusim_isa::{Cursor, Inst, Program};

use super::scoreboard::Scoreboard;
use crate::stats::StallReason;

/// Where a warp slot is in its life.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Phase {
    Free,
    /// Has a next instruction (or will after `ready_at`).
    Running,
    /// Waiting at one of the CTA's barriers (`Warps::bar_id`).
    Barrier,
    /// Waiting for an mbarrier phase.
    Mbar,
    /// Exited (its drain cycles already counted); holds the slot until the CTA finishes.
    Draining,
}

/// Completion times of committed asynchronous groups (cp.async or wgmma), oldest first.
/// Holds up to `CAP`; older groups fold into the next when full (their completion is a lower
/// bound of the merged group's, so waits stay correct or conservative).
#[derive(Clone, Copy, Debug, Default)]
pub struct GroupRing {
    done: [u64; GroupRing::CAP],
    len: u8,
    /// Completion of the group still open (not yet committed).
    pub open: u64,
}

impl GroupRing {
    pub const CAP: usize = 8;

    /// Closes the open group.
    pub fn commit(&mut self) {
        let v = std::mem::take(&mut self.open);
        if self.len as usize == Self::CAP {
            self.done[1] = self.done[1].max(self.done[0]);
            self.done.copy_within(1.., 0);
            self.len -= 1;
        }
        self.done[self.len as usize] = v;
        self.len += 1;
    }

    /// Cycle at which all but the newest `keep` committed groups are complete; drops them.
    pub fn wait_all_but(&mut self, keep: u32) -> u64 {
        let n = self.len as usize;
        let keep = (keep as usize).min(n);
        let k = n - keep;
        let t = self.done[..k].iter().copied().max().unwrap_or(0);
        self.done.copy_within(k..n, 0);
        self.len = keep as u8;
        t
    }
}

/// All warp slots of one SM.
pub struct Warps {
    pub phase: Vec<Phase>,
    /// Earliest cycle the next instruction may issue (`u64::MAX`: waits for an event).
    pub ready_at: Vec<u64>,
    /// Why the warp waits from `acct_from` until `ready_at`.
    pub wait_reason: Vec<StallReason>,
    /// First cycle of the warp's life not yet attributed to a stall reason.
    pub acct_from: Vec<u64>,
    pub program: Vec<Option<Arc<Program>>>,
    pub cursor: Vec<Cursor>,
    /// The decoded next instruction (the instruction buffer); `None` past the end.
    pub next: Vec<Option<Inst>>,
    pub cta_slot: Vec<u16>,
    pub kernel: Vec<u32>,
    pub warp_in_cta: Vec<u32>,
    pub age: Vec<u64>,
    /// Cycle the warp was launched (for the resident warp-cycle count).
    pub launched_at: Vec<u64>,
    /// Completion of every memory operation issued so far (for MEMBAR and EXIT drain).
    pub mem_drain: Vec<u64>,
    pub long_wait: Vec<bool>,
    /// While at a barrier: when the next instruction's operands are ready.
    pub held_ready: Vec<u64>,
    /// While at a barrier: which of the CTA's barriers.
    pub bar_id: Vec<u8>,
    /// Index (in its CTA) of the mbarrier the warp's next bulk copy completes on (`u16::MAX`: none).
    pub tx_mbar: Vec<u16>,
    pub async_groups: Vec<GroupRing>,
    pub wgmma_groups: Vec<GroupRing>,
    /// Per register: when its pending write completes, and the producer's kind.
    pub scoreboard: Vec<Scoreboard>,
    /// Registers the warp holds (all 32 lanes), changed by `USETMAXREG`.
    pub regs_held: Vec<u32>,
}

impl Warps {
    /// Bytes of state per warp slot: what [`Warps::new`] allocates per slot (keep the two in
    /// step). Used by [`crate::footprint`](mod@crate::footprint) to bound a chip's model state before building it.
    pub const BYTES_PER_WARP: usize = size_of::<Phase>()
        + size_of::<u64>() // ready_at
        + size_of::<StallReason>()
        + size_of::<u64>() // acct_from
        + size_of::<Option<Arc<Program>>>()
        + size_of::<Cursor>()
        + size_of::<Option<Inst>>()
        + size_of::<u16>() // cta_slot
        + 3 * size_of::<u32>() // kernel, warp_in_cta, regs_held
        + 3 * size_of::<u64>() // age, launched_at, mem_drain
        + size_of::<bool>()
        + size_of::<u64>() // held_ready
        + size_of::<u16>() // tx_mbar
        + size_of::<u8>() // bar_id
        + 2 * size_of::<GroupRing>()
        + size_of::<Scoreboard>();

    pub fn new(n: usize) -> Warps {
        Warps {
            phase: vec![Phase::Free; n],
            ready_at: vec![u64::MAX; n],
            wait_reason: vec![StallReason::NoInstruction; n],
            acct_from: vec![0; n],
            program: vec![None; n],
            cursor: vec![Cursor::default(); n],
            next: vec![None; n],
            cta_slot: vec![0; n],
            kernel: vec![0; n],
            warp_in_cta: vec![0; n],
            age: vec![0; n],
            launched_at: vec![0; n],
            mem_drain: vec![0; n],
            long_wait: vec![false; n],
            held_ready: vec![0; n],
            bar_id: vec![0; n],
            tx_mbar: vec![u16::MAX; n],
            async_groups: vec![GroupRing::default(); n],
            wgmma_groups: vec![GroupRing::default(); n],
            scoreboard: vec![Scoreboard::default(); n],
            regs_held: vec![0; n],
        }
    }

    pub fn len(&self) -> usize {
        self.phase.len()
    }

    pub fn is_empty(&self) -> bool {
        self.phase.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_ring_waits_for_older_groups() {
        let mut g = GroupRing::default();
        for t in [10, 20, 30] {
            g.open = t;
            g.commit();
        }
        assert_eq!(g.wait_all_but(1), 20);
        assert_eq!(g.wait_all_but(0), 30);
        assert_eq!(g.wait_all_but(0), 0);
    }

    #[test]
    fn group_ring_folds_when_full() {
        let mut g = GroupRing::default();
        for t in 1..=10u64 {
            g.open = t * 10;
            g.commit();
        }
        assert_eq!(g.wait_all_but(7), 30);
        assert_eq!(g.wait_all_but(0), 100);
    }
}

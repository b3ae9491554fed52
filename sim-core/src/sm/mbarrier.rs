//! mbarriers: the shared-memory barriers that hand pipeline stages between producer and
//! consumer warps on Hopper (and that TMA copies complete on).
//!
//! A barrier is identified by its shared-memory address (the memory operand of the `SYNCS`
//! instructions). It counts arrivals per phase (the count comes from `SYNCS.EXCH.64`'s
//! immediate, 1 by default). An `SYNCS.ARRIVE.TRANS64` (arrive + expect_tx) also makes the phase
//! wait for transaction bytes, as many as its immediate says: the bulk copies (`UTMALDG`,
//! `UBLKCP`) the same warp issues next complete on that barrier, and a multicast copy also on
//! the barrier at the same address in every other CTA of the cluster. Without a byte count
//! (immediate 0) the phase waits for the next copy the warp issues. A phase completes when its
//! arrivals are in and its bytes have landed; the completion time is known at once in this
//! timestamp model.
//!
//! A warp's `SYNCS.PHASECHK...TRYWAIT` waits for the next phase it has not yet waited for on that
//! barrier. Traces therefore hold one wait per phase (a generator's trace, or a real trace
//! without its failed retries).

use super::warps::Phase;
use super::{CtaSlot, Sm};
use crate::stats::StallReason;

/// Completion times of the most recent phases kept per barrier; a wait for an older phase
/// counts as already satisfied.
const PHASE_HISTORY: usize = 8;

#[derive(Clone, Debug, Default)]
pub(super) struct Mbar {
    addr: u64,
    expected: u32,
    arrived: u32,
    last_arrive: u64,
    expects_tx: bool,
    tx_attached: bool,
    /// Bytes the open phase expects (0: any one copy) and has received.
    tx_expected: u64,
    tx_received: u64,
    tx_done: u64,
    completed: u32,
    done: [u64; PHASE_HISTORY],
    /// Next phase each warp of the CTA will wait for.
    next_wait: Vec<u32>,
}

/// A warp blocked on a phase that has not completed yet.
#[derive(Clone, Copy, Debug)]
pub(super) struct MbarWaiter {
    slot: u16,
    mbar: u16,
    phase: u32,
}

impl CtaSlot {
    /// The barrier at `addr`, created on first use (1 expected arrival).
    fn mbar(&mut self, addr: u64, warps: usize) -> usize {
        if let Some(i) = self.mbars.iter().position(|m| m.addr == addr) {
            return i;
        }
        self.mbars.push(Mbar { addr, expected: 1, next_wait: vec![0; warps], ..Mbar::default() });
        self.mbars.len() - 1
    }
}

impl Sm {
    /// `SYNCS.EXCH.64`: (re)initialises the barrier with `count` expected arrivals.
    pub(super) fn mbar_init(&mut self, s: usize, addr: u64, count: u32) {
        let cs = self.w.cta_slot[s] as usize;
        let warps = self.ctas[cs].slots.len();
        let i = self.ctas[cs].mbar(addr, warps);
        let m = &mut self.ctas[cs].mbars[i];
        *m = Mbar { addr, expected: count.max(1), next_wait: vec![0; warps], ..Mbar::default() };
    }

    /// An arrival of warp `s` at `now`; with `expect_tx`, the warp's next bulk copy completes on
    /// this barrier.
    pub(super) fn mbar_arrive(&mut self, s: usize, addr: u64, now: u64, expect_tx: bool, tx_bytes: u64) {
        let cs = self.w.cta_slot[s] as usize;
        let warps = self.ctas[cs].slots.len();
        let i = self.ctas[cs].mbar(addr, warps);
        let m = &mut self.ctas[cs].mbars[i];
        m.arrived += 1;
        m.last_arrive = m.last_arrive.max(now);
        if expect_tx {
            m.expects_tx = true;
            m.tx_expected += tx_bytes;
            self.w.tx_mbar[s] = i as u16;
        }
        self.mbar_try_complete(cs, i, now);
    }

    /// A bulk copy of warp `s` of `bytes` finishing at `done`: attach it to the barrier the warp
    /// armed. Returns that barrier's address, or `None` when the warp armed none (the copy then
    /// completes on nothing). With a byte count the barrier stays armed for further copies.
    pub(super) fn mbar_tx(&mut self, s: usize, done: u64, bytes: u64, now: u64) -> Option<u64> {
        let i = self.w.tx_mbar[s];
        if i == u16::MAX {
            return None;
        }
        let cs = self.w.cta_slot[s] as usize;
        let m = &self.ctas[cs].mbars[i as usize];
        let addr = m.addr;
        if m.tx_expected == 0 {
            self.w.tx_mbar[s] = u16::MAX;
        }
        self.mbar_deliver(cs, i as usize, done, bytes, now);
        Some(addr)
    }

    /// Bytes of a copy (maybe another CTA's multicast) landing at `done` on the barrier at
    /// `addr` of the CTA in `cs`.
    pub fn mbar_remote_tx(&mut self, cs: u16, addr: u64, done: u64, bytes: u64, now: u64) {
        let cs = cs as usize;
        if !self.ctas[cs].active {
            return;
        }
        let warps = self.ctas[cs].slots.len();
        let i = self.ctas[cs].mbar(addr, warps);
        self.mbar_deliver(cs, i, done, bytes, now);
    }

    fn mbar_deliver(&mut self, cs: usize, i: usize, done: u64, bytes: u64, now: u64) {
        let m = &mut self.ctas[cs].mbars[i];
        m.tx_attached = true;
        m.tx_received += bytes;
        m.tx_done = m.tx_done.max(done);
        self.mbar_try_complete(cs, i, now);
    }

    /// Completes the open phase if its arrivals and bytes are in, and wakes its waiters.
    fn mbar_try_complete(&mut self, cs: usize, i: usize, now: u64) {
        let m = &mut self.ctas[cs].mbars[i];
        let bytes_in = if m.tx_expected > 0 { m.tx_received >= m.tx_expected } else { m.tx_attached };
        if m.arrived < m.expected || (m.expects_tx && !bytes_in) {
            return;
        }
        let at = m.last_arrive.max(m.tx_done).max(now);
        m.done[m.completed as usize % PHASE_HISTORY] = at;
        m.completed += 1;
        m.arrived = 0;
        m.expects_tx = false;
        m.tx_attached = false;
        m.tx_received = m.tx_received.saturating_sub(m.tx_expected);
        m.tx_expected = 0;
        m.tx_done = 0;
        let completed = m.completed;
        // Wake the warps waiting for a phase that is now complete.
        let mut k = 0;
        while k < self.ctas[cs].mbar_waiters.len() {
            let wt = self.ctas[cs].mbar_waiters[k];
            if wt.mbar as usize == i && wt.phase < completed {
                self.ctas[cs].mbar_waiters.swap_remove(k);
                let slot = wt.slot as usize;
                self.w.phase[slot] = Phase::Running;
                let ready = self.w.held_ready[slot].max(at).max(now + 1);
                self.wake_warp(slot, ready);
            } else {
                k += 1;
            }
        }
    }

    /// Warp `s` waits for its next phase of the barrier at `addr`. Returns the cycle it may go
    /// on, or `None` when it must block until the phase completes.
    pub(super) fn mbar_wait(&mut self, s: usize, addr: u64) -> Option<u64> {
        let cs = self.w.cta_slot[s] as usize;
        let warps = self.ctas[cs].slots.len();
        let i = self.ctas[cs].mbar(addr, warps);
        let w = self.w.warp_in_cta[s] as usize;
        let m = &mut self.ctas[cs].mbars[i];
        let phase = m.next_wait[w];
        m.next_wait[w] += 1;
        if phase < m.completed {
            let age = m.completed - phase;
            return Some(if age as usize > PHASE_HISTORY { 0 } else { m.done[phase as usize % PHASE_HISTORY] });
        }
        self.ctas[cs].mbar_waiters.push(MbarWaiter { slot: s as u16, mbar: i as u16, phase });
        None
    }

    /// Blocks warp `s` on an mbarrier phase (after its next instruction was fetched).
    pub(super) fn block_on_mbar(&mut self, s: usize, now: u64) {
        self.w.held_ready[s] = self.w.ready_at[s];
        self.w.phase[s] = Phase::Mbar;
        self.w.ready_at[s] = u64::MAX;
        self.w.wait_reason[s] = StallReason::Barrier;
        self.w.acct_from[s] = now + 1;
    }
}

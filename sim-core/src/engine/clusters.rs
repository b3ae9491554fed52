//! Thread-block clusters in the engine: placing a cluster's CTAs together on one GPC, and
//! delivering a TMA multicast to the other CTAs of its cluster.

use gpusim_isa::KernelSource;

use super::Engine;
use crate::error::SimError;
use crate::observer::Observer;

impl<O: Observer> Engine<'_, O> {
    /// Hands the multicast bytes SM `from` produced this cycle to the other CTAs of their clusters.
    pub(super) fn deliver_multicast(&mut self, from: usize, now: u64) {
        let out = std::mem::take(&mut self.sms[from].outbox);
        for tx in &out {
            let Some(members) = self.clusters.get(&(tx.kernel, tx.cluster)) else { continue };
            for &(rank, sm, slot) in members {
                if rank < 32 && tx.ranks & (1 << rank) != 0 {
                    self.sms[sm as usize].mbar_remote_tx(slot, tx.addr, tx.done, tx.bytes, now);
                    self.wake[sm as usize] = self.sms[sm as usize].wake_at;
                }
            }
        }
        let mut out = out;
        out.clear();
        self.sms[from].outbox = out;
    }

    /// Cluster launch: pulls CTAs until the first cluster (in launch order) is complete, then
    /// places all its CTAs at once on SMs of one GPC that have room, or waits.
    pub(super) fn dispatch_clusters(&mut self, kidx: usize, ks: &mut dyn KernelSource) -> Result<(), SimError> {
        let info = &self.kernels[kidx].info;
        let (grid, cl) = (info.grid, info.cluster);
        let size = cl.count() as usize;
        let clusters_x = grid.x.div_ceil(cl.x.max(1)) as u64;
        let clusters_y = grid.y.div_ceil(cl.y.max(1)) as u64;
        loop {
            // Fill the buffer until its first cluster is complete.
            while self.feeds[kidx].cluster_buf.first_key_value().is_none_or(|(_, v)| v.len() < size) {
                if self.kernels[kidx].source_done {
                    break;
                }
                let Some(cta) = self.pull(kidx, ks)? else { break };
                let c = cta.coord;
                let id = (c.x / cl.x.max(1)) as u64
                    + clusters_x * ((c.y / cl.y.max(1)) as u64 + clusters_y * (c.z / cl.z.max(1)) as u64);
                self.feeds[kidx].cluster_buf.entry(id).or_default().push(cta);
            }
            let Some((_, members)) = self.feeds[kidx].cluster_buf.first_key_value() else {
                if (0..self.sms.len()).any(|s| self.sms[s].fits(&self.kernels[kidx])) {
                    self.note_idle_slot(kidx);
                }
                return Ok(());
            };
            // A partial cluster at the grid's edge (grid not a multiple of the cluster) goes as is.
            if members.len() < size && !self.kernels[kidx].source_done {
                return Ok(());
            }
            let n = members.len();
            if let Some(s) = self.samplers[kidx].as_mut()
                && s.skipping()
            {
                // Sampling skips whole clusters.
                let (_, members) = self.feeds[kidx].cluster_buf.pop_first().expect("checked above");
                for cta in &members {
                    s.skip(&self.kernels[kidx], cta, true);
                }
                continue;
            }
            if self.feeds[kidx].full_at == Some(self.retired) {
                return Ok(());
            }
            let Some(plan) = self.plan_cluster(kidx, n) else {
                self.feeds[kidx].full_at = Some(self.retired);
                return Ok(());
            };
            let (_, members) = self.feeds[kidx].cluster_buf.pop_first().expect("checked above");
            for (cta, sm) in members.into_iter().zip(plan) {
                self.place(kidx, sm, cta);
            }
        }
    }

    /// SMs of one GPC (searched round-robin) that can take `n` CTAs of `kidx` now.
    fn plan_cluster(&mut self, kidx: usize, n: usize) -> Option<Vec<usize>> {
        let sms = self.sms.len();
        let gpcs = self.arch.sm.gpcs_clamped() as usize;
        let k = &self.kernels[kidx];
        for g in 0..gpcs {
            let gpc = (self.next_gpc + g) % gpcs;
            let members: Vec<usize> = (0..sms).filter(|&s| self.arch.sm.gpc_of(s as u32) as usize == gpc).collect();
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

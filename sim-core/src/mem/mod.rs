//! The memory system behind the LD/ST units: one interface, implementations chosen by name.

pub mod cache;
pub mod hbm;
pub mod hierarchy;
pub mod server;
mod simple;

pub use hierarchy::Hierarchy;
pub use simple::SimpleMemory;

use gpusim_configs::Arch;
use gpusim_isa::MemSpace;

use crate::stats::LevelTraffic;

/// What an access does.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum AccessKind {
    Load,
    Store,
    /// Read-modify-write returning a value.
    Atomic,
    /// Read-modify-write without a return value.
    Reduction,
    /// Global read whose data is written to shared memory (`LDGSTS`, TMA loads).
    AsyncLoad,
}

/// One warp-level access, already coalesced into 32-byte sectors.
#[derive(Clone, Copy, Debug)]
pub struct MemRequest<'a> {
    pub sm: u32,
    pub kind: AccessKind,
    pub space: MemSpace,
    /// Sector addresses (byte address of each 32-byte sector), ascending and unique.
    pub sectors: &'a [u64],
    /// Skip the L1 (`.BYPASS`, `.CG`, async copies).
    pub bypass_l1: bool,
}

/// Where an access was served and when it completes.
#[derive(Clone, Copy, Debug, Default)]
pub struct AccessOutcome {
    /// SM cycle at which the data is in registers (loads), acknowledged (stores), or written to
    /// shared memory (async loads).
    pub done: u64,
    pub l1: LevelTraffic,
    pub l2: LevelTraffic,
    pub dram: LevelTraffic,
}

impl AccessOutcome {
    /// Adds the traffic of `o` and keeps the later completion.
    pub fn merge(&mut self, o: &AccessOutcome) {
        self.done = self.done.max(o.done);
        self.l1.merge(&o.l1);
        self.l2.merge(&o.l2);
        self.dram.merge(&o.dram);
    }
}

/// Sectors a bulk transfer hands to [`MemorySystem::access`] per call (a warp's worth: 32
/// lanes × 4 sectors).
pub const BULK_CHUNK: usize = 32 * 4;

/// A bulk copy between global and shared memory (TMA, `cp.async.bulk`): `count` consecutive
/// sectors of `step` bytes from the sector address `first`, ascending (the last one at most
/// `u64::MAX`). It bypasses the L1.
#[derive(Clone, Copy, Debug)]
pub struct BulkRequest {
    pub sm: u32,
    pub kind: AccessKind,
    pub first: u64,
    pub step: u64,
    pub count: u64,
}

impl BulkRequest {
    /// Calls `f` on the request's sectors in chunks of at most [`BULK_CHUNK`], in order, as
    /// the [`MemRequest`]s that [`MemorySystem::access_bulk`] stands for.
    pub fn for_each_chunk(&self, mut f: impl FnMut(&MemRequest<'_>)) {
        let mut chunk = [0u64; BULK_CHUNK];
        let mut i = 0;
        while i < self.count {
            let m = (self.count - i).min(BULK_CHUNK as u64) as usize;
            for (j, c) in chunk[..m].iter_mut().enumerate() {
                *c = self.first + (i + j as u64) * self.step;
            }
            f(&MemRequest {
                sm: self.sm,
                kind: self.kind,
                space: MemSpace::Global,
                sectors: &chunk[..m],
                bypass_l1: true,
            });
            i += m as u64;
        }
    }
}

/// A bulk copy as its definition states it: `mem.access(at, ..)` on each chunk, merged (what
/// [`MemorySystem::access_bulk`] does by default).
pub fn bulk_by_chunks<M: MemorySystem + ?Sized>(mem: &mut M, at: u64, req: &BulkRequest) -> AccessOutcome {
    let mut total = AccessOutcome { done: at + 1, ..AccessOutcome::default() };
    req.for_each_chunk(|c| {
        let out = mem.access(at, c);
        total.merge(&out);
    });
    total
}

/// Utilisation of one kind of link or server, summed over its instances.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct LinkStats {
    /// `sm_port`, `l2_slice`, `hbm_channel`, ...
    pub name: String,
    pub instances: u32,
    pub bytes: u64,
    /// Cycles the instances were busy, summed.
    pub busy_cycles: u64,
    /// Cycles requests waited before service, summed (queueing delay).
    pub queue_cycles: u64,
    pub requests: u64,
}

/// A model of everything between the SMs' LD/ST units and DRAM.
///
/// Contract:
/// - `access(at, req)`: `at` is the cycle the request leaves the SM's LD/ST data port. Calls
///   come in the order the SMs issue the instructions (non-decreasing issue cycle, ascending SM
///   id within a cycle); `at` may exceed the issue cycle by the port backlog, which the
///   sub-cores' `lsu_queue_depth` bounds. The result depends only on the sequence of calls
///   (determinism).
/// - `done >= at + 1`: an access never completes in the cycle it leaves the port.
/// - It must not keep references to the request's sector slice.
/// - `kernel_arrives(sm, ..)` is called when the first CTA of a kernel is placed on SM `sm`,
///   before the CTA issues anything; caches behave as on the hardware across kernels (that SM's
///   L1 is invalidated and resized for the carveout, the L2 keeps its contents). Kernels of
///   other streams may still be running on other SMs, or on this one (`sm_idle` false).
pub trait MemorySystem {
    /// The name this implementation registers under.
    fn name(&self) -> &'static str;
    fn access(&mut self, at: u64, req: &MemRequest<'_>) -> AccessOutcome;
    /// A bulk copy leaving the SM's port at `at`: by definition, `access(at, ..)` on each of
    /// its chunks ([`BulkRequest::for_each_chunk`]) in order, the outcomes merged, and
    /// `done >= at + 1` even for an empty request. The default does exactly that; a model may
    /// instead walk the sectors without listing them, with the same results and state.
    fn access_bulk(&mut self, at: u64, req: &BulkRequest) -> AccessOutcome {
        bulk_by_chunks(self, at, req)
    }
    /// The earliest cycle SM `sm` should issue a global load that may miss its L1: `now`
    /// unless the SM's miss path is backed up, then when its backlog has drained to what keeps
    /// it busy. Asked before a global load issues; must not change what accesses see. Default:
    /// `now` (a model without a miss-path limit).
    fn load_ready_at(&self, _sm: u32, now: u64) -> u64 {
        now
    }
    /// `shared_per_sm`: shared memory the kernel's resident CTAs need per SM (for the carveout);
    /// `sm_idle`: the SM holds no CTA of another kernel.
    fn kernel_arrives(&mut self, _sm: u32, _shared_per_sm: u64, _sm_idle: bool) {}
    /// Utilisation of the links and servers so far.
    fn links(&self) -> Vec<LinkStats> {
        Vec::new()
    }
}

/// The memory models, by the name a run selects (`sim.memory_model`, or `SimOptions::memory_model`).
pub const MODELS: &[&str] = &["hierarchy", "simple"];

/// Builds the memory model `name` for `arch`.
pub fn build(name: &str, arch: &Arch) -> Result<Box<dyn MemorySystem>, String> {
    match name {
        "hierarchy" => Ok(Box::new(Hierarchy::new(arch))),
        "simple" => Ok(Box::new(SimpleMemory::new(arch))),
        _ => Err(format!("unknown memory model `{name}` (known: {})", MODELS.join(", "))),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_config_accepts_exactly_the_registered_models() {
        assert_eq!(super::MODELS, gpusim_configs::MEMORY_MODELS);
    }
}

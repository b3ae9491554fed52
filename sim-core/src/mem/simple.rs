//! A latency-and-bandwidth memory model: no caches, every global sector goes through the
//! requesting SM's NoC port and to DRAM, each a bandwidth-limited server with FIFO service in
//! request order, and the data returns after the unloaded L2 + DRAM latency.
//!
//! It counts bytes per level like the full hierarchy will, so reports keep their shape when the
//! memory-hierarchy model replaces it.

use gpusim_configs::Arch;

use super::{AccessKind, AccessOutcome, MemRequest, MemorySystem};
use crate::rate::{FRAC, Rate};
use crate::stats::LevelTraffic;

pub struct SimpleMemory {
    sector: u64,
    /// Per-SM port into the network: time (in 1/FRAC cycles) when it is next free.
    port_free: Vec<u64>,
    port_rate: Rate,
    dram_free: u64,
    dram_rate: Rate,
    load_latency: u64,
    store_latency: u64,
}

impl SimpleMemory {
    pub fn new(arch: &Arch) -> SimpleMemory {
        let clk = arch.clocks.sm;
        let dram_bpc = arch.hbm.bandwidth.per_cycle(clk).0;
        let dram_lat = arch.hbm.latency.to_cycles(clk).0;
        SimpleMemory {
            sector: arch.l1.sector.0.max(1),
            port_free: vec![0; arch.sm.count as usize],
            port_rate: Rate::bytes_per_cycle(arch.noc.sm_port_bandwidth.0),
            dram_free: 0,
            dram_rate: Rate::bytes_per_cycle(dram_bpc),
            load_latency: arch.l2.hit_latency.0 + dram_lat,
            store_latency: arch.l2.hit_latency.0,
        }
    }
}

impl MemorySystem for SimpleMemory {
    fn name(&self) -> &'static str {
        "simple"
    }

    fn access(&mut self, now: u64, req: &MemRequest<'_>) -> AccessOutcome {
        let n = req.sectors.len() as u64;
        let bytes = n * self.sector;
        let t0 = now * FRAC;
        let port = &mut self.port_free[req.sm as usize];
        let start_port = (*port).max(t0);
        *port = start_port + self.port_rate.time_for(bytes);
        let start_dram = self.dram_free.max(start_port);
        self.dram_free = start_dram + self.dram_rate.time_for(bytes);
        let latency = match req.kind {
            AccessKind::Store | AccessKind::Reduction => self.store_latency,
            _ => self.load_latency,
        };
        let done = self.dram_free.div_ceil(FRAC) + latency;
        let level = LevelTraffic { requests: 1, sectors: n, bytes, hits: 0, misses: n };
        AccessOutcome {
            done: done.max(now + 1),
            l1: if req.bypass_l1 { LevelTraffic::default() } else { level },
            l2: level,
            dram: level,
        }
    }
}

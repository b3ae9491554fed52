//! HBM: independent channels, each a data bus shared by banks that keep one row open.
//!
//! An access waits for its bank (a row miss first pays the precharge + activate penalty while
//! other banks keep the bus busy), then for the channel's data bus, and skips refresh windows.
//! Streaming accesses mostly hit open rows and the channels' buses set the pace; scattered
//! accesses mostly miss rows and the banks do. Effective bandwidth is what comes out of that,
//! not a configured efficiency.

use gpusim_configs::Arch;

use super::server::Calendar;
use crate::rate::{FRAC, Rate};

#[derive(Clone, Copy, Debug, Default)]
struct Bank {
    open_row: u64,
    free_at: u64,
}

struct Channel {
    bus: Calendar,
    banks: Vec<Bank>,
}

pub struct Hbm {
    channels: Vec<Channel>,
    rate: Rate,
    interleave_shift: u32,
    chunks_per_row: u64,
    banks: u64,
    row_miss: u64,
    refresh_period: u64,
    refresh_time: u64,
    /// Bytes moved, reads and writes.
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub row_hits: u64,
    pub row_misses: u64,
    busy: u64,
    waited: u64,
}

/// Converts picoseconds to 1/FRAC SM cycles.
fn ps_to_fp(ps: u64, clk_hz: u64) -> u64 {
    ((ps as u128 * clk_hz as u128 * FRAC as u128) / 1_000_000_000_000u128) as u64
}

impl Hbm {
    pub fn new(arch: &Arch) -> Hbm {
        let h = &arch.hbm;
        let n = (h.stacks * h.channels_per_stack).max(1) as usize;
        let clk = arch.clocks.sm.0;
        let per_channel = h.bandwidth.per_cycle(arch.clocks.sm).0 / n as f64;
        let interleave = h.interleave.0.max(32).next_power_of_two();
        Hbm {
            channels: (0..n)
                .map(|_| Channel {
                    bus: Calendar::default(),
                    banks: vec![Bank { open_row: u64::MAX, free_at: 0 }; h.banks_per_channel.max(1) as usize],
                })
                .collect(),
            rate: Rate::bytes_per_cycle(per_channel),
            interleave_shift: interleave.trailing_zeros(),
            chunks_per_row: (h.row_size.0 / interleave).max(1),
            banks: h.banks_per_channel.max(1) as u64,
            row_miss: ps_to_fp(h.row_miss_penalty.0, clk),
            refresh_period: ps_to_fp(h.refresh_interval.0, clk).max(1),
            refresh_time: ps_to_fp(h.refresh_time.0, clk),
            bytes_read: 0,
            bytes_written: 0,
            row_hits: 0,
            row_misses: 0,
            busy: 0,
            waited: 0,
        }
    }

    /// Utilisation of the channels' data buses (queueing includes row misses and refresh).
    pub fn link_stats(&self) -> super::LinkStats {
        super::LinkStats {
            name: "hbm_channel".into(),
            instances: self.channels.len() as u32,
            bytes: self.bytes_read + self.bytes_written,
            busy_cycles: self.busy / FRAC,
            queue_cycles: self.waited / FRAC,
            requests: self.row_hits + self.row_misses,
        }
    }

    /// Average wait of a random access for a refresh to end: tRFC² / (2·tREFI), in cycles.
    /// `hbm.latency` is measured with refreshes happening, so the fixed part excludes it.
    pub fn mean_refresh_wait_cycles(&self) -> u64 {
        let t = self.refresh_time as u128;
        (t * t / (2 * self.refresh_period as u128) / FRAC as u128) as u64
    }

    /// Row-miss penalty in whole cycles (the part of `hbm.latency` a row hit saves).
    pub fn row_miss_cycles(&self) -> u64 {
        self.row_miss / FRAC
    }

    /// Moves `bytes` at byte address `addr`, arriving at the controller at `arrival` (1/FRAC
    /// cycles; `now` is the issue time, no later request arrives before it). Returns when the
    /// data transfer ends. Writes (evictions) use the same path.
    pub fn access(&mut self, now: u64, arrival: u64, addr: u64, bytes: u64, write: bool) -> u64 {
        let chunk = addr >> self.interleave_shift;
        let n = self.channels.len() as u64;
        // Consecutive groups of `n` chunks cover every channel once (balanced streaming); each
        // group is rotated by a hash of its index so that power-of-two strides spread too.
        let local = chunk / n;
        let rot = (local ^ (local >> 5) ^ (local >> 11)).wrapping_mul(0x9E37_79B9) >> 7;
        let ch = ((chunk % n + rot % n) % n) as usize;
        let bank = ((local / self.chunks_per_row) % self.banks) as usize;
        let row = local / (self.chunks_per_row * self.banks);
        let c = &mut self.channels[ch];
        let b = &mut c.banks[bank];
        let mut t = arrival.max(b.free_at);
        // Writes (L2 evictions) wait in the controller's write queue and drain in row-sorted
        // batches, so they neither pay for nor disturb the open rows that reads see.
        if write {
            self.row_hits += 1;
        } else if b.open_row != row {
            t += self.row_miss;
            b.open_row = row;
            self.row_misses += 1;
        } else {
            self.row_hits += 1;
        }
        // Refresh: the channel transfers nothing during `refresh_time` of each period. Channels
        // refresh at staggered times (each its own controller), not all at once.
        let offset = ch as u64 * self.refresh_period / n;
        let phase = (t + offset) % self.refresh_period;
        if phase < self.refresh_time {
            t += self.refresh_time - phase;
        }
        let len = self.rate.time_for(bytes);
        c.bus.prune(now);
        let t = c.bus.book(t, len);
        let end = t + len;
        self.busy += len;
        self.waited += t - arrival;
        b.free_at = b.free_at.max(end);
        if write {
            self.bytes_written += bytes;
        } else {
            self.bytes_read += bytes;
        }
        end
    }
}

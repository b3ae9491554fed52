//! How much memory the model of a chip needs, worked out from the chip alone before anything is
//! built, so that a chip too large for the machine is an error that names its parameters instead
//! of an aborted allocation part-way into a run.
//!
//! The figure bounds the model's own state: per-SM warp and CTA slots, the L1s at their largest,
//! the L2's tags, the HBM banks. The L2 and L1 arrays are zeroed allocations that the OS backs
//! only where lines are touched, so the resident size of a run is usually far below it; the
//! bound is what the run could come to. The trace's own data (programs, read-ahead) is not
//! included: it is bounded by the trace reader.

use gpusim_configs::Arch;

use crate::mem::cache::SectorCache;
use crate::sm::warps::Warps;

/// The model's state by part, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Footprint {
    /// Warp slots (`sm.max_warps`, with their register scoreboards) and CTA slots of every SM.
    pub sms: u64,
    /// Every SM's L1 at the largest it can be (`l1.sram` less the smallest carveout).
    pub l1: u64,
    /// The L2's tag and state arrays.
    pub l2: u64,
    /// The HBM channels' banks.
    pub hbm: u64,
}

impl Footprint {
    pub fn total(&self) -> u64 {
        self.sms.saturating_add(self.l1).saturating_add(self.l2).saturating_add(self.hbm)
    }

    /// The parts with the chip parameters that size them, largest first: what an error names.
    pub fn parts(&self) -> [(&'static str, u64, &'static str); 4] {
        let mut p = [
            ("SM warp and CTA slots", self.sms, "sm.count, sm.max_warps, sm.max_ctas"),
            ("L1 caches", self.l1, "sm.count, l1.sram, l1.line"),
            ("L2 tags", self.l2, "l2.size, l2.line"),
            ("HBM banks", self.hbm, "hbm.stacks, hbm.channels_per_stack, hbm.banks_per_channel"),
        ];
        p.sort_by_key(|x| std::cmp::Reverse(x.1));
        p
    }
}

/// The bound for `arch` (saturating: a chip past `u64` bytes reports `u64::MAX`).
pub fn footprint(arch: &Arch) -> Footprint {
    let sms = arch.sm.count.max(1) as u64;
    let per_sm = (arch.sm.max_warps as u64).saturating_mul(Warps::BYTES_PER_WARP as u64)
        + (arch.sm.max_ctas as u64).saturating_mul(256)
        + arch.sm.sub_cores as u64 * 4096;
    let line = arch.l2.line.0.max(32).next_power_of_two();
    let smallest_carveout = arch.sm.shared_mem_carveouts.iter().map(|b| b.0).min().unwrap_or(0);
    let l1_lines = (arch.l1.sram.0.saturating_sub(smallest_carveout) / line).max(1);
    let l2_lines = arch.l2.size.0 / line;
    let channels = (arch.hbm.stacks as u64).saturating_mul(arch.hbm.channels_per_stack as u64).max(1);
    Footprint {
        sms: sms.saturating_mul(per_sm),
        l1: sms.saturating_mul(l1_lines).saturating_mul(SectorCache::BYTES_PER_LINE),
        l2: l2_lines.saturating_mul(SectorCache::BYTES_PER_LINE),
        hbm: channels.saturating_mul(arch.hbm.banks_per_channel as u64 * 16 + 256),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_need_little_and_grow_with_the_l2() {
        let a = gpusim_configs::load_preset("h100-sxm5-80gb").unwrap();
        let f = footprint(&a);
        // 50 MiB of L2 at 128 B lines: 400 Ki lines.
        assert_eq!(f.l2, (50 << 20) / 128 * SectorCache::BYTES_PER_LINE);
        assert!(f.total() < 256 << 20, "{f:?}");
        let big = a.with_override_str("l2.size", "\"4000 MiB\"").unwrap();
        assert_eq!(footprint(&big).l2, (4000u64 << 20) / 128 * SectorCache::BYTES_PER_LINE);
        assert_eq!(footprint(&big).parts()[0].0, "L2 tags");
    }
}

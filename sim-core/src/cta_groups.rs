//! Per-group CTA times of a kernel whose CTAs are grouped ([`gpusim_isa::CtaGroup`]: the experts
//! of a grouped GEMM), and the imbalance they show.
//!
//! A CTA's time is from its launch on an SM to its retirement. Summed per group, it is the work
//! the group cost the SMs: the busiest group's share of it, and its ratio to the mean, say how
//! uneven the routing made the kernel. The group whose last CTA ended last is the kernel's
//! straggler. In a persistent kernel, whose CTAs walk tiles of several groups (its group is a
//! tile parameter, `gpusim_isa::CtaParam`), the unit is a run of tiles of one group instead: from
//! the cycle the CTA's last warp moved to the run's first tile (the CTA's launch for its first)
//! to the cycle it moved to another group's tile (or the CTA retired), so a group's `ctas` counts
//! its runs. The last warp is a math warp in a warp-specialised kernel; the producer (warp 0)
//! runs up to a whole pipeline ahead, which for short-K tiles is most of a tile. Sampled kernels (`--sample`) skip CTAs: their group times cover the CTAs that ran
//! in detail only, and the report says the kernel was sampled.

use std::collections::BTreeMap;

use serde::Serialize;

/// Most distinct groups recorded per kernel: CTAs of further groups are counted in
/// [`GroupTimes::untracked_ctas`] (a trace whose group parameter takes millions of values
/// must not grow the map without bound). Grouped GEMMs have at most 4096 groups.
pub const MAX_GROUPS: usize = 4096;

/// The CTAs of one group.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct GroupTime {
    pub ctas: u64,
    /// Launch-to-retirement cycles of the group's CTAs, summed.
    pub cta_cycles: u64,
    pub first_start: u64,
    pub last_end: u64,
}

/// The groups of one kernel, by group value (ascending: deterministic).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupTimes {
    pub by_group: BTreeMap<i64, GroupTime>,
    /// CTAs of groups beyond the first [`MAX_GROUPS`].
    pub untracked_ctas: u64,
}

impl GroupTime {
    fn add(&mut self, o: &GroupTime) {
        self.ctas += o.ctas;
        self.cta_cycles += o.cta_cycles;
        self.first_start = self.first_start.min(o.first_start);
        self.last_end = self.last_end.max(o.last_end);
    }
}

impl GroupTimes {
    /// A CTA of group `g` ran from `start` to `end`. Called once per CTA (not per instruction).
    /// A negative group is no group (a CTA with no work, as Triton fused_moe's blocks past the
    /// padded tokens, whose expert id is −1): it is not recorded.
    pub fn record(&mut self, g: i64, start: u64, end: u64) {
        if g < 0 {
            return;
        }
        self.add(g, &GroupTime { ctas: 1, cta_cycles: end.saturating_sub(start), first_start: start, last_end: end });
    }

    /// Adds another kernel's groups (the run's summary over the kernels of one grouping).
    pub fn absorb(&mut self, other: &GroupTimes) {
        for (&g, t) in &other.by_group {
            self.add(g, t);
        }
        self.untracked_ctas += other.untracked_ctas;
    }

    fn add(&mut self, g: i64, t: &GroupTime) {
        let full = self.by_group.len() >= MAX_GROUPS;
        match self.by_group.get_mut(&g) {
            Some(e) => e.add(t),
            None if full => self.untracked_ctas += t.ctas,
            None => {
                self.by_group.insert(g, *t);
            }
        }
    }

    /// The group with the most CTA cycles (on a tie the lowest value).
    pub fn busiest(&self) -> Option<(i64, GroupTime)> {
        self.by_group.iter().map(|(&g, &t)| (g, t)).max_by_key(|(g, t)| (t.cta_cycles, std::cmp::Reverse(*g)))
    }

    /// The group whose last CTA ended last (on a tie the lowest value).
    pub fn straggler(&self) -> Option<(i64, GroupTime)> {
        self.by_group.iter().map(|(&g, &t)| (g, t)).max_by_key(|(g, t)| (t.last_end, std::cmp::Reverse(*g)))
    }

    pub fn total_cta_cycles(&self) -> u64 {
        self.by_group.values().map(|t| t.cta_cycles).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_sum_per_group_and_name_the_busiest_and_the_straggler() {
        let mut g = GroupTimes::default();
        g.record(3, 0, 100);
        g.record(1, 10, 60);
        g.record(1, 60, 200);
        g.record(2, 0, 150);
        assert_eq!(g.by_group[&1], GroupTime { ctas: 2, cta_cycles: 190, first_start: 10, last_end: 200 });
        assert_eq!(g.busiest().unwrap().0, 1);
        assert_eq!(g.straggler().unwrap().0, 1);
        assert_eq!(g.total_cta_cycles(), 100 + 190 + 150);
        // Ties go to the lowest group.
        g.record(2, 150, 190);
        assert_eq!(g.busiest().unwrap().0, 1);
    }

    #[test]
    fn groups_beyond_the_limit_are_counted_not_stored() {
        let mut g = GroupTimes::default();
        for v in 0..MAX_GROUPS as i64 + 10 {
            g.record(v, 0, 1);
        }
        g.record(0, 0, 1);
        assert_eq!(g.by_group.len(), MAX_GROUPS);
        assert_eq!(g.untracked_ctas, 10);
        assert_eq!(g.by_group[&0].ctas, 2);
    }
}

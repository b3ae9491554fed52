//! The per-warp register scoreboard's fast path: per block of [`BLOCK`] registers, an upper
//! bound of the cycles its registers become ready, so that waiting for an operand of 64 to 128
//! registers (a warpgroup MMA's accumulator) reads a few bounds instead of every register.
//!
//! The registers' own ready cycles and producer kinds (`Warps::reg_ready`, `reg_reason`) stay
//! the truth; a bound only lets [`wait_for`] skip a block none of whose registers is later than
//! the wait so far, which is exactly the registers the full scan would not have changed
//! anything for. Bounds never fall below what they bound: a block written whole gets the exact
//! value, a block written in part keeps the larger of the two (so a slot's bounds stay valid
//! when a new warp's scoreboard is zeroed at launch: they are only looser).

use std::ops::Range;

use gpusim_isa::reg::{REG_SPACE, RegRange};

use crate::stats::StallReason;

/// Registers per bounded block.
pub const BLOCK: usize = 8;
const BLOCKS: usize = REG_SPACE.div_ceil(BLOCK);
const MMA: u8 = StallReason::MathDependency as u8;

/// One warp's block bounds.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    /// Per block, side by side (one host cache line for both): `[ALL]` over every register of
    /// the block, `[PLAIN]` over those whose producer is not a warpgroup MMA (reason
    /// `MathDependency`), what a chained MMA waits for.
    blocks: [[u64; 2]; BLOCKS],
}

const ALL: usize = 0;
const PLAIN: usize = 1;

impl Default for Bounds {
    fn default() -> Self {
        Bounds { blocks: [[0; 2]; BLOCKS] }
    }
}

/// The scoreboard indices of a register range: [`RegRange::regs`] as a slice range.
#[inline]
pub fn span(r: &RegRange) -> Range<usize> {
    if r.is_none() {
        return 0..0;
    }
    let start = r.first.index().min(REG_SPACE);
    start..(r.first.index() + r.count as usize).min(REG_SPACE)
}

/// Registers `span` become ready at `at`, written by a producer of kind `reason`.
#[inline]
pub fn write(
    ready: &mut [u64; REG_SPACE],
    why: &mut [u8; REG_SPACE],
    b: &mut Bounds,
    span: Range<usize>,
    at: u64,
    reason: u8,
) {
    if span.is_empty() {
        return;
    }
    for r in span.clone() {
        ready[r] = at;
        why[r] = reason;
    }
    let plain = if reason == MMA { 0 } else { at };
    for blk in span.start / BLOCK..=(span.end - 1) / BLOCK {
        let bound = &mut b.blocks[blk];
        let whole = span.start <= blk * BLOCK && span.end >= (blk * BLOCK + BLOCK).min(REG_SPACE);
        if whole {
            *bound = [at, plain];
        } else {
            bound[ALL] = bound[ALL].max(at);
            bound[PLAIN] = bound[PLAIN].max(plain);
        }
    }
}

/// The ordered scan of registers `span`: each register later than the wait so far makes it
/// that register's (one written by a warpgroup MMA is passed over when `skip_mma`).
#[inline]
fn scan(
    regs: &[u64; REG_SPACE],
    reasons: &[u8; REG_SPACE],
    span: Range<usize>,
    skip_mma: bool,
    (mut ready, mut why): (u64, u8),
) -> (u64, u8) {
    for r in span {
        let t = regs[r];
        if t > ready {
            let rr = reasons[r];
            if skip_mma && rr == MMA {
                continue;
            }
            ready = t;
            why = rr;
        }
    }
    (ready, why)
}

/// Waits for registers `span` on top of a wait until `ready` for `why`: in register order,
/// each register later than the wait so far makes it that register's (a register written by a
/// warpgroup MMA is passed over when `skip_mma`: the tensor pipe orders chained MMAs).
#[inline]
pub fn wait_for(
    regs: &[u64; REG_SPACE],
    reasons: &[u8; REG_SPACE],
    b: &Bounds,
    span: Range<usize>,
    skip_mma: bool,
    mut wait: (u64, u8),
) -> (u64, u8) {
    // An operand of a few registers is read directly: its registers share a host cache line or
    // two, and its bound would be one more.
    if span.len() <= BLOCK {
        return scan(regs, reasons, span, skip_mma, wait);
    }
    let which = if skip_mma { PLAIN } else { ALL };
    for blk in span.start / BLOCK..=(span.end - 1) / BLOCK {
        if b.blocks[blk][which] <= wait.0 {
            continue;
        }
        let part = span.start.max(blk * BLOCK)..span.end.min(blk * BLOCK + BLOCK);
        wait = scan(regs, reasons, part, skip_mma, wait);
    }
    wait
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpusim_isa::Reg;

    /// The scan without bounds: what `wait_for` must equal.
    fn reference(
        regs: &[u64; REG_SPACE],
        reasons: &[u8; REG_SPACE],
        span: Range<usize>,
        skip: bool,
        init: (u64, u8),
    ) -> (u64, u8) {
        let (mut ready, mut why) = init;
        for r in span {
            if regs[r] > ready && !(skip && reasons[r] == MMA) {
                ready = regs[r];
                why = reasons[r];
            }
        }
        (ready, why)
    }

    #[test]
    fn bounded_wait_equals_the_full_scan() {
        let mut regs = [0u64; REG_SPACE];
        let mut reasons = [StallReason::Wait as u8; REG_SPACE];
        let mut b = Bounds::default();
        let mut x = 12345u64;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for step in 0..20_000u64 {
            let first = next(REG_SPACE as u64 + 4) as u16;
            let count = 1 + next(130) as u8;
            let range = RegRange::new(Reg(first), count);
            if next(2) == 0 {
                let reason = if next(3) == 0 { MMA } else { next(12) as u8 };
                write(&mut regs, &mut reasons, &mut b, span(&range), step + next(400), reason);
            } else {
                let init = (step + next(100), StallReason::Wait as u8);
                let skip = next(2) == 0;
                assert_eq!(
                    wait_for(&regs, &reasons, &b, span(&range), skip, init),
                    reference(&regs, &reasons, span(&range), skip, init),
                    "step {step}: {range}"
                );
            }
        }
    }

    #[test]
    fn span_matches_the_register_iterator() {
        for (first, count) in [(0u16, 4u8), (254, 1), (356, 8), (359, 1), (u16::MAX, 0), (300, 0)] {
            let r = RegRange::new(Reg(first), count);
            assert_eq!(span(&r).collect::<Vec<_>>(), r.regs().collect::<Vec<_>>(), "{r}");
        }
    }
}

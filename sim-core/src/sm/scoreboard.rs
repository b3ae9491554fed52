//! One warp's register scoreboard: per register, the cycle its pending write completes and
//! what kind of producer writes it, kept per block of [`BLOCK`] registers so that the common
//! wide operands cost a few block operations instead of one per register.
//!
//! Two things make it cheap, neither observable:
//! - **Bounds.** Per block, an upper bound of its registers' ready cycles (and one over those
//!   whose producer is not a warpgroup MMA), so that waiting for an operand of 64 to 128
//!   registers (a warpgroup MMA's accumulator) skips every block none of whose registers is
//!   later than the wait so far: exactly the registers the full scan would not have changed
//!   anything for.
//! - **Uniform blocks.** A block written whole (an accumulator, a wide load, the zeroing at a
//!   warp's launch) is stored as one value and one reason for all its registers, not register
//!   by register: an MMA writing 128 accumulator registers writes 16 blocks. A block is spelled
//!   out into its registers when a write covers part of it.
//!
//! The truth is what [`Scoreboard::wait_for`] answers, which equals the ordered scan of every
//! register of the operand over the per-register values the writes left (the tests compare the
//! two on random writes and waits).

use std::ops::Range;

use gpusim_isa::reg::{REG_SPACE, RegRange};

use crate::stats::StallReason;

/// Registers per block.
pub const BLOCK: usize = 8;
const BLOCKS: usize = REG_SPACE.div_ceil(BLOCK);
const MMA: u8 = StallReason::MathDependency as u8;
/// `uniform[blk]` of a block whose registers hold their own values.
const SPELLED_OUT: u8 = u8::MAX;

const ALL: usize = 0;
const PLAIN: usize = 1;

/// One warp's scoreboard.
#[derive(Clone, Debug)]
pub struct Scoreboard {
    /// Per block: `[ALL]` bounds every register of the block, `[PLAIN]` those whose producer is
    /// not a warpgroup MMA (reason `MathDependency`), what a chained MMA waits for. Exact for a
    /// uniform block; never below what it bounds for the others.
    bounds: [[u64; 2]; BLOCKS],
    /// The largest of every block's `bounds`, `[ALL]` and `[PLAIN]`: a wait that is not earlier
    /// than it finds no register to wait for, whatever the operand (an accumulator of 16 blocks
    /// is most of a warpgroup MMA's operands, and most waits find nothing pending).
    top: [u64; 2],
    /// Per block: the reason every register of it has, its ready cycle being `bounds[ALL]`
    /// (a uniform block, whose `ready`/`why` entries are stale), or [`SPELLED_OUT`].
    uniform: [u8; BLOCKS],
    /// Per register of a spelled-out block: the producer's kind (a [`StallReason`] index).
    why: [u8; REG_SPACE],
    /// Per register of a spelled-out block: the cycle its pending write completes.
    ready: [u64; REG_SPACE],
}

impl Default for Scoreboard {
    /// Every register ready at cycle 0 (reason `Wait`).
    fn default() -> Self {
        Scoreboard {
            bounds: [[0; 2]; BLOCKS],
            top: [0; 2],
            uniform: [StallReason::Wait as u8; BLOCKS],
            why: [StallReason::Wait as u8; REG_SPACE],
            ready: [0; REG_SPACE],
        }
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

#[inline]
fn block_range(blk: usize) -> Range<usize> {
    blk * BLOCK..(blk * BLOCK + BLOCK).min(REG_SPACE)
}

impl Scoreboard {
    /// Every register ready at cycle 0 (reason `Wait`): a new warp's scoreboard. Touches the
    /// blocks only.
    #[inline]
    pub fn reset(&mut self) {
        self.bounds = [[0; 2]; BLOCKS];
        self.top = [0; 2];
        self.uniform = [StallReason::Wait as u8; BLOCKS];
    }

    /// Writes a uniform block's value into its registers.
    #[inline]
    fn spell_out(&mut self, blk: usize) {
        let reason = self.uniform[blk];
        if reason != SPELLED_OUT {
            let at = self.bounds[blk][ALL];
            for r in block_range(blk) {
                self.ready[r] = at;
                self.why[r] = reason;
            }
            self.uniform[blk] = SPELLED_OUT;
        }
    }

    /// Registers `span` become ready at `at`, written by a producer of kind `reason`.
    #[inline]
    pub fn write(&mut self, span: Range<usize>, at: u64, reason: u8) {
        if span.is_empty() {
            return;
        }
        let plain = if reason == MMA { 0 } else { at };
        self.top = [self.top[ALL].max(at), self.top[PLAIN].max(plain)];
        for blk in span.start / BLOCK..=(span.end - 1) / BLOCK {
            let whole = block_range(blk);
            if span.start <= whole.start && span.end >= whole.end {
                self.bounds[blk] = [at, plain];
                self.uniform[blk] = reason;
            } else {
                self.spell_out(blk);
                // A loop, not `fill`: these parts are a few registers, and `fill` on bytes
                // becomes a call to `memset`.
                for r in span.start.max(whole.start)..span.end.min(whole.end) {
                    self.ready[r] = at;
                    self.why[r] = reason;
                }
                let bound = &mut self.bounds[blk];
                bound[ALL] = bound[ALL].max(at);
                bound[PLAIN] = bound[PLAIN].max(plain);
            }
        }
    }

    /// Waits for registers `span` on top of a wait until `ready` for `why`: in register order,
    /// each register later than the wait so far makes it that register's (a register written by
    /// a warpgroup MMA is passed over when `skip_mma`: the tensor pipe orders chained MMAs).
    #[inline]
    pub fn wait_for(&self, span: Range<usize>, skip_mma: bool, mut wait: (u64, u8)) -> (u64, u8) {
        if span.is_empty() {
            return wait;
        }
        let which = if skip_mma { PLAIN } else { ALL };
        if self.top[which] <= wait.0 {
            return wait;
        }
        for blk in span.start / BLOCK..=(span.end - 1) / BLOCK {
            // No register of the block is later than the wait: none would change it.
            if self.bounds[blk][which] <= wait.0 {
                continue;
            }
            let reason = self.uniform[blk];
            if reason != SPELLED_OUT {
                // Every register alike: the first one decides, the rest are not later.
                let t = self.bounds[blk][ALL];
                if t > wait.0 && !(skip_mma && reason == MMA) {
                    wait = (t, reason);
                }
                continue;
            }
            let whole = block_range(blk);
            for r in span.start.max(whole.start)..span.end.min(whole.end) {
                let t = self.ready[r];
                if t > wait.0 {
                    let rr = self.why[r];
                    if skip_mma && rr == MMA {
                        continue;
                    }
                    wait = (t, rr);
                }
            }
        }
        wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpusim_isa::Reg;

    /// The registers written one by one and scanned in order, with no blocks: what the
    /// scoreboard must answer.
    struct Reference {
        regs: [u64; REG_SPACE],
        reasons: [u8; REG_SPACE],
    }

    impl Reference {
        fn new() -> Reference {
            Reference { regs: [0; REG_SPACE], reasons: [StallReason::Wait as u8; REG_SPACE] }
        }
        fn write(&mut self, span: Range<usize>, at: u64, reason: u8) {
            for r in span {
                self.regs[r] = at;
                self.reasons[r] = reason;
            }
        }
        fn wait_for(&self, span: Range<usize>, skip: bool, init: (u64, u8)) -> (u64, u8) {
            let (mut ready, mut why) = init;
            for r in span {
                if self.regs[r] > ready && !(skip && self.reasons[r] == MMA) {
                    ready = self.regs[r];
                    why = self.reasons[r];
                }
            }
            (ready, why)
        }
    }

    #[test]
    fn blocked_waits_equal_the_full_scan() {
        let mut sb = Scoreboard::default();
        let mut r = Reference::new();
        let mut next = crate::test_rng::xorshift(12345u64);
        let mut time = 0;
        for step in 0..60_000u64 {
            let first = next(REG_SPACE as u64 + 4) as u16;
            // Wide operands (whole blocks, accumulators), narrow ones, and the odd reset.
            let count = if next(3) == 0 { 8 * (1 + next(16)) as u8 } else { 1 + next(12) as u8 };
            let range = RegRange::new(Reg(first), count);
            time += next(3);
            match next(40) {
                0 => {
                    sb.reset();
                    r = Reference::new();
                }
                1..=19 => {
                    let reason = if next(3) == 0 { MMA } else { next(12) as u8 };
                    let at = time + next(400);
                    sb.write(span(&range), at, reason);
                    r.write(span(&range), at, reason);
                }
                _ => {
                    let init = (time + next(100), StallReason::Wait as u8);
                    let skip = next(2) == 0;
                    assert_eq!(
                        sb.wait_for(span(&range), skip, init),
                        r.wait_for(span(&range), skip, init),
                        "step {step}: {range}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_reset_scoreboard_is_all_ready_at_zero() {
        let mut sb = Scoreboard::default();
        sb.write(0..REG_SPACE, 500, MMA);
        sb.write(3..5, 900, StallReason::LongScoreboard as u8);
        sb.reset();
        assert_eq!(sb.wait_for(0..REG_SPACE, false, (0, StallReason::Wait as u8)), (0, StallReason::Wait as u8));
        // Spelled-out registers left from before the reset do not leak through.
        sb.write(0..2, 7, StallReason::ShortScoreboard as u8);
        assert_eq!(sb.wait_for(0..8, false, (0, StallReason::Wait as u8)), (7, StallReason::ShortScoreboard as u8));
    }

    #[test]
    fn span_matches_the_register_iterator() {
        for (first, count) in [(0u16, 4u8), (254, 1), (356, 8), (359, 1), (u16::MAX, 0), (300, 0)] {
            let r = RegRange::new(Reg(first), count);
            assert_eq!(span(&r).collect::<Vec<_>>(), r.regs().collect::<Vec<_>>(), "{r}");
        }
    }
}

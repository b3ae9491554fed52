//! Operands of the CTA's hardware barriers (`BAR.SYNC id, n`, `BAR.ARV id, n`, `BAR.RED`).
//!
//! A CTA has [`NAMED_BARRIERS`] barriers. `bar.sync`/`bar.arrive` name one and, optionally, how
//! many threads complete it; the PTX rule is that a barrier counts whole warps ("as if all the
//! threads in a warp are active"), so a count is a multiple of 32. Without a count the barrier
//! waits for every thread of the CTA (`__syncthreads` is `BAR.SYNC 0`).
//!
//! The trace carries both in the instruction's immediate ([`crate::Inst::imm`]): bits 0–3 are
//! the barrier id, bits 4 and up the thread count, 0 meaning "the whole CTA". An imported
//! Accel-Sim trace gives the first immediate of the SASS line, the barrier id, so its barriers
//! keep their ids and wait for the whole CTA.

/// Hardware barriers per CTA.
pub const NAMED_BARRIERS: usize = 16;

/// A barrier operand: which barrier, and how many threads complete it (0: every thread).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BarrierOperand {
    pub id: u8,
    pub threads: u32,
}

impl BarrierOperand {
    /// The CTA-wide barrier 0 (`__syncthreads`).
    pub const CTA: BarrierOperand = BarrierOperand { id: 0, threads: 0 };

    /// Barrier `id` completed by `threads` threads (a multiple of 32; 0: the whole CTA).
    pub fn named(id: u8, threads: u32) -> Result<BarrierOperand, String> {
        if id as usize >= NAMED_BARRIERS {
            return Err(format!("barrier id {id} out of range 0..{}", NAMED_BARRIERS - 1));
        }
        if !threads.is_multiple_of(32) || threads > 1024 {
            return Err(format!("barrier thread count {threads} must be a multiple of 32 up to 1024"));
        }
        Ok(BarrierOperand { id, threads })
    }

    /// The immediate that carries this operand.
    pub fn imm(self) -> i32 {
        (self.id as i32) | ((self.threads as i32) << 4)
    }

    /// The operand an immediate carries (negative immediates read as barrier 0 of the CTA).
    pub fn from_imm(imm: i32) -> BarrierOperand {
        let v = imm.max(0) as u32;
        BarrierOperand { id: (v & 0xF) as u8, threads: v >> 4 }
    }

    /// Warps that complete the barrier (0: every live warp of the CTA).
    pub fn warps(self) -> u32 {
        self.threads.div_ceil(32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operand_round_trips_through_the_immediate() {
        for (id, n) in [(0, 0), (1, 256), (15, 1024), (3, 32)] {
            let b = BarrierOperand::named(id, n).unwrap();
            assert_eq!(BarrierOperand::from_imm(b.imm()), b);
        }
        assert_eq!(BarrierOperand::from_imm(0), BarrierOperand::CTA);
        assert_eq!(BarrierOperand::from_imm(2), BarrierOperand { id: 2, threads: 0 });
        assert!(BarrierOperand::named(16, 0).is_err());
        assert!(BarrierOperand::named(1, 100).is_err());
    }
}

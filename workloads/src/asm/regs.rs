//! Register operands.

use gpusim_isa::{Reg, RegRange};

/// `Rn`.
pub const fn r(n: u8) -> RegRange {
    RegRange::one(Reg::r(n))
}

/// `Rn` .. `Rn+count-1` (a 64- or 128-bit operand, an accumulator block).
pub const fn rr(n: u8, count: u8) -> RegRange {
    RegRange::new(Reg::r(n), count)
}

/// `Pn`.
pub const fn p(n: u8) -> RegRange {
    RegRange::one(Reg::p(n))
}

/// `URn`.
pub const fn ur(n: u8) -> RegRange {
    RegRange::one(Reg::ur(n))
}

/// `URn` .. `URn+count-1`.
pub const fn urr(n: u8, count: u8) -> RegRange {
    RegRange::new(Reg::ur(n), count)
}

/// `SBn` (dependency-barrier slot).
pub const fn sb(n: u8) -> RegRange {
    RegRange::one(Reg::sb(n))
}

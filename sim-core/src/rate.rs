//! Fixed-point service rates, so bandwidth arithmetic is exact integer math and results are
//! bit-identical on every machine.

/// Sub-cycle resolution: times inside bandwidth servers are kept in 1/FRAC cycles (rounding a
/// 2 TB/s server's per-byte time to it errs by under 0.01%; u64 still holds 10¹² cycles).
pub const FRAC: u64 = 1 << 24;

/// Time to serve one byte, in 1/FRAC cycles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rate {
    per_byte: u64,
}

impl Rate {
    /// A server that moves `bpc` bytes per cycle (at least one unit of time per byte, so a
    /// server is never infinitely fast).
    pub fn bytes_per_cycle(bpc: f64) -> Rate {
        let per_byte = if bpc > 0.0 { (FRAC as f64 / bpc).round() as u64 } else { FRAC };
        Rate { per_byte: per_byte.max(1) }
    }

    #[inline]
    pub fn time_for(&self, bytes: u64) -> u64 {
        bytes * self.per_byte
    }
}

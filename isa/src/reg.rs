//! Register names as small integers.
//!
//! All register files of a warp share one numbering so that the scoreboard can be one bitset:
//!
//! | range      | registers            |
//! |------------|----------------------|
//! | 0..=254    | `R0`..`R254`         |
//! | 256..=319  | `UR0`..`UR63`        |
//! | 320..=327  | `P0`..`P7` (`P7` is `PT`)   |
//! | 328..=335  | `UP0`..`UP7` (`UP7` is `UPT`) |
//! | 336..=351  | `B0`..`B15` convergence barrier registers |
//! | 352..=359  | `SB0`..`SB7` scoreboard/dependency-barrier slots (`DEPBAR`) |
//!
//! `RZ`, `URZ`, `PT` and `UPT` are constants: they are never written and never waited on, so they
//! parse to [`Reg::NONE`].

use std::fmt;

/// One architectural register of a warp, or [`Reg::NONE`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Reg(pub u16);

/// Number of distinct register numbers; the size of a per-warp scoreboard.
pub const REG_SPACE: usize = 360;

const UR_BASE: u16 = 256;
const P_BASE: u16 = 320;
const UP_BASE: u16 = 328;
const B_BASE: u16 = 336;
const SB_BASE: u16 = 352;

impl Reg {
    /// No register (also what `RZ`, `URZ`, `PT` and `UPT` become).
    pub const NONE: Reg = Reg(u16::MAX);

    pub const fn r(n: u8) -> Reg {
        Reg(n as u16)
    }
    pub const fn ur(n: u8) -> Reg {
        Reg(UR_BASE + n as u16)
    }
    pub const fn p(n: u8) -> Reg {
        Reg(P_BASE + n as u16)
    }
    pub const fn up(n: u8) -> Reg {
        Reg(UP_BASE + n as u16)
    }
    pub const fn sb(n: u8) -> Reg {
        Reg(SB_BASE + n as u16)
    }

    pub const fn is_none(self) -> bool {
        self.0 == u16::MAX
    }

    /// Whether this is a general (per-thread) register `R0`..`R254`.
    pub const fn is_general(self) -> bool {
        self.0 < UR_BASE
    }

    pub const fn index(self) -> usize {
        self.0 as usize
    }

    /// Parses `R12`, `RZ`, `UR4`, `URZ`, `P0`, `PT`, `!P0`, `UP1`, `UPT`, `B3`, `SB0`.
    /// A leading `!` (predicate negation) or `-`/`|` (operand modifiers) is ignored.
    /// Returns `None` when the text is not a register name.
    pub fn parse(text: &str) -> Option<Reg> {
        let t = text.trim_start_matches(['!', '-', '|', '~']);
        let t = t.split('.').next().unwrap_or(t); // R4.reuse, R2.H1
        match t {
            "RZ" | "URZ" | "PT" | "UPT" => return Some(Reg::NONE),
            _ => {}
        }
        let (prefix, digits) = t.split_at(t.find(|c: char| c.is_ascii_digit())?);
        let n: u16 = digits.parse().ok()?;
        let (base, limit) = match prefix {
            "R" => (0, 255),
            "UR" => (UR_BASE, 64),
            "P" => (P_BASE, 7),
            "UP" => (UP_BASE, 7),
            "B" => (B_BASE, 16),
            "SB" => (SB_BASE, 8),
            _ => return None,
        };
        if n >= limit {
            // R255 is RZ in Accel-Sim traces; P7 is PT; UP7 is UPT.
            return if (prefix == "R" && n == 255) || ((prefix == "P" || prefix == "UP") && n == 7) {
                Some(Reg::NONE)
            } else {
                None
            };
        }
        Some(Reg(base + n))
    }
}

impl fmt::Display for Reg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        match n {
            u16::MAX => write!(f, "RZ"),
            0..=254 => write!(f, "R{n}"),
            256..=319 => write!(f, "UR{}", n - UR_BASE),
            320..=327 => write!(f, "P{}", n - P_BASE),
            328..=335 => write!(f, "UP{}", n - UP_BASE),
            336..=351 => write!(f, "B{}", n - B_BASE),
            352..=359 => write!(f, "SB{}", n - SB_BASE),
            _ => write!(f, "?{n}"),
        }
    }
}

impl fmt::Debug for Reg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A run of consecutive registers, as a 64- or 128-bit operand (`R4` with 4 registers is `R4..R7`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct RegRange {
    pub first: Reg,
    pub count: u8,
}

impl RegRange {
    pub const NONE: RegRange = RegRange { first: Reg::NONE, count: 0 };

    pub const fn one(r: Reg) -> RegRange {
        if r.is_none() { RegRange::NONE } else { RegRange { first: r, count: 1 } }
    }

    pub const fn new(r: Reg, count: u8) -> RegRange {
        if r.is_none() || count == 0 { RegRange::NONE } else { RegRange { first: r, count } }
    }

    pub const fn is_none(&self) -> bool {
        self.count == 0
    }

    /// The register numbers covered, clipped to the register space.
    pub fn regs(&self) -> impl Iterator<Item = usize> + '_ {
        let start = self.first.index();
        let end = if self.is_none() { start } else { (start + self.count as usize).min(REG_SPACE) };
        start..end
    }
}

impl Default for RegRange {
    fn default() -> Self {
        RegRange::NONE
    }
}

impl fmt::Display for RegRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_none() {
            write!(f, "RZ")
        } else if self.count == 1 {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}x{}", self.first, self.count)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_register_names() {
        assert_eq!(Reg::parse("R12"), Some(Reg::r(12)));
        assert_eq!(Reg::parse("RZ"), Some(Reg::NONE));
        assert_eq!(Reg::parse("R255"), Some(Reg::NONE));
        assert_eq!(Reg::parse("UR4"), Some(Reg::ur(4)));
        assert_eq!(Reg::parse("!P2"), Some(Reg::p(2)));
        assert_eq!(Reg::parse("PT"), Some(Reg::NONE));
        assert_eq!(Reg::parse("R4.reuse"), Some(Reg::r(4)));
        assert_eq!(Reg::parse("SB3"), Some(Reg::sb(3)));
        assert_eq!(Reg::parse("X3"), None);
        assert_eq!(Reg::parse("R300"), None);
        assert_eq!(Reg::parse("c[0x0]"), None);
    }

    #[test]
    fn display_round_trips() {
        for r in [Reg::r(0), Reg::r(254), Reg::ur(63), Reg::p(3), Reg::up(1), Reg::sb(0)] {
            assert_eq!(Reg::parse(&r.to_string()), Some(r));
        }
    }
}

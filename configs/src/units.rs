//! Typed physical units. Configs write them out (`"1.98 GHz"`, `"3.35 TB/s"`, `"50 MiB"`) and
//! parse into these; the simulator never handles a bare number whose unit it has to guess.

use std::fmt;

/// A size in bytes. Parses `128`, `"128 B"`, `"64 KiB"`, `"50 MiB"`, `"40 MB"` (SI, 10⁶),
/// `"80 GiB"`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct Bytes(pub u64);

/// A frequency in hertz. Parses `"1.98 GHz"`, `"1410 MHz"`, `"2619 MHz"`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct Hertz(pub u64);

/// A bandwidth in bytes per second. Parses `"3.35 TB/s"`, `"2039 GB/s"`, `"900 GiB/s"`.
#[derive(Clone, Copy, PartialEq, PartialOrd, Debug, Default)]
pub struct BytesPerSec(pub f64);

/// A count of clock cycles of the clock domain the field belongs to. Parses `33`, `"33 cycles"`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct Cycles(pub u64);

/// A bandwidth in bytes per cycle of the owning clock domain. Parses `128`, `"128 B/clk"`.
#[derive(Clone, Copy, PartialEq, PartialOrd, Debug, Default)]
pub struct BytesPerCycle(pub f64);

/// A duration in picoseconds. Parses `"120 ns"`, `"1.5 us"`, `"800 ps"`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct Picos(pub u64);

impl Hertz {
    pub fn ghz(self) -> f64 {
        self.0 as f64 / 1e9
    }
    pub fn mhz(self) -> f64 {
        self.0 as f64 / 1e6
    }
    /// Length of one period in picoseconds (rounded).
    pub fn period_ps(self) -> f64 {
        1e12 / self.0 as f64
    }
}

impl Picos {
    /// This duration in cycles of `clock`, rounded up.
    pub fn to_cycles(self, clock: Hertz) -> Cycles {
        Cycles(((self.0 as u128 * clock.0 as u128).div_ceil(1_000_000_000_000)) as u64)
    }
}

impl BytesPerSec {
    /// Bytes per cycle of `clock`.
    pub fn per_cycle(self, clock: Hertz) -> BytesPerCycle {
        BytesPerCycle(self.0 / clock.0 as f64)
    }
    pub fn gbps(self) -> f64 {
        self.0 / 1e9
    }
}

impl Cycles {
    /// Duration of this many cycles at `clock`.
    pub fn at(self, clock: Hertz) -> Picos {
        Picos(((self.0 as u128 * 1_000_000_000_000) / clock.0 as u128) as u64)
    }
}

/// Error from parsing a unit string: says what was expected.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct UnitError(pub String);

impl fmt::Display for UnitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UnitError {}

/// Splits `"1.98 GHz"` into (1.98, "GHz"); a bare number gives an empty unit.
fn split(text: &str) -> Result<(f64, &str), UnitError> {
    let t = text.trim();
    let end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+' || c == 'e' || c == '_'))
        .unwrap_or(t.len());
    // "e" may start a unit word ("e" never starts one we accept), so back off if parse fails.
    let (num, unit) = t.split_at(end);
    let num_clean = num.replace('_', "");
    let v: f64 = num_clean.parse().map_err(|_| UnitError(format!("`{text}` does not start with a number")))?;
    if !v.is_finite() {
        return Err(UnitError(format!("`{text}` is not a finite number")));
    }
    if v < 0.0 {
        return Err(UnitError(format!("`{text}` is negative; sizes, rates and times must be ≥ 0")));
    }
    Ok((v, unit.trim()))
}

fn scaled(text: &str, table: &[(&str, f64)], what: &str) -> Result<f64, UnitError> {
    let (v, unit) = split(text)?;
    for (name, scale) in table {
        if unit.eq_ignore_ascii_case(name) && (unit == *name || name.chars().all(|c| !c.is_ascii_uppercase())) {
            return Ok(v * scale);
        }
    }
    for (name, scale) in table {
        if unit == *name {
            return Ok(v * scale);
        }
    }
    let units: Vec<&str> = table.iter().map(|(n, _)| *n).filter(|n| !n.is_empty()).collect();
    Err(UnitError(format!("`{text}`: unknown {what} unit `{unit}` (use one of: {})", units.join(", "))))
}

const BYTE_UNITS: &[(&str, f64)] = &[
    ("", 1.0),
    ("B", 1.0),
    ("KiB", 1024.0),
    ("MiB", 1048576.0),
    ("GiB", 1073741824.0),
    ("TiB", 1099511627776.0),
    ("KB", 1e3),
    ("kB", 1e3),
    ("MB", 1e6),
    ("GB", 1e9),
    ("TB", 1e12),
];
const HZ_UNITS: &[(&str, f64)] = &[("Hz", 1.0), ("kHz", 1e3), ("MHz", 1e6), ("GHz", 1e9)];
const BPS_UNITS: &[(&str, f64)] = &[
    ("B/s", 1.0),
    ("KB/s", 1e3),
    ("MB/s", 1e6),
    ("GB/s", 1e9),
    ("TB/s", 1e12),
    ("KiB/s", 1024.0),
    ("MiB/s", 1048576.0),
    ("GiB/s", 1073741824.0),
    ("TiB/s", 1099511627776.0),
];
const TIME_UNITS: &[(&str, f64)] = &[("ps", 1.0), ("ns", 1e3), ("us", 1e6), ("µs", 1e6), ("ms", 1e9), ("s", 1e12)];
const CYCLE_UNITS: &[(&str, f64)] = &[("", 1.0), ("cycles", 1.0), ("cycle", 1.0), ("clk", 1.0)];
const BPC_UNITS: &[(&str, f64)] = &[("", 1.0), ("B/clk", 1.0), ("B/cycle", 1.0)];

fn whole(v: f64, text: &str, what: &str) -> Result<u64, UnitError> {
    let r = v.round();
    if (v - r).abs() > 1e-6 * v.max(1.0) {
        return Err(UnitError(format!("`{text}` is not a whole number of {what}")));
    }
    // `u64::MAX as f64` is 2^64 itself: anything at or past it does not fit.
    if r >= u64::MAX as f64 {
        return Err(UnitError(format!("`{text}` is too large")));
    }
    Ok(r as u64)
}

impl std::str::FromStr for Bytes {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, UnitError> {
        let v = scaled(s, BYTE_UNITS, "size")?;
        Ok(Bytes(whole(v, s, "bytes")?))
    }
}

impl std::str::FromStr for Hertz {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, UnitError> {
        let (_, unit) = split(s)?;
        if unit.is_empty() {
            return Err(UnitError(format!("`{s}`: a frequency needs a unit (Hz, kHz, MHz, GHz)")));
        }
        let v = scaled(s, HZ_UNITS, "frequency")?;
        Ok(Hertz(whole(v, s, "Hz")?))
    }
}

impl std::str::FromStr for BytesPerSec {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, UnitError> {
        let (_, unit) = split(s)?;
        if unit.is_empty() {
            return Err(UnitError(format!("`{s}`: a bandwidth needs a unit (GB/s, TB/s, GiB/s, ...)")));
        }
        Ok(BytesPerSec(scaled(s, BPS_UNITS, "bandwidth")?))
    }
}

impl std::str::FromStr for Picos {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, UnitError> {
        let (_, unit) = split(s)?;
        if unit.is_empty() {
            return Err(UnitError(format!("`{s}`: a duration needs a unit (ps, ns, us, ms, s)")));
        }
        let v = scaled(s, TIME_UNITS, "time")?;
        Ok(Picos(whole(v, s, "ps")?))
    }
}

impl std::str::FromStr for Cycles {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, UnitError> {
        let v = scaled(s, CYCLE_UNITS, "cycle")?;
        Ok(Cycles(whole(v, s, "cycles")?))
    }
}

impl std::str::FromStr for BytesPerCycle {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, UnitError> {
        Ok(BytesPerCycle(scaled(s, BPC_UNITS, "bytes-per-cycle")?))
    }
}

fn fmt_scaled(f: &mut fmt::Formatter<'_>, v: f64, units: &[(&str, f64)]) -> fmt::Result {
    let mut best = units[0];
    for u in units {
        if v >= u.1 && u.1 >= best.1 {
            best = *u;
        }
    }
    let x = v / best.1;
    let s = format!("{x:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    write!(f, "{s} {}", best.0)
}

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_scaled(f, self.0 as f64, &[("B", 1.0), ("KiB", 1024.0), ("MiB", 1048576.0), ("GiB", 1073741824.0)])
    }
}
impl fmt::Display for Hertz {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_scaled(f, self.0 as f64, &[("Hz", 1.0), ("kHz", 1e3), ("MHz", 1e6), ("GHz", 1e9)])
    }
}
impl fmt::Display for BytesPerSec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_scaled(f, self.0, &[("B/s", 1.0), ("KB/s", 1e3), ("MB/s", 1e6), ("GB/s", 1e9), ("TB/s", 1e12)])
    }
}
impl fmt::Display for Picos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_scaled(f, self.0 as f64, &[("ps", 1.0), ("ns", 1e3), ("us", 1e6), ("ms", 1e9), ("s", 1e12)])
    }
}
impl fmt::Display for Cycles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} cycles", self.0)
    }
}
impl fmt::Display for BytesPerCycle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} B/clk", self.0)
    }
}

/// How a unit type reads from TOML: always from a string with a unit; from a bare number only
/// where the number has an obvious unit (bytes, cycles, bytes per cycle).
trait FromToml: std::str::FromStr<Err = UnitError> {
    /// What a value looks like, for "invalid type" messages.
    const EXPECTING: &'static str;
    /// The value of a bare whole number, or `None` where a bare number needs a unit.
    fn from_whole(v: u64) -> Option<Self>;
    /// The value of a bare fractional number, or `None` where that is not meaningful.
    fn from_fraction(_v: f64) -> Option<Self> {
        None
    }
}

struct UnitVisitor<T>(std::marker::PhantomData<T>);

impl<T: FromToml> UnitVisitor<T> {
    fn bare<E: serde::de::Error>(shown: &str, r: Option<T>) -> Result<T, E> {
        r.ok_or_else(|| E::custom(format!("bare number `{shown}` needs a unit here; write {}", T::EXPECTING)))
    }
}

impl<'de, T: FromToml> serde::de::Visitor<'de> for UnitVisitor<T> {
    type Value = T;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(T::EXPECTING)
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<T, E> {
        v.parse().map_err(|e: UnitError| E::custom(e))
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<T, E> {
        if v < 0 {
            return Err(E::custom(format!("`{v}` is negative; sizes, rates and times must be ≥ 0")));
        }
        Self::bare(&v.to_string(), T::from_whole(v as u64))
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<T, E> {
        Self::bare(&v.to_string(), T::from_whole(v))
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<T, E> {
        if v < 0.0 {
            return Err(E::custom(format!("`{v}` is negative; sizes, rates and times must be ≥ 0")));
        }
        if !v.is_finite() {
            return Err(E::custom(format!("`{v}` is not a finite number")));
        }
        Self::bare(&v.to_string(), T::from_fraction(v))
    }
}

macro_rules! deserialize_unit {
    ($($t:ty => $expecting:literal, whole: $whole:expr, fraction: $fraction:expr;)*) => {$(
        impl FromToml for $t {
            const EXPECTING: &'static str = $expecting;
            fn from_whole(v: u64) -> Option<Self> {
                #[allow(clippy::redundant_closure_call)]
                ($whole)(v)
            }
            fn from_fraction(v: f64) -> Option<Self> {
                #[allow(clippy::redundant_closure_call)]
                ($fraction)(v)
            }
        }
        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                d.deserialize_any(UnitVisitor::<$t>(std::marker::PhantomData))
            }
        }
    )*};
}

deserialize_unit! {
    Bytes => "a size such as \"50 MiB\" or a whole number of bytes",
        whole: |v| Some(Bytes(v)), fraction: |_| None;
    Hertz => "a frequency such as \"1.98 GHz\" or \"1410 MHz\"",
        whole: |_| None, fraction: |_| None;
    BytesPerSec => "a bandwidth such as \"3.35 TB/s\"",
        whole: |_| None, fraction: |_| None;
    Cycles => "a whole number of cycles such as \"33 cycles\" or 33",
        whole: |v| Some(Cycles(v)), fraction: |_| None;
    BytesPerCycle => "a bandwidth such as \"128 B/clk\" or 128",
        whole: |v| Some(BytesPerCycle(v as f64)), fraction: |v| Some(BytesPerCycle(v));
    Picos => "a duration such as \"120 ns\"",
        whole: |_| None, fraction: |_| None;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!("50 MiB".parse::<Bytes>().unwrap(), Bytes(50 << 20));
        assert_eq!("40 MB".parse::<Bytes>().unwrap(), Bytes(40_000_000));
        assert_eq!("128".parse::<Bytes>().unwrap(), Bytes(128));
        assert_eq!("1.98 GHz".parse::<Hertz>().unwrap(), Hertz(1_980_000_000));
        assert_eq!("1410 MHz".parse::<Hertz>().unwrap(), Hertz(1_410_000_000));
        assert_eq!("3.35 TB/s".parse::<BytesPerSec>().unwrap(), BytesPerSec(3.35e12));
        assert_eq!("120 ns".parse::<Picos>().unwrap(), Picos(120_000));
        assert_eq!("33 cycles".parse::<Cycles>().unwrap(), Cycles(33));
        assert_eq!("64 B/clk".parse::<BytesPerCycle>().unwrap(), BytesPerCycle(64.0));
    }

    #[test]
    fn rejects_bad_units() {
        assert!("-4 MiB".parse::<Bytes>().unwrap_err().0.contains("negative"));
        assert!("4 furlongs".parse::<Bytes>().unwrap_err().0.contains("unknown size unit"));
        assert!("1.5 B".parse::<Bytes>().is_err());
        assert!("1980".parse::<Hertz>().unwrap_err().0.contains("needs a unit"));
        assert!("abc".parse::<Cycles>().is_err());
    }

    #[test]
    fn deserializes_strings_and_obvious_bare_numbers() {
        #[derive(serde::Deserialize)]
        struct W {
            b: Bytes,
            c: Cycles,
            r: BytesPerCycle,
            h: Hertz,
        }
        let w: W = toml::from_str("b = 4096\nc = \"33 cycles\"\nr = 64.5\nh = \"1.98 GHz\"").unwrap();
        assert_eq!((w.b, w.c, w.r, w.h), (Bytes(4096), Cycles(33), BytesPerCycle(64.5), Hertz(1_980_000_000)));
        let e = toml::from_str::<W>("b = -1\nc = 1\nr = 1\nh = \"1 GHz\"").err().unwrap();
        assert!(e.message().contains("negative"), "{e}");
        let e = toml::from_str::<W>("b = 1\nc = 1\nr = 1\nh = 1980").err().unwrap();
        assert!(e.message().contains("needs a unit"), "{e}");
        let e = toml::from_str::<W>("b = 1.5\nc = 1\nr = 1\nh = \"1 GHz\"").err().unwrap();
        assert!(e.message().contains("needs a unit"), "{e}");
    }

    proptest::proptest! {
        #[test]
        fn scaled_units_multiply(n in 0u64..1 << 30, unit in proptest::sample::select(vec![
            ("B", 1u64), ("KiB", 1 << 10), ("MiB", 1 << 20), ("kB", 1_000), ("MB", 1_000_000),
        ])) {
            proptest::prop_assert_eq!(format!("{n} {}", unit.0).parse::<Bytes>().unwrap(), Bytes(n * unit.1));
            proptest::prop_assert_eq!(format!("{n} cycles").parse::<Cycles>().unwrap(), Cycles(n));
            proptest::prop_assert_eq!(format!("{n} MHz").parse::<Hertz>().unwrap(), Hertz(n * 1_000_000));
            proptest::prop_assert_eq!(format!("{n} ns").parse::<Picos>().unwrap(), Picos(n * 1_000));
        }

        #[test]
        fn parsing_never_panics(s in "\\PC{0,16}") {
            let _ = s.parse::<Bytes>();
            let _ = s.parse::<Hertz>();
            let _ = s.parse::<BytesPerSec>();
            let _ = s.parse::<Cycles>();
            let _ = s.parse::<BytesPerCycle>();
            let _ = s.parse::<Picos>();
        }
    }

    #[test]
    fn converts_between_domains() {
        let clk = Hertz(1_000_000_000);
        assert_eq!(Picos(1500).to_cycles(clk), Cycles(2));
        assert_eq!(Cycles(3).at(clk), Picos(3000));
        assert_eq!(BytesPerSec(2e12).per_cycle(Hertz(2_000_000_000)), BytesPerCycle(1000.0));
    }
}

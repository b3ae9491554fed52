//! How each parameter type reads from and writes back to TOML.
//!
//! Reading is serde (`Deserialize`, implemented for the unit types in [`crate::units`]). Writing
//! is [`ParamValue::to_toml`]: a literal that reads back to exactly the same value, with its unit
//! written out, so that `to_toml` of a loaded chip loads back to an equal `Arch`.

use std::fmt;

use crate::units::{Bytes, BytesPerCycle, BytesPerSec, Cycles, Hertz, Picos, UnitError};

/// A type a parameter can have.
pub(crate) trait ParamValue: Clone + PartialEq + fmt::Debug + for<'de> serde::Deserialize<'de> {
    /// What a value looks like, for error messages ("expected a positive integer").
    const EXPECTED: &'static str;
    /// The parameter's typed kind.
    const KIND: ParamKind;
    /// The value as a number in the kind's base unit ([`ParamKind`]); `None` for text and lists.
    fn number(&self) -> Option<f64> {
        None
    }
    /// A TOML literal (`132`, `"50 MiB"`, `["0 B", "8 KiB"]`) that reads back to exactly `self`.
    fn to_toml(&self) -> String;
    /// The value for people: the literal without string quotes.
    fn show(&self) -> String {
        unquote(&self.to_toml())
    }
}

/// The type of a parameter, and the base unit its numbers ([`crate::ParamInfo::min`],
/// [`crate::Arch::value`]) are in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// Bytes.
    Bytes,
    /// SM-clock cycles.
    Cycles,
    /// A duration, in picoseconds.
    Time,
    /// A frequency, in Hz.
    Hertz,
    /// A bandwidth, in bytes per second.
    BytesPerSec,
    /// A bandwidth, in bytes per SM-clock cycle.
    BytesPerCycle,
    /// A whole number.
    Integer,
    /// A number.
    Float,
    /// Text (a name, a policy).
    Text,
    /// A list of sizes.
    ByteList,
    /// A compute capability (major·10 + minor).
    ComputeCapability,
}

/// `"50 MiB"` → `50 MiB`; anything else unchanged.
pub(crate) fn unquote(s: &str) -> String {
    match s.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
        Some(inner) if !inner.contains('"') && !inner.contains('\\') => inner.to_string(),
        _ => s.to_string(),
    }
}

fn quoted(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

impl ParamValue for u32 {
    const EXPECTED: &'static str = "a positive integer";
    const KIND: ParamKind = ParamKind::Integer;
    fn number(&self) -> Option<f64> {
        Some(*self as f64)
    }
    fn to_toml(&self) -> String {
        self.to_string()
    }
}

impl ParamValue for f64 {
    const EXPECTED: &'static str = "a number";
    const KIND: ParamKind = ParamKind::Float;
    fn number(&self) -> Option<f64> {
        Some(*self)
    }
    fn to_toml(&self) -> String {
        if self.is_finite() && self.fract() == 0.0 && self.abs() < 1e15 {
            format!("{}", *self as i64)
        } else if self.is_nan() {
            "nan".into()
        } else if self.is_infinite() {
            if *self > 0.0 { "inf".into() } else { "-inf".into() }
        } else {
            // `{:?}` is the shortest text that reads back to the same f64.
            format!("{self:?}")
        }
    }
}

impl ParamValue for String {
    const EXPECTED: &'static str = "a string";
    const KIND: ParamKind = ParamKind::Text;
    fn to_toml(&self) -> String {
        quoted(self)
    }
}

/// Picks the first rendering that parses back to `v`; `fallback` always does.
fn exact<T: std::str::FromStr + PartialEq>(
    v: &T,
    candidates: impl IntoIterator<Item = String>,
    fallback: String,
) -> String {
    for c in candidates {
        if c.parse::<T>().ok().as_ref() == Some(v) {
            return quoted(&c);
        }
    }
    quoted(&fallback)
}

/// `n / scale` as text when it divides exactly.
fn whole_in(n: u64, scale: u64, unit: &str) -> Option<String> {
    (n >= scale && n.is_multiple_of(scale)).then(|| format!("{} {unit}", n / scale))
}

impl ParamValue for Bytes {
    const EXPECTED: &'static str = "a size such as \"50 MiB\" or a whole number of bytes";
    const KIND: ParamKind = ParamKind::Bytes;
    fn number(&self) -> Option<f64> {
        Some(self.0 as f64)
    }
    fn to_toml(&self) -> String {
        const UNITS: [(u64, &str); 7] = [
            (1 << 40, "TiB"),
            (1 << 30, "GiB"),
            (1 << 20, "MiB"),
            (1 << 10, "KiB"),
            (1_000_000_000_000, "TB"),
            (1_000_000_000, "GB"),
            (1_000_000, "MB"),
        ];
        let n = self.0;
        // The shortest exact form: "40 MiB" rather than "41943040 B", "141 GB" rather than bytes.
        let best = UNITS.iter().filter_map(|&(s, u)| whole_in(n, s, u)).min_by_key(|t| t.len());
        quoted(&best.unwrap_or_else(|| format!("{n} B")))
    }
}

impl ParamValue for Hertz {
    const EXPECTED: &'static str = "a frequency such as \"1.98 GHz\" or \"1410 MHz\"";
    const KIND: ParamKind = ParamKind::Hertz;
    fn number(&self) -> Option<f64> {
        Some(self.0 as f64)
    }
    fn to_toml(&self) -> String {
        let n = self.0;
        let t = whole_in(n, 1_000_000, "MHz").or_else(|| whole_in(n, 1_000, "kHz")).unwrap_or(format!("{n} Hz"));
        quoted(&t)
    }
}

impl ParamValue for BytesPerSec {
    const EXPECTED: &'static str = "a bandwidth such as \"3.35 TB/s\"";
    const KIND: ParamKind = ParamKind::BytesPerSec;
    fn number(&self) -> Option<f64> {
        Some(self.0)
    }
    fn to_toml(&self) -> String {
        let v = self.0;
        let candidates = [(1e12, "TB/s"), (1e9, "GB/s"), (1e6, "MB/s")].map(|(s, u)| format!("{} {u}", v / s));
        exact(self, candidates, format!("{v:?} B/s"))
    }
}

impl ParamValue for Cycles {
    const EXPECTED: &'static str = "a whole number of cycles such as \"33 cycles\" or 33";
    const KIND: ParamKind = ParamKind::Cycles;
    fn number(&self) -> Option<f64> {
        Some(self.0 as f64)
    }
    fn to_toml(&self) -> String {
        quoted(&format!("{} {}", self.0, if self.0 == 1 { "cycle" } else { "cycles" }))
    }
}

impl ParamValue for BytesPerCycle {
    const EXPECTED: &'static str = "a bandwidth such as \"128 B/clk\" or 128";
    const KIND: ParamKind = ParamKind::BytesPerCycle;
    fn number(&self) -> Option<f64> {
        Some(self.0)
    }
    fn to_toml(&self) -> String {
        let v = self.0;
        exact(self, [format!("{v} B/clk")], format!("{v:?} B/clk"))
    }
}

impl ParamValue for Picos {
    const EXPECTED: &'static str = "a duration such as \"120 ns\"";
    const KIND: ParamKind = ParamKind::Time;
    fn number(&self) -> Option<f64> {
        Some(self.0 as f64)
    }
    fn to_toml(&self) -> String {
        let n = self.0;
        let t = whole_in(n, 1_000_000, "us").or_else(|| whole_in(n, 1_000, "ns")).unwrap_or(format!("{n} ps"));
        quoted(&t)
    }
}

impl ParamValue for Vec<Bytes> {
    const EXPECTED: &'static str = "an array of sizes such as [\"0 KiB\", \"8 KiB\", \"16 KiB\"]";
    const KIND: ParamKind = ParamKind::ByteList;
    fn to_toml(&self) -> String {
        let items: Vec<String> = self.iter().map(|b| if b.0 == 0 { quoted("0 KiB") } else { b.to_toml() }).collect();
        format!("[{}]", items.join(", "))
    }
}

/// A compute capability: `"9.0"` or `90` in TOML, major·10 + minor in an [`crate::Arch`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct ComputeCapability(pub u32);

impl std::str::FromStr for ComputeCapability {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, UnitError> {
        let bad = || UnitError(format!("`{s}` is not a compute capability such as \"8.0\" or \"9.0\""));
        let (major, minor) = s.trim().split_once('.').ok_or_else(bad)?;
        let major: u32 = major.parse().map_err(|_| bad())?;
        let minor: u32 = minor.parse().map_err(|_| bad())?;
        if minor > 9 {
            return Err(bad());
        }
        Ok(ComputeCapability(major * 10 + minor))
    }
}

impl<'de> serde::Deserialize<'de> for ComputeCapability {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = ComputeCapability;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(ComputeCapability::EXPECTED)
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ComputeCapability, E> {
                v.parse().map_err(E::custom)
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<ComputeCapability, E> {
                u32::try_from(v)
                    .map(ComputeCapability)
                    .map_err(|_| E::custom(format!("`{v}` is not a compute capability")))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<ComputeCapability, E> {
                self.visit_i64(i64::try_from(v).unwrap_or(-1))
            }
        }
        d.deserialize_any(V)
    }
}

impl ParamValue for ComputeCapability {
    const EXPECTED: &'static str = "a compute capability such as \"9.0\" or 90";
    const KIND: ParamKind = ParamKind::ComputeCapability;
    fn number(&self) -> Option<f64> {
        Some(self.0 as f64)
    }
    fn to_toml(&self) -> String {
        quoted(&format!("{}.{}", self.0 / 10, self.0 % 10))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn back<T: ParamValue>(v: &T) -> T {
        #[derive(serde::Deserialize)]
        struct W<T> {
            v: T,
        }
        let text = format!("v = {}", v.to_toml());
        toml::from_str::<W<T>>(&text).unwrap_or_else(|e| panic!("{text}: {e}")).v
    }

    #[test]
    fn literals_read_back_exactly() {
        for b in [Bytes(50 << 20), Bytes(40_000_000), Bytes(141_000_000_000), Bytes(129), Bytes(0), Bytes(1 << 10)] {
            assert_eq!(back(&b), b, "{}", b.to_toml());
        }
        assert_eq!(Bytes(50 << 20).to_toml(), "\"50 MiB\"");
        assert_eq!(Bytes(141_000_000_000).to_toml(), "\"141 GB\"");
        for h in [Hertz(1_980_000_000), Hertz(1_755_000), Hertz(3)] {
            assert_eq!(back(&h), h);
        }
        assert_eq!(Hertz(1_980_000_000).to_toml(), "\"1980 MHz\"");
        for s in ["3.35 TB/s", "2039 GB/s", "4.8 TB/s", "1555 GB/s", "0.1 B/s", "1 GiB/s"] {
            let v: BytesPerSec = s.parse().unwrap();
            assert_eq!(back(&v), v, "{s} → {}", v.to_toml());
        }
        assert_eq!("3.35 TB/s".parse::<BytesPerSec>().unwrap().to_toml(), "\"3.35 TB/s\"");
        for v in [BytesPerCycle(128.0), BytesPerCycle(0.1), BytesPerCycle(1.0 / 3.0)] {
            assert_eq!(back(&v), v);
        }
        for p in [Picos(246_000), Picos(1), Picos(2_000_000)] {
            assert_eq!(back(&p), p);
        }
        for f in [4096.0, 0.5, 1e-7, 1.0 / 3.0] {
            assert_eq!(back(&f), f);
        }
        let v = vec![Bytes(0), Bytes(8 << 10), Bytes(164 << 10)];
        assert_eq!(back(&v), v);
        assert_eq!(back(&ComputeCapability(90)), ComputeCapability(90));
        assert_eq!(back(&"a \"quoted\" name".to_string()), "a \"quoted\" name");
    }

    proptest::proptest! {
        #[test]
        fn any_value_reads_back_exactly(n in 0u64..1 << 52, x in 0.0f64..1e15) {
            proptest::prop_assert_eq!(back(&Bytes(n)), Bytes(n));
            proptest::prop_assert_eq!(back(&Hertz(n)), Hertz(n));
            proptest::prop_assert_eq!(back(&Picos(n)), Picos(n));
            proptest::prop_assert_eq!(back(&Cycles(n)), Cycles(n));
            proptest::prop_assert_eq!(back(&BytesPerSec(x)), BytesPerSec(x));
            proptest::prop_assert_eq!(back(&BytesPerCycle(x)), BytesPerCycle(x));
            proptest::prop_assert_eq!(back(&x), x);
        }
    }

    #[test]
    fn compute_capability_forms() {
        assert_eq!("9.0".parse::<ComputeCapability>().unwrap(), ComputeCapability(90));
        assert_eq!("8.6".parse::<ComputeCapability>().unwrap(), ComputeCapability(86));
        assert!("9".parse::<ComputeCapability>().is_err());
        assert!("9.10".parse::<ComputeCapability>().is_err());
    }
}

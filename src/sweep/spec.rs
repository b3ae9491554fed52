//! One varied parameter's values as a study writes them: a TOML value (a list, or one value), or
//! a range `A..B:N` (N evenly spaced values from A to B) or `log:A..B:N` (evenly spaced in the
//! logarithm), whose ends carry the parameter's units (`"3.35 TB/s".."8 TB/s":5`). Pure: no I/O.
//!
//! Values come out as override text for `Arch::with_override_str` (`132`, `5.675 TB/s`), in the
//! unit the range's first end was written in. Units are parsed by configs' own unit types, so a
//! range accepts exactly what a chip file accepts.

use std::str::FromStr;

use gpusim_configs::ParamKind;
use gpusim_configs::units::{Bytes, BytesPerCycle, BytesPerSec, Cycles, Hertz, Picos};

/// An axis's values.
#[derive(Clone, Debug, PartialEq)]
pub enum Spec {
    /// Values as given, in order.
    List(Vec<String>),
    Range(Range),
}

/// `lo..hi:steps` in the parameter's base unit ([`ParamKind`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Range {
    pub lo: f64,
    pub hi: f64,
    pub steps: usize,
    pub log: bool,
    unit: Unit,
}

/// How values of a range are written back: in `name` (`TB/s`), `scale` base units each.
#[derive(Clone, Debug, PartialEq)]
struct Unit {
    kind: ParamKind,
    name: String,
    scale: f64,
}

impl Spec {
    /// The values of a list, or the `steps` values of a range.
    pub fn levels(&self) -> Result<Vec<String>, String> {
        match self {
            Spec::List(v) => Ok(v.clone()),
            Spec::Range(r) => r.levels(),
        }
    }
}

impl Range {
    /// The value at `t` in [0, 1] of the way from `lo` to `hi` (in the logarithm for `log:`),
    /// in base units.
    pub fn at(&self, t: f64) -> f64 {
        if self.log {
            (self.lo.ln() + t * (self.hi.ln() - self.lo.ln())).exp()
        } else {
            self.lo + t * (self.hi - self.lo)
        }
    }

    fn levels(&self) -> Result<Vec<String>, String> {
        let n = self.steps;
        let mut out: Vec<String> = Vec::with_capacity(n);
        let mut seen = std::collections::HashSet::new();
        for i in 0..n {
            let t = if n == 1 { 0.0 } else { i as f64 / (n - 1) as f64 };
            let v = self.render(self.at(t));
            if !seen.insert(v.clone()) {
                return Err(format!("the range gives `{v}` twice; use fewer steps (a whole-number parameter)"));
            }
            out.push(v);
        }
        Ok(out)
    }

    /// `v` (base units) as override text, in the range's unit to 6 significant digits; for a
    /// whole-number kind the nearest value that is whole in base units (in the base unit when
    /// the range's unit cannot write it).
    pub fn render(&self, v: f64) -> String {
        let u = &self.unit;
        if whole(u.kind) {
            // 6 significant digits in the range's unit when that is a whole number of base
            // units (`1.52346 GHz`), else the nearest whole number written exactly.
            let near = with_unit(&sig6(v / u.scale), &u.name);
            if base_value(u.kind, &near).is_ok() {
                return near;
            }
            let n = v.round();
            let candidate = with_unit(&sig6(n / u.scale), &u.name);
            if base_value(u.kind, &candidate) == Ok(n) {
                return candidate;
            }
            return with_unit(&format!("{}", n as u64), base_unit(u.kind));
        }
        with_unit(&sig6(v / u.scale), &u.name)
    }
}

/// Parses `--vary`'s SPEC (after `KEY=`): a range, else a TOML value, else bare text (one value).
pub fn parse_cli(spec: &str, kind: ParamKind) -> Result<Spec, String> {
    if let Some(r) = parse_range(spec, kind)? {
        return Ok(Spec::Range(r));
    }
    match toml::from_str::<toml::Table>(&format!("v = {spec}")).ok().and_then(|mut t| t.remove("v")) {
        Some(v) => from_toml(&v, kind),
        None => Ok(Spec::List(vec![spec.trim().to_string()])),
    }
}

/// A study file's value for an axis: an array, a string holding a range, or one value.
pub fn from_toml(v: &toml::Value, kind: ParamKind) -> Result<Spec, String> {
    match v {
        toml::Value::Array(items) => {
            if items.is_empty() {
                return Err("the list of values is empty".into());
            }
            if items.len() > super::design::MAX_POINTS {
                return Err(format!(
                    "the list has {} values; a study may have at most {}",
                    items.len(),
                    super::design::MAX_POINTS
                ));
            }
            let vals = items.iter().map(scalar).collect::<Result<Vec<_>, _>>()?;
            let mut seen = std::collections::HashSet::new();
            if let Some(a) = vals.iter().find(|a| !seen.insert(a.as_str())) {
                return Err(format!("the list gives `{a}` twice"));
            }
            Ok(Spec::List(vals))
        }
        toml::Value::String(s) => match parse_range(s, kind)? {
            Some(r) => Ok(Spec::Range(r)),
            None => Ok(Spec::List(vec![s.clone()])),
        },
        other => Ok(Spec::List(vec![scalar(other)?])),
    }
}

/// A TOML scalar as override text.
fn scalar(v: &toml::Value) -> Result<String, String> {
    match v {
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::Float(f) => Ok(toml::Value::Float(*f).to_string()),
        toml::Value::Boolean(b) => Ok(b.to_string()),
        other => Err(format!("`{other}` is not a value of a parameter (a number or a string)")),
    }
}

/// `A..B:N` or `log:A..B:N`; `None` when `text` is not written as a range at all.
fn parse_range(text: &str, kind: ParamKind) -> Result<Option<Range>, String> {
    let t = text.trim();
    let (log, body) = match t.strip_prefix("log:") {
        Some(rest) => (true, rest),
        None => (false, t),
    };
    let Some((a, rest)) = body.split_once("..") else {
        return if log { Err(format!("`{text}`: `log:` needs a range `A..B:N`")) } else { Ok(None) };
    };
    let Some((b, n)) = rest.rsplit_once(':') else {
        return Err(format!("`{text}`: a range needs its number of values, as in `A..B:5`"));
    };
    let steps: usize = n.trim().parse().map_err(|_| format!("`{text}`: `{}` is not a number of values", n.trim()))?;
    if steps < 2 {
        return Err(format!("`{text}`: a range needs at least 2 values"));
    }
    if steps > super::design::MAX_POINTS {
        return Err(format!("`{text}`: {steps} values; a study may have at most {}", super::design::MAX_POINTS));
    }
    if !numeric(kind) {
        return Err(format!("`{text}`: a {kind:?} parameter has no range; list its values"));
    }
    let (lo_text, hi_text) = (end_text(a), end_text(b));
    let lo = base_value(kind, &lo_text).map_err(|e| format!("`{text}`: {e}"))?;
    let hi = base_value(kind, &hi_text).map_err(|e| format!("`{text}`: {e}"))?;
    if log && (lo <= 0.0 || hi <= 0.0) {
        return Err(format!("`{text}`: a log range needs both ends above zero"));
    }
    let (num, name) = split_number(&lo_text);
    let scale = if num != 0.0 && lo != 0.0 { lo / num } else { 1.0 };
    let name = if scale == 1.0 && name.is_empty() { base_unit(kind).to_string() } else { name };
    Ok(Some(Range { lo, hi, steps, log, unit: Unit { kind, name, scale } }))
}

/// A range end as written: a TOML literal (`"3.35 TB/s"`, `132`) or bare text, unquoted.
fn end_text(s: &str) -> String {
    match toml::from_str::<toml::Table>(&format!("v = {s}")).ok().and_then(|mut t| t.remove("v")) {
        Some(toml::Value::String(v)) => v.trim().to_string(),
        Some(v @ (toml::Value::Integer(_) | toml::Value::Float(_))) => v.to_string(),
        _ => s.trim().to_string(),
    }
}

/// `"3.35 TB/s"` → (3.35, "TB/s").
fn split_number(s: &str) -> (f64, String) {
    let end =
        s.find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E' | '_'))).unwrap_or(s.len());
    let end = if s[..end].ends_with(['e', 'E']) { end - 1 } else { end };
    (s[..end].replace('_', "").parse().unwrap_or(0.0), s[end..].trim().to_string())
}

fn numeric(kind: ParamKind) -> bool {
    !matches!(kind, ParamKind::Text | ParamKind::ByteList | ParamKind::ComputeCapability)
}

fn whole(kind: ParamKind) -> bool {
    matches!(kind, ParamKind::Bytes | ParamKind::Cycles | ParamKind::Time | ParamKind::Hertz | ParamKind::Integer)
}

fn base_unit(kind: ParamKind) -> &'static str {
    match kind {
        ParamKind::Bytes => "B",
        ParamKind::Time => "ps",
        ParamKind::Hertz => "Hz",
        ParamKind::BytesPerSec => "B/s",
        _ => "",
    }
}

/// `text` (a value with its unit) in the kind's base unit, by configs' unit parsing.
pub fn base_value(kind: ParamKind, text: &str) -> Result<f64, String> {
    fn p<T: FromStr>(s: &str) -> Result<T, String>
    where
        T::Err: std::fmt::Display,
    {
        s.parse::<T>().map_err(|e| e.to_string())
    }
    Ok(match kind {
        ParamKind::Bytes => p::<Bytes>(text)?.0 as f64,
        ParamKind::Cycles => p::<Cycles>(text)?.0 as f64,
        ParamKind::Time => p::<Picos>(text)?.0 as f64,
        ParamKind::Hertz => p::<Hertz>(text)?.0 as f64,
        ParamKind::BytesPerSec => p::<BytesPerSec>(text)?.0,
        ParamKind::BytesPerCycle => p::<BytesPerCycle>(text)?.0,
        ParamKind::Integer => {
            let v: f64 = text.trim().parse().map_err(|_| format!("`{text}` is not a number"))?;
            if v.fract() != 0.0 {
                return Err(format!("`{text}` is not a whole number"));
            }
            v
        }
        ParamKind::Float => text.trim().parse().map_err(|_| format!("`{text}` is not a number"))?,
        ParamKind::Text | ParamKind::ByteList | ParamKind::ComputeCapability => {
            return Err(format!("a {kind:?} value is not a number"));
        }
    })
}

fn with_unit(num: &str, unit: &str) -> String {
    if unit.is_empty() { num.to_string() } else { format!("{num} {unit}") }
}

/// `x` to 6 significant digits, without trailing zeros (`5.675`, `132`).
fn sig6(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let digits = (5 - x.abs().log10().floor() as i32).max(0) as usize;
    let s = format!("{x:.digits$}");
    if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn levels(spec: &str, kind: ParamKind) -> Vec<String> {
        parse_cli(spec, kind).unwrap().levels().unwrap()
    }

    #[test]
    fn lists_and_single_values() {
        assert_eq!(levels("[66, 132]", ParamKind::Integer), ["66", "132"]);
        assert_eq!(levels(r#"["40 MiB", "50 MiB"]"#, ParamKind::Bytes), ["40 MiB", "50 MiB"]);
        assert_eq!(levels("132", ParamKind::Integer), ["132"]);
        assert_eq!(levels("3.35 TB/s", ParamKind::BytesPerSec), ["3.35 TB/s"]);
        assert!(parse_cli("[66, 66]", ParamKind::Integer).unwrap_err().contains("twice"));
        assert!(parse_cli("[]", ParamKind::Integer).is_err());
    }

    #[test]
    fn linear_ranges_keep_the_unit_of_the_first_end() {
        assert_eq!(
            levels(r#""3.35 TB/s".."8 TB/s":4"#, ParamKind::BytesPerSec),
            ["3.35 TB/s", "4.9 TB/s", "6.45 TB/s", "8 TB/s"]
        );
        assert_eq!(levels("66..132:3", ParamKind::Integer), ["66", "99", "132"]);
        assert_eq!(levels(r#""50 MiB".."128 MiB":3"#, ParamKind::Bytes), ["50 MiB", "89 MiB", "128 MiB"]);
        assert_eq!(levels(r#""1 GHz".."2 GHz":3"#, ParamKind::Hertz), ["1 GHz", "1.5 GHz", "2 GHz"]);
        // A string in a study file holds the same syntax.
        let s = from_toml(&toml::Value::String(r#""1 GHz".."2 GHz":2"#.into()), ParamKind::Hertz).unwrap();
        assert_eq!(s.levels().unwrap(), ["1 GHz", "2 GHz"]);
    }

    #[test]
    fn log_ranges_space_evenly_in_the_logarithm() {
        assert_eq!(
            levels(r#"log:"1 MiB".."16 MiB":5"#, ParamKind::Bytes),
            ["1 MiB", "2 MiB", "4 MiB", "8 MiB", "16 MiB"]
        );
        assert_eq!(levels("log:1..100:3", ParamKind::Float), ["1", "10", "100"]);
        assert!(parse_cli("log:0..100:3", ParamKind::Float).unwrap_err().contains("above zero"));
    }

    #[test]
    fn whole_number_ranges_that_repeat_a_value_are_errors() {
        assert!(parse_cli("1..2:5", ParamKind::Integer).unwrap().levels().unwrap_err().contains("twice"));
    }

    #[test]
    fn bad_ranges_say_why() {
        assert!(parse_cli("1..2", ParamKind::Integer).unwrap_err().contains("number of values"));
        assert!(parse_cli("1..2:x", ParamKind::Integer).unwrap_err().contains("not a number of values"));
        assert!(parse_cli("1..2:1", ParamKind::Integer).unwrap_err().contains("at least 2"));
        assert!(parse_cli(r#""3 parsecs".."4 TB/s":2"#, ParamKind::BytesPerSec).is_err());
        assert!(parse_cli("a..b:2", ParamKind::Text).unwrap_err().contains("no range"));
        assert!(parse_cli("log:5", ParamKind::Float).is_err());
    }

    #[test]
    fn render_falls_back_to_the_base_unit_when_not_exact() {
        let Spec::Range(r) = parse_cli(r#""1 KiB".."2 KiB":2"#, ParamKind::Bytes).unwrap() else { panic!() };
        assert_eq!(r.render(1500.0), "1500 B");
        assert_eq!(r.render(1500.4), "1500 B");
        assert_eq!(r.render(1536.0), "1.5 KiB");
        assert_eq!(base_value(ParamKind::Bytes, "1.5 KiB"), Ok(1536.0));
    }
}

//! What the CLI shows about chips and parameters: `explain`, `all_params`, `to_toml` (a fully
//! resolved file), and `diff`. Everything returns data or `String`s; printing is the caller's.

use std::fmt;

use crate::arch::Arch;
use crate::error::{ConfigError, nearest};
use crate::keys::normalize;
use crate::schema::{emit, params};
use crate::value::{ParamKind, unquote};

/// Metadata of one parameter.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamInfo {
    /// Dotted name, as written in TOML (`l2.slices`); `opcodes.<BASE>.latency` stands for every
    /// base mnemonic.
    pub name: String,
    pub description: String,
    /// The unit of the value (`bytes`, `cycles`, `Hz`, `SMs`, ...).
    pub unit: &'static str,
    /// The default, in TOML value syntax without quotes (`1000000 cycles`), or a sentence when it
    /// depends on something (`the chip's timing of the opcode's pipe class`). `None`: required.
    pub default: Option<String>,
    /// The valid range (`≥ 1`, `1 ..= 255`), when the parameter has one on its own.
    /// Cross-field rules (validate.rs) come on top.
    pub range: Option<String>,
    /// What a value looks like (`a size such as "50 MiB" or a whole number of bytes`).
    pub expected: &'static str,
    /// The parameter's type.
    pub kind: ParamKind,
    /// The declared lower bound (the schema's `min`), in the kind's base unit.
    pub min: Option<f64>,
    /// The declared upper bound (the schema's `max`), in the kind's base unit.
    pub max: Option<f64>,
}

impl ParamInfo {
    /// Whether a file (or an ancestor) must set the parameter.
    pub fn required(&self) -> bool {
        self.default.is_none()
    }
}

impl fmt::Display for ParamInfo {
    /// Several lines: name, description, unit, default, range, accepted syntax.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.name)?;
        writeln!(f, "  {}", self.description)?;
        writeln!(f, "  unit:    {}", self.unit)?;
        match &self.default {
            Some(d) => writeln!(f, "  default: {d}")?,
            None => writeln!(f, "  default: none (required)")?,
        }
        if let Some(r) = &self.range {
            writeln!(f, "  range:   {r}")?;
        }
        write!(f, "  accepts: {}", self.expected)
    }
}

/// Metadata of every parameter, in schema order (the order of `to_toml`).
pub fn all_params() -> Vec<ParamInfo> {
    params().to_vec()
}

/// Metadata of one parameter by dotted name; `opcodes.DFMA.latency` is accepted for
/// `opcodes.<BASE>.latency`. An unknown name gets the nearest known one as a suggestion.
pub fn explain(param: &str) -> Result<ParamInfo, ConfigError> {
    let all = params();
    let norm = normalize(param);
    let is_opcode = param.split('.').nth(1).is_some_and(|b| gpusim_isa::opcode::lookup(b).is_some());
    if let Some(p) = all.iter().find(|p| p.name == norm && (norm == param || is_opcode)) {
        return Ok(ParamInfo { name: param.to_string(), ..p.clone() });
    }
    Err(ConfigError::UnknownParam {
        name: param.to_string(),
        suggestion: nearest(param, all.iter().map(|p| p.name.as_str())),
    })
}

/// Metadata of one parameter by dotted name, as [`explain`] gives it (typed kind and numeric
/// range included); `None` for an unknown name.
pub fn param(key: &str) -> Option<ParamInfo> {
    explain(key).ok()
}

/// A fully resolved TOML file for `arch`: every parameter, units written out. It loads back to
/// an `Arch` equal to `arch`.
pub fn to_toml(arch: &Arch) -> String {
    let mut out = format!(
        "# `{}`, fully resolved by gpusim-configs: every parameter, defaults and inherited values included.\n",
        arch.name
    );
    let mut section = String::new();
    for (key, value) in emit(arch) {
        let (table, leaf) = key.rsplit_once('.').unwrap_or(("", &key));
        if table != section {
            out.push_str(&format!("\n[{table}]\n"));
            section = table.to_string();
        }
        out.push_str(&format!("{} = {value}\n", bare_or_quoted(leaf)));
    }
    out
}

fn bare_or_quoted(key: &str) -> String {
    if !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        key.to_string()
    } else {
        toml::Value::String(key.to_string()).to_string()
    }
}

/// One parameter that differs between two chips.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamDiff {
    /// Dotted key (`sm.count`, `opcodes.DFMA.latency`, `tensor.flops_per_clk_per_sm.fp8`).
    pub key: String,
    /// The value in the first chip, with its unit; `None` where the first chip lacks the entry
    /// (an opcode override or tensor type it does not have).
    pub a: Option<String>,
    /// The value in the second chip, likewise.
    pub b: Option<String>,
}

impl fmt::Display for ParamDiff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "(unset)".into());
        write!(f, "{}: {} → {}", self.key, show(&self.a), show(&self.b))
    }
}

/// Every parameter whose value differs between `a` and `b`, in schema order (`name` and
/// `description` included).
pub fn diff(a: &Arch, b: &Arch) -> Vec<ParamDiff> {
    let ea = emit(a);
    let eb = emit(b);
    // Schema order of `a`; a key only `b` has (its own opcode override or tensor type) goes
    // right after the key that precedes it in `b`.
    let mut keys: Vec<&String> = ea.iter().map(|(k, _)| k).collect();
    let mut after = 0;
    for (k, _) in &eb {
        match keys.iter().position(|x| *x == k) {
            Some(i) => after = i + 1,
            None => {
                keys.insert(after, k);
                after += 1;
            }
        }
    }
    let get = |e: &[(String, String)], k: &str| e.iter().find(|(key, _)| key == k).map(|(_, v)| unquote(v));
    keys.into_iter()
        .filter_map(|k| {
            let (va, vb) = (get(&ea, k), get(&eb, k));
            (va != vb).then(|| ParamDiff { key: k.clone(), a: va, b: vb })
        })
        .collect()
}

/// `diff` as an aligned three-column table headed by the chip names.
pub fn diff_table(a: &Arch, b: &Arch) -> String {
    let rows = diff(a, b);
    let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    let w0 = rows.iter().map(|r| r.key.chars().count()).max().unwrap_or(0).max("parameter".len());
    let w1 = rows.iter().map(|r| show(&r.a).chars().count()).max().unwrap_or(0).max(a.name.chars().count());
    let mut out = format!("{:<w0$}  {:<w1$}  {}\n", "parameter", a.name, b.name);
    for r in &rows {
        out.push_str(&format!("{:<w0$}  {:<w1$}  {}\n", r.key, show(&r.a), show(&r.b)));
    }
    out
}

/// The built-in presets as a two-column table: name and description.
pub fn presets_table() -> String {
    let list = crate::presets::presets();
    let w = list.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    list.iter().map(|(n, d)| format!("{n:<w$}  {d}\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explain_known_pattern_and_unknown() {
        let p = explain("l2.slices").unwrap();
        assert_eq!(p.unit, "slices");
        assert!(p.required());
        assert_eq!(p.range.as_deref(), Some("1 ..= 4096"));
        let p = explain("opcodes.DFMA.latency").unwrap();
        assert_eq!(p.name, "opcodes.DFMA.latency");
        assert!(explain("opcodes.NOTANOP.latency").is_err());
        let p = explain("pipes.fp32.latency").unwrap();
        assert_eq!(p.default.as_deref(), Some("4 cycles"));
        let e = explain("l2.slice").unwrap_err();
        assert_eq!(e.to_string(), "unknown parameter `l2.slice`; did you mean `l2.slices`?");
        let p = explain("sim.watchdog_cycles").unwrap();
        assert_eq!(p.default.as_deref(), Some("1000000 cycles"));
        assert!(p.to_string().contains("default: 1000000 cycles"));
    }
}

#[cfg(test)]
mod bounds {
    use super::*;

    /// Every sized or rate parameter has an upper bound: a value past it would make the model
    /// allocate or wait without limit (issue 15's `l2.size = "160 GiB"`, `hbm.banks_per_channel
    /// = 100000000`, `clocks.sm = "1 Hz"`). Tensor rates and lists are bounded by their own
    /// rules in validate.rs.
    #[test]
    fn every_sized_parameter_has_an_upper_bound() {
        let unbounded: Vec<String> = all_params()
            .into_iter()
            .filter(|p| {
                matches!(
                    p.kind,
                    ParamKind::Bytes
                        | ParamKind::Cycles
                        | ParamKind::Time
                        | ParamKind::Hertz
                        | ParamKind::BytesPerSec
                        | ParamKind::BytesPerCycle
                        | ParamKind::Integer
                )
            })
            .filter(|p| p.max.is_none())
            .map(|p| p.name)
            .collect();
        assert!(unbounded.is_empty(), "parameters without an upper bound: {unbounded:?}");
    }
}

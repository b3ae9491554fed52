//! One way to declare a generator's parameters: a table of [`Param`]s, each with its name,
//! description, kind (which gives the unit and the parsing), valid range and how to read and set
//! the field of the generator's parameter struct. Declared once per struct with [`params!`](crate::params!); from
//! the table come the parsing of `-p key=value` ([`apply`]), errors that name the parameter and
//! its valid range, the listing of `gpusim trace params NAME` ([`describe`]) and the defaults
//! (the struct's `Default`, or the base the caller passes).

mod parse;

use std::fmt;

pub use parse::{parse_bool, parse_int};

/// Why a generator could not be built: an unknown generator or parameter, a value out of range
/// or of the wrong kind, parameters that do not fit together or the chip. Always names what is
/// wrong; generators return it instead of panicking on user input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadError(pub String);

impl fmt::Display for WorkloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WorkloadError {}

impl From<String> for WorkloadError {
    fn from(s: String) -> Self {
        WorkloadError(s)
    }
}

impl From<WorkloadError> for String {
    fn from(e: WorkloadError) -> Self {
        e.0
    }
}

/// What a parameter's value is, and so how it is parsed and shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A size in bytes: an integer (decimal or `0x` hex) or a size with a unit (`"4 MiB"`,
    /// [`gpusim_configs::Bytes`]).
    Bytes,
    /// A non-negative integer (decimal or `0x` hex, `_` separators).
    Int,
    /// `true`/`false` (also `1`/`0`, `yes`/`no`, `on`/`off`).
    Bool,
    /// A count, or `all`/`default` for none given.
    OptInt,
    /// One of a fixed set of names.
    Choice(&'static [&'static str]),
    /// A comma-separated list of integers, each within the range (`none` or empty: no list).
    List,
}

impl Kind {
    /// The unit shown in listings.
    pub fn unit(self) -> &'static str {
        match self {
            Kind::Bytes => "bytes",
            Kind::Int => "count",
            Kind::Bool => "bool",
            Kind::OptInt => "count or all",
            Kind::Choice(_) => "name",
            Kind::List => "list of counts",
        }
    }
}

/// A parsed value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Int(u64),
    Bool(bool),
    OptInt(Option<u64>),
    Choice(&'static str),
    /// Empty: no list given.
    List(Vec<u64>),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(n) => write!(f, "{n}"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::OptInt(Some(n)) => write!(f, "{n}"),
            Value::OptInt(None) => f.write_str("all"),
            Value::Choice(s) => f.write_str(s),
            Value::List(v) if v.is_empty() => f.write_str("none"),
            Value::List(v) => {
                let items: Vec<String> = v.iter().map(u64::to_string).collect();
                f.write_str(&items.join(","))
            }
        }
    }
}

/// A field a parameter sets. Values reaching `set` are within the declared range, which the
/// declaration keeps within the field's type.
pub trait Field {
    fn get(&self) -> Value;
    fn set(&mut self, v: Value);
}

impl Field for u64 {
    fn get(&self) -> Value {
        Value::Int(*self)
    }
    fn set(&mut self, v: Value) {
        if let Value::Int(n) = v {
            *self = n;
        }
    }
}

impl Field for u32 {
    fn get(&self) -> Value {
        Value::Int(*self as u64)
    }
    fn set(&mut self, v: Value) {
        if let Value::Int(n) = v {
            *self = n.min(u32::MAX as u64) as u32;
        }
    }
}

impl Field for bool {
    fn get(&self) -> Value {
        Value::Bool(*self)
    }
    fn set(&mut self, v: Value) {
        if let Value::Bool(b) = v {
            *self = b;
        }
    }
}

impl Field for Option<u32> {
    fn get(&self) -> Value {
        Value::OptInt(self.map(u64::from))
    }
    fn set(&mut self, v: Value) {
        if let Value::OptInt(n) = v {
            *self = n.map(|n| n.min(u32::MAX as u64) as u32);
        }
    }
}

impl Field for Option<Vec<u32>> {
    fn get(&self) -> Value {
        Value::List(self.as_ref().map_or_else(Vec::new, |v| v.iter().map(|&n| n as u64).collect()))
    }
    fn set(&mut self, v: Value) {
        if let Value::List(v) = v {
            *self = (!v.is_empty()).then(|| v.iter().map(|&n| n.min(u32::MAX as u64) as u32).collect());
        }
    }
}

/// One declared parameter of a parameter struct `T`.
pub struct Param<T> {
    pub name: &'static str,
    pub description: &'static str,
    pub kind: Kind,
    /// Valid range, inclusive (integers and sizes; ignored for the other kinds).
    pub min: u64,
    pub max: u64,
    pub get: fn(&T) -> Value,
    pub set: fn(&mut T, Value),
}

/// A parameter as listed: name, description, unit, default and valid range, all as text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamInfo {
    pub name: &'static str,
    pub description: &'static str,
    pub unit: &'static str,
    pub default: String,
    pub range: String,
}

impl<T> Param<T> {
    /// The valid values, as an error message or a listing says them.
    pub fn range(&self) -> String {
        match self.kind {
            Kind::Bool => "true or false".into(),
            Kind::Choice(names) => names.join(", "),
            Kind::OptInt => format!("{} to {}, or all", self.min, self.max),
            Kind::Int => format!("{} to {}", self.min, self.max),
            Kind::List => format!("comma-separated, each {} to {}, or none", self.min, self.max),
            Kind::Bytes => format!("{} to {}", gpusim_configs::Bytes(self.min), gpusim_configs::Bytes(self.max)),
        }
    }

    /// Parses `raw` for this parameter of generator `generator`.
    pub fn parse(&self, generator: &str, raw: &str) -> Result<Value, WorkloadError> {
        let raw = raw.trim();
        let bad = |what: String| {
            WorkloadError(format!(
                "parameter `{}` of `{generator}`: `{raw}` {what}; valid: {}",
                self.name,
                self.range()
            ))
        };
        let int = |raw: &str| -> Result<u64, WorkloadError> {
            let n = match self.kind {
                Kind::Bytes => match parse_int(raw) {
                    Some(n) => n,
                    None => raw.parse::<gpusim_configs::Bytes>().map_err(|e| bad(format!("is not a size ({e})")))?.0,
                },
                _ => parse_int(raw).ok_or_else(|| bad("is not a non-negative integer".into()))?,
            };
            if n < self.min || n > self.max {
                return Err(bad("is out of range".into()));
            }
            Ok(n)
        };
        match self.kind {
            Kind::Bytes | Kind::Int => int(raw).map(Value::Int),
            Kind::Bool => parse_bool(raw).map(Value::Bool).ok_or_else(|| bad("is not a boolean".into())),
            Kind::OptInt => match raw {
                "all" | "default" | "none" | "" => Ok(Value::OptInt(None)),
                _ => int(raw).map(|n| Value::OptInt(Some(n))),
            },
            Kind::List => match raw {
                "none" | "" => Ok(Value::List(Vec::new())),
                _ => raw.split(',').map(|item| int(item.trim())).collect::<Result<Vec<_>, _>>().map(Value::List),
            },
            Kind::Choice(names) => {
                let norm = raw.to_ascii_lowercase().replace('_', "-");
                names
                    .iter()
                    .find(|n| **n == norm)
                    .map(|n| Value::Choice(n))
                    .ok_or_else(|| bad("is not a valid name".into()))
            }
        }
    }

    pub fn info(&self, defaults: Option<&T>) -> ParamInfo {
        ParamInfo {
            name: self.name,
            description: self.description,
            unit: self.kind.unit(),
            default: defaults.map_or_else(
                || "chosen for the problem".to_string(),
                |d| match ((self.get)(d), self.kind) {
                    (Value::Int(n), Kind::Bytes) => gpusim_configs::Bytes(n).to_string(),
                    (v, _) => v.to_string(),
                },
            ),
            range: self.range(),
        }
    }
}

/// Applies `given` `(key, value)` pairs to `into` through `table`: each key must be declared and
/// given once, each value must parse and lie in its range. Errors name the generator, the
/// parameter and the valid keys or values.
pub fn apply<T>(
    generator: &str,
    table: &[Param<T>],
    given: &[(String, String)],
    into: &mut T,
) -> Result<(), WorkloadError> {
    for (i, (k, v)) in given.iter().enumerate() {
        let key = k.trim();
        let Some(p) = table.iter().find(|p| p.name == key) else {
            let valid: Vec<&str> = table.iter().map(|p| p.name).collect();
            return Err(WorkloadError(format!(
                "unknown parameter `{key}` for `{generator}`; valid parameters: {}",
                valid.join(", ")
            )));
        };
        if given[..i].iter().any(|(k2, _)| k2.trim() == key) {
            return Err(WorkloadError(format!("parameter `{key}` is given twice")));
        }
        let value = p.parse(generator, v)?;
        (p.set)(into, value);
    }
    Ok(())
}

/// The listing of `table`, with defaults read from `defaults` (none: they depend on the problem).
pub fn describe<T>(table: &[Param<T>], defaults: Option<&T>) -> Vec<ParamInfo> {
    table.iter().map(|p| p.info(defaults)).collect()
}

/// Splits `KEY=VALUE` arguments (the CLI's `-p`) into trimmed pairs.
pub fn split_key_values(args: &[String]) -> Result<Vec<(String, String)>, WorkloadError> {
    args.iter()
        .map(|s| {
            s.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| WorkloadError(format!("`{s}`: expected KEY=VALUE")))
        })
        .collect()
}

/// Declares the parameter table of a struct, one line per field:
///
/// ```ignore
/// pub const CHASE: &[Param<PointerChase>] = params!(PointerChase {
///     footprint_bytes: Bytes [8, 1 << 40] "bytes the chain's elements are spread over",
///     random: Bool "random order (else sequential)",
/// });
/// ```
///
/// A kind of `Bytes`, `Int` or `OptInt` takes a `[min, max]` range; `Bool` none; `Choice(...)`
/// a list of names (the field implements [`Field`] over them).
#[macro_export]
macro_rules! params {
    (@one $T:ty, $field:ident, $kind:expr, $min:expr, $max:expr, $desc:literal) => {
        $crate::params::Param::<$T> {
            name: stringify!($field),
            description: $desc,
            kind: $kind,
            min: $min,
            max: $max,
            get: |p: &$T| $crate::params::Field::get(&p.$field),
            set: |p: &mut $T, v| $crate::params::Field::set(&mut p.$field, v),
        }
    };
    (@item $T:ty, $field:ident : Bool $desc:literal) => {
        $crate::params!(@one $T, $field, $crate::params::Kind::Bool, 0, 1, $desc)
    };
    (@item $T:ty, $field:ident : Choice($names:expr) $desc:literal) => {
        $crate::params!(@one $T, $field, $crate::params::Kind::Choice($names), 0, 0, $desc)
    };
    (@item $T:ty, $field:ident : $kind:ident [$min:expr, $max:expr] $desc:literal) => {
        $crate::params!(@one $T, $field, $crate::params::Kind::$kind, $min, $max, $desc)
    };
    ($T:ty { $( $field:ident : $kind:ident $( ( $names:expr ) )? $( [$min:expr, $max:expr] )? $desc:literal ),* $(,)? }) => {
        &[ $( $crate::params!(@item $T, $field : $kind $( ( $names ) )? $( [$min, $max] )? $desc) ),* ]
    };
}

//! The raw layer's building blocks: a value with its location ([`Val`]), deep merging of a file
//! over what it inherits ([`Merge`]), and turning a raw field into its typed value with defaults
//! and range checks, back into TOML, and into a [`ParamInfo`] ([`Field`]).

use std::collections::BTreeMap;
use std::ops::Range;

use crate::error::{ConfigError, Loc, Source};
use crate::introspect::ParamInfo;
use crate::value::ParamValue;

/// A value as written in a file, with where it was written.
#[derive(Clone, Debug)]
pub(crate) struct Val<T> {
    pub v: T,
    /// Byte range in the file's text.
    pub span: Range<usize>,
    /// Set by [`Merge::locate`] once the file's name and text are known.
    pub at: Option<Loc>,
}

impl<'de, T: serde::Deserialize<'de>> serde::Deserialize<'de> for Val<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = toml::Spanned::<T>::deserialize(d)?;
        Ok(Val { span: s.span(), v: s.into_inner(), at: None })
    }
}

/// A parameter as a file may or may not set it.
pub(crate) type Opt<T> = Option<Val<T>>;

/// A `[tensor.*flops_per_clk_per_sm]` table: one optional rate per input type key.
pub(crate) type Rates = BTreeMap<String, Opt<f64>>;

/// Deep merge of a file over the files it inherits from, field by field.
pub(crate) trait Merge {
    /// Takes from `parent` whatever `self` leaves unset.
    fn merge_from(&mut self, parent: Self);
    /// Records the file location of every value set in `self`, which came from `src`.
    fn locate(&mut self, src: &Source);
    /// Collects `dotted key → location` of every value set.
    fn locs(&self, key: &str, out: &mut BTreeMap<String, Loc>);
}

impl<T> Merge for Opt<T> {
    fn merge_from(&mut self, parent: Self) {
        if self.is_none() {
            *self = parent;
        }
    }
    fn locate(&mut self, src: &Source) {
        if let Some(v) = self {
            v.at = Some(src.loc(v.span.start));
        }
    }
    fn locs(&self, key: &str, out: &mut BTreeMap<String, Loc>) {
        if let Some(Val { at: Some(at), .. }) = self {
            out.insert(key.to_string(), at.clone());
        }
    }
}

impl<M: Merge> Merge for BTreeMap<String, M> {
    fn merge_from(&mut self, parent: Self) {
        for (k, pv) in parent {
            match self.entry(k) {
                std::collections::btree_map::Entry::Vacant(e) => {
                    e.insert(pv);
                }
                std::collections::btree_map::Entry::Occupied(mut e) => e.get_mut().merge_from(pv),
            }
        }
    }
    fn locate(&mut self, src: &Source) {
        self.values_mut().for_each(|v| v.locate(src));
    }
    fn locs(&self, key: &str, out: &mut BTreeMap<String, Loc>) {
        for (k, v) in self {
            v.locs(&join(key, k), out);
        }
    }
}

/// `l2` + `slices` → `l2.slices`; an empty prefix is the top level.
pub(crate) fn join(prefix: &str, field: &str) -> String {
    if prefix.is_empty() { field.to_string() } else { format!("{prefix}.{field}") }
}

/// What the schema says about one parameter besides its description and unit.
pub(crate) struct Spec<T> {
    pub default: Option<T>,
    pub min: Option<T>,
    pub max: Option<T>,
}

/// Context of a resolution, for "missing key" messages.
pub(crate) struct Cx<'a> {
    /// The file being loaded.
    pub file: &'a str,
    /// What it inherits from, nearest first.
    pub inherits: &'a [String],
}

impl Cx<'_> {
    pub fn missing(&self, key: &str) -> ConfigError {
        ConfigError::Missing { key: key.to_string(), file: self.file.to_string(), inherits: self.inherits.to_vec() }
    }
}

/// One field of a raw section and the typed value it becomes.
pub(crate) trait Field: Merge + Default {
    type Out;
    /// The typed value: the file's, else `fallback` (a per-instance default such as the ISA
    /// table's timing of a pipe), else the schema default; range-checked.
    fn resolve(
        &self,
        key: &str,
        spec: &Spec<Self::Out>,
        fallback: Option<&Self::Out>,
        cx: &Cx,
    ) -> Result<Self::Out, ConfigError>;
    /// Appends `(dotted key, TOML literal)` for the value (none for an empty table).
    fn emit(out: &Self::Out, key: &str, sink: &mut Vec<(String, String)>);
    /// The value at `rest` (empty: the field itself; a sub-key of a table field) as a number in
    /// its kind's base unit.
    fn number(out: &Self::Out, rest: &str) -> Option<f64>;
    /// Appends the parameter's metadata.
    fn describe(
        key: &str,
        doc: &str,
        unit: &'static str,
        spec: &Spec<Self::Out>,
        fallback: Option<&Self::Out>,
        out: &mut Vec<ParamInfo>,
    );
}

/// Joins the lines of a doc comment into one paragraph.
pub(crate) fn paragraph(doc: &str) -> String {
    doc.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn range_text<T: ParamValue>(spec: &Spec<T>) -> Option<String> {
    match (&spec.min, &spec.max) {
        (Some(lo), Some(hi)) => Some(format!("{} ..= {}", lo.show(), hi.show())),
        (Some(lo), None) => Some(format!("≥ {}", lo.show())),
        (None, Some(hi)) => Some(format!("≤ {}", hi.show())),
        (None, None) => None,
    }
}

impl<T: ParamValue + PartialOrd> Field for Opt<T> {
    type Out = T;

    fn resolve(&self, key: &str, spec: &Spec<T>, fallback: Option<&T>, cx: &Cx) -> Result<T, ConfigError> {
        let Some(val) = self else {
            return fallback.or(spec.default.as_ref()).cloned().ok_or_else(|| cx.missing(key));
        };
        let low = spec.min.as_ref().is_some_and(|lo| val.v < *lo);
        let high = spec.max.as_ref().is_some_and(|hi| val.v > *hi);
        if low || high {
            return Err(ConfigError::OutOfRange {
                key: key.to_string(),
                value: val.v.show(),
                range: range_text(spec).unwrap_or_default(),
                at: val.at.clone().unwrap_or_else(|| Loc { file: cx.file.to_string(), line: 0, col: 0 }),
            });
        }
        Ok(val.v.clone())
    }

    fn emit(out: &T, key: &str, sink: &mut Vec<(String, String)>) {
        sink.push((key.to_string(), out.to_toml()));
    }

    fn number(out: &T, rest: &str) -> Option<f64> {
        if rest.is_empty() { out.number() } else { None }
    }

    fn describe(
        key: &str,
        doc: &str,
        unit: &'static str,
        spec: &Spec<T>,
        fallback: Option<&T>,
        out: &mut Vec<ParamInfo>,
    ) {
        out.push(ParamInfo {
            name: key.to_string(),
            description: paragraph(doc),
            unit,
            default: fallback.or(spec.default.as_ref()).map(|d| d.show()),
            range: range_text(spec),
            expected: T::EXPECTED,
            kind: T::KIND,
            min: spec.min.as_ref().and_then(ParamValue::number),
            max: spec.max.as_ref().and_then(ParamValue::number),
        });
    }
}

/// Tensor input type keys, as `gpusim_isa::TensorType::rate_key` names them.
pub(crate) fn rate_keys() -> Vec<&'static str> {
    use gpusim_isa::TensorType as T;
    let all = [T::F16, T::Bf16, T::Tf32, T::F64, T::E4m3, T::E5m2, T::Fp6, T::Fp4, T::S8, T::U8, T::S4, T::B1];
    let mut keys: Vec<&'static str> = Vec::new();
    for t in all {
        if !keys.contains(&t.rate_key()) {
            keys.push(t.rate_key());
        }
    }
    keys
}

impl Field for Rates {
    type Out = BTreeMap<String, f64>;

    fn resolve(
        &self,
        key: &str,
        _spec: &Spec<Self::Out>,
        fallback: Option<&Self::Out>,
        cx: &Cx,
    ) -> Result<Self::Out, ConfigError> {
        let mut out = fallback.cloned().unwrap_or_default();
        let spec = Spec { default: None, min: Some(0.0), max: None };
        for (k, v) in self {
            let rate = Field::resolve(v, &join(key, k), &spec, None, cx)?;
            if rate.is_nan() {
                let at = v.as_ref().and_then(|v| v.at.clone()).unwrap_or_else(|| Loc {
                    file: cx.file.to_string(),
                    line: 0,
                    col: 0,
                });
                return Err(ConfigError::OutOfRange {
                    key: join(key, k),
                    value: "nan".into(),
                    range: "≥ 0".into(),
                    at,
                });
            }
            // 0 removes the type, as if left out, which lets a file drop a parent's type.
            if rate == 0.0 {
                out.remove(k);
            } else {
                out.insert(k.clone(), rate);
            }
        }
        Ok(out)
    }

    fn number(out: &Self::Out, rest: &str) -> Option<f64> {
        // A type the chip leaves out has rate 0.
        out.get(rest).copied().or_else(|| rate_keys().contains(&rest).then_some(0.0))
    }

    fn emit(out: &Self::Out, key: &str, sink: &mut Vec<(String, String)>) {
        for (k, v) in out {
            sink.push((join(key, k), v.to_toml()));
        }
    }

    fn describe(
        key: &str,
        doc: &str,
        unit: &'static str,
        _spec: &Spec<Self::Out>,
        _fallback: Option<&Self::Out>,
        out: &mut Vec<ParamInfo>,
    ) {
        for k in rate_keys() {
            out.push(ParamInfo {
                name: join(key, k),
                description: format!("{} This entry: `{k}` inputs.", paragraph(doc)),
                unit,
                // What a type left out means differs by table (unsupported; the dense rate):
                // each table's description says it.
                default: Some("left out (see the description)".into()),
                range: Some("≥ 0".into()),
                expected: f64::EXPECTED,
                kind: f64::KIND,
                min: Some(0.0),
                max: None,
            });
        }
    }
}

/// Builds a [`Spec`] from the optional parts of a field declaration.
macro_rules! spec {
    ($out:ty; $($default:expr)?; $($min:expr)?; $($max:expr)?) => {
        $crate::field::Spec::<$out> {
            default: $crate::field::spec!(@opt $($default)?),
            min: $crate::field::spec!(@opt $($min)?),
            max: $crate::field::spec!(@opt $($max)?),
        }
    };
    (@opt) => { None };
    (@opt $e:expr) => { Some($e) };
}
pub(crate) use spec;

/// Declares a raw TOML section once: the serde struct (every field optional, unknown keys
/// rejected), its deep merge, and, for the typed struct it resolves to, resolution with defaults
/// and ranges, emission back to TOML, and parameter metadata. Each field is written as
///
/// ```text
/// /// Description (becomes the parameter's description).
/// name: RawType, "unit" [, default EXPR] [, min EXPR] [, max EXPR];
/// ```
macro_rules! section {
    (
        $(#[doc = $sdoc:literal])*
        struct $Raw:ident => $Arch:ident, $path:literal {
            $(
                $(#[doc = $doc:literal])+
                $field:ident : $Fty:ty, $unit:literal
                    $(, default $default:expr)? $(, min $min:expr)? $(, max $max:expr)? ;
            )*
        }
    ) => {
        $(#[doc = $sdoc])*
        #[derive(Clone, Debug, Default, serde::Deserialize)]
        #[serde(deny_unknown_fields, default)]
        pub(crate) struct $Raw {
            $( $(#[doc = $doc])+ pub $field: $Fty, )*
        }

        impl $crate::field::Merge for $Raw {
            fn merge_from(&mut self, parent: Self) {
                $( $crate::field::Merge::merge_from(&mut self.$field, parent.$field); )*
            }
            fn locate(&mut self, src: &$crate::error::Source) {
                $( $crate::field::Merge::locate(&mut self.$field, src); )*
            }
            fn locs(&self, key: &str, out: &mut std::collections::BTreeMap<String, $crate::error::Loc>) {
                $( $crate::field::Merge::locs(&self.$field, &$crate::field::join(key, stringify!($field)), out); )*
            }
        }

        #[allow(dead_code)]
        impl $Raw {
            /// The section's dotted path (`pipes.<class>` for a family of sections).
            pub const PATH: &'static str = $path;

            /// The typed section; `fallback` supplies values the file leaves unset.
            pub fn resolve(
                &self,
                prefix: &str,
                fallback: Option<&$Arch>,
                cx: &$crate::field::Cx,
            ) -> Result<$Arch, $crate::error::ConfigError> {
                Ok($Arch {
                    $(
                        $field: $crate::field::Field::resolve(
                            &self.$field,
                            &$crate::field::join(prefix, stringify!($field)),
                            &$crate::field::spec!(<$Fty as $crate::field::Field>::Out; $($default)?; $($min)?; $($max)?),
                            fallback.map(|f| &f.$field),
                            cx,
                        )?,
                    )*
                })
            }

            /// Appends `(dotted key, TOML literal)` for every field of `a`.
            pub fn emit(a: &$Arch, prefix: &str, sink: &mut Vec<(String, String)>) {
                $( <$Fty as $crate::field::Field>::emit(&a.$field, &$crate::field::join(prefix, stringify!($field)), sink); )*
            }

            /// The field `field` of `a` (`hit_latency`; `flops_per_clk_per_sm.bf16` for a table
            /// field) as a number in its kind's base unit.
            pub fn number(a: &$Arch, field: &str) -> Option<f64> {
                let (head, rest) = field.split_once('.').unwrap_or((field, ""));
                $(
                    if head == stringify!($field) {
                        return <$Fty as $crate::field::Field>::number(&a.$field, rest);
                    }
                )*
                None
            }

            /// Appends the metadata of every field.
            pub fn describe(prefix: &str, fallback: Option<&$Arch>, out: &mut Vec<$crate::introspect::ParamInfo>) {
                $(
                    <$Fty as $crate::field::Field>::describe(
                        &$crate::field::join(prefix, stringify!($field)),
                        concat!($($doc, "\n"),+),
                        $unit,
                        &$crate::field::spec!(<$Fty as $crate::field::Field>::Out; $($default)?; $($min)?; $($max)?),
                        fallback.map(|f| &f.$field),
                        out,
                    );
                )*
            }
        }

    };
}
pub(crate) use section;

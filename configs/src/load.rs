//! Loading: read a file or preset, follow `inherits` (deep merge, cycles rejected), check keys
//! and values, fill defaults, resolve into an [`Arch`] and run the cross-field rules.

use std::path::{Path, PathBuf};

use crate::arch::Arch;
use crate::error::{ConfigError, Source, nearest};
use crate::field::{Cx, Val};
use crate::keys::{KeySet, key_at, normalize};
use crate::presets;
use crate::schema::{RawConfig, params};
use crate::validate::validate;

/// Loads a chip from a TOML file (which may inherit from a preset or another file).
pub fn load_file(path: &Path) -> Result<Arch, ConfigError> {
    load_origin(Origin::File(path.to_path_buf()))
}

/// Loads a built-in preset by name (see [`crate::presets()`]).
pub fn load_preset(name: &str) -> Result<Arch, ConfigError> {
    let name = presets::names().into_iter().find(|n| n == name).ok_or_else(|| unknown_preset(name))?;
    load_origin(Origin::Preset(name))
}

/// Loads a preset by name, or else a file by path.
pub fn load(name_or_path: &str) -> Result<Arch, ConfigError> {
    if presets::text(name_or_path).is_some() {
        return load_preset(name_or_path);
    }
    let path = Path::new(name_or_path);
    let looks_like_path = name_or_path.contains('/') || name_or_path.contains('\\') || name_or_path.ends_with(".toml");
    if path.exists() || looks_like_path {
        return load_file(path);
    }
    Err(unknown_preset(name_or_path))
}

/// Loads a chip from TOML text; `name` names it in errors and is its name unless the text sets
/// one. A relative `inherits` path is taken relative to the current directory.
pub fn load_str(name: &str, text: &str) -> Result<Arch, ConfigError> {
    load_origin(Origin::Text { name: name.to_string(), text: text.to_string() })
}

impl Arch {
    /// This chip with one parameter set: `key` dotted as in a TOML file (`hbm.bandwidth`,
    /// `opcodes.DFMA.latency`, `tensor.flops_per_clk_per_sm.bf16`), `value` as a file would
    /// write it (`"3.35 TB/s"`, `132`). See [`Arch::with_overrides`].
    pub fn with_override(&self, key: &str, value: &toml::Value) -> Result<Arch, ConfigError> {
        self.with_overrides(&[(key, value.clone())])
    }

    /// [`Arch::with_override`] with the value in TOML syntax (`"3.35 TB/s"`, `132`, `2.5`); text
    /// that is not a TOML value is taken as a string (`3.35 TB/s`).
    pub fn with_override_str(&self, key: &str, value: &str) -> Result<Arch, ConfigError> {
        self.with_override(key, &override_value(value))
    }

    /// [`Arch::with_overrides`] with each value in TOML syntax, read as
    /// [`Arch::with_override_str`] reads one (what a sweep point is).
    pub fn with_overrides_str(&self, overrides: &[(&str, &str)]) -> Result<Arch, ConfigError> {
        self.override_base()?.apply_str(overrides)
    }

    /// This chip with several parameters set at once, through the loader: the overrides are
    /// parsed as a file of their own (keys checked against the schema, with the nearest valid
    /// key for an unknown one; values by the same unit parsing) merged over this chip's
    /// fully resolved form ([`crate::to_toml`]), resolved (range checks) and validated (the
    /// cross-field rules are checked once, on the result). Errors name the key.
    pub fn with_overrides(&self, overrides: &[(&str, toml::Value)]) -> Result<Arch, ConfigError> {
        self.override_base()?.apply(overrides)
    }

    /// This chip's fully resolved form, parsed once for many sets of overrides (a sweep's
    /// points): [`OverrideBase::apply`] is [`Arch::with_overrides`] without writing and parsing
    /// the whole chip again each time, which was half of `gpusim sweep --dry-run`.
    pub fn override_base(&self) -> Result<OverrideBase<'_>, ConfigError> {
        let raw = parse(&Source::new(self.name.clone(), crate::introspect::to_toml(self)), KeySet::get())?;
        Ok(OverrideBase { arch: self, raw })
    }

    /// The parameter `key` (dotted, as in a file) as a number in its kind's base unit
    /// ([`crate::ParamKind`]: bytes, cycles, picoseconds, Hz, B/s, B/clk); `None` for text,
    /// lists and unknown keys.
    pub fn value(&self, key: &str) -> Option<f64> {
        crate::schema::number(self, key)
    }
}

/// A chip ready for overrides ([`Arch::override_base`]).
pub struct OverrideBase<'a> {
    arch: &'a Arch,
    raw: RawConfig,
}

impl OverrideBase<'_> {
    /// [`Arch::with_overrides`] of the chip.
    pub fn apply(&self, overrides: &[(&str, toml::Value)]) -> Result<Arch, ConfigError> {
        let mut doc = toml::Table::new();
        for (key, value) in overrides {
            insert_dotted(&mut doc, key, value.clone())?;
        }
        let name = match overrides {
            [(key, _)] => format!("override of `{key}`"),
            _ => "overrides".to_string(),
        };
        let text = toml::to_string(&doc).map_err(|e| ConfigError::Syntax {
            at: crate::error::Loc { file: name.clone(), line: 0, col: 0 },
            message: e.to_string(),
        })?;
        let src = Source::new(name, text);
        let mut raw = parse(&src, KeySet::get())?;
        raw.merge_parent(self.raw.clone());
        let cx = Cx { file: &src.name, inherits: &[] };
        let arch = raw.resolve(&self.arch.name, &self.arch.description, &cx)?;
        validate_located(&arch, &raw)?;
        Ok(arch)
    }

    /// [`Arch::with_overrides_str`] of the chip.
    pub fn apply_str(&self, overrides: &[(&str, &str)]) -> Result<Arch, ConfigError> {
        let values: Vec<(&str, toml::Value)> = overrides.iter().map(|(k, v)| (*k, override_value(v))).collect();
        self.apply(&values)
    }
}

/// An override's text as a TOML value; text that is not one is a string (`3.35 TB/s`).
fn override_value(value: &str) -> toml::Value {
    toml::from_str::<toml::Table>(&format!("v = {value}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(value.trim().to_string()))
}

/// Sets `key` (dotted) in `doc`, creating the tables on the way.
fn insert_dotted(doc: &mut toml::Table, key: &str, value: toml::Value) -> Result<(), ConfigError> {
    let parts: Vec<&str> = key.split('.').collect();
    let (leaf, path) = parts.split_last().expect("split yields one part");
    let mut table = doc;
    for p in path {
        let entry = table.entry(p.to_string()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
        table = entry
            .as_table_mut()
            .ok_or_else(|| ConfigError::UnknownParam { name: key.to_string(), suggestion: None })?;
    }
    table.insert(leaf.to_string(), value);
    Ok(())
}

fn unknown_preset(name: &str) -> ConfigError {
    let known = presets::names();
    ConfigError::UnknownPreset {
        name: name.to_string(),
        suggestion: nearest(name, known.iter().map(String::as_str)),
        known,
    }
}

/// Where a configuration comes from.
enum Origin {
    Preset(String),
    File(PathBuf),
    Text { name: String, text: String },
}

/// A configuration's text with what loading needs to know about it.
struct Loaded {
    src: Source,
    /// Identity for cycle detection: `preset:<name>`, the canonical path, or `text:<name>`.
    id: String,
    /// The name an `Arch` gets when the file sets none.
    default_name: String,
    /// Directory that relative `inherits` paths start from; `None` for presets.
    dir: Option<PathBuf>,
}

fn read(origin: Origin) -> Result<Loaded, ConfigError> {
    match origin {
        Origin::Preset(name) => {
            let text = presets::text(&name).ok_or_else(|| unknown_preset(&name))?;
            Ok(Loaded {
                src: Source::new(presets::display_path(&name), text),
                id: format!("preset:{name}"),
                default_name: name,
                dir: None,
            })
        }
        Origin::File(path) => {
            let text = std::fs::read_to_string(&path)
                .map_err(|e| ConfigError::Io { path: path.display().to_string(), message: e.to_string() })?;
            let id = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone()).display().to_string();
            let default_name =
                path.file_stem().map_or_else(|| path.display().to_string(), |s| s.to_string_lossy().into_owned());
            Ok(Loaded {
                src: Source::new(path.display().to_string(), text),
                id,
                default_name,
                dir: Some(path.parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf)),
            })
        }
        Origin::Text { name, text } => Ok(Loaded {
            src: Source::new(name.clone(), text),
            id: format!("text:{name}"),
            default_name: name,
            dir: Some(PathBuf::from(".")),
        }),
    }
}

/// [`validate`], with a failed rule located at the first of its keys that `raw` set.
fn validate_located(arch: &Arch, raw: &RawConfig) -> Result<(), ConfigError> {
    validate(arch).map_err(|e| match e {
        ConfigError::Invalid { keys, message, at: None } => {
            let locs = raw.locs();
            let at = keys.iter().find_map(|k| locs.get(k).cloned());
            ConfigError::Invalid { keys, message, at }
        }
        e => e,
    })
}

fn load_origin(origin: Origin) -> Result<Arch, ConfigError> {
    let keys = KeySet::get();
    let mut stack = Vec::new();
    let (leaf, raw, inherits) = load_merged(origin, &mut stack, keys)?;
    let cx = Cx { file: &leaf.src.name, inherits: &inherits };
    let description = match &raw.inherits {
        Some(parent) => format!("Based on {}.", parent.v),
        None => String::new(),
    };
    let arch = raw.resolve(&leaf.default_name, &description, &cx)?;
    validate_located(&arch, &raw)?;
    Ok(arch)
}

/// Reads `origin` and everything it inherits from, merged; returns the leaf, the merged raw
/// configuration, and the names of the ancestors, nearest first.
fn load_merged(
    origin: Origin,
    stack: &mut Vec<(String, String)>,
    keys: &KeySet,
) -> Result<(Loaded, RawConfig, Vec<String>), ConfigError> {
    let loaded = read(origin)?;
    if let Some(i) = stack.iter().position(|(id, _)| *id == loaded.id) {
        let mut chain: Vec<String> = stack[i..].iter().map(|(_, name)| name.clone()).collect();
        chain.push(loaded.src.name.clone());
        return Err(ConfigError::InheritanceCycle { chain });
    }
    let mut raw = parse(&loaded.src, keys)?;
    let mut ancestors = Vec::new();
    if let Some(inherits) = raw.inherits.clone() {
        let parent = parent_origin(&inherits, &loaded)?;
        stack.push((loaded.id.clone(), loaded.src.name.clone()));
        let (parent_loaded, parent_raw, more) = load_merged(parent, stack, keys)?;
        stack.pop();
        ancestors.push(parent_loaded.src.name);
        ancestors.extend(more);
        raw.merge_parent(parent_raw);
    }
    Ok((loaded, raw, ancestors))
}

/// What an `inherits` value names: a preset, else a file relative to the inheriting one.
fn parent_origin(inherits: &Val<String>, child: &Loaded) -> Result<Origin, ConfigError> {
    let value = inherits.v.as_str();
    if presets::text(value).is_some() {
        return Ok(Origin::Preset(value.to_string()));
    }
    let not_found = |detail: String| {
        let list = presets::names().join(", ");
        let hint = nearest(value, presets::names().iter().map(String::as_str))
            .map(|s| format!("; did you mean `{s}`?"))
            .unwrap_or_default();
        ConfigError::BadValue {
            key: "inherits".into(),
            expected: "a preset name or the path of a TOML file relative to this one",
            found: value.to_string(),
            detail: format!("{detail}{hint}; presets: {list}"),
            at: inherits.at.clone().unwrap_or_else(|| child.src.loc(inherits.span.start)),
        }
    };
    match &child.dir {
        // A preset may inherit only from another preset (by name or as `<name>.toml`).
        None => match value.strip_suffix(".toml").filter(|stem| presets::text(stem).is_some()) {
            Some(stem) => Ok(Origin::Preset(stem.to_string())),
            None => Err(not_found("no preset of that name".into())),
        },
        Some(dir) => {
            let path = dir.join(value);
            if path.is_file() {
                Ok(Origin::File(path))
            } else {
                Err(not_found(format!("no preset of that name and no file at `{}`", path.display())))
            }
        }
    }
}

/// Parses one file: TOML syntax, then keys against the schema, then values by serde.
fn parse(src: &Source, keys: &KeySet) -> Result<RawConfig, ConfigError> {
    let doc = toml::de::DeTable::parse(&src.text).map_err(|e| ConfigError::Syntax {
        at: src.loc(e.span().map_or(0, |s| s.start)),
        message: e.message().trim().to_string(),
    })?;
    crate::keys::check(doc.get_ref(), src, keys)?;
    let mut raw: RawConfig = toml::from_str(&src.text).map_err(|e| value_error(src, doc.get_ref(), &e))?;
    raw.locate(src);
    Ok(raw)
}

/// A serde error as a [`ConfigError`] naming the key, what it expects, and where.
fn value_error(src: &Source, doc: &toml::de::DeTable<'_>, e: &toml::de::Error) -> ConfigError {
    let span = e.span().unwrap_or(0..0);
    let at = src.loc(span.start);
    let key = key_at(doc, span.start).unwrap_or_else(|| "(top level)".to_string());
    let message = e.message().trim().to_string();
    if message.starts_with("unknown field") {
        // Not reached when keys.rs knows the schema; kept so that no unknown key goes unnamed.
        return ConfigError::UnknownKey { key, at, suggestion: None };
    }
    let norm = normalize(&key);
    let expected = params().iter().find(|p| p.name == norm).map_or("a table of parameters", |p| p.expected);
    ConfigError::BadValue { key, expected, found: src.snippet(span), detail: message, at }
}

//! The keys of a parsed document: rejecting those the schema does not have (with the nearest
//! valid key as a suggestion), and finding which dotted key a byte position belongs to.

use std::collections::BTreeSet;
use std::ops::Range;

use toml::de::{DeTable, DeValue};

use crate::error::{ConfigError, Source, nearest};
use crate::field::join;
use crate::schema::{OPCODE_PLACEHOLDER, params};

/// The keys the schema allows: parameter names (leaves) and the tables that hold them.
/// `opcodes.<BASE>` stands for every base mnemonic of the ISA opcode table.
pub(crate) struct KeySet {
    leaves: BTreeSet<String>,
    tables: BTreeSet<String>,
}

impl KeySet {
    /// The schema's keys, built once per process: building them describes every parameter
    /// (formatting its documentation), which cost more than the rest of loading a chip file.
    pub fn get() -> &'static KeySet {
        static KEYS: std::sync::OnceLock<KeySet> = std::sync::OnceLock::new();
        KEYS.get_or_init(KeySet::new)
    }

    fn new() -> KeySet {
        let leaves: BTreeSet<String> = params().iter().map(|p| p.name.clone()).collect();
        let mut tables = BTreeSet::new();
        for l in &leaves {
            let mut at = 0;
            while let Some(i) = l[at..].find('.') {
                tables.insert(l[..at + i].to_string());
                at += i + 1;
            }
        }
        KeySet { leaves, tables }
    }

    /// Names (last segment) of the keys directly inside the table `norm_prefix`.
    fn children(&self, norm_prefix: &str) -> Vec<&str> {
        let strip = |k: &'_ String| -> Option<String> {
            let rest =
                if norm_prefix.is_empty() { Some(k.as_str()) } else { k.strip_prefix(&format!("{norm_prefix}.")) };
            rest.filter(|r| !r.contains('.')).map(str::to_string)
        };
        let mut names: Vec<&str> = Vec::new();
        for k in self.leaves.iter().chain(&self.tables) {
            if strip(k).is_some() {
                names.push(k.rsplit('.').next().unwrap_or(k));
            }
        }
        names
    }
}

/// Rejects the first key (in document order) that the schema does not have.
pub(crate) fn check(doc: &DeTable<'_>, src: &Source, keys: &KeySet) -> Result<(), ConfigError> {
    let mut unknown: Vec<(usize, String, Option<String>)> = Vec::new();
    walk(doc, "", "", keys, &mut unknown);
    match unknown.into_iter().min_by_key(|u| u.0) {
        None => Ok(()),
        Some((pos, key, suggestion)) => Err(ConfigError::UnknownKey { key, at: src.loc(pos), suggestion }),
    }
}

fn walk(
    table: &DeTable<'_>,
    real_prefix: &str,
    norm_prefix: &str,
    keys: &KeySet,
    unknown: &mut Vec<(usize, String, Option<String>)>,
) {
    for (k, v) in table.iter() {
        let name: &str = k.get_ref();
        let real = join(real_prefix, name);
        let norm = if norm_prefix == "opcodes" {
            if gpusim_isa::opcode::lookup(name).is_none() {
                let names = gpusim_isa::opcode::OPCODES.iter().map(|e| e.name);
                let suggestion = nearest(name, names).map(|n| join("opcodes", &n));
                unknown.push((k.span().start, real, suggestion));
                continue;
            }
            join(norm_prefix, OPCODE_PLACEHOLDER)
        } else {
            join(norm_prefix, name)
        };
        if keys.leaves.contains(&norm) {
            continue; // its type is serde's to check
        }
        if keys.tables.contains(&norm) {
            if let DeValue::Table(t) = v.get_ref() {
                walk(t, &real, &norm, keys, unknown);
            }
            continue;
        }
        let suggestion = nearest(name, keys.children(norm_prefix))
            .map(|s| join(real_prefix, &s))
            .or_else(|| nearest(&real, keys.leaves.iter().map(String::as_str)));
        unknown.push((k.span().start, real, suggestion));
    }
}

/// The dotted key whose key or value text contains byte `pos` (the deepest one).
pub(crate) fn key_at(doc: &DeTable<'_>, pos: usize) -> Option<String> {
    fn inside(span: Range<usize>, pos: usize) -> bool {
        span.start <= pos && pos < span.end.max(span.start + 1)
    }
    fn find(table: &DeTable<'_>, prefix: &str, pos: usize) -> Option<String> {
        for (k, v) in table.iter() {
            let key = join(prefix, k.get_ref());
            if let DeValue::Table(t) = v.get_ref()
                && let Some(found) = find(t, &key, pos)
            {
                return Some(found);
            }
            if inside(k.span(), pos) || inside(v.span(), pos) {
                return Some(key);
            }
        }
        None
    }
    find(doc, "", pos)
}

/// `opcodes.DFMA.latency` → `opcodes.<BASE>.latency`: the name its metadata is listed under.
pub(crate) fn normalize(key: &str) -> String {
    let parts: Vec<&str> = key.split('.').collect();
    if parts.len() >= 2 && parts[0] == "opcodes" {
        let mut p = parts.clone();
        p[1] = OPCODE_PLACEHOLDER;
        return p.join(".");
    }
    key.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unknown(text: &str) -> ConfigError {
        let src = Source::new("t.toml", text);
        let doc = DeTable::parse(text).unwrap();
        check(doc.get_ref(), &src, KeySet::get()).unwrap_err()
    }

    #[test]
    fn suggests_siblings_then_anything() {
        let e = unknown("[l2]\nsize = 1\nslice = 2\n");
        assert_eq!(e.to_string(), "unknown key `l2.slice` in t.toml:3:1; did you mean `l2.slices`?");
        let e = unknown("[l1]\nslices = 2\n");
        assert!(e.to_string().contains("did you mean `l2.slices`?"), "{e}");
        let e = unknown("[pipes.fp33]\nlatency = 4\n");
        assert!(e.to_string().contains("`pipes.fp33`") && e.to_string().contains("`pipes.fp32`"), "{e}");
        let e = unknown("[opcodes.DFAM]\nlatency = 4\n");
        assert!(e.to_string().contains("did you mean `opcodes.DFMA`?"), "{e}");
        let e = unknown("[tensor.flops_per_clk_per_sm]\nfp9 = 4\n");
        assert!(e.to_string().contains("`tensor.flops_per_clk_per_sm.fp9`"), "{e}");
        let e = unknown("a = 1\n[l2]\nsize = 1\n");
        assert!(matches!(e, ConfigError::UnknownKey { ref key, .. } if key == "a"), "{e}");
    }

    #[test]
    fn reports_the_first_unknown_key_in_the_file() {
        let e = unknown("[sm]\nzzz = 1\n[clocks]\naaa = 2\n");
        assert!(e.to_string().contains("`sm.zzz` in t.toml:2:1"), "{e}");
    }

    #[test]
    fn known_keys_pass() {
        let text = "compute_capability = \"9.0\"\n[opcodes.DFMA]\nlatency = 8\n[pipes.fp32]\nlatency = 4\n\
                    [tensor.flops_per_clk_per_sm]\nbf16 = 4096\n[l2]\nslices = 80\n";
        let src = Source::new("t.toml", text);
        let doc = DeTable::parse(text).unwrap();
        check(doc.get_ref(), &src, KeySet::get()).unwrap();
        let pos = text.find("80").unwrap();
        assert_eq!(key_at(doc.get_ref(), pos).as_deref(), Some("l2.slices"));
        let pos = text.find("8\n").unwrap();
        assert_eq!(key_at(doc.get_ref(), pos).as_deref(), Some("opcodes.DFMA.latency"));
    }
}

//! What can go wrong while loading a chip description, and where.
//!
//! Every error that comes from a file names the file, line and column ([`Loc`]) and the dotted
//! key (`l2.slices`) it is about; unknown names come with the nearest valid one.

use std::fmt;

/// A position in a configuration file: `next.toml:12:1` (1-based line and column).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Loc {
    /// The file as the user named it, or `configs/presets/<name>.toml` for a built-in preset.
    pub file: String,
    pub line: u32,
    /// Column in characters, not bytes.
    pub col: u32,
}

impl fmt::Display for Loc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.col)
    }
}

/// Why a configuration was rejected.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// A file could not be read.
    #[error("cannot read `{path}`: {message}")]
    Io { path: String, message: String },
    /// The text is not valid TOML.
    #[error("{at}: invalid TOML: {message}")]
    Syntax { at: Loc, message: String },
    /// A key the schema does not have.
    #[error("unknown key `{key}` in {at}{}", did_you_mean(suggestion))]
    UnknownKey { key: String, at: Loc, suggestion: Option<String> },
    /// A value of the wrong type or with a bad unit.
    #[error("`{key}`: expected {expected}, found `{found}` in {at} ({detail})")]
    BadValue { key: String, expected: &'static str, found: String, detail: String, at: Loc },
    /// A value outside the parameter's valid range.
    #[error("`{key}` = {value} in {at} is out of range: must be {range}")]
    OutOfRange { key: String, value: String, range: String, at: Loc },
    /// A parameter without a default that neither the file nor its ancestors set.
    #[error("missing required key `{key}`: set it in {file}{}", ancestors(inherits))]
    Missing {
        key: String,
        file: String,
        /// The files and presets the file inherits from, nearest first.
        inherits: Vec<String>,
    },
    /// `load_preset` or `inherits` named a preset that does not exist.
    #[error("unknown preset `{name}`{}; valid presets: {}", did_you_mean(suggestion), known.join(", "))]
    UnknownPreset { name: String, suggestion: Option<String>, known: Vec<String> },
    /// `explain` was asked about a parameter that does not exist.
    #[error("unknown parameter `{name}`{}", did_you_mean(suggestion))]
    UnknownParam { name: String, suggestion: Option<String> },
    /// A file inherits, directly or not, from itself.
    #[error("inheritance cycle: {}", chain.join(" → "))]
    InheritanceCycle {
        /// The chain that closes the cycle; its last element repeats an earlier one.
        chain: Vec<String>,
    },
    /// The parameters are each valid but together describe an impossible chip.
    #[error("impossible chip: {message} [{}]{}", keys.join(", "), at_suffix(at))]
    Invalid {
        /// Every parameter the rule involves.
        keys: Vec<String>,
        message: String,
        /// Where the first of `keys` was set, when it was set in a file (not a default).
        at: Option<Loc>,
    },
}

fn did_you_mean(s: &Option<String>) -> String {
    s.as_ref().map(|s| format!("; did you mean `{s}`?")).unwrap_or_default()
}

fn ancestors(v: &[String]) -> String {
    if v.is_empty() { String::new() } else { format!(" or in what it inherits from ({})", v.join(" → ")) }
}

fn at_suffix(at: &Option<Loc>) -> String {
    at.as_ref().map(|l| format!(" (set at {l})")).unwrap_or_default()
}

impl ConfigError {
    /// The dotted key the error is about, when it is about one.
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::UnknownKey { key, .. }
            | ConfigError::BadValue { key, .. }
            | ConfigError::OutOfRange { key, .. }
            | ConfigError::Missing { key, .. } => Some(key),
            ConfigError::Invalid { keys, .. } => keys.first().map(String::as_str),
            _ => None,
        }
    }

    /// Where in which file the error is, when it is in a file.
    pub fn loc(&self) -> Option<&Loc> {
        match self {
            ConfigError::Syntax { at, .. }
            | ConfigError::UnknownKey { at, .. }
            | ConfigError::BadValue { at, .. }
            | ConfigError::OutOfRange { at, .. } => Some(at),
            ConfigError::Invalid { at, .. } => at.as_ref(),
            _ => None,
        }
    }
}

/// The text of one configuration file and the name errors call it by.
#[derive(Clone, Debug)]
pub(crate) struct Source {
    pub name: String,
    pub text: String,
    /// Byte offset of each line's start (the first is 0): every value of a parsed file gets a
    /// location, and a scan from the top for each was quadratic in the file's length.
    line_starts: Vec<usize>,
}

impl Source {
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Source {
        let text = text.into();
        let line_starts = std::iter::once(0).chain(text.match_indices('\n').map(|(i, _)| i + 1)).collect();
        Source { name: name.into(), text, line_starts }
    }

    /// Line and column (1-based, in characters) of a byte offset.
    pub fn loc(&self, byte: usize) -> Loc {
        let byte = floor_char_boundary(&self.text, byte.min(self.text.len()));
        // The last line starting at or before `byte` (a newline at `byte` ends that line).
        let line = self.line_starts.partition_point(|&s| s <= byte);
        let line_start = self.line_starts[line - 1];
        let col = (self.text[line_start..byte].chars().count() + 1) as u32;
        Loc { file: self.name.clone(), line: line as u32, col }
    }

    /// The text of a span, for "found `...`" in messages (first line only, shortened).
    pub fn snippet(&self, span: std::ops::Range<usize>) -> String {
        let start = floor_char_boundary(&self.text, span.start.min(self.text.len()));
        let end = floor_char_boundary(&self.text, span.end.min(self.text.len())).max(start);
        let s = self.text[start..end].lines().next().unwrap_or("").trim();
        if s.chars().count() > 60 { format!("{}…", s.chars().take(60).collect::<String>()) } else { s.to_string() }
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The candidate nearest to `word`, if any is near enough to be what the user meant.
///
/// A candidate that `word` begins (a name typed short: `h100-sxm`, `clocks.mem`) wins, the
/// shortest such; otherwise the fewest edits, ties broken by Jaro-Winkler similarity.
pub(crate) fn nearest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let mut best: Option<(bool, f64, &str)> = None;
    for c in candidates {
        let lev = strsim::levenshtein(word, c);
        let jw = strsim::jaro_winkler(word, c);
        let prefix = !word.is_empty() && c.starts_with(word);
        if !(prefix || lev <= 2.max(word.chars().count() / 4) || jw >= 0.85) {
            continue;
        }
        let score = if prefix { c.len() as f64 } else { lev as f64 - jw };
        let better = match best {
            None => true,
            Some((bp, bs, _)) => (prefix && !bp) || (prefix == bp && score < bs),
        };
        if better {
            best = Some((prefix, score, c));
        }
    }
    best.map(|(_, _, c)| c.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_count_lines_and_characters() {
        let s = Source::new("x.toml", "a = 1\n[l2]\nµ = 3\n");
        assert_eq!(s.loc(0).to_string(), "x.toml:1:1");
        assert_eq!(s.loc(6).to_string(), "x.toml:2:1");
        let mu = s.text.find('=').unwrap();
        assert_eq!(s.loc(s.text[mu + 1..].find('=').unwrap() + mu + 1).to_string(), "x.toml:3:3");
    }

    /// The line index answers as counting newlines from the top did, at every byte (within a
    /// multi-byte character, on a newline, past the end).
    #[test]
    fn locations_match_a_scan_from_the_top() {
        let text = "a = 1\n\n[l2] # µs\nµ = \"ü\"\nlast";
        let s = Source::new("x.toml", text);
        for byte in 0..text.len() + 3 {
            let b = floor_char_boundary(text, byte.min(text.len()));
            let before = &text[..b];
            let start = before.rfind('\n').map_or(0, |i| i + 1);
            let (line, col) = (before.matches('\n').count() + 1, before[start..].chars().count() + 1);
            let at = s.loc(byte);
            assert_eq!((at.line as usize, at.col as usize), (line, col), "byte {byte}");
        }
    }

    #[test]
    fn nearest_finds_typos() {
        let keys = ["l2.slices", "l2.size", "l2.assoc"];
        assert_eq!(nearest("l2.slice", keys).as_deref(), Some("l2.slices"));
        assert_eq!(nearest("l2.sise", keys).as_deref(), Some("l2.size"));
        assert_eq!(nearest("frobnicate", keys), None);
        assert_eq!(nearest("h100", ["a100-sxm4-80gb", "h100-sxm5-80gb"]).as_deref(), Some("h100-sxm5-80gb"));
    }
}

//! Matching a kernel name as a profiler shows it (demangled, with parameters and templates)
//! against the name a trace records (often mangled): [`name_match`] ranks how well two names
//! agree.

/// How well a measured kernel name matches a trace's kernel name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum NameMatch {
    None,
    /// The same function (namespaces, name), template arguments not compared: a demangled
    /// name against a mangled one (`vecAdd(float const*, ...)` ~ `_Z6vecAddPKfS0_Pfi`), or an
    /// unqualified name against a qualified one (`Kernel2` ~ `cutlass::Kernel2<...>(Params)`).
    BaseName,
    /// The same function and template arguments; return type and parameters not compared.
    Signature,
    /// The same text, whitespace aside.
    Exact,
    /// Chosen by `trace_kernel`, not by name.
    ByIndex,
}

impl NameMatch {
    pub fn as_str(self) -> &'static str {
        match self {
            NameMatch::None => "no match",
            NameMatch::BaseName => "base name",
            NameMatch::Signature => "signature",
            NameMatch::Exact => "exact name",
            NameMatch::ByIndex => "trace_kernel index",
        }
    }
}

fn squeeze(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

/// `s` without a trailing balanced `(...)` (a parameter list).
fn strip_params(s: &str) -> &str {
    let s = s.trim_end();
    if !s.ends_with(')') {
        return s;
    }
    let mut depth = 0i32;
    for (i, c) in s.char_indices().rev() {
        match c {
            ')' => depth += 1,
            '(' => {
                depth -= 1;
                if depth == 0 {
                    return s[..i].trim_end();
                }
            }
            _ => {}
        }
    }
    s
}

/// `s` after its last space outside `<>`/`()` (drops a return type).
fn strip_return_type(s: &str) -> &str {
    let mut depth = 0i32;
    let mut cut = 0;
    for (i, c) in s.char_indices() {
        match c {
            '<' | '(' => depth += 1,
            '>' | ')' => depth -= 1,
            ' ' if depth == 0 => cut = i + 1,
            _ => {}
        }
    }
    &s[cut..]
}

/// `s` without `<...>` template argument lists.
fn strip_templates(s: &str) -> String {
    let mut depth = 0i32;
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => depth += 1,
            '>' => depth = (depth - 1).max(0),
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

const ANON: &str = "{anon}";

/// The qualified name of a demangled (or plain) kernel name, with template arguments.
fn demangled_signature(name: &str) -> String {
    let s = name.replace("(anonymous namespace)", ANON);
    squeeze(strip_return_type(strip_params(&s)))
}

fn demangled_components(name: &str) -> Vec<String> {
    let sig = demangled_signature(name);
    strip_templates(&sig).split("::").filter(|c| !c.is_empty()).map(str::to_string).collect()
}

/// The name components of an Itanium-mangled name (`_ZN7cutlass7Kernel2I...EEvT_` →
/// `cutlass`, `Kernel2`), up to its template arguments; `None` when it is not one this reads.
fn mangled_components(name: &str) -> Option<Vec<String>> {
    let b = name.as_bytes();
    let mut i = 2;
    if !name.starts_with("_Z") {
        return None;
    }
    if b.get(i) == Some(&b'L') {
        i += 1;
    }
    let source_name = |i: &mut usize| -> Option<String> {
        let start = *i;
        while b.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        let len: usize = name.get(start..*i)?.parse().ok()?;
        let id = name.get(*i..*i + len)?;
        *i += len;
        Some(if id.starts_with("_GLOBAL__N") { ANON.to_string() } else { id.to_string() })
    };
    let mut out = Vec::new();
    if b.get(i) == Some(&b'N') {
        i += 1;
        while matches!(b.get(i), Some(b'r' | b'V' | b'K' | b'R' | b'O')) {
            i += 1;
        }
        loop {
            match b.get(i) {
                Some(b'S') if b.get(i + 1) == Some(&b't') => {
                    out.push("std".to_string());
                    i += 2;
                }
                Some(c) if c.is_ascii_digit() => out.push(source_name(&mut i)?),
                _ => break,
            }
        }
    } else {
        if name.get(i..i + 2) == Some("St") {
            out.push("std".to_string());
            i += 2;
        }
        out.push(source_name(&mut i)?);
    }
    (!out.is_empty()).then_some(out)
}

fn components(name: &str) -> Vec<String> {
    mangled_components(name).unwrap_or_else(|| demangled_components(name))
}

/// How well `measured` (a kernel name as ncu prints it, demangled by default) matches
/// `traced` (a trace's kernel name: mangled in Accel-Sim traces, anything in gpusim traces).
pub fn name_match(measured: &str, traced: &str) -> NameMatch {
    if squeeze(measured) == squeeze(traced) {
        return NameMatch::Exact;
    }
    let mangled = measured.starts_with("_Z") || traced.starts_with("_Z");
    if !mangled && demangled_signature(measured) == demangled_signature(traced) {
        return NameMatch::Signature;
    }
    let (a, b) = (components(measured), components(traced));
    let (short, long) = if a.len() <= b.len() { (&a, &b) } else { (&b, &a) };
    if !short.is_empty() && long.ends_with(short) {
        return NameMatch::BaseName;
    }
    NameMatch::None
}

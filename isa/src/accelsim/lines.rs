//! Line reading with positions, whitespace tokens with byte offsets, number parsing, and error
//! construction for the Accel-Sim text formats.

use std::io::{BufRead, Read};

use crate::diag::Diagnostic;
use crate::error::{Location, TraceError, TraceErrorKind};

/// Longest line accepted (a mode-0 address list of 32 lanes is about 600 characters).
pub(super) const MAX_LINE: usize = 1 << 20;

/// Reads a text input one line at a time, in bounded memory, counting lines from 1.
pub(super) struct LineReader<R> {
    inner: R,
    file: String,
    text: String,
    line: u64,
    replay: bool,
    eof: bool,
}

impl<R: BufRead> LineReader<R> {
    pub(super) fn new(inner: R, file: String) -> Self {
        LineReader { inner, file, text: String::new(), line: 0, replay: false, eof: false }
    }

    /// Moves to the next line (or re-delivers the current one after [`LineReader::unread`]).
    /// `Ok(false)` at the end of the input. The line end (`\n` or `\r\n`) is removed.
    pub(super) fn advance(&mut self) -> Result<bool, TraceError> {
        if self.replay {
            self.replay = false;
            return Ok(true);
        }
        if self.eof {
            return Ok(false);
        }
        let mut bytes = std::mem::take(&mut self.text).into_bytes();
        bytes.clear();
        let n = (&mut self.inner).take(MAX_LINE as u64 + 1).read_until(b'\n', &mut bytes).map_err(|e| {
            TraceError::new(TraceErrorKind::Io, self.location(self.line + 1, 0), format!("read error: {e}"))
        })?;
        if n == 0 {
            self.eof = true;
            return Ok(false);
        }
        self.line += 1;
        if bytes.last() == Some(&b'\n') {
            bytes.pop();
        } else if bytes.len() > MAX_LINE {
            return Err(TraceError::new(
                TraceErrorKind::Syntax,
                self.location(self.line, 1),
                format!("line is longer than {MAX_LINE} bytes"),
            ));
        }
        if bytes.last() == Some(&b'\r') {
            bytes.pop();
        }
        match String::from_utf8(bytes) {
            Ok(s) => {
                self.text = s;
                Ok(true)
            }
            Err(e) => {
                let good = e.utf8_error().valid_up_to();
                let bytes = e.into_bytes();
                let col = String::from_utf8_lossy(&bytes[..good]).chars().count() as u64 + 1;
                Err(TraceError::new(TraceErrorKind::Syntax, self.location(self.line, col), "line is not UTF-8 text"))
            }
        }
    }

    /// Makes the next [`LineReader::advance`] deliver the current line again.
    pub(super) fn unread(&mut self) {
        self.replay = true;
    }

    /// The current line, without its line end.
    #[cfg(test)]
    pub(super) fn text(&self) -> &str {
        &self.text
    }

    /// 1-based number of the current line (0 before the first).
    pub(super) fn line(&self) -> u64 {
        self.line
    }

    pub(super) fn file(&self) -> &str {
        &self.file
    }

    /// The current line as a position for errors.
    pub(super) fn at(&self) -> At<'_> {
        At { file: &self.file, line: self.line, text: &self.text }
    }

    pub(super) fn location(&self, line: u64, col: u64) -> Location {
        Location { file: self.file.clone(), line, col }
    }

    /// Where the input ended: the line after the last one, column 1.
    pub(super) fn eof_location(&self) -> Location {
        self.location(self.line + 1, 1)
    }
}

/// A line being parsed: builds errors and diagnostics that point into it.
#[derive(Clone, Copy)]
pub(super) struct At<'a> {
    pub file: &'a str,
    pub line: u64,
    pub text: &'a str,
}

impl At<'_> {
    /// The location of byte offset `off` of the line (reported as a 1-based character column).
    pub(super) fn loc(&self, off: usize) -> Location {
        let col = match self.text.get(..off) {
            Some(p) => p.chars().count(),
            None => self.text.chars().count(),
        } as u64
            + 1;
        Location { file: self.file.to_string(), line: self.line, col }
    }

    pub(super) fn err(&self, kind: TraceErrorKind, off: usize, msg: impl Into<String>) -> TraceError {
        TraceError::new(kind, self.loc(off), msg)
    }

    pub(super) fn syntax(&self, off: usize, msg: impl Into<String>) -> TraceError {
        self.err(TraceErrorKind::Syntax, off, msg)
    }
}

/// Whitespace-separated tokens of a line with their byte offsets.
pub(super) struct Tokens<'a> {
    s: &'a str,
    pos: usize,
}

impl<'a> Tokens<'a> {
    pub(super) fn new(s: &'a str) -> Self {
        Tokens { s, pos: 0 }
    }

    /// The next token and its byte offset. Tokens are separated by Unicode whitespace; the
    /// common all-ASCII line is scanned byte by byte, anything else by characters.
    #[inline]
    pub(super) fn next_tok(&mut self) -> Option<(usize, &'a str)> {
        let b = self.s.as_bytes();
        let mut i = self.pos;
        while i < b.len() && ascii_space(b[i]) {
            i += 1;
        }
        if i == b.len() {
            self.pos = i;
            return None;
        }
        let start = i;
        while i < b.len() && !ascii_space(b[i]) {
            if b[i] >= 0x80 {
                return self.next_tok_unicode();
            }
            i += 1;
        }
        self.pos = i;
        Some((start, &self.s[start..i]))
    }

    /// [`Tokens::next_tok`] by characters, for a token that holds or meets non-ASCII text.
    #[cold]
    fn next_tok_unicode(&mut self) -> Option<(usize, &'a str)> {
        let rest = &self.s[self.pos..];
        let skip = rest.len() - rest.trim_start().len();
        let start = self.pos + skip;
        if start >= self.s.len() {
            self.pos = self.s.len();
            return None;
        }
        let tail = &self.s[start..];
        let len = tail.find(char::is_whitespace).unwrap_or(tail.len());
        self.pos = start + len;
        Some((start, &tail[..len]))
    }

    /// Byte offset just past the end of the line.
    pub(super) fn end(&self) -> usize {
        self.s.len()
    }
}

/// Whether `b` is an ASCII character that `char::is_whitespace` accepts (U+0009 to U+000D and
/// the space; `u8::is_ascii_whitespace` leaves out U+000B).
#[inline]
fn ascii_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t'..=b'\r')
}

/// Hexadecimal with an optional `0x` prefix, 1 to 16 digits.
#[inline]
pub(super) fn parse_hex_u64(t: &str) -> Option<u64> {
    let d = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")).unwrap_or(t).as_bytes();
    if d.is_empty() || d.len() > 16 {
        return None;
    }
    let mut v = 0u64;
    for &c in d {
        let x = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            _ => return None,
        };
        v = (v << 4) | x as u64;
    }
    Some(v)
}

/// Hexadecimal that must fit 32 bits.
#[inline]
pub(super) fn parse_hex_u32(t: &str) -> Option<u32> {
    parse_hex_u64(t).and_then(|v| u32::try_from(v).ok())
}

/// The value of ASCII decimal digits, `None` when empty, another byte appears, or it overflows.
#[inline]
fn digits_u64(d: &[u8]) -> Option<u64> {
    if d.is_empty() {
        return None;
    }
    let mut v = 0u64;
    for &c in d {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    Some(v)
}

/// Unsigned decimal digits only.
#[inline]
pub(super) fn parse_dec_u64(t: &str) -> Option<u64> {
    digits_u64(t.as_bytes())
}

/// Signed decimal (`-12`, `+3`, `7`).
#[inline]
pub(super) fn parse_dec_i64(t: &str) -> Option<i64> {
    let b = t.as_bytes();
    let (neg, d) = match b.first() {
        Some(b'-') => (true, &b[1..]),
        Some(b'+') => (false, &b[1..]),
        _ => (false, b),
    };
    let v = digits_u64(d)?;
    if neg { 0i64.checked_sub_unsigned(v) } else { i64::try_from(v).ok() }
}

/// Splits `key = value` at the first `=`: the key with its inner whitespace collapsed to single
/// spaces, and the value (trimmed) with its byte offset in `text`.
pub(super) fn key_value(text: &str) -> Option<(String, &str, usize)> {
    let eq = text.find('=')?;
    let key = text[..eq].split_whitespace().collect::<Vec<_>>().join(" ");
    let raw = &text[eq + 1..];
    let value = raw.trim();
    let off = eq + 1 + (raw.len() - raw.trim_start().len());
    Some((key, value, off))
}

/// Parses `x,y,z` or `(x,y,z)` (spaces allowed) starting at byte `off` of the line.
pub(super) fn parse_triple(at: &At, value: &str, off: usize, what: &str) -> Result<[u32; 3], TraceError> {
    let inner = value.strip_prefix('(').map(|v| v.strip_suffix(')').unwrap_or(v)).unwrap_or(value);
    let mut base = off + (value.len() - value.trim_start_matches('(').len());
    let mut out = [0u32; 3];
    let mut n = 0;
    for part in inner.split(',') {
        let t = part.trim();
        let p_off = base + (part.len() - part.trim_start().len());
        if n == 3 {
            return Err(at.syntax(p_off, format!("{what}: more than three components in `{value}`")));
        }
        out[n] = parse_dec_u64(t)
            .and_then(|v| u32::try_from(v).ok())
            .ok_or_else(|| at.syntax(p_off, format!("{what}: bad number `{t}` (expected x,y,z)")))?;
        n += 1;
        base += part.len() + 1;
    }
    if n != 3 {
        return Err(at.syntax(off, format!("{what}: expected three components x,y,z, found `{value}`")));
    }
    Ok(out)
}

/// Collects warnings with a cap, so that a file of a million odd lines stays bounded.
#[derive(Default)]
pub(super) struct DiagSink {
    pub list: Vec<Diagnostic>,
    pub suppressed: u64,
}

/// Warnings kept per input file; further ones are counted in one summary line.
pub(super) const DIAG_CAP: usize = 100;

impl DiagSink {
    pub(super) fn push(&mut self, code: &'static str, at: Location, message: impl Into<String>) {
        if self.list.len() < DIAG_CAP {
            self.list.push(Diagnostic { code, at, message: message.into() });
        } else {
            self.suppressed += 1;
        }
    }

    /// Adds the summary of suppressed warnings (if any) and resets the count.
    pub(super) fn finish(&mut self, code: &'static str, file: &str) {
        if self.suppressed > 0 {
            let n = std::mem::take(&mut self.suppressed);
            self.list.push(Diagnostic {
                code,
                at: Location { file: file.to_string(), line: 0, col: 0 },
                message: format!("{n} more ignored lines not listed"),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_and_offsets() {
        let mut t = Tokens::new("  ab\tcd  e ");
        assert_eq!(t.next_tok(), Some((2, "ab")));
        assert_eq!(t.next_tok(), Some((5, "cd")));
        assert_eq!(t.next_tok(), Some((9, "e")));
        assert_eq!(t.next_tok(), None);
        assert_eq!(t.next_tok(), None);
        // Non-ASCII: whitespace by Unicode's rules, offsets in bytes, as before the fast path.
        let mut t = Tokens::new("a\u{a0}b\u{2003} é\u{b}c");
        assert_eq!(t.next_tok(), Some((0, "a")));
        assert_eq!(t.next_tok(), Some((3, "b")));
        assert_eq!(t.next_tok(), Some((8, "é")));
        assert_eq!(t.next_tok(), Some((11, "c")));
        assert_eq!(t.next_tok(), None);
    }

    #[test]
    fn numbers() {
        assert_eq!(parse_hex_u64("0x7f00"), Some(0x7f00));
        assert_eq!(parse_hex_u64("ffffffff"), Some(0xffff_ffff));
        assert_eq!(parse_hex_u64("0x"), None);
        assert_eq!(parse_hex_u64("12g"), None);
        assert_eq!(parse_hex_u64("+12"), None);
        assert_eq!(parse_hex_u64("00000000000000001"), None);
        assert_eq!(parse_hex_u32("100000000"), None);
        assert_eq!(parse_dec_i64("-8"), Some(-8));
        assert_eq!(parse_dec_i64("-"), None);
        assert_eq!(parse_dec_u64("+1"), None);
        assert_eq!(parse_dec_u64("99999999999999999999999"), None);
        assert_eq!(parse_dec_u64("18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_dec_u64("18446744073709551616"), None);
        assert_eq!(parse_dec_i64("-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_dec_i64("9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_dec_i64("9223372036854775808"), None);
        assert_eq!(parse_dec_i64("-9223372036854775809"), None);
        assert_eq!(parse_dec_i64("+"), None);
        assert_eq!(parse_hex_u64("0xFFFFffffFFFFffff"), Some(u64::MAX));
        assert_eq!(parse_hex_u64("0x0x1"), None);
    }

    #[test]
    fn triples_and_key_values() {
        let text = "-grid dim = (4, 2,1)";
        let (k, v, off) = key_value(text).unwrap();
        assert_eq!((k.as_str(), v), ("-grid dim", "(4, 2,1)"));
        let at = At { file: "f", line: 1, text };
        assert_eq!(parse_triple(&at, v, off, "grid").unwrap(), [4, 2, 1]);
        let text = "thread block = 1,x,0";
        let (_, v, off) = key_value(text).unwrap();
        let at = At { file: "f", line: 3, text };
        let e = parse_triple(&at, v, off, "thread block").unwrap_err();
        assert_eq!((e.at.line, e.at.col), (3, 18));
        let e = parse_triple(&at, "1,2", 0, "t").unwrap_err();
        assert_eq!(e.kind, TraceErrorKind::Syntax);
        assert!(parse_triple(&at, "1,2,3,4", 0, "t").is_err());
    }

    #[test]
    fn line_reader_handles_crlf_and_unread() {
        let mut r = LineReader::new(&b"a\r\nb\n\nc"[..], "f".into());
        assert!(r.advance().unwrap());
        assert_eq!((r.text(), r.line()), ("a", 1));
        r.unread();
        assert!(r.advance().unwrap());
        assert_eq!((r.text(), r.line()), ("a", 1));
        assert!(r.advance().unwrap());
        assert_eq!(r.text(), "b");
        assert!(r.advance().unwrap());
        assert_eq!(r.text(), "");
        assert!(r.advance().unwrap());
        assert_eq!((r.text(), r.line()), ("c", 4));
        assert!(!r.advance().unwrap());
        assert_eq!(r.eof_location().line, 5);
        let mut r = LineReader::new(&b"ok\n\xff\xfe\n"[..], "f".into());
        assert!(r.advance().unwrap());
        let e = r.advance().unwrap_err();
        assert_eq!((e.kind, e.at.line, e.at.col), (TraceErrorKind::Syntax, 2, 1));
    }
}

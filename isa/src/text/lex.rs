//! Lines to tokens, numbers, address expressions: the lexical layer of the text format.

use crate::program::{AddrExpr, Var};

/// One token of a line. Quoted tokens carry their unescaped text; bare tokens are a byte range
/// of the line.
#[derive(Debug)]
pub(crate) struct Tok {
    pub start: usize,
    pub end: usize,
    /// 1-based column (in characters) of the token's first character.
    pub col: u64,
    pub quoted: Option<String>,
}

/// A lexical error: 1-based column and message.
pub(crate) type LexError = (u64, String);

/// Splits a line into tokens. Whitespace separates tokens; `#` outside quotes starts a comment;
/// `"..."` is a quoted token (escapes `\"`, `\\`, `\n`, `\r`, `\t`, `\u{HEX}`); inside a bare
/// token, `[` ... `]` groups text that may contain whitespace (`lanes=[0, 4, 8]`).
pub(crate) fn tokenize(line: &str, toks: &mut Vec<Tok>) -> Result<(), LexError> {
    toks.clear();
    let mut it = line.char_indices().peekable();
    let mut col = 0u64;
    while let Some(&(i, c)) = it.peek() {
        if c.is_whitespace() {
            it.next();
            col += 1;
            continue;
        }
        if c == '#' {
            break;
        }
        let tok_col = col + 1;
        if c == '"' {
            it.next();
            col += 1;
            let mut s = String::new();
            loop {
                let Some((_, c)) = it.next() else {
                    return Err((tok_col, "unterminated quoted string".into()));
                };
                col += 1;
                match c {
                    '"' => break,
                    '\\' => {
                        let Some((_, e)) = it.next() else {
                            return Err((tok_col, "unterminated quoted string".into()));
                        };
                        col += 1;
                        match e {
                            '"' => s.push('"'),
                            '\\' => s.push('\\'),
                            'n' => s.push('\n'),
                            'r' => s.push('\r'),
                            't' => s.push('\t'),
                            'u' => {
                                let esc_col = col - 1;
                                let bad = || (esc_col, "bad `\\u{...}` escape".to_string());
                                if it.next().map(|x| x.1) != Some('{') {
                                    return Err(bad());
                                }
                                col += 1;
                                let mut hex = String::new();
                                loop {
                                    let Some((_, h)) = it.next() else { return Err(bad()) };
                                    col += 1;
                                    if h == '}' {
                                        break;
                                    }
                                    if hex.len() >= 6 {
                                        return Err(bad());
                                    }
                                    hex.push(h);
                                }
                                let ch = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32).ok_or_else(bad)?;
                                s.push(ch);
                            }
                            other => return Err((col - 1, format!("unknown escape `\\{other}` in quoted string"))),
                        }
                    }
                    c => s.push(c),
                }
            }
            if let Some(&(_, n)) = it.peek()
                && !n.is_whitespace()
                && n != '#'
            {
                return Err((col + 1, "expected whitespace after a quoted string".into()));
            }
            let end = it.peek().map_or(line.len(), |x| x.0);
            toks.push(Tok { start: i, end, col: tok_col, quoted: Some(s) });
            continue;
        }
        // Bare token.
        let mut end = line.len();
        let mut bracket: Option<u64> = None;
        while let Some(&(j, c)) = it.peek() {
            if bracket.is_none() && (c.is_whitespace() || c == '#') {
                end = j;
                break;
            }
            match c {
                '"' => return Err((col + 1, "unexpected `\"` inside a token".into())),
                '[' if bracket.is_none() => bracket = Some(col + 1),
                ']' if bracket.is_some() => bracket = None,
                _ => {}
            }
            it.next();
            col += 1;
        }
        if let Some(b) = bracket {
            return Err((b, "`[` is never closed on this line".into()));
        }
        toks.push(Tok { start: i, end, col: tok_col, quoted: None });
    }
    Ok(())
}

/// An unsigned integer: decimal digits, or `0x`/`0X` and hex digits.
pub(crate) fn parse_u64(s: &str) -> Option<u64> {
    let (digits, radix) = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => (h, 16),
        None => (s, 10),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

pub(crate) fn parse_u32(s: &str) -> Option<u32> {
    parse_u64(s).and_then(|v| u32::try_from(v).ok())
}

/// An optionally signed integer as (negative, magnitude).
fn parse_signed(s: &str) -> Option<(bool, u64)> {
    match s.as_bytes().first()? {
        b'-' => parse_u64(&s[1..]).map(|m| (true, m)),
        b'+' => parse_u64(&s[1..]).map(|m| (false, m)),
        _ => parse_u64(s).map(|m| (false, m)),
    }
}

pub(crate) fn parse_i64(s: &str) -> Option<i64> {
    let (neg, m) = parse_signed(s)?;
    if neg {
        if m <= i64::MAX as u64 + 1 { Some((m as i64).wrapping_neg()) } else { None }
    } else {
        i64::try_from(m).ok()
    }
}

pub(crate) fn parse_i32(s: &str) -> Option<i32> {
    parse_i64(s).and_then(|v| i32::try_from(v).ok())
}

/// Parses an address expression: terms joined by `+` or `-` (an optional sign may lead), each
/// an integer, `INT*VAR`, `VAR*INT` or `VAR`. Arithmetic is modulo 2^64. Errors give the
/// character offset within `s` and a message.
pub(crate) fn parse_expr(s: &str) -> Result<AddrExpr, (usize, String)> {
    let mut e = AddrExpr::default();
    let b = s.as_bytes();
    let mut i = 0usize;
    let mut neg = false;
    if let Some(&c) = b.first()
        && (c == b'+' || c == b'-')
    {
        neg = c == b'-';
        i = 1;
    }
    loop {
        let j = b[i..].iter().position(|&c| c == b'+' || c == b'-').map_or(b.len(), |p| i + p);
        let term = &s[i..j];
        let at = s[..i].chars().count();
        if term.is_empty() {
            return Err((at, "empty term in address expression".into()));
        }
        let num =
            |t: &str, off: usize| parse_u64(t).ok_or_else(|| (off, format!("bad number `{t}` in address expression")));
        let var = |t: &str, off: usize| {
            Var::from_name(t).ok_or_else(|| {
                (off, format!("unknown variable `{t}` (expected cta.x, cta.y, cta.z, warp, i0, i1, i2 or i3)"))
            })
        };
        let starts_var = |t: &str| t.starts_with(|c: char| c.is_ascii_alphabetic());
        let (coef, v) = if let Some((l, r)) = term.split_once('*') {
            let r_off = at + l.chars().count() + 1;
            if starts_var(l) {
                let v = var(l, at)?;
                (num(r, r_off)?, Some(v))
            } else {
                (num(l, at)?, Some(var(r, r_off)?))
            }
        } else if starts_var(term) {
            (1, Some(var(term, at)?))
        } else {
            (num(term, at)?, None)
        };
        let coef = if neg { coef.wrapping_neg() } else { coef };
        match v {
            Some(v) => e.coef[v.index()] = e.coef[v.index()].wrapping_add(coef as i64),
            None => e.base = e.base.wrapping_add(coef),
        }
        if j >= b.len() {
            break;
        }
        neg = b[j] == b'-';
        i = j + 1;
        if i >= b.len() {
            return Err((s[..j].chars().count(), "address expression ends with a sign".into()));
        }
    }
    Ok(e)
}

/// Formats an address expression: the base in hex, then each non-zero coefficient in variable
/// order as `+C*var` or `-C*var`.
pub(crate) fn format_expr(e: &AddrExpr, out: &mut String) {
    use std::fmt::Write;
    let _ = write!(out, "{:#x}", e.base);
    for v in Var::ALL {
        let c = e.coef[v.index()];
        if c != 0 {
            let sign = if c < 0 { '-' } else { '+' };
            let _ = write!(out, "{sign}{}*{}", c.unsigned_abs(), v.name());
        }
    }
}

/// Whether `s` can be written as a bare token in any position (names, opcodes).
pub(crate) fn is_bare(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with(['@', '%'])
        && !["loop", "end", "program", "warps", "cta", "kernel", "table", "param"].contains(&s)
        && s.chars().all(|c| !c.is_whitespace() && !c.is_control() && !matches!(c, '"' | '#' | '\\' | '[' | ']'))
}

/// Writes `s` as a token: bare when possible, else quoted with escapes.
pub(crate) fn write_token(s: &str, out: &mut String) {
    if is_bare(s) {
        out.push_str(s);
        return;
    }
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                use std::fmt::Write;
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(line: &str) -> Vec<(String, u64)> {
        let mut t = Vec::new();
        tokenize(line, &mut t).unwrap();
        t.iter().map(|t| (t.quoted.clone().unwrap_or_else(|| line[t.start..t.end].to_string()), t.col)).collect()
    }

    #[test]
    fn tokenizes_quotes_comments_and_brackets() {
        assert_eq!(
            texts(r#"  kernel "a \"b\" # c" # comment"#),
            vec![("kernel".into(), 3), (r#"a "b" # c"#.into(), 10)]
        );
        assert_eq!(
            texts("LDS R1 lanes=[0, 4,\t8] x"),
            vec![("LDS".into(), 1), ("R1".into(), 5), ("lanes=[0, 4,\t8]".into(), 8), ("x".into(), 24)]
        );
        assert_eq!(texts("é \"\\u{e9}\\n\""), vec![("é".into(), 1), ("é\n".into(), 3)]);
        let mut t = Vec::new();
        assert_eq!(tokenize("a \"bc", &mut t).unwrap_err().0, 3);
        assert_eq!(tokenize("a b\"c", &mut t).unwrap_err().0, 4);
        assert_eq!(tokenize("x=[1, 2", &mut t).unwrap_err().0, 3);
        assert_eq!(tokenize("\"a\"b", &mut t).unwrap_err().0, 4);
        assert_eq!(tokenize("\"\\q\"", &mut t).unwrap_err().0, 2);
    }

    #[test]
    fn parses_numbers() {
        assert_eq!(parse_u64("0x10"), Some(16));
        assert_eq!(parse_u64("18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64("18446744073709551616"), None);
        assert_eq!(parse_u64("+1"), None);
        assert_eq!(parse_u64("0x"), None);
        assert_eq!(parse_i64("-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64("-0x10"), Some(-16));
        assert_eq!(parse_i64("9223372036854775808"), None);
        assert_eq!(parse_i32("-2147483649"), None);
    }

    #[test]
    fn parses_and_formats_expressions() {
        let e = parse_expr("0x7f0000000000+256*cta.x+16384*i0-64*warp").unwrap();
        assert_eq!(e.base, 0x7f00_0000_0000);
        assert_eq!(e.coef[Var::CtaX.index()], 256);
        assert_eq!(e.coef[Var::Loop(0).index()], 16384);
        assert_eq!(e.coef[Var::Warp.index()], -64);
        let mut s = String::new();
        format_expr(&e, &mut s);
        assert_eq!(s, "0x7f0000000000+256*cta.x-64*warp+16384*i0");
        assert_eq!(parse_expr(&s).unwrap(), e);
        let e = parse_expr("-16+warp*2+warp-9223372036854775808*i3").unwrap();
        assert_eq!(e.base, 16u64.wrapping_neg());
        assert_eq!(e.coef[Var::Warp.index()], 3);
        assert_eq!(e.coef[Var::Loop(3).index()], i64::MIN);
        assert_eq!(parse_expr("1++2").unwrap_err().0, 2);
        assert_eq!(parse_expr("1+2*foo").unwrap_err().0, 4);
        assert_eq!(parse_expr("1+zz*i0").unwrap_err().0, 2);
        assert_eq!(parse_expr("1-").unwrap_err().0, 1);
    }
}

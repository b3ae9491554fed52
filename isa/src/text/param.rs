//! Per-CTA parameters in the text form: `param pK = ...` right-hand sides (docs/trace-format.md,
//! "Parameters").
//!
//! ```text
//! value  := NAME '[' inner ']' | inner
//! inner  := 'clamp' '(' lin ',' bound ',' bound ')' | lin
//! lin    := sum [ '/' INT ]
//! sum    := term (('+' | '-') term)*
//! term   := factor ('*' factor)*          (at most one non-constant factor)
//! factor := INT | VAR | '(' sum ')' | '-' factor
//! bound  := INT | 'inf' | '-inf'
//! ```

use std::fmt::Write;

use crate::program::{CtaParam, NUM_VARS, Var};

/// A linear form: constant plus coefficients.
#[derive(Clone, Copy)]
struct Lin {
    c: i64,
    coef: [i64; NUM_VARS],
}

impl Lin {
    fn is_const(&self) -> bool {
        self.coef.iter().all(|&c| c == 0)
    }
    fn scale(mut self, k: i64) -> Lin {
        self.c = self.c.wrapping_mul(k);
        for c in &mut self.coef {
            *c = c.wrapping_mul(k);
        }
        self
    }
    fn add(mut self, o: Lin, sign: i64) -> Lin {
        self.c = self.c.wrapping_add(o.c.wrapping_mul(sign));
        for (a, b) in self.coef.iter_mut().zip(o.coef) {
            *a = a.wrapping_add(b.wrapping_mul(sign));
        }
        self
    }
}

struct P<'a> {
    s: &'a [u8],
    i: usize,
    defined: usize,
    tables: &'a [String],
}

/// A parse error: byte offset into the right-hand side and message.
pub(crate) type ParamError = (usize, String);

impl P<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }
    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.get(self.i).copied()
    }
    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn expect(&mut self, c: u8) -> Result<(), ParamError> {
        if self.eat(c) { Ok(()) } else { Err((self.i, format!("expected `{}`", c as char))) }
    }
    fn word(&mut self) -> &str {
        self.ws();
        let st = self.i;
        while self.i < self.s.len() && (self.s[self.i].is_ascii_alphanumeric() || matches!(self.s[self.i], b'_' | b'.'))
        {
            self.i += 1;
        }
        std::str::from_utf8(&self.s[st..self.i]).unwrap_or("")
    }
    fn int(&mut self) -> Result<i64, ParamError> {
        self.ws();
        let st = self.i;
        let neg = self.eat(b'-');
        let w = self.word().to_string();
        // Parsed as u64 and wrapped, so `-9223372036854775808` reads back.
        let v =
            if let Some(h) = w.strip_prefix("0x") { u64::from_str_radix(h, 16).ok() } else { w.parse::<u64>().ok() }
                .map(|v| v as i64);
        match v {
            Some(v) => Ok(if neg { v.wrapping_neg() } else { v }),
            None => Err((st, format!("bad integer `{}{w}`", if neg { "-" } else { "" }))),
        }
    }
    fn bound(&mut self) -> Result<i64, ParamError> {
        self.ws();
        let st = self.i;
        if self.eat(b'-') {
            if self.word() == "inf" {
                return Ok(i64::MIN);
            }
            self.i = st;
        } else if self.word() == "inf" {
            return Ok(i64::MAX);
        } else {
            self.i = st;
        }
        self.int()
    }
    fn factor(&mut self) -> Result<Lin, ParamError> {
        let st = {
            self.ws();
            self.i
        };
        match self.peek() {
            Some(b'(') => {
                self.i += 1;
                let v = self.sum()?;
                self.expect(b')')?;
                Ok(v)
            }
            Some(b'-') => {
                self.i += 1;
                Ok(self.factor()?.scale(-1))
            }
            Some(c) if c.is_ascii_digit() => Ok(Lin { c: self.int()?, coef: [0; NUM_VARS] }),
            _ => {
                let w = self.word().to_string();
                match Var::from_name(&w) {
                    Some(Var::Param(k)) if k as usize >= self.defined => {
                        Err((st, format!("`{w}` is used before it is defined (parameters are defined in order)")))
                    }
                    Some(v) => {
                        let mut l = Lin { c: 0, coef: [0; NUM_VARS] };
                        l.coef[v.index()] = 1;
                        Ok(l)
                    }
                    None if w.is_empty() => Err((st, "expected a number, a variable or `(`".into())),
                    None => Err((st, format!("unknown variable `{w}`"))),
                }
            }
        }
    }
    fn term(&mut self) -> Result<Lin, ParamError> {
        let mut a = self.factor()?;
        loop {
            self.ws();
            let st = self.i;
            if !self.eat(b'*') {
                return Ok(a);
            }
            let b = self.factor()?;
            a = if a.is_const() {
                b.scale(a.c)
            } else if b.is_const() {
                a.scale(b.c)
            } else {
                return Err((st, "product of two variables: a parameter must be linear".into()));
            };
        }
    }
    fn sum(&mut self) -> Result<Lin, ParamError> {
        let mut a = self.term()?;
        loop {
            if self.eat(b'+') {
                a = a.add(self.term()?, 1);
            } else if self.eat(b'-') {
                a = a.add(self.term()?, -1);
            } else {
                return Ok(a);
            }
        }
    }
    fn lin(&mut self, p: &mut CtaParam) -> Result<(), ParamError> {
        let l = self.sum()?;
        p.offset = l.c;
        p.coef = l.coef;
        self.ws();
        let st = self.i;
        if self.eat(b'/') {
            p.div = self.int()?;
            if p.div < 1 {
                return Err((st, format!("divisor {} must be at least 1", p.div)));
            }
        }
        Ok(())
    }
    fn inner(&mut self, p: &mut CtaParam) -> Result<(), ParamError> {
        self.ws();
        let st = self.i;
        if self.word() == "clamp" && self.peek() == Some(b'(') {
            self.i += 1;
            self.lin(p)?;
            self.expect(b',')?;
            p.lo = self.bound()?;
            self.expect(b',')?;
            self.ws();
            let hs = self.i;
            p.hi = self.bound()?;
            self.expect(b')')?;
            if p.lo > p.hi {
                return Err((hs, format!("clamp range [{}, {}] is empty", p.lo, p.hi)));
            }
            Ok(())
        } else {
            self.i = st;
            self.lin(p)
        }
    }
}

/// Parses the right-hand side of `param pK = ...`; `defined` is K (params before it), `tables`
/// the names of the tables defined so far (index = table number).
pub(crate) fn parse_param(s: &str, defined: usize, tables: &[String]) -> Result<CtaParam, ParamError> {
    let mut p = P { s: s.as_bytes(), i: 0, defined, tables };
    let mut out = CtaParam::default();
    p.ws();
    let st = p.i;
    let w = p.word().to_string();
    if !w.is_empty() && p.peek() == Some(b'[') {
        let Some(t) = p.tables.iter().rposition(|n| *n == w) else {
            return Err((st, format!("unknown table `{w}`")));
        };
        out.table = Some(t as u32);
        p.i += 1;
        p.inner(&mut out)?;
        p.expect(b']')?;
    } else {
        p.i = st;
        p.inner(&mut out)?;
    }
    if p.peek().is_some() {
        return Err((p.i, "unexpected text after the parameter".into()));
    }
    Ok(out)
}

fn bound(v: i64, out: &mut String) {
    match v {
        i64::MAX => out.push_str("inf"),
        i64::MIN => out.push_str("-inf"),
        v => {
            let _ = write!(out, "{v}");
        }
    }
}

/// Writes `p` in the form [`parse_param`] reads back exactly; tables are named `t<N>`.
pub(crate) fn format_param(p: &CtaParam, out: &mut String) {
    if let Some(t) = p.table {
        let _ = write!(out, "t{t}[");
    }
    let clamp = p.lo != i64::MIN || p.hi != i64::MAX;
    if clamp {
        out.push_str("clamp(");
    }
    let _ = write!(out, "{}", p.offset);
    for v in Var::ALL {
        let c = p.coef[v.index()];
        if c != 0 {
            let sign = if c < 0 { '-' } else { '+' };
            let _ = write!(out, " {sign} {}*{}", c.unsigned_abs(), v.name());
        }
    }
    if p.div != 1 {
        let _ = write!(out, " / {}", p.div);
    }
    if clamp {
        out.push_str(", ");
        bound(p.lo, out);
        out.push_str(", ");
        bound(p.hi, out);
        out.push(')');
    }
    if p.table.is_some() {
        out.push(']');
    }
}

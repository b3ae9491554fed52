//! The study's cost expression (`cost.expr` of the manifest, e.g. `sm.count * clocks.sm`):
//! numbers and dotted config keys combined with `+ - * /` and parentheses, evaluated per point
//! with each key's value in SI base units.

/// Evaluates `expr`, asking `value` for each key; errors name the position or the key.
pub fn eval(expr: &str, value: &mut dyn FnMut(&str) -> Result<f64, String>) -> Result<f64, String> {
    let toks = lex(expr)?;
    let mut p = Parser { toks: &toks, i: 0, value };
    let v = p.sum()?;
    if p.i != toks.len() {
        return Err(format!("cost `{expr}`: unexpected `{}`", toks[p.i].text()));
    }
    Ok(v)
}

#[derive(Debug, PartialEq)]
enum Tok {
    Num(f64),
    Key(String),
    Op(char),
}

impl Tok {
    fn text(&self) -> String {
        match self {
            Tok::Num(n) => n.to_string(),
            Tok::Key(k) => k.clone(),
            Tok::Op(c) => c.to_string(),
        }
    }
}

fn lex(expr: &str) -> Result<Vec<Tok>, String> {
    let b: Vec<char> = expr.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_whitespace() {
            i += 1;
        } else if "+-*/()".contains(c) {
            out.push(Tok::Op(c));
            i += 1;
        } else if c.is_ascii_digit() || c == '.' {
            let s = i;
            while i < b.len()
                && (b[i].is_ascii_alphanumeric()
                    || b[i] == '.'
                    || ((b[i] == '-' || b[i] == '+') && matches!(b[i - 1], 'e' | 'E')))
            {
                i += 1;
            }
            let t: String = b[s..i].iter().collect();
            out.push(Tok::Num(t.parse().map_err(|_| format!("cost `{expr}`: `{t}` is not a number"))?));
        } else if c.is_ascii_alphabetic() || c == '_' {
            let s = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == '_' || b[i] == '.') {
                i += 1;
            }
            out.push(Tok::Key(b[s..i].iter().collect()));
        } else {
            return Err(format!("cost `{expr}`: unexpected `{c}` at column {}", i + 1));
        }
    }
    Ok(out)
}

struct Parser<'a> {
    toks: &'a [Tok],
    i: usize,
    value: &'a mut dyn FnMut(&str) -> Result<f64, String>,
}

impl Parser<'_> {
    fn op(&mut self, ops: &str) -> Option<char> {
        match self.toks.get(self.i) {
            Some(Tok::Op(c)) if ops.contains(*c) => {
                self.i += 1;
                Some(*c)
            }
            _ => None,
        }
    }
    fn sum(&mut self) -> Result<f64, String> {
        let mut v = self.product()?;
        while let Some(c) = self.op("+-") {
            let r = self.product()?;
            v = if c == '+' { v + r } else { v - r };
        }
        Ok(v)
    }
    fn product(&mut self) -> Result<f64, String> {
        let mut v = self.atom()?;
        while let Some(c) = self.op("*/") {
            let r = self.atom()?;
            v = if c == '*' { v * r } else { v / r };
        }
        Ok(v)
    }
    fn atom(&mut self) -> Result<f64, String> {
        if self.op("-").is_some() {
            return Ok(-self.atom()?);
        }
        if self.op("(").is_some() {
            let v = self.sum()?;
            return match self.op(")") {
                Some(_) => Ok(v),
                None => Err("cost: missing `)`".into()),
            };
        }
        let t = self.toks.get(self.i).ok_or("cost: the expression ends early")?;
        self.i += 1;
        match t {
            Tok::Num(n) => Ok(*n),
            Tok::Key(k) => (self.value)(k),
            Tok::Op(c) => Err(format!("cost: unexpected `{c}`")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::eval;

    fn with(expr: &str) -> Result<f64, String> {
        eval(expr, &mut |k| match k {
            "sm.count" => Ok(132.0),
            "clocks.sm" => Ok(1.98e9),
            _ => Err(format!("no key `{k}`")),
        })
    }

    #[test]
    fn evaluates_keys_numbers_and_precedence() {
        assert_eq!(with("sm.count * clocks.sm").unwrap(), 132.0 * 1.98e9);
        assert_eq!(with("2 + 3 * (4 - 1) / 3").unwrap(), 5.0);
        assert_eq!(with("-sm.count + 1e2").unwrap(), -32.0);
        assert!(with("hbm.stacks").unwrap_err().contains("hbm.stacks"));
        assert!(with("2 +").is_err());
        assert!(with("(2").unwrap_err().contains(")"));
        assert!(with("2 $ 3").unwrap_err().contains("column 3"));
        assert!(with("2 3").unwrap_err().contains("unexpected"));
    }
}

//! The study's cost expression (for the report's Pareto front): numbers and dotted chip keys
//! joined by `+ - * /` and parentheses, as in `sm.count * clocks.sm`. Keys evaluate to the
//! point's value in SI base units (`Arch::value`). Pure.

/// A parsed expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    Num(f64),
    Key(String),
    Neg(Box<Expr>),
    Bin(char, Box<Expr>, Box<Expr>),
}

impl Expr {
    /// Parses `text`; the error names the offending character's position.
    pub fn parse(text: &str) -> Result<Expr, String> {
        let toks = tokens(text)?;
        let mut p = Parser { toks: &toks, at: 0 };
        let e = p.sum()?;
        match p.toks.get(p.at) {
            None => Ok(e),
            Some((pos, t)) => Err(format!("cost `{text}`: unexpected `{}` at character {}", t.show(), pos + 1)),
        }
    }

    /// Every key the expression reads, in order of appearance.
    pub fn keys(&self) -> Vec<&str> {
        match self {
            Expr::Num(_) => vec![],
            Expr::Key(k) => vec![k.as_str()],
            Expr::Neg(e) => e.keys(),
            Expr::Bin(_, a, b) => {
                let mut v = a.keys();
                v.extend(b.keys());
                v
            }
        }
    }

    /// The value, with `key` giving each key's number (`None`: not a number).
    pub fn eval(&self, key: &dyn Fn(&str) -> Option<f64>) -> Result<f64, String> {
        Ok(match self {
            Expr::Num(x) => *x,
            Expr::Key(k) => key(k).ok_or_else(|| format!("`{k}` is not a numeric chip parameter"))?,
            Expr::Neg(e) => -e.eval(key)?,
            Expr::Bin(op, a, b) => {
                let (x, y) = (a.eval(key)?, b.eval(key)?);
                match op {
                    '+' => x + y,
                    '-' => x - y,
                    '*' => x * y,
                    _ => x / y,
                }
            }
        })
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Num(f64),
    Key(String),
    Op(char),
}

impl Tok {
    fn show(&self) -> String {
        match self {
            Tok::Num(x) => x.to_string(),
            Tok::Key(k) => k.clone(),
            Tok::Op(c) => c.to_string(),
        }
    }
}

fn tokens(text: &str) -> Result<Vec<(usize, Tok)>, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if "+-*/()".contains(c) {
            out.push((i, Tok::Op(c)));
            i += 1;
        } else if c.is_ascii_digit() || c == '.' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_digit()
                    || chars[i] == '.'
                    || matches!(chars[i], 'e' | 'E')
                    || (matches!(chars[i], '+' | '-') && matches!(chars[i - 1], 'e' | 'E')))
            {
                i += 1;
            }
            let s: String = chars[start..i].iter().collect();
            let x = s.parse().map_err(|_| format!("cost `{text}`: `{s}` is not a number"))?;
            out.push((start, Tok::Num(x)));
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || matches!(chars[i], '_' | '.')) {
                i += 1;
            }
            out.push((start, Tok::Key(chars[start..i].iter().collect())));
        } else {
            return Err(format!("cost `{text}`: unexpected `{c}` at character {}", i + 1));
        }
    }
    Ok(out)
}

struct Parser<'a> {
    toks: &'a [(usize, Tok)],
    at: usize,
}

impl Parser<'_> {
    fn peek_op(&self) -> Option<char> {
        match self.toks.get(self.at) {
            Some((_, Tok::Op(c))) => Some(*c),
            _ => None,
        }
    }

    fn sum(&mut self) -> Result<Expr, String> {
        let mut e = self.product()?;
        while let Some(op @ ('+' | '-')) = self.peek_op() {
            self.at += 1;
            e = Expr::Bin(op, Box::new(e), Box::new(self.product()?));
        }
        Ok(e)
    }

    fn product(&mut self) -> Result<Expr, String> {
        let mut e = self.atom()?;
        while let Some(op @ ('*' | '/')) = self.peek_op() {
            self.at += 1;
            e = Expr::Bin(op, Box::new(e), Box::new(self.atom()?));
        }
        Ok(e)
    }

    fn atom(&mut self) -> Result<Expr, String> {
        let Some((pos, t)) = self.toks.get(self.at) else {
            return Err("cost: the expression ends too early".into());
        };
        self.at += 1;
        match t {
            Tok::Num(x) => Ok(Expr::Num(*x)),
            Tok::Key(k) => Ok(Expr::Key(k.clone())),
            Tok::Op('-') => Ok(Expr::Neg(Box::new(self.atom()?))),
            Tok::Op('(') => {
                let e = self.sum()?;
                if self.peek_op() != Some(')') {
                    return Err(format!("cost: the `(` at character {} is not closed", pos + 1));
                }
                self.at += 1;
                Ok(e)
            }
            Tok::Op(c) => Err(format!("cost: unexpected `{c}` at character {}", pos + 1)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(text: &str) -> f64 {
        let vals = |k: &str| match k {
            "sm.count" => Some(132.0),
            "clocks.sm" => Some(1.98e9),
            "hbm.stacks" => Some(5.0),
            _ => None,
        };
        Expr::parse(text).unwrap().eval(&vals).unwrap()
    }

    #[test]
    fn precedence_parentheses_and_keys() {
        assert_eq!(eval("sm.count * clocks.sm"), 132.0 * 1.98e9);
        assert_eq!(eval("1 + 2 * 3"), 7.0);
        assert_eq!(eval("(1 + 2) * 3"), 9.0);
        assert_eq!(eval("10 - 4 - 3"), 3.0);
        assert_eq!(eval("-hbm.stacks + 1e1"), 5.0);
        assert_eq!(eval("2.5e-1 * 4"), 1.0);
        assert_eq!(Expr::parse("sm.count * 2 + hbm.stacks").unwrap().keys(), ["sm.count", "hbm.stacks"]);
    }

    #[test]
    fn bad_expressions_say_where() {
        assert!(Expr::parse("sm.count *").unwrap_err().contains("ends too early"));
        assert!(Expr::parse("(1 + 2").unwrap_err().contains("not closed"));
        assert!(Expr::parse("1 $ 2").unwrap_err().contains("character 3"));
        assert!(Expr::parse("1 2").unwrap_err().contains("unexpected `2`"));
        let e = Expr::parse("nope * 2").unwrap();
        assert!(e.eval(&|_| None).unwrap_err().contains("`nope`"));
    }
}

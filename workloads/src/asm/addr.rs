//! Affine addresses under construction.

use gpusim_isa::{AddrExpr, Var};

/// An affine address under construction: `base + Σ coef · var`, built from terms in any order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Addr(pub AddrExpr);

impl Addr {
    pub fn at(base: u64) -> Addr {
        Addr(AddrExpr::constant(base))
    }

    /// Adds `k` bytes to the base.
    pub fn plus(mut self, k: u64) -> Addr {
        self.0.base = self.0.base.wrapping_add(k);
        self
    }

    /// Adds a signed number of bytes to the base.
    pub fn plus_signed(mut self, k: i64) -> Addr {
        self.0.base = self.0.base.wrapping_add(k as u64);
        self
    }

    /// Adds `coef · v` (coefficients of the same variable add up).
    pub fn term(mut self, v: Var, coef: i64) -> Addr {
        let c = &mut self.0.coef[v.index()];
        *c = c.wrapping_add(coef);
        self
    }

    /// Adds `scale` times an affine index (see [`Affine`]).
    pub fn index(mut self, a: &Affine, scale: u64) -> Addr {
        self = self.plus(a.konst.wrapping_mul(scale));
        for (v, c) in &a.terms {
            self = self.term(*v, (*c as i64).wrapping_mul(scale as i64));
        }
        self
    }
}

impl From<Addr> for AddrExpr {
    fn from(a: Addr) -> AddrExpr {
        a.0
    }
}

/// An index that is affine in CTA coordinates and loop counters: `konst + Σ c · v`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Affine {
    pub konst: u64,
    pub terms: Vec<(Var, u64)>,
}

impl Affine {
    pub fn konst(k: u64) -> Affine {
        Affine { konst: k, terms: Vec::new() }
    }

    pub fn with(mut self, v: Var, c: u64) -> Affine {
        if c != 0 {
            self.terms.push((v, c));
        }
        self
    }

    pub fn plus(mut self, k: u64) -> Affine {
        self.konst += k;
        self
    }
}

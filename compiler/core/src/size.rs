//! Size expressions: integers over the symbolic dimensions of a program,
//! used for launch grids, buffer shapes and tile extents. They are evaluated
//! at launch, once every dimension is bound to a number.

use std::collections::HashMap;
use std::fmt;

/// An integer expression over named dimensions.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Size {
    /// A constant.
    Const(i64),
    /// A dimension bound at launch (`M`, `N`, ...).
    Sym(String),
    /// A product.
    Mul(Box<Size>, Box<Size>),
    /// A sum.
    Add(Box<Size>, Box<Size>),
    /// Ceiling division `cdiv(a, b)`.
    CeilDiv(Box<Size>, Box<Size>),
    /// The smallest power of two at least `a` (and at least 1).
    Pow2(Box<Size>),
    /// The larger of two sizes.
    Max(Box<Size>, Box<Size>),
    /// The smaller of two sizes.
    Min(Box<Size>, Box<Size>),
}

impl From<u64> for Size {
    /// A constant extent (tile shapes are counted in `u64`).
    fn from(n: u64) -> Size {
        Size::Const(n as i64)
    }
}

/// Values of the dimensions, by name.
pub type Bindings = HashMap<String, i64>;

impl Size {
    /// `self * other`, folding constants.
    pub fn mul(self, other: Size) -> Size {
        match (self, other) {
            (Size::Const(a), Size::Const(b)) => Size::Const(a.saturating_mul(b)),
            (Size::Const(1), x) | (x, Size::Const(1)) => x,
            (a, b) => Size::Mul(Box::new(a), Box::new(b)),
        }
    }

    /// `self + other`, folding constants.
    pub fn add(self, other: Size) -> Size {
        match (self, other) {
            (Size::Const(a), Size::Const(b)) => Size::Const(a.saturating_add(b)),
            (Size::Const(0), x) | (x, Size::Const(0)) => x,
            (a, b) => Size::Add(Box::new(a), Box::new(b)),
        }
    }

    /// `cdiv(self, other)`, folding constants.
    pub fn cdiv(self, other: Size) -> Size {
        match (self, other) {
            (Size::Const(a), Size::Const(b)) if b > 0 => Size::Const((a + b - 1).div_euclid(b)),
            (x, Size::Const(1)) => x,
            (a, b) => Size::CeilDiv(Box::new(a), Box::new(b)),
        }
    }

    /// `pow2(self)`, folding constants.
    pub fn pow2(self) -> Size {
        match self {
            Size::Const(a) => Size::Const(next_pow2(a)),
            a => Size::Pow2(Box::new(a)),
        }
    }

    /// `min(self, other)`, folding constants.
    pub fn min(self, other: Size) -> Size {
        match (self, other) {
            (Size::Const(a), Size::Const(b)) => Size::Const(a.min(b)),
            (a, b) => Size::Min(Box::new(a), Box::new(b)),
        }
    }

    /// `max(self, other)`, folding constants.
    pub fn max(self, other: Size) -> Size {
        match (self, other) {
            (Size::Const(a), Size::Const(b)) => Size::Const(a.max(b)),
            (a, b) => Size::Max(Box::new(a), Box::new(b)),
        }
    }

    /// The constant value, if the expression has no symbols.
    pub fn as_const(&self) -> Option<i64> {
        self.eval(&Bindings::new()).ok()
    }

    /// The value under `b`; the error names the first unbound symbol.
    pub fn eval(&self, b: &Bindings) -> Result<i64, String> {
        Ok(match self {
            Size::Const(c) => *c,
            Size::Sym(s) => *b
                .get(s)
                .ok_or_else(|| format!("dimension `{s}` is not bound"))?,
            Size::Mul(x, y) => x.eval(b)?.saturating_mul(y.eval(b)?),
            Size::Add(x, y) => x.eval(b)?.saturating_add(y.eval(b)?),
            Size::CeilDiv(x, y) => {
                let d = y.eval(b)?;
                if d <= 0 {
                    return Err("division by a size that is not positive".into());
                }
                (x.eval(b)? + d - 1).div_euclid(d)
            }
            Size::Pow2(x) => next_pow2(x.eval(b)?),
            Size::Max(x, y) => x.eval(b)?.max(y.eval(b)?),
            Size::Min(x, y) => x.eval(b)?.min(y.eval(b)?),
        })
    }

    /// Every symbol the expression mentions.
    pub fn syms(&self, out: &mut Vec<String>) {
        match self {
            Size::Const(_) => {}
            Size::Sym(s) => {
                if !out.contains(s) {
                    out.push(s.clone());
                }
            }
            Size::Pow2(x) => x.syms(out),
            Size::Mul(x, y)
            | Size::Add(x, y)
            | Size::CeilDiv(x, y)
            | Size::Max(x, y)
            | Size::Min(x, y) => {
                x.syms(out);
                y.syms(out);
            }
        }
    }
}

/// The smallest power of two that is at least `n` (1 for `n <= 1`).
pub fn next_pow2(n: i64) -> i64 {
    if n <= 1 {
        1
    } else {
        (n as u64).next_power_of_two().min(1 << 62) as i64
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Size::Const(c) => write!(f, "{c}"),
            Size::Sym(s) => f.write_str(s),
            Size::Mul(a, b) => write!(f, "{a}*{b}"),
            Size::Add(a, b) => write!(f, "({a} + {b})"),
            Size::CeilDiv(a, b) => write!(f, "cdiv({a}, {b})"),
            Size::Pow2(a) => write!(f, "pow2({a})"),
            Size::Max(a, b) => write!(f, "max({a}, {b})"),
            Size::Min(a, b) => write!(f, "min({a}, {b})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_and_evaluates() {
        let m = Size::Sym("M".into());
        let g = m.clone().cdiv(Size::Const(128));
        assert_eq!(g.to_string(), "cdiv(M, 128)");
        let mut b = Bindings::new();
        b.insert("M".into(), 257);
        assert_eq!(g.eval(&b), Ok(3));
        assert_eq!(Size::Const(77).pow2(), Size::Const(128));
        assert_eq!(Size::Const(300).cdiv(Size::Const(128)), Size::Const(3));
        assert!(m.eval(&Bindings::new()).is_err());
    }
}

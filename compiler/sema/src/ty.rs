//! Checked types: tensors with symbolic shapes and shard specs, scalars,
//! lists and mesh axes.

use std::fmt;
use tessera_core::Size;
use tessera_syntax::ast::Dtype;

/// The largest element count a tensor may have (2^48).
pub const MAX_ELEMENTS: u64 = 1 << 48;

/// One dimension: a product `coeff * s1 * s2 * ...` of symbols, or unknown.
///
/// Invariant: `syms` is sorted, so equal products compare equal; `coeff >= 1`
/// except for the zero-size dimension that the checker reports.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Dim {
    /// A known product.
    Expr {
        /// Constant factor.
        coeff: u64,
        /// Symbolic factors, sorted.
        syms: Vec<String>,
    },
    /// `of / by` rounded down, where `by` does not divide `of`'s
    /// coefficient (`D / 2`: the extent of `x[:, 0:D/2]`). `of` is an
    /// [`Dim::Expr`] with symbols and `by >= 2`.
    Quot {
        /// The dividend.
        of: Box<Dim>,
        /// The divisor.
        by: u64,
    },
    /// Not known at compile time (host code with runtime sizes, or results
    /// whose size the checker cannot express).
    Unknown,
}

impl Dim {
    /// The size expression of this dimension; `None` for an unknown one.
    pub fn to_size(&self) -> Option<Size> {
        match self {
            Dim::Unknown => None,
            // floor(a / b) = cdiv(a + 1 - b, b) for a >= 0.
            Dim::Quot { of, by } => {
                let a = of.to_size()?.add(Size::Const(1 - *by as i64));
                Some(Size::CeilDiv(
                    Box::new(a),
                    Box::new(Size::Const(*by as i64)),
                ))
            }
            Dim::Expr { coeff, syms } => {
                let mut s: Option<Size> = None;
                if *coeff != 1 || syms.is_empty() {
                    s = Some(Size::Const(*coeff as i64));
                }
                for name in syms {
                    let t = Size::Sym(name.clone());
                    s = Some(match s {
                        None => t,
                        Some(p) => p.mul(t),
                    });
                }
                s
            }
        }
    }

    /// A literal size.
    pub fn known(n: u64) -> Dim {
        Dim::Expr {
            coeff: n,
            syms: Vec::new(),
        }
    }

    /// A single symbol.
    pub fn sym(name: &str) -> Dim {
        Dim::Expr {
            coeff: 1,
            syms: vec![name.to_owned()],
        }
    }

    /// The literal size, if the dimension has no symbols.
    pub fn as_known(&self) -> Option<u64> {
        match self {
            Dim::Expr { coeff, syms } if syms.is_empty() => Some(*coeff),
            _ => None,
        }
    }

    /// `self / k` rounded down: exact when `k` divides the coefficient, a
    /// [`Dim::Quot`] otherwise; `None` for `k < 1`.
    pub fn div(&self, k: u64) -> Option<Dim> {
        if k == 0 {
            return None;
        }
        Some(match self {
            Dim::Expr { coeff, syms } if syms.is_empty() => Dim::known(coeff / k),
            Dim::Expr { coeff, syms } if coeff % k == 0 => Dim::Expr {
                coeff: coeff / k,
                syms: syms.clone(),
            },
            Dim::Expr { .. } if k == 1 => self.clone(),
            Dim::Expr { .. } => Dim::Quot {
                of: Box::new(self.clone()),
                by: k,
            },
            Dim::Quot { of, by } => match by.checked_mul(k) {
                Some(b) => of.div(b)?,
                None => Dim::Unknown,
            },
            Dim::Unknown => Dim::Unknown,
        })
    }

    /// `self / k` rounded up (`cdiv`): exact when `k` divides the
    /// coefficient, unknown for other symbolic sizes; `None` for `k < 1`.
    pub fn ceil_div(&self, k: u64) -> Option<Dim> {
        if k == 0 {
            return None;
        }
        Some(match self {
            Dim::Expr { coeff, syms } if syms.is_empty() => Dim::known(coeff.div_ceil(k)),
            Dim::Expr { coeff, .. } if coeff % k == 0 => self.div(k)?,
            _ => Dim::Unknown,
        })
    }

    /// The product of two dimensions, or `None` on overflow.
    pub fn mul(&self, other: &Dim) -> Option<Dim> {
        match (self, other) {
            (Dim::Expr { coeff: a, syms: sa }, Dim::Expr { coeff: b, syms: sb }) => {
                let mut syms = sa.clone();
                syms.extend(sb.iter().cloned());
                syms.sort();
                Some(Dim::Expr {
                    coeff: a.checked_mul(*b)?,
                    syms,
                })
            }
            _ => Some(Dim::Unknown),
        }
    }

    /// The sum of two dimensions where it is a product again (`4 + 4`,
    /// `N + 2N`); `None` otherwise (`N + 4`), or on overflow.
    pub fn add(&self, other: &Dim) -> Option<Dim> {
        match (self, other) {
            (Dim::Expr { coeff: a, syms: sa }, Dim::Expr { coeff: b, syms: sb }) if sa == sb => {
                Some(Dim::Expr {
                    coeff: a.checked_add(*b)?,
                    syms: sa.clone(),
                })
            }
            _ => None,
        }
    }

    /// The difference of two dimensions where it is a product again
    /// (`10 - 3`, `3N - N`); `None` otherwise (`N - 1`), when it would be
    /// negative, or when the two are unknown.
    pub fn sub(&self, other: &Dim) -> Option<Dim> {
        match (self, other) {
            (Dim::Expr { coeff: a, syms: sa }, Dim::Expr { coeff: b, syms: sb }) if sa == sb => {
                let coeff = a.checked_sub(*b)?;
                Some(if coeff == 0 {
                    Dim::known(0)
                } else {
                    Dim::Expr {
                        coeff,
                        syms: sa.clone(),
                    }
                })
            }
            _ => None,
        }
    }

    /// Whether `self` may divide `of` (grouped-query attention's head
    /// counts: each key/value head serves `of / self` query heads). Known
    /// sizes decide; a symbolic one is checked at the concrete sizes.
    pub fn may_divide(&self, of: &Dim) -> bool {
        match (self.as_known(), of.as_known()) {
            (Some(d), Some(n)) => d > 0 && n % d == 0,
            _ => true,
        }
    }

    /// `self / by` where it divides exactly as written: the symbols of
    /// `by` among `self`'s and its coefficient dividing `self`'s; `None`
    /// otherwise.
    pub fn div_exact(&self, by: &Dim) -> Option<Dim> {
        match (self, by) {
            (Dim::Expr { coeff: a, syms: sa }, Dim::Expr { coeff: b, syms: sb })
                if *b > 0 && a % b == 0 =>
            {
                let mut syms = sa.clone();
                for s in sb {
                    let i = syms.iter().position(|r| r == s)?;
                    syms.remove(i);
                }
                Some(Dim::Expr { coeff: a / b, syms })
            }
            _ => None,
        }
    }

    /// The symbols of `self` and of `other` that the other lacks (each
    /// occurrence counted), when both are products.
    pub fn unshared_syms(&self, other: &Dim) -> Option<Vec<String>> {
        let (Dim::Expr { syms: sa, .. }, Dim::Expr { syms: sb, .. }) = (self, other) else {
            return None;
        };
        let mut rest_b = sb.clone();
        let mut out = Vec::new();
        for s in sa {
            match rest_b.iter().position(|r| r == s) {
                Some(i) => {
                    rest_b.remove(i);
                }
                None => out.push(s.clone()),
            }
        }
        out.extend(rest_b);
        Some(out)
    }

    /// Whether two dimensions may be equal (unknown matches anything).
    pub fn compatible(&self, other: &Dim) -> bool {
        matches!((self, other), (Dim::Unknown, _) | (_, Dim::Unknown)) || self == other
    }

    /// Whether this is the literal 1.
    pub fn is_one(&self) -> bool {
        self.as_known() == Some(1)
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Unknown => f.write_str("?"),
            Dim::Quot { of, by } => write!(f, "{of}/{by}"),
            Dim::Expr { coeff, syms } => {
                let mut parts: Vec<String> = Vec::new();
                if *coeff != 1 || syms.is_empty() {
                    parts.push(coeff.to_string());
                }
                parts.extend(syms.iter().cloned());
                f.write_str(&parts.join("*"))
            }
        }
    }
}

/// A mesh axis: which mesh, which axis, and its name for messages.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AxisRef {
    /// The mesh's name.
    pub mesh: String,
    /// The axis's name.
    pub axis: String,
    /// The axis's size.
    pub size: u64,
}

impl fmt::Display for AxisRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.axis)
    }
}

/// How a tensor is distributed over a mesh.
///
/// Invariant: an axis appears at most once in `dims`, and never both in
/// `dims` and `partial`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Shard {
    /// Per dimension: the axis it is split over, or `None` if replicated.
    pub dims: Vec<Option<AxisRef>>,
    /// Axes over which each device holds a partial sum of the true value.
    pub partial: Vec<AxisRef>,
}

impl Shard {
    /// A replicated layout of the given rank.
    pub fn replicated(rank: usize) -> Shard {
        Shard {
            dims: vec![None; rank],
            partial: Vec::new(),
        }
    }

    /// Whether nothing is split and nothing is partial.
    pub fn is_replicated(&self) -> bool {
        self.dims.iter().all(Option::is_none) && self.partial.is_empty()
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entries: Vec<String> = self
            .dims
            .iter()
            .map(|d| d.as_ref().map_or("_".to_owned(), |a| a.axis.clone()))
            .collect();
        write!(f, "shard({})", entries.join(", "))?;
        if !self.partial.is_empty() {
            let axes: Vec<&str> = self.partial.iter().map(|a| a.axis.as_str()).collect();
            write!(f, " partial({})", axes.join(", "))?;
        }
        Ok(())
    }
}

/// A tensor type: dims, element type, and optionally a shard spec.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorTy {
    /// Dimensions, outermost first; empty for a rank-0 tensor.
    pub dims: Vec<Dim>,
    /// The element type.
    pub dtype: Dtype,
    /// The distribution, if the program uses meshes.
    pub shard: Option<Shard>,
}

impl TensorTy {
    /// A replicated tensor.
    pub fn new(dims: Vec<Dim>, dtype: Dtype) -> TensorTy {
        TensorTy {
            dims,
            dtype,
            shard: None,
        }
    }

    /// The number of dimensions.
    pub fn rank(&self) -> usize {
        self.dims.len()
    }

    /// The axes over which the value is a partial sum.
    pub fn partial(&self) -> &[AxisRef] {
        self.shard.as_ref().map_or(&[], |s| &s.partial)
    }

    /// The axis dimension `i` is split over.
    pub fn dim_axis(&self, i: usize) -> Option<&AxisRef> {
        self.shard
            .as_ref()
            .and_then(|s| s.dims.get(i))
            .and_then(Option::as_ref)
    }
}

impl fmt::Display for TensorTy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.dims.is_empty() {
            write!(f, "{}", self.dtype)?;
        } else {
            let dims: Vec<String> = self.dims.iter().map(Dim::to_string).collect();
            write!(f, "tensor<{}, {}>", dims.join(", "), self.dtype)?;
        }
        if let Some(shard) = &self.shard {
            if !shard.is_replicated() {
                write!(f, " @ {shard}")?;
            }
        }
        Ok(())
    }
}

/// The type of a checked expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Ty {
    /// A tensor value: an op's operand, a host tensor, or a tile in a kernel.
    Tensor(TensorTy),
    /// A kernel parameter: a tensor in global memory, used through
    /// `load`/`store` only.
    Global(TensorTy),
    /// An integer scalar (compile-time or host).
    Int,
    /// A float scalar (compile-time or host).
    Float,
    /// A boolean scalar.
    Bool,
    /// A string.
    Str,
    /// A list (shapes, index lists).
    List(Box<Ty>),
    /// A mesh axis, passed to collectives.
    Axis(AxisRef),
    /// An op's several results (`-> (tensor<...>, tensor<...>)`), bound by
    /// `let (a, b) = f(x);` and nothing else.
    Tuple(Vec<Ty>),
    /// No value (`print`, `store`).
    Unit,
    /// The type of an erroneous expression; silences follow-up errors.
    Error,
}

impl Ty {
    /// Whether a value of this type can be a condition: a `bool`, or a
    /// rank-0 bool tensor (a reduction's `all`); an error type too, as its
    /// error is reported already.
    pub fn is_truth(&self) -> bool {
        match self {
            Ty::Bool | Ty::Error => true,
            Ty::Tensor(t) => t.dims.is_empty() && t.dtype == tessera_syntax::ast::Dtype::Bool,
            _ => false,
        }
    }

    /// Whether a value of this type is one integer: an `int`, or a rank-0
    /// integer tensor (a scalar parameter `n: int32`, a count `sum(mask)`);
    /// an error type too, as its error is reported already.
    pub fn is_one_int(&self) -> bool {
        match self {
            Ty::Int | Ty::Error => true,
            Ty::Tensor(t) => t.dims.is_empty() && t.dtype.is_int(),
            _ => false,
        }
    }

    /// The tensor type, if this is a tensor value.
    pub fn tensor(&self) -> Option<&TensorTy> {
        match self {
            Ty::Tensor(t) => Some(t),
            _ => None,
        }
    }

    /// Whether this is a number (int, float or bool scalar).
    pub fn is_scalar(&self) -> bool {
        matches!(self, Ty::Int | Ty::Float | Ty::Bool)
    }

    /// A short description for messages ("a tensor", "an integer").
    pub fn describe(&self) -> String {
        match self {
            Ty::Tensor(t) => format!("`{t}`"),
            Ty::Global(t) => format!("global `{t}`"),
            Ty::Int => "an integer".into(),
            Ty::Float => "a float".into(),
            Ty::Bool => "a boolean".into(),
            Ty::Str => "a string".into(),
            Ty::List(_) => "a list".into(),
            Ty::Axis(a) => format!("mesh axis `{}`", a.axis),
            Ty::Tuple(parts) => format!("{} results `{self}`", parts.len()),
            Ty::Unit => "no value".into(),
            Ty::Error => "an erroneous value".into(),
        }
    }
}

impl fmt::Display for Ty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ty::Tensor(t) => write!(f, "{t}"),
            Ty::Global(t) => write!(f, "global {t}"),
            Ty::Int => f.write_str("int"),
            Ty::Float => f.write_str("float"),
            Ty::Bool => f.write_str("bool"),
            Ty::Str => f.write_str("str"),
            Ty::List(inner) => write!(f, "[{inner}]"),
            Ty::Axis(a) => write!(f, "axis {}.{}", a.mesh, a.axis),
            Ty::Tuple(parts) => {
                let parts: Vec<String> = parts.iter().map(Ty::to_string).collect();
                write!(f, "({})", parts.join(", "))
            }
            Ty::Unit => f.write_str("()"),
            Ty::Error => f.write_str("{error}"),
        }
    }
}

/// A compile-time value.
#[derive(Clone, Debug, PartialEq)]
pub enum Const {
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// A list of values.
    List(Vec<Const>),
    /// A string (an op's `str` attribute: `mode = "reflect"`).
    Str(String),
}

impl Const {
    /// The integer, if this is one.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Const::Int(v) => Some(*v),
            _ => None,
        }
    }

    /// The number as a float, if this is a number.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Const::Int(v) => Some(*v as f64),
            Const::Float(v) => Some(*v),
            _ => None,
        }
    }
}

impl fmt::Display for Const {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Const::Int(v) => write!(f, "{v}"),
            Const::Float(v) => write!(f, "{v:?}"),
            Const::Bool(v) => write!(f, "{v}"),
            Const::List(items) => {
                let items: Vec<String> = items.iter().map(Const::to_string).collect();
                write!(f, "[{}]", items.join(", "))
            }
            Const::Str(s) => write!(f, "{s:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dimension_sizes() {
        let d = Dim::Expr {
            coeff: 2,
            syms: vec!["H".into()],
        };
        assert_eq!(d.to_size().unwrap().to_string(), "2*H");
        assert_eq!(Dim::Unknown.to_size(), None);
    }

    #[test]
    fn quotients_round_down_and_stay_symbolic() {
        let d = Dim::sym("D");
        assert_eq!(Dim::known(7).div(2), Some(Dim::known(3)));
        assert_eq!(d.div(2).unwrap().to_string(), "D/2");
        assert_eq!(
            Dim::known(4).mul(&d).unwrap().div(2).unwrap().to_string(),
            "2*D"
        );
        assert_eq!(d.div(2).unwrap().div(3).unwrap().to_string(), "D/6");
        assert_eq!(d.div(0), None);
        assert!(!d.div(2).unwrap().compatible(&d));
        assert_eq!(d.div(2).unwrap().mul(&Dim::known(2)), Some(Dim::Unknown));
        // floor(D / 2) as a size: cdiv(D - 1, 2).
        let s = d.div(2).unwrap().to_size().unwrap();
        let b: tessera_core::Bindings = [("D".to_string(), 9)].into_iter().collect();
        assert_eq!(s.eval(&b), Ok(4));
    }

    #[test]
    fn products_are_normalized() {
        let hd = Dim::sym("H").mul(&Dim::sym("D")).unwrap();
        let dh = Dim::sym("D").mul(&Dim::sym("H")).unwrap();
        assert_eq!(hd, dh);
        assert_eq!(hd.to_string(), "D*H");
        assert_eq!(
            Dim::known(4).mul(&Dim::sym("N")).unwrap().to_string(),
            "4*N"
        );
        assert!(Dim::known(u64::MAX).mul(&Dim::known(2)).is_none());
    }
}

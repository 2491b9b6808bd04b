//! Elementwise operations on tiles: unary and binary math, `select`, casts,
//! broadcasts, reshapes and permutations.
//!
//! Float math is done in the class of the result: `f32` for fp32 and the
//! narrower floats (rounded to the result dtype afterwards), `f64` for fp64.
//! The basic operations are IEEE in that precision; transcendental
//! functions are evaluated in `f64` and rounded once, as the graph
//! evaluator does. Integer math wraps to the result's width; integer
//! division truncates toward zero and fails on a zero divisor.

use super::bcast::{map1, map2, map3, strides, Walk};
use super::value::{Class, Elem, Elems, Num, TileVal, ValInfo};
use super::{fail, R};
use std::borrow::Cow;
use tessera_graph::{BinaryOp, UnaryOp};
use tessera_tensor::Dtype;

/// An operand: its elements and its type.
pub(crate) type Arg<'a> = (&'a TileVal, &'a ValInfo);

/// The widest class among two (fp64 > F32 > int > bool): where mixed
/// operands are compared.
fn promote(a: Class, b: Class) -> Class {
    let rank = |c| match c {
        Class::Bool => 0,
        Class::Int => 1,
        Class::F32 => 2,
        Class::F64 => 3,
    };
    if rank(a) >= rank(b) {
        a
    } else {
        b
    }
}

/// The widest dtype of a class: where operands of that class compute.
fn wide(c: Class) -> Num {
    Num::new(match c {
        Class::F32 => Dtype::Fp32,
        Class::F64 => Dtype::Fp64,
        Class::Int => Dtype::Int64,
        Class::Bool => Dtype::Bool,
    })
}

/// An operand's elements in class `c` (converted only if it is of another
/// class).
fn coerce<'a>(a: Arg<'a>, c: Class) -> Cow<'a, TileVal> {
    if a.0.class() == c {
        Cow::Borrowed(a.0)
    } else {
        a.0.cast(a.1.num, wide(c), true)
    }
}

/// A computed tile made a value of type `out`: converted if its class
/// differs, else rounded or wrapped to the dtype.
pub(crate) fn finish(t: TileVal, out: &ValInfo) -> TileVal {
    if t.class() == out.num.class {
        let mut t = t;
        t.round_to(out.num);
        t
    } else {
        t.cast(wide(t.class()), out.num, true).into_owned()
    }
}

/// Elements of `t` as `T` (the class must be `T`'s).
fn view<T: Elem>(t: &TileVal) -> R<&[T]> {
    T::view(t).map_or_else(|| fail("internal error: operand of the wrong class"), Ok)
}

/// `x` to the power `y` for integers: wrapping, and truncated toward zero
/// for negative exponents.
fn int_pow(x: i64, y: i64) -> i64 {
    if y < 0 {
        return match x {
            1 => 1,
            -1 if y % 2 == 0 => 1,
            -1 => -1,
            _ => 0,
        };
    }
    x.wrapping_pow(u32::try_from(y).unwrap_or(u32::MAX))
}

/// Floats of one precision.
trait Float: Elem + std::ops::Add<Output = Self> + std::ops::Sub<Output = Self> {
    fn mul(self, o: Self) -> Self;
    fn div(self, o: Self) -> Self;
    fn rem(self, o: Self) -> Self;
    fn powf(self, o: Self) -> Self;
    fn is_nan(self) -> bool;
    fn nan() -> Self;
    fn unary(self, op: UnaryOp) -> Self;
    fn max(self, o: Self) -> Self;
    fn min(self, o: Self) -> Self;
}

macro_rules! float {
    ($t:ty) => {
        impl Float for $t {
            fn mul(self, o: Self) -> Self {
                self * o
            }
            fn div(self, o: Self) -> Self {
                self / o
            }
            fn rem(self, o: Self) -> Self {
                self % o
            }
            fn powf(self, o: Self) -> Self {
                f64::from(self).powf(f64::from(o)) as $t
            }
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
            fn nan() -> Self {
                <$t>::NAN
            }
            fn unary(self, op: UnaryOp) -> Self {
                match op {
                    UnaryOp::Neg => -self,
                    UnaryOp::Abs => self.abs(),
                    UnaryOp::Sqrt => self.sqrt(),
                    _ => op.eval(f64::from(self)) as $t,
                }
            }
            // -0.0 below +0.0, as the GPU's `max` and `min` order them.
            fn max(self, o: Self) -> Self {
                if self == o && self.is_sign_negative() {
                    o
                } else {
                    <$t>::max(self, o)
                }
            }
            fn min(self, o: Self) -> Self {
                if self == o && o.is_sign_negative() {
                    o
                } else {
                    <$t>::min(self, o)
                }
            }
        }
    };
}

float!(f32);
float!(f64);

/// Arithmetic `op` on floats.
fn arith_float<T: Float>(
    op: BinaryOp,
    out: &[usize],
    a: (&[T], &[usize]),
    b: (&[T], &[usize]),
) -> R<Elems<T>> {
    match op {
        BinaryOp::Add => map2(out, a, b, |x, y| x + y),
        BinaryOp::Sub => map2(out, a, b, |x, y| x - y),
        BinaryOp::Mul => map2(out, a, b, T::mul),
        BinaryOp::Div => map2(out, a, b, T::div),
        BinaryOp::Rem => map2(out, a, b, T::rem),
        BinaryOp::Pow => map2(out, a, b, T::powf),
        BinaryOp::Max => map2(out, a, b, |x, y| {
            if x.is_nan() || y.is_nan() {
                T::nan()
            } else {
                x.max(y)
            }
        }),
        BinaryOp::Min => map2(out, a, b, |x, y| {
            if x.is_nan() || y.is_nan() {
                T::nan()
            } else {
                x.min(y)
            }
        }),
        _ => fail(format!("`{}` is not arithmetic", op.name())),
    }
}

/// Arithmetic `op` on integers (wrapping).
fn arith_int(
    op: BinaryOp,
    out: &[usize],
    a: (&[i64], &[usize]),
    b: (&[i64], &[usize]),
) -> R<Elems<i64>> {
    let n: usize = out.iter().product();
    if matches!(op, BinaryOp::Div | BinaryOp::Rem) && n > 0 && b.0.contains(&0) {
        return fail(format!("integer `{}` by zero", op.name()));
    }
    match op {
        BinaryOp::Add => map2(out, a, b, i64::wrapping_add),
        BinaryOp::Sub => map2(out, a, b, i64::wrapping_sub),
        BinaryOp::Mul => map2(out, a, b, i64::wrapping_mul),
        BinaryOp::Div => map2(out, a, b, |x, y| if y == 0 { 0 } else { x.wrapping_div(y) }),
        BinaryOp::Rem => map2(out, a, b, |x, y| if y == 0 { 0 } else { x.wrapping_rem(y) }),
        BinaryOp::Pow => map2(out, a, b, int_pow),
        BinaryOp::Max => map2(out, a, b, i64::max),
        BinaryOp::Min => map2(out, a, b, i64::min),
        // Bitwise: on the value widened to 64 bits, wrapped back to the
        // dtype afterwards (the bits PTX's clamped shifts give).
        BinaryOp::BitAnd | BinaryOp::BitOr | BinaryOp::BitXor | BinaryOp::Shl | BinaryOp::Shr => {
            map2(out, a, b, |x, y| op.eval_int(x, y).unwrap_or(0))
        }
        _ => fail(format!("`{}` is not arithmetic", op.name())),
    }
}

/// A comparison of elements of one class.
fn compare<T: Elem>(
    op: BinaryOp,
    out: &[usize],
    a: (&[T], &[usize]),
    b: (&[T], &[usize]),
) -> R<Elems<bool>> {
    match op {
        BinaryOp::Eq => map2(out, a, b, |x, y| x == y),
        BinaryOp::Ne => map2(out, a, b, |x, y| x != y),
        BinaryOp::Lt => map2(out, a, b, |x, y| x < y),
        BinaryOp::Le => map2(out, a, b, |x, y| x <= y),
        BinaryOp::Gt => map2(out, a, b, |x, y| x > y),
        BinaryOp::Ge => map2(out, a, b, |x, y| x >= y),
        _ => fail(format!("`{}` is not a comparison", op.name())),
    }
}

/// Elementwise binary `op` of `a` and `b`, broadcast to the result `out`.
pub(crate) fn binary(op: BinaryOp, a: Arg<'_>, b: Arg<'_>, out: &ValInfo) -> R<TileVal> {
    let shape = &out.shape[..];
    let r = if op.is_comparison() {
        let c = promote(a.0.class(), b.0.class());
        let (x, y) = (coerce(a, c), coerce(b, c));
        let (sa, sb) = (&a.1.shape[..], &b.1.shape[..]);
        TileVal::Bool(match c {
            Class::F32 => compare::<f32>(op, shape, (view(&x)?, sa), (view(&y)?, sb))?,
            Class::F64 => compare::<f64>(op, shape, (view(&x)?, sa), (view(&y)?, sb))?,
            Class::Int => compare::<i64>(op, shape, (view(&x)?, sa), (view(&y)?, sb))?,
            Class::Bool => compare::<bool>(op, shape, (view(&x)?, sa), (view(&y)?, sb))?,
        })
    } else if matches!(op, BinaryOp::And | BinaryOp::Or) {
        let (x, y) = (coerce(a, Class::Bool), coerce(b, Class::Bool));
        let (x, y) = (
            (view::<bool>(&x)?, &a.1.shape[..]),
            (view::<bool>(&y)?, &b.1.shape[..]),
        );
        TileVal::Bool(if op == BinaryOp::And {
            map2(shape, x, y, |p, q| p && q)?
        } else {
            map2(shape, x, y, |p, q| p || q)?
        })
    } else {
        let c = out.num.class;
        let (x, y) = (coerce(a, c), coerce(b, c));
        let (sa, sb) = (&a.1.shape[..], &b.1.shape[..]);
        match c {
            Class::F32 => TileVal::F32(arith_float::<f32>(
                op,
                shape,
                (view(&x)?, sa),
                (view(&y)?, sb),
            )?),
            Class::F64 => TileVal::F64(arith_float::<f64>(
                op,
                shape,
                (view(&x)?, sa),
                (view(&y)?, sb),
            )?),
            Class::Int => TileVal::Int(arith_int(op, shape, (view(&x)?, sa), (view(&y)?, sb))?),
            Class::Bool => {
                let (x, y) = ((view::<bool>(&x)?, sa), (view::<bool>(&y)?, sb));
                TileVal::Bool(match op {
                    BinaryOp::Max | BinaryOp::BitOr => map2(shape, x, y, |p, q| p || q)?,
                    BinaryOp::Min | BinaryOp::Mul | BinaryOp::BitAnd => {
                        map2(shape, x, y, |p, q| p && q)?
                    }
                    BinaryOp::BitXor => map2(shape, x, y, |p, q| p != q)?,
                    _ => return fail(format!("`{}` is not defined on booleans", op.name())),
                })
            }
        }
    };
    Ok(finish(r, out))
}

/// Elementwise unary `op` of `a`, to the result `out`.
/// Philox uniforms of the counters of `c` under `seed`
/// (`tessera_tensor::uniform_f32`, the stream of every backend).
pub(crate) fn rand(seed: u64, c: Arg<'_>, out: &ValInfo) -> R<TileVal> {
    let ctr = coerce(c, Class::Int);
    let f = |n: i64| tessera_tensor::uniform_f32(seed, n as u64);
    Ok(TileVal::F32(map1(
        &out.shape,
        (view::<i64>(&ctr)?, &c.1.shape[..]),
        f,
    )?))
}

pub(crate) fn unary(op: UnaryOp, a: Arg<'_>, out: &ValInfo) -> R<TileVal> {
    let shape = &out.shape[..];
    let sa = &a.1.shape[..];
    let r = match op {
        UnaryOp::Not => {
            let x = coerce(a, Class::Bool);
            TileVal::Bool(map1(shape, (view::<bool>(&x)?, sa), |p| !p)?)
        }
        UnaryOp::Neg | UnaryOp::Abs => {
            let x = coerce(a, out.num.class);
            match out.num.class {
                Class::F32 => TileVal::F32(map1(shape, (view::<f32>(&x)?, sa), |v| v.unary(op))?),
                Class::F64 => TileVal::F64(map1(shape, (view::<f64>(&x)?, sa), |v| v.unary(op))?),
                Class::Int if op == UnaryOp::Neg => {
                    TileVal::Int(map1(shape, (view::<i64>(&x)?, sa), i64::wrapping_neg)?)
                }
                Class::Int => TileVal::Int(map1(shape, (view::<i64>(&x)?, sa), i64::wrapping_abs)?),
                Class::Bool => return fail(format!("`{}` is not defined on booleans", op.name())),
            }
        }
        _ => {
            let c = match out.num.class {
                Class::F32 => Class::F32,
                _ => Class::F64,
            };
            let x = coerce(a, c);
            match c {
                Class::F32 => TileVal::F32(map1(shape, (view::<f32>(&x)?, sa), |v| v.unary(op))?),
                _ => TileVal::F64(map1(shape, (view::<f64>(&x)?, sa), |v| v.unary(op))?),
            }
        }
    };
    Ok(finish(r, out))
}

/// `cond ? a : b`, broadcast to the result `out`.
pub(crate) fn select(cond: Arg<'_>, a: Arg<'_>, b: Arg<'_>, out: &ValInfo) -> R<TileVal> {
    let c = coerce(cond, Class::Bool);
    let c = (view::<bool>(&c)?, &cond.1.shape[..]);
    let k = out.num.class;
    let (x, y) = (coerce(a, k), coerce(b, k));
    let (sa, sb) = (&a.1.shape[..], &b.1.shape[..]);
    let shape = &out.shape[..];
    fn pick<T: Elem>(
        shape: &[usize],
        c: (&[bool], &[usize]),
        x: (&[T], &[usize]),
        y: (&[T], &[usize]),
    ) -> R<TileVal> {
        Ok(T::tile(map3(
            shape,
            c,
            x,
            y,
            |p, u, v| if p { u } else { v },
        )?))
    }
    let r = match k {
        Class::F32 => pick::<f32>(shape, c, (view(&x)?, sa), (view(&y)?, sb))?,
        Class::F64 => pick::<f64>(shape, c, (view(&x)?, sa), (view(&y)?, sb))?,
        Class::Int => pick::<i64>(shape, c, (view(&x)?, sa), (view(&y)?, sb))?,
        Class::Bool => pick::<bool>(shape, c, (view(&x)?, sa), (view(&y)?, sb))?,
    };
    let exact = out.num.holds(a.1.num) && out.num.holds(b.1.num);
    Ok(if exact { r } else { finish(r, out) })
}

/// Conversion of `a` to the result dtype (same shape).
pub(crate) fn cast(a: Arg<'_>, out: &ValInfo) -> R<TileVal> {
    if a.1.shape != out.shape {
        return fail(format!(
            "cast changes the shape from {:?} to {:?}",
            a.1.shape, out.shape
        ));
    }
    Ok(a.0.cast(a.1.num, out.num, true).into_owned())
}

/// `a` broadcast to the result shape (numpy rules).
pub(crate) fn broadcast(a: Arg<'_>, out: &ValInfo) -> R<TileVal> {
    if a.1.num != out.num {
        return fail("broadcast changes the dtype");
    }
    let shape = &out.shape[..];
    let sa = &a.1.shape[..];
    Ok(match a.0 {
        TileVal::F32(e) => TileVal::F32(map1(shape, (e.as_slice(), sa), |x| x)?),
        TileVal::F64(e) => TileVal::F64(map1(shape, (e.as_slice(), sa), |x| x)?),
        TileVal::Int(e) => TileVal::Int(map1(shape, (e.as_slice(), sa), |x| x)?),
        TileVal::Bool(e) => TileVal::Bool(map1(shape, (e.as_slice(), sa), |x| x)?),
    })
}

/// `a` with the result shape (same elements, row-major order kept).
pub(crate) fn reshape(a: Arg<'_>, out: &ValInfo) -> R<TileVal> {
    if a.1.num != out.num || a.1.len != out.len {
        return fail(format!(
            "cannot reshape {}{:?} to {}{:?}",
            a.1.num.dtype, a.1.shape, out.num.dtype, out.shape
        ));
    }
    Ok(a.0.clone())
}

/// `a` with axes reordered: result axis `i` is operand axis `perm[i]`.
pub(crate) fn permute(a: Arg<'_>, perm: &[usize], out: &ValInfo) -> R<TileVal> {
    let rank = a.1.shape.len();
    let mut seen = vec![false; rank];
    let valid = perm.len() == rank
        && out.shape.len() == rank
        && perm
            .iter()
            .all(|&p| p < rank && !std::mem::replace(&mut seen[p], true));
    if !valid || a.1.num != out.num {
        return fail(format!(
            "{perm:?} is not a permutation of a rank-{rank} tile"
        ));
    }
    if perm
        .iter()
        .zip(&out.shape)
        .any(|(&p, &n)| a.1.shape[p] != n)
    {
        return fail(format!(
            "permuting {:?} by {perm:?} does not give {:?}",
            a.1.shape, out.shape
        ));
    }
    let own = strides(&a.1.shape);
    let walk = Walk::with_strides(&out.shape, vec![perm.iter().map(|&p| own[p]).collect()]);
    fn gather<T: Elem>(src: &[T], w: &Walk) -> Elems<T> {
        let (m, s) = (w.row_len(), w.row_stride(0));
        let mut v = Vec::with_capacity(w.len());
        w.rows(|b| v.extend((0..m).map(|j| src[b[0] + j * s])));
        Elems::from_vec(v)
    }
    Ok(match a.0 {
        TileVal::F32(e) => TileVal::F32(gather(e.as_slice(), &walk)),
        TileVal::F64(e) => TileVal::F64(gather(e.as_slice(), &walk)),
        TileVal::Int(e) => TileVal::Int(gather(e.as_slice(), &walk)),
        TileVal::Bool(e) => TileVal::Bool(gather(e.as_slice(), &walk)),
    })
}

//! Reductions along one axis of a tile, in the order the numerics policy
//! prescribes, and the elementwise Kahan step.
//!
//! Sums are computed in the class of the operand (`f32` for fp32 and
//! narrower, `f64` for fp64): `fast` keeps eight interleaved partial sums
//! (a SIMD loop's order) combined at the end, `deterministic` adds in the
//! order the GPU path shares (32 strided lanes, then a halving tree), and
//! `kahan_sum` adds
//! sequentially with compensation ([`kahan_step`]). These are the orders of
//! [`crate::reduce`], so results agree with the graph evaluator.

use super::bcast::map3;
use super::elementwise::{finish, Arg};
use super::value::{Class, Elem, Elems, Num, TileVal, ValInfo};
use super::{fail, R};
use tessera_sema::Policy;
use tessera_tensor::Dtype;
use tessera_tile::Combine;

/// Number of partial sums of the `fast` order.
const LANES: usize = 8;

/// Floats that can be summed.
trait Sum:
    Elem + std::ops::Add<Output = Self> + std::ops::Sub<Output = Self> + std::ops::Mul<Output = Self>
{
    const ZERO: Self;
    const ONE: Self;
    const NEG_INF: Self;
    const INF: Self;
    fn is_nan(self) -> bool;
    fn is_finite(self) -> bool;
    fn is_sign_negative(self) -> bool;
}

macro_rules! sum_impl {
    ($t:ty) => {
        impl Sum for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const NEG_INF: Self = <$t>::NEG_INFINITY;
            const INF: Self = <$t>::INFINITY;
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
            fn is_finite(self) -> bool {
                <$t>::is_finite(self)
            }
            fn is_sign_negative(self) -> bool {
                <$t>::is_sign_negative(self)
            }
        }
    };
}

sum_impl!(f32);
sum_impl!(f64);

/// `LANES` interleaved running sums, combined in lane order at the end.
fn lanes<T: Sum>(xs: &[T]) -> T {
    let mut part = [T::ZERO; LANES];
    for chunk in xs.chunks(LANES) {
        for (p, x) in part.iter_mut().zip(chunk) {
            *p = *p + *x;
        }
    }
    part.iter().fold(T::ZERO, |a, b| a + *b)
}

/// The deterministic order every backend shares: 32 lanes, lane `v`
/// adding elements `v, v + 32, ...` in turn to +0, then a halving tree
/// (lane `v` adds lane `v + off` for `off` = 16, 8, 4, 2, 1).
fn lanes32<T: Sum>(xs: &[T]) -> T {
    let mut lane = [T::ZERO; 32];
    for chunk in xs.chunks(32) {
        for (l, x) in lane.iter_mut().zip(chunk) {
            *l = *l + *x;
        }
    }
    let mut off = 16;
    while off >= 1 {
        for v in 0..off {
            lane[v] = lane[v] + lane[v + off];
        }
        off /= 2;
    }
    lane[0]
}

/// `a + b` and its rounding error, exactly (Knuth's TwoSum: no
/// assumption on which is larger).
fn two_sum<T: Sum>(a: T, b: T) -> (T, T) {
    let s = a + b;
    let bb = s - a;
    (s, (a - (s - bb)) + (b - bb))
}

/// The compensated step of every backend: the running sum is the pair
/// `s - c` (`c` the negated low-order part, below half an ulp of `s`).
/// `s + x` and its exact error (TwoSum, whichever is larger: Kahan's own
/// step loses the error when `x` outweighs `s`, so `[1, 1e8, 1, -1e8]`
/// summed to 0), with the old low part, renormalise into a new pair
/// (TwoSum again), so the low part never grows into a sum of its own
/// (Neumaier's, which loses bits over a million small elements). A sum
/// that is no longer finite stays what it is.
fn kahan_step<T: Sum>(s: T, c: T, x: T) -> (T, T) {
    let (t, e) = two_sum(s, x);
    if !t.is_finite() {
        return (t, T::ZERO);
    }
    let (s2, e2) = two_sum(t, e - c);
    (s2, T::ZERO - e2)
}

/// [`kahan_step`] in f32, for the graph evaluator.
pub(crate) fn kahan_step_f32(s: f32, c: f32, x: f32) -> (f32, f32) {
    kahan_step(s, c, x)
}

/// Sequential compensated summation ([`kahan_step`]); the compensation is
/// folded into the result at the end.
fn kahan<T: Sum>(xs: &[T]) -> T {
    let (mut s, mut c) = (T::ZERO, T::ZERO);
    for &x in xs {
        (s, c) = kahan_step(s, c, x);
    }
    s - c
}

/// The NaN-propagating maximum or minimum (`-inf`/`inf` when empty).
fn extreme<T: Sum>(xs: &[T], max: bool) -> T {
    let mut acc = if max { T::NEG_INF } else { T::INF };
    for &x in xs {
        if x.is_nan() {
            return x;
        }
        // -0.0 below +0.0, as the GPU's `max` and `min` order them.
        let zeros = x == acc && x.is_sign_negative() != acc.is_sign_negative();
        let signed = zeros && (x.is_sign_negative() != max);
        if (max && x > acc) || (!max && x < acc) || signed {
            acc = x;
        }
    }
    acc
}

/// Combines `xs` into one float.
fn combine_float<T: Sum>(xs: &[T], combine: Combine, policy: Policy) -> T {
    match combine {
        Combine::Sum => match policy {
            Policy::Fast => lanes(xs),
            Policy::Deterministic => lanes32(xs),
            Policy::KahanSum => kahan(xs),
        },
        Combine::Max => extreme(xs, true),
        Combine::Min => extreme(xs, false),
        Combine::Prod => xs.iter().fold(T::ONE, |p, x| p * *x),
    }
}

/// Combines `xs` into one integer (wrapping sums: the order is immaterial).
fn combine_int(xs: &[i64], combine: Combine) -> i64 {
    match combine {
        Combine::Sum => xs.iter().fold(0i64, |a, b| a.wrapping_add(*b)),
        Combine::Max => xs.iter().copied().max().unwrap_or(i64::MIN),
        Combine::Min => xs.iter().copied().min().unwrap_or(i64::MAX),
        Combine::Prod => xs.iter().fold(1i64, |a, b| a.wrapping_mul(*b)),
    }
}

/// Applies `f` to each line along the reduced axis of `src` (extents
/// `outer × len × inner`), in row-major order of the result.
fn lines<T: Elem, O>(
    src: &[T],
    (outer, len, inner): (usize, usize, usize),
    f: impl Fn(&[T]) -> O,
) -> Vec<O> {
    let mut out = Vec::with_capacity(outer * inner);
    if inner == 1 {
        out.extend((0..outer).map(|o| f(&src[o * len..][..len])));
        return out;
    }
    let mut line = Vec::with_capacity(len);
    for o in 0..outer {
        for i in 0..inner {
            line.clear();
            line.extend((0..len).map(|t| src[(o * len + t) * inner + i]));
            out.push(f(&line));
        }
    }
    out
}

/// `value` reduced along `axis` by `combine` into a tile of type `out`.
pub(crate) fn reduce(
    combine: Combine,
    value: Arg<'_>,
    axis: usize,
    policy: Policy,
    out: &ValInfo,
) -> R<TileVal> {
    let shape = &value.1.shape;
    if axis >= shape.len() {
        return fail(format!(
            "axis {axis} of a rank-{} tile cannot be reduced",
            shape.len()
        ));
    }
    let mut kept = shape.clone();
    kept.remove(axis);
    if kept != out.shape {
        return fail(format!(
            "reducing axis {axis} of {shape:?} does not give {:?}",
            out.shape
        ));
    }
    let dims = (
        shape[..axis].iter().product(),
        shape[axis],
        shape[axis + 1..].iter().product(),
    );
    let r = match value.0 {
        TileVal::F32(e) => TileVal::F32(Elems::from_vec(lines(e.as_slice(), dims, |xs| {
            combine_float(xs, combine, policy)
        }))),
        TileVal::F64(e) => TileVal::F64(Elems::from_vec(lines(e.as_slice(), dims, |xs| {
            combine_float(xs, combine, policy)
        }))),
        TileVal::Int(e) => TileVal::Int(Elems::from_vec(lines(e.as_slice(), dims, |xs| {
            combine_int(xs, combine)
        }))),
        TileVal::Bool(e) => {
            let f = match combine {
                Combine::Max => |xs: &[bool]| xs.iter().any(|x| *x),
                Combine::Min => |xs: &[bool]| xs.iter().all(|x| *x),
                Combine::Sum | Combine::Prod => return fail("cannot sum or multiply booleans"),
            };
            TileVal::Bool(Elems::from_vec(lines(e.as_slice(), dims, f)))
        }
    };
    let from = Num::new(match r.class() {
        Class::F32 => Dtype::Fp32,
        Class::F64 => Dtype::Fp64,
        Class::Int => Dtype::Int64,
        Class::Bool => Dtype::Bool,
    });
    Ok(if r.class() == out.num.class {
        finish(r, out)
    } else {
        r.cast(from, out.num, true).into_owned()
    })
}

/// The Kahan step `(sum', comp')` of adding `x` to `sum` with compensation
/// `comp`, elementwise, into tiles of types `outs`.
pub(crate) fn kahan_add(
    sum: Arg<'_>,
    comp: Arg<'_>,
    x: Arg<'_>,
    outs: (&ValInfo, &ValInfo),
) -> R<(TileVal, TileVal)> {
    let class = outs.0.num.class;
    if outs.1.num.class != class || outs.0.shape != outs.1.shape {
        return fail("the sum and compensation of a Kahan step differ in type");
    }
    if [sum.0.class(), comp.0.class(), x.0.class()] != [class; 3] {
        return fail("the operands of a Kahan step differ in class from its results");
    }
    fn step<T: Sum>(
        shape: &[usize],
        s: (&[T], &[usize]),
        c: (&[T], &[usize]),
        x: (&[T], &[usize]),
    ) -> R<(Vec<T>, Vec<T>)> {
        let pairs = map3(shape, s, c, x, kahan_step)?;
        Ok(pairs.as_slice().iter().copied().unzip())
    }
    let shape = &outs.0.shape[..];
    let (ss, cs, xs) = (&sum.1.shape[..], &comp.1.shape[..], &x.1.shape[..]);
    let (s, c) = match (sum.0, comp.0, x.0) {
        (TileVal::F32(s), TileVal::F32(c), TileVal::F32(x)) => {
            let (s, c) = step(
                shape,
                (s.as_slice(), ss),
                (c.as_slice(), cs),
                (x.as_slice(), xs),
            )?;
            (
                TileVal::F32(Elems::from_vec(s)),
                TileVal::F32(Elems::from_vec(c)),
            )
        }
        (TileVal::F64(s), TileVal::F64(c), TileVal::F64(x)) => {
            let (s, c) = step(
                shape,
                (s.as_slice(), ss),
                (c.as_slice(), cs),
                (x.as_slice(), xs),
            )?;
            (
                TileVal::F64(Elems::from_vec(s)),
                TileVal::F64(Elems::from_vec(c)),
            )
        }
        _ => return fail("a Kahan step needs float tiles"),
    };
    Ok((finish(s, outs.0), finish(c, outs.1)))
}

//! Tile values of a program: elements by storage class, single elements
//! without a heap allocation, and the rules of each dtype (rounding of
//! narrow floats, wrapping and saturation of narrow integers).

use super::{fail, R};
use tessera_tensor::{Dtype, StorageClass};

/// How the elements of a dtype are held while a program computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    /// fp32, tf32, bf16, fp16 and fp8: `f32`, rounded to the dtype.
    F32,
    /// fp64.
    F64,
    /// Every integer dtype: `i64`, wrapped or saturated to the dtype.
    Int,
    /// Booleans.
    Bool,
}

impl Class {
    /// The class of `d`.
    pub fn of(d: Dtype) -> Class {
        match StorageClass::of(d) {
            StorageClass::F32 => Class::F32,
            StorageClass::F64 => Class::F64,
            StorageClass::I64 => Class::Int,
            StorageClass::Bool => Class::Bool,
        }
    }
}

/// A dtype with its class: what a computed element is rounded to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Num {
    /// The dtype.
    pub dtype: Dtype,
    /// Its class.
    pub class: Class,
}

/// Rounds the `f32` `x` to nearest even, dropping the low `drop` mantissa
/// bits (bf16 drops 16, tf32 13). Overflow gives infinity, as the hardware
/// conversion does; NaN stays NaN.
fn round_bits(x: f32, drop: u32) -> f32 {
    if x.is_nan() {
        return x;
    }
    let b = x.to_bits();
    let lsb = (b >> drop) & 1;
    let half = (1u32 << (drop - 1)) - 1;
    f32::from_bits(b.wrapping_add(half + lsb) & !((1u32 << drop) - 1))
}

impl Num {
    /// The rules of `dtype`.
    pub fn new(dtype: Dtype) -> Num {
        Num {
            dtype,
            class: Class::of(dtype),
        }
    }

    /// Whether every value of the class is a value of the dtype (fp32, fp64,
    /// int64, bool): results need no rounding.
    pub fn is_exact(self) -> bool {
        matches!(
            self.dtype,
            Dtype::Fp32 | Dtype::Fp64 | Dtype::Int64 | Dtype::Bool
        )
    }

    /// Whether a value of dtype `from` of the same class is always a value
    /// of this dtype (so converting it changes nothing).
    pub fn holds(self, from: Num) -> bool {
        self.class == from.class && (self.is_exact() || self.dtype == from.dtype)
    }

    /// `x` rounded to this (F32-class) dtype.
    #[inline]
    pub fn round_f32(self, x: f32) -> f32 {
        match self.dtype {
            Dtype::Fp32 => x,
            Dtype::Bf16 => round_bits(x, 16),
            Dtype::Tf32 => round_bits(x, 13),
            d => d.round(f64::from(x)) as f32,
        }
    }

    /// `x` rounded to this (F32-class) dtype from an `f64`, once.
    pub fn round_f64_to_f32(self, x: f64) -> f32 {
        match self.dtype {
            Dtype::Fp32 => x as f32,
            d => d.round(x) as f32,
        }
    }

    /// `x` wrapped to the width of this (integer) dtype, two's complement.
    #[inline]
    pub fn wrap(self, x: i64) -> i64 {
        self.dtype.wrap_int(x)
    }

    /// `x` saturated to the range of this (integer) dtype.
    pub fn saturate(self, x: i64) -> i64 {
        self.dtype.int_range().map_or(x, |(lo, hi)| x.clamp(lo, hi))
    }

    /// The integer this (integer) dtype holds for the float `x`: truncated
    /// toward zero and saturated, NaN to 0.
    pub fn int_of_float(self, x: f64) -> i64 {
        self.dtype.round_int(x).unwrap_or(x as i64)
    }
}

/// One element of any class.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Scalar {
    /// An F32-class element.
    F32(f32),
    /// An fp64 element.
    F64(f64),
    /// An integer.
    Int(i64),
    /// A boolean.
    Bool(bool),
}

impl Scalar {
    /// The element of dtype `to` for the number `x` (a constant, the `other`
    /// of a load): rounded, truncated or tested against zero.
    pub fn from_f64(x: f64, to: Num) -> Scalar {
        Scalar::F64(x).cast(to, false)
    }

    /// The element as an `f64` (booleans are 0 and 1).
    pub fn as_f64(self) -> f64 {
        match self {
            Scalar::F32(x) => f64::from(x),
            Scalar::F64(x) => x,
            Scalar::Int(x) => x as f64,
            Scalar::Bool(x) => f64::from(u8::from(x)),
        }
    }

    /// The element converted to dtype `to`: floats rounded to nearest even,
    /// floats to integers truncated toward zero and saturated, integers to
    /// narrower integers wrapped (`wrap`, as a cast) or saturated (as a
    /// store), anything to bool tested against zero.
    pub fn cast(self, to: Num, wrap: bool) -> Scalar {
        match to.class {
            Class::F64 => Scalar::F64(self.as_f64()),
            Class::F32 => Scalar::F32(match self {
                Scalar::F32(x) => to.round_f32(x),
                Scalar::F64(x) => to.round_f64_to_f32(x),
                Scalar::Int(x) if to.dtype == Dtype::Fp32 => x as f32,
                Scalar::Int(x) => to.round_f64_to_f32(x as f64),
                Scalar::Bool(x) => f32::from(u8::from(x)),
            }),
            Class::Int => Scalar::Int(match self {
                Scalar::F32(x) => to.int_of_float(f64::from(x)),
                Scalar::F64(x) => to.int_of_float(x),
                Scalar::Int(x) if wrap => to.wrap(x),
                Scalar::Int(x) => to.saturate(x),
                Scalar::Bool(x) => i64::from(x),
            }),
            Class::Bool => Scalar::Bool(match self {
                Scalar::F32(x) => x != 0.0,
                Scalar::F64(x) => x != 0.0,
                Scalar::Int(x) => x != 0,
                Scalar::Bool(x) => x,
            }),
        }
    }
}

/// The elements of a tile: one inline, or a vector.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Elems<T> {
    /// A single element (a scalar, or any tile of one element).
    One(T),
    /// Any number of elements.
    Many(Vec<T>),
}

impl<T: Copy> Elems<T> {
    /// The elements as a slice.
    #[inline]
    pub fn as_slice(&self) -> &[T] {
        match self {
            Elems::One(x) => std::slice::from_ref(x),
            Elems::Many(v) => v,
        }
    }

    /// The elements of a vector (one element is held inline).
    pub fn from_vec(v: Vec<T>) -> Elems<T> {
        match v.as_slice() {
            [x] => Elems::One(*x),
            _ => Elems::Many(v),
        }
    }

    /// The first `n` items of `it`, without a heap allocation when `n` is 1.
    pub fn collect(n: usize, mut it: impl Iterator<Item = T>) -> Elems<T> {
        if n == 1 {
            if let Some(x) = it.next() {
                return Elems::One(x);
            }
        }
        let mut v = Vec::with_capacity(n);
        v.extend(it.take(n));
        Elems::Many(v)
    }

    /// Applies `f` to every element in place.
    pub fn map_in_place(&mut self, f: impl Fn(T) -> T) {
        match self {
            Elems::One(x) => *x = f(*x),
            Elems::Many(v) => v.iter_mut().for_each(|x| *x = f(*x)),
        }
    }
}

/// A tile's elements, row-major, in the class of its dtype. The shape is
/// that of the value's type (evaluated once per launch).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum TileVal {
    /// F32-class elements.
    F32(Elems<f32>),
    /// fp64 elements.
    F64(Elems<f64>),
    /// Integers.
    Int(Elems<i64>),
    /// Booleans.
    Bool(Elems<bool>),
}

/// An element type of tiles.
pub(crate) trait Elem: Copy + PartialEq + PartialOrd + Send + Sync + 'static {
    /// The elements of `t` if it is of this class.
    fn view(t: &TileVal) -> Option<&[Self]>;
    /// A tile of these elements.
    fn tile(e: Elems<Self>) -> TileVal;
    /// As a scalar.
    fn scalar(self) -> Scalar;
    /// From a scalar of this class (`None` for another class).
    fn from_scalar(s: Scalar) -> Option<Self>;
}

macro_rules! elem {
    ($t:ty, $variant:ident) => {
        impl Elem for $t {
            #[inline]
            fn view(t: &TileVal) -> Option<&[Self]> {
                match t {
                    TileVal::$variant(e) => Some(e.as_slice()),
                    _ => None,
                }
            }
            #[inline]
            fn tile(e: Elems<Self>) -> TileVal {
                TileVal::$variant(e)
            }
            #[inline]
            fn scalar(self) -> Scalar {
                Scalar::$variant(self)
            }
            #[inline]
            fn from_scalar(s: Scalar) -> Option<Self> {
                match s {
                    Scalar::$variant(x) => Some(x),
                    _ => None,
                }
            }
        }
    };
}

elem!(f32, F32);
elem!(f64, F64);
elem!(i64, Int);
elem!(bool, Bool);

impl TileVal {
    /// The class of the elements.
    pub fn class(&self) -> Class {
        match self {
            TileVal::F32(_) => Class::F32,
            TileVal::F64(_) => Class::F64,
            TileVal::Int(_) => Class::Int,
            TileVal::Bool(_) => Class::Bool,
        }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        match self {
            TileVal::F32(e) => e.as_slice().len(),
            TileVal::F64(e) => e.as_slice().len(),
            TileVal::Int(e) => e.as_slice().len(),
            TileVal::Bool(e) => e.as_slice().len(),
        }
    }

    /// `n` copies of `s`.
    pub fn splat(s: Scalar, n: usize) -> TileVal {
        fn fill<T: Elem>(x: T, n: usize) -> TileVal {
            T::tile(if n == 1 {
                Elems::One(x)
            } else {
                Elems::Many(vec![x; n])
            })
        }
        match s {
            Scalar::F32(x) => fill(x, n),
            Scalar::F64(x) => fill(x, n),
            Scalar::Int(x) => fill(x, n),
            Scalar::Bool(x) => fill(x, n),
        }
    }

    /// Element `i`.
    pub fn get(&self, i: usize) -> Option<Scalar> {
        match self {
            TileVal::F32(e) => e.as_slice().get(i).map(|x| Scalar::F32(*x)),
            TileVal::F64(e) => e.as_slice().get(i).map(|x| Scalar::F64(*x)),
            TileVal::Int(e) => e.as_slice().get(i).map(|x| Scalar::Int(*x)),
            TileVal::Bool(e) => e.as_slice().get(i).map(|x| Scalar::Bool(*x)),
        }
    }

    /// The only element, if there is exactly one.
    pub fn only(&self) -> Option<Scalar> {
        if self.len() == 1 {
            self.get(0)
        } else {
            None
        }
    }

    /// The elements converted from dtype `from` to dtype `to` (see
    /// [`Scalar::cast`]); nothing is copied when no element changes.
    pub fn cast(&self, from: Num, to: Num, wrap: bool) -> std::borrow::Cow<'_, TileVal> {
        use std::borrow::Cow;
        if to.holds(from) {
            return Cow::Borrowed(self);
        }
        if from.class == to.class && (wrap || to.class != Class::Int) {
            let mut t = self.clone();
            t.round_to(to);
            return Cow::Owned(t);
        }
        fn conv_to<S: Elem, D: Elem>(src: &[S], to: Num, wrap: bool) -> TileVal {
            // `Scalar::cast` gives an element of `to`'s class, which is `D`'s.
            let each = src
                .iter()
                .filter_map(|x| D::from_scalar(x.scalar().cast(to, wrap)));
            D::tile(Elems::collect(src.len(), each))
        }
        fn conv<S: Elem>(src: &[S], to: Num, wrap: bool) -> TileVal {
            match to.class {
                Class::F32 => conv_to::<S, f32>(src, to, wrap),
                Class::F64 => conv_to::<S, f64>(src, to, wrap),
                Class::Int => conv_to::<S, i64>(src, to, wrap),
                Class::Bool => conv_to::<S, bool>(src, to, wrap),
            }
        }
        Cow::Owned(match self {
            TileVal::F32(e) => conv(e.as_slice(), to, wrap),
            TileVal::F64(e) => conv(e.as_slice(), to, wrap),
            TileVal::Int(e) => conv(e.as_slice(), to, wrap),
            TileVal::Bool(e) => conv(e.as_slice(), to, wrap),
        })
    }

    /// Rounds F32-class elements to `to`'s dtype and wraps integers to its
    /// width, in place (a computed result becoming a value of its type).
    pub fn round_to(&mut self, to: Num) {
        if to.is_exact() {
            return;
        }
        match self {
            TileVal::F32(e) if to.class == Class::F32 => e.map_in_place(|x| to.round_f32(x)),
            TileVal::Int(e) if to.class == Class::Int => e.map_in_place(|x| to.wrap(x)),
            _ => {}
        }
    }
}

/// The type of a value at one launch: its evaluated shape and its dtype.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ValInfo {
    /// Extents.
    pub shape: Vec<usize>,
    /// The number of elements.
    pub len: usize,
    /// The dtype.
    pub num: Num,
}

/// Checks that `t` has the class and element count of type `info`.
pub(crate) fn check_fits(t: &TileVal, info: &ValInfo, what: &dyn Fn() -> String) -> R<()> {
    if t.class() != info.num.class || t.len() != info.len {
        return fail(format!(
            "{} has type {}{:?} but was given {} {:?} elements",
            what(),
            info.num.dtype,
            info.shape,
            t.len(),
            t.class()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_rounding_matches_the_runtime() {
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        for _ in 0..100_000 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let x = f32::from_bits((state >> 32) as u32);
            if x.is_nan() {
                continue;
            }
            for d in [Dtype::Bf16, Dtype::Tf32] {
                let want = d.round(f64::from(x)) as f32;
                let got = Num::new(d).round_f32(x);
                assert_eq!(got.to_bits(), want.to_bits(), "{d} of {x:e}");
            }
        }
    }

    #[test]
    fn casts_wrap_and_stores_saturate() {
        let i8n = Num::new(Dtype::Int8);
        assert_eq!(Scalar::Int(300).cast(i8n, true), Scalar::Int(44));
        assert_eq!(Scalar::Int(300).cast(i8n, false), Scalar::Int(127));
        assert_eq!(Scalar::F32(-3.7).cast(i8n, true), Scalar::Int(-3));
        assert_eq!(Scalar::F64(1e9).cast(i8n, true), Scalar::Int(127));
        assert_eq!(Scalar::F64(f64::NAN).cast(i8n, true), Scalar::Int(0));
    }
}

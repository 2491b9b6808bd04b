//! Host tensors: a dtype, a row-major shape and the element values in a storage class.
//!
//! # Invariants
//!
//! A well-formed [`Tensor`] (see [`Tensor::validate`]) satisfies:
//!
//! * `data` has the storage class of `dtype` ([`StorageClass::of`]): fp64 → `F64`; fp32,
//!   tf32, bf16, fp16 and both fp8 formats → `F32`; every integer dtype → `I64`; bool → `Bool`.
//! * Every stored value is one the dtype can represent: the `F32` values of a bf16 tensor are
//!   bf16 values, the `I64` values of an int8 tensor lie in `-128..=127`. Constructors and
//!   setters enforce this with [`Dtype::round`].
//! * `data.len()` is the product of `shape` (1 for rank 0), and elements are row-major.
//!
//! The fields are public so that backends can move buffers in and out without copies; the
//! methods never panic on a tensor that breaks these rules (they return errors or `None`).

use std::collections::TryReserveError;
use std::fmt;

use crate::dtype::Dtype;

/// The element values of a [`Tensor`], in the storage class of its dtype.
#[derive(Clone, Debug, PartialEq)]
pub enum Data {
    /// fp64 values.
    F64(Vec<f64>),
    /// fp32, tf32, bf16, fp16, fp8 values, each exactly representable in the tensor's dtype.
    F32(Vec<f32>),
    /// Integer values, each in the range of the tensor's integer dtype.
    I64(Vec<i64>),
    /// Booleans.
    Bool(Vec<bool>),
}

/// The kinds of [`Data`]: which Rust type holds the elements of a dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StorageClass {
    /// `Data::F64`.
    F64,
    /// `Data::F32`.
    F32,
    /// `Data::I64`.
    I64,
    /// `Data::Bool`.
    Bool,
}

impl StorageClass {
    /// The storage class that holds the elements of `dtype`.
    pub fn of(dtype: Dtype) -> StorageClass {
        match dtype {
            Dtype::Fp64 => StorageClass::F64,
            Dtype::Fp32
            | Dtype::Tf32
            | Dtype::Bf16
            | Dtype::Fp16
            | Dtype::Fp8E4m3
            | Dtype::Fp8E5m2 => StorageClass::F32,
            Dtype::Int8 | Dtype::Int16 | Dtype::Int32 | Dtype::Int64 | Dtype::Uint8 => {
                StorageClass::I64
            }
            Dtype::Bool => StorageClass::Bool,
        }
    }
}

impl Data {
    /// The number of elements.
    pub fn len(&self) -> usize {
        match self {
            Data::F64(v) => v.len(),
            Data::F32(v) => v.len(),
            Data::I64(v) => v.len(),
            Data::Bool(v) => v.len(),
        }
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The storage class of this data.
    pub fn storage_class(&self) -> StorageClass {
        match self {
            Data::F64(_) => StorageClass::F64,
            Data::F32(_) => StorageClass::F32,
            Data::I64(_) => StorageClass::I64,
            Data::Bool(_) => StorageClass::Bool,
        }
    }

    /// Element `i` as `f64` (int64 values beyond 2^53 round), or `None` past the end.
    pub fn get_f64(&self, i: usize) -> Option<f64> {
        match self {
            Data::F64(v) => v.get(i).copied(),
            Data::F32(v) => v.get(i).map(|&x| f64::from(x)),
            Data::I64(v) => v.get(i).map(|&x| x as f64),
            Data::Bool(v) => v.get(i).map(|&x| if x { 1.0 } else { 0.0 }),
        }
    }

    /// Element `i` as `i64` (floats truncated and saturated, NaN → 0), or `None` past the end.
    pub fn get_i64(&self, i: usize) -> Option<i64> {
        match self {
            Data::F64(v) => v.get(i).map(|&x| x as i64),
            Data::F32(v) => v.get(i).map(|&x| x as i64),
            Data::I64(v) => v.get(i).copied(),
            Data::Bool(v) => v.get(i).map(|&x| i64::from(x)),
        }
    }
}

/// A shape or index that does not fit, or values that do not match a shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShapeError {
    /// The product of the dimensions overflows `usize` (or the byte size does).
    Overflow {
        /// The offending shape.
        shape: Vec<usize>,
    },
    /// The host could not allocate the elements.
    OutOfMemory {
        /// The shape whose elements could not be allocated.
        shape: Vec<usize>,
    },
    /// The number of values given differs from the number of elements of the shape.
    LengthMismatch {
        /// The shape.
        shape: Vec<usize>,
        /// The number of elements of the shape.
        expected: usize,
        /// The number of values given.
        got: usize,
    },
    /// An element index past the end.
    IndexOutOfBounds {
        /// The index.
        index: usize,
        /// The number of elements.
        len: usize,
    },
    /// The tensor's data is not in the storage class of its dtype.
    WrongStorage {
        /// The tensor's dtype.
        dtype: Dtype,
        /// The storage class its data has.
        found: StorageClass,
    },
}

/// Writes a shape the way Tessera's types do: `[2, 3]`.
struct ShapeText<'a>(&'a [usize]);

impl fmt::Display for ShapeText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (k, d) in self.0.iter().enumerate() {
            if k > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

impl fmt::Display for ShapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShapeError::Overflow { shape } => write!(
                f,
                "shape {} has too many elements to address",
                ShapeText(shape)
            ),
            ShapeError::OutOfMemory { shape } => write!(
                f,
                "out of host memory allocating a tensor of shape {}",
                ShapeText(shape)
            ),
            ShapeError::LengthMismatch {
                shape,
                expected,
                got,
            } => write!(
                f,
                "shape {} has {expected} elements but {got} values were given",
                ShapeText(shape)
            ),
            ShapeError::IndexOutOfBounds { index, len } => {
                write!(
                    f,
                    "element index {index} is out of bounds for {len} elements"
                )
            }
            ShapeError::WrongStorage { dtype, found } => write!(
                f,
                "a {dtype} tensor must hold {:?} data, not {found:?}",
                StorageClass::of(*dtype)
            ),
        }
    }
}

impl std::error::Error for ShapeError {}

/// The number of elements of `shape` (1 for rank 0), or `None` if it overflows `usize`.
pub fn numel(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d))
}

/// Row-major element strides of `shape`: the last axis has stride 1. Products saturate at
/// `usize::MAX`, which can only happen for shapes with a zero dimension (no elements).
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut out = vec![0; shape.len()];
    let mut stride = 1usize;
    for (slot, &dim) in out.iter_mut().zip(shape).rev() {
        *slot = stride;
        stride = stride.saturating_mul(dim);
    }
    out
}

/// A tensor's extents and byte strides as a TMA tensor map describes
/// them: extents innermost first, and the byte stride of every dimension
/// but the innermost (whose elements are `elem_bytes` apart), innermost
/// first. One rule for the driver's encoder and the simulator's.
pub fn tensor_map_extents(shape: &[usize], elem_bytes: u64) -> (Vec<u64>, Vec<u64>) {
    let dims: Vec<u64> = shape.iter().rev().map(|&d| d as u64).collect();
    let mut byte_strides = Vec::with_capacity(dims.len().saturating_sub(1));
    let mut s = elem_bytes;
    for d in dims.iter().take(dims.len().saturating_sub(1)) {
        s = s.saturating_mul(*d);
        byte_strides.push(s);
    }
    (dims, byte_strides)
}

/// The checked element count of `shape`, with the byte count for `dtype` also checked.
fn checked_count(dtype: Dtype, shape: &[usize]) -> Result<usize, ShapeError> {
    numel(shape)
        .filter(|n| {
            n.checked_mul((dtype.size_bytes() as usize).max(8))
                .is_some()
        })
        .ok_or_else(|| ShapeError::Overflow {
            shape: shape.to_vec(),
        })
}

/// Collects the `n` items of `items`, or reports running out of memory instead of aborting.
fn try_collect<T>(
    n: usize,
    items: impl Iterator<Item = T>,
    shape: &[usize],
) -> Result<Vec<T>, ShapeError> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_: TryReserveError| ShapeError::OutOfMemory {
            shape: shape.to_vec(),
        })?;
    v.extend(items.take(n));
    Ok(v)
}

/// A host tensor: see the module documentation for its invariants.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    /// The element type.
    pub dtype: Dtype,
    /// The dimensions, outermost first; empty for a scalar (rank 0).
    pub shape: Vec<usize>,
    /// The elements in row-major order, in the storage class of `dtype`.
    pub data: Data,
}

impl Tensor {
    /// A tensor of zeros.
    pub fn zeros(dtype: Dtype, shape: &[usize]) -> Result<Tensor, ShapeError> {
        Tensor::full(dtype, shape, 0.0)
    }

    /// A tensor whose every element is `dtype.round(value)`.
    pub fn full(dtype: Dtype, shape: &[usize], value: f64) -> Result<Tensor, ShapeError> {
        Tensor::from_fn(dtype, shape, |_| value)
    }

    /// A rank-0 tensor holding `dtype.round(value)`.
    pub fn scalar(dtype: Dtype, value: f64) -> Tensor {
        let data = store_vec(dtype, std::iter::once(value));
        Tensor {
            dtype,
            shape: Vec::new(),
            data,
        }
    }

    /// A tensor from row-major values, each rounded with [`Dtype::round`].
    pub fn from_f64(dtype: Dtype, shape: &[usize], values: &[f64]) -> Result<Tensor, ShapeError> {
        let n = checked_count(dtype, shape)?;
        if n != values.len() {
            return Err(ShapeError::LengthMismatch {
                shape: shape.to_vec(),
                expected: n,
                got: values.len(),
            });
        }
        Ok(Tensor {
            dtype,
            shape: shape.to_vec(),
            data: store_vec(dtype, values.iter().copied()),
        })
    }

    /// A tensor whose row-major element `i` is `dtype.round(f(i))`, with `f` called once per
    /// element in increasing `i`.
    pub fn from_fn(
        dtype: Dtype,
        shape: &[usize],
        mut f: impl FnMut(usize) -> f64,
    ) -> Result<Tensor, ShapeError> {
        let n = checked_count(dtype, shape)?;
        let values = (0..n).map(&mut f);
        let data = match StorageClass::of(dtype) {
            StorageClass::F64 => Data::F64(try_collect(n, values, shape)?),
            StorageClass::F32 => Data::F32(try_collect(
                n,
                values.map(|x| dtype.round(x) as f32),
                shape,
            )?),
            StorageClass::I64 => {
                Data::I64(try_collect(n, values.map(|x| store_int(dtype, x)), shape)?)
            }
            StorageClass::Bool => Data::Bool(try_collect(n, values.map(|x| x != 0.0), shape)?),
        };
        Ok(Tensor {
            dtype,
            shape: shape.to_vec(),
            data,
        })
    }

    /// A tensor of `shape` whose row-major element `i` is element
    /// `flat[i]` of this one, copied exactly (a slice, a gather). The
    /// caller guarantees every index is in range and `flat` has as many
    /// entries as `shape` has elements.
    pub fn take(&self, shape: &[usize], flat: &[usize]) -> Tensor {
        fn pick<T: Copy>(v: &[T], flat: &[usize]) -> Vec<T> {
            flat.iter().map(|&i| v[i]).collect()
        }
        let data = match &self.data {
            Data::F64(v) => Data::F64(pick(v, flat)),
            Data::F32(v) => Data::F32(pick(v, flat)),
            Data::I64(v) => Data::I64(pick(v, flat)),
            Data::Bool(v) => Data::Bool(pick(v, flat)),
        };
        Tensor {
            dtype: self.dtype,
            shape: shape.to_vec(),
            data,
        }
    }

    /// Checks the invariants of the module documentation except value representability.
    pub fn validate(&self) -> Result<(), ShapeError> {
        let expected = StorageClass::of(self.dtype);
        if self.data.storage_class() != expected {
            return Err(ShapeError::WrongStorage {
                dtype: self.dtype,
                found: self.data.storage_class(),
            });
        }
        let n = numel(&self.shape).ok_or_else(|| ShapeError::Overflow {
            shape: self.shape.clone(),
        })?;
        if n != self.data.len() {
            return Err(ShapeError::LengthMismatch {
                shape: self.shape.clone(),
                expected: n,
                got: self.data.len(),
            });
        }
        Ok(())
    }

    /// The number of elements held.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether the tensor holds no elements.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The number of dimensions.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Row-major element strides of the tensor's shape (see [`strides`]).
    pub fn strides(&self) -> Vec<usize> {
        strides(&self.shape)
    }

    /// Every element as `f64`, row-major (exact except int64 values beyond 2^53).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        match &self.data {
            Data::F64(v) => v.clone(),
            Data::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            Data::I64(v) => v.iter().map(|&x| x as f64).collect(),
            Data::Bool(v) => v.iter().map(|&x| if x { 1.0 } else { 0.0 }).collect(),
        }
    }

    /// Element `i` (row-major) as `f64`, or `None` past the end.
    pub fn get_f64(&self, i: usize) -> Option<f64> {
        self.data.get_f64(i)
    }

    /// Stores `self.dtype.round(v)` at element `i` (row-major).
    pub fn set_f64(&mut self, i: usize, v: f64) -> Result<(), ShapeError> {
        let len = self.len();
        let out_of_bounds = ShapeError::IndexOutOfBounds { index: i, len };
        let dtype = self.dtype;
        match &mut self.data {
            Data::F64(d) => *d.get_mut(i).ok_or(out_of_bounds)? = dtype.round(v),
            Data::F32(d) => *d.get_mut(i).ok_or(out_of_bounds)? = dtype.round(v) as f32,
            Data::I64(d) => *d.get_mut(i).ok_or(out_of_bounds)? = store_int(dtype, v),
            Data::Bool(d) => *d.get_mut(i).ok_or(out_of_bounds)? = dtype.round(v) != 0.0,
        }
        Ok(())
    }

    /// This tensor as the language's `x as dtype` gives it: an integer to an
    /// integer wraps to the width of `to` (two's complement), as integer
    /// arithmetic does on every backend; other conversions are
    /// [`Tensor::convert`]'s.
    pub fn cast(&self, to: Dtype) -> Tensor {
        match (&self.data, to.int_range()) {
            (Data::I64(v), Some(_)) => Tensor {
                dtype: to,
                shape: self.shape.clone(),
                data: Data::I64(v.iter().map(|&x| to.wrap_int(x)).collect()),
            },
            _ => self.convert(to),
        }
    }

    /// This tensor converted to `to`, element by element with [`Dtype::round`]. Integer to
    /// integer conversion saturates exactly (without going through `f64`); other conversions
    /// go through `f64`, which is exact except for int64 values beyond 2^53.
    pub fn convert(&self, to: Dtype) -> Tensor {
        let data = match (&self.data, to.int_range()) {
            (Data::I64(v), Some((min, max))) => {
                Data::I64(v.iter().map(|&x| x.clamp(min, max)).collect())
            }
            (Data::Bool(v), Some(_)) => Data::I64(v.iter().map(|&x| i64::from(x)).collect()),
            (Data::I64(v), None) if to == Dtype::Bool => {
                Data::Bool(v.iter().map(|&x| x != 0).collect())
            }
            _ => store_vec(to, (0..self.len()).filter_map(|i| self.get_f64(i))),
        };
        Tensor {
            dtype: to,
            shape: self.shape.clone(),
            data,
        }
    }

    /// [`Tensor::convert`], refusing what would change values silently:
    /// for an integer or `bool` dtype, a NaN or infinity, and for an
    /// integer one a fraction or a value outside its range (labels of
    /// 2.7, an int64 of 2^31 + 5); for a float dtype, a finite value
    /// past its range (which would become infinite). Wider floats round
    /// as `convert` rounds (fp64 to fp32 is expected). The error names the
    /// first such value and its flat index.
    pub fn convert_exact(&self, to: Dtype) -> Result<Tensor, String> {
        let to_int = to.int_range().is_some() || to == Dtype::Bool;
        let values = || (0..self.len()).filter_map(|i| self.get_f64(i).map(|x| (i, x)));
        if to_int {
            if let Some((i, x)) = values().find(|(_, x)| !x.is_finite()) {
                return Err(format!(
                    "holds {x} at flat index {i}, which no `{to}` value represents"
                ));
            }
        }
        if let Some((lo, hi)) = to.int_range() {
            let bad = values().find(|(_, x)| x.fract() != 0.0 || *x < lo as f64 || *x > hi as f64);
            if let Some((i, x)) = bad {
                let why = if x.fract() != 0.0 {
                    "not an integer".to_string()
                } else {
                    format!("outside {lo}..={hi}")
                };
                return Err(format!(
                    "holds {x} at flat index {i}, which `{to}` cannot hold ({why})"
                ));
            }
        }
        let converted = self.convert(to);
        if !to_int {
            let overflow = values().find(|&(i, x)| {
                x.is_finite() && converted.get_f64(i).is_some_and(|y| !y.is_finite())
            });
            if let Some((i, x)) = overflow {
                return Err(format!(
                    "holds {x:e} at flat index {i}, beyond the range of `{to}`"
                ));
            }
        }
        Ok(converted)
    }
}

/// The integer an integer dtype stores for `v`; for other dtypes (a malformed tensor) the
/// int64 rule.
fn store_int(dtype: Dtype, v: f64) -> i64 {
    dtype
        .round_int(v)
        .unwrap_or_else(|| Dtype::Int64.round_int(v).unwrap_or(0))
}

/// Rounds values into the storage class of `dtype`.
fn store_vec(dtype: Dtype, values: impl Iterator<Item = f64>) -> Data {
    match StorageClass::of(dtype) {
        StorageClass::F64 => Data::F64(values.collect()),
        StorageClass::F32 => Data::F32(values.map(|x| dtype.round(x) as f32).collect()),
        StorageClass::I64 => Data::I64(values.map(|x| store_int(dtype, x)).collect()),
        StorageClass::Bool => Data::Bool(values.map(|x| x != 0.0).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::{Dtype, Tensor};

    /// What `--input` and `load_npy` refuse: values the dtype would
    /// saturate, truncate or overflow to infinity.
    #[test]
    fn exact_conversions_refuse_lost_values() {
        let ints = Tensor::from_f64(Dtype::Int64, &[3], &[1.0, 300.0, -5.0]).unwrap();
        let err = ints.convert_exact(Dtype::Int8).unwrap_err();
        assert!(
            err.contains("300 at flat index 1") && err.contains("-128..=127"),
            "{err}"
        );
        assert!(ints.convert_exact(Dtype::Uint8).is_err());
        assert_eq!(
            ints.convert_exact(Dtype::Int16).unwrap().to_f64_vec(),
            vec![1.0, 300.0, -5.0]
        );
        let fracs = Tensor::from_f64(Dtype::Fp64, &[2], &[2.0, 2.5]).unwrap();
        let err = fracs.convert_exact(Dtype::Int32).unwrap_err();
        assert!(err.contains("not an integer"), "{err}");
        let nan = Tensor::from_f64(Dtype::Fp32, &[1], &[f64::NAN]).unwrap();
        assert!(nan.convert_exact(Dtype::Bool).is_err());
        assert!(nan.convert_exact(Dtype::Fp16).unwrap().to_f64_vec()[0].is_nan());
        let big = Tensor::from_f64(Dtype::Fp64, &[2], &[1.5, 1e6]).unwrap();
        let err = big.convert_exact(Dtype::Fp16).unwrap_err();
        assert!(err.contains("beyond the range of `fp16`"), "{err}");
        assert_eq!(
            big.convert_exact(Dtype::Fp32).unwrap().to_f64_vec(),
            vec![1.5, 1e6]
        );
    }

    #[test]
    fn tensor_map_extents_run_innermost_first() {
        let (dims, strides) = super::tensor_map_extents(&[4, 16, 64], 2);
        assert_eq!(dims, vec![64, 16, 4]);
        assert_eq!(strides, vec![128, 2048]);
        assert_eq!(super::tensor_map_extents(&[8], 1), (vec![8], vec![]));
    }
}

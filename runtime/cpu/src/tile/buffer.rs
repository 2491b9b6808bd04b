//! Global buffers: a tensor's elements as atomics, shared by every program
//! of a launch, so that concurrent writes of overlapping elements (a buggy
//! kernel) are races on values, never data races.
//!
//! All accesses are `Relaxed`: programs of a launch do not synchronise with
//! each other, and a launch's end (joining its threads) orders everything.

use super::value::{Num, Scalar};
use super::{fail, R};
use crate::EvalError;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering::Relaxed};
use tessera_tensor::{numel, Data, Dtype, Tensor};

/// The elements of a buffer, by storage class.
pub(crate) enum Cells {
    /// fp32 and narrower floats, as `f32` bits.
    F32(Vec<AtomicU32>),
    /// fp64, as `f64` bits.
    F64(Vec<AtomicU64>),
    /// Every integer dtype.
    Int(Vec<AtomicI64>),
    /// Booleans.
    Bool(Vec<AtomicBool>),
}

/// A global tensor during a run.
pub(crate) struct GlobalBuf {
    /// Its element type.
    pub dtype: Dtype,
    /// Its extents.
    pub shape: Vec<usize>,
    /// The rules of its dtype.
    pub num: Num,
    /// Its elements, row-major.
    pub cells: Cells,
}

/// A vector of `n` items, or an error instead of an abort when the host is
/// out of memory.
fn try_vec<T>(n: usize, items: impl Iterator<Item = T>) -> R<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .or_else(|_| fail(format!("out of host memory allocating {n} elements")))?;
    v.extend(items.take(n));
    Ok(v)
}

impl GlobalBuf {
    /// A zeroed buffer.
    pub fn zeros(dtype: Dtype, shape: &[usize]) -> R<GlobalBuf> {
        let n = numel(shape)
            .ok_or_else(|| EvalError::new(format!("shape {shape:?} has too many elements")))?;
        let num = Num::new(dtype);
        let cells = match num.class {
            super::value::Class::F32 => Cells::F32(try_vec(n, (0..n).map(|_| AtomicU32::new(0)))?),
            super::value::Class::F64 => Cells::F64(try_vec(n, (0..n).map(|_| AtomicU64::new(0)))?),
            super::value::Class::Int => Cells::Int(try_vec(n, (0..n).map(|_| AtomicI64::new(0)))?),
            super::value::Class::Bool => {
                Cells::Bool(try_vec(n, (0..n).map(|_| AtomicBool::new(false)))?)
            }
        };
        Ok(GlobalBuf {
            dtype,
            shape: shape.to_vec(),
            num,
            cells,
        })
    }

    /// A buffer holding a tensor's elements (the tensor must be valid).
    pub fn from_tensor(t: &Tensor) -> R<GlobalBuf> {
        t.validate().map_err(|e| EvalError::new(e.to_string()))?;
        let n = t.len();
        let cells = match &t.data {
            Data::F32(v) => Cells::F32(try_vec(n, v.iter().map(|x| AtomicU32::new(x.to_bits())))?),
            Data::F64(v) => Cells::F64(try_vec(n, v.iter().map(|x| AtomicU64::new(x.to_bits())))?),
            Data::I64(v) => Cells::Int(try_vec(n, v.iter().map(|x| AtomicI64::new(*x)))?),
            Data::Bool(v) => Cells::Bool(try_vec(n, v.iter().map(|x| AtomicBool::new(*x)))?),
        };
        Ok(GlobalBuf {
            dtype: t.dtype,
            shape: t.shape.clone(),
            num: Num::new(t.dtype),
            cells,
        })
    }

    /// The elements as a tensor.
    pub fn to_tensor(&self) -> Tensor {
        let data = match &self.cells {
            Cells::F32(v) => Data::F32(v.iter().map(|x| f32::from_bits(x.load(Relaxed))).collect()),
            Cells::F64(v) => Data::F64(v.iter().map(|x| f64::from_bits(x.load(Relaxed))).collect()),
            Cells::Int(v) => Data::I64(v.iter().map(|x| x.load(Relaxed)).collect()),
            Cells::Bool(v) => Data::Bool(v.iter().map(|x| x.load(Relaxed)).collect()),
        };
        Tensor {
            dtype: self.dtype,
            shape: self.shape.clone(),
            data,
        }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        match &self.cells {
            Cells::F32(v) => v.len(),
            Cells::F64(v) => v.len(),
            Cells::Int(v) => v.len(),
            Cells::Bool(v) => v.len(),
        }
    }

    /// The cells' bits, little-endian, one fixed-size group per element (4
    /// bytes for the f32 class, 8 for f64 and integers, 1 for booleans):
    /// what a collective moves.
    pub fn cell_bytes(&self) -> Vec<u8> {
        match &self.cells {
            Cells::F32(v) => v
                .iter()
                .flat_map(|x| x.load(Relaxed).to_le_bytes())
                .collect(),
            Cells::F64(v) => v
                .iter()
                .flat_map(|x| x.load(Relaxed).to_le_bytes())
                .collect(),
            Cells::Int(v) => v
                .iter()
                .flat_map(|x| x.load(Relaxed).to_le_bytes())
                .collect(),
            Cells::Bool(v) => v.iter().map(|x| u8::from(x.load(Relaxed))).collect(),
        }
    }

    /// Stores bits read by [`GlobalBuf::cell_bytes`] back into the cells.
    pub fn store_cell_bytes(&self, bytes: &[u8]) {
        fn words<const N: usize>(bytes: &[u8]) -> impl Iterator<Item = [u8; N]> + '_ {
            bytes
                .chunks_exact(N)
                .map(|c| c.try_into().expect("chunks of N bytes"))
        }
        match &self.cells {
            Cells::F32(v) => {
                for (c, w) in v.iter().zip(words(bytes)) {
                    c.store(u32::from_le_bytes(w), Relaxed);
                }
            }
            Cells::F64(v) => {
                for (c, w) in v.iter().zip(words(bytes)) {
                    c.store(u64::from_le_bytes(w), Relaxed);
                }
            }
            Cells::Int(v) => {
                for (c, w) in v.iter().zip(words(bytes)) {
                    c.store(i64::from_le_bytes(w), Relaxed);
                }
            }
            Cells::Bool(v) => {
                for (c, b) in v.iter().zip(bytes) {
                    c.store(*b != 0, Relaxed);
                }
            }
        }
    }

    /// Element `i` (which must be in bounds), in the buffer's class.
    pub fn read(&self, i: usize) -> Scalar {
        match &self.cells {
            Cells::F32(v) => Scalar::F32(f32::from_bits(v[i].load(Relaxed))),
            Cells::F64(v) => Scalar::F64(f64::from_bits(v[i].load(Relaxed))),
            Cells::Int(v) => Scalar::Int(v[i].load(Relaxed)),
            Cells::Bool(v) => Scalar::Bool(v[i].load(Relaxed)),
        }
    }

    /// Stores `x` at element `i` (which must be in bounds), converted to the
    /// buffer's dtype as a store does: rounded to nearest even, floats to
    /// integers truncated and saturated.
    pub fn write(&self, i: usize, x: Scalar) {
        match (&self.cells, x.cast(self.num, false)) {
            (Cells::F32(v), Scalar::F32(x)) => v[i].store(x.to_bits(), Relaxed),
            (Cells::F64(v), Scalar::F64(x)) => v[i].store(x.to_bits(), Relaxed),
            (Cells::Int(v), Scalar::Int(x)) => v[i].store(x, Relaxed),
            (Cells::Bool(v), Scalar::Bool(x)) => v[i].store(x, Relaxed),
            // `cast` gives the class of `self.num`, which is that of the cells.
            _ => {}
        }
    }

    /// Sets every element to `x`, converted to the buffer's dtype as `as`
    /// converts (an `out` parameter's start value).
    pub fn fill(&self, x: f64) {
        let x = Scalar::from_f64(x, self.num);
        for i in 0..self.len() {
            self.write(i, x);
        }
    }

    /// Copies `src` into this buffer, converting elements to this buffer's
    /// dtype. The buffers must have the same number of elements; they may be
    /// the same buffer.
    pub fn copy_from(&self, src: &GlobalBuf) -> R<()> {
        if src.len() != self.len() {
            return fail(format!(
                "cannot copy a buffer of shape {:?} into one of shape {:?}",
                src.shape, self.shape
            ));
        }
        // Snapshot first: the buffers may alias.
        let mut t = src.to_tensor();
        if t.dtype != self.dtype {
            t = t.convert(self.dtype);
        }
        match (&self.cells, &t.data) {
            (Cells::F32(c), Data::F32(d)) => {
                for (i, x) in d.iter().enumerate() {
                    c[i].store(x.to_bits(), Relaxed);
                }
            }
            (Cells::F64(c), Data::F64(d)) => {
                for (i, x) in d.iter().enumerate() {
                    c[i].store(x.to_bits(), Relaxed);
                }
            }
            (Cells::Int(c), Data::I64(d)) => {
                for (i, x) in d.iter().enumerate() {
                    c[i].store(*x, Relaxed);
                }
            }
            (Cells::Bool(c), Data::Bool(d)) => {
                for (i, x) in d.iter().enumerate() {
                    c[i].store(*x, Relaxed);
                }
            }
            _ => return fail("internal error: a converted tensor has the wrong storage"),
        }
        Ok(())
    }
}

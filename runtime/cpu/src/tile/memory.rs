//! `load` and `store`: gathers from and scatters to global buffers through
//! one integer index tile per dimension, with an optional mask. Index tiles,
//! mask (and the stored value) broadcast together; masked and out-of-bounds
//! elements read `other` and are never written.

use super::bcast::{broadcast_shape, strides, Walk};
use super::buffer::{Cells, GlobalBuf};
use super::elementwise::Arg;
use super::value::{Class, Elem, Elems, Num, Scalar, TileVal, ValInfo};
use super::{fail, R};
use std::sync::atomic::Ordering::Relaxed;
use tessera_tile::Combine;

/// The element offsets an access touches.
struct Access<'a> {
    /// The walk over the access shape: index tiles, then the mask, then (for
    /// a store) the value.
    walk: Walk,
    /// The index tiles.
    index: Vec<&'a [i64]>,
    /// The mask.
    mask: Option<&'a [bool]>,
    /// The buffer's extents.
    dims: &'a [usize],
    /// The buffer's row-major strides.
    strides: Vec<usize>,
}

impl<'a> Access<'a> {
    /// An access of `buf` at `index` under `mask`, with `extra` operand
    /// shapes (the stored value) walked too, over `shape`.
    fn new(
        buf: &'a GlobalBuf,
        index: &[Arg<'a>],
        mask: Option<Arg<'a>>,
        extra: &[&[usize]],
        shape: &[usize],
    ) -> R<Access<'a>> {
        if index.len() != buf.shape.len() {
            return fail(format!(
                "{} index tiles for a buffer of rank {}",
                index.len(),
                buf.shape.len()
            ));
        }
        let mut shapes: Vec<&[usize]> = Vec::with_capacity(index.len() + 2);
        let mut tiles = Vec::with_capacity(index.len());
        for (d, (t, info)) in index.iter().enumerate() {
            match t {
                TileVal::Int(e) => tiles.push(e.as_slice()),
                _ => return fail(format!("the index of dimension {d} is not an integer tile")),
            }
            shapes.push(&info.shape);
        }
        let mask = match mask {
            Some((TileVal::Bool(e), info)) => {
                shapes.push(&info.shape);
                Some(e.as_slice())
            }
            Some(_) => return fail("the mask is not a boolean tile"),
            None => None,
        };
        shapes.extend_from_slice(extra);
        Ok(Access {
            walk: Walk::new(shape, &shapes)?,
            index: tiles,
            mask,
            dims: &buf.shape,
            strides: strides(&buf.shape),
        })
    }

    /// Calls `f(offset, operand_bases, j)` for every element `j` of every
    /// row, in order, with the buffer offset (`None` if masked or out of
    /// bounds).
    fn each(&self, mut f: impl FnMut(Option<usize>, &[usize], usize)) {
        let m = self.walk.row_len();
        let rank = self.index.len();
        // Index tiles constant along a row (row stride 0) contribute one
        // offset per row; only the others are read per element.
        let (fixed, varying): (Vec<usize>, Vec<usize>) =
            (0..rank).partition(|&d| self.walk.row_stride(d) == 0);
        let varying: Vec<(usize, &[i64], usize)> = varying
            .into_iter()
            .map(|d| (d, self.index[d], self.walk.row_stride(d)))
            .collect();
        let mask_stride = if self.mask.is_some() {
            self.walk.row_stride(rank)
        } else {
            0
        };
        self.walk.rows(|bases| {
            let row = fixed.iter().try_fold(0usize, |o, &d| {
                self.offset(d, self.index[d][bases[d]]).map(|x| o + x)
            });
            let Some(row) = row else {
                (0..m).for_each(|j| f(None, bases, j));
                return;
            };
            for j in 0..m {
                let mut off = varying.iter().try_fold(row, |o, &(d, tile, rs)| {
                    self.offset(d, tile[bases[d] + j * rs]).map(|x| o + x)
                });
                if let Some(mask) = self.mask {
                    if !mask[bases[rank] + j * mask_stride] {
                        off = None;
                    }
                }
                f(off, bases, j);
            }
        });
    }

    /// The offset of index `i` along dimension `d`, or `None` out of bounds.
    #[inline]
    fn offset(&self, d: usize, i: i64) -> Option<usize> {
        match usize::try_from(i) {
            Ok(i) if i < self.dims[d] => Some(i * self.strides[d]),
            _ => None,
        }
    }
}

/// `load` of `buf` into a tile of type `out`.
pub(crate) fn load(
    buf: &GlobalBuf,
    index: &[Arg<'_>],
    mask: Option<Arg<'_>>,
    other: f64,
    out: &ValInfo,
) -> R<TileVal> {
    let acc = Access::new(buf, index, mask, &[], &out.shape)?;
    let n = out.len;
    let other = Scalar::from_f64(other, out.num);
    fn gather<T: Elem>(
        acc: &Access<'_>,
        n: usize,
        other: Scalar,
        read: impl Fn(usize) -> T,
    ) -> R<TileVal> {
        let Some(other) = T::from_scalar(other) else {
            return fail("internal error: `other` of the wrong class");
        };
        let mut v = Vec::with_capacity(n);
        acc.each(|off, _, _| v.push(off.map_or(other, &read)));
        Ok(T::tile(Elems::from_vec(v)))
    }
    let same = out.num.holds(buf.num);
    match (&buf.cells, out.num.class) {
        (Cells::F32(c), Class::F32) if same => {
            gather(&acc, n, other, |i| f32::from_bits(c[i].load(Relaxed)))
        }
        (Cells::F32(c), Class::F32) => gather(&acc, n, other, |i| {
            out.num.round_f32(f32::from_bits(c[i].load(Relaxed)))
        }),
        (Cells::F64(c), Class::F64) => {
            gather(&acc, n, other, |i| f64::from_bits(c[i].load(Relaxed)))
        }
        (Cells::Int(c), Class::Int) if same => gather(&acc, n, other, |i| c[i].load(Relaxed)),
        (Cells::Bool(c), Class::Bool) => gather(&acc, n, other, |i| c[i].load(Relaxed)),
        _ => {
            let conv = |i: usize| buf.read(i).cast(out.num, true);
            match out.num.class {
                Class::F32 => gather(&acc, n, other, |i| f32::from_scalar(conv(i)).unwrap_or(0.0)),
                Class::F64 => gather(&acc, n, other, |i| f64::from_scalar(conv(i)).unwrap_or(0.0)),
                Class::Int => gather(&acc, n, other, |i| i64::from_scalar(conv(i)).unwrap_or(0)),
                Class::Bool => gather(&acc, n, other, |i| {
                    bool::from_scalar(conv(i)).unwrap_or(false)
                }),
            }
        }
    }
}

/// The elements a store of `value` at `index` reaches, with the walk
/// position and row stride of the value.
fn store_access<'b>(
    buf: &'b GlobalBuf,
    index: &[Arg<'b>],
    value: Arg<'_>,
    mask: Option<Arg<'b>>,
) -> R<(Access<'b>, usize, usize)> {
    let mut shapes: Vec<&[usize]> = index.iter().map(|(_, i)| &i.shape[..]).collect();
    if let Some((_, m)) = mask {
        shapes.push(&m.shape);
    }
    shapes.push(&value.1.shape);
    let shape = broadcast_shape(&shapes)?;
    let acc = Access::new(buf, index, mask, &[&value.1.shape], &shape)?;
    let vk = index.len() + usize::from(mask.is_some());
    let vs = acc.walk.row_stride(vk);
    Ok((acc, vk, vs))
}

/// Combines `value` into `buf` at `index` atomically, element by element,
/// as the GPU's `red` does: integers wrap to the dtype; float maximum and
/// minimum order the bits as the PTX lowering does (signed where the value's
/// sign bit is clear, unsigned the other way round where it is set), so
/// that NaN and -0.0 come out alike on every backend.
pub(crate) fn atomic<'b>(
    buf: &'b GlobalBuf,
    index: &[Arg<'b>],
    value: Arg<'_>,
    mask: Option<Arg<'b>>,
    c: Combine,
) -> R<()> {
    if c == Combine::Prod {
        return fail("an atomic product (the Tile IR verifier rejects it)");
    }
    let (acc, vk, vs) = store_access(buf, index, value, mask)?;
    let dtype = buf.dtype;
    let each = |apply: &mut dyn FnMut(usize, usize)| {
        acc.each(|off, bases, j| {
            if let Some(o) = off {
                apply(o, bases[vk] + j * vs);
            }
        })
    };
    match (&buf.cells, value.0) {
        (Cells::F32(cells), TileVal::F32(e)) => {
            let e = e.as_slice();
            each(&mut |o, i| {
                let _ = cells[o].fetch_update(Relaxed, Relaxed, |old| {
                    Some(match c {
                        Combine::Sum => (f32::from_bits(old) + e[i]).to_bits(),
                        _ => float_order(c, u64::from(old), u64::from(e[i].to_bits()), 32) as u32,
                    })
                });
            });
        }
        (Cells::F64(cells), TileVal::F64(e)) => {
            let e = e.as_slice();
            each(&mut |o, i| {
                let _ = cells[o].fetch_update(Relaxed, Relaxed, |old| {
                    Some(match c {
                        Combine::Sum => (f64::from_bits(old) + e[i]).to_bits(),
                        _ => float_order(c, old, e[i].to_bits(), 64),
                    })
                });
            });
        }
        (Cells::Int(cells), TileVal::Int(e)) => {
            let e = e.as_slice();
            each(&mut |o, i| {
                let _ = cells[o].fetch_update(Relaxed, Relaxed, |old| {
                    Some(match c {
                        Combine::Sum => dtype.wrap_int(old.wrapping_add(e[i])),
                        Combine::Max => old.max(dtype.wrap_int(e[i])),
                        Combine::Min => old.min(dtype.wrap_int(e[i])),
                        Combine::Prod => old,
                    })
                });
            });
        }
        _ => return fail(format!("`atomic_{}` into a `{dtype}` tensor", c.name())),
    }
    Ok(())
}

/// Float maximum or minimum of raw bits (`bits` wide) as an integer
/// combination: `v` with its sign bit clear combines signed (max for max),
/// with it set unsigned and the other way round.
fn float_order(c: Combine, old: u64, v: u64, bits: u32) -> u64 {
    let sign = 1u64 << (bits - 1);
    let signed = |x: u64| ((x << (64 - bits)) as i64) >> (64 - bits);
    let max = c == Combine::Max;
    if v & sign == 0 {
        let (a, b) = (signed(old), signed(v));
        let r = if max { a.max(b) } else { a.min(b) };
        (r as u64) & (u64::MAX >> (64 - bits))
    } else if max {
        old.min(v)
    } else {
        old.max(v)
    }
}

/// Writes `value` into `buf` at `index` (rounded to the buffer's dtype).
pub(crate) fn store(
    buf: &GlobalBuf,
    index: &[Arg<'_>],
    value: Arg<'_>,
    mask: Option<Arg<'_>>,
) -> R<()> {
    let (acc, vk, vs) = store_access(buf, index, value, mask)?;
    fn scatter<T: Elem>(
        acc: &Access<'_>,
        src: &[T],
        vk: usize,
        vs: usize,
        write: impl Fn(usize, T),
    ) {
        acc.each(|off, bases, j| {
            if let Some(o) = off {
                write(o, src[bases[vk] + j * vs]);
            }
        });
    }
    let same = buf.num.holds(value.1.num);
    let to: Num = buf.num;
    match (&buf.cells, value.0) {
        (Cells::F32(c), TileVal::F32(e)) if same => {
            scatter(&acc, e.as_slice(), vk, vs, |o, x| {
                c[o].store(x.to_bits(), Relaxed)
            });
        }
        (Cells::F32(c), TileVal::F32(e)) => scatter(&acc, e.as_slice(), vk, vs, |o, x| {
            c[o].store(to.round_f32(x).to_bits(), Relaxed)
        }),
        (Cells::F64(c), TileVal::F64(e)) => {
            scatter(&acc, e.as_slice(), vk, vs, |o, x| {
                c[o].store(x.to_bits(), Relaxed)
            });
        }
        (Cells::Int(c), TileVal::Int(e)) => {
            scatter(&acc, e.as_slice(), vk, vs, |o, x| {
                c[o].store(to.saturate(x), Relaxed)
            });
        }
        (Cells::Bool(c), TileVal::Bool(e)) => {
            scatter(&acc, e.as_slice(), vk, vs, |o, x| c[o].store(x, Relaxed));
        }
        (_, TileVal::F32(e)) => {
            scatter(&acc, e.as_slice(), vk, vs, |o, x| buf.write(o, x.scalar()))
        }
        (_, TileVal::F64(e)) => {
            scatter(&acc, e.as_slice(), vk, vs, |o, x| buf.write(o, x.scalar()))
        }
        (_, TileVal::Int(e)) => {
            scatter(&acc, e.as_slice(), vk, vs, |o, x| buf.write(o, x.scalar()))
        }
        (_, TileVal::Bool(e)) => {
            scatter(&acc, e.as_slice(), vk, vs, |o, x| buf.write(o, x.scalar()))
        }
    }
    Ok(())
}

//! Numpy broadcasting over tiles: operand strides over an output shape, a
//! row-by-row walk that keeps the per-element work to an addition, and
//! elementwise maps with fast paths for equal shapes and single elements.

use super::value::{Elem, Elems};
use super::{fail, R};

/// Row-major strides of `shape`.
pub(crate) fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1].saturating_mul(shape[i + 1]);
    }
    s
}

/// The broadcast of shapes (numpy rules: aligned at the right, extents
/// equal or 1).
pub(crate) fn broadcast_shape(shapes: &[&[usize]]) -> R<Vec<usize>> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1usize; rank];
    for s in shapes {
        for (j, &n) in s.iter().enumerate() {
            let o = &mut out[rank - s.len() + j];
            if *o == 1 {
                *o = n;
            } else if n != 1 && n != *o {
                return fail(format!("shapes {shapes:?} do not broadcast together"));
            }
        }
    }
    Ok(out)
}

/// Strides of an operand of `shape` over the output shape `out` (0 on
/// broadcast axes), or an error if it does not broadcast to `out`.
fn operand_strides(shape: &[usize], out: &[usize]) -> R<Vec<usize>> {
    if shape.len() > out.len() {
        return fail(format!("shape {shape:?} does not broadcast to {out:?}"));
    }
    let own = strides(shape);
    let mut s = vec![0; out.len()];
    let lead = out.len() - shape.len();
    for (j, &n) in shape.iter().enumerate() {
        if n == out[lead + j] {
            s[lead + j] = if n == 1 { 0 } else { own[j] };
        } else if n != 1 {
            return fail(format!("shape {shape:?} does not broadcast to {out:?}"));
        }
    }
    Ok(s)
}

/// Several operands walked over one output shape.
pub(crate) struct Walk {
    /// The output extents.
    out: Vec<usize>,
    /// Per operand, per output axis, the element stride.
    strides: Vec<Vec<usize>>,
}

impl Walk {
    /// Operands of `shapes` broadcast to `out`.
    pub fn new(out: &[usize], shapes: &[&[usize]]) -> R<Walk> {
        let strides = shapes
            .iter()
            .map(|s| operand_strides(s, out))
            .collect::<R<Vec<_>>>()?;
        Ok(Walk {
            out: out.to_vec(),
            strides,
        })
    }

    /// Operands with explicit strides (one per output axis each).
    pub fn with_strides(out: &[usize], strides: Vec<Vec<usize>>) -> Walk {
        Walk {
            out: out.to_vec(),
            strides,
        }
    }

    /// The number of output elements.
    pub fn len(&self) -> usize {
        self.out.iter().product()
    }

    /// The extent of the last axis (1 for a scalar): elements per row.
    pub fn row_len(&self) -> usize {
        self.out.last().copied().unwrap_or(1)
    }

    /// Operand `k`'s stride along the last axis.
    pub fn row_stride(&self, k: usize) -> usize {
        self.strides[k].last().copied().unwrap_or(0)
    }

    /// Calls `f(bases)` for every row of the output in order, with each
    /// operand's offset at the row's first element. Element `j` of the row
    /// is at `bases[k] + j * row_stride(k)` in operand `k`.
    pub fn rows(&self, mut f: impl FnMut(&[usize])) {
        if self.out.contains(&0) {
            return;
        }
        let outer = self.out.len().saturating_sub(1);
        let mut idx = vec![0usize; outer];
        let mut bases = vec![0usize; self.strides.len()];
        loop {
            f(&bases);
            // Advance the multi-index over all axes but the last.
            let mut d = outer;
            loop {
                if d == 0 {
                    return;
                }
                d -= 1;
                idx[d] += 1;
                for (b, s) in bases.iter_mut().zip(&self.strides) {
                    *b += s[d];
                }
                if idx[d] < self.out[d] {
                    break;
                }
                for (b, s) in bases.iter_mut().zip(&self.strides) {
                    *b -= s[d] * self.out[d];
                }
                idx[d] = 0;
            }
        }
    }
}

/// Whether an operand of `shape` is the output shape itself.
fn same(shape: &[usize], out: &[usize]) -> bool {
    shape == out
}

/// Whether an operand of `shape` and `len` elements is a single element
/// that broadcasts to any output of at least its rank.
fn single(shape: &[usize], len: usize, out: &[usize]) -> bool {
    len == 1 && shape.len() <= out.len()
}

/// `f` of each element of `a` broadcast to `out`.
pub(crate) fn map1<A: Elem, O: Copy>(
    out: &[usize],
    a: (&[A], &[usize]),
    f: impl Fn(A) -> O,
) -> R<Elems<O>> {
    let n: usize = out.iter().product();
    if same(a.1, out) {
        return Ok(Elems::collect(n, a.0.iter().map(|x| f(*x))));
    }
    let w = Walk::new(out, &[a.1])?;
    let (m, s) = (w.row_len(), w.row_stride(0));
    let mut v = Vec::with_capacity(n);
    w.rows(|b| v.extend((0..m).map(|j| f(a.0[b[0] + j * s]))));
    Ok(Elems::from_vec(v))
}

/// `f` of the elements of `a` and `b` broadcast together to `out`.
pub(crate) fn map2<A: Elem, B: Elem, O: Copy>(
    out: &[usize],
    a: (&[A], &[usize]),
    b: (&[B], &[usize]),
    f: impl Fn(A, B) -> O,
) -> R<Elems<O>> {
    let n: usize = out.iter().product();
    let (sa, sb) = (same(a.1, out), same(b.1, out));
    if sa && sb {
        return Ok(Elems::collect(
            n,
            a.0.iter().zip(b.0).map(|(x, y)| f(*x, *y)),
        ));
    }
    if sa && single(b.1, b.0.len(), out) {
        let y = b.0[0];
        return Ok(Elems::collect(n, a.0.iter().map(|x| f(*x, y))));
    }
    if sb && single(a.1, a.0.len(), out) {
        let x = a.0[0];
        return Ok(Elems::collect(n, b.0.iter().map(|y| f(x, *y))));
    }
    let w = Walk::new(out, &[a.1, b.1])?;
    let (m, s0, s1) = (w.row_len(), w.row_stride(0), w.row_stride(1));
    let mut v = Vec::with_capacity(n);
    w.rows(|o| v.extend((0..m).map(|j| f(a.0[o[0] + j * s0], b.0[o[1] + j * s1]))));
    Ok(Elems::from_vec(v))
}

/// `f` of the elements of `a`, `b` and `c` broadcast together to `out`.
pub(crate) fn map3<A: Elem, B: Elem, C: Elem, O: Copy>(
    out: &[usize],
    a: (&[A], &[usize]),
    b: (&[B], &[usize]),
    c: (&[C], &[usize]),
    f: impl Fn(A, B, C) -> O,
) -> R<Elems<O>> {
    let n: usize = out.iter().product();
    if same(a.1, out) && same(b.1, out) && same(c.1, out) {
        return Ok(Elems::collect(
            n,
            a.0.iter()
                .zip(b.0)
                .zip(c.0)
                .map(|((x, y), z)| f(*x, *y, *z)),
        ));
    }
    let w = Walk::new(out, &[a.1, b.1, c.1])?;
    let m = w.row_len();
    let (s0, s1, s2) = (w.row_stride(0), w.row_stride(1), w.row_stride(2));
    let mut v = Vec::with_capacity(n);
    w.rows(|o| {
        v.extend((0..m).map(|j| f(a.0[o[0] + j * s0], b.0[o[1] + j * s1], c.0[o[2] + j * s2])))
    });
    Ok(Elems::from_vec(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasts_rows_and_columns() {
        let col = [1i64, 2];
        let row = [10i64, 20, 30];
        let e = map2(
            &[2, 3],
            (&col[..], &[2, 1][..]),
            (&row[..], &[3][..]),
            |a, b| a + b,
        );
        assert_eq!(
            e.ok().map(|e| e.as_slice().to_vec()),
            Some(vec![11, 21, 31, 12, 22, 32])
        );
        assert!(Walk::new(&[2, 3], &[&[3, 2]]).is_err());
        assert_eq!(broadcast_shape(&[&[4, 1], &[3]]).ok(), Some(vec![4, 3]));
    }
}

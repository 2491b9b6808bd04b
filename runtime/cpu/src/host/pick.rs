//! numpy's integer-array indexing of host tensors: `x[ids]`, `x[:, ids]`,
//! and paired indices `x[rows, cols]` (index tensors broadcast together,
//! integers beside them), with negative indices counted from the end and an
//! index out of range named with its axis and size.

use super::ops::{fail, IndexValue, R};
use tessera_diagnostics::Span;
use tessera_tensor::Tensor;

/// One index of a pick: a number, or an integer tensor.
enum Pick<'a> {
    Number(i64),
    Array(&'a Tensor),
}

/// `t[parts]` where some part is an integer tensor and every other an
/// integer or a full `:` (the checker has typed the form). The picked
/// shape (the index tensors' broadcast) replaces the indexed axes where
/// they are adjacent, and comes first otherwise, as in numpy.
pub(super) fn pick(t: &Tensor, parts: &[IndexValue], span: Span) -> R<Tensor> {
    let mut picks: Vec<(usize, Pick<'_>)> = Vec::new();
    for (axis, p) in parts.iter().enumerate() {
        match p {
            IndexValue::Index(k, _) => picks.push((axis, Pick::Number(*k))),
            IndexValue::Tensor(ids) => picks.push((axis, Pick::Array(ids))),
            IndexValue::Slice(None, None, 1, _) => {}
            IndexValue::Slice(..) | IndexValue::NewAxis | IndexValue::Ellipsis(_) => return fail(
                span,
                "an index tensor goes with integers, other index tensors and full `:` slices only",
                "here",
            ),
        }
    }
    if parts.len() > t.rank() {
        return fail(
            span,
            format!("{} indices for a tensor of rank {}", parts.len(), t.rank()),
            "too many indices",
        );
    }
    // The broadcast shape of the index tensors, and each one's strides
    // over it.
    let arrays: Vec<&[usize]> = (picks.iter())
        .filter_map(|(_, p)| match p {
            Pick::Array(ids) => Some(ids.shape.as_slice()),
            Pick::Number(_) => None,
        })
        .collect();
    let shape = match crate::tile::broadcast_shape(&arrays) {
        Ok(s) => s,
        Err(_) => {
            return fail(
                span,
                format!("index tensors of shapes {arrays:?} cannot be broadcast"),
                "paired indices",
            )
        }
    };
    let steps: Vec<Vec<usize>> = (picks.iter())
        .map(|(_, p)| match p {
            Pick::Array(ids) => crate::eval::broadcast_strides(&ids.shape, &shape),
            Pick::Number(_) => Vec::new(),
        })
        .collect();
    let axes: Vec<usize> = picks.iter().map(|(a, _)| *a).collect();
    let kept: Vec<usize> = (0..t.rank()).filter(|a| !axes.contains(a)).collect();
    let adjacent = axes.windows(2).all(|w| w[1] == w[0] + 1);
    // Result axes: where the picked ones go, among the kept ones.
    let at = if adjacent { axes[0] } else { 0 };
    let before: Vec<usize> = kept.iter().copied().filter(|a| *a < at).collect();
    let after: Vec<usize> = kept.iter().copied().filter(|a| *a >= at).collect();
    let mut out_shape: Vec<usize> = before.iter().map(|a| t.shape[*a]).collect();
    out_shape.extend(&shape);
    out_shape.extend(after.iter().map(|a| t.shape[*a]));
    let strides = t.strides();
    let total: usize = out_shape.iter().product();
    let mut flat = Vec::with_capacity(total);
    let mut pos = vec![0usize; out_shape.len()];
    for _ in 0..total {
        let (b, rest) = pos.split_at(before.len());
        let (picked, a) = rest.split_at(shape.len());
        let mut offset = 0usize;
        for (axis, p) in before.iter().zip(b).chain(after.iter().zip(a)) {
            offset += p * strides[*axis];
        }
        for ((axis, p), step) in picks.iter().zip(&steps) {
            let k = match p {
                Pick::Number(k) => *k,
                Pick::Array(ids) => {
                    let i: usize = picked.iter().zip(step).map(|(p, s)| p * s).sum();
                    ids.data.get_i64(i).unwrap_or(0)
                }
            };
            let n = t.shape[*axis] as i64;
            let from_end = if k < 0 { k + n } else { k };
            if !(0..n).contains(&from_end) {
                return fail(
                    span,
                    format!("index {k} is out of bounds for dimension {axis} of size {n}"),
                    "out of bounds",
                );
            }
            offset += from_end as usize * strides[*axis];
        }
        flat.push(offset);
        // The next position, row-major.
        for d in (0..pos.len()).rev() {
            pos[d] += 1;
            if pos[d] < out_shape[d] {
                break;
            }
            pos[d] = 0;
        }
    }
    Ok(t.take(&out_shape, &flat))
}

//! Cumulative sums along one axis (`cumsum`): a program takes `rows` lines
//! along the axis and walks them in chunks of [`CHUNK`]. A chunk's
//! inclusive prefix sums are one product with the upper-triangular matrix
//! of ones (`tri[j, i] = j <= i`, computed where it is read, never
//! stored), to which the running total of the chunks before is added; the
//! total grows by the chunk's sum. Sums are taken in the accumulation
//! dtype (fp32 for floats, int32 or int64 for integers).

use super::{count, dtype_of, Ctx, R};
use crate::ir::{Combine, TileTy};
use tessera_core::RowTile;
use tessera_graph::BinaryOp;
use tessera_schedule::fuse::dims;
use tessera_schedule::Size;
use tessera_sema::Policy;

/// Elements of a line one trip of the chunk loop covers.
const CHUNK: i64 = 64;

/// The cumulative-sum kernel of the anchor along `axis`.
pub(super) fn cumsum(cx: &mut Ctx<'_>, axis: usize, tile: &RowTile) -> R<()> {
    let anchor = cx.k.anchor;
    let x = cx.g.node(anchor).args[0];
    let full = dims(cx.g, anchor);
    let mut outer = full.clone();
    outer.remove(axis);
    let one = Size::Const(1);
    let rows_s = tile.rows.clone();
    let pr = cx.b.program_id(0);
    let rows = cx.block_range(pr, &rows_s, vec![rows_s.clone(), one.clone()]);
    let r = count(cx, &outer);
    let rmask = cx.b.binary(BinaryOp::Lt, rows, r);
    let nidx = cx.unflatten(rows, &outer);
    let dtype = dtype_of(cx.g, anchor);
    let acc = dtype.sum_dtype();
    let c = Size::Const(CHUNK);
    let ar = cx.b.arange(&c);
    let below = cx.b.reshape(ar, vec![c.clone(), one.clone()]);
    let right = cx.b.reshape(ar, vec![one.clone(), c.clone()]);
    let le = cx.b.binary(BinaryOp::Le, below, right);
    let tri = cx.b.cast(le, acc);
    let carry0 = cx.b.constant(
        0.0,
        TileTy {
            shape: vec![rows_s.clone(), one.clone()],
            dtype: acc,
        },
    );
    let lo = cx.b.int(0);
    let n = cx.dim(&full[axis]);
    let step = cx.b.int(CHUNK);
    let (k0, carried) = cx.b.begin_loop(lo, n, step, vec![carry0]);
    let cols = cx.b.binary(BinaryOp::Add, ar, k0);
    let cols = cx.b.reshape(cols, vec![one.clone(), c.clone()]);
    let mut idx = nidx.clone();
    idx.insert(axis, cols);
    let t = cx.load(x, idx.clone(), Some(rmask))?;
    let t = cx.b.cast(t, acc);
    let prefix = cx.b.selected_sums(t, tri, false);
    let out = cx.b.binary(BinaryOp::Add, prefix, carried[0]);
    let stored = cx.b.cast(out, dtype);
    cx.store(anchor, idx, stored, Some(rmask));
    let sum = cx.b.reduce(Combine::Sum, t, 1, Policy::Deterministic);
    let sum = cx.b.reshape(sum, vec![rows_s, one]);
    let next = cx.b.binary(BinaryOp::Add, carried[0], sum);
    cx.b.end_loop(vec![next]);
    Ok(())
}

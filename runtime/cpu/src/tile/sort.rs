//! `sort` of a tile: every line along the last axis in the order of
//! [`crate::order`], with the positions the values came from.

use super::elementwise::Arg;
use super::value::{Elem, Elems, TileVal, ValInfo};
use super::{fail, R};
use crate::order::{permutation, Key};

/// The lines of `value` (along its last axis) sorted: the values, and
/// their int32 positions, as tiles of types `outs`.
pub(crate) fn sort(
    value: Arg<'_>,
    descending: bool,
    outs: (&ValInfo, &ValInfo),
) -> R<(TileVal, TileVal)> {
    let shape = &value.1.shape;
    let Some(&n) = shape.last() else {
        return fail("sort of a scalar");
    };
    if outs.0.shape != *shape || outs.1.shape != *shape {
        return fail(format!("a sort of {shape:?} keeps its shape"));
    }
    fn lines<T: Key + Elem>(xs: &[T], n: usize, descending: bool) -> (TileVal, TileVal) {
        let mut values = Vec::with_capacity(xs.len());
        let mut places = Vec::with_capacity(xs.len());
        for line in xs.chunks(n.max(1)) {
            for p in permutation(line, descending) {
                values.push(line[p]);
                places.push(p as i64);
            }
        }
        (
            T::tile(Elems::from_vec(values)),
            TileVal::Int(Elems::from_vec(places)),
        )
    }
    Ok(match value.0 {
        TileVal::F32(e) => lines(e.as_slice(), n, descending),
        TileVal::F64(e) => lines(e.as_slice(), n, descending),
        TileVal::Int(e) => lines(e.as_slice(), n, descending),
        TileVal::Bool(e) => lines(e.as_slice(), n, descending),
    })
}

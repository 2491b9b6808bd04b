//! Kernels whose result picks elements of other tensors: `concat` (each
//! element read from the operand that holds it) and `gather` / `take`
//! (the coordinate along one axis read from an index tensor, checked to be
//! inside the tensor it selects from).

use super::{Ctx, R};
use crate::ir::{TOp, Value};
use tessera_graph::{BinaryOp, Op, ValueId};
use tessera_schedule::fuse::dims;
use tessera_syntax::ast::Dtype;

/// The tile of anchor `v` at the index tiles `idx` of its own shape (an
/// elementwise iteration), if it is one of this file's ops.
pub(super) fn anchor_value(
    cx: &mut Ctx<'_>,
    v: ValueId,
    idx: &[Value],
    mask: Option<Value>,
) -> R<Option<Value>> {
    let n = cx.g.node(v).clone();
    Ok(Some(match n.op {
        Op::Concat { axis } => concat(cx, &n.args, axis, idx, mask)?,
        Op::Gather { axis } => {
            let ix = index(cx, n.args[0], n.args[1], axis, idx.to_vec(), mask)?;
            let mut at = idx.to_vec();
            at[axis] = ix;
            cx.load(n.args[0], at, mask)?
        }
        Op::Take { axis } => {
            let m = dims(cx.g, n.args[1]).len();
            let picked = idx[axis..axis + m].to_vec();
            let ix = index(cx, n.args[0], n.args[1], axis, picked, mask)?;
            let mut at = idx[..axis].to_vec();
            at.push(ix);
            at.extend_from_slice(&idx[axis + m..]);
            cx.load(n.args[0], at, mask)?
        }
        _ => return Ok(None),
    }))
}

/// Scatter `v` over its iteration space at `idx`: each source element
/// added atomically (or written) into the result at the position its index
/// names (checked to lie inside the result).
pub(super) fn scatter_add(cx: &mut Ctx<'_>, v: ValueId, idx: &[Value], mask: Value) -> R<()> {
    let n = cx.g.node(v).clone();
    let Op::Scatter { axis, vector, add } = n.op else {
        return Err(super::unsupported(cx.g, v, "a scatter of another op"));
    };
    let (index, src) = (n.args[0], n.args[1]);
    let at = if vector {
        vec![idx[axis]]
    } else {
        idx.to_vec()
    };
    let ix = self::index(cx, v, index, axis, at, Some(mask))?;
    let x = cx.load(src, idx.to_vec(), Some(mask))?;
    let mut to = idx.to_vec();
    to[axis] = ix;
    let p = cx.params[&v];
    let atomic = add.then_some(crate::ir::Combine::Sum);
    cx.b.store(p, to, x, Some(mask), atomic);
    Ok(())
}

/// Each element from the operand whose range along `axis` holds it.
fn concat(
    cx: &mut Ctx<'_>,
    args: &[ValueId],
    axis: usize,
    idx: &[Value],
    mask: Option<Value>,
) -> R<Value> {
    let (g, first) = (cx.g, args[0]);
    let mut out: Option<Value> = None;
    let mut offset = cx.b.int(0);
    for &a in args {
        let extent = dims(cx.g, a)[axis].clone();
        let extent = cx.dim(&extent);
        let local = cx.b.binary(BinaryOp::Sub, idx[axis], offset);
        let end = cx.b.binary(BinaryOp::Add, offset, extent);
        let from = cx.b.binary(BinaryOp::Ge, idx[axis], offset);
        let before = cx.b.binary(BinaryOp::Lt, idx[axis], end);
        let inside = cx.b.binary(BinaryOp::And, from, before);
        let mut at = idx.to_vec();
        at[axis] = local;
        let m = cx.b.and(mask, Some(inside));
        let x = cx.load(a, at, m)?;
        out = Some(match out {
            None => x,
            Some(prev) => {
                let dtype = cx.b.ty(x).dtype;
                cx.b.select(inside, x, prev, dtype)
            }
        });
        offset = end;
    }
    out.ok_or_else(|| super::unsupported(g, first, "a concat of nothing"))
}

/// The coordinates along `axis` of `x` read from `index` at `at`, as an
/// index tile; the program fails where one lies outside x (masked lanes
/// excepted).
fn index(
    cx: &mut Ctx<'_>,
    x: ValueId,
    index: ValueId,
    axis: usize,
    at: Vec<Value>,
    mask: Option<Value>,
) -> R<Value> {
    let raw = cx.load(index, at, mask)?;
    let ix = cx.b.cast(raw, crate::build::INDEX);
    let extent = dims(cx.g, x)[axis].clone();
    let extent = cx.dim(&extent);
    let zero = cx.b.int(0);
    let low = cx.b.binary(BinaryOp::Ge, ix, zero);
    let high = cx.b.binary(BinaryOp::Lt, ix, extent);
    let ok = cx.b.binary(BinaryOp::And, low, high);
    let ok = match mask {
        Some(m) => {
            let outside = cx.b.unary(tessera_graph::UnaryOp::Not, m);
            cx.b.binary(BinaryOp::Or, ok, outside)
        }
        None => ok,
    };
    let ok = cx.b.cast(ok, Dtype::Bool);
    cx.b.effect(TOp::Assert(ok, crate::ir::Check::Index, vec![ix, extent]));
    Ok(ix)
}

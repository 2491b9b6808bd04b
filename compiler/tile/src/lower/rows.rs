//! Elementwise and row kernels.
//!
//! An elementwise kernel covers a `[rows, cols]` block of its output (rows
//! are the flattened outer dimensions, cols the last one). A row kernel owns
//! `rows` whole rows of the reduced axis and walks them in chunks of `cols`:
//! one pass per level of reductions (a layernorm's mean, then its variance),
//! and a last pass that writes the row-shaped results. Reductions accumulate
//! chunk by chunk in the accumulation dtype; `kahan_sum` carries a
//! compensation, `deterministic` gets a fixed order because one program owns
//! each row whatever the thread count.

use super::{count, unsupported, Ctx, R};
use crate::ir::{Combine, TileTy, Value};
use tessera_core::RowTile;
use tessera_graph::{BinaryOp, Op, ReduceKind, ValueId};
use tessera_schedule::fuse::{class, dims, row_class, Class, RowClass};
use tessera_schedule::Size;
use tessera_sema::{Dim, Policy};
use tessera_syntax::ast::Dtype;

/// An elementwise kernel over the anchor's shape.
pub(super) fn elementwise(cx: &mut Ctx<'_>, tile: &RowTile) -> R<()> {
    let anchor = cx.k.anchor;
    let shape = tessera_schedule::fuse::iteration_shape(cx.g, anchor);
    let (rows_s, cols_s) = (tile.rows.clone(), tile.cols.clone());
    let (outer, last): (Vec<Dim>, Option<Dim>) = match shape.split_last() {
        Some((l, o)) => (o.to_vec(), Some(l.clone())),
        None => (Vec::new(), None),
    };
    let pc = cx.b.program_id(0);
    let pr = cx.b.program_id(1);
    let cols = cx.block_range(pc, &cols_s, vec![Size::Const(1), cols_s.clone()]);
    let rows = cx.block_range(pr, &rows_s, vec![rows_s.clone(), Size::Const(1)]);
    let r = count(cx, &outer);
    let c = match &last {
        Some(d) => cx.dim(d),
        None => cx.b.int(1),
    };
    let rm = cx.b.binary(BinaryOp::Lt, rows, r);
    let cm = cx.b.binary(BinaryOp::Lt, cols, c);
    let mask = cx.b.binary(BinaryOp::And, rm, cm);
    let mut idx = cx.unflatten(rows, &outer);
    if last.is_some() {
        idx.push(cols);
    }
    if matches!(cx.g.node(anchor).op, Op::Scatter { .. }) {
        // Adds (or writes) into its result at the positions its index
        // names: nothing else runs in this kernel.
        return super::select::scatter_add(cx, anchor, &idx, mask);
    }
    if matches!(class(cx.g, anchor), Class::View | Class::Scalar) {
        // A result that is a view or a scalar: copy it out.
        let x = cx.operand(anchor, &shape, &idx, Some(mask))?;
        cx.vals.insert(anchor, x);
    } else if matches!(cx.g.node(anchor).op, Op::Conv2d { .. }) {
        let x = super::conv::direct(cx, &idx, mask)?;
        cx.anchor_result(x);
    } else if let Some(x) = super::select::anchor_value(cx, anchor, &idx, Some(mask))? {
        cx.vals.insert(anchor, x);
    } else {
        let mut args = Vec::new();
        for &a in &cx.g.node(anchor).args {
            args.push(cx.operand(a, &shape, &idx, Some(mask))?);
        }
        let x = cx.math(anchor, &args, Some(mask))?;
        cx.vals.insert(anchor, x);
    }
    cx.epilogue(&shape, &idx, Some(mask))
}

/// The iteration spaces of a row program.
struct Rows {
    /// The full iteration shape.
    full: Vec<Dim>,
    /// The shape without the reduced axis.
    outer: Vec<Dim>,
    axis: usize,
    /// Index tiles (`[rows, 1]`) of the non-reduced dims.
    nidx: Vec<Value>,
    /// Rows inside the tensor.
    rmask: Value,
    /// Tile extents.
    rows: Size,
    cols: Size,
}

impl Rows {
    fn full_idx(&self, cols: Value) -> Vec<Value> {
        let mut idx = self.nidx.clone();
        idx.insert(self.axis, cols);
        idx
    }
}

/// Level of each member: reductions add one to their operand's level.
fn levels(cx: &Ctx<'_>) -> Vec<(ValueId, usize)> {
    let mut out: Vec<(ValueId, usize)> = Vec::new();
    for &v in &cx.k.nodes {
        let n = cx.g.node(v);
        let arg_level = n
            .args
            .iter()
            .filter_map(|a| out.iter().find(|(m, _)| m == a).map(|(_, l)| *l))
            .max()
            .unwrap_or(0);
        let l = if matches!(n.op, Op::Reduce { .. }) {
            arg_level + 1
        } else {
            arg_level
        };
        out.push((v, l));
    }
    out
}

/// A row kernel reducing `axis`.
pub(super) fn row(cx: &mut Ctx<'_>, axis: usize, tile: &RowTile) -> R<()> {
    let anchor = cx.k.anchor;
    let full = match cx.g.node(anchor).op {
        Op::Reduce { .. } => dims(cx.g, cx.g.node(anchor).args[0]),
        _ => dims(cx.g, anchor),
    };
    let mut outer = full.clone();
    outer.remove(axis);
    let (rows_s, cols_s) = (tile.rows.clone(), tile.cols.clone());
    let pr = cx.b.program_id(0);
    let rows = cx.block_range(pr, &rows_s, vec![rows_s.clone(), Size::Const(1)]);
    let r = count(cx, &outer);
    let rmask = cx.b.binary(BinaryOp::Lt, rows, r);
    let nidx = cx.unflatten(rows, &outer);
    let sp = Rows {
        full,
        outer,
        axis,
        nidx,
        rmask,
        rows: rows_s,
        cols: cols_s,
    };
    let levels = levels(cx);
    let max_level = levels.iter().map(|(_, l)| *l).max().unwrap_or(0);
    let class_of = |cx: &Ctx<'_>, v: ValueId| row_class(&sp.full, axis, &dims(cx.g, v));
    for pass in 0..=max_level {
        let reductions: Vec<ValueId> = levels
            .iter()
            .filter(|(v, l)| matches!(cx.g.node(*v).op, Op::Reduce { .. }) && *l == pass + 1)
            .map(|(v, _)| *v)
            .collect();
        let stores: Vec<ValueId> = if pass == max_level {
            cx.k.outputs
                .iter()
                .copied()
                .filter(|v| class_of(cx, *v) == Some(RowClass::Full))
                .collect()
        } else {
            Vec::new()
        };
        if !reductions.is_empty() || !stores.is_empty() {
            chunk_loop(cx, &sp, &reductions, &stores)?;
        }
        // Per-row values that are now computable.
        for (v, l) in &levels {
            let per_row = matches!(class_of(cx, *v), Some(RowClass::Kept | RowClass::Dropped));
            if *l <= pass + 1 && per_row && !cx.vals.contains_key(v) {
                let kept = kept_idx(cx, &sp);
                value(cx, &sp, *v, None, &kept)?;
            }
        }
    }
    for &o in &cx.k.outputs.clone() {
        match class_of(cx, o) {
            Some(RowClass::Kept) => {
                let idx = kept_idx(cx, &sp);
                let x = cx.vals[&o];
                cx.store(o, idx, x, Some(sp.rmask));
            }
            Some(RowClass::Dropped) => {
                let x = cx.vals[&o];
                cx.store(o, sp.nidx.clone(), x, Some(sp.rmask));
            }
            _ => {}
        }
    }
    Ok(())
}

fn kept_idx(cx: &mut Ctx<'_>, sp: &Rows) -> Vec<Value> {
    let zero = cx.b.int(0);
    sp.full_idx(zero)
}

/// The tile of `v` (member or operand), emitting members on demand. `cols`
/// is the chunk's column tile inside a chunk loop; `kept` the index tiles
/// for per-row operands.
fn value(cx: &mut Ctx<'_>, sp: &Rows, v: ValueId, mask: Option<Value>, idx: &[Value]) -> R<Value> {
    if let Some(x) = cx.vals.get(&v) {
        return Ok(*x);
    }
    if !cx.k.nodes.contains(&v) {
        // An operand of a value of the full space (or of a kept one, with
        // the reduced axis 1): aligned to it by its last dims. (One of the
        // rows' shape lines up with the full space's last dims, as numpy
        // has it: for a square [N, N] reduced along 1, a [N] operand of
        // `x * v` is read at the column.)
        let full = sp.full.clone();
        return cx.operand(v, &full, idx, mask);
    }
    if matches!(cx.g.node(v).op, Op::Reduce { .. }) {
        return Err(unsupported(cx.g, v, "a reduction used before its pass"));
    }
    // Operands broadcast against `v` as numpy aligns shapes: by their
    // last dims to `v`'s, so an operand of a per-row value ([A, N] when
    // [A, N, K] is reduced along K) lines up with the rows' dims, not
    // with the full space's last ones (a [N] scale of `sum(x, -1)` is
    // read at the row's N index, not at column 0).
    let per_row = row_class(&sp.full, sp.axis, &dims(cx.g, v)) == Some(RowClass::Dropped);
    let mut args = Vec::new();
    for &a in &cx.g.node(v).args.clone() {
        let x = if per_row && !cx.k.nodes.contains(&a) {
            let outer = sp.outer.clone();
            cx.operand(a, &outer, &sp.nidx, Some(sp.rmask))?
        } else {
            value(cx, sp, a, mask, idx)?
        };
        args.push(x);
    }
    let x = cx.math(v, &args, mask)?;
    cx.vals.insert(v, x);
    Ok(x)
}

fn identity(combine: Combine) -> f64 {
    match combine {
        Combine::Sum => 0.0,
        Combine::Max => f64::NEG_INFINITY,
        Combine::Min => f64::INFINITY,
        Combine::Prod => 1.0,
    }
}

struct Acc {
    v: ValueId,
    combine: Combine,
    mean: bool,
    policy: Policy,
    acc: Dtype,
}

/// One pass over the row in chunks: accumulates `reductions`, stores
/// `stores`.
fn chunk_loop(cx: &mut Ctx<'_>, sp: &Rows, reductions: &[ValueId], stores: &[ValueId]) -> R<()> {
    let per_row = TileTy {
        shape: vec![sp.rows.clone(), Size::Const(1)],
        dtype: Dtype::Fp32,
    };
    let mut accs = Vec::new();
    let mut init = Vec::new();
    for &r in reductions {
        let Op::Reduce {
            kind, policy, acc, ..
        } = cx.g.node(r).op
        else {
            continue;
        };
        let combine = match kind {
            ReduceKind::Sum | ReduceKind::Mean => Combine::Sum,
            ReduceKind::Max => Combine::Max,
            ReduceKind::Min => Combine::Min,
            ReduceKind::Prod => Combine::Prod,
        };
        let kahan = combine == Combine::Sum && policy == Policy::KahanSum;
        // A compensated sum keeps a (sum, compensation) pair per element of
        // the chunk across the loop, reduced once after it: every partial
        // is compensated, not only the chunks' rounded totals.
        let ty = TileTy {
            dtype: acc,
            shape: if kahan {
                vec![sp.rows.clone(), sp.cols.clone()]
            } else {
                per_row.shape.clone()
            },
        };
        init.push(cx.b.constant(identity(combine), ty.clone()));
        if kahan {
            init.push(cx.b.constant(0.0, ty));
        }
        accs.push(Acc {
            v: r,
            combine,
            mean: kind == ReduceKind::Mean,
            policy,
            acc,
        });
    }
    let c = cx.dim(&sp.full[sp.axis]);
    let lo = cx.b.int(0);
    let step = cx.b.size(&sp.cols);
    let saved = cx.vals.clone();
    let (c0, carried) = cx.b.begin_loop(lo, c, step, init);
    let next = chunk_body(cx, sp, &accs, stores, c0, &carried);
    cx.vals = saved;
    let next = next?;
    let results = cx.b.end_loop(next);
    let mut slot = 0;
    for a in &accs {
        let mut x = results[slot];
        slot += if a.combine == Combine::Sum && a.policy == Policy::KahanSum {
            // The per-element sums, compensated, less the compensations
            // (the negated low-order parts the running sums lost).
            let sums = cx.b.reduce(Combine::Sum, x, 1, Policy::KahanSum);
            let comps =
                cx.b.reduce(Combine::Sum, results[slot + 1], 1, Policy::KahanSum);
            let total = cx.b.binary(BinaryOp::Sub, sums, comps);
            x = cx.b.reshape(total, vec![sp.rows.clone(), Size::Const(1)]);
            2
        } else {
            1
        };
        if a.mean {
            let n = cx.dim(&sp.full[sp.axis]);
            x = cx.b.binary(BinaryOp::Div, x, n);
        }
        let d = cx.g.tensor_ty(a.v).map(|t| t.dtype).unwrap_or(Dtype::Fp32);
        let x = cx.b.cast(x, d);
        cx.vals.insert(a.v, x);
    }
    Ok(())
}

fn chunk_body(
    cx: &mut Ctx<'_>,
    sp: &Rows,
    accs: &[Acc],
    stores: &[ValueId],
    c0: Value,
    carried: &[Value],
) -> R<Vec<Value>> {
    let r = cx.b.arange(&sp.cols);
    let r = cx.b.binary(BinaryOp::Add, r, c0);
    let cols = cx.b.reshape(r, vec![Size::Const(1), sp.cols.clone()]);
    let c = cx.dim(&sp.full[sp.axis]);
    let cm = cx.b.binary(BinaryOp::Lt, cols, c);
    let mask = cx.b.binary(BinaryOp::And, sp.rmask, cm);
    let idx = sp.full_idx(cols);
    let mut next = Vec::new();
    let mut slot = 0;
    for a in accs {
        let operand = cx.g.node(a.v).args[0];
        let x = value(cx, sp, operand, Some(mask), &idx)?;
        let x = cx.b.broadcast(x, vec![sp.rows.clone(), sp.cols.clone()]);
        let x = cx.b.cast(x, a.acc);
        let id = cx.b.constant(identity(a.combine), TileTy::scalar(a.acc));
        let x = cx.b.select(mask, x, id, a.acc);
        if a.combine == Combine::Sum && a.policy == Policy::KahanSum {
            let (s, comp) = cx.b.kahan_add(carried[slot], carried[slot + 1], x);
            next.push(s);
            next.push(comp);
            slot += 2;
            continue;
        }
        let part = cx.b.reduce(a.combine, x, 1, a.policy);
        let part = cx.b.reshape(part, vec![sp.rows.clone(), Size::Const(1)]);
        let prev = carried[slot];
        match a.combine {
            Combine::Sum => next.push(cx.b.binary(BinaryOp::Add, prev, part)),
            Combine::Max => next.push(cx.b.binary(BinaryOp::Max, prev, part)),
            Combine::Min => next.push(cx.b.binary(BinaryOp::Min, prev, part)),
            Combine::Prod => next.push(cx.b.binary(BinaryOp::Mul, prev, part)),
        }
        slot += 1;
    }
    for &o in stores {
        let x = value(cx, sp, o, Some(mask), &idx)?;
        let full = sp.full.clone();
        let i = cx.align(o, &full, &idx);
        cx.store(o, i, x, Some(mask));
    }
    Ok(next)
}

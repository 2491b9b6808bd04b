//! Argsort kernels, along one axis, in the one order of
//! [`TOp::Sort`](crate::ir::TOp::Sort) (NaN the largest, ties by position):
//!
//! - **network**: lines (or segments of a line) whose padded length the
//!   schedule made the tile's columns are loaded whole, padded with a value
//!   that sorts after every element (NaN ascending, -inf descending, an
//!   integer dtype's extreme: ties go by position, and the padding comes
//!   last), sorted by one `sort` instruction (a bitonic network in shared
//!   memory on the GPU), and their positions stored;
//! - **ranks**: longer lines (or lines of a symbolic extent) are cut into
//!   chunks of the tile's columns, a program per chunk; each element of
//!   the chunk counts the elements of its line that go before it, a chunk
//!   of the line per trip (a tile of pairs, never stored), and its
//!   position is stored at the place it counted. The work is quadratic in
//!   the line's length, spread over all its chunks' programs;
//! - **merge**: a line sorted in segments (positions of a segmented
//!   argsort) is placed whole: each element's place is the number of
//!   elements that go before it in every segment, a binary search in each
//!   (so n · segments · log segment comparisons), and its position is
//!   stored there. A line sorted whole is sorted in every segment too.

use super::{Ctx, R};
use crate::ir::{Combine, TileTy, Value};
use tessera_core::RowTile;
use tessera_graph::{BinaryOp, Op, UnaryOp, ValueId};
use tessera_schedule::fuse::dims;
use tessera_schedule::Size;
use tessera_sema::{Dim, Policy};
use tessera_syntax::ast::Dtype;

/// The argsort kernel of the anchor along `axis`.
pub(super) fn argsort(cx: &mut Ctx<'_>, axis: usize, tile: &RowTile) -> R<()> {
    let anchor = cx.k.anchor;
    let (descending, segment) = match cx.g.node(anchor).op {
        Op::Argsort {
            descending,
            segment,
            ..
        } => (descending, segment),
        Op::Merge {
            descending,
            segment,
            ..
        } => return merge(cx, axis, tile, (descending, segment)),
        _ => unreachable!("an argsort kernel's anchor is an argsort or a merge"),
    };
    let n = dims(cx.g, anchor)[axis].as_known();
    let len = match segment {
        0 => n,
        s => n.map(|n| n.min(s)),
    };
    let whole = matches!((len, tile.cols.as_const()), (Some(n), Some(c)) if c as u64 >= n);
    if whole {
        network(cx, axis, tile, (descending, segment))
    } else {
        ranks(cx, axis, tile, descending)
    }
}

/// The operand's tile at `idx` (booleans as int32, which the network
/// compares).
fn operand(cx: &mut Ctx<'_>, idx: Vec<Value>, mask: Value) -> R<Value> {
    let x = cx.g.node(cx.k.anchor).args[0];
    let t = cx.load(x, idx, Some(mask))?;
    Ok(if cx.b.ty(t).dtype == Dtype::Bool {
        cx.b.cast(t, Dtype::Int32)
    } else {
        t
    })
}

fn network(
    cx: &mut Ctx<'_>,
    axis: usize,
    tile: &RowTile,
    (descending, segment): (bool, u64),
) -> R<()> {
    let anchor = cx.k.anchor;
    let full = dims(cx.g, anchor);
    let one = Size::Const(1);
    let pr = cx.b.program_id(0);
    let rows = cx.block_range(pr, &tile.rows, vec![tile.rows.clone(), one.clone()]);
    let cols = cx.b.arange(&tile.cols);
    let cols = cx.b.reshape(cols, vec![one, tile.cols.clone()]);
    let n = cx.dim(&full[axis]);
    // Each tile row a line, or a segment of one: its first element.
    let (rmask, mut idx, first) = cx.line_rows(rows, (&full, axis), segment);
    let along = match first {
        Some(f) => cx.b.binary(BinaryOp::Add, cols, f),
        None => cols,
    };
    let cmask = cx.b.binary(BinaryOp::Lt, along, n);
    idx.insert(axis, along);
    let mask = cx.b.binary(BinaryOp::And, rmask, cmask);
    let t = operand(cx, idx.clone(), mask)?;
    let dtype = cx.b.ty(t).dtype;
    let pad =
        cx.b.constant(dtype.sort_last(descending).to_f64(), TileTy::scalar(dtype));
    let t = cx.b.select(mask, t, pad, dtype);
    let (_, places) = cx.b.sort(t, descending);
    let places = match first {
        Some(f) => {
            let at = cx.b.binary(BinaryOp::Add, places, f);
            cx.b.cast(at, Dtype::Int32)
        }
        None => places,
    };
    cx.store(anchor, idx, places, Some(mask));
    Ok(())
}

fn ranks(cx: &mut Ctx<'_>, axis: usize, tile: &RowTile, descending: bool) -> R<()> {
    let anchor = cx.k.anchor;
    let full = dims(cx.g, anchor);
    let one = Size::Const(1);
    let c = tile.cols.clone();
    let n = cx.dim(&full[axis]);
    let (base, ar, mine) = line_block(cx, (&full, axis), &c);
    let width = cx.b.size(&c);
    let mine = cx.b.reshape(mine, vec![c.clone(), one.clone()]);
    let in_line = cx.b.binary(BinaryOp::Lt, mine, n);
    let mut at = base.clone();
    at.insert(axis, mine);
    let xi = operand(cx, at.clone(), in_line)?;
    let zero = cx.b.constant(
        0.0,
        TileTy {
            shape: vec![c.clone(), one.clone()],
            dtype: Dtype::Int32,
        },
    );
    let lo = cx.b.int(0);
    let (j0, carried) = cx.b.begin_loop(lo, n, width, vec![zero]);
    let others = cx.b.binary(BinaryOp::Add, ar, j0);
    let others = cx.b.reshape(others, vec![one, c.clone()]);
    let valid = cx.b.binary(BinaryOp::Lt, others, n);
    let mut from = base;
    from.insert(axis, others);
    let xj = operand(cx, from, valid)?;
    let before = goes_before(cx, (xj, others), (xi, mine), descending);
    let before = cx.b.binary(BinaryOp::And, before, valid);
    let before = cx.b.cast(before, Dtype::Int32);
    let counted = cx.b.reduce(Combine::Sum, before, 1, Policy::Deterministic);
    let counted = cx.b.reshape(counted, vec![c, Size::Const(1)]);
    let next = cx.b.binary(BinaryOp::Add, carried[0], counted);
    let place = cx.b.end_loop(vec![next])[0];
    let place = cx.b.cast(place, Dtype::Int64);
    let mut to = at.clone();
    to[axis] = place;
    let pos = cx.b.cast(at[axis], Dtype::Int32);
    cx.store(anchor, to, pos, Some(in_line));
    Ok(())
}

/// Program p's block of `c` consecutive elements of a line along `axis`
/// of a value of dims `full`: block p % blocks of line p / blocks. The
/// index scalars of the line's other dimensions, `[0, c)`, and the block's
/// positions along the line.
fn line_block(
    cx: &mut Ctx<'_>,
    (full, axis): (&[Dim], usize),
    c: &Size,
) -> (Vec<Value>, Value, Value) {
    let mut outer = full.to_vec();
    outer.remove(axis);
    let line_len = full[axis].to_size().unwrap_or(Size::Const(1));
    let pid = cx.b.program_id(0);
    let width = cx.b.size(c);
    let blocks = cx.b.size(&line_len.cdiv(c.clone()));
    let line = cx.b.binary(BinaryOp::Div, pid, blocks);
    let block = cx.b.binary(BinaryOp::Rem, pid, blocks);
    let base = cx.unflatten(line, &outer);
    let start = cx.b.binary(BinaryOp::Mul, block, width);
    let ar = cx.b.arange(c);
    let at = cx.b.binary(BinaryOp::Add, ar, start);
    (base, ar, at)
}

/// Binary search steps that find a place among `segment` elements.
fn search_steps(segment: u64) -> i64 {
    i64::from(u64::BITS - segment.leading_zeros())
}

fn merge(
    cx: &mut Ctx<'_>,
    axis: usize,
    tile: &RowTile,
    (descending, segment): (bool, u64),
) -> R<()> {
    let anchor = cx.k.anchor;
    let sorted = cx.g.node(anchor).args[1];
    let full = dims(cx.g, anchor);
    let c = tile.cols.clone();
    let n = cx.dim(&full[axis]);
    let line_len = full[axis].to_size().unwrap_or(Size::Const(1));
    let (base, _, slots) = line_block(cx, (&full, axis), &c);
    let in_line = cx.b.binary(BinaryOp::Lt, slots, n);
    // Each slot's element.
    let (pos, v) = element(cx, (&base, axis), sorted, slots, in_line)?;
    // For every segment, the elements in it that go before each element.
    let zero = cx.b.constant(
        0.0,
        TileTy {
            shape: vec![c.clone()],
            dtype: Dtype::Int64,
        },
    );
    let segments = cx.b.size(&line_len.cdiv(Size::Const(segment as i64)));
    let (lo, one) = (cx.b.int(0), cx.b.int(1));
    let (s, counted) = cx.b.begin_loop(lo, segments, one, vec![zero]);
    let seg = cx.b.int(segment as i64);
    let first = cx.b.binary(BinaryOp::Mul, s, seg);
    let left = cx.b.binary(BinaryOp::Sub, n, first);
    let len = cx.b.binary(BinaryOp::Min, left, seg);
    let hi0 = cx.b.broadcast(len, vec![c.clone()]);
    let steps = cx.b.int(search_steps(segment));
    let (_, range) = cx.b.begin_loop(lo, steps, one, vec![zero, hi0]);
    let (below, above) = (range[0], range[1]);
    let open = cx.b.binary(BinaryOp::Lt, below, above);
    let open = cx.b.binary(BinaryOp::And, open, in_line);
    let sum = cx.b.binary(BinaryOp::Add, below, above);
    let two = cx.b.int(2);
    let mid = cx.b.binary(BinaryOp::Div, sum, two);
    let probe = cx.b.binary(BinaryOp::Add, mid, first);
    let (their_pos, theirs) = element(cx, (&base, axis), sorted, probe, open)?;
    let before = goes_before(cx, (theirs, their_pos), (v, pos), descending);
    let right = cx.b.binary(BinaryOp::And, open, before);
    let not_before = cx.b.unary(UnaryOp::Not, before);
    let left = cx.b.binary(BinaryOp::And, open, not_before);
    let past = cx.b.binary(BinaryOp::Add, mid, one);
    let below = cx.b.select(right, past, below, Dtype::Int64);
    let above = cx.b.select(left, mid, above, Dtype::Int64);
    let found = cx.b.end_loop(vec![below, above])[0];
    let next = cx.b.binary(BinaryOp::Add, counted[0], found);
    let place = cx.b.end_loop(vec![next])[0];
    let mut at = base;
    at.insert(axis, place);
    let pos = cx.b.cast(pos, Dtype::Int32);
    cx.store(anchor, at, pos, Some(in_line));
    Ok(())
}

/// The element the segmented order `sorted` puts at `slot` of the line
/// whose other indices are `base`: its position (int64) and its value.
fn element(
    cx: &mut Ctx<'_>,
    (base, axis): (&[Value], usize),
    sorted: ValueId,
    slot: Value,
    mask: Value,
) -> R<(Value, Value)> {
    let mut at = base.to_vec();
    at.insert(axis, slot);
    let pos = cx.load(sorted, at, Some(mask))?;
    let pos = cx.b.cast(pos, Dtype::Int64);
    let mut at = base.to_vec();
    at.insert(axis, pos);
    Ok((pos, operand(cx, at, mask)?))
}

/// Whether element `b` (value, position) goes before `a` in the order:
/// the greater first when `descending`, else the smaller; NaN the
/// largest; equal values (two NaNs among them) by position. Operands
/// broadcast.
fn goes_before(
    cx: &mut Ctx<'_>,
    (b, b_at): (Value, Value),
    (a, a_at): (Value, Value),
    descending: bool,
) -> Value {
    let bin = |cx: &mut Ctx<'_>, op: BinaryOp, x: Value, y: Value| cx.b.binary(op, x, y);
    let cmp = if descending {
        BinaryOp::Gt
    } else {
        BinaryOp::Lt
    };
    // Ordered comparisons: false where either is NaN.
    let mut first = bin(cx, cmp, b, a);
    let mut tie = bin(cx, BinaryOp::Eq, b, a);
    if cx.b.ty(a).dtype.is_float() {
        let nan_a = bin(cx, BinaryOp::Ne, a, a);
        let nan_b = bin(cx, BinaryOp::Ne, b, b);
        // The NaN goes last ascending, first descending.
        let (nan, num) = if descending {
            (nan_b, nan_a)
        } else {
            (nan_a, nan_b)
        };
        let not_num = cx.b.unary(UnaryOp::Not, num);
        let by_nan = bin(cx, BinaryOp::And, nan, not_num);
        first = bin(cx, BinaryOp::Or, first, by_nan);
        let both = bin(cx, BinaryOp::And, nan_a, nan_b);
        tie = bin(cx, BinaryOp::Or, tie, both);
    }
    let earlier = bin(cx, BinaryOp::Lt, b_at, a_at);
    let by_place = bin(cx, BinaryOp::And, tie, earlier);
    bin(cx, BinaryOp::Or, first, by_place)
}

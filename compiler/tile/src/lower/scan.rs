//! Scans along one axis (`cumsum`, `cumprod`, `cummax`, `cummin`,
//! `logcumsumexp`): a program takes `rows` lines along the axis and walks
//! them in chunks. A chunk's inclusive scan comes from
//! [`KernelBuilder::scan_tile`](crate::build::KernelBuilder) (for sums one
//! product with the upper-triangular matrix of ones, computed where it is
//! read, never stored), combined with the running value of the chunks
//! before, which then takes in the chunk's total. The work is linear in the
//! line's length. A segmented scan walks each segment of a line as a line
//! of its own (the graph builder joins them). Scans run in [`scan_dtype`]
//! (sums in fp32 for floats, int32 or int64 for integers).

use super::{dtype_of, Ctx, R};
use crate::ir::TileTy;
use crate::scan::scan_dtype;
use tessera_core::{RowTile, ScanKind};
use tessera_graph::{BinaryOp, Op};
use tessera_schedule::fuse::dims;
use tessera_schedule::Size;

/// Elements of a line one trip of the chunk loop covers: sums take 64 in
/// one product; the others compare every pair of a chunk.
fn chunk(kind: ScanKind) -> i64 {
    match kind {
        ScanKind::Sum => 64,
        _ => 32,
    }
}

/// The scan kernel of the anchor along `axis`.
pub(super) fn scan(cx: &mut Ctx<'_>, axis: usize, tile: &RowTile) -> R<()> {
    let anchor = cx.k.anchor;
    let Op::Scan { kind, segment, .. } = cx.g.node(anchor).op else {
        unreachable!("a scan kernel's anchor is a scan")
    };
    let x = cx.g.node(anchor).args[0];
    let full = dims(cx.g, anchor);
    let one = Size::Const(1);
    let rows_s = tile.rows.clone();
    let pr = cx.b.program_id(0);
    let rows = cx.block_range(pr, &rows_s, vec![rows_s.clone(), one.clone()]);
    // Each tile row a line, or a segment of one (its first element).
    let (rmask, nidx, first) = cx.line_rows(rows, (&full, axis), segment);
    let dtype = dtype_of(cx.g, anchor);
    let acc = scan_dtype(kind, dtype);
    let c = Size::Const(chunk(kind));
    let ar = cx.b.arange(&c);
    let carry0 = cx.b.constant(
        if kind == ScanKind::LogSumExp {
            f64::NEG_INFINITY
        } else {
            0.0
        },
        TileTy {
            shape: vec![rows_s.clone(), one.clone()],
            dtype: acc,
        },
    );
    let lo = cx.b.int(0);
    // A segment's walk: its own elements (a chunk divides a segment).
    let n = match first {
        Some(_) => cx.b.int(segment as i64),
        None => cx.dim(&full[axis]),
    };
    let step = cx.b.int(chunk(kind));
    let (k0, carried) = cx.b.begin_loop(lo, n, step, vec![carry0]);
    let cols = cx.b.binary(BinaryOp::Add, ar, k0);
    let cols = cx.b.reshape(cols, vec![one.clone(), c.clone()]);
    let cols = match first {
        Some(f) => cx.b.binary(BinaryOp::Add, cols, f),
        None => cols,
    };
    let mut idx = nidx.clone();
    idx.insert(axis, cols);
    let t = cx.load(x, idx.clone(), Some(rmask))?;
    let t = cx.b.cast(t, acc);
    let prefix = cx.b.scan_tile(kind, t, 1);
    let joined = cx.b.scan_combine(kind, prefix, carried[0]);
    let total = cx.b.scan_total(kind, t, 1);
    let total = cx.b.reshape(total, vec![rows_s, one]);
    let next = cx.b.scan_combine(kind, carried[0], total);
    // Sums start from 0 and log-sum-exps from -inf; the others have no
    // such start in every dtype, so their first chunk stands alone.
    let (out, next) = if matches!(kind, ScanKind::Sum | ScanKind::LogSumExp) {
        (joined, next)
    } else {
        let zero = cx.b.int(0);
        let first = cx.b.binary(BinaryOp::Eq, k0, zero);
        (
            cx.b.select(first, prefix, joined, acc),
            cx.b.select(first, total, next, acc),
        )
    };
    let stored = cx.b.cast(out, dtype);
    cx.store(anchor, idx, stored, Some(rmask));
    cx.b.end_loop(vec![next]);
    Ok(())
}

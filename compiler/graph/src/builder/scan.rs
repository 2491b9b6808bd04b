//! Scans (`cumsum`, `cumprod`, `cummax`, `cummin`, `logcumsumexp`). One
//! scan kernel walks each line in chunks, serially; a line past
//! [`LONG_SCAN`] elements would leave most of a GPU idle (one program per
//! line), so it is scanned in segments of [`SCAN_SEGMENT`] in parallel
//! (`Op::Scan` with a segment), and each segment then takes in the scan of
//! the totals of the segments before it. Narrow floats are scanned in
//! fp32 there and rounded once, as a single scan does. `logcumsumexp`
//! keeps the single walk.

use super::{Builder, Frame, R, V};
use crate::ir::{BinaryOp, Op, ValueId};
use tessera_core::ScanKind;
use tessera_diagnostics::Span;
use tessera_sema::Dim;
use tessera_syntax::ast::Dtype;

/// The longest line one scan kernel walks whole.
const LONG_SCAN: u64 = 4096;

/// Elements per segment of a longer line.
const SCAN_SEGMENT: u64 = 1024;

impl Builder<'_, '_> {
    /// The inclusive `kind` scan of `x` along `axis`.
    pub(super) fn scan(
        &mut self,
        f: &Frame,
        x: ValueId,
        kind: ScanKind,
        axis: usize,
        span: Span,
    ) -> R<ValueId> {
        let whole = Op::Scan {
            kind,
            axis,
            segment: 0,
        };
        let Some(t) = self.graph.tensor_ty(x).cloned() else {
            return self.push(f, whole, vec![x], span);
        };
        let long = t.dims[axis].as_known().filter(|&n| n > LONG_SCAN);
        let (Some(n), Some(op)) = (long, kind.binary()) else {
            return self.push(f, whole, vec![x], span);
        };
        let narrow = t.dtype.is_float() && t.dtype.size_bytes() < 4;
        let wide = if narrow {
            self.push(f, Op::Cast(Dtype::Fp32), vec![x], span)?
        } else {
            x
        };
        let s = SCAN_SEGMENT;
        let segments = Op::Scan {
            kind,
            axis,
            segment: s,
        };
        let parts = self.push(f, segments, vec![wide], span)?;
        let int = |b: &mut Self, k: i64| b.node(f, V::Int(k), span);
        let bin = |b: &mut Self, op: BinaryOp, x: ValueId, y: ValueId| {
            b.push(f, Op::Binary(op), vec![x, y], span)
        };
        // Each segment's total: its last element.
        let g = n.div_ceil(s);
        let ar = self.line(f, Dim::known(g), span);
        let one = int(self, 1)?;
        let next = bin(self, BinaryOp::Add, ar, one)?;
        let width = int(self, s as i64)?;
        let end = bin(self, BinaryOp::Mul, next, width)?;
        let end = bin(self, BinaryOp::Sub, end, one)?;
        let last = int(self, n as i64 - 1)?;
        let end = bin(self, BinaryOp::Min, end, last)?;
        let totals = self.push(f, Op::Take { axis }, vec![parts, end], span)?;
        let before = Op::Scan {
            kind,
            axis,
            segment: 0,
        };
        let before = self.push(f, before, vec![totals], span)?;
        // Element j takes in the totals up to segment j / s - 1.
        let ar = self.line(f, Dim::known(n), span);
        let seg = bin(self, BinaryOp::Div, ar, width)?;
        let prev = bin(self, BinaryOp::Sub, seg, one)?;
        let zero = int(self, 0)?;
        let prev = bin(self, BinaryOp::Max, prev, zero)?;
        let carry = self.push(f, Op::Take { axis }, vec![before, prev], span)?;
        let joined = bin(self, op, carry, parts)?;
        // The first segment has nothing before it.
        let at = self.arange_along(f, Dim::known(n), (t.rank(), axis), span);
        let first = bin(self, BinaryOp::Lt, at, width)?;
        let out = self.push(f, Op::Select, vec![first, parts, joined], span)?;
        if narrow {
            return self.push(f, Op::Cast(t.dtype), vec![out], span);
        }
        Ok(out)
    }
}

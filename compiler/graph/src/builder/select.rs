//! Selection primitives built from ops that fuse into one row kernel:
//! `argmax` / `argmin` (the extreme along an axis, then the least index
//! that holds it) and `topk` / `topk_indices` (k such rounds, each leaving
//! out the elements taken before); `sort` / `argsort` (and `topk` past 16
//! picks) as an `argsort` node and a `gather` of it; and `split` / `chunk`,
//! a slice per part.

use super::{const_int, unsupported, Builder, Frame, R, V};
use crate::ir::{BinaryOp, Op, ReduceKind, SliceAxis, Type, ValueId};
use tessera_diagnostics::{codes, Diagnostic, Span};
use tessera_sema::{Dim, TensorTy};
use tessera_syntax::ast::Dtype;

/// The operand of a selection along one axis.
struct Along {
    x: ValueId,
    t: TensorTy,
    axis: usize,
    /// `[0, 1, ..., n - 1]` laid along the axis (extent 1 elsewhere).
    ar: ValueId,
    /// `n` as an int32 scalar: the index past the last.
    past: ValueId,
}

impl Builder<'_, '_> {
    /// `x` and `axis` of a selection call, with the index tiles it needs.
    fn along(
        &mut self,
        f: &mut Frame,
        get: &dyn Fn(&str) -> V,
        what: &str,
        span: Span,
    ) -> R<Along> {
        let x = self.node(f, get("x"), span)?;
        let Some(t) = self.graph.tensor_ty(x).cloned() else {
            return Err(unsupported(
                self.span(f, span),
                format!("`{what}` of a scalar"),
                "not a tensor",
            ));
        };
        let axis = super::prims::axis_of(&get("axis"), -1, t.rank());
        let n = t.dims[axis].clone();
        let ar = self.arange_along(f, n.clone(), (t.rank(), axis), span);
        let past = self.node(f, V::Dim(n), span)?;
        let past = self.push(f, Op::Cast(Dtype::Int32), vec![past], span)?;
        Ok(Along {
            x,
            t,
            axis,
            ar,
            past,
        })
    }

    /// `[0, 1, ..., n - 1]` (int32).
    pub(super) fn line(&mut self, f: &Frame, n: Dim, span: Span) -> ValueId {
        let ty = Type::Tensor(TensorTy::new(vec![n], Dtype::Int32));
        self.push_typed(f, Op::Arange { start: 0 }, vec![], ty, span)
    }

    /// `[0, 1, ..., n - 1]` (int32) laid along `axis` of a tensor of
    /// `rank` (extent 1 elsewhere).
    pub(super) fn arange_along(
        &mut self,
        f: &Frame,
        n: Dim,
        (rank, axis): (usize, usize),
        span: Span,
    ) -> ValueId {
        let ar = self.line(f, n.clone(), span);
        let mut dims = vec![Dim::known(1); rank];
        dims[axis] = n;
        let laid = Type::Tensor(TensorTy::new(dims, Dtype::Int32));
        self.push_typed(f, Op::Reshape, vec![ar], laid, span)
    }

    fn reduce_along(
        &mut self,
        f: &Frame,
        a: &Along,
        kind: ReduceKind,
        v: ValueId,
        span: Span,
    ) -> R<ValueId> {
        let op = Op::Reduce {
            kind,
            axis: a.axis,
            keepdims: true,
            policy: f.numerics.policy,
            acc: self.reduce_accumulator(f, v),
        };
        self.push(f, op, vec![v], span)
    }

    /// The extreme of `a.x` along the axis among the elements `taken` does
    /// not mark, and the least index holding it (a NaN counts as the
    /// extreme, as in torch), both with the axis kept at extent 1.
    fn extreme(
        &mut self,
        f: &Frame,
        a: &Along,
        largest: bool,
        taken: Option<ValueId>,
        span: Span,
    ) -> R<(ValueId, ValueId)> {
        let candidates = match taken {
            Some(t) => {
                let far = self.beyond(a.x, !largest);
                let far = self.node(f, far, span)?;
                self.push(f, Op::Select, vec![t, far, a.x], span)?
            }
            None => a.x,
        };
        let kind = if largest {
            ReduceKind::Max
        } else {
            ReduceKind::Min
        };
        let m = self.reduce_along(f, a, kind, candidates, span)?;
        let hit = self.push(f, Op::Binary(BinaryOp::Eq), vec![candidates, m], span)?;
        let nan = self.push(f, Op::Binary(BinaryOp::Ne), vec![a.x, a.x], span)?;
        let mut hit = self.push(f, Op::Binary(BinaryOp::Or), vec![hit, nan], span)?;
        if let Some(t) = taken {
            let free = self.push(f, Op::Unary(crate::ir::UnaryOp::Not), vec![t], span)?;
            hit = self.push(f, Op::Binary(BinaryOp::And), vec![hit, free], span)?;
        }
        let idx = self.push(f, Op::Select, vec![hit, a.ar, a.past], span)?;
        let i = self.reduce_along(f, a, ReduceKind::Min, idx, span)?;
        Ok((m, i))
    }

    /// `topk(..., largest = false)`'s next pick among the elements `taken`
    /// does not mark: the smallest value and the least index holding it,
    /// NaNs last (torch's ascending order, in which NaN is the largest),
    /// so a NaN is picked, by index, only once every number is taken.
    fn smallest(
        &mut self,
        f: &Frame,
        a: &Along,
        taken: Option<ValueId>,
        span: Span,
    ) -> R<(ValueId, ValueId)> {
        let bin = |b: &mut Self, op: BinaryOp, x: ValueId, y: ValueId| {
            b.push(f, Op::Binary(op), vec![x, y], span)
        };
        let nan = bin(self, BinaryOp::Ne, a.x, a.x)?;
        let out = match taken {
            Some(t) => bin(self, BinaryOp::Or, nan, t)?,
            None => nan,
        };
        let inf = self.beyond(a.x, true);
        let inf = self.node(f, inf, span)?;
        let candidates = self.push(f, Op::Select, vec![out, inf, a.x], span)?;
        let m = self.reduce_along(f, a, ReduceKind::Min, candidates, span)?;
        // A NaN equals nothing: hits are numbers not taken.
        let mut hit = bin(self, BinaryOp::Eq, a.x, m)?;
        let mut nans = nan;
        if let Some(t) = taken {
            let free = self.push(f, Op::Unary(crate::ir::UnaryOp::Not), vec![t], span)?;
            hit = bin(self, BinaryOp::And, hit, free)?;
            nans = bin(self, BinaryOp::And, nans, free)?;
        }
        let idx = self.push(f, Op::Select, vec![hit, a.ar, a.past], span)?;
        let first = self.reduce_along(f, a, ReduceKind::Min, idx, span)?;
        let idx = self.push(f, Op::Select, vec![nans, a.ar, a.past], span)?;
        let first_nan = self.reduce_along(f, a, ReduceKind::Min, idx, span)?;
        // No number left: the first NaN not taken.
        let none = bin(self, BinaryOp::Eq, first, a.past)?;
        let i = self.push(f, Op::Select, vec![none, first_nan, first], span)?;
        let nan_value = match self.graph.tensor_ty(a.x).map(|t| t.dtype) {
            // Integers hold no NaN: never taken.
            Some(d) if d.is_int() => V::Int(0),
            _ => V::Float(f64::NAN),
        };
        let nan_value = self.node(f, nan_value, span)?;
        let m = self.push(f, Op::Select, vec![none, nan_value, m], span)?;
        Ok((m, i))
    }

    /// A value above every element of `x` (`high`) or below: an infinity,
    /// or the greatest or least value of an integer dtype.
    fn beyond(&self, x: ValueId, high: bool) -> V {
        match self
            .graph
            .tensor_ty(x)
            .map(|t| t.dtype)
            .and_then(|d| d.int_range())
        {
            Some((lo, hi)) => V::Int(if high { hi } else { lo }),
            None if high => V::Float(f64::INFINITY),
            None => V::Float(f64::NEG_INFINITY),
        }
    }

    /// `argmax` / `argmin`: the least index of the extreme along the axis.
    pub(super) fn arg_extreme(
        &mut self,
        f: &mut Frame,
        largest: bool,
        get: &dyn Fn(&str) -> V,
        span: Span,
    ) -> R<V> {
        let a = self.along(f, get, if largest { "argmax" } else { "argmin" }, span)?;
        let (_, i) = self.extreme(f, &a, largest, None, span)?;
        if matches!(get("keepdims"), V::Bool(true)) {
            return Ok(V::Node(i));
        }
        // The same least index with the axis dropped (stored by the row
        // kernel itself; the kept one is dead code).
        let picks = self.graph.node(i).args[0];
        let op = Op::Reduce {
            kind: ReduceKind::Min,
            axis: a.axis,
            keepdims: false,
            policy: f.numerics.policy,
            acc: self.reduce_accumulator(f, picks),
        };
        self.push(f, op, vec![picks], span).map(V::Node)
    }

    /// `topk` (values) or `topk_indices`: k rounds of [`Builder::extreme`],
    /// each leaving out the indices taken before, joined along the axis in
    /// order (largest first; ties by the lower index).
    pub(super) fn topk(
        &mut self,
        f: &mut Frame,
        indices: bool,
        get: &dyn Fn(&str) -> V,
        span: Span,
    ) -> R<V> {
        let a = self.along(f, get, "topk", span)?;
        let largest = !matches!(get("largest"), V::Bool(false));
        let Some(k) = const_int(&get("k")) else {
            // A size (`topk(x, C)`) known only at concrete sizes.
            return Err(unsupported(
                self.span(f, span),
                "`topk` of a symbolic number of elements needs its size",
                "k is known at each call",
            ));
        };
        let n = a.t.dims[a.axis].as_known();
        if k < 1 || n.is_some_and(|n| k as u64 > n) {
            let label = match n {
                Some(n) => format!("k must be in 1..={n} here"),
                None => "k must be at least 1".to_owned(),
            };
            return Err(Box::new(
                Diagnostic::error(
                    codes::E0206,
                    self.span(f, span),
                    format!(
                        "`topk` of {k} elements along an axis of {}",
                        a.t.dims[a.axis]
                    ),
                )
                .with_label(label),
            ));
        }
        // A row longer than one program holds is walked in chunks, a
        // program per row: past two picks (or any of 8-byte elements,
        // whose comparisons are slow on the GPU) a sort, which spreads a
        // long row over many programs, takes less time (sweep 14: 8
        // picks over 2 × 32000 fp32 0.165 ms estimated, sorted 0.053 ms).
        let long = n.is_some_and(|n| n > ROUNDS_ROW);
        let rounds = k <= MAX_TOPK_ROUNDS && (!long || (k <= 2 && a.t.dtype.size_bytes() <= 4));
        if !rounds {
            // Past a few passes: sort's order, cut at k.
            let (values, picks) = self.ranked(f, &a, largest, Some(k as u64), span)?;
            return Ok(self.sorted_result(indices, values, picks, span));
        }
        let mut taken: Option<ValueId> = None;
        let (mut values, mut picks) = (Vec::new(), Vec::new());
        for round in 0..k {
            let (m, i) = if largest {
                self.extreme(f, &a, true, taken, span)?
            } else {
                self.smallest(f, &a, taken, span)?
            };
            if round + 1 < k {
                taken = Some(self.taken_through(f, &a, largest, (m, i), span)?);
            }
            values.push(m);
            picks.push(i);
        }
        let join = |b: &mut Self, parts: Vec<ValueId>| -> R<ValueId> {
            if parts.len() == 1 {
                return Ok(parts[0]);
            }
            b.push(f, Op::Concat { axis: a.axis }, parts, span)
        };
        let i = join(self, picks)?;
        if indices {
            return Ok(V::Node(i));
        }
        // Float values are the elements at the picks, as torch's: a
        // maximum of -0.0 and +0.0 may be either.
        let v = if a.t.dtype.is_float() {
            self.push(f, Op::Gather { axis: a.axis }, vec![a.x, i], span)?
        } else {
            join(self, values)?
        };
        if self.tuple_call.is_some_and(|(s, _)| s == span) {
            // `let (values, indices) = topk(...)`.
            return Ok(V::List(vec![V::Node(v), V::Node(i)]));
        }
        Ok(V::Node(v))
    }

    /// `sort` (values, or values and indices bound by `let (...)`) or
    /// `argsort`: an [`Op::Argsort`], and the values gathered by it.
    pub(super) fn sort(
        &mut self,
        f: &mut Frame,
        indices: bool,
        get: &dyn Fn(&str) -> V,
        span: Span,
    ) -> R<V> {
        let a = self.along(f, get, if indices { "argsort" } else { "sort" }, span)?;
        let descending = matches!(get("descending"), V::Bool(true));
        let (values, picks) = self.ranked(f, &a, descending, None, span)?;
        Ok(self.sorted_result(indices, values, picks, span))
    }

    /// The result of a ranking: both parts for `let (values, indices) =`,
    /// else the indices or the values.
    fn sorted_result(&self, indices: bool, values: ValueId, picks: ValueId, span: Span) -> V {
        if !indices && self.tuple_call.is_some_and(|(s, _)| s == span) {
            return V::List(vec![V::Node(values), V::Node(picks)]);
        }
        V::Node(if indices { picks } else { values })
    }

    /// The elements of `a.x` in the order of [`Op::Argsort`] along the
    /// axis (ascending, or descending when `largest`), the first `k` of
    /// each line (all of it for `None`), with their indices. A line longer
    /// than [`WHOLE_LINE`] is sorted in segments of [`SORT_SEGMENT`], then
    /// merged ([`Op::Merge`]).
    fn ranked(
        &mut self,
        f: &Frame,
        a: &Along,
        largest: bool,
        k: Option<u64>,
        span: Span,
    ) -> R<(ValueId, ValueId)> {
        // Past one network's line, sorted segments merged.
        let long = a.t.dims[a.axis].as_known().is_some_and(|n| n > WHOLE_LINE);
        let segment = if long { SORT_SEGMENT } else { 0 };
        let order = Op::Argsort {
            axis: a.axis,
            descending: largest,
            segment,
        };
        let mut picks = self.push(f, order, vec![a.x], span)?;
        if long {
            let merge = Op::Merge {
                axis: a.axis,
                descending: largest,
                segment,
            };
            picks = self.push(f, merge, vec![a.x, picks], span)?;
        }
        if let Some(k) = k {
            let mut axes = vec![SliceAxis::Full; a.t.rank()];
            axes[a.axis] = SliceAxis::Range(0, k);
            picks = self.push(f, Op::Slice(axes), vec![picks], span)?;
        }
        let gather = Op::Gather { axis: a.axis };
        let values = self.push(f, gather, vec![a.x, picks], span)?;
        Ok((values, picks))
    }

    /// The elements `topk` has taken once its latest pick is value `m` at
    /// index `i`: those at or before it in the order it picks in (largest
    /// first: NaNs by index, then by value, ties by index; smallest first:
    /// by value, ties by index, then NaNs by index). It reads only `x`
    /// and the latest pick, so each round's mask is computed afresh from
    /// the row: an or-chain over the rounds kept every round's mask alive
    /// to the last (a region of shared memory per round on the GPU path).
    fn taken_through(
        &mut self,
        f: &Frame,
        a: &Along,
        largest: bool,
        (m, i): (ValueId, ValueId),
        span: Span,
    ) -> R<ValueId> {
        let bin = |b: &mut Self, op: BinaryOp, x: ValueId, y: ValueId| {
            b.push(f, Op::Binary(op), vec![x, y], span)
        };
        let nan_x = bin(self, BinaryOp::Ne, a.x, a.x)?;
        let nan_m = bin(self, BinaryOp::Ne, m, m)?;
        let upto = bin(self, BinaryOp::Le, a.ar, i)?;
        // The latest pick a NaN: the NaNs up to its index (and, smallest
        // first, every number, all picked before the NaNs).
        let nans = bin(self, BinaryOp::And, nan_x, upto)?;
        let nans = if largest {
            nans
        } else {
            let num = self.push(f, Op::Unary(crate::ir::UnaryOp::Not), vec![nan_x], span)?;
            bin(self, BinaryOp::Or, nans, num)?
        };
        // Else every NaN, every better value, and ties up to its index.
        let order = if largest { BinaryOp::Gt } else { BinaryOp::Lt };
        let better = bin(self, order, a.x, m)?;
        let same = bin(self, BinaryOp::Eq, a.x, m)?;
        let tie = bin(self, BinaryOp::And, same, upto)?;
        let rest = bin(self, BinaryOp::Or, better, tie)?;
        let rest = if largest {
            bin(self, BinaryOp::Or, nan_x, rest)?
        } else {
            rest
        };
        self.push(f, Op::Select, vec![nan_m, nans, rest], span)
    }

    /// `split(x, size, axis)` or `chunk(x, chunks, axis)` (the checker has
    /// typed them): a slice per part, given as a [`V::List`] to the
    /// `let (a, b, ...)` that binds them. Extents are known here; parts
    /// the checker could not count (a symbolic extent) are counted now.
    pub(super) fn split(
        &mut self,
        f: &mut Frame,
        name: &str,
        get: &dyn Fn(&str) -> V,
        span: Span,
    ) -> R<V> {
        let x = self.node(f, get("x"), span)?;
        let Some(t) = self.graph.tensor_ty(x).cloned() else {
            return Err(unsupported(
                self.span(f, span),
                format!("`{name}` of a scalar"),
                "not a tensor",
            ));
        };
        let axis = super::prims::axis_of(&get("axis"), 0, t.rank());
        let Some(n) = t.dims[axis].as_known() else {
            return Err(unsupported(
                self.span(f, span),
                format!("`{name}` of a symbolic dimension needs its size"),
                "run it, or give the op concrete sizes",
            ));
        };
        let size = get(if name == "split" { "size" } else { "chunks" });
        let extents: Vec<u64> = match &size {
            V::List(items) => items
                .iter()
                .map(|v| const_int(v).and_then(|e| u64::try_from(e).ok()))
                .collect::<Option<_>>()
                .unwrap_or_default(),
            v => match const_int(v)
                .and_then(|c| u64::try_from(c).ok())
                .filter(|&c| c > 0)
            {
                Some(c) => {
                    let part = if name == "split" {
                        c
                    } else {
                        n.div_ceil(c).max(1)
                    };
                    let count = n.div_ceil(part);
                    (0..count).map(|i| part.min(n - i * part)).collect()
                }
                None => Vec::new(),
            },
        };
        let names = self
            .tuple_call
            .filter(|(s, _)| *s == span)
            .map_or(0, |(_, k)| k);
        let total: u64 = extents.iter().sum();
        if extents.is_empty() || total != n || extents.len() != names || extents.contains(&0) {
            let parts: Vec<String> = extents.iter().map(u64::to_string).collect();
            return Err(Box::new(
                Diagnostic::error(
                    codes::E0201,
                    self.span(f, span),
                    format!(
                        "`{name}` of axis {axis} (extent {n}) into parts [{}], bound by {names} names",
                        parts.join(", ")
                    ),
                )
                .with_label("the parts must cover the axis, one name each")
                .with_help("at these sizes; write one name per part (`_` drops one)"),
            ));
        }
        let mut parts = Vec::new();
        let mut lo = 0;
        for e in extents {
            let mut axes = vec![SliceAxis::Full; t.rank()];
            axes[axis] = SliceAxis::Range(lo, lo + e);
            lo += e;
            parts.push(V::Node(self.push(f, Op::Slice(axes), vec![x], span)?));
        }
        Ok(V::List(parts))
    }
}

/// The longest line one `argsort` sorts: one bitonic network holds it on
/// sm_90 (16384 elements of up to 8 bytes and their int32 positions in its
/// 227 KiB of shared memory), and on sm_80 of 4 bytes; elsewhere such a
/// line is ranked, in chunks.
const WHOLE_LINE: u64 = 16384;

/// Elements per segment of a longer line: a network every arch holds
/// (48 KiB for 8-byte elements and their positions).
const SORT_SEGMENT: u64 = 4096;

/// The most picks `topk` makes as passes over the row (each a pair of
/// reductions, three passes with the mask of the picks before); more are
/// cut from `sort`'s order. A network sorts a line in log² n / 2 stages
/// of a comparison per pair of elements (105 at 16384, 66 at 2048), about
/// as much work as 16 to 32 rounds on a GPU; on the simulator a sort is
/// faster than even 8 rounds past 2048 elements (4 × 2000: 0.14 s sorted,
/// 0.44 s for 8 rounds, 1.5 s for 50), and on the CPU backend, whose
/// network is a stable sort, always.
const MAX_TOPK_ROUNDS: i64 = 16;

/// The longest row `topk` picks from in rounds (but for one or two picks
/// of 4-byte elements): what one row program holds at once.
const ROUNDS_ROW: u64 = 4096;

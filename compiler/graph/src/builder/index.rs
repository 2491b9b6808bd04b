//! Indexing in op bodies: constant indices and slices (views), strided
//! and `None` axes, and numpy's integer-array indexing, along one axis
//! (`x[ids]`, a `take`) or with paired indices (`x[rows, cols]`, a `take`
//! of the indexed axes merged into one).

use super::*;

impl Builder<'_, '_> {
    pub(super) fn index(
        &mut self,
        f: &mut Frame,
        base: V,
        indices: &[ast::IndexArg],
        span: Span,
    ) -> R<V> {
        let id = self.node(f, base, span)?;
        let rank = self.graph.tensor_ty(id).map_or(0, |t| t.rank());
        let indices = &*ast::IndexArg::expand_ellipsis(indices, rank);
        // `x[ids]`, `x[:, ids]`: one integer tensor (the checker has typed
        // the form) picks along its axis, as `take`.
        // Otherwise the value computed is that index's, evaluated once.
        let mut sole = None;
        if let Some((axis, e)) = ast::IndexArg::sole_expr(indices) {
            let v = self.expr(f, e)?;
            if let V::Node(ids) = v {
                if self.graph.tensor_ty(ids).is_some() {
                    let (ids, _) = self.from_end(f, id, axis, ids, span)?;
                    return self
                        .push(f, Op::Take { axis }, vec![id, ids], span)
                        .map(V::Node);
                }
            }
            sole = Some(v);
        }
        if let Some(exprs) = ast::IndexArg::paired_exprs(indices) {
            let mut picks = Vec::new();
            for (axis, e) in &exprs {
                picks.push((*axis, self.expr(f, e)?, e.span));
            }
            let tensor = |v: &V| matches!(v, V::Node(n) if self.graph.tensor_ty(*n).is_some());
            if picks.iter().any(|(_, v, _)| tensor(v)) {
                return self.paired(f, id, picks, span);
            }
        }
        let mut axes = Vec::new();
        // Strided slices: (axis of the sliced tensor, step, extent).
        let mut strided = Vec::new();
        let selecting = indices.iter().filter(|i| i.consumes_axis());
        for (i, index) in selecting.enumerate() {
            let dim = self
                .graph
                .tensor_ty(id)
                .and_then(|t| t.dims.get(i))
                .and_then(Dim::as_known);
            axes.push(match index {
                ast::IndexArg::NewAxis(_) | ast::IndexArg::Ellipsis(_) => unreachable!("filtered out"),
                ast::IndexArg::Expr(e) => {
                    let v = match sole.take() {
                        Some(v) => v,
                        None => self.expr(f, e)?,
                    };
                    SliceAxis::Index(self.const_index_of(f, &v, e.span, dim)?)
                }
                ast::IndexArg::Slice { lo, hi, step, .. } => {
                    let lo = match lo {
                        Some(e) => self.const_index(f, e, dim)?,
                        None => 0,
                    };
                    if let Some(e) = step {
                        let k = match self.expr(f, e)? {
                            V::Int(k) if k >= 1 => k,
                            // Reversed, every -k-th from the last (`::-1`).
                            V::Int(k) if k < 0 && lo == 0 && hi.is_none() => k,
                            _ => {
                                return Err(unsupported(
                                    self.span(f, e.span),
                                    "a slice's step is an integer constant: positive, or negative over the whole axis",
                                    "here",
                                ))
                            }
                        };
                        let hi = match (hi, dim) {
                            (Some(e), _) => self.const_index(f, e, dim)?,
                            (None, Some(n)) => n,
                            (None, None) => {
                                return Err(unsupported(
                                    self.span(f, span),
                                    "a strided slice of a symbolic dimension needs its size",
                                    "run it, or give the op concrete sizes",
                                ))
                            }
                        };
                        if (k > 1 || k < 0) && hi > lo {
                            let kept = axes.iter().filter(|a| !matches!(a, SliceAxis::Index(_)));
                            strided.push((kept.count(), k, hi - lo));
                        }
                        axes.push(SliceAxis::Range(lo, hi));
                        continue;
                    }
                    match (hi, dim) {
                        (None, _) if lo == 0 => SliceAxis::Full,
                        (None, Some(n)) => SliceAxis::Range(lo, n),
                        (Some(e), _) => SliceAxis::Range(lo, self.const_index(f, e, dim)?),
                        (None, None) => {
                            return Err(unsupported(
                                self.span(f, span),
                                "a slice of a symbolic dimension needs an end",
                                "write `lo:hi`",
                            ))
                        }
                    }
                }
            });
        }
        if axes
            .iter()
            .any(|a| matches!(a, SliceAxis::Range(lo, hi) if lo == hi))
        {
            return Ok(V::Empty);
        }
        let plain = indices.iter().all(ast::IndexArg::consumes_axis);
        if plain && strided.is_empty() {
            return self.push(f, Op::Slice(axes), vec![id], span).map(V::Node);
        }
        let mut sliced = if axes.iter().all(|a| *a == SliceAxis::Full) {
            id
        } else {
            self.push(f, Op::Slice(axes), vec![id], span)?
        };
        for (axis, step, len) in strided {
            sliced = self.strided(f, sliced, axis, (step, len), span)?;
        }
        if plain {
            return Ok(V::Node(sliced));
        }
        // `None` entries: the sliced dims in order, with 1s where written.
        let Some(t) = self.graph.tensor_ty(sliced).cloned() else {
            return Ok(V::Node(sliced));
        };
        let mut kept = t.dims.iter();
        let mut dims = Vec::new();
        for index in indices {
            match index {
                ast::IndexArg::NewAxis(_) => dims.push(Dim::known(1)),
                ast::IndexArg::Ellipsis(_) => unreachable!("expanded"),
                ast::IndexArg::Slice { .. } => dims.extend(kept.next().cloned()),
                ast::IndexArg::Expr(_) => {}
            }
        }
        dims.extend(kept.cloned());
        let ty = Type::Tensor(TensorTy::new(dims, t.dtype));
        Ok(V::Node(self.push_typed(
            f,
            Op::Reshape,
            vec![sliced],
            ty,
            span,
        )))
    }

    /// Index tensor `ids` into `axis` of `x` with numpy's negative indices
    /// counted from the end (`-1` the last), and whether each index is in
    /// range (`-n <= i < n`, before that).
    fn from_end(
        &mut self,
        f: &Frame,
        x: ValueId,
        axis: usize,
        ids: ValueId,
        span: Span,
    ) -> R<(ValueId, ValueId)> {
        let n = self.axis_size(x, axis);
        let i = V::Node(ids);
        let below = self.binary(f, BinaryOp::Lt, i.clone(), V::Int(0), span)?;
        let shifted = self.binary(f, BinaryOp::Add, i.clone(), n.clone(), span)?;
        let below = self.node(f, below, span)?;
        let shifted = self.node(f, shifted, span)?;
        let wrapped = self.push(f, Op::Select, vec![below, shifted, ids], span)?;
        let neg_n = self.binary(f, BinaryOp::Sub, V::Int(0), n.clone(), span)?;
        let lo = self.binary(f, BinaryOp::Ge, i.clone(), neg_n, span)?;
        let hi = self.binary(f, BinaryOp::Lt, i, n, span)?;
        let ok = self.binary(f, BinaryOp::And, lo, hi, span)?;
        Ok((wrapped, self.node(f, ok, span)?))
    }

    /// The extent of `axis` of tensor `x`, as a number or a dimension.
    fn axis_size(&self, x: ValueId, axis: usize) -> V {
        let d = (self.graph.tensor_ty(x))
            .and_then(|t| t.dims.get(axis).cloned())
            .unwrap_or(Dim::Unknown);
        match d.as_known() {
            Some(n) => V::Int(n as i64),
            None => V::Dim(d),
        }
    }

    /// `x[rows, cols]`: the `picks` (axis, integer or index tensor, span)
    /// broadcast together select one element each, numpy's paired
    /// indexing: the indexed axes are merged into one (brought to the
    /// front first where they are not adjacent), and a `take` along it
    /// reads the flat position `((i0 * n1) + i1) * n2 + ...`. An index out
    /// of its own axis' range (after counting negatives from the end) makes
    /// the position -1, which the take's range check reports at run time.
    fn paired(
        &mut self,
        f: &mut Frame,
        x: ValueId,
        picks: Vec<(usize, V, Span)>,
        span: Span,
    ) -> R<V> {
        let Some(t) = self.graph.tensor_ty(x).cloned() else {
            return Err(unsupported(self.span(f, span), "indexing a scalar", "here"));
        };
        let axes: Vec<usize> = picks.iter().map(|(a, _, _)| *a).collect();
        let adjacent = axes.windows(2).all(|w| w[1] == w[0] + 1);
        let mut flat: Option<V> = None;
        let mut ok: Option<V> = None;
        for (axis, v, at) in picks {
            let index = match v {
                V::Node(ids) if self.graph.tensor_ty(ids).is_some() => {
                    let (wrapped, in_range) = self.from_end(f, x, axis, ids, span)?;
                    ok = Some(match ok {
                        None => V::Node(in_range),
                        Some(o) => self.binary(f, BinaryOp::And, o, V::Node(in_range), span)?,
                    });
                    V::Node(wrapped)
                }
                v => {
                    let dim = t.dims[axis].as_known();
                    V::Int(self.const_index_of(f, &v, at, dim)? as i64)
                }
            };
            flat = Some(match flat {
                None => index,
                Some(acc) => {
                    let n = self.axis_size(x, axis);
                    let scaled = self.binary(f, BinaryOp::Mul, acc, n, span)?;
                    self.binary(f, BinaryOp::Add, scaled, index, span)?
                }
            });
        }
        let flat = self.node(f, flat.expect("two picks at least"), span)?;
        let flat = match ok {
            Some(ok) => {
                let ok = self.node(f, ok, span)?;
                let outside = self.node(f, V::Int(-1), span)?;
                self.push(f, Op::Select, vec![ok, flat, outside], span)?
            }
            None => flat,
        };
        // The indexed axes first (numpy's order where they are apart),
        // then merged into one.
        let (source, at) = if adjacent {
            (x, axes[0])
        } else {
            let mut perm = axes.clone();
            perm.extend((0..t.rank()).filter(|a| !axes.contains(a)));
            (self.push(f, Op::Permute(perm), vec![x], span)?, 0)
        };
        let order: Vec<Dim> = match self.graph.tensor_ty(source) {
            Some(s) => s.dims.clone(),
            None => t.dims.clone(),
        };
        let mut merged = Dim::known(1);
        for d in &order[at..at + axes.len()] {
            merged = merged.mul(d).unwrap_or(Dim::Unknown);
        }
        if merged == Dim::Unknown {
            return Err(unsupported(
                self.span(f, span),
                "paired indices into axes whose sizes are not known here",
                "run it, or give the op concrete sizes",
            ));
        }
        let mut dims = order[..at].to_vec();
        dims.push(merged);
        dims.extend(order[at + axes.len()..].iter().cloned());
        let ty = Type::Tensor(TensorTy::new(dims, t.dtype));
        let source = self.push_typed(f, Op::Reshape, vec![source], ty, span);
        self.push(f, Op::Take { axis: at }, vec![source, flat], span)
            .map(V::Node)
    }

    /// An index or slice bound, which must be a compile-time constant.
    /// A constant index into a dimension of size `dim` (when known): a
    /// negative one counts from the end.
    pub(super) fn const_index(&mut self, f: &mut Frame, e: &ast::Expr, dim: Option<u64>) -> R<u64> {
        let v = self.expr(f, e)?;
        self.const_index_of(f, &v, e.span, dim)
    }

    /// [`Builder::const_index`] of an index already evaluated to `v` (its
    /// expression at `at`).
    fn const_index_of(&mut self, f: &mut Frame, v: &V, at: Span, dim: Option<u64>) -> R<u64> {
        let Some(n) = const_int(v) else {
            return Err(unsupported(
                self.span(f, at),
                "indices in an op must be known at compile time",
                "not a constant",
            ));
        };
        if n >= 0 {
            return Ok(n as u64);
        }
        match dim {
            Some(d) if n.unsigned_abs() <= d => Ok(d - n.unsigned_abs()),
            Some(d) => Err(unsupported(
                self.span(f, at),
                format!("index {n} is out of bounds for a dimension of size {d}"),
                "counts from the end",
            )),
            None => Err(unsupported(
                self.span(f, at),
                "a negative index needs the dimension's size, which is not known here",
                "counts from the end",
            )),
        }
    }
}

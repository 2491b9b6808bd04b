//! Expressions of op bodies: names, operators, casts, promotion and matmul.

use super::*;

impl Builder<'_, '_> {
    pub(crate) fn expr(&mut self, f: &mut Frame, e: &ast::Expr) -> R<V> {
        match &e.kind {
            ExprKind::Int(n) => i64::try_from(*n).map(V::Int).map_err(|_| {
                unsupported(
                    e.span,
                    "integer literal too large",
                    "does not fit in 64 bits",
                )
            }),
            ExprKind::Float(x) => Ok(V::Float(*x)),
            ExprKind::Bool(b) => Ok(V::Bool(*b)),
            ExprKind::Str(s) => Ok(V::Str(s.clone())),
            ExprKind::Name(n) => self.name(f, n, e.span),
            ExprKind::Binary { op, lhs, rhs } => {
                let (l, r) = (self.expr(f, lhs)?, self.expr(f, rhs)?);
                match (op.elementwise(), &l, &r) {
                    // An op's `mode == "reflect"`: a constant.
                    (Some(b @ (BinaryOp::Eq | BinaryOp::Ne)), V::Str(x), V::Str(y)) => {
                        Ok(V::Bool((x == y) == (b == BinaryOp::Eq)))
                    }
                    (None, ..) => self.matmul(f, l, r, e.span),
                    (Some(b), ..) => self.binary(f, b, l, r, e.span),
                }
            }
            ExprKind::Unary { op, operand } => {
                let v = self.expr(f, operand)?;
                let boolean = match &v {
                    V::Bool(_) => true,
                    V::Node(id) => self
                        .graph
                        .tensor_ty(*id)
                        .is_some_and(|t| t.dtype == Dtype::Bool),
                    _ => false,
                };
                let u = match op {
                    UnOp::Neg => UnaryOp::Neg,
                    UnOp::Not => UnaryOp::Not,
                    // `~` of a boolean is `!`; of an integer, `x ^ -1`.
                    UnOp::BitNot if boolean => UnaryOp::Not,
                    UnOp::BitNot => return self.binary(f, BinaryOp::BitXor, v, V::Int(-1), e.span),
                };
                self.unary(f, u, v, e.span)
            }
            // Ops take no dtype arguments (the checker rejects them).
            ExprKind::Call {
                callee,
                args,
                dtype_args,
            } => self.call(f, callee, args, dtype_args.first().map(|d| d.0), e.span),
            ExprKind::Index { base, indices } => {
                let b = self.expr(f, base)?;
                self.index(f, b, indices, e.span)
            }
            ExprKind::Field { base, .. } => {
                let b = self.expr(f, base)?;
                let b = self.node(f, b, base.span)?;
                self.push(f, Op::Transpose, vec![b], e.span).map(V::Node)
            }
            // An op's several results are a list of values, as a kernel's
            // several outputs are.
            ExprKind::List(items) | ExprKind::Tuple(items) => {
                let mut out = Vec::new();
                for i in items {
                    out.push(self.expr(f, i)?);
                }
                Ok(V::List(out))
            }
            ExprKind::Cast { value, dtype } => {
                let v = self.expr(f, value)?;
                self.cast(f, v, *dtype, e.span)
            }
            ExprKind::Error => Err(unsupported(e.span, "erroneous expression", "here")),
        }
    }

    pub(super) fn name(&mut self, f: &Frame, n: &str, span: Span) -> R<V> {
        if let Some(v) = f.local(n) {
            return Ok(v.clone());
        }
        if let Some(d) = f.dims.get(n) {
            return Ok(match d.as_known() {
                Some(k) => V::Int(k as i64),
                None => V::Dim(d.clone()),
            });
        }
        if let Some(a) = self.program.axis(n) {
            return Ok(V::Axis(a.clone()));
        }
        Err(unsupported(
            self.span(f, span),
            format!("`{n}` has no value here"),
            "unknown name",
        ))
    }

    /// Every `step`-th element of `x` along `axis` (of extent `len`): a
    /// `take` at arange(0, ⌈len/step⌉)·step, or for a negative step at
    /// (len - 1) - arange(0, ⌈len/-step⌉)·(-step), from the last element
    /// backwards (`x[::-1]`, `flip`).
    pub(super) fn strided(
        &mut self,
        f: &Frame,
        x: ValueId,
        axis: usize,
        (step, len): (i64, u64),
        span: Span,
    ) -> R<ValueId> {
        let count = len.div_ceil(step.unsigned_abs());
        let ar = self.line(f, Dim::known(count), span);
        let k = self.node(f, V::Int(step.abs()), span)?;
        let mut picks = self.push(f, Op::Binary(BinaryOp::Mul), vec![ar, k], span)?;
        if step < 0 {
            let last = self.node(f, V::Int(len as i64 - 1), span)?;
            picks = self.push(f, Op::Binary(BinaryOp::Sub), vec![last, picks], span)?;
        }
        self.push(f, Op::Take { axis }, vec![x, picks], span)
    }

    pub(super) fn cast(&mut self, f: &Frame, v: V, to: Dtype, span: Span) -> R<V> {
        let scalar = |x: f64| match scalar_kind(to) {
            ScalarKind::Float => V::Float(x),
            ScalarKind::Int => V::Int(x.trunc() as i64),
            ScalarKind::Bool => V::Bool(x != 0.0),
        };
        match v {
            V::Int(n) => Ok(scalar(n as f64)),
            V::Float(x) => Ok(scalar(x)),
            V::Bool(b) => Ok(scalar(f64::from(u8::from(b)))),
            other => {
                let id = self.node(f, other, span)?;
                if self.graph.tensor_ty(id).is_some_and(|t| t.dtype == to) {
                    return Ok(V::Node(id));
                }
                self.push(f, Op::Cast(to), vec![id], span).map(V::Node)
            }
        }
    }

    pub(super) fn unary(&mut self, f: &Frame, u: UnaryOp, v: V, span: Span) -> R<V> {
        if let Some(x) = const_f64(&v) {
            return Ok(match (&v, u) {
                (V::Int(n), UnaryOp::Neg) => V::Int(-n),
                (V::Int(n), UnaryOp::Abs) => V::Int(n.abs()),
                (V::Bool(b), UnaryOp::Not) => V::Bool(!b),
                _ => V::Float(u.eval(x)),
            });
        }
        let id = self.node(f, v, span)?;
        self.push(f, Op::Unary(u), vec![id], span).map(V::Node)
    }

    pub(crate) fn binary(&mut self, f: &Frame, op: BinaryOp, l: V, r: V, span: Span) -> R<V> {
        if let Some(v) = fold_binary(op, &l, &r) {
            return Ok(v);
        }
        if let (V::Dim(a), V::Dim(b), BinaryOp::Mul) = (&l, &r, op) {
            if let Some(d) = a.mul(b) {
                return Ok(V::Dim(d));
            }
        }
        let (a, b) = (
            self.node(f, l.clone(), span)?,
            self.node(f, r.clone(), span)?,
        );
        // An integer literal outside an integer tensor's range (`x > -1`
        // of uint8, `x < 40000` of int16) is compared by value, as numpy
        // and torch do, not wrapped into the range: the tensor is widened
        // to int64 first (and a maximum or minimum narrowed back after).
        let outside = |v: &V, t: ValueId| match (v, self.graph.tensor_ty(t)) {
            (V::Int(c), Some(tt)) => tt.dtype.excludes_int(*c).then_some(tt.dtype),
            _ => None,
        };
        if let Some(dtype) = outside(&r, a).or(outside(&l, b)).filter(|_| op.by_value()) {
            let wide = |b: &mut Self, v: ValueId| match b.graph.tensor_ty(v) {
                Some(_) => b.push(f, Op::Cast(Dtype::Int64), vec![v], span),
                None => Ok(v),
            };
            let (a, b) = (wide(self, a)?, wide(self, b)?);
            let v = self.push(f, Op::Binary(op), vec![a, b], span)?;
            return if op.is_comparison() {
                Ok(V::Node(v))
            } else {
                self.push(f, Op::Cast(dtype), vec![v], span).map(V::Node)
            };
        }
        let (a, b) = self.promote(f, a, b, span)?;
        self.push(f, Op::Binary(op), vec![a, b], span).map(V::Node)
    }

    /// Casts the narrower of two tensors of different float dtypes to the
    /// wider, as the numerics policy allows (the checker has verified it).
    pub(super) fn promote(
        &mut self,
        f: &Frame,
        a: ValueId,
        b: ValueId,
        span: Span,
    ) -> R<(ValueId, ValueId)> {
        let (Some(ta), Some(tb)) = (self.graph.tensor_ty(a), self.graph.tensor_ty(b)) else {
            return Ok((a, b));
        };
        let (da, db) = (ta.dtype, tb.dtype);
        if da == db {
            return Ok((a, b));
        }
        let to = f
            .numerics
            .promote(da, db)
            .unwrap_or(if da.size_bytes() >= db.size_bytes() {
                da
            } else {
                db
            });
        let a = if da == to {
            a
        } else {
            self.push(f, Op::Cast(to), vec![a], span)?
        };
        let b = if db == to {
            b
        } else {
            self.push(f, Op::Cast(to), vec![b], span)?
        };
        Ok((a, b))
    }

    /// The accumulation dtype of a reduction or product of `x`: the
    /// numerics' (fp32 by default), but never narrower than fp64 operands,
    /// which would silently lose their precision.
    pub(super) fn accumulator(&self, f: &Frame, x: ValueId) -> Dtype {
        match self.graph.tensor_ty(x).map(|t| t.dtype) {
            Some(Dtype::Fp64) => Dtype::Fp64,
            _ => f.numerics.accumulate,
        }
    }

    /// The accumulator of a reduction of `x`: integers are reduced exactly
    /// in int32 (int64 for int64), wrapping as the docs say, never in the
    /// float accumulation dtype (whose 24 bits lose 2^24 + 1).
    pub(super) fn reduce_accumulator(&self, f: &Frame, x: ValueId) -> Dtype {
        match self.graph.tensor_ty(x).map(|t| t.dtype) {
            Some(d) if d.is_int() => d.sum_dtype(),
            _ => self.accumulator(f, x),
        }
    }

    /// `a @ b`; a vector on the left multiplies as a row, on the right as
    /// a column, and its dimension is dropped from the result (numpy's
    /// and torch's matmul).
    pub(super) fn matmul(&mut self, f: &Frame, l: V, r: V, span: Span) -> R<V> {
        let (a, b) = (self.node(f, l, span)?, self.node(f, r, span)?);
        let (a, b) = self.promote(f, a, b, span)?;
        let rank = |g: &crate::Graph, v| g.tensor_ty(v).map_or(0, |t| t.rank());
        let (row, col) = (rank(&self.graph, a) == 1, rank(&self.graph, b) == 1);
        let float = self.graph.tensor_ty(a).is_some_and(|t| t.dtype.is_float());
        if (row || col) && float {
            return self.vector_product(f, (a, row), (b, col), span);
        }
        if row || col {
            let a = if row {
                self.unit_axis(f, a, 0, span)?
            } else {
                a
            };
            let b = if col {
                self.unit_axis(f, b, 1, span)?
            } else {
                b
            };
            let V::Node(mut out) = self.matmul(f, V::Node(a), V::Node(b), span)? else {
                unreachable!("a product is a node")
            };
            let Some(t) = self.graph.tensor_ty(out).cloned() else {
                unreachable!("a product is a tensor")
            };
            let mut dims = t.dims;
            let r = dims.len();
            for at in [col.then_some(r - 1), row.then_some(r - 2)]
                .into_iter()
                .flatten()
            {
                dims.remove(at);
            }
            let ty = Type::Tensor(TensorTy::new(dims, t.dtype));
            out = self.push_typed(f, Op::Reshape, vec![out], ty, span);
            return Ok(V::Node(out));
        }
        // Integer products are summed exactly, in int32 (int64 operands in
        // int64), never in the float accumulation dtype.
        let acc = match self.graph.tensor_ty(a).map(|t| t.dtype) {
            Some(d) if d.is_int() => d.sum_dtype(),
            _ => self.accumulator(f, a),
        };
        let op = Op::MatMul {
            acc,
            tf32: f.numerics.matmul == MatmulPrecision::Tf32,
        };
        self.push(f, op, vec![a, b], span).map(V::Node)
    }

    /// `v` (a tensor) with an axis of extent 1 inserted at `at` (a view).
    /// A float product with a vector (`row`: `a` is one, `col`: `b` is):
    /// a matrix-vector product is memory-bound, so it is the products
    /// summed along the contracted axis (one row kernel reading the matrix
    /// once), not a GEMM whose tile would be one column wide. The operands
    /// are widened to the accumulation dtype and the sum rounded once, as
    /// the tensor cores' products are.
    fn vector_product(
        &mut self,
        f: &Frame,
        (a, row): (ValueId, bool),
        (b, col): (ValueId, bool),
        span: Span,
    ) -> R<V> {
        let Some(dtype) = self.graph.tensor_ty(a).map(|t| t.dtype) else {
            return Err(unsupported(self.span(f, span), "a scalar", "not a tensor"));
        };
        let acc = self.accumulator(f, a);
        let widen = |me: &mut Self, v: ValueId| {
            if dtype == acc {
                Ok(v)
            } else {
                me.push(f, Op::Cast(acc), vec![v], span)
            }
        };
        // The vector first: its kernel (when it is widened) comes before
        // the matrix's, which the products and the sum then join.
        let (x, y) = if col {
            let y = widen(self, b)?;
            (widen(self, a)?, y)
        } else {
            (widen(self, a)?, widen(self, b)?)
        };
        // `[K] @ [.., K, N]`: the vector as a column [K, 1] beside the
        // matrix, summed down its rows.
        let x = if row && !col {
            self.unit_axis(f, x, 1, span)?
        } else {
            x
        };
        let p = self.push(f, Op::Binary(BinaryOp::Mul), vec![x, y], span)?;
        let r = self.graph.tensor_ty(p).map_or(1, |t| t.rank());
        let axis = if row && !col { r - 2 } else { r - 1 };
        let op = Op::Reduce {
            kind: crate::ir::ReduceKind::Sum,
            axis,
            keepdims: false,
            policy: f.numerics.policy,
            acc,
        };
        let sum = self.push(f, op, vec![p], span)?;
        if dtype == acc {
            Ok(V::Node(sum))
        } else {
            self.push(f, Op::Cast(dtype), vec![sum], span).map(V::Node)
        }
    }

    fn unit_axis(&mut self, f: &Frame, v: ValueId, at: usize, span: Span) -> R<ValueId> {
        let Some(t) = self.graph.tensor_ty(v).cloned() else {
            return Err(unsupported(self.span(f, span), "a scalar", "not a tensor"));
        };
        let mut dims = t.dims;
        dims.insert(at, Dim::known(1));
        let ty = Type::Tensor(TensorTy::new(dims, t.dtype));
        Ok(self.push_typed(f, Op::Reshape, vec![v], ty, span))
    }
}

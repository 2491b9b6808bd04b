//! The primitives of the stdlib (`extern` ops) as Graph IR nodes: math,
//! reductions, matmul, shapes, convolution, attention and collectives.

use super::{const_f64, const_int, unsupported, Builder, Frame, R, V};
use crate::ir::ValueId;
use crate::ir::{BinaryOp, CollectiveKind, ConvGeom, Op, ReduceKind, ScanKind, Type, UnaryOp};
use tessera_diagnostics::Span;
use tessera_diagnostics::{codes, Diagnostic};
use tessera_sema::{Dim, TensorTy};

impl Builder<'_, '_> {
    /// A call of an `extern` primitive.
    pub(super) fn primitive(
        &mut self,
        f: &mut Frame,
        name: &str,
        args: &[(&str, V)],
        span: Span,
    ) -> R<V> {
        let get = |n: &str| -> V {
            args.iter()
                .find(|(p, _)| *p == n)
                .map_or(V::Unit, |(_, v)| v.clone())
        };
        if let Some(u) = UnaryOp::from_function(name) {
            return self.unary(f, u, get("x"), span);
        }
        if name == "argmax" || name == "argmin" {
            return self.arg_extreme(f, name == "argmax", &get, span);
        }
        if name == "topk" || name == "topk_indices" {
            return self.topk(f, name == "topk_indices", &get, span);
        }
        if name == "sort" || name == "argsort" {
            return self.sort(f, name == "argsort", &get, span);
        }
        if name == "split" || name == "chunk" {
            return self.split(f, name, &get, span);
        }
        if name == "assert" {
            return self.assert(f, &get, span);
        }
        if let Some(kind) = ReduceKind::from_name(name) {
            let mut x = self.node(f, get("x"), span)?;
            if kind == ReduceKind::Sum {
                x = self.widen_for_sum(f, x, span)?;
            }
            let rank = self.graph.tensor_ty(x).map_or(0, TensorTy::rank) as i64;
            // One axis, or a list of them (the checker has made them
            // distinct and in range): reduced the last first.
            let mut axes: Vec<i64> = match get("axis") {
                V::List(items) => items.iter().filter_map(const_int).collect(),
                v => vec![const_int(&v).unwrap_or(-1)],
            };
            for a in &mut axes {
                if *a < 0 {
                    *a += rank;
                }
            }
            axes.sort_unstable();
            let keepdims = matches!(get("keepdims"), V::Bool(true));
            for &axis in axes.iter().rev() {
                let op = Op::Reduce {
                    kind,
                    axis: axis.max(0) as usize,
                    keepdims,
                    policy: f.numerics.policy,
                    acc: self.reduce_accumulator(f, x),
                };
                x = self.push(f, op, vec![x], span)?;
            }
            return Ok(V::Node(x));
        }
        match name {
            "pow" => self.binary(f, BinaryOp::Pow, get("x"), get("p"), span),
            "maximum" => self.binary(f, BinaryOp::Max, get("a"), get("b"), span),
            "minimum" => self.binary(f, BinaryOp::Min, get("a"), get("b"), span),
            "where" => {
                // A constant condition of two tensors (an op's `where(mode
                // == "tanh", fast, exact)`, `where(reduction == "mean",
                // mean(l), l)`) is the one chosen, whatever their shapes;
                // the other is left unused.
                if let (V::Bool(c), V::Node(a), V::Node(b)) = (get("cond"), get("a"), get("b")) {
                    let tensors =
                        self.graph.tensor_ty(a).is_some() && self.graph.tensor_ty(b).is_some();
                    if tensors {
                        return Ok(V::Node(if c { a } else { b }));
                    }
                }
                let c = self.node(f, get("cond"), span)?;
                let (a, b) = (self.node(f, get("a"), span)?, self.node(f, get("b"), span)?);
                let (a, b) = self.promote(f, a, b, span)?;
                self.push(f, Op::Select, vec![c, a, b], span).map(V::Node)
            }
            "matmul" => self.matmul(f, get("a"), get("b"), span),
            "transpose" => {
                let x = self.node(f, get("x"), span)?;
                let rank = self.graph.tensor_ty(x).map_or(0, TensorTy::rank);
                let (a, b) = (
                    axis_of(&get("dim0"), -2, rank),
                    axis_of(&get("dim1"), -1, rank),
                );
                if a.min(b) + 2 == rank && a.max(b) + 1 == rank {
                    return self.push(f, Op::Transpose, vec![x], span).map(V::Node);
                }
                // Two other axes (torch's `transpose(x, 0, 1)`): a permute.
                let mut perm: Vec<usize> = (0..rank).collect();
                perm.swap(a, b);
                self.push(f, Op::Permute(perm), vec![x], span).map(V::Node)
            }
            "reshape" => self.reshape(f, get("x"), get("shape"), span),
            "concat" | "stack" => {
                let V::List(items) = get("xs") else {
                    return Err(unsupported(self.span(f, span), "a list of tensors", "here"));
                };
                let mut xs = Vec::new();
                // Empty slices add nothing (`cache[0:pos]` at pos = 0).
                for item in items.into_iter().filter(|i| !matches!(i, V::Empty)) {
                    xs.push(self.node(f, item, span)?);
                }
                if xs.len() == 1 && name == "concat" {
                    return Ok(V::Node(xs[0]));
                }
                let rank = xs
                    .first()
                    .and_then(|x| self.graph.tensor_ty(*x))
                    .map_or(0, TensorTy::rank)
                    + usize::from(name == "stack");
                let axis = axis_of(&get("axis"), 0, rank);
                if name == "stack" {
                    // Each gains the new axis, of extent 1.
                    for x in &mut xs {
                        let Some(t) = self.graph.tensor_ty(*x).cloned() else {
                            continue;
                        };
                        let mut dims = t.dims.clone();
                        dims.insert(axis.min(dims.len()), Dim::known(1));
                        let ty = Type::Tensor(TensorTy::new(dims, t.dtype));
                        *x = self.push_typed(f, Op::Reshape, vec![*x], ty, span);
                    }
                }
                self.push(f, Op::Concat { axis }, xs, span).map(V::Node)
            }
            "cumsum" | "cumprod" | "cummax" | "cummin" | "logcumsumexp" => {
                let kind = ScanKind::from_name(name).expect("a scan's name");
                let x = self.node(f, get("x"), span)?;
                // Sums and products of narrow integers and booleans run
                // in int32 (as torch's do, in int64).
                let x = match kind {
                    ScanKind::Sum | ScanKind::Prod => self.widen_for_sum(f, x, span)?,
                    _ => x,
                };
                let rank = self.graph.tensor_ty(x).map_or(0, TensorTy::rank);
                let axis = axis_of(&get("axis"), -1, rank);
                self.scan(f, x, kind, axis, span).map(V::Node)
            }
            "gather" | "take" => {
                let x = self.node(f, get("x"), span)?;
                let index = self.node(f, get("index"), span)?;
                let rank = self.graph.tensor_ty(x).map_or(0, TensorTy::rank);
                let axis = axis_of(&get("axis"), 0, rank);
                let op = if name == "gather" {
                    Op::Gather { axis }
                } else {
                    Op::Take { axis }
                };
                self.push(f, op, vec![x, index], span).map(V::Node)
            }
            "scatter_add" | "index_add" | "scatter" | "index_copy" => {
                let x = self.node(f, get("x"), span)?;
                let index = self.node(f, get("index"), span)?;
                let src = self.node(f, get("src"), span)?;
                let Some(xt) = self.graph.tensor_ty(x).cloned() else {
                    return Err(unsupported(
                        self.span(f, span),
                        "x must be a tensor",
                        "here",
                    ));
                };
                let axis = axis_of(&get("axis"), 0, xt.rank());
                let vector = name.starts_with("index_");
                let add = name.ends_with("_add");
                self.scatter(f, (x, &xt), (index, src), axis, (vector, add), span)
                    .map(V::Node)
            }
            "broadcast_to" => {
                // select(all false, x, x) of the target's shape: x's
                // elements, exactly, where numpy's broadcast puts them.
                let x = self.node(f, get("x"), span)?;
                self.dtype_arg = Some(tessera_syntax::ast::Dtype::Bool);
                let none = self.fill(f, get("shape"), V::Int(0), span)?;
                let none = self.node(f, none, span)?;
                self.push(f, Op::Select, vec![none, x, x], span)
                    .map(V::Node)
            }
            "unsqueeze" | "expand_dims" => {
                let x = self.node(f, get("x"), span)?;
                let t = self.graph.tensor_ty(x).cloned().ok_or_else(|| {
                    unsupported(self.span(f, span), "`unsqueeze` of a non-tensor", "here")
                })?;
                let at = axis_of(&get("axis"), 0, t.rank() + 1);
                let mut dims = t.dims.clone();
                dims.insert(at, Dim::known(1));
                let ty = Type::Tensor(TensorTy::new(dims, t.dtype));
                Ok(V::Node(self.push_typed(f, Op::Reshape, vec![x], ty, span)))
            }
            "squeeze" => {
                let x = self.node(f, get("x"), span)?;
                let t = self.graph.tensor_ty(x).cloned().ok_or_else(|| {
                    unsupported(self.span(f, span), "`squeeze` of a non-tensor", "here")
                })?;
                let at = axis_of(&get("axis"), 0, t.rank());
                if let Some(n) = t.dims.get(at).and_then(Dim::as_known).filter(|n| *n != 1) {
                    return Err(Box::new(
                        Diagnostic::error(
                            codes::E0201,
                            self.span(f, span),
                            format!("`squeeze` of axis {at}, of extent {n} at these sizes"),
                        )
                        .with_label("only an axis of extent 1 goes"),
                    ));
                }
                let mut dims = t.dims.clone();
                dims.remove(at);
                let ty = Type::Tensor(TensorTy::new(dims, t.dtype));
                Ok(V::Node(self.push_typed(f, Op::Reshape, vec![x], ty, span)))
            }
            "einsum" => self.einsum(f, get("equation"), get("xs"), span),
            "type_as" => {
                let like = self.node(f, get("other"), span)?;
                let Some(to) = self.graph.tensor_ty(like).map(|t| t.dtype) else {
                    return Err(unsupported(
                        self.span(f, span),
                        "`type_as` of a non-tensor",
                        "here",
                    ));
                };
                self.cast(f, get("x"), to, span)
            }
            "flip" => {
                let x = self.node(f, get("x"), span)?;
                let dims = self
                    .graph
                    .tensor_ty(x)
                    .map(|t| t.dims.clone())
                    .unwrap_or_default();
                let axis = axis_of(&get("axis"), 0, dims.len());
                let Some(n) = dims.get(axis).and_then(Dim::as_known) else {
                    return Err(unsupported(
                        self.span(f, span),
                        "`flip` of a dimension whose size is not known",
                        "run it, or give the op concrete sizes",
                    ));
                };
                self.strided(f, x, axis, (-1, n), span).map(V::Node)
            }
            "roll" | "repeat_interleave" | "repeat" => self.rearranged(f, name, &get, span),
            "bincount" => {
                let x = self.node(f, get("x"), span)?;
                let Some(len) = shape_dims(&V::List(vec![get("length")])) else {
                    return Err(unsupported(
                        self.span(f, span),
                        "the number of bins must be a size known when the op compiles",
                        "here",
                    ));
                };
                let int32 = tessera_syntax::ast::Dtype::Int32;
                let x = match self.graph.tensor_ty(x).map(|t| t.dtype) {
                    Some(d) if d != int32 => self.push(f, Op::Cast(int32), vec![x], span)?,
                    _ => x,
                };
                // One per element of x: x * 0 + 1.
                let zero = self.node(f, V::Int(0), span)?;
                let one = self.node(f, V::Int(1), span)?;
                let zeros = self.push(f, Op::Binary(BinaryOp::Mul), vec![x, zero], span)?;
                let ones = self.push(f, Op::Binary(BinaryOp::Add), vec![zeros, one], span)?;
                let ty = Type::Tensor(TensorTy::new(len, int32));
                let op = Op::Scatter {
                    axis: 0,
                    vector: false,
                    add: true,
                };
                Ok(V::Node(self.push_typed(f, op, vec![x, ones], ty, span)))
            }
            "permute" => {
                let x = self.node(f, get("x"), span)?;
                let rank = self.graph.tensor_ty(x).map_or(0, TensorTy::rank) as i64;
                let V::List(items) = get("dims") else {
                    return Err(unsupported(
                        self.span(f, span),
                        "`dims` must be a list",
                        "here",
                    ));
                };
                let perm: Option<Vec<usize>> = items
                    .iter()
                    .map(|v| const_int(v).map(|d| (if d < 0 { d + rank } else { d }) as usize))
                    .collect();
                let Some(perm) = perm else {
                    return Err(unsupported(
                        self.span(f, span),
                        "`dims` must be constants",
                        "here",
                    ));
                };
                self.push(f, Op::Permute(perm), vec![x], span).map(V::Node)
            }
            "dropout" => {
                let x = self.node(f, get("x"), span)?;
                let Some(t) = self.graph.tensor_ty(x).cloned() else {
                    return Err(unsupported(
                        self.span(f, span),
                        "dropout of a scalar",
                        "here",
                    ));
                };
                let p = match get("p") {
                    V::Float(p) => p,
                    V::Int(p) => p as f64,
                    _ => {
                        return Err(unsupported(
                            self.span(f, span),
                            "the dropout probability must be known when the op compiles",
                            "here",
                        ))
                    }
                };
                let u = self.uniform(f, Some(t.dims.clone()), &get, span)?;
                let pv = self.node(f, V::Float(p), span)?;
                let keep = self.push(f, Op::Binary(BinaryOp::Ge), vec![u, pv], span)?;
                let scale = self.node(f, V::Float(1.0 / (1.0 - p)), span)?;
                let kept = self.push(f, Op::Binary(BinaryOp::Mul), vec![x, scale], span)?;
                let zero = self.node(f, V::Float(0.0), span)?;
                self.push(f, Op::Select, vec![keep, kept, zero], span)
                    .map(V::Node)
            }
            "zeros" | "ones" | "full" => {
                let value = match name {
                    "zeros" => V::Float(0.0),
                    "ones" => V::Float(1.0),
                    _ => get("value"),
                };
                self.fill(f, get("shape"), value, span)
            }
            "rand" => {
                let shape = get("shape");
                if !matches!(shape, V::List(_)) {
                    return Err(unsupported(
                        self.span(f, span),
                        "`rand` needs a shape",
                        "here",
                    ));
                }
                let dims = shape_dims(&shape);
                let fp32 = tessera_syntax::ast::Dtype::Fp32;
                let dtype = self.dtype_arg.take().unwrap_or(fp32);
                let r = self.uniform(f, dims, &get, span)?;
                if dtype == fp32 {
                    return Ok(V::Node(r));
                }
                let r = self.push(f, Op::Cast(dtype), vec![r], span)?;
                match dtype.float_format() {
                    // Rounded to a narrow float and kept below 1, as host
                    // code's `rand` (a uniform that rounds up to 1.0 is the
                    // largest value below it).
                    Some(format) if dtype != tessera_syntax::ast::Dtype::Fp64 => {
                        let below = self.node(f, V::Float(format.pred_one()), span)?;
                        self.push(f, Op::Binary(BinaryOp::Min), vec![r, below], span)
                            .map(V::Node)
                    }
                    _ => Ok(V::Node(r)),
                }
            }
            "arange" => {
                let start = const_int(&get("start"));
                let len = match (start, get("end")) {
                    (Some(a), V::Int(b)) if b > a => Some(Dim::known((b - a) as u64)),
                    (Some(0), V::Dim(d)) => Some(d),
                    (Some(a), V::Dim(d)) if a > 0 => d.sub(&Dim::known(a as u64)),
                    _ => None,
                };
                let (Some(start), Some(len)) = (start, len) else {
                    return Err(unsupported(
                        self.span(f, span),
                        "the length of `arange` must be known when the op compiles",
                        "give constant bounds, or `arange(0, N)`",
                    ));
                };
                let ty = Type::Tensor(TensorTy::new(vec![len], tessera_syntax::ast::Dtype::Int32));
                let ar = self.push_typed(f, Op::Arange { start }, vec![], ty, span);
                match self.dtype_arg.take() {
                    Some(d) if d != tessera_syntax::ast::Dtype::Int32 => {
                        self.push(f, Op::Cast(d), vec![ar], span).map(V::Node)
                    }
                    _ => Ok(V::Node(ar)),
                }
            }
            "conv2d" | "conv1d" => {
                let (x, w) = (self.node(f, get("x"), span)?, self.node(f, get("w"), span)?);
                let knob = |n: &str, default: i64, least: i64| {
                    const_int(&get(n)).unwrap_or(default).max(least) as u64
                };
                let (s, p, d) = (
                    knob("stride", 1, 1),
                    knob("padding", 0, 0),
                    knob("dilation", 1, 1),
                );
                // `groups = C` at symbolic sizes: known only at a call's.
                if const_int(&get("groups")).is_none() && !matches!(get("groups"), V::Unit) {
                    return Err(unsupported(
                        self.span(f, span),
                        format!("{name} with groups known only at a call's sizes"),
                        "groups depend on the sizes",
                    ));
                }
                let groups = knob("groups", 1, 1);
                if name == "conv2d" {
                    let geom = ConvGeom {
                        stride: [s, s],
                        padding: [p, p],
                        dilation: [d, d],
                        groups,
                    };
                    let op = Op::Conv2d {
                        geom,
                        acc: self.accumulator(f, x),
                    };
                    return self.push(f, op, vec![x, w], span).map(V::Node);
                }
                // A 1-D convolution is a 2-D one of height 1: x [B, C, L]
                // as [B, C, 1, L], w [O, C / G, K] as [O, C / G, 1, K].
                let tall = |b: &mut Self, v: ValueId| -> R<ValueId> {
                    let t = b.graph.tensor_ty(v).cloned().ok_or_else(|| {
                        unsupported(span, "conv1d of a non-tensor", "not a tensor")
                    })?;
                    let mut dims = t.dims.clone();
                    dims.insert(2, Dim::known(1));
                    let ty = Type::Tensor(TensorTy::new(dims, t.dtype));
                    Ok(b.push_typed(f, Op::Reshape, vec![v], ty, span))
                };
                let (x4, w4) = (tall(self, x)?, tall(self, w)?);
                let geom = ConvGeom {
                    stride: [1, s],
                    padding: [0, p],
                    dilation: [1, d],
                    groups,
                };
                let op = Op::Conv2d {
                    geom,
                    acc: self.accumulator(f, x),
                };
                let y4 = self.push(f, op, vec![x4, w4], span)?;
                let t =
                    self.graph.tensor_ty(y4).cloned().ok_or_else(|| {
                        unsupported(span, "conv1d without a tensor result", "here")
                    })?;
                let mut dims = t.dims.clone();
                dims.remove(2);
                let ty = Type::Tensor(TensorTy::new(dims, t.dtype));
                Ok(V::Node(self.push_typed(f, Op::Reshape, vec![y4], ty, span)))
            }
            "attention" => {
                let q = self.node(f, get("q"), span)?;
                let k = self.node(f, get("k"), span)?;
                let v = self.node(f, get("v"), span)?;
                let scale = self.node(f, get("scale"), span)?;
                self.check_groups(f, q, k, span)?;
                let op = Op::Attention {
                    acc: self.accumulator(f, q),
                    causal: matches!(get("causal"), V::Bool(true)),
                    bottom_right: matches!(get("bottom_right"), V::Bool(true)),
                };
                self.push(f, op, vec![q, k, v, scale], span).map(V::Node)
            }
            "all_reduce" | "all_gather" | "reduce_scatter" | "all_to_all" | "send" | "recv" => {
                let x = self.node(f, get(if name == "recv" { "like" } else { "x" }), span)?;
                let rank = self.graph.tensor_ty(x).map_or(0, TensorTy::rank) as i64;
                let dim = |v: V, default: i64| {
                    let d = const_int(&v).unwrap_or(default);
                    (if d < 0 { d + rank } else { d }).max(0) as usize
                };
                let kind = match name {
                    "all_reduce" => CollectiveKind::AllReduce,
                    "all_gather" => CollectiveKind::AllGather,
                    "reduce_scatter" => CollectiveKind::ReduceScatter {
                        dim: dim(get("dim"), 0),
                    },
                    "all_to_all" => CollectiveKind::AllToAll {
                        split_dim: dim(get("split_dim"), 0),
                        concat_dim: dim(get("concat_dim"), 0),
                    },
                    "send" => CollectiveKind::Send {
                        offset: const_int(&get("offset")).unwrap_or(1),
                    },
                    _ => CollectiveKind::Recv {
                        offset: const_int(&get("offset")).unwrap_or(1),
                    },
                };
                let V::Axis(axis) = get("axis") else {
                    return Err(unsupported(
                        self.span(f, span),
                        "a collective needs a mesh axis",
                        "here",
                    ));
                };
                self.push(f, Op::Collective { kind, axis }, vec![x], span)
                    .map(V::Node)
            }
            "cdiv" => match (const_int(&get("a")), const_int(&get("b"))) {
                (Some(a), Some(b)) if b > 0 => Ok(V::Int((a + b - 1).div_euclid(b))),
                _ => Err(unsupported(
                    self.span(f, span),
                    "`cdiv` in an op needs constant operands",
                    "not constant",
                )),
            },
            _ => Err(unsupported(
                self.span(f, span),
                format!("`{name}` cannot be used in an op"),
                "not an algebraic operation",
            )),
        }
    }

    /// `x` as int32 when it is boolean or a narrow integer (a sum or a
    /// scan of booleans counts them, of int8 adds in int32, as numpy's and
    /// torch's do: `Dtype::sum_result`), else `x`.
    pub(super) fn widen_for_sum(&mut self, f: &Frame, x: ValueId, span: Span) -> R<ValueId> {
        match self
            .graph
            .tensor_ty(x)
            .map(|t| (t.dtype, t.dtype.sum_result()))
        {
            Some((d, wide)) if d != wide => self.push(f, Op::Cast(wide), vec![x], span),
            _ => Ok(x),
        }
    }

    pub(super) fn reshape(&mut self, f: &Frame, x: V, shape: V, span: Span) -> R<V> {
        let x = self.node(f, x, span)?;
        let Some(t) = self.graph.tensor_ty(x).cloned() else {
            return Err(unsupported(
                self.span(f, span),
                "reshape of a scalar",
                "not a tensor",
            ));
        };
        let V::List(items) = shape else {
            return Err(unsupported(
                self.span(f, span),
                "reshape needs a list of sizes",
                "here",
            ));
        };
        let mut dims = Vec::new();
        let mut infer_at = None;
        for (i, item) in items.iter().enumerate() {
            match item {
                V::Int(-1) => {
                    infer_at = Some(i);
                    dims.push(Dim::Unknown);
                }
                V::Int(n) if *n >= 0 => dims.push(Dim::known(*n as u64)),
                V::Dim(d) => dims.push(d.clone()),
                _ => {
                    return Err(unsupported(
                        self.span(f, span),
                        "reshape sizes must be known at compile time",
                        "not a constant size",
                    ))
                }
            }
        }
        if let Some(i) = infer_at {
            let total: Option<u64> = t.dims.iter().map(Dim::as_known).product();
            let rest: Option<u64> = dims
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, d)| d.as_known())
                .product();
            match (total, rest) {
                (Some(total), Some(rest)) if rest > 0 => dims[i] = Dim::known(total / rest),
                _ => {
                    return Err(unsupported(
                        self.span(f, span),
                        "`-1` in a reshape of a symbolic shape",
                        "give every size",
                    ))
                }
            }
        }
        // The element count is kept, also where `check` could not compare
        // it (`[N / 2, 2]` at N = 9 would drop an element).
        let count = |ds: &[Dim]| ds.iter().map(Dim::as_known).product::<Option<u64>>();
        if let (Some(from), Some(to)) = (count(&t.dims), count(&dims)) {
            if from != to {
                let shown: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
                return Err(Box::new(
                    Diagnostic::error(
                        codes::E0201,
                        self.span(f, span),
                        format!(
                            "reshape of {from} elements into [{}], {to} elements",
                            shown.join(", ")
                        ),
                    )
                    .with_label(format!("`{t}` at the sizes of this call"))
                    .with_help(
                        "a reshape keeps every element: choose sizes whose product is the tensor's",
                    ),
                ));
            }
        }
        // At symbolic sizes a count that differs as written (`[B, N, E]`
        // into `[B, s, s, p, p, c]` with attribute values) is settled only
        // at concrete ones.
        let (from, to) = (
            crate::verify::product(&t.dims),
            crate::verify::product(&dims),
        );
        if let (Some(a), Some(b)) = (&from, &to) {
            if a != b {
                return Err(unsupported(
                    self.span(f, span),
                    format!("a reshape from {a} to {b} elements, equal only at some sizes"),
                    "known only at concrete sizes",
                ));
            }
        }
        let ty = Type::Tensor(TensorTy::new(dims, t.dtype));
        Ok(V::Node(self.push_typed(f, Op::Reshape, vec![x], ty, span)))
    }

    /// `roll(x, shifts, axis)`, `repeat_interleave(x, repeats, axis)` and
    /// `repeat(x, reps)` (torch's): each a `take` along an axis at indices
    /// computed from the element's position, `(i + n - shift) % n`, `i /
    /// repeats` and `i % n`, so no index is stored.
    fn rearranged(&mut self, f: &Frame, name: &str, get: &dyn Fn(&str) -> V, span: Span) -> R<V> {
        let mut x = self.node(f, get("x"), span)?;
        let dims = self
            .graph
            .tensor_ty(x)
            .map(|t| t.dims.clone())
            .unwrap_or_default();
        let known = |b: &Self, d: &Dim| {
            d.as_known().ok_or_else(|| {
                unsupported(
                    b.span(f, span),
                    format!("`{name}` of a dimension whose size is not known"),
                    "run it, or give the op concrete sizes",
                )
            })
        };
        let int = |b: &Self, v: V, what: &str| {
            const_int(&v).ok_or_else(|| {
                unsupported(
                    b.span(f, span),
                    format!("`{what}` of `{name}` must be known when the op compiles"),
                    "not a constant",
                )
            })
        };
        match name {
            "roll" => {
                let axis = axis_of(&get("axis"), 0, dims.len());
                let n = known(self, &dims[axis])? as i64;
                let shift = int(self, get("shifts"), "shifts")?.rem_euclid(n.max(1));
                if shift == 0 {
                    return Ok(V::Node(x));
                }
                // Element i of the result is element (i - shift) mod n.
                self.take_at(
                    f,
                    x,
                    axis,
                    n as u64,
                    |b, i| {
                        let i = b.binary(f, BinaryOp::Add, V::Node(i), V::Int(n - shift), span)?;
                        b.binary(f, BinaryOp::Rem, i, V::Int(n), span)
                    },
                    span,
                )
                .map(V::Node)
            }
            "repeat_interleave" => {
                let axis = axis_of(&get("axis"), 0, dims.len());
                let n = known(self, &dims[axis])?;
                let r = int(self, get("repeats"), "repeats")?.max(1);
                self.take_at(
                    f,
                    x,
                    axis,
                    n * r as u64,
                    |b, i| b.binary(f, BinaryOp::Div, V::Node(i), V::Int(r), span),
                    span,
                )
                .map(V::Node)
            }
            _ => {
                let V::List(items) = get("reps") else {
                    return Err(unsupported(self.span(f, span), "a list of counts", "here"));
                };
                let reps = (items.into_iter())
                    .map(|v| int(self, v, "reps"))
                    .collect::<R<Vec<i64>>>()?;
                // torch: more counts than axes add leading axes of extent 1.
                let extra = reps.len().saturating_sub(dims.len());
                if extra > 0 {
                    let mut lifted = vec![Dim::known(1); extra];
                    lifted.extend(dims.iter().cloned());
                    let t = self.graph.tensor_ty(x).cloned().expect("a tensor");
                    let ty = Type::Tensor(TensorTy::new(lifted, t.dtype));
                    x = self.push_typed(f, Op::Reshape, vec![x], ty, span);
                }
                let rank = dims.len() + extra;
                for (axis, r) in reps.iter().enumerate().skip(rank - reps.len()) {
                    if *r <= 1 {
                        continue;
                    }
                    let n = match axis.checked_sub(extra) {
                        Some(a) => known(self, &dims[a])?,
                        None => 1,
                    };
                    x = self.take_at(
                        f,
                        x,
                        axis,
                        n * *r as u64,
                        |b, i| b.binary(f, BinaryOp::Rem, V::Node(i), V::Int(n as i64), span),
                        span,
                    )?;
                }
                Ok(V::Node(x))
            }
        }
    }

    /// `x` taken along `axis` at `count` indices, index `i` being what
    /// `at` computes from `arange(0, count)`.
    fn take_at(
        &mut self,
        f: &Frame,
        x: ValueId,
        axis: usize,
        count: u64,
        at: impl FnOnce(&mut Self, ValueId) -> R<V>,
        span: Span,
    ) -> R<ValueId> {
        let ar = self.line(f, Dim::known(count), span);
        let index = at(self, ar)?;
        let index = self.node(f, index, span)?;
        self.push(f, Op::Take { axis }, vec![x, index], span)
    }

    /// `x` with `src` added (`add`) or written at `index` along `axis`
    /// (`vector`: one index per slice, torch.index_add / index_copy): the
    /// sums or copies in a node of their own (atomics on a GPU for sums),
    /// in int32 for narrow integers and fp32 for narrow floats. Sums are
    /// added to x; copies replace x where a second scatter, of ones, marks
    /// them. The result is rounded to x's dtype.
    #[allow(clippy::too_many_arguments)]
    fn scatter(
        &mut self,
        f: &Frame,
        (x, xt): (ValueId, &TensorTy),
        (index, src): (ValueId, ValueId),
        axis: usize,
        (vector, add): (bool, bool),
        span: Span,
    ) -> R<ValueId> {
        use tessera_syntax::ast::Dtype;
        let acc = match xt.dtype {
            d @ (Dtype::Int32 | Dtype::Int64 | Dtype::Fp32 | Dtype::Fp64) => d,
            d if d.is_float() => Dtype::Fp32,
            _ => Dtype::Int32,
        };
        let widen = |b: &mut Self, v: ValueId, to: Dtype| -> R<ValueId> {
            if b.graph.tensor_ty(v).map(|t| t.dtype) == Some(to) {
                Ok(v)
            } else {
                b.push(f, Op::Cast(to), vec![v], span)
            }
        };
        let op = Op::Scatter { axis, vector, add };
        let src_w = widen(self, src, acc)?;
        let ty = Type::Tensor(TensorTy::new(xt.dims.clone(), acc));
        let put = self.push_typed(f, op.clone(), vec![index, src_w], ty, span);
        let x_w = widen(self, x, acc)?;
        let total = if add {
            self.push(f, Op::Binary(BinaryOp::Add), vec![x_w, put], span)?
        } else {
            // Where each copy landed: ones scattered the same way.
            let int32 = Dtype::Int32;
            let zero = self.node(f, V::Int(0), span)?;
            let one = self.node(f, V::Int(1), span)?;
            let s32 = widen(self, src, int32)?;
            let zeros = self.push(f, Op::Binary(BinaryOp::Mul), vec![s32, zero], span)?;
            let ones = self.push(f, Op::Binary(BinaryOp::Add), vec![zeros, one], span)?;
            let ty = Type::Tensor(TensorTy::new(xt.dims.clone(), int32));
            let marks = self.push_typed(f, op, vec![index, ones], ty, span);
            let hit = self.push(f, Op::Binary(BinaryOp::Ne), vec![marks, zero], span)?;
            self.push(f, Op::Select, vec![hit, put, x_w], span)?
        };
        if acc == xt.dtype {
            Ok(total)
        } else {
            self.push(f, Op::Cast(xt.dtype), vec![total], span)
        }
    }

    /// `zeros`, `ones` and `full` in an op: a tensor of `shape` (sizes)
    /// holding `value`, in the dtype argument's dtype (fp32 without one).
    /// Built from what fuses: `arange` over the element count times 0,
    /// converted, plus the value, reshaped; no input is read.
    fn fill(&mut self, f: &Frame, shape: V, value: V, span: Span) -> R<V> {
        let fp32 = tessera_syntax::ast::Dtype::Fp32;
        let dtype = self.dtype_arg.take().unwrap_or(fp32);
        let dims = shape_dims(&shape);
        let count = dims
            .as_ref()
            .and_then(|ds| ds.iter().try_fold(Dim::known(1), |acc, d| acc.mul(d)));
        let (Some(dims), Some(count)) = (dims, count) else {
            return Err(unsupported(
                self.span(f, span),
                "a tensor made in an op needs a shape of sizes known when the op compiles",
                "integers and dimensions of the op's parameters",
            ));
        };
        let ids = self.line(f, count, span);
        let zero = self.node(f, V::Int(0), span)?;
        let zeros = self.push(f, Op::Binary(BinaryOp::Mul), vec![ids, zero], span)?;
        let x = const_f64(&value).unwrap_or(0.0);
        let flat = if dtype.is_float() {
            let z = self.push(f, Op::Cast(dtype), vec![zeros], span)?;
            let v = self.node(f, V::Float(x), span)?;
            self.push(f, Op::Binary(BinaryOp::Add), vec![z, v], span)?
        } else {
            // The value converts as `value as dtype` does: truncated and
            // saturated (as host code's `full`), then added in the dtype.
            if dtype == tessera_syntax::ast::Dtype::Bool {
                let v = self.node(f, V::Int(i64::from(x != 0.0)), span)?;
                let z = self.push(f, Op::Binary(BinaryOp::Add), vec![zeros, v], span)?;
                self.push(f, Op::Cast(dtype), vec![z], span)?
            } else {
                let z = self.push(f, Op::Cast(dtype), vec![zeros], span)?;
                let v = self.node(f, V::Int(dtype.round_int(x).unwrap_or(0)), span)?;
                self.push(f, Op::Binary(BinaryOp::Add), vec![z, v], span)?
            }
        };
        let ty = Type::Tensor(TensorTy::new(dims, dtype));
        Ok(V::Node(self.push_typed(
            f,
            Op::Reshape,
            vec![flat],
            ty,
            span,
        )))
    }

    /// Philox uniforms of shape `dims` at the call's `seed` and `offset`
    /// (`rand`, `dropout`): a generated [`Op::Rand`] node. Shape, seed and
    /// offset must be known when the op compiles.
    fn uniform(
        &mut self,
        f: &Frame,
        dims: Option<Vec<Dim>>,
        get: &dyn Fn(&str) -> V,
        span: Span,
    ) -> R<ValueId> {
        let (Some(dims), Some(seed), Some(offset)) =
            (dims, const_int(&get("seed")), const_int(&get("offset")))
        else {
            return Err(unsupported(
                self.span(f, span),
                "random numbers in an op need a shape of sizes and a constant seed and offset",
                "not known when the op compiles",
            ));
        };
        let ty = Type::Tensor(TensorTy::new(dims, tessera_syntax::ast::Dtype::Fp32));
        let op = Op::Rand {
            seed: seed as u64,
            offset: offset as u64,
        };
        Ok(self.push_typed(f, op, vec![], ty, span))
    }

    /// Grouped-query attention at concrete shapes: each batch dim of k must
    /// divide q's (the checker takes symbolic head counts on trust).
    fn check_groups(&self, f: &Frame, q: ValueId, k: ValueId, span: Span) -> R<()> {
        let (Some(qt), Some(kt)) = (self.graph.tensor_ty(q), self.graph.tensor_ty(k)) else {
            return Ok(());
        };
        let r = qt.rank().min(kt.rank());
        for (a, b) in qt.dims[..r.saturating_sub(2)].iter().zip(&kt.dims) {
            if !b.may_divide(a) {
                return Err(Box::new(
                    Diagnostic::error(
                        codes::E0201,
                        self.span(f, span),
                        format!("attention with {a} query heads and {b} key/value heads"),
                    )
                    .with_label(format!("{b} does not divide {a}"))
                    .with_help(
                        "grouped-query attention needs each batch dim of k and v to equal \
                         or divide q's",
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// The axis an `axis` argument names in a tensor of `rank` (negative from
/// the end; `default` when absent). The checker has kept it in range.
pub(super) fn axis_of(v: &V, default: i64, rank: usize) -> usize {
    let a = const_int(v).unwrap_or(default);
    let a = if a < 0 { a + rank as i64 } else { a };
    a.clamp(0, (rank as i64 - 1).max(0)) as usize
}

/// The sizes of a shape list (`[R, 2]`: positive integers and dimension
/// symbols); `None` for anything else.
fn shape_dims(shape: &V) -> Option<Vec<Dim>> {
    let V::List(items) = shape else {
        return None;
    };
    items
        .iter()
        .map(|v| match v {
            V::Int(n) if *n > 0 => Some(Dim::known(*n as u64)),
            V::Dim(d) => Some(d.clone()),
            _ => None,
        })
        .collect()
}

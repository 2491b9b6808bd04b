//! The shape, dtype and shard rules of the `extern` primitives declared in
//! the stdlib: elementwise math, reductions, shapes, collectives, tile
//! operations and host builtins (`load`, `store` and the atomics in
//! `memory.rs`).

use super::bind::Bound;
use super::call::tensor;
use super::{Body, Cx, Val};
use crate::numerics::Policy;
use crate::table::BodyKind;
use crate::ty::{Const, Dim, TensorTy, Ty};
use tessera_core::UnaryOp;
use tessera_diagnostics::{codes, Diagnostic, Span};
use tessera_syntax::ast::{self, Dtype};

impl Cx<'_, '_> {
    /// Types a call of the primitive `name`.
    pub(crate) fn builtin(
        &mut self,
        body: &Body,
        name: &str,
        params: &[&ast::Param],
        bound: &[Bound],
        dtype: Option<Dtype>,
        span: Span,
    ) -> Val {
        let arg = |pname: &str| -> &Bound {
            let i = params
                .iter()
                .position(|p| p.name.text == pname)
                .unwrap_or(0);
            &bound[i]
        };
        match name {
            // The math functions of `UnaryOp`'s table, and `pow`.
            // `pow(0.5, x)`, `pow(x, y)`: a tensor exponent broadcasts
            // with the base, as a binary operator's operands do.
            "pow" if arg("p").val.ty.tensor().is_some() => {
                let v = self.elementwise_n(body, name, &[arg("x"), arg("p")], span);
                match &v.ty {
                    Ty::Tensor(t) if !t.dtype.is_float() => self.unary_math(
                        name,
                        &Bound {
                            val: v.clone(),
                            ..arg("x").clone()
                        },
                    ),
                    _ => v,
                }
            }
            n if n == "pow" || UnaryOp::from_function(n).is_some() => {
                self.unary_math(name, arg("x"))
            }
            "maximum" | "minimum" => self.elementwise_n(body, name, &[arg("a"), arg("b")], span),
            "where" => {
                let c = arg("cond");
                if let Ty::Tensor(t) = &c.val.ty {
                    if t.dtype != Dtype::Bool {
                        self.error(
                            Diagnostic::error(
                                codes::E0200,
                                c.span,
                                format!("`where` needs a `bool` condition, found `{}`", t.dtype),
                            )
                            .with_label("not a boolean tensor")
                            .with_help("compare to get booleans: `x > 0.0`"),
                        );
                        return Val::error();
                    }
                }
                // A condition known when the op compiles (`reduction ==
                // "mean"`) picks one of two tensors, whatever their shapes.
                if let (Some(Const::Bool(pick)), Ty::Tensor(_), Ty::Tensor(_)) =
                    (&c.val.konst, &arg("a").val.ty, &arg("b").val.ty)
                {
                    return arg(if *pick { "a" } else { "b" }).val.clone();
                }
                let v = self.elementwise_n(body, name, &[arg("a"), arg("b")], span);
                match (&v.ty, &c.val.ty) {
                    (Ty::Tensor(t), Ty::Tensor(ct)) => {
                        match self.broadcast(&t.dims, &ct.dims, span, arg("a").span, c.span, t, ct)
                        {
                            Some(dims) => tensor(dims, t.dtype),
                            None => Val::error(),
                        }
                    }
                    // Scalar branches under a tensor condition take its
                    // shape (numpy's `where(x > 0, 1.0, -1.0)`): floats as
                    // fp32, integers as int32.
                    (Ty::Float | Ty::Int, Ty::Tensor(ct)) => {
                        let ints = [arg("a"), arg("b")].iter().all(|x| x.val.ty == Ty::Int);
                        let dtype = if ints { Dtype::Int32 } else { Dtype::Fp32 };
                        tensor(ct.dims.clone(), dtype)
                    }
                    _ => v,
                }
            }
            // Of two scalars, the larger or smaller (Python's and Triton's
            // `min(a, b)`); of one, itself.
            // So of a rank-0 tensor or tile (a full reduction, a scalar
            // load) and a second value passed by position: Triton's
            // `maximum(amax, 1e-8)` (a rank-0 tensor has no axis to reduce).
            "max" | "min"
                if matches!(arg("x").val.ty, Ty::Int | Ty::Float)
                    || (arg("axis").positional
                        && matches!(&arg("x").val.ty, Ty::Tensor(t) if t.dims.is_empty())) =>
            {
                if arg("axis").defaulted {
                    return arg("x").val.clone();
                }
                if !arg("keepdims").defaulted {
                    self.error(
                        Diagnostic::error(
                            codes::E0206,
                            arg("keepdims").span,
                            format!(
                                "`keepdims` applies to a reduction, not to `{name}` of two scalars"
                            ),
                        )
                        .with_label("nothing is reduced"),
                    );
                    return Val::error();
                }
                let full = if name == "max" { "maximum" } else { "minimum" };
                self.elementwise_n(body, full, &[arg("x"), arg("axis")], span)
            }
            // `max(v, 0.0)` of a tile: the second argument is the axis.
            "max" | "min"
                if arg("axis").positional
                    && arg("axis").val.ty == Ty::Float
                    && matches!(&arg("x").val.ty, Ty::Tensor(t) if !t.dims.is_empty()) =>
            {
                let full = if name == "max" { "maximum" } else { "minimum" };
                self.error(
                    Diagnostic::error(
                        codes::E0206,
                        arg("axis").span,
                        format!(
                            "the second argument of `{name}` of a tensor is the axis it reduces"
                        ),
                    )
                    .with_label("a float, not an axis")
                    .with_help(format!(
                        "for the elementwise {full} of a tensor and a number, write `{full}(x, y)`"
                    )),
                );
                Val::error()
            }
            "sum" | "max" | "min" | "mean" | "prod" => {
                self.reduction(body, name, arg("x"), arg("axis"), arg("keepdims"), span)
            }
            "topk" | "topk_indices" => self.topk(name, arg("x"), arg("k"), arg("axis"), span),
            "sort" | "argsort" => self.sort(name, arg("x"), arg("axis"), span),
            "split" => self.split(name, arg("x"), arg("size"), arg("axis"), span),
            "chunk" => self.split(name, arg("x"), arg("chunks"), arg("axis"), span),
            "cumsum" | "cumprod" | "cummax" | "cummin" | "logcumsumexp" => {
                let x = arg("x");
                let Ty::Tensor(t) = &x.val.ty else {
                    return self.not_tensor(name, x);
                };
                // Booleans count (as numpy's and torch's do), and narrow
                // integers sum and multiply, in int32.
                let mut t = t.clone();
                if matches!(name, "cumsum" | "cumprod") {
                    t.dtype = t.dtype.sum_result();
                }
                if self.axis_of(t.rank(), arg("axis")).is_none() {
                    return Val::error();
                }
                let how = "each running sum adds its elements without compensation";
                if name == "cumsum"
                    && t.dtype.is_float()
                    && !self.compensated(body, ("cumsum", "running sums", how), span)
                {
                    return Val::error();
                }
                Val::of(Ty::Tensor(t))
            }
            "argmax" | "argmin" if matches!(arg("axis").val.konst, Some(Const::List(_))) => {
                self.error(
                    Diagnostic::error(
                        codes::E0206,
                        arg("axis").span,
                        format!("`{name}` takes one axis"),
                    )
                    .with_label("a list of axes")
                    .with_help(format!(
                        "an index along several axes is ambiguous: reshape them into one first (`{name}(reshape(x, [M * N]), axis = 0)` gives a flat index)"
                    )),
                );
                Val::error()
            }
            "argmax" | "argmin" => {
                let kind = if name == "argmax" { "max" } else { "min" };
                let mut v =
                    self.reduction(body, kind, arg("x"), arg("axis"), arg("keepdims"), span);
                if let Ty::Tensor(t) = &mut v.ty {
                    t.dtype = Dtype::Int32;
                    t.shard = None;
                }
                v
            }
            "matmul" => match (&arg("a").val.ty, &arg("b").val.ty) {
                (Ty::Tensor(a), Ty::Tensor(b)) => {
                    self.matmul(body, a, b, arg("a").span, arg("b").span)
                }
                _ => self.not_tensor(
                    name,
                    if arg("a").val.ty.tensor().is_none() {
                        arg("a")
                    } else {
                        arg("b")
                    },
                ),
            },
            "transpose" => self.swap_axes(arg("x"), arg("dim0"), arg("dim1")),
            "reshape" => self.reshape(body, arg("x"), arg("shape")),
            "broadcast_to" => self.broadcast_to(arg("x"), arg("shape")),
            "permute" => self.permute(arg("x"), arg("dims")),
            "concat" => self.concat(arg("xs"), arg("axis"), false),
            "stack" => self.concat(arg("xs"), arg("axis"), true),
            "gather" => self.gather(arg("x"), arg("index"), arg("axis")),
            "take" => self.take(arg("x"), arg("index"), arg("axis")),
            "scatter_add" | "index_add" | "scatter" | "index_copy" => {
                let v = self.scatter(name, (arg("x"), arg("index"), arg("src")), arg("axis"));
                match &v.ty {
                    Ty::Tensor(t) if name.ends_with("_add") => {
                        self.unordered_sum(body, name, t.dtype, span)
                    }
                    Ty::Tensor(_) if body.numerics.policy != Policy::Fast => {
                        self.error(
                            Diagnostic::error(
                                codes::E0502,
                                span,
                                format!("`{name}` keeps one of the values named at one place, not a fixed one"),
                            )
                            .with_label("which one varies from run to run on a GPU, against the op's policy")
                            .with_help("make the indices distinct and use `scatter_add` (exact for integers), or compute this op under the `fast` policy"),
                        )
                    }
                    _ => {}
                }
                v
            }
            "bincount" => self.bincount(arg("x"), arg("length")),
            // A new axis of extent 1 at `axis` of the result (torch's
            // `unsqueeze`, numpy's `expand_dims`; -1 appends one).
            "unsqueeze" | "expand_dims" => {
                let x = arg("x");
                let Ty::Tensor(t) = &x.val.ty else {
                    return self.not_tensor(name, x);
                };
                let Some(at) = self.axis_of(t.rank() + 1, arg("axis")) else {
                    return Val::error();
                };
                let mut t = t.clone();
                t.dims.insert(at, Dim::known(1));
                if let Some(s) = &mut t.shard {
                    s.dims.insert(at, None);
                }
                Val::of(Ty::Tensor(t))
            }
            "squeeze" => {
                let x = arg("x");
                let Ty::Tensor(t) = &x.val.ty else {
                    return self.not_tensor(name, x);
                };
                let Some(at) = self.axis_of(t.rank(), arg("axis")) else {
                    return Val::error();
                };
                // An extent known to be other than 1 cannot go; a symbolic
                // one is checked at the call's sizes.
                if let Some(n) = t.dims[at].as_known().filter(|n| *n != 1) {
                    self.error(
                        Diagnostic::error(
                            codes::E0201,
                            arg("axis").span,
                            format!("`squeeze` of axis {at}, of extent {n}"),
                        )
                        .with_label("only an axis of extent 1 goes")
                        .with_secondary(x.span, format!("this is `{t}`")),
                    );
                    return Val::error();
                }
                let mut t = t.clone();
                t.dims.remove(at);
                if let Some(s) = &mut t.shard {
                    s.dims.remove(at);
                }
                Val::of(Ty::Tensor(t))
            }
            "roll" | "repeat_interleave" | "repeat" => self.rearranged(name, &arg),
            "type_as" => {
                let (x, like) = (arg("x"), arg("other"));
                let dtype = match &like.val.ty {
                    Ty::Tensor(t) => t.dtype,
                    Ty::Error => return Val::error(),
                    _ => return self.not_tensor(name, like),
                };
                match &x.val.ty {
                    Ty::Tensor(t) => {
                        let mut t = t.clone();
                        t.dtype = dtype;
                        Val::of(Ty::Tensor(t))
                    }
                    Ty::Error => Val::error(),
                    _ => self.not_tensor(name, x),
                }
            }
            "einsum" => self.einsum(arg("equation"), arg("xs")),
            "flip" => {
                let x = arg("x");
                let Ty::Tensor(t) = &x.val.ty else {
                    return self.not_tensor(name, x);
                };
                match self.axis_of(t.rank(), arg("axis")) {
                    Some(_) => x.val.clone(),
                    None => Val::error(),
                }
            }
            "cdiv" => {
                let (a, b) = (arg("a"), arg("b"));
                let konst = match (
                    a.val.konst.as_ref().and_then(Const::as_int),
                    b.val.konst.as_ref().and_then(Const::as_int),
                ) {
                    (Some(x), Some(y)) if y > 0 => Some(Const::Int(
                        x.div_euclid(y) + i64::from(x.rem_euclid(y) != 0),
                    )),
                    (_, Some(y)) if y <= 0 => {
                        self.error(
                            Diagnostic::error(
                                codes::E0214,
                                b.span,
                                "cdiv by a non-positive number",
                            )
                            .with_label("must be at least 1"),
                        );
                        return Val::error();
                    }
                    _ => None,
                };
                Val {
                    ty: Ty::Int,
                    dim: konst
                        .as_ref()
                        .and_then(Const::as_int)
                        .and_then(|v| u64::try_from(v).ok())
                        .map(Dim::known),
                    konst,
                }
            }
            "conv2d" | "conv1d" | "attention" if !self.compensable(body, name, span) => {
                Val::error()
            }
            "conv2d" | "conv1d" => {
                let spatial = if name == "conv2d" { 2 } else { 1 };
                let knobs = ["x", "w", "stride", "padding", "dilation", "groups"].map(arg);
                self.conv(name, spatial, knobs, span)
            }
            "attention" => {
                // An op's `bool` attribute is known where the op is instantiated.
                let attribute = body.kind == BodyKind::Op;
                self.attention(
                    [arg("q"), arg("k"), arg("v")],
                    ([arg("causal"), arg("bottom_right")], attribute),
                    span,
                )
            }
            "all_reduce" | "all_gather" | "reduce_scatter" | "all_to_all" | "send" | "recv" => {
                self.collective(name, params, bound)
            }
            "program_id" | "num_programs" => {
                let a = arg("axis");
                match a.val.konst.as_ref().and_then(Const::as_int) {
                    Some(0..=2) => Val::of(Ty::Int),
                    _ => {
                        self.error(
                            Diagnostic::error(codes::E0206, a.span, "grid axis must be 0, 1 or 2")
                                .with_label("not a constant 0, 1 or 2"),
                        );
                        Val::error()
                    }
                }
            }
            // `arange<fp32>(0, N)` (numpy's dtype argument) converts.
            "arange" if body.kind != BodyKind::Kernel => {
                let op = body.kind == BodyKind::Op;
                retyped(self.arange_op(arg("start"), arg("end"), op), dtype)
            }
            "arange" => {
                let (s, e) = (arg("start"), arg("end"));
                let v = match (
                    s.val.konst.as_ref().and_then(Const::as_int),
                    e.val.konst.as_ref().and_then(Const::as_int),
                ) {
                    (Some(a), Some(b)) if b > a => {
                        tensor(vec![Dim::known((b - a) as u64)], Dtype::Int32)
                    }
                    (Some(_), Some(_)) => {
                        self.error(
                            Diagnostic::error(codes::E0604, s.span.to(e.span), "empty `arange`")
                                .with_label("end must exceed start"),
                        );
                        Val::error()
                    }
                    _ => self.not_constant_tile(s.span.to(e.span)),
                };
                retyped(v, dtype)
            }
            "load" => self.load(arg("src"), arg("index"), arg("mask")),
            "store" => self.store(body, arg("dst"), arg("index"), arg("value"), arg("mask")),
            "atomic_add" | "atomic_max" | "atomic_min" => {
                let dst = arg("dst");
                let out = self.store(body, dst, arg("index"), arg("value"), arg("mask"));
                if let Ty::Global(t) = &dst.val.ty {
                    self.atomic(body, name, t.dtype, (span, dst.span));
                }
                out
            }
            "dot" => {
                let (a, b, acc) = (arg("a"), arg("b"), arg("acc"));
                let v = match (&a.val.ty, &b.val.ty) {
                    (Ty::Tensor(x), Ty::Tensor(y)) if x.rank() == 2 && y.rank() == 2 => {
                        self.matmul(body, x, y, a.span, b.span)
                    }
                    _ => {
                        self.error(
                            Diagnostic::error(
                                codes::E0202,
                                a.span.to(b.span),
                                "`dot` multiplies two 2-D tiles",
                            )
                            .with_label("not two rank-2 tiles"),
                        );
                        return Val::error();
                    }
                };
                match (&v.ty, &acc.val.ty) {
                    // Without `acc`, the product in the accumulator's dtype.
                    (Ty::Tensor(r), _) if acc.defaulted => {
                        tensor(r.dims.clone(), r.dtype.dot_accumulator())
                    }
                    (Ty::Tensor(r), Ty::Tensor(c)) => {
                        if r.dims.len() != c.dims.len()
                            || r.dims.iter().zip(&c.dims).any(|(x, y)| !x.compatible(y))
                        {
                            self.error(
                                Diagnostic::error(
                                    codes::E0201,
                                    acc.span,
                                    format!(
                                        "accumulator is `{c}`, the product is {}",
                                        r.dims
                                            .iter()
                                            .map(|d| d.to_string())
                                            .collect::<Vec<_>>()
                                            .join("x")
                                    ),
                                )
                                .with_label("shape differs from the product"),
                            );
                            return Val::error();
                        }
                        Val::of(Ty::Tensor(c.clone()))
                    }
                    _ => v,
                }
            }
            "rand" if body.kind == BodyKind::Kernel => {
                let (s, o) = (arg("seed"), arg("offsets"));
                // `rand<bf16>(...)`: rounded to a narrower float.
                let out = dtype.unwrap_or(Dtype::Fp32);
                if !out.is_float() {
                    self.error(
                        Diagnostic::error(codes::E0200, span, format!("`rand<{out}>`"))
                            .with_label("uniforms are floats")
                            .with_help(
                                "draw floats and convert: `(rand(seed, o) * 10.0) as int32`",
                            ),
                    );
                    return Val::error();
                }
                // The seed is one integer: a constant, or one known when
                // the kernel runs (a scalar parameter, `program_id`).
                let one_int = s.val.ty.is_one_int() && !s.val.is_error();
                match (one_int, &o.val.ty) {
                    (true, Ty::Tensor(t)) if t.dtype.is_int() => tensor(t.dims.clone(), out),
                    (true, Ty::Int) => tensor(Vec::new(), out),
                    _ => {
                        self.error(
                            Diagnostic::error(
                                codes::E0211,
                                span,
                                "`rand` in a kernel takes one integer seed and a tile of integer counters",
                            )
                            .with_label("as `rand(seed, offsets)`")
                            .with_help(
                                "the seed is one key (a constant, a scalar parameter, `program_id(0)`); \
                                 vary the stream with the counters, each element's global index",
                            ),
                        );
                        Val::error()
                    }
                }
            }
            "dropout" => {
                let x = arg("x");
                if x.val.ty.tensor().is_none() {
                    return self.not_tensor("dropout", x);
                }
                let p = arg("p");
                // A probability is a number; the seed and the offset are
                // integers (a run-time one included).
                for (b, ok, name, what) in [
                    (
                        p,
                        matches!(p.val.ty, Ty::Int | Ty::Float | Ty::Error),
                        "p",
                        "a number",
                    ),
                    (
                        arg("seed"),
                        arg("seed").val.ty.is_one_int(),
                        "seed",
                        "an integer",
                    ),
                    (
                        arg("offset"),
                        arg("offset").val.ty.is_one_int(),
                        "offset",
                        "an integer",
                    ),
                ] {
                    if !ok && !b.defaulted {
                        self.error(
                            Diagnostic::error(
                                codes::E0201,
                                b.span,
                                format!("dropout's `{name}` must be {what}"),
                            )
                            .with_label(format!("this is {}", b.val.ty.describe())),
                        );
                        return Val::error();
                    }
                }
                if let Some(v) = p.val.konst.as_ref().and_then(Const::as_f64) {
                    if !(0.0..1.0).contains(&v) {
                        self.error(
                            Diagnostic::error(
                                codes::E0214,
                                p.span,
                                format!("dropout probability {v}"),
                            )
                            .with_label("must lie in [0, 1)"),
                        );
                        return Val::error();
                    }
                }
                x.val.clone()
            }
            "zeros" | "ones" | "full" | "randn" | "rand" => {
                let shape = arg("shape");
                let sized = shape.val.konst.is_some() || shape.elem_dims.is_some();
                if body.kind == crate::table::BodyKind::Op && !sized {
                    self.error(
                        Diagnostic::error(
                            codes::E0208,
                            shape.span,
                            format!("`{name}` in an op needs sizes known when the op compiles"),
                        )
                        .with_label("not integers or sizes of the op's parameters")
                        .with_help("write the shape with integers and dimension symbols: `[R, 2]`"),
                    );
                    return Val::error();
                }
                if name == "full" && arg("value").val.ty.tensor().is_some() {
                    let value = arg("value");
                    self.error(
                        Diagnostic::error(codes::E0211, value.span, "`full` takes a number")
                            .with_label(format!("this is {}", value.val.ty.describe()))
                            .with_help("to fill with a tensor's value, broadcast it: `zeros<fp32>(shape) + v`"),
                    );
                    return Val::error();
                }
                self.create(body, shape, dtype.unwrap_or(Dtype::Fp32))
            }
            "load_npy" => self.create(body, arg("shape"), dtype.unwrap_or(Dtype::Fp32)),
            "print" | "save_npy" => Val::of(Ty::Unit),
            "assert" => self.assert(body, arg("cond"), arg("message"), span),
            "allclose" => {
                for n in ["a", "b"] {
                    if arg(n).val.ty.tensor().is_none() {
                        return self.not_tensor(name, arg(n));
                    }
                }
                Val::of(Ty::Bool)
            }
            _ => {
                self.error(
                    Diagnostic::error(
                        codes::E0103,
                        span,
                        format!("`{name}` has no implementation"),
                    )
                    .with_label("declared `extern` but unknown to the compiler"),
                );
                Val::error()
            }
        }
    }

    pub(super) fn not_tensor(&mut self, name: &str, arg: &Bound) -> Val {
        self.error(
            Diagnostic::error(codes::E0205, arg.span, format!("`{name}` needs a tensor"))
                .with_label(format!("this is {}", arg.val.ty.describe())),
        );
        Val::error()
    }

    /// `arange(start, end)` in an op or host code: its length must be
    /// known when the op compiles (constant bounds, or a constant start and
    /// a size for the end: `arange(0, N)`, `arange(0, L - K + 1)`).
    /// In an op (`in_op`) every integer is known when the op compiles
    /// (sizes and `int` attributes): a length the checker cannot write,
    /// `arange(pos, pos + T)` or `arange(0, (L - k) / stride + 1)`, is
    /// known at each call.
    fn arange_op(&mut self, s: &Bound, e: &Bound, in_op: bool) -> Val {
        let start = s.val.konst.as_ref().and_then(Const::as_int);
        let end = e.val.konst.as_ref().and_then(Const::as_int);
        let len = match (start, end, &e.val.dim) {
            (Some(a), Some(b), _) if b > a => Dim::known((b - a) as u64),
            (Some(_), Some(_), _) => {
                self.error(
                    Diagnostic::error(codes::E0604, s.span.to(e.span), "empty `arange`")
                        .with_label("end must exceed start"),
                );
                return Val::error();
            }
            // A size: `arange(0, N)`, `arange(1, L - K + 1)` (a length
            // the checker cannot write is known at each call).
            (Some(0), None, Some(d)) => d.clone(),
            (Some(a), None, Some(d)) if a > 0 => {
                d.sub(&Dim::known(a as u64)).unwrap_or(Dim::Unknown)
            }
            _ if in_op && s.val.ty == Ty::Int && e.val.ty == Ty::Int => Dim::Unknown,
            _ => {
                self.error(
                    Diagnostic::error(
                        codes::E0208,
                        s.span.to(e.span),
                        "the length of `arange` must be known at compile time",
                    )
                    .with_label("not a constant length")
                    .with_help(
                        "give constant bounds, or a constant start and a size: `arange(0, N)`",
                    ),
                );
                return Val::error();
            }
        };
        tensor(vec![len], Dtype::Int32)
    }

    fn not_constant_tile(&mut self, span: Span) -> Val {
        self.error(
            Diagnostic::error(
                codes::E0604,
                span,
                "tile shape is not a compile-time constant",
            )
            .with_label("not constant")
            .with_help("use kernel constants such as `BLOCK` for tile sizes"),
        );
        Val::error()
    }

    fn unary_math(&mut self, name: &str, x: &Bound) -> Val {
        match &x.val.ty {
            Ty::Int | Ty::Float => {
                let konst = x.val.konst.as_ref().and_then(Const::as_f64).and_then(|v| {
                    let r = UnaryOp::from_function(name)?.eval(v);
                    r.is_finite().then_some(Const::Float(r))
                });
                let ty = if name == "abs" {
                    x.val.ty.clone()
                } else {
                    Ty::Float
                };
                Val {
                    ty,
                    konst,
                    dim: None,
                }
            }
            Ty::Tensor(t) => {
                if name != "abs" && !t.dtype.is_float() {
                    self.error(
                        Diagnostic::error(
                            codes::E0200,
                            x.span,
                            format!("`{name}` needs a float tensor, found `{}`", t.dtype),
                        )
                        .with_label("not a float tensor")
                        .with_help("convert first: `x as fp32`"),
                    );
                    return Val::error();
                }
                if !t.partial().is_empty() && name != "abs" {
                    self.nonlinear_partial(t, x.span, name);
                    return Val::error();
                }
                Val::of(Ty::Tensor(t.clone()))
            }
            _ => self.not_tensor(name, x),
        }
    }

    fn elementwise_n(&mut self, body: &Body, name: &str, args: &[&Bound], span: Span) -> Val {
        let mut acc: Option<(TensorTy, Span)> = None;
        for a in args {
            match &a.val.ty {
                Ty::Tensor(t) => {
                    if !t.partial().is_empty() {
                        self.nonlinear_partial(t, a.span, name);
                        return Val::error();
                    }
                    acc = Some(match acc {
                        None => (t.clone(), a.span),
                        Some((prev, pspan)) => {
                            let Some(dims) =
                                self.broadcast(&prev.dims, &t.dims, span, pspan, a.span, &prev, t)
                            else {
                                return Val::error();
                            };
                            let Some(dtype) = body.numerics.promote(prev.dtype, t.dtype) else {
                                self.error(
                                    Diagnostic::error(
                                        codes::E0200,
                                        span,
                                        format!("`{name}` of `{}` and `{}`", prev.dtype, t.dtype),
                                    )
                                    .with_secondary(pspan, format!("`{}`", prev.dtype))
                                    .with_secondary(a.span, format!("`{}`", t.dtype))
                                    .with_help("convert one operand explicitly with `as`"),
                                );
                                return Val::error();
                            };
                            (
                                TensorTy {
                                    dims,
                                    dtype,
                                    shard: prev.shard.or(t.shard.clone()),
                                },
                                pspan,
                            )
                        }
                    });
                }
                Ty::Int | Ty::Float => {}
                _ => return self.not_tensor(name, a),
            }
        }
        // In ops, an integer tensor meets a float as in `+`: E0200 rather
        // than the float truncated (kernels promote, as Triton does); a
        // whole literal (`clamp(x, 0.0, 3.0)`) converts exactly.
        if let Some((t, _)) = &acc {
            let whole = |a: &Bound| matches!(a.val.konst, Some(Const::Float(f)) if f.fract() == 0.0 || f.is_infinite());
            let float = args.iter().any(|a| a.val.ty == Ty::Float && !whole(a));
            if body.kind != BodyKind::Kernel && t.dtype.is_int() && float {
                self.error(
                    Diagnostic::error(
                        codes::E0200,
                        span,
                        format!("`{name}` of an integer tensor and a float"),
                    )
                    .with_label("the float would be truncated")
                    .with_help("convert the tensor first: `s as fp32`"),
                );
                return Val::error();
            }
        }
        match acc {
            Some((t, _)) => Val::of(Ty::Tensor(t)),
            // Integer scalars stay integers (Triton's grouped ordering:
            // `minimum(num_pid_m - first, GROUP)`), folded when constant.
            None if args.iter().all(|a| a.val.ty == Ty::Int) => {
                let ints: Option<Vec<i64>> = args
                    .iter()
                    .map(|a| a.val.konst.as_ref().and_then(Const::as_int))
                    .collect();
                let konst = match (name, ints) {
                    ("maximum", Some(v)) => v.into_iter().max().map(Const::Int),
                    ("minimum", Some(v)) => v.into_iter().min().map(Const::Int),
                    _ => None,
                };
                Val {
                    ty: Ty::Int,
                    konst,
                    dim: None,
                }
            }
            None => Val::of(Ty::Float),
        }
    }

    pub(super) fn axis_of(&mut self, rank: usize, axis: &Bound) -> Option<usize> {
        let Some(k) = axis.val.konst.as_ref().and_then(Const::as_int) else {
            // An `int` attribute of the op (`axis: int = 0` passed on) is
            // known when the op compiles, where the axis is checked: no
            // type here, and no error.
            if axis.val.ty == Ty::Int && axis.val.dim.is_some() {
                return None;
            }
            // A constant of another type: say which.
            let wrong = match &axis.val.ty {
                Ty::List(_) => Some((codes::E0206, "one axis, not a list of axes".to_owned())),
                other @ (Ty::Float | Ty::Str | Ty::Bool) => Some((
                    codes::E0201,
                    format!("an integer, not {}", other.describe()),
                )),
                // A value known only at run time: below.
                _ => None,
            };
            if let Some((code, what)) = wrong {
                self.error(
                    Diagnostic::error(code, axis.span, format!("`axis` must be {what}"))
                        .with_label(format!("this is {}", axis.val.ty.describe())),
                );
                return None;
            }
            self.error(
                Diagnostic::error(
                    codes::E0208,
                    axis.span,
                    "`axis` must be a compile-time constant",
                )
                .with_label("not constant"),
            );
            return None;
        };
        let r = rank as i64;
        if rank == 0 || k < -r || k >= r {
            self.error(
                Diagnostic::error(
                    codes::E0206,
                    axis.span,
                    format!("axis {k} is out of range for a tensor of rank {rank}"),
                )
                .with_label(format!("expected an axis in {}..{}", -r, r)),
            );
            return None;
        }
        Some(if k < 0 { (k + r) as usize } else { k as usize })
    }

    /// Whether a reduction keeps its axes: `keepdims` decides the result's
    /// rank, so it must be known when the op is checked (a literal or a
    /// kernel constant); an op's `bool` attribute, known only at each
    /// call, is E0208.
    fn keepdims(&mut self, keepdims: &Bound) -> Option<bool> {
        match &keepdims.val.konst {
            Some(Const::Bool(b)) => Some(*b),
            _ if matches!(keepdims.val.ty, Ty::Error) => None,
            _ => {
                self.error(
                    Diagnostic::error(
                        codes::E0208,
                        keepdims.span,
                        "`keepdims` must be a compile-time `true` or `false`",
                    )
                    .with_label(format!("this is {}, known only at each call", keepdims.val.ty.describe()))
                    .with_help("`keepdims` decides the result's rank: write `true` or `false` (or reshape the result: `x[:, None]`)"),
                );
                None
            }
        }
    }

    fn reduction(
        &mut self,
        body: &Body,
        name: &str,
        x: &Bound,
        axis: &Bound,
        keepdims: &Bound,
        span: Span,
    ) -> Val {
        let t = match &x.val.ty {
            Ty::Tensor(t) => t.clone(),
            _ => return self.not_tensor(name, x),
        };
        if let Some(Const::List(items)) = &axis.val.konst {
            return self.reduction_axes(body, name, x, axis, items, keepdims, span);
        }
        let Some(ax) = self.axis_of(t.rank(), axis) else {
            return Val::error();
        };
        let Some(keep) = self.keepdims(keepdims) else {
            return Val::error();
        };
        if name == "mean" && !t.dtype.is_float() {
            self.error(
                Diagnostic::error(
                    codes::E0200,
                    x.span,
                    format!("`mean` needs a float tensor, found `{}`", t.dtype),
                )
                .with_label(if t.dtype == Dtype::Bool {
                    "a boolean tensor (`sum` counts its trues)"
                } else {
                    "an integer tensor"
                })
                .with_help("convert first: `x as fp32`"),
            );
            return Val::error();
        }
        if name == "prod" && t.dtype == Dtype::Bool {
            self.error(
                Diagnostic::error(codes::E0200, x.span, "`prod` of a boolean tensor")
                    .with_label("booleans do not multiply")
                    .with_help(
                        "`all(...)` is written `min(x, axis)`; or convert first: `x as int32`",
                    ),
            );
            return Val::error();
        }
        if name == "sum" && body.numerics.policy == Policy::KahanSum && !t.dtype.is_float() {
            self.error(
                Diagnostic::error(
                    codes::E0502,
                    span,
                    format!("`kahan_sum` does not apply to a `{}` sum", t.dtype),
                )
                .with_label("integer sums are exact")
                .with_help("drop the policy for this op, or sum floats"),
            );
            return Val::error();
        }
        let linear = matches!(name, "sum" | "mean");
        if !t.partial().is_empty() && !linear {
            self.nonlinear_partial(&t, x.span, name);
            return Val::error();
        }
        let mut out = t.clone();
        if name == "sum" {
            // A count of the trues (numpy's and torch's `sum`), and sums
            // of narrow integers, in int32.
            out.dtype = t.dtype.sum_result();
        }
        let split = t.dim_axis(ax).cloned();
        if let Some(axis) = &split {
            if !linear {
                self.error(
                    Diagnostic::error(
                        codes::E0405,
                        span,
                        format!(
                            "`{name}` over dimension {ax}, which is split over `{}`",
                            axis.axis
                        ),
                    )
                    .with_label("each device sees only its slice")
                    .with_help(format!("gather it first: `all_gather(..., {})`", axis.axis)),
                );
                return Val::error();
            }
        }
        if keep {
            out.dims[ax] = Dim::known(1);
        } else {
            out.dims.remove(ax);
        }
        if let Some(s) = &mut out.shard {
            if keep {
                s.dims[ax] = None;
            } else {
                s.dims.remove(ax);
            }
            if let Some(axis) = split {
                s.partial.push(axis);
            }
        }
        Val::of(Ty::Tensor(out))
    }

    /// A reduction over a list of axes (`mean(x, axis = [0, 1])`, numpy's
    /// and torch's tuple of dims): one axis at a time, the last first, in
    /// ops and host code; a kernel writes the nesting itself.
    #[allow(clippy::too_many_arguments)]
    fn reduction_axes(
        &mut self,
        body: &Body,
        name: &str,
        x: &Bound,
        axis: &Bound,
        items: &[Const],
        keepdims: &Bound,
        span: Span,
    ) -> Val {
        let rank = x.val.ty.tensor().map_or(0, TensorTy::rank) as i64;
        let axes: Option<Vec<i64>> = items
            .iter()
            .map(|c| c.as_int().map(|a| if a < 0 { a + rank } else { a }))
            .collect();
        let bad = |cx: &mut Self, label: String| {
            cx.error(
                Diagnostic::error(
                    codes::E0206,
                    axis.span,
                    format!("`{name}` cannot reduce over axes {}", axis_list(items)),
                )
                .with_label(label),
            );
            Val::error()
        };
        let Some(mut axes) = axes else {
            return bad(self, "each axis must be an integer constant".into());
        };
        if body.kind == BodyKind::Kernel {
            return bad(
                self,
                format!(
                    "a kernel reduces one axis at a time: `{name}({name}(t, axis = 1), axis = 0)`"
                ),
            );
        }
        axes.sort_unstable();
        if axes.is_empty()
            || axes.windows(2).any(|w| w[0] == w[1])
            || axes.iter().any(|&a| a < 0 || a >= rank)
        {
            return bad(
                self,
                format!("distinct axes of a rank-{rank} tensor, at least one"),
            );
        }
        let mut v = x.clone();
        for &a in axes.iter().rev() {
            let one = Bound {
                val: Val {
                    ty: Ty::Int,
                    konst: Some(Const::Int(a)),
                    dim: None,
                },
                ..axis.clone()
            };
            v.val = self.reduction(body, name, &v, &one, keepdims, span);
            if v.val.is_error() {
                return Val::error();
            }
        }
        v.val
    }

    pub(super) fn shape_dims(&mut self, shape: &Bound, require_const: bool) -> Option<Vec<Dim>> {
        let bad = |cx: &mut Self, what: &str| {
            cx.error(
                Diagnostic::error(
                    if require_const {
                        codes::E0604
                    } else {
                        codes::E0211
                    },
                    shape.span,
                    format!("shape must be {what}"),
                )
                .with_label(format!("this is {}", shape.val.ty.describe())),
            );
            None
        };
        if !matches!(shape.val.ty, Ty::List(_)) {
            return bad(self, "a list of integers such as `[4, 8]`");
        }
        match &shape.val.konst {
            Some(Const::List(items)) => {
                let mut dims = Vec::new();
                for item in items {
                    match item.as_int() {
                        Some(n) if n >= 1 => dims.push(Dim::known(n as u64)),
                        _ => {
                            self.error(
                                Diagnostic::error(
                                    codes::E0207,
                                    shape.span,
                                    format!("invalid dimension {item}"),
                                )
                                .with_label("dimensions must be positive integers"),
                            );
                            return None;
                        }
                    }
                }
                let count = dims.iter().try_fold(Dim::known(1), |a, d| a.mul(d));
                if count
                    .as_ref()
                    .and_then(Dim::as_known)
                    .is_none_or(|n| n > crate::ty::MAX_ELEMENTS)
                {
                    self.error(
                        Diagnostic::error(codes::E0207, shape.span, "tensor is too large")
                            .with_label("more than 2^48 elements"),
                    );
                    return None;
                }
                Some(dims)
            }
            _ if require_const => bad(self, "a compile-time constant"),
            // Symbolic or runtime sizes.
            _ => Some(match &shape.elem_dims {
                Some(dims) => dims.clone(),
                None => vec![Dim::Unknown; shape.elems.len().max(1)],
            }),
        }
    }

    fn create(&mut self, body: &Body, shape: &Bound, dtype: Dtype) -> Val {
        let kernel = body.kind == crate::table::BodyKind::Kernel;
        match self.shape_dims(shape, kernel) {
            Some(dims) => tensor(dims, dtype),
            None => Val::error(),
        }
    }

    fn collective(&mut self, name: &str, params: &[&ast::Param], bound: &[Bound]) -> Val {
        let x = &bound[0];
        let axis_arg = &bound[1];
        let t = match &x.val.ty {
            Ty::Tensor(t) => t.clone(),
            _ => return self.not_tensor(name, x),
        };
        let Ty::Axis(axis) = &axis_arg.val.ty else {
            return Val::error();
        };
        let int_param = |pname: &str| -> Option<i64> {
            let i = params.iter().position(|p| p.name.text == pname)?;
            bound[i].val.konst.as_ref().and_then(Const::as_int)
        };
        let unused = |cx: &mut Self, how: &str| {
            cx.error(
                Diagnostic::error(
                    codes::E0407,
                    axis_arg.span,
                    format!(
                        "`{name}` over `{}`, but the tensor is not {how} `{}`",
                        axis.axis, axis.axis
                    ),
                )
                .with_label(format!("the tensor is `{t}`"))
                .with_secondary(x.span, "this value"),
            );
            Val::error()
        };
        let mut out = t.clone();
        let shard = out
            .shard
            .get_or_insert_with(|| crate::ty::Shard::replicated(t.rank()));
        match name {
            "all_reduce" | "reduce_scatter" => {
                let Some(pos) = shard.partial.iter().position(|a| a == axis) else {
                    return unused(self, "a partial sum over");
                };
                shard.partial.remove(pos);
                if name == "reduce_scatter" {
                    let dim = int_param("dim").unwrap_or(0);
                    let r = t.rank() as i64;
                    if dim < -r || dim >= r {
                        self.error(
                            Diagnostic::error(
                                codes::E0206,
                                x.span,
                                format!("dim {dim} is out of range for rank {r}"),
                            )
                            .with_label("bad `dim`"),
                        );
                        return Val::error();
                    }
                    let d = if dim < 0 { dim + r } else { dim } as usize;
                    if shard.dims.iter().any(|a| a.as_ref() == Some(axis))
                        || shard.dims[d].is_some()
                    {
                        self.error(
                            Diagnostic::error(
                                codes::E0402,
                                axis_arg.span,
                                format!("cannot scatter over `{}` into dimension {d}", axis.axis),
                            )
                            .with_label("that dimension or axis is already split"),
                        );
                        return Val::error();
                    }
                    shard.dims[d] = Some(axis.clone());
                }
            }
            "all_gather" => {
                let Some(d) = shard.dims.iter().position(|a| a.as_ref() == Some(axis)) else {
                    return unused(self, "split over");
                };
                shard.dims[d] = None;
            }
            "all_to_all" => {
                let (split, concat) = (
                    int_param("split_dim").unwrap_or(0),
                    int_param("concat_dim").unwrap_or(0),
                );
                let r = t.rank() as i64;
                if !(0..r).contains(&split) || !(0..r).contains(&concat) {
                    self.error(
                        Diagnostic::error(codes::E0206, x.span, "all_to_all dims out of range")
                            .with_label(format!("rank is {r}")),
                    );
                    return Val::error();
                }
                if shard.dims[concat as usize].as_ref() != Some(axis) {
                    return unused(self, &format!("split along dimension {concat} over"));
                }
                shard.dims[concat as usize] = None;
                shard.dims[split as usize] = Some(axis.clone());
            }
            _ => {}
        }
        if out.shard.as_ref().is_some_and(|s| s.is_replicated()) && t.shard.is_none() {
            out.shard = None;
        }
        Val::of(Ty::Tensor(out))
    }
}

/// Whether two dim lists agree pairwise (equal, or not yet known).
pub(super) fn dims_agree(a: &[Dim], b: &[Dim]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.compatible(y))
}

/// `[0, 1]` as written.
fn axis_list(items: &[Const]) -> String {
    let parts: Vec<String> = items
        .iter()
        .map(|c| c.as_int().map_or("?".into(), |a| a.to_string()))
        .collect();
    format!("[{}]", parts.join(", "))
}

/// `v` with its tensor dtype replaced by `dtype`, when one is given
/// (`arange<fp32>(...)`).
fn retyped(v: Val, dtype: Option<Dtype>) -> Val {
    match (v.ty, dtype) {
        (Ty::Tensor(mut t), Some(d)) => {
            t.dtype = d;
            Val::of(Ty::Tensor(t))
        }
        (ty, _) => Val { ty, ..v },
    }
}

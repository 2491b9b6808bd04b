//! Calls: resolving the callee, binding arguments to parameters, and typing
//! calls of ops (instantiating generic ones), kernels and host fns.

use super::{Body, Cx, Local, Val};
use crate::table::{BodyKind, Callee, Entry, Lookup};
use crate::ty::{Const, Dim, TensorTy, Ty};
use std::collections::HashMap;
use tessera_diagnostics::{codes, Diagnostic, FileId, Label, Span};
use tessera_syntax::ast::{self, ArgKind, DimKind, ElemType, ExprKind, StmtKind, TypeKind};

/// One bound argument: its value and where it came from.
#[derive(Clone, Debug)]
pub(crate) struct Bound {
    pub val: Val,
    pub span: Span,
    /// The variable passed, if the argument is a plain name.
    pub name: Option<String>,
    /// For list literals: the type of each element, and the elements as
    /// dimensions if they all are.
    pub elems: Vec<Ty>,
    pub elem_dims: Option<Vec<Dim>>,
    /// For list literals: each element's constant value, if it has one.
    pub elem_consts: Vec<Option<Const>>,
    /// For list literals: the span of each element.
    pub elem_spans: Vec<Span>,
    /// Whether the value came from the parameter's default.
    pub defaulted: bool,
    /// Whether the argument was passed by position (not `name = value`).
    pub positional: bool,
}

/// Symbol bindings made while matching arguments to a signature.
#[derive(Default, Debug)]
pub(crate) struct Bindings {
    pub dims: HashMap<String, Dim>,
    pub packs: HashMap<String, Vec<Dim>>,
    pub dtypes: HashMap<String, ast::Dtype>,
}

/// A tensor parameter's declared parts, borrowed from its syntax.
struct TensorParam<'a> {
    p: &'a ast::Param,
    dims: &'a [ast::Dim],
    elem: &'a ElemType,
    shard: Option<&'a ast::ShardSpec>,
}

/// E0201: argument `arg` does not fit parameter `p` of `callee`, `what`
/// saying how.
fn param_mismatch(p: &ast::Param, arg: &Bound, callee: &str, what: String) -> Diagnostic {
    Diagnostic::error(
        codes::E0201,
        arg.span,
        format!(
            "argument `{}` of `{callee}` does not fit its parameter",
            p.name.text
        ),
    )
    .with_label(what)
    .with_secondary(p.ty.span, "parameter declared here")
}

/// Whether `p` is declared `bool` (a scalar attribute, not a tensor).
fn is_bool_attribute(p: &ast::Param) -> bool {
    matches!(
        &p.ty.kind,
        TypeKind::Tensor {
            dims,
            elem: ElemType::Dtype(ast::Dtype::Bool, _),
            shard: None,
        } if dims.is_empty()
    )
}

impl Cx<'_, '_> {
    pub(crate) fn call(
        &mut self,
        body: &mut Body,
        e: &ast::Expr,
        callee: &ast::Name,
        dtype_args: &[(ast::Dtype, Span)],
        args: &[ast::Arg],
    ) -> Val {
        let lookup = match body.local(&callee.text) {
            Some(local) if self.table.user_item(&callee.text).is_none() => Lookup::Missing(
                Diagnostic::error(
                    codes::E0103,
                    callee.span,
                    format!("`{}` is a variable, not a function", callee.text),
                )
                .with_label("called here")
                .with_secondary(local.span, "declared here"),
            ),
            _ => self.table.lookup(callee, body.kind, body.file),
        };
        let entry = match lookup {
            Lookup::Found(entry) => entry,
            Lookup::Missing(d) => {
                self.error(d);
                for a in args {
                    self.expr(body, &a.value);
                }
                return Val::error();
            }
        };
        if let Some(d) = self.call_context(body, &entry, callee) {
            self.error(d);
            return Val::error();
        }
        let creates = matches!(
            callee.text.as_str(),
            "randn" | "rand" | "zeros" | "ones" | "full" | "load_npy" | "arange"
        );
        if !dtype_args.is_empty() && !(entry.callee.is_extern() && creates) {
            let span = dtype_args[0].1.to(dtype_args[dtype_args.len() - 1].1);
            self.error(
                Diagnostic::error(
                    codes::E0111,
                    span,
                    format!("`{}` takes no dtype arguments", callee.text),
                )
                .with_label("remove these")
                .with_help("only tensor-creating builtins such as `zeros<fp32>(...)` take them"),
            );
        }
        if dtype_args.len() > 1 {
            self.error(
                Diagnostic::error(
                    codes::E0111,
                    dtype_args[1].1,
                    "only one dtype argument is accepted",
                )
                .with_label("extra dtype argument"),
            );
        }
        // Kernels are called with their inputs only and return their
        // outputs: values are never written into.
        let params: Vec<&ast::Param> = match entry.callee {
            Callee::Kernel(k) => {
                let inputs: Vec<&ast::Param> = k.params.iter().filter(|p| p.is_input()).collect();
                if let Some(d) = outputs_passed(k, &inputs, args) {
                    self.error(d);
                    return Val::error();
                }
                inputs
            }
            other => other.params().iter().collect(),
        };
        let Some(bound) = self.bind_args(body, &entry, &params, args, e.span, callee) else {
            return Val::error();
        };
        if bound.iter().any(|b| b.val.is_error()) {
            return Val::error();
        }
        // A primitive's `bool` attributes (`descending`, `keepdims`) take
        // booleans: its typing rules read them by value, so another value
        // would pass for the default.
        let is_extern = match entry.callee {
            Callee::Op(op) => op.body.is_none(),
            Callee::Fn(f) => f.body.is_none(),
            Callee::Kernel(_) => false,
        };
        if is_extern {
            for (p, arg) in params.iter().zip(&bound) {
                // (A mask takes a tile of booleans too.)
                let scalar = matches!(arg.val.ty, Ty::Int | Ty::Float | Ty::Str | Ty::List(_));
                if is_bool_attribute(p) && !arg.defaulted && scalar {
                    let what = format!("expected a boolean, found {}", arg.val.ty.describe());
                    self.error(param_mismatch(p, arg, &callee.text, what));
                    return Val::error();
                }
            }
        }
        let result = match entry.callee {
            Callee::Op(op) if op.body.is_none() => {
                let dtype = dtype_args.first().map(|d| d.0);
                self.builtin(body, &callee.text, &params, &bound, dtype, e.span)
            }
            Callee::Fn(f) if f.body.is_none() => {
                let dtype = dtype_args.first().map(|d| d.0);
                self.builtin(body, &callee.text, &params, &bound, dtype, e.span)
            }
            Callee::Op(op) => self.call_op(body, op, &entry, &params, &bound, e.span),
            Callee::Kernel(k) => self.call_signature(body, &params, &bound, &k.name.text).map_or(Val::error(), |b| {
                let outs: Vec<&ast::Param> = k.params.iter().filter(|p| p.is_output()).collect();
                match outs.as_slice() {
                    [one] => Val::of(self.result_type(&b, &one.ty)),
                    // `let (c, d) = k(a, b);`: one part per output.
                    several if self.tuple_call.is_some_and(|(s, _)| s == e.span) => {
                        let parts: Vec<Val> =
                            several.iter().map(|p| Val::of(self.result_type(&b, &p.ty))).collect();
                        self.tuple_parts = Some(parts);
                        Val::of(Ty::Unit)
                    }
                    _ => {
                        self.error(
                            Diagnostic::error(codes::E0104, e.span, format!("kernel `{}` has {} outputs", k.name.text, outs.len()))
                                .with_label("cannot return several outputs")
                                .with_help("bind them with `let (...)`, one name per output: `let (c, d) = k(a, b);`"),
                        );
                        Val::error()
                    }
                }
            }),
            Callee::Fn(f) => {
                self.runtime_args = body.kind == BodyKind::Host;
                let signature = self.call_signature(body, &params, &bound, &f.name.text);
                self.runtime_args = false;
                signature.map_or(Val::error(), |b| match &f.ret {
                    Some(ret) => Val::of(self.result_type(&b, ret)),
                    None => Val::of(Ty::Unit),
                })
            }
        };
        // An op's several results are bound by `let (...)` and nothing
        // else (not printed, passed on, or dropped by an expression
        // statement).
        if let Ty::Tuple(parts) = &result.ty {
            if !self.tuple_call.is_some_and(|(s, _)| s == e.span) {
                let n = parts.len();
                self.error(
                    Diagnostic::error(codes::E0211, e.span, format!("`{}` has {n} results", callee.text))
                        .with_label(format!("this is `{}`", result.ty))
                        .with_help(format!(
                            "bind them with `let (...)`, one name per result (`_` for one you drop): `let ({}) = ...;`",
                            (0..n).map(|i| format!("r{i}")).collect::<Vec<_>>().join(", ")
                        )),
                );
                return Val::error();
            }
        }
        result
    }

    /// Whether a callee of this kind may be called from this body.
    fn call_context(
        &self,
        body: &Body,
        entry: &Entry<'_>,
        callee: &ast::Name,
    ) -> Option<Diagnostic> {
        let user = entry.module.is_none();
        match (body.kind, entry.callee) {
            // Elementwise ops (a user's `leaky_relu`, std's `sigmoid`) run
            // inlined on tiles, as Triton's `@jit` helpers.
            (BodyKind::Kernel, Callee::Op(op)) if self.tile_safe(op, entry.file, 0) => None,
            (BodyKind::Kernel, c) if user || !c.is_extern() => Some(
                Diagnostic::error(
                    codes::E0109,
                    callee.span,
                    format!("kernels cannot call `{}`", callee.text),
                )
                .with_label("not a tile-level operation")
                .with_help(
                    "kernels call std.tile and std.core primitives, and ops whose bodies are `let`s and a `return` of elementwise math; call other ops from ops or host code",
                ),
            ),
            (BodyKind::Kernel, _) if OP_ONLY.contains(&callee.text.as_str()) => Some(
                Diagnostic::error(
                    codes::E0109,
                    callee.span,
                    format!("`{}` cannot be called in a kernel", callee.text),
                )
                .with_label("an operation on whole tensors, not on tiles")
                .with_help(
                    "call it in an op (ops fuse into kernels); in a kernel, `load` the pieces at the indices you need",
                ),
            ),
            (BodyKind::Op, Callee::Fn(f)) if f.body.is_some() => Some(
                Diagnostic::error(
                    codes::E0601,
                    callee.span,
                    format!("ops cannot call the host function `{}`", callee.text),
                )
                .with_label("host code")
                .with_help("call it from `fn main` instead"),
            ),
            _ => None,
        }
    }

    /// Whether op `op` may run inside a kernel, inlined on tiles: it has a
    /// body of `let`s and a `return` of elementwise math (operators,
    /// casts, the math functions, `maximum`, `minimum`, `pow`, `where`)
    /// and calls of other such ops.
    pub(crate) fn tile_safe(&self, op: &ast::OpDef, file: FileId, depth: usize) -> bool {
        const ELEMENTWISE: [&str; 19] = [
            "exp", "log", "sqrt", "rsqrt", "tanh", "erf", "abs", "sin", "cos", "exp2", "log2",
            "floor", "ceil", "round", "trunc", "pow", "maximum", "minimum", "where",
        ];
        let Some(block) = &op.body else {
            return false;
        };
        if depth > 8
            || !op
                .params
                .iter()
                .all(|p| p.default.is_none() || p.ty.is_attribute())
        {
            return false;
        }
        fn expr(cx: &Cx<'_, '_>, e: &ast::Expr, file: FileId, depth: usize) -> bool {
            match &e.kind {
                ExprKind::Int(_)
                | ExprKind::Float(_)
                | ExprKind::Bool(_)
                | ExprKind::Str(_)
                | ExprKind::Name(_) => true,
                ExprKind::Binary { .. } | ExprKind::Unary { .. } | ExprKind::Cast { .. } => e
                    .kind
                    .children()
                    .into_iter()
                    .all(|c| expr(cx, c, file, depth)),
                ExprKind::Call { callee, args, .. } => {
                    let callee_ok = ELEMENTWISE.contains(&callee.text.as_str())
                        || match cx.table.lookup(callee, BodyKind::Op, file) {
                            Lookup::Found(entry) => match entry.callee {
                                Callee::Op(op) => cx.tile_safe(op, entry.file, depth + 1),
                                _ => false,
                            },
                            Lookup::Missing(_) => false,
                        };
                    callee_ok && args.iter().all(|a| expr(cx, &a.value, file, depth))
                }
                _ => false,
            }
        }
        let n = block.stmts.len();
        block.stmts.iter().enumerate().all(|(i, s)| match &s.kind {
            StmtKind::Let { value, .. } => i + 1 < n && expr(self, value, file, depth),
            StmtKind::Return(Some(value)) => i + 1 == n && expr(self, value, file, depth),
            _ => false,
        })
    }

    /// Binds call arguments to parameters; evaluates them in the caller.
    fn bind_args(
        &mut self,
        body: &mut Body,
        entry: &Entry<'_>,
        params: &[&ast::Param],
        args: &[ast::Arg],
        span: Span,
        callee: &ast::Name,
    ) -> Option<Vec<Bound>> {
        let mut slots: Vec<Option<&ast::Arg>> = vec![None; params.len()];
        let mut ok = true;
        let mut next = 0;
        for arg in args {
            match &arg.kind {
                ArgKind::Positional => {
                    if next >= params.len() {
                        self.error(
                            Diagnostic::error(
                                codes::E0104,
                                arg.span,
                                format!("too many arguments to `{}`", callee.text),
                            )
                            .with_label(format!(
                                "`{}` takes {} arguments",
                                callee.text,
                                params.len()
                            ))
                            .with_help(format!("the signature is `{}`", entry.callee.signature())),
                        );
                        ok = false;
                        break;
                    }
                    slots[next] = Some(arg);
                    next += 1;
                }
                ArgKind::Named(name) => {
                    match params.iter().position(|p| p.name.text == name.text) {
                        Some(i) if slots[i].is_some() => {
                            self.error(
                                Diagnostic::error(
                                    codes::E0106,
                                    arg.span,
                                    format!("argument `{}` is given twice", name.text),
                                )
                                .with_label("given again here")
                                .with_secondary(
                                    slots[i].map_or(span, |a| a.span),
                                    "first given here",
                                ),
                            );
                            ok = false;
                        }
                        Some(i) => slots[i] = Some(arg),
                        None => {
                            let mut d = Diagnostic::error(
                                codes::E0105,
                                name.span,
                                format!("`{}` has no parameter `{}`", callee.text, name.text),
                            )
                            .with_label("unknown parameter");
                            if let Some(s) = crate::suggest::closest(
                                &name.text,
                                params.iter().map(|p| p.name.text.as_str()),
                            ) {
                                d = d.with_help(format!("did you mean `{s}`?"));
                            } else {
                                d = d.with_help(format!(
                                    "the signature is `{}`",
                                    entry.callee.signature()
                                ));
                            }
                            self.error(d);
                            ok = false;
                        }
                    }
                }
                ArgKind::In(name) => {
                    self.error(
                        Diagnostic::error(
                            codes::E0109,
                            arg.span,
                            "`in` arguments belong in `autotune(...)`",
                        )
                        .with_label(format!("write `{} = value`", name.text)),
                    );
                    ok = false;
                }
            }
        }
        let mut out = Vec::with_capacity(params.len());
        for (param, slot) in params.iter().zip(&slots) {
            match (slot, &param.default) {
                (Some(arg), _) => {
                    let name = match &arg.value.kind {
                        ast::ExprKind::Name(n) => Some(n.clone()),
                        _ => None,
                    };
                    let (val, elems, elem_dims, elem_consts) = match &arg.value.kind {
                        ast::ExprKind::List(items) => {
                            let (val, elems) = self.list(body, items);
                            self.record(body, &arg.value, &val.ty);
                            let consts = std::mem::take(&mut self.list_consts);
                            (val, elems, self.list_dims.take(), consts)
                        }
                        _ => (self.expr(body, &arg.value), Vec::new(), None, Vec::new()),
                    };
                    let elem_spans = match &arg.value.kind {
                        ast::ExprKind::List(items) => items.iter().map(|i| i.span).collect(),
                        _ => Vec::new(),
                    };
                    out.push(Bound {
                        val,
                        span: arg.value.span,
                        name,
                        elems,
                        elem_dims,
                        elem_consts,
                        elem_spans,
                        defaulted: false,
                        positional: matches!(arg.kind, ast::ArgKind::Positional),
                    });
                }
                (None, Some(default)) => {
                    let val = match super::items::const_literal(default) {
                        Some(c) => Val {
                            ty: match c {
                                Const::Int(_) => Ty::Int,
                                Const::Float(_) => Ty::Float,
                                Const::Bool(_) => Ty::Bool,
                                Const::List(_) => Ty::List(Box::new(Ty::Int)),
                                Const::Str(_) => Ty::Str,
                            },
                            dim: c
                                .as_int()
                                .and_then(|v| u64::try_from(v).ok())
                                .map(Dim::known),
                            konst: Some(c),
                        },
                        // An expression default (`scale: float = rsqrt(D)`)
                        // is evaluated with the callee's symbols bound; here
                        // it has its declared scalar type.
                        None => match param.ty.kind {
                            ast::TypeKind::Int => Val::of(Ty::Int),
                            ast::TypeKind::Float => Val::of(Ty::Float),
                            _ => Val::error(),
                        },
                    };
                    out.push(Bound {
                        val,
                        span,
                        name: None,
                        elems: Vec::new(),
                        elem_dims: None,
                        elem_consts: Vec::new(),
                        elem_spans: Vec::new(),
                        defaulted: true,
                        positional: false,
                    });
                }
                (None, None) => {
                    if ok {
                        self.error(
                            Diagnostic::error(
                                codes::E0104,
                                span,
                                format!(
                                    "missing argument `{}` of `{}`",
                                    param.name.text, callee.text
                                ),
                            )
                            .with_label(format!("`{}` is not passed", param.name.text))
                            .with_help(format!("the signature is `{}`", entry.callee.signature())),
                        );
                    }
                    ok = false;
                }
            }
        }
        if !ok {
            // Still type the arguments so their own errors are reported.
            return None;
        }
        Some(out)
    }

    /// Matches bound arguments against the parameter types of a non-generic
    /// signature, binding its dimension symbols.
    pub(crate) fn call_signature(
        &mut self,
        body: &Body,
        params: &[&ast::Param],
        bound: &[Bound],
        callee: &str,
    ) -> Option<Bindings> {
        let mut b = Bindings::default();
        let mut ok = true;
        // Scalars last: one passed for a tensor (`remainder(3, x)`) takes
        // the dtype the tensors give.
        let scalar = |a: &Bound| matches!(a.val.ty, Ty::Int | Ty::Float);
        let pairs = || params.iter().zip(bound);
        for (p, arg) in pairs()
            .filter(|(_, a)| !scalar(a))
            .chain(pairs().filter(|(_, a)| scalar(a)))
        {
            ok &= self.bind_param(body, p, arg, &mut b, callee);
        }
        ok.then_some(b)
    }

    /// Matches one argument against its parameter.
    fn bind_param(
        &mut self,
        body: &Body,
        p: &ast::Param,
        arg: &Bound,
        b: &mut Bindings,
        callee: &str,
    ) -> bool {
        let mismatch = |what: String| param_mismatch(p, arg, callee, what);
        match (&p.ty.kind, &arg.val.ty) {
            (_, Ty::Error) => true,
            (TypeKind::Tensor { dims, elem, shard }, Ty::Tensor(t) | Ty::Global(t)) => {
                let param = TensorParam {
                    p,
                    dims,
                    elem,
                    shard: shard.as_ref(),
                };
                self.bind_tensor(&param, arg, t, b, callee)
            }
            (
                TypeKind::Tensor {
                    dims,
                    elem: ElemType::Dtype(ast::Dtype::Bool, _),
                    shard: None,
                },
                ty,
            ) if dims.is_empty() => {
                if matches!(ty, Ty::Bool) {
                    true
                } else {
                    self.error(mismatch(format!(
                        "expected a boolean, found {}",
                        ty.describe()
                    )));
                    false
                }
            }
            (TypeKind::Tensor { dims, elem, .. }, Ty::Int | Ty::Float)
                if dims.is_empty()
                    || matches!(&dims[..], [d] if matches!(d.kind, DimKind::Pack(_))) =>
            {
                // A scalar where a rank-0 tensor is expected, or one of any
                // rank (`b: tensor<..R, T>`, whose pack is then empty).
                if let [ast::Dim {
                    kind: DimKind::Pack(pack),
                    ..
                }] = &dims[..]
                {
                    b.packs.entry(pack.clone()).or_default();
                }
                if let ElemType::Var(v) = elem {
                    let d = *b.dtypes.entry(v.text.clone()).or_insert(ast::Dtype::Fp32);
                    if d.is_int() && arg.val.ty == Ty::Float {
                        self.error(mismatch(format!(
                            "expected `{d}` (as `{}`), found a float",
                            v.text
                        )));
                        return false;
                    }
                }
                // An integer scalar takes integers its dtype holds: a
                // float is not truncated, nor a number out of range clamped.
                if let ElemType::Dtype(d, _) = elem {
                    if d.is_int() && arg.val.ty == Ty::Float {
                        self.error(mismatch(format!("expected `{d}`, found a float")));
                        return false;
                    }
                    let range = d.int_range();
                    if let (Some(Const::Int(k)), Some((lo, hi))) = (&arg.val.konst, range) {
                        if *k < lo || *k > hi {
                            self.error(mismatch(format!("{k} does not fit `{d}`")));
                            return false;
                        }
                    }
                }
                true
            }
            (TypeKind::Tensor { .. }, other) => {
                self.error(
                    Diagnostic::error(
                        codes::E0205,
                        arg.span,
                        format!("argument `{}` of `{callee}` must be a tensor", p.name.text),
                    )
                    .with_label(format!("this is {}", other.describe()))
                    .with_secondary(p.ty.span, "parameter declared here"),
                );
                false
            }
            (TypeKind::Int | TypeKind::Float, Ty::Int | Ty::Float) => {
                if p.ty.kind == TypeKind::Int && arg.val.ty == Ty::Float {
                    self.error(mismatch("expected an integer, found a float".into()));
                    return false;
                }
                // An `int` attribute is a size of the result type
                // (`tensor<B, H / p, fp32>`).
                if let (TypeKind::Int, Some(d)) = (&p.ty.kind, &arg.val.dim) {
                    b.dims
                        .entry(p.name.text.clone())
                        .or_insert_with(|| d.clone());
                }
                self.require_attr_const(body, p, arg, callee)
            }
            // In a kernel an op is inlined on tiles: a float attribute
            // may take a scalar known only when the kernel runs (`clamp(v,
            // lo, hi)` with `lo: fp32` parameters).
            (TypeKind::Float, Ty::Tensor(t))
                if body.kind == BodyKind::Kernel && t.dims.is_empty() && t.dtype.is_float() =>
            {
                true
            }
            (TypeKind::Int | TypeKind::Float, other) => {
                self.error(mismatch(format!(
                    "expected a number, found {}",
                    other.describe()
                )));
                false
            }
            (TypeKind::Named(n), Ty::Axis(_)) if n.text == "axis" => true,
            (TypeKind::Named(n), other) if n.text == "axis" => {
                self.error(
                    Diagnostic::error(
                        codes::E0211,
                        arg.span,
                        format!(
                            "argument `{}` of `{callee}` must be a mesh axis",
                            p.name.text
                        ),
                    )
                    .with_label(format!("this is {}", other.describe())),
                );
                false
            }
            (TypeKind::Str, Ty::Str) => self.require_attr_const(body, p, arg, callee),
            (TypeKind::List(_), Ty::List(_)) | (TypeKind::Named(_), _) => true,
            (_, other) => {
                self.error(mismatch(format!("this is {}", other.describe())));
                false
            }
        }
    }

    /// Matches a tensor argument `t` against a tensor parameter: rank,
    /// dimensions (binding symbols and packs), dtype, no pending partial sum,
    /// and the shard spec.
    fn bind_tensor(
        &mut self,
        param: &TensorParam<'_>,
        arg: &Bound,
        t: &TensorTy,
        b: &mut Bindings,
        callee: &str,
    ) -> bool {
        let p = param.p;
        if param.dims.is_empty()
            && matches!(param.elem, ElemType::Dtype(ast::Dtype::Bool, _))
            && param.shard.is_none()
        {
            // A `bool` attribute given a tensor.
            let what = format!("expected a boolean, found `{t}`");
            self.error(param_mismatch(p, arg, callee, what));
            return false;
        }
        self.bind_dims(param, arg, t, b, callee)
            && self.bind_dtype(param, arg, t, b, callee)
            && self.check_not_partial(arg, t, callee)
            && self.check_shard(param, arg, t)
    }

    /// The rank of `t` against the parameter's dimensions, then each
    /// dimension unified with its symbol (a pack takes the extra leading ones).
    fn bind_dims(
        &mut self,
        param: &TensorParam<'_>,
        arg: &Bound,
        t: &TensorTy,
        b: &mut Bindings,
        callee: &str,
    ) -> bool {
        let (p, dims) = (param.p, param.dims);
        let pack = dims.iter().position(|d| matches!(d.kind, DimKind::Pack(_)));
        let fixed = dims.len() - usize::from(pack.is_some());
        if t.rank() < fixed || (pack.is_none() && t.rank() != fixed) {
            let want = if pack.is_some() {
                format!("at least {fixed}")
            } else {
                fixed.to_string()
            };
            self.error(
                Diagnostic::error(
                    codes::E0202,
                    arg.span,
                    format!(
                        "argument `{}` of `{callee}` has rank {}, expected {want}",
                        p.name.text,
                        t.rank()
                    ),
                )
                .with_label(format!("this is `{t}`"))
                .with_secondary(p.ty.span, "parameter declared here"),
            );
            return false;
        }
        let extra = t.rank() - fixed;
        let mut j = 0;
        for d in dims {
            if let DimKind::Pack(name) = &d.kind {
                let got = t.dims[j..j + extra].to_vec();
                match b.packs.get(name) {
                    Some(prev)
                        if prev.len() != got.len()
                            || prev.iter().zip(&got).any(|(x, y)| !x.compatible(y)) =>
                    {
                        let what = format!(
                            "leading dimensions differ from an earlier argument's ({name})"
                        );
                        self.error(param_mismatch(p, arg, callee, what));
                        return false;
                    }
                    Some(_) => {}
                    None => {
                        b.packs.insert(name.clone(), got);
                    }
                }
                j += extra;
                continue;
            }
            let actual = &t.dims[j];
            let fits = self.unify_dim(d, actual, b);
            if !fits && d.symbols().is_empty() {
                // A literal or a kernel constant (its value in the type).
                let want = d
                    .eval(&|_| None)
                    .map_or("another size".to_owned(), |v| v.to_string());
                self.error(
                    Diagnostic::error(
                        codes::E0201,
                        arg.span,
                        format!("dimension {j} of argument `{}` is {actual}, expected {want}", p.name.text),
                    )
                    .with_label(format!("this is `{t}`"))
                    .with_secondary(d.span, format!("the type says {want}"))
                    .with_help("a literal or a kernel constant in a parameter's type is the size its argument must have"),
                );
                return false;
            } else if !fits {
                let shown = tessera_syntax::printer::dim_text(d);
                let value = self.dim_value(d, b);
                // Bound to a size of the caller's own name (`N` to `N`):
                // not worth an `N = N`.
                let value = value.map(|v| v.to_string());
                let same = value.as_deref() == Some(shown.as_str());
                let bound_to = match &value {
                    Some(v) if !same => format!(" = {v}"),
                    _ => String::new(),
                };
                let earlier = match value {
                    Some(v) if same => format!("the caller's `{v}`"),
                    Some(v) => v,
                    None => "another size".to_owned(),
                };
                self.error(
                    Diagnostic::error(
                        codes::E0201,
                        arg.span,
                        format!(
                            "dimension {j} of argument `{}` is {actual}, expected {shown}{bound_to}",
                            p.name.text
                        ),
                    )
                    .with_label(format!("this is `{t}`"))
                    .with_secondary(
                        d.span,
                        format!("`{shown}` is bound to {earlier} by an earlier argument"),
                    )
                    .with_help(format!(
                        "symbol dimensions must agree across all arguments of `{callee}`"
                    )),
                );
                return false;
            }
            j += 1;
        }
        true
    }

    /// The dtype of `t` against the parameter's (binding a dtype variable on
    /// its first use).
    fn bind_dtype(
        &mut self,
        param: &TensorParam<'_>,
        arg: &Bound,
        t: &TensorTy,
        b: &mut Bindings,
        callee: &str,
    ) -> bool {
        let p = param.p;
        let want = match param.elem {
            ElemType::Dtype(d, _) => *d,
            ElemType::Var(v) => match b.dtypes.get(&v.text) {
                Some(d) => *d,
                None => {
                    b.dtypes.insert(v.text.clone(), t.dtype);
                    return true;
                }
            },
        };
        if want == t.dtype {
            return true;
        }
        self.error(
            Diagnostic::error(
                codes::E0200,
                arg.span,
                format!(
                    "argument `{}` of `{callee}` is `{}`, expected `{want}`",
                    p.name.text, t.dtype
                ),
            )
            .with_label(format!("this is `{t}`"))
            .with_secondary(p.ty.span, "parameter declared here")
            .with_help(format!("convert it explicitly: `... as {want}`")),
        );
        false
    }

    /// A partial sum may not be passed on before it is combined.
    fn check_not_partial(&mut self, arg: &Bound, t: &TensorTy, callee: &str) -> bool {
        let Some(axis) = t.partial().first() else {
            return true;
        };
        self.error(
            Diagnostic::error(
                codes::E0403,
                arg.span,
                format!("partial sum over `{}` passed to `{callee}`", axis.axis),
            )
            .with_label("each device holds only a partial sum here")
            .with_help(format!(
                "combine it first: `all_reduce(..., {})`",
                axis.axis
            )),
        );
        false
    }

    /// The argument's sharding against the parameter's shard spec, where
    /// both are known.
    fn check_shard(&mut self, param: &TensorParam<'_>, arg: &Bound, t: &TensorTy) -> bool {
        let Some(spec) = param.shard else {
            return true;
        };
        let Some(want) =
            self.meshes
                .shard(spec, t.rank(), &mut tessera_diagnostics::Diagnostics::new())
        else {
            return true;
        };
        // A split dimension of known size must divide evenly over its axis.
        for (i, (w, d)) in want.dims.iter().zip(&t.dims).enumerate() {
            let (Some(axis), Some(n)) = (w, d.as_known()) else {
                continue;
            };
            if axis.size > 0 && n % axis.size != 0 {
                self.error(
                    Diagnostic::error(
                        codes::E0410,
                        arg.span,
                        format!(
                            "dimension {i} of argument `{}` has {n} elements, which `{}` ({} devices) cannot split evenly",
                            param.p.name.text, axis.axis, axis.size
                        ),
                    )
                    .with_label(format!("this is `{t}`"))
                    .with_secondary(spec.span, "split by this shard spec")
                    .with_help(format!(
                        "make dimension {i} a multiple of {}, or do not split it",
                        axis.size
                    )),
                );
                return false;
            }
        }
        let Some(actual) = &t.shard else {
            return true;
        };
        let shown =
            |x: &Option<crate::ty::AxisRef>| x.as_ref().map_or("_".to_owned(), |a| a.axis.clone());
        let Some((i, (w, a))) = want
            .dims
            .iter()
            .zip(&actual.dims)
            .enumerate()
            .find(|(_, (w, a))| a.is_some() && w != a)
        else {
            return true;
        };
        self.error(
            Diagnostic::error(
                codes::E0404,
                arg.span,
                format!(
                    "dimension {i} of argument `{}` is split over `{}`, expected `{}`",
                    param.p.name.text,
                    shown(a),
                    shown(w)
                ),
            )
            .with_secondary(spec.span, "expected by this shard spec"),
        );
        false
    }

    /// Op attributes must be compile-time constants.
    fn require_attr_const(
        &mut self,
        body: &Body,
        p: &ast::Param,
        arg: &Bound,
        callee: &str,
    ) -> bool {
        if body.kind == BodyKind::Op
            || self.runtime_args
            || arg.defaulted
            || arg.val.konst.is_some()
            || arg.val.dim.is_some()
        {
            return true;
        }
        self.error(
            Diagnostic::error(
                codes::E0208,
                arg.span,
                format!(
                    "attribute `{}` of `{callee}` must be a compile-time constant",
                    p.name.text
                ),
            )
            .with_label("this is only known at run time")
            .with_help("pass a literal, or a dimension of a tensor"),
        );
        false
    }

    fn unify_dim(&self, d: &ast::Dim, actual: &Dim, b: &mut Bindings) -> bool {
        match &d.kind {
            DimKind::Const(n) => actual.compatible(&Dim::known(*n)),
            DimKind::Sym(s) => match b.dims.get(s) {
                Some(prev) => prev.compatible(actual),
                None => {
                    b.dims.insert(s.clone(), actual.clone());
                    true
                }
            },
            _ => self.dim_value(d, b).is_none_or(|v| v.compatible(actual)),
        }
    }

    /// The value of a written dim under `b`, if all its symbols are bound.
    fn dim_value(&self, d: &ast::Dim, b: &Bindings) -> Option<Dim> {
        match &d.kind {
            DimKind::Const(n) => Some(Dim::known(*n)),
            DimKind::Sym(s) => b.dims.get(s).cloned(),
            DimKind::Pack(_) => None,
            DimKind::Mul(x, y) => self.dim_value(x, b)?.mul(&self.dim_value(y, b)?),
            DimKind::Add(x, y) => self.dim_value(x, b)?.add(&self.dim_value(y, b)?),
            DimKind::Sub(x, y) => self.dim_value(x, b)?.sub(&self.dim_value(y, b)?),
            DimKind::Div(x, k) => self.dim_value(x, b)?.div(*k),
            DimKind::Quot { dim, by, ceil } => {
                let (x, k) = (self.dim_value(dim, b)?, self.dim_value(by, b)?.as_known()?);
                if *ceil {
                    x.ceil_div(k)
                } else {
                    x.div(k)
                }
            }
        }
    }

    /// A declared result type with the call's bindings substituted.
    pub(crate) fn result_type(&mut self, b: &Bindings, ty: &ast::Type) -> Ty {
        let mut env = Body::new(BodyKind::Op, ty.span.file, "", Default::default());
        env.dims = b.dims.clone();
        env.packs = b.packs.clone();
        env.dtypes = b.dtypes.clone();
        self.lower_type(&env, ty, false)
    }

    /// A call of an op with a body.
    fn call_op(
        &mut self,
        body: &Body,
        op: &ast::OpDef,
        entry: &Entry<'_>,
        params: &[&ast::Param],
        bound: &[Bound],
        span: Span,
    ) -> Val {
        if self.recursive.contains(&op.name.text) {
            return Val::error();
        }
        if self.stack.contains(&op.name.text) {
            self.error(
                Diagnostic::error(
                    codes::E0107,
                    span,
                    format!("`{}` calls itself", op.name.text),
                )
                .with_label("recursive call")
                .with_note(format!(
                    "the call chain is {} -> {}",
                    self.stack.join(" -> "),
                    op.name.text
                ))
                .with_help("ops are inlined, so they cannot recurse"),
            );
            return Val::error();
        }
        let Some(mut b) = self.call_signature(body, params, bound, &op.name.text) else {
            return Val::error();
        };
        let resolved = self.expression_defaults(entry.file, params, bound, &mut b);
        let bound = &resolved[..];
        if !self.string_choices(op, entry.file, params, bound) {
            return Val::error();
        }
        // A dtype parameter bounded `float` takes float dtypes only.
        for g in &op.generics {
            let floats = g
                .bound
                .as_ref()
                .is_some_and(|t| matches!(t.kind, TypeKind::Float));
            match b.dtypes.get(&g.name.text) {
                Some(d) if floats && !d.is_float() => {
                    self.error(
                        Diagnostic::error(
                            codes::E0200,
                            span,
                            format!("`{}` takes float tensors, not `{d}`", op.name.text),
                        )
                        .with_label(format!("`{}` is `{d}` here", g.name.text))
                        .with_secondary(g.span, "bounded `float` here")
                        .with_help("convert first: `x as fp32`"),
                    );
                    return Val::error();
                }
                _ => {}
            }
        }
        let generic = !op.generics.is_empty() || entry.module.is_some();
        if !generic && op.ret.is_none() {
            // An op without a declared result type has the type its body
            // returns at the call's arguments. Its body's errors at every
            // size were reported where it is defined: not again here; but
            // those of this call's sizes only (6 channels that do not
            // split into 4 groups) are, beside the call.
            let outer = std::mem::take(self.diags);
            let v = self.instantiate(op, entry, params, bound, b, span);
            let inner = std::mem::replace(self.diags, outer);
            if !inner.has_errors() {
                return v;
            }
            let known = self.diags.as_slice();
            let fresh = inner.as_slice().iter().any(|d| {
                d.is_error()
                    && !known.contains(d)
                    && !(d.code == codes::E0201 && d.primary.span == span)
            });
            if fresh {
                self.diags.extend(inner.into_vec());
            }
            return Val::of(Ty::Error);
        }
        if !generic {
            return match &op.ret {
                Some(ret) => Val::of(self.result_type(&b, ret)),
                None => Val::of(Ty::Error),
            };
        }
        self.instantiate(op, entry, params, bound, b, span)
    }

    /// `bound` with each defaulted attribute whose default is an
    /// expression (`stride: int = kernel_size`, `scale: float = rsqrt(D)`)
    /// given its value at this call: the expression evaluated with the
    /// sizes `b` binds and the arguments before it. An `int` one with a
    /// constant value becomes a size of the result type, as a passed one is.
    fn expression_defaults(
        &mut self,
        file: FileId,
        params: &[&ast::Param],
        bound: &[Bound],
        b: &mut Bindings,
    ) -> Vec<Bound> {
        let mut out = bound.to_vec();
        let literal = |d: &ast::Expr| super::items::const_literal(d).is_some();
        if !(params.iter().zip(bound))
            .any(|(p, a)| a.defaulted && p.default.as_ref().is_some_and(|d| !literal(d)))
        {
            return out;
        }
        let mut env = Body::new(BodyKind::Op, file, "", Default::default());
        env.record = false;
        env.dims = b.dims.clone();
        for (p, arg) in params.iter().zip(out.iter_mut()) {
            if let Some(d) = p.default.as_ref().filter(|d| arg.defaulted && !literal(d)) {
                // Its errors were reported where the op is defined.
                let outer = std::mem::take(self.diags);
                let v = self.expr(&mut env, d);
                *self.diags = outer;
                if !v.is_error() {
                    if p.ty.kind == TypeKind::Int {
                        if let Some(k) = v.konst.as_ref().and_then(Const::as_int) {
                            let dim = u64::try_from(k).ok().map(Dim::known);
                            if let Some(d) = &dim {
                                b.dims.entry(p.name.text.clone()).or_insert(d.clone());
                                env.dims.entry(p.name.text.clone()).or_insert(d.clone());
                            }
                            arg.val = Val {
                                ty: Ty::Int,
                                dim,
                                konst: Some(Const::Int(k)),
                            };
                        }
                    } else if let Some(c @ (Const::Float(_) | Const::Int(_))) = &v.konst {
                        arg.val = Val {
                            ty: Ty::Float,
                            dim: None,
                            konst: Some(Const::Float(c.as_f64().unwrap_or_default())),
                        };
                    }
                }
            }
            env.bind(
                &p.name.text,
                Local {
                    val: arg.val.clone(),
                    mutable: false,
                    declared: false,
                    span: p.name.span,
                },
            );
        }
        out
    }

    /// Each `str` attribute passed to `op` must be its default or one of
    /// the strings its body compares it with (`mode == "reflect"`, see
    /// [`ast::OpDef::string_choices`]): another would silently take the
    /// body's fallback branch. E0201 at the argument, naming the choices.
    fn string_choices(
        &mut self,
        op: &ast::OpDef,
        file: FileId,
        params: &[&ast::Param],
        bound: &[Bound],
    ) -> bool {
        for (p, arg) in params.iter().zip(bound) {
            let Some(Const::Str(given)) = &arg.val.konst else {
                continue;
            };
            let Some(choices) = self.choices_of(op, p, file, 0) else {
                continue;
            };
            if choices.contains(given) {
                continue;
            }
            let listed: Vec<String> = choices.iter().map(|c| format!("{c:?}")).collect();
            self.error(
                Diagnostic::error(
                    codes::E0201,
                    arg.span,
                    format!("`{}` of `{}` is not {given:?}", p.name.text, op.name.text),
                )
                .with_label(format!("one of {}", listed.join(", ")))
                .with_secondary(p.span, "declared here"),
            );
            return false;
        }
        true
    }

    /// The values `str` attribute `p` of `op` may take, `None` for any:
    /// [`ast::OpDef::string_choices`], with those of the attributes of
    /// other ops it is passed on to (`_reduce_loss(l, reduction)`), any
    /// where one of them takes any.
    fn choices_of(
        &self,
        op: &ast::OpDef,
        p: &ast::Param,
        file: FileId,
        depth: usize,
    ) -> Option<Vec<String>> {
        let mut out = op.string_choices(p);
        let mut restricted = out.len() >= 2;
        for (callee, args) in op.calls_passing(&p.name.text) {
            let Lookup::Found(entry) = self.table.lookup(callee, BodyKind::Op, file) else {
                continue;
            };
            let Callee::Op(inner) = entry.callee else {
                continue;
            };
            let inner_params: Vec<&ast::Param> = inner.params.iter().collect();
            for (a, slot) in args.iter().zip(ast::arg_slots(&inner_params, args)) {
                let forwarded = matches!(&a.value.kind, ExprKind::Name(n) if *n == p.name.text);
                let Some(q) = slot.map(|i| inner_params[i]).filter(|_| forwarded) else {
                    continue;
                };
                if q.ty.kind != TypeKind::Str || depth > 8 {
                    continue;
                }
                for c in self.choices_of(inner, q, entry.file, depth + 1)? {
                    if !out.contains(&c) {
                        out.push(c);
                    }
                }
                restricted = true;
            }
        }
        restricted.then_some(out)
    }

    /// Checks a generic op's body on concrete argument types.
    fn instantiate(
        &mut self,
        op: &ast::OpDef,
        entry: &Entry<'_>,
        params: &[&ast::Param],
        bound: &[Bound],
        b: Bindings,
        span: Span,
    ) -> Val {
        let key_args: Vec<String> = bound
            .iter()
            .map(|a| {
                // An `int` is known by its value, or else by the size it
                // is (`_adaptive_windows(L, n)` of two different `L`s).
                let value = match (&a.val.konst, &a.val.dim) {
                    (Some(c), _) => c.to_string(),
                    (None, Some(d)) => format!("dim {d}"),
                    (None, None) => String::new(),
                };
                format!("{}={value}", a.val.ty)
            })
            .collect();
        let key = (op.name.text.clone(), key_args.join(";"));
        if let Some(ty) = self.inst_cache.get(&key) {
            return Val::of(ty.clone());
        }
        let numerics = self
            .file_numerics
            .get(&entry.file)
            .copied()
            .unwrap_or_default();
        let mut inner = Body::new(BodyKind::Op, entry.file, &op.name.text, numerics);
        inner.record = false;
        inner.dims = b.dims.clone();
        inner.packs = b.packs.clone();
        inner.dtypes = b.dtypes.clone();
        for (p, arg) in params.iter().zip(bound) {
            inner.bind(
                &p.name.text,
                Local {
                    val: arg.val.clone(),
                    mutable: false,
                    declared: false,
                    span: p.name.span,
                },
            );
        }
        let declared = op.ret.as_ref().map(|r| (self.result_type(&b, r), r.span));
        inner.ret = declared.clone();
        let first = self.diags.mark().0;
        self.stack.push(op.name.text.clone());
        self.sites.push(span);
        let failed = std::mem::replace(&mut self.failed_assert, false);
        if let Some(block) = &op.body {
            self.block(&mut inner, block);
        }
        self.failed_assert = failed;
        self.sites.pop();
        self.stack.pop();
        let std_call = self.table.is_std(span.file);
        if !std_call && self.table.is_std(op.span.file) {
            // A stdlib body's errors at these arguments (`softmax(x, axis
            // = 2)` of a matrix) are the user's: reported at the call,
            // with the line of the library that refused them beside it.
            let table = &self.table;
            for d in self.diags.since_mut(first) {
                if table.is_std(d.primary.span.file) {
                    let at = Label {
                        span,
                        message: format!("in this call of `{}`", op.name.text),
                    };
                    let inner = std::mem::replace(&mut d.primary, at);
                    d.secondary.insert(0, inner);
                }
            }
            // Once at the call, an error the body makes twice (both of
            // logsumexp's reductions along the axis) is one.
            let mut seen = Vec::new();
            self.diags.retain_since(first, |d| {
                let key = (d.code, d.message.clone(), d.primary.span);
                let fresh = !seen.contains(&key);
                seen.push(key);
                fresh
            });
        }
        // Errors all at the call itself (a stdlib assert's) need no
        // pointer to it, nor do a stdlib call's errors at the user's call
        // that led to it.
        let elsewhere = self.diags.as_slice()[first..].iter().any(|d| {
            d.is_error()
                && d.primary.span != span
                && !(std_call && !self.table.is_std(d.primary.span.file))
        });
        if elsewhere {
            self.error(
                Diagnostic::error(
                    codes::E0201,
                    span,
                    format!("`{}` cannot be applied to these arguments", op.name.text),
                )
                .with_label("in this call")
                .with_note("the errors in its body are reported beside this one"),
            );
        }
        let result = match (declared, inner.returns.first()) {
            (Some((Ty::Error, _)) | None, Some(actual)) => actual.clone(),
            (Some((ty, _)), Some(Ty::Tensor(actual))) => match ty {
                // Keep the declared shape but the propagated shard spec.
                Ty::Tensor(mut t) => {
                    t.shard = actual.shard.clone();
                    Ty::Tensor(t)
                }
                other => other,
            },
            (Some((ty, _)), _) => ty,
            (None, None) => Ty::Error,
        };
        self.inst_cache.insert(key, result.clone());
        Val::of(result)
    }
}

/// Builds a tensor value.
pub(crate) fn tensor(dims: Vec<Dim>, dtype: ast::Dtype) -> Val {
    Val::of(Ty::Tensor(TensorTy::new(dims, dtype)))
}

/// The std.core operations only ops may call: they select or rearrange
/// elements of whole tensors by index, which tiles (values held in
/// registers, addressed only through their layout) cannot do.
const OP_ONLY: [&str; 18] = [
    "einsum",
    "topk",
    "topk_indices",
    "concat",
    "stack",
    "gather",
    "take",
    "split",
    "chunk",
    "scatter_add",
    "index_add",
    "bincount",
    "flip",
    "scatter",
    "index_copy",
    "roll",
    "repeat_interleave",
    "repeat",
];

/// E0104 for a kernel call that passes the kernel's `out` parameters too
/// (Triton's `k(x, out)`): a kernel takes its inputs and returns its
/// outputs; host values are never written into.
fn outputs_passed(
    k: &ast::KernelDef,
    inputs: &[&ast::Param],
    args: &[ast::Arg],
) -> Option<Diagnostic> {
    let positional: Vec<&ast::Arg> = args
        .iter()
        .filter(|a| a.kind == ArgKind::Positional)
        .collect();
    let named_out = args.iter().find(|a| match &a.kind {
        ArgKind::Named(n) => k
            .params
            .iter()
            .any(|p| p.mode == ast::ParamMode::Out && p.name.text == n.text),
        ArgKind::Positional | ArgKind::In(_) => false,
    });
    let outs: Vec<&str> = k
        .params
        .iter()
        .filter(|p| p.mode == ast::ParamMode::Out)
        .map(|p| p.name.text.as_str())
        .collect();
    let span = match named_out {
        Some(a) => a.span,
        None if positional.len() > inputs.len() && positional.len() <= k.params.len() => positional
            [inputs.len()]
        .span
        .to(positional[positional.len() - 1].span),
        None => return None,
    };
    let names = outs
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let result = if outs.len() == 1 {
        format!("let {} = {}(...);", outs[0], k.name.text)
    } else {
        format!("let ({}) = {}(...);", outs.join(", "), k.name.text)
    };
    Some(
        Diagnostic::error(
            codes::E0104,
            span,
            format!(
                "kernel `{}` is called with its output{} too",
                k.name.text,
                if outs.len() == 1 { "" } else { "s" }
            ),
        )
        .with_label(format!(
            "{names} {} `out` parameter{} of `{}`, not an input",
            if outs.len() == 1 { "is an" } else { "are" },
            if outs.len() == 1 { "" } else { "s" },
            k.name.text
        ))
        .with_help(format!(
            "a kernel takes its {} input{} and returns its output{}, allocated with the \
             shape its type declares; values are never written into: `{result}`",
            inputs.len(),
            if inputs.len() == 1 { "" } else { "s" },
            if outs.len() == 1 { "" } else { "s" },
        )),
    )
}

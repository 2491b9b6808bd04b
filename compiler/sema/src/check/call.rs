//! Calls: resolving the callee, binding arguments to parameters, and typing
//! calls of ops (instantiating generic ones), kernels and host fns.

use super::bind::{is_bool_attribute, param_mismatch, Bindings, Bound};
use super::{Body, Cx, Local, Val};
use crate::table::{BodyKind, Callee, Entry, Lookup};
use crate::ty::{Const, Dim, TensorTy, Ty};
use tessera_diagnostics::{codes, Diagnostic, FileId, Label, Span};
use tessera_syntax::ast::{self, ArgKind, ExprKind, StmtKind, TypeKind};

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
        if e.kind.is_method_call() {
            self.whole_reduction_hint(callee, args, &bound);
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

    /// W0211 for a call written as a method: torch's `x.sum()` reduces
    /// every element; ours, without an axis, the last one. On a tensor of
    /// rank 2 or more it is most likely ported code that means the total.
    fn whole_reduction_hint(&mut self, callee: &ast::Name, args: &[ast::Arg], bound: &[Bound]) {
        const REDUCTIONS: &[&str] = &[
            "sum",
            "mean",
            "max",
            "min",
            "prod",
            "amax",
            "amin",
            "argmax",
            "argmin",
            "all",
            "any",
            "var",
            "std",
            "norm",
            "logsumexp",
            "median",
            "nansum",
            "nanmean",
        ];
        let axis_given = args[1..].iter().any(|a| match &a.kind {
            ArgKind::Positional => true,
            ArgKind::Named(n) => n.text == "axis" || n.text == "dim",
            ArgKind::In(_) => false,
        });
        let rank = bound
            .first()
            .and_then(|b| b.val.ty.tensor())
            .map(|t| t.rank());
        if axis_given
            || !REDUCTIONS.contains(&callee.text.as_str())
            || rank.is_none_or(|r| r < 2)
            || self.table.is_std(callee.span.file)
        {
            return;
        }
        let name = &callee.text;
        self.diags.push(
            Diagnostic::warning(
                codes::W0211,
                callee.span,
                format!("`.{name}()` without an axis reduces the last axis only"),
            )
            .with_label(format!("a {}-d tensor's last axis", rank.unwrap_or(0)))
            .with_help(format!(
                "torch's and numpy's `.{name}()` reduce every element: write the axes \
                 (`axis = [{}]`), or `axis = -1` for the last one",
                (0..rank.unwrap_or(0))
                    .map(|i| i.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        );
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

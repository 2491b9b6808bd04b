//! Checking statements: bindings, assignment, control flow and returns.

use super::{Body, Cx, Local, Val};
use crate::table::BodyKind;
use crate::ty::{Const, Ty};
use tessera_diagnostics::{codes, Diagnostic, Span};
use tessera_syntax::ast::{self, AssignOp, BinOp, StmtKind};

impl Cx<'_, '_> {
    /// Checks a block in a new scope.
    pub(crate) fn block(&mut self, body: &mut Body, block: &ast::Block) {
        body.scopes.push(Default::default());
        for stmt in &block.stmts {
            self.stmt(body, stmt);
            if self.failed_assert {
                break;
            }
        }
        body.scopes.pop();
    }

    fn stmt(&mut self, body: &mut Body, stmt: &ast::Stmt) {
        match &stmt.kind {
            StmtKind::Let {
                mutable,
                name,
                ty,
                value,
            } => {
                let mut val = self.expr(body, value);
                if let Some(ty) = ty {
                    let declared = self.lower_type(body, ty, false);
                    self.expect_ty(&val.ty, &declared, value.span, ty.span, codes::E0211);
                    if !matches!(declared, Ty::Error) {
                        val.ty = declared;
                    }
                }
                if *mutable && body.kind == BodyKind::Op {
                    self.error(
                        Diagnostic::error(
                            codes::E0108,
                            name.span,
                            "ops cannot have mutable variables",
                        )
                        .with_label("declared `mut` here")
                        .with_help("ops are pure: bind each new value with its own `let`"),
                    );
                }
                if *mutable {
                    // A mutable variable's value is not a constant.
                    val.konst = None;
                    val.dim = None;
                }
                if body.kind == BodyKind::Kernel {
                    let runtime = val.ty.tensor().is_some() || mentions(value, &body.runtime);
                    body.mark_runtime(&name.text, runtime);
                }
                body.bind(
                    &name.text,
                    Local {
                        val,
                        mutable: *mutable,
                        declared: ty.is_some(),
                        span: name.span,
                    },
                );
            }
            StmtKind::LetTuple { names, value } => self.let_tuple(body, names, value),
            StmtKind::Assign { target, op, value } => {
                self.assign(body, target, *op, value, stmt.span)
            }
            StmtKind::Return(value) => self.ret(body, value.as_ref(), stmt.span),
            StmtKind::Expr(e) => {
                self.expr(body, e);
            }
            StmtKind::If {
                branches,
                otherwise,
            } => {
                if body.kind == BodyKind::Op {
                    self.error(
                        Diagnostic::error(codes::E0109, stmt.span, "ops cannot branch")
                            .with_label("`if` in an op")
                            .with_help("select elementwise with `where(cond, a, b)`"),
                    );
                }
                // In kernels, a branch on a value known only at run time
                // (a scalar parameter, a program id, a loaded scalar) makes
                // what its arms assign run-time values too.
                let mut runtime = false;
                for (cond, block) in branches {
                    let c = self.expr(body, cond);
                    runtime |= body.kind == BodyKind::Kernel
                        && (c.ty.tensor().is_some() || mentions(cond, &body.runtime));
                    let ok = c.ty.is_truth();
                    if !ok {
                        let mut d = Diagnostic::error(
                            codes::E0211,
                            cond.span,
                            "condition is not a boolean",
                        )
                        .with_label(format!("this is {}", c.ty.describe()));
                        if matches!(&c.ty, Ty::Tensor(t) if !t.dims.is_empty()) {
                            d = d.with_help(
                                "`if` tests one boolean scalar; for a tile, select with \
                                 `where(cond, a, b)` or pass the condition as a `mask`",
                            );
                        }
                        self.error(d);
                    }
                    body.branches += usize::from(runtime);
                    self.block(body, block);
                    body.branches -= usize::from(runtime);
                }
                if let Some(block) = otherwise {
                    body.branches += usize::from(runtime);
                    self.block(body, block);
                    body.branches -= usize::from(runtime);
                }
            }
            StmtKind::For {
                var,
                start,
                end,
                step,
                body: block,
            } => {
                if body.kind == BodyKind::Op {
                    self.error(
                        Diagnostic::error(codes::E0109, stmt.span, "ops cannot loop")
                            .with_label("`for` in an op")
                            .with_help(
                                "express the computation with tensor operations, or write a kernel",
                            ),
                    );
                }
                for bound in [start, end] {
                    let v = self.expr(body, bound);
                    // In kernels, a run-time integer scalar (a parameter
                    // `n: int32`, a length loaded from a tensor) bounds a
                    // loop too, as in Triton's `range(0, seqlen)`; in host
                    // code a rank-0 integer tensor (a count, `sum(mask)`).
                    let ok = match body.kind {
                        BodyKind::Op => matches!(v.ty, Ty::Int | Ty::Error),
                        _ => v.ty.is_one_int(),
                    };
                    if !ok {
                        self.error(
                            Diagnostic::error(
                                codes::E0211,
                                bound.span,
                                "loop bounds must be integers",
                            )
                            .with_label(format!("this is {}", v.ty.describe())),
                        );
                    }
                }
                if let Some(step) = step {
                    self.loop_step(body, step);
                }
                body.scopes.push(Default::default());
                body.bind(
                    &var.text,
                    Local {
                        val: Val::of(Ty::Int),
                        mutable: false,
                        declared: false,
                        span: var.span,
                    },
                );
                body.mark_runtime(&var.text, true);
                self.loop_body(body, block);
                body.scopes.pop();
            }
            StmtKind::While { cond, body: block } => self.while_loop(body, cond, block, stmt.span),
            StmtKind::Break | StmtKind::Continue => {
                let word = if matches!(stmt.kind, StmtKind::Break) {
                    "break"
                } else {
                    "continue"
                };
                let help = match body.kind {
                    BodyKind::Kernel => Some(
                        "a kernel's loops run to their end (their trip counts are known at \
                         launch): guard the rest of the body with `if`, or bound the loop",
                    ),
                    BodyKind::Op => Some("ops have no loops: express it with tensor operations"),
                    _ if body.loops == 0 => None,
                    _ => return,
                };
                let mut d = Diagnostic::error(codes::E0109, stmt.span, format!("`{word}` here"));
                d = match help {
                    Some(help) => d
                        .with_label(format!("`{word}` is for loops of host code"))
                        .with_help(help),
                    None => d.with_label("outside a loop"),
                };
                self.error(d);
            }
            StmtKind::Numerics(_) | StmtKind::Empty | StmtKind::Error => {}
        }
    }

    /// `let (a, b, ...) = call;`: binds each part of a call with several
    /// results (`split`, `chunk`, `topk`, a kernel with several outputs)
    /// to its name, `_` to none. In ops and host code: kernels hold tiles,
    /// which these calls do not cut.
    fn let_tuple(&mut self, body: &mut Body, names: &[ast::Name], value: &ast::Expr) {
        if body.kind == BodyKind::Kernel {
            self.error(
                Diagnostic::error(
                    codes::E0109,
                    value.span,
                    "`let (...) = ...` binds the parts of a call with several results; this is a kernel",
                )
                .with_label("several results are for ops and host code")
                .with_help(
                    "call `split`, `chunk` or `topk` in an op and pass the parts to the kernel; \
                     in a kernel, `max` and `argmax` give a tile's largest element and its index, \
                     and `load` with an offset reads a part",
                ),
            );
            for name in names.iter().filter(|n| n.text != "_") {
                let local = Local {
                    val: Val::error(),
                    mutable: false,
                    declared: false,
                    span: name.span,
                };
                body.bind(&name.text, local);
            }
            return;
        }
        for (i, name) in names.iter().enumerate().filter(|(_, n)| n.text != "_") {
            if let Some(first) = names[..i].iter().find(|n| n.text == name.text) {
                self.error(
                    Diagnostic::error(
                        codes::E0101,
                        name.span,
                        format!("`{}` is bound twice in this `let`", name.text),
                    )
                    .with_label("bound again here")
                    .with_secondary(first.span, "first bound here")
                    .with_help("give each part its own name, or `_` to drop it"),
                );
            }
        }
        let outer = self.tuple_call.replace((value.span, names.len()));
        let v = self.expr(body, value);
        self.tuple_call = outer;
        let from_op = match &v.ty {
            Ty::Tuple(parts) => Some(parts.iter().cloned().map(Val::of).collect()),
            _ => None,
        };
        let parts = match self.tuple_parts.take().or(from_op) {
            Some(parts) if parts.len() == names.len() => parts,
            Some(parts) => {
                self.error(
                    Diagnostic::error(
                        codes::E0211,
                        value.span,
                        format!("{} names for {} parts", names.len(), parts.len()),
                    )
                    .with_label(format!("this gives {} tensors", parts.len()))
                    .with_help("write one name per part (`_` for a part you drop)"),
                );
                Vec::new()
            }
            None => {
                if !v.is_error() {
                    self.error(
                        Diagnostic::error(
                            codes::E0211,
                            value.span,
                            "`let (...) = ...` binds the parts of a call with several results",
                        )
                        .with_label(format!("this is {}", v.ty.describe()))
                        .with_help("`split`, `chunk`, `topk`, kernels with several outputs and ops with several results give several tensors"),
                    );
                }
                Vec::new()
            }
        };
        let mut parts = parts.into_iter();
        for name in names {
            let val = parts.next().unwrap_or_else(Val::error);
            if name.text == "_" {
                continue;
            }
            body.bind(
                &name.text,
                Local {
                    val,
                    mutable: false,
                    declared: false,
                    span: name.span,
                },
            );
        }
    }

    fn assign(
        &mut self,
        body: &mut Body,
        target: &ast::Name,
        op: AssignOp,
        value: &ast::Expr,
        span: Span,
    ) {
        let rhs = self.expr(body, value);
        if body.kind == BodyKind::Kernel
            && (body.loops > 0
                || body.branches > 0
                || rhs.ty.tensor().is_some()
                || mentions(value, &body.runtime))
        {
            body.mark_runtime(&target.text, true);
        }
        let Some(local) = body.local(&target.text).cloned() else {
            self.unresolved(body, target);
            return;
        };
        if body.kind == BodyKind::Op || !local.mutable {
            let mut d = Diagnostic::error(
                codes::E0108,
                target.span,
                format!(
                    "cannot assign twice to immutable variable `{}`",
                    target.text
                ),
            )
            .with_label("assigned here")
            .with_secondary(local.span, "declared here");
            d = if body.kind == BodyKind::Op {
                d.with_help("ops are pure: bind the new value with `let`")
            } else {
                d.with_help(format!("declare it `let mut {}`", target.text))
            };
            self.error(d);
            return;
        }
        let new = match op {
            AssignOp::Set => rhs,
            _ => {
                let bin = match op {
                    AssignOp::Add => BinOp::Add,
                    AssignOp::Sub => BinOp::Sub,
                    AssignOp::Mul => BinOp::Mul,
                    _ => BinOp::Div,
                };
                self.binary_vals(
                    body,
                    bin,
                    local.val.clone(),
                    rhs,
                    span,
                    target.span,
                    value.span,
                )
            }
        };
        // In a kernel, a number (`let mut total = 0.0;`) takes the dtype
        // of the run-time scalar first assigned to it (`total += sum(t)`);
        // in host code it stays a number.
        if let (Ty::Float | Ty::Int, Ty::Tensor(t)) = (&local.val.ty, &new.ty) {
            let kind_fits = if local.val.ty == Ty::Float {
                t.dtype.is_float()
            } else {
                !t.dtype.is_float() && t.dtype != ast::Dtype::Bool
            };
            if body.kind == BodyKind::Kernel && t.rank() == 0 && kind_fits {
                if let Some(l) = body.local_mut(&target.text) {
                    l.val = Val::of(new.ty.clone());
                }
                return;
            }
            // In host code the number stays a number: a one-element
            // tensor's value is read into it (`total += x[r, 0]`, as
            // Python's `total += x[r, 0].item()`).
            if body.kind == BodyKind::Host && t.rank() == 0 && kind_fits {
                return;
            }
        }
        // And a run-time scalar takes a number (`l = 5;` clamping a loaded
        // length), converted to its dtype as `as` does.
        if let (Ty::Tensor(t), Ty::Float | Ty::Int) = (&local.val.ty, &new.ty) {
            let fits = new.ty == Ty::Int || t.dtype.is_float();
            if body.kind == BodyKind::Kernel && t.rank() == 0 && fits && t.dtype != ast::Dtype::Bool
            {
                return;
            }
        }
        // In host code a tensor variable may take a tensor of other sizes
        // (`hs = concat([hs, h[None]])` growing one step per iteration):
        // the sizes that differ become known only at run time.
        if let (Ty::Tensor(old), Ty::Tensor(t)) = (&local.val.ty, &new.ty) {
            if body.kind == BodyKind::Host
                && !local.declared
                && old.rank() == t.rank()
                && old.dtype == t.dtype
                && old.dims != t.dims
            {
                let mut wide = old.clone();
                for (d, n) in wide.dims.iter_mut().zip(&t.dims) {
                    if d != n {
                        *d = crate::Dim::Unknown;
                    }
                }
                if let Some(l) = body.local_mut(&target.text) {
                    l.val = Val::of(Ty::Tensor(wide));
                }
                return;
            }
        }
        self.expect_ty(&new.ty, &local.val.ty, value.span, local.span, codes::E0211);
    }

    /// A loop's body, checked as often as its variables' sizes need.
    fn loop_body(&mut self, body: &mut Body, block: &ast::Block) {
        body.loops += 1;
        let before = (body.kind == BodyKind::Host).then(|| body.tensor_types());
        let mark = self.diags.mark();
        self.block(body, block);
        // A host variable that took other sizes in the body holds them
        // from the second iteration on: the body is checked again with the
        // sizes that vary unknown, in place of what the first check found.
        if before.is_some_and(|b| b != body.tensor_types()) {
            self.diags.rewind(mark);
            self.block(body, block);
        }
        body.loops -= 1;
    }

    /// `while cond { ... }`: host code only. A kernel's loops have trip
    /// counts known at launch, and ops do not loop (E0109).
    fn while_loop(&mut self, body: &mut Body, cond: &ast::Expr, block: &ast::Block, span: Span) {
        let help = match body.kind {
            BodyKind::Op => Some(
                "ops do not loop: express the computation with tensor operations, or write \
                 a kernel",
            ),
            BodyKind::Kernel => Some(
                "a kernel's loops have trip counts known at launch: loop `for i in 0..LIMIT` \
                 and guard the body with `if`, or compute the count first (a `for` bound \
                 may be a run-time scalar)",
            ),
            _ => None,
        };
        if let Some(help) = help {
            self.error(
                Diagnostic::error(codes::E0109, span, "`while` is for host code")
                    .with_label("`while` here")
                    .with_help(help),
            );
        }
        let c = self.expr(body, cond);
        if !c.ty.is_truth() {
            self.error(
                Diagnostic::error(codes::E0211, cond.span, "condition is not a boolean")
                    .with_label(format!("this is {}", c.ty.describe())),
            );
        }
        body.scopes.push(Default::default());
        self.loop_body(body, block);
        body.scopes.pop();
    }

    /// A loop's `step S`: a positive integer known when the code is
    /// compiled (a literal, a kernel constant), so that every loop ends;
    /// in kernels also an integer known only at run time (`num_programs(0)`,
    /// a scalar parameter), which the run checks is positive.
    fn loop_step(&mut self, body: &mut Body, step: &ast::Expr) {
        let v = self.expr(body, step);
        let kernel = body.kind == BodyKind::Kernel;
        match (&v.ty, &v.konst) {
            (Ty::Error, _) => {}
            (Ty::Int, Some(Const::Int(n))) if *n > 0 => {}
            (Ty::Int, None) if kernel => {}
            (Ty::Tensor(t), _) if kernel && t.dims.is_empty() && t.dtype.is_int() => {}
            (Ty::Int, Some(Const::Int(n))) => self.error(
                Diagnostic::error(codes::E0201, step.span, format!("a loop step of {n}"))
                    .with_label("must be positive")
                    .with_help("count down with an index: `for k in 0..n { let i = n - 1 - k; ... }`"),
            ),
            _ => self.error(
                Diagnostic::error(
                    codes::E0208,
                    step.span,
                    if kernel {
                        "a loop step must be an integer"
                    } else {
                        "a loop step must be an integer known at compile time"
                    },
                )
                .with_label(format!("this is {}", v.ty.describe()))
                .with_help(if kernel {
                    "a kernel's loop steps by an integer: a number, a kernel constant (`step NUM_SMS`) or a run-time integer scalar (`step num_programs(0)`)"
                } else {
                    "write a number (host loops step by compile-time constants; a kernel's may step by a run-time integer); for a run-time stride, loop over `cdiv(end - start, s)` and compute the index"
                }),
            ),
        }
    }

    fn ret(&mut self, body: &mut Body, value: Option<&ast::Expr>, span: Span) {
        if let Some(ast::Expr {
            kind: ast::ExprKind::Tuple(items),
            span: at,
            ..
        }) = value
        {
            return self.ret_several(body, items, *at);
        }
        if let (Some(v), Some((Ty::Tuple(parts), ret_span))) = (value, &body.ret) {
            let n = parts.len();
            let ret_span = *ret_span;
            let val = self.expr(body, v);
            if !val.is_error() {
                self.error(
                    Diagnostic::error(codes::E0204, v.span, format!("the op has {n} results"))
                        .with_label(format!("this is {}", val.ty.describe()))
                        .with_secondary(ret_span, format!("{n} results are declared"))
                        .with_help(match v.kind.as_call() {
                            // A call with several results is bound first.
                            Some((callee, _, _)) => format!(
                                "return them together: bind the parts first, `let (a, b) = {}(...);`, then `return (a, b);`",
                                callee.text
                            ),
                            None => "return them together: `return (a, b);`".to_owned(),
                        }),
                );
            }
            body.returns.push(Ty::Error);
            return;
        }
        let val = value.map(|v| self.expr(body, v));
        if body.kind == BodyKind::Kernel {
            if let Some(v) = value {
                self.error(
                    Diagnostic::error(codes::E0109, v.span, "kernels do not return values")
                        .with_label("returned here")
                        .with_help("store results into an `out` parameter"),
                );
            } else if body.loops > 0 {
                self.error(
                    Diagnostic::error(codes::E0109, span, "a kernel returns early only outside loops")
                        .with_label("`return` inside a `for` loop")
                        .with_help(
                            "end the program before or after the loop, or mask the loop's loads and stores",
                        ),
                );
            }
            return;
        }
        let Some(val) = val else {
            if let Some((_, ret_span)) = &body.ret {
                self.error(
                    Diagnostic::error(codes::E0204, span, "missing return value")
                        .with_label("returns nothing")
                        .with_secondary(*ret_span, "a result of this type is declared"),
                );
            }
            return;
        };
        let value = value.map_or(span, |v| v.span);
        if let Ty::Tensor(t) = &val.ty {
            if !t.partial().is_empty() && body.kind == BodyKind::Op {
                let axis = t.partial()[0].axis.clone();
                let declared_split =
                    body.ret
                        .as_ref()
                        .and_then(|(ty, _)| ty.tensor())
                        .and_then(|r| {
                            (0..r.rank()).find(|&i| r.dim_axis(i).is_some_and(|a| a.axis == axis))
                        });
                let fix = match declared_split {
                    Some(dim) => format!("reduce_scatter(..., {axis}, dim = {dim})"),
                    None => format!("all_reduce(..., {axis})"),
                };
                self.error(
                    Diagnostic::error(
                        codes::E0403,
                        value,
                        format!("partial sum over mesh axis `{axis}` is returned without a collective"),
                    )
                    .with_label(format!("each device holds only a partial sum over `{axis}` here"))
                    .with_note("the contracted dimension of a matmul is sharded, so every device sums only its slice")
                    .with_help(format!("combine the partial sums first: `{fix}`")),
                );
                body.returns.push(Ty::Error);
                return;
            }
        }
        if let Some((ret, ret_span)) = body.ret.clone() {
            self.expect_ty(&val.ty, &ret, value, ret_span, codes::E0204);
        }
        body.returns.push(val.ty);
    }

    /// `return (a, b);`: each part against the declared result of its
    /// place.
    fn ret_several(&mut self, body: &mut Body, items: &[ast::Expr], at: Span) {
        let vals: Vec<Val> = items.iter().map(|i| self.expr(body, i)).collect();
        let tys: Vec<Ty> = vals.iter().map(|v| v.ty.clone()).collect();
        match body.ret.clone() {
            _ if body.kind != BodyKind::Op => {
                self.error(
                    Diagnostic::error(codes::E0211, at, "only ops return several results")
                        .with_label("several values here")
                        .with_help(if body.kind == BodyKind::Kernel {
                            "a kernel stores its results into its `out` parameters"
                        } else {
                            "return one value, or write an op with `-> (tensor<...>, tensor<...>)`"
                        }),
                );
            }
            Some((Ty::Tuple(parts), ret_span)) if parts.len() == items.len() => {
                for ((val, want), item) in vals.iter().zip(&parts).zip(items) {
                    self.expect_ty(&val.ty, want, item.span, ret_span, codes::E0204);
                }
            }
            Some((Ty::Error, _)) => {}
            Some((declared, ret_span)) => {
                let n = match &declared {
                    Ty::Tuple(parts) => parts.len(),
                    _ => 1,
                };
                self.error(
                    Diagnostic::error(
                        codes::E0204,
                        at,
                        format!("{} results are returned, the op declares {n}", items.len()),
                    )
                    .with_label(format!("{} values", items.len()))
                    .with_secondary(ret_span, format!("declared `{declared}`"))
                    .with_help("declare one type per result: `-> (tensor<...>, tensor<...>)`"),
                );
            }
            None => {}
        }
        body.returns.push(Ty::Tuple(tys));
    }

    /// Reports that `actual` does not fit `expected`: dtype, rank, dims or
    /// shard spec. Errors are silent.
    pub(crate) fn expect_ty(
        &mut self,
        actual: &Ty,
        expected: &Ty,
        span: Span,
        declared_at: Span,
        code: tessera_diagnostics::Code,
    ) -> bool {
        let mismatch = |what: String| {
            Diagnostic::error(
                code,
                span,
                format!("expected `{expected}`, found `{actual}`"),
            )
            .with_label(what)
            .with_secondary(declared_at, "expected because of this")
        };
        match (actual, expected) {
            (Ty::Error, _) | (_, Ty::Error) => true,
            (Ty::Tensor(a), Ty::Tensor(e)) => {
                if a.rank() != e.rank() {
                    self.error(mismatch(format!(
                        "this has rank {}, not {}",
                        a.rank(),
                        e.rank()
                    )));
                    return false;
                }
                if a.dtype != e.dtype {
                    self.error(
                        mismatch(format!("this is `{}`, not `{}`", a.dtype, e.dtype))
                            .with_help(format!("convert explicitly: `... as {}`", e.dtype)),
                    );
                    return false;
                }
                for (i, (da, de)) in a.dims.iter().zip(&e.dims).enumerate() {
                    if !da.compatible(de) {
                        self.error(mismatch(format!("dimension {i} is {da}, not {de}")));
                        return false;
                    }
                }
                if let (Some(sa), Some(se)) = (&a.shard, &e.shard) {
                    for (i, (xa, xe)) in sa.dims.iter().zip(&se.dims).enumerate() {
                        if xa.is_some() && xa != xe {
                            let shown = |x: &Option<crate::ty::AxisRef>| {
                                x.as_ref().map_or("_".to_owned(), |a| a.axis.clone())
                            };
                            self.error(
                                Diagnostic::error(
                                    codes::E0404,
                                    span,
                                    format!(
                                        "dimension {i} is split over `{}` but `{}` is expected",
                                        shown(xa),
                                        shown(xe)
                                    ),
                                )
                                .with_label(format!("this is `{actual}`"))
                                .with_secondary(
                                    declared_at,
                                    format!("`{expected}` expected because of this"),
                                )
                                .with_help("reshard with `all_gather` or `all_to_all`"),
                            );
                            return false;
                        }
                    }
                }
                true
            }
            (Ty::Int, Ty::Float) => true,
            // `bool` is the type of a truth value, scalar or rank-0 tensor
            // (`min(x) < 0.0` in an op declared `-> bool`).
            (Ty::Tensor(a), Ty::Bool) if a.rank() == 0 && a.dtype == ast::Dtype::Bool => true,
            (a, e) if std::mem::discriminant(a) == std::mem::discriminant(e) => true,
            _ => {
                self.error(mismatch(format!("this is {}", actual.describe())));
                false
            }
        }
    }
}

/// Whether `e` reads one of `names`, or the program's position in its grid
/// (`program_id`, `num_programs`: integers known only when it runs).
fn mentions(e: &ast::Expr, names: &std::collections::HashSet<String>) -> bool {
    match &e.kind {
        ast::ExprKind::Name(n) => names.contains(n),
        ast::ExprKind::Call { callee, .. }
            if matches!(callee.text.as_str(), "program_id" | "num_programs") =>
        {
            true
        }
        kind => kind.children().into_iter().any(|c| mentions(c, names)),
    }
}

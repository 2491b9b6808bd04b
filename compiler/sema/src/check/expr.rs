//! Typing expressions: names, literals, operators with broadcasting and
//! promotion, indexing, transpose and casts. Calls are in `call.rs`.

use super::{Body, Cx, Val};
use crate::numerics::NumericsCheck;
use crate::suggest;
use crate::table::BodyKind;
use crate::ty::{Const, Dim, Shard, TensorTy, Ty};
use tessera_core::resources::MAX_TILE_ELEMENTS;
use tessera_diagnostics::{codes, Diagnostic, Span};
use tessera_syntax::ast::{self, BinOp, Dtype, ExprKind, IndexArg, UnOp};

impl Cx<'_, '_> {
    /// Types an expression and records its type.
    pub(crate) fn expr(&mut self, body: &mut Body, e: &ast::Expr) -> Val {
        let val = self.expr_inner(body, e);
        self.record(body, e, &val.ty);
        if body.kind == BodyKind::Kernel {
            return self.tile_limit(val, e.span);
        }
        val
    }

    /// A kernel's tile of known shape past [`MAX_TILE_ELEMENTS`] is an
    /// error at the expression that makes it (E0604); the compile of the
    /// kernel reports the ones whose size a call decides.
    fn tile_limit(&mut self, val: Val, span: Span) -> Val {
        let Ty::Tensor(t) = &val.ty else {
            return val;
        };
        let n = t.dims.iter().try_fold(1i64, |n, d| {
            d.as_known()
                .map_or(Some(n), |k| n.checked_mul(i64::try_from(k).ok()?))
        });
        if n.is_some_and(|n| n <= MAX_TILE_ELEMENTS) {
            return val;
        }
        let shown = n.map_or("more than 2^63".to_owned(), |n| n.to_string());
        self.error(
            Diagnostic::error(
                codes::E0604,
                span,
                format!("a tile of {shown} elements is too large"),
            )
            .with_label(format!(
                "a program holds at most {MAX_TILE_ELEMENTS} elements in one tile"
            ))
            .with_help("use a smaller block and loop over the rest"),
        );
        Val::error()
    }

    fn expr_inner(&mut self, body: &mut Body, e: &ast::Expr) -> Val {
        match &e.kind {
            ExprKind::Int(v) => match i64::try_from(*v) {
                Ok(v) => Val::int(v),
                Err(_) => {
                    self.error(
                        Diagnostic::error(codes::E0005, e.span, "integer literal is too large")
                            .with_label("integers are signed 64-bit values"),
                    );
                    Val::error()
                }
            },
            ExprKind::Float(v) => Val {
                ty: Ty::Float,
                konst: Some(Const::Float(*v)),
                dim: None,
            },
            ExprKind::Bool(b) => Val {
                ty: Ty::Bool,
                konst: Some(Const::Bool(*b)),
                dim: None,
            },
            ExprKind::Str(s) => Val {
                konst: Some(Const::Str(s.clone())),
                ..Val::of(Ty::Str)
            },
            ExprKind::Name(n) => self.name(body, n, e.span),
            ExprKind::Binary { op, lhs, rhs } => {
                let l = self.expr(body, lhs);
                let r = self.expr(body, rhs);
                self.binary_vals(body, *op, l, r, e.span, lhs.span, rhs.span)
            }
            ExprKind::Unary { op, operand } => {
                let v = self.expr(body, operand);
                self.unary(*op, v, operand.span)
            }
            ExprKind::Call {
                callee,
                dtype_args,
                args,
            } => match self.qualified_call(body, e, callee, dtype_args, args) {
                Some(v) => v,
                None => self.call(body, e, callee, dtype_args, args),
            },
            ExprKind::Index { base, indices } => {
                let b = self.expr(body, base);
                // torch's `x.topk(k)[0]` picks the values of a tuple;
                // here the call is the values, so `[0]` would be a row
                // (`[:, 0]` and the like are plain indexing).
                let tuple_pick = matches!(
                    indices.as_slice(),
                    [IndexArg::Expr(ast::Expr {
                        kind: ExprKind::Int(0 | 1),
                        ..
                    })]
                );
                if let (Some((callee, _, _)), true) = (base.kind.as_call(), tuple_pick) {
                    if matches!(callee.text.as_str(), "topk" | "sort") && !b.is_error() {
                        let name = &callee.text;
                        self.error(
                            Diagnostic::error(
                                codes::E0211,
                                e.span,
                                format!("an index into the result of `{name}`"),
                            )
                            .with_label(format!("`{name}(...)` is the values alone, so this would pick a row of them"))
                            .with_help(format!(
                                "torch's `{name}(...)[0]` is `{name}(...)` here and `[1]` is `{}(...)`; \
                                 bind both with `let (values, indices) = {name}(...);`",
                                if name == "topk" { "topk_indices" } else { "argsort" }
                            )),
                        );
                        return Val::error();
                    }
                }
                self.index(body, b, indices, base.span)
            }
            ExprKind::Field { base, field } => {
                let b = self.expr(body, base);
                if field.text != "T" {
                    let mut d = Diagnostic::error(
                        codes::E0212,
                        field.span,
                        format!("no field `{}`", field.text),
                    )
                    .with_label("unknown field")
                    .with_note(
                        "tensors have one field, `.T`, the transpose of the last two dimensions",
                    );
                    if matches!(field.text.as_str(), "shape" | "size" | "ndim") {
                        d = d.with_help(
                            "a tensor's sizes are the dimension symbols of its type: with \
                             `x: tensor<R, C, fp32>`, torch's `x.shape[-1]` is `C`",
                        );
                    }
                    self.error(d);
                    return Val::error();
                }
                self.transpose(b, base.span)
            }
            ExprKind::List(items) => self.list(body, items).0,
            // `(a, b)` outside `return` (where `Cx::ret` takes it apart).
            ExprKind::Tuple(items) => {
                for i in items {
                    self.expr(body, i);
                }
                self.error(
                    Diagnostic::error(codes::E0211, e.span, "`(a, b)` is only returned")
                        .with_label("several values here")
                        .with_help(
                            "an op with several results ends with `return (a, b);`; elsewhere \
                             use a list `[a, b]` (`concat`, `stack`) or separate names",
                        ),
                );
                Val::error()
            }
            ExprKind::Cast { value, dtype } => {
                let v = self.expr(body, value);
                match v.ty {
                    Ty::Error => Val::error(),
                    Ty::Tensor(mut t) => {
                        t.dtype = *dtype;
                        Val::of(Ty::Tensor(t))
                    }
                    Ty::Int | Ty::Float | Ty::Bool => {
                        let ty = if dtype.is_float() {
                            Ty::Float
                        } else if *dtype == Dtype::Bool {
                            Ty::Bool
                        } else {
                            Ty::Int
                        };
                        let konst = match (&ty, v.konst) {
                            (Ty::Float, Some(c)) => c.as_f64().map(Const::Float),
                            (Ty::Int, Some(Const::Int(i))) => Some(Const::Int(i)),
                            (Ty::Int, Some(Const::Float(f)))
                                if f.is_finite() && f.abs() < 9.2e18 =>
                            {
                                Some(Const::Int(f as i64))
                            }
                            _ => None,
                        };
                        Val {
                            dim: if ty == Ty::Int { v.dim } else { None },
                            ty,
                            konst,
                        }
                    }
                    other => {
                        self.error(
                            Diagnostic::error(
                                codes::E0209,
                                value.span,
                                format!("cannot convert {} to `{dtype}`", other.describe()),
                            )
                            .with_label("not a number or tensor"),
                        );
                        Val::error()
                    }
                }
            }
            ExprKind::Error => Val::error(),
        }
    }

    /// Types a list literal; also returns the type of each element.
    pub(crate) fn list(&mut self, body: &mut Body, items: &[ast::Expr]) -> (Val, Vec<Ty>) {
        let vals: Vec<Val> = items.iter().map(|i| self.expr(body, i)).collect();
        let elems: Vec<Ty> = vals.iter().map(|v| v.ty.clone()).collect();
        if vals.iter().any(Val::is_error) {
            return (Val::error(), elems);
        }
        let elem = vals.first().map_or(Ty::Int, |v| v.ty.clone());
        let konst = vals
            .iter()
            .map(|v| v.konst.clone())
            .collect::<Option<Vec<_>>>()
            .map(Const::List);
        // A `-1` (the size `reshape` infers) is a size not known here.
        let dims: Option<Vec<Dim>> = vals
            .iter()
            .map(|v| match (&v.dim, &v.konst) {
                (None, Some(Const::Int(-1))) => Some(Dim::Unknown),
                (d, _) => d.clone(),
            })
            .collect();
        self.list_consts = vals.iter().map(|v| v.konst.clone()).collect();
        let val = Val {
            ty: Ty::List(Box::new(elem)),
            konst,
            dim: None,
        };
        self.list_dims = dims;
        (val, elems)
    }

    fn name(&mut self, body: &Body, name: &str, span: Span) -> Val {
        if let Some(local) = body.local(name) {
            return local.val.clone();
        }
        if let Some(c) = body.consts.get(name) {
            let dim = c
                .as_int()
                .and_then(|v| u64::try_from(v).ok())
                .map(Dim::known);
            let ty = match c {
                Const::Float(_) => Ty::Float,
                Const::Bool(_) => Ty::Bool,
                Const::Str(_) => Ty::Str,
                _ => Ty::Int,
            };
            return Val {
                ty,
                konst: Some(c.clone()),
                dim,
            };
        }
        if let Some(d) = body.dims.get(name) {
            let konst = d
                .as_known()
                .and_then(|n| i64::try_from(n).ok())
                .map(Const::Int);
            return Val {
                ty: Ty::Int,
                konst,
                dim: Some(d.clone()),
            };
        }
        if let Some(axis) = self.meshes.by_name(name) {
            return Val::of(Ty::Axis(axis));
        }
        let n = ast::Name {
            text: name.to_owned(),
            span,
        };
        self.unresolved(body, &n);
        Val::error()
    }

    /// A call through a module path (`nn.gelu(x)`, `torch.sigmoid(x)`,
    /// `tl.exp(x)`), which the method syntax would take for a call on a
    /// value named `nn`: one E0100 saying that ops are called by their own
    /// name, then the call checked without the path. `None` when the
    /// receiver is not such a path (an ordinary method call).
    fn qualified_call(
        &mut self,
        body: &mut Body,
        e: &ast::Expr,
        callee: &ast::Name,
        dtype_args: &[(ast::Dtype, Span)],
        args: &[ast::Arg],
    ) -> Option<Val> {
        let receiver = args
            .first()
            .filter(|a| a.kind == ast::ArgKind::Positional && a.value.span.hi <= callee.span.lo)?;
        let mut path = Vec::new();
        let mut at = &receiver.value;
        let root = loop {
            match &at.kind {
                ExprKind::Name(n) => break n,
                ExprKind::Field { base, field } => {
                    path.push(field.text.as_str());
                    at = base;
                }
                _ => return None,
            }
        };
        let known = body.local(root).is_some()
            || body.consts.contains_key(root)
            || body.dims.contains_key(root)
            || self.meshes.by_name(root).is_some()
            || self.table.user_item(root).is_some();
        if known {
            return None;
        }
        path.push(root);
        path.reverse();
        let written = format!("{}.{}", path.join("."), callee.text);
        let rest = &args[1..];
        // Not found, the call below says why (`import std.nn;` missing).
        let found = matches!(
            self.table.lookup(callee, body.kind, body.file),
            crate::table::Lookup::Found(_)
        );
        let mut d = Diagnostic::error(
            codes::E0100,
            receiver.value.span.to(callee.span),
            format!("cannot find value `{root}` in this scope"),
        )
        .with_label(format!("`{written}` calls through a module path"));
        let help = format!("ops are called by their own name: `{}(...)`", callee.text);
        d = if found && matches!(root.as_str(), "std" | "nn") {
            d.with_help(format!(
                "{help} (`import std.nn;` brings std.nn's ops into scope unqualified)"
            ))
        } else {
            d.with_help(help)
        };
        self.error(d);
        Some(self.call(body, e, callee, dtype_args, rest))
    }

    /// Reports an unresolved value name with a suggestion.
    pub(crate) fn unresolved(&mut self, body: &Body, name: &ast::Name) {
        let mut d = Diagnostic::error(
            codes::E0100,
            name.span,
            format!("cannot find value `{}` in this scope", name.text),
        )
        .with_label("not found");
        let names = body.value_names();
        // Python's spellings of the literals.
        let literal = match name.text.as_str() {
            "True" => Some("true"),
            "False" => Some("false"),
            "math.inf" | "inf_" | "INF" | "Infinity" => Some("inf"),
            _ => None,
        };
        if let Some(l) = literal {
            d = d.with_help(format!("Tessera writes `{l}`"));
        } else if let Some(s) = suggest::closest(&name.text, names.iter().map(String::as_str)) {
            d = d.with_help(format!("did you mean `{s}`?"));
        } else if self.table.user_item(&name.text).is_some() {
            d = d.with_help(format!(
                "`{}` is an op or function: call it with arguments",
                name.text
            ));
        }
        self.error(d);
    }

    fn unary(&mut self, op: UnOp, v: Val, span: Span) -> Val {
        match (op, &v.ty) {
            (_, Ty::Error) => Val::error(),
            (UnOp::Neg, Ty::Int) => Val {
                ty: Ty::Int,
                konst: v
                    .konst
                    .as_ref()
                    .and_then(Const::as_int)
                    .and_then(i64::checked_neg)
                    .map(Const::Int),
                dim: None,
            },
            (UnOp::Neg, Ty::Float) => Val {
                ty: Ty::Float,
                konst: v
                    .konst
                    .as_ref()
                    .and_then(Const::as_f64)
                    .map(|f| Const::Float(-f)),
                dim: None,
            },
            (UnOp::Neg, Ty::Tensor(t)) if t.dtype != Dtype::Bool => Val::of(v.ty.clone()),
            (UnOp::Not | UnOp::BitNot, Ty::Bool) => Val {
                ty: Ty::Bool,
                konst: match v.konst {
                    Some(Const::Bool(b)) => Some(Const::Bool(!b)),
                    _ => None,
                },
                dim: None,
            },
            (UnOp::Not, Ty::Tensor(t)) if t.dtype == Dtype::Bool => Val::of(v.ty.clone()),
            (UnOp::BitNot, Ty::Int) => Val {
                ty: Ty::Int,
                konst: match v.konst {
                    Some(Const::Int(n)) => Some(Const::Int(!n)),
                    _ => None,
                },
                dim: None,
            },
            (UnOp::BitNot, Ty::Tensor(t)) if !t.dtype.is_float() => Val::of(v.ty.clone()),
            (op, ty) => {
                let sym = match op {
                    UnOp::Neg => "-",
                    UnOp::Not => "!",
                    UnOp::BitNot => "~",
                };
                self.error(
                    Diagnostic::error(
                        codes::E0214,
                        span,
                        format!("cannot apply `{sym}` to {}", ty.describe()),
                    )
                    .with_label("wrong operand type"),
                );
                Val::error()
            }
        }
    }

    /// Types a binary operation on already-checked operands.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn binary_vals(
        &mut self,
        body: &Body,
        op: BinOp,
        l: Val,
        r: Val,
        span: Span,
        lspan: Span,
        rspan: Span,
    ) -> Val {
        if l.is_error() || r.is_error() {
            return Val::error();
        }
        if op == BinOp::MatMul {
            return match (&l.ty, &r.ty) {
                (Ty::Tensor(a), Ty::Tensor(b)) => self.matmul(body, a, b, lspan, rspan),
                _ => {
                    let bad = if l.ty.tensor().is_none() {
                        (&l, lspan)
                    } else {
                        (&r, rspan)
                    };
                    self.error(
                        Diagnostic::error(codes::E0214, bad.1, "`@` needs two tensors")
                            .with_label(format!("this is {}", bad.0.ty.describe())),
                    );
                    Val::error()
                }
            };
        }
        if op.is_bitwise() {
            if let Some(v) = self.bitwise(op, &l, &r, span, lspan, rspan) {
                return v;
            }
        }
        match (&l.ty, &r.ty) {
            (Ty::Int | Ty::Float | Ty::Bool, Ty::Int | Ty::Float | Ty::Bool) => {
                self.scalar_binary(op, &l, &r, span)
            }
            // `mode == "reflect"` of an op's `str` attribute: a constant.
            (Ty::Str, Ty::Str) if matches!(op, BinOp::Eq | BinOp::Ne) => {
                let konst = match (&l.konst, &r.konst) {
                    (Some(Const::Str(a)), Some(Const::Str(b))) => {
                        Some(Const::Bool((a == b) == (op == BinOp::Eq)))
                    }
                    _ => None,
                };
                Val {
                    ty: Ty::Bool,
                    konst,
                    dim: None,
                }
            }
            (Ty::Tensor(t), s) | (s, Ty::Tensor(t)) if s.is_scalar() => {
                let tensor_on_left = l.ty.tensor().is_some();
                if !t.partial().is_empty() && !linear_with_scalar(op, tensor_on_left) {
                    self.nonlinear_partial(t, span, op.symbol());
                    return Val::error();
                }
                let scalar_span = if tensor_on_left { rspan } else { lspan };
                self.tensor_scalar(op, t, s, span, scalar_span)
            }
            (Ty::Tensor(a), Ty::Tensor(b)) => {
                self.tensor_binary(body, op, a, b, span, lspan, rspan)
            }
            (Ty::Global(_), _) | (_, Ty::Global(_)) => {
                let at = if matches!(l.ty, Ty::Global(_)) {
                    lspan
                } else {
                    rspan
                };
                self.error(
                    Diagnostic::error(codes::E0214, at, "kernel parameters live in global memory")
                        .with_label("read it with `load` first")
                        .with_help("for example `let x = load(a, [offs], mask = mask);`"),
                );
                Val::error()
            }
            _ => {
                let bad = if l.ty.is_scalar() || l.ty.tensor().is_some() {
                    (&r, rspan)
                } else {
                    (&l, lspan)
                };
                self.error(
                    Diagnostic::error(
                        codes::E0214,
                        bad.1,
                        format!(
                            "`{}` is not defined for {}",
                            op.symbol(),
                            bad.0.ty.describe()
                        ),
                    )
                    .with_label("wrong operand type"),
                );
                Val::error()
            }
        }
    }

    /// `&`, `|`, `^` (integers, or booleans: logical), `<<`, `>>`
    /// (integers): operands of another kind are E0214; scalars compute
    /// here; `None` leaves tensors to the elementwise rules.
    fn bitwise(
        &mut self,
        op: BinOp,
        l: &Val,
        r: &Val,
        span: Span,
        lspan: Span,
        rspan: Span,
    ) -> Option<Val> {
        #[derive(PartialEq)]
        enum Kind {
            Int,
            Bool,
            Float,
        }
        let kind = |t: &Ty| match t {
            Ty::Int => Some(Kind::Int),
            Ty::Bool => Some(Kind::Bool),
            Ty::Float => Some(Kind::Float),
            Ty::Tensor(t) if t.dtype == Dtype::Bool => Some(Kind::Bool),
            Ty::Tensor(t) if t.dtype.is_float() => Some(Kind::Float),
            Ty::Tensor(_) => Some(Kind::Int),
            _ => None,
        };
        let (Some(a), Some(b)) = (kind(&l.ty), kind(&r.ty)) else {
            return None;
        };
        let shift = matches!(op, BinOp::Shl | BinOp::Shr);
        let bad = if a == Kind::Float {
            Some((l, lspan))
        } else if b == Kind::Float {
            Some((r, rspan))
        } else {
            None
        };
        let problem = match bad {
            Some(v) => Some((v, "needs integers".to_owned())),
            None if shift && a == Kind::Bool => {
                Some(((l, lspan), "shifts integers, not booleans".to_owned()))
            }
            None if shift && b == Kind::Bool => {
                Some(((r, rspan), "shifts integers, not booleans".to_owned()))
            }
            None if a != b => Some(((r, rspan), "needs two integers or two booleans".to_owned())),
            None => None,
        };
        if let Some(((v, at), what)) = problem {
            let mut d = Diagnostic::error(codes::E0214, at, format!("`{}` {what}", op.symbol()))
                .with_label(format!("this is {}", v.ty.describe()));
            d = match op {
                BinOp::BitXor if bad.is_some() => d.with_help("`^` is exclusive or; a power is `pow(x, 2.0)`"),
                _ if bad.is_some() => d.with_help("bitwise operators take integers (`x & 15`, `q << 4`) and `&`, `|`, `^` booleans too"),
                _ => d,
            };
            self.error(d.with_secondary(span, "in this operation"));
            return Some(Val::error());
        }
        match (&l.ty, &r.ty) {
            (Ty::Int, Ty::Int) => {
                let konst = match (&l.konst, &r.konst) {
                    (Some(Const::Int(x)), Some(Const::Int(y))) => op
                        .elementwise()
                        .and_then(|o| o.eval_int(*x, *y))
                        .map(Const::Int),
                    _ => None,
                };
                Some(Val {
                    ty: Ty::Int,
                    konst,
                    dim: None,
                })
            }
            (Ty::Bool, Ty::Bool) => {
                let konst = match (&l.konst, &r.konst) {
                    (Some(Const::Bool(x)), Some(Const::Bool(y))) => Some(Const::Bool(match op {
                        BinOp::BitAnd => *x && *y,
                        BinOp::BitOr => *x || *y,
                        _ => x != y,
                    })),
                    _ => None,
                };
                Some(Val {
                    ty: Ty::Bool,
                    konst,
                    dim: None,
                })
            }
            _ => None,
        }
    }

    fn scalar_binary(&mut self, op: BinOp, l: &Val, r: &Val, span: Span) -> Val {
        use BinOp::*;
        let both_int = l.ty == Ty::Int && r.ty == Ty::Int;
        match op {
            And | Or => {
                if l.ty != Ty::Bool || r.ty != Ty::Bool {
                    self.error(
                        Diagnostic::error(
                            codes::E0214,
                            span,
                            format!("`{}` needs booleans", op.symbol()),
                        )
                        .with_label("operands are not both booleans"),
                    );
                    return Val::error();
                }
                let konst = match (&l.konst, &r.konst) {
                    (Some(Const::Bool(a)), Some(Const::Bool(b))) => {
                        Some(Const::Bool(if op == And { *a && *b } else { *a || *b }))
                    }
                    _ => None,
                };
                Val {
                    ty: Ty::Bool,
                    konst,
                    dim: None,
                }
            }
            Eq | Ne | Lt | Le | Gt | Ge => {
                let konst = match (
                    l.konst.as_ref().and_then(Const::as_f64),
                    r.konst.as_ref().and_then(Const::as_f64),
                ) {
                    (Some(a), Some(b)) => Some(Const::Bool(match op {
                        Eq => a == b,
                        Ne => a != b,
                        Lt => a < b,
                        Le => a <= b,
                        Gt => a > b,
                        _ => a >= b,
                    })),
                    _ => None,
                };
                Val {
                    ty: Ty::Bool,
                    konst,
                    dim: None,
                }
            }
            _ if l.ty == Ty::Bool || r.ty == Ty::Bool => {
                self.error(
                    Diagnostic::error(
                        codes::E0214,
                        span,
                        format!("`{}` is not defined for booleans", op.symbol()),
                    )
                    .with_label("boolean operand"),
                );
                Val::error()
            }
            _ if both_int => {
                let (a, b) = (
                    l.konst.as_ref().and_then(Const::as_int),
                    r.konst.as_ref().and_then(Const::as_int),
                );
                if matches!(op, Div | Rem) && b == Some(0) {
                    self.error(
                        Diagnostic::error(codes::E0214, span, "division by zero")
                            .with_label("the divisor is 0"),
                    );
                    return Val::error();
                }
                let konst = match (a, b) {
                    (Some(a), Some(b)) => match op {
                        Add => a.checked_add(b),
                        Sub => a.checked_sub(b),
                        Mul => a.checked_mul(b),
                        Div => a.checked_div(b),
                        _ => a.checked_rem(b),
                    }
                    .map(Const::Int),
                    _ => None,
                };
                let dim = match (&konst, op, &l.dim, &r.dim) {
                    (Some(Const::Int(v)), _, _, _) => u64::try_from(*v).ok().map(Dim::known),
                    (None, Mul, Some(a), Some(b)) => a.mul(b),
                    // A sum or difference of sizes is a size still, known
                    // at each call (`split(x, [2, N - 2])`).
                    (None, Add, Some(a), Some(b)) => a.add(b).or(Some(Dim::Unknown)),
                    (None, Sub, Some(a), Some(b)) => a.sub(b).or(Some(Dim::Unknown)),
                    (None, Div, Some(a), Some(b)) => match b.as_known() {
                        Some(k) => a.div(k),
                        None => None,
                    },
                    _ => None,
                };
                Val {
                    ty: Ty::Int,
                    konst,
                    dim,
                }
            }
            _ => {
                let (a, b) = (
                    l.konst.as_ref().and_then(Const::as_f64),
                    r.konst.as_ref().and_then(Const::as_f64),
                );
                let konst = match (a, b) {
                    (Some(a), Some(b)) => {
                        let v = match op {
                            Add => a + b,
                            Sub => a - b,
                            Mul => a * b,
                            _ => a / b,
                        };
                        v.is_finite().then_some(Const::Float(v))
                    }
                    _ => None,
                };
                Val {
                    ty: Ty::Float,
                    konst,
                    dim: None,
                }
            }
        }
    }

    fn tensor_scalar(
        &mut self,
        op: BinOp,
        t: &TensorTy,
        s: &Ty,
        span: Span,
        scalar_span: Span,
    ) -> Val {
        if t.dtype == Dtype::Bool
            && !matches!(
                op,
                BinOp::And
                    | BinOp::Or
                    | BinOp::BitAnd
                    | BinOp::BitOr
                    | BinOp::BitXor
                    | BinOp::Eq
                    | BinOp::Ne
            )
        {
            self.error(
                Diagnostic::error(
                    codes::E0214,
                    span,
                    format!("`{}` is not defined for `bool` tensors", op.symbol()),
                )
                .with_label("boolean tensor"),
            );
            return Val::error();
        }
        if *s == Ty::Float && !t.dtype.is_float() && !op.is_comparison() {
            self.error(
                Diagnostic::error(
                    codes::E0200,
                    scalar_span,
                    format!("float scalar combined with a `{}` tensor", t.dtype),
                )
                .with_label("this is a float")
                .with_help(format!(
                    "convert the tensor first: `x as fp32`, or use an integer ({})",
                    t.dtype
                )),
            );
            return Val::error();
        }
        let mut out = t.clone();
        if op.is_comparison() || matches!(op, BinOp::And | BinOp::Or) {
            out.dtype = Dtype::Bool;
        }
        Val::of(Ty::Tensor(out))
    }

    #[allow(clippy::too_many_arguments)]
    fn tensor_binary(
        &mut self,
        body: &Body,
        op: BinOp,
        a: &TensorTy,
        b: &TensorTy,
        span: Span,
        lspan: Span,
        rspan: Span,
    ) -> Val {
        let Some(dims) = self.broadcast(&a.dims, &b.dims, span, lspan, rspan, a, b) else {
            return Val::error();
        };
        let dtype = match body.numerics.promote(a.dtype, b.dtype) {
            Some(d) => d,
            None => {
                self.error(
                    Diagnostic::error(
                        codes::E0200,
                        span,
                        format!("mismatched dtypes `{}` and `{}`", a.dtype, b.dtype),
                    )
                    .with_secondary(lspan, format!("this is `{}`", a.dtype))
                    .with_secondary(rspan, format!("this is `{}`", b.dtype))
                    .with_note(format!(
                        "the precision mode `{}` declares no promotion between them",
                        body.numerics.precision.name()
                    ))
                    .with_help(format!("convert one explicitly, e.g. `... as {}`", a.dtype)),
                );
                return Val::error();
            }
        };
        let logical = matches!(op, BinOp::And | BinOp::Or);
        let either = logical || matches!(op, BinOp::BitAnd | BinOp::BitOr | BinOp::BitXor);
        let misfit = if a.dtype == Dtype::Bool {
            !either
        } else {
            logical
        };
        if misfit && !op.is_comparison() {
            self.error(
                Diagnostic::error(
                    codes::E0214,
                    span,
                    format!("`{}` is not defined for `{}` tensors", op.symbol(), a.dtype),
                )
                .with_label("wrong element type"),
            );
            return Val::error();
        }
        let shard = match self.merge_shards(op, a, b, &dims, span, lspan, rspan) {
            Ok(shard) => shard,
            Err(err) => return err,
        };
        let dtype = if op.is_comparison() {
            Dtype::Bool
        } else {
            dtype
        };
        Val::of(Ty::Tensor(TensorTy { dims, dtype, shard }))
    }

    /// NumPy-style broadcasting of two shapes.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn broadcast(
        &mut self,
        a: &[Dim],
        b: &[Dim],
        span: Span,
        lspan: Span,
        rspan: Span,
        at: &TensorTy,
        bt: &TensorTy,
    ) -> Option<Vec<Dim>> {
        let n = a.len().max(b.len());
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let da = (i + a.len()).checked_sub(n).map(|j| &a[j]);
            let db = (i + b.len()).checked_sub(n).map(|j| &b[j]);
            let d = match (da, db) {
                (Some(x), None) | (None, Some(x)) => x.clone(),
                // An unknown size against 1 may be anything; against
                // another size it is that size.
                (Some(x), Some(y)) if x.compatible(y) => match (x, y) {
                    (Dim::Unknown, d) | (d, Dim::Unknown) if d.is_one() => Dim::Unknown,
                    (Dim::Unknown, d) => d.clone(),
                    (d, _) => d.clone(),
                },
                (Some(x), Some(y)) if x.is_one() => y.clone(),
                (Some(x), Some(y)) if y.is_one() => x.clone(),
                (Some(x), Some(y)) => {
                    self.error(
                        Diagnostic::error(codes::E0203, span, format!("shapes `{at}` and `{bt}` cannot be broadcast"))
                            .with_secondary(lspan, format!("dimension {} is {x}", i + a.len() - n))
                            .with_secondary(rspan, format!("dimension {} is {y}", i + b.len() - n))
                            .with_note("aligned from the right, each pair of dimensions must be equal, or one of them 1"),
                    );
                    return None;
                }
                (None, None) => Dim::Unknown,
            };
            out.push(d);
        }
        Some(out)
    }

    /// Combines the shard specs of two elementwise operands.
    #[allow(clippy::too_many_arguments)]
    fn merge_shards(
        &mut self,
        op: BinOp,
        a: &TensorTy,
        b: &TensorTy,
        dims: &[Dim],
        span: Span,
        lspan: Span,
        rspan: Span,
    ) -> Result<Option<Shard>, Val> {
        if a.shard.is_none() && b.shard.is_none() {
            return Ok(None);
        }
        let n = dims.len();
        let rep_a = Shard::replicated(a.rank());
        let rep_b = Shard::replicated(b.rank());
        let sa = a.shard.as_ref().unwrap_or(&rep_a);
        let sb = b.shard.as_ref().unwrap_or(&rep_b);
        let mut out = Shard::replicated(n);
        for i in 0..n {
            let xa = (i + a.rank())
                .checked_sub(n)
                .and_then(|j| sa.dims[j].clone());
            let xb = (i + b.rank())
                .checked_sub(n)
                .and_then(|j| sb.dims[j].clone());
            out.dims[i] = match (xa, xb) {
                (Some(x), Some(y)) if x != y => {
                    self.error(
                        Diagnostic::error(codes::E0404, span, format!("dimension {i} is split over `{}` on one side and `{}` on the other", x.axis, y.axis))
                            .with_secondary(lspan, format!("`{a}`"))
                            .with_secondary(rspan, format!("`{b}`"))
                            .with_help("reshard one operand with `all_gather` or `all_to_all`"),
                    );
                    return Err(Val::error());
                }
                (x, y) => x.or(y),
            };
        }
        let (pa, pb) = (&sa.partial, &sb.partial);
        if pa != pb {
            let linear_ok = match op {
                BinOp::Mul | BinOp::Div => pb.is_empty() || (op == BinOp::Mul && pa.is_empty()),
                _ => false,
            };
            if !linear_ok {
                let (partial, other) = if pa.is_empty() {
                    (b, lspan)
                } else {
                    (a, rspan)
                };
                let axis = partial.partial()[0].axis.clone();
                let d = if matches!(op, BinOp::Add | BinOp::Sub) {
                    Diagnostic::error(codes::E0403, span, format!("partial sum over `{axis}` combined with a value that is not partial"))
                        .with_secondary(other, "this value is whole on every device, so it would be counted once per device")
                        .with_help(format!("combine the partial sums first: `all_reduce(..., {axis})`"))
                } else {
                    Diagnostic::error(
                        codes::E0406,
                        span,
                        format!("`{}` of a partial sum over `{axis}`", op.symbol()),
                    )
                    .with_label("not linear in the partial sum")
                    .with_help(format!("apply `all_reduce(..., {axis})` first"))
                };
                self.error(d);
                return Err(Val::error());
            }
            out.partial = if pa.is_empty() {
                pb.clone()
            } else {
                pa.clone()
            };
        } else {
            out.partial = pa.clone();
        }
        Ok(Some(out))
    }

    /// Reports a non-linear operation applied to a partial sum.
    pub(crate) fn nonlinear_partial(&mut self, t: &TensorTy, span: Span, what: &str) {
        let axis = t.partial()[0].axis.clone();
        self.error(
            Diagnostic::error(
                codes::E0406,
                span,
                format!("`{what}` applied to a partial sum over `{axis}`"),
            )
            .with_label("this is not linear, so it cannot act on partial sums")
            .with_help(format!("apply `all_reduce(..., {axis})` first")),
        );
    }

    /// `a @ b`, batched over leading dimensions. Outside kernels a vector
    /// multiplies as numpy's and torch's do: on the left as a row (its
    /// dimension dropped from the result), on the right as a column, two
    /// vectors to their dot product (rank 0).
    pub(crate) fn matmul(
        &mut self,
        body: &Body,
        a: &TensorTy,
        b: &TensorTy,
        lspan: Span,
        rspan: Span,
    ) -> Val {
        let least = if body.kind == BodyKind::Kernel { 2 } else { 1 };
        for (t, s) in [(a, lspan), (b, rspan)] {
            if t.rank() < least {
                let need = if least == 2 {
                    "matmul of tiles needs rank 2 or more"
                } else {
                    "matmul needs a vector or a matrix"
                };
                self.error(
                    Diagnostic::error(codes::E0202, s, format!("{need}, found rank {}", t.rank()))
                        .with_label(format!("this is `{t}`")),
                );
                return Val::error();
            }
        }
        let (row, col) = (a.rank() == 1, b.rank() == 1);
        if row || col {
            // A vector as a matrix of one row (left) or one column
            // (right), that dimension dropped again from the result.
            let a = if row { unit_axis(a, 0) } else { a.clone() };
            let b = if col { unit_axis(b, 1) } else { b.clone() };
            let mut v = self.matmul(body, &a, &b, lspan, rspan);
            if let Ty::Tensor(t) = &mut v.ty {
                let r = t.rank();
                for at in [col.then_some(r - 1), row.then_some(r - 2)]
                    .into_iter()
                    .flatten()
                {
                    t.dims.remove(at);
                    if let Some(s) = &mut t.shard {
                        s.dims.remove(at);
                    }
                }
            }
            return v;
        }
        let float = a.dtype.is_float() || b.dtype.is_float();
        if float && !self.compensable(body, "@", lspan.to(rspan)) {
            return Val::error();
        }
        let (ra, rb) = (a.rank(), b.rank());
        let (m, ka) = (&a.dims[ra - 2], &a.dims[ra - 1]);
        let (kb, n) = (&b.dims[rb - 2], &b.dims[rb - 1]);
        if !ka.compatible(kb) {
            self.error(
                Diagnostic::error(codes::E0201, lspan.to(rspan), format!("matmul inner dimensions differ: {ka} and {kb}"))
                    .with_secondary(lspan, format!("`{a}` has {ka} columns"))
                    .with_secondary(rspan, format!("`{b}` has {kb} rows"))
                    .with_help("the last dimension of the left operand must equal the second-to-last of the right"),
            );
            return Val::error();
        }
        let dtype = match body.numerics.promote(a.dtype, b.dtype) {
            Some(d) if a.dtype.is_float() || a.dtype.is_int() => d,
            _ => {
                self.error(
                    Diagnostic::error(
                        codes::E0200,
                        lspan.to(rspan),
                        format!("matmul of `{}` and `{}`", a.dtype, b.dtype),
                    )
                    .with_secondary(lspan, format!("`{}`", a.dtype))
                    .with_secondary(rspan, format!("`{}`", b.dtype))
                    .with_help("convert the operands to one numeric dtype"),
                );
                return Val::error();
            }
        };
        let batch_a = &a.dims[..ra - 2];
        let batch_b = &b.dims[..rb - 2];
        let span = lspan.to(rspan);
        let Some(mut dims) = self.broadcast(batch_a, batch_b, span, lspan, rspan, a, b) else {
            return Val::error();
        };
        dims.push(m.clone());
        dims.push(n.clone());
        let shard = if a.shard.is_none() && b.shard.is_none() {
            None
        } else {
            let nb = dims.len() - 2;
            let mut s = Shard::replicated(dims.len());
            for i in 0..nb {
                let xa = (i + ra - 2)
                    .checked_sub(nb)
                    .and_then(|j| a.dim_axis(j).cloned());
                let xb = (i + rb - 2)
                    .checked_sub(nb)
                    .and_then(|j| b.dim_axis(j).cloned());
                s.dims[i] = xa.or(xb);
            }
            s.dims[nb] = a.dim_axis(ra - 2).cloned();
            s.dims[nb + 1] = b.dim_axis(rb - 1).cloned();
            let (xka, xkb) = (a.dim_axis(ra - 1).cloned(), b.dim_axis(rb - 2).cloned());
            match (xka, xkb) {
                (None, None) => {}
                (Some(x), Some(y)) if x == y => s.partial.push(x),
                (x, y) => {
                    let (axis, which) = match (&x, &y) {
                        (Some(x), _) => (x.axis.clone(), lspan),
                        (_, Some(y)) => (y.axis.clone(), rspan),
                        _ => (String::new(), span),
                    };
                    self.error(
                        Diagnostic::error(codes::E0405, span, format!("the contracted dimension is split over `{axis}` in only one operand"))
                            .with_secondary(which, format!("split over `{axis}` here"))
                            .with_help(format!("gather it first: `all_gather(..., {axis})`, or shard the other operand's contracted dimension over `{axis}` too")),
                    );
                    return Val::error();
                }
            }
            match (a.partial().is_empty(), b.partial().is_empty()) {
                (true, true) => {}
                (false, true) => s.partial.extend(a.partial().iter().cloned()),
                (true, false) => s.partial.extend(b.partial().iter().cloned()),
                (false, false) => {
                    self.nonlinear_partial(a, span, "@");
                    return Val::error();
                }
            }
            Some(s)
        };
        if body.kind != BodyKind::Kernel {
            body.numerics.check_storage(dtype, span, self.diags);
        }
        // 8-bit integers multiply into int32 (as torch._int_mm and the
        // tensor cores' s8 products): their sums overflow 8 bits at once.
        let dtype = tessera_core::Dtype::matmul_result(dtype);
        Val::of(Ty::Tensor(TensorTy { dims, dtype, shard }))
    }

    pub(crate) fn transpose(&mut self, v: Val, span: Span) -> Val {
        match v.ty {
            Ty::Error => Val::error(),
            Ty::Tensor(mut t) if t.rank() >= 2 => {
                let r = t.rank();
                t.dims.swap(r - 2, r - 1);
                if let Some(s) = &mut t.shard {
                    s.dims.swap(r - 2, r - 1);
                }
                Val::of(Ty::Tensor(t))
            }
            other => {
                self.error(
                    Diagnostic::error(
                        codes::E0202,
                        span,
                        "transpose needs a tensor of rank 2 or more",
                    )
                    .with_label(format!("this is {}", other.describe())),
                );
                Val::error()
            }
        }
    }
}

/// Whether `tensor op scalar` (or `scalar op tensor`) is linear in the tensor.
fn linear_with_scalar(op: BinOp, tensor_on_left: bool) -> bool {
    matches!(op, BinOp::Mul) || (op == BinOp::Div && tensor_on_left)
}

/// `t` with a dimension of extent 1 inserted at `at` (replicated).
fn unit_axis(t: &TensorTy, at: usize) -> TensorTy {
    let mut t = t.clone();
    t.dims.insert(at, Dim::known(1));
    if let Some(s) = &mut t.shard {
        s.dims.insert(at, None);
    }
    t
}

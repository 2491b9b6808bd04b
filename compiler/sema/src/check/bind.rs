//! Argument binding: matching a call's arguments to the callee's
//! parameters, unifying dimension symbols and dtype variables, and the
//! checks a parameter's declared type makes of its argument (shard
//! specs, attributes that must be constants).

use super::{Body, Cx, Val};
use crate::table::{BodyKind, Entry};
use crate::ty::{Const, Dim, TensorTy, Ty};
use std::collections::HashMap;
use tessera_diagnostics::{codes, Diagnostic, Span};
use tessera_syntax::ast::{self, ArgKind, DimKind, ElemType, TypeKind};

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
pub(super) fn param_mismatch(
    p: &ast::Param,
    arg: &Bound,
    callee: &str,
    what: String,
) -> Diagnostic {
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
pub(super) fn is_bool_attribute(p: &ast::Param) -> bool {
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
    /// Binds call arguments to parameters; evaluates them in the caller.
    pub(super) fn bind_args(
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
}

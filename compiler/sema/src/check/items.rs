//! Checking items as declared: signatures, op and kernel bodies with their
//! symbolic dimensions held rigid, host fns, and the numerics of each.

use super::{Body, Cx, Local, Val};
use crate::numerics::NumericsCheck;
use crate::table::BodyKind;
use crate::ty::{Const, Dim, TensorTy, Ty, MAX_ELEMENTS};
use crate::Unit;
use tessera_diagnostics::{codes, Diagnostic, Span};
use tessera_syntax::ast::{self, DimKind, ElemType, Item, StmtKind, TypeKind};
use tessera_syntax::printer::dim_text;

/// Checks every item of one user file: ops and kernels first, then host
/// fns, so that a host call of an op checked again at the call's sizes
/// knows which of its body's errors were reported where it is defined.
pub(crate) fn check_unit(cx: &mut Cx<'_, '_>, unit: &Unit<'_>) {
    for item in &unit.ast.items {
        match item {
            Item::Op(op) => check_op(cx, unit, op),
            Item::Kernel(k) => check_kernel(cx, unit, k),
            _ => {}
        }
    }
    for item in &unit.ast.items {
        if let Item::Fn(f) = item {
            check_fn(cx, unit, f);
        }
    }
    super::schedule::check_schedules(cx, unit);
}

/// Collects the dimension symbols written in a type.
pub(crate) fn dim_symbols(ty: &ast::Type, out: &mut Vec<String>) {
    fn walk(dim: &ast::Dim, out: &mut Vec<String>) {
        for (s, _) in dim.symbols() {
            let pack = matches!(&dim.kind, DimKind::Pack(p) if p == s);
            if !pack && !out.iter().any(|o| o == s) {
                out.push(s.to_owned());
            }
        }
    }
    match &ty.kind {
        TypeKind::Tensor { dims, .. } => dims.iter().for_each(|d| walk(d, out)),
        TypeKind::List(inner) => dim_symbols(inner, out),
        _ => {}
    }
}

/// Applies `numerics` statements at the top of a body; reports misplaced ones.
fn body_numerics(cx: &mut Cx<'_, '_>, body: &mut Body, block: &ast::Block) {
    let mut leading = true;
    for stmt in &block.stmts {
        match &stmt.kind {
            StmtKind::Numerics(n) if leading && body.kind != BodyKind::Host => {
                body.numerics.apply(n, cx.diags);
            }
            StmtKind::Numerics(n) => {
                let why = if body.kind == BodyKind::Host {
                    "numerics apply to device code: ops and kernels, or the whole file"
                } else {
                    "it must come before the other statements"
                };
                cx.error(
                    Diagnostic::error(codes::E0504, n.span, "misplaced numerics setting")
                        .with_label(why)
                        .with_help("move it to the start of the op, or to file level"),
                );
            }
            StmtKind::Empty => {}
            _ => leading = false,
        }
    }
}

impl Cx<'_, '_> {
    /// Lowers a written type in the environment of `body`: symbols it binds
    /// are substituted; unbound ones become symbolic (`rigid`) or unknown.
    pub(crate) fn lower_type(&mut self, body: &Body, ty: &ast::Type, rigid: bool) -> Ty {
        match &ty.kind {
            TypeKind::Tensor { dims, elem, shard } => {
                let mut out = Vec::with_capacity(dims.len());
                for dim in dims {
                    match &dim.kind {
                        DimKind::Pack(name) => match body.packs.get(name) {
                            Some(ds) => out.extend(ds.iter().cloned()),
                            None => return Ty::Error,
                        },
                        _ => out.push(self.lower_dim(body, dim, rigid)),
                    }
                }
                let dtype = match elem {
                    ElemType::Dtype(d, _) => *d,
                    ElemType::Var(name) => match body.dtypes.get(&name.text) {
                        Some(d) => *d,
                        None => {
                            self.error(unknown_type(name));
                            return Ty::Error;
                        }
                    },
                };
                if dims.is_empty() && dtype == ast::Dtype::Bool && shard.is_none() {
                    return Ty::Bool;
                }
                let count = out.iter().try_fold(Dim::known(1), |acc, d| acc.mul(d));
                let too_big = match &count {
                    None => true,
                    Some(d) => d.as_known().is_some_and(|n| n > MAX_ELEMENTS),
                };
                if too_big {
                    self.error(
                        Diagnostic::error(codes::E0207, ty.span, "tensor type is too large")
                            .with_label("more than 2^48 elements")
                            .with_note("tensors may have at most 2^48 elements"),
                    );
                    return Ty::Error;
                }
                let shard = shard
                    .as_ref()
                    .and_then(|s| self.meshes.shard(s, out.len(), self.diags));
                Ty::Tensor(TensorTy {
                    dims: out,
                    dtype,
                    shard,
                })
            }
            TypeKind::Int => Ty::Int,
            TypeKind::Float => Ty::Float,
            TypeKind::Str => Ty::Str,
            TypeKind::List(inner) => Ty::List(Box::new(self.lower_type(body, inner, rigid))),
            TypeKind::Tuple(parts) => Ty::Tuple(
                parts
                    .iter()
                    .map(|p| self.lower_type(body, p, rigid))
                    .collect(),
            ),
            TypeKind::Named(name) => {
                if let Some(d) = body.dtypes.get(&name.text) {
                    return Ty::Tensor(TensorTy::new(Vec::new(), *d));
                }
                if name.text == "axis" {
                    return Ty::Axis(crate::ty::AxisRef {
                        mesh: String::new(),
                        axis: String::new(),
                        size: 1,
                    });
                }
                self.error(unknown_type(name));
                Ty::Error
            }
        }
    }

    /// Lowers one written dimension.
    pub(crate) fn lower_dim(&mut self, body: &Body, dim: &ast::Dim, rigid: bool) -> Dim {
        match &dim.kind {
            DimKind::Const(0) => {
                self.error(
                    Diagnostic::error(codes::E0207, dim.span, "dimension of size 0")
                        .with_label("dimensions must be at least 1"),
                );
                Dim::Unknown
            }
            DimKind::Const(n) => Dim::known(*n),
            DimKind::Sym(s) => match body.dims.get(s) {
                Some(d) => d.clone(),
                None if rigid => Dim::sym(s),
                None => Dim::Unknown,
            },
            DimKind::Pack(_) => Dim::Unknown,
            DimKind::Div(_, 0) => {
                self.error(
                    Diagnostic::error(codes::E0207, dim.span, "a dimension divided by 0")
                        .with_label("the divisor must be at least 1"),
                );
                Dim::Unknown
            }
            _ if dim
                .operands()
                .iter()
                .any(|o| matches!(o.kind, DimKind::Pack(_))) =>
            {
                self.error(
                    Diagnostic::error(codes::E0207, dim.span, "a dimension pack in an expression")
                        .with_label("`..S` stands for several dimensions")
                        .with_help("write the pack on its own: `tensor<..S, N + 1, fp32>`"),
                );
                Dim::Unknown
            }
            DimKind::Div(a, k) => self
                .lower_dim(body, a, rigid)
                .div(*k)
                .unwrap_or(Dim::Unknown),
            DimKind::Quot { dim: a, by, ceil } => {
                let x = self.lower_dim(body, a, rigid);
                let bound = |s: &str| body.dims.get(s).and_then(Dim::as_known);
                let Some(k) = by.eval(&bound) else {
                    // A kernel constant left here is negative or not an
                    // integer: its own error says so (`unbound_out_dims`).
                    // An op's `int` attribute is known when the op is
                    // instantiated, which checks the size then.
                    let attribute = |s: &str| {
                        body.kind == BodyKind::Op
                            && (body.local(s).is_some_and(|l| l.val.ty == Ty::Int)
                                || !rigid && body.dims.contains_key(s))
                    };
                    if by
                        .symbols()
                        .iter()
                        .all(|(s, _)| body.consts.contains_key(*s) || attribute(s))
                    {
                        return Dim::Unknown;
                    }
                    self.error(
                        Diagnostic::error(
                            codes::E0207,
                            by.span,
                            format!("a dimension divided by `{}`", dim_text(by)),
                        )
                        .with_label("not a literal, a kernel constant or an op's `int` attribute")
                        .with_help(
                            "a divisor in a type is an integer, a constant of the kernel \
                             (`tensor<cdiv(N, BLOCK), fp32>` with `<BLOCK: int = 128>`) or an \
                             `int` attribute of the op (`p: int = 4`)",
                        ),
                    );
                    return Dim::Unknown;
                };
                if k == 0 {
                    self.error(
                        Diagnostic::error(codes::E0207, dim.span, "a dimension divided by 0")
                            .with_label("the divisor must be at least 1"),
                    );
                    return Dim::Unknown;
                }
                let q = if *ceil { x.ceil_div(k) } else { x.div(k) };
                q.unwrap_or(Dim::Unknown)
            }
            DimKind::Mul(a, b) | DimKind::Add(a, b) | DimKind::Sub(a, b) => {
                let (x, y) = (
                    self.lower_dim(body, a, rigid),
                    self.lower_dim(body, b, rigid),
                );
                let r = match &dim.kind {
                    DimKind::Mul(..) => x.mul(&y),
                    DimKind::Add(..) => x.add(&y),
                    _ => x.sub(&y),
                };
                // A difference that is negative at known sizes.
                if let (DimKind::Sub(..), Some(a), Some(b)) =
                    (&dim.kind, x.as_known(), y.as_known())
                {
                    if b > a {
                        self.error(
                            Diagnostic::error(
                                codes::E0207,
                                dim.span,
                                format!("a negative dimension ({a} - {b})"),
                            )
                            .with_label("dimensions must not be negative"),
                        );
                    }
                }
                r.unwrap_or(Dim::Unknown)
            }
        }
    }

    /// Binds the parameters of an item as locals of `body`, rigidly.
    fn bind_params(&mut self, body: &mut Body, params: &[ast::Param]) {
        let mut seen = std::collections::HashMap::new();
        for p in params {
            if let Some(prev) = seen.insert(p.name.text.clone(), p.name.span) {
                self.error(
                    Diagnostic::error(
                        codes::E0101,
                        p.name.span,
                        format!("parameter `{}` is declared twice", p.name.text),
                    )
                    .with_label("declared again here")
                    .with_secondary(prev, "first declared here"),
                );
            }
            let mut ty = self.lower_type(body, &p.ty, true);
            if let Ty::Tensor(t) = &ty {
                body.numerics.check_storage(t.dtype, p.ty.span, self.diags);
            }
            if let Ty::Tuple(_) = ty {
                self.error(results_only(&p.ty, "an op's result type"));
                ty = Ty::Error;
            }
            let mut ty = match (body.kind, ty) {
                (BodyKind::Kernel, Ty::Tensor(t)) if !t.dims.is_empty() => Ty::Global(t),
                (_, ty) => ty,
            };
            if p.is_output() {
                if body.kind == BodyKind::Kernel && !matches!(ty, Ty::Global(_) | Ty::Error) {
                    let (label, help) = match p.mode {
                        ast::ParamMode::InOut => (
                            "a scalar is passed by value",
                            "only a tensor is updated in place; return a new scalar from an \
                             `out` tensor of one element",
                        ),
                        _ => (
                            "a kernel stores into tensors",
                            "declare a tensor of one element, `out total: tensor<1, fp32>`, \
                             and store at index 0: `store(total, [0], v)`",
                        ),
                    };
                    self.error(
                        Diagnostic::error(
                            codes::E0109,
                            p.span,
                            format!(
                                "`{}` parameter `{}` is not a tensor",
                                p.mode.name(),
                                p.name.text
                            ),
                        )
                        .with_label(label)
                        .with_help(help),
                    );
                    // Reported once: no store or "no outputs" error after.
                    body.outs.insert(p.name.text.clone());
                    ty = Ty::Error;
                } else if body.kind == BodyKind::Kernel {
                    body.outs.insert(p.name.text.clone());
                } else {
                    self.error(
                        Diagnostic::error(
                            codes::E0109,
                            p.span,
                            format!("`{}` parameters exist only in kernels", p.mode.name()),
                        )
                        .with_label("not a kernel parameter")
                        .with_help("ops and fns return their results"),
                    );
                }
            }
            // Attributes are known when the op is instantiated; in the rigid
            // check only their type matters, and an `int` one is a size
            // known when the op compiles (`topk(x, k)`, `zeros([n, D])`).
            let mut val = Val::of(ty);
            if body.kind == BodyKind::Op && val.ty == Ty::Int {
                val.dim = Some(Dim::sym(&p.name.text));
            }
            body.bind(
                &p.name.text,
                Local {
                    val,
                    mutable: false,
                    declared: false,
                    span: p.name.span,
                },
            );
        }
    }

    /// Declares the dims of the params as rigid symbols of `body`.
    fn rigid_dims(&mut self, body: &mut Body, params: &[ast::Param], ret: Option<&ast::Type>) {
        let mut syms = Vec::new();
        for p in params {
            dim_symbols(&p.ty, &mut syms);
        }
        if let Some(ret) = ret {
            dim_symbols(ret, &mut syms);
        }
        for s in syms {
            body.dims.insert(s.clone(), Dim::sym(&s));
        }
    }
}

/// Types the defaults of `params` that are expressions rather than
/// literals (`scale: float = rsqrt(D)`), in the body with every parameter
/// bound: an `int` default must be an integer, a `float` one a number, and
/// no other parameter may have one.
fn expression_defaults(cx: &mut Cx<'_, '_>, body: &mut Body, params: &[ast::Param]) {
    for p in params {
        let Some(d) = p.default.as_ref().filter(|d| const_literal(d).is_none()) else {
            continue;
        };
        let v = cx.expr(body, d);
        let fits = matches!(
            (&p.ty.kind, &v.ty),
            (_, Ty::Error) | (TypeKind::Int, Ty::Int) | (TypeKind::Float, Ty::Int | Ty::Float)
        );
        if !fits {
            cx.error(
                Diagnostic::error(
                    codes::E0208,
                    d.span,
                    format!("the default of `{}` must be {} expression", p.name.text, match p.ty.kind {
                        TypeKind::Int => "an integer",
                        TypeKind::Float => "a number",
                        _ => "a literal, not an",
                    }),
                )
                .with_label(format!("this is {}", v.ty.describe()))
                .with_help("only `int` and `float` attributes take expression defaults, such as `rsqrt(D)`"),
            );
        }
    }
}

/// Every size in the types of `inputs` must be found from the arguments
/// when the op or kernel is called: a symbol written alone (`N`), one of
/// `consts`, or the one unknown of an expression whose other symbols are
/// found (`2 * H`, `P + T` with `T` found), to a fixpoint. A symbol met only
/// in products with others (`H * D`) is E0201 at its first use (the call
/// failed with "`H` has no value").
fn unsolvable_dims(cx: &mut Cx<'_, '_>, inputs: &[&ast::Param], consts: &[&str]) {
    let dims: Vec<&ast::Dim> = inputs
        .iter()
        .filter_map(|p| match &p.ty.kind {
            TypeKind::Tensor { dims, .. } => Some(dims),
            _ => None,
        })
        .flatten()
        .collect();
    let mut known: Vec<&str> = consts.to_vec();
    for d in &dims {
        if let DimKind::Sym(s) = &d.kind {
            known.push(s);
        }
    }
    loop {
        let before = known.len();
        for d in &dims {
            let is_known = |s: &str| known.contains(&s).then_some(1);
            if d.solvable(&is_known) {
                let free = d.symbols().into_iter().find(|(s, _)| !known.contains(s));
                if let Some((s, _)) = free {
                    known.push(s);
                }
            }
        }
        if known.len() == before {
            break;
        }
    }
    for d in &dims {
        // A pack (`..S`) binds any number of dims; in an expression it is
        // E0207 already.
        if has_pack(d) {
            continue;
        }
        let mut free: Vec<&str> = Vec::new();
        for (s, _) in d.symbols() {
            if !known.contains(&s) && !free.contains(&s) {
                free.push(s);
            }
        }
        if free.is_empty() {
            continue;
        }
        let names: Vec<String> = free.iter().map(|s| format!("`{s}`")).collect();
        let (what, them) = if free.len() == 1 {
            (format!("the size {}", names[0]), "it")
        } else {
            (format!("the sizes {}", names.join(" and ")), "them")
        };
        cx.error(
            Diagnostic::error(
                codes::E0201,
                d.span,
                format!("{what} cannot be found from the arguments"),
            )
            .with_label(format!(
                "no parameter has {them} alone, and `{}` does not decide {them}",
                dim_text(d)
            ))
            .with_help(format!(
                "give a parameter a dimension `{}` of its own, or write this one as a single \
                 size and `reshape` it in the body",
                free[0]
            )),
        );
        known.extend(free);
    }
}

/// Whether `d` is or holds a pack (`..S`).
fn has_pack(d: &ast::Dim) -> bool {
    matches!(d.kind, DimKind::Pack(_)) || d.operands().into_iter().any(has_pack)
}

/// The symbolic dims of an `out` parameter of kernel `k` must be bound by
/// an input parameter or be one of its constants: the launch takes every
/// size from its inputs, so an output's own size would be unknown.
fn unbound_out_dims(cx: &mut Cx<'_, '_>, k: &ast::KernelDef) {
    fn dims_of(p: &ast::Param) -> Vec<(&str, Span)> {
        match &p.ty.kind {
            TypeKind::Tensor { dims, .. } => dims.iter().flat_map(ast::Dim::symbols).collect(),
            _ => Vec::new(),
        }
    }
    // An `int` constant with a literal default is its value in the types
    // already (`tessera_syntax::resolve`); a constant's name left there has
    // no size: negative, or not an integer.
    let consts: Vec<&str> = k.generics.iter().map(|g| g.name.text.as_str()).collect();
    for p in &k.params {
        for (s, span) in dims_of(p) {
            if consts.contains(&s) {
                cx.error(
                    Diagnostic::error(
                        codes::E0207,
                        span,
                        format!("the constant `{s}` sizes a tensor but is not a size"),
                    )
                    .with_label("a size is a non-negative integer")
                    .with_help(format!(
                        "give `{s}` an `int` default of 0 or more (`<{s}: int = 2>`), or set one with `--const {s}=...`"
                    )),
                );
            }
        }
    }
    let mut bound: Vec<&str> = consts.clone();
    for p in k.params.iter().filter(|p| p.is_input()) {
        bound.extend(dims_of(p).into_iter().map(|(s, _)| s));
    }
    for p in k.params.iter().filter(|p| !p.is_input()) {
        for (s, span) in dims_of(p) {
            if !bound.contains(&s) {
                cx.error(
                    Diagnostic::error(
                        codes::E0201,
                        span,
                        format!(
                            "the size `{s}` of output `{}` is bound by no input",
                            p.name.text
                        ),
                    )
                    .with_label("no input parameter has this dimension")
                    .with_help(format!(
                        "sizes come from the inputs at the launch: give an input a dimension \
                         `{s}`, make `{s}` a kernel constant (`<{s}: int = 64>`), or let the \
                         caller allocate it, as Triton's host code does: `inout {}: ...`, \
                         called with `zeros<...>([..])` of the sizes it knows",
                        p.name.text
                    )),
                );
                bound.push(s);
            }
        }
    }
}

/// The dimension symbols of an op's declared result must be bound by its
/// parameters: a call takes every size from its arguments, so a result's
/// own size would be unknown (it failed when the op compiled, at the first
/// use of the symbol).
fn unbound_result_dims(cx: &mut Cx<'_, '_>, op: &ast::OpDef) {
    fn syms<'t>(ty: &'t ast::Type, out: &mut Vec<(&'t str, Span)>) {
        match &ty.kind {
            TypeKind::Tensor { dims, .. } => {
                for d in dims {
                    if !matches!(d.kind, DimKind::Pack(_)) {
                        out.extend(d.symbols());
                    }
                }
            }
            TypeKind::Tuple(parts) => parts.iter().for_each(|p| syms(p, out)),
            _ => {}
        }
    }
    let Some(ret) = &op.ret else {
        return;
    };
    let mut bound = Vec::new();
    for p in &op.params {
        syms(&p.ty, &mut bound);
    }
    let mut bound: Vec<&str> = bound.into_iter().map(|(s, _)| s).collect();
    // An `int` attribute is a size given at each call (`k: int = 2` in
    // `-> tensor<B, k, fp32>`).
    bound.extend(
        op.params
            .iter()
            .filter(|p| matches!(p.ty.kind, TypeKind::Int))
            .map(|p| p.name.text.as_str()),
    );
    let mut results = Vec::new();
    syms(ret, &mut results);
    let mut reported: Vec<&str> = Vec::new();
    for (s, span) in results {
        if bound.contains(&s) || reported.contains(&s) {
            continue;
        }
        reported.push(s);
        cx.error(
            Diagnostic::error(
                codes::E0201,
                span,
                format!(
                    "the size `{s}` of the result of `{}` is bound by no parameter",
                    op.name.text
                ),
            )
            .with_label("no parameter has this dimension")
            .with_help(format!(
                "sizes come from the arguments at each call: give a parameter a dimension `{s}` \
                 (`w: tensor<{s}, D, fp32>`), or write the size from theirs (`N * 2`)"
            )),
        );
    }
}

/// The value of a literal default (`= -1`, `= 1e-5`, `= true`).
pub(crate) fn const_literal(e: &ast::Expr) -> Option<Const> {
    match &e.kind {
        ast::ExprKind::Int(v) => i64::try_from(*v).ok().map(Const::Int),
        ast::ExprKind::Float(v) => Some(Const::Float(*v)),
        ast::ExprKind::Bool(b) => Some(Const::Bool(*b)),
        ast::ExprKind::Str(s) => Some(Const::Str(s.clone())),
        ast::ExprKind::Unary {
            op: ast::UnOp::Neg,
            operand,
        } => match const_literal(operand)? {
            Const::Int(v) => Some(Const::Int(-v)),
            Const::Float(v) => Some(Const::Float(-v)),
            _ => None,
        },
        _ => None,
    }
}

/// E0213 for several results `(T, U)` where they cannot be (`where`
/// says where they can).
pub(crate) fn results_only(ty: &ast::Type, place: &str) -> Diagnostic {
    Diagnostic::error(codes::E0213, ty.span, "several results are not a type here")
        .with_label(format!("`(...)` is {place}"))
        .with_help(
            "an op returns several tensors with `-> (tensor<...>, tensor<...>)` and \
             `return (a, b);`, and its caller binds them with `let (a, b) = f(x);`",
        )
}

pub(crate) fn unknown_type(name: &ast::Name) -> Diagnostic {
    let mut d = Diagnostic::error(
        codes::E0213,
        name.span,
        format!("unknown type `{}`", name.text),
    )
    .with_label("not a type");
    let dtypes = ast::Dtype::ALL.map(|d| d.name());
    if let Some(dt) = ast::Dtype::from_foreign_name(&name.text) {
        d = d.with_help(format!(
            "the dtype `{}` is spelled `{}` here",
            name.text,
            dt.name()
        ));
    } else if let Some(s) = crate::suggest::closest(
        &name.text,
        dtypes.iter().copied().chain(["int", "float", "str"]),
    ) {
        d = d.with_help(format!("did you mean `{s}`?"));
    }
    d
}

fn check_op(cx: &mut Cx<'_, '_>, unit: &Unit<'_>, op: &ast::OpDef) {
    let numerics = cx
        .file_numerics
        .get(&unit.file)
        .copied()
        .unwrap_or_default();
    let mut body = Body::new(BodyKind::Op, unit.file, &op.name.text, numerics);
    if let Some(block) = &op.body {
        body_numerics(cx, &mut body, block);
    }
    cx.checked
        .numerics
        .insert(op.name.text.clone(), body.numerics);
    if !op.generics.is_empty() {
        // Generic ops are checked when instantiated on concrete types.
        for g in &op.generics {
            if g.default.is_some() {
                cx.error(
                    Diagnostic::error(codes::E0109, g.span, "op generics cannot have defaults")
                        .with_label("dtype parameters are inferred from the arguments"),
                );
            }
        }
        return;
    }
    if op.body.is_some() {
        let inputs: Vec<&ast::Param> = op.params.iter().collect();
        unsolvable_dims(cx, &inputs, &[]);
        unbound_result_dims(cx, op);
    }
    cx.rigid_dims(&mut body, &op.params, op.ret.as_ref());
    cx.bind_params(&mut body, &op.params);
    expression_defaults(cx, &mut body, &op.params);
    if let Some(ret) = &op.ret {
        let ty = cx.lower_type(&body, ret, true);
        let parts = match &ty {
            Ty::Tuple(parts) => parts.iter().collect(),
            one => vec![one],
        };
        for part in parts {
            if let Ty::Tensor(t) = part {
                body.numerics.check_storage(t.dtype, ret.span, cx.diags);
            }
        }
        body.ret = Some((ty, ret.span));
    }
    let Some(block) = &op.body else { return };
    cx.stack.push(op.name.text.clone());
    cx.block(&mut body, block);
    cx.failed_assert = false;
    cx.stack.pop();
    if !stmt_returns(block) {
        cx.error(
            Diagnostic::error(
                codes::E0110,
                op.name.span,
                format!("op `{}` does not return a value", op.name.text),
            )
            .with_label("this op never returns")
            .with_secondary(block.span, "the body ends without `return`")
            .with_help("end the body with `return <expression>;`"),
        );
    }
}

fn check_kernel(cx: &mut Cx<'_, '_>, unit: &Unit<'_>, k: &ast::KernelDef) {
    let numerics = cx
        .file_numerics
        .get(&unit.file)
        .copied()
        .unwrap_or_default();
    let mut body = Body::new(BodyKind::Kernel, unit.file, &k.name.text, numerics);
    body_numerics(cx, &mut body, &k.body);
    cx.checked
        .numerics
        .insert(k.name.text.clone(), body.numerics);
    for g in &k.generics {
        let value = g.default.as_ref().and_then(const_literal);
        match value {
            Some(v) => {
                body.consts.insert(g.name.text.clone(), v);
            }
            None => {
                cx.error(
                    Diagnostic::error(
                        codes::E0208,
                        g.span,
                        format!("kernel constant `{}` needs a value", g.name.text),
                    )
                    .with_label("no default value")
                    .with_help(format!("give it one: `{}: int = 128`", g.name.text)),
                );
                // Its uses are not errors of their own.
                body.bind(
                    &g.name.text,
                    Local {
                        val: Val::error(),
                        mutable: false,
                        declared: false,
                        span: g.name.span,
                    },
                );
            }
        }
    }
    // `int` and `float` are compile-time numbers: a kernel's are its
    // constants (`<S: float = 1.0>`); a value passed at each launch has a
    // dtype (`s: fp32`, `n: int32`).
    for p in &k.params {
        let word = match p.ty.kind {
            ast::TypeKind::Int => "int32",
            ast::TypeKind::Float => "fp32",
            _ => continue,
        };
        cx.error(
            Diagnostic::error(
                codes::E0211,
                p.ty.span,
                format!("a kernel parameter `{}` needs a dtype", p.name.text),
            )
            .with_label("a compile-time number, not a run-time value")
            .with_help(format!(
                "a scalar passed at each launch is `{}: {word}`; a compile-time one is a constant: `kernel {}<{}: ...>`",
                p.name.text, k.name.text, p.name.text
            )),
        );
    }
    cx.rigid_dims(&mut body, &k.params, None);
    cx.bind_params(&mut body, &k.params);
    let inputs: Vec<&ast::Param> = k.params.iter().filter(|p| p.is_input()).collect();
    let consts: Vec<&str> = k.generics.iter().map(|g| g.name.text.as_str()).collect();
    unsolvable_dims(cx, &inputs, &consts);
    unbound_out_dims(cx, k);
    tensor_defaults(cx, k);
    if body.outs.is_empty() {
        cx.error(
            Diagnostic::error(
                codes::E0603,
                k.name.span,
                format!("kernel `{}` has no outputs", k.name.text),
            )
            .with_label("nothing is written")
            .with_help("mark the parameters it writes with `out` (`out c: tensor<N, fp32>`), or `inout` for a tensor it updates"),
        );
    }
    if k.grid.is_empty() || k.grid.len() > 3 {
        cx.error(
            Diagnostic::error(
                codes::E0605,
                k.grid_span,
                "a kernel needs a grid of 1 to 3 dimensions",
            )
            .with_label(if k.grid.is_empty() {
                "no `grid(...)` clause"
            } else {
                "too many grid dimensions"
            })
            .with_help("for example `grid(cdiv(N, BLOCK))` after the parameters"),
        );
    }
    // The grid is computed before the launch, from the sizes alone.
    let mut sizes: Vec<&str> = k.generics.iter().map(|g| g.name.text.as_str()).collect();
    for p in &k.params {
        if let TypeKind::Tensor { dims, .. } = &p.ty.kind {
            sizes.extend(dims.iter().flat_map(|d| d.symbols()).map(|(s, _)| s));
        }
    }
    for g in &k.grid {
        let v = cx.expr(&mut body, g);
        if !matches!(v.ty, Ty::Int | Ty::Error) {
            cx.error(
                Diagnostic::error(codes::E0605, g.span, "grid dimensions must be integers")
                    .with_label(format!("this is {}", v.ty.describe())),
            );
        } else if let Some(part) = grid_misfit(g, &sizes).filter(|_| v.ty == Ty::Int) {
            cx.error(
                Diagnostic::error(
                    codes::E0605,
                    part.span,
                    "the grid is computed before the launch, from sizes alone",
                )
                .with_label("this is not a size")
                .with_help(
                    "build it from integers, the kernel's constants and its dimensions \
                     with `+`, `-`, `*`, `/`, `%`, `cdiv`, `min` and `max`",
                ),
            );
        }
    }
    cx.stack.push(k.name.text.clone());
    cx.block(&mut body, &k.body);
    cx.stack.pop();
}

/// The `= value` of a kernel's parameters: a scalar's default (`s: fp32 =
/// 1.0`, taken when the caller leaves it out) and an `out` tensor's start
/// value (`out m: tensor<N, fp32> = -inf`) are constants of their kind (a
/// number, `true`/`false` for a bool); an input tensor has none.
fn tensor_defaults(cx: &mut Cx<'_, '_>, k: &ast::KernelDef) {
    for p in &k.params {
        let (Some(d), TypeKind::Tensor { dims, elem, .. }) = (&p.default, &p.ty.kind) else {
            continue;
        };
        let name = &p.name.text;
        if !dims.is_empty() && p.is_input() {
            cx.error(
                Diagnostic::error(
                    codes::E0109,
                    d.span,
                    format!(
                        "{} tensor `{name}` cannot have a default",
                        if p.mode == ast::ParamMode::InOut {
                            "`inout`"
                        } else {
                            "input"
                        }
                    ),
                )
                .with_label(if p.mode == ast::ParamMode::InOut {
                    "an `inout` tensor starts as the argument the caller passes"
                } else {
                    "the caller passes every input tensor"
                })
                .with_help(
                    "an `out` parameter may say what it starts as before each launch: \
                     `out m: tensor<N, fp32> = -inf`",
                ),
            );
            continue;
        }
        let what = if dims.is_empty() {
            "default"
        } else {
            "start value"
        };
        let dtype = match elem {
            ast::ElemType::Dtype(d, _) => Some(*d),
            ast::ElemType::Var(_) => None,
        };
        let is_bool = dtype == Some(ast::Dtype::Bool);
        let (label, help) = match const_literal(d) {
            None => {
                cx.error(
                    Diagnostic::error(
                        codes::E0208,
                        d.span,
                        format!("the {what} of `{name}` must be a constant"),
                    )
                    .with_label("not a literal")
                    .with_help(
                        "write a number such as `0.0`, `1`, `-inf`, or `true`/`false` for a bool",
                    ),
                );
                continue;
            }
            Some(Const::Bool(_)) if !is_bool => {
                ("a boolean", "give it a number such as `0` or `1`")
            }
            Some(Const::Int(_) | Const::Float(_)) if is_bool => {
                ("a number", "give it `true` or `false`")
            }
            Some(Const::Float(_)) if dims.is_empty() && dtype.is_some_and(|d| d.is_int()) => {
                ("not an integer", "give it an integer literal such as `1`")
            }
            Some(_) => continue,
        };
        let ty = dtype.map_or_else(|| "generic".to_owned(), |d| d.to_string());
        cx.error(
            Diagnostic::error(
                codes::E0200,
                d.span,
                format!("the {what} of `{name}` does not fit its dtype `{ty}`"),
            )
            .with_label(label)
            .with_help(help),
        );
    }
}

/// The first part of grid expression `e` that is not computed from
/// integers and `sizes` (the kernel's constants and dimensions) by the
/// arithmetic the launch evaluates.
fn grid_misfit<'e>(e: &'e ast::Expr, sizes: &[&str]) -> Option<&'e ast::Expr> {
    use ast::{BinOp, ExprKind};
    match &e.kind {
        ExprKind::Int(_) => None,
        ExprKind::Name(n) if sizes.contains(&n.as_str()) => None,
        ExprKind::Binary {
            op: BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Rem,
            lhs,
            rhs,
        } => grid_misfit(lhs, sizes).or_else(|| grid_misfit(rhs, sizes)),
        ExprKind::Call { callee, args, .. }
            if args.len() == 2
                && matches!(
                    callee.text.as_str(),
                    "cdiv" | "min" | "max" | "minimum" | "maximum"
                ) =>
        {
            args.iter().find_map(|a| grid_misfit(&a.value, sizes))
        }
        _ => Some(e),
    }
}

fn check_fn(cx: &mut Cx<'_, '_>, unit: &Unit<'_>, f: &ast::FnDef) {
    let numerics = cx
        .file_numerics
        .get(&unit.file)
        .copied()
        .unwrap_or_default();
    let mut body = Body::new(BodyKind::Host, unit.file, &f.name.text, numerics);
    let Some(block) = &f.body else {
        cx.error(
            Diagnostic::error(
                codes::E0109,
                f.span,
                "`extern fn` is reserved for the standard library",
            )
            .with_label("user code cannot declare builtins"),
        );
        return;
    };
    if f.name.text == "main" && !f.params.is_empty() {
        let first = f.params[0].span;
        let last = f.params[f.params.len() - 1].span;
        cx.error(
            Diagnostic::error(
                codes::E0606,
                Span::new(first.file, first.lo, last.hi),
                "`fn main` takes no parameters",
            )
            .with_label("nothing passes these")
            .with_help(
                "make the inputs inside `main` (randn, load_npy), or run an op on files: \
                 `tsrc run FILE --entry OP --input NAME=PATH.npy`",
            ),
        );
    }
    body_numerics(cx, &mut body, block);
    cx.rigid_dims(&mut body, &f.params, f.ret.as_ref());
    cx.bind_params(&mut body, &f.params);
    if let Some(ret) = &f.ret {
        let mut ty = cx.lower_type(&body, ret, true);
        if let Ty::Tuple(_) = ty {
            cx.error(results_only(ret, "an op's result type, not a fn's"));
            ty = Ty::Error;
        }
        body.ret = Some((ty, ret.span));
    }
    cx.stack.push(f.name.text.clone());
    cx.block(&mut body, block);
    cx.stack.pop();
    if f.ret.is_some() && !stmt_returns(block) {
        cx.error(
            Diagnostic::error(
                codes::E0110,
                f.name.span,
                format!("fn `{}` does not always return a value", f.name.text),
            )
            .with_label("declared with a result type")
            .with_help("end every path with `return <expression>;`"),
        );
    }
}

/// Whether every path through `block` ends in `return`.
pub(crate) fn stmt_returns(block: &ast::Block) -> bool {
    block.stmts.iter().any(|s| match &s.kind {
        StmtKind::Return(_) => true,
        StmtKind::If {
            branches,
            otherwise: Some(otherwise),
        } => branches.iter().all(|(_, b)| stmt_returns(b)) && stmt_returns(otherwise),
        StmtKind::Error => true,
        _ => false,
    })
}

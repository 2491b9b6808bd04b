//! Building Graph IR from a checked op: the op's body is evaluated
//! symbolically, every op it calls is inlined (user ops and the stdlib's
//! algebraic ops alike), primitives become nodes, kernels become custom
//! nodes, and compile-time scalars are folded on the way.
//!
//! The program has passed the checker, so most rules hold; what the builder
//! still rejects (with E0700) is what a dataflow graph cannot express:
//! data-dependent control flow and indices not known at compile time.

mod call;
mod einsum;
mod expr;
mod index;
mod prims;
mod scan;
mod select;
mod stmt;
mod types;
mod widen;

use crate::infer::{infer, scalar_kind};
use crate::ir::{BinaryOp, Graph, Node, Op, Param, ScalarKind, SliceAxis, Type, UnaryOp, ValueId};
use crate::program::{Callable, Program};
use std::collections::HashMap;
use tessera_diagnostics::{codes, Diagnostic, Span};
use tessera_sema::{AxisRef, Const, Dim, MatmulPrecision, NumericsConfig, Shard, TensorTy};
use tessera_syntax::ast::{self, Dtype, ExprKind, StmtKind, UnOp};

/// Deepest chain of inlined calls (the checker rejects recursion; this is
/// a backstop).
const MAX_INLINE_DEPTH: usize = 64;
/// Most iterations of a `for` loop unrolled in an op body.
const MAX_UNROLL: i64 = 4096;

/// A value during building: a node, or something known at compile time.
#[derive(Clone, Debug)]
pub(crate) enum V {
    Node(ValueId),
    Int(i64),
    Dim(Dim),
    Float(f64),
    Bool(bool),
    Axis(AxisRef),
    List(Vec<V>),
    /// A string: an op's `str` attribute (`mode = "reflect"`).
    Str(String),
    Unit,
    /// A slice of extent 0 (`cache[0:pos]` at `pos = 0`): `concat` leaves
    /// it out; anywhere else it is an error.
    Empty,
}

/// The state of one inlined body.
struct Frame {
    scopes: Vec<HashMap<String, V>>,
    dims: HashMap<String, Dim>,
    packs: HashMap<String, Vec<Dim>>,
    dtypes: HashMap<String, Dtype>,
    numerics: NumericsConfig,
    /// Whether this body is the user's code (nodes get its spans) or the
    /// stdlib's (nodes get the span of the user's call).
    user: bool,
    site: Span,
}

impl Frame {
    /// An empty frame for a body with the given numerics; nodes get the
    /// body's own spans if `user`, else `site`.
    fn new(numerics: NumericsConfig, user: bool, site: Span) -> Frame {
        Frame {
            scopes: vec![HashMap::new()],
            dims: HashMap::new(),
            packs: HashMap::new(),
            dtypes: HashMap::new(),
            numerics,
            user,
            site,
        }
    }

    fn local(&self, name: &str) -> Option<&V> {
        self.scopes.iter().rev().find_map(|s| s.get(name))
    }

    fn bind(&mut self, name: &str, v: V) {
        if let Some(s) = self.scopes.last_mut() {
            s.insert(name.to_owned(), v);
        }
    }
}

enum Flow {
    Normal,
    Return(V),
}

type R<T> = Result<T, Box<Diagnostic>>;

fn unsupported(span: Span, msg: impl Into<String>, label: &str) -> Box<Diagnostic> {
    Box::new(Diagnostic::error(codes::E0700, span, msg).with_label(label))
}

/// An argument given to [`build_op`]: a tensor's type (concrete shapes at
/// run time, representative ones for goldens), or an attribute's value.
#[derive(Clone, Debug, PartialEq)]
pub enum Arg {
    /// A tensor (or scalar) operand of this type.
    Type(Type),
    /// An integer attribute.
    Int(i64),
    /// A float attribute.
    Float(f64),
    /// A boolean attribute.
    Bool(bool),
    /// A string attribute (`mode = "reflect"`).
    Str(String),
    /// A list of integers (`reshape`'s shape, `permute`'s dims).
    Ints(Vec<i64>),
    /// A list of tensor operands (`concat`'s and `stack`'s `xs`), one graph
    /// parameter each.
    Types(Vec<Type>),
    /// An attribute left to its default, evaluated at this call (an
    /// expression of the sizes and the attributes before it:
    /// `stride: int = kernel_size`, `scale: float = rsqrt(D)`).
    Default,
}

impl Arg {
    /// The attribute value a literal (`-1`, `1e-5`, `true`) is, if it is one.
    pub fn of_literal(e: &ast::Expr) -> Option<Arg> {
        match &e.kind {
            ExprKind::Int(v) => i64::try_from(*v).ok().map(Arg::Int),
            ExprKind::Float(v) => Some(Arg::Float(*v)),
            ExprKind::Bool(b) => Some(Arg::Bool(*b)),
            ExprKind::Str(s) => Some(Arg::Str(s.clone())),
            ExprKind::Unary {
                op: UnOp::Neg,
                operand,
            } => match Arg::of_literal(operand)? {
                Arg::Int(v) => Some(Arg::Int(-v)),
                Arg::Float(v) => Some(Arg::Float(-v)),
                _ => None,
            },
            _ => None,
        }
    }
}

impl std::fmt::Display for Arg {
    /// A type as its text form, an attribute as a literal.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Arg::Type(t) => write!(f, "{t}"),
            Arg::Int(v) => write!(f, "{v}"),
            Arg::Float(v) => write!(f, "{v:?}"),
            Arg::Bool(v) => write!(f, "{v}"),
            Arg::Str(v) => write!(f, "{v:?}"),
            Arg::Ints(v) => {
                let items: Vec<String> = v.iter().map(i64::to_string).collect();
                write!(f, "[{}]", items.join(", "))
            }
            Arg::Types(v) => {
                let items: Vec<String> = v.iter().map(Type::to_string).collect();
                write!(f, "[{}]", items.join(", "))
            }
            Arg::Default => f.write_str("default"),
        }
    }
}

/// Builds the graph of op `name`. `args` gives the parameters (concrete
/// shapes at run time, representative types for a generic op, attribute
/// values); without it, the op's declared (symbolic) types are used and
/// attributes take their defaults. Attributes become constants, not graph
/// parameters.
pub fn build_op(program: &Program<'_>, name: &str, args: Option<&[Arg]>) -> R<Graph> {
    let Some(Callable::Op(op, module)) = program.lookup(name) else {
        return Err(Box::new(Diagnostic::error(
            codes::E0100,
            Span::default(),
            format!("no op named `{name}`"),
        )));
    };
    let (mut b, mut frame) = Builder::start(program, op, module.is_none());
    if let Some(args) = args {
        let needed = op.params.iter().filter(|p| p.default.is_none()).count();
        if args.len() > op.params.len() || args.len() < needed {
            return Err(Box::new(
                Diagnostic::error(
                    codes::E0104,
                    op.name.span,
                    format!(
                        "`{name}` takes {} parameters, {} were given",
                        op.params.len(),
                        args.len()
                    ),
                )
                .with_label("declared here"),
            ));
        }
    }
    let mut pairs = Vec::new();
    for (i, p) in op.params.iter().enumerate() {
        // Trailing parameters not given take their defaults.
        let given = args.and_then(|a| a.get(i));
        let attr = match given {
            Some(Arg::Int(n)) => Some(V::Int(*n)),
            Some(Arg::Float(x)) => Some(V::Float(*x)),
            Some(Arg::Bool(v)) => Some(V::Bool(*v)),
            Some(Arg::Str(s)) => Some(V::Str(s.clone())),
            _ => None,
        };
        if let Some(v) = attr {
            frame.bind(&p.name.text, v);
            continue;
        }
        // `bool` is written like a rank-0 tensor type but is an attribute.
        let is_tensor = matches!(p.ty.kind, ast::TypeKind::Tensor { .. }) && !p.ty.is_attribute();
        if !is_tensor || matches!(given, None | Some(Arg::Default)) {
            if let Some(d) = &p.default {
                let v = b.expr(&mut frame, d)?;
                frame.bind(&p.name.text, v);
                continue;
            }
        }
        let ty = match given {
            Some(Arg::Type(t)) => {
                if let Some((i, n, axis)) = b.uneven_split(&p.ty, t) {
                    return Err(Box::new(
                        Diagnostic::error(
                            codes::E0410,
                            p.span,
                            format!(
                                "dimension {i} of argument `{}` has {n} elements, which `{}` ({} devices) cannot split evenly",
                                p.name.text, axis.axis, axis.size
                            ),
                        )
                        .with_label(format!("this is `{t}`"))
                        .with_help(format!("make dimension {i} a multiple of {}, or do not split it", axis.size)),
                    ));
                }
                if let Err(why) = b.fit(&mut frame, &p.ty, t) {
                    return Err(misfit(name, p, p.span, why));
                }
                t.clone()
            }
            _ => match b.lower_type(&frame, &p.ty)? {
                Some(t) => {
                    b.bind_type(&mut frame, &p.ty, &t);
                    t
                }
                None => {
                    return Err(unsupported(
                        p.ty.span,
                        format!("parameter `{}` has no graph type", p.name.text),
                        "only tensors and scalars can be parameters",
                    ))
                }
            },
        };
        let v = b.param(&p.name.text, ty.clone(), p.name.span);
        frame.bind(&p.name.text, V::Node(v));
        pairs.push((p, ty));
    }
    // Products met before the parameter that binds a factor.
    b.bind_types(&mut frame, name, &pairs, None)?;
    let (ret, span) = match &op.body {
        Some(body) => match b.block(&mut frame, body)? {
            Flow::Return(v) => (v, body.span),
            Flow::Normal => (V::Unit, body.span),
        },
        // A primitive (`extern op`) on its parameters.
        None => {
            let vals: Vec<(&str, V)> = op
                .params
                .iter()
                .map(|p| {
                    let v = frame.local(&p.name.text).cloned().unwrap_or(V::Unit);
                    (p.name.text.as_str(), v)
                })
                .collect();
            let span = op.name.span;
            (b.primitive(&mut frame, name, &vals, span)?, span)
        }
    };
    b.check_result(&frame, op, &ret)?;
    let several = matches!(
        op.ret.as_ref().map(|t| &t.kind),
        Some(ast::TypeKind::Tuple(_))
    );
    let results = match ret {
        V::List(parts) if several => parts,
        one => vec![one],
    };
    for v in results {
        let out = b.node(&frame, v, span)?;
        b.graph.outputs.push(out);
    }
    Ok(b.graph)
}

/// The arguments of op or kernel `name` at concrete shapes: each tensor
/// parameter's declared type with every dimension symbol `S` of size
/// `size(S)`, and each attribute's default (a kernel's are its inputs'
/// types). `None` for a generic op (dtype variables, dimension packs), an
/// attribute without a default, or a parameter that is neither.
pub fn concrete_args(
    program: &Program<'_>,
    name: &str,
    size: &dyn Fn(&str) -> u64,
) -> Option<Vec<Arg>> {
    let params: Vec<&ast::Param> = match program.lookup(name)? {
        Callable::Op(op, _) if op.generics.is_empty() => op.params.iter().collect(),
        Callable::Kernel(k) => k.params.iter().filter(|p| p.is_input()).collect(),
        _ => return None,
    };
    let mut b = Builder::new(program, name, NumericsConfig::default());
    let mut frame = Frame::new(NumericsConfig::default(), true, Span::default());
    /// Binds the symbols of `d` in `frame`; `false` for a pack.
    fn bind(d: &ast::Dim, frame: &mut Frame, size: &dyn Fn(&str) -> u64) -> bool {
        match &d.kind {
            ast::DimKind::Const(_) => true,
            ast::DimKind::Sym(s) => {
                frame.dims.insert(s.clone(), Dim::known(size(s)));
                true
            }
            ast::DimKind::Pack(_) => false,
            _ => d.operands().into_iter().all(|o| bind(o, frame, size)),
        }
    }
    for p in &params {
        if let ast::TypeKind::Tensor { dims, .. } = &p.ty.kind {
            if !dims.iter().all(|d| bind(d, &mut frame, size)) {
                return None;
            }
        }
    }
    let mut args = Vec::new();
    for p in params {
        if p.ty.is_attribute() {
            let v = b.expr(&mut frame, p.default.as_ref()?).ok()?;
            args.push(match v {
                V::Float(x) => Arg::Float(x),
                V::Bool(x) => Arg::Bool(x),
                V::Str(s) => Arg::Str(s),
                v => Arg::Int(const_int(&v)?),
            });
            continue;
        }
        match b.lower_type(&frame, &p.ty).ok()?? {
            t @ Type::Tensor(_) => args.push(Arg::Type(t)),
            Type::Scalar(_) => return None,
        }
    }
    Some(args)
}

/// Builds a graph that launches user kernel `name`: its inputs are the
/// graph's parameters (of types `args`, or the declared types with their
/// symbolic dimensions), its `out` tensors the results, in order.
pub fn build_kernel(program: &Program<'_>, name: &str, args: Option<&[Type]>) -> R<Graph> {
    let Some(Callable::Kernel(k)) = program.lookup(name) else {
        return Err(Box::new(Diagnostic::error(
            codes::E0100,
            Span::default(),
            format!("no kernel named `{name}`"),
        )));
    };
    let numerics = program.numerics(name).unwrap_or_default();
    let mut b = Builder::new(program, name, numerics);
    let frame = Frame::new(numerics, true, k.name.span);
    let inputs: Vec<&ast::Param> = k.params.iter().filter(|p| p.is_input()).collect();
    if let Some(args) = args {
        if args.len() != inputs.len() {
            return Err(Box::new(
                Diagnostic::error(
                    codes::E0104,
                    k.name.span,
                    format!(
                        "`{name}` takes {} inputs, {} were given",
                        inputs.len(),
                        args.len()
                    ),
                )
                .with_label("declared here"),
            ));
        }
    }
    let mut bound = Vec::new();
    let mut fitted = Frame::new(numerics, true, k.name.span);
    for (i, p) in inputs.iter().enumerate() {
        let ty = match args {
            Some(a) => {
                if let Err(why) = b.fit(&mut fitted, &p.ty, &a[i]) {
                    return Err(misfit(name, p, p.span, why));
                }
                a[i].clone()
            }
            None => match b.lower_type(&frame, &p.ty)? {
                Some(t) => t,
                None => {
                    return Err(unsupported(
                        p.span,
                        "a kernel input that is not a tensor",
                        "here",
                    ))
                }
            },
        };
        bound.push(Some(V::Node(b.param(&p.name.text, ty, p.span))));
    }
    let outs = b.kernel_launch(&frame, k, &inputs, bound, k.name.span)?;
    b.graph.outputs.extend(outs);
    Ok(b.graph)
}

/// E0201: an argument does not fit parameter `p` of `name`, reported at
/// `span` (the parameter, for an entry's arguments; the call otherwise).
fn misfit(name: &str, p: &ast::Param, span: Span, why: String) -> Box<Diagnostic> {
    Box::new(
        Diagnostic::error(
            codes::E0201,
            span,
            format!(
                "argument `{}` of `{name}` does not fit its parameter",
                p.name.text
            ),
        )
        .with_label(why),
    )
}

/// Builds a graph that calls op `name` (with a body or a primitive) on
/// `args`, matched to its parameters in order; tensor arguments become the
/// graph's parameters `arg0`, `arg1`, ... Host code uses this to run one
/// call of an op or of a primitive such as `sum` or `matmul`. With
/// `parts`, the call is bound by `let (...)` with that many names
/// (`split`, `chunk`, `topk`): each part is an output of the graph.
/// `call` is the calling expression: diagnostics about the call (an
/// argument that does not fit) and about the standard library's bodies are
/// reported there, those about the user's op bodies where they arise.
pub fn build_call(
    program: &Program<'_>,
    name: &str,
    args: &[Option<Arg>],
    parts: Option<usize>,
    call: Span,
) -> R<Graph> {
    let target = match program.lookup(name) {
        Some(t @ Callable::Op(..)) => t,
        _ => {
            return Err(Box::new(Diagnostic::error(
                codes::E0100,
                call,
                format!("no op named `{name}`"),
            )))
        }
    };
    let Callable::Op(op, module) = target else {
        unreachable!("matched above")
    };
    let (mut b, mut frame) = Builder::start(program, op, module.is_none());
    frame.site = call;
    let inputs: Vec<&ast::Param> = op.params.iter().collect();
    let mut bound = Vec::new();
    for (i, a) in args.iter().enumerate() {
        bound.push(match a {
            None | Some(Arg::Default) => None,
            Some(Arg::Int(n)) => Some(V::Int(*n)),
            Some(Arg::Float(x)) => Some(V::Float(*x)),
            Some(Arg::Bool(v)) => Some(V::Bool(*v)),
            Some(Arg::Str(s)) => Some(V::Str(s.clone())),
            Some(Arg::Ints(v)) => Some(V::List(v.iter().map(|n| V::Int(*n)).collect())),
            Some(Arg::Type(t)) => Some(V::Node(b.param(&format!("arg{i}"), t.clone(), call))),
            Some(Arg::Types(ts)) => Some(V::List(
                ts.iter()
                    .enumerate()
                    .map(|(j, t)| V::Node(b.param(&format!("arg{i}_{j}"), t.clone(), call)))
                    .collect(),
            )),
        });
    }
    bound.resize(inputs.len(), None);
    b.tuple_call = parts.map(|n| (call, n));
    let v = b.call_values(&mut frame, name, target, &inputs, bound, call)?;
    let values = match (v, parts) {
        (V::List(items), Some(n)) if items.len() == n => items,
        (_, Some(n)) => {
            return Err(unsupported(
                call,
                format!("`{name}` does not give {n} parts here"),
                "bound by `let (...)`",
            ))
        }
        (v, None) => vec![v],
    };
    for v in values {
        let out = b.node(&frame, v, call)?;
        b.graph.outputs.push(out);
    }
    Ok(b.graph)
}

struct Builder<'p, 'a> {
    program: &'p Program<'a>,
    graph: Graph,
    depth: usize,
    /// The dtype argument of the primitive being called (`rand<bf16>`).
    dtype_arg: Option<Dtype>,
    /// The call a `let (a, b, ...) = call;` binds, with its name count:
    /// that call gives its parts as a [`V::List`].
    tuple_call: Option<(Span, usize)>,
}

impl<'p, 'a> Builder<'p, 'a> {
    /// A builder for a graph named after `op`, and the frame of its body.
    fn start(program: &'p Program<'a>, op: &ast::OpDef, user: bool) -> (Self, Frame) {
        let name = &op.name.text;
        let numerics = program.numerics(name).unwrap_or_default();
        let builder = Builder::new(program, name, numerics);
        (builder, Frame::new(numerics, user, op.name.span))
    }

    /// A builder of an empty graph `name` under `numerics`.
    fn new(program: &'p Program<'a>, name: &str, numerics: NumericsConfig) -> Self {
        Builder {
            program,
            graph: Graph {
                name: name.to_owned(),
                params: Vec::new(),
                nodes: Vec::new(),
                outputs: Vec::new(),
                numerics,
            },
            depth: 0,
            dtype_arg: None,
            tuple_call: None,
        }
    }
}

impl Builder<'_, '_> {
    /// Adds graph parameter `name` of type `ty` and its node.
    fn param(&mut self, name: &str, ty: Type, span: Span) -> ValueId {
        let index = self.graph.params.len();
        self.graph.params.push(Param {
            name: name.to_owned(),
            ty: ty.clone(),
        });
        self.graph.push(Node {
            op: Op::Param(index),
            args: Vec::new(),
            ty,
            span,
        })
    }

    fn span(&self, f: &Frame, span: Span) -> Span {
        if f.user {
            span
        } else {
            f.site
        }
    }

    fn push(&mut self, f: &Frame, op: Op, args: Vec<ValueId>, span: Span) -> R<ValueId> {
        let span = self.span(f, span);
        let tys: Vec<&Type> = args.iter().map(|a| self.graph.ty(*a)).collect();
        let ty =
            match infer(&op, &tys, &self.graph.params) {
                Ok(Some(t)) => t,
                Ok(None) => unreachable!("ops with their own type are pushed with `push_typed`"),
                // Extents the checker left to the sizes of the call.
                Err(e) if e.misfit => {
                    let shapes: Vec<String> = tys.iter().map(|t| format!("`{t}`")).collect();
                    return Err(Box::new(
                        Diagnostic::error(
                            codes::E0201,
                            span,
                            format!("the shapes do not fit at these sizes: {}", e.message),
                        )
                        .with_label(format!("operands {}", shapes.join(", ")))
                        .with_note(
                            "`check` leaves extents such as `D / 2` and attributes passed on \
                             (`axis = axis`) to the sizes and values of each call",
                        ),
                    ));
                }
                Err(e) => return Err(Box::new(
                    Diagnostic::error(codes::E0700, span, "this expression cannot be lowered")
                        .with_label(e.message)
                        .with_note(
                            "the checker accepted it, so this is a compiler bug; please report it",
                        ),
                )),
            };
        Ok(self.graph.push(Node { op, args, ty, span }))
    }

    fn push_typed(
        &mut self,
        f: &Frame,
        op: Op,
        args: Vec<ValueId>,
        ty: Type,
        span: Span,
    ) -> ValueId {
        let span = self.span(f, span);
        self.graph.push(Node { op, args, ty, span })
    }

    /// Turns a value into a node (constants become `const` / `dim` nodes).
    fn node(&mut self, f: &Frame, v: V, span: Span) -> R<ValueId> {
        let (op, kind) = match v {
            V::Node(id) => return Ok(id),
            V::Int(n) => (Op::Const(n as f64), ScalarKind::Int),
            V::Float(x) => (Op::Const(x), ScalarKind::Float),
            V::Bool(b) => (Op::Const(f64::from(u8::from(b))), ScalarKind::Bool),
            V::Dim(d) => match d.as_known() {
                Some(n) => (Op::Const(n as f64), ScalarKind::Int),
                None => (Op::DimSize(d), ScalarKind::Int),
            },
            V::Empty => {
                return Err(unsupported(
                    self.span(f, span),
                    "an empty slice (extent 0) is used as a tensor",
                    "only `concat` takes one, leaving it out (`concat([cache[0:pos], new])` at pos = 0)",
                ))
            }
            V::Axis(_) | V::List(_) | V::Str(_) | V::Unit => {
                return Err(unsupported(
                    self.span(f, span),
                    "this value is not a tensor or a scalar",
                    "expected a tensor here",
                ))
            }
        };
        Ok(self.push_typed(f, op, Vec::new(), Type::Scalar(kind), span))
    }
}

fn const_int(v: &V) -> Option<i64> {
    match v {
        V::Int(n) => Some(*n),
        V::Dim(d) => d.as_known().and_then(|n| i64::try_from(n).ok()),
        _ => None,
    }
}

fn const_f64(v: &V) -> Option<f64> {
    match v {
        V::Int(n) => Some(*n as f64),
        V::Float(x) => Some(*x),
        V::Bool(b) => Some(f64::from(u8::from(*b))),
        V::Dim(d) => d.as_known().map(|n| n as f64),
        _ => None,
    }
}

/// Folds a binary op on two compile-time scalars.
fn fold_binary(op: BinaryOp, l: &V, r: &V) -> Option<V> {
    let (a, b) = (const_f64(l)?, const_f64(r)?);
    if op.is_comparison() || matches!(op, BinaryOp::And | BinaryOp::Or) {
        return Some(V::Bool(op.eval(a, b) != 0.0));
    }
    // `&`, `|`, `^` of booleans are logical.
    if let (V::Bool(x), V::Bool(y)) = (l, r) {
        return match op {
            BinaryOp::BitAnd => Some(V::Bool(*x && *y)),
            BinaryOp::BitOr => Some(V::Bool(*x || *y)),
            BinaryOp::BitXor => Some(V::Bool(x != y)),
            _ => None,
        };
    }
    if let (Some(x), Some(y)) = (const_int(l), const_int(r)) {
        let v = match op {
            BinaryOp::Add => x.checked_add(y),
            BinaryOp::Sub => x.checked_sub(y),
            BinaryOp::Mul => x.checked_mul(y),
            BinaryOp::Div => x.checked_div(y),
            BinaryOp::Rem => x.checked_rem(y),
            BinaryOp::Max => Some(x.max(y)),
            BinaryOp::Min => Some(x.min(y)),
            BinaryOp::Pow => u32::try_from(y).ok().and_then(|y| x.checked_pow(y)),
            _ => op.eval_int(x, y),
        };
        return v.map(V::Int);
    }
    Some(V::Float(op.eval(a, b)))
}

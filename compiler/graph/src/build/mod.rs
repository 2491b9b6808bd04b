//! Building Graph IR from a checked op: the op's body is evaluated
//! symbolically, every op it calls is inlined (user ops and the stdlib's
//! algebraic ops alike), primitives become nodes, kernels become custom
//! nodes, and compile-time scalars are folded on the way.
//!
//! The program has passed the checker, so most rules hold; what the builder
//! still rejects (with E0700) is what a dataflow graph cannot express:
//! data-dependent control flow and indices not known at compile time.

mod prims;

use crate::infer::{infer, scalar_kind};
use crate::ir::{BinaryOp, Graph, Node, Op, Param, ScalarKind, SliceAxis, Type, UnaryOp, ValueId};
use crate::program::{Callable, Program};
use std::collections::HashMap;
use tessera_diagnostics::{codes, Diagnostic, Span};
use tessera_sema::{AxisRef, Dim, MatmulPrecision, NumericsConfig, Shard, TensorTy};
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
    Str,
    Unit,
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
    let Some(body) = &op.body else {
        return Err(unsupported(
            op.name.span,
            format!("`{name}` is a primitive without a body"),
            "declared `extern`",
        ));
    };
    let (mut b, mut frame) = Builder::start(program, op, module.is_none());
    if let Some(args) = args {
        if args.len() != op.params.len() {
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
    for (i, p) in op.params.iter().enumerate() {
        let given = args.map(|a| &a[i]);
        let attr = match given {
            Some(Arg::Int(n)) => Some(V::Int(*n)),
            Some(Arg::Float(x)) => Some(V::Float(*x)),
            Some(Arg::Bool(v)) => Some(V::Bool(*v)),
            _ => None,
        };
        if let Some(v) = attr {
            frame.bind(&p.name.text, v);
            continue;
        }
        let is_tensor = matches!(p.ty.kind, ast::TypeKind::Tensor { .. });
        if !is_tensor {
            if let Some(d) = &p.default {
                let v = b.expr(&mut frame, d)?;
                frame.bind(&p.name.text, v);
                continue;
            }
        }
        let ty = match given {
            Some(Arg::Type(t)) => {
                if let Err(why) = b.fit(&mut frame, &p.ty, t) {
                    return Err(Box::new(
                        Diagnostic::error(
                            codes::E0201,
                            p.span,
                            format!(
                                "argument `{}` of `{name}` does not fit its parameter",
                                p.name.text
                            ),
                        )
                        .with_label(why),
                    ));
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
        let v = b.param(&p.name.text, ty, p.name.span);
        frame.bind(&p.name.text, V::Node(v));
    }
    let ret = match b.block(&mut frame, body)? {
        Flow::Return(v) => v,
        Flow::Normal => V::Unit,
    };
    let out = b.node(&frame, ret, body.span)?;
    b.graph.outputs.push(out);
    Ok(b.graph)
}

/// Builds a graph that launches user kernel `name`: its inputs are the
/// graph's parameters (of types `args`, or the declared types with their
/// symbolic dimensions), its `out` tensor the result.
pub fn build_kernel(program: &Program<'_>, name: &str, args: Option<&[Type]>) -> R<Graph> {
    let Some(Callable::Kernel(k)) = program.lookup(name) else {
        return Err(Box::new(Diagnostic::error(
            codes::E0100,
            Span::default(),
            format!("no kernel named `{name}`"),
        )));
    };
    let numerics = program.numerics(name).unwrap_or_default();
    let mut b = Builder {
        program,
        graph: Graph {
            name: name.to_owned(),
            params: Vec::new(),
            nodes: Vec::new(),
            outputs: Vec::new(),
            numerics,
        },
        depth: 0,
    };
    let frame = Frame::new(numerics, true, k.name.span);
    let inputs: Vec<&ast::Param> = k.params.iter().filter(|p| !p.is_out).collect();
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
    for (i, p) in inputs.iter().enumerate() {
        let ty = match args {
            Some(a) => a[i].clone(),
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
    let out = b.kernel_call(&frame, k, &inputs, bound, k.name.span)?;
    let out = b.node(&frame, out, k.name.span)?;
    b.graph.outputs.push(out);
    Ok(b.graph)
}

/// Builds a graph that calls op `name` (with a body or a primitive) on
/// `args`, matched to its parameters in order; tensor arguments become the
/// graph's parameters `arg0`, `arg1`, ... Host code uses this to run one
/// call of an op or of a primitive such as `sum` or `matmul`.
pub fn build_call(program: &Program<'_>, name: &str, args: &[Option<Arg>]) -> R<Graph> {
    let target = match program.lookup(name) {
        Some(t @ Callable::Op(..)) => t,
        _ => {
            return Err(Box::new(Diagnostic::error(
                codes::E0100,
                Span::default(),
                format!("no op named `{name}`"),
            )))
        }
    };
    let Callable::Op(op, module) = target else {
        unreachable!("matched above")
    };
    let (mut b, mut frame) = Builder::start(program, op, module.is_none());
    let inputs: Vec<&ast::Param> = op.params.iter().collect();
    let mut bound = Vec::new();
    for (i, a) in args.iter().enumerate() {
        bound.push(match a {
            None => None,
            Some(Arg::Int(n)) => Some(V::Int(*n)),
            Some(Arg::Float(x)) => Some(V::Float(*x)),
            Some(Arg::Bool(v)) => Some(V::Bool(*v)),
            Some(Arg::Type(t)) => Some(V::Node(b.param(
                &format!("arg{i}"),
                t.clone(),
                op.name.span,
            ))),
        });
    }
    bound.resize(inputs.len(), None);
    let v = b.call_values(&mut frame, name, target, &inputs, bound, op.name.span)?;
    let out = b.node(&frame, v, op.name.span)?;
    b.graph.outputs.push(out);
    Ok(b.graph)
}

struct Builder<'p, 'a> {
    program: &'p Program<'a>,
    graph: Graph,
    depth: usize,
}

impl<'p, 'a> Builder<'p, 'a> {
    /// A builder for a graph named after `op`, and the frame of its body.
    fn start(program: &'p Program<'a>, op: &ast::OpDef, user: bool) -> (Self, Frame) {
        let name = &op.name.text;
        let numerics = program.numerics(name).unwrap_or_default();
        let builder = Builder {
            program,
            graph: Graph {
                name: name.clone(),
                params: Vec::new(),
                nodes: Vec::new(),
                outputs: Vec::new(),
                numerics,
            },
            depth: 0,
        };
        (builder, Frame::new(numerics, user, op.name.span))
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
                Err(e) => return Err(Box::new(
                    Diagnostic::error(codes::E0700, span, "this expression cannot be lowered")
                        .with_label(e)
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
            V::Axis(_) | V::List(_) | V::Str | V::Unit => {
                return Err(unsupported(
                    self.span(f, span),
                    "this value is not a tensor or a scalar",
                    "expected a tensor here",
                ))
            }
        };
        Ok(self.push_typed(f, op, Vec::new(), Type::Scalar(kind), span))
    }

    // ---- types -------------------------------------------------------------

    fn dim(&self, f: &Frame, d: &ast::Dim) -> R<Vec<Dim>> {
        Ok(match &d.kind {
            ast::DimKind::Const(n) => vec![Dim::known(*n)],
            ast::DimKind::Sym(s) => vec![f.dims.get(s).cloned().unwrap_or_else(|| Dim::sym(s))],
            ast::DimKind::Pack(s) => match f.packs.get(s) {
                Some(ds) => ds.clone(),
                None => {
                    return Err(unsupported(
                        d.span,
                        format!("the dimension pack `..{s}` is not bound"),
                        "a generic op needs argument types",
                    ))
                }
            },
            ast::DimKind::Mul(a, b) => {
                let (a, b) = (self.dim(f, a)?, self.dim(f, b)?);
                match (a.as_slice(), b.as_slice()) {
                    ([a], [b]) => vec![a.mul(b).unwrap_or(Dim::Unknown)],
                    _ => return Err(unsupported(d.span, "a product of packs", "not a dimension")),
                }
            }
        })
    }

    /// The graph type of a declared type, in the frame's bindings. `None` for
    /// types that are not values of a graph (axes, strings, lists).
    fn lower_type(&self, f: &Frame, t: &ast::Type) -> R<Option<Type>> {
        Ok(Some(match &t.kind {
            ast::TypeKind::Tensor { dims, elem, shard } => {
                let mut ds = Vec::new();
                for d in dims {
                    ds.extend(self.dim(f, d)?);
                }
                let dtype = match elem {
                    ast::ElemType::Dtype(d, _) => *d,
                    ast::ElemType::Var(n) => match f.dtypes.get(&n.text) {
                        Some(d) => *d,
                        None => {
                            return Err(unsupported(
                                n.span,
                                format!("the dtype `{}` is not bound", n.text),
                                "a generic op needs argument types",
                            ))
                        }
                    },
                };
                let shard = shard.as_ref().map(|s| Shard {
                    dims: s
                        .entries
                        .iter()
                        .map(|e| match e {
                            ast::ShardEntry::Replicated(_) => None,
                            ast::ShardEntry::Axis(names) => names
                                .first()
                                .and_then(|n| self.program.axis(&n.text).cloned()),
                        })
                        .collect(),
                    partial: Vec::new(),
                });
                Type::Tensor(TensorTy {
                    dims: ds,
                    dtype,
                    shard,
                })
            }
            ast::TypeKind::Int => Type::Scalar(ScalarKind::Int),
            ast::TypeKind::Float => Type::Scalar(ScalarKind::Float),
            ast::TypeKind::Named(n) if n.text == "bool" => Type::Scalar(ScalarKind::Bool),
            _ => return Ok(None),
        }))
    }

    /// Binds the dimension symbols, packs and dtype variables of a declared
    /// type to an actual type.
    fn bind_type(&self, f: &mut Frame, decl: &ast::Type, actual: &Type) {
        let (ast::TypeKind::Tensor { dims, elem, .. }, Type::Tensor(t)) = (&decl.kind, actual)
        else {
            return;
        };
        if let ast::ElemType::Var(n) = elem {
            f.dtypes.entry(n.text.clone()).or_insert(t.dtype);
        }
        let pack_len = (t.rank() + 1).saturating_sub(dims.len());
        let mut at = 0;
        for d in dims {
            match &d.kind {
                ast::DimKind::Pack(s) => {
                    let end = (at + pack_len).min(t.rank());
                    f.packs
                        .entry(s.clone())
                        .or_insert_with(|| t.dims[at..end].to_vec());
                    at = end;
                }
                ast::DimKind::Sym(s) => {
                    if let Some(actual) = t.dims.get(at) {
                        f.dims.entry(s.clone()).or_insert_with(|| actual.clone());
                    }
                    at += 1;
                }
                _ => at += 1,
            }
        }
    }

    /// Checks a given argument type against a declared parameter type and
    /// binds its symbols: rank, literal dims, dims bound by earlier
    /// parameters, and the dtype.
    fn fit(&self, f: &mut Frame, decl: &ast::Type, actual: &Type) -> Result<(), String> {
        let (ast::TypeKind::Tensor { dims, elem, .. }, Type::Tensor(t)) = (&decl.kind, actual)
        else {
            return match (&decl.kind, actual) {
                (ast::TypeKind::Tensor { .. }, other) => {
                    Err(format!("expected a tensor, got `{other}`"))
                }
                _ => Ok(()),
            };
        };
        let has_pack = dims.iter().any(|d| matches!(d.kind, ast::DimKind::Pack(_)));
        let fixed = dims.len() - usize::from(has_pack);
        if t.rank() < fixed || (!has_pack && t.rank() != fixed) {
            return Err(format!(
                "expected {} dimensions, got {} in `{t}`",
                fixed,
                t.rank()
            ));
        }
        match elem {
            ast::ElemType::Dtype(d, _) if *d != t.dtype => {
                return Err(format!("expected dtype `{d}`, got `{}`", t.dtype));
            }
            ast::ElemType::Var(n) => match f.dtypes.get(&n.text) {
                Some(d) if *d != t.dtype => {
                    return Err(format!(
                        "`{}` is `{d}` from an earlier argument, got `{}`",
                        n.text, t.dtype
                    ));
                }
                _ => {}
            },
            _ => {}
        }
        let pack_len = t.rank() - fixed;
        let mut at = 0;
        for d in dims {
            match &d.kind {
                ast::DimKind::Pack(_) => at += pack_len,
                ast::DimKind::Const(n) => {
                    if t.dims[at] != Dim::known(*n) {
                        return Err(format!("dimension {at} must be {n}, got {}", t.dims[at]));
                    }
                    at += 1;
                }
                ast::DimKind::Sym(s) => {
                    if let Some(prev) = f.dims.get(s) {
                        if *prev != t.dims[at] {
                            return Err(format!(
                                "dimension {at} is `{s}`, which is {prev} from an earlier argument, but got {}",
                                t.dims[at]
                            ));
                        }
                    }
                    at += 1;
                }
                ast::DimKind::Mul(..) => at += 1,
            }
        }
        self.bind_type(f, decl, actual);
        Ok(())
    }

    // ---- statements --------------------------------------------------------

    fn block(&mut self, f: &mut Frame, b: &ast::Block) -> R<Flow> {
        f.scopes.push(HashMap::new());
        let mut flow = Flow::Normal;
        for s in &b.stmts {
            flow = self.stmt(f, s)?;
            if matches!(flow, Flow::Return(_)) {
                break;
            }
        }
        f.scopes.pop();
        Ok(flow)
    }

    fn stmt(&mut self, f: &mut Frame, s: &ast::Stmt) -> R<Flow> {
        match &s.kind {
            StmtKind::Let { name, value, .. } => {
                let v = self.expr(f, value)?;
                f.bind(&name.text, v);
            }
            StmtKind::Assign { target, op, value } => {
                let v = self.expr(f, value)?;
                let v = match BinaryOp::from_assign(*op) {
                    None => v,
                    Some(bin) => {
                        let old = f.local(&target.text).cloned().unwrap_or(V::Unit);
                        self.binary(f, bin, old, v, s.span)?
                    }
                };
                for scope in f.scopes.iter_mut().rev() {
                    if let Some(slot) = scope.get_mut(&target.text) {
                        *slot = v;
                        break;
                    }
                }
            }
            StmtKind::Return(value) => {
                let v = match value {
                    Some(e) => self.expr(f, e)?,
                    None => V::Unit,
                };
                return Ok(Flow::Return(v));
            }
            StmtKind::Expr(e) => {
                self.expr(f, e)?;
            }
            StmtKind::If {
                branches,
                otherwise,
            } => {
                for (cond, block) in branches {
                    match self.expr(f, cond)? {
                        V::Bool(true) => return self.block(f, block),
                        V::Bool(false) => {}
                        _ => {
                            return Err(Box::new(
                                Diagnostic::error(
                                    codes::E0700,
                                    self.span(f, cond.span),
                                    "an `if` in an op needs a condition known at compile time",
                                )
                                .with_label("depends on tensor data")
                                .with_help("use `where(cond, a, b)` to select elementwise"),
                            ))
                        }
                    }
                }
                if let Some(block) = otherwise {
                    return self.block(f, block);
                }
            }
            StmtKind::For {
                var,
                start,
                end,
                body,
            } => {
                let (lo, hi) = (self.expr(f, start)?, self.expr(f, end)?);
                let (Some(lo), Some(hi)) = (const_int(&lo), const_int(&hi)) else {
                    return Err(unsupported(
                        self.span(f, s.span),
                        "a `for` loop in an op needs bounds known at compile time",
                        "bounds not constant",
                    ));
                };
                if hi - lo > MAX_UNROLL {
                    return Err(unsupported(
                        self.span(f, s.span),
                        format!(
                            "a `for` loop in an op is unrolled; {} iterations is too many",
                            hi - lo
                        ),
                        format!("the limit is {MAX_UNROLL}").as_str(),
                    ));
                }
                for i in lo..hi {
                    f.scopes
                        .push(HashMap::from([(var.text.clone(), V::Int(i))]));
                    let flow = self.block(f, body)?;
                    f.scopes.pop();
                    if let Flow::Return(v) = flow {
                        return Ok(Flow::Return(v));
                    }
                }
            }
            StmtKind::Numerics(_) | StmtKind::Empty => {}
            StmtKind::Error => {
                return Err(unsupported(s.span, "erroneous statement", "here"));
            }
        }
        Ok(Flow::Normal)
    }

    // ---- expressions -------------------------------------------------------

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
            ExprKind::Str(_) => Ok(V::Str),
            ExprKind::Name(n) => self.name(f, n, e.span),
            ExprKind::Binary { op, lhs, rhs } => {
                let (l, r) = (self.expr(f, lhs)?, self.expr(f, rhs)?);
                match BinaryOp::from_ast(*op) {
                    None => self.matmul(f, l, r, e.span),
                    Some(b) => self.binary(f, b, l, r, e.span),
                }
            }
            ExprKind::Unary { op, operand } => {
                let v = self.expr(f, operand)?;
                let u = match op {
                    UnOp::Neg => UnaryOp::Neg,
                    UnOp::Not => UnaryOp::Not,
                };
                self.unary(f, u, v, e.span)
            }
            // Ops take no dtype arguments (the checker rejects them).
            ExprKind::Call { callee, args, .. } => self.call(f, callee, args, e.span),
            ExprKind::Index { base, indices } => {
                let b = self.expr(f, base)?;
                self.index(f, b, indices, e.span)
            }
            ExprKind::Field { base, .. } => {
                let b = self.expr(f, base)?;
                let b = self.node(f, b, base.span)?;
                self.push(f, Op::Transpose, vec![b], e.span).map(V::Node)
            }
            ExprKind::List(items) => {
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

    fn name(&mut self, f: &Frame, n: &str, span: Span) -> R<V> {
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

    fn cast(&mut self, f: &Frame, v: V, to: Dtype, span: Span) -> R<V> {
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

    fn unary(&mut self, f: &Frame, u: UnaryOp, v: V, span: Span) -> R<V> {
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
        let (a, b) = (self.node(f, l, span)?, self.node(f, r, span)?);
        let (a, b) = self.promote(f, a, b, span)?;
        self.push(f, Op::Binary(op), vec![a, b], span).map(V::Node)
    }

    /// Casts the narrower of two tensors of different float dtypes to the
    /// wider, as the numerics policy allows (the checker has verified it).
    fn promote(&mut self, f: &Frame, a: ValueId, b: ValueId, span: Span) -> R<(ValueId, ValueId)> {
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

    fn matmul(&mut self, f: &Frame, l: V, r: V, span: Span) -> R<V> {
        let (a, b) = (self.node(f, l, span)?, self.node(f, r, span)?);
        let (a, b) = self.promote(f, a, b, span)?;
        let op = Op::MatMul {
            acc: f.numerics.accumulate,
            tf32: f.numerics.matmul == MatmulPrecision::Tf32,
        };
        self.push(f, op, vec![a, b], span).map(V::Node)
    }

    fn index(&mut self, f: &mut Frame, base: V, indices: &[ast::IndexArg], span: Span) -> R<V> {
        let id = self.node(f, base, span)?;
        let mut axes = Vec::new();
        for (i, index) in indices.iter().enumerate() {
            axes.push(match index {
                ast::IndexArg::Expr(e) => SliceAxis::Index(self.const_index(f, e)?),
                ast::IndexArg::Slice { lo, hi, .. } => {
                    let dim = self
                        .graph
                        .tensor_ty(id)
                        .and_then(|t| t.dims.get(i))
                        .and_then(Dim::as_known);
                    let lo = match lo {
                        Some(e) => self.const_index(f, e)?,
                        None => 0,
                    };
                    match (hi, dim) {
                        (None, _) if lo == 0 => SliceAxis::Full,
                        (None, Some(n)) => SliceAxis::Range(lo, n),
                        (Some(e), _) => SliceAxis::Range(lo, self.const_index(f, e)?),
                        (None, None) => {
                            return Err(unsupported(
                                self.span(f, span),
                                "a slice of a symbolic dimension needs an end",
                                "write `lo:hi`",
                            ))
                        }
                    }
                }
            });
        }
        self.push(f, Op::Slice(axes), vec![id], span).map(V::Node)
    }

    /// An index or slice bound, which must be a compile-time constant.
    fn const_index(&mut self, f: &mut Frame, e: &ast::Expr) -> R<u64> {
        let v = self.expr(f, e)?;
        const_int(&v)
            .and_then(|n| u64::try_from(n).ok())
            .ok_or_else(|| {
                unsupported(
                    self.span(f, e.span),
                    "indices in an op must be known at compile time",
                    "not a constant",
                )
            })
    }

    // ---- calls -------------------------------------------------------------

    fn call(&mut self, f: &mut Frame, callee: &ast::Name, args: &[ast::Arg], span: Span) -> R<V> {
        let name = callee.text.as_str();
        let Some(target) = self.program.lookup(name) else {
            return Err(unsupported(
                self.span(f, span),
                format!("no op named `{name}`"),
                "unknown",
            ));
        };
        let params = target.params();
        let inputs: Vec<&ast::Param> = match target {
            Callable::Kernel(_) => params.iter().filter(|p| !p.is_out).collect(),
            _ => params.iter().collect(),
        };
        // Evaluate arguments in the caller's frame, matched to parameters.
        let mut bound: Vec<Option<V>> = vec![None; inputs.len()];
        for (a, slot) in args.iter().zip(ast::arg_slots(&inputs, args)) {
            let v = self.expr(f, &a.value)?;
            if let Some(s) = slot {
                bound[s] = Some(v);
            }
        }
        self.call_values(f, name, target, &inputs, bound, span)
    }

    /// A call whose arguments are evaluated and matched to `inputs`.
    #[allow(clippy::too_many_arguments)]
    fn call_values(
        &mut self,
        f: &mut Frame,
        name: &str,
        target: Callable<'_>,
        inputs: &[&ast::Param],
        bound: Vec<Option<V>>,
        span: Span,
    ) -> R<V> {
        match target {
            Callable::Op(op, module) if op.body.is_some() => {
                self.inline(f, op, module.is_none(), inputs, bound, span)
            }
            Callable::Op(..) | Callable::Fn(..) => {
                let mut vals = Vec::new();
                for (p, v) in inputs.iter().zip(bound) {
                    let v = match (v, &p.default) {
                        (Some(v), _) => v,
                        (None, Some(d)) => self.expr(f, d)?,
                        (None, None) => V::Unit,
                    };
                    vals.push((p.name.text.as_str(), v));
                }
                self.primitive(f, name, &vals, span)
            }
            Callable::Kernel(k) => self.kernel_call(f, k, inputs, bound, span),
        }
    }

    fn inline(
        &mut self,
        caller: &mut Frame,
        op: &ast::OpDef,
        user: bool,
        params: &[&ast::Param],
        bound: Vec<Option<V>>,
        span: Span,
    ) -> R<V> {
        if self.depth >= MAX_INLINE_DEPTH {
            return Err(unsupported(
                self.span(caller, span),
                "ops nest too deeply to inline",
                format!("more than {MAX_INLINE_DEPTH} nested calls").as_str(),
            ));
        }
        let numerics = if user {
            self.program
                .numerics(&op.name.text)
                .unwrap_or(caller.numerics)
        } else {
            caller.numerics
        };
        let site = if caller.user { span } else { caller.site };
        let mut frame = Frame::new(numerics, user && caller.user, site);
        for (p, v) in params.iter().zip(bound) {
            let v = match (v, &p.default) {
                (Some(v), _) => v,
                (None, Some(d)) => self.expr(&mut frame, d)?,
                (None, None) => V::Unit,
            };
            let v = match v {
                V::Node(id) => {
                    let actual = self.graph.ty(id).clone();
                    self.bind_type(&mut frame, &p.ty, &actual);
                    // A narrower float argument for a parameter of a fixed
                    // wider dtype is promoted.
                    match self.lower_type(&frame, &p.ty) {
                        Ok(Some(Type::Tensor(want))) => match &actual {
                            Type::Tensor(t) if t.dtype != want.dtype => {
                                self.cast(&frame, V::Node(id), want.dtype, span)?
                            }
                            _ => V::Node(id),
                        },
                        _ => V::Node(id),
                    }
                }
                other => other,
            };
            frame.bind(&p.name.text, v);
        }
        self.depth += 1;
        let flow = match &op.body {
            Some(b) => self.block(&mut frame, b),
            None => Ok(Flow::Normal),
        };
        self.depth -= 1;
        Ok(match flow? {
            Flow::Return(v) => v,
            Flow::Normal => V::Unit,
        })
    }

    fn kernel_call(
        &mut self,
        f: &Frame,
        k: &ast::KernelDef,
        inputs: &[&ast::Param],
        bound: Vec<Option<V>>,
        span: Span,
    ) -> R<V> {
        // The kernel's own symbols, bound from its inputs.
        let mut frame = Frame::new(f.numerics, f.user, f.site);
        let mut args = Vec::new();
        for (p, v) in inputs.iter().zip(bound) {
            let id = self.node(f, v.unwrap_or(V::Unit), span)?;
            let ty = self.graph.ty(id).clone();
            self.bind_type(&mut frame, &p.ty, &ty);
            args.push(id);
        }
        let outs: Vec<&ast::Param> = k.params.iter().filter(|p| p.is_out).collect();
        let [out] = outs.as_slice() else {
            return Err(unsupported(
                self.span(f, span),
                format!(
                    "kernel `{}` has {} outputs; an op can use a kernel with one",
                    k.name.text,
                    outs.len()
                ),
                "called here",
            ));
        };
        let Some(ty) = self.lower_type(&frame, &out.ty)? else {
            return Err(unsupported(span, "kernel output is not a tensor", "here"));
        };
        let mut consts = Vec::new();
        for g in &k.generics {
            if let Some(d) = &g.default {
                if let Some(n) = const_int(&self.expr(&mut frame, d)?) {
                    consts.push((g.name.text.clone(), n));
                }
            }
        }
        let op = Op::Kernel {
            name: k.name.text.clone(),
            consts,
        };
        Ok(V::Node(self.push_typed(f, op, args, ty, span)))
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
            _ => None,
        };
        return v.map(V::Int);
    }
    Some(V::Float(op.eval(a, b)))
}

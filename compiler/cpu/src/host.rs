//! An interpreter for host code (`fn main` and the fns it calls): scalars
//! and control flow run here; tensor creation uses the runtime's seeded
//! generators; every op call, operator on tensors, index and transpose runs
//! as a small graph on the CPU backend.

use crate::{prepare_graph, runtime_dtype, tensor_type};
use std::collections::HashMap;
use std::io::Write;
use tessera_diagnostics::{codes, Diagnostic, Span};
use tessera_graph::{
    build_call, build_kernel, infer, Arg, BinaryOp, Callable, Graph, Node, Op, Param, Program,
    ScalarKind, SliceAxis, Type, UnaryOp,
};
use tessera_runtime::Tensor;
use tessera_syntax::ast::{self, ArgKind, Dtype, ExprKind, StmtKind, UnOp};

/// Deepest chain of host fn calls.
const MAX_CALL_DEPTH: usize = 256;

/// A host value.
#[derive(Clone, Debug)]
pub enum HostValue {
    /// A tensor.
    Tensor(Tensor),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// A list (shapes).
    List(Vec<HostValue>),
    /// A string.
    Str(String),
    /// No value.
    Unit,
}

type R<T> = Result<T, Box<Diagnostic>>;

fn fail<T>(span: Span, msg: impl Into<String>, label: impl Into<String>) -> R<T> {
    Err(Box::new(
        Diagnostic::error(codes::E0701, span, msg).with_label(label),
    ))
}

enum Flow {
    Normal,
    Return(HostValue),
}

/// Runs `fn main` of the program, writing what `print` prints to `out`.
pub fn run_main(program: &Program<'_>, out: &mut dyn Write) -> R<()> {
    let Some(Callable::Fn(main, None)) = program.lookup("main") else {
        return fail(
            Span::default(),
            "the program has no `fn main`",
            "add `fn main() { ... }` or pass `--entry`",
        );
    };
    let mut h = Host {
        program,
        out,
        depth: 0,
    };
    h.call_fn(main, Vec::new(), main.name.span)?;
    Ok(())
}

struct Host<'p, 'a> {
    program: &'p Program<'a>,
    out: &'p mut dyn Write,
    depth: usize,
}

struct Env {
    scopes: Vec<HashMap<String, HostValue>>,
}

impl Env {
    fn get(&self, name: &str) -> Option<&HostValue> {
        self.scopes.iter().rev().find_map(|s| s.get(name))
    }

    fn set(&mut self, name: &str, v: HostValue) {
        for s in self.scopes.iter_mut().rev() {
            if let Some(slot) = s.get_mut(name) {
                *slot = v;
                return;
            }
        }
    }

    fn bind(&mut self, name: &str, v: HostValue) {
        if let Some(s) = self.scopes.last_mut() {
            s.insert(name.to_owned(), v);
        }
    }
}

impl Host<'_, '_> {
    fn call_fn(&mut self, f: &ast::FnDef, args: Vec<HostValue>, span: Span) -> R<HostValue> {
        if self.depth >= MAX_CALL_DEPTH {
            return fail(
                span,
                "host calls nest too deeply",
                format!("more than {MAX_CALL_DEPTH} nested calls"),
            );
        }
        let Some(body) = &f.body else {
            return fail(span, format!("`{}` has no body", f.name.text), "extern fn");
        };
        let mut env = Env {
            scopes: vec![HashMap::new()],
        };
        for (p, v) in f.params.iter().zip(args) {
            env.bind(&p.name.text, v);
        }
        self.depth += 1;
        let flow = self.block(&mut env, body);
        self.depth -= 1;
        Ok(match flow? {
            Flow::Return(v) => v,
            Flow::Normal => HostValue::Unit,
        })
    }

    fn block(&mut self, env: &mut Env, b: &ast::Block) -> R<Flow> {
        env.scopes.push(HashMap::new());
        let mut flow = Flow::Normal;
        for s in &b.stmts {
            flow = self.stmt(env, s)?;
            if matches!(flow, Flow::Return(_)) {
                break;
            }
        }
        env.scopes.pop();
        Ok(flow)
    }

    fn stmt(&mut self, env: &mut Env, s: &ast::Stmt) -> R<Flow> {
        match &s.kind {
            StmtKind::Let { name, value, .. } => {
                let v = self.expr(env, value)?;
                env.bind(&name.text, v);
            }
            StmtKind::Assign { target, op, value } => {
                let v = self.expr(env, value)?;
                let v = match BinaryOp::from_assign(*op) {
                    None => v,
                    Some(b) => {
                        let old = env.get(&target.text).cloned().unwrap_or(HostValue::Unit);
                        self.binary(b, old, v, s.span)?
                    }
                };
                env.set(&target.text, v);
            }
            StmtKind::Return(v) => {
                let v = match v {
                    Some(e) => self.expr(env, e)?,
                    None => HostValue::Unit,
                };
                return Ok(Flow::Return(v));
            }
            StmtKind::Expr(e) => {
                self.expr(env, e)?;
            }
            StmtKind::If {
                branches,
                otherwise,
            } => {
                for (cond, block) in branches {
                    match self.expr(env, cond)? {
                        HostValue::Bool(true) => return self.block(env, block),
                        HostValue::Bool(false) => {}
                        _ => {
                            return fail(
                                cond.span,
                                "an `if` condition must be a boolean",
                                "not a boolean",
                            )
                        }
                    }
                }
                if let Some(b) = otherwise {
                    return self.block(env, b);
                }
            }
            StmtKind::For {
                var,
                start,
                end,
                body,
            } => {
                let (HostValue::Int(lo), HostValue::Int(hi)) =
                    (self.expr(env, start)?, self.expr(env, end)?)
                else {
                    return fail(s.span, "`for` bounds must be integers", "not integers");
                };
                for i in lo..hi {
                    env.scopes
                        .push(HashMap::from([(var.text.clone(), HostValue::Int(i))]));
                    let flow = self.block(env, body);
                    env.scopes.pop();
                    if let Flow::Return(v) = flow? {
                        return Ok(Flow::Return(v));
                    }
                }
            }
            StmtKind::Numerics(_) | StmtKind::Empty => {}
            StmtKind::Error => return fail(s.span, "erroneous statement", "here"),
        }
        Ok(Flow::Normal)
    }

    fn expr(&mut self, env: &mut Env, e: &ast::Expr) -> R<HostValue> {
        Ok(match &e.kind {
            ExprKind::Int(n) => match i64::try_from(*n) {
                Ok(n) => HostValue::Int(n),
                Err(_) => {
                    return fail(
                        e.span,
                        "integer literal too large",
                        "does not fit in 64 bits",
                    )
                }
            },
            ExprKind::Float(x) => HostValue::Float(*x),
            ExprKind::Bool(b) => HostValue::Bool(*b),
            ExprKind::Str(s) => HostValue::Str(s.clone()),
            ExprKind::Name(n) => match env.get(n) {
                Some(v) => v.clone(),
                None => return fail(e.span, format!("`{n}` has no value"), "unknown name"),
            },
            ExprKind::Binary { op, lhs, rhs } => {
                let (l, r) = (self.expr(env, lhs)?, self.expr(env, rhs)?);
                match BinaryOp::from_ast(*op) {
                    None => self.op_call("matmul", vec![Some(l), Some(r)], e.span)?,
                    Some(b) => self.binary(b, l, r, e.span)?,
                }
            }
            ExprKind::Unary { op, operand } => {
                let v = self.expr(env, operand)?;
                let u = match op {
                    UnOp::Neg => UnaryOp::Neg,
                    UnOp::Not => UnaryOp::Not,
                };
                match v {
                    HostValue::Int(n) => HostValue::Int(n.wrapping_neg()),
                    HostValue::Float(x) => HostValue::Float(-x),
                    HostValue::Bool(b) => HostValue::Bool(!b),
                    t => self.apply(Op::Unary(u), vec![t], e.span)?,
                }
            }
            ExprKind::Call {
                callee,
                dtype_args,
                args,
            } => self.call(env, callee, dtype_args, args, e.span)?,
            ExprKind::Index { base, indices } => {
                let b = self.expr(env, base)?;
                self.index(env, b, indices, e.span)?
            }
            ExprKind::Field { base, .. } => {
                let b = self.expr(env, base)?;
                self.apply(Op::Transpose, vec![b], e.span)?
            }
            ExprKind::List(items) => {
                let mut out = Vec::new();
                for i in items {
                    out.push(self.expr(env, i)?);
                }
                HostValue::List(out)
            }
            ExprKind::Cast { value, dtype } => match self.expr(env, value)? {
                HostValue::Tensor(t) => HostValue::Tensor(t.convert(runtime_dtype(*dtype))),
                HostValue::Int(n) => scalar_as(n as f64, *dtype),
                HostValue::Float(x) => scalar_as(x, *dtype),
                HostValue::Bool(b) => scalar_as(f64::from(u8::from(b)), *dtype),
                _ => {
                    return fail(
                        e.span,
                        "cannot convert this value",
                        "not a number or tensor",
                    )
                }
            },
            ExprKind::Error => return fail(e.span, "erroneous expression", "here"),
        })
    }

    fn call(
        &mut self,
        env: &mut Env,
        callee: &ast::Name,
        dtype_args: &[(Dtype, Span)],
        args: &[ast::Arg],
        span: Span,
    ) -> R<HostValue> {
        let name = callee.text.as_str();
        let Some(target) = self.program.lookup(name) else {
            return fail(callee.span, format!("no function `{name}`"), "unknown");
        };
        let params: &[ast::Param] = match target {
            Callable::Op(op, _) => &op.params,
            Callable::Fn(f, _) => &f.params,
            Callable::Kernel(k) => &k.params,
        };
        let mut bound: Vec<Option<HostValue>> = vec![None; params.len()];
        let mut next = 0;
        for a in args {
            let v = self.expr(env, &a.value)?;
            let slot = match &a.kind {
                ArgKind::Positional => {
                    next += 1;
                    next - 1
                }
                ArgKind::Named(n) | ArgKind::In(n) => params
                    .iter()
                    .position(|p| p.name.text == n.text)
                    .unwrap_or(usize::MAX),
            };
            if let Some(s) = bound.get_mut(slot) {
                *s = Some(v);
            }
        }
        let dtype = dtype_args.first().map_or(Dtype::Fp32, |d| d.0);
        match target {
            Callable::Fn(_, Some(_)) => self.builtin(name, params, bound, dtype, span),
            Callable::Fn(f, None) => {
                let mut vals = Vec::new();
                for (p, v) in params.iter().zip(bound) {
                    vals.push(match (v, &p.default) {
                        (Some(v), _) => v,
                        (None, Some(d)) => self.expr(env, d)?,
                        (None, None) => HostValue::Unit,
                    });
                }
                self.call_fn(f, vals, span)
            }
            Callable::Op(..) => self.op_call(name, bound, span),
            Callable::Kernel(k) => {
                let mut inputs = Vec::new();
                for (p, v) in k.params.iter().zip(bound) {
                    if p.is_out {
                        continue;
                    }
                    match v {
                        Some(HostValue::Tensor(t)) => inputs.push(t),
                        _ => {
                            return fail(
                                span,
                                format!("kernel input `{}` needs a tensor", p.name.text),
                                "in this launch",
                            )
                        }
                    }
                }
                let types: Vec<Type> = inputs.iter().map(tensor_type).collect();
                let g = build_kernel(self.program, name, Some(&types)).map_err(|d| {
                    let mut d = *d;
                    d.primary.span = span;
                    Box::new(d)
                })?;
                self.run_graph(&g, &inputs, span)
            }
        }
    }

    fn builtin(
        &mut self,
        name: &str,
        params: &[ast::Param],
        bound: Vec<Option<HostValue>>,
        dtype: Dtype,
        span: Span,
    ) -> R<HostValue> {
        let get = |n: &str| -> Option<HostValue> {
            let i = params.iter().position(|p| p.name.text == n)?;
            bound.get(i).cloned().flatten()
        };
        let shape = || -> R<Vec<usize>> {
            match get("shape") {
                Some(HostValue::List(items)) => items
                    .iter()
                    .map(|v| match v {
                        HostValue::Int(n) if *n >= 0 => Ok(*n as usize),
                        _ => fail(span, "a shape holds non-negative integers", "bad shape"),
                    })
                    .collect(),
                _ => fail(span, "expected a shape `[d0, d1, ...]`", "no shape"),
            }
        };
        let seed = match get("seed") {
            Some(HostValue::Int(s)) => s as u64,
            _ => 0,
        };
        let d = runtime_dtype(dtype);
        let made = match name {
            "randn" => tessera_runtime::randn(d, &shape()?, seed),
            "rand" => tessera_runtime::rand(d, &shape()?, seed),
            "zeros" => Tensor::zeros(d, &shape()?),
            "ones" => Tensor::full(d, &shape()?, 1.0),
            "full" => {
                let v = match get("value") {
                    Some(HostValue::Float(x)) => x,
                    Some(HostValue::Int(n)) => n as f64,
                    _ => 0.0,
                };
                Tensor::full(d, &shape()?, v)
            }
            "print" => {
                let text = show(&get("value").unwrap_or(HostValue::Unit));
                let _ = writeln!(self.out, "{text}");
                return Ok(HostValue::Unit);
            }
            "cdiv" => {
                return match (get("a"), get("b")) {
                    (Some(HostValue::Int(a)), Some(HostValue::Int(b))) if b > 0 => Ok(
                        HostValue::Int(a.div_euclid(b) + i64::from(a.rem_euclid(b) != 0)),
                    ),
                    _ => fail(span, "`cdiv` needs integers, the divisor positive", "here"),
                }
            }
            _ => {
                return fail(
                    span,
                    format!("`{name}` is not available in host code"),
                    "unknown builtin",
                )
            }
        };
        made.map(HostValue::Tensor)
            .or_else(|e| fail(span, format!("cannot create the tensor: {e}"), "here"))
    }

    /// Runs one op call (user op or stdlib op) as a graph.
    fn op_call(&mut self, name: &str, bound: Vec<Option<HostValue>>, span: Span) -> R<HostValue> {
        let mut inputs = Vec::new();
        let args: Vec<Option<Arg>> = bound
            .into_iter()
            .map(|v| match v {
                None => None,
                Some(HostValue::Tensor(t)) => {
                    let ty = tensor_type(&t);
                    inputs.push(t);
                    Some(Arg::Type(ty))
                }
                Some(HostValue::Int(n)) => Some(Arg::Int(n)),
                Some(HostValue::Float(x)) => Some(Arg::Float(x)),
                Some(HostValue::Bool(b)) => Some(Arg::Bool(b)),
                Some(_) => None,
            })
            .collect();
        let g = match build_call(self.program, name, &args) {
            Ok(g) => g,
            Err(d) => {
                let mut d = *d;
                d.primary.span = span;
                return Err(Box::new(d));
            }
        };
        self.run_graph(&g, &inputs, span)
    }

    fn run_graph(&mut self, g: &Graph, inputs: &[Tensor], span: Span) -> R<HostValue> {
        let g = prepare_graph(g);
        let out = crate::kernels::run_graph(self.program, &g, inputs, None).map_err(|d| {
            let mut d = *d;
            d.primary.span = span;
            Box::new(d)
        })?;
        let t = out.into_iter().next().expect("a graph has one output");
        Ok(match g.ty(g.outputs[0]) {
            Type::Scalar(ScalarKind::Int) => HostValue::Int(t.get_f64(0).unwrap_or(0.0) as i64),
            Type::Scalar(ScalarKind::Float) => HostValue::Float(t.get_f64(0).unwrap_or(0.0)),
            Type::Scalar(ScalarKind::Bool) => HostValue::Bool(t.get_f64(0).unwrap_or(0.0) != 0.0),
            Type::Tensor(_) => HostValue::Tensor(t),
        })
    }

    fn binary(&mut self, op: BinaryOp, l: HostValue, r: HostValue, span: Span) -> R<HostValue> {
        use HostValue::*;
        Ok(match (&l, &r) {
            (Int(a), Int(b)) => {
                let v = match op {
                    BinaryOp::Add => a.checked_add(*b),
                    BinaryOp::Sub => a.checked_sub(*b),
                    BinaryOp::Mul => a.checked_mul(*b),
                    BinaryOp::Div => a.checked_div(*b),
                    BinaryOp::Rem => a.checked_rem(*b),
                    _ => return Ok(Bool(op.eval(*a as f64, *b as f64) != 0.0)),
                };
                match v {
                    Some(v) => Int(v),
                    None => return fail(span, "integer overflow or division by zero", "here"),
                }
            }
            (Int(_) | Float(_) | Bool(_), Int(_) | Float(_) | Bool(_)) => {
                let (a, b) = (num(&l), num(&r));
                let v = op.eval(a, b);
                if op.is_comparison() || matches!(op, BinaryOp::And | BinaryOp::Or) {
                    Bool(v != 0.0)
                } else {
                    Float(v)
                }
            }
            _ => {
                let (l, r) = promote(l, r);
                self.apply(Op::Binary(op), vec![l, r], span)?
            }
        })
    }

    fn index(
        &mut self,
        env: &mut Env,
        base: HostValue,
        indices: &[ast::IndexArg],
        span: Span,
    ) -> R<HostValue> {
        let HostValue::Tensor(t) = &base else {
            return fail(span, "only tensors can be indexed", "not a tensor");
        };
        if indices.len() > t.rank() {
            return fail(
                span,
                format!(
                    "{} indices for a tensor of rank {}",
                    indices.len(),
                    t.rank()
                ),
                "too many indices",
            );
        }
        let mut axes = Vec::new();
        for (i, ix) in indices.iter().enumerate() {
            let n = t.shape[i] as i64;
            let mut int = |h: &mut Self, e: &ast::Expr| -> R<i64> {
                match h.expr(env, e)? {
                    HostValue::Int(k) => Ok(k),
                    _ => fail(e.span, "indices must be integers", "not an integer"),
                }
            };
            axes.push(match ix {
                ast::IndexArg::Expr(e) => {
                    let k = int(self, e)?;
                    if !(0..n).contains(&k) {
                        return fail(
                            e.span,
                            format!("index {k} is out of bounds for dimension {i} of size {n}"),
                            "out of bounds",
                        );
                    }
                    SliceAxis::Index(k as u64)
                }
                ast::IndexArg::Slice { lo, hi, span: s } => {
                    let lo = match lo {
                        Some(e) => int(self, e)?,
                        None => 0,
                    };
                    let hi = match hi {
                        Some(e) => int(self, e)?,
                        None => n,
                    };
                    if lo < 0 || hi > n || lo >= hi {
                        return fail(
                            *s,
                            format!("slice {lo}:{hi} does not fit dimension {i} of size {n}"),
                            "out of bounds",
                        );
                    }
                    SliceAxis::Range(lo as u64, hi as u64)
                }
            });
        }
        self.apply(Op::Slice(axes), vec![base], span)
    }

    /// Runs a single op on host values as a one-node graph.
    fn apply(&mut self, op: Op, args: Vec<HostValue>, span: Span) -> R<HostValue> {
        let mut g = Graph {
            name: "host".into(),
            params: Vec::new(),
            nodes: Vec::new(),
            outputs: Vec::new(),
            numerics: Default::default(),
        };
        let mut inputs = Vec::new();
        let mut ids = Vec::new();
        for a in args {
            let (op, ty) = match a {
                HostValue::Tensor(t) => {
                    let ty = tensor_type(&t);
                    g.params.push(Param {
                        name: format!("arg{}", inputs.len()),
                        ty: ty.clone(),
                    });
                    inputs.push(t);
                    (Op::Param(inputs.len() - 1), ty)
                }
                HostValue::Int(n) => (Op::Const(n as f64), Type::Scalar(ScalarKind::Int)),
                HostValue::Float(x) => (Op::Const(x), Type::Scalar(ScalarKind::Float)),
                HostValue::Bool(b) => (
                    Op::Const(f64::from(u8::from(b))),
                    Type::Scalar(ScalarKind::Bool),
                ),
                _ => return fail(span, "expected a tensor or a number", "here"),
            };
            ids.push(g.push(Node {
                op,
                args: Vec::new(),
                ty,
                span,
            }));
        }
        let tys: Vec<&Type> = ids.iter().map(|i| g.ty(*i)).collect();
        let ty = match infer(&op, &tys, &g.params) {
            Ok(Some(t)) => t,
            Ok(None) => return fail(span, "cannot type this operation", "here"),
            Err(e) => return fail(span, e, "here"),
        };
        let out = g.push(Node {
            op,
            args: ids,
            ty,
            span,
        });
        g.outputs.push(out);
        self.run_graph(&g, &inputs, span)
    }
}

fn num(v: &HostValue) -> f64 {
    match v {
        HostValue::Int(n) => *n as f64,
        HostValue::Float(x) => *x,
        HostValue::Bool(b) => f64::from(u8::from(*b)),
        _ => 0.0,
    }
}

/// Converts the narrower of two float tensors to the wider dtype.
fn promote(l: HostValue, r: HostValue) -> (HostValue, HostValue) {
    match (&l, &r) {
        (HostValue::Tensor(a), HostValue::Tensor(b)) if a.dtype != b.dtype => {
            if a.dtype.size_bytes() >= b.dtype.size_bytes() {
                let b = b.convert(a.dtype);
                (l, HostValue::Tensor(b))
            } else {
                let a = a.convert(b.dtype);
                (HostValue::Tensor(a), r)
            }
        }
        _ => (l, r),
    }
}

fn scalar_as(x: f64, d: Dtype) -> HostValue {
    if d.is_float() {
        HostValue::Float(runtime_dtype(d).round(x))
    } else if d == Dtype::Bool {
        HostValue::Bool(x != 0.0)
    } else {
        HostValue::Int(runtime_dtype(d).round_int(x).unwrap_or(0))
    }
}

/// How `print` shows a value.
pub fn show(v: &HostValue) -> String {
    match v {
        HostValue::Tensor(t) => t.format(),
        HostValue::Int(n) => n.to_string(),
        HostValue::Float(x) => tessera_runtime::format::format_float(*x),
        HostValue::Bool(b) => b.to_string(),
        HostValue::Str(s) => s.clone(),
        HostValue::List(items) => {
            let parts: Vec<String> = items.iter().map(show).collect();
            format!("[{}]", parts.join(", "))
        }
        HostValue::Unit => "()".into(),
    }
}

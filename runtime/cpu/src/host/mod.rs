//! Host code (`fn main` and the fns it calls) on the CPU: the value-level
//! operations both executors share ([`ops`]), and an interpreter that walks
//! the checked AST. `tsrc run` compiles host code with Cranelift
//! (`tessera-jit`); the interpreter stays as the oracle its tests compare
//! against.

pub mod ops;
mod pick;

pub use ops::{item, show, truth, CpuRunner, GraphRunner, HostOps, HostValue, IndexValue};

use ops::{fail, R};
use std::collections::HashMap;
use std::io::Write;
use tessera_diagnostics::Span;
use tessera_graph::{BinaryOp, Callable, Program, UnaryOp};
use tessera_syntax::ast::{self, Dtype, ExprKind, StmtKind, UnOp};

/// Deepest chain of host fn calls.
pub const MAX_CALL_DEPTH: usize = 256;

enum Flow {
    Normal,
    Return(HostValue),
    /// `break;`: leaves the innermost loop.
    Break,
    /// `continue;`: the innermost loop's next iteration.
    Continue,
}

/// Runs `fn main` of the program with the interpreter, every op on the CPU
/// backend, writing what `print` prints to `out`.
pub fn run_main(program: &Program<'_>, out: &mut dyn Write) -> R<()> {
    run_main_on(program, &mut CpuRunner, out)
}

/// [`run_main`], with op calls running on `runner`.
pub fn run_main_on(
    program: &Program<'_>,
    runner: &mut dyn GraphRunner,
    out: &mut dyn Write,
) -> R<()> {
    let Some(Callable::Fn(main, None)) = program.lookup("main") else {
        return fail(
            Span::default(),
            "the program has no `fn main`",
            "add `fn main() { ... }` or pass `--entry`",
        );
    };
    let mut h = Host {
        ops: HostOps {
            program,
            runner,
            out,
        },
        depth: 0,
    };
    h.call_fn(main, Vec::new(), main.name.span)?;
    Ok(())
}

struct Host<'p, 'a> {
    ops: HostOps<'p, 'a>,
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
            // The checker keeps `break` and `continue` to loops.
            Flow::Normal | Flow::Break | Flow::Continue => HostValue::Unit,
        })
    }

    fn block(&mut self, env: &mut Env, b: &ast::Block) -> R<Flow> {
        env.scopes.push(HashMap::new());
        let mut flow = Flow::Normal;
        for s in &b.stmts {
            flow = self.stmt(env, s)?;
            if !matches!(flow, Flow::Normal) {
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
            // `let (a, b) = split(...)`, `topk(...)`, a kernel with
            // several outputs: the call gives its parts as a list.
            StmtKind::LetTuple { names, value } => {
                let Some((callee, dtype_args, args)) = value.kind.as_call() else {
                    return fail(
                        value.span,
                        "`let (...)` binds the parts of a call",
                        "not a call",
                    );
                };
                let parts = Some(names.len());
                let v = self.call(env, callee, dtype_args, args, parts, value.span)?;
                let items = match v {
                    HostValue::List(items) if items.len() == names.len() => items,
                    _ => {
                        return fail(
                            value.span,
                            format!("this call does not give {} parts", names.len()),
                            "bound by `let (...)`",
                        )
                    }
                };
                for (name, item) in names.iter().zip(items) {
                    if name.text != "_" {
                        env.bind(&name.text, item);
                    }
                }
            }
            StmtKind::Assign { target, op, value } => {
                let v = self.expr(env, value)?;
                let v = match op.elementwise() {
                    None => v,
                    Some(b) => {
                        let old = env.get(&target.text).cloned().unwrap_or(HostValue::Unit);
                        self.ops.binary(b, old, v, s.span)?
                    }
                };
                // A number takes a one-element tensor's value (the checker
                // admits it in host code: `total += x[r, 0]`).
                let v = match (env.get(&target.text), v) {
                    (
                        Some(old @ (HostValue::Float(_) | HostValue::Int(_))),
                        HostValue::Tensor(t),
                    ) => {
                        let float = matches!(old, HostValue::Float(_));
                        ops::item(&t, float).unwrap_or(HostValue::Tensor(t))
                    }
                    (_, v) => v,
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
                    if self.truth(env, cond)? {
                        return self.block(env, block);
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
                step,
                body,
            } => {
                // A rank-0 integer tensor bound (`0..sum(mask)`) is its
                // one element.
                let int = |v: HostValue| match v {
                    HostValue::Tensor(t) if t.dtype.is_int() && t.shape.is_empty() => {
                        match t.data.get_i64(0) {
                            Some(n) => HostValue::Int(n),
                            None => HostValue::Tensor(t),
                        }
                    }
                    v => v,
                };
                let (HostValue::Int(lo), HostValue::Int(hi)) =
                    (int(self.expr(env, start)?), int(self.expr(env, end)?))
                else {
                    return fail(s.span, "`for` bounds must be integers", "not integers");
                };
                // The checker has made the step a positive constant.
                let by = match step {
                    Some(e) => match self.expr(env, e)? {
                        HostValue::Int(n) if n > 0 => n as usize,
                        _ => return fail(e.span, "a loop step must be a positive integer", "here"),
                    },
                    None => 1,
                };
                for i in (lo..hi).step_by(by) {
                    let scope = HashMap::from([(var.text.clone(), HostValue::Int(i))]);
                    match self.iteration(env, scope, body)? {
                        Some(Flow::Return(v)) => return Ok(Flow::Return(v)),
                        Some(_) => break,
                        None => {}
                    }
                }
            }
            StmtKind::While { cond, body } => {
                while self.truth(env, cond)? {
                    match self.iteration(env, HashMap::new(), body)? {
                        Some(Flow::Return(v)) => return Ok(Flow::Return(v)),
                        Some(_) => break,
                        None => {}
                    }
                }
            }
            StmtKind::Break => return Ok(Flow::Break),
            StmtKind::Continue => return Ok(Flow::Continue),
            StmtKind::Numerics(_) | StmtKind::Empty => {}
            StmtKind::Error => return fail(s.span, "erroneous statement", "here"),
        }
        Ok(Flow::Normal)
    }

    /// One iteration of a loop's body in a scope of its own (`scope`, the
    /// loop variable's): `None` to go on, or the flow that leaves the
    /// loop (`break`, or a `return` to pass on).
    fn iteration(
        &mut self,
        env: &mut Env,
        scope: HashMap<String, HostValue>,
        body: &ast::Block,
    ) -> R<Option<Flow>> {
        env.scopes.push(scope);
        let flow = self.block(env, body);
        env.scopes.pop();
        Ok(match flow? {
            Flow::Normal | Flow::Continue => None,
            leave => Some(leave),
        })
    }

    /// An `if` or `while` condition: a boolean, or a rank-0 comparison of
    /// tensors (`if err < tol` with `err = max(r)`).
    fn truth(&mut self, env: &mut Env, cond: &ast::Expr) -> R<bool> {
        let truth = match self.expr(env, cond)? {
            HostValue::Bool(b) => Some(b),
            HostValue::Tensor(t) => ops::truth(&t),
            _ => None,
        };
        match truth {
            Some(b) => Ok(b),
            None => fail(cond.span, "a condition must be a boolean", "not a boolean"),
        }
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
                match op.elementwise() {
                    None => self.ops.op_call("matmul", vec![Some(l), Some(r)], e.span)?,
                    Some(b) => self.ops.binary(b, l, r, e.span)?,
                }
            }
            ExprKind::Unary { op, operand } => {
                let v = self.expr(env, operand)?;
                let boolean = match &v {
                    HostValue::Bool(_) => true,
                    HostValue::Tensor(t) => t.dtype == tessera_tensor::Dtype::Bool,
                    _ => false,
                };
                let u = match op {
                    UnOp::Neg => UnaryOp::Neg,
                    UnOp::Not => UnaryOp::Not,
                    // `~` of a boolean is `!`; of an integer, `x ^ -1`.
                    UnOp::BitNot if boolean => UnaryOp::Not,
                    UnOp::BitNot => {
                        return self
                            .ops
                            .binary(BinaryOp::BitXor, v, HostValue::Int(-1), e.span)
                    }
                };
                self.ops.unary(u, v, e.span)?
            }
            ExprKind::Call {
                callee,
                dtype_args,
                args,
            } => self.call(env, callee, dtype_args, args, None, e.span)?,
            ExprKind::Index { base, indices } => {
                let b = self.expr(env, base)?;
                let mut parts = Vec::new();
                for ix in indices {
                    parts.push(match ix {
                        ast::IndexArg::Expr(i) => match self.expr(env, i)? {
                            HostValue::Int(k) => IndexValue::Index(k, i.span),
                            HostValue::Tensor(t) => IndexValue::Tensor(t),
                            _ => return fail(i.span, "indices must be integers", "not an integer"),
                        },
                        ast::IndexArg::NewAxis(_) => IndexValue::NewAxis,
                        ast::IndexArg::Ellipsis(span) => IndexValue::Ellipsis(*span),
                        ast::IndexArg::Slice { lo, hi, step, span } => {
                            let lo = match lo {
                                Some(x) => Some(self.int(env, x)?),
                                None => None,
                            };
                            let hi = match hi {
                                Some(x) => Some(self.int(env, x)?),
                                None => None,
                            };
                            let step = match step {
                                Some(x) => self.int(env, x)?,
                                None => 1,
                            };
                            IndexValue::Slice(lo, hi, step, *span)
                        }
                    });
                }
                self.ops.index(&b, &parts, e.span)?
            }
            ExprKind::Field { base, .. } => {
                let b = self.expr(env, base)?;
                self.ops.transpose(b, e.span)?
            }
            ExprKind::List(items) => {
                let mut out = Vec::new();
                for i in items {
                    out.push(self.expr(env, i)?);
                }
                HostValue::List(out)
            }
            ExprKind::Cast { value, dtype } => {
                let v = self.expr(env, value)?;
                self.ops.cast(v, *dtype, e.span)?
            }
            ExprKind::Tuple(_) => {
                return fail(e.span, "`(a, b)` is an op's several results", "here")
            }
            ExprKind::Error => return fail(e.span, "erroneous expression", "here"),
        })
    }

    fn int(&mut self, env: &mut Env, e: &ast::Expr) -> R<i64> {
        match self.expr(env, e)? {
            HostValue::Int(k) => Ok(k),
            _ => fail(e.span, "indices must be integers", "not an integer"),
        }
    }

    /// A call; `parts`: bound by `let (...)` with that many names.
    fn call(
        &mut self,
        env: &mut Env,
        callee: &ast::Name,
        dtype_args: &[(Dtype, Span)],
        args: &[ast::Arg],
        parts: Option<usize>,
        span: Span,
    ) -> R<HostValue> {
        let name = callee.text.as_str();
        let Some(target) = self.ops.program.lookup(name) else {
            return fail(callee.span, format!("no function `{name}`"), "unknown");
        };
        let params = target.params();
        let kernel = matches!(target, Callable::Kernel(_));
        let bindable = ast::call_params(params, kernel, args);
        let refs: Vec<&ast::Param> = bindable.iter().map(|i| &params[*i]).collect();
        let mut bound: Vec<Option<HostValue>> = vec![None; params.len()];
        for (a, slot) in args.iter().zip(ast::arg_slots(&refs, args)) {
            let v = self.expr(env, &a.value)?;
            if let Some(s) = slot {
                bound[bindable[s]] = Some(v);
            }
        }
        let dtype = dtype_args.first().map_or(Dtype::Fp32, |d| d.0);
        match target {
            Callable::Fn(_, Some(_)) => self.ops.builtin(name, params, &bound, dtype, span),
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
            // An op with a dtype argument (`arange<fp32>(0, n)`) converts
            // its result, as `as` does.
            Callable::Op(..) => {
                let v = self.ops.op_parts(name, bound, parts, span)?;
                match dtype_args.first() {
                    Some((d, _)) => self.ops.cast(v, *d, span),
                    None => Ok(v),
                }
            }
            Callable::Kernel(k) => self.ops.kernel(name, &k.params, bound, span),
        }
    }
}

//! User kernels (`kernel name<...>(...) grid(...) { ... }`) lowered from
//! their syntax tree to Tile IR.
//!
//! Names hold compile-time integers and floats (generic constants, folded
//! arithmetic) or tiles. `load`/`store` index lists follow the language's
//! outer-product rule: each index tile's axes take their own place in the
//! result, which the lowering expresses by reshaping the index tiles so that
//! Tile IR's broadcasting gather produces the same tile. Mutable variables
//! assigned in a `for` body become loop-carried values; an `if` on a
//! compile-time condition keeps only the branch taken.

use crate::build::{KernelBuilder, INDEX};
use crate::ir::{Check, Combine, Kernel, Seed, TOp, TileTy, Value};
use std::collections::HashMap;
use tessera_diagnostics::{codes, Diagnostic, Span};
use tessera_graph::{BinaryOp, Callable, Graph, Op, Program, UnaryOp, ValueId};
use tessera_schedule::fuse::{class, Class};
use tessera_schedule::{SKernel, Size};
use tessera_sema::{Const, Policy};
use tessera_syntax::ast::{self, ArgKind, BinOp, DimKind, Dtype, ExprKind, StmtKind, UnOp};

mod call;

type R<T> = Result<T, Box<Diagnostic>>;

pub use tessera_core::resources::MAX_TILE_ELEMENTS;

fn fail<T>(span: Span, msg: impl Into<String>) -> R<T> {
    Err(Box::new(
        Diagnostic::error(
            codes::E0700,
            span,
            format!("cannot lower this kernel: {}", msg.into()),
        )
        .with_label("here"),
    ))
}

/// What a name holds.
#[derive(Clone, Copy, Debug)]
enum KV {
    Int(i64),
    Float(f64),
    Bool(bool),
    Tile(Value),
    /// Kernel parameter `i`.
    Param(usize),
    /// String `i` of the kernel's (an inlined op's `str` attribute).
    Str(usize),
}

/// The kernel definition and constants of the kernel node `v`.
fn kernel_of<'a>(
    program: &Program<'a>,
    g: &Graph,
    v: ValueId,
) -> Option<(&'a ast::KernelDef, HashMap<String, Const>)> {
    let Op::Kernel { name, consts } = &g.node(v).op else {
        return None;
    };
    let Some(Callable::Kernel(k)) = program.lookup(name) else {
        return None;
    };
    Some((k, consts.iter().cloned().collect()))
}

/// Kernel dimension symbols bound to the caller's sizes.
fn bind_dims(k: &ast::KernelDef, g: &Graph, v: ValueId) -> HashMap<String, Size> {
    let mut dims: HashMap<String, Size> = HashMap::new();
    // Twice: an expression (`2 * H`, `S + T`) is solved for its one
    // unknown symbol once the others are bound, whichever parameter binds
    // them.
    for _ in 0..2 {
        let inputs = k.params.iter().filter(|p| p.is_input());
        for (p, a) in inputs.zip(&g.node(v).args) {
            let ast::TypeKind::Tensor { dims: pd, .. } = &p.ty.kind else {
                continue;
            };
            let Some(t) = g.tensor_ty(*a) else { continue };
            for (d, actual) in pd.iter().zip(&t.dims) {
                match (&d.kind, actual.to_size()) {
                    (DimKind::Sym(s), Some(size)) => {
                        dims.entry(s.clone()).or_insert(size);
                    }
                    (_, _) if d.is_compound() => {
                        let known =
                            |s: &str| dims.get(s).and_then(|z| z.as_const()).map(|n| n as u64);
                        if let Some((s, n)) = actual.as_known().and_then(|n| d.solve(n, &known)) {
                            dims.insert(s, Size::Const(n as i64));
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    dims
}

fn size_expr(
    e: &ast::Expr,
    consts: &HashMap<String, Const>,
    dims: &HashMap<String, Size>,
) -> Option<Size> {
    Some(match &e.kind {
        ExprKind::Int(n) => Size::Const(i64::try_from(*n).ok()?),
        ExprKind::Name(n) => match consts.get(n) {
            Some(c) => Size::Const(c.as_int()?),
            None => dims.get(n)?.clone(),
        },
        ExprKind::Binary { op, lhs, rhs } => {
            let (a, b) = (size_expr(lhs, consts, dims)?, size_expr(rhs, consts, dims)?);
            match op {
                BinOp::Add => a.add(b),
                BinOp::Sub => a.sub(b),
                BinOp::Mul => a.mul(b),
                BinOp::Div => a.floor_div(b),
                BinOp::Rem => a.rem(b),
                _ => return None,
            }
        }
        ExprKind::Call { callee, args, .. } if args.len() == 2 => {
            let a = size_expr(&args[0].value, consts, dims)?;
            let b = size_expr(&args[1].value, consts, dims)?;
            match callee.text.as_str() {
                "cdiv" => a.cdiv(b),
                "min" | "minimum" => a.min(b),
                "max" | "maximum" => a.max(b),
                _ => return None,
            }
        }
        _ => return None,
    })
}

/// The launch grid of the user kernel called at node `v` of `g`, from its
/// `grid(...)` clause, in the caller's dimensions.
pub fn user_grid(program: &Program<'_>, g: &Graph, v: ValueId) -> Option<[Size; 3]> {
    let (k, consts) = kernel_of(program, g, v)?;
    let dims = bind_dims(k, g, v);
    let mut grid = [Size::Const(1), Size::Const(1), Size::Const(1)];
    for (slot, e) in grid.iter_mut().zip(&k.grid) {
        *slot = size_expr(e, &consts, &dims)?;
    }
    Some(grid)
}

struct Lower<'a> {
    b: KernelBuilder,
    consts: HashMap<String, Const>,
    dims: HashMap<String, Size>,
    env: Vec<HashMap<String, KV>>,
    k: &'a ast::KernelDef,
    /// The ops a kernel may call inlined (elementwise ones, see
    /// `tessera_sema`'s `tile_safe`).
    program: &'a Program<'a>,
    /// The strings `KV::Str` names.
    strings: Vec<String>,
    /// Whether the body lowered is a stdlib op's (inlined), whose calls
    /// mean the stdlib's ops whatever the user's files name.
    in_std: bool,
    /// Integer tiles read by a masked `load` without `other`, and their
    /// masks: as a divisor, a lane the mask turns off divides by 1, not by
    /// the 0 it read (Triton's masked lanes do not fault).
    masked_reads: HashMap<Value, Value>,
}

/// A lowered user kernel and the copies to make before its launch.
#[derive(Clone, Debug)]
pub struct UserKernel {
    /// The block program.
    pub kernel: Kernel,
    /// `(argument, output)` for each `inout` parameter: the output starts
    /// as a copy of the argument passed for it, and the kernel updates it.
    pub copies: Vec<(ValueId, ValueId)>,
}

/// Lowers the user kernel of scheduled kernel `k`.
pub fn lower_user_kernel(program: &Program<'_>, g: &Graph, k: &SKernel) -> R<UserKernel> {
    let span = g.node(k.anchor).span;
    let Some((def, consts)) = kernel_of(program, g, k.anchor) else {
        return fail(span, "not a kernel call");
    };
    let Some(grid) = user_grid(program, g, k.anchor) else {
        return fail(
            def.grid_span,
            "the grid must be built from constants, dimensions, `+`, `-`, `*`, `/`, `%`, `cdiv`, `min` and `max`",
        );
    };
    let dims = bind_dims(def, g, k.anchor);
    let threads = (k.config.warps * 32) as u32;
    let mut lw = Lower {
        b: KernelBuilder::new(&k.name, grid, threads),
        consts,
        dims,
        env: vec![HashMap::new()],
        k: def,
        program,
        strings: Vec::new(),
        in_std: false,
        masked_reads: HashMap::new(),
    };
    // Parameters: the scheduled inputs (deduplicated), then the outputs.
    let mut param_of: HashMap<ValueId, usize> = HashMap::new();
    let mut taken = std::collections::HashSet::new();
    for v in k.inputs.iter().chain(&k.outputs) {
        let t = g.tensor_ty(*v);
        let dims: Vec<Size> = t
            .map(|t| {
                t.dims
                    .iter()
                    .map(|d| d.to_size().unwrap_or(Size::Const(0)))
                    .collect()
            })
            .unwrap_or_default();
        let dtype = t.map(|t| t.dtype).unwrap_or(Dtype::Fp32);
        let out_param = |i: usize| def.params.iter().filter(|p| p.is_output()).nth(i);
        let out = match g.node(*v).op {
            _ if *v == k.anchor => out_param(0),
            Op::KernelOut(i) => out_param(i),
            _ => None,
        };
        let mut name = match (&g.node(*v).op, out) {
            (Op::Param(i), _) => g.params[*i].name.clone(),
            (_, Some(p)) => p.name.text.clone(),
            _ => format!("t{}", v.0),
        };
        // Unique in the PTX: an `inout` parameter's argument and output
        // (or a caller's tensor and an output) may share a name.
        while !taken.insert(name.clone()) {
            name.push_str("_1");
        }
        let i = lw.b.param(&name, dtype, dims, crate::ir::Access::In);
        if out.is_some_and(|p| p.mode == ast::ParamMode::InOut) {
            lw.b.kept(i);
        }
        if let Some(d) = out.and_then(|p| p.default.as_ref()) {
            let Some(value) = d.kind.literal_number() else {
                return fail(d.span, "an output's start value that is not a constant");
            };
            lw.b.start_value(i, value);
        }
        param_of.insert(*v, i);
    }
    let mut args = g.node(k.anchor).args.iter();
    let mut outs = 0;
    let mut copies = Vec::new();
    for p in &def.params {
        // An `inout` parameter takes an argument and is an output: the
        // kernel reads and writes the output, which starts as a copy.
        let arg = if p.is_input() {
            let Some(a) = args.next() else {
                return fail(span, "missing argument");
            };
            if class(g, *a) == Class::View {
                return fail(
                    span,
                    "a view passed to a kernel (the `kernel-args` graph pass copies them)",
                );
            }
            Some(*a)
        } else {
            None
        };
        let value = if p.is_output() {
            outs += 1;
            if outs == 1 {
                k.anchor
            } else {
                let further = k.nodes.iter().find(|v| {
                    let n = g.node(**v);
                    n.op == Op::KernelOut(outs - 1) && n.args.first() == Some(&k.anchor)
                });
                match further {
                    Some(v) => *v,
                    None => return fail(p.span, "an output of the kernel that is not computed"),
                }
            }
        } else {
            arg.expect("a parameter is an input or an output")
        };
        if let (Some(a), true) = (arg, p.is_output()) {
            copies.push((a, value));
        }
        let bound = match (param_of.get(&value), &g.node(value).op) {
            (Some(i), _) => KV::Param(*i),
            // A constant scalar argument (`k(x, 0.5)` in an op) is folded
            // into the kernel as its parameter's value.
            (None, Op::Const(c)) => constant_arg(&p.ty, *c),
            (None, _) => return fail(p.span, "a kernel argument that is not in memory"),
        };
        lw.env[0].insert(p.name.text.clone(), bound);
    }
    lw.block(&def.body)?;
    let mut kernel = lw.b.finish();
    kernel.span = g.node(k.anchor).span;
    kernel.vectorize = k.config.vectorize.clamp(1, 16) as u32;
    kernel.blocks_per_sm = crate::lower::blocks_per_sm(&k.config);
    kernel.warp_specialize = k.config.warp_specialize;
    kernel.tensor_cores = k.config.tensor_cores;
    Ok(UserKernel { kernel, copies })
}

/// Constant `c` passed for a scalar parameter of type `ty`: an integer,
/// a truth value or a float, as the parameter's dtype reads it.
fn constant_arg(ty: &ast::Type, c: f64) -> KV {
    let dtype = match &ty.kind {
        ast::TypeKind::Tensor {
            elem: ast::ElemType::Dtype(d, _),
            ..
        } => Some(*d),
        ast::TypeKind::Int => Some(Dtype::Int64),
        _ => None,
    };
    match dtype {
        Some(Dtype::Bool) => KV::Bool(c != 0.0),
        Some(d) if d.is_int() => KV::Int(c as i64),
        _ => KV::Float(c),
    }
}

impl Lower<'_> {
    fn lookup(&mut self, name: &str, span: Span) -> R<KV> {
        for scope in self.env.iter().rev() {
            if let Some(v) = scope.get(name) {
                return Ok(*v);
            }
        }
        match self.consts.get(name) {
            Some(Const::Int(n)) => return Ok(KV::Int(*n)),
            Some(Const::Float(x)) => return Ok(KV::Float(*x)),
            Some(Const::Bool(b)) => return Ok(KV::Bool(*b)),
            Some(Const::List(_)) => return fail(span, format!("`{name}` is a list")),
            Some(Const::Str(s)) => {
                let s = s.clone();
                return Ok(self.string(&s));
            }
            None => {}
        }
        if let Some(s) = self.dims.get(name).cloned() {
            return Ok(match s.as_const() {
                Some(c) => KV::Int(c),
                None => KV::Tile(self.b.size(&s)),
            });
        }
        fail(span, format!("`{name}` has no value here"))
    }

    fn assign(&mut self, name: &str, v: KV) {
        for scope in self.env.iter_mut().rev() {
            if let Some(slot) = scope.get_mut(name) {
                *slot = v;
                return;
            }
        }
        self.env
            .last_mut()
            .expect("a scope")
            .insert(name.to_owned(), v);
    }

    fn tile(&mut self, v: KV, span: Span) -> R<Value> {
        Ok(match v {
            KV::Int(n) => self.b.int(n),
            KV::Float(x) => self.b.constant(x, TileTy::scalar(Dtype::Fp32)),
            KV::Bool(b) => self
                .b
                .constant(f64::from(u8::from(b)), TileTy::scalar(Dtype::Bool)),
            KV::Tile(t) => t,
            // A scalar parameter (`eps: fp32`) is its value, read once
            // where it is used.
            KV::Param(i) if self.b.param_rank(i) == 0 => self.b.load(i, Vec::new(), None, 0.0),
            KV::Param(_) => return fail(span, "a tensor parameter is used as a value; `load` it"),
            KV::Str(_) => return fail(span, "a string is used as a number"),
        })
    }

    fn block(&mut self, b: &ast::Block) -> R<()> {
        self.env.push(HashMap::new());
        let r = self.seq(&b.stmts, &[]);
        self.env.pop();
        r
    }

    /// Lowers `list`, then the continuation `cont`: the statements that
    /// follow it in enclosing blocks, innermost first, each with the scope
    /// depth it runs at. A `return` ends the program: what follows it, in
    /// `list` and in `cont`, is not lowered. An `if` with a `return`
    /// inside takes the rest of `list` and `cont` into each of its arms
    /// (the arms that return skip it), so a program that returns early
    /// runs none of it.
    fn seq(&mut self, list: &[ast::Stmt], cont: &[(&[ast::Stmt], usize)]) -> R<()> {
        for (i, s) in list.iter().enumerate() {
            match &s.kind {
                StmtKind::Return(None) => return Ok(()),
                StmtKind::If {
                    branches,
                    otherwise,
                } if returns(s) => {
                    let mut next = vec![(&list[i + 1..], self.env.len())];
                    next.extend_from_slice(cont);
                    return self.if_chain(branches, otherwise.as_ref(), Some(&next));
                }
                _ => self.stmt(s)?,
            }
        }
        match cont.split_first() {
            Some(((first, depth), rest)) => {
                self.env.truncate(*depth);
                self.seq(first, rest)
            }
            None => Ok(()),
        }
    }

    /// Lowers `if` `branches` `else` `otherwise`: an arm whose condition is
    /// known when the kernel compiles is taken or skipped; at the first
    /// known only at run time, a Tile IR `if` of that arm and the rest of
    /// the chain, carrying the variables they assign. With `cont` (the
    /// chain returns somewhere), each arm continues with it.
    fn if_chain(
        &mut self,
        branches: &[(ast::Expr, ast::Block)],
        otherwise: Option<&ast::Block>,
        cont: Option<&[(&[ast::Stmt], usize)]>,
    ) -> R<()> {
        let arm = |lw: &mut Self, b: Option<&ast::Block>| -> R<()> {
            let stmts = b.map_or(&[][..], |b| &b.stmts[..]);
            lw.env.push(HashMap::new());
            lw.seq(stmts, cont.unwrap_or(&[]))
        };
        let Some(((cond, body), rest)) = branches.split_first() else {
            let depth = self.env.len();
            arm(self, otherwise)?;
            self.env.truncate(depth);
            return Ok(());
        };
        let c = match self.expr(cond)? {
            KV::Bool(true) => {
                let depth = self.env.len();
                arm(self, Some(body))?;
                self.env.truncate(depth);
                return Ok(());
            }
            KV::Bool(false) => return self.if_chain(rest, otherwise, cont),
            // A run-time scalar: a tile, or a scalar parameter read once.
            v => {
                let t = self.tile(v, cond.span)?;
                if !self.b.ty(t).shape.is_empty() {
                    return fail(cond.span, "the condition of `if` is a boolean scalar");
                }
                self.b.cast(t, Dtype::Bool)
            }
        };
        // The variables either side may assign (here or in what follows).
        let mut assigned = Vec::new();
        assigned_names(body, &mut assigned);
        for (_, b) in rest {
            assigned_names(b, &mut assigned);
        }
        if let Some(b) = otherwise {
            assigned_names(b, &mut assigned);
        }
        for (list, _) in cont.unwrap_or(&[]) {
            assigned_stmts(list, &mut assigned);
        }
        let names = self.bound(assigned);
        let mut before = Vec::new();
        for n in &names {
            let v = self.lookup(n, cond.span)?;
            let t = self.tile(v, cond.span)?;
            self.assign(n, KV::Tile(t));
            before.push(t);
        }
        let saved = self.env.clone();
        let depth = self.env.len();
        self.b.begin_if(c, before.clone());
        arm(self, Some(body))?;
        let yields = self.current(&names, &before, depth);
        self.env = saved.clone();
        self.b.begin_else(yields);
        self.if_chain(rest, otherwise, cont)?;
        let yields = self.current(&names, &before, depth);
        self.env = saved;
        let after = self.b.end_if(yields);
        for (n, v) in names.iter().zip(after) {
            self.assign(n, KV::Tile(v));
        }
        Ok(())
    }

    /// The names of `names` bound in an enclosing scope: the variables a
    /// loop or a branch carries.
    fn bound(&self, names: Vec<String>) -> Vec<String> {
        names
            .into_iter()
            .filter(|n| self.env.iter().any(|s| s.contains_key(n)))
            .collect()
    }

    /// The values `names` hold now in the scopes that enclose the `if`
    /// (the first `depth`: an arm's own `let` shadows only within it), as
    /// tiles; `before` for a name no longer in scope (an arm that continued
    /// into enclosing blocks).
    fn current(&mut self, names: &[String], before: &[Value], depth: usize) -> Vec<Value> {
        names
            .iter()
            .zip(before)
            .map(|(n, b)| {
                let outer = &self.env[..depth.min(self.env.len())];
                let v = outer.iter().rev().find_map(|s| s.get(n).copied());
                match v.map(|v| self.tile(v, Span::default())) {
                    Some(Ok(t)) => t,
                    _ => *b,
                }
            })
            .collect()
    }

    fn stmt(&mut self, s: &ast::Stmt) -> R<()> {
        let outer = self.b.at(s.span);
        let done = self.stmt_inner(s);
        self.b.at(outer);
        done
    }

    fn stmt_inner(&mut self, s: &ast::Stmt) -> R<()> {
        match &s.kind {
            StmtKind::Let { name, value, .. } => {
                let v = self.expr(value)?;
                self.env
                    .last_mut()
                    .expect("a scope")
                    .insert(name.text.clone(), v);
            }
            // The checker rejects it in kernels (E0109).
            StmtKind::LetTuple { value, .. } => {
                return fail(value.span, "`let (...)` binds the parts of an op's call");
            }
            StmtKind::Assign { target, op, value } => {
                let mut v = self.expr(value)?;
                if let Some(bop) = op.elementwise() {
                    let old = self.lookup(&target.text, target.span)?;
                    v = self.binary(bop, old, v, s.span)?;
                }
                self.assign(&target.text, v);
            }
            StmtKind::Expr(e) => {
                self.expr(e)?;
            }
            StmtKind::For {
                var,
                start,
                end,
                step,
                body,
            } => self.for_loop(var, (start, end, step.as_ref()), body)?,
            StmtKind::If {
                branches,
                otherwise,
            } => {
                let depth = self.env.len();
                self.if_chain(branches, otherwise.as_ref(), None)?;
                self.env.truncate(depth);
            }
            StmtKind::Numerics(_) | StmtKind::Empty => {}
            // `seq` ends the program at a `return` outside loops; the
            // checker rejects one inside (E0109).
            StmtKind::Return(_) => return fail(s.span, "`return` inside a loop of a kernel"),
            // The checker keeps these to host code (E0109).
            StmtKind::Break | StmtKind::Continue | StmtKind::While { .. } | StmtKind::Error => {
                return fail(s.span, "a statement with errors")
            }
        }
        Ok(())
    }

    fn for_loop(
        &mut self,
        var: &ast::Name,
        (start, end, step): (&ast::Expr, &ast::Expr, Option<&ast::Expr>),
        body: &ast::Block,
    ) -> R<()> {
        let mut assigned = Vec::new();
        assigned_names(body, &mut assigned);
        let carried = self.bound(assigned);
        let mut init = Vec::new();
        for n in &carried {
            let v = self.lookup(n, var.span)?;
            init.push(self.tile(v, var.span)?);
        }
        let lo = self.expr(start)?;
        let lo = self.tile(lo, start.span)?;
        let lo = self.b.cast(lo, INDEX);
        let hi = self.expr(end)?;
        let hi = self.tile(hi, end.span)?;
        let hi = self.b.cast(hi, INDEX);
        // The checker has made the step a positive constant or a run-time
        // integer scalar, which the run checks before the loop (a loop
        // that would not end is an error of the run, at the step).
        let step = match step {
            Some(e) => {
                let s = self.expr(e)?;
                let known = matches!(s, KV::Int(_));
                let s = self.tile(s, e.span)?;
                let s = self.b.cast(s, INDEX);
                if !known {
                    let outer = self.b.at(e.span);
                    let zero = self.b.int(0);
                    let positive = self.b.binary(BinaryOp::Gt, s, zero);
                    self.b
                        .effect(TOp::Assert(positive, Check::Step, Vec::new()));
                    self.b.at(outer);
                }
                s
            }
            None => self.b.int(1),
        };
        let (iv, vals) = self.b.begin_loop(lo, hi, step, init);
        let mut scope = HashMap::new();
        scope.insert(var.text.clone(), KV::Tile(iv));
        for (n, v) in carried.iter().zip(&vals) {
            scope.insert(n.clone(), KV::Tile(*v));
        }
        self.env.push(scope);
        let r = self.block(body);
        let mut next = Vec::new();
        if r.is_ok() {
            for n in &carried {
                let v = self.lookup(n, var.span)?;
                next.push(self.tile(v, var.span)?);
            }
        }
        self.env.pop();
        r?;
        let after = self.b.end_loop(next);
        for (n, v) in carried.iter().zip(after) {
            self.assign(n, KV::Tile(v));
        }
        Ok(())
    }

    /// `s` as a value.
    fn string(&mut self, s: &str) -> KV {
        let at = self.strings.iter().position(|t| t == s);
        KV::Str(at.unwrap_or_else(|| {
            self.strings.push(s.to_owned());
            self.strings.len() - 1
        }))
    }

    fn binary(&mut self, op: BinaryOp, a: KV, b: KV, span: Span) -> R<KV> {
        match (a, b) {
            // An inlined op's `mode == "reflect"`.
            (KV::Str(x), KV::Str(y)) if matches!(op, BinaryOp::Eq | BinaryOp::Ne) => {
                return Ok(KV::Bool((x == y) == (op == BinaryOp::Eq)));
            }
            (KV::Int(x), KV::Int(y)) => {
                let v = match op {
                    BinaryOp::Add => x.checked_add(y),
                    BinaryOp::Sub => x.checked_sub(y),
                    BinaryOp::Mul => x.checked_mul(y),
                    BinaryOp::Div => x.checked_div(y),
                    BinaryOp::Rem => x.checked_rem(y),
                    _ => op.eval_int(x, y),
                };
                if let Some(v) = v {
                    return Ok(KV::Int(v));
                }
                if op.is_comparison() {
                    return Ok(KV::Bool(op.eval(x as f64, y as f64) != 0.0));
                }
            }
            (KV::Int(_) | KV::Float(_), KV::Int(_) | KV::Float(_)) => {
                let f = |v: KV| match v {
                    KV::Int(n) => n as f64,
                    KV::Float(x) => x,
                    _ => 0.0,
                };
                let r = op.eval(f(a), f(b));
                return Ok(if op.is_comparison() {
                    KV::Bool(r != 0.0)
                } else {
                    KV::Float(r)
                });
            }
            _ => {}
        }
        // An integer outside an integer tile's range compares by value
        // (numpy, torch), in int64, not wrapped into the range.
        let outside = |t: &KV, c: &KV, b: &crate::build::KernelBuilder| match (t, c) {
            (KV::Tile(t), KV::Int(c)) => {
                let d = b.ty(*t).dtype;
                d.excludes_int(*c).then_some(d)
            }
            _ => None,
        };
        if let Some(narrow) = outside(&a, &b, &self.b).or(outside(&b, &a, &self.b)) {
            if op.by_value() {
                let (x, y) = (self.tile(a, span)?, self.tile(b, span)?);
                let r = self.b.binary_as(op, x, y, Dtype::Int64);
                return Ok(KV::Tile(if op.is_comparison() {
                    r
                } else {
                    self.b.cast(r, narrow)
                }));
            }
        }
        let (x, mut y, dtype) = self.tile_pair(a, b, span)?;
        if matches!(op, BinaryOp::Div | BinaryOp::Rem) && !dtype.is_float() {
            if let Some(&mask) = self.masked_reads.get(&y) {
                let one = self.b.constant(1.0, TileTy::scalar(self.b.ty(y).dtype));
                let d = self.b.ty(y).dtype;
                y = self.b.select(mask, y, one, d);
            }
        }
        let dtype = if matches!(op, BinaryOp::And | BinaryOp::Or) {
            Dtype::Bool
        } else {
            dtype
        };
        Ok(KV::Tile(self.b.binary_as(op, x, y, dtype)))
    }

    /// Operands `a` and `b` of a binary operation or `where` as tiles, and
    /// the dtype they combine in: a literal takes the dtype of the tile it
    /// meets (a float literal beside integers, fp32), and a float literal
    /// beside an fp64 tile is an fp64 constant (made in fp32 and widened,
    /// `x + 0.1` added 0.100000001490116).
    fn tile_pair(&mut self, a: KV, b: KV, span: Span) -> R<(Value, Value, Dtype)> {
        let (mut x, mut y) = (self.tile(a, span)?, self.tile(b, span)?);
        for (slot, v, other) in [(&mut x, a, b), (&mut y, b, a)] {
            if let (KV::Float(c), KV::Tile(t)) = (v, other) {
                if self.b.ty(t).dtype == Dtype::Fp64 {
                    *slot = self.b.constant(c, TileTy::scalar(Dtype::Fp64));
                }
            }
        }
        let beside = |lit: KV, d: Dtype| {
            if matches!(lit, KV::Float(_)) && !d.is_float() {
                Dtype::Fp32
            } else {
                d
            }
        };
        let dtype = match (a, b) {
            (KV::Int(_) | KV::Float(_), KV::Tile(t)) => beside(a, self.b.ty(t).dtype),
            (KV::Tile(t), KV::Int(_) | KV::Float(_)) => beside(b, self.b.ty(t).dtype),
            _ => {
                let (dx, dy) = (self.b.ty(x).dtype, self.b.ty(y).dtype);
                if dx.is_float() {
                    dx
                } else {
                    dy
                }
            }
        };
        Ok((x, y, dtype))
    }

    /// Inclusive prefix sums of tile `t` (of type `ty`, rank 1 or 2) along
    /// `axis`: a product with a triangular matrix of ones, in fp32 for
    /// floats (int32 or int64 for integers), rounded back to t's dtype.
    /// `x @ y` on 2-d tiles, accumulated in fp32.
    fn matmul(&mut self, (a, sa): (KV, Span), (b, sb): (KV, Span), span: Span) -> R<KV> {
        let (x, y) = (self.tile(a, sa)?, self.tile(b, sb)?);
        let (sx, sy) = (self.b.ty(x).shape.clone(), self.b.ty(y).shape.clone());
        if sx.len() != 2 || sy.len() != 2 {
            return fail(span, "`@` in a kernel needs 2-d tiles");
        }
        let acc = self.b.constant(
            0.0,
            TileTy {
                shape: vec![sx[0].clone(), sy[1].clone()],
                dtype: Dtype::Fp32,
            },
        );
        Ok(KV::Tile(self.b.dot(x, y, acc, false)))
    }

    /// Lowers `e`; a tile of more than [`MAX_TILE_ELEMENTS`] elements is
    /// an error at the expression that makes it.
    fn expr(&mut self, e: &ast::Expr) -> R<KV> {
        let outer = self.b.at(e.span);
        let v = self.expr_inner(e);
        self.b.at(outer);
        let v = v?;
        if let KV::Tile(t) = v {
            let n = self.b.ty(t).shape.iter().try_fold(1i64, |n, s| {
                s.as_const().map_or(Some(n), |c| n.checked_mul(c))
            });
            match n {
                Some(n) if n <= MAX_TILE_ELEMENTS => {}
                _ => {
                    let shown = n.map_or("more than 2^63".to_owned(), |n| n.to_string());
                    return fail(
                        e.span,
                        format!(
                            "this tile has {shown} elements; a program holds at most \
                             {MAX_TILE_ELEMENTS} in one tile (use a smaller block)"
                        ),
                    );
                }
            }
        }
        Ok(v)
    }

    fn expr_inner(&mut self, e: &ast::Expr) -> R<KV> {
        Ok(match &e.kind {
            ExprKind::Int(n) => KV::Int(i64::try_from(*n).unwrap_or(i64::MAX)),
            ExprKind::Float(x) => KV::Float(*x),
            ExprKind::Bool(b) => KV::Bool(*b),
            ExprKind::Str(s) => self.string(s),
            ExprKind::Name(n) => self.lookup(n, e.span)?,
            ExprKind::Binary { op, lhs, rhs } => {
                let (a, b) = (self.expr(lhs)?, self.expr(rhs)?);
                match op.elementwise() {
                    Some(bop) => self.binary(bop, a, b, e.span)?,
                    None => self.matmul((a, lhs.span), (b, rhs.span), e.span)?,
                }
            }
            ExprKind::Unary { op, operand } => {
                let v = self.expr(operand)?;
                match (op, v) {
                    (UnOp::Neg, KV::Int(n)) => KV::Int(-n),
                    (UnOp::Neg, KV::Float(x)) => KV::Float(-x),
                    (UnOp::Not | UnOp::BitNot, KV::Bool(b)) => KV::Bool(!b),
                    (UnOp::BitNot, KV::Int(n)) => KV::Int(!n),
                    (UnOp::BitNot, v) => {
                        let t = self.tile(v, e.span)?;
                        if self.b.ty(t).dtype == Dtype::Bool {
                            KV::Tile(self.b.unary(UnaryOp::Not, t))
                        } else {
                            self.binary(BinaryOp::BitXor, KV::Tile(t), KV::Int(-1), e.span)?
                        }
                    }
                    (UnOp::Neg, v) => {
                        let t = self.tile(v, e.span)?;
                        KV::Tile(self.b.unary(UnaryOp::Neg, t))
                    }
                    (UnOp::Not, v) => {
                        let t = self.tile(v, e.span)?;
                        let t = self.b.cast(t, Dtype::Bool);
                        KV::Tile(self.b.unary(UnaryOp::Not, t))
                    }
                }
            }
            ExprKind::Call {
                callee,
                dtype_args,
                args,
            } => self.call(e, callee, dtype_args, args)?,
            ExprKind::Cast { value, dtype } => {
                let v = self.expr(value)?;
                let t = self.tile(v, value.span)?;
                KV::Tile(self.b.cast(t, *dtype))
            }
            ExprKind::Field { base, field } if field.text == "T" => {
                let v = self.expr(base)?;
                let t = self.tile(v, base.span)?;
                if self.b.ty(t).shape.len() != 2 {
                    return fail(e.span, "`.T` needs a 2-d tile");
                }
                KV::Tile(self.permute(t, vec![1, 0]))
            }
            ExprKind::Index { base, indices } => {
                // `:` keeps an axis, `None` adds one of extent 1 (the
                // checker rejects anything else in a kernel).
                let v = self.expr(base)?;
                let t = self.tile(v, base.span)?;
                let ty = self.b.ty(t).clone();
                let mut kept = ty.shape.iter();
                let mut shape = Vec::new();
                for index in &*ast::IndexArg::expand_ellipsis(indices, ty.shape.len()) {
                    match index {
                        ast::IndexArg::NewAxis(_) => shape.push(Size::Const(1)),
                        ast::IndexArg::Slice {
                            lo: None,
                            hi: None,
                            step: None,
                            span,
                        } => match kept.next() {
                            Some(s) => shape.push(s.clone()),
                            None => return fail(*span, "more indices than the tile has axes"),
                        },
                        _ => return fail(e.span, "a tile is indexed only with `:` and `None`"),
                    }
                }
                shape.extend(kept.cloned());
                KV::Tile(self.b.reshape(t, shape))
            }
            _ => return fail(e.span, "this expression in a kernel"),
        })
    }
}

fn assigned_names(b: &ast::Block, out: &mut Vec<String>) {
    assigned_stmts(&b.stmts, out);
}

/// Whether `s` (an `if`) has a `return` in one of its arms, outside loops.
fn returns(s: &ast::Stmt) -> bool {
    match &s.kind {
        StmtKind::Return(_) => true,
        StmtKind::If {
            branches,
            otherwise,
        } => branches
            .iter()
            .map(|(_, b)| b)
            .chain(otherwise)
            .any(|b| b.stmts.iter().any(returns)),
        _ => false,
    }
}

/// The variables statements `stmts` assign (see [`assigned_names`]).
fn assigned_stmts(stmts: &[ast::Stmt], out: &mut Vec<String>) {
    for s in stmts {
        match &s.kind {
            StmtKind::Assign { target, .. } => {
                if !out.contains(&target.text) {
                    out.push(target.text.clone());
                }
            }
            StmtKind::For { body, .. } => assigned_names(body, out),
            StmtKind::If {
                branches,
                otherwise,
            } => {
                for (_, body) in branches {
                    assigned_names(body, out);
                }
                if let Some(o) = otherwise {
                    assigned_names(o, out);
                }
            }
            _ => {}
        }
    }
}

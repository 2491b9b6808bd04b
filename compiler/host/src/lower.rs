//! Lowering the checked AST of host code (`fn main` and every host fn it
//! reaches) to Host IR.
//!
//! Kinds come from the checker's expression types. Scalars compute inline;
//! everything that touches a tensor, a list or a string is a runtime call at
//! a site. Reference counting is explicit: every handle an expression yields
//! is owned; a `let` moves it into a variable, the end of a scope releases
//! its variables, and temporaries are released right after their use.

use std::collections::HashMap;

use tessera_diagnostics::{codes, Diagnostic, FileId, Span};
use tessera_graph::{BinaryOp, Callable, Program, UnaryOp};
use tessera_sema::Ty;
use tessera_syntax::ast::{self, ExprKind, StmtKind, UnOp};

use crate::ir::*;

/// The checker's expression types, keyed by file and expression.
pub type ExprTypes = HashMap<(FileId, ast::ExprId), Ty>;

type R<T> = Result<T, Box<Diagnostic>>;

fn unsupported<T>(span: Span, msg: impl Into<String>, label: impl Into<String>) -> R<T> {
    Err(Box::new(
        Diagnostic::error(codes::E0702, span, msg).with_label(label),
    ))
}

/// Lowers `fn main` of `program` and every host fn it calls. `types` are the
/// checker's expression types of the user's files.
pub fn lower(program: &Program<'_>, types: &ExprTypes) -> R<HostModule> {
    let Some(Callable::Fn(main, None)) = program.lookup("main") else {
        return Err(Box::new(
            Diagnostic::error(
                codes::E0701,
                Span::default(),
                "the program has no `fn main`",
            )
            .with_label("add `fn main() { ... }` or pass `--entry`"),
        ));
    };
    lower_fns(program, types, &[main])
}

/// Lowers the host fns `roots` (the first is function 0) and every host fn
/// they call: what `--emit host` shows of a file without `fn main`.
pub fn lower_fns(program: &Program<'_>, types: &ExprTypes, roots: &[&ast::FnDef]) -> R<HostModule> {
    let mut m = ModuleBuilder {
        program,
        types,
        sites: Vec::new(),
        fns: HashMap::new(),
        queue: Vec::new(),
        functions: Vec::new(),
    };
    for root in roots {
        m.func_id(root);
    }
    // Lowered in the order of their ids, so the text follows the roots.
    m.queue.reverse();
    while let Some(f) = m.queue.pop() {
        let id = m.fns[f.name.text.as_str()];
        let lowered = FnBuilder::lower(&mut m, f)?;
        m.functions[id.index()] = Some(lowered);
    }
    Ok(HostModule {
        functions: m
            .functions
            .into_iter()
            .map(|f| f.expect("every queued fn was lowered"))
            .collect(),
        sites: m.sites,
    })
}

struct ModuleBuilder<'p, 'a> {
    program: &'p Program<'a>,
    types: &'p ExprTypes,
    sites: Vec<Site>,
    fns: HashMap<&'a str, FuncId>,
    queue: Vec<&'a ast::FnDef>,
    functions: Vec<Option<HostFn>>,
}

impl<'a> ModuleBuilder<'_, 'a> {
    fn func_id(&mut self, f: &'a ast::FnDef) -> FuncId {
        if let Some(id) = self.fns.get(f.name.text.as_str()) {
            return *id;
        }
        let id = FuncId(self.functions.len() as u32);
        self.functions.push(None);
        self.fns.insert(&f.name.text, id);
        self.queue.push(f);
        id
    }

    fn site(
        &mut self,
        kind: SiteKind,
        args: Vec<Option<Kind>>,
        result: Option<Kind>,
        span: Span,
    ) -> SiteId {
        self.sites.push(Site {
            kind,
            args,
            result,
            span,
            fixed: None,
        });
        SiteId(self.sites.len() as u32 - 1)
    }
}

/// The kind of a checked type; `Ok(None)` for unit.
fn kind_of(ty: &Ty, span: Span) -> R<Option<Kind>> {
    Ok(Some(match ty {
        // An op's several results are a list, taken apart by `let (...)`.
        Ty::Tensor(_) | Ty::Global(_) | Ty::Str | Ty::List(_) | Ty::Tuple(_) => Kind::Handle,
        Ty::Int => Kind::Int,
        Ty::Float => Kind::Float,
        Ty::Bool => Kind::Bool,
        Ty::Unit => return Ok(None),
        Ty::Axis(_) => {
            return unsupported(span, "mesh axes have no value in host code", "a mesh axis")
        }
        Ty::Error => return unsupported(span, "this expression did not type-check", "here"),
    }))
}

/// The kind of a declared parameter or result type. A bare dtype (`fp32`,
/// `i64`, `bool`) is a scalar in host code.
fn declared_kind(ty: &ast::Type) -> R<Kind> {
    Ok(match &ty.kind {
        ast::TypeKind::Tensor {
            dims,
            elem: ast::ElemType::Dtype(d, _),
            shard: None,
        } if dims.is_empty() => {
            if *d == ast::Dtype::Bool {
                Kind::Bool
            } else if d.is_float() {
                Kind::Float
            } else {
                Kind::Int
            }
        }
        ast::TypeKind::Tensor { .. }
        | ast::TypeKind::Str
        | ast::TypeKind::List(_)
        | ast::TypeKind::Tuple(_) => Kind::Handle,
        ast::TypeKind::Int => Kind::Int,
        ast::TypeKind::Float => Kind::Float,
        ast::TypeKind::Named(n) if n.text == "bool" => Kind::Bool,
        ast::TypeKind::Named(n) => {
            return unsupported(
                ty.span,
                format!("a host fn parameter cannot have type `{}`", n.text),
                "use a tensor, int, float, bool, str or list type",
            )
        }
    })
}

struct Scope {
    names: Vec<(String, Var)>,
}

struct FnBuilder<'m, 'p, 'a> {
    m: &'m mut ModuleBuilder<'p, 'a>,
    f: HostFn,
    current: BlockId,
    scopes: Vec<Scope>,
    /// Whether the current block is still open (not yet terminated).
    open: bool,
    /// The enclosing loops, innermost last: where `continue` goes (the
    /// step to the next iteration), where `break` goes, and the depth of
    /// the loop's own scope (the scopes below it are released on the way).
    loops: Vec<(BlockId, BlockId, usize)>,
    /// Values known at compile time: constants, and tensors whose checked
    /// type has a known shape.
    fixed: HashMap<Value, Fixed>,
}

impl<'m, 'p, 'a> FnBuilder<'m, 'p, 'a> {
    fn lower(m: &'m mut ModuleBuilder<'p, 'a>, def: &'a ast::FnDef) -> R<HostFn> {
        let Some(body) = &def.body else {
            return unsupported(
                def.span,
                format!("`{}` has no body", def.name.text),
                "extern fn",
            );
        };
        let ret = match &def.ret {
            None => None,
            Some(t) => Some(declared_kind(t)?),
        };
        let mut b = FnBuilder {
            m,
            f: HostFn {
                name: def.name.text.clone(),
                params: def.params.len(),
                ret,
                vars: Vec::new(),
                values: Vec::new(),
                blocks: vec![Block {
                    insts: Vec::new(),
                    term: Term::Return(None),
                }],
                span: def.span,
            },
            current: BlockId(0),
            scopes: vec![Scope { names: Vec::new() }],
            open: true,
            loops: Vec::new(),
            fixed: HashMap::new(),
        };
        // Parameters: the caller lends its handles; the callee keeps its
        // own reference while the variable lives.
        for p in &def.params {
            let kind = declared_kind(&p.ty)?;
            let var = b.declare(&p.name.text, kind);
            if kind == Kind::Handle {
                let v = b.push(Inst::Get(var), Some(kind)).expect("a value");
                b.push(Inst::Retain(v), None);
            }
        }
        b.block(body)?;
        if b.open {
            b.release_all();
            let v = b.f.ret.map(|k| b.zero(k));
            b.terminate(Term::Return(v));
        }
        Ok(b.f)
    }

    fn push(&mut self, inst: Inst, kind: Option<Kind>) -> Option<Value> {
        if !self.open {
            // Unreachable code after a `return`: lower it into a detached block.
            let b = self.new_block();
            self.switch(b);
        }
        let result = kind.map(|k| {
            self.f.values.push(k);
            Value(self.f.values.len() as u32 - 1)
        });
        self.f.blocks[self.current.index()]
            .insts
            .push(InstData { result, inst });
        result
    }

    fn value(&mut self, inst: Inst, kind: Kind) -> Value {
        let fixed = match (&inst, kind) {
            (Inst::IConst(n), Kind::Int) => Some(Fixed::Int(*n)),
            (Inst::FConst(x), _) => Some(Fixed::Float(*x)),
            (Inst::BConst(b), _) => Some(Fixed::Bool(*b)),
            _ => None,
        };
        let v = self.push(inst, Some(kind)).expect("a value");
        if let Some(f) = fixed {
            self.fixed.insert(v, f);
        }
        v
    }

    /// Marks `site` as compilable ahead of time if all its arguments are
    /// known.
    fn fix(&mut self, site: SiteId, args: &[Option<Value>]) {
        let fixed: Option<Vec<Fixed>> = args
            .iter()
            .map(|a| match a {
                None => Some(Fixed::Absent),
                Some(v) => self.fixed.get(v).cloned(),
            })
            .collect();
        self.m.sites[site.index()].fixed = fixed;
    }

    fn new_block(&mut self) -> BlockId {
        self.f.blocks.push(Block {
            insts: Vec::new(),
            term: Term::Return(None),
        });
        BlockId(self.f.blocks.len() as u32 - 1)
    }

    fn switch(&mut self, b: BlockId) {
        self.current = b;
        self.open = true;
    }

    fn terminate(&mut self, t: Term) {
        if self.open {
            self.f.blocks[self.current.index()].term = t;
            self.open = false;
        }
    }

    fn declare(&mut self, name: &str, kind: Kind) -> Var {
        self.f.vars.push(VarDecl {
            name: name.to_owned(),
            kind,
        });
        let var = Var(self.f.vars.len() as u32 - 1);
        if let Some(s) = self.scopes.last_mut() {
            s.names.push((name.to_owned(), var));
        }
        var
    }

    fn lookup(&self, name: &str) -> Option<Var> {
        self.scopes.iter().rev().find_map(|s| {
            s.names
                .iter()
                .rev()
                .find(|(n, _)| n == name)
                .map(|(_, v)| *v)
        })
    }

    fn zero(&mut self, k: Kind) -> Value {
        match k {
            Kind::Int | Kind::Handle => self.value(Inst::IConst(0), k),
            Kind::Float => self.value(Inst::FConst(0.0), k),
            Kind::Bool => self.value(Inst::BConst(false), k),
        }
    }

    fn release_scope(&mut self, depth: usize) {
        let vars: Vec<Var> = self.scopes[depth].names.iter().map(|(_, v)| *v).collect();
        for var in vars.into_iter().rev() {
            if self.f.vars[var.index()].kind == Kind::Handle {
                let v = self.value(Inst::Get(var), Kind::Handle);
                self.push(Inst::Release(v), None);
            }
        }
    }

    fn release_all(&mut self) {
        for d in (0..self.scopes.len()).rev() {
            self.release_scope(d);
        }
    }

    /// Releases `v` if it is a handle (a temporary after its use).
    fn drop_temp(&mut self, v: Option<Value>) {
        if let Some(v) = v {
            if self.f.kind(v) == Kind::Handle {
                self.push(Inst::Release(v), None);
            }
        }
    }

    fn block(&mut self, b: &'a ast::Block) -> R<()> {
        self.scopes.push(Scope { names: Vec::new() });
        for s in &b.stmts {
            self.stmt(s)?;
        }
        if self.open {
            let d = self.scopes.len() - 1;
            self.release_scope(d);
        }
        self.scopes.pop();
        Ok(())
    }

    fn stmt(&mut self, s: &'a ast::Stmt) -> R<()> {
        match &s.kind {
            StmtKind::Let { name, value, .. } => {
                let v = self.expr(value)?;
                let Some(v) = v else {
                    return unsupported(
                        value.span,
                        "this expression has no value",
                        "returns nothing",
                    );
                };
                let var = self.declare(&name.text, self.f.kind(v));
                self.push(Inst::Set(var, v), None);
            }
            // `let (a, b) = split(...)`, `topk(...)`, a kernel with
            // several outputs: the call gives a list, each name a part.
            StmtKind::LetTuple { names, value } => {
                let Some((callee, dtype_args, args)) = value.kind.as_call() else {
                    return unsupported(
                        value.span,
                        "`let (...)` binds the parts of a call",
                        "not a call",
                    );
                };
                let Some(list) = self.call(value, callee, dtype_args, args, Some(names.len()))?
                else {
                    return unsupported(value.span, "this call has no value", "returns nothing");
                };
                for (i, name) in names.iter().enumerate() {
                    if name.text == "_" {
                        continue;
                    }
                    let site = self.m.site(
                        SiteKind::Part(i),
                        vec![Some(Kind::Handle)],
                        Some(Kind::Handle),
                        value.span,
                    );
                    let part = self.push(Inst::Runtime(site, vec![list]), Some(Kind::Handle));
                    let Some(part) = part else {
                        return unsupported(value.span, "this part has no value", "here");
                    };
                    let var = self.declare(&name.text, Kind::Handle);
                    self.push(Inst::Set(var, part), None);
                }
                self.drop_temp(Some(list));
            }
            StmtKind::Assign { target, op, value } => {
                let Some(var) = self.lookup(&target.text) else {
                    return unsupported(
                        target.span,
                        format!("`{}` is not a variable", target.text),
                        "unknown",
                    );
                };
                let kind = self.f.vars[var.index()].kind;
                let new = match op.elementwise() {
                    None => self.expr(value)?,
                    Some(op) => {
                        let old = self.value(Inst::Get(var), kind);
                        if kind == Kind::Handle {
                            self.push(Inst::Retain(old), None);
                        }
                        let rhs = self.expr(value)?;
                        let Some(rhs) = rhs else {
                            return unsupported(
                                value.span,
                                "this expression has no value",
                                "returns nothing",
                            );
                        };
                        let r = self.binary(op, old, rhs, Some(kind), s.span)?;
                        Some(r)
                    }
                };
                let Some(new) = new else {
                    return unsupported(
                        value.span,
                        "this expression has no value",
                        "returns nothing",
                    );
                };
                let new = self.coerce(new, kind, value.span)?;
                if kind == Kind::Handle {
                    let old = self.value(Inst::Get(var), kind);
                    self.push(Inst::Release(old), None);
                }
                self.push(Inst::Set(var, new), None);
            }
            StmtKind::Return(v) => {
                let v = match v {
                    Some(e) => self.expr(e)?,
                    None => None,
                };
                let v = match (v, self.f.ret) {
                    (Some(v), Some(k)) => Some(self.coerce(v, k, s.span)?),
                    (None, Some(k)) => Some(self.zero(k)),
                    (v, None) => {
                        self.drop_temp(v);
                        None
                    }
                };
                self.release_all();
                self.terminate(Term::Return(v));
            }
            StmtKind::Expr(e) => {
                let v = self.expr(e)?;
                self.drop_temp(v);
            }
            StmtKind::If {
                branches,
                otherwise,
            } => {
                let join = self.new_block();
                for (cond, body) in branches {
                    let c = self.condition(cond)?;
                    let then = self.new_block();
                    let next = self.new_block();
                    self.terminate(Term::Branch(c, then, next));
                    self.switch(then);
                    self.block(body)?;
                    self.terminate(Term::Jump(join));
                    self.switch(next);
                }
                if let Some(b) = otherwise {
                    self.block(b)?;
                }
                self.terminate(Term::Jump(join));
                self.switch(join);
            }
            StmtKind::For {
                var,
                start,
                end,
                step,
                body,
            } => {
                let lo = self.int_expr(start)?;
                let hi = self.int_expr(end)?;
                self.scopes.push(Scope { names: Vec::new() });
                let limit = self.declare("(end)", Kind::Int);
                self.push(Inst::Set(limit, hi), None);
                // The checker has made the step a positive constant.
                let stride = match step {
                    Some(e) => {
                        let v = self.int_expr(e)?;
                        let var = self.declare("(step)", Kind::Int);
                        self.push(Inst::Set(var, v), None);
                        Some(var)
                    }
                    None => None,
                };
                let i = self.declare(&var.text, Kind::Int);
                self.push(Inst::Set(i, lo), None);
                let head = self.new_block();
                let body_block = self.new_block();
                let latch = self.new_block();
                let exit = self.new_block();
                self.terminate(Term::Jump(head));
                self.switch(head);
                let iv = self.value(Inst::Get(i), Kind::Int);
                let hv = self.value(Inst::Get(limit), Kind::Int);
                let c = self.value(Inst::ICmp(Cmp::Lt, iv, hv), Kind::Bool);
                self.terminate(Term::Branch(c, body_block, exit));
                self.switch(body_block);
                self.loops.push((latch, exit, self.scopes.len() - 1));
                self.block(body)?;
                self.loops.pop();
                self.terminate(Term::Jump(latch));
                // The step to the next iteration (where `continue` goes).
                self.switch(latch);
                let iv = self.value(Inst::Get(i), Kind::Int);
                let by = match stride {
                    Some(var) => self.value(Inst::Get(var), Kind::Int),
                    None => self.value(Inst::IConst(1), Kind::Int),
                };
                // Checked: `i + step` may pass the largest integer.
                let site = self.m.site(SiteKind::Arith, Vec::new(), None, s.span);
                let next = self.value(Inst::Int(IntOp::Add, iv, by, site), Kind::Int);
                self.push(Inst::Set(i, next), None);
                self.terminate(Term::Jump(head));
                self.scopes.pop();
                self.switch(exit);
            }
            StmtKind::While { cond, body } => {
                let head = self.new_block();
                let body_block = self.new_block();
                let exit = self.new_block();
                self.terminate(Term::Jump(head));
                // The test before each iteration (where `continue` goes).
                self.switch(head);
                let c = self.condition(cond)?;
                self.terminate(Term::Branch(c, body_block, exit));
                self.switch(body_block);
                self.loops.push((head, exit, self.scopes.len() - 1));
                self.block(body)?;
                self.loops.pop();
                self.terminate(Term::Jump(head));
                self.switch(exit);
            }
            StmtKind::Break | StmtKind::Continue => {
                let Some(&(latch, exit, depth)) = self.loops.last() else {
                    return unsupported(s.span, "`break` or `continue` outside a loop", "here");
                };
                // The variables of the scopes left on the way are released,
                // as at the end of their blocks.
                for d in (depth + 1..self.scopes.len()).rev() {
                    self.release_scope(d);
                }
                let to = if matches!(s.kind, StmtKind::Break) {
                    exit
                } else {
                    latch
                };
                self.terminate(Term::Jump(to));
            }
            StmtKind::Numerics(_) | StmtKind::Empty => {}
            StmtKind::Error => return unsupported(s.span, "erroneous statement", "here"),
        }
        Ok(())
    }

    /// An `if` or `while` condition: a boolean, or a rank-0 boolean tensor
    /// (`if err < tol` with `err = max(r)`), whose one element it is.
    fn condition(&mut self, cond: &'a ast::Expr) -> R<Value> {
        match self.expr(cond)? {
            Some(c) if self.f.kind(c) == Kind::Bool => Ok(c),
            Some(c) if self.f.kind(c) == Kind::Handle => self.coerce(c, Kind::Bool, cond.span),
            _ => unsupported(cond.span, "a condition must be a boolean", "not a boolean"),
        }
    }

    fn int_expr(&mut self, e: &'a ast::Expr) -> R<Value> {
        match self.expr(e)? {
            Some(v) if self.f.kind(v) == Kind::Int => Ok(v),
            // A rank-0 integer tensor (`0..sum(mask)`): its one element.
            Some(v) if self.f.kind(v) == Kind::Handle => self.coerce(v, Kind::Int, e.span),
            _ => unsupported(e.span, "`for` bounds must be integers", "not an integer"),
        }
    }

    /// Converts `v` to kind `k` where the language allows it (an int where
    /// a float is expected).
    fn coerce(&mut self, v: Value, k: Kind, span: Span) -> R<Value> {
        let have = self.f.kind(v);
        if have == k {
            return Ok(v);
        }
        match (have, k) {
            (Kind::Int, Kind::Float) => Ok(self.value(Inst::IToF(v), Kind::Float)),
            (Kind::Bool, Kind::Int) => Ok(self.value(Inst::BToI(v), Kind::Int)),
            // A rank-0 tensor assigned to a host number (`total +=
            // x[r, 0]`): its one element, read by the runtime.
            (Kind::Handle, Kind::Float | Kind::Int | Kind::Bool) => {
                let dtype = match k {
                    Kind::Float => ast::Dtype::Fp64,
                    Kind::Int => ast::Dtype::Int64,
                    _ => ast::Dtype::Bool,
                };
                let site = self
                    .m
                    .site(SiteKind::Cast(dtype), vec![Some(have)], Some(k), span);
                self.runtime(site, vec![v], Some(k))
            }
            _ => unsupported(
                span,
                format!("{} where {} is expected", have.describe(), k.describe()),
                "compiled host code keeps one kind per value",
            ),
        }
    }

    fn kind(&self, e: &ast::Expr, span: Span) -> R<Option<Kind>> {
        match self.m.types.get(&(e.span.file, e.id)) {
            Some(ty) => kind_of(ty, span),
            None => unsupported(e.span, "this expression has no checked type", "here"),
        }
    }

    fn expr(&mut self, e: &'a ast::Expr) -> R<Option<Value>> {
        let v = self.expr_inner(e)?;
        if let Some(v) = v {
            if let Some(Ty::Tensor(t)) = self.m.types.get(&(e.span.file, e.id)) {
                let shape: Option<Vec<u64>> = t.dims.iter().map(|d| d.as_known()).collect();
                if let (Some(shape), Kind::Handle) = (shape, self.f.kind(v)) {
                    self.fixed.insert(v, Fixed::Tensor(shape, t.dtype));
                }
            }
        }
        Ok(v)
    }

    fn expr_inner(&mut self, e: &'a ast::Expr) -> R<Option<Value>> {
        Ok(Some(match &e.kind {
            ExprKind::Int(n) => match i64::try_from(*n) {
                Ok(n) => self.value(Inst::IConst(n), Kind::Int),
                Err(_) => {
                    return unsupported(
                        e.span,
                        "integer literal too large",
                        "does not fit in 64 bits",
                    )
                }
            },
            ExprKind::Float(x) => self.value(Inst::FConst(*x), Kind::Float),
            ExprKind::Bool(b) => self.value(Inst::BConst(*b), Kind::Bool),
            ExprKind::Str(s) => {
                let site = self.m.site(
                    SiteKind::Str(s.clone()),
                    Vec::new(),
                    Some(Kind::Handle),
                    e.span,
                );
                self.value(Inst::Runtime(site, Vec::new()), Kind::Handle)
            }
            ExprKind::Name(n) => {
                let Some(var) = self.lookup(n) else {
                    return unsupported(
                        e.span,
                        format!("`{n}` has no value in host code"),
                        "not a variable",
                    );
                };
                let kind = self.f.vars[var.index()].kind;
                let v = self.value(Inst::Get(var), kind);
                if kind == Kind::Handle {
                    self.push(Inst::Retain(v), None);
                }
                v
            }
            ExprKind::Binary { op, lhs, rhs } => {
                let result = self.kind(e, e.span)?;
                let l = self.operand(lhs)?;
                let r = self.operand(rhs)?;
                match op.elementwise() {
                    None => {
                        let site = self.m.site(
                            SiteKind::Op("matmul".into()),
                            vec![Some(self.f.kind(l)), Some(self.f.kind(r))],
                            result,
                            e.span,
                        );
                        self.fix(site, &[Some(l), Some(r)]);
                        let v = self.value(Inst::Runtime(site, vec![l, r]), Kind::Handle);
                        self.drop_temp(Some(l));
                        self.drop_temp(Some(r));
                        v
                    }
                    Some(b) => self.binary(b, l, r, result, e.span)?,
                }
            }
            ExprKind::Unary { op, operand } => {
                let v = self.operand(operand)?;
                match (self.f.kind(v), op) {
                    (Kind::Int, UnOp::Neg) => {
                        // Checked as `0 - v`: -(2^63) overflows, an error
                        // like every other integer overflow.
                        let zero = self.value(Inst::IConst(0), Kind::Int);
                        let site = self.m.site(SiteKind::Arith, Vec::new(), None, e.span);
                        self.value(Inst::Int(IntOp::Sub, zero, v, site), Kind::Int)
                    }
                    (Kind::Float, UnOp::Neg) => self.value(Inst::FNeg(v), Kind::Float),
                    (Kind::Bool, UnOp::Not | UnOp::BitNot) => self.value(Inst::Not(v), Kind::Bool),
                    // `~` of an integer is `x ^ -1`, of a boolean `!`.
                    (Kind::Int | Kind::Handle, UnOp::BitNot)
                        if !matches!(
                            self.m.types.get(&(operand.span.file, operand.id)),
                            Some(Ty::Tensor(t)) if t.dtype == tessera_syntax::ast::Dtype::Bool
                        ) =>
                    {
                        let ones = self.value(Inst::IConst(-1), Kind::Int);
                        let result = self.f.kind(v);
                        return self
                            .binary(BinaryOp::BitXor, v, ones, Some(result), e.span)
                            .map(Some);
                    }
                    (Kind::Handle, _) => {
                        let u = match op {
                            UnOp::Neg => UnaryOp::Neg,
                            UnOp::Not | UnOp::BitNot => UnaryOp::Not,
                        };
                        let site = self.m.site(
                            SiteKind::Unary(u),
                            vec![Some(Kind::Handle)],
                            Some(Kind::Handle),
                            e.span,
                        );
                        self.fix(site, &[Some(v)]);
                        let r = self.value(Inst::Runtime(site, vec![v]), Kind::Handle);
                        self.drop_temp(Some(v));
                        r
                    }
                    (k, _) => {
                        return unsupported(
                            e.span,
                            format!("this operator does not apply to a {}", k.name()),
                            "here",
                        )
                    }
                }
            }
            ExprKind::Call {
                callee,
                dtype_args,
                args,
            } => return self.call(e, callee, dtype_args, args, None),
            ExprKind::Index { base, indices } => {
                let b = self.operand(base)?;
                let mut vals = vec![b];
                let mut kinds = vec![Some(self.f.kind(b))];
                let mut parts = Vec::new();
                for ix in indices {
                    match ix {
                        ast::IndexArg::Expr(i) => {
                            parts.push(IndexPart::Index(i.span));
                            let v = self.operand(i)?;
                            kinds.push(Some(self.f.kind(v)));
                            vals.push(v);
                        }
                        ast::IndexArg::NewAxis(_) => parts.push(IndexPart::NewAxis),
                        ast::IndexArg::Ellipsis(span) => parts.push(IndexPart::Ellipsis(*span)),
                        ast::IndexArg::Slice { lo, hi, step, span } => {
                            parts.push(IndexPart::Slice {
                                lo: lo.is_some(),
                                hi: hi.is_some(),
                                step: step.is_some(),
                                span: *span,
                            });
                            let step = step.as_deref();
                            for x in [lo.as_ref(), hi.as_ref(), step].into_iter().flatten() {
                                let v = self.operand(x)?;
                                kinds.push(Some(self.f.kind(v)));
                                vals.push(v);
                            }
                        }
                    }
                }
                let result = self.kind(e, e.span)?;
                let site = self.m.site(SiteKind::Index(parts), kinds, result, e.span);
                let args: Vec<Option<Value>> = vals.iter().copied().map(Some).collect();
                self.fix(site, &args);
                self.runtime(site, vals, result)?
            }
            ExprKind::Field { base, .. } => {
                let b = self.operand(base)?;
                let site = self.m.site(
                    SiteKind::Transpose,
                    vec![Some(self.f.kind(b))],
                    Some(Kind::Handle),
                    e.span,
                );
                self.fix(site, &[Some(b)]);
                self.runtime(site, vec![b], Some(Kind::Handle))?
            }
            ExprKind::Tuple(_) => {
                return unsupported(e.span, "`(a, b)` is an op's several results", "here")
            }
            ExprKind::List(items) => {
                let mut vals = Vec::new();
                let mut kinds = Vec::new();
                for i in items {
                    let v = self.operand(i)?;
                    kinds.push(Some(self.f.kind(v)));
                    vals.push(v);
                }
                let site = self
                    .m
                    .site(SiteKind::List, kinds, Some(Kind::Handle), e.span);
                self.runtime(site, vals, Some(Kind::Handle))?
            }
            ExprKind::Cast { value, dtype } => {
                let v = self.operand(value)?;
                let result = self.kind(e, e.span)?;
                let site = self.m.site(
                    SiteKind::Cast(*dtype),
                    vec![Some(self.f.kind(v))],
                    result,
                    e.span,
                );
                self.runtime(site, vec![v], result)?
            }
            ExprKind::Error => return unsupported(e.span, "erroneous expression", "here"),
        }))
    }

    /// An expression that must have a value.
    fn operand(&mut self, e: &'a ast::Expr) -> R<Value> {
        match self.expr(e)? {
            Some(v) => Ok(v),
            None => unsupported(e.span, "this expression has no value", "returns nothing"),
        }
    }

    /// A runtime call that consumes (releases) its temporaries.
    fn runtime(&mut self, site: SiteId, args: Vec<Value>, result: Option<Kind>) -> R<Value> {
        let r = self.push(Inst::Runtime(site, args.clone()), result);
        for a in args {
            self.drop_temp(Some(a));
        }
        match r {
            Some(r) => Ok(r),
            None => {
                let span = self.m.sites[site.index()].span;
                unsupported(span, "this expression has no value", "returns nothing")
            }
        }
    }

    fn binary(
        &mut self,
        op: BinaryOp,
        l: Value,
        r: Value,
        result: Option<Kind>,
        span: Span,
    ) -> R<Value> {
        use Kind::*;
        let (lk, rk) = (self.f.kind(l), self.f.kind(r));
        if lk == Handle || rk == Handle {
            let site = self
                .m
                .site(SiteKind::Binary(op), vec![Some(lk), Some(rk)], result, span);
            self.fix(site, &[Some(l), Some(r)]);
            return self.runtime(site, vec![l, r], result);
        }
        let cmp = |op: BinaryOp| -> Option<Cmp> {
            Some(match op {
                BinaryOp::Eq => Cmp::Eq,
                BinaryOp::Ne => Cmp::Ne,
                BinaryOp::Lt => Cmp::Lt,
                BinaryOp::Le => Cmp::Le,
                BinaryOp::Gt => Cmp::Gt,
                BinaryOp::Ge => Cmp::Ge,
                _ => return None,
            })
        };
        // `&`, `|`, `^` of booleans are logical (the checker allows them
        // on two booleans or two integers only).
        let logical = match op {
            BinaryOp::BitAnd if lk == Bool => Some(BinaryOp::And),
            BinaryOp::BitOr if lk == Bool => Some(BinaryOp::Or),
            BinaryOp::BitXor if lk == Bool => Some(BinaryOp::Ne),
            _ => None,
        };
        if let Some(op) = logical {
            return self.binary(op, l, r, result, span);
        }
        if matches!(op, BinaryOp::And | BinaryOp::Or) {
            let a = self.truth(l);
            let b = self.truth(r);
            let inst = if op == BinaryOp::And {
                Inst::And(a, b)
            } else {
                Inst::Or(a, b)
            };
            return Ok(self.value(inst, Bool));
        }
        if lk != Float && rk != Float {
            // Integers (booleans count as 0 and 1): exact.
            let a = self.coerce(l, Int, span)?;
            let b = self.coerce(r, Int, span)?;
            if let Some(c) = cmp(op) {
                return Ok(self.value(Inst::ICmp(c, a, b), Bool));
            }
            let iop = match op {
                BinaryOp::Add => IntOp::Add,
                BinaryOp::Sub => IntOp::Sub,
                BinaryOp::Mul => IntOp::Mul,
                BinaryOp::Div => IntOp::Div,
                BinaryOp::Rem => IntOp::Rem,
                BinaryOp::BitAnd => IntOp::And,
                BinaryOp::BitOr => IntOp::Or,
                BinaryOp::BitXor => IntOp::Xor,
                BinaryOp::Shl => IntOp::Shl,
                BinaryOp::Shr => IntOp::Shr,
                _ => return self.float_binary(op, l, r),
            };
            let site = self.m.site(SiteKind::Arith, Vec::new(), None, span);
            return Ok(self.value(Inst::Int(iop, a, b, site), Int));
        }
        match cmp(op) {
            Some(c) => {
                let a = self.float_of(l);
                let b = self.float_of(r);
                Ok(self.value(Inst::FCmp(c, a, b), Bool))
            }
            None => self.float_binary(op, l, r),
        }
    }

    fn float_binary(&mut self, op: BinaryOp, l: Value, r: Value) -> R<Value> {
        let a = self.float_of(l);
        let b = self.float_of(r);
        let fop = match op {
            BinaryOp::Add => FloatOp::Add,
            BinaryOp::Sub => FloatOp::Sub,
            BinaryOp::Mul => FloatOp::Mul,
            BinaryOp::Div => FloatOp::Div,
            BinaryOp::Rem => FloatOp::Rem,
            BinaryOp::Pow => FloatOp::Pow,
            BinaryOp::Max => FloatOp::Max,
            _ => FloatOp::Min,
        };
        Ok(self.value(Inst::Float(fop, a, b), Kind::Float))
    }

    fn float_of(&mut self, v: Value) -> Value {
        match self.f.kind(v) {
            Kind::Float => v,
            Kind::Bool => {
                let i = self.value(Inst::BToI(v), Kind::Int);
                self.value(Inst::IToF(i), Kind::Float)
            }
            _ => self.value(Inst::IToF(v), Kind::Float),
        }
    }

    fn truth(&mut self, v: Value) -> Value {
        match self.f.kind(v) {
            Kind::Bool => v,
            Kind::Float => {
                let z = self.value(Inst::FConst(0.0), Kind::Float);
                self.value(Inst::FCmp(Cmp::Ne, v, z), Kind::Bool)
            }
            _ => {
                let z = self.value(Inst::IConst(0), Kind::Int);
                self.value(Inst::ICmp(Cmp::Ne, v, z), Kind::Bool)
            }
        }
    }

    /// A call; `parts`: bound by `let (...)` with that many names, so its
    /// result is the list of its parts.
    fn call(
        &mut self,
        e: &'a ast::Expr,
        callee: &ast::Name,
        dtype_args: &[(ast::Dtype, Span)],
        args: &'a [ast::Arg],
        parts: Option<usize>,
    ) -> R<Option<Value>> {
        let name = callee.text.as_str();
        let Some(target) = self.m.program.lookup(name) else {
            return unsupported(callee.span, format!("no function `{name}`"), "unknown");
        };
        let params: &'a [ast::Param] = target.params();
        let kernel = matches!(target, Callable::Kernel(_));
        let bindable = ast::call_params(params, kernel, args);
        let refs: Vec<&ast::Param> = bindable.iter().map(|i| &params[*i]).collect();
        // Bind the arguments to parameters, evaluated in source order.
        let mut bound: Vec<Option<Value>> = vec![None; params.len()];
        for (a, slot) in args.iter().zip(ast::arg_slots(&refs, args)) {
            let v = self.operand(&a.value)?;
            match slot {
                Some(s) => bound[bindable[s]] = Some(v),
                None => {
                    return unsupported(
                        a.value.span,
                        format!("`{name}` has no such parameter"),
                        "extra argument",
                    )
                }
            }
        }
        let result = match parts {
            Some(_) => Some(Kind::Handle),
            None => self.kind(e, e.span)?,
        };
        match target {
            Callable::Fn(..) if parts.is_some() => unsupported(
                e.span,
                "`let (...)` binds the parts of an op's or a kernel's call",
                "a function call",
            ),
            Callable::Fn(f, None) => {
                // Defaults are evaluated at the call, as written.
                for (slot, p) in bound.iter_mut().zip(params) {
                    if slot.is_none() {
                        match &p.default {
                            Some(d) => *slot = Some(self.operand(d)?),
                            None => {
                                return unsupported(
                                    e.span,
                                    format!("missing argument `{}`", p.name.text),
                                    "in this call",
                                )
                            }
                        }
                    }
                }
                let mut vals = Vec::new();
                for (v, p) in bound.iter().zip(params) {
                    let v = v.expect("every parameter is bound");
                    let k = declared_kind(&p.ty)?;
                    vals.push(self.coerce(v, k, e.span)?);
                }
                let id = self.m.func_id(f);
                let site = self
                    .m
                    .site(SiteKind::Call(name.to_owned()), Vec::new(), None, e.span);
                let ret = match &f.ret {
                    None => None,
                    Some(t) => Some(declared_kind(t)?),
                };
                let r = self.push(Inst::Call(id, vals.clone(), site), ret);
                for v in vals {
                    self.drop_temp(Some(v));
                }
                Ok(r)
            }
            _ => {
                let kind = match target {
                    Callable::Fn(..) => {
                        let dtype = dtype_args.first().map_or(ast::Dtype::Fp32, |d| d.0);
                        SiteKind::Builtin(name.to_owned(), dtype)
                    }
                    Callable::Op(..) => match parts {
                        Some(n) => SiteKind::OpParts(name.to_owned(), n),
                        None => SiteKind::Op(name.to_owned()),
                    },
                    Callable::Kernel(_) => SiteKind::Kernel(name.to_owned()),
                };
                let kinds: Vec<Option<Kind>> =
                    bound.iter().map(|v| v.map(|v| self.f.kind(v))).collect();
                let vals: Vec<Value> = bound.iter().flatten().copied().collect();
                let runs_kernels = !matches!(kind, SiteKind::Builtin(..));
                let site = self.m.site(kind, kinds, result, e.span);
                if runs_kernels {
                    self.fix(site, &bound);
                }
                let r = self.push(Inst::Runtime(site, vals.clone()), result);
                for v in vals {
                    self.drop_temp(Some(v));
                }
                // An op with a dtype argument (`arange<fp32>(0, n)`)
                // converts its result, as `as` does.
                match (target, dtype_args.first(), r) {
                    (Callable::Op(..), Some((dtype, _)), Some(v)) => {
                        let cast = self.m.site(
                            SiteKind::Cast(*dtype),
                            vec![Some(self.f.kind(v))],
                            result,
                            e.span,
                        );
                        self.runtime(cast, vec![v], result).map(Some)
                    }
                    _ => Ok(r),
                }
            }
        }
    }
}

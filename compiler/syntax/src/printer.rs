//! The AST's text form (`tsrc build --emit ast`): an indented tree, one node
//! per line with its span, deterministic and meant for humans and goldens.

use crate::ast::*;
use std::fmt::Write;

/// Prints `file` as an indented tree.
pub fn print_file(file: &File) -> String {
    let mut p = Printer::default();
    for item in &file.items {
        p.item(item);
    }
    p.out
}

/// Prints one expression as an indented tree.
pub fn print_expr(expr: &Expr) -> String {
    let mut p = Printer::default();
    p.expr(expr);
    p.out
}

#[derive(Default)]
struct Printer {
    out: String,
    indent: usize,
}

impl Printer {
    fn line(&mut self, span: Span, text: impl AsRef<str>) {
        for _ in 0..self.indent {
            self.out.push_str("  ");
        }
        let _ = writeln!(self.out, "{} @{}", text.as_ref(), span);
    }

    fn nested(&mut self, f: impl FnOnce(&mut Self)) {
        self.indent += 1;
        f(self);
        self.indent -= 1;
    }

    fn docs(&mut self, span: Span, docs: &[String]) {
        if !docs.is_empty() {
            self.nested(|p| p.line(span, format!("docs {:?}", docs.join("\n"))));
        }
    }

    fn item(&mut self, item: &Item) {
        match item {
            Item::Import(i) => {
                let path: Vec<_> = i.path.iter().map(|n| n.text.as_str()).collect();
                self.line(i.span, format!("import {}", path.join(".")));
            }
            Item::Numerics(n) => self.numerics(n),
            Item::Op(op) => {
                let head = if op.body.is_some() { "op" } else { "extern op" };
                self.line(op.span, format!("{head} {}", op.name.text));
                self.docs(op.span, &op.docs);
                self.nested(|p| {
                    p.generics(&op.generics);
                    p.params(&op.params);
                    if let Some(ret) = &op.ret {
                        p.line(ret.span, format!("returns {}", type_text(ret)));
                    }
                    if let Some(body) = &op.body {
                        p.block(body);
                    }
                });
            }
            Item::Kernel(k) => {
                self.line(k.span, format!("kernel {}", k.name.text));
                self.docs(k.span, &k.docs);
                self.nested(|p| {
                    p.generics(&k.generics);
                    p.params(&k.params);
                    if !k.grid.is_empty() {
                        p.line(k.grid_span, "grid");
                        p.nested(|p| k.grid.iter().for_each(|e| p.expr(e)));
                    }
                    p.block(&k.body);
                });
            }
            Item::Fn(f) => {
                let head = if f.body.is_some() { "fn" } else { "extern fn" };
                self.line(f.span, format!("{head} {}", f.name.text));
                self.docs(f.span, &f.docs);
                self.nested(|p| {
                    p.generics(&f.generics);
                    p.params(&f.params);
                    if let Some(ret) = &f.ret {
                        p.line(ret.span, format!("returns {}", type_text(ret)));
                    }
                    if let Some(body) = &f.body {
                        p.block(body);
                    }
                });
            }
            Item::Schedule(s) => {
                let on = s
                    .arch
                    .as_ref()
                    .map(|a| format!(" on {}", a.text))
                    .unwrap_or_default();
                self.line(s.span, format!("schedule {}{on}", s.target.text));
                self.docs(s.span, &s.docs);
                self.nested(|p| {
                    for knob in &s.knobs {
                        p.line(knob.span, format!("knob {}", knob.name.text));
                        if let Some(args) = &knob.args {
                            p.nested(|p| p.args(args));
                        }
                    }
                });
            }
            Item::Mesh(m) => {
                self.line(m.span, format!("mesh {}", m.name.text));
                self.docs(m.span, &m.docs);
                self.nested(|p| {
                    for axis in &m.axes {
                        p.line(axis.name.span, format!("axis {}", axis.name.text));
                        p.nested(|p| p.expr(&axis.size));
                    }
                });
            }
            Item::Error(span) => self.line(*span, "error"),
        }
    }

    fn numerics(&mut self, n: &Numerics) {
        let settings: Vec<String> = n
            .settings
            .iter()
            .map(|s| match &s.key {
                Some(k) => format!("{} = {}", k.text, s.value.text),
                None => s.value.text.clone(),
            })
            .collect();
        self.line(n.span, format!("numerics {}", settings.join(", ")));
    }

    fn generics(&mut self, generics: &[Generic]) {
        for g in generics {
            let bound = g
                .bound
                .as_ref()
                .map(|b| format!(": {}", type_text(b)))
                .unwrap_or_default();
            self.line(g.span, format!("generic {}{bound}", g.name.text));
            if let Some(default) = &g.default {
                self.nested(|p| p.expr(default));
            }
        }
    }

    fn params(&mut self, params: &[Param]) {
        for param in params {
            let out = param.mode.keyword();
            self.line(
                param.span,
                format!("param {out}{}: {}", param.name.text, type_text(&param.ty)),
            );
            if let Some(default) = &param.default {
                self.nested(|p| p.expr(default));
            }
        }
    }

    fn block(&mut self, block: &Block) {
        self.line(block.span, "block");
        self.nested(|p| block.stmts.iter().for_each(|s| p.stmt(s)));
    }

    fn stmt(&mut self, stmt: &Stmt) {
        match &stmt.kind {
            StmtKind::Let {
                mutable,
                name,
                ty,
                value,
            } => {
                let m = if *mutable { "mut " } else { "" };
                let ty = ty
                    .as_ref()
                    .map(|t| format!(": {}", type_text(t)))
                    .unwrap_or_default();
                self.line(stmt.span, format!("let {m}{}{ty}", name.text));
                self.nested(|p| p.expr(value));
            }
            StmtKind::LetTuple { names, value } => {
                let names: Vec<&str> = names.iter().map(|n| n.text.as_str()).collect();
                self.line(stmt.span, format!("let ({})", names.join(", ")));
                self.nested(|p| p.expr(value));
            }
            StmtKind::Assign { target, op, value } => {
                let op = match op {
                    AssignOp::Set => "=",
                    AssignOp::Add => "+=",
                    AssignOp::Sub => "-=",
                    AssignOp::Mul => "*=",
                    AssignOp::Div => "/=",
                };
                self.line(stmt.span, format!("assign {} {op}", target.text));
                self.nested(|p| p.expr(value));
            }
            StmtKind::Return(value) => {
                self.line(stmt.span, "return");
                if let Some(value) = value {
                    self.nested(|p| p.expr(value));
                }
            }
            StmtKind::Expr(e) => {
                self.line(stmt.span, "expr");
                self.nested(|p| p.expr(e));
            }
            StmtKind::If {
                branches,
                otherwise,
            } => {
                self.line(stmt.span, "if");
                self.nested(|p| {
                    for (cond, block) in branches {
                        p.line(cond.span, "branch");
                        p.nested(|p| {
                            p.expr(cond);
                            p.block(block);
                        });
                    }
                    if let Some(block) = otherwise {
                        p.line(block.span, "else");
                        p.nested(|p| p.block(block));
                    }
                });
            }
            StmtKind::For {
                var,
                start,
                end,
                step,
                body,
            } => {
                self.line(stmt.span, format!("for {}", var.text));
                self.nested(|p| {
                    p.expr(start);
                    p.expr(end);
                    if let Some(step) = step {
                        p.line(step.span, "step");
                        p.nested(|p| p.expr(step));
                    }
                    p.block(body);
                });
            }
            StmtKind::While { cond, body } => {
                self.line(stmt.span, "while");
                self.nested(|p| {
                    p.expr(cond);
                    p.block(body);
                });
            }
            StmtKind::Numerics(n) => self.numerics(n),
            StmtKind::Empty => self.line(stmt.span, "empty"),
            StmtKind::Break => self.line(stmt.span, "break"),
            StmtKind::Continue => self.line(stmt.span, "continue"),
            StmtKind::Error => self.line(stmt.span, "error"),
        }
    }

    fn args(&mut self, args: &[Arg]) {
        for arg in args {
            match &arg.kind {
                ArgKind::Positional => self.expr(&arg.value),
                ArgKind::Named(name) => {
                    self.line(arg.span, format!("named {}", name.text));
                    self.nested(|p| p.expr(&arg.value));
                }
                ArgKind::In(name) => {
                    self.line(arg.span, format!("in {}", name.text));
                    self.nested(|p| p.expr(&arg.value));
                }
            }
        }
    }

    fn expr(&mut self, e: &Expr) {
        match &e.kind {
            ExprKind::Int(v) => self.line(e.span, format!("int {v}")),
            ExprKind::Float(v) => self.line(e.span, format!("float {v:?}")),
            ExprKind::Bool(v) => self.line(e.span, format!("bool {v}")),
            ExprKind::Str(v) => self.line(e.span, format!("str {v:?}")),
            ExprKind::Name(n) => self.line(e.span, format!("name {n}")),
            ExprKind::Binary { op, lhs, rhs } => {
                self.line(e.span, format!("binary {}", op.symbol()));
                self.nested(|p| {
                    p.expr(lhs);
                    p.expr(rhs);
                });
            }
            ExprKind::Unary { op, operand } => {
                let sym = match op {
                    UnOp::Neg => "-",
                    UnOp::Not => "!",
                    UnOp::BitNot => "~",
                };
                self.line(e.span, format!("unary {sym}"));
                self.nested(|p| p.expr(operand));
            }
            ExprKind::Call {
                callee,
                dtype_args,
                args,
            } => {
                let dts = if dtype_args.is_empty() {
                    String::new()
                } else {
                    let names: Vec<_> = dtype_args.iter().map(|(d, _)| d.name()).collect();
                    format!("<{}>", names.join(", "))
                };
                self.line(e.span, format!("call {}{dts}", callee.text));
                self.nested(|p| p.args(args));
            }
            ExprKind::Index { base, indices } => {
                self.line(e.span, "index");
                self.nested(|p| {
                    p.expr(base);
                    for index in indices {
                        match index {
                            IndexArg::Expr(i) => p.expr(i),
                            IndexArg::NewAxis(span) => p.line(*span, "new axis"),
                            IndexArg::Ellipsis(span) => p.line(*span, "ellipsis"),
                            IndexArg::Slice { lo, hi, step, span } => {
                                p.line(*span, "slice");
                                p.nested(|p| {
                                    match lo {
                                        Some(lo) => p.expr(lo),
                                        None => p.line(*span, "from start"),
                                    }
                                    match hi {
                                        Some(hi) => p.expr(hi),
                                        None => p.line(*span, "to end"),
                                    }
                                    if let Some(step) = step {
                                        p.line(step.span, "step");
                                        p.nested(|p| p.expr(step));
                                    }
                                });
                            }
                        }
                    }
                });
            }
            ExprKind::Field { base, field } => {
                self.line(e.span, format!("field {}", field.text));
                self.nested(|p| p.expr(base));
            }
            ExprKind::List(items) => {
                self.line(e.span, "list");
                self.nested(|p| items.iter().for_each(|i| p.expr(i)));
            }
            ExprKind::Tuple(items) => {
                self.line(e.span, "tuple");
                self.nested(|p| items.iter().for_each(|i| p.expr(i)));
            }
            ExprKind::Cast { value, dtype } => {
                self.line(e.span, format!("cast {dtype}"));
                self.nested(|p| p.expr(value));
            }
            ExprKind::Error => self.line(e.span, "error"),
        }
    }
}

/// A written type in source syntax.
pub fn type_text(ty: &Type) -> String {
    match &ty.kind {
        TypeKind::Tensor { dims, elem, shard } => {
            let elem = match elem {
                ElemType::Dtype(d, _) => d.name().to_owned(),
                ElemType::Var(n) => n.text.clone(),
            };
            let mut text = if dims.is_empty() {
                elem
            } else {
                let dims: Vec<String> = dims.iter().map(dim_text).collect();
                format!("tensor<{}, {elem}>", dims.join(", "))
            };
            if let Some(shard) = shard {
                let entries: Vec<String> = shard
                    .entries
                    .iter()
                    .map(|e| match e {
                        ShardEntry::Replicated(_) => "_".to_owned(),
                        ShardEntry::Axis(path) => path
                            .iter()
                            .map(|n| n.text.as_str())
                            .collect::<Vec<_>>()
                            .join("."),
                    })
                    .collect();
                let _ = write!(text, " @ shard({})", entries.join(", "));
            }
            text
        }
        TypeKind::Int => "int".into(),
        TypeKind::Float => "float".into(),
        TypeKind::Str => "str".into(),
        TypeKind::List(inner) => format!("[{}]", type_text(inner)),
        TypeKind::Tuple(parts) => {
            let parts: Vec<String> = parts.iter().map(type_text).collect();
            format!("({})", parts.join(", "))
        }
        TypeKind::Named(n) => n.text.clone(),
    }
}

/// A written dimension in source syntax.
pub fn dim_text(dim: &Dim) -> String {
    match &dim.kind {
        DimKind::Const(v) => v.to_string(),
        DimKind::Sym(s) => s.clone(),
        DimKind::Pack(s) => format!("..{s}"),
        DimKind::Mul(a, b) => format!("{} * {}", dim_operand(a, false), dim_operand(b, true)),
        DimKind::Div(a, k) => format!("{} / {k}", dim_operand(a, false)),
        DimKind::Quot {
            dim,
            by,
            ceil: false,
        } => format!("{} / {}", dim_operand(dim, false), dim_operand(by, true)),
        DimKind::Quot {
            dim,
            by,
            ceil: true,
        } => format!("cdiv({}, {})", dim_text(dim), dim_text(by)),
        DimKind::Add(a, b) => format!("{} + {}", dim_text(a), dim_sum_operand(b)),
        DimKind::Sub(a, b) => format!("{} - {}", dim_text(a), dim_sum_operand(b)),
    }
}

/// Operand `d` of a product or a quotient (`right`: the right one of a
/// product), parenthesised where the grammar would read it otherwise.
fn dim_operand(d: &Dim, right: bool) -> String {
    let sum = matches!(d.kind, DimKind::Add(..) | DimKind::Sub(..));
    if sum || (right && d.is_compound()) {
        format!("({})", dim_text(d))
    } else {
        dim_text(d)
    }
}

/// The right operand of a sum or a difference, parenthesised when it is
/// itself one.
fn dim_sum_operand(d: &Dim) -> String {
    if matches!(d.kind, DimKind::Add(..) | DimKind::Sub(..)) {
        format!("({})", dim_text(d))
    } else {
        dim_text(d)
    }
}

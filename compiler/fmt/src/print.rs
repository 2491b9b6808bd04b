//! From the AST to layout: items, statements, types and expressions, in the
//! canonical style of the examples and the standard library.
//!
//! Expressions print with exactly the parentheses they need for their
//! structure, plus the ones the user wrote (a doubled pair becomes one), so
//! the printed text parses back to the same tree.

use crate::writer::{Doc, Writer, MAX_WIDTH, SIGNATURE_FILL_WIDTH};
use tessera_syntax::ast::*;

/// The widest first line of parameters after which a signature's result
/// type moves to its own line (see [`Printer::signature`]).
const SIGNATURE_HEAD_WIDTH: usize = 92;

/// Prints items and statements through a [`Writer`].
pub struct Printer<'w, 'a> {
    /// Where the text goes.
    pub w: &'w mut Writer<'a>,
}

/// The binding strength of an expression: higher binds tighter.
fn precedence(e: &ExprKind) -> u8 {
    match e {
        // As the grammar's levels: bitwise operators bind tighter than the
        // comparisons and looser than the shifts and the arithmetic.
        ExprKind::Binary { op, .. } => match op {
            BinOp::Or => 1,
            BinOp::And => 2,
            op if op.is_comparison() => 3,
            BinOp::BitOr => 4,
            BinOp::BitXor => 5,
            BinOp::BitAnd => 6,
            BinOp::Shl | BinOp::Shr => 7,
            BinOp::Add | BinOp::Sub => 8,
            _ => 9,
        },
        ExprKind::Cast { .. } => 10,
        ExprKind::Unary { .. } => 11,
        ExprKind::Index { .. } | ExprKind::Field { .. } => 12,
        _ => 13,
    }
}

/// Builds a list doc.
fn list(open: &'static str, items: Vec<Doc>, close: &'static str) -> Doc {
    Doc::List { open, items, close }
}

impl Printer<'_, '_> {
    /// Prints a whole file.
    pub fn file(&mut self, file: &File) {
        for item in &file.items {
            self.w.begin_line(item.span().lo);
            self.item(item);
        }
    }

    fn item(&mut self, item: &Item) {
        match item {
            Item::Import(i) => {
                let mut parts = vec![Doc::tok("import"), Doc::Space];
                parts.extend(self.path(&i.path));
                parts.push(Doc::tok(";"));
                self.w.doc(&Doc::Seq(parts), 0);
            }
            Item::Numerics(n) => {
                let doc = Doc::Seq(vec![self.numerics(n), Doc::tok(";")]);
                self.w.doc(&doc, 0);
            }
            Item::Op(op) => {
                let keyword = if op.body.is_some() { "op" } else { "extern op" };
                let head = self.head(keyword, &op.name, &op.generics, &op.params);
                self.signature(head, op.ret.as_ref(), op.body.as_ref());
            }
            Item::Fn(f) => {
                let keyword = if f.body.is_some() { "fn" } else { "extern fn" };
                let head = self.head(keyword, &f.name, &f.generics, &f.params);
                self.signature(head, f.ret.as_ref(), f.body.as_ref());
            }
            Item::Kernel(k) => self.kernel(k),
            Item::Schedule(s) => self.schedule(s),
            Item::Mesh(m) => {
                let axes = m
                    .axes
                    .iter()
                    .map(|a| {
                        Doc::Seq(vec![
                            Doc::tok(&a.name.text),
                            Doc::Space,
                            Doc::tok("="),
                            Doc::Space,
                            self.expr(&a.size),
                        ])
                    })
                    .collect();
                let doc = Doc::Seq(vec![
                    Doc::tok("mesh"),
                    Doc::Space,
                    Doc::tok(&m.name.text),
                    list("(", axes, ")"),
                    Doc::tok(";"),
                ]);
                self.w.doc(&doc, 0);
            }
            Item::Error(span) => {
                // Only files without syntax errors are formatted; keep the
                // text if one slips through.
                let text = self.w.slice(span.lo, span.hi).trim().to_owned();
                self.w.doc(&Doc::tok(text), 0);
            }
        }
    }

    /// `extern op name<generics>(params)`, without the result type.
    fn head(&self, keyword: &str, name: &Name, generics: &[Generic], params: &[Param]) -> Doc {
        let mut parts = Vec::new();
        for (i, word) in keyword.split(' ').enumerate() {
            if i > 0 {
                parts.push(Doc::Space);
            }
            parts.push(Doc::tok(word));
        }
        parts.push(Doc::Space);
        parts.push(Doc::tok(&name.text));
        if !generics.is_empty() {
            let items = generics.iter().map(|g| self.generic(g)).collect();
            parts.push(list("<", items, ">"));
        }
        let items = params.iter().map(|p| self.param(p)).collect();
        parts.push(list("(", items, ")"));
        Doc::Seq(parts)
    }

    /// An op or fn signature and its body (or `;`).
    ///
    /// One line when it fits. Else, when the parameters fit on the first
    /// line within [`SIGNATURE_HEAD_WIDTH`] columns, `-> ret {` goes on the
    /// next line, indented. Else the parameters wrap, filled to
    /// [`SIGNATURE_FILL_WIDTH`] columns and aligned after `(`, with
    /// `-> ret {` after the last. Both widths reproduce the layout of the
    /// hand-written examples and standard library.
    fn signature(&mut self, head: Doc, ret: Option<&Type>, body: Option<&Block>) {
        let ret_doc = ret.map(|t| Doc::Seq(vec![Doc::tok("->"), Doc::Space, self.ty(t)]));
        let end = if body.is_some() { " {" } else { ";" };
        let ret_width = ret_doc.as_ref().map_or(0, |r| 1 + r.flat_width());
        let indent = self.w.indent;
        let head_width = head.flat_width();
        let fits = indent + head_width + ret_width + end.len() <= MAX_WIDTH;
        match &ret_doc {
            Some(r) if !fits && indent + head_width <= SIGNATURE_HEAD_WIDTH => {
                self.w.doc(&head, 0);
                let saved = self.w.indent;
                self.w.indent += 4;
                self.w.newline();
                self.w.doc(r, end.len());
                self.w.indent = saved;
            }
            _ => {
                if !fits {
                    self.w.fill_width = SIGNATURE_FILL_WIDTH;
                }
                self.w.doc(&head, ret_width + end.len());
                self.w.fill_width = MAX_WIDTH;
                if let Some(r) = &ret_doc {
                    self.w.space();
                    self.w.doc(r, end.len());
                }
            }
        }
        match body {
            Some(b) => {
                self.w.space();
                self.block(b);
            }
            None => self.w.token(";"),
        }
    }

    /// `kernel name<consts>(params) grid(...) {`, or when that does not fit,
    /// the grid on its own indented line and `{` on the next.
    fn kernel(&mut self, k: &KernelDef) {
        let head = self.head("kernel", &k.name, &k.generics, &k.params);
        let grid = (!k.grid.is_empty()).then(|| {
            let dims = k.grid.iter().map(|e| self.expr(e)).collect();
            Doc::Seq(vec![Doc::tok("grid"), list("(", dims, ")")])
        });
        let grid_width = grid.as_ref().map_or(0, |g| 1 + g.flat_width());
        if self.w.indent + head.flat_width() + grid_width + 2 <= MAX_WIDTH {
            self.w.doc(&head, grid_width + 2);
            if let Some(g) = &grid {
                self.w.space();
                self.w.doc(g, 2);
            }
            self.w.space();
        } else {
            self.w.doc(&head, 0);
            if let Some(g) = &grid {
                let saved = self.w.indent;
                self.w.indent += 4;
                self.w.newline();
                self.w.doc(g, 0);
                self.w.indent = saved;
            }
            self.w.newline();
        }
        self.block(&k.body);
    }

    fn schedule(&mut self, s: &ScheduleDef) {
        let mut parts = vec![Doc::tok("schedule"), Doc::Space, Doc::tok(&s.target.text)];
        if let Some(arch) = &s.arch {
            parts.extend([Doc::Space, Doc::tok("on"), Doc::Space, Doc::tok(&arch.text)]);
        }
        parts.push(Doc::Space);
        self.w.doc(&Doc::Seq(parts), 2);
        self.w.token("{");
        let close = s.span.hi.saturating_sub(1);
        if s.knobs.is_empty() && !self.w.comment_before(close) {
            self.w.token("}");
            return;
        }
        self.w.indent += 4;
        self.w.open_block();
        for knob in &s.knobs {
            self.w.begin_line(knob.span.lo);
            let mut parts = vec![Doc::tok(&knob.name.text)];
            if let Some(args) = &knob.args {
                let items = args.iter().map(|a| self.arg(a)).collect();
                parts.push(list("(", items, ")"));
            }
            parts.push(Doc::tok(";"));
            self.w.doc(&Doc::Seq(parts), 0);
        }
        self.close_block(close);
    }

    /// Prints the comments left before the `}` at `close`, then the `}`.
    fn close_block(&mut self, close: u32) {
        self.w.flush_comments(close);
        self.w.indent = self.w.indent.saturating_sub(4);
        self.w.newline();
        self.w.token("}");
    }

    fn block(&mut self, b: &Block) {
        self.w.token("{");
        let close = b.span.hi.saturating_sub(1);
        if b.stmts.is_empty() && !self.w.comment_before(close) {
            self.w.token("}");
            return;
        }
        self.w.indent += 4;
        self.w.open_block();
        for stmt in &b.stmts {
            self.w.begin_line(stmt.span.lo);
            self.stmt(stmt);
        }
        self.close_block(close);
    }

    fn stmt(&mut self, s: &Stmt) {
        let doc = match &s.kind {
            StmtKind::Let {
                mutable,
                name,
                ty,
                value,
            } => {
                let mut parts = vec![Doc::tok("let"), Doc::Space];
                if *mutable {
                    parts.extend([Doc::tok("mut"), Doc::Space]);
                }
                parts.push(Doc::tok(&name.text));
                if let Some(ty) = ty {
                    parts.extend([Doc::tok(":"), Doc::Space, self.ty(ty)]);
                }
                parts.extend([Doc::Space, Doc::tok("="), Doc::Space, self.expr(value)]);
                parts.push(Doc::tok(";"));
                Doc::Seq(parts)
            }
            StmtKind::LetTuple { names, value } => {
                let mut parts = vec![Doc::tok("let"), Doc::Space, Doc::tok("(")];
                for (i, n) in names.iter().enumerate() {
                    if i > 0 {
                        parts.extend([Doc::tok(","), Doc::Space]);
                    }
                    parts.push(Doc::tok(&n.text));
                }
                parts.extend([
                    Doc::tok(")"),
                    Doc::Space,
                    Doc::tok("="),
                    Doc::Space,
                    self.expr(value),
                    Doc::tok(";"),
                ]);
                Doc::Seq(parts)
            }
            StmtKind::Assign { target, op, value } => {
                let op = match op {
                    AssignOp::Set => "=",
                    AssignOp::Add => "+=",
                    AssignOp::Sub => "-=",
                    AssignOp::Mul => "*=",
                    AssignOp::Div => "/=",
                };
                Doc::Seq(vec![
                    Doc::tok(&target.text),
                    Doc::Space,
                    Doc::tok(op),
                    Doc::Space,
                    self.expr(value),
                    Doc::tok(";"),
                ])
            }
            StmtKind::Return(value) => {
                let mut parts = vec![Doc::tok("return")];
                if let Some(v) = value {
                    parts.extend([Doc::Space, self.expr(v)]);
                }
                parts.push(Doc::tok(";"));
                Doc::Seq(parts)
            }
            StmtKind::Expr(e) => Doc::Seq(vec![self.expr(e), Doc::tok(";")]),
            StmtKind::Numerics(n) => Doc::Seq(vec![self.numerics(n), Doc::tok(";")]),
            StmtKind::Empty => Doc::tok(";"),
            StmtKind::Break => Doc::tok("break;"),
            StmtKind::Continue => Doc::tok("continue;"),
            StmtKind::If {
                branches,
                otherwise,
            } => {
                for (i, (cond, body)) in branches.iter().enumerate() {
                    let mut parts = Vec::new();
                    if i > 0 {
                        parts.extend([Doc::Space, Doc::tok("else"), Doc::Space]);
                    }
                    parts.extend([Doc::tok("if"), Doc::Space, self.expr(cond), Doc::Space]);
                    self.w.doc(&Doc::Seq(parts), 1);
                    self.block(body);
                }
                if let Some(body) = otherwise {
                    let doc = Doc::Seq(vec![Doc::Space, Doc::tok("else"), Doc::Space]);
                    self.w.doc(&doc, 1);
                    self.block(body);
                }
                return;
            }
            StmtKind::For {
                var,
                start,
                end,
                step,
                body,
            } => {
                let mut parts = vec![
                    Doc::tok("for"),
                    Doc::Space,
                    Doc::tok(&var.text),
                    Doc::Space,
                    Doc::tok("in"),
                    Doc::Space,
                    self.expr(start),
                    Doc::tok(".."),
                    self.expr(end),
                    Doc::Space,
                ];
                if let Some(step) = step {
                    parts.extend([Doc::tok("step"), Doc::Space, self.expr(step), Doc::Space]);
                }
                let doc = Doc::Seq(parts);
                self.w.doc(&doc, 1);
                self.block(body);
                return;
            }
            StmtKind::While { cond, body } => {
                let doc = Doc::Seq(vec![
                    Doc::tok("while"),
                    Doc::Space,
                    self.expr(cond),
                    Doc::Space,
                ]);
                self.w.doc(&doc, 1);
                self.block(body);
                return;
            }
            StmtKind::Error => {
                let text = self.w.slice(s.span.lo, s.span.hi).trim().to_owned();
                Doc::tok(text)
            }
        };
        self.w.doc(&doc, 0);
    }

    fn numerics(&self, n: &Numerics) -> Doc {
        let mut parts = vec![Doc::tok("numerics"), Doc::Space];
        for (i, s) in n.settings.iter().enumerate() {
            if i > 0 {
                parts.extend([Doc::tok(","), Doc::Space]);
            }
            if let Some(key) = &s.key {
                parts.extend([Doc::tok(&key.text), Doc::Space, Doc::tok("="), Doc::Space]);
            }
            parts.push(Doc::tok(&s.value.text));
        }
        Doc::Seq(parts)
    }

    /// `a.b.c` as tokens.
    fn path(&self, names: &[Name]) -> Vec<Doc> {
        let mut parts = Vec::new();
        for (i, n) in names.iter().enumerate() {
            if i > 0 {
                parts.push(Doc::tok("."));
            }
            parts.push(Doc::tok(&n.text));
        }
        parts
    }

    fn generic(&self, g: &Generic) -> Doc {
        let mut parts = vec![Doc::tok(&g.name.text)];
        if let Some(bound) = &g.bound {
            parts.extend([Doc::tok(":"), Doc::Space, self.ty(bound)]);
        }
        if let Some(default) = &g.default {
            parts.extend([Doc::Space, Doc::tok("="), Doc::Space, self.expr(default)]);
        }
        Doc::Seq(parts)
    }

    fn param(&self, p: &Param) -> Doc {
        let mut parts = Vec::new();
        let mode = p.mode.name();
        if !mode.is_empty() {
            parts.extend([Doc::tok(mode), Doc::Space]);
        }
        parts.extend([
            Doc::tok(&p.name.text),
            Doc::tok(":"),
            Doc::Space,
            self.ty(&p.ty),
        ]);
        if let Some(default) = &p.default {
            parts.extend([Doc::Space, Doc::tok("="), Doc::Space, self.expr(default)]);
        }
        Doc::Seq(parts)
    }

    fn ty(&self, t: &Type) -> Doc {
        match &t.kind {
            TypeKind::Tensor { dims, elem, shard } => {
                let elem = match elem {
                    ElemType::Dtype(d, _) => Doc::tok(d.name()),
                    ElemType::Var(n) => Doc::tok(&n.text),
                };
                let mut parts = Vec::new();
                // A bare dtype is the rank-0 spelling; a type variable or a
                // shard spec needs the `tensor<...>` form to read back the
                // same (`tensor<N> @ shard(tp)` is not `N @ shard(tp)`).
                let bare = matches!(
                    t.kind,
                    TypeKind::Tensor {
                        elem: ElemType::Dtype(..),
                        ..
                    }
                ) && shard.is_none();
                if dims.is_empty() && bare {
                    parts.push(elem);
                } else {
                    parts.extend([Doc::tok("tensor"), Doc::tok("<")]);
                    for d in dims {
                        parts.push(self.dim(d));
                        parts.extend([Doc::tok(","), Doc::Space]);
                    }
                    parts.extend([elem, Doc::tok(">")]);
                }
                if let Some(spec) = shard {
                    parts.extend([Doc::Space, Doc::tok("@"), Doc::Space, Doc::tok("shard")]);
                    let entries = spec
                        .entries
                        .iter()
                        .map(|e| match e {
                            ShardEntry::Replicated(_) => Doc::tok("_"),
                            ShardEntry::Axis(path) => Doc::Seq(self.path(path)),
                        })
                        .collect();
                    parts.push(list("(", entries, ")"));
                }
                Doc::Seq(parts)
            }
            TypeKind::Int => Doc::tok("int"),
            TypeKind::Float => Doc::tok("float"),
            TypeKind::Str => Doc::tok("str"),
            TypeKind::List(inner) => Doc::Seq(vec![Doc::tok("["), self.ty(inner), Doc::tok("]")]),
            TypeKind::Tuple(parts) => list("(", parts.iter().map(|t| self.ty(t)).collect(), ")"),
            TypeKind::Named(n) => Doc::tok(&n.text),
        }
    }

    fn dim(&self, d: &Dim) -> Doc {
        match &d.kind {
            DimKind::Const(v) => {
                let text = self.w.slice(d.span.lo, d.span.hi);
                Doc::tok(if text.is_empty() {
                    v.to_string()
                } else {
                    text.to_owned()
                })
            }
            DimKind::Sym(s) => Doc::tok(s),
            DimKind::Pack(s) => Doc::Seq(vec![Doc::tok(".."), Doc::tok(s)]),
            // Expressions, with the parentheses their operands need (as
            // `printer::dim_text` places them), one token at a time so
            // that comments stay in sync.
            DimKind::Mul(a, b) => {
                self.dim_binary(self.dim_factor(a, false), "*", self.dim_factor(b, true))
            }
            DimKind::Div(a, k) => {
                self.dim_binary(self.dim_factor(a, false), "/", Doc::tok(k.to_string()))
            }
            DimKind::Quot {
                dim,
                by,
                ceil: false,
            } => self.dim_binary(self.dim_factor(dim, false), "/", self.dim_factor(by, true)),
            DimKind::Quot {
                dim,
                by,
                ceil: true,
            } => Doc::Seq(vec![
                Doc::tok("cdiv"),
                Doc::tok("("),
                self.dim(dim),
                Doc::tok(","),
                Doc::Space,
                self.dim(by),
                Doc::tok(")"),
            ]),
            DimKind::Add(a, b) => self.dim_binary(self.dim(a), "+", self.dim_term(b)),
            DimKind::Sub(a, b) => self.dim_binary(self.dim(a), "-", self.dim_term(b)),
        }
    }

    fn dim_binary(&self, a: Doc, op: &str, b: Doc) -> Doc {
        Doc::Seq(vec![a, Doc::Space, Doc::tok(op), Doc::Space, b])
    }

    fn dim_parens(&self, d: &Dim) -> Doc {
        Doc::Seq(vec![Doc::tok("("), self.dim(d), Doc::tok(")")])
    }

    /// An operand of a product or a quotient (`right`: a product's right
    /// one, which the grammar reads as an atom).
    fn dim_factor(&self, d: &Dim, right: bool) -> Doc {
        let sum = matches!(d.kind, DimKind::Add(..) | DimKind::Sub(..));
        if sum || (right && d.is_compound()) {
            self.dim_parens(d)
        } else {
            self.dim(d)
        }
    }

    /// The right operand of a sum or a difference.
    fn dim_term(&self, d: &Dim) -> Doc {
        if matches!(d.kind, DimKind::Add(..) | DimKind::Sub(..)) {
            self.dim_parens(d)
        } else {
            self.dim(d)
        }
    }

    fn arg(&self, a: &Arg) -> Doc {
        let value = self.expr(&a.value);
        match &a.kind {
            ArgKind::Positional => value,
            ArgKind::Named(n) => Doc::Seq(vec![
                Doc::tok(&n.text),
                Doc::Space,
                Doc::tok("="),
                Doc::Space,
                value,
            ]),
            ArgKind::In(n) => Doc::Seq(vec![
                Doc::tok(&n.text),
                Doc::Space,
                Doc::tok("in"),
                Doc::Space,
                value,
            ]),
        }
    }

    /// Whether the user wrote parentheses around `e`: its span starts before
    /// its own first token.
    fn parenthesized(&self, e: &Expr) -> bool {
        let own_start = match &e.kind {
            ExprKind::Binary { lhs, .. } => lhs.span.lo,
            ExprKind::Cast { value, .. } => value.span.lo,
            ExprKind::Index { base, .. } | ExprKind::Field { base, .. } => base.span.lo,
            ExprKind::Call { args, .. } if e.kind.is_method_call() => args[0].value.span.lo,
            // `(a, b)` opens with its own parenthesis: a second one is the user's.
            ExprKind::Tuple(items) => {
                let head = self.w.slice(e.span.lo, items[0].span.lo);
                return head.matches('(').count() > 1;
            }
            _ => return self.w.slice(e.span.lo, e.span.hi).starts_with('('),
        };
        e.span.lo < own_start
    }

    /// `e`, in parentheses when its precedence is below `min` or the user
    /// wrote them.
    fn operand(&self, e: &Expr, min: u8) -> Doc {
        let inner = self.expr_bare(e);
        if precedence(&e.kind) < min || self.parenthesized(e) {
            Doc::Seq(vec![Doc::tok("("), inner, Doc::tok(")")])
        } else {
            inner
        }
    }

    /// An expression, with the user's parentheses around it kept.
    pub fn expr(&self, e: &Expr) -> Doc {
        self.operand(e, 0)
    }

    fn expr_bare(&self, e: &Expr) -> Doc {
        match &e.kind {
            ExprKind::Int(_) | ExprKind::Float(_) | ExprKind::Str(_) => {
                let text = self.w.find_token(e.span.lo, e.span.hi, |t| {
                    t.starts_with(|c: char| c.is_ascii_digit() || c == '"')
                });
                Doc::tok(text.map_or_else(|| literal_text(&e.kind), str::to_owned))
            }
            ExprKind::Bool(b) => Doc::tok(if *b { "true" } else { "false" }),
            ExprKind::Name(n) => Doc::tok(n),
            ExprKind::Binary { op, lhs, rhs } => {
                let level = precedence(&e.kind);
                // Comparisons do not chain: both sides bind tighter.
                let left_min = if op.is_comparison() { level + 1 } else { level };
                Doc::Seq(vec![
                    self.operand(lhs, left_min),
                    Doc::Space,
                    Doc::tok(op.symbol()),
                    Doc::Space,
                    self.operand(rhs, level + 1),
                ])
            }
            ExprKind::Unary { op, operand } => {
                let symbol = match op {
                    UnOp::Neg => "-",
                    UnOp::Not => "!",
                    UnOp::BitNot => "~",
                };
                Doc::Seq(vec![Doc::tok(symbol), self.operand(operand, 11)])
            }
            ExprKind::Call { callee, args, .. } if e.kind.is_method_call() => {
                // `x.sum(axis = 0)`, as written.
                let items = args[1..].iter().map(|a| self.arg(a)).collect();
                Doc::Seq(vec![
                    self.operand(&args[0].value, 12),
                    Doc::tok("."),
                    Doc::tok(&callee.text),
                    list("(", items, ")"),
                ])
            }
            ExprKind::Call {
                callee,
                dtype_args,
                args,
            } => {
                let mut parts = vec![Doc::tok(&callee.text)];
                if !dtype_args.is_empty() {
                    parts.push(Doc::tok("<"));
                    for (i, (d, _)) in dtype_args.iter().enumerate() {
                        if i > 0 {
                            parts.extend([Doc::tok(","), Doc::Space]);
                        }
                        parts.push(Doc::tok(d.name()));
                    }
                    parts.push(Doc::tok(">"));
                }
                let items = args.iter().map(|a| self.arg(a)).collect();
                parts.push(list("(", items, ")"));
                Doc::Seq(parts)
            }
            ExprKind::Index { base, indices } => {
                let items = indices.iter().map(|i| self.index(i)).collect();
                Doc::Seq(vec![self.operand(base, 12), list("[", items, "]")])
            }
            ExprKind::Field { base, field } => Doc::Seq(vec![
                self.operand(base, 12),
                Doc::tok("."),
                Doc::tok(&field.text),
            ]),
            ExprKind::List(items) => list("[", items.iter().map(|i| self.expr(i)).collect(), "]"),
            ExprKind::Tuple(items) => list("(", items.iter().map(|i| self.expr(i)).collect(), ")"),
            ExprKind::Cast { value, dtype } => Doc::Seq(vec![
                self.operand(value, 10),
                Doc::Space,
                Doc::tok("as"),
                Doc::Space,
                Doc::tok(dtype.name()),
            ]),
            ExprKind::Error => Doc::tok(self.w.slice(e.span.lo, e.span.hi).trim()),
        }
    }

    fn index(&self, i: &IndexArg) -> Doc {
        match i {
            IndexArg::Expr(e) => self.expr(e),
            IndexArg::NewAxis(_) => Doc::tok("None"),
            IndexArg::Ellipsis(_) => Doc::tok("..."),
            IndexArg::Slice { lo, hi, step, .. } => {
                let mut parts = Vec::new();
                if let Some(lo) = lo {
                    parts.push(self.expr(lo));
                }
                parts.push(Doc::tok(":"));
                if let Some(hi) = hi {
                    parts.push(self.expr(hi));
                }
                if let Some(step) = step {
                    parts.push(Doc::tok(":"));
                    parts.push(self.expr(step));
                }
                Doc::Seq(parts)
            }
        }
    }
}

/// Whether call `e` was written with method syntax (`x.sum()`): its
/// receiver, the first argument, comes before the callee's name.

/// A literal's text when its token cannot be found (never in practice).
fn literal_text(kind: &ExprKind) -> String {
    match kind {
        ExprKind::Int(v) => v.to_string(),
        ExprKind::Float(v) => format!("{v:?}"),
        ExprKind::Str(s) => format!("{s:?}"),
        _ => String::new(),
    }
}

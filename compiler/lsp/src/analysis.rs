//! One analysed document: the compilation of its text and an index of every
//! name in it (definitions, references, the symbol each resolves to), which
//! hover, navigation, completion and semantic tokens read.
//!
//! Names resolve as the checker resolves them: locals (innermost scope
//! first), then the item's parameters, generics and dimension symbols, then
//! mesh axes; callees resolve to the file's ops, kernels and fns first, then
//! to the stdlib module of the context (`std.tile` in kernels, `std.host` in
//! fns), then `std.core` and the other modules.

use std::collections::HashMap;
use tessera_driver::diagnostics::{FileId, Span};
use tessera_driver::sema::StdModule;
use tessera_driver::syntax::ast::{self, ExprKind, Item, StmtKind};
use tessera_driver::{compile_text, Compilation, Stage};

use crate::lines::LineIndex;
use crate::signature::{item_signature, squash, Signature};

/// What kind of thing a name denotes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SymKind {
    /// An `op` (user or stdlib).
    Op,
    /// A `kernel`.
    Kernel,
    /// A `fn` (host code or stdlib builtin).
    Fn,
    /// A `mesh`.
    Mesh,
    /// A mesh axis.
    Axis,
    /// A `let` binding or `for` variable.
    Local,
    /// A value parameter.
    Param,
    /// A generic: dtype parameter or kernel constant.
    Generic,
    /// A dimension symbol (`M`, `..S`).
    Dim,
    /// A schedule knob name (no definition).
    Knob,
}

/// A definition: what hover and completion show about a symbol.
#[derive(Clone, Debug)]
pub struct Def {
    /// The name.
    pub name: String,
    /// Its kind.
    pub kind: SymKind,
    /// Where the name is written at its definition.
    pub span: Span,
    /// The declared type or signature, as text.
    pub detail: String,
    /// Doc comment lines (items only).
    pub docs: Vec<String>,
    /// For `let`: the bound expression, whose type the checker knows.
    pub value: Option<ast::ExprId>,
    /// Where the name is visible (for completion).
    pub scope: Span,
    /// For ops, kernels and fns: the signature with parameter positions.
    pub signature: Option<Signature>,
}

/// One written name and the definition it refers to.
#[derive(Clone, Copy, Debug)]
pub struct Occurrence {
    /// The name as written.
    pub span: Span,
    /// The definition's span (the key into [`Index::defs`]); `None` when the
    /// name resolves to nothing the server knows.
    pub def: Option<Span>,
    /// What it names.
    pub kind: SymKind,
    /// Whether this occurrence is the definition itself.
    pub is_def: bool,
}

/// Every name of the document, resolved.
#[derive(Clone, Debug, Default)]
pub struct Index {
    /// Occurrences in the user file, sorted by start.
    pub occurrences: Vec<Occurrence>,
    /// Definitions by their span, stdlib items included.
    pub defs: HashMap<Span, Def>,
    /// Every expression of the user file: span and id.
    pub exprs: Vec<(Span, ast::ExprId)>,
}

impl Index {
    /// The occurrence under byte `offset` (a name touching the cursor on
    /// either side counts).
    pub fn occurrence_at(&self, offset: u32) -> Option<&Occurrence> {
        let i = self.occurrences.partition_point(|o| o.span.hi < offset);
        self.occurrences[i..]
            .iter()
            .take_while(|o| o.span.lo <= offset)
            .find(|o| o.span.lo <= offset && offset <= o.span.hi)
    }

    /// The smallest expression containing byte `offset`.
    pub fn expr_at(&self, offset: u32) -> Option<(Span, ast::ExprId)> {
        self.exprs
            .iter()
            .filter(|(s, _)| s.lo <= offset && offset < s.hi.max(s.lo + 1))
            .min_by_key(|(s, _)| s.hi - s.lo)
            .copied()
    }
}

/// A document's text, its compilation and its index.
#[derive(Debug)]
pub struct Analysis {
    /// The compilation of the text (file 0) plus the stdlib.
    pub comp: Compilation,
    /// Line starts of the text.
    pub lines: LineIndex,
    /// The names.
    pub index: Index,
}

/// The user file's id in every compilation the server makes.
pub const USER_FILE: FileId = FileId(0);

impl Analysis {
    /// Lexes, parses, checks and indexes `text`.
    pub fn new(name: &str, text: &str) -> Analysis {
        let comp = compile_text(name, text, Stage::Check);
        let index = build_index(&comp);
        Analysis {
            lines: LineIndex::new(text),
            comp,
            index,
        }
    }

    /// The document's text.
    pub fn text(&self) -> &str {
        &self.comp.sources.get(USER_FILE).text
    }

    /// The document's syntax tree.
    pub fn file(&self) -> Option<&ast::File> {
        self.comp.files.first().map(|(_, f)| f)
    }

    /// The user item whose span contains `offset`.
    pub fn item_at(&self, offset: u32) -> Option<&Item> {
        self.file()?
            .items
            .iter()
            .find(|i| i.span().lo <= offset && offset <= i.span().hi)
    }
}

/// Where a body runs, which decides the stdlib modules its calls see.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Context {
    /// An op body (or file level).
    Op,
    /// A kernel body.
    Kernel,
    /// A host fn body.
    Host,
}

impl Context {
    /// The stdlib modules in lookup order for this context.
    pub fn modules(self) -> [StdModule; 5] {
        use StdModule::*;
        match self {
            Context::Op => [Core, Nn, Dist, Tile, Host],
            Context::Kernel => [Tile, Core, Nn, Dist, Host],
            Context::Host => [Host, Core, Nn, Dist, Tile],
        }
    }

    /// The context of an item.
    pub fn of(item: &Item) -> Context {
        match item {
            Item::Kernel(_) => Context::Kernel,
            Item::Fn(_) => Context::Host,
            _ => Context::Op,
        }
    }
}

/// The name, kind and span of a callable or mesh item.
fn item_name(item: &Item) -> Option<(&ast::Name, SymKind)> {
    match item {
        Item::Op(o) => Some((&o.name, SymKind::Op)),
        Item::Kernel(k) => Some((&k.name, SymKind::Kernel)),
        Item::Fn(f) => Some((&f.name, SymKind::Fn)),
        Item::Mesh(m) => Some((&m.name, SymKind::Mesh)),
        _ => None,
    }
}

/// The documentation lines of an item.
pub fn item_docs(item: &Item) -> &[String] {
    match item {
        Item::Op(o) => &o.docs,
        Item::Kernel(k) => &k.docs,
        Item::Fn(f) => &f.docs,
        Item::Mesh(m) => &m.docs,
        Item::Schedule(s) => &s.docs,
        _ => &[],
    }
}

struct Builder<'a> {
    text: &'a str,
    index: Index,
    /// User items by name.
    items: HashMap<&'a str, Span>,
    /// Stdlib items by module and name.
    std_items: HashMap<(StdModule, &'a str), Span>,
    /// Mesh axes by name (first declaration wins) and by `mesh.axis`.
    axes: HashMap<String, Span>,
    /// Item-level names (params, generics, dims) of the current item.
    item_scope: HashMap<String, Span>,
    /// Local scopes, innermost last, each with the block it covers.
    scopes: Vec<(HashMap<String, Span>, Span)>,
    context: Context,
    item_span: Span,
}

/// Resolves and records every name of the compilation's user file.
pub fn build_index(comp: &Compilation) -> Index {
    let mut b = Builder {
        text: &comp.sources.get(USER_FILE).text,
        index: Index::default(),
        items: HashMap::new(),
        std_items: HashMap::new(),
        axes: HashMap::new(),
        item_scope: HashMap::new(),
        scopes: Vec::new(),
        context: Context::Op,
        item_span: Span::default(),
    };
    for (file, module, ast) in &comp.stdlib {
        let text = &comp.sources.get(*file).text;
        for item in &ast.items {
            let Some((name, kind)) = item_name(item) else {
                continue;
            };
            b.std_items
                .entry((*module, &name.text))
                .or_insert(name.span);
            b.index.defs.insert(
                name.span,
                item_def(text, item, name, kind, Span::new(*file, 0, 0)),
            );
        }
    }
    let Some((_, file)) = comp.files.first() else {
        return b.index;
    };
    let everywhere = Span::new(USER_FILE, 0, b.text.len() as u32);
    for item in &file.items {
        if let Some((name, kind)) = item_name(item) {
            b.items.entry(&name.text).or_insert(name.span);
            b.index
                .defs
                .insert(name.span, item_def(b.text, item, name, kind, everywhere));
        }
        if let Item::Mesh(m) = item {
            for axis in &m.axes {
                let size = b.text_of(axis.size.span);
                b.axes
                    .entry(axis.name.text.clone())
                    .or_insert(axis.name.span);
                b.axes
                    .entry(format!("{}.{}", m.name.text, axis.name.text))
                    .or_insert(axis.name.span);
                b.define(
                    &axis.name,
                    SymKind::Axis,
                    format!(
                        "mesh axis `{}` of `{}`, size {size}",
                        axis.name.text, m.name.text
                    ),
                    everywhere,
                );
            }
        }
    }
    for item in &file.items {
        b.item(item);
    }
    b.index.occurrences.sort_by_key(|o| (o.span.lo, o.span.hi));
    b.index.exprs.sort_by_key(|(s, _)| (s.lo, s.hi));
    b.index
}

fn item_def(text: &str, item: &Item, name: &ast::Name, kind: SymKind, scope: Span) -> Def {
    let signature = item_signature(text, item);
    let detail = match (&signature, item) {
        (Some(sig), _) => sig.label.clone(),
        (None, Item::Mesh(m)) => squash(
            text.get(m.span.lo as usize..m.span.hi as usize)
                .unwrap_or(""),
        ),
        _ => name.text.clone(),
    };
    Def {
        name: name.text.clone(),
        kind,
        span: name.span,
        detail,
        docs: item_docs(item).to_vec(),
        value: None,
        scope,
        signature,
    }
}

impl<'a> Builder<'a> {
    fn text_of(&self, span: Span) -> String {
        squash(
            self.text
                .get(span.lo as usize..span.hi as usize)
                .unwrap_or(""),
        )
    }

    fn occur(&mut self, span: Span, def: Option<Span>, kind: SymKind, is_def: bool) {
        self.index.occurrences.push(Occurrence {
            span,
            def,
            kind,
            is_def,
        });
    }

    /// Records a definition and its occurrence.
    fn define(&mut self, name: &ast::Name, kind: SymKind, detail: String, scope: Span) {
        self.occur(name.span, Some(name.span), kind, true);
        self.index.defs.entry(name.span).or_insert(Def {
            name: name.text.clone(),
            kind,
            span: name.span,
            detail,
            docs: Vec::new(),
            value: None,
            scope,
            signature: None,
        });
    }

    fn kind_of(&self, def: Span) -> SymKind {
        self.index.defs.get(&def).map_or(SymKind::Local, |d| d.kind)
    }

    /// Resolves a callee name.
    fn callee(&self, name: &str) -> Option<Span> {
        if let Some(span) = self.items.get(name) {
            return Some(*span);
        }
        self.context
            .modules()
            .into_iter()
            .find_map(|m| self.std_items.get(&(m, name)).copied())
    }

    /// Resolves a value name.
    fn value(&self, name: &str) -> Option<Span> {
        self.scopes
            .iter()
            .rev()
            .find_map(|(s, _)| s.get(name))
            .or_else(|| self.item_scope.get(name))
            .or_else(|| self.axes.get(name))
            .copied()
    }

    fn item(&mut self, item: &'a Item) {
        self.item_scope.clear();
        self.scopes.clear();
        self.context = Context::of(item);
        self.item_span = item.span();
        match item {
            Item::Op(o) => {
                self.occur(o.name.span, Some(o.name.span), SymKind::Op, true);
                self.signature(&o.generics, &o.params, o.ret.as_ref());
                if let Some(body) = &o.body {
                    self.block(body);
                }
            }
            Item::Kernel(k) => {
                self.occur(k.name.span, Some(k.name.span), SymKind::Kernel, true);
                self.signature(&k.generics, &k.params, None);
                for e in &k.grid {
                    self.expr(e);
                }
                self.block(&k.body);
            }
            Item::Fn(f) => {
                self.occur(f.name.span, Some(f.name.span), SymKind::Fn, true);
                self.signature(&f.generics, &f.params, f.ret.as_ref());
                if let Some(body) = &f.body {
                    self.block(body);
                }
            }
            Item::Mesh(m) => {
                self.occur(m.name.span, Some(m.name.span), SymKind::Mesh, true);
                for axis in &m.axes {
                    self.expr(&axis.size);
                }
            }
            Item::Schedule(s) => {
                let def = self.items.get(s.target.text.as_str()).copied();
                let kind = def.map_or(SymKind::Op, |d| self.kind_of(d));
                self.occur(s.target.span, def, kind, false);
                for knob in &s.knobs {
                    self.occur(knob.name.span, None, SymKind::Knob, false);
                    for arg in knob.args.iter().flatten() {
                        self.expr(&arg.value);
                    }
                }
            }
            Item::Import(_) | Item::Numerics(_) | Item::Error(_) => {}
        }
    }

    fn signature(
        &mut self,
        generics: &'a [ast::Generic],
        params: &'a [ast::Param],
        ret: Option<&'a ast::Type>,
    ) {
        let scope = self.item_span;
        for g in generics {
            let detail = match &g.bound {
                Some(t) => format!("{}: {}", g.name.text, self.text_of(t.span)),
                None => g.name.text.clone(),
            };
            self.item_scope.insert(g.name.text.clone(), g.name.span);
            self.define(&g.name, SymKind::Generic, detail, scope);
        }
        for p in params {
            if let Some(d) = &p.default {
                self.expr(d);
            }
            self.ty(&p.ty);
            let detail = format!(
                "{}{}: {}",
                p.mode.keyword(),
                p.name.text,
                self.text_of(p.ty.span)
            );
            self.item_scope.insert(p.name.text.clone(), p.name.span);
            self.define(&p.name, SymKind::Param, detail, scope);
        }
        if let Some(t) = ret {
            self.ty(t);
        }
    }

    fn ty(&mut self, ty: &'a ast::Type) {
        match &ty.kind {
            ast::TypeKind::Tensor { dims, elem, shard } => {
                for d in dims {
                    self.dim(d);
                }
                if let ast::ElemType::Var(name) = elem {
                    self.value_ref(name, SymKind::Generic);
                }
                if let Some(shard) = shard {
                    for entry in &shard.entries {
                        if let ast::ShardEntry::Axis(path) = entry {
                            self.axis_path(path);
                        }
                    }
                }
            }
            ast::TypeKind::List(inner) => self.ty(inner),
            ast::TypeKind::Tuple(parts) => parts.iter().for_each(|t| self.ty(t)),
            ast::TypeKind::Named(name) => self.value_ref(name, SymKind::Generic),
            ast::TypeKind::Int | ast::TypeKind::Float | ast::TypeKind::Str => {}
        }
    }

    fn dim(&mut self, dim: &ast::Dim) {
        let (name, mut span) = match &dim.kind {
            ast::DimKind::Const(_) => return,
            ast::DimKind::Sym(n) | ast::DimKind::Pack(n) => (n, dim.span),
            _ => {
                dim.operands().into_iter().for_each(|d| self.dim(d));
                return;
            }
        };
        if self
            .text
            .get(span.lo as usize..)
            .is_some_and(|t| t.starts_with(".."))
        {
            span.lo += 2;
        }
        if let Some(def) = self.item_scope.get(name).copied() {
            self.occur(span, Some(def), self.kind_of(def), false);
        } else {
            let n = ast::Name {
                text: name.clone(),
                span,
            };
            self.item_scope.insert(name.clone(), span);
            self.define(
                &n,
                SymKind::Dim,
                format!("dimension `{name}`"),
                self.item_span,
            );
        }
    }

    fn axis_path(&mut self, path: &[ast::Name]) {
        match path {
            [axis] => self.value_ref(axis, SymKind::Axis),
            [mesh, axis] => {
                let m = self.items.get(mesh.text.as_str()).copied();
                self.occur(mesh.span, m, SymKind::Mesh, false);
                let a = self
                    .axes
                    .get(&format!("{}.{}", mesh.text, axis.text))
                    .copied();
                self.occur(axis.span, a, SymKind::Axis, false);
            }
            _ => {}
        }
    }

    fn value_ref(&mut self, name: &ast::Name, fallback: SymKind) {
        let def = self.value(&name.text);
        let kind = def.map_or(fallback, |d| self.kind_of(d));
        self.occur(name.span, def, kind, false);
    }

    fn block(&mut self, block: &'a ast::Block) {
        self.scopes.push((HashMap::new(), block.span));
        for stmt in &block.stmts {
            self.stmt(stmt);
        }
        self.scopes.pop();
    }

    fn bind(&mut self, name: &ast::Name, detail: String, value: Option<ast::ExprId>) {
        let scope = self.scopes.last().map_or(self.item_span, |(_, s)| {
            Span::new(USER_FILE, name.span.lo, s.hi)
        });
        self.define(name, SymKind::Local, detail, scope);
        if let Some(def) = self.index.defs.get_mut(&name.span) {
            def.value = value;
        }
        if let Some((s, _)) = self.scopes.last_mut() {
            s.insert(name.text.clone(), name.span);
        }
    }

    fn stmt(&mut self, stmt: &'a ast::Stmt) {
        match &stmt.kind {
            StmtKind::Let {
                mutable,
                name,
                ty,
                value,
            } => {
                self.expr(value);
                if let Some(t) = ty {
                    self.ty(t);
                }
                let detail = format!("let {}{}", if *mutable { "mut " } else { "" }, name.text);
                self.bind(name, detail, Some(value.id));
            }
            StmtKind::LetTuple { names, value } => {
                self.expr(value);
                for (i, name) in names.iter().enumerate().filter(|(_, n)| n.text != "_") {
                    self.bind(name, format!("let {} (part {i})", name.text), None);
                }
            }
            StmtKind::Assign { target, value, .. } => {
                self.expr(value);
                self.value_ref(target, SymKind::Local);
            }
            StmtKind::Return(Some(e)) | StmtKind::Expr(e) => self.expr(e),
            StmtKind::If {
                branches,
                otherwise,
            } => {
                for (cond, block) in branches {
                    self.expr(cond);
                    self.block(block);
                }
                if let Some(block) = otherwise {
                    self.block(block);
                }
            }
            StmtKind::For {
                var,
                start,
                end,
                step,
                body,
            } => {
                self.expr(start);
                self.expr(end);
                if let Some(step) = step {
                    self.expr(step);
                }
                self.scopes.push((HashMap::new(), body.span));
                self.bind(var, format!("for {} (loop variable)", var.text), None);
                for stmt in &body.stmts {
                    self.stmt(stmt);
                }
                self.scopes.pop();
            }
            StmtKind::While { cond, body } => {
                self.expr(cond);
                self.block(body);
            }
            StmtKind::Return(None)
            | StmtKind::Break
            | StmtKind::Continue
            | StmtKind::Numerics(_)
            | StmtKind::Empty
            | StmtKind::Error => {}
        }
    }

    fn expr(&mut self, e: &'a ast::Expr) {
        self.index.exprs.push((e.span, e.id));
        match &e.kind {
            ExprKind::Name(n) => {
                let name = ast::Name {
                    text: n.clone(),
                    span: e.span,
                };
                self.value_ref(&name, SymKind::Local);
            }
            ExprKind::Call { callee, args, .. } => {
                let def = self.callee(&callee.text);
                let kind = def.map_or(SymKind::Op, |d| self.kind_of(d));
                self.occur(callee.span, def, kind, false);
                for arg in args {
                    if let ast::ArgKind::Named(n) = &arg.kind {
                        let param = def.and_then(|d| self.param_of(d, &n.text));
                        self.occur(n.span, param, SymKind::Param, false);
                    }
                    self.expr(&arg.value);
                }
            }
            _ => {
                for child in e.kind.children() {
                    self.expr(child);
                }
            }
        }
    }

    /// The definition span of parameter `name` of the item defined at `def`.
    fn param_of(&self, def: Span, name: &str) -> Option<Span> {
        let sig = self.index.defs.get(&def)?.signature.as_ref()?;
        sig.params.iter().find(|p| p.name == name).map(|p| p.span)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_locals_params_and_callees() {
        let src = "import std.nn;\nop f(x: tensor<N, fp32>) -> tensor<N, fp32> {\n    let y = gelu(x);\n    return y;\n}\n";
        let a = Analysis::new("t.tsr", src);
        let at = |s: &str, nth: usize| src.match_indices(s).nth(nth).unwrap().0 as u32;
        let y_use = a.index.occurrence_at(at("y;", 0)).unwrap();
        assert_eq!(y_use.def.unwrap().lo, at("y =", 0));
        let x_use = a.index.occurrence_at(at("x)", 0)).unwrap();
        assert_eq!(x_use.kind, SymKind::Param);
        let gelu = a.index.occurrence_at(at("gelu", 0)).unwrap();
        assert_ne!(gelu.def.unwrap().file, USER_FILE);
        let n = a.index.occurrence_at(at("N", 1)).unwrap();
        assert_eq!(n.def.unwrap().lo, at("N", 0));
    }
}

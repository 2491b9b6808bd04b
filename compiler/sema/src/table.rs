//! The item table: every op, kernel, fn and mesh of the program by name, and
//! the lookup rules that decide which one a call means.

use crate::suggest;
use crate::{StdModule, Unit};
use std::collections::{BTreeSet, HashMap};
use tessera_diagnostics::{codes, Diagnostic, Diagnostics, FileId, Span};
use tessera_syntax::ast::{self, Item};

/// A callable item.
#[derive(Clone, Copy, Debug)]
pub enum Callee<'a> {
    /// An op (with a body, or `extern`).
    Op(&'a ast::OpDef),
    /// A kernel.
    Kernel(&'a ast::KernelDef),
    /// A host fn (with a body, or an `extern` builtin).
    Fn(&'a ast::FnDef),
}

impl<'a> Callee<'a> {
    /// The item's name.
    pub fn name(&self) -> &'a ast::Name {
        match self {
            Callee::Op(o) => &o.name,
            Callee::Kernel(k) => &k.name,
            Callee::Fn(f) => &f.name,
        }
    }

    /// The item's parameters.
    pub fn params(&self) -> &'a [ast::Param] {
        match self {
            Callee::Op(o) => &o.params,
            Callee::Kernel(k) => &k.params,
            Callee::Fn(f) => &f.params,
        }
    }

    /// Whether the compiler implements it (no body).
    pub fn is_extern(&self) -> bool {
        match self {
            Callee::Op(o) => o.body.is_none(),
            Callee::Kernel(_) => false,
            Callee::Fn(f) => f.body.is_none(),
        }
    }

    /// The signature in source syntax, for help messages.
    pub fn signature(&self) -> String {
        let kw = match self {
            Callee::Op(_) => "op",
            Callee::Kernel(_) => "kernel",
            Callee::Fn(_) => "fn",
        };
        let params: Vec<String> = self
            .params()
            .iter()
            .map(|p| {
                let out = p.mode.keyword();
                let default = if p.default.is_some() { " = ..." } else { "" };
                format!(
                    "{out}{}: {}{default}",
                    p.name.text,
                    tessera_syntax::printer::type_text(&p.ty)
                )
            })
            .collect();
        let ret = match self {
            Callee::Op(o) => o.ret.as_ref(),
            Callee::Fn(f) => f.ret.as_ref(),
            Callee::Kernel(_) => None,
        };
        let ret = ret
            .map(|t| format!(" -> {}", tessera_syntax::printer::type_text(t)))
            .unwrap_or_default();
        format!("{kw} {}({}){ret}", self.name().text, params.join(", "))
    }
}

/// An item with where it came from.
#[derive(Clone, Copy, Debug)]
pub struct Entry<'a> {
    /// The item.
    pub callee: Callee<'a>,
    /// Its file.
    pub file: FileId,
    /// Its stdlib module, or `None` for the user's items.
    pub module: Option<StdModule>,
}

/// What kind of body a name is looked up from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyKind {
    /// An op body: algebra on tensors.
    Op,
    /// A kernel body: tile-level code.
    Kernel,
    /// A host fn body.
    Host,
}

/// The result of looking a callee up.
pub enum Lookup<'a> {
    /// Found.
    Found(Entry<'a>),
    /// Not found; the diagnostic says why.
    Missing(Diagnostic),
}

/// All items of the program.
pub struct Table<'a> {
    user: HashMap<String, Entry<'a>>,
    std: HashMap<(StdModule, String), Entry<'a>>,
    /// The user's meshes, in source order.
    pub meshes: Vec<&'a ast::MeshDef>,
    /// The stdlib modules each user file imports.
    pub imports: HashMap<FileId, BTreeSet<StdModule>>,
    /// The stdlib's files: their bodies never see the user's items.
    std_files: BTreeSet<FileId>,
}

impl<'a> Table<'a> {
    /// Collects the items of all units, reporting duplicates and bad imports.
    pub fn build(units: &[Unit<'a>], diags: &mut Diagnostics) -> Table<'a> {
        let mut table = Table {
            user: HashMap::new(),
            std: HashMap::new(),
            meshes: Vec::new(),
            imports: HashMap::new(),
            std_files: BTreeSet::new(),
        };
        let mut mesh_names: HashMap<&str, Span> = HashMap::new();
        for unit in units {
            let imports = table.imports.entry(unit.file).or_default();
            if unit.module.is_some() {
                // The stdlib's modules see one another.
                imports.extend([StdModule::Nn, StdModule::Dist]);
            }
            for item in &unit.ast.items {
                let callee = match item {
                    Item::Op(o) => Callee::Op(o),
                    Item::Kernel(k) => Callee::Kernel(k),
                    Item::Fn(f) => Callee::Fn(f),
                    Item::Mesh(m) if unit.module.is_none() => {
                        if let Some(prev) = mesh_names.insert(&m.name.text, m.name.span) {
                            diags.push(duplicate(&m.name, prev, "mesh"));
                        }
                        table.meshes.push(m);
                        continue;
                    }
                    Item::Import(import) => {
                        let path: Vec<&str> = import.path.iter().map(|n| n.text.as_str()).collect();
                        match path.as_slice() {
                            ["std", name] if StdModule::from_name(name).is_some() => {
                                imports
                                    .insert(StdModule::from_name(name).unwrap_or(StdModule::Core));
                            }
                            _ => {
                                let shown = path.join(".");
                                let mut d = Diagnostic::error(
                                    codes::E0102,
                                    import.span,
                                    format!("unknown module `{shown}`"),
                                )
                                .with_label("no such module")
                                .with_note("the modules are std.core, std.nn, std.dist, std.tile and std.host");
                                let last = path.last().copied().unwrap_or("");
                                if let Some(m) =
                                    suggest::closest(last, StdModule::ALL.map(|m| m.name()))
                                {
                                    d = d.with_help(format!("did you mean `import std.{m};`?"));
                                }
                                diags.push(d);
                            }
                        }
                        continue;
                    }
                    _ => continue,
                };
                let entry = Entry {
                    callee,
                    file: unit.file,
                    module: unit.module,
                };
                let name = callee.name();
                match unit.module {
                    None => {
                        if let Some(prev) = table.user.insert(name.text.clone(), entry) {
                            diags.push(duplicate(name, prev.callee.name().span, "item"));
                        }
                    }
                    Some(m) => {
                        table.std_files.insert(unit.file);
                        table.std.insert((m, name.text.clone()), entry);
                    }
                }
            }
        }
        table
    }

    /// Whether `file` is one of the stdlib's.
    pub fn is_std(&self, file: FileId) -> bool {
        self.std_files.contains(&file)
    }

    /// The user's item named `name`.
    pub fn user_item(&self, name: &str) -> Option<Entry<'a>> {
        self.user.get(name).copied()
    }

    /// Resolves the callee `name` called from a body of kind `kind` in `file`.
    pub fn lookup(&self, name: &ast::Name, kind: BodyKind, file: FileId) -> Lookup<'a> {
        // The user's items shadow the stdlib's in the user's files; a
        // stdlib body (`normalize` calling `norm`) means the stdlib's.
        if let Some(entry) = self
            .user
            .get(&name.text)
            .filter(|_| !self.std_files.contains(&file))
        {
            return Lookup::Found(*entry);
        }
        // A stdlib name starting with `_` is a helper of the stdlib's own
        // bodies: user code neither sees it nor is offered it.
        let private = |n: &str| n.starts_with('_') && !self.std_files.contains(&file);
        let hidden = private(&name.text);
        let imported = self.imports.get(&file);
        let visible = |m: StdModule| match m {
            StdModule::Core => true,
            StdModule::Nn | StdModule::Dist => imported.is_some_and(|s| s.contains(&m)),
            StdModule::Tile => kind == BodyKind::Kernel,
            // An op may make a constant tensor: a pad, an initial state.
            StdModule::Host => {
                kind == BodyKind::Host
                    || (kind == BodyKind::Op
                        && matches!(name.text.as_str(), "zeros" | "ones" | "full"))
            }
        };
        let order = match kind {
            BodyKind::Kernel => [
                StdModule::Tile,
                StdModule::Core,
                StdModule::Nn,
                StdModule::Dist,
                StdModule::Host,
            ],
            _ => [
                StdModule::Host,
                StdModule::Core,
                StdModule::Nn,
                StdModule::Dist,
                StdModule::Tile,
            ],
        };
        for m in order.into_iter().filter(|_| !hidden) {
            if visible(m) {
                if let Some(entry) = self.std.get(&(m, name.text.clone())) {
                    return Lookup::Found(*entry);
                }
            }
        }
        // Not visible: explain why.
        for m in order.into_iter().filter(|_| !hidden) {
            if self.std.contains_key(&(m, name.text.clone())) {
                let d = match m {
                    StdModule::Tile => Diagnostic::error(
                        codes::E0600,
                        name.span,
                        format!("`{}` is a tile-level operation", name.text),
                    )
                    .with_label("only kernels may use this")
                    .with_help(
                        "move this code into a `kernel`, or use the algebraic ops of std.core",
                    ),
                    StdModule::Host => Diagnostic::error(
                        codes::E0601,
                        name.span,
                        format!("`{}` is a host operation", name.text),
                    )
                    .with_label("only host `fn`s may use this")
                    .with_help("create tensors in `fn main` and pass them in as parameters"),
                    _ => Diagnostic::error(
                        codes::E0100,
                        name.span,
                        format!("cannot find `{}` in scope", name.text),
                    )
                    .with_label("not imported")
                    .with_help(format!(
                        "add `import std.{};` at the top of the file",
                        m.name()
                    )),
                };
                return Lookup::Missing(d);
            }
        }
        let mut d = Diagnostic::error(
            codes::E0100,
            name.span,
            format!("cannot find op or function `{}`", name.text),
        )
        .with_label("not found");
        if let Some(hint) = suggest::foreign_function(&name.text) {
            return Lookup::Missing(d.with_help(hint));
        }
        let candidates = self.user.keys().map(String::as_str).chain(
            self.std
                .keys()
                .filter(|(m, n)| visible(*m) && !private(n))
                .map(|(_, n)| n.as_str()),
        );
        if let Some(s) = suggest::closest(&name.text, candidates) {
            d = d.with_help(format!("did you mean `{s}`?"));
        }
        Lookup::Missing(d)
    }
}

fn duplicate(name: &ast::Name, prev: Span, what: &str) -> Diagnostic {
    Diagnostic::error(
        codes::E0101,
        name.span,
        format!("the {what} `{}` is defined twice", name.text),
    )
    .with_label("redefined here")
    .with_secondary(prev, "first defined here")
    .with_help("rename one of them")
}

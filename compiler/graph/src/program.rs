//! The checked program as the graph builder sees it: every op, kernel and
//! mesh by name, the numerics of each op, and the file-level numerics.

use std::collections::HashMap;
use tessera_sema::{AxisRef, Checked, NumericsConfig, ScheduleInfo, StdModule};
use tessera_syntax::ast;

/// An op or kernel the builder can call.
#[derive(Clone, Copy, Debug)]
pub enum Callable<'a> {
    /// An op (with a body, or `extern`: a primitive).
    Op(&'a ast::OpDef, Option<StdModule>),
    /// A user kernel.
    Kernel(&'a ast::KernelDef),
    /// A host fn.
    Fn(&'a ast::FnDef, Option<StdModule>),
}

impl<'a> Callable<'a> {
    /// The declared parameters.
    pub fn params(&self) -> &'a [ast::Param] {
        match self {
            Callable::Op(op, _) => &op.params,
            Callable::Kernel(k) => &k.params,
            Callable::Fn(f, _) => &f.params,
        }
    }
}

/// Index of a checked program.
pub struct Program<'a> {
    items: HashMap<&'a str, Callable<'a>>,
    /// The stdlib's items alone: what a stdlib body's calls mean, whatever
    /// the user's files name.
    std_items: HashMap<&'a str, Callable<'a>>,
    axes: HashMap<&'a str, AxisRef>,
    numerics: HashMap<String, NumericsConfig>,
    schedules: Vec<ScheduleInfo>,
}

impl<'a> Program<'a> {
    /// Indexes the user files and stdlib modules. User items shadow stdlib
    /// items of the same name, as in the checker.
    pub fn new(
        user: &[&'a ast::File],
        stdlib: &[(StdModule, &'a ast::File)],
        checked: &Checked,
    ) -> Program<'a> {
        let mut items = HashMap::new();
        let mut std_items = HashMap::new();
        let mut axes = HashMap::new();
        let files = stdlib
            .iter()
            .map(|(m, f)| (Some(*m), *f))
            .chain(user.iter().map(|f| (None, *f)));
        for (module, file) in files {
            // std.tile's names are for kernels, which resolve their calls
            // themselves: where another module has the same name (`arange`,
            // `zeros`), ops and host code mean that one.
            let tile = module == Some(StdModule::Tile);
            let mut insert = |name: &'a str, c: Callable<'a>| {
                if !tile || !items.contains_key(name) {
                    items.insert(name, c);
                }
                if module.is_some() && (!tile || !std_items.contains_key(name)) {
                    std_items.insert(name, c);
                }
            };
            for item in &file.items {
                match item {
                    ast::Item::Op(op) => insert(op.name.text.as_str(), Callable::Op(op, module)),
                    ast::Item::Kernel(k) => insert(k.name.text.as_str(), Callable::Kernel(k)),
                    ast::Item::Fn(f) => insert(f.name.text.as_str(), Callable::Fn(f, module)),
                    ast::Item::Mesh(m) => {
                        for a in &m.axes {
                            if let ast::ExprKind::Int(size) = a.size.kind {
                                axes.insert(
                                    a.name.text.as_str(),
                                    AxisRef {
                                        mesh: m.name.text.clone(),
                                        axis: a.name.text.clone(),
                                        size,
                                    },
                                );
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        Program {
            items,
            std_items,
            axes,
            numerics: checked.numerics.clone(),
            schedules: checked.schedules.clone(),
        }
    }

    /// The op, kernel or fn called `name`.
    pub fn lookup(&self, name: &str) -> Option<Callable<'a>> {
        self.items.get(name).copied()
    }

    /// What a call of `name` means in a body of the stdlib (`from_std`),
    /// which never sees the user's items, or in the user's code, where
    /// they shadow the stdlib's (as [`Program::lookup`]).
    pub fn resolve(&self, name: &str, from_std: bool) -> Option<Callable<'a>> {
        match from_std {
            true => self.std_items.get(name).copied(),
            false => self.lookup(name),
        }
    }

    /// The mesh axis called `name`.
    pub fn axis(&self, name: &str) -> Option<&AxisRef> {
        self.axes.get(name)
    }

    /// The numerics the checker resolved for op or kernel `name`.
    pub fn numerics(&self, name: &str) -> Option<NumericsConfig> {
        self.numerics.get(name).copied()
    }

    /// The checked `schedule` blocks, in source order.
    pub fn schedules(&self) -> &[ScheduleInfo] {
        &self.schedules
    }

    /// The names of the user's kernels, sorted.
    pub fn user_kernels(&self) -> Vec<&'a str> {
        let mut names: Vec<&str> = self
            .items
            .iter()
            .filter(|(_, c)| matches!(c, Callable::Kernel(_)))
            .map(|(n, _)| *n)
            .collect();
        names.sort_unstable();
        names
    }

    /// The user's ops (not the stdlib's), sorted by name.
    pub fn user_ops(&self) -> Vec<&'a ast::OpDef> {
        let mut ops: Vec<&ast::OpDef> = self
            .items
            .values()
            .filter_map(|c| match c {
                Callable::Op(op, None) => Some(*op),
                _ => None,
            })
            .collect();
        ops.sort_by(|a, b| a.name.text.cmp(&b.name.text));
        ops
    }
}

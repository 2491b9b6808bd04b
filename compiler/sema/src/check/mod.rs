//! The checker proper: walks every user item, types every expression, and
//! checks calls, shapes, shard specs and numerics.
//!
//! - [`items`] checks ops, kernels and fns as declared (symbolic dims rigid);
//! - [`expr`] and [`stmt`] type expressions and statements within a [`Body`];
//! - [`call`] binds arguments and checks calls of ops, kernels and fns,
//!   instantiating generic stdlib ops on their argument types;
//! - [`builtins`] holds the shape and dtype rules of the `extern` primitives.

mod assert;
mod bind;
mod builtins;
mod call;
mod einsum;
mod expr;
mod index;
mod items;
mod memory;
mod nn;
mod recursion;
mod reshape;
pub(crate) mod schedule;
mod select;
mod stmt;

use crate::mesh::Meshes;
use crate::numerics::{NumericsCheck, NumericsConfig};
use crate::table::{BodyKind, Table};
use crate::ty::{Const, Dim, Ty};
use crate::{Checked, Unit};
use std::collections::{HashMap, HashSet};
use tessera_diagnostics::{Diagnostic, Diagnostics, FileId, Span};
use tessera_syntax::ast::{self, Dtype};

/// A checked value: its type, and what is known of it at compile time.
#[derive(Clone, Debug)]
pub(crate) struct Val {
    /// The type.
    pub ty: Ty,
    /// The value, if it is a compile-time constant.
    pub konst: Option<Const>,
    /// For integers: the value as a (possibly symbolic) dimension.
    pub dim: Option<Dim>,
}

impl Val {
    pub fn of(ty: Ty) -> Val {
        Val {
            ty,
            konst: None,
            dim: None,
        }
    }

    pub fn error() -> Val {
        Val::of(Ty::Error)
    }

    pub fn int(v: i64) -> Val {
        Val {
            ty: Ty::Int,
            konst: Some(Const::Int(v)),
            dim: u64::try_from(v).ok().map(Dim::known),
        }
    }

    pub fn is_error(&self) -> bool {
        matches!(self.ty, Ty::Error)
    }
}

/// A local variable.
#[derive(Clone, Debug)]
pub(crate) struct Local {
    pub val: Val,
    pub mutable: bool,
    /// Whether `let` wrote its type (a host variable without one may take
    /// values of other sizes, see `Cx::assign`).
    pub declared: bool,
    pub span: Span,
}

/// The state of one body being checked.
pub(crate) struct Body {
    pub kind: BodyKind,
    pub file: FileId,
    pub scopes: Vec<HashMap<String, Local>>,
    /// Dimension symbols in scope and their values.
    pub dims: HashMap<String, Dim>,
    /// Dimension packs (`..S`) and the dims they stand for.
    pub packs: HashMap<String, Vec<Dim>>,
    /// Dtype parameters and their dtypes.
    pub dtypes: HashMap<String, Dtype>,
    /// Compile-time constants (kernel generics).
    pub consts: HashMap<String, Const>,
    /// Kernel `out` parameters.
    pub outs: HashSet<String>,
    pub numerics: NumericsConfig,
    /// The declared result type, if any.
    pub ret: Option<(Ty, Span)>,
    /// The types of the values returned so far.
    pub returns: Vec<Ty>,
    /// Whether to record expression types (user code, not instantiations).
    pub record: bool,
    /// Kernels: the locals whose values are known only when the kernel
    /// runs (loop variables, what loops and run-time branches assign,
    /// tiles and what is computed from them).
    pub runtime: HashSet<String>,
    /// Kernels: how many `for` loops enclose the statement being checked.
    pub loops: usize,
    /// Kernels: how many `if`s on run-time values enclose it.
    pub branches: usize,
}

impl Body {
    /// Records whether local `name` holds a value known only at run time.
    pub fn mark_runtime(&mut self, name: &str, runtime: bool) {
        if runtime {
            self.runtime.insert(name.to_owned());
        } else {
            self.runtime.remove(name);
        }
    }

    pub fn new(kind: BodyKind, file: FileId, _item: &str, numerics: NumericsConfig) -> Body {
        Body {
            kind,
            file,
            scopes: vec![HashMap::new()],
            dims: HashMap::new(),
            packs: HashMap::new(),
            dtypes: HashMap::new(),
            consts: HashMap::new(),
            outs: HashSet::new(),
            numerics,
            ret: None,
            returns: Vec::new(),
            record: true,
            runtime: HashSet::new(),
            loops: 0,
            branches: 0,
        }
    }

    pub fn local(&self, name: &str) -> Option<&Local> {
        self.scopes.iter().rev().find_map(|s| s.get(name))
    }

    /// The innermost local named `name`, to change its type.
    pub fn local_mut(&mut self, name: &str) -> Option<&mut Local> {
        self.scopes.iter_mut().rev().find_map(|s| s.get_mut(name))
    }

    /// The types of the mutable tensor variables in scope, innermost
    /// first (to see whether a loop body changed one).
    pub fn tensor_types(&self) -> Vec<(String, Ty)> {
        let mut out = Vec::new();
        for scope in self.scopes.iter().rev() {
            for (name, l) in scope {
                if l.mutable && matches!(l.val.ty, Ty::Tensor(_)) {
                    out.push((name.clone(), l.val.ty.clone()));
                }
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    pub fn bind(&mut self, name: &str, local: Local) {
        if let Some(scope) = self.scopes.last_mut() {
            scope.insert(name.to_owned(), local);
        }
    }

    /// Every name a value may be looked up by, for suggestions.
    pub fn value_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.scopes.iter().flat_map(|s| s.keys().cloned()).collect();
        names.extend(self.dims.keys().cloned());
        names.extend(self.consts.keys().cloned());
        names
    }
}

/// Memo of generic op instantiations: (op, argument types) to result.
type InstKey = (String, String);

/// The checking context shared by all bodies.
pub(crate) struct Cx<'a, 'd> {
    pub table: Table<'a>,
    pub meshes: Meshes,
    pub diags: &'d mut Diagnostics,
    pub checked: Checked,
    pub file_numerics: HashMap<FileId, NumericsConfig>,
    pub inst_cache: HashMap<InstKey, Ty>,
    /// Ops being checked or instantiated, innermost last, to catch recursion.
    pub stack: Vec<String>,
    /// Ops and kernels on a cycle of calls (E0107 already reported): calls
    /// of them are left untyped.
    pub recursive: std::collections::BTreeSet<String>,
    /// The elements of the last list literal typed, as dimensions, if all
    /// are integers known symbolically.
    pub list_dims: Option<Vec<Dim>>,
    /// The constant elements of the list literal [`Cx::list`] typed last.
    pub list_consts: Vec<Option<Const>>,
    /// Set while binding the arguments of a host fn called from host code:
    /// its scalar parameters take values known only at run time.
    pub runtime_args: bool,
    /// The call a `let (a, b, ...) = call;` binds, with its name count:
    /// only that call may give several results.
    pub tuple_call: Option<(Span, usize)>,
    /// The parts that call gave, for the `let` to bind.
    pub tuple_parts: Option<Vec<Val>>,
    /// The calls whose callee's body is being checked at their arguments,
    /// outermost first: an `assert` failing in the stdlib is reported at
    /// the user's call that led there.
    pub sites: Vec<Span>,
    /// Set by an op's `assert` that failed: the rest of that body is not
    /// checked (its errors would follow from the sizes the assert refused).
    pub failed_assert: bool,
}

impl Cx<'_, '_> {
    pub fn error(&mut self, d: Diagnostic) {
        self.diags.push(d);
    }

    pub fn record(&mut self, body: &Body, expr: &ast::Expr, ty: &Ty) {
        if body.record {
            self.checked
                .expr_types
                .insert((body.file, expr.id), ty.clone());
        }
    }
}

/// Checks the whole program.
pub(crate) fn check_program(units: &[Unit<'_>], diags: &mut Diagnostics) -> Checked {
    let first = diags.mark().0;
    let table = Table::build(units, diags);
    let meshes = Meshes::build(&table.meshes, diags);
    let mut cx = Cx {
        table,
        meshes,
        diags,
        checked: Checked::default(),
        file_numerics: HashMap::new(),
        inst_cache: HashMap::new(),
        stack: Vec::new(),
        recursive: Default::default(),
        list_dims: None,
        list_consts: Vec::new(),
        runtime_args: false,
        tuple_call: None,
        tuple_parts: None,
        sites: Vec::new(),
        failed_assert: false,
    };
    for unit in units {
        let mut config = NumericsConfig::default();
        for item in &unit.ast.items {
            if let ast::Item::Numerics(n) = item {
                config.apply(n, cx.diags);
            }
        }
        cx.file_numerics.insert(unit.file, config);
    }
    cx.recursive = recursion::find_cycles(&mut cx, units);
    for unit in units.iter().filter(|u| u.module.is_none()) {
        items::check_unit(&mut cx, unit);
    }
    // An error found twice (the same code and message at the same place)
    // is reported once: an op's body is checked as written and again at
    // each call's sizes (the label may name other sizes), and a stdlib
    // body's errors moved to the user's call may repeat (both of
    // logsumexp's reductions along a wrong axis).
    let mut seen = Vec::new();
    cx.diags.retain_since(first, |d| {
        let key = (d.code, d.message.clone(), d.primary.span);
        let fresh = !seen.contains(&key);
        if fresh {
            seen.push(key);
        }
        fresh
    });
    cx.checked
}

//! Semantic analysis of Tessera programs.
//!
//! [`check`] resolves names, infers and checks the type of every expression
//! (dtype, symbolic shape, shard spec), validates schedules, meshes and
//! numerics settings, and reports problems as [`Diagnostic`]s. It never
//! panics and never stops at the first error: erroneous expressions get
//! [`Ty::Error`], which silences follow-up errors.
//!
//! Architecture invariant: this crate does no IO. The driver hands it parsed
//! files (the user's and the stdlib's) and gets back a [`Checked`].

mod check;
pub mod einsum;
mod mesh;
mod numerics;

mod suggest;
mod table;
pub mod ty;

pub use check::schedule::{ScheduleInfo, TUNABLE};
pub use numerics::{MatmulPrecision, NumericsCheck, NumericsConfig, Policy, Precision};
pub use tessera_core::Arch;
pub use ty::{AxisRef, Const, Dim, Shard, TensorTy, Ty};

use std::collections::HashMap;
use tessera_diagnostics::{Diagnostics, FileId};
use tessera_syntax::ast;

/// A module of the standard library.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StdModule {
    /// `std.core`: math, reductions, matmul, shapes. Always in scope.
    Core,
    /// `std.nn`: softmax, norms, activations, attention, conv1d and conv2d.
    Nn,
    /// `std.dist`: collectives.
    Dist,
    /// `std.tile`: kernel-body operations. In scope inside kernels.
    Tile,
    /// `std.host`: tensor creation and printing. In scope inside `fn`s.
    Host,
}

impl StdModule {
    /// Every module.
    pub const ALL: [StdModule; 5] = [
        StdModule::Core,
        StdModule::Nn,
        StdModule::Dist,
        StdModule::Tile,
        StdModule::Host,
    ];

    /// The module's name after `std.`.
    pub fn name(self) -> &'static str {
        match self {
            StdModule::Core => "core",
            StdModule::Nn => "nn",
            StdModule::Dist => "dist",
            StdModule::Tile => "tile",
            StdModule::Host => "host",
        }
    }

    /// The module named `name` (after `std.`).
    pub fn from_name(name: &str) -> Option<StdModule> {
        StdModule::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// One parsed file handed to the checker.
#[derive(Clone, Copy, Debug)]
pub struct Unit<'a> {
    /// Its id in the source map.
    pub file: FileId,
    /// Its AST.
    pub ast: &'a ast::File,
    /// The stdlib module it is, or `None` for a user file.
    pub module: Option<StdModule>,
}

/// What the checker learned, for later passes and the language server.
#[derive(Clone, Debug, Default)]
pub struct Checked {
    /// The type of each expression of the user's files.
    pub expr_types: HashMap<(FileId, ast::ExprId), Ty>,
    /// The numerics in force for each op and kernel, by name.
    pub numerics: HashMap<String, NumericsConfig>,
    /// The resolved schedules, in source order.
    pub schedules: Vec<ScheduleInfo>,
}

/// Checks a whole program: the user's files plus the stdlib modules.
pub fn check(units: &[Unit<'_>], diagnostics: &mut Diagnostics) -> Checked {
    check::check_program(units, diagnostics)
}

//! Code generation for the NVIDIA backend: every op and kernel of the
//! user's files, specialised for concrete shapes, lowered to one PTX module.
//!
//! A kernel's tile extents must be constants, so each op is specialised:
//! on the argument types of its first call from host code (`fn main`) when
//! they are all known, else on its symbolic shapes with every dimension
//! bound from `--dim NAME=N` or [`DEFAULT_DIM`].

use crate::{Compilation, Pipeline};
use tessera_core::{Arch, Bindings};
use tessera_diagnostics::Diagnostic;
use tessera_graph::{Arg, Graph, Type};
use tessera_sema::Ty;
use tessera_syntax::ast;
use tessera_tile::TileProgram;

/// The extent a dimension takes when neither a host call nor `--dim`
/// binds it.
pub const DEFAULT_DIM: i64 = 128;

/// Collects the calls in an expression tree.
fn calls<'a>(e: &'a ast::Expr, out: &mut Vec<&'a ast::Expr>) {
    if let ast::ExprKind::Call { .. } = e.kind {
        out.push(e);
    }
    for c in e.kind.children() {
        calls(c, out);
    }
}

/// Collects the calls in a block.
fn block_calls<'a>(b: &'a ast::Block, out: &mut Vec<&'a ast::Expr>) {
    for s in &b.stmts {
        match &s.kind {
            ast::StmtKind::Let { value, .. } | ast::StmtKind::Assign { value, .. } => {
                calls(value, out)
            }
            ast::StmtKind::Return(Some(e)) | ast::StmtKind::Expr(e) => calls(e, out),
            ast::StmtKind::If {
                branches,
                otherwise,
            } => {
                for (c, b) in branches {
                    calls(c, out);
                    block_calls(b, out);
                }
                if let Some(b) = otherwise {
                    block_calls(b, out);
                }
            }
            ast::StmtKind::For {
                start, end, body, ..
            } => {
                calls(start, out);
                calls(end, out);
                block_calls(body, out);
            }
            _ => {}
        }
    }
}

impl Compilation {
    /// For each op called from host code with arguments of fully known
    /// shapes, the argument types of its first such call.
    pub fn host_calls(&self) -> Vec<(String, Vec<Type>)> {
        let Some(checked) = &self.checked else {
            return Vec::new();
        };
        let mut out: Vec<(String, Vec<Type>)> = Vec::new();
        for (file, f) in &self.files {
            for item in &f.items {
                let ast::Item::Fn(func) = item else { continue };
                let Some(body) = &func.body else { continue };
                let mut found = Vec::new();
                block_calls(body, &mut found);
                for e in found {
                    let ast::ExprKind::Call { callee, args, .. } = &e.kind else {
                        continue;
                    };
                    if out.iter().any(|(n, _)| *n == callee.text) {
                        continue;
                    }
                    let types: Option<Vec<Type>> = args
                        .iter()
                        .map(|a| match checked.expr_types.get(&(*file, a.value.id)) {
                            Some(Ty::Tensor(t))
                                if t.dims.iter().all(|d| d.as_known().is_some()) =>
                            {
                                Some(Type::Tensor(t.clone()))
                            }
                            _ => None,
                        })
                        .collect();
                    if let Some(types) = types {
                        out.push((callee.text.clone(), types));
                    }
                }
            }
        }
        out
    }

    /// One PTX module with every kernel of every op and kernel of the
    /// user's files for `arch`, dimensions bound as the module docs say.
    /// `None` when a diagnostic explains why not.
    pub fn ptx(&mut self, arch: &'static Arch, dims: &Bindings) -> Option<String> {
        let calls: Vec<(String, Vec<Arg>)> = self
            .host_calls()
            .into_iter()
            .map(|(name, types)| (name, types.into_iter().map(Arg::Type).collect()))
            .collect();
        let graphs = self.graphs(arch, &calls);
        let (mut module, spans) = self.with_pipeline(arch, |pipeline, _, diags| {
            let mut module = tessera_ptx::Module {
                arch: arch.name.to_owned(),
                version: (8, 0),
                files: Vec::new(),
                functions: Vec::new(),
            };
            let mut spans = Vec::new();
            for (g, _) in &graphs {
                match specialise(pipeline, g, dims, diags) {
                    Ok((m, tile)) => {
                        module.version = module.version.max(m.version);
                        for (mut f, k) in m.functions.into_iter().zip(&tile.kernels) {
                            f.name = format!("{}_{}", tile.name, f.name);
                            module.functions.push(f);
                            spans.push(k.span);
                        }
                    }
                    Err(d) => diags.push(*d),
                }
            }
            (module, spans)
        })?;
        if self.has_errors() {
            return None;
        }
        tessera_ptx::locate(&mut module, &spans, &|s| self.locate(s));
        Some(
            self.timings
                .time("print", || tessera_ptx::print_module(&module)),
        )
    }
}

/// Lowers graph `g` to a verified PTX module with every dimension bound
/// by `dims` or [`DEFAULT_DIM`]; the schedule's findings go to `diags`.
fn specialise(
    pipeline: &mut Pipeline<'_>,
    g: &Graph,
    dims: &Bindings,
    diags: &mut Vec<Diagnostic>,
) -> Result<(tessera_ptx::Module, TileProgram), Box<Diagnostic>> {
    let scheduled = pipeline.schedule(g)?;
    diags.extend(scheduled.diagnostics.iter().cloned());
    let tile = pipeline.tile(g, &scheduled)?;
    let mut b = Bindings::new();
    for d in &tile.dims {
        b.insert(d.clone(), dims.get(d).copied().unwrap_or(DEFAULT_DIM));
    }
    let m = pipeline.ptx(&tile, &b, None)?;
    Ok((m, tile))
}

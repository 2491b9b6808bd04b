//! Code generation for the NVIDIA backend: every op and kernel of the
//! user's files, specialised for concrete shapes, lowered to one PTX module.
//!
//! A kernel's tile extents must be constants, so each op is specialised:
//! on the argument types of its first call from host code (`fn main`) when
//! they are all known, else on its symbolic shapes with every dimension
//! bound from `--dim NAME=N` or [`DEFAULT_DIM`].

use crate::Compilation;
use tessera_core::Arch;
use tessera_diagnostics::{codes, Diagnostic};
use tessera_graph::{Arg, Graph, Type};
use tessera_schedule::Bindings;
use tessera_sema::Ty;
use tessera_syntax::ast;

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

    /// The graph of each user op and kernel to generate code for: on its
    /// host call's types when there is one, else symbolic.
    fn codegen_graphs(&mut self) -> Vec<Graph> {
        let calls = self.host_calls();
        let mut graphs = Vec::new();
        let mut errors = Vec::new();
        if let Some(program) = self.program() {
            for (_, file) in &self.files {
                for item in &file.items {
                    let built = match item {
                        ast::Item::Op(op) if op.body.is_some() && op.generics.is_empty() => {
                            let name = &op.name.text;
                            match calls.iter().find(|(n, _)| n == name) {
                                Some((_, types)) => {
                                    let args: Vec<Arg> =
                                        types.iter().cloned().map(Arg::Type).collect();
                                    tessera_graph::build_op(&program, name, Some(&args))
                                }
                                None => tessera_graph::build_op(&program, name, None),
                            }
                        }
                        ast::Item::Kernel(k) => {
                            tessera_graph::build_kernel(&program, &k.name.text, None)
                        }
                        _ => continue,
                    };
                    match built {
                        Ok(g) => graphs.push(tessera_graph::passes::optimize(&g).0),
                        Err(d) => errors.push(*d),
                    }
                }
            }
        }
        self.diagnostics.extend(errors);
        graphs
    }

    /// One PTX module with every kernel of every op and kernel of the
    /// user's files for `arch`, dimensions bound as the module docs say.
    /// `None` when a diagnostic explains why not.
    pub fn ptx(&mut self, arch: &'static Arch, dims: &Bindings) -> Option<String> {
        let start = std::time::Instant::now();
        let graphs = self.codegen_graphs();
        self.timings.add("graph", start.elapsed());
        let mut timings = std::mem::take(&mut self.timings);
        let mut module = tessera_ptx::Module {
            arch: arch.name.to_owned(),
            version: (8, 0),
            files: Vec::new(),
            functions: Vec::new(),
        };
        let mut diags = Vec::new();
        let mut spans = Vec::new();
        if let (Some(checked), Some(program)) = (self.checked.as_ref(), self.program()) {
            for g in &graphs {
                let grid = |v| tessera_tile::user_grid(&program, g, v);
                let s = timings.time("schedule", || {
                    tessera_schedule::schedule(g, arch, &checked.schedules, &grid)
                });
                diags.extend(s.diagnostics.iter().cloned());
                let user = |g: &Graph, k: &tessera_schedule::SKernel| {
                    tessera_tile::lower_user_kernel(&program, g, k)
                };
                let tile = match timings.time("tile", || tessera_tile::lower(g, &s.schedule, &user))
                {
                    Ok(p) => p,
                    Err(d) => {
                        diags.push(*d);
                        continue;
                    }
                };
                let mut b = Bindings::new();
                for d in &tile.dims {
                    b.insert(d.clone(), dims.get(d).copied().unwrap_or(DEFAULT_DIM));
                }
                match timings.time("target", || tessera_ptx::lower_program(&tile, arch, &b)) {
                    Ok(m) => {
                        module.version = module.version.max(m.version);
                        for (mut f, k) in m.functions.into_iter().zip(&tile.kernels) {
                            f.name = format!("{}_{}", tile.name, f.name);
                            module.functions.push(f);
                            spans.push(k.span);
                        }
                    }
                    Err(e) => {
                        let span = g
                            .outputs
                            .first()
                            .map(|o| g.node(*o).span)
                            .unwrap_or_default();
                        diags.push(
                            Diagnostic::error(
                                codes::E0800,
                                span,
                                format!("kernel `{}` of `{}`: {}", e.kernel, tile.name, e.message),
                            )
                            .with_label("in this op"),
                        );
                    }
                }
            }
        }
        self.timings = timings;
        let failed = diags.iter().any(|d| d.is_error());
        self.diagnostics.extend(diags);
        self.diagnostics.sort();
        if failed || self.has_errors() {
            return None;
        }
        tessera_ptx::locate(&mut module, &spans, &|s| self.locate(s));
        let verified = self
            .timings
            .time("verify", || tessera_ptx::verify::verify(&module));
        if let Err(e) = verified {
            let span = graphs
                .first()
                .and_then(|g| g.outputs.first().map(|o| g.node(*o).span))
                .unwrap_or_default();
            self.diagnostics.push(Diagnostic::error(
                codes::E0800,
                span,
                format!(
                    "internal error: the Target IR of `{}` does not verify: {}",
                    e.function, e.message
                ),
            ));
            return None;
        }
        Some(
            self.timings
                .time("print", || tessera_ptx::print_module(&module)),
        )
    }
}

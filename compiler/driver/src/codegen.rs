//! Code generation for the NVIDIA backend: every op and kernel of the
//! user's files, specialised for concrete shapes, lowered to one PTX module.
//!
//! A kernel's tile extents must be constants, so each op is specialised:
//! on the argument types of its first call from host code (`fn main`) when
//! they are all known, else on its symbolic shapes with every dimension
//! bound from `--dim NAME=N` or [`DEFAULT_DIM`].

use crate::lower::comments;
use crate::{Compilation, Pipeline};
use tessera_core::{Arch, Bindings};
use tessera_diagnostics::Diagnostic;
use tessera_graph::{Arg, Callable, Graph, Type};
use tessera_sema::Ty;
use tessera_syntax::ast;
use tessera_tile::TileProgram;

/// The extent a dimension takes when neither a host call nor `--dim`
/// binds it.
pub const DEFAULT_DIM: i64 = 128;

impl Compilation {
    /// For each user op called from host code with tensors of fully known
    /// shapes and literal attributes, the arguments of its first such call,
    /// one per parameter: attributes the call leaves out take their
    /// defaults.
    pub fn host_calls(&self) -> Vec<(String, Vec<Arg>)> {
        let (Some(checked), Some(program)) = (&self.checked, self.program()) else {
            return Vec::new();
        };
        let mut out: Vec<(String, Vec<Arg>)> = Vec::new();
        for (file, f) in &self.files {
            for item in &f.items {
                let ast::Item::Fn(func) = item else { continue };
                let Some(body) = &func.body else { continue };
                for e in body.calls() {
                    let ast::ExprKind::Call { callee, args, .. } = &e.kind else {
                        continue;
                    };
                    if out.iter().any(|(n, _)| *n == callee.text) {
                        continue;
                    }
                    let Some(Callable::Op(op, None)) = program.lookup(&callee.text) else {
                        continue;
                    };
                    let params: Vec<&ast::Param> = op.params.iter().collect();
                    let mut bound: Vec<Option<Arg>> = vec![None; params.len()];
                    let mut known = true;
                    for (a, slot) in args.iter().zip(ast::arg_slots(&params, args)) {
                        let Some(i) = slot else {
                            known = false;
                            break;
                        };
                        bound[i] = if params[i].ty.is_attribute() {
                            Arg::of_literal(&a.value)
                        } else {
                            match checked.expr_types.get(&(*file, a.value.id)) {
                                Some(Ty::Tensor(t))
                                    if t.dims.iter().all(|d| d.as_known().is_some()) =>
                                {
                                    Some(Arg::Type(Type::Tensor(t.clone())))
                                }
                                _ => None,
                            }
                        };
                        known &= bound[i].is_some();
                    }
                    let args: Option<Vec<Arg>> = bound
                        .into_iter()
                        .zip(&params)
                        .map(|(b, p)| b.or_else(|| p.default.as_ref().and_then(Arg::of_literal)))
                        .collect();
                    if let (true, Some(args)) = (known, args) {
                        out.push((callee.text.clone(), args));
                    }
                }
            }
        }
        out
    }

    /// One PTX module with every kernel of every op and kernel of the
    /// user's files for `arch`, dimensions bound as the module docs say
    /// (an op or kernel that cannot be lowered at its declared sizes is
    /// lowered at the bound ones; a generic op nothing calls is left out,
    /// with a comment saying so). `None` when a diagnostic explains why
    /// not.
    pub fn ptx(&mut self, arch: &'static Arch, dims: &Bindings) -> Option<String> {
        self.ptx_located(arch, dims).map(|(text, _)| text)
    }

    /// [`ptx`](Self::ptx), with each kernel's name in the module and the
    /// span of the op or kernel it comes from.
    pub fn ptx_located(
        &mut self,
        arch: &'static Arch,
        dims: &Bindings,
    ) -> Option<(String, Vec<(String, tessera_diagnostics::Span)>)> {
        let items = self.items(&self.host_calls(), dims);
        let (mut module, spans, notes) = self.with_pipeline(arch, |pipeline, _, diags| {
            let mut module = tessera_ptx::Module {
                arch: arch.name.to_owned(),
                version: (8, 0),
                files: Vec::new(),
                functions: Vec::new(),
            };
            let mut spans = Vec::new();
            let mut notes = Vec::new();
            for item in &items {
                // The schedule's findings count only for what is shown.
                let lowered = item.show(|target| {
                    let (g, _) = pipeline.graph(target.entry())?;
                    let mut found = Vec::new();
                    specialise(pipeline, &g, dims, &mut found).map(|(m, t)| (m, t, found))
                });
                match lowered {
                    Ok((why, m)) => {
                        notes.extend(why);
                        let Some((m, tile, found)) = m else { continue };
                        diags.extend(found);
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
            if items.is_empty() {
                notes.push("no ops or kernels in this file: the module has no kernels".into());
            }
            (module, spans, notes)
        })?;
        if self.has_errors() {
            return None;
        }
        tessera_ptx::locate(&mut module, &spans, &|s| self.locate(s));
        let text = self
            .timings
            .time("print", || tessera_ptx::print_module(&module));
        let kernels = module
            .functions
            .iter()
            .map(|f| f.name.clone())
            .zip(spans)
            .collect();
        Some((comments(&notes) + &text, kernels))
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
    // The schedule sizes what must fit in shared memory at these sizes.
    pipeline.set_hints(crate::pipeline::param_sizes(g, |s, _, _| {
        Some(dims.get(s).copied().unwrap_or(DEFAULT_DIM))
    }));
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

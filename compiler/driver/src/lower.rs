//! The IRs of a whole compilation, stage by stage, through the one
//! [`Pipeline`]: the graphs, schedules and Tile IR of every op and kernel of
//! the input files (`tsrc check`'s schedule checks, the goldens), the
//! [`Item`]s the text forms show (`tsrc build --emit graph|schedule|tile|ptx`:
//! declared sizes, else concrete ones, else a comment), and one op's
//! schedule for the language server's hover.

use crate::pipeline::{Entry, Pipeline};
use crate::{Compilation, DEFAULT_DIM};
use tessera_core::{Arch, Bindings};
use tessera_diagnostics::{codes, Diagnostic};
use tessera_graph::passes::Trace;
use tessera_graph::{Arg, Graph, Type};
use tessera_schedule::Scheduled;
use tessera_syntax::ast;
use tessera_tile::TileProgram;

/// The graph stage does not depend on the target; graphs-only requests
/// name this one.
pub(crate) const ANY_ARCH: &Arch = &Arch::SM_90;

/// What to build a graph of, owning its argument types (an [`Entry`]
/// borrows them).
#[derive(Clone, Debug)]
pub(crate) enum Target {
    /// An op, on these arguments or its declared types.
    Op(String, Option<Vec<Arg>>),
    /// A kernel, on these input types or its declared ones.
    Kernel(String, Option<Vec<Type>>),
}

impl Target {
    /// The pipeline's entry for it.
    pub(crate) fn entry(&self) -> Entry<'_> {
        match self {
            Target::Op(name, args) => Entry::Op(name, args.as_deref()),
            Target::Kernel(name, types) => Entry::Kernel(name, types.as_deref()),
        }
    }
}

/// One op or kernel of the input files, as the text forms show it.
#[derive(Clone, Debug)]
pub(crate) enum Item {
    /// Built on `target`, with `note` above it if any. When that cannot be
    /// lowered (E0700: a shape or a branch that only concrete sizes
    /// decide), on the first of `fallbacks` that lowers.
    Shown {
        /// What is shown.
        target: Target,
        /// A comment shown with it.
        note: Option<String>,
        /// The same at concrete sizes, in the order tried.
        fallbacks: Vec<Fallback>,
        /// Why the item may have no form of its own, when nothing lowers
        /// it (E0700): an op with attributes without defaults compiles
        /// where it is called, at the caller's values.
        unshown: Option<String>,
    },
    /// Not shown: a comment saying why.
    Note(String),
}

/// An item at concrete sizes, shown when it lowers only there.
#[derive(Clone, Debug)]
pub(crate) struct Fallback {
    /// The item at those sizes.
    target: Target,
    /// The comment saying which sizes.
    why: String,
    /// The sizes, when some are made up ([`DEFAULT_DIM`]): what fails
    /// only there is not an error, as the checker accepted the item (the
    /// sizes may not fit together: `HD / heads` against `Dh`).
    made_up: Option<String>,
}

impl Item {
    /// Runs `show` on the item's target, or on its fallbacks in order when
    /// the target cannot be lowered; returns the comments to show with its
    /// text (or alone, when nothing is shown). An error that no fallback
    /// avoids is the last one's at sizes not made up, else a comment.
    pub(crate) fn show<T>(
        &self,
        mut show: impl FnMut(&Target) -> Result<T, Box<Diagnostic>>,
    ) -> Result<(Vec<String>, Option<T>), Box<Diagnostic>> {
        match self {
            Item::Note(note) => Ok((vec![note.clone()], None)),
            Item::Shown {
                target,
                note,
                fallbacks,
                unshown,
            } => {
                let mut notes: Vec<String> = note.iter().cloned().collect();
                let d = match show(target) {
                    Ok(t) => return Ok((notes, Some(t))),
                    Err(d)
                        if d.code == codes::E0700 && fallbacks.is_empty() && unshown.is_some() =>
                    {
                        let why = unshown.as_deref().unwrap_or_default();
                        notes.push(format!("not shown: {}; {why}", d.message));
                        return Ok((notes, None));
                    }
                    Err(d) if d.code == codes::E0700 && !fallbacks.is_empty() => d,
                    Err(d) => return Err(d),
                };
                let mut misfit = None;
                for f in fallbacks {
                    match show(&f.target) {
                        Ok(t) => {
                            notes.push(format!("{}: {}", f.why, d.message));
                            return Ok((notes, Some(t)));
                        }
                        Err(e) => match &f.made_up {
                            Some(sizes) => misfit = misfit.or(Some((sizes.clone(), e))),
                            // At concrete sizes the error says what is
                            // wrong there (the symbolic one only that the
                            // sizes are unknown).
                            None => return Err(e),
                        },
                    }
                }
                let (sizes, e) = misfit.expect("a fallback failed");
                notes.push(format!(
                    "not shown: at its declared sizes, {}; at the sizes made up for it ({sizes}), {}: set sizes that fit with `--dim NAME=N`",
                    d.message, e.message
                ));
                Ok((notes, None))
            }
        }
    }
}

/// The comment lines of `notes` (`// ...`), each line of a note its own.
pub(crate) fn comments(notes: &[String]) -> String {
    notes
        .iter()
        .flat_map(|n| n.lines())
        .map(|l| format!("// {l}\n"))
        .collect()
}

impl Compilation {
    /// Every non-generic op with a body and every kernel of the input
    /// files, in source order: ops on the argument types `calls` gives for
    /// their name, else on their declared (symbolic) ones.
    pub(crate) fn entries<'c>(&'c self, calls: &'c [(String, Vec<Arg>)]) -> Vec<Entry<'c>> {
        let mut out = Vec::new();
        for (_, file) in &self.files {
            for item in &file.items {
                match item {
                    ast::Item::Op(op) if op.body.is_some() && !generic_op(op) => {
                        let name = op.name.text.as_str();
                        let args = calls
                            .iter()
                            .find(|(n, _)| n == name)
                            .map(|(_, a)| a.as_slice());
                        out.push(Entry::Op(name, args));
                    }
                    ast::Item::Kernel(k) => out.push(Entry::Kernel(&k.name.text, None)),
                    _ => {}
                }
            }
        }
        out
    }

    /// Every op with a body and every kernel of the input files, in source
    /// order, as the text forms show them: an op on the arguments `calls`
    /// gives for its name, else on its declared types, with a fallback at
    /// concrete sizes (dimensions bound by `dims`, else [`DEFAULT_DIM`]);
    /// a kernel on its declared types, with the same fallback. A generic
    /// op has no declared types: it is shown on its call's arguments, or
    /// is a note.
    pub(crate) fn items(&self, calls: &[(String, Vec<Arg>)], dims: &Bindings) -> Vec<Item> {
        let Some(program) = self.program() else {
            return Vec::new();
        };
        let host = self.host_calls();
        let at_sizes = |name: &str, kernel: bool| -> Option<Fallback> {
            let bound = std::cell::RefCell::new(Vec::new());
            let size = |s: &str| {
                let n = dims.get(s).copied().unwrap_or(DEFAULT_DIM);
                let mut bound = bound.borrow_mut();
                if !bound.iter().any(|(b, _)| b == s) {
                    bound.push((s.to_owned(), n));
                }
                n.max(1) as u64
            };
            let args = tessera_graph::concrete_args(&program, name, &size)?;
            let bound = bound.into_inner();
            if bound.is_empty() {
                // Already concrete: nothing else to try.
                return None;
            }
            let at: Vec<String> = bound.iter().map(|(s, n)| format!("{s} = {n}")).collect();
            let made_up = bound
                .iter()
                .any(|(s, _)| !dims.contains_key(s))
                .then(|| at.join(", "));
            let why = format!(
                "`{name}` is shown at {} (set sizes with `--dim NAME=N`); at its declared sizes",
                at.join(", ")
            );
            let target = if kernel {
                let types = args
                    .into_iter()
                    .map(|a| match a {
                        Arg::Type(t) => Some(t),
                        _ => None,
                    })
                    .collect::<Option<Vec<Type>>>()?;
                Target::Kernel(name.to_owned(), Some(types))
            } else {
                Target::Op(name.to_owned(), Some(args))
            };
            Some(Fallback {
                target,
                why,
                made_up,
            })
        };
        // At the `--dim` (or made-up) sizes; an op host code calls, then
        // at its call's arguments.
        let fallback = |name: &str, kernel: bool| -> Vec<Fallback> {
            let mut out: Vec<Fallback> = at_sizes(name, kernel).into_iter().collect();
            if let Some((_, args)) = host.iter().find(|(n, _)| n == name && !kernel) {
                out.push(Fallback {
                    target: Target::Op(name.to_owned(), Some(args.clone())),
                    why: format!(
                        "`{name}` is shown at the arguments of its call in host code; at its declared sizes"
                    ),
                    made_up: None,
                });
            }
            out
        };
        let mut out = Vec::new();
        for (_, file) in &self.files {
            for item in &file.items {
                match item {
                    ast::Item::Op(op) if op.body.is_some() => {
                        let name = op.name.text.as_str();
                        let call = calls.iter().find(|(n, _)| n == name).map(|(_, a)| a);
                        let plain = !generic_op(op);
                        out.push(match (call, plain) {
                            (Some(args), _) => Item::Shown {
                                target: Target::Op(name.to_owned(), Some(args.clone())),
                                note: (!plain).then(|| {
                                    let types: Vec<String> =
                                        args.iter().map(|a| a.to_string()).collect();
                                    format!(
                                        "`{name}` is generic: shown at the arguments of its call in host code ({})",
                                        types.join(", ")
                                    )
                                }),
                                fallbacks: Vec::new(),
                                unshown: None,
                            },
                            (None, true) => Item::Shown {
                                target: Target::Op(name.to_owned(), None),
                                note: None,
                                fallbacks: fallback(name, false),
                                unshown: valueless_attributes(op),
                            },
                            (None, false) => Item::Note(format!(
                                "`{name}` is not shown: it is generic, so it has a graph for each call, at the caller's types, and no call in host code gives them"
                            )),
                        });
                    }
                    ast::Item::Kernel(k) => out.push(Item::Shown {
                        target: Target::Kernel(k.name.text.clone(), None),
                        note: None,
                        fallbacks: fallback(&k.name.text, true),
                        unshown: None,
                    }),
                    _ => {}
                }
            }
        }
        out
    }

    /// For each generic op called from host code, the arguments of its
    /// first call with known shapes (see [`host_calls`](Self::host_calls)).
    pub(crate) fn generic_calls(&self) -> Vec<(String, Vec<Arg>)> {
        let generic = |name: &str| {
            self.files.iter().any(|(_, f)| {
                f.items.iter().any(
                    |i| matches!(i, ast::Item::Op(op) if op.name.text == name && generic_op(op)),
                )
            })
        };
        self.host_calls()
            .into_iter()
            .filter(|(name, _)| generic(name))
            .collect()
    }

    /// Runs `f` with a pipeline for `arch` over the checked program (`None`
    /// if the checker did not run); adds the diagnostics `f` collects and
    /// the pipeline's timings to the compilation.
    pub(crate) fn with_pipeline<T>(
        &mut self,
        arch: &'static Arch,
        f: impl FnOnce(&mut Pipeline<'_>, &Compilation, &mut Vec<Diagnostic>) -> T,
    ) -> Option<T> {
        let mut diags = Vec::new();
        let (out, timings) = {
            let program = self.program()?;
            let tunings = self
                .tunings
                .as_deref()
                .map(|t| t as &dyn tessera_schedule::space::Tunings);
            let mut pipeline = Pipeline::new(&program, arch).tuned_by(tunings);
            let out = f(&mut pipeline, self, &mut diags);
            (out, pipeline.timings)
        };
        for (phase, d) in timings.phases {
            self.timings.add(phase, d);
        }
        self.diagnostics.extend(diags);
        self.diagnostics.sort();
        Some(out)
    }

    /// The graph of every entry ([`entries`](Self::entries) of `calls`),
    /// with its rewrite trace; what cannot be built is a diagnostic.
    pub(crate) fn graphs(
        &mut self,
        arch: &'static Arch,
        calls: &[(String, Vec<Arg>)],
    ) -> Vec<(Graph, Vec<Trace>)> {
        self.with_pipeline(arch, |pipeline, c, diags| {
            let mut graphs = Vec::new();
            for entry in c.entries(calls) {
                match pipeline.graph(entry) {
                    Ok(g) => graphs.push(g),
                    Err(d) => diags.push(*d),
                }
            }
            graphs
        })
        .unwrap_or_default()
    }

    /// The Graph IR of every non-generic op with a body and of every kernel
    /// (launched on its declared types) in the input files, in source
    /// order, on symbolic shapes, after the graph rewrites, with the trace
    /// of the rewrites. Ops that cannot be lowered add a diagnostic instead.
    pub fn op_graphs(&mut self) -> Vec<(Graph, Vec<Trace>)> {
        self.graphs(ANY_ARCH, &[])
    }

    /// The Schedule IR of every op of [`op_graphs`](Self::op_graphs) for
    /// `arch`, with the fusion trace. Feasibility findings are added to the
    /// diagnostics.
    pub fn op_schedules(&mut self, arch: &'static Arch) -> Vec<(Graph, Scheduled)> {
        let graphs = self.op_graphs();
        self.with_pipeline(arch, |pipeline, _, diags| {
            let mut out = Vec::new();
            for (g, _) in graphs {
                match pipeline.schedule(&g) {
                    Ok(s) => {
                        diags.extend(s.diagnostics.iter().cloned());
                        out.push((g, s));
                    }
                    Err(d) => diags.push(*d),
                }
            }
            out
        })
        .unwrap_or_default()
    }

    /// The Tile IR of scheduled ops (from [`op_schedules`](Self::op_schedules))
    /// for `arch`. Ops that cannot be lowered add a diagnostic instead.
    pub fn op_tiles(
        &mut self,
        arch: &'static Arch,
        scheduled: &[(Graph, Scheduled)],
    ) -> Vec<TileProgram> {
        self.with_pipeline(arch, |pipeline, _, diags| {
            let mut out = Vec::new();
            for (g, s) in scheduled {
                match pipeline.tile(g, s) {
                    Ok(p) => out.push(p),
                    Err(d) => diags.push(*d),
                }
            }
            out
        })
        .unwrap_or_default()
    }

    /// The Schedule IR of the one op or kernel named `name` in the input
    /// files for `arch`, or `None` if the checker did not accept the program
    /// or the op cannot be lowered. Adds no diagnostics: the language server
    /// uses it to show a schedule's resource estimates on hover.
    pub fn schedule_of(&self, name: &str, arch: &'static Arch) -> Option<Scheduled> {
        let program = self.program()?;
        let is_kernel = self.files.iter().any(|(_, f)| {
            f.items
                .iter()
                .any(|i| matches!(i, ast::Item::Kernel(k) if k.name.text == name))
        });
        let entry = if is_kernel {
            Entry::Kernel(name, None)
        } else {
            Entry::Op(name, None)
        };
        let mut pipeline = Pipeline::new(&program, arch);
        let (g, _) = pipeline.graph(entry).ok()?;
        pipeline.schedule(&g).ok()
    }
}

impl Compilation {
    /// The graph of every op and kernel of the input files at concrete
    /// shapes, as `tsrc tune` tunes them and the runtime looks them up:
    /// an op called from host code on its call's arguments, any other on
    /// its declared sizes with the dimensions bound by `dims` (else
    /// [`DEFAULT_DIM`]). What cannot be built is its diagnostic; a generic
    /// op nothing calls is a note.
    pub fn concrete_graphs(
        &mut self,
        dims: &Bindings,
    ) -> Vec<Result<Graph, Result<Box<Diagnostic>, String>>> {
        let items = self.items(&self.host_calls(), dims);
        self.with_pipeline(ANY_ARCH, |pipeline, _, _| {
            items
                .iter()
                .map(|item| match item {
                    Item::Note(n) => Err(Err(n.clone())),
                    Item::Shown {
                        target, fallbacks, ..
                    } => {
                        let concrete = fallbacks.first().map_or(target, |f| &f.target);
                        pipeline.graph(concrete.entry()).map(|(g, _)| g).map_err(Ok)
                    }
                })
                .collect()
        })
        .unwrap_or_default()
    }
}

/// Whether `op` has a graph per call: dtype parameters (`<T: float>`) or
/// a dimension pack (`tensor<..S, fp32>`), whose rank only a call gives.
/// Why `op` may lower only where it is called: its attributes (`n: int`)
/// without defaults, named; `None` when every attribute has one.
fn valueless_attributes(op: &ast::OpDef) -> Option<String> {
    let names: Vec<String> = op
        .params
        .iter()
        .filter(|p| !matches!(p.ty.kind, ast::TypeKind::Tensor { .. }) && p.default.is_none())
        .map(|p| format!("`{}`", p.name.text))
        .collect();
    (!names.is_empty()).then(|| {
        format!(
            "`{}` has attributes without defaults ({}), so it compiles where it is called, at the caller's values (`tsrc run --entry` with `--const NAME=V` runs it alone)",
            op.name.text,
            names.join(", ")
        )
    })
}

fn generic_op(op: &ast::OpDef) -> bool {
    !op.generics.is_empty()
        || op.params.iter().any(|p| match &p.ty.kind {
            ast::TypeKind::Tensor { dims, .. } => {
                dims.iter().any(|d| matches!(d.kind, ast::DimKind::Pack(_)))
            }
            _ => false,
        })
}

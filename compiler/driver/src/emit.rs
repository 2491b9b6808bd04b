//! The text forms `tsrc build --emit` writes: the AST, each IR, PTX and
//! Host IR, with the rewrite and fusion traces `--trace-fusion` shows. The
//! driver makes the text; the CLI writes it.

use crate::lower::{comments, ANY_ARCH};
use crate::Compilation;
use tessera_core::{Arch, Bindings};
use tessera_graph::passes::Trace;
use tessera_graph::Graph;
use tessera_syntax::ast;

/// A text form of a compilation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Emit {
    /// The syntax tree of the first input file, as an indented text form.
    Ast,
    /// The Graph IR of every op (symbolic shapes, after rewrites).
    Graph,
    /// The Schedule IR: kernels with tiles, staging and grids.
    Schedule,
    /// The Tile IR: one block program per kernel.
    Tile,
    /// The PTX module of every kernel (the Target IR's text form).
    Ptx,
    /// The Host IR of `fn main` and the fns it calls.
    Host,
}

impl Emit {
    /// Whether the form needs the checker's results (all but the AST).
    pub fn needs_check(self) -> bool {
        self != Emit::Ast
    }
}

/// What [`Compilation::emit`] produced.
#[derive(Clone, Debug, Default)]
pub struct Emitted {
    /// The text form (empty when a diagnostic says why not).
    pub text: String,
    /// The rewrite and fusion traces, one line each (`--trace-fusion`).
    pub trace: Vec<String>,
    /// For PTX: each kernel's name in the module and where it comes from.
    pub kernels: Vec<(String, tessera_diagnostics::Span)>,
}

impl Compilation {
    /// The text form `what` of this compilation for `arch`, PTX with its
    /// dimensions bound by `dims` (see [`ptx`](Self::ptx)). Nothing is
    /// lowered once the program has errors; problems found on the way are
    /// added to the diagnostics.
    ///
    /// Every form shows what the checker accepts: an op or kernel that
    /// cannot be lowered at its declared (symbolic) sizes is shown at
    /// concrete ones (`dims`, else [`DEFAULT_DIM`](crate::DEFAULT_DIM)), a
    /// generic op at the arguments of its call in host code, and what has
    /// nothing to show (a generic op nothing calls, a file without ops or
    /// kernels, host code without `fn main`) is a `//` comment saying so.
    pub fn emit(&mut self, what: Emit, arch: &'static Arch, dims: &Bindings) -> Emitted {
        let mut out = Emitted::default();
        out.text = match what {
            Emit::Ast => self
                .files
                .first()
                .map(|(_, file)| tessera_syntax::printer::print_file(file))
                .unwrap_or_default(),
            _ if self.has_errors() => String::new(),
            Emit::Host => self.host_text(),
            Emit::Ptx => match self.ptx_located(arch, dims) {
                Some((text, kernels)) => {
                    out.kernels = kernels;
                    text
                }
                None => String::new(),
            },
            Emit::Graph | Emit::Schedule | Emit::Tile => {
                self.ir_text(what, arch, dims, &mut out.trace)
            }
        };
        out
    }

    /// The Graph, Schedule or Tile IR of every item, in source order, with
    /// the traces `--trace-fusion` shows.
    fn ir_text(
        &mut self,
        what: Emit,
        arch: &'static Arch,
        dims: &Bindings,
        trace: &mut Vec<String>,
    ) -> String {
        let items = self.items(&self.generic_calls(), dims);
        if items.is_empty() {
            return comments(&["no ops or kernels in this file".into()]);
        }
        let arch = if what == Emit::Graph { ANY_ARCH } else { arch };
        // A tuned configuration is found at concrete shapes (a call's, or
        // the `--dim` sizes): the op shown on its declared sizes takes it.
        let tuned: Vec<Option<tessera_schedule::Choice>> = match self.tunings.clone() {
            Some(t) if what != Emit::Graph => self
                .concrete_graphs(dims)
                .iter()
                .map(|g| g.as_ref().ok().and_then(|g| t.lookup(g, arch)))
                .collect(),
            _ => Vec::new(),
        };
        let shown = self
            .with_pipeline(arch, |pipeline, c, diags| {
                let mut shown = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    pipeline.pin(tuned.get(i).cloned().flatten());
                    let text = item.show(|target| {
                        let (g, rewrites) = pipeline.graph(target.entry())?;
                        Ok(match what {
                            Emit::Graph => {
                                let lines = c.rewrite_trace(&[(g.clone(), rewrites)]);
                                (tessera_graph::print_graph(&g), lines, Vec::new())
                            }
                            _ => {
                                let s = pipeline.schedule(&g)?;
                                let lines =
                                    s.trace.iter().map(|l| format!("{}: {l}", g.name)).collect();
                                let text = if what == Emit::Schedule {
                                    tessera_schedule::print::print_schedule(&g, &s.schedule)
                                } else {
                                    let p = pipeline.tile(&g, &s)?;
                                    tessera_tile::print::print_program(&p)
                                };
                                (text, lines, s.diagnostics)
                            }
                        })
                    });
                    match text {
                        Ok((notes, body)) => {
                            let mut text = comments(&notes);
                            if let Some((body, lines, found)) = body {
                                text.push_str(&body);
                                trace.extend(lines);
                                diags.extend(found);
                            }
                            shown.push(text);
                        }
                        Err(d) => diags.push(*d),
                    }
                }
                shown
            })
            .unwrap_or_default();
        shown.join("\n")
    }

    /// The Host IR of `fn main` and the fns it calls; without `fn main`,
    /// of every fn of the input files; without any fn, a comment.
    fn host_text(&mut self) -> String {
        let has_main = self.files.iter().any(|(_, f)| {
            f.items
                .iter()
                .any(|i| matches!(i, ast::Item::Fn(f) if f.name.text == "main" && f.body.is_some()))
        });
        let lowered = if has_main {
            self.host_module().map(|m| (m, None))
        } else {
            let roots: Vec<&ast::FnDef> = self
                .files
                .iter()
                .flat_map(|(_, f)| &f.items)
                .filter_map(|i| match i {
                    ast::Item::Fn(f) if f.body.is_some() => Some(f),
                    _ => None,
                })
                .collect();
            if roots.is_empty() {
                return comments(&["no host code: this file has no `fn`".into()]);
            }
            let note = "no `fn main`: every fn of the file and the fns they call";
            match (self.checked.as_ref(), self.program()) {
                (Some(checked), Some(program)) => {
                    tessera_host::lower_fns(&program, &checked.expr_types, &roots)
                        .map(|m| (m, Some(note)))
                }
                _ => return String::new(),
            }
        };
        match lowered {
            Ok((m, note)) => {
                let notes: Vec<String> = note.iter().map(|n| n.to_string()).collect();
                comments(&notes) + &tessera_host::print_module(&m)
            }
            Err(d) => {
                self.diagnostics.push(*d);
                String::new()
            }
        }
    }

    /// The rewrite trace of every graph, one line per rule application,
    /// with the source position it concerns.
    pub fn rewrite_trace(&self, graphs: &[(Graph, Vec<Trace>)]) -> Vec<String> {
        let mut lines = Vec::new();
        for (g, trace) in graphs {
            lines.push(format!("rewrites of `{}`:", g.name));
            if trace.is_empty() {
                lines.push("  (none applied)".into());
            }
            for t in trace {
                let at = match self.locate(t.span) {
                    Some((file, line, col)) if t.span != Default::default() => {
                        format!(" [{file}:{line}:{col}]")
                    }
                    _ => String::new(),
                };
                let mark = if t.fired { "fired" } else { "skipped" };
                lines.push(format!("  {:<9} {:<7} {}{at}", t.rule, mark, t.message));
            }
        }
        lines
    }
}

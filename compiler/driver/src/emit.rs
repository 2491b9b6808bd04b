//! The text forms `tsrc build --emit` writes: the AST, each IR, PTX and
//! Host IR, with the rewrite and fusion traces `--trace-fusion` shows. The
//! driver makes the text; the CLI writes it.

use crate::Compilation;
use tessera_core::{Arch, Bindings};
use tessera_graph::passes::Trace;
use tessera_graph::Graph;

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
}

impl Compilation {
    /// The text form `what` of this compilation for `arch`, PTX with its
    /// dimensions bound by `dims` (see [`ptx`](Self::ptx)). Nothing is
    /// lowered once the program has errors; problems found on the way are
    /// added to the diagnostics.
    pub fn emit(&mut self, what: Emit, arch: &'static Arch, dims: &Bindings) -> Emitted {
        let mut out = Emitted::default();
        out.text = match what {
            Emit::Ast => self
                .files
                .first()
                .map(|(_, file)| tessera_syntax::printer::print_file(file))
                .unwrap_or_default(),
            _ if self.has_errors() => String::new(),
            Emit::Graph => {
                let graphs = self.op_graphs();
                out.trace = self.rewrite_trace(&graphs);
                let texts: Vec<String> = graphs
                    .iter()
                    .map(|(g, _)| tessera_graph::print_graph(g))
                    .collect();
                texts.join("\n")
            }
            Emit::Host => match self.host_module() {
                Ok(m) => tessera_host::print_module(&m),
                Err(d) => {
                    self.diagnostics.push(*d);
                    String::new()
                }
            },
            Emit::Ptx => self.ptx(arch, dims).unwrap_or_default(),
            Emit::Schedule | Emit::Tile => {
                let scheduled = self.op_schedules(arch);
                for (g, s) in &scheduled {
                    out.trace
                        .extend(s.trace.iter().map(|line| format!("{}: {line}", g.name)));
                }
                let texts: Vec<String> = if what == Emit::Schedule {
                    scheduled
                        .iter()
                        .map(|(g, s)| tessera_schedule::print::print_schedule(g, &s.schedule))
                        .collect()
                } else {
                    self.op_tiles(arch, &scheduled)
                        .iter()
                        .map(tessera_tile::print::print_program)
                        .collect()
                };
                texts.join("\n")
            }
        };
        out
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

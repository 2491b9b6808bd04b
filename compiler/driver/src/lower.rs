//! The IRs of a whole compilation, stage by stage, through the one
//! [`Pipeline`]: the graphs, schedules and Tile IR of every op and kernel of
//! the input files (`tsrc build --emit graph|schedule|tile`, the goldens),
//! and one op's schedule for the language server's hover.

use crate::pipeline::{Entry, Pipeline};
use crate::Compilation;
use tessera_core::Arch;
use tessera_diagnostics::Diagnostic;
use tessera_graph::passes::Trace;
use tessera_graph::{Arg, Graph};
use tessera_schedule::Scheduled;
use tessera_syntax::ast;
use tessera_tile::TileProgram;

/// The graph stage does not depend on the target; graphs-only requests
/// name this one.
const ANY_ARCH: &Arch = &Arch::SM_90;

impl Compilation {
    /// Every non-generic op with a body and every kernel of the input
    /// files, in source order: ops on the argument types `calls` gives for
    /// their name, else on their declared (symbolic) ones.
    pub(crate) fn entries<'c>(&'c self, calls: &'c [(String, Vec<Arg>)]) -> Vec<Entry<'c>> {
        let mut out = Vec::new();
        for (_, file) in &self.files {
            for item in &file.items {
                match item {
                    ast::Item::Op(op) if op.body.is_some() && op.generics.is_empty() => {
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
            let mut pipeline = Pipeline::new(&program, arch);
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

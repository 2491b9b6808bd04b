//! The compiler pipeline as a library, without IO.
//!
//! The CLI, the language server, the tests and the benchmarks all go through
//! [`compile`]: it takes source files as bytes, adds the embedded standard
//! library, parses and checks everything, and returns the ASTs, the checker's
//! results and the diagnostics. Reading files and printing belong to callers.

use std::sync::Arc;
use tessera_diagnostics::{codes, Diagnostic, Diagnostics, FileId, SourceMap, Span};
use tessera_schedule::space::Tunings;
use tessera_sema::{Checked, StdModule, Unit};
use tessera_syntax::ast;

mod codegen;
pub mod consts;
mod emit;
mod lower;
pub mod pipeline;

pub use codegen::DEFAULT_DIM;
pub use consts::set_kernel_consts;
pub use emit::{Emit, Emitted};
pub use pipeline::{Entry, Lowered, Pipeline};
pub use tessera_core as core;
pub use tessera_diagnostics as diagnostics;
pub use tessera_graph as graph;
pub use tessera_host as host;
pub use tessera_ptx as ptx;
pub use tessera_schedule as schedule;
pub use tessera_sema as sema;
pub use tessera_syntax as syntax;
pub use tessera_tile as tile;

/// The standard library's sources, embedded at build time.
pub const STDLIB: &[(StdModule, &str)] = &[
    (StdModule::Core, include_str!("../../../stdlib/core.tsr")),
    (StdModule::Nn, include_str!("../../../stdlib/nn.tsr")),
    (StdModule::Dist, include_str!("../../../stdlib/dist.tsr")),
    (StdModule::Tile, include_str!("../../../stdlib/tile.tsr")),
    (StdModule::Host, include_str!("../../../stdlib/host.tsr")),
];

/// How far to run the pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Lex and parse only.
    Parse,
    /// Parse and check.
    Check,
}

/// Everything one compilation produced.
#[derive(Debug)]
pub struct Compilation {
    /// Every file: the inputs first, then the stdlib modules.
    pub sources: SourceMap,
    /// The parsed input files (not the stdlib), in input order.
    pub files: Vec<(FileId, ast::File)>,
    /// The parsed stdlib modules.
    pub stdlib: Vec<(FileId, StdModule, ast::File)>,
    /// What the checker found, if it ran.
    pub checked: Option<Checked>,
    /// All diagnostics, sorted by file and position.
    pub diagnostics: Diagnostics,
    /// How long each phase took (`tsrc build --timings`).
    pub timings: Timings,
    /// The tuning database the text forms consult (`tsrc build --emit
    /// schedule` shows where a tuned configuration came from); `None`:
    /// schedule blocks and defaults only.
    pub tunings: Option<Arc<dyn Tunings + Send + Sync>>,
}

/// Wall time spent per compiler phase, in the order phases first ran.
/// A phase that runs several times (once per kernel) accumulates.
#[derive(Debug, Default, Clone)]
pub struct Timings {
    /// Phase name and total time.
    pub phases: Vec<(&'static str, std::time::Duration)>,
}

impl Timings {
    /// Adds `d` to phase `name`.
    pub fn add(&mut self, name: &'static str, d: std::time::Duration) {
        match self.phases.iter_mut().find(|(n, _)| *n == name) {
            Some((_, t)) => *t += d,
            None => self.phases.push((name, d)),
        }
    }

    /// Runs `f`, charging its time to phase `name`.
    pub fn time<T>(&mut self, name: &'static str, f: impl FnOnce() -> T) -> T {
        let start = std::time::Instant::now();
        let out = f();
        self.add(name, start.elapsed());
        out
    }

    /// The table `tsrc build --timings` prints: one line per phase and a
    /// total, in milliseconds.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let total: std::time::Duration = self.phases.iter().map(|(_, d)| *d).sum();
        for (name, d) in self.phases.iter().chain([&("total", total)]) {
            out.push_str(&format!("{name:>12} {:>9.3} ms\n", d.as_secs_f64() * 1e3));
        }
        out
    }
}

impl Compilation {
    /// The file name and 1-based line and column of the start of `span`
    /// (`None` for a span of no file).
    pub fn locate(&self, span: Span) -> Option<(String, u32, u32)> {
        let file = self.sources.iter().find(|(id, _)| *id == span.file)?.1;
        let (line, col) = file.line_col(span.lo);
        Some((file.name.clone(), line + 1, col + 1))
    }

    /// Whether any error was reported.
    pub fn has_errors(&self) -> bool {
        self.diagnostics.has_errors()
    }

    /// The checked program, indexed for the graph builder; `None` if the
    /// checker did not run.
    pub fn program(&self) -> Option<tessera_graph::Program<'_>> {
        let checked = self.checked.as_ref()?;
        let user: Vec<&ast::File> = self.files.iter().map(|(_, f)| f).collect();
        let stdlib: Vec<(StdModule, &ast::File)> =
            self.stdlib.iter().map(|(_, m, f)| (*m, f)).collect();
        Some(tessera_graph::Program::new(&user, &stdlib, checked))
    }

    /// The Host IR of `fn main` and the fns it calls, verified; the error
    /// for a program without `fn main` or host code that cannot be
    /// compiled. Call it only on a program that checked clean.
    pub fn host_module(&self) -> Result<tessera_host::HostModule, Box<Diagnostic>> {
        let (Some(checked), Some(program)) = (self.checked.as_ref(), self.program()) else {
            return Err(Box::new(Diagnostic::error(
                codes::E0702,
                Span::default(),
                "the program did not check; host code cannot be compiled",
            )));
        };
        let m = tessera_host::lower(&program, &checked.expr_types)?;
        tessera_host::verify(&m).map_err(|e| {
            Box::new(Diagnostic::error(
                codes::E0702,
                Span::default(),
                format!("internal error: Host IR of `{}`: {}", e.function, e.message),
            ))
        })?;
        Ok(m)
    }
}

/// Decodes a file's bytes, or reports where it is not UTF-8. The text
/// returned is always usable (lossily decoded) so that the error can be shown.
pub fn decode(file: FileId, bytes: &[u8]) -> (String, Option<Diagnostic>) {
    match std::str::from_utf8(bytes) {
        Ok(text) => (text.to_owned(), None),
        Err(e) => {
            let at = e.valid_up_to();
            let text = String::from_utf8_lossy(bytes).into_owned();
            // The lossy text matches the original up to `at`; the replacement
            // character there is 3 bytes long.
            let span = Span::new(
                file,
                at as u32,
                (at + '\u{FFFD}'.len_utf8()).min(text.len()) as u32,
            );
            let d = Diagnostic::error(codes::E0001, span, "file is not valid UTF-8")
                .with_label(format!("invalid byte 0x{:02x} at offset {at}", bytes[at]))
                .with_help("save the file as UTF-8 text");
            (text, Some(d))
        }
    }
}

/// Compiles the files `inputs` (name and bytes) up to `stage`.
pub fn compile(inputs: &[(String, Vec<u8>)], stage: Stage) -> Compilation {
    let mut sources = SourceMap::new();
    let mut diagnostics = Diagnostics::new();
    let mut files = Vec::new();
    let mut any_bad = false;
    let mut timings = Timings::default();
    let start = std::time::Instant::now();
    for (name, bytes) in inputs {
        let id = FileId(sources.iter().count() as u32);
        let (text, bad) = decode(id, bytes);
        let id = sources.add(name.clone(), text);
        if let Some(d) = bad {
            diagnostics.push(d);
            any_bad = true;
            files.push((id, ast::File { items: Vec::new() }));
            continue;
        }
        let parsed = tessera_syntax::parse(id, &sources.get(id).text);
        any_bad |= parsed.diagnostics.iter().any(|d| d.is_error());
        diagnostics.extend(parsed.diagnostics);
        files.push((id, parsed.file));
    }
    timings.add("parse", start.elapsed());
    let start = std::time::Instant::now();
    let mut stdlib = Vec::new();
    for (module, text) in STDLIB {
        let id = sources.add(format!("<std>/{}.tsr", module.name()), *text);
        let parsed = tessera_syntax::parse(id, text);
        diagnostics.extend(parsed.diagnostics);
        stdlib.push((id, *module, parsed.file));
    }
    timings.add("parse std", start.elapsed());
    let mut checked = None;
    if stage == Stage::Check && !any_bad {
        for (_, file) in &mut files {
            tessera_syntax::resolve::kernel_consts(file);
        }
        {
            let std_files: Vec<&ast::File> = stdlib.iter().map(|(_, _, f)| f).collect();
            let mut user: Vec<&mut ast::File> = files.iter_mut().map(|(_, f)| f).collect();
            tessera_syntax::resolve::torch_names(&mut user, &std_files);
        }
        let mut units: Vec<Unit<'_>> = files
            .iter()
            .map(|(id, ast)| Unit {
                file: *id,
                ast,
                module: None,
            })
            .collect();
        units.extend(stdlib.iter().map(|(id, module, ast)| Unit {
            file: *id,
            ast,
            module: Some(*module),
        }));
        checked = Some(timings.time("check", || tessera_sema::check(&units, &mut diagnostics)));
    }
    diagnostics.sort();
    Compilation {
        sources,
        files,
        stdlib,
        checked,
        diagnostics,
        timings,
        tunings: None,
    }
}

/// Compiles one in-memory source text (tests, the language server).
pub fn compile_text(name: &str, text: &str, stage: Stage) -> Compilation {
    compile(&[(name.to_owned(), text.as_bytes().to_vec())], stage)
}

//! The one lowering chain: Graph IR → Schedule IR → Tile IR → PTX for one
//! target architecture. Every caller that lowers code goes through a
//! [`Pipeline`]: the CLI's emits and `--emit ptx`, the CPU backend, the GPU
//! launcher, the language server and the tests; so they all run the same
//! passes, and every IR's verifier runs after each stage and each graph
//! rewrite in debug and test builds (the PTX verifier in every build). A
//! verifier's finding is an internal error (E0702 or E0800) pointing at the
//! op, never a panic.

use crate::Timings;
use tessera_core::{Arch, Bindings};
use tessera_diagnostics::{codes, Code, Diagnostic, Span};
use tessera_graph::passes::{self, Trace};
use tessera_graph::{Arg, Graph, Program, Type};
use tessera_schedule::space::Tunings;
use tessera_schedule::{Choice, SKernel, Scheduled};
use tessera_tile::TileProgram;

type R<T> = Result<T, Box<Diagnostic>>;

/// Turns a span into a file name and a 1-based line and column, for the
/// `.loc` directives of PTX.
pub type Locate<'a> = dyn Fn(Span) -> Option<(String, u32, u32)> + 'a;

/// What to build a graph of.
#[derive(Clone, Copy, Debug)]
pub enum Entry<'n> {
    /// An op, on the given argument types or (`None`) on its declared,
    /// possibly symbolic, ones.
    Op(&'n str, Option<&'n [Arg]>),
    /// A kernel, launched on the given argument types or (`None`) on its
    /// declared ones.
    Kernel(&'n str, Option<&'n [Type]>),
}

/// A graph lowered to Tile IR, with the schedule it was lowered by.
#[derive(Clone, Debug)]
pub struct Lowered {
    /// The Schedule IR, its fusion trace and feasibility findings.
    pub scheduled: Scheduled,
    /// The Tile IR.
    pub tile: TileProgram,
}

/// The lowering chain for one target (see the module docs).
pub struct Pipeline<'p> {
    /// The checked program: schedules, user kernels. `None` for a pipeline
    /// that starts from Tile IR ([`Pipeline::from_tile`]).
    program: Option<&'p Program<'p>>,
    arch: &'static Arch,
    /// An explicitly chosen configuration per op or kernel name, instead of
    /// the program's schedule blocks (the autotuner's seam).
    choose: Option<&'p dyn Fn(&str) -> Option<Choice>>,
    /// The tuning database: a graph it holds a configuration for (at these
    /// shapes, on this architecture) is configured by it, ahead of the
    /// program's schedule blocks.
    tunings: Option<&'p dyn Tunings>,
    /// A configuration found for the next graphs' op by the caller (at
    /// other shapes than the graph's own: `--emit schedule` shows an op on
    /// its declared sizes with what was tuned at its call's).
    pinned: Option<Choice>,
    /// The sizes of the run being compiled for, where a graph keeps its
    /// op's declared sizes symbolic: the schedule sizes what must fit at
    /// them (attention's tile at a large head dimension).
    hints: Bindings,
    verify: bool,
    /// Wall time per stage (`graph`, `schedule`, `tile`, `target`, `verify`).
    pub timings: Timings,
}

impl<'p> Pipeline<'p> {
    /// The chain for `program` on `arch`, configured by the program's
    /// schedule blocks, verifying in debug and test builds.
    pub fn new(program: &'p Program<'p>, arch: &'static Arch) -> Pipeline<'p> {
        Pipeline {
            program: Some(program),
            arch,
            choose: None,
            tunings: None,
            pinned: None,
            hints: Bindings::new(),
            verify: cfg!(debug_assertions),
            timings: Timings::default(),
        }
    }

    /// The back end alone, for Tile IR built elsewhere (read from text, or
    /// from a cache): only [`ptx`](Self::ptx) applies.
    pub fn from_tile(arch: &'static Arch) -> Pipeline<'static> {
        Pipeline {
            program: None,
            arch,
            choose: None,
            tunings: None,
            pinned: None,
            hints: Bindings::new(),
            verify: cfg!(debug_assertions),
            timings: Timings::default(),
        }
    }

    /// Configures each op's kernels with `choose(op name)` instead of the
    /// program's schedule blocks (`None`: the A.1 defaults).
    pub fn choosing(mut self, choose: &'p dyn Fn(&str) -> Option<Choice>) -> Pipeline<'p> {
        self.choose = Some(choose);
        self
    }

    /// Configures a graph `tunings` holds a tuned configuration for by
    /// that configuration (its op's kernels; the user kernels it calls keep
    /// their own schedules), unless [`choosing`](Self::choosing) chose.
    pub fn tuned_by(mut self, tunings: Option<&'p dyn Tunings>) -> Pipeline<'p> {
        self.tunings = tunings;
        self
    }

    /// Schedules at the sizes `hints` binds, where the graph's are
    /// symbolic (see the field).
    pub fn hinted(mut self, hints: Bindings) -> Pipeline<'p> {
        self.hints = hints;
        self
    }

    /// [`hinted`](Self::hinted), for the graphs scheduled next.
    pub fn set_hints(&mut self, hints: Bindings) {
        self.hints = hints;
    }

    /// Configures the op of the graphs scheduled next by `choice` (ahead
    /// of the tuning database and the schedule blocks); `None` undoes it.
    pub fn pin(&mut self, choice: Option<Choice>) {
        self.pinned = choice;
    }

    /// Runs the Graph, Schedule and Tile IR verifiers whatever the build.
    pub fn verifying(mut self, verify: bool) -> Pipeline<'p> {
        self.verify = verify;
        self
    }

    /// The target architecture.
    pub fn arch(&self) -> &'static Arch {
        self.arch
    }

    fn program(&self) -> R<&'p Program<'p>> {
        self.program.ok_or_else(|| {
            internal(
                codes::E0702,
                Span::default(),
                "this pipeline starts from Tile IR and has no program",
            )
        })
    }

    /// The Graph IR of `entry`, after the standard rewrites, with their
    /// trace.
    pub fn graph(&mut self, entry: Entry<'_>) -> R<(Graph, Vec<Trace>)> {
        let program = self.program()?;
        let start = std::time::Instant::now();
        let built = match entry {
            Entry::Op(name, args) => tessera_graph::build_op(program, name, args)?,
            Entry::Kernel(name, types) => tessera_graph::build_kernel(program, name, types)?,
        };
        let out = self.optimize(&built);
        self.timings.add("graph", start.elapsed());
        out
    }

    /// Runs the standard graph rewrites on `g`, verifying the graph before
    /// and after each one when verifying.
    pub fn optimize(&self, g: &Graph) -> R<(Graph, Vec<Trace>)> {
        let check = |g: &Graph, after: &str| -> R<()> {
            if !self.verify {
                return Ok(());
            }
            tessera_graph::verify(g).map_err(|errors| {
                internal(
                    codes::E0702,
                    op_span(g),
                    &format!(
                        "the Graph IR of `{}` does not verify {after}: {}",
                        g.name,
                        errors.join("; ")
                    ),
                )
            })
        };
        check(g, "as built")?;
        let mut g = g.clone();
        let mut trace = Vec::new();
        for (name, pass) in passes::STANDARD {
            let (next, t) = pass(&g);
            check(&next, &format!("after `{name}`"))?;
            g = next;
            trace.extend(t);
        }
        Ok((g, trace))
    }

    /// The Schedule IR of `g`: fused kernels, each configured by the chosen
    /// configuration, the program's schedule or the defaults. Feasibility
    /// findings are in the result's diagnostics.
    pub fn schedule(&mut self, g: &Graph) -> R<Scheduled> {
        let program = self.program()?;
        let arch = self.arch;
        let grid = |v| tessera_tile::user_grid(program, g, v);
        let declared = |op: &str| {
            tessera_schedule::schedule_for(program.schedules(), op, arch).map(Choice::of_schedule)
        };
        let tuned = match self.choose {
            None => self
                .pinned
                .clone()
                .or_else(|| self.tunings.and_then(|t| t.lookup(g, arch))),
            Some(_) => None,
        };
        let from_db = |name: &str| match &tuned {
            Some(c) if name == g.name => Some(c.clone()),
            _ => declared(name),
        };
        let choose = self.choose.unwrap_or(&from_db);
        let s = self.timings.time("schedule", || {
            tessera_schedule::schedule_with(g, arch, choose, &grid, &self.hints)
        });
        if self.verify {
            tessera_schedule::verify::verify(g, &s.schedule).map_err(|e| {
                internal(
                    codes::E0702,
                    op_span(g),
                    &format!("the Schedule IR of `{}` does not verify: {e}", g.name),
                )
            })?;
        }
        Ok(s)
    }

    /// The Tile IR of `g` scheduled by `s`.
    pub fn tile(&mut self, g: &Graph, s: &Scheduled) -> R<TileProgram> {
        let program = self.program()?;
        let user = |g: &Graph, k: &SKernel| tessera_tile::lower_user_kernel(program, g, k);
        let p = self
            .timings
            .time("tile", || tessera_tile::lower(g, &s.schedule, &user))?;
        if self.verify {
            tessera_tile::verify::verify(&p).map_err(|e| {
                internal(
                    codes::E0702,
                    op_span(g),
                    &format!("the Tile IR of `{}` does not verify: {e}", g.name),
                )
            })?;
        }
        Ok(p)
    }

    /// Schedules `g` and lowers it to Tile IR. The schedule's feasibility
    /// findings for the target are in `scheduled.diagnostics`: a GPU caller
    /// reports them, the CPU backend (which only borrows the target's tile
    /// shapes) need not.
    pub fn lower(&mut self, g: &Graph) -> R<Lowered> {
        let scheduled = self.schedule(g)?;
        let tile = self.tile(g, &scheduled)?;
        Ok(Lowered { scheduled, tile })
    }

    /// The PTX module of `p` with its dimensions bound by `bindings`, its
    /// kernels pointed at their source by `locate` when given, verified.
    /// The error (E0800) names the kernel and points at it.
    pub fn ptx(
        &mut self,
        p: &TileProgram,
        bindings: &Bindings,
        locate: Option<&Locate<'_>>,
    ) -> R<tessera_ptx::Module> {
        let arch = self.arch;
        let span_of = |kernel: &str| {
            p.kernels
                .iter()
                .find(|k| k.name == kernel)
                .map(|k| k.span)
                .unwrap_or_default()
        };
        let mut m = self
            .timings
            .time("target", || tessera_ptx::lower_program(p, arch, bindings))
            .map_err(|e| {
                let kernel = span_of(&e.kernel);
                Box::new(if e.span == Span::default() || e.span == kernel {
                    Diagnostic::error(
                        codes::E0800,
                        kernel,
                        format!("kernel `{}` of `{}`: {}", e.kernel, p.name, e.message),
                    )
                    .with_label("this kernel")
                } else {
                    Diagnostic::error(
                        codes::E0800,
                        e.span,
                        format!("kernel `{}` of `{}`: {}", e.kernel, p.name, e.message),
                    )
                    .with_label("this cannot be compiled for the GPU")
                    .with_secondary(kernel, "in this kernel")
                })
            })?;
        if let Some(locate) = locate {
            let spans: Vec<Span> = p.kernels.iter().map(|k| k.span).collect();
            tessera_ptx::locate(&mut m, &spans, locate);
        }
        self.timings
            .time("verify", || tessera_ptx::verify::verify(&m))
            .map_err(|e| {
                internal(
                    codes::E0800,
                    span_of(&e.function),
                    &format!(
                        "the Target IR of kernel `{}` of `{}` does not verify: {}",
                        e.function, p.name, e.message
                    ),
                )
            })?;
        Ok(m)
    }
}

/// An internal-error diagnostic: a verifier found a bug in a pass.
fn internal(code: Code, span: Span, message: &str) -> Box<Diagnostic> {
    Box::new(
        Diagnostic::error(code, span, format!("internal error: {message}"))
            .with_note("this is a bug in tsrc: please report it with the program"),
    )
}

/// Sizes for the symbols of `g`'s parameters' shapes (hints for
/// [`Pipeline::hinted`]): `size(symbol, parameter, axis)` gives the size
/// of a symbol written at that axis, if known; the first known one counts.
pub fn param_sizes(g: &Graph, size: impl Fn(&str, usize, usize) -> Option<i64>) -> Bindings {
    let mut out = Bindings::new();
    for (p, param) in g.params.iter().enumerate() {
        for (axis, d) in param
            .ty
            .tensor()
            .map_or(&[][..], |t| &t.dims[..])
            .iter()
            .enumerate()
        {
            if let Some(tessera_core::Size::Sym(s)) = d.to_size() {
                if let (false, Some(n)) = (out.contains_key(&s), size(&s, p, axis)) {
                    out.insert(s, n);
                }
            }
        }
    }
    out
}

/// Where diagnostics about graph `g` as a whole point: its first output.
pub fn op_span(g: &Graph) -> Span {
    g.outputs
        .first()
        .map(|o| g.node(*o).span)
        .unwrap_or_default()
}

/// A run-time error (E0701) of graph `g`: at `at`, the source expression
/// whose code failed, when the backend knows it, with `running` (what ran
/// it: "while running this on the GPU simulator") at the graph's op; at
/// the op otherwise.
pub fn run_error(g: &Graph, message: String, at: Option<Span>, running: &str) -> Box<Diagnostic> {
    let op = op_span(g);
    // Every backend names an integer division by zero so; in a kernel, the
    // usual cause is a lane that a mask turns off (Triton masks the trap
    // away, a kernel here does not).
    let lanes = message.contains("by zero")
        && g.nodes
            .iter()
            .any(|n| matches!(n.op, tessera_graph::Op::Kernel { .. }));
    let d = match at {
        Some(at) if at != op => Diagnostic::error(codes::E0701, at, message)
            .with_label("this failed")
            .with_secondary(op, running),
        // The failing expression is the op's result itself.
        Some(_) => Diagnostic::error(codes::E0701, op, message).with_label(running.replacen(
            "while running this",
            "this failed",
            1,
        )),
        None => Diagnostic::error(codes::E0701, op, message).with_label(running),
    };
    Box::new(if lanes {
        d.with_help(
            "lanes that a mask turns off divide too: a divisor computed from a masked \
             `load` holds `other` there (0 unless given; only a masked load divided by \
             directly divides by 1 there), so give the load `other = 1`, or divide by \
             `where(mask, y, 1)`",
        )
    } else {
        d
    })
}

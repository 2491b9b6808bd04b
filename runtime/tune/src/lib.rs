//! The autotuner (`tsrc tune`): for one op or kernel at concrete shapes,
//! every candidate configuration of its schedule's `autotune(...)` space
//! (or of the default space of its kind of kernel) is scheduled, lowered
//! to PTX and ranked — by the cost model ([`model`]) everywhere, by
//! measurement on a GPU ([`measure`]) when there is one — and recorded in
//! the tuning database ([`db`]), which `tsrc build`, `tsrc run` and built
//! executables consult through [`tessera_schedule::space::Tunings`].
//!
//! A configuration already in the database for this graph, architecture,
//! compiler and method is not tried again: adding one configuration to a
//! space measures only that configuration.

pub mod db;
pub mod measure;
pub mod model;
pub mod profile;
pub mod worker;

pub use db::{Db, Entry, Method, Outcome};
pub use worker::{Isolated, Timer};

use tessera_core::{Arch, Bindings};
use tessera_diagnostics::Severity;
use tessera_driver::Pipeline;
use tessera_graph::{Graph, Program};
use tessera_schedule::space::{candidates, default_space};
use tessera_schedule::{schedule_for, Choice, ConfigSource, KernelKind};
use tessera_tile::TileProgram;

/// How configurations are ranked.
pub enum Ranking<'g> {
    /// By the cost model alone.
    Model,
    /// Timed on this GPU, in this process (the cost model prunes and
    /// orders first). A configuration that traps leaves the context
    /// unusable for the rest: [`Ranking::Timer`] with an [`Isolated`]
    /// timer is the robust choice.
    Measure(&'g tessera_launch::Gpu),
    /// Timed by this timer (worker processes, see [`worker`]).
    Timer(&'g mut dyn Timer),
}

/// The tuner's settings.
#[derive(Clone, Debug)]
pub struct Options {
    /// The architecture configurations are scheduled for.
    pub arch: &'static Arch,
    /// Timed repetitions per configuration (the median is kept).
    pub reps: usize,
    /// Untimed runs first.
    pub warmup: usize,
    /// A configuration whose first run takes longer is rejected.
    pub timeout_ms: f64,
    /// With the model alone, how many of the best configurations ptxas
    /// assembles (when it is installed) to reject those that spill and to
    /// rank by its register counts; 0: none.
    pub ptxas_top: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            arch: &Arch::SM_90,
            reps: 10,
            warmup: 3,
            timeout_ms: 2000.0,
            ptxas_top: 32,
        }
    }
}

/// What the tuner reports as it goes.
pub enum Event<'a> {
    /// Tuning `op` starts: `total` configurations.
    Start {
        /// The op or kernel.
        op: &'a str,
        /// Configurations in its space.
        total: usize,
    },
    /// One configuration is done (`cached`: read from the database).
    Done {
        /// Its entry.
        entry: &'a Entry,
        /// Whether it was in the database already.
        cached: bool,
    },
}

/// The result of tuning one graph.
#[derive(Clone, Debug)]
pub struct Report {
    /// The op or kernel.
    pub op: String,
    /// Its parameters' types.
    pub shapes: String,
    /// The database key.
    pub key: String,
    /// Every configuration tried or read back, in space order, with
    /// whether it was read from the database.
    pub entries: Vec<(Entry, bool)>,
    /// Where the space came from (`autotune clause of schedule mm`,
    /// `default space of matmul kernels`, `schedule mm (no autotune
    /// clause)`).
    pub space: String,
    /// The configuration the op would get untuned, for comparison.
    pub default_config: String,
    /// Why the untuned configuration (the op's schedule with its unset
    /// knobs) does not fit, when it does not: the space is then ranked
    /// without it.
    pub untuned_infeasible: Option<String>,
    /// Entries that could not be written, with why.
    pub write_errors: Vec<String>,
}

impl Report {
    /// The best entry (see [`db::best`]).
    pub fn best(&self) -> Option<&Entry> {
        db::best(self.entries.iter().map(|(e, _)| e))
    }

    /// The entry of the untuned configuration, if it is in the space.
    pub fn default_entry(&self) -> Option<&Entry> {
        self.entries
            .iter()
            .map(|(e, _)| e)
            .find(|e| e.config == self.default_config)
    }
}

/// The space of `g`'s op on `opts.arch`, with where it came from.
fn space(
    program: &Program<'_>,
    g: &Graph,
    kinds: &[KernelKind],
    arch: &'static Arch,
    elem_bytes: u64,
) -> (Vec<Choice>, String, bool) {
    match schedule_for(program.schedules(), &g.name, arch) {
        Some(info) if !info.autotune.is_empty() => (
            candidates(info, arch, elem_bytes),
            format!("the autotune clause of `schedule {}`", g.name),
            false,
        ),
        Some(info) => (
            vec![Choice::of_schedule(info)],
            format!(
                "`schedule {}` (no autotune clause: its one configuration)",
                g.name
            ),
            true,
        ),
        None => {
            let kind = tessera_schedule::space::primary_kind(kinds)
                .map(|k| k.name())
                .unwrap_or_default();
            (
                default_space(kinds, arch, elem_bytes),
                format!("the default space of {kind} kernels"),
                false,
            )
        }
    }
}

/// The name of a point: the knobs it sets.
fn point_name(c: &Choice) -> String {
    match &c.source {
        ConfigSource::Tuned(p) => p.clone(),
        ConfigSource::Schedule { .. } => "the schedule's knobs".into(),
        ConfigSource::Database { point, .. } => point.clone(),
        ConfigSource::Default(_) => db::UNTUNED.into(),
    }
}

/// One configuration lowered: its Tile IR, PTX and bindings.
struct Lowered {
    schedule: tessera_schedule::Schedule,
    tile: TileProgram,
    ptx: String,
    /// Instruction counts of each kernel's PTX, by name.
    counts: Vec<(String, model::PtxCounts)>,
    bindings: Bindings,
}

/// The shapes of `g`'s tensor parameters.
fn param_shapes(g: &Graph) -> Result<Vec<Vec<usize>>, String> {
    g.params
        .iter()
        .map(|p| {
            let t =
                p.ty.tensor()
                    .ok_or_else(|| format!("parameter `{}` is not a tensor", p.name))?;
            t.dims
                .iter()
                .map(|d| {
                    d.as_known().map(|n| n as usize).ok_or_else(|| {
                        format!("parameter `{}` has a symbolic shape ({})", p.name, p.ty)
                    })
                })
                .collect()
        })
        .collect()
}

/// Which configuration [`lower`] gives the kernels of the op tuned.
#[derive(Clone, Copy)]
enum Pick<'c> {
    /// The program's schedule for it, or the defaults.
    Declared,
    /// The defaults (seed table A.1), whatever its schedule says.
    Defaults,
    /// This one.
    Choice(&'c Choice),
}

/// Schedules and lowers `g` with `pick` for its op's kernels (the others
/// keep their schedules), to PTX at `g`'s shapes.
fn lower(
    program: &Program<'_>,
    g: &Graph,
    arch: &'static Arch,
    pick: Pick<'_>,
) -> Result<Lowered, String> {
    let declared = |op: &str| schedule_for(program.schedules(), op, arch).map(Choice::of_schedule);
    let choose = |name: &str| match pick {
        Pick::Choice(c) if name == g.name => Some(c.clone()),
        Pick::Defaults if name == g.name => None,
        _ => declared(name),
    };
    let mut pipeline = Pipeline::new(program, arch).choosing(&choose);
    let scheduled = pipeline.schedule(g).map_err(|d| d.message)?;
    if let Some(e) = scheduled
        .diagnostics
        .iter()
        .find(|d| d.severity == Severity::Error)
    {
        return Err(format!("infeasible: {}", e.message));
    }
    let tile = pipeline
        .tile(g, &scheduled)
        .map_err(|d| format!("does not lower: {}", d.message))?;
    let shapes = param_shapes(g)?;
    let refs: Vec<&[usize]> = shapes.iter().map(|s| &s[..]).collect();
    let bindings = tile.bind_dims(&refs)?;
    let module = pipeline
        .ptx(&tile, &bindings, None)
        .map_err(|d| format!("does not lower to PTX: {}", d.message))?;
    Ok(Lowered {
        schedule: scheduled.schedule,
        tile,
        ptx: tessera_ptx::print_module(&module),
        counts: module
            .functions
            .iter()
            .map(|f| (f.name.clone(), model::ptx_counts(f)))
            .collect(),
        bindings,
    })
}

/// What ptxas says of `ptx`'s kernels: registers by name, or why the
/// configuration is rejected (spills, or it does not assemble). `None`
/// when ptxas is not installed.
fn assemble(ptx: &str, arch: &Arch) -> Option<Result<Vec<(String, u64)>, String>> {
    tessera_cuda::ptxas::find_ptxas()?;
    Some(
        tessera_cuda::ptxas::assemble(ptx, arch.name)
            .map_err(|e| format!("ptxas: {}", e.lines().next().unwrap_or_default()))
            .and_then(|report| {
                if let Some(f) = report.kernels().find(|f| f.spills()) {
                    return Err(format!(
                        "`{}` spills ({} bytes stored, {} loaded) at {} registers",
                        f.name, f.spill_stores_bytes, f.spill_loads_bytes, f.registers
                    ));
                }
                Ok(report
                    .kernels()
                    .map(|f| (f.name.clone(), u64::from(f.registers)))
                    .collect())
            }),
    )
}

/// The model's time for a lowered configuration and its notes.
fn modelled(
    g: &Graph,
    l: &Lowered,
    arch: &Arch,
    regs: &[(String, u64)],
) -> Result<(f64, String), String> {
    let by_name = |n: &str| regs.iter().find(|(k, _)| k == n).map(|(_, r)| *r);
    let counts = |n: &str| l.counts.iter().find(|(k, _)| k == n).map(|(_, c)| *c);
    let est = model::schedule(g, &l.schedule, &l.bindings, arch, &by_name, &counts)?;
    let ms = est.iter().map(|e| e.ms).sum();
    let notes: Vec<String> = est
        .iter()
        .map(|e| {
            format!(
                "{}: {} programs, {} per SM, {} wave{}, {} regs{}, {} B smem, {}-bound",
                e.name,
                e.programs,
                e.blocks_per_sm,
                e.waves,
                if e.waves == 1 { "" } else { "s" },
                e.regs,
                if by_name(&e.name).is_some() {
                    " (ptxas)"
                } else {
                    ""
                },
                e.smem,
                e.bound
            )
        })
        .collect();
    Ok((ms, notes.join("; ")))
}

/// The untuned configuration of `g` lowered, whose outputs configurations
/// are checked against, and why the op's schedule with its unset knobs
/// does not fit when it does not. That configuration is the op's schedule
/// with its unset knobs (autotune clauses vary some); when it does not fit
/// (a head dimension of 128 at the unset knobs' four warps), the space is
/// ranked against its feasible points, and the A.1 defaults give the
/// reference outputs.
fn reference(
    program: &Program<'_>,
    g: &Graph,
    arch: &'static Arch,
) -> Result<(Lowered, Option<String>), String> {
    match lower(program, g, arch, Pick::Declared) {
        Ok(r) => Ok((r, None)),
        Err(why) => {
            let r = lower(program, g, arch, Pick::Defaults)
                .map_err(|e| format!("cannot tune `{}`: its default configuration {e}", g.name))?;
            Ok((r, Some(why)))
        }
    }
}

/// Tunes graph `g` (an op or kernel at concrete shapes) of `program`:
/// see the crate docs. An empty space is an error; a configuration that
/// cannot be used is an entry with its reason.
pub fn tune(
    program: &Program<'_>,
    g: &Graph,
    db: &Db,
    ranking: Ranking<'_>,
    opts: &Options,
    progress: &mut dyn FnMut(Event<'_>),
) -> Result<Report, String> {
    let arch = opts.arch;
    param_shapes(g).map_err(|e| format!("cannot tune `{}`: {e}", g.name))?;
    let (reference, untuned_infeasible) = reference(program, g, arch)?;
    let kinds: Vec<KernelKind> = reference
        .schedule
        .kernels
        .iter()
        .map(|k| k.kind.clone())
        .collect();
    if kinds.is_empty() {
        return Err(format!(
            "`{}` launches no kernels (only views and copies): nothing to tune",
            g.name
        ));
    }
    let elem_bytes = g
        .params
        .iter()
        .find_map(|p| p.ty.tensor())
        .map(|t| t.dtype.size_bytes())
        .unwrap_or(4);
    // `pinned`: a schedule without an autotune clause, whose one
    // configuration is the untuned one.
    let (mut points, space, pinned) = space(program, g, &kinds, arch, elem_bytes);
    if points.is_empty() {
        return Err(format!(
            "the space of `{}` ({space}) has no configuration that fits {}: every point overflows its shared memory or registers",
            g.name, arch.name
        ));
    }
    let key = db::key(g, arch);
    let shapes = model::signature(g);
    let method = match ranking {
        Ranking::Model => Method::Model,
        Ranking::Measure(_) | Ranking::Timer(_) => Method::Measured,
    };
    // The untuned configuration is a point too, so that the best is
    // never worse than what the op gets without tuning.
    let primary = tessera_schedule::space::primary_kind(&kinds);
    let untuned = reference
        .schedule
        .kernels
        .iter()
        .find(|k| primary == Some(&k.kind))
        .map(|k| Choice {
            knobs: knobs_of(&k.config),
            source: ConfigSource::Default("untuned"),
            tensor_cores_at: None,
        });
    let default_config = match (pinned, &untuned) {
        (true, _) => points[0].knobs.to_text(),
        (false, Some(c)) => c.knobs.to_text(),
        (false, None) => String::new(),
    };
    let default_config = match &untuned_infeasible {
        Some(_) => String::new(),
        None => default_config,
    };
    if let Some(c) = untuned.filter(|_| untuned_infeasible.is_none()) {
        if !pinned && !matches!(primary, Some(KernelKind::User(_))) {
            points.insert(0, c);
        }
    }
    progress(Event::Start {
        op: &g.name,
        total: points.len(),
    });
    let mut in_process;
    let mut measurer: Option<&mut dyn Timer> = match ranking {
        Ranking::Measure(gpu) => {
            in_process = measure::Measurer::new(gpu, program, g, &reference.tile, opts)?;
            Some(&mut in_process)
        }
        Ranking::Timer(t) => {
            t.start()
                .map_err(|e| format!("cannot tune `{}`: {e}", g.name))?;
            Some(t)
        }
        Ranking::Model => None,
    };
    let new_entry = |c: &Choice, outcome: Outcome, notes: String| {
        Entry {
            format: db::FORMAT,
            key: key.clone(),
            op: g.name.clone(),
            shapes: shapes.clone(),
            arch: arch.name.to_owned(),
            compiler: tessera_launch::compiler_id().to_owned(),
            config: c.knobs.to_text(),
            point: point_name(c),
            method,
            outcome,
            notes,
            checksum: String::new(),
        }
        .sealed()
    };
    let mut entries: Vec<(Entry, bool)> = Vec::new();
    // Ranked by the model alone: each new entry's point and lowering, for
    // the ptxas checks below.
    let mut fresh: Vec<(usize, &Choice, Lowered)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for c in &points {
        let config = c.knobs.to_text();
        if !seen.insert(config.clone()) {
            continue;
        }
        if let Some(e) = db.get(&key, &config, method) {
            progress(Event::Done {
                entry: &e,
                cached: true,
            });
            entries.push((e, true));
            continue;
        }
        let rejected = |reason: String| Outcome::Rejected { reason };
        let e = match lower(program, g, arch, Pick::Choice(c)) {
            Err(why) => new_entry(c, rejected(why), String::new()),
            Ok(l) => {
                let regs = match &measurer {
                    Some(_) => assemble(&l.ptx, arch).unwrap_or(Ok(Vec::new())),
                    None => Ok(Vec::new()),
                };
                match regs.and_then(|r| modelled(g, &l, arch, &r)) {
                    Err(why) => new_entry(c, rejected(why), String::new()),
                    Ok((ms, notes)) => match &mut measurer {
                        None => {
                            fresh.push((entries.len(), c, l));
                            new_entry(c, Outcome::Ok { ms }, notes)
                        }
                        Some(m) => match m.time(c, &l.tile) {
                            Ok(t) => new_entry(
                                c,
                                Outcome::Ok { ms: t },
                                format!("{notes}; model {}", db::fmt_ms(ms)),
                            ),
                            Err(why) => new_entry(c, rejected(why), notes),
                        },
                    },
                }
            }
        };
        progress(Event::Done {
            entry: &e,
            cached: false,
        });
        entries.push((e, false));
    }
    // With the model alone: ptxas checks the best new configuration (a
    // spill rejects it; its register count re-ranks it) until the best is
    // checked, at most `ptxas_top` times.
    if measurer.is_none() {
        let mut checked = vec![false; entries.len()];
        for _ in 0..opts.ptxas_top {
            // The best as the database ranks it (ties by configuration).
            let fastest = (0..entries.len())
                .filter(|&i| entries[i].0.ms().is_some())
                .min_by(|&a, &b| db::rank(&entries[a].0, &entries[b].0));
            let Some(i) = fastest.filter(|&i| !checked[i]) else {
                break;
            };
            checked[i] = true;
            let Some((_, c, l)) = fresh.iter().find(|(f, _, _)| *f == i) else {
                // Read from the database: checked when it was written.
                break;
            };
            let Some(result) = assemble(&l.ptx, arch) else {
                break;
            };
            entries[i].0 = match result.and_then(|regs| modelled(g, l, arch, &regs)) {
                Ok((ms, notes)) => new_entry(c, Outcome::Ok { ms }, notes),
                Err(why) => new_entry(c, Outcome::Rejected { reason: why }, String::new()),
            };
        }
    }
    let mut write_errors = Vec::new();
    for (e, cached) in &entries {
        if !cached {
            if let Err(why) = db.put(e) {
                write_errors.push(why);
            }
        }
    }
    if write_errors.is_empty() {
        if let Err(why) = db.index(&key) {
            write_errors.push(why);
        }
    }
    write_errors.dedup();
    Ok(Report {
        op: g.name.clone(),
        shapes,
        key,
        entries,
        space,
        default_config,
        untuned_infeasible,
        write_errors,
    })
}

/// The knobs a kernel's resolved configuration corresponds to.
fn knobs_of(c: &tessera_schedule::TileConfig) -> tessera_core::Knobs {
    let mut k = tessera_core::Knobs::unset(c.tensor_cores);
    if let tessera_schedule::Tile::Gemm(t) = &c.tile {
        k.tile = *t;
    }
    if let tessera_schedule::Tile::Attention(t) = &c.tile {
        k.tile.bm = t.bm;
        k.tile.bn = t.bn;
    }
    k.warps = c.warps;
    k.stages = c.stages;
    k.async_copy = c.async_copy;
    k.padding = c.padding;
    k.vectorize = c.vectorize;
    k.occupancy = c.occupancy;
    k.warp_specialize = c.warp_specialize;
    k
}

//! `tsrc tune`: tunes every op and kernel of a file at its shapes (the
//! arguments of its call in `fn main`, else `--dim` sizes) through
//! `tessera-tune`, with a progress bar, a table or JSON of the results,
//! and the tuning database's `--show`, `--export` and `--import`.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use tessera_core::Arch;
use tessera_driver::diagnostics::{render_all, RenderOptions};
use tessera_driver::{compile, Stage};
use tessera_tune::db::{fmt_ms, Db, Entry, Method, Outcome};
use tessera_tune::{Event, Options, Ranking, Report};

/// The tuning database: `tune/` in the compile cache's directory.
pub fn database() -> Db {
    Db::open(tessera_tune::db::tune_dir(&crate::cache_dir()))
}

/// What `tsrc tune` was asked.
pub struct Request<'a> {
    /// The file, unless only importing or exporting.
    pub file: Option<&'a Path>,
    /// Only this op or kernel.
    pub entry: Option<&'a str>,
    /// Where configurations are ranked.
    pub backend: tessera_exec::BackendChoice,
    /// The architecture, if given.
    pub arch: Option<&'static Arch>,
    /// `--dim` sizes.
    pub dims: &'a tessera_core::Bindings,
    /// The `--dim` arguments as given, for the measuring processes.
    pub dim_args: &'a [String],
    /// Be the measuring process of the `N`th op (`--worker N`).
    pub worker: Option<usize>,
    /// Machine-readable output.
    pub json: bool,
    /// Print the database's entries for the file instead of tuning.
    pub show: bool,
    /// Write the database to this file.
    pub export: Option<&'a Path>,
    /// Read entries from this file into the database.
    pub import: Option<&'a Path>,
    /// Timed repetitions per configuration.
    pub reps: usize,
    /// Rows of the table per op (all with `--show`).
    pub top: usize,
}

fn error(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {msg}");
    ExitCode::from(1)
}

/// Runs `tsrc tune`.
pub fn run(req: Request<'_>, options: RenderOptions) -> ExitCode {
    let db = database();
    if let Some(path) = req.import {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) => return error(format!("cannot read `{}`: {e}", path.display())),
        };
        match db.import(&text) {
            Ok((written, present, refused)) => {
                eprintln!(
                    "imported {written} tuning entr{} into `{}` ({present} already there)",
                    if written == 1 { "y" } else { "ies" },
                    db.dir().display()
                );
                for r in &refused {
                    eprintln!("warning: refused {r}");
                }
            }
            Err(e) => return error(format!("`{}`: {e}", path.display())),
        }
    }
    if let Some(path) = req.export {
        let text = db.export();
        for w in db.take_warnings() {
            eprintln!("warning: {w}");
        }
        if let Err(e) = write_atomically(path, &text) {
            return error(format!("cannot write `{}`: {e}", path.display()));
        }
        let n = db.all().len();
        eprintln!(
            "exported {n} tuning entr{} to `{}`",
            if n == 1 { "y" } else { "ies" },
            path.display()
        );
    }
    let Some(file) = req.file else {
        return ExitCode::SUCCESS;
    };
    let Some(inputs) = crate::read_inputs(&[file.to_path_buf()]) else {
        return ExitCode::from(1);
    };
    let mut compilation = compile(&inputs, Stage::Check);
    let status = crate::report(&compilation, options);
    if compilation.has_errors() {
        return status;
    }
    if let Err(e) = crate::known_dims(&compilation, req.dims) {
        return error(e);
    }
    let devices = match tessera_exec::Devices::open(req.backend, req.arch) {
        Ok(d) => d,
        Err(e) => return error(e),
    };
    let gpu = match devices.device() {
        Some(tessera_launch::Device::Cuda(g)) => Some(g),
        _ => None,
    };
    let arch: &'static Arch = match (req.arch, devices.device()) {
        (Some(a), _) => a,
        (None, Some(d)) => d.target(),
        (None, None) => &Arch::SM_90,
    };
    let graphs = compilation.concrete_graphs(req.dims);
    let program = compilation.program().expect("the program was checked");
    if let Some(n) = req.worker {
        return serve(&program, graphs, n, gpu, arch, req.reps);
    }
    let mut status = ExitCode::SUCCESS;
    let mut reports = Vec::new();
    let mut shown = 0;
    for (index, g) in graphs.into_iter().enumerate() {
        let g = match g {
            Ok(g) => g,
            Err(Err(note)) => {
                if !req.json {
                    eprintln!("note: {note}");
                }
                continue;
            }
            Err(Ok(d)) => {
                eprint!(
                    "{}",
                    render_all(&compilation.sources, std::slice::from_ref(&*d), options)
                );
                status = ExitCode::from(1);
                continue;
            }
        };
        if req.entry.is_some_and(|e| e != g.name) {
            continue;
        }
        shown += 1;
        if req.show {
            let key = tessera_tune::db::key(&g, arch);
            let entries: Vec<(Entry, bool)> =
                db.entries(&key).into_iter().map(|e| (e, true)).collect();
            let report = Report {
                op: g.name.clone(),
                shapes: tessera_tune::model::signature(&g),
                key,
                entries,
                space: "the tuning database".into(),
                default_config: String::new(),
                untuned_infeasible: None,
                write_errors: Vec::new(),
            };
            if !req.json {
                print_table(&report, arch, usize::MAX);
            }
            reports.push(report);
            continue;
        }
        let opts = Options {
            arch,
            reps: req.reps,
            ..Options::default()
        };
        // On a GPU, configurations are timed in measuring processes (this
        // program run as `tsrc tune --worker`): one that traps or hangs
        // costs a fresh process, not the measurements after it.
        let mut workers = gpu.map(|_| {
            tessera_tune::Isolated::new(
                worker_command(file, index, arch, &req),
                tessera_tune::db::key(&g, arch),
                tessera_tune::worker::Limits::for_options(&opts),
            )
        });
        let ranking = match &mut workers {
            Some(w) => Ranking::Timer(w),
            None => Ranking::Model,
        };
        let bar = progress_bar(req.json);
        let mut best: Option<f64> = None;
        let mut on_event = |e: Event<'_>| match e {
            Event::Start { op, total } => {
                bar.set_length(total as u64);
                bar.set_prefix(op.to_owned());
            }
            Event::Done { entry, .. } => {
                if let Some(ms) = entry.ms() {
                    best = Some(best.map_or(ms, |b: f64| b.min(ms)));
                }
                if let Some(b) = best {
                    bar.set_message(format!("best {}", fmt_ms(b)));
                }
                bar.inc(1);
            }
        };
        let result = tessera_tune::tune(&program, &g, &db, ranking, &opts, &mut on_event);
        bar.finish_and_clear();
        match result {
            Ok(report) => {
                for w in &report.write_errors {
                    eprintln!("error: the tuning database is not updated: {w}");
                    status = ExitCode::from(1);
                }
                if !req.json {
                    print_table(&report, arch, req.top);
                }
                reports.push(report);
            }
            Err(e) => {
                eprintln!("error: {e}");
                status = ExitCode::from(1);
            }
        }
    }
    for w in db.take_warnings() {
        eprintln!("warning: {w}");
    }
    if shown == 0 {
        return match req.entry {
            Some(e) => error(format!(
                "no op or kernel named `{e}` to tune in `{}`",
                file.display()
            )),
            None => error(format!(
                "`{}` has no ops or kernels to tune",
                file.display()
            )),
        };
    }
    if req.json {
        println!("{}", json(&reports, arch));
    }
    status
}

/// One of the file's ops at its shapes, or why it has none.
type ConcreteGraph = Result<
    tessera_driver::graph::Graph,
    Result<Box<tessera_driver::diagnostics::Diagnostic>, String>,
>;

/// How to start a measuring process for the `index`th op of `file`.
fn worker_command(
    file: &Path,
    index: usize,
    arch: &'static Arch,
    req: &Request<'_>,
) -> Box<dyn FnMut() -> std::process::Command> {
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("tsrc"));
    let mut args: Vec<String> = vec![
        "--color".into(),
        "never".into(),
        "tune".into(),
        file.display().to_string(),
        "--worker".into(),
        index.to_string(),
        "--backend".into(),
        "cuda".into(),
        "--arch".into(),
        arch.name.into(),
        "--reps".into(),
        req.reps.to_string(),
    ];
    for d in req.dim_args {
        args.extend(["--dim".into(), d.clone()]);
    }
    Box::new(move || {
        let mut cmd = std::process::Command::new(&exe);
        cmd.args(&args);
        cmd
    })
}

/// `tsrc tune --worker N`: the measuring process of the `n`th op (see
/// [`tessera_tune::worker`]). Its replies go to standard output; a reason
/// it cannot start is a `fatal` reply, and exit status 1.
fn serve(
    program: &tessera_driver::graph::Program<'_>,
    graphs: Vec<ConcreteGraph>,
    n: usize,
    gpu: Option<&tessera_launch::Gpu>,
    arch: &'static Arch,
    reps: usize,
) -> ExitCode {
    let fatal = |reason: String| {
        println!(
            "{}",
            serde_json::to_string(&tessera_tune::worker::Reply::Fatal { reason })
                .unwrap_or_default()
        );
        ExitCode::from(1)
    };
    let g = match graphs.into_iter().nth(n) {
        Some(Ok(g)) => g,
        _ => return fatal(format!("the program has no op number {n} to measure")),
    };
    let Some(gpu) = gpu else {
        return fatal("the measuring process found no GPU".into());
    };
    let opts = Options {
        arch,
        reps,
        ..Options::default()
    };
    let stdin = std::io::stdin();
    match tessera_tune::worker::serve(program, &g, gpu, &opts, stdin.lock(), std::io::stdout()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

/// A progress bar on standard error (hidden when it is not a terminal or
/// for `--json`): configurations done, ETA, best so far.
fn progress_bar(json: bool) -> indicatif::ProgressBar {
    if json || !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(0);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{prefix:.bold} [{bar:30}] {pos}/{len} configs, ETA {eta} {msg}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

/// Entries ranked: usable ones fastest first, then the rejected.
fn ranked(report: &Report) -> Vec<&Entry> {
    let mut rows: Vec<&Entry> = report.entries.iter().map(|(e, _)| e).collect();
    rows.sort_by(|a, b| {
        let key = |e: &Entry| {
            (
                e.method != Method::Measured,
                e.ms().unwrap_or(f64::INFINITY),
            )
        };
        key(a)
            .partial_cmp(&key(b))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    rows
}

fn print_table(report: &Report, arch: &Arch, top: usize) {
    let rows = ranked(report);
    let cached = report.entries.iter().filter(|(_, c)| *c).count();
    println!(
        "{} ({}) on {}: {} configuration{} from {}{}",
        report.op,
        report.shapes,
        arch.name,
        rows.len(),
        if rows.len() == 1 { "" } else { "s" },
        report.space,
        if cached > 0 && cached < rows.len() {
            format!(", {cached} from the tuning database")
        } else if cached > 0 && report.space != "the tuning database" {
            ", all from the tuning database".to_owned()
        } else {
            String::new()
        }
    );
    if let Some(why) = &report.untuned_infeasible {
        println!("  untuned: {why} (the op's schedule with its unset knobs); ranked without it");
    }
    if rows.is_empty() {
        println!("  (none: tune it with `tsrc tune`)");
        return;
    }
    let usable: Vec<&&Entry> = rows.iter().filter(|e| e.ms().is_some()).collect();
    for (i, e) in usable.iter().take(top).enumerate() {
        let mark = if e.config == report.default_config {
            "  (untuned)"
        } else {
            ""
        };
        println!(
            "  {:>3}  {:<28} {}{mark}",
            i + 1,
            format!("{} {}", e.method.name(), fmt_ms(e.ms().unwrap_or_default())),
            e.point
        );
    }
    if usable.len() > top {
        println!("       ... {} more", usable.len() - top);
    }
    let rejected: Vec<&&Entry> = rows.iter().filter(|e| e.ms().is_none()).collect();
    for e in rejected
        .iter()
        .take(if top == usize::MAX { usize::MAX } else { 3 })
    {
        if let Outcome::Rejected { reason } = &e.outcome {
            println!("    -  rejected: {}: {reason}", e.point);
        }
    }
    if rejected.len() > 3 && top != usize::MAX {
        println!(
            "       ... {} more rejected (see --show)",
            rejected.len() - 3
        );
    }
    if let Some(best) = report.best() {
        let vs = report
            .default_entry()
            .and_then(|d| Some((d.ms()?, best.ms()?)))
            .filter(|(d, _)| report.default_config != best.config && *d > 0.0)
            .map(|(d, b)| format!(" ({:.2}x the untuned {})", d / b, fmt_ms(d)))
            .unwrap_or_default();
        println!("  best: {}: {}{vs}", best.point, best.result());
        if !best.notes.is_empty() {
            println!("        {}", best.notes);
        }
    }
}

fn json(reports: &[Report], arch: &Arch) -> String {
    let ops: Vec<serde_json::Value> = reports
        .iter()
        .map(|r| {
            serde_json::json!({
                "op": r.op,
                "shapes": r.shapes,
                "arch": arch.name,
                "key": r.key,
                "space": r.space,
                "best": r.best(),
                "untuned": r.default_entry(),
                "untuned_infeasible": r.untuned_infeasible,
                "entries": ranked(r),
                "cached": r.entries.iter().filter(|(_, c)| *c).count(),
            })
        })
        .collect();
    serde_json::to_string_pretty(&serde_json::json!({ "ops": ops })).unwrap_or_default()
}

/// Writes `text` to `path` through a temporary file renamed into place.
fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp: PathBuf = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

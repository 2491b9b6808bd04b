//! `tsrc`, the Tessera compiler's command line: reads files, runs the
//! pipeline of `tessera-driver`, prints diagnostics and results.
//!
//! Exit codes: 0 success, 1 errors in the program (diagnostics printed),
//! 2 usage errors.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use tessera_core::{Arch, Bindings};
use tessera_driver::diagnostics::{codes, render_all, RenderOptions};
use tessera_driver::syntax::ast;
use tessera_driver::{compile, Compilation, Stage};

/// std's `eprintln!`, except that a failed write (stderr a pipe whose
/// reader has gone, `tsrc run ... 2>&1 | head`) is ignored instead of
/// panicking: the exit status still says what happened. Shadows std's in
/// this crate.
macro_rules! eprintln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// std's `eprint!`, ignoring a failed write like [`eprintln!`].
macro_rules! eprint {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($arg)*);
    }};
}

/// std's `println!`, ignoring a failed write like [`eprintln!`] (output
/// piped into `head`).
macro_rules! println {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

#[derive(Parser)]
#[command(name = "tsrc", version, about = "The Tessera kernel-language compiler")]
struct Cli {
    /// When to colour diagnostics (NO_COLOR in the environment means never).
    #[arg(long, value_enum, default_value_t = Color::Auto, global = true)]
    color: Color,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum Color {
    Auto,
    Always,
    Never,
}

#[derive(Subcommand)]
enum Command {
    /// Check files and report diagnostics; exit 1 on errors.
    Check {
        /// The .tsr files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Compile a file to the chosen output.
    Build(BuildArgs),
    /// Run a program: `fn main`, or one op or kernel on `.npy` inputs with `--entry`.
    Run(RunArgs),
    /// Tune every op and kernel of a file at its shapes: search its
    /// schedule's `autotune(...)` space (or the default space of its kind
    /// of kernel), rank by measurement on a GPU or by the cost model, and
    /// keep the results in `.tessera/cache/tune/` (or
    /// `$TESSERA_CACHE_DIR/tune/`), which build, run and executables use.
    Tune(TuneArgs),
    /// Remove the compile cache's entries from `.tessera/cache/` (or `$TESSERA_CACHE_DIR`), and nothing else.
    Clean,
    /// Format files in place in the canonical style; with `--check`, list
    /// the files that would change and exit 1 if any would.
    Fmt {
        /// The .tsr files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Rewrite nothing; print `would reformat FILE` for each file that is
        /// not formatted.
        #[arg(long)]
        check: bool,
    },
    /// Explain a diagnostic code, e.g. `tsrc explain E0201`.
    Explain {
        /// The code; with no code, list every code.
        code: Option<String>,
    },
    /// Run the language server on standard input and output.
    Lsp,
}

/// `tsrc build`'s arguments.
#[derive(Args)]
struct BuildArgs {
    /// The .tsr file.
    file: PathBuf,
    /// What to emit.
    #[arg(long, value_enum, default_value_t = Emit::Exe)]
    emit: Emit,
    /// Write the output here instead of standard output (for `exe`:
    /// the executable's path, by default the file's name without
    /// `.tsr` in the current directory).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// List the graph rewrites that fired, and why others did not, on
    /// standard error.
    #[arg(long)]
    trace_fusion: bool,
    /// The GPU architecture kernels are scheduled for.
    #[arg(long, default_value = "sm_90")]
    arch: String,
    /// Binds a dimension for code generation (`--dim D=64`, repeatable):
    /// ops not called from `fn main` are specialised on these for `ptx`
    /// (others default to 128), and ops and kernels that lower only at
    /// concrete sizes are shown at them in every form.
    #[arg(long = "dim", value_name = "NAME=N")]
    dims: Vec<String>,
    /// Sets a kernel constant or an op attribute, replacing its default
    /// (`--const BLOCK=256`, `--const eps=1e-6`, repeatable): `NAME` sets
    /// the constant or attribute of that name of every kernel and op that
    /// declares one, `KERNEL.NAME` (or `OP.NAME`) that one's only; an
    /// attribute with no default takes the value as its default. The value
    /// must be of the constant's kind: an integer for `int`, a number for
    /// `float`, `true` or `false` for `bool`.
    #[arg(long = "const", value_name = "NAME=VALUE")]
    consts: Vec<String>,
    /// Print the time each compiler phase took on standard error.
    #[arg(long)]
    timings: bool,
    /// With `--emit ptx`: assemble the module with ptxas (installed by
    /// `.ci/install-cuda-tools.sh`, or `$TESSERA_PTXAS`), print each
    /// kernel's registers and spills, and warn (W0303) about kernels that
    /// spill.
    #[arg(long)]
    ptxas: bool,
    /// Compile every kernel afresh: neither read nor write the compile
    /// cache (`.tessera/cache/`, or `$TESSERA_CACHE_DIR`).
    #[arg(long)]
    no_cache: bool,
}

/// `tsrc tune`'s arguments.
#[derive(Args)]
struct TuneArgs {
    /// The .tsr file (optional with `--import` or `--export` alone).
    #[arg(required_unless_present_any = ["import", "export"])]
    file: Option<PathBuf>,
    /// Tune only this op or kernel.
    #[arg(long)]
    entry: Option<String>,
    /// Where configurations are ranked: `cuda` measures them on the GPU;
    /// `cpu` and `sim` rank them by the cost model (entries marked
    /// `model`); `auto` measures when there is a GPU.
    #[arg(long, value_enum, default_value_t = Backend::Auto)]
    backend: Backend,
    /// The architecture to tune for (default: the GPU's, else sm_90).
    #[arg(long)]
    arch: Option<String>,
    /// Binds a dimension of ops not called from `fn main` (`--dim M=4096`,
    /// repeatable; others are tuned at 128).
    #[arg(long = "dim", value_name = "NAME=N")]
    dims: Vec<String>,
    /// Print JSON on standard output instead of tables.
    #[arg(long)]
    json: bool,
    /// Print the tuning database's entries for the file's ops at their
    /// shapes; tune nothing.
    #[arg(long)]
    show: bool,
    /// Write every entry of the tuning database to this file.
    #[arg(long, value_name = "FILE")]
    export: Option<PathBuf>,
    /// Add the entries of an exported file to the tuning database.
    #[arg(long, value_name = "FILE")]
    import: Option<PathBuf>,
    /// Timed repetitions per configuration on a GPU (the median is kept).
    #[arg(long, default_value_t = 10)]
    reps: usize,
    /// Configurations listed per op.
    #[arg(long, default_value_t = 10)]
    top: usize,
    /// Internal: be the measuring process of the file's `N`th op at its
    /// shapes (configurations on standard input, one JSON reply per line
    /// on standard output). `tsrc tune` starts these on a GPU, so that a
    /// configuration that traps cannot spoil the measurements after it.
    #[arg(long, value_name = "N", hide = true)]
    worker: Option<usize>,
}

/// `tsrc run`'s arguments.
#[derive(Args)]
struct RunArgs {
    /// The .tsr file.
    file: PathBuf,
    /// The op or kernel to run instead of `fn main`.
    #[arg(long)]
    entry: Option<String>,
    /// An input of the entry: `NAME=PATH.npy` (repeatable).
    #[arg(long = "input", value_name = "NAME=PATH")]
    inputs: Vec<String>,
    /// Where the entry's results are written: a directory (`DIR/out.npy`
    /// for an op or a kernel with one result; `DIR/out0.npy`,
    /// `DIR/out1.npy`, ... for an op with several; `DIR/NAME.npy` for each
    /// `out` parameter NAME of a kernel with several), or a `.npy` file for
    /// an entry with one result. bf16 and fp8 results are written as
    /// float32 (numpy has neither). Inputs are converted to each
    /// parameter's dtype (integers to floats included); a value the dtype
    /// cannot hold (a fraction or an out-of-range value for an integer
    /// parameter) is an error.
    #[arg(long, default_value = ".")]
    output: PathBuf,
    /// Sets a kernel constant or an op attribute, replacing its default
    /// (`--const BLOCK=256`, `--const eps=1e-6`, repeatable): `NAME` sets
    /// the constant or attribute of that name of every kernel and op that
    /// declares one, `KERNEL.NAME` (or `OP.NAME`) that one's only; an
    /// attribute with no default takes the value as its default. The value
    /// must be of the constant's kind: an integer for `int`, a number for
    /// `float`, `true` or `false` for `bool`.
    #[arg(long = "const", value_name = "NAME=VALUE")]
    consts: Vec<String>,
    /// Where kernels run.
    #[arg(long, value_enum, default_value_t = Backend::Auto)]
    backend: Backend,
    /// The GPU architecture kernels are compiled for on the sim and cuda
    /// backends (`sm_80`, `sm_90a`, ...; default: the GPU's newest portable
    /// target up to sm_90, sm_90 on the simulator). A GPU must be able to
    /// run it: an older portable target, or the `a` target of its own
    /// architecture.
    #[arg(long)]
    arch: Option<String>,
    /// Compile every kernel afresh: neither read nor write the compile
    /// cache (`.tessera/cache/`, or `$TESSERA_CACHE_DIR`).
    #[arg(long)]
    no_cache: bool,
    /// Profile every kernel launch: a per-kernel table on standard error
    /// (time, grid, registers, shared memory, occupancy, GB/s, TFLOP/s,
    /// fraction of peak); `--profile=FILE` also writes a Chrome/Perfetto
    /// trace (JSON) to FILE.
    #[arg(long, value_name = "TRACE", num_args = 0..=1, require_equals = true)]
    profile: Option<Option<PathBuf>>,
}

#[derive(Clone, Copy, ValueEnum)]
enum Backend {
    /// CUDA when a driver and a device exist, else the CPU.
    Auto,
    /// The CPU backend.
    Cpu,
    /// An NVIDIA GPU through the CUDA driver.
    Cuda,
    /// The GPU simulator: the same PTX, run on the CPU with bounds, race
    /// and barrier checks.
    Sim,
}

impl Backend {
    fn choice(self) -> tessera_exec::BackendChoice {
        match self {
            Backend::Auto => tessera_exec::BackendChoice::Auto,
            Backend::Cpu => tessera_exec::BackendChoice::Cpu,
            Backend::Cuda => tessera_exec::BackendChoice::Cuda,
            Backend::Sim => tessera_exec::BackendChoice::Sim,
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum Emit {
    /// A standalone executable running `fn main` (the default).
    Exe,
    /// The syntax tree, as an indented text form.
    Ast,
    /// The Graph IR of every op (symbolic shapes, after rewrites).
    Graph,
    /// The Schedule IR: kernels with tiles, staging and grids.
    Schedule,
    /// The Tile IR: one block program per kernel.
    Tile,
    /// The PTX module of every kernel (the Target IR's text form).
    Ptx,
    /// The same as `ptx`: PTX is the text form of the Target IR.
    Target,
    /// The Host IR of `fn main` and the fns it calls.
    Host,
}

impl Emit {
    /// The driver's text form; `None` for the executable.
    fn text_form(self) -> Option<tessera_driver::Emit> {
        use tessera_driver::Emit as E;
        Some(match self {
            Emit::Exe => return None,
            Emit::Ast => E::Ast,
            Emit::Graph => E::Graph,
            Emit::Schedule => E::Schedule,
            Emit::Tile => E::Tile,
            Emit::Ptx | Emit::Target => E::Ptx,
            Emit::Host => E::Host,
        })
    }
}

mod alloc;
mod aot;
mod exe;

#[global_allocator]
static ALLOCATOR: alloc::Allocator = alloc::Allocator;
mod fmt;
mod run;
mod tune;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Compile on a thread with a large stack: the parser bounds nesting, and
    // this leaves a wide margin for the recursive passes.
    let worker = std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(move || run(cli));
    match worker.map(|h| h.join()) {
        Ok(Ok(code)) => code,
        _ => {
            eprintln!("error: internal compiler error (this is a bug in tsrc)");
            ExitCode::from(101)
        }
    }
}

/// What a command works on, for the out-of-memory message.
fn describe(command: &Command) -> String {
    let file = |f: &std::path::Path| format!(" {}", f.display());
    match command {
        Command::Check { files } => format!(
            "checking{}",
            files.iter().map(|f| file(f)).collect::<String>()
        ),
        Command::Build(a) => format!("compiling{}", file(&a.file)),
        Command::Run(a) => format!("running{}", file(&a.file)),
        Command::Fmt { files, .. } => format!(
            "formatting{}",
            files.iter().map(|f| file(f)).collect::<String>()
        ),
        Command::Clean => "cleaning the compile cache".into(),
        Command::Tune(a) => match &a.file {
            Some(f) => format!("tuning{}", file(f)),
            None => "updating the tuning database".into(),
        },
        Command::Explain { .. } => "explaining a code".into(),
        Command::Lsp => "serving the language server".into(),
    }
}

fn run(cli: Cli) -> ExitCode {
    alloc::working_on(describe(&cli.command));
    let color = match cli.color {
        Color::Always => true,
        Color::Never => false,
        Color::Auto => {
            std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                && std::io::stderr().is_terminal()
        }
    };
    let options = RenderOptions {
        color,
        ascii: false,
    };
    match cli.command {
        Command::Check { files } => {
            let Some(inputs) = read_inputs(&files) else {
                return ExitCode::from(1);
            };
            let mut compilation = compile(&inputs, Stage::Check);
            schedule_checks(&mut compilation);
            report(&compilation, options)
        }
        Command::Build(args) => build(args, options),
        Command::Run(args) => run_program(args, options),
        Command::Clean => clean(),
        Command::Tune(args) => tune_command(args, options),
        Command::Fmt { files, check } => fmt::run(&files, check, options),
        Command::Explain { code } => explain(code.as_deref()),
        Command::Lsp => match tessera_lsp::run_stdio() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: language server: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

/// `--dim NAME=N` flags as bindings; the usage error names the bad one.
fn parse_dims(dims: &[String]) -> Result<Bindings, String> {
    let mut bindings = Bindings::new();
    for d in dims {
        match d.split_once('=').map(|(n, v)| (n, v.parse::<i64>())) {
            Some((n, Ok(v))) if v > 0 => {
                bindings.insert(n.to_owned(), v);
            }
            _ => {
                return Err(format!(
                    "`--dim {d}` must be NAME=N with N a positive integer"
                ))
            }
        }
    }
    Ok(bindings)
}

/// The compile cache `--no-cache` asks for.
fn kernel_cache(no_cache: bool) -> tessera_launch::KernelCache {
    if no_cache {
        tessera_launch::KernelCache::in_memory()
    } else {
        tessera_launch::KernelCache::on_disk(cache_dir())
    }
}

/// `tsrc build`: an executable, or one text form of the program.
fn build(args: BuildArgs, options: RenderOptions) -> ExitCode {
    let bindings = match parse_dims(&args.dims) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let Some(arch) = Arch::from_name(&args.arch) else {
        eprintln!(
            "error: unknown architecture `{}` (try sm_80 or sm_90)",
            args.arch
        );
        return ExitCode::from(2);
    };
    let Some(mut inputs) = read_inputs(std::slice::from_ref(&args.file)) else {
        return ExitCode::from(1);
    };
    if let Err(code) = set_consts(&mut inputs, &args.consts) {
        return code;
    }
    let output = match args.emit.text_form() {
        Some(_) => args.output.clone(),
        None => Some(
            args.output
                .clone()
                .unwrap_or_else(|| exe::default_output(&args.file)),
        ),
    };
    if let Some(output) = &output {
        if same_file(output, &args.file) {
            eprintln!(
                "error: the output `{}` is the source file itself; name another with `-o`",
                output.display()
            );
            return ExitCode::from(2);
        }
    }
    let Some(form) = args.emit.text_form() else {
        let compilation = compile(&inputs, Stage::Check);
        let status = report_with_consts(&compilation, &args.consts, options);
        if compilation.has_errors() {
            return status;
        }
        let output = output.expect("an executable always has an output path");
        let cache = kernel_cache(args.no_cache);
        let code = exe::build(&compilation, &output, &cache, options);
        for w in cache.take_warnings() {
            eprintln!("warning: {w}");
        }
        return code;
    };
    let stage = if form.needs_check() {
        Stage::Check
    } else {
        Stage::Parse
    };
    let mut compilation = compile(&inputs, stage);
    compilation.tunings = Some(std::sync::Arc::new(tune::database()));
    if let Err(e) = known_dims(&compilation, &bindings) {
        report(&compilation, options);
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    if args.ptxas && !matches!(args.emit, Emit::Ptx | Emit::Target) {
        eprintln!("error: `--ptxas` assembles PTX: use it with `--emit ptx`");
        return ExitCode::from(2);
    }
    let emitted = compilation.emit(form, arch, &bindings);
    if args.ptxas && !emitted.text.is_empty() {
        check_with_ptxas(&mut compilation, &emitted, arch);
    }
    if args.trace_fusion {
        let mut err = std::io::stderr().lock();
        for line in &emitted.trace {
            let _ = writeln!(err, "{line}");
        }
    }
    let status = report_with_consts(&compilation, &args.consts, options);
    if args.timings {
        eprint!("{}", compilation.timings.render());
    }
    if compilation.has_errors() {
        return status;
    }
    let code = write_output(args.output.as_deref(), &emitted.text);
    // The process ends here: the OS reclaims the memory faster than
    // dropping the compilation piece by piece would.
    std::mem::forget(compilation);
    std::mem::forget(emitted);
    code
}

/// The architecture `--arch` names, if given; an unknown one is a usage
/// error (reported).
fn optional_arch(name: Option<&str>) -> Result<Option<&'static Arch>, ExitCode> {
    match name.map(|a| (a, Arch::from_name(a))) {
        None => Ok(None),
        Some((_, Some(a))) => Ok(Some(a)),
        Some((name, None)) => {
            eprintln!("error: unknown architecture `{name}` (try sm_80 or sm_90)");
            Err(ExitCode::from(2))
        }
    }
}

/// `tsrc run`: `fn main`, or one op with `--entry`, on the chosen backend.
fn run_program(args: RunArgs, options: RenderOptions) -> ExitCode {
    if args.entry.is_none() && !args.inputs.is_empty() {
        eprintln!("error: `--input` needs `--entry NAME` (fn main takes no inputs)");
        return ExitCode::from(2);
    }
    let arch = match optional_arch(args.arch.as_deref()) {
        Ok(a) => a,
        Err(code) => return code,
    };
    let devices = match tessera_exec::Devices::open(args.backend.choice(), arch) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    let device = devices.device();
    if let (None, Some(a)) = (device, arch) {
        eprintln!(
            "error: `--arch {a}` chooses the target of the sim and cuda backends, and kernels \
             run on the CPU backend here{}: use `--backend sim` to run {a} code without a GPU",
            if matches!(args.backend, Backend::Auto) {
                " (no GPU was found)"
            } else {
                ""
            }
        );
        return ExitCode::from(2);
    }
    let Some(mut sources) = read_inputs(std::slice::from_ref(&args.file)) else {
        return ExitCode::from(1);
    };
    if let Err(code) = set_consts(&mut sources, &args.consts) {
        return code;
    }
    let compilation = compile(&sources, Stage::Check);
    let status = report_with_consts(&compilation, &args.consts, options);
    if compilation.has_errors() {
        return status;
    }
    let cache = kernel_cache(args.no_cache);
    let code = match args.entry {
        Some(name) => run::entry(
            &compilation,
            &name,
            &args.inputs,
            &args.output,
            device,
            &cache,
            args.profile.as_ref().map(|t| t.as_deref()),
            options,
        ),
        None => run::main_fn(
            &compilation,
            device,
            &cache,
            args.profile.as_ref().map(|t| t.as_deref()),
            options,
        ),
    };
    if code != ExitCode::SUCCESS {
        const_note(&args.consts);
    }
    for w in cache.take_warnings() {
        eprintln!("warning: {w}");
    }
    code
}

/// `--ptxas`: assembles the emitted PTX, prints each kernel's registers and
/// spills, and adds W0303 for each kernel that spills.
fn check_with_ptxas(c: &mut Compilation, emitted: &tessera_driver::Emitted, arch: &Arch) {
    if tessera_cuda::find_ptxas().is_none() {
        eprintln!(
            "warning: `--ptxas`: ptxas is not installed (run .ci/install-cuda-tools.sh, or set TESSERA_PTXAS): nothing was assembled"
        );
        return;
    }
    let report = match tessera_cuda::assemble(&emitted.text, arch.name) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: ptxas rejects the module (this is a bug in tsrc): {e}");
            return;
        }
    };
    for f in report.kernels() {
        eprintln!(
            "ptxas {}: {}: {} registers, {} bytes spilled",
            arch.name, f.name, f.registers, f.spill_stores_bytes
        );
        if !f.spills() {
            continue;
        }
        let span = emitted
            .kernels
            .iter()
            .find(|(n, _)| *n == f.name)
            .map(|(_, s)| *s)
            .unwrap_or_default();
        c.diagnostics.push(
            tessera_driver::diagnostics::Diagnostic::warning(
                codes::W0303,
                span,
                format!(
                    "kernel `{}` spills on {}: {} bytes stored and {} loaded at {} registers a thread",
                    f.name, arch.name, f.spill_stores_bytes, f.spill_loads_bytes, f.registers
                ),
            )
            .with_label("this op's kernel")
            .with_help(
                "shrink the tile or the pipeline, spread it over more warps, relax `occupancy`, or run `tsrc tune` to find a configuration that does not spill",
            ),
        );
    }
    c.diagnostics.sort();
}

/// `tsrc tune`: checks its arguments and runs the tuner.
fn tune_command(args: TuneArgs, options: RenderOptions) -> ExitCode {
    let dims = match parse_dims(&args.dims) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let arch = match optional_arch(args.arch.as_deref()) {
        Ok(a) => a,
        Err(code) => return code,
    };
    if args.reps == 0 || args.top == 0 {
        eprintln!("error: `--reps` and `--top` must be at least 1");
        return ExitCode::from(2);
    }
    tune::run(
        tune::Request {
            file: args.file.as_deref(),
            entry: args.entry.as_deref(),
            backend: args.backend.choice(),
            arch,
            dims: &dims,
            dim_args: &args.dims,
            worker: args.worker,
            json: args.json,
            show: args.show,
            export: args.export.as_deref(),
            import: args.import.as_deref(),
            reps: args.reps,
            top: args.top,
        },
        options,
    )
}

/// `tsrc clean`: removes the compile cache.
fn clean() -> ExitCode {
    let dir = cache_dir();
    match tessera_launch::cache::clean(&dir) {
        Ok(n) => {
            eprintln!(
                "removed {n} cache entr{} from `{}`",
                if n == 1 { "y" } else { "ies" },
                dir.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: cannot clean `{}`: {e}", dir.display());
            ExitCode::from(1)
        }
    }
}

/// The compile cache's directory: `$TESSERA_CACHE_DIR` when set and not
/// empty, else `.tessera/cache` in the working directory.
pub(crate) fn cache_dir() -> PathBuf {
    std::env::var_os("TESSERA_CACHE_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(tessera_launch::cache::DEFAULT_DIR))
}

pub(crate) fn read_inputs(files: &[PathBuf]) -> Option<Vec<(String, Vec<u8>)>> {
    let mut inputs = Vec::new();
    for path in files {
        match std::fs::read(path) {
            Ok(bytes) => inputs.push((path.display().to_string(), bytes)),
            Err(e) => {
                eprintln!("error: cannot read `{}`: {e}", path.display());
                return None;
            }
        }
    }
    Some(inputs)
}

/// Sets the kernel constants `--const` names in the source of each input
/// (see [`tessera_driver::set_kernel_consts`]); a bad setting is a usage
/// error (exit 2). A file that is not UTF-8 is left for the compilation
/// to report.
fn set_consts(inputs: &mut [(String, Vec<u8>)], settings: &[String]) -> Result<(), ExitCode> {
    if settings.is_empty() {
        return Ok(());
    }
    for (_, bytes) in inputs.iter_mut() {
        let Ok(text) = std::str::from_utf8(bytes) else {
            continue;
        };
        match tessera_driver::set_kernel_consts(text, settings) {
            Ok(set) => *bytes = set.into_bytes(),
            Err(e) => {
                eprintln!("error: {e}");
                return Err(ExitCode::from(2));
            }
        }
    }
    Ok(())
}

/// [`report`], with a note naming the `--const` settings when there are
/// errors: the source shown has their values in place of the defaults.
fn report_with_consts(
    compilation: &Compilation,
    settings: &[String],
    options: RenderOptions,
) -> ExitCode {
    let status = report(compilation, options);
    if compilation.has_errors() {
        const_note(settings);
    }
    status
}

/// After errors: a note that the source shown has the `--const` values.
fn const_note(settings: &[String]) {
    if !settings.is_empty() {
        eprintln!(
            "note: the source above has the kernel constants set by `--const {}` in place of their defaults",
            settings.join("`, `--const ")
        );
    }
}

/// Prints the diagnostics; 1 if there were errors, else 0.
pub(crate) fn report(compilation: &Compilation, options: RenderOptions) -> ExitCode {
    let diags = &compilation.diagnostics;
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(render_all(&compilation.sources, diags.as_slice(), options).as_bytes());
    if diags.dropped() > 0 {
        let _ = writeln!(
            err,
            "note: {} more diagnostics were not shown",
            diags.dropped()
        );
    }
    if diags.has_errors() {
        let n = diags.error_count();
        let _ = writeln!(
            err,
            "error: aborting due to {n} error{}",
            if n == 1 { "" } else { "s" }
        );
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// Runs the schedule feasibility checks `tsrc build` runs (registers per
/// thread, E0310; shared memory once kernels are formed) for the
/// architecture builds default to (sm_90) and every architecture a
/// schedule of the file names, so that `check` finds what `build` would.
/// Only schedule diagnostics (E03xx, W03xx) are kept: an op whose graph
/// needs concrete shapes is not an error until it is built.
fn schedule_checks(c: &mut Compilation) {
    if c.has_errors() {
        return;
    }
    let mut archs: Vec<&'static Arch> = vec![&Arch::SM_90];
    for (_, file) in &c.files {
        for item in &file.items {
            if let ast::Item::Schedule(s) = item {
                let named = s.arch.as_ref().and_then(|n| Arch::from_name(&n.text));
                if let Some(a) = named.filter(|a| !archs.iter().any(|b| b.name == a.name)) {
                    archs.push(a);
                }
            }
        }
    }
    let before: Vec<_> = c.diagnostics.as_slice().to_vec();
    let mut found = Vec::new();
    for arch in archs {
        let start = c.diagnostics.as_slice().len();
        let _ = c.op_schedules(arch);
        found.extend(c.diagnostics.as_slice()[start..].iter().cloned());
    }
    let mut kept = tessera_driver::diagnostics::Diagnostics::new();
    kept.extend(before.iter().cloned());
    for d in found {
        let schedule = d.code.0.starts_with("E03") || d.code.0.starts_with("W03");
        let seen = kept
            .as_slice()
            .iter()
            .any(|k| k.code == d.code && k.message == d.message);
        if schedule && !seen {
            kept.push(d);
        }
    }
    kept.sort();
    c.diagnostics = kept;
}

/// Every `--dim` name is a dimension of some op or kernel of the file;
/// the error lists the dimensions there are.
pub(crate) fn known_dims(c: &Compilation, bindings: &Bindings) -> Result<(), String> {
    fn collect(d: &ast::Dim, out: &mut Vec<String>) {
        for (s, _) in d.symbols() {
            if !out.iter().any(|o| o == s) {
                out.push(s.to_owned());
            }
        }
    }
    let mut dims = Vec::new();
    for (_, file) in &c.files {
        for item in &file.items {
            let params = match item {
                ast::Item::Op(op) => &op.params,
                ast::Item::Kernel(k) => &k.params,
                _ => continue,
            };
            for p in params {
                if let ast::TypeKind::Tensor { dims: ds, .. } = &p.ty.kind {
                    for d in ds {
                        collect(d, &mut dims);
                    }
                }
            }
        }
    }
    let mut unknown: Vec<&String> = bindings.keys().filter(|k| !dims.contains(k)).collect();
    unknown.sort();
    match unknown.first() {
        None => Ok(()),
        Some(name) => Err(format!(
            "`--dim {name}=...`: no op or kernel of this file has a dimension `{name}` ({})",
            if dims.is_empty() {
                "it has no symbolic dimensions".to_owned()
            } else {
                format!("its dimensions: {}", dims.join(", "))
            }
        )),
    }
}

/// Whether `a` and `b` name the same existing file.
fn same_file(a: &std::path::Path, b: &std::path::Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

/// `code`, unless what went to standard output was lost: a closed pipe
/// ends quietly, any other write error is an error (exit 1).
pub(crate) fn delivered(out: tessera_exec::CheckedStdout, code: ExitCode) -> ExitCode {
    match out.finish() {
        tessera_exec::Delivered::All | tessera_exec::Delivered::ReaderGone => code,
        tessera_exec::Delivered::Failed(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

fn write_output(path: Option<&std::path::Path>, text: &str) -> ExitCode {
    match path {
        None => {
            let mut out = tessera_exec::CheckedStdout::new();
            let _ = out.write_all(text.as_bytes());
            delivered(out, ExitCode::SUCCESS)
        }
        Some(path) => match std::fs::write(path, text) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: cannot write `{}`: {e}", path.display());
                ExitCode::from(1)
            }
        },
    }
}

fn explain(code: Option<&str>) -> ExitCode {
    let mut out = tessera_exec::CheckedStdout::new();
    match code {
        None => {
            for info in codes::ALL {
                let _ = writeln!(out, "{}  {}", info.code, info.title);
            }
            delivered(out, ExitCode::SUCCESS)
        }
        Some(code) => match codes::lookup(code) {
            Some(info) => {
                let _ = writeln!(out, "{}: {}\n\n{}", info.code, info.title, info.explanation);
                delivered(out, ExitCode::SUCCESS)
            }
            None => {
                eprintln!("error: unknown diagnostic code `{code}`; `tsrc explain` lists them all");
                ExitCode::from(2)
            }
        },
    }
}

//! The runtime of a Tessera executable: the C `main` that `tsrc build`
//! links with the program's compiled host code.
//!
//! The executable holds the machine code of `fn main` (`tessera_main`) and
//! a bundle (`tessera_program`, see `tessera_exec::bundle`) with the
//! program's source and its compiled kernels. At start-up the runtime
//! checks the source again (a few milliseconds) to rebuild the call sites
//! and the graphs its op calls run, verifies that they match the machine
//! code, picks a backend and calls `tessera_main`.

use std::ffi::{c_char, c_int};
use std::io::Write;

use clap::{Parser, ValueEnum};
use tessera_driver::diagnostics::{render_all, Diagnostic, RenderOptions};
use tessera_driver::{compile, Stage};
use tessera_exec::bundle::{host_hash, Bundle};
use tessera_exec::{BackendChoice, Devices};

extern "C" {
    /// The compiled `fn main` (defined in the program's object file).
    fn tessera_main(ctx: *mut u8);
    /// The first bytes of the program bundle (defined in the object file).
    static tessera_program: [u8; 16];
    /// The bundle's length (u64, little-endian; defined in the object file).
    static tessera_program_len: [u8; 8];
}

#[derive(Parser)]
#[command(
    about = "A program compiled by tsrc, the Tessera compiler.",
    long_about = "A program compiled by tsrc, the Tessera compiler. Runs its `fn main`; \
                  kernels run on the GPU when one is present, else on the CPU."
)]
struct Args {
    /// Where kernels run.
    #[arg(long, value_enum, default_value_t = Backend::Auto)]
    backend: Backend,
    /// After the run, print on standard error how many kernels came
    /// compiled with the executable and how many were compiled at run time.
    #[arg(long)]
    kernel_stats: bool,
    /// Profile every kernel launch: a per-kernel table on standard error;
    /// `--profile=FILE` also writes a Chrome/Perfetto trace (JSON) to FILE.
    #[arg(long, value_name = "TRACE", num_args = 0..=1, require_equals = true)]
    profile: Option<Option<std::path::PathBuf>>,
}

#[derive(Clone, Copy, ValueEnum)]
enum Backend {
    /// The GPU if a CUDA driver and device are present, else the CPU.
    Auto,
    /// The CPU backend.
    Cpu,
    /// An NVIDIA GPU through the CUDA driver.
    Cuda,
    /// The GPU simulator: the PTX itself, run on the CPU with checks.
    Sim,
}

/// The bundle embedded in this executable.
fn bundle() -> Result<Bundle, String> {
    const DAMAGED: &str = "the embedded program is damaged (the executable file was changed)";
    // SAFETY: the object file defines `tessera_program` as the whole bundle
    // and `tessera_program_len` as its length; the bundle's header repeats
    // the length, so one damaged copy cannot make this read past the end.
    let bytes = unsafe {
        let len = u64::from_le_bytes(tessera_program_len);
        let head = std::ptr::addr_of!(tessera_program) as *const u8;
        let claimed = Bundle::length(std::slice::from_raw_parts(head, 16)).ok_or(DAMAGED)?;
        if u64::try_from(claimed).ok() != Some(len) || claimed > tessera_exec::bundle::MAX_LEN {
            return Err(DAMAGED.into());
        }
        std::slice::from_raw_parts(head, claimed)
    };
    Bundle::decode(bytes).map_err(|e| format!("{DAMAGED}: {e}"))
}

fn render(c: &tessera_driver::Compilation, d: &Diagnostic) {
    let color = std::env::var_os("NO_COLOR").is_none()
        && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let options = RenderOptions {
        color,
        ascii: false,
    };
    eprint!(
        "{}",
        render_all(&c.sources, std::slice::from_ref(d), options)
    );
}

fn run(args: Args) -> c_int {
    let bundle = match bundle() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    let c = compile(
        &[(bundle.name.clone(), bundle.source.clone().into_bytes())],
        Stage::Check,
    );
    if c.has_errors() {
        eprintln!("error: the embedded program no longer checks (this is a bug in tsrc)");
        return 1;
    }
    let host = match c.host_module() {
        Ok(h) => h,
        Err(d) => {
            render(&c, &d);
            return 1;
        }
    };
    if host_hash(&host) != bundle.host_hash {
        eprintln!(
            "error: this executable's machine code does not match its program \
             (the file is damaged, or was linked with another runtime)"
        );
        return 1;
    }
    let choice = match args.backend {
        Backend::Auto => BackendChoice::Auto,
        Backend::Cpu => BackendChoice::Cpu,
        Backend::Cuda => BackendChoice::Cuda,
        Backend::Sim => BackendChoice::Sim,
    };
    let devices = match Devices::open(choice, None) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    let device = devices.device();
    let program = c.program().expect("the program checked");
    let locate = |s| c.locate(s);
    // The kernels compiled ahead of time; others are compiled when first
    // launched and kept for the rest of the run.
    let cache = tessera_launch::KernelCache::in_memory().with_embedded(bundle.kernels.clone());
    // The tuned configurations the kernels were compiled with (`tsrc
    // tune`), for those compiled at run time too.
    let tuned = tessera_tune::db::Embedded {
        entries: bundle
            .tuned
            .iter()
            .filter_map(|(k, e)| Some((k.clone(), serde_json::from_str(e).ok()?)))
            .collect(),
    };
    let mut on_device = device.map(|dev| tessera_exec::DeviceRunner {
        dev,
        locate: Some(&locate),
        cache: Some(&cache),
        tunings: Some(&tuned),
    });
    let mut profiling = args.profile.as_ref().map(|_| {
        tessera_exec::profile::ProfilingRunner::new(
            device,
            Some(&locate),
            Some(&cache),
            Some(&tuned),
        )
    });
    let runner = match &mut profiling {
        Some(p) => Some(p as &mut dyn tessera_cpu::host::GraphRunner),
        None => on_device
            .as_mut()
            .map(|r| r as &mut dyn tessera_cpu::host::GraphRunner),
    };
    let mut out = tessera_exec::CheckedStdout::new();
    // SAFETY: `tessera_main` was compiled from this very Host IR (the hash
    // matched), against the ABI this library exports.
    let result =
        unsafe { tessera_exec::run_entry(tessera_main, &program, &host, runner, &mut out) };
    let lost = match out.finish() {
        tessera_exec::Delivered::Failed(e) => Some(e),
        _ => None,
    };
    if args.kernel_stats {
        let s = cache.stats();
        eprintln!(
            "kernels: {} embedded ({} launches), {} compiled at run time",
            bundle.kernels.len(),
            s.embedded_hits + s.memo_hits,
            s.misses
        );
    }
    if let (Some(p), Some(trace)) = (&profiling, &args.profile) {
        if let Err(e) = tessera_exec::profile::report(&p.profile, trace.as_deref()) {
            eprintln!("error: {e}");
            return 1;
        }
    }
    match (result, lost) {
        (Err(d), _) => {
            render(&c, &d);
            1
        }
        (Ok(()), Some(e)) => {
            eprintln!("error: {e}");
            1
        }
        (Ok(()), None) => 0,
    }
}

/// The executable's entry point.
#[no_mangle]
pub extern "C" fn main(_argc: c_int, _argv: *const *const c_char) -> c_int {
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            let _ = std::io::stdout().flush();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    // Run on a thread with a large stack, as tsrc does.
    let worker = std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(move || run(args));
    let code = match worker.map(|h| h.join()) {
        Ok(Ok(code)) => code,
        _ => {
            eprintln!("error: internal error in the Tessera runtime (this is a bug in tsrc)");
            101
        }
    };
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    code
}

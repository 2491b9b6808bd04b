//! `tsrc build --emit exe`: `fn main` compiled to an object file with
//! Cranelift, plus the program bundle (its source and kernels), linked by
//! the system C compiler with the runtime library this binary carries into
//! one executable that needs neither tsrc nor the build tree.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use tessera_driver::diagnostics::{render_all, FileId, RenderOptions};
use tessera_driver::Compilation;
use tessera_exec::bundle::{self, Bundle};
use tessera_jit::object::{object, DataSymbol};
use tessera_launch::KernelCache;

/// The runtime library (`runtime/rt`), built by build.rs.
const RUNTIME: &[u8] = include_bytes!(env!("TESSERA_RT_LIB"));
/// The system libraries the runtime needs, as linker flags.
const NATIVE_LIBS: &str = env!("TESSERA_RT_NATIVE_LIBS");

fn error(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {msg}");
    ExitCode::from(1)
}

/// A scratch directory, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> std::io::Result<Scratch> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!("tsrc-link-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The default output: the source's stem, in the current directory.
pub fn default_output(file: &Path) -> PathBuf {
    PathBuf::from(file.file_stem().unwrap_or_else(|| "a.out".as_ref()))
}

/// Builds the executable `output` from a checked compilation of one file,
/// with kernels compiled through `cache`.
pub fn build(
    c: &Compilation,
    output: &Path,
    cache: &KernelCache,
    options: RenderOptions,
) -> ExitCode {
    // The executable re-checks its source under the same name, so source
    // positions (and with them the kernels' cache keys) agree.
    let source = c.sources.get(FileId(0));
    let has_main = c.program().is_some_and(|p| {
        matches!(
            p.lookup("main"),
            Some(tessera_driver::graph::Callable::Fn(_, None))
        )
    });
    if !has_main {
        return error(
            "cannot build an executable: the program has no `fn main`\n\
             help: add `fn main() { ... }`, or compile its kernels with `--emit ptx`, \
             or run one op with `tsrc run --entry OP`",
        );
    }
    let host = match c.host_module() {
        Ok(h) => h,
        Err(d) => {
            eprint!(
                "{}",
                render_all(&c.sources, std::slice::from_ref(&d), options)
            );
            return ExitCode::from(1);
        }
    };
    let db = crate::tune::database();
    let recording = tessera_tune::db::Recording {
        db: &db,
        found: Default::default(),
    };
    crate::aot::precompile(c, &host, cache, Some(&recording));
    for w in db.take_warnings() {
        eprintln!("warning: {w}");
    }
    let tuned = recording
        .found
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|(k, e)| (k, serde_json::to_string(&e).unwrap_or_default()))
        .collect();
    let bundle = Bundle {
        name: source.name.clone(),
        source: source.text.clone(),
        host_hash: bundle::host_hash(&host),
        kernels: cache.entries(),
        tuned,
    }
    .encode();
    let len = (bundle.len() as u64).to_le_bytes();
    let obj = match object(
        &host,
        &[
            DataSymbol {
                name: bundle::SYMBOL,
                bytes: &bundle,
            },
            DataSymbol {
                name: bundle::LEN_SYMBOL,
                bytes: &len,
            },
        ],
    ) {
        Ok(o) => o,
        Err(e) => return error(format!("cannot compile host code: {e}")),
    };
    let scratch = match Scratch::new() {
        Ok(s) => s,
        Err(e) => return error(format!("cannot create a scratch directory: {e}")),
    };
    let (obj_path, lib_path, exe) = (
        scratch.0.join("host.o"),
        scratch.0.join("libtessera_rt.a"),
        scratch.0.join("a.out"),
    );
    for (path, bytes) in [(&obj_path, &obj[..]), (&lib_path, RUNTIME)] {
        if let Err(e) = std::fs::write(path, bytes) {
            return error(format!("cannot write `{}`: {e}", path.display()));
        }
    }
    if let Err(code) = link(&obj_path, &lib_path, &exe) {
        return code;
    }
    place(&exe, output)
}

/// Whether `name` is an executable file on `$PATH`.
fn on_path(name: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(name).is_file()))
}

/// Links with `$CC` (default `cc`). Without `$CC`, gold is used when it is
/// installed (it links the runtime a third faster than the default ld),
/// falling back to the default linker if it fails.
fn link(obj: &Path, lib: &Path, exe: &Path) -> Result<(), ExitCode> {
    let user_cc = std::env::var("CC").ok();
    let cc = user_cc.clone().unwrap_or_else(|| "cc".into());
    let command = |gold: bool| {
        let mut cmd = Command::new(&cc);
        if gold {
            cmd.arg("-fuse-ld=gold");
        }
        cmd.arg("-o").arg(exe).arg(obj).arg(lib);
        cmd.args(NATIVE_LIBS.split_whitespace());
        cmd.arg("-Wl,--gc-sections");
        cmd
    };
    let gold = user_cc.is_none() && on_path("ld.gold");
    let mut result = command(gold).output();
    if gold && result.as_ref().is_ok_and(|o| !o.status.success()) {
        result = command(false).output();
    }
    match result {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(error(format!(
            "the linker (`{cc}`) failed:\n{}",
            String::from_utf8_lossy(&o.stderr).trim_end()
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(error(format!(
            "cannot link the executable: no C compiler `{cc}` found; install gcc or clang, \
             or set CC to one"
        ))),
        Err(e) => Err(error(format!("cannot run the linker `{cc}`: {e}"))),
    }
}

/// Moves the linked executable to `output`, executable by everyone.
fn place(exe: &Path, output: &Path) -> ExitCode {
    let moved = std::fs::rename(exe, output).or_else(|_| std::fs::copy(exe, output).map(|_| ()));
    if let Err(e) = moved {
        return error(format!("cannot write `{}`: {e}", output.display()));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Err(e) = std::fs::set_permissions(output, std::fs::Permissions::from_mode(0o755)) {
            return error(format!(
                "cannot make `{}` executable: {e}",
                output.display()
            ));
        }
    }
    ExitCode::SUCCESS
}

//! `tsrc fmt`: formats files in place, or with `--check` lists the files
//! that are not formatted. The formatting itself is `tessera-fmt`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use tessera_driver::diagnostics::RenderOptions;
use tessera_driver::{compile, Stage};

/// Formats `files` in place, or with `check` only reports those that would
/// change. Exit code 1 when a file has syntax errors, cannot be read or
/// written, or (with `check`) is not formatted.
pub(crate) fn run(files: &[PathBuf], check: bool, options: RenderOptions) -> ExitCode {
    let mut failed = false;
    let mut out = tessera_exec::CheckedStdout::new();
    for path in files {
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) => {
                eprintln!("error: cannot read `{}`: {e}", path.display());
                failed = true;
                continue;
            }
        };
        let formatted = std::str::from_utf8(&bytes)
            .ok()
            .and_then(|text| tessera_fmt::format(text).ok());
        let Some(formatted) = formatted else {
            // Render the syntax errors exactly as `tsrc check` does.
            let name = path.display().to_string();
            let compilation = compile(&[(name, bytes)], Stage::Parse);
            crate::report(&compilation, options);
            failed = true;
            continue;
        };
        if formatted.as_bytes() == bytes.as_slice() {
            continue;
        }
        if check {
            let _ = writeln!(out, "would reformat {}", path.display());
            failed = true;
        } else if let Err(e) = write_atomically(path, &formatted) {
            eprintln!("error: cannot write `{}`: {e}", path.display());
            failed = true;
        }
    }
    let code = if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    };
    crate::delivered(out, code)
}

/// Writes `text` to a temporary file beside `path`, then renames it over
/// `path`, so a crash never leaves a half-written file.
fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let temp = dir
        .unwrap_or(Path::new("."))
        .join(format!(".{name}.tsrc-fmt-{}", std::process::id()));
    let result = std::fs::write(&temp, text).and_then(|()| {
        if let Ok(meta) = std::fs::metadata(path) {
            std::fs::set_permissions(&temp, meta.permissions())?;
        }
        std::fs::rename(&temp, path)
    });
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

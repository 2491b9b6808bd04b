//! Helpers the `tsrc run` integration tests share: the binary, the
//! examples, and a run of one entry on one backend.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use tessera_tensor::read_npy_file;

pub fn tsrc() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tsrc"))
}

pub fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
}

/// Runs `op` of `file` on `inputs` with `backend`; returns `out.npy`'s
/// values.
pub fn run(
    dir: &Path,
    file: &str,
    op: &str,
    inputs: &[(&str, PathBuf)],
    backend: &str,
) -> Vec<f64> {
    run_path(dir, &example(file), op, inputs, backend)
}

/// [`run`] for a source file anywhere.
pub fn run_path(
    dir: &Path,
    file: &Path,
    op: &str,
    inputs: &[(&str, PathBuf)],
    backend: &str,
) -> Vec<f64> {
    let out = dir.join(backend);
    std::fs::create_dir_all(&out).unwrap();
    run_into(file, op, inputs, backend, &out);
    read_npy_file(out.join("out.npy"))
        .unwrap()
        .tensor
        .to_f64_vec()
}

/// Runs `entry` of `file` on `backend` with the named `inputs`, its
/// results written to `out` (a directory, or a `.npy` file); fails the
/// test with tsrc's message if the run fails.
pub fn run_into(file: &Path, entry: &str, inputs: &[(&str, PathBuf)], backend: &str, out: &Path) {
    let mut c = tsrc();
    c.arg("run")
        .arg(file)
        .args(["--entry", entry, "--backend", backend]);
    for (name, path) in inputs {
        c.arg("--input").arg(format!("{name}={}", path.display()));
    }
    let o = c.arg("--output").arg(out).output().unwrap();
    assert!(
        o.status.success(),
        "{} `{entry}` on {backend}: {}",
        file.display(),
        String::from_utf8_lossy(&o.stderr)
    );
}

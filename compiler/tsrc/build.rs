//! Builds the runtime library executables link (`runtime/rt`, a static
//! library, in release mode) and hands its path to the compiler, which
//! embeds it: `tsrc build` carries the runtime inside itself.
//!
//! The library is built by a nested cargo in its own target directory
//! (beside this build's profile directory), so it neither waits on this
//! build's lock nor changes with its profile. Set `TESSERA_RT_LIB` to a
//! prebuilt `libtessera_rt.a` (and `TESSERA_RT_NATIVE_LIBS` to its link
//! flags) to skip the nested build.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    // A position-dependent `tsrc`: the linker resolves its ~12,000 internal
    // pointers instead of the loader at every start, which is most of a
    // small build's start-up (see bench/RESULTS.md, compile speed).
    if env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-link-arg-bin=tsrc=-no-pie");
    }
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = manifest.join("../..");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo"));
    // Everything the runtime library is built from (not the fuzz targets,
    // the CLI or the editor crates).
    for p in [
        "grammar",
        "stdlib",
        "compiler/core",
        "compiler/syntax",
        "compiler/diagnostics",
        "compiler/sema",
        "compiler/driver",
        "compiler/graph",
        "compiler/schedule",
        "compiler/tile",
        "compiler/ptx",
        "compiler/host",
        "runtime/cpu",
        "runtime/launch",
        "runtime/tensor",
        "runtime/comm",
        "runtime/cuda",
        "runtime/sim",
        "runtime/exec",
        "runtime/tune",
        "runtime/rt",
        "Cargo.toml",
        "Cargo.lock",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(p).display());
    }
    println!("cargo:rerun-if-env-changed=TESSERA_RT_LIB");
    println!("cargo:rerun-if-env-changed=TESSERA_RT_NATIVE_LIBS");
    let (lib, native) = match env::var_os("TESSERA_RT_LIB") {
        Some(lib) => (
            PathBuf::from(lib),
            env::var("TESSERA_RT_NATIVE_LIBS").unwrap_or_else(|_| DEFAULT_NATIVE.to_owned()),
        ),
        None => build_runtime(&root, &out),
    };
    println!("cargo:rustc-env=TESSERA_RT_LIB={}", lib.display());
    println!("cargo:rustc-env=TESSERA_RT_NATIVE_LIBS={native}");
}

/// What rustc reports for a std staticlib on Linux, should the report be
/// missing.
const DEFAULT_NATIVE: &str = "-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc";

fn build_runtime(root: &Path, out: &Path) -> (PathBuf, String) {
    // OUT_DIR is <target>/<profile>/build/<pkg>-<hash>/out.
    let profile_dir = out
        .ancestors()
        .find(|p| p.file_name().is_some_and(|n| n == "build"))
        .and_then(Path::parent)
        .expect("OUT_DIR lies under a build directory");
    let target_dir = profile_dir
        .parent()
        .expect("the profile directory has a parent")
        .join("tessera-rt");
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(root)
        .args([
            "build",
            "--release",
            "--locked",
            "-p",
            "tessera-rt",
            "--target-dir",
        ])
        .arg(&target_dir)
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_RUSTFLAGS")
        .env("RUSTFLAGS", "--print=native-static-libs");
    let output = cmd.output().expect("cargo runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        panic!("building the runtime library (runtime/rt) failed:\n{stderr}");
    }
    let lib = target_dir.join("release/libtessera_rt.a");
    // rustc reports the link flags only when it links the library; keep
    // the last report for no-op rebuilds.
    let saved = target_dir.join("native-static-libs.txt");
    let native = match stderr.lines().find_map(|l| {
        l.split_once("native-static-libs: ")
            .map(|(_, f)| f.trim().to_owned())
    }) {
        Some(flags) => {
            let _ = std::fs::write(&saved, &flags);
            flags
        }
        None => std::fs::read_to_string(&saved).unwrap_or_else(|_| DEFAULT_NATIVE.to_owned()),
    };
    (lib, native)
}

//! Computes the compiler's identity for the compile cache: a digest of the
//! sources of every crate that shapes a kernel's PTX, and of the standard
//! library. tsrc and the runtime library of its executables are built from
//! the same sources, so they agree on it, and any change to code
//! generation changes it.

use std::path::{Path, PathBuf};

const DIRS: &[&str] = &[
    "compiler/core",
    "compiler/syntax",
    "compiler/diagnostics",
    "compiler/sema",
    "compiler/graph",
    "compiler/schedule",
    "compiler/tile",
    "compiler/ptx",
    "runtime/cpu",
    "runtime/launch/src",
    "stdlib",
];

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else if p
            .extension()
            .is_some_and(|x| x == "rs" || x == "lalrpop" || x == "tsr" || x == "toml")
        {
            out.push(p);
        }
    }
}

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = manifest.join("../..");
    let mut all = Vec::new();
    for d in DIRS {
        let dir = root.join(d);
        println!("cargo:rerun-if-changed={}", dir.display());
        files(&dir, &mut all);
    }
    all.sort();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for p in &all {
        feed(
            p.strip_prefix(&root)
                .unwrap_or(p)
                .to_string_lossy()
                .as_bytes(),
        );
        feed(&std::fs::read(p).unwrap_or_default());
    }
    println!("cargo:rustc-env=TESSERA_COMPILER_ID={h:016x}");
}

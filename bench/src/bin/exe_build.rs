//! Executables: the cold and warm time of `tsrc build FILE` (whole
//! process; cold = an empty compile cache, warm = the cache the previous
//! build filled), the executable's size, and start-up overhead: the time of
//! `tsrc run` and of the built executable on the smallest example.
//!
//! Usage: `exe_build [TSRC] [FILE] [SMALL] [RUNS]`; defaults:
//! `target/release/tsrc examples/flash_attn.tsr examples/vec_add.tsr 10`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

/// Runs `cmd` `runs` times; returns the sorted wall times in milliseconds.
fn times(runs: usize, mut cmd: impl FnMut() -> Command) -> Vec<f64> {
    let mut ms: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            let s = cmd().stdout(Stdio::null()).stderr(Stdio::null()).status();
            if !s.is_ok_and(|s| s.success()) {
                eprintln!("error: a timed command failed");
                std::process::exit(1);
            }
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    ms.sort_by(f64::total_cmp);
    ms
}

fn line(what: &str, ms: &[f64]) {
    println!(
        "{what}: median {:.1} ms, min {:.1} ms, max {:.1} ms over {} runs",
        ms[ms.len() / 2],
        ms[0],
        ms[ms.len() - 1],
        ms.len()
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, d: &str| args.get(i).cloned().unwrap_or_else(|| d.to_owned());
    let tsrc = arg(0, "target/release/tsrc");
    let file = arg(1, "examples/flash_attn.tsr");
    let small = arg(2, "examples/vec_add.tsr");
    let runs: usize = arg(3, "10").parse().unwrap_or(10).max(1);
    let dir = std::env::temp_dir().join(format!("tessera-exe-build-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let exe = dir.join("program");
    let cache = dir.join("cache");
    let build = |cache: &Path| {
        let mut c = Command::new(&tsrc);
        c.args(["build", &file, "-o"])
            .arg(&exe)
            .env("TESSERA_CACHE_DIR", cache);
        c
    };
    let cold = times(runs, || {
        let _ = std::fs::remove_dir_all(&cache);
        build(&cache)
    });
    line(&format!("tsrc build {file} (cold cache)"), &cold);
    let warm = times(runs, || build(&cache));
    line(&format!("tsrc build {file} (warm cache)"), &warm);
    let size = std::fs::metadata(&exe).map(|m| m.len()).unwrap_or(0);
    println!(
        "executable: {size} bytes ({:.1} MiB)",
        size as f64 / (1 << 20) as f64
    );

    let small_exe = dir.join("small");
    let built = Command::new(&tsrc)
        .args(["build", &small, "-o"])
        .arg(&small_exe)
        .status();
    if !built.is_ok_and(|s| s.success()) {
        eprintln!("error: cannot build {small}");
        std::process::exit(1);
    }
    let run = times(runs, || {
        let mut c = Command::new(&tsrc);
        c.args(["run", &small, "--backend", "cpu"]);
        c
    });
    line(&format!("tsrc run {small} --backend cpu"), &run);
    let direct = times(runs, || {
        let mut c = Command::new(&small_exe);
        c.args(["--backend", "cpu"]);
        c
    });
    line(
        &format!("the built executable of {small} --backend cpu"),
        &direct,
    );
    let _ = std::fs::remove_dir_all(&dir);
}

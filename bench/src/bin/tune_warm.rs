//! What the tuning database costs and saves: `tsrc tune FILE --backend cpu`
//! with an empty database and again with it full (every point read back),
//! medians of RUNS fresh processes; and, in this process, what a program
//! start pays to find its ops' tuned configurations: a fresh database
//! handle, the key of each op's graph and the read of its entries (the
//! warm-start target is ≤ 1 ms a program).
//!
//! Usage: `tune_warm [TSRC] [FILE] [RUNS]`; defaults:
//! `target/release/tsrc examples/matmul.tsr 20`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v[v.len() / 2]
}

/// The median wall time in milliseconds of `tsrc ARGS` with the cache in
/// `cache`, before each run `before` (e.g. emptying the database).
fn time(tsrc: &str, args: &[&str], cache: &Path, runs: usize, before: &dyn Fn()) -> f64 {
    let mut v = Vec::new();
    for _ in 0..runs {
        before();
        let start = Instant::now();
        let s = Command::new(tsrc)
            .args(args)
            .env("TESSERA_CACHE_DIR", cache)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        match s {
            Ok(s) if s.success() => {}
            other => {
                eprintln!("error: `{tsrc} {}` failed: {other:?}", args.join(" "));
                std::process::exit(1);
            }
        }
        v.push(start.elapsed().as_secs_f64() * 1e3);
    }
    median(v)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, d: &str| args.get(i).cloned().unwrap_or_else(|| d.to_owned());
    let tsrc = arg(0, "target/release/tsrc");
    let file = arg(1, "examples/matmul.tsr");
    let runs: usize = arg(2, "20").parse().unwrap_or(20).max(1);
    let dir = std::env::temp_dir().join(format!("tessera-tune-warm-{}", std::process::id()));
    let full = dir.join("full");
    let tune_dir = full.join("tune");
    let clear = || {
        let _ = std::fs::remove_dir_all(&tune_dir);
    };
    let tune = ["tune", file.as_str(), "--backend", "cpu"];
    let cold = time(&tsrc, &tune, &full, runs, &clear);
    let warm = time(&tsrc, &tune, &full, runs, &|| {});
    // The lookups a run makes, timed in this process on the full database.
    let source = std::fs::read(&file).unwrap_or_default();
    let mut c = tessera_driver::compile(&[(file.clone(), source)], tessera_driver::Stage::Check);
    let graphs: Vec<_> = c
        .concrete_graphs(&Default::default())
        .into_iter()
        .flatten()
        .collect();
    let arch = &tessera_core::Arch::SM_90;
    let (mut lookups, mut keys) = (Vec::new(), Vec::new());
    let mut found = 0;
    for _ in 0..runs {
        let start = Instant::now();
        for g in &graphs {
            std::hint::black_box(tessera_tune::db::key(g, arch));
        }
        keys.push(start.elapsed().as_secs_f64() * 1e3);
        let start = Instant::now();
        let db = tessera_tune::Db::open(tessera_tune::db::tune_dir(&full));
        found = graphs
            .iter()
            .filter(|g| tessera_schedule::space::Tunings::lookup(&db, g, arch).is_some())
            .count();
        lookups.push(start.elapsed().as_secs_f64() * 1e3);
    }
    println!("{file}, median of {runs} ({tsrc}):");
    println!("  tsrc tune --backend cpu, empty database: {cold:.1} ms");
    println!("  tsrc tune --backend cpu, full database:  {warm:.1} ms");
    println!(
        "  tuned-configuration lookups at start-up: {:.3} ms for {} op(s), {found} found (keys alone {:.3} ms)",
        median(lookups),
        graphs.len(),
        median(keys)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

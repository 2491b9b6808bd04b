//! Cold-process compile time: runs `tsrc build FILE --emit ptx --arch ARCH`
//! as a fresh process again and again and prints the median and spread of
//! the whole process's wall time, then one run's per-phase breakdown
//! (`--timings`).
//!
//! Usage: `compile_speed [TSRC] [FILE] [RUNS] [ARCH]`; defaults:
//! `target/release/tsrc examples/flash_attn.tsr 50 sm_90`.

use std::process::{Command, Stdio};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, d: &str| args.get(i).cloned().unwrap_or_else(|| d.to_owned());
    let tsrc = arg(0, "target/release/tsrc");
    let file = arg(1, "examples/flash_attn.tsr");
    let runs: usize = arg(2, "50").parse().unwrap_or(50).max(1);
    let arch = arg(3, "sm_90");
    let out =
        std::env::temp_dir().join(format!("tessera-compile-speed-{}.ptx", std::process::id()));
    let build = |timings: bool| {
        let mut c = Command::new(&tsrc);
        c.args(["build", &file, "--emit", "ptx", "--arch", &arch, "-o"])
            .arg(&out)
            .stdout(Stdio::null());
        if timings {
            c.arg("--timings");
        } else {
            c.stderr(Stdio::null());
        }
        c
    };
    // One warm-up run: the binary and the input in the page cache.
    match build(false).status() {
        Ok(s) if s.success() => {}
        Ok(s) => {
            eprintln!("error: `{tsrc} build {file}` exited with {s}");
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("error: cannot run `{tsrc}`: {e} (build it with `cargo build --release`)");
            std::process::exit(1);
        }
    }
    let mut ms: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            let _ = build(false).status();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    ms.sort_by(f64::total_cmp);
    let bytes = std::fs::metadata(&out).map(|m| m.len()).unwrap_or(0);
    println!(
        "tsrc build {file} --emit ptx --arch {arch}: median {:.2} ms, min {:.2} ms, max {:.2} ms over {runs} processes; {bytes} bytes of PTX",
        ms[runs / 2],
        ms[0],
        ms[runs - 1]
    );
    // The phases of one more run.
    if let Ok(o) = build(true).stderr(Stdio::piped()).output() {
        print!("{}", String::from_utf8_lossy(&o.stderr));
    }
    let _ = std::fs::remove_file(&out);
}

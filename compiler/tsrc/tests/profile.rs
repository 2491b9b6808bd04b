//! `tsrc run --profile[=TRACE]` and `--profile` on built executables: the
//! per-kernel table on standard error, the Chrome/Perfetto trace with a
//! host and a device track, FLOPs counted from the shapes, the tuned
//! configuration named in each launch, and results unchanged.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tessera-profile-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn run(cmd: &mut Command, cache: &Path) -> Output {
    cmd.env("TESSERA_CACHE_DIR", cache).output().unwrap()
}

fn tsrc() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tsrc"))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The trace's launch events of kernel `name`.
fn launches(trace: &serde_json::Value, name: &str) -> Vec<serde_json::Value> {
    trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "kernel" && e["name"] == name)
        .cloned()
        .collect()
}

#[test]
fn run_profile_on_the_simulator_with_a_tuned_config() {
    let dir = scratch("sim");
    let cache = dir.join("cache");
    let matmul = root().join("examples/matmul.tsr");
    let plain = run(
        tsrc().arg("run").arg(&matmul).args(["--backend", "sim"]),
        &cache,
    );
    assert!(plain.status.success(), "{}", text(&plain.stderr));
    let tuned = run(
        tsrc().arg("tune").arg(&matmul).args(["--backend", "cpu"]),
        &cache,
    );
    assert!(tuned.status.success(), "{}", text(&tuned.stderr));
    let trace = dir.join("trace.json");
    let o = run(
        tsrc()
            .arg("run")
            .arg(&matmul)
            .args(["--backend", "sim"])
            .arg(format!("--profile={}", trace.display())),
        &cache,
    );
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    // Results are the same; the table is on standard error.
    assert_eq!(o.stdout, plain.stdout);
    assert!(
        err.contains("profile: 1 launch in 1 op call on sim (sm_90"),
        "{err}"
    );
    assert!(err.contains("gemm/k0_matmul"), "{err}");
    // The table says where the configuration came from.
    assert!(err.contains("gemm/k0_matmul: tuned: model"), "{err}");
    let t: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let ls = launches(&t, "k0_matmul");
    assert_eq!(ls.len(), 1);
    let args = &ls[0]["args"];
    // gemm 256 x 192 @ 192 x 128.
    assert_eq!(args["flops"], 2.0 * 256.0 * 192.0 * 128.0);
    assert_eq!(
        args["bytes"],
        2.0 * (256.0 * 192.0 + 192.0 * 128.0 + 256.0 * 128.0)
    );
    assert!(args["sim"]["warp_instructions"].as_u64().unwrap() > 0);
    assert_eq!(ls[0]["pid"], 2);
    // The tuned configuration ran.
    assert!(
        args["config"].as_str().unwrap().starts_with("tuned: model"),
        "{}",
        args["config"]
    );
    // The host track has the op call with its compile time and fusion.
    let call = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["cat"] == "op")
        .unwrap()
        .clone();
    assert_eq!(call["name"], "gemm");
    assert!(call["args"]["compile_ms"].as_f64().unwrap() > 0.0);
    assert!(call["args"]["fusion"].is_array());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn run_profile_on_the_cpu_and_a_bad_trace_path() {
    let dir = scratch("cpu");
    let softmax = root().join("examples/softmax.tsr");
    let o = run(
        tsrc()
            .arg("run")
            .arg(&softmax)
            .args(["--backend", "cpu", "--profile"]),
        &dir,
    );
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("host time of the CPU backend") && err.contains("k0_row"),
        "{err}"
    );
    // A trace that cannot be written: the run's output stands, exit 1.
    let o = run(
        tsrc().arg("run").arg(&softmax).args([
            "--backend",
            "cpu",
            "--profile=/nonexistent-dir/t.json",
        ]),
        &dir,
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(!o.stdout.is_empty());
    assert!(text(&o.stderr).contains("cannot write the trace"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn executables_profile_too() {
    let dir = scratch("exe");
    let exe = dir.join("matmul");
    let b = run(
        tsrc()
            .arg("build")
            .arg(root().join("examples/matmul.tsr"))
            .arg("-o")
            .arg(&exe),
        &dir.join("cache"),
    );
    assert!(b.status.success(), "{}", text(&b.stderr));
    let trace = dir.join("t.json");
    let o = Command::new(&exe)
        .args(["--backend", "sim"])
        .arg(format!("--profile={}", trace.display()))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("gemm/k0_matmul"));
    let t: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    assert_eq!(launches(&t, "k0_matmul").len(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn entry_runs_profile_too() {
    let dir = scratch("entry");
    let x = tessera_tensor::randn(tessera_tensor::Dtype::Fp32, &[64, 300], 3).unwrap();
    tessera_tensor::write_npy_file(dir.join("x.npy"), &x).unwrap();
    let trace = dir.join("t.json");
    let o = run(
        tsrc()
            .arg("run")
            .arg(root().join("examples/softmax.tsr"))
            .args(["--entry", "softmax_rows", "--backend", "sim"])
            .arg(format!("--input=x={}", dir.join("x.npy").display()))
            .arg(format!("--output={}", dir.join("out").display()))
            .arg(format!("--profile={}", trace.display())),
        &dir,
    );
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(dir.join("out/out.npy").exists());
    assert!(err.contains("softmax_rows/k0_row"), "{err}");
    let t: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let ls = launches(&t, "k0_row");
    assert_eq!(ls.len(), 1);
    // Read and written once: 2 x 64 x 300 fp32.
    assert_eq!(ls[0]["args"]["bytes"], 2.0 * 64.0 * 300.0 * 4.0);
    let _ = std::fs::remove_dir_all(&dir);
}

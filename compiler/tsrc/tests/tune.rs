//! `tsrc tune` and the tuning database (`$TESSERA_CACHE_DIR/tune/`):
//! model-ranked tuning of the default and autotune spaces, reuse across
//! runs (a configuration added to a space is the only one tried), the
//! tuned configuration in `--emit schedule`, `tsrc run` and executables,
//! `--show`, `--json`, `--export`/`--import`, and clear errors for an
//! empty space, a damaged entry and an unwritable directory.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tessera-tune-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn tsrc(args: &[&str], cache: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tsrc"))
        .args(args)
        .env("TESSERA_CACHE_DIR", cache)
        .output()
        .unwrap()
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_str(&ok(o)).unwrap()
}

const GEMM: &str = "\
op mm(a: tensor<M, K, bf16>, b: tensor<K, N, bf16>) -> tensor<M, N, bf16> {
    return a @ b;
}

schedule mm {
    tile(bm = 128, bn = 128, bk = 64);
    warps(4);
    pipeline_stages(2);
    async_copy;
    autotune(bm in [64, 128], stages in [2, 3]);
}

fn main() {
    let a = randn<bf16>([64, 96], seed = 1);
    let b = randn<bf16>([96, 80], seed = 2);
    print(mm(a, b)[0, 0:4]);
}
";

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn entry_files(cache: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for k in std::fs::read_dir(cache.join("tune"))
        .into_iter()
        .flatten()
        .flatten()
    {
        for e in std::fs::read_dir(k.path()).unwrap().flatten() {
            if e.file_name() != "best.json" {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn tuning_is_kept_reused_and_used_by_build_and_run() {
    let dir = scratch("flow");
    let cache = dir.join("cache");
    let file = write(&dir, "mm.tsr", GEMM);
    let f = file.to_str().unwrap();
    let first = json(&tsrc(&["tune", f, "--backend", "cpu", "--json"], &cache));
    let op = &first["ops"][0];
    assert_eq!(op["op"], "mm");
    assert_eq!(
        op["shapes"],
        "a: tensor<64, 96, bf16>, b: tensor<96, 80, bf16>"
    );
    // Four autotune points (the untuned one is one of them).
    assert_eq!(op["entries"].as_array().unwrap().len(), 4);
    assert_eq!(op["cached"], 0);
    assert_eq!(op["best"]["method"], "model");
    assert_eq!(entry_files(&cache).len(), 4);
    // The best is also kept alone, for start-up lookups.
    let key = op["key"].as_str().unwrap();
    let best: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(cache.join("tune").join(key).join("best.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(best, op["best"]);
    // Again: everything comes from the database.
    let again = json(&tsrc(&["tune", f, "--backend", "cpu", "--json"], &cache));
    assert_eq!(again["ops"][0]["cached"], 4);
    assert_eq!(again["ops"][0]["best"], op["best"]);
    // One more value in the space: only the new points are tried.
    let wider = GEMM.replace("bm in [64, 128]", "bm in [64, 128, 256]");
    write(&dir, "mm.tsr", &wider);
    let third = json(&tsrc(&["tune", f, "--backend", "cpu", "--json"], &cache));
    assert_eq!(third["ops"][0]["entries"].as_array().unwrap().len(), 6);
    assert_eq!(third["ops"][0]["cached"], 4);
    write(&dir, "mm.tsr", GEMM);
    // The text forms say where the configuration came from.
    let schedule = ok(&tsrc(&["build", f, "--emit", "schedule"], &cache));
    let best_point = op["best"]["point"].as_str().unwrap();
    assert!(
        schedule.contains(&format!("from: tuned: model")) && schedule.contains(best_point),
        "{schedule}"
    );
    // Without the database: the schedule block.
    let fresh = dir.join("empty");
    let plain = ok(&tsrc(&["build", f, "--emit", "schedule"], &fresh));
    assert!(plain.contains("from: schedule mm"), "{plain}");
    // `tsrc run` on the simulator with the tuned configuration gives the
    // untuned configuration's answer.
    let tuned = ok(&tsrc(&["run", f, "--backend", "sim"], &cache));
    let untuned = ok(&tsrc(&["run", f, "--backend", "sim"], &fresh));
    assert_eq!(tuned, untuned);
    // --show prints the table from the database without tuning.
    let show = ok(&tsrc(&["tune", f, "--show"], &cache));
    assert!(
        show.contains("from the tuning database") && show.contains("best:"),
        "{show}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn default_spaces_and_model_rankings() {
    let dir = scratch("default");
    let cache = dir.join("cache");
    let file = write(
        &dir,
        "ops.tsr",
        "import std.nn;\n\nop mm(a: tensor<M, K, bf16>, b: tensor<K, N, bf16>) -> tensor<M, N, bf16> {\n    return a @ b;\n}\n\nop sm(x: tensor<R, C, fp32>) -> tensor<R, C, fp32> {\n    return softmax(x, axis = -1);\n}\n",
    );
    let o = tsrc(
        &[
            "tune",
            file.to_str().unwrap(),
            "--backend",
            "cpu",
            "--json",
            "--dim",
            "M=2048",
            "--dim",
            "N=2048",
            "--dim",
            "K=1024",
            "--dim",
            "R=4096",
            "--dim",
            "C=1024",
        ],
        &cache,
    );
    let v = json(&o);
    let ops = v["ops"].as_array().unwrap();
    assert_eq!(ops.len(), 2);
    assert!(ops[0]["space"]
        .as_str()
        .unwrap()
        .contains("default space of matmul"));
    assert!(ops[0]["entries"].as_array().unwrap().len() > 40);
    assert!(ops[1]["space"]
        .as_str()
        .unwrap()
        .contains("default space of row"));
    for op in ops {
        let best = op["best"]["outcome"]["ms"].as_f64().unwrap();
        let untuned = op["untuned"]["outcome"]["ms"].as_f64().unwrap();
        assert!(best > 0.0 && best <= untuned, "{op}");
    }
    // A larger problem takes longer by the model.
    let small = ops[0]["best"]["outcome"]["ms"].as_f64().unwrap();
    let o = tsrc(
        &[
            "tune",
            file.to_str().unwrap(),
            "--backend",
            "cpu",
            "--json",
            "--entry",
            "mm",
            "--dim",
            "M=8192",
            "--dim",
            "N=8192",
            "--dim",
            "K=1024",
        ],
        &cache,
    );
    let big = json(&o)["ops"][0]["best"]["outcome"]["ms"]
        .as_f64()
        .unwrap();
    assert!(big > 4.0 * small, "{big} vs {small}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// An autotune clause whose unset knobs do not fit (attention with a head
/// dimension of 128 at four warps and a 128 x 128 tile) is ranked without
/// the untuned point, which the report names as infeasible; the tuned
/// configuration then builds. (It was "cannot tune: its default
/// configuration infeasible".)
#[test]
fn an_infeasible_untuned_point_is_ranked_without() {
    let dir = scratch("infeasible");
    let cache = dir.join("cache");
    let file = write(
        &dir,
        "attn.tsr",
        "import std.nn;\n\nop attn(q: tensor<B, H, N, 128, bf16>, k: tensor<B, H, N, 128, bf16>, v: tensor<B, H, N, 128, bf16>) -> tensor<B, H, N, 128, bf16> {\n    return attention(q, k, v);\n}\n\nschedule attn { autotune(bm in [64, 128], bn in [32, 64]); }\n",
    );
    let path = file.to_str().unwrap();
    let dims = ["--dim", "B=1", "--dim", "H=4", "--dim", "N=1024"];
    let mut args = vec!["tune", path, "--backend", "cpu", "--json"];
    args.extend(dims);
    let v = json(&tsrc(&args, &cache));
    let op = &v["ops"][0];
    let why = op["untuned_infeasible"].as_str().unwrap_or_default();
    assert!(why.contains("registers"), "{op}");
    assert!(op["untuned"].is_null(), "{op}");
    assert!(op["best"]["outcome"]["ms"].as_f64().unwrap() > 0.0, "{op}");
    // Built with the tuning database, the op takes the tuned point.
    let mut args = vec!["build", path, "--emit", "schedule"];
    args.extend(dims);
    let o = tsrc(&args, &cache);
    assert!(
        ok(&o).contains("tuned:"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn export_import_and_damage() {
    let dir = scratch("share");
    let (a, b) = (dir.join("a"), dir.join("b"));
    let file = write(&dir, "mm.tsr", GEMM);
    let f = file.to_str().unwrap();
    ok(&tsrc(&["tune", f, "--backend", "cpu"], &a));
    let export = dir.join("db.json");
    ok(&tsrc(&["tune", "--export", export.to_str().unwrap()], &a));
    let o = tsrc(&["tune", "--import", export.to_str().unwrap()], &b);
    ok(&o);
    assert!(String::from_utf8_lossy(&o.stderr).contains("imported 4 tuning entries"));
    let again = json(&tsrc(&["tune", f, "--backend", "cpu", "--json"], &b));
    assert_eq!(again["ops"][0]["cached"], 4);
    // A damaged entry is a warning; the entry is tried again, the file kept
    // until then.
    let victim = entry_files(&b)[0].clone();
    std::fs::write(&victim, "{ not json").unwrap();
    let o = tsrc(&["tune", f, "--backend", "cpu", "--json"], &b);
    let v = json(&o);
    assert_eq!(v["ops"][0]["cached"], 3);
    assert!(String::from_utf8_lossy(&o.stderr).contains("is damaged"));
    // Not an export: a clear error.
    let o = tsrc(&["tune", "--import", f], &b);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a tuning export"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_input_is_a_message_not_a_crash() {
    let dir = scratch("bad");
    // A cache "directory" that is a file: the results are printed, the
    // database is not updated, exit 1.
    let blocked = write(&dir, "not-a-dir", "x");
    let file = write(&dir, "mm.tsr", GEMM);
    let f = file.to_str().unwrap();
    let o = tsrc(&["tune", f, "--backend", "cpu"], &blocked);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stdout).contains("best:"));
    assert!(String::from_utf8_lossy(&o.stderr).contains("the tuning database is not updated"));
    // A space no point of which fits: an error naming it.
    let huge = GEMM.replace(
        "autotune(bm in [64, 128], stages in [2, 3]);",
        "autotune(bm in [1024], bn in [1024], stages in [8]);",
    );
    let big = write(&dir, "big.tsr", &huge);
    let o = tsrc(
        &["tune", big.to_str().unwrap(), "--backend", "cpu"],
        &dir.join("c"),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("error") && !err.contains("panicked"), "{err}");
    // No such op.
    let o = tsrc(&["tune", f, "--entry", "nope"], &dir.join("c"));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no op or kernel named `nope`"));
    // No file and nothing to import or export: a usage error.
    assert_eq!(tsrc(&["tune"], &dir.join("c")).status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The measuring process `tsrc tune` starts on a GPU (`--worker N`)
/// answers in its protocol even where it cannot measure: one JSON line
/// saying why, exit 1. (Its replacement after a trap or a hang is tested
/// in `tessera-tune`'s `worker` module with stand-in workers.)
#[test]
fn a_measuring_process_without_a_gpu_says_why_in_its_protocol() {
    let dir = scratch("worker");
    let file = write(&dir, "mm.tsr", GEMM);
    let f = file.to_str().unwrap();
    for (n, why) in [("0", "found no GPU"), ("7", "has no op number 7")] {
        let o = tsrc(
            &["tune", f, "--worker", n, "--backend", "sim"],
            &dir.join("c"),
        );
        assert_eq!(o.status.code(), Some(1));
        let reply: serde_json::Value =
            serde_json::from_str(String::from_utf8_lossy(&o.stdout).trim()).unwrap();
        let reason = reply["fatal"]["reason"].as_str().unwrap();
        assert!(reason.contains(why), "{reason}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

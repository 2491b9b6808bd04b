//! The compile cache (`.tessera/cache/`, here `$TESSERA_CACHE_DIR`):
//! entries are reused across processes, a schedule change misses, a
//! damaged entry is reported and rebuilt, two processes can fill it at
//! once, `--no-cache` and `tsrc clean` bypass and remove it, and
//! executables carry their kernels compiled.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::SystemTime;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tessera-cache-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `tsrc run FILE --backend sim` with the cache in `cache`.
fn run(file: &Path, cache: &Path, extra: &[&str]) -> Output {
    let o = Command::new(env!("CARGO_BIN_EXE_tsrc"))
        .arg("run")
        .arg(file)
        .args(["--backend", "sim"])
        .args(extra)
        .env("TESSERA_CACHE_DIR", cache)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    o
}

/// Each entry with its modification time.
fn entries(cache: &Path) -> BTreeMap<String, SystemTime> {
    match std::fs::read_dir(cache) {
        Ok(rd) => rd
            .map(|e| e.unwrap())
            .map(|e| {
                (
                    e.file_name().to_string_lossy().into_owned(),
                    e.metadata().unwrap().modified().unwrap(),
                )
            })
            .collect(),
        Err(_) => BTreeMap::new(),
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn hit_miss_and_damage() {
    let dir = scratch("hmd");
    let cache = dir.join("cache");
    let file = dir.join("matmul.tsr");
    let source = std::fs::read_to_string(root().join("examples/matmul.tsr")).unwrap();
    std::fs::write(&file, &source).unwrap();

    let first = run(&file, &cache, &[]);
    let filled = entries(&cache);
    // The gemm kernel (host slicing runs on the host, with no kernel).
    assert!(!filled.is_empty(), "{filled:?}");
    assert!(filled.keys().all(|k| k.ends_with(".ptx")));

    // A second process reads every kernel back: nothing is rewritten.
    let second = run(&file, &cache, &[]);
    assert_eq!(second.stdout, first.stdout);
    assert_eq!(entries(&cache), filled);
    assert!(!stderr(&second).contains("warning"), "{}", stderr(&second));

    // Another schedule: the gemm kernel misses, the rest still hits.
    std::fs::write(&file, source.replacen("warps(8);", "warps(4);", 1)).unwrap();
    let rescheduled = run(&file, &cache, &[]);
    assert_eq!(rescheduled.stdout, first.stdout);
    let after = entries(&cache);
    assert_eq!(after.len(), filled.len() + 1, "{after:?}");
    assert!(filled.iter().all(|(k, t)| after.get(k) == Some(t)));

    // A damaged entry: a warning, the right output, and a repaired entry.
    // (The new gemm entry: one this file's run certainly reads.)
    let fresh = after.keys().find(|k| !filled.contains_key(*k)).unwrap();
    let victim = cache.join(fresh);
    let good = std::fs::read(&victim).unwrap();
    std::fs::write(&victim, &good[..good.len() / 2]).unwrap();
    let repaired = run(&file, &cache, &[]);
    assert_eq!(repaired.stdout, first.stdout);
    assert!(
        stderr(&repaired).contains("warning") && stderr(&repaired).contains("damaged"),
        "{}",
        stderr(&repaired)
    );
    assert_eq!(std::fs::read(&victim).unwrap(), good);

    // --no-cache neither reads nor writes it.
    let other = dir.join("unused");
    let bypass = run(&file, &other, &["--no-cache"]);
    assert_eq!(bypass.stdout, first.stdout);
    assert!(!other.exists());

    // tsrc clean removes its entries and nothing else: a file of the
    // user's in the same directory stays, and so does the directory.
    std::fs::write(cache.join("keep.txt"), "not the cache's").unwrap();
    let clean = || {
        Command::new(env!("CARGO_BIN_EXE_tsrc"))
            .arg("clean")
            .env("TESSERA_CACHE_DIR", &cache)
            .output()
            .unwrap()
    };
    assert!(clean().status.success());
    assert!(cache.join("keep.txt").is_file());
    assert_eq!(std::fs::read_dir(&cache).unwrap().count(), 1);
    std::fs::remove_file(cache.join("keep.txt")).unwrap();
    assert!(clean().status.success());
    assert!(!cache.exists());

    // An empty TESSERA_CACHE_DIR is the default directory, not the
    // working directory.
    let work = dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_tsrc"))
        .arg("run")
        .arg(&file)
        .args(["--backend", "sim"])
        .env("TESSERA_CACHE_DIR", "")
        .current_dir(&work)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let names: Vec<String> = std::fs::read_dir(&work)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec![".tessera".to_owned()]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn two_processes_fill_the_cache_at_once() {
    let dir = scratch("race");
    let cache = dir.join("cache");
    let file = root().join("examples/flash_attn.tsr");
    let spawn = || {
        Command::new(env!("CARGO_BIN_EXE_tsrc"))
            .arg("run")
            .arg(&file)
            .args(["--backend", "sim"])
            .env("TESSERA_CACHE_DIR", &cache)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert!(
        a.status.success() && b.status.success(),
        "{}{}",
        stderr(&a),
        stderr(&b)
    );
    assert_eq!(a.stdout, b.stdout);
    let filled = entries(&cache);
    assert!(!filled.is_empty());
    assert!(
        filled.keys().all(|k| k.ends_with(".ptx")),
        "no temporary files left: {filled:?}"
    );
    // Every entry is whole: a third run hits them all, without warnings.
    let third = run(&file, &cache, &[]);
    assert_eq!(third.stdout, a.stdout);
    assert!(!stderr(&third).contains("warning"), "{}", stderr(&third));
    assert_eq!(entries(&cache), filled);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn executables_carry_their_kernels() {
    let dir = scratch("exe");
    let exe = dir.join("attn");
    let o = Command::new(env!("CARGO_BIN_EXE_tsrc"))
        .arg("build")
        .arg(root().join("examples/flash_attn.tsr"))
        .arg("-o")
        .arg(&exe)
        .env("TESSERA_CACHE_DIR", dir.join("cache"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let ran = Command::new(&exe)
        .args(["--backend", "sim", "--kernel-stats"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(ran.status.success(), "{}", stderr(&ran));
    let stats = stderr(&ran);
    assert!(stats.contains("0 compiled at run time"), "{stats}");
    assert!(!stats.contains("(0 launches)"), "{stats}");
    let _ = std::fs::remove_dir_all(&dir);
}

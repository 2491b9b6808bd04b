//! `tsrc build` makes standalone executables: every example builds, runs
//! from another directory with an empty environment, and prints what
//! `tsrc run` prints; bad builds fail with clear errors.

use std::path::{Path, PathBuf};
use std::process::Command;

fn tsrc() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tsrc"))
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tessera-exe-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn every_example_runs_as_an_executable() {
    let dir = scratch("examples");
    let elsewhere = scratch("elsewhere");
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "tsr"))
        .collect();
    files.sort();
    assert!(files.len() >= 8);
    for file in &files {
        let name = file.file_stem().unwrap().to_string_lossy().into_owned();
        let exe = dir.join(&name);
        let b = tsrc()
            .arg("build")
            .arg(file)
            .arg("-o")
            .arg(&exe)
            .output()
            .unwrap();
        assert!(b.status.success(), "{name}: {}", text(&b.stderr));
        let expected = tsrc()
            .arg("run")
            .arg(file)
            .args(["--backend", "cpu"])
            .output()
            .unwrap();
        assert!(
            expected.status.success(),
            "{name}: {}",
            text(&expected.stderr)
        );
        // Another directory, no environment at all: the executable needs
        // neither tsrc nor the source tree.
        let ran = Command::new(&exe)
            .current_dir(&elsewhere)
            .env_clear()
            .output()
            .unwrap();
        assert!(ran.status.success(), "{name}: {}", text(&ran.stderr));
        assert_eq!(text(&ran.stdout), text(&expected.stdout), "{name}");
        assert!(!text(&ran.stdout).is_empty(), "{name} printed nothing");
        // Output lost to a full disk is an error, not exit 0.
        if let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") {
            let lost = Command::new(&exe).stdout(full).output().unwrap();
            assert_eq!(
                lost.status.code(),
                Some(1),
                "{name}: {}",
                text(&lost.stderr)
            );
            assert!(text(&lost.stderr).contains("cannot write to standard output"));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&elsewhere);
}

#[test]
fn executables_take_a_backend_and_help() {
    let dir = scratch("flags");
    let exe = dir.join("softmax");
    let b = tsrc()
        .arg("build")
        .arg(root().join("examples/softmax.tsr"))
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(b.status.success(), "{}", text(&b.stderr));
    let help = Command::new(&exe).arg("--help").output().unwrap();
    assert!(help.status.success());
    assert!(
        text(&help.stdout).contains("--backend"),
        "{}",
        text(&help.stdout)
    );
    let bad = Command::new(&exe)
        .args(["--backend", "tpu"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        text(&bad.stderr).contains("possible values"),
        "{}",
        text(&bad.stderr)
    );
    let cpu = Command::new(&exe)
        .args(["--backend", "cpu"])
        .output()
        .unwrap();
    let sim = Command::new(&exe)
        .args(["--backend", "sim"])
        .output()
        .unwrap();
    assert!(
        cpu.status.success() && sim.status.success(),
        "{}",
        text(&sim.stderr)
    );
    assert_eq!(
        text(&cpu.stdout).lines().next(),
        text(&sim.stdout).lines().next()
    );
    if !tessera_gpu_present() {
        let cuda = Command::new(&exe)
            .args(["--backend", "cuda"])
            .output()
            .unwrap();
        assert_eq!(cuda.status.code(), Some(1));
        assert!(
            text(&cuda.stderr).contains("--backend cuda"),
            "{}",
            text(&cuda.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn tessera_gpu_present() -> bool {
    tessera_launch::Gpu::open().is_ok()
}

#[test]
fn runtime_errors_point_at_the_source() {
    let dir = scratch("runtime-error");
    let exe = dir.join("oob");
    let b = tsrc()
        .arg("build")
        .arg(root().join("tests/run/err/E0701_out_of_bounds.tsr"))
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(b.status.success(), "{}", text(&b.stderr));
    let ran = Command::new(&exe).env("NO_COLOR", "1").output().unwrap();
    assert_eq!(ran.status.code(), Some(1));
    let err = text(&ran.stderr);
    assert!(
        err.contains("E0701") && err.contains("E0701_out_of_bounds.tsr:7"),
        "{err}"
    );
    assert_eq!(text(&ran.stdout).matches("tensor<4, fp32>").count(), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Executables read and write `.npy` files relative to where they run,
/// and compare against a reference.
#[test]
fn executables_load_save_and_compare() {
    let dir = scratch("npy");
    let src = dir.join("io.tsr");
    std::fs::write(
        &src,
        "import std.nn;\n\nfn main() {\n    let x = randn<fp32>([4, 8], seed = 7);\n    \
         let y = softmax(x, -1);\n    save_npy(\"y.npy\", y);\n    \
         let back = load_npy<fp32>(\"y.npy\", [4, 8]);\n    print(allclose(back, y));\n    \
         print(allclose(back * 1.001, y));\n    let wrong = load_npy<fp32>(\"y.npy\", [8, 4]);\n}\n",
    )
    .unwrap();
    let exe = dir.join("io");
    let b = tsrc()
        .arg("build")
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(b.status.success(), "{}", text(&b.stderr));
    let work = scratch("npy-work");
    let ran = Command::new(&exe)
        .current_dir(&work)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert_eq!(ran.status.code(), Some(1));
    assert_eq!(text(&ran.stdout), "true\nfalse\n");
    assert!(
        text(&ran.stderr).contains("holds a tensor of shape [4, 8] where [8, 4] was expected"),
        "{}",
        text(&ran.stderr)
    );
    let y = tessera_tensor::read_npy_file(work.join("y.npy")).unwrap();
    assert_eq!(y.tensor.shape, vec![4, 8]);
    let row: f64 = y.tensor.to_f64_vec()[..8].iter().sum();
    assert!((row - 1.0).abs() < 1e-5, "softmax rows sum to 1: {row}");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&work);
}

/// `load_npy` of a value its dtype cannot hold fails the run (E0701), as
/// `--input` does; it saturated (300 as int8 gave 127).
#[test]
fn load_npy_refuses_values_its_dtype_cannot_hold() {
    let dir = scratch("npy-range");
    let src = dir.join("range.tsr");
    std::fs::write(
        &src,
        "fn main() {\n    save_npy(\"big.npy\", full<int32>([3], 300.0));\n    \
         print(load_npy<int16>(\"big.npy\", [3]));\n    \
         print(load_npy<int8>(\"big.npy\", [3]));\n}\n",
    )
    .unwrap();
    let ran = tsrc()
        .arg("run")
        .arg(&src)
        .current_dir(&dir)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert_eq!(ran.status.code(), Some(1));
    assert!(text(&ran.stdout).contains("300"), "{}", text(&ran.stdout));
    let err = text(&ran.stderr);
    assert!(
        err.contains("E0701")
            && err.contains("holds 300 at flat index 0, which `int8` cannot hold"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_builds_are_clear_errors() {
    let dir = scratch("bad");
    let no_main = dir.join("no_main.tsr");
    std::fs::write(
        &no_main,
        "op f(x: tensor<N, fp32>) -> tensor<N, fp32> {\n    return x;\n}\n",
    )
    .unwrap();
    let o = tsrc()
        .arg("build")
        .arg(&no_main)
        .current_dir(&dir)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("no `fn main`"),
        "{}",
        text(&o.stderr)
    );
    assert!(!dir.join("no_main").exists());

    // A `--dim` no op or kernel has is an error naming the ones there are.
    let o = tsrc()
        .arg("build")
        .arg(root().join("examples/matmul.tsr"))
        .args(["--emit", "ptx", "--dim", "ZZ=4"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("its dimensions: M, K, N"),
        "{}",
        text(&o.stderr)
    );

    // An output that is the source itself (a source without `.tsr`, or
    // `-o` naming it) is refused: the source stays as it was.
    let source = std::fs::read(root().join("examples/vec_add.tsr")).unwrap();
    for (file, args) in [
        ("prog", vec![]),
        ("v.tsr", vec!["-o", "v.tsr"]),
        ("w.tsr", vec!["--emit", "ptx", "-o", "./w.tsr"]),
    ] {
        std::fs::write(dir.join(file), &source).unwrap();
        let o = tsrc()
            .arg("build")
            .arg(file)
            .args(&args)
            .current_dir(&dir)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{file}: {}", text(&o.stderr));
        assert!(text(&o.stderr).contains("is the source file itself"));
        assert_eq!(std::fs::read(dir.join(file)).unwrap(), source, "{file}");
    }

    let example = root().join("examples/vec_add.tsr");
    let o = tsrc()
        .arg("build")
        .arg(&example)
        .arg("-o")
        .arg(dir.join("missing/dir/vec_add"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("cannot write"),
        "{}",
        text(&o.stderr)
    );

    let o = tsrc()
        .arg("build")
        .arg(&example)
        .arg("-o")
        .arg(dir.join("vec_add"))
        .env("CC", dir.join("no-such-cc"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("no C compiler"),
        "{}",
        text(&o.stderr)
    );

    // The default output: the file's stem, in the current directory.
    let o = tsrc()
        .arg("build")
        .arg(&example)
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(dir.join("vec_add").is_file());
    let _ = std::fs::remove_dir_all(&dir);
}

/// An executable whose embedded program was changed refuses to run (exit 1,
/// "damaged") instead of computing something else: one byte of the source,
/// or the bundle's length field, changed in the file.
#[test]
fn damaged_executables_refuse_to_run() {
    let dir = scratch("damaged");
    let exe = dir.join("vec_add");
    let b = tsrc()
        .arg("build")
        .arg(root().join("examples/vec_add.tsr"))
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(b.status.success(), "{}", text(&b.stderr));
    let good = std::fs::read(&exe).unwrap();
    let find = |hay: &[u8], needle: &[u8]| -> Vec<usize> {
        (0..hay.len().saturating_sub(needle.len()))
            .filter(|i| &hay[*i..*i + needle.len()] == needle)
            .collect()
    };
    // The embedded source's first comment.
    let at = find(&good, b"Vector addition written at tile level")[0];
    let mut source = good.clone();
    source[at] = b'v';
    // The bundle's header: the magic followed by a plausible length.
    let magic = find(&good, b"TSRPROG2")
        .into_iter()
        .find(|j| {
            let n = u64::from_le_bytes(good[j + 8..j + 16].try_into().unwrap());
            n > 16 && n < good.len() as u64
        })
        .expect("the bundle's header");
    let mut length = good.clone();
    length[magic + 8..magic + 16].copy_from_slice(&(1u64 << 62).to_le_bytes());
    for (what, bytes) in [("source", source), ("length", length)] {
        let bad = dir.join(format!("bad_{what}"));
        std::fs::write(&bad, bytes).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&bad, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let o = Command::new(&bad).output().unwrap();
        assert_eq!(o.status.code(), Some(1), "{what}: {}", text(&o.stderr));
        assert!(
            text(&o.stderr).contains("damaged"),
            "{what}: {}",
            text(&o.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

//! `tsrc run --entry` on command lines that do not fit the program (an
//! entry or input it lacks, an input left out: usage errors, exit 2), on
//! inputs it refuses (a dimension of size 0, E0207: exit 1), and on
//! sizes that decide a symbolic `reshape` (torch's `view(B, T, H, D)` with
//! C = H·D), right at matching sizes and E0201 at the call otherwise;
//! attributes defaulted by expressions; a kernel's `bool` scalars given
//! as inputs; errors written into a closed pipe.

mod support;

use std::path::{Path, PathBuf};
use support::tsrc;
use tessera_tensor::{write_npy_file, Dtype, Tensor};

/// A fresh scratch directory for `name`.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tsrc-entry-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `shape` of ascending fp32 values, written to `dir/name.npy`.
fn npy(dir: &Path, name: &str, shape: &[usize]) -> PathBuf {
    let n: usize = shape.iter().product();
    let values: Vec<f64> = (0..n).map(|i| i as f64).collect();
    let t = Tensor::from_f64(Dtype::Fp32, shape, &values).unwrap();
    let path = dir.join(format!("{name}.npy"));
    write_npy_file(&path, &t).unwrap();
    path
}

/// Runs `entry` of `src` with `inputs`; the exit code and standard error.
fn run(src: &Path, entry: &str, inputs: &[(&str, &Path)], out: &Path) -> (Option<i32>, String) {
    let mut c = tsrc();
    c.arg("run").arg(src).args(["--entry", entry]);
    for (n, p) in inputs {
        c.arg("--input").arg(format!("{n}={}", p.display()));
    }
    let o = c.arg("--output").arg(out).output().unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn usage_errors_and_empty_dimensions() {
    let dir = scratch("usage");
    let src = dir.join("add.tsr");
    std::fs::write(
        &src,
        "op add(x: tensor<N, fp32>, y: tensor<N, fp32>) -> tensor<N, fp32> { return x + y; }\n\
         op am(x: tensor<R, C, fp32>) -> tensor<R, int32> { return argmax(x); }\n\
         kernel cp<B: int = 4>(x: tensor<N, fp32>, out y: tensor<N, fp32>) grid(cdiv(N, B)) {\n\
             let i = program_id(0) * B + arange(0, B);\n\
             store(y, [i], load(x, [i], mask = i < N), mask = i < N);\n\
         }\n",
    )
    .unwrap();
    let x = npy(&dir, "x", &[4]);
    let out = dir.join("out");
    for (entry, inputs, says) in [
        (
            "add",
            vec![("x", x.as_path())],
            "missing input for parameter `y`",
        ),
        (
            "add",
            vec![("x", &x), ("y", &x), ("z", &x)],
            "has no parameter `z`",
        ),
        ("nope", vec![("x", &x)], "no op or kernel named `nope`"),
        ("nope", vec![("x", &x)], "its ops: add, am; its kernels: cp"),
    ] {
        let (code, err) = run(&src, entry, &inputs, &out);
        assert_eq!(code, Some(2), "{entry}: {err}");
        assert!(err.contains(says), "{entry}: {err}");
    }
    let empty = npy(&dir, "empty", &[2, 0]);
    let (code, err) = run(&src, "am", &[("x", &empty)], &out);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("E0207") && err.contains("size 0"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn symbolic_reshape_counts_are_checked_at_the_call() {
    let dir = scratch("reshape");
    let src = dir.join("heads.tsr");
    std::fs::write(
        &src,
        "op split_heads(x: tensor<B, T, C, fp32>, wq: tensor<H, D, fp32>) -> tensor<B, H, T, D, fp32> {\n\
         \x20   return permute(reshape(x, [B, T, H, D]), [0, 2, 1, 3]);\n\
         }\n",
    )
    .unwrap();
    let x = npy(&dir, "x", &[2, 3, 8]);
    for backend in ["cpu", "sim"] {
        let wq = npy(&dir, "wq", &[2, 4]);
        let out = dir.join(backend);
        let mut c = tsrc();
        c.arg("run")
            .arg(&src)
            .args(["--entry", "split_heads", "--backend", backend]);
        c.arg("--input").arg(format!("x={}", x.display()));
        c.arg("--input").arg(format!("wq={}", wq.display()));
        let o = c.arg("--output").arg(&out).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let got = tessera_tensor::read_npy_file(out.join("out.npy"))
            .unwrap()
            .tensor;
        assert_eq!(got.shape, vec![2, 2, 3, 4]);
        // Element [b, h, t, d] is x[b, t, h * 4 + d].
        let v = got.to_f64_vec();
        for (k, g) in v.iter().enumerate() {
            let (b, h, t, d) = (k / 24, k / 12 % 2, k / 4 % 3, k % 4);
            assert_eq!(
                *g,
                ((b * 3 + t) * 8 + h * 4 + d) as f64,
                "{backend}: element {k}"
            );
        }
    }
    let wq = npy(&dir, "wq3", &[3, 4]);
    let (code, err) = run(
        &src,
        "split_heads",
        &[("x", &x), ("wq", &wq)],
        &dir.join("bad"),
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("E0201") && err.contains("reshape of 48 elements"),
        "{err}"
    );
    assert!(err.contains("heads.tsr:2"), "the reshape's line: {err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// An attribute whose default is an expression (`s: int = k`,
/// `scale: float = rsqrt(D)`) is evaluated for an entry as at a call, on
/// the entry's sizes and the attributes before it (a `--const` included);
/// it was "has no default".
#[test]
fn expression_defaults_of_entries() {
    let dir = scratch("defaults");
    let src = dir.join("win.tsr");
    std::fs::write(
        &src,
        "import std.nn;\n\
         op win(x: tensor<B, C, L, fp32>, k: int = 3, s: int = k) { return avg_pool1d(x, k, stride = s); }\n\
         op sc(x: tensor<N, D, fp32>, scale: float = rsqrt(D)) -> tensor<N, D, fp32> { return x * scale; }\n",
    )
    .unwrap();
    let x = npy(&dir, "x", &[1, 1, 10]);
    let read = |p: &Path| {
        tessera_tensor::read_npy_file(p)
            .unwrap()
            .tensor
            .to_f64_vec()
    };
    let out = dir.join("win.npy");
    let (code, err) = run(&src, "win", &[("x", &x)], &out);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(read(&out), vec![1.0, 4.0, 7.0]);
    let o = tsrc()
        .arg("run")
        .arg(&src)
        .args(["--entry", "win", "--const", "k=2", "--input"])
        .arg(format!("x={}", x.display()))
        .arg("--output")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(read(&out), vec![0.5, 2.5, 4.5, 6.5, 8.5]);
    let m = npy(&dir, "m", &[2, 4]);
    let out = dir.join("sc.npy");
    let (code, err) = run(&src, "sc", &[("x", &m)], &out);
    assert_eq!(code, Some(0), "{err}");
    let want: Vec<f64> = (0..8).map(|i| i as f64 * 0.5).collect();
    assert_eq!(read(&out), want);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A kernel's `bool` parameter is a run-time scalar: a 0-d `.npy` gives it
/// (a boolean, or a number, nonzero true), and one with a default may be
/// left out. An op's `bool` stays an attribute.
#[test]
fn kernel_bool_scalars_are_inputs() {
    let dir = scratch("bool");
    let src = dir.join("flag.tsr");
    std::fs::write(
        &src,
        "kernel twice<B: int = 8>(x: tensor<N, fp32>, flag: bool, out y: tensor<N, fp32>) grid(cdiv(N, B)) {\n\
             let i = program_id(0) * B + arange(0, B);\n\
             let mut v = load(x, [i], mask = i < N);\n\
             if flag { v = v * 2.0; }\n\
             store(y, [i], v, mask = i < N);\n\
         }\n\
         kernel half<B: int = 8>(x: tensor<N, fp32>, flag: bool = true, out y: tensor<N, fp32>) grid(cdiv(N, B)) {\n\
             let i = program_id(0) * B + arange(0, B);\n\
             store(y, [i], where(flag, load(x, [i], mask = i < N) / 2.0, 0.0), mask = i < N);\n\
         }\n\
         op neg(x: tensor<N, fp32>, flag: bool) -> tensor<N, fp32> { return where(flag, -x, x); }\n",
    )
    .unwrap();
    let x = npy(&dir, "x", &[5]);
    let read = |p: &Path| {
        tessera_tensor::read_npy_file(p)
            .unwrap()
            .tensor
            .to_f64_vec()
    };
    let out = dir.join("y.npy");
    let xs: Vec<f64> = (0..5).map(f64::from).collect();
    for (dtype, flag, scale) in [
        (Dtype::Bool, 1.0, 2.0),
        (Dtype::Bool, 0.0, 1.0),
        (Dtype::Int32, 3.0, 2.0),
    ] {
        let f = dir.join("flag.npy");
        write_npy_file(&f, &Tensor::scalar(dtype, flag)).unwrap();
        let (code, err) = run(&src, "twice", &[("x", &x), ("flag", &f)], &out);
        assert_eq!(code, Some(0), "{err}");
        let want: Vec<f64> = xs.iter().map(|v| v * scale).collect();
        assert_eq!(read(&out), want, "flag {flag} of {dtype:?}");
    }
    let (code, err) = run(&src, "half", &[("x", &x)], &out);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(read(&out), xs.iter().map(|v| v / 2.0).collect::<Vec<_>>());
    let f = dir.join("flag.npy");
    let (code, err) = run(&src, "neg", &[("x", &x), ("flag", &f)], &out);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("`flag` is an attribute of `neg`"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A run-time error written to a closed pipe (`tsrc run ... 2>&1 | head`)
/// exits 1, as the failed run does; the failed write panicked (101).
#[test]
fn errors_into_a_closed_pipe_exit_1() {
    let dir = scratch("pipe");
    let src = dir.join("oob.tsr");
    std::fs::write(
        &src,
        "fn main() {\n    let x = zeros<fp32>([4]);\n    let ids = full<int32>([2], 9.0);\n    print(x[ids]);\n}\n",
    )
    .unwrap();
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full");
    if let Ok(full) = full {
        let o = tsrc().arg("run").arg(&src).stderr(full).output().unwrap();
        assert_eq!(o.status.code(), Some(1));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

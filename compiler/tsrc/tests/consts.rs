//! `--const NAME=VALUE`: kernel constants and op attributes set from the
//! command line for `tsrc run --entry`, `tsrc run`, `tsrc build --emit
//! ...` and executables.
//! A block size changes the tiling but not the answer, a scale changes the
//! answer, and bad settings are usage errors or diagnostics, never panics.

use std::path::PathBuf;
use std::process::{Command, Output};
use tessera_tensor::{randn, read_npy_file, write_npy_file, Dtype};

const SOURCE: &str = "\
/// y = x * S, B elements per program.
kernel scale<B: int = 64, S: float = 1.0>(x: tensor<N, fp32>, out y: tensor<N, fp32>)
    grid(cdiv(N, B))
{
    let i = program_id(0) * B + arange(0, B);
    store(y, [i], load(x, [i]) * S);
}

/// z = x + K.
kernel shift<K: int = 1>(x: tensor<N, fp32>, out z: tensor<N, fp32>) grid(cdiv(N, 128)) {
    let i = program_id(0) * 128 + arange(0, 128);
    store(z, [i], load(x, [i]) + K);
}

/// x * alpha + beta, the attributes set per run.
op affine(x: tensor<N, fp32>, alpha: float, beta: float = 0.5) -> tensor<N, fp32> {
    return x * alpha + beta;
}

fn main() {
    let x = ones<fp32>([5]);
    print(scale(x));
}
";

fn tsrc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tsrc"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("tessera-consts-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("k.tsr"), SOURCE).unwrap();
        Scratch { dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs entry `scale` of the scratch file on `x.npy` with `consts` on
/// `backend`; returns `out.npy`'s values.
fn run_scale(s: &Scratch, backend: &str, consts: &[&str]) -> Vec<f64> {
    let out = s.dir.join(format!("out-{backend}-{}", consts.join("-")));
    let (file, input) = (s.path("k.tsr"), format!("x={}", s.path("x.npy")));
    let mut args = vec!["run", &file, "--entry", "scale", "--backend", backend];
    args.extend(["--input", &input]);
    for c in consts {
        args.extend(["--const", c]);
    }
    let out_arg = out.display().to_string();
    args.extend(["--output", &out_arg]);
    let o = tsrc(&args);
    assert!(o.status.success(), "{consts:?}: {}", text(&o.stderr));
    read_npy_file(out.join("out.npy"))
        .unwrap()
        .tensor
        .to_f64_vec()
}

/// An entry op's attributes, with a default or without, take their values
/// from `--const`; an attribute left without one says how to set it.
#[test]
fn op_attributes_are_set_for_an_entry() {
    let s = Scratch::new("attrs");
    let x = randn(Dtype::Fp32, &[300], 5).unwrap();
    write_npy_file(s.dir.join("x.npy"), &x).unwrap();
    let (file, input) = (s.path("k.tsr"), format!("x={}", s.path("x.npy")));
    let run = |consts: &[&str]| {
        let out = s.path(&format!("affine-{}.npy", consts.len()));
        let mut args = vec!["run", &file, "--entry", "affine", "--input", &input];
        for c in consts {
            args.extend(["--const", c]);
        }
        args.extend(["--output", &out]);
        (tsrc(&args), out)
    };
    let want = |a: f32, b: f32| -> Vec<f64> {
        x.to_f64_vec()
            .iter()
            .map(|v| f64::from(*v as f32 * a + b))
            .collect()
    };
    for (consts, a, b) in [
        (&["alpha=2.0"][..], 2.0, 0.5),
        (&["affine.alpha=-1", "beta=3"][..], -1.0, 3.0),
    ] {
        let (o, out) = run(consts);
        assert!(o.status.success(), "{consts:?}: {}", text(&o.stderr));
        let got = read_npy_file(&out).unwrap().tensor.to_f64_vec();
        assert_eq!(got, want(a, b), "{consts:?}");
    }
    let (o, _) = run(&[]);
    let err = text(&o.stderr);
    assert!(
        !o.status.success() && err.contains("`--const alpha=VALUE`"),
        "{err}"
    );
}

#[test]
fn constants_change_the_tiling_or_the_answer() {
    let s = Scratch::new("entry");
    let x = randn(Dtype::Fp32, &[1000], 3).unwrap();
    write_npy_file(s.dir.join("x.npy"), &x).unwrap();
    let xs = x.to_f64_vec();
    let scaled = |k: f32| -> Vec<f64> { xs.iter().map(|v| f64::from(*v as f32 * k)).collect() };
    for backend in ["cpu", "sim"] {
        // Block sizes: another grid, the same answer (S = 1 by default).
        for b in ["B=16", "B=100", "B=1024"] {
            assert_eq!(run_scale(&s, backend, &[b]), scaled(1.0), "{backend} {b}");
        }
        // A scale changes the answer; `KERNEL.NAME` names one kernel's.
        assert_eq!(run_scale(&s, backend, &["S=2.5"]), scaled(2.5), "{backend}");
        assert_eq!(
            run_scale(&s, backend, &["scale.S=-3", "scale.B=32"]),
            scaled(-3.0),
            "{backend}"
        );
    }
    // The tiling did change: the schedule's grid follows B.
    let file = s.path("k.tsr");
    let o = tsrc(&["build", &file, "--emit", "schedule", "--const", "B=16"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("grid: [cdiv(N, 16), 1, 1]"));
    let o = tsrc(&["build", &file, "--emit", "graph", "--const", "K=7"]);
    assert!(text(&o.stdout).contains("{K = 7}"), "{}", text(&o.stdout));
}

#[test]
fn constants_reach_fn_main_and_executables() {
    let s = Scratch::new("main");
    let file = s.path("k.tsr");
    let o = tsrc(&["run", &file, "--backend", "cpu", "--const", "S=4"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("[4.0000, 4.0000"),
        "{}",
        text(&o.stdout)
    );
    // The executable carries the source with the value set: it re-checks
    // and runs it with S = 4 too.
    let exe = s.path("k");
    let b = tsrc(&["build", &file, "-o", &exe, "--const", "S=4"]);
    assert!(b.status.success(), "{}", text(&b.stderr));
    let r = Command::new(&exe)
        .args(["--backend", "cpu"])
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", text(&r.stderr));
    assert_eq!(text(&r.stdout), text(&o.stdout));
}

#[test]
fn bad_settings_are_clear_errors() {
    let s = Scratch::new("errors");
    let file = s.path("k.tsr");
    let expect = |args: &[&str], code: i32, says: &[&str]| {
        let o = tsrc(args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
        for s in says {
            assert!(err.contains(s), "{args:?}: {err}");
        }
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    };
    // Usage errors (exit 2): the constants there are, the kind wanted.
    expect(
        &["build", &file, "--emit", "graph", "--const", "BLOCK=8"],
        2,
        &[
            "no kernel or op of this file has a constant or attribute `BLOCK`",
            "scale.B, scale.S, shift.K",
        ],
    );
    expect(&["run", &file, "--const", "shift.B=8"], 2, &["in `shift`"]);
    expect(
        &["run", &file, "--const", "B=1.5"],
        2,
        &["`int` constant", "not a 64-bit integer"],
    );
    expect(&["run", &file, "--const", "S=fast"], 2, &["finite number"]);
    expect(&["run", &file, "--const", "B"], 2, &["NAME=VALUE"]);
    expect(
        &["run", &file, "--const", "B=8", "--const", "scale.B=16"],
        2,
        &["set twice"],
    );
    // Values the kernel rejects: diagnostics with codes (exit 1), and a
    // note that the source shown has the value set.
    for backend in ["cpu", "sim"] {
        expect(
            &["run", &file, "--backend", backend, "--const", "B=0"],
            1,
            &["E0214", "E0604", "`--const B=0`"],
        );
        expect(
            &[
                "run",
                &file,
                "--backend",
                backend,
                "--const",
                "B=9223372036854775807",
            ],
            1,
            &["E0604", "at most 65536"],
        );
    }
    expect(
        &["build", &file, "--emit", "ptx", "--const", "B=-8"],
        1,
        &["E0214"],
    );
}

#[test]
fn an_unreadable_file_is_left_to_the_compiler() {
    let s = Scratch::new("bad");
    let file = s.dir.join("bad.tsr");
    std::fs::write(&file, b"kernel k<B: int = \xff>() {}").unwrap();
    let o = tsrc(&["check", &file.display().to_string()]);
    assert_eq!(o.status.code(), Some(1));
    let o = tsrc(&["run", &file.display().to_string(), "--const", "B=1"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("E0001"), "{}", text(&o.stderr));
}

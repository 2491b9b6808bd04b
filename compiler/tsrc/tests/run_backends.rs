//! `tsrc run --entry` on every backend this machine has: the simulator
//! (always) agrees with the CPU backend on the same `.npy` inputs, and a
//! bad backend request is a clear error.

mod support;

use std::path::{Path, PathBuf};
use support::{example, run, run_into, run_path, tsrc};
use tessera_tensor::{randn, read_npy_file, write_npy_file, Dtype};

#[test]
fn the_simulator_agrees_with_the_cpu() {
    let dir = std::env::temp_dir().join(format!("tessera-run-backends-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let a = dir.join("a.npy");
    let b = dir.join("b.npy");
    write_npy_file(&a, &randn(Dtype::Bf16, &[37, 50], 1).unwrap()).unwrap();
    write_npy_file(&b, &randn(Dtype::Bf16, &[50, 29], 2).unwrap()).unwrap();
    let inputs = [("a", a), ("b", b)];
    let cpu = run(&dir, "matmul.tsr", "gemm", &inputs, "cpu");
    let sim = run(&dir, "matmul.tsr", "gemm", &inputs, "sim");
    assert_eq!(cpu.len(), 37 * 29);
    let scale = cpu.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let err = cpu
        .iter()
        .zip(&sim)
        .fold(0.0f64, |m, (x, y)| m.max((x - y).abs()))
        / scale;
    // Both round to bf16; their accumulation orders differ.
    assert!(err < 1e-2, "relative difference {err}");
    // A user kernel (masked at its ragged end): fp32 adds agree exactly.
    let x = dir.join("x.npy");
    let y = dir.join("y.npy");
    write_npy_file(&x, &randn(Dtype::Fp32, &[3001], 3).unwrap()).unwrap();
    write_npy_file(&y, &randn(Dtype::Fp32, &[3001], 4).unwrap()).unwrap();
    let inputs = [("a", x), ("b", y)];
    let cpu = run(&dir, "vec_add.tsr", "vec_add", &inputs, "cpu");
    let sim = run(&dir, "vec_add.tsr", "vec_add", &inputs, "sim");
    assert_eq!(cpu.len(), 3001);
    assert_eq!(cpu, sim);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--arch` chooses the target the simulator's kernels are compiled for:
/// the schedule written for it applies (`on sm_90` also to `sm_90a`), and
/// the CPU backend, which has no target, refuses it.
#[test]
fn run_arch_chooses_the_target() {
    let profile = |arch: &str| {
        let o = tsrc()
            .args(["run"])
            .arg(example("matmul.tsr"))
            .args(["--backend", "sim", "--profile", "--arch", arch])
            .env(
                "TESSERA_CACHE_DIR",
                std::env::temp_dir().join("tessera-run-arch"),
            )
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let sm80 = profile("sm_80");
    assert!(
        sm80.contains("on sim (sm_80") && sm80.contains("schedule gemm on sm_80"),
        "{sm80}"
    );
    let sm90a = profile("sm_90a");
    assert!(
        sm90a.contains("on sim (sm_90a") && sm90a.contains("schedule gemm on sm_90"),
        "{sm90a}"
    );
    let o = tsrc()
        .args(["run"])
        .arg(example("matmul.tsr"))
        .args(["--backend", "cpu", "--arch", "sm_80"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--backend sim"));
    let o = tsrc()
        .args(["run"])
        .arg(example("matmul.tsr"))
        .args(["--backend", "sim", "--arch", "sm_91"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown architecture"));
}

/// `run_path` on the simulator with `--arch`.
fn run_arch(dir: &Path, file: &Path, op: &str, inputs: &[(&str, PathBuf)], arch: &str) -> Vec<f64> {
    let out = dir.join(arch);
    std::fs::create_dir_all(&out).unwrap();
    let mut c = tsrc();
    // Two simulated SMs: a persistent kernel's two blocks each run several
    // programs.
    c.env("TESSERA_SIM_SMS", "2");
    c.args(["run"])
        .arg(file)
        .args(["--entry", op, "--backend", "sim", "--arch", arch]);
    for (name, path) in inputs {
        c.arg("--input").arg(format!("{name}={}", path.display()));
    }
    let o = c.arg("--output").arg(&out).output().unwrap();
    assert!(
        o.status.success(),
        "{} on sim {arch}: {}",
        file.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    read_npy_file(out.join("out.npy"))
        .unwrap()
        .tensor
        .to_f64_vec()
}

/// The largest difference of `x` from `want`, relative to `want`'s
/// largest magnitude.
fn rel_err(want: &[f64], x: &[f64]) -> f64 {
    assert_eq!(want.len(), x.len());
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    want.iter()
        .zip(x)
        .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()))
        / scale
}

/// Hopper's warpgroup path (`--arch sm_90a`: wgmma reading swizzled tiles
/// and panels through descriptors, warp-specialised where the TMA copies
/// every tile) agrees with the CPU on whole and ragged GEMMs with every
/// swizzle width (rows of K of 16, 32 and 64 bf16), one and two
/// warpgroups, and on attention.
#[test]
fn sm_90a_wgmma_agrees_with_the_cpu() {
    let dir = std::env::temp_dir().join(format!("tessera-run-wgmma-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let source = std::fs::read_to_string(example("matmul.tsr")).unwrap();
    let schedules = [
        (128, 128, 64, 8),
        (64, 64, 32, 4),
        (64, 128, 16, 4),
        (128, 256, 64, 8),
    ];
    for (s, (bm, bn, bk, warps)) in schedules.into_iter().enumerate() {
        let file = dir.join(format!("gemm{s}.tsr"));
        let text = source.replace(
            "schedule gemm on sm_90 {\n    tile(bm = 128, bn = 128, bk = 64);\n    warps(8);",
            &format!("schedule gemm on sm_90a {{\n    tile(bm = {bm}, bn = {bn}, bk = {bk});\n    warps({warps});"),
        );
        assert_ne!(text, source);
        std::fs::write(&file, text).unwrap();
        // The product runs on wgmma.
        let ptx = tsrc()
            .args(["build"])
            .arg(&file)
            .args([
                "--emit", "ptx", "--arch", "sm_90a", "--dim", "M=64", "--dim", "N=64", "--dim",
                "K=64",
            ])
            .output()
            .unwrap();
        assert!(
            String::from_utf8_lossy(&ptx.stdout).contains("wgmma.mma_async"),
            "schedule {s}"
        );
        // Whole tiles; ragged ones whose rows the TMA can copy (352 and 400
        // bytes: warp-specialised, out-of-bounds boxes zero-filled); and
        // ragged 340-byte rows, which only cp.async copies.
        let shapes = [(128, 128, 256), (300, 176, 200), (300, 170, 200)];
        for (i, (m, k, n)) in shapes.into_iter().enumerate() {
            let a = dir.join(format!("a{i}.npy"));
            let b = dir.join(format!("b{i}.npy"));
            write_npy_file(&a, &randn(Dtype::Bf16, &[m, k], 10 + i as u64).unwrap()).unwrap();
            write_npy_file(&b, &randn(Dtype::Bf16, &[k, n], 20 + i as u64).unwrap()).unwrap();
            let inputs = [("a", a), ("b", b)];
            let cpu = run(&dir, "matmul.tsr", "gemm", &inputs, "cpu");
            let sim = run_arch(&dir, &file, "gemm", &inputs, "sm_90a");
            let err = rel_err(&cpu, &sim);
            assert!(
                err < 1e-2,
                "schedule {s}, gemm {m}x{k}x{n}: relative difference {err}"
            );
        }
    }
    let shape = [1, 2, 80, 64];
    let qkv: Vec<(&str, PathBuf)> = ["q", "k", "v"]
        .into_iter()
        .enumerate()
        .map(|(i, name)| {
            let p = dir.join(format!("{name}.npy"));
            write_npy_file(&p, &randn(Dtype::Bf16, &shape, 30 + i as u64).unwrap()).unwrap();
            (name, p)
        })
        .collect();
    let cpu = run(&dir, "flash_attn.tsr", "attention", &qkv, "cpu");
    let sim = run_arch(
        &dir,
        &example("flash_attn.tsr"),
        "attention",
        &qkv,
        "sm_90a",
    );
    let err = rel_err(&cpu, &sim);
    assert!(err < 2e-2, "attention: relative difference {err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Warp specialisation changes who issues the copies, not what is
/// computed: with the schedule's `warp_specialize(false)` the sm_90a GEMM
/// (ragged, TMA-staged) and attention lose their producer warpgroup and
/// give the same bits.
#[test]
fn warp_specialisation_changes_no_bits() {
    let dir = std::env::temp_dir().join(format!("tessera-run-ws-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let single_role = |name: &str| {
        let source = std::fs::read_to_string(example(name)).unwrap();
        let text = source.replacen("warps(8);", "warps(8);\n    warp_specialize(false);", 1);
        assert_ne!(text, source, "{name}");
        let file = dir.join(name);
        std::fs::write(&file, text).unwrap();
        file
    };
    let ptx = |file: &Path| {
        let o = tsrc()
            .args(["build"])
            .arg(file)
            .args(["--emit", "ptx", "--arch", "sm_90a"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let mut inputs = Vec::new();
    for (name, shape, seed) in [("a", [300, 176], 1), ("b", [176, 200], 2)] {
        let p = dir.join(format!("{name}.npy"));
        write_npy_file(&p, &randn(Dtype::Bf16, &shape, seed).unwrap()).unwrap();
        inputs.push((name, p));
    }
    let gemm = single_role("matmul.tsr");
    assert!(ptx(&example("matmul.tsr")).contains("setmaxnreg"));
    assert!(!ptx(&gemm).contains("setmaxnreg"));
    let specialised = run_arch(&dir, &example("matmul.tsr"), "gemm", &inputs, "sm_90a");
    let single = run_arch(&dir, &gemm, "gemm", &inputs, "sm_90a");
    assert_eq!(specialised, single, "gemm");
    let qkv: Vec<(&str, PathBuf)> = ["q", "k", "v"]
        .into_iter()
        .enumerate()
        .map(|(i, name)| {
            let p = dir.join(format!("{name}.npy"));
            let t = randn(Dtype::Bf16, &[1, 2, 80, 64], 40 + i as u64).unwrap();
            write_npy_file(&p, &t).unwrap();
            (name, p)
        })
        .collect();
    let attention = single_role("flash_attn.tsr");
    assert!(!ptx(&attention).contains("setmaxnreg"));
    let specialised = run_arch(
        &dir,
        &example("flash_attn.tsr"),
        "attention",
        &qkv,
        "sm_90a",
    );
    let single = run_arch(&dir, &attention, "attention", &qkv, "sm_90a");
    assert_eq!(specialised, single, "attention");
    let _ = std::fs::remove_dir_all(&dir);
}

/// fp8 products on Hopper's warpgroup MMA: `x @ w.T` with `w` stored
/// `[N, K]` reads both operands K-major, as fp8 wgmma requires, and runs
/// on `wgmma ... k32.f32.e4m3.e4m3` (warp-specialised, TMA-staged) under
/// a bf16 accumulator; with `accumulate = fp32` (wgmma's 14-bit fp8 sums
/// fall short of it) and with `w` stored `[K, N]` the product stays on
/// mma.sync. The simulator's results are the CPU's: to fp32 summation
/// error with an fp32 accumulator, to the bf16 rounding of tile sums taken
/// in another order with a bf16 one; for whole and ragged tiles.
#[test]
fn fp8_wgmma_agrees_with_the_cpu() {
    let dir = std::env::temp_dir().join(format!("tessera-run-fp8wg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("qmm.tsr");
    std::fs::write(
        &file,
        "numerics aggressive, accumulate = fp32;\n\
         op qmm(x: tensor<M, K, fp8_e4m3>, w: tensor<N, K, fp8_e4m3>) -> tensor<M, N, fp32> {\n\
         \x20   return x @ w.T;\n}\n\
         op qmm_bf16acc(x: tensor<M, K, fp8_e4m3>, w: tensor<N, K, fp8_e4m3>) -> tensor<M, N, fp32> {\n\
         \x20   numerics aggressive;\n\
         \x20   return x @ w.T;\n}\n\
         op qmm_kn(x: tensor<M, K, fp8_e5m2>, w: tensor<K, N, fp8_e5m2>) -> tensor<M, N, fp32> {\n\
         \x20   numerics aggressive;\n\
         \x20   return x @ w;\n}\n",
    )
    .unwrap();
    let o = tsrc()
        .args(["build"])
        .arg(&file)
        .args(["--emit", "ptx", "--arch", "sm_90a"])
        .args(["--dim", "M=256", "--dim", "N=256", "--dim", "K=512"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let ptx = String::from_utf8_lossy(&o.stdout).into_owned();
    // The Schedule IR reports the same paths.
    let o = tsrc()
        .args(["build"])
        .arg(&file)
        .args(["--emit", "schedule", "--arch", "sm_90a"])
        .output()
        .unwrap();
    let schedule = String::from_utf8_lossy(&o.stdout).into_owned();
    let (s_exact, rest) = schedule.split_once("schedule qmm_bf16acc").unwrap();
    let (s_bf16, s_kn) = rest.split_once("schedule qmm_kn").unwrap();
    assert!(s_exact.contains("tensor_cores = mma.sync"), "{schedule}");
    assert!(s_bf16.contains("tensor_cores = wgmma"), "{schedule}");
    assert!(s_kn.contains("tensor_cores = mma.sync"), "{schedule}");
    let (exact, rest) = ptx.split_once(".entry qmm_bf16acc").unwrap();
    let (bf16, kn) = rest.split_once(".entry qmm_kn").unwrap();
    assert!(!exact.contains("wgmma.mma_async") && exact.contains("m16n8k32.row.col.f32.e4m3"));
    assert!(bf16.contains("k32.f32.e4m3.e4m3"), "{bf16}");
    assert!(bf16.contains("setmaxnreg"));
    assert!(!kn.contains("wgmma.mma_async") && kn.contains("mma.sync.aligned.m16n8k32"));
    for (i, (m, k, n)) in [(256, 512, 256), (200, 320, 136)].into_iter().enumerate() {
        let x = dir.join(format!("x{i}.npy"));
        let w = dir.join(format!("w{i}.npy"));
        write_npy_file(&x, &randn(Dtype::Fp32, &[m, k], 50 + i as u64).unwrap()).unwrap();
        write_npy_file(&w, &randn(Dtype::Fp32, &[n, k], 60 + i as u64).unwrap()).unwrap();
        let inputs = [("x", x), ("w", w)];
        // Two bf16 ulps at the largest magnitude for the bf16 accumulator.
        for (op, bound) in [("qmm", 1e-5), ("qmm_bf16acc", 8e-3)] {
            let cpu = run_path(&dir, &file, op, &inputs, "cpu");
            let sim = run_arch(&dir, &file, op, &inputs, "sm_90a");
            let err = rel_err(&cpu, &sim);
            assert!(err < bound, "{op} {m}x{k}x{n}: relative difference {err}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// fp32 division and square root are correctly rounded on the GPU path
/// as on the CPU, bit for bit, with no subroutine calls: ordinary values,
/// subnormal and huge operands and quotients, zeros, infinities and NaN.
#[test]
fn division_and_sqrt_are_correctly_rounded_everywhere() {
    use tessera_tensor::Tensor;
    let dir = std::env::temp_dir().join(format!("tessera-run-div-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("div.tsr");
    std::fs::write(
        &file,
        "op quot(a: tensor<N, fp32>, b: tensor<N, fp32>) -> tensor<N, fp32> { return a / b; }\n\
         op root(a: tensor<N, fp32>) -> tensor<N, fp32> { return sqrt(a); }\n",
    )
    .unwrap();
    let mut xs: Vec<f32> = vec![
        1.0,
        3.0,
        -7.0,
        0.1,
        1e-40,
        -3e-39,
        1e-45,
        3e38,
        -2e38,
        1e30,
        1e-30,
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::MIN_POSITIVE,
        f32::MAX,
    ];
    // Pseudo-random values over the whole exponent range.
    let mut seed = 0x2545_f491_u32;
    while xs.len() < 512 {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        let x = f32::from_bits(seed);
        if x.is_finite() {
            xs.push(x);
        }
    }
    let n = xs.len();
    let ys: Vec<f32> = (0..n).map(|i| xs[(i * 7 + 3) % n]).collect();
    let save = |name: &str, v: &[f32]| {
        let p = dir.join(name);
        let vals: Vec<f64> = v.iter().map(|x| f64::from(*x)).collect();
        write_npy_file(&p, &Tensor::from_f64(Dtype::Fp32, &[n], &vals).unwrap()).unwrap();
        p
    };
    let (a, b) = (save("a.npy", &xs), save("b.npy", &ys));
    let bits = |v: Vec<f64>| -> Vec<u32> {
        v.into_iter()
            .map(|x| {
                let x = x as f32;
                if x.is_nan() {
                    u32::MAX
                } else {
                    x.to_bits()
                }
            })
            .collect()
    };
    let inputs = [("a", a.clone()), ("b", b)];
    let cpu = bits(run_path(&dir, &file, "quot", &inputs, "cpu"));
    let sim = bits(run_path(&dir, &file, "quot", &inputs, "sim"));
    let want: Vec<f64> = xs.iter().zip(&ys).map(|(x, y)| f64::from(x / y)).collect();
    assert_eq!(cpu, bits(want));
    for i in 0..n {
        assert_eq!(sim[i], cpu[i], "{:e} / {:e}", xs[i], ys[i]);
    }
    let inputs = [("a", a)];
    let cpu = bits(run_path(&dir, &file, "root", &inputs, "cpu"));
    let sim = bits(run_path(&dir, &file, "root", &inputs, "sim"));
    for i in 0..n {
        assert_eq!(sim[i], cpu[i], "sqrt({:e})", xs[i]);
        let want = xs[i].sqrt();
        assert!(cpu[i] == want.to_bits() || (want.is_nan() && cpu[i] == u32::MAX));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unknown_backend_is_a_usage_error() {
    let o = tsrc()
        .args(["run"])
        .arg(example("matmul.tsr"))
        .args(["--backend", "tpu"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("sim"));
}

/// The PTX points back at the source (`.file` and `.loc`), which is how
/// simulator errors name the `.tsr` line (the simulator's own tests prove
/// the error side with hand-written PTX).
#[test]
fn kernels_carry_their_source_position() {
    let o = tsrc()
        .args(["build"])
        .arg(example("softmax.tsr"))
        .args(["--emit", "ptx"])
        .output()
        .unwrap();
    assert!(o.status.success());
    let ptx = String::from_utf8_lossy(&o.stdout);
    let file = ptx
        .lines()
        .find(|l| l.starts_with(".file 1 "))
        .expect("a .file line");
    assert!(file.ends_with("softmax.tsr\""), "{file}");
    // softmax(x, axis = -1) is on line 7 of the example.
    assert!(ptx.contains("\t.loc 1 7 "), "{ptx}");
}

/// Inside a user kernel, the PTX's `.loc`s follow the source expressions
/// the code computes, and recording them changes no instruction: the
/// PTX without them is the PTX of the same kernel read without spans.
#[test]
fn kernel_code_carries_its_expression_positions() {
    let file =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/run/ok/flash_attn_tiles.tsr");
    let o = tsrc()
        .args(["build"])
        .arg(&file)
        .args(["--emit", "ptx", "--arch", "sm_80"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let ptx = String::from_utf8_lossy(&o.stdout);
    let mut lines: Vec<u32> = ptx
        .lines()
        .filter_map(|l| l.trim().strip_prefix(".loc 1 "))
        .filter_map(|l| l.split(' ').next()?.parse().ok())
        .collect();
    lines.sort_unstable();
    lines.dedup();
    assert!(lines.len() >= 10, "positions on many lines: {lines:?}");
}

/// A reduction with `keepdims = true` inside a kernel keeps the reduced
/// axis (of extent 1), so `t - max(t, axis = 1, keepdims = true)`
/// subtracts each row's maximum from that row on every backend (it used
/// to broadcast the maxima along the other axis).
#[test]
fn keepdims_in_kernels_keeps_the_axis() {
    let dir = std::env::temp_dir().join(format!("tessera-keepdims-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("center.tsr");
    std::fs::write(
        &src,
        "kernel center<BM: int = 8, BN: int = 8>(x: tensor<R, C, fp32>, out y: tensor<R, C, fp32>)
             grid(cdiv(R, BM))
         {
             let rows = program_id(0) * BM + arange(0, BM);
             let cols = arange(0, BN);
             let t = load(x, [rows, cols]);
             store(y, [rows, cols], t - max(t, axis = 1, keepdims = true));
         }",
    )
    .unwrap();
    let x = dir.join("x.npy");
    let data = randn(Dtype::Fp32, &[16, 8], 5).unwrap();
    write_npy_file(&x, &data).unwrap();
    let xs = data.to_f64_vec();
    let want: Vec<f64> = xs
        .chunks(8)
        .flat_map(|row| {
            let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            row.iter().map(move |v| f64::from(*v as f32 - m as f32))
        })
        .collect();
    for backend in ["cpu", "sim"] {
        let got = run_path(&dir, &src, "center", &[("x", x.clone())], backend);
        assert_eq!(got, want, "{backend}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--entry`'s arguments: `--output r.npy` writes that file (not a
/// directory of that name), an input given twice or without `--entry` is
/// a usage error, and a NaN bound for an integer parameter is an error
/// rather than a silent 0.
#[test]
fn entry_arguments_are_checked() {
    let dir = std::env::temp_dir().join(format!("tessera-entry-args-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b) = (dir.join("a.npy"), dir.join("b.npy"));
    write_npy_file(&a, &randn(Dtype::Fp32, &[10], 1).unwrap()).unwrap();
    write_npy_file(&b, &randn(Dtype::Fp32, &[10], 2).unwrap()).unwrap();
    let vec_add = example("vec_add.tsr");
    let input = |n: &str, p: &Path| format!("{n}={}", p.display());
    let r = dir.join("r.npy");
    let o = tsrc()
        .arg("run")
        .arg(&vec_add)
        .args(["--entry", "vec_add", "--backend", "cpu", "--input"])
        .arg(input("a", &a))
        .arg("--input")
        .arg(input("b", &b))
        .arg("--output")
        .arg(&r)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(r.is_file(), "--output r.npy is not a file");
    assert_eq!(read_npy_file(&r).unwrap().tensor.shape, vec![10]);

    let twice = tsrc()
        .arg("run")
        .arg(&vec_add)
        .args(["--entry", "vec_add", "--input"])
        .arg(input("a", &a))
        .arg("--input")
        .arg(input("a", &b))
        .output()
        .unwrap();
    assert_eq!(twice.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&twice.stderr).contains("given twice"));

    let no_entry = tsrc()
        .arg("run")
        .arg(&vec_add)
        .arg("--input")
        .arg(input("a", &a))
        .output()
        .unwrap();
    assert_eq!(no_entry.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&no_entry.stderr).contains("needs `--entry"));

    let src = dir.join("ints.tsr");
    std::fs::write(
        &src,
        "op f(x: tensor<N, int32>) -> tensor<N, int32> {\n    return x;\n}\n",
    )
    .unwrap();
    let nan = dir.join("nan.npy");
    let mut t = randn(Dtype::Fp32, &[2], 3).unwrap();
    t.set_f64(1, f64::NAN).unwrap();
    write_npy_file(&nan, &t).unwrap();
    let o = tsrc()
        .arg("run")
        .arg(&src)
        .args(["--entry", "f", "--input"])
        .arg(input("x", &nan))
        .arg("--output")
        .arg(dir.join("ints"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("holds NaN"));
    // Values an int32 parameter cannot hold are refused, not truncated or
    // saturated; integers it can hold convert (numpy's default int64).
    let run_ints = |t: &tessera_tensor::Tensor| {
        let p = dir.join("x.npy");
        write_npy_file(&p, t).unwrap();
        tsrc()
            .arg("run")
            .arg(&src)
            .args(["--entry", "f", "--backend", "cpu", "--input"])
            .arg(input("x", &p))
            .arg("--output")
            .arg(dir.join("ints.npy"))
            .output()
            .unwrap()
    };
    let of = |d: Dtype, v: &[f64]| tessera_tensor::Tensor::from_f64(d, &[v.len()], v).unwrap();
    for (t, why) in [
        (of(Dtype::Fp32, &[1.0, 2.5]), "2.5 at flat index 1"),
        (
            of(Dtype::Int64, &[3.0, 2147483653.0]),
            "outside -2147483648..=2147483647",
        ),
    ] {
        let o = run_ints(&t);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains(why), "{err}");
    }
    let o = run_ints(&of(Dtype::Int64, &[3.0, -7.0]));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got = read_npy_file(&dir.join("ints.npy")).unwrap().tensor;
    assert_eq!(got.to_f64_vec(), vec![3.0, -7.0]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A float parameter rounds a wider float input (fp64 to fp32), but a
/// finite value past its range is refused, not turned into infinity.
#[test]
fn float_inputs_past_the_range_are_refused() {
    let dir = std::env::temp_dir().join(format!("tessera-entry-f64-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("f.tsr");
    std::fs::write(
        &src,
        "op f(x: tensor<N, fp32>) -> tensor<N, fp32> { return x * 2.0; }",
    )
    .unwrap();
    let run = |v: &[f64]| {
        let p = dir.join("x.npy");
        let t = tessera_tensor::Tensor::from_f64(Dtype::Fp64, &[v.len()], v).unwrap();
        write_npy_file(&p, &t).unwrap();
        tsrc()
            .arg("run")
            .arg(&src)
            .args(["--entry", "f", "--backend", "cpu", "--input"])
            .arg(format!("x={}", p.display()))
            .arg("--output")
            .arg(dir.join("y.npy"))
            .output()
            .unwrap()
    };
    let o = run(&[1.0, 1e300]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("holds 1e300 at flat index 1, beyond the range of `fp32`"),
        "{err}"
    );
    let o = run(&[0.1, -3.0, f64::INFINITY]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got = read_npy_file(&dir.join("y.npy"))
        .unwrap()
        .tensor
        .to_f64_vec();
    assert_eq!(got, vec![f64::from(0.1f32) * 2.0, -6.0, f64::INFINITY]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Integer division by zero inside a kernel is an error on every backend
/// (the CPU backend checks, the PTX traps), never a backend-specific value.
#[test]
fn integer_division_by_zero_in_a_kernel_is_an_error_everywhere() {
    let dir = std::env::temp_dir().join(format!("tessera-div0-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("div.tsr");
    std::fs::write(
        &src,
        "kernel quot<B: int = 64>(a: tensor<N, int32>, b: tensor<N, int32>, out q: tensor<N, int32>)
             grid(cdiv(N, B))
         {
             let i = program_id(0) * B + arange(0, B);
             store(q, [i], load(a, [i]) / load(b, [i], other = 1));
         }",
    )
    .unwrap();
    let (a, b) = (dir.join("a.npy"), dir.join("b.npy"));
    let ints = |v: Vec<f64>| {
        let mut t = randn(Dtype::Int32, &[v.len()], 1).unwrap();
        for (i, x) in v.into_iter().enumerate() {
            t.set_f64(i, x).unwrap();
        }
        t
    };
    write_npy_file(&a, &ints((1000..1100).map(f64::from).collect())).unwrap();
    let mut divisors: Vec<f64> = (1..=100).map(f64::from).collect();
    for backend in ["cpu", "sim"] {
        // Without a zero: the quotients.
        write_npy_file(&b, &ints(divisors.clone())).unwrap();
        let q = run_path(
            &dir,
            &src,
            "quot",
            &[("a", a.clone()), ("b", b.clone())],
            backend,
        );
        assert_eq!((q[0], q[9], q[99]), (1000.0, 100.0, 10.0), "{backend}");
        // With one: an error, on either backend.
        divisors[57] = 0.0;
        write_npy_file(&b, &ints(divisors.clone())).unwrap();
        let o = tsrc()
            .arg("run")
            .arg(&src)
            .args(["--entry", "quot", "--backend", backend, "--input"])
            .arg(format!("a={}", a.display()))
            .arg("--input")
            .arg(format!("b={}", b.display()))
            .arg("--output")
            .arg(dir.join("out"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{backend}: {err}");
        assert!(err.contains("by zero"), "{backend}: {err}");
        assert!(
            !err.contains("out of range"),
            "{backend}: one cause, not two: {err}"
        );
        // At the division itself (line 5, column 28), on either backend:
        // the CPU backend from the Tile IR instruction's span, the
        // simulator from the trap's `.loc`.
        assert!(
            err.contains("div.tsr:5:28") && err.contains("this failed"),
            "{backend}: {err}"
        );
        divisors[57] = 58.0;
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A kernel loop's step known only at run time is checked before the
/// loop: zero fails the run at the step on every backend, instead of
/// looping forever (the simulator would stop it as an endless loop), and
/// says that the step is what failed (the simulator reads it from the
/// comment before the trap).
#[test]
fn a_zero_run_time_loop_step_fails_at_the_step() {
    let file =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/run/err/E0701_loop_step_zero.tsr");
    for backend in ["cpu", "sim"] {
        let o = tsrc()
            .arg("run")
            .arg(&file)
            .args(["--backend", backend])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{backend}: {err}");
        assert!(
            err.contains("E0701_loop_step_zero.tsr:5:24")
                && err.contains("step is not positive")
                && !err.contains("index read"),
            "{backend}: {err}"
        );
    }
}

/// Integer division and remainder of index values that the facts bound
/// (shifts and masks for powers of two, 32-bit division for small values,
/// the rounding adjustment for negative dividends) truncate as the CPU
/// does, on both sides of zero.
#[test]
fn index_division_truncates_on_every_backend() {
    let dir = std::env::temp_dir().join(format!("tessera-idxdiv-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("idx.tsr");
    std::fs::write(
        &src,
        "kernel idx<B: int = 128>(x: tensor<N, int64>, out q: tensor<N, int64>)
             grid(cdiv(N, B))
         {
             let j = program_id(0) * B + arange(0, B);
             let s = (j as int64) - 700;
             let t = j - 1000;
             let v = (s / 8) * 100000000 + (s % 8) * 1000000 + (s / 7) * 10000
                 + (s % 7) * 1000 + ((t / 16) as int64) * 10 + ((t % 16) as int64) + ((j as int64) / 3) * 7;
             store(q, [j], load(x, [j]) + v, mask = j < N);
         }",
    )
    .unwrap();
    let n = 2000usize;
    let x = dir.join("x.npy");
    write_npy_file(
        &x,
        &tessera_tensor::Tensor::from_f64(Dtype::Int64, &[n], &vec![0.0; n]).unwrap(),
    )
    .unwrap();
    let want: Vec<f64> = (0..n as i64)
        .map(|j| {
            let (s, t) = (j - 700, j - 1000);
            ((s / 8) * 100000000
                + (s % 8) * 1000000
                + (s / 7) * 10000
                + (s % 7) * 1000
                + (t / 16) * 10
                + t % 16
                + (j / 3) * 7) as f64
        })
        .collect();
    for backend in ["cpu", "sim"] {
        let got = run_path(&dir, &src, "idx", &[("x", x.clone())], backend);
        for j in 0..n {
            assert_eq!(got[j], want[j], "{backend}: element {j}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Integer division of tensors in an op divides only the elements that
/// exist: the lanes of the last tile past the tensor's end (whose loads
/// read 0) do not trap, on any length; a zero in the data still does.
#[test]
fn integer_division_of_tensors_traps_only_on_a_real_zero() {
    let dir = std::env::temp_dir().join(format!("tessera-intdiv-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("div.tsr");
    std::fs::write(
        &src,
        "op qr(x: tensor<N, int32>, y: tensor<N, int32>) -> tensor<N, int32> {
             return (x / y) * 1000 + x % y;
         }
         op rows(x: tensor<M, N, int32>, y: tensor<N, int32>) -> tensor<M, N, int32> {
             return x / y - max(x % y, axis = 1, keepdims = true);
         }",
    )
    .unwrap();
    let tensor = |name: &str, dims: &[usize], v: &[f64]| {
        let p = dir.join(name);
        let t = tessera_tensor::Tensor::from_f64(Dtype::Int32, dims, v).unwrap();
        write_npy_file(&p, &t).unwrap();
        p
    };
    for n in [11usize, 1000] {
        let xs: Vec<f64> = (0..n as i64).map(|i| (i * 37 % 201 - 100) as f64).collect();
        let ys: Vec<f64> = (0..n as i64)
            .map(|i| [3, -7, 16, 1, -2][i as usize % 5] as f64)
            .collect();
        let (x, y) = (tensor("x.npy", &[n], &xs), tensor("y.npy", &[n], &ys));
        let want: Vec<f64> = xs
            .iter()
            .zip(&ys)
            .map(|(a, b)| {
                let (a, b) = (*a as i64, *b as i64);
                ((a / b) * 1000 + a % b) as f64
            })
            .collect();
        for backend in ["cpu", "sim"] {
            let got = run_path(
                &dir,
                &src,
                "qr",
                &[("x", x.clone()), ("y", y.clone())],
                backend,
            );
            assert_eq!(got, want, "{backend}, N = {n}");
        }
    }
    let (m, n) = (3usize, 7usize);
    let xs: Vec<f64> = (0..(m * n) as i64)
        .map(|i| (i * 13 % 29 - 9) as f64)
        .collect();
    let ys: Vec<f64> = (0..n as i64).map(|j| (j % 3 + 2) as f64).collect();
    let (x, y) = (tensor("x2.npy", &[m, n], &xs), tensor("y2.npy", &[n], &ys));
    let mut want = Vec::new();
    for r in 0..m {
        let row = |j: usize| (xs[r * n + j] as i64, ys[j] as i64);
        let most = (0..n).map(|j| row(j).0 % row(j).1).max().unwrap();
        want.extend((0..n).map(|j| (row(j).0 / row(j).1 - most) as f64));
    }
    for backend in ["cpu", "sim"] {
        let got = run_path(
            &dir,
            &src,
            "rows",
            &[("x", x.clone()), ("y", y.clone())],
            backend,
        );
        assert_eq!(got, want, "{backend}: rows");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `where` with scalar branches under a tensor condition has the
/// condition's shape, as in numpy: floats give fp32, integers int32 (it
/// was a type error, and with a broadcast added a lowering failure).
#[test]
fn where_with_scalar_branches_takes_the_condition_shape() {
    let dir = std::env::temp_dir().join(format!("tessera-where-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("where.tsr");
    std::fs::write(
        &src,
        "op sign_like(x: tensor<M, N, fp32>) -> tensor<M, N, fp32> {
             return where(x > 0.0, 1.0, -1.0);
         }
         op onehot(labels: tensor<T, int32>) -> tensor<T, 5, fp32> {
             return where(arange(0, 5)[None, :] == labels[:, None], 1.0, 0.0);
         }
         op steps(x: tensor<M, N, fp32>) -> tensor<M, N, int32> {
             return where(x > 0.0, 1, 0) + where(x > 1.0, 10, 0);
         }",
    )
    .unwrap();
    let xs: Vec<f64> = (0..21).map(|i| -2.0 + 0.2 * f64::from(i)).collect();
    let x = dir.join("x.npy");
    let t = tessera_tensor::Tensor::from_f64(Dtype::Fp32, &[3, 7], &xs).unwrap();
    write_npy_file(&x, &t).unwrap();
    let labels = [0.0, 4.0, 2.0, 3.0, 1.0, 1.0];
    let l = dir.join("l.npy");
    let t = tessera_tensor::Tensor::from_f64(Dtype::Int32, &[6], &labels).unwrap();
    write_npy_file(&l, &t).unwrap();
    let x32: Vec<f64> = xs.iter().map(|v| f64::from(*v as f32)).collect();
    let sign: Vec<f64> = x32
        .iter()
        .map(|v| if *v > 0.0 { 1.0 } else { -1.0 })
        .collect();
    let steps: Vec<f64> = x32
        .iter()
        .map(|v| f64::from(u8::from(*v > 0.0)) + 10.0 * f64::from(u8::from(*v > 1.0)))
        .collect();
    let onehot: Vec<f64> = labels
        .iter()
        .flat_map(|l| (0..5).map(move |c| f64::from(u8::from(f64::from(c) == *l))))
        .collect();
    for backend in ["cpu", "sim"] {
        let run = |op: &str, input: (&str, &PathBuf)| {
            run_path(&dir, &src, op, &[(input.0, input.1.clone())], backend)
        };
        assert_eq!(run("sign_like", ("x", &x)), sign, "{backend}");
        assert_eq!(run("onehot", ("labels", &l)), onehot, "{backend}");
        assert_eq!(run("steps", ("x", &x)), steps, "{backend}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `pow` follows `powf` on every backend: negative bases with integer
/// exponents keep their sign (odd) or lose it (even), other negative bases
/// give NaN, `y = 0` gives 1; `pow(x, 2.0)` is the exact square (the
/// simulator gave NaN for every negative base).
#[test]
fn pow_of_negative_bases_agrees_with_the_cpu() {
    let dir = std::env::temp_dir().join(format!("tessera-pow-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("pow.tsr");
    std::fs::write(
        &src,
        "op pw(x: tensor<N, fp32>, y: tensor<N, fp32>) -> tensor<N, fp32> { return pow(x, y); }
         op sq(x: tensor<N, fp32>, y: tensor<N, fp32>) -> tensor<N, fp32> { return pow(x, 2.0) + y * 0.0; }",
    )
    .unwrap();
    let xs = [
        -2.0,
        -0.5,
        0.0,
        0.5,
        2.0,
        -3.0,
        -2.0,
        -2.0,
        -2.0,
        -8.0,
        0.0,
        f64::NAN,
        -1.0,
        1.5,
        -1.7,
    ];
    let ys = [
        2.0,
        2.0,
        2.0,
        2.0,
        2.0,
        3.0,
        0.5,
        -1.0,
        0.0,
        1.0 / 3.0,
        -1.0,
        0.0,
        1e30,
        7.5,
        5.0,
    ];
    let save = |name: &str, v: &[f64]| {
        let p = dir.join(name);
        let t = tessera_tensor::Tensor::from_f64(Dtype::Fp32, &[v.len()], v).unwrap();
        write_npy_file(&p, &t).unwrap();
        p
    };
    let (x, y) = (save("x.npy", &xs), save("y.npy", &ys));
    let inputs = [("x", x), ("y", y)];
    let want = run_path(&dir, &src, "pw", &inputs, "cpu");
    let got = run_path(&dir, &src, "pw", &inputs, "sim");
    for (i, (w, g)) in want.iter().zip(&got).enumerate() {
        let close = (w.is_nan() && g.is_nan()) || w == g || (w - g).abs() <= 4e-6 * w.abs();
        assert!(close, "pow({}, {}): cpu {w}, sim {g}", xs[i], ys[i]);
    }
    assert_eq!(want[5], -27.0);
    assert!(want[6].is_nan() && want[8] == 1.0 && want[11] == 1.0);
    let want = run_path(&dir, &src, "sq", &inputs, "cpu");
    let got = run_path(&dir, &src, "sq", &inputs, "sim");
    assert_eq!(
        format!("{want:?}"),
        format!("{got:?}"),
        "pow(x, 2.0) is not exact"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The std.core reductions and rearrangements kernels may call run on
/// tiles on every backend (check accepted them, and every lowering
/// refused): `argmax`/`argmin` (first extreme index, or the first NaN),
/// `mean`, `pow`, `transpose`, `permute`.
#[test]
fn std_core_operations_run_on_tiles() {
    let dir = std::env::temp_dir().join(format!("tessera-tile-core-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("stats.tsr");
    std::fs::write(
        &src,
        "kernel stats(x: tensor<4, 32, fp32>, out amax: tensor<4, int32>, out amin: tensor<4, int32>,
                      out mu: tensor<4, fp32>, out p: tensor<4, 32, fp32>, out t: tensor<32, 4, fp32>,
                      out c: tensor<32, int32>, out r: tensor<4, 32, fp32>,
                      out g: tensor<4, int32>) grid(1) {
             let rows = arange(0, 4);
             let cols = arange(0, 32);
             let xv = load(x, [rows, cols]);
             store(amax, [rows], argmax(xv, axis = 1));
             store(amin, [rows], argmin(xv, axis = -1));
             store(mu, [rows], mean(xv, axis = 1));
             store(p, [rows, cols], pow(xv, 3.0));
             store(t, [cols, rows], transpose(xv));
             store(c, [cols], argmax(permute(xv, [1, 0]), axis = 1));
             // Integer scalars stay integers (an int32 tile takes them).
             store(g, [rows], rows + maximum(32 - 40, 2) * minimum(5, 3 + 4));
             store(r, [rows, cols], round(xv / 4.0) + floor(xv / 8.0) * 100.0
                 + exp2(ceil(xv / 16.0)) * 1000.0 + log2(trunc(abs(xv) / 2.0) + 1.0) * 10000.0);
         }",
    )
    .unwrap();
    // Row 2 holds two NaNs, row 3 is constant (every index ties).
    let mut xs: Vec<f64> = (0..128)
        .map(|i| f64::from((i * 37 + 11) % 29) - 14.0)
        .collect();
    xs[2 * 32 + 5] = f64::NAN;
    xs[2 * 32 + 9] = f64::NAN;
    for v in &mut xs[96..] {
        *v = 1.0;
    }
    let x = dir.join("x.npy");
    let t = tessera_tensor::Tensor::from_f64(Dtype::Fp32, &[4, 32], &xs).unwrap();
    write_npy_file(&x, &t).unwrap();
    let at = |r: usize, c: usize| xs[r * 32 + c];
    let arg = |n: usize, get: &dyn Fn(usize) -> f64, most: bool| -> f64 {
        if let Some(i) = (0..n).find(|i| get(*i).is_nan()) {
            return i as f64;
        }
        let mut best = 0;
        for i in 1..n {
            if (most && get(i) > get(best)) || (!most && get(i) < get(best)) {
                best = i;
            }
        }
        best as f64
    };
    let amax: Vec<f64> = (0..4).map(|r| arg(32, &|c| at(r, c), true)).collect();
    let amin: Vec<f64> = (0..4).map(|r| arg(32, &|c| at(r, c), false)).collect();
    let c: Vec<f64> = (0..32).map(|col| arg(4, &|r| at(r, col), true)).collect();
    assert_eq!((amax[2], amax[3], amin[3]), (5.0, 0.0, 0.0));
    for backend in ["cpu", "sim"] {
        let out = dir.join(format!("out-{backend}"));
        run_into(&src, "stats", &[("x", x.clone())], backend, &out);
        let read = |name: &str| {
            read_npy_file(out.join(format!("{name}.npy")))
                .unwrap()
                .tensor
                .to_f64_vec()
        };
        assert_eq!(read("amax"), amax, "{backend}: argmax");
        assert_eq!(read("amin"), amin, "{backend}: argmin");
        assert_eq!(read("c"), c, "{backend}: argmax of the permuted tile");
        assert_eq!(
            read("g"),
            [10.0, 11.0, 12.0, 13.0],
            "{backend}: int scalars"
        );
        let mu = read("mu");
        for r in [0, 1, 3] {
            let want = (0..32).map(|c| at(r, c)).sum::<f64>() / 32.0;
            assert!((mu[r] - want).abs() < 1e-5, "{backend}: mean of row {r}");
        }
        assert!(mu[2].is_nan());
        let (p, t) = (read("p"), read("t"));
        for r in 0..4 {
            for col in 0..32 {
                let v = at(r, col);
                let same = |a: f64, b: f64| {
                    (a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-5 * b.abs().max(1.0)
                };
                assert!(
                    same(p[r * 32 + col], v * v * v),
                    "{backend}: pow at ({r}, {col})"
                );
                assert!(
                    same(t[col * 4 + r], v),
                    "{backend}: transpose at ({r}, {col})"
                );
                let want = (v / 4.0).round_ties_even()
                    + (v / 8.0).floor() * 100.0
                    + (v / 16.0).ceil().exp2() * 1000.0
                    + ((v.abs() / 2.0).trunc() + 1.0).log2() * 10000.0;
                assert!(
                    same(read("r")[r * 32 + col], want),
                    "{backend}: round/floor/exp2/ceil/log2/trunc at ({r}, {col})"
                );
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A dimension written only inside a product (`2 * H`) is bound from the
/// argument's size, in ops and kernels (it failed at run time: "`H` has
/// no value here"); a size the product cannot take is E0201.
#[test]
fn a_dimension_inside_a_product_is_solved_for() {
    let dir = std::env::temp_dir().join(format!("tessera-dimprod-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("glu.tsr");
    std::fs::write(
        &src,
        "op glu(x: tensor<M, 2 * H, fp32>) -> tensor<M, H, fp32> {
             return x[:, 0:H] * x[:, H:2 * H];
         }
         kernel glu_k<BLOCK: int = 64>(x: tensor<M, 2 * H, fp32>, out y: tensor<M, H, fp32>)
             grid(M, cdiv(H, BLOCK))
         {
             let row = program_id(0);
             let cols = program_id(1) * BLOCK + arange(0, BLOCK);
             let a = load(x, [row, cols], mask = cols < H);
             let b = load(x, [row, cols + H], mask = cols < H);
             store(y, [row, cols], a * b, mask = cols < H);
         }",
    )
    .unwrap();
    let (m, h) = (5usize, 70usize);
    let xs: Vec<f64> = (0..m * 2 * h)
        .map(|i| f64::from((i % 13) as u32) - 6.0)
        .collect();
    let x = dir.join("x.npy");
    let t = tessera_tensor::Tensor::from_f64(Dtype::Fp32, &[m, 2 * h], &xs).unwrap();
    write_npy_file(&x, &t).unwrap();
    let want: Vec<f64> = (0..m)
        .flat_map(|r| (0..h).map(move |c| (r, c)))
        .map(|(r, c)| xs[r * 2 * h + c] * xs[r * 2 * h + h + c])
        .collect();
    for backend in ["cpu", "sim"] {
        for entry in ["glu", "glu_k"] {
            let inputs = [("x", x.clone())];
            assert_eq!(
                run_path(&dir, &src, entry, &inputs, backend),
                want,
                "{entry} on {backend}"
            );
        }
    }
    let odd = dir.join("odd.npy");
    let t = tessera_tensor::Tensor::from_f64(Dtype::Fp32, &[2, 13], &[0.0; 26]).unwrap();
    write_npy_file(&odd, &t).unwrap();
    for entry in ["glu", "glu_k"] {
        let o = tsrc()
            .arg("run")
            .arg(&src)
            .args(["--entry", entry, "--backend", "cpu", "--input"])
            .arg(format!("x={}", odd.display()))
            .arg("--output")
            .arg(dir.join("odd-out"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && err.contains("E0201"),
            "{entry}: {err}"
        );
        assert!(err.contains("not a multiple of 2"), "{entry}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A kernel with two outputs runs as an entry on every backend and writes
/// one `.npy` per `out` parameter, named after it (it was E0700); an
/// `--output` that names one file is a usage error for it.
#[test]
fn a_kernel_with_two_outputs_writes_a_file_per_output() {
    let dir = std::env::temp_dir().join(format!("tessera-two-outputs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("sum_prod.tsr");
    std::fs::write(
        &src,
        "kernel sum_prod<B: int = 128>(a: tensor<N, fp32>, b: tensor<N, fp32>,
                                       out s: tensor<N, fp32>, out p: tensor<N, fp32>)
             grid(cdiv(N, B))
         {
             let i = program_id(0) * B + arange(0, B);
             let x = load(a, [i]);
             let y = load(b, [i]);
             store(s, [i], x + y);
             store(p, [i], x * y);
         }",
    )
    .unwrap();
    // 1001 elements: the last program is ragged.
    let (a, b) = (dir.join("a.npy"), dir.join("b.npy"));
    let (ta, tb) = (
        randn(Dtype::Fp32, &[1001], 7).unwrap(),
        randn(Dtype::Fp32, &[1001], 8).unwrap(),
    );
    write_npy_file(&a, &ta).unwrap();
    write_npy_file(&b, &tb).unwrap();
    let (xs, ys) = (ta.to_f64_vec(), tb.to_f64_vec());
    let want_s: Vec<f64> = xs
        .iter()
        .zip(&ys)
        .map(|(x, y)| f64::from(*x as f32 + *y as f32))
        .collect();
    let want_p: Vec<f64> = xs
        .iter()
        .zip(&ys)
        .map(|(x, y)| f64::from(*x as f32 * *y as f32))
        .collect();
    for backend in ["cpu", "sim"] {
        let out = dir.join(format!("out-{backend}"));
        let inputs = [("a", a.clone()), ("b", b.clone())];
        run_into(&src, "sum_prod", &inputs, backend, &out);
        let read = |name: &str| {
            let t = read_npy_file(out.join(name)).unwrap().tensor;
            assert_eq!(t.shape, vec![1001], "{backend}: {name}");
            t.to_f64_vec()
        };
        assert_eq!(read("s.npy"), want_s, "{backend}: s");
        assert_eq!(read("p.npy"), want_p, "{backend}: p");
        assert!(!out.join("out.npy").exists(), "{backend}: a stray out.npy");
    }
    let o = tsrc()
        .arg("run")
        .arg(&src)
        .args(["--entry", "sum_prod", "--input"])
        .arg(format!("a={}", a.display()))
        .arg("--input")
        .arg(format!("b={}", b.display()))
        .arg("--output")
        .arg(dir.join("r.npy"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("2 outputs (s, p)"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `topk(x, E)` with a dimension for k sorts each row, on every backend.
#[test]
fn topk_of_a_dimension_sorts_rows() {
    let dir = std::env::temp_dir().join(format!("tessera-topk-dim-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("sorted.tsr");
    std::fs::write(
        &src,
        "op sorted(x: tensor<T, E, fp32>) -> tensor<T, E, fp32> { return topk(x, E); }",
    )
    .unwrap();
    let x = dir.join("x.npy");
    let tx = randn(Dtype::Fp32, &[3, 7], 5).unwrap();
    write_npy_file(&x, &tx).unwrap();
    for backend in ["cpu", "sim"] {
        let got = run_path(&dir, &src, "sorted", &[("x", x.clone())], backend);
        for r in 0..3 {
            let mut want: Vec<f64> = (0..7).map(|c| tx.get_f64(r * 7 + c).unwrap()).collect();
            want.sort_by(|a, b| b.partial_cmp(a).unwrap());
            assert_eq!(&got[r * 7..r * 7 + 7], &want[..], "{backend} row {r}");
        }
    }
}

/// An op with several results runs as an entry on every backend and writes
/// `out0.npy`, `out1.npy`, ... one per declared result, in order.
#[test]
fn an_op_with_several_results_writes_a_file_per_result() {
    let dir = std::env::temp_dir().join(format!("tessera-op-results-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("minmax.tsr");
    std::fs::write(
        &src,
        "op row_range(x: tensor<R, C, fp32>) -> (tensor<R, fp32>, tensor<R, C, fp32>) {
             let lo = min(x, axis = -1);
             return (lo, x - lo[:, None]);
         }",
    )
    .unwrap();
    let x = dir.join("x.npy");
    let tx = randn(Dtype::Fp32, &[5, 37], 3).unwrap();
    write_npy_file(&x, &tx).unwrap();
    let xs = tx.to_f64_vec();
    let lo: Vec<f64> = xs
        .chunks(37)
        .map(|r| r.iter().copied().fold(f64::INFINITY, f64::min))
        .collect();
    let shifted: Vec<f64> = xs
        .iter()
        .enumerate()
        .map(|(i, v)| f64::from(*v as f32 - lo[i / 37] as f32))
        .collect();
    for backend in ["cpu", "sim"] {
        let out = dir.join(format!("out-{backend}"));
        run_into(&src, "row_range", &[("x", x.clone())], backend, &out);
        let read = |name: &str| read_npy_file(out.join(name)).unwrap().tensor;
        let (r0, r1) = (read("out0.npy"), read("out1.npy"));
        assert_eq!(r0.shape, vec![5], "{backend}");
        assert_eq!(r0.to_f64_vec(), lo, "{backend}: out0");
        assert_eq!(r1.shape, vec![5, 37], "{backend}");
        assert_eq!(r1.to_f64_vec(), shifted, "{backend}: out1");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// An op with defaulted attributes (`s: float = 2.0`, `neg: bool = true`)
/// runs as an entry with the defaults (it was 'not a tensor', and a `bool`
/// attribute was asked for as an input); an attribute named by `--input`
/// or without a default is an error that says so.
#[test]
fn ops_with_defaulted_attributes_are_entries() {
    let dir = std::env::temp_dir().join(format!("tessera-attrs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("attrs.tsr");
    std::fs::write(
        &src,
        "op affine(x: tensor<N, fp32>, s: float = 2.0, k: int = -3, neg: bool = true) -> tensor<N, fp32> {
             let y = x * s + k;
             return where(neg, -y, y);
         }
         op bare(x: tensor<N, fp32>, s: float) -> tensor<N, fp32> {
             return x * s;
         }",
    )
    .unwrap();
    let x = dir.join("x.npy");
    let data = randn(Dtype::Fp32, &[300], 9).unwrap();
    write_npy_file(&x, &data).unwrap();
    let want: Vec<f64> = data
        .to_f64_vec()
        .iter()
        .map(|v| f64::from(-(*v as f32 * 2.0 + -3.0)))
        .collect();
    for backend in ["cpu", "sim"] {
        let got = run_path(&dir, &src, "affine", &[("x", x.clone())], backend);
        assert_eq!(got, want, "{backend}");
    }
    let entry = |op: &str, inputs: &[(&str, &Path)]| {
        let mut c = tsrc();
        c.arg("run").arg(&src).args(["--entry", op]);
        for (n, p) in inputs {
            c.arg("--input").arg(format!("{n}={}", p.display()));
        }
        let o = c.arg("--output").arg(dir.join("err")).output().unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (code, err) = entry("affine", &[("x", &x), ("s", &x)]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("`s` is an attribute of `affine`"), "{err}");
    assert!(err.contains("(2.0)"), "{err}");
    let (code, err) = entry("bare", &[("x", &x)]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("attribute `s` of `bare` has no default"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A split dimension whose size is known only at run time (an `--entry`
/// input) must divide over its mesh axis too: E0410 at the parameter, not a
/// run on uneven shards.
#[test]
fn uneven_shards_of_entry_inputs_are_e0410() {
    let dir = std::env::temp_dir().join(format!("tessera-shard-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("scale.tsr");
    std::fs::write(
        &src,
        "mesh node(tp = 4);
         op scale(x: tensor<T, D, fp32> @ shard(_, tp)) -> tensor<T, D, fp32> @ shard(_, tp) {
             return x * 2.0;
         }",
    )
    .unwrap();
    for (cols, code) in [(6, Some(1)), (8, Some(0))] {
        let x = dir.join("x.npy");
        write_npy_file(&x, &randn(Dtype::Fp32, &[3, cols], 1).unwrap()).unwrap();
        let o = tsrc()
            .arg("run")
            .arg(&src)
            .args(["--entry", "scale", "--backend", "cpu", "--input"])
            .arg(format!("x={}", x.display()))
            .arg("--output")
            .arg(dir.join("out.npy"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), code, "{cols} columns: {err}");
        assert_eq!(err.contains("E0410"), cols == 6, "{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

//! The numerics policies and precision modes as a contract every backend
//! keeps: `kahan_sum` compensation, `deterministic`'s one order (the same
//! bits on every backend and thread count), `aggressive`'s bf16
//! accumulation, tf32 and fp8 products. Each test runs on the CPU backend
//! (or the GPU with `TESSERA_TEST_BACKEND=cuda`), and again, as `*_sim`, on
//! the GPU simulator; some compare backends directly.

#[macro_use]
#[path = "common/numerics.rs"]
mod common;

use common::*;

on_sim!(
    kahan_beats_fast => kahan_beats_fast_sim,
    kahan_never_worse_than_fast => kahan_never_worse_than_fast_sim,
    deterministic_is_bitwise_stable => deterministic_is_bitwise_stable_sim,
    gemm_tf32_ragged => gemm_tf32_ragged_sim,
    fp8_conversions_are_exact => fp8_conversions_are_exact_sim,
    gemm_fp8_ragged => gemm_fp8_ragged_sim,
);

/// A long sum with a wide dynamic range: compensated summation is
/// measurably more accurate than the fast policy in fp32.
#[test]
fn kahan_beats_fast() {
    let kahan = example("kahan.tsr");
    let fast = source("op total(x: tensor<N, fp32>) -> fp32 { return sum(x, axis = 0); }");
    let n = 1_000_000;
    let x = Tensor::from_fn(Dtype::Fp32, &[n], |i| {
        if i % 1000 == 0 {
            1.0e4
        } else {
            1.0e-3 * (1 + i % 7) as f64
        }
    })
    .unwrap();
    let exact: f64 = x.to_f64_vec().iter().sum();
    let k = run(&kahan, "total", &[x.clone()], Mode::Device).to_f64_vec()[0];
    let f = run(&fast, "total", &[x], Mode::Device).to_f64_vec()[0];
    let (ek, ef) = ((k - exact).abs() / exact, (f - exact).abs() / exact);
    assert!(ek * 10.0 < ef, "kahan rel error {ek:e}, fast {ef:e}");
    assert!(ek < 1e-6, "kahan rel error {ek:e}");
}

/// On random data spanning forty binades, of lengths that are and are not
/// multiples of the chunk, a compensated sum is never worse than the fast
/// one (beyond the rounding of its result) and within a few ulps of the exact sum (measured against the sum of
/// magnitudes, as cancellation allows no better); fp64 sums accumulate in
/// fp64, not in the fp32 default.
#[test]
fn kahan_never_worse_than_fast() {
    let kahan = example("kahan.tsr");
    let fast = source("op total(x: tensor<N, fp32>) -> fp32 { return sum(x, axis = 0); }");
    let wide = source("op total(x: tensor<N, fp64>) -> fp64 { return sum(x, axis = 0); }");
    for (n, seed) in [(100usize, 1u64), (4097, 2), (300_001, 3)] {
        let x = Tensor::from_fn(Dtype::Fp32, &[n], |i| {
            let u = tessera_tensor::uniform_f64(seed, 2 * i as u64) - 0.5;
            let e = (tessera_tensor::uniform_f64(seed, 2 * i as u64 + 1) * 40.0).floor() - 20.0;
            u * 2f64.powf(e)
        })
        .unwrap();
        let xs = x.to_f64_vec();
        let exact: f64 = xs.iter().sum();
        let mass: f64 = xs.iter().map(|v| v.abs()).sum();
        let k = run(&kahan, "total", &[x.clone()], Mode::Device).to_f64_vec()[0];
        let f = run(&fast, "total", &[x.clone()], Mode::Device).to_f64_vec()[0];
        let (ek, ef) = ((k - exact).abs() / mass, (f - exact).abs() / mass);
        // Not worse beyond the rounding of the fp32 result itself.
        let ulp = f32::EPSILON as f64 * exact.abs() / mass;
        assert!(
            ek <= ef + ulp,
            "n = {n}: kahan error {ek:e} worse than fast {ef:e}"
        );
        assert!(
            ek < 4.0 * f32::EPSILON as f64,
            "n = {n}: kahan error {ek:e}"
        );
        let x64 = x.convert(Dtype::Fp64);
        let d = run(&wide, "total", &[x64], Mode::Device).to_f64_vec()[0];
        assert!(
            (d - exact).abs() / mass < 1e-13,
            "n = {n}: fp64 sum error {:e}",
            (d - exact).abs() / mass
        );
    }
}

/// `numerics aggressive` accumulates matrix products in bf16 on every
/// backend: the accumulator is rounded to bf16 after each k-tile (on the
/// GPU path too, where it used to stay fp32 and give `standard`'s bits),
/// so cpu and the simulator agree and differ from `standard`.
#[test]
fn aggressive_accumulates_in_bf16_everywhere() {
    let c = source(
        "op agg(a: tensor<M, K, bf16>, b: tensor<K, N, bf16>) -> tensor<M, N, bf16> { numerics aggressive; return a @ b; }\n\
         op std(a: tensor<M, K, bf16>, b: tensor<K, N, bf16>) -> tensor<M, N, bf16> { return a @ b; }",
    );
    let (a, b) = (
        rnd(Dtype::Bf16, &[96, 512], 1),
        rnd(Dtype::Bf16, &[512, 72], 2),
    );
    let on = |backend: Backend, op: &str| {
        BACKEND.with(|x| x.set(Some(backend)));
        run(&c, op, &[a.clone(), b.clone()], Mode::Device).to_f64_vec()
    };
    let (cpu, sim) = (on(Backend::Cpu, "agg"), on(Backend::Sim, "agg"));
    let standard = on(Backend::Sim, "std");
    let n = cpu.len();
    let differ = |x: &[f64], y: &[f64]| x.iter().zip(y).filter(|(p, q)| p != q).count();
    // Within a k-tile the two backends sum in different orders (fp32),
    // so an output may round the other way: rarely, and by one bf16 ulp.
    assert!(
        differ(&cpu, &sim) * 50 < n,
        "{} of {n} outputs differ",
        differ(&cpu, &sim)
    );
    for (p, q) in cpu.iter().zip(&sim) {
        assert!(
            (p - q).abs() <= p.abs().max(q.abs()) / 128.0 + 1e-30,
            "{p} vs {q}"
        );
    }
    assert!(
        differ(&sim, &standard) * 10 > n,
        "aggressive gives standard's results on sim"
    );
}

/// The deterministic policy gives identical bits run to run and for any
/// number of threads.
#[test]
fn deterministic_is_bitwise_stable() {
    let c = source(
        "op total(x: tensor<R, C, fp32>) -> tensor<R, fp32> { numerics deterministic; return sum(x, axis = 1); }",
    );
    let x = rnd(Dtype::Fp32, &[13, 10_007], 11);
    let bits = |t: &Tensor| {
        t.to_f64_vec()
            .iter()
            .map(|v| v.to_bits())
            .collect::<Vec<_>>()
    };
    let a = bits(&run(&c, "total", &[x.clone()], Mode::Device));
    for threads in [1, 2, 3, 8] {
        let b = run_threads(&c, "total", &[x.clone()], Mode::Device, Some(threads));
        assert_eq!(a, bits(&b), "{threads} threads");
    }
}

/// The deterministic order is a property of the program: the CPU executor
/// and the simulator (the GPU's PTX) give the same bits, for row, column
/// and whole-tensor sums, short, ragged and chunked rows, fp32 and bf16
/// inputs, and a fused row kernel (mean and variance).
#[test]
fn deterministic_is_the_same_on_every_backend() {
    let c = source(
        "op rows(x: tensor<R, C, fp32>) -> tensor<R, fp32> { numerics deterministic; return sum(x, axis = 1); }\n\
         op cols(x: tensor<R, C, fp32>) -> tensor<C, fp32> { numerics deterministic; return sum(x, axis = 0); }\n\
         op half(x: tensor<R, C, bf16>) -> tensor<R, fp32> { numerics deterministic; return sum(x as fp32, axis = 1); }\n\
         op var(x: tensor<R, C, fp32>) -> tensor<R, fp32> { numerics deterministic; let m = mean(x, axis = 1, keepdims = true); return mean((x - m) * (x - m), axis = 1); }",
    );
    let bits = |backend: Backend, op: &str, x: &Tensor| {
        BACKEND.with(|b| b.set(Some(backend)));
        run(&c, op, &[x.clone()], Mode::Device)
            .to_f64_vec()
            .iter()
            .map(|v| v.to_bits())
            .collect::<Vec<_>>()
    };
    for (r, cols) in [
        (1, 1),
        (3, 31),
        (64, 33),
        (5, 100),
        (300, 17),
        (7, 1000),
        (2, 5000),
    ] {
        let x = rnd(Dtype::Fp32, &[r, cols], (r * cols) as u64);
        let h = x.convert(Dtype::Bf16);
        for (op, input) in [("rows", &x), ("cols", &x), ("half", &h), ("var", &x)] {
            assert_eq!(
                bits(Backend::Cpu, op, input),
                bits(Backend::Sim, op, input),
                "{op} of [{r}, {cols}]"
            );
        }
    }
    let c2 = source(
        "op all(x: tensor<N, fp32>) -> fp32 { numerics deterministic; return sum(x, axis = 0); }",
    );
    let x = rnd(Dtype::Fp32, &[100_003], 7);
    let on = |backend: Backend| {
        BACKEND.with(|b| b.set(Some(backend)));
        run(&c2, "all", &[x.clone()], Mode::Device).to_f64_vec()[0].to_bits()
    };
    assert_eq!(on(Backend::Cpu), on(Backend::Sim));
}

/// fp32 matmuls under `matmul = tf32` round their operands to tf32 (on
/// tensor cores, `mma.m16n8k8.tf32`, on the GPU backends): the result is a
/// float64 product of tf32-rounded operands, not the fp32 one.
#[test]
fn gemm_tf32_ragged() {
    let c = source(
        "numerics matmul = tf32;\n\
         op mm(a: tensor<M, K, fp32>, b: tensor<K, N, fp32>) -> tensor<M, N, fp32> {\n\
         \x20   return a @ b;\n}\n",
    );
    let (m, k, n) = (70, 77, 90);
    let a = rnd(Dtype::Fp32, &[m, k], 31);
    let b = rnd(Dtype::Fp32, &[k, n], 32);
    let got = run(&c, "mm", &[a.clone(), b.clone()], Mode::Device).to_f64_vec();
    let tf32 = |t: &Tensor| -> Vec<f64> {
        t.to_f64_vec()
            .into_iter()
            .map(|x| Dtype::Tf32.round(x))
            .collect()
    };
    let want = matmul(&tf32(&a), &tf32(&b), m, k, n);
    let fp32 = matmul(&a.to_f64_vec(), &b.to_f64_vec(), m, k, n);
    let e = rel_err(&got, &want);
    assert!(e < 2e-6, "tf32 gemm error {e:e} against tf32 operands");
    let e32 = rel_err(&got, &fp32);
    assert!(e32 > 2e-5, "operands were not rounded to tf32: {e32:e}");
}

/// fp8 loads, stores and casts give exactly the values the language
/// defines (`Dtype::round`): every fp8 code widened, and fp32 values at
/// the rounding edges narrowed (ties, subnormals, e4m3's saturation at
/// ±448, e5m2's overflow to ±inf, NaN).
#[test]
fn fp8_conversions_are_exact() {
    let c = source(
        "numerics aggressive, accumulate = fp32;\n\
         op w4(x: tensor<N, fp8_e4m3>) -> tensor<N, fp32> { return (x as fp32) * 2.0; }\n\
         op w5(x: tensor<N, fp8_e5m2>) -> tensor<N, fp32> { return (x as fp32) * 2.0; }\n\
         op n4(x: tensor<N, fp32>) -> tensor<N, fp8_e4m3> { return x as fp8_e4m3; }\n\
         op n5(x: tensor<N, fp32>) -> tensor<N, fp8_e5m2> { return x as fp8_e5m2; }\n\
         op r5(x: tensor<N, fp32>) -> tensor<N, fp32> { return (x as fp8_e5m2) as fp32; }\n",
    );
    let same = |got: &[f64], want: &[f64], what: &str| {
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert!(
                g == w || (g.is_nan() && w.is_nan()),
                "{what}[{i}]: {g} != {w}"
            );
        }
    };
    for (op, dtype, decode) in [
        (
            "w4",
            Dtype::Fp8E4m3,
            tessera_tensor::dtype::f8e4m3_to_f32 as fn(u8) -> f32,
        ),
        ("w5", Dtype::Fp8E5m2, tessera_tensor::dtype::f8e5m2_to_f32),
    ] {
        let codes: Vec<f64> = (0..=255u8).map(|b| f64::from(decode(b))).collect();
        let x = Tensor::from_f64(dtype, &[256], &codes).unwrap();
        let got = run(&c, op, &[x], Mode::Device).to_f64_vec();
        let want: Vec<f64> = codes.iter().map(|v| v * 2.0).collect();
        same(&got, &want, op);
    }
    let mut edges = vec![
        0.0,
        -0.0,
        1.0,
        -1.5,
        448.0,
        464.0,
        480.0,
        500.0,
        -1e9,
        57344.0,
        61439.0,
        61440.0,
        -61440.0,
        1e6,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        1e-3,
        -2e-3,
        1e-7,
        3e-5,
        1.0625,
        1.1875,
        0.3,
        17.0,
        19.0,
        -240.0,
        1.75e-2,
    ];
    edges.extend(
        rnd(Dtype::Fp32, &[100], 33)
            .to_f64_vec()
            .iter()
            .map(|v| v * 40.0),
    );
    let x = Tensor::from_f64(Dtype::Fp32, &[edges.len()], &edges).unwrap();
    for (op, dtype) in [
        ("n4", Dtype::Fp8E4m3),
        ("n5", Dtype::Fp8E5m2),
        ("r5", Dtype::Fp8E5m2),
    ] {
        let got = run(&c, op, &[x.clone()], Mode::Device).to_f64_vec();
        let want: Vec<f64> = edges.iter().map(|v| dtype.round(*v)).collect();
        same(&got, &want, op);
    }
}

/// fp8 matmuls run on fp8 tensor cores (`mma.m16n8k32.e4m3`) on the GPU
/// backends and give fp32 (a sum of fp8 products overflows fp8's range):
/// the products are exact and accumulate in fp32, so the result is the
/// float64 product to within fp32 summation error.
#[test]
fn gemm_fp8_ragged() {
    let c = source(
        "numerics aggressive, accumulate = fp32;\n\
         op mm(a: tensor<M, K, fp8_e4m3>, b: tensor<K, N, fp8_e4m3>) -> tensor<M, N, fp32> {\n\
         \x20   return a @ b;\n}\n\
         op nt(a: tensor<M, K, fp8_e5m2>, b: tensor<N, K, fp8_e5m2>) -> tensor<M, N, fp32> {\n\
         \x20   return a @ b.T;\n}\n",
    );
    let (m, k, n) = (70, 77, 90);
    for (op, dtype) in [("mm", Dtype::Fp8E4m3), ("nt", Dtype::Fp8E5m2)] {
        let a = rnd(dtype, &[m, k], 34);
        let b = rnd(dtype, &[k, n], 35);
        let b_in = if op == "nt" {
            // b is passed as Bᵀ: [N, K], K contiguous (staged by columns).
            let v = b.to_f64_vec();
            let t: Vec<f64> = (0..n * k).map(|i| v[(i % k) * n + i / k]).collect();
            Tensor::from_f64(dtype, &[n, k], &t).unwrap()
        } else {
            b.clone()
        };
        let got = run(&c, op, &[a.clone(), b_in], Mode::Device);
        assert_eq!(got.dtype, Dtype::Fp32);
        let want = matmul(&a.to_f64_vec(), &b.to_f64_vec(), m, k, n);
        let e = rel_err(&got.to_f64_vec(), &want);
        assert!(e < 1e-5, "{op}: fp8 gemm error {e}");
    }
}

/// A scaled fp8 GEMM as the language writes it: a per-tensor scale from
/// the amax, fp8 inputs quantised by it, the fp32 product rescaled and
/// rounded to bf16; within fp8's quantisation error of the float64
/// product, for data whose magnitudes (1e-3 .. 1e4) fp8 alone could not
/// hold.
#[test]
fn scaled_fp8_gemm() {
    let c = source(
        "numerics aggressive, accumulate = fp32;\n\
         op amax_scale(x: tensor<M, K, fp32>) -> tensor<1, 1, fp32> {\n\
         \x20   let m = max(max(abs(x), axis = -1, keepdims = true), axis = 0, keepdims = true);\n\
         \x20   return m / 448.0;\n}\n\
         op quantize(x: tensor<M, K, fp32>, s: tensor<1, 1, fp32>) -> tensor<M, K, fp8_e4m3> {\n\
         \x20   return (x / s) as fp8_e4m3;\n}\n\
         op qmm(a: tensor<M, K, fp8_e4m3>, b: tensor<K, N, fp8_e4m3>, sa: tensor<1, 1, fp32>,\n\
         \x20      sb: tensor<1, 1, fp32>) -> tensor<M, N, bf16> {\n\
         \x20   return ((a @ b) * sa * sb) as bf16;\n}\n",
    );
    let (m, k, n) = (64, 96, 40);
    let wide = |shape: &[usize], seed: u64, scale: f64| {
        let v: Vec<f64> = rnd(Dtype::Fp32, shape, seed)
            .to_f64_vec()
            .iter()
            .map(|x| x * scale)
            .collect();
        Tensor::from_f64(Dtype::Fp32, shape, &v).unwrap()
    };
    let (a, b) = (wide(&[m, k], 51, 3000.0), wide(&[k, n], 52, 0.01));
    let want = matmul(&a.to_f64_vec(), &b.to_f64_vec(), m, k, n);
    let scale = want.iter().fold(0.0f64, |s, x| s.max(x.abs()));
    let mut results = Vec::new();
    for backend in [Backend::Cpu, Backend::Sim] {
        BACKEND.with(|b| b.set(Some(backend)));
        let mode = Mode::Device;
        let sa = run(&c, "amax_scale", &[a.clone()], mode);
        let sb = run(&c, "amax_scale", &[b.clone()], mode);
        let amax = a.to_f64_vec().iter().fold(0.0f64, |s, x| s.max(x.abs()));
        assert_eq!(sa.to_f64_vec(), vec![f64::from((amax as f32) / 448.0)]);
        let qa = run(&c, "quantize", &[a.clone(), sa.clone()], mode);
        let qb = run(&c, "quantize", &[b.clone(), sb.clone()], mode);
        assert_eq!(qa.dtype, Dtype::Fp8E4m3);
        let got = run(&c, "qmm", &[qa, qb, sa, sb], mode).to_f64_vec();
        // e4m3 keeps 3 mantissa bits: each factor within 2^-4 relative.
        let err = got
            .iter()
            .zip(&want)
            .fold(0.0f64, |e, (g, w)| e.max((g - w).abs()))
            / scale;
        assert!(err < 0.06, "{backend:?}: scaled fp8 gemm error {err}");
        results.push(got);
    }
    let differ = results[0]
        .iter()
        .zip(&results[1])
        .filter(|(x, y)| x != y)
        .count();
    assert!(
        differ * 50 < results[0].len(),
        "cpu and sim: {differ} differ"
    );
}

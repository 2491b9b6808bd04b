//! Tests of the counter-based random tensors: determinism, independence from evaluation
//! order, ranges and the moments of the distributions.

use tessera_tensor::{
    normal_f64, rand, randn, random_bits, uniform_f32, uniform_f64, Dtype, Tensor,
};

#[test]
fn same_seed_same_tensor_different_seed_different_tensor() {
    for d in [Dtype::Fp32, Dtype::Bf16, Dtype::Fp64, Dtype::Fp8E4m3] {
        let a = randn(d, &[64, 33], 5).unwrap();
        assert_eq!(a, randn(d, &[64, 33], 5).unwrap(), "{d}");
        assert_ne!(a, randn(d, &[64, 33], 6).unwrap(), "{d}");
        let u = rand(d, &[64, 33], 5, 0).unwrap();
        assert_eq!(u, rand(d, &[64, 33], 5, 0).unwrap(), "{d}");
        assert_ne!(u, rand(d, &[64, 33], 6, 0).unwrap(), "{d}");
    }
    // Consecutive seeds (1, 2, 3, as programs use them) give unrelated streams, not shifts.
    let a: Vec<u64> = (0..1000).map(|i| random_bits(1, i)).collect();
    let b: Vec<u64> = (0..1000).map(|i| random_bits(2, i)).collect();
    assert!(a.iter().all(|x| !b.contains(x)));
}

#[test]
fn element_depends_only_on_seed_and_index() {
    let seed = 0xDEAD_BEEF;
    let t = randn(Dtype::Fp32, &[10, 100], seed).unwrap();
    // Reverse order.
    for i in (0..1000).rev() {
        assert_eq!(
            t.get_f64(i),
            Some(Dtype::Fp32.round(normal_f64(seed, i as u64)))
        );
    }
    // In chunks: as a flat tensor, and as prefixes of other shapes.
    let flat = randn(Dtype::Fp32, &[1000], seed).unwrap();
    assert_eq!(flat.data, t.data);
    let prefix = randn(Dtype::Fp32, &[7, 3], seed).unwrap();
    assert_eq!(prefix.to_f64_vec()[..], t.to_f64_vec()[..21]);
    // Chunks of 100 computed last chunk first, written into place.
    let mut chunked = vec![0.0; 1000];
    for c in (0..10).rev() {
        let start = c * 100;
        for (k, slot) in chunked[start..start + 100].iter_mut().enumerate() {
            *slot = Dtype::Fp32.round(normal_f64(seed, (start + k) as u64));
        }
    }
    assert_eq!(chunked, t.to_f64_vec());
    let u = rand(Dtype::Fp64, &[50], 3, 0).unwrap();
    for i in (0..50).rev() {
        assert_eq!(u.get_f64(i), Some(f64::from(uniform_f32(3, i as u64))));
    }
}

#[test]
fn pinned_values() {
    // The stream is a cross-backend contract: these values must never change.
    assert_eq!(random_bits(0, 0), 0xE220_A839_7B1D_CDAF);
    let u = uniform_f64(0, 0);
    assert_eq!(u, (0xE220_A839_7B1D_CDAFu64 >> 11) as f64 / 2f64.powi(53));
    let n: Vec<u64> = (0..3).map(|i| normal_f64(1, i).to_bits()).collect();
    assert_eq!(n, PINNED_NORMALS);
}

/// `normal_f64(1, 0..3)` as bits.
const PINNED_NORMALS: [u64; 3] = [0xBFF285527D57A9A1, 0x3FF079A195499955, 0xBFE1B96820B37F5A];

#[test]
fn rand_is_in_unit_interval() {
    for d in Dtype::ALL.into_iter().filter(|d| d.is_float()) {
        let t = rand(d, &[20_000], 11, 0).unwrap();
        for x in t.to_f64_vec() {
            assert!((0.0..1.0).contains(&x), "{d}: {x}");
        }
        let mean = t.to_f64_vec().iter().sum::<f64>() / 20_000.0;
        assert!((mean - 0.5).abs() < 0.04, "{d}: mean {mean}");
    }
    // Uniforms near 1 that would round up to 1.0 are kept below it.
    let hits = (0..200_000u64)
        .filter(|&i| Dtype::Fp8E4m3.round(f64::from(uniform_f32(9, i))) == 1.0)
        .count();
    assert!(hits > 0, "the test must exercise the rounding-up case");
    let t = rand(Dtype::Fp8E4m3, &[200_000], 9, 0).unwrap();
    assert!(t.to_f64_vec().contains(&0.9375));
    for i in 0..100_000 {
        let u = uniform_f64(i, i * 7);
        assert!((0.0..1.0).contains(&u));
    }
}

#[test]
fn normal_matches_box_muller_with_library_math() {
    let mut worst = 0.0f64;
    for i in 0..50_000 {
        let u1 = uniform_f64(77, 2 * i);
        let u2 = uniform_f64(77, 2 * i + 1);
        let want = (-2.0 * (1.0 - u1).ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
        worst = worst.max((normal_f64(77, i) - want).abs());
    }
    assert!(worst < 1e-13, "worst difference {worst:e}");
}

fn moments(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
    (mean, var)
}

#[test]
fn uniform_moments() {
    let xs: Vec<f64> = (0..100_000).map(|i| uniform_f64(123, i)).collect();
    let (mean, var) = moments(&xs);
    assert!((mean - 0.5).abs() < 0.005, "mean {mean}");
    assert!((var - 1.0 / 12.0).abs() < 0.002, "variance {var}");
    // Each tenth of the interval gets about a tenth of the samples.
    let mut bins = [0usize; 10];
    for x in &xs {
        bins[(x * 10.0) as usize] += 1;
    }
    assert!(
        bins.iter().all(|&b| (9_400..10_600).contains(&b)),
        "{bins:?}"
    );
}

#[test]
fn normal_moments() {
    let t = randn(Dtype::Fp64, &[100_000], 2024).unwrap();
    let xs = t.to_f64_vec();
    let (mean, var) = moments(&xs);
    assert!(mean.abs() < 0.015, "mean {mean}");
    assert!((var - 1.0).abs() < 0.02, "variance {var}");
    let within_1 = xs.iter().filter(|x| x.abs() < 1.0).count() as f64 / 1e5;
    assert!((within_1 - 0.6827).abs() < 0.006, "P(|x| < 1) = {within_1}");
    let within_2 = xs.iter().filter(|x| x.abs() < 2.0).count() as f64 / 1e5;
    assert!((within_2 - 0.9545).abs() < 0.004, "P(|x| < 2) = {within_2}");
    let skew = xs.iter().map(|x| x * x * x).sum::<f64>() / 1e5;
    assert!(skew.abs() < 0.05, "third moment {skew}");
    assert!(xs.iter().all(|x| x.is_finite()));
    // Lower precisions are the fp64 values rounded.
    let b = randn(Dtype::Bf16, &[1000], 2024).unwrap();
    for (i, &x) in xs[..1000].iter().enumerate() {
        assert_eq!(b.get_f64(i), Some(Dtype::Bf16.round(x)));
    }
}

#[test]
fn shapes_and_dtypes() {
    let t = randn(Dtype::Int8, &[3, 3], 1).unwrap();
    assert_eq!(t.shape, vec![3, 3]);
    t.validate().unwrap();
    assert!(rand(Dtype::Int32, &[10], 1, 0)
        .unwrap()
        .to_f64_vec()
        .iter()
        .all(|&x| x == 0.0));
    assert!(randn(Dtype::Fp32, &[usize::MAX, 2], 0).is_err());
    assert_eq!(randn(Dtype::Fp32, &[], 0).unwrap().len(), 1);
    assert!(rand(Dtype::Fp16, &[0, 4], 0, 0).unwrap().is_empty());
    assert_eq!(
        Tensor::from_fn(Dtype::Fp32, &[4], |i| normal_f64(8, i as u64)).unwrap(),
        randn(Dtype::Fp32, &[4], 8).unwrap()
    );
}

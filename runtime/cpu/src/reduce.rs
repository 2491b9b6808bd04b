//! Summation in a given accumulation dtype under a numerics policy: the
//! order and compensation of the additions are what `fast`, `deterministic`
//! and `kahan_sum` promise.

use tessera_sema::Policy;

/// How values are accumulated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accumulate {
    /// Exact-as-possible f64 (compensated), for reference results.
    Reference,
    /// In f32 (the accumulation dtype fp32 and narrower).
    F32(Policy),
    /// In f64 (accumulation dtype fp64).
    F64(Policy),
}

/// Number of independent partial sums of the `fast` policy (a SIMD width).
const LANES: usize = 8;

/// Sums `xs`.
pub fn sum(xs: &[f64], acc: Accumulate) -> f64 {
    match acc {
        Accumulate::Reference => neumaier_f64(xs),
        Accumulate::F64(policy) => match policy {
            Policy::Fast => lanes(xs, |a, b| a + b),
            Policy::Deterministic => lanes32(xs, &|a, b| a + b),
            Policy::KahanSum => neumaier_f64(xs),
        },
        Accumulate::F32(policy) => {
            let add = |a: f64, b: f64| (a + b) as f32 as f64;
            match policy {
                Policy::Fast => lanes(xs, add),
                Policy::Deterministic => lanes32(xs, &add),
                Policy::KahanSum => kahan_f32(xs),
            }
        }
    }
}

/// `LANES` running sums combined at the end: the order of a vectorised loop.
fn lanes(xs: &[f64], add: impl Fn(f64, f64) -> f64) -> f64 {
    let mut part = [0.0f64; LANES];
    for chunk in xs.chunks(LANES) {
        for (p, x) in part.iter_mut().zip(chunk) {
            *p = add(*p, *x);
        }
    }
    part.iter().fold(0.0, |a, b| add(a, *b))
}

/// The deterministic order every backend shares: 32 lanes, lane `v`
/// adding elements `v, v + 32, ...` in turn to 0, then a halving tree
/// (lane `v` adds lane `v + off` for `off` = 16, 8, 4, 2, 1).
fn lanes32(xs: &[f64], add: &impl Fn(f64, f64) -> f64) -> f64 {
    let mut lane = [0.0f64; 32];
    for chunk in xs.chunks(32) {
        for (l, x) in lane.iter_mut().zip(chunk) {
            *l = add(*l, *x);
        }
    }
    let mut off = 16;
    while off >= 1 {
        for v in 0..off {
            lane[v] = add(lane[v], lane[v + off]);
        }
        off /= 2;
    }
    lane[0]
}

/// Neumaier's compensated summation in f64.
fn neumaier_f64(xs: &[f64]) -> f64 {
    let (mut s, mut c) = (0.0f64, 0.0f64);
    for &x in xs {
        let t = s + x;
        if s.abs() >= x.abs() {
            c += (s - t) + x;
        } else {
            c += (x - t) + s;
        }
        s = t;
    }
    s + c
}

/// Compensated summation with every operation in f32, as a GPU thread
/// does it: the step of every backend (`tile::reduction::kahan_step`).
fn kahan_f32(xs: &[f64]) -> f64 {
    let (mut s, mut c) = (0.0f32, 0.0f32);
    for &x in xs {
        (s, c) = crate::tile::reduction::kahan_step_f32(s, c, x as f32);
    }
    // `c` holds the negated low-order part the running sum lost.
    (s - c) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values of wildly different magnitudes whose exact sum is known.
    fn hard_case(n: usize) -> (Vec<f64>, f64) {
        let mut xs = Vec::with_capacity(n);
        let mut exact = 0.0f64;
        for i in 0..n {
            let x = if i % 1000 == 0 {
                1.0e4
            } else {
                1.0e-3 + (i % 7) as f64 * 1e-4
            };
            let x = x as f32 as f64;
            xs.push(x);
            exact += x;
        }
        (xs, exact)
    }

    #[test]
    fn kahan_beats_fast_in_f32() {
        let (xs, exact) = hard_case(1_000_000);
        let fast = sum(&xs, Accumulate::F32(Policy::Fast));
        let kahan = sum(&xs, Accumulate::F32(Policy::KahanSum));
        let (ef, ek) = ((fast - exact).abs(), (kahan - exact).abs());
        assert!(ek * 100.0 < ef, "kahan error {ek} vs fast error {ef}");
    }

    #[test]
    fn deterministic_is_a_fixed_tree() {
        let xs: Vec<f64> = (0..1001).map(|i| ((i * 37) % 101) as f64 * 0.1).collect();
        let a = sum(&xs, Accumulate::F32(Policy::Deterministic));
        let b = sum(&xs, Accumulate::F32(Policy::Deterministic));
        assert_eq!(a.to_bits(), b.to_bits());
        assert!((a - xs.iter().sum::<f64>()).abs() < 1e-2);
    }
}

//! Everyday layers of std.core and std.nn against references written
//! here in f64: pooling and adaptive pooling, resizing, group and batch
//! normalisation, the losses, running maxima and logcumsumexp, medians
//! and quantiles, floored remainders and norms, convolutions. Each test runs on the CPU
//! backend (or the GPU with `TESSERA_TEST_BACKEND=cuda`) and again, as
//! `*_sim`, on the simulator (see `numerics.rs`).

#[macro_use]
#[path = "common/numerics.rs"]
mod common;

use common::*;

on_sim!(
    pooling => pooling_sim,
    resizing => resizing_sim,
    normalisations => normalisations_sim,
    losses => losses_sim,
    running_scans => running_scans_sim,
    long_scans => long_scans_sim,
    medians_and_quantiles => medians_and_quantiles_sim,
    remainders_norms_and_ranges => remainders_norms_and_ranges_sim,
    string_modes => string_modes_sim,
    nan_reductions_histograms_and_bags => nan_reductions_histograms_and_bags_sim,
    einsums => einsums_sim,
    transposed_convolutions_and_unfold => transposed_convolutions_and_unfold_sim,
    narrow_group_convolutions => narrow_group_convolutions_sim,
);

/// Runs `op` of `c` on the device and checks every element against `want`
/// to fp32 rounding (NaN where NaN is wanted).
fn check(c: &Compilation, op: &str, inputs: &[Tensor], want: &[f64], tol: f64) {
    let got = run(c, op, inputs, Mode::Device).to_f64_vec();
    assert_eq!(got.len(), want.len(), "{op}: element count");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= tol * (1.0 + w.abs());
        assert!(ok, "{op} on {:?}: element {i} is {g}, want {w}", backend());
    }
}

/// Applies `f` to each line of `x` along its last axis (`n` long).
fn lines(x: &[f64], n: usize, f: impl Fn(&[f64]) -> Vec<f64>) -> Vec<f64> {
    x.chunks(n).flat_map(f).collect()
}

/// Swaps the last two axes of a [.., h, w] array.
fn swap_last(x: &[f64], h: usize, w: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    for m in x.chunks(h * w) {
        for j in 0..w {
            out.extend((0..h).map(|i| m[i * w + j]));
        }
    }
    out
}

/// torch's pooling of one line: window j reads j stride - padding + i
/// dilation; max (NaN wins) or the mean over `kernel` (or the positions
/// inside with `include_pad` false).
fn pool_line(
    line: &[f64],
    (kernel, stride, padding, dilation): (usize, usize, usize, usize),
    max: bool,
    include_pad: bool,
) -> Vec<f64> {
    let n = line.len() as i64;
    let span = (dilation * (kernel - 1) + 1) as i64;
    let outs = (n + 2 * padding as i64 - span) / stride as i64 + 1;
    (0..outs)
        .map(|j| {
            let at = (0..kernel as i64)
                .map(|i| j * stride as i64 - padding as i64 + i * dilation as i64)
                .filter(|p| (0..n).contains(p))
                .map(|p| line[p as usize]);
            let vals: Vec<f64> = at.collect();
            if max {
                vals.iter().fold(f64::NEG_INFINITY, |m, &v| {
                    if v.is_nan() || m.is_nan() {
                        f64::NAN
                    } else {
                        m.max(v)
                    }
                })
            } else {
                let d = if include_pad { kernel } else { vals.len() };
                vals.iter().sum::<f64>() / d as f64
            }
        })
        .collect()
}

/// Pooling windows of the adaptive pools: window i of `outs` over `n`.
fn adaptive_line(line: &[f64], outs: usize, max: bool) -> Vec<f64> {
    let n = line.len();
    (0..outs)
        .map(|i| {
            let w = &line[i * n / outs..((i + 1) * n).div_ceil(outs)];
            if max {
                // NaN wins, as in torch's.
                (w.iter()).fold(f64::NEG_INFINITY, |m, &v| {
                    if m.is_nan() || v.is_nan() {
                        f64::NAN
                    } else {
                        m.max(v)
                    }
                })
            } else {
                w.iter().sum::<f64>() / w.len() as f64
            }
        })
        .collect()
}

/// `max_pool1d` / `avg_pool1d` with stride, padding and dilation,
/// `max_pool2d` / `avg_pool2d` as the 1-d pools along both axes, a NaN
/// propagated by max pooling, and the adaptive pools with windows that
/// overlap (7 positions into 3) and one window.
#[test]
fn pooling() {
    let c = source(
        "import std.nn;
         op mp(x: tensor<B, C, H, W, fp32>) { return max_pool1d(x, 3, stride = 2, padding = 1); }
         op mpd(x: tensor<B, C, H, W, fp32>) { return max_pool1d(x, 2, dilation = 3); }
         op ap(x: tensor<B, C, H, W, fp32>) { return avg_pool1d(x, 3, 2, 1); }
         op apn(x: tensor<B, C, H, W, fp32>) { return avg_pool1d(x, 3, 2, 1, count_include_pad = false); }
         op mp2(x: tensor<B, C, H, W, fp32>) { return max_pool2d(x, 3, 2, 1); }
         op ap2(x: tensor<B, C, H, W, fp32>) { return avg_pool2d(x, 2); }
         op aa(x: tensor<B, C, H, W, fp32>) { return adaptive_avg_pool1d(x, 3); }
         op am(x: tensor<B, C, H, W, fp32>) { return adaptive_max_pool1d(x, 4); }
         op aa2(x: tensor<B, C, H, W, fp32>) { return adaptive_avg_pool2d(x, 1); }
         op am2(x: tensor<B, C, H, W, fp32>) { return adaptive_max_pool2d(x, 2, 3); }",
    );
    let (h, w) = (6, 7);
    let mut xv = rnd(Dtype::Fp32, &[2, 3, h, w], 11).to_f64_vec();
    xv[9] = f64::NAN;
    let x = Tensor::from_f64(Dtype::Fp32, &[2, 3, h, w], &xv).unwrap();
    let inputs = [x];
    let pool = |x: &[f64], n: usize, k, max, pad| lines(x, n, |l| pool_line(l, k, max, pad));
    check(
        &c,
        "mp",
        &inputs,
        &pool(&xv, w, (3, 2, 1, 1), true, true),
        1e-6,
    );
    check(
        &c,
        "mpd",
        &inputs,
        &pool(&xv, w, (2, 2, 0, 3), true, true),
        1e-6,
    );
    check(
        &c,
        "ap",
        &inputs,
        &pool(&xv, w, (3, 2, 1, 1), false, true),
        1e-6,
    );
    check(
        &c,
        "apn",
        &inputs,
        &pool(&xv, w, (3, 2, 1, 1), false, false),
        1e-6,
    );
    // Two dimensions: along W, then along H of the transpose.
    let two = |k: (usize, usize, usize, usize), max: bool| {
        let rows = pool(&xv, w, k, max, true);
        let wo = rows.len() / (6 * h);
        let cols = pool(&swap_last(&rows, h, wo), h, k, max, true);
        swap_last(&cols, wo, cols.len() / (6 * wo))
    };
    check(&c, "mp2", &inputs, &two((3, 2, 1, 1), true), 1e-6);
    check(&c, "ap2", &inputs, &two((2, 2, 0, 1), false), 1e-6);
    check(
        &c,
        "aa",
        &inputs,
        &lines(&xv, w, |l| adaptive_line(l, 3, false)),
        1e-6,
    );
    check(
        &c,
        "am",
        &inputs,
        &lines(&xv, w, |l| adaptive_line(l, 4, true)),
        1e-6,
    );
    let whole: Vec<f64> = (xv.chunks(h * w))
        .map(|m| m.iter().sum::<f64>() / (h * w) as f64)
        .collect();
    check(&c, "aa2", &inputs, &whole, 1e-5);
    let rows = lines(&xv, w, |l| adaptive_line(l, 3, true));
    let cols = lines(&swap_last(&rows, h, 3), h, |l| adaptive_line(l, 2, true));
    check(&c, "am2", &inputs, &swap_last(&cols, 3, 2), 1e-6);
}

/// Nearest resizing (torch's fp32 scale, and "nearest-exact") and linear
/// and bilinear resizing with and without `align_corners`, up and down.
#[test]
fn resizing() {
    let c = source(
        "import std.nn;
         op n(x: tensor<R, L, fp32>) { return upsample_nearest1d(x, 11); }
         op ne(x: tensor<R, L, fp32>) { return upsample_nearest1d(x, 4, exact = true); }
         op l(x: tensor<R, L, fp32>) { return upsample_linear1d(x, 13); }
         op la(x: tensor<R, L, fp32>) { return upsample_linear1d(x, 3, align_corners = true); }
         op b(x: tensor<R, L, fp32>) { return upsample_bilinear2d(x, 5, 9); }",
    );
    let (r, n) = (4, 7);
    let xv = rnd(Dtype::Fp32, &[r, n], 12).to_f64_vec();
    let inputs = [Tensor::from_f64(Dtype::Fp32, &[r, n], &xv).unwrap()];
    let nearest = |size: usize, half: f32| {
        let scale = n as f32 / size as f32;
        lines(&xv, n, move |l| {
            let at = |i: usize| ((((i as f32) + half) * scale).floor() as usize).min(n - 1);
            (0..size).map(|i| l[at(i)]).collect()
        })
    };
    check(&c, "n", &inputs, &nearest(11, 0.0), 0.0);
    check(&c, "ne", &inputs, &nearest(4, 0.5), 0.0);
    let linear = |x: &[f64], len: usize, size: usize, corners: bool| {
        lines(x, len, move |l| {
            (0..size)
                .map(|i| {
                    let src = if corners {
                        i as f64 * (len - 1) as f64 / (size - 1) as f64
                    } else {
                        ((i as f64 + 0.5) * len as f64 / size as f64 - 0.5).max(0.0)
                    };
                    let lo = (src.floor() as usize).min(len - 1);
                    let w = src - lo as f64;
                    l[lo] * (1.0 - w) + l[(lo + 1).min(len - 1)] * w
                })
                .collect()
        })
    };
    check(&c, "l", &inputs, &linear(&xv, n, 13, false), 1e-5);
    check(&c, "la", &inputs, &linear(&xv, n, 3, true), 1e-5);
    let rows = linear(&xv, n, 9, false);
    let cols = linear(&swap_last(&rows, r, 9), r, 5, false);
    check(&c, "b", &inputs, &swap_last(&cols, 9, 5), 1e-5);
}

/// `group_norm` of 4-d and 3-d inputs, `instance_norm`, and `batch_norm`
/// with running statistics and with the batch's own.
#[test]
fn normalisations() {
    let c = source(
        "import std.nn;
         op g(x: tensor<B, C, H, W, fp32>, w: tensor<C, fp32>, b: tensor<C, fp32>) { return group_norm(x, 2, w, b); }
         op g3(x: tensor<B, C, H, W, fp32>, w: tensor<C, fp32>, b: tensor<C, fp32>) { return group_norm(x[:, :, 0], 4, w, b, eps = 1e-3); }
         op i(x: tensor<B, C, H, W, fp32>, w: tensor<C, fp32>, b: tensor<C, fp32>) { return instance_norm(x, w, b); }
         op r(x: tensor<B, C, H, W, fp32>, w: tensor<C, fp32>, b: tensor<C, fp32>) { return batch_norm(x, b, w * w, w, b); }
         op t(x: tensor<B, C, H, W, fp32>, w: tensor<C, fp32>, b: tensor<C, fp32>) { return batch_norm(x, b, w, w, b, training = true); }",
    );
    let (bn, cn, h, w) = (2, 4, 3, 5);
    let xv = rnd(Dtype::Fp32, &[bn, cn, h, w], 13).to_f64_vec();
    let wv: Vec<f64> = (0..cn).map(|i| 0.5 + i as f64 * 0.25).collect();
    let bv: Vec<f64> = (0..cn).map(|i| i as f64 * 0.5 - 1.0).collect();
    let inputs = [
        Tensor::from_f64(Dtype::Fp32, &[bn, cn, h, w], &xv).unwrap(),
        Tensor::from_f64(Dtype::Fp32, &[cn], &wv).unwrap(),
        Tensor::from_f64(Dtype::Fp32, &[cn], &bv).unwrap(),
    ];
    // x of [bn, cn, per], normalised over `groups` groups of channels.
    let group = |x: &[f64], per: usize, groups: usize, eps: f64| {
        let size = cn / groups * per;
        let mut out = Vec::new();
        for block in x.chunks(size) {
            let mu = block.iter().sum::<f64>() / size as f64;
            let var = block.iter().map(|v| (v - mu) * (v - mu)).sum::<f64>() / size as f64;
            out.extend(block.iter().map(|v| (v - mu) / (var + eps).sqrt()));
        }
        for (k, v) in out.iter_mut().enumerate() {
            let ch = k / per % cn;
            *v = *v * wv[ch] + bv[ch];
        }
        out
    };
    check(&c, "g", &inputs, &group(&xv, h * w, 2, 1e-5), 1e-5);
    let first: Vec<f64> = xv.chunks(w).step_by(h).flatten().copied().collect();
    let first: Vec<f64> = first.chunks(w).flat_map(|r| r.to_vec()).collect();
    check(&c, "g3", &inputs, &group(&first, w, 4, 1e-3), 1e-5);
    check(&c, "i", &inputs, &group(&xv, h * w, cn, 1e-5), 1e-5);
    let per = h * w;
    let batch = |mean: &dyn Fn(usize) -> f64, var: &dyn Fn(usize) -> f64| -> Vec<f64> {
        (xv.iter().enumerate())
            .map(|(k, v)| {
                let ch = k / per % cn;
                (v - mean(ch)) / (var(ch) + 1e-5).sqrt() * wv[ch] + bv[ch]
            })
            .collect()
    };
    check(
        &c,
        "r",
        &inputs,
        &batch(&|ch| bv[ch], &|ch| wv[ch] * wv[ch]),
        1e-5,
    );
    let of = |ch: usize| -> Vec<f64> {
        (0..bn)
            .flat_map(|b| xv[(b * cn + ch) * per..(b * cn + ch + 1) * per].to_vec())
            .collect()
    };
    let mean = |ch: usize| of(ch).iter().sum::<f64>() / (bn * per) as f64;
    let var = |ch: usize| {
        let m = mean(ch);
        of(ch).iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (bn * per) as f64
    };
    check(&c, "t", &inputs, &batch(&mean, &var), 1e-5);
}

/// The elementwise losses against torch's formulas, `nll_loss` with an
/// ignored row, and `cosine_similarity` (of broadcast operands too) /
/// `cdist` / `normalize`.
#[test]
fn losses() {
    let c = source(
        "import std.nn;
         op mse(a: tensor<N, C, fp32>, b: tensor<N, C, fp32>) { return mse_loss(a, b); }
         op sl1(a: tensor<N, C, fp32>, b: tensor<N, C, fp32>) { return smooth_l1_loss(a, b, beta = 0.5); }
         op hub(a: tensor<N, C, fp32>, b: tensor<N, C, fp32>) { return huber_loss(a, b, delta = 0.7); }
         op bce(a: tensor<N, C, fp32>, b: tensor<N, C, fp32>) { return binary_cross_entropy_with_logits(a * 40.0, sigmoid(b), pos_weight = 2.0); }
         op kl(a: tensor<N, C, fp32>, b: tensor<N, C, fp32>) { return kl_div(log_softmax(a), softmax(b)); }
         op cos(a: tensor<N, C, fp32>, b: tensor<N, C, fp32>) { return cosine_similarity(a, b); }
         op cosp(a: tensor<N, C, fp32>, b: tensor<N, C, fp32>) { return cosine_similarity(a[:, None, :], b[None, :, :], axis = -1); }
         op cd(a: tensor<N, C, fp32>, b: tensor<N, C, fp32>) { return cdist(a, b, p = 1.0); }
         op nrm(a: tensor<N, C, fp32>, b: tensor<N, C, fp32>) { return normalize(a, axis = 0); }
         op nll(a: tensor<N, C, fp32>, y: tensor<N, int32>) { return nll_loss(a, y); }
         op nllm(a: tensor<N, C, fp32>, y: tensor<N, int32>) { return nll_loss(a, y, reduction = \"mean\"); }
         op msem(a: tensor<N, C, fp32>, b: tensor<N, C, fp32>) { return mse_loss(a, b, reduction = \"mean\"); }
         op huls(a: tensor<N, C, fp32>, b: tensor<N, C, fp32>) { return huber_loss(a, b, delta = 0.7, reduction = \"sum\"); }",
    );
    let (n, cn) = (5, 6);
    let av = rnd(Dtype::Fp32, &[n, cn], 14).to_f64_vec();
    let bv = rnd(Dtype::Fp32, &[n, cn], 15).to_f64_vec();
    let inputs = [
        Tensor::from_f64(Dtype::Fp32, &[n, cn], &av).unwrap(),
        Tensor::from_f64(Dtype::Fp32, &[n, cn], &bv).unwrap(),
    ];
    let each = |f: &dyn Fn(f64, f64) -> f64| -> Vec<f64> {
        av.iter().zip(&bv).map(|(a, b)| f(*a, *b)).collect()
    };
    check(&c, "mse", &inputs, &each(&|a, b| (a - b) * (a - b)), 1e-6);
    let sl1 = |a: f64, b: f64| {
        let d = (a - b).abs();
        if d < 0.5 {
            d * d
        } else {
            d - 0.25
        }
    };
    check(&c, "sl1", &inputs, &each(&sl1), 1e-6);
    let hub = |a: f64, b: f64| {
        let d = (a - b).abs();
        if d < 0.7 {
            0.5 * d * d
        } else {
            0.7 * (d - 0.35)
        }
    };
    check(&c, "hub", &inputs, &each(&hub), 1e-6);
    let bce = |a: f64, b: f64| {
        let (x, y) = (40.0 * a, 1.0 / (1.0 + (-b).exp()));
        let sp = (-x.abs()).exp().ln_1p() + (-x).max(0.0);
        (1.0 - y) * x + (1.0 + y) * sp
    };
    check(&c, "bce", &inputs, &each(&bce), 1e-5);
    let log_softmax =
        |x: &[f64]| -> Vec<f64> { softmax_rows(x, cn).iter().map(|p| p.ln()).collect() };
    let (la, pb) = (log_softmax(&av), softmax_rows(&bv, cn));
    let kl: Vec<f64> = la.iter().zip(&pb).map(|(l, p)| p * (p.ln() - l)).collect();
    check(&c, "kl", &inputs, &kl, 1e-5);
    let rows = |v: &[f64]| -> Vec<Vec<f64>> { v.chunks(cn).map(<[f64]>::to_vec).collect() };
    let (ra, rb) = (rows(&av), rows(&bv));
    let norm = |r: &[f64]| r.iter().map(|v| v * v).sum::<f64>().sqrt();
    let cos: Vec<f64> = (ra.iter().zip(&rb))
        .map(|(a, b)| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>() / norm(a) / norm(b))
        .collect();
    check(&c, "cos", &inputs, &cos, 1e-5);
    // Broadcast operands: every pair of rows.
    let pairs: Vec<f64> = (ra.iter())
        .flat_map(|a| {
            rb.iter()
                .map(move |b| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>() / norm(a) / norm(b))
        })
        .collect();
    check(&c, "cosp", &inputs, &pairs, 1e-5);
    let cd: Vec<f64> = (ra.iter())
        .flat_map(|a| {
            rb.iter()
                .map(move |b| a.iter().zip(b).map(|(x, y)| (x - y).abs()).sum())
        })
        .collect();
    check(&c, "cd", &inputs, &cd, 1e-5);
    let col = |j: usize| {
        (0..n)
            .map(|i| av[i * cn + j] * av[i * cn + j])
            .sum::<f64>()
            .sqrt()
    };
    let nrm: Vec<f64> = av
        .iter()
        .enumerate()
        .map(|(k, v)| v / col(k % cn))
        .collect();
    check(&c, "nrm", &inputs, &nrm, 1e-5);
    let labels = [2.0, -100.0, 0.0, 5.0, 1.0];
    let y = Tensor::from_f64(Dtype::Int32, &[n], &labels).unwrap();
    let nll: Vec<f64> = (labels.iter().enumerate())
        .map(|(i, &l)| {
            if l < 0.0 {
                0.0
            } else {
                -av[i * cn + l as usize]
            }
        })
        .collect();
    check(&c, "nll", &[inputs[0].clone(), y.clone()], &nll, 0.0);
    // torch's mean of the rows not ignored (4 of 5), and of every element.
    check(
        &c,
        "nllm",
        &[inputs[0].clone(), y],
        &[nll.iter().sum::<f64>() / 4.0],
        1e-6,
    );
    let squares = each(&|a, b| (a - b) * (a - b));
    let mean = squares.iter().sum::<f64>() / squares.len() as f64;
    check(&c, "msem", &inputs, &[mean], 1e-6);
    check(&c, "huls", &inputs, &[each(&hub).iter().sum()], 1e-5);
}

/// `cummax` / `cummin` and their indices along both axes (ties to the
/// last index, a NaN kept from where it appears), of ints too,
/// `logcumsumexp` with values far apart (each prefix its own shift) and
/// `cumprod`; both axes longer than a scan kernel's chunk, so that the
/// running value crosses chunks.
#[test]
fn running_scans() {
    let c = source(
        "op mx0(x: tensor<R, C, fp32>) { return cummax(x, axis = 0); }
         op mn1(x: tensor<R, C, fp32>) { return cummin(x); }
         op ix1(x: tensor<R, C, fp32>) { return cummax_indices(x); }
         op in0(x: tensor<R, C, fp32>) { return cummin_indices(x, 0); }
         op ints(x: tensor<R, C, fp32>) { return cummax(x as int32); }
         op lse(x: tensor<R, C, fp32>) { return logcumsumexp(x * 30.0); }
         op huge(x: tensor<R, C, fp32>) { return logcumsumexp(x * 1e20); }
         op pr0(x: tensor<R, C, fp32>) { return cumprod(1.0 + x / 64.0, 0); }
         op d0(x: tensor<R, C, fp32>) { return diff(x, axis = 0); }",
    );
    let (r, cn) = (37, 75);
    let mut xv: Vec<f64> = rnd(Dtype::Fp32, &[r, cn], 16)
        .to_f64_vec()
        .iter()
        .map(|v| (v * 4.0).round() / 2.0)
        .collect();
    xv[12] = f64::NAN;
    xv[9 * cn + 40] = f64::NAN;
    let x = Tensor::from_f64(Dtype::Fp32, &[r, cn], &xv).unwrap();
    let inputs = [x];
    let at = |i: usize, j: usize| xv[i * cn + j];
    // (value, index) of the running max (or min) of line `get` of length n.
    let running = |n: usize, get: &dyn Fn(usize) -> f64, most: bool| -> Vec<(f64, usize)> {
        let mut best = (get(0), 0);
        (0..n)
            .map(|k| {
                let v = get(k);
                let better = if most { v >= best.0 } else { v <= best.0 };
                if k == 0 || v.is_nan() || (!best.0.is_nan() && better) {
                    best = (v, k);
                }
                best
            })
            .collect()
    };
    let by_rows = |most: bool| -> Vec<(f64, usize)> {
        (0..r)
            .flat_map(|i| running(cn, &|j| at(i, j), most))
            .collect()
    };
    let by_cols = |most: bool| -> Vec<(f64, usize)> {
        let cols: Vec<Vec<(f64, usize)>> =
            (0..cn).map(|j| running(r, &|i| at(i, j), most)).collect();
        (0..r)
            .flat_map(|i| cols.iter().map(move |c| c[i]))
            .collect()
    };
    let values = |v: Vec<(f64, usize)>| v.iter().map(|p| p.0).collect::<Vec<_>>();
    let indices = |v: Vec<(f64, usize)>| v.iter().map(|p| p.1 as f64).collect::<Vec<_>>();
    check(&c, "mx0", &inputs, &values(by_cols(true)), 0.0);
    check(&c, "mn1", &inputs, &values(by_rows(false)), 0.0);
    check(&c, "ix1", &inputs, &indices(by_rows(true)), 0.0);
    check(&c, "in0", &inputs, &indices(by_cols(false)), 0.0);
    let ints: Vec<f64> = (0..r)
        .flat_map(|i| {
            let row: Vec<f64> = (0..cn)
                .map(|j| {
                    if at(i, j).is_nan() {
                        0.0
                    } else {
                        at(i, j).trunc()
                    }
                })
                .collect();
            running(cn, &|j| row[j], true).into_iter().map(|p| p.0)
        })
        .collect();
    check(&c, "ints", &inputs, &ints, 0.0);
    // Each prefix's logsumexp of the elements times `scale`, by rows.
    let prefix_lse = |scale: f64| -> Vec<f64> {
        (0..r)
            .flat_map(|i| {
                (0..cn).map(move |j| {
                    let pre: Vec<f64> = (0..=j).map(|k| at(i, k) * scale).collect();
                    if pre.iter().any(|v| v.is_nan()) {
                        return f64::NAN;
                    }
                    let m = pre.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    m + pre.iter().map(|v| (v - m).exp()).sum::<f64>().ln()
                })
            })
            .collect()
    };
    check(&c, "lse", &inputs, &prefix_lse(30.0), 1e-6);
    // Values of 1e20: exp(v - m) must not lose v - m = 0 to the rounding of
    // m·log2 e (the GPU path's fused exp gave -inf here).
    check(&c, "huge", &inputs, &prefix_lse(1e20), 1e-6);
    let mut pr0 = vec![0.0; r * cn];
    for j in 0..cn {
        let mut run = 1.0;
        for i in 0..r {
            run *= 1.0 + at(i, j) / 64.0;
            pr0[i * cn + j] = run;
        }
    }
    check(&c, "pr0", &inputs, &pr0, 1e-5);
    let d0: Vec<f64> = (0..r - 1)
        .flat_map(|i| (0..cn).map(move |j| at(i + 1, j) - at(i, j)))
        .collect();
    check(&c, "d0", &inputs, &d0, 0.0);
}

/// `median` (the lower one, NaN where a NaN is among the values) and
/// `quantile` with numpy's linear method, along either axis.
#[test]
fn medians_and_quantiles() {
    let c = source(
        "op m1(x: tensor<R, C, fp32>) { return median(x); }
         op m0(x: tensor<R, C, fp32>) { return median(x, axis = 0, keepdims = true); }
         op q1(x: tensor<R, C, fp32>) { return quantile(x, 0.3); }
         op q0(x: tensor<R, C, fp32>) { return quantile(x, 0.9, axis = 0); }",
    );
    let (r, cn) = (6, 8);
    let mut xv = rnd(Dtype::Fp32, &[r, cn], 17).to_f64_vec();
    xv[3] = xv[5];
    xv[cn + 2] = f64::NAN;
    let inputs = [Tensor::from_f64(Dtype::Fp32, &[r, cn], &xv).unwrap()];
    let quant = |line: Vec<f64>, q: Option<f64>| -> f64 {
        if line.iter().any(|v| v.is_nan()) {
            return f64::NAN;
        }
        let mut s = line;
        s.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let n = s.len();
        match q {
            None => s[(n - 1) / 2],
            Some(q) => {
                let at = q * (n - 1) as f64;
                let lo = at.floor() as usize;
                s[lo] + (s[(lo + 1).min(n - 1)] - s[lo]) * (at - lo as f64)
            }
        }
    };
    let row = |i: usize| xv[i * cn..(i + 1) * cn].to_vec();
    let col = |j: usize| (0..r).map(|i| xv[i * cn + j]).collect::<Vec<_>>();
    let m1: Vec<f64> = (0..r).map(|i| quant(row(i), None)).collect();
    check(&c, "m1", &inputs, &m1, 0.0);
    let m0: Vec<f64> = (0..cn).map(|j| quant(col(j), None)).collect();
    check(&c, "m0", &inputs, &m0, 0.0);
    let q1: Vec<f64> = (0..r).map(|i| quant(row(i), Some(0.3))).collect();
    check(&c, "q1", &inputs, &q1, 1e-6);
    let q0: Vec<f64> = (0..cn).map(|j| quant(col(j), Some(0.9))).collect();
    check(&c, "q0", &inputs, &q0, 1e-6);
}

/// `remainder` / `floor_divide` / `fmod` of floats and ints against
/// Python's and C's rules (a scalar divisor of either sign), `norm` of
/// several orders, `eye` and `linspace`.
#[test]
fn remainders_norms_and_ranges() {
    let c = source(
        "op rem(x: tensor<N, fp32>) { return remainder(x, -0.75); }
         op fdiv(x: tensor<N, fp32>) { return floor_divide(x, 0.3); }
         op irem(x: tensor<N, fp32>) { return remainder(x as int32, 3) * 100 + floor_divide(x as int32, -4) + fmod(x as int32, 3) * 10000; }
         op n3(x: tensor<N, fp32>) { return norm(x, 3.0, axis = 0); }
         op ninf(x: tensor<N, fp32>) { return norm(x, -inf, axis = 0); }
         op e(x: tensor<N, fp32>) { return eye(3, 4); }
         op ls(x: tensor<N, fp32>) { return linspace(-1.0, 2.0, 7); }",
    );
    let xv: Vec<f64> = (0..40).map(|i| (i as f64 - 20.0) * 0.37).collect();
    let inputs = [Tensor::from_f64(Dtype::Fp32, &[40], &xv).unwrap()];
    let f32s: Vec<f64> = xv.iter().map(|v| *v as f32 as f64).collect();
    let py_mod = |a: f64, b: f64| {
        let r = a % b;
        if r != 0.0 && (r < 0.0) != (b < 0.0) {
            r + b
        } else {
            r
        }
    };
    let b = -0.75f32 as f64;
    check(
        &c,
        "rem",
        &inputs,
        &f32s.iter().map(|a| py_mod(*a, b)).collect::<Vec<_>>(),
        1e-6,
    );
    let b = 0.3f32 as f64;
    let fd: Vec<f64> = f32s
        .iter()
        .map(|a| ((a - a % b) / b).round() - f64::from(u8::from(py_mod(*a, b) != a % b)))
        .collect();
    check(&c, "fdiv", &inputs, &fd, 0.0);
    let ints: Vec<f64> = (f32s.iter())
        .map(|a| {
            let a = a.trunc() as i64;
            (a.rem_euclid(3) * 100
                + a.div_euclid(-4)
                + if a.rem_euclid(-4) != 0 { -1 } else { 0 }
                + (a % 3) * 10000) as f64
        })
        .collect();
    check(&c, "irem", &inputs, &ints, 0.0);
    let n3 = f32s.iter().map(|v| v.abs().powi(3)).sum::<f64>().cbrt();
    check(&c, "n3", &inputs, &[n3], 1e-5);
    let smallest = f32s.iter().fold(f64::INFINITY, |m, v| m.min(v.abs()));
    check(&c, "ninf", &inputs, &[smallest], 0.0);
    let eye: Vec<f64> = (0..12)
        .map(|k| f64::from(u8::from(k / 4 == k % 4)))
        .collect();
    check(&c, "e", &inputs, &eye, 0.0);
    let ls: Vec<f64> = (0..7).map(|i| -1.0 + 0.5 * i as f64).collect();
    check(&c, "ls", &inputs, &ls, 1e-7);
}

/// The `str` attributes of std: `pad`'s four modes (numpy's constant,
/// edge, reflect and wrap) and `gelu`'s tanh form.
#[test]
fn string_modes() {
    let c = source(
        "import std.nn;
         op c(x: tensor<R, N, fp32>) { return pad(x, 2, 3, value = 1.5); }
         op e(x: tensor<R, N, fp32>) { return pad(x, 3, 1, mode = \"replicate\"); }
         op r(x: tensor<R, N, fp32>) { return pad(x, 2, 3, mode = \"reflect\"); }
         op w(x: tensor<R, N, fp32>) { return pad(x, 4, 2, mode = \"circular\"); }
         op g(x: tensor<R, N, fp32>) { return gelu(x * 3.0, approximate = \"tanh\"); }",
    );
    let (r, n) = (3, 5);
    let xv = rnd(Dtype::Fp32, &[r, n], 18).to_f64_vec();
    let inputs = [Tensor::from_f64(Dtype::Fp32, &[r, n], &xv).unwrap()];
    let padded = |left: i64, right: i64, at: &dyn Fn(i64) -> Option<usize>| -> Vec<f64> {
        lines(&xv, n, |l| {
            (-left..n as i64 + right)
                .map(|i| at(i).map_or(1.5, |j| l[j]))
                .collect()
        })
    };
    let m = n as i64;
    let inside = |i: i64| (0..m).contains(&i).then_some(i as usize);
    check(&c, "c", &inputs, &padded(2, 3, &inside), 0.0);
    let edge = |i: i64| Some(i.clamp(0, m - 1) as usize);
    check(&c, "e", &inputs, &padded(3, 1, &edge), 0.0);
    let mirror = |i: i64| {
        Some(if i < 0 {
            -i
        } else if i >= m {
            2 * (m - 1) - i
        } else {
            i
        } as usize)
    };
    check(&c, "r", &inputs, &padded(2, 3, &mirror), 0.0);
    let wrap = |i: i64| Some(i.rem_euclid(m) as usize);
    check(&c, "w", &inputs, &padded(4, 2, &wrap), 0.0);
    let tanh_gelu: Vec<f64> = (xv.iter())
        .map(|v| {
            let x = 3.0 * v;
            0.5 * x
                * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh())
        })
        .collect();
    check(&c, "g", &inputs, &tanh_gelu, 1e-5);
}

/// `nansum` / `nanmean` (a row of NaN only: 0 and NaN), `histc` (the
/// upper bound in the last bin, NaN and outliers in none) and
/// `embedding_bag`'s three modes.
#[test]
fn nan_reductions_histograms_and_bags() {
    let c = source(
        "import std.nn;
         op s(x: tensor<R, C, fp32>) { return nansum(x); }
         op m(x: tensor<R, C, fp32>) { return nanmean(x); }
         op h(x: tensor<R, C, fp32>) { return histc(x, 5, -1.0, 1.5); }
         op bag(x: tensor<R, C, fp32>, ids: tensor<B, L, int32>) { return embedding_bag(x, ids); }
         op bmax(x: tensor<R, C, fp32>, ids: tensor<B, L, int32>) { return embedding_bag(x, ids, mode = \"max\"); }",
    );
    let (r, cn) = (4, 6);
    let mut xv = rnd(Dtype::Fp32, &[r, cn], 19).to_f64_vec();
    xv[2] = f64::NAN;
    xv[cn..2 * cn].fill(f64::NAN);
    xv[3 * cn] = 1.5;
    let x = Tensor::from_f64(Dtype::Fp32, &[r, cn], &xv).unwrap();
    let inputs = [x.clone()];
    let rows: Vec<&[f64]> = xv.chunks(cn).collect();
    let kept = |row: &[f64]| {
        row.iter()
            .copied()
            .filter(|v| !v.is_nan())
            .collect::<Vec<_>>()
    };
    let sums: Vec<f64> = rows.iter().map(|row| kept(row).iter().sum()).collect();
    check(&c, "s", &inputs, &sums, 1e-6);
    let means: Vec<f64> = rows
        .iter()
        .map(|row| kept(row).iter().sum::<f64>() / kept(row).len() as f64)
        .collect();
    check(&c, "m", &inputs, &means, 1e-6);
    let mut counts = [0.0; 5];
    for v in xv.iter().filter(|v| (-1.0..=1.5).contains(*v)) {
        counts[(((v + 1.0) * 2.0).floor() as usize).min(4)] += 1.0;
    }
    check(&c, "h", &inputs, &counts, 0.0);
    let clean: Vec<f64> = xv
        .iter()
        .map(|v| if v.is_nan() { 0.0 } else { *v })
        .collect();
    let table = Tensor::from_f64(Dtype::Fp32, &[r, cn], &clean).unwrap();
    let ids = [0.0, 3.0, 3.0, 2.0, 1.0, 0.0];
    let idt = Tensor::from_f64(Dtype::Int32, &[2, 3], &ids).unwrap();
    let clean = &clean;
    let bag = |max: bool| -> Vec<f64> {
        (ids.chunks(3))
            .flat_map(|b| {
                (0..cn).map(move |j| {
                    let vals = b.iter().map(|&i| clean[i as usize * cn + j]);
                    if max {
                        vals.fold(f64::NEG_INFINITY, f64::max)
                    } else {
                        vals.sum::<f64>() / 3.0
                    }
                })
            })
            .collect()
    };
    check(&c, "bag", &[table.clone(), idt.clone()], &bag(false), 1e-6);
    check(&c, "bmax", &[table, idt], &bag(true), 0.0);
}

/// `einsum`: a batched product with a summed head axis, numpy's implicit
/// result, three operands contracted in turn, a transpose and a total.
#[test]
fn einsums() {
    let c = source(
        "op qk(q: tensor<B, H, S, D, fp32>, k: tensor<B, H, T, D, fp32>) { return einsum(\"bhsd,bhtd->bts\", [q, k]); }
         op mm(a: tensor<M, K, fp32>, b: tensor<K, N, fp32>) { return einsum(\"ik,kj\", [a, b]); }
         op three(a: tensor<M, K, fp32>, b: tensor<K, N, fp32>, v: tensor<N, fp32>) { return einsum(\"ik,kj,j->i\", [a, b, v]); }
         op t(a: tensor<M, K, fp32>) { return einsum(\"ij->ji\", [a]); }
         op all(a: tensor<M, K, fp32>) { return einsum(\"ij->\", [a]); }",
    );
    let (b, h, s, t, d) = (2, 3, 4, 5, 6);
    let q = rnd(Dtype::Fp32, &[b, h, s, d], 20);
    let k = rnd(Dtype::Fp32, &[b, h, t, d], 21);
    let (qv, kv) = (q.to_f64_vec(), k.to_f64_vec());
    let mut want = vec![0.0; b * t * s];
    for (bi, ti, si) in
        (0..b).flat_map(|x| (0..t).flat_map(move |y| (0..s).map(move |z| (x, y, z))))
    {
        want[(bi * t + ti) * s + si] = (0..h)
            .flat_map(|hi| (0..d).map(move |di| (hi, di)))
            .map(|(hi, di)| {
                qv[((bi * h + hi) * s + si) * d + di] * kv[((bi * h + hi) * t + ti) * d + di]
            })
            .sum();
    }
    check(&c, "qk", &[q, k], &want, 1e-5);
    let (m, kk, n) = (5, 7, 4);
    let a = rnd(Dtype::Fp32, &[m, kk], 22);
    let bm = rnd(Dtype::Fp32, &[kk, n], 23);
    let v = rnd(Dtype::Fp32, &[n], 24);
    let ab = matmul(&a.to_f64_vec(), &bm.to_f64_vec(), m, kk, n);
    check(&c, "mm", &[a.clone(), bm.clone()], &ab, 1e-5);
    let vv = v.to_f64_vec();
    let abv: Vec<f64> = ab
        .chunks(n)
        .map(|r| r.iter().zip(&vv).map(|(x, y)| x * y).sum())
        .collect();
    check(&c, "three", &[a.clone(), bm, v], &abv, 1e-5);
    let av = a.to_f64_vec();
    check(&c, "t", &[a.clone()], &swap_last(&av, m, kk), 0.0);
    check(&c, "all", &[a], &[av.iter().sum()], 1e-5);
}

/// `conv_transpose2d` (stride, padding, output padding, groups and
/// dilation) as the scatter it is the gradient of, and `unfold` (torch's
/// im2col) as the windows it gathers.
#[test]
fn transposed_convolutions_and_unfold() {
    let c = source(
        "import std.nn;
         op ct(x: tensor<B, C, H, W, fp32>, w: tensor<C, G, K, K, fp32>) { return conv_transpose2d(x, w, stride = 2, padding = 1, output_padding = 1); }
         op ctg(x: tensor<B, C, H, W, fp32>, w: tensor<C, G, K, K, fp32>) { return conv_transpose2d(x, w, stride = 3, padding = 2, groups = 2, dilation = 2); }
         op u(x: tensor<B, C, H, W, fp32>) { return unfold(x, 3, padding = 1, stride = 2); }",
    );
    let (b, cn, h, w, og, k) = (2, 4, 4, 5, 3, 3);
    let x = rnd(Dtype::Fp32, &[b, cn, h, w], 25);
    let wt = rnd(Dtype::Fp32, &[cn, og, k, k], 26);
    let (xv, wv) = (x.to_f64_vec(), wt.to_f64_vec());
    // (stride, padding, output padding, groups, dilation)
    let transposed = |(s, p, op, g, d): (usize, usize, usize, usize, usize)| -> Vec<f64> {
        let (ho, wo) = (
            (h - 1) * s + d * (k - 1) + op + 1 - 2 * p,
            (w - 1) * s + d * (k - 1) + op + 1 - 2 * p,
        );
        let o = og * g;
        let mut out = vec![0.0; b * o * ho * wo];
        for (bi, ci, i, j, oi, ki, kj) in (0..b).flat_map(|bi| {
            (0..cn).flat_map(move |ci| {
                (0..h).flat_map(move |i| {
                    (0..w).flat_map(move |j| {
                        (0..og).flat_map(move |oi| {
                            (0..k).flat_map(move |ki| {
                                (0..k).map(move |kj| (bi, ci, i, j, oi, ki, kj))
                            })
                        })
                    })
                })
            })
        }) {
            let (r, q) = (
                (i * s + ki * d) as i64 - p as i64,
                (j * s + kj * d) as i64 - p as i64,
            );
            if r < 0 || q < 0 || r >= ho as i64 || q >= wo as i64 {
                continue;
            }
            let oc = ci / (cn / g) * og + oi;
            out[((bi * o + oc) * ho + r as usize) * wo + q as usize] +=
                xv[((bi * cn + ci) * h + i) * w + j] * wv[((ci * og + oi) * k + ki) * k + kj];
        }
        out
    };
    check(
        &c,
        "ct",
        &[x.clone(), wt.clone()],
        &transposed((2, 1, 1, 1, 1)),
        1e-5,
    );
    check(
        &c,
        "ctg",
        &[x.clone(), wt],
        &transposed((3, 2, 0, 2, 2)),
        1e-5,
    );
    let (oh, ow) = ((h + 2 - 3) / 2 + 1, (w + 2 - 3) / 2 + 1);
    let mut cols = vec![0.0; b * cn * k * k * oh * ow];
    for (bi, ci, ki, kj, i, j) in (0..b).flat_map(|bi| {
        (0..cn).flat_map(move |ci| {
            (0..k).flat_map(move |ki| {
                (0..k).flat_map(move |kj| {
                    (0..oh).flat_map(move |i| (0..ow).map(move |j| (bi, ci, ki, kj, i, j)))
                })
            })
        })
    }) {
        let (r, q) = ((i * 2 + ki) as i64 - 1, (j * 2 + kj) as i64 - 1);
        let inside = (0..h as i64).contains(&r) && (0..w as i64).contains(&q);
        let v = if inside {
            xv[((bi * cn + ci) * h + r as usize) * w + q as usize]
        } else {
            0.0
        };
        cols[(((bi * cn + ci) * k + ki) * k + kj) * oh * ow + i * ow + j] = v;
    }
    check(&c, "u", &[x], &cols, 0.0);
}

/// Scans of lines past 4096 elements run in segments of 1024, each joined
/// with the scan of the totals before it: running sums (fp32 within a
/// float sum's rounding, int32 exactly), maxima with a NaN that carries
/// across segments, minima and products, along either axis.
#[test]
fn long_scans() {
    let c = source(
        "op s1(x: tensor<R, C, fp32>) { return cumsum(x); }
         op s0(x: tensor<C, R, fp32>) { return cumsum(x, axis = 0); }
         op si(x: tensor<R, C, fp32>) { return cumsum(x as int32); }
         op mx(x: tensor<R, C, fp32>) { return cummax(x); }
         op mn0(x: tensor<C, R, fp32>) { return cummin(x, axis = 0); }
         op pr(x: tensor<R, C, fp32>) { return cumprod(1.0 + x / 4096.0); }",
    );
    let (r, n) = (2, 5000);
    let mut xv: Vec<f64> = rnd(Dtype::Fp32, &[r, n], 21)
        .to_f64_vec()
        .iter()
        .map(|v| (v * 8.0).round() / 4.0)
        .collect();
    let x = Tensor::from_f64(Dtype::Fp32, &[r, n], &xv).unwrap();
    let xt = swap_last(&xv, r, n);
    let t = Tensor::from_f64(Dtype::Fp32, &[n, r], &xt).unwrap();
    let running = |line: &[f64], f: &dyn Fn(f64, f64) -> f64| -> Vec<f64> {
        let mut acc: Option<f64> = None;
        line.iter()
            .map(|v| {
                let next = acc.map_or(*v, |a| f(a, *v));
                acc = Some(next);
                next
            })
            .collect()
    };
    let sum = |a: f64, b: f64| a + b;
    let max = |a: f64, b: f64| {
        if a.is_nan() || b.is_nan() {
            f64::NAN
        } else {
            a.max(b)
        }
    };
    let min = |a: f64, b: f64| {
        if a.is_nan() || b.is_nan() {
            f64::NAN
        } else {
            a.min(b)
        }
    };
    // Quarters sum exactly in fp32 here: every prefix is a multiple of 1/4
    // below 2^21.
    check(
        &c,
        "s1",
        &[x.clone()],
        &lines(&xv, n, |l| running(l, &sum)),
        0.0,
    );
    let cols = swap_last(&lines(&xv, n, |l| running(l, &sum)), r, n);
    check(&c, "s0", &[t.clone()], &cols, 0.0);
    let ints: Vec<f64> = xv.iter().map(|v| v.trunc()).collect();
    check(
        &c,
        "si",
        &[x.clone()],
        &lines(&ints, n, |l| running(l, &sum)),
        0.0,
    );
    let prod = lines(&xv, n, |l| {
        let scaled: Vec<f64> = l.iter().map(|v| 1.0 + v / 4096.0).collect();
        running(&scaled, &|a, b| a * b)
    });
    check(&c, "pr", &[x.clone()], &prod, 1e-4);
    // A NaN in the second segment of row 0 carries to its end.
    xv[1500] = f64::NAN;
    let x = Tensor::from_f64(Dtype::Fp32, &[r, n], &xv).unwrap();
    check(&c, "mx", &[x], &lines(&xv, n, |l| running(l, &max)), 0.0);
    let t = Tensor::from_f64(Dtype::Fp32, &[n, r], &swap_last(&xv, r, n)).unwrap();
    let cols = swap_last(&lines(&xv, n, |l| running(l, &min)), r, n);
    check(&c, "mn0", &[t], &cols, 0.0);
}

/// torch's conv2d (NCHW) in f64: `(stride, padding, dilation, groups)`.
fn conv2d_ref(
    (x, [b, cn, h, w]): (&[f64], [usize; 4]),
    (wt, [o, cg, kh, kw]): (&[f64], [usize; 4]),
    (s, p, d, g): (usize, usize, usize, usize),
) -> Vec<f64> {
    let out = |n: usize, k: usize| (n + 2 * p - d * (k - 1) - 1) / s + 1;
    let (ho, wo) = (out(h, kh), out(w, kw));
    let og = o / g;
    let mut y = vec![0.0; b * o * ho * wo];
    for (bi, oc, i, j) in (0..b).flat_map(|bi| {
        (0..o).flat_map(move |oc| (0..ho).flat_map(move |i| (0..wo).map(move |j| (bi, oc, i, j))))
    }) {
        let mut acc = 0.0;
        for (ci, ki, kj) in
            (0..cg).flat_map(|ci| (0..kh).flat_map(move |ki| (0..kw).map(move |kj| (ci, ki, kj))))
        {
            let (r, q) = (
                (i * s + ki * d) as i64 - p as i64,
                (j * s + kj * d) as i64 - p as i64,
            );
            if r < 0 || q < 0 || r >= h as i64 || q >= w as i64 {
                continue;
            }
            let c = oc / og * cg + ci;
            acc += x[((bi * cn + c) * h + r as usize) * w + q as usize]
                * wt[((oc * cg + ci) * kh + ki) * kw + kj];
        }
        y[((bi * o + oc) * ho + i) * wo + j] = acc;
    }
    y
}

/// Convolutions whose groups have at most 4 output channels (depthwise,
/// with a channel multiplier, narrow groups, a 9 x 9 window past the
/// unrolled taps) are summed directly per output element; a wider one is
/// an implicit GEMM. Both against the f64 definition, with stride,
/// padding and dilation, and conv1d's causal form.
#[test]
fn narrow_group_convolutions() {
    let c = source(
        "import std.nn;
         op dw(x: tensor<B, C, H, W, fp32>, w: tensor<C, 1, K, K, fp32>) { return conv2d(x, w, padding = 1, groups = C); }
         op mult(x: tensor<B, C, H, W, fp32>, w: tensor<O, 1, KH, KW, fp32>) { return conv2d(x, w, stride = 2, padding = 2, dilation = 2, groups = C); }
         op narrow(x: tensor<B, C, H, W, fp32>, w: tensor<O, G, K, K, fp32>) { return conv2d(x, w, padding = 1, groups = 2); }
         op wide_window(x: tensor<B, C, H, W, fp32>, w: tensor<C, 1, K, K, fp32>) { return conv2d(x, w, padding = 4, groups = C); }
         op dense(x: tensor<B, C, H, W, fp32>, w: tensor<O, C, K, K, fp32>) { return conv2d(x, w, stride = 2, padding = 1); }
         op causal(x: tensor<B, C, L, fp32>, w: tensor<C, 1, K, fp32>) { return conv1d(x, w, padding = K - 1, groups = C)[:, :, 0:L]; }",
    );
    let (b, cn, h, w) = (2, 6, 9, 11);
    let x = rnd(Dtype::Fp32, &[b, cn, h, w], 31);
    let xv = x.to_f64_vec();
    let shape = [b, cn, h, w];
    let cases: [(&str, [usize; 4], (usize, usize, usize, usize)); 5] = [
        ("dw", [cn, 1, 3, 3], (1, 1, 1, cn)),
        ("mult", [2 * cn, 1, 3, 5], (2, 2, 2, cn)),
        ("narrow", [4, cn / 2, 3, 3], (1, 1, 1, 2)),
        ("wide_window", [cn, 1, 9, 9], (1, 4, 1, cn)),
        ("dense", [8, cn, 3, 3], (2, 1, 1, 1)),
    ];
    for (i, (op, wdims, geom)) in cases.into_iter().enumerate() {
        let wt = rnd(Dtype::Fp32, &wdims, 40 + i as u64);
        let want = conv2d_ref((&xv, shape), (&wt.to_f64_vec(), wdims), geom);
        check(&c, op, &[x.clone(), wt], &want, 1e-5);
    }
    // Mamba's causal conv: the first L outputs of a conv padded by K - 1.
    let (l, k) = (37, 4);
    let xs = rnd(Dtype::Fp32, &[b, cn, l], 50);
    let ws = rnd(Dtype::Fp32, &[cn, 1, k], 51);
    let (xv, wv) = (xs.to_f64_vec(), ws.to_f64_vec());
    let mut want = vec![0.0; b * cn * l];
    for (bi, ci, t) in
        (0..b).flat_map(|bi| (0..cn).flat_map(move |ci| (0..l).map(move |t| (bi, ci, t))))
    {
        want[(bi * cn + ci) * l + t] = (0..k)
            .filter(|j| t + j >= k - 1)
            .map(|j| xv[(bi * cn + ci) * l + t + j - (k - 1)] * wv[ci * k + j])
            .sum();
    }
    check(&c, "causal", &[xs, ws], &want, 1e-5);
}

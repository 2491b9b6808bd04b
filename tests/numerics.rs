//! Numerical tests of the backends: examples and stdlib ops on random
//! inputs with ragged shapes, against float64 references written out here
//! by hand (independent of the compiler), and against the backend's own
//! f64 reference mode for the rest. Each test runs on the CPU backend (or
//! the GPU with `TESSERA_TEST_BACKEND=cuda`), and again, as `*_sim`, on
//! the GPU simulator running the PTX the NVIDIA backend emits. The
//! numerics policies and precision modes are tested in `policies.rs`.

#[macro_use]
#[path = "common/numerics.rs"]
mod common;

use common::*;

on_sim!(
    gemm_bf16_ragged => gemm_bf16_ragged_sim,
    gemm_bf16_aligned => gemm_bf16_aligned_sim,
    softmax_fp32_ragged => softmax_fp32_ragged_sim,
    layernorm_fp32_ragged => layernorm_fp32_ragged_sim,
    attention_bf16_ragged => attention_bf16_ragged_sim,
    mlp_fp32_ragged => mlp_fp32_ragged_sim,
    stdlib_ops_device_vs_reference => stdlib_ops_device_vs_reference_sim,
    elementwise_fp32_vectors => elementwise_fp32_vectors_sim,
    inf_literal => inf_literal_sim,
    attention_causal_gqa => attention_causal_gqa_sim,
    arange_and_new_axes => arange_and_new_axes_sim,
    join_and_select => join_and_select_sim,
    argmax_argmin => argmax_argmin_sim,
    philox_streams_agree => philox_streams_agree_sim,
    integer_matmul_is_exact => integer_matmul_is_exact_sim,
    sin_cos_are_accurate => sin_cos_are_accurate_sim,
    transformer_block => transformer_block_sim,
    cumulative_sums => cumulative_sums_sim,
    flash_attention_at_tile_level => flash_attention_at_tile_level_sim,
    indices_out_of_range_fail => indices_out_of_range_fail_sim,
    integers_and_casts_are_exact => integers_and_casts_are_exact_sim,
    attention_at_large_head_dims => attention_at_large_head_dims_sim,
);

#[test]
fn gemm_bf16_ragged() {
    let c = example("matmul.tsr");
    let (m, k, n) = (67, 45, 83);
    let a = rnd(Dtype::Bf16, &[m, k], 1);
    let b = rnd(Dtype::Bf16, &[k, n], 2);
    let got = run(&c, "gemm", &[a.clone(), b.clone()], Mode::Device);
    assert_eq!((got.dtype, got.shape.clone()), (Dtype::Bf16, vec![m, n]));
    let want = matmul(&a.to_f64_vec(), &b.to_f64_vec(), m, k, n);
    let e = rel_err(&got.to_f64_vec(), &want);
    assert!(e < 1e-2, "bf16 gemm error {e}");
    assert!(e > 0.0, "bf16 output must be rounded");
}

/// Rows that are whole 16-byte chunks: operands are staged with
/// `cp.async` on the GPU backends (with a ragged edge along N), through
/// the example's 3-stage software pipeline: 2 trips along K, then 7 (the
/// ring of buffers wraps around twice), then 6 and a ragged seventh; and
/// whole tiles (256³), where static specialisation removes every guard;
/// and a K loop of one trip (inlined by specialisation), whole and ragged.
#[test]
fn gemm_bf16_aligned() {
    let c = example("matmul.tsr");
    for (m, k, n) in [
        (96, 128, 136),
        (40, 448, 72),
        (40, 424, 72),
        (256, 256, 256),
        (128, 32, 128),
        (64, 24, 64),
    ] {
        let a = rnd(Dtype::Bf16, &[m, k], 3);
        let b = rnd(Dtype::Bf16, &[k, n], 4);
        let got = run(&c, "gemm", &[a.clone(), b.clone()], Mode::Device);
        let want = matmul(&a.to_f64_vec(), &b.to_f64_vec(), m, k, n);
        let e = rel_err(&got.to_f64_vec(), &want);
        assert!(e < 1e-2, "bf16 gemm {m}x{k}x{n} error {e}");
    }
}

/// The `inf` literal in an op: a bound that never binds, and infinity
/// itself, the same on every backend.
#[test]
fn inf_literal() {
    let c = source(
        "op f(x: tensor<N, fp32>) -> tensor<N, fp32> { return maximum(x, -inf) + 1.0 / inf; }
         op g(x: tensor<N, fp32>) -> tensor<N, fp32> { return x * 0.0 + inf; }",
    );
    let x = rnd(Dtype::Fp32, &[37], 5);
    let f = run(&c, "f", &[x.clone()], Mode::Device);
    assert_eq!(f.to_f64_vec(), x.to_f64_vec());
    let g = run(&c, "g", &[x], Mode::Device);
    assert!(g.to_f64_vec().iter().all(|v| *v == f64::INFINITY));
}

/// An elementwise op, whose loads and stores move four elements at once
/// where a group of four is whole (16-byte `ld`/`st.global.v4.f32` on the
/// GPU), at lengths that end mid-group, mid-block and below one group, and
/// on rows of a 2-D tile with a broadcast operand.
#[test]
fn elementwise_fp32_vectors() {
    let c = source(
        "op add(a: tensor<N, fp32>, b: tensor<N, fp32>) -> tensor<N, fp32> { return a + b; }
         op axpy(x: tensor<M, N, fp32>, b: tensor<N, fp32>) -> tensor<M, N, fp32> {
             return x * 2.0 + b;
         }",
    );
    for n in [4096, 3001, 1030, 5] {
        let a = rnd(Dtype::Fp32, &[n], 1);
        let b = rnd(Dtype::Fp32, &[n], 2);
        let got = run(&c, "add", &[a.clone(), b.clone()], Mode::Device);
        let want: Vec<f64> = a
            .to_f64_vec()
            .iter()
            .zip(b.to_f64_vec())
            .map(|(x, y)| (*x as f32 + y as f32) as f64)
            .collect();
        assert_eq!(got.to_f64_vec(), want, "add at n = {n}");
    }
    for (m, n) in [(33, 132), (7, 130)] {
        let x = rnd(Dtype::Fp32, &[m, n], 3);
        let b = rnd(Dtype::Fp32, &[n], 4);
        let got = run(&c, "axpy", &[x.clone(), b.clone()], Mode::Device);
        let bv = b.to_f64_vec();
        let want: Vec<f64> = x
            .to_f64_vec()
            .iter()
            .enumerate()
            .map(|(i, v)| (*v as f32 * 2.0 + bv[i % n] as f32) as f64)
            .collect();
        assert_eq!(got.to_f64_vec(), want, "axpy at {m} x {n}");
    }
}

#[test]
fn softmax_fp32_ragged() {
    let c = example("softmax.tsr");
    // Several short rows per program; one whole row per program, read
    // once and reduced in registers (4096 columns, and 3001 masked in a
    // 4096-wide tile); rows longer than a program holds, in chunks.
    for (rows, cols) in [(77, 45), (3, 4096), (5, 3001), (2, 5000)] {
        let x = rnd(Dtype::Fp32, &[rows, cols], 3);
        let got = run(&c, "softmax_rows", &[x.clone()], Mode::Device);
        let e = rel_err(&got.to_f64_vec(), &softmax_rows(&x.to_f64_vec(), cols));
        assert!(e < 1e-5, "softmax {rows}x{cols} error {e}");
    }
}

#[test]
fn layernorm_fp32_ragged() {
    for shape in [(67, 83), (3, 4096), (4, 2999)] {
        layernorm_fp32(shape);
    }
}

fn layernorm_fp32((r, cols): (usize, usize)) {
    let c = example("layernorm.tsr");
    let x = rnd(Dtype::Fp32, &[r, cols], 4);
    let g = rnd(Dtype::Fp32, &[cols], 5);
    let b = rnd(Dtype::Fp32, &[cols], 6);
    let got = run(
        &c,
        "layer_norm",
        &[x.clone(), g.clone(), b.clone()],
        Mode::Device,
    );
    let (xv, gv, bv) = (x.to_f64_vec(), g.to_f64_vec(), b.to_f64_vec());
    let mut want = Vec::new();
    for row in xv.chunks(cols) {
        let mu = row.iter().sum::<f64>() / cols as f64;
        let var = row.iter().map(|v| (v - mu) * (v - mu)).sum::<f64>() / cols as f64;
        for (j, v) in row.iter().enumerate() {
            want.push((v - mu) / (var + 1e-5).sqrt() * gv[j] + bv[j]);
        }
    }
    let e = rel_err(&got.to_f64_vec(), &want);
    assert!(e < 1e-5, "layernorm {r}x{cols} error {e}");
}

/// Attention with ragged sequences (77, 113), a head size below its tile
/// (59 in a 64-wide tile), and whole tiles (256 keys and queries: no key
/// mask, no guards after static specialisation), and one trip of the key
/// loop (64 keys).
#[test]
fn attention_bf16_ragged() {
    for shape in [
        (1, 3, 77, 64),
        (1, 2, 113, 59),
        (1, 2, 256, 64),
        (1, 2, 64, 64),
    ] {
        attention_bf16(shape);
    }
}

fn attention_bf16((b, h, n, d): (usize, usize, usize, usize)) {
    let c = example("flash_attn.tsr");
    let q = rnd(Dtype::Bf16, &[b, h, n, d], 7);
    let k = rnd(Dtype::Bf16, &[b, h, n, d], 8);
    let v = rnd(Dtype::Bf16, &[b, h, n, d], 9);
    let got = run(
        &c,
        "attention",
        &[q.clone(), k.clone(), v.clone()],
        Mode::Device,
    );
    let (qv, kv, vv) = (q.to_f64_vec(), k.to_f64_vec(), v.to_f64_vec());
    let mut want = Vec::new();
    for bh in 0..b * h {
        let off = bh * n * d;
        let (qs, ks, vs) = (
            &qv[off..off + n * d],
            &kv[off..off + n * d],
            &vv[off..off + n * d],
        );
        let mut kt = vec![0.0; n * d];
        for i in 0..n {
            for j in 0..d {
                kt[j * n + i] = ks[i * d + j];
            }
        }
        let s: Vec<f64> = matmul(qs, &kt, n, d, n)
            .iter()
            .map(|x| x / (d as f64).sqrt())
            .collect();
        want.extend(matmul(&softmax_rows(&s, n), vs, n, n, d));
    }
    let e = rel_err(&got.to_f64_vec(), &want);
    assert!(e < 1e-2, "attention {b}x{h}x{n}x{d} error {e}");
}

/// `arange` in ops (a causal mask built from two aranges and new axes,
/// fused into the softmax's row kernel; a constant range with a start) and
/// in kernels with `None` axes, `reshape`, `&&`/`||` and a broadcasting
/// `where`, against references written here.
#[test]
fn arange_and_new_axes() {
    let c = source(
        "import std.nn;
         op masked(s: tensor<N, L, fp32>) -> tensor<N, L, fp32> {
             let keep = arange(0, N)[:, None] >= arange(0, L)[None, :];
             return softmax(where(keep, s, -inf), axis = -1);
         }
         op shifted(x: tensor<3, N, fp32>) -> tensor<3, N, fp32> {
             return x * (arange(2, 5) as fp32)[:, None];
         }
         kernel tri<BM: int = 16>(a: tensor<N, fp32>, out o: tensor<N, N, fp32>)
             grid(cdiv(N, BM), cdiv(N, BM))
         {
             let rows = program_id(0) * BM + arange(0, BM);
             let cols = program_id(1) * BM + arange(0, BM);
             let x = load(a, [rows]);
             let below = (rows[:, None] >= cols[None, :]) && (reshape(rows, [BM, 1]) < N);
             let v = where(below || cols[None, :] == 0, x[:, None], -inf);
             store(o, [rows, cols], v);
         }
         op tri_op(a: tensor<N, fp32>) -> tensor<N, N, fp32> { return tri(a); }",
    );
    for (n, l) in [(5, 7), (33, 20), (130, 130)] {
        let s = rnd(Dtype::Fp32, &[n, l], 3);
        let got = run(&c, "masked", &[s.clone()], Mode::Device).to_f64_vec();
        let sv = s.to_f64_vec();
        let mut want = Vec::new();
        for i in 0..n {
            let seen = (i + 1).min(l);
            let p = softmax_rows(&sv[i * l..i * l + seen], seen);
            want.extend(p);
            want.extend(std::iter::repeat_n(0.0, l - seen));
        }
        assert!(rel_err(&got, &want) < 1e-5, "masked softmax {n}x{l}");
    }
    let x = rnd(Dtype::Fp32, &[3, 9], 4);
    let got = run(&c, "shifted", &[x.clone()], Mode::Device).to_f64_vec();
    let want: Vec<f64> = x
        .to_f64_vec()
        .iter()
        .enumerate()
        .map(|(i, v)| f64::from(*v as f32 * (2 + i / 9) as f32))
        .collect();
    assert_eq!(got, want);
    for n in [40, 16] {
        let a = rnd(Dtype::Fp32, &[n], 5);
        let av = a.to_f64_vec();
        let got = run(&c, "tri_op", &[a], Mode::Device).to_f64_vec();
        for i in 0..n {
            for j in 0..n {
                let want = if i >= j || j == 0 {
                    av[i]
                } else {
                    f64::NEG_INFINITY
                };
                assert_eq!(got[i * n + j], want, "tri at {i}, {j} of {n}");
            }
        }
    }
}

/// `permute`, `concat`, `stack`, `gather`, `take` and std.nn's
/// `logsumexp`, `cross_entropy` and `embedding`, each against a reference
/// computed here from the inputs (exact for the ones that move elements).
#[test]
fn join_and_select() {
    let c = source(
        "import std.nn;
         op perm(x: tensor<A, B, C, fp32>) -> tensor<C, A, B, fp32> { return permute(x, [2, 0, -2]); }
         op rot(x: tensor<T, D, fp32>) -> tensor<T, D, fp32> {
             return concat([-x[:, D / 2:D], x[:, 0:D / 2]], axis = -1);
         }
         op cat0(a: tensor<3, D, fp32>, b: tensor<70, D, fp32>) -> tensor<73, D, fp32> {
             return concat([a, b * 2.0]);
         }
         op stk(a: tensor<N, fp32>, b: tensor<N, fp32>) -> tensor<N, 2, fp32> { return stack([a, b], axis = 1); }
         op gat(x: tensor<N, C, fp32>, i: tensor<N, K, int32>) -> tensor<N, K, fp32> { return gather(x, i, axis = 1); }
         op emb(t: tensor<V, D, fp32>, ids: tensor<B, S, int32>) -> tensor<B, S, D, fp32> { return embedding(t, ids); }
         op lse(x: tensor<N, C, fp32>) -> tensor<N, fp32> { return logsumexp(x); }
         op xent(x: tensor<N, C, fp32>, l: tensor<N, int32>) -> tensor<N, fp32> { return cross_entropy(x, l); }",
    );
    let ints = |shape: &[usize], f: &dyn Fn(usize) -> usize| {
        let n = shape.iter().product();
        let v: Vec<f64> = (0..n).map(|i| f(i) as f64).collect();
        Tensor::from_f64(Dtype::Int32, shape, &v).unwrap()
    };
    let dev = |op: &str, inputs: &[Tensor]| run(&c, op, inputs, Mode::Device).to_f64_vec();
    // permute: out[c, a, b] = x[a, b, c].
    let (a, b, cc) = (3, 5, 7);
    let x = rnd(Dtype::Fp32, &[a, b, cc], 1);
    let xv = x.to_f64_vec();
    let want: Vec<f64> = (0..a * b * cc)
        .map(|e| {
            let (k, i, j) = (e / (a * b), e / b % a, e % b);
            xv[(i * b + j) * cc + k]
        })
        .collect();
    assert_eq!(dev("perm", &[x]), want);
    // rotate-half (RoPE's): [-x2, x1].
    let (t, d) = (5, 12);
    let x = rnd(Dtype::Fp32, &[t, d], 2);
    let xv = x.to_f64_vec();
    let want: Vec<f64> = (0..t * d)
        .map(|e| {
            let (r, col) = (e / d, e % d);
            if col < d / 2 {
                -xv[r * d + col + d / 2]
            } else {
                xv[r * d + col - d / 2]
            }
        })
        .collect();
    assert_eq!(dev("rot", &[x]), want);
    // concat along 0, ragged extents.
    let (p, q) = (
        rnd(Dtype::Fp32, &[3, 33], 3),
        rnd(Dtype::Fp32, &[70, 33], 4),
    );
    let mut want = p.to_f64_vec();
    want.extend(q.to_f64_vec().iter().map(|v| v * 2.0));
    assert_eq!(dev("cat0", &[p, q]), want);
    // stack along a new last axis.
    let (u, v) = (rnd(Dtype::Fp32, &[9], 5), rnd(Dtype::Fp32, &[9], 6));
    let want: Vec<f64> = u
        .to_f64_vec()
        .into_iter()
        .zip(v.to_f64_vec())
        .flat_map(|(a, b)| [a, b])
        .collect();
    assert_eq!(dev("stk", &[u, v]), want);
    // gather: out[n, k] = x[n, i[n, k]].
    let (n, cls, k) = (37, 11, 4);
    let x = rnd(Dtype::Fp32, &[n, cls], 7);
    let i = ints(&[n, k], &|e| (e * 7 + 3) % cls);
    let (xv, iv) = (x.to_f64_vec(), i.to_f64_vec());
    let want: Vec<f64> = (0..n * k)
        .map(|e| xv[e / k * cls + iv[e] as usize])
        .collect();
    assert_eq!(dev("gat", &[x, i]), want);
    // embedding: rows of the table.
    let (vocab, dim) = (50, 24);
    let table = rnd(Dtype::Fp32, &[vocab, dim], 8);
    let ids = ints(&[2, 9], &|e| (e * 13 + 5) % vocab);
    let (tv, idv) = (table.to_f64_vec(), ids.to_f64_vec());
    let want: Vec<f64> = idv
        .iter()
        .flat_map(|&r| tv[r as usize * dim..][..dim].to_vec())
        .collect();
    assert_eq!(dev("emb", &[table, ids]), want);
    // logsumexp and cross-entropy in f64.
    let (n, cls) = (19, 130);
    let x = rnd(Dtype::Fp32, &[n, cls], 9);
    let xv = x.to_f64_vec();
    let lse: Vec<f64> = xv
        .chunks(cls)
        .map(|r| {
            let m = r.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            m + r.iter().map(|v| (v - m).exp()).sum::<f64>().ln()
        })
        .collect();
    assert!(rel_err(&dev("lse", &[x.clone()]), &lse) < 1e-5);
    let labels = ints(&[n], &|e| (e * 31) % cls);
    let lv = labels.to_f64_vec();
    let want: Vec<f64> = (0..n)
        .map(|r| lse[r] - xv[r * cls + lv[r] as usize])
        .collect();
    assert!(rel_err(&dev("xent", &[x, labels]), &want) < 1e-5);
}

/// `let (a, b) = split(...)` / `chunk(...)` / `topk(...)`: the parts are
/// the slices they name (exactly), with a list of symbolic extents, a
/// ragged last part, a dropped part (`_`), chunks of a product dimension
/// (SwiGLU's gate and up), and topk's values with their indices.
#[test]
fn split_chunk_and_topk_parts() {
    let c = source(
        "op halves(x: tensor<T, D, fp32>) -> tensor<T, D, fp32> {
             let (a, b) = split(x, [D / 2, D / 2], axis = 1);
             return concat([b, a * 2.0], axis = 1);
         }
         op ends(x: tensor<R, C, fp32>) -> tensor<R, 3, fp32> {
             let (a, _, c) = split(x, 4, axis = -1);
             return a[:, 0:3] - c[:, 0:3];
         }
         op swiglu(h: tensor<T, 2 * F, fp32>) -> tensor<T, F, fp32> {
             let (gate, up) = chunk(h, 2, axis = -1);
             return gate * sigmoid(gate) * up;
         }
         op rows(x: tensor<R, C, fp32>) -> tensor<2, C, fp32> {
             let (a, b) = chunk(x, 2);
             return a[0:2, :] + b;
         }
         op both(x: tensor<R, C, fp32>) -> tensor<R, 8, fp32> {
             let (v, i) = topk(x, 4);
             return concat([v, i as fp32], axis = 1);
         }
         op values(x: tensor<R, C, fp32>) -> tensor<R, 4, fp32> { return topk(x, 4); }
         op idx(x: tensor<R, C, fp32>) -> tensor<R, 4, int32> { return topk_indices(x, 4); }",
    );
    let dev = |op: &str, inputs: &[Tensor]| run(&c, op, inputs, Mode::Device).to_f64_vec();
    // halves: [x2, 2 x1].
    let (t, d) = (7, 18);
    let xv = rnd(Dtype::Fp32, &[t, d], 1).to_f64_vec();
    let x = Tensor::from_f64(Dtype::Fp32, &[t, d], &xv).unwrap();
    let want: Vec<f64> = (0..t * d)
        .map(|e| {
            let (r, col) = (e / d, e % d);
            if col < d / 2 {
                xv[r * d + col + d / 2]
            } else {
                2.0 * xv[r * d + col - d / 2]
            }
        })
        .collect();
    assert_eq!(dev("halves", &[x]), want);
    // ends: parts of 4, 4 and 3 columns; the first three of the first
    // and the last.
    let (r, cols) = (5, 11);
    let xv = rnd(Dtype::Fp32, &[r, cols], 2).to_f64_vec();
    let x = Tensor::from_f64(Dtype::Fp32, &[r, cols], &xv).unwrap();
    let want: Vec<f64> = (0..r * 3)
        .map(|e| {
            let (i, j) = (e / 3, e % 3);
            xv[i * cols + j] as f32 as f64 - xv[i * cols + 8 + j]
        })
        .map(|v| v as f32 as f64)
        .collect();
    assert_eq!(dev("ends", &[x]), want);
    // swiglu on [T, 2F].
    let (t, f) = (9, 20);
    let hv = rnd(Dtype::Fp32, &[t, 2 * f], 3).to_f64_vec();
    let h = Tensor::from_f64(Dtype::Fp32, &[t, 2 * f], &hv).unwrap();
    let want: Vec<f64> = (0..t * f)
        .map(|e| {
            let (i, j) = (e / f, e % f);
            let (g, u) = (hv[i * 2 * f + j], hv[i * 2 * f + f + j]);
            g / (1.0 + (-g).exp()) * u
        })
        .collect();
    assert!(rel_err(&dev("swiglu", &[h]), &want) < 1e-6);
    // rows: 5 rows chunk into 3 and 2.
    let (r, cols) = (5, 6);
    let xv = rnd(Dtype::Fp32, &[r, cols], 4).to_f64_vec();
    let x = Tensor::from_f64(Dtype::Fp32, &[r, cols], &xv).unwrap();
    let want: Vec<f64> = (0..2 * cols)
        .map(|e| (xv[e] + xv[3 * cols + e]) as f32 as f64)
        .collect();
    assert_eq!(dev("rows", &[x]), want);
    // topk's parts are topk and topk_indices.
    let (r, cols) = (6, 130);
    let x = rnd(Dtype::Fp32, &[r, cols], 5);
    let got = dev("both", &[x.clone()]);
    let (v, i) = (dev("values", &[x.clone()]), dev("idx", &[x]));
    for row in 0..r {
        assert_eq!(
            got[row * 8..row * 8 + 4],
            v[row * 4..row * 4 + 4],
            "values of row {row}"
        );
        assert_eq!(
            got[row * 8 + 4..row * 8 + 8],
            i[row * 4..row * 4 + 4],
            "indices of row {row}"
        );
    }
    // Parts are counted at the sizes: one row chunks into one part.
    let program = c.program().unwrap();
    let e = prepare(&program, "rows", &[rnd(Dtype::Fp32, &[1, 3], 1)]).expect_err("one row");
    assert_eq!(e.code.0, "E0201", "{e:?}");
}

/// `argmax` / `argmin` along either axis against a scan written here: the
/// first index among ties, the first NaN where there is one, rows longer
/// than one program holds (5000 columns), bf16 and int32 inputs.
#[test]
fn argmax_argmin() {
    let c = source(
        "op amax(x: tensor<R, C, fp32>) -> tensor<R, int32> { return argmax(x); }
         op amin0(x: tensor<R, C, fp32>) -> tensor<1, C, int32> { return argmin(x, axis = 0, keepdims = true); }
         op amaxb(x: tensor<R, C, bf16>) -> tensor<R, int32> { return argmax(x, axis = -1); }
         op amaxi(x: tensor<R, C, int32>) -> tensor<R, int32> { return argmax(x); }",
    );
    fn first(row: &[f64], better: fn(f64, f64) -> bool) -> f64 {
        if let Some(i) = row.iter().position(|v| v.is_nan()) {
            return i as f64;
        }
        let mut best = 0;
        for (i, v) in row.iter().enumerate() {
            if better(*v, row[best]) {
                best = i;
            }
        }
        best as f64
    }
    let gt = |a: f64, b: f64| a > b;
    let lt = |a: f64, b: f64| a < b;
    for (r, cols) in [(7, 33), (3, 5000), (64, 128)] {
        let mut v = rnd(Dtype::Fp32, &[r, cols], 3).to_f64_vec();
        // Ties on row 0 (two equal maxima), a NaN on row 1.
        v[5] = 9.0;
        v[cols - 1] = 9.0;
        v[cols + 2] = f64::NAN;
        let x = Tensor::from_f64(Dtype::Fp32, &[r, cols], &v).unwrap();
        let got = run(&c, "amax", &[x.clone()], Mode::Device).to_f64_vec();
        let want: Vec<f64> = v.chunks(cols).map(|row| first(row, gt)).collect();
        assert_eq!(got, want, "argmax {r}x{cols}");
        assert_eq!(got[0], 5.0);
        let got = run(&c, "amin0", &[x], Mode::Device).to_f64_vec();
        let want: Vec<f64> = (0..cols)
            .map(|j| first(&(0..r).map(|i| v[i * cols + j]).collect::<Vec<_>>(), lt))
            .collect();
        assert_eq!(got, want, "argmin along 0 {r}x{cols}");
    }
    let x = rnd(Dtype::Bf16, &[9, 70], 4);
    let xv = x.to_f64_vec();
    let got = run(&c, "amaxb", &[x], Mode::Device).to_f64_vec();
    assert_eq!(
        got,
        xv.chunks(70).map(|row| first(row, gt)).collect::<Vec<_>>()
    );
    let iv: Vec<f64> = (0..40).map(|i| ((i * 37) % 11) as f64).collect();
    let x = Tensor::from_f64(Dtype::Int32, &[4, 10], &iv).unwrap();
    let got = run(&c, "amaxi", &[x], Mode::Device).to_f64_vec();
    assert_eq!(
        got,
        iv.chunks(10).map(|row| first(row, gt)).collect::<Vec<_>>()
    );
}

/// The default attention tile fits shared memory at large head dimensions
/// (A.1's 128 x 64 needed 230 KiB for fp32 at D = 128 with a ragged key
/// count, and more for any dtype at 256): a smaller tile is chosen.
#[test]
fn attention_at_large_head_dims() {
    let c = source(
        "import std.nn;
         op a32(q: tensor<H, N, D, fp32>, k: tensor<H, L, D, fp32>, v: tensor<H, L, D, fp32>)
             -> tensor<H, N, D, fp32> { return attention(q, k, v); }
         op a16(q: tensor<H, N, D, bf16>, k: tensor<H, L, D, bf16>, v: tensor<H, L, D, bf16>)
             -> tensor<H, N, D, bf16> { return attention(q, k, v, causal = true); }",
    );
    for (op, dtype, (h, n, l, d), tol) in [
        ("a32", Dtype::Fp32, (1, 113, 113, 128), 1e-5),
        ("a32", Dtype::Fp32, (1, 40, 70, 256), 1e-5),
        ("a16", Dtype::Bf16, (2, 70, 90, 256), 1e-2),
    ] {
        let q = rnd(dtype, &[h, n, d], 1);
        let k = rnd(dtype, &[h, l, d], 2);
        let v = rnd(dtype, &[h, l, d], 3);
        let inputs = [q, k, v];
        let got = run(&c, op, &inputs, Mode::Device).to_f64_vec();
        let want = run(&c, op, &inputs, Mode::Reference).to_f64_vec();
        let e = rel_err(&got, &want);
        assert!(e < tol, "{op} {h}x{n}x{l}x{d}: error {e}");
    }
}

/// Integer reductions in ops are exact (they were summed in the fp32
/// accumulator: `max([2^24 + 1, 5])` gave 2^24), int8 sums are int32,
/// and int32 sums wrap;
/// floats cast to narrow integers saturate and an integer tensor's masked
/// `-inf` is its least value on every backend (the PTX wrapped through
/// int32: `300.0 as int8` was 44 on the simulator, 127 on the cpu); the
/// compensated `kahan_sum` finds the error of an addition whichever
/// operand is larger (`[1, 1e8, 1, -1e8]` summed to 0 on the cpu).
#[test]
fn integers_and_casts_are_exact() {
    let c = source(
        "op imax(x: tensor<N, int32>) -> int32 { return max(x, axis = 0); }
         op isum(x: tensor<N, int32>) -> int32 { return sum(x, axis = 0); }
         op iamax(x: tensor<N, int32>) -> int32 { return argmax(x, axis = 0); }
         op rsum(x: tensor<R, C, int8>) -> tensor<R, int32> { return sum(x); }
         op rsum8(x: tensor<R, C, int8>) -> tensor<R, int8> { return sum(x) as int8; }
         op q8(x: tensor<N, fp32>) -> tensor<N, int8> { return x as int8; }
         op qu8(x: tensor<N, fp32>) -> tensor<N, uint8> { return x as uint8; }
         op q16(x: tensor<N, fp32>) -> tensor<N, int16> { return x as int16; }
         op total(x: tensor<N, fp32>) -> fp32 { numerics kahan_sum; return sum(x, axis = 0); }
         kernel kmax<B: int = 64>(x: tensor<N, int32>, out y: tensor<1, int32>) grid(1) {
             let t = load(x, [arange(0, B)], other = -inf);
             store(y, [arange(0, 1)], max(t, axis = 0, keepdims = true));
         }
         op kmax_of(x: tensor<N, int32>) -> tensor<1, int32> { return kmax(x); }",
    );
    let t = |d: Dtype, v: &[f64]| Tensor::from_f64(d, &[v.len()], v).unwrap();
    let one = |op: &str, x: Tensor| run(&c, op, &[x], Mode::Device).to_f64_vec();
    let big = 16777217.0;
    assert_eq!(one("imax", t(Dtype::Int32, &[big, 5.0])), [big]);
    assert_eq!(
        one("isum", t(Dtype::Int32, &[2147483647.0, 1.0])),
        [-2147483648.0]
    );
    assert_eq!(
        one("iamax", t(Dtype::Int32, &[3.0, 16777216.0, big])),
        [2.0]
    );
    // int8 sums widen to int32 (as numpy's and torch's), on ragged rows;
    // converted back, they wrap.
    let rows = Tensor::from_f64(Dtype::Int8, &[3, 70], &[100.0; 210]).unwrap();
    assert_eq!(one("rsum", rows.clone()), [7000.0; 3], "70 * 100");
    assert_eq!(
        one("rsum8", rows),
        [88.0; 3],
        "70 * 100 = 7000 = 88 (mod 256)"
    );
    let f = [
        300.0,
        -300.0,
        1e10,
        -2.7,
        2.7,
        f64::NAN,
        f64::INFINITY,
        -0.5,
    ];
    assert_eq!(
        one("q8", t(Dtype::Fp32, &f)),
        [127.0, -128.0, 127.0, -2.0, 2.0, 0.0, 127.0, 0.0]
    );
    assert_eq!(
        one("qu8", t(Dtype::Fp32, &f)),
        [255.0, 0.0, 255.0, 0.0, 2.0, 0.0, 255.0, 0.0]
    );
    assert_eq!(
        one("q16", t(Dtype::Fp32, &f)),
        [300.0, -300.0, 32767.0, -2.0, 2.0, 0.0, 32767.0, 0.0]
    );
    assert_eq!(one("total", t(Dtype::Fp32, &[1.0, 1e8, 1.0, -1e8])), [2.0]);
    let mut v = vec![1e8; 1];
    v.extend([1.0; 10000]);
    v.push(-1e8);
    assert_eq!(one("total", t(Dtype::Fp32, &v)), [10000.0]);
    assert_eq!(
        one("total", t(Dtype::Fp32, &[1.0, f64::INFINITY, 2.0])),
        [f64::INFINITY]
    );
    // A masked lane of an int32 load with `other = -inf` is i32::MIN.
    let neg: Vec<f64> = (1..=50).map(|i| -f64::from(i)).collect();
    let got = one("kmax_of", t(Dtype::Int32, &neg));
    assert_eq!(got, [-1.0]);
}

/// `rand` in ops (a generated tensor, never stored), in kernels (Triton's
/// `rand(seed, offsets)`) and `dropout` give exactly the runtime's Philox
/// stream, `uniform_f32(seed, offset + i)`, with counters past 2^32 (the
/// upper counter word) and a seed past 2^32 (the upper key word); a
/// kernel's seed may be known only when it runs (a scalar parameter,
/// `program_id`).
#[test]
fn philox_streams_agree() {
    let c = source(
        "import std.nn;
         op r(x: tensor<N, M, fp32>) -> tensor<N, M, fp32> {
             return x + rand<fp32>([N, M], seed = 7, offset = 4294967290);
         }
         op big(x: tensor<N, fp32>) -> tensor<N, fp32> {
             return x + rand<fp32>([N], seed = 81985529216486895);
         }
         kernel kr<B: int = 64>(a: tensor<N, fp32>, out o: tensor<N, fp32>) grid(cdiv(N, B)) {
             let i = program_id(0) * B + arange(0, B);
             store(o, [i], load(a, [i]) + rand(7, i + 3));
         }
         op krop(a: tensor<N, fp32>) -> tensor<N, fp32> { return kr(a); }
         kernel ks(a: tensor<N, fp32>, s: int32, t: int64, out o: tensor<N, fp32>) grid(cdiv(N, 64)) {
             let i = program_id(0) * 64 + arange(0, 64);
             let r = rand(s, i) + rand(t, i) * 2.0 + rand(program_id(0) + 9, i) * 4.0;
             store(o, [i], load(a, [i]) + r, mask = i < N);
         }
         op ksop(a: tensor<N, fp32>) -> tensor<N, fp32> { return ks(a, -5, 1099511627781); }
         op drop(x: tensor<N, M, fp32>) -> tensor<N, M, fp32> { return dropout(x, 0.25, 11, offset = 5); }",
    );
    let u = |seed: u64, i: u64| f64::from(tessera_tensor::uniform_f32(seed, i));
    let (n, m) = (33, 130);
    let zeros = Tensor::from_f64(Dtype::Fp32, &[n, m], &vec![0.0; n * m]).unwrap();
    let got = run(&c, "r", &[zeros], Mode::Device).to_f64_vec();
    let want: Vec<f64> = (0..n * m).map(|i| u(7, 4_294_967_290 + i as u64)).collect();
    assert_eq!(got, want, "rand in an op");
    let z = Tensor::from_f64(Dtype::Fp32, &[1000], &[0.0; 1000]).unwrap();
    let got = run(&c, "big", &[z.clone()], Mode::Device).to_f64_vec();
    let want: Vec<f64> = (0..1000).map(|i| u(81_985_529_216_486_895, i)).collect();
    assert_eq!(got, want, "a 64-bit seed");
    let got = run(&c, "krop", &[z.clone()], Mode::Device).to_f64_vec();
    let want: Vec<f64> = (0..1000).map(|i| u(7, i + 3)).collect();
    assert_eq!(got, want, "rand in a kernel");
    let got = run(&c, "ksop", &[z.clone()], Mode::Device).to_f64_vec();
    let want: Vec<f64> = (0..1000)
        .map(|i| {
            let r = (-5i64 as u64, 1_099_511_627_781, i / 64 + 9);
            let f = |k, x: f64| (x as f32) + (u(k, i) as f32);
            let w = f(r.0, 0.0) + (u(r.1, i) as f32) * 2.0;
            f64::from(w + (u(r.2, i) as f32) * 4.0)
        })
        .collect();
    assert_eq!(got, want, "seeds known when the kernel runs");
    let x = rnd(Dtype::Fp32, &[n, m], 3);
    let got = run(&c, "drop", &[x.clone()], Mode::Device).to_f64_vec();
    let xv = x.to_f64_vec();
    let mut zeroed = 0;
    for (i, g) in got.iter().enumerate() {
        if u(11, 5 + i as u64) >= 0.25 {
            assert_eq!(
                *g,
                f64::from(xv[i] as f32 * (1.0f32 / 0.75)),
                "kept element {i}"
            );
        } else {
            assert_eq!(*g, 0.0, "dropped element {i}");
            zeroed += 1;
        }
    }
    let frac = zeroed as f64 / (n * m) as f64;
    assert!((frac - 0.25).abs() < 0.03, "dropped {frac}");
}

/// `int8 @ int8` is an int32 product summed exactly in int32 (as
/// torch._int_mm), and int32 products are summed in int32 too, wrapping
/// like every integer tensor operation, never rounded through fp32.
#[test]
fn integer_matmul_is_exact() {
    let c = source(
        "op mm8(a: tensor<M, K, int8>, b: tensor<K, N, int8>) -> tensor<M, N, int32> { return a @ b; }
         op mmu8(a: tensor<M, K, uint8>, b: tensor<K, N, uint8>) -> tensor<M, N, int32> { return a @ b; }
         op mm32(a: tensor<M, K, int32>, b: tensor<K, N, int32>) -> tensor<M, N, int32> { return a @ b; }
         op add8(a: tensor<N, int8>, b: tensor<N, int8>) -> tensor<N, int8> { return a + b; }",
    );
    let ints = |dtype, shape: &[usize], seed: u64, scale: f64| {
        let v: Vec<f64> = rnd(Dtype::Fp32, shape, seed)
            .to_f64_vec()
            .iter()
            .map(|x| (x * scale).round().clamp(-128.0, 127.0))
            .collect();
        Tensor::from_f64(dtype, shape, &v).unwrap()
    };
    // Ragged and whole tiles, over the whole int8 range (the GPU path runs
    // them on mma.sync s8 x s8 -> s32).
    for (m, k, n) in [(70, 130, 40), (128, 256, 128), (33, 1000, 72)] {
        let (a, b) = (
            ints(Dtype::Int8, &[m, k], 1, 300.0),
            ints(Dtype::Int8, &[k, n], 2, 60.0),
        );
        let (av, bv) = (a.to_f64_vec(), b.to_f64_vec());
        let want: Vec<f64> = (0..m * n)
            .map(|e| (0..k).map(|j| av[e / n * k + j] * bv[j * n + e % n]).sum())
            .collect();
        let got = run(&c, "mm8", &[a, b], Mode::Device);
        assert_eq!(got.dtype, Dtype::Int32);
        assert_eq!(got.to_f64_vec(), want, "int8 {m}x{k}x{n}");
        // uint8 (mma.sync u8 x u8), values up to 255.
        let (u, w): (Vec<f64>, Vec<f64>) = (
            av.iter().map(|x| x + 128.0).collect(),
            bv.iter().map(|x| x + 128.0).collect(),
        );
        let want: Vec<f64> = (0..m * n)
            .map(|e| (0..k).map(|j| u[e / n * k + j] * w[j * n + e % n]).sum())
            .collect();
        let ua = Tensor::from_f64(Dtype::Uint8, &[m, k], &u).unwrap();
        let ub = Tensor::from_f64(Dtype::Uint8, &[k, n], &w).unwrap();
        let got = run(&c, "mmu8", &[ua, ub], Mode::Device);
        assert_eq!(got.to_f64_vec(), want, "uint8 {m}x{k}x{n}");
    }
    // Sums past 2^24 (fp32 would round them) and past 2^31 (they wrap).
    let (m, k, n) = (3, 64, 5);
    let av: Vec<f64> = (0..m * k)
        .map(|i| (40_000 + i * 7919 % 50_000) as f64)
        .collect();
    let bv: Vec<f64> = (0..k * n)
        .map(|i| (30_000 + i * 104_729 % 40_000) as f64)
        .collect();
    let want: Vec<f64> = (0..m * n)
        .map(|e| {
            let s: i64 = (0..k)
                .map(|j| av[e / n * k + j] as i64 * bv[j * n + e % n] as i64)
                .sum();
            f64::from(s as i32)
        })
        .collect();
    let a = Tensor::from_f64(Dtype::Int32, &[m, k], &av).unwrap();
    let b = Tensor::from_f64(Dtype::Int32, &[k, n], &bv).unwrap();
    assert_eq!(
        run(&c, "mm32", &[a, b], Mode::Device).to_f64_vec(),
        want,
        "int32 wraps"
    );
    let a = Tensor::from_f64(Dtype::Int8, &[3], &[100.0, -100.0, 5.0]).unwrap();
    let got = run(&c, "add8", &[a.clone(), a], Mode::Device).to_f64_vec();
    assert_eq!(got, vec![-56.0, 56.0, 10.0], "int8 addition wraps");
}

/// `sin` and `cos` within 4 fp32 ulp (of the result, or of 1 near a zero)
/// of the f64 functions, from -1e5 to 1e5 and around multiples of π/2.
#[test]
fn sin_cos_are_accurate() {
    let c = source(
        "op s(x: tensor<N, fp32>) -> tensor<N, fp32> { return sin(x); }
         op c(x: tensor<N, fp32>) -> tensor<N, fp32> { return cos(x); }",
    );
    let mut xs: Vec<f64> = (0..4000)
        .map(|i| -1e5 + 50.0 * i as f64 + 0.37 * i as f64)
        .collect();
    xs.extend((-200..200).map(|k| k as f64 * std::f64::consts::FRAC_PI_2 + 1e-3 * k as f64));
    xs.extend((0..1000).map(|i| (i as f64 - 500.0) * 0.013));
    let x = Tensor::from_f64(Dtype::Fp32, &[xs.len()], &xs).unwrap();
    let xv = x.to_f64_vec();
    for (op, f) in [("s", f64::sin as fn(f64) -> f64), ("c", f64::cos)] {
        let got = run(&c, op, &[x.clone()], Mode::Device).to_f64_vec();
        for (g, x) in got.iter().zip(&xv) {
            let want = f(*x);
            let ulp = f64::from(f32::EPSILON) * want.abs().max(f64::from(f32::EPSILON));
            assert!(
                (g - want).abs() <= 4.0 * ulp.max(f64::from(f32::EPSILON) * 0.25),
                "{op}({x}) = {g}, want {want}"
            );
        }
    }
}

/// examples/transformer_block.tsr's `block` (RMSNorm, RoPE, causal GQA
/// attention, SwiGLU) through the kernels against the f64 evaluator of the
/// same graph, with grouped heads (G < H) and without (G = H, where the
/// key projection's RoPE shares the query's angle tables: a fusion that
/// once read a value before its kernel ran).
#[test]
fn transformer_block() {
    let c = source(include_str!("../examples/transformer_block.tsr"));
    for (b, t, h, g, d, f) in [(1, 40, 4, 2, 16, 48), (2, 24, 2, 2, 8, 32)] {
        let cdim = h * d;
        let w = |shape: &[usize], seed: u64, scale: f64| {
            let v: Vec<f64> = rnd(Dtype::Fp32, shape, seed)
                .to_f64_vec()
                .iter()
                .map(|x| x * scale)
                .collect();
            Tensor::from_f64(Dtype::Bf16, shape, &v).unwrap()
        };
        let inputs = vec![
            w(&[b, t, cdim], 1, 1.0),
            w(&[cdim], 2, 0.1),
            w(&[cdim, h, d], 3, 0.1),
            w(&[cdim, g, d], 4, 0.1),
            w(&[cdim, g, d], 5, 0.1),
            w(&[h, d, cdim], 6, 0.1),
            w(&[cdim], 7, 0.1),
            w(&[cdim, f], 8, 0.1),
            w(&[cdim, f], 9, 0.1),
            w(&[f, cdim], 10, 0.1),
        ];
        let got = run(&c, "block", &inputs, Mode::Device).to_f64_vec();
        let want = run(&c, "block", &inputs, Mode::Reference).to_f64_vec();
        let err = rel_err(&got, &want);
        assert!(
            err < 2e-2,
            "block b={b} t={t} h={h} g={g} d={d}: error {err}"
        );
    }
}

/// `cumsum` in ops along either axis (lines of 1, 63, 130 and 5000
/// elements: within one chunk, across chunks, ragged) for fp32, bf16 and
/// int32, and on kernel tiles along both axes, against running sums here.
#[test]
fn cumulative_sums() {
    let c = source(
        "op c(x: tensor<R, C, fp32>) -> tensor<R, C, fp32> { return cumsum(x); }
         op c0(x: tensor<R, C, fp32>) -> tensor<R, C, fp32> { return cumsum(x, axis = 0); }
         op cb(x: tensor<R, C, bf16>) -> tensor<R, C, bf16> { return cumsum(x, axis = -1); }
         op ci(x: tensor<R, C, int32>) -> tensor<R, C, int32> { return cumsum(x); }
         kernel kt<BR: int = 8, BC: int = 32>(x: tensor<R, C, fp32>, out a: tensor<R, C, fp32>, out b: tensor<R, C, fp32>)
             grid(cdiv(R, BR))
         {
             let rows = program_id(0) * BR + arange(0, BR);
             let cols = arange(0, BC);
             let t = load(x, [rows, cols]);
             store(a, [rows, cols], cumsum(t, axis = 1));
             store(b, [rows, cols], cumsum(t, axis = 0));
         }",
    );
    // Running sums of each line of `v` ([r, n]) along `axis`, in f64.
    let running = |v: &[f64], r: usize, n: usize, axis: usize| {
        let mut out = v.to_vec();
        if axis == 1 {
            for row in out.chunks_mut(n) {
                for j in 1..n {
                    row[j] += row[j - 1];
                }
            }
        } else {
            for i in 1..r {
                for j in 0..n {
                    out[i * n + j] += out[(i - 1) * n + j];
                }
            }
        }
        out
    };
    for (r, n) in [(3, 1), (5, 63), (17, 130), (2, 5000)] {
        let x = rnd(Dtype::Fp32, &[r, n], 1);
        let xv = x.to_f64_vec();
        let got = run(&c, "c", &[x.clone()], Mode::Device).to_f64_vec();
        assert!(
            rel_err(&got, &running(&xv, r, n, 1)) < 1e-5,
            "cumsum {r}x{n}"
        );
        let got = run(&c, "c0", &[x], Mode::Device).to_f64_vec();
        assert!(
            rel_err(&got, &running(&xv, r, n, 0)) < 1e-5,
            "cumsum axis 0 {r}x{n}"
        );
        let xb = rnd(Dtype::Bf16, &[r, n], 2);
        let got = run(&c, "cb", &[xb.clone()], Mode::Device).to_f64_vec();
        assert!(
            rel_err(&got, &running(&xb.to_f64_vec(), r, n, 1)) < 1e-2,
            "bf16 {r}x{n}"
        );
        let iv: Vec<f64> = (0..r * n)
            .map(|i| ((i * 7919) % 201) as f64 - 100.0)
            .collect();
        let xi = Tensor::from_f64(Dtype::Int32, &[r, n], &iv).unwrap();
        let got = run(&c, "ci", &[xi], Mode::Device).to_f64_vec();
        assert_eq!(got, running(&iv, r, n, 1), "int32 {r}x{n}");
    }
    let program = c.program().unwrap();
    let x = rnd(Dtype::Fp32, &[16, 32], 3);
    let xv = x.to_f64_vec();
    let types = [tessera_cpu::tensor_type(&x)];
    let g = tessera_driver::graph::build_kernel(&program, "kt", Some(&types)).unwrap();
    let g = tessera_cpu::prepare_graph(&program, &g).unwrap();
    let outs = run_device(&c, &g, &[x], None).unwrap();
    assert!(
        rel_err(&outs[0].to_f64_vec(), &running(&xv, 16, 32, 1)) < 1e-5,
        "tile axis 1"
    );
    // Along axis 0 within each program's 8 rows.
    let mut want = Vec::new();
    for half in xv.chunks(8 * 32) {
        want.extend(running(half, 8, 32, 0));
    }
    assert!(rel_err(&outs[1].to_f64_vec(), &want) < 1e-5, "tile axis 0");
}

/// tests/run/ok/flash_attn_tiles.tsr: a causal FlashAttention kernel
/// written at tile level as in Triton agrees with the fused
/// `std.nn.attention(causal = true)` at ragged lengths.
#[test]
fn flash_attention_at_tile_level() {
    let c = source(include_str!("run/ok/flash_attn_tiles.tsr"));
    for (bh, n) in [(1, 37), (3, 100), (2, 128)] {
        let qkv: Vec<Tensor> = (0..3)
            .map(|s| rnd(Dtype::Fp32, &[bh, n, 64], 40 + s))
            .collect();
        let got = run(&c, "fa", &qkv, Mode::Device).to_f64_vec();
        let want = run(&c, "ref", &qkv, Mode::Reference).to_f64_vec();
        let err = rel_err(&got, &want);
        assert!(err < 1e-5, "{bh}x{n}: error {err}");
    }
}

/// An index outside the tensor it selects from fails the run on every
/// backend (gather, embedding, cross-entropy labels), never reading
/// another element or zero.
#[test]
fn indices_out_of_range_fail() {
    let c = source(
        "import std.nn;
         op gat(x: tensor<N, C, fp32>, i: tensor<N, K, int32>) -> tensor<N, K, fp32> { return gather(x, i, axis = 1); }
         op emb(t: tensor<V, D, fp32>, ids: tensor<S, int32>) -> tensor<S, D, fp32> { return embedding(t, ids); }",
    );
    let program = c.program().unwrap();
    let cases = [
        (
            "gat",
            vec![
                rnd(Dtype::Fp32, &[4, 6], 1),
                Tensor::from_f64(Dtype::Int32, &[4, 1], &[0.0, 5.0, 6.0, 1.0]).unwrap(),
            ],
        ),
        (
            "gat",
            vec![
                rnd(Dtype::Fp32, &[4, 6], 1),
                Tensor::from_f64(Dtype::Int32, &[4, 1], &[0.0, -1.0, 2.0, 1.0]).unwrap(),
            ],
        ),
        (
            "emb",
            vec![
                rnd(Dtype::Fp32, &[10, 8], 2),
                Tensor::from_f64(Dtype::Int32, &[3], &[9.0, 10.0, 0.0]).unwrap(),
            ],
        ),
    ];
    // On the GPU a trap leaves the CUDA context unusable for the rest of
    // the process: each case runs in a child process of its own (this test
    // binary again, told which case by `TESSERA_TRAP_CASE`).
    let only: Option<usize> = std::env::var("TESSERA_TRAP_CASE")
        .ok()
        .and_then(|v| v.parse().ok());
    for (i, (op, inputs)) in cases.into_iter().enumerate() {
        if only.is_some_and(|o| o != i) {
            continue;
        }
        let g = prepare(&program, op, &inputs).unwrap();
        assert!(
            eval(&g, &inputs, Mode::Reference).is_err(),
            "{op}: the f64 evaluator"
        );
        if backend() == Backend::Cuda && only.is_none() {
            let child = std::process::Command::new(std::env::current_exe().unwrap())
                .args(["indices_out_of_range_fail", "--exact", "--test-threads=1"])
                .env("TESSERA_TRAP_CASE", i.to_string())
                .output()
                .unwrap();
            assert!(
                child.status.success(),
                "case {i} ({op}): {}",
                String::from_utf8_lossy(&child.stdout)
            );
            continue;
        }
        // The GPU reports a trap without its reason.
        let failed = run_device(&c, &g, &inputs, None).is_err_and(|e| {
            backend() == Backend::Cuda || (e.contains("out of range") && !e.contains("by zero"))
        });
        assert!(failed, "{op} with an index out of range ran");
    }
}

/// `std.nn.attention` with `causal` and grouped-query heads against an f64
/// reference written here: query head h reads key/value head h / (H / G),
/// query i sees keys j <= i; seqlen_q != seqlen_k, ragged head dims (59,
/// 111), several key blocks, MQA (G = 1), an explicit scale.
#[test]
fn attention_causal_gqa() {
    let c = source(
        "import std.nn;
         op causal(q: tensor<B, H, N, D, bf16>, k: tensor<B, G, L, D, bf16>,
                   v: tensor<B, G, L, E, bf16>) -> tensor<B, H, N, E, bf16> {
             return attention(q, k, v, causal = true);
         }
         op scaled(q: tensor<H, N, D, fp32>, k: tensor<G, L, D, fp32>,
                   v: tensor<G, L, D, fp32>) -> tensor<H, N, D, fp32> {
             return attention(q, k, v, scale = 0.25);
         }",
    );
    // (batch, query heads, kv heads, N, L, D, E)
    for (b, h, g, n, l, d, e) in [
        (1, 4, 2, 130, 130, 64, 64),
        (2, 3, 1, 77, 200, 59, 59),
        (1, 2, 2, 200, 77, 111, 32),
        (1, 8, 2, 256, 256, 64, 64),
    ] {
        let q = rnd(Dtype::Bf16, &[b, h, n, d], 11);
        let k = rnd(Dtype::Bf16, &[b, g, l, d], 12);
        let v = rnd(Dtype::Bf16, &[b, g, l, e], 13);
        let got = run(
            &c,
            "causal",
            &[q.clone(), k.clone(), v.clone()],
            Mode::Device,
        );
        let want = attention_ref(
            &q,
            &k,
            &v,
            (b * h, h / g, n, l, d, e),
            1.0 / (d as f64).sqrt(),
            true,
        );
        let err = rel_err(&got.to_f64_vec(), &want);
        assert!(err < 1e-2, "causal {b}x{h}/{g}x{n}x{l}x{d}x{e} error {err}");
        let oracle = run(
            &c,
            "causal",
            &[q.clone(), k.clone(), v.clone()],
            Mode::Reference,
        );
        assert!(rel_err(&oracle.to_f64_vec(), &want) < 1e-2, "f64 evaluator");
        // Row 0 sees key 0 only: its output is v's row 0, to bf16 rounding.
        let (gv, vv) = (got.to_f64_vec(), v.to_f64_vec());
        assert!((gv[0] - vv[0]).abs() <= 1e-2 * vv[0].abs().max(1.0));
    }
    let (h, g, n, l, d) = (4, 1, 70, 90, 32);
    let q = rnd(Dtype::Fp32, &[h, n, d], 21);
    let k = rnd(Dtype::Fp32, &[g, l, d], 22);
    let v = rnd(Dtype::Fp32, &[g, l, d], 23);
    let got = run(
        &c,
        "scaled",
        &[q.clone(), k.clone(), v.clone()],
        Mode::Device,
    );
    let want = attention_ref(&q, &k, &v, (h, h / g, n, l, d, d), 0.25, false);
    let err = rel_err(&got.to_f64_vec(), &want);
    assert!(err < 1e-4, "scaled MQA error {err}");
    // Head counts known only at run time that do not divide: E0201 at the
    // call, not an internal error.
    let program = c.program().unwrap();
    let (q, kv) = (
        rnd(Dtype::Bf16, &[1, 6, 16, 8], 1),
        rnd(Dtype::Bf16, &[1, 4, 16, 8], 2),
    );
    let e = prepare(&program, "causal", &[q, kv.clone(), kv]).expect_err("6 heads over 4");
    assert_eq!(e.code.0, "E0201", "{e:?}");
    assert!(e.message.contains("6 query heads and 4"), "{}", e.message);
}

/// softmax(q @ k.T * scale) @ v in f64 over `heads` query heads, each group
/// of `group` consecutive heads sharing one key/value head.
fn attention_ref(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    (heads, group, n, l, d, e): (usize, usize, usize, usize, usize, usize),
    scale: f64,
    causal: bool,
) -> Vec<f64> {
    let (qv, kv, vv) = (q.to_f64_vec(), k.to_f64_vec(), v.to_f64_vec());
    let mut out = Vec::with_capacity(heads * n * e);
    for hq in 0..heads {
        let hk = hq / group;
        for i in 0..n {
            let seen = if causal { l.min(i + 1) } else { l };
            let qi = &qv[(hq * n + i) * d..][..d];
            let s: Vec<f64> = (0..seen)
                .map(|j| {
                    let kj = &kv[(hk * l + j) * d..][..d];
                    qi.iter().zip(kj).map(|(x, y)| x * y).sum::<f64>() * scale
                })
                .collect();
            let p = softmax_rows(&s, seen);
            for c in 0..e {
                out.push((0..seen).map(|j| p[j] * vv[(hk * l + j) * e + c]).sum());
            }
        }
    }
    out
}

/// The tensor-core kernels write and read their staged tiles without
/// shared-memory bank conflicts (the simulator counts the passes each warp
/// access takes: `tessera_sim::banks`), and attention keeps its row
/// statistics in registers (its only shared accesses are the staged tiles).
#[test]
fn staged_tiles_have_no_bank_conflicts() {
    BACKEND.with(|b| b.set(Some(Backend::Sim)));
    let stats = |c: &Compilation, op: &str, inputs: &[Tensor]| {
        run(c, op, inputs, Mode::Device);
        SIM_STATS.with(|s| s.get())
    };
    let gemm = stats(
        &example("matmul.tsr"),
        "gemm",
        &[
            rnd(Dtype::Bf16, &[128, 192], 1),
            rnd(Dtype::Bf16, &[192, 256], 2),
        ],
    );
    assert!(gemm.shared_wavefronts > 0);
    assert_eq!(gemm.bank_conflicts, 0, "gemm: {gemm:?}");
    let qkv: Vec<Tensor> = (0..3)
        .map(|i| rnd(Dtype::Bf16, &[1, 2, 128, 64], i + 3))
        .collect();
    let attn = stats(&example("flash_attn.tsr"), "attention", &qkv);
    assert_eq!(attn.bank_conflicts, 0, "attention: {attn:?}");
    // Per block (128 query rows, 8 warps, two trips of 64 keys), every
    // pass is a staged tile's: 16-byte cp.async chunks take 4 passes per
    // 32, as do ldmatrix.x4 reads; Q is 16 KiB, K and V 8 KiB per trip;
    // each warp reads its 16 rows of Q (4 k-steps x 1 ldmatrix) once,
    // before the loop, and all of K and V (4 k-steps x 4 ldmatrix each)
    // per trip.
    let copies = (16384 + 2 * 2 * 8192) / 16 / 8;
    let reads = 8 * 4 * (1 + 2 * (4 + 4)) * 4;
    assert_eq!(
        attn.shared_wavefronts / 2,
        copies + reads,
        "attention: {attn:?}"
    );
}

#[test]
fn mlp_fp32_ragged() {
    mlp_at(33, 65, 129, false);
    // The sharded version computes the same function where its mesh axes
    // divide the split dimensions (dp = 2 splits T, tp = 4 splits F; an
    // uneven split is E0410).
    mlp_at(34, 65, 132, true);
}

fn mlp_at(t: usize, d: usize, f: usize, sharded_too: bool) {
    let c = example("mlp.tsr");
    let x = rnd(Dtype::Fp32, &[t, d], 1);
    let w1 = rnd(Dtype::Fp32, &[d, f], 2);
    let b1 = rnd(Dtype::Fp32, &[f], 3);
    let w2 = rnd(Dtype::Fp32, &[f, d], 4);
    let b2 = rnd(Dtype::Fp32, &[d], 5);
    let ins = [x, w1, b1, w2, b2];
    let got = run(&c, "mlp", &ins, Mode::Device);
    let v: Vec<Vec<f64>> = ins.iter().map(Tensor::to_f64_vec).collect();
    let mut h = matmul(&v[0], &v[1], t, d, f);
    for (i, x) in h.iter_mut().enumerate() {
        let y = *x + v[2][i % f];
        *x = y * 0.5 * (1.0 + tessera_driver::graph::math::erf(y / 2f64.sqrt()));
    }
    let mut want = matmul(&h, &v[3], t, f, d);
    for (i, x) in want.iter_mut().enumerate() {
        *x += v[4][i % d];
    }
    let e = rel_err(&got.to_f64_vec(), &want);
    assert!(e < 1e-5, "mlp error {e}");
    if sharded_too {
        let sharded = run(&example("sharded_mlp.tsr"), "mlp", &ins, Mode::Device);
        assert!(rel_err(&sharded.to_f64_vec(), &want) < 1e-5);
    }
}

/// Every stdlib op through the device path agrees with the f64 reference
/// path within the tolerance of its dtype, at ragged shapes.
#[test]
fn stdlib_ops_device_vs_reference() {
    let cases: &[(&str, &str, f64)] = &[
        ("exp(x)", "fp32", 1e-6),
        ("log(abs(x) + 1.0)", "fp32", 1e-6),
        ("sqrt(abs(x))", "fp32", 1e-6),
        ("rsqrt(abs(x) + 0.5)", "fp32", 1e-6),
        ("tanh(x)", "fp32", 1e-6),
        ("erf(x)", "fp32", 1e-6),
        ("pow(abs(x), 1.5)", "fp32", 1e-6),
        ("maximum(x, x * 0.5)", "fp32", 1e-6),
        ("minimum(x, 0.0)", "fp32", 1e-6),
        ("where(x > 0.0, x, x * 0.1)", "fp32", 1e-6),
        ("relu(x)", "fp32", 1e-6),
        ("gelu(x)", "bf16", 1e-2),
        ("silu(x)", "fp16", 2e-3),
        ("sigmoid(x)", "fp32", 1e-6),
        ("softmax(x, axis = 0)", "fp32", 1e-5),
        ("softmax(x, axis = -1)", "bf16", 1e-2),
        ("x - mean(x, axis = 0, keepdims = true)", "fp32", 1e-5),
        ("x * max(x, axis = -1, keepdims = true)", "fp32", 1e-6),
        ("x + min(x, axis = 0, keepdims = true)", "fp32", 1e-6),
        ("x * sum(x, axis = -1, keepdims = true)", "fp32", 1e-5),
        ("x.T.T", "fp32", 0.0),
        ("x @ x.T", "fp32", 1e-5),
        ("x @ x.T", "bf16", 1e-2),
        ("reshape(x, [R * C])", "fp32", 0.0),
        ("exp2(x * 4.0)", "fp32", 1e-6),
        ("exp2(x * 40.0)", "fp64", 1e-15),
        ("log2(abs(x) + 0.5)", "fp32", 1e-6),
        ("log2(abs(x) * 1e3 + 1e-300)", "fp64", 1e-15),
        ("floor(x * 8.0) + ceil(x * 8.0) * 100.0", "fp32", 0.0),
        ("round(x * 8.0) + trunc(x * 8.0) * 100.0", "fp64", 0.0),
        ("round(x * 8.0) * 0.5", "bf16", 0.0),
        ("clamp(x, -0.5, 0.5)", "fp32", 0.0),
        ("where(isnan(log(x)), 1.0, 0.0)", "fp32", 0.0),
        ("log1p(x * 1e-6) * 1e6", "fp32", 1e-6),
        ("x - var(x, axis = 0, keepdims = true)", "fp32", 1e-5),
        ("x * var(x, keepdims = true, correction = 0)", "fp32", 1e-5),
    ];
    for (expr, dtype, tol) in cases {
        let out = if expr.contains('@') {
            "tensor<R, R, D>"
        } else if expr.starts_with("reshape") {
            "tensor<R * C, D>"
        } else {
            "tensor<R, C, D>"
        };
        let text =
            format!("import std.nn;\nop f(x: tensor<R, C, D>) -> {out} {{ return {expr}; }}\n")
                .replace(", D>", &format!(", {dtype}>"));
        let c = source(&text);
        let dt = Dtype::from_name(dtype).unwrap();
        let x = rnd(dt, &[67, 45], 21);
        let device = run(&c, "f", &[x.clone()], Mode::Device).to_f64_vec();
        let reference = run(&c, "f", &[x], Mode::Reference).to_f64_vec();
        let e = rel_err(&device, &reference);
        assert!(e <= *tol, "{expr} ({dtype}): error {e:e} > {tol:e}");
    }
}

/// Inputs of the wrong shape are a diagnostic naming the parameter.
#[test]
fn wrong_shapes_are_diagnostics() {
    let c = example("matmul.tsr");
    let program = c.program().unwrap();
    let a = rnd(Dtype::Bf16, &[4, 5], 1);
    let b = rnd(Dtype::Bf16, &[6, 7], 2);
    let d = prepare(&program, "gemm", &[a, b]).unwrap_err();
    assert_eq!(d.code.0, "E0201");
    assert!(d.message.contains("`b`"), "{}", d.message);
}

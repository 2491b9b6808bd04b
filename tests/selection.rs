//! Selections along an axis against stable sorts written here: `topk` /
//! `topk_indices` (rounds of reductions up to 16 picks, a sort past
//! them) and `sort` / `argsort`, with ties, NaNs, signed zeros and
//! infinities. Each test runs on the CPU backend (or the GPU with
//! `TESSERA_TEST_BACKEND=cuda`) and again, as `*_sim`, on the simulator
//! (see `numerics.rs`).

#[macro_use]
#[path = "common/numerics.rs"]
mod common;

use common::*;

on_sim!(
    top_k => top_k_sim,
    sort_and_argsort => sort_and_argsort_sim,
    sort_ranks_long_lines => sort_ranks_long_lines_sim,
    sort_merges_segments => sort_merges_segments_sim,
);

/// The indices of `line` in torch's stable order: ascending, numbers by
/// value, then NaNs (the largest); descending, NaNs first, then numbers
/// from the largest; ties (-0.0 and 0.0 among them) by index.
fn stable_order(line: &[f64], descending: bool) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..line.len()).collect();
    idx.sort_by(|&a, &b| {
        let (x, y) = (line[a], line[b]);
        match (x.is_nan(), y.is_nan()) {
            (true, true) => std::cmp::Ordering::Equal,
            (true, false) if descending => std::cmp::Ordering::Less,
            (true, false) => std::cmp::Ordering::Greater,
            (false, true) if descending => std::cmp::Ordering::Greater,
            (false, true) => std::cmp::Ordering::Less,
            _ if descending => y.partial_cmp(&x).unwrap(),
            _ => x.partial_cmp(&y).unwrap(),
        }
        .then(a.cmp(&b))
    });
    idx
}

/// `topk` / `topk_indices` against a stable sort written here (largest
/// first, ties by the lower index, NaN first), along either axis, the
/// smallest with `largest = false`, rows of 5000; a `k` past the axis
/// known only at run time is E0206 at the call.
#[test]
fn top_k() {
    let c = source(
        "op v(x: tensor<R, C, fp32>) -> tensor<R, 5, fp32> { return topk(x, 5); }
         op i(x: tensor<R, C, fp32>) -> tensor<R, 5, int32> { return topk_indices(x, 5); }
         op s0(x: tensor<R, C, fp32>) -> tensor<2, C, int32> { return topk_indices(x, 2, axis = 0, largest = false); }
         op many(x: tensor<R, C, fp32>) -> tensor<R, 24, int32> { return topk_indices(x, 24); }",
    );
    let order = stable_order;
    for (r, cols) in [(4, 9), (3, 130), (2, 5000)] {
        let mut xv = rnd(Dtype::Fp32, &[r, cols], 7).to_f64_vec();
        xv[3] = 5.0;
        xv[6] = 5.0;
        xv[cols + 1] = f64::NAN;
        let x = Tensor::from_f64(Dtype::Fp32, &[r, cols], &xv).unwrap();
        let gi = run(&c, "i", &[x.clone()], Mode::Device).to_f64_vec();
        let gv = run(&c, "v", &[x.clone()], Mode::Device).to_f64_vec();
        for (row, line) in xv.chunks(cols).enumerate() {
            let want: Vec<usize> = order(line, true).into_iter().take(5).collect();
            let got: Vec<usize> = gi[row * 5..row * 5 + 5]
                .iter()
                .map(|v| *v as usize)
                .collect();
            assert_eq!(got, want, "indices of row {row} of {r}x{cols}");
            for (j, w) in want.iter().enumerate() {
                let (g, w) = (gv[row * 5 + j], line[*w]);
                assert!(
                    g == w || (g.is_nan() && w.is_nan()),
                    "value {j} of row {row}"
                );
            }
        }
        let got = run(&c, "s0", &[x], Mode::Device).to_f64_vec();
        for col in 0..cols {
            let line: Vec<f64> = (0..r).map(|i| xv[i * cols + col]).collect();
            let want = order(&line, false);
            assert_eq!(got[col] as usize, want[0], "smallest of column {col}");
            assert_eq!(
                got[cols + col] as usize,
                want[1],
                "second smallest of column {col}"
            );
        }
    }
    // 24 picks from rows of 1000 that one program holds whole (on the GPU
    // path each round's tiles went to shared memory of their own: it
    // overflowed from k = 8), with ties and NaNs.
    let (r, cols) = (3, 1000);
    let mut xv: Vec<f64> = rnd(Dtype::Fp32, &[r, cols], 8)
        .to_f64_vec()
        .iter()
        .map(|v| (v * 4.0).round() / 4.0)
        .collect();
    xv[17] = f64::NAN;
    xv[cols + 999] = f64::NAN;
    xv[cols + 3] = f64::NAN;
    let x = Tensor::from_f64(Dtype::Fp32, &[r, cols], &xv).unwrap();
    let got = run(&c, "many", &[x], Mode::Device).to_f64_vec();
    for (row, line) in xv.chunks(cols).enumerate() {
        let want: Vec<f64> = order(line, true)
            .into_iter()
            .take(24)
            .map(|i| i as f64)
            .collect();
        assert_eq!(
            got[row * 24..row * 24 + 24],
            want[..],
            "24 picks of row {row}"
        );
    }
    let program = c.program().unwrap();
    let e = prepare(&program, "i", &[rnd(Dtype::Fp32, &[2, 3], 1)]).expect_err("k past the axis");
    assert_eq!(e.code.0, "E0206", "{e:?}");
}

/// `sort` / `argsort` (ascending, descending, along either axis) and a
/// `topk` past 16 picks (cut from the same sort) against a stable
/// sort written here: NaN the largest, ties by index, -0.0 and 0.0 as
/// equals in index order, infinities in place.
#[test]
fn sort_and_argsort() {
    let c = source(
        "op up(x: tensor<R, C, fp32>) -> tensor<R, C, fp32> { return sort(x); }
         op up_i(x: tensor<R, C, fp32>) -> tensor<R, C, int32> { return argsort(x); }
         op down_i(x: tensor<R, C, fp32>) -> tensor<R, C, int32> { return argsort(x, descending = true); }
         op cols_i(x: tensor<R, C, fp32>) -> tensor<R, C, int32> { return argsort(x, axis = 0); }
         op both(x: tensor<R, C, fp32>) -> tensor<R, C, int32> {
             let (v, i) = sort(x, descending = true);
             return where(v != v, i, i + 0 * (v as int32));
         }
         op top(x: tensor<R, C, fp32>) -> tensor<R, 70, int32> { return topk_indices(x, 70); }
         op low(x: tensor<R, C, fp32>) -> tensor<R, 70, fp32> { return topk(x, 70, largest = false); }",
    );
    // Short lines several to a network, and lines of 5000 (padded to 8192).
    for (r, cols) in [(4, 150), (2, 5000)] {
        sort_case(&c, r, cols);
    }
}

/// [`sort_and_argsort`] on an `r` by `cols` matrix of small integers with
/// NaNs, signed zeros and infinities.
fn sort_case(c: &Compilation, r: usize, cols: usize) {
    let order = stable_order;
    let mut xv: Vec<f64> = rnd(Dtype::Fp32, &[r, cols], 9)
        .to_f64_vec()
        .iter()
        .map(|v| (v * 2.0).round())
        .collect();
    for (i, v) in [(3, f64::NAN), (40, f64::NAN), (7, -0.0), (8, 0.0)] {
        xv[i] = v;
    }
    xv[cols + 5] = f64::INFINITY;
    xv[cols + 6] = f64::NEG_INFINITY;
    xv[(r - 1) * cols..(r - 1) * cols + 9].fill(f64::NAN);
    let x = Tensor::from_f64(Dtype::Fp32, &[r, cols], &xv).unwrap();
    let rows = |name: &str| run(c, name, &[x.clone()], Mode::Device).to_f64_vec();
    let (up, up_i, down_i, both) = (rows("up"), rows("up_i"), rows("down_i"), rows("both"));
    let (top, low) = (rows("top"), rows("low"));
    for (row, line) in xv.chunks(cols).enumerate() {
        let asc = order(line, false);
        let desc = order(line, true);
        let at = |v: &[f64], w: usize| v[row * w..row * w + w].to_vec();
        let as_f = |o: &[usize]| o.iter().map(|i| *i as f64).collect::<Vec<f64>>();
        assert_eq!(at(&up_i, cols), as_f(&asc), "argsort of row {row}");
        assert_eq!(
            at(&down_i, cols),
            as_f(&desc),
            "descending argsort of row {row}"
        );
        assert_eq!(at(&both, cols), as_f(&desc), "sort's indices of row {row}");
        assert_eq!(at(&top, 70), as_f(&desc[..70]), "topk of 70 of row {row}");
        for (j, i) in asc.iter().enumerate() {
            let (g, w) = (up[row * cols + j], line[*i]);
            assert!(
                (g == w && g.is_sign_negative() == w.is_sign_negative())
                    || (g.is_nan() && w.is_nan()),
                "sorted value {j} of row {row}: {g} for {w}"
            );
            if j < 70 {
                let g = low[row * 70 + j];
                assert!(
                    g == w || (g.is_nan() && w.is_nan()),
                    "smallest {j} of row {row}"
                );
            }
        }
    }
    let got = rows("cols_i");
    for col in 0..cols {
        let line: Vec<f64> = (0..r).map(|i| xv[i * cols + col]).collect();
        let want = order(&line, false);
        for (k, w) in want.iter().enumerate() {
            assert_eq!(got[k * cols + col] as usize, *w, "argsort of column {col}");
        }
    }
}

/// Lines longer than a sorting network's shared memory holds are ranked
/// instead (each element's place counted against its whole line, in
/// chunks): scheduled for an arch of 12 KiB of shared memory per block, a
/// line of 600 fp32 (and an fp64 one of 300) is past it, and the
/// positions are those of the stable order, both ways.
#[test]
fn sort_ranks_long_lines() {
    let c = source(
        "op up_i(x: tensor<R, C, fp32>) -> tensor<R, C, int32> { return argsort(x); }
         op down_i(x: tensor<R, C, fp64>) -> tensor<R, C, int32> { return argsort(x, descending = true); }",
    );
    let small: &'static tessera_core::Arch = Box::leak(Box::new(tessera_core::Arch {
        smem_per_block: 12 << 10,
        ..tessera_core::Arch::SM_80
    }));
    let program = c.program().unwrap();
    for (op, dtype, cols, descending) in [
        ("up_i", Dtype::Fp32, 600, false),
        ("down_i", Dtype::Fp64, 300, true),
    ] {
        let r = 2;
        let mut xv: Vec<f64> = rnd(dtype, &[r, cols], 11)
            .to_f64_vec()
            .iter()
            .map(|v| (v * 3.0).round())
            .collect();
        for (i, v) in [
            (2, f64::NAN),
            (9, f64::NAN),
            (4, -0.0),
            (5, 0.0),
            (7, f64::INFINITY),
        ] {
            xv[i] = v;
        }
        let x = Tensor::from_f64(dtype, &[r, cols], &xv).unwrap();
        let g = prepare(&program, op, &[x.clone()]).unwrap();
        let p = tessera_cpu::kernels::compile_graph_for(&program, &g, small, None).unwrap();
        let text = tessera_driver::tile::print::print_program(&p);
        assert!(
            !text.contains(" sort ") && text.contains(" for "),
            "{op}: lines of {cols} are ranked, not sorted by a network:\n{text}"
        );
        let got = match backend() {
            Backend::Cpu => tessera_cpu::run_program(&p, &[x], 2).unwrap(),
            _ => {
                let sim = tessera_launch::Sim::new();
                tessera_launch::run_program(tessera_launch::Device::Sim(&sim), &p, &[x], None)
                    .unwrap()
            }
        }
        .remove(0)
        .to_f64_vec();
        for (row, line) in xv.chunks(cols).enumerate() {
            let want: Vec<f64> = order_of(line, descending);
            assert_eq!(
                got[row * cols..(row + 1) * cols],
                want[..],
                "{op} row {row}"
            );
        }
    }
}

fn order_of(line: &[f64], descending: bool) -> Vec<f64> {
    stable_order(line, descending)
        .into_iter()
        .map(|i| i as f64)
        .collect()
}

/// Lines past one network (16384) are sorted in segments of 4096 and
/// merged: a vocabulary of 20000 logits with runs of equal values across
/// segments (ties by position), NaNs and infinities, both ways, and the
/// first 100 of a descending sort (top-p's cut).
#[test]
fn sort_merges_segments() {
    let c = source(
        "op up_i(x: tensor<R, C, fp32>) -> tensor<R, C, int32> { return argsort(x); }
         op down_i(x: tensor<R, C, fp32>) -> tensor<R, C, int32> { return argsort(x, descending = true); }
         op top(x: tensor<R, C, fp32>) -> tensor<R, 100, fp32> { return topk(x, 100); }",
    );
    let (r, cols) = (2, 20000);
    let mut xv: Vec<f64> = rnd(Dtype::Fp32, &[r, cols], 13)
        .to_f64_vec()
        .iter()
        .map(|v| (v * 8.0).round())
        .collect();
    for (i, v) in [
        (5, f64::NAN),
        (19999, f64::NAN),
        (9000, f64::INFINITY),
        (30000, f64::NEG_INFINITY),
    ] {
        xv[i] = v;
    }
    let x = Tensor::from_f64(Dtype::Fp32, &[r, cols], &xv).unwrap();
    let rows = |name: &str| run(&c, name, &[x.clone()], Mode::Device).to_f64_vec();
    let (up, down, top) = (rows("up_i"), rows("down_i"), rows("top"));
    for (row, line) in xv.chunks(cols).enumerate() {
        let at = |v: &[f64], w: usize| v[row * w..row * w + w].to_vec();
        assert_eq!(at(&up, cols), order_of(line, false), "argsort of row {row}");
        let desc = order_of(line, true);
        assert_eq!(at(&down, cols), desc, "descending argsort of row {row}");
        let want: Vec<f64> = desc[..100].iter().map(|i| line[*i as usize]).collect();
        let got = at(&top, 100);
        assert!(
            got.iter()
                .zip(&want)
                .all(|(g, w)| g == w || (g.is_nan() && w.is_nan())),
            "topk of 100 of row {row}"
        );
    }
}

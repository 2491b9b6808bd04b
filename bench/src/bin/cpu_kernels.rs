//! The CPU backend on the benchmark shapes of the lowering issue: gemm
//! 512×512×512, attention (1, 8, 1024, 64) and layernorm (4096, 1024), all
//! fp32, each through fusion, Tile IR and the multi-threaded executor.
//!
//! `cargo run --release -p tessera-bench --bin cpu_kernels [DIR] [RUNS]`
//!
//! Prints one line per case (`name ms threads`) and, when `DIR` is given,
//! writes each case's inputs and result there as `.npy` so that
//! `bench/cpu_vs_numpy.py` can time numpy on the same data and check that
//! the numbers agree.

use std::path::PathBuf;
use tessera_bench::{median_time, ms};
use tessera_cpu::kernels::compile_graph;
use tessera_cpu::tile::{default_threads, run_program};
use tessera_driver::{compile_text, Stage};
use tessera_tensor::{randn, write_npy_file, Dtype, Tensor};

/// The ops under test, written as a user would.
const SOURCE: &str = r#"
import std.nn;

op gemm(a: tensor<M, K, fp32>, b: tensor<K, N, fp32>) -> tensor<M, N, fp32> {
    return a @ b;
}

op attn(q: tensor<B, H, N, D, fp32>, k: tensor<B, H, N, D, fp32>,
        v: tensor<B, H, N, D, fp32>) -> tensor<B, H, N, D, fp32> {
    return softmax((q @ k.T) * rsqrt(D), axis = -1) @ v;
}

op ln(x: tensor<R, C, fp32>, gamma: tensor<C, fp32>, beta: tensor<C, fp32>)
    -> tensor<R, C, fp32> {
    return layernorm(x, gamma, beta, eps = 1e-5);
}
"#;

/// One benchmark: an op and the shapes of its inputs.
struct Case {
    op: &'static str,
    inputs: &'static [(&'static str, &'static [usize])],
}

const CASES: &[Case] = &[
    Case {
        op: "gemm",
        inputs: &[("a", &[512, 512]), ("b", &[512, 512])],
    },
    Case {
        op: "attn",
        inputs: &[
            ("q", &[1, 8, 1024, 64]),
            ("k", &[1, 8, 1024, 64]),
            ("v", &[1, 8, 1024, 64]),
        ],
    },
    Case {
        op: "ln",
        inputs: &[("x", &[4096, 1024]), ("gamma", &[1024]), ("beta", &[1024])],
    },
];

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args.next().map(PathBuf::from);
    let runs: usize = args
        .next()
        .map(|a| a.parse().expect("RUNS must be a number"))
        .unwrap_or(5);
    if let Some(d) = &dir {
        std::fs::create_dir_all(d).expect("cannot create the output directory");
    }
    let c = compile_text("bench.tsr", SOURCE, Stage::Check);
    assert!(!c.has_errors(), "the benchmark source does not check");
    let program = c.program().expect("checked");
    let threads = default_threads();
    for (i, case) in CASES.iter().enumerate() {
        let inputs: Vec<Tensor> = case
            .inputs
            .iter()
            .enumerate()
            .map(|(j, (_, shape))| {
                randn(Dtype::Fp32, shape, 100 * i as u64 + j as u64).expect("valid shape")
            })
            .collect();
        let g = tessera_cpu::prepare(&program, case.op, &inputs).expect("the op builds");
        let tile = compile_graph(&program, &g).expect("the op lowers");
        let run = || run_program(&tile, &inputs, threads).expect("the op runs");
        let t = median_time(runs, run);
        println!("{} {:.3} {threads}", case.op, ms(t));
        if let Some(d) = &dir {
            for ((name, _), t) in case.inputs.iter().zip(&inputs) {
                write_npy_file(d.join(format!("{}_{name}.npy", case.op)), t)
                    .expect("cannot write an input");
            }
            let out = run().remove(0);
            write_npy_file(d.join(format!("{}_out.npy", case.op)), &out)
                .expect("cannot write the result");
        }
    }
}

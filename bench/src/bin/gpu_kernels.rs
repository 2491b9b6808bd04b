//! The GPU backend on the benchmark shapes of the NVIDIA-backend and Hopper
//! issues: gemm bf16 4096³ and 8192³, fp8 e4m3 gemm 8192³ (fp32 and bf16
//! accumulators), attention bf16 (4, 16, 4096, 64) and (4, 16, 4096, 128),
//! causal attention bf16 (4, 16, 4096, 128), layernorm and softmax fp32
//! (8192, 4096). Each op goes through fusion, Tile IR, Target IR and PTX,
//! is loaded once, and its launches are timed with CUDA events (median of
//! RUNS after a warm-up).
//!
//! `gpu_kernels DIR [RUNS] [CASE...]` (needs a GPU; `TESSERA_BENCH_ARCH`
//! picks the PTX target, e.g. `sm_90a`, else the device's default): reads
//! each case's inputs from
//! `DIR/CASE_PARAM.npy` (random ones when absent), writes the result to
//! `DIR/CASE_out.npy`, and prints `CASE ms` lines; `bench/gpu_vs_torch.py`
//! writes the inputs, then times torch and Triton on them and checks the
//! results, in the same run.

use tessera_cpu::kernels::compile_graph;
use tessera_driver::{compile_text, Stage};
use tessera_launch::{Gpu, Prepared};
use tessera_tensor::{randn, read_npy_file, write_npy_file, Dtype, Tensor};

/// The ops under test.
const SOURCE: &str = r#"
import std.nn;
numerics standard;

op gemm(a: tensor<M, K, bf16>, b: tensor<K, N, bf16>) -> tensor<M, N, bf16> {
    return a @ b;
}

op attn(q: tensor<B, H, N, D, bf16>, k: tensor<B, H, N, D, bf16>,
        v: tensor<B, H, N, D, bf16>) -> tensor<B, H, N, D, bf16> {
    return softmax((q @ k.T) * rsqrt(D), axis = -1) @ v;
}

op ln(x: tensor<R, C, fp32>, gamma: tensor<C, fp32>, beta: tensor<C, fp32>)
    -> tensor<R, C, fp32> {
    return layernorm(x, gamma, beta, eps = 1e-5);
}

op sm(x: tensor<R, C, fp32>) -> tensor<R, C, fp32> {
    return softmax(x, axis = -1);
}

op causal(q: tensor<B, H, N, D, bf16>, k: tensor<B, H, N, D, bf16>,
          v: tensor<B, H, N, D, bf16>) -> tensor<B, H, N, D, bf16> {
    return attention(q, k, v, causal = true);
}
"#;

/// The fp8 product, under a policy that admits 8-bit storage: `x @ w.T`
/// keeps both operands K-major, the layout wgmma reads fp8 in. With an
/// exact fp32 sum (`mma.sync`), and with `aggressive`'s bf16 accumulator
/// (wgmma on sm_90a).
const SOURCE_FP8: &str = r#"
numerics aggressive, accumulate = fp32;

op gemm_fp8(x: tensor<M, K, fp8_e4m3>, w: tensor<N, K, fp8_e4m3>) -> tensor<M, N, fp32> {
    return x @ w.T;
}

op gemm_fp8_bf16acc(x: tensor<M, K, fp8_e4m3>, w: tensor<N, K, fp8_e4m3>) -> tensor<M, N, fp32> {
    numerics aggressive;
    return x @ w.T;
}
"#;

/// One benchmark: a label, a case name, an op, named input dtypes and
/// shapes, and its FLOPs (0 for memory-bound ops, which report bandwidth).
struct Case {
    label: &'static str,
    name: &'static str,
    op: &'static str,
    /// Whether the op lives in [`SOURCE_FP8`].
    fp8: bool,
    inputs: Vec<(&'static str, Dtype, Vec<usize>)>,
    flops: f64,
    bytes: f64,
}

fn cases() -> Vec<Case> {
    let attn = |d: usize| {
        let (b, h, n) = (4usize, 16usize, 4096usize);
        Case {
            label: if d == 64 {
                "attention (4, 16, 4096, 64) bf16"
            } else {
                "attention (4, 16, 4096, 128) bf16"
            },
            name: if d == 64 { "attn64" } else { "attn128" },
            op: "attn",
            fp8: false,
            inputs: ["q", "k", "v"]
                .into_iter()
                .map(|p| (p, Dtype::Bf16, vec![b, h, n, d]))
                .collect(),
            flops: 4.0 * (b * h * n * n * d) as f64,
            bytes: 0.0,
        }
    };
    // A square GEMM of `n`: bf16 `a @ b`, or fp8 `x @ w.T`.
    let gemm = |label, name, op, n: usize, fp8: bool| {
        let (dtype, params) = if fp8 {
            (Dtype::Fp8E4m3, ["x", "w"])
        } else {
            (Dtype::Bf16, ["a", "b"])
        };
        Case {
            label,
            name,
            op,
            fp8,
            inputs: params.into_iter().map(|p| (p, dtype, vec![n, n])).collect(),
            flops: 2.0 * (n as f64).powi(3),
            bytes: 0.0,
        }
    };
    vec![
        gemm("gemm 4096³ bf16", "gemm", "gemm", 4096, false),
        gemm("gemm 8192³ bf16", "gemm8k", "gemm", 8192, false),
        gemm(
            "gemm 8192³ fp8 e4m3 (x @ w.T, fp32 out)",
            "fp8",
            "gemm_fp8",
            8192,
            true,
        ),
        gemm(
            "gemm 8192³ fp8 e4m3 (x @ w.T, bf16 accumulator, fp32 out)",
            "fp8acc16",
            "gemm_fp8_bf16acc",
            8192,
            true,
        ),
        attn(64),
        attn(128),
        Case {
            label: "causal attention (4, 16, 4096, 128) bf16",
            name: "causal",
            op: "causal",
            fp8: false,
            inputs: ["q", "k", "v"]
                .into_iter()
                .map(|p| (p, Dtype::Bf16, vec![4, 16, 4096, 128]))
                .collect(),
            // Half the score matrix is computed.
            flops: 2.0 * 4.0 * 16.0 * 4096.0 * 4096.0 * 128.0,
            bytes: 0.0,
        },
        Case {
            label: "layernorm (8192, 4096) fp32",
            name: "ln",
            op: "ln",
            fp8: false,
            inputs: vec![
                ("x", Dtype::Fp32, vec![8192, 4096]),
                ("gamma", Dtype::Fp32, vec![4096]),
                ("beta", Dtype::Fp32, vec![4096]),
            ],
            flops: 0.0,
            bytes: 2.0 * 4.0 * 8192.0 * 4096.0,
        },
        Case {
            label: "softmax (8192, 4096) fp32",
            name: "sm",
            op: "sm",
            fp8: false,
            inputs: vec![("x", Dtype::Fp32, vec![8192, 4096])],
            flops: 0.0,
            bytes: 2.0 * 4.0 * 8192.0 * 4096.0,
        },
    ]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = std::path::PathBuf::from(args.next().expect("usage: gpu_kernels DIR [RUNS]"));
    let runs: usize = args
        .next()
        .map(|a| a.parse().expect("RUNS must be a number"))
        .unwrap_or(10);
    let only: Vec<String> = args.collect();
    let mut gpu = Gpu::open().unwrap_or_else(|e| panic!("no GPU: {e}"));
    if let Ok(name) = std::env::var("TESSERA_BENCH_ARCH") {
        let arch = tessera_core::Arch::from_name(&name)
            .unwrap_or_else(|| panic!("TESSERA_BENCH_ARCH: unknown target `{name}`"));
        gpu = gpu.with_target(arch.name);
    }
    let target = tessera_launch::Device::Cuda(&gpu).target().name;
    println!("# device: {} ({}), target {target}", gpu.name(), gpu.arch());
    let c = compile_text("bench.tsr", SOURCE, Stage::Check);
    let c8 = compile_text("fp8.tsr", SOURCE_FP8, Stage::Check);
    assert!(
        !c.has_errors() && !c8.has_errors(),
        "the benchmark sources do not check"
    );
    let (program, program_fp8) = (
        c.program().expect("checked"),
        c8.program().expect("checked"),
    );
    for (i, case) in cases().iter().enumerate() {
        if !only.is_empty() && !only.iter().any(|o| o == case.name) {
            continue;
        }
        let inputs: Vec<Tensor> = case
            .inputs
            .iter()
            .enumerate()
            .map(|(j, (p, dt, shape))| {
                let path = dir.join(format!("{}_{p}.npy", case.name));
                match read_npy_file(&path) {
                    Ok(a) => a.tensor.convert(*dt),
                    Err(_) => randn(*dt, shape, 100 * i as u64 + j as u64).expect("shape"),
                }
            })
            .collect();
        let t0 = std::time::Instant::now();
        let program = if case.fp8 { &program_fp8 } else { &program };
        let g = tessera_cpu::prepare(program, case.op, &inputs).expect("the op builds");
        let tile = match compile_graph(program, &g) {
            Ok(t) => t,
            Err(e) => {
                println!("# {}: does not lower: {e:?}", case.label);
                continue;
            }
        };
        let mut prep = match Prepared::new(tessera_launch::Device::Cuda(&gpu), &tile, &inputs) {
            Ok(p) => p,
            Err(e) => {
                println!("# {}: cannot prepare: {e}", case.label);
                continue;
            }
        };
        let prepare_ms = t0.elapsed().as_secs_f64() * 1e3;
        let out = match prep
            .run()
            .map_err(String::from)
            .and_then(|()| prep.outputs())
        {
            Ok(mut outs) => outs.remove(0),
            Err(e) => {
                println!("# {}: the launch failed: {e}", case.label);
                continue;
            }
        };
        let mut times = Vec::new();
        for _ in 0..runs {
            let ms = gpu.time(|| {
                prep.run().map_err(|e| tessera_launch::CudaError::Invalid {
                    during: "running the benchmark".into(),
                    reason: e.message,
                })
            });
            times.push(ms.expect("timing") as f64);
        }
        times.sort_by(f64::total_cmp);
        let ms = times[times.len() / 2];
        let rate = if case.flops > 0.0 {
            format!("{:.1} TFLOP/s", case.flops / ms / 1e9)
        } else {
            format!("{:.0} GB/s", case.bytes / ms / 1e6)
        };
        write_npy_file(dir.join(format!("{}_out.npy", case.name)), &out).expect("write");
        println!(
            "{} {ms:.4} # {}: {rate}; compile+load {prepare_ms:.0} ms",
            case.name, case.label
        );
    }
}

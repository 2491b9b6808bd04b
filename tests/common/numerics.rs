//! What the numerics test binaries share: compiling sources and examples,
//! running an op on the backend under test (the CPU executor, the GPU, or
//! the simulator for the `*_sim` variants that `on_sim!` makes), random
//! inputs and float64 references.

#![allow(dead_code)]

use std::path::Path;
pub use tessera_cpu::kernels::run_graph;
pub use tessera_cpu::{eval, prepare, Mode};
pub use tessera_driver::{compile_text, Compilation, Stage};
pub use tessera_tensor::{randn, Dtype, Tensor};

pub fn example(name: &str) -> Compilation {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(name);
    let text = std::fs::read_to_string(path).unwrap();
    let c = compile_text(name, &text, Stage::Check);
    assert!(!c.has_errors());
    c
}

pub fn source(text: &str) -> Compilation {
    let c = compile_text("t.tsr", text, Stage::Check);
    assert!(!c.has_errors(), "{:?}", c.diagnostics.as_slice());
    c
}

/// Where `Mode::Device` runs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Backend {
    Cpu,
    Cuda,
    Sim,
}

thread_local! {
    /// The backend of the test running on this thread (set by the `_sim`
    /// variants; else from the environment).
    pub static BACKEND: std::cell::Cell<Option<Backend>> = const { std::cell::Cell::new(None) };
}

thread_local! {
    /// What the last simulator run on this thread did.
    pub static SIM_STATS: std::cell::Cell<tessera_launch::SimStats> = std::cell::Cell::new(Default::default());
}

pub fn backend() -> Backend {
    BACKEND.with(|b| b.get()).unwrap_or(if on_gpu() {
        Backend::Cuda
    } else {
        Backend::Cpu
    })
}

/// Each `test => test_sim` pair: `test_sim` runs `test` with every
/// `Mode::Device` run on the simulator.
macro_rules! on_sim {
    ($($test:ident => $sim:ident),* $(,)?) => {$(
        #[test]
        fn $sim() {
            BACKEND.with(|b| b.set(Some(Backend::Sim)));
            $test();
        }
    )*};
}

/// Runs `op`: `Mode::Device` through the kernel pipeline (Schedule IR, Tile
/// IR, then the multi-threaded Tile IR executor, PTX on the GPU, or PTX on
/// the simulator: see [`backend`]), `Mode::Reference` through the f64
/// graph evaluator.
pub fn run(c: &Compilation, op: &str, inputs: &[Tensor], mode: Mode) -> Tensor {
    run_threads(c, op, inputs, mode, None)
}

pub fn run_threads(
    c: &Compilation,
    op: &str,
    inputs: &[Tensor],
    mode: Mode,
    threads: Option<usize>,
) -> Tensor {
    let program = c.program().unwrap();
    let g = prepare(&program, op, inputs).unwrap_or_else(|d| panic!("{op}: {d:?}"));
    match mode {
        Mode::Device => run_device(c, &g, inputs, threads)
            .unwrap_or_else(|e| panic!("{op} on {:?}: {e}", backend()))
            .remove(0),
        Mode::Reference => eval(&g, inputs, mode)
            .unwrap_or_else(|e| panic!("{op}: {e}"))
            .remove(0),
    }
}

/// Runs prepared graph `g` through the kernel pipeline on [`backend`]: the
/// Tile IR executor on the CPU (with `threads`), PTX on the GPU or on the
/// simulator. Every result, or what the backend reports.
pub fn run_device(
    c: &Compilation,
    g: &tessera_driver::graph::Graph,
    inputs: &[Tensor],
    threads: Option<usize>,
) -> Result<Vec<Tensor>, String> {
    let program = c.program().unwrap();
    let b = backend();
    if b == Backend::Cpu {
        return run_graph(&program, g, inputs, threads).map_err(|d| format!("{d:?}"));
    }
    let p = tessera_cpu::kernels::compile_graph(&program, g).map_err(|d| format!("{d:?}"))?;
    let (gpu, sim);
    let dev = if b == Backend::Cuda {
        gpu = gpu_for_tests();
        tessera_launch::Device::Cuda(&gpu)
    } else {
        sim = tessera_launch::Sim::new();
        tessera_launch::Device::Sim(&sim)
    };
    let out = tessera_launch::run_program(dev, &p, inputs, Some(&|s| c.locate(s)))
        .map_err(|e| e.to_string())?;
    if let tessera_launch::Device::Sim(sim) = dev {
        SIM_STATS.with(|s| s.set(sim.totals()));
    }
    Ok(out)
}

/// The GPU, for the PTX target `TESSERA_TEST_ARCH` names (e.g. `sm_90a`)
/// or else the device's default.
fn gpu_for_tests() -> tessera_launch::Gpu {
    let gpu = tessera_launch::Gpu::open().expect("TESSERA_TEST_BACKEND=cuda needs a GPU");
    match std::env::var("TESSERA_TEST_ARCH") {
        Ok(name) => {
            let arch = tessera_core::Arch::from_name(&name)
                .unwrap_or_else(|| panic!("TESSERA_TEST_ARCH: unknown target `{name}`"));
            gpu.with_target(arch.name)
        }
        Err(_) => gpu,
    }
}

/// Whether `Mode::Device` runs on the GPU (`TESSERA_TEST_BACKEND=cuda`).
pub fn on_gpu() -> bool {
    std::env::var("TESSERA_TEST_BACKEND").is_ok_and(|b| b == "cuda")
}

pub fn rnd(dtype: Dtype, shape: &[usize], seed: u64) -> Tensor {
    randn(dtype, shape, seed).unwrap()
}

/// Largest |got - want| relative to the largest |want|.
pub fn rel_err(got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    let scale = want.iter().fold(0.0f64, |m, x| m.max(x.abs())).max(1e-30);
    got.iter()
        .zip(want)
        .fold(0.0f64, |m, (g, w)| m.max((g - w).abs()))
        / scale
}

pub fn matmul(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
        }
    }
    c
}

pub fn softmax_rows(x: &[f64], cols: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(cols) {
        let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = row.iter().map(|v| (v - m).exp()).collect();
        let s: f64 = e.iter().sum();
        out.extend(e.iter().map(|v| v / s));
    }
    out
}

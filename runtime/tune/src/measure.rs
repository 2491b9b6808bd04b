//! Timing configurations on a GPU: random inputs uploaded once per
//! configuration, warm-up runs, then repetitions between CUDA events with
//! the L2 cache flushed before each (a buffer of twice its size zeroed),
//! and the median kept. A configuration whose first run exceeds the
//! timeout, whose launch fails, or whose results differ from the untuned
//! configuration's beyond the dtype's tolerance is rejected with the
//! reason.

use crate::Options;
use tessera_graph::{Graph, Program};
use tessera_launch::{Device, Gpu, Prepared};
use tessera_tensor::{Dtype, Tensor};
use tessera_tile::TileProgram;

/// Why a configuration is rejected.
enum Failure {
    /// It failed on the GPU (a load, a launch, a trap): the context may be
    /// unusable.
    Gpu(String),
    /// It ran, but too slowly or to wrong results.
    Rejected(String),
}

/// Times configurations of one graph on one GPU.
pub struct Measurer<'g> {
    gpu: &'g Gpu,
    inputs: Vec<Tensor>,
    reference: Vec<Tensor>,
    flush: tessera_cuda::DeviceBuffer,
    opts: Options,
    /// A configuration failed on the GPU: its context may be unusable.
    failed: bool,
}

/// Random inputs for `g`'s parameters: uniform in [-1, 1) for floats,
/// small integers for integer dtypes (indices stay in range for most
/// ops), the same on every run.
pub fn inputs(g: &Graph) -> Result<Vec<Tensor>, String> {
    let shapes = crate::param_shapes(g)?;
    g.params
        .iter()
        .zip(shapes)
        .enumerate()
        .map(|(i, (p, shape))| {
            let t = p.ty.tensor().ok_or("a parameter is not a tensor")?;
            let dtype = Dtype::from_name(t.dtype.name()).ok_or_else(|| {
                format!(
                    "`{}` has dtype {} which the runtime lacks",
                    p.name,
                    t.dtype.name()
                )
            })?;
            let u = tessera_tensor::rand(Dtype::Fp32, &shape, 0x7e55e7a + i as u64, 0)
                .map_err(|e| e.to_string())?;
            let scaled = if dtype.is_float() {
                u.to_f64_vec()
                    .iter()
                    .map(|x| 2.0 * x - 1.0)
                    .collect::<Vec<_>>()
            } else {
                u.to_f64_vec().iter().map(|x| (x * 4.0).floor()).collect()
            };
            Tensor::from_f64(dtype, &shape, &scaled).map_err(|e| e.to_string())
        })
        .collect()
}

/// The largest difference `got` may have from `want` relative to `want`'s
/// largest magnitude, for results of `dtype`.
pub fn tolerance(dtype: Dtype) -> f64 {
    match dtype {
        Dtype::Fp64 => 1e-9,
        Dtype::Fp32 | Dtype::Tf32 => 2e-3,
        Dtype::Fp16 => 1e-2,
        Dtype::Bf16 => 3e-2,
        d if d.is_fp8() => 0.15,
        _ => 0.0,
    }
}

/// Why `got` is not `want` within [`tolerance`], if it is not.
pub fn compare(want: &[Tensor], got: &[Tensor]) -> Result<(), String> {
    for (i, (w, g)) in want.iter().zip(got).enumerate() {
        if w.shape != g.shape {
            return Err(format!(
                "output {i} has shape {:?}, not {:?}",
                g.shape, w.shape
            ));
        }
        let (wv, gv) = (w.to_f64_vec(), g.to_f64_vec());
        let scale = wv.iter().fold(0.0f64, |m, x| m.max(x.abs())).max(1e-30);
        let tol = tolerance(w.dtype);
        for (j, (a, b)) in wv.iter().zip(&gv).enumerate() {
            let bad = if a.is_nan() {
                !b.is_nan()
            } else {
                (a - b).abs() > tol * scale
            };
            if bad {
                return Err(format!(
                    "wrong results: output {i} element {j} is {b}, the untuned configuration gives {a}"
                ));
            }
        }
    }
    Ok(())
}

impl<'g> Measurer<'g> {
    /// Prepares to time configurations of `g`: inputs, the untuned
    /// configuration's results (`reference`), the L2 flush buffer.
    pub fn new(
        gpu: &'g Gpu,
        _program: &Program<'_>,
        g: &Graph,
        reference: &TileProgram,
        opts: &Options,
    ) -> Result<Measurer<'g>, String> {
        let inputs = inputs(g)?;
        let mut p = Prepared::new(Device::Cuda(gpu), reference, &inputs)
            .map_err(|e| format!("the untuned configuration does not run: {e}"))?;
        p.run()
            .map_err(|e| format!("the untuned configuration does not run: {e}"))?;
        let reference = p.outputs()?;
        drop(p);
        let l2 =
            tessera_core::Arch::for_device(gpu.compute_capability().0, gpu.compute_capability().1)
                .peaks()
                .l2_bytes;
        let flush = gpu
            .alloc_zeroed(2 * l2 as usize)
            .map_err(|e| e.to_string())?;
        Ok(Measurer {
            gpu,
            inputs,
            reference,
            flush,
            opts: opts.clone(),
            failed: false,
        })
    }

    /// Whether a configuration failed to load or run on the GPU, or a
    /// CUDA call failed: after a trap or a fault the context fails every
    /// later call, so nothing more should be timed in this process.
    pub fn failed(&self) -> bool {
        self.failed
    }

    /// The median milliseconds of configuration `tile`, or why it is
    /// rejected.
    pub fn time(&mut self, tile: &TileProgram) -> Result<f64, String> {
        let result = self.time_on_gpu(tile);
        if let Err(Failure::Gpu(_)) = &result {
            self.failed = true;
        }
        result.map_err(|f| match f {
            Failure::Gpu(why) | Failure::Rejected(why) => why,
        })
    }

    fn time_on_gpu(&mut self, tile: &TileProgram) -> Result<f64, Failure> {
        use Failure::Gpu;
        let gpu = self.gpu;
        let mut p = Prepared::new(Device::Cuda(gpu), tile, &self.inputs)
            .map_err(|e| Gpu(format!("does not load: {e}")))?;
        let failed = std::cell::RefCell::new(None);
        let run = |p: &mut Prepared<'_>| {
            if let Err(e) = p.run() {
                failed.borrow_mut().get_or_insert(e);
            }
            Ok(())
        };
        let cuda = |e: tessera_cuda::CudaError| Gpu(e.to_string());
        let first = gpu.time(|| run(&mut p)).map_err(cuda)?;
        if let Some(e) = failed.borrow_mut().take() {
            return Err(Gpu(format!("does not run: {e}")));
        }
        if f64::from(first) > self.opts.timeout_ms {
            return Err(Failure::Rejected(format!(
                "timed out: its first run took {first:.1} ms (limit {} ms)",
                self.opts.timeout_ms
            )));
        }
        compare(&self.reference, &p.outputs().map_err(Gpu)?).map_err(Failure::Rejected)?;
        for _ in 0..self.opts.warmup {
            gpu.time(|| run(&mut p)).map_err(cuda)?;
        }
        let mut times = Vec::with_capacity(self.opts.reps);
        for _ in 0..self.opts.reps.max(1) {
            gpu.fill_zero(&mut self.flush).map_err(cuda)?;
            times.push(f64::from(gpu.time(|| run(&mut p)).map_err(cuda)?));
        }
        if let Some(e) = failed.into_inner() {
            return Err(Gpu(format!("does not run: {e}")));
        }
        times.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
        Ok(times[times.len() / 2])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparison_is_relative_to_the_largest_value_and_per_dtype() {
        let t = |d: Dtype, v: &[f64]| Tensor::from_f64(d, &[v.len()], v).unwrap();
        let want = [t(Dtype::Fp32, &[100.0, 1.0])];
        assert!(compare(&want, &[t(Dtype::Fp32, &[100.0, 1.1])]).is_ok());
        let err = compare(&want, &[t(Dtype::Fp32, &[100.0, 2.0])]).unwrap_err();
        assert!(err.contains("element 1"), "{err}");
        let ints = [t(Dtype::Int32, &[3.0])];
        assert!(compare(&ints, &[t(Dtype::Int32, &[4.0])]).is_err());
        assert!(compare(&want, &[t(Dtype::Fp32, &[1.0])])
            .unwrap_err()
            .contains("shape"));
    }
}

//! The GPU backend: a Tile IR program specialised for its inputs' shapes,
//! lowered to PTX, loaded once per process (the module cache of
//! `tessera-cuda`), and run step by step on the device.

pub use tessera_cuda::{available, CudaError, Gpu};
use tessera_cuda::{DeviceBuffer, KernelArg};
use tessera_graph::CollectiveKind;
use tessera_runtime::{DType, Tensor};
use tessera_schedule::Bindings;
use tessera_tile::{eval_dims, BufferDecl, BufferId, Step, TileProgram};

/// The runtime dtype of a buffer declaration.
fn dtype(d: &BufferDecl) -> Result<DType, String> {
    DType::from_name(d.dtype.name()).ok_or_else(|| {
        format!(
            "`{}` has dtype {} which the runtime lacks",
            d.name,
            d.dtype.name()
        )
    })
}

/// A device buffer with its dtype and shape.
struct Buf {
    mem: DeviceBuffer,
    dtype: DType,
    shape: Vec<usize>,
}

/// Zeroed device buffers for declarations.
fn alloc(gpu: &Gpu, decls: &[BufferDecl], b: &Bindings) -> Result<Vec<Buf>, String> {
    decls
        .iter()
        .map(|d| {
            let shape = eval_dims(&d.dims, b).map_err(|e| format!("`{}`: {e}", d.name))?;
            let dtype = dtype(d)?;
            let n: usize = shape.iter().product();
            let bytes = n * dtype.size_bytes();
            let mem = gpu.alloc_zeroed(bytes.max(1)).map_err(|e| e.to_string())?;
            Ok(Buf { mem, dtype, shape })
        })
        .collect()
}

/// The PTX of program `p` specialised for `bindings`, for `arch`.
pub fn program_ptx(p: &TileProgram, arch: &str, bindings: &Bindings) -> Result<String, String> {
    tessera_target::emit_ptx(p, arch, bindings)
        .map_err(|e| format!("kernel `{}`: {}", e.kernel, e.message))
}

/// A program ready to run on the device: PTX loaded, inputs uploaded,
/// temporaries and outputs allocated. [`run`](Prepared::run) launches its
/// steps (again and again, for timing); [`outputs`](Prepared::outputs)
/// reads the results back.
pub struct Prepared<'g> {
    gpu: &'g Gpu,
    program: &'g TileProgram,
    module: std::sync::Arc<tessera_cuda::Module>,
    functions: Vec<tessera_target::ir::Function>,
    bindings: Bindings,
    ins: Vec<Buf>,
    temps: Vec<Buf>,
    outs: Vec<Buf>,
}

/// The PTX target for a device: our PTX targets at most sm_90; newer
/// devices run it through the driver's JIT.
fn target_for(gpu: &Gpu) -> &'static str {
    if gpu.compute_capability().0 >= 9 {
        "sm_90"
    } else {
        "sm_80"
    }
}

impl<'g> Prepared<'g> {
    /// Specialises `p` for `inputs`, loads its PTX and uploads the inputs.
    pub fn new(
        gpu: &'g Gpu,
        p: &'g TileProgram,
        inputs: &[Tensor],
    ) -> Result<Prepared<'g>, String> {
        if inputs.len() != p.inputs.len() {
            return Err(format!(
                "`{}` takes {} inputs but was given {}",
                p.name,
                p.inputs.len(),
                inputs.len()
            ));
        }
        let shapes: Vec<&[usize]> = inputs.iter().map(|t| &t.shape[..]).collect();
        let bindings = p.bind_dims(&shapes)?;
        let target = target_for(gpu);
        let lowered = tessera_target::lower_program(p, target, &bindings)
            .map_err(|e| format!("kernel `{}`: {}", e.kernel, e.message))?;
        tessera_target::verify::verify(&lowered)
            .map_err(|e| format!("internal error: kernel `{}`: {}", e.function, e.message))?;
        let ptx = tessera_target::print_module(&lowered);
        let module = gpu.module(&ptx).map_err(|e| e.to_string())?;
        let mut ins = Vec::new();
        for (t, d) in inputs.iter().zip(&p.inputs) {
            let want = dtype(d)?;
            let t = if t.dtype == want {
                t.clone()
            } else {
                t.convert(want)
            };
            let mem = gpu.upload_tensor(&t).map_err(|e| e.to_string())?;
            ins.push(Buf {
                mem,
                dtype: want,
                shape: t.shape.clone(),
            });
        }
        let temps = alloc(gpu, &p.temps, &bindings)?;
        let outs = alloc(gpu, &p.outputs, &bindings)?;
        Ok(Prepared {
            gpu,
            program: p,
            module,
            functions: lowered.functions,
            bindings,
            ins,
            temps,
            outs,
        })
    }

    /// Enqueues every step of the program (asynchronously: errors of a
    /// kernel surface at the next synchronisation).
    pub fn run(&mut self) -> Result<(), String> {
        let (gpu, p, b) = (self.gpu, self.program, &self.bindings);
        for step in &p.steps {
            match step {
                Step::Launch { kernel, args } => {
                    let k = &p.kernels[*kernel];
                    let f = &self.functions[*kernel];
                    let mut grid = [1u32; 3];
                    for (g, s) in grid.iter_mut().zip(&k.grid) {
                        let n = s.eval(b)?;
                        *g = u32::try_from(n)
                            .map_err(|_| format!("kernel `{}`: grid extent {n}", k.name))?;
                    }
                    if grid.contains(&0) {
                        continue;
                    }
                    let bufs: Vec<&DeviceBuffer> = args
                        .iter()
                        .map(|a| get(&self.ins, &self.temps, &self.outs, *a).map(|b| &b.mem))
                        .collect::<Result<_, _>>()?;
                    let kargs: Vec<KernelArg<'_>> =
                        bufs.iter().map(|m| KernelArg::Buffer(m)).collect();
                    let shared = u32::try_from(f.shared_bytes).map_err(|_| {
                        format!(
                            "kernel `{}`: {} bytes of shared memory",
                            k.name, f.shared_bytes
                        )
                    })?;
                    gpu.launch(
                        &self.module,
                        &k.name,
                        grid,
                        [f.threads, 1, 1],
                        shared,
                        &kargs,
                    )
                    .map_err(|e| e.to_string())?;
                }
                Step::Copy { src, dst } => {
                    let bytes = gpu
                        .download(&get(&self.ins, &self.temps, &self.outs, *src)?.mem)
                        .map_err(|e| e.to_string())?;
                    let d = get_mut(&mut self.temps, &mut self.outs, *dst)?;
                    gpu.write(&mut d.mem, &bytes).map_err(|e| e.to_string())?;
                }
                Step::Collective {
                    kind,
                    devices,
                    src,
                    dst,
                    ..
                } => {
                    // One device holds the whole logical tensor (as on the
                    // CPU): reductions are complete, gathers only change
                    // the layout, shifts rotate the shards of dimension 0.
                    let s = get(&self.ins, &self.temps, &self.outs, *src)?;
                    let mut bytes = gpu.download(&s.mem).map_err(|e| e.to_string())?;
                    let rows = s.shape.first().copied().unwrap_or(0);
                    let offset = match kind {
                        CollectiveKind::Send { offset } => *offset,
                        CollectiveKind::Recv { offset } => offset.saturating_neg(),
                        _ => 0,
                    };
                    if rows > 0 && offset != 0 && (rows as u64) % *devices == 0 {
                        let row_bytes = bytes.len() / rows;
                        let shard = (rows as u64 / *devices) as i64;
                        let shift = (shard * offset).rem_euclid(rows as i64) as usize;
                        bytes.rotate_right(shift * row_bytes);
                    }
                    let d = get_mut(&mut self.temps, &mut self.outs, *dst)?;
                    gpu.write(&mut d.mem, &bytes).map_err(|e| e.to_string())?;
                }
            }
        }
        Ok(())
    }

    /// Waits for the device and reads every output back.
    pub fn outputs(&self) -> Result<Vec<Tensor>, String> {
        self.gpu.synchronize().map_err(|e| e.to_string())?;
        self.outs
            .iter()
            .map(|o| {
                self.gpu
                    .download_tensor(&o.mem, o.dtype, &o.shape)
                    .map_err(|e| e.to_string())
            })
            .collect()
    }
}

/// Runs `p` on `inputs` on `gpu` and returns its outputs.
pub fn run_program(gpu: &Gpu, p: &TileProgram, inputs: &[Tensor]) -> Result<Vec<Tensor>, String> {
    let mut prepared = Prepared::new(gpu, p, inputs)?;
    prepared.run()?;
    prepared.outputs()
}

fn get<'a>(
    ins: &'a [Buf],
    temps: &'a [Buf],
    outs: &'a [Buf],
    id: BufferId,
) -> Result<&'a Buf, String> {
    let (list, i) = match id {
        BufferId::Input(i) => (ins, i),
        BufferId::Temp(i) => (temps, i),
        BufferId::Output(i) => (outs, i),
    };
    list.get(i)
        .ok_or_else(|| format!("internal error: no buffer {id:?}"))
}

fn get_mut<'a>(
    temps: &'a mut [Buf],
    outs: &'a mut [Buf],
    id: BufferId,
) -> Result<&'a mut Buf, String> {
    match id {
        BufferId::Temp(i) => temps.get_mut(i),
        BufferId::Output(i) => outs.get_mut(i),
        BufferId::Input(_) => None,
    }
    .ok_or_else(|| format!("internal error: cannot write buffer {id:?}"))
}

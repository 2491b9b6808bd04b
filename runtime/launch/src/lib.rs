//! The GPU backend: a Tile IR program specialised for its inputs' shapes,
//! lowered to PTX, and run step by step on a [`Device`]: an NVIDIA GPU
//! through the CUDA driver (modules cached per process by `tessera-cuda`),
//! or the simulator (`tessera-sim`), which reads the same PTX text back
//! and runs it on the CPU with its checks.

pub mod cache;

use std::collections::HashMap;

pub use cache::KernelCache;
use tessera_comm::{Buffer, Communicator, Loopback};
use tessera_core::Arch;
pub use tessera_cuda::{available, CudaError, Gpu};
use tessera_cuda::{DeviceBuffer, KernelArg};
use tessera_schedule::Bindings;
pub use tessera_sim::{Options as SimOptions, Sim, Stats as SimStats};
use tessera_tensor::{Dtype, Tensor};
use tessera_tile::profile::{Clock, LaunchRecord, LaunchSink, SimCounts};
use tessera_tile::{eval_dims, BufferDecl, BufferId, Step, TileProgram};

pub use tessera_driver::pipeline::Locate;
use tessera_driver::Pipeline;

/// Where kernels run.
#[derive(Clone, Copy)]
pub enum Device<'a> {
    /// An NVIDIA GPU.
    Cuda(&'a Gpu),
    /// The simulator.
    Sim(&'a Sim),
}

/// Device memory of either kind.
enum Mem {
    Cuda(DeviceBuffer),
    Sim(u64),
}

/// A loaded module of either kind.
enum Loaded {
    Cuda(std::sync::Arc<tessera_cuda::Module>),
    Sim(tessera_ptx::Module),
}

impl<'a> Device<'a> {
    /// The PTX target: the one the device was opened for (`--arch`), else
    /// for the simulator sm_90 and for a GPU the newest portable target it
    /// supports, at most sm_90 (newer GPUs run sm_90 code through the
    /// driver's JIT).
    pub fn target(self) -> &'static Arch {
        let chosen = match self {
            Device::Cuda(gpu) => gpu.target(),
            Device::Sim(sim) => sim.target(),
        };
        if let Some(arch) = chosen.and_then(Arch::from_name) {
            return arch;
        }
        match self {
            Device::Cuda(gpu) => {
                let (major, minor) = gpu.compute_capability();
                let arch = Arch::for_device(major as u32, minor as u32);
                if arch.sm >= Arch::SM_90.sm {
                    &Arch::SM_90
                } else {
                    arch
                }
            }
            Device::Sim(_) => &Arch::SM_90,
        }
    }

    /// Loads PTX text: the driver compiles it; the simulator reads it back
    /// into Target IR.
    fn load(self, ptx: &str) -> Result<Loaded, String> {
        match self {
            Device::Cuda(gpu) => gpu.module(ptx).map(Loaded::Cuda).map_err(|e| e.to_string()),
            Device::Sim(_) => tessera_ptx::read_module(ptx)
                .map(Loaded::Sim)
                .map_err(|e| format!("internal error: the simulator cannot read our PTX: {e}")),
        }
    }

    /// Zeroed memory.
    fn alloc(self, bytes: usize) -> Result<Mem, String> {
        match self {
            Device::Cuda(gpu) => gpu
                .alloc_zeroed(bytes.max(1))
                .map(Mem::Cuda)
                .map_err(|e| e.to_string()),
            Device::Sim(sim) => Ok(Mem::Sim(sim.alloc(bytes))),
        }
    }

    /// Memory holding `bytes`.
    fn upload(self, bytes: &[u8]) -> Result<Mem, String> {
        let mut m = self.alloc(bytes.len())?;
        self.write(&mut m, bytes)?;
        Ok(m)
    }

    fn write(self, m: &mut Mem, bytes: &[u8]) -> Result<(), String> {
        match (self, m) {
            (Device::Cuda(gpu), Mem::Cuda(b)) => gpu.write(b, bytes).map_err(|e| e.to_string()),
            (Device::Sim(sim), Mem::Sim(a)) => sim.write(*a, bytes),
            _ => Err("internal error: memory of another device".to_owned()),
        }
    }

    /// Sets the first `len` bytes of `m` to zero.
    fn zero(self, m: &mut Mem, len: usize) -> Result<(), String> {
        match (self, m) {
            (Device::Cuda(gpu), Mem::Cuda(b)) => gpu.fill_zero(b).map_err(|e| e.to_string()),
            (Device::Sim(sim), Mem::Sim(a)) => sim.write(*a, &vec![0; len]),
            _ => Err("internal error: memory of another device".to_owned()),
        }
    }

    fn read(self, m: &Mem, len: usize) -> Result<Vec<u8>, String> {
        match (self, m) {
            (Device::Cuda(gpu), Mem::Cuda(b)) => gpu.download(b).map_err(|e| e.to_string()),
            (Device::Sim(sim), Mem::Sim(a)) => sim.read(*a, len),
            _ => Err("internal error: memory of another device".to_owned()),
        }
    }

    fn free(self, m: &Mem) {
        if let (Device::Sim(sim), Mem::Sim(a)) = (self, m) {
            sim.free(*a);
        }
    }
}

/// The SMs of the simulated device, which bound a persistent kernel's
/// blocks: `TESSERA_SIM_SMS`, else an H100's 132.
pub fn sim_multiprocessors() -> u32 {
    std::env::var("TESSERA_SIM_SMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(132)
}

/// The tensor maps of kernel `f`'s parameters after its tensors' (see
/// [`tessera_ptx::ir::TensorMapDecl`]), built for `tensors` on `dev`: by
/// the driver on a GPU, in the simulator's own encoding on the simulator.
fn tensor_maps(
    dev: Device<'_>,
    f: &tessera_ptx::ir::Function,
    tensors: &[&Buf],
) -> Result<Vec<Mem>, String> {
    let mut maps = Vec::new();
    for p in f.params.iter().skip(tensors.len()) {
        let decl = tessera_ptx::ir::TensorMapDecl::from_param_name(&p.name).ok_or_else(|| {
            format!(
                "internal error: kernel `{}` has parameter `{}` and no argument for it",
                f.name, p.name
            )
        })?;
        let t = tensors.get(decl.tensor).ok_or_else(|| {
            format!(
                "internal error: tensor map `{}` of a tensor the kernel lacks",
                p.name
            )
        })?;
        if t.shape.len() != decl.boxes.len() {
            return Err(format!(
                "internal error: tensor map `{}` for a tensor of rank {}",
                p.name,
                t.shape.len()
            ));
        }
        let map = match (dev, &t.mem) {
            (Device::Cuda(gpu), Mem::Cuda(b)) => Mem::Cuda(
                gpu.tensor_map(b, (t.dtype, &t.shape), &decl.boxes, decl.swizzle)
                    .map_err(|e| e.to_string())?,
            ),
            (Device::Sim(sim), Mem::Sim(a)) => {
                let elem = t.dtype.size_bytes();
                let (dims, strides) = tessera_tensor::tensor_map_extents(&t.shape, elem);
                // What the driver's encoder would refuse.
                if strides.iter().any(|s| s % 16 != 0)
                    || decl.boxes.iter().any(|b| *b == 0 || *b > 256)
                {
                    return Err(format!(
                        "internal error: no tensor map for a {:?} tensor with boxes {:?}",
                        t.shape, decl.boxes
                    ));
                }
                let map = tessera_sim::tma::TensorMap {
                    base: *a,
                    elem_bytes: elem as u32,
                    dims,
                    strides,
                    boxes: decl.boxes.clone(),
                    swizzle: decl.swizzle,
                };
                let m = sim.alloc(128);
                sim.write(m, &map.encode())?;
                Mem::Sim(m)
            }
            _ => return Err("internal error: memory of another device".into()),
        };
        maps.push(map);
    }
    Ok(maps)
}

/// The runtime dtype of a buffer declaration.
fn dtype(d: &BufferDecl) -> Result<Dtype, String> {
    Dtype::from_name(d.dtype.name()).ok_or_else(|| {
        format!(
            "`{}` has dtype {} which the runtime lacks",
            d.name,
            d.dtype.name()
        )
    })
}

/// A device buffer with its dtype and shape.
struct Buf {
    mem: Mem,
    dtype: Dtype,
    shape: Vec<usize>,
}

impl Buf {
    fn bytes(&self) -> usize {
        self.shape.iter().product::<usize>() * self.dtype.size_bytes() as usize
    }
}

/// Zeroed device buffers for declarations.
fn alloc(dev: Device<'_>, decls: &[BufferDecl], b: &Bindings) -> Result<Vec<Buf>, String> {
    decls
        .iter()
        .map(|d| {
            let shape = eval_dims(&d.dims, b).map_err(|e| format!("`{}`: {e}", d.name))?;
            let dtype = dtype(d)?;
            let n: usize = shape.iter().product();
            let mem = dev.alloc(n * dtype.size_bytes() as usize)?;
            Ok(Buf { mem, dtype, shape })
        })
        .collect()
}

/// A program ready to run on the device: PTX loaded, inputs uploaded,
/// temporaries and outputs allocated. [`run`](Prepared::run) launches its
/// steps (again and again, for timing); [`outputs`](Prepared::outputs)
/// reads the results back.
pub struct Prepared<'g> {
    dev: Device<'g>,
    program: &'g TileProgram,
    module: Loaded,
    functions: Vec<tessera_ptx::ir::Function>,
    bindings: Bindings,
    ins: Vec<Buf>,
    temps: Vec<Buf>,
    outs: Vec<Buf>,
    /// Per kernel, the parameters set before each of its launches, with
    /// their start values ([`tessera_tile::Kernel::starts`]).
    starts: Vec<Vec<(usize, f64)>>,
    /// The bytes a nonzero start value fills a buffer with, by buffer and
    /// value bits: made once, uploaded at every launch (timed and tuned
    /// runs repeat them).
    fills: HashMap<(BufferId, u64), Vec<u8>>,
    /// The source expressions the PTX's `.loc`s name, by the position
    /// they print (a simulator error's location back to its expression).
    sources: HashMap<(String, u32, u32), tessera_tile::Span>,
}

/// A failed run of a program: what went wrong and, when the simulator
/// traced it to an instruction whose `.loc` names a source expression,
/// that expression.
#[derive(Clone, Debug, PartialEq)]
pub struct RunError {
    /// What went wrong.
    pub message: String,
    /// The source expression whose code failed, when known.
    pub span: Option<tessera_tile::Span>,
}

impl From<String> for RunError {
    fn from(message: String) -> RunError {
        RunError {
            message,
            span: None,
        }
    }
}

impl From<RunError> for String {
    fn from(e: RunError) -> String {
        e.message
    }
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl<'g> Prepared<'g> {
    /// Specialises `p` for `inputs`, loads its PTX and uploads the inputs.
    pub fn new(
        dev: Device<'g>,
        p: &'g TileProgram,
        inputs: &[Tensor],
    ) -> Result<Prepared<'g>, String> {
        Prepared::located(dev, p, inputs, None)
    }

    /// [`new`](Self::new), with the PTX pointing at the source through
    /// `.loc` (`locate`: a span to a file name, line and column), so that
    /// simulator errors name the source line.
    pub fn located(
        dev: Device<'g>,
        p: &'g TileProgram,
        inputs: &[Tensor],
        locate: Option<&Locate<'_>>,
    ) -> Result<Prepared<'g>, String> {
        Prepared::cached(dev, p, inputs, locate, None)
    }

    /// [`located`](Self::located), with the PTX taken from `cache` when it
    /// holds this program for these shapes and this device.
    pub fn cached(
        dev: Device<'g>,
        p: &'g TileProgram,
        inputs: &[Tensor],
        locate: Option<&Locate<'_>>,
        cache: Option<&KernelCache>,
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
        let target = dev.target();
        let mut fresh = None;
        let mut compile = || -> Result<String, String> {
            let lowered = lower_located(p, target, &bindings, locate)?;
            let ptx = tessera_ptx::print_module(&lowered);
            fresh = Some(lowered);
            Ok(ptx)
        };
        let ptx = match cache {
            Some(c) => c.get_or_compile(&program_key(p, target, &bindings, locate), compile)?,
            None => compile()?,
        };
        let module = dev.load(&ptx)?;
        // On a cache hit the launch parameters come from the PTX read back
        // (by the simulator already, when it loaded the module).
        let functions = match (fresh, &module) {
            (Some(l), _) => l.functions,
            (None, Loaded::Sim(m)) => m.functions.clone(),
            (None, Loaded::Cuda(_)) => {
                tessera_ptx::read_module(&ptx)
                    .map_err(|e| format!("internal error: cannot read back cached PTX: {e}"))?
                    .functions
            }
        };
        let mut ins = Vec::new();
        for (t, d) in inputs.iter().zip(&p.inputs) {
            let want = dtype(d)?;
            let t = if t.dtype == want {
                t.clone()
            } else {
                t.convert(want)
            };
            let bytes = tessera_cuda::tensor_to_bytes(&t).map_err(|e| e.to_string())?;
            let mem = dev.upload(&bytes)?;
            ins.push(Buf {
                mem,
                dtype: want,
                shape: t.shape.clone(),
            });
        }
        let temps = alloc(dev, &p.temps, &bindings)?;
        let outs = alloc(dev, &p.outputs, &bindings)?;
        Ok(Prepared {
            dev,
            program: p,
            module,
            functions,
            bindings,
            ins,
            temps,
            outs,
            starts: p.kernels.iter().map(|k| k.starts()).collect(),
            fills: HashMap::new(),
            sources: locate.map(|l| sources(p, l)).unwrap_or_default(),
        })
    }

    /// Enqueues every step of the program (asynchronously: errors of a
    /// kernel surface at the next synchronisation).
    pub fn run(&mut self) -> Result<(), RunError> {
        self.run_with(None)
    }

    /// [`run`](Self::run), reporting each kernel launch to `sink` when
    /// given: on a GPU timed by CUDA events (waiting for each launch), on
    /// the simulator with its instruction counts.
    pub fn run_with(&mut self, mut sink: Option<&mut LaunchSink<'_>>) -> Result<(), RunError> {
        let (dev, p, b) = (self.dev, self.program, &self.bindings);
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
                    // A persistent kernel's blocks loop over its programs:
                    // as many blocks as the SMs hold at once (one each,
                    // or the `.minnctapersm` its schedule asked for).
                    if let Some(n) = f.persistent {
                        let programs: u64 = grid.iter().map(|g| u64::from(*g)).product();
                        if programs != n {
                            return Err(format!(
                                "kernel `{}` was compiled for {n} programs, launched with {programs}",
                                k.name
                            )
                            .into());
                        }
                        let sms = match dev {
                            Device::Cuda(gpu) => gpu.multiprocessor_count(),
                            Device::Sim(_) => sim_multiprocessors(),
                        };
                        let resident = u64::from(sms.max(1)) * u64::from(f.min_blocks.max(1));
                        grid = [n.min(resident) as u32, 1, 1];
                    }
                    let shared = u32::try_from(f.shared_bytes).map_err(|_| {
                        format!(
                            "kernel `{}`: {} bytes of shared memory",
                            k.name, f.shared_bytes
                        )
                    })?;
                    // An atomic combines into what is there, and an `out`
                    // parameter may declare its start value: they are set
                    // on every run.
                    for &(i, value) in &self.starts[*kernel] {
                        if let Some(id) = args.get(i) {
                            let d = get_mut(&mut self.temps, &mut self.outs, *id)?;
                            let len = d.bytes();
                            if value == 0.0 && value.is_sign_positive() {
                                dev.zero(&mut d.mem, len)?;
                            } else {
                                let bytes = match self.fills.entry((*id, value.to_bits())) {
                                    std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                                    std::collections::hash_map::Entry::Vacant(e) => {
                                        let t = Tensor::full(d.dtype, &d.shape, value)
                                            .map_err(|e| e.to_string())?;
                                        e.insert(
                                            tessera_cuda::tensor_to_bytes(&t)
                                                .map_err(|e| e.to_string())?,
                                        )
                                    }
                                };
                                dev.write(&mut d.mem, bytes)?;
                            }
                        }
                    }
                    let tensors: Vec<&Buf> = args
                        .iter()
                        .map(|a| get(&self.ins, &self.temps, &self.outs, *a))
                        .collect::<Result<_, _>>()?;
                    // The tensor maps the kernel's TMA loads read follow
                    // the tensors.
                    let maps = tensor_maps(dev, f, &tensors)?;
                    let bufs: Vec<&Mem> =
                        tensors.iter().map(|b| &b.mem).chain(maps.iter()).collect();
                    let block = [f.threads, 1, 1];
                    let start = std::time::Instant::now();
                    let record = |ms: f64, clock, registers, sim| LaunchRecord {
                        kernel: *kernel,
                        grid,
                        threads: block[0],
                        shared_bytes: u64::from(shared),
                        start,
                        ms,
                        clock,
                        registers,
                        sim,
                    };
                    match (dev, &self.module) {
                        (Device::Cuda(gpu), Loaded::Cuda(module)) => {
                            let kargs: Vec<KernelArg<'_>> = bufs
                                .iter()
                                .filter_map(|m| match m {
                                    Mem::Cuda(b) => Some(KernelArg::Buffer(b)),
                                    Mem::Sim(_) => None,
                                })
                                .collect();
                            let launch =
                                || gpu.launch(module, &k.name, grid, block, shared, &kargs);
                            match sink.as_deref_mut() {
                                None => launch().map_err(|e| e.to_string())?,
                                Some(sink) => {
                                    let ms = gpu.time(launch).map_err(|e| e.to_string())?;
                                    let registers =
                                        module.kernel_attributes(&k.name).ok().map(|a| a.registers);
                                    sink(record(f64::from(ms), Clock::Events, registers, None));
                                }
                            }
                        }
                        (Device::Sim(sim), Loaded::Sim(module)) => {
                            let params: Vec<u64> = bufs
                                .iter()
                                .map(|m| match m {
                                    Mem::Sim(a) => *a,
                                    Mem::Cuda(_) => 0,
                                })
                                .collect();
                            let stats = sim.launch(module, &k.name, grid, block, shared, &params);
                            maps.iter().for_each(|m| dev.free(m));
                            let stats = stats.map_err(|e| RunError {
                                span: e
                                    .location
                                    .as_ref()
                                    .and_then(|at| self.sources.get(at))
                                    .copied(),
                                message: e.to_string(),
                            })?;
                            if let Some(sink) = sink.as_deref_mut() {
                                let counts = SimCounts {
                                    warp_instructions: stats.warp_instructions,
                                    thread_instructions: stats.thread_instructions,
                                    shared_wavefronts: stats.shared_wavefronts,
                                    bank_conflicts: stats.bank_conflicts,
                                };
                                let ms = start.elapsed().as_secs_f64() * 1e3;
                                sink(record(ms, Clock::Sim, None, Some(counts)));
                            }
                        }
                        _ => {
                            return Err("internal error: module of another device"
                                .to_owned()
                                .into())
                        }
                    }
                }
                Step::Copy { src, dst } => {
                    let s = get(&self.ins, &self.temps, &self.outs, *src)?;
                    let bytes = dev.read(&s.mem, s.bytes())?;
                    let d = get_mut(&mut self.temps, &mut self.outs, *dst)?;
                    dev.write(&mut d.mem, &bytes)?;
                }
                Step::Collective {
                    kind,
                    devices,
                    src,
                    dst,
                    ..
                } => {
                    // One device holds the whole logical tensor (as on the
                    // CPU): the loopback communicator.
                    let s = get(&self.ins, &self.temps, &self.outs, *src)?;
                    let mut bytes = dev.read(&s.mem, s.bytes())?;
                    let buf = Buffer {
                        data: &mut bytes,
                        shape: &s.shape,
                        split: Some(0),
                    };
                    Loopback { devices: *devices }
                        .run(*kind, buf)
                        .map_err(|e| e.to_string())?;
                    let d = get_mut(&mut self.temps, &mut self.outs, *dst)?;
                    dev.write(&mut d.mem, &bytes)?;
                }
            }
        }
        Ok(())
    }

    /// Waits for the device and reads every output back.
    pub fn outputs(&self) -> Result<Vec<Tensor>, String> {
        if let Device::Cuda(gpu) = self.dev {
            gpu.synchronize().map_err(|e| e.to_string())?;
        }
        self.outs
            .iter()
            .map(|o| {
                let bytes = self.dev.read(&o.mem, o.bytes())?;
                tessera_cuda::tensor_from_bytes(o.dtype, &o.shape, &bytes)
                    .map_err(|e| e.to_string())
            })
            .collect()
    }
}

impl Drop for Prepared<'_> {
    fn drop(&mut self) {
        for b in self.ins.iter().chain(&self.temps).chain(&self.outs) {
            self.dev.free(&b.mem);
        }
    }
}

/// The source positions `locate` gives the instructions of `p`'s kernels,
/// each mapped back to its span. A `.loc` names only where a span starts:
/// among spans that start at one position (`(a + 1) / b` and `(a + 1)`),
/// those of instructions that trap (an integer division, an `assert`)
/// win, as the simulator's source errors are traps; then the first.
fn sources(
    p: &TileProgram,
    locate: &Locate<'_>,
) -> HashMap<(String, u32, u32), tessera_tile::Span> {
    let mut out = HashMap::new();
    let trapping = p.kernels.iter().flat_map(|k| k.trapping_spans());
    for span in trapping.chain(p.kernels.iter().flat_map(|k| k.spans())) {
        if let Some(at) = locate(span) {
            out.entry(at).or_insert(span);
        }
    }
    out
}

/// Lowers `p` to a verified PTX module through the driver's pipeline.
fn lower_located(
    p: &TileProgram,
    target: &'static Arch,
    bindings: &Bindings,
    locate: Option<&Locate<'_>>,
) -> Result<tessera_ptx::Module, String> {
    Pipeline::from_tile(target)
        .ptx(p, bindings, locate)
        .map_err(|d| d.message)
}

/// The PTX of `p` specialised for `bindings` on `target`, as a launch on a
/// device compiles it (`locate`: see [`Prepared::located`]).
pub fn compile_ptx(
    p: &TileProgram,
    target: &'static Arch,
    bindings: &Bindings,
    locate: Option<&Locate<'_>>,
) -> Result<String, String> {
    lower_located(p, target, bindings, locate).map(|m| tessera_ptx::print_module(&m))
}

/// The compile-cache key of `p` specialised for `bindings` on `target`:
/// a digest of the program's Tile IR (its kernels and their schedule), the
/// target, the bindings, the source positions `.loc` would name, and the
/// compiler's identity.
pub fn program_key(
    p: &TileProgram,
    target: &Arch,
    bindings: &Bindings,
    locate: Option<&Locate<'_>>,
) -> String {
    let mut text = format!("{}\n{target}\n", compiler_id());
    let mut dims: Vec<_> = bindings.iter().collect();
    dims.sort();
    for (d, v) in dims {
        text.push_str(&format!("{d}={v} "));
    }
    text.push('\n');
    if let Some(locate) = locate {
        for k in &p.kernels {
            for span in std::iter::once(k.span).chain(k.spans()) {
                if let Some((f, l, c)) = locate(span) {
                    text.push_str(&format!("{f}:{l}:{c} "));
                }
            }
            text.push('\n');
        }
    }
    text.push_str(&tessera_tile::print::print_program(p));
    cache::digest(text.as_bytes())
}

/// The compiler's version and a digest of the sources that shape PTX
/// (computed by build.rs), so that a changed compiler never reads entries
/// an older one wrote, while tsrc and the executables it builds agree.
pub fn compiler_id() -> &'static str {
    concat!(
        "tessera ",
        env!("CARGO_PKG_VERSION"),
        " ",
        env!("TESSERA_COMPILER_ID")
    )
}

/// Runs `p` on `inputs` on `dev` and returns its outputs (`locate`: see
/// [`Prepared::located`]).
pub fn run_program(
    dev: Device<'_>,
    p: &TileProgram,
    inputs: &[Tensor],
    locate: Option<&Locate<'_>>,
) -> Result<Vec<Tensor>, RunError> {
    run_program_cached(dev, p, inputs, locate, None)
}

/// [`run_program`], with PTX from `cache` (see [`Prepared::cached`]).
pub fn run_program_cached(
    dev: Device<'_>,
    p: &TileProgram,
    inputs: &[Tensor],
    locate: Option<&Locate<'_>>,
    cache: Option<&KernelCache>,
) -> Result<Vec<Tensor>, RunError> {
    let mut prepared = Prepared::cached(dev, p, inputs, locate, cache)?;
    prepared.run()?;
    Ok(prepared.outputs()?)
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

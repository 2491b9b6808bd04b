//! The runtime of compiled host code.
//!
//! Host code compiled by Cranelift (`tessera-jit`) calls the functions of
//! [`abi`] with a [`Ctx`]; at each site [`ModuleSites`] runs the host
//! operation it names (the same operations the interpreter uses), with op
//! calls running on a [`GraphRunner`]: the CPU backend, or a GPU device
//! (an NVIDIA GPU or the simulator) through [`DeviceRunner`].
//! [`run_main`] compiles a module in memory and runs its `fn main` (feature
//! `jit`); [`run_entry`] runs one compiled ahead of time (the executables
//! `tsrc build` links). [`CheckedStdout`] is the standard output both
//! write to, which reports a lost write instead of ignoring it.

pub mod abi;
pub mod bundle;
pub mod profile;
pub mod sites;
pub mod stdout;

pub use abi::{live_handles, symbols, Ctx, Sites};
pub use sites::ModuleSites;
pub use stdout::{CheckedStdout, Delivered};

use std::io::Write;

use tessera_core::Arch;
use tessera_cpu::host::{CpuRunner, GraphRunner, HostOps};
use tessera_diagnostics::{codes, Diagnostic, Span};
use tessera_graph::{Graph, Program};
use tessera_host::HostModule;
use tessera_launch::{Device, KernelCache, Locate};
pub use tessera_schedule::space::Tunings;
use tessera_tensor::Tensor;

/// Where kernels run, as `--backend` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendChoice {
    /// The GPU when a CUDA driver and device exist, else the CPU.
    Auto,
    /// The CPU backend.
    Cpu,
    /// An NVIDIA GPU (an error without one).
    Cuda,
    /// The GPU simulator.
    Sim,
}

/// The devices a backend choice opened: a GPU, the simulator, or neither
/// (the CPU backend).
pub struct Devices {
    gpu: Option<tessera_launch::Gpu>,
    sim: Option<tessera_launch::Sim>,
}

impl Devices {
    /// Opens what `choice` asks for, compiling kernels for `arch` when
    /// given (`--arch`; the CPU backend has no target and ignores it); the
    /// error says why `Cuda` cannot be had or why the GPU cannot run
    /// `arch`.
    pub fn open(choice: BackendChoice, arch: Option<&'static Arch>) -> Result<Devices, String> {
        let gpu = match choice {
            BackendChoice::Cpu | BackendChoice::Sim => None,
            BackendChoice::Auto => tessera_launch::Gpu::open().ok(),
            BackendChoice::Cuda => {
                Some(tessera_launch::Gpu::open().map_err(|e| format!("`--backend cuda`: {e}"))?)
            }
        };
        let gpu = match (gpu, arch) {
            (Some(g), Some(a)) => Some(runs(&g, a).map(|()| g.with_target(a.name))?),
            (g, _) => g,
        };
        let sim = (choice == BackendChoice::Sim).then(|| {
            tessera_launch::Sim::with_options(tessera_launch::SimOptions {
                target: arch.map(|a| a.name),
                ..Default::default()
            })
        });
        Ok(Devices { gpu, sim })
    }

    /// The device kernels run on; `None` for the CPU backend.
    pub fn device(&self) -> Option<Device<'_>> {
        match (&self.gpu, &self.sim) {
            (Some(g), _) => Some(Device::Cuda(g)),
            (_, Some(s)) => Some(Device::Sim(s)),
            _ => None,
        }
    }
}

/// Whether `gpu` runs code compiled for `arch`: a portable target no newer
/// than the device, or an architecture-specific one (`sm_90a`) of exactly
/// the device's architecture.
fn runs(gpu: &tessera_launch::Gpu, arch: &Arch) -> Result<(), String> {
    let (major, minor) = gpu.compute_capability();
    let sm = major * 10 + minor;
    let fits = if arch.arch_specific {
        arch.sm == sm
    } else {
        arch.sm <= sm
    };
    if fits {
        Ok(())
    } else {
        Err(format!(
            "`--arch {arch}`: the GPU ({}, compute capability {major}.{minor}) cannot run {arch} code{}",
            gpu.name(),
            if arch.arch_specific {
                ", which runs only on its own architecture"
            } else {
                ""
            }
        ))
    }
}

/// Op calls on a GPU device: each graph is scheduled, lowered to PTX and
/// run there.
pub struct DeviceRunner<'d> {
    /// The device.
    pub dev: Device<'d>,
    /// Source lines for the simulator's errors.
    pub locate: Option<&'d Locate<'d>>,
    /// Compiled kernels.
    pub cache: Option<&'d KernelCache>,
    /// Tuned configurations (`tsrc tune`'s database, or what an executable
    /// embeds).
    pub tunings: Option<&'d dyn Tunings>,
}

impl GraphRunner for DeviceRunner<'_> {
    fn run(
        &mut self,
        program: &Program<'_>,
        g: &Graph,
        inputs: &[Tensor],
    ) -> Result<Vec<Tensor>, Box<Diagnostic>> {
        let shapes: Vec<&[usize]> = inputs.iter().map(|t| &t.shape[..]).collect();
        let p = tessera_cpu::kernels::compile_graph_at(
            program,
            g,
            (self.dev.target(), self.tunings),
            &shapes,
        )?;
        tessera_launch::run_program_cached(self.dev, &p, inputs, self.locate, self.cache).map_err(
            |e| tessera_driver::pipeline::run_error(g, e.message, e.span, running(Some(self.dev))),
        )
    }
}

/// The label of a run-time error at the op that ran: on `dev`, or on the
/// CPU backend.
pub fn running(dev: Option<Device<'_>>) -> &'static str {
    match dev {
        None => "while running this",
        Some(Device::Cuda(_)) => "while running this on the GPU",
        Some(Device::Sim(_)) => "while running this on the GPU simulator",
    }
}

/// The compiled `fn main`: it takes the runtime context.
pub type EntryFn = unsafe extern "C" fn(ctx: *mut u8);

/// Compiles `host` with Cranelift in memory and runs its `fn main`: op
/// calls on `runner` (the CPU backend if `None`), `print` to `out`.
#[cfg(feature = "jit")]
pub fn run_main(
    program: &Program<'_>,
    host: &HostModule,
    runner: Option<&mut dyn GraphRunner>,
    out: &mut dyn Write,
) -> Result<(), Box<Diagnostic>> {
    let jit = tessera_jit::Jit::compile(host, &symbols()).map_err(|e| {
        Box::new(Diagnostic::error(
            codes::E0702,
            Span::default(),
            format!("cannot compile host code: {e}"),
        ))
    })?;
    // SAFETY: the JIT compiled `entry` from `host`, with every import from
    // `symbols()`.
    unsafe { run_entry(jit.entry(), program, host, runner, out) }
}

/// Runs a compiled `fn main`.
///
/// # Safety
/// `entry` must be the code compiled from `host` (its site numbers index
/// `host.sites`), calling only the functions of [`abi`].
pub unsafe fn run_entry(
    entry: EntryFn,
    program: &Program<'_>,
    host: &HostModule,
    runner: Option<&mut dyn GraphRunner>,
    out: &mut dyn Write,
) -> Result<(), Box<Diagnostic>> {
    let mut cpu = CpuRunner;
    let runner = match runner {
        Some(r) => r,
        None => &mut cpu,
    };
    let mut sites = ModuleSites {
        host,
        ops: HostOps {
            program,
            runner,
            out,
        },
    };
    let sites_dyn: &mut dyn Sites = &mut sites;
    // SAFETY: the context lives only during the call below, while `sites`
    // stays borrowed; the lifetime is erased for the C ABI.
    let sites_ptr: *mut (dyn Sites + 'static) = unsafe { std::mem::transmute(sites_dyn) };
    let mut ctx = Ctx {
        failed: 0,
        depth: 1,
        error: None,
        sites: sites_ptr,
    };
    // SAFETY: per this function's contract.
    unsafe { entry(&mut ctx as *mut Ctx as *mut u8) };
    match ctx.error.take() {
        Some(d) => Err(d),
        None if ctx.failed != 0 => Err(Box::new(Diagnostic::error(
            codes::E0701,
            Span::default(),
            "host code failed without an error (this is a bug in tsrc)",
        ))),
        None => Ok(()),
    }
}

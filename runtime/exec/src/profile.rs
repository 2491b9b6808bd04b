//! Op calls run and profiled (`tsrc run --profile`, `--profile` on built
//! executables): each graph is scheduled and lowered as the other runners
//! do, run on the CPU backend or a device with every launch reported, and
//! recorded in a [`Profile`] with its compile time and fusion decisions.

use std::time::Instant;

use tessera_cpu::host::GraphRunner;
use tessera_diagnostics::{codes, Diagnostic};
use tessera_driver::pipeline::run_error;
use tessera_driver::Pipeline;
use tessera_graph::{Graph, Program};
use tessera_launch::{Device, KernelCache, Locate, Prepared, RunError};
use tessera_schedule::space::Tunings;
use tessera_tensor::Tensor;
pub use tessera_tune::profile::Profile;

/// Runs op calls on the CPU backend (`dev: None`) or a device, profiling
/// each.
pub struct ProfilingRunner<'d> {
    /// The device, or the CPU backend.
    pub dev: Option<Device<'d>>,
    /// Source lines for the simulator's errors.
    pub locate: Option<&'d Locate<'d>>,
    /// Compiled kernels.
    pub cache: Option<&'d KernelCache>,
    /// Tuned configurations.
    pub tunings: Option<&'d dyn Tunings>,
    /// What was profiled so far.
    pub profile: Profile,
}

impl<'d> ProfilingRunner<'d> {
    /// A runner on `dev` (the CPU backend if `None`) with an empty profile.
    pub fn new(
        dev: Option<Device<'d>>,
        locate: Option<&'d Locate<'d>>,
        cache: Option<&'d KernelCache>,
        tunings: Option<&'d dyn Tunings>,
    ) -> ProfilingRunner<'d> {
        let (backend, arch) = match dev {
            Some(d @ Device::Cuda(_)) => ("cuda", d.target()),
            Some(d @ Device::Sim(_)) => ("sim", d.target()),
            None => ("cpu", tessera_cpu::kernels::CPU_SCHEDULE_ARCH),
        };
        ProfilingRunner {
            dev,
            locate,
            cache,
            tunings,
            profile: Profile::new(backend, arch),
        }
    }
}

impl GraphRunner for ProfilingRunner<'_> {
    fn run(
        &mut self,
        program: &Program<'_>,
        g: &Graph,
        inputs: &[Tensor],
    ) -> Result<Vec<Tensor>, Box<Diagnostic>> {
        let span = tessera_driver::pipeline::op_span(g);
        let fail = |m: String| Box::new(Diagnostic::error(codes::E0701, span, m));
        let start = Instant::now();
        let shapes: Vec<&[usize]> = inputs.iter().map(|t| &t.shape[..]).collect();
        let lowered = Pipeline::new(program, self.profile.arch)
            .tuned_by(self.tunings)
            .hinted(tessera_cpu::kernels::size_hints(g, &shapes))
            .lower(g)?;
        let compiled = Instant::now();
        let bindings = lowered.tile.bind_dims(&shapes).map_err(fail)?;
        let mut records = Vec::new();
        let mut sink = |r| records.push(r);
        let outputs = match self.dev {
            None => tessera_cpu::tile::run_program_with(
                &lowered.tile,
                inputs,
                tessera_cpu::default_threads(),
                Some(&mut sink),
            )
            .map_err(|e| run_error(g, e.message, e.span, crate::running(None))),
            Some(dev) => (|| -> Result<_, RunError> {
                let mut p = Prepared::cached(dev, &lowered.tile, inputs, self.locate, self.cache)?;
                p.run_with(Some(&mut sink))?;
                Ok(p.outputs()?)
            })()
            .map_err(|e| run_error(g, e.message, e.span, crate::running(Some(dev)))),
        }?;
        let end = Instant::now();
        self.profile.add_call(
            g,
            &lowered.scheduled,
            &lowered.tile,
            &bindings,
            (start, compiled, end),
            records,
        );
        Ok(outputs)
    }
}

/// Prints `profile`'s table on standard error and, when `trace` names a
/// file, writes its Chrome/Perfetto trace there; the error says why not.
pub fn report(profile: &Profile, trace: Option<&std::path::Path>) -> Result<(), String> {
    eprint!("{}", profile.table());
    if let Some(path) = trace {
        std::fs::write(path, profile.trace())
            .map_err(|e| format!("cannot write the trace `{}`: {e}", path.display()))?;
        eprintln!(
            "wrote the trace {} (open it in ui.perfetto.dev or chrome://tracing)",
            path.display()
        );
    }
    Ok(())
}

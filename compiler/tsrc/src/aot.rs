//! Kernels compiled ahead of time for an executable. Every call site of
//! `fn main` whose arguments are known when compiling (tensor shapes from
//! the checker, scalar constants) goes through the same host operations as
//! at run time, on placeholder tensors, with a runner that compiles each
//! graph's PTX for sm_80 and sm_90 into the compile cache instead of
//! running it. The executable embeds what was compiled, under the keys its
//! runtime will look up.

use tessera_core::Arch;
use tessera_cpu::host::{GraphRunner, HostOps, HostValue};
use tessera_driver::diagnostics::{codes, Diagnostic, Span};
use tessera_driver::graph::{Graph, Program, ScalarKind, Type};
use tessera_driver::host::{Fixed, HostModule, SiteKind};
use tessera_driver::Compilation;
use tessera_exec::ModuleSites;
use tessera_launch::{compile_ptx, program_key, KernelCache, Locate};
use tessera_tensor::{Dtype, Tensor};

/// The architectures an executable carries PTX for (the simulator runs
/// sm_90 code).
pub const TARGETS: &[Arch] = &[Arch::SM_80, Arch::SM_90];

/// Placeholder inputs larger than this many elements are not allocated:
/// such sites compile when first launched.
const MAX_ELEMENTS: u64 = 1 << 24;

struct Recorder<'c> {
    cache: &'c KernelCache,
    locate: &'c Locate<'c>,
    tunings: Option<&'c dyn tessera_exec::Tunings>,
}

fn failure(msg: String) -> Box<Diagnostic> {
    Box::new(Diagnostic::error(codes::E0701, Span::default(), msg))
}

impl GraphRunner for Recorder<'_> {
    fn run(
        &mut self,
        program: &Program<'_>,
        g: &Graph,
        inputs: &[Tensor],
    ) -> Result<Vec<Tensor>, Box<Diagnostic>> {
        let shapes: Vec<&[usize]> = inputs.iter().map(|t| &t.shape[..]).collect();
        // Each target schedules for itself (as a device does at run time),
        // with the configuration tuned for it if any.
        for target in TARGETS {
            let target: &'static Arch = target;
            let p = tessera_cpu::kernels::compile_graph_at(
                program,
                g,
                (target, self.tunings),
                &shapes,
            )?;
            let bindings = p.bind_dims(&shapes).map_err(failure)?;
            let key = program_key(&p, target, &bindings, Some(self.locate));
            self.cache
                .get_or_compile(&key, || {
                    compile_ptx(&p, target, &bindings, Some(self.locate))
                })
                .map_err(failure)?;
        }
        g.outputs
            .iter()
            .map(|o| {
                let (shape, dtype) = match g.ty(*o) {
                    Type::Tensor(t) => {
                        let shape: Option<Vec<usize>> = t
                            .dims
                            .iter()
                            .map(|d| d.as_known().map(|n| n as usize))
                            .collect();
                        let dtype = Dtype::from_name(t.dtype.name());
                        (shape, dtype)
                    }
                    Type::Scalar(ScalarKind::Int | ScalarKind::Float | ScalarKind::Bool) => {
                        (Some(Vec::new()), Some(Dtype::Fp64))
                    }
                };
                match (shape, dtype) {
                    (Some(s), Some(d)) => Tensor::zeros(d, &s).map_err(|e| failure(e.to_string())),
                    _ => Err(failure("an output of unknown shape".into())),
                }
            })
            .collect()
    }
}

fn placeholder(f: &Fixed) -> Option<Option<HostValue>> {
    Some(match f {
        Fixed::Absent => None,
        Fixed::Tensor(shape, d) => {
            if shape.iter().product::<u64>() > MAX_ELEMENTS {
                return None;
            }
            let dims: Vec<usize> = shape.iter().map(|n| *n as usize).collect();
            let dtype = Dtype::from_name(d.name())?;
            Some(HostValue::Tensor(Tensor::zeros(dtype, &dims).ok()?))
        }
        Fixed::Int(n) => Some(HostValue::Int(*n)),
        Fixed::Float(x) => Some(HostValue::Float(*x)),
        Fixed::Bool(b) => Some(HostValue::Bool(*b)),
    })
}

/// Compiles the kernels of every site of `host` whose arguments are known,
/// into `cache`, configured by `tunings` where they hold a configuration;
/// returns how many sites were compiled. Sites that fail
/// here (an index out of bounds, say) are left to fail at run time.
pub fn precompile(
    c: &Compilation,
    host: &HostModule,
    cache: &KernelCache,
    tunings: Option<&dyn tessera_exec::Tunings>,
) -> usize {
    let Some(program) = c.program() else { return 0 };
    let locate = |s| c.locate(s);
    let mut recorder = Recorder {
        cache,
        locate: &locate,
        tunings,
    };
    let mut sink = std::io::sink();
    let mut sites = ModuleSites {
        host,
        ops: HostOps {
            program: &program,
            runner: &mut recorder,
            out: &mut sink,
        },
    };
    let mut compiled = 0;
    for site in &host.sites {
        if matches!(site.kind, SiteKind::Cast(_) | SiteKind::Builtin(..)) {
            continue;
        }
        let Some(fixed) = &site.fixed else { continue };
        let args: Option<Vec<Option<HostValue>>> = fixed.iter().map(placeholder).collect();
        let Some(args) = args else { continue };
        if sites.run_site(site, args).is_ok() {
            compiled += 1;
        }
    }
    compiled
}

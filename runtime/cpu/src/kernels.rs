//! Running graphs through the kernel pipeline: fusion into the Schedule IR,
//! lowering to Tile IR, and the multi-threaded Tile IR executor. This is how
//! `tsrc run` executes ops on the CPU.

use crate::tile::{default_threads, run_program};
use tessera_core::Arch;
use tessera_diagnostics::Diagnostic;
use tessera_driver::Pipeline;
use tessera_graph::{Graph, Program};
use tessera_schedule::space::Tunings;
use tessera_tensor::Tensor;
use tessera_tile::TileProgram;

/// The architecture the CPU schedules for: its tile shapes are those a
/// GPU of this kind would use, so the CPU runs the same block programs.
pub const CPU_SCHEDULE_ARCH: &Arch = &Arch::SM_90;

/// Schedules and lowers an optimised graph to Tile IR through the driver's
/// pipeline, scheduled for [`CPU_SCHEDULE_ARCH`].
pub fn compile_graph(program: &Program<'_>, g: &Graph) -> Result<TileProgram, Box<Diagnostic>> {
    compile_graph_for(program, g, CPU_SCHEDULE_ARCH, None)
}

/// Schedules and lowers an optimised graph for `arch` (a GPU's), its op's
/// kernels configured by `tunings` when it holds a configuration for the
/// graph at its shapes on `arch`.
pub fn compile_graph_for(
    program: &Program<'_>,
    g: &Graph,
    arch: &'static Arch,
    tunings: Option<&dyn Tunings>,
) -> Result<TileProgram, Box<Diagnostic>> {
    compile_graph_at(program, g, (arch, tunings), &[])
}

/// [`compile_graph_for`] of a graph to be run on inputs of `shapes`,
/// scheduled with [`size_hints`].
pub fn compile_graph_at(
    program: &Program<'_>,
    g: &Graph,
    (arch, tunings): (&'static Arch, Option<&dyn Tunings>),
    shapes: &[&[usize]],
) -> Result<TileProgram, Box<Diagnostic>> {
    let mut pipeline = Pipeline::new(program, arch)
        .tuned_by(tunings)
        .hinted(size_hints(g, shapes));
    pipeline.lower(g).map(|lowered| lowered.tile)
}

/// The sizes the symbols of `g`'s parameters take on inputs of `shapes`:
/// a graph built once per op keeps its declared sizes symbolic, and what
/// must fit in a GPU's shared memory at them (attention's tile at a large
/// head dimension) is sized at the run's (see `Pipeline::hinted`).
pub fn size_hints(g: &Graph, shapes: &[&[usize]]) -> tessera_core::Bindings {
    tessera_driver::pipeline::param_sizes(g, |_, p, axis| {
        shapes.get(p)?.get(axis).map(|n| *n as i64)
    })
}

/// Runs graph `g` (optimised, on concrete shapes) on `inputs` with
/// `threads` worker threads (`None`: all cores, or `TESSERA_THREADS`).
pub fn run_graph(
    program: &Program<'_>,
    g: &Graph,
    inputs: &[Tensor],
    threads: Option<usize>,
) -> Result<Vec<Tensor>, Box<Diagnostic>> {
    let p = compile_graph(program, g)?;
    run_program(&p, inputs, threads.unwrap_or_else(default_threads)).map_err(|e| {
        tessera_driver::pipeline::run_error(g, e.message, e.span, "while running this")
    })
}

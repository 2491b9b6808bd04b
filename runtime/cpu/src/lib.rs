//! The CPU backend: runs Tessera ops on host tensors.
//!
//! [`prepare`] builds an op's graph for the concrete shapes of its inputs
//! (so every dimension is known) and optimises it; [`eval`] executes it. Numbers
//! follow the numerics policy: storage dtypes round as the hardware does,
//! matmuls and reductions accumulate in the accumulation dtype, `fast`,
//! `deterministic` and `kahan_sum` sum in their promised order.
//!
//! No IO here: inputs and outputs are [`Tensor`]s.

pub mod eval;
pub mod host;
pub mod kernels;
pub mod order;
pub mod reduce;
pub mod tile;

pub use eval::{eval, EvalError, Mode};
pub use tile::{default_threads, run_program};

use tessera_diagnostics::Diagnostic;
use tessera_driver::{Entry, Pipeline};
use tessera_graph::{Arg, Graph, Program, Type};
use tessera_sema::{Dim, TensorTy};
use tessera_syntax::ast::Dtype;
use tessera_tensor::Tensor;

/// The language dtype of a runtime dtype.
pub fn language_dtype(d: tessera_tensor::Dtype) -> Dtype {
    Dtype::from_name(d.name()).expect("the language knows every runtime dtype")
}

/// The graph type of a host tensor.
pub fn tensor_type(t: &Tensor) -> Type {
    Type::Tensor(TensorTy::new(
        t.shape.iter().map(|n| Dim::known(*n as u64)).collect(),
        language_dtype(t.dtype),
    ))
}

/// The graph of op `name` on the shapes of `inputs`, optimised, ready for
/// [`eval`].
pub fn prepare(
    program: &Program<'_>,
    name: &str,
    inputs: &[Tensor],
) -> Result<Graph, Box<Diagnostic>> {
    let args: Vec<Arg> = inputs.iter().map(|t| Arg::Type(tensor_type(t))).collect();
    let mut pipeline = Pipeline::new(program, kernels::CPU_SCHEDULE_ARCH);
    Ok(pipeline.graph(Entry::Op(name, Some(&args)))?.0)
}

/// Optimises a graph built on concrete shapes for execution, through the
/// driver's pipeline (verified in debug builds).
pub fn prepare_graph(program: &Program<'_>, g: &Graph) -> Result<Graph, Box<Diagnostic>> {
    Ok(Pipeline::new(program, kernels::CPU_SCHEDULE_ARCH)
        .optimize(g)?
        .0)
}

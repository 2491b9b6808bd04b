//! Graph IR: the SSA dataflow of tensor ops that Tessera optimises.
//!
//! A [`Graph`] is one op with everything it calls inlined: nodes in
//! topological order, each an [`Op`] on earlier nodes with a [`Type`]
//! (symbolic shape, dtype, shard spec). [`build_op`] makes one from a checked
//! program, [`verify`] checks the invariants, [`print_graph`] gives the
//! deterministic text form, and the passes rewrite it.
//!
//! Architecture invariant: no IO; errors are [`Diagnostic`]s.
//!
//! [`Diagnostic`]: tessera_diagnostics::Diagnostic

mod builder;
mod infer;
mod ir;
pub use tessera_core::math;
pub mod passes;
mod print;
mod program;
mod verify;

pub use builder::{build_call, build_kernel, build_op, concrete_args, Arg};
pub use infer::{broadcast, infer, InferError};
pub use ir::{
    BinaryOp, CollectiveKind, ConvGeom, Graph, Node, Op, Param, ReduceKind, ScalarKind, ScanKind,
    SliceAxis, Type, UnaryOp, ValueId,
};
pub use print::{float_text, node_text, print_graph};
pub use program::{Callable, Program};
pub use verify::verify;

//! The vocabulary every layer of Tessera shares, from the checker to the
//! PTX back end and the runtime: one definition of each, so no layer
//! imports another just for its words.
//!
//! * [`Dtype`]: the element types, their names and sizes, and the exact
//!   rounding each one applies to a value it stores ([`Dtype::round`]).
//! * [`numerics`]: reduction policies ([`Policy`]), precision modes and the
//!   [`NumericsConfig`] an op or kernel runs under.
//! * [`Size`] and [`Bindings`]: integer expressions over the symbolic
//!   dimensions of a program, and the values bound to them at launch.
//! * [`Arch`]: an NVIDIA architecture, built once from its name, with its
//!   limits and capability flags. "Does this arch have wgmma?" is
//!   `arch.has_wgmma`, never a comparison of names.
//! * [`ops`]: the elementwise and reduction operations with one
//!   name-to-op table each ([`UnaryOp::from_name`], ...).
//! * [`resources`]: tile shapes ([`GemmTile`], [`AttentionTile`],
//!   [`RowTile`]) and the one model of their shared memory, registers and
//!   residency on an SM ([`Arch::residency`]).
//! * [`Peaks`]: each architecture's reference part (SMs, TFLOP/s, GB/s),
//!   for the tuner's cost model and the profiler.
//! * [`entity!`]: typed `u32` handles into arenas.
//!
//! This crate depends on nothing but `std` and `half` (the fp16 and bf16
//! codecs).

#![warn(missing_docs)]

pub mod arch;
pub mod dtype;
mod entity;
pub mod math;
pub mod numerics;
pub mod ops;
pub mod peaks;
pub mod resources;
pub mod size;

pub use arch::Arch;
pub use dtype::{f8e4m3_from_f32, f8e4m3_to_f32, f8e5m2_from_f32, f8e5m2_to_f32, Dtype, Number};
pub use numerics::{MatmulPrecision, NumericsConfig, Policy, Precision};
pub use ops::{BinaryOp, CollectiveKind, ReduceKind, ScanKind, UnaryOp};
pub use peaks::Peaks;
pub use resources::{AttentionTile, GemmTile, Knobs, Limit, Residency, RowTile};
pub use size::{next_pow2, Bindings, Size, SizeParseError};

//! The Tessera runtime: host tensors, dtypes, `.npy` files, seeded random numbers.
//!
//! * [`dtype`]: the element types and the exact rounding each applies ([`Dtype::round`]),
//!   plus the fp8 bit codecs (defined in `tessera-core`, re-exported here).
//! * [`tensor`]: [`Tensor`], a dtype, a row-major shape and values in a storage class.
//! * [`format`](mod@format): how the `print` builtin shows a tensor ([`Tensor::format`]).
//! * [`npy`]: reading and writing numpy's `.npy` files.
//! * [`rng`]: counter-based `rand` / `randn`, specified so that every backend reproduces them
//!   bit for bit.
//!
//! This crate does no device work; the backends build on it.

#![warn(missing_docs)]

pub mod format;
pub mod npy;
pub mod rng;
pub mod tensor;

pub use npy::{read_npy, read_npy_file, write_npy, write_npy_file, NpyArray, NpyDtype, NpyError};
pub use rng::{normal_f64, philox, rand, randn, random_bits, uniform_f32, uniform_f64};
pub use tensor::{numel, strides, tensor_map_extents, Data, ShapeError, StorageClass, Tensor};
pub use tessera_core::dtype;
pub use tessera_core::dtype::{
    f8e4m3_from_f32, f8e4m3_to_f32, f8e5m2_from_f32, f8e5m2_to_f32, Dtype,
};

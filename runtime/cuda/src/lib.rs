//! The CUDA backend's host side: open a device, load PTX, move bytes, launch kernels, time them.
//!
//! Built on cudarc's driver API, loaded dynamically: a binary using this crate builds and
//! starts on machines without CUDA, where [`Gpu::available`] is false and [`Gpu::open`]
//! returns [`CudaError::NoDriver`] (never a panic).
//!
//! * [`device`]: [`Gpu`], one device's context and stream: open, synchronize, time; its
//!   `launch` (checks and queues a kernel) lives in the private `launch` module, above
//!   [`buffer`] and [`args`], so the modules layer without a circle.
//! * [`module`]: [`Module`], JIT-loaded PTX with the driver's logs, cached per process.
//! * [`buffer`]: [`DeviceBuffer`], untyped device bytes, and the copies to and from it.
//! * [`args`]: [`KernelArg`], one kernel parameter (buffers are 64-bit device pointers).
//! * [`tensor_bytes`]: host tensors to and from the device's packed little-endian bytes.
//! * [`ptxas`]: offline tooling (no GPU): `ptxas -v` reports and cubins, `cuobjdump -sass`.
//! * [`sass`]: static figures of SASS listings: size, calls, executed instructions per
//!   trip of a kernel's main loop.
//!
//! ```no_run
//! use tessera_cuda::{Gpu, KernelArg};
//! # fn main() -> Result<(), tessera_cuda::CudaError> {
//! # let ptx = "";
//! let gpu = Gpu::open()?;
//! let module = gpu.module(ptx)?;
//! let buf = gpu.upload(&[0u8; 1024])?;
//! gpu.launch(&module, "add_one", [1, 1, 1], [256, 1, 1], 0,
//!            &[KernelArg::Buffer(&buf), KernelArg::U32(256)])?;
//! let bytes = gpu.download(&buf)?;
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

pub mod args;
pub mod buffer;
pub mod device;
pub mod error;
mod launch;
pub mod module;
pub mod ptxas;
pub mod sass;
pub mod tensor_bytes;
pub mod tensor_map;

pub use args::KernelArg;
pub use buffer::DeviceBuffer;
pub use device::{available, Gpu};
pub use error::CudaError;
pub use module::{KernelAttributes, Module};
pub use ptxas::{assemble, find_cuobjdump, find_ptxas, sass, FunctionResources, PtxasReport};
pub use tensor_bytes::{tensor_from_bytes, tensor_to_bytes};

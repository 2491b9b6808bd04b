//! Device buffers (`DeviceBuffer`): untyped bytes in device memory, and the copies to and from them.
//!
//! Buffers are deliberately byte-level: the compiler decides dtypes and layouts, and
//! [`crate::tensor_bytes`] converts host tensors to and from the device's packed form.
//! A buffer belongs to the [`Gpu`] that allocated it and is only used on that `Gpu`'s
//! stream, so every copy and launch that touches it is ordered without extra events.

use cudarc::driver::{CudaSlice, DevicePtr};
use tessera_tensor::{Dtype, Tensor};

use crate::device::Gpu;
use crate::error::CudaError;
use crate::tensor_bytes::{tensor_from_bytes, tensor_to_bytes};

/// A block of device memory of a fixed number of bytes.
///
/// Dropping it frees the memory in stream order (after the work queued before the drop).
#[derive(Debug)]
pub struct DeviceBuffer {
    /// The allocation; `None` for an empty buffer (no device memory, address 0).
    slice: Option<CudaSlice<u8>>,
    /// The device address of the first byte (0 when empty).
    ptr: u64,
    /// The size in bytes.
    len: usize,
    /// The id of the [`Gpu`] that allocated it.
    pub(crate) owner: u64,
}

impl DeviceBuffer {
    /// An empty buffer owned by the `Gpu` with id `owner`; it has no device memory.
    pub(crate) fn empty(owner: u64) -> DeviceBuffer {
        DeviceBuffer {
            slice: None,
            ptr: 0,
            len: 0,
            owner,
        }
    }

    /// The size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device address of the first byte, as kernels receive it (0 for an empty buffer).
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }
}

impl Gpu {
    /// Checks that `buffer` was allocated by this `Gpu`.
    pub(crate) fn check_owner(&self, buffer: &DeviceBuffer, during: &str) -> Result<(), CudaError> {
        if buffer.owner == self.id {
            Ok(())
        } else {
            Err(CudaError::invalid(
                during,
                "the buffer was allocated by another `Gpu` handle; use buffers only with the `Gpu` that made them",
            ))
        }
    }

    /// Allocates `n` bytes of device memory, uninitialized.
    pub fn alloc_bytes(&self, n: usize) -> Result<DeviceBuffer, CudaError> {
        if n == 0 {
            return Ok(DeviceBuffer::empty(self.id));
        }
        let during = || format!("allocating {n} bytes on the device");
        // SAFETY: the bytes are uninitialized device memory; every byte pattern is a valid u8,
        // and the memory is only read back through the driver.
        let slice =
            unsafe { self.stream.alloc::<u8>(n) }.map_err(|e| CudaError::driver(during(), e))?;
        let (ptr, _record) = slice.device_ptr(&self.stream);
        drop(_record);
        Ok(DeviceBuffer {
            ptr,
            slice: Some(slice),
            len: n,
            owner: self.id,
        })
    }

    /// Allocates `n` bytes of device memory, all zero.
    pub fn alloc_zeroed(&self, n: usize) -> Result<DeviceBuffer, CudaError> {
        let mut buffer = self.alloc_bytes(n)?;
        self.fill_zero(&mut buffer)?;
        Ok(buffer)
    }

    /// Sets every byte of `buffer` to zero (queued on the stream).
    pub fn fill_zero(&self, buffer: &mut DeviceBuffer) -> Result<(), CudaError> {
        let during = format!("zeroing a {}-byte device buffer", buffer.len);
        self.check_owner(buffer, &during)?;
        if let Some(slice) = &mut buffer.slice {
            self.stream
                .memset_zeros(slice)
                .map_err(|e| CudaError::driver(during, e))?;
        }
        Ok(())
    }

    /// Allocates a buffer holding a copy of `bytes`.
    pub fn upload(&self, bytes: &[u8]) -> Result<DeviceBuffer, CudaError> {
        let mut buffer = self.alloc_bytes(bytes.len())?;
        self.write(&mut buffer, bytes)?;
        Ok(buffer)
    }

    /// Copies `bytes` into the start of `buffer`, which must be at least as long.
    pub fn write(&self, buffer: &mut DeviceBuffer, bytes: &[u8]) -> Result<(), CudaError> {
        let during = format!(
            "copying {} bytes from the host into a {}-byte device buffer",
            bytes.len(),
            buffer.len
        );
        self.check_owner(buffer, &during)?;
        if bytes.len() > buffer.len {
            return Err(CudaError::invalid(during, "the buffer is too small"));
        }
        if let Some(slice) = &mut buffer.slice {
            if !bytes.is_empty() {
                let mut dst = slice.slice_mut(..bytes.len());
                self.stream
                    .memcpy_htod(bytes, &mut dst)
                    .map_err(|e| CudaError::driver(during, e))?;
            }
        }
        Ok(())
    }

    /// Copies the whole of `buffer` back to the host, after the work queued before it.
    pub fn download(&self, buffer: &DeviceBuffer) -> Result<Vec<u8>, CudaError> {
        let mut out = vec![0u8; buffer.len];
        self.read_into(buffer, &mut out)?;
        Ok(out)
    }

    /// Copies the first `out.len()` bytes of `buffer` into `out`, after the work queued before
    /// it; returns once the bytes are there.
    pub fn read_into(&self, buffer: &DeviceBuffer, out: &mut [u8]) -> Result<(), CudaError> {
        let during = format!(
            "copying {} bytes from a {}-byte device buffer to the host",
            out.len(),
            buffer.len
        );
        self.check_owner(buffer, &during)?;
        if out.len() > buffer.len {
            return Err(CudaError::invalid(during, "the buffer is too small"));
        }
        if let Some(slice) = &buffer.slice {
            if !out.is_empty() {
                let src = slice.slice(..out.len());
                self.stream
                    .memcpy_dtoh(&src, out)
                    .map_err(|e| CudaError::driver(during.clone(), e))?;
            }
        }
        // The copy into pageable memory is synchronous, but waiting here also reports any
        // error of earlier asynchronous work on the stream against this copy.
        self.stream_sync(&during)
    }

    /// Uploads `tensor`'s elements in the device's packed little-endian form (see
    /// [`tensor_to_bytes`]).
    pub fn upload_tensor(&self, tensor: &Tensor) -> Result<DeviceBuffer, CudaError> {
        self.upload(&tensor_to_bytes(tensor)?)
    }

    /// Downloads `buffer` as a tensor of `dtype` and `shape` (see [`tensor_from_bytes`]); the
    /// buffer must hold exactly that many bytes.
    pub fn download_tensor(
        &self,
        buffer: &DeviceBuffer,
        dtype: Dtype,
        shape: &[usize],
    ) -> Result<Tensor, CudaError> {
        tensor_from_bytes(dtype, shape, &self.download(buffer)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_buffer() {
        let b = DeviceBuffer::empty(3);
        assert!(b.is_empty());
        assert_eq!(b.len(), 0);
        assert_eq!(b.device_ptr(), 0);
        assert_eq!(crate::KernelArg::Buffer(&b).to_ne_bytes(), [0; 8]);
        assert_eq!(crate::KernelArg::Buffer(&b).to_string(), "buffer(0 bytes)");
    }
}

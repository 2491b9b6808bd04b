//! Tensor maps for the Tensor Memory Accelerator: `cuTensorMapEncodeTiled`
//! through the driver, the 128 bytes then copied to device memory, where
//! the kernel reads them by address (after a `fence.proxy.tensormap`).

use cudarc::driver::sys;
use tessera_tensor::Dtype;

use crate::buffer::DeviceBuffer;
use crate::device::Gpu;
use crate::error::CudaError;

impl Gpu {
    /// The tiled tensor map of the row-major tensor in `buffer` (`dtype`,
    /// `shape` outermost first) with boxes of `boxes` elements (innermost
    /// dimension first) and a `swizzle`-byte swizzle (0, 32, 64 or 128),
    /// zeros outside the tensor, in a device buffer of its own.
    pub fn tensor_map(
        &self,
        buffer: &DeviceBuffer,
        (dtype, shape): (Dtype, &[usize]),
        boxes: &[u32],
        swizzle: u32,
    ) -> Result<DeviceBuffer, CudaError> {
        let during = format!(
            "encoding a tensor map of a {shape:?} {} tensor",
            dtype.name()
        );
        let bad = |why: String| Err(CudaError::invalid(during.clone(), why));
        use sys::CUtensorMapDataType_enum as T;
        let data = match dtype {
            Dtype::Bf16 => T::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
            Dtype::Fp16 => T::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
            Dtype::Fp32 => T::CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
            Dtype::Fp8E4m3 | Dtype::Fp8E5m2 | Dtype::Int8 | Dtype::Uint8 => {
                T::CU_TENSOR_MAP_DATA_TYPE_UINT8
            }
            d => return bad(format!("no tensor map for {} elements", d.name())),
        };
        use sys::CUtensorMapSwizzle_enum as S;
        let swizzle = match swizzle {
            0 => S::CU_TENSOR_MAP_SWIZZLE_NONE,
            32 => S::CU_TENSOR_MAP_SWIZZLE_32B,
            64 => S::CU_TENSOR_MAP_SWIZZLE_64B,
            128 => S::CU_TENSOR_MAP_SWIZZLE_128B,
            s => return bad(format!("a {s}-byte swizzle")),
        };
        let rank = shape.len();
        if rank == 0 || rank > 5 || boxes.len() != rank {
            return bad(format!("rank {rank} with {} box extents", boxes.len()));
        }
        let elem = dtype.size_bytes() as u64;
        let (dims, strides) = tessera_tensor::tensor_map_extents(shape, elem);
        let ones = vec![1u32; rank];
        let mut map = std::mem::MaybeUninit::<sys::CUtensorMap>::zeroed();
        // SAFETY: every pointer is to a live array of `rank` (strides:
        // `rank - 1`) elements; `map` is 64-byte aligned storage the call
        // writes.
        let status = unsafe {
            sys::cuTensorMapEncodeTiled(
                map.as_mut_ptr(),
                data,
                rank as u32,
                buffer.device_ptr() as *mut std::ffi::c_void,
                dims.as_ptr(),
                strides.as_ptr(),
                boxes.as_ptr(),
                ones.as_ptr(),
                sys::CUtensorMapInterleave_enum::CU_TENSOR_MAP_INTERLEAVE_NONE,
                swizzle,
                sys::CUtensorMapL2promotion_enum::CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                sys::CUtensorMapFloatOOBfill_enum::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
            )
        };
        if status != sys::CUresult::CUDA_SUCCESS {
            return Err(CudaError::driver_code(during, status));
        }
        // SAFETY: the driver wrote the map.
        let map = unsafe { map.assume_init() };
        let bytes: Vec<u8> = map.opaque.iter().flat_map(|w| w.to_le_bytes()).collect();
        self.upload(&bytes)
    }
}

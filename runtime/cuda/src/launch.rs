//! Kernel launches: [`Gpu::launch`] checks a launch (shape, buffer owners,
//! parameter sizes, shared memory) and queues it. It sits above the device,
//! the buffers and the argument packing, so that none of those needs the
//! others' launch-time checks.

use cudarc::driver::sys;

use crate::args::{KernelArg, PackedArgs};
use crate::device::{check_launch_shape, launch_description, Gpu, DEFAULT_DYNAMIC_SHARED};
use crate::error::CudaError;
use crate::module::Module;

impl Gpu {
    /// Queues kernel `kernel` of `module` on the stream with `grid` blocks of `block` threads,
    /// `shared_bytes` of dynamic shared memory and `args` (one per `.param`, in order).
    ///
    /// Above 48 KiB of dynamic shared memory the kernel's limit is raised first
    /// (`CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`). When the driver reports the
    /// kernel's parameter sizes (CUDA 12.4+), the arguments are checked against them.
    /// Returns once the launch is queued; faults inside the kernel surface at the next
    /// [`Gpu::synchronize`].
    pub fn launch(
        &self,
        module: &Module,
        kernel: &str,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        args: &[KernelArg<'_>],
    ) -> Result<(), CudaError> {
        let during = launch_description(kernel, grid, block, shared_bytes);
        check_launch_shape(grid, block).map_err(|reason| CudaError::invalid(&during, reason))?;
        for arg in args {
            if let KernelArg::Buffer(b) = arg {
                self.check_owner(b, &during)?;
            }
        }
        let func = module.kernel(kernel)?;
        if let Some(sizes) = &func.param_sizes {
            check_params(sizes, args).map_err(|reason| CudaError::invalid(&during, reason))?;
        }
        let total_shared = u64::from(func.static_shared) + u64::from(shared_bytes);
        if total_shared > u64::from(self.max_shared_optin) {
            return Err(CudaError::invalid(
                &during,
                format!(
                    "the kernel needs {total_shared} bytes of shared memory ({} static + {shared_bytes} dynamic) \
                     but a block of this device may use at most {}",
                    func.static_shared, self.max_shared_optin
                ),
            ));
        }
        if shared_bytes > DEFAULT_DYNAMIC_SHARED {
            module.ensure_dynamic_shared(kernel, shared_bytes, &during)?;
        }
        let mut packed = PackedArgs::new(args);
        let mut params = packed.param_pointers();
        self.ctx
            .bind_to_thread()
            .map_err(|e| CudaError::driver(&during, e))?;
        // SAFETY: `func.raw` belongs to a loaded module of this context; `params` has one
        // pointer per argument, each to a live 8-byte slot holding the value; buffers are
        // owned by this `Gpu` and are alive for the call (freeing is stream-ordered after it).
        let status = unsafe {
            sys::cuLaunchKernel(
                func.raw,
                grid[0],
                grid[1],
                grid[2],
                block[0],
                block[1],
                block[2],
                shared_bytes,
                self.stream.cu_stream(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        *self.last_launch.lock().unwrap_or_else(|e| e.into_inner()) = Some(during.clone());
        if status != sys::CUresult::CUDA_SUCCESS {
            return Err(CudaError::driver_code(during, status));
        }
        Ok(())
    }
}

/// Checks `args` against the kernel's parameter sizes.
pub(crate) fn check_params(sizes: &[usize], args: &[KernelArg<'_>]) -> Result<(), String> {
    if sizes.len() != args.len() {
        return Err(format!(
            "the kernel takes {} parameters but {} arguments were given",
            sizes.len(),
            args.len()
        ));
    }
    for (i, (size, arg)) in sizes.iter().zip(args).enumerate() {
        if *size != arg.size_bytes() {
            return Err(format!(
                "parameter {i} of the kernel is {size} bytes but argument {i} is {arg} ({} bytes)",
                arg.size_bytes()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_are_checked_by_count_and_size() {
        assert!(check_params(&[4, 8], &[KernelArg::U32(1), KernelArg::F64(2.0)]).is_ok());
        assert_eq!(
            check_params(&[8, 4], &[KernelArg::U64(1)]).unwrap_err(),
            "the kernel takes 2 parameters but 1 arguments were given"
        );
        assert_eq!(
            check_params(&[8, 4], &[KernelArg::U64(1), KernelArg::I64(2)]).unwrap_err(),
            "parameter 1 of the kernel is 4 bytes but argument 1 is i64 2 (8 bytes)"
        );
    }
}

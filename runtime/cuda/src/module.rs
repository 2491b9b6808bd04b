//! PTX modules (`Module`): JIT loading with the driver's logs, a per-process cache, kernel lookup.
//!
//! Loading goes through `cuModuleLoadDataEx` directly (not cudarc's `load_module`, which needs
//! NVRTC and drops the JIT log), so a PTX error comes back with the driver's own message
//! ("ptxas application ptx input, line 12; error : ..."). Loaded modules are cached for the
//! life of the process by device and PTX text: loading the same text twice returns the same
//! [`Module`].

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::hash::{Hash, Hasher};
use std::ptr;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{sys, CudaContext};

use crate::error::CudaError;

/// Bytes of each JIT log buffer; longer logs are cut.
const LOG_BYTES: usize = 64 * 1024;

/// A loaded PTX module: its kernels can be launched with [`crate::Gpu::launch`].
///
/// Shared through `Arc`; the module is unloaded when the last reference goes (the process
/// cache holds one, so cached modules live until the process ends).
#[derive(Debug)]
pub struct Module {
    /// The driver's module handle.
    raw: sys::CUmodule,
    /// The context the module was loaded into (kept alive by the module).
    ctx: Arc<CudaContext>,
    /// The hash of the PTX text, the cache key.
    hash: u64,
    /// The PTX text (compared on a cache hit, so a hash collision cannot return a wrong module).
    ptx: Arc<str>,
    /// The JIT's info log (with verbose output: registers and spills per kernel).
    info_log: String,
    /// Kernels looked up so far, by name.
    kernels: Mutex<HashMap<String, Kernel>>,
}

// SAFETY: driver module and function handles may be used from any thread once the owning
// context is current; every use binds `ctx` first. The mutable state is behind a `Mutex`.
unsafe impl Send for Module {}
unsafe impl Sync for Module {}

impl Drop for Module {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: `raw` came from `cuModuleLoadDataEx` and is unloaded exactly once.
            let _ = unsafe { sys::cuModuleUnload(self.raw) };
        }
    }
}

/// What the launcher knows about one kernel of a module.
#[derive(Clone, Debug)]
pub(crate) struct Kernel {
    /// The driver's function handle.
    pub raw: sys::CUfunction,
    /// The sizes in bytes of the kernel's parameters, in order, when the driver can say
    /// (`cuFuncGetParamInfo`, CUDA 12.4 and later).
    pub param_sizes: Option<Vec<usize>>,
    /// The dynamic shared memory limit set on the function so far (48 KiB by default).
    pub max_dynamic_shared: u32,
    /// Statically allocated shared memory of the kernel, in bytes.
    pub static_shared: u32,
}

/// Resource use of one kernel as the driver reports it after JIT compilation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelAttributes {
    /// Registers per thread.
    pub registers: u32,
    /// Local memory per thread (stack and spills), in bytes.
    pub local_bytes: u32,
    /// Statically allocated shared memory per block, in bytes.
    pub static_shared_bytes: u32,
    /// The largest block (in threads) this kernel can be launched with.
    pub max_threads_per_block: u32,
}

/// The process-wide cache: (device ordinal, PTX hash) → modules with that hash.
type Cache = Mutex<HashMap<(usize, u64), Vec<Arc<Module>>>>;

fn cache() -> &'static Cache {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// The number of parameters of entry `name` as the PTX text declares them
/// (`.entry name(.param .u64 a, ...)`), or `None` when it cannot be found.
fn entry_param_count(ptx: &str, name: &str) -> Option<usize> {
    let mut rest = ptx;
    while let Some(at) = rest.find(".entry") {
        let after = rest[at + ".entry".len()..].trim_start();
        let Some(tail) = after.strip_prefix(name) else {
            rest = &rest[at + 1..];
            continue;
        };
        let tail = tail.trim_start();
        if !tail.starts_with('(') {
            // Another entry whose name starts with `name`, or one without parameters.
            if tail.starts_with(|c: char| c.is_alphanumeric() || c == '_' || c == '$') {
                rest = &rest[at + 1..];
                continue;
            }
            return Some(0);
        }
        let list = &tail[1..tail.find(')')?];
        return Some(list.matches(".param").count());
    }
    None
}

/// The cache key of a PTX text.
pub(crate) fn ptx_hash(ptx: &str) -> u64 {
    let mut h = DefaultHasher::new();
    ptx.hash(&mut h);
    h.finish()
}

impl Module {
    /// The module for `ptx` on the device of `ctx`: from the cache, or JIT-compiled and cached.
    pub(crate) fn load_cached(ctx: &Arc<CudaContext>, ptx: &str) -> Result<Arc<Module>, CudaError> {
        let key = (ctx.ordinal(), ptx_hash(ptx));
        // Hold the lock while loading, so that two threads never compile the same text twice.
        let mut cache = cache().lock().unwrap_or_else(|e| e.into_inner());
        if let Some(found) = cache
            .get(&key)
            .and_then(|ms| ms.iter().find(|m| &*m.ptx == ptx))
        {
            return Ok(found.clone());
        }
        let module = Arc::new(Module::load(ctx, ptx, key.1)?);
        cache.entry(key).or_default().push(module.clone());
        Ok(module)
    }

    /// JIT-compiles `ptx` into `ctx`, uncached.
    fn load(ctx: &Arc<CudaContext>, ptx: &str, hash: u64) -> Result<Module, CudaError> {
        let during = format!(
            "loading a PTX module ({} bytes, hash {hash:016x})",
            ptx.len()
        );
        let text = CString::new(ptx)
            .map_err(|_| CudaError::invalid(&during, "the PTX text contains a NUL byte"))?;
        ctx.bind_to_thread()
            .map_err(|e| CudaError::driver(&during, e))?;

        let mut error_log = vec![0u8; LOG_BYTES];
        let mut info_log = vec![0u8; LOG_BYTES];
        let mut options = [
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
            sys::CUjit_option::CU_JIT_INFO_LOG_BUFFER,
            sys::CUjit_option::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
            sys::CUjit_option::CU_JIT_LOG_VERBOSE,
        ];
        // Size and flag options are passed by value, cast to pointers (as the driver API says).
        let mut values: [*mut c_void; 5] = [
            error_log.as_mut_ptr().cast(),
            ptr::without_provenance_mut(LOG_BYTES),
            info_log.as_mut_ptr().cast(),
            ptr::without_provenance_mut(LOG_BYTES),
            ptr::without_provenance_mut(1),
        ];
        let mut raw: sys::CUmodule = ptr::null_mut();
        // SAFETY: `text` is NUL-terminated; the option arrays have equal lengths; the log buffers
        // outlive the call and their sizes are given.
        let status = unsafe {
            sys::cuModuleLoadDataEx(
                &mut raw,
                text.as_ptr().cast(),
                options.len() as u32,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
            )
        };
        let error_log = log_text(&error_log);
        let info_log = log_text(&info_log);
        if status != sys::CUresult::CUDA_SUCCESS {
            let log = if error_log.is_empty() {
                &info_log
            } else {
                &error_log
            };
            return Err(CudaError::driver_code(during, status).with_log(log));
        }
        Ok(Module {
            raw,
            ctx: ctx.clone(),
            hash,
            ptx: ptx.into(),
            info_log,
            kernels: Mutex::new(HashMap::new()),
        })
    }

    /// The hash of the module's PTX text (its cache key, with the device).
    pub fn hash(&self) -> u64 {
        self.hash
    }

    /// The JIT compiler's info log: with verbose output, one entry per kernel with its
    /// registers, spills and shared memory.
    pub fn info_log(&self) -> &str {
        &self.info_log
    }

    /// Whether the module has an entry function (kernel) called `name`.
    pub fn has_kernel(&self, name: &str) -> bool {
        self.kernel(name).is_ok()
    }

    /// The driver's report of the resources kernel `name` uses.
    pub fn kernel_attributes(&self, name: &str) -> Result<KernelAttributes, CudaError> {
        let kernel = self.kernel(name)?;
        let during = format!("querying the attributes of kernel `{name}`");
        use sys::CUfunction_attribute as A;
        let get = |attr| {
            function_attribute(kernel.raw, attr)
                .map_err(|code| CudaError::driver_code(&during, code))
        };
        Ok(KernelAttributes {
            registers: get(A::CU_FUNC_ATTRIBUTE_NUM_REGS)?,
            local_bytes: get(A::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)?,
            static_shared_bytes: get(A::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?,
            max_threads_per_block: get(A::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
        })
    }

    /// The kernel called `name`, looked up once and then remembered.
    pub(crate) fn kernel(&self, name: &str) -> Result<Kernel, CudaError> {
        let mut kernels = self.kernels.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(k) = kernels.get(name) {
            return Ok(k.clone());
        }
        let during = format!("looking up kernel `{name}` in a PTX module");
        let c_name = CString::new(name)
            .map_err(|_| CudaError::invalid(&during, "the kernel name contains a NUL byte"))?;
        self.ctx
            .bind_to_thread()
            .map_err(|e| CudaError::driver(&during, e))?;
        let mut raw: sys::CUfunction = ptr::null_mut();
        // SAFETY: `self.raw` is a loaded module and `c_name` is NUL-terminated.
        let status = unsafe { sys::cuModuleGetFunction(&mut raw, self.raw, c_name.as_ptr()) };
        if status == sys::CUresult::CUDA_ERROR_NOT_FOUND {
            return Err(CudaError::invalid(
                during,
                "the module has no `.entry` function of that name",
            ));
        }
        if status != sys::CUresult::CUDA_SUCCESS {
            return Err(CudaError::driver_code(during, status));
        }
        let static_shared = function_attribute(
            raw,
            sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
        )
        .map_err(|code| CudaError::driver_code(&during, code))?;
        let kernel = Kernel {
            raw,
            param_sizes: param_sizes(raw, entry_param_count(&self.ptx, name)),
            max_dynamic_shared: 48 * 1024,
            static_shared,
        };
        kernels.insert(name.to_string(), kernel.clone());
        Ok(kernel)
    }

    /// Raises the dynamic shared memory limit of kernel `name` to at least `bytes`.
    pub(crate) fn ensure_dynamic_shared(
        &self,
        name: &str,
        bytes: u32,
        during: &str,
    ) -> Result<(), CudaError> {
        let mut kernels = self.kernels.lock().unwrap_or_else(|e| e.into_inner());
        let Some(kernel) = kernels.get_mut(name) else {
            return Err(CudaError::invalid(during, "the kernel was not looked up"));
        };
        if bytes <= kernel.max_dynamic_shared {
            return Ok(());
        }
        self.ctx
            .bind_to_thread()
            .map_err(|e| CudaError::driver(during, e))?;
        // SAFETY: `kernel.raw` is a function of this loaded module.
        let status = unsafe {
            sys::cuFuncSetAttribute(
                kernel.raw,
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                bytes as i32,
            )
        };
        if status != sys::CUresult::CUDA_SUCCESS {
            return Err(CudaError::driver_code(
                format!(
                    "{during}: setting the kernel's dynamic shared memory limit to {bytes} bytes"
                ),
                status,
            ));
        }
        kernel.max_dynamic_shared = bytes;
        Ok(())
    }
}

/// A function attribute as a `u32`, or the driver's status on failure.
fn function_attribute(
    func: sys::CUfunction,
    attr: sys::CUfunction_attribute,
) -> Result<u32, sys::CUresult> {
    let mut value = 0i32;
    // SAFETY: `func` is a valid function handle and `value` a valid out pointer.
    let status = unsafe { sys::cuFuncGetAttribute(&mut value, attr, func) };
    if status == sys::CUresult::CUDA_SUCCESS {
        Ok(value.max(0) as u32)
    } else {
        Err(status)
    }
}

/// Whether the loaded driver has `cuFuncGetParamInfo` (CUDA 12.4+). cudarc panics when asked
/// for a symbol the driver lacks, so look before calling.
fn has_param_info() -> bool {
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| {
        // SAFETY: only called once a driver has been loaded (a module exists); looking up a
        // symbol does not call it.
        unsafe {
            sys::culib()
                .get::<*const c_void>(b"cuFuncGetParamInfo\0")
                .is_ok()
        }
    })
}

/// The sizes of `func`'s parameters, or `None` when the driver cannot tell.
/// With `count` (from the PTX text) only those are asked for; else the
/// driver is asked until it answers that there are no more (a failing call
/// that compute-sanitizer reports as an error).
fn param_sizes(func: sys::CUfunction, count: Option<usize>) -> Option<Vec<usize>> {
    if !has_param_info() {
        return None;
    }
    let mut sizes = Vec::new();
    // PTX allows at most a few thousand parameters; the bound only guards against a loop.
    let bound = count.map_or(65536, |n| n.min(65536));
    for index in 0..bound {
        let (mut offset, mut size) = (0usize, 0usize);
        // SAFETY: `func` is valid; out pointers are valid.
        let status = unsafe { sys::cuFuncGetParamInfo(func, index, &mut offset, &mut size) };
        match status {
            sys::CUresult::CUDA_SUCCESS => sizes.push(size),
            // Past the last parameter.
            sys::CUresult::CUDA_ERROR_INVALID_VALUE => return Some(sizes),
            _ => return None,
        }
    }
    count.map(|_| sizes)
}

/// The text of a NUL-terminated log buffer, trimmed.
fn log_text(buffer: &[u8]) -> String {
    let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
    String::from_utf8_lossy(&buffer[..end]).trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_parameters_are_counted_from_the_text() {
        let ptx = ".visible .entry k0_matmul_big(.param .u64 a)\n{}\n\
                   .visible .entry k0_matmul(\n  .param .u64 a,\n  .param .u64 b,\n  \
                   .param .align 64 .b8 tmap[128]\n)\n{}\n.visible .entry empty\n{}\n";
        assert_eq!(entry_param_count(ptx, "k0_matmul"), Some(3));
        assert_eq!(entry_param_count(ptx, "k0_matmul_big"), Some(1));
        assert_eq!(entry_param_count(ptx, "empty"), Some(0));
        assert_eq!(entry_param_count(ptx, "absent"), None);
    }

    #[test]
    fn hash_is_stable_and_distinguishes_texts() {
        let a = ".version 8.0\n.target sm_80\n";
        let copy: String = a.chars().collect();
        assert_eq!(ptx_hash(a), ptx_hash(&copy));
        assert_ne!(ptx_hash(a), ptx_hash(".version 8.0\n.target sm_90\n"));
    }

    #[test]
    fn log_text_stops_at_nul() {
        assert_eq!(log_text(b"info : ok\n\0garbage"), "info : ok");
        assert_eq!(log_text(b"\0\0"), "");
        assert_eq!(log_text(b"no nul"), "no nul");
    }
}

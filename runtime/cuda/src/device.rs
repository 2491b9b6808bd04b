//! `Gpu`: one CUDA device's context and stream; opening it safely, launching, syncing, timing.
//!
//! Everything here goes through cudarc's dynamically loaded driver, so a binary that uses
//! this crate builds and starts on machines without CUDA: [`Gpu::open`] checks for
//! `libcuda.so` before any driver call (cudarc would panic without it) and returns
//! [`CudaError::NoDriver`] instead.
//!
//! Work is queued on one stream per `Gpu`, in the order it is asked for. Launches are
//! asynchronous: a fault in a kernel shows up at the next [`Gpu::synchronize`] or download,
//! whose error then names the last kernel launched. After a fault (an illegal address, say)
//! the CUDA context is unusable for the rest of the process, as CUDA specifies.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use cudarc::driver::{sys, CudaContext, CudaStream};

use crate::error::CudaError;
use crate::module::Module;

/// The dynamic shared memory a kernel may use without opting in, in bytes.
pub(crate) const DEFAULT_DYNAMIC_SHARED: u32 = 48 * 1024;

/// One CUDA device: a context (the device's primary context) and a stream on it.
///
/// Cheap to share behind an `Arc`; every method may be called from any thread.
#[derive(Debug)]
pub struct Gpu {
    /// The device's primary context.
    pub(crate) ctx: Arc<CudaContext>,
    /// The stream every copy and launch of this handle is queued on.
    pub(crate) stream: Arc<CudaStream>,
    /// A process-unique id; buffers remember the id of the `Gpu` that made them.
    pub(crate) id: u64,
    /// The device's name ("NVIDIA H100 80GB HBM3").
    name: String,
    /// Compute capability (major, minor).
    compute_capability: (u32, u32),
    /// The PTX target code for this handle is compiled for, when the user
    /// chose one (`--arch`); `None`: the launcher's default for the device.
    target: Option<&'static str>,
    /// Shared memory one block may use after opting in, in bytes.
    pub(crate) max_shared_optin: u32,
    /// Streaming multiprocessors.
    sm_count: u32,
    /// The last launch, described for errors that surface later (at a synchronize).
    pub(crate) last_launch: Mutex<Option<String>>,
}

/// Whether the CUDA driver library can be loaded. Checked once per process.
fn driver_present() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: this only tries to dlopen the driver library under its usual names.
    *PRESENT.get_or_init(|| unsafe { sys::is_culib_present() })
}

/// The number of CUDA devices, after initializing the driver (which must be present).
fn device_count() -> Result<u32, CudaError> {
    // SAFETY: plain driver calls with valid out pointers; the library is present.
    unsafe {
        let status = sys::cuInit(0);
        if status != sys::CUresult::CUDA_SUCCESS {
            let e = CudaError::driver_code("initializing the CUDA driver", status);
            return Err(CudaError::NoDevice {
                detail: e.to_string(),
            });
        }
        let mut count = 0i32;
        let status = sys::cuDeviceGetCount(&mut count);
        if status != sys::CUresult::CUDA_SUCCESS {
            let e = CudaError::driver_code("counting CUDA devices", status);
            return Err(CudaError::NoDevice {
                detail: e.to_string(),
            });
        }
        Ok(count.max(0) as u32)
    }
}

/// Whether a CUDA driver is present and reports at least one device. Never panics.
pub fn available() -> bool {
    driver_present() && matches!(device_count(), Ok(n) if n > 0)
}

impl Gpu {
    /// Whether a CUDA driver is present and reports at least one device (see [`available`]).
    pub fn available() -> bool {
        available()
    }

    /// Opens device 0: see [`Gpu::open_device`].
    pub fn open() -> Result<Gpu, CudaError> {
        Gpu::open_device(0)
    }

    /// Opens device `ordinal` (after `CUDA_VISIBLE_DEVICES`): retains its primary context and
    /// creates a stream. Without a driver this is [`CudaError::NoDriver`], without devices
    /// [`CudaError::NoDevice`]; it never panics.
    pub fn open_device(ordinal: usize) -> Result<Gpu, CudaError> {
        if !driver_present() {
            return Err(CudaError::NoDriver);
        }
        let count = device_count()?;
        if count == 0 {
            return Err(CudaError::NoDevice {
                detail: "the driver reports 0 devices".into(),
            });
        }
        if ordinal >= count as usize {
            return Err(CudaError::NoDevice {
                detail: format!("device {ordinal} requested but the driver reports {count}"),
            });
        }
        // cudarc panics when the driver lacks a symbol it expects (a very old driver); turn
        // that into an error rather than taking the process down.
        match catch_unwind(AssertUnwindSafe(|| Gpu::open_checked(ordinal))) {
            Ok(result) => result,
            Err(panic) => {
                let what = panic
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| panic.downcast_ref::<&str>().copied())
                    .unwrap_or("unknown failure");
                Err(CudaError::invalid(
                    format!("opening CUDA device {ordinal}"),
                    format!("the CUDA driver is unusable: {what}"),
                ))
            }
        }
    }

    /// [`Gpu::open_device`] once the driver is known to be present with the device.
    fn open_checked(ordinal: usize) -> Result<Gpu, CudaError> {
        let during = format!("creating a context on CUDA device {ordinal}");
        let ctx = CudaContext::new(ordinal).map_err(|e| CudaError::driver(&during, e))?;
        let stream = ctx.new_stream().map_err(|e| {
            CudaError::driver(format!("creating a stream on CUDA device {ordinal}"), e)
        })?;
        let query = format!("querying the properties of CUDA device {ordinal}");
        let name = ctx.name().map_err(|e| CudaError::driver(&query, e))?;
        let (major, minor) = ctx
            .compute_capability()
            .map_err(|e| CudaError::driver(&query, e))?;
        use sys::CUdevice_attribute as A;
        let attr = |a| {
            ctx.attribute(a)
                .map(|v| v.max(0) as u32)
                .map_err(|e| CudaError::driver(&query, e))
        };
        let max_shared_optin = attr(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?;
        let sm_count = attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        Ok(Gpu {
            ctx,
            stream,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            name,
            compute_capability: (major.max(0) as u32, minor.max(0) as u32),
            target: None,
            max_shared_optin,
            sm_count,
            last_launch: Mutex::new(None),
        })
    }

    /// The device's name, e.g. "NVIDIA H100 80GB HBM3".
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The compute capability `(major, minor)`: (9, 0) for an H100.
    pub fn compute_capability(&self) -> (u32, u32) {
        self.compute_capability
    }

    /// This handle with code compiled for PTX target `name` (`sm_90a`)
    /// rather than the launcher's default; the caller has checked that the
    /// device runs it.
    pub fn with_target(self, name: &'static str) -> Gpu {
        Gpu {
            target: Some(name),
            ..self
        }
    }

    /// The PTX target chosen with [`Gpu::with_target`], if any.
    pub fn target(&self) -> Option<&'static str> {
        self.target
    }

    /// The PTX target of the device: `sm_80`, `sm_90`, ...
    pub fn arch(&self) -> String {
        let (major, minor) = self.compute_capability;
        format!("sm_{major}{minor}")
    }

    /// The most shared memory one block may use (static plus dynamic) after opting in, in
    /// bytes: 227 KiB on an H100, 163 KiB on an A100.
    pub fn max_shared_per_block_optin(&self) -> u32 {
        self.max_shared_optin
    }

    /// The number of streaming multiprocessors.
    pub fn multiprocessor_count(&self) -> u32 {
        self.sm_count
    }

    /// The module for `ptx`: JIT-compiled on first use, then from the per-process cache
    /// (keyed by device and PTX text). A PTX error carries the JIT's error log.
    pub fn module(&self, ptx: &str) -> Result<Arc<Module>, CudaError> {
        Module::load_cached(&self.ctx, ptx)
    }

    /// Waits for all work queued on the stream. A fault in a kernel is reported here, naming
    /// the last kernel launched.
    pub fn synchronize(&self) -> Result<(), CudaError> {
        self.stream_sync("synchronizing the stream")
    }

    /// Waits for the stream; an error says `during` and, if any, the last launch.
    pub(crate) fn stream_sync(&self, during: &str) -> Result<(), CudaError> {
        let result = self
            .ctx
            .bind_to_thread()
            .and_then(|()| self.stream.synchronize())
            .and_then(|()| self.ctx.check_err());
        result.map_err(|e| {
            let last = self.last_launch.lock().unwrap_or_else(|e| e.into_inner());
            let during = match &*last {
                Some(launch) => format!("{during} (after {launch})"),
                None => during.to_string(),
            };
            CudaError::driver(during, e)
        })
    }

    /// Runs `f` (which queues work on this `Gpu`) between two CUDA events and returns the
    /// device time between them in milliseconds. Waits for the work to finish.
    pub fn time(&self, mut f: impl FnMut() -> Result<(), CudaError>) -> Result<f32, CudaError> {
        let during = "timing device work with CUDA events";
        let event = || {
            self.ctx
                .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(|e| CudaError::driver(during, e))
        };
        let (start, end) = (event()?, event()?);
        start
            .record(&self.stream)
            .map_err(|e| CudaError::driver(during, e))?;
        f()?;
        end.record(&self.stream)
            .map_err(|e| CudaError::driver(during, e))?;
        self.stream_sync(during)?;
        start
            .elapsed_ms(&end)
            .map_err(|e| CudaError::driver(during, e))
    }

    /// Like [`Gpu::time`] but measured on the host clock around `f` and a synchronize, in
    /// milliseconds: includes launch overhead, for comparing with host-side timers.
    pub fn time_wall(
        &self,
        mut f: impl FnMut() -> Result<(), CudaError>,
    ) -> Result<f32, CudaError> {
        self.synchronize()?;
        let start = Instant::now();
        f()?;
        self.synchronize()?;
        Ok(start.elapsed().as_secs_f32() * 1e3)
    }
}

/// "launching kernel `k` (grid [4, 1, 1], block [256, 1, 1], 0 bytes shared)".
pub(crate) fn launch_description(
    kernel: &str,
    grid: [u32; 3],
    block: [u32; 3],
    shared_bytes: u32,
) -> String {
    format!(
        "launching kernel `{kernel}` (grid {grid:?}, block {block:?}, {shared_bytes} bytes shared)"
    )
}

/// Rejects launch shapes that no CUDA device accepts.
pub(crate) fn check_launch_shape(grid: [u32; 3], block: [u32; 3]) -> Result<(), String> {
    if grid.contains(&0) || block.contains(&0) {
        return Err("grid and block dimensions must all be at least 1".into());
    }
    let threads = u64::from(block[0]) * u64::from(block[1]) * u64::from(block[2]);
    if threads > 1024 {
        return Err(format!(
            "a block of {threads} threads exceeds the limit of 1024"
        ));
    }
    if grid[1] > 65535 || grid[2] > 65535 {
        return Err("grid dimensions y and z must be at most 65535".into());
    }
    if grid[0] > i32::MAX as u32 {
        return Err("grid dimension x must be at most 2^31 - 1".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_driver_here_means_a_clear_error() {
        // These tests run on machines with and without CUDA; without a driver, opening must
        // fail cleanly (never panic), with the message users see.
        if driver_present() {
            eprintln!("note: a CUDA driver is present; skipping the no-driver checks");
            return;
        }
        assert!(!available());
        assert!(!Gpu::available());
        let err = Gpu::open().unwrap_err();
        assert_eq!(err, CudaError::NoDriver);
        assert_eq!(
            err.to_string(),
            "no CUDA driver found (libcuda.so could not be loaded)"
        );
        assert!(err.is_unavailable());
    }

    #[test]
    fn launch_descriptions() {
        assert_eq!(
            launch_description("k0_row", [4, 1, 1], [256, 1, 1], 0),
            "launching kernel `k0_row` (grid [4, 1, 1], block [256, 1, 1], 0 bytes shared)"
        );
    }

    #[test]
    fn launch_shapes() {
        assert!(check_launch_shape([1, 1, 1], [1024, 1, 1]).is_ok());
        assert!(check_launch_shape([0, 1, 1], [32, 1, 1]).is_err());
        assert!(check_launch_shape([1, 1, 1], [32, 0, 1]).is_err());
        assert!(check_launch_shape([1, 1, 1], [32, 32, 2]).is_err());
        assert!(check_launch_shape([1, 65536, 1], [32, 1, 1]).is_err());
        assert!(check_launch_shape([1 << 31, 1, 1], [32, 1, 1]).is_err());
    }
}

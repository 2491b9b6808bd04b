//! `CudaError`: every failure of the CUDA backend, with what was being done when it happened.

use std::fmt;

use cudarc::driver::{sys, DriverError};

/// A failure of the CUDA backend. Its `Display` is one sentence naming what was being done
/// ("launching kernel `k0_row` (grid [4, 1, 1], ...)") followed by the cause; a PTX JIT
/// failure adds the driver's error log on the lines after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CudaError {
    /// The CUDA driver library (`libcuda.so`) could not be loaded: no NVIDIA driver here.
    NoDriver,
    /// The driver loaded but offers no usable device (`cuInit` failed or found none).
    NoDevice {
        /// Why: the driver's error, or the number of devices it reported.
        detail: String,
    },
    /// A driver call failed.
    Driver {
        /// What was being done, as a phrase: "allocating 4096 bytes on the device".
        during: String,
        /// The driver's name for the error: `CUDA_ERROR_ILLEGAL_ADDRESS`.
        code: String,
        /// The driver's description of the error.
        description: String,
        /// The PTX JIT error log, when the failing call compiled PTX; otherwise empty.
        log: String,
    },
    /// A request refused before it reached the driver (an argument that cannot be right).
    Invalid {
        /// What was being done, as a phrase.
        during: String,
        /// What is wrong with the request.
        reason: String,
    },
}

impl CudaError {
    /// The error a failed driver call gives while doing `during`.
    pub(crate) fn driver(during: impl Into<String>, err: DriverError) -> CudaError {
        CudaError::driver_code(during, err.0)
    }

    /// The error for the driver status `code`, returned while doing `during`.
    pub(crate) fn driver_code(during: impl Into<String>, code: sys::CUresult) -> CudaError {
        let err = DriverError(code);
        let name = err
            .error_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|_| format!("CUDA error {}", code as u32));
        let description = err
            .error_string()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        CudaError::Driver {
            during: during.into(),
            code: name,
            description,
            log: String::new(),
        }
    }

    /// Whether the error is a kernel fault that leaves the device unusable
    /// for the rest of the process (an illegal address, a `trap`, a
    /// misaligned access, ...): every later call fails the same way, a fresh
    /// [`Gpu::open`](crate::Gpu::open) and a reset of the primary context
    /// too (seen on an H200, driver 580). Work that must go on after one
    /// runs in a child process.
    pub fn is_sticky(&self) -> bool {
        const STICKY: [&str; 9] = [
            "CUDA_ERROR_ILLEGAL_ADDRESS",
            "CUDA_ERROR_LAUNCH_FAILED",
            "CUDA_ERROR_HARDWARE_STACK_ERROR",
            "CUDA_ERROR_ILLEGAL_INSTRUCTION",
            "CUDA_ERROR_MISALIGNED_ADDRESS",
            "CUDA_ERROR_INVALID_ADDRESS_SPACE",
            "CUDA_ERROR_INVALID_PC",
            "CUDA_ERROR_ASSERT",
            "CUDA_ERROR_LAUNCH_TIMEOUT",
        ];
        self.driver_error_name()
            .is_some_and(|code| STICKY.contains(&code))
    }

    /// A request refused before it reached the driver.
    pub(crate) fn invalid(during: impl Into<String>, reason: impl Into<String>) -> CudaError {
        CudaError::Invalid {
            during: during.into(),
            reason: reason.into(),
        }
    }

    /// This error with `log` (a JIT log) attached, when it is a driver error.
    pub(crate) fn with_log(mut self, text: &str) -> CudaError {
        if let CudaError::Driver { log, .. } = &mut self {
            *log = text.trim_end().to_string();
        }
        self
    }

    /// The driver's name for the error (`CUDA_ERROR_...`) when a driver call failed.
    pub fn driver_error_name(&self) -> Option<&str> {
        match self {
            CudaError::Driver { code, .. } => Some(code),
            _ => None,
        }
    }

    /// Whether this error means there is no CUDA here at all (no driver, or no device), as
    /// opposed to a failure of something the program asked for.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, CudaError::NoDriver | CudaError::NoDevice { .. })
    }
}

impl fmt::Display for CudaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CudaError::NoDriver => {
                f.write_str("no CUDA driver found (libcuda.so could not be loaded)")
            }
            CudaError::NoDevice { detail } => write!(f, "no CUDA device available: {detail}"),
            CudaError::Driver {
                during,
                code,
                description,
                log,
            } => {
                write!(f, "{during}: {code}")?;
                if !description.is_empty() {
                    write!(f, " ({description})")?;
                }
                if !log.is_empty() {
                    write!(f, "\n{log}")?;
                }
                Ok(())
            }
            CudaError::Invalid { during, reason } => write!(f, "{during}: {reason}"),
        }
    }
}

impl std::error::Error for CudaError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_operation() {
        let e = CudaError::Driver {
            during: "launching kernel `k0_row` (grid [4, 1, 1], block [256, 1, 1], 0 bytes shared)"
                .into(),
            code: "CUDA_ERROR_ILLEGAL_ADDRESS".into(),
            description: "an illegal memory access was encountered".into(),
            log: String::new(),
        };
        assert_eq!(
            e.to_string(),
            "launching kernel `k0_row` (grid [4, 1, 1], block [256, 1, 1], 0 bytes shared): \
             CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)"
        );
        assert_eq!(e.driver_error_name(), Some("CUDA_ERROR_ILLEGAL_ADDRESS"));
        assert!(!e.is_unavailable());
        let jit = e.with_log("ptxas application ptx input, line 9; error   : bad\n");
        assert!(jit
            .to_string()
            .ends_with("\nptxas application ptx input, line 9; error   : bad"));
    }

    #[test]
    fn unavailable_errors() {
        assert_eq!(
            CudaError::NoDriver.to_string(),
            "no CUDA driver found (libcuda.so could not be loaded)"
        );
        assert!(CudaError::NoDriver.is_unavailable());
        let e = CudaError::invalid("uploading 3 bytes", "too small");
        assert_eq!(e.to_string(), "uploading 3 bytes: too small");
        assert!(e.driver_error_name().is_none());
    }
}

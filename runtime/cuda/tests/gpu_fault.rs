//! A kernel that faults: its own test binary (own process), because a fault leaves the CUDA
//! device unusable for the rest of the process. Skips without a GPU.

use tessera_cuda::Gpu;

#[test]
fn a_fault_names_the_kernel_that_caused_it() {
    if !Gpu::available() {
        eprintln!("note: no CUDA device here, skipping the fault test");
        return;
    }
    let gpu = Gpu::open().unwrap();
    let module = gpu.module(include_str!("ptx/fault.ptx")).unwrap();
    gpu.launch(&module, "write_null", [1, 1, 1], [1, 1, 1], 0, &[])
        .unwrap();
    let err = gpu.synchronize().unwrap_err();
    let message = err.to_string();
    eprintln!("note: fault: {message}");
    assert!(
        message.starts_with(
            "synchronizing the stream (after launching kernel `write_null` (grid [1, 1, 1], block [1, 1, 1], 0 bytes shared)): CUDA_ERROR_"
        ),
        "{message}"
    );
    assert!(err.driver_error_name().is_some());
    assert!(err.is_sticky(), "{message}");
}

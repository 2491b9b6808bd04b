//! Device tests. Those that need a CUDA GPU are `#[ignore]`d, so that a run
//! on a machine without one counts them as ignored rather than passed; on a
//! machine with one, run them with
//! `cargo test -p tessera-cuda --test gpu -- --ignored` (or the test
//! binary, built here with `--no-run`, with `--ignored` there).
//!
//! The kernels are hand-written PTX under `tests/ptx/` (also assembled by ptxas in
//! `tests/ptxas.rs`).

use std::sync::Arc;

use tessera_cuda::{CudaError, Gpu, KernelArg};
use tessera_tensor::{Dtype, Tensor};

const ADD_ONE: &str = include_str!("ptx/add_one.ptx");
const SMEM_ROTATE: &str = include_str!("ptx/smem_rotate.ptx");

/// The device; a test that asked for it fails without one.
fn gpu(test: &str) -> Gpu {
    Gpu::open().unwrap_or_else(|e| panic!("{test} needs a CUDA GPU ({e})"))
}

fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn f32_values(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

#[test]
fn open_without_a_device_is_an_error_not_a_panic() {
    match Gpu::open() {
        Ok(gpu) => {
            assert!(Gpu::available());
            let (major, _) = gpu.compute_capability();
            assert!(major >= 5, "{}", gpu.name());
            eprintln!(
                "note: opened {} ({}, {} SMs, {} bytes opt-in shared memory per block)",
                gpu.name(),
                gpu.arch(),
                gpu.multiprocessor_count(),
                gpu.max_shared_per_block_optin()
            );
        }
        Err(err) => {
            assert!(!Gpu::available());
            assert!(err.is_unavailable(), "{err}");
            let message = err.to_string();
            assert!(message.starts_with("no CUDA"), "{message}");
            eprintln!("note: Gpu::open() here: {message}");
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with --ignored on a machine with one"]
fn add_one_kernel() {
    let gpu = gpu("add_one_kernel");
    let module = gpu.module(ADD_ONE).unwrap();
    assert!(module.has_kernel("add_one"));
    assert!(!module.has_kernel("nope"));

    // n is not a multiple of the block size, and the buffer has 5 extra elements past n that
    // the bounds check must leave alone.
    let n = 1000u32;
    let host: Vec<f32> = (0..n + 5).map(|i| i as f32 * 0.5 - 7.0).collect();
    let buf = gpu.upload(&f32_bytes(&host)).unwrap();
    let block = 256u32;
    let grid = n.div_ceil(block);
    gpu.launch(
        &module,
        "add_one",
        [grid, 1, 1],
        [block, 1, 1],
        0,
        &[KernelArg::Buffer(&buf), KernelArg::U32(n)],
    )
    .unwrap();
    gpu.synchronize().unwrap();
    let out = f32_values(&gpu.download(&buf).unwrap());
    for (i, (&got, &was)) in out.iter().zip(&host).enumerate() {
        let want = if (i as u32) < n { was + 1.0 } else { was };
        assert_eq!(got, want, "element {i}");
    }

    let attrs = module.kernel_attributes("add_one").unwrap();
    assert!(attrs.registers > 0 && attrs.registers < 64, "{attrs:?}");
    assert_eq!(attrs.local_bytes, 0);
}

#[test]
#[ignore = "needs a CUDA GPU: run with --ignored on a machine with one"]
fn modules_are_cached_by_text() {
    let gpu = gpu("modules_are_cached_by_text");
    let a = gpu.module(ADD_ONE).unwrap();
    let copy: String = ADD_ONE.chars().collect();
    let b = gpu.module(&copy).unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    // Another handle on the same device shares the process cache.
    let other = Gpu::open().unwrap();
    assert!(Arc::ptr_eq(&a, &other.module(ADD_ONE).unwrap()));
    let c = gpu
        .module(&format!("{ADD_ONE}\n// a different text\n"))
        .unwrap();
    assert!(!Arc::ptr_eq(&a, &c));
    assert_ne!(a.hash(), c.hash());
}

#[test]
#[ignore = "needs a CUDA GPU: run with --ignored on a machine with one"]
fn jit_errors_carry_the_driver_log() {
    let gpu = gpu("jit_errors_carry_the_driver_log");
    let bad = ADD_ONE.replace(
        "add.f32             %f2, %f1, 0f3F800000;",
        "add.f32 %f2, %f1, %nope;",
    );
    let err = gpu.module(&bad).unwrap_err();
    let message = err.to_string();
    eprintln!("note: JIT error: {message}");
    assert!(message.starts_with("loading a PTX module"), "{message}");
    assert!(err.driver_error_name().is_some(), "{message}");
    assert!(
        message.contains("nope"),
        "the JIT log names the bad operand: {message}"
    );
}

#[test]
#[ignore = "needs a CUDA GPU: run with --ignored on a machine with one"]
fn launch_errors_name_the_kernel_and_check_arguments() {
    let gpu = gpu("launch_errors_name_the_kernel_and_check_arguments");
    let module = gpu.module(ADD_ONE).unwrap();
    let buf = gpu.alloc_zeroed(64).unwrap();

    let err = gpu
        .launch(&module, "missing", [1, 1, 1], [32, 1, 1], 0, &[])
        .unwrap_err();
    assert!(err.to_string().contains("kernel `missing`"), "{err}");

    let err = gpu
        .launch(
            &module,
            "add_one",
            [1, 1, 1],
            [2048, 1, 1],
            0,
            &[KernelArg::Buffer(&buf), KernelArg::U32(16)],
        )
        .unwrap_err();
    assert!(
        err.to_string().starts_with(
            "launching kernel `add_one` (grid [1, 1, 1], block [2048, 1, 1], 0 bytes shared)"
        ),
        "{err}"
    );

    // The driver reports parameter sizes from CUDA 12.4 on; then a wrong argument list is
    // refused before launch instead of reading garbage.
    match gpu.launch(
        &module,
        "add_one",
        [1, 1, 1],
        [32, 1, 1],
        0,
        &[KernelArg::Buffer(&buf)],
    ) {
        Err(CudaError::Invalid { reason, .. }) => {
            assert_eq!(
                reason,
                "the kernel takes 2 parameters but 1 arguments were given"
            )
        }
        other => {
            eprintln!("note: this driver cannot check kernel parameters: {other:?}");
            gpu.synchronize().unwrap();
        }
    }
    if let Err(err) = gpu.launch(
        &module,
        "add_one",
        [1, 1, 1],
        [32, 1, 1],
        0,
        &[KernelArg::Buffer(&buf), KernelArg::U64(16)],
    ) {
        assert!(
            err.to_string()
                .contains("parameter 1 of the kernel is 4 bytes"),
            "{err}"
        );
    }

    // Too much shared memory is refused with the device's limit in the message.
    let too_much = gpu.max_shared_per_block_optin() + 1;
    let err = gpu
        .launch(
            &module,
            "add_one",
            [1, 1, 1],
            [32, 1, 1],
            too_much,
            &[KernelArg::Buffer(&buf), KernelArg::U32(16)],
        )
        .unwrap_err();
    assert!(err.to_string().contains("at most"), "{err}");

    // Buffers of another handle are refused.
    let other = Gpu::open().unwrap();
    let foreign = other.alloc_zeroed(64).unwrap();
    let err = gpu
        .launch(
            &module,
            "add_one",
            [1, 1, 1],
            [32, 1, 1],
            0,
            &[KernelArg::Buffer(&foreign), KernelArg::U32(16)],
        )
        .unwrap_err();
    assert!(err.to_string().contains("another `Gpu`"), "{err}");
    gpu.synchronize().unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU: run with --ignored on a machine with one"]
fn dynamic_shared_memory_above_48_kib() {
    let gpu = gpu("dynamic_shared_memory_above_48_kib");
    let module = gpu.module(SMEM_ROTATE).unwrap();
    let threads = 256u32;
    for smem_bytes in [4 * 1024u32, 96 * 1024, gpu.max_shared_per_block_optin()] {
        if smem_bytes > gpu.max_shared_per_block_optin() {
            continue;
        }
        let out = gpu.alloc_zeroed(threads as usize * 4).unwrap();
        gpu.launch(
            &module,
            "smem_rotate",
            [1, 1, 1],
            [threads, 1, 1],
            smem_bytes,
            &[KernelArg::Buffer(&out), KernelArg::U32(smem_bytes)],
        )
        .unwrap();
        let bytes = gpu.download(&out).unwrap();
        for t in 0..threads {
            let got = u32::from_le_bytes(bytes[t as usize * 4..][..4].try_into().unwrap());
            assert_eq!(
                got,
                3 * ((t + 1) % threads) + 7,
                "thread {t}, {smem_bytes} bytes"
            );
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with --ignored on a machine with one"]
fn buffers_and_tensors_round_trip() {
    let gpu = gpu("buffers_and_tensors_round_trip");
    let empty = gpu.upload(&[]).unwrap();
    assert!(empty.is_empty());
    assert!(gpu.download(&empty).unwrap().is_empty());

    let zeros = gpu.alloc_zeroed(4097).unwrap();
    assert!(gpu.download(&zeros).unwrap().iter().all(|&b| b == 0));

    let mut buf = gpu.alloc_bytes(8).unwrap();
    gpu.write(&mut buf, &[1, 2, 3]).unwrap();
    let mut head = [0u8; 3];
    gpu.read_into(&buf, &mut head).unwrap();
    assert_eq!(head, [1, 2, 3]);
    assert!(gpu.write(&mut buf, &[0; 9]).is_err());
    gpu.fill_zero(&mut buf).unwrap();
    assert_eq!(gpu.download(&buf).unwrap(), [0; 8]);

    for dtype in Dtype::ALL {
        let t = Tensor::from_fn(dtype, &[3, 5], |i| i as f64 * 0.75 - 4.0).unwrap();
        let dev = gpu.upload_tensor(&t).unwrap();
        assert_eq!(dev.len(), 15 * dtype.size_bytes() as usize);
        assert_eq!(
            gpu.download_tensor(&dev, dtype, &[3, 5]).unwrap(),
            t,
            "{dtype}"
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with --ignored on a machine with one"]
fn timing_with_events() {
    let gpu = gpu("timing_with_events");
    let module = gpu.module(ADD_ONE).unwrap();
    let n = 1u32 << 22;
    let buf = gpu.alloc_zeroed(n as usize * 4).unwrap();
    let reps = 10;
    let ms = gpu
        .time(|| {
            for _ in 0..reps {
                gpu.launch(
                    &module,
                    "add_one",
                    [n / 256, 1, 1],
                    [256, 1, 1],
                    0,
                    &[KernelArg::Buffer(&buf), KernelArg::U32(n)],
                )?;
            }
            Ok(())
        })
        .unwrap();
    let wall = gpu.time_wall(|| Ok(())).unwrap();
    eprintln!("note: {reps} add_one launches over {n} floats: {ms:.4} ms (events), empty wall {wall:.4} ms");
    assert!(ms > 0.0 && ms < 10_000.0, "{ms}");
    let out = f32_values(&gpu.download(&buf).unwrap());
    assert!(out.iter().all(|&x| x == reps as f32));
}

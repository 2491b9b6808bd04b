//! The programs of `tests/run/ok` that exercise the GPU path's harder
//! corners print the same on the CPU backend and on the simulator (the
//! NVIDIA path without a GPU): `tsrc run FILE --backend cpu|sim`.

mod support;

use std::path::Path;
use support::{example, tsrc};

/// Bitwise operators, shifts past the width and narrow integers wrapping
/// after each operation print the same on the CPU and on the simulator
/// (`tests/run/ok/bitwise.tsr`; the PTX path held int8 sums unwrapped in
/// 32-bit registers until the store).
#[test]
fn bitwise_operators_and_narrow_integers_agree_on_cpu_and_sim() {
    let cpu = agreed("../tests/run/ok/bitwise.tsr");
    assert!(
        cpu.contains("[ 0,  3,  6, -7, -4, -1,  2,  5, -8, -5]"),
        "{cpu}"
    );
}

/// What the example at `path` prints on the cpu, checked to be what it
/// prints on the simulator.
fn agreed(path: &str) -> String {
    let file = example(path);
    let cpu = printed(&file, "cpu");
    assert_eq!(cpu, printed(&file, "sim"), "{path}: cpu and sim differ");
    cpu
}

/// What `tsrc run FILE --backend BACKEND` prints, which must succeed.
fn printed(file: &Path, backend: &str) -> String {
    let o = tsrc()
        .arg("run")
        .arg(file)
        .args(["--backend", backend])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{backend}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// Atomics (`atomic_add` into a histogram, float sums, bit-ordered float
/// maxima and minima, int64 and fp64) give the same values on the cpu and
/// the simulator, whose blocks run on several host threads.
#[test]
fn atomics_agree_on_cpu_and_sim() {
    let cpu = agreed("../tests/run/ok/atomics.tsr");
    // 300 values counted once each.
    assert!(cpu.contains("[83, 67, 57, 42, 22, 17,  7,  5]"), "{cpu}");
    // A sum past 2^31 in int64.
    assert!(cpu.contains("[2047879808, 1975405824]"), "{cpu}");
}

/// Scatter-adds in ops (scatter_add, index_add, bincount) agree on the cpu
/// and the simulator and add every index naming one place.
#[test]
fn scatter_adds_agree_on_cpu_and_sim() {
    let cpu = agreed("../tests/run/ok/scatter.tsr");
    assert!(cpu.contains("[67, 45, 34, 32,  9,  8,  2,  3]"), "{cpu}");
    assert!(cpu.contains("[[3.0000, 3.0000],"), "{cpu}");
}

/// Run-time branches and early exits in kernels (an else-if chain, an
/// `if` around a tensor-core product in a loop, `return` nested in a
/// branch) and loops to a run-time length agree on the cpu and the
/// simulator, and compute what the kernels say.
#[test]
fn run_time_control_flow_in_kernels_agrees_on_cpu_and_sim() {
    let cpu = agreed("../tests/run/ok/kernel_branches.tsr");
    assert_eq!(cpu.matches("true").count(), 6, "{cpu}");
    assert!(
        cpu.contains(" [ 0.0000,  0.0000,  0.0000,  0.0000,  0.0000]]"),
        "{cpu}"
    );
    let cpu = agreed("../tests/run/ok/kernel_scalar_params.tsr");
    assert!(
        cpu.contains("[2.0000, 2.0000, 2.0000, 2.0000, 3.0000"),
        "{cpu}"
    );
    assert!(cpu.contains("[5, 5, 5, 5, 5, 5, 5, 5]"), "{cpu}");
    let cpu = agreed("../tests/run/ok/kernel_index_broadcast.tsr");
    assert_eq!(cpu.matches("true").count(), 2, "{cpu}");
    let cpu = agreed("../tests/run/ok/kernel_varlen.tsr");
    assert_eq!(cpu.matches("true").count(), 2, "{cpu}");
    assert!(cpu.contains("127.0000"), "{cpu}");
}

/// Grouped, depthwise, dilated, strided and 1-D convolutions agree on the
/// cpu and the simulator, and with their definitions (one conv2d per
/// group, a kernel with a hole for a dilated one).
#[test]
fn grouped_and_dilated_convolutions_agree_on_cpu_and_sim() {
    let cpu = agreed("../tests/run/ok/conv_groups.tsr");
    assert_eq!(cpu.matches("true").count(), 3, "{cpu}");
}

/// `prod` in ops (one axis, a list, keepdims, integers wrapping) and in a
/// kernel gives the same on the cpu and the simulator.
#[test]
fn products_agree_on_cpu_and_sim() {
    let cpu = agreed("../tests/run/ok/prod.tsr");
    assert!(cpu.starts_with("true"), "{cpu}");
    assert!(cpu.contains("[72, 16, 72]"), "{cpu}");
}

/// The maximum and minimum of booleans (reductions of a bool tile, and
/// `maximum`/`minimum` of bool tensors in ops and kernels) run on the
/// simulator as on the cpu (the PTX had `max.pred`, which ptxas rejects).
#[test]
fn boolean_extremes_agree_on_cpu_and_sim() {
    let cpu = agreed("../tests/run/ok/bool_extremes.tsr");
    assert!(cpu.contains("[ true,  true, false,  true"), "{cpu}");
}

/// `unsqueeze` and `squeeze` on tiles in a kernel (`unsqueeze` passed
/// check and failed to lower there), and in ops, with `any`/`all`, give
/// the same on the cpu and the simulator.
#[test]
fn squeezes_agree_on_cpu_and_sim() {
    let cpu = agreed("../tests/run/ok/squeeze_any_all.tsr");
    assert!(
        cpu.contains("[2.0000, 2.0000, 2.0000, 2.0000, 2.0000]"),
        "{cpu}"
    );
}

/// `sort`, `argsort`, a `topk` past 64 picks and top-p filtering give the
/// same on the cpu and the simulator.
#[test]
fn sorts_agree_on_cpu_and_sim() {
    let cpu = agreed("../tests/run/ok/sort.tsr");
    // The stable ascending order of a row holding -0.0 twice.
    assert!(cpu.contains("[6, 5, 3, 0, 2, 4, 1]"), "{cpu}");
}

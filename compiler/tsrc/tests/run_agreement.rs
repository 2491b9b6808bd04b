//! The programs of `tests/run/ok` that exercise the GPU path's harder
//! corners print the same on the CPU backend and on the simulator (the
//! NVIDIA path without a GPU): `tsrc run FILE --backend cpu|sim`.

mod support;

use std::path::Path;
use support::{example, run_path, tsrc};
use tessera_tensor::{randn, write_npy_file, Dtype, Tensor};

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

/// Kernels with `inout` tensors (a KV-cache append, an optimizer step
/// updating weights and velocity, chained updates done in place) print the
/// same on the CPU and on the simulator, and the arguments are unchanged.
#[test]
fn inout_kernels_agree_on_cpu_and_sim() {
    let cpu = agreed("../tests/run/ok/kernel_inout.tsr");
    assert!(cpu.contains("[10.0000, 11.0000, 12.0000]]]"), "{cpu}");
    assert!(cpu.contains("[1, 1, 3, 3, 5, 5, 7]"), "{cpu}");
    assert!(cpu.contains("[103, 103, 102, 102]"), "{cpu}");
    assert!(
        cpu.contains("[0.5825, 1.5825, 2.5825, 3.5825, 4.5825"),
        "{cpu}"
    );
}

/// `--entry` runs a kernel with an `inout` tensor: its input file is the
/// tensor's start, `out.npy` the updated one (new rows at each batch's
/// position, every other row as it was), on the CPU and on the simulator.
#[test]
fn an_inout_entry_updates_its_input() {
    let dir = std::env::temp_dir().join(format!("tessera-inout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (new, pos, cache) = (
        dir.join("new.npy"),
        dir.join("pos.npy"),
        dir.join("cache.npy"),
    );
    let t_new = randn(Dtype::Fp32, &[2, 2, 3], 5).unwrap();
    let t_cache = randn(Dtype::Fp32, &[2, 6, 3], 6).unwrap();
    write_npy_file(&new, &t_new).unwrap();
    write_npy_file(
        &pos,
        &Tensor::from_f64(Dtype::Int32, &[2], &[4.0, 1.0]).unwrap(),
    )
    .unwrap();
    write_npy_file(&cache, &t_cache).unwrap();
    let mut want = t_cache.to_f64_vec();
    let fresh = t_new.to_f64_vec();
    for (b, p) in [(0, 4), (1, 1)] {
        let rows = (b * 6 + p) * 3..(b * 6 + p + 2) * 3;
        want[rows].copy_from_slice(&fresh[b * 6..b * 6 + 6]);
    }
    let file = example("../tests/run/ok/kernel_inout.tsr");
    let inputs = [("new", new), ("pos", pos), ("cache", cache)];
    for backend in ["cpu", "sim"] {
        let got = run_path(&dir, &file, "kv_append", &inputs, backend);
        assert_eq!(got, want, "{backend}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// sort, argsort and topk of integers print the same on the CPU and on
/// the simulator, int32's least and greatest values among them.
#[test]
fn integer_rankings_agree_on_cpu_and_sim() {
    let cpu = agreed("../tests/run/ok/sort_integers.tsr");
    assert!(
        cpu.contains("[ 0,  5, 10,  3,  8,  1,  6, 11,  4,  9,  2,  7]"),
        "{cpu}"
    );
    assert!(
        cpu.contains("[[-2147483648, -2147483648, -2147483648,  2147483647,  2147483647]]"),
        "{cpu}"
    );
}

/// log1p of +inf and pow of -inf to non-integers follow C on the CPU
/// and on the simulator alike.
#[test]
fn special_values_agree_on_cpu_and_sim() {
    let cpu = agreed("../tests/run/ok/special_values.tsr");
    assert!(cpu.contains("[inf, inf, inf]"), "{cpu}");
    assert!(cpu.contains("[0.0000, 0.0000]"), "{cpu}");
    assert!(cpu.contains("[-0.0000, -0.0000]"), "{cpu}");
}

/// Bottom-right causal attention (flash-attn's alignment: decode, a chunk
/// of new queries, more queries than keys) matches its mask written out,
/// on the CPU and on the simulator.
#[test]
fn bottom_right_attention_agrees_on_cpu_and_sim() {
    let cpu = agreed("../tests/run/ok/attention_bottom_right.tsr");
    assert_eq!(cpu.matches("true").count(), 4, "{cpu}");
    assert!(cpu.contains("[0.0000, 0.0000, 0.0000, 0.0000]"), "{cpu}");
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

/// `sort`, `argsort`, a `topk` past 16 picks and top-p filtering give the
/// same on the cpu and the simulator.
#[test]
fn sorts_agree_on_cpu_and_sim() {
    let cpu = agreed("../tests/run/ok/sort.tsr");
    // The stable ascending order of a row holding -0.0 twice.
    assert!(cpu.contains("[6, 5, 3, 0, 2, 4, 1]"), "{cpu}");
}

/// `sort` and `argsort` on tiles in kernels (a line of 100 padded to 128
/// by the PTX) give the same on the cpu and the simulator, and agree with
/// the op-level sorts.
#[test]
fn kernel_sorts_agree_on_cpu_and_sim() {
    let cpu = agreed("../tests/run/ok/kernel_sort.tsr");
    assert!(!cpu.contains("false"), "{cpu}");
}

/// fp64 NaN propagates through max, min, argmin, maximum, cummax and topk
/// on the simulator as on the cpu (f64 `max` on the GPU drops a NaN), and
/// signed zeros order alike (-0.0 below +0.0; topk's values are x[i]).
#[test]
fn extremes_of_special_values_agree_on_cpu_and_sim() {
    let cpu = agreed("../tests/run/ok/extremes_special_values.tsr");
    assert!(cpu.contains("[nan, nan]"), "{cpu}");
    assert!(cpu.contains("[[   -inf,     inf, -1.0000]]"), "{cpu}");
}

/// A masked integer divisor read without `other` divides its turned-off
/// lanes by 1 on the simulator as on the cpu (neither faults on the tail
/// of the last program), and the quotients and remainders agree.
#[test]
fn masked_integer_division_agrees_on_cpu_and_sim() {
    let cpu = agreed("../tests/run/ok/masked_int_division.tsr");
    assert!(cpu.contains("[ 60,  53,  47,  42, 393]"), "{cpu}");
    assert!(cpu.contains("true"), "{cpu}");
}

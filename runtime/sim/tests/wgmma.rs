//! `wgmma.mma_async` on the simulator: a warpgroup's 64×8 tile from
//! operands in the no-swizzle canonical layout, computed right, and each
//! misuse of its asynchrony reported.

use tessera_ptx::read_module;
use tessera_sim::{Sim, SimErrorKind};

fn a_val(m: usize, k: usize) -> f32 {
    ((m * 3 + k) % 7) as f32 - 3.0
}

fn b_val(k: usize, n: usize) -> f32 {
    ((k + 2 * n) % 5) as f32 - 2.0
}

fn bf16(x: f32) -> [u8; 2] {
    ((x.to_bits() >> 16) as u16).to_le_bytes()
}

/// A (64×16) and B (16×8, stored n by n) in 8×16-byte core matrices:
/// A's (m, k) at (m / 8)·256 + (k / 8)·128 + (m % 8)·16 + (k % 8)·2, B's
/// (k, n) at 2048 + (k / 8)·128 + n·16 + (k % 8)·2.
fn operands() -> Vec<u8> {
    let mut bytes = vec![0u8; 2048 + 256];
    for m in 0..64 {
        for k in 0..16 {
            let at = (m / 8) * 256 + (k / 8) * 128 + (m % 8) * 16 + (k % 8) * 2;
            bytes[at..at + 2].copy_from_slice(&bf16(a_val(m, k)));
        }
    }
    for k in 0..16 {
        for n in 0..8 {
            let at = 2048 + (k / 8) * 128 + n * 16 + (k % 8) * 2;
            bytes[at..at + 2].copy_from_slice(&bf16(b_val(k, n)));
        }
    }
    bytes
}

/// The kernel: copy the operands to shared memory (word `t` and every
/// 128th after it), build the descriptors (LBO 128, SBO 256, no swizzle),
/// one wgmma, and store the accumulators row-major into `out`. `issue`
/// replaces the fence-issue-commit-wait sequence, `threads` the block.
fn kernel(issue: &str) -> tessera_ptx::Module {
    let mut copy = String::new();
    for i in 0..5 {
        copy += &format!(
            "\tadd.u32 %r5, %r0, {w};\n\
             \tsetp.lt.u32 %p1, %r5, 576;\n\
             \tmul.lo.u32 %r6, %r5, 4;\n\
             \tcvt.u64.u32 %rd5, %r6;\n\
             \tadd.s64 %rd6, %rd1, %rd5;\n\
             \tadd.u32 %r7, %r1, %r6;\n\
             \t@%p1 ld.global.u32 %r8, [%rd6];\n\
             \t@%p1 st.shared.u32 [%r7], %r8;\n",
            w = 128 * i
        );
    }
    let text = format!(
        ".version 8.0\n.target sm_90a\n.address_size 64\n.file 1 \"wg.tsr\"\n\
         .extern .shared .align 1024 .b8 tsr_smem[];\n\n\
         .visible .entry k(\n\t.param .u64 a,\n\t.param .u64 out\n)\n.maxntid 128, 1, 1\n{{\n\
         \t.reg .pred %p<4>;\n\t.reg .b32 %r<16>;\n\t.reg .b64 %rd<16>;\n\t.reg .f32 %d<4>;\n\t.reg .f32 %f<4>;\n\
         \tld.param.u64 %rd1, [a];\n\
         \tld.param.u64 %rd2, [out];\n\
         \tmov.u32 %r0, %tid.x;\n\
         \tmov.u32 %r1, tsr_smem;\n\
         \t.loc 1 3 1\n\
         {copy}\
         \tfence.proxy.async.shared::cta;\n\
         \tbar.sync 0;\n\
         \tshr.u32 %r2, %r1, 4;\n\
         \tcvt.u64.u32 %rd3, %r2;\n\
         \tor.b64 %rd3, %rd3, 68720001024;\n\
         \tadd.s64 %rd4, %rd3, 128;\n\
         \tmov.f32 %d0, 0f00000000;\n\tmov.f32 %d1, 0f00000000;\n\
         \tmov.f32 %d2, 0f00000000;\n\tmov.f32 %d3, 0f00000000;\n\
         \t.loc 1 7 5\n\
         {issue}\
         \tshr.u32 %r3, %r0, 5;\n\
         \tand.b32 %r4, %r0, 31;\n\
         \tshr.u32 %r9, %r4, 2;\n\
         \tmad.lo.u32 %r10, %r3, 16, %r9;\n\
         \tand.b32 %r11, %r4, 3;\n\
         \tmul.lo.u32 %r11, %r11, 2;\n\
         \tmad.lo.u32 %r12, %r10, 8, %r11;\n\
         \tmul.lo.u32 %r12, %r12, 4;\n\
         \tcvt.u64.u32 %rd7, %r12;\n\
         \tadd.s64 %rd8, %rd2, %rd7;\n\
         \tst.global.f32 [%rd8], %d0;\n\
         \tst.global.f32 [%rd8+4], %d1;\n\
         \tst.global.f32 [%rd8+256], %d2;\n\
         \tst.global.f32 [%rd8+260], %d3;\n\
         \tret;\n}}\n"
    );
    read_module(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

const WGMMA: &str = "\twgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%d0, %d1, %d2, %d3}, %rd3, %rd4, 1, 1, 1, 0, 0;\n";

fn issue(before_commit: &str, before_wait: &str) -> String {
    format!(
        "\twgmma.fence.sync.aligned;\n{WGMMA}{before_commit}\
         \twgmma.commit_group.sync.aligned;\n{before_wait}\
         \twgmma.wait_group.sync.aligned 0;\n"
    )
}

fn launch(m: &tessera_ptx::Module, threads: u32) -> Result<Vec<f32>, tessera_sim::SimError> {
    let sim = Sim::new();
    let a = sim.alloc(2304);
    sim.write(a, &operands()).unwrap();
    let out = sim.alloc(64 * 8 * 4);
    sim.launch(m, "k", [1, 1, 1], [threads, 1, 1], 4096, &[a, out])?;
    let bytes = sim.read(out, 64 * 8 * 4).unwrap();
    Ok(bytes
        .chunks(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

#[test]
fn a_warpgroup_tile_is_the_product() {
    let out = launch(&kernel(&issue("", "")), 128).unwrap();
    for m in 0..64 {
        for n in 0..8 {
            let want: f32 = (0..16).map(|k| a_val(m, k) * b_val(k, n)).sum();
            assert_eq!(out[m * 8 + n], want, "({m}, {n})");
        }
    }
}

fn fails(body: &str, threads: u32, needle: &str) {
    let e = launch(&kernel(body), threads).expect_err("the check must fire");
    let text = e.to_string();
    assert_eq!(e.kind, SimErrorKind::Async, "{text}");
    assert!(text.contains(needle), "`{needle}` not in:\n{text}");
    assert!(text.contains("wg.tsr:7:5"), "no source line in:\n{text}");
}

#[test]
fn reading_an_accumulator_in_flight_is_an_error() {
    fails(
        &issue("", "\tadd.rn.f32 %f0, %d1, %d1;\n"),
        128,
        "accumulator of a wgmma.mma_async still in flight",
    );
}

#[test]
fn overwriting_an_operand_in_flight_is_an_error() {
    fails(
        &issue("\tst.shared.u32 [%r1+2048], %r0;\n", ""),
        128,
        "a wgmma.mma_async still in flight",
    );
}

#[test]
fn a_wgmma_without_a_fence_is_an_error() {
    let body =
        format!("{WGMMA}\twgmma.commit_group.sync.aligned;\n\twgmma.wait_group.sync.aligned 0;\n");
    fails(&body, 128, "without a wgmma.fence");
}

#[test]
fn a_block_of_part_of_a_warpgroup_is_an_error() {
    fails(&issue("", ""), 64, "whole warpgroups");
}

//! The simulator's checks, each proven by a deliberately broken kernel in
//! hand-written PTX, and a clean kernel that computes the right thing.

use tessera_ptx::read_module;
use tessera_sim::{Options, Sim, SimErrorKind};

/// A module with one kernel `k(.param .u64 a)` whose body is `body`; the
/// registers it may use are declared here.
fn kernel(body: &str) -> tessera_ptx::Module {
    let text = format!(
        ".version 8.0\n.target sm_90\n.address_size 64\n.file 1 \"broken.tsr\"\n\
         .extern .shared .align 16 .b8 tsr_smem[];\n\n\
         .visible .entry k(\n\t.param .u64 a\n)\n.maxntid 64, 1, 1\n{{\n\
         \t.reg .pred %p<4>;\n\t.reg .b32 %r<8>;\n\t.reg .b64 %rd<8>;\n\t.reg .f32 %f<4>;\n\t.reg .f32 %acc<4>;\n\t.reg .b32 %ab<6>;\n\
         \t// shared s: bytes 0..256 of tsr_smem\n{body}}}\n"
    );
    read_module(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// The common prologue: `%rd1` = buffer `a`, `%r0` = tid, `%r1` = the
/// shared base, `%r2` = the shared address of word tid; then `.loc` line 7.
fn prologue() -> &'static str {
    "\tld.param.u64 %rd1, [a];\n\
     \tmov.u32 %r0, %tid.x;\n\
     \tmov.u32 %r1, tsr_smem;\n\
     \tmad.lo.u32 %r2, %r0, 4, %r1;\n\
     \t.loc 1 7 5\n"
}

/// Launches `k` with 64 threads, one block, on a buffer of `floats` f32s.
fn launch(m: &tessera_ptx::Module, floats: usize) -> Result<Vec<f32>, tessera_sim::SimError> {
    let sim = Sim::new();
    let a = sim.alloc(floats * 4);
    let init: Vec<u8> = (0..floats).flat_map(|i| (i as f32).to_le_bytes()).collect();
    sim.write(a, &init).unwrap();
    sim.launch(m, "k", [1, 1, 1], [64, 1, 1], 256, &[a])?;
    let out = sim.read(a, floats * 4).unwrap();
    Ok(out
        .chunks(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

fn fails(body: &str, floats: usize, kind: SimErrorKind, needle: &str) {
    let m = kernel(&format!("{}{body}\tret;\n", prologue()));
    let e = launch(&m, floats).expect_err("the check must fire");
    let text = e.to_string();
    assert_eq!(e.kind, kind, "{text}");
    assert!(text.contains(needle), "`{needle}` not in:\n{text}");
    assert!(
        text.contains("kernel `k`, block (0, 0, 0), thread"),
        "{text}"
    );
    assert!(
        text.contains("broken.tsr:7:5"),
        "no source line in:\n{text}"
    );
}

#[test]
fn a_clean_kernel_computes_and_passes_every_check() {
    // a[t] = 2 * a[63 - t], exchanged through shared memory.
    let m = kernel(&format!(
        "{}\tcvt.u64.u32 %rd2, %r0;\n\
         \tmad.lo.u64 %rd3, %rd2, 4, %rd1;\n\
         \tld.global.f32 %f0, [%rd3];\n\
         \tst.shared.f32 [%r2], %f0;\n\
         \tbar.sync 0;\n\
         \tsub.u32 %r3, 63, %r0;\n\
         \tmad.lo.u32 %r4, %r3, 4, %r1;\n\
         \tld.shared.f32 %f1, [%r4];\n\
         \tadd.rn.f32 %f2, %f1, %f1;\n\
         \tst.global.f32 [%rd3], %f2;\n\
         \tret;\n",
        prologue()
    ));
    let out = launch(&m, 64).unwrap();
    let want: Vec<f32> = (0..64).map(|t| 2.0 * (63 - t) as f32).collect();
    assert_eq!(out, want);
}

#[test]
fn global_reads_past_the_end_fault() {
    fails(
        "\tcvt.u64.u32 %rd2, %r0;\n\tmad.lo.u64 %rd3, %rd2, 4, %rd1;\n\tld.global.f32 %f0, [%rd3];\n",
        32,
        SimErrorKind::OutOfBounds,
        "ld.global.f32 %f0, [%rd3]",
    );
}

#[test]
fn shared_accesses_past_the_end_fault() {
    fails(
        "\tst.shared.f32 [%r2+4096], %f0;\n",
        64,
        SimErrorKind::OutOfBounds,
        "outside the block's 256 bytes of shared memory",
    );
}

#[test]
fn misaligned_accesses_fault() {
    fails(
        "\tld.global.f32 %f0, [%rd1+2];\n",
        64,
        SimErrorKind::Misaligned,
        "not 4-byte aligned",
    );
}

#[test]
fn reading_a_neighbour_without_a_barrier_is_a_race() {
    fails(
        "\tmov.f32 %f0, 0f3F800000;\n\tst.shared.f32 [%r2], %f0;\n\tld.shared.f32 %f1, [%r2+4];\n",
        64,
        SimErrorKind::Race,
        "wrote since the last barrier",
    );
}

#[test]
fn two_threads_writing_one_word_is_a_race() {
    fails(
        "\tmov.f32 %f0, 0f3F800000;\n\tst.shared.f32 [%r1], %f0;\n",
        64,
        SimErrorKind::Race,
        "which thread 0 wrote",
    );
}

#[test]
fn reading_unwritten_shared_memory_is_reported() {
    fails(
        "\tld.shared.f32 %f1, [%r2];\n",
        64,
        SimErrorKind::Uninitialised,
        "nothing has written",
    );
}

#[test]
fn a_barrier_half_the_block_skips_is_reported() {
    fails(
        "\tsetp.lo.u32 %p0, %r0, 16;\n\t@%p0 bra $L1;\n\tbar.sync 0;\n$L1:\n",
        64,
        SimErrorKind::Barrier,
        "reached by 48 of the block's 64 threads",
    );
}

#[test]
fn reading_before_cp_async_lands_is_reported() {
    fails(
        "\tcvt.u64.u32 %rd2, %r0;\n\tmad.lo.u64 %rd3, %rd2, 16, %rd1;\n\
         \tmad.lo.u32 %r3, %r0, 16, %r1;\n\tsetp.lo.u32 %p0, %r0, 16;\n\
         \t@%p0 cp.async.cg.shared.global [%r3], [%rd3], 16;\n\tcp.async.commit_group;\n\
         \t@%p0 ld.shared.f32 %f1, [%r3];\n",
        64,
        SimErrorKind::Race,
        "an asynchronous copy into it is in flight",
    );
}

#[test]
fn cp_async_delivers_after_the_wait() {
    // Threads 0..15 copy 16 bytes each into shared memory, wait, and
    // write the doubled words back.
    let m = kernel(&format!(
        "{}\tcvt.u64.u32 %rd2, %r0;\n\tmad.lo.u64 %rd3, %rd2, 16, %rd1;\n\
         \tmad.lo.u32 %r3, %r0, 16, %r1;\n\tsetp.lo.u32 %p0, %r0, 16;\n\
         \t@%p0 cp.async.cg.shared.global [%r3], [%rd3], 16;\n\tcp.async.commit_group;\n\
         \tcp.async.wait_group 0;\n\tbar.sync 0;\n\
         \tmad.lo.u64 %rd4, %rd2, 4, %rd1;\n\tld.shared.f32 %f1, [%r2];\n\
         \tadd.rn.f32 %f2, %f1, %f1;\n\tst.global.f32 [%rd4], %f2;\n\tret;\n",
        prologue()
    ));
    let out = launch(&m, 64).unwrap();
    let want: Vec<f32> = (0..64).map(|t| 2.0 * t as f32).collect();
    assert_eq!(out, want);
}

#[test]
fn an_endless_loop_times_out() {
    let m = kernel(&format!("{}$L0:\n\tbra.uni $L0;\n", prologue()));
    let sim = Sim::with_options(Options {
        max_steps: 10_000,
        ..Options::default()
    });
    let a = sim.alloc(256);
    let e = sim
        .launch(&m, "k", [1, 1, 1], [64, 1, 1], 256, &[a])
        .unwrap_err();
    assert_eq!(e.kind, SimErrorKind::Timeout, "{e}");
}

#[test]
fn divergent_lanes_reconverge() {
    // Odd lanes add 1, even lanes add 2, then all multiply by 10.
    let m = kernel(&format!(
        "{}\tcvt.u64.u32 %rd2, %r0;\n\tmad.lo.u64 %rd3, %rd2, 4, %rd1;\n\
         \tld.global.f32 %f0, [%rd3];\n\tand.b32 %r3, %r0, 1;\n\
         \tsetp.eq.u32 %p0, %r3, 0;\n\t@%p0 bra $L1;\n\
         \tadd.rn.f32 %f0, %f0, 0f3F800000;\n\tbra.uni $L2;\n\
         $L1:\n\tadd.rn.f32 %f0, %f0, 0f40000000;\n\
         $L2:\n\tmul.rn.f32 %f0, %f0, 0f41200000;\n\tst.global.f32 [%rd3], %f0;\n\tret;\n",
        prologue()
    ));
    let out = launch(&m, 64).unwrap();
    let want: Vec<f32> = (0..64)
        .map(|t| (t as f32 + if t % 2 == 0 { 2.0 } else { 1.0 }) * 10.0)
        .collect();
    assert_eq!(out, want);
}

#[test]
fn mma_in_a_divergent_warp_is_reported() {
    let m = kernel(&format!(
        "{}\tsetp.lo.u32 %p0, %r0, 8;\n\t@%p0 bra $L1;\n\
         \tmma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {{%acc0, %acc1, %acc2, %acc3}}, {{%ab0, %ab1, %ab2, %ab3}}, {{%ab4, %ab5}}, {{%acc0, %acc1, %acc2, %acc3}};\n\
         $L1:\n\tret;\n",
        prologue()
    ));
    let e = launch(&m, 64).unwrap_err();
    assert_eq!(e.kind, SimErrorKind::Divergence, "{e}");
}

#[test]
fn launches_are_validated() {
    let m = kernel("\tret;\n");
    let sim = Sim::new();
    let a = sim.alloc(4);
    let e = sim
        .launch(&m, "k", [1, 1, 1], [128, 1, 1], 256, &[a])
        .unwrap_err();
    assert_eq!(e.kind, SimErrorKind::Launch);
    assert!(sim
        .launch(&m, "k", [1, 1, 1], [64, 1, 1], 256, &[])
        .is_err());
    assert!(sim
        .launch(&m, "nope", [1, 1, 1], [64, 1, 1], 256, &[a])
        .is_err());
    assert!(sim.launch(&m, "k", [1, 1, 1], [64, 1, 1], 8, &[a]).is_err());
}

#[test]
fn warp_shuffles_follow_the_ptx_lane_rules() {
    // Each lane holds its index as a float; a down-tree leaves the warp's
    // sum (0 + 1 + ... + 31 = 496) in lane 0, and idx broadcasts it.
    let mut body = String::from(prologue());
    body.push_str("\tcvt.rn.f32.u32 %f0, %r0;\n");
    for off in [16, 8, 4, 2, 1] {
        body.push_str(&format!(
            "\tshfl.sync.down.b32 %f1, %f0, {off}, 31, -1;\n\tadd.rn.f32 %f0, %f0, %f1;\n"
        ));
    }
    body.push_str(
        "\tand.b32 %r3, %r0, 32;\n\
         \tshfl.sync.idx.b32 %f2, %f0, 0, 31, -1;\n\
         \tshfl.sync.bfly.b32 %f3, %f2, 1, 31, -1;\n\
         \tcvt.u64.u32 %rd2, %r0;\n\tmad.lo.u64 %rd3, %rd2, 4, %rd1;\n\
         \tst.global.f32 [%rd3], %f3;\n\tret;\n",
    );
    let out = launch(&kernel(&body), 64).unwrap();
    // Warp 0 sums lanes 0..31, warp 1 lanes 32..63 (32·32 + 496).
    let want: Vec<f32> = (0..64)
        .map(|t| if t < 32 { 496.0 } else { 1520.0 })
        .collect();
    assert_eq!(out, want);
}

#[test]
fn a_shuffle_in_a_divergent_warp_is_reported() {
    fails(
        "\tsetp.lo.u32 %p0, %r0, 3;\n\t@%p0 bra $L1;\n\
         \tshfl.sync.bfly.b32 %f1, %f0, 1, 31, -1;\n$L1:\n",
        64,
        SimErrorKind::Divergence,
        "shfl.sync",
    );
}

#[test]
fn ldmatrix_hands_out_rows_and_transposes() {
    // Thread t writes the 16-bit values 2t and 2t + 1 into word t, so
    // shared memory holds an 8x8 matrix of values 8r + c; lane l
    // addresses row l % 8. Plain, lane l gets (row l/4, columns 2(l%4) and
    // the next); transposed, (rows 2(l%4) and the next, column l/4).
    let body = format!(
        "{}\tmad.lo.u32 %r3, %r0, 131074, 65536;\n\tst.shared.b32 [%r2], %r3;\n\tbar.sync 0;\n\
         \tand.b32 %r4, %r0, 7;\n\tmad.lo.u32 %r5, %r4, 16, %r1;\n\
         \tldmatrix.sync.aligned.m8n8.x1.shared.b16 {{%r6}}, [%r5];\n\
         \tldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {{%r7}}, [%r5];\n\
         \tcvt.u64.u32 %rd2, %r0;\n\tmad.lo.u64 %rd3, %rd2, 8, %rd1;\n\
         \tst.global.b32 [%rd3], %r6;\n\tst.global.b32 [%rd3+4], %r7;\n\tret;\n",
        prologue()
    );
    let out = launch(&kernel(&body), 128).unwrap();
    let word = |lo: u32, hi: u32| f32::from_bits(lo | (hi << 16));
    for l in 0..64u32 {
        let (g, t) = ((l % 32) / 4, l % 4);
        let plain = word(8 * g + 2 * t, 8 * g + 2 * t + 1);
        let trans = word(16 * t + g, 16 * t + g + 8);
        assert_eq!(out[2 * l as usize].to_bits(), plain.to_bits(), "lane {l}");
        assert_eq!(
            out[2 * l as usize + 1].to_bits(),
            trans.to_bits(),
            "lane {l}"
        );
    }
}

/// A kernel with a `tsr_local` array of `bytes` (declared after the
/// registers).
fn with_local(bytes: u64, body: &str) -> tessera_ptx::Module {
    let text = format!(
        ".version 8.0\n.target sm_90\n.address_size 64\n\n\
         .visible .entry k(\n\t.param .u64 a\n)\n.maxntid 64, 1, 1\n{{\n\
         \t.reg .pred %p<4>;\n\t.reg .b32 %r<8>;\n\t.reg .b64 %rd<8>;\n\t.reg .f32 %f<8>;\n\
         \t.local .align 16 .b8 tsr_local[{bytes}];\n\
         \tld.param.u64 %rd1, [a];\n\tmov.u32 %r0, %tid.x;\n\tmov.u64 %rd4, tsr_local;\n\
         {body}\tret;\n}}\n"
    );
    read_module(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

#[test]
fn vector_accesses_and_local_memory() {
    // Each thread t: loads a[4t..4t+4] as one v4, keeps it in its local
    // array, reads it back reversed as two v2 loads, stores it.
    let m = with_local(
        16,
        "\tcvt.u64.u32 %rd2, %r0;\n\tmad.lo.u64 %rd3, %rd2, 16, %rd1;\n\
         \tld.global.v4.f32 {%f0, %f1, %f2, %f3}, [%rd3];\n\
         \tst.local.v4.f32 [%rd4], {%f3, %f2, %f1, %f0};\n\
         \tld.local.v2.f32 {%f4, %f5}, [%rd4];\n\tld.local.v2.f32 {%f6, %f7}, [%rd4+8];\n\
         \tst.global.v4.f32 [%rd3], {%f4, %f5, %f6, %f7};\n",
    );
    // 64 threads, 4 floats each.
    let out = launch(&m, 256).unwrap();
    let want: Vec<f32> = (0..256).map(|i| (4 * (i / 4) + 3 - i % 4) as f32).collect();
    assert_eq!(out, want);
}

#[test]
fn local_accesses_past_the_array_fault() {
    let m = with_local(8, "\tst.local.f32 [%rd4+8], %f0;\n");
    let e = launch(&m, 64).unwrap_err();
    assert_eq!(e.kind, SimErrorKind::OutOfBounds, "{e}");
    assert!(e.message.contains("8 bytes of local memory"), "{e}");
}

#[test]
fn misaligned_vectors_fault() {
    let m = with_local(16, "\tld.global.v4.f32 {%f0, %f1, %f2, %f3}, [%rd1+8];\n");
    let e = launch(&m, 64).unwrap_err();
    assert_eq!(e.kind, SimErrorKind::Misaligned, "{e}");
    assert!(e.message.contains("16-byte"), "{e}");
}

//! What warp-specialised kernels rely on, on the simulator: named
//! barriers for part of the block, `mbarrier` hand-offs that order a
//! producer's writes and a consumer's reads without any block-wide
//! barrier, and `setmaxnreg` asked by whole warps. Each protocol runs
//! clean, and each broken variant is reported.

use tessera_ptx::read_module;
use tessera_sim::{Sim, SimErrorKind};

/// A module with one kernel `k(.param .u64 a)` of 64 threads (warp 0 and
/// warp 1) whose body follows a prologue: `%rd1` = buffer `a`, `%r0` =
/// tid, `%r1` = the shared base; thread 0 initialises two mbarriers of 32
/// arrivals ("full" at byte 256, "empty" at 264) and the block meets once.
fn kernel(body: &str) -> tessera_ptx::Module {
    let text = format!(
        ".version 8.0\n.target sm_90a\n.address_size 64\n.file 1 \"ws.tsr\"\n\
         .extern .shared .align 16 .b8 tsr_smem[];\n\n\
         .visible .entry k(\n\t.param .u64 a\n)\n.maxntid 64, 1, 1\n.maxnreg 128\n{{\n\
         \t.reg .pred %p<8>;\n\t.reg .b32 %r<8>;\n\t.reg .b64 %rd<8>;\n\t.reg .f32 %f<4>;\n\
         \tld.param.u64 %rd1, [a];\n\
         \tmov.u32 %r0, %tid.x;\n\
         \tmov.u32 %r1, tsr_smem;\n\
         \tsetp.eq.u32 %p0, %r0, 0;\n\
         \t@!%p0 bra $L0;\n\
         \tmbarrier.init.shared::cta.b64 [tsr_smem+256], 32;\n\
         \tmbarrier.init.shared::cta.b64 [tsr_smem+264], 32;\n\
         $L0:\n\
         \tbar.sync 0;\n\
         \t.loc 1 9 5\n\
         {body}}}\n"
    );
    read_module(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// Launches `k` (64 threads, one block) on 64 f32s holding 0, 1, 2, ...
fn launch(m: &tessera_ptx::Module) -> Result<Vec<f32>, tessera_sim::SimError> {
    let sim = Sim::new();
    let a = sim.alloc(64 * 4);
    let init: Vec<u8> = (0..64).flat_map(|i| (i as f32).to_le_bytes()).collect();
    sim.write(a, &init).unwrap();
    sim.launch(m, "k", [1, 1, 1], [64, 1, 1], 272, &[a])?;
    let out = sim.read(a, 64 * 4).unwrap();
    Ok(out
        .chunks(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

fn fails(body: &str, kind: SimErrorKind, needle: &str) {
    let e = launch(&kernel(body)).expect_err("the check must fire");
    let text = e.to_string();
    assert_eq!(e.kind, kind, "{text}");
    assert!(text.contains(needle), "`{needle}` not in:\n{text}");
    assert!(text.contains("ws.tsr:9:5"), "no source line in:\n{text}");
}

/// Warp 0 writes its lanes' words, meets on named barrier 1 (for
/// `threads`), and stores its neighbour's word to global memory; warp 1
/// leaves at once.
fn neighbours(threads: u32) -> String {
    format!(
        "\tsetp.ge.u32 %p1, %r0, 32;\n\t@%p1 bra $L9;\n\
         \tmad.lo.u32 %r2, %r0, 4, %r1;\n\
         \tcvt.rn.f32.u32 %f0, %r0;\n\tadd.f32 %f0, %f0, 0f42C80000;\n\
         \tst.shared.f32 [%r2], %f0;\n\
         \tbar.sync 1, {threads};\n\
         \tadd.u32 %r3, %r0, 1;\n\tand.b32 %r3, %r3, 31;\n\
         \tmad.lo.u32 %r4, %r3, 4, %r1;\n\tld.shared.f32 %f1, [%r4];\n\
         \tcvt.u64.u32 %rd2, %r0;\n\tmad.lo.u64 %rd3, %rd2, 4, %rd1;\n\
         \tst.global.f32 [%rd3], %f1;\n\
         $L9:\n\tret;\n"
    )
}

#[test]
fn a_named_barrier_orders_the_warps_that_meet_there() {
    let out = launch(&kernel(&neighbours(32))).unwrap();
    for (l, v) in out.iter().enumerate().take(32) {
        assert_eq!(*v, ((l + 1) % 32) as f32 + 100.0, "lane {l}");
    }
    // Warp 1 took no part.
    assert_eq!(out[40], 40.0);
}

#[test]
fn a_named_barrier_nobody_else_reaches_is_a_deadlock() {
    fails(
        &neighbours(64),
        SimErrorKind::Barrier,
        "named barrier 1, which 32 of the 64 threads",
    );
}

/// A producer (warp 1) hands two laps of 32 words to a consumer (warp 0)
/// through one buffer: it writes, arrives on "full", waits until the
/// consumer has arrived on "empty", writes again and arrives on "full"
/// again (with `early`, the second write comes before the wait). The
/// consumer stores the sum of both laps: 2l + 100.
fn handoff(early: bool) -> String {
    let wait = "$L5:\n\tmbarrier.try_wait.parity.shared::cta.b64 %p3, [tsr_smem+264], 0;\n\t@!%p3 bra $L5;\n";
    let write = "\tadd.f32 %f1, %f0, 0f42C80000;\n\tst.shared.f32 [%r2], %f1;\n";
    let (first, second) = if early { (write, wait) } else { (wait, write) };
    format!(
        "\tsetp.ge.u32 %p1, %r0, 32;\n\t@%p1 bra $L4;\n\
         \tmad.lo.u32 %r2, %r0, 4, %r1;\n\
         $L1:\n\tmbarrier.try_wait.parity.shared::cta.b64 %p2, [tsr_smem+256], 0;\n\t@!%p2 bra $L1;\n\
         \tld.shared.f32 %f0, [%r2];\n\
         \tmbarrier.arrive.shared::cta.b64 _, [tsr_smem+264];\n\
         $L2:\n\tmbarrier.try_wait.parity.shared::cta.b64 %p2, [tsr_smem+256], 1;\n\t@!%p2 bra $L2;\n\
         \tld.shared.f32 %f1, [%r2];\n\
         \tadd.f32 %f2, %f0, %f1;\n\
         \tcvt.u64.u32 %rd2, %r0;\n\tmad.lo.u64 %rd3, %rd2, 4, %rd1;\n\
         \tst.global.f32 [%rd3], %f2;\n\
         \tret;\n\
         $L4:\n\
         \tsetmaxnreg.dec.sync.aligned.u32 40;\n\
         \tsub.u32 %r3, %r0, 32;\n\tmad.lo.u32 %r2, %r3, 4, %r1;\n\
         \tcvt.rn.f32.u32 %f0, %r3;\n\
         \tst.shared.f32 [%r2], %f0;\n\
         \tmbarrier.arrive.shared::cta.b64 _, [tsr_smem+256];\n\
         {first}{second}\
         \tmbarrier.arrive.shared::cta.b64 _, [tsr_smem+256];\n\
         \tret;\n"
    )
}

#[test]
fn mbarrier_phases_order_a_producer_and_a_consumer() {
    let out = launch(&kernel(&handoff(false))).unwrap();
    for (l, v) in out.iter().enumerate().take(32) {
        assert_eq!(*v, 2.0 * l as f32 + 100.0, "lane {l}");
    }
}

#[test]
fn refilling_a_buffer_before_its_release_is_a_race() {
    fails(
        &handoff(true),
        SimErrorKind::Race,
        "shared-memory race: reads byte 0, which thread 32 wrote",
    );
}

#[test]
fn setmaxnreg_needs_the_whole_warp() {
    fails(
        "\tsetp.lt.u32 %p1, %r0, 16;\n\t@%p1 bra $L1;\n\
         \tsetmaxnreg.inc.sync.aligned.u32 64;\n$L1:\n\tret;\n",
        SimErrorKind::Divergence,
        "setmaxnreg needs all 32 lanes",
    );
}

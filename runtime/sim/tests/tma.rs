//! TMA loads and `mbarrier` phases on the simulator: a swizzled box with
//! zeros outside the tensor lands where the hardware puts it, once the
//! barrier's phase completes; reading early, waiting on a phase that never
//! completes and using a barrier before `mbarrier.init` are errors.

use tessera_ptx::read_module;
use tessera_sim::tma::TensorMap;
use tessera_sim::{Sim, SimErrorKind};

const ROWS: usize = 70;
const COLS: usize = 100;

/// The kernel: thread 0 initialises the barrier (unless `init` is
/// false), expects the box's bytes and issues the load at (64, 60); all
/// wait with `wait` (the parity loop) and copy the 2,048 bytes of shared
/// memory out, 16 per thread.
fn kernel(init: bool, wait: &str) -> tessera_ptx::Module {
    let init = if init {
        "\tmbarrier.init.shared::cta.b64 [tsr_smem+8192], 1;\n"
    } else {
        ""
    };
    let text = format!(
        ".version 8.3\n.target sm_90a\n.address_size 64\n.file 1 \"tma.tsr\"\n\
         .extern .shared .align 1024 .b8 tsr_smem[];\n\n\
         .visible .entry k(\n\t.param .u64 map,\n\t.param .u64 out\n)\n.maxntid 128, 1, 1\n{{\n\
         \t.reg .pred %p<4>;\n\t.reg .b32 %r<16>;\n\t.reg .b64 %rd<8>;\n\t.reg .f32 %f<4>;\n\
         \tld.param.u64 %rd1, [map];\n\
         \tld.param.u64 %rd2, [out];\n\
         \tmov.u32 %r0, %tid.x;\n\
         \tmov.u32 %r1, tsr_smem;\n\
         \tsetp.eq.u32 %p0, %r0, 0;\n\
         \t@!%p0 bra $L1;\n\
         {init}\
         $L1:\n\
         \tbar.sync 0;\n\
         \tfence.proxy.tensormap::generic.acquire.gpu [%rd1], 128;\n\
         \tmov.u32 %r2, 64;\n\
         \tmov.u32 %r3, 60;\n\
         \t.loc 1 4 3\n\
         \t@%p0 mbarrier.arrive.expect_tx.shared::cta.b64 _, [tsr_smem+8192], 2048;\n\
         \t@%p0 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [tsr_smem], [%rd1, {{%r2, %r3}}], [tsr_smem+8192];\n\
         \t.loc 1 7 5\n\
         {wait}\
         \tmul.lo.u32 %r4, %r0, 16;\n\
         \tadd.u32 %r5, %r1, %r4;\n\
         \tld.shared.v4.f32 {{%f0, %f1, %f2, %f3}}, [%r5];\n\
         \tcvt.u64.u32 %rd3, %r4;\n\
         \tadd.s64 %rd4, %rd2, %rd3;\n\
         \tst.global.v4.f32 [%rd4], {{%f0, %f1, %f2, %f3}};\n\
         \tret;\n}}\n"
    );
    read_module(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

const WAIT: &str = "$L2:\n\
    \tmbarrier.try_wait.parity.shared::cta.b64 %p1, [tsr_smem+8192], 0;\n\
    \t@!%p1 bra $L2;\n";

/// Element (r, c) of the tensor, as bf16 bits.
fn value(r: usize, c: usize) -> u16 {
    (r * COLS + c) as u16 | 0x4000
}

fn launch(m: &tessera_ptx::Module) -> Result<Vec<u8>, tessera_sim::SimError> {
    let sim = Sim::new();
    let t = sim.alloc(ROWS * COLS * 2);
    let bytes: Vec<u8> = (0..ROWS * COLS)
        .flat_map(|i| value(i / COLS, i % COLS).to_le_bytes())
        .collect();
    sim.write(t, &bytes).unwrap();
    let map = TensorMap {
        base: t,
        elem_bytes: 2,
        dims: vec![COLS as u64, ROWS as u64],
        strides: vec![(COLS * 2) as u64],
        boxes: vec![64, 16],
        swizzle: 128,
    };
    let m_addr = sim.alloc(128);
    sim.write(m_addr, &map.encode()).unwrap();
    let out = sim.alloc(2048);
    sim.launch(m, "k", [1, 1, 1], [128, 1, 1], 8192 + 8, &[m_addr, out])?;
    Ok(sim.read(out, 2048).unwrap())
}

#[test]
fn a_swizzled_box_lands_after_the_wait() {
    let out = launch(&kernel(true, WAIT)).unwrap();
    for r in 0..16 {
        for c in 0..64 {
            // 128-byte rows, 16-byte chunk c/8 of row r at chunk (c/8) ^ (r % 8).
            let at = r * 128 + ((c / 8) ^ (r % 8)) * 16 + (c % 8) * 2;
            let got = u16::from_le_bytes([out[at], out[at + 1]]);
            let (gr, gc) = (60 + r, 64 + c);
            let want = if gr < ROWS && gc < COLS {
                value(gr, gc)
            } else {
                0
            };
            assert_eq!(got, want, "box ({r}, {c})");
        }
    }
}

fn fails(m: &tessera_ptx::Module, kind: SimErrorKind, needle: &str) {
    let e = launch(m).expect_err("the check must fire");
    let text = e.to_string();
    assert_eq!(e.kind, kind, "{text}");
    assert!(text.contains(needle), "`{needle}` not in:\n{text}");
    assert!(text.contains("tma.tsr:"), "no source line in:\n{text}");
}

#[test]
fn reading_before_the_wait_is_an_error() {
    fails(
        &kernel(true, ""),
        SimErrorKind::Race,
        "while an asynchronous copy into it is in flight",
    );
}

#[test]
fn waiting_on_a_phase_that_never_completes_is_a_deadlock() {
    let wrong = WAIT.replace("[tsr_smem+8192], 0;", "[tsr_smem+8192], 1;");
    fails(&kernel(true, &wrong), SimErrorKind::Async, "deadlock");
}

#[test]
fn a_barrier_used_before_init_is_an_error() {
    fails(
        &kernel(false, WAIT),
        SimErrorKind::Async,
        "before mbarrier.init",
    );
}

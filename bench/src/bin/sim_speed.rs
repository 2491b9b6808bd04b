//! The GPU simulator's speed: the gemm and attention examples' PTX run on
//! the simulator, with simulated thread- and warp-instructions per second
//! (median wall time of RUNS runs, all cores), and the shared-memory
//! wavefronts the kernels took with the passes lost to bank conflicts.
//!
//! Usage: `sim_speed [RUNS]` (default 3).

use std::time::Instant;
use tessera_cpu::kernels::compile_graph;
use tessera_driver::{compile_text, Stage};
use tessera_launch::{Device, Prepared, Sim};
use tessera_tensor::{randn, Dtype};

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(3)
        .max(1);
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let cases: [(&str, &str, &str, Vec<Vec<usize>>); 2] = [
        (
            "gemm bf16 256x256x256",
            "examples/matmul.tsr",
            "gemm",
            vec![vec![256, 256], vec![256, 256]],
        ),
        (
            "attention bf16 (1, 4, 256, 64)",
            "examples/flash_attn.tsr",
            "attention",
            vec![vec![1, 4, 256, 64]; 3],
        ),
    ];
    println!(
        "{} host threads",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    for (label, file, op, shapes) in cases {
        let text = std::fs::read_to_string(root.join(file)).expect("example");
        let c = compile_text(file, &text, Stage::Check);
        let program = c.program().expect("checks");
        let inputs: Vec<_> = shapes
            .iter()
            .enumerate()
            .map(|(i, s)| randn(Dtype::Bf16, s, i as u64 + 1).expect("shape"))
            .collect();
        let g = tessera_cpu::prepare(&program, op, &inputs).expect("prepares");
        let tile = compile_graph(&program, &g).expect("compiles");
        let mut times = Vec::new();
        let mut stats = Default::default();
        for _ in 0..runs {
            let sim = Sim::new();
            let mut prep = Prepared::new(Device::Sim(&sim), &tile, &inputs).expect("loads");
            let t = Instant::now();
            prep.run().expect("runs");
            times.push(t.elapsed().as_secs_f64());
            stats = sim.totals();
        }
        times.sort_by(f64::total_cmp);
        let s = times[runs / 2];
        let stats: tessera_launch::SimStats = stats;
        println!(
            "{label}: {:.3} s, {:.2e} thread-instructions ({:.1} M/s), {:.2e} warp-instructions ({:.2} M/s)",
            s,
            stats.thread_instructions as f64,
            stats.thread_instructions as f64 / s / 1e6,
            stats.warp_instructions as f64,
            stats.warp_instructions as f64 / s / 1e6,
        );
        println!(
            "  shared memory: {} wavefronts, {} of them bank conflicts ({:.1}%)",
            stats.shared_wavefronts,
            stats.bank_conflicts,
            100.0 * stats.bank_conflicts as f64 / stats.shared_wavefronts.max(1) as f64,
        );
    }
}

//! Static SASS figures of the benchmark kernels, no GPU needed: each
//! example op at the benchmark shapes goes through the driver's pipeline to
//! PTX, ptxas assembles it (timed), cuobjdump disassembles it, and
//! `tessera_cuda::sass` counts. Per kernel: registers, spilled bytes,
//! static SASS instructions, CALLs, and instructions one warp executes per
//! trip of the main loop (the loop around the tensor-core instructions),
//! beside Triton 3.9's figure for the same tile where one was measured; for
//! row kernels, instructions per element per lane summed over the passes.
//!
//! `cargo run --release -p tessera-bench --bin sass_stats [ARCH...]`
//! (default sm_80 sm_90; needs `.ci/install-cuda-tools.sh`).

use std::time::Instant;
use tessera_cuda::{ptxas, sass};
use tessera_driver::core::{Arch, Bindings, Dtype};
use tessera_driver::graph::{Arg, Type};
use tessera_driver::schedule::Tile;
use tessera_driver::sema::{Dim, TensorTy};
use tessera_driver::{compile_text, Entry, Pipeline, Stage};

/// One benchmark kernel: an example op on concrete argument shapes.
struct Case {
    label: &'static str,
    example: &'static str,
    op: &'static str,
    args: Vec<(Dtype, Vec<u64>)>,
    /// Triton 3.9's executed instructions per warp per main-loop trip on
    /// sm_80 at the same tile (../shared/tools/sass/README.md).
    triton_sm80: Option<usize>,
}

fn cases() -> Vec<Case> {
    let bf16 = |d: Vec<u64>| (Dtype::Bf16, d);
    let fp32 = |d: Vec<u64>| (Dtype::Fp32, d);
    let attn = |d: u64| vec![bf16(vec![4, 16, 4096, d]); 3];
    vec![
        Case {
            label: "gemm bf16 4096³",
            example: "matmul",
            op: "gemm",
            args: vec![bf16(vec![4096, 4096]); 2],
            triton_sm80: Some(185),
        },
        Case {
            label: "int8 gemm 4096³, dequantised",
            example: "int8_gemm",
            op: "qgemm",
            args: vec![
                (Dtype::Int8, vec![4096, 4096]),
                (Dtype::Int8, vec![4096, 4096]),
                fp32(vec![4096]),
                fp32(vec![4096]),
            ],
            triton_sm80: None,
        },
        Case {
            label: "attention bf16 (4, 16, 4096, 64)",
            example: "flash_attn",
            op: "attention",
            args: attn(64),
            triton_sm80: Some(320),
        },
        Case {
            label: "attention bf16 (4, 16, 4096, 128)",
            example: "flash_attn",
            op: "attention",
            args: attn(128),
            triton_sm80: Some(473),
        },
        Case {
            label: "causal GQA attention bf16 (4, 32/8, 4096, 128)",
            example: "causal_attn",
            op: "causal_attention",
            args: vec![
                bf16(vec![4, 32, 4096, 128]),
                bf16(vec![4, 8, 4096, 128]),
                bf16(vec![4, 8, 4096, 128]),
            ],
            triton_sm80: None,
        },
        Case {
            label: "softmax fp32 8192 x 4096",
            example: "softmax",
            op: "softmax_rows",
            args: vec![fp32(vec![8192, 4096])],
            triton_sm80: None,
        },
        Case {
            label: "layernorm fp32 8192 x 4096",
            example: "layernorm",
            op: "layer_norm",
            args: vec![fp32(vec![8192, 4096]), fp32(vec![4096]), fp32(vec![4096])],
            triton_sm80: None,
        },
    ]
}

/// The PTX of `case` for `arch` and, per kernel, the elements each lane
/// handles per trip of a row kernel's loops (0 for other kernels).
fn ptx_of(case: &Case, arch: &'static Arch) -> Result<(String, Vec<(String, u64)>), String> {
    let path = format!(
        "{}/../examples/{}.tsr",
        env!("CARGO_MANIFEST_DIR"),
        case.example
    );
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    let c = compile_text(&path, &text, Stage::Check);
    if c.has_errors() {
        return Err(format!("{path} does not check"));
    }
    let program = c.program().ok_or("no program")?;
    let args: Vec<Arg> = case
        .args
        .iter()
        .map(|(dtype, dims)| {
            let dims = dims.iter().map(|n| Dim::known(*n)).collect();
            Arg::Type(Type::Tensor(TensorTy::new(dims, *dtype)))
        })
        .collect();
    let mut pipeline = Pipeline::new(&program, arch);
    let (g, _) = pipeline
        .graph(Entry::Op(case.op, Some(&args)))
        .map_err(|d| d.message)?;
    let lowered = pipeline.lower(&g).map_err(|d| d.message)?;
    let per_lane = lowered
        .scheduled
        .schedule
        .kernels
        .iter()
        .map(|k| {
            // Elements per lane per trip (or per program, for a
            // one-pass kernel).
            let lanes = match &k.config.tile {
                Tile::Rows(t) => match (t.rows.as_const(), t.cols.as_const()) {
                    (Some(r), Some(c)) => (r * c) as u64 / (k.config.warps.max(1) * 32),
                    _ => 0,
                },
                _ => 0,
            };
            (format!("{}_{}", g.name, k.name), lanes)
        })
        .collect();
    let m = pipeline
        .ptx(&lowered.tile, &Bindings::new(), None)
        .map_err(|d| d.message)?;
    let mut m = m;
    for f in &mut m.functions {
        f.name = format!("{}_{}", g.name, f.name);
    }
    Ok((tessera_driver::ptx::print_module(&m), per_lane))
}

fn main() {
    let archs: Vec<String> = std::env::args().skip(1).collect();
    let archs = if archs.is_empty() {
        vec!["sm_80".to_owned(), "sm_90".to_owned()]
    } else {
        archs
    };
    if ptxas::find_ptxas().is_none() || ptxas::find_cuobjdump().is_none() {
        eprintln!("sass_stats: run .ci/install-cuda-tools.sh first (ptxas, cuobjdump)");
        std::process::exit(1);
    }
    println!(
        "| case | arch | kernel | regs | spill B | SASS | CALLs | main loop / trip (in calls) | Triton | per element per lane | ptxas ms |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for name in &archs {
        let Some(arch) = Arch::from_name(name) else {
            eprintln!("sass_stats: unknown architecture `{name}`");
            std::process::exit(2);
        };
        for case in cases() {
            if let Err(e) = report(&case, arch) {
                println!(
                    "| {} | {} | error: {e} | | | | | | | | |",
                    case.label, arch.name
                );
            }
        }
    }
}

/// Prints the rows of one case on one architecture.
fn report(case: &Case, arch: &'static Arch) -> Result<(), String> {
    let (ptx, per_lane) = ptx_of(case, arch)?;
    let start = Instant::now();
    let assembled = ptxas::assemble(&ptx, arch.name)?;
    let ptxas_ms = start.elapsed().as_secs_f64() * 1e3;
    let listing = ptxas::sass(&assembled.cubin)?;
    for k in sass::stats(&listing) {
        let Some(res) = assembled.kernel(&k.name) else {
            continue;
        };
        let trip = k.main_loop.as_ref();
        let mut main = trip.map_or("-".to_owned(), |t| {
            format!("{} ({})", t.executed, t.in_calls)
        });
        // Other loops of the same tensor-core work (masked edges).
        let parsed = sass::parse(&listing);
        if let Some(f) = parsed.iter().find(|f| f.name == k.name) {
            for l in sass::mma_loops(f) {
                if trip.is_some_and(|t| t.head != l.0) {
                    main.push_str(&format!("; edge {}", sass::walk(f, l).executed));
                }
            }
        }
        let lanes = per_lane
            .iter()
            .find(|(n, _)| *n == k.name)
            .map_or(0, |(_, l)| *l);
        let per_element = if lanes > 0 {
            let f = sass::parse(&listing);
            let func = f.iter().find(|f| f.name == k.name);
            // Summed over the passes (one trip of each loop), or the
            // whole kernel when it makes one pass with no loop.
            let total: usize = func.map_or(0, |f| {
                let loops = sass::loops(f);
                if loops.is_empty() {
                    return sass::walk_kernel(f).executed;
                }
                loops.into_iter().map(|l| sass::walk(f, l).executed).sum()
            });
            format!("{:.0}", total as f64 / lanes as f64)
        } else {
            "-".to_owned()
        };
        let triton = match (case.triton_sm80, arch.name) {
            (Some(t), "sm_80") => t.to_string(),
            _ => "-".to_owned(),
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {main} | {triton} | {per_element} | {ptxas_ms:.0} |",
            case.label,
            arch.name,
            k.name,
            res.registers,
            res.spill_stores_bytes + res.spill_loads_bytes,
            k.static_len,
            k.calls,
        );
    }
    Ok(())
}

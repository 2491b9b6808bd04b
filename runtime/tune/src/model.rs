//! The cost model: a kernel's time on an architecture's reference part
//! from its Schedule IR at concrete shapes. Each kernel is bounded by the
//! slowest of its tensor-core or FMA math, its DRAM traffic, its L2
//! traffic (operand tiles re-read by neighbouring programs) and its
//! shared-memory traffic (fragments read per product), scaled by how well
//! its programs fill the SMs (wave quantisation, occupancy) and, without a
//! software pipeline, with memory and math serialised; and, given its
//! PTX, by instruction issue (the main loop's instructions times its
//! trips, four warp-instructions a cycle per SM). It ranks
//! configurations; its absolute figures are estimates, marked `model`.

use tessera_core::{Arch, Bindings, Peaks};
use tessera_graph::{Graph, Op, ValueId};
use tessera_schedule::{KernelKind, SKernel, Schedule, Tile};

/// The model's figures for one kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelEstimate {
    /// The kernel.
    pub name: String,
    /// Milliseconds.
    pub ms: f64,
    /// Floating-point operations.
    pub flops: f64,
    /// Bytes read and written in global memory (each operand once).
    pub bytes: f64,
    /// Programs launched.
    pub programs: u64,
    /// Programs resident per SM.
    pub blocks_per_sm: u64,
    /// Waves of programs over the SMs.
    pub waves: u64,
    /// Registers per thread used for residency.
    pub regs: u64,
    /// Shared memory per program, in bytes.
    pub smem: u64,
    /// What bounds it: `tensor`, `fma`, `dram`, `l2`, `smem`, `issue`.
    pub bound: &'static str,
}

/// Instructions of a kernel's PTX.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PtxCounts {
    /// Every instruction (labels, comments and `.loc` not counted).
    pub total: u64,
    /// Those of its main loop: the largest body between a label and a
    /// branch back to it.
    pub main_loop: u64,
}

/// The instruction counts of `f`.
pub fn ptx_counts(f: &tessera_ptx::ir::Function) -> PtxCounts {
    use tessera_ptx::ir::Inst;
    let real = |i: &Inst| {
        !matches!(
            i,
            Inst::Label(_) | Inst::Comment(_) | Inst::Loc { .. } | Inst::Source(_)
        )
    };
    let total = f.body.iter().filter(|i| real(i)).count() as u64;
    let mut main_loop = 0;
    for (b, inst) in f.body.iter().enumerate() {
        let Inst::Bra { target, .. } = inst else {
            continue;
        };
        let head = f.body[..b]
            .iter()
            .position(|i| matches!(i, Inst::Label(l) if l == target));
        if let Some(t) = head {
            let n = f.body[t..=b].iter().filter(|i| real(i)).count() as u64;
            main_loop = main_loop.max(n);
        }
    }
    PtxCounts { total, main_loop }
}

/// Trips of kernel `k`'s main loop at `b`: the reduction depth over the
/// k-tile for GEMM-shaped kernels, the key blocks for attention (half of
/// them when causal), the chunks of a row for row kernels; 1 otherwise.
fn main_loop_trips(g: &Graph, k: &SKernel) -> f64 {
    let anchor = g.node(k.anchor);
    let dim = |v: ValueId, from_end: usize| last_dim(g, v, from_end);
    match (&k.kind, &k.config.tile) {
        (KernelKind::MatMul, Tile::Gemm(t)) => (dim(anchor.args[0], 0) / t.bk as f64).ceil(),
        (KernelKind::Conv2d, Tile::Gemm(t)) => {
            let w = anchor.args[1];
            let depth = elements(g, w).unwrap_or(0.0) / dim(w, 3).max(1.0);
            (depth / t.bk as f64).ceil()
        }
        (KernelKind::Attention, Tile::Attention(t)) => {
            let blocks = (dim(anchor.args[1], 1) / t.bn as f64).ceil();
            if matches!(anchor.op, Op::Attention { causal: true, .. }) {
                (blocks / 2.0).ceil()
            } else {
                blocks
            }
        }
        _ => 1.0,
    }
}

/// The elements of a value's tensor type, if concrete.
fn elements(g: &Graph, v: ValueId) -> Option<f64> {
    let t = g.tensor_ty(v)?;
    t.dims
        .iter()
        .map(|d| d.as_known().map(|n| n as f64))
        .product()
}

fn bytes_of(g: &Graph, v: ValueId) -> f64 {
    let size = g
        .tensor_ty(v)
        .map(|t| t.dtype.size_bytes() as f64)
        .unwrap_or(4.0);
    elements(g, v).unwrap_or(0.0) * size
}

fn last_dim(g: &Graph, v: ValueId, from_end: usize) -> f64 {
    g.tensor_ty(v)
        .and_then(|t| t.dims.iter().rev().nth(from_end).and_then(|d| d.as_known()))
        .unwrap_or(1) as f64
}

/// Floating-point operations of node `v`.
fn node_flops(g: &Graph, v: ValueId) -> f64 {
    let n = g.node(v);
    let out = elements(g, v).unwrap_or(0.0);
    match &n.op {
        Op::MatMul { .. } => 2.0 * out * last_dim(g, n.args[0], 0),
        Op::Attention { causal, .. } => {
            // q [.., N, D], k [.., L, D], v [.., L, E]: Q Kᵀ and P V.
            let (q, k, vv) = (n.args[0], n.args[1], n.args[2]);
            let rows = elements(g, q).unwrap_or(0.0) / last_dim(g, q, 0);
            let l = last_dim(g, k, 1);
            let full = 2.0 * rows * l * (last_dim(g, q, 0) + last_dim(g, vv, 0));
            if *causal {
                full / 2.0
            } else {
                full
            }
        }
        Op::Conv2d { .. } => {
            // w [Cout, Cin / groups, KH, KW]: each output sums Cin / groups
            // x KH x KW products.
            let w = n.args[1];
            let per = elements(g, w).unwrap_or(0.0) / last_dim(g, w, 3).max(1.0);
            2.0 * out * per
        }
        Op::Reduce { .. } | Op::Scan { .. } => elements(g, n.args[0]).unwrap_or(0.0),
        Op::Argsort { axis, segment, .. } | Op::Merge { axis, segment, .. } => {
            let rank = g.tensor_ty(v).map_or(1, |t| t.rank());
            let len = last_dim(g, v, rank.saturating_sub(axis + 1)).max(2.0);
            let seg = match *segment {
                0 => len,
                s => (s as f64).min(len),
            };
            let stages = seg.log2().ceil();
            if matches!(n.op, Op::Merge { .. }) {
                // A binary search per element and segment.
                out * (len / seg).ceil() * stages
            } else {
                // A bitonic network: log n (log n + 1) / 2 stages of a
                // comparison per pair.
                out * stages * (stages + 1.0) / 4.0
            }
        }
        Op::Unary(_) | Op::Binary(_) | Op::Select | Op::Cast(_) => out,
        _ => 0.0,
    }
}

/// Whether kernel `k`'s products run on tensor cores: a GEMM-shaped or
/// attention kernel configured for them, on float operands of 4 bytes or
/// fewer.
pub(crate) fn uses_tensor_cores(g: &Graph, k: &SKernel) -> bool {
    let dtype_ok = g
        .tensor_ty(g.node(k.anchor).args.first().copied().unwrap_or(k.anchor))
        .is_some_and(|t| t.dtype.size_bytes() <= 4 && t.dtype.is_float());
    k.config.tensor_cores
        && dtype_ok
        && matches!(
            k.kind,
            KernelKind::MatMul | KernelKind::Attention | KernelKind::Conv2d
        )
}

/// Bytes read from L2 beyond the unique operands: GEMM operand tiles read
/// once per program column (A) and row (B); attention keys and values
/// once per query tile.
fn l2_bytes(g: &Graph, k: &SKernel, b: &Bindings) -> f64 {
    let anchor = g.node(k.anchor);
    let eval = |s: &tessera_schedule::Size| s.eval(b).unwrap_or(1).max(1) as f64;
    match (&k.kind, &k.config.tile) {
        (KernelKind::MatMul | KernelKind::Conv2d, Tile::Gemm(_)) => {
            let (cols, rows) = (eval(&k.grid[0]), eval(&k.grid[1]));
            bytes_of(g, anchor.args[0]) * cols + bytes_of(g, anchor.args[1]) * rows
        }
        (KernelKind::Attention, Tile::Attention(_)) => {
            let tiles = eval(&k.grid[0]);
            let causal = matches!(anchor.op, Op::Attention { causal: true, .. });
            let kv = bytes_of(g, anchor.args[1]) + bytes_of(g, anchor.args[2]);
            kv * tiles * if causal { 0.5 } else { 1.0 }
        }
        _ => 0.0,
    }
}

/// Shared-memory bytes read per FLOP of a tensor-core product: each warp
/// reads an `wm x bk` and a `bk x wn` fragment for `2 wm wn bk` FLOPs.
fn smem_per_flop(k: &SKernel, elem: f64) -> f64 {
    let warps = k.config.warps.max(1) as f64;
    let (bm, bn) = match &k.config.tile {
        Tile::Gemm(t) => (t.bm as f64, t.bn as f64),
        Tile::Attention(t) => (t.bm as f64, t.bn as f64),
        _ => return 0.0,
    };
    // Warps split the rows in two when there are four or more, the rest
    // along the columns.
    let (wr, wc) = if warps >= 4.0 {
        (2.0, warps / 2.0)
    } else {
        (1.0, warps)
    };
    let (wm, wn) = ((bm / wr).max(1.0), (bn / wc).max(1.0));
    elem * (wm + wn) / (2.0 * wm * wn)
}

/// The model's estimate of kernel `k` of a schedule of `g` at `b`, with
/// `regs` registers per thread when the assembler said (else the
/// scheduler's estimate).
pub fn kernel(
    g: &Graph,
    k: &SKernel,
    b: &Bindings,
    arch: &Arch,
    regs: Option<u64>,
    counts: Option<PtxCounts>,
) -> Result<KernelEstimate, String> {
    let peaks: Peaks = arch.peaks();
    let mut programs: u64 = 1;
    for s in &k.grid {
        programs = programs.saturating_mul(s.eval(b)?.max(0) as u64);
    }
    let mut regs = regs.unwrap_or(k.estimates.regs_per_thread).max(16);
    // `occupancy` caps registers so that its programs fit side by side
    // (`.maxnreg`); whether the code then spills is ptxas's to say.
    if let Some((least, _)) = k.config.occupancy {
        let warps = k.config.warps.max(1);
        let blocks = least.div_ceil(warps).max(1);
        let cap = (arch.regs_per_sm / (blocks * warps * 32)) / 8 * 8;
        regs = regs.min(cap.clamp(16, arch.max_regs_per_thread));
    }
    let smem = k.estimates.smem_bytes;
    let residency = arch.residency(k.config.warps.max(1), regs, smem);
    if residency.blocks == 0 {
        return Err(format!(
            "no program of `{}` fits on an SM ({} warps, {regs} registers a thread, {smem} bytes of shared memory)",
            k.name, k.config.warps
        ));
    }
    let flops: f64 = k.nodes.iter().map(|&v| node_flops(g, v)).sum();
    let bytes: f64 = k
        .inputs
        .iter()
        .chain(&k.outputs)
        .map(|&v| bytes_of(g, v))
        .sum();
    let slots = peaks.sms * residency.blocks;
    let waves = programs.div_ceil(slots).max(1);
    let fill = programs as f64 / (waves * slots) as f64;
    // Latency hiding: fewer than 16 resident warps per SM leave the
    // schedulers idle part of the time.
    let resident = (residency.blocks * k.config.warps) as f64;
    let hide = 0.5 + 0.5 * (resident / 16.0).min(1.0);
    let tensor = uses_tensor_cores(g, k);
    // `mma.sync` reaches only part of Hopper's tensor rate; wgmma all.
    let tflops = if tensor && k.takes_wgmma(arch) {
        peaks.tensor_tflops
    } else if tensor {
        peaks.tensor_tflops * peaks.mma_sync_fraction
    } else {
        peaks.fp32_tflops
    };
    let elem = g
        .tensor_ty(g.node(k.anchor).args.first().copied().unwrap_or(k.anchor))
        .map(|t| t.dtype.size_bytes() as f64)
        .unwrap_or(4.0);
    // Vector width: scalar accesses reach about 60 % of DRAM bandwidth in
    // a memory-bound kernel, 4-wide ones all of it.
    let vector = match k.config.vectorize {
        0 | 1 => 0.6,
        2 | 3 => 0.8,
        _ => 1.0,
    };
    let utilisation = (fill * hide).max(1e-3);
    let t_math = flops / (tflops * 1e12 * utilisation);
    let t_dram = bytes / (peaks.dram_gbs * 1e9 * vector * fill.max(0.25));
    let t_l2 = l2_bytes(g, k, b) / (peaks.l2_gbs * 1e9 * fill.max(0.25));
    let smem_bw = peaks.sms as f64 * peaks.smem_bytes_per_clk * peaks.clock_ghz * 1e9;
    let t_smem = if tensor {
        flops * smem_per_flop(k, elem) / (smem_bw * utilisation)
    } else {
        0.0
    };
    // Issue: every warp of every program runs the kernel's instructions,
    // its main loop once a trip.
    let t_issue = counts.map_or(0.0, |c| {
        let per_warp = (c.total - c.main_loop.min(c.total)) as f64
            + c.main_loop as f64 * main_loop_trips(g, k);
        let warp_instructions = per_warp * (programs * k.config.warps.max(1)) as f64;
        warp_instructions / (4.0 * peaks.sms as f64 * peaks.clock_ghz * 1e9 * utilisation)
    });
    let terms = [
        (if tensor { "tensor" } else { "fma" }, t_math),
        ("dram", t_dram),
        ("l2", t_l2),
        ("smem", t_smem),
        ("issue", t_issue),
    ];
    let (bound, slowest) = terms
        .iter()
        .copied()
        .fold(("fma", 0.0), |a, t| if t.1 > a.1 { t } else { a });
    // Without a software pipeline (one stage, or synchronous copies) a
    // GEMM-shaped kernel waits for each tile before its math.
    let pipelined = k.config.stages >= 2 && k.config.async_copy;
    let staged = !k.staging.is_empty();
    let seconds = if staged && !pipelined {
        t_math.max(t_smem) + t_dram.max(t_l2)
    } else {
        slowest
    };
    Ok(KernelEstimate {
        name: k.name.clone(),
        ms: (seconds + Peaks::LAUNCH_S) * 1e3,
        flops,
        bytes,
        programs,
        blocks_per_sm: residency.blocks,
        waves,
        regs,
        smem,
        bound,
    })
}

/// The estimates of every kernel of schedule `s` of `g` at `b` (`regs`:
/// the assembler's registers of a kernel, by name, where known).
pub fn schedule(
    g: &Graph,
    s: &Schedule,
    b: &Bindings,
    arch: &Arch,
    regs: &dyn Fn(&str) -> Option<u64>,
    counts: &dyn Fn(&str) -> Option<PtxCounts>,
) -> Result<Vec<KernelEstimate>, String> {
    s.kernels
        .iter()
        .map(|k| kernel(g, k, b, arch, regs(&k.name), counts(&k.name)))
        .collect()
}

/// The parameters of `g` as `name: type`, comma-separated.
pub fn signature(g: &Graph) -> String {
    g.params
        .iter()
        .map(|p| format!("{}: {}", p.name, p.ty))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_driver::{compile_text, Entry, Pipeline, Stage};

    #[test]
    fn the_main_loop_is_counted_and_its_trips_scale_the_issue_time() {
        let c = compile_text(
            "t.tsr",
            "op mm(a: tensor<256, 1024, bf16>, b: tensor<1024, 256, bf16>) -> tensor<256, 256, bf16> { return a @ b; }",
            Stage::Check,
        );
        let program = c.program().unwrap();
        let arch = &Arch::SM_90;
        let mut p = Pipeline::new(&program, arch);
        let (g, _) = p.graph(Entry::Op("mm", None)).unwrap();
        let lowered = p.lower(&g).unwrap();
        let b = Bindings::new();
        let m = p.ptx(&lowered.tile, &b, None).unwrap();
        let counts = ptx_counts(&m.functions[0]);
        assert!(
            counts.main_loop > 20 && counts.main_loop < counts.total,
            "{counts:?}"
        );
        let k = &lowered.scheduled.schedule.kernels[0];
        // K = 1024 over the default bk of 64.
        assert_eq!(main_loop_trips(&g, k), 16.0);
        let with = kernel(&g, k, &b, arch, None, Some(counts)).unwrap();
        let heavier = PtxCounts {
            total: counts.total * 20,
            main_loop: counts.main_loop * 20,
        };
        let slow = kernel(&g, k, &b, arch, None, Some(heavier)).unwrap();
        assert_eq!(slow.bound, "issue");
        assert!(slow.ms > with.ms);
        // 2 x 256 x 256 x 1024 FLOPs, and each operand and the result once.
        assert_eq!(with.flops, 2.0 * 256.0 * 256.0 * 1024.0);
        assert_eq!(with.bytes, 2.0 * (2.0 * 256.0 * 1024.0 + 256.0 * 256.0));
    }
}

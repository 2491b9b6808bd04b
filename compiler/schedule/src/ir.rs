//! The Schedule IR data structures: kernels over the nodes of a graph.

use crate::Size;
use tessera_core::resources::staged_bytes;
use tessera_core::{AttentionTile, GemmTile, Limit, RowTile};
use tessera_diagnostics::Span;
use tessera_graph::ValueId;
use tessera_syntax::ast::Dtype;

/// What a kernel computes, which decides its block program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KernelKind {
    /// Elementwise math (and views) over the output shape, no reduction.
    Elementwise,
    /// Reductions along one axis fused with the elementwise math before and
    /// after them: softmax, layernorm, rmsnorm, sums. One program owns whole
    /// rows, so every policy's order is fixed.
    Row {
        /// The reduced axis of the iteration shape.
        axis: usize,
    },
    /// A (batched) matrix product with its elementwise epilogue.
    MatMul,
    /// softmax(q @ kᵀ · scale) @ v with online softmax, with its epilogue.
    Attention,
    /// A direct 2-d convolution as an implicit GEMM.
    Conv2d,
    /// A user kernel.
    User(String),
}

impl KernelKind {
    /// The name in the text form.
    pub fn name(&self) -> String {
        match self {
            KernelKind::Elementwise => "elementwise".into(),
            KernelKind::Row { axis } => format!("row(axis = {axis})"),
            KernelKind::MatMul => "matmul".into(),
            KernelKind::Attention => "attention".into(),
            KernelKind::Conv2d => "conv2d".into(),
            KernelKind::User(n) => format!("user {n}"),
        }
    }
}

/// Where a tile configuration came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigSource {
    /// The user's `schedule` block (for this architecture, or for all).
    Schedule {
        /// `Some("sm_90")` for `schedule op on sm_90`.
        arch: Option<String>,
    },
    /// The defaults of seed table A.1 for this kind of kernel.
    Default(&'static str),
    /// One point of the schedule's autotune space (`bm = 64, warps = 4`),
    /// chosen explicitly: by the tuner, or by whoever replays its result.
    Tuned(String),
    /// The best configuration the tuning database holds for this graph at
    /// these shapes on this architecture (`tsrc tune`).
    Database {
        /// The point (`bm = 64, warps = 4`).
        point: String,
        /// How it was ranked: `measured 0.84 ms on sm_90`, `model 1.20 ms
        /// on sm_90`.
        result: String,
    },
}

/// A kernel's tile shape, typed by the kind of kernel it belongs to; the
/// verifier checks that kind and tile agree, so a lowering reads its
/// extents by field and none can be missing.
#[derive(Clone, Debug, PartialEq)]
pub enum Tile {
    /// Matrix products and convolutions (implicit GEMMs).
    Gemm(GemmTile),
    /// Flash attention.
    Attention(AttentionTile),
    /// Row reductions and elementwise kernels.
    Rows(RowTile),
    /// User kernels: their tiles are in their own code.
    User,
}

impl Tile {
    /// The named extents, in the text form's order (`bm`, `bn`, `bk`;
    /// `rows`, `cols`; ...).
    pub fn extents(&self) -> Vec<(&'static str, Size)> {
        let c = |n: u64| Size::Const(n as i64);
        match self {
            Tile::Gemm(t) => vec![("bm", c(t.bm)), ("bn", c(t.bn)), ("bk", c(t.bk))],
            Tile::Attention(t) => vec![
                ("bm", c(t.bm)),
                ("bn", c(t.bn)),
                ("bd", t.bd.clone()),
                ("bdv", t.bdv.clone()),
            ],
            Tile::Rows(t) => vec![("rows", t.rows.clone()), ("cols", t.cols.clone())],
            Tile::User => Vec::new(),
        }
    }

    /// Whether this is the tile shape kernels of `kind` use.
    pub fn suits(&self, kind: &KernelKind) -> bool {
        matches!(
            (kind, self),
            (KernelKind::MatMul | KernelKind::Conv2d, Tile::Gemm(_))
                | (KernelKind::Attention, Tile::Attention(_))
                | (
                    KernelKind::Row { .. } | KernelKind::Elementwise,
                    Tile::Rows(_)
                )
                | (KernelKind::User(_), Tile::User)
        )
    }
}

/// A kernel's tile configuration: the knobs of a schedule, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct TileConfig {
    /// The tile shape.
    pub tile: Tile,
    /// Warps per program.
    pub warps: u64,
    /// Software pipeline stages of the main loop.
    pub stages: u64,
    /// Whether global-to-shared copies are asynchronous (cp.async / TMA).
    pub async_copy: bool,
    /// Shared-memory row padding, in elements.
    pub padding: u64,
    /// Elements per vector access.
    pub vectorize: u64,
    /// Whether the products use tensor cores.
    pub tensor_cores: bool,
    /// Resident warps per SM asked for, at least and at most (the
    /// schedule's `occupancy`); `None`: whatever fits.
    pub occupancy: Option<(u64, u64)>,
    /// Whether the kernel may be warp-specialised where it qualifies
    /// (sm_90a; the schedule's `warp_specialize`, on by default).
    pub warp_specialize: bool,
    /// Where it came from.
    pub source: ConfigSource,
}

/// An operand staged through shared memory.
#[derive(Clone, Debug, PartialEq)]
pub struct Staging {
    /// The operand (`a`, `b`, `q`, `k`, `v`).
    pub operand: &'static str,
    /// Tile extents of one stage.
    pub shape: Vec<u64>,
    /// Element type.
    pub dtype: Dtype,
    /// Copies in flight.
    pub stages: u64,
    /// Row padding in elements.
    pub padding: u64,
}

impl Staging {
    /// Bytes, stages and padding included.
    pub fn bytes(&self) -> u64 {
        staged_bytes(
            &self.shape,
            self.padding,
            self.dtype.size_bytes(),
            self.stages,
        )
    }
}

/// Resource estimates of one program, for the feasibility checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Estimates {
    /// Shared memory per program, in bytes.
    pub smem_bytes: u64,
    /// Registers per thread.
    pub regs_per_thread: u64,
    /// Programs resident per SM.
    pub blocks_per_sm: u64,
    /// Resident warps over the SM's maximum, in percent.
    pub occupancy_pct: u64,
    /// The resource that bounds `blocks_per_sm`.
    pub limited_by: Limit,
}

/// One kernel: a fused group of graph nodes.
#[derive(Clone, Debug, PartialEq)]
pub struct SKernel {
    /// Unique name (`k0_matmul`).
    pub name: String,
    /// What it computes.
    pub kind: KernelKind,
    /// The node the kernel is built around (the matmul, the first
    /// reduction, the first elementwise node).
    pub anchor: ValueId,
    /// The graph nodes it computes, in graph order (views and scalars it
    /// recomputes are not listed).
    pub nodes: Vec<ValueId>,
    /// Materialised values it reads from global memory.
    pub inputs: Vec<ValueId>,
    /// Values it writes to global memory.
    pub outputs: Vec<ValueId>,
    /// The iteration shape (the anchor's result, or the reduced operand).
    pub shape: Vec<Size>,
    /// Tile configuration.
    pub config: TileConfig,
    /// Operands staged through shared memory.
    pub staging: Vec<Staging>,
    /// Whether a product's operands both hold K contiguously in memory (A
    /// `[M, K]`, B a transposed `[N, K]`): what tensor-core formats without
    /// transposes (fp8 on wgmma) need.
    pub k_major: bool,
    /// The accumulation dtype of the kernel's product (fp32 where it has
    /// none): fp8 operands take wgmma only under a bf16 accumulator, which
    /// the 14-bit sums of fp8 wgmma hold and an exact fp32 sum does not.
    pub accumulate: Dtype,
    /// Programs along each grid axis.
    pub grid: [Size; 3],
    /// Resource estimates.
    pub estimates: Estimates,
    /// Where diagnostics about it point.
    pub span: Span,
}

/// One step of the schedule.
#[derive(Clone, Debug, PartialEq)]
pub enum SStep {
    /// Launch kernel `i`.
    Kernel(usize),
    /// A collective (graph node), run by the runtime.
    Collective(ValueId),
}

/// The Schedule IR of one graph.
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    /// The graph's name.
    pub name: String,
    /// The target architecture.
    pub arch: &'static str,
    /// Kernels.
    pub kernels: Vec<SKernel>,
    /// What runs, in order.
    pub steps: Vec<SStep>,
    /// Values written to global memory (kernel outputs, collective results,
    /// graph outputs), in graph order.
    pub materialized: Vec<ValueId>,
}

impl SKernel {
    /// Whether this kernel's tensor-core products run on warpgroup MMA
    /// (`wgmma`) on `arch`: its tile fits it
    /// ([`Arch::wgmma_fits`](tessera_core::Arch::wgmma_fits)) and the
    /// operands it stages are 16-bit, or fp8, both K-major (with `bk` a
    /// multiple of 32) and summed into a bf16 accumulator. (Otherwise, with
    /// `tensor_cores`, `mma.sync`.)
    pub fn takes_wgmma(&self, arch: &tessera_core::Arch) -> bool {
        let sixteen = self.staging.iter().all(|st| st.dtype.size_bytes() == 2);
        let fp8 = self.k_major
            && self.accumulate == Dtype::Bf16
            && self.staging.iter().all(|st| st.dtype.is_fp8());
        let w = self.config.warps;
        self.config.tensor_cores
            && (sixteen || fp8)
            && match &self.config.tile {
                Tile::Gemm(t) => arch.wgmma_fits(w, t.bm, t.bn, t.bk) && (!fp8 || t.bk % 32 == 0),
                Tile::Attention(t) => arch.wgmma_fits(w, t.bm, t.bn, 16),
                _ => false,
            }
    }
}

//! Tile configurations (the user's schedule, else the defaults of seed
//! table A.1), shared-memory staging, launch grids, resource estimates and
//! the feasibility checks that run before any code is generated.

use crate::fuse::{dims, Group, GroupKind};
use crate::ir::{ConfigSource, Estimates, KernelKind, SKernel, Staging, Tile, TileConfig};
use crate::Size;
use tessera_core::resources::{attention_regs, gemm_regs, kib};
use tessera_core::{Arch, AttentionTile, Bindings, GemmTile, Knobs, Limit, RowTile};
use tessera_diagnostics::{codes, Diagnostic, Span};
use tessera_graph::{Graph, Op, ValueId};
use tessera_sema::{Dim, ScheduleInfo};
use tessera_syntax::ast::Dtype;

/// Columns an elementwise program handles per step, at most.
const ROW_CHUNK: i64 = 512;
/// Elements a row program holds at once, at most: a row of up to this
/// many columns is read once (one row per program), longer rows in chunks
/// of this many.
const ROW_WHOLE: i64 = 4096;
/// Elements an elementwise program handles.
const ELEMENTWISE_BLOCK: i64 = 2048;

fn size(d: &Dim) -> Size {
    // Unknown extents only occur in graphs built without shapes; the
    // printer shows them as `?` and they are never launched.
    d.to_size().unwrap_or_else(|| Size::Sym("?".into()))
}

/// The product of `dims` as a size.
pub fn product(dims: &[Dim]) -> Size {
    dims.iter().fold(Size::Const(1), |acc, d| acc.mul(size(d)))
}

/// The sizes of `dims`.
pub fn sizes(dims: &[Dim]) -> Vec<Size> {
    dims.iter().map(size).collect()
}

/// The known value of `d`, else `guess`.
fn known_or(d: &Dim, guess: u64) -> u64 {
    d.as_known().unwrap_or(guess)
}

/// A configuration chosen for a kernel instead of the defaults: the knobs
/// of the user's schedule block, or one point of its autotune space
/// ([`crate::space`]). GEMM-shaped kernels read the whole tile, attention
/// `bm` and `bn`; row and elementwise kernels only warps and vector width.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    /// The knobs.
    pub knobs: Knobs,
    /// Where they came from, shown in the Schedule IR.
    pub source: ConfigSource,
    /// Where the schedule sets `tensor_cores`, for W0305.
    pub tensor_cores_at: Option<Span>,
}

impl Choice {
    /// The configuration a checked schedule block asks for.
    pub fn of_schedule(s: &ScheduleInfo) -> Choice {
        Choice {
            knobs: s.knobs,
            source: ConfigSource::Schedule {
                arch: s.arch.clone(),
            },
            tensor_cores_at: s.tensor_cores_at,
        }
    }
}

/// Builds the kernel for group `group` (the `index`th), configured by
/// `chosen` when given, else by the defaults of seed table A.1.
pub fn configure(
    g: &Graph,
    group: &Group,
    index: usize,
    arch: &Arch,
    chosen: Option<&Choice>,
    user_grid: Option<[Size; 3]>,
    hints: &Bindings,
) -> SKernel {
    let anchor = g.node(group.anchor);
    // A user's `schedule` speaks of the implicit GEMM's tiles and warps: a
    // convolution it configures keeps that path.
    let scheduled = chosen.is_some_and(|c| matches!(c.source, ConfigSource::Schedule { .. }));
    let direct = !scheduled && direct_conv(g, group.anchor);
    let (kind, short) = match (&group.kind, &anchor.op) {
        (GroupKind::Row { axis }, _) => (KernelKind::Row { axis: *axis }, "row"),
        (_, Op::MatMul { .. }) => (KernelKind::MatMul, "matmul"),
        // A row program walking its lines in chunks, as a reduction's.
        (_, Op::Scan { kind, axis, .. }) => (KernelKind::Row { axis: *axis }, kind.name()),
        (_, Op::Argsort { axis, .. }) => (KernelKind::Row { axis: *axis }, "argsort"),
        (_, Op::Merge { axis, .. }) => (KernelKind::Row { axis: *axis }, "merge"),
        (_, Op::Attention { .. }) => (KernelKind::Attention, "attention"),
        (_, Op::Conv2d { .. }) if direct => (KernelKind::Elementwise, "conv2d_direct"),
        (_, Op::Conv2d { .. }) => (KernelKind::Conv2d, "conv2d"),
        (_, Op::Kernel { name, .. }) => (KernelKind::User(name.clone()), name.as_str()),
        _ => (KernelKind::Elementwise, "elementwise"),
    };
    let mut k = SKernel {
        name: format!("k{index}_{short}"),
        kind,
        anchor: group.anchor,
        nodes: group.nodes.clone(),
        inputs: Vec::new(),
        outputs: Vec::new(),
        shape: sizes(&group.shape),
        config: TileConfig {
            tile: Tile::User,
            warps: 4,
            stages: 1,
            async_copy: false,
            padding: 0,
            vectorize: 4,
            tensor_cores: false,
            occupancy: None,
            warp_specialize: true,
            source: ConfigSource::Default(""),
        },
        staging: Vec::new(),
        k_major: false,
        accumulate: Dtype::Fp32,
        grid: [Size::Const(1), Size::Const(1), Size::Const(1)],
        estimates: Estimates {
            smem_bytes: 0,
            regs_per_thread: 0,
            blocks_per_sm: 0,
            occupancy_pct: 0,
            limited_by: Limit::Blocks,
        },
        span: anchor.span,
    };
    match k.kind.clone() {
        KernelKind::MatMul => matmul(g, group, &mut k, chosen, arch),
        KernelKind::Attention => attention(g, group, &mut k, chosen, (arch, hints)),
        KernelKind::Conv2d => conv2d(g, group, &mut k, chosen),
        KernelKind::Row { axis } if matches!(anchor.op, Op::Argsort { .. } | Op::Merge { .. }) => {
            argsort(g, group, &mut k, axis, arch)
        }
        KernelKind::Row { axis } => {
            row(group, &mut k, axis, chosen);
            if let Op::Scan { segment, .. } = anchor.op {
                segmented(group, &mut k, axis, segment);
            }
        }
        KernelKind::Elementwise => {
            // A direct convolution's element sums its taps: fewer of them
            // per program, so that small layers still fill the GPU.
            let block = if direct {
                DIRECT_CONV_BLOCK
            } else {
                ELEMENTWISE_BLOCK
            };
            elementwise(group, &mut k, chosen, block)
        }
        KernelKind::User(_) => {
            k.config.source = match chosen {
                Some(c) => c.source.clone(),
                None => ConfigSource::Default("user kernel: 4 warps"),
            };
            if let Some(s) = chosen {
                k.config.warps = s.knobs.warps;
                k.config.vectorize = s.knobs.vectorize;
            }
            // Its `@`s take tensor cores where their operands do, unless
            // the kernel's schedule turns them off.
            k.config.tensor_cores = chosen.is_none_or(|s| s.knobs.tensor_cores);
            if let Some(grid) = user_grid {
                k.grid = grid;
            }
            k.estimates.regs_per_thread = 32;
        }
    }
    if let Some(c) = chosen {
        k.config.occupancy = c.knobs.occupancy;
        k.config.warp_specialize = c.knobs.warp_specialize;
    }
    // (A sorting network's shared memory is not staging: set before.)
    k.estimates.smem_bytes = k
        .estimates
        .smem_bytes
        .max(k.staging.iter().map(Staging::bytes).sum());
    occupancy(&mut k, arch);
    k
}

/// Whether a product of `operands` runs on tensor cores at all: with a
/// 16-bit, fp8, 8-bit integer or tf32 operand (an fp32 one beside it is
/// rounded to that format), or fp32 operands rounded to tf32 (`tf32`, from
/// `numerics matmul = tf32`). IEEE fp32 and fp64 products run on the CUDA
/// cores, whatever the schedule asks.
fn tensor_core_operands(g: &Graph, operands: &[ValueId], tf32: bool) -> bool {
    let dtypes: Vec<Dtype> = operands
        .iter()
        .filter_map(|&v| g.tensor_ty(v).map(|t| t.dtype))
        .collect();
    let narrow = |d: &Dtype| {
        matches!(
            d,
            Dtype::Bf16
                | Dtype::Fp16
                | Dtype::Tf32
                | Dtype::Fp8E4m3
                | Dtype::Fp8E5m2
                | Dtype::Int8
                | Dtype::Uint8
        )
    };
    dtypes.iter().any(narrow) || (tf32 && dtypes.iter().all(|d| *d == Dtype::Fp32))
}

fn operand_dtype(g: &Graph, group: &Group) -> Dtype {
    let a = g.node(group.anchor).args[0];
    g.tensor_ty(a).map(|t| t.dtype).unwrap_or(Dtype::Fp32)
}

/// The A.1 default of a GEMM-shaped kernel: tile, warps, stages and where
/// it comes from.
type GemmDefault = ((GemmTile, u64, u64), &'static str);

/// The tile of a GEMM-shaped kernel with its warps and stages: the chosen
/// configuration (its copy, padding and tensor-core knobs applied too),
/// else the A.1 default.
fn gemm_tile(
    k: &mut SKernel,
    chosen: Option<&Choice>,
    dtype: Dtype,
    default: GemmDefault,
) -> (GemmTile, u64, u64) {
    match chosen {
        Some(c) => {
            k.config.source = c.source.clone();
            k.config.async_copy = c.knobs.async_copy;
            k.config.padding = c.knobs.padding;
            k.config.tensor_cores = c.knobs.tensor_cores;
            k.config.vectorize = c.knobs.vectorize;
            (c.knobs.tile, c.knobs.warps, c.knobs.stages)
        }
        None => {
            k.config.source = ConfigSource::Default(default.1);
            k.config.async_copy = true;
            k.config.tensor_cores = dtype != Dtype::Fp64;
            default.0
        }
    }
}

/// Tiles, staging of both operands and the register estimate of a
/// GEMM-shaped kernel; returns `(bm, bn)` as sizes for its grid.
fn gemm_config(
    k: &mut SKernel,
    dtype: Dtype,
    (tile, warps, stages): (GemmTile, u64, u64),
) -> (Size, Size) {
    let GemmTile { bm, bn, bk } = tile;
    k.config.tile = Tile::Gemm(tile);
    k.config.warps = warps;
    k.config.stages = stages;
    k.staging = vec![
        stage("a", vec![bm, bk], dtype, stages, k.config.padding),
        stage("b", vec![bk, bn], dtype, stages, k.config.padding),
    ];
    k.estimates.regs_per_thread = gemm_regs(&tile, dtype.size_bytes(), warps);
    (Size::Const(bm as i64), Size::Const(bn as i64))
}

fn gemm(bm: u64, bn: u64, bk: u64) -> GemmTile {
    GemmTile { bm, bn, bk }
}

fn matmul(g: &Graph, group: &Group, k: &mut SKernel, chosen: Option<&Choice>, arch: &Arch) {
    let dtype = operand_dtype(g, group);
    let transposed = |v| matches!(g.node(v).op, Op::Transpose);
    let args = &g.node(group.anchor).args;
    k.k_major = !transposed(args[0]) && transposed(args[1]);
    let (acc, tf32) = match g.node(group.anchor).op {
        Op::MatMul { acc, tf32 } => (acc, tf32),
        _ => (Dtype::Fp32, false),
    };
    k.accumulate = acc;
    let default = if dtype.is_fp8() {
        // A.1's 256 x 128 x 128 keeps 128 accumulators per thread, which
        // with mma.sync's operand fragments spills (ptxas, sm_90); so does
        // 128 x 128 x 128, whose four k-steps of byte-gathered B fragments
        // ptxas hoists. wgmma (fp8 under a bf16 accumulator) takes the
        // same tile: that accumulator is rounded after every k-tile, so a
        // bk of its own would give other results than the CPU and mma.sync.
        (
            (gemm(128, 128, 64), 8, 3),
            "A.1 GEMM (FP8) with bm and bk halved for mma.sync registers",
        )
    } else if dtype.size_bytes() >= 4 {
        (
            (gemm(128, 128, 32), 8, 3),
            "A.1 GEMM (BF16) with bk halved for 4-byte elements",
        )
    } else if arch.has_wgmma
        && group.nodes.len() == 1
        && group.shape.len() == 2
        && known_or(&group.shape[1], 256) >= 256
    {
        // Measured with `tsrc tune` on an H200 (2026-11-27, 8192³): 1.49 ms
        // against 1.93 for 128 x 128 x 64; 256 x 128 with 16 warps ties.
        // Only for a 2-d product alone: the 128 accumulators a thread
        // holds leave no registers for a fused epilogue or a batch's
        // index math (ptxas spills).
        (
            (gemm(128, 256, 64), 8, 3),
            "A.1 GEMM (BF16) on wgmma, bn doubled: 128 x 256 x 64",
        )
    } else {
        (
            (gemm(128, 128, 64), 8, 3),
            "A.1 GEMM (BF16): 128 x 128 x 64",
        )
    };
    let default = match chosen {
        None => small_problem(group, arch, default),
        Some(_) => default,
    };
    let tile = gemm_tile(k, chosen, dtype, default);
    let fragments = tile.0.bm % 16 == 0 && tile.0.bn % 16 == 0 && tile.0.bk % 16 == 0;
    k.config.tensor_cores &= fragments && tensor_core_operands(g, &args[..2], tf32);
    let (bm, bn) = gemm_config(k, dtype, tile);
    let r = group.shape.len();
    let (m, n) = (size(&group.shape[r - 2]), size(&group.shape[r - 1]));
    k.grid = [n.cdiv(bn), m.cdiv(bm), product(&group.shape[..r - 2])];
}

/// A product too small to give every SM a program at the default tile
/// (`[37, 300] @ [300, 113]` is one program of 128 x 128): the tile halves
/// (64 x 64, then 32 x 32, 4 warps) while the programs stay fewer than
/// the SMs, so the product spreads over the GPU instead of one SM walking
/// all of it (0.189 -> 0.018 ms estimated for that product on sm_90).
fn small_problem(group: &Group, arch: &Arch, default: GemmDefault) -> GemmDefault {
    let r = group.shape.len();
    let known = |d: &Dim| d.as_known();
    let (Some(m), Some(n)) = (known(&group.shape[r - 2]), known(&group.shape[r - 1])) else {
        return default;
    };
    let batch: u64 = group.shape[..r - 2]
        .iter()
        .map(|d| d.as_known().unwrap_or(1))
        .product();
    let sms = arch.peaks().sms;
    let programs = |bm: u64, bn: u64| m.div_ceil(bm) * n.div_ceil(bn) * batch;
    let ((tile, warps, stages), _) = default;
    if programs(tile.bm, tile.bn) >= sms {
        return default;
    }
    let mut small = (tile, warps, stages);
    for side in [64, 32] {
        if side >= tile.bm.min(tile.bn) {
            continue;
        }
        small = (gemm(side, side, tile.bk), 4, stages);
        if programs(side, side) >= sms {
            break;
        }
    }
    (
        small,
        "A.1 GEMM, tile halved for a product smaller than the GPU",
    )
}

fn stage(
    operand: &'static str,
    shape: Vec<u64>,
    dtype: Dtype,
    stages: u64,
    padding: u64,
) -> Staging {
    Staging {
        operand,
        shape,
        dtype,
        stages,
        padding,
    }
}

fn attention(
    g: &Graph,
    group: &Group,
    k: &mut SKernel,
    chosen: Option<&Choice>,
    (arch, hints): (&Arch, &Bindings),
) {
    let dtype = operand_dtype(g, group);
    // The head dimension, when the shapes fix it.
    let head = dims(g, g.node(group.anchor).args[0])
        .last()
        .and_then(Dim::as_known);
    let (bm, bn, warps, stages) = match chosen {
        Some(c) => {
            k.config.source = c.source.clone();
            k.config.async_copy = c.knobs.async_copy;
            k.config.padding = c.knobs.padding;
            (
                c.knobs.tile.bm,
                c.knobs.tile.bn,
                c.knobs.warps,
                c.knobs.stages,
            )
        }
        None if arch.has_wgmma && dtype.size_bytes() == 2 && head.is_some_and(|d| d <= 64) => {
            // Measured with `tsrc tune` on an H200 (2026-11-27, (4, 16, 4096,
            // 64)): 0.692 ms against 0.850 for 128 x 64 x 64 (two stages).
            k.config.source =
                ConfigSource::Default("A.1 Attention (Flash) on wgmma, bn doubled: 128 x 128 x 64");
            k.config.async_copy = true;
            (128, 128, 8, 3)
        }
        None => {
            k.config.async_copy = true;
            match attention_fallback(g, group, dtype, (arch, hints)) {
                None => {
                    k.config.source = ConfigSource::Default("A.1 Attention (Flash): 128 x 64 x 64");
                    (128, 64, 8, 2)
                }
                Some(t) => {
                    k.config.source = ConfigSource::Default(
                        "A.1 Attention (Flash), shrunk to fit shared memory at this head dimension",
                    );
                    t
                }
            }
        }
    };
    k.config.tensor_cores = chosen.is_none_or(|c| c.knobs.tensor_cores)
        && tensor_core_operands(g, &g.node(group.anchor).args[..2], false);
    let q = g.node(group.anchor).args[0];
    let v = g.node(group.anchor).args[2];
    let qd = dims(g, q);
    let vd = dims(g, v);
    let r = qd.len();
    let head = qd.last().map(size).unwrap_or(Size::Const(1));
    let head_v = vd.last().map(size).unwrap_or(Size::Const(1));
    k.config.tile = Tile::Attention(AttentionTile {
        bm,
        bn,
        bd: head.pow2().max(Size::Const(16)),
        bdv: head_v.pow2().max(Size::Const(16)),
    });
    k.config.warps = warps;
    k.config.stages = stages;
    // A symbolic head dimension is estimated at 64 (and 128 for the value).
    let d = known_or(qd.last().unwrap_or(&Dim::known(64)), 64).next_power_of_two();
    let dv = known_or(vd.last().unwrap_or(&Dim::known(64)), 64).next_power_of_two();
    k.staging = vec![
        stage("q", vec![bm, d], dtype, 1, k.config.padding),
        stage("k", vec![bn, d], dtype, stages, k.config.padding),
        stage("v", vec![bn, dv], dtype, stages, k.config.padding),
    ];
    k.grid = [
        size(&qd[r - 2]).cdiv(Size::Const(bm as i64)),
        product(&qd[..r - 2]),
        Size::Const(1),
    ];
    k.estimates.regs_per_thread = attention_regs(bm, bn, dv, dtype.size_bytes(), warps);
    if !acc_in_registers(bm, dv, warps) {
        k.estimates.regs_per_thread -= (bm * dv).div_ceil(warps * 32);
    }
}

/// The most output-accumulator values per thread attention holds in
/// registers: beyond (a head dimension of 512 over 64 rows and 4 warps),
/// the lowering keeps the accumulator in shared memory, in fp32.
const ACC_REGS: u64 = 128;

/// Whether attention's `bm x dv` output accumulator stays in registers
/// with `warps` warps (see [`ACC_REGS`]).
fn acc_in_registers(bm: u64, dv: u64, warps: u64) -> bool {
    bm * dv <= ACC_REGS * warps * 32
}

/// A smaller attention tile than A.1's 128 x 64 (two stages) where that
/// one's staged q, k and v, with the probabilities a ragged key block
/// passes between threads (`bm x bn` fp32) and a few KiB of row state,
/// would not fit in `arch`'s shared memory per block: fp32 at a head
/// dimension of 128 (230 KiB), or any 16-bit dtype at 256 (an output
/// accumulator too large for registers counts too: 16-bit at 512). `None` when
/// the default fits (or the head dimensions are not known). A symbolic
/// head dimension is read from `hints`, the sizes of the run being
/// compiled for when the caller knows them (a graph built once per op
/// keeps its declared sizes symbolic).
fn attention_fallback(
    g: &Graph,
    group: &Group,
    dtype: Dtype,
    (arch, hints): (&Arch, &Bindings),
) -> Option<(u64, u64, u64, u64)> {
    let args = &g.node(group.anchor).args;
    let head = |v: ValueId| -> Option<u64> {
        let d = dims(g, v).last()?.clone();
        let n = match d.as_known() {
            Some(n) => n,
            None => u64::try_from(d.to_size()?.eval(hints).ok()?).ok()?,
        };
        Some(n.next_power_of_two().max(16))
    };
    let (d, dv) = (head(args[0])?, head(args[2])?);
    let e = dtype.size_bytes();
    let need = |(bm, bn, warps, stages): (u64, u64, u64, u64)| {
        let acc = if acc_in_registers(bm, dv, warps) {
            0
        } else {
            bm * dv * 4
        };
        bm * d * e + stages * bn * (d + dv) * e + bm * bn * 4 + acc + (4 << 10)
    };
    let fits = |t| need(t) <= arch.smem_per_block;
    if fits((128, 64, 8, 2)) {
        return None;
    }
    // The smallest is taken when none fits (the run then says why).
    let smaller = [
        (64, 64, 4, 2),
        (64, 32, 4, 2),
        (64, 32, 4, 1),
        (32, 32, 2, 1),
    ];
    Some(
        smaller
            .into_iter()
            .find(|&t| fits(t))
            .unwrap_or((16, 16, 1, 1)),
    )
}

fn conv2d(g: &Graph, group: &Group, k: &mut SKernel, chosen: Option<&Choice>) {
    let dtype = operand_dtype(g, group);
    let default = (
        (gemm(128, 128, 32), 8, 2),
        "A.1 Convolution: 128 x 128 x 32 (implicit GEMM)",
    );
    let tile = gemm_tile(k, chosen, dtype, default);
    k.config.tensor_cores &= tensor_core_operands(g, &g.node(group.anchor).args[..2], false);
    let (bm, bn) = gemm_config(k, dtype, tile);
    // Output [N, Cout, OH, OW]: rows are (n, oh, ow), columns the Cout /
    // groups channels of a group; one program per group along z.
    let s = &group.shape;
    let rows = size(&s[0]).mul(size(&s[2])).mul(size(&s[3]));
    let groups = match &g.node(group.anchor).op {
        Op::Conv2d { geom, .. } => geom.groups.max(1),
        _ => 1,
    };
    let per_group = size(&s[1]).floor_div(Size::Const(groups as i64));
    k.grid = [
        per_group.cdiv(bn),
        rows.cdiv(bm),
        Size::Const(groups as i64),
    ];
}

/// Output channels per group up to which a convolution is computed
/// directly, not as an implicit GEMM (whose narrowest tile has 16 columns).
const DIRECT_CONV_CHANNELS: u64 = 4;

/// Output elements per program of a direct convolution (4 per thread of
/// 4 warps): each sums its taps, and a small layer (64 channels of 28 x
/// 28) still makes 112 programs, not the 28 of [`ELEMENTWISE_BLOCK`]
/// (0.0072 -> 0.0041 ms estimated for a 7 x 7 depthwise one on sm_90).
const DIRECT_CONV_BLOCK: i64 = 512;

/// Whether convolution `v` is computed directly, each output element
/// summing its taps in an elementwise program: groups of at most
/// [`DIRECT_CONV_CHANNELS`] output channels (a depthwise convolution has
/// one), at sizes known when the kernel compiles. Wider groups are an
/// implicit GEMM, and so is any convolution a user's `schedule` configures.
pub fn direct_conv(g: &Graph, v: ValueId) -> bool {
    let n = g.node(v);
    let Op::Conv2d { geom, .. } = &n.op else {
        return false;
    };
    let w = crate::fuse::dims(g, n.args[1]);
    let known = w.iter().all(|d| d.as_known().is_some());
    let per_group = w
        .first()
        .and_then(|d| d.as_known())
        .map(|o| o / geom.groups.max(1));
    known && per_group.is_some_and(|og| og <= DIRECT_CONV_CHANNELS)
}

/// The column chunk of an elementwise program: the row rounded up to a
/// power of two, at most [`ROW_CHUNK`].
fn chunk(cols: &Dim) -> Size {
    size(cols).pow2().min(Size::Const(ROW_CHUNK))
}

/// A segmented scan's programs: each segment of `segment` elements of a
/// line is a line of its own (one per warp).
fn segmented(group: &Group, k: &mut SKernel, axis: usize, segment: u64) {
    if segment == 0 {
        return;
    }
    let mut outer = group.shape.clone();
    outer.remove(axis);
    let per = size(&group.shape[axis]).cdiv(Size::Const(segment as i64));
    let lines = product(&outer).mul(per);
    let Tile::Rows(t) = &mut k.config.tile else {
        return;
    };
    t.rows = Size::Const(k.config.warps as i64).min(lines.clone());
    k.grid = [lines.cdiv(t.rows.clone()), Size::Const(1), Size::Const(1)];
}

fn row(group: &Group, k: &mut SKernel, axis: usize, chosen: Option<&Choice>) {
    let warps = match chosen {
        Some(c) => {
            k.config.source = c.source.clone();
            k.config.vectorize = c.knobs.vectorize;
            c.knobs.warps
        }
        None => {
            k.config.source =
                ConfigSource::Default("A.1 LayerNorm (row kernels): 256 threads, one row per warp");
            8
        }
    };
    k.config.warps = warps;
    // A whole row when it fits (then the kernel reads it once: see
    // `tessera_tile::specialise`), else chunks of the most that do.
    let cols = size(&group.shape[axis]).pow2().min(Size::Const(ROW_WHOLE));
    let mut outer = group.shape.clone();
    outer.remove(axis);
    // One row per warp, no more rows than there are, and no more than
    // ROW_WHOLE elements per program.
    let rows = Size::Const(warps as i64)
        .min(product(&outer))
        .min(Size::Const(ROW_WHOLE).cdiv(cols.clone()));
    k.config.tile = Tile::Rows(RowTile {
        rows: rows.clone(),
        cols,
    });
    k.grid = [product(&outer).cdiv(rows), Size::Const(1), Size::Const(1)];
    // Each thread holds ROW_WHOLE / threads elements of a few live row
    // values.
    let per_thread = (ROW_WHOLE as u64).div_ceil(warps.max(1) * 32);
    k.estimates.regs_per_thread = 3 * per_thread + 16;
}

/// Shared memory a sorting program's network leaves to the rest of its
/// kernel.
const SORT_SMEM_SPARE: u64 = 8 << 10;
/// Lines of at most this many elements share a sorting program, as many
/// as this many elements hold.
const SORT_TILE: i64 = 4096;
/// Elements of a line an argsort program ranks at once where its lines
/// are longer than a network can hold.
pub const RANK_CHUNK: i64 = 64;

/// Elements of a line a merge program places, one per thread (8 warps).
pub const MERGE_BLOCK: i64 = 256;

/// An argsort: lines (or the segments of a segmented one) that fit in
/// the arch's shared memory (padded to a power of two; with their int32
/// positions) are sorted whole by a bitonic network, short ones several
/// to a program (columns: the padded line); longer lines, or lines of a
/// symbolic extent, are ranked [`RANK_CHUNK`] elements per program (one
/// line, those columns), each element's place counted against the whole
/// line. A thread per eight elements of a network, 4 to 32 warps. A
/// merge places [`MERGE_BLOCK`] elements of a line per program.
fn argsort(g: &Graph, group: &Group, k: &mut SKernel, axis: usize, arch: &Arch) {
    let anchor = g.node(group.anchor);
    let width = g
        .tensor_ty(anchor.args[0])
        .map_or(4, |t| t.dtype.size_bytes().max(4) as u64);
    let budget = arch
        .smem_per_block
        .saturating_sub(SORT_SMEM_SPARE)
        .max(4 << 10);
    let cap = 1i64 << (budget / (width + 4)).ilog2();
    let mut outer = group.shape.clone();
    outer.remove(axis);
    let lines = product(&outer);
    let n = &group.shape[axis];
    let (merge, segment) = match anchor.op {
        Op::Merge { segment, .. } => (true, segment),
        Op::Argsort { segment, .. } => (false, segment),
        _ => (false, 0),
    };
    // The lines a network sorts: segments, where the line is cut.
    let (len, sorted) = match segment {
        0 => (n.as_known(), lines.clone()),
        s => (
            Some(s.min(n.as_known().unwrap_or(s))),
            lines.clone().mul(size(n).cdiv(Size::Const(s as i64))),
        ),
    };
    // A program per `c` elements of a line, a thread for each of them
    // (merge) or for a column of pairs (ranks).
    let blocks = |k: &mut SKernel, c: i64, source: &'static str| {
        k.config.source = ConfigSource::Default(source);
        let blocks = size(n).cdiv(Size::Const(c));
        k.grid = [lines.clone().mul(blocks), Size::Const(1), Size::Const(1)];
        let tile = RowTile {
            rows: Size::Const(1),
            cols: Size::Const(c),
        };
        (tile, 8)
    };
    let (tile, warps) = match len {
        _ if merge => blocks(
            k,
            MERGE_BLOCK,
            "merge: a binary search per element and sorted segment, 256 threads",
        ),
        Some(n) if n.next_power_of_two() as i64 <= cap => {
            k.config.source = ConfigSource::Default(
                "argsort: a bitonic network over whole lines in shared memory",
            );
            let cols = n.next_power_of_two() as i64;
            let per = (SORT_TILE / cols).max(1);
            let rows = Size::Const(per).min(sorted.clone());
            k.grid = [
                sorted.clone().cdiv(rows.clone()),
                Size::Const(1),
                Size::Const(1),
            ];
            let tile = RowTile {
                rows,
                cols: Size::Const(cols),
            };
            let held = sorted.as_const().map_or(per, |l| per.min(l.max(1)));
            k.estimates.smem_bytes = (held * cols) as u64 * (width + 4);
            (tile, (held * cols / 256).clamp(4, 32) as u64)
        }
        _ => blocks(
            k,
            RANK_CHUNK,
            "argsort: places counted in chunks of a long line, 256 threads",
        ),
    };
    k.config.warps = warps;
    k.config.tile = Tile::Rows(tile);
    k.estimates.regs_per_thread = 40;
}

fn elementwise(group: &Group, k: &mut SKernel, chosen: Option<&Choice>, block: i64) {
    if let Some(c) = chosen {
        k.config.source = c.source.clone();
        k.config.warps = c.knobs.warps;
        k.config.vectorize = c.knobs.vectorize;
    } else {
        k.config.source = ConfigSource::Default("elementwise: 4 warps x 4-wide vectors");
    }
    let (cols_dim, outer) = match group.shape.split_last() {
        Some((c, o)) => (c.clone(), o.to_vec()),
        None => (Dim::known(1), Vec::new()),
    };
    let cols = chunk(&cols_dim);
    let rows = Size::Const(block).cdiv(cols.clone());
    k.config.tile = Tile::Rows(RowTile {
        rows: rows.clone(),
        cols: cols.clone(),
    });
    k.grid = [
        size(&cols_dim).cdiv(cols),
        product(&outer).cdiv(rows),
        Size::Const(1),
    ];
    k.estimates.regs_per_thread = 32;
}

fn occupancy(k: &mut SKernel, arch: &Arch) {
    let r = arch.residency(
        k.config.warps,
        k.estimates.regs_per_thread,
        k.estimates.smem_bytes,
    );
    k.estimates.blocks_per_sm = r.blocks;
    k.estimates.limited_by = r.limited_by;
    k.estimates.occupancy_pct = r.occupancy_pct;
}

/// Checks that kernel `k` can run on `arch`; each finding carries a fix.
pub fn feasibility(k: &SKernel, arch: &Arch, out: &mut Vec<Diagnostic>) {
    let smem = k.estimates.smem_bytes;
    if !arch.fits_smem(smem) {
        let mut d = Diagnostic::error(
            codes::E0304,
            k.span,
            format!(
                "kernel {} needs {} of shared memory; {} allows {} per block",
                k.name,
                kib(smem),
                arch.name,
                kib(arch.smem_per_block)
            ),
        )
        .with_label("this kernel");
        d = d.with_help(smem_fix(k, arch));
        out.push(d);
    }
    let max_regs = arch.max_regs_per_thread;
    if k.estimates.regs_per_thread > max_regs {
        let more = (k.config.warps * 2).min(32);
        out.push(
            Diagnostic::error(
                codes::E0310,
                k.span,
                format!(
                    "kernel {} needs about {} registers per thread; at most {max_regs} fit",
                    k.name, k.estimates.regs_per_thread
                ),
            )
            .with_label("this kernel")
            .with_help(format!(
                "spread the tile over more threads with `warps({more})`, or halve `bm`"
            )),
        );
    }
    let memory_bound = matches!(k.kind, KernelKind::Elementwise | KernelKind::Row { .. });
    if memory_bound && k.estimates.occupancy_pct < 50 {
        out.push(
            Diagnostic::warning(
                codes::W0302,
                k.span,
                format!(
                    "kernel {} is memory-bound but reaches an estimated {}% occupancy on {}",
                    k.name, k.estimates.occupancy_pct, arch.name
                ),
            )
            .with_label("this kernel")
            .with_help("use fewer registers per thread (a smaller `vectorize`) or more warps"),
        );
    }
}

fn smem_fix(k: &SKernel, arch: &Arch) -> String {
    let per_stage: u64 = k
        .staging
        .iter()
        .filter(|s| s.stages > 1)
        .map(|s| s.bytes() / s.stages)
        .sum();
    let fixed: u64 = k
        .staging
        .iter()
        .filter(|s| s.stages <= 1)
        .map(Staging::bytes)
        .sum();
    match arch.stages_that_fit(fixed, per_stage, k.config.stages) {
        Some(fit) => format!(
            "use `pipeline_stages({fit})`: {} then fits",
            kib(fixed + fit * per_stage)
        ),
        None => "halve the tile (`tile(bm = 64, ...)` or a smaller `bk`)".into(),
    }
}

/// W0305: a schedule sets `tensor_cores` (at `at`) for op `op`, and none of
/// its kernels can take them: `products` counts its product kernels
/// (matmul, attention, convolution), none of which has operands a
/// tensor-core instruction reads (IEEE fp32 or fp64).
pub fn tensor_cores_unused(op: &str, at: Span, products: usize, out: &mut Vec<Diagnostic>) {
    let (label, help) = if products == 0 {
        (
            format!("no kernel of `{op}` multiplies matrices"),
            "tensor cores run matrix products (`@`, attention, conv2d): remove the knob",
        )
    } else {
        (
            format!("the products of `{op}` have IEEE fp32 or fp64 operands, which run on the CUDA cores"),
            "round fp32 operands to tf32 on tensor cores with `numerics matmul = tf32;`, or compute \
             the product in bf16 (`(a as bf16) @ (b as bf16)`); otherwise remove the knob",
        )
    };
    out.push(
        Diagnostic::warning(
            codes::W0305,
            at,
            format!("`tensor_cores` has no effect on `{op}`"),
        )
        .with_label(label)
        .with_help(help),
    );
}

//! Matmul and convolution kernels: a `[bm, bn]` accumulator per program,
//! a loop over the contracted dimension in steps of `bk` with both operand
//! tiles staged through shared memory, then the fused epilogue on the
//! accumulator and the stores.
//!
//! A convolution is the same loop as an implicit GEMM: rows are output
//! positions `(n, oh, ow)`, columns output channels, and the contracted
//! index `(c, kh, kw)`; the input tile is gathered with the padding read as
//! zeros (out-of-bounds loads yield 0).

use super::{Ctx, R};
use crate::ir::{TOp, TileTy, Value};
use tessera_core::GemmTile;
use tessera_graph::{BinaryOp, ConvGeom, Op, ValueId};
use tessera_schedule::fuse::dims;
use tessera_schedule::Size;
use tessera_sema::Dim;
use tessera_syntax::ast::Dtype;

/// How a gemm-shaped kernel reads its operands.
trait Operands {
    /// Index tiles of the left operand for rows `rm` (`[bm, 1]`) and
    /// contracted indices `rk` (`[1, bk]`).
    fn a_idx(&self, cx: &mut Ctx<'_>, rm: Value, rk: Value) -> Vec<Value>;
    /// Index tiles of the right operand for contracted indices `rk`
    /// (`[bk, 1]`) and columns `rn` (`[1, bn]`).
    fn b_idx(&self, cx: &mut Ctx<'_>, rk: Value, rn: Value) -> Vec<Value>;
}

/// The main loop: returns the accumulator after it.
#[allow(clippy::too_many_arguments)]
fn main_loop(
    cx: &mut Ctx<'_>,
    ops: &dyn Operands,
    a: ValueId,
    b: ValueId,
    k_extent: Value,
    rm: Value,
    rn: Value,
    acc_dtype: Dtype,
    tf32: bool,
    tile: &GemmTile,
) -> R<Value> {
    let (bm, bn, bk) = (
        Size::from(tile.bm),
        Size::from(tile.bn),
        Size::from(tile.bk),
    );
    let acc0 = cx.b.constant(
        0.0,
        TileTy {
            shape: vec![bm.clone(), bn.clone()],
            dtype: acc_dtype,
        },
    );
    let lo = cx.b.int(0);
    let step = cx.b.size(&bk);
    let (k0, carried) = cx.b.begin_loop(lo, k_extent, step, vec![acc0]);
    let r = cx.b.arange(&bk);
    let rk = cx.b.binary(BinaryOp::Add, r, k0);
    let rk_row = cx.b.reshape(rk, vec![Size::Const(1), bk.clone()]);
    let rk_col = cx.b.reshape(rk, vec![bk.clone(), Size::Const(1)]);
    let ai = ops.a_idx(cx, rm, rk_row);
    let at = cx.load(a, ai, None)?;
    let bi = ops.b_idx(cx, rk_col, rn);
    let bt = cx.load(b, bi, None)?;
    let (cm, cn, ck) = (
        bm.as_const().unwrap_or(1),
        bn.as_const().unwrap_or(1),
        bk.as_const().unwrap_or(1),
    );
    let stages = cx.k.config.stages as u32;
    let at = cx.stage("a", vec![cm, ck], stages, at);
    let bt = cx.stage("b", vec![ck, cn], stages, bt);
    cx.b.effect(TOp::Barrier);
    // A bf16 accumulator is rounded after every k-tile, the tile's products
    // summed in fp32.
    let acc = if acc_dtype == Dtype::Bf16 {
        cx.b.dot_bf16_acc(at, bt, carried[0], tf32)
    } else {
        cx.b.dot(at, bt, carried[0], tf32)
    };
    Ok(cx.b.end_loop(vec![acc])[0])
}

struct Gemm {
    /// Batch index scalars of the output, outermost first.
    batch: Vec<Value>,
    out_batch: Vec<Dim>,
    a_dims: Vec<Dim>,
    b_dims: Vec<Dim>,
}

impl Gemm {
    fn batch_for(&self, cx: &mut Ctx<'_>, dims: &[Dim]) -> Vec<Value> {
        cx.batch_for(dims, &self.out_batch, &self.batch)
    }
}

impl Operands for Gemm {
    fn a_idx(&self, cx: &mut Ctx<'_>, rm: Value, rk: Value) -> Vec<Value> {
        let mut idx = self.batch_for(cx, &self.a_dims);
        idx.extend([rm, rk]);
        idx
    }
    fn b_idx(&self, cx: &mut Ctx<'_>, rk: Value, rn: Value) -> Vec<Value> {
        let mut idx = self.batch_for(cx, &self.b_dims);
        idx.extend([rk, rn]);
        idx
    }
}

/// A (batched) matmul with its epilogue.
pub(super) fn matmul(cx: &mut Ctx<'_>, tile: &GemmTile) -> R<()> {
    let anchor = cx.k.anchor;
    let Op::MatMul { acc, tf32 } = cx.g.node(anchor).op else {
        return Ok(());
    };
    let (a, b) = (cx.g.node(anchor).args[0], cx.g.node(anchor).args[1]);
    let out = dims(cx.g, anchor);
    let r = out.len();
    let (bm, bn) = (Size::from(tile.bm), Size::from(tile.bn));
    let pn = cx.b.program_id(0);
    let pm = cx.b.program_id(1);
    let pb = cx.b.program_id(2);
    let rm = cx.block_range(pm, &bm, vec![bm.clone(), Size::Const(1)]);
    let rn = cx.block_range(pn, &bn, vec![Size::Const(1), bn.clone()]);
    let out_batch = out[..r - 2].to_vec();
    let batch = cx.batch_indices(pb, &out_batch);
    let a_dims = dims(cx.g, a);
    let gemm = Gemm {
        batch: batch.clone(),
        out_batch,
        b_dims: dims(cx.g, b),
        a_dims: a_dims.clone(),
    };
    let k_extent = cx.dim(&a_dims[a_dims.len() - 1]);
    let accv = main_loop(cx, &gemm, a, b, k_extent, rm, rn, acc, tf32, tile)?;
    cx.anchor_result(accv);
    let mut idx = batch;
    idx.extend([rm, rn]);
    let mask = cx.in_bounds(&idx[r - 2..], &out[r - 2..]);
    cx.epilogue(&out, &idx, mask)
}

struct Conv {
    /// Output rows decomposed: n, oh, ow (each `[bm, 1]`).
    n: Value,
    oh: Value,
    ow: Value,
    geom: ConvGeom,
    w_dims: Vec<Dim>,
    /// The group's first input channel and first output channel (scalars;
    /// 0 without groups).
    first_in: Value,
    first_out: Value,
}

impl Conv {
    /// (c, kh, kw) of the contracted index `rk`.
    fn split(&self, cx: &mut Ctx<'_>, rk: Value) -> [Value; 3] {
        let khw = cx.unflatten(rk, &self.w_dims[1..]);
        [khw[0], khw[1], khw[2]]
    }
}

impl Operands for Conv {
    fn a_idx(&self, cx: &mut Ctx<'_>, _rm: Value, rk: Value) -> Vec<Value> {
        let [c, kh, kw] = self.split(cx, rk);
        // p · stride + k · dilation - padding, per axis.
        let at = |cx: &mut Ctx<'_>, a: usize, p: Value, k: Value| {
            let s = cx.b.int(self.geom.stride[a] as i64);
            let d = cx.b.int(self.geom.dilation[a] as i64);
            let pad = cx.b.int(self.geom.padding[a] as i64);
            let i = cx.b.binary(BinaryOp::Mul, p, s);
            let k = if self.geom.dilation[a] == 1 {
                k
            } else {
                cx.b.binary(BinaryOp::Mul, k, d)
            };
            let i = cx.b.binary(BinaryOp::Add, i, k);
            cx.b.binary(BinaryOp::Sub, i, pad)
        };
        let ih = at(cx, 0, self.oh, kh);
        let iw = at(cx, 1, self.ow, kw);
        let c = cx.b.binary(BinaryOp::Add, c, self.first_in);
        vec![self.n, c, ih, iw]
    }
    fn b_idx(&self, cx: &mut Ctx<'_>, rk: Value, rn: Value) -> Vec<Value> {
        let [c, kh, kw] = self.split(cx, rk);
        let o = cx.b.binary(BinaryOp::Add, rn, self.first_out);
        vec![o, c, kh, kw]
    }
}

/// A direct convolution (implicit GEMM) with its epilogue.
pub(super) fn conv2d(cx: &mut Ctx<'_>, tile: &GemmTile) -> R<()> {
    let anchor = cx.k.anchor;
    let Op::Conv2d { geom, acc } = cx.g.node(anchor).op else {
        return Ok(());
    };
    let (x, w) = (cx.g.node(anchor).args[0], cx.g.node(anchor).args[1]);
    // The padding reads at indices below 0.
    cx.negative_reads = geom.padding != [0, 0];
    let out = dims(cx.g, anchor);
    let (bm, bn) = (Size::from(tile.bm), Size::from(tile.bn));
    let pn = cx.b.program_id(0);
    let pm = cx.b.program_id(1);
    let rm = cx.block_range(pm, &bm, vec![bm.clone(), Size::Const(1)]);
    let rn = cx.block_range(pn, &bn, vec![Size::Const(1), bn.clone()]);
    let rows = [out[0].clone(), out[2].clone(), out[3].clone()];
    let pos = cx.unflatten(rm, &rows);
    let w_dims = dims(cx.g, w);
    // Group `program_id(2)` reads input channels from `g · C/G` and
    // writes output channels from `g · O/G`; its columns run to O/G.
    let groups = geom.groups.max(1) as i64;
    let co = cx.dim(&out[1]);
    let (first_in, first_out, og) = if groups == 1 {
        let zero = cx.b.int(0);
        (zero, zero, co)
    } else {
        let pg = cx.b.program_id(2);
        let cg = cx.dim(&w_dims[1]);
        let per = cx.b.int(groups);
        let og = cx.b.binary(BinaryOp::Div, co, per);
        (
            cx.b.binary(BinaryOp::Mul, pg, cg),
            cx.b.binary(BinaryOp::Mul, pg, og),
            og,
        )
    };
    let conv = Conv {
        n: pos[0],
        oh: pos[1],
        ow: pos[2],
        geom,
        w_dims: w_dims.clone(),
        first_in,
        first_out,
    };
    let k_extent = {
        let c = cx.dim(&w_dims[1]);
        let kh = cx.dim(&w_dims[2]);
        let kw = cx.dim(&w_dims[3]);
        let t = cx.b.binary(BinaryOp::Mul, c, kh);
        cx.b.binary(BinaryOp::Mul, t, kw)
    };
    let accv = main_loop(cx, &conv, x, w, k_extent, rm, rn, acc, false, tile)?;
    cx.anchor_result(accv);
    let o = cx.b.binary(BinaryOp::Add, rn, first_out);
    let idx = vec![pos[0], o, pos[1], pos[2]];
    let total = super::count(cx, &rows);
    let rm_in = cx.b.binary(BinaryOp::Lt, rm, total);
    let rn_in = cx.b.binary(BinaryOp::Lt, rn, og);
    let mask = cx.b.binary(BinaryOp::And, rm_in, rn_in);
    cx.epilogue(&out, &idx, Some(mask))
}

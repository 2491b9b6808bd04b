//! The FlashAttention kernel: a program owns `bm` query rows of one batch
//! position, walks keys and values in blocks of `bn` with online softmax
//! (running maximum and sum, the accumulator rescaled as the maximum
//! grows), and never stores the score matrix.

use super::{Ctx, R};
use crate::ir::{Combine, TOp, TileTy};
use tessera_core::AttentionTile;
use tessera_graph::{BinaryOp, Op, UnaryOp};
use tessera_schedule::fuse::dims;
use tessera_schedule::Size;
use tessera_sema::Policy;

/// The attention kernel with its epilogue.
pub(super) fn attention(cx: &mut Ctx<'_>, tile: &AttentionTile) -> R<()> {
    let anchor = cx.k.anchor;
    let Op::Attention { acc } = cx.g.node(anchor).op else {
        return Ok(());
    };
    let args = cx.g.node(anchor).args.clone();
    let (q, k, v) = (args[0], args[1], args[2]);
    let (qd, kd, vd) = (dims(cx.g, q), dims(cx.g, k), dims(cx.g, v));
    let out = dims(cx.g, anchor);
    let r = out.len();
    let (bm, bn) = (Size::from(tile.bm), Size::from(tile.bn));
    let (bd, bdv) = (tile.bd.clone(), tile.bdv.clone());
    let one = Size::Const(1);
    let pm = cx.b.program_id(0);
    let pb = cx.b.program_id(1);
    let out_batch = out[..r - 2].to_vec();
    let batch = cx.batch_indices(pb, &out_batch);
    let rm = cx.block_range(pm, &bm, vec![bm.clone(), one.clone()]);
    let rd = cx.b.arange(&bd);
    let rd_row = cx.b.reshape(rd, vec![one.clone(), bd.clone()]);
    let rd_col = cx.b.reshape(rd, vec![bd.clone(), one.clone()]);
    let mut qi = cx.batch_for(&qd, &out_batch, &batch);
    qi.extend([rm, rd_row]);
    let qt = cx.load(q, qi, None)?;
    let c = |t: Option<i64>| t.unwrap_or(64);
    let qt = cx.stage("q", vec![c(bm.as_const()), c(bd.as_const())], 1, qt);
    let scale = match cx.scalar(args[3])? {
        Some(s) => cx.b.cast(s, acc),
        None => cx.b.constant(1.0, TileTy::scalar(acc)),
    };
    let row = |d| TileTy {
        shape: vec![bm.clone(), Size::Const(1)],
        dtype: d,
    };
    let m0 = cx.b.constant(f64::NEG_INFINITY, row(acc));
    let l0 = cx.b.constant(0.0, row(acc));
    let o0 = cx.b.constant(
        0.0,
        TileTy {
            shape: vec![bm.clone(), bdv.clone()],
            dtype: acc,
        },
    );
    let rdv = cx.b.arange(&bdv);
    let rdv = cx.b.reshape(rdv, vec![one.clone(), bdv.clone()]);
    let nk = cx.dim(&kd[kd.len() - 2]);
    let lo = cx.b.int(0);
    let step = cx.b.size(&bn);
    let (n0, carried) = cx.b.begin_loop(lo, nk, step, vec![m0, l0, o0]);
    let (m, l, o) = (carried[0], carried[1], carried[2]);
    let rn = cx.b.arange(&bn);
    let rn = cx.b.binary(BinaryOp::Add, rn, n0);
    let rn_row = cx.b.reshape(rn, vec![one.clone(), bn.clone()]);
    let rn_col = cx.b.reshape(rn, vec![bn.clone(), one.clone()]);
    // kᵀ gathered directly as [bd, bn].
    let mut ki = cx.batch_for(&kd, &out_batch, &batch);
    ki.extend([rn_row, rd_col]);
    let kt = cx.load(k, ki, None)?;
    let stages = cx.k.config.stages as u32;
    let kt = cx.stage("k", vec![c(bd.as_const()), c(bn.as_const())], stages, kt);
    cx.b.effect(TOp::Barrier);
    let s0 = cx.b.constant(
        0.0,
        TileTy {
            shape: vec![bm.clone(), bn.clone()],
            dtype: acc,
        },
    );
    let s = cx.b.dot(qt, kt, s0, false);
    let s = cx.b.binary(BinaryOp::Mul, s, scale);
    let valid = cx.b.binary(BinaryOp::Lt, rn_row, nk);
    let ninf = cx.b.constant(f64::NEG_INFINITY, TileTy::scalar(acc));
    let s = cx.b.select(valid, s, ninf, acc);
    let mx = cx.b.reduce(Combine::Max, s, 1, Policy::Fast);
    let mx = cx.b.reshape(mx, vec![bm.clone(), one.clone()]);
    let m_new = cx.b.binary(BinaryOp::Max, m, mx);
    let sm = cx.b.binary(BinaryOp::Sub, s, m_new);
    let p = cx.b.unary(UnaryOp::Exp, sm);
    let dm = cx.b.binary(BinaryOp::Sub, m, m_new);
    let alpha = cx.b.unary(UnaryOp::Exp, dm);
    let ps = cx.b.reduce(Combine::Sum, p, 1, Policy::Fast);
    let ps = cx.b.reshape(ps, vec![bm.clone(), one.clone()]);
    let la = cx.b.binary(BinaryOp::Mul, l, alpha);
    let l_new = cx.b.binary(BinaryOp::Add, la, ps);
    let mut vi = cx.batch_for(&vd, &out_batch, &batch);
    vi.extend([rn_col, rdv]);
    let vt = cx.load(v, vi, None)?;
    let vt = cx.stage("v", vec![c(bn.as_const()), c(bdv.as_const())], stages, vt);
    let vdt = cx.b.ty(vt).dtype;
    // P is rounded to the value dtype for the tensor-core product, as
    // FlashAttention does.
    let pv = cx.b.cast(p, vdt);
    let oa = cx.b.binary(BinaryOp::Mul, o, alpha);
    let o_new = cx.b.dot(pv, vt, oa, false);
    let after = cx.b.end_loop(vec![m_new, l_new, o_new]);
    let res = cx.b.binary(BinaryOp::Div, after[2], after[1]);
    cx.anchor_result(res);
    let mut idx = batch;
    idx.extend([rm, rdv]);
    let mask = cx.in_bounds(&idx[r - 2..], &out[r - 2..]);
    cx.epilogue(&out, &idx, mask)
}

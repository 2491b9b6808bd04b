//! The FlashAttention kernel: a program owns `bm` query rows of one batch
//! position, walks keys and values in blocks of `bn` with online softmax
//! (running maximum and sum, the accumulator rescaled as the maximum
//! grows), and never stores the score matrix.
//!
//! Causal attention stops the key loop at the program's last query row
//! (blocks wholly above the diagonal are never loaded or computed) and
//! masks each row's keys past itself. Grouped-query attention maps each
//! query batch index to its key/value index (`h / (Hq / Hk)`).

use super::{Ctx, R};
use crate::ir::{Combine, TOp, TileTy, Value};
use tessera_core::AttentionTile;
use tessera_graph::{BinaryOp, Op, UnaryOp};
use tessera_schedule::fuse::dims;
use tessera_schedule::Size;
use tessera_sema::Dim;
use tessera_sema::Policy;

/// The attention kernel with its epilogue.
pub(super) fn attention(cx: &mut Ctx<'_>, tile: &AttentionTile) -> R<()> {
    let anchor = cx.k.anchor;
    let Op::Attention {
        acc,
        causal,
        bottom_right,
    } = cx.g.node(anchor).op
    else {
        return Ok(());
    };
    // Bottom-right alignment: rows may see no key at all.
    let from_end = causal && bottom_right;
    let args = cx.g.node(anchor).args.clone();
    let (q, k, v) = (args[0], args[1], args[2]);
    let (qd, kd) = (dims(cx.g, q), dims(cx.g, k));
    let out = dims(cx.g, anchor);
    let r = out.len();
    let (bm, bn) = (Size::from(tile.bm), Size::from(tile.bn));
    let (bd, bdv) = (tile.bd.clone(), tile.bdv.clone());
    let one = Size::Const(1);
    let pm = cx.b.program_id(0);
    // Causal row blocks differ in work (block i reads i + 1 key blocks):
    // the heaviest are launched first, so the last wave is the short ones.
    let pm = match (causal, qd[qd.len() - 2].to_size()) {
        (true, Some(n)) => {
            let blocks = cx.b.size(&n.cdiv(bm.clone()));
            let one = cx.b.int(1);
            let last = cx.b.binary(BinaryOp::Sub, blocks, one);
            cx.b.binary(BinaryOp::Sub, last, pm)
        }
        _ => pm,
    };
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
    // A constant scale is made in the accumulator's dtype (an fp64
    // attention's 1/√D is not first rounded to fp32).
    let scale = match (&cx.g.node(args[3]).op, cx.scalar(args[3])?) {
        (Op::Const(c), _) => cx.b.constant(*c, TileTy::scalar(acc)),
        (_, Some(s)) => cx.b.cast(s, acc),
        (_, None) => cx.b.constant(1.0, TileTy::scalar(acc)),
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
    let step = cx.b.size(&bn);
    let mut ki = grouped(cx, &qd, &kd, &out_batch, &batch);
    // k and v share their batch dims (the type rule), so their indices.
    let vi = ki.clone();
    ki.push(rd_col);
    let stages = cx.k.config.stages as u32;
    let bufs = [
        cx.shared_buffer("k", vec![c(bd.as_const()), c(bn.as_const())], stages, k),
        cx.shared_buffer("v", vec![c(bn.as_const()), c(bdv.as_const())], stages, v),
    ];
    let keys = Keys {
        q: qt,
        k: (k, ki),
        v: (v, vi, rdv),
        bufs,
        scale,
        acc,
        bm: bm.clone(),
        bn: bn.clone(),
        empty_rows: from_end,
    };
    // Key blocks below `whole` are visible to every row of the program
    // (and inside L): no mask. Causal: row i sees keys below
    // min(i + 1, L), so blocks past the program's last row are never
    // visited and the diagonal ones are masked; else only a ragged last
    // block is.
    // Bottom-right alignment shifts every row's limit by L - N (clamped
    // at 0: a row before the shift sees nothing).
    let zero = cx.b.int(0);
    let (whole, hi, limit) = if causal {
        let one = cx.b.int(1);
        let bm_v = cx.b.size(&bm);
        let mut first = cx.b.binary(BinaryOp::Mul, pm, bm_v);
        let shift = from_end.then(|| {
            let nq = cx.dim(&qd[qd.len() - 2]);
            cx.b.binary(BinaryOp::Sub, nk, nq)
        });
        if let Some(shift) = shift {
            let shifted = cx.b.binary(BinaryOp::Add, first, shift);
            first = cx.b.binary(BinaryOp::Max, shifted, zero);
        }
        let next = cx.b.binary(BinaryOp::Add, first, bm_v);
        let hi = cx.b.binary(BinaryOp::Min, next, nk);
        let mut row_end = cx.b.binary(BinaryOp::Add, rm, one);
        if let Some(shift) = shift {
            let ends = cx.b.binary(BinaryOp::Add, row_end, shift);
            row_end = cx.b.binary(BinaryOp::Max, ends, zero);
        }
        let limit = cx.b.binary(BinaryOp::Min, row_end, nk);
        let whole = cx.b.binary(BinaryOp::Min, first, nk);
        (round_down(cx, whole, step), hi, limit)
    } else {
        (round_down(cx, nk, step), nk, nk)
    };
    let carried = keys.pass(cx, (zero, whole), None, vec![m0, l0, o0])?;
    let after = keys.pass(cx, (whole, hi), Some(limit), carried)?;
    // Each row is normalised by one reciprocal of its sum, multiplied in
    // (as FlashAttention does): a division per row, not per element.
    let l_ty = cx.b.ty(after[1]).clone();
    let one = cx.b.constant(1.0, TileTy::scalar(l_ty.dtype));
    let mut inv = cx.b.binary(BinaryOp::Div, one, after[1]);
    if from_end {
        // A row that saw no key (sum 0) is 0, not 0 / 0.
        let none = cx.b.constant(0.0, TileTy::scalar(l_ty.dtype));
        let seen = cx.b.binary(BinaryOp::Gt, after[1], none);
        inv = cx.b.select(seen, inv, none, l_ty.dtype);
    }
    let res = cx.b.binary(BinaryOp::Mul, after[2], inv);
    cx.anchor_result(res);
    let mut idx = batch;
    idx.extend([rm, rdv]);
    let mask = cx.in_bounds(&idx[r - 2..], &out[r - 2..]);
    cx.epilogue(&out, &idx, mask)
}

/// Batch indices of a key or value operand with `dims`: the query's own
/// where the dims agree, broadcast (0) where the operand's is 1, and
/// `i / (Hq / Hk)` where its dim divides the query's (grouped-query
/// attention).
fn grouped(
    cx: &mut Ctx<'_>,
    qd: &[Dim],
    dims: &[Dim],
    out_batch: &[Dim],
    batch: &[Value],
) -> Vec<Value> {
    let direct = cx.batch_for(dims, out_batch, batch);
    let nb = dims.len() - 2;
    (0..nb)
        .map(|j| {
            let (q, kv) = (&qd[j], &dims[j]);
            if q == kv || kv.as_known() == Some(1) {
                return direct[j];
            }
            let (qn, kn) = (cx.dim(q), cx.dim(kv));
            let group = cx.b.binary(BinaryOp::Div, qn, kn);
            cx.b.binary(BinaryOp::Div, direct[j], group)
        })
        .collect()
}

/// `x` rounded down to a multiple of `step`.
fn round_down(cx: &mut Ctx<'_>, x: Value, step: Value) -> Value {
    let q = cx.b.binary(BinaryOp::Div, x, step);
    cx.b.binary(BinaryOp::Mul, q, step)
}

/// What every pass over key blocks shares: the staged queries, the key and
/// value operands with their batch indices, their shared buffers (reused
/// by every pass), the scale and tile sizes.
struct Keys {
    q: Value,
    /// k and its index tiles but the key one (batch..., head dim column).
    k: (tessera_graph::ValueId, Vec<Value>),
    /// v, its batch indices, and the value-dim row index.
    v: (tessera_graph::ValueId, Vec<Value>, Value),
    bufs: [usize; 2],
    scale: Value,
    acc: tessera_syntax::ast::Dtype,
    bm: Size,
    bn: Size,
    /// Whether a row may have seen no key yet (its max still -inf): the
    /// max subtracted is then 0, so the block adds nothing rather than NaN.
    empty_rows: bool,
}

impl Keys {
    /// One loop over key blocks `[from, to)` with online softmax, from and
    /// to the carried (max, sum, accumulator). `mask`: keys at or past
    /// this (a `[bm, 1]` per-row limit) score -inf.
    fn pass(
        &self,
        cx: &mut Ctx<'_>,
        (from, to): (Value, Value),
        mask: Option<Value>,
        init: Vec<Value>,
    ) -> R<Vec<Value>> {
        let (bm, bn, acc) = (&self.bm, &self.bn, self.acc);
        let one = Size::Const(1);
        let step = cx.b.size(bn);
        let (n0, carried) = cx.b.begin_loop(from, to, step, init);
        let (m, l, o) = (carried[0], carried[1], carried[2]);
        let rn = cx.b.arange(bn);
        let rn = cx.b.binary(BinaryOp::Add, rn, n0);
        let rn_row = cx.b.reshape(rn, vec![one.clone(), bn.clone()]);
        let rn_col = cx.b.reshape(rn, vec![bn.clone(), one.clone()]);
        // kᵀ gathered directly as [bd, bn].
        let mut ki = self.k.1.clone();
        let d_col = ki.pop().expect("the head-dim index");
        ki.extend([rn_row, d_col]);
        let kt = cx.load(self.k.0, ki, None)?;
        let kt = cx.stage_in(self.bufs[0], kt);
        cx.b.effect(TOp::Barrier);
        let s0 = cx.b.constant(
            0.0,
            TileTy {
                shape: vec![bm.clone(), bn.clone()],
                dtype: acc,
            },
        );
        let s = cx.b.dot(self.q, kt, s0, false);
        let s = cx.b.binary(BinaryOp::Mul, s, self.scale);
        let s = match mask {
            Some(limit) => {
                let valid = cx.b.binary(BinaryOp::Lt, rn_row, limit);
                let ninf = cx.b.constant(f64::NEG_INFINITY, TileTy::scalar(acc));
                cx.b.select(valid, s, ninf, acc)
            }
            None => s,
        };
        let mx = cx.b.reduce(Combine::Max, s, 1, Policy::Fast);
        let mx = cx.b.reshape(mx, vec![bm.clone(), one.clone()]);
        let m_new = cx.b.binary(BinaryOp::Max, m, mx);
        let m_sub = if self.empty_rows {
            let ninf = cx.b.constant(f64::NEG_INFINITY, TileTy::scalar(acc));
            let zero = cx.b.constant(0.0, TileTy::scalar(acc));
            let none = cx.b.binary(BinaryOp::Eq, m_new, ninf);
            cx.b.select(none, zero, m_new, acc)
        } else {
            m_new
        };
        let sm = cx.b.binary(BinaryOp::Sub, s, m_sub);
        let p = cx.b.unary(UnaryOp::Exp, sm);
        let dm = cx.b.binary(BinaryOp::Sub, m, m_sub);
        let alpha = cx.b.unary(UnaryOp::Exp, dm);
        let ps = cx.b.reduce(Combine::Sum, p, 1, Policy::Fast);
        let ps = cx.b.reshape(ps, vec![bm.clone(), one.clone()]);
        let la = cx.b.binary(BinaryOp::Mul, l, alpha);
        let l_new = cx.b.binary(BinaryOp::Add, la, ps);
        let mut vi = self.v.1.clone();
        vi.extend([rn_col, self.v.2]);
        let vt = cx.load(self.v.0, vi, None)?;
        let vt = cx.stage_in(self.bufs[1], vt);
        let vdt = cx.b.ty(vt).dtype;
        // P is rounded to the value dtype for the tensor-core product, as
        // FlashAttention does.
        let pv = cx.b.cast(p, vdt);
        let oa = cx.b.binary(BinaryOp::Mul, o, alpha);
        let o_new = cx.b.dot(pv, vt, oa, false);
        Ok(cx.b.end_loop(vec![m_new, l_new, o_new]))
    }
}

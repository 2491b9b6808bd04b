//! Direct convolution: each output element sums its taps (the input
//! channels of its group times the kernel window) in registers, in an
//! elementwise program over the output.
//!
//! A convolution whose groups have few output channels (a depthwise one:
//! one input and one output channel per group) would waste nearly all of
//! an implicit GEMM's tile: Mamba's causal conv over 256 channels with 4
//! taps fills 1 of 128 columns and 4 of 32 contracted indices. Here a
//! program covers a tile of output positions instead; the window's reads
//! of neighbouring outputs overlap and hit the cache. Which convolutions
//! take this path is [`tessera_schedule::config::direct_conv`]'s decision.

use super::{Ctx, R};
use crate::ir::{TileTy, Value};
use tessera_graph::{BinaryOp, Op};
use tessera_schedule::fuse::dims;

/// Taps unrolled in the program; a larger window is a loop.
const UNROLL: i64 = 64;

/// The convolution anchoring the kernel, at output indices `idx`
/// (`n, o, oh, ow` tiles that broadcast to the program's tile), summed in
/// its accumulation dtype.
pub(super) fn direct(cx: &mut Ctx<'_>, idx: &[Value], mask: Value) -> R<Value> {
    let anchor = cx.k.anchor;
    let Op::Conv2d { geom, acc } = cx.g.node(anchor).op else {
        return Err(super::unsupported(
            cx.g,
            anchor,
            "a direct convolution of another op",
        ));
    };
    let (x, w) = (cx.g.node(anchor).args[0], cx.g.node(anchor).args[1]);
    // The padding reads at indices below 0 (as zeros).
    cx.negative_reads = geom.padding != [0, 0];
    let known = |d: &tessera_sema::Dim| d.as_known().map(|k| k as i64);
    let (out, w_dims) = (dims(cx.g, anchor), dims(cx.g, w));
    let (Some(o_all), Some(cg), Some(kh), Some(kw)) = (
        known(&out[1]),
        known(&w_dims[1]),
        known(&w_dims[2]),
        known(&w_dims[3]),
    ) else {
        return Err(super::unsupported(
            cx.g,
            anchor,
            "a direct convolution of unknown extents",
        ));
    };
    let og = o_all / geom.groups.max(1) as i64;
    let [n, o, oh, ow] = [idx[0], idx[1], idx[2], idx[3]];
    // The group's first input channel: (o / og) · cg.
    let group = by(cx, BinaryOp::Div, o, og);
    let c0 = by(cx, BinaryOp::Mul, group, cg);
    // The window's corner: p · stride - padding, per axis.
    let corner = |cx: &mut Ctx<'_>, a: usize, p: Value| {
        let at = by(cx, BinaryOp::Mul, p, geom.stride[a] as i64);
        by(cx, BinaryOp::Add, at, -(geom.padding[a] as i64))
    };
    let (ih0, iw0) = (corner(cx, 0, oh), corner(cx, 1, ow));
    let shape = cx.b.ty(mask).shape.clone();
    let zero = cx.b.constant(0.0, TileTy { shape, dtype: acc });
    // One tap: x[n, c0 + ci, ih0 + i · dh, iw0 + j · dw] · w[o, ci, i, j].
    let tap = |cx: &mut Ctx<'_>, sum: Value, [ci, i, j]: [Tap; 3]| -> R<Value> {
        let c = ci.offset(cx, c0, 1);
        let ih = i.offset(cx, ih0, geom.dilation[0] as i64);
        let iw = j.offset(cx, iw0, geom.dilation[1] as i64);
        let xv = cx.load(x, vec![n, c, ih, iw], Some(mask))?;
        let (ci, i, j) = (ci.value(cx), i.value(cx), j.value(cx));
        // Rows past the output read nothing (loads check their bounds).
        let wv = cx.load(w, vec![o, ci, i, j], None)?;
        let xv = cx.b.cast(xv, acc);
        let wv = cx.b.cast(wv, acc);
        let p = cx.b.binary(BinaryOp::Mul, xv, wv);
        Ok(cx.b.binary(BinaryOp::Add, sum, p))
    };
    let taps = cg * kh * kw;
    if taps <= UNROLL {
        let mut sum = zero;
        for ci in 0..cg {
            for i in 0..kh {
                for j in 0..kw {
                    sum = tap(cx, sum, [Tap::Const(ci), Tap::Const(i), Tap::Const(j)])?;
                }
            }
        }
        return Ok(sum);
    }
    // A loop over the taps in the same order: (ci, i, j) of a flat t.
    let (lo, hi, step) = (cx.b.int(0), cx.b.int(taps), cx.b.int(1));
    let (t, carried) = cx.b.begin_loop(lo, hi, step, vec![zero]);
    let j = by(cx, BinaryOp::Rem, t, kw);
    let ti = by(cx, BinaryOp::Div, t, kw);
    let i = by(cx, BinaryOp::Rem, ti, kh);
    let ci = by(cx, BinaryOp::Div, ti, kh);
    let sum = tap(cx, carried[0], [Tap::Var(ci), Tap::Var(i), Tap::Var(j)])?;
    Ok(cx.b.end_loop(vec![sum])[0])
}

/// A tap coordinate: a constant when the window is unrolled, the loop's
/// when it is not.
#[derive(Clone, Copy)]
enum Tap {
    Const(i64),
    Var(Value),
}

impl Tap {
    /// `base + self · scale`.
    fn offset(self, cx: &mut Ctx<'_>, base: Value, scale: i64) -> Value {
        match self {
            Tap::Const(k) => by(cx, BinaryOp::Add, base, k * scale),
            Tap::Var(v) => {
                let s = by(cx, BinaryOp::Mul, v, scale);
                cx.b.binary(BinaryOp::Add, base, s)
            }
        }
    }

    fn value(self, cx: &mut Ctx<'_>) -> Value {
        match self {
            Tap::Const(k) => cx.b.int(k),
            Tap::Var(v) => v,
        }
    }
}

/// `a op k` for an integer constant `k`; `a` itself where that is `a + 0`,
/// `a · 1` or `a / 1`.
fn by(cx: &mut Ctx<'_>, op: BinaryOp, a: Value, k: i64) -> Value {
    let identity = match op {
        BinaryOp::Add => k == 0,
        BinaryOp::Mul | BinaryOp::Div => k == 1,
        _ => false,
    };
    if identity {
        return a;
    }
    let k = cx.b.int(k);
    cx.b.binary(op, a, k)
}

//! Correctly rounded f32 division, reciprocal and square root written out
//! in Target IR, so that ptxas calls no subroutine.
//!
//! ptxas compiles `div.rn.f32`, `rcp.rn.f32` and `sqrt.rn.f32` to a fast
//! path and a `CALL` to a slow-path subroutine for the operands the fast
//! path cannot take; a kernel with one is no longer straight-line code
//! (issue-bound loops, a larger binary). Here each becomes, in place:
//!
//! - division `a / b`: when `2^-62 ≤ |a|, |b| ≤ 2^62` (the quotient and
//!   every intermediate far from overflow and underflow), the reciprocal
//!   approximation refined by one Newton step and the quotient corrected
//!   twice from its exact residual (`fma`), which rounds correctly; else
//!   (rare: a branch around it) the operands widened to f64, exactly, a
//!   reciprocal refined by two Newton steps to far beyond f64's precision,
//!   the quotient corrected once and rounded to f32: correctly rounded, as
//!   an f32 quotient cannot lie within f64's error of a rounding midpoint;
//!   zeros, infinities and NaN take `div.full`, exact on them;
//! - `rcp.rn x`: the division `1 / x`;
//! - square root: in f64 from a reciprocal square root seed (two Newton
//!   steps, one correction of the root from its residual), rounded to f32
//!   (the same midpoint argument); zeros, infinities, negatives and NaN
//!   take `sqrt.approx`, exact on them.
//!
//! The results are those of the IEEE operations, bit for bit, which is
//! what the language promises (`docs/language.md`, Numerics).

use crate::ir::*;
use crate::lower::builder::FnBuilder;

/// Rewrites `f`'s f32 `div.rn`, `rcp.rn` and `sqrt.rn` (see the module
/// docs).
pub fn expand(f: &mut Function) {
    let wanted = |i: &Inst| {
        matches!(
            i,
            Inst::Bin {
                op: BinOp::Div,
                ty: Ty::F32,
                ..
            } | Inst::Un {
                op: UnOp::Rcp | UnOp::Sqrt,
                ty: Ty::F32,
                ..
            }
        )
    };
    if !f.body.iter().any(wanted) {
        return;
    }
    let labels = f
        .body
        .iter()
        .filter_map(|i| match i {
            Inst::Label(l) => Some(l.0 + 1),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let mut e = FnBuilder::continuing(std::mem::take(&mut f.regs), labels);
    for i in std::mem::take(&mut f.body) {
        match i {
            Inst::Bin {
                op: BinOp::Div,
                ty: Ty::F32,
                dst,
                a,
                b,
            } => div(&mut e, dst, a, b),
            Inst::Un {
                op: UnOp::Rcp,
                ty: Ty::F32,
                dst,
                a,
            } => div(&mut e, dst, Operand::Float(1.0), a),
            Inst::Un {
                op: UnOp::Sqrt,
                ty: Ty::F32,
                dst,
                a,
            } => sqrt(&mut e, dst, a),
            i => e.push(i),
        }
    }
    f.regs = e.regs;
    f.body = e.body;
}

/// `o` in a register.
fn in_reg(e: &mut FnBuilder, o: Operand, ty: Ty) -> Reg {
    match o {
        Operand::Reg(r) => r,
        o => e.mov(ty, o),
    }
}

/// Whether `|x|` (f32, non-negative) is finite and nonzero.
fn finite_nonzero(e: &mut FnBuilder, ax: Reg) -> Reg {
    let pos = e.setp(Cmp::Gt, Ty::F32, ax, Operand::Float(0.0));
    let fin = e.setp(Cmp::Lt, Ty::F32, ax, Operand::Float(f64::INFINITY));
    e.pred_op(Some(BinOp::And), pos, fin)
}

/// `dst = a / b`, correctly rounded (module docs).
fn div(e: &mut FnBuilder, dst: Reg, a: Operand, b: Operand) {
    use Operand::{Float, Reg as R};
    let (a, b) = (in_reg(e, a, Ty::F32), in_reg(e, b, Ty::F32));
    let aa = e.un(UnOp::Abs, Ty::F32, R(a));
    let ab = e.un(UnOp::Abs, Ty::F32, R(b));
    let lo = e.bin(BinOp::Min, Ty::F32, R(aa), R(ab));
    let hi = e.bin(BinOp::Max, Ty::F32, R(aa), R(ab));
    let p_lo = e.setp(Cmp::Ge, Ty::F32, R(lo), Float(2f64.powi(-62)));
    let p_hi = e.setp(Cmp::Le, Ty::F32, R(hi), Float(2f64.powi(62)));
    let fast = e.pred_op(Some(BinOp::And), p_lo, p_hi);
    // The fast path: y ≈ 1/b to about half an ulp, then q corrected
    // twice from its exact residual a - b·q.
    let y0 = e.un(UnOp::RcpApprox, Ty::F32, R(b));
    let nb = e.un(UnOp::Neg, Ty::F32, R(b));
    let err = e.fma(Ty::F32, R(nb), R(y0), Float(1.0));
    let y = e.fma(Ty::F32, R(y0), R(err), R(y0));
    let q0 = e.bin(BinOp::Mul, Ty::F32, R(a), R(y));
    let r0 = e.fma(Ty::F32, R(nb), R(q0), R(a));
    let q1 = e.fma(Ty::F32, R(r0), R(y), R(q0));
    let r1 = e.fma(Ty::F32, R(nb), R(q1), R(a));
    // The result is written last (`dst` may be an operand).
    let res = e.fma(Ty::F32, R(r1), R(y), R(q1));
    let done = e.label();
    e.push(Inst::Bra {
        target: done,
        guard: Some(Guard {
            pred: fast,
            negated: false,
        }),
    });
    // The slow path, in f64.
    let full = e.bin(BinOp::DivFull, Ty::F32, R(a), R(b));
    let fa = finite_nonzero(e, aa);
    let fb = finite_nonzero(e, ab);
    let finite = e.pred_op(Some(BinOp::And), fa, fb);
    let a64 = e.cvt(Ty::F64, a);
    let b64 = e.cvt(Ty::F64, b);
    let nb64 = e.un(UnOp::Neg, Ty::F64, R(b64));
    let mut y = e.un(UnOp::RcpApprox, Ty::F64, R(b64));
    for _ in 0..2 {
        let err = e.fma(Ty::F64, R(nb64), R(y), Float(1.0));
        y = e.fma(Ty::F64, R(y), R(err), R(y));
    }
    let q = e.bin(BinOp::Mul, Ty::F64, R(a64), R(y));
    let r = e.fma(Ty::F64, R(nb64), R(q), R(a64));
    let q = e.fma(Ty::F64, R(r), R(y), R(q));
    let q32 = e.cvt(Ty::F32, q);
    e.push(Inst::Selp {
        ty: Ty::F32,
        dst: res,
        a: R(q32),
        b: R(full),
        pred: finite,
    });
    e.push(Inst::Label(done));
    e.push(Inst::Mov { dst, src: R(res) });
}

/// `dst = sqrt(x)`, correctly rounded (module docs).
fn sqrt(e: &mut FnBuilder, dst: Reg, x: Operand) {
    use Operand::{Float, Reg as R};
    let x = in_reg(e, x, Ty::F32);
    let pos = e.setp(Cmp::Gt, Ty::F32, R(x), Float(0.0));
    let fin = e.setp(Cmp::Lt, Ty::F32, R(x), Float(f64::INFINITY));
    let ok = e.pred_op(Some(BinOp::And), pos, fin);
    let special = e.un(UnOp::SqrtApprox, Ty::F32, R(x));
    let x64 = e.cvt(Ty::F64, x);
    let half = e.bin(BinOp::Mul, Ty::F64, R(x64), Float(0.5));
    let nhalf = e.un(UnOp::Neg, Ty::F64, R(half));
    // y ≈ 1/√x: y·(3/2 - (x/2)·y²), twice.
    let mut y = e.un(UnOp::RsqrtApprox, Ty::F64, R(x64));
    for _ in 0..2 {
        let yy = e.bin(BinOp::Mul, Ty::F64, R(y), R(y));
        let t = e.fma(Ty::F64, R(nhalf), R(yy), Float(1.5));
        y = e.bin(BinOp::Mul, Ty::F64, R(y), R(t));
    }
    // s ≈ √x, corrected once from its residual x - s².
    let s = e.bin(BinOp::Mul, Ty::F64, R(x64), R(y));
    let ns = e.un(UnOp::Neg, Ty::F64, R(s));
    let r = e.fma(Ty::F64, R(ns), R(s), R(x64));
    let hy = e.bin(BinOp::Mul, Ty::F64, R(y), Float(0.5));
    let s = e.fma(Ty::F64, R(r), R(hy), R(s));
    let s32 = e.cvt(Ty::F32, s);
    e.push(Inst::Selp {
        ty: Ty::F32,
        dst,
        a: R(s32),
        b: R(special),
        pred: ok,
    });
}

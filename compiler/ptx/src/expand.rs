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
    let mut e = Emit {
        regs: std::mem::take(&mut f.regs),
        out: Vec::with_capacity(f.body.len() + 64),
        next_label: labels,
    };
    for i in std::mem::take(&mut f.body) {
        match i {
            Inst::Bin {
                op: BinOp::Div,
                ty: Ty::F32,
                dst,
                a,
                b,
            } => e.div(dst, a, b),
            Inst::Un {
                op: UnOp::Rcp,
                ty: Ty::F32,
                dst,
                a,
            } => e.div(dst, Operand::Float(1.0), a),
            Inst::Un {
                op: UnOp::Sqrt,
                ty: Ty::F32,
                dst,
                a,
            } => e.sqrt(dst, a),
            i => e.out.push(i),
        }
    }
    f.regs = e.regs;
    f.body = e.out;
}

/// Instructions written into a function being rewritten.
struct Emit {
    regs: Vec<Ty>,
    out: Vec<Inst>,
    next_label: u32,
}

impl Emit {
    fn reg(&mut self, ty: Ty) -> Reg {
        self.regs.push(ty);
        Reg(self.regs.len() as u32 - 1)
    }

    fn bin(&mut self, op: BinOp, ty: Ty, a: Operand, b: Operand) -> Reg {
        let dst = self.reg(ty);
        self.out.push(Inst::Bin { op, ty, dst, a, b });
        dst
    }

    fn un(&mut self, op: UnOp, ty: Ty, a: Operand) -> Reg {
        let dst = self.reg(ty);
        self.out.push(Inst::Un { op, ty, dst, a });
        dst
    }

    fn fma(&mut self, ty: Ty, a: Operand, b: Operand, c: Operand) -> Reg {
        let dst = self.reg(ty);
        self.out.push(Inst::Fma { ty, dst, a, b, c });
        dst
    }

    fn setp(&mut self, cmp: Cmp, ty: Ty, a: Operand, b: Operand) -> Reg {
        let dst = self.reg(Ty::Pred);
        self.out.push(Inst::Setp { cmp, ty, dst, a, b });
        dst
    }

    fn and(&mut self, a: Reg, b: Reg) -> Reg {
        let dst = self.reg(Ty::Pred);
        self.out.push(Inst::PredOp {
            op: Some(BinOp::And),
            dst,
            a,
            b,
        });
        dst
    }

    fn cvt(&mut self, to: Ty, from: Ty, round: Round, src: Reg) -> Reg {
        let dst = self.reg(to);
        self.out.push(Inst::Cvt {
            to,
            from,
            round,
            dst,
            src,
        });
        dst
    }

    /// `o` in a register.
    fn in_reg(&mut self, o: Operand, ty: Ty) -> Reg {
        match o {
            Operand::Reg(r) => r,
            o => {
                let dst = self.reg(ty);
                self.out.push(Inst::Mov { dst, src: o });
                dst
            }
        }
    }

    /// Whether `|x|` (f32, non-negative) is finite and nonzero.
    fn finite_nonzero(&mut self, ax: Reg) -> Reg {
        let pos = self.setp(Cmp::Gt, Ty::F32, Operand::Reg(ax), Operand::Float(0.0));
        let fin = self.setp(
            Cmp::Lt,
            Ty::F32,
            Operand::Reg(ax),
            Operand::Float(f64::INFINITY),
        );
        self.and(pos, fin)
    }

    /// `dst = a / b`, correctly rounded (module docs).
    fn div(&mut self, dst: Reg, a: Operand, b: Operand) {
        use Operand::{Float, Reg as R};
        let (a, b) = (self.in_reg(a, Ty::F32), self.in_reg(b, Ty::F32));
        let aa = self.un(UnOp::Abs, Ty::F32, R(a));
        let ab = self.un(UnOp::Abs, Ty::F32, R(b));
        let lo = self.bin(BinOp::Min, Ty::F32, R(aa), R(ab));
        let hi = self.bin(BinOp::Max, Ty::F32, R(aa), R(ab));
        let p_lo = self.setp(Cmp::Ge, Ty::F32, R(lo), Float(2f64.powi(-62)));
        let p_hi = self.setp(Cmp::Le, Ty::F32, R(hi), Float(2f64.powi(62)));
        let fast = self.and(p_lo, p_hi);
        // The fast path: y ≈ 1/b to about half an ulp, then q corrected
        // twice from its exact residual a - b·q.
        let y0 = self.un(UnOp::RcpApprox, Ty::F32, R(b));
        let nb = self.un(UnOp::Neg, Ty::F32, R(b));
        let e = self.fma(Ty::F32, R(nb), R(y0), Float(1.0));
        let y = self.fma(Ty::F32, R(y0), R(e), R(y0));
        let q0 = self.bin(BinOp::Mul, Ty::F32, R(a), R(y));
        let r0 = self.fma(Ty::F32, R(nb), R(q0), R(a));
        let q1 = self.fma(Ty::F32, R(r0), R(y), R(q0));
        let r1 = self.fma(Ty::F32, R(nb), R(q1), R(a));
        // The result is written last (`dst` may be an operand).
        let res = self.fma(Ty::F32, R(r1), R(y), R(q1));
        let done = Label(self.next_label);
        self.next_label += 1;
        self.out.push(Inst::Bra {
            target: done,
            guard: Some(Guard {
                pred: fast,
                negated: false,
            }),
        });
        // The slow path, in f64.
        let full = self.bin(BinOp::DivFull, Ty::F32, R(a), R(b));
        let fa = self.finite_nonzero(aa);
        let fb = self.finite_nonzero(ab);
        let finite = self.and(fa, fb);
        let a64 = self.cvt(Ty::F64, Ty::F32, Round::None, a);
        let b64 = self.cvt(Ty::F64, Ty::F32, Round::None, b);
        let nb64 = self.un(UnOp::Neg, Ty::F64, R(b64));
        let mut y = self.un(UnOp::RcpApprox, Ty::F64, R(b64));
        for _ in 0..2 {
            let e = self.fma(Ty::F64, R(nb64), R(y), Float(1.0));
            y = self.fma(Ty::F64, R(y), R(e), R(y));
        }
        let q = self.bin(BinOp::Mul, Ty::F64, R(a64), R(y));
        let r = self.fma(Ty::F64, R(nb64), R(q), R(a64));
        let q = self.fma(Ty::F64, R(r), R(y), R(q));
        let q32 = self.cvt(Ty::F32, Ty::F64, Round::Nearest, q);
        self.out.push(Inst::Selp {
            ty: Ty::F32,
            dst: res,
            a: R(q32),
            b: R(full),
            pred: finite,
        });
        self.out.push(Inst::Label(done));
        self.out.push(Inst::Mov { dst, src: R(res) });
    }

    /// `dst = sqrt(x)`, correctly rounded (module docs).
    fn sqrt(&mut self, dst: Reg, x: Operand) {
        use Operand::{Float, Reg as R};
        let x = self.in_reg(x, Ty::F32);
        let pos = self.setp(Cmp::Gt, Ty::F32, R(x), Float(0.0));
        let fin = self.setp(Cmp::Lt, Ty::F32, R(x), Float(f64::INFINITY));
        let ok = self.and(pos, fin);
        let special = self.un(UnOp::SqrtApprox, Ty::F32, R(x));
        let x64 = self.cvt(Ty::F64, Ty::F32, Round::None, x);
        let half = self.bin(BinOp::Mul, Ty::F64, R(x64), Float(0.5));
        let nhalf = self.un(UnOp::Neg, Ty::F64, R(half));
        // y ≈ 1/√x: y·(3/2 - (x/2)·y²), twice.
        let mut y = self.un(UnOp::RsqrtApprox, Ty::F64, R(x64));
        for _ in 0..2 {
            let yy = self.bin(BinOp::Mul, Ty::F64, R(y), R(y));
            let t = self.fma(Ty::F64, R(nhalf), R(yy), Float(1.5));
            y = self.bin(BinOp::Mul, Ty::F64, R(y), R(t));
        }
        // s ≈ √x, corrected once from its residual x - s².
        let s = self.bin(BinOp::Mul, Ty::F64, R(x64), R(y));
        let ns = self.un(UnOp::Neg, Ty::F64, R(s));
        let r = self.fma(Ty::F64, R(ns), R(s), R(x64));
        let hy = self.bin(BinOp::Mul, Ty::F64, R(y), Float(0.5));
        let s = self.fma(Ty::F64, R(r), R(hy), R(s));
        let s32 = self.cvt(Ty::F32, Ty::F64, Round::Nearest, s);
        self.out.push(Inst::Selp {
            ty: Ty::F32,
            dst,
            a: R(s32),
            b: R(special),
            pred: ok,
        });
    }
}

//! Emission helpers: fresh registers and labels, and small instruction
//! sequences (constants, conversions, math functions) used by the lowering.

use crate::ir::*;

/// A kernel under construction.
pub(crate) struct FnBuilder {
    /// Register types.
    pub regs: Vec<Ty>,
    /// Instructions.
    pub body: Vec<Inst>,
    labels: u32,
    /// The source expression the code pushed from now on computes.
    span: tessera_tile::Span,
    /// The source the code at the end of `body` is recorded as computing
    /// (`None`: unknown, the next instruction records its own).
    recorded: Option<tessera_tile::Span>,
}

/// The key of a Philox stream: folded into the code, or in a 64-bit
/// register when it is known only at run time.
#[derive(Clone, Copy, Debug)]
pub enum PhiloxKey {
    /// A compile-time key.
    Const(u64),
    /// An `s64` register holding the key.
    Reg(Reg),
}

impl FnBuilder {
    pub fn new() -> FnBuilder {
        FnBuilder::continuing(Vec::new(), 0)
    }

    /// A builder writing a new body for a kernel whose registers are
    /// `regs` and whose labels are below `labels`.
    pub fn continuing(regs: Vec<Ty>, labels: u32) -> FnBuilder {
        FnBuilder {
            regs,
            body: Vec::new(),
            labels,
            span: Default::default(),
            recorded: None,
        }
    }

    /// Makes `span` the source expression of the instructions pushed from
    /// now on (see [`Inst::Source`]); returns the previous one.
    pub fn at(&mut self, span: tessera_tile::Span) -> tessera_tile::Span {
        std::mem::replace(&mut self.span, span)
    }

    /// Forgets which source the end of the body records (after code was
    /// moved out of it or into it): the next instruction records its own.
    pub fn unrecord(&mut self) {
        self.recorded = None;
    }

    /// Inserts `code` at `at` (code made elsewhere, moved into a prologue
    /// or a loop's preheader); the code after it keeps the source it had.
    /// Returns the number of instructions inserted.
    pub fn splice(&mut self, at: usize, mut code: Vec<Inst>) -> usize {
        if code.iter().any(|i| matches!(i, Inst::Source(_))) {
            let before = self.body[..at]
                .iter()
                .rev()
                .find_map(|i| match i {
                    Inst::Source(s) => Some(*s),
                    _ => None,
                })
                .unwrap_or_default();
            code.push(Inst::Source(before));
        }
        let n = code.len();
        self.body.splice(at..at, code);
        self.recorded = None;
        n
    }

    /// A fresh register of type `ty`.
    pub fn reg(&mut self, ty: Ty) -> Reg {
        self.regs.push(ty);
        Reg(self.regs.len() as u32 - 1)
    }

    /// A loop's head: label `top`, then a branch to `exit` once the
    /// variable `iv` (of type `ty`) reaches `hi`.
    pub fn loop_test(&mut self, top: Label, exit: Label, (ty, iv, hi): (Ty, Reg, Reg)) {
        self.push(Inst::Label(top));
        let done = self.setp(Cmp::Ge, ty, iv, hi);
        self.push(Inst::Bra {
            target: exit,
            guard: Some(Guard {
                pred: done,
                negated: false,
            }),
        });
    }

    /// A loop's end: the branch back to `top`, then label `exit`.
    pub fn loop_back(&mut self, top: Label, exit: Label) {
        self.push(Inst::Bra {
            target: top,
            guard: None,
        });
        self.push(Inst::Label(exit));
    }

    /// A fresh label.
    pub fn label(&mut self) -> Label {
        self.labels += 1;
        Label(self.labels - 1)
    }

    /// Appends an instruction, after a record of its source expression
    /// when that differs from the one before.
    pub fn push(&mut self, i: Inst) {
        let code = !matches!(
            i,
            Inst::Label(_) | Inst::Comment(_) | Inst::Loc { .. } | Inst::Source(_)
        );
        if code && self.recorded != Some(self.span) {
            self.body.push(Inst::Source(self.span));
            self.recorded = Some(self.span);
        }
        self.body.push(i);
    }

    /// The type of `r`.
    pub fn ty(&self, r: Reg) -> Ty {
        self.regs[r.index()]
    }

    /// A register holding `src`.
    pub fn mov(&mut self, ty: Ty, src: Operand) -> Reg {
        let dst = self.reg(ty);
        self.push(Inst::Mov { dst, src });
        dst
    }

    /// `a op b` in `ty`. A maximum or minimum of floats is NaN where
    /// either operand is (`max.NaN` for f32; f64 has no `.NaN` form, and
    /// its `max` returns the other operand, so a NaN is passed on by hand).
    pub fn bin(&mut self, op: BinOp, ty: Ty, a: impl Into<Operand>, b: impl Into<Operand>) -> Reg {
        let (a, b) = (a.into(), b.into());
        let dst = self.reg(ty);
        self.push(Inst::Bin { op, ty, dst, a, b });
        if ty == Ty::F64 && matches!(op, BinOp::Max | BinOp::Min) {
            // Constants are numbers: only registers may hold a NaN.
            let nans: Vec<Reg> = [a, b]
                .into_iter()
                .filter_map(|o| match o {
                    Operand::Reg(r) => Some(self.setp(Cmp::Ne, ty, r, r)),
                    _ => None,
                })
                .collect();
            let Some(nan) = nans
                .iter()
                .copied()
                .reduce(|p, q| self.pred_op(Some(BinOp::Or), p, q))
            else {
                return dst;
            };
            let either = self.bin(BinOp::Add, ty, a, b);
            return self.selp(ty, nan, either, dst);
        }
        dst
    }

    /// `op a` in `ty`.
    pub fn un(&mut self, op: UnOp, ty: Ty, a: impl Into<Operand>) -> Reg {
        let dst = self.reg(ty);
        self.push(Inst::Un {
            op,
            ty,
            dst,
            a: a.into(),
        });
        dst
    }

    /// `a * b + c` in `ty`.
    pub fn fma(
        &mut self,
        ty: Ty,
        a: impl Into<Operand>,
        b: impl Into<Operand>,
        c: impl Into<Operand>,
    ) -> Reg {
        let dst = self.reg(ty);
        self.push(Inst::Fma {
            ty,
            dst,
            a: a.into(),
            b: b.into(),
            c: c.into(),
        });
        dst
    }

    /// The predicate `a cmp b` in `ty`.
    pub fn setp(&mut self, cmp: Cmp, ty: Ty, a: impl Into<Operand>, b: impl Into<Operand>) -> Reg {
        let dst = self.reg(Ty::Pred);
        self.push(Inst::Setp {
            cmp,
            ty,
            dst,
            a: a.into(),
            b: b.into(),
        });
        dst
    }

    /// `pred ? a : b` in `ty` (predicates select through `and`/`or`).
    pub fn selp(&mut self, ty: Ty, pred: Reg, a: impl Into<Operand>, b: impl Into<Operand>) -> Reg {
        let (a, b) = (a.into(), b.into());
        if ty == Ty::Pred {
            // p ? a : b == (p and a) or (not p and b)
            let (Operand::Reg(a), Operand::Reg(b)) = (a, b) else {
                unreachable!("predicate operands are registers")
            };
            let t = self.pred_op(Some(BinOp::And), pred, a);
            let np = self.pred_op(None, pred, pred);
            let e = self.pred_op(Some(BinOp::And), np, b);
            return self.pred_op(Some(BinOp::Or), t, e);
        }
        let dst = self.reg(ty);
        self.push(Inst::Selp {
            ty,
            dst,
            a,
            b,
            pred,
        });
        dst
    }

    /// A predicate operation (`None`: not).
    pub fn pred_op(&mut self, op: Option<BinOp>, a: Reg, b: Reg) -> Reg {
        let dst = self.reg(Ty::Pred);
        self.push(Inst::PredOp { op, dst, a, b });
        dst
    }

    /// A conversion of `src` to `to`.
    pub fn cvt(&mut self, to: Ty, src: Reg) -> Reg {
        let from = self.ty(src);
        if from == to {
            return src;
        }
        let round = match (from.is_float(), to.is_float()) {
            (true, false) => Round::TowardZero,
            (false, true) => Round::Nearest,
            (true, true) if to.bytes() < from.bytes() => Round::Nearest,
            _ => Round::None,
        };
        let dst = self.reg(to);
        self.push(Inst::Cvt {
            to,
            from,
            round,
            dst,
            src,
        });
        dst
    }

    /// Rounds an f32 register to bf16 (`bf16`) or fp16 and widens it back.
    pub fn round_half(&mut self, bf16: bool, x: Reg) -> Reg {
        let h = self.reg(Ty::B16);
        self.push(Inst::CvtHalf {
            bf16,
            widen: false,
            dst: h,
            src: x,
        });
        let dst = self.reg(Ty::F32);
        self.push(Inst::CvtHalf {
            bf16,
            widen: true,
            dst,
            src: h,
        });
        dst
    }

    /// Two f32 values rounded to fp8 `fmt` and packed into 16 bits, `hi`
    /// in the upper byte. fp8_e4m3 saturates, as the hardware and the
    /// language do; fp8_e5m2 overflows to infinity in the language, so the
    /// hardware's saturated byte is replaced where the magnitude rounds past
    /// the largest finite value (|x| >= 61440, halfway to 2^16).
    pub fn f8x2(&mut self, fmt: Fmt, hi: Reg, lo: Reg) -> Reg {
        let mut d = self.reg(Ty::B16);
        self.push(Inst::CvtPack {
            fmt,
            dst: d,
            hi,
            lo,
        });
        if fmt == Fmt::E5m2 {
            for (x, shift) in [(lo, 0), (hi, 8)] {
                let ax = self.un(UnOp::Abs, Ty::F32, x);
                let big = self.setp(Cmp::Ge, Ty::F32, ax, Operand::Float(61440.0));
                let neg = self.setp(Cmp::Lt, Ty::F32, x, Operand::Float(0.0));
                let inf = self.selp(
                    Ty::B16,
                    neg,
                    Operand::Int(0xFC << shift),
                    Operand::Int(0x7C << shift),
                );
                let kept = self.bin(BinOp::And, Ty::B16, d, Operand::Int(0xFF00 >> shift));
                let fixed = self.bin(BinOp::Or, Ty::B16, kept, inf);
                d = self.selp(Ty::B16, big, fixed, d);
            }
        }
        d
    }

    /// An f32 rounded to fp8 `fmt`, in the low byte of a u32 (for `st.u8`).
    pub fn f8_narrow(&mut self, fmt: Fmt, x: Reg) -> Reg {
        let d = self.f8x2(fmt, x, x);
        let dst = self.reg(Ty::U32);
        // Written out: `cvt` names a signed source, not the b16 register's
        // own type (there is no `cvt.u32.b16`).
        self.push(Inst::Cvt {
            to: Ty::U32,
            from: Ty::S16,
            round: Round::None,
            dst,
            src: d,
        });
        dst
    }

    /// The fp8 `fmt` value in the low byte of `raw` (a 32-bit integer
    /// register), widened exactly to f32 through fp16.
    pub fn f8_widen(&mut self, fmt: Fmt, raw: Reg) -> Reg {
        let h = self.cvt(Ty::S16, raw);
        let pair = self.reg(Ty::U32);
        self.push(Inst::CvtF8Widen {
            fmt,
            dst: pair,
            src: h,
        });
        let lo = self.cvt(Ty::S16, pair);
        let dst = self.reg(Ty::F32);
        self.push(Inst::CvtHalf {
            bf16: false,
            widen: true,
            dst,
            src: lo,
        });
        dst
    }

    /// A polynomial `c[0] + c[1] x + c[2] x^2 + ...` by Horner's rule.
    fn poly(&mut self, x: Reg, c: &[f64]) -> Reg {
        self.poly_in(Ty::F32, x, c)
    }

    /// The uniform fp32 value in [0, 1) of Philox-4x32-10 for 64-bit
    /// `counter` (an `s64` register) under key `seed`: ten rounds of 32-bit
    /// `mul.hi`/`mul.lo`/`xor`, then the top 24 bits of the first word
    /// times 2^-24, exactly `tessera_tensor::uniform_f32`.
    pub fn philox_f32(&mut self, seed: PhiloxKey, counter: Reg) -> Reg {
        const M0: i64 = 0xD251_1F53;
        const M1: i64 = 0xCD9E_8D57;
        const W0: i64 = 0x9E37_79B9;
        const W1: i64 = 0xBB67_AE85;
        let low = |b: &mut Self, r: Reg| b.cvt(Ty::U32, r);
        let high = |b: &mut Self, r: Reg| {
            let h = b.bin(BinOp::Shr, Ty::S64, r, Operand::Int(32));
            b.cvt(Ty::U32, h)
        };
        // The key's two words: folded when the seed is a constant, split
        // from its 64-bit register when it is known only at run time.
        let (mut k0, mut k1) = match seed {
            PhiloxKey::Reg(r) => (low(self, r), high(self, r)),
            PhiloxKey::Const(k) => (
                self.mov(Ty::U32, Operand::Int(i64::from(k as u32))),
                self.mov(Ty::U32, Operand::Int((k >> 32) as i64)),
            ),
        };
        let (c0, c1) = (low(self, counter), high(self, counter));
        // Round 1 with the upper counter words zero: M1 * 0 vanishes.
        let hi0 = self.bin(BinOp::MulHi, Ty::U32, c0, Operand::Int(M0));
        let lo0 = self.bin(BinOp::Mul, Ty::U32, c0, Operand::Int(M0));
        let n0 = self.bin(BinOp::Xor, Ty::U32, c1, k0);
        let n2 = self.bin(BinOp::Xor, Ty::U32, hi0, k1);
        let zero = self.mov(Ty::U32, Operand::Int(0));
        let mut c = [n0, zero, n2, lo0];
        for _ in 1..10 {
            k0 = self.bin(BinOp::Add, Ty::U32, k0, Operand::Int(W0));
            k1 = self.bin(BinOp::Add, Ty::U32, k1, Operand::Int(W1));
            let hi0 = self.bin(BinOp::MulHi, Ty::U32, c[0], Operand::Int(M0));
            let lo0 = self.bin(BinOp::Mul, Ty::U32, c[0], Operand::Int(M0));
            let hi1 = self.bin(BinOp::MulHi, Ty::U32, c[2], Operand::Int(M1));
            let lo1 = self.bin(BinOp::Mul, Ty::U32, c[2], Operand::Int(M1));
            let t0 = self.bin(BinOp::Xor, Ty::U32, hi1, c[1]);
            let t2 = self.bin(BinOp::Xor, Ty::U32, hi0, c[3]);
            c = [
                self.bin(BinOp::Xor, Ty::U32, t0, k0),
                lo1,
                self.bin(BinOp::Xor, Ty::U32, t2, k1),
                lo0,
            ];
        }
        let top = self.bin(BinOp::Shr, Ty::U32, c[0], Operand::Int(8));
        let f = self.cvt(Ty::F32, top);
        self.bin(BinOp::Mul, Ty::F32, f, Operand::Float(1.0 / 16_777_216.0))
    }

    /// sin x (or cos x) in f32, to about 2 ulp for |x| below 2^50: x is
    /// reduced by the nearest multiple q of π/2 in three parts (Cody and
    /// Waite, with fused multiply-adds), in f32 up to 2^17 and in f64
    /// above (where f32 has too few bits for q and the rest), the rest r
    /// in [-π/4, π/4] goes through Cephes's sinf or cosf polynomial, and
    /// q mod 4 (plus one for cos) picks the polynomial and the sign.
    /// From 2^50 on the reduction has no bits left (no Payne–Hanek yet):
    /// the value is NaN there, never a wrong number.
    pub fn sin_cos_f32(&mut self, x: Reg, cos: bool) -> Reg {
        const P1: f64 = 1.570_796_370_506_286_6;
        const P2: f64 = -4.371_138_828_673_793e-8;
        const P3: f64 = -1.715_124_510_005_905_2e-15;
        // The nearest integer to x·2/π, as a float: adding and removing
        // 1.5·2^23 rounds it (exact below 2^22).
        const ROUND: f64 = 12_582_912.0;
        let t = self.bin(
            BinOp::Mul,
            Ty::F32,
            x,
            Operand::Float(std::f64::consts::FRAC_2_PI),
        );
        let t = self.bin(BinOp::Add, Ty::F32, t, Operand::Float(ROUND));
        let q = self.bin(BinOp::Sub, Ty::F32, t, Operand::Float(ROUND));
        let nq = self.un(UnOp::Neg, Ty::F32, q);
        let r = self.fma(Ty::F32, nq, Operand::Float(P1), x);
        let r = self.fma(Ty::F32, nq, Operand::Float(P2), r);
        let r = self.fma(Ty::F32, nq, Operand::Float(P3), r);
        let qi = self.cvt(Ty::S32, q);
        // Above 2^17, q and r from the reduction in f64.
        let (qd, rd) = self.reduce_pio2_f64(x);
        let ax = self.un(UnOp::Abs, Ty::F32, x);
        let big = self.setp(Cmp::Gt, Ty::F32, ax, Operand::Float(131_072.0));
        let r = self.selp(Ty::F32, big, rd, r);
        let qi = self.selp(Ty::S32, big, qd, qi);
        let z = self.bin(BinOp::Mul, Ty::F32, r, r);
        // sin r = r + r z (S1 + z (S2 + z S3))
        let s = self.fma(
            Ty::F32,
            z,
            Operand::Float(-1.951_529_589_1e-4),
            Operand::Float(8.332_160_873_6e-3),
        );
        let s = self.fma(Ty::F32, z, s, Operand::Float(-1.666_665_461_1e-1));
        let rz = self.bin(BinOp::Mul, Ty::F32, r, z);
        let s = self.fma(Ty::F32, rz, s, r);
        // cos r = 1 - z/2 + z² (C1 + z (C2 + z C3))
        let c = self.fma(
            Ty::F32,
            z,
            Operand::Float(2.443_315_711_809_948e-5),
            Operand::Float(-1.388_731_625_493_765e-3),
        );
        let c = self.fma(Ty::F32, z, c, Operand::Float(4.166_664_568_298_827e-2));
        let zz = self.bin(BinOp::Mul, Ty::F32, z, z);
        let half = self.fma(Ty::F32, z, Operand::Float(-0.5), Operand::Float(1.0));
        let c = self.fma(Ty::F32, zz, c, half);
        // The quadrant: q mod 4, plus one for cos (cos x = sin(x + π/2)).
        let n = if cos {
            self.bin(BinOp::Add, Ty::S32, qi, Operand::Int(1))
        } else {
            qi
        };
        let odd = self.bin(BinOp::And, Ty::S32, n, Operand::Int(1));
        let odd = self.setp(Cmp::Ne, Ty::S32, odd, Operand::Int(0));
        let v = self.selp(Ty::F32, odd, c, s);
        let neg = self.bin(BinOp::And, Ty::S32, n, Operand::Int(2));
        let neg = self.setp(Cmp::Ne, Ty::S32, neg, Operand::Int(0));
        let nv = self.un(UnOp::Neg, Ty::F32, v);
        let v = self.selp(Ty::F32, neg, nv, v);
        // sin ±0 is ±0 (the polynomial's rounding would lose the sign).
        let v = if cos {
            v
        } else {
            let zero = self.setp(Cmp::Eq, Ty::F32, x, Operand::Float(0.0));
            self.selp(Ty::F32, zero, x, v)
        };
        // NaN, not a wrong number, where the reduction ran out of bits.
        let huge = self.setp(
            Cmp::Ge,
            Ty::F32,
            ax,
            Operand::Float(1_125_899_906_842_624.0),
        );
        self.selp(Ty::F32, huge, Operand::Float(f64::NAN), v)
    }

    /// f32 `x` as n·π/2 + r with n the integer nearest x·2/π, both found
    /// in f64 (π/2 in three parts, each product exact inside a fused
    /// multiply-add): n mod 2^32 as s32 and r as f32.
    fn reduce_pio2_f64(&mut self, x: Reg) -> (Reg, Reg) {
        const ROUND: f64 = 6_755_399_441_055_744.0;
        let f = Ty::F64;
        let xd = self.cvt(f, x);
        let t = self.bin(
            BinOp::Mul,
            f,
            xd,
            Operand::Float(std::f64::consts::FRAC_2_PI),
        );
        let up = self.bin(BinOp::Add, f, t, Operand::Float(ROUND));
        let n = self.bin(BinOp::Sub, f, up, Operand::Float(ROUND));
        let nn = self.un(UnOp::Neg, f, n);
        let mut r = xd;
        for p in super::math64::PIO2 {
            r = self.fma(f, nn, Operand::Float(p), r);
        }
        let q = self.cvt(Ty::S64, n);
        (self.cvt(Ty::S32, q), self.cvt(Ty::F32, r))
    }

    /// e^x in f32: 2^p on the special-function unit for p = x·log2 e
    /// rounded, times 1 + e·ln 2 for the product's rounding error e (its
    /// exact part from a fused multiply-add, plus x times log2 e's own
    /// error), which ex2 alone would keep: a relative error growing with
    /// |x| (50 ulp at x = 80, as CUDA's `__expf`), a few ulp with it.
    /// Where 2^q is not a finite normal number the correction is left out
    /// (the result is 0, ∞ or NaN there, where `r + r·c` would be NaN), and a subnormal result
    /// (x below -87.3, where ex2 flushes to 0) is 2^(p + 64) · 2^-64.
    pub fn exp_f32(&mut self, x: Reg) -> Reg {
        let l = std::f64::consts::LOG2_E as f32;
        let low = std::f64::consts::LOG2_E - f64::from(l);
        let p = self.bin(BinOp::Mul, Ty::F32, x, Operand::Float(f64::from(l)));
        let np = self.un(UnOp::Neg, Ty::F32, p);
        let e = self.fma(Ty::F32, x, Operand::Float(f64::from(l)), np);
        let e = self.fma(Ty::F32, x, Operand::Float(low), e);
        let c = self.bin(
            BinOp::Mul,
            Ty::F32,
            e,
            Operand::Float(std::f64::consts::LN_2),
        );
        let tiny = self.setp(Cmp::Lt, Ty::F32, p, Operand::Float(-120.0));
        let up = self.bin(BinOp::Add, Ty::F32, p, Operand::Float(64.0));
        let q = self.selp(Ty::F32, tiny, up, p);
        let r = self.un(UnOp::Ex2, Ty::F32, q);
        let corrected = self.fma(Ty::F32, r, c, r);
        // r finite and normal: 2^-126 ≤ r < 2^128.
        let below = self.setp(Cmp::Lt, Ty::F32, q, Operand::Float(128.0));
        let above = self.setp(Cmp::Gt, Ty::F32, q, Operand::Float(-126.0));
        let inside = self.pred_op(Some(BinOp::And), below, above);
        let r = self.selp(Ty::F32, inside, corrected, r);
        let down = self.bin(
            BinOp::Mul,
            Ty::F32,
            r,
            Operand::Float(5.421010862427522e-20),
        );
        self.selp(Ty::F32, tiny, down, r)
    }

    /// ln x in f32.
    pub fn log_f32(&mut self, x: Reg) -> Reg {
        let t = self.un(UnOp::Lg2, Ty::F32, x);
        self.bin(
            BinOp::Mul,
            Ty::F32,
            t,
            Operand::Float(std::f64::consts::LN_2),
        )
    }

    /// tanh x in f32, to a few ulp: an odd series below |x| = 0.6 (11
    /// terms), else
    /// `sign(x) (1 - 2 / (e^{2|x|} + 1))`.
    pub fn tanh_f32(&mut self, x: Reg) -> Reg {
        let ax = self.un(UnOp::Abs, Ty::F32, x);
        let x2 = self.bin(BinOp::Mul, Ty::F32, x, x);
        let series = [
            1.0,
            -1.0 / 3.0,
            2.0 / 15.0,
            -17.0 / 315.0,
            62.0 / 2835.0,
            -1382.0 / 155925.0,
            21844.0 / 6081075.0,
            -929569.0 / 638512875.0,
            6404582.0 / 10854718875.0,
            -443861162.0 / 1856156927625.0,
            18888466084.0 / 194896477400625.0,
        ];
        let p = self.poly(x2, &series);
        let small = self.bin(BinOp::Mul, Ty::F32, p, x);
        let two = self.bin(BinOp::Add, Ty::F32, ax, ax);
        let e = self.exp_f32(two);
        let d = self.bin(BinOp::Add, Ty::F32, e, Operand::Float(1.0));
        // (Inside an approximation the reciprocal's ulp suffices; d ≥ 1.)
        let r = self.un(UnOp::RcpApprox, Ty::F32, d);
        let q = self.bin(BinOp::Mul, Ty::F32, r, Operand::Float(2.0));
        let big = self.bin(BinOp::Sub, Ty::F32, Operand::Float(1.0), q);
        let neg = self.setp(Cmp::Lt, Ty::F32, x, Operand::Float(0.0));
        let nbig = self.un(UnOp::Neg, Ty::F32, big);
        let signed = self.selp(Ty::F32, neg, nbig, big);
        let is_small = self.setp(Cmp::Lt, Ty::F32, ax, Operand::Float(0.6));
        self.selp(Ty::F32, is_small, small, signed)
    }

    /// erf x in f32: the Maclaurin series below |x| = 1 (13 terms, past
    /// f32's precision there), else Abramowitz and Stegun 7.1.26 (absolute
    /// error below 1.5e-7, where erf is above 0.84).
    pub fn erf_f32(&mut self, x: Reg) -> Reg {
        let ax = self.un(UnOp::Abs, Ty::F32, x);
        let x2 = self.bin(BinOp::Mul, Ty::F32, x, x);
        // 2/√π · (-1)^n / (n! (2n + 1)).
        let k = std::f64::consts::FRAC_2_SQRT_PI;
        let mut factorial = 1.0;
        let series: Vec<f64> = (0..13)
            .map(|n| {
                if n > 0 {
                    factorial *= n as f64;
                }
                let sign = if n % 2 == 0 { 1.0 } else { -1.0 };
                sign * k / (factorial * (2 * n + 1) as f64)
            })
            .collect();
        let p = self.poly(x2, &series);
        let small = self.bin(BinOp::Mul, Ty::F32, p, x);
        let pt = self.fma(Ty::F32, ax, Operand::Float(0.3275911), Operand::Float(1.0));
        // (pt ≥ 1: the reciprocal's approximation is far below the formula's.)
        let t = self.un(UnOp::RcpApprox, Ty::F32, pt);
        let a = [
            0.0,
            0.254829592,
            -0.284496736,
            1.421413741,
            -1.453152027,
            1.061405429,
        ];
        let q = self.poly(t, &a);
        let nx2 = self.un(UnOp::Neg, Ty::F32, x2);
        let e = self.exp_f32(nx2);
        let qe = self.bin(BinOp::Mul, Ty::F32, q, e);
        let big = self.bin(BinOp::Sub, Ty::F32, Operand::Float(1.0), qe);
        let neg = self.setp(Cmp::Lt, Ty::F32, x, Operand::Float(0.0));
        let nbig = self.un(UnOp::Neg, Ty::F32, big);
        let signed = self.selp(Ty::F32, neg, nbig, big);
        let is_small = self.setp(Cmp::Lt, Ty::F32, ax, Operand::Float(1.0));
        self.selp(Ty::F32, is_small, small, signed)
    }
}

//! fp64 `exp`, `log`, `tanh`, `erf`, `sin` and `cos` for the GPU path,
//! which has no f64 transcendental instructions: argument reduction, series
//! and continued fractions in f64 arithmetic, within a few ulp of the CPU
//! backend's libm; and the exact floating-point remainder (`fmod`) for f32
//! and f64.

use super::builder::FnBuilder;
use crate::ir::*;

/// π/2 in three f64 parts (their sum is π/2 to 2^-162).
pub(super) const PIO2: [f64; 3] = [
    1.570_796_326_794_896_6,
    6.123_233_995_736_766e-17,
    -1.497_384_904_859_169_8e-33,
];

/// ln 2 split so that `n·LN2_HI` is exact for |n| < 2^11.
const LN2_HI: f64 = 6.931_471_803_691_238_164_9e-1;
const LN2_LO: f64 = 1.908_214_929_270_587_700_02e-10;

impl FnBuilder {
    /// `Σ c[k]·x^k` in `ty` by Horner's rule (fused multiply-adds).
    pub fn poly_in(&mut self, ty: Ty, x: Reg, c: &[f64]) -> Reg {
        let mut acc = self.mov(ty, Operand::Float(*c.last().unwrap_or(&0.0)));
        for k in c.iter().rev().skip(1) {
            acc = self.fma(ty, acc, x, Operand::Float(*k));
        }
        acc
    }

    /// 2^n for an integer-valued s64 `n` in [-1022, 1023], built from its
    /// exponent bits.
    fn pow2_f64(&mut self, n: Reg) -> Reg {
        let biased = self.bin(BinOp::Add, Ty::S64, n, Operand::Int(1023));
        let bits = self.bin(BinOp::Shl, Ty::B64, biased, Operand::Int(52));
        let dst = self.reg(Ty::F64);
        self.push(Inst::Mov {
            dst,
            src: Operand::Reg(bits),
        });
        dst
    }

    /// `x = n·ln 2 + r`: `n` the integer nearest `x·log2 e` (rounded by the
    /// 1.5·2^52 trick), clamped to ±`limit`, as an f64; `r` (|r| ≤ ln2/2
    /// unless clamped) with ln 2 in two parts, so that `n·LN2_HI` is exact.
    fn reduce_ln2(&mut self, x: Reg, limit: f64) -> (Reg, Reg) {
        const ROUND: f64 = 6_755_399_441_055_744.0;
        let log2e = Operand::Float(std::f64::consts::LOG2_E);
        let t = self.bin(BinOp::Mul, Ty::F64, x, log2e);
        let t = self.bin(BinOp::Max, Ty::F64, t, Operand::Float(-limit));
        let t = self.bin(BinOp::Min, Ty::F64, t, Operand::Float(limit));
        let up = self.bin(BinOp::Add, Ty::F64, t, Operand::Float(ROUND));
        let n = self.bin(BinOp::Sub, Ty::F64, up, Operand::Float(ROUND));
        let nn = self.un(UnOp::Neg, Ty::F64, n);
        let r = self.fma(Ty::F64, nn, Operand::Float(LN2_HI), x);
        let r = self.fma(Ty::F64, nn, Operand::Float(LN2_LO), r);
        (n, r)
    }

    /// e^x in f64: x = n·ln 2 + r with |r| ≤ ln2/2 (n rounded by the
    /// 1.5·2^52 trick, r in two parts), e^r by its Taylor series to r^13,
    /// then scaled by 2^n in two steps (so that results near the overflow
    /// and underflow thresholds keep their value). NaN stays NaN; below
    /// -746 the result is 0.
    pub fn exp_f64(&mut self, x: Reg) -> Reg {
        let (n, r) = self.reduce_ln2(x, 1100.0);
        // Below the underflow threshold (-745.13) e^x is 0: past -762 the
        // clamped n leaves a huge negative r, whose series is not (it gave
        // -2.6e-321 at -800).
        self.exp_scaled(x, n, r, -746.0)
    }

    /// 2^x in f64: x = n + f with n the nearest integer (the 1.5·2^52
    /// trick, clamped to ±1100) and |f| ≤ 1/2 exact, 2^f = e^(f ln 2) by
    /// [`FnBuilder::exp_f64`]'s series, scaled by 2^n. Below -1100 the
    /// result is 0.
    pub fn exp2_f64(&mut self, x: Reg) -> Reg {
        const ROUND: f64 = 6_755_399_441_055_744.0;
        let t = self.bin(BinOp::Max, Ty::F64, x, Operand::Float(-1100.0));
        let t = self.bin(BinOp::Min, Ty::F64, t, Operand::Float(1100.0));
        let up = self.bin(BinOp::Add, Ty::F64, t, Operand::Float(ROUND));
        let n = self.bin(BinOp::Sub, Ty::F64, up, Operand::Float(ROUND));
        let f = self.bin(BinOp::Sub, Ty::F64, x, n);
        let r = self.bin(
            BinOp::Mul,
            Ty::F64,
            f,
            Operand::Float(std::f64::consts::LN_2),
        );
        self.exp_scaled(x, n, r, -1100.0)
    }

    /// e^r · 2^n for |r| ≤ ln2/2 (`n` an integer-valued f64): e^r by its
    /// Taylor series to r^13, then scaled by 2^n in two steps (so that
    /// results near the overflow and underflow thresholds keep their
    /// value); 0 where `x` is below `under`, NaN where `x` is NaN.
    fn exp_scaled(&mut self, x: Reg, n: Reg, r: Reg, under: f64) -> Reg {
        let mut c = vec![1.0f64];
        for k in 1..=13 {
            let last = c[k - 1];
            c.push(last / k as f64);
        }
        let p = self.poly_in(Ty::F64, r, &c);
        // 2^n = 2^a · 2^b with a = n >> 1 and b = n - a, each in range.
        let ni = self.cvt(Ty::S64, n);
        let a = self.bin(BinOp::Shr, Ty::S64, ni, Operand::Int(1));
        let b = self.bin(BinOp::Sub, Ty::S64, ni, a);
        let (sa, sb) = (self.pow2_f64(a), self.pow2_f64(b));
        let y = self.bin(BinOp::Mul, Ty::F64, p, sa);
        let y = self.bin(BinOp::Mul, Ty::F64, y, sb);
        let below = self.setp(Cmp::Lt, Ty::F64, x, Operand::Float(under));
        let y = self.selp(Ty::F64, below, Operand::Float(0.0), y);
        let nan = self.setp(Cmp::Ne, Ty::F64, x, x);
        self.selp(Ty::F64, nan, x, y)
    }

    /// ln x in f64: x = m·2^e with m in [√½, √2), ln m = 2·atanh(s) with
    /// s = (m - 1)/(m + 1) by its odd series to s^21, plus e·ln 2 in two
    /// parts. Subnormals are scaled by 2^54 first; ln 0 = -∞, ln ∞ = ∞,
    /// and a negative x (or NaN) gives NaN.
    pub fn log_f64(&mut self, x: Reg) -> Reg {
        let (m, e) = self.mantissa_f64(x);
        let f = self.bin(BinOp::Sub, Ty::F64, m, Operand::Float(1.0));
        let d = self.bin(BinOp::Add, Ty::F64, f, Operand::Float(2.0));
        let s = self.bin(BinOp::Div, Ty::F64, f, d);
        let s2 = self.bin(BinOp::Mul, Ty::F64, s, s);
        let c: Vec<f64> = (1..=10).map(|k| 2.0 / (2 * k + 1) as f64).collect();
        let t = self.poly_in(Ty::F64, s2, &c);
        let t = self.bin(BinOp::Mul, Ty::F64, t, s2);
        let two_s = self.bin(BinOp::Add, Ty::F64, s, s);
        let logm = self.fma(Ty::F64, s, t, two_s);
        let ef = self.cvt(Ty::F64, e);
        let lo = self.fma(Ty::F64, ef, Operand::Float(LN2_LO), logm);
        let y = self.fma(Ty::F64, ef, Operand::Float(LN2_HI), lo);
        // The special values.
        let zero = self.setp(Cmp::Eq, Ty::F64, x, Operand::Float(0.0));
        let y = self.selp(Ty::F64, zero, Operand::Float(f64::NEG_INFINITY), y);
        let inf = self.setp(Cmp::Eq, Ty::F64, x, Operand::Float(f64::INFINITY));
        let y = self.selp(Ty::F64, inf, x, y);
        let neg = self.setp(Cmp::Lt, Ty::F64, x, Operand::Float(0.0));
        let nan = self.setp(Cmp::Ne, Ty::F64, x, x);
        let bad = self.pred_op(Some(BinOp::Or), neg, nan);
        self.selp(Ty::F64, bad, Operand::Float(f64::NAN), y)
    }

    /// `a^y` for `a ≥ 0` (or NaN) in f64, within a few ulp: e^(y·ln a)
    /// with ln a in two parts ([`FnBuilder::log_parts_f64`]) and the
    /// product `y·ln a` split exactly, e^(p + q) = e^p + e^p·q. ln 0 is
    /// -∞ and ln ∞ = ∞ (an infinite `p` is taken alone); NaN stays NaN.
    pub fn pow_abs_f64(&mut self, a: Reg, y: Reg) -> Reg {
        let f = Ty::F64;
        let (hi, lo) = self.log_parts_f64(a);
        let zero = self.setp(Cmp::Eq, f, a, Operand::Float(0.0));
        let hi = self.selp(f, zero, Operand::Float(f64::NEG_INFINITY), hi);
        let inf = self.setp(Cmp::Eq, f, a, Operand::Float(f64::INFINITY));
        let hi = self.selp(f, inf, a, hi);
        let nan = self.setp(Cmp::Ne, f, a, a);
        let hi = self.selp(f, nan, a, hi);
        let p = self.bin(BinOp::Mul, f, y, hi);
        let np = self.un(UnOp::Neg, f, p);
        let perr = self.fma(f, y, hi, np);
        let q = self.fma(f, y, lo, perr);
        let e = self.exp_f64(p);
        let r = self.fma(f, e, q, e);
        // An infinite product (or one NaN) has no second part, nor has an
        // e^p that overflowed: ∞·q + ∞ is NaN for a negative q.
        let ap = self.un(UnOp::Abs, f, p);
        let finite = self.setp(Cmp::Lt, f, ap, Operand::Float(f64::INFINITY));
        let held = self.setp(Cmp::Lt, f, e, Operand::Float(f64::INFINITY));
        let finite = self.pred_op(Some(BinOp::And), finite, held);
        self.selp(f, finite, r, e)
    }

    /// ln x as `hi + lo` for a finite positive `x`, to about 2^-65: as
    /// [`FnBuilder::log_f64`], with `s = (m - 1)/(m + 1)` and the sums
    /// that carry it (`m + 1`, `e·ln 2 + 2s`) kept in two parts.
    fn log_parts_f64(&mut self, x: Reg) -> (Reg, Reg) {
        let f = Ty::F64;
        let (m, e) = self.mantissa_f64(x);
        let num = self.bin(BinOp::Sub, f, m, Operand::Float(1.0));
        let (d, d_lo) = self.two_sum(m, Operand::Float(1.0));
        let s = self.bin(BinOp::Div, f, num, d);
        let ns = self.un(UnOp::Neg, f, s);
        let r = self.fma(f, ns, d, num);
        let r = self.fma(f, ns, d_lo, r);
        let s_lo = self.bin(BinOp::Div, f, r, d);
        let s2 = self.bin(BinOp::Mul, f, s, s);
        let c: Vec<f64> = (1..=10).map(|k| 2.0 / (2 * k + 1) as f64).collect();
        let t = self.poly_in(f, s2, &c);
        let t = self.bin(BinOp::Mul, f, t, s2);
        let two_s = self.bin(BinOp::Add, f, s, s);
        let two_lo = self.bin(BinOp::Add, f, s_lo, s_lo);
        let b = self.fma(f, s, t, two_lo);
        let ef = self.cvt(f, e);
        let eh = self.bin(BinOp::Mul, f, ef, Operand::Float(LN2_HI));
        let (h, herr) = self.two_sum(eh, two_s);
        let l = self.bin(BinOp::Add, f, herr, b);
        let l = self.fma(f, ef, Operand::Float(LN2_LO), l);
        let hi = self.bin(BinOp::Add, f, h, l);
        let back = self.bin(BinOp::Sub, f, hi, h);
        let lo = self.bin(BinOp::Sub, f, l, back);
        (hi, lo)
    }

    /// `a + b` as `s + e` exactly (Knuth's two-sum, any magnitudes).
    fn two_sum(&mut self, a: Reg, b: impl Into<Operand>) -> (Reg, Reg) {
        let f = Ty::F64;
        let b = b.into();
        let s = self.bin(BinOp::Add, f, a, b);
        let bb = self.bin(BinOp::Sub, f, s, a);
        let sb = self.bin(BinOp::Sub, f, s, bb);
        let ea = self.bin(BinOp::Sub, f, a, sb);
        let eb = self.bin(BinOp::Sub, f, b, bb);
        (s, self.bin(BinOp::Add, f, ea, eb))
    }

    /// `x = m·2^e` for a finite positive `x` (subnormals included), with
    /// `m` in [√½, √2) and `e` an s64.
    fn mantissa_f64(&mut self, x: Reg) -> (Reg, Reg) {
        let (bits, e) = self.exponent_f64(x);
        let mb = self.bin(
            BinOp::And,
            Ty::B64,
            bits,
            Operand::Int(0x000F_FFFF_FFFF_FFFF),
        );
        let mb = self.bin(BinOp::Or, Ty::B64, mb, Operand::Int(0x3FF0_0000_0000_0000));
        let m = self.reg(Ty::F64);
        self.push(Inst::Mov {
            dst: m,
            src: Operand::Reg(mb),
        });
        let high = self.setp(
            Cmp::Gt,
            Ty::F64,
            m,
            Operand::Float(std::f64::consts::SQRT_2),
        );
        let half = self.bin(BinOp::Mul, Ty::F64, m, Operand::Float(0.5));
        let m = self.selp(Ty::F64, high, half, m);
        let e1 = self.bin(BinOp::Add, Ty::S64, e, Operand::Int(1));
        let e = self.selp(Ty::S64, high, e1, e);
        (m, e)
    }

    /// The exponent of a finite, non-zero f64 as an s64 (`floor(log2 |v|)`),
    /// subnormals included (they are scaled by 2^54 first), with the bits
    /// of `v` so scaled (their mantissa is `v`'s, normalised).
    fn exponent_f64(&mut self, v: Reg) -> (Reg, Reg) {
        let tiny = self.setp(Cmp::Lt, Ty::F64, v, Operand::Float(f64::MIN_POSITIVE));
        let scaled = self.bin(
            BinOp::Mul,
            Ty::F64,
            v,
            Operand::Float(18_014_398_509_481_984.0),
        );
        let vs = self.selp(Ty::F64, tiny, scaled, v);
        let bits = self.reg(Ty::B64);
        self.push(Inst::Mov {
            dst: bits,
            src: Operand::Reg(vs),
        });
        let be = self.bin(BinOp::Shr, Ty::B64, bits, Operand::Int(52));
        let be = self.bin(BinOp::And, Ty::B64, be, Operand::Int(0x7FF));
        let e = self.reg(Ty::S64);
        self.push(Inst::Mov {
            dst: e,
            src: Operand::Reg(be),
        });
        let bias = self.selp(Ty::S64, tiny, Operand::Int(1023 + 54), Operand::Int(1023));
        (bits, self.bin(BinOp::Sub, Ty::S64, e, bias))
    }

    /// `x % y` in f64 as C's `fmod` (and Rust's `%`) defines it: `x - n·y`
    /// with `n = trunc(x / y)`, exact, with the sign of `x`; NaN when `y`
    /// is 0 or `x` infinite, `x` when `y` is infinite.
    ///
    /// A loop of exact reduction steps: while `r ≥ |y|`, take
    /// `s = |y|·2^k` with `k` the largest shift that keeps `r / s` below
    /// 2^52, `q = trunc(r / s)` (the true quotient's floor or one more:
    /// the division rounds once), and `r = fma(-q, s, r)` (exact: the
    /// remainder is a multiple of `ulp(s)` below `s` in magnitude), adding
    /// `s` back when `q` was one too many. `s` is a multiple of `|y|`, so
    /// `r` stays `x` modulo `y`; each step removes 51 binades, so an f64
    /// takes at most 42 trips and an f32 (computed here in f64) 6.
    pub fn fmod_f64(&mut self, x: Reg, y: Reg) -> Reg {
        let ax = self.un(UnOp::Abs, Ty::F64, x);
        let ay = self.un(UnOp::Abs, Ty::F64, y);
        let zero = self.setp(Cmp::Eq, Ty::F64, ay, Operand::Float(0.0));
        let inf = self.setp(Cmp::Eq, Ty::F64, ax, Operand::Float(f64::INFINITY));
        let nan = self.setp(Cmp::Ne, Ty::F64, y, y);
        let bad = self.pred_op(Some(BinOp::Or), zero, inf);
        let bad = self.pred_op(Some(BinOp::Or), bad, nan);
        // A NaN remainder leaves the loop at once (`r ≥ |y|` is false).
        let r = self.selp(Ty::F64, bad, Operand::Float(f64::NAN), ax);
        let (_, ey) = self.exponent_f64(ay);
        let (top, exit) = (self.label(), self.label());
        self.push(Inst::Label(top));
        let more = self.setp(Cmp::Ge, Ty::F64, r, ay);
        self.push(Inst::Bra {
            target: exit,
            guard: Some(Guard {
                pred: more,
                negated: true,
            }),
        });
        let (_, er) = self.exponent_f64(r);
        let k = self.bin(BinOp::Sub, Ty::S64, er, ey);
        let k = self.bin(BinOp::Sub, Ty::S64, k, Operand::Int(51));
        let k = self.bin(BinOp::Max, Ty::S64, k, Operand::Int(0));
        // 2^k in three factors (k reaches 2097; each factor stays in range,
        // and every partial product lies between |y| and r).
        let mut s = ay;
        let mut left = k;
        for _ in 0..3 {
            let part = self.bin(BinOp::Min, Ty::S64, left, Operand::Int(1000));
            left = self.bin(BinOp::Sub, Ty::S64, left, part);
            let p2 = self.pow2_f64(part);
            s = self.bin(BinOp::Mul, Ty::F64, s, p2);
        }
        let quotient = self.bin(BinOp::Div, Ty::F64, r, s);
        let qi = self.cvt(Ty::S64, quotient);
        let q = self.cvt(Ty::F64, qi);
        let nq = self.un(UnOp::Neg, Ty::F64, q);
        let rest = self.fma(Ty::F64, nq, s, r);
        let under = self.setp(Cmp::Lt, Ty::F64, rest, Operand::Float(0.0));
        let fixed = self.bin(BinOp::Add, Ty::F64, rest, s);
        let next = self.selp(Ty::F64, under, fixed, rest);
        self.push(Inst::Mov {
            dst: r,
            src: Operand::Reg(next),
        });
        self.loop_back(top, exit);
        // The sign of x (a zero remainder keeps it too).
        self.with_sign_of(r, x)
    }

    /// A non-negative (or NaN) f64 `mag` with the sign bit of `x`.
    fn with_sign_of(&mut self, mag: Reg, x: Reg) -> Reg {
        let xb = self.reg(Ty::B64);
        self.push(Inst::Mov {
            dst: xb,
            src: Operand::Reg(x),
        });
        let sign = self.bin(BinOp::And, Ty::B64, xb, Operand::Int(i64::MIN));
        let mb = self.reg(Ty::B64);
        self.push(Inst::Mov {
            dst: mb,
            src: Operand::Reg(mag),
        });
        let out = self.bin(BinOp::Or, Ty::B64, mb, sign);
        let dst = self.reg(Ty::F64);
        self.push(Inst::Mov {
            dst,
            src: Operand::Reg(out),
        });
        dst
    }

    /// e^x - 1 in f64, accurate near 0: x = n·ln 2 + r as in
    /// [`exp_f64`](Self::exp_f64), e^r - 1 by its Taylor series to r^14
    /// (no cancellation: the constant term is left out), then
    /// `2^n (e^r - 1) + (2^n - 1)` in one fused multiply-add, both terms
    /// exact for |n| < 54. Beyond, e^x itself (n ≥ 54: the 1 is below half
    /// an ulp) or -1 (x < -40).
    pub fn expm1_f64(&mut self, x: Reg) -> Reg {
        let (n, r) = self.reduce_ln2(x, 60.0);
        // (e^r - 1) / r = Σ r^k / (k + 1)!
        let mut c = vec![1.0f64];
        for k in 2..=14 {
            let last = c[c.len() - 1];
            c.push(last / k as f64);
        }
        let q = self.poly_in(Ty::F64, r, &c);
        let p = self.bin(BinOp::Mul, Ty::F64, q, r);
        let ni = self.cvt(Ty::S64, n);
        let s = self.pow2_f64(ni);
        let sm1 = self.bin(BinOp::Sub, Ty::F64, s, Operand::Float(1.0));
        let y = self.fma(Ty::F64, s, p, sm1);
        let e = self.exp_f64(x);
        let big = self.setp(Cmp::Ge, Ty::F64, n, Operand::Float(54.0));
        let y = self.selp(Ty::F64, big, e, y);
        let low = self.setp(Cmp::Lt, Ty::F64, x, Operand::Float(-40.0));
        self.selp(Ty::F64, low, Operand::Float(-1.0), y)
    }

    /// tanh x in f64: `t / (t + 2)` with `t = e^{2|x|} - 1` (accurate for
    /// small |x| too), 1 beyond |x| = 22, with the sign of x (-0 stays -0).
    pub fn tanh_f64(&mut self, x: Reg) -> Reg {
        let a = self.un(UnOp::Abs, Ty::F64, x);
        let two = self.bin(BinOp::Add, Ty::F64, a, a);
        let t = self.expm1_f64(two);
        let d = self.bin(BinOp::Add, Ty::F64, t, Operand::Float(2.0));
        let y = self.bin(BinOp::Div, Ty::F64, t, d);
        let sat = self.setp(Cmp::Gt, Ty::F64, a, Operand::Float(22.0));
        let y = self.selp(Ty::F64, sat, Operand::Float(1.0), y);
        self.with_sign_of(y, x)
    }

    /// erf x in f64, within a few ulp: below |x| = 1.75 its Maclaurin
    /// series to x^65; up to 6, `1 - erfc x` with erfc from its continued
    /// fraction `e^{-x²}/√π · 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + ...))))`
    /// to 60 terms (the convergents' numerators and denominators by their
    /// recurrence: two fused multiply-adds a term, one division), e^{-x²}
    /// with x² split exactly; beyond, ±1. Odd; NaN stays NaN.
    pub fn erf_f64(&mut self, x: Reg) -> Reg {
        let a = self.un(UnOp::Abs, Ty::F64, x);
        // The series: erf a = a Σ c_n (a²)^n, c_n = 2/√π (-1)^n / (n! (2n+1)).
        let u = self.bin(BinOp::Mul, Ty::F64, a, a);
        let mut factorial = 1.0f64;
        let c: Vec<f64> = (0..=32)
            .map(|n| {
                if n > 0 {
                    factorial *= f64::from(n);
                }
                let sign = if n % 2 == 0 { 1.0 } else { -1.0 };
                std::f64::consts::FRAC_2_SQRT_PI * sign / (factorial * f64::from(2 * n + 1))
            })
            .collect();
        let series = self.poly_in(Ty::F64, u, &c);
        let small = self.bin(BinOp::Mul, Ty::F64, series, a);
        // The continued fraction's convergent A_K / B_K.
        let (mut a2, mut a1) = (
            self.mov(Ty::F64, Operand::Float(1.0)),
            self.mov(Ty::F64, Operand::Float(0.0)),
        );
        let (mut b2, mut b1) = (
            self.mov(Ty::F64, Operand::Float(0.0)),
            self.mov(Ty::F64, Operand::Float(1.0)),
        );
        for j in 1..=60u32 {
            let aj = if j == 1 { 1.0 } else { f64::from(j - 1) / 2.0 };
            let ta = self.bin(BinOp::Mul, Ty::F64, a2, Operand::Float(aj));
            let na = self.fma(Ty::F64, a, a1, ta);
            let tb = self.bin(BinOp::Mul, Ty::F64, b2, Operand::Float(aj));
            let nb = self.fma(Ty::F64, a, b1, tb);
            (a2, a1, b2, b1) = (a1, na, b1, nb);
        }
        let ratio = self.bin(BinOp::Div, Ty::F64, a1, b1);
        // e^{-x²} = e^{-hi} (1 - lo), x² = hi + lo exactly.
        let hi = self.bin(BinOp::Mul, Ty::F64, a, a);
        let nhi = self.un(UnOp::Neg, Ty::F64, hi);
        let lo = self.fma(Ty::F64, a, a, nhi);
        let e = self.exp_f64(nhi);
        let nlo = self.un(UnOp::Neg, Ty::F64, lo);
        let e = self.fma(Ty::F64, e, nlo, e);
        let erfc = self.bin(BinOp::Mul, Ty::F64, e, ratio);
        let one_over_sqrt_pi = 0.5 * std::f64::consts::FRAC_2_SQRT_PI;
        let nk = Operand::Float(-one_over_sqrt_pi);
        let mid = self.fma(Ty::F64, erfc, nk, Operand::Float(1.0));
        let is_small = self.setp(Cmp::Lt, Ty::F64, a, Operand::Float(1.75));
        let y = self.selp(Ty::F64, is_small, small, mid);
        let big = self.setp(Cmp::Ge, Ty::F64, a, Operand::Float(6.0));
        let y = self.selp(Ty::F64, big, Operand::Float(1.0), y);
        self.with_sign_of(y, x)
    }

    /// sin x or cos x in f64, within 2 ulp of libm for |x| < 2^50: x =
    /// n·π/2 + r with n the integer nearest x·2/π (the 1.5·2^52 trick) and
    /// r in two parts, `hi + lo` (π/2 in three parts; the first product is
    /// exact inside a fused multiply-add, the second split exactly), then
    /// the Taylor series of sin or cos at `hi` (to r^19 and r^20, |r| ≤
    /// π/4) corrected by `lo`, chosen and signed by n mod 4. Below 2^-27,
    /// sin x = x (signed zeros and subnormals kept) and cos x = 1;
    /// infinities and NaN give NaN. Beyond 2^50 the reduction has no
    /// bits left (there is no Payne–Hanek reduction yet).
    pub fn sin_cos_f64(&mut self, x: Reg, cos: bool) -> Reg {
        const ROUND: f64 = 6_755_399_441_055_744.0;
        let f = Ty::F64;
        let t = self.bin(
            BinOp::Mul,
            f,
            x,
            Operand::Float(std::f64::consts::FRAC_2_PI),
        );
        let up = self.bin(BinOp::Add, f, t, Operand::Float(ROUND));
        let n = self.bin(BinOp::Sub, f, up, Operand::Float(ROUND));
        let nn = self.un(UnOp::Neg, f, n);
        // r1 = x - n·P0, exact; w = n·P1 exactly as w_hi + w_lo.
        let r1 = self.fma(f, nn, Operand::Float(PIO2[0]), x);
        let w_hi = self.bin(BinOp::Mul, f, n, Operand::Float(PIO2[1]));
        let nw = self.un(UnOp::Neg, f, w_hi);
        let w_lo = self.fma(f, n, Operand::Float(PIO2[1]), nw);
        // s + e = r1 - w_hi exactly.
        let (s, e) = self.two_sum(r1, nw);
        let lo = self.bin(BinOp::Sub, f, e, w_lo);
        let lo = self.fma(f, nn, Operand::Float(PIO2[2]), lo);
        // hi + lo = s + lo, |s| ≥ |lo| (fast two-sum).
        let hi = self.bin(BinOp::Add, f, s, lo);
        let d = self.bin(BinOp::Sub, f, hi, s);
        let lo = self.bin(BinOp::Sub, f, lo, d);
        let z = self.bin(BinOp::Mul, f, hi, hi);
        // sin r = hi + (hi·z·S(z) + lo), S(z) = Σ_{k≥1} (-1)^k z^{k-1}/(2k+1)!.
        let (sc, cc) = sin_cos_taylor();
        let sp = self.poly_in(f, z, &sc);
        let hz = self.bin(BinOp::Mul, f, hi, z);
        let sp = self.fma(f, hz, sp, lo);
        let sin = self.bin(BinOp::Add, f, hi, sp);
        // cos r = w + (((1 - w) - z/2) + (z²·C(z) - hi·lo)), w = 1 - z/2,
        // C(z) = Σ_{k≥2} (-1)^k z^{k-2}/(2k)!.
        let half = self.bin(BinOp::Mul, f, z, Operand::Float(0.5));
        let w = self.bin(BinOp::Sub, f, Operand::Float(1.0), half);
        let back = self.bin(BinOp::Sub, f, Operand::Float(1.0), w);
        let tail = self.bin(BinOp::Sub, f, back, half);
        let cp = self.poly_in(f, z, &cc);
        let zz = self.bin(BinOp::Mul, f, z, z);
        let hl = self.bin(BinOp::Mul, f, hi, lo);
        let nhl = self.un(UnOp::Neg, f, hl);
        let cp = self.fma(f, zz, cp, nhl);
        let cp = self.bin(BinOp::Add, f, tail, cp);
        let cosv = self.bin(BinOp::Add, f, w, cp);
        // The quadrant: n mod 4, plus one for cos (cos x = sin(x + π/2)).
        let q = self.cvt(Ty::S64, n);
        let q = if cos {
            self.bin(BinOp::Add, Ty::S64, q, Operand::Int(1))
        } else {
            q
        };
        let odd = self.bin(BinOp::And, Ty::S64, q, Operand::Int(1));
        let odd = self.setp(Cmp::Ne, Ty::S64, odd, Operand::Int(0));
        let v = self.selp(f, odd, cosv, sin);
        let neg = self.bin(BinOp::And, Ty::S64, q, Operand::Int(2));
        let neg = self.setp(Cmp::Ne, Ty::S64, neg, Operand::Int(0));
        let nv = self.un(UnOp::Neg, f, v);
        let v = self.selp(f, neg, nv, v);
        let ax = self.un(UnOp::Abs, f, x);
        let tiny = self.setp(Cmp::Lt, f, ax, Operand::Float(7.450_580_596_923_828e-9));
        let small = if cos {
            Operand::Float(1.0)
        } else {
            Operand::Reg(x)
        };
        self.selp(f, tiny, small, v)
    }
}

/// The Taylor coefficients of [`FnBuilder::sin_cos_f64`]'s polynomials in
/// z = r²: sin's `(-1)^k / (2k+1)!` for k in 1..=9, cos's `(-1)^k / (2k)!`
/// for k in 2..=10.
fn sin_cos_taylor() -> (Vec<f64>, Vec<f64>) {
    let factorial = |n: u32| (1..=n).fold(1.0f64, |p, i| p * f64::from(i));
    let sign = |k: u32| if k % 2 == 0 { 1.0 } else { -1.0 };
    let sin = (1..=9).map(|k| sign(k) / factorial(2 * k + 1)).collect();
    let cos = (2..=10).map(|k| sign(k) / factorial(2 * k)).collect();
    (sin, cos)
}

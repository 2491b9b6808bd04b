//! The arithmetic of one lane: what each Target IR operation computes on
//! register bits, with the rounding the hardware uses.
//!
//! A register holds the raw bits of its type in the low bits of a `u64`
//! (32-bit types leave the upper half zero; predicates are 0 or 1).

use tessera_ptx::ir::{BinOp, Cmp, Fmt, Operand, RedOp, Round, Ty, UnOp};

/// Bits of `ty` masked from `v`.
pub fn trunc(ty: Ty, v: u64) -> u64 {
    match ty.bytes() {
        1 => v & 0xFF,
        2 => v & 0xFFFF,
        4 => v & 0xFFFF_FFFF,
        _ => v,
    }
}

/// The value of register bits `v` of `ty` as a signed integer.
fn sint(ty: Ty, v: u64) -> i64 {
    match ty.bytes() {
        1 => v as u8 as i8 as i64,
        2 => v as u16 as i16 as i64,
        4 => v as u32 as i32 as i64,
        _ => v as i64,
    }
}

fn is_signed(ty: Ty) -> bool {
    matches!(ty, Ty::S8 | Ty::S16 | Ty::S32 | Ty::S64)
}

fn f32_of(v: u64) -> f32 {
    f32::from_bits(v as u32)
}

fn bits32(x: f32) -> u64 {
    u64::from(x.to_bits())
}

/// The bits an immediate has when used at type `ty`.
pub fn immediate(o: Operand, ty: Ty) -> u64 {
    match (o, ty) {
        (Operand::Int(i), Ty::F32) => bits32(i as f32),
        (Operand::Int(i), Ty::F64) => (i as f64).to_bits(),
        (Operand::Int(i), Ty::Pred) => u64::from(i != 0),
        (Operand::Int(i), t) => trunc(t, i as u64),
        (Operand::Float(x), Ty::F32) => bits32(x as f32),
        (Operand::Float(x), Ty::F64) => x.to_bits(),
        (Operand::Float(x), t) => trunc(t, x as i64 as u64),
        (Operand::Reg(_), _) => 0,
    }
}

/// Whether f32 `x` is subnormal (flushed to zero by `.ftz`).
fn subnormal(x: f32) -> bool {
    x != 0.0 && x.abs() < f32::MIN_POSITIVE
}

/// `.ftz`: a subnormal value becomes a zero of the same sign.
fn ftz(x: f32) -> f32 {
    if subnormal(x) {
        0.0f32.copysign(x)
    } else {
        x
    }
}

/// The bits of `x` with the low 32 of them zero (an f64 approximation
/// computed on the high word).
fn high_word(x: f64) -> u64 {
    x.to_bits() & !0xFFFF_FFFF
}

/// The new value of an atomic `red.op.ty` of `v` into `old`.
pub fn reduce(op: RedOp, ty: Ty, old: u64, v: u64) -> u64 {
    let op = match op {
        RedOp::Add => BinOp::Add,
        RedOp::Max => BinOp::Max,
        RedOp::Min => BinOp::Min,
    };
    trunc(ty, bin(op, ty, old, v))
}

/// `a op b` in `ty`; `None` for an integer division by zero.
pub fn bin(op: BinOp, ty: Ty, a: u64, b: u64) -> u64 {
    match ty {
        Ty::F32 => {
            let (x, y) = (f32_of(a), f32_of(b));
            let r = match op {
                BinOp::Add => x + y,
                BinOp::Sub => x - y,
                BinOp::Mul => x * y,
                BinOp::Div => x / y,
                // `div.full`: the reciprocal, then a product (two roundings,
                // within its 2 ulp), as the hardware computes it; exact on
                // zeros, infinities and NaN.
                BinOp::DivFull => x * (1.0 / y),
                BinOp::Rem => x % y,
                // `.NaN`: a NaN operand gives NaN.
                BinOp::Max if x.is_nan() || y.is_nan() => f32::NAN,
                BinOp::Min if x.is_nan() || y.is_nan() => f32::NAN,
                BinOp::Max => x.max(y),
                BinOp::Min => x.min(y),
                _ => return bin_bits(op, ty, a, b),
            };
            bits32(r)
        }
        Ty::F64 => {
            let (x, y) = (f64::from_bits(a), f64::from_bits(b));
            let r = match op {
                BinOp::Add => x + y,
                BinOp::Sub => x - y,
                BinOp::Mul => x * y,
                BinOp::Div => x / y,
                BinOp::Rem => x % y,
                BinOp::Max => x.max(y),
                BinOp::Min => x.min(y),
                _ => return bin_bits(op, ty, a, b),
            };
            r.to_bits()
        }
        _ => bin_bits(op, ty, a, b),
    }
}

/// Integer and bitwise operations.
fn bin_bits(op: BinOp, ty: Ty, a: u64, b: u64) -> u64 {
    let width = ty.bytes() * 8;
    let signed = is_signed(ty);
    let (sa, sb) = (sint(ty, a), sint(ty, b));
    let (ua, ub) = (trunc(ty, a), trunc(ty, b));
    let r = match op {
        BinOp::Add => ua.wrapping_add(ub),
        BinOp::Sub => ua.wrapping_sub(ub),
        BinOp::Mul => ua.wrapping_mul(ub),
        BinOp::MulHi if signed => ((i128::from(sa) * i128::from(sb)) >> width) as u64,
        BinOp::MulHi => ((u128::from(ua) * u128::from(ub)) >> width) as u64,
        // Division by zero has no defined result in PTX; the hardware
        // gives all ones, and so do we.
        BinOp::Div | BinOp::DivFull if ub == 0 => u64::MAX,
        BinOp::Rem if ub == 0 => ua,
        BinOp::Div if signed => sa.wrapping_div(sb) as u64,
        BinOp::Rem if signed => sa.wrapping_rem(sb) as u64,
        BinOp::Div | BinOp::DivFull => ua / ub,
        BinOp::Rem => ua % ub,
        BinOp::Max if signed => sa.max(sb) as u64,
        BinOp::Min if signed => sa.min(sb) as u64,
        BinOp::Max => ua.max(ub),
        BinOp::Min => ua.min(ub),
        BinOp::And => a & b,
        BinOp::Or => a | b,
        BinOp::Xor => a ^ b,
        // Shift amounts past the width shift everything out.
        BinOp::Shl if ub >= u64::from(width) => 0,
        BinOp::Shl => ua << ub,
        BinOp::Shr if signed => (sa >> ub.min(u64::from(width) - 1)) as u64,
        BinOp::Shr if ub >= u64::from(width) => 0,
        BinOp::Shr => ua >> ub,
    };
    trunc(ty, r)
}

/// `op a` in `ty`.
pub fn un(op: UnOp, ty: Ty, a: u64) -> u64 {
    match ty {
        Ty::Pred => u64::from(a == 0),
        Ty::F32 => {
            let x = f32_of(a);
            let r = match op {
                UnOp::Neg => -x,
                UnOp::Abs => x.abs(),
                UnOp::Not => return bits32(f32::from_bits(!(a as u32))),
                UnOp::Sqrt => x.sqrt(),
                UnOp::Rcp => 1.0 / x,
                // The approximations are within their documented error
                // of the exact value; we compute it in double precision.
                UnOp::Ex2 => ftz((f64::from(ftz(x))).exp2() as f32),
                UnOp::Lg2 => ftz((f64::from(ftz(x))).log2() as f32),
                UnOp::Tanh => (f64::from(x)).tanh() as f32,
                // One ulp short of the reciprocal (the hardware's is within
                // one ulp), so that what refines it is exercised.
                UnOp::RcpApprox => {
                    let r = ftz(1.0 / ftz(x));
                    if r.is_finite() && r != 0.0 {
                        f32::from_bits(r.to_bits() - 1)
                    } else {
                        r
                    }
                }
                UnOp::RsqrtApprox => 1.0 / x.sqrt(),
                UnOp::SqrtApprox => x.sqrt(),
            };
            bits32(r)
        }
        Ty::F64 => {
            let x = f64::from_bits(a);
            let r = match op {
                UnOp::Neg => -x,
                UnOp::Abs => x.abs(),
                UnOp::Not => return !a,
                UnOp::Sqrt => x.sqrt(),
                UnOp::Rcp => 1.0 / x,
                UnOp::Ex2 => x.exp2(),
                UnOp::Lg2 => x.log2(),
                UnOp::Tanh => x.tanh(),
                UnOp::SqrtApprox => x.sqrt(),
                // The hardware computes the high word only (its low word
                // is zero): about 20 bits, a seed for Newton steps.
                UnOp::RcpApprox => return high_word(1.0 / x),
                UnOp::RsqrtApprox => return high_word(1.0 / x.sqrt()),
            };
            r.to_bits()
        }
        _ => {
            let r = match op {
                UnOp::Neg => (sint(ty, a)).wrapping_neg() as u64,
                UnOp::Abs => (sint(ty, a)).wrapping_abs() as u64,
                _ => !a,
            };
            trunc(ty, r)
        }
    }
}

/// `a * b + c` in `ty`, rounded once for floats.
pub fn fma(ty: Ty, a: u64, b: u64, c: u64) -> u64 {
    match ty {
        Ty::F32 => bits32(f32_of(a).mul_add(f32_of(b), f32_of(c))),
        Ty::F64 => f64::from_bits(a)
            .mul_add(f64::from_bits(b), f64::from_bits(c))
            .to_bits(),
        _ => trunc(ty, a.wrapping_mul(b).wrapping_add(c)),
    }
}

/// `a cmp b` in `ty`: floats compare ordered, except `!=` (`neu`).
pub fn setp(cmp: Cmp, ty: Ty, a: u64, b: u64) -> bool {
    let ord = match ty {
        Ty::F32 => f32_of(a).partial_cmp(&f32_of(b)),
        Ty::F64 => f64::from_bits(a).partial_cmp(&f64::from_bits(b)),
        t if is_signed(t) => Some(sint(t, a).cmp(&sint(t, b))),
        t => Some(trunc(t, a).cmp(&trunc(t, b))),
    };
    use std::cmp::Ordering::*;
    match (cmp, ord) {
        (Cmp::Ne, None) => true,
        (_, None) => false,
        (Cmp::Eq, Some(o)) => o == Equal,
        (Cmp::Ne, Some(o)) => o != Equal,
        (Cmp::Lt, Some(o)) => o == Less,
        (Cmp::Le, Some(o)) => o != Greater,
        (Cmp::Gt, Some(o)) => o == Greater,
        (Cmp::Ge, Some(o)) => o != Less,
    }
}

/// The value of register bits `v` of `ty` as an f64 (exact for every
/// integer type up to 2^53 and for f32).
fn as_f64(ty: Ty, v: u64) -> f64 {
    match ty {
        Ty::F32 => f64::from(f32_of(v)),
        Ty::F64 => f64::from_bits(v),
        t if is_signed(t) => sint(t, v) as f64,
        t => trunc(t, v) as f64,
    }
}

/// A float converted to an integer type: rounded toward zero, saturated
/// to the type's range, NaN to 0 (as PTX defines `cvt.rzi`).
fn float_to_int(to: Ty, x: f64) -> u64 {
    if x.is_nan() {
        return 0;
    }
    let bits = to.bytes() * 8;
    let r = if is_signed(to) {
        let lo = -(2f64.powi(bits as i32 - 1));
        let hi = 2f64.powi(bits as i32 - 1) - 1.0;
        x.trunc().clamp(lo, hi) as i64 as u64
    } else {
        let hi = 2f64.powi(bits as i32) - 1.0;
        x.trunc().clamp(0.0, hi) as u64
    };
    trunc(to, r)
}

/// `cvt` from `from` to `to`.
pub fn cvt(to: Ty, from: Ty, round: Round, v: u64) -> u64 {
    match (to, from) {
        (Ty::F32, Ty::F64) => bits32(f64::from_bits(v) as f32),
        (Ty::F64, Ty::F32) => f64::from(f32_of(v)).to_bits(),
        (Ty::F32, f) if !f.is_float() => {
            // Integer to float, rounded to nearest even (as `as` does).
            if is_signed(f) {
                bits32(sint(f, v) as f32)
            } else {
                bits32(trunc(f, v) as f32)
            }
        }
        (Ty::F64, f) if !f.is_float() => {
            if is_signed(f) {
                (sint(f, v) as f64).to_bits()
            } else {
                (trunc(f, v) as f64).to_bits()
            }
        }
        (t, f) if f.is_float() && !t.is_float() => {
            let x = as_f64(f, v);
            let x = match round {
                Round::Nearest | Round::NearestInt => x.round_ties_even(),
                Round::Floor => x.floor(),
                Round::Ceil => x.ceil(),
                _ => x,
            };
            float_to_int(t, x)
        }
        // A float rounded to an integral value of its own type (exact).
        (Ty::F32, Ty::F32) => {
            let x = f32_of(v);
            bits32(match round {
                Round::NearestInt => x.round_ties_even(),
                Round::Floor => x.floor(),
                Round::Ceil => x.ceil(),
                Round::TowardZero => x.trunc(),
                _ => x,
            })
        }
        (Ty::F64, Ty::F64) => {
            let x = f64::from_bits(v);
            match round {
                Round::NearestInt => x.round_ties_even(),
                Round::Floor => x.floor(),
                Round::Ceil => x.ceil(),
                Round::TowardZero => x.trunc(),
                _ => x,
            }
            .to_bits()
        }
        (t, f) if t == f => v,
        // Integer to integer: sign- or zero-extend the source, truncate to
        // the destination.
        (t, f) if is_signed(f) => trunc(t, sint(f, v) as u64),
        (t, f) => trunc(t, trunc(f, v)),
    }
}

/// f32 to bf16 bits, rounded to nearest even; NaN becomes the canonical
/// NaN the hardware produces.
pub fn to_bf16(x: f32) -> u16 {
    if x.is_nan() {
        return 0x7FFF;
    }
    let b = x.to_bits();
    let round = 0x7FFF + ((b >> 16) & 1);
    (b.wrapping_add(round) >> 16) as u16
}

/// bf16 bits to f32 (exact).
pub fn from_bf16(h: u16) -> f32 {
    f32::from_bits(u32::from(h) << 16)
}

/// f32 to fp16 bits, rounded to nearest even; NaN canonical.
pub fn to_f16(x: f32) -> u16 {
    if x.is_nan() {
        return 0x7FFF;
    }
    half::f16::from_f32(x).to_bits()
}

/// fp16 bits to f32 (exact).
pub fn from_f16(h: u16) -> f32 {
    half::f16::from_bits(h).to_f32()
}

/// A 16-bit float to f32.
pub fn widen(bf16: bool, h: u16) -> f32 {
    if bf16 {
        from_bf16(h)
    } else {
        from_f16(h)
    }
}

/// f32 to a 16-bit float.
pub fn narrow(bf16: bool, x: f32) -> u16 {
    if bf16 {
        to_bf16(x)
    } else {
        to_f16(x)
    }
}

/// f32 to `fmt` bits as the packing conversions round: bf16 and fp16 to
/// nearest even; fp8 to nearest even and saturated to the largest finite
/// value (`.satfinite`: infinities too), NaN to `0x7F`; tf32 as
/// `cvt.rn.tf32.f32`.
pub fn pack(fmt: Fmt, x: f32) -> u64 {
    match fmt {
        Fmt::Bf16 => u64::from(to_bf16(x)),
        Fmt::F16 => u64::from(to_f16(x)),
        Fmt::Tf32 => u64::from(to_tf32(false, x)),
        Fmt::E4m3 | Fmt::E5m2 if x.is_nan() => 0x7F,
        Fmt::E4m3 => u64::from(tessera_tensor::dtype::f8e4m3_from_f32(x)),
        Fmt::E5m2 => {
            let b = tessera_tensor::dtype::f8e5m2_from_f32(x);
            // Saturated: an infinity becomes the largest finite value.
            u64::from(if b & 0x7F == 0x7C { b & 0x80 | 0x7B } else { b })
        }
        // (Integer fragments are packed as integers, never from floats.)
        Fmt::S8 => u64::from(x as i8 as u8),
        Fmt::U8 => u64::from(x as u8),
    }
}

/// The value of operand bits `v` (the low 8, 16 or 32) in `fmt`; a tf32
/// operand ignores its low 13 bits, as the tensor cores do.
pub fn operand(fmt: Fmt, v: u32) -> f32 {
    match fmt {
        Fmt::Bf16 => from_bf16(v as u16),
        Fmt::F16 => from_f16(v as u16),
        Fmt::Tf32 => f32::from_bits(v & !0x1FFF),
        Fmt::E4m3 => tessera_tensor::dtype::f8e4m3_to_f32(v as u8),
        Fmt::E5m2 => tessera_tensor::dtype::f8e5m2_to_f32(v as u8),
        Fmt::S8 => f32::from(v as u8 as i8),
        Fmt::U8 => f32::from(v as u8),
    }
}

/// f32 to tf32 (f32 bits with the low 13 mantissa bits zero), rounding
/// ties away from zero (`rna`) or to even; NaN and infinities kept.
pub fn to_tf32(rna: bool, x: f32) -> u32 {
    let b = x.to_bits();
    if !x.is_finite() {
        return if x.is_nan() { 0x7FFF_FFFF } else { b };
    }
    let round = if rna { 0x1000 } else { 0xFFF + ((b >> 13) & 1) };
    // A carry out of the mantissa steps the exponent (to infinity at the
    // top), as rounding should.
    b.wrapping_add(round) & !0x1FFF
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_rounds_to_nearest_even() {
        assert_eq!(to_bf16(1.0), 0x3F80);
        // 1 + 2^-8 is exactly halfway between 1 and 1 + 2^-7: ties to even.
        assert_eq!(to_bf16(1.0 + 2f32.powi(-8)), 0x3F80);
        assert_eq!(to_bf16(1.0 + 3.0 * 2f32.powi(-8)), 0x3F82);
        assert_eq!(to_bf16(f32::NAN), 0x7FFF);
        assert_eq!(to_bf16(f32::INFINITY), 0x7F80);
        assert_eq!(from_bf16(0xC000), -2.0);
    }

    #[test]
    fn integer_ops_follow_the_type() {
        assert_eq!(bin(BinOp::Div, Ty::S64, (-7i64) as u64, 2), (-3i64) as u64);
        assert_eq!(bin(BinOp::Rem, Ty::S64, (-7i64) as u64, 2), (-1i64) as u64);
        assert_eq!(bin(BinOp::Shr, Ty::S32, 0x8000_0000, 4), 0xF800_0000);
        assert_eq!(bin(BinOp::Shr, Ty::U32, 0x8000_0000, 4), 0x0800_0000);
        assert_eq!(bin(BinOp::Add, Ty::U32, 0xFFFF_FFFF, 1), 0);
        assert!(setp(Cmp::Lt, Ty::S64, (-1i64) as u64, 0));
        assert!(!setp(Cmp::Lt, Ty::U64, (-1i64) as u64, 0));
        assert_eq!(cvt(Ty::S64, Ty::S32, Round::None, 0xFFFF_FFFF), u64::MAX);
        assert_eq!(cvt(Ty::U32, Ty::S64, Round::None, u64::MAX), 0xFFFF_FFFF);
    }

    #[test]
    fn float_ops_round_like_the_hardware() {
        let one = bits32(1.0);
        let nan = bits32(f32::NAN);
        assert!(f32_of(bin(BinOp::Max, Ty::F32, one, nan)).is_nan());
        assert!(setp(Cmp::Ne, Ty::F32, nan, nan));
        assert!(!setp(Cmp::Eq, Ty::F32, nan, nan));
        assert_eq!(
            cvt(Ty::S32, Ty::F32, Round::TowardZero, bits32(-2.7)),
            0xFFFF_FFFE
        );
        assert_eq!(
            cvt(Ty::S32, Ty::F32, Round::TowardZero, bits32(1e20)),
            0x7FFF_FFFF
        );
        assert_eq!(cvt(Ty::U32, Ty::F32, Round::TowardZero, nan), 0);
        assert_eq!(f32_of(un(UnOp::Ex2, Ty::F32, bits32(3.0))), 8.0);
        // fma rounds once: (1 + 2^-23)^2 - 1 keeps the 2^-46 term.
        let a = 1.0 + f32::EPSILON;
        let r = f32_of(fma(Ty::F32, bits32(a), bits32(a), bits32(-1.0)));
        assert_eq!(r, 2.0 * f32::EPSILON + f32::EPSILON * f32::EPSILON);
    }
}

//! Element types (`Dtype`) and the exact rounding each one applies to a value it stores.
//!
//! Every value a Tessera tensor holds is a value its dtype can represent. [`Dtype::round`]
//! maps an `f64` to that value the way the hardware's round-to-nearest-even conversion does;
//! the CPU backend, the `.npy` reader and the random-number generators all store through it,
//! so that they agree with the GPU bit for bit. The 8-bit float formats have no Rust type;
//! [`f8e4m3_from_f32`] and friends are their bit-level codecs.

use std::fmt;

/// The element type of a tensor, spelled in Tessera as `fp32`, `int8`, ... (see [`Dtype::name`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dtype {
    /// IEEE binary64.
    Fp64,
    /// IEEE binary32.
    Fp32,
    /// TensorFloat-32: fp32's sign and 8-bit exponent with a 10-bit mantissa, stored as fp32.
    Tf32,
    /// bfloat16: fp32's exponent with a 7-bit mantissa.
    Bf16,
    /// IEEE binary16.
    Fp16,
    /// OCP fp8 E4M3 (bias 7, no infinities, max finite 448, NaN = `S.1111.111`).
    Fp8E4m3,
    /// OCP fp8 E5M2 (bias 15, IEEE-like with infinities, max finite 57344).
    Fp8E5m2,
    /// Signed 8-bit integer.
    Int8,
    /// Signed 16-bit integer.
    Int16,
    /// Signed 32-bit integer.
    Int32,
    /// Signed 64-bit integer.
    Int64,
    /// Unsigned 8-bit integer.
    Uint8,
    /// Boolean, stored as one byte.
    Bool,
}

/// How a binary floating-point format (other than fp64) rounds: used by [`Dtype::round`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FloatFormat {
    /// Explicit mantissa (fraction) bits.
    pub mant_bits: u32,
    /// Exponent of the smallest normal number (numbers below it are subnormal).
    pub min_exp: i32,
    /// The largest finite value.
    pub max_finite: f64,
    /// Whether results beyond `max_finite` saturate to it (E4M3) or become infinite.
    pub saturate: bool,
}

impl FloatFormat {
    /// The largest value of the format below 1.0: `1 - 2^-(mant_bits + 1)`.
    pub fn pred_one(&self) -> f64 {
        1.0 - pow2(-(self.mant_bits as i32) - 1)
    }
}

const FP32: FloatFormat = FloatFormat {
    mant_bits: 23,
    min_exp: -126,
    max_finite: f32::MAX as f64,
    saturate: false,
};
const TF32: FloatFormat = FloatFormat {
    mant_bits: 10,
    min_exp: -126,
    // (2 - 2^-10) * 2^127
    max_finite: 3.4011621342146535e38,
    saturate: false,
};
const BF16: FloatFormat = FloatFormat {
    mant_bits: 7,
    min_exp: -126,
    // (2 - 2^-7) * 2^127
    max_finite: 3.3895313892515355e38,
    saturate: false,
};
const FP16: FloatFormat = FloatFormat {
    mant_bits: 10,
    min_exp: -14,
    max_finite: 65504.0,
    saturate: false,
};
const E4M3: FloatFormat = FloatFormat {
    mant_bits: 3,
    min_exp: -6,
    max_finite: 448.0,
    saturate: true,
};
const E5M2: FloatFormat = FloatFormat {
    mant_bits: 2,
    min_exp: -14,
    max_finite: 57344.0,
    saturate: false,
};

/// A constant of some dtype: an integer held exactly, or a float.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Number {
    /// An integer (exact even where an f64 is not, as `i64::MAX`).
    Int(i64),
    /// A float.
    Float(f64),
}

impl Number {
    /// The value as an f64 (`i64::MAX` rounds up to 2^63, which converts
    /// back to an int64 saturated).
    pub fn to_f64(self) -> f64 {
        match self {
            Number::Int(i) => i as f64,
            Number::Float(f) => f,
        }
    }
}

impl Dtype {
    /// The dtype exact sums of `self` values are taken in where no
    /// precision mode says otherwise: int32 for integers up to 32 bits
    /// (wrapping), int64 for int64, fp64 for fp64, fp32 for other floats.
    pub fn sum_dtype(self) -> Dtype {
        match self {
            Dtype::Int64 => Dtype::Int64,
            Dtype::Fp64 => Dtype::Fp64,
            d if d.is_int() => Dtype::Int32,
            _ => Dtype::Fp32,
        }
    }

    /// The dtype of a matrix product of operands of dtype `d`: int32 for
    /// 8-bit integers, whose products are summed in int32; fp32 for fp8,
    /// whose range (448 for e4m3) a sum of products would overflow (a
    /// scaled fp8 GEMM multiplies the fp32 result by its scales); `d`
    /// otherwise.
    pub fn matmul_result(d: Dtype) -> Dtype {
        match d {
            Dtype::Int8 | Dtype::Uint8 => Dtype::Int32,
            Dtype::Fp8E4m3 | Dtype::Fp8E5m2 => Dtype::Fp32,
            d => d,
        }
    }

    /// Every dtype, in declaration order.
    pub const ALL: [Dtype; 13] = [
        Dtype::Fp64,
        Dtype::Fp32,
        Dtype::Tf32,
        Dtype::Bf16,
        Dtype::Fp16,
        Dtype::Fp8E4m3,
        Dtype::Fp8E5m2,
        Dtype::Int8,
        Dtype::Int16,
        Dtype::Int32,
        Dtype::Int64,
        Dtype::Uint8,
        Dtype::Bool,
    ];

    /// The Tessera spelling: `fp64`, `fp32`, `tf32`, `bf16`, `fp16`, `fp8_e4m3`, `fp8_e5m2`,
    /// `int8`, `int16`, `int32`, `int64`, `uint8`, `bool`.
    pub fn name(self) -> &'static str {
        match self {
            Dtype::Fp64 => "fp64",
            Dtype::Fp32 => "fp32",
            Dtype::Tf32 => "tf32",
            Dtype::Bf16 => "bf16",
            Dtype::Fp16 => "fp16",
            Dtype::Fp8E4m3 => "fp8_e4m3",
            Dtype::Fp8E5m2 => "fp8_e5m2",
            Dtype::Int8 => "int8",
            Dtype::Int16 => "int16",
            Dtype::Int32 => "int32",
            Dtype::Int64 => "int64",
            Dtype::Uint8 => "uint8",
            Dtype::Bool => "bool",
        }
    }

    /// The dtype spelled `name` in Tessera (the inverse of [`Dtype::name`]), if any.
    pub fn from_name(name: &str) -> Option<Dtype> {
        Dtype::ALL.into_iter().find(|d| d.name() == name)
    }

    /// The dtype numpy, torch or Triton spell `name` (`float32`, `half`,
    /// `bfloat16`, `float8_e4m3fn`, `long`, `uint8`...), for suggestions.
    pub fn from_foreign_name(name: &str) -> Option<Dtype> {
        let name = name.trim_start_matches("torch.").trim_start_matches("tl.");
        Some(match name {
            "float64" | "double" | "f64" => Dtype::Fp64,
            "float32" | "float" | "f32" | "single" => Dtype::Fp32,
            "float16" | "half" | "f16" => Dtype::Fp16,
            "bfloat16" => Dtype::Bf16,
            "float8_e4m3fn" | "float8e4nv" | "fp8e4nv" | "float8_e4m3" | "e4m3" => Dtype::Fp8E4m3,
            "float8_e5m2" | "float8e5" | "fp8e5" | "e5m2" => Dtype::Fp8E5m2,
            "int" | "i32" => Dtype::Int32,
            "long" | "i64" => Dtype::Int64,
            "short" | "i16" => Dtype::Int16,
            "i8" | "char" => Dtype::Int8,
            "u8" | "byte" => Dtype::Uint8,
            "int1" | "bool_" => Dtype::Bool,
            _ => return None,
        })
    }

    /// Bytes per element in memory (tf32 is stored as fp32, so 4; bool is 1).
    pub fn size_bytes(self) -> u64 {
        match self {
            Dtype::Fp64 | Dtype::Int64 => 8,
            Dtype::Fp32 | Dtype::Tf32 | Dtype::Int32 => 4,
            Dtype::Bf16 | Dtype::Fp16 | Dtype::Int16 => 2,
            Dtype::Fp8E4m3 | Dtype::Fp8E5m2 | Dtype::Int8 | Dtype::Uint8 | Dtype::Bool => 1,
        }
    }

    /// Whether this is a floating-point dtype (fp64 down to fp8).
    pub fn is_float(self) -> bool {
        matches!(
            self,
            Dtype::Fp64
                | Dtype::Fp32
                | Dtype::Tf32
                | Dtype::Bf16
                | Dtype::Fp16
                | Dtype::Fp8E4m3
                | Dtype::Fp8E5m2
        )
    }

    /// The dtype of the result of a sum (or running sum) of this dtype:
    /// booleans are counted and integers narrower than 32 bits summed in
    /// int32, as numpy and torch widen them (an int8 sum of 100 forties is
    /// 4000, not a wrapped -96); other dtypes keep theirs.
    pub fn sum_result(self) -> Dtype {
        match self {
            Dtype::Bool | Dtype::Int8 | Dtype::Int16 | Dtype::Uint8 => Dtype::Int32,
            d => d,
        }
    }

    /// The dtype a tile product `dot(a, b)` of this dtype gives without an
    /// accumulator (Triton's `tl.dot`): fp32 for narrower floats, int32 for
    /// narrower integers, fp64 and int64 as they are.
    pub fn dot_accumulator(self) -> Dtype {
        match self {
            Dtype::Fp64 | Dtype::Int64 => self,
            d if d.is_float() => Dtype::Fp32,
            _ => Dtype::Int32,
        }
    }

    /// Whether this is an integer dtype (bool is not).
    pub fn is_int(self) -> bool {
        matches!(
            self,
            Dtype::Int8 | Dtype::Int16 | Dtype::Int32 | Dtype::Int64 | Dtype::Uint8
        )
    }

    /// Whether this is one of the 8-bit float formats.
    pub fn is_fp8(self) -> bool {
        matches!(self, Dtype::Fp8E4m3 | Dtype::Fp8E5m2)
    }

    /// The inclusive range `(min, max)` of an integer dtype; `None` for floats and bool.
    pub fn int_range(self) -> Option<(i64, i64)> {
        match self {
            Dtype::Int8 => Some((i8::MIN.into(), i8::MAX.into())),
            Dtype::Int16 => Some((i16::MIN.into(), i16::MAX.into())),
            Dtype::Int32 => Some((i32::MIN.into(), i32::MAX.into())),
            Dtype::Int64 => Some((i64::MIN, i64::MAX)),
            Dtype::Uint8 => Some((0, u8::MAX.into())),
            _ => None,
        }
    }

    /// A value no element of this dtype goes after in a sort's order (ties
    /// go by position), which pads a line to a sorting network's width:
    /// NaN ascending (NaN sorts last), -inf descending, an integer dtype's
    /// extreme.
    pub fn sort_last(self, descending: bool) -> Number {
        match self.int_range() {
            Some((lo, _)) if descending => Number::Int(lo),
            Some((_, hi)) => Number::Int(hi),
            None if descending => Number::Float(f64::NEG_INFINITY),
            None => Number::Float(f64::NAN),
        }
    }

    /// Whether `c` lies outside the range of this integer dtype (`-1` or
    /// `256` for uint8); false for floats and bool.
    pub fn excludes_int(self, c: i64) -> bool {
        self.int_range()
            .is_some_and(|(lo, hi)| !(lo..=hi).contains(&c))
    }

    /// The rounding parameters of a float dtype other than fp64.
    pub fn float_format(self) -> Option<FloatFormat> {
        match self {
            Dtype::Fp32 => Some(FP32),
            Dtype::Tf32 => Some(TF32),
            Dtype::Bf16 => Some(BF16),
            Dtype::Fp16 => Some(FP16),
            Dtype::Fp8E4m3 => Some(E4M3),
            Dtype::Fp8E5m2 => Some(E5M2),
            _ => None,
        }
    }

    /// The value this dtype stores for `x`.
    ///
    /// * fp64: `x`.
    /// * Floats: `x` rounded once, to nearest with ties to even, to the format's precision,
    ///   with the format's subnormals. For an `x` that is exactly an fp32 value (everything a
    ///   GPU kernel computes) this is the hardware's `cvt.rn` from fp32; for other `x` it is
    ///   the correctly rounded value (no double rounding through fp32). NaN stays NaN and ±0
    ///   keeps its sign.
    /// * Overflow: fp32, tf32, bf16, fp16 and fp8_e5m2 give ±inf when the rounded value exceeds
    ///   the largest finite value (IEEE); fp8_e4m3 saturates to ±448 instead (CUDA's
    ///   `__NV_SATFINITE`), and ±inf also becomes ±448.
    /// * Integers: NaN gives 0; otherwise `x` is truncated toward zero and saturated to the
    ///   type's range (PTX `cvt.rzi.sat`). For int64 the result is that integer converted to
    ///   `f64`, which is inexact beyond 2^53; [`Dtype::round_int`] gives the exact integer.
    /// * bool: 1.0 when `x != 0` (so NaN gives 1.0), else 0.0.
    pub fn round(self, x: f64) -> f64 {
        match self {
            Dtype::Fp64 => x,
            Dtype::Fp32 => x as f32 as f64,
            Dtype::Bool => {
                if x != 0.0 {
                    1.0
                } else {
                    0.0
                }
            }
            _ => match self.float_format() {
                Some(format) => round_to_format(x, &format),
                None => self.round_int(x).unwrap_or(0) as f64,
            },
        }
    }

    /// `x` wrapped to the width of this (integer) dtype, two's
    /// complement: what integer arithmetic and `as` between integers give.
    pub fn wrap_int(self, x: i64) -> i64 {
        match self {
            Dtype::Int8 => i64::from(x as i8),
            Dtype::Int16 => i64::from(x as i16),
            Dtype::Int32 => i64::from(x as i32),
            Dtype::Uint8 => i64::from(x as u8),
            _ => x,
        }
    }

    /// The integer an integer dtype stores for `x` (NaN → 0, truncate toward zero, saturate);
    /// `None` for float dtypes and bool.
    pub fn round_int(self, x: f64) -> Option<i64> {
        let (min, max) = self.int_range()?;
        // `as` truncates toward zero, saturates to the i64 range and maps NaN to 0.
        Some((x as i64).clamp(min, max))
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `2^k` for `-1022 <= k <= 1023`, exactly.
pub fn pow2(k: i32) -> f64 {
    debug_assert!((-1022..=1023).contains(&k));
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// `x` rounded to nearest, ties to even, to `format`, with subnormals and the format's
/// overflow rule. Exact: the scaling by powers of two never rounds.
pub fn round_to_format(x: f64, format: &FloatFormat) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x.is_infinite() {
        return if format.saturate {
            format.max_finite.copysign(x)
        } else {
            x
        };
    }
    if x == 0.0 {
        return x;
    }
    // The exponent of x, clamped below to the format's normal range: below it the quantum
    // (the spacing of representable values) stays that of the smallest binade (subnormals).
    let biased = ((x.to_bits() >> 52) & 0x7ff) as i32;
    let exp = if biased == 0 {
        format.min_exp
    } else {
        (biased - 1023).max(format.min_exp)
    };
    let quantum_exp = exp - format.mant_bits as i32;
    let rounded = (x * pow2(-quantum_exp)).round_ties_even() * pow2(quantum_exp);
    if rounded.abs() > format.max_finite {
        if format.saturate {
            format.max_finite.copysign(x)
        } else {
            f64::INFINITY.copysign(x)
        }
    } else {
        rounded
    }
}

/// Encodes a value exactly representable in a small float format (finite, non-negative,
/// at most the format's max) as its exponent and mantissa fields, `exp << mant_bits | mant`.
fn encode_fields(v: f64, mant_bits: u32, min_exp: i32, bias: i32) -> u8 {
    if v == 0.0 {
        return 0;
    }
    let bits = v.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32 - 1023;
    if exp < min_exp {
        // Subnormal: v = mant * 2^(min_exp - mant_bits).
        (v * pow2(mant_bits as i32 - min_exp)) as u8
    } else {
        let mant = ((bits >> (52 - mant_bits)) & ((1 << mant_bits) - 1)) as u8;
        (((exp + bias) as u8) << mant_bits) | mant
    }
}

/// Encodes `x` as fp8 E4M3 (OCP): round to nearest even, saturate to ±448 (±inf too),
/// NaN → `0x7f` or `0xff` (the sign of the NaN kept).
pub fn f8e4m3_from_f32(x: f32) -> u8 {
    let sign = if x.is_sign_negative() { 0x80 } else { 0 };
    if x.is_nan() {
        return sign | 0x7f;
    }
    let v = round_to_format(x as f64, &E4M3).abs();
    sign | encode_fields(v, 3, -6, 7)
}

/// Decodes an fp8 E4M3 (OCP) byte; `0x7f` and `0xff` are NaN (there are no infinities).
pub fn f8e4m3_to_f32(bits: u8) -> f32 {
    let negative = bits & 0x80 != 0;
    let exp = (bits >> 3) & 0xf;
    let mant = bits & 0x7;
    let magnitude = if exp == 0xf && mant == 0x7 {
        f32::NAN
    } else if exp == 0 {
        mant as f32 * pow2(-9) as f32
    } else {
        (8 + mant) as f32 * pow2(exp as i32 - 10) as f32
    };
    if negative {
        -magnitude
    } else {
        magnitude
    }
}

/// Encodes `x` as fp8 E5M2: round to nearest even, overflow to ±inf (IEEE),
/// NaN → `0x7f` or `0xff` (the sign of the NaN kept).
pub fn f8e5m2_from_f32(x: f32) -> u8 {
    let sign = if x.is_sign_negative() { 0x80 } else { 0 };
    if x.is_nan() {
        return sign | 0x7f;
    }
    let v = round_to_format(x as f64, &E5M2).abs();
    if v.is_infinite() {
        return sign | 0x7c;
    }
    sign | encode_fields(v, 2, -14, 15)
}

/// Decodes an fp8 E5M2 byte (the top byte of an IEEE binary16): `0x7c`/`0xfc` are ±inf,
/// `0x7d..=0x7f` and `0xfd..=0xff` NaN.
pub fn f8e5m2_to_f32(bits: u8) -> f32 {
    half::f16::from_bits(u16::from(bits) << 8).to_f32()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generic_rounding_matches_fp32_cast() {
        // A cheap deterministic stream of f64 values over a wide range of exponents,
        // including the subnormal and overflow regions of fp32.
        let mut state = 0x1234_5678_9abc_def0_u64;
        for _ in 0..200_000 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let mant = f64::from_bits((state >> 12) | (1023 << 52)); // [1, 2)
            let exp = ((state >> 4) % 320) as i32 - 160;
            let x = mant * pow2(exp) * if state & 1 == 0 { 1.0 } else { -1.0 };
            assert_eq!(
                round_to_format(x, &FP32).to_bits(),
                (x as f32 as f64).to_bits(),
                "x = {x:e}"
            );
        }
    }

    #[test]
    fn pred_one_is_below_one_and_representable() {
        for d in Dtype::ALL {
            if let Some(f) = d.float_format() {
                let p = f.pred_one();
                assert!(p < 1.0);
                assert_eq!(d.round(p), p, "{d}");
            }
        }
    }
}

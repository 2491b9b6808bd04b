//! Tests of dtype names and of the exact rounding `Dtype::round` and the fp8 codecs apply.

use tessera_core::{f8e4m3_from_f32, f8e4m3_to_f32, f8e5m2_from_f32, f8e5m2_to_f32, Dtype};

fn p2(k: i32) -> f64 {
    2f64.powi(k)
}

/// A deterministic stream of 64-bit values for sampling.
fn lcg(state: &mut u64) -> u64 {
    *state = state
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *state ^ (*state >> 29)
}

#[test]
fn names_round_trip_and_classify() {
    let names: Vec<&str> = Dtype::ALL.iter().map(|d| d.name()).collect();
    assert_eq!(
        names,
        [
            "fp64", "fp32", "tf32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "int8", "int16",
            "int32", "int64", "uint8", "bool"
        ]
    );
    for d in Dtype::ALL {
        assert_eq!(Dtype::from_name(d.name()), Some(d));
        assert_eq!(d.to_string(), d.name());
        assert!(!(d.is_float() && d.is_int()));
        assert_eq!(d.int_range().is_some(), d.is_int());
    }
    assert_eq!(Dtype::from_name("float32"), None);
    assert_eq!(Dtype::from_name(""), None);
    let sizes: Vec<u64> = Dtype::ALL.iter().map(|d| d.size_bytes()).collect();
    assert_eq!(sizes, [8, 4, 4, 2, 2, 1, 1, 1, 2, 4, 8, 1, 1]);
    assert!(!Dtype::Bool.is_float() && !Dtype::Bool.is_int());
    assert_eq!(Dtype::ALL.iter().filter(|d| d.is_float()).count(), 7);
}

#[test]
fn e4m3_all_codes_round_trip() {
    for code in 0..=255u8 {
        let v = f8e4m3_to_f32(code);
        if code & 0x7f == 0x7f {
            assert!(v.is_nan(), "{code:#04x}");
            assert_eq!(v.is_sign_negative(), code & 0x80 != 0);
            assert_eq!(f8e4m3_from_f32(v), code);
        } else {
            assert!(v.is_finite(), "{code:#04x} decodes to {v}");
            assert_eq!(f8e4m3_from_f32(v), code, "{code:#04x} -> {v}");
            assert_eq!(Dtype::Fp8E4m3.round(f64::from(v)), f64::from(v));
        }
    }
    assert_eq!(f8e4m3_to_f32(0x38), 1.0);
    assert_eq!(f8e4m3_to_f32(0x7e), 448.0);
    assert_eq!(f8e4m3_to_f32(0xfe), -448.0);
    assert_eq!(f8e4m3_to_f32(0x08) as f64, p2(-6));
    assert_eq!(f8e4m3_to_f32(0x01) as f64, p2(-9));
    assert_eq!(f8e4m3_to_f32(0x07) as f64, 7.0 * p2(-9));
    assert_eq!(f8e4m3_to_f32(0x77), 240.0);
    let neg_zero = f8e4m3_to_f32(0x80);
    assert!(neg_zero == 0.0 && neg_zero.is_sign_negative());
    assert!(f8e4m3_to_f32(0x78).is_finite()); // 256: exponent 15 is normal in E4M3.
}

#[test]
fn e5m2_all_codes_round_trip() {
    for code in 0..=255u8 {
        let v = f8e5m2_to_f32(code);
        let mag = code & 0x7f;
        if mag > 0x7c {
            assert!(v.is_nan(), "{code:#04x}");
            let back = f8e5m2_from_f32(v);
            assert!(back & 0x7f > 0x7c && (back & 0x80) == (code & 0x80));
        } else {
            assert_eq!(v.is_infinite(), mag == 0x7c, "{code:#04x}");
            assert_eq!(f8e5m2_from_f32(v), code, "{code:#04x} -> {v}");
            assert_eq!(Dtype::Fp8E5m2.round(f64::from(v)), f64::from(v));
        }
    }
    assert_eq!(f8e5m2_to_f32(0x3c), 1.0);
    assert_eq!(f8e5m2_to_f32(0x7b), 57344.0);
    assert_eq!(f8e5m2_to_f32(0x7c), f32::INFINITY);
    assert_eq!(f8e5m2_to_f32(0x01) as f64, p2(-16));
    assert_eq!(f8e5m2_to_f32(0x04) as f64, p2(-14));
}

/// Every finite non-negative value of a format, ascending, with whether its code is even.
fn positive_values(decode: impl Fn(u8) -> f32) -> Vec<(f64, bool)> {
    (0..0x80u8)
        .map(|c| (decode(c), c))
        .filter(|(v, _)| v.is_finite())
        .map(|(v, c)| (f64::from(v), c % 2 == 0))
        .collect()
}

/// Midpoints between neighbours round to the even one; points just off them to the nearest.
fn check_ties(dtype: Dtype, values: &[(f64, bool)]) {
    for pair in values.windows(2) {
        let ((a, a_even), (b, _)) = (pair[0], pair[1]);
        let mid = (a + b) / 2.0;
        let even = if a_even { a } else { b };
        for sign in [1.0, -1.0] {
            assert_eq!(dtype.round(sign * mid), sign * even, "{dtype} tie {mid}");
            let eps = (b - a) * 1e-6;
            assert_eq!(dtype.round(sign * (mid - eps)), sign * a, "{dtype} {mid}-");
            assert_eq!(dtype.round(sign * (mid + eps)), sign * b, "{dtype} {mid}+");
        }
    }
}

#[test]
fn fp8_ties_round_to_even() {
    check_ties(Dtype::Fp8E4m3, &positive_values(f8e4m3_to_f32));
    check_ties(Dtype::Fp8E5m2, &positive_values(f8e5m2_to_f32));
    // Examples: 1 + 1/16 lies between 1 (even) and 1.125 in E4M3.
    assert_eq!(Dtype::Fp8E4m3.round(1.0625), 1.0);
    assert_eq!(Dtype::Fp8E4m3.round(1.1875), 1.25);
    assert_eq!(f8e4m3_from_f32(1.1875), 0x3a);
    assert_eq!(Dtype::Fp8E5m2.round(1.125), 1.0);
    assert_eq!(Dtype::Fp8E5m2.round(1.375), 1.5);
}

#[test]
fn fp16_and_bf16_every_code_ties_to_even() {
    let f16_values: Vec<(f64, bool)> = (0..0x7c00u16)
        .map(|c| (half::f16::from_bits(c).to_f64(), c % 2 == 0))
        .collect();
    check_ties(Dtype::Fp16, &f16_values);
    let bf16_values: Vec<(f64, bool)> = (0..0x7f80u16)
        .map(|c| (half::bf16::from_bits(c).to_f64(), c % 2 == 0))
        .collect();
    check_ties(Dtype::Bf16, &bf16_values);
}

#[test]
fn fp16_bf16_agree_with_half_on_fp32_inputs() {
    let mut state = 42;
    for _ in 0..300_000 {
        let x = f32::from_bits(lcg(&mut state) as u32);
        if x.is_nan() {
            continue;
        }
        let x64 = f64::from(x);
        assert_eq!(
            Dtype::Fp16.round(x64).to_bits(),
            half::f16::from_f32(x).to_f64().to_bits(),
            "fp16 {x:e}"
        );
        assert_eq!(
            Dtype::Bf16.round(x64).to_bits(),
            half::bf16::from_f32(x).to_f64().to_bits(),
            "bf16 {x:e}"
        );
    }
}

#[test]
fn rounding_from_f64_is_single() {
    // Just above a bf16 tie by 2^-40: fp32 would drop the excess and then round to even.
    let x = 1.0 + p2(-8) + p2(-40);
    assert_eq!(Dtype::Bf16.round(x), 1.0 + p2(-7));
    assert_eq!(Dtype::Fp32.round(x), 1.0 + p2(-8));
    assert_eq!(Dtype::Tf32.round(1.0 + p2(-11) + p2(-40)), 1.0 + p2(-10));
    assert_eq!(Dtype::Fp16.round(1.0 + p2(-11) + p2(-40)), 1.0 + p2(-10));
}

#[test]
fn tf32_keeps_ten_mantissa_bits() {
    let t = Dtype::Tf32;
    assert_eq!(t.round(1.0 + p2(-11)), 1.0);
    assert_eq!(t.round(1.0 + 3.0 * p2(-11)), 1.0 + p2(-9));
    assert_eq!(t.round(1.0 + p2(-10)), 1.0 + p2(-10));
    assert_eq!(t.round(-(1.0 + 3.0 * p2(-11))), -(1.0 + p2(-9)));
    assert_eq!(t.round(0.1), 0.0999755859375);
    // The exponent range is fp32's, with fp32's subnormals at tf32 precision.
    assert_eq!(t.round(p2(-126)), p2(-126));
    assert_eq!(t.round(p2(-136)), p2(-136));
    assert_eq!(t.round(p2(-137)), 0.0);
    assert_eq!(t.round(p2(-137) * 1.5), p2(-136));
    assert_eq!(t.round(f64::from(f32::MAX)), f64::INFINITY);
    assert_eq!(
        t.round((2.0 - p2(-10)) * p2(127)),
        (2.0 - p2(-10)) * p2(127)
    );
    // Values stored in a tf32 tensor are fp32 values with the low 13 mantissa bits zero.
    let mut state = 7;
    for _ in 0..10_000 {
        let x = f32::from_bits(lcg(&mut state) as u32 & 0x7f7f_ffff);
        let r = t.round(f64::from(x)) as f32;
        assert_eq!(r.to_bits() & 0x1fff, 0, "{x:e}");
    }
}

#[test]
fn overflow_saturates_or_goes_infinite() {
    // E4M3 saturates, infinities included, NaN stays NaN.
    let e4 = Dtype::Fp8E4m3;
    for x in [449.0, 464.0, 480.0, 1e10, f64::INFINITY, f64::MAX] {
        assert_eq!(e4.round(x), 448.0, "{x}");
        assert_eq!(e4.round(-x), -448.0, "{x}");
        assert_eq!(f8e4m3_from_f32(x as f32), 0x7e);
        assert_eq!(f8e4m3_from_f32(-x as f32), 0xfe);
    }
    assert!(e4.round(f64::NAN).is_nan());
    assert_eq!(f8e4m3_from_f32(f32::NAN) & 0x7f, 0x7f);
    // E5M2 overflows to infinity when the rounded value passes 57344: the tie at 61440
    // rounds to even, which is the next binade, so infinity.
    let e5 = Dtype::Fp8E5m2;
    assert_eq!(e5.round(61439.0), 57344.0);
    assert_eq!(e5.round(61440.0), f64::INFINITY);
    assert_eq!(e5.round(-1e6), f64::NEG_INFINITY);
    assert_eq!(f8e5m2_from_f32(1e6), 0x7c);
    assert_eq!(f8e5m2_from_f32(-1e6), 0xfc);
    assert!(e5.round(f64::NAN).is_nan());
    // fp16: 65504 is the largest; the midpoint 65520 overflows.
    assert_eq!(Dtype::Fp16.round(65519.99), 65504.0);
    assert_eq!(Dtype::Fp16.round(65520.0), f64::INFINITY);
    assert_eq!(Dtype::Bf16.round(1e39), f64::INFINITY);
    assert_eq!(Dtype::Fp32.round(1e39), f64::INFINITY);
    assert_eq!(Dtype::Fp32.round(-1e39), f64::NEG_INFINITY);
}

#[test]
fn subnormals_round_correctly() {
    let e4 = Dtype::Fp8E4m3;
    assert_eq!(e4.round(p2(-10)), 0.0); // Tie between 0 (even) and 2^-9.
    assert_eq!(e4.round(p2(-10) * 1.01), p2(-9));
    assert_eq!(e4.round(3.0 * p2(-10)), p2(-8)); // Tie between 1 and 2 (even) × 2^-9.
    assert_eq!(e4.round(5.0 * p2(-9)), 5.0 * p2(-9));
    let tiny = e4.round(-p2(-12));
    assert!(tiny == 0.0 && tiny.is_sign_negative());
    let e5 = Dtype::Fp8E5m2;
    assert_eq!(e5.round(p2(-17)), 0.0);
    assert_eq!(e5.round(3.0 * p2(-17)), p2(-15));
    let f16 = Dtype::Fp16;
    assert_eq!(f16.round(p2(-24)), p2(-24));
    assert_eq!(f16.round(p2(-25)), 0.0);
    assert_eq!(f16.round(3.0 * p2(-25)), p2(-23));
    assert_eq!(f16.round(1e-30), 0.0);
    let bf = Dtype::Bf16;
    assert_eq!(bf.round(p2(-133)), p2(-133));
    assert_eq!(bf.round(p2(-134)), 0.0);
    assert_eq!(Dtype::Fp32.round(p2(-149)), p2(-149));
    assert_eq!(Dtype::Fp32.round(p2(-150)), 0.0);
    // Subnormal f64 inputs round to zero everywhere but fp64.
    assert_eq!(f16.round(f64::MIN_POSITIVE / 4.0), 0.0);
    assert_eq!(
        Dtype::Fp64.round(f64::MIN_POSITIVE / 4.0),
        f64::MIN_POSITIVE / 4.0
    );
    assert_eq!(f8e4m3_from_f32(p2(-9) as f32), 0x01);
    assert_eq!(f8e5m2_from_f32(-p2(-16) as f32), 0x81);
}

#[test]
fn integers_truncate_and_saturate() {
    let cases: [(Dtype, f64, f64); 16] = [
        (Dtype::Int8, 300.0, 127.0),
        (Dtype::Int8, -300.0, -128.0),
        (Dtype::Int8, 1.9, 1.0),
        (Dtype::Int8, -1.9, -1.0),
        (Dtype::Int8, f64::NAN, 0.0),
        (Dtype::Int8, f64::INFINITY, 127.0),
        (Dtype::Uint8, -5.0, 0.0),
        (Dtype::Uint8, 255.9, 255.0),
        (Dtype::Uint8, 256.0, 255.0),
        (Dtype::Int16, 40000.0, 32767.0),
        (Dtype::Int16, -32768.5, -32768.0),
        (Dtype::Int32, p2(31), 2147483647.0),
        (Dtype::Int32, -p2(40), -2147483648.0),
        (Dtype::Int64, -0.5, 0.0),
        (Dtype::Int64, f64::NEG_INFINITY, -p2(63)),
        (Dtype::Int32, f64::NAN, 0.0),
    ];
    for (d, x, want) in cases {
        assert_eq!(d.round(x), want, "{d} {x}");
    }
    assert_eq!(Dtype::Int64.round_int(1e30), Some(i64::MAX));
    assert_eq!(Dtype::Int64.round_int(-1e30), Some(i64::MIN));
    assert_eq!(Dtype::Int64.round_int(f64::NAN), Some(0));
    assert_eq!(Dtype::Uint8.round_int(-1.0), Some(0));
    assert_eq!(Dtype::Fp32.round_int(1.0), None);
    assert_eq!(Dtype::Bool.round_int(1.0), None);
}

#[test]
fn bool_is_nonzero() {
    let b = Dtype::Bool;
    assert_eq!(b.round(0.0), 0.0);
    assert_eq!(b.round(-0.0), 0.0);
    assert_eq!(b.round(0.25), 1.0);
    assert_eq!(b.round(-3.0), 1.0);
    assert_eq!(b.round(f64::NAN), 1.0);
}

#[test]
fn signed_zero_and_nan_pass_through() {
    for d in Dtype::ALL.into_iter().filter(|d| d.is_float()) {
        let z = d.round(-0.0);
        assert!(z == 0.0 && z.is_sign_negative(), "{d}");
        assert!(d.round(f64::NAN).is_nan(), "{d}");
        assert_eq!(d.round(1.0), 1.0, "{d}");
        assert_eq!(d.round(-2.5), -2.5, "{d}");
    }
}

//! PTX numeric literals: integers (decimal, hex `0x`, octal `0`, binary
//! `0b`, optional `U` suffix), exact floats (`0fXXXXXXXX`, `0dXXXX...`) and,
//! for hand-written PTX, decimal floats (`1.5`, `2e-3`).

use crate::ir::{Operand, Ty};

/// An immediate as written, before the instruction's type gives it meaning.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Imm {
    /// An integer (already negated where written with `-`).
    Int(i128),
    /// `0fXXXXXXXX`: the bits of an f32.
    F32(u32),
    /// `0dXXXXXXXXXXXXXXXX`: the bits of an f64.
    F64(u64),
    /// A decimal float.
    Dec(f64),
}

impl Imm {
    /// The immediate written with a leading `-`.
    pub fn negate(self) -> Imm {
        match self {
            Imm::Int(i) => Imm::Int(-i),
            Imm::F32(b) => Imm::F32(b ^ 0x8000_0000),
            Imm::F64(b) => Imm::F64(b ^ 0x8000_0000_0000_0000),
            Imm::Dec(x) => Imm::Dec(-x),
        }
    }

    /// The operand this immediate is in an instruction of type `ty`: floats
    /// in float instructions; in integer instructions, integers as they are
    /// and `0f`/`0d` literals as their bits (as PTX reads them). `None` for
    /// an integer out of the 64-bit range or a decimal float in an integer
    /// instruction.
    pub fn operand(self, ty: Ty) -> Option<Operand> {
        match (self, ty.is_float()) {
            (Imm::Int(i), _) => int64(i).map(Operand::Int),
            (Imm::F32(b), true) => Some(Operand::Float(f64::from(f32::from_bits(b)))),
            (Imm::F64(b), true) => Some(Operand::Float(f64::from_bits(b))),
            (Imm::Dec(x), true) => Some(Operand::Float(x)),
            (Imm::F32(b), false) => Some(Operand::Int(i64::from(b))),
            (Imm::F64(b), false) => Some(Operand::Int(b as i64)),
            (Imm::Dec(_), false) => None,
        }
    }
}

/// A 64-bit integer from a literal's value: signed values as they are,
/// unsigned ones above `i64::MAX` as their two's-complement bits.
pub(super) fn int64(i: i128) -> Option<i64> {
    i64::try_from(i)
        .ok()
        .or_else(|| u64::try_from(i).ok().map(|u| u as i64))
}

/// Whether `w` starts like a number.
pub(super) fn is_number(w: &str) -> bool {
    let mut b = w.bytes();
    match b.next() {
        Some(c) if c.is_ascii_digit() => true,
        Some(b'.') => matches!(b.next(), Some(c) if c.is_ascii_digit()),
        _ => false,
    }
}

/// An unsigned integer literal.
pub(super) fn unsigned(w: &str) -> Option<u64> {
    let w = w.strip_suffix('U').unwrap_or(w);
    let (digits, radix) = if let Some(h) = w.strip_prefix("0x").or_else(|| w.strip_prefix("0X")) {
        (h, 16)
    } else if let Some(b) = w.strip_prefix("0b").or_else(|| w.strip_prefix("0B")) {
        (b, 2)
    } else if w.len() > 1 && w.starts_with('0') {
        (&w[1..], 8)
    } else {
        (w, 10)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// Hex digits of exactly `n` characters.
fn hex_bits(digits: &str, n: usize) -> Option<u64> {
    if digits.len() != n || !digits.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(digits, 16).ok()
}

/// A numeric literal (without sign).
pub(super) fn number(w: &str) -> Option<Imm> {
    if let Some(h) = w.strip_prefix("0f").or_else(|| w.strip_prefix("0F")) {
        return hex_bits(h, 8)
            .and_then(|b| u32::try_from(b).ok())
            .map(Imm::F32);
    }
    if let Some(h) = w.strip_prefix("0d").or_else(|| w.strip_prefix("0D")) {
        return hex_bits(h, 16).map(Imm::F64);
    }
    if let Some(u) = unsigned(w) {
        return Some(Imm::Int(i128::from(u)));
    }
    let decimal = w
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'));
    if decimal && is_number(w) && w.contains(['.', 'e', 'E']) {
        return w.parse::<f64>().ok().map(Imm::Dec);
    }
    None
}

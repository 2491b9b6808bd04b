//! Warpgroup matrix multiply-accumulate (`wgmma.mma_async`, sm_90a) with
//! its real asynchrony: an operation is recorded when a warp issues it,
//! grouped by `wgmma.commit_group`, and carried out when
//! `wgmma.wait_group` retires its group, reading shared memory then.
//! Between issue and retirement the simulator reports, as
//! [`SimErrorKind::Async`](crate::SimErrorKind::Async), any access to the
//! accumulator registers and any write to the shared memory the operation
//! reads; an issue without a `wgmma.fence` since the last wait, a
//! descriptor that differs between lanes, and a block that is not whole
//! warpgroups are errors too.
//!
//! Operands are read through their 64-bit shared-memory descriptors
//! exactly as the PTX ISA's canonical layouts define them ([`element`]).

use tessera_ptx::ir::{Fmt, Reg};

/// One issued `wgmma.mma_async` of one warp.
#[derive(Clone, Debug)]
pub struct WgOp {
    /// Operand formats.
    pub fmt: [Fmt; 2],
    /// The accumulator registers (N/2).
    pub d: Vec<Reg>,
    /// The descriptors of A and B (A's unused when it is in registers).
    pub desc: [u64; 2],
    /// A's registers, when it comes from registers (`mma.sync`'s A
    /// fragment layout for the warp's 16 rows).
    pub a_regs: Option<[Reg; 4]>,
    /// `scale-d`.
    pub accumulate: bool,
    /// Whether A is M-major and B N-major (else K-major).
    pub trans: [bool; 2],
    /// The 16-byte shared chunks (offsets / 16) the operation reads.
    pub chunks: Vec<u32>,
}

impl WgOp {
    /// N: the columns of the tile.
    pub fn n(&self) -> usize {
        self.d.len() * 2
    }
}

/// A decoded shared-memory matrix descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Desc {
    /// Start address (shared window, bytes).
    pub start: u64,
    /// Leading dimension byte offset.
    pub lbo: u64,
    /// Stride dimension byte offset.
    pub sbo: u64,
    /// Swizzle width in bytes (0: none; 32, 64 or 128).
    pub swizzle: u64,
}

impl Desc {
    /// Decodes `d` (PTX ISA: start address bits 0–13, LBO 16–29, SBO
    /// 32–45, base offset 49–51, swizzle mode 62–63; addresses and
    /// offsets in 16-byte units). A nonzero base offset is an error: the
    /// compiler keeps swizzled tiles aligned to their pattern.
    pub fn decode(d: u64) -> Result<Desc, String> {
        let field = |at: u32| ((d >> at) & 0x3FFF) << 4;
        if (d >> 49) & 7 != 0 {
            return Err(format!(
                "descriptor {d:#x} has a nonzero base offset, which the simulator does not support"
            ));
        }
        let swizzle = match d >> 62 {
            0 => 0,
            1 => 128,
            2 => 64,
            _ => 32,
        };
        Ok(Desc {
            start: field(0),
            lbo: field(16),
            sbo: field(32),
            swizzle,
        })
    }
}

/// The shared-window address of element `(x, k)` of an operand described
/// by `d`: `x` its row (A) or column (B), `k` along the reduction; `bytes`
/// per element; `mn_major` when the operand's M or N elements are the
/// contiguous ones. The canonical layouts, with `T = 16 / bytes` elements
/// per 16 bytes and `S` the swizzle width:
///
/// - K-major, no swizzle: 8×16-byte core matrices; `(x % 8)·16 + (x /
///   8)·SBO + (k / T)·LBO + (k % T)·bytes`;
/// - K-major, swizzled: rows of `S` bytes; `(x % 8)·S + (x / 8)·SBO +
///   k·bytes`;
/// - MN-major, no swizzle: `(x % T)·bytes + (k % 8)·16 + (x / T)·SBO +
///   (k / 8)·LBO`;
/// - MN-major, swizzled: rows of `S` bytes along x; `(x / (S / bytes))·LBO
///   + (k / 8)·SBO + (k % 8)·S + (x % (S / bytes))·bytes`;
///
/// then, swizzled, the address's 16-byte chunk bits `[4, 4 + b)` are XORed
/// with its bits `[7, 7 + b)`, `b = log2(S / 16)`.
pub fn element(d: &Desc, mn_major: bool, x: u64, k: u64, bytes: u64) -> u64 {
    let t = 16 / bytes;
    let s = d.swizzle;
    let off = match (mn_major, s) {
        (false, 0) => (x % 8) * 16 + (x / 8) * d.sbo + (k / t) * d.lbo + (k % t) * bytes,
        (false, _) => (x % 8) * s + (x / 8) * d.sbo + k * bytes,
        (true, 0) => (x % t) * bytes + (k % 8) * 16 + (x / t) * d.sbo + (k / 8) * d.lbo,
        (true, _) => {
            let e = s / bytes;
            (x / e) * d.lbo + (k / 8) * d.sbo + (k % 8) * s + (x % e) * bytes
        }
    };
    let a = d.start + off;
    if s == 0 {
        return a;
    }
    let b = (s / 16).trailing_zeros() as u64;
    a ^ (((a >> 7) & ((1 << b) - 1)) << 4)
}

/// The (row, column) of the 64×N tile that accumulator register `i` of
/// lane `lane` of the group's warp `q` (0..4) holds: rows `16q + lane/4`
/// and 8 below, in blocks of 8 columns.
pub fn d_coord(q: usize, lane: usize, i: usize) -> (usize, usize) {
    (
        16 * q + lane / 4 + 8 * ((i >> 1) & 1),
        8 * (i >> 2) + 2 * (lane & 3) + (i & 1),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc(start: u64, lbo: u64, sbo: u64, mode: u64) -> u64 {
        (start >> 4) | ((lbo >> 4) << 16) | ((sbo >> 4) << 32) | (mode << 62)
    }

    #[test]
    fn descriptors_decode() {
        let d = Desc::decode(desc(0x1400, 16, 1024, 1)).unwrap();
        assert_eq!((d.start, d.lbo, d.sbo, d.swizzle), (0x1400, 16, 1024, 128));
        assert_eq!(Desc::decode(desc(0, 0, 0, 2)).unwrap().swizzle, 64);
        assert_eq!(Desc::decode(desc(0, 0, 0, 3)).unwrap().swizzle, 32);
        assert!(Desc::decode(1 << 49).is_err());
    }

    #[test]
    fn k_major_128b_swizzle_is_a_chunk_xor_of_the_row() {
        // A [64, 64] bf16 tile at 1024: rows of 128 bytes, chunk c of row r
        // at chunk c ^ (r % 8).
        let d = Desc::decode(desc(1024, 16, 1024, 1)).unwrap();
        for r in 0..64 {
            for k in 0..16 {
                let want = 1024 + r * 128 + (((k / 8) ^ (r % 8)) * 16) + (k % 8) * 2;
                assert_eq!(element(&d, false, r, k, 2), want, "({r}, {k})");
            }
        }
        // The k16 step at +32 bytes reads columns 16..32.
        let d2 = Desc::decode(desc(1024 + 32, 16, 1024, 1)).unwrap();
        let want = 1024 + 3 * 128 + ((2 ^ 3) * 16) + 2;
        assert_eq!(element(&d2, false, 3, 1, 2), want);
    }

    #[test]
    fn mn_major_128b_swizzle_splits_columns_into_panels() {
        // B [64, 128] bf16 in two panels of 64 columns, 64 rows of 128 B each.
        let d = Desc::decode(desc(0, 64 * 128, 1024, 1)).unwrap();
        for (k, n) in [(0, 0), (1, 9), (7, 63), (8, 64), (15, 127)] {
            let (p, c) = (n / 64, n % 64);
            let want = p * 8192 + k * 128 + (((c / 8) ^ (k % 8)) * 16) + (c % 8) * 2;
            assert_eq!(element(&d, true, n, k, 2), want, "({k}, {n})");
        }
    }

    #[test]
    fn no_swizzle_core_matrices() {
        let d = Desc::decode(desc(0, 256, 128, 0)).unwrap();
        // K-major: k 8..16 are LBO further, rows 8..16 SBO further.
        assert_eq!(element(&d, false, 9, 10, 2), 16 + 128 + 256 + 4);
        // MN-major: x 8..16 SBO further, k 8..16 LBO further.
        assert_eq!(element(&d, true, 9, 10, 2), 2 + 2 * 16 + 128 + 256);
    }

    #[test]
    fn accumulator_coordinates() {
        assert_eq!(d_coord(0, 0, 0), (0, 0));
        assert_eq!(d_coord(1, 5, 3), (16 + 1 + 8, 2 + 1));
        assert_eq!(d_coord(3, 31, 63), (48 + 7 + 8, 8 * 15 + 6 + 1));
    }
}

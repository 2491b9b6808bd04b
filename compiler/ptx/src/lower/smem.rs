//! How staged tiles lie in shared memory, against bank conflicts.
//!
//! A tile staged with `cp.async` is stored row after row (or column after
//! column, see [`Stored::by_columns`]), each stored row a whole number of
//! 16-byte chunks. Stored naively, rows whose length is a multiple of 128
//! bytes start in the same bank, and the accesses of the tensor-core paths
//! (8 lanes reading the same 16 bytes of 8 consecutive rows with
//! `ldmatrix`, 32-bit fragment loads down 8 rows) all hit the same four
//! banks: an 8-way conflict.
//!
//! By default the chunks are swizzled: chunk `c` of stored row `r` is
//! stored at chunk `c ^ ((r >> shift) & mask)` of that row, which places
//! the same chunk of any 8 consecutive rows in 8 different 16-byte bank
//! groups (rows of `n` chunks: `mask = min(n, 8) - 1`, `shift =
//! log2(max(1, 8 / n))`, so that rows sharing a 128-byte line XOR with
//! the same value while the lines of 8 rows XOR with different ones). It
//! costs no memory; the 16-byte chunks `cp.async` writes stay whole, and
//! a warp's eight consecutive chunks of a 128-byte line stay a
//! permutation of its bank groups. Rows of a number of chunks that is not
//! a power of two are left as they are.
//!
//! Only tiles that tensor cores read are swizzled: a kernel whose products
//! all run on the scalar path reads its staged tiles one element per thread
//! (a warp reads one row, or 32 consecutive elements), which no layout
//! makes conflict-free or worse, and unswizzled each slot's address is
//! the first plus a constant, which costs no registers.
//!
//! Tiles that Hopper's `wgmma` reads (sm_90a) are stored in its canonical
//! layouts: stored rows of 32, 64 or 128 bytes are already the 32-, 64-
//! and 128-byte swizzles of the PTX ISA; longer rows are cut into panels
//! of 128 bytes, panel `p` of every stored row coming after all of panel
//! `p - 1` ([`Stored::panel`]), each a 128-byte-swizzled tile of its own.
//!
//! A schedule's `use_shared_memory(true, padding = p)` asks for padding
//! instead: each stored row is followed by `p` elements, rounded up to
//! keep rows 16-byte aligned (what `cp.async` and `ldmatrix` need).

use super::{Lower, C};
use crate::ir::*;

/// Stored rows cut into 128-byte panels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Panels {
    /// Elements of a stored row in one panel (a power of two).
    pub per: i64,
    /// Bytes of one panel (all the stored rows' pieces).
    pub bytes: i64,
    /// Panels.
    pub count: i64,
}

/// The shared-memory layout of a staged rank-2 tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Stored {
    /// Whether the stored rows are the tile's columns (a transposed load
    /// such as attention's Kᵀ, whose columns are contiguous in global
    /// memory): element `(r, c)` is in stored row `c`.
    pub by_columns: bool,
    /// Elements per stored row (the row and its padding).
    pub pitch: i64,
    /// Bytes per element.
    pub width: i64,
    /// The swizzle's `(shift, mask)` (see the module docs), if swizzled.
    pub swizzle: Option<(i64, i64)>,
    /// In a pipeline's ring of buffers: the register (u32 bytes) holding
    /// the current buffer's distance from the first (see `pipeline.rs`).
    pub ring: Option<Reg>,
    /// Rows cut into panels (see the module docs).
    pub panel: Option<Panels>,
}

impl Stored {
    /// The layout of a tile whose stored rows hold `row` elements of
    /// `width` bytes (a multiple of 16 bytes), with `padding` elements
    /// asked for after each, swizzled when `swizzle` allows it.
    pub fn new(by_columns: bool, row: i64, width: i64, padding: i64, swizzle: bool) -> Stored {
        let per_chunk = 16 / width;
        if padding > 0 {
            return Stored {
                by_columns,
                pitch: (row + padding + per_chunk - 1) / per_chunk * per_chunk,
                width,
                swizzle: None,
                ring: None,
                panel: None,
            };
        }
        let chunks = row / per_chunk;
        let swizzle = (swizzle && chunks >= 2 && chunks.count_ones() == 1).then(|| {
            let shift = (8 / chunks).max(1).trailing_zeros() as i64;
            (shift, chunks.min(8) - 1)
        });
        Stored {
            by_columns,
            pitch: row,
            width,
            swizzle,
            ring: None,
            panel: None,
        }
    }

    /// [`Stored::new`] for a tile `wgmma` may read: unpadded, swizzled, and
    /// rows longer than 128 bytes cut into 128-byte panels of `rows`
    /// stored rows each.
    pub fn for_wgmma(by_columns: bool, row: i64, width: i64, rows: i64) -> Stored {
        let bytes = row * width;
        if bytes <= 128 || bytes.count_ones() != 1 {
            return Stored::new(by_columns, row, width, 0, true);
        }
        let per = 128 / width;
        Stored {
            panel: Some(Panels {
                per,
                bytes: rows * 128,
                count: row / per,
            }),
            ..Stored::new(by_columns, per, width, 0, true)
        }
    }

    /// The swizzle width (32, 64 or 128 bytes) of a layout that is one of
    /// the PTX ISA's canonical swizzled layouts, which `wgmma` and the TMA
    /// read and write: stored rows (or panels) of that many bytes,
    /// swizzled as [`Stored::new`] swizzles them. `None` for any other.
    pub fn canonical_swizzle(&self) -> Option<i64> {
        let s = self.row_bytes();
        let canonical = matches!(s, 32 | 64 | 128)
            && self.swizzle == Stored::new(false, s / self.width, self.width, 0, true).swizzle;
        canonical.then_some(s)
    }

    /// Bytes of the tile when it has `rows` stored rows.
    pub fn tile_bytes(&self, rows: i64) -> i64 {
        match self.panel {
            Some(p) => p.bytes * p.count,
            None => rows * self.row_bytes(),
        }
    }

    /// The (stored row, element in that row) of tile coordinate `coord`.
    pub fn place(&self, coord: [C; 2]) -> (C, C) {
        if self.by_columns {
            (coord[1], coord[0])
        } else {
            (coord[0], coord[1])
        }
    }

    /// Bytes of a stored row.
    pub fn row_bytes(&self) -> i64 {
        self.pitch * self.width
    }

    /// Rows `r` and `r + k` have the same swizzle for every `r` when `k`
    /// is a multiple of this.
    fn period(&self) -> i64 {
        self.swizzle.map_or(1, |(shift, mask)| (mask + 1) << shift)
    }

    /// The swizzle of stored row `r`: the value the byte offset in the row
    /// is XORed with.
    fn xor(&self, r: i64) -> i64 {
        self.swizzle
            .map_or(0, |(shift, mask)| ((r >> shift) & mask) << 4)
    }
}

impl Lower<'_> {
    /// The layout of `v` in shared memory, when it is a staged tile.
    pub(super) fn stored(&self, v: tessera_tile::Value) -> Option<Stored> {
        self.stored.get(&v).copied()
    }

    /// The address of element `e` of stored row `r` of a tile laid out as
    /// `st` at shared offset `off`.
    pub(super) fn stored_addr(&mut self, off: u64, st: Stored, r: C, e: C) -> Addr {
        let off = off as i64;
        // In panels: the panel's offset, and the element within its row.
        match (st.panel, e) {
            (None, e) => self.stored_addr_at(None, off, st, r, e),
            (Some(p), C::K(e)) => self.stored_addr_at(
                None,
                off + e / p.per * p.bytes,
                Stored { panel: None, ..st },
                r,
                C::K(e % p.per),
            ),
            (Some(p), C::R(e)) => {
                let e32 = self.f.cvt(Ty::U32, e);
                let shift = i64::from(p.per.trailing_zeros());
                let which = self.f.bin(BinOp::Shr, Ty::U32, e32, Operand::Int(shift));
                let within = self
                    .f
                    .bin(BinOp::And, Ty::U32, e32, Operand::Int(p.per - 1));
                let within = self.f.cvt(Ty::S64, within);
                let base = self.shared_base(st);
                let base = self.f.fma(Ty::U32, which, Operand::Int(p.bytes), base);
                let st = Stored { panel: None, ..st };
                self.stored_addr_at(Some(base), off, st, r, C::R(within))
            }
        }
    }

    /// [`Lower::stored_addr`] of an unpanelled layout, from shared address
    /// `base` (`None`: the tile's current buffer).
    fn stored_addr_at(&mut self, base: Option<Reg>, mut off: i64, st: Stored, r: C, e: C) -> Addr {
        // A row known to be another plus a constant moves the constant into
        // the address's immediate offset (when the swizzle cannot tell the
        // two rows apart), so that rows `r, r + 2, ...` share registers.
        let r = match r {
            C::R(x) => match self.offsets.get(&x) {
                Some(&(b, k)) if k % st.period() == 0 => {
                    off += k * st.row_bytes();
                    C::R(b)
                }
                _ => r,
            },
            C::K(_) => r,
        };
        if let (C::K(r), C::K(e)) = (r, e) {
            let at = off + r * st.row_bytes() + ((e * st.width) ^ st.xor(r));
            return match (base, st.ring) {
                (Some(b), _) => Addr::Reg(b, at),
                (None, Some(_)) => Addr::Reg(self.shared_base(st), at),
                (None, None) => Addr::Shared(at),
            };
        }
        let row = match r {
            C::K(r) => Operand::Int(r * st.row_bytes()),
            C::R(r) => {
                let r32 = self.f.cvt(Ty::U32, r);
                Operand::Reg(
                    self.f
                        .bin(BinOp::Mul, Ty::U32, r32, Operand::Int(st.row_bytes())),
                )
            }
        };
        let mut byte = match e {
            C::K(e) => Operand::Int(e * st.width),
            C::R(e) => {
                let e32 = self.f.cvt(Ty::U32, e);
                Operand::Reg(self.f.bin(BinOp::Mul, Ty::U32, e32, Operand::Int(st.width)))
            }
        };
        if st.swizzle.is_some() {
            let x = self.row_xor(st, r);
            byte = Operand::Reg(self.f.bin(BinOp::Xor, Ty::U32, byte, x));
        }
        let smem = match base {
            Some(b) => b,
            None => self.shared_base(st),
        };
        let a = self.f.bin(BinOp::Add, Ty::U32, smem, row);
        let a = self.f.bin(BinOp::Add, Ty::U32, a, byte);
        Addr::Reg(a, off)
    }

    /// The shared address of the tile's current buffer (of offset 0 when
    /// it is in a ring).
    pub(super) fn shared_base(&mut self, st: Stored) -> Reg {
        self.shared_plus(st.ring)
    }

    /// The shared address `tsr_smem`, plus the bytes in `extra` (u32).
    pub(super) fn shared_plus(&mut self, extra: Option<Reg>) -> Reg {
        let smem = self.f.reg(Ty::U32);
        self.f.push(Inst::SharedBase { dst: smem });
        match extra {
            Some(r) => self.f.bin(BinOp::Add, Ty::U32, smem, r),
            None => smem,
        }
    }

    /// The swizzle of stored row `r` (a u32 operand; 0 when unswizzled).
    pub(super) fn row_xor(&mut self, st: Stored, r: C) -> Operand {
        let Some((shift, mask)) = st.swizzle else {
            return Operand::Int(0);
        };
        match r {
            C::K(r) => Operand::Int(st.xor(r)),
            C::R(r) => {
                let r32 = self.f.cvt(Ty::U32, r);
                let s = self.f.bin(BinOp::Shr, Ty::U32, r32, Operand::Int(shift));
                let s = self.f.bin(BinOp::And, Ty::U32, s, Operand::Int(mask));
                Operand::Reg(self.f.bin(BinOp::Shl, Ty::U32, s, Operand::Int(4)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Stored;

    /// Byte offset of element `e` of stored row `r`.
    fn at(st: &Stored, r: i64, e: i64) -> i64 {
        r * st.row_bytes() + ((e * st.width) ^ st.xor(r))
    }

    /// The 16-byte bank groups (of 8) that the same chunk of rows
    /// `0..8` falls in, for every chunk of the row.
    fn spread(st: &Stored, chunks: i64) -> bool {
        let per = 16 / st.width;
        (0..chunks).all(|c| {
            let mut groups: Vec<i64> = (0..8).map(|r| at(st, r, c * per) / 16 % 8).collect();
            groups.sort_unstable();
            groups.dedup();
            groups.len() == 8
        })
    }

    #[test]
    fn swizzled_rows_spread_over_bank_groups() {
        // bf16 rows of 16, 32, 64, 128 and 256 elements.
        for row in [16, 32, 64, 128, 256] {
            let st = Stored::new(false, row, 2, 0, true);
            assert!(st.swizzle.is_some(), "{row}");
            assert!(spread(&st, row / 8), "{row}");
        }
        // fp32 and fp8 rows.
        assert!(spread(&Stored::new(true, 32, 4, 0, true), 8));
        assert!(spread(&Stored::new(false, 128, 1, 0, true), 8));
    }

    #[test]
    fn swizzle_permutes_chunks_within_a_row() {
        let st = Stored::new(false, 64, 2, 0, true);
        for r in 0..16 {
            let mut chunks: Vec<i64> = (0..8).map(|c| at(&st, r, 8 * c) - r * 128).collect();
            chunks.sort_unstable();
            assert_eq!(chunks, (0..8).map(|c| 16 * c).collect::<Vec<_>>());
            // Elements of a chunk stay together and in order.
            assert_eq!(at(&st, r, 9) - at(&st, r, 8), 2);
        }
    }

    #[test]
    fn padding_keeps_rows_aligned() {
        let st = Stored::new(false, 64, 2, 1, true);
        assert_eq!((st.pitch, st.swizzle), (72, None));
        let st = Stored::new(false, 64, 2, 8, true);
        assert_eq!(st.pitch, 72);
        // Rows of 48 elements (6 chunks) are not swizzled.
        assert_eq!(Stored::new(false, 48, 2, 0, true).swizzle, None);
    }
}

//! `mma.sync.m16n8kK` over a whole warp: the float formats (f32
//! accumulators) and the 8-bit integer ones (s32 accumulators), both
//! reading and writing the fragment layouts of the PTX ISA.

use super::{BlockRunner, WARP};
use crate::alu;
use tessera_ptx::ir::{Fmt, Reg};

/// Where element `j` of A register `i` of lane `l` sits in the 16×K tile,
/// with `e` = [`Fmt::per_reg`] elements per register and K = 8e: with
/// `g = l / 4`, `t = l % 4`, rows `g, g+8, g, g+8` at columns
/// `e·t .. e·t + e` (+K/2 for the last two), the lowest bits first.
fn a_at(l: usize, i: usize, j: usize, e: usize) -> (usize, usize) {
    (l / 4 + 8 * (i % 2), e * (l % 4) + 4 * e * (i / 2) + j)
}

/// Where element `j` of B register `i` of lane `l` sits in the K×8 tile:
/// rows `e·t ..` (+K/2 for the second) of column `g`.
fn b_at(l: usize, i: usize, j: usize, e: usize) -> (usize, usize) {
    (e * (l % 4) + 4 * e * i + j, l / 4)
}

/// Where C or D register `i` of lane `l` sits in the 16×8 tile: `(g, 2t)`,
/// `(g, 2t+1)`, `(g+8, 2t)`, `(g+8, 2t+1)`.
fn c_at(l: usize, i: usize) -> (usize, usize) {
    (l / 4 + 8 * (i / 2), 2 * (l % 4) + i % 2)
}

/// The registers of one `mma`: D, A, B and C.
pub(super) struct MmaRegs<'i> {
    /// The result fragment.
    pub d: &'i [Reg; 4],
    /// A's fragment.
    pub a: &'i [Reg; 4],
    /// B's fragment.
    pub b: &'i [Reg; 2],
    /// The accumulator fragment.
    pub c: &'i [Reg; 4],
}

impl BlockRunner<'_> {
    /// The A and B tiles of one `mma`, each element decoded by `elem`
    /// (format, register bits, element index).
    fn operands<T: Copy + Default>(
        &self,
        w: usize,
        fmt: [Fmt; 2],
        r: &MmaRegs,
        elem: impl Fn(Fmt, u64, usize) -> T,
    ) -> ([[T; 32]; 16], [[T; 8]; 32]) {
        let e = fmt[0].per_reg() as usize;
        let mut am = [[T::default(); 32]; 16];
        let mut bm = [[T::default(); 8]; 32];
        for l in 0..WARP {
            for (i, reg) in r.a.iter().enumerate() {
                let v = self.reg(w, *reg, l);
                for j in 0..e {
                    let (row, col) = a_at(l, i, j, e);
                    am[row][col] = elem(fmt[0], v, j);
                }
            }
            for (i, reg) in r.b.iter().enumerate() {
                let v = self.reg(w, *reg, l);
                for j in 0..e {
                    let (row, col) = b_at(l, i, j, e);
                    bm[row][col] = elem(fmt[1], v, j);
                }
            }
        }
        (am, bm)
    }

    /// `mma.sync.m16n8kK` over the whole warp (module docs): float
    /// formats sum in f32, 8-bit integers in s32.
    pub(super) fn mma(&mut self, w: usize, fmt: [Fmt; 2], r: MmaRegs) {
        if fmt[0].is_int() {
            return self.mma_int(w, fmt, r);
        }
        let e = fmt[0].per_reg() as usize;
        let bits = 32 / e;
        let (am, bm) = self.operands(w, fmt, &r, |f, v, j| {
            alu::operand(f, (v >> (bits * j)) as u32)
        });
        // Products of the operand formats are exact in f64; the sum is formed
        // in double precision and rounded once (the hardware's order is
        // unspecified, this is within its error).
        for l in 0..WARP {
            for i in 0..4 {
                let (row, col) = c_at(l, i);
                let c = f32::from_bits(self.reg(w, r.c[i], l) as u32);
                let s = (0..8 * e).fold(f64::from(c), |s, kk| {
                    s + f64::from(am[row][kk]) * f64::from(bm[kk][col])
                });
                self.set(w, r.d[i], l, u64::from((s as f32).to_bits()));
            }
        }
    }

    /// `mma` with 8-bit integer operands (m16n8k32): exact products summed
    /// into s32 accumulators, wrapping as the hardware does without
    /// `.satfinite`.
    fn mma_int(&mut self, w: usize, fmt: [Fmt; 2], r: MmaRegs) {
        let (am, bm) = self.operands(w, fmt, &r, |f, v, j| {
            let byte = (v >> (8 * j)) as u8;
            if f == Fmt::S8 {
                i32::from(byte as i8)
            } else {
                i32::from(byte)
            }
        });
        for l in 0..WARP {
            for i in 0..4 {
                let (row, col) = c_at(l, i);
                let c = self.reg(w, r.c[i], l) as u32 as i32;
                let s = (0..32).fold(c, |s, kk| {
                    s.wrapping_add(am[row][kk].wrapping_mul(bm[kk][col]))
                });
                self.set(w, r.d[i], l, u64::from(s as u32));
            }
        }
    }
}

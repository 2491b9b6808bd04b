//! `sort` of a tile: a bitonic sorting network in shared memory.
//!
//! The tile's values and their positions along the last axis are written
//! to two shared regions, row-major; then, for `k = 2, 4, ..., n` and
//! `j = k/2, ..., 1`, every thread takes its share of the `total / 2`
//! pairs `(i, i + j)` (`i` with bit `j` clear), compares them and swaps
//! them where they are out of the order of their `k`-block (ascending
//! where bit `k` of `i` is clear, as the last stage is everywhere: so each
//! line of `n` is sorted on its own), a barrier after each stage. The two
//! loops run at run time; a stage's pairs are unrolled. The comparison is
//! the one total order of [`TOp::Sort`](tessera_tile::TOp::Sort) (NaN the
//! largest, ties by position), so the network gives the same permutation
//! as a stable sort. The results are the two regions, read where used. A
//! line of another length is padded to the next power of two with a
//! value that sorts after it (its positions come after the line's), and
//! the results are read back into registers without the padding.

use super::elem::{shared_width, storage_ty};
use super::{Layout, Lower, Val, C, R};
use crate::ir::*;
use tessera_core::Dtype;
use tessera_tile::{Inst as TInst, Value};

/// The registers of one element of a pair: its value and its position.
#[derive(Clone, Copy)]
struct Elem {
    x: Reg,
    at: Reg,
}

impl<'k> Lower<'k> {
    /// Lowers `sort value` (results: the values, their positions).
    pub(super) fn sort(&mut self, inst: &'k TInst, value: Value, descending: bool) -> R<()> {
        let [sorted, places] = inst.results[..] else {
            return Err("a sort without its two results".into());
        };
        let dtype = self.k.ty(value).dtype;
        if dtype == Dtype::Bool {
            return Err("a sort of booleans (sort them as integers)".into());
        }
        let shape = self.shape(value)?;
        let n = *shape.last().ok_or("a sort of a scalar")?;
        if n < 1 {
            return Err("a sort along an empty axis".into());
        }
        // Lines padded to a power of two, with values that go last.
        let n2 = (n as u64).next_power_of_two() as i64;
        let mut padded = shape.clone();
        *padded.last_mut().expect("a sorted tile has an axis") = n2;
        let total: i64 = padded.iter().product();
        let width = shared_width(dtype);
        let keys = self.alloc_shared(format!("{sorted}"), (total as u64) * u64::from(width));
        let at = self.alloc_shared(format!("{places}"), (total as u64) * 4);
        // Each element and its position along the line.
        let layout = self.layout_of(value);
        self.for_slots(&shape, layout, |l, _, coord, valid| {
            let x = l.elem(value, coord)?;
            let flat = l.flatten(coord, &padded);
            let pos = match coord.last() {
                Some(C::R(r)) => l.f.cvt(Ty::S32, *r),
                Some(C::K(c)) => l.f.mov(Ty::S32, Operand::Int(*c)),
                None => unreachable!("a sorted tile has an axis"),
            };
            let e = l.index_u32(flat);
            l.sort_store((keys, at), dtype, e, Elem { x, at: pos }, valid);
            Ok(())
        })?;
        if n2 > n {
            self.sort_padding((keys, at), dtype, (n, n2, total / n2), descending);
        }
        self.f.push(Inst::Barrier);
        if n2 > 1 {
            self.bitonic((keys, at), dtype, (n2, total), descending);
        }
        if n2 == n {
            self.vals[sorted.index()] = Some(Val::Shared(keys));
            self.vals[places.index()] = Some(Val::Shared(at));
            return Ok(());
        }
        // The lines without their padding, into registers.
        let (mut xs, mut ps) = (Vec::new(), Vec::new());
        self.for_slots(&shape, Layout::Flat, |l, _, coord, valid| {
            let flat = l.flatten(coord, &padded);
            let e = l.index_u32(flat);
            let v = l.sort_load((keys, at), dtype, e, valid);
            xs.push(v.x);
            ps.push(v.at);
            Ok(())
        })?;
        self.vals[sorted.index()] = Some(Val::Dist(xs, Layout::Flat));
        self.vals[places.index()] = Some(Val::Dist(ps, Layout::Flat));
        Ok(())
    }

    /// Flat index `flat` in a u32 register (the network's index type).
    fn index_u32(&mut self, flat: C) -> Reg {
        match flat {
            C::R(r) => self.f.cvt(Ty::U32, r),
            C::K(k) => self.f.mov(Ty::U32, Operand::Int(k)),
        }
    }

    /// Fills columns `n..n2` of each of the `rows` lines with the dtype's
    /// [`Dtype::sort_last`].
    fn sort_padding(
        &mut self,
        regions: (u64, u64),
        dtype: Dtype,
        (n, n2, rows): (i64, i64, i64),
        descending: bool,
    ) {
        let ty = super::reg_ty(dtype);
        let x = self.f.mov(ty, dtype.sort_last(descending).into());
        let per = n2 - n;
        let pads = rows * per;
        let tid = self.f.cvt(Ty::U32, self.tid);
        for s in 0..(pads + self.threads - 1) / self.threads {
            let p = self
                .f
                .bin(BinOp::Add, Ty::U32, tid, Operand::Int(s * self.threads));
            let guard = ((s + 1) * self.threads > pads)
                .then(|| self.f.setp(Cmp::Lt, Ty::U32, p, Operand::Int(pads)));
            let row = self.f.bin(BinOp::Div, Ty::U32, p, Operand::Int(per));
            let skip = self.f.bin(BinOp::Rem, Ty::U32, p, Operand::Int(per));
            let col = self.f.bin(BinOp::Add, Ty::U32, skip, Operand::Int(n));
            let e = self.f.fma(Ty::U32, row, Operand::Int(n2), col);
            let pos = self.f.cvt(Ty::S32, col);
            self.sort_store(regions, dtype, e, Elem { x, at: pos }, guard);
        }
    }

    /// The network over the regions at `keys` and `at`: `total` elements
    /// in lines of `n`.
    fn bitonic(
        &mut self,
        (keys, at): (u64, u64),
        dtype: Dtype,
        (n, total): (i64, i64),
        descending: bool,
    ) {
        let log_n = i64::from(n.trailing_zeros());
        // Outer loop: k = 2^lk for lk in 1..=log n.
        let lk = self.f.mov(Ty::U32, Operand::Int(1));
        let last = self.f.mov(Ty::U32, Operand::Int(log_n + 1));
        let (k_top, k_exit) = (self.f.label(), self.f.label());
        self.f.loop_test(k_top, k_exit, (Ty::U32, lk, last));
        let k = self.f.bin(BinOp::Shl, Ty::U32, Operand::Int(1), lk);
        // Bit k of a position, within a line (the last stage sorts every
        // line ascending).
        let k_bit = self.f.bin(BinOp::And, Ty::U32, k, Operand::Int(n - 1));
        // Inner loop: j = k / 2^(m + 1) for m in 0..lk.
        let m = self.f.mov(Ty::U32, Operand::Int(0));
        let (j_top, j_exit) = (self.f.label(), self.f.label());
        self.f.loop_test(j_top, j_exit, (Ty::U32, m, lk));
        let half = self.f.bin(BinOp::Shr, Ty::U32, k, Operand::Int(1));
        let j = self.f.bin(BinOp::Shr, Ty::U32, half, m);
        let low = self.f.bin(BinOp::Sub, Ty::U32, Operand::Int(0), j);
        let tid = self.f.cvt(Ty::U32, self.tid);
        let pairs = total / 2;
        for s in 0..(pairs + self.threads - 1) / self.threads {
            let p = self
                .f
                .bin(BinOp::Add, Ty::U32, tid, Operand::Int(s * self.threads));
            let guard = ((s + 1) * self.threads > pairs)
                .then(|| self.f.setp(Cmp::Lt, Ty::U32, p, Operand::Int(pairs)));
            // i: p with a zero inserted at bit j; its partner i + j.
            let above = self.f.bin(BinOp::And, Ty::U32, p, low);
            let i = self.f.bin(BinOp::Add, Ty::U32, p, above);
            let l = self.f.bin(BinOp::Add, Ty::U32, i, j);
            let down_bits = self.f.bin(BinOp::And, Ty::U32, i, k_bit);
            let down = self.f.setp(Cmp::Ne, Ty::U32, down_bits, Operand::Int(0));
            let a = self.sort_load((keys, at), dtype, i, guard);
            let b = self.sort_load((keys, at), dtype, l, guard);
            // Swap where b goes first in the block's direction.
            let first = self.goes_before(b, a, dtype, descending);
            let swap = self.f.pred_op(Some(BinOp::Xor), first, down);
            let ty = super::reg_ty(dtype);
            for (dst, keep, other) in [(i, a, b), (l, b, a)] {
                let x = self.f.selp(ty, swap, other.x, keep.x);
                let pos = self.f.selp(Ty::S32, swap, other.at, keep.at);
                self.sort_store((keys, at), dtype, dst, Elem { x, at: pos }, guard);
            }
        }
        self.f.push(Inst::Barrier);
        let m_next = self.f.bin(BinOp::Add, Ty::U32, m, Operand::Int(1));
        self.f.push(Inst::Mov {
            dst: m,
            src: Operand::Reg(m_next),
        });
        self.f.loop_back(j_top, j_exit);
        let lk_next = self.f.bin(BinOp::Add, Ty::U32, lk, Operand::Int(1));
        self.f.push(Inst::Mov {
            dst: lk,
            src: Operand::Reg(lk_next),
        });
        self.f.loop_back(k_top, k_exit);
    }

    /// Element `e` (a u32 flat index) of the regions.
    fn sort_load(
        &mut self,
        (keys, at): (u64, u64),
        dtype: Dtype,
        e: Reg,
        guard: Option<Reg>,
    ) -> Elem {
        let guard = guard.map(|pred| Guard {
            pred,
            negated: false,
        });
        let mty = storage_ty(dtype);
        let raw = self.f.reg(mty.reg());
        let addr = self.shared_addr(keys, C::R(e), shared_width(dtype));
        self.f.push(Inst::Ld {
            space: Space::Shared,
            ty: mty,
            dst: raw,
            addr,
            guard,
        });
        let x = self
            .from_storage(raw, dtype)
            .expect("a sorted dtype converts from its storage");
        let pos = self.f.reg(Ty::S32);
        let addr = self.shared_addr(at, C::R(e), 4);
        self.f.push(Inst::Ld {
            space: Space::Shared,
            ty: Ty::S32,
            dst: pos,
            addr,
            guard,
        });
        Elem { x, at: pos }
    }

    /// Writes `v` as element `e` of the regions.
    fn sort_store(
        &mut self,
        (keys, at): (u64, u64),
        dtype: Dtype,
        e: Reg,
        v: Elem,
        guard: Option<Reg>,
    ) {
        let guard = guard.map(|pred| Guard {
            pred,
            negated: false,
        });
        let (src, mty) = self
            .to_storage(v.x, dtype)
            .expect("a sorted dtype converts to its storage");
        let addr = self.shared_addr(keys, C::R(e), shared_width(dtype));
        self.f.push(Inst::St {
            space: Space::Shared,
            ty: mty,
            addr,
            src: Operand::Reg(src),
            guard,
        });
        let addr = self.shared_addr(at, C::R(e), 4);
        self.f.push(Inst::St {
            space: Space::Shared,
            ty: Ty::S32,
            addr,
            src: Operand::Reg(v.at),
            guard,
        });
    }

    /// Whether `b` goes before `a` (a predicate): the greater first when
    /// `descending`, else the smaller; NaN the largest; equal values (two
    /// NaNs among them) by position.
    fn goes_before(&mut self, b: Elem, a: Elem, dtype: Dtype, descending: bool) -> Reg {
        let ty = super::reg_ty(dtype);
        let or = |l: &mut Self, x: Reg, y: Reg| l.f.pred_op(Some(BinOp::Or), x, y);
        let and = |l: &mut Self, x: Reg, y: Reg| l.f.pred_op(Some(BinOp::And), x, y);
        // Ordered comparisons: false where either is NaN.
        let cmp = if descending { Cmp::Gt } else { Cmp::Lt };
        let better = self.f.setp(cmp, ty, b.x, a.x);
        let mut tie = self.f.setp(Cmp::Eq, ty, b.x, a.x);
        let mut first = better;
        if ty.is_float() {
            // `!=` is unordered: true for a NaN only.
            let nan_a = self.f.setp(Cmp::Ne, ty, a.x, a.x);
            let nan_b = self.f.setp(Cmp::Ne, ty, b.x, b.x);
            // The NaN goes last ascending, first descending.
            let (nan, num) = if descending {
                (nan_b, nan_a)
            } else {
                (nan_a, nan_b)
            };
            let not_num = self.f.pred_op(None, num, num);
            let by_nan = and(self, nan, not_num);
            first = or(self, first, by_nan);
            let both = and(self, nan_a, nan_b);
            tie = or(self, tie, both);
        }
        let earlier = self.f.setp(Cmp::Lt, Ty::S32, b.at, a.at);
        let by_place = and(self, tie, earlier);
        or(self, first, by_place)
    }
}

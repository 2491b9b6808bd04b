//! Staging with `cp.async`: a tile loaded from global memory whose rows (or
//! columns: attention's Kᵀ) are contiguous goes into shared memory 16 bytes
//! at a time, without passing through registers. A tile with contiguous
//! columns is stored column by column, and every staged tile is swizzled
//! or padded against bank conflicts (see `smem.rs`).
//!
//! The load's index tiles must be affine in the tile coordinates with a
//! flat stride of 1 along the columns, and its mask (if any) a conjunction
//! of comparisons of affine expressions: then a 16-byte chunk is entirely
//! in bounds and unmasked exactly when its first and last elements are.
//! Each thread takes chunks `t, t + T, ...`: a chunk that is whole, and
//! 16-byte aligned in global memory, is one `cp.async`; any other chunk
//! (the ragged edge, a misaligned row) takes a branch to the element-wise
//! copy. Then the copies are committed and awaited, and the block meets at
//! a barrier.

use super::smem::Stored;
use super::{Lower, C, R};
use crate::ir::*;
use tessera_core::{BinaryOp, UnaryOp};
use tessera_tile::facts::twos;
use tessera_tile::{TOp, Value};

impl<'k> Lower<'k> {
    /// The coefficients of lazy integer tile `v` along its own axes, when
    /// it is an affine function of its coordinates (plus anything uniform).
    pub(super) fn affine(&self, v: Value) -> Option<Vec<i64>> {
        let shape = self.shapes.get(v.index())?.as_ref()?;
        let rank = shape.len();
        match self.vals.get(v.index())?.as_ref()? {
            super::Val::Uniform(_) => return Some(vec![0; rank]),
            super::Val::Lazy => {}
            _ => return None,
        }
        let inst = self.defs.get(&v)?;
        // Coefficients of operand `a` seen through broadcasting.
        let through = |a: Value| -> Option<Vec<i64>> {
            let sa = self.shapes.get(a.index())?.as_ref()?;
            let ca = self.affine(a)?;
            let lead = rank.checked_sub(sa.len())?;
            let mut out = vec![0; rank];
            for (j, n) in sa.iter().enumerate() {
                if *n != 1 {
                    out[lead + j] += ca[j];
                }
            }
            Some(out)
        };
        match &inst.op {
            TOp::Size(_) | TOp::Const(_) | TOp::ProgramId(_) | TOp::NumPrograms(_) => {
                Some(vec![0; rank])
            }
            TOp::Arange(_) => Some(vec![1]),
            TOp::Broadcast(a) | TOp::Cast(a) => through(*a),
            TOp::Reshape(a) => {
                // Only reshapes that add or drop axes of extent 1.
                let sa = self.shapes.get(a.index())?.as_ref()?;
                let ca = self.affine(*a)?;
                let big_a: Vec<usize> = (0..sa.len()).filter(|j| sa[*j] != 1).collect();
                let big_v: Vec<usize> = (0..rank).filter(|j| shape[*j] != 1).collect();
                if big_a.len() != big_v.len()
                    || big_a.iter().zip(&big_v).any(|(x, y)| sa[*x] != shape[*y])
                {
                    return None;
                }
                let mut out = vec![0; rank];
                for (x, y) in big_a.iter().zip(&big_v) {
                    out[*y] = ca[*x];
                }
                Some(out)
            }
            TOp::Permute(a, perm) => {
                let ca = self.affine(*a)?;
                perm.iter().map(|p| ca.get(*p).copied()).collect()
            }
            TOp::Unary(UnaryOp::Neg, a) => Some(through(*a)?.iter().map(|c| -c).collect()),
            TOp::Binary(op @ (BinaryOp::Add | BinaryOp::Sub), a, b) => {
                let (x, y) = (through(*a)?, through(*b)?);
                let s = if *op == BinaryOp::Add { 1 } else { -1 };
                Some(x.iter().zip(&y).map(|(p, q)| p + s * q).collect())
            }
            TOp::Binary(BinaryOp::Mul, a, b) => {
                let (x, y) = (through(*a)?, through(*b)?);
                match (self.constant(*a), self.constant(*b)) {
                    (Some(k), _) => Some(y.iter().map(|c| c * k).collect()),
                    (_, Some(k)) => Some(x.iter().map(|c| c * k).collect()),
                    // A product of two coordinate-free values is uniform.
                    _ if x.iter().chain(&y).all(|c| *c == 0) => Some(vec![0; rank]),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// Whether every access to `param` through `index` (a tile of rank
    /// `rank`) whose coordinate along `axis` is a multiple of `group` (a
    /// power of two) is aligned to `group` elements, in every program and
    /// trip: the uniform part of each index and each coordinate's stride
    /// are multiples of it (see [`tessera_tile::facts`]). Parameters are
    /// whole allocations, aligned to at least 16 bytes (the runtime's
    /// contract with kernels).
    pub(super) fn proves_aligned(
        &self,
        param: usize,
        index: &[Value],
        rank: usize,
        axis: usize,
        group: i64,
    ) -> R<bool> {
        let need = group.trailing_zeros();
        let (_, st) = self.param_strides(param)?;
        for (d, iv) in index.iter().enumerate() {
            let (Some(sh), Some(c)) = (self.shapes[iv.index()].as_ref(), self.affine(*iv)) else {
                return Ok(false);
            };
            let Some(lead) = rank.checked_sub(sh.len()) else {
                return Ok(false);
            };
            if twos(st[d]) + self.facts.align(*iv) < need {
                return Ok(false);
            }
            for (j, n) in sh.iter().enumerate() {
                let free = if lead + j == axis { need } else { 0 };
                if *n != 1 && twos(st[d] * c[j]) + free < need {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// The value of `v` when it is an integer known at compile time.
    pub(super) fn constant(&self, v: Value) -> Option<i64> {
        let inst = self.defs.get(&v)?;
        match &inst.op {
            TOp::Const(x) if x.fract() == 0.0 => Some(*x as i64),
            TOp::Size(s) => s.eval(self.b).ok(),
            TOp::Broadcast(a) | TOp::Cast(a) => self.constant(*a),
            _ => None,
        }
    }

    /// Whether mask `m` holds on a convex set of coordinates (a conjunction
    /// of comparisons between affine values): then it holds on a whole
    /// chunk when it holds at both ends.
    pub(super) fn convex(&self, m: Value) -> bool {
        if let Some(Some(super::Val::Uniform(_))) = self.vals.get(m.index()) {
            return true;
        }
        let Some(inst) = self.defs.get(&m) else {
            return false;
        };
        match &inst.op {
            TOp::Const(_) => true,
            TOp::Broadcast(a) => self.convex(*a),
            TOp::Binary(BinaryOp::And, a, b) => self.convex(*a) && self.convex(*b),
            TOp::Binary(
                BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge | BinaryOp::Eq,
                a,
                b,
            ) => self.affine(*a).is_some() && self.affine(*b).is_some(),
            _ => false,
        }
    }

    /// The parameter, index tiles, mask and out-of-bounds value of `v`,
    /// when it is a load.
    pub(super) fn load_of(&self, v: Value) -> Option<(usize, &'k [Value], Option<Value>, f64)> {
        let inst: &'k tessera_tile::Inst = self.defs.get(&v)?;
        match &inst.op {
            TOp::Load {
                param,
                index,
                mask,
                other,
            } => Some((*param, index, *mask, *other)),
            _ => None,
        }
    }

    /// The flat (element) strides in `param` along the two axes of a
    /// rank-2 access through `index`, when every index tile is affine in
    /// the access coordinates (see [`Lower::affine`]).
    pub(super) fn index_strides(&self, param: usize, index: &[Value]) -> R<Option<[i64; 2]>> {
        Ok(self.index_strides_n(param, index, 2)?.map(|s| [s[0], s[1]]))
    }

    /// The flat strides in `param` along each axis of a rank-`rank` access
    /// through `index` (see [`Lower::index_strides`]).
    pub(super) fn index_strides_n(
        &self,
        param: usize,
        index: &[Value],
        rank: usize,
    ) -> R<Option<Vec<i64>>> {
        let (_, st) = self.param_strides(param)?;
        let mut stride = vec![0i64; rank];
        for (d, iv) in index.iter().enumerate() {
            let Some(sh) = self.shapes.get(iv.index()).cloned().flatten() else {
                return Ok(None);
            };
            let Some(c) = self.affine(*iv) else {
                return Ok(None);
            };
            let Some(lead) = rank.checked_sub(sh.len()) else {
                return Ok(None);
            };
            for (j, n) in sh.iter().enumerate() {
                if *n != 1 {
                    stride[lead + j] += st[d] * c[j];
                }
            }
        }
        Ok(Some(stride))
    }

    /// How `value` can be staged with `cp.async` into shared buffer
    /// `shared` (its padding: see [`super::smem`]), or `None` when it is
    /// not a load this path can copy (see the module docs). Emits nothing.
    pub(super) fn copy_plan(&self, value: Value, shared: usize) -> R<Option<CopyPlan<'k>>> {
        let Some((param, index, mask, other)) = self.load_of(value) else {
            return Ok(None);
        };
        let shape = self.shape(value)?;
        let dtype = self.k.ty(value).dtype;
        let p = &self.k.params[param];
        let width = i64::from(super::elem::shared_width(dtype));
        let Ok(mty) = super::ops::mem_ty(p.dtype) else {
            return Ok(None);
        };
        if shape.len() != 2
            || p.dtype != dtype
            || other != 0.0
            || i64::from(mty.bytes()) != width
            || !matches!(width, 1 | 2 | 4)
        {
            return Ok(None);
        }
        let Some(stride) = self.index_strides(param, index)? else {
            return Ok(None);
        };
        if mask.is_some_and(|m| !self.convex(m)) {
            return Ok(None);
        }
        // Copy along the contiguous axis: the columns (rows in shared
        // memory as in the tile), or the rows (a transposed load: shared
        // memory holds the tile column by column).
        let by_columns = match stride {
            [_, 1] => false,
            [1, _] => true,
            _ => return Ok(None),
        };
        let per = 16 / width;
        let (outer, inner) = if by_columns {
            (shape[1], shape[0])
        } else {
            (shape[0], shape[1])
        };
        if inner % per != 0 {
            return Ok(None);
        }
        let padding = self
            .k
            .shared
            .get(shared)
            .map_or(0, |s| i64::from(s.padding));
        // Tiles wgmma may read lie in its canonical layouts, aligned to
        // their 1024-byte swizzle pattern, and may come by TMA.
        let wgmma = padding == 0 && self.wgmma_reads(value);
        let stored = if wgmma {
            Stored::for_wgmma(by_columns, inner, width, outer)
        } else {
            Stored::new(by_columns, inner, width, padding, self.uses_mma())
        };
        let tma = if wgmma {
            self.tma_plan((param, index, mask), &stored, (outer, inner))?
        } else {
            None
        };
        Ok(Some(CopyPlan {
            value,
            param,
            index,
            mask,
            dtype,
            stored,
            outer,
            inner,
            align: if wgmma { 1024 } else { 16 },
            tma,
        }))
    }

    /// Stages `value` into a fresh shared region with `cp.async`, or
    /// `None` when it is not a load this path can copy (see the module
    /// docs).
    pub(super) fn stage_async(&mut self, value: Value, shared: usize) -> R<Option<(u64, Stored)>> {
        let Some(plan) = self.copy_plan(value, shared)? else {
            return Ok(None);
        };
        let off = self.alloc_shared_aligned(format!("{value}"), plan.bytes(), plan.align);
        // Earlier readers of the region (a previous loop trip) finish first.
        self.f.push(Inst::Barrier);
        self.emit_copy(&plan, off, None)?;
        self.f.push(Inst::CpAsyncCommit);
        self.f.push(Inst::CpAsyncWait(0));
        self.f.push(Inst::Barrier);
        Ok(Some((off, plan.stored)))
    }

    /// Issues the copies of `plan` into the shared region at `off` (plus
    /// the bytes in register `ring`, for a pipeline's ring of buffers); not
    /// committed, not awaited.
    pub(super) fn emit_copy(&mut self, plan: &CopyPlan<'k>, off: u64, ring: Option<Reg>) -> R<()> {
        let CopyPlan {
            value,
            param,
            index,
            mask,
            dtype,
            stored,
            outer,
            inner,
            ..
        } = *plan;
        let stored = Stored { ring, ..stored };
        let (width, by_columns) = (stored.width, stored.by_columns);
        let per = 16 / width;
        // Tile coordinates of element `i` of stored row `o`.
        let at = |o: C, i: C| if by_columns { [i, o] } else { [o, i] };
        let chunks = outer * inner / per;
        // Chunks start at multiples of `per` along the contiguous axis.
        let aligned = self.proves_aligned(param, index, 2, usize::from(!by_columns), per)?;
        self.f.push(Inst::Comment(format!(
            "stage {value}: {chunks} chunks of 16 bytes, cp.async"
        )));
        let saved = self.cur.take();
        self.memo.clear();
        for s in 0..(chunks + self.threads - 1) / self.threads {
            self.memo.clear();
            let e = self.f.bin(
                BinOp::Add,
                Ty::S64,
                self.tid,
                Operand::Int(s * self.threads),
            );
            let in_tile = (s + 1) * self.threads > chunks;
            let e = if in_tile {
                self.f.bin(BinOp::Min, Ty::S64, e, Operand::Int(chunks - 1))
            } else {
                e
            };
            // Chunk `e` is (stored row, chunk in the row); a whole round
            // of chunks takes them from per-thread bases.
            let grid = [outer, inner / per];
            let (row, c0) = match (in_tile, self.flat_slot(&grid, s)) {
                (false, Some(rc)) => (self.reg_of(rc[0]), self.reg_of(rc[1])),
                _ => (
                    self.f
                        .bin(BinOp::Div, Ty::S64, e, Operand::Int(inner / per)),
                    self.f
                        .bin(BinOp::Rem, Ty::S64, e, Operand::Int(inner / per)),
                ),
            };
            let c0 = self.f.bin(BinOp::Mul, Ty::S64, c0, Operand::Int(per));
            let c7 = self.f.bin(BinOp::Add, Ty::S64, c0, Operand::Int(per - 1));
            let (first, ok0) = self.access(param, index, mask, &at(C::R(row), C::R(c0)))?;
            let (_, ok7) = self.access(param, index, mask, &at(C::R(row), C::R(c7)))?;
            let whole = self.whole(first, 16, aligned, [ok0, ok7]);
            // Threads past the last chunk copy nothing.
            let mine = if in_tile {
                let e0 = self.f.bin(
                    BinOp::Add,
                    Ty::S64,
                    self.tid,
                    Operand::Int(s * self.threads),
                );
                Some(self.f.setp(Cmp::Lt, Ty::S64, e0, Operand::Int(chunks)))
            } else {
                None
            };
            let fast = match (whole, mine) {
                (Some(w), Some(m)) => Some(self.f.pred_op(Some(BinOp::And), w, m)),
                (w, m) => w.or(m),
            };
            let dst = self.stored_addr(off, stored, C::R(row), C::R(c0));
            self.f.push(Inst::CpAsync {
                dst,
                src: first,
                guard: fast.map(|pred| Guard {
                    pred,
                    negated: false,
                }),
            });
            // Chunks proven whole (static shapes, multiples of the tile)
            // need no element-wise fallback.
            let Some(whole) = whole else {
                continue;
            };
            // The rest, element by element, where the chunk is not whole.
            let slow = self.f.pred_op(None, whole, whole);
            let slow = match mine {
                Some(m) => self.f.pred_op(Some(BinOp::And), slow, m),
                None => slow,
            };
            let skip = self.f.label();
            self.f.push(Inst::Bra {
                target: skip,
                guard: Some(Guard {
                    pred: slow,
                    negated: true,
                }),
            });
            // A loop over the chunk's elements (rarely taken: one copy of
            // its body, not `per`).
            let ety = self.rty(value);
            self.counted_loop(per, |l, j| {
                let cj = l.f.bin(BinOp::Add, Ty::S64, c0, Operand::Reg(j));
                let coord = at(C::R(row), C::R(cj));
                let x = l.load_elem(param, index, mask, 0.0, &coord, ety)?;
                let (src, sty) = l.to_storage(x, dtype)?;
                let addr = l.stored_addr(off, stored, C::R(row), C::R(cj));
                l.f.push(Inst::St {
                    space: Space::Shared,
                    ty: sty,
                    addr,
                    src: Operand::Reg(src),
                    guard: None,
                });
                Ok(())
            })?;
            self.f.push(Inst::Label(skip));
        }
        self.memo.clear();
        self.cur = saved;
        Ok(())
    }
}

/// A load that `cp.async` can stage (from [`Lower::copy_plan`]).
#[derive(Clone, Copy)]
pub(super) struct CopyPlan<'k> {
    /// The loaded tile.
    pub value: Value,
    param: usize,
    index: &'k [Value],
    mask: Option<Value>,
    dtype: tessera_core::Dtype,
    /// How the copy lies in shared memory.
    pub stored: Stored,
    /// Stored rows, and elements of the tile in each.
    outer: i64,
    inner: i64,
    /// The alignment of the tile's shared region, in bytes.
    pub align: u64,
    /// How the TMA copies it, where it may (in a software pipeline).
    pub tma: Option<super::tma::TmaPlan>,
}

impl<'k> CopyPlan<'k> {
    /// The loaded parameter and the load's index tiles.
    pub fn source(&self) -> (usize, &'k [Value]) {
        (self.param, self.index)
    }
}

impl CopyPlan<'_> {
    /// Bytes of one copy of the tile in shared memory (a multiple of its
    /// alignment, so that a ring of copies stays aligned).
    pub fn bytes(&self) -> u64 {
        (self.stored.tile_bytes(self.outer) as u64).next_multiple_of(self.align)
    }
}

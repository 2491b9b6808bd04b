//! Elements of tile values at coordinates: the per-thread evaluation of
//! lazy values, reads of distributed and shared values, and the
//! materialisation of a tile into slots or into shared memory.

use super::builder::PhiloxKey;
use super::{reg_ty, Layout, Lower, Val, C, R};
use crate::ir::*;
use tessera_core::Dtype;
use tessera_core::{BinaryOp, UnaryOp};
use tessera_tile::{Seed, TOp, Value};

/// The memory type of a tile dtype in shared memory.
pub(crate) fn storage_ty(d: Dtype) -> Ty {
    match d {
        Dtype::Bf16 | Dtype::Fp16 => Ty::B16,
        Dtype::Bool | Dtype::Fp8E4m3 | Dtype::Fp8E5m2 | Dtype::Uint8 => Ty::U8,
        Dtype::Int8 => Ty::S8,
        d => reg_ty(d),
    }
}

/// Bytes per element of a tile dtype in shared memory.
pub(crate) fn shared_width(d: Dtype) -> u32 {
    storage_ty(d).bytes()
}

/// Row-major strides of `shape`.
pub(crate) fn strides(shape: &[i64]) -> Vec<i64> {
    let mut s = vec![1i64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

impl<'k> Lower<'k> {
    /// Coordinate `c` in a register (a constant is moved into one).
    pub(super) fn reg_of(&mut self, c: C) -> Reg {
        match c {
            C::R(r) => r,
            C::K(k) => self.f.mov(Ty::S64, Operand::Int(k)),
        }
    }

    /// `c` as an operand.
    pub(super) fn op(c: C) -> Operand {
        match c {
            C::K(k) => Operand::Int(k),
            C::R(r) => Operand::Reg(r),
        }
    }

    /// `a * k + b` on coordinates, folded when constant.
    pub(super) fn c_mad(&mut self, a: C, k: i64, b: C) -> C {
        match (a, b) {
            (C::K(x), C::K(y)) => C::K(x * k + y),
            (a, C::K(0)) if k == 1 => a,
            (C::K(0), b) => b,
            (a, b) => C::R(
                self.f
                    .fma(Ty::S64, Self::op(a), Operand::Int(k), Self::op(b)),
            ),
        }
    }

    /// The flat row-major index of `coord` in `shape`.
    pub(super) fn flatten(&mut self, coord: &[C], shape: &[i64]) -> C {
        let st = strides(shape);
        let mut acc = C::K(0);
        for (c, s) in coord.iter().zip(st) {
            acc = self.c_mad(*c, s, acc);
        }
        acc
    }

    /// The coordinates of flat index `e` in `shape`.
    pub(super) fn unflatten(&mut self, e: C, shape: &[i64]) -> Vec<C> {
        let st = strides(shape);
        shape
            .iter()
            .zip(st)
            .map(|(&n, s)| match e {
                C::K(x) => C::K((x / s) % n.max(1)),
                C::R(_) if n == 1 => C::K(0),
                C::R(r) => {
                    let q = if s == 1 {
                        r
                    } else {
                        self.f.bin(BinOp::Div, Ty::S64, r, Operand::Int(s))
                    };
                    let total: i64 = shape.iter().product();
                    if s * n == total {
                        // The outermost varying axis needs no remainder.
                        C::R(q)
                    } else {
                        C::R(self.f.bin(BinOp::Rem, Ty::S64, q, Operand::Int(n)))
                    }
                }
            })
            .collect()
    }

    /// Maps coordinates in `from` to an operand of shape `to` broadcast to
    /// it (numpy rules: right-aligned, extent-1 axes read index 0).
    pub(super) fn bcast(coord: &[C], to: &[i64]) -> Vec<C> {
        let lead = coord.len().saturating_sub(to.len());
        to.iter()
            .enumerate()
            .map(|(j, &n)| if n == 1 { C::K(0) } else { coord[lead + j] })
            .collect()
    }

    /// The coordinates of slot `s` of this thread in a tile of `shape` in
    /// `layout`, and whether the slot holds an element.
    ///
    /// In the `Mma` layout slot `s = (i·nt + j)·4 + r` of lane `l` in warp
    /// `(wi, wj)` is row `wi·M/wm + 16i + l/4 + 8·(r/2)`, column
    /// `wj·N/wn + 8j + 2·(l%4) + r%2`: the accumulator registers of
    /// `mma.m16n8` over the warp's `mt × nt` pieces.
    pub(super) fn slot_coords(
        &mut self,
        shape: &[i64],
        layout: Layout,
        s: i64,
    ) -> (Vec<C>, Option<Reg>) {
        if let Layout::Rows { wm } = layout {
            let (rb, _) = self.frag_base(Layout::Mma { wm, wn: 1 }, shape[0], 8);
            let row = self.c_mad(C::R(rb), 1, C::K(16 * (s / 2) + 8 * (s % 2)));
            let mut coord = vec![row];
            coord.extend(shape.iter().skip(1).map(|_| C::K(0)));
            // The quad's first lane writes.
            let (_, t2) = self.lane_regs();
            let lead = self.f.setp(Cmp::Eq, Ty::S64, t2, Operand::Int(0));
            return (coord, Some(lead));
        }
        if let Layout::Vec { v } = layout {
            // The group's first element; the others follow in its row.
            let n: i64 = shape.iter().product();
            let (q, k) = (s / v, s % v);
            let e = self.f.fma(
                Ty::S64,
                self.tid,
                Operand::Int(v),
                Operand::Int(q * v * self.threads),
            );
            let (e, valid) = if (q + 1) * v * self.threads > n {
                let valid = self.f.setp(Cmp::Lt, Ty::S64, e, Operand::Int(n));
                let clamped = self.f.bin(BinOp::Min, Ty::S64, e, Operand::Int(n - v));
                (clamped, Some(valid))
            } else {
                (e, None)
            };
            let mut coord = self.unflatten(C::R(e), shape);
            if let Some(last) = coord.last_mut() {
                *last = self.c_mad(*last, 1, C::K(k));
            }
            return (coord, valid);
        }
        if let Layout::Mma { wn, .. } = layout {
            let (m, n) = (shape[0], shape[1]);
            let nt = n / wn / 8;
            let (rb, cb) = self.frag_base(layout, m, n);
            let (r, j, i) = (s % 4, (s / 4) % nt, s / (4 * nt));
            let row = self.c_mad(C::R(rb), 1, C::K(i * 16 + 8 * (r / 2)));
            let col = self.c_mad(C::R(cb), 1, C::K(j * 8 + r % 2));
            return (vec![row, col], None);
        }
        let n: i64 = shape.iter().product();
        if n == 1 {
            // Every thread computes the single element.
            return (vec![C::K(0); shape.len()], None);
        }
        let e = self.f.bin(
            BinOp::Add,
            Ty::S64,
            self.tid,
            Operand::Int(s * self.threads),
        );
        if (s + 1) * self.threads <= n {
            if let Some(coord) = self.flat_slot(shape, s) {
                return (coord, None);
            }
            return (self.unflatten(C::R(e), shape), None);
        }
        // Threads past the end compute a copy of the last element (in
        // bounds everywhere) and write nothing.
        let valid = self.f.setp(Cmp::Lt, Ty::S64, e, Operand::Int(n));
        let clamped = self.f.bin(BinOp::Min, Ty::S64, e, Operand::Int(n - 1));
        (self.unflatten(C::R(clamped), shape), Some(valid))
    }

    /// The coordinates of slot `s` (whole: `(s + 1)·T` elements fit in
    /// `shape`) of the flat layout from per-thread bases ([`Lower::flat_bases`]),
    /// each a base plus a constant the address can carry; `None` when the
    /// thread count does not allow it.
    pub(super) fn flat_slot(&mut self, shape: &[i64], s: i64) -> Option<Vec<C>> {
        let bases = self.flat_bases(shape)?;
        Some(
            bases
                .into_iter()
                .map(|(base, step)| match base {
                    C::R(r) => C::R(self.offset_reg(r, s * step)),
                    C::K(k) => C::K(k + s * step),
                })
                .collect(),
        )
    }

    /// In the flat layout of `shape`, each coordinate of slot `s` as
    /// `base + s·step` with `base` computed once per thread (in the
    /// prologue), when the thread count makes that exact: the element of
    /// slot `s` is `t + s·T`, so along an axis of stride `st` that divides
    /// `T` the coordinate is `t/st + s·T/st` (the outermost axis) or
    /// `(t/st) mod n` whatever the slot (an inner axis of extent `n` that
    /// divides `T/st`). `None` when some axis is neither. Slots then share
    /// one base per axis instead of each dividing its own flat index.
    pub(super) fn flat_bases(&mut self, shape: &[i64]) -> Option<Vec<(C, i64)>> {
        if let Some(b) = self.flat_bases.get(shape) {
            return b.clone();
        }
        let total: i64 = shape.iter().product();
        let threads = self.threads;
        let st = strides(shape);
        let plan: Option<Vec<(i64, i64, bool)>> = shape
            .iter()
            .zip(&st)
            .map(|(&n, &st)| {
                if n == 1 {
                    return Some((1, 0, false));
                }
                if threads % st != 0 {
                    return None;
                }
                let q = threads / st;
                if st * n == total {
                    Some((st, q, false))
                } else if q % n == 0 {
                    Some((st, 0, true))
                } else {
                    None
                }
            })
            .collect();
        let bases = plan.map(|plan| {
            self.in_prologue(|l| {
                plan.iter()
                    .zip(shape)
                    .map(|(&(st, step, wrap), &n)| {
                        if n == 1 {
                            return (C::K(0), 0);
                        }
                        let q = if st == 1 {
                            l.tid
                        } else {
                            l.f.bin(BinOp::Div, Ty::S64, l.tid, Operand::Int(st))
                        };
                        let q = if wrap {
                            l.f.bin(BinOp::Rem, Ty::S64, q, Operand::Int(n))
                        } else {
                            q
                        };
                        (C::R(q), step)
                    })
                    .collect::<Vec<_>>()
            })
        });
        self.flat_bases.insert(shape.to_vec(), bases.clone());
        bases
    }

    /// The first row and column this lane holds in an `Mma` layout of an
    /// `[m, n]` tile (computed once per kernel, at its start).
    pub(super) fn frag_base(&mut self, layout: Layout, m: i64, n: i64) -> (Reg, Reg) {
        let Layout::Mma { wm, wn } = layout else {
            unreachable!("only mma layouts have fragment bases")
        };
        if let Some(b) = self.frag_bases.get(&(layout, m, n)) {
            return *b;
        }
        let (g, t2) = self.lane_regs();
        let (rb, cb) = self.in_prologue(|l| {
            let warp = l.f.bin(BinOp::Shr, Ty::S64, l.tid, Operand::Int(5));
            let wi = l.f.bin(BinOp::Div, Ty::S64, warp, Operand::Int(wn));
            let wj = l.f.bin(BinOp::Rem, Ty::S64, warp, Operand::Int(wn));
            let rb = l.f.fma(Ty::S64, wi, Operand::Int(m / wm), g);
            let cb = l.f.fma(Ty::S64, wj, Operand::Int(n / wn), t2);
            (rb, cb)
        });
        self.frag_bases.insert((layout, m, n), (rb, cb));
        (rb, cb)
    }

    /// Emits `f`'s instructions at the end of the kernel's prologue (after
    /// the parameters and thread index), so that they dominate every use.
    pub(super) fn in_prologue<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        let saved = std::mem::take(&mut self.f.body);
        self.f.unrecord();
        let out = f(self);
        let prologue = std::mem::replace(&mut self.f.body, saved);
        let at = self.prologue_end;
        let n = self.f.splice(at, prologue);
        self.prologue_end += n;
        for scope in &mut self.loops {
            scope.preheader += n;
        }
        out
    }

    /// Runs `f` with its code placed in the innermost loop's preheader
    /// (see [`LoopScope`]); code it places in the prologue stays there.
    pub(super) fn in_preheader<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        let (start, prologue) = (self.f.body.len(), self.prologue_end);
        self.f.unrecord();
        let out = f(self);
        // Code put in the prologue meanwhile moved everything after it.
        let start = start + (self.prologue_end - prologue);
        let moved: Vec<_> = self.f.body.drain(start..).collect();
        let at = self.loops.last().expect("a loop to hoist out of").preheader;
        let n = self.f.splice(at, moved);
        if let Some(scope) = self.loops.last_mut() {
            scope.preheader += n;
        }
        out
    }

    /// The registers of every slot of `v` in `layout` (the registers
    /// themselves when `v` is already distributed that way).
    pub(super) fn slot_values(&mut self, v: Value, layout: Layout) -> R<Vec<Reg>> {
        if let Val::Dist(regs, l) = self.val(v)? {
            if l == layout {
                return Ok(regs);
            }
        }
        let shape = self.shape(v)?;
        let ty = self.rty(v);
        let mut regs = Vec::new();
        self.for_slots(&shape, layout, |l, _, coord, _| {
            let r = l.elem(v, coord)?;
            regs.push(l.convert(r, ty)?);
            Ok(())
        })?;
        Ok(regs)
    }

    /// Calls `f(self, slot, coordinates, valid)` for every slot of a tile
    /// of `shape` in `layout`, with the slot current (so that operands
    /// distributed the same way are read from their registers).
    pub(super) fn for_slots(
        &mut self,
        shape: &[i64],
        layout: Layout,
        mut f: impl FnMut(&mut Self, usize, &[C], Option<Reg>) -> R<()>,
    ) -> R<()> {
        let n: i64 = shape.iter().product();
        let saved = self.cur.take();
        for s in 0..self.slots(n, layout) {
            let (coord, valid) = self.slot_coords(shape, layout, s);
            self.cur = Some((shape.to_vec(), layout, coord.clone(), s as usize));
            self.memo.clear();
            f(self, s as usize, &coord, valid)?;
        }
        self.cur = saved;
        self.memo.clear();
        Ok(())
    }

    /// The layout `v` is held in (`Flat` unless distributed otherwise).
    pub(super) fn layout_of(&self, v: Value) -> Layout {
        match &self.vals[v.index()] {
            Some(Val::Dist(_, l)) => *l,
            _ => Layout::Flat,
        }
    }

    /// Copies `v` into a fresh shared region (once per scope) and returns
    /// its offset. `None` for `reuse` allocates anew.
    pub(super) fn to_shared(&mut self, v: Value, reuse: Option<()>) -> R<u64> {
        let _ = reuse;
        if let Some(off) = self.spilled.get(&v) {
            return Ok(*off);
        }
        let shape = self.shape(v)?;
        let n: i64 = shape.iter().product();
        let dtype = self.k.ty(v).dtype;
        let width = shared_width(dtype);
        let bytes = (n as u64) * u64::from(width);
        // The smallest dead region that fits, its rest left free (16-byte
        // pieces, as `alloc_shared` aligns).
        let need = bytes.next_multiple_of(16);
        let best = (self.free_spills.iter().enumerate())
            .filter(|(_, &(_, b))| b >= need)
            .min_by_key(|(_, &(_, b))| b)
            .map(|(i, _)| i);
        let off = match best {
            Some(i) => {
                let (off, region) = self.free_spills.swap_remove(i);
                if region > need {
                    self.free_spills.push((off + need, region - need));
                }
                self.spill_bytes.insert(v, need);
                off
            }
            None => {
                self.spill_bytes.insert(v, need);
                self.alloc_shared(format!("{v}"), bytes)
            }
        };
        // Earlier readers of this region (a previous loop trip) finish first.
        self.f.push(Inst::Barrier);
        let layout = self.layout_of(v);
        self.for_slots(&shape, layout, |l, _, coord, valid| {
            let x = l.elem(v, coord)?;
            let valid = l.writer_guard(n, valid);
            let flat = l.flatten(coord, &shape);
            let addr = l.shared_addr(off, flat, width);
            let (src, mty) = l.to_storage(x, dtype)?;
            l.f.push(Inst::St {
                space: Space::Shared,
                ty: mty,
                addr,
                src: Operand::Reg(src),
                guard: valid.map(|pred| Guard {
                    pred,
                    negated: false,
                }),
            });
            Ok(())
        })?;
        self.f.push(Inst::Barrier);
        self.spilled.insert(v, off);
        Ok(off)
    }

    /// The guard of a store of one slot of a tile of `n` elements: a
    /// single element is held by every thread, and only thread 0 writes
    /// it (the others would race, if harmlessly).
    pub(super) fn writer_guard(&mut self, n: i64, valid: Option<Reg>) -> Option<Reg> {
        if n != 1 {
            return valid;
        }
        let first = self.f.setp(Cmp::Eq, Ty::S64, self.tid, Operand::Int(0));
        Some(match valid {
            Some(v) => self.f.pred_op(Some(BinOp::And), v, first),
            None => first,
        })
    }

    /// The address of element `flat` of a shared region at `off`.
    pub(super) fn shared_addr(&mut self, off: u64, flat: C, width: u32) -> Addr {
        match flat {
            C::K(k) => Addr::Shared(off as i64 + k * i64::from(width)),
            C::R(r) => {
                let r32 = self.f.cvt(Ty::U32, r);
                let base = self.f.reg(Ty::U32);
                self.f.push(Inst::SharedBase { dst: base });
                let a = self
                    .f
                    .fma(Ty::U32, r32, Operand::Int(i64::from(width)), base);
                Addr::Reg(a, off as i64)
            }
        }
    }

    /// Reads element `coord` of a value held in shared memory at `off`.
    fn read_shared(&mut self, v: Value, off: u64, coord: &[C]) -> R<Reg> {
        let dtype = self.k.ty(v).dtype;
        let addr = match (self.stored(v), coord) {
            (Some(st), [r, c]) => {
                let (r, e) = st.place([*r, *c]);
                self.stored_addr(off, st, r, e)
            }
            _ => {
                let shape = self.shape(v)?;
                let flat = self.flatten(coord, &shape);
                self.shared_addr(off, flat, shared_width(dtype))
            }
        };
        let mty = storage_ty(dtype);
        let raw = self.f.reg(mty.reg());
        self.f.push(Inst::Ld {
            space: Space::Shared,
            ty: mty,
            dst: raw,
            addr,
            guard: None,
        });
        self.from_storage(raw, dtype)
    }

    /// A register value in `dtype`'s shared-memory form (bf16/fp16 as 16
    /// bits, booleans as bytes), and the memory type to store it as.
    pub(super) fn to_storage(&mut self, x: Reg, dtype: Dtype) -> R<(Reg, Ty)> {
        Ok(match dtype {
            Dtype::Bf16 | Dtype::Fp16 => {
                let x = self.convert(x, Ty::F32)?;
                let h = self.f.reg(Ty::B16);
                self.f.push(Inst::CvtHalf {
                    bf16: dtype == Dtype::Bf16,
                    widen: false,
                    dst: h,
                    src: x,
                });
                (h, Ty::B16)
            }
            Dtype::Bool => (
                self.f.selp(Ty::U32, x, Operand::Int(1), Operand::Int(0)),
                Ty::U8,
            ),
            d => match super::f8_fmt(d) {
                Some(fmt) => {
                    let x = self.convert(x, Ty::F32)?;
                    (self.f.f8_narrow(fmt, x), Ty::U8)
                }
                None => (x, storage_ty(dtype)),
            },
        })
    }

    /// The register value of a raw shared-memory word of `dtype`.
    pub(super) fn from_storage(&mut self, raw: Reg, dtype: Dtype) -> R<Reg> {
        Ok(match dtype {
            Dtype::Bf16 | Dtype::Fp16 => {
                let dst = self.f.reg(Ty::F32);
                self.f.push(Inst::CvtHalf {
                    bf16: dtype == Dtype::Bf16,
                    widen: true,
                    dst,
                    src: raw,
                });
                dst
            }
            Dtype::Bool => self.f.setp(Cmp::Ne, Ty::U32, raw, Operand::Int(0)),
            d => match super::f8_fmt(d) {
                Some(fmt) => self.f.f8_widen(fmt, raw),
                None => raw,
            },
        })
    }

    /// The register holding element `coord` of `v`.
    pub(super) fn elem(&mut self, v: Value, coord: &[C]) -> R<Reg> {
        let key = (v, coord.to_vec());
        if let Some(r) = self.memo.get(&key) {
            return Ok(*r);
        }
        if !self.vec_loads.is_empty() {
            if let Some(r) = self.vec_loads.get(&key) {
                return Ok(*r);
            }
        }
        let r = match self.val(v)? {
            Val::Uniform(r) => r,
            Val::Dist(regs, layout) => {
                let shape = self.shape(v)?;
                let slot = match &self.cur {
                    Some((s, l, c, slot)) if *s == shape && *l == layout && c == coord => {
                        Some(*slot)
                    }
                    _ => self.row_slot(&shape, layout, coord),
                };
                match slot {
                    Some(slot) => regs[slot],
                    None => {
                        // Another thread's element: through shared memory.
                        let saved_memo = std::mem::take(&mut self.memo);
                        let off = self.to_shared(v, None)?;
                        self.memo = saved_memo;
                        self.read_shared(v, off, coord)?
                    }
                }
            }
            Val::Shared(off) => self.read_shared(v, off, coord)?,
            Val::Lazy => self.eval_lazy(v, coord)?,
        };
        self.memo.insert(key, r);
        Ok(r)
    }

    /// The slot holding element `coord` of a tile of `shape` in a `Rows`
    /// `layout`, when it is the current slot's row: the current slot is of
    /// the same `Rows` layout, or of the `Mma` layout whose rows it holds.
    pub(super) fn row_slot(&self, shape: &[i64], layout: Layout, coord: &[C]) -> Option<usize> {
        let Layout::Rows { wm } = layout else {
            return None;
        };
        let (cs, cl, cc, slot) = self.cur.as_ref()?;
        if coord.first() != cc.first() || cs.first() != shape.first() {
            return None;
        }
        match *cl {
            Layout::Rows { wm: w } if w == wm => Some(*slot),
            Layout::Mma { wm: w, wn: 1 } if w == wm && cs.len() == 2 => {
                // Accumulator slot (i·nt + j)·4 + r is in row half r / 2.
                let nt = (cs[1] / 8) as usize;
                Some(2 * (slot / (4 * nt)) + (slot % 4) / 2)
            }
            _ => None,
        }
    }

    /// The operands of `v` when it is an fp32 difference `x - y` of fp32
    /// values that reading again costs nothing more: `v` is itself
    /// evaluated lazily, or both are held in registers.
    fn f32_sub(&self, v: Value) -> Option<(Value, Value)> {
        let inst = self.defs.get(&v)?;
        let TOp::Binary(BinaryOp::Sub, x, y) = inst.op else {
            return None;
        };
        let f32 = |u: Value| self.k.ty(u).dtype == Dtype::Fp32;
        let lazy = matches!(self.vals[v.index()], Some(Val::Lazy));
        (f32(v) && f32(x) && f32(y) && (lazy || self.held(x) && self.held(y))).then_some((x, y))
    }

    /// Whether `u` is held in registers (distributed or uniform).
    fn held(&self, u: Value) -> bool {
        matches!(
            self.vals[u.index()],
            Some(Val::Dist(..)) | Some(Val::Uniform(_))
        )
    }

    /// Whether reading `u` again costs no more than reading its registers:
    /// it is held in registers, or evaluated lazily anyway.
    fn cheap(&self, u: Value) -> bool {
        self.held(u) || matches!(self.vals[u.index()], Some(Val::Lazy))
    }

    /// `(s, c)` when fp32 `v` is `s · c` (either order) for a uniform
    /// scalar `c` and an `s` of `v`'s shape that is cheap to read again.
    pub(super) fn scaled(&self, v: Value) -> Option<(Value, Value)> {
        let inst = self.defs.get(&v)?;
        let TOp::Binary(BinaryOp::Mul, a, b) = inst.op else {
            return None;
        };
        let f32 = |u: Value| self.k.ty(u).dtype == Dtype::Fp32;
        let uniform = |u: Value| matches!(self.vals[u.index()], Some(Val::Uniform(_)));
        let same = |u: Value| self.shapes[u.index()] == self.shapes[v.index()];
        let (s, c) = if uniform(b) { (a, b) } else { (b, a) };
        (f32(v) && f32(s) && f32(c) && uniform(c) && same(s) && self.cheap(s)).then_some((s, c))
    }

    /// Whether uniform `c` is positive and finite in every program: a
    /// positive constant or size, its conversion, or its (reciprocal)
    /// square root.
    pub(super) fn positive(&self, c: Value, depth: u32) -> bool {
        if depth > 16 {
            return false;
        }
        if let Some(r) = self.facts.range(c) {
            return r.lo > 0;
        }
        let Some(inst) = self.defs.get(&c) else {
            return false;
        };
        match inst.op {
            TOp::Const(x) => x > 0.0 && x.is_finite(),
            TOp::Cast(a) | TOp::Unary(UnaryOp::Sqrt | UnaryOp::Rsqrt, a) => {
                self.positive(a, depth + 1)
            }
            _ => false,
        }
    }

    /// An operand of `result` read at `coord` (broadcast to its shape).
    fn operand(&mut self, a: Value, coord: &[C]) -> R<Reg> {
        let sa = self.shape(a)?;
        let c = Self::bcast(coord, &sa);
        self.elem(a, &c)
    }

    /// Evaluates lazy value `v` at `coord`.
    fn eval_lazy(&mut self, v: Value, coord: &[C]) -> R<Reg> {
        let inst = *self
            .defs
            .get(&v)
            .ok_or_else(|| format!("internal error: {v} has no definition"))?;
        if inst.span == tessera_tile::Span::default() {
            return self.eval_lazy_at(inst, v, coord);
        }
        let outer = self.f.at(inst.span);
        let r = self.eval_lazy_at(inst, v, coord);
        self.f.at(outer);
        r
    }

    /// [`eval_lazy`](Self::eval_lazy) of `v`, defined by `inst`, at the
    /// current source position.
    fn eval_lazy_at(&mut self, inst: &'k tessera_tile::Inst, v: Value, coord: &[C]) -> R<Reg> {
        let ty = self.rty(v);
        let dtype = self.k.ty(v).dtype;
        Ok(match &inst.op {
            TOp::Size(s) => {
                let n = s.eval(self.b)?;
                self.f.mov(ty, Operand::Int(n))
            }
            TOp::Const(x) => match ty {
                Ty::Pred => {
                    let z = self.f.mov(Ty::S32, Operand::Int(0));
                    let cmp = if *x != 0.0 { Cmp::Eq } else { Cmp::Ne };
                    self.f.setp(cmp, Ty::S32, z, Operand::Int(0))
                }
                t if t.is_float() => self.f.mov(t, Operand::Float(*x)),
                // A float constant of an integer dtype (a masked lane's
                // `-inf`) saturates to the dtype's range, as every cast
                // does (NaN is 0), on every backend.
                t => self.f.mov(t, Operand::Int(saturate(*x, dtype))),
            },
            TOp::Arange(start) => {
                let r = match coord[0] {
                    C::K(k) => self.f.mov(Ty::S64, Operand::Int(k + start)),
                    C::R(r) => {
                        let (b, c) = self.peel(r);
                        self.offset_reg(b, c + start)
                    }
                };
                self.f.cvt(ty, r)
            }
            TOp::Broadcast(a) => self.operand(*a, coord)?,
            TOp::Reshape(a) => {
                let shape = self.shape(v)?;
                let flat = self.flatten(coord, &shape);
                let sa = self.shape(*a)?;
                let c = self.unflatten(flat, &sa);
                self.elem(*a, &c)?
            }
            TOp::Permute(a, perm) => {
                let mut c = vec![C::K(0); perm.len()];
                for (i, p) in perm.iter().enumerate() {
                    c[*p] = coord[i];
                }
                self.elem(*a, &c)?
            }
            TOp::Unary(UnaryOp::Exp, a) if ty == Ty::F32 && self.f32_sub(*a).is_some() => {
                // e^(x - y) as 2^(x·log2 e - y·log2 e): one fused
                // multiply-add (softmax's `exp(s - max)`; y·log2 e is the
                // same for a whole row, and merges).
                let (x, y) = self.f32_sub(*a).expect("checked by the guard");
                // A uniform scale of x (attention's 1/√D) joins log2 e.
                let (x, l2e) = match self.scaled(x) {
                    Some((s, c)) => {
                        let c = self.operand(c, coord)?;
                        let cl = self.f.bin(
                            BinOp::Mul,
                            Ty::F32,
                            c,
                            Operand::Float(std::f64::consts::LOG2_E),
                        );
                        (s, Operand::Reg(cl))
                    }
                    None => (x, Operand::Float(std::f64::consts::LOG2_E)),
                };
                let x = self.operand(x, coord)?;
                let y = self.operand(y, coord)?;
                let nyl = self.f.bin(
                    BinOp::Mul,
                    Ty::F32,
                    y,
                    Operand::Float(-std::f64::consts::LOG2_E),
                );
                let t = self.f.fma(Ty::F32, x, l2e, nyl);
                // y·log2 e rounds by up to half an ulp of itself, which for
                // a large y (1e3 and beyond) is no longer small: its exact
                // remainder (one fma, per row like y·log2 e) is added back,
                // so that x = y gives exactly 2^0 whatever their size. The
                // attention kernels skip it (`fast_exp`).
                let t = if self.k.fast_exp {
                    t
                } else {
                    let yl = self.f.un(UnOp::Neg, Ty::F32, nyl);
                    let rest = self.f.fma(
                        Ty::F32,
                        y,
                        Operand::Float(-std::f64::consts::LOG2_E),
                        Operand::Reg(yl),
                    );
                    self.f.bin(BinOp::Add, Ty::F32, t, rest)
                };
                let r = self.f.un(UnOp::Ex2, Ty::F32, t);
                self.round(dtype, r)?
            }
            TOp::Unary(op, a) => {
                let x = self.operand(*a, coord)?;
                let r = self.unary(*op, x, ty)?;
                self.round(dtype, r)?
            }
            TOp::Binary(op @ (BinaryOp::Add | BinaryOp::Mul), a, b) if ty == Ty::S64 => {
                let x = self.operand(*a, coord)?;
                let y = self.operand(*b, coord)?;
                let (ka, kb) = (self.constant(*a), self.constant(*b));
                self.index_arith(*op, (x, ka), (y, kb))
            }
            TOp::Binary(op, a, b) => {
                let x = self.operand(*a, coord)?;
                let y = self.operand(*b, coord)?;
                let int_division = matches!(op, BinaryOp::Div | BinaryOp::Rem)
                    && !self.f.ty(y).is_float()
                    && self.f.ty(y) != Ty::Pred;
                let nonzero = self.facts.range(*b).is_some_and(|r| r.lo > 0 || r.hi < 0);
                if int_division && !nonzero {
                    // Integer division by zero is an error on every backend:
                    // the kernel traps (the CPU backend reports it).
                    let zero = self.f.setp(Cmp::Eq, self.f.ty(y), y, Operand::Int(0));
                    self.f.push(Inst::Trap {
                        guard: Guard {
                            pred: zero,
                            negated: false,
                        },
                    });
                }
                if let Some(r) = self.narrow_division(*op, (*a, x), (*b, y), ty) {
                    return Ok(r);
                }
                let (x, y) = self.narrow_comparison(*op, (*a, x), (*b, y));
                // x² is one exact product (the CPU's f64 `powf` rounds to
                // the same f32).
                let squares = *op == BinaryOp::Pow && self.constant(*b) == Some(2);
                let (op, y) = if squares && self.f.ty(x) == Ty::F32 {
                    (BinaryOp::Mul, x)
                } else {
                    (*op, y)
                };
                let r = self.binary(op, x, y, ty)?;
                self.round(dtype, r)?
            }
            TOp::Rand { seed, counter } => {
                let c = self.operand(*counter, coord)?;
                let c = self.f.cvt(Ty::S64, c);
                let key = match seed {
                    Seed::Const(k) => PhiloxKey::Const(*k),
                    Seed::Value(v) => {
                        let k = self.operand(*v, &[])?;
                        PhiloxKey::Reg(self.f.cvt(Ty::S64, k))
                    }
                };
                self.f.philox_f32(key, c)
            }
            TOp::Select(c, a, b) => {
                let p = self.operand(*c, coord)?;
                let x = self.operand(*a, coord)?;
                let y = self.operand(*b, coord)?;
                self.f.selp(ty, p, x, y)
            }
            TOp::Cast(a) => {
                let x = self.operand(*a, coord)?;
                let from_float = self.f.ty(x).is_float();
                let r = self.convert(x, ty)?;
                match dtype.int_range() {
                    // A float to a narrow integer saturates to its range
                    // (NaN is 0), as the CPU converts: `cvt` saturates to
                    // the 32 bits of the register only.
                    Some((lo, hi)) if from_float && ty == Ty::S32 && hi < i64::from(i32::MAX) => {
                        let r = self.f.bin(BinOp::Max, Ty::S32, r, Operand::Int(lo));
                        self.f.bin(BinOp::Min, Ty::S32, r, Operand::Int(hi))
                    }
                    _ => self.round(dtype, r)?,
                }
            }
            TOp::Load {
                param,
                index,
                mask,
                other,
            } => self.load_elem(*param, index, *mask, *other, coord, ty)?,
            op => return Err(format!("internal error: {op:?} is not lazy")),
        })
    }

    /// `x + y` or `x · y` of s64 indices, each with its value when it is
    /// a compile-time constant, keeping constant offsets outermost:
    /// `(b + c) + y` is `(b + y) + c` and `(b + c) · k` is `b·k + c·k`, so
    /// that the slots of a tile, whose indices differ by constants, share
    /// their arithmetic and leave the constant to the address's immediate
    /// offset (see [`Lower::peel`]).
    fn index_arith(
        &mut self,
        op: BinaryOp,
        (x, kx): (Reg, Option<i64>),
        (y, ky): (Reg, Option<i64>),
    ) -> Reg {
        let (bx, cx) = self.peel(x);
        let (by, cy) = self.peel(y);
        let (base, c) = match (op, kx, ky) {
            (BinaryOp::Add, _, _) if cx + cy != 0 => (
                self.f.bin(BinOp::Add, Ty::S64, bx, Operand::Reg(by)),
                cx + cy,
            ),
            (BinaryOp::Mul, _, Some(k)) if cx != 0 => {
                (self.f.bin(BinOp::Mul, Ty::S64, bx, Operand::Int(k)), cx * k)
            }
            (BinaryOp::Mul, Some(k), _) if cy != 0 => {
                (self.f.bin(BinOp::Mul, Ty::S64, by, Operand::Int(k)), cy * k)
            }
            (BinaryOp::Add, _, _) => return self.f.bin(BinOp::Add, Ty::S64, x, Operand::Reg(y)),
            _ => return self.f.bin(BinOp::Mul, Ty::S64, x, Operand::Reg(y)),
        };
        self.offset_reg(base, c)
    }

    /// Integer `a / b` or `a % b` (truncating, as every backend divides)
    /// in as few instructions as the facts allow: a power-of-two divisor
    /// is a shift and a mask (with a rounding adjustment when `a` may be
    /// negative), and operands within 32 bits divide in 32 bits (ptxas
    /// expands a 32-bit division inline, by a multiply-high for a constant
    /// divisor, but calls an ~80-instruction subroutine for 64 bits).
    /// `None` when nothing is proven: the caller divides in full width.
    fn narrow_division(
        &mut self,
        op: BinaryOp,
        (a, x): (Value, Reg),
        (b, y): (Value, Reg),
        ty: Ty,
    ) -> Option<Reg> {
        let wide = self.f.ty(x);
        let bits = 8 * wide.bytes() as i64;
        if !matches!(op, BinaryOp::Div | BinaryOp::Rem)
            || !matches!(wide, Ty::S64 | Ty::S32)
            || self.f.ty(y) != wide
            || ty != wide
        {
            return None;
        }
        let (ra, rb) = (self.facts.range(a)?, self.facts.range(b)?);
        if rb.lo < 1 {
            return None;
        }
        let div = op == BinaryOp::Div;
        if rb.lo == rb.hi && rb.lo & (rb.lo - 1) == 0 {
            let k = rb.lo.trailing_zeros() as i64;
            if ra.lo >= 0 && ra.hi <= i32::MAX as i64 && wide == Ty::S64 && k > 0 {
                // In 32 bits: ptxas then knows the high word is zero.
                let x32 = self.f.cvt(Ty::U32, x);
                let r = if div {
                    self.f.bin(BinOp::Shr, Ty::U32, x32, Operand::Int(k))
                } else {
                    self.f
                        .bin(BinOp::And, Ty::U32, x32, Operand::Int(rb.lo - 1))
                };
                return Some(self.f.cvt(Ty::S64, r));
            }
            if ra.lo >= 0 || k == 0 {
                return Some(if div {
                    self.f.bin(BinOp::Shr, wide, x, Operand::Int(k))
                } else {
                    self.f.bin(BinOp::And, wide, x, Operand::Int(rb.lo - 1))
                });
            }
            // Truncation rounds a negative quotient up: add 2^k - 1 to a
            // negative `a` before the arithmetic shift.
            let sign = self.f.bin(BinOp::Shr, wide, x, Operand::Int(bits - 1));
            let unsigned = if wide == Ty::S64 { Ty::U64 } else { Ty::U32 };
            let bias = self
                .f
                .bin(BinOp::Shr, unsigned, sign, Operand::Int(bits - k));
            let biased = self.f.bin(BinOp::Add, wide, x, bias);
            let q = self.f.bin(BinOp::Shr, wide, biased, Operand::Int(k));
            if div {
                return Some(q);
            }
            let m = self.f.bin(BinOp::Shl, wide, q, Operand::Int(k));
            return Some(self.f.bin(BinOp::Sub, wide, x, m));
        }
        let small = |lo: i64, hi: i64| lo > i32::MIN as i64 && hi <= i32::MAX as i64;
        if wide != Ty::S64 || !small(ra.lo, ra.hi) || !small(rb.lo, rb.hi) {
            return None;
        }
        let narrow = if ra.lo >= 0 { Ty::U32 } else { Ty::S32 };
        let x32 = self.f.cvt(narrow, x);
        let d: Operand = if rb.lo == rb.hi {
            Operand::Int(rb.lo)
        } else {
            Operand::Reg(self.f.cvt(narrow, y))
        };
        let q = self
            .f
            .bin(if div { BinOp::Div } else { BinOp::Rem }, narrow, x32, d);
        Some(self.f.cvt(Ty::S64, q))
    }

    /// `base + c` in a fresh register that [`Lower::peel`] takes apart.
    pub(super) fn offset_reg(&mut self, base: Reg, c: i64) -> Reg {
        if c == 0 {
            return base;
        }
        let r = self.f.bin(BinOp::Add, Ty::S64, base, Operand::Int(c));
        self.offsets.insert(r, (base, c));
        r
    }

    /// `r` as a register and a constant it was offset by (0 when unknown).
    pub(super) fn peel(&self, r: Reg) -> (Reg, i64) {
        self.offsets.get(&r).copied().unwrap_or((r, 0))
    }

    /// Rounds an f32 register to a narrow float dtype.
    pub(super) fn round(&mut self, d: Dtype, r: Reg) -> R<Reg> {
        Ok(match d {
            Dtype::Bf16 => self.f.round_half(true, r),
            Dtype::Fp16 => self.f.round_half(false, r),
            // Narrow integers live in 32-bit registers: each result wraps
            // to its dtype, as the CPU computes (`(x + x) / 2` in int8
            // divides the wrapped sum).
            Dtype::Int8 | Dtype::Int16 if self.f.ty(r) == Ty::S32 => {
                let k = if d == Dtype::Int8 { 24 } else { 16 };
                let up = self.f.bin(BinOp::Shl, Ty::S32, r, Operand::Int(k));
                self.f.bin(BinOp::Shr, Ty::S32, up, Operand::Int(k))
            }
            Dtype::Uint8 if self.f.ty(r) == Ty::S32 => {
                self.f.bin(BinOp::And, Ty::S32, r, Operand::Int(255))
            }
            d => match super::f8_fmt(d) {
                Some(fmt) => {
                    let b = self.f.f8_narrow(fmt, r);
                    self.f.f8_widen(fmt, b)
                }
                None => r,
            },
        })
    }

    /// A conversion between register types.
    pub(super) fn convert(&mut self, x: Reg, to: Ty) -> R<Reg> {
        let from = self.f.ty(x);
        Ok(match (from, to) {
            (a, b) if a == b => x,
            (Ty::Pred, t) => {
                let (one, zero) = if t.is_float() {
                    (Operand::Float(1.0), Operand::Float(0.0))
                } else {
                    (Operand::Int(1), Operand::Int(0))
                };
                self.f.selp(t, x, one, zero)
            }
            (t, Ty::Pred) => {
                let zero = if t.is_float() {
                    Operand::Float(0.0)
                } else {
                    Operand::Int(0)
                };
                self.f.setp(Cmp::Ne, t, x, zero)
            }
            (_, t) => self.f.cvt(t, x),
        })
    }

    /// Unary math in register type `ty`.
    fn unary(&mut self, op: UnaryOp, x: Reg, ty: Ty) -> R<Reg> {
        let xt = self.f.ty(x);
        let x = if ty.is_float() && xt != ty {
            self.convert(x, ty)?
        } else {
            x
        };
        let f32_only = |name: &str| {
            if ty == Ty::F32 {
                Ok(())
            } else {
                Err(format!(
                    "`{name}` on {} is not supported by the PTX backend yet",
                    ty.name()
                ))
            }
        };
        Ok(match op {
            UnaryOp::Neg => self.f.un(UnOp::Neg, ty, x),
            UnaryOp::Abs => self.f.un(UnOp::Abs, ty, x),
            UnaryOp::Not => {
                if ty == Ty::Pred {
                    self.f.pred_op(None, x, x)
                } else {
                    self.f.un(UnOp::Not, ty, x)
                }
            }
            UnaryOp::Sqrt => self.f.un(UnOp::Sqrt, ty, x),
            UnaryOp::Rsqrt => {
                let s = self.f.un(UnOp::Sqrt, ty, x);
                self.f.un(UnOp::Rcp, ty, s)
            }
            UnaryOp::Exp if ty == Ty::F64 => self.f.exp_f64(x),
            UnaryOp::Log if ty == Ty::F64 => self.f.log_f64(x),
            UnaryOp::Tanh if ty == Ty::F64 => self.f.tanh_f64(x),
            UnaryOp::Erf if ty == Ty::F64 => self.f.erf_f64(x),
            UnaryOp::Exp => {
                f32_only("exp")?;
                self.f.exp_f32(x)
            }
            UnaryOp::Log => {
                f32_only("log")?;
                self.f.log_f32(x)
            }
            UnaryOp::Tanh => {
                f32_only("tanh")?;
                self.f.tanh_f32(x)
            }
            UnaryOp::Erf => {
                f32_only("erf")?;
                self.f.erf_f32(x)
            }
            UnaryOp::Sin | UnaryOp::Cos if ty == Ty::F64 => {
                self.f.sin_cos_f64(x, op == UnaryOp::Cos)
            }
            UnaryOp::Sin | UnaryOp::Cos => {
                f32_only(op.name())?;
                self.f.sin_cos_f32(x, op == UnaryOp::Cos)
            }
            UnaryOp::Exp2 if ty == Ty::F64 => self.f.exp2_f64(x),
            UnaryOp::Exp2 => {
                f32_only("exp2")?;
                self.f.un(UnOp::Ex2, ty, x)
            }
            UnaryOp::Log2 if ty == Ty::F64 => {
                let l = self.f.log_f64(x);
                self.f
                    .bin(BinOp::Mul, ty, l, Operand::Float(std::f64::consts::LOG2_E))
            }
            UnaryOp::Log2 => {
                f32_only("log2")?;
                self.f.un(UnOp::Lg2, ty, x)
            }
            UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round | UnaryOp::Trunc => {
                let round = match op {
                    UnaryOp::Floor => Round::Floor,
                    UnaryOp::Ceil => Round::Ceil,
                    UnaryOp::Round => Round::NearestInt,
                    _ => Round::TowardZero,
                };
                let dst = self.f.reg(ty);
                self.f.push(Inst::Cvt {
                    to: ty,
                    from: ty,
                    round,
                    dst,
                    src: x,
                });
                dst
            }
        })
    }

    /// The operands of a comparison of 64-bit integers whose ranges fit in
    /// 32 bits, as 32-bit registers (a 64-bit comparison is two
    /// instructions, and the 64-bit arithmetic feeding it two per add:
    /// with only the low halves read, ptxas computes them in 32 bits).
    /// Other operands are returned as they are.
    fn narrow_comparison(
        &mut self,
        op: BinaryOp,
        (a, x): (Value, Reg),
        (b, y): (Value, Reg),
    ) -> (Reg, Reg) {
        let compares = matches!(
            op,
            BinaryOp::Eq | BinaryOp::Ne | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge
        );
        let fits = |v: Value| {
            self.facts
                .range(v)
                .is_some_and(|r| r.lo >= i64::from(i32::MIN) && r.hi <= i64::from(i32::MAX))
        };
        if !compares || self.f.ty(x) != Ty::S64 || self.f.ty(y) != Ty::S64 || !fits(a) || !fits(b) {
            return (x, y);
        }
        (self.f.cvt(Ty::S32, x), self.f.cvt(Ty::S32, y))
    }

    /// Binary math: operands in their register type, result in `ty`.
    fn binary(&mut self, op: BinaryOp, x: Reg, y: Reg, ty: Ty) -> R<Reg> {
        let ot = self.f.ty(x);
        let y = if self.f.ty(y) != ot {
            self.convert(y, ot)?
        } else {
            y
        };
        let cmp = |c: Cmp| Some(c);
        let c = match op {
            BinaryOp::Eq => cmp(Cmp::Eq),
            BinaryOp::Ne => cmp(Cmp::Ne),
            BinaryOp::Lt => cmp(Cmp::Lt),
            BinaryOp::Le => cmp(Cmp::Le),
            BinaryOp::Gt => cmp(Cmp::Gt),
            BinaryOp::Ge => cmp(Cmp::Ge),
            _ => None,
        };
        if let Some(c) = c {
            if ot == Ty::Pred {
                let xi = self.convert(x, Ty::S32)?;
                let yi = self.convert(y, Ty::S32)?;
                return Ok(self.f.setp(c, Ty::S32, xi, yi));
            }
            return Ok(self.f.setp(c, ot, x, y));
        }
        if ot == Ty::Pred {
            let p = match op {
                BinaryOp::And | BinaryOp::BitAnd => Some(BinOp::And),
                BinaryOp::Or | BinaryOp::BitOr => Some(BinOp::Or),
                BinaryOp::BitXor => Some(BinOp::Xor),
                _ => return Err(format!("`{}` on booleans", op.name())),
            };
            return Ok(self.f.pred_op(p, x, y));
        }
        let b = match op {
            BinaryOp::Add => BinOp::Add,
            BinaryOp::Sub => BinOp::Sub,
            BinaryOp::Mul => BinOp::Mul,
            BinaryOp::Div => BinOp::Div,
            BinaryOp::Rem if !ot.is_float() => BinOp::Rem,
            BinaryOp::Max => BinOp::Max,
            BinaryOp::Min => BinOp::Min,
            BinaryOp::And | BinaryOp::BitAnd => BinOp::And,
            BinaryOp::Or | BinaryOp::BitOr => BinOp::Or,
            BinaryOp::BitXor if !ot.is_float() => BinOp::Xor,
            BinaryOp::Shl | BinaryOp::Shr if !ot.is_float() => {
                let r = self.shift(op, ot, x, y);
                return if ty != ot { self.convert(r, ty) } else { Ok(r) };
            }
            BinaryOp::Pow if matches!(ot, Ty::F32 | Ty::F64) => return Ok(self.pow(ot, x, y)),
            BinaryOp::Rem if ot == Ty::F64 => return Ok(self.f.fmod_f64(x, y)),
            BinaryOp::Rem if ot == Ty::F32 => {
                // Exact in f64 too: the f32 remainder is representable.
                let (xd, yd) = (self.f.cvt(Ty::F64, x), self.f.cvt(Ty::F64, y));
                let r = self.f.fmod_f64(xd, yd);
                return Ok(self.f.cvt(Ty::F32, r));
            }
            _ => {
                return Err(format!(
                    "`{}` on {} is not supported by the PTX backend yet",
                    op.name(),
                    ot.name()
                ))
            }
        };
        let r = self.f.bin(b, ot, x, y);
        if ty != ot {
            return self.convert(r, ty);
        }
        Ok(r)
    }

    /// `x << y` or `x >> y` on integer registers of type `ty`: the count
    /// goes to a `u32` register, a 64-bit one clamped to 64 first (as an
    /// unsigned number, so that a negative count is past the width too),
    /// and PTX clamps a count past the width: 0, or the sign for `>>`.
    fn shift(&mut self, op: BinaryOp, ty: Ty, x: Reg, y: Reg) -> Reg {
        let count = if ty.bytes() == 8 {
            let wide = self.f.cvt(Ty::U64, y);
            let clamped = self.f.bin(BinOp::Min, Ty::U64, wide, Operand::Int(64));
            self.f.cvt(Ty::U32, clamped)
        } else {
            self.f.cvt(Ty::U32, y)
        };
        let b = if op == BinaryOp::Shl {
            BinOp::Shl
        } else {
            BinOp::Shr
        };
        self.f.bin(b, ty, x, count)
    }

    /// `x^y` in f32 or f64 (`ty`) as the CPU's `powf` defines it:
    /// `e^(y·ln|x|)`, negated for a negative `x` (-0 too) and an odd integer `y`,
    /// NaN for a negative finite `x` and a non-integer `y`, and 1 for `y = 0`
    /// (whatever `x`, NaN included), `x = 1` (whatever `y`) and `x = -1`
    /// with `y = ±∞`.
    fn pow(&mut self, ty: Ty, x: Reg, y: Reg) -> Reg {
        // Every float of magnitude `big` or more is an even integer; below
        // it, y is an integer when it survives a round trip through `int`.
        let (int, big) = if ty == Ty::F64 {
            (Ty::S64, 9_007_199_254_740_992.0)
        } else {
            (Ty::S32, 16_777_216.0)
        };
        let f = &mut self.f;
        let ax = f.un(UnOp::Abs, ty, x);
        // fp32 through fp64: ex2(y·lg2 x) in f32 is off by |y·lg2 x|
        // times lg2's error (57 ulp at pow(1.5, 100)).
        let r = if ty == Ty::F64 {
            f.pow_abs_f64(ax, y)
        } else {
            let (ax64, y64) = (f.cvt(Ty::F64, ax), f.cvt(Ty::F64, y));
            let r64 = f.pow_abs_f64(ax64, y64);
            f.cvt(Ty::F32, r64)
        };
        let ay = f.un(UnOp::Abs, ty, y);
        let small = f.setp(Cmp::Lt, ty, ay, Operand::Float(big));
        let yi = f.cvt(int, y);
        let back = f.cvt(ty, yi);
        let whole = f.setp(Cmp::Eq, ty, back, y);
        let large = f.pred_op(None, small, small);
        let is_int = f.pred_op(Some(BinOp::Or), whole, large);
        let low = f.bin(BinOp::And, int, yi, Operand::Int(1));
        let odd_bit = f.setp(Cmp::Ne, int, low, Operand::Int(0));
        let odd = f.pred_op(Some(BinOp::And), odd_bit, small);
        let odd = f.pred_op(Some(BinOp::And), odd, whole);
        // The sign bit flips (-0 included), a value below 0 makes NaN.
        let bits = f.reg(if ty == Ty::F64 { Ty::B64 } else { Ty::B32 });
        f.push(Inst::Mov {
            dst: bits,
            src: Operand::Reg(x),
        });
        let signed = f.setp(Cmp::Lt, int, bits, Operand::Int(0));
        let flip = f.pred_op(Some(BinOp::And), signed, odd);
        let neg = f.setp(Cmp::Lt, ty, x, Operand::Float(0.0));
        let nr = f.un(UnOp::Neg, ty, r);
        let r = f.selp(ty, flip, nr, r);
        let frac = f.pred_op(None, is_int, is_int);
        // -inf to a non-integer is |x|^y (+inf or +0), as C's `pow`.
        let finite = f.setp(Cmp::Ne, ty, x, Operand::Float(f64::NEG_INFINITY));
        let neg = f.pred_op(Some(BinOp::And), neg, finite);
        let nan = f.pred_op(Some(BinOp::And), neg, frac);
        let r = f.selp(ty, nan, Operand::Float(f64::NAN), r);
        // 1 for `y = 0`, `x = 1` (NaN y included) and `x = -1` with an
        // infinite `y`, as C's `pow`.
        let zero = f.setp(Cmp::Eq, ty, y, Operand::Float(0.0));
        let unit = f.setp(Cmp::Eq, ty, x, Operand::Float(1.0));
        let one = f.pred_op(Some(BinOp::Or), zero, unit);
        let ax1 = f.setp(Cmp::Eq, ty, ax, Operand::Float(1.0));
        let yinf = f.setp(Cmp::Eq, ty, ay, Operand::Float(f64::INFINITY));
        let flat = f.pred_op(Some(BinOp::And), ax1, yinf);
        let one = f.pred_op(Some(BinOp::Or), one, flat);
        f.selp(ty, one, Operand::Float(1.0), r)
    }

    /// The register type of the value `v` (for callers outside this file).
    pub(super) fn reg_ty_of(&self, v: Value) -> Ty {
        reg_ty(self.k.ty(v).dtype)
    }
}

/// `x` as an integer of `dtype`: truncated toward zero and saturated to
/// its range (NaN is 0), as the CPU backend converts.
pub(super) fn saturate(x: f64, dtype: Dtype) -> i64 {
    let (lo, hi) = dtype.int_range().unwrap_or((i64::MIN, i64::MAX));
    if x.is_nan() {
        0
    } else {
        (x.trunc().clamp(lo as f64, hi as f64) as i64).clamp(lo, hi)
    }
}

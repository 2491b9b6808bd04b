//! `dot` on tensor cores: `mma.sync.m16n8k16` with bf16 or fp16 operands
//! and f32 accumulators, the accumulator kept in the `Mma` layout across
//! loop trips (so epilogues and the FlashAttention rescaling work on the
//! fragments in place).

use super::smem::Stored;
use super::{Layout, Lower, Val, C, R};
use crate::ir::*;
use tessera_core::Dtype;
use tessera_tile::{Block, Combine, TOp, Value};

impl<'k> Lower<'k> {
    /// The operand formats of a `dot` of `a` and `b` into `v` on tensor
    /// cores, if it can run there: f32 accumulator; bf16, fp16 or (sm_89
    /// and newer) fp8 operands (or an s32 accumulator of int8/uint8 ones), an f32 operand next to one of them rounded
    /// to its format (as FlashAttention does with P); tf32 for tf32
    /// operands, or for f32 ones where the numerics policy allows (`tf32`).
    pub(super) fn mma_format(&self, v: Value, a: Value, b: Value, tf32: bool) -> Option<[Fmt; 2]> {
        if !self.k.tensor_cores {
            // The schedule's `tensor_cores(false)`.
            return None;
        }
        let (da, db) = (self.k.ty(a).dtype, self.k.ty(b).dtype);
        if self.k.ty(v).dtype == Dtype::Int32 {
            // 8-bit integers multiply exactly into s32 (`m16n8k32`).
            let int = |d: Dtype| match d {
                Dtype::Int8 => Some(Fmt::S8),
                Dtype::Uint8 => Some(Fmt::U8),
                _ => None,
            };
            return Some([int(da)?, int(db)?]);
        }
        if self.k.ty(v).dtype != Dtype::Fp32 {
            return None;
        }
        let fmt = |d: Dtype| match d {
            Dtype::Bf16 => Some(Fmt::Bf16),
            Dtype::Fp16 => Some(Fmt::F16),
            Dtype::Tf32 => Some(Fmt::Tf32),
            // (Kernels with fp8 values are refused below sm_89.)
            d => super::f8_fmt(d),
        };
        match (fmt(da), fmt(db)) {
            (Some(x), Some(y)) if x == y || (x.is_fp8() && y.is_fp8()) => Some([x, y]),
            (Some(x), None) if db == Dtype::Fp32 && (x != Fmt::Tf32 || tf32) => Some([x, x]),
            (None, Some(y)) if da == Dtype::Fp32 && (y != Fmt::Tf32 || tf32) => Some([y, y]),
            (None, None) if tf32 && da == Dtype::Fp32 && db == Dtype::Fp32 => {
                Some([Fmt::Tf32, Fmt::Tf32])
            }
            _ => None,
        }
    }

    /// The warp grid of a tensor-core `dot` producing `v` from `a` and `b`,
    /// if it can run on tensor cores: tile extents multiples of the
    /// instruction's 16×8×K, split over the block's warps so as to load
    /// the fewest fragments per step.
    pub(super) fn mma_layout(&self, v: Value, a: Value, b: Value, tf32: bool) -> Option<Layout> {
        let fmt = self.mma_format(v, a, b, tf32)?;
        let shape = self.shapes[v.index()].as_ref()?;
        let sa = self.shapes[a.index()].as_ref()?;
        if shape.len() != 2 || sa.len() != 2 || sa[1] % fmt[0].mma_k() != 0 {
            return None;
        }
        let (m, n) = (shape[0], shape[1]);
        let warps = self.threads / 32;
        // Warpgroup products (sm_90a) have each warp own 16 whole rows.
        if self.wgmma_shape(v, fmt, m, n, sa[1]) {
            return Some(Layout::Mma { wm: warps, wn: 1 });
        }
        // In a chain of dots (attention: S = Q·Kᵀ, then P(S)·V) each warp
        // owns whole rows, so that P's accumulators are the next dot's A
        // fragments and never go through shared memory. Only with 16 rows
        // per warp: more would keep too many accumulators live (ptxas
        // spills with 32 rows and 64 columns).
        if m == 16 * warps && self.in_dot_chain(v, a) {
            return Some(Layout::Mma { wm: warps, wn: 1 });
        }
        let mut best: Option<(i64, Layout)> = None;
        let mut wm = 1;
        while wm <= warps {
            let wn = warps / wm;
            if warps % wm == 0 && m % (16 * wm) == 0 && n % (8 * wn) == 0 {
                // A fragments (4 registers per 16 rows) and B fragments
                // (2 per 8 columns) loaded per k-step by one warp.
                let cost = (m / wm / 16) * 4 + (n / wn / 8) * 2;
                if best.is_none_or(|(c, _)| cost < c) {
                    best = Some((cost, Layout::Mma { wm, wn }));
                }
            }
            wm *= 2;
        }
        best.map(|(_, l)| l)
    }

    /// Whether the dot computing `v` from `a` is part of a chain: `v` feeds
    /// (through elementwise math) the A operand of another dot, or `a` is
    /// computed (so) from another dot's result.
    /// Whether some product of the kernel runs on tensor cores (then its
    /// staged tiles are swizzled: see `smem.rs`).
    pub(super) fn uses_mma(&self) -> bool {
        self.k.body.all().iter().any(|i| match &i.op {
            TOp::Dot { a, b, tf32, .. } => i
                .results
                .first()
                .is_some_and(|v| self.mma_layout(*v, *a, *b, *tf32).is_some()),
            _ => false,
        })
    }

    /// The fp32 operand of `v` when `v` is its cast to bf16 or fp16.
    fn rounded_fp32(&self, v: Value) -> Option<Value> {
        let inst = self.defs.get(&v)?;
        let TOp::Cast(x) = inst.op else {
            return None;
        };
        let narrow = matches!(self.k.ty(v).dtype, Dtype::Bf16 | Dtype::Fp16);
        (narrow && self.k.ty(x).dtype == Dtype::Fp32).then_some(x)
    }

    pub(super) fn in_dot_chain(&self, v: Value, a: Value) -> bool {
        let mut dots = Vec::new();
        collect_dots(&self.k.body, &mut dots);
        dots.iter().any(|(r, da)| {
            (*r != v && derived(&self.k.body, v).contains(da))
                || (*r != v && derived(&self.k.body, *r).contains(&a))
        })
    }

    /// The layout a loop body will yield `y` in: that of the `dot` it comes
    /// from (directly or through same-shaped elementwise math), else flat.
    pub(super) fn predict_layout(&self, body: &Block, y: Value) -> Layout {
        let Some(inst) = body.insts.iter().find(|i| i.results.contains(&y)) else {
            return Layout::Flat;
        };
        match &inst.op {
            TOp::Dot { a, b, tf32, .. } => {
                self.mma_layout(y, *a, *b, *tf32).unwrap_or(Layout::Flat)
            }
            TOp::Unary(_, x) | TOp::Cast(x) => self.same_shape_layout(body, y, &[*x]),
            TOp::Binary(_, x, z) => self.same_shape_layout(body, y, &[*x, *z]),
            TOp::Select(c, x, z) => self.same_shape_layout(body, y, &[*c, *x, *z]),
            // Row reductions of such tiles stay in registers (`reduce_rows`).
            TOp::Reduce {
                value,
                axis: 1,
                combine,
                policy,
            } if *policy != tessera_core::Policy::KahanSum || *combine != Combine::Sum => {
                match self.predict_layout(body, *value) {
                    Layout::Mma { wm, wn: 1 } => Layout::Rows { wm },
                    _ => Layout::Flat,
                }
            }
            // `[M]` to `[M, 1]` and back keeps the rows.
            TOp::Reshape(x) => match self.predict_layout(body, *x) {
                l @ Layout::Rows { .. }
                    if self.shapes[x.index()].as_ref().and_then(|s| s.first())
                        == self.shapes[y.index()].as_ref().and_then(|s| s.first()) =>
                {
                    l
                }
                _ => Layout::Flat,
            },
            _ => Layout::Flat,
        }
    }

    fn same_shape_layout(&self, body: &Block, y: Value, ops: &[Value]) -> Layout {
        for o in ops {
            if self.shapes[o.index()] == self.shapes[y.index()] {
                let l = self.predict_layout(body, *o);
                if l != Layout::Flat {
                    return l;
                }
            }
        }
        Layout::Flat
    }

    /// Makes `v` a shared-memory value (staged tiles already are).
    fn in_shared(&mut self, v: Value) -> R<u64> {
        match self.val(v)? {
            Val::Shared(off) => Ok(off),
            _ => {
                let off = self.to_shared(v, None)?;
                self.vals[v.index()] = Some(Val::Shared(off));
                Ok(off)
            }
        }
    }

    /// One fragment register of an operand: the elements at `coords`
    /// (lowest bits first) rounded to `fmt` and packed, or where the
    /// operand is held in shared memory in that format with the elements
    /// contiguous, one 32-bit load.
    fn frag(&mut self, v: Value, fmt: Fmt, coords: &[[C; 2]]) -> R<Reg> {
        if let Some(r) = self.native_frag(v, fmt, coords)? {
            return Ok(r);
        }
        if fmt.is_int() {
            // Four integers' low bytes, the first lowest.
            let mut bytes = Vec::with_capacity(coords.len());
            for c in coords {
                let x = self.elem(v, c)?;
                let x = self.convert(x, Ty::U32)?;
                bytes.push(self.f.bin(BinOp::And, Ty::B32, x, Operand::Int(0xFF)));
            }
            return self
                .join_bytes(&bytes)
                .ok_or_else(|| "internal error: an empty fragment".into());
        }
        let xs = coords
            .iter()
            .map(|c| {
                let x = self.elem(v, c)?;
                self.convert(x, Ty::F32)
            })
            .collect::<R<Vec<_>>>()?;
        let dst = match (fmt, &xs[..]) {
            (Fmt::Tf32, [x]) => self.tf32(*x),
            (Fmt::Bf16 | Fmt::F16, [lo, hi]) => {
                let dst = self.f.reg(Ty::B32);
                self.f.push(Inst::CvtPack {
                    fmt,
                    dst,
                    hi: *hi,
                    lo: *lo,
                });
                dst
            }
            (Fmt::E4m3 | Fmt::E5m2, [x0, x1, x2, x3]) => {
                let lo = self.f.f8x2(fmt, *x1, *x0);
                let hi = self.f.f8x2(fmt, *x3, *x2);
                let dst = self.f.reg(Ty::B32);
                self.f.push(Inst::Join { dst, lo, hi });
                dst
            }
            _ => return Err("internal error: a fragment of the wrong size".into()),
        };
        Ok(dst)
    }

    /// One 32-bit register of byte values (each zero above its low 8
    /// bits), the first lowest; `None` for none.
    fn join_bytes(&mut self, bytes: &[Reg]) -> Option<Reg> {
        let (first, rest) = bytes.split_first()?;
        let mut word = *first;
        for (j, byte) in rest.iter().enumerate() {
            let shift = Operand::Int(8 * (j as i64 + 1));
            let up = self.f.bin(BinOp::Shl, Ty::B32, *byte, shift);
            word = self.f.bin(BinOp::Or, Ty::B32, word, up);
        }
        Some(word)
    }

    /// An f32 rounded to tf32, as tf32 bits: ties to even on sm_90, away
    /// from zero on sm_80 (which has only `cvt.rna`).
    pub(super) fn tf32(&mut self, x: Reg) -> Reg {
        let dst = self.f.reg(Ty::B32);
        self.f.push(Inst::CvtTf32 {
            rna: !self.arch.has_cvt_rn_tf32,
            dst,
            src: x,
        });
        dst
    }

    /// The fragment register at `coords` as one 32-bit shared load, where
    /// `v` is held in shared memory in `fmt` (bf16, fp16 or fp8) and the
    /// elements are adjacent there: along a row of a row-major tile, or
    /// down a column of one held column by column. The first coordinate
    /// along the contiguous axis is a multiple of the elements per register
    /// and so are the rows, so the load is 4-byte aligned.
    fn native_frag(&mut self, v: Value, fmt: Fmt, coords: &[[C; 2]]) -> R<Option<Reg>> {
        let native = match fmt {
            Fmt::Bf16 => Dtype::Bf16,
            Fmt::F16 => Dtype::Fp16,
            Fmt::E4m3 => Dtype::Fp8E4m3,
            Fmt::E5m2 => Dtype::Fp8E5m2,
            Fmt::S8 => Dtype::Int8,
            Fmt::U8 => Dtype::Uint8,
            Fmt::Tf32 => return Ok(None),
        };
        let Val::Shared(off) = self.val(v)? else {
            return Ok(None);
        };
        if self.k.ty(v).dtype != native {
            return Ok(None);
        }
        let st = self.stored(v);
        let by_columns = st.is_some_and(|s| s.by_columns);
        // Along which coordinate the register's elements run.
        let axis = match (coords.first(), coords.get(1)) {
            (Some([r0, _]), Some([r1, _])) if r0 == r1 => 1,
            (Some([_, c0]), Some([_, c1])) if c0 == c1 => 0,
            _ => return Ok(None),
        };
        let contiguous = (axis == 0) == by_columns;
        if !contiguous && fmt.per_reg() != 4 {
            return Ok(None);
        }
        let width = super::elem::shared_width(native);
        let shape = self.shape(v)?;
        // The address of tile coordinate `c`.
        let addr_of = |l: &mut Self, c: [C; 2]| match st {
            Some(st) => {
                let (r, e) = st.place(c);
                l.stored_addr(off, st, r, e)
            }
            None => {
                let flat = l.flatten(&c, &shape);
                l.shared_addr(off, flat, width)
            }
        };
        if !contiguous {
            // 8-bit elements a stored row apart: four byte loads joined in
            // place (instead of widening each and packing again). Without
            // a swizzle the rows are a constant step apart.
            let first = addr_of(self, coords[0]);
            let pitch = st.map_or(shape[1], |s| s.pitch);
            let swizzled = st.is_some_and(|s| s.swizzle.is_some());
            let mut bytes = Vec::with_capacity(coords.len());
            for (j, c) in coords.iter().enumerate() {
                let step = j as i64 * pitch;
                let addr = match first {
                    _ if swizzled && j > 0 => addr_of(self, *c),
                    Addr::Reg(r, o) => Addr::Reg(r, o + step),
                    Addr::Shared(o) => Addr::Shared(o + step),
                };
                let byte = self.f.reg(Ty::U32);
                self.f.push(Inst::Ld {
                    space: Space::Shared,
                    ty: Ty::U8,
                    dst: byte,
                    addr,
                    guard: None,
                });
                bytes.push(byte);
            }
            return Ok(self.join_bytes(&bytes));
        }
        let addr = addr_of(self, coords[0]);
        let dst = self.f.reg(Ty::B32);
        self.f.push(Inst::Ld {
            space: Space::Shared,
            ty: Ty::B32,
            dst,
            addr,
            guard: None,
        });
        Ok(Some(dst))
    }

    /// `dot` of `a` `[M, K]` and `b` `[K, N]` into `acc` on tensor cores,
    /// the result distributed in `layout`.
    pub(super) fn mma_dot(
        &mut self,
        v: Value,
        (a, b, acc): (Value, Value, Value),
        layout: Layout,
        tf32: bool,
    ) -> R<()> {
        let Layout::Mma { wm, wn } = layout else {
            return Err("internal error: a tensor-core dot needs an mma layout".into());
        };
        let fmt = self
            .mma_format(v, a, b, tf32)
            .ok_or("internal error: no mma format")?;
        let (e, kstep) = (fmt[0].per_reg(), fmt[0].mma_k());
        let sixteen = e == 2;
        let shape = self.shape(v)?;
        let (m, n, k) = (shape[0], shape[1], self.shape(a)?[1]);
        let (mt, nt) = (m / wm / 16, n / wn / 8);
        // An A operand held as accumulators of an earlier mma with the same
        // rows per warp (attention's probabilities) already has its
        // fragments in registers: accumulator pairs pack into A pairs
        // (16-bit formats, whose A pairs are accumulator pairs).
        // Packing the fragments rounds to the 16-bit format: a cast of
        // fp32 values to it is read through, not rounded twice.
        let a_regs = if sixteen {
            self.register_a(v, a, layout)?
        } else {
            None
        };
        if a_regs.is_none() {
            self.in_shared(a)?;
        }
        self.in_shared(b)?;
        let accs = self.fresh_accumulators(acc, layout, fmt[0].acc())?;
        let (rb, cb) = self.frag_base(layout, m, n);
        let (g, t2) = self.lane_regs();
        // This lane's first k in a fragment register: e·(l % 4).
        let et = match e {
            1 => self.f.bin(BinOp::Shr, Ty::S64, t2, Operand::Int(1)),
            2 => t2,
            _ => self.f.bin(BinOp::Shl, Ty::S64, t2, Operand::Int(1)),
        };
        // The warp's first row and column (loop-invariant: the prologue's),
        // and B's column for lane l: (wj·N/wn + 8j) + l/4.
        let (row0, col0) = match self.frag_firsts.get(&(layout, m, n)) {
            Some(firsts) => *firsts,
            None => {
                let firsts = self.in_prologue(|l| {
                    let r = l.f.bin(BinOp::Sub, Ty::S64, rb, g);
                    (r, l.f.bin(BinOp::Sub, Ty::S64, cb, t2))
                });
                self.frag_firsts.insert((layout, m, n), firsts);
                firsts
            }
        };
        let bcol = self.f.bin(BinOp::Add, Ty::S64, col0, g);
        // Operands held in shared memory in their 16-bit format, with rows
        // of whole 16-byte chunks, load their fragments with ldmatrix.
        // A held in shared memory since before the loop: its fragments are
        // loaded once, ahead of the loop.
        let hoisted = if sixteen && a_regs.is_none() {
            self.hoisted_a(a, (fmt[0], row0, layout), (mt, k, kstep))?
        } else {
            None
        };
        let (mut lda, mut ldb) = if sixteen {
            let bf16 = fmt[0] == Fmt::Bf16;
            (
                match hoisted {
                    Some(_) => None,
                    None => self.ldmatrix_base(a, bf16, row0, false)?,
                },
                self.ldmatrix_base(b, bf16, col0, true)?,
            )
        } else {
            (None, None)
        };
        self.f.push(Inst::Comment(format!(
            "{v} = dot on tensor cores, {wm}x{wn} warps, {}",
            fmt[0].name()
        )));
        for k0 in (0..k).step_by(kstep as usize) {
            self.memo.clear();
            // The k of element x of a register whose first k is k0 + d.
            let ks = |l: &mut Self, d: i64| -> Vec<C> {
                (0..e)
                    .map(|x| l.c_mad(C::R(et), 1, C::K(k0 + d + x)))
                    .collect()
            };
            let mut bfrag = Vec::new();
            if let Some(fr) = &mut ldb {
                // x4: fragments of column blocks j and j + 1.
                let mut j = 0;
                while j < nt {
                    let x = if j + 1 < nt { 4 } else { 2 };
                    let dst: Vec<Reg> = (0..x).map(|_| self.f.reg(Ty::B32)).collect();
                    let addr = self.frag_addr(fr, k0, 8 * j);
                    self.f.push(Inst::Ldmatrix {
                        trans: fr.trans,
                        dst: dst.clone(),
                        addr,
                    });
                    for pair in dst.chunks(2) {
                        bfrag.push([pair[0], pair[1]]);
                    }
                    j += x as i64 / 2;
                }
            }
            for j in bfrag.len() as i64..nt {
                let col = self.c_mad(C::R(bcol), 1, C::K(8 * j));
                let lo: Vec<[C; 2]> = ks(self, 0).into_iter().map(|kk| [kk, col]).collect();
                let hi: Vec<[C; 2]> = ks(self, kstep / 2)
                    .into_iter()
                    .map(|kk| [kk, col])
                    .collect();
                let b0 = self.frag(b, fmt[1], &lo)?;
                let b1 = self.frag(b, fmt[1], &hi)?;
                bfrag.push([b0, b1]);
            }
            for i in 0..mt {
                let afrag = if let Some(regs) = &a_regs {
                    self.pack_a(regs, fmt[0], i * (k / 8), k0)
                } else if let Some(pre) = &hoisted {
                    pre[((k0 / kstep) * mt + i) as usize]
                } else if let Some(fr) = &mut lda {
                    let dst: Vec<Reg> = (0..4).map(|_| self.f.reg(Ty::B32)).collect();
                    let addr = self.frag_addr(fr, k0, 16 * i);
                    self.f.push(Inst::Ldmatrix {
                        trans: fr.trans,
                        dst: dst.clone(),
                        addr,
                    });
                    [dst[0], dst[1], dst[2], dst[3]]
                } else {
                    let r0 = self.c_mad(C::R(rb), 1, C::K(16 * i));
                    let r8 = self.c_mad(C::R(rb), 1, C::K(16 * i + 8));
                    let (lo, hi) = (ks(self, 0), ks(self, kstep / 2));
                    let at =
                        |r: C, ks: &[C]| -> Vec<[C; 2]> { ks.iter().map(|kk| [r, *kk]).collect() };
                    [
                        self.frag(a, fmt[0], &at(r0, &lo))?,
                        self.frag(a, fmt[0], &at(r8, &lo))?,
                        self.frag(a, fmt[0], &at(r0, &hi))?,
                        self.frag(a, fmt[0], &at(r8, &hi))?,
                    ]
                };
                for (j, bf) in bfrag.iter().enumerate() {
                    let base = (i as usize * nt as usize + j) * 4;
                    let c = [accs[base], accs[base + 1], accs[base + 2], accs[base + 3]];
                    self.f.push(Inst::Mma {
                        fmt,
                        d: c,
                        a: afrag,
                        b: *bf,
                        c,
                    });
                }
            }
        }
        self.finish_dot(v, accs, layout)
    }

    /// The `ldmatrix` fragments of A operand `a` (in `fmt`, the warp's
    /// first row `row0`, in `layout`), `[k step][row block]` flattened,
    /// loaded in the innermost loop's preheader when `a` was held in shared
    /// memory before that loop began (see [`super::LoopScope`]); `None` when it
    /// was not, or is not read with `ldmatrix`. Not in warp-specialised
    /// kernels, whose producer warps give their registers up.
    fn hoisted_a(
        &mut self,
        a: Value,
        (fmt, row0, layout): (Fmt, Reg, Layout),
        (mt, k, kstep): (i64, i64, i64),
    ) -> R<Option<Vec<[Reg; 4]>>> {
        let Some(scope) = self.loops.last() else {
            return Ok(None);
        };
        if !scope.invariant.contains(&a) || self.ws.is_some() || self.persist.is_some() {
            return Ok(None);
        }
        // Held fragments take `4 (k / kstep) mt` registers for the whole
        // loop: not where an occupancy bound caps the registers (two
        // programs of 8 warps get 128 each, which attention's loop already
        // fills).
        let min_blocks = self.k.blocks_per_sm.map_or(1, |(least, _)| least.max(1));
        if max_regs(self.threads as u32, min_blocks) < HOIST_REGS_FLOOR {
            return Ok(None);
        }
        if let Some(frags) = scope.frags.get(&(a, layout)) {
            return Ok(Some(frags.clone()));
        }
        let frags = self.in_preheader(|l| -> R<Option<Vec<[Reg; 4]>>> {
            let Some(mut fr) = l.ldmatrix_base(a, fmt == Fmt::Bf16, row0, false)? else {
                return Ok(None);
            };
            let mut frags = Vec::new();
            for k0 in (0..k).step_by(kstep as usize) {
                for i in 0..mt {
                    let dst: Vec<Reg> = (0..4).map(|_| l.f.reg(Ty::B32)).collect();
                    let addr = l.frag_addr(&mut fr, k0, 16 * i);
                    l.f.push(Inst::Ldmatrix {
                        trans: fr.trans,
                        dst: dst.clone(),
                        addr,
                    });
                    frags.push([dst[0], dst[1], dst[2], dst[3]]);
                }
            }
            Ok(Some(frags))
        })?;
        if let (Some(frags), Some(scope)) = (&frags, self.loops.last_mut()) {
            scope.frags.insert((a, layout), frags.clone());
        }
        Ok(frags)
    }

    /// Fresh registers holding the accumulator `acc` in `layout` as `ty`
    /// (f32, or s32 for integer products), which a tensor-core dot updates
    /// in place.
    pub(super) fn fresh_accumulators(&mut self, acc: Value, layout: Layout, ty: Ty) -> R<Vec<Reg>> {
        self.slot_values(acc, layout)?
            .into_iter()
            .map(|r| {
                let r = self.convert(r, ty)?;
                Ok(self.f.mov(ty, Operand::Reg(r)))
            })
            .collect()
    }

    /// The result of a tensor-core dot: its fp32 accumulators `accs` in
    /// `layout`. An accumulator narrower than fp32 (`numerics aggressive`:
    /// bf16) is rounded after each dot (each k-tile of the main loop), as
    /// every backend does; the instructions sum the tile in fp32.
    pub(super) fn finish_dot(&mut self, v: Value, accs: Vec<Reg>, layout: Layout) -> R<()> {
        self.memo.clear();
        let dtype = self.k.ty(v).dtype;
        let accs = accs
            .into_iter()
            .map(|r| self.round(dtype, r))
            .collect::<R<Vec<_>>>()?;
        self.vals[v.index()] = Some(Val::Dist(accs, layout));
        Ok(())
    }

    /// A of the dot computing `v` when it is held in registers in the
    /// accumulator layout `layout` (one warp per 16 rows) of an earlier
    /// product with the same rows per warp (attention's probabilities):
    /// those registers, or elementwise math on them (P = exp(S - m), cast
    /// to bf16) computed straight into that layout, in f32. `None` (and
    /// nothing emitted) otherwise. Packing the fragments then rounds to
    /// the 16-bit format: a cast of f32 values to it is read through, not
    /// rounded twice.
    pub(super) fn register_a(&mut self, v: Value, a: Value, layout: Layout) -> R<Option<Vec<Reg>>> {
        let Layout::Mma { wm, wn: 1 } = layout else {
            return Ok(None);
        };
        let a_src = self.rounded_fp32(a).unwrap_or(a);
        match self.val(a_src)? {
            Val::Dist(regs, Layout::Mma { wm: wa, wn: 1 }) if wa == wm => Ok(Some(regs)),
            Val::Lazy if self.in_dot_chain(v, a) => {
                let regs = self.slot_values(a_src, layout)?;
                // Round to the operand format once, as a staged copy would.
                let regs = regs
                    .into_iter()
                    .map(|r| self.convert(r, Ty::F32))
                    .collect::<R<Vec<_>>>()?;
                Ok(Some(regs))
            }
            _ => Ok(None),
        }
    }

    /// Whether [`Lower::register_a`] would find A in registers (emits
    /// nothing).
    pub(super) fn has_register_a(&self, v: Value, a: Value, layout: Layout) -> R<bool> {
        let Layout::Mma { wm, wn: 1 } = layout else {
            return Ok(false);
        };
        let a_src = self.rounded_fp32(a).unwrap_or(a);
        Ok(match self.vals[a_src.index()].as_ref() {
            Some(Val::Dist(_, Layout::Mma { wm: wa, wn: 1 })) => *wa == wm,
            Some(Val::Lazy) => self.in_dot_chain(v, a),
            _ => false,
        })
    }

    /// The four A fragment registers of one 16×16 block (16-bit formats)
    /// packed from accumulator-layout registers `regs`: the block's first
    /// slot group is `base` (16-row block `i` of a product over `k`:
    /// `i·k/8`), its k-step starts at `k0`. Accumulator slot `(base + j)·4
    /// + r` holds row `l/4 + 8·(r/2)`, column `8j + 2(l%4) + r%2` of the
    /// block, which is the A fragment's order pairwise.
    pub(super) fn pack_a(&mut self, regs: &[Reg], fmt: Fmt, base: i64, k0: i64) -> [Reg; 4] {
        let slot = |j: i64, r: i64| regs[((base + j) * 4 + r) as usize];
        let j0 = k0 / 8;
        let mut frag = [Reg(0); 4];
        for (q, (j, r)) in [(j0, 0), (j0, 2), (j0 + 1, 0), (j0 + 1, 2)]
            .into_iter()
            .enumerate()
        {
            let dst = self.f.reg(Ty::B32);
            self.f.push(Inst::CvtPack {
                fmt,
                dst,
                hi: slot(j, r + 1),
                lo: slot(j, r),
            });
            frag[q] = dst;
        }
        frag
    }

    /// How `ldmatrix` reads the fragments of operand `v` (`[R, C]`, held
    /// in shared memory in the 16-bit mma format with rows of whole 16-byte
    /// chunks), or `None` when it is not held that way. For A (`b ==
    /// false`) `first` is the warp's first row; for B, its first column.
    /// Lane `l` addresses row `l % 8` of matrix `l / 8`: the matrices of a
    /// 16×16 block of A are (rows, columns) `(0, 0), (8, 0), (0, 8), (8,
    /// 8)`, those of B `(k 0, n 0), (k 8, n 0), (k 0, n 8), (k 8, n 8)`.
    /// B stored row by row is read transposed; B stored column by column
    /// (a staged Kᵀ) is read as it is.
    fn ldmatrix_base(&mut self, v: Value, bf16: bool, first: Reg, b: bool) -> R<Option<Frags>> {
        let native = if bf16 { Dtype::Bf16 } else { Dtype::Fp16 };
        let Val::Shared(off) = self.val(v)? else {
            return Ok(None);
        };
        let shape = self.shape(v)?;
        if self.k.ty(v).dtype != native || shape.len() != 2 {
            return Ok(None);
        }
        // A tile copied to shared memory from registers is plain row-major.
        let st = self.stored(v).unwrap_or(Stored {
            by_columns: false,
            pitch: shape[1],
            width: 2,
            swizzle: None,
            ring: None,
            panel: None,
        });
        if (st.by_columns && !b) || st.pitch % 8 != 0 || st.panel.is_some() {
            return Ok(None);
        }
        // This lane's addressing depends on the warp and lane alone:
        // computed once, in the prologue; only the buffer's base (a ring's
        // moves) is added where the fragments are loaded.
        let key = (first, b, st.by_columns, st.row_bytes(), st.swizzle);
        let (row_off, col, xor) = match self.ldm_lanes.get(&key) {
            Some(lanes) => *lanes,
            None => {
                let lanes = self.in_prologue(|l| l.ldmatrix_lanes(st, first, b));
                self.ldm_lanes.insert(key, lanes);
                lanes
            }
        };
        let smem = self.shared_base(st);
        Ok(Some(Frags {
            row: self.f.bin(BinOp::Add, Ty::U32, row_off, smem),
            col,
            xor,
            off: off as i64,
            k_rows: b != st.by_columns,
            row_bytes: st.row_bytes(),
            trans: b && !st.by_columns,
            bases: Vec::new(),
        }))
    }

    /// This lane's `ldmatrix` addressing in a tile stored as `st` (see
    /// [`Lower::ldmatrix_base`]): its stored row's byte offset, its byte
    /// in the row before the swizzle, and the row's swizzle.
    fn ldmatrix_lanes(&mut self, st: Stored, first: Reg, b: bool) -> (Reg, Reg, Option<Reg>) {
        let lane = self.f.bin(BinOp::And, Ty::S64, self.tid, Operand::Int(31));
        let r = self.f.bin(BinOp::And, Ty::S64, lane, Operand::Int(7));
        let q = self.f.bin(BinOp::Shr, Ty::S64, lane, Operand::Int(3));
        let q1 = self.f.bin(BinOp::And, Ty::S64, q, Operand::Int(1));
        let q2 = self.f.bin(BinOp::Shr, Ty::S64, q, Operand::Int(1));
        // (stored row, element in it) this lane addresses in a block.
        let (row, col) = match (b, st.by_columns) {
            (false, _) => {
                let row = self.f.fma(Ty::S64, q1, Operand::Int(8), r);
                let row = self.f.bin(BinOp::Add, Ty::S64, row, first);
                (row, self.f.bin(BinOp::Mul, Ty::S64, q2, Operand::Int(8)))
            }
            (true, false) => {
                let row = self.f.fma(Ty::S64, q1, Operand::Int(8), r);
                (row, self.f.fma(Ty::S64, q2, Operand::Int(8), first))
            }
            (true, true) => {
                let row = self.f.fma(Ty::S64, q2, Operand::Int(8), r);
                let row = self.f.bin(BinOp::Add, Ty::S64, row, first);
                (row, self.f.bin(BinOp::Mul, Ty::S64, q1, Operand::Int(8)))
            }
        };
        let xor = match self.row_xor(st, C::R(row)) {
            Operand::Reg(x) => Some(x),
            _ => None,
        };
        let row32 = self.f.cvt(Ty::U32, row);
        let col32 = self.f.cvt(Ty::U32, col);
        (
            self.f
                .bin(BinOp::Mul, Ty::U32, row32, Operand::Int(st.row_bytes())),
            self.f.bin(BinOp::Shl, Ty::U32, col32, Operand::Int(1)),
            xor,
        )
    }

    /// The address of `ldmatrix`'s block at `k0` and other index `x` (rows
    /// of A, columns of B): the stored-row step is a constant offset (a
    /// multiple of 8 rows, which keeps the swizzle); the step along a row
    /// is too without a swizzle, and otherwise one register per step.
    fn frag_addr(&mut self, fr: &mut Frags, k0: i64, x: i64) -> Addr {
        let (drow, dcol) = if fr.k_rows { (k0, x) } else { (x, k0) };
        debug_assert_eq!(drow % 8, 0, "ldmatrix rows keep the swizzle");
        let at = fr.off + drow * fr.row_bytes;
        let key = if fr.xor.is_some() { dcol } else { 0 };
        if let Some((_, r)) = fr.bases.iter().find(|(k, _)| *k == key) {
            let r = *r;
            return Addr::Reg(r, at + 2 * (dcol - key));
        }
        let byte = match fr.xor {
            // Depends on the lane alone: computed once, in the prologue.
            Some(x) => match self.ldm_bytes.get(&(fr.col, x, dcol)) {
                Some(b) => *b,
                None => {
                    let col = fr.col;
                    let b = self.in_prologue(|l| {
                        let c = l.f.bin(BinOp::Add, Ty::U32, col, Operand::Int(2 * dcol));
                        l.f.bin(BinOp::Xor, Ty::U32, c, x)
                    });
                    self.ldm_bytes.insert((fr.col, x, dcol), b);
                    b
                }
            },
            None => fr.col,
        };
        let base = self.f.bin(BinOp::Add, Ty::U32, fr.row, byte);
        fr.bases.push((key, base));
        Addr::Reg(base, at + 2 * (dcol - key))
    }

    /// This lane's `l / 4` and `2 (l % 4)` (emitted once, in the prologue).
    pub(super) fn lane_regs(&mut self) -> (Reg, Reg) {
        if let Some(r) = self.lane {
            return r;
        }
        let (g, t2) = self.in_prologue(|l| {
            let lane = l.f.bin(BinOp::And, Ty::S64, l.tid, Operand::Int(31));
            let g = l.f.bin(BinOp::Shr, Ty::S64, lane, Operand::Int(2));
            let t = l.f.bin(BinOp::And, Ty::S64, lane, Operand::Int(3));
            (g, l.f.bin(BinOp::Add, Ty::S64, t, t))
        });
        self.lane = Some((g, t2));
        (g, t2)
    }
}

/// What `ldmatrix` lane addressing is computed once for: the warp's first
/// row or column, whether the operand is B, and the stored layout (by
/// columns, bytes per row, swizzle).
pub(super) type LdmKey = (Reg, bool, bool, i64, Option<(i64, i64)>);

/// Where `ldmatrix` finds an operand's fragments (see
/// [`Lower::frag_addr`]).
struct Frags {
    /// This lane's stored row (shared address of its start).
    row: Reg,
    /// This lane's byte in the row, before the swizzle.
    col: Reg,
    /// The row's swizzle (see `smem.rs`), if any.
    xor: Option<Reg>,
    /// The tile's shared offset.
    off: i64,
    /// Whether k runs along the stored rows (else along a row).
    k_rows: bool,
    /// Bytes per stored row.
    row_bytes: i64,
    /// Whether the matrices are transposed on the way.
    trans: bool,
    /// Lane addresses made so far, by element step along the row.
    bases: Vec<(i64, Reg)>,
}

/// Every dot in `b` (nested blocks included): its result and A operand.
fn collect_dots(b: &Block, out: &mut Vec<(Value, Value)>) {
    for i in &b.insts {
        match &i.op {
            TOp::Dot { a, .. } => {
                if let Some(r) = i.results.first() {
                    out.push((*r, *a));
                }
            }
            TOp::For { body, .. } => collect_dots(body, out),
            _ => {}
        }
    }
}

/// `v` and every value computed from it by elementwise operations in `b`.
fn derived(b: &Block, v: Value) -> std::collections::HashSet<Value> {
    fn visit(b: &Block, set: &mut std::collections::HashSet<Value>) {
        for i in &b.insts {
            let hit = match &i.op {
                TOp::Unary(_, x) | TOp::Cast(x) => set.contains(x),
                TOp::Binary(_, x, y) => set.contains(x) || set.contains(y),
                TOp::Select(c, x, y) => set.contains(c) || set.contains(x) || set.contains(y),
                TOp::For { body, .. } => {
                    visit(body, set);
                    false
                }
                _ => false,
            };
            if hit {
                set.extend(i.results.iter().copied());
            }
        }
    }
    let mut set = std::collections::HashSet::from([v]);
    visit(b, &mut set);
    set
}

//! `dot` on tensor cores: `mma.sync.m16n8k16` with bf16 or fp16 operands
//! and f32 accumulators, the accumulator kept in the `Mma` layout across
//! loop trips (so epilogues and the FlashAttention rescaling work on the
//! fragments in place).

use super::{Layout, Lower, Val, C, R};
use crate::ir::*;
use tessera_syntax::ast::Dtype;
use tessera_tile::{Block, TOp, Value};

impl<'k> Lower<'k> {
    /// The operand format (`true`: bf16, `false`: fp16) of a `dot` of `a`
    /// and `b` on tensor cores, if it can run there: 2-d, f32 accumulator,
    /// 16-bit operands (an f32 operand next to a 16-bit one is rounded to
    /// its format, as FlashAttention does with P).
    fn mma_format(&self, v: Value, a: Value, b: Value) -> Option<bool> {
        if self.k.ty(v).dtype != Dtype::Fp32 {
            return None;
        }
        match (self.k.ty(a).dtype, self.k.ty(b).dtype) {
            (Dtype::Bf16, Dtype::Bf16 | Dtype::Fp32) | (Dtype::Fp32, Dtype::Bf16) => Some(true),
            (Dtype::Fp16, Dtype::Fp16 | Dtype::Fp32) | (Dtype::Fp32, Dtype::Fp16) => Some(false),
            _ => None,
        }
    }

    /// The warp grid of a tensor-core `dot` producing `v` from `a` and `b`,
    /// if it can run on tensor cores: tile extents multiples of the
    /// instruction's 16×8×16, split over the block's warps so as to load
    /// the fewest fragments per step.
    pub(super) fn mma_layout(&self, v: Value, a: Value, b: Value) -> Option<Layout> {
        self.mma_format(v, a, b)?;
        let shape = self.shapes[v.index()].as_ref()?;
        let sa = self.shapes[a.index()].as_ref()?;
        if shape.len() != 2 || sa.len() != 2 || sa[1] % 16 != 0 {
            return None;
        }
        let (m, n) = (shape[0], shape[1]);
        let warps = self.threads / 32;
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
    fn in_dot_chain(&self, v: Value, a: Value) -> bool {
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
            TOp::Dot { a, b, .. } => self.mma_layout(y, *a, *b).unwrap_or(Layout::Flat),
            TOp::Unary(_, x) | TOp::Cast(x) => self.same_shape_layout(body, y, &[*x]),
            TOp::Binary(_, x, z) => self.same_shape_layout(body, y, &[*x, *z]),
            TOp::Select(c, x, z) => self.same_shape_layout(body, y, &[*c, *x, *z]),
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

    /// Two elements of an operand, rounded to bf16 (or fp16) and packed
    /// into one b32 fragment register, `lo` in the lower half.
    fn pair(&mut self, v: Value, bf16: bool, lo: [C; 2], hi: [C; 2]) -> R<Reg> {
        let x0 = self.elem(v, &lo)?;
        let x1 = self.elem(v, &hi)?;
        let (x0, x1) = (self.convert(x0, Ty::F32)?, self.convert(x1, Ty::F32)?);
        let dst = self.f.reg(Ty::B32);
        self.f.push(Inst::CvtPack {
            bf16,
            dst,
            hi: x1,
            lo: x0,
        });
        Ok(dst)
    }

    /// `dot` of `a` `[M, K]` and `b` `[K, N]` into `acc` on tensor cores,
    /// the result distributed in `layout`.
    pub(super) fn mma_dot(
        &mut self,
        v: Value,
        a: Value,
        b: Value,
        acc: Value,
        layout: Layout,
    ) -> R<()> {
        let Layout::Mma { wm, wn } = layout else {
            return Err("internal error: a tensor-core dot needs an mma layout".into());
        };
        let bf16 = self
            .mma_format(v, a, b)
            .ok_or("internal error: no mma format")?;
        let shape = self.shape(v)?;
        let (m, n, k) = (shape[0], shape[1], self.shape(a)?[1]);
        let (mt, nt) = (m / wm / 16, n / wn / 8);
        // An A operand held as accumulators of an earlier mma with the same
        // rows per warp (attention's probabilities) already has its
        // fragments in registers: accumulator pairs pack into A pairs.
        let a_regs = match self.val(a)? {
            Val::Dist(regs, Layout::Mma { wm: wa, wn: 1 }) if wa == wm && wn == 1 => Some(regs),
            // Elementwise math on such accumulators (P = exp(S - m), cast
            // to bf16) is computed straight into the fragment layout.
            Val::Lazy if wn == 1 && self.in_dot_chain(v, a) => {
                let regs = self.slot_values(a, Layout::Mma { wm, wn: 1 })?;
                // Round to the operand format once, as a staged copy would.
                let regs = regs
                    .into_iter()
                    .map(|r| self.convert(r, Ty::F32))
                    .collect::<R<Vec<_>>>()?;
                Some(regs)
            }
            _ => None,
        };
        if a_regs.is_none() {
            self.in_shared(a)?;
        }
        self.in_shared(b)?;
        let accs: Vec<Reg> = self
            .slot_values(acc, layout)?
            .into_iter()
            .map(|r| {
                let r = self.convert(r, Ty::F32)?;
                Ok(self.f.mov(Ty::F32, Operand::Reg(r)))
            })
            .collect::<R<_>>()?;
        let (rb, cb) = self.frag_base(layout, m, n);
        let (g, t2) = self.lane_regs();
        // B's column for lane l is (wj·N/wn + 8j) + l/4.
        let col0 = self.f.bin(BinOp::Sub, Ty::S64, cb, t2);
        let bcol = self.f.bin(BinOp::Add, Ty::S64, col0, g);
        // Operands held in shared memory in their 16-bit format, with rows
        // of whole 16-byte chunks, load their fragments with ldmatrix.
        let row0 = self.f.bin(BinOp::Sub, Ty::S64, rb, g);
        let lda = self.ldmatrix_base(a, bf16, row0, false)?;
        let ldb = self.ldmatrix_base(b, bf16, col0, true)?;
        self.f.push(Inst::Comment(format!(
            "{v} = dot on tensor cores, {wm}x{wn} warps"
        )));
        for k0 in (0..k).step_by(16) {
            self.memo.clear();
            let kk = |l: &mut Self, d: i64| l.c_mad(C::R(t2), 1, C::K(k0 + d));
            let mut bfrag = Vec::new();
            if let Some(fr) = ldb {
                // x4: fragments of column blocks j and j + 1.
                let mut j = 0;
                while j < nt {
                    let x = if j + 1 < nt { 4 } else { 2 };
                    let dst: Vec<Reg> = (0..x).map(|_| self.f.reg(Ty::B32)).collect();
                    self.f.push(Inst::Ldmatrix {
                        trans: fr.trans,
                        dst: dst.clone(),
                        addr: fr.at(k0, 8 * j),
                    });
                    for pair in dst.chunks(2) {
                        bfrag.push([pair[0], pair[1]]);
                    }
                    j += x as i64 / 2;
                }
            }
            for j in bfrag.len() as i64..nt {
                let col = self.c_mad(C::R(bcol), 1, C::K(8 * j));
                let (k_0, k_1, k_8, k_9) = (kk(self, 0), kk(self, 1), kk(self, 8), kk(self, 9));
                let b0 = self.pair(b, bf16, [k_0, col], [k_1, col])?;
                let b1 = self.pair(b, bf16, [k_8, col], [k_9, col])?;
                bfrag.push([b0, b1]);
            }
            for i in 0..mt {
                if let Some(regs) = &a_regs {
                    // Accumulator slot (i·(k/8) + j)·4 + r holds row
                    // 16i + l/4 + 8·(r/2), column 8j + 2(l%4) + r%2.
                    let slot = |j: i64, r: i64| regs[((i * (k / 8) + j) * 4 + r) as usize];
                    let j0 = k0 / 8;
                    let mut frag = [Reg(0); 4];
                    for (q, (j, r)) in [(j0, 0), (j0, 2), (j0 + 1, 0), (j0 + 1, 2)]
                        .into_iter()
                        .enumerate()
                    {
                        let dst = self.f.reg(Ty::B32);
                        self.f.push(Inst::CvtPack {
                            bf16,
                            dst,
                            hi: slot(j, r + 1),
                            lo: slot(j, r),
                        });
                        frag[q] = dst;
                    }
                    for (j, bf) in bfrag.iter().enumerate() {
                        let base = (i as usize * nt as usize + j) * 4;
                        let c = [accs[base], accs[base + 1], accs[base + 2], accs[base + 3]];
                        self.f.push(Inst::Mma {
                            bf16,
                            d: c,
                            a: frag,
                            b: *bf,
                            c,
                        });
                    }
                    continue;
                }
                if let Some(fr) = lda {
                    let dst: Vec<Reg> = (0..4).map(|_| self.f.reg(Ty::B32)).collect();
                    self.f.push(Inst::Ldmatrix {
                        trans: fr.trans,
                        dst: dst.clone(),
                        addr: fr.at(k0, 16 * i),
                    });
                    for (j, bf) in bfrag.iter().enumerate() {
                        let base = (i as usize * nt as usize + j) * 4;
                        let c = [accs[base], accs[base + 1], accs[base + 2], accs[base + 3]];
                        self.f.push(Inst::Mma {
                            bf16,
                            d: c,
                            a: [dst[0], dst[1], dst[2], dst[3]],
                            b: *bf,
                            c,
                        });
                    }
                    continue;
                }
                let r0 = self.c_mad(C::R(rb), 1, C::K(16 * i));
                let r8 = self.c_mad(C::R(rb), 1, C::K(16 * i + 8));
                let (k_0, k_1, k_8, k_9) = (kk(self, 0), kk(self, 1), kk(self, 8), kk(self, 9));
                let a0 = self.pair_row(a, bf16, r0, k_0, k_1, k0, 0)?;
                let a1 = self.pair_row(a, bf16, r8, k_0, k_1, k0, 0)?;
                let a2 = self.pair_row(a, bf16, r0, k_8, k_9, k0, 8)?;
                let a3 = self.pair_row(a, bf16, r8, k_8, k_9, k0, 8)?;
                for (j, bf) in bfrag.iter().enumerate() {
                    let base = (i as usize * nt as usize + j) * 4;
                    let c = [accs[base], accs[base + 1], accs[base + 2], accs[base + 3]];
                    self.f.push(Inst::Mma {
                        bf16,
                        d: c,
                        a: [a0, a1, a2, a3],
                        b: *bf,
                        c,
                    });
                }
            }
        }
        self.memo.clear();
        self.vals[v.index()] = Some(Val::Dist(accs, layout));
        Ok(())
    }

    /// An A-fragment pair: row `row`, columns `k0 + 2t + d` and the next,
    /// one 32-bit load where the operand is stored in the right format.
    #[allow(clippy::too_many_arguments)]
    fn pair_row(&mut self, a: Value, bf16: bool, row: C, c0: C, c1: C, k0: i64, d: i64) -> R<Reg> {
        let dtype = self.k.ty(a).dtype;
        let native = if bf16 { Dtype::Bf16 } else { Dtype::Fp16 };
        if dtype == native && !self.transposed.contains(&a) {
            if let Val::Shared(off) = self.val(a)? {
                // Columns 2t + d and 2t + d + 1 are adjacent; the pair starts
                // at an even element, so the load is 4-byte aligned.
                let shape = self.shape(a)?;
                let flat = self.flatten(&[row, c0], &shape);
                let addr = self.shared_addr(off, flat, 2);
                let dst = self.f.reg(Ty::B32);
                self.f.push(Inst::Ld {
                    space: Space::Shared,
                    ty: Ty::B32,
                    dst,
                    addr,
                    guard: None,
                });
                let _ = (k0, d);
                return Ok(dst);
            }
        }
        self.pair(a, bf16, [row, c0], [row, c1])
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
        let by_columns = self.transposed.contains(&v);
        if self.k.ty(v).dtype != native || shape.len() != 2 || (by_columns && !b) {
            return Ok(None);
        }
        // Elements per stored row.
        let pitch = if by_columns { shape[0] } else { shape[1] };
        if pitch % 8 != 0 {
            return Ok(None);
        }
        let lane = self.f.bin(BinOp::And, Ty::S64, self.tid, Operand::Int(31));
        let r = self.f.bin(BinOp::And, Ty::S64, lane, Operand::Int(7));
        let q = self.f.bin(BinOp::Shr, Ty::S64, lane, Operand::Int(3));
        let q1 = self.f.bin(BinOp::And, Ty::S64, q, Operand::Int(1));
        let q2 = self.f.bin(BinOp::Shr, Ty::S64, q, Operand::Int(1));
        // (stored row, stored column) this lane addresses in a block, and
        // the strides of k and of the other index (rows of A, columns of
        // B) in elements.
        let (row, col, k, other, trans) = match (b, by_columns) {
            (false, _) => {
                let row = self.f.fma(Ty::S64, q1, Operand::Int(8), r);
                let row = self.f.bin(BinOp::Add, Ty::S64, row, first);
                let col = self.f.bin(BinOp::Mul, Ty::S64, q2, Operand::Int(8));
                (row, col, 1, pitch, false)
            }
            (true, false) => {
                let row = self.f.fma(Ty::S64, q1, Operand::Int(8), r);
                let col = self.f.fma(Ty::S64, q2, Operand::Int(8), first);
                (row, col, pitch, 1, true)
            }
            (true, true) => {
                let row = self.f.fma(Ty::S64, q2, Operand::Int(8), r);
                let row = self.f.bin(BinOp::Add, Ty::S64, row, first);
                let col = self.f.bin(BinOp::Mul, Ty::S64, q1, Operand::Int(8));
                (row, col, 1, pitch, false)
            }
        };
        let flat = self.f.fma(Ty::S64, row, Operand::Int(pitch), col);
        let flat = self.f.cvt(Ty::U32, flat);
        let smem = self.f.reg(Ty::U32);
        self.f.push(Inst::SharedBase { dst: smem });
        let base = self.f.fma(Ty::U32, flat, Operand::Int(2), smem);
        Ok(Some(Frags {
            base,
            off: off as i64,
            k,
            other,
            trans,
        }))
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

/// Where `ldmatrix` finds an operand's fragments: lane base address,
/// constant offset, and element strides of `k` and of the other index.
#[derive(Clone, Copy)]
struct Frags {
    base: Reg,
    off: i64,
    k: i64,
    other: i64,
    /// Whether the matrices are transposed on the way.
    trans: bool,
}

impl Frags {
    /// The address of the block at `k0` and other index `x`.
    fn at(self, k0: i64, x: i64) -> Addr {
        Addr::Reg(self.base, self.off + (k0 * self.k + x * self.other) * 2)
    }
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

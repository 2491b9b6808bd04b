//! Reductions with fewer results than threads: `g` threads share each
//! result. Each thread folds a strided part of the row, the parts meet in
//! a tree of warp shuffles (and, past 32 threads, through shared memory),
//! in a fixed order, so every run gives the same bits.
//!
//! Row reductions of accumulator tiles whose rows each live in one warp
//! (the `Mma { wm, wn: 1 }` layout: attention's scores) stay in registers:
//! each lane folds its own elements of a row, then the quad holding the
//! row meets in two butterfly shuffles, and every lane of the quad holds
//! the result (the `Rows` layout).

use super::{Layout, Lower, Val, C, R};
use crate::ir::*;
use tessera_tile::{Combine, TOp, Value};

/// The binary operation that folds two values under `combine`.
pub(super) fn combine_op(combine: Combine) -> BinOp {
    match combine {
        Combine::Sum => BinOp::Add,
        Combine::Max => BinOp::Max,
        Combine::Min => BinOp::Min,
        Combine::Prod => BinOp::Mul,
    }
}

/// What one parallel reduction computes.
pub(super) struct Plan {
    /// The result.
    pub v: Value,
    /// The reduced operand and its axis.
    pub value: Value,
    pub axis: usize,
    pub combine: Combine,
    /// Compensated summation.
    pub kahan: bool,
    /// A float sum in the deterministic order ([`Lower::deterministic_sum`]).
    pub det: bool,
    /// Accumulator type (32 bits).
    pub ty: Ty,
    /// Result shape and element count.
    pub shape: Vec<i64>,
    pub n: i64,
    /// Length of the reduced axis.
    pub len: i64,
    /// Threads per result (a power of two, at least 2).
    pub g: i64,
}

impl<'k> Lower<'k> {
    /// The identity of `combine` in `ty`.
    pub(super) fn identity(combine: Combine, ty: Ty) -> Operand {
        match (combine, ty) {
            (Combine::Sum, Ty::F32 | Ty::F64) => Operand::Float(0.0),
            (Combine::Prod, Ty::F32 | Ty::F64) => Operand::Float(1.0),
            (Combine::Prod, _) => Operand::Int(1),
            (Combine::Max, Ty::F32 | Ty::F64) => Operand::Float(f64::NEG_INFINITY),
            (Combine::Min, Ty::F32 | Ty::F64) => Operand::Float(f64::INFINITY),
            (Combine::Sum, _) => Operand::Int(0),
            (Combine::Max, Ty::U32 | Ty::U64) => Operand::Int(0),
            (Combine::Min, Ty::U32) => Operand::Int(i64::from(u32::MAX)),
            // All ones: the largest u64 (an operand prints as its bits).
            (Combine::Min, Ty::U64) => Operand::Int(-1),
            (Combine::Max, Ty::S64) => Operand::Int(i64::MIN),
            (Combine::Min, Ty::S64) => Operand::Int(i64::MAX),
            (Combine::Max, _) => Operand::Int(i64::from(i32::MIN)),
            (Combine::Min, _) => Operand::Int(i64::from(i32::MAX)),
        }
    }

    /// `acc (+)= x` in place (with compensation `comp` for Kahan).
    fn fold(&mut self, p: &Plan, acc: Reg, comp: Reg, x: Reg) {
        if p.kahan {
            self.kahan_step(p.ty, acc, comp, x);
            return;
        }
        let op = combine_op(p.combine);
        let r = self.f.bin(op, p.ty, acc, x);
        self.f.push(Inst::Mov {
            dst: acc,
            src: Operand::Reg(r),
        });
    }

    /// Folds another partial `(x, xc)` into `(acc, comp)` (`xc` only for
    /// Kahan). Two compensated partials (each standing for `sum - comp`)
    /// merge exactly through Knuth's TwoSum: `acc + x = s + err` exactly,
    /// so the total is `s - (comp + xc - err)`.
    fn merge(&mut self, p: &Plan, acc: Reg, comp: Reg, x: Reg, xc: Option<Reg>) {
        let Some(xc) = xc else {
            self.fold(p, acc, comp, x);
            return;
        };
        let ty = p.ty;
        let (s, err) = self.two_sum(ty, acc, x);
        let cs = self.f.bin(BinOp::Add, ty, comp, xc);
        let c = self.f.bin(BinOp::Sub, ty, cs, err);
        // A sum no longer finite stays what it is (its error is NaN).
        let finite = self.finite(ty, s);
        let c = self.f.selp(ty, finite, c, Operand::Float(0.0));
        self.f.push(Inst::Mov {
            dst: comp,
            src: Operand::Reg(c),
        });
        self.f.push(Inst::Mov {
            dst: acc,
            src: Operand::Reg(s),
        });
    }

    /// `src` of lane `b` (mode `Idx`) or `lane + b` (`Down`).
    fn shfl(&mut self, mode: ShflMode, src: Reg, b: Operand) -> Reg {
        let dst = self.f.reg(self.f.ty(src));
        self.f.push(Inst::Shfl {
            mode,
            dst,
            src,
            b,
            clamp: 31,
        });
        dst
    }

    /// `wm` when `value` (reduced along `axis`) is an `[M, N]` tile held,
    /// or computed elementwise from one held, in the `Mma { wm, wn: 1 }`
    /// layout: then each row lives in the four lanes of one quad.
    pub(super) fn quad_rows(&self, value: Value, axis: usize) -> Option<i64> {
        let shape = self.shapes.get(value.index())?.as_deref()?;
        if axis != 1 || shape.len() != 2 || shape[1] % 8 != 0 {
            return None;
        }
        self.mma_rows_of(value, shape, 0)
    }

    fn mma_rows_of(&self, v: Value, shape: &[i64], depth: u32) -> Option<i64> {
        if depth > 32 || self.shapes.get(v.index())?.as_deref() != Some(shape) {
            return None;
        }
        match self.vals.get(v.index())?.as_ref()? {
            Val::Dist(_, Layout::Mma { wm, wn: 1 }) => Some(*wm),
            Val::Lazy => {
                let inst = self.defs.get(&v)?;
                if !matches!(
                    inst.op,
                    TOp::Unary(..) | TOp::Binary(..) | TOp::Select(..) | TOp::Cast(_)
                ) {
                    return None;
                }
                inst.op
                    .operands()
                    .into_iter()
                    .find_map(|o| self.mma_rows_of(o, shape, depth + 1))
            }
            _ => None,
        }
    }

    /// Reduces `value` (see [`Lower::quad_rows`]) along its rows into `v`,
    /// in registers: each lane folds its columns in order (fragment by
    /// fragment), then the quad combines its four partials in a butterfly
    /// (`a + b` and `b + a` are the same bits, so all four lanes agree).
    pub(super) fn reduce_rows(
        &mut self,
        v: Value,
        value: Value,
        combine: Combine,
        wm: i64,
    ) -> R<()> {
        let shape = self.shape(value)?;
        let ty = self.rty(v);
        // The maximum (minimum) of s · c for a positive scalar c is that
        // of s times c, to the bit (rounding is monotonic), without the
        // products: attention's scores before their 1/√D scale.
        let scale = match (combine, self.scaled(value)) {
            (Combine::Max | Combine::Min, Some((s, c)))
                if ty == Ty::F32
                    && self.positive(c, 0)
                    && self.mma_rows_of(s, &shape, 0) == Some(wm) =>
            {
                Some((s, c))
            }
            _ => None,
        };
        let value = scale.map_or(value, |(s, _)| s);
        let regs = self.slot_values(value, Layout::Mma { wm, wn: 1 })?;
        let xs = regs
            .into_iter()
            .map(|r| self.convert(r, ty))
            .collect::<R<Vec<_>>>()?;
        let op = combine_op(combine);
        let (nt, mt) = (shape[1] / 8, shape[0] / wm / 16);
        let dtype = self.k.ty(v).dtype;
        let mut out = Vec::new();
        for i in 0..mt {
            // Row half h: accumulator registers 2h and 2h + 1 of each
            // fragment.
            for h in 0..2 {
                let mut acc: Option<Reg> = None;
                for j in 0..nt {
                    for b in 0..2 {
                        let x = xs[((i * nt + j) * 4 + 2 * h + b) as usize];
                        acc = Some(match acc {
                            None => x,
                            Some(a) => self.f.bin(op, ty, a, x),
                        });
                    }
                }
                let mut acc = acc.ok_or("internal error: a row without elements")?;
                for lanes in [1, 2] {
                    let other = self.shfl(ShflMode::Bfly, acc, Operand::Int(lanes));
                    acc = self.f.bin(op, ty, acc, other);
                }
                if let Some((_, c)) = scale {
                    let c = self.elem(c, &[])?;
                    acc = self.f.bin(BinOp::Mul, ty, acc, c);
                }
                out.push(self.round(dtype, acc)?);
            }
        }
        self.vals[v.index()] = Some(Val::Dist(out, Layout::Rows { wm }));
        Ok(())
    }

    /// Reduces `value` to the single result `v` in registers, when `value`
    /// is held in registers in the flat or `Vec` layout and the reduction
    /// takes all of it (a one-pass row kernel's row): each thread folds its
    /// slots in order, the warp meets in a butterfly, and the warps' values
    /// meet in shared memory, folded in warp order by every thread, so that
    /// every thread holds the same bits (a uniform result). False, having
    /// emitted nothing, when it does not apply.
    pub(super) fn reduce_held(&mut self, v: Value, value: Value, combine: Combine) -> R<bool> {
        let ty = self.rty(v);
        let Some(Val::Dist(regs, layout)) = self.vals[value.index()].clone() else {
            return Ok(false);
        };
        if !matches!(layout, Layout::Flat | Layout::Vec { .. })
            || self.len(v)? != 1
            || !matches!(ty, Ty::F32 | Ty::S32 | Ty::U32)
        {
            return Ok(false);
        }
        self.f.push(Inst::Comment(format!(
            "{v} = reduce_{} of {value}, held in registers",
            combine.name()
        )));
        let shape = self.shape(value)?;
        let op = combine_op(combine);
        let identity = Self::identity(combine, ty);
        let saved = self.cur.take();
        let mut acc: Option<Reg> = None;
        for (s, r) in regs.iter().enumerate() {
            let (_, valid) = self.slot_coords(&shape, layout, s as i64);
            let x = self.convert(*r, ty)?;
            let x = match valid {
                Some(p) => self.f.selp(ty, p, x, identity.clone()),
                None => x,
            };
            acc = Some(match acc {
                None => x,
                Some(a) => self.f.bin(op, ty, a, x),
            });
        }
        self.cur = saved;
        let mut acc = match acc {
            Some(a) => a,
            None => self.f.mov(ty, identity),
        };
        for lanes in [16, 8, 4, 2, 1] {
            let other = self.shfl(ShflMode::Bfly, acc, Operand::Int(lanes));
            acc = self.f.bin(op, ty, acc, other);
        }
        let warps = self.threads / 32;
        if warps > 1 {
            let parts = self.alloc_shared(format!("{v} warps"), warps as u64 * 4);
            let lane = self.f.bin(BinOp::And, Ty::S64, self.tid, Operand::Int(31));
            let first = self.f.setp(Cmp::Eq, Ty::S64, lane, Operand::Int(0));
            let warp = self.f.bin(BinOp::Shr, Ty::S64, self.tid, Operand::Int(5));
            self.f.push(Inst::Barrier);
            let addr = self.shared_addr(parts, C::R(warp), 4);
            self.f.push(Inst::St {
                space: Space::Shared,
                ty,
                addr,
                src: Operand::Reg(acc),
                guard: Some(Guard {
                    pred: first,
                    negated: false,
                }),
            });
            self.f.push(Inst::Barrier);
            let mut total: Option<Reg> = None;
            for w in 0..warps {
                let x = self.f.reg(ty);
                self.f.push(Inst::Ld {
                    space: Space::Shared,
                    ty,
                    dst: x,
                    addr: Addr::Shared(parts as i64 + 4 * w),
                    guard: None,
                });
                total = Some(match total {
                    None => x,
                    Some(t) => self.f.bin(op, ty, t, x),
                });
            }
            acc = total.expect("at least two warps");
        }
        let dtype = self.k.ty(v).dtype;
        let r = self.round(dtype, acc)?;
        self.vals[v.index()] = Some(Val::Uniform(r));
        Ok(true)
    }

    /// A float sum along `axis` of `value` in the deterministic order
    /// (`Policy::Deterministic`), the same on every backend: 32 lanes,
    /// lane `v` adding elements `v, v + 32, v + 64, ...` of the line in
    /// turn to +0, then a halving tree (lane `v` adds lane `v + off` for
    /// `off` = 16, 8, 4, 2, 1); the sum is lane 0's. Member `j` of a group
    /// of `g` threads sharing the line (`g` a power of two up to 32; `j`
    /// `None` when `g` is 1) holds lanes `j, j + g, ...`; the sum ends in
    /// member 0. `coord` is the result's coordinate.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn deterministic_sum(
        &mut self,
        value: Value,
        axis: usize,
        coord: &[C],
        len: i64,
        ty: Ty,
        g: i64,
        j: Option<Reg>,
    ) -> R<Reg> {
        let per = (32 / g).max(1) as usize;
        let lanes: Vec<Reg> = (0..per)
            .map(|_| self.f.mov(ty, Operand::Float(0.0)))
            .collect();
        let trips = (len + 31) / 32;
        self.counted_loop(trips, |l, k| {
            let base = l.f.bin(BinOp::Mul, Ty::S64, k, Operand::Int(32));
            let base = match j {
                Some(j) => l.f.bin(BinOp::Add, Ty::S64, base, Operand::Reg(j)),
                None => base,
            };
            for (q, acc) in lanes.iter().enumerate() {
                let i =
                    l.f.bin(BinOp::Add, Ty::S64, base, Operand::Int(q as i64 * g));
                let valid = l.f.setp(Cmp::Lt, Ty::S64, i, Operand::Int(len));
                let ic = l.f.bin(BinOp::Min, Ty::S64, i, Operand::Int(len - 1));
                let mut c = coord.to_vec();
                c.insert(axis, C::R(ic));
                let x = l.elem(value, &c)?;
                let x = l.convert(x, ty)?;
                let x = l.f.selp(ty, valid, x, Operand::Float(0.0));
                let s = l.f.bin(BinOp::Add, ty, *acc, x);
                l.f.push(Inst::Mov {
                    dst: *acc,
                    src: Operand::Reg(s),
                });
            }
            Ok(())
        })?;
        // The tree among this thread's lanes (offsets 16 down to g), then
        // across the group (g / 2 down to 1).
        let mut lanes = lanes;
        let mut off = 16;
        while off >= g {
            let step = (off / g) as usize;
            for q in 0..step {
                lanes[q] = self.f.bin(BinOp::Add, ty, lanes[q], lanes[q + step]);
            }
            off /= 2;
        }
        let mut acc = lanes[0];
        let mut off = g / 2;
        while off >= 1 {
            let x = self.shfl(ShflMode::Down, acc, Operand::Int(off));
            acc = self.f.bin(BinOp::Add, ty, acc, x);
            off /= 2;
        }
        Ok(acc)
    }

    /// Lowers reduction `p` (see the module docs).
    pub(super) fn reduce_parallel(&mut self, p: Plan) -> R<()> {
        let (g, ty) = (p.g, p.ty);
        let shift = g.trailing_zeros() as i64;
        // This thread works on result `o`, as member `j` of its group.
        let o = self
            .f
            .bin(BinOp::Shr, Ty::S64, self.tid, Operand::Int(shift));
        let j = self
            .f
            .bin(BinOp::And, Ty::S64, self.tid, Operand::Int(g - 1));
        let oc = self.f.bin(BinOp::Min, Ty::S64, o, Operand::Int(p.n - 1));
        let coord = self.unflatten(C::R(oc), &p.shape);
        let init = Self::identity(p.combine, ty);
        let acc = self.f.reg(ty);
        self.f.push(Inst::Mov {
            dst: acc,
            src: init,
        });
        let comp = self.f.reg(ty);
        self.f.push(Inst::Mov {
            dst: comp,
            src: Operand::Int(0),
        });
        if p.det {
            let r = self.deterministic_sum(p.value, p.axis, &coord, p.len, ty, g, Some(j))?;
            self.f.push(Inst::Mov {
                dst: acc,
                src: Operand::Reg(r),
            });
        } else {
            let vshape = self.shape(p.value)?;
            let v = super::vector::V;
            let loads = if p.axis + 1 == vshape.len() && p.len % v == 0 && p.len >= v * g {
                self.vector_loads(p.value, &vshape)
            } else {
                Vec::new()
            };
            let saved = self.cur.take();
            if !loads.is_empty() {
                // Member j folds elements 4j .. 4j + 3, then 4(j + g) .., four
                // consecutive elements loaded at once where whole.
                let trips = (p.len + v * g - 1) / (v * g);
                self.counted_loop(trips, |l, k| {
                    let i = l.f.fma(Ty::S64, k, Operand::Int(g), j);
                    let i = l.f.bin(BinOp::Mul, Ty::S64, i, Operand::Int(v));
                    let valid = l.f.setp(Cmp::Lt, Ty::S64, i, Operand::Int(p.len));
                    let ic = l.f.bin(BinOp::Min, Ty::S64, i, Operand::Int(p.len - v));
                    let coords: Vec<Vec<C>> = (0..v)
                        .map(|q| {
                            let mut c = coord.clone();
                            c.insert(p.axis, l.c_mad(C::R(ic), 1, C::K(q)));
                            c
                        })
                        .collect();
                    for ld in &loads {
                        l.load_vector(*ld, &coords)?;
                    }
                    for c in &coords {
                        let x = l.elem(p.value, c)?;
                        let x = l.convert(x, ty)?;
                        let x = l.f.selp(ty, valid, x, init);
                        l.fold(&p, acc, comp, x);
                    }
                    l.vec_loads.clear();
                    Ok(())
                })?;
            }
            // Member j folds elements j, j + g, j + 2g, ...: the same trip
            // count everywhere, elements past the end masked to the identity.
            if loads.is_empty() {
                let trips = (p.len + g - 1) / g;
                self.counted_loop(trips, |l, k| {
                    let i = l.f.fma(Ty::S64, k, Operand::Int(g), j);
                    let valid = l.f.setp(Cmp::Lt, Ty::S64, i, Operand::Int(p.len));
                    let ic = l.f.bin(BinOp::Min, Ty::S64, i, Operand::Int(p.len - 1));
                    let mut c = coord.clone();
                    c.insert(p.axis, C::R(ic));
                    let x = l.elem(p.value, &c)?;
                    let x = l.convert(x, ty)?;
                    let x = l.f.selp(ty, valid, x, init);
                    l.fold(&p, acc, comp, x);
                    Ok(())
                })?;
            }
            self.cur = saved;
            // A tree over the warp: after it, the group's first lane holds the
            // group's (or, past 32, the warp's) result.
            let mut off = g.min(32) / 2;
            while off >= 1 {
                let x = self.shfl(ShflMode::Down, acc, Operand::Int(off));
                let xc = p
                    .kahan
                    .then(|| self.shfl(ShflMode::Down, comp, Operand::Int(off)));
                self.merge(&p, acc, comp, x, xc);
                off /= 2;
            }
        }
        let lane = self.f.bin(BinOp::And, Ty::S64, self.tid, Operand::Int(31));
        let total = if g <= 32 {
            if p.kahan {
                // Fold in the compensation (the negated lost low-order
                // part) before the result is shared.
                let r = self.f.bin(BinOp::Sub, ty, acc, comp);
                self.f.push(Inst::Mov {
                    dst: acc,
                    src: Operand::Reg(r),
                });
            }
            // Every member reads the first lane of its group.
            let first = self
                .f
                .bin(BinOp::And, Ty::S64, lane, Operand::Int(!(g - 1) & 31));
            let first = self.f.cvt(Ty::U32, first);
            self.shfl(ShflMode::Idx, acc, Operand::Reg(first))
        } else {
            // Each warp's first lane writes its part; every member then
            // folds the group's parts in order.
            let parts = g / 32;
            let width = 4u64;
            let sums = self.alloc_shared(format!("{} parts", p.v), (p.n * parts) as u64 * width);
            let comps = self.alloc_shared(format!("{} comps", p.v), (p.n * parts) as u64 * width);
            let is_first = self.f.setp(Cmp::Eq, Ty::S64, lane, Operand::Int(0));
            let valid = self.f.setp(Cmp::Lt, Ty::S64, o, Operand::Int(p.n));
            let writer = self.f.pred_op(Some(BinOp::And), is_first, valid);
            let part = self.f.bin(BinOp::Shr, Ty::S64, self.tid, Operand::Int(5));
            self.f.push(Inst::Barrier);
            for (region, r) in [(sums, acc), (comps, comp)] {
                let addr = self.shared_addr(region, C::R(part), 4);
                self.f.push(Inst::St {
                    space: Space::Shared,
                    ty,
                    addr,
                    src: Operand::Reg(r),
                    guard: Some(Guard {
                        pred: writer,
                        negated: false,
                    }),
                });
            }
            self.f.push(Inst::Barrier);
            let first = self.f.bin(BinOp::Mul, Ty::S64, oc, Operand::Int(parts));
            let read = |l: &mut Self, region: u64, q: i64| {
                let e = l.f.bin(BinOp::Add, Ty::S64, first, Operand::Int(q));
                let addr = l.shared_addr(region, C::R(e), 4);
                let dst = l.f.reg(ty);
                l.f.push(Inst::Ld {
                    space: Space::Shared,
                    ty,
                    dst,
                    addr,
                    guard: None,
                });
                dst
            };
            let (s0, c0) = (read(self, sums, 0), read(self, comps, 0));
            let total = self.f.reg(ty);
            self.f.push(Inst::Mov {
                dst: total,
                src: Operand::Reg(s0),
            });
            let tc = self.f.reg(ty);
            self.f.push(Inst::Mov {
                dst: tc,
                src: Operand::Reg(c0),
            });
            for q in 1..parts {
                let s = read(self, sums, q);
                let c = p.kahan.then(|| read(self, comps, q));
                self.merge(&p, total, tc, s, c);
            }
            if p.kahan {
                let r = self.f.bin(BinOp::Sub, ty, total, tc);
                self.f.push(Inst::Mov {
                    dst: total,
                    src: Operand::Reg(r),
                });
            }
            total
        };
        let dtype = self.k.ty(p.v).dtype;
        if p.n == 1 {
            // Every thread holds the single result, as the flat layout of
            // one element has it.
            let r = self.round(dtype, total)?;
            self.vals[p.v.index()] = Some(Val::Dist(vec![r], Layout::Flat));
            return Ok(());
        }
        // Thread t takes result t: through shared memory from its group.
        let out = self.alloc_shared(format!("{} results", p.v), p.n as u64 * 4);
        let valid = self.f.setp(Cmp::Lt, Ty::S64, o, Operand::Int(p.n));
        let lead = self.f.setp(Cmp::Eq, Ty::S64, j, Operand::Int(0));
        let writer = self.f.pred_op(Some(BinOp::And), valid, lead);
        self.f.push(Inst::Barrier);
        let addr = self.shared_addr(out, C::R(o), 4);
        self.f.push(Inst::St {
            space: Space::Shared,
            ty,
            addr,
            src: Operand::Reg(total),
            guard: Some(Guard {
                pred: writer,
                negated: false,
            }),
        });
        self.f.push(Inst::Barrier);
        let t = self
            .f
            .bin(BinOp::Min, Ty::S64, self.tid, Operand::Int(p.n - 1));
        let addr = self.shared_addr(out, C::R(t), 4);
        let r = self.f.reg(ty);
        self.f.push(Inst::Ld {
            space: Space::Shared,
            ty,
            dst: r,
            addr,
            guard: None,
        });
        let r = self.round(dtype, r)?;
        self.vals[p.v.index()] = Some(Val::Dist(vec![r], Layout::Flat));
        Ok(())
    }
}

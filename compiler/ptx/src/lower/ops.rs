//! Memory, reductions, `dot`, Kahan steps and loops.

use super::reduce::combine_op;
use super::{Layout, LoopScope, Lower, Val, C, R};
use crate::ir::*;
use tessera_core::Dtype;
use tessera_core::Policy;
use tessera_tile::{Block, Combine, Inst as TInst, TOp, Value};

/// The memory type of a parameter dtype.
pub(super) fn mem_ty(d: Dtype) -> R<Ty> {
    Ok(match d {
        Dtype::Fp64 => Ty::F64,
        Dtype::Fp32 | Dtype::Tf32 => Ty::F32,
        Dtype::Bf16 | Dtype::Fp16 => Ty::B16,
        Dtype::Int64 => Ty::S64,
        Dtype::Int32 => Ty::S32,
        Dtype::Int16 => Ty::S16,
        Dtype::Int8 => Ty::S8,
        Dtype::Uint8 | Dtype::Bool | Dtype::Fp8E4m3 | Dtype::Fp8E5m2 => Ty::U8,
    })
}

impl<'k> Lower<'k> {
    /// The address and in-bounds predicate of an access to `param` at the
    /// index tiles read at `coord` (in the access's shape), and the mask;
    /// no predicate where every index is proven inside the tensor (see
    /// [`tessera_tile::facts`]) and nothing masks the access.
    pub(super) fn access(
        &mut self,
        param: usize,
        index: &[Value],
        mask: Option<Value>,
        coord: &[C],
    ) -> R<(Reg, Option<Reg>)> {
        let (addr, inb, mv) = self.access_parts(param, index, mask, coord)?;
        let ok = match (inb, mv) {
            (Some(a), Some(b)) => Some(self.f.pred_op(Some(BinOp::And), a, b)),
            (a, b) => a.or(b),
        };
        Ok((addr, ok))
    }

    /// [`Lower::access`] with the in-bounds predicate and the mask apart.
    fn access_parts(
        &mut self,
        param: usize,
        index: &[Value],
        mask: Option<Value>,
        coord: &[C],
    ) -> R<(Reg, Option<Reg>, Option<Reg>)> {
        let (dims, st) = self.param_strides(param)?;
        let bytes = i64::from(mem_ty(self.k.params[param].dtype)?.bytes());
        let mut ok: Option<Reg> = None;
        let mut offset = C::K(0);
        // Constant parts of the indices, kept apart (see `index_arith`).
        let mut konst = 0i64;
        for (d, iv) in index.iter().enumerate() {
            let sh = self.shape(*iv)?;
            let c = Self::bcast(coord, &sh);
            let i = self.elem(*iv, &c)?;
            let i = self.convert(i, Ty::S64)?;
            // Negative indices are huge as unsigned: one comparison, unless
            // the index is proven inside the tensor.
            if !self.facts.range(*iv).is_some_and(|r| r.within(dims[d])) {
                let inb = self.f.setp(Cmp::Lt, Ty::U64, i, Operand::Int(dims[d]));
                ok = Some(match ok {
                    None => inb,
                    Some(o) => self.f.pred_op(Some(BinOp::And), o, inb),
                });
            }
            let (b, c) = self.peel(i);
            konst += c * st[d];
            offset = self.c_mad(C::R(b), st[d], offset);
        }
        let mv = match mask {
            Some(m) => {
                let sh = self.shape(m)?;
                let c = Self::bcast(coord, &sh);
                Some(self.elem(m, &c)?)
            }
            None => None,
        };
        let off = match offset {
            C::K(k) => self.f.mov(Ty::S64, Operand::Int(k)),
            C::R(r) => r,
        };
        let addr = self
            .f
            .fma(Ty::S64, off, Operand::Int(bytes), self.bases[param]);
        let addr = self.offset_reg(addr, konst * bytes);
        Ok((addr, ok, mv))
    }

    /// The extents of parameter `param` under the bindings, and its flat
    /// (element) strides.
    pub(super) fn param_strides(&self, param: usize) -> R<(Vec<i64>, Vec<i64>)> {
        let dims = self.k.params[param]
            .dims
            .iter()
            .map(|s| s.eval(self.b))
            .collect::<Result<Vec<_>, _>>()?;
        let st = super::elem::strides(&dims);
        Ok((dims, st))
    }

    /// One element of a load at `coord`, in register type `ty`.
    pub(super) fn load_elem(
        &mut self,
        param: usize,
        index: &[Value],
        mask: Option<Value>,
        other: f64,
        coord: &[C],
        ty: Ty,
    ) -> R<Reg> {
        let dtype = self.k.params[param].dtype;
        let mty = mem_ty(dtype)?;
        let (addr, inb, mv) = self.access_parts(param, index, mask, coord)?;
        // An access proven in bounds loads unconditionally (identical
        // loads then merge); the mask only chooses `other`.
        let (guard, ok) = match (inb, mv) {
            (Some(a), Some(b)) => {
                let ok = self.f.pred_op(Some(BinOp::And), a, b);
                (Some(ok), Some(ok))
            }
            (Some(a), None) => (Some(a), Some(a)),
            (None, m) => (None, m),
        };
        let raw = self.f.reg(mty.reg());
        self.f.push(Inst::Mov {
            dst: raw,
            src: Operand::Int(0),
        });
        self.f.push(Inst::Ld {
            space: Space::Global,
            ty: mty,
            dst: raw,
            addr: Addr::Reg(addr, 0),
            guard: guard.map(|pred| Guard {
                pred,
                negated: false,
            }),
        });
        // Global memory holds each dtype as shared memory does.
        let value = self.from_storage(raw, dtype)?;
        let value = self.convert(value, ty)?;
        let Some(ok) = ok else {
            return Ok(value);
        };
        let other = match ty {
            Ty::Pred => {
                let z = self.f.mov(Ty::S32, Operand::Int(other as i64));
                self.f.setp(Cmp::Ne, Ty::S32, z, Operand::Int(0))
            }
            t if t.is_float() => self.f.mov(t, Operand::Float(other)),
            // `other = -inf` of an integer tensor is its least value.
            t => self
                .f
                .mov(t, Operand::Int(super::elem::saturate(other, dtype))),
        };
        Ok(self.f.selp(ty, ok, value, other))
    }

    /// `store`: every element of the broadcast shape, where in bounds and
    /// unmasked.
    pub(super) fn store(
        &mut self,
        param: usize,
        index: &[Value],
        value: Value,
        mask: Option<Value>,
    ) -> R<()> {
        let shape = self.access_shape(index, mask, value)?;
        let dtype = self.k.params[param].dtype;
        let mty = mem_ty(dtype)?;
        self.f.push(Inst::Comment(format!(
            "store {}",
            self.k.params[param].name
        )));
        // Iterate in the stored value's layout when it covers the whole
        // store, so that its registers are read in place.
        let layout = if self.shape(value)? == shape {
            self.layout_of(value)
        } else {
            Layout::Flat
        };
        if matches!(layout, Layout::Mma { .. })
            && matches!(dtype, Dtype::Bf16 | Dtype::Fp16 | Dtype::Fp32)
            && matches!(self.index_strides(param, index)?, Some([_, 1]))
        {
            return self.store_pairs(param, (index, mask), value, &shape, layout);
        }
        if self.shape(value)? == shape {
            if let Some(Layout::Vec { .. }) =
                self.vector_layout(param, (index, mask), value, &shape)?
            {
                return self.store_vectors(param, (index, mask), value, &shape);
            }
        }
        let vs = self.shape(value)?;
        let n: i64 = shape.iter().product();
        self.for_slots(&shape, layout, |l, _, coord, valid| {
            let (addr, x, guard) =
                l.store_slot((param, index, mask), (value, &vs), n, coord, valid)?;
            let src = match dtype {
                Dtype::Bf16 | Dtype::Fp16 | Dtype::Bool | Dtype::Fp8E4m3 | Dtype::Fp8E5m2 => {
                    l.to_storage(x, dtype)?.0
                }
                Dtype::Uint8 | Dtype::Int8 | Dtype::Int16 => l.convert(x, Ty::S32)?,
                _ => l.convert(x, mty)?,
            };
            l.f.push(Inst::St {
                space: Space::Global,
                ty: mty,
                addr: Addr::Reg(addr, 0),
                src: Operand::Reg(src),
                guard: guard.map(|pred| Guard {
                    pred,
                    negated: false,
                }),
            });
            Ok(())
        })
    }

    /// One element of a store or atomic of `n` elements at `coord`: its
    /// address, the value (of shape `vs`, broadcast), and its guard: the
    /// slot's validity narrowed to one writer, the access's bounds and
    /// mask.
    fn store_slot(
        &mut self,
        (param, index, mask): (usize, &[Value], Option<Value>),
        (value, vs): (Value, &[i64]),
        n: i64,
        coord: &[C],
        valid: Option<Reg>,
    ) -> R<(Reg, Reg, Option<Reg>)> {
        let valid = self.writer_guard(n, valid);
        let (addr, ok) = self.access(param, index, mask, coord)?;
        let x = self.elem(value, &Self::bcast(coord, vs))?;
        let guard = match (ok, valid) {
            (Some(a), Some(b)) => Some(self.f.pred_op(Some(BinOp::And), a, b)),
            (a, b) => a.or(b),
        };
        Ok((addr, x, guard))
    }

    /// The shape a store writes: its index tiles, mask and value
    /// broadcast together.
    fn access_shape(&self, index: &[Value], mask: Option<Value>, value: Value) -> R<Vec<i64>> {
        let mut shape: Vec<i64> = Vec::new();
        for v in index.iter().copied().chain(mask).chain([value]) {
            let s = self.shape(v)?;
            let rank = shape.len().max(s.len());
            let mut out = vec![1; rank];
            for (j, o) in out.iter_mut().enumerate() {
                let a = (j + shape.len())
                    .checked_sub(rank)
                    .map(|i| shape[i])
                    .unwrap_or(1);
                let b = (j + s.len()).checked_sub(rank).map(|i| s[i]).unwrap_or(1);
                *o = a.max(b);
            }
            shape = out;
        }
        Ok(shape)
    }

    /// An atomic store (`atomic_add`, `atomic_max`, `atomic_min`): one
    /// `red.global` per element, each element by exactly one thread (a
    /// flat layout: a value's own layout may hold an element in several
    /// lanes, which would combine it more than once). Float maximum and
    /// minimum have no `red`: they combine the bits as integers, signed
    /// where the value is at least +0 and unsigned (the other way round)
    /// where its sign bit is set, which orders IEEE values.
    pub(super) fn atomic(
        &mut self,
        param: usize,
        (index, mask): (&[Value], Option<Value>),
        value: Value,
        c: Combine,
    ) -> R<()> {
        if c == Combine::Prod {
            return Err("an atomic product (the verifier rejects it)".into());
        }
        let shape = self.access_shape(index, mask, value)?;
        let dtype = self.k.params[param].dtype;
        let (int, float) = match dtype {
            Dtype::Int32 => (Ty::S32, None),
            Dtype::Int64 => (Ty::S64, None),
            Dtype::Fp32 => (Ty::S32, Some(Ty::F32)),
            Dtype::Fp64 => (Ty::S64, Some(Ty::F64)),
            d => return Err(format!("atomics on `{d}` tensors").into()),
        };
        let unsigned = if int == Ty::S32 { Ty::U32 } else { Ty::U64 };
        self.f.push(Inst::Comment(format!(
            "atomic_{} {}",
            c.name(),
            self.k.params[param].name
        )));
        let vs = self.shape(value)?;
        let n: i64 = shape.iter().product();
        self.for_slots(&shape, Layout::Flat, |l, _, coord, valid| {
            let (addr, x, guard) =
                l.store_slot((param, index, mask), (value, &vs), n, coord, valid)?;
            let red = |l: &mut Self, op: RedOp, ty: Ty, src: Reg, pred: Option<Reg>| {
                l.f.push(Inst::Red {
                    op,
                    ty,
                    addr: Addr::Reg(addr, 0),
                    src,
                    guard: pred.map(|pred| Guard {
                        pred,
                        negated: false,
                    }),
                });
            };
            match (c, float) {
                (Combine::Prod, _) => {}
                (Combine::Sum, Some(fty)) => {
                    let src = l.convert(x, fty)?;
                    red(l, RedOp::Add, fty, src, guard);
                }
                (Combine::Sum, None) => {
                    let src = l.convert(x, int)?;
                    red(l, RedOp::Add, unsigned, src, guard);
                }
                (Combine::Max | Combine::Min, None) => {
                    let src = l.convert(x, int)?;
                    let op = if c == Combine::Max {
                        RedOp::Max
                    } else {
                        RedOp::Min
                    };
                    red(l, op, int, src, guard);
                }
                (Combine::Max | Combine::Min, Some(fty)) => {
                    let src = l.convert(x, fty)?;
                    let bits = l.f.reg(if fty == Ty::F64 { Ty::B64 } else { Ty::B32 });
                    l.f.push(Inst::Mov {
                        dst: bits,
                        src: Operand::Reg(src),
                    });
                    let neg = l.f.setp(Cmp::Lt, int, bits, Operand::Int(0));
                    let pos = l.f.pred_op(None, neg, neg);
                    let (on_pos, on_neg) = if c == Combine::Max {
                        (RedOp::Max, RedOp::Min)
                    } else {
                        (RedOp::Min, RedOp::Max)
                    };
                    let both = |l: &mut Self, p: Reg| match guard {
                        Some(g) => l.f.pred_op(Some(BinOp::And), g, p),
                        None => p,
                    };
                    let gp = both(l, pos);
                    red(l, on_pos, int, bits, Some(gp));
                    let gn = both(l, neg);
                    red(l, on_neg, unsigned, bits, Some(gn));
                }
            }
            Ok(())
        })
    }

    /// `assert c`: each thread traps at an element of its slots where `c`
    /// is false.
    pub(super) fn assert(&mut self, c: Value, check: tessera_tile::Check) -> R<()> {
        let shape = self.shape(c)?;
        // What a failure means, for the simulator's report (the trap
        // itself says nothing).
        self.f.push(Inst::Comment(format!(
            "{ASSERT_COMMENT}{}",
            check.failure()
        )));
        self.for_slots(&shape, Layout::Flat, |l, _, coord, valid| {
            let ok = l.elem(c, coord)?;
            let ok = l.f.cvt(Ty::Pred, ok);
            let ok = match valid {
                Some(v) => {
                    let outside = l.f.pred_op(None, v, v);
                    l.f.pred_op(Some(BinOp::Or), ok, outside)
                }
                None => ok,
            };
            l.f.push(Inst::Trap {
                guard: Guard {
                    pred: ok,
                    negated: true,
                },
            });
            Ok(())
        })
    }

    /// Makes `v` readable at any coordinate: a copy of a distributed value
    /// goes to shared memory now (before a loop reads it). The value keeps
    /// its registers: later elementwise users still read them in place.
    fn readable(&mut self, v: Value) -> R<()> {
        if let Val::Dist(..) = self.val(v)? {
            self.to_shared(v, None)?;
        }
        Ok(())
    }

    /// A counted loop `for i in 0..n` around `body`, which receives `i`.
    pub(super) fn counted_loop(
        &mut self,
        n: i64,
        mut body: impl FnMut(&mut Self, Reg) -> R<()>,
    ) -> R<()> {
        let i = self.f.mov(Ty::S64, Operand::Int(0));
        let top = self.f.label();
        self.f.push(Inst::Label(top));
        self.memo.clear();
        body(self, i)?;
        self.memo.clear();
        let next = self.f.bin(BinOp::Add, Ty::S64, i, Operand::Int(1));
        self.f.push(Inst::Mov {
            dst: i,
            src: Operand::Reg(next),
        });
        let more = self.f.setp(Cmp::Lt, Ty::S64, i, Operand::Int(n));
        self.f.push(Inst::Bra {
            target: top,
            guard: Some(Guard {
                pred: more,
                negated: false,
            }),
        });
        Ok(())
    }

    /// `reduce`: each result element combines its row in increasing order.
    pub(super) fn reduce(
        &mut self,
        inst: &'k TInst,
        combine: Combine,
        value: Value,
        axis: usize,
    ) -> R<()> {
        let v = inst.results[0];
        let policy = match &inst.op {
            TOp::Reduce { policy, .. } => *policy,
            _ => Policy::Deterministic,
        };
        let ty = self.rty(v);
        let kahan = policy == Policy::KahanSum && combine == Combine::Sum && ty.is_float();
        // A deterministic float sum takes the one order every backend
        // shares (`deterministic_sum`), not the layouts' own trees.
        let det = policy == Policy::Deterministic && combine == Combine::Sum && ty.is_float();
        if let Some(wm) = self.quad_rows(value, axis) {
            if !kahan && !det && matches!(ty, Ty::F32 | Ty::S32 | Ty::U32) {
                return self.reduce_rows(v, value, combine, wm);
            }
        }
        if !kahan && !det && self.reduce_held(v, value, combine)? {
            return Ok(());
        }
        self.readable(value)?;
        let shape = self.shape(v)?;
        let vshape = self.shape(value)?;
        let len = vshape[axis];
        let n: i64 = shape.iter().product();
        self.f.push(Inst::Comment(format!(
            "{v} = reduce_{} axis {axis}",
            combine.name()
        )));
        let dtype = self.k.ty(v).dtype;
        // Fewer results than threads: several threads share each result.
        let g = if n < self.threads && matches!(ty, Ty::F32 | Ty::S32 | Ty::U32) && len > 1 {
            let per = self.threads / n;
            1i64 << (63 - per.leading_zeros())
        } else {
            1
        };
        let g = if det { g.min(32) } else { g };
        if g >= 2 {
            return self.reduce_parallel(super::reduce::Plan {
                v,
                value,
                axis,
                combine,
                kahan,
                det,
                ty,
                shape,
                n,
                len,
                g,
            });
        }
        let mut regs = Vec::new();
        let saved = self.cur.take();
        for s in 0..self.slots(n, Layout::Flat) {
            let (coord, _) = self.slot_coords(&shape, Layout::Flat, s);
            if det {
                let r = self.deterministic_sum(value, axis, &coord, len, ty, 1, None)?;
                regs.push(self.round(dtype, r)?);
                continue;
            }
            // The identity in the register's own width (an int32 maximum
            // starts from i32::MIN, not i64::MIN, whose low bits are 0).
            let acc = self.f.mov(ty, Self::identity(combine, ty));
            let comp = self.f.mov(ty, Operand::Int(0));
            self.counted_loop(len, |l, i| {
                let mut c = coord.clone();
                c.insert(axis, C::R(i));
                let x = l.elem(value, &c)?;
                let x = l.convert(x, ty)?;
                if kahan {
                    l.kahan_step(ty, acc, comp, x);
                    return Ok(());
                }
                let op = combine_op(combine);
                let r = l.f.bin(op, ty, acc, x);
                l.f.push(Inst::Mov {
                    dst: acc,
                    src: Operand::Reg(r),
                });
                Ok(())
            })?;
            if kahan {
                // Fold in the compensation (the negated lost low-order part).
                let r = self.f.bin(BinOp::Sub, ty, acc, comp);
                self.f.push(Inst::Mov {
                    dst: acc,
                    src: Operand::Reg(r),
                });
            }
            regs.push(self.round(dtype, acc)?);
        }
        self.cur = saved;
        self.vals[v.index()] = Some(Val::Dist(regs, Layout::Flat));
        Ok(())
    }

    /// One compensated addition: `sum += x` with compensation `comp` (the
    /// negated low-order part: the running sum is `sum - comp`), in place,
    /// the step of every backend (the CPU's `tile::reduction::kahan_step`):
    /// `sum + x` and its exact error by TwoSum (whichever is larger), with
    /// the old low part, renormalised by TwoSum into the new pair; a sum no
    /// longer finite stays what it is.
    pub(super) fn kahan_step(&mut self, ty: Ty, sum: Reg, comp: Reg, x: Reg) {
        let (t, e) = self.two_sum(ty, sum, x);
        let low = self.f.bin(BinOp::Sub, ty, e, comp);
        let (s2, e2) = self.two_sum(ty, t, low);
        let finite = self.finite(ty, t);
        let s = self.f.selp(ty, finite, s2, t);
        let k = self.f.un(UnOp::Neg, ty, e2);
        let k = self.f.selp(ty, finite, k, Operand::Float(0.0));
        self.f.push(Inst::Mov {
            dst: comp,
            src: Operand::Reg(k),
        });
        self.f.push(Inst::Mov {
            dst: sum,
            src: Operand::Reg(s),
        });
    }

    /// Whether `x` is finite (a predicate; false for NaN too).
    pub(super) fn finite(&mut self, ty: Ty, x: Reg) -> Reg {
        let ax = self.f.un(UnOp::Abs, ty, x);
        self.f.setp(Cmp::Lt, ty, ax, Operand::Float(f64::INFINITY))
    }

    /// `a + b` and its rounding error, exactly (Knuth's TwoSum).
    pub(super) fn two_sum(&mut self, ty: Ty, a: Reg, b: Reg) -> (Reg, Reg) {
        let s = self.f.bin(BinOp::Add, ty, a, b);
        let bb = self.f.bin(BinOp::Sub, ty, s, a);
        let sa = self.f.bin(BinOp::Sub, ty, s, bb);
        let ea = self.f.bin(BinOp::Sub, ty, a, sa);
        let eb = self.f.bin(BinOp::Sub, ty, b, bb);
        (s, self.f.bin(BinOp::Add, ty, ea, eb))
    }

    /// `KahanAdd`, elementwise.
    pub(super) fn kahan(&mut self, inst: &'k TInst, sum: Value, comp: Value, x: Value) -> R<()> {
        let (rs, rc) = (inst.results[0], inst.results[1]);
        let shape = self.shape(rs)?;
        let ty = self.rty(rs);
        let layout = self.layout_of(sum);
        let (mut sums, mut comps) = (Vec::new(), Vec::new());
        let (ss, sc, sx) = (self.shape(sum)?, self.shape(comp)?, self.shape(x)?);
        self.for_slots(&shape, layout, |l, _, coord, _| {
            let a = l.elem(sum, &Self::bcast(coord, &ss))?;
            let c = l.elem(comp, &Self::bcast(coord, &sc))?;
            let xv = l.elem(x, &Self::bcast(coord, &sx))?;
            let xv = l.convert(xv, ty)?;
            let acc = l.f.mov(ty, Operand::Reg(a));
            let cc = l.f.mov(ty, Operand::Reg(c));
            l.kahan_step(ty, acc, cc, xv);
            sums.push(acc);
            comps.push(cc);
            Ok(())
        })?;
        self.vals[rs.index()] = Some(Val::Dist(sums, layout));
        self.vals[rc.index()] = Some(Val::Dist(comps, layout));
        Ok(())
    }

    /// `dot`: every result element sums its products in increasing `k`,
    /// fused multiply-adds in the accumulator's type.
    pub(super) fn dot(&mut self, inst: &'k TInst, a: Value, b: Value, acc: Value) -> R<()> {
        let v = inst.results[0];
        let shape = self.shape(v)?;
        let sa = self.shape(a)?;
        let rank = shape.len();
        if rank < 2 {
            return Err("dot of tiles of rank below 2".into());
        }
        let kdim = sa[rank - 1];
        let ty = self.rty(v);
        let n: i64 = shape.iter().product();
        self.f
            .push(Inst::Comment(format!("{v} = dot {a}, {b}, {acc}")));
        let tf32 = matches!(inst.op, TOp::Dot { tf32: true, .. });
        if let Some(layout) = self.mma_layout(v, a, b, tf32) {
            // The tensor-core path decides where its operands come from.
            if self.wgmma_dot(v, (a, b, acc), layout, tf32)? {
                return Ok(());
            }
            return self.mma_dot(v, (a, b, acc), layout, tf32);
        }
        self.readable(a)?;
        self.readable(b)?;
        let _ = n;
        let accs = self.slot_values(acc, Layout::Flat)?;
        let accs: Vec<Reg> = accs
            .into_iter()
            .map(|r| {
                let r = self.convert(r, ty)?;
                Ok(self.f.mov(ty, Operand::Reg(r)))
            })
            .collect::<R<_>>()?;
        let ta = self.reg_ty_of(a);
        // Coordinates are recomputed inside the loop (cheap integer work)
        // rather than kept live across it next to the accumulators.
        self.counted_loop(kdim, |l, kk| {
            for (s, r) in accs.iter().enumerate() {
                let (c, _) = l.slot_coords(&shape, Layout::Flat, s as i64);
                let mut ca = c.clone();
                ca[rank - 1] = C::R(kk);
                let mut cb = c;
                cb[rank - 2] = C::R(kk);
                let x = l.elem(a, &ca)?;
                let y = l.elem(b, &cb)?;
                let (x, y) = if ta != ty {
                    (l.convert(x, ty)?, l.convert(y, ty)?)
                } else {
                    (x, y)
                };
                // Without tensor cores, tf32 operands are still rounded.
                let (x, y) = if tf32 && ty == Ty::F32 {
                    let (bx, by) = (l.tf32(x), l.tf32(y));
                    (
                        l.f.mov(Ty::F32, Operand::Reg(bx)),
                        l.f.mov(Ty::F32, Operand::Reg(by)),
                    )
                } else {
                    (x, y)
                };
                let m = l.f.fma(ty, x, y, *r);
                l.f.push(Inst::Mov {
                    dst: *r,
                    src: Operand::Reg(m),
                });
            }
            Ok(())
        })?;
        // An accumulator narrower than fp32 (`numerics aggressive`: bf16)
        // is rounded after each dot, as every backend does.
        let dtype = self.k.ty(v).dtype;
        let accs = accs
            .into_iter()
            .map(|r| self.round(dtype, r))
            .collect::<R<Vec<_>>>()?;
        self.vals[v.index()] = Some(Val::Dist(accs, Layout::Flat));
        Ok(())
    }

    /// A `for` loop with carried values.
    pub(super) fn for_loop(
        &mut self,
        inst: &'k TInst,
        lo: Value,
        hi: Value,
        step: Value,
        init: &[Value],
        body: &'k Block,
    ) -> R<()> {
        let lo = self.elem(lo, &[])?;
        let hi = self.elem(hi, &[])?;
        let step = self.elem(step, &[])?;
        let ivty = self.f.ty(lo);
        let iv = self.f.mov(ivty, Operand::Reg(lo));
        // Carried values live in registers per slot, in the layout the
        // loop body will yield them in.
        let yields = match body.insts.last().map(|i| &i.op) {
            Some(TOp::Yield(vs)) => vs.clone(),
            _ => Vec::new(),
        };
        let mut layouts = Vec::new();
        let mut phis: Vec<Vec<Reg>> = Vec::new();
        for (k, v) in init.iter().enumerate() {
            let layout = yields
                .get(k)
                .map(|y| self.predict_layout(body, *y))
                .unwrap_or(Layout::Flat);
            let regs = self.slot_values(*v, layout)?;
            let ty = self.rty(*v);
            phis.push(
                regs.into_iter()
                    .map(|r| self.f.mov(ty, Operand::Reg(r)))
                    .collect(),
            );
            layouts.push(layout);
        }
        // Shared memory the loop allocates (its pipeline's ring, spills,
        // tiles staged without a pipeline) is free again after it: a
        // following loop (causal attention's masked diagonal) reuses it.
        let shared_mark = self.shared_top;
        let depth = self.plan_pipeline(body, iv, hi, step)?;
        let pipelined = depth > 0;
        let invariant = (0..self.vals.len())
            .map(|i| Value(i as u32))
            .filter(|v| matches!(self.vals[v.index()], Some(Val::Shared(_))))
            .filter(|v| self.stored(*v).is_none_or(|st| st.ring.is_none()))
            .collect();
        self.loops.push(LoopScope {
            preheader: self.f.body.len(),
            invariant,
            frags: Default::default(),
        });
        let (top, exit) = (self.f.label(), self.f.label());
        self.f.loop_test(top, exit, (ivty, iv, hi));
        let saved = self.spilled.clone();
        let saved_free = self.free_spills.clone();
        self.memo.clear();
        if let Some(a) = body.args.first() {
            self.vals[a.index()] = Some(Val::Uniform(iv));
        }
        for ((a, p), l) in body.args.iter().skip(1).zip(&phis).zip(&layouts) {
            self.vals[a.index()] = Some(Val::Dist(p.clone(), *l));
        }
        self.block(body)?;
        let mut news = Vec::new();
        for (y, l) in yields.iter().zip(&layouts) {
            let regs = self.slot_values(*y, *l)?;
            let ty = self.rty(*y);
            news.push(
                regs.into_iter()
                    .map(|r| self.f.mov(ty, Operand::Reg(r)))
                    .collect::<Vec<_>>(),
            );
        }
        for (p, n) in phis.iter().zip(&news) {
            for (d, s) in p.iter().zip(n) {
                self.f.push(Inst::Mov {
                    dst: *d,
                    src: Operand::Reg(*s),
                });
            }
        }
        self.loops.pop();
        let next = self.f.bin(BinOp::Add, ivty, iv, step);
        self.f.push(Inst::Mov {
            dst: iv,
            src: Operand::Reg(next),
        });
        self.advance_ring();
        self.f.loop_back(top, exit);
        let specialised = self.pipe.take().is_some_and(|p| p.ws.is_some());
        if pipelined {
            // Nothing is in flight past the last trip, but the groups
            // committed empty still count. Every warp is done reading the
            // ring before anything after the loop refills it.
            if !specialised {
                self.f.push(Inst::CpAsyncWait(0));
            }
            self.f.push(Inst::Barrier);
        }
        self.spilled = saved;
        // Regions the body freed lie above the mark, which is reset below.
        self.free_spills = saved_free;
        // A specialised loop's ring stays its own: the producer may be
        // filling the next loop's while consumers finish this one.
        if !specialised {
            self.shared_top = shared_mark;
        }
        self.memo.clear();
        for ((r, p), l) in inst.results.iter().zip(phis).zip(layouts) {
            self.vals[r.index()] = Some(Val::Dist(p, l));
        }
        Ok(())
    }

    /// `if` on a boolean scalar: a branch around each arm, whose yields
    /// meet in the results' registers. The condition is the same in every
    /// thread of a block (the checker admits scalars: program ids,
    /// parameters, loaded and reduced values), so barriers inside an arm
    /// are met by all. What lowering an arm learns of earlier values (a
    /// copy to shared memory, a lazy element computed) is forgotten at its
    /// end: it holds on that path only.
    pub(super) fn if_else(
        &mut self,
        inst: &'k TInst,
        cond: Value,
        then: &'k Block,
        els: &'k Block,
    ) -> R<()> {
        let c = self.elem(cond, &[])?;
        let c = self.f.cvt(Ty::Pred, c);
        let yields = |b: &Block| match b.insts.last().map(|i| &i.op) {
            Some(TOp::Yield(vs)) => vs.clone(),
            _ => Vec::new(),
        };
        let (ythen, yels) = (yields(then), yields(els));
        let layouts: Vec<Layout> = ythen
            .iter()
            .map(|y| self.predict_layout(then, *y))
            .collect();
        let (other, end) = (self.f.label(), self.f.label());
        self.f.push(Inst::Bra {
            target: other,
            guard: Some(Guard {
                pred: c,
                negated: true,
            }),
        });
        let saved = (
            self.vals.clone(),
            self.spilled.clone(),
            self.spill_bytes.clone(),
            self.free_spills.clone(),
            self.shared_top,
        );
        let restore = |l: &mut Self| {
            l.vals = saved.0.clone();
            l.spilled = saved.1.clone();
            l.spill_bytes = saved.2.clone();
            l.free_spills = saved.3.clone();
            l.shared_top = saved.4;
            l.memo.clear();
        };
        restore(self);
        self.block(then)?;
        let mut outs: Vec<Vec<Reg>> = Vec::new();
        for (y, l) in ythen.iter().zip(&layouts) {
            let regs = self.slot_values(*y, *l)?;
            let ty = self.rty(*y);
            outs.push(
                regs.into_iter()
                    .map(|r| self.f.mov(ty, Operand::Reg(r)))
                    .collect(),
            );
        }
        self.f.push(Inst::Bra {
            target: end,
            guard: None,
        });
        self.f.push(Inst::Label(other));
        restore(self);
        self.block(els)?;
        for ((y, l), out) in yels.iter().zip(&layouts).zip(&outs) {
            let regs = self.slot_values(*y, *l)?;
            if regs.len() != out.len() {
                return Err("the arms of an `if` yield tiles of different sizes".into());
            }
            for (d, r) in out.iter().zip(regs) {
                let ty = self.f.ty(*d);
                let r = self.convert(r, ty)?;
                self.f.push(Inst::Mov {
                    dst: *d,
                    src: Operand::Reg(r),
                });
            }
        }
        self.f.push(Inst::Label(end));
        restore(self);
        for ((r, regs), l) in inst.results.iter().zip(outs).zip(layouts) {
            self.vals[r.index()] = Some(Val::Dist(regs, l));
        }
        Ok(())
    }
}

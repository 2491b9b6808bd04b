//! Wide global accesses.
//!
//! A store of an accumulator tile whose columns are contiguous in memory
//! writes each lane's two adjacent columns of a fragment row at once (one
//! 4-byte store of a bf16/fp16 pair, or a `v2.f32`).
//!
//! A store of a lazily computed fp32 tile whose elements are contiguous in
//! memory along the tile's last axis goes out in the `Vec` layout: each
//! thread holds four consecutive elements of a row per group of slots, and
//! writes them with one `st.global.v4.f32`. The fp32 loads the stored value
//! is computed from, with the same contiguity, come in the same way
//! (`ld.global.v4.f32`), before the group's elements are computed. Row
//! reductions whose operand is computed from such loads fold four
//! consecutive elements per step, loaded the same way (see `reduce.rs`).
//! Only where the kernel's schedule allows vectors of four or more
//! (`vectorize`: 4 by default, 1 in a schedule that does not say). The
//! index must be affine in the coordinates and the masks conjunctions of
//! affine comparisons (see `stage.rs`), so that consecutive elements are
//! all in bounds when the first and the last are.
//!
//! Every wide access happens where the group is whole (in bounds, aligned
//! to its size); elsewhere (a ragged edge, an odd row) the elements move
//! one by one.

use super::{Layout, Lower, Val, C, R};
use crate::ir::*;
use tessera_core::Dtype;
use tessera_tile::{TOp, Value};

/// Elements per vector access (16 bytes of fp32).
pub(super) const V: i64 = 4;

impl<'k> Lower<'k> {
    /// Whether an access to `param` through `index` (masked by `mask`) of
    /// a tile of `shape` can move four consecutive elements at once.
    pub(super) fn vectorizable(
        &self,
        param: usize,
        index: &[Value],
        mask: Option<Value>,
        shape: &[i64],
    ) -> R<bool> {
        let Some(last) = shape.last() else {
            return Ok(false);
        };
        if self.k.params[param].dtype != Dtype::Fp32
            || i64::from(self.k.vectorize) < V
            || last % V != 0
            || mask.is_some_and(|m| !self.convex(m))
        {
            return Ok(false);
        }
        Ok(self
            .index_strides_n(param, index, shape.len())?
            .is_some_and(|s| s.last() == Some(&1)))
    }

    /// The `Vec` layout for a store of `value` (of `shape`, covering the
    /// store) to `param`, when it applies (see the module docs).
    pub(super) fn vector_layout(
        &self,
        param: usize,
        (index, mask): (&[Value], Option<Value>),
        value: Value,
        shape: &[i64],
    ) -> R<Option<Layout>> {
        let n: i64 = shape.iter().product();
        let held = matches!(
            self.vals[value.index()],
            Some(Val::Lazy) | Some(Val::Dist(_, Layout::Vec { v: V }))
        );
        if !held || n < V * self.threads || !self.vectorizable(param, index, mask, shape)? {
            return Ok(None);
        }
        Ok(Some(Layout::Vec { v: V }))
    }

    /// Reads load `inst` into registers once (its tile is used more than
    /// once): four consecutive elements per thread with vector loads where
    /// the access allows (the `Vec` layout), else the flat layout.
    pub(super) fn materialise_load(&mut self, inst: &'k tessera_tile::Inst) -> R<()> {
        let v = inst.results[0];
        self.defs.insert(v, inst);
        self.vals[v.index()] = Some(Val::Lazy);
        let shape = self.shape(v)?;
        let n: i64 = shape.iter().product();
        let Some((param, index, mask, _)) = self.load_of(v) else {
            return self.materialise_op(inst);
        };
        if n < V * self.threads || !self.vectorizable(param, index, mask, &shape)? {
            return self.materialise_op(inst);
        }
        let layout = Layout::Vec { v: V };
        let saved = self.cur.take();
        let mut regs = Vec::new();
        for group in 0..self.slots(n, layout) / V {
            let coords: Vec<Vec<C>> = (0..V)
                .map(|k| self.slot_coords(&shape, layout, group * V + k).0)
                .collect();
            self.memo.clear();
            self.load_vector(v, &coords)?;
            for c in &coords {
                let r = self.vec_loads.get(&(v, c.clone())).copied();
                regs.push(r.ok_or("internal error: a vector load without its element")?);
            }
            self.vec_loads.clear();
        }
        self.memo.clear();
        self.cur = saved;
        self.vals[v.index()] = Some(Val::Dist(regs, layout));
        Ok(())
    }

    /// Stores `value` in the `Vec` layout (see the module docs).
    pub(super) fn store_vectors(
        &mut self,
        param: usize,
        (index, mask): (&[Value], Option<Value>),
        value: Value,
        shape: &[i64],
    ) -> R<()> {
        let layout = Layout::Vec { v: V };
        let n: i64 = shape.iter().product();
        let vs = self.shape(value)?;
        let loads = self.vector_loads(value, shape);
        // Groups start at multiples of V along the last axis.
        let aligned = self.proves_aligned(param, index, shape.len(), shape.len() - 1, V)?;
        let saved = self.cur.take();
        for group in 0..self.slots(n, layout) / V {
            let slots: Vec<(Vec<C>, Option<Reg>)> = (0..V)
                .map(|k| self.slot_coords(shape, layout, group * V + k))
                .collect();
            let coords: Vec<Vec<C>> = slots.iter().map(|(c, _)| c.clone()).collect();
            let valid = slots[0].1;
            self.memo.clear();
            for l in &loads {
                self.load_vector(*l, &coords)?;
            }
            let mut xs = Vec::new();
            for (k, coord) in coords.iter().enumerate() {
                self.cur = Some((
                    shape.to_vec(),
                    layout,
                    coord.clone(),
                    (group * V) as usize + k,
                ));
                self.memo.clear();
                let x = self.elem(value, &Self::bcast(coord, &vs))?;
                xs.push(self.convert(x, Ty::F32)?);
            }
            self.memo.clear();
            let mut at = Vec::new();
            for c in &coords {
                at.push(self.access(param, index, mask, c)?);
            }
            self.store_group(Dtype::Fp32, &at, &xs, valid, aligned)?;
            self.vec_loads.clear();
        }
        self.cur = saved;
        self.memo.clear();
        Ok(())
    }

    /// Whether `bytes` from `addr` move at once: the address is aligned
    /// to them (tested unless `aligned` says it is proven) and every
    /// predicate in `oks` holds. `None`: always.
    pub(super) fn whole(
        &mut self,
        addr: Reg,
        bytes: i64,
        aligned: bool,
        oks: impl IntoIterator<Item = Option<Reg>>,
    ) -> Option<Reg> {
        let mut fast = None;
        if !aligned {
            let low = self
                .f
                .bin(BinOp::And, Ty::U64, addr, Operand::Int(bytes - 1));
            fast = Some(self.f.setp(Cmp::Eq, Ty::U64, low, Operand::Int(0)));
        }
        for ok in oks.into_iter().flatten() {
            fast = Some(match fast {
                Some(f) => self.f.pred_op(Some(BinOp::And), f, ok),
                None => ok,
            });
        }
        fast
    }

    /// Stores `xs` (f32 registers, consecutive elements of `dtype`: fp32,
    /// or an even number of bf16/fp16) at the addresses and in-bounds
    /// predicates `at` (from [`Lower::access`]), where `valid` holds: at
    /// once where the group is whole, element by element elsewhere
    /// (nowhere when `aligned` proves the address aligned and nothing
    /// guards the group).
    fn store_group(
        &mut self,
        dtype: Dtype,
        at: &[(Reg, Option<Reg>)],
        xs: &[Reg],
        valid: Option<Reg>,
        aligned: bool,
    ) -> R<()> {
        let guard = |pred| {
            Some(Guard {
                pred,
                negated: false,
            })
        };
        let width = i64::from(super::ops::mem_ty(dtype)?.bytes());
        let (a0, ok0) = at[0];
        let last = at[at.len() - 1].1;
        let fast = self.whole(a0, width * xs.len() as i64, aligned, [ok0, last, valid]);
        // The group as 32-bit words: fp32 elements, or packed 16-bit pairs.
        let (ty, words) = match dtype {
            Dtype::Fp32 => (Ty::F32, xs.to_vec()),
            Dtype::Bf16 | Dtype::Fp16 => {
                let fmt = if dtype == Dtype::Bf16 {
                    Fmt::Bf16
                } else {
                    Fmt::F16
                };
                let words = xs
                    .chunks(2)
                    .map(|p| {
                        let dst = self.f.reg(Ty::B32);
                        self.f.push(Inst::CvtPack {
                            fmt,
                            dst,
                            hi: p[1],
                            lo: p[0],
                        });
                        dst
                    })
                    .collect();
                (Ty::B32, words)
            }
            d => return Err(format!("internal error: a grouped store of {d}")),
        };
        let addr = Addr::Reg(a0, 0);
        self.f.push(match &words[..] {
            [w] => Inst::St {
                space: Space::Global,
                ty,
                addr,
                src: Operand::Reg(*w),
                guard: fast.and_then(guard),
            },
            _ => Inst::StV {
                space: Space::Global,
                ty,
                addr,
                src: words,
                guard: fast.and_then(guard),
            },
        });
        let Some(fast) = fast else {
            return Ok(());
        };
        let slow = self.f.pred_op(None, fast, fast);
        for ((a, ok), x) in at.iter().zip(xs) {
            let mut pred = slow;
            for p in [*ok, valid].into_iter().flatten() {
                pred = self.f.pred_op(Some(BinOp::And), pred, p);
            }
            let (src, ty) = self.to_storage(*x, dtype)?;
            self.f.push(Inst::St {
                space: Space::Global,
                ty,
                addr: Addr::Reg(*a, 0),
                src: Operand::Reg(src),
                guard: guard(pred),
            });
        }
        Ok(())
    }

    /// The store of an accumulator tile (`layout` is `Mma`) whose columns
    /// are contiguous in memory: each lane's two adjacent columns of a
    /// fragment row go out together (see the module docs).
    pub(super) fn store_pairs(
        &mut self,
        param: usize,
        (index, mask): (&[Value], Option<Value>),
        value: Value,
        shape: &[i64],
        layout: Layout,
    ) -> R<()> {
        let dtype = self.k.params[param].dtype;
        let regs = self.slot_values(value, layout)?;
        // Pairs start at even columns.
        let aligned = self.proves_aligned(param, index, 2, 1, 2)?;
        let saved = self.cur.take();
        for s in (0..regs.len()).step_by(2) {
            let mut at = Vec::new();
            let mut xs = Vec::new();
            for k in 0..2 {
                let (coord, _) = self.slot_coords(shape, layout, (s + k) as i64);
                self.memo.clear();
                at.push(self.access(param, index, mask, &coord)?);
                xs.push(self.convert(regs[s + k], Ty::F32)?);
            }
            self.store_group(dtype, &at, &xs, None, aligned)?;
        }
        self.cur = saved;
        self.memo.clear();
        Ok(())
    }

    /// The lazy loads `value` is computed from (through elementwise
    /// operations) that can load four elements of a row at once: the same
    /// last extent as the stored tile, contiguous along it.
    pub(super) fn vector_loads(&self, value: Value, shape: &[i64]) -> Vec<Value> {
        let mut out = Vec::new();
        let mut stack = vec![value];
        while let Some(v) = stack.pop() {
            if out.contains(&v) || !matches!(self.vals[v.index()], Some(Val::Lazy)) {
                continue;
            }
            let Some(inst) = self.defs.get(&v) else {
                continue;
            };
            match &inst.op {
                TOp::Load {
                    param, index, mask, ..
                } => {
                    let ok = self.shapes[v.index()].as_deref().is_some_and(|s| {
                        s.last() == shape.last()
                            && self.vectorizable(*param, index, *mask, s).unwrap_or(false)
                    });
                    if ok {
                        out.push(v);
                    }
                }
                TOp::Unary(..) | TOp::Binary(..) | TOp::Select(..) | TOp::Cast(_) => {
                    stack.extend(inst.op.operands());
                }
                _ => {}
            }
        }
        out
    }

    /// Loads the four elements of lazy load `l` at the group's `coords`
    /// (of the stored tile) at once where whole, element by element
    /// elsewhere, and records them for [`Lower::elem`].
    pub(super) fn load_vector(&mut self, l: Value, coords: &[Vec<C>]) -> R<()> {
        let Some((param, index, mask, other)) = self.load_of(l) else {
            return Ok(());
        };
        let sl = self.shape(l)?;
        let at: Vec<Vec<C>> = coords.iter().map(|c| Self::bcast(c, &sl)).collect();
        let mut access = Vec::new();
        for c in &at {
            access.push(self.access(param, index, mask, c)?);
        }
        let raw: Vec<Reg> = (0..V)
            .map(|_| self.f.mov(Ty::F32, Operand::Int(0)))
            .collect();
        let (a0, ok0) = access[0];
        let aligned = self.proves_aligned(param, index, sl.len(), sl.len() - 1, V)?;
        let fast = self.whole(a0, 4 * V, aligned, [ok0, access[V as usize - 1].1]);
        self.f.push(Inst::LdV {
            space: Space::Global,
            ty: Ty::F32,
            dst: raw.clone(),
            addr: Addr::Reg(a0, 0),
            guard: fast.map(|pred| Guard {
                pred,
                negated: false,
            }),
        });
        let Some(fast) = fast else {
            // Proven whole: the four elements are the vector's.
            for (c, r) in at.into_iter().zip(raw) {
                self.vec_loads.insert((l, c), r);
            }
            return Ok(());
        };
        let slow = self.f.pred_op(None, fast, fast);
        let other = self.f.mov(Ty::F32, Operand::Float(other));
        for ((c, (a, ok)), r) in at.into_iter().zip(access).zip(raw) {
            let pred = match ok {
                Some(ok) => self.f.pred_op(Some(BinOp::And), slow, ok),
                None => slow,
            };
            self.f.push(Inst::Ld {
                space: Space::Global,
                ty: Ty::F32,
                dst: r,
                addr: Addr::Reg(a, 0),
                guard: Some(Guard {
                    pred,
                    negated: false,
                }),
            });
            let x = match ok {
                Some(ok) => self.f.selp(Ty::F32, ok, r, other),
                None => r,
            };
            self.vec_loads.insert((l, c), x);
        }
        Ok(())
    }
}

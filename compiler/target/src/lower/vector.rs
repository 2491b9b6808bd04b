//! 16-byte global accesses for elementwise kernels.
//!
//! Only where the kernel's schedule allows vectors of four or more
//! (`vectorize`: 4 by default, 1 in a schedule that does not say).
//!
//! A store of a lazily computed fp32 tile whose elements are contiguous in
//! memory along the tile's last axis goes out in the `Vec` layout: each
//! thread holds four consecutive elements of a row per group of slots, and
//! writes them with one `st.global.v4.f32` where all four are in bounds and
//! the address is 16-byte aligned (element by element elsewhere). The fp32
//! loads the stored value is computed from, with the same contiguity, come
//! in the same way (`ld.global.v4.f32`), before the group's elements are
//! computed. Row reductions whose operand is computed from such loads
//! fold four consecutive elements per step, loaded the same way (see
//! `reduce.rs`). The index must be affine in the coordinates and the masks
//! conjunctions of affine comparisons (see `stage.rs`), so that four
//! consecutive elements are all in bounds when the first and the last are.

use super::{Layout, Lower, Val, C, R};
use crate::ir::*;
use tessera_syntax::ast::Dtype;
use tessera_tile::{TOp, Value};

/// Elements per vector access (16 bytes of fp32).
pub(super) const V: i64 = 4;

impl<'k> Lower<'k> {
    /// Whether an access to `param` through `index` (masked by `mask`) of
    /// a tile of `shape` can move four consecutive elements at once.
    fn vectorizable(
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
        if !matches!(self.vals[value.index()], Some(Val::Lazy))
            || n < V * self.threads
            || !self.vectorizable(param, index, mask, shape)?
        {
            return Ok(None);
        }
        Ok(Some(Layout::Vec { v: V }))
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
            let at = |l: &mut Self, k: usize| l.access(param, index, mask, &coords[k]);
            let (a0, ok0) = at(self, 0)?;
            let (_, okl) = at(self, V as usize - 1)?;
            let fast = self.whole(a0, [ok0, okl, valid]);
            self.f.push(Inst::StV {
                space: Space::Global,
                ty: Ty::F32,
                addr: Addr::Reg(a0, 0),
                src: xs.clone(),
                guard: Some(Guard {
                    pred: fast,
                    negated: false,
                }),
            });
            let slow = self.f.pred_op(None, fast, fast);
            for (k, x) in xs.into_iter().enumerate() {
                let (a, ok) = at(self, k)?;
                let mut pred = slow;
                for p in [ok, valid].into_iter().flatten() {
                    pred = self.f.pred_op(Some(BinOp::And), pred, p);
                }
                self.f.push(Inst::St {
                    space: Space::Global,
                    ty: Ty::F32,
                    addr: Addr::Reg(a, 0),
                    src: Operand::Reg(x),
                    guard: Some(Guard {
                        pred,
                        negated: false,
                    }),
                });
            }
            self.vec_loads.clear();
        }
        self.cur = saved;
        self.memo.clear();
        Ok(())
    }

    /// Whether four elements from `addr` move at once: the address is
    /// 16-byte aligned and every predicate in `oks` holds.
    fn whole(&mut self, addr: Reg, oks: [Option<Reg>; 3]) -> Reg {
        let low = self
            .f
            .bin(BinOp::And, Ty::U64, addr, Operand::Int(4 * V - 1));
        let mut fast = self.f.setp(Cmp::Eq, Ty::U64, low, Operand::Int(0));
        for ok in oks.into_iter().flatten() {
            fast = self.f.pred_op(Some(BinOp::And), fast, ok);
        }
        fast
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
                    stack.extend(super::operands(&inst.op));
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
        let Some(inst) = self.defs.get(&l).copied() else {
            return Ok(());
        };
        let TOp::Load {
            param,
            index,
            mask,
            other,
        } = &inst.op
        else {
            return Ok(());
        };
        let sl = self.shape(l)?;
        let at: Vec<Vec<C>> = coords.iter().map(|c| Self::bcast(c, &sl)).collect();
        let mut access = Vec::new();
        for c in &at {
            access.push(self.access(*param, index, *mask, c)?);
        }
        let raw: Vec<Reg> = (0..V)
            .map(|_| self.f.mov(Ty::F32, Operand::Int(0)))
            .collect();
        let (a0, ok0) = access[0];
        let fast = self.whole(a0, [ok0, access[V as usize - 1].1, None]);
        self.f.push(Inst::LdV {
            space: Space::Global,
            ty: Ty::F32,
            dst: raw.clone(),
            addr: Addr::Reg(a0, 0),
            guard: Some(Guard {
                pred: fast,
                negated: false,
            }),
        });
        let slow = self.f.pred_op(None, fast, fast);
        let other = self.f.mov(Ty::F32, Operand::Float(*other));
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

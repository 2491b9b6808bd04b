//! Specialisation of a kernel to its bound sizes: comparisons that the
//! [`Facts`] decide become constants, and what they guarded folds away —
//! a mask that always holds leaves its load or store, a select on a
//! decided condition is the arm it takes, `and` with true and `or` with
//! false are their other operand. With shapes that are multiples of the
//! tile, a GEMM's or attention's main loop is left with no masks at all;
//! ragged shapes keep exactly the masks they need.
//!
//! Loops the sizes give one trip (a row that fits one chunk) are replaced
//! by their body, and loops of no trip by their initial values; then
//! identical pure operations (index arithmetic, constants, loads of
//! read-only parameters) are computed once: the passes of a row kernel
//! over a row that fits read it once.
//!
//! The result keeps the source's value numbers: a value that folds away
//! is no longer defined, and every use of it reads the value that replaces
//! it, so the kernel verifies and prints like its source. Backends that specialise to bindings (the PTX lowering) run it
//! first; it changes no result.

use std::collections::HashMap;

use crate::facts::Facts;
use crate::ir::{Access, Inst, Kernel, TOp, TileTy, Value};
use tessera_core::{BinaryOp, Bindings, Dtype};

/// `k` with everything its sizes under `b` decide folded away, and the
/// [`Facts`] of `k`, which hold for the result too (its values that remain
/// are `k`'s, computing the same).
pub fn specialise(k: &Kernel, b: &Bindings) -> (Kernel, Facts) {
    let facts = Facts::of(k, b);
    let mut out = k.clone();
    let mut f = Fold {
        facts: &facts,
        kernel: k,
        subst: HashMap::new(),
        seen: vec![HashMap::new()],
    };
    let body = std::mem::take(&mut out.body.insts);
    out.body.insts = f.block(body);
    (out, facts)
}

/// The state of one specialisation.
struct Fold<'a> {
    facts: &'a Facts,
    kernel: &'a Kernel,
    /// A value that folded away, and the one that replaces it.
    subst: HashMap<Value, Value>,
    /// Pure operations already computed, by their text, per loop scope
    /// (innermost last).
    seen: Vec<HashMap<String, Value>>,
}

impl Fold<'_> {
    fn ty(&self, v: Value) -> &TileTy {
        &self.kernel.values[v.index()]
    }

    fn resolve(&self, mut v: Value) -> Value {
        while let Some(n) = self.subst.get(&v) {
            v = *n;
        }
        v
    }

    /// The instructions of a block, rewritten.
    fn block(&mut self, insts: Vec<Inst>) -> Vec<Inst> {
        let mut out = Vec::with_capacity(insts.len());
        for inst in insts {
            self.inst(inst, &mut out);
        }
        out
    }

    /// Rewrites `inst` onto `out` (several instructions for an inlined
    /// loop, none for one that folded away).
    fn inst(&mut self, mut inst: Inst, out: &mut Vec<Inst>) {
        for o in inst.op.operands_mut() {
            *o = self.resolve(*o);
        }
        if let TOp::For {
            lo,
            hi,
            step,
            init,
            body,
        } = &mut inst.op
        {
            match self.trips(*lo, *hi, *step) {
                Some(0) => {
                    for (r, i) in inst.results.iter().zip(init.iter()) {
                        self.subst.insert(*r, *i);
                    }
                    return;
                }
                Some(1) => {
                    // The body, once, with the loop variable at `lo` and
                    // the carried values at their initial values.
                    let args = std::mem::take(&mut body.args);
                    self.subst.insert(args[0], *lo);
                    for (a, i) in args[1..].iter().zip(init.iter()) {
                        self.subst.insert(*a, *i);
                    }
                    let insts = std::mem::take(&mut body.insts);
                    for i in insts {
                        if let TOp::Yield(vs) = &i.op {
                            for (r, v) in inst.results.iter().zip(vs) {
                                let v = self.resolve(*v);
                                self.subst.insert(*r, v);
                            }
                            continue;
                        }
                        self.inst(i, out);
                    }
                    return;
                }
                _ => {
                    self.seen.push(HashMap::new());
                    body.insts = self.block(std::mem::take(&mut body.insts));
                    self.seen.pop();
                }
            }
            out.push(inst);
            return;
        }
        if let TOp::If { then, els, .. } = &mut inst.op {
            self.seen.push(HashMap::new());
            then.insts = self.block(std::mem::take(&mut then.insts));
            self.seen.pop();
            self.seen.push(HashMap::new());
            els.insts = self.block(std::mem::take(&mut els.insts));
            self.seen.pop();
            out.push(inst);
            return;
        }
        if let TOp::Load { mask, .. } | TOp::Store { mask, .. } = &mut inst.op {
            if mask.is_some_and(|m| self.facts.decided(m) == Some(true)) {
                *mask = None;
            }
        }
        let [v] = inst.results[..] else {
            out.push(inst);
            return;
        };
        if let Some(op) = self.fold(v, &inst.op) {
            match op {
                Folded::To(c) => {
                    self.subst.insert(v, c);
                    return;
                }
                Folded::Op(op) => inst.op = op,
            }
        }
        if self.pure(&inst.op) {
            let key = format!("{:?} : {:?}", inst.op, self.ty(v));
            if let Some(&same) = self.seen.iter().rev().find_map(|s| s.get(&key)) {
                self.subst.insert(v, same);
                return;
            }
            self.seen.last_mut().expect("a scope").insert(key, v);
        }
        out.push(inst);
    }

    /// The trips of a loop whose bounds the sizes fix.
    fn trips(&self, lo: Value, hi: Value, step: Value) -> Option<i64> {
        let point = |v: Value| self.facts.range(v).filter(|r| r.lo == r.hi).map(|r| r.lo);
        let (l, h, s) = (point(lo)?, point(hi)?, point(step)?);
        (s > 0).then(|| (h.saturating_sub(l).max(0) + s - 1) / s)
    }

    /// Whether `op` has no effect and depends only on its operands (and
    /// read-only memory), so that one computation serves every copy.
    fn pure(&self, op: &TOp) -> bool {
        match op {
            TOp::ProgramId(_)
            | TOp::NumPrograms(_)
            | TOp::Size(_)
            | TOp::Const(_)
            | TOp::Arange(_)
            | TOp::Unary(..)
            | TOp::Binary(..)
            | TOp::Rand { .. }
            | TOp::Select(..)
            | TOp::Cast(_)
            | TOp::Broadcast(_)
            | TOp::Reshape(_)
            | TOp::Permute(..) => true,
            TOp::Load { param, .. } => self.kernel.params[*param].access == Access::In,
            _ => false,
        }
    }

    /// What the facts make of `v = op`, if anything.
    fn fold(&self, v: Value, op: &TOp) -> Option<Folded> {
        let ty = self.ty(v);
        let folds = matches!(
            op,
            TOp::Binary(..) | TOp::Unary(..) | TOp::Select(..) | TOp::Broadcast(_) | TOp::Cast(_)
        );
        if ty.dtype == Dtype::Bool && folds {
            if let Some(t) = self.facts.decided(v) {
                return Some(Folded::Op(TOp::Const(if t { 1.0 } else { 0.0 })));
            }
        }
        // An integer the sizes pin to one number (a bound rounded to the
        // block, `L / bn * bn`) is that constant.
        if ty.dtype.is_int() && folds {
            if let Some(r) = self.facts.range(v).filter(|r| r.lo == r.hi) {
                if r.lo.unsigned_abs() < 1 << 53 {
                    return Some(Folded::Op(TOp::Const(r.lo as f64)));
                }
            }
        }
        // `&` and `|` of booleans are `&&` and `||`.
        let logical = |b: BinaryOp| ty.dtype == Dtype::Bool && b == BinaryOp::BitAnd;
        let either = |b: BinaryOp| ty.dtype == Dtype::Bool && b == BinaryOp::BitOr;
        let chosen = match op {
            TOp::Select(c, x, y) => self.facts.decided(*c).map(|t| if t { *x } else { *y }),
            TOp::Binary(b, x, y) if *b == BinaryOp::And || logical(*b) => {
                match (self.facts.decided(*x), self.facts.decided(*y)) {
                    (Some(true), _) => Some(*y),
                    (_, Some(true)) => Some(*x),
                    _ => None,
                }
            }
            TOp::Binary(b, x, y) if *b == BinaryOp::Or || either(*b) => {
                match (self.facts.decided(*x), self.facts.decided(*y)) {
                    (Some(false), _) => Some(*y),
                    (_, Some(false)) => Some(*x),
                    _ => None,
                }
            }
            _ => None,
        }?;
        let cty = self.ty(chosen);
        if cty == ty {
            Some(Folded::To(chosen))
        } else if cty.dtype == ty.dtype {
            Some(Folded::Op(TOp::Broadcast(chosen)))
        } else {
            None
        }
    }
}

/// What an operation folds to.
enum Folded {
    /// Another value, as it is.
    To(Value),
    /// Another operation.
    Op(TOp),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read_program;

    /// The small GEMM of the PTX filetests, its store masked by `M`/`N`.
    const GEMM: &str = include_str!("../../ptx/tests/filetests/matmul.tile");

    fn bindings(m: i64, k: i64, n: i64) -> Bindings {
        let mut b = Bindings::default();
        b.insert("M".into(), m);
        b.insert("K".into(), k);
        b.insert("N".into(), n);
        b
    }

    fn store_mask(k: &Kernel) -> Option<Value> {
        k.body.insts.iter().find_map(|i| match &i.op {
            TOp::Store { mask, .. } => Some(*mask),
            _ => None,
        })?
    }

    #[test]
    fn whole_tiles_lose_their_masks_ragged_ones_keep_them() {
        let p = read_program(GEMM).expect("the filetest reads");
        let k = &p.kernels[0];
        assert!(store_mask(k).is_some());
        let (whole, _) = specialise(k, &bindings(128, 256, 128));
        crate::verify::verify_kernel(&whole).expect("specialised kernel verifies");
        assert_eq!(store_mask(&whole), None);
        // 130 rows: the last row tile sticks out.
        let (ragged, _) = specialise(k, &bindings(130, 256, 128));
        crate::verify::verify_kernel(&ragged).expect("specialised kernel verifies");
        assert!(store_mask(&ragged).is_some());
    }

    #[test]
    fn ranges_follow_programs_and_trips() {
        let p = read_program(GEMM).expect("the filetest reads");
        let k = &p.kernels[0];
        let f = Facts::of(k, &bindings(128, 256, 128));
        // %8: row indices pid.y * 64 + arange(64), two programs along y.
        let rows = f.range(Value(8)).expect("rows have a range");
        assert_eq!((rows.lo, rows.hi), (0, 127));
        // %19: K indices k0 + arange(32), k0 in 0, 32, ..., 224.
        let ks = f.range(Value(19)).expect("k indices have a range");
        assert_eq!((ks.lo, ks.hi), (0, 255));
        // The loop variable is a multiple of 32, so is the row origin.
        assert_eq!(f.align(Value(16)), 5);
        assert_eq!(f.align(Value(8)), 6);
        // K = 250: the loop runs to 224, and the last tile reads past K.
        let f = Facts::of(k, &bindings(128, 250, 128));
        let ks = f.range(Value(19)).expect("k indices have a range");
        assert_eq!((ks.lo, ks.hi), (0, 255));
    }
}

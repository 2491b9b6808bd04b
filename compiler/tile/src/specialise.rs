//! Specialisation of a kernel to its bound sizes: comparisons that the
//! [`Facts`] decide become constants, and what they guarded folds away —
//! a mask that always holds leaves its load or store, a select on a
//! decided condition is the arm it takes, `and` with true and `or` with
//! false are their other operand. With shapes that are multiples of the
//! tile, a GEMM's or attention's main loop is left with no masks at all;
//! ragged shapes keep exactly the masks they need.
//!
//! The result is a kernel of the same values (a value that folds away is
//! still defined, merely unused), so it verifies and prints like its
//! source. Backends that specialise to bindings (the PTX lowering) run it
//! first; it changes no result.

use std::collections::HashMap;

use crate::facts::Facts;
use crate::ir::{Block, Kernel, TOp, TileTy, Value};
use tessera_core::{BinaryOp, Bindings, Dtype};

/// `k` with everything its sizes under `b` decide folded away.
pub fn specialise(k: &Kernel, b: &Bindings) -> Kernel {
    let facts = Facts::of(k, b);
    let mut out = k.clone();
    let mut subst = HashMap::new();
    fold_block(&mut out.body, &facts, &k.values, &mut subst);
    out
}

/// Rewrites `block` in place; `subst` maps a value that folded away to
/// the one that replaces it in later uses.
fn fold_block(
    block: &mut Block,
    facts: &Facts,
    types: &[TileTy],
    subst: &mut HashMap<Value, Value>,
) {
    for inst in &mut block.insts {
        for o in inst.op.operands_mut() {
            if let Some(n) = subst.get(o) {
                *o = *n;
            }
        }
        match &mut inst.op {
            TOp::For { body, .. } => fold_block(body, facts, types, subst),
            TOp::If { then, els, .. } => {
                fold_block(then, facts, types, subst);
                fold_block(els, facts, types, subst);
            }
            TOp::Load { mask, .. } | TOp::Store { mask, .. }
                if mask.is_some_and(|m| facts.decided(m) == Some(true)) =>
            {
                *mask = None;
            }
            _ => {}
        }
        let [v] = inst.results[..] else {
            continue;
        };
        let ty = &types[v.index()];
        let folds = matches!(
            inst.op,
            TOp::Binary(..) | TOp::Unary(..) | TOp::Select(..) | TOp::Broadcast(_) | TOp::Cast(_)
        );
        if ty.dtype == Dtype::Bool && folds {
            if let Some(t) = facts.decided(v) {
                inst.op = TOp::Const(if t { 1.0 } else { 0.0 });
                continue;
            }
        }
        let chosen = match &inst.op {
            TOp::Select(c, x, y) => facts.decided(*c).map(|t| if t { *x } else { *y }),
            TOp::Binary(BinaryOp::And, x, y) => match (facts.decided(*x), facts.decided(*y)) {
                (Some(true), _) => Some(*y),
                (_, Some(true)) => Some(*x),
                _ => None,
            },
            TOp::Binary(BinaryOp::Or, x, y) => match (facts.decided(*x), facts.decided(*y)) {
                (Some(false), _) => Some(*y),
                (_, Some(false)) => Some(*x),
                _ => None,
            },
            _ => None,
        };
        let Some(c) = chosen else {
            continue;
        };
        let cty = &types[c.index()];
        if cty == ty {
            subst.insert(v, c);
        } else if cty.dtype == ty.dtype {
            inst.op = TOp::Broadcast(c);
        }
    }
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
        let whole = specialise(k, &bindings(128, 256, 128));
        crate::verify::verify_kernel(&whole).expect("specialised kernel verifies");
        assert_eq!(store_mask(&whole), None);
        // 130 rows: the last row tile sticks out.
        let ragged = specialise(k, &bindings(130, 256, 128));
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

//! Loop-invariant code motion: a pure computation inside an innermost
//! loop whose operands are all computed before the loop is computed once,
//! before it.
//!
//! The lowering emits each tile's thread-dependent shared-memory address
//! where the tile is staged: inside a pipelined loop, under the branch
//! that skips the prefetch on the last trips, the swizzled address of a
//! thread's 16-byte chunk (a shift, a mask, an `xor`, three additions)
//! is recomputed on every trip; ptxas does not move code out of a
//! conditional block. Here it is computed in the loop's preheader.
//!
//! Loops are those of [`crate::induction`]: a label and the one
//! unconditional back edge to it, entered only through the label, so
//! code placed just before the label runs once before the first trip. An
//! instruction moves when it is pure ([`crate::opt::is_pure`]), writes a
//! register written nowhere else, and reads only registers written once,
//! before the loop or by instructions that moved. Instructions that read
//! no register at all (constants) stay, so as not to lengthen registers'
//! lives for what is free to recompute, except the bases of shared memory,
//! parameters and special registers, which the addresses start from.
//! Nothing moves in a kernel whose registers an occupancy bound caps
//! ([`HOIST_REGS_FLOOR`]), and at most [`MAX_HELD`] registers are held
//! across one loop: what is held beyond the registers spills.

use crate::induction::innermost_loops;
use crate::ir::*;
use crate::opt::{for_defs, for_uses, is_pure};

/// Moves the invariant computations of every innermost loop of `f` before
/// the loop (see the module docs).
pub fn hoist_invariants(f: &mut Function) {
    if max_regs(f.threads, f.min_blocks) < HOIST_REGS_FLOOR {
        return;
    }
    let mut loops = innermost_loops(&f.body);
    // Last first: moving code out of a loop does not move the loops before it.
    loops.sort_by_key(|l| std::cmp::Reverse(l.0));
    for (head, back) in loops {
        hoist_loop(f, head, back);
    }
}

/// Moves the invariant computations of the loop whose label is at `head`
/// and whose back edge is at `back` to just before its label.
fn hoist_loop(f: &mut Function, head: usize, back: usize) {
    let n = f.regs.len();
    let mut defs = vec![0u32; n];
    let mut def_at = vec![usize::MAX; n];
    for (idx, i) in f.body.iter_mut().enumerate() {
        for_defs(i, |r| {
            defs[r.index()] += 1;
            def_at[r.index()] = idx;
        });
    }
    let mut moved = vec![false; n];
    let mut hoist = Vec::new();
    for idx in head + 1..back {
        let i = &mut f.body[idx];
        if !is_pure(&f.regs, i) {
            continue;
        }
        let mut dsts = Vec::new();
        for_defs(i, |r| dsts.push(*r));
        let [d] = dsts[..] else {
            continue;
        };
        if defs[d.index()] != 1 {
            continue;
        }
        let (mut invariant, mut reads) = (true, false);
        for_uses(i, |r| {
            reads = true;
            invariant &= defs[r.index()] == 1 && (def_at[r.index()] < head || moved[r.index()]);
        });
        let base = matches!(
            i,
            Inst::SharedBase { .. } | Inst::Special { .. } | Inst::LdParam { .. }
        );
        if invariant && (reads || base) {
            moved[d.index()] = true;
            hoist.push(idx);
        }
    }
    if hoist.is_empty() {
        return;
    }
    let hoist = within_budget(f, (head, back), &def_at, hoist);
    let insts: Vec<Inst> = hoist.iter().map(|&idx| f.body[idx].clone()).collect();
    let mut keep = vec![true; f.body.len()];
    for &idx in &hoist {
        keep[idx] = false;
    }
    let mut k = keep.iter();
    f.body.retain(|_| *k.next().unwrap_or(&true));
    f.body.splice(head..head, insts);
}

/// The most registers that code moved out of one loop may hold across it
/// (values computed before the loop and read in it). Per-element addresses
/// of operands read from shared memory element by element (int8, fp8 and
/// tf32 fragments) number about a hundred; all of them held spill the fp8
/// GEMM at sm_90, while attention's and the bf16 GEMM's number under 30.
const MAX_HELD: usize = 48;

/// `hoist` (indices of instructions in the loop `(head, back)`, in order)
/// cut down so that at most [`MAX_HELD`] of the registers they write are
/// read by code left in the loop: whole chains (a value read in the loop
/// and what it is computed from), in the order the loop reads them.
fn within_budget(
    f: &mut Function,
    (head, back): (usize, usize),
    def_at: &[usize],
    hoist: Vec<usize>,
) -> Vec<usize> {
    use std::collections::BTreeSet;
    let held = |f: &mut Function, set: &BTreeSet<usize>| -> BTreeSet<Reg> {
        let mut out = BTreeSet::new();
        for idx in head + 1..back {
            if set.contains(&idx) {
                continue;
            }
            for_uses(&mut f.body[idx], |r| {
                if set.contains(&def_at[r.index()]) {
                    out.insert(*r);
                }
            });
        }
        out
    };
    let all: BTreeSet<usize> = hoist.iter().copied().collect();
    let roots = held(f, &all);
    if roots.len() <= MAX_HELD {
        return hoist;
    }
    // Roots by where the loop first reads them.
    let mut order = Vec::new();
    for idx in head + 1..back {
        if all.contains(&idx) {
            continue;
        }
        for_uses(&mut f.body[idx], |r| {
            if roots.contains(r) && !order.contains(r) {
                order.push(*r);
            }
        });
    }
    let mut kept = BTreeSet::new();
    for root in order {
        // The root's chain: its definition and, transitively, the moved
        // definitions it reads.
        let mut trial = kept.clone();
        let mut stack = vec![def_at[root.index()]];
        while let Some(idx) = stack.pop() {
            if !all.contains(&idx) || !trial.insert(idx) {
                continue;
            }
            for_uses(&mut f.body[idx], |r| stack.push(def_at[r.index()]));
        }
        if held(f, &trial).len() <= MAX_HELD {
            kept = trial;
        }
    }
    kept.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use crate::fold::tests::{optimised, split_loop as split};

    /// A loop storing to shared memory under a branch, at the thread's
    /// swizzled address (invariant) plus the counter.
    const LOOP: &str = "\tmov.s64 %rd3, 0;\n\
         $L0:\n\
         \tsetp.ge.s64 %p0, %rd3, 1024;\n\
         \t@%p0 bra $L1;\n\
         \tsetp.lt.s64 %p1, %rd3, 512;\n\
         \t@!%p1 bra $L2;\n\
         \tshl.b32 %r1, %r0, 4;\n\
         \txor.b32 %r2, %r1, 48;\n\
         \tmov.u32 %r3, tsr_smem;\n\
         \tadd.u32 %r4, %r3, %r2;\n\
         \tcvt.u32.s64 %r5, %rd3;\n\
         \tadd.u32 %r6, %r4, %r5;\n\
         \tst.shared.f32 [%r6], %f0;\n\
         $L2:\n\
         \tadd.s64 %rd3, %rd3, 32;\n\
         \tbra.uni $L0;\n\
         $L1:\n";

    #[test]
    fn invariant_addresses_are_computed_before_the_loop() {
        let out = optimised(LOOP);
        let (before, body) = split(&out);
        for moved in ["shl.b32", "xor.b32", "mov.u32 %r3, tsr_smem;"] {
            assert!(before.iter().any(|l| l.starts_with(moved)), "{out}");
            assert!(!body.iter().any(|l| l.starts_with(moved)), "{out}");
        }
        // What reads the counter stays.
        assert!(body.iter().any(|l| l.starts_with("cvt.u32.s64")), "{out}");
        assert!(body.iter().any(|l| l.starts_with("st.shared")), "{out}");
    }

    #[test]
    fn a_register_written_in_the_loop_is_not_invariant() {
        // %r0 is rewritten every trip: its chain stays.
        let out = optimised(&LOOP.replace("$L2:\n", "$L2:\n\tadd.u32 %r0, %r0, 1;\n"));
        let (_, body) = split(&out);
        assert!(body.iter().any(|l| l.starts_with("shl.b32")), "{out}");
        assert!(body.iter().any(|l| l.starts_with("xor.b32")), "{out}");
    }
}

//! Strength reduction of addresses in loops: a global address that a loop
//! recomputes every trip from its counter becomes a pointer register,
//! computed once before the loop and advanced by a constant (or
//! loop-invariant) step where the counter advances.
//!
//! The lowering evaluates each staged load's address from the loop
//! variable, `((row + k)·D + col)·2 + base`, a chain of 64-bit
//! multiply-adds per tile per trip; ptxas keeps the chain (it does not
//! strength-reduce 64-bit arithmetic), about 30 integer instructions per
//! trip of an attention loop that Triton replaces by one pointer
//! increment per tile.
//!
//! A loop here is a label `L` and the one unconditional branch back to it
//! (its back edge) with no other back edge in between, entered only
//! through `L`. Its counter is a register written once in the loop, by
//! `i = i + step` (or `t = i + step; i = t`) in the trip's last basic
//! block, `step` invariant. A register written nowhere in the loop is
//! invariant; one written once in the whole function, in the loop, from
//! invariants, is invariant too; one written once from the counter by
//! 64-bit additions, subtractions, multiplications by invariants and left
//! shifts is *linear* in the counter (exact modulo 2^64, as the hardware
//! wraps). The base register of every global access (and the source of
//! every `cp.async`) before the counter's update that is linear in the
//! counter, less a constant offset, gets a pointer: before the loop, its
//! chain is cloned with the counter's initial value (and, when the step in
//! bytes is not a constant, once more with the counter advanced, the
//! difference being the step); the access reads the pointer plus the
//! offset; the pointer advances right after the counter. The old chains
//! are dead code for the caller to remove.

use crate::fold::address;
use crate::ir::*;
use crate::opt::{for_defs, for_uses, is_pure};
use rustc_hash::FxHashMap as HashMap;

/// Rewrites the global addresses of every innermost loop of `f` that are
/// linear in the loop's counter into pointers advanced per trip (see the
/// module docs).
pub fn advance_addresses(f: &mut Function) {
    let mut loops = innermost_loops(&f.body);
    // Last first: a loop's insertions do not move the loops before it.
    loops.sort_by_key(|l| std::cmp::Reverse(l.0));
    for (head, back) in loops {
        reduce_loop(f, head, back);
    }
}

/// `(label index, back-edge index)` of every innermost single-entry loop.
pub(crate) fn innermost_loops(body: &[Inst]) -> Vec<(usize, usize)> {
    let mut at: HashMap<Label, usize> = HashMap::default();
    for (idx, i) in body.iter().enumerate() {
        if let Inst::Label(l) = i {
            at.insert(*l, idx);
        }
    }
    // (branch index, target index) of every branch.
    let branches: Vec<(usize, usize)> = body
        .iter()
        .enumerate()
        .filter_map(|(idx, i)| match i {
            Inst::Bra { target, .. } => Some((idx, *at.get(target)?)),
            _ => None,
        })
        .collect();
    let mut out = Vec::new();
    for &(e, h) in &branches {
        let unconditional = matches!(body[e], Inst::Bra { guard: None, .. });
        if h >= e || !unconditional {
            continue;
        }
        let ok = branches.iter().all(|&(b, t)| {
            let inner = h < b && b < e;
            if (b, t) == (e, h) {
                return true;
            }
            if inner {
                // No other back edge inside; no other branch to the head.
                t > b && t != h
            } else {
                // Entered only through the head.
                !(h <= t && t <= e)
            }
        });
        if ok {
            out.push((h, e));
        }
    }
    out
}

/// What a register holds in a loop, as read before the counter's update.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Lin {
    /// The same on every trip.
    Invariant,
    /// `c·i + invariant` for the loop's counter `i`; `c` when it is a
    /// constant.
    Linear(Option<i64>),
}

/// One loop's analysis.
struct Loop<'f> {
    body: &'f [Inst],
    regs: &'f [Ty],
    head: usize,
    back: usize,
    /// Writes of each register in the whole function and in the loop.
    defs: Vec<u32>,
    defs_in: Vec<u32>,
    /// Where a register written once in the loop is written.
    def_at: Vec<usize>,
    /// Where each register is last written in the function.
    written_at: Vec<usize>,
    /// The counter, its update's index and its step.
    counter: Reg,
    update: usize,
    step: Operand,
    memo: HashMap<Reg, Option<Lin>>,
}

impl<'f> Loop<'f> {
    fn inside(&self, idx: usize) -> bool {
        self.head < idx && idx < self.back
    }

    /// The integer constant `o` holds, if known.
    fn konst(&self, o: &Operand) -> Option<i64> {
        match o {
            Operand::Int(k) => Some(*k),
            Operand::Reg(r) if self.defs[r.index()] == 1 => {
                match self.body.get(self.written_at[r.index()])? {
                    Inst::Mov {
                        src: Operand::Int(k),
                        ..
                    } => Some(*k),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// What operand `o` holds when read at index `at`.
    fn operand(&mut self, o: &Operand, at: usize) -> Option<Lin> {
        match o {
            Operand::Reg(r) => self.reg(*r, at),
            _ => Some(Lin::Invariant),
        }
    }

    /// What register `r` holds when read at index `at` (inside the loop,
    /// before the counter's update).
    fn reg(&mut self, r: Reg, at: usize) -> Option<Lin> {
        if r == self.counter {
            return (at <= self.update).then_some(Lin::Linear(Some(1)));
        }
        if self.defs_in[r.index()] == 0 {
            return Some(Lin::Invariant);
        }
        if self.defs[r.index()] != 1 || self.def_at[r.index()] >= at {
            return None;
        }
        if let Some(l) = self.memo.get(&r) {
            return *l;
        }
        let d = self.def_at[r.index()];
        let l = self.define(d);
        self.memo.insert(r, l);
        l
    }

    /// What the register instruction `d` writes holds.
    fn define(&mut self, d: usize) -> Option<Lin> {
        use Lin::*;
        let body: &'f [Inst] = self.body;
        let i = &body[d];
        let wide = |ty: &Ty| matches!(ty, Ty::U64 | Ty::S64 | Ty::B64);
        let scale = |c: Option<i64>, k: Option<i64>| c.zip(k).map(|(c, k)| c.wrapping_mul(k));
        match i {
            Inst::Mov { src, .. } => self.operand(src, d),
            Inst::Bin { op, ty, a, b, .. } if wide(ty) => {
                let (la, lb) = (self.operand(a, d)?, self.operand(b, d)?);
                match (*op, la, lb) {
                    (_, Invariant, Invariant) => self.invariant(d),
                    (BinOp::Add, Linear(x), Invariant) | (BinOp::Add, Invariant, Linear(x)) => {
                        Some(Linear(x))
                    }
                    (BinOp::Add, Linear(x), Linear(y)) => {
                        Some(Linear(x.zip(y).map(|(x, y)| x.wrapping_add(y))))
                    }
                    (BinOp::Sub, Linear(x), Invariant) => Some(Linear(x)),
                    (BinOp::Sub, Invariant, Linear(y)) => Some(Linear(y.map(i64::wrapping_neg))),
                    (BinOp::Sub, Linear(x), Linear(y)) => {
                        Some(Linear(x.zip(y).map(|(x, y)| x.wrapping_sub(y))))
                    }
                    (BinOp::Mul, Linear(x), Invariant) => Some(Linear(scale(x, self.konst(b)))),
                    (BinOp::Mul, Invariant, Linear(y)) => Some(Linear(scale(y, self.konst(a)))),
                    (BinOp::Shl, Linear(x), Invariant) => {
                        let s = self.konst(b).filter(|s| (0..64).contains(s));
                        Some(Linear(scale(x, s.map(|s| 1i64 << s))))
                    }
                    _ => None,
                }
            }
            Inst::Fma { ty, a, b, c, .. } if wide(ty) => {
                let (la, lb, lc) = (
                    self.operand(a, d)?,
                    self.operand(b, d)?,
                    self.operand(c, d)?,
                );
                let product = match (la, lb) {
                    (Invariant, Invariant) => Invariant,
                    (Linear(x), Invariant) => Linear(scale(x, self.konst(b))),
                    (Invariant, Linear(y)) => Linear(scale(y, self.konst(a))),
                    _ => return None,
                };
                match (product, lc) {
                    (Invariant, Invariant) => self.invariant(d),
                    (Linear(x), Invariant) | (Invariant, Linear(x)) => Some(Linear(x)),
                    (Linear(x), Linear(y)) => {
                        Some(Linear(x.zip(y).map(|(x, y)| x.wrapping_add(y))))
                    }
                }
            }
            _ => self.invariant(d),
        }
    }

    /// `Invariant` when instruction `d` is pure and reads invariants only.
    fn invariant(&mut self, d: usize) -> Option<Lin> {
        let mut i = self.body[d].clone();
        if !is_pure(self.regs, &i) {
            return None;
        }
        let mut reads = Vec::new();
        for_uses(&mut i, |r| reads.push(*r));
        for r in reads {
            if r == self.counter || self.reg(r, d)? != Lin::Invariant {
                return None;
            }
        }
        Some(Lin::Invariant)
    }
}

/// Finds the counter of the loop `head..back`: the register written once
/// in the loop, by an increment by an invariant in the trip's last block.
fn counter(
    body: &[Inst],
    head: usize,
    back: usize,
    defs_in: &[u32],
) -> Option<(Reg, usize, Operand)> {
    // The trip's last block: after the last label of the loop.
    let last = (head + 1..back)
        .rev()
        .find(|k| matches!(body[*k], Inst::Label(_)))
        .unwrap_or(head);
    let int = |ty: &Ty| {
        matches!(
            ty,
            Ty::U32 | Ty::S32 | Ty::B32 | Ty::U64 | Ty::S64 | Ty::B64
        )
    };
    let invariant = |o: &Operand| match o {
        Operand::Reg(r) => defs_in[r.index()] == 0,
        _ => true,
    };
    // `dst = r + step`, for some `r`.
    let increment = |i: &Inst| match i {
        Inst::Bin {
            op: BinOp::Add,
            ty,
            dst,
            a: Operand::Reg(r),
            b,
        } if int(ty) && invariant(b) => Some((*dst, *r, *b)),
        Inst::Bin {
            op: BinOp::Add,
            ty,
            dst,
            a,
            b: Operand::Reg(r),
        } if int(ty) && invariant(a) => Some((*dst, *r, *a)),
        _ => None,
    };
    for u in (last + 1..back).rev() {
        match &body[u] {
            Inst::Mov {
                dst,
                src: Operand::Reg(t),
            } if defs_in[dst.index()] == 1 => {
                let found = (last + 1..u)
                    .rev()
                    .find_map(|k| increment(&body[k]).filter(|(d, r, _)| d == t && r == dst));
                if let Some((_, _, step)) = found {
                    return Some((*dst, u, step));
                }
            }
            i => {
                if let Some((d, r, step)) = increment(i) {
                    if d == r && defs_in[d.index()] == 1 {
                        return Some((d, u, step));
                    }
                }
            }
        }
    }
    None
}

/// The global base register of instruction `i`'s address, mutably, with
/// its offset (`cp.async`'s source has none).
fn global_base(i: &mut Inst) -> Option<(&mut Reg, i64)> {
    if let Inst::CpAsync { src, .. } = i {
        return Some((src, 0));
    }
    let global = matches!(
        i,
        Inst::Ld {
            space: Space::Global,
            ..
        } | Inst::St {
            space: Space::Global,
            ..
        } | Inst::LdV {
            space: Space::Global,
            ..
        } | Inst::StV {
            space: Space::Global,
            ..
        } | Inst::Red { .. }
    );
    match address(i).filter(|_| global)? {
        Addr::Reg(r, off) => {
            let off = *off;
            Some((r, off))
        }
        Addr::Shared(_) => None,
    }
}

/// Reduces the addresses of loop `head..back` of `f` (see the module docs).
fn reduce_loop(f: &mut Function, head: usize, back: usize) {
    let n = f.regs.len();
    let mut defs = vec![0u32; n];
    let mut defs_in = vec![0u32; n];
    let mut def_at = vec![usize::MAX; n];
    let mut written_at = vec![usize::MAX; n];
    for (idx, i) in f.body.iter_mut().enumerate() {
        let inside = head < idx && idx < back;
        for_defs(i, |r| {
            defs[r.index()] += 1;
            written_at[r.index()] = idx;
            if inside {
                defs_in[r.index()] += 1;
                def_at[r.index()] = idx;
            }
        });
    }
    let Some((counter, update, step)) = counter(&f.body, head, back, &defs_in) else {
        return;
    };
    let mut lp = Loop {
        body: &f.body,
        regs: &f.regs,
        head,
        back,
        defs,
        defs_in,
        def_at,
        written_at,
        counter,
        update,
        step,
        memo: HashMap::default(),
    };
    // Per access: (index, root register, offset from the root).
    let mut accesses: Vec<(usize, Reg, i64)> = Vec::new();
    for idx in head + 1..update {
        let mut i = lp.body[idx].clone();
        let Some((&mut base, off)) = global_base(&mut i) else {
            continue;
        };
        if !matches!(lp.reg(base, idx), Some(Lin::Linear(_))) {
            continue;
        }
        // Strip constant additions: accesses a constant apart share a pointer.
        let (mut root, mut off) = (base, off);
        while lp.defs[root.index()] == 1 && lp.inside(lp.def_at[root.index()]) {
            match &lp.body[lp.def_at[root.index()]] {
                Inst::Bin {
                    op: BinOp::Add,
                    a: Operand::Reg(x),
                    b: Operand::Int(k),
                    ..
                } if matches!(lp.reg(*x, idx), Some(Lin::Linear(_))) => {
                    off = off.wrapping_add(*k);
                    root = *x;
                }
                _ => break,
            }
        }
        accesses.push((idx, root, off));
    }
    if accesses.is_empty() {
        return;
    }
    let mut pre = Vec::new();
    let mut regs = f.regs.clone();
    let mut clones = Clones::default();
    // Per root: the pointer and its step.
    let mut pointers: HashMap<Reg, (Reg, Operand)> = HashMap::default();
    for &(_, root, _) in &accesses {
        if pointers.contains_key(&root) {
            continue;
        }
        let Some(Lin::Linear(coef)) = lp.reg(root, update) else {
            continue;
        };
        let ty = regs[root.index()];
        let p0 = clones.value(&lp, root, false, &mut pre, &mut regs);
        let step = match (coef, lp.konst(&lp.step)) {
            (Some(c), Some(s)) => Operand::Int(c.wrapping_mul(s)),
            _ => {
                let p1 = clones.value(&lp, root, true, &mut pre, &mut regs);
                let d = new_reg(&mut regs, ty);
                pre.push(Inst::Bin {
                    op: BinOp::Sub,
                    ty,
                    dst: d,
                    a: p1,
                    b: p0,
                });
                Operand::Reg(d)
            }
        };
        let p = new_reg(&mut regs, ty);
        pre.push(Inst::Mov { dst: p, src: p0 });
        pointers.insert(root, (p, step));
    }
    // Rewrite, last access first so earlier indices stay put.
    let update = lp.update;
    let mut advances: Vec<Inst> = pointers
        .values()
        .map(|(p, step)| Inst::Bin {
            op: BinOp::Add,
            ty: regs[p.index()],
            dst: *p,
            a: Operand::Reg(*p),
            b: *step,
        })
        .collect();
    advances.sort_by_key(|i| match i {
        Inst::Bin { dst, .. } => dst.0,
        _ => 0,
    });
    f.body.splice(update + 1..update + 1, advances);
    for &(idx, root, off) in accesses.iter().rev() {
        let Some(&(p, _)) = pointers.get(&root) else {
            continue;
        };
        let i = &mut f.body[idx];
        if let Inst::CpAsync { src, .. } = i {
            if off == 0 {
                *src = p;
            } else {
                let ty = regs[p.index()];
                let q = new_reg(&mut regs, ty);
                *src = q;
                let add = Inst::Bin {
                    op: BinOp::Add,
                    ty: regs[p.index()],
                    dst: q,
                    a: Operand::Reg(p),
                    b: Operand::Int(off),
                };
                f.body.insert(idx, add);
            }
        } else if let Some(Addr::Reg(r, o)) = address(i) {
            if i32::try_from(off).is_ok() {
                *r = p;
                *o = off;
            }
        }
    }
    f.body.splice(head..head, pre);
    f.regs = regs;
}

fn new_reg(regs: &mut Vec<Ty>, ty: Ty) -> Reg {
    regs.push(ty);
    Reg(regs.len() as u32 - 1)
}

/// Copies of a loop's chains, evaluated before the loop.
#[derive(Default)]
struct Clones {
    /// (register, with the counter advanced by a step) -> its copy.
    done: HashMap<(Reg, bool), Operand>,
}

impl Clones {
    /// `r`'s value on the loop's first trip (`advanced`: its second),
    /// computed by instructions appended to `pre`.
    fn value(
        &mut self,
        lp: &Loop,
        r: Reg,
        advanced: bool,
        pre: &mut Vec<Inst>,
        regs: &mut Vec<Ty>,
    ) -> Operand {
        if r == lp.counter {
            if !advanced {
                return Operand::Reg(r);
            }
        } else if lp.defs_in[r.index()] == 0 {
            return Operand::Reg(r);
        }
        // Invariants read the same either way.
        let advanced = advanced && lp.memo.get(&r) != Some(&Some(Lin::Invariant));
        if let Some(o) = self.done.get(&(r, advanced)) {
            return *o;
        }
        let out = if r == lp.counter {
            let d = new_reg(regs, regs[r.index()]);
            pre.push(Inst::Bin {
                op: BinOp::Add,
                ty: regs[r.index()],
                dst: d,
                a: Operand::Reg(r),
                b: lp.step,
            });
            Operand::Reg(d)
        } else {
            let mut i = lp.body[lp.def_at[r.index()]].clone();
            let mut reads = Vec::new();
            for_uses(&mut i, |x| reads.push(*x));
            let copies: HashMap<Reg, Reg> = reads
                .into_iter()
                .map(|x| match self.value(lp, x, advanced, pre, regs) {
                    Operand::Reg(c) => (x, c),
                    _ => (x, x),
                })
                .collect();
            for_uses(&mut i, |x| *x = copies[x]);
            let d = new_reg(regs, regs[r.index()]);
            for_defs(&mut i, |x| *x = d);
            pre.push(i);
            Operand::Reg(d)
        };
        self.done.insert((r, advanced), out);
        out
    }
}

#[cfg(test)]
mod tests {
    use crate::fold::tests::{optimised, split_loop};

    /// The lines of `out` from label `$L0` to the back edge.
    fn loop_body(out: &str) -> Vec<&str> {
        split_loop(out).1
    }

    #[test]
    fn an_address_linear_in_the_counter_becomes_a_pointer() {
        // for (i = 0; i < 1024; i += 32) a[i + tid] = a[i + tid + 1024]
        let out = optimised(
            "\tmov.s64 %rd3, 0;\n\
             $L0:\n\
             \tsetp.ge.s64 %p0, %rd3, 1024;\n\
             \t@%p0 bra $L1;\n\
             \tadd.s64 %rd4, %rd3, %rd2;\n\
             \tmad.lo.s64 %rd5, %rd4, 4, %rd1;\n\
             \tld.global.f32 %f0, [%rd5+4096];\n\
             \tst.global.f32 [%rd5], %f0;\n\
             \tadd.s64 %rd3, %rd3, 32;\n\
             \tbra.uni $L0;\n\
             $L1:\n",
        );
        let body = loop_body(&out);
        assert!(!body.iter().any(|l| l.starts_with("mad.lo")), "{out}");
        let advance = body
            .iter()
            .find(|l| l.ends_with(", 128;") && l.starts_with("add.s64"))
            .expect(&out);
        let p = &advance["add.s64 ".len()..advance.find(',').unwrap()];
        assert!(
            body.contains(&format!("ld.global.f32 %f0, [{p}+4096];").as_str()),
            "{out}"
        );
        assert!(
            body.contains(&format!("st.global.f32 [{p}], %f0;").as_str()),
            "{out}"
        );
        // The pointer starts at the first trip's address.
        let pre = &out[..out.find("$L0:").unwrap()];
        assert!(
            pre.contains("mad.lo.s64") && pre.contains(&format!("mov.s64 {p},")),
            "{out}"
        );
    }

    #[test]
    fn a_step_known_only_at_run_time_is_computed_before_the_loop() {
        // The counter advances by tid + 1: the pointer's step is the
        // difference of the first two trips' addresses.
        let out = optimised(
            "\tmov.s64 %rd3, 0;\n\
             \tadd.s64 %rd6, %rd2, 1;\n\
             $L0:\n\
             \tsetp.ge.s64 %p0, %rd3, 1024;\n\
             \t@%p0 bra $L1;\n\
             \tmad.lo.s64 %rd5, %rd3, 4, %rd1;\n\
             \tst.global.f32 [%rd5], 0f00000000;\n\
             \tadd.s64 %rd7, %rd3, %rd6;\n\
             \tmov.s64 %rd3, %rd7;\n\
             \tbra.uni $L0;\n\
             $L1:\n",
        );
        let body = loop_body(&out);
        assert!(!body.iter().any(|l| l.starts_with("mad.lo")), "{out}");
        let pre = &out[..out.find("$L0:").unwrap()];
        assert!(pre.contains("sub.s64"), "{out}");
    }

    #[test]
    fn addresses_not_linear_in_the_counter_are_left_alone() {
        // a[i·i], and an address read after the counter has advanced.
        let out = optimised(
            "\tmov.s64 %rd3, 0;\n\
             $L0:\n\
             \tsetp.ge.s64 %p0, %rd3, 1024;\n\
             \t@%p0 bra $L1;\n\
             \tmul.lo.s64 %rd4, %rd3, %rd3;\n\
             \tmad.lo.s64 %rd5, %rd4, 4, %rd1;\n\
             \tst.global.f32 [%rd5], 0f00000000;\n\
             \tadd.s64 %rd3, %rd3, 1;\n\
             \tmad.lo.s64 %rd6, %rd3, 4, %rd1;\n\
             \tst.global.f32 [%rd6], 0f00000000;\n\
             \tbra.uni $L0;\n\
             $L1:\n",
        );
        let body = loop_body(&out);
        assert_eq!(
            body.iter().filter(|l| l.starts_with("mad.lo")).count(),
            2,
            "{out}"
        );
        assert!(
            !out[..out.find("$L0:").unwrap()].contains("mad.lo"),
            "{out}"
        );
    }

    #[test]
    fn a_loop_entered_in_the_middle_is_left_alone() {
        let out = optimised(
            "\tmov.s64 %rd3, 0;\n\
             \tbra.uni $L2;\n\
             $L0:\n\
             \tsetp.ge.s64 %p0, %rd3, 1024;\n\
             \t@%p0 bra $L1;\n\
             $L2:\n\
             \tmad.lo.s64 %rd5, %rd3, 4, %rd1;\n\
             \tst.global.f32 [%rd5], 0f00000000;\n\
             \tadd.s64 %rd3, %rd3, 1;\n\
             \tbra.uni $L0;\n\
             $L1:\n",
        );
        assert!(
            loop_body(&out).iter().any(|l| l.starts_with("mad.lo")),
            "{out}"
        );
    }
}

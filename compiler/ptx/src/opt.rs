//! Clean-up of lowered Target IR: local value numbering, copy
//! propagation, integer peepholes (including division and remainder by a
//! power of two of values known to be non-negative, which become shifts
//! and masks: ptxas turns a 64-bit `div`/`rem` into a call to an
//! ~80-instruction subroutine, whatever the divisor), dead-code removal
//! and register compaction.
//!
//! The lowering recomputes index arithmetic for every element it touches;
//! this pass shares what is computed twice. It only touches *values*:
//! registers written by exactly one instruction whose operands are values
//! too. Registers written more than once (loop-carried values, the
//! accumulators `mma` updates in place, the destinations of guarded loads)
//! are left exactly as they are. Two equal pure computations in one basic
//! block (a label starts a new one) compute the same value, and the first
//! dominates every use of the second, so the second is dropped and its
//! uses read the first.

use crate::ir::*;
use rustc_hash::FxHashMap as HashMap;

/// An operand as a hash key.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum OpKey {
    Reg(u32),
    Int(i64),
    Float(u64),
}

fn key_of(o: &Operand) -> OpKey {
    match o {
        Operand::Reg(r) => OpKey::Reg(r.0),
        Operand::Int(i) => OpKey::Int(*i),
        Operand::Float(x) => OpKey::Float(x.to_bits()),
    }
}

/// A pure computation, without its destination.
#[derive(PartialEq, Eq, Hash)]
enum Key {
    Mov(Ty, OpKey),
    Special(Special),
    SharedBase,
    LocalBase,
    LdParam(usize),
    Bin(BinOp, Ty, OpKey, OpKey),
    Un(UnOp, Ty, OpKey),
    Fma(Ty, OpKey, OpKey, OpKey),
    Setp(Cmp, Ty, OpKey, OpKey),
    Selp(Ty, OpKey, OpKey, u32),
    PredOp(Option<BinOp>, u32, u32),
    Cvt(Ty, Ty, Round, u32),
    CvtHalf(bool, bool, u32),
    CvtPack(Fmt, u32, u32),
    CvtF8Widen(Fmt, u32),
    CvtTf32(bool, u32),
    Join(u32, u32),
}

/// The key and destination of a pure instruction (`regs`: the register
/// types).
fn pure(regs: &[Ty], i: &Inst) -> Option<(Key, Reg)> {
    let k = key_of;
    Some(match i {
        Inst::Mov { dst, src } => (Key::Mov(regs[dst.index()], k(src)), *dst),
        Inst::Special { dst, reg } => (Key::Special(*reg), *dst),
        Inst::SharedBase { dst } => (Key::SharedBase, *dst),
        Inst::LocalBase { dst } => (Key::LocalBase, *dst),
        Inst::LdParam { dst, param } => (Key::LdParam(*param), *dst),
        Inst::Bin { op, ty, dst, a, b } => (Key::Bin(*op, *ty, k(a), k(b)), *dst),
        Inst::Un { op, ty, dst, a } => (Key::Un(*op, *ty, k(a)), *dst),
        Inst::Fma { ty, dst, a, b, c } => (Key::Fma(*ty, k(a), k(b), k(c)), *dst),
        Inst::Setp { cmp, ty, dst, a, b } => (Key::Setp(*cmp, *ty, k(a), k(b)), *dst),
        Inst::Selp {
            ty,
            dst,
            a,
            b,
            pred,
        } => (Key::Selp(*ty, k(a), k(b), pred.0), *dst),
        Inst::PredOp { op, dst, a, b } => (Key::PredOp(*op, a.0, b.0), *dst),
        Inst::Cvt {
            to,
            from,
            round,
            dst,
            src,
        } => (Key::Cvt(*to, *from, *round, src.0), *dst),
        Inst::CvtHalf {
            bf16,
            widen,
            dst,
            src,
        } => (Key::CvtHalf(*bf16, *widen, src.0), *dst),
        Inst::CvtPack { fmt, dst, hi, lo } => (Key::CvtPack(*fmt, hi.0, lo.0), *dst),
        Inst::CvtF8Widen { fmt, dst, src } => (Key::CvtF8Widen(*fmt, src.0), *dst),
        Inst::CvtTf32 { rna, dst, src } => (Key::CvtTf32(*rna, src.0), *dst),
        Inst::Join { dst, lo, hi } => (Key::Join(lo.0, hi.0), *dst),
        _ => return None,
    })
}

/// Whether `i` is a pure computation of its one destination (see
/// [`pure`]).
pub(crate) fn is_pure(regs: &[Ty], i: &Inst) -> bool {
    pure(regs, i).is_some()
}

/// Calls `f` on every register `i` reads, mutably.
pub(crate) fn for_uses(i: &mut Inst, mut f: impl FnMut(&mut Reg)) {
    let op = |o: &mut Operand, f: &mut dyn FnMut(&mut Reg)| {
        if let Operand::Reg(r) = o {
            f(r)
        }
    };
    let addr = |a: &mut Addr, f: &mut dyn FnMut(&mut Reg)| {
        if let Addr::Reg(r, _) = a {
            f(r)
        }
    };
    let guard = |g: &mut Option<Guard>, f: &mut dyn FnMut(&mut Reg)| {
        if let Some(g) = g {
            f(&mut g.pred)
        }
    };
    match i {
        Inst::Mov { src, .. } => op(src, &mut f),
        Inst::Bin { a, b, .. } | Inst::Setp { a, b, .. } => {
            op(a, &mut f);
            op(b, &mut f);
        }
        Inst::Un { a, .. } => op(a, &mut f),
        Inst::Fma { a, b, c, .. } => {
            op(a, &mut f);
            op(b, &mut f);
            op(c, &mut f);
        }
        Inst::Selp { a, b, pred, .. } => {
            op(a, &mut f);
            op(b, &mut f);
            f(pred);
        }
        // `not` ignores `b`, but it must still name a live register.
        Inst::PredOp { a, b, .. } => {
            f(a);
            f(b);
        }
        Inst::Cvt { src, .. }
        | Inst::CvtHalf { src, .. }
        | Inst::CvtF8Widen { src, .. }
        | Inst::CvtTf32 { src, .. } => f(src),
        Inst::CvtPack { hi, lo, .. } | Inst::Join { hi, lo, .. } => {
            f(hi);
            f(lo);
        }
        Inst::Ld {
            addr: a, guard: g, ..
        } => {
            addr(a, &mut f);
            guard(g, &mut f);
        }
        Inst::St {
            addr: a,
            src,
            guard: g,
            ..
        } => {
            addr(a, &mut f);
            op(src, &mut f);
            guard(g, &mut f);
        }
        Inst::CpAsync {
            dst, src, guard: g, ..
        } => {
            addr(dst, &mut f);
            f(src);
            guard(g, &mut f);
        }
        Inst::Red {
            addr: a,
            src,
            guard: g,
            ..
        } => {
            addr(a, &mut f);
            f(src);
            guard(g, &mut f);
        }
        Inst::Mma { a, b, c, .. } => {
            a.iter_mut()
                .chain(b.iter_mut())
                .chain(c.iter_mut())
                .for_each(&mut f);
        }
        // The accumulators are read and written in place: registers written
        // more than once, which no pass renames.
        Inst::Wgmma { d, a, b, .. } => {
            match a {
                WgmmaA::Desc(r) => f(r),
                WgmmaA::Regs(rs) => rs.iter_mut().for_each(&mut f),
            }
            f(b);
            d.iter_mut().for_each(&mut f);
        }
        Inst::MbarInit { addr: a, .. } => addr(a, &mut f),
        Inst::MbarExpectTx {
            addr: a, guard: g, ..
        }
        | Inst::MbarArrive { addr: a, guard: g } => {
            addr(a, &mut f);
            guard(g, &mut f);
        }
        Inst::MbarTryWait {
            addr: a, parity, ..
        } => {
            addr(a, &mut f);
            op(parity, &mut f);
        }
        Inst::TmaLoad {
            dst,
            map,
            coords,
            mbar,
            guard: g,
        } => {
            addr(dst, &mut f);
            f(map);
            coords.iter_mut().for_each(&mut f);
            addr(mbar, &mut f);
            guard(g, &mut f);
        }
        Inst::FenceTensorMap { map } => f(map),
        Inst::Bra { guard: g, .. } => guard(g, &mut f),
        Inst::Trap { guard: g } => f(&mut g.pred),
        Inst::Shfl { src, b, .. } => {
            f(src);
            op(b, &mut f);
        }
        Inst::Ldmatrix { addr: a, .. } => addr(a, &mut f),
        Inst::LdV {
            addr: a, guard: g, ..
        } => {
            addr(a, &mut f);
            guard(g, &mut f);
        }
        Inst::StV {
            addr: a,
            src,
            guard: g,
            ..
        } => {
            addr(a, &mut f);
            src.iter_mut().for_each(&mut f);
            guard(g, &mut f);
        }
        Inst::Special { .. }
        | Inst::SharedBase { .. }
        | Inst::LocalBase { .. }
        | Inst::LdParam { .. }
        | Inst::CpAsyncCommit
        | Inst::CpAsyncWait(_)
        | Inst::WgmmaFence
        | Inst::WgmmaCommit
        | Inst::WgmmaWait(_)
        | Inst::FenceProxyAsync
        | Inst::Elect { .. }
        | Inst::Barrier
        | Inst::NamedBarrier { .. }
        | Inst::SetMaxNReg { .. }
        | Inst::Label(_)
        | Inst::Ret
        | Inst::Comment(_)
        | Inst::Loc { .. }
        | Inst::Source(_) => {}
    }
}

/// Calls `f` on every register `i` writes, mutably.
pub(crate) fn for_defs(i: &mut Inst, mut f: impl FnMut(&mut Reg)) {
    match i {
        Inst::Mov { dst, .. }
        | Inst::Special { dst, .. }
        | Inst::Bin { dst, .. }
        | Inst::Un { dst, .. }
        | Inst::Fma { dst, .. }
        | Inst::Setp { dst, .. }
        | Inst::Selp { dst, .. }
        | Inst::PredOp { dst, .. }
        | Inst::Cvt { dst, .. }
        | Inst::CvtHalf { dst, .. }
        | Inst::Ld { dst, .. }
        | Inst::LdParam { dst, .. }
        | Inst::SharedBase { dst }
        | Inst::CvtPack { dst, .. }
        | Inst::CvtF8Widen { dst, .. }
        | Inst::CvtTf32 { dst, .. }
        | Inst::Join { dst, .. }
        | Inst::Shfl { dst, .. }
        | Inst::MbarTryWait { dst, .. }
        | Inst::Elect { dst } => f(dst),
        Inst::Mma { d, .. } => d.iter_mut().for_each(f),
        Inst::Wgmma { d, .. } => d.iter_mut().for_each(f),
        Inst::Ldmatrix { dst, .. } | Inst::LdV { dst, .. } => dst.iter_mut().for_each(f),
        Inst::LocalBase { dst } => f(dst),
        _ => {}
    }
}

/// Integer peepholes: `x·1 + c` is an add, `x·k + 0` a multiply, `x·1`
/// and `x + 0` a copy.
fn simplify(i: &mut Inst) {
    let one = |o: &Operand| *o == Operand::Int(1);
    let zero = |o: &Operand| *o == Operand::Int(0);
    let new = match i {
        Inst::Fma { ty, dst, a, b, c } if !ty.is_float() => {
            if one(b) {
                Some(Inst::Bin {
                    op: BinOp::Add,
                    ty: *ty,
                    dst: *dst,
                    a: *a,
                    b: *c,
                })
            } else if one(a) {
                Some(Inst::Bin {
                    op: BinOp::Add,
                    ty: *ty,
                    dst: *dst,
                    a: *b,
                    b: *c,
                })
            } else if zero(c) {
                Some(Inst::Bin {
                    op: BinOp::Mul,
                    ty: *ty,
                    dst: *dst,
                    a: *a,
                    b: *b,
                })
            } else {
                None
            }
        }
        _ => None,
    };
    if let Some(n) = new {
        *i = n;
    }
    let copy = match i {
        Inst::Bin {
            op: BinOp::Mul,
            ty,
            dst,
            a: Operand::Reg(r),
            b,
        } if !ty.is_float() && one(b) => Some((*dst, *r)),
        Inst::Bin {
            op: BinOp::Add,
            ty,
            dst,
            a: Operand::Reg(r),
            b,
        } if !ty.is_float() && zero(b) => Some((*dst, *r)),
        _ => None,
    };
    if let Some((dst, src)) = copy {
        *i = Inst::Mov {
            dst,
            src: Operand::Reg(src),
        };
    }
}

/// Whether integer type `ty` is unsigned.
fn unsigned(ty: Ty) -> bool {
    matches!(ty, Ty::U8 | Ty::U32 | Ty::U64 | Ty::B16 | Ty::B32 | Ty::B64)
}

/// Whether `o` is known to be at least 0: a non-negative constant, or a
/// register `nonneg` says is.
fn at_least_zero(o: &Operand, nonneg: &[bool]) -> bool {
    match o {
        Operand::Int(c) => *c >= 0,
        Operand::Reg(r) => nonneg[r.index()],
        Operand::Float(_) => false,
    }
}

/// Whether the value `i` defines is known to be non-negative, given what
/// is known of its operands. Index arithmetic starts from special
/// registers (thread and block indices, all unsigned) and constants, and
/// only adds, multiplies, divides and masks them; its values stay far
/// below 2^62, so sums and products of non-negative indices do not wrap.
fn defines_nonneg(i: &Inst, nonneg: &[bool]) -> bool {
    let z = |o: &Operand| at_least_zero(o, nonneg);
    match i {
        Inst::Special { .. } => true,
        Inst::Mov { src, .. } => z(src),
        // A widening conversion of an unsigned value, or any integer
        // conversion of a non-negative index (indices fit in 31 bits).
        Inst::Cvt { to, from, src, .. } if !from.is_float() && !to.is_float() => {
            (unsigned(*from) && to.bytes() > from.bytes()) || nonneg[src.index()]
        }
        Inst::Bin { op, ty, a, b, .. } if !ty.is_float() => match op {
            BinOp::Add
            | BinOp::Mul
            | BinOp::Div
            | BinOp::Rem
            | BinOp::Max
            | BinOp::Min
            | BinOp::Or
            | BinOp::Shl
            | BinOp::MulHi => z(a) && z(b),
            BinOp::And => z(a) || z(b),
            BinOp::Shr => z(a),
            BinOp::Sub | BinOp::Xor | BinOp::DivFull => false,
        },
        Inst::Fma { ty, a, b, c, .. } if !ty.is_float() => z(a) && z(b) && z(c),
        _ => false,
    }
}

/// The registers every write of which is non-negative, supposing the
/// registers it reads are: the largest such set, found by striking out
/// registers until none changes. A loop counter (`i = 0`, then `i = i +
/// 1`) is one, as is what is computed from it by [`defines_nonneg`]'s
/// operations; by induction over the writes, these registers hold no
/// negative value at any time.
fn nonneg_registers(f: &mut Function) -> Vec<bool> {
    let mut nonneg: Vec<bool> = f.regs.iter().map(|t| !t.is_float()).collect();
    let mut changed = true;
    while changed {
        changed = false;
        for i in &mut f.body {
            let mut dsts = Vec::new();
            for_defs(i, |r| dsts.push(*r));
            if dsts.iter().all(|d| !nonneg[d.index()]) {
                continue;
            }
            let ok = dsts.len() == 1 && defines_nonneg(i, &nonneg);
            for d in dsts {
                if !ok && nonneg[d.index()] {
                    nonneg[d.index()] = false;
                    changed = true;
                }
            }
        }
    }
    nonneg
}

/// `a / 2^k` and `a % 2^k` of a non-negative (or unsigned) `a` as a shift
/// and a mask.
fn strength_reduce(i: &mut Inst, nonneg: &[bool]) {
    let Inst::Bin { op, ty, a, b, .. } = i else {
        return;
    };
    let (Operand::Int(d), false) = (*b, ty.is_float()) else {
        return;
    };
    if d <= 0 || d & (d - 1) != 0 || !(unsigned(*ty) || at_least_zero(a, nonneg)) {
        return;
    }
    match op {
        BinOp::Div => {
            *op = BinOp::Shr;
            *b = Operand::Int(d.trailing_zeros() as i64);
        }
        BinOp::Rem => {
            *op = BinOp::And;
            *b = Operand::Int(d - 1);
        }
        _ => {}
    }
}

/// A register that holds `src` rounded to a 16-bit float (bf16 when
/// `bf16`), narrowed (16 bits) or widened back to f32.
#[derive(Clone, Copy)]
struct Rounding {
    bf16: bool,
    widened: bool,
    src: Reg,
}

/// Skips a rounding a later rounding to the same format repeats: a value
/// rounded to bf16 (or fp16), widened back to f32, then narrowed or packed
/// into that format again is narrowed or packed from the unrounded value,
/// which rounds to the same bits (round-to-nearest is idempotent; the
/// widening is exact). The lowering rounds a cast tile's elements when it
/// computes them and the store that writes them rounds again: this leaves
/// one rounding per element. Records the roundings `i` makes (the caller
/// forgets them at the end of each basic block).
fn skip_rounding(i: &mut Inst, rounded: &mut HashMap<Reg, Rounding>, single: &dyn Fn(Reg) -> bool) {
    let unrounded = |r: Reg, bf16: bool, rounded: &HashMap<Reg, Rounding>| match rounded.get(&r) {
        Some(x) if x.widened && x.bf16 == bf16 => x.src,
        _ => r,
    };
    match i {
        Inst::CvtHalf {
            bf16,
            widen,
            dst,
            src,
        } => {
            if !*widen {
                *src = unrounded(*src, *bf16, rounded);
            }
            // The widening of a narrowed value: the rounding of its source.
            let from = if *widen {
                rounded
                    .get(src)
                    .filter(|x| !x.widened && x.bf16 == *bf16)
                    .map(|x| x.src)
            } else {
                Some(*src)
            };
            if let Some(from) = from.filter(|r| single(*r) && single(*dst)) {
                rounded.insert(
                    *dst,
                    Rounding {
                        bf16: *bf16,
                        widened: *widen,
                        src: from,
                    },
                );
            }
        }
        Inst::CvtPack { fmt, hi, lo, .. } if matches!(fmt, Fmt::Bf16 | Fmt::F16) => {
            let bf16 = *fmt == Fmt::Bf16;
            *hi = unrounded(*hi, bf16, rounded);
            *lo = unrounded(*lo, bf16, rounded);
        }
        _ => {}
    }
}

/// How far back (in instructions) a value may be reused. Sharing a value
/// over a longer stretch of code keeps its register live across it: the
/// lowering recomputes some index arithmetic on purpose, to keep register
/// pressure down in unrolled loops, and ptxas does not rematerialise it.
const REUSE_WINDOW: usize = 256;

/// Optimises `f` in place (see the module docs).
pub fn optimize(f: &mut Function) {
    let n = f.regs.len();
    let mut defs = vec![0u32; n];
    for i in &mut f.body {
        for_defs(i, |r| defs[r.index()] += 1);
    }
    let single = |r: Reg, defs: &[u32]| defs[r.index()] == 1;
    // Forward: substitute, simplify, number values.
    let mut subst: Vec<Reg> = (0..n as u32).map(Reg).collect();
    let mut table: HashMap<Key, (Reg, usize)> = HashMap::default();
    let mut keep = vec![true; f.body.len()];
    let regs = f.regs.clone();
    // Registers whose value is known to be at least 0.
    let mut nonneg = nonneg_registers(f);
    // 16-bit float roundings of registers written once (see `skip_rounding`).
    let mut rounded: HashMap<Reg, Rounding> = HashMap::default();
    // Reuse distances count instructions other than source records, so
    // that the code does not depend on them.
    let mut sources = 0;
    for (idx, i) in f.body.iter_mut().enumerate() {
        if let Inst::Source(_) = i {
            sources += 1;
            continue;
        }
        let pos = idx - sources;
        for_uses(i, |r| *r = subst[r.index()]);
        if let Inst::Label(_) = i {
            table.clear();
            rounded.clear();
            continue;
        }
        simplify(i);
        strength_reduce(i, &nonneg);
        skip_rounding(i, &mut rounded, &|r| single(r, &defs));
        if defines_nonneg(i, &nonneg) {
            let mut dsts = Vec::new();
            for_defs(i, |r| dsts.push(*r));
            if let [d] = dsts[..] {
                nonneg[d.index()] |= single(d, &defs);
            }
        }
        let mut operands_are_values = true;
        for_uses(i, |r| operands_are_values &= single(*r, &defs));
        if !operands_are_values {
            continue;
        }
        let Some((key, dst)) = pure(&regs, i) else {
            continue;
        };
        if !single(dst, &defs) {
            continue;
        }
        // A copy between registers of one type is the value itself.
        if let Key::Mov(ty, OpKey::Reg(s)) = key {
            if regs[s as usize] == ty {
                subst[dst.index()] = Reg(s);
                keep[idx] = false;
                continue;
            }
        }
        match table.get(&key) {
            Some((r, at)) if pos - at <= REUSE_WINDOW => {
                subst[dst.index()] = *r;
                keep[idx] = false;
            }
            _ => {
                table.insert(key, (dst, pos));
            }
        }
    }
    let mut k = keep.iter();
    f.body.retain(|_| *k.next().unwrap_or(&true));
    crate::fold::fold_addresses(f);
    crate::induction::advance_addresses(f);
    crate::hoist::hoist_invariants(f);
    let mut defs = vec![0u32; f.regs.len()];
    for i in &mut f.body {
        for_defs(i, |r| defs[r.index()] += 1);
    }
    remove_dead(f, &defs);
    compact(f);
}

/// Drops pure instructions whose value nobody reads (a backward pass, so
/// chains of dead computations go at once).
fn remove_dead(f: &mut Function, defs: &[u32]) {
    let mut uses = vec![0u32; f.regs.len()];
    for i in &mut f.body {
        for_uses(i, |r| uses[r.index()] += 1);
    }
    let mut keep = vec![true; f.body.len()];
    for idx in (0..f.body.len()).rev() {
        let i = &mut f.body[idx];
        let Some((_, dst)) = pure(&f.regs, i) else {
            continue;
        };
        if uses[dst.index()] == 0 && defs[dst.index()] == 1 {
            keep[idx] = false;
            for_uses(i, |r| uses[r.index()] -= 1);
        }
    }
    let mut k = keep.iter();
    f.body.retain(|_| *k.next().unwrap_or(&true));
}

/// Renumbers the registers still in use densely, in their old order.
fn compact(f: &mut Function) {
    let mut used = vec![false; f.regs.len()];
    for i in &mut f.body {
        for_uses(i, |r| used[r.index()] = true);
        for_defs(i, |r| used[r.index()] = true);
    }
    let mut map = vec![Reg(0); f.regs.len()];
    let mut regs = Vec::new();
    for (old, ty) in f.regs.iter().enumerate() {
        if used[old] {
            map[old] = Reg(regs.len() as u32);
            regs.push(*ty);
        }
    }
    for i in &mut f.body {
        for_uses(i, |r| *r = map[r.index()]);
        // (A wgmma's accumulators, read and written, are renamed once.)
        if !matches!(i, Inst::Wgmma { .. }) {
            for_defs(i, |r| *r = map[r.index()]);
        }
    }
    f.regs = regs;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `dst = %tid.x` widened, then `a op 2^k` of it and of a value that
    /// may be negative, both stored so they stay live.
    fn function(op: BinOp) -> Function {
        let r = |i: u32| Reg(i);
        let body = vec![
            Inst::Special {
                dst: r(0),
                reg: Special::TidX,
            },
            Inst::Cvt {
                to: Ty::S64,
                from: Ty::U32,
                round: Round::None,
                dst: r(1),
                src: r(0),
            },
            Inst::Bin {
                op,
                ty: Ty::S64,
                dst: r(2),
                a: Operand::Reg(r(1)),
                b: Operand::Int(16),
            },
            Inst::Bin {
                op: BinOp::Sub,
                ty: Ty::S64,
                dst: r(3),
                a: Operand::Int(0),
                b: Operand::Reg(r(1)),
            },
            Inst::Bin {
                op,
                ty: Ty::S64,
                dst: r(4),
                a: Operand::Reg(r(3)),
                b: Operand::Int(16),
            },
            Inst::St {
                space: Space::Global,
                ty: Ty::S64,
                addr: Addr::Reg(r(5), 0),
                src: Operand::Reg(r(2)),
                guard: None,
            },
            Inst::St {
                space: Space::Global,
                ty: Ty::S64,
                addr: Addr::Reg(r(5), 8),
                src: Operand::Reg(r(4)),
                guard: None,
            },
        ];
        Function {
            name: "k".into(),
            params: Vec::new(),
            threads: 32,
            min_blocks: 1,
            shared: Vec::new(),
            shared_bytes: 0,
            local_bytes: 0,
            persistent: None,
            regs: vec![Ty::U32, Ty::S64, Ty::S64, Ty::S64, Ty::S64, Ty::U64],
            body,
        }
    }

    fn ops(f: &Function) -> Vec<(BinOp, Operand)> {
        f.body
            .iter()
            .filter_map(|i| match i {
                Inst::Bin { op, b, .. } if *op != BinOp::Sub => Some((*op, *b)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn division_of_an_index_by_a_power_of_two_is_a_shift() {
        let mut f = function(BinOp::Div);
        optimize(&mut f);
        // The thread index is a shift; a value that may be negative keeps
        // its (round-toward-zero) division.
        assert_eq!(
            ops(&f),
            vec![
                (BinOp::Shr, Operand::Int(4)),
                (BinOp::Div, Operand::Int(16))
            ]
        );
    }

    #[test]
    fn remainder_of_an_index_by_a_power_of_two_is_a_mask() {
        let mut f = function(BinOp::Rem);
        optimize(&mut f);
        assert_eq!(
            ops(&f),
            vec![
                (BinOp::And, Operand::Int(15)),
                (BinOp::Rem, Operand::Int(16))
            ]
        );
    }

    #[test]
    fn a_value_rounded_to_bf16_is_not_rounded_again_when_packed() {
        // Rounded to `fmt`, widened, then packed as bf16.
        let chain = |fmt: &str| {
            crate::fold::tests::optimised(&format!(
                "\tcvt.rn.f32.u32 %f0, %r0;\n\
                 \tcvt.rn.{fmt}.f32 %rs0, %f0;\n\
                 \tcvt.f32.{fmt} %f1, %rs0;\n\
                 \tcvt.rn.bf16x2.f32 %r1, %f1, %f1;\n\
                 \tst.global.b32 [%rd1], %r1;\n"
            ))
        };
        let out = chain("bf16");
        assert!(out.contains("cvt.rn.bf16x2.f32 %r1, %f0, %f0;"), "{out}");
        assert!(!out.contains("cvt.rn.bf16.f32"), "{out}");
        // Rounded to fp16 then packed as bf16: both roundings stay.
        let out = chain("f16");
        assert!(out.contains("cvt.rn.f16.f32"), "{out}");
    }
}

//! Register types: each register's IR type, inferred from the instructions
//! that write it so that the printer prints the same name and `mov` suffix,
//! and the check that every register operand is of a class its instruction
//! accepts.
//!
//! A register's type is the suffix of a `mov` that writes it if there is
//! one (the printer writes `mov.{type of the destination}`), else the
//! result type of the first instruction that writes it, else its declared
//! type. A candidate that does not fit the declaration (a `mov.b32` into a
//! `.f32` register) is passed over.

use super::func::{Regs, Stmt};
use super::ReadError;
use crate::ir::{Addr, Guard, Inst, Operand, Param, Reg, Space, Ty};

/// The type with PTX name `s` (without the dot).
pub(super) fn ty_named(s: &str) -> Option<Ty> {
    Some(match s {
        "pred" => Ty::Pred,
        "b16" => Ty::B16,
        "b32" => Ty::B32,
        "b64" => Ty::B64,
        "u8" => Ty::U8,
        "s8" => Ty::S8,
        "s16" => Ty::S16,
        "u32" => Ty::U32,
        "u64" => Ty::U64,
        "s32" => Ty::S32,
        "s64" => Ty::S64,
        "f32" => Ty::F32,
        "f64" => Ty::F64,
        _ => return None,
    })
}

/// The printer's register class of a type (its name prefix).
fn class(ty: Ty) -> &'static str {
    match ty {
        Ty::Pred => "p",
        Ty::B16 | Ty::S16 => "rs",
        Ty::B32 | Ty::U32 | Ty::S32 | Ty::U8 | Ty::S8 => "r",
        Ty::B64 | Ty::U64 | Ty::S64 => "rd",
        Ty::F32 => "f",
        Ty::F64 => "fd",
    }
}

/// A class, described for messages.
fn class_text(ty: Ty) -> &'static str {
    match class(ty) {
        "p" => "a predicate (`%p`)",
        "rs" => "a 16-bit (`%rs`)",
        "r" => "a 32-bit (`%r`)",
        "rd" => "a 64-bit (`%rd`)",
        "f" => "an f32 (`%f`)",
        _ => "an f64 (`%fd`)",
    }
}

fn is_bits(ty: Ty) -> bool {
    matches!(ty, Ty::B16 | Ty::B32 | Ty::B64)
}

/// Whether a register declared `declared` may take type `ty`: the same
/// class, or any type of its size when declared untyped (`.b32`).
fn fits(declared: Ty, ty: Ty) -> bool {
    class(declared) == class(ty) || (is_bits(declared) && declared.bytes() == ty.bytes())
}

/// Whether a register of type `have` may stand where `want` is needed: the
/// same class or, as PTX allows, untyped bits of the same size.
fn compatible(want: Ty, have: Ty) -> bool {
    class(want) == class(have)
        || ((is_bits(want) || is_bits(have))
            && want.bytes() == have.bytes()
            && want != Ty::Pred
            && have != Ty::Pred)
}

/// The destination type of a packing conversion to `fmt`.
fn pack_ty(fmt: crate::ir::Fmt) -> Ty {
    if fmt.is_fp8() {
        Ty::B16
    } else {
        Ty::B32
    }
}

/// The registers an instruction other than `mov` writes, each with the
/// type it writes.
fn defs(i: &Inst, params: &[Param]) -> Vec<(Reg, Ty)> {
    match *i {
        Inst::Special { dst, .. } | Inst::SharedBase { dst } => vec![(dst, Ty::U32)],
        Inst::LocalBase { dst } => vec![(dst, Ty::U64)],
        Inst::LdV { ty, ref dst, .. } => dst.iter().map(|r| (*r, ty.reg())).collect(),
        Inst::Bin { ty, dst, .. }
        | Inst::Un { ty, dst, .. }
        | Inst::Fma { ty, dst, .. }
        | Inst::Selp { ty, dst, .. } => vec![(dst, ty)],
        Inst::Setp { dst, .. } | Inst::PredOp { dst, .. } => vec![(dst, Ty::Pred)],
        Inst::Cvt { to, dst, .. } => vec![(dst, to)],
        Inst::CvtHalf { widen, dst, .. } => {
            vec![(dst, if widen { Ty::F32 } else { Ty::B16 })]
        }
        Inst::Ld { ty, dst, .. } => vec![(dst, ty.reg())],
        Inst::LdParam { dst, param } => {
            params.get(param).map(|p| (dst, p.ty)).into_iter().collect()
        }
        Inst::CvtPack { fmt, dst, .. } => vec![(dst, pack_ty(fmt))],
        Inst::CvtF8Widen { dst, .. } => vec![(dst, Ty::U32)],
        Inst::CvtTf32 { dst, .. } | Inst::Join { dst, .. } => vec![(dst, Ty::B32)],
        Inst::Mma { d, fmt, .. } => d.iter().map(|r| (*r, fmt[0].acc())).collect(),
        _ => Vec::new(),
    }
}

/// A register operand: the register, the types it may have (any type
/// compatible with one of them), and which operand it is.
struct Use {
    reg: Reg,
    want: [Option<Ty>; 2],
    role: &'static str,
}

/// The name of operand `n` (from 1), for messages.
fn nth(n: usize) -> &'static str {
    const NAMES: [&str; 4] = ["operand 1", "operand 2", "operand 3", "operand 4"];
    n.checked_sub(1)
        .and_then(|i| NAMES.get(i))
        .copied()
        .unwrap_or("an operand")
}

/// The type an address register of `space` has.
fn addr_ty(space: Space) -> Ty {
    match space {
        Space::Global | Space::Local => Ty::U64,
        Space::Shared => Ty::U32,
    }
}

/// The register operands of a load (values are operand 1) or store
/// (values are operand 2): the values in `ty`'s register type, the address
/// and the guard.
fn memory(
    space: Space,
    ty: Ty,
    values: &[Operand],
    n: usize,
    addr: &Addr,
    g: &Option<Guard>,
    push: &mut dyn FnMut(Reg, &[Ty], &'static str),
) {
    for v in values {
        if let Operand::Reg(r) = v {
            push(*r, &[ty.reg()], nth(n));
        }
    }
    if let Addr::Reg(r, _) = addr {
        push(*r, &[addr_ty(space)], "the address");
    }
    if let Some(g) = g {
        push(g.pred, &[Ty::Pred], "the guard");
    }
}

/// Every register operand of an instruction.
fn uses(i: &Inst, mov_ty: Option<Ty>, params: &[Param]) -> Vec<Use> {
    let mut out = Vec::new();
    let mut push = |reg: Reg, tys: &[Ty], role: &'static str| {
        out.push(Use {
            reg,
            want: [tys.first().copied(), tys.get(1).copied()],
            role,
        })
    };
    let op = |o: &Operand, ty: Ty, n: usize, push: &mut dyn FnMut(Reg, &[Ty], &'static str)| {
        if let Operand::Reg(r) = o {
            push(*r, &[ty], nth(n));
        }
    };
    let guard = |g: &Option<Guard>, push: &mut dyn FnMut(Reg, &[Ty], &'static str)| {
        if let Some(g) = g {
            push(g.pred, &[Ty::Pred], "the guard");
        }
    };
    match i {
        Inst::Mov { dst, src } => {
            let ty = mov_ty.unwrap_or(Ty::B32);
            push(*dst, &[ty], nth(1));
            op(src, ty, 2, &mut push);
        }
        Inst::Special { dst, .. } | Inst::SharedBase { dst } => push(*dst, &[Ty::U32], nth(1)),
        Inst::LocalBase { dst } => push(*dst, &[Ty::U64], nth(1)),
        Inst::Bin {
            op: o,
            ty,
            dst,
            a,
            b,
        } => {
            push(*dst, &[*ty], nth(1));
            op(a, *ty, 2, &mut push);
            if let (crate::ir::BinOp::Shl | crate::ir::BinOp::Shr, Operand::Reg(r)) = (o, b) {
                // PTX shifts take a 32-bit amount.
                push(*r, &[*ty, Ty::U32], nth(3));
            } else {
                op(b, *ty, 3, &mut push);
            }
        }
        Inst::Un { ty, dst, a, .. } => {
            push(*dst, &[*ty], nth(1));
            op(a, *ty, 2, &mut push);
        }
        Inst::Fma { ty, dst, a, b, c } => {
            push(*dst, &[*ty], nth(1));
            op(a, *ty, 2, &mut push);
            op(b, *ty, 3, &mut push);
            op(c, *ty, 4, &mut push);
        }
        Inst::Setp { ty, dst, a, b, .. } => {
            push(*dst, &[Ty::Pred], nth(1));
            op(a, *ty, 2, &mut push);
            op(b, *ty, 3, &mut push);
        }
        Inst::Selp {
            ty,
            dst,
            a,
            b,
            pred,
        } => {
            push(*dst, &[*ty], nth(1));
            op(a, *ty, 2, &mut push);
            op(b, *ty, 3, &mut push);
            push(*pred, &[Ty::Pred], nth(4));
        }
        Inst::PredOp { op: o, dst, a, b } => {
            push(*dst, &[Ty::Pred], nth(1));
            push(*a, &[Ty::Pred], nth(2));
            if o.is_some() {
                push(*b, &[Ty::Pred], nth(3));
            }
        }
        Inst::Cvt {
            to, from, dst, src, ..
        } => {
            push(*dst, &[*to], nth(1));
            push(*src, &[*from], nth(2));
        }
        Inst::CvtHalf {
            widen, dst, src, ..
        } => {
            let (d, s) = if *widen {
                (Ty::F32, Ty::B16)
            } else {
                (Ty::B16, Ty::F32)
            };
            push(*dst, &[d], nth(1));
            push(*src, &[s], nth(2));
        }
        Inst::Ld {
            space,
            ty,
            dst,
            addr,
            guard: g,
        } => {
            let dst = [Operand::Reg(*dst)];
            memory(*space, *ty, &dst, 1, addr, g, &mut push);
        }
        Inst::LdV {
            space,
            ty,
            dst,
            addr,
            guard: g,
        } => {
            let dst: Vec<Operand> = dst.iter().map(|r| Operand::Reg(*r)).collect();
            memory(*space, *ty, &dst, 1, addr, g, &mut push);
        }
        Inst::St {
            space,
            ty,
            addr,
            src,
            guard: g,
        } => memory(
            *space,
            *ty,
            std::slice::from_ref(src),
            2,
            addr,
            g,
            &mut push,
        ),
        Inst::StV {
            space,
            ty,
            addr,
            src,
            guard: g,
        } => {
            let src: Vec<Operand> = src.iter().map(|r| Operand::Reg(*r)).collect();
            memory(*space, *ty, &src, 2, addr, g, &mut push);
        }
        Inst::LdParam { dst, param } => {
            if let Some(p) = params.get(*param) {
                push(*dst, &[p.ty], nth(1));
            }
        }
        Inst::CvtPack { fmt, dst, hi, lo } => {
            push(*dst, &[pack_ty(*fmt)], nth(1));
            push(*hi, &[Ty::F32], nth(2));
            push(*lo, &[Ty::F32], nth(3));
        }
        Inst::CvtF8Widen { dst, src, .. } => {
            push(*dst, &[Ty::U32], nth(1));
            push(*src, &[Ty::B16], nth(2));
        }
        Inst::CvtTf32 { dst, src, .. } => {
            push(*dst, &[Ty::B32], nth(1));
            push(*src, &[Ty::F32], nth(2));
        }
        Inst::Join { dst, lo, hi } => {
            push(*dst, &[Ty::B32], nth(1));
            push(*lo, &[Ty::B16], nth(2));
            push(*hi, &[Ty::B16], nth(3));
        }
        Inst::Mma { fmt, d, a, b, c } => {
            let acc = fmt[0].acc();
            for (n, (regs, ty)) in [
                (&d[..], acc),
                (&a[..], Ty::B32),
                (&b[..], Ty::B32),
                (&c[..], acc),
            ]
            .into_iter()
            .enumerate()
            {
                for r in regs {
                    push(*r, &[ty], nth(n + 1));
                }
            }
        }
        Inst::CpAsync { dst, src, guard: g } => {
            if let Addr::Reg(r, _) = dst {
                push(*r, &[Ty::U32], "the shared address");
            }
            push(*src, &[Ty::U64], "the global address");
            guard(g, &mut push);
        }
        Inst::Bra { guard: g, .. } => guard(g, &mut push),
        Inst::Trap { guard: g } => guard(&Some(*g), &mut push),
        Inst::Ldmatrix { dst, addr, .. } => {
            for r in dst {
                push(*r, &[Ty::B32], nth(1));
            }
            if let Addr::Reg(r, _) = addr {
                push(*r, &[Ty::U32], "the shared address");
            }
        }
        Inst::Shfl { dst, src, b, .. } => {
            push(*dst, &[Ty::B32], nth(1));
            push(*src, &[Ty::B32], nth(2));
            op(b, Ty::U32, 3, &mut push);
        }
        _ => {}
    }
    out
}

/// The IR type of every register of a kernel, after checking that each
/// register operand is of a class its instruction accepts.
pub(super) fn assign(
    body: &[Stmt<'_>],
    regs: &Regs<'_>,
    params: &[Param],
) -> Result<Vec<Ty>, ReadError> {
    let declared = &regs.declared;
    let mut inferred: Vec<Option<Ty>> = vec![None; declared.len()];
    let mut set = |r: Reg, ty: Ty| {
        if let (Some(slot @ None), Some(&d)) =
            (inferred.get_mut(r.index()), declared.get(r.index()))
        {
            if fits(d, ty) {
                *slot = Some(ty);
            }
        }
    };
    for s in body {
        if let (Inst::Mov { dst, .. }, Some(ty)) = (&s.inst, s.mov_ty) {
            set(*dst, ty);
        }
    }
    for s in body {
        for (r, ty) in defs(&s.inst, params) {
            set(r, ty);
        }
    }
    let tys: Vec<Ty> = inferred
        .iter()
        .zip(declared)
        .map(|(i, d)| i.unwrap_or(*d))
        .collect();
    for s in body {
        for Use { reg: r, want, role } in uses(&s.inst, s.mov_ty, params) {
            let Some(&have) = tys.get(r.index()) else {
                continue;
            };
            if !want.iter().flatten().any(|w| compatible(*w, have)) {
                let first = want[0].unwrap_or(have);
                return Err(ReadError::new(
                    s.line,
                    format!(
                        "wrong register class: {role} of `{}` must be {} register, but `{}` is .{}",
                        s.op,
                        class_text(first),
                        regs.name(r),
                        have.name()
                    ),
                ));
            }
        }
    }
    Ok(tys)
}

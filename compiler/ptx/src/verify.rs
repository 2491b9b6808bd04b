//! The Target IR verifier: registers in range and defined before use (in
//! program order), predicates where predicates belong, branch targets that
//! exist, labels defined once, parameters and shared offsets in range.

use crate::ir::*;
use std::collections::HashSet;

/// A verification failure.
#[derive(Clone, Debug, PartialEq)]
pub struct VerifyError {
    /// The kernel.
    pub function: String,
    /// What is wrong.
    pub message: String,
}

/// Checks every function of `m`.
pub fn verify(m: &Module) -> Result<(), VerifyError> {
    for f in &m.functions {
        let files = m.files.len() as u32;
        if let Some(Inst::Loc { file, .. }) = f
            .body
            .iter()
            .find(|i| matches!(i, Inst::Loc { file, .. } if *file == 0 || *file > files))
        {
            return Err(VerifyError {
                function: f.name.clone(),
                message: format!(".loc names file {file}, but the module has {files}"),
            });
        }
        verify_function(f).map_err(|message| VerifyError {
            function: f.name.clone(),
            message,
        })?;
    }
    Ok(())
}

/// The registers an instruction reads and writes.
pub fn uses_defs(i: &Inst) -> (Vec<Reg>, Vec<Reg>) {
    let op = |o: &Operand| match o {
        Operand::Reg(r) => Some(*r),
        _ => None,
    };
    let addr = |a: &Addr| match a {
        Addr::Reg(r, _) => Some(*r),
        Addr::Shared(_) => None,
    };
    let g = |g: &Option<Guard>| g.map(|g| g.pred);
    match i {
        Inst::Mov { dst, src } => (op(src).into_iter().collect(), vec![*dst]),
        Inst::Special { dst, .. }
        | Inst::LdParam { dst, .. }
        | Inst::SharedBase { dst }
        | Inst::LocalBase { dst } => (vec![], vec![*dst]),
        Inst::LdV {
            dst,
            addr: a,
            guard,
            ..
        } => (
            [addr(a), g(guard)].into_iter().flatten().collect(),
            dst.clone(),
        ),
        Inst::StV {
            addr: a,
            src,
            guard,
            ..
        } => (
            [addr(a), g(guard)]
                .into_iter()
                .flatten()
                .chain(src.iter().copied())
                .collect(),
            vec![],
        ),
        Inst::Bin { dst, a, b, .. } | Inst::Setp { dst, a, b, .. } => {
            ([op(a), op(b)].into_iter().flatten().collect(), vec![*dst])
        }
        Inst::Un { dst, a, .. } => (op(a).into_iter().collect(), vec![*dst]),
        Inst::Fma { dst, a, b, c, .. } => (
            [op(a), op(b), op(c)].into_iter().flatten().collect(),
            vec![*dst],
        ),
        Inst::Selp {
            dst, a, b, pred, ..
        } => (
            [op(a), op(b), Some(*pred)].into_iter().flatten().collect(),
            vec![*dst],
        ),
        Inst::PredOp { dst, a, b, .. } => (vec![*a, *b], vec![*dst]),
        Inst::Cvt { dst, src, .. }
        | Inst::CvtHalf { dst, src, .. }
        | Inst::CvtF8Widen { dst, src, .. }
        | Inst::CvtTf32 { dst, src, .. } => (vec![*src], vec![*dst]),
        Inst::Join { dst, lo, hi } => (vec![*lo, *hi], vec![*dst]),
        Inst::Ld {
            dst,
            addr: a,
            guard,
            ..
        } => (
            [addr(a), g(guard)].into_iter().flatten().collect(),
            vec![*dst],
        ),
        Inst::St {
            addr: a,
            src,
            guard,
            ..
        } => (
            [addr(a), op(src), g(guard)].into_iter().flatten().collect(),
            vec![],
        ),
        Inst::Red {
            addr: a,
            src,
            guard,
            ..
        } => (
            [addr(a), Some(*src), g(guard)]
                .into_iter()
                .flatten()
                .collect(),
            vec![],
        ),
        Inst::Bra { guard, .. } => (g(guard).into_iter().collect(), vec![]),
        Inst::Trap { guard } => (vec![guard.pred], vec![]),
        Inst::CpAsync {
            dst: d, src, guard, ..
        } => (
            [addr(d), Some(*src), g(guard)]
                .into_iter()
                .flatten()
                .collect(),
            vec![],
        ),
        Inst::Shfl { dst, src, b, .. } => (
            [Some(*src), op(b)].into_iter().flatten().collect(),
            vec![*dst],
        ),
        Inst::Ldmatrix { dst, addr: a, .. } => (addr(a).into_iter().collect(), dst.clone()),
        Inst::CpAsyncCommit
        | Inst::CpAsyncWait(_)
        | Inst::WgmmaFence
        | Inst::WgmmaCommit
        | Inst::WgmmaWait(_)
        | Inst::FenceProxyAsync => (vec![], vec![]),
        Inst::MbarInit { addr: a, .. } => (addr(a).into_iter().collect(), vec![]),
        Inst::MbarExpectTx { addr: a, guard, .. } | Inst::MbarArrive { addr: a, guard } => {
            ([addr(a), g(guard)].into_iter().flatten().collect(), vec![])
        }
        Inst::MbarTryWait {
            dst,
            addr: a,
            parity,
        } => (
            [addr(a), op(parity)].into_iter().flatten().collect(),
            vec![*dst],
        ),
        Inst::TmaLoad {
            dst,
            map,
            coords,
            mbar,
            guard,
        } => (
            [addr(dst), Some(*map), addr(mbar), g(guard)]
                .into_iter()
                .flatten()
                .chain(coords.iter().copied())
                .collect(),
            vec![],
        ),
        Inst::FenceTensorMap { map } => (vec![*map], vec![]),
        Inst::Elect { dst } => (vec![], vec![*dst]),
        Inst::Wgmma {
            d,
            a,
            b,
            accumulate,
            ..
        } => (
            match a {
                WgmmaA::Desc(r) => vec![*r],
                WgmmaA::Regs(rs) => rs.to_vec(),
            }
            .into_iter()
            .chain([*b])
            .chain(d.iter().copied().filter(|_| *accumulate))
            .collect(),
            d.clone(),
        ),
        Inst::CvtPack { dst, hi, lo, .. } => (vec![*hi, *lo], vec![*dst]),
        Inst::Mma { d, a, b, c, .. } => (a.iter().chain(b).chain(c).copied().collect(), d.to_vec()),
        Inst::Barrier
        | Inst::NamedBarrier { .. }
        | Inst::SetMaxNReg { .. }
        | Inst::Label(_)
        | Inst::Ret
        | Inst::Comment(_)
        | Inst::Loc { .. }
        | Inst::Source(_) => (vec![], vec![]),
    }
}

fn verify_function(f: &Function) -> Result<(), String> {
    let mut labels = HashSet::new();
    for i in &f.body {
        if let Inst::Label(l) = i {
            if !labels.insert(l.0) {
                return Err(format!("label $L{} is defined twice", l.0));
            }
        }
    }
    let mut defined = vec![false; f.regs.len()];
    for (n, i) in f.body.iter().enumerate() {
        let (uses, defs) = uses_defs(i);
        for r in uses.iter().chain(&defs) {
            if r.index() >= f.regs.len() {
                return Err(format!(
                    "instruction {n} names register {r} which does not exist"
                ));
            }
        }
        for r in &uses {
            if !defined[r.index()] {
                return Err(format!(
                    "instruction {n} ({i:?}) reads {r} before any definition"
                ));
            }
        }
        for r in &defs {
            defined[r.index()] = true;
        }
        let is_pred = |r: Reg| f.regs[r.index()] == Ty::Pred;
        match i {
            Inst::Setp { dst, .. }
            | Inst::PredOp { dst, .. }
            | Inst::MbarTryWait { dst, .. }
            | Inst::Elect { dst }
                if !is_pred(*dst) =>
            {
                return Err(format!("instruction {n} writes a predicate into {dst}"));
            }
            Inst::Selp { pred, .. } if !is_pred(*pred) => {
                return Err(format!("instruction {n} selects on non-predicate {pred}"));
            }
            Inst::Ld { guard: Some(g), .. }
            | Inst::St { guard: Some(g), .. }
            | Inst::Red { guard: Some(g), .. }
            | Inst::Bra { guard: Some(g), .. }
            | Inst::TmaLoad { guard: Some(g), .. }
            | Inst::MbarExpectTx { guard: Some(g), .. }
            | Inst::MbarArrive { guard: Some(g), .. }
            | Inst::Trap { guard: g }
                if !is_pred(g.pred) =>
            {
                return Err(format!(
                    "instruction {n} is guarded by non-predicate {}",
                    g.pred
                ));
            }
            Inst::Bra { target, .. } if !labels.contains(&target.0) => {
                return Err(format!(
                    "instruction {n} branches to undefined label $L{}",
                    target.0
                ));
            }
            Inst::Mma { fmt: [a, b], .. }
                if a != b && !(a.is_fp8() && b.is_fp8()) && !(a.is_int() && b.is_int()) =>
            {
                return Err(format!(
                    "instruction {n} multiplies {} by {} (mma operands share a format, \
                     but for the two fp8 ones and the two 8-bit integer ones)",
                    a.name(),
                    b.name()
                ));
            }
            Inst::Wgmma {
                fmt: [a, b],
                trans_a,
                trans_b,
                ..
            } if (a != b && !(a.is_fp8() && b.is_fp8()))
                || a.is_int()
                || b.is_int()
                || (!a.wgmma_transposes() && (*trans_a || *trans_b)) =>
            {
                return Err(format!(
                    "instruction {n} is a wgmma of {} by {}{}: its operands share a 16-bit or \
                     tf32 format or are both fp8, read K-major unless 16-bit",
                    a.name(),
                    b.name(),
                    if *trans_a || *trans_b {
                        " transposed"
                    } else {
                        ""
                    }
                ));
            }
            Inst::CvtPack { fmt: Fmt::Tf32, .. } => {
                return Err(format!(
                    "instruction {n} packs tf32, which has no pair form"
                ));
            }
            Inst::CvtF8Widen { fmt, .. } if !fmt.is_fp8() => {
                return Err(format!("instruction {n} widens {} as fp8", fmt.name()));
            }
            Inst::NamedBarrier { id, threads }
                if !(1..16).contains(id)
                    || *threads == 0
                    || threads % 32 != 0
                    || *threads > f.threads.next_multiple_of(32) =>
            {
                return Err(format!(
                    "instruction {n} is `bar.sync {id}, {threads}`: named barriers are 1 to 15, \
                     for a positive multiple of 32 threads, at most the block's {}",
                    f.threads
                ));
            }
            Inst::SetMaxNReg { regs, .. } if !(24..=256).contains(regs) || regs % 8 != 0 => {
                return Err(format!(
                    "instruction {n} sets {regs} registers per thread: setmaxnreg takes \
                     24 to 256, a multiple of 8"
                ));
            }
            Inst::LdParam { param, .. } if *param >= f.params.len() => {
                return Err(format!(
                    "instruction {n} reads parameter {param} which does not exist"
                ));
            }
            Inst::Ld {
                space: Space::Shared,
                addr: Addr::Shared(o),
                ty,
                ..
            }
            | Inst::St {
                space: Space::Shared,
                addr: Addr::Shared(o),
                ty,
                ..
            } if *o < 0 || (*o as u64) + u64::from(ty.bytes()) > f.shared_bytes => {
                return Err(format!(
                    "instruction {n} reaches shared byte {o}, past the {} allocated",
                    f.shared_bytes
                ));
            }
            _ => {}
        }
    }
    if !matches!(f.body.last(), Some(Inst::Ret)) {
        return Err("the kernel does not end in `ret`".into());
    }
    Ok(())
}

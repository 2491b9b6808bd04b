//! The PTX printer: the text form of Target IR.
//!
//! Registers are renamed per type (`%p` predicates, `%rs` 16-bit, `%r`
//! 32-bit integers, `%rd` 64-bit, `%f` f32, `%fd` f64), as nvcc does, and
//! declared once per kernel. The output is deterministic.

use crate::ir::*;
use std::fmt::{self, Write};

/// The register-name prefix of a type.
fn prefix(ty: Ty) -> &'static str {
    match ty {
        Ty::Pred => "p",
        Ty::B16 | Ty::S16 => "rs",
        Ty::B32 | Ty::U32 | Ty::S32 | Ty::U8 | Ty::S8 => "r",
        Ty::B64 | Ty::U64 | Ty::S64 => "rd",
        Ty::F32 => "f",
        Ty::F64 => "fd",
    }
}

/// The declared type of a register class.
fn decl_ty(prefix: &str) -> &'static str {
    match prefix {
        "p" => "pred",
        "rs" => "b16",
        "r" => "b32",
        "rd" => "b64",
        "f" => "f32",
        _ => "f64",
    }
}

/// Per-kernel register names: each register's class and number within it.
struct Names {
    names: Vec<(&'static str, u32)>,
    counts: [(&'static str, u32); 6],
}

impl Names {
    fn new(f: &Function) -> Names {
        let mut counts = [
            ("p", 0),
            ("rs", 0),
            ("r", 0),
            ("rd", 0),
            ("f", 0),
            ("fd", 0),
        ];
        let names = f
            .regs
            .iter()
            .map(|ty| {
                let p = prefix(*ty);
                let c = counts
                    .iter_mut()
                    .find(|(q, _)| *q == p)
                    .expect("known prefix");
                c.1 += 1;
                (p, c.1 - 1)
            })
            .collect();
        Names { names, counts }
    }

    fn reg(&self, r: Reg) -> RegName {
        let (p, i) = self.names[r.index()];
        RegName(p, i)
    }
}

/// A register's PTX name, `%r12`.
#[derive(Clone, Copy)]
struct RegName(&'static str, u32);

impl fmt::Display for RegName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // By hand: this runs for every operand of every instruction.
        let mut buf = [0u8; 16];
        buf[0] = b'%';
        let p = self.0.as_bytes();
        buf[1..1 + p.len()].copy_from_slice(p);
        let mut digits = [0u8; 10];
        let (mut n, mut i) = (self.1, digits.len());
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        let len = 1 + p.len() + digits.len() - i;
        buf[1 + p.len()..len].copy_from_slice(&digits[i..]);
        f.write_str(std::str::from_utf8(&buf[..len]).map_err(|_| fmt::Error)?)
    }
}

/// An operand printed in the type it is used at.
struct Opnd<'a>(&'a Names, Operand, Ty);

impl fmt::Display for Opnd<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Opnd(n, o, ty) = *self;
        // A float immediate is written in PTX's exact hexadecimal form.
        let float = |f: &mut fmt::Formatter<'_>, x: f64| {
            if ty == Ty::F64 {
                write!(f, "0d{:016X}", x.to_bits())
            } else {
                write!(f, "0f{:08X}", (x as f32).to_bits())
            }
        };
        match o {
            Operand::Reg(r) => n.reg(r).fmt(f),
            Operand::Int(i) if ty.is_float() => float(f, i as f64),
            Operand::Int(i) => i.fmt(f),
            Operand::Float(x) if ty.is_float() => float(f, x),
            Operand::Float(x) => (x as i64).fmt(f),
        }
    }
}

/// An address, `[%rd3+16]`.
struct AddrText<'a>(&'a Names, Addr);

impl fmt::Display for AddrText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (off, base): (i64, &dyn fmt::Display) = match &self.1 {
            Addr::Reg(r, off) => (*off, &self.0.reg(*r)),
            Addr::Shared(off) => (*off, &SHARED_SYMBOL),
        };
        match off {
            0 => write!(f, "[{base}]"),
            o if o > 0 => write!(f, "[{base}+{o}]"),
            o => write!(f, "[{base}{o}]"),
        }
    }
}

/// An instruction's guard prefix, `@!%p3 `, or nothing.
struct GuardText<'a>(&'a Names, Option<Guard>);

impl fmt::Display for GuardText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.1 {
            None => Ok(()),
            Some(Guard { pred, negated }) => {
                write!(
                    f,
                    "@{}{} ",
                    if negated { "!" } else { "" },
                    self.0.reg(pred)
                )
            }
        }
    }
}

/// A register list, `{%f1, %f2}`.
struct List<'a>(&'a Names, &'a [Reg]);

impl fmt::Display for List<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (i, r) in self.1.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            self.0.reg(*r).fmt(f)?;
        }
        f.write_str("}")
    }
}

fn special(s: Special) -> (&'static str, &'static str) {
    let axis = |a: u8| ["x", "y", "z"][a as usize % 3];
    match s {
        Special::TidX => ("tid", "x"),
        Special::Ctaid(a) => ("ctaid", axis(a)),
        Special::Nctaid(a) => ("nctaid", axis(a)),
    }
}

/// The name and modifiers of a binary op in type `ty`.
struct BinName(BinOp, Ty);

impl fmt::Display for BinName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let BinName(op, ty) = *self;
        let t = ty.name();
        match (op, ty.is_float()) {
            (BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div, true) => {
                write!(f, "{}.rn.{t}", op.name())
            }
            (BinOp::Max | BinOp::Min, true) if ty == Ty::F32 => {
                write!(f, "{}.NaN.{t}", op.name())
            }
            (BinOp::Mul, false) => write!(f, "mul.lo.{t}"),
            (BinOp::And | BinOp::Or | BinOp::Xor | BinOp::Shl, false) => {
                let bits = match ty.bytes() {
                    8 => "b64",
                    2 => "b16",
                    _ => "b32",
                };
                write!(f, "{}.{bits}", op.name())
            }
            _ => write!(f, "{}.{t}", op.name()),
        }
    }
}

/// Writes one instruction line.
fn inst(out: &mut String, n: &Names, f: &Function, i: &Inst) -> fmt::Result {
    let reg = |r: &Reg| n.reg(*r);
    let op = |o: &Operand, ty: Ty| Opnd(n, *o, ty);
    out.push('\t');
    match i {
        Inst::Mov { dst, src } => {
            let ty = f.regs[dst.index()];
            let t = match ty {
                Ty::Pred => "pred",
                t => t.name(),
            };
            write!(out, "mov.{t} {}, {};", reg(dst), op(src, ty))
        }
        Inst::Special { dst, reg: s } => {
            let (name, axis) = special(*s);
            write!(out, "mov.u32 {}, %{name}.{axis};", reg(dst))
        }
        Inst::Bin {
            op: o,
            ty,
            dst,
            a,
            b,
        } => write!(
            out,
            "{} {}, {}, {};",
            BinName(*o, *ty),
            reg(dst),
            op(a, *ty),
            op(b, *ty)
        ),
        Inst::Un { op: o, ty, dst, a } => {
            let name = o.name(*ty);
            let t = if *o == UnOp::Not {
                match ty.bytes() {
                    8 => "b64",
                    _ => "b32",
                }
            } else {
                ty.name()
            };
            let ftz = if *ty == Ty::F32 && matches!(o, UnOp::Ex2 | UnOp::Lg2) {
                ".ftz"
            } else {
                ""
            };
            write!(out, "{name}{ftz}.{t} {}, {};", reg(dst), op(a, *ty))
        }
        Inst::Fma { ty, dst, a, b, c } => {
            let name = if ty.is_float() { "fma.rn" } else { "mad.lo" };
            write!(
                out,
                "{name}.{} {}, {}, {}, {};",
                ty.name(),
                reg(dst),
                op(a, *ty),
                op(b, *ty),
                op(c, *ty)
            )
        }
        Inst::Setp { cmp, ty, dst, a, b } => write!(
            out,
            "setp.{}.{} {}, {}, {};",
            cmp.name(*ty),
            ty.name(),
            reg(dst),
            op(a, *ty),
            op(b, *ty)
        ),
        Inst::Selp {
            ty,
            dst,
            a,
            b,
            pred,
        } => write!(
            out,
            "selp.{} {}, {}, {}, {};",
            ty.name(),
            reg(dst),
            op(a, *ty),
            op(b, *ty),
            reg(pred)
        ),
        Inst::PredOp { op: o, dst, a, b } => match o {
            None => write!(out, "not.pred {}, {};", reg(dst), reg(a)),
            Some(o) => write!(
                out,
                "{}.pred {}, {}, {};",
                o.name(),
                reg(dst),
                reg(a),
                reg(b)
            ),
        },
        Inst::Cvt {
            to,
            from,
            round,
            dst,
            src,
        } => {
            let r = match round {
                Round::None => "",
                Round::Nearest => ".rn",
                Round::TowardZero => ".rzi",
            };
            write!(
                out,
                "cvt{r}.{}.{} {}, {};",
                to.name(),
                from.name(),
                reg(dst),
                reg(src)
            )
        }
        Inst::CvtHalf {
            bf16,
            widen,
            dst,
            src,
        } => {
            let h = if *bf16 { "bf16" } else { "f16" };
            if *widen {
                write!(out, "cvt.f32.{h} {}, {};", reg(dst), reg(src))
            } else {
                write!(out, "cvt.rn.{h}.f32 {}, {};", reg(dst), reg(src))
            }
        }
        Inst::Ld {
            space,
            ty,
            dst,
            addr,
            guard,
        } => write!(
            out,
            "{}ld.{}.{} {}, {};",
            GuardText(n, *guard),
            space.name(),
            ty.name(),
            reg(dst),
            AddrText(n, *addr)
        ),
        Inst::St {
            space,
            ty,
            addr,
            src,
            guard,
        } => write!(
            out,
            "{}st.{}.{} {}, {};",
            GuardText(n, *guard),
            space.name(),
            ty.name(),
            AddrText(n, *addr),
            op(src, ty.reg())
        ),
        Inst::LdParam { dst, param } => {
            let p = &f.params[*param];
            write!(out, "ld.param.{} {}, [{}];", p.ty.name(), reg(dst), p.name)
        }
        Inst::SharedBase { dst } => write!(out, "mov.u32 {}, {SHARED_SYMBOL};", reg(dst)),
        Inst::LocalBase { dst } => write!(out, "mov.u64 {}, {LOCAL_SYMBOL};", reg(dst)),
        Inst::LdV {
            space,
            ty,
            dst,
            addr,
            guard,
        } => write!(
            out,
            "{}ld.{}.v{}.{} {}, {};",
            GuardText(n, *guard),
            space.name(),
            dst.len(),
            ty.name(),
            List(n, dst),
            AddrText(n, *addr)
        ),
        Inst::StV {
            space,
            ty,
            addr,
            src,
            guard,
        } => write!(
            out,
            "{}st.{}.v{}.{} {}, {};",
            GuardText(n, *guard),
            space.name(),
            src.len(),
            ty.name(),
            AddrText(n, *addr),
            List(n, src)
        ),
        Inst::CvtPack { fmt, dst, hi, lo } => write!(
            out,
            "cvt.rn{}.{}x2.f32 {}, {}, {};",
            if fmt.is_fp8() { ".satfinite" } else { "" },
            fmt.name(),
            reg(dst),
            reg(hi),
            reg(lo)
        ),
        Inst::CvtF8Widen { fmt, dst, src } => write!(
            out,
            "cvt.rn.f16x2.{}x2 {}, {};",
            fmt.name(),
            reg(dst),
            reg(src)
        ),
        Inst::CvtTf32 { rna, dst, src } => write!(
            out,
            "cvt.{}.tf32.f32 {}, {};",
            if *rna { "rna" } else { "rn" },
            reg(dst),
            reg(src)
        ),
        Inst::Join { dst, lo, hi } => {
            write!(out, "mov.b32 {}, {{{}, {}}};", reg(dst), reg(lo), reg(hi))
        }
        Inst::Mma { fmt, d, a, b, c } => write!(
            out,
            "mma.sync.aligned.m16n8k{}.row.col.f32.{}.{}.f32 {}, {}, {}, {};",
            fmt[0].mma_k(),
            fmt[0].name(),
            fmt[1].name(),
            List(n, d),
            List(n, a),
            List(n, b),
            List(n, c)
        ),
        Inst::CpAsync { dst, src, guard } => write!(
            out,
            "{}cp.async.cg.shared.global {}, [{}], 16;",
            GuardText(n, *guard),
            AddrText(n, *dst),
            reg(src)
        ),
        Inst::Shfl {
            mode,
            dst,
            src,
            b,
            clamp,
        } => write!(
            out,
            "shfl.sync.{}.b32 {}, {}, {}, {clamp}, -1;",
            mode.name(),
            reg(dst),
            reg(src),
            op(b, Ty::U32)
        ),
        Inst::Ldmatrix { trans, dst, addr } => write!(
            out,
            "ldmatrix.sync.aligned.m8n8.x{}{}.shared.b16 {}, {};",
            dst.len(),
            if *trans { ".trans" } else { "" },
            List(n, dst),
            AddrText(n, *addr)
        ),
        Inst::CpAsyncCommit => write!(out, "cp.async.commit_group;"),
        Inst::CpAsyncWait(k) => write!(out, "cp.async.wait_group {k};"),
        Inst::Barrier => write!(out, "bar.sync 0;"),
        Inst::Label(l) => {
            // Labels start at column 0.
            out.pop();
            return writeln!(out, "$L{}:", l.0);
        }
        // A guarded branch may diverge: only an unconditional one is
        // `.uni` for sure.
        Inst::Bra {
            target,
            guard: None,
        } => write!(out, "bra.uni $L{};", target.0),
        Inst::Bra { target, guard } => write!(out, "{}bra $L{};", GuardText(n, *guard), target.0),
        Inst::Ret => write!(out, "ret;"),
        Inst::Comment(c) => write!(out, "// {c}"),
        Inst::Loc { file, line, column } => write!(out, ".loc {file} {line} {column}"),
    }?;
    out.push('\n');
    Ok(())
}

/// The PTX text of one instruction of `f` (without indentation or line
/// break), for messages that quote it.
pub fn instruction(f: &Function, i: &Inst) -> String {
    let n = Names::new(f);
    let mut out = String::new();
    let _ = inst(&mut out, &n, f, i);
    out.trim().to_owned()
}

/// The PTX text of one kernel.
pub fn print_function(out: &mut String, f: &Function) {
    let n = Names::new(f);
    let _ = writeln!(out, ".visible .entry {}(", f.name);
    for (i, p) in f.params.iter().enumerate() {
        let sep = if i + 1 == f.params.len() { "" } else { "," };
        let _ = writeln!(out, "\t.param .{} {}{sep}", p.ty.name(), p.name);
    }
    // The register cap one block of this size allows: without it ptxas may
    // aim for two resident blocks and spill.
    let max_regs = (65536 / f.threads.max(1)).min(255) & !7;
    let _ = writeln!(
        out,
        ")\n.maxntid {}, 1, 1\n.maxnreg {}\n{{",
        f.threads,
        max_regs.max(8)
    );
    for (p, c) in &n.counts {
        if *c > 0 {
            let _ = writeln!(out, "\t.reg .{} %{p}<{c}>;", decl_ty(p));
        }
    }
    if f.local_bytes > 0 {
        let _ = writeln!(
            out,
            "\t.local .align 16 .b8 {LOCAL_SYMBOL}[{}];",
            f.local_bytes
        );
    }
    for s in &f.shared {
        let _ = writeln!(
            out,
            "\t// shared {}: bytes {}..{} of {SHARED_SYMBOL}",
            s.name,
            s.offset,
            s.offset + s.bytes
        );
    }
    // About 32 bytes per instruction: reserve once rather than regrow.
    out.reserve(f.body.len() * 32);
    for i in &f.body {
        let _ = inst(out, &n, f, i);
    }
    let _ = writeln!(out, "}}");
}

/// The PTX text of a module: header, then every kernel.
pub fn print_module(m: &Module) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "//\n// Generated by tsrc {} (Tessera)\n//\n\n.version {}.{}\n.target {}\n.address_size 64\n",
        env!("CARGO_PKG_VERSION"),
        m.version.0,
        m.version.1,
        m.arch
    );
    for (i, name) in m.files.iter().enumerate() {
        let _ = writeln!(out, ".file {} {name:?}", i + 1);
    }
    if !m.files.is_empty() {
        out.push('\n');
    }
    if m.functions.iter().any(|f| f.shared_bytes > 0) {
        let _ = writeln!(out, ".extern .shared .align 16 .b8 {SHARED_SYMBOL}[];\n");
    }
    for (i, f) in m.functions.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        print_function(&mut out, f);
    }
    out
}

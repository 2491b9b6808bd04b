//! The PTX printer: the text form of Target IR.
//!
//! Registers are renamed per type (`%p` predicates, `%rs` 16-bit, `%r`
//! 32-bit integers, `%rd` 64-bit, `%f` f32, `%fd` f64), as nvcc does, and
//! declared once per kernel. The output is deterministic.

use crate::ir::*;
use std::fmt::Write;

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

/// Per-kernel register names.
struct Names {
    names: Vec<String>,
    counts: Vec<(&'static str, u32)>,
}

impl Names {
    fn new(f: &Function) -> Names {
        let mut counts: Vec<(&'static str, u32)> = ["p", "rs", "r", "rd", "f", "fd"]
            .iter()
            .map(|p| (*p, 0))
            .collect();
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
                format!("%{p}{}", c.1 - 1)
            })
            .collect();
        Names { names, counts }
    }

    fn reg(&self, r: Reg) -> &str {
        &self.names[r.index()]
    }
}

/// A float immediate in PTX's exact hexadecimal form.
fn float_imm(x: f64, ty: Ty) -> String {
    if ty == Ty::F64 {
        format!("0d{:016X}", x.to_bits())
    } else {
        format!("0f{:08X}", (x as f32).to_bits())
    }
}

fn operand(n: &Names, o: Operand, ty: Ty) -> String {
    match o {
        Operand::Reg(r) => n.reg(r).to_owned(),
        Operand::Int(i) if ty.is_float() => float_imm(i as f64, ty),
        Operand::Int(i) => i.to_string(),
        Operand::Float(x) if ty.is_float() => float_imm(x, ty),
        Operand::Float(x) => (x as i64).to_string(),
    }
}

fn addr(n: &Names, a: Addr) -> String {
    let (base, off) = match a {
        Addr::Reg(r, off) => (n.reg(r).to_owned(), off),
        Addr::Shared(off) => (SHARED_SYMBOL.to_owned(), off),
    };
    match off {
        0 => format!("[{base}]"),
        o if o > 0 => format!("[{base}+{o}]"),
        o => format!("[{base}{o}]"),
    }
}

fn guard(n: &Names, g: Option<Guard>) -> String {
    match g {
        None => String::new(),
        Some(Guard { pred, negated }) => {
            format!("@{}{} ", if negated { "!" } else { "" }, n.reg(pred))
        }
    }
}

fn special(s: Special) -> String {
    let axis = |a: u8| ["x", "y", "z"][a as usize % 3];
    match s {
        Special::TidX => "%tid.x".to_owned(),
        Special::Ctaid(a) => format!("%ctaid.{}", axis(a)),
        Special::Nctaid(a) => format!("%nctaid.{}", axis(a)),
    }
}

/// The modifiers of a binary op in type `ty`.
fn bin_name(op: BinOp, ty: Ty) -> String {
    let t = ty.name();
    match (op, ty.is_float()) {
        (BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div, true) => {
            format!("{}.rn.{t}", op.name())
        }
        (BinOp::Max | BinOp::Min, true) if ty == Ty::F32 => format!("{}.NaN.{t}", op.name()),
        (BinOp::Mul, false) => format!("mul.lo.{t}"),
        (BinOp::And | BinOp::Or | BinOp::Xor | BinOp::Shl, false) => {
            let bits = match ty.bytes() {
                8 => "b64",
                2 => "b16",
                _ => "b32",
            };
            format!("{}.{bits}", op.name())
        }
        _ => format!("{}.{t}", op.name()),
    }
}

fn inst(out: &mut String, n: &Names, f: &Function, i: &Inst) {
    let line = match i {
        Inst::Mov { dst, src } => {
            let ty = f.regs[dst.index()];
            let t = match ty {
                Ty::Pred => "pred",
                t => t.name(),
            };
            format!("mov.{t} {}, {};", n.reg(*dst), operand(n, *src, ty))
        }
        Inst::Special { dst, reg } => format!("mov.u32 {}, {};", n.reg(*dst), special(*reg)),
        Inst::Bin { op, ty, dst, a, b } => format!(
            "{} {}, {}, {};",
            bin_name(*op, *ty),
            n.reg(*dst),
            operand(n, *a, *ty),
            operand(n, *b, *ty)
        ),
        Inst::Un { op, ty, dst, a } => {
            let name = op.name(*ty);
            let t = if *op == UnOp::Not {
                match ty.bytes() {
                    8 => "b64",
                    _ => "b32",
                }
            } else {
                ty.name()
            };
            let ftz = if *ty == Ty::F32 && matches!(op, UnOp::Ex2 | UnOp::Lg2) {
                ".ftz"
            } else {
                ""
            };
            format!("{name}{ftz}.{t} {}, {};", n.reg(*dst), operand(n, *a, *ty))
        }
        Inst::Fma { ty, dst, a, b, c } => {
            let name = if ty.is_float() { "fma.rn" } else { "mad.lo" };
            format!(
                "{name}.{} {}, {}, {}, {};",
                ty.name(),
                n.reg(*dst),
                operand(n, *a, *ty),
                operand(n, *b, *ty),
                operand(n, *c, *ty)
            )
        }
        Inst::Setp { cmp, ty, dst, a, b } => format!(
            "setp.{}.{} {}, {}, {};",
            cmp.name(*ty),
            ty.name(),
            n.reg(*dst),
            operand(n, *a, *ty),
            operand(n, *b, *ty)
        ),
        Inst::Selp {
            ty,
            dst,
            a,
            b,
            pred,
        } => format!(
            "selp.{} {}, {}, {}, {};",
            ty.name(),
            n.reg(*dst),
            operand(n, *a, *ty),
            operand(n, *b, *ty),
            n.reg(*pred)
        ),
        Inst::PredOp { op, dst, a, b } => match op {
            None => format!("not.pred {}, {};", n.reg(*dst), n.reg(*a)),
            Some(op) => format!(
                "{}.pred {}, {}, {};",
                op.name(),
                n.reg(*dst),
                n.reg(*a),
                n.reg(*b)
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
            format!(
                "cvt{r}.{}.{} {}, {};",
                to.name(),
                from.name(),
                n.reg(*dst),
                n.reg(*src)
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
                format!("cvt.f32.{h} {}, {};", n.reg(*dst), n.reg(*src))
            } else {
                format!("cvt.rn.{h}.f32 {}, {};", n.reg(*dst), n.reg(*src))
            }
        }
        Inst::Ld {
            space,
            ty,
            dst,
            addr: a,
            guard: g,
        } => format!(
            "{}ld.{}.{} {}, {};",
            guard(n, *g),
            space.name(),
            ty.name(),
            n.reg(*dst),
            addr(n, *a)
        ),
        Inst::St {
            space,
            ty,
            addr: a,
            src,
            guard: g,
        } => format!(
            "{}st.{}.{} {}, {};",
            guard(n, *g),
            space.name(),
            ty.name(),
            addr(n, *a),
            operand(n, *src, ty.reg())
        ),
        Inst::LdParam { dst, param } => {
            let p = &f.params[*param];
            format!("ld.param.{} {}, [{}];", p.ty.name(), n.reg(*dst), p.name)
        }
        Inst::SharedBase { dst } => format!("mov.u32 {}, {SHARED_SYMBOL};", n.reg(*dst)),
        Inst::CvtPack { bf16, dst, hi, lo } => format!(
            "cvt.rn.{}x2.f32 {}, {}, {};",
            if *bf16 { "bf16" } else { "f16" },
            n.reg(*dst),
            n.reg(*hi),
            n.reg(*lo)
        ),
        Inst::Mma { bf16, d, a, b, c } => {
            let list = |rs: &[Reg]| {
                let names: Vec<&str> = rs.iter().map(|r| n.reg(*r)).collect();
                format!("{{{}}}", names.join(", "))
            };
            let t = if *bf16 { "bf16" } else { "f16" };
            format!(
                "mma.sync.aligned.m16n8k16.row.col.f32.{t}.{t}.f32 {}, {}, {}, {};",
                list(d),
                list(a),
                list(b),
                list(c)
            )
        }
        Inst::Barrier => "bar.sync 0;".to_owned(),
        Inst::Label(l) => {
            let _ = writeln!(out, "$L{}:", l.0);
            return;
        }
        Inst::Bra { target, guard: g } => format!("{}bra.uni $L{};", guard(n, *g), target.0),
        Inst::Ret => "ret;".to_owned(),
        Inst::Comment(c) => format!("// {c}"),
    };
    let _ = writeln!(out, "\t{line}");
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
    for s in &f.shared {
        let _ = writeln!(
            out,
            "\t// shared {}: bytes {}..{} of {SHARED_SYMBOL}",
            s.name,
            s.offset,
            s.offset + s.bytes
        );
    }
    for i in &f.body {
        inst(out, &n, f, i);
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

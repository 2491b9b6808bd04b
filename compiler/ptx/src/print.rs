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
}

/// A float immediate in PTX's exact hexadecimal form, at type `ty`.
fn float_imm(out: &mut String, x: f64, ty: Ty) {
    let _ = if ty == Ty::F64 {
        write!(out, "0d{:016X}", x.to_bits())
    } else {
        write!(out, "0f{:08X}", (x as f32).to_bits())
    };
}

fn special(s: Special) -> (&'static str, &'static str) {
    let axis = |a: u8| ["x", "y", "z"][a as usize % 3];
    match s {
        Special::TidX => ("tid", "x"),
        Special::Ctaid(a) => ("ctaid", axis(a)),
        Special::Nctaid(a) => ("nctaid", axis(a)),
    }
}

/// One instruction line under construction: pieces pushed straight onto
/// the output (`core::fmt` per operand was most of the printer's time).
struct Line<'a> {
    out: &'a mut String,
    n: &'a Names,
}

impl Line<'_> {
    fn s(&mut self, text: &str) -> &mut Self {
        self.out.push_str(text);
        self
    }

    fn int(&mut self, i: i64) -> &mut Self {
        let mut digits = [0u8; 20];
        let (mut v, mut at) = (i.unsigned_abs(), digits.len());
        loop {
            at -= 1;
            digits[at] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        if i < 0 {
            self.out.push('-');
        }
        self.s(std::str::from_utf8(&digits[at..]).unwrap_or("0"))
    }

    fn reg(&mut self, r: Reg) -> &mut Self {
        let (p, i) = self.n.names[r.index()];
        self.out.push('%');
        self.out.push_str(p);
        self.int(i64::from(i))
    }

    /// An operand in the type it is used at.
    fn op(&mut self, o: Operand, ty: Ty) -> &mut Self {
        match o {
            Operand::Reg(r) => self.reg(r),
            Operand::Int(i) if !ty.is_float() => self.int(i),
            Operand::Float(x) if !ty.is_float() => self.int(x as i64),
            Operand::Int(i) => {
                float_imm(self.out, i as f64, ty);
                self
            }
            Operand::Float(x) => {
                float_imm(self.out, x, ty);
                self
            }
        }
    }

    /// An address, `[%rd3+16]`.
    fn addr(&mut self, a: Addr) -> &mut Self {
        self.out.push('[');
        let off = match a {
            Addr::Reg(r, off) => {
                self.reg(r);
                off
            }
            Addr::Shared(off) => {
                self.s(SHARED_SYMBOL);
                off
            }
        };
        if off > 0 {
            self.out.push('+');
        }
        if off != 0 {
            self.int(off);
        }
        self.s("]")
    }

    /// A guard prefix, `@!%p3 `, or nothing.
    fn guard(&mut self, g: Option<Guard>) -> &mut Self {
        if let Some(Guard { pred, negated }) = g {
            self.s(if negated { "@!" } else { "@" }).reg(pred).s(" ");
        }
        self
    }

    /// A register list, `{%f1, %f2}`.
    fn list(&mut self, regs: &[Reg]) -> &mut Self {
        self.out.push('{');
        for (i, r) in regs.iter().enumerate() {
            if i > 0 {
                self.out.push_str(", ");
            }
            self.reg(*r);
        }
        self.s("}")
    }

    /// `name.suffix dst, a, b...;` for registers and operands.
    fn regs(&mut self, regs: &[Reg]) -> &mut Self {
        for (i, r) in regs.iter().enumerate() {
            self.s(if i == 0 { " " } else { ", " }).reg(*r);
        }
        self.s(";")
    }
}

/// Writes one instruction line.
fn inst(out: &mut String, n: &Names, f: &Function, i: &Inst) -> fmt::Result {
    // A source record not turned into a `.loc` has no text.
    if let Inst::Source(_) = i {
        return Ok(());
    }
    out.push('\t');
    let mut l = Line { out, n };
    match i {
        Inst::Mov { dst, src } => {
            let ty = f.regs[dst.index()];
            let t = match ty {
                Ty::Pred => "pred",
                t => t.name(),
            };
            l.s("mov.")
                .s(t)
                .s(" ")
                .reg(*dst)
                .s(", ")
                .op(*src, ty)
                .s(";");
        }
        Inst::Special { dst, reg: s } => {
            let (name, axis) = special(*s);
            l.s("mov.u32 ")
                .reg(*dst)
                .s(", %")
                .s(name)
                .s(".")
                .s(axis)
                .s(";");
        }
        Inst::Bin {
            op: o,
            ty,
            dst,
            a,
            b,
        } => {
            let t = ty.name();
            let name = o.name();
            match (o, ty.is_float()) {
                (BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div, true) => {
                    l.s(name).s(".rn.").s(t)
                }
                (BinOp::DivFull, _) => l.s("div.full.").s(t),
                (BinOp::Max | BinOp::Min, true) if *ty == Ty::F32 => l.s(name).s(".NaN.").s(t),
                (BinOp::Mul, false) => l.s("mul.lo.").s(t),
                (BinOp::MulHi, _) => l.s("mul.hi.").s(t),
                (BinOp::And | BinOp::Or | BinOp::Xor | BinOp::Shl, false) => {
                    let bits = match ty.bytes() {
                        8 => "b64",
                        2 => "b16",
                        _ => "b32",
                    };
                    l.s(name).s(".").s(bits)
                }
                _ => l.s(name).s(".").s(t),
            };
            l.s(" ")
                .reg(*dst)
                .s(", ")
                .op(*a, *ty)
                .s(", ")
                .op(*b, *ty)
                .s(";");
        }
        Inst::Un { op: o, ty, dst, a } => {
            let t = if *o == UnOp::Not {
                match ty.bytes() {
                    8 => "b64",
                    _ => "b32",
                }
            } else {
                ty.name()
            };
            let ftz = if *ty == Ty::F32 && matches!(o, UnOp::Ex2 | UnOp::Lg2) {
                ".ftz."
            } else {
                "."
            };
            l.s(o.name(*ty))
                .s(ftz)
                .s(t)
                .s(" ")
                .reg(*dst)
                .s(", ")
                .op(*a, *ty)
                .s(";");
        }
        Inst::Fma { ty, dst, a, b, c } => {
            let name = if ty.is_float() { "fma.rn." } else { "mad.lo." };
            l.s(name).s(ty.name()).s(" ").reg(*dst);
            l.s(", ")
                .op(*a, *ty)
                .s(", ")
                .op(*b, *ty)
                .s(", ")
                .op(*c, *ty)
                .s(";");
        }
        Inst::Setp { cmp, ty, dst, a, b } => {
            l.s("setp.")
                .s(cmp.name(*ty))
                .s(".")
                .s(ty.name())
                .s(" ")
                .reg(*dst);
            l.s(", ").op(*a, *ty).s(", ").op(*b, *ty).s(";");
        }
        Inst::Selp {
            ty,
            dst,
            a,
            b,
            pred,
        } => {
            l.s("selp.")
                .s(ty.name())
                .s(" ")
                .reg(*dst)
                .s(", ")
                .op(*a, *ty);
            l.s(", ").op(*b, *ty).s(", ").reg(*pred).s(";");
        }
        Inst::PredOp { op: o, dst, a, b } => match o {
            None => {
                l.s("not.pred").regs(&[*dst, *a]);
            }
            Some(o) => {
                l.s(o.name()).s(".pred").regs(&[*dst, *a, *b]);
            }
        },
        Inst::Cvt {
            to,
            from,
            round,
            dst,
            src,
        } => {
            let r = match round {
                Round::None => "cvt.",
                Round::Nearest => "cvt.rn.",
                Round::TowardZero => "cvt.rzi.",
                Round::NearestInt => "cvt.rni.",
                Round::Floor => "cvt.rmi.",
                Round::Ceil => "cvt.rpi.",
            };
            l.s(r)
                .s(to.name())
                .s(".")
                .s(from.name())
                .regs(&[*dst, *src]);
        }
        Inst::CvtHalf {
            bf16,
            widen,
            dst,
            src,
        } => {
            let h = if *bf16 { "bf16" } else { "f16" };
            if *widen {
                l.s("cvt.f32.").s(h)
            } else {
                l.s("cvt.rn.").s(h).s(".f32")
            }
            .regs(&[*dst, *src]);
        }
        Inst::Ld {
            space,
            ty,
            dst,
            addr,
            guard,
        } => {
            l.guard(*guard)
                .s("ld.")
                .s(space.name())
                .s(".")
                .s(ty.name())
                .s(" ");
            l.reg(*dst).s(", ").addr(*addr).s(";");
        }
        Inst::St {
            space,
            ty,
            addr,
            src,
            guard,
        } => {
            l.guard(*guard)
                .s("st.")
                .s(space.name())
                .s(".")
                .s(ty.name())
                .s(" ");
            l.addr(*addr).s(", ").op(*src, ty.reg()).s(";");
        }
        Inst::Red {
            op,
            ty,
            addr,
            src,
            guard,
        } => {
            l.guard(*guard)
                .s("red.global.")
                .s(op.name())
                .s(".")
                .s(ty.name())
                .s(" ");
            l.addr(*addr).s(", ").reg(*src).s(";");
        }
        Inst::LdParam { dst, param } => {
            let p = &f.params[*param];
            l.s("ld.param.").s(p.ty.name()).s(" ").reg(*dst);
            l.s(", [").s(&p.name).s("];");
        }
        Inst::SharedBase { dst } => {
            l.s("mov.u32 ").reg(*dst).s(", ").s(SHARED_SYMBOL).s(";");
        }
        Inst::LocalBase { dst } => {
            l.s("mov.u64 ").reg(*dst).s(", ").s(LOCAL_SYMBOL).s(";");
        }
        Inst::LdV {
            space,
            ty,
            dst,
            addr,
            guard,
        } => {
            l.guard(*guard)
                .s("ld.")
                .s(space.name())
                .s(".v")
                .int(dst.len() as i64);
            l.s(".")
                .s(ty.name())
                .s(" ")
                .list(dst)
                .s(", ")
                .addr(*addr)
                .s(";");
        }
        Inst::StV {
            space,
            ty,
            addr,
            src,
            guard,
        } => {
            l.guard(*guard)
                .s("st.")
                .s(space.name())
                .s(".v")
                .int(src.len() as i64);
            l.s(".")
                .s(ty.name())
                .s(" ")
                .addr(*addr)
                .s(", ")
                .list(src)
                .s(";");
        }
        Inst::CvtPack { fmt, dst, hi, lo } => {
            l.s(if fmt.is_fp8() {
                "cvt.rn.satfinite."
            } else {
                "cvt.rn."
            });
            l.s(fmt.name()).s("x2.f32").regs(&[*dst, *hi, *lo]);
        }
        Inst::CvtF8Widen { fmt, dst, src } => {
            l.s("cvt.rn.f16x2.")
                .s(fmt.name())
                .s("x2")
                .regs(&[*dst, *src]);
        }
        Inst::CvtTf32 { rna, dst, src } => {
            l.s(if *rna { "cvt.rna" } else { "cvt.rn" });
            l.s(".tf32.f32").regs(&[*dst, *src]);
        }
        Inst::Join { dst, lo, hi } => {
            l.s("mov.b32 ").reg(*dst).s(", ").list(&[*lo, *hi]).s(";");
        }
        Inst::Mma { fmt, d, a, b, c } => {
            let acc = fmt[0].acc().name();
            l.s("mma.sync.aligned.m16n8k").int(fmt[0].mma_k());
            l.s(".row.col.")
                .s(acc)
                .s(".")
                .s(fmt[0].name())
                .s(".")
                .s(fmt[1].name())
                .s(".")
                .s(acc)
                .s(" ");
            l.list(d)
                .s(", ")
                .list(a)
                .s(", ")
                .list(b)
                .s(", ")
                .list(c)
                .s(";");
        }
        Inst::CpAsync { dst, src, guard } => {
            l.guard(*guard).s("cp.async.cg.shared.global ").addr(*dst);
            l.s(", [").reg(*src).s("], 16;");
        }
        Inst::Shfl {
            mode,
            dst,
            src,
            b,
            clamp,
        } => {
            l.s("shfl.sync.")
                .s(mode.name())
                .s(".b32 ")
                .reg(*dst)
                .s(", ")
                .reg(*src);
            l.s(", ")
                .op(*b, Ty::U32)
                .s(", ")
                .int(i64::from(*clamp))
                .s(", -1;");
        }
        Inst::Ldmatrix { trans, dst, addr } => {
            l.s("ldmatrix.sync.aligned.m8n8.x").int(dst.len() as i64);
            l.s(if *trans { ".trans" } else { "" }).s(".shared.b16 ");
            l.list(dst).s(", ").addr(*addr).s(";");
        }
        Inst::Wgmma {
            fmt,
            d,
            a,
            b,
            accumulate,
            trans_a,
            trans_b,
        } => {
            l.s("wgmma.mma_async.sync.aligned.m64n")
                .int(d.len() as i64 * 2)
                .s("k")
                .int(fmt[0].mma_k())
                .s(".f32.")
                .s(fmt[0].name())
                .s(".")
                .s(fmt[1].name())
                .s(" ");
            l.list(d).s(", ");
            match a {
                WgmmaA::Desc(r) => l.reg(*r),
                WgmmaA::Regs(rs) => l.list(rs),
            };
            l.s(", ").reg(*b).s(", ");
            l.int(i64::from(*accumulate)).s(", 1, 1");
            // Only 16-bit formats take transposes; the register form of A
            // has no imm-trans-a.
            if fmt[0].wgmma_transposes() {
                if let WgmmaA::Desc(_) = a {
                    l.s(", ").int(i64::from(*trans_a));
                }
                l.s(", ").int(i64::from(*trans_b));
            }
            l.s(";");
        }
        Inst::WgmmaFence => {
            l.s("wgmma.fence.sync.aligned;");
        }
        Inst::WgmmaCommit => {
            l.s("wgmma.commit_group.sync.aligned;");
        }
        Inst::WgmmaWait(k) => {
            l.s("wgmma.wait_group.sync.aligned ")
                .int(i64::from(*k))
                .s(";");
        }
        Inst::MbarInit { addr, count } => {
            l.s("mbarrier.init.shared::cta.b64 ")
                .addr(*addr)
                .s(", ")
                .int(i64::from(*count))
                .s(";");
        }
        Inst::MbarExpectTx { addr, bytes, guard } => {
            l.guard(*guard)
                .s("mbarrier.arrive.expect_tx.shared::cta.b64 _, ")
                .addr(*addr)
                .s(", ")
                .int(i64::from(*bytes))
                .s(";");
        }
        Inst::MbarArrive { addr, guard } => {
            l.guard(*guard)
                .s("mbarrier.arrive.shared::cta.b64 _, ")
                .addr(*addr)
                .s(";");
        }
        Inst::MbarTryWait { dst, addr, parity } => {
            l.s("mbarrier.try_wait.parity.shared::cta.b64 ")
                .reg(*dst)
                .s(", ")
                .addr(*addr)
                .s(", ")
                .op(*parity, Ty::U32)
                .s(";");
        }
        Inst::TmaLoad {
            dst,
            map,
            coords,
            mbar,
            guard,
        } => {
            l.guard(*guard)
                .s("cp.async.bulk.tensor.")
                .int(coords.len() as i64)
                .s("d.shared::cluster.global.mbarrier::complete_tx::bytes ")
                .addr(*dst)
                .s(", [")
                .reg(*map)
                .s(", ")
                .list(coords)
                .s("], ")
                .addr(*mbar)
                .s(";");
        }
        Inst::FenceTensorMap { map } => {
            l.s("fence.proxy.tensormap::generic.acquire.gpu [")
                .reg(*map)
                .s("], 128;");
        }
        Inst::Elect { dst } => {
            l.s("elect.sync _|").reg(*dst).s(", -1;");
        }
        Inst::FenceProxyAsync => {
            l.s("fence.proxy.async.shared::cta;");
        }
        Inst::CpAsyncCommit => {
            l.s("cp.async.commit_group;");
        }
        Inst::CpAsyncWait(k) => {
            l.s("cp.async.wait_group ").int(i64::from(*k)).s(";");
        }
        Inst::Barrier => {
            l.s("bar.sync 0;");
        }
        Inst::NamedBarrier { id, threads } => {
            l.s("bar.sync ")
                .int(i64::from(*id))
                .s(", ")
                .int(i64::from(*threads))
                .s(";");
        }
        Inst::SetMaxNReg { inc, regs } => {
            l.s(if *inc {
                "setmaxnreg.inc.sync.aligned.u32 "
            } else {
                "setmaxnreg.dec.sync.aligned.u32 "
            })
            .int(i64::from(*regs))
            .s(";");
        }
        Inst::Trap { guard } => {
            l.guard(Some(*guard)).s("trap;");
        }
        Inst::Label(lab) => {
            // Labels start at column 0.
            out.pop();
            return writeln!(out, "$L{}:", lab.0);
        }
        // A guarded branch may diverge: only an unconditional one is
        // `.uni` for sure.
        Inst::Bra {
            target,
            guard: None,
        } => {
            l.s("bra.uni $L").int(i64::from(target.0)).s(";");
        }
        Inst::Bra { target, guard } => {
            l.guard(*guard).s("bra $L").int(i64::from(target.0)).s(";");
        }
        Inst::Ret => {
            l.s("ret;");
        }
        Inst::Comment(c) => {
            l.s("// ").s(c);
        }
        Inst::Loc { file, line, column } => {
            let _ = write!(out, ".loc {file} {line} {column}");
        }
        Inst::Source(_) => {}
    }
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
    // The register cap the blocks per SM allow (one block by default:
    // without a cap ptxas may aim for two resident blocks and spill).
    let blocks = f.min_blocks.max(1);
    let _ = write!(out, ")\n.maxntid {}, 1, 1\n", f.threads);
    if blocks > 1 {
        let _ = writeln!(out, ".minnctapersm {blocks}");
    }
    let _ = writeln!(out, ".maxnreg {}\n{{", max_regs(f.threads, blocks));
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
    if let Some(n) = f.persistent {
        let _ = writeln!(out, "\t// persistent over {n} programs");
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
        // Swizzled wgmma operands need their 1024-byte pattern aligned.
        let wgmma = m
            .functions
            .iter()
            .any(|f| f.body.iter().any(|i| matches!(i, Inst::Wgmma { .. })));
        let align = if wgmma { 1024 } else { 16 };
        let _ = writeln!(
            out,
            ".extern .shared .align {align} .b8 {SHARED_SYMBOL}[];\n"
        );
    }
    for (i, f) in m.functions.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        print_function(&mut out, f);
    }
    out
}

//! The text form of Host IR (`tsrc build --emit host`).

use std::fmt::Write;

use crate::ir::*;

fn kinds(ks: &[Option<Kind>]) -> String {
    let parts: Vec<&str> = ks.iter().map(|k| k.map_or("_", Kind::name)).collect();
    parts.join(", ")
}

fn values(vs: &[Value]) -> String {
    let parts: Vec<String> = vs.iter().map(Value::to_string).collect();
    parts.join(", ")
}

fn cmp(c: Cmp) -> &'static str {
    match c {
        Cmp::Eq => "eq",
        Cmp::Ne => "ne",
        Cmp::Lt => "lt",
        Cmp::Le => "le",
        Cmp::Gt => "gt",
        Cmp::Ge => "ge",
    }
}

/// The text of one site's kind.
pub fn site_kind(k: &SiteKind) -> String {
    match k {
        SiteKind::Op(n) => format!("op {n}"),
        SiteKind::Kernel(n) => format!("kernel {n}"),
        SiteKind::OpParts(n, k) => format!("op {n} parts {k}"),
        SiteKind::Part(i) => format!("part {i}"),
        SiteKind::Builtin(n, d) => format!("builtin {n}<{}>", d.name()),
        SiteKind::Binary(op) => format!("binary {}", op.name()),
        SiteKind::Unary(op) => format!("unary {}", op.name()),
        SiteKind::Index(parts) => {
            let ps: Vec<String> = parts
                .iter()
                .map(|p| match p {
                    IndexPart::Index(_) => "i".into(),
                    IndexPart::NewAxis => "None".into(),
                    IndexPart::Ellipsis(_) => "...".into(),
                    IndexPart::Slice { lo, hi, step, .. } => format!(
                        "{}:{}{}",
                        if *lo { "lo" } else { "" },
                        if *hi { "hi" } else { "" },
                        if *step { ":step" } else { "" }
                    ),
                })
                .collect();
            format!("index [{}]", ps.join(", "))
        }
        SiteKind::Transpose => "transpose".into(),
        SiteKind::Cast(d) => format!("cast {}", d.name()),
        SiteKind::List => "list".into(),
        SiteKind::Str(s) => format!("str {s:?}"),
        SiteKind::Arith => "arith".into(),
        SiteKind::Call(n) => format!("call {n}"),
    }
}

fn inst(m: &HostModule, i: &Inst) -> String {
    match i {
        Inst::IConst(n) => format!("iconst {n}"),
        Inst::FConst(x) => format!("fconst {x:?}"),
        Inst::BConst(b) => format!("bconst {b}"),
        Inst::Int(op, a, b, s) => format!(
            "{} {a}, {b} @{s}",
            match op {
                IntOp::Add => "iadd",
                IntOp::Sub => "isub",
                IntOp::Mul => "imul",
                IntOp::Div => "idiv",
                IntOp::Rem => "irem",
                IntOp::And => "iand",
                IntOp::Or => "ior",
                IntOp::Xor => "ixor",
                IntOp::Shl => "ishl",
                IntOp::Shr => "ishr",
            }
        ),
        Inst::Float(op, a, b) => format!(
            "{} {a}, {b}",
            match op {
                FloatOp::Add => "fadd",
                FloatOp::Sub => "fsub",
                FloatOp::Mul => "fmul",
                FloatOp::Div => "fdiv",
                FloatOp::Rem => "frem",
                FloatOp::Pow => "fpow",
                FloatOp::Max => "fmax",
                FloatOp::Min => "fmin",
            }
        ),
        Inst::ICmp(c, a, b) => format!("icmp.{} {a}, {b}", cmp(*c)),
        Inst::FCmp(c, a, b) => format!("fcmp.{} {a}, {b}", cmp(*c)),
        Inst::And(a, b) => format!("and {a}, {b}"),
        Inst::Or(a, b) => format!("or {a}, {b}"),
        Inst::Not(a) => format!("not {a}"),
        Inst::FNeg(a) => format!("fneg {a}"),
        Inst::IToF(a) => format!("itof {a}"),
        Inst::BToI(a) => format!("btoi {a}"),
        Inst::Get(v) => format!("get {v}"),
        Inst::Set(v, x) => format!("set {v}, {x}"),
        Inst::Call(f, args, s) => format!(
            "call {}({}) @{s}",
            m.functions.get(f.index()).map_or("?", |f| f.name.as_str()),
            values(args)
        ),
        Inst::Runtime(s, args) => format!("runtime {s}({})", values(args)),
        Inst::Retain(a) => format!("retain {a}"),
        Inst::Release(a) => format!("release {a}"),
    }
}

fn fixed_text(f: &Fixed) -> String {
    match f {
        Fixed::Absent => "_".into(),
        Fixed::Tensor(shape, d) => {
            let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
            format!(
                "tensor<{}{}{}>",
                dims.join(", "),
                if dims.is_empty() { "" } else { ", " },
                d.name()
            )
        }
        Fixed::Int(n) => n.to_string(),
        Fixed::Float(x) => format!("{x:?}"),
        Fixed::Bool(b) => b.to_string(),
    }
}

/// The text form of a module: its functions, then its sites.
pub fn print_module(m: &HostModule) -> String {
    let mut out = String::new();
    for f in &m.functions {
        let params: Vec<String> = f.vars[..f.params]
            .iter()
            .enumerate()
            .map(|(i, v)| format!("${i} {}: {}", v.name, v.kind.name()))
            .collect();
        let _ = writeln!(
            out,
            "host fn {}({}) -> {} {{",
            f.name,
            params.join(", "),
            f.ret.map_or("unit", Kind::name)
        );
        for (i, v) in f.vars.iter().enumerate().skip(f.params) {
            let _ = writeln!(out, "    var ${i} {}: {}", v.name, v.kind.name());
        }
        for (b, block) in f.blocks.iter().enumerate() {
            let _ = writeln!(out, "  bb{b}:");
            for d in &block.insts {
                let text = inst(m, &d.inst);
                match d.result {
                    Some(r) => {
                        let _ = writeln!(out, "    {r}: {} = {text}", f.kind(r).name());
                    }
                    None => {
                        let _ = writeln!(out, "    {text}");
                    }
                }
            }
            let term = match &block.term {
                Term::Jump(t) => format!("jump {t}"),
                Term::Branch(c, t, e) => format!("branch {c}, {t}, {e}"),
                Term::Return(Some(v)) => format!("return {v}"),
                Term::Return(None) => "return".into(),
            };
            let _ = writeln!(out, "    {term}");
        }
        out.push_str("}\n\n");
    }
    for (i, s) in m.sites.iter().enumerate() {
        let _ = write!(
            out,
            "site s{i}: {}({}) -> {}",
            site_kind(&s.kind),
            kinds(&s.args),
            s.result.map_or("unit", Kind::name)
        );
        if let Some(fixed) = &s.fixed {
            let parts: Vec<String> = fixed.iter().map(fixed_text).collect();
            let _ = write!(out, " fixed({})", parts.join(", "));
        }
        out.push('\n');
    }
    out
}

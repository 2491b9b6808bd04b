//! Reading one instruction: its operands, then its opcode and modifiers
//! into an [`Inst`], exactly the forms the printer writes (and a few
//! harmless hand-written spellings: `add.f32` for `add.rn.f32`, `bra` for
//! `bra.uni`, `setp.lt.u32` for `setp.lo.u32`).

use super::func::{FnCtx, Stmt};
use super::lex::{Cursor, Tok};
use super::num::{self, Imm};
use super::types::ty_named;
use super::ReadError;
use crate::ir::*;

/// One operand as written.
#[derive(Clone, Debug, PartialEq)]
enum Arg<'a> {
    /// A register, special register, label or symbol.
    Word(&'a str),
    /// An immediate.
    Imm(Imm),
    /// `[base]`, `[base+off]` or `[base-off]`.
    Mem(&'a str, i64),
    /// `{a, b, ...}`.
    List(Vec<&'a str>),
    /// `[base, {a, b, ...}]`: a tensor map and coordinates.
    Tensor(&'a str, Vec<&'a str>),
    /// `a|b`: two destinations (`elect.sync`).
    Pair(&'a str, &'a str),
}

/// The format named `s` in a conversion or `mma` opcode.
fn fmt_named(s: &str) -> Option<Fmt> {
    Some(match s {
        "bf16" => Fmt::Bf16,
        "f16" => Fmt::F16,
        "tf32" => Fmt::Tf32,
        "e4m3" => Fmt::E4m3,
        "e5m2" => Fmt::E5m2,
        "s8" => Fmt::S8,
        "u8" => Fmt::U8,
        _ => return None,
    })
}

/// The operand formats of an `mma` opcode the printer writes
/// (`mma.sync.aligned.m16n8kK.row.col.f32.A.B.f32`, K matching A).
fn mma_formats(op: &str) -> Option<[Fmt; 2]> {
    let parts: Vec<&str> = op.split('.').collect();
    let ["mma", "sync", "aligned", shape, "row", "col", d, a, b, c] = parts[..] else {
        return None;
    };
    let fmt = [fmt_named(a)?, fmt_named(b)?];
    let acc = fmt[0].acc().name();
    (shape == format!("m16n8k{}", fmt[0].mma_k()) && d == acc && c == acc).then_some(fmt)
}

/// Reads one instruction (after its guard, if any) through its `;`.
pub(super) fn instruction<'a>(
    cur: &mut Cursor<'a>,
    f: &mut FnCtx<'a>,
    guard: Option<Guard>,
) -> Result<Stmt<'a>, ReadError> {
    let (op, line) = cur.word("an instruction")?;
    if op.starts_with('.') || op.starts_with('%') || num::is_number(op) {
        return Err(ReadError::new(
            line,
            format!("expected an instruction, found `{op}`"),
        ));
    }
    let args = operands(cur)?;
    let mut b = Builder {
        f,
        op,
        line,
        args,
        mov_ty: None,
    };
    let mut inst = b.build()?;
    let mov_ty = b.mov_ty;
    if matches!(inst, Inst::Trap { .. }) {
        match guard {
            Some(g) => inst = Inst::Trap { guard: g },
            None => {
                return Err(ReadError::new(
                    line,
                    "an unguarded `trap`: only `@p trap;` is supported",
                ))
            }
        }
    } else if let Some(g) = guard {
        match &mut inst {
            Inst::Ld { guard, .. }
            | Inst::St { guard, .. }
            | Inst::Red { guard, .. }
            | Inst::LdV { guard, .. }
            | Inst::StV { guard, .. }
            | Inst::CpAsync { guard, .. }
            | Inst::TmaLoad { guard, .. }
            | Inst::MbarExpectTx { guard, .. }
            | Inst::MbarArrive { guard, .. }
            | Inst::Bra { guard, .. } => *guard = Some(g),
            _ => {
                return Err(ReadError::new(
                    line,
                    format!(
                        "guard on `{op}`: only ld, st, red, cp.async, mbarrier arrivals and bra may be guarded"
                    ),
                ))
            }
        }
    }
    Ok(Stmt {
        inst,
        line,
        op,
        mov_ty,
    })
}

/// Reads comma-separated operands through the `;`.
fn operands<'a>(cur: &mut Cursor<'a>) -> Result<Vec<Arg<'a>>, ReadError> {
    let mut args = Vec::new();
    if cur.eat(';') {
        return Ok(args);
    }
    loop {
        args.push(operand(cur)?);
        if cur.eat(';') {
            return Ok(args);
        }
        if !cur.eat(',') {
            let found = cur.describe_next();
            return Err(cur.error(format!("expected `,` or `;`, found {found}")));
        }
    }
}

/// A number after an optional `-`.
fn signed_number(cur: &mut Cursor<'_>) -> Result<Imm, ReadError> {
    let negative = cur.eat('-');
    let (w, line) = cur.word("a number")?;
    let n = num::number(w)
        .ok_or_else(|| ReadError::new(line, format!("expected a number, found `{w}`")))?;
    Ok(if negative { n.negate() } else { n })
}

/// Reads one operand.
fn operand<'a>(cur: &mut Cursor<'a>) -> Result<Arg<'a>, ReadError> {
    let tok = cur.peek().map(|t| t.tok.clone());
    match tok {
        Some(Tok::Punct('[')) => {
            cur.bump();
            let (base, line) = cur.word("an address")?;
            if cur.eat(',') {
                let Arg::List(coords) = operand(cur)? else {
                    return Err(ReadError::new(
                        line,
                        "expected `{coordinates}` after the tensor map",
                    ));
                };
                cur.expect(']')?;
                return Ok(Arg::Tensor(base, coords));
            }
            if num::is_number(base) {
                return Err(ReadError::new(
                    line,
                    format!("unsupported absolute address `[{base}]`"),
                ));
            }
            let off = if cur.eat('+') {
                signed_number(cur)?
            } else if cur.eat('-') {
                signed_number(cur)?.negate()
            } else {
                Imm::Int(0)
            };
            let off = match off {
                Imm::Int(i) => num::int64(i),
                _ => None,
            }
            .ok_or_else(|| ReadError::new(line, "an address offset must be a 64-bit integer"))?;
            cur.expect(']')?;
            Ok(Arg::Mem(base, off))
        }
        Some(Tok::Punct('{')) => {
            cur.bump();
            let mut regs = Vec::new();
            loop {
                regs.push(cur.word("a register")?.0);
                if cur.eat('}') {
                    return Ok(Arg::List(regs));
                }
                cur.expect(',')?;
            }
        }
        Some(Tok::Punct('-')) => Ok(Arg::Imm(signed_number(cur)?)),
        Some(Tok::Word(w)) if num::is_number(w) => Ok(Arg::Imm(signed_number(cur)?)),
        Some(Tok::Word(w)) => {
            cur.bump();
            if cur.eat('|') {
                return Ok(Arg::Pair(w, cur.word("a register")?.0));
            }
            Ok(Arg::Word(w))
        }
        _ => {
            let found = cur.describe_next();
            Err(cur.error(format!("expected an operand, found {found}")))
        }
    }
}

/// The special register `name` as IR reads it.
fn special(name: &str) -> Option<Special> {
    let axis = |a: &str| match a {
        "x" => Some(0),
        "y" => Some(1),
        "z" => Some(2),
        _ => None,
    };
    let (reg, a) = name.split_once('.')?;
    match reg {
        "%tid" if a == "x" => Some(Special::TidX),
        "%ctaid" => axis(a).map(Special::Ctaid),
        "%nctaid" => axis(a).map(Special::Nctaid),
        _ => None,
    }
}

/// Whether `name` is a PTX special register (supported or not).
fn is_special(name: &str) -> bool {
    const SPECIALS: &[&str] = &[
        "%tid",
        "%ntid",
        "%laneid",
        "%warpid",
        "%nwarpid",
        "%ctaid",
        "%nctaid",
        "%smid",
        "%nsmid",
        "%gridid",
        "%clock",
        "%clock64",
        "%globaltimer",
        "%dynamic_smem_size",
        "%total_smem_size",
        "%clusterid",
        "%nclusterid",
        "%cluster_ctaid",
        "%cluster_nctaid",
    ];
    let head = name.split('.').next().unwrap_or(name);
    SPECIALS.contains(&head)
        || name.starts_with("%lanemask_")
        || name.starts_with("%envreg")
        || name.starts_with("%pm")
}

/// Builds the [`Inst`] of one instruction from its opcode and operands.
struct Builder<'f, 'a> {
    f: &'f mut FnCtx<'a>,
    op: &'a str,
    line: usize,
    args: Vec<Arg<'a>>,
    /// The type a `mov` names.
    mov_ty: Option<Ty>,
}

impl<'a> Builder<'_, 'a> {
    fn err(&self, message: impl Into<String>) -> ReadError {
        ReadError::new(self.line, message)
    }

    fn unsupported(&self) -> ReadError {
        self.err(format!("unsupported instruction `{}`", self.op))
    }

    /// Fails unless there are exactly `n` operands.
    fn count(&self, n: usize) -> Result<(), ReadError> {
        if self.args.len() == n {
            return Ok(());
        }
        let s = if n == 1 { "" } else { "s" };
        Err(self.err(format!(
            "`{}` takes {n} operand{s}, found {}",
            self.op,
            self.args.len()
        )))
    }

    fn arg(&self, i: usize) -> Result<&Arg<'a>, ReadError> {
        self.args
            .get(i)
            .ok_or_else(|| self.err(format!("`{}` is missing operand {}", self.op, i + 1)))
    }

    /// The register named `name`.
    fn named(&self, name: &str) -> Result<Reg, ReadError> {
        if let Some(r) = self.f.regs.lookup(name) {
            return Ok(r);
        }
        Err(self.err(if special(name).is_some() {
            format!("special register `{name}` can only be read by `mov.u32`")
        } else if is_special(name) {
            format!("unsupported special register `{name}`")
        } else if name.starts_with('%') {
            format!("unknown register `{name}`")
        } else {
            format!("expected a register, found `{name}`")
        }))
    }

    /// Operand `i`, which must be a register.
    fn reg(&self, i: usize) -> Result<Reg, ReadError> {
        match self.arg(i)? {
            Arg::Word(w) => self.named(w),
            a => Err(self.err(format!(
                "operand {} of `{}` must be a register, found {}",
                i + 1,
                self.op,
                describe(a)
            ))),
        }
    }

    /// Operand `i`, a register or an immediate of type `ty`.
    fn operand(&self, i: usize, ty: Ty) -> Result<Operand, ReadError> {
        match self.arg(i)? {
            Arg::Word(w) => self.named(w).map(Operand::Reg),
            Arg::Imm(imm) => imm.operand(ty).ok_or_else(|| {
                self.err(format!(
                    "immediate {} does not fit `{}`",
                    describe(&Arg::Imm(*imm)),
                    self.op
                ))
            }),
            a => Err(self.err(format!(
                "operand {} of `{}` must be a register or an immediate, found {}",
                i + 1,
                self.op,
                describe(a)
            ))),
        }
    }

    /// Operand `i`, an integer immediate.
    fn int(&self, i: usize) -> Result<i64, ReadError> {
        match self.arg(i)? {
            Arg::Imm(Imm::Int(v)) => {
                num::int64(*v).ok_or_else(|| self.err(format!("integer {v} does not fit 64 bits")))
            }
            a => Err(self.err(format!(
                "operand {} of `{}` must be an integer, found {}",
                i + 1,
                self.op,
                describe(a)
            ))),
        }
    }

    /// Operand `i`, an address in `space`.
    fn addr(&self, i: usize, space: Space) -> Result<Addr, ReadError> {
        match self.arg(i)? {
            Arg::Mem(base, off) if *base == SHARED_SYMBOL => {
                if space != Space::Shared {
                    return Err(self.err(format!(
                        "`{SHARED_SYMBOL}` is shared memory, but `{}` reaches {} memory",
                        self.op,
                        space.name()
                    )));
                }
                self.smem()?;
                Ok(Addr::Shared(*off))
            }
            Arg::Mem(base, off) => Ok(Addr::Reg(self.named(base)?, *off)),
            a => Err(self.err(format!(
                "operand {} of `{}` must be an address `[...]`, found {}",
                i + 1,
                self.op,
                describe(a)
            ))),
        }
    }

    /// Operand `i`, a list of `n` registers.
    fn list<const N: usize>(&self, i: usize) -> Result<[Reg; N], ReadError> {
        let wrong = |what: String| {
            self.err(format!(
                "operand {} of `{}` must be a list of {N} registers, found {what}",
                i + 1,
                self.op
            ))
        };
        match self.arg(i)? {
            Arg::List(names) => {
                let regs = names
                    .iter()
                    .map(|n| self.named(n))
                    .collect::<Result<Vec<_>, _>>()?;
                let len = regs.len();
                regs.try_into()
                    .map_err(|_| wrong(format!("{len} registers")))
            }
            a => Err(wrong(describe(a))),
        }
    }

    /// Operand `i` must be the sink `_`.
    fn sink(&self, i: usize) -> Result<(), ReadError> {
        match self.arg(i)? {
            Arg::Word("_") => Ok(()),
            a => Err(self.err(format!(
                "operand {} of `{}` must be the sink `_`, found {}",
                i + 1,
                self.op,
                describe(a)
            ))),
        }
    }

    /// Fails unless `tsr_smem` has been declared.
    fn smem(&self) -> Result<(), ReadError> {
        if self.f.smem_declared {
            Ok(())
        } else {
            Err(self.err(format!(
                "`{SHARED_SYMBOL}` is used before `.extern .shared .align 16 .b8 {SHARED_SYMBOL}[]` declares it"
            )))
        }
    }

    /// The instruction.
    fn build(&mut self) -> Result<Inst, ReadError> {
        let parts: Vec<&'a str> = self.op.split('.').collect();
        let head = parts.first().copied().unwrap_or("");
        // The type suffix and the modifiers between the head and it.
        let ty = parts.last().and_then(|t| ty_named(t));
        let mods = parts.get(1..parts.len().saturating_sub(1)).unwrap_or(&[]);
        match head {
            "mov" if parts.len() == 2 => self.mov(ty.ok_or_else(|| self.unsupported())?),
            "add" | "sub" | "mul" | "div" | "rem" | "max" | "min" | "and" | "or" | "xor"
            | "shl" | "shr" => self.bin(head, mods, ty.ok_or_else(|| self.unsupported())?),
            "neg" | "abs" | "not" | "sqrt" | "rsqrt" | "rcp" | "ex2" | "lg2" | "tanh" => {
                self.un(head, mods, ty.ok_or_else(|| self.unsupported())?)
            }
            "fma" | "mad" => {
                let ty = ty.ok_or_else(|| self.unsupported())?;
                let ok = match head {
                    "fma" => ty.is_float() && mods == ["rn"],
                    _ => !ty.is_float() && ty != Ty::Pred && mods == ["lo"],
                };
                if !ok {
                    return Err(self.unsupported());
                }
                self.count(4)?;
                Ok(Inst::Fma {
                    ty,
                    dst: self.reg(0)?,
                    a: self.operand(1, ty)?,
                    b: self.operand(2, ty)?,
                    c: self.operand(3, ty)?,
                })
            }
            "setp" if parts.len() == 3 => {
                let ty = ty.filter(|t| *t != Ty::Pred);
                let cmp = ty.and_then(|t| compare(parts[1], t));
                let (Some(ty), Some(cmp)) = (ty, cmp) else {
                    return Err(self.unsupported());
                };
                self.count(3)?;
                Ok(Inst::Setp {
                    cmp,
                    ty,
                    dst: self.reg(0)?,
                    a: self.operand(1, ty)?,
                    b: self.operand(2, ty)?,
                })
            }
            "selp" if parts.len() == 2 => {
                let ty = ty
                    .filter(|t| *t != Ty::Pred)
                    .ok_or_else(|| self.unsupported())?;
                self.count(4)?;
                Ok(Inst::Selp {
                    ty,
                    dst: self.reg(0)?,
                    a: self.operand(1, ty)?,
                    b: self.operand(2, ty)?,
                    pred: self.reg(3)?,
                })
            }
            "cvt" => self.cvt(&parts),
            "red" if parts.len() == 4 && parts[1] == "global" => self.red(parts[2], ty),
            "ld" | "st" if parts.len() == 3 => self.memory(head, parts[1], ty),
            "ld" | "st" if parts.len() == 4 && matches!(parts[2], "v2" | "v4") => {
                self.vector(head, parts[1], parts[2], ty)
            }
            _ => self.other(),
        }
    }

    /// `mov`, which may also read a special register or `tsr_smem`.
    fn mov(&mut self, ty: Ty) -> Result<Inst, ReadError> {
        self.count(2)?;
        let dst = self.reg(0)?;
        if let Arg::List(_) = self.arg(1)? {
            if ty != Ty::B32 {
                return Err(self.err("only `mov.b32` joins registers `{lo, hi}`"));
            }
            let [lo, hi] = self.list::<2>(1)?;
            return Ok(Inst::Join { dst, lo, hi });
        }
        let word32 = matches!(ty, Ty::U32 | Ty::B32 | Ty::S32);
        if let Arg::Word(w) = self.arg(1)? {
            if *w == LOCAL_SYMBOL {
                if !matches!(ty, Ty::U64 | Ty::B64) {
                    return Err(self.err(format!(
                        "`{LOCAL_SYMBOL}` is a 64-bit local address: read it with `mov.u64`"
                    )));
                }
                if self.f.local_bytes.is_none() {
                    return Err(self.err(format!(
                        "`{LOCAL_SYMBOL}` is used before `.local .align 16 .b8 {LOCAL_SYMBOL}[N]` declares it"
                    )));
                }
                return Ok(Inst::LocalBase { dst });
            }
            if *w == SHARED_SYMBOL {
                if !word32 {
                    return Err(self.err(format!(
                        "`{SHARED_SYMBOL}` is a 32-bit shared address: read it with `mov.u32`"
                    )));
                }
                self.smem()?;
                return Ok(Inst::SharedBase { dst });
            }
            if let Some(s) = special(w) {
                if !word32 {
                    return Err(self.err(format!(
                        "special register `{w}` is 32 bits: read it with `mov.u32`"
                    )));
                }
                return Ok(Inst::Special { dst, reg: s });
            }
        }
        self.mov_ty = Some(ty);
        Ok(Inst::Mov {
            dst,
            src: self.operand(1, ty)?,
        })
    }

    /// Binary operations, and `and`/`or`/`xor` on predicates.
    fn bin(&self, head: &str, mods: &[&str], ty: Ty) -> Result<Inst, ReadError> {
        let op = match head {
            "add" => BinOp::Add,
            "sub" => BinOp::Sub,
            "mul" if mods == ["hi"] => BinOp::MulHi,
            "mul" => BinOp::Mul,
            "div" if mods == ["full"] => BinOp::DivFull,
            "div" => BinOp::Div,
            "rem" => BinOp::Rem,
            "max" => BinOp::Max,
            "min" => BinOp::Min,
            "and" => BinOp::And,
            "or" => BinOp::Or,
            "xor" => BinOp::Xor,
            "shl" => BinOp::Shl,
            _ => BinOp::Shr,
        };
        let logic = matches!(op, BinOp::And | BinOp::Or | BinOp::Xor);
        if ty == Ty::Pred {
            if !logic || !mods.is_empty() {
                return Err(self.unsupported());
            }
            self.count(3)?;
            return Ok(Inst::PredOp {
                op: Some(op),
                dst: self.reg(0)?,
                a: self.reg(1)?,
                b: self.reg(2)?,
            });
        }
        let ok = if ty.is_float() {
            match op {
                BinOp::Add | BinOp::Sub | BinOp::Mul => mods.is_empty() || mods == ["rn"],
                BinOp::Div => mods == ["rn"],
                BinOp::DivFull => ty == Ty::F32,
                BinOp::Max | BinOp::Min if ty == Ty::F32 => mods == ["NaN"],
                BinOp::Max | BinOp::Min => mods.is_empty(),
                _ => false,
            }
        } else if op == BinOp::Mul {
            mods == ["lo"]
        } else if op == BinOp::MulHi {
            mods == ["hi"]
        } else {
            mods.is_empty()
        };
        if !ok {
            return Err(self.unsupported());
        }
        self.count(3)?;
        Ok(Inst::Bin {
            op,
            ty,
            dst: self.reg(0)?,
            a: self.operand(1, ty)?,
            b: self.operand(2, ty)?,
        })
    }

    /// Unary operations, and `not` on predicates.
    fn un(&self, head: &str, mods: &[&str], ty: Ty) -> Result<Inst, ReadError> {
        if head == "not" && ty == Ty::Pred && mods.is_empty() {
            self.count(2)?;
            let a = self.reg(1)?;
            return Ok(Inst::PredOp {
                op: None,
                dst: self.reg(0)?,
                a,
                b: a,
            });
        }
        let float = ty.is_float();
        let (op, ok) = match head {
            "neg" => (UnOp::Neg, mods.is_empty()),
            "abs" => (UnOp::Abs, mods.is_empty()),
            "not" => (UnOp::Not, !float && mods.is_empty()),
            "sqrt" if mods == ["approx"] => (UnOp::SqrtApprox, ty == Ty::F32),
            "sqrt" => (UnOp::Sqrt, float && mods == ["rn"]),
            "rcp" if mods == ["approx", "ftz"] => (UnOp::RcpApprox, float),
            "rcp" => (UnOp::Rcp, float && mods == ["rn"]),
            "rsqrt" => (
                UnOp::RsqrtApprox,
                ty == Ty::F64 && mods == ["approx", "ftz"],
            ),
            "tanh" => (UnOp::Tanh, float && mods == ["approx"]),
            _ => (
                if head == "ex2" { UnOp::Ex2 } else { UnOp::Lg2 },
                float && (mods == ["approx"] || (ty == Ty::F32 && mods == ["approx", "ftz"])),
            ),
        };
        if !ok || ty == Ty::Pred {
            return Err(self.unsupported());
        }
        self.count(2)?;
        Ok(Inst::Un {
            op,
            ty,
            dst: self.reg(0)?,
            a: self.operand(1, ty)?,
        })
    }

    /// Conversions: between IR types, to and from bf16/fp16, and packing.
    fn cvt(&self, parts: &[&str]) -> Result<Inst, ReadError> {
        let half = |h: &str| match h {
            "bf16" => Some(true),
            "f16" => Some(false),
            _ => None,
        };
        let pack = |h: &str| match h {
            "bf16x2" => Some(true),
            "f16x2" => Some(false),
            _ => None,
        };
        let fp8x2 = |h: &str| match h {
            "e4m3x2" => Some(Fmt::E4m3),
            "e5m2x2" => Some(Fmt::E5m2),
            _ => None,
        };
        match parts {
            ["cvt", "f32", h] if half(h).is_some() => {
                self.count(2)?;
                Ok(Inst::CvtHalf {
                    bf16: half(h) == Some(true),
                    widen: true,
                    dst: self.reg(0)?,
                    src: self.reg(1)?,
                })
            }
            ["cvt", "rn", h, "f32"] if half(h).is_some() => {
                self.count(2)?;
                Ok(Inst::CvtHalf {
                    bf16: half(h) == Some(true),
                    widen: false,
                    dst: self.reg(0)?,
                    src: self.reg(1)?,
                })
            }
            ["cvt", "rn", h, "f32"] if pack(h).is_some() => {
                self.count(3)?;
                Ok(Inst::CvtPack {
                    fmt: if pack(h) == Some(true) {
                        Fmt::Bf16
                    } else {
                        Fmt::F16
                    },
                    dst: self.reg(0)?,
                    hi: self.reg(1)?,
                    lo: self.reg(2)?,
                })
            }
            ["cvt", "rn", "satfinite", h, "f32"] => {
                self.count(3)?;
                Ok(Inst::CvtPack {
                    fmt: fp8x2(h).ok_or_else(|| self.unsupported())?,
                    dst: self.reg(0)?,
                    hi: self.reg(1)?,
                    lo: self.reg(2)?,
                })
            }
            ["cvt", "rn", "f16x2", h] => {
                self.count(2)?;
                Ok(Inst::CvtF8Widen {
                    fmt: fp8x2(h).ok_or_else(|| self.unsupported())?,
                    dst: self.reg(0)?,
                    src: self.reg(1)?,
                })
            }
            ["cvt", r @ ("rna" | "rn"), "tf32", "f32"] => {
                self.count(2)?;
                Ok(Inst::CvtTf32 {
                    rna: *r == "rna",
                    dst: self.reg(0)?,
                    src: self.reg(1)?,
                })
            }
            _ => {
                let (round, to, from) = match parts {
                    ["cvt", to, from] => (Round::None, to, from),
                    ["cvt", "rn", to, from] => (Round::Nearest, to, from),
                    ["cvt", "rzi", to, from] => (Round::TowardZero, to, from),
                    ["cvt", "rni", to, from] => (Round::NearestInt, to, from),
                    ["cvt", "rmi", to, from] => (Round::Floor, to, from),
                    ["cvt", "rpi", to, from] => (Round::Ceil, to, from),
                    _ => return Err(self.unsupported()),
                };
                let real = |t: &str| ty_named(t).filter(|t| *t != Ty::Pred);
                let (Some(to), Some(from)) = (real(to), real(from)) else {
                    return Err(self.unsupported());
                };
                self.count(2)?;
                Ok(Inst::Cvt {
                    to,
                    from,
                    round,
                    dst: self.reg(0)?,
                    src: self.reg(1)?,
                })
            }
        }
    }

    /// `ld` and `st` in global or shared memory, and `ld.param`.
    fn memory(&self, head: &str, space: &str, ty: Option<Ty>) -> Result<Inst, ReadError> {
        let ty = ty
            .filter(|t| *t != Ty::Pred)
            .ok_or_else(|| self.unsupported())?;
        self.count(2)?;
        if head == "ld" && space == "param" {
            let dst = self.reg(0)?;
            let name = match self.arg(1)? {
                Arg::Mem(name, 0) => *name,
                a => {
                    return Err(self.err(format!(
                        "`{}` reads a parameter `[name]`, found {}",
                        self.op,
                        describe(a)
                    )))
                }
            };
            let (param, p) = self
                .f
                .params
                .iter()
                .enumerate()
                .find(|(_, p)| p.name == name)
                .ok_or_else(|| self.err(format!("unknown parameter `{name}`")))?;
            if p.ty != ty {
                return Err(self.err(format!(
                    "`{}` reads parameter `{name}`, which is declared `.{}`",
                    self.op,
                    p.ty.name()
                )));
            }
            return Ok(Inst::LdParam { dst, param });
        }
        let space = self.space(space)?;
        Ok(if head == "ld" {
            Inst::Ld {
                space,
                ty,
                dst: self.reg(0)?,
                addr: self.addr(1, space)?,
                guard: None,
            }
        } else {
            Inst::St {
                space,
                ty,
                addr: self.addr(0, space)?,
                src: self.operand(1, ty.reg())?,
                guard: None,
            }
        })
    }

    /// `red.global.OP.TY [a], r`: the combinations and types we emit.
    fn red(&self, op: &str, ty: Option<Ty>) -> Result<Inst, ReadError> {
        let op = match op {
            "add" => RedOp::Add,
            "max" => RedOp::Max,
            "min" => RedOp::Min,
            _ => return Err(self.unsupported()),
        };
        let ty = ty
            .filter(|t| match op {
                RedOp::Add => matches!(t, Ty::S32 | Ty::U32 | Ty::U64 | Ty::F32 | Ty::F64),
                _ => matches!(t, Ty::S32 | Ty::U32 | Ty::S64 | Ty::U64),
            })
            .ok_or_else(|| self.unsupported())?;
        self.count(2)?;
        Ok(Inst::Red {
            op,
            ty,
            addr: self.addr(0, Space::Global)?,
            src: self.reg(1)?,
            guard: None,
        })
    }

    /// A state space of `ld`/`st`.
    fn space(&self, space: &str) -> Result<Space, ReadError> {
        Ok(match space {
            "global" => Space::Global,
            "shared" => Space::Shared,
            "local" => Space::Local,
            _ => return Err(self.unsupported()),
        })
    }

    /// `ld.SPACE.vN.TY {..}, [a]` and `st.SPACE.vN.TY [a], {..}`.
    fn vector(&self, head: &str, space: &str, v: &str, ty: Option<Ty>) -> Result<Inst, ReadError> {
        let ty = ty
            .filter(|t| *t != Ty::Pred)
            .ok_or_else(|| self.unsupported())?;
        let space = self.space(space)?;
        self.count(2)?;
        let (list, addr) = if head == "ld" { (0, 1) } else { (1, 0) };
        let regs = if v == "v2" {
            self.list::<2>(list)?.to_vec()
        } else {
            self.list::<4>(list)?.to_vec()
        };
        let addr = self.addr(addr, space)?;
        Ok(if head == "ld" {
            Inst::LdV {
                space,
                ty,
                dst: regs,
                addr,
                guard: None,
            }
        } else {
            Inst::StV {
                space,
                ty,
                addr,
                src: regs,
                guard: None,
            }
        })
    }

    /// `wgmma.mma_async.sync.aligned.m64nNkK.f32.A.B {d}, adesc, bdesc,
    /// scale-d, 1, 1, trans-a, trans-b` with both operands in shared
    /// memory and constant `scale-d`.
    fn wgmma(&self) -> Result<Inst, ReadError> {
        let parts: Vec<&str> = self.op.split('.').collect();
        let ["wgmma", "mma_async", "sync", "aligned", shape, "f32", a, b] = parts[..] else {
            return Err(self.unsupported());
        };
        let (Some(fa), Some(fb)) = (fmt_named(a), fmt_named(b)) else {
            return Err(self.unsupported());
        };
        let n = shape
            .strip_prefix("m64n")
            .and_then(|s| s.strip_suffix(&format!("k{}", fa.mma_k())))
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|n| n % 8 == 0 && (8..=256).contains(n))
            .ok_or_else(|| self.err(format!("unsupported wgmma shape `{shape}`")))?;
        // The register form of A has no imm-trans-a; formats other than
        // the 16-bit ones no transposes at all.
        let in_regs = matches!(self.arg(1)?, Arg::List(_));
        let transposes = fa.wgmma_transposes();
        self.count(match (in_regs, transposes) {
            (_, false) => 6,
            (true, true) => 7,
            (false, true) => 8,
        })?;
        let d = match self.arg(0)? {
            Arg::List(names) => names
                .iter()
                .map(|r| self.named(r))
                .collect::<Result<Vec<_>, _>>()?,
            a => {
                return Err(self.err(format!(
                    "the accumulators of `{}` must be a register list, found {}",
                    self.op,
                    describe(a)
                )))
            }
        };
        if d.len() != n / 2 {
            return Err(self.err(format!(
                "`{}` takes {} accumulators, found {}",
                self.op,
                n / 2,
                d.len()
            )));
        }
        let flag = |i: usize, what: &str| -> Result<bool, ReadError> {
            match self.int(i)? {
                0 => Ok(false),
                1 => Ok(true),
                v => Err(self.err(format!("`{}`: {what} must be 0 or 1, found {v}", self.op))),
            }
        };
        if self.int(4)? != 1 || self.int(5)? != 1 {
            return Err(self.err(format!(
                "`{}`: only unnegated operands (scale-a = scale-b = 1) are supported",
                self.op
            )));
        }
        let (a, trans_a, trans_b) = match (in_regs, transposes) {
            (true, false) => (WgmmaA::Regs(self.list(1)?), false, false),
            (false, false) => (WgmmaA::Desc(self.reg(1)?), false, false),
            (true, true) => (WgmmaA::Regs(self.list(1)?), false, flag(6, "imm-trans-b")?),
            (false, true) => {
                let a = WgmmaA::Desc(self.reg(1)?);
                (a, flag(6, "imm-trans-a")?, flag(7, "imm-trans-b")?)
            }
        };
        Ok(Inst::Wgmma {
            fmt: [fa, fb],
            d,
            a,
            b: self.reg(2)?,
            accumulate: flag(3, "scale-d")?,
            trans_a,
            trans_b,
        })
    }

    /// Tensor cores, asynchronous copies, barriers and control flow.
    fn other(&mut self) -> Result<Inst, ReadError> {
        if let Some(fmt) = mma_formats(self.op) {
            self.count(4)?;
            return Ok(Inst::Mma {
                fmt,
                d: self.list(0)?,
                a: self.list(1)?,
                b: self.list(2)?,
                c: self.list(3)?,
            });
        }
        match self.op {
            "cp.async.cg.shared.global" => {
                self.count(3)?;
                let dst = self.addr(0, Space::Shared)?;
                let src = match self.arg(1)? {
                    Arg::Mem(base, 0) if *base != SHARED_SYMBOL => self.named(base)?,
                    a => {
                        return Err(self.err(format!(
                            "the source of `{}` must be a register address `[%rd]`, found {}",
                            self.op,
                            describe(a)
                        )))
                    }
                };
                if self.int(2)? != 16 {
                    return Err(self.err(format!("`{}` copies 16 bytes", self.op)));
                }
                Ok(Inst::CpAsync {
                    dst,
                    src,
                    guard: None,
                })
            }
            op if op.starts_with("ldmatrix.sync.aligned.m8n8.") => {
                let rest = &op["ldmatrix.sync.aligned.m8n8.".len()..];
                let (n, trans) = match rest {
                    "x1.shared.b16" => (1, false),
                    "x2.shared.b16" => (2, false),
                    "x4.shared.b16" => (4, false),
                    "x1.trans.shared.b16" => (1, true),
                    "x2.trans.shared.b16" => (2, true),
                    "x4.trans.shared.b16" => (4, true),
                    _ => return Err(self.unsupported()),
                };
                self.count(2)?;
                let dst = match n {
                    1 => self.list::<1>(0)?.to_vec(),
                    2 => self.list::<2>(0)?.to_vec(),
                    _ => self.list::<4>(0)?.to_vec(),
                };
                Ok(Inst::Ldmatrix {
                    trans,
                    dst,
                    addr: self.addr(1, Space::Shared)?,
                })
            }
            "shfl.sync.up.b32" | "shfl.sync.down.b32" | "shfl.sync.bfly.b32"
            | "shfl.sync.idx.b32" => {
                self.count(5)?;
                let mode = match self.op.split('.').nth(2) {
                    Some("up") => ShflMode::Up,
                    Some("down") => ShflMode::Down,
                    Some("bfly") => ShflMode::Bfly,
                    _ => ShflMode::Idx,
                };
                let clamp = u32::try_from(self.int(3)?)
                    .map_err(|_| self.err(format!("bad clamp for `{}`", self.op)))?;
                if !matches!(self.int(4)?, -1 | 0xFFFF_FFFF) {
                    return Err(self.err(format!(
                        "`{}` is supported with the full-warp member mask (-1) only",
                        self.op
                    )));
                }
                Ok(Inst::Shfl {
                    mode,
                    dst: self.reg(0)?,
                    src: self.reg(1)?,
                    b: self.operand(2, Ty::U32)?,
                    clamp,
                })
            }
            op if op.starts_with("wgmma.mma_async.sync.aligned.") => self.wgmma(),
            "wgmma.fence.sync.aligned" => {
                self.count(0)?;
                Ok(Inst::WgmmaFence)
            }
            "wgmma.commit_group.sync.aligned" => {
                self.count(0)?;
                Ok(Inst::WgmmaCommit)
            }
            "wgmma.wait_group.sync.aligned" => {
                self.count(1)?;
                let n = self.int(0)?;
                let n = u32::try_from(n)
                    .map_err(|_| self.err(format!("bad group count {n} for `{}`", self.op)))?;
                Ok(Inst::WgmmaWait(n))
            }
            "mbarrier.init.shared::cta.b64" => {
                self.count(2)?;
                let count = u32::try_from(self.int(1)?)
                    .map_err(|_| self.err(format!("bad arrival count for `{}`", self.op)))?;
                Ok(Inst::MbarInit {
                    addr: self.addr(0, Space::Shared)?,
                    count,
                })
            }
            "mbarrier.arrive.expect_tx.shared::cta.b64" => {
                self.count(3)?;
                self.sink(0)?;
                let bytes = u32::try_from(self.int(2)?)
                    .map_err(|_| self.err(format!("bad byte count for `{}`", self.op)))?;
                Ok(Inst::MbarExpectTx {
                    addr: self.addr(1, Space::Shared)?,
                    bytes,
                    guard: None,
                })
            }
            "mbarrier.arrive.shared::cta.b64" => {
                self.count(2)?;
                self.sink(0)?;
                Ok(Inst::MbarArrive {
                    addr: self.addr(1, Space::Shared)?,
                    guard: None,
                })
            }
            "mbarrier.try_wait.parity.shared::cta.b64" => {
                self.count(3)?;
                Ok(Inst::MbarTryWait {
                    dst: self.reg(0)?,
                    addr: self.addr(1, Space::Shared)?,
                    parity: self.operand(2, Ty::U32)?,
                })
            }
            op if op.starts_with("cp.async.bulk.tensor.") => {
                let dims = op
                    .strip_prefix("cp.async.bulk.tensor.")
                    .and_then(|r| {
                        r.strip_suffix("d.shared::cluster.global.mbarrier::complete_tx::bytes")
                    })
                    .and_then(|d| d.parse::<usize>().ok())
                    .filter(|d| (1..=5).contains(d))
                    .ok_or_else(|| self.unsupported())?;
                self.count(3)?;
                let Arg::Tensor(map, coords) = self.arg(1)? else {
                    return Err(self.err(format!(
                        "operand 2 of `{}` must be `[map, {{coordinates}}]`",
                        self.op
                    )));
                };
                if coords.len() != dims {
                    return Err(self.err(format!(
                        "`{}` takes {dims} coordinates, found {}",
                        self.op,
                        coords.len()
                    )));
                }
                Ok(Inst::TmaLoad {
                    dst: self.addr(0, Space::Shared)?,
                    map: self.named(map)?,
                    coords: coords
                        .iter()
                        .map(|c| self.named(c))
                        .collect::<Result<_, _>>()?,
                    mbar: self.addr(2, Space::Shared)?,
                    guard: None,
                })
            }
            "fence.proxy.tensormap::generic.acquire.gpu" => {
                self.count(2)?;
                let map = match self.arg(0)? {
                    Arg::Mem(base, 0) => self.named(base)?,
                    a => {
                        return Err(self.err(format!(
                            "`{}` needs the map's address `[%rd]`, found {}",
                            self.op,
                            describe(a)
                        )))
                    }
                };
                if self.int(1)? != 128 {
                    return Err(self.err(format!("`{}` fences the map's 128 bytes", self.op)));
                }
                Ok(Inst::FenceTensorMap { map })
            }
            "elect.sync" => {
                self.count(2)?;
                let Arg::Pair("_", p) = self.arg(0)? else {
                    return Err(self.err(format!(
                        "`{}` is supported as `elect.sync _|%p, -1`",
                        self.op
                    )));
                };
                if !matches!(self.int(1)?, -1 | 0xFFFF_FFFF) {
                    return Err(self.err(format!(
                        "`{}` is supported with the full-warp member mask (-1) only",
                        self.op
                    )));
                }
                Ok(Inst::Elect {
                    dst: self.named(p)?,
                })
            }
            "fence.proxy.async.shared::cta" => {
                self.count(0)?;
                Ok(Inst::FenceProxyAsync)
            }
            "cp.async.commit_group" => {
                self.count(0)?;
                Ok(Inst::CpAsyncCommit)
            }
            "cp.async.wait_group" => {
                self.count(1)?;
                let n = self.int(0)?;
                let n = u32::try_from(n)
                    .map_err(|_| self.err(format!("bad group count {n} for `{}`", self.op)))?;
                Ok(Inst::CpAsyncWait(n))
            }
            "bar.sync" => {
                let n = self.int(0)?;
                if self.args.len() == 2 {
                    let threads = self.int(1)?;
                    return match (u32::try_from(n), u32::try_from(threads)) {
                        (Ok(id), Ok(threads)) if (1..16).contains(&id) => {
                            Ok(Inst::NamedBarrier { id, threads })
                        }
                        _ => Err(self.err(format!(
                            "unsupported barrier `bar.sync {n}, {threads}`: named barriers \
                             are 1 to 15"
                        ))),
                    };
                }
                self.count(1)?;
                if n != 0 {
                    return Err(self.err(format!(
                        "unsupported barrier `bar.sync {n}`: `bar.sync 0` is the block's, \
                         other barriers name their thread count"
                    )));
                }
                Ok(Inst::Barrier)
            }
            "setmaxnreg.inc.sync.aligned.u32" | "setmaxnreg.dec.sync.aligned.u32" => {
                self.count(1)?;
                let n = self.int(0)?;
                let regs = u32::try_from(n)
                    .map_err(|_| self.err(format!("bad register count {n} for `{}`", self.op)))?;
                Ok(Inst::SetMaxNReg {
                    inc: self.op.starts_with("setmaxnreg.inc"),
                    regs,
                })
            }
            "bra" | "bra.uni" => {
                self.count(1)?;
                match self.arg(0)? {
                    Arg::Word(w) if !w.starts_with('%') => {
                        let w = *w;
                        Ok(Inst::Bra {
                            target: self.f.labels.use_at(w, self.line),
                            guard: None,
                        })
                    }
                    a => Err(self.err(format!(
                        "`{}` needs a label, found {}",
                        self.op,
                        describe(a)
                    ))),
                }
            }
            "ret" => {
                self.count(0)?;
                Ok(Inst::Ret)
            }
            "trap" => {
                self.count(0)?;
                // The guard comes from the statement's prefix (required).
                Ok(Inst::Trap {
                    guard: Guard {
                        pred: Reg(u32::MAX),
                        negated: false,
                    },
                })
            }
            _ => Err(self.unsupported()),
        }
    }
}

/// The comparison `name` means in type `ty`: the name the printer writes,
/// or for unsigned types also the signed spelling (`lt` for `lo`).
fn compare(name: &str, ty: Ty) -> Option<Cmp> {
    const ALL: [Cmp; 6] = [Cmp::Eq, Cmp::Ne, Cmp::Lt, Cmp::Le, Cmp::Gt, Cmp::Ge];
    if let Some(c) = ALL.into_iter().find(|c| c.name(ty) == name) {
        return Some(c);
    }
    let unsigned = matches!(ty, Ty::U32 | Ty::U64 | Ty::B16 | Ty::B32 | Ty::B64);
    match name {
        "lt" if unsigned => Some(Cmp::Lt),
        "le" if unsigned => Some(Cmp::Le),
        "gt" if unsigned => Some(Cmp::Gt),
        "ge" if unsigned => Some(Cmp::Ge),
        _ => None,
    }
}

/// An operand, described for messages.
fn describe(a: &Arg<'_>) -> String {
    match a {
        Arg::Word(w) => format!("`{w}`"),
        Arg::Imm(Imm::Int(i)) => format!("`{i}`"),
        Arg::Imm(Imm::F32(b)) => format!("`0f{b:08X}`"),
        Arg::Imm(Imm::F64(b)) => format!("`0d{b:016X}`"),
        Arg::Imm(Imm::Dec(x)) => format!("`{x}`"),
        Arg::Mem(base, 0) => format!("`[{base}]`"),
        Arg::Mem(base, off) => format!("`[{base}{off:+}]`"),
        Arg::List(regs) => format!("`{{{}}}`", regs.join(", ")),
        Arg::Tensor(base, regs) => format!("`[{base}, {{{}}}]`", regs.join(", ")),
        Arg::Pair(a, b) => format!("`{a}|{b}`"),
    }
}

//! Reading one `.entry`: its parameters and directives, register
//! declarations, shared-memory comments, labels and body statements.

use super::lex::{Cursor, Tok, Token};
use super::{inst, types, ModuleCtx, ReadError};
use crate::ir::{Function, Guard, Inst, Label, Param, Reg, SharedDecl, Ty, SHARED_SYMBOL};
use std::collections::HashMap;

/// The most registers the kernels of one module may declare together
/// (guards against `.reg .b32 %r<4000000000>`).
pub(super) const MAX_REGS: u32 = 1 << 22;

/// One body statement: the instruction with its registers numbered in
/// declaration order and its labels numbered in order of appearance (both
/// final once [`Labels::resolve`] and [`types::assign`] have run).
pub(super) struct Stmt<'a> {
    /// The instruction.
    pub inst: Inst,
    /// Its line.
    pub line: usize,
    /// Its opcode as written (empty for comments, labels and `.loc`).
    pub op: &'a str,
    /// For a `mov`, the type it names (`mov.s64` → `S64`).
    pub mov_ty: Option<Ty>,
}

/// One `.reg` declaration: a single register or a range `%name<n>`.
struct Decl<'a> {
    /// The first IR register it declares.
    base: u32,
    /// The name, or the range's prefix.
    name: &'a str,
    /// Whether it is a range.
    range: bool,
}

/// The registers of a kernel: every declared PTX register is one IR
/// register, numbered in declaration order.
pub(super) struct Regs<'a> {
    /// Each register's declared type.
    pub declared: Vec<Ty>,
    /// How many registers this kernel may still declare.
    left: u32,
    decls: Vec<Decl<'a>>,
    scalars: HashMap<&'a str, u32>,
    ranges: HashMap<&'a str, (u32, u32)>,
}

impl<'a> Regs<'a> {
    fn new(left: u32) -> Regs<'a> {
        Regs {
            declared: Vec::new(),
            left,
            decls: Vec::new(),
            scalars: HashMap::new(),
            ranges: HashMap::new(),
        }
    }

    /// Declares `count` registers of type `ty`: `%name<count>`, or `%name`
    /// alone when `count` is `None`.
    fn declare(
        &mut self,
        name: &'a str,
        count: Option<u32>,
        ty: Ty,
        line: usize,
    ) -> Result<(), ReadError> {
        let base = self.declared.len() as u32;
        let n = count.unwrap_or(1);
        if n > self.left {
            return Err(ReadError::new(
                line,
                format!("too many registers: a module may declare at most {MAX_REGS}"),
            ));
        }
        self.left -= n;
        let twice = || ReadError::new(line, format!("register `{name}` is declared twice"));
        match count {
            None => {
                if self.lookup(name).is_some() {
                    return Err(twice());
                }
                self.scalars.insert(name, base);
            }
            Some(n) => {
                let clash = self.ranges.contains_key(name)
                    || self.scalars.keys().any(|s| {
                        s.strip_prefix(name)
                            .and_then(canonical)
                            .is_some_and(|i| i < n)
                    });
                if clash {
                    return Err(twice());
                }
                self.ranges.insert(name, (base, n));
            }
        }
        self.decls.push(Decl {
            base,
            name,
            range: count.is_some(),
        });
        self.declared.extend(std::iter::repeat_n(ty, n as usize));
        Ok(())
    }

    /// The register named `name`, if declared.
    pub fn lookup(&self, name: &str) -> Option<Reg> {
        if let Some(&r) = self.scalars.get(name) {
            return Some(Reg(r));
        }
        // `%rd12` is register 12 of range `%rd` (or 2 of `%rd1`).
        let digits = name.bytes().rev().take_while(u8::is_ascii_digit).count();
        let first = name.len() - digits;
        (first..name.len()).find_map(|split| {
            let (prefix, index) = (name.get(..split)?, name.get(split..)?);
            let i = canonical(index)?;
            let &(base, count) = self.ranges.get(prefix)?;
            (i < count).then(|| Reg(base + i))
        })
    }

    /// The PTX name of `r`, for messages.
    pub fn name(&self, r: Reg) -> String {
        let i = self.decls.partition_point(|d| d.base <= r.0);
        match i.checked_sub(1).and_then(|i| self.decls.get(i)) {
            Some(d) if d.range => format!("{}{}", d.name, r.0 - d.base),
            Some(d) => d.name.to_owned(),
            None => format!("register {}", r.0),
        }
    }
}

/// A decimal number written without leading zeros, as in `%r12`.
fn canonical(s: &str) -> Option<u32> {
    let i: u32 = s.parse().ok()?;
    (s.bytes().all(|c| c.is_ascii_digit()) && i.to_string() == s).then_some(i)
}

/// The labels of a kernel, numbered in order of first appearance until
/// [`Labels::resolve`] gives them their final numbers.
pub(super) struct Labels<'a> {
    names: Vec<&'a str>,
    index: HashMap<&'a str, u32>,
    /// The line of each label's definition.
    defined: Vec<Option<usize>>,
    /// The line of each label's first use.
    used: Vec<Option<usize>>,
}

impl<'a> Labels<'a> {
    fn new() -> Labels<'a> {
        Labels {
            names: Vec::new(),
            index: HashMap::new(),
            defined: Vec::new(),
            used: Vec::new(),
        }
    }

    fn intern(&mut self, name: &'a str) -> u32 {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(name);
        self.index.insert(name, i);
        self.defined.push(None);
        self.used.push(None);
        i
    }

    /// The label a branch on `line` names.
    pub fn use_at(&mut self, name: &'a str, line: usize) -> Label {
        let i = self.intern(name);
        if let Some(u) = self.used.get_mut(i as usize) {
            u.get_or_insert(line);
        }
        Label(i)
    }

    /// Defines `name` on `line`.
    fn define(&mut self, name: &'a str, line: usize) -> Result<Label, ReadError> {
        let i = self.intern(name);
        if let Some(d) = self.defined.get_mut(i as usize) {
            if let Some(first) = *d {
                return Err(ReadError::new(
                    line,
                    format!("label `{name}` is defined twice (first on line {first})"),
                ));
            }
            *d = Some(line);
        }
        Ok(Label(i))
    }

    /// The final number of each label: `$L<n>` keeps `n`, other names
    /// follow the largest such `n`. Fails on a label used but not defined.
    fn resolve(&self) -> Result<Vec<u32>, ReadError> {
        let undefined = self
            .names
            .iter()
            .zip(self.defined.iter().zip(&self.used))
            .filter_map(|(n, (d, u))| match (d, u) {
                (None, Some(line)) => Some((*line, *n)),
                _ => None,
            })
            .min();
        if let Some((line, name)) = undefined {
            return Err(ReadError::new(line, format!("undefined label `{name}`")));
        }
        let dollar = |n: &str| n.strip_prefix("$L").and_then(canonical);
        let mut next = match self.names.iter().filter_map(|n| dollar(n)).max() {
            None => 0,
            Some(m) => m.checked_add(1).ok_or_else(|| {
                ReadError::new(
                    self.defined.iter().flatten().copied().max().unwrap_or(1),
                    "label numbers run out: `$L4294967295` leaves none for other labels",
                )
            })?,
        };
        let mut out = Vec::with_capacity(self.names.len());
        for n in &self.names {
            match dollar(n) {
                Some(k) => out.push(k),
                None => {
                    out.push(next);
                    next = next.checked_add(1).ok_or_else(|| {
                        ReadError::new(1, "label numbers run out: too many labels")
                    })?;
                }
            }
        }
        Ok(out)
    }
}

/// What the instruction reader needs of the kernel around it.
pub(super) struct FnCtx<'a> {
    /// Declared registers.
    pub regs: Regs<'a>,
    /// Labels seen so far.
    pub labels: Labels<'a>,
    /// Parameters.
    pub params: Vec<Param>,
    /// Whether `tsr_smem` has been declared.
    pub smem_declared: bool,
    /// Bytes of `tsr_local` (declared in the body), if declared.
    pub local_bytes: Option<u64>,
}

/// Whether `w` can name a kernel, parameter or label.
fn is_ident(w: &str) -> bool {
    let mut c = w.chars();
    matches!(c.next(), Some(ch) if ch.is_ascii_alphabetic() || ch == '_' || ch == '$')
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '$')
}

/// Whether `w` can name a register (`%r`, `%acc`).
fn is_reg_name(w: &str) -> bool {
    w.strip_prefix('%').is_some_and(is_ident)
}

/// Reads one kernel, from `.visible` or `.entry` to its closing brace.
pub(super) fn function(cur: &mut Cursor<'_>, m: &mut ModuleCtx) -> Result<Function, ReadError> {
    cur.eat_word(".visible");
    if !cur.eat_word(".entry") {
        let found = cur.describe_next();
        return Err(cur.error(format!(
            "unsupported declaration {found}: only `.entry` kernels are supported"
        )));
    }
    let (name, line) = cur.word("the kernel's name")?;
    if !is_ident(name) {
        return Err(ReadError::new(line, format!("bad kernel name `{name}`")));
    }
    let params = params(cur)?;
    let mut threads = 1024;
    let mut min_blocks = 1;
    loop {
        if cur.eat_word(".maxntid") {
            threads = cur.u32("a thread count")?;
            for _ in 0..2 {
                if cur.eat(',') && cur.u32("a thread count")? != 1 {
                    return Err(cur.error(
                        "unsupported `.maxntid`: only one-dimensional blocks (`.maxntid N, 1, 1`)",
                    ));
                }
            }
        } else if cur.eat_word(".minnctapersm") {
            min_blocks = cur.u32("a block count")?;
        } else if cur.eat_word(".maxnreg") {
            // The printer recomputes the register cap from the block size.
            cur.u32("a register count")?;
        } else {
            break;
        }
    }
    if !cur.eat('{') {
        let found = cur.describe_next();
        return Err(match cur.peek() {
            Some(Token {
                tok: Tok::Word(w), ..
            }) if w.starts_with('.') => cur.error(format!("unsupported kernel directive {found}")),
            _ => cur.error(format!("expected `{{`, found {found}")),
        });
    }
    let mut f = FnCtx {
        regs: Regs::new(m.regs_left),
        labels: Labels::new(),
        params,
        smem_declared: m.smem_declared,
        local_bytes: None,
    };
    let mut body: Vec<Stmt<'_>> = Vec::new();
    let mut shared = Vec::new();
    let mut persistent = None;
    loop {
        let Some(&Token { ref tok, line }) = cur.peek_raw() else {
            return Err(cur.error(format!("the body of `{name}` has no closing `}}`")));
        };
        match *tok {
            Tok::Comment { text, own_line } => {
                cur.bump();
                if !own_line {
                    // A comment after an instruction: dropped.
                } else if let Some(s) = shared_comment(text).filter(|_| body.is_empty()) {
                    shared.push(s);
                } else if let Some(n) = persistent_comment(text).filter(|_| body.is_empty()) {
                    persistent = Some(n);
                } else {
                    body.push(Stmt {
                        inst: Inst::Comment(text.to_owned()),
                        line,
                        op: "",
                        mov_ty: None,
                    });
                }
            }
            Tok::Punct('}') => {
                cur.bump();
                break;
            }
            Tok::Punct('{') => {
                return Err(ReadError::new(
                    line,
                    "nested `{ }` blocks are not supported",
                ))
            }
            Tok::Punct('@') => {
                cur.bump();
                let negated = cur.eat('!');
                let (p, pline) = cur.word("a guard predicate")?;
                let pred = f
                    .regs
                    .lookup(p)
                    .ok_or_else(|| ReadError::new(pline, format!("unknown register `{p}`")))?;
                let g = Guard { pred, negated };
                body.push(inst::instruction(cur, &mut f, Some(g))?);
            }
            Tok::Word(".reg") => {
                cur.bump();
                reg_decl(cur, &mut f.regs)?;
            }
            Tok::Word(".loc") => {
                cur.bump();
                let file = cur.u32("a file number")?;
                let l = cur.u32("a line number")?;
                let column = cur.u32("a column number")?;
                if file == 0 {
                    return Err(ReadError::new(line, "`.loc` file numbers start at 1"));
                }
                // `.loc` has no `;`: look at the next token without
                // skipping a comment line, which is a statement of its own.
                if matches!(cur.peek_raw().map(|t| &t.tok), Some(Tok::Punct(','))) {
                    return Err(ReadError::new(
                        line,
                        "unsupported `.loc` options: only `.loc FILE LINE COLUMN`",
                    ));
                }
                if m.max_loc_file.is_none_or(|(f, _)| file > f) {
                    m.max_loc_file = Some((file, line));
                }
                body.push(Stmt {
                    inst: Inst::Loc {
                        file,
                        line: l,
                        column,
                    },
                    line,
                    op: "",
                    mov_ty: None,
                });
            }
            Tok::Word(".local") if f.local_bytes.is_none() => {
                cur.bump();
                f.local_bytes = Some(super::local_array(cur, line)?);
            }
            Tok::Word(w @ (".shared" | ".local" | ".global" | ".const")) => {
                return Err(super::variable(cur, line, w))
            }
            Tok::Word(w) if w.starts_with('.') => {
                return Err(ReadError::new(
                    line,
                    format!("unsupported directive `{w}` in a kernel body"),
                ))
            }
            Tok::Word(w)
                if matches!(
                    cur.peek_second_raw(),
                    Some(Token {
                        tok: Tok::Punct(':'),
                        ..
                    })
                ) =>
            {
                if !is_ident(w) {
                    return Err(ReadError::new(line, format!("bad label name `{w}`")));
                }
                cur.bump();
                cur.bump();
                let l = f.labels.define(w, line)?;
                body.push(Stmt {
                    inst: Inst::Label(l),
                    line,
                    op: "",
                    mov_ty: None,
                });
            }
            Tok::Word(_) => body.push(inst::instruction(cur, &mut f, None)?),
            _ => {
                let found = cur.describe_next();
                return Err(ReadError::new(
                    line,
                    format!("expected an instruction, found {found}"),
                ));
            }
        }
    }
    let numbers = f.labels.resolve()?;
    let renumber = |l: &mut Label| {
        if let Some(&n) = numbers.get(l.0 as usize) {
            l.0 = n;
        }
    };
    for s in &mut body {
        match &mut s.inst {
            Inst::Label(l) => renumber(l),
            Inst::Bra { target, .. } => renumber(target),
            _ => {}
        }
    }
    let regs = types::assign(&body, &f.regs, &f.params)?;
    m.regs_left = f.regs.left;
    Ok(Function {
        name: name.to_owned(),
        params: f.params,
        threads,
        min_blocks,
        shared_bytes: shared
            .iter()
            .map(|s: &SharedDecl| s.offset + s.bytes)
            .max()
            .unwrap_or(0),
        shared,
        local_bytes: f.local_bytes.unwrap_or(0),
        persistent,
        regs,
        body: body.into_iter().map(|s| s.inst).collect(),
    })
}

/// Reads `( .param .u64 a, ... )` (the parentheses may be left out when
/// there are no parameters).
fn params(cur: &mut Cursor<'_>) -> Result<Vec<Param>, ReadError> {
    let mut params: Vec<Param> = Vec::new();
    if !cur.eat('(') || cur.eat(')') {
        return Ok(params);
    }
    loop {
        let (p, line) = cur.word("`.param`")?;
        if p != ".param" {
            return Err(ReadError::new(
                line,
                format!("expected `.param`, found `{p}`"),
            ));
        }
        let (t, tline) = cur.word("a parameter type")?;
        let ty = t
            .strip_prefix('.')
            .and_then(types::ty_named)
            .filter(|t| *t != Ty::Pred)
            .ok_or_else(|| {
                ReadError::new(
                    tline,
                    format!("unsupported parameter type or attribute `{t}`"),
                )
            })?;
        let (name, nline) = cur.word("a parameter name")?;
        if name.starts_with('.') {
            return Err(ReadError::new(
                nline,
                format!("unsupported parameter attribute `{name}`"),
            ));
        }
        if !is_ident(name) {
            return Err(ReadError::new(
                nline,
                format!("bad parameter name `{name}`"),
            ));
        }
        if params.iter().any(|p| p.name == name) {
            return Err(ReadError::new(
                nline,
                format!("parameter `{name}` is declared twice"),
            ));
        }
        if cur.eat('[') {
            return Err(ReadError::new(
                nline,
                format!("unsupported array parameter `{name}[]`"),
            ));
        }
        params.push(Param {
            name: name.to_owned(),
            ty,
        });
        if cur.eat(')') {
            return Ok(params);
        }
        cur.expect(',')?;
    }
}

/// Reads the rest of `.reg .b32 %r<12>, %x;`.
fn reg_decl<'a>(cur: &mut Cursor<'a>, regs: &mut Regs<'a>) -> Result<(), ReadError> {
    let (t, line) = cur.word("a register type")?;
    let ty = t
        .strip_prefix('.')
        .and_then(types::ty_named)
        .filter(|t| !matches!(t, Ty::U8 | Ty::S8 | Ty::S16))
        .ok_or_else(|| ReadError::new(line, format!("unsupported register type `{t}`")))?;
    loop {
        let (name, nline) = cur.word("a register name")?;
        if !is_reg_name(name) {
            return Err(ReadError::new(nline, format!("bad register name `{name}`")));
        }
        let count = if cur.eat('<') {
            let n = cur.u32("a register count")?;
            cur.expect('>')?;
            Some(n)
        } else {
            None
        };
        regs.declare(name, count, ty, nline)?;
        if cur.eat(';') {
            return Ok(());
        }
        cur.expect(',')?;
    }
}

/// The programs a persistent kernel's prologue comment `persistent over N
/// programs` names.
fn persistent_comment(text: &str) -> Option<u64> {
    let n = text
        .strip_prefix("persistent over ")?
        .strip_suffix(" programs")?;
    n.parse()
        .ok()
        .filter(|v: &u64| v.to_string() == n && *v > 0)
}

/// The shared buffer a prologue comment
/// `shared NAME: bytes A..B of tsr_smem` describes.
fn shared_comment(text: &str) -> Option<SharedDecl> {
    let rest = text
        .strip_prefix("shared ")?
        .strip_suffix(SHARED_SYMBOL)?
        .strip_suffix(" of ")?;
    let (name, range) = rest.rsplit_once(": bytes ")?;
    let (a, b) = range.split_once("..")?;
    let number = |s: &str| {
        let v: u64 = s.parse().ok()?;
        (v.to_string() == s).then_some(v)
    };
    let (a, b) = (number(a)?, number(b)?);
    Some(SharedDecl {
        name: name.to_owned(),
        offset: a,
        bytes: b.checked_sub(a)?,
    })
}

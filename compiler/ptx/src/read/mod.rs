//! The PTX reader: PTX text back into Target IR, so that the exact PTX our
//! printer writes (and hand-written PTX in the same subset) can be run by a
//! simulator or checked by the verifier.
//!
//! The reader accepts every form [`print_module`](crate::print_module)
//! writes, and `print_module(&read_module(text)?)` gives `text` back
//! exactly for printer output. Anything outside that subset (other
//! instructions or modifiers, variables other than the dynamic shared array
//! `tsr_smem`, special registers other than `%tid.x`, `%ctaid.*` and
//! `%nctaid.*`, guards on instructions other than `ld`, `st`, `cp.async` and
//! `bra`) is a [`ReadError`] naming the line and the construct; no input
//! makes it panic.
//!
//! Pipeline: `lex` splits the text into tokens (with their lines); this
//! module reads the module-level directives; `func` reads each `.entry`
//! (parameters, `.maxntid`, registers, the `// shared NAME: bytes A..B of
//! tsr_smem` prologue comments, labels, body statements) with `inst` reading
//! one instruction; `types` then gives each register its IR type and checks
//! that every register operand is of a class its instruction accepts.
//!
//! Registers: each declared PTX register becomes one IR register, in
//! declaration order (`%p<8>` declares eight), so that within each printer
//! class the numeric order is kept; any names work (`%x`, `%acc<4>`). A
//! register's type is the suffix of a `mov` that writes it, else the result
//! type of the first instruction that writes it, else its declared type:
//! the printer then writes the same name and `mov` suffix.
//!
//! Labels: `$L<n>` keeps `n`; other names get fresh numbers above the
//! largest `$L` number of the kernel, in order of first appearance.
//!
//! Hand-written PTX may also use: any whitespace, several statements on a
//! line or one over several lines, `//` comments after a statement
//! (dropped; a `//` line in a body is an `Inst::Comment`) and `/* */`
//! comments, decimal floats (`1.5`, `-2.5e-1`), hex, octal and binary
//! integers, `bra` for `bra.uni`, `add.f32` for `add.rn.f32`, `setp.lt.u32`
//! for `setp.lo.u32`. A kernel's shared size (`Function::shared_bytes`) is
//! the largest end of its `// shared` prologue comments, 0 without them.

mod func;
mod inst;
mod lex;
mod num;
mod types;

#[cfg(test)]
mod tests;

use crate::ir::{Module, LOCAL_SYMBOL, SHARED_SYMBOL};
use lex::{Cursor, Tok, Token};
use std::fmt;

/// Why PTX text could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadError {
    /// The line (from 1) the problem is on.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl ReadError {
    fn new(line: usize, message: impl Into<String>) -> ReadError {
        ReadError {
            line,
            message: message.into(),
        }
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for ReadError {}

/// What the kernels of a module need to know about the module around them.
struct ModuleCtx {
    /// Whether `.extern .shared ... tsr_smem[]` has been declared.
    smem_declared: bool,
    /// The largest `.loc` file number seen and its line.
    max_loc_file: Option<(u32, usize)>,
    /// How many more registers the module's kernels may declare.
    regs_left: u32,
}

/// Reads a PTX module.
pub fn read_module(text: &str) -> Result<Module, ReadError> {
    let mut cur = Cursor::new(lex::lex(text)?);
    let mut version = None;
    let mut arch = None;
    let mut files = Vec::new();
    let mut functions = Vec::new();
    let mut ctx = ModuleCtx {
        smem_declared: false,
        max_loc_file: None,
        regs_left: func::MAX_REGS,
    };
    loop {
        cur.skip_comments();
        let Some(&Token { ref tok, line }) = cur.peek() else {
            break;
        };
        let word = match tok {
            Tok::Word(w) => *w,
            _ => {
                let found = cur.describe_next();
                return Err(ReadError::new(
                    line,
                    format!("expected a directive, found {found}"),
                ));
            }
        };
        match word {
            ".version" => {
                cur.bump();
                let (v, vline) = cur.word("a PTX version")?;
                let parsed = v
                    .split_once('.')
                    .and_then(|(a, b)| Some((num::unsigned(a)?, num::unsigned(b)?)))
                    .and_then(|(a, b)| Some((u32::try_from(a).ok()?, u32::try_from(b).ok()?)));
                let Some(v) = parsed else {
                    return Err(ReadError::new(
                        vline,
                        format!("expected a PTX version like `8.0`, found `{v}`"),
                    ));
                };
                if version.replace(v).is_some() {
                    return Err(ReadError::new(line, "`.version` is given twice"));
                }
            }
            ".target" => {
                cur.bump();
                let (t, _) = cur.word("a target like `sm_90`")?;
                if cur.eat(',') {
                    let found = cur.describe_next();
                    return Err(cur.error(format!(
                        "unsupported `.target` option {found}: only the architecture is supported"
                    )));
                }
                if arch.replace(t.to_owned()).is_some() {
                    return Err(ReadError::new(line, "`.target` is given twice"));
                }
            }
            ".address_size" => {
                cur.bump();
                let size = cur.u32("an address size")?;
                if size != 64 {
                    return Err(ReadError::new(
                        line,
                        format!("unsupported `.address_size {size}`: only 64 is supported"),
                    ));
                }
            }
            ".file" => {
                cur.bump();
                let n = cur.u32("a file number")?;
                let name = match cur.peek() {
                    Some(Token {
                        tok: Tok::Str(s), ..
                    }) => s.clone(),
                    _ => {
                        let found = cur.describe_next();
                        return Err(cur.error(format!("expected a file name, found {found}")));
                    }
                };
                cur.bump();
                if usize::try_from(n).ok() != Some(files.len() + 1) {
                    return Err(ReadError::new(
                        line,
                        format!(
                            "`.file {n}` is out of order: the next file number is {}",
                            files.len() + 1
                        ),
                    ));
                }
                files.push(name);
            }
            ".extern" => {
                cur.bump();
                extern_shared(&mut cur, line)?;
                ctx.smem_declared = true;
            }
            ".visible" | ".entry" => functions.push(func::function(&mut cur, &mut ctx)?),
            ".shared" | ".global" | ".const" | ".local" | ".tex" | ".weak" => {
                return Err(variable(&mut cur, line, word))
            }
            w if w.starts_with('.') => {
                return Err(ReadError::new(line, format!("unsupported directive `{w}`")))
            }
            w => {
                return Err(ReadError::new(
                    line,
                    format!("expected a directive, found `{w}`"),
                ))
            }
        }
    }
    if let Some((file, line)) = ctx.max_loc_file {
        if usize::try_from(file).map_or(true, |f| f > files.len()) {
            return Err(ReadError::new(
                line,
                format!(
                    "`.loc` names file {file}, but the module declares {}",
                    files.len()
                ),
            ));
        }
    }
    let last = text.lines().count().max(1);
    Ok(Module {
        arch: arch.ok_or_else(|| ReadError::new(last, "the module has no `.target`"))?,
        version: version.ok_or_else(|| ReadError::new(last, "the module has no `.version`"))?,
        files,
        functions,
    })
}

/// Reads the rest of `.extern .shared .align 16 .b8 tsr_smem[];`, the one
/// variable declaration supported.
fn extern_shared(cur: &mut Cursor<'_>, line: usize) -> Result<(), ReadError> {
    if !cur.eat_word(".shared") {
        let found = cur.describe_next();
        return Err(ReadError::new(
            line,
            format!(
                "unsupported `.extern` declaration of {found}: only \
                 `.extern .shared .align 16 .b8 {SHARED_SYMBOL}[]` is supported"
            ),
        ));
    }
    if cur.eat_word(".align") {
        cur.u32("an alignment")?;
    }
    if !cur.eat_word(".b8") {
        return Err(cur.error(format!(
            "unsupported shared array: only `.extern .shared .align 16 .b8 {SHARED_SYMBOL}[]` is supported"
        )));
    }
    let (name, nline) = cur.word("the shared array's name")?;
    if name != SHARED_SYMBOL {
        return Err(ReadError::new(
            nline,
            format!(
                "unsupported shared array `{name}`: only the dynamic `{SHARED_SYMBOL}[]` is supported"
            ),
        ));
    }
    cur.expect('[')?;
    if !cur.eat(']') {
        return Err(cur.error(format!(
            "`{SHARED_SYMBOL}` must be the dynamic array `{SHARED_SYMBOL}[]` (no size)"
        )));
    }
    cur.expect(';')
}

/// Reads the rest of `.local .align 16 .b8 tsr_local[N];` (after
/// `.local`) and returns `N`: a kernel's per-thread local array, the only
/// local variable supported.
fn local_array(cur: &mut Cursor<'_>, line: usize) -> Result<u64, ReadError> {
    if cur.eat_word(".align") {
        cur.u32("an alignment")?;
    }
    let (ty, _) = cur.word("`.b8`")?;
    let (name, nline) = cur.word("the local array's name")?;
    if ty != ".b8" || name != LOCAL_SYMBOL {
        return Err(ReadError::new(
            nline.max(line),
            format!(
                "unsupported local variable `{name}`: only `.local .align 16 .b8 {LOCAL_SYMBOL}[N]` is supported"
            ),
        ));
    }
    cur.expect('[')?;
    let n = cur.u32("the local array's size")?;
    cur.expect(']')?;
    cur.expect(';')?;
    Ok(u64::from(n))
}

/// The error for a variable declaration other than the dynamic shared
/// array, naming the variable where it can be found.
fn variable(cur: &mut Cursor<'_>, line: usize, space: &str) -> ReadError {
    let mut name = None;
    while let Some(t) = cur.peek() {
        match t.tok {
            Tok::Punct(';' | '[' | '=' | '{' | '}') => break,
            Tok::Word(w) if !w.starts_with('.') && !num::is_number(w) => name = Some(w),
            _ => {}
        }
        cur.bump();
    }
    let what = match name {
        Some(n) => format!("variable `{n}`"),
        None => "variable".to_owned(),
    };
    ReadError::new(
        line,
        format!(
            "unsupported `{space}` {what}: the only variable supported is the dynamic \
             `.extern .shared .align 16 .b8 {SHARED_SYMBOL}[]`"
        ),
    )
}

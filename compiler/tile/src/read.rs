//! The Tile IR reader: the text [`print_program`](crate::print::print_program)
//! writes, back into a [`TileProgram`], so that back-end tests can start from
//! Tile IR text (as Cranelift's filetests start from `.clif`).
//!
//! [`read_program`] accepts every form the printer writes, and
//! `print_program(&read_program(text)?)` is `text` again for printer
//! output. Bad input is a [`ReadError`] with a line and a column; no input
//! makes the reader panic (nesting is bounded, numbers are range-checked).
//!
//! Beyond the printer's output, hand-written text may use `//` comments
//! (ignored) and any white space between tokens, except that comments may
//! not split a size expression, and two lists end at a line break: the
//! header's `dims:` list and the operands of `yield` (both may be empty).
//!
//! # What the text does not say
//!
//! The printer writes one type per instruction, after its first result,
//! and none for `for` and `if`. The reader gives every value the type the
//! [`KernelBuilder`](crate::build::KernelBuilder) and the verifier agree on:
//!
//! * every result of an instruction has the type written after it (only
//!   `kahan_add` has two results, both of the running sum's type; `sort`
//!   has two, the values of that type and their int32 indices of its
//!   shape);
//! * a loop's induction variable is an `int64` scalar (the builder's
//!   index type); each carried value and each loop result has the type of
//!   its initial value, which must be defined earlier in the text;
//! * the results of an `if` have the types of the values its `then` arm
//!   yields.
//!
//! Value numbers are kept as written (`%7` is `Value(7)`), so the values of
//! a kernel are numbered as in the text. A number below the largest one
//! that the text neither defines nor uses gets an `int64` scalar type; a
//! number that is used but never defined is an error. Spans are not in
//! the text: kernels get the default span. A load's `other` is written only
//! when it is not zero, so `-0.0` reads back as `0.0`; `vectorize` is
//! written only above 1, so a kernel without it has 1.
//!
//! Names resolve after the fact: `launch` names a kernel defined below the
//! program header; buffer names are looked up among the inputs, temps and
//! outputs; a load's or store's parameter among the kernel's parameters of
//! that name (where two share a name, the one the access can use: a load
//! reads an `in` or `inout` one, a store writes an `out` or `inout` one); a
//! `stage` names a shared buffer of the kernel. A name that matches more
//! than one is an error, since the text cannot say which is meant.

use crate::ir::*;
use std::fmt;
use tessera_core::{BinaryOp, CollectiveKind, Dtype, Policy, Size, UnaryOp};

/// Why Tile IR text could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadError {
    /// The line (from 1) of the problem.
    pub line: usize,
    /// The column (from 1, in characters) of the problem.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {}, column {}: {}",
            self.line, self.column, self.message
        )
    }
}

impl std::error::Error for ReadError {}

/// Reads a whole program: the `program` header, then its kernels.
pub fn read_program(text: &str) -> Result<TileProgram, ReadError> {
    let toks = lex(text)?;
    let mut r = Reader {
        text,
        toks,
        at: 0,
        kernel: KernelState::default(),
    };
    r.program()
}

/// The largest value number accepted (a kernel's values are a dense
/// vector indexed by number).
const MAX_VALUE: u32 = 1 << 20;

/// How deeply `for` and `if` blocks may nest.
const MAX_DEPTH: usize = 64;

/// The type of an induction variable, and of value numbers the text skips.
const INDEX: Dtype = Dtype::Int64;

// ---------------------------------------------------------------------------
// Tokens

/// One token of the text.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Tok<'a> {
    /// `[A-Za-z_][A-Za-z0-9_]*`: keywords, names, dtypes, `inf`, `NaN`.
    Name(&'a str),
    /// `%` and digits: a value (the digits).
    Value(&'a str),
    /// Digits with an optional fraction and exponent (no sign).
    Number(&'a str),
    /// One of `{ } ( ) [ ] , : = * + -`.
    Punct(char),
    /// `->`.
    Arrow,
    /// The end of the text.
    End,
}

/// A token, where it starts, and whether a line break precedes it.
#[derive(Clone, Copy, Debug)]
struct Token<'a> {
    tok: Tok<'a>,
    /// Byte offset of its first character.
    start: usize,
    /// Byte offset just past its last character.
    end: usize,
    /// Whether a line break comes between it and the token before.
    newline_before: bool,
}

/// The line and column (both from 1, the column in characters) of a byte
/// offset.
fn position(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before.get(line_start..).map_or(0, |s| s.chars().count()) + 1;
    (line, column)
}

fn error_at(text: &str, offset: usize, message: impl Into<String>) -> ReadError {
    let (line, column) = position(text, offset);
    ReadError {
        line,
        column,
        message: message.into(),
    }
}

/// Splits `text` into tokens, the last one [`Tok::End`]; `//` comments and
/// white space go.
fn lex(text: &str) -> Result<Vec<Token<'_>>, ReadError> {
    let bytes = text.as_bytes();
    let mut toks = Vec::new();
    let mut i = 0;
    let mut newline_before = false;
    let run = |from: usize, ok: fn(u8) -> bool| {
        from + bytes[from..].iter().take_while(|b| ok(**b)).count()
    };
    while i < bytes.len() {
        let c = bytes[i];
        let start = i;
        let tok = match c {
            b'\n' => {
                newline_before = true;
                i += 1;
                continue;
            }
            b' ' | b'\t' | b'\r' => {
                i += 1;
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                i = run(i, |b| b != b'\n');
                continue;
            }
            b'a'..=b'z' | b'A'..=b'Z' | b'_' => {
                i = run(i, |b| b.is_ascii_alphanumeric() || b == b'_');
                Tok::Name(&text[start..i])
            }
            b'%' => {
                i = run(i + 1, |b| b.is_ascii_digit());
                if i == start + 1 {
                    return Err(error_at(text, start, "expected a value number after `%`"));
                }
                Tok::Value(&text[start + 1..i])
            }
            b'0'..=b'9' => {
                i = run(i, |b| b.is_ascii_digit());
                if bytes.get(i) == Some(&b'.')
                    && bytes.get(i + 1).is_some_and(|b| b.is_ascii_digit())
                {
                    i = run(i + 1, |b| b.is_ascii_digit());
                }
                if matches!(bytes.get(i), Some(b'e' | b'E')) {
                    let sign = usize::from(matches!(bytes.get(i + 1), Some(b'+' | b'-')));
                    if bytes.get(i + 1 + sign).is_some_and(|b| b.is_ascii_digit()) {
                        i = run(i + 1 + sign, |b| b.is_ascii_digit());
                    }
                }
                Tok::Number(&text[start..i])
            }
            b'-' if bytes.get(i + 1) == Some(&b'>') => {
                i += 2;
                Tok::Arrow
            }
            b'{' | b'}' | b'(' | b')' | b'[' | b']' | b',' | b':' | b'=' | b'*' | b'+' | b'-' => {
                i += 1;
                Tok::Punct(char::from(c))
            }
            _ => {
                let ch = text[start..].chars().next().unwrap_or('?');
                return Err(error_at(
                    text,
                    start,
                    format!("unexpected character `{}`", ch.escape_debug()),
                ));
            }
        };
        toks.push(Token {
            tok,
            start,
            end: i,
            newline_before,
        });
        newline_before = false;
    }
    toks.push(Token {
        tok: Tok::End,
        start: text.len(),
        end: text.len(),
        newline_before,
    });
    Ok(toks)
}

fn describe(t: &Tok<'_>) -> String {
    match t {
        Tok::Name(w) | Tok::Number(w) => format!("`{w}`"),
        Tok::Value(n) => format!("`%{n}`"),
        Tok::Punct(c) => format!("`{c}`"),
        Tok::Arrow => "`->`".to_owned(),
        Tok::End => "the end of the text".to_owned(),
    }
}

// ---------------------------------------------------------------------------
// The reader

/// What is known of the kernel being read.
#[derive(Default)]
struct KernelState {
    params: Vec<KParam>,
    shared: Vec<Shared>,
    /// The type of each value number defined so far.
    types: Vec<Option<TileTy>>,
    /// Every use, with its offset, in text order.
    uses: Vec<(Value, usize)>,
    /// How many blocks are open.
    depth: usize,
}

/// A step as written: names not yet resolved, each with its offset.
enum RawStep<'a> {
    Launch {
        kernel: (&'a str, usize),
        args: Vec<(&'a str, usize)>,
    },
    Copy {
        src: (&'a str, usize),
        dst: (&'a str, usize),
    },
    Collective {
        kind: CollectiveKind,
        axis: String,
        devices: u64,
        src: (&'a str, usize),
        dst: (&'a str, usize),
    },
}

struct Reader<'a> {
    text: &'a str,
    toks: Vec<Token<'a>>,
    /// The index of the next token.
    at: usize,
    kernel: KernelState,
}

type R<T> = Result<T, ReadError>;

impl<'a> Reader<'a> {
    // --- the cursor ---

    fn peek(&self) -> Token<'a> {
        // The last token is `End`, which is never consumed.
        self.toks[self.at.min(self.toks.len() - 1)]
    }

    fn bump(&mut self) -> Token<'a> {
        let t = self.peek();
        if !matches!(t.tok, Tok::End) {
            self.at += 1;
        }
        t
    }

    fn error_at(&self, offset: usize, message: impl Into<String>) -> ReadError {
        error_at(self.text, offset, message)
    }

    /// An error at the next token: "expected `what`, found ...".
    fn expected(&self, what: &str) -> ReadError {
        let t = self.peek();
        self.error_at(
            t.start,
            format!("expected {what}, found {}", describe(&t.tok)),
        )
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek().tok == Tok::Punct(c) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: char) -> R<()> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.expected(&format!("`{c}`")))
        }
    }

    fn eat_word(&mut self, w: &str) -> bool {
        if self.peek().tok == Tok::Name(w) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn expect_word(&mut self, w: &str) -> R<()> {
        if self.eat_word(w) {
            Ok(())
        } else {
            Err(self.expected(&format!("`{w}`")))
        }
    }

    /// A name and its offset.
    fn name(&mut self, what: &str) -> R<(&'a str, usize)> {
        match self.peek() {
            Token {
                tok: Tok::Name(w),
                start,
                ..
            } => {
                self.bump();
                Ok((w, start))
            }
            _ => Err(self.expected(what)),
        }
    }

    /// An integer literal (with an optional `-`) that fits in `T`.
    fn int<T: TryFrom<i128>>(&mut self, what: &str) -> R<T> {
        let start = self.peek().start;
        let negative = self.eat('-');
        let t = self.peek();
        let Tok::Number(digits) = t.tok else {
            return Err(self.expected(what));
        };
        if !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(self.error_at(t.start, format!("expected {what}, found `{digits}`")));
        }
        self.bump();
        let sign = if negative { "-" } else { "" };
        format!("{sign}{digits}")
            .parse::<i128>()
            .ok()
            .and_then(|v| T::try_from(v).ok())
            .ok_or_else(|| self.error_at(start, format!("{what} out of range: `{sign}{digits}`")))
    }

    /// A float as `float_text` writes it: a decimal number, `inf` or
    /// `NaN`, with an optional `-`.
    fn float(&mut self, what: &str) -> R<f64> {
        let negative = self.eat('-');
        let t = self.peek();
        let body = match t.tok {
            Tok::Number(n) => n,
            Tok::Name(w @ ("inf" | "NaN")) => w,
            _ => return Err(self.expected(what)),
        };
        self.bump();
        let v: f64 = body
            .parse()
            .map_err(|_| self.error_at(t.start, format!("malformed number `{body}`")))?;
        Ok(if negative { -v } else { v })
    }

    /// A size expression (read by [`Size::parse_prefix`] from the text).
    fn size(&mut self) -> R<Size> {
        let start = self.peek().start;
        let rest = self.text.get(start..).unwrap_or("");
        let (size, len) =
            Size::parse_prefix(rest).map_err(|e| self.error_at(start + e.offset, e.message))?;
        let end = start + len;
        let mut last_end = start;
        while self.peek().start < end && !matches!(self.peek().tok, Tok::End) {
            last_end = self.bump().end;
        }
        // The expression must end where a token ends (`1.5` is not a size).
        if last_end != end {
            return Err(self.error_at(end, "malformed size expression"));
        }
        Ok(size)
    }

    /// `[size, ...]`, possibly empty.
    fn sizes(&mut self) -> R<Vec<Size>> {
        self.expect('[')?;
        let mut out = Vec::new();
        if self.eat(']') {
            return Ok(out);
        }
        loop {
            out.push(self.size()?);
            if self.eat(']') {
                return Ok(out);
            }
            if !self.eat(',') {
                return Err(self.expected("`,` or `]`"));
            }
        }
    }

    fn dtype(&mut self) -> R<Dtype> {
        let (w, at) = self.name("a dtype")?;
        Dtype::from_name(w).ok_or_else(|| self.error_at(at, format!("unknown dtype `{w}`")))
    }

    /// `dtype` or `dtype[sizes]`.
    fn tile_ty(&mut self) -> R<TileTy> {
        let dtype = self.dtype()?;
        let shape = if self.peek().tok == Tok::Punct('[') {
            self.sizes()?
        } else {
            Vec::new()
        };
        Ok(TileTy { shape, dtype })
    }

    // --- values ---

    /// A value token, checked against [`MAX_VALUE`], with its offset.
    fn value_token(&mut self) -> R<(Value, usize)> {
        let t = self.peek();
        let Tok::Value(digits) = t.tok else {
            return Err(self.expected("a value (`%N`)"));
        };
        self.bump();
        match digits.parse::<u32>() {
            Ok(n) if n <= MAX_VALUE => Ok((Value(n), t.start)),
            _ => Err(self.error_at(
                t.start,
                format!("value numbers above {MAX_VALUE} are not supported: `%{digits}`"),
            )),
        }
    }

    /// A value read by an instruction.
    fn use_value(&mut self) -> R<Value> {
        let (v, at) = self.value_token()?;
        self.kernel.uses.push((v, at));
        Ok(v)
    }

    /// `%a, %b, ...` (at least one).
    fn use_values(&mut self) -> R<Vec<Value>> {
        let mut out = vec![self.use_value()?];
        while self.eat(',') {
            out.push(self.use_value()?);
        }
        Ok(out)
    }

    /// Gives value `v` (written at `at`) its type.
    fn define(&mut self, v: Value, at: usize, ty: TileTy) -> R<()> {
        let types = &mut self.kernel.types;
        if types.len() <= v.index() {
            types.resize(v.index() + 1, None);
        }
        if types[v.index()].is_some() {
            return Err(self.error_at(at, format!("{v} is defined twice")));
        }
        types[v.index()] = Some(ty);
        Ok(())
    }

    /// The type of `v`, which must be defined earlier in the text.
    fn type_of(&self, v: Value, at: usize) -> R<TileTy> {
        match self.kernel.types.get(v.index()) {
            Some(Some(t)) => Ok(t.clone()),
            _ => Err(self.error_at(
                at,
                format!("the type of {v} is needed here, but it is not defined before"),
            )),
        }
    }

    // --- the program header ---

    fn program(&mut self) -> R<TileProgram> {
        self.expect_word("program")?;
        let (name, _) = self.name("the program's name")?;
        self.expect('{')?;
        self.expect_word("dims")?;
        self.expect(':')?;
        let mut dims = Vec::new();
        let next = self.peek();
        if matches!(next.tok, Tok::Name(_)) && !next.newline_before {
            loop {
                dims.push(self.name("a dimension")?.0.to_owned());
                if !self.eat(',') {
                    break;
                }
            }
        }
        let (mut inputs, mut temps, mut outputs) = (Vec::new(), Vec::new(), Vec::new());
        let mut raw_steps = Vec::new();
        loop {
            if self.eat('}') {
                break;
            }
            let (word, at) =
                self.name("`input`, `temp`, `output`, `launch`, `copy`, `collective` or `}`")?;
            match word {
                "input" => inputs.push(self.buffer_decl()?),
                "temp" => temps.push(self.buffer_decl()?),
                "output" => outputs.push(self.buffer_decl()?),
                "launch" => {
                    let kernel = self.name("a kernel's name")?;
                    self.expect('(')?;
                    let mut args = Vec::new();
                    if !self.eat(')') {
                        loop {
                            args.push(self.name("a buffer's name")?);
                            if self.eat(')') {
                                break;
                            }
                            if !self.eat(',') {
                                return Err(self.expected("`,` or `)`"));
                            }
                        }
                    }
                    raw_steps.push(RawStep::Launch { kernel, args });
                }
                "copy" => {
                    let src = self.name("a buffer's name")?;
                    self.arrow()?;
                    let dst = self.name("a buffer's name")?;
                    raw_steps.push(RawStep::Copy { src, dst });
                }
                "collective" => {
                    let kind = self.collective_kind()?;
                    self.expect_word("over")?;
                    let axis = self.name("a mesh axis")?.0.to_owned();
                    self.expect('(')?;
                    let devices = self.int("a number of devices")?;
                    self.expect_word("devices")?;
                    self.expect(')')?;
                    let src = self.name("a buffer's name")?;
                    self.arrow()?;
                    let dst = self.name("a buffer's name")?;
                    raw_steps.push(RawStep::Collective {
                        kind,
                        axis,
                        devices,
                        src,
                        dst,
                    });
                }
                w => {
                    return Err(self.error_at(
                        at,
                        format!(
                            "unknown program line `{w}`: expected `input`, `temp`, `output`, \
                             `launch`, `copy` or `collective`"
                        ),
                    ))
                }
            }
        }
        let mut kernels: Vec<Kernel> = Vec::new();
        while !matches!(self.peek().tok, Tok::End) {
            let at = self.peek().start;
            let k = self.kernel()?;
            if kernels.iter().any(|o| o.name == k.name) {
                return Err(self.error_at(at, format!("kernel `{}` is defined twice", k.name)));
            }
            kernels.push(k);
        }
        let mut p = TileProgram {
            name: name.to_owned(),
            dims,
            inputs,
            temps,
            outputs,
            kernels,
            steps: Vec::new(),
        };
        for s in raw_steps {
            let step = match s {
                RawStep::Launch { kernel, args } => Step::Launch {
                    kernel: p
                        .kernels
                        .iter()
                        .position(|k| k.name == kernel.0)
                        .ok_or_else(|| {
                            self.error_at(kernel.1, format!("no kernel named `{}`", kernel.0))
                        })?,
                    args: args
                        .iter()
                        .map(|a| self.buffer(&p, *a))
                        .collect::<R<Vec<_>>>()?,
                },
                RawStep::Copy { src, dst } => Step::Copy {
                    src: self.buffer(&p, src)?,
                    dst: self.buffer(&p, dst)?,
                },
                RawStep::Collective {
                    kind,
                    axis,
                    devices,
                    src,
                    dst,
                } => Step::Collective {
                    kind,
                    axis,
                    devices,
                    src: self.buffer(&p, src)?,
                    dst: self.buffer(&p, dst)?,
                },
            };
            p.steps.push(step);
        }
        Ok(p)
    }

    fn arrow(&mut self) -> R<()> {
        if self.peek().tok == Tok::Arrow {
            self.bump();
            Ok(())
        } else {
            Err(self.expected("`->`"))
        }
    }

    /// `name: dtype[sizes]`.
    fn buffer_decl(&mut self) -> R<BufferDecl> {
        let (name, _) = self.name("a buffer's name")?;
        self.expect(':')?;
        let dtype = self.dtype()?;
        let dims = self.sizes()?;
        Ok(BufferDecl {
            name: name.to_owned(),
            dtype,
            dims,
        })
    }

    /// The buffer a step names.
    fn buffer(&self, p: &TileProgram, (name, at): (&str, usize)) -> R<BufferId> {
        let find = |list: &[BufferDecl]| -> Vec<usize> {
            (0..list.len()).filter(|i| list[*i].name == name).collect()
        };
        let found: Vec<BufferId> = (find(&p.inputs).into_iter().map(BufferId::Input))
            .chain(find(&p.temps).into_iter().map(BufferId::Temp))
            .chain(find(&p.outputs).into_iter().map(BufferId::Output))
            .collect();
        match found.as_slice() {
            [one] => Ok(*one),
            [] => Err(self.error_at(at, format!("no buffer named `{name}`"))),
            _ => Err(self.error_at(
                at,
                format!(
                    "`{name}` names more than one buffer ({found:?}): the text cannot say which"
                ),
            )),
        }
    }

    /// `all_reduce`, `all_gather`, `reduce_scatter {dim = N}`,
    /// `all_to_all {split = N, concat = N}`, `send {offset = N}`,
    /// `recv {offset = N}`.
    fn collective_kind(&mut self) -> R<CollectiveKind> {
        let (w, at) = self.name("a collective")?;
        let braced = matches!(w, "reduce_scatter" | "all_to_all" | "send" | "recv");
        if braced {
            self.expect('{')?;
        }
        let kind = match w {
            "all_reduce" => CollectiveKind::AllReduce,
            "all_gather" => CollectiveKind::AllGather,
            "reduce_scatter" => CollectiveKind::ReduceScatter {
                dim: self.field("dim")?,
            },
            "all_to_all" => {
                let split_dim = self.field("split")?;
                self.expect(',')?;
                CollectiveKind::AllToAll {
                    split_dim,
                    concat_dim: self.field("concat")?,
                }
            }
            "send" => CollectiveKind::Send {
                offset: self.field("offset")?,
            },
            "recv" => CollectiveKind::Recv {
                offset: self.field("offset")?,
            },
            w => return Err(self.error_at(at, format!("unknown collective `{w}`"))),
        };
        if braced {
            self.expect('}')?;
        }
        Ok(kind)
    }

    /// `key = N` in a collective's braces.
    fn field<T: TryFrom<i128>>(&mut self, key: &str) -> R<T> {
        self.expect_word(key)?;
        self.expect('=')?;
        self.int(&format!("the collective's `{key}`"))
    }

    // --- kernels ---

    /// `kernel name(params) grid [a, b, c] threads N [vectorize N] { ... }`.
    fn kernel(&mut self) -> R<Kernel> {
        self.expect_word("kernel")?;
        self.kernel = KernelState::default();
        let (name, _) = self.name("the kernel's name")?;
        self.expect('(')?;
        if !self.eat(')') {
            loop {
                let (access, at) = self.name("`in`, `out` or `inout`")?;
                let access = match access {
                    "in" => Access::In,
                    "out" => Access::Out,
                    "inout" => Access::InOut,
                    w => {
                        return Err(self
                            .error_at(at, format!("expected `in`, `out` or `inout`, found `{w}`")))
                    }
                };
                let (pname, _) = self.name("a parameter's name")?;
                self.expect(':')?;
                let dtype = self.dtype()?;
                let dims = self.sizes()?;
                let init = if !self.eat('=') {
                    Start::Held
                } else if self.eat_word("passed") {
                    Start::Kept
                } else {
                    Start::Value(self.float("the parameter's start value")?)
                };
                self.kernel.params.push(KParam {
                    name: pname.to_owned(),
                    dtype,
                    dims,
                    access,
                    init,
                });
                if self.eat(')') {
                    break;
                }
                if !self.eat(',') {
                    return Err(self.expected("`,` or `)`"));
                }
            }
        }
        self.expect_word("grid")?;
        let grid_at = self.peek().start;
        let grid: [Size; 3] = self
            .sizes()?
            .try_into()
            .map_err(|_| self.error_at(grid_at, "a grid has three extents"))?;
        self.expect_word("threads")?;
        let threads = self.int("a thread count")?;
        let vectorize = if self.eat_word("vectorize") {
            self.int("a vector width")?
        } else {
            1
        };
        let blocks_per_sm = if self.eat_word("programs_per_sm") {
            let lo = self.int("a program count")?;
            self.expect_word("to")?;
            Some((lo, self.int("a program count")?))
        } else {
            None
        };
        let warp_specialize = !self.eat_word("warp_specialize");
        if !warp_specialize {
            self.expect_word("false")?;
        }
        let tensor_cores = !self.eat_word("tensor_cores");
        if !tensor_cores {
            self.expect_word("false")?;
        }
        let fast_exp = self.eat_word("fast_exp");
        self.expect('{')?;
        while self.eat_word("shared") {
            self.shared_decl()?;
        }
        let insts = self.insts()?;
        let KernelState {
            params,
            shared,
            types,
            uses,
            ..
        } = std::mem::take(&mut self.kernel);
        if let Some((v, at)) = uses
            .iter()
            .find(|(v, _)| !matches!(types.get(v.index()), Some(Some(_))))
        {
            return Err(self.error_at(*at, format!("{v} is never defined")));
        }
        Ok(Kernel {
            name: name.to_owned(),
            params,
            grid,
            threads,
            vectorize,
            blocks_per_sm,
            warp_specialize,
            tensor_cores,
            fast_exp,
            shared,
            values: types
                .into_iter()
                .map(|t| t.unwrap_or(TileTy::scalar(INDEX)))
                .collect(),
            body: Block {
                args: Vec::new(),
                insts,
            },
            span: Default::default(),
        })
    }

    /// The rest of `shared name: dtype[extents] x N stages, padding N (B bytes)`.
    fn shared_decl(&mut self) -> R<()> {
        let (name, at) = self.name("a shared buffer's name")?;
        if self.kernel.shared.iter().any(|s| s.name == name) {
            return Err(self.error_at(at, format!("shared buffer `{name}` is declared twice")));
        }
        self.expect(':')?;
        let dtype = self.dtype()?;
        self.expect('[')?;
        let mut shape = Vec::new();
        if !self.eat(']') {
            loop {
                let at = self.peek().start;
                let d: i64 = self.int("a shared extent")?;
                if d < 0 {
                    return Err(self.error_at(at, "a shared extent cannot be negative"));
                }
                shape.push(d);
                if self.eat(']') {
                    break;
                }
                if !self.eat(',') {
                    return Err(self.expected("`,` or `]`"));
                }
            }
        }
        self.expect_word("x")?;
        let stages = self.int("a number of stages")?;
        self.expect_word("stages")?;
        self.expect(',')?;
        self.expect_word("padding")?;
        let padding = self.int("a padding")?;
        self.expect('(')?;
        let bytes_at = self.peek().start;
        let bytes: u64 = self.int("a size in bytes")?;
        self.expect_word("bytes")?;
        self.expect(')')?;
        let s = Shared {
            name: name.to_owned(),
            shape,
            dtype,
            stages,
            padding,
        };
        // `Shared::bytes`, with overflow checked.
        let (last, outer) = s.shape.split_last().unwrap_or((&1, &[]));
        let want = outer
            .iter()
            .try_fold(1u64, |acc, d| acc.checked_mul(*d as u64))
            .and_then(|rows| rows.checked_mul((*last as u64).checked_add(u64::from(padding))?))
            .and_then(|n| n.checked_mul(dtype.size_bytes()))
            .and_then(|n| n.checked_mul(u64::from(stages)));
        match want {
            Some(w) if w == bytes => {}
            Some(w) => {
                return Err(self.error_at(
                    bytes_at,
                    format!("shared buffer `{name}` takes {w} bytes, not {bytes}"),
                ))
            }
            None => return Err(self.error_at(at, format!("shared buffer `{name}` is too large"))),
        }
        self.kernel.shared.push(s);
        Ok(())
    }

    /// Instructions up to and including the `}` that closes their block.
    fn insts(&mut self) -> R<Vec<Inst>> {
        let mut out = Vec::new();
        while !self.eat('}') {
            out.push(self.inst()?);
        }
        Ok(out)
    }

    /// `{ instructions }` with `args` bound on entry.
    fn block(&mut self, args: Vec<Value>) -> R<Block> {
        let at = self.peek().start;
        self.expect('{')?;
        self.kernel.depth += 1;
        if self.kernel.depth > MAX_DEPTH {
            return Err(self.error_at(at, format!("blocks nested more than {MAX_DEPTH} deep")));
        }
        let insts = self.insts()?;
        self.kernel.depth -= 1;
        Ok(Block { args, insts })
    }

    /// The parameter `name` (at `at`) that a load (`load`) or store reads
    /// or writes.
    fn param(&self, name: &str, at: usize, load: bool) -> R<usize> {
        let all: Vec<usize> = (0..self.kernel.params.len())
            .filter(|i| self.kernel.params[*i].name == name)
            .collect();
        let usable: Vec<usize> = all
            .iter()
            .copied()
            .filter(|i| {
                let a = self.kernel.params[*i].access;
                if load {
                    a != Access::Out
                } else {
                    a != Access::In
                }
            })
            .collect();
        match (all.as_slice(), usable.as_slice()) {
            ([one], _) | (_, [one]) => Ok(*one),
            ([], _) => Err(self.error_at(at, format!("the kernel has no parameter `{name}`"))),
            _ => Err(self.error_at(
                at,
                format!("`{name}` names more than one parameter: the text cannot say which"),
            )),
        }
    }

    /// `name[%i, ...]` of a load or store: the parameter and the indices.
    fn access(&mut self, load: bool) -> R<(usize, Vec<Value>)> {
        let (name, at) = self.name("a parameter's name")?;
        let param = self.param(name, at, load)?;
        self.expect('[')?;
        let index = if self.eat(']') {
            Vec::new()
        } else {
            let vs = self.use_values()?;
            self.expect(']')?;
            vs
        };
        Ok((param, index))
    }

    /// `mask %m`, if there.
    fn mask(&mut self) -> R<Option<Value>> {
        if self.eat_word("mask") {
            Ok(Some(self.use_value()?))
        } else {
            Ok(None)
        }
    }

    /// One instruction, with its results and type.
    fn inst(&mut self) -> R<Inst> {
        let start = self.peek().start;
        let mut results = Vec::new();
        if matches!(self.peek().tok, Tok::Value(_)) {
            loop {
                results.push(self.value_token()?);
                if !self.eat(',') {
                    break;
                }
            }
            self.expect('=')?;
        }
        let (word, word_at) = match self.peek().tok {
            Tok::Name(w) => {
                let t = self.bump();
                (w, t.start)
            }
            _ => return Err(self.expected("an instruction or `}`")),
        };
        let op = match word {
            "program_id" => TOp::ProgramId(self.int("a grid axis")?),
            "num_programs" => TOp::NumPrograms(self.int("a grid axis")?),
            "size" => TOp::Size(self.size()?),
            "const" => TOp::Const(self.float("a constant")?),
            "arange" => TOp::Arange(self.int("the start of a range")?),
            "rand" => {
                let counter = self.use_value()?;
                self.expect_word("seed")?;
                let seed = if matches!(self.peek().tok, Tok::Value(_)) {
                    Seed::Value(self.use_value()?)
                } else {
                    Seed::Const(self.int("a seed")?)
                };
                TOp::Rand { seed, counter }
            }
            "select" => {
                let c = self.use_value()?;
                self.expect(',')?;
                let a = self.use_value()?;
                self.expect(',')?;
                TOp::Select(c, a, self.use_value()?)
            }
            "cast" => TOp::Cast(self.use_value()?),
            "broadcast" => TOp::Broadcast(self.use_value()?),
            "reshape" => TOp::Reshape(self.use_value()?),
            "permute" => {
                let v = self.use_value()?;
                self.expect('[')?;
                let mut perm = Vec::new();
                if !self.eat(']') {
                    loop {
                        perm.push(self.int("an axis")?);
                        if self.eat(']') {
                            break;
                        }
                        if !self.eat(',') {
                            return Err(self.expected("`,` or `]`"));
                        }
                    }
                }
                TOp::Permute(v, perm)
            }
            "load" => {
                let (param, index) = self.access(true)?;
                let mask = self.mask()?;
                let other = if self.eat_word("other") {
                    self.float("the value of masked elements")?
                } else {
                    0.0
                };
                TOp::Load {
                    param,
                    index,
                    mask,
                    other,
                }
            }
            "store" | "atomic_add" | "atomic_max" | "atomic_min" => {
                let atomic = match word {
                    "atomic_add" => Some(Combine::Sum),
                    "atomic_max" => Some(Combine::Max),
                    "atomic_min" => Some(Combine::Min),
                    _ => None,
                };
                let (param, index) = self.access(false)?;
                self.expect(',')?;
                let value = self.use_value()?;
                TOp::Store {
                    param,
                    index,
                    value,
                    mask: self.mask()?,
                    atomic,
                }
            }
            "dot" => {
                let a = self.use_value()?;
                self.expect(',')?;
                let b = self.use_value()?;
                self.expect(',')?;
                let acc = self.use_value()?;
                TOp::Dot {
                    a,
                    b,
                    acc,
                    tf32: self.eat_word("tf32"),
                    bf16_acc: self.eat_word("bf16_acc"),
                }
            }
            "reduce_sum" | "reduce_max" | "reduce_min" | "reduce_prod" => {
                let combine = match word {
                    "reduce_sum" => Combine::Sum,
                    "reduce_max" => Combine::Max,
                    "reduce_prod" => Combine::Prod,
                    _ => Combine::Min,
                };
                let value = self.use_value()?;
                self.expect_word("axis")?;
                let axis = self.int("an axis")?;
                self.expect('{')?;
                self.expect_word("policy")?;
                self.expect('=')?;
                let (p, p_at) = self.name("a policy")?;
                let policy = Policy::from_name(p)
                    .ok_or_else(|| self.error_at(p_at, format!("unknown policy `{p}`")))?;
                self.expect('}')?;
                TOp::Reduce {
                    combine,
                    value,
                    axis,
                    policy,
                }
            }
            "kahan_add" => {
                let sum = self.use_value()?;
                self.expect(',')?;
                let comp = self.use_value()?;
                self.expect(',')?;
                TOp::KahanAdd {
                    sum,
                    comp,
                    x: self.use_value()?,
                }
            }
            "sort" => TOp::Sort {
                value: self.use_value()?,
                descending: self.eat_word("descending"),
            },
            "stage" => {
                let value = self.use_value()?;
                self.expect_word("via")?;
                let (name, at) = self.name("a shared buffer's name")?;
                let shared = self
                    .kernel
                    .shared
                    .iter()
                    .position(|s| s.name == name)
                    .ok_or_else(|| self.error_at(at, format!("no shared buffer `{name}`")))?;
                TOp::Stage { shared, value }
            }
            "barrier" => TOp::Barrier,
            "assert" => {
                let c = self.use_value()?;
                let about = if self.eat_word("index") {
                    let i = self.use_value()?;
                    self.expect_word("below")?;
                    vec![i, self.use_value()?]
                } else {
                    Vec::new()
                };
                TOp::Assert(c, Check::Index, about)
            }
            "assert_step" => TOp::Assert(self.use_value()?, Check::Step, Vec::new()),
            "yield" => {
                let next = self.peek();
                if matches!(next.tok, Tok::Value(_)) && !next.newline_before {
                    TOp::Yield(self.use_values()?)
                } else {
                    TOp::Yield(Vec::new())
                }
            }
            "for" => return self.for_loop(start, results),
            "if" => return self.if_else(start, results),
            w => {
                if let Some(u) = UnaryOp::from_name(w) {
                    TOp::Unary(u, self.use_value()?)
                } else if let Some(b) = BinaryOp::from_name(w) {
                    let x = self.use_value()?;
                    self.expect(',')?;
                    TOp::Binary(b, x, self.use_value()?)
                } else {
                    return Err(self.error_at(word_at, format!("unknown instruction `{w}`")));
                }
            }
        };
        if !results.is_empty() {
            if !self.eat(':') {
                return Err(self.expected("`:` and the result type"));
            }
            let ty = self.tile_ty()?;
            for (i, (v, at)) in results.iter().enumerate() {
                let ty = match op {
                    // A sort's indices.
                    TOp::Sort { .. } if i == 1 => TileTy {
                        shape: ty.shape.clone(),
                        dtype: Dtype::Int32,
                    },
                    _ => ty.clone(),
                };
                self.define(*v, *at, ty)?;
            }
        }
        Ok(Inst::new(results.into_iter().map(|(v, _)| v).collect(), op))
    }

    /// The rest of `for %iv = %lo to %hi step %s carry (%a = %i, ...) { ... }`.
    fn for_loop(&mut self, start: usize, results: Vec<(Value, usize)>) -> R<Inst> {
        let (iv, iv_at) = self.value_token()?;
        self.define(iv, iv_at, TileTy::scalar(INDEX))?;
        self.expect('=')?;
        let lo = self.use_value()?;
        self.expect_word("to")?;
        let hi = self.use_value()?;
        self.expect_word("step")?;
        let step = self.use_value()?;
        self.expect_word("carry")?;
        self.expect('(')?;
        let mut args = vec![iv];
        let mut init = Vec::new();
        let mut types = Vec::new();
        if !self.eat(')') {
            loop {
                let (arg, arg_at) = self.value_token()?;
                self.expect('=')?;
                let init_at = self.peek().start;
                let i = self.use_value()?;
                let ty = self.type_of(i, init_at)?;
                self.define(arg, arg_at, ty.clone())?;
                args.push(arg);
                init.push(i);
                types.push(ty);
                if self.eat(')') {
                    break;
                }
                if !self.eat(',') {
                    return Err(self.expected("`,` or `)`"));
                }
            }
        }
        if results.len() != init.len() {
            return Err(self.error_at(
                start,
                format!(
                    "a loop with {} results carries {} values",
                    results.len(),
                    init.len()
                ),
            ));
        }
        let body = self.block(args)?;
        for ((v, at), ty) in results.iter().zip(types) {
            self.define(*v, *at, ty)?;
        }
        Ok(Inst::new(
            results.into_iter().map(|(v, _)| v).collect(),
            TOp::For {
                lo,
                hi,
                step,
                init,
                body,
            },
        ))
    }

    /// The rest of `if %c { ... } else { ... }`.
    fn if_else(&mut self, start: usize, results: Vec<(Value, usize)>) -> R<Inst> {
        let cond = self.use_value()?;
        let then = self.block(Vec::new())?;
        self.expect_word("else")?;
        let els = self.block(Vec::new())?;
        if !results.is_empty() {
            let yielded = match then.insts.last().map(|i| &i.op) {
                Some(TOp::Yield(vs)) if vs.len() == results.len() => vs.clone(),
                _ => {
                    return Err(self.error_at(
                        start,
                        format!(
                        "an `if` with {} results must end its first arm in a `yield` of as many",
                        results.len()
                    ),
                    ))
                }
            };
            for ((v, at), y) in results.iter().zip(yielded) {
                let ty = self.type_of(y, *at)?;
                self.define(*v, *at, ty)?;
            }
        }
        Ok(Inst::new(
            results.into_iter().map(|(v, _)| v).collect(),
            TOp::If { cond, then, els },
        ))
    }
}

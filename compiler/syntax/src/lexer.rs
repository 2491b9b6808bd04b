//! The lexer: source text to tokens, with logos.
//!
//! Lexing never fails: malformed input becomes [`LexError`]s beside the token
//! stream, and the parser sees the good tokens. Comments are skipped, except
//! doc comments (`///`), which are collected so items can carry their docs.

use logos::{FilterResult, Logos};

/// What went wrong while lexing one stretch of input.
#[derive(Clone, Debug, PartialEq, Default)]
pub enum LexErrorKind {
    /// A character that starts no token.
    #[default]
    InvalidChar,
    /// A string literal with no closing quote.
    UnterminatedString,
    /// A string literal with an unknown escape such as `\q`.
    InvalidEscape,
    /// A `/*` comment with no matching `*/`.
    UnterminatedComment,
    /// An integer literal that does not fit in 64 bits.
    IntTooLarge,
    /// A float literal that is infinite or malformed.
    BadFloat,
}

/// One token. Keywords, punctuation and literal values.
#[derive(Logos, Clone, Debug, PartialEq)]
#[logos(error = LexErrorKind)]
#[logos(skip r"[ \t\r\n\f]+")]
pub enum Tok {
    // Keywords.
    #[token("op")]
    Op,
    #[token("kernel")]
    Kernel,
    #[token("schedule")]
    Schedule,
    #[token("mesh")]
    Mesh,
    #[token("numerics")]
    Numerics,
    #[token("fn")]
    Fn,
    #[token("extern")]
    Extern,
    #[token("import")]
    Import,
    #[token("let")]
    Let,
    #[token("mut")]
    Mut,
    #[token("return")]
    Return,
    #[token("break")]
    Break,
    #[token("continue")]
    Continue,
    #[token("if")]
    If,
    #[token("else")]
    Else,
    #[token("for")]
    For,
    #[token("while")]
    While,
    /// Python's `elif`: `else if`.
    #[token("elif")]
    Elif,
    /// Python's `and`: `&&`.
    #[token("and")]
    AndKw,
    /// Python's `or`: `||`.
    #[token("or")]
    OrKw,
    /// Python's `not`: `!`, below the comparisons as in Python.
    #[token("not")]
    NotKw,
    #[token("in")]
    In,
    #[token("on")]
    On,
    #[token("as")]
    As,
    #[token("out")]
    Out,
    #[token("inout")]
    InOut,
    #[token("step")]
    Step,
    #[token("grid")]
    Grid,
    #[token("tensor")]
    Tensor,
    #[token("shard")]
    Shard,
    #[token("true")]
    True,
    #[token("false")]
    False,
    #[token("None")]
    NoneKw,
    #[token("int")]
    IntTy,
    #[token("float")]
    FloatTy,
    #[token("str")]
    StrTy,

    // Element types.
    #[token("fp64", |_| Dtype::Fp64)]
    #[token("fp32", |_| Dtype::Fp32)]
    #[token("tf32", |_| Dtype::Tf32)]
    #[token("bf16", |_| Dtype::Bf16)]
    #[token("fp16", |_| Dtype::Fp16)]
    #[token("fp8_e4m3", |_| Dtype::Fp8E4m3)]
    #[token("fp8_e5m2", |_| Dtype::Fp8E5m2)]
    #[token("int8", |_| Dtype::Int8)]
    #[token("int16", |_| Dtype::Int16)]
    #[token("int32", |_| Dtype::Int32)]
    #[token("int64", |_| Dtype::Int64)]
    #[token("uint8", |_| Dtype::Uint8)]
    #[token("bool", |_| Dtype::Bool)]
    Dtype(Dtype),

    // Punctuation.
    #[token("(")]
    LParen,
    #[token(")")]
    RParen,
    #[token("[")]
    LBracket,
    #[token("]")]
    RBracket,
    #[token("{")]
    LBrace,
    #[token("}")]
    RBrace,
    #[token("<")]
    Lt,
    /// A `<` that opens type arguments of a call, as in `zeros<fp32>(...)`.
    /// The lexer never makes it; [`mark_generic_calls`] does.
    GenericLt,
    #[token(">")]
    Gt,
    #[token("<=")]
    Le,
    #[token(">=")]
    Ge,
    #[token("==")]
    EqEq,
    #[token("!=")]
    Ne,
    #[token("=")]
    Eq,
    #[token("+=")]
    PlusEq,
    #[token("-=")]
    MinusEq,
    #[token("*=")]
    StarEq,
    #[token("/=")]
    SlashEq,
    #[token("+")]
    Plus,
    #[token("-")]
    Minus,
    #[token("*")]
    Star,
    #[token("/")]
    Slash,
    #[token("%")]
    Percent,
    #[token("@")]
    At,
    #[token("!")]
    Bang,
    #[token("&&")]
    AndAnd,
    #[token("||")]
    OrOr,
    #[token("&")]
    Amp,
    #[token("|")]
    Pipe,
    #[token("^")]
    Caret,
    #[token("~")]
    Tilde,
    #[token("<<")]
    Shl,
    #[token(">>")]
    Shr,
    #[token(".")]
    Dot,
    #[token("..")]
    DotDot,
    #[token("...")]
    Ellipsis,
    #[token(",")]
    Comma,
    #[token(":")]
    Colon,
    #[token(";")]
    Semi,
    #[token("->")]
    Arrow,
    #[token("_", priority = 5)]
    Underscore,

    // Literals and names.
    #[regex(r"[A-Za-z_][A-Za-z0-9_]*", |lex| lex.slice().to_owned())]
    Ident(String),
    #[regex(r"[0-9][0-9_]*", |lex| parse_int(lex.slice(), 10))]
    #[regex(r"0[xX][0-9a-fA-F_]+", |lex| parse_int(&lex.slice()[2..], 16))]
    Int(u64),
    #[regex(r"[0-9][0-9_]*\.[0-9][0-9_]*([eE][+-]?[0-9_]+)?", parse_float)]
    #[regex(r"[0-9][0-9_]*[eE][+-]?[0-9_]+", parse_float)]
    #[token("inf", |_| f64::INFINITY)]
    Float(f64),
    #[token("\"", lex_string)]
    Str(String),

    // Comments.
    #[regex(r"//[^\n]*", logos::skip, allow_greedy = true)]
    #[token("/*", block_comment)]
    Comment,
    /// The text of one `///` line, without the slashes. Filtered out of the
    /// parser's stream by [`lex`].
    #[regex(r"///[^\n]*", |lex| lex.slice()[3..].trim().to_owned(), priority = 10, allow_greedy = true)]
    DocComment(String),
}

pub use tessera_core::Dtype;

fn parse_int(digits: &str, radix: u32) -> Result<u64, LexErrorKind> {
    let mut value: u64 = 0;
    for c in digits.chars().filter(|&c| c != '_') {
        let d = c.to_digit(radix).ok_or(LexErrorKind::InvalidChar)? as u64;
        value = value
            .checked_mul(radix as u64)
            .and_then(|v| v.checked_add(d))
            .ok_or(LexErrorKind::IntTooLarge)?;
    }
    Ok(value)
}

fn parse_float(lex: &mut logos::Lexer<Tok>) -> Result<f64, LexErrorKind> {
    let text: String = lex.slice().chars().filter(|&c| c != '_').collect();
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(LexErrorKind::BadFloat),
    }
}

/// Skips a block comment, which may nest, or reports it unterminated.
fn block_comment(lex: &mut logos::Lexer<Tok>) -> FilterResult<(), LexErrorKind> {
    let rest = lex.remainder().as_bytes();
    let mut depth = 1usize;
    let mut i = 0;
    while i < rest.len() {
        match (rest[i], rest.get(i + 1)) {
            (b'/', Some(b'*')) => {
                depth += 1;
                i += 2;
            }
            (b'*', Some(b'/')) => {
                depth -= 1;
                i += 2;
                if depth == 0 {
                    lex.bump(i);
                    return FilterResult::Skip;
                }
            }
            _ => i += 1,
        }
    }
    lex.bump(rest.len());
    FilterResult::Error(LexErrorKind::UnterminatedComment)
}

/// Reads a string literal after its opening quote, processing escapes.
fn lex_string(lex: &mut logos::Lexer<Tok>) -> Result<String, LexErrorKind> {
    let rest = lex.remainder();
    let mut out = String::new();
    let mut chars = rest.char_indices();
    let mut bad_escape = false;
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => {
                lex.bump(i + 1);
                return if bad_escape {
                    Err(LexErrorKind::InvalidEscape)
                } else {
                    Ok(out)
                };
            }
            '\n' => break,
            '\\' => match chars.next() {
                Some((_, 'n')) => out.push('\n'),
                Some((_, 't')) => out.push('\t'),
                Some((_, 'r')) => out.push('\r'),
                Some((_, '0')) => out.push('\0'),
                Some((_, '\\')) => out.push('\\'),
                Some((_, '"')) => out.push('"'),
                Some((_, '\n')) | None => break,
                Some(_) => bad_escape = true,
            },
            c => out.push(c),
        }
    }
    let line_end = rest.find('\n').unwrap_or(rest.len());
    lex.bump(line_end);
    Err(LexErrorKind::UnterminatedString)
}

impl Tok {
    /// How the token is shown in "expected ..." messages.
    pub fn describe(&self) -> String {
        match self {
            Tok::Ident(name) => format!("identifier `{}`", truncate(name)),
            Tok::Int(v) => format!("integer `{v}`"),
            Tok::Float(v) => format!("number `{v}`"),
            Tok::Str(_) => "string literal".to_owned(),
            Tok::Dtype(d) => format!("`{d}`"),
            Tok::DocComment(_) => "doc comment".to_owned(),
            Tok::Comment => "comment".to_owned(),
            Tok::GenericLt => "`<`".to_owned(),
            other => format!("`{}`", other.spelling().unwrap_or("?")),
        }
    }

    /// The fixed spelling of keywords and punctuation.
    pub fn spelling(&self) -> Option<&'static str> {
        Some(match self {
            Tok::Op => "op",
            Tok::Kernel => "kernel",
            Tok::Schedule => "schedule",
            Tok::Mesh => "mesh",
            Tok::Numerics => "numerics",
            Tok::Fn => "fn",
            Tok::Extern => "extern",
            Tok::Import => "import",
            Tok::Let => "let",
            Tok::Mut => "mut",
            Tok::Return => "return",
            Tok::Break => "break",
            Tok::Continue => "continue",
            Tok::If => "if",
            Tok::Else => "else",
            Tok::For => "for",
            Tok::While => "while",
            Tok::Elif => "elif",
            Tok::AndKw => "and",
            Tok::OrKw => "or",
            Tok::NotKw => "not",
            Tok::In => "in",
            Tok::On => "on",
            Tok::As => "as",
            Tok::Out => "out",
            Tok::InOut => "inout",
            Tok::Step => "step",
            Tok::Grid => "grid",
            Tok::Tensor => "tensor",
            Tok::Shard => "shard",
            Tok::True => "true",
            Tok::False => "false",
            Tok::NoneKw => "None",
            Tok::IntTy => "int",
            Tok::FloatTy => "float",
            Tok::StrTy => "str",
            Tok::LParen => "(",
            Tok::RParen => ")",
            Tok::LBracket => "[",
            Tok::RBracket => "]",
            Tok::LBrace => "{",
            Tok::RBrace => "}",
            Tok::Lt | Tok::GenericLt => "<",
            Tok::Gt => ">",
            Tok::Le => "<=",
            Tok::Ge => ">=",
            Tok::EqEq => "==",
            Tok::Ne => "!=",
            Tok::Eq => "=",
            Tok::PlusEq => "+=",
            Tok::MinusEq => "-=",
            Tok::StarEq => "*=",
            Tok::SlashEq => "/=",
            Tok::Plus => "+",
            Tok::Minus => "-",
            Tok::Star => "*",
            Tok::Slash => "/",
            Tok::Percent => "%",
            Tok::At => "@",
            Tok::Bang => "!",
            Tok::AndAnd => "&&",
            Tok::OrOr => "||",
            Tok::Amp => "&",
            Tok::Pipe => "|",
            Tok::Caret => "^",
            Tok::Tilde => "~",
            Tok::Shl => "<<",
            Tok::Shr => ">>",
            Tok::Dot => ".",
            Tok::DotDot => "..",
            Tok::Ellipsis => "...",
            Tok::Comma => ",",
            Tok::Colon => ":",
            Tok::Semi => ";",
            Tok::Arrow => "->",
            Tok::Underscore => "_",
            Tok::Dtype(d) => d.name(),
            _ => return None,
        })
    }

    /// Whether this token opens a bracket pair.
    fn opens(&self) -> bool {
        matches!(self, Tok::LParen | Tok::LBracket | Tok::LBrace)
    }

    /// Whether this token closes a bracket pair.
    fn closes(&self) -> bool {
        matches!(self, Tok::RParen | Tok::RBracket | Tok::RBrace)
    }
}

fn truncate(name: &str) -> String {
    if name.len() <= 40 {
        name.to_owned()
    } else {
        let cut = (0..=40)
            .rev()
            .find(|&i| name.is_char_boundary(i))
            .unwrap_or(0);
        format!("{}…", &name[..cut])
    }
}

/// A token with its byte range.
#[derive(Clone, Debug, PartialEq)]
pub struct Spanned {
    /// The token.
    pub tok: Tok,
    /// First byte.
    pub lo: u32,
    /// One past the last byte.
    pub hi: u32,
}

/// A lexing error over the byte range `lo..hi`.
#[derive(Clone, Debug, PartialEq)]
pub struct LexError {
    /// What went wrong.
    pub kind: LexErrorKind,
    /// First byte.
    pub lo: u32,
    /// One past the last byte.
    pub hi: u32,
}

/// A doc comment run: the lines of consecutive `///` comments, and the byte
/// offset where the run ends.
#[derive(Clone, Debug, PartialEq)]
pub struct DocRun {
    /// The lines, slashes removed.
    pub lines: Vec<String>,
    /// First byte of the first `///`.
    pub lo: u32,
    /// End of the last line.
    pub hi: u32,
}

/// Everything the lexer produces for one file.
#[derive(Clone, Debug, Default)]
pub struct Lexed {
    /// The tokens the parser reads: no comments.
    pub tokens: Vec<Spanned>,
    /// Malformed stretches of input. Runs of invalid characters are merged.
    pub errors: Vec<LexError>,
    /// Doc comments, in order.
    pub docs: Vec<DocRun>,
}

/// Deepest bracket nesting the parser accepts. Deeper input is rejected
/// before parsing, so no later pass can exhaust the stack.
pub const MAX_NESTING: usize = 256;

/// Lexes `text`.
pub fn lex(text: &str) -> Lexed {
    let mut out = Lexed::default();
    let mut lexer = Tok::lexer(text);
    // A UTF-8 byte order mark (editors on Windows write one) is not text.
    if text.starts_with('\u{FEFF}') {
        lexer.bump('\u{FEFF}'.len_utf8());
    }
    while let Some(result) = lexer.next() {
        let range = lexer.span();
        let (lo, hi) = (range.start as u32, range.end as u32);
        match result {
            Ok(Tok::DocComment(line)) => match out.docs.last_mut() {
                Some(run) if text[run.hi as usize..lo as usize].trim().is_empty() => {
                    run.lines.push(line);
                    run.hi = hi;
                }
                _ => out.docs.push(DocRun {
                    lines: vec![line],
                    lo,
                    hi,
                }),
            },
            Ok(Tok::Comment) => {}
            Ok(tok) => out.tokens.push(Spanned { tok, lo, hi }),
            Err(kind) => match out.errors.last_mut() {
                Some(prev)
                    if prev.hi == lo
                        && prev.kind == LexErrorKind::InvalidChar
                        && kind == LexErrorKind::InvalidChar =>
                {
                    prev.hi = hi
                }
                _ => out.errors.push(LexError { kind, lo, hi }),
            },
        }
    }
    mark_generic_calls(&mut out.tokens);
    out
}

/// Rewrites `<` into [`Tok::GenericLt`] where it opens dtype arguments of a
/// call: `name < dtype >` or `name < dtype ,`. A dtype is never a value, so
/// such a `<` cannot be a comparison; this keeps the grammar LR(1).
pub fn mark_generic_calls(tokens: &mut [Spanned]) {
    for i in 1..tokens.len().saturating_sub(2) {
        if tokens[i].tok == Tok::Lt
            && matches!(tokens[i - 1].tok, Tok::Ident(_))
            && matches!(tokens[i + 1].tok, Tok::Dtype(_))
            && matches!(tokens[i + 2].tok, Tok::Gt | Tok::Comma)
        {
            tokens[i].tok = Tok::GenericLt;
        }
    }
}

/// Finds the first place where brackets nest deeper than [`MAX_NESTING`]:
/// the index of the opening token that crosses the limit.
pub fn too_deep(tokens: &[Spanned]) -> Option<usize> {
    let mut depth = 0usize;
    for (i, t) in tokens.iter().enumerate() {
        if t.tok.opens() {
            depth += 1;
            if depth > MAX_NESTING {
                return Some(i);
            }
        } else if t.tok.closes() {
            depth = depth.saturating_sub(1);
        }
    }
    None
}

/// The innermost bracket still open after the last token, with the
/// closing one it needs: what an unexpected end of file most likely
/// lacks.
pub fn unclosed(tokens: &[Spanned]) -> Option<(&Spanned, &'static str)> {
    let mut open: Vec<&Spanned> = Vec::new();
    for t in tokens {
        if t.tok.opens() {
            open.push(t);
        } else if t.tok.closes() {
            open.pop();
        }
    }
    let last = open.pop()?;
    let close = match last.tok {
        Tok::LParen => ")",
        Tok::LBracket => "]",
        _ => "}",
    };
    Some((last, close))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<Tok> {
        lex(text).tokens.into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn inf_is_a_float_literal_and_info_a_name() {
        assert_eq!(
            kinds("inf -inf info"),
            vec![
                Tok::Float(f64::INFINITY),
                Tok::Minus,
                Tok::Float(f64::INFINITY),
                Tok::Ident("info".into())
            ]
        );
    }

    #[test]
    fn a_leading_byte_order_mark_is_skipped() {
        let lexed = lex("\u{FEFF}op f");
        assert!(lexed.errors.is_empty(), "{:?}", lexed.errors);
        assert_eq!(lexed.tokens[0].tok, Tok::Op);
        // Spans stay offsets into the text as given.
        assert_eq!(lexed.tokens[0].lo, 3);
        // Only at the start: elsewhere it is a stray character.
        assert!(!lex("op \u{FEFF}f").errors.is_empty());
    }

    #[test]
    fn numbers_and_ranges() {
        assert_eq!(
            kinds("0..n 1.5 1e-5 0x_ff 1_000"),
            vec![
                Tok::Int(0),
                Tok::DotDot,
                Tok::Ident("n".into()),
                Tok::Float(1.5),
                Tok::Float(1e-5),
                Tok::Int(255),
                Tok::Int(1000)
            ]
        );
    }

    #[test]
    fn overflow_and_garbage_are_errors() {
        let lexed = lex("99999999999999999999999 $$$ \"abc");
        let errs: Vec<_> = lexed.errors.iter().map(|e| e.kind.clone()).collect();
        assert_eq!(
            errs,
            vec![
                LexErrorKind::IntTooLarge,
                LexErrorKind::InvalidChar,
                LexErrorKind::UnterminatedString
            ]
        );
    }

    #[test]
    fn nested_comments_and_docs() {
        let lexed = lex("/* a /* b */ c */ x /// one\n/// two\nop");
        assert_eq!(
            lexed
                .tokens
                .iter()
                .map(|t| t.tok.clone())
                .collect::<Vec<_>>(),
            vec![Tok::Ident("x".into()), Tok::Op]
        );
        assert_eq!(lexed.docs[0].lines, vec!["one", "two"]);
    }

    #[test]
    fn generic_call_marking() {
        assert_eq!(
            kinds("zeros<fp32>(x) a < b")[1],
            Tok::GenericLt,
            "dtype argument"
        );
        assert_eq!(kinds("a < b > c")[1], Tok::Lt);
    }

    #[test]
    fn underscore_is_its_own_token() {
        assert_eq!(
            kinds("_ _a"),
            vec![Tok::Underscore, Tok::Ident("_a".into())]
        );
    }
}

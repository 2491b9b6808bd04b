//! The PTX lexer: text to tokens, each with its line, and a cursor over them.
//!
//! Words are maximal runs of `[A-Za-z0-9_$%.]`, so opcodes (`ld.global.f32`),
//! directives (`.reg`), registers (`%rd3`, `%tid.x`) and immediates
//! (`0f3F800000`, `1.5`) are one token each. `//` comments are kept (body
//! comment lines become `Inst::Comment`); `/* */` comments are skipped.

use super::ReadError;

/// One token.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Tok<'a> {
    /// A word: opcode, directive, register, symbol or number.
    Word(&'a str),
    /// A string literal, unescaped.
    Str(String),
    /// One punctuation character.
    Punct(char),
    /// A `//` comment: the text after `//` and one space, and whether it is
    /// the first token on its line (else it trails an instruction).
    Comment {
        /// The comment's text.
        text: &'a str,
        /// Whether nothing precedes it on its line.
        own_line: bool,
    },
}

/// A token and the line (from 1) it starts on.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Token<'a> {
    /// The token.
    pub tok: Tok<'a>,
    /// Its line, from 1.
    pub line: usize,
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '%' | '.')
}

/// Whether a word being lexed is a decimal number that may continue with
/// an exponent sign (`1.5e-3`): it starts with a digit, is not a hex or
/// binary form, and ends in `e`.
fn wants_exponent_sign(word: &str) -> bool {
    let b = word.as_bytes();
    let hex =
        b.len() >= 2 && b[0] == b'0' && matches!(b[1], b'x' | b'X' | b'f' | b'F' | b'd' | b'D');
    matches!(b.first(), Some(c) if c.is_ascii_digit())
        && !hex
        && matches!(b.last(), Some(b'e' | b'E'))
        && b.iter()
            .all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E'))
}

/// Splits `text` into tokens.
pub(super) fn lex(text: &str) -> Result<Vec<Token<'_>>, ReadError> {
    let mut toks = Vec::new();
    let mut line = 1usize;
    // Whether a token has been produced on the current line.
    let mut line_has_token = false;
    let mut chars = text.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        match c {
            '\n' => {
                line += 1;
                line_has_token = false;
            }
            c if c.is_whitespace() => {}
            '/' if matches!(chars.peek(), Some((_, '/'))) => {
                chars.next();
                let from = start + 2;
                let mut end = text.len();
                while let Some(&(i, c)) = chars.peek() {
                    if c == '\n' {
                        end = i;
                        break;
                    }
                    chars.next();
                }
                let body = text.get(from..end).unwrap_or("");
                let body = body.strip_suffix('\r').unwrap_or(body);
                let body = body.strip_prefix(' ').unwrap_or(body);
                toks.push(Token {
                    tok: Tok::Comment {
                        text: body,
                        own_line: !line_has_token,
                    },
                    line,
                });
                line_has_token = true;
            }
            '/' if matches!(chars.peek(), Some((_, '*'))) => {
                chars.next();
                let open = line;
                let mut prev = ' ';
                let mut closed = false;
                for (_, c) in chars.by_ref() {
                    if c == '\n' {
                        line += 1;
                        line_has_token = false;
                    }
                    if prev == '*' && c == '/' {
                        closed = true;
                        break;
                    }
                    prev = c;
                }
                if !closed {
                    return Err(ReadError::new(open, "unterminated `/*` comment"));
                }
            }
            '"' => {
                let s = string(&mut chars, line)?;
                toks.push(Token {
                    tok: Tok::Str(s),
                    line,
                });
                line_has_token = true;
            }
            c if is_word_char(c) => {
                let mut end = start + c.len_utf8();
                loop {
                    match chars.peek() {
                        Some(&(i, c)) if is_word_char(c) => {
                            chars.next();
                            end = i + c.len_utf8();
                        }
                        Some(&(i, c @ ('+' | '-')))
                            if wants_exponent_sign(text.get(start..end).unwrap_or("")) =>
                        {
                            chars.next();
                            end = i + c.len_utf8();
                        }
                        // A state space with a scope (`shared::cta`) stays
                        // one word; a single `:` ends a label.
                        Some(&(i, ':')) if text.get(i..i + 2) == Some("::") => {
                            chars.next();
                            chars.next();
                            end = i + 2;
                        }
                        _ => break,
                    }
                }
                toks.push(Token {
                    tok: Tok::Word(text.get(start..end).unwrap_or("")),
                    line,
                });
                line_has_token = true;
            }
            '{' | '}' | '(' | ')' | '[' | ']' | ',' | ';' | ':' | '@' | '!' | '+' | '-' | '<'
            | '>' | '|' => {
                toks.push(Token {
                    tok: Tok::Punct(c),
                    line,
                });
                line_has_token = true;
            }
            c => {
                return Err(ReadError::new(
                    line,
                    format!("unexpected character `{}`", c.escape_debug()),
                ))
            }
        }
    }
    Ok(toks)
}

/// Reads a string literal after its opening quote, undoing the escapes of
/// Rust's `{:?}` (which the printer uses for `.file` names).
fn string(
    chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>,
    line: usize,
) -> Result<String, ReadError> {
    let unterminated = || ReadError::new(line, "unterminated string");
    let mut s = String::new();
    loop {
        let (_, c) = chars.next().ok_or_else(unterminated)?;
        match c {
            '"' => return Ok(s),
            '\n' => return Err(unterminated()),
            '\\' => {
                let (_, e) = chars.next().ok_or_else(unterminated)?;
                let c = match e {
                    'n' => '\n',
                    'r' => '\r',
                    't' => '\t',
                    '0' => '\0',
                    '\\' | '"' | '\'' => e,
                    'u' => unicode_escape(chars, line)?,
                    e => {
                        return Err(ReadError::new(
                            line,
                            format!("unknown escape `\\{}` in a string", e.escape_debug()),
                        ))
                    }
                };
                s.push(c);
            }
            c => s.push(c),
        }
    }
}

/// Reads the `{XXXX}` of a `\u{XXXX}` escape.
fn unicode_escape(
    chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>,
    line: usize,
) -> Result<char, ReadError> {
    let bad = || ReadError::new(line, "malformed `\\u{...}` escape in a string");
    if !matches!(chars.next(), Some((_, '{'))) {
        return Err(bad());
    }
    let mut code = 0u32;
    let mut digits = 0;
    loop {
        let (_, c) = chars.next().ok_or_else(bad)?;
        if c == '}' {
            break;
        }
        let d = c.to_digit(16).ok_or_else(bad)?;
        digits += 1;
        if digits > 6 {
            return Err(bad());
        }
        code = code * 16 + d;
    }
    if digits == 0 {
        return Err(bad());
    }
    char::from_u32(code).ok_or_else(bad)
}

/// A cursor over the tokens.
pub(super) struct Cursor<'a> {
    toks: Vec<Token<'a>>,
    pos: usize,
    /// The line of the last token (for errors at the end of the text).
    last_line: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at the first of `toks`.
    pub fn new(toks: Vec<Token<'a>>) -> Cursor<'a> {
        let last_line = toks.last().map_or(1, |t| t.line);
        Cursor {
            toks,
            pos: 0,
            last_line,
        }
    }

    /// The next token, comments included.
    pub fn peek_raw(&self) -> Option<&Token<'a>> {
        self.toks.get(self.pos)
    }

    /// The token after the next one, comments included.
    pub fn peek_second_raw(&self) -> Option<&Token<'a>> {
        self.toks.get(self.pos + 1)
    }

    /// Moves past the next token.
    pub fn bump(&mut self) {
        if self.pos < self.toks.len() {
            self.pos += 1;
        }
    }

    /// Moves past any comments.
    pub fn skip_comments(&mut self) {
        while matches!(
            self.peek_raw(),
            Some(Token {
                tok: Tok::Comment { .. },
                ..
            })
        ) {
            self.pos += 1;
        }
    }

    /// The next token that is not a comment.
    pub fn peek(&mut self) -> Option<&Token<'a>> {
        self.skip_comments();
        self.peek_raw()
    }

    /// The line of the next token that is not a comment (the last line at
    /// the end of the text).
    pub fn line(&mut self) -> usize {
        let last = self.last_line;
        self.peek().map_or(last, |t| t.line)
    }

    /// An error at the next token.
    pub fn error(&mut self, message: impl Into<String>) -> ReadError {
        ReadError::new(self.line(), message)
    }

    /// The next token, described for messages.
    pub fn describe_next(&mut self) -> String {
        match self.peek().map(|t| &t.tok) {
            None => "the end of the text".to_owned(),
            Some(Tok::Word(w)) => format!("`{w}`"),
            Some(Tok::Str(s)) => format!("string {s:?}"),
            Some(Tok::Punct(c)) => format!("`{c}`"),
            Some(Tok::Comment { .. }) => "a comment".to_owned(),
        }
    }

    /// Consumes `c` if it is next.
    pub fn eat(&mut self, c: char) -> bool {
        if matches!(self.peek(), Some(Token { tok: Tok::Punct(p), .. }) if *p == c) {
            self.bump();
            true
        } else {
            false
        }
    }

    /// Consumes `c`, or fails naming what was found instead.
    pub fn expect(&mut self, c: char) -> Result<(), ReadError> {
        if self.eat(c) {
            Ok(())
        } else {
            let found = self.describe_next();
            Err(self.error(format!("expected `{c}`, found {found}")))
        }
    }

    /// Consumes the word `w` if it is next.
    pub fn eat_word(&mut self, w: &str) -> bool {
        if matches!(self.peek(), Some(Token { tok: Tok::Word(x), .. }) if *x == w) {
            self.bump();
            true
        } else {
            false
        }
    }

    /// Consumes a word and returns it with its line, or fails saying that
    /// `what` was expected.
    pub fn word(&mut self, what: &str) -> Result<(&'a str, usize), ReadError> {
        match self.peek() {
            Some(&Token {
                tok: Tok::Word(w),
                line,
            }) => {
                self.bump();
                Ok((w, line))
            }
            _ => {
                let found = self.describe_next();
                Err(self.error(format!("expected {what}, found {found}")))
            }
        }
    }

    /// Consumes an unsigned integer that fits in `u32`.
    pub fn u32(&mut self, what: &str) -> Result<u32, ReadError> {
        let (w, line) = self.word(what)?;
        super::num::unsigned(w)
            .and_then(|v| u32::try_from(v).ok())
            .ok_or_else(|| ReadError::new(line, format!("expected {what}, found `{w}`")))
    }
}

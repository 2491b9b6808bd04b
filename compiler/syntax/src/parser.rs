//! The parser driver: runs the lexer, the lalrpop parser with error recovery,
//! and turns every problem into a [`Diagnostic`].

use crate::ast::{
    ArgKind, BinOp, Block, Dim, DimKind, Expr, ExprId, ExprKind, File, Item, Name, Stmt, StmtKind,
    UnOp,
};
use crate::grammar;
use crate::lexer::{self, LexErrorKind, Lexed, Tok};
use lalrpop_util::{ErrorRecovery, ParseError};
use std::cell::{Cell, RefCell};
use tessera_diagnostics::{codes, Diagnostic, FileId, Span};

/// Deepest expression tree the parser builds (a chain `a + a + ... + a` of
/// this many operators, say). Deeper input is an error, so no recursive pass
/// over the AST can exhaust the stack.
pub const MAX_EXPR_DEPTH: u32 = 512;

/// Largest file accepted, in bytes: spans are 32-bit offsets.
pub const MAX_FILE_BYTES: usize = 256 << 20;

/// Errors that semantic actions raise, aborting the parse.
#[derive(Clone, Debug, PartialEq)]
pub enum ParseIssue {
    /// An expression nested deeper than [`MAX_EXPR_DEPTH`].
    TooDeep {
        /// First byte of the offending expression.
        lo: u32,
        /// One past its last byte.
        hi: u32,
    },
    /// `for x in e { ... }` where `e` is neither `start..end` nor a
    /// Python-style `range(...)` call of one to three arguments.
    LoopOver {
        /// First byte of `e`.
        lo: u32,
        /// One past its last byte.
        hi: u32,
    },
    /// A call other than `cdiv` in a dimension.
    DimCall {
        /// First byte of the callee's name.
        lo: u32,
        /// One past its last byte.
        hi: u32,
    },
}

type Recovery = ErrorRecovery<u32, Tok, ParseIssue>;
type Error = ParseError<u32, Tok, ParseIssue>;

/// State shared by the grammar's actions: the file being parsed, the next
/// expression id, and the errors recovered from so far.
pub struct ParseCtx {
    file: FileId,
    next_id: Cell<u32>,
    recovered: RefCell<Vec<Recovery>>,
}

impl ParseCtx {
    fn new(file: FileId) -> ParseCtx {
        ParseCtx {
            file,
            next_id: Cell::new(0),
            recovered: RefCell::new(Vec::new()),
        }
    }

    /// The span `l..r` in the file being parsed.
    pub fn span(&self, l: u32, r: u32) -> Span {
        Span::new(self.file, l, r.max(l))
    }

    /// Records an error the parser recovered from.
    pub fn recover(&self, error: Recovery) {
        self.recovered.borrow_mut().push(error);
    }

    /// Builds an expression node, checking the depth limit.
    pub fn node(&self, kind: ExprKind, l: u32, r: u32) -> Result<Expr, Error> {
        let depth = 1 + kind.children().iter().map(|c| c.depth).max().unwrap_or(0);
        if depth > MAX_EXPR_DEPTH {
            return Err(ParseError::User {
                error: ParseIssue::TooDeep { lo: l, hi: r },
            });
        }
        let id = ExprId(self.next_id.get());
        self.next_id.set(id.0 + 1);
        Ok(Expr {
            id,
            kind,
            span: self.span(l, r),
            depth,
        })
    }

    /// Builds a binary expression.
    pub fn binary(&self, op: BinOp, lhs: Expr, rhs: Expr, l: u32, r: u32) -> Result<Expr, Error> {
        self.node(
            ExprKind::Binary {
                op,
                lhs: Box::new(lhs),
                rhs: Box::new(rhs),
            },
            l,
            r,
        )
    }

    /// Builds a prefix expression.
    pub fn unary(&self, op: UnOp, operand: Expr, l: u32, r: u32) -> Result<Expr, Error> {
        self.node(
            ExprKind::Unary {
                op,
                operand: Box::new(operand),
            },
            l,
            r,
        )
    }

    /// `for var in range(...) { ... }` (Python's and Triton's form):
    /// `range(end)`, `range(start, end)` or `range(start, end, step)` is
    /// the loop `start..end step step`; anything else is an error.
    pub fn range_loop(
        &self,
        var: Name,
        over: Expr,
        body: Block,
        l: u32,
        r: u32,
    ) -> Result<Stmt, Error> {
        let misfit = ParseError::User {
            error: ParseIssue::LoopOver {
                lo: over.span.lo,
                hi: over.span.hi,
            },
        };
        let ExprKind::Call {
            callee,
            dtype_args,
            args,
        } = over.kind
        else {
            return Err(misfit);
        };
        let positional = args.iter().all(|a| a.kind == ArgKind::Positional);
        if callee.text != "range" || !dtype_args.is_empty() || !positional {
            return Err(misfit);
        }
        let mut values = args.into_iter().map(|a| a.value);
        let (start, end, step) = match (values.next(), values.next(), values.next(), values.next())
        {
            (Some(end), None, None, None) => {
                let at = end.span.lo;
                (self.node(ExprKind::Int(0), at, at)?, end, None)
            }
            (Some(start), Some(end), step, None) => (start, end, step),
            _ => return Err(misfit),
        };
        Ok(Stmt {
            kind: StmtKind::For {
                var,
                start,
                end,
                step,
                body,
            },
            span: self.span(l, r),
        })
    }

    /// A call in a dimension: `cdiv(N, BLOCK)`, the only one there is
    /// (its name at `name`, the whole call ending at `r`).
    pub fn dim_call(
        &self,
        f: &str,
        a: Dim,
        b: Dim,
        name: (u32, u32),
        r: u32,
    ) -> Result<Dim, Error> {
        if f != "cdiv" {
            return Err(ParseError::User {
                error: ParseIssue::DimCall {
                    lo: name.0,
                    hi: name.1,
                },
            });
        }
        Ok(Dim {
            kind: DimKind::Quot {
                dim: Box::new(a),
                by: Box::new(b),
                ceil: true,
            },
            span: self.span(name.0, r),
        })
    }

    /// A parenthesised expression: the inner node, widened to the parentheses.
    pub fn paren(&self, mut inner: Expr, l: u32, r: u32) -> Expr {
        inner.span = self.span(l, r);
        inner
    }
}

/// The result of parsing one file.
#[derive(Debug)]
pub struct Parsed {
    /// The tree; items that failed to parse are `Item::Error`.
    pub file: File,
    /// Lexing and parsing errors, in source order.
    pub diagnostics: Vec<Diagnostic>,
}

/// Parses one file. Never panics; never fails.
pub fn parse(file_id: FileId, text: &str) -> Parsed {
    let mut diagnostics = Vec::new();
    if text.len() > MAX_FILE_BYTES {
        diagnostics.push(
            Diagnostic::error(codes::E0009, Span::new(file_id, 0, 0), "file is too large")
                .with_label(format!(
                    "this file has {} bytes; the limit is {} MiB",
                    text.len(),
                    MAX_FILE_BYTES >> 20
                )),
        );
        return Parsed {
            file: File { items: Vec::new() },
            diagnostics,
        };
    }
    let lexed = lexer::lex(text);
    diagnostics.extend(
        lexed
            .errors
            .iter()
            .map(|e| lex_diagnostic(file_id, text, e)),
    );
    diagnostics.extend(comments_in_expressions(file_id, text, &lexed.tokens));
    if let Some(at) = lexer::too_deep(&lexed.tokens) {
        let t = &lexed.tokens[at];
        diagnostics.push(
            Diagnostic::error(
                codes::E0008,
                Span::new(file_id, t.lo, t.hi),
                "brackets are nested too deeply",
            )
            .with_label(format!("this is nesting level {}", lexer::MAX_NESTING + 1))
            .with_note(format!(
                "the limit is {} levels of (), [] and {{}}",
                lexer::MAX_NESTING
            ))
            .with_help("split the expression with `let` bindings"),
        );
        return Parsed {
            file: File { items: Vec::new() },
            diagnostics,
        };
    }

    let ctx = ParseCtx::new(file_id);
    let end = text.len() as u32;
    let tokens = lexed.tokens.iter().map(|t| Ok((t.lo, t.tok.clone(), t.hi)));
    let result = grammar::FileParser::new().parse(&ctx, tokens);
    let mut parse_errors: Vec<Error> = ctx
        .recovered
        .into_inner()
        .into_iter()
        .map(|r| r.error)
        .collect();
    let mut file = match result {
        Ok(file) => file,
        Err(e) => {
            parse_errors.push(e);
            File { items: Vec::new() }
        }
    };
    // One parse error per line: a second one on the line of the first is
    // the recovery's echo (`(v ** 2)` also "expected `;`, found `)`").
    let mut lines = std::collections::HashSet::new();
    let mut parsed: Vec<Diagnostic> = parse_errors
        .into_iter()
        .filter(|e| !follows_lex_error(e, &lexed))
        .map(|e| {
            let eof = matches!(e, ParseError::UnrecognizedEof { .. });
            let d = parse_diagnostic(file_id, text, end, e);
            match lexer::unclosed(&lexed.tokens) {
                Some((open, close)) if eof => unclosed_at_end(d, file_id, open, close),
                _ => d,
            }
        })
        .collect();
    parsed.sort_by_key(|d| (d.primary.span.lo, d.primary.span.hi));
    for d in parsed {
        let lo = (d.primary.span.lo as usize).min(text.len());
        let line = text.as_bytes()[..lo]
            .iter()
            .filter(|b| **b == b'\n')
            .count();
        if lines.insert(line) {
            diagnostics.push(d);
        }
    }
    attach_docs(&mut file, &lexed);
    diagnostics.sort_by_key(|d| (d.primary.span.lo, d.primary.span.hi));
    Parsed { file, diagnostics }
}

/// Parses a single expression (for tests and tools). Errors are returned as
/// diagnostics; the expression is `None` if it could not be parsed.
pub fn parse_expr(file_id: FileId, text: &str) -> (Option<Expr>, Vec<Diagnostic>) {
    let lexed = lexer::lex(text);
    let mut diagnostics: Vec<Diagnostic> = lexed
        .errors
        .iter()
        .map(|e| lex_diagnostic(file_id, text, e))
        .collect();
    if lexer::too_deep(&lexed.tokens).is_some() {
        diagnostics.push(Diagnostic::error(
            codes::E0008,
            Span::new(file_id, 0, 0),
            "brackets are nested too deeply",
        ));
        return (None, diagnostics);
    }
    let ctx = ParseCtx::new(file_id);
    let tokens = lexed.tokens.iter().map(|t| Ok((t.lo, t.tok.clone(), t.hi)));
    match grammar::ExprParser::new().parse(&ctx, tokens) {
        Ok(e) => (Some(e), diagnostics),
        Err(e) => {
            diagnostics.push(parse_diagnostic(file_id, text, text.len() as u32, e));
            (None, diagnostics)
        }
    }
}

/// Whether a parse error sits on the first token after a lexing error, which
/// already explains it.
fn follows_lex_error(error: &Error, lexed: &Lexed) -> bool {
    let at = match error {
        ParseError::UnrecognizedToken { token, .. } | ParseError::ExtraToken { token } => token.0,
        ParseError::UnrecognizedEof { location, .. } => *location,
        _ => return false,
    };
    let prev_end = lexed
        .tokens
        .iter()
        .take_while(|t| t.lo < at)
        .last()
        .map_or(0, |t| t.hi);
    lexed
        .errors
        .iter()
        .any(|e| e.lo >= prev_end && e.lo <= at.max(prev_end))
}

fn lex_diagnostic(file: FileId, text: &str, e: &lexer::LexError) -> Diagnostic {
    let span = Span::new(file, e.lo, e.hi);
    let snippet = text.get(e.lo as usize..e.hi as usize).unwrap_or("");
    match e.kind {
        LexErrorKind::InvalidChar => {
            let first = snippet.chars().next().unwrap_or('?');
            let shown = if first.is_control() || first.is_whitespace() {
                format!("{:?}", first)
            } else {
                format!("`{first}`")
            };
            Diagnostic::error(codes::E0002, span, format!("unexpected character {shown}"))
                .with_label(if snippet.chars().count() > 1 {
                    "these characters start no token"
                } else {
                    "this character starts no token"
                })
        }
        LexErrorKind::UnterminatedString => {
            Diagnostic::error(codes::E0003, span, "unterminated string literal")
                .with_label("the string starts here")
                .with_help("close it with `\"` on the same line")
        }
        LexErrorKind::InvalidEscape => {
            Diagnostic::error(codes::E0007, span, "unknown escape in string literal")
                .with_label("this string has an unknown escape")
                .with_note("the escapes are \\n \\t \\r \\0 \\\\ and \\\"")
        }
        LexErrorKind::UnterminatedComment => {
            let head = Span::new(file, e.lo, (e.lo + 2).min(e.hi));
            Diagnostic::error(codes::E0004, head, "unterminated block comment")
                .with_label("this `/*` has no matching `*/`")
        }
        LexErrorKind::IntTooLarge => {
            Diagnostic::error(codes::E0005, span, "integer literal is too large")
                .with_label("this does not fit in 64 bits")
                .with_note(format!("the largest integer is {}", u64::MAX))
        }
        LexErrorKind::BadFloat => {
            Diagnostic::error(codes::E0006, span, "float literal is out of range")
                .with_label("this is not a finite 64-bit float")
        }
    }
}

/// Describes an "expected" list from lalrpop in words.
fn describe_expected(expected: &[String]) -> String {
    let has = |s: &str| expected.iter().any(|e| e.trim_matches('"') == s);
    if has("op") && has("fn") && has("kernel") {
        return "an item (`op`, `kernel`, `fn`, `schedule`, `mesh`, `numerics` or `import`)".into();
    }
    if has("integer") && has("identifier") && has("(") && expected.len() > 8 {
        return "an expression".into();
    }
    // `out`, `on`, `grid`, ... are names where an identifier is
    // (contextual keywords): not worth listing beside it.
    let contextual = |e: &&String| {
        has("identifier")
            && matches!(
                e.trim_matches('"'),
                "out" | "inout" | "on" | "step" | "grid" | "mesh" | "schedule" | "shard"
            )
    };
    // Python's spellings are aliases of operators listed anyway.
    let alias = |e: &&String| match e.trim_matches('"') {
        "and" => has("&&"),
        "or" => has("||"),
        "not" => has("!"),
        "elif" => has("else"),
        _ => false,
    };
    let names: Vec<String> = expected
        .iter()
        .filter(|e| !contextual(e) && !alias(e))
        .map(|e| {
            let bare = e.trim_matches('"');
            match bare {
                "identifier" => "an identifier".to_owned(),
                "integer" => "an integer".to_owned(),
                "float literal" => "a float".to_owned(),
                "string" => "a string".to_owned(),
                "dtype" => "a dtype".to_owned(),
                "generic <" => "`<`".to_owned(),
                other => format!("`{other}`"),
            }
        })
        .collect();
    // (`<` may be expected both as a comparison and as a generic list.)
    let mut names = names;
    let mut seen = std::collections::HashSet::new();
    names.retain(|n| seen.insert(n.clone()));
    match names.len() {
        0 => "something else".into(),
        1 => names[0].clone(),
        n if n <= 6 => format!("{} or {}", names[..n - 1].join(", "), names[n - 1]),
        _ => format!("one of {}, ...", names[..6].join(", ")),
    }
}

/// A hint for an operator other languages have and Tessera does not,
/// written just before byte `lo` of `text`: `**` (the parser stops at the
/// second `*`), or `//`, which starts a comment, so that the parser stops
/// at the next line instead.
fn missing_operator_hint(text: &str, lo: u32) -> Option<&'static str> {
    let before = text.get(..lo as usize)?;
    if before.ends_with('*') && text.get(lo as usize..)?.starts_with('*') {
        return Some("Tessera has no `**`: write `pow(x, 2.0)`");
    }
    // The last line before the error with code on it.
    let line = before.trim_end().lines().last()?;
    let (code, _) = line.split_once("//")?;
    let code = code.trim_end();
    let operand = code
        .chars()
        .last()
        .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ')' || c == ']');
    let ends_statement = code.ends_with(';') || code.ends_with('{') || code.ends_with('}');
    (operand && !ends_statement && !code.trim().is_empty()).then_some(
        "`//` starts a comment, so the rest of that line was skipped: Tessera has no floor-division operator; integer `/` truncates toward zero (`x / 2`)",
    )
}

/// W0010 where a `//` comment cuts an expression: after an operand, the
/// comment's text itself looking like one (`4`, `BS`), the expression going
/// on with an operator or a closing bracket on a later line. Python's
/// `(slot // 4` then `+ 100)` would silently be `slot + 100`. Outside
/// brackets (`let b = slot // 4` then `+ 100;`) the comment must be one
/// word or number, as a comment explaining a line rarely is.
fn comments_in_expressions(file: FileId, text: &str, tokens: &[lexer::Spanned]) -> Vec<Diagnostic> {
    use lexer::Tok;
    let mut out = Vec::new();
    let mut depth = 0i32;
    for pair in tokens.windows(2) {
        let (t, next) = (&pair[0], &pair[1]);
        match t.tok {
            Tok::LParen | Tok::LBracket => depth += 1,
            Tok::RParen | Tok::RBracket => depth -= 1,
            _ => {}
        }
        let operand = matches!(
            t.tok,
            Tok::Ident(_) | Tok::Int(_) | Tok::Float(_) | Tok::RParen | Tok::RBracket
        );
        let continues = matches!(
            next.tok,
            Tok::Plus | Tok::Minus | Tok::Star | Tok::Slash | Tok::Percent | Tok::RParen
        );
        let bare = depth <= 0;
        if !operand || !continues || (bare && next.tok == Tok::RParen) {
            continue;
        }
        let Some(gap) = text.get(t.hi as usize..next.lo as usize) else {
            continue;
        };
        let line = gap.split('\n').next().unwrap_or("");
        let Some(at) = line.find("//") else { continue };
        let comment = line[at + 2..].trim();
        let looks_like_operand = !comment.is_empty()
            && comment.len() <= 24
            && comment
                .chars()
                .all(|c| c.is_alphanumeric() || "_. ()".contains(c))
            && comment.starts_with(|c: char| c.is_alphanumeric() || c == '(');
        let word = comment.len() <= 12
            && comment
                .chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '.');
        if gap.contains('\n') && looks_like_operand && (!bare || word) {
            let lo = t.hi + at as u32;
            out.push(
                Diagnostic::warning(
                    codes::W0010,
                    Span::new(file, lo, t.hi + line.len() as u32),
                    "`//` starts a comment in the middle of this expression",
                )
                .with_label("the rest of the line is skipped")
                .with_help(
                    "Tessera has no floor-division operator: integer `/` truncates toward \
                     zero (`x / 4`); move a comment out of the expression",
                ),
            );
        }
    }
    out
}

/// A hint for a torch or Triton conversion at byte `lo` of `text`:
/// `x.to(fp32)`, `x.float()`, `x.half()`, and `float("-inf")`.
fn conversion_hint(text: &str, lo: u32) -> Option<&'static str> {
    let before = text.get(..lo as usize)?.trim_end();
    let after = text.get(lo as usize..)?;
    let method = ["float", "half", "bfloat16", "double", "int", "long", "to"]
        .iter()
        .any(|m| {
            after.starts_with(m)
                && !after[m.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_')
        });
    if (before.ends_with('.') && method) || before.ends_with(".to(") {
        return Some(
            "a conversion is `as`: `x as fp32` (torch's `x.float()`, Triton's `x.to(tl.float32)`)",
        );
    }
    (after.starts_with("float(\"") || after.starts_with("float('"))
        .then_some("write the number itself: `inf`, `-inf` (torch's `float(\"-inf\")`)")
}

/// A hint for a dtype where a value is expected (`zeros([N], dtype =
/// fp32)`, Triton's `tl.zeros([N], dtype=tl.float32)`), or for `float`
/// or `int` as a tensor's dtype, at byte `lo` of `text`.
fn dtype_hint(text: &str, lo: u32) -> Option<&'static str> {
    let after = text.get(lo as usize..)?;
    let word: String = after
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    let before = text.get(..lo as usize)?.trim_end();
    if crate::ast::Dtype::from_name(&word).is_some() {
        let keyword = before.strip_suffix('=')?.trim_end();
        return keyword.ends_with("dtype").then_some(
            "a dtype is a type argument: `zeros<fp32>([N])`, `full<int32>([N], 0)` (Triton's \
             `tl.zeros([N], dtype=tl.float32)`); a value converts with `x as fp32`",
        );
    }
    let in_tensor_type = before
        .rsplit_once("tensor<")
        .is_some_and(|(_, inside)| !inside.contains('>'));
    (matches!(word.as_str(), "float" | "int") && before.ends_with(',') && in_tensor_type).then_some(
        "a tensor's dtype names its width: `fp32`, `bf16`, `int32`, `int8` (`float` and `int` \
         are numbers known when the code compiles: attributes and kernel constants)",
    )
}

/// A hint for a Python loop header (`for i in range(4):`) before byte
/// `lo` of `text`: the body is a block in braces.
fn range_call_hint(text: &str, lo: u32) -> Option<&'static str> {
    let line = text.get(..lo as usize)?.lines().last()?;
    let (head, after) = line.split_once(" in ")?;
    (head.trim_start().starts_with("for ") && !after.contains('{'))
        .then_some("a loop's body is a block in braces: `for i in range(4) { ... }` (or `0..4`)")
}

/// A hint for an assignment to an element or a slice (`x[2] = 3.0;`,
/// numpy's and torch's in-place write), at the `=` at byte `lo`: tensors
/// are values.
fn item_assignment_hint(text: &str, lo: u32) -> Option<&'static str> {
    let after = text.get(lo as usize..)?;
    if !after.starts_with('=') || after.starts_with("==") {
        return None;
    }
    let line = text.get(..lo as usize)?.lines().last()?.trim();
    let target = line.strip_suffix(']')?;
    let (name, _) = target.split_once('[')?;
    let name = name.trim();
    let ident = !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit());
    ident.then_some(
        "an element or a slice cannot be assigned: tensors are values. Build the new one, \
         `x = where(arange(0, N) == i, v, x)` (`scatter` or `masked_fill` for \
         several), or in a kernel `store(x, [i], v)` to an `out` or `inout` tensor",
    )
}

/// A hint for a second comparison in one expression, at byte `lo` of
/// `text`: Triton's masks `r < N & c < M` parse as `r < (N & c) < M`,
/// since `&` binds tighter than comparisons (as in Python), and
/// comparisons do not chain.
fn chained_comparison_hint(text: &str, lo: u32) -> Option<&'static str> {
    let after = text.get(lo as usize..)?;
    let comparison = ["<=", ">=", "==", "!=", "<", ">"]
        .iter()
        .any(|c| after.starts_with(c));
    let before = text.get(..lo as usize)?;
    let statement = before.rsplit([';', '{', '}']).next()?;
    let earlier = ["<", ">", "==", "!="].iter().any(|c| statement.contains(c));
    (comparison && earlier).then_some(
        "comparisons do not chain, and `&`, `|` and `^` bind tighter than comparisons (as in \
         Python): write `(r < N) & (c < M)`, or `r < N && c < M`",
    )
}

/// An unexpected end of file inside brackets: the closing one it lacks,
/// and where the unclosed one opened.
fn unclosed_at_end(d: Diagnostic, file: FileId, open: &lexer::Spanned, close: &str) -> Diagnostic {
    let opener = open.tok.spelling().unwrap_or("bracket");
    Diagnostic::error(
        codes::E0011,
        d.primary.span,
        format!("unexpected end of file: this `{opener}` is never closed"),
    )
    .with_label(format!("expected `{close}` here"))
    .with_secondary(Span::new(file, open.lo, open.hi), "opened here")
}

fn parse_diagnostic(file: FileId, text: &str, end: u32, e: Error) -> Diagnostic {
    match e {
        ParseError::UnrecognizedToken {
            token: (lo, tok, hi),
            expected,
        } => {
            let found = tok.describe();
            let want = describe_expected(&expected);
            let d = Diagnostic::error(
                codes::E0010,
                Span::new(file, lo, hi),
                format!("expected {want}, found {found}"),
            )
            .with_label(format!("unexpected {found}"));
            let hint = missing_operator_hint(text, lo)
                .or_else(|| conversion_hint(text, lo))
                .or_else(|| range_call_hint(text, lo))
                .or_else(|| chained_comparison_hint(text, lo))
                .or_else(|| item_assignment_hint(text, lo))
                .or_else(|| dtype_hint(text, lo));
            match hint {
                Some(hint) => d.with_help(hint),
                None => d,
            }
        }
        ParseError::ExtraToken {
            token: (lo, tok, hi),
        } => Diagnostic::error(
            codes::E0010,
            Span::new(file, lo, hi),
            format!("unexpected {}", tok.describe()),
        )
        .with_label("nothing may follow here"),
        ParseError::UnrecognizedEof { location, expected } => {
            let at = location.min(end);
            Diagnostic::error(
                codes::E0011,
                Span::new(file, at, at),
                "unexpected end of file",
            )
            .with_label(format!("expected {} here", describe_expected(&expected)))
        }
        ParseError::InvalidToken { location } => Diagnostic::error(
            codes::E0002,
            Span::new(file, location, location),
            "invalid token",
        ),
        ParseError::User {
            error: ParseIssue::TooDeep { lo, hi },
        } => Diagnostic::error(
            codes::E0008,
            Span::new(file, lo, hi.min(lo.saturating_add(80))),
            "expression is nested too deeply",
        )
        .with_label(format!(
            "this expression is more than {MAX_EXPR_DEPTH} operations deep"
        ))
        .with_help("split it into several `let` bindings"),
        ParseError::User {
            error: ParseIssue::LoopOver { lo, hi },
        } => Diagnostic::error(
            codes::E0010,
            Span::new(file, lo, hi),
            "a loop runs over a range",
        )
        .with_label("not `start..end` or `range(...)`")
        .with_help(
            "write `for i in 0..n` (or `0..n step 2`), or Python's `range(n)`, `range(a, b)`, \
             `range(a, b, step)`",
        ),
        ParseError::User {
            error: ParseIssue::DimCall { lo, hi },
        } => Diagnostic::error(
            codes::E0010,
            Span::new(file, lo, hi),
            "only `cdiv` can be called in a dimension",
        )
        .with_label("not `cdiv`")
        .with_help(
            "a dimension is built from sizes, integers and constants with `+`, `-`, `*`, `/` \
             and `cdiv(a, b)`",
        ),
    }
}

/// Gives each item the doc comment run that ends right before it.
fn attach_docs(file: &mut File, lexed: &Lexed) {
    let mut runs = lexed.docs.iter().peekable();
    for item in &mut file.items {
        let start = item.span().lo;
        // The run that ends last before the item, with no token in between.
        let mut chosen = None;
        while let Some(run) = runs.peek() {
            if run.hi > start {
                break;
            }
            chosen = Some(*run);
            runs.next();
        }
        let Some(run) = chosen else { continue };
        let next_token = lexed.tokens.partition_point(|t| t.lo < run.hi);
        let token_between = lexed.tokens.get(next_token).is_some_and(|t| t.lo < start);
        if token_between || matches!(item, Item::Error(_)) {
            continue;
        }
        if let Some(docs) = item.docs_mut() {
            *docs = run.lines.clone();
        }
    }
}

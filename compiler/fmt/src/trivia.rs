//! Trivia: the comments and blank lines the lexer skips, recovered from the
//! source text between the tokens' spans.
//!
//! The parser never sees comments, so the AST has no place for them. The
//! formatter instead keeps the token stream beside the AST and, while it
//! prints, emits every comment before the first printed token that follows
//! it in the source. What matters for layout is recorded here: whether a
//! comment stood on its own line, and where the source had blank lines.

use tessera_syntax::lexer::Spanned;

/// One comment of the source: `// ...`, `/// ...` or `/* ... */`.
#[derive(Clone, Debug, PartialEq)]
pub struct Comment {
    /// First byte of the comment.
    pub lo: u32,
    /// The text as written (trailing whitespace removed from line comments).
    pub text: String,
    /// Whether nothing but whitespace precedes it on its line.
    pub own_line: bool,
    /// Whether an empty line separates it from what precedes it.
    pub blank_before: bool,
    /// Whether a line break follows it (always true for line comments).
    pub newline_after: bool,
}

/// A token's position and the whitespace before it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TokenInfo {
    /// First byte.
    pub lo: u32,
    /// One past the last byte.
    pub hi: u32,
    /// Whether an empty line directly precedes it (after any comments).
    pub blank_before: bool,
}

/// The trivia of one file: tokens with their spacing, and the comments.
#[derive(Clone, Debug, Default)]
pub struct Trivia {
    /// Every token the parser reads, in order.
    pub tokens: Vec<TokenInfo>,
    /// Every comment, in order.
    pub comments: Vec<Comment>,
}

/// Collects the trivia of `src`, given its tokens. Whatever lies between two
/// tokens is whitespace and comments (the caller has checked that lexing
/// found no error).
pub fn collect(src: &str, tokens: &[Spanned]) -> Trivia {
    let mut trivia = Trivia::default();
    let mut prev_end = 0usize;
    for t in tokens {
        let (lo, hi) = (t.lo as usize, t.hi as usize);
        let blank = scan_gap(src, prev_end, lo.max(prev_end), prev_end == 0, &mut trivia);
        trivia.tokens.push(TokenInfo {
            lo: t.lo,
            hi: t.hi,
            blank_before: blank,
        });
        prev_end = hi.max(prev_end);
    }
    scan_gap(src, prev_end, src.len(), prev_end == 0, &mut trivia);
    trivia
}

/// Scans `src[from..to]` for comments. Returns whether the whitespace run
/// that ends the gap holds an empty line.
fn scan_gap(src: &str, from: usize, to: usize, at_start: bool, out: &mut Trivia) -> bool {
    let bytes = src.as_bytes();
    let mut i = from;
    // Newlines seen since the last non-whitespace thing.
    let mut newlines = 0usize;
    let mut after_something = !at_start;
    while i < to {
        let b = bytes[i];
        if b == b'\n' {
            newlines += 1;
            i += 1;
        } else if b.is_ascii_whitespace() {
            i += 1;
        } else if src[i..to].starts_with("//") {
            let end = src[i..to].find('\n').map_or(to, |n| i + n);
            out.comments.push(Comment {
                lo: i as u32,
                text: src[i..end].trim_end().to_owned(),
                own_line: newlines > 0 || !after_something,
                blank_before: newlines > 1,
                newline_after: true,
            });
            (i, newlines, after_something) = (end, 0, true);
        } else if src[i..to].starts_with("/*") {
            let end = block_end(bytes, i, to);
            let rest = &src[end..to];
            let next = rest.find(|c: char| !c.is_ascii_whitespace());
            out.comments.push(Comment {
                lo: i as u32,
                text: src[i..end].to_owned(),
                own_line: newlines > 0 || !after_something,
                blank_before: newlines > 1,
                newline_after: rest[..next.unwrap_or(rest.len())].contains('\n'),
            });
            (i, newlines, after_something) = (end, 0, true);
        } else {
            // Not trivia: cannot happen in a file that lexed cleanly.
            i += src[i..].chars().next().map_or(1, char::len_utf8);
            (newlines, after_something) = (0, true);
        }
    }
    newlines > 1
}

/// The end of the (nested) block comment starting at `start`.
fn block_end(bytes: &[u8], start: usize, to: usize) -> usize {
    let mut depth = 0usize;
    let mut i = start;
    while i + 1 < to {
        match (bytes[i], bytes[i + 1]) {
            (b'/', b'*') => {
                depth += 1;
                i += 2;
            }
            (b'*', b'/') => {
                depth -= 1;
                i += 2;
                if depth == 0 {
                    return i;
                }
            }
            _ => i += 1,
        }
    }
    to
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_syntax::lexer::lex;

    #[test]
    fn finds_comments_and_blank_lines() {
        let src = "// a\n\n/* b /* c */ */ x // d\n\ny";
        let trivia = collect(src, &lex(src).tokens);
        let texts: Vec<_> = trivia.comments.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(texts, vec!["// a", "/* b /* c */ */", "// d"]);
        assert!(trivia.comments[1].own_line && trivia.comments[1].blank_before);
        assert!(!trivia.comments[1].newline_after);
        assert!(!trivia.comments[2].own_line);
        assert_eq!(
            trivia
                .tokens
                .iter()
                .map(|t| t.blank_before)
                .collect::<Vec<_>>(),
            vec![false, true]
        );
    }
}

//! The layout engine: a small document tree ([`Doc`]) and the [`Writer`]
//! that lays it out at a fixed width, interleaving the source's comments.
//!
//! Layout is greedy. A [`Doc::List`] (arguments, parameters, list literals,
//! index lists) puts its items on the current line while they fit within
//! [`MAX_WIDTH`], and continues on a new line aligned one column after its
//! opening bracket otherwise. Everything else stays on one line.
//!
//! Comments are synchronised by tokens: every printed token is matched with
//! its token in the source, and the comments that precede that source token
//! are printed first. A comment that stood on its own line gets its own
//! line; a comment that followed a token on the same line stays at the end of
//! the current line. Line breaks and spaces are pending until text follows,
//! so a trailing comment can still join the line the break would end.

use crate::trivia::Trivia;

/// The width lines are wrapped at.
pub const MAX_WIDTH: usize = 100;

/// The width wrapped parameter lists of signatures are filled to, as the
/// hand-written examples and standard library do; lines still never pass
/// [`MAX_WIDTH`].
pub const SIGNATURE_FILL_WIDTH: usize = 88;

/// How far the source cursor may skip ahead to match a printed token: the
/// formatter drops doubled parentheses and trailing commas.
const SYNC_LOOKAHEAD: usize = 4;

/// A layout tree: tokens, soft spaces and wrappable lists.
#[derive(Clone, Debug)]
pub enum Doc {
    /// One source token, printed as is.
    Tok(String),
    /// One space (dropped at the start of a line).
    Space,
    /// The parts in order.
    Seq(Vec<Doc>),
    /// `open item, item, ... close`, filled greedily and aligned after
    /// `open` when it wraps.
    List {
        /// The opening bracket.
        open: &'static str,
        /// The items, without their commas.
        items: Vec<Doc>,
        /// The closing bracket.
        close: &'static str,
    },
}

impl Doc {
    /// A token.
    pub fn tok(text: impl Into<String>) -> Doc {
        Doc::Tok(text.into())
    }

    /// The width of the doc laid out on one line.
    pub fn flat_width(&self) -> usize {
        match self {
            Doc::Tok(t) => t.chars().count(),
            Doc::Space => 1,
            Doc::Seq(parts) => parts.iter().map(Doc::flat_width).sum(),
            Doc::List { open, items, close } => {
                let inner: usize = items.iter().map(Doc::flat_width).sum();
                open.len() + inner + 2 * items.len().saturating_sub(1) + close.len()
            }
        }
    }

    /// Whether the doc holds a place where a line may break.
    fn can_break(&self) -> bool {
        match self {
            Doc::Tok(_) | Doc::Space => false,
            Doc::Seq(parts) => parts.iter().any(Doc::can_break),
            Doc::List { items, .. } => items.len() > 1 || items.iter().any(Doc::can_break),
        }
    }

    /// The width the doc needs on its first line when every break is taken.
    fn first_line_width(&self) -> usize {
        match self {
            Doc::Seq(parts) => width_until_break(parts, 0),
            Doc::List { open, items, close } => match items.first() {
                None => open.len() + close.len(),
                Some(first) => open.len() + first.first_line_width() + 1,
            },
            other => other.flat_width(),
        }
    }
}

/// The width of `parts` up to their first possible break, plus `tail` when
/// they cannot break at all.
fn width_until_break(parts: &[Doc], tail: usize) -> usize {
    let mut width = 0;
    for part in parts {
        if part.can_break() {
            return width + part.first_line_width();
        }
        width += part.flat_width();
    }
    width + tail
}

/// Writes formatted text, with the comments of the source.
pub struct Writer<'a> {
    src: &'a str,
    trivia: &'a Trivia,
    out: String,
    /// Column of the end of `out`, in characters.
    col: usize,
    /// Indentation of the next line.
    pub indent: usize,
    /// The width lists are filled to.
    pub fill_width: usize,
    /// Line breaks to write before the next text: 0, 1, or 2 (a blank line).
    pending_lines: usize,
    /// Whether a space is due before the next text.
    pending_space: bool,
    /// Set after `{`: no blank line may follow.
    block_start: bool,
    /// The next source token to match.
    cursor: usize,
    /// The next comment to print.
    next_comment: usize,
    /// The token that starts the current line, whose preceding blank line is
    /// kept.
    line_start: Option<u32>,
}

impl<'a> Writer<'a> {
    /// A writer over `src` and its trivia.
    pub fn new(src: &'a str, trivia: &'a Trivia) -> Writer<'a> {
        Writer {
            src,
            trivia,
            out: String::new(),
            col: 0,
            indent: 0,
            fill_width: MAX_WIDTH,
            pending_lines: 0,
            pending_space: false,
            block_start: false,
            cursor: 0,
            next_comment: 0,
            line_start: None,
        }
    }

    /// The source text of `lo..hi` (empty if out of range).
    pub fn slice(&self, lo: u32, hi: u32) -> &'a str {
        self.src.get(lo as usize..hi as usize).unwrap_or("")
    }

    /// The text of the first token at or after `lo` and before `hi` that
    /// satisfies `pred`.
    pub fn find_token(&self, lo: u32, hi: u32, pred: impl Fn(&str) -> bool) -> Option<&'a str> {
        let start = self.trivia.tokens.partition_point(|t| t.lo < lo);
        self.trivia.tokens[start..]
            .iter()
            .take_while(|t| t.lo < hi)
            .map(|t| self.slice(t.lo, t.hi))
            .find(|text| pred(text))
    }

    /// Starts a new line for the statement or item whose first token is at
    /// `lo`; a blank line before it in the source is kept.
    pub fn begin_line(&mut self, lo: u32) {
        self.newline();
        self.line_start = Some(lo);
    }

    /// Requests a line break before the next text.
    pub fn newline(&mut self) {
        self.pending_lines = self.pending_lines.max(1);
    }

    /// Requests a space before the next text.
    pub fn space(&mut self) {
        self.pending_space = true;
    }

    /// Marks the start of a block: a blank line may not follow.
    pub fn open_block(&mut self) {
        self.block_start = true;
    }

    /// Whether a comment of the source lies before byte `lo` and has not been
    /// printed.
    pub fn comment_before(&self, lo: u32) -> bool {
        self.trivia
            .comments
            .get(self.next_comment)
            .is_some_and(|c| c.lo < lo)
    }

    /// Prints a token, after the comments that precede it in the source.
    pub fn token(&mut self, text: &str) {
        let tokens = &self.trivia.tokens;
        let found = (self.cursor..tokens.len().min(self.cursor + SYNC_LOOKAHEAD))
            .find(|&j| self.slice(tokens[j].lo, tokens[j].hi) == text);
        if let Some(j) = found {
            let info = tokens[j];
            self.flush_comments(info.lo);
            self.cursor = j + 1;
            if self.line_start == Some(info.lo) && info.blank_before && self.pending_lines > 0 {
                self.pending_lines = 2;
            }
        }
        self.line_start = None;
        self.write(text);
    }

    /// Prints every comment that starts before byte `lo`.
    pub fn flush_comments(&mut self, lo: u32) {
        while let Some(c) = self.trivia.comments.get(self.next_comment) {
            if c.lo >= lo {
                break;
            }
            self.next_comment += 1;
            if c.own_line || self.out.is_empty() {
                self.newline();
                if c.blank_before {
                    self.pending_lines = 2;
                }
                self.write(&c.text);
                if c.newline_after {
                    self.newline();
                } else {
                    self.pending_space = true;
                }
            } else {
                // A trailing comment joins the current line, even when a
                // break is pending.
                self.out.push(' ');
                self.out.push_str(&c.text);
                self.col = column_after(&self.out);
                if c.newline_after {
                    self.newline();
                } else {
                    self.pending_space = true;
                }
            }
        }
    }

    /// Writes `text`, after any pending break or space.
    fn write(&mut self, text: &str) {
        if self.out.is_empty() {
            self.pending_lines = 0;
        } else if self.pending_lines > 0 {
            let lines = if self.block_start {
                1
            } else {
                self.pending_lines
            };
            for _ in 0..lines {
                self.out.push('\n');
            }
            self.out.extend(std::iter::repeat_n(' ', self.indent));
            self.col = self.indent;
        } else if self.pending_space && !text.starts_with([';', ',', ')', ']']) {
            self.out.push(' ');
            self.col += 1;
        }
        self.pending_lines = 0;
        self.pending_space = false;
        self.block_start = false;
        self.out.push_str(text);
        self.col = if text.contains('\n') {
            column_after(&self.out)
        } else {
            self.col + text.chars().count()
        };
    }

    /// Lays out `doc`; `tail` is the width of what must follow it on the
    /// same line (a `;`, ` {`).
    pub fn doc(&mut self, doc: &Doc, tail: usize) {
        match doc {
            Doc::Tok(text) => self.token(text),
            Doc::Space => self.space(),
            Doc::Seq(parts) => {
                for (k, part) in parts.iter().enumerate() {
                    let after = width_until_break(&parts[k + 1..], tail);
                    self.doc(part, after);
                }
            }
            Doc::List { open, items, close } => {
                self.token(open);
                let align = self.col;
                let saved = self.indent;
                self.indent = align;
                for (i, item) in items.iter().enumerate() {
                    let last = i + 1 == items.len();
                    let after = if last { close.len() + tail } else { 1 };
                    if i > 0 {
                        // The item with its comma or bracket fills to
                        // `fill_width`; what must follow it, to `MAX_WIDTH`.
                        let own = 1 + item.flat_width() + if last { close.len() } else { 1 };
                        let too_wide = self.col + own > self.fill_width
                            || self.col + 1 + item.flat_width() + after > MAX_WIDTH;
                        if self.pending_lines == 0 && self.col > align && too_wide {
                            self.newline();
                        } else {
                            self.space();
                        }
                    }
                    self.doc(item, after);
                    if !last {
                        self.token(",");
                    }
                }
                self.token(close);
                self.indent = saved;
            }
        }
    }

    /// Prints the remaining comments and returns the text, ending in one
    /// newline (or empty).
    pub fn finish(mut self) -> String {
        self.indent = 0;
        self.flush_comments(u32::MAX);
        if !self.out.is_empty() {
            self.out.push('\n');
        }
        self.out
    }
}

/// The column after the last line of `text`.
fn column_after(text: &str) -> usize {
    text.rsplit('\n').next().map_or(0, |l| l.chars().count())
}

//! Size expressions: integers over the symbolic dimensions of a program,
//! used for launch grids, buffer shapes and tile extents. They are evaluated
//! at launch, once every dimension is bound to a number. Their text form
//! (`Display`) reads back with [`Size::parse_prefix`] or `str::parse`.

use std::collections::HashMap;
use std::fmt;

/// An integer expression over named dimensions.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Size {
    /// A constant.
    Const(i64),
    /// A dimension bound at launch (`M`, `N`, ...).
    Sym(String),
    /// A product.
    Mul(Box<Size>, Box<Size>),
    /// A sum.
    Add(Box<Size>, Box<Size>),
    /// Ceiling division `cdiv(a, b)`.
    CeilDiv(Box<Size>, Box<Size>),
    /// The smallest power of two at least `a` (and at least 1).
    Pow2(Box<Size>),
    /// The larger of two sizes.
    Max(Box<Size>, Box<Size>),
    /// The smaller of two sizes.
    Min(Box<Size>, Box<Size>),
}

/// `a / b` rounded towards positive infinity, for `b > 0`, without
/// overflow for any `a`.
fn ceil_div(a: i64, b: i64) -> i64 {
    let q = a.div_euclid(b);
    // A remainder means b >= 2, so q + 1 cannot overflow.
    if a.rem_euclid(b) != 0 {
        q + 1
    } else {
        q
    }
}

impl From<u64> for Size {
    /// A constant extent (tile shapes are counted in `u64`).
    fn from(n: u64) -> Size {
        Size::Const(n as i64)
    }
}

/// Values of the dimensions, by name.
pub type Bindings = HashMap<String, i64>;

impl Size {
    /// `self * other`, folding constants.
    pub fn mul(self, other: Size) -> Size {
        match (self, other) {
            (Size::Const(a), Size::Const(b)) => Size::Const(a.saturating_mul(b)),
            (Size::Const(1), x) | (x, Size::Const(1)) => x,
            (a, b) => Size::Mul(Box::new(a), Box::new(b)),
        }
    }

    /// `self + other`, folding constants.
    pub fn add(self, other: Size) -> Size {
        match (self, other) {
            (Size::Const(a), Size::Const(b)) => Size::Const(a.saturating_add(b)),
            (Size::Const(0), x) | (x, Size::Const(0)) => x,
            (a, b) => Size::Add(Box::new(a), Box::new(b)),
        }
    }

    /// `self - other`, folding constants (kept as `self + (-1)·other`).
    pub fn sub(self, other: Size) -> Size {
        match (self, other) {
            (Size::Const(a), Size::Const(b)) => Size::Const(a.saturating_sub(b)),
            (a, b) => a.add(Size::Const(-1).mul(b)),
        }
    }

    /// `self / other` rounded down, for `other > 0`, folding constants
    /// (kept as `cdiv(self - other + 1, other)`).
    pub fn floor_div(self, other: Size) -> Size {
        match (self, other) {
            (Size::Const(a), Size::Const(b)) if b > 0 => Size::Const(a.div_euclid(b)),
            (x, Size::Const(1)) => x,
            (a, b) => a.sub(b.clone()).add(Size::Const(1)).cdiv(b),
        }
    }

    /// `self mod other` (non-negative), for `other > 0`, folding constants
    /// (kept as `self - other·floor(self / other)`).
    pub fn rem(self, other: Size) -> Size {
        match (self, other) {
            (Size::Const(a), Size::Const(b)) if b > 0 => Size::Const(a.rem_euclid(b)),
            (a, b) => a.clone().sub(b.clone().mul(a.floor_div(b))),
        }
    }

    /// `cdiv(self, other)`, folding constants.
    pub fn cdiv(self, other: Size) -> Size {
        match (self, other) {
            (Size::Const(a), Size::Const(b)) if b > 0 => Size::Const(ceil_div(a, b)),
            (x, Size::Const(1)) => x,
            (a, b) => Size::CeilDiv(Box::new(a), Box::new(b)),
        }
    }

    /// `pow2(self)`, folding constants.
    pub fn pow2(self) -> Size {
        match self {
            Size::Const(a) => Size::Const(next_pow2(a)),
            a => Size::Pow2(Box::new(a)),
        }
    }

    /// `min(self, other)`, folding constants.
    pub fn min(self, other: Size) -> Size {
        match (self, other) {
            (Size::Const(a), Size::Const(b)) => Size::Const(a.min(b)),
            (a, b) => Size::Min(Box::new(a), Box::new(b)),
        }
    }

    /// `max(self, other)`, folding constants.
    pub fn max(self, other: Size) -> Size {
        match (self, other) {
            (Size::Const(a), Size::Const(b)) => Size::Const(a.max(b)),
            (a, b) => Size::Max(Box::new(a), Box::new(b)),
        }
    }

    /// The constant value, if the expression has no symbols.
    pub fn as_const(&self) -> Option<i64> {
        self.eval(&Bindings::new()).ok()
    }

    /// The value under `b`; the error names the first unbound symbol.
    pub fn eval(&self, b: &Bindings) -> Result<i64, String> {
        Ok(match self {
            Size::Const(c) => *c,
            Size::Sym(s) => *b
                .get(s)
                .ok_or_else(|| format!("dimension `{s}` is not bound"))?,
            Size::Mul(x, y) => x.eval(b)?.saturating_mul(y.eval(b)?),
            Size::Add(x, y) => x.eval(b)?.saturating_add(y.eval(b)?),
            Size::CeilDiv(x, y) => {
                let d = y.eval(b)?;
                if d <= 0 {
                    return Err("division by a size that is not positive".into());
                }
                ceil_div(x.eval(b)?, d)
            }
            Size::Pow2(x) => next_pow2(x.eval(b)?),
            Size::Max(x, y) => x.eval(b)?.max(y.eval(b)?),
            Size::Min(x, y) => x.eval(b)?.min(y.eval(b)?),
        })
    }

    /// Every symbol the expression mentions.
    pub fn syms(&self, out: &mut Vec<String>) {
        match self {
            Size::Const(_) => {}
            Size::Sym(s) => {
                if !out.contains(s) {
                    out.push(s.clone());
                }
            }
            Size::Pow2(x) => x.syms(out),
            Size::Mul(x, y)
            | Size::Add(x, y)
            | Size::CeilDiv(x, y)
            | Size::Max(x, y)
            | Size::Min(x, y) => {
                x.syms(out);
                y.syms(out);
            }
        }
    }
}

/// The smallest power of two that is at least `n` (1 for `n <= 1`).
pub fn next_pow2(n: i64) -> i64 {
    if n <= 1 {
        1
    } else {
        (n as u64).next_power_of_two().min(1 << 62) as i64
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Size::Const(c) => write!(f, "{c}"),
            Size::Sym(s) => f.write_str(s),
            Size::Mul(a, b) => write!(f, "{a}*{b}"),
            Size::Add(a, b) => write!(f, "({a} + {b})"),
            Size::CeilDiv(a, b) => write!(f, "cdiv({a}, {b})"),
            Size::Pow2(a) => write!(f, "pow2({a})"),
            Size::Max(a, b) => write!(f, "max({a}, {b})"),
            Size::Min(a, b) => write!(f, "min({a}, {b})"),
        }
    }
}

/// Why a size expression could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SizeParseError {
    /// Byte offset of the problem in the text given to the parser.
    pub offset: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for SizeParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at byte {}: {}", self.offset, self.message)
    }
}

impl std::error::Error for SizeParseError {}

/// How deeply parentheses and calls may nest in a size expression read
/// back from text (deeper input is an error, not a stack overflow).
const MAX_SIZE_DEPTH: usize = 64;

/// A recursive-descent reader of the text form:
///
/// ```text
/// sum     := product ('+' product)*
/// product := atom ('*' atom)*
/// atom    := '-'? digits | name | '(' sum ')'
///          | ('cdiv' | 'max' | 'min') '(' sum ',' sum ')' | 'pow2' '(' sum ')'
/// ```
///
/// `+` and `*` associate to the left; `(a + b)` is how `Display` writes a
/// sum, so it reads back as that sum. Names are `[A-Za-z_][A-Za-z0-9_]*`;
/// `cdiv`, `max`, `min` and `pow2` are functions only when a `(` follows.
struct SizeReader<'a> {
    text: &'a str,
    pos: usize,
    depth: usize,
}

impl SizeReader<'_> {
    fn error(&self, offset: usize, message: impl Into<String>) -> SizeParseError {
        SizeParseError {
            offset,
            message: message.into(),
        }
    }

    /// The offset and character of the next non-space character, without
    /// consuming anything (so that an expression's length never includes
    /// the white space after it).
    fn peek(&self) -> (usize, Option<char>) {
        let rest = &self.text[self.pos..];
        let trimmed = rest.trim_start();
        (
            self.pos + rest.len() - trimmed.len(),
            trimmed.chars().next(),
        )
    }

    fn found(&self) -> String {
        match self.peek().1 {
            None => "the end of the text".to_owned(),
            Some(c) => format!("`{}`", c.escape_debug()),
        }
    }

    /// Consumes `c` if it is the next non-space character.
    fn eat(&mut self, c: char) -> bool {
        match self.peek() {
            (at, Some(next)) if next == c => {
                self.pos = at + c.len_utf8();
                true
            }
            _ => false,
        }
    }

    /// Consumes `c` (after white space), or fails naming what is there.
    fn expect(&mut self, c: char) -> Result<(), SizeParseError> {
        if self.eat(c) {
            Ok(())
        } else {
            let at = self.peek().0;
            Err(self.error(at, format!("expected `{c}`, found {}", self.found())))
        }
    }

    fn sum(&mut self) -> Result<Size, SizeParseError> {
        self.depth += 1;
        if self.depth > MAX_SIZE_DEPTH {
            return Err(self.error(
                self.pos,
                format!("a size expression nested more than {MAX_SIZE_DEPTH} deep"),
            ));
        }
        let mut acc = self.product()?;
        while self.eat('+') {
            let rhs = self.product()?;
            acc = Size::Add(Box::new(acc), Box::new(rhs));
        }
        self.depth -= 1;
        Ok(acc)
    }

    fn product(&mut self) -> Result<Size, SizeParseError> {
        let mut acc = self.atom()?;
        while self.eat('*') {
            let rhs = self.atom()?;
            acc = Size::Mul(Box::new(acc), Box::new(rhs));
        }
        Ok(acc)
    }

    fn atom(&mut self) -> Result<Size, SizeParseError> {
        let (start, first) = self.peek();
        self.pos = start;
        let rest = &self.text[start..];
        match first {
            Some('(') => {
                self.pos += 1;
                let inner = self.sum()?;
                self.expect(')')?;
                Ok(inner)
            }
            Some(c) if c == '-' || c.is_ascii_digit() => {
                let sign = usize::from(c == '-');
                let digits = rest[sign..]
                    .bytes()
                    .take_while(|b| b.is_ascii_digit())
                    .count();
                if digits == 0 {
                    return Err(self.error(start, "expected digits after `-`"));
                }
                let lit = &rest[..sign + digits];
                let value = lit.parse::<i64>().map_err(|_| {
                    self.error(start, format!("`{lit}` does not fit in a 64-bit size"))
                })?;
                self.pos += lit.len();
                Ok(Size::Const(value))
            }
            Some(c) if c.is_ascii_alphabetic() || c == '_' => {
                let len = rest
                    .bytes()
                    .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
                    .count();
                let name = &rest[..len];
                self.pos += len;
                let call = self.peek().1 == Some('(');
                match name {
                    "cdiv" | "max" | "min" if call => {
                        self.expect('(')?;
                        let a = self.sum()?;
                        self.expect(',')?;
                        let b = self.sum()?;
                        self.expect(')')?;
                        let (a, b) = (Box::new(a), Box::new(b));
                        Ok(match name {
                            "cdiv" => Size::CeilDiv(a, b),
                            "max" => Size::Max(a, b),
                            _ => Size::Min(a, b),
                        })
                    }
                    "pow2" if call => {
                        self.expect('(')?;
                        let a = self.sum()?;
                        self.expect(')')?;
                        Ok(Size::Pow2(Box::new(a)))
                    }
                    _ => Ok(Size::Sym(name.to_owned())),
                }
            }
            _ => Err(self.error(start, format!("expected a size, found {}", self.found()))),
        }
    }
}

impl Size {
    /// Reads the size expression at the start of `text` (after any white
    /// space), as [`Display`](fmt::Display) writes it, and returns it with
    /// the number of bytes it took (trailing white space not included).
    /// The expression ends where no `+` or `*` continues it, so
    /// `"cdiv(N, 128), 1]"` gives `cdiv(N, 128)` and 12.
    ///
    /// The reader keeps the tree as written (`1*N` stays a product) so that
    /// it prints back the same text; the errors carry a byte offset into
    /// `text`.
    ///
    /// ```
    /// use tessera_core::Size;
    /// let (s, n) = Size::parse_prefix("max(pow2(D), 16)]").unwrap();
    /// assert_eq!((s.to_string().as_str(), n), ("max(pow2(D), 16)", 16));
    /// assert_eq!("(B*H + 1)".parse::<Size>().unwrap().to_string(), "(B*H + 1)");
    /// ```
    pub fn parse_prefix(text: &str) -> Result<(Size, usize), SizeParseError> {
        let mut r = SizeReader {
            text,
            pos: 0,
            depth: 0,
        };
        let size = r.sum()?;
        Ok((size, r.pos))
    }
}

impl std::str::FromStr for Size {
    type Err = SizeParseError;

    /// Reads a whole text as one size expression (see
    /// [`Size::parse_prefix`]); anything after it is an error.
    fn from_str(text: &str) -> Result<Size, SizeParseError> {
        let (size, len) = Size::parse_prefix(text)?;
        let rest = &text[len..];
        let trailing = rest.len() - rest.trim_start().len();
        if len + trailing < text.len() {
            return Err(SizeParseError {
                offset: len + trailing,
                message: "unexpected text after the size expression".to_owned(),
            });
        }
        Ok(size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_and_evaluates() {
        let m = Size::Sym("M".into());
        let g = m.clone().cdiv(Size::Const(128));
        assert_eq!(g.to_string(), "cdiv(M, 128)");
        let mut b = Bindings::new();
        b.insert("M".into(), 257);
        assert_eq!(g.eval(&b), Ok(3));
        assert_eq!(Size::Const(77).pow2(), Size::Const(128));
        assert_eq!(Size::Const(300).cdiv(Size::Const(128)), Size::Const(3));
        assert!(m.eval(&Bindings::new()).is_err());
        // Ceiling division never overflows (a block size of i64::MAX).
        let max = i64::MAX;
        assert_eq!(Size::Const(10).cdiv(Size::Const(max)), Size::Const(1));
        assert_eq!(Size::Const(max).cdiv(Size::Const(max)), Size::Const(1));
        assert_eq!(
            Size::Const(max).cdiv(Size::Const(2)),
            Size::Const(max / 2 + 1)
        );
        assert_eq!(Size::Const(-7).cdiv(Size::Const(2)), Size::Const(-3));
        let n = Size::Sym("M".into()).cdiv(Size::Const(max));
        assert_eq!(n.eval(&b), Ok(1));
    }

    #[test]
    fn text_form_reads_back() {
        for text in [
            "0",
            "-3",
            "N",
            "B*H",
            "B*H*C",
            "(B*H + 1)",
            "(M + 1)*N",
            "cdiv(N, 128)",
            "max(pow2(D), 16)",
            "cdiv(2048, min(pow2(D), 512))",
            "cdiv(B*C, min(8, B*C))",
            "max",
            "pow2_x",
            "-9223372036854775808",
        ] {
            let s: Size = text.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(s.to_string(), text);
        }
        // Not folded: the tree is kept as written.
        assert_eq!(
            "1*N".parse::<Size>(),
            Ok(Size::Mul(
                Box::new(Size::Const(1)),
                Box::new(Size::Sym("N".into()))
            ))
        );
        assert_eq!(Size::parse_prefix("  N, 4]").map(|(_, n)| n), Ok(3));
        assert_eq!(Size::parse_prefix("N *M : x").map(|(_, n)| n), Ok(4));
    }

    #[test]
    fn malformed_sizes_are_errors() {
        for (text, offset) in [
            ("", 0),
            ("cdiv(N)", 6),
            ("max(N, ", 7),
            ("(N + 1", 6),
            ("N +", 3),
            ("-", 0),
            ("99999999999999999999", 0),
            ("N N", 2),
            ("#", 0),
        ] {
            let e = text.parse::<Size>().expect_err(text);
            assert_eq!(e.offset, offset, "{text}: {e}");
        }
        let deep = format!("{}N{}", "(".repeat(100), ")".repeat(100));
        assert!(deep.parse::<Size>().is_err());
    }
}

//! The `.npy` header: a Python dict literal such as
//! `{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }`, parsed into its three keys.
//!
//! The parser accepts the subset of Python literals numpy writes (strings, integers, `True`,
//! `False`, `None`, tuples, lists, dicts), bounded in nesting depth so hostile input cannot
//! exhaust the stack. Unknown keys are ignored.

use super::NpyError;

/// A parsed Python literal.
#[derive(Clone, Debug, PartialEq)]
enum Value {
    Str(String),
    /// A non-negative integer literal; `None` when it does not fit in `u64`.
    Int(Option<u64>),
    /// A negative integer literal (numpy shapes never have one).
    NegInt,
    Bool(bool),
    /// Python's `None`.
    Nothing,
    Tuple(Vec<Value>),
    List(Vec<Value>),
    Dict(Vec<(Value, Value)>),
}

/// The three fields of a `.npy` header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Header {
    /// The dtype descriptor, e.g. `<f4`.
    pub descr: String,
    /// Whether the data is column-major.
    pub fortran_order: bool,
    /// The dimensions.
    pub shape: Vec<usize>,
}

/// Deepest nesting of brackets accepted.
const MAX_DEPTH: usize = 32;

struct Parser<'a> {
    chars: std::iter::Peekable<std::str::CharIndices<'a>>,
}

fn bad(message: impl Into<String>) -> NpyError {
    NpyError::BadHeader(message.into())
}

impl Parser<'_> {
    fn skip_ws(&mut self) {
        while self.chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
    }

    fn peek(&mut self) -> Option<char> {
        self.skip_ws();
        self.chars.peek().map(|&(_, c)| c)
    }

    fn expect(&mut self, want: char) -> Result<(), NpyError> {
        match self.peek() {
            Some(c) if c == want => {
                self.chars.next();
                Ok(())
            }
            Some(c) => Err(bad(format!("expected '{want}' but found '{c}'"))),
            None => Err(bad(format!("expected '{want}' but the header ended"))),
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, NpyError> {
        if depth > MAX_DEPTH {
            return Err(bad("nested too deeply"));
        }
        match self.peek() {
            None => Err(bad("the header ended early")),
            Some(q @ ('\'' | '"')) => {
                self.chars.next();
                self.string(q)
            }
            Some('(') => {
                self.chars.next();
                // `(5)` is just 5 in Python; numpy never writes it, and it is read as `(5,)`.
                Ok(Value::Tuple(self.sequence(')', depth)?))
            }
            Some('[') => {
                self.chars.next();
                Ok(Value::List(self.sequence(']', depth)?))
            }
            Some('{') => {
                self.chars.next();
                self.dict(depth)
            }
            Some(c) if c.is_ascii_digit() || c == '-' || c == '+' => self.int(),
            Some(c) if c.is_alphabetic() => {
                let word = self.word();
                match word.as_str() {
                    "True" => Ok(Value::Bool(true)),
                    "False" => Ok(Value::Bool(false)),
                    "None" => Ok(Value::Nothing),
                    // Python 2 long literals such as `3L` are handled in `int`.
                    _ => Err(bad(format!("unexpected '{word}'"))),
                }
            }
            Some(c) => Err(bad(format!("unexpected '{c}'"))),
        }
    }

    fn word(&mut self) -> String {
        let mut s = String::new();
        while let Some((_, c)) = self
            .chars
            .next_if(|(_, c)| c.is_alphanumeric() || *c == '_')
        {
            s.push(c);
        }
        s
    }

    fn string(&mut self, quote: char) -> Result<Value, NpyError> {
        let mut s = String::new();
        loop {
            match self.chars.next() {
                None => return Err(bad("unterminated string")),
                Some((_, c)) if c == quote => return Ok(Value::Str(s)),
                Some((_, '\\')) => match self.chars.next() {
                    Some((_, c)) => s.push(c),
                    None => return Err(bad("unterminated string")),
                },
                Some((_, c)) => s.push(c),
            }
        }
    }

    fn int(&mut self) -> Result<Value, NpyError> {
        let mut negative = false;
        if let Some((_, sign)) = self.chars.next_if(|(_, c)| *c == '-' || *c == '+') {
            negative = sign == '-';
        }
        let mut value: Option<u64> = Some(0);
        let mut digits = 0;
        while let Some((_, c)) = self.chars.next_if(|(_, c)| c.is_ascii_digit()) {
            digits += 1;
            let d = u64::from(c.to_digit(10).unwrap_or(0));
            value = value.and_then(|v| v.checked_mul(10)?.checked_add(d));
        }
        if digits == 0 {
            return Err(bad("expected a number"));
        }
        // Python 2 numpy wrote shapes such as `(3L, 4L)`.
        self.chars.next_if(|(_, c)| *c == 'L' || *c == 'l');
        if negative && value != Some(0) {
            Ok(Value::NegInt)
        } else {
            Ok(Value::Int(value))
        }
    }

    /// Items up to `close`, comma separated with an optional trailing comma.
    fn sequence(&mut self, close: char, depth: usize) -> Result<Vec<Value>, NpyError> {
        let mut items = Vec::new();
        loop {
            if self.peek() == Some(close) {
                self.chars.next();
                return Ok(items);
            }
            items.push(self.value(depth + 1)?);
            match self.peek() {
                Some(',') => {
                    self.chars.next();
                }
                Some(c) if c == close => {}
                Some(c) => return Err(bad(format!("expected ',' or '{close}' but found '{c}'"))),
                None => return Err(bad(format!("missing '{close}'"))),
            }
        }
    }

    fn dict(&mut self, depth: usize) -> Result<Value, NpyError> {
        let mut entries = Vec::new();
        loop {
            if self.peek() == Some('}') {
                self.chars.next();
                return Ok(Value::Dict(entries));
            }
            let key = self.value(depth + 1)?;
            self.expect(':')?;
            let value = self.value(depth + 1)?;
            entries.push((key, value));
            match self.peek() {
                Some(',') => {
                    self.chars.next();
                }
                Some('}') => {}
                Some(c) => return Err(bad(format!("expected ',' or '}}' but found '{c}'"))),
                None => return Err(bad("missing '}'")),
            }
        }
    }
}

/// Parses the header text (without the magic and length fields).
pub(super) fn parse(text: &str) -> Result<Header, NpyError> {
    let mut parser = Parser {
        chars: text.char_indices().peekable(),
    };
    let dict = parser.value(0)?;
    if let Some(c) = parser.peek() {
        return Err(bad(format!("unexpected '{c}' after the dictionary")));
    }
    let Value::Dict(entries) = dict else {
        return Err(bad("the header is not a dictionary"));
    };
    let field = |name: &str| {
        entries
            .iter()
            .find(|(k, _)| matches!(k, Value::Str(s) if s == name))
            .map(|(_, v)| v)
            .ok_or_else(|| bad(format!("the header has no '{name}' key")))
    };
    let descr = match field("descr")? {
        Value::Str(s) => s.clone(),
        Value::List(_) => {
            return Err(NpyError::UnsupportedDtype {
                descr: "[...]".to_string(),
                reason: "structured arrays (records) are not supported".to_string(),
            })
        }
        _ => return Err(bad("'descr' is not a string")),
    };
    let fortran_order = match field("fortran_order")? {
        Value::Bool(b) => *b,
        _ => return Err(bad("'fortran_order' is not True or False")),
    };
    let dims = match field("shape")? {
        Value::Tuple(items) | Value::List(items) => items.as_slice(),
        Value::Int(_) | Value::NegInt => std::slice::from_ref(field("shape")?),
        _ => return Err(bad("'shape' is not a tuple of integers")),
    };
    let mut shape = Vec::with_capacity(dims.len());
    for d in dims {
        match d {
            Value::Int(Some(n)) => match usize::try_from(*n) {
                Ok(n) => shape.push(n),
                Err(_) => {
                    return Err(NpyError::ShapeOverflow {
                        shape: dims_text(dims),
                    })
                }
            },
            Value::Int(None) => {
                return Err(NpyError::ShapeOverflow {
                    shape: dims_text(dims),
                })
            }
            Value::NegInt => return Err(bad("'shape' has a negative dimension")),
            _ => return Err(bad("'shape' is not a tuple of integers")),
        }
    }
    Ok(Header {
        descr,
        fortran_order,
        shape,
    })
}

/// The text of a shape tuple for an error message (dimensions too large to parse as `?`).
fn dims_text(dims: &[Value]) -> String {
    let parts: Vec<String> = dims
        .iter()
        .map(|d| match d {
            Value::Int(Some(n)) => n.to_string(),
            _ => "?".to_string(),
        })
        .collect();
    if parts.len() == 1 {
        format!("({},)", parts[0])
    } else {
        format!("({})", parts.join(", "))
    }
}

/// A shape as a Python tuple: `()`, `(5,)`, `(2, 3)`.
pub(super) fn shape_text(shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    }
}

/// The header text numpy would write for these fields (before padding).
pub(super) fn render(descr: &str, shape: &[usize]) -> String {
    let shape_text = shape_text(shape);
    format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_text}, }}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_numpy_headers() {
        let h = parse("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }   \n").unwrap();
        assert_eq!(h.descr, "<f4");
        assert!(!h.fortran_order);
        assert_eq!(h.shape, vec![3, 4]);
        let h = parse("{\"shape\": (5,), \"fortran_order\": True, \"descr\": \"|u1\"}").unwrap();
        assert_eq!((h.descr.as_str(), h.fortran_order), ("|u1", true));
        assert_eq!(h.shape, vec![5]);
        assert_eq!(
            parse("{'descr':'<i8','fortran_order':False,'shape':()}")
                .unwrap()
                .shape,
            Vec::<usize>::new()
        );
        assert_eq!(
            parse("{'descr':'<i8','fortran_order':False,'shape':(2L, 3L)}")
                .unwrap()
                .shape,
            vec![2, 3]
        );
    }

    #[test]
    fn rejects_malformed_headers() {
        for text in [
            "",
            "{",
            "{'descr': '<f4'}",
            "{'descr': '<f4', 'fortran_order': 0, 'shape': ()}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': ('a',)}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': ()} x",
            "[1, 2]",
            &"(".repeat(10_000),
        ] {
            assert!(parse(text).is_err(), "{text:?}");
        }
        let huge = "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,)}";
        assert!(matches!(parse(huge), Err(NpyError::ShapeOverflow { .. })));
    }

    #[test]
    fn render_matches_numpy() {
        assert_eq!(
            render("<f4", &[5]),
            "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }"
        );
        assert_eq!(
            render("|b1", &[]),
            "{'descr': '|b1', 'fortran_order': False, 'shape': (), }"
        );
        assert_eq!(
            parse(&render("<i2", &[2, 3, 4])).unwrap().shape,
            vec![2, 3, 4]
        );
    }
}

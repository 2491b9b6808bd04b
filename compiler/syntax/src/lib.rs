//! Front end of the Tessera compiler: lexer, parser and AST of `.tsr` files.
//!
//! [`parse`] turns source text into an [`ast::File`] and a list of
//! diagnostics. Parsing never fails and never panics: whatever the input, it
//! returns a tree (possibly with `Error` nodes) and the errors found.

pub mod ast;
pub mod lexer;
pub mod parser;
pub mod printer;
pub mod resolve;

#[allow(clippy::all, unused_parens, dead_code)]
mod grammar {
    include!(concat!(env!("OUT_DIR"), "/tessera.rs"));
}

pub use parser::{parse, parse_expr, Parsed, MAX_EXPR_DEPTH};

//! The canonical source formatter of Tessera, behind `tsrc fmt`.
//!
//! [`format`] parses a file, prints its AST in the one canonical style of the
//! examples and the standard library (4-space indentation, one statement per
//! line, spaces around binary operators, lists wrapped at 100 columns and
//! aligned after their opening bracket), and carries every comment over from
//! the source text. It does no IO.
//!
//! Guarantees, checked by the tests over every example and stdlib file:
//! - the output parses to the same AST as the input (spans aside);
//! - formatting is idempotent: `format(format(x)) == format(x)`;
//! - every comment of the input appears in the output, in the same order;
//! - blank lines between items and statements are kept, at most one.
//!
//! A file with syntax errors is not formatted: [`FormatError`] carries the
//! parse diagnostics.

mod print;
mod trivia;
mod writer;

use std::fmt;
use tessera_diagnostics::{Diagnostic, FileId};
pub use writer::MAX_WIDTH;

/// Why a file could not be formatted: its syntax errors.
#[derive(Clone, Debug, PartialEq)]
pub struct FormatError {
    /// The lexing and parsing diagnostics, in source order, with spans in
    /// file 0.
    pub diagnostics: Vec<Diagnostic>,
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.diagnostics.len();
        write!(f, "{n} syntax error{}", if n == 1 { "" } else { "s" })?;
        for d in &self.diagnostics {
            write!(f, "\n{}: {}", d.code, d.message)?;
        }
        Ok(())
    }
}

impl std::error::Error for FormatError {}

/// Formats one `.tsr` source text, or returns its syntax errors.
pub fn format(source: &str) -> Result<String, FormatError> {
    let parsed = tessera_syntax::parse(FileId(0), source);
    if parsed.diagnostics.iter().any(|d| d.is_error()) {
        return Err(FormatError {
            diagnostics: parsed.diagnostics,
        });
    }
    let lexed = tessera_syntax::lexer::lex(source);
    let trivia = trivia::collect(source, &lexed.tokens);
    let mut writer = writer::Writer::new(source, &trivia);
    print::Printer { w: &mut writer }.file(&parsed.file);
    Ok(writer.finish())
}

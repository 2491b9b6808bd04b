//! Source files, spans and diagnostics for the Tessera compiler.
//!
//! Diagnostics are data ([`Diagnostic`]) from the moment a pass finds a
//! problem until the edge: [`render`] draws them for a terminal with ariadne,
//! and the language server converts the same values to LSP diagnostics.

pub mod codes;
mod diagnostic;
mod render;
mod source;

pub use codes::Code;
pub use diagnostic::{Diagnostic, Diagnostics, Label, Severity};
pub use render::{render, render_all, RenderOptions};
pub use source::{FileId, SourceFile, SourceMap, Span};

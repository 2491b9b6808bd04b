//! The `Diagnostic` value: errors and warnings as data, rendered only at the edge.

use crate::codes::Code;
use crate::source::Span;

/// How serious a diagnostic is.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug, Hash)]
pub enum Severity {
    /// The program is rejected.
    Error,
    /// The program is accepted, but something is probably wrong or slow.
    Warning,
}

/// A span with a message under it.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Label {
    /// Where.
    pub span: Span,
    /// What to say there (may be empty).
    pub message: String,
}

/// One error or warning: a stable code, a message, a primary span, secondary
/// labels, notes and help.
///
/// Diagnostics are plain data. The CLI renders them with ariadne; the language
/// server turns them into LSP diagnostics with related information.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// Stable code such as `E0201`; `tsrc explain` describes it.
    pub code: Code,
    /// One-line summary, lower case, no final period.
    pub message: String,
    /// The primary location with its label.
    pub primary: Label,
    /// Related locations.
    pub secondary: Vec<Label>,
    /// Background facts ("note: ...").
    pub notes: Vec<String>,
    /// What to do about it ("help: ...").
    pub help: Vec<String>,
}

impl Diagnostic {
    /// An error with code `code` at `span`.
    pub fn error(code: Code, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            code,
            message: message.into(),
            primary: Label {
                span,
                message: String::new(),
            },
            secondary: Vec::new(),
            notes: Vec::new(),
            help: Vec::new(),
        }
    }

    /// A warning with code `code` at `span`.
    pub fn warning(code: Code, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(code, span, message)
        }
    }

    /// Sets the message shown under the primary span.
    pub fn with_label(mut self, message: impl Into<String>) -> Diagnostic {
        self.primary.message = message.into();
        self
    }

    /// Adds a secondary location.
    pub fn with_secondary(mut self, span: Span, message: impl Into<String>) -> Diagnostic {
        self.secondary.push(Label {
            span,
            message: message.into(),
        });
        self
    }

    /// Adds a note.
    pub fn with_note(mut self, note: impl Into<String>) -> Diagnostic {
        self.notes.push(note.into());
        self
    }

    /// Adds a help line, usually the fix.
    pub fn with_help(mut self, help: impl Into<String>) -> Diagnostic {
        self.help.push(help.into());
        self
    }

    /// Whether this is an error (rather than a warning).
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// A growing list of diagnostics with a cap, so that garbage input cannot
/// produce millions of them.
#[derive(Clone, Debug, Default)]
pub struct Diagnostics {
    list: Vec<Diagnostic>,
    dropped: usize,
}

impl Diagnostics {
    /// At most this many diagnostics are kept; the rest are counted.
    pub const LIMIT: usize = 100;

    /// An empty list.
    pub fn new() -> Diagnostics {
        Diagnostics::default()
    }

    /// Adds one diagnostic, or counts it as dropped past [`Self::LIMIT`].
    /// One equal to a diagnostic already in the list (a body checked again
    /// at a call's sizes finding what its own check found) is left out.
    pub fn push(&mut self, diagnostic: Diagnostic) {
        if self.list.contains(&diagnostic) {
            return;
        }
        if self.list.len() < Self::LIMIT {
            self.list.push(diagnostic);
        } else {
            self.dropped += 1;
        }
    }

    /// Where the list stands, for [`Self::rewind`].
    pub fn mark(&self) -> (usize, usize) {
        (self.list.len(), self.dropped)
    }

    /// Forgets the diagnostics reported since `mark` (a part of the input
    /// checked again under other assumptions).
    pub fn rewind(&mut self, mark: (usize, usize)) {
        self.list.truncate(mark.0);
        self.dropped = mark.1;
    }

    /// The kept diagnostics reported since `mark` (a [`Self::mark`]'s
    /// first part), to adjust: a stdlib body's errors moved to the user's
    /// call.
    pub fn since_mut(&mut self, mark: usize) -> &mut [Diagnostic] {
        let at = mark.min(self.list.len());
        &mut self.list[at..]
    }

    /// Keeps, of the diagnostics reported since `mark`, those for which
    /// `keep` holds.
    pub fn retain_since(&mut self, mark: usize, mut keep: impl FnMut(&Diagnostic) -> bool) {
        let at = mark.min(self.list.len());
        let tail: Vec<Diagnostic> = self.list.drain(at..).filter(|d| keep(d)).collect();
        self.list.extend(tail);
    }

    /// Adds all of `other`.
    pub fn extend(&mut self, other: impl IntoIterator<Item = Diagnostic>) {
        for d in other {
            self.push(d);
        }
    }

    /// Whether any error (not warning) was reported.
    pub fn has_errors(&self) -> bool {
        self.dropped > 0 || self.list.iter().any(Diagnostic::is_error)
    }

    /// Number of errors, dropped ones included.
    pub fn error_count(&self) -> usize {
        self.list.iter().filter(|d| d.is_error()).count() + self.dropped
    }

    /// Number of diagnostics that were not kept.
    pub fn dropped(&self) -> usize {
        self.dropped
    }

    /// The kept diagnostics, in the order they were reported.
    pub fn as_slice(&self) -> &[Diagnostic] {
        &self.list
    }

    /// Sorts by file and position so output is stable whatever order the
    /// passes ran in.
    pub fn sort(&mut self) {
        self.list
            .sort_by_key(|d| (d.primary.span.file, d.primary.span.lo, d.primary.span.hi));
    }

    /// Consumes the list.
    pub fn into_vec(self) -> Vec<Diagnostic> {
        self.list
    }
}

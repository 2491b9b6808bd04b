//! Our [`Diagnostic`] values as LSP diagnostics: the primary span becomes the
//! range, the code (`E0201`) the code, secondary labels the related
//! information, and the primary label, notes and help lines follow the
//! message.

use lsp_types::{DiagnosticRelatedInformation, DiagnosticSeverity, NumberOrString, Uri};
use tessera_driver::diagnostics::{Diagnostic, Severity};

use crate::analysis::{Analysis, USER_FILE};
use crate::lines::location;

/// The LSP diagnostics of the document `uri`.
pub fn to_lsp(a: &Analysis, uri: &Uri) -> Vec<lsp_types::Diagnostic> {
    let mut out: Vec<lsp_types::Diagnostic> = a
        .comp
        .diagnostics
        .as_slice()
        .iter()
        .filter(|d| d.primary.span.file == USER_FILE)
        .map(|d| convert(a, uri, d))
        .collect();
    let dropped = a.comp.diagnostics.dropped();
    if dropped > 0 {
        if let Some(last) = out.last().cloned() {
            out.push(lsp_types::Diagnostic {
                message: format!("{dropped} more diagnostics not shown"),
                severity: Some(DiagnosticSeverity::INFORMATION),
                code: None,
                related_information: None,
                ..last
            });
        }
    }
    out
}

fn convert(a: &Analysis, uri: &Uri, d: &Diagnostic) -> lsp_types::Diagnostic {
    let span = d.primary.span;
    let mut message = d.message.clone();
    if !d.primary.message.is_empty() {
        message.push_str(&format!(": {}", d.primary.message));
    }
    for note in &d.notes {
        message.push_str(&format!("\nnote: {note}"));
    }
    for help in &d.help {
        message.push_str(&format!("\nhelp: {help}"));
    }
    let related: Vec<DiagnosticRelatedInformation> = d
        .secondary
        .iter()
        .filter_map(|l| {
            Some(DiagnosticRelatedInformation {
                location: location(&a.comp, uri, l.span)?,
                message: if l.message.is_empty() {
                    "related location".to_owned()
                } else {
                    l.message.clone()
                },
            })
        })
        .collect();
    lsp_types::Diagnostic {
        range: a.lines.range(a.text(), span.lo, span.hi),
        severity: Some(match d.severity {
            Severity::Error => DiagnosticSeverity::ERROR,
            Severity::Warning => DiagnosticSeverity::WARNING,
        }),
        code: Some(NumberOrString::String(d.code.to_string())),
        code_description: None,
        source: Some("tsrc".to_owned()),
        message,
        related_information: (!related.is_empty()).then_some(related),
        tags: None,
        data: None,
    }
}

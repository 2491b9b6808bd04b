//! Terminal rendering of diagnostics with ariadne.

use crate::diagnostic::{Diagnostic, Severity};
use crate::source::{SourceMap, Span};
use ariadne::{CharSet, Color, Config, IndexType, Label, Report, ReportKind};
use std::collections::HashMap;

/// How to draw diagnostics.
#[derive(Clone, Copy, Debug, Default)]
pub struct RenderOptions {
    /// Use ANSI colours.
    pub color: bool,
    /// Draw with ASCII only (for snapshots and dumb terminals).
    pub ascii: bool,
}

type AriadneSpan = (String, std::ops::Range<usize>);

/// Renders one diagnostic to a string.
pub fn render(sources: &SourceMap, diagnostic: &Diagnostic, options: RenderOptions) -> String {
    render_all(sources, std::slice::from_ref(diagnostic), options)
}

/// Renders diagnostics, one after another, to a string.
pub fn render_all(
    sources: &SourceMap,
    diagnostics: &[Diagnostic],
    options: RenderOptions,
) -> String {
    // Files are named by display name; two files may share one, so the id
    // carries the index too.
    let name_of = |span: Span| format!("{}", sources.get(span.file).name);
    let mut used: HashMap<String, &str> = HashMap::new();
    for d in diagnostics {
        for label in std::iter::once(&d.primary).chain(&d.secondary) {
            used.insert(name_of(label.span), &sources.get(label.span.file).text);
        }
    }
    let mut cache = ariadne::sources(used);
    let config = Config::default()
        .with_color(options.color)
        .with_index_type(IndexType::Byte)
        .with_char_set(if options.ascii {
            CharSet::Ascii
        } else {
            CharSet::Unicode
        });
    let mut out = Vec::new();
    for d in diagnostics {
        let to_ariadne =
            |span: Span| -> AriadneSpan { (name_of(span), span.lo as usize..span.hi as usize) };
        let (kind, color) = match d.severity {
            Severity::Error => (ReportKind::Error, Color::Red),
            Severity::Warning => (ReportKind::Warning, Color::Yellow),
        };
        // Ariadne draws one box per run of labels in ascending lines of one
        // file (a label above the one before starts another box, headed
        // with the primary's position): labels go in file order (the
        // primary's file first), then by position.
        let labels: Vec<Span> = std::iter::once(d.primary.span)
            .chain(d.secondary.iter().map(|l| l.span))
            .collect();
        let order = |span: Span| {
            let file = labels.iter().position(|l| l.file == span.file).unwrap_or(0);
            let before = labels
                .iter()
                .filter(|l| l.file == span.file && (l.lo, l.hi) < (span.lo, span.hi))
                .count();
            (file * labels.len() + before) as i32
        };
        let mut report = Report::build(kind, to_ariadne(d.primary.span))
            .with_config(config)
            .with_code(d.code)
            .with_message(&d.message)
            .with_label({
                let label = Label::new(to_ariadne(d.primary.span))
                    .with_priority(10)
                    .with_order(order(d.primary.span));
                let label = if d.primary.message.is_empty() {
                    label
                } else {
                    label.with_message(&d.primary.message)
                };
                if options.color {
                    label.with_color(color)
                } else {
                    label
                }
            });
        for secondary in &d.secondary {
            let label = Label::new(to_ariadne(secondary.span))
                .with_message(&secondary.message)
                .with_order(order(secondary.span));
            report = report.with_label(if options.color {
                label.with_color(Color::Blue)
            } else {
                label
            });
        }
        for note in &d.notes {
            report = report.with_note(note);
        }
        for help in &d.help {
            report = report.with_help(help);
        }
        // Writing to a Vec cannot fail.
        let _ = report.finish().write(&mut cache, &mut out);
    }
    String::from_utf8_lossy(&out).into_owned()
}

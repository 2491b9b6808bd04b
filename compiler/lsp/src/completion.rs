//! `textDocument/completion`: what may be written at the cursor, decided
//! from the tokens before it (so it works on half-written code): schedule
//! knobs and their argument names inside a schedule block, architectures
//! after `on`, mesh axes inside `shard(...)`, numerics settings, module names
//! after `import std.`, and elsewhere keywords, dtypes, the file's items, the
//! stdlib ops in scope and the names visible at the cursor.

use lsp_types::{CompletionItem, CompletionItemKind, Documentation, MarkupContent, MarkupKind};
use tessera_driver::sema::{Arch, StdModule};
use tessera_driver::syntax::ast::{Dtype, Item};
use tessera_driver::syntax::lexer::{lex, Spanned, Tok};

use crate::analysis::{Analysis, Context, SymKind, USER_FILE};
use crate::hover::KNOBS;

/// The reserved words of the language.
pub const KEYWORDS: &[&str] = &[
    "op", "kernel", "schedule", "mesh", "numerics", "fn", "extern", "import", "let", "mut",
    "return", "break", "continue", "if", "else", "elif", "for", "while", "in", "step", "on", "as",
    "out", "inout", "grid", "tensor", "shard", "true", "false", "None", "int", "float", "str",
    "and", "or", "not",
];

const NUMERICS: &[&str] = &[
    "fast",
    "deterministic",
    "kahan_sum",
    "safe",
    "standard",
    "aggressive",
    "policy",
    "precision",
    "storage",
    "accumulate",
    "matmul",
    "ieee",
    "tf32",
];

/// Where the cursor is, as far as completion cares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Site {
    /// A knob position inside a schedule block.
    Knob,
    /// Inside the parentheses of knob `0`.
    KnobArg(String),
    /// After `schedule NAME on`.
    Arch,
    /// After `schedule`.
    ScheduleTarget,
    /// Inside `@ shard(...)`.
    Shard,
    /// After `import std.`.
    Module,
    /// Inside a `numerics` statement.
    Numerics,
    /// Anywhere else.
    General,
}

fn is_word(tok: &Tok) -> bool {
    matches!(tok, Tok::Ident(_) | Tok::Dtype(_))
        || tok
            .spelling()
            .is_some_and(|s| s.chars().all(|c| c.is_ascii_alphabetic()))
}

/// Classifies the position `offset` of `text`.
pub fn site(text: &str, offset: u32) -> Site {
    let lexed = lex(text);
    let mut toks: Vec<&Spanned> = lexed.tokens.iter().take_while(|t| t.hi <= offset).collect();
    // The word being typed is the prefix, not context.
    if toks
        .last()
        .is_some_and(|t| t.hi == offset && is_word(&t.tok))
    {
        toks.pop();
    }
    let prev = |i: usize| toks.len().checked_sub(i).map(|j| &toks[j].tok);
    match (prev(1), prev(2)) {
        (Some(Tok::On), _) => return Site::Arch,
        (Some(Tok::Schedule), _) => return Site::ScheduleTarget,
        (Some(Tok::Dot), Some(Tok::Ident(s))) if s == "std" => return Site::Module,
        _ => {}
    }
    // The statement the cursor is in.
    let stmt_start = toks
        .iter()
        .rposition(|t| matches!(t.tok, Tok::Semi | Tok::LBrace | Tok::RBrace))
        .map_or(0, |i| i + 1);
    if toks.get(stmt_start).is_some_and(|t| t.tok == Tok::Numerics) {
        return Site::Numerics;
    }
    // The innermost unclosed bracket.
    let mut depth = 0usize;
    for i in (0..toks.len()).rev() {
        match &toks[i].tok {
            Tok::RParen | Tok::RBracket | Tok::RBrace => depth += 1,
            Tok::LParen | Tok::LBracket | Tok::LBrace if depth > 0 => depth -= 1,
            Tok::LParen => {
                return match i.checked_sub(1).map(|j| &toks[j].tok) {
                    Some(Tok::Shard) => Site::Shard,
                    Some(Tok::Ident(knob)) if in_schedule(&toks[..i]) => {
                        Site::KnobArg(knob.clone())
                    }
                    _ => Site::General,
                };
            }
            Tok::LBrace => {
                return if in_schedule(&toks[..=i]) {
                    Site::Knob
                } else {
                    Site::General
                }
            }
            _ => {}
        }
    }
    Site::General
}

/// Whether the innermost unclosed `{` of `toks` opens a schedule block.
fn in_schedule(toks: &[&Spanned]) -> bool {
    let mut depth = 0usize;
    for i in (0..toks.len()).rev() {
        match toks[i].tok {
            Tok::RBrace => depth += 1,
            Tok::LBrace if depth > 0 => depth -= 1,
            Tok::LBrace => {
                let start = toks[..i]
                    .iter()
                    .rposition(|t| matches!(t.tok, Tok::Semi | Tok::RBrace | Tok::LBrace))
                    .map_or(0, |j| j + 1);
                return toks.get(start).is_some_and(|t| t.tok == Tok::Schedule);
            }
            _ => {}
        }
    }
    false
}

fn item(label: &str, kind: CompletionItemKind, detail: Option<String>) -> CompletionItem {
    CompletionItem {
        label: label.to_owned(),
        kind: Some(kind),
        detail,
        ..CompletionItem::default()
    }
}

/// The completions at byte `offset`.
pub fn completions(a: &Analysis, offset: u32) -> Vec<CompletionItem> {
    let words = |list: &[&str], kind| list.iter().map(|w| item(w, kind, None)).collect();
    match site(a.text(), offset) {
        Site::Knob => KNOBS
            .iter()
            .map(|(name, usage, doc)| CompletionItem {
                documentation: Some(Documentation::String(doc.to_string())),
                ..item(name, CompletionItemKind::PROPERTY, Some(usage.to_string()))
            })
            .collect(),
        Site::KnobArg(knob) => {
            let names: &[&str] = match knob.as_str() {
                "tile" => &["bm", "bn", "bk"],
                "occupancy" | "occupancy_target" => &["min_warps", "max_warps"],
                "use_shared_memory" => &["padding"],
                "autotune" => &["bm", "bn", "bk", "warps", "stages", "vectorize"],
                _ => &[],
            };
            words(names, CompletionItemKind::FIELD)
        }
        Site::Arch => Arch::ALL
            .iter()
            .map(|arch| {
                item(
                    arch.name,
                    CompletionItemKind::ENUM_MEMBER,
                    Some(format!(
                        "{} KiB shared memory per block",
                        arch.smem_per_block / 1024
                    )),
                )
            })
            .collect(),
        Site::ScheduleTarget => visible(a, offset)
            .into_iter()
            .filter(|c| {
                matches!(c.kind, Some(CompletionItemKind::FUNCTION))
                    && c.detail
                        .as_deref()
                        .is_some_and(|d| d.starts_with("op ") || d.starts_with("kernel "))
            })
            .filter(|c| {
                a.index
                    .defs
                    .values()
                    .any(|d| d.span.file == USER_FILE && d.name == c.label)
            })
            .collect(),
        Site::Shard => {
            let mut out = axes(a);
            out.push(item(
                "_",
                CompletionItemKind::KEYWORD,
                Some("replicated".into()),
            ));
            out
        }
        Site::Module => StdModule::ALL
            .iter()
            .map(|m| item(m.name(), CompletionItemKind::MODULE, None))
            .collect(),
        Site::Numerics => words(NUMERICS, CompletionItemKind::ENUM_MEMBER),
        Site::General => {
            let mut out: Vec<CompletionItem> = words(KEYWORDS, CompletionItemKind::KEYWORD);
            out.extend(Dtype::ALL.iter().map(|d| {
                item(
                    d.name(),
                    CompletionItemKind::TYPE_PARAMETER,
                    Some("dtype".into()),
                )
            }));
            out.extend(visible(a, offset));
            out
        }
    }
}

fn axes(a: &Analysis) -> Vec<CompletionItem> {
    a.index
        .defs
        .values()
        .filter(|d| d.kind == SymKind::Axis)
        .map(|d| item(&d.name, CompletionItemKind::FIELD, Some(d.detail.clone())))
        .collect()
}

/// The names visible at `offset`: the file's items, the stdlib ops of the
/// context (imported modules only), and locals, parameters, generics,
/// dimensions and mesh axes in scope.
fn visible(a: &Analysis, offset: u32) -> Vec<CompletionItem> {
    let item_here = a.item_at(offset);
    let context = item_here.map_or(Context::Op, Context::of);
    let mut modules = vec![StdModule::Core];
    modules.push(match context {
        Context::Kernel => StdModule::Tile,
        Context::Host => StdModule::Host,
        Context::Op => StdModule::Core,
    });
    for i in a.file().map_or(&[][..], |f| &f.items[..]) {
        if let Item::Import(imp) = i {
            if let Some(m) = imp.path.get(1).and_then(|n| StdModule::from_name(&n.text)) {
                modules.push(m);
            }
        }
    }
    let std_files: Vec<_> = a
        .comp
        .stdlib
        .iter()
        .filter(|(_, m, _)| modules.contains(m))
        .map(|(id, _, _)| *id)
        .collect();
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut defs: Vec<_> = a.index.defs.values().collect();
    // User definitions first, so they shadow stdlib names.
    defs.sort_by_key(|d| (d.span.file != USER_FILE, d.span));
    for d in defs {
        let in_user = d.span.file == USER_FILE;
        let show = match d.kind {
            // The stdlib's `_` helpers are its own.
            SymKind::Op | SymKind::Kernel | SymKind::Fn => {
                in_user || (std_files.contains(&d.span.file) && !d.name.starts_with('_'))
            }
            SymKind::Mesh | SymKind::Axis => in_user,
            SymKind::Local | SymKind::Param | SymKind::Generic | SymKind::Dim => {
                in_user && d.scope.lo <= offset && offset <= d.scope.hi
            }
            SymKind::Knob => false,
        };
        if !show || !seen.insert(d.name.clone()) {
            continue;
        }
        let kind = match d.kind {
            SymKind::Op | SymKind::Kernel | SymKind::Fn => CompletionItemKind::FUNCTION,
            SymKind::Mesh => CompletionItemKind::MODULE,
            SymKind::Axis => CompletionItemKind::FIELD,
            SymKind::Generic | SymKind::Dim => CompletionItemKind::TYPE_PARAMETER,
            _ => CompletionItemKind::VARIABLE,
        };
        let docs = (!d.docs.is_empty()).then(|| {
            Documentation::MarkupContent(MarkupContent {
                kind: MarkupKind::Markdown,
                value: d.docs.join("\n"),
            })
        });
        out.push(CompletionItem {
            documentation: docs,
            ..item(&d.name, kind, Some(d.detail.clone()))
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sites() {
        let at = |src: &str| site(src, src.len() as u32);
        assert_eq!(
            at("schedule f on sm_90 {\n    tile(bm = 64);\n    wa"),
            Site::Knob
        );
        assert_eq!(at("schedule f {\n    tile(b"), Site::KnobArg("tile".into()));
        assert_eq!(at("schedule f on "), Site::Arch);
        assert_eq!(at("op f(x: tensor<N, fp32> @ shard("), Site::Shard);
        assert_eq!(at("import std."), Site::Module);
        assert_eq!(at("numerics precision = s"), Site::Numerics);
        assert_eq!(at("op f() {\n    let x = ex"), Site::General);
    }
}

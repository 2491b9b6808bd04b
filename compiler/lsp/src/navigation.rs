//! Go to definition, find references and the document's outline.

use lsp_types::{DocumentSymbol, Location, SymbolKind, Uri};
use tessera_driver::diagnostics::Span;
use tessera_driver::syntax::ast::{self, Item};

use crate::analysis::{Analysis, USER_FILE};
use crate::lines::location;
use crate::signature::squash;

/// Where the name under byte `offset` is defined. Stdlib definitions point
/// into `tessera-std:///MODULE.tsr` documents.
pub fn definition(a: &Analysis, uri: &Uri, offset: u32) -> Option<Location> {
    let def = a.index.occurrence_at(offset)?.def?;
    location(&a.comp, uri, def)
}

/// Every use of the symbol under byte `offset` in the document, and its
/// definition if `include_declaration`.
pub fn references(
    a: &Analysis,
    uri: &Uri,
    offset: u32,
    include_declaration: bool,
) -> Vec<Location> {
    let Some(def) = a.index.occurrence_at(offset).and_then(|o| o.def) else {
        return Vec::new();
    };
    let mut out: Vec<Location> = a
        .index
        .occurrences
        .iter()
        .filter(|o| o.def == Some(def) && (include_declaration || !o.is_def))
        .filter_map(|o| location(&a.comp, uri, o.span))
        .collect();
    if include_declaration && def.file != USER_FILE {
        out.extend(location(&a.comp, uri, def));
    }
    out
}

/// The outline: items with their parameters, mesh axes and schedule knobs.
pub fn document_symbols(a: &Analysis) -> Vec<DocumentSymbol> {
    let Some(file) = a.file() else {
        return Vec::new();
    };
    file.items
        .iter()
        .filter_map(|item| item_symbol(a, item))
        .collect()
}

#[allow(deprecated)]
fn symbol(
    a: &Analysis,
    name: String,
    detail: Option<String>,
    kind: SymbolKind,
    span: Span,
    sel: Span,
    children: Vec<DocumentSymbol>,
) -> DocumentSymbol {
    let text = a.text();
    DocumentSymbol {
        name,
        detail,
        kind,
        tags: None,
        deprecated: None,
        range: a.lines.range(text, span.lo, span.hi),
        selection_range: a.lines.range(text, sel.lo, sel.hi),
        children: (!children.is_empty()).then_some(children),
    }
}

fn params(a: &Analysis, params: &[ast::Param]) -> Vec<DocumentSymbol> {
    params
        .iter()
        .map(|p| {
            let ty = squash(
                a.text()
                    .get(p.ty.span.lo as usize..p.ty.span.hi as usize)
                    .unwrap_or(""),
            );
            symbol(
                a,
                p.name.text.clone(),
                Some(ty),
                SymbolKind::VARIABLE,
                p.span,
                p.name.span,
                Vec::new(),
            )
        })
        .collect()
}

fn item_symbol(a: &Analysis, item: &Item) -> Option<DocumentSymbol> {
    let detail = |name: &ast::Name| a.index.defs.get(&name.span).map(|d| d.detail.clone());
    Some(match item {
        Item::Op(_) | Item::Kernel(_) | Item::Fn(_) => {
            let (name, span, ps) = match item {
                Item::Op(o) => (&o.name, o.span, &o.params),
                Item::Kernel(k) => (&k.name, k.span, &k.params),
                Item::Fn(f) => (&f.name, f.span, &f.params),
                _ => return None,
            };
            symbol(
                a,
                name.text.clone(),
                detail(name),
                SymbolKind::FUNCTION,
                span,
                name.span,
                params(a, ps),
            )
        }
        Item::Mesh(m) => {
            let axes = m
                .axes
                .iter()
                .map(|x| {
                    symbol(
                        a,
                        x.name.text.clone(),
                        None,
                        SymbolKind::FIELD,
                        x.name.span.to(x.size.span),
                        x.name.span,
                        Vec::new(),
                    )
                })
                .collect();
            symbol(
                a,
                m.name.text.clone(),
                Some("mesh".into()),
                SymbolKind::NAMESPACE,
                m.span,
                m.name.span,
                axes,
            )
        }
        Item::Schedule(s) => {
            let knobs = s
                .knobs
                .iter()
                .map(|k| {
                    symbol(
                        a,
                        k.name.text.clone(),
                        None,
                        SymbolKind::PROPERTY,
                        k.span,
                        k.name.span,
                        Vec::new(),
                    )
                })
                .collect();
            let name = match &s.arch {
                Some(arch) => format!("schedule {} on {}", s.target.text, arch.text),
                None => format!("schedule {}", s.target.text),
            };
            symbol(
                a,
                name,
                None,
                SymbolKind::OBJECT,
                s.span,
                s.target.span,
                knobs,
            )
        }
        Item::Import(_) | Item::Numerics(_) | Item::Error(_) => return None,
    })
}

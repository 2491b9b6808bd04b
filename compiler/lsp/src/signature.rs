//! Signatures of ops, kernels and fns as one-line labels with the position
//! of each parameter, for hover and `textDocument/signatureHelp`. Built
//! from the syntax tree alone: the analysis stores them, `help.rs` serves
//! them.

use tessera_driver::diagnostics::Span;
use tessera_driver::syntax::ast::Item;

/// `text` with every run of whitespace made one space (labels and types
/// shown on one line).
pub fn squash(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// One parameter of a [`Signature`].
#[derive(Clone, Debug)]
pub struct SigParam {
    /// The parameter's name.
    pub name: String,
    /// Where the name is defined.
    pub span: Span,
    /// Its UTF-16 range within the label.
    pub range: [u32; 2],
}

/// The signature of a callable item, as `op name<T>(a: ..., b: ...) -> ...`.
#[derive(Clone, Debug)]
pub struct Signature {
    /// The one-line label.
    pub label: String,
    /// The parameters, in order.
    pub params: Vec<SigParam>,
}

fn slice(text: &str, span: Span) -> String {
    squash(text.get(span.lo as usize..span.hi as usize).unwrap_or(""))
}

fn utf16_len(s: &str) -> u32 {
    s.encode_utf16().count() as u32
}

/// The signature of an op, kernel or fn written in `text`.
pub fn item_signature(text: &str, item: &Item) -> Option<Signature> {
    let (keyword, name, generics, params, tail) = match item {
        Item::Op(o) => (
            if o.body.is_some() { "op" } else { "extern op" },
            &o.name,
            &o.generics,
            &o.params,
            o.ret
                .as_ref()
                .map(|t| format!(" -> {}", slice(text, t.span))),
        ),
        Item::Kernel(k) => (
            "kernel",
            &k.name,
            &k.generics,
            &k.params,
            (!k.grid.is_empty()).then(|| format!(" {}", slice(text, k.grid_span))),
        ),
        Item::Fn(f) => (
            if f.body.is_some() { "fn" } else { "extern fn" },
            &f.name,
            &f.generics,
            &f.params,
            f.ret
                .as_ref()
                .map(|t| format!(" -> {}", slice(text, t.span))),
        ),
        _ => return None,
    };
    let mut label = format!("{keyword} {}", name.text);
    if !generics.is_empty() {
        let g: Vec<String> = generics.iter().map(|g| slice(text, g.span)).collect();
        label.push_str(&format!("<{}>", g.join(", ")));
    }
    label.push('(');
    let mut out = Vec::new();
    for (i, p) in params.iter().enumerate() {
        if i > 0 {
            label.push_str(", ");
        }
        let start = utf16_len(&label);
        label.push_str(&slice(text, p.span));
        out.push(SigParam {
            name: p.name.text.clone(),
            span: p.name.span,
            range: [start, utf16_len(&label)],
        });
    }
    label.push(')');
    label.push_str(&tail.unwrap_or_default());
    Some(Signature { label, params: out })
}

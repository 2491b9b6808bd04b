//! Signatures of ops, kernels and fns as one-line labels with the position
//! of each parameter, for hover and `textDocument/signatureHelp`.

use lsp_types::{
    Documentation, MarkupContent, MarkupKind, ParameterInformation, ParameterLabel, SignatureHelp,
    SignatureInformation,
};
use tessera_driver::diagnostics::Span;
use tessera_driver::syntax::ast::Item;
use tessera_driver::syntax::lexer::{lex, Tok};

use crate::analysis::{squash, Analysis, Context, Def, SymKind, USER_FILE};

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

/// The op, kernel or fn a call of `name` reaches from `context`: the user
/// file's items first, then the stdlib modules in the context's order.
pub fn resolve_callee<'a>(a: &'a Analysis, name: &str, context: Context) -> Option<&'a Def> {
    let callable =
        |d: &&Def| d.name == name && matches!(d.kind, SymKind::Op | SymKind::Kernel | SymKind::Fn);
    if let Some(d) = a
        .index
        .defs
        .values()
        .find(|d| d.span.file == USER_FILE && callable(d))
    {
        return Some(d);
    }
    context.modules().into_iter().find_map(|m| {
        let (file, _, _) = a.comp.stdlib.iter().find(|(_, sm, _)| *sm == m)?;
        a.index
            .defs
            .values()
            .find(|d| d.span.file == *file && callable(d))
    })
}

/// The docs of a definition as markdown paragraphs.
pub fn docs_markdown(def: &Def) -> String {
    def.docs.join("\n")
}

/// The call around byte `offset`: callee name, index of the argument the
/// cursor is in, and the name of that argument if written `name = ...`.
pub fn call_at(text: &str, offset: u32) -> Option<(String, usize, Option<String>)> {
    let lexed = lex(text);
    let toks: Vec<_> = lexed.tokens.iter().take_while(|t| t.hi <= offset).collect();
    let mut depth = 0usize;
    let mut commas = 0usize;
    let mut arg_start = toks.len();
    for i in (0..toks.len()).rev() {
        match &toks[i].tok {
            Tok::RParen | Tok::RBracket | Tok::RBrace => depth += 1,
            Tok::LParen | Tok::LBracket if depth > 0 => depth -= 1,
            Tok::LBrace if depth > 0 => depth -= 1,
            Tok::Comma if depth == 0 => {
                commas += 1;
                if commas == 1 {
                    arg_start = i + 1;
                }
            }
            Tok::Semi | Tok::LBrace if depth == 0 => return None,
            Tok::LParen => {
                if commas == 0 {
                    arg_start = i + 1;
                }
                let mut j = i.checked_sub(1)?;
                if toks[j].tok == Tok::Gt {
                    while j > 0 && toks[j].tok != Tok::GenericLt {
                        j -= 1;
                    }
                    j = j.checked_sub(1)?;
                }
                if let Tok::Ident(name) = &toks[j].tok {
                    let named = match (toks.get(arg_start), toks.get(arg_start + 1)) {
                        (Some(a), Some(b)) if b.tok == Tok::Eq => match &a.tok {
                            Tok::Ident(n) => Some(n.clone()),
                            _ => None,
                        },
                        _ => None,
                    };
                    return Some((name.clone(), commas, named));
                }
                // A parenthesised group: look further out.
                commas = 0;
                arg_start = toks.len();
            }
            Tok::LBracket => {
                commas = 0;
                arg_start = toks.len();
            }
            _ => {}
        }
    }
    None
}

/// `textDocument/signatureHelp` at byte `offset`.
pub fn signature_help(a: &Analysis, offset: u32) -> Option<SignatureHelp> {
    let (name, index, named) = call_at(a.text(), offset)?;
    let context = a.item_at(offset).map_or(Context::Op, Context::of);
    let def = resolve_callee(a, &name, context)?;
    let sig = def.signature.as_ref()?;
    let active = match named {
        Some(n) => sig.params.iter().position(|p| p.name == n),
        None => Some(index.min(sig.params.len().saturating_sub(1))),
    };
    let info = SignatureInformation {
        label: sig.label.clone(),
        documentation: (!def.docs.is_empty()).then(|| {
            Documentation::MarkupContent(MarkupContent {
                kind: MarkupKind::Markdown,
                value: docs_markdown(def),
            })
        }),
        parameters: Some(
            sig.params
                .iter()
                .map(|p| ParameterInformation {
                    label: ParameterLabel::LabelOffsets(p.range),
                    documentation: None,
                })
                .collect(),
        ),
        active_parameter: active.map(|i| i as u32),
    };
    Some(SignatureHelp {
        signatures: vec![info],
        active_signature: Some(0),
        active_parameter: active.map(|i| i as u32),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_call_and_argument() {
        let src = "let y = softmax(x, axis = ";
        assert_eq!(
            call_at(src, src.len() as u32),
            Some(("softmax".into(), 1, Some("axis".into())))
        );
        let src = "let y = zeros<fp32>([4, (1 + 2)";
        assert_eq!(
            call_at(src, src.len() as u32),
            Some(("zeros".into(), 0, None))
        );
        assert_eq!(call_at("f(a); g", 7), None);
    }
}

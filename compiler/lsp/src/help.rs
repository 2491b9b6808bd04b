//! `textDocument/signatureHelp`: the call around the cursor, the callee it
//! reaches and its signature with the active parameter.

use lsp_types::{
    Documentation, MarkupContent, MarkupKind, ParameterInformation, ParameterLabel, SignatureHelp,
    SignatureInformation,
};
use tessera_driver::syntax::lexer::{lex, Tok};

use crate::analysis::{Analysis, Context, Def, SymKind, USER_FILE};

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

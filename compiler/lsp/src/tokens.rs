//! `textDocument/semanticTokens/full`: keywords, dtypes, literals, comments
//! and operators from the lexer, and every identifier classified by what the
//! index resolved it to (function, parameter, variable, mesh, mesh axis,
//! dimension or generic, schedule knob).

use lsp_types::{
    SemanticToken, SemanticTokenModifier, SemanticTokenType, SemanticTokens, SemanticTokensLegend,
};
use tessera_driver::sema::Arch;
use tessera_driver::syntax::lexer::{lex, Tok};

use crate::analysis::{Analysis, SymKind, USER_FILE};

const KEYWORD: u32 = 0;
const TYPE: u32 = 1;
const FUNCTION: u32 = 2;
const PARAMETER: u32 = 3;
const VARIABLE: u32 = 4;
const NUMBER: u32 = 5;
const STRING: u32 = 6;
const COMMENT: u32 = 7;
const OPERATOR: u32 = 8;
const NAMESPACE: u32 = 9;
const PROPERTY: u32 = 10;
const TYPE_PARAMETER: u32 = 11;
const ENUM_MEMBER: u32 = 12;

const DECLARATION: u32 = 1 << 0;
const DOCUMENTATION: u32 = 1 << 1;
const DEFAULT_LIBRARY: u32 = 1 << 2;

/// The token types and modifiers, in the order of the indices above.
pub fn legend() -> SemanticTokensLegend {
    SemanticTokensLegend {
        token_types: vec![
            SemanticTokenType::KEYWORD,
            SemanticTokenType::TYPE,
            SemanticTokenType::FUNCTION,
            SemanticTokenType::PARAMETER,
            SemanticTokenType::VARIABLE,
            SemanticTokenType::NUMBER,
            SemanticTokenType::STRING,
            SemanticTokenType::COMMENT,
            SemanticTokenType::OPERATOR,
            SemanticTokenType::NAMESPACE,
            SemanticTokenType::PROPERTY,
            SemanticTokenType::TYPE_PARAMETER,
            SemanticTokenType::ENUM_MEMBER,
        ],
        token_modifiers: vec![
            SemanticTokenModifier::DECLARATION,
            SemanticTokenModifier::DOCUMENTATION,
            SemanticTokenModifier::DEFAULT_LIBRARY,
        ],
    }
}

/// A classified byte range, before encoding.
struct Raw {
    lo: u32,
    hi: u32,
    ty: u32,
    mods: u32,
}

/// The comments in `gap` (text between two tokens starting at byte `base`).
fn comments(gap: &str, base: u32, out: &mut Vec<Raw>) {
    let bytes = gap.as_bytes();
    let mut i = 0;
    while i + 1 < bytes.len() {
        if bytes[i] == b'/' && bytes[i + 1] == b'/' {
            let end = gap[i..].find('\n').map_or(gap.len(), |n| i + n);
            let doc = gap[i..].starts_with("///");
            let mods = if doc { DOCUMENTATION } else { 0 };
            out.push(Raw {
                lo: base + i as u32,
                hi: base + end as u32,
                ty: COMMENT,
                mods,
            });
            i = end;
        } else if bytes[i] == b'/' && bytes[i + 1] == b'*' {
            let (mut depth, mut j) = (0usize, i);
            let mut closed = false;
            while j + 1 < bytes.len() {
                if bytes[j] == b'/' && bytes[j + 1] == b'*' {
                    depth += 1;
                    j += 2;
                } else if bytes[j] == b'*' && bytes[j + 1] == b'/' {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        closed = true;
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            let end = if closed { j } else { bytes.len() };
            out.push(Raw {
                lo: base + i as u32,
                hi: base + end as u32,
                ty: COMMENT,
                mods: 0,
            });
            i = end;
        } else {
            i += 1;
        }
    }
}

fn classify(a: &Analysis, tok: &Tok, lo: u32) -> Option<(u32, u32)> {
    Some(match tok {
        Tok::Ident(name) => {
            let i = a.index.occurrences.partition_point(|o| o.span.lo < lo);
            match a.index.occurrences.get(i).filter(|o| o.span.lo == lo) {
                Some(o) => {
                    let ty = match o.kind {
                        SymKind::Op | SymKind::Kernel | SymKind::Fn => FUNCTION,
                        SymKind::Param => PARAMETER,
                        SymKind::Local => VARIABLE,
                        SymKind::Mesh => NAMESPACE,
                        SymKind::Axis | SymKind::Knob => PROPERTY,
                        SymKind::Generic | SymKind::Dim => TYPE_PARAMETER,
                    };
                    let mut mods = if o.is_def { DECLARATION } else { 0 };
                    if o.def.is_some_and(|d| d.file != USER_FILE) {
                        mods |= DEFAULT_LIBRARY;
                    }
                    (ty, mods)
                }
                None if Arch::from_name(name).is_some() => (ENUM_MEMBER, 0),
                None => (VARIABLE, 0),
            }
        }
        Tok::Dtype(_) | Tok::IntTy | Tok::FloatTy | Tok::StrTy | Tok::Tensor => (TYPE, 0),
        Tok::Int(_) | Tok::Float(_) => (NUMBER, 0),
        Tok::Str(_) => (STRING, 0),
        Tok::Plus
        | Tok::Minus
        | Tok::Star
        | Tok::Slash
        | Tok::Percent
        | Tok::At
        | Tok::Bang
        | Tok::AndAnd
        | Tok::OrOr
        | Tok::Amp
        | Tok::Pipe
        | Tok::Caret
        | Tok::Tilde
        | Tok::Shl
        | Tok::Shr
        | Tok::EqEq
        | Tok::Ne
        | Tok::Lt
        | Tok::Gt
        | Tok::Le
        | Tok::Ge => (OPERATOR, 0),
        other
            if other
                .spelling()
                .is_some_and(|s| s.chars().all(|c| c.is_ascii_alphabetic())) =>
        {
            (KEYWORD, 0)
        }
        _ => return None,
    })
}

/// The semantic tokens of the whole document.
pub fn semantic_tokens(a: &Analysis) -> SemanticTokens {
    let text = a.text();
    let lexed = lex(text);
    let mut raw = Vec::new();
    let mut prev_hi = 0u32;
    for t in &lexed.tokens {
        if let Some(gap) = text.get(prev_hi as usize..t.lo as usize) {
            comments(gap, prev_hi, &mut raw);
        }
        prev_hi = t.hi;
        if let Some((ty, mods)) = classify(a, &t.tok, t.lo) {
            raw.push(Raw {
                lo: t.lo,
                hi: t.hi,
                ty,
                mods,
            });
        }
    }
    if let Some(gap) = text.get(prev_hi as usize..) {
        comments(gap, prev_hi, &mut raw);
    }
    raw.sort_by_key(|r| r.lo);
    // Split multi-line ranges, then delta-encode.
    let mut data = Vec::with_capacity(raw.len());
    let (mut last_line, mut last_col) = (0u32, 0u32);
    for r in raw {
        let mut lo = r.lo;
        while lo < r.hi {
            let line_end = text
                .get(lo as usize..r.hi as usize)
                .and_then(|s| s.find('\n'))
                .map_or(r.hi, |n| lo + n as u32);
            let start = a.lines.position(text, lo);
            let end = a.lines.position(text, line_end);
            let length = end.character.saturating_sub(start.character);
            if length > 0 {
                let delta_line = start.line.saturating_sub(last_line);
                let delta_start = if delta_line == 0 {
                    start.character.saturating_sub(last_col)
                } else {
                    start.character
                };
                data.push(SemanticToken {
                    delta_line,
                    delta_start,
                    length,
                    token_type: r.ty,
                    token_modifiers_bitset: r.mods,
                });
                (last_line, last_col) = (start.line, start.character);
            }
            lo = line_end + 1;
        }
    }
    SemanticTokens {
        result_id: None,
        data,
    }
}

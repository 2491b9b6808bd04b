//! The formatter's guarantees over every example, stdlib file and parser
//! test case: the output parses to the same AST, formatting it again changes
//! nothing, no comment is lost, and no prefix of a file makes it panic.

use std::path::{Path, PathBuf};
use tessera_diagnostics::FileId;
use tessera_fmt::format;

/// Every `.tsr` file of the corpus.
fn corpus() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    for dir in [
        "examples",
        "stdlib",
        "tests/parse/ok",
        "compiler/fmt/tests/inputs",
    ] {
        let entries = std::fs::read_dir(root.join(dir)).expect("corpus directory");
        for entry in entries {
            let path = entry.expect("directory entry").path();
            if path.extension().is_some_and(|e| e == "tsr") {
                files.push(path);
            }
        }
    }
    files.sort();
    assert!(files.len() >= 14, "corpus not found: {files:?}");
    files
}

/// The AST's debug form with every span removed.
fn ast_without_spans(text: &str) -> String {
    let parsed = tessera_syntax::parse(FileId(0), text);
    assert!(parsed.diagnostics.is_empty(), "{:?}", parsed.diagnostics);
    let debug = format!("{:?}", parsed.file);
    let mut out = String::with_capacity(debug.len());
    let mut rest = debug.as_str();
    while let Some(at) = rest.find("Span {") {
        out.push_str(&rest[..at]);
        let end = rest[at..].find('}').map_or(rest.len(), |e| at + e + 1);
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// The comments of `text`, in order, from the formatter-independent lexer
/// view: whatever lies between tokens that is not whitespace.
fn comments(text: &str) -> Vec<String> {
    let lexed = tessera_syntax::lexer::lex(text);
    let mut out = Vec::new();
    let mut prev = 0usize;
    let bounds = lexed
        .tokens
        .iter()
        .map(|t| (t.lo as usize, t.hi as usize))
        .chain(std::iter::once((text.len(), text.len())));
    for (lo, hi) in bounds {
        let gap = &text[prev..lo];
        for piece in split_comments(gap) {
            out.push(piece);
        }
        prev = hi;
    }
    out
}

/// Splits a gap of trivia into its comments, trimmed.
fn split_comments(gap: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = gap.trim_start();
    while !rest.is_empty() {
        if rest.starts_with("//") {
            let end = rest.find('\n').unwrap_or(rest.len());
            out.push(rest[..end].trim_end().to_owned());
            rest = rest[end..].trim_start();
        } else {
            let mut depth = 0;
            let mut end = rest.len();
            let bytes = rest.as_bytes();
            let mut i = 0;
            while i + 1 < bytes.len() {
                if bytes[i] == b'/' && bytes[i + 1] == b'*' {
                    depth += 1;
                    i += 2;
                } else if bytes[i] == b'*' && bytes[i + 1] == b'/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        end = i;
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(rest[..end].to_owned());
            rest = rest[end..].trim_start();
        }
    }
    out
}

#[test]
fn same_ast_and_idempotent() {
    for path in corpus() {
        let text = std::fs::read_to_string(&path).expect("readable");
        let once = format(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(
            ast_without_spans(&text),
            ast_without_spans(&once),
            "{}: the AST changed:\n{once}",
            path.display()
        );
        let twice = format(&once).expect("formatted output parses");
        assert_eq!(once, twice, "{}: not idempotent", path.display());
        for (n, line) in once.lines().enumerate() {
            let comment = line.contains("//") || line.contains("/*");
            assert!(
                line.chars().count() <= tessera_fmt::MAX_WIDTH || comment,
                "{}:{}: line too long: {line}",
                path.display(),
                n + 1
            );
        }
    }
}

#[test]
fn comments_are_never_lost() {
    for path in corpus() {
        let text = std::fs::read_to_string(&path).expect("readable");
        let once = format(&text).expect("formats");
        assert_eq!(comments(&text), comments(&once), "{}", path.display());
    }
}

#[test]
fn every_prefix_formats_or_errors() {
    for path in corpus() {
        let text = std::fs::read_to_string(&path).expect("readable");
        for cut in prefix_cuts(&text) {
            let prefix = &text[..cut];
            if let Ok(once) = format(prefix) {
                assert_eq!(ast_without_spans(prefix), ast_without_spans(&once));
                assert_eq!(
                    format(&once).as_ref(),
                    Ok(&once),
                    "prefix {cut} of {path:?}"
                );
            }
        }
    }
}

/// Where `every_prefix_formats_or_errors` cuts `text`: every character
/// boundary of a small file; of a large one (each cut parses the prefix,
/// so all of them are quadratic) every line's end and about 3,000 cuts in
/// between, at a stride that is no multiple of common token lengths so
/// they fall at every place within tokens.
fn prefix_cuts(text: &str) -> Vec<usize> {
    let stride = (text.len() / 3000).max(1) | 1;
    let mut cuts: Vec<usize> = (0..=text.len()).step_by(stride).collect();
    cuts.extend(text.match_indices('\n').flat_map(|(i, _)| [i, i + 1]));
    cuts.push(text.len());
    cuts.retain(|&i| text.is_char_boundary(i));
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

#[test]
fn syntax_errors_are_returned() {
    let err = format("op f( {").expect_err("a syntax error");
    assert!(!err.diagnostics.is_empty());
    assert!(err.to_string().contains("E00"), "{err}");
}

#[test]
fn deep_expressions_do_not_overflow() {
    let chain = vec!["x"; 500].join(" + ");
    let nested = format!("{}x{}", "(".repeat(250), ")".repeat(250));
    for value in [chain, nested] {
        let text = format!("fn main() {{ let x = 1; let y = {value}; }}");
        let once = format(&text).expect("formats");
        assert_eq!(ast_without_spans(&text), ast_without_spans(&once));
        assert_eq!(format(&once).as_ref(), Ok(&once));
    }
}

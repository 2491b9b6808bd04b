//! Property tests over mutated examples, the stable counterpart of the
//! cargo-fuzz targets in `compiler/fuzz` (a bounded run over the examples
//! and stdlib as seed corpus, in every CI run): the front end never panics
//! and every diagnostic has a code and a span inside its file; `tsrc fmt`
//! of what parses parses again, is idempotent and never panics; and what
//! checks lowers through the Schedule and Tile IR to PTX, or says why in a
//! diagnostic, without a panic.
//!
//! Each case takes one example (or stdlib module) and applies a short list of
//! edits: deleting, duplicating or swapping byte ranges, inserting tokens the
//! grammar knows, and truncating. The edits work on bytes, so they also make
//! invalid UTF-8 and half-written tokens.

use proptest::prelude::*;
use std::path::Path;
use tessera_driver::{compile, Emit, Stage};
use tessera_tests::rendered;

/// Fragments worth inserting: every kind of bracket, keyword and operator,
/// plus a few shapes the checker has to reason about.
const FRAGMENTS: &[&str] = &[
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "<",
    ">",
    ",",
    ";",
    ":",
    "=",
    "->",
    "@",
    ".T",
    "..",
    "op ",
    "kernel ",
    "fn ",
    "schedule ",
    "mesh ",
    "numerics ",
    "import ",
    "let ",
    "return ",
    "if ",
    "else ",
    "for ",
    "in ",
    "tensor<",
    "fp32",
    "bf16",
    "fp8_e4m3",
    "int64",
    "0",
    "-1",
    "1e999",
    "99999999999999999999",
    "0x",
    "\"",
    "/*",
    "*/",
    "//",
    "///",
    "N",
    "M * K",
    "...",
    "axis = ",
    "shard(",
    "partial",
    "sum(",
    "matmul(",
    "tile(bm = 7)",
    "\u{fffd}",
    "\u{0}",
];

fn corpus() -> Vec<(String, Vec<u8>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut out = Vec::new();
    for dir in ["examples", "stdlib"] {
        let mut paths: Vec<_> = std::fs::read_dir(root.join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "tsr"))
            .collect();
        paths.sort();
        for p in paths {
            out.push((p.display().to_string(), std::fs::read(&p).unwrap()));
        }
    }
    out
}

/// One edit; positions are fractions of the current length so that they stay
/// in range whatever the earlier edits did.
#[derive(Clone, Debug)]
enum Edit {
    Delete(f64, u8),
    Duplicate(f64, u8),
    Swap(f64, f64, u8),
    Insert(f64, usize),
    Byte(f64, u8),
    Truncate(f64),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (0.0..1.0, any::<u8>()).prop_map(|(a, n)| Edit::Delete(a, n)),
        (0.0..1.0, any::<u8>()).prop_map(|(a, n)| Edit::Duplicate(a, n)),
        (0.0..1.0, 0.0..1.0, any::<u8>()).prop_map(|(a, b, n)| Edit::Swap(a, b, n)),
        (0.0..1.0, 0..FRAGMENTS.len()).prop_map(|(a, f)| Edit::Insert(a, f)),
        (0.0..1.0, any::<u8>()).prop_map(|(a, b)| Edit::Byte(a, b)),
        (0.0..1.0).prop_map(Edit::Truncate),
    ]
}

fn at(len: usize, frac: f64) -> usize {
    ((len as f64 * frac) as usize).min(len)
}

fn apply(bytes: &mut Vec<u8>, e: &Edit) {
    let len = bytes.len();
    match *e {
        Edit::Delete(a, n) => {
            let lo = at(len, a);
            let hi = (lo + n as usize % 32 + 1).min(len);
            bytes.drain(lo..hi);
        }
        Edit::Duplicate(a, n) => {
            let lo = at(len, a);
            let hi = (lo + n as usize).min(len);
            let piece = bytes[lo..hi].to_vec();
            bytes.splice(hi..hi, piece);
        }
        Edit::Swap(a, b, n) => {
            let (x, y) = (at(len, a.min(b)), at(len, a.max(b)));
            let n = (n as usize % 16).min(y - x).min(len - y);
            for i in 0..n {
                bytes.swap(x + i, y + i);
            }
        }
        Edit::Insert(a, f) => {
            let p = at(len, a);
            bytes.splice(p..p, FRAGMENTS[f].bytes());
        }
        Edit::Byte(a, b) => {
            if len > 0 {
                bytes[at(len - 1, a)] = b;
            }
        }
        Edit::Truncate(a) => bytes.truncate(at(len, a)),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn mutated_sources_get_diagnostics_not_panics(
        which in any::<prop::sample::Index>(),
        edits in prop::collection::vec(edit(), 1..6),
    ) {
        let corpus = corpus();
        let (name, mut bytes) = corpus[which.index(corpus.len())].clone();
        for e in &edits {
            apply(&mut bytes, e);
        }
        let c = compile(&[(name, bytes)], Stage::Check);
        for d in c.diagnostics.as_slice() {
            prop_assert!(!d.code.0.is_empty());
            for label in std::iter::once(&d.primary).chain(&d.secondary) {
                let span = label.span;
                let text = &c.sources.get(span.file).text;
                prop_assert!(span.lo <= span.hi);
                prop_assert!((span.hi as usize) <= text.len(), "{}", rendered(&c));
                prop_assert!(text.is_char_boundary(span.lo as usize));
                prop_assert!(text.is_char_boundary(span.hi as usize));
            }
        }
        // Rendering must not panic either.
        let _ = rendered(&c);
    }

    #[test]
    fn mutated_sources_format_stably(
        which in any::<prop::sample::Index>(),
        edits in prop::collection::vec(edit(), 1..4),
    ) {
        let corpus = corpus();
        let (_, mut bytes) = corpus[which.index(corpus.len())].clone();
        for e in &edits {
            apply(&mut bytes, e);
        }
        let Ok(text) = String::from_utf8(bytes) else {
            return Ok(());
        };
        if let Ok(once) = tessera_fmt::format(&text) {
            let twice = tessera_fmt::format(&once);
            prop_assert!(twice.is_ok(), "formatted text does not parse:\n{once}");
            prop_assert_eq!(twice.unwrap(), once);
        }
    }
}

proptest! {
    // Lowering is the slow part: fewer cases, each through every IR.
    #![proptest_config(ProptestConfig { cases: 120, ..ProptestConfig::default() })]

    #[test]
    fn mutated_sources_lower_or_explain(
        which in any::<prop::sample::Index>(),
        // No edit at all lowers the seed itself; most edits stop at check.
        edits in prop::collection::vec(edit(), 0..3),
    ) {
        let corpus = corpus();
        let (name, mut bytes) = corpus[which.index(corpus.len())].clone();
        for e in &edits {
            apply(&mut bytes, e);
        }
        let mut c = compile(&[(name, bytes)], Stage::Check);
        if c.has_errors() {
            return Ok(());
        }
        let dims = tessera_core::Bindings::new();
        for what in [Emit::Schedule, Emit::Tile, Emit::Ptx] {
            let out = c.emit(what, &tessera_core::Arch::SM_90, &dims);
            prop_assert!(
                !out.text.is_empty() || c.has_errors(),
                "{what:?} gave nothing and no diagnostic"
            );
        }
        for d in c.diagnostics.as_slice() {
            let text = &c.sources.get(d.primary.span.file).text;
            prop_assert!((d.primary.span.hi as usize) <= text.len(), "{}", rendered(&c));
        }
    }
}

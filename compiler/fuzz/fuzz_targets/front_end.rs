//! Fuzz target: any bytes through lex, parse, check and rendering.
//!
//! Run with `cargo +nightly fuzz run front_end` from `compiler/fuzz`. The
//! properties are the ones `tests/mutate.rs` checks on mutated examples: no
//! panic, and every label's span lies inside its file on char boundaries.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tessera_driver::diagnostics::{render_all, RenderOptions};
use tessera_driver::{compile, Stage};

fuzz_target!(|data: &[u8]| {
    let c = compile(&[("fuzz.tsr".to_owned(), data.to_vec())], Stage::Check);
    for d in c.diagnostics.as_slice() {
        for label in std::iter::once(&d.primary).chain(&d.secondary) {
            let text = &c.sources.get(label.span.file).text;
            assert!(label.span.lo <= label.span.hi);
            assert!(label.span.hi as usize <= text.len());
            assert!(text.is_char_boundary(label.span.lo as usize));
            assert!(text.is_char_boundary(label.span.hi as usize));
        }
    }
    let _ = render_all(
        &c.sources,
        c.diagnostics.as_slice(),
        RenderOptions {
            color: false,
            ascii: true,
        },
    );
});

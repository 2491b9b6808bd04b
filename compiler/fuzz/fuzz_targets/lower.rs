//! Fuzz target: a program that checks lowers through the Schedule and Tile
//! IR to PTX, or a diagnostic says why; nothing panics and every
//! diagnostic's span lies inside its file.
//!
//! Run with `cargo +nightly fuzz run lower` from `compiler/fuzz`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tessera_driver::core::{Arch, Bindings};
use tessera_driver::{compile, Emit, Stage};

fuzz_target!(|data: &[u8]| {
    let mut c = compile(&[("fuzz.tsr".to_owned(), data.to_vec())], Stage::Check);
    if c.has_errors() {
        return;
    }
    for what in [Emit::Schedule, Emit::Tile, Emit::Ptx] {
        let out = c.emit(what, &Arch::SM_90, &Bindings::new());
        assert!(!out.text.is_empty() || c.has_errors());
    }
    for d in c.diagnostics.as_slice() {
        let text = &c.sources.get(d.primary.span.file).text;
        assert!(d.primary.span.hi as usize <= text.len());
    }
});

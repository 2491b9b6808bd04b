//! Fuzz target: `tsrc fmt` on any text that parses gives text that parses
//! again and formats to itself; nothing panics.
//!
//! Run with `cargo +nightly fuzz run fmt` from `compiler/fuzz`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(once) = tessera_fmt::format(text) {
        let twice = tessera_fmt::format(&once).expect("formatted text parses");
        assert_eq!(twice, once, "formatting is not idempotent");
    }
});

//! Golden tests: each messy input of `tests/inputs` and its formatted text,
//! as insta snapshots in `tests/snapshots` (bless with `cargo insta review`
//! or `INSTA_UPDATE=always`).

use std::path::Path;

fn golden(name: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/inputs")
        .join(name);
    let input = std::fs::read_to_string(&path).expect("input file");
    let output = tessera_fmt::format(&input).unwrap_or_else(|e| panic!("{name}: {e}"));
    insta::with_settings!({ description => input.as_str(), omit_expression => true }, {
        insta::assert_snapshot!(name.trim_end_matches(".tsr"), output);
    });
}

#[test]
fn odd_spacing() {
    golden("spacing.tsr");
}

#[test]
fn comments_everywhere() {
    golden("comments.tsr");
}

#[test]
fn long_lines_wrap() {
    golden("wrap.tsr");
}

#[test]
fn precedence_and_parentheses() {
    golden("precedence.tsr");
}

#[test]
fn tensor_types_keep_their_form() {
    golden("types.tsr");
}

#[test]
fn python_spellings_in_tessera_form() {
    golden("python_spellings.tsr");
}

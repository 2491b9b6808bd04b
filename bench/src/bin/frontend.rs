//! Front-end throughput: lex, parse and check a generated 10,000-line file.
//!
//! `cargo run --release -p tessera-bench --bin frontend [LINES]`

use tessera_bench::{generate_source, median_time, ms};
use tessera_driver::diagnostics::FileId;
use tessera_driver::{compile_text, syntax, Stage};

fn main() {
    let lines: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("LINES must be a number"))
        .unwrap_or(10_000);
    let text = generate_source(lines);
    let n_lines = text.lines().count();
    let check = compile_text("gen.tsr", &text, Stage::Check);
    assert!(
        check.diagnostics.as_slice().is_empty(),
        "generated source does not check clean: {:?}",
        check.diagnostics.as_slice().first()
    );
    let runs = 15;
    let lex = median_time(runs, || syntax::lexer::lex(&text));
    let parse = median_time(runs, || syntax::parse(FileId(0), &text));
    let full = median_time(runs, || compile_text("gen.tsr", &text, Stage::Check));
    let stdlib_only = median_time(runs, || compile_text("empty.tsr", "", Stage::Check));
    println!(
        "input: {n_lines} lines, {} KiB; median of {runs} runs",
        text.len() / 1024
    );
    println!("lex:                 {:8.2} ms", ms(lex));
    println!("lex+parse:           {:8.2} ms", ms(parse));
    println!(
        "lex+parse+check:     {:8.2} ms  ({:.0} lines/s)",
        ms(full),
        n_lines as f64 / full.as_secs_f64()
    );
    println!("  of which stdlib:   {:8.2} ms", ms(stdlib_only));
}

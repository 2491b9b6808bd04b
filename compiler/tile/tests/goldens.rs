//! Every Tile IR golden reads back: the programs in `tests/snapshots/tile/`
//! (one snapshot per example in `examples/`, plus the standard library's
//! ops, all written by `tests/schedule.rs`) give `print(read(text)) == text`
//! byte for byte, and the verifier accepts each program read.

use std::path::{Path, PathBuf};
use tessera_tile::print::print_program;
use tessera_tile::read_program;
use tessera_tile::verify::verify;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The body of an insta snapshot: what follows its `---` header.
fn snapshot_body(text: &str) -> &str {
    let rest = text.strip_prefix("---\n").expect("an insta header");
    let end = rest.find("\n---\n").expect("the end of the insta header");
    &rest[end + "\n---\n".len()..]
}

/// The programs of a golden, each as `print_program` wrote it: a program
/// starts at a `program` line and runs to the next one (blank lines
/// between programs dropped).
fn programs(body: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in body.lines() {
        if line.starts_with("program ") {
            out.push(String::new());
        }
        match out.last_mut() {
            Some(p) => {
                p.push_str(line);
                p.push('\n');
            }
            None => assert!(line.is_empty(), "text before the first program: {line}"),
        }
    }
    for p in &mut out {
        while p.ends_with("\n\n") {
            p.pop();
        }
    }
    out
}

#[test]
fn every_tile_golden_reads_back_byte_for_byte() {
    let dir = root().join("tests/snapshots/tile");
    let mut snaps: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("the tile goldens")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "snap"))
        .collect();
    snaps.sort();

    // Every example has its golden here.
    for e in std::fs::read_dir(root().join("examples")).expect("the examples") {
        let path = e.expect("a directory entry").path();
        if path.extension().is_some_and(|e| e == "tsr") {
            let stem = path.file_stem().unwrap_or_default().to_string_lossy();
            let golden = dir.join(format!("{stem}.snap"));
            assert!(snaps.contains(&golden), "no Tile IR golden for {stem}");
        }
    }

    let mut count = 0;
    for snap in &snaps {
        let text = std::fs::read_to_string(snap).expect("a readable golden");
        assert!(
            !text.contains("// not lowered"),
            "{}: a program that did not lower",
            snap.display()
        );
        let body = snapshot_body(&text);
        let programs = programs(body);
        assert_eq!(
            programs.is_empty(),
            body.trim().is_empty(),
            "{}: no program found",
            snap.display()
        );
        for program in programs {
            let name = program.lines().next().unwrap_or_default();
            let p = read_program(&program)
                .unwrap_or_else(|e| panic!("{} ({name}): {e}", snap.display()));
            if let Err(e) = verify(&p) {
                panic!(
                    "{} ({name}): the program read does not verify: {e}",
                    snap.display()
                );
            }
            let again = print_program(&p);
            assert_eq!(again, program, "{} ({name})", snap.display());
            // Compared by their debug text: a NaN constant (a sort's
            // padding) is not equal to itself.
            let read_again = read_program(&again).map(|q| format!("{q:?}"));
            assert_eq!(read_again, Ok(format!("{p:?}")), "{name}");
            count += 1;
        }
    }
    assert!(count > 0, "no programs in the goldens");
}

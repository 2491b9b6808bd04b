//! PTX filetests: each `tests/filetests/*.tile` file is Tile IR text (see
//! the README there) that is read, verified, lowered to PTX for the
//! architecture and dimension bindings its header names, and compared with
//! the golden `tests/snapshots/<file stem>.snap`. A kernel that does not
//! lower gives a golden holding the error instead. Refresh the goldens with
//! `INSTA_UPDATE=always cargo test -p tessera-ptx --test filetests` (or
//! `cargo insta review`) and review the diff.

use std::path::{Path, PathBuf};
use tessera_core::{Arch, Bindings};
use tessera_tile::{read_program, verify::verify};

/// What a filetest's header asks for.
struct Header {
    arch: &'static Arch,
    bindings: Bindings,
}

/// Reads the `// arch: NAME` and `// bind: NAME = VALUE, ...` lines among
/// the comment lines at the top of a filetest; other comments are free
/// text. The architecture defaults to sm_90.
fn header(path: &Path, text: &str) -> Header {
    let mut h = Header {
        arch: &Arch::SM_90,
        bindings: Bindings::new(),
    };
    for (i, line) in text.lines().enumerate() {
        let Some(comment) = line.trim_start().strip_prefix("//") else {
            break;
        };
        let at = || format!("{}:{}", path.display(), i + 1);
        let comment = comment.trim();
        if let Some(name) = comment.strip_prefix("arch:") {
            let name = name.trim();
            h.arch = Arch::from_name(name)
                .unwrap_or_else(|| panic!("{}: unknown architecture `{name}`", at()));
        } else if let Some(list) = comment.strip_prefix("bind:") {
            for pair in list.split(',') {
                let parsed = pair
                    .split_once('=')
                    .and_then(|(n, v)| Some((n.trim(), v.trim().parse::<i64>().ok()?)));
                let Some((name, value)) = parsed else {
                    panic!("{}: expected `NAME = VALUE`, found `{}`", at(), pair.trim());
                };
                h.bindings.insert(name.to_owned(), value);
            }
        }
    }
    h
}

/// The PTX of a filetest, or the lowering error.
fn run(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("a readable filetest");
    let h = header(path, &text);
    let program = read_program(&text)
        .unwrap_or_else(|e| panic!("{}:{}:{}: {}", path.display(), e.line, e.column, e.message));
    if let Err(e) = verify(&program) {
        panic!("{}: the Tile IR does not verify: {e}", path.display());
    }
    match tessera_ptx::emit_ptx(&program, h.arch, &h.bindings) {
        Ok(ptx) => ptx,
        Err(e) => format!("// error: kernel {}: {}\n", e.kernel, e.message),
    }
}

#[test]
fn filetests() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/filetests");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("the filetests directory")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "tile"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no .tile files in {}", dir.display());
    for path in files {
        let stem = path
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let output = run(&path);
        let mut settings = insta::Settings::clone_current();
        settings.set_snapshot_path(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots"));
        settings.set_prepend_module_to_snapshot(false);
        settings.set_input_file(&path);
        settings.bind(|| insta::assert_snapshot!(stem, output));
    }
}

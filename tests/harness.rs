//! The directory-driven test harness: every `.tsr` file under `tests/parse`
//! and `tests/check` is compiled, and its AST or diagnostics are compared
//! against an insta snapshot beside the harness. Files under `ok/` must
//! produce no error; files under `err/` must produce at least one.

use std::path::{Path, PathBuf};
use tessera_driver::syntax::printer::print_file;
use tessera_driver::{diagnostics::codes, Stage};
use tessera_tests::{rendered, run};

fn cases(dir: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut out: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "tsr"))
        .collect();
    out.sort();
    out
}

fn name_of(path: &Path) -> String {
    path.file_stem().unwrap().to_string_lossy().into_owned()
}

fn run_dir(dir: &str, stage: Stage, expect_errors: bool) {
    let files = cases(dir);
    assert!(!files.is_empty(), "no cases in {dir}");
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let display = format!("{dir}/{}.tsr", name_of(&path));
        let c = run(&display, &text, stage);
        assert_eq!(
            c.has_errors(),
            expect_errors,
            "{display}:\n{}",
            rendered(&c)
        );
        let snapshot = if expect_errors || stage == Stage::Check {
            format!("{text}\n---\n{}", rendered(&c))
        } else {
            print_file(&c.files[0].1)
        };
        let mut settings = insta::Settings::clone_current();
        settings.set_snapshot_path(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("snapshots")
                .join(dir),
        );
        settings.set_prepend_module_to_snapshot(false);
        settings.set_snapshot_suffix("");
        settings.bind(|| insta::assert_snapshot!(name_of(&path), snapshot));
    }
}

#[test]
fn parse_ok() {
    run_dir("parse/ok", Stage::Parse, false);
}

#[test]
fn parse_err() {
    run_dir("parse/err", Stage::Parse, true);
}

#[test]
fn check_ok() {
    run_dir("check/ok", Stage::Check, false);
}

#[test]
fn check_err() {
    run_dir("check/err", Stage::Check, true);
}

/// Programs that compile but fail when `fn main` runs on the CPU backend.
#[test]
fn run_err() {
    for path in cases("run/err") {
        let text = std::fs::read_to_string(&path).unwrap();
        let display = format!("run/err/{}.tsr", name_of(&path));
        let mut c = run(&display, &text, Stage::Check);
        assert!(
            !c.has_errors(),
            "{display} must check clean:\n{}",
            rendered(&c)
        );
        let printed = tessera_tests::run_main(&mut c);
        assert!(c.has_errors(), "{display} ran without errors");
        let mut settings = insta::Settings::clone_current();
        settings.set_snapshot_path(Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots/run/err"));
        settings.set_prepend_module_to_snapshot(false);
        settings.bind(|| {
            insta::assert_snapshot!(
                name_of(&path),
                format!(
                    "{text}\n--- stdout\n{printed}--- diagnostics\n{}",
                    rendered(&c)
                )
            )
        });
    }
}

/// Programs whose `fn main` runs clean: compiled host code and the
/// interpreter print the same (checked by `run_main`), and the output and
/// the Host IR are goldens.
#[test]
fn run_ok() {
    for path in cases("run/ok") {
        let text = std::fs::read_to_string(&path).unwrap();
        let display = format!("run/ok/{}.tsr", name_of(&path));
        let mut c = run(&display, &text, Stage::Check);
        assert!(!c.has_errors(), "{display}:\n{}", rendered(&c));
        let printed = tessera_tests::run_main(&mut c);
        assert!(!c.has_errors(), "{display}:\n{}", rendered(&c));
        let host = c.host_module().expect("it ran");
        let mut settings = insta::Settings::clone_current();
        settings.set_snapshot_path(Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots/run/ok"));
        settings.set_prepend_module_to_snapshot(false);
        settings.bind(|| {
            insta::assert_snapshot!(name_of(&path), format!("{text}\n--- stdout\n{printed}"));
            insta::assert_snapshot!(
                format!("{}.host", name_of(&path)),
                tessera_driver::host::print_module(&host)
            );
        });
    }
}

/// Every example's `fn main` runs on the CPU backend, compiled and
/// interpreted alike; its Host IR is a golden.
#[test]
fn examples_run() {
    for path in tessera_tests::example_files() {
        let text = std::fs::read_to_string(&path).unwrap();
        let display = format!("examples/{}.tsr", name_of(&path));
        let mut c = run(&display, &text, Stage::Check);
        tessera_tests::run_main(&mut c);
        assert!(!c.has_errors(), "{display}:\n{}", rendered(&c));
        let host = c.host_module().expect("it ran");
        let mut settings = insta::Settings::clone_current();
        settings.set_snapshot_path(Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots/host"));
        settings.set_prepend_module_to_snapshot(false);
        settings.bind(|| {
            insta::assert_snapshot!(name_of(&path), tessera_driver::host::print_module(&host))
        });
    }
}

/// Lowers every op to Graph IR, schedules it for sm_90 (the feasibility
/// checks) and lowers it to Tile IR.
fn lower(c: &mut tessera_driver::Compilation) {
    let arch = tessera_core::Arch::from_name("sm_90").expect("known");
    let scheduled = c.op_schedules(arch);
    c.op_tiles(arch, &scheduled);
    if !c.has_errors() {
        c.ptx(arch, &tessera_driver::schedule::Bindings::new());
    }
}

/// Programs that check but cannot be lowered to Graph IR, or whose kernels
/// cannot run (Schedule IR feasibility).
#[test]
fn graph_err() {
    for path in cases("graph/err") {
        let text = std::fs::read_to_string(&path).unwrap();
        let display = format!("graph/err/{}.tsr", name_of(&path));
        let mut c = run(&display, &text, Stage::Check);
        assert!(
            !c.has_errors(),
            "{display} must check clean:\n{}",
            rendered(&c)
        );
        lower(&mut c);
        assert!(c.has_errors(), "{display} lowered without errors");
        let mut settings = insta::Settings::clone_current();
        settings
            .set_snapshot_path(Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots/graph/err"));
        settings.set_prepend_module_to_snapshot(false);
        settings.bind(|| {
            insta::assert_snapshot!(name_of(&path), format!("{text}\n---\n{}", rendered(&c)))
        });
    }
}

/// Every example checks clean (the stdlib is part of every compilation, so
/// any problem in it shows here too), and its AST is a golden.
#[test]
fn examples_check_clean() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for dir in ["examples"] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(root.join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        for path in files
            .iter()
            .filter(|p| p.extension().is_some_and(|x| x == "tsr"))
        {
            let text = std::fs::read_to_string(path).unwrap();
            let display = format!("{dir}/{}.tsr", name_of(path));
            let c = run(&display, &text, Stage::Check);
            assert!(
                c.diagnostics.as_slice().is_empty(),
                "{display}:\n{}",
                rendered(&c)
            );
            if dir == "examples" {
                let mut settings = insta::Settings::clone_current();
                settings
                    .set_snapshot_path(Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots/ast"));
                settings.set_prepend_module_to_snapshot(false);
                settings.bind(|| insta::assert_snapshot!(name_of(path), print_file(&c.files[0].1)));
            }
        }
    }
}

/// Each error code has at least one `err` case that produces it.
#[test]
fn err_cases_cover_codes() {
    let mut seen = std::collections::BTreeSet::new();
    for dir in ["parse/err", "check/err", "graph/err", "run/err"] {
        for path in cases(dir) {
            let text = std::fs::read_to_string(&path).unwrap();
            let stage = if dir.starts_with("parse") {
                Stage::Parse
            } else {
                Stage::Check
            };
            let mut c = run("case.tsr", &text, stage);
            if dir.starts_with("graph") {
                lower(&mut c);
            }
            if dir.starts_with("run") {
                tessera_tests::run_main(&mut c);
            }
            for d in c.diagnostics.as_slice() {
                seen.insert(d.code.0);
            }
        }
    }
    // Codes that a UTF-8 test file cannot produce: E0001 (invalid UTF-8,
    // tested in `bad_input_never_panics`) and E0009 (a 256 MiB input).
    let missing: Vec<&str> = codes::ALL
        .iter()
        .map(|i| i.code.0)
        .filter(|c| !seen.contains(c) && *c != "E0001" && *c != "E0009")
        .collect();
    let allowed_missing =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("uncovered-codes.txt"))
            .unwrap_or_default();
    let allowed: Vec<&str> = allowed_missing
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let unexpected: Vec<&&str> = missing.iter().filter(|c| !allowed.contains(c)).collect();
    assert!(
        unexpected.is_empty(),
        "codes without an err case: {unexpected:?}"
    );
    let stale: Vec<&&str> = allowed.iter().filter(|c| seen.contains(*c)).collect();
    assert!(
        stale.is_empty(),
        "covered codes still listed in uncovered-codes.txt: {stale:?}"
    );
}

/// Hostile inputs produce diagnostics, never panics or hangs.
#[test]
fn bad_input_never_panics() {
    let mut inputs: Vec<Vec<u8>> = vec![
        b"op f() { return ".to_vec(),
        vec![0xff, 0xfe, 0x00, 0x80],
        "(".repeat(100_000).into_bytes(),
        "[".repeat(100_000).into_bytes(),
        format!(
            "op f(x: tensor<N, fp32>) -> tensor<N, fp32> {{ return x{}; }}",
            " + x".repeat(100_000)
        )
        .into_bytes(),
        format!(
            "op f(x: fp32) -> fp32 {{ return {}x; }}",
            "-".repeat(100_000)
        )
        .into_bytes(),
        format!("op {}() {{}}", "a".repeat(1 << 20)).into_bytes(),
        b"op f(x: tensor<99999999999999999999999, fp32>) -> fp32 { return 1e999; }".to_vec(),
        b"fn main() { let x = zeros<fp32>([1000000000, 1000000000, 1000000000]); }".to_vec(),
        b"op f(x: tensor<4294967296, 4294967296, fp32>) -> fp32 { return sum(x, axis = 0); }"
            .to_vec(),
        b"/* unterminated".to_vec(),
        b"\"unterminated".to_vec(),
    ];
    let mut seed: u64 = 0x9e3779b97f4a7c15;
    for _ in 0..20 {
        let bytes: Vec<u8> = (0..4096)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed as u8
            })
            .collect();
        inputs.push(bytes);
    }
    for bytes in inputs {
        let utf8 = std::str::from_utf8(&bytes).is_ok();
        let c = tessera_driver::compile(&[("bad.tsr".to_owned(), bytes)], Stage::Check);
        assert!(c.has_errors());
        let first = &c.diagnostics.as_slice()[0];
        assert_eq!(first.code == codes::E0001, !utf8, "{}", rendered(&c));
        let _ = rendered(&c);
    }
}

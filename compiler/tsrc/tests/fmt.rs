//! `tsrc fmt` from the outside: `--check` exit codes and messages, in-place
//! rewriting, and syntax errors, on temporary files.

use std::path::PathBuf;
use std::process::{Command, Output};

const FORMATTED: &str = "op f(x: tensor<N, fp32>) -> tensor<N, fp32> {\n    return x * 2.0;\n}\n";
const MESSY: &str = "op f(x:tensor<N,fp32>)->tensor<N,fp32>{return x*2.0;}";

/// A fresh directory for one test.
fn temp_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tsrc-fmt-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn tsrc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tsrc"))
        .args(["--color", "never"])
        .args(args)
        .output()
        .expect("tsrc runs")
}

#[test]
fn check_passes_on_formatted_files() {
    let dir = temp_dir("check-ok");
    let file = dir.join("ok.tsr");
    std::fs::write(&file, FORMATTED).unwrap();
    let out = tsrc(&["fmt", "--check", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
}

#[test]
fn check_lists_unformatted_files_and_rewrites_nothing() {
    let dir = temp_dir("check-messy");
    let ok = dir.join("ok.tsr");
    let messy = dir.join("messy.tsr");
    std::fs::write(&ok, FORMATTED).unwrap();
    std::fs::write(&messy, MESSY).unwrap();
    let out = tsrc(&[
        "fmt",
        ok.to_str().unwrap(),
        "--check",
        messy.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout, format!("would reformat {}\n", messy.display()));
    assert_eq!(std::fs::read_to_string(&messy).unwrap(), MESSY);
}

#[test]
fn fmt_rewrites_in_place_silently() {
    let dir = temp_dir("rewrite");
    let messy = dir.join("messy.tsr");
    std::fs::write(&messy, MESSY).unwrap();
    let out = tsrc(&["fmt", messy.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(out.stdout.is_empty() && out.stderr.is_empty(), "{out:?}");
    assert_eq!(std::fs::read_to_string(&messy).unwrap(), FORMATTED);
    let leftovers = std::fs::read_dir(&dir).unwrap().count();
    assert_eq!(leftovers, 1, "no temporary file is left behind");
    let again = tsrc(&["fmt", "--check", messy.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(0), "{again:?}");
}

#[test]
fn syntax_errors_are_reported_and_nothing_is_written() {
    let dir = temp_dir("syntax");
    let bad = dir.join("bad.tsr");
    let text = "op f(x: tensor<N, fp32> {\n";
    std::fs::write(&bad, text).unwrap();
    for args in [vec!["fmt"], vec!["fmt", "--check"]] {
        let mut args = args;
        args.push(bad.to_str().unwrap());
        let out = tsrc(&args);
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(stderr.contains("E0010"), "{stderr}");
        assert!(stderr.contains("bad.tsr"), "{stderr}");
        assert_eq!(std::fs::read_to_string(&bad).unwrap(), text);
    }
}

/// The examples and the standard library are kept in the canonical style.
#[test]
fn examples_and_stdlib_are_formatted() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    for dir in ["examples", "stdlib"] {
        for e in std::fs::read_dir(root.join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "tsr") {
                files.push(p);
            }
        }
    }
    files.sort();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_tsrc"))
        .arg("fmt")
        .arg("--check")
        .args(&files)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "run `tsrc fmt` on these:\n{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

//! What `tsrc` does when its standard output is lost: a full disk is an
//! error (exit 1, with a message), a reader that goes away (`| head -1`)
//! ends the command quietly; neither panics.

use std::path::Path;
use std::process::{Command, Stdio};

fn tsrc() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tsrc"))
}

fn example(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
        .display()
        .to_string()
}

/// Runs `args` with standard output on `/dev/full`.
fn to_full_disk(args: &[&str]) -> std::process::Output {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full exists on Linux");
    tsrc().args(args).stdout(full).output().unwrap()
}

#[test]
fn a_full_disk_is_an_error() {
    if !Path::new("/dev/full").exists() {
        eprintln!("note: no /dev/full here: skipping");
        return;
    }
    let vec_add = example("vec_add.tsr");
    for args in [
        vec!["explain", "E0201"],
        vec!["explain"],
        vec!["build", &vec_add, "--emit", "ptx"],
        vec!["run", &vec_add],
    ] {
        let o = to_full_disk(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("cannot write to standard output"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("internal compiler error"), "{args:?}: {err}");
    }
}

#[test]
fn a_closed_pipe_ends_quietly() {
    // The reader hangs up before tsrc writes (`tsrc explain | head -0`);
    // the PTX is more than a pipe holds, so its writes meet the closed
    // pipe too.
    let mlp = example("mlp.tsr");
    for args in [vec!["explain"], vec!["build", &mlp, "--emit", "ptx"]] {
        let mut child = tsrc()
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {err}");
        assert!(err.is_empty(), "{args:?}: {err}");
    }
}

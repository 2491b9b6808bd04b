//! Checks the VS Code extension in `editors/vscode` by running its
//! `check.sh`: the TextMate grammar's tests, its cross-check against the
//! lexer and the schedule checker, the client's test and packaging of the
//! `.vsix`. The script installs the npm dependencies on its first run and
//! reuses them afterwards; without node and npm it succeeds with a note.

use std::path::Path;
use std::process::Command;

#[test]
fn vscode_extension_checks_pass() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lives inside the repository");
    let output = Command::new("bash")
        .arg("editors/vscode/check.sh")
        .current_dir(root)
        .output()
        .expect("bash runs editors/vscode/check.sh");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // Shown with --nocapture, and by the harness when the test fails.
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(
        output.status.success(),
        "editors/vscode/check.sh failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        output.status
    );
}

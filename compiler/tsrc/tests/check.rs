//! `tsrc check` finds what `tsrc build` would: the schedule feasibility
//! checks (registers per thread) run at check time too, while an op that
//! only builds at concrete shapes is not an error yet.

use std::path::Path;
use std::process::Command;

fn check(file: &str) -> (Option<i32>, String) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(file);
    let o = Command::new(env!("CARGO_BIN_EXE_tsrc"))
        .arg("check")
        .arg(path)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn check_runs_the_schedule_checks_build_runs() {
    let (code, err) = check("tests/graph/err/E0310_registers.tsr");
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("E0310"), "{err}");
    // Lowering errors stay build-time: this op needs concrete shapes.
    let (code, err) = check("tests/graph/err/E0700_dynamic.tsr");
    assert_eq!(code, Some(0), "{err}");
    for example in [
        "examples/flash_attn.tsr",
        "examples/matmul.tsr",
        "examples/mlp.tsr",
    ] {
        let (code, err) = check(example);
        assert_eq!(code, Some(0), "{example}: {err}");
    }
}

//! Running out of memory is an error that says so and names what was being
//! done (exit 1), not an abort (exit 134) or an internal compiler error.

use std::process::Command;

#[test]
fn out_of_memory_is_an_error() {
    if Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 1")
        .status()
        .is_err()
    {
        eprintln!("note: no sh with ulimit here: skipping");
        return;
    }
    let dir = std::env::temp_dir().join(format!("tessera-oom-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("big.tsr");
    // 40 GB of zeros: within the language's size limit, beyond this
    // process's address space below.
    std::fs::write(
        &src,
        "fn main() {\n    let x = zeros<fp32>([100000, 100000]);\n    print(x[0, 0:2]);\n}\n",
    )
    .unwrap();
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v 4000000 && exec '{}' run '{}' --backend cpu",
            env!("CARGO_BIN_EXE_tsrc"),
            src.display()
        ))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("out of memory"), "{err}");
    assert!(err.contains("big.tsr"), "{err}");
    assert!(!err.contains("internal compiler error"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

//! Every `--emit` form accepts what `tsrc check` accepts: each example and
//! each input under `tests/run/ok` and `tests/check/ok`, in every form,
//! exits 0 with some text; what a form cannot show is a `//` comment
//! saying why (a generic op nothing calls, a file without ops or without
//! host code), and an op or kernel that lowers only at concrete sizes is
//! shown at the sizes `--dim` binds.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const FORMS: [&str; 7] = ["ast", "graph", "schedule", "tile", "ptx", "target", "host"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn emit(file: &Path, form: &str, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tsrc"))
        .arg("build")
        .arg(file)
        .args(["--emit", form])
        .args(extra)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The `.tsr` files of `dir` (relative to the repository), sorted.
fn inputs(dir: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "tsr"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_ok_input_in_every_form() {
    let mut files = inputs("examples");
    files.extend(inputs("tests/run/ok"));
    files.extend(inputs("tests/check/ok"));
    assert!(files.len() >= 20, "{files:?}");
    let mut failures = Vec::new();
    for file in &files {
        for form in FORMS {
            let o = emit(file, form, &[]);
            let (out, err) = (text(&o.stdout), text(&o.stderr));
            if o.status.code() != Some(0) || out.trim().is_empty() || err.contains("Error") {
                failures.push(format!(
                    "{} --emit {form}: exit {:?}\n{err}",
                    file.display(),
                    o.status.code()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn what_cannot_be_shown_is_a_comment() {
    let ok = |name: &str| root().join("tests/check/ok").join(name);
    let shows = |file: &Path, form: &str, extra: &[&str], wants: &[&str]| {
        let o = emit(file, form, extra);
        let out = text(&o.stdout);
        assert!(o.status.success(), "{form}: {}", text(&o.stderr));
        for want in wants {
            assert!(
                out.contains(want),
                "{} --emit {form}: {out}",
                file.display()
            );
        }
    };
    let generic = ok("emit_generic_only.tsr");
    for form in ["graph", "schedule", "tile", "ptx"] {
        shows(
            &generic,
            form,
            &[],
            &["// `sigmoid` is not shown: it is generic"],
        );
    }
    shows(&generic, "host", &[], &["// no host code"]);
    let host = ok("emit_host_only.tsr");
    shows(&host, "graph", &[], &["// no ops or kernels in this file"]);
    shows(
        &host,
        "host",
        &[],
        &["// no `fn main`", "host fn square(", "host fn report("],
    );
    let kernels = ok("emit_kernels_only.tsr");
    shows(
        &kernels,
        "graph",
        &[],
        &["kernel_out %", "{S = 0.5, NEG = false, B = 256}"],
    );
    shows(
        &kernels,
        "tile",
        &[],
        &["out s: fp32[N], out d: fp32[N]", "output result1: fp32[N]"],
    );
    let concrete = ok("emit_concrete_only.tsr");
    shows(
        &concrete,
        "graph",
        &[],
        &[
            "// `tail_sum` is shown at N = 128, M = 128",
            "a slice of a symbolic dimension needs an end",
            "graph tail_sum(x: tensor<128, 128, fp32>)",
            "graph affine(x: tensor<N, fp32>)",
        ],
    );
    // A branch on a size is a run-time `if` at symbolic sizes (it lowered
    // only at concrete ones before kernels branched at run time).
    shows(
        &concrete,
        "tile",
        &["--dim", "N=32"],
        &[
            "kernel k0_double_long(in a: fp32[N], out c: fp32[N])",
            "    if %",
            "    } else {",
        ],
    );
    // The op called from fn main is specialised on that call, attributes
    // it leaves out on their defaults.
    shows(
        &concrete,
        "ptx",
        &[],
        &[".entry affine_k0_elementwise", ".entry tail_sum_k0_row"],
    );
}

/// What no sizes make lowerable is still an error, in every form that
/// lowers it.
#[test]
fn what_cannot_be_lowered_at_all_is_still_an_error() {
    let huge = root().join("tests/graph/err/E0700_huge_tile.tsr");
    for form in ["tile", "ptx"] {
        let o = emit(&huge, form, &[]);
        assert_eq!(o.status.code(), Some(1), "{form}");
        assert!(text(&o.stderr).contains("E0700"), "{form}");
    }
}

/// `--emit schedule` says which tensor-core instructions a kernel takes:
/// warpgroup MMA on sm_90a where the tile fits it (whole warpgroups, 16
/// rows per warp), `mma.sync` elsewhere and otherwise.
#[test]
fn the_schedule_names_the_tensor_core_path() {
    let matmul = root().join("examples/matmul.tsr");
    let on = |arch: &str| text(&emit(&matmul, "schedule", &["--arch", arch]).stdout);
    assert!(
        on("sm_90a").contains("tensor_cores = wgmma"),
        "{}",
        on("sm_90a")
    );
    assert!(
        on("sm_90").contains("tensor_cores = mma.sync"),
        "{}",
        on("sm_90")
    );
    // 4 warps over 128 rows: 32 rows a warp, which wgmma cannot take.
    let dir = std::env::temp_dir().join(format!("tessera-emit-path-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("m.tsr");
    std::fs::write(
        &file,
        "op gemm(a: tensor<M, K, bf16>, b: tensor<K, N, bf16>) -> tensor<M, N, bf16> {\n\
         \treturn a @ b;\n}\n\
         schedule gemm on sm_90a {\n\ttile(bm = 128, bn = 128, bk = 64);\n\twarps(4);\n}\n",
    )
    .unwrap();
    let s = text(&emit(&file, "schedule", &["--arch", "sm_90a"]).stdout);
    assert!(s.contains("tensor_cores = mma.sync"), "{s}");
    let ptx = text(&emit(&file, "ptx", &["--arch", "sm_90a"]).stdout);
    assert!(ptx.contains("mma.sync") && !ptx.contains("wgmma"), "{ptx}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// An `inout` argument is copied into the kernel's output only where the
/// caller still needs it: of three chained updates, the first copies the
/// op's parameters and the others update the intermediates in place.
#[test]
fn inout_intermediates_are_updated_in_place() {
    let file = root().join("tests/run/ok/kernel_inout.tsr");
    let tile = text(&emit(&file, "tile", &["--dim", "N=10"]).stdout);
    let program = tile
        .split("program three_steps {")
        .nth(1)
        .and_then(|p| p.split("\n}").next())
        .unwrap_or_else(|| panic!("no program three_steps:\n{tile}"));
    let sources: Vec<&str> = (program.lines())
        .filter_map(|l| l.trim().strip_prefix("copy "))
        .map(|c| c.split(" -> ").next().unwrap_or(""))
        .collect();
    assert_eq!(sources, ["w", "v"], "{program}");
    assert_eq!(program.matches("launch k").count(), 4, "{program}");
}

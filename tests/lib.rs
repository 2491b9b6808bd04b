//! Helpers shared by the test harness: running the pipeline on a test file
//! and rendering its outcome as snapshot text.

use tessera_driver::diagnostics::{render_all, RenderOptions};
use tessera_driver::{compile_text, Compilation, Stage};

/// The diagnostics of a compilation, rendered without colour.
pub fn rendered(c: &Compilation) -> String {
    render_all(
        &c.sources,
        c.diagnostics.as_slice(),
        RenderOptions {
            color: false,
            ascii: true,
        },
    )
}

/// Compiles `text` as a file named `name`.
pub fn run(name: &str, text: &str, stage: Stage) -> Compilation {
    compile_text(name, text, stage)
}

/// Runs `fn main` on the CPU backend, compiled with Cranelift as `tsrc run`
/// does, and also with the AST interpreter; panics unless both print the
/// same and fail with the same diagnostic. Returns what it printed; a
/// runtime error is added to the compilation's diagnostics.
pub fn run_main(c: &mut Compilation) -> String {
    let host = match c.host_module() {
        Ok(h) => h,
        Err(d) => {
            c.diagnostics.push(*d);
            return String::new();
        }
    };
    let mut out = Vec::new();
    let mut oracle = Vec::new();
    // On a large stack, as `tsrc` runs: the interpreter recurses deeply
    // for deeply nested host calls.
    let (result, expected) = std::thread::scope(|scope| {
        std::thread::Builder::new()
            .stack_size(64 << 20)
            .spawn_scoped(scope, || match c.program() {
                Some(program) => {
                    let result = tessera_exec::run_main(&program, &host, None, &mut out);
                    if result.is_ok() {
                        assert_eq!(
                            tessera_exec::live_handles(),
                            0,
                            "compiled host code leaked tensors"
                        );
                    }
                    (result, tessera_cpu::host::run_main(&program, &mut oracle))
                }
                None => (Ok(()), Ok(())),
            })
            .expect("a thread for the run")
            .join()
            .expect("the run does not panic")
    });
    let printed = String::from_utf8_lossy(&out).into_owned();
    assert_eq!(
        printed,
        String::from_utf8_lossy(&oracle),
        "compiled host code and the interpreter print differently"
    );
    assert_eq!(
        result
            .as_ref()
            .err()
            .map(|d| (d.code, d.primary.span, &d.message)),
        expected
            .as_ref()
            .err()
            .map(|d| (d.code, d.primary.span, &d.message)),
        "compiled host code and the interpreter fail differently"
    );
    if let Err(d) = result {
        c.diagnostics.push(*d);
    }
    printed
}

/// The `.tsr` files of `examples/`, sorted.
pub fn example_files() -> Vec<std::path::PathBuf> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(&root)
        .expect("examples/ exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "tsr"))
        .collect();
    files.sort();
    files
}

/// A tensor argument type: each dim a number or a symbol.
pub fn tensor_arg(
    dims: &[&str],
    dtype: tessera_driver::syntax::ast::Dtype,
) -> tessera_driver::graph::Arg {
    use tessera_driver::sema::{Dim, TensorTy};
    let dims = dims
        .iter()
        .map(|d| d.parse().map_or_else(|_| Dim::sym(d), Dim::known))
        .collect();
    tessera_driver::graph::Arg::Type(tessera_driver::graph::Type::Tensor(TensorTy::new(
        dims, dtype,
    )))
}

/// The stdlib ops instantiated on representative types, for the IR goldens.
pub fn stdlib_cases() -> Vec<(&'static str, Vec<tessera_driver::graph::Arg>)> {
    use tessera_driver::graph::Arg;
    use tessera_driver::syntax::ast::Dtype::*;
    let t = tensor_arg;
    let x = || t(&["R", "C"], Fp32);
    let row = || t(&["C"], Fp32);
    let qkv = || t(&["B", "H", "N", "D"], Bf16);
    vec![
        ("sigmoid", vec![x()]),
        ("relu", vec![x()]),
        ("gelu", vec![x()]),
        ("silu", vec![t(&["R", "C"], Bf16)]),
        ("softmax", vec![x(), Arg::Int(-1)]),
        ("softmax", vec![t(&["B", "N", "C"], Fp32), Arg::Int(1)]),
        ("layernorm", vec![x(), row(), row(), Arg::Float(1e-5)]),
        (
            "rmsnorm",
            vec![t(&["B", "T", "C"], Fp16), t(&["C"], Fp16), Arg::Float(1e-6)],
        ),
        ("attention", vec![qkv(), qkv(), qkv()]),
        (
            "attention",
            vec![
                t(&["N", "64"], Fp32),
                t(&["L", "64"], Fp32),
                t(&["L", "E"], Fp32),
            ],
        ),
        ("logsumexp", vec![x()]),
        ("cross_entropy", vec![x(), t(&["R"], Int32)]),
        (
            "embedding",
            vec![t(&["V", "D"], Bf16), t(&["B", "S"], Int32)],
        ),
        (
            "attention",
            vec![
                qkv(),
                t(&["B", "2", "L", "D"], Bf16),
                t(&["B", "2", "L", "D"], Bf16),
                Arg::Bool(true),
            ],
        ),
    ]
}

/// The arguments to build example op `name` with for its goldens: `None`
/// (its declared, symbolic sizes) when it lowers at them, else every
/// dimension at 64 (an op such as RoPE slices at `D / 2`, which only
/// concrete sizes decide), as `tsrc build --emit` shows it.
pub fn example_args(c: &Compilation, name: &str) -> Option<Vec<tessera_driver::graph::Arg>> {
    let program = c.program()?;
    match tessera_driver::graph::build_op(&program, name, None) {
        Err(d) if d.code.0 == "E0700" => {
            tessera_driver::graph::concrete_args(&program, name, &|_| 64)
        }
        _ => None,
    }
}

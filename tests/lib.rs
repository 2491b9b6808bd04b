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

/// Runs `fn main` on the CPU backend; returns what it printed. A runtime
/// error is added to the compilation's diagnostics.
pub fn run_main(c: &mut Compilation) -> String {
    let mut out = Vec::new();
    let result = match c.program() {
        Some(program) => tessera_cpu::host::run_main(&program, &mut out),
        None => Ok(()),
    };
    if let Err(d) = result {
        c.diagnostics.push(*d);
    }
    String::from_utf8_lossy(&out).into_owned()
}

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

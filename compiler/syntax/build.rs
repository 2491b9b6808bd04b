//! Generates the parser from `grammar/tessera.lalrpop` at the workspace root.

fn main() {
    let manifest = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let grammar_dir = manifest.join("../../grammar");
    println!("cargo:rerun-if-changed={}", grammar_dir.display());
    lalrpop::Configuration::new()
        .set_in_dir(&grammar_dir)
        .set_out_dir(std::env::var("OUT_DIR").unwrap())
        .emit_rerun_directives(true)
        .process()
        .expect("the grammar must build");
}

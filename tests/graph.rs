//! Graph IR goldens: every example's ops and the stdlib's algebraic ops
//! (instantiated on representative types) are built, verified, optimised,
//! verified again, and snapshotted with the rewrite trace.

use std::path::Path;
use tessera_driver::graph::passes::{optimize, Trace};
use tessera_driver::graph::{build_op, print_graph, verify, Arg, Graph, Op};
use tessera_driver::{compile_text, Compilation, Stage};

fn snapshot(name: &str, text: &str) {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots/graph"));
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(|| insta::assert_snapshot!(name, text));
}

fn trace_text(trace: &[Trace]) -> String {
    trace
        .iter()
        .map(|t| {
            format!(
                "// {} {}: {}\n",
                t.rule,
                if t.fired { "fired" } else { "skipped" },
                t.message
            )
        })
        .collect()
}

/// Builds, verifies, optimises and verifies again.
fn lower(c: &Compilation, name: &str, args: Option<&[Arg]>) -> (Graph, Graph, Vec<Trace>) {
    let program = c.program().expect("checked");
    let g = build_op(&program, name, args).unwrap_or_else(|d| panic!("{name}: {d:?}"));
    if let Err(e) = verify(&g) {
        panic!("{name} (as built):\n{}\n{e:#?}", print_graph(&g));
    }
    let (opt, trace) = optimize(&g);
    if let Err(e) = verify(&opt) {
        panic!("{name} (optimised):\n{}\n{e:#?}", print_graph(&opt));
    }
    (g, opt, trace)
}

#[test]
fn examples() {
    for path in tessera_tests::example_files() {
        let text = std::fs::read_to_string(&path).unwrap();
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let c = compile_text(&format!("examples/{stem}.tsr"), &text, Stage::Check);
        assert!(!c.has_errors());
        let mut out = String::new();
        for (_, file) in &c.files {
            for item in &file.items {
                let tessera_driver::syntax::ast::Item::Op(op) = item else {
                    continue;
                };
                if op.body.is_none() {
                    continue;
                }
                let args = tessera_tests::example_args(&c, &op.name.text);
                if args.is_some() {
                    out.push_str(&format!("// `{}` at every dimension 64\n", op.name.text));
                }
                let (_, opt, trace) = lower(&c, &op.name.text, args.as_deref());
                out.push_str(&trace_text(&trace));
                out.push_str(&print_graph(&opt));
            }
        }
        snapshot(&stem, &out);
    }
}

#[test]
fn stdlib_ops() {
    let c = compile_text("empty.tsr", "import std.nn;\n", Stage::Check);
    let cases = tessera_tests::stdlib_cases();
    let mut out = String::new();
    for (name, args) in cases {
        let (_, opt, trace) = lower(&c, name, Some(&args));
        out.push_str(&trace_text(&trace));
        out.push_str(&print_graph(&opt));
        out.push('\n');
    }
    snapshot("stdlib", &out);
}

/// The attention example becomes one attention node and nothing else but
/// its parameters and the scale.
#[test]
fn attention_is_one_node() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/flash_attn.tsr"),
    )
    .unwrap();
    let c = compile_text("flash_attn.tsr", &text, Stage::Check);
    let (raw, opt, trace) = lower(&c, "attention", None);
    assert!(raw.nodes.iter().any(|n| matches!(n.op, Op::MatMul { .. })));
    let heavy: Vec<&Op> = opt
        .nodes
        .iter()
        .map(|n| &n.op)
        .filter(|op| {
            !matches!(
                op,
                Op::Param(_) | Op::Const(_) | Op::DimSize(_) | Op::Unary(_)
            )
        })
        .collect();
    assert!(
        matches!(heavy.as_slice(), [Op::Attention { .. }]),
        "{}",
        print_graph(&opt)
    );
    assert!(trace.iter().any(|t| t.rule == "attention" && t.fired));
}

/// When the score matrix is used elsewhere, the rewrite must not fire, and
/// the trace says why. (The repeated `p @ v` is merged by CSE first.)
#[test]
fn attention_does_not_fire_when_scores_escape() {
    let src = "import std.nn;\n\
        op twice(q: tensor<N, D, fp32>, k: tensor<N, D, fp32>, v: tensor<N, D, fp32>) -> tensor<N, D, fp32> {\n\
            let s = q @ k.T;\n\
            let p = softmax(s, axis = -1);\n\
            return p @ v + sum(s, axis = -1, keepdims = true) + p @ v;\n\
        }\n";
    let c = compile_text("t.tsr", src, Stage::Check);
    assert!(!c.has_errors());
    let (_, opt, trace) = lower(&c, "twice", None);
    assert!(!opt
        .nodes
        .iter()
        .any(|n| matches!(n.op, Op::Attention { .. })));
    assert!(
        trace.iter().any(|t| t.rule == "attention" && !t.fired),
        "{}",
        trace_text(&trace)
    );
    assert!(trace.iter().any(|t| t.rule == "cse" && t.fired));
}

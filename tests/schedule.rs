//! Schedule IR and Tile IR goldens: every example's ops and the stdlib's ops
//! are scheduled for sm_90, verified, lowered to Tile IR, verified again and
//! snapshotted; plus the structural promises (attention is one kernel,
//! epilogues and row math fuse) and the feasibility checks.

use std::path::Path;
use tessera_driver::graph::{Arg, Graph};
use tessera_driver::schedule::{print::print_schedule, KernelKind, Scheduled};
use tessera_driver::tile::print::print_program;
use tessera_driver::{compile_text, Compilation, Entry, Pipeline, Stage};

fn snapshot(dir: &str, name: &str, text: &str) {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("snapshots")
            .join(dir),
    );
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(|| insta::assert_snapshot!(name, text));
}

/// Schedules and lowers op `name` through the driver's pipeline, every IR
/// verified after every stage.
fn lower(
    c: &Compilation,
    name: &str,
    args: Option<&[Arg]>,
    arch: &str,
) -> (Graph, Scheduled, String) {
    let program = c.program().expect("checked");
    let arch = tessera_core::Arch::from_name(arch).expect("known arch");
    let mut pipeline = Pipeline::new(&program, arch).verifying(true);
    let (g, _) = pipeline
        .graph(Entry::Op(name, args))
        .unwrap_or_else(|d| panic!("{name}: {d:?}"));
    let s = pipeline
        .schedule(&g)
        .unwrap_or_else(|d| panic!("{name}: {}", d.message));
    let tile_text = match pipeline.tile(&g, &s) {
        Ok(p) => print_program(&p),
        Err(d) if d.message.starts_with("internal error") => panic!("{name}: {}", d.message),
        Err(d) => format!("// not lowered: {}\n", d.message),
    };
    (g, s, tile_text)
}

fn schedule_text(g: &Graph, s: &Scheduled) -> String {
    let mut out: String = s.trace.iter().map(|t| format!("// {t}\n")).collect();
    for d in &s.diagnostics {
        out.push_str(&format!("// {}: {}\n", d.code, d.message));
    }
    out.push_str(&print_schedule(g, &s.schedule));
    out
}

#[test]
fn examples() {
    for path in tessera_tests::example_files() {
        let text = std::fs::read_to_string(&path).unwrap();
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let c = compile_text(&format!("examples/{stem}.tsr"), &text, Stage::Check);
        assert!(!c.has_errors());
        let (mut sched, mut tiles) = (String::new(), String::new());
        for (_, file) in &c.files {
            for item in &file.items {
                let tessera_driver::syntax::ast::Item::Op(op) = item else {
                    continue;
                };
                if op.body.is_none() {
                    continue;
                }
                let args = tessera_tests::example_args(&c, &op.name.text);
                let (g, s, t) = lower(&c, &op.name.text, args.as_deref(), "sm_90");
                sched.push_str(&schedule_text(&g, &s));
                tiles.push_str(&t);
            }
        }
        snapshot("schedule", &stem, &sched);
        snapshot("tile", &stem, &tiles);
    }
}

#[test]
fn stdlib_ops() {
    let c = compile_text("empty.tsr", "import std.nn;\n", Stage::Check);
    let cases = tessera_tests::stdlib_cases();
    let (mut sched, mut tiles) = (String::new(), String::new());
    for (name, args) in cases {
        let (g, s, tx) = lower(&c, name, Some(&args), "sm_90");
        sched.push_str(&schedule_text(&g, &s));
        sched.push('\n');
        tiles.push_str(&tx);
        tiles.push('\n');
    }
    snapshot("schedule", "stdlib", &sched);
    snapshot("tile", "stdlib", &tiles);
}

fn example(name: &str) -> Compilation {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../examples/{name}.tsr")),
    )
    .unwrap();
    compile_text(&format!("{name}.tsr"), &text, Stage::Check)
}

/// The attention example is one fused kernel: FlashAttention, nothing else.
#[test]
fn attention_is_one_kernel() {
    let c = example("flash_attn");
    let (_, s, _) = lower(&c, "attention", None, "sm_90");
    let kinds: Vec<&KernelKind> = s.schedule.kernels.iter().map(|k| &k.kind).collect();
    assert_eq!(kinds, [&KernelKind::Attention]);
    assert_eq!(s.schedule.steps.len(), 1);
}

/// An MLP is two kernels: bias and GELU run in the first matmul's epilogue,
/// the second bias in the second's.
#[test]
fn mlp_fuses_epilogues() {
    let c = example("mlp");
    let (_, s, _) = lower(&c, "mlp", None, "sm_90");
    let kinds: Vec<&KernelKind> = s.schedule.kernels.iter().map(|k| &k.kind).collect();
    assert_eq!(kinds, [&KernelKind::MatMul, &KernelKind::MatMul]);
    assert!(s.schedule.kernels[0].nodes.len() > 3, "bias and gelu fused");
}

/// Softmax and layernorm are single row kernels.
#[test]
fn row_ops_are_one_kernel() {
    for (file, op) in [("softmax", "softmax_rows"), ("layernorm", "layer_norm")] {
        let c = example(file);
        let (_, s, _) = lower(&c, op, None, "sm_90");
        assert_eq!(s.schedule.kernels.len(), 1, "{op}");
        assert!(matches!(
            s.schedule.kernels[0].kind,
            KernelKind::Row { axis: 1 }
        ));
    }
}

/// The default GEMM tile with three stages does not fit sm_75's 64 KiB of
/// shared memory: E0304, with a concrete fix.
#[test]
fn shared_memory_feasibility() {
    let src = "op g(a: tensor<M, K, bf16>, b: tensor<K, N, bf16>) -> tensor<M, N, bf16> { return a @ b; }\n";
    let c = compile_text("g.tsr", src, Stage::Check);
    let (_, s, _) = lower(&c, "g", None, "sm_75");
    let d = s
        .diagnostics
        .iter()
        .find(|d| d.code.0 == "E0304")
        .expect("E0304");
    let help = d.help.join(" ");
    assert!(help.contains("pipeline_stages(2)"), "{help}");
    let (_, ok, _) = lower(&c, "g", None, "sm_90");
    assert!(ok.diagnostics.iter().all(|d| d.code.0 != "E0304"));
}

/// The argsort kernels by line length: short lines several to a bitonic
/// network, a line that fits (16384 on sm_90) one network, a longer line
/// segments of 4096 and a merge; that line of 16384 on sm_86 (whose 99 KiB
/// hold 8192) and a line of a symbolic extent ranked in chunks. Goldens of
/// the schedules and their Tile IR.
#[test]
fn sort_kernels() {
    let c = compile_text(
        "sort.tsr",
        "op short(x: tensor<64, 100, fp32>) -> tensor<64, 100, int32> { return argsort(x); }
         op whole(x: tensor<2, 16384, bf16>) -> tensor<2, 16384, int32> { return argsort(x, descending = true); }
         op long(x: tensor<4, 32000, fp32>) -> tensor<4, 32000, int32> { return argsort(x); }
         op symbolic(x: tensor<R, N, int64>) -> tensor<R, N, int32> { return argsort(x, axis = 0); }",
        Stage::Check,
    );
    let (mut sched, mut tiles) = (String::new(), String::new());
    for (op, arch) in [
        ("short", "sm_90"),
        ("whole", "sm_90"),
        ("long", "sm_90"),
        ("whole", "sm_86"),
        ("symbolic", "sm_90"),
    ] {
        let (g, s, t) = lower(&c, op, None, arch);
        let kinds: Vec<&str> = s.schedule.kernels.iter().map(|k| k.name.as_str()).collect();
        match op {
            "long" => assert_eq!(kinds, ["k0_argsort", "k1_merge"], "{op}"),
            _ => assert_eq!(kinds, ["k0_argsort"], "{op} on {arch}"),
        }
        let ranked = op == "symbolic" || arch == "sm_86";
        assert_eq!(t.contains(" sort "), !ranked, "{op} on {arch}: a network");
        sched.push_str(&format!("// {op} on {arch}\n{}\n", schedule_text(&g, &s)));
        tiles.push_str(&format!("{t}\n"));
    }
    snapshot("schedule", "sort", &sched);
    snapshot("tile", "sort", &tiles);
}

/// A depthwise convolution is summed directly (an elementwise program),
/// unless a `schedule` configures its op: its knobs are the implicit
/// GEMM's, and that path is kept (the tile it names is the kernel's).
#[test]
fn depthwise_convolutions_are_direct_unless_scheduled() {
    let c = compile_text(
        "conv.tsr",
        "import std.nn;
         op dw(x: tensor<2, 64, 28, 28, fp32>, w: tensor<64, 1, 3, 3, fp32>) { return conv2d(x, w, padding = 1, groups = 64); }
         op tiled(x: tensor<2, 64, 28, 28, fp32>, w: tensor<64, 1, 3, 3, fp32>) { return conv2d(x, w, padding = 1, groups = 64); }
         schedule tiled { tile(bm = 64, bn = 16, bk = 16); warps(4); }",
        Stage::Check,
    );
    let (_, s, _) = lower(&c, "dw", None, "sm_90");
    let names: Vec<&str> = s.schedule.kernels.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names, ["k0_conv2d_direct"]);
    assert_eq!(s.schedule.kernels[0].kind, KernelKind::Elementwise);
    let (_, s, _) = lower(&c, "tiled", None, "sm_90");
    let k = &s.schedule.kernels[0];
    assert_eq!(k.kind, KernelKind::Conv2d);
    assert!(
        matches!(k.config.tile, tessera_driver::schedule::Tile::Gemm(t) if (t.bm, t.bn) == (64, 16)),
        "{:?}",
        k.config.tile
    );
}

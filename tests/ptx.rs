//! The NVIDIA backend without a GPU: every example compiles to one PTX
//! module for sm_80, sm_90 and sm_90a that ptxas accepts with no spills
//! (when ptxas is installed: `.ci/install-cuda-tools.sh`), and the PTX of
//! every example as a golden (sm_90; the warpgroup kernels at sm_90a too).

use tessera_core::{Arch, Bindings};
use tessera_cuda::ptxas::{assemble, find_ptxas};
use tessera_driver::{compile_text, Stage};
use tessera_tests::example_files;

/// The PTX of an example for `arch_name`.
fn ptx_of(path: &std::path::Path, arch_name: &str) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let mut c = compile_text(&name, &text, Stage::Check);
    let ptx = c.ptx(Arch::from_name(arch_name).unwrap(), &Bindings::new());
    ptx.unwrap_or_else(|| panic!("{name}: {:?}", c.diagnostics.as_slice()))
}

/// Whether a kernel's spill is the tolerated kind: at most three words
/// parked across a loop (24 bytes, stores and loads together) and, where
/// cuobjdump can tell, no spill instruction inside any loop. ptxas
/// sometimes keeps an epilogue's coordinates (a lane's output row and
/// column) in local memory across the main loop at a register cap, or
/// parks a value when an epilogue of many independent chains (gelu over a
/// whole tile) is scheduled for parallelism: one store and one load per
/// program, not traffic in the loop.
fn tolerated_spill(cubin: &[u8], name: &str, bytes: u32) -> bool {
    if bytes > 24 {
        return false;
    }
    let Ok(text) = tessera_cuda::sass(cubin) else {
        return true;
    };
    let functions = tessera_cuda::sass::parse(&text);
    let Some(f) = functions.iter().find(|f| f.name == name) else {
        return false;
    };
    let loops = tessera_cuda::sass::loops(f);
    !f.insts.iter().any(|i| {
        matches!(i.base(), "STL" | "LDL") && loops.iter().any(|(h, b)| *h <= i.addr && i.addr <= *b)
    })
}

#[test]
fn every_example_assembles_for_sm_80_sm_90_and_sm_90a_without_spills() {
    let have = find_ptxas().is_some();
    if !have {
        eprintln!(
            "note: ptxas not found (run .ci/install-cuda-tools.sh): checking generation only"
        );
    }
    let mut spills = Vec::new();
    for path in example_files() {
        for a in ["sm_80", "sm_90", "sm_90a"] {
            let ptx = ptx_of(&path, a);
            assert!(ptx.contains(&format!(".target {a}")));
            if !have {
                continue;
            }
            let report = assemble(&ptx, a)
                .unwrap_or_else(|e| panic!("{} for {a}: ptxas rejects it: {e}", path.display()));
            let kernels: Vec<_> = report.kernels().collect();
            assert!(!kernels.is_empty(), "{}: no kernels", path.display());
            for k in kernels {
                eprintln!(
                    "{} {a} {}: {} registers, {} bytes spilled",
                    path.file_name().unwrap().to_string_lossy(),
                    k.name,
                    k.registers,
                    k.spill_stores_bytes + k.spill_loads_bytes
                );
                let spilled = k.spill_stores_bytes + k.spill_loads_bytes;
                if spilled > 0 && !tolerated_spill(&report.cubin, &k.name, spilled) {
                    spills.push(format!(
                        "{} {a} {}: {spilled} bytes",
                        path.display(),
                        k.name
                    ));
                }
            }
        }
    }
    assert!(
        spills.is_empty(),
        "kernels spill registers:\n{}",
        spills.join("\n")
    );
}

#[test]
fn ptx_goldens() {
    for path in example_files() {
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let ptx = ptx_of(&path, "sm_90");
        insta::with_settings!({snapshot_path => "snapshots/ptx", prepend_module_to_snapshot => false}, {
            insta::assert_snapshot!(stem, ptx);
        });
    }
    // The kernels that take warpgroup MMA on Hopper.
    for path in example_files() {
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        if !["matmul", "flash_attn"].contains(&stem.as_str()) {
            continue;
        }
        let ptx = ptx_of(&path, "sm_90a");
        insta::with_settings!({snapshot_path => "snapshots/ptx", prepend_module_to_snapshot => false}, {
            insta::assert_snapshot!(format!("{stem}_sm_90a"), ptx);
        });
    }
}

/// On sm_90a the GEMM's and attention's products run on warpgroup MMA and
/// their pipelined tiles come by TMA: their SASS holds HGMMA and UTMALDG;
/// descriptors read the staged tiles, and thread-written shared memory is
/// fenced for the async proxy.
#[test]
fn gemm_and_attention_use_wgmma_on_sm_90a() {
    for path in example_files() {
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        if !["matmul", "flash_attn"].contains(&stem.as_str()) {
            continue;
        }
        let ptx = ptx_of(&path, "sm_90a");
        for needle in [
            "wgmma.mma_async.sync.aligned.m64n",
            "wgmma.fence.sync.aligned",
            "wgmma.commit_group.sync.aligned",
            "wgmma.wait_group.sync.aligned 0",
            "fence.proxy.async.shared::cta",
            ".extern .shared .align 1024",
            "cp.async.bulk.tensor.",
            "mbarrier.try_wait.parity.shared::cta.b64",
        ] {
            assert!(ptx.contains(needle), "{stem} sm_90a: no `{needle}`");
        }
        if find_ptxas().is_none() || tessera_cuda::find_cuobjdump().is_none() {
            continue;
        }
        let report = assemble(&ptx, "sm_90a").unwrap();
        let sass = tessera_cuda::sass(&report.cubin).unwrap();
        let hgmma = sass.matches("HGMMA").count();
        let utmaldg = sass.matches("UTMALDG").count();
        eprintln!("{stem} sm_90a: {hgmma} HGMMA, {utmaldg} UTMALDG instructions");
        assert!(hgmma > 0, "{stem} sm_90a: no HGMMA in the SASS");
        assert!(utmaldg > 0, "{stem} sm_90a: no UTMALDG (TMA) in the SASS");
    }
}

/// On sm_90a the pipelined GEMM, attention and causal attention kernels
/// are warp-specialised and persistent: a producer warpgroup beyond the
/// kernel's 256 threads issues the TMA copies, registers move to the
/// consumers, the consumers' main loops wait on mbarriers with no barrier
/// across the block (nor among themselves) in them, and each block loops
/// over the grid's programs.
#[test]
fn pipelined_kernels_are_warp_specialised_on_sm_90a() {
    for path in example_files() {
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        if !["matmul", "flash_attn", "causal_attn"].contains(&stem.as_str()) {
            continue;
        }
        let ptx = ptx_of(&path, "sm_90a");
        for needle in [
            ".maxntid 384, 1, 1",
            ".maxnreg 168",
            "setmaxnreg.dec.sync.aligned.u32 40;",
            "setmaxnreg.inc.sync.aligned.u32 232;",
            "mbarrier.init.shared::cta.b64 [tsr_smem+",
            "], 256;",
            "mbarrier.arrive.shared::cta.b64 _, [",
            "// persistent over ",
            "%nctaid.x;",
        ] {
            assert!(ptx.contains(needle), "{stem} sm_90a: no `{needle}`");
        }
        // Each consumer loop runs from the comment to its back edge.
        let loops: Vec<&str> = ptx
            .split("// warp-specialised pipeline")
            .skip(1)
            .map(|rest| rest.split("bra.uni").next().unwrap_or(rest))
            .collect();
        assert!(!loops.is_empty(), "{stem} sm_90a: no specialised loop");
        for body in loops {
            assert!(
                !body.contains("bar.sync"),
                "{stem}: a barrier in the main loop"
            );
            assert!(!body.contains("cp.async"), "{stem}: consumers copy");
        }
        // Only the producer issues bulk copies; the consumers meet on named
        // barrier 1 after the split.
        let (consumers, producer) = ptx.split_once("setmaxnreg.dec").unwrap();
        assert!(!consumers.contains("cp.async.bulk"), "{stem}");
        assert!(producer.contains("cp.async.bulk.tensor"), "{stem}");
        assert_eq!(consumers.matches("bar.sync 0;").count(), 1, "{stem}");
        if find_ptxas().is_some() {
            let report = assemble(&ptx, "sm_90a").unwrap();
            for k in report.kernels() {
                let spilled = k.spill_stores_bytes + k.spill_loads_bytes;
                assert_eq!(spilled, 0, "{stem} sm_90a {} spills", k.name);
            }
        }
    }
}

/// The matrix kernels run on tensor cores: their SASS holds HMMA; their
/// results are stored in pairs and nothing but staged tiles goes through
/// shared memory.
#[test]
fn gemm_and_attention_use_tensor_cores() {
    if find_ptxas().is_none() || tessera_cuda::find_cuobjdump().is_none() {
        eprintln!("note: ptxas or cuobjdump not found (run .ci/install-cuda-tools.sh): skipping");
        return;
    }
    for path in example_files() {
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        if !["matmul", "flash_attn"].contains(&stem.as_str()) {
            continue;
        }
        for a in ["sm_80", "sm_90"] {
            let ptx = ptx_of(&path, a);
            assert!(
                ptx.contains("mma.sync.aligned.m16n8k16"),
                "{stem} {a}: no mma in the PTX"
            );
            assert!(
                ptx.contains("cp.async.cg.shared.global"),
                "{stem} {a}: operands are not staged with cp.async"
            );
            // The bf16 results leave the accumulators two columns at a time.
            assert!(
                ptx.contains("st.global.b32"),
                "{stem} {a}: the epilogue stores element by element"
            );
            // Row statistics (attention's max and sum) and the fp32
            // accumulators never go through shared memory: the only shared
            // stores are the staged bf16 tiles' (cp.async, and element by
            // element at ragged edges).
            assert!(
                !ptx.contains("st.shared.f32"),
                "{stem} {a}: fp32 values spilled to shared memory"
            );
            let report = assemble(&ptx, a).unwrap();
            let sass = tessera_cuda::sass(&report.cubin).unwrap();
            let hmma = sass.matches("HMMA").count();
            let ldgsts = sass.matches("LDGSTS").count();
            let ldsm = sass.matches("LDSM").count();
            eprintln!("{stem} {a}: {hmma} HMMA, {ldgsts} LDGSTS, {ldsm} LDSM instructions");
            assert!(ldsm > 0, "{stem} {a}: no LDSM (ldmatrix) in the SASS");
            assert!(hmma > 0, "{stem} {a}: no HMMA in the SASS");
            assert!(ldgsts > 0, "{stem} {a}: no LDGSTS (cp.async) in the SASS");
        }
    }
}

/// Elementwise fp32 kernels load and store 16 bytes per thread and access
/// where four elements are whole, unless their schedule says `vectorize(1)`.
#[test]
fn elementwise_kernels_use_16_byte_accesses() {
    let src = |knob: &str| {
        format!(
            "op add(a: tensor<N, fp32>, b: tensor<N, fp32>) -> tensor<N, fp32> {{ return a + b; }}
             schedule add {{ {knob} }}"
        )
    };
    for (knob, vectors) in [
        ("vectorize(4);", true),
        ("vectorize(1);", false),
        ("warps(4);", false),
    ] {
        let mut c = compile_text("t.tsr", &src(knob), Stage::Check);
        let ptx = c.ptx(Arch::from_name("sm_90").unwrap(), &Bindings::new());
        let ptx = ptx.unwrap_or_else(|| panic!("{knob}: {:?}", c.diagnostics.as_slice()));
        assert_eq!(ptx.contains("ld.global.v4.f32"), vectors, "{knob}");
        assert_eq!(ptx.contains("st.global.v4.f32"), vectors, "{knob}");
    }
    for path in example_files() {
        if path.file_stem().is_some_and(|s| s == "vec_add") {
            for a in ["sm_80", "sm_90"] {
                let ptx = ptx_of(&path, a);
                assert!(
                    ptx.contains("ld.global.v4.f32"),
                    "vec_add {a}: no vector loads"
                );
                assert!(
                    ptx.contains("st.global.v4.f32"),
                    "vec_add {a}: no vector stores"
                );
            }
        }
    }
}

/// fp32 matmuls under `matmul = tf32` (sm_80 and sm_90) and fp8 matmuls
/// (sm_90; on sm_90a warpgroup MMA where both operands are K-major, `a @
/// b.T`) run on tensor cores in their own formats, assemble without
/// spills, and hold tensor-core instructions in their SASS; fp8 for sm_80,
/// which has no fp8 conversions, is a diagnostic.
#[test]
fn tf32_fp8_and_int8_use_tensor_cores() {
    const TF32: &str = "numerics matmul = tf32;\n\
        op mm(a: tensor<M, K, fp32>, b: tensor<K, N, fp32>) -> tensor<M, N, fp32> { return a @ b; }\n";
    const FP8: &str = "numerics aggressive, accumulate = fp32;\n\
        op mm(a: tensor<M, K, fp8_e4m3>, b: tensor<K, N, fp8_e5m2>) -> tensor<M, N, fp8_e4m3> {\n\
            return (a @ (b as fp8_e4m3)) as fp8_e4m3;\n}\n\
        op nt(a: tensor<M, K, fp8_e5m2>, b: tensor<N, K, fp8_e5m2>) -> tensor<M, N, bf16> {\n\
            return (a @ b.T) as bf16;\n}\n\
        op nt_bf16acc(a: tensor<M, K, fp8_e5m2>, b: tensor<N, K, fp8_e5m2>) -> tensor<M, N, bf16> {\n\
            numerics aggressive;\n\
            return (a @ b.T) as bf16;\n}\n";
    const INT8: &str =
        "op mm(a: tensor<M, K, int8>, b: tensor<K, N, int8>) -> tensor<M, N, int32> {\n\
            return a @ b;\n}\n\
        op mmu(a: tensor<M, K, uint8>, b: tensor<N, K, uint8>) -> tensor<M, N, int32> {\n\
            return a @ b.T;\n}\n";
    let cases = [
        ("tf32", TF32, "sm_80", "m16n8k8.row.col.f32.tf32.tf32.f32"),
        ("tf32", TF32, "sm_90", "m16n8k8.row.col.f32.tf32.tf32.f32"),
        ("fp8", FP8, "sm_90", "m16n8k32.row.col.f32.e4m3.e4m3.f32"),
        ("fp8", FP8, "sm_90", "m16n8k32.row.col.f32.e5m2.e5m2.f32"),
        ("fp8", FP8, "sm_90a", "m16n8k32.row.col.f32.e4m3.e4m3.f32"),
        // K-major fp8: mma.sync under an fp32 accumulator, wgmma under a bf16 one.
        ("fp8", FP8, "sm_90a", "m16n8k32.row.col.f32.e5m2.e5m2.f32"),
        ("fp8", FP8, "sm_90a", "k32.f32.e5m2.e5m2"),
        ("int8", INT8, "sm_80", "m16n8k32.row.col.s32.s8.s8.s32"),
        ("int8", INT8, "sm_90", "m16n8k32.row.col.s32.u8.u8.s32"),
        ("int8", INT8, "sm_90a", "m16n8k32.row.col.s32.s8.s8.s32"),
    ];
    let tools = find_ptxas().is_some() && tessera_cuda::find_cuobjdump().is_some();
    for (what, text, a, mma) in cases {
        let mut c = compile_text("t.tsr", text, Stage::Check);
        let ptx = c
            .ptx(Arch::from_name(a).unwrap(), &Bindings::new())
            .unwrap_or_else(|| panic!("{what} {a}: {:?}", c.diagnostics.as_slice()));
        assert!(ptx.contains(mma), "{what} {a}: no `{mma}` in the PTX");
        if !tools {
            continue;
        }
        let report =
            assemble(&ptx, a).unwrap_or_else(|e| panic!("{what} for {a}: ptxas rejects it: {e}"));
        for k in report.kernels() {
            let spilled = k.spill_stores_bytes + k.spill_loads_bytes;
            eprintln!(
                "{what} {a} {}: {} registers, {spilled} bytes spilled",
                k.name, k.registers
            );
            assert_eq!(spilled, 0, "{what} {a} {} spills", k.name);
        }
        let sass = tessera_cuda::sass(&report.cubin).unwrap();
        let mmas = sass.matches("MMA").count();
        eprintln!("{what} {a}: {mmas} tensor-core (*MMA) instructions in the SASS");
        assert!(
            mmas > 0,
            "{what} {a}: no tensor-core instruction in the SASS"
        );
    }
    let mut c = compile_text("t.tsr", FP8, Stage::Check);
    assert!(c
        .ptx(Arch::from_name("sm_80").unwrap(), &Bindings::new())
        .is_none());
    let d = &c.diagnostics.as_slice()[0];
    assert_eq!(d.code.0, "E0800");
    assert!(d.message.contains("sm_89"), "{}", d.message);
}

/// The PTX reader gives back what the printer wrote: for every example (for
/// sm_80 and sm_90) and every stdlib case (for sm_90, at the default sizes
/// and at ragged ones), printing the module read from the PTX reproduces
/// the text exactly, and the verifier accepts the module.
#[test]
fn ptx_reads_back_identically() {
    use tessera_driver::ptx::{print_module, read_module, verify::verify};

    let check = |what: &str, ptx: &str| {
        // The notes `--emit ptx` puts above a module shown at concrete
        // sizes (`// \`rope\` is shown at ...`) are not part of it.
        let start = ptx
            .lines()
            .take_while(|l| l.starts_with("// `"))
            .map(|l| l.len() + 1)
            .sum::<usize>();
        let ptx = &ptx[start.min(ptx.len())..];
        let m = read_module(ptx).unwrap_or_else(|e| {
            let line = ptx.lines().nth(e.line.saturating_sub(1)).unwrap_or("");
            panic!("{what}: {e}\n  {line}")
        });
        if let Err(e) = verify(&m) {
            panic!("{what}: the module read does not verify: {e:?}");
        }
        let back = print_module(&m);
        if back != ptx {
            let (n, (want, got)) = ptx
                .lines()
                .chain(std::iter::repeat("<end>"))
                .zip(back.lines().chain(std::iter::repeat("<end>")))
                .enumerate()
                .find(|(_, (a, b))| a != b)
                .unwrap_or((0, ("<trailing text>", "<trailing text>")));
            panic!(
                "{what}: printing what was read changes line {}:\n  was: {want}\n  now: {got}",
                n + 1
            );
        }
    };

    let mut modules = 0;
    for path in example_files() {
        for a in ["sm_80", "sm_90"] {
            check(&format!("{} {a}", path.display()), &ptx_of(&path, a));
            modules += 1;
        }
    }

    let ragged = [67, 45, 33, 72, 29];
    let mut cases = 0;
    for sizes in [[128; 5], ragged] {
        for (name, ptx) in stdlib_ptx("sm_90", sizes) {
            check(&name, &ptx);
            modules += 1;
            cases += 1;
        }
    }
    let cases = cases / 2;
    eprintln!("{modules} PTX modules ({cases} stdlib cases) read back identically");
}

/// The PTX of every stdlib case (`tessera_tests::stdlib_cases`) for
/// `arch_name`, its dims bound to `sizes` in order: `(description, PTX)`.
fn stdlib_ptx(arch_name: &str, sizes: [i64; 5]) -> Vec<(String, String)> {
    stdlib_ptx_of(arch_name, sizes, |_| {})
}

/// [`stdlib_ptx`], with `edit` applied to each Tile IR program first.
fn stdlib_ptx_of(
    arch_name: &str,
    sizes: [i64; 5],
    edit: impl Fn(&mut tessera_driver::tile::TileProgram),
) -> Vec<(String, String)> {
    use tessera_driver::{Entry, Pipeline};

    let c = compile_text("empty.tsr", "import std.nn;\n", Stage::Check);
    let program = c.program().expect("the stdlib checks");
    let target = Arch::from_name(arch_name).expect("known arch");
    let mut pipeline = Pipeline::new(&program, target).verifying(true);
    let mut out = Vec::new();
    for (name, args) in tessera_tests::stdlib_cases() {
        let (g, _) = pipeline
            .graph(Entry::Op(name, Some(&args)))
            .unwrap_or_else(|d| panic!("{name}: {d:?}"));
        let mut p = pipeline
            .lower(&g)
            .unwrap_or_else(|d| panic!("{name}: not lowered: {}", d.message))
            .tile;
        edit(&mut p);
        let b: Bindings = p
            .dims
            .iter()
            .zip(sizes)
            .map(|(d, n)| (d.clone(), n))
            .collect();
        let ptx = pipeline
            .ptx(&p, &b, None)
            .map(|m| tessera_driver::ptx::print_module(&m))
            .unwrap_or_else(|e| panic!("{name} {b:?}: {}", e.message));
        out.push((format!("stdlib {name} {arch_name} {b:?}"), ptx));
    }
    out
}

/// The Tile IR's source spans of `p`, each made empty.
fn forget_spans(p: &mut tessera_driver::tile::TileProgram) {
    use tessera_driver::tile::{Block, TOp};
    fn walk(b: &mut Block) {
        for i in &mut b.insts {
            i.span = Default::default();
            match &mut i.op {
                TOp::For { body, .. } => walk(body),
                TOp::If { then, els, .. } => {
                    walk(then);
                    walk(els);
                }
                _ => {}
            }
        }
    }
    for k in &mut p.kernels {
        walk(&mut k.body);
    }
}

/// The PTX of every user kernel of the run tests at its declared sizes
/// (each dimension 96) for `arch_name`, with `edit` applied to its Tile IR
/// first: `(description, PTX)`.
fn user_kernel_ptx(
    arch_name: &str,
    edit: impl Fn(&mut tessera_driver::tile::TileProgram),
) -> Vec<(String, String)> {
    use tessera_driver::{Entry, Pipeline};

    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("run/ok");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "tsr"))
        .collect();
    files.sort();
    let target = Arch::from_name(arch_name).expect("known arch");
    let mut out = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let c = compile_text(&name, &text, Stage::Check);
        let Some(program) = c.program() else { continue };
        let kernels = c.files.iter().flat_map(|(_, f)| &f.items);
        for item in kernels {
            let tessera_driver::syntax::ast::Item::Kernel(k) = item else {
                continue;
            };
            let kernel = k.name.text.as_str();
            let mut pipeline = Pipeline::new(&program, target);
            // Kernels whose sizes only a call fixes are left out.
            let Ok((g, _)) = pipeline.graph(Entry::Kernel(kernel, None)) else {
                continue;
            };
            let Ok(lowered) = pipeline.lower(&g) else {
                continue;
            };
            let mut p = lowered.tile;
            edit(&mut p);
            let b: Bindings = p.dims.iter().map(|d| (d.clone(), 96)).collect();
            if let Ok(m) = pipeline.ptx(&p, &b, None) {
                let ptx = tessera_driver::ptx::print_module(&m);
                out.push((format!("{name} `{kernel}` {arch_name}"), ptx));
            }
        }
    }
    out
}

/// Where code comes from is debug information: the PTX of every stdlib
/// case (at whole and ragged sizes) and of every user kernel of the run
/// tests is the same, instruction for instruction, with the Tile IR's
/// source spans (recorded in the Target IR for `.loc`) and without them.
/// (The clean-up's reuse windows once counted the records, and moved
/// code between registers.)
#[test]
fn source_positions_change_no_instruction() {
    let mut compared = 0;
    for a in ["sm_80", "sm_90a"] {
        let mut with = user_kernel_ptx(a, |_| {});
        let mut without = user_kernel_ptx(a, forget_spans);
        for sizes in [[128; 5], [67, 45, 33, 72, 29]] {
            with.extend(stdlib_ptx(a, sizes));
            without.extend(stdlib_ptx_of(a, sizes, forget_spans));
        }
        assert_eq!(with.len(), without.len());
        for ((name, x), (_, y)) in with.iter().zip(&without) {
            assert!(x == y, "{name}: the spans change the PTX");
            compared += 1;
        }
    }
    assert!(compared > 100, "only {compared} modules compared");
    eprintln!("{compared} modules compared");
}

/// Every stdlib kernel (the stdlib cases at their default schedules)
/// assembles for sm_80 and sm_90 without spills; the register counts are
/// reported.
#[test]
fn every_stdlib_kernel_assembles_without_spills() {
    if find_ptxas().is_none() {
        eprintln!("note: ptxas not found (run .ci/install-cuda-tools.sh): skipping");
        return;
    }
    let mut spills = Vec::new();
    for a in ["sm_80", "sm_90"] {
        for (name, ptx) in stdlib_ptx(a, [128; 5]) {
            let report =
                assemble(&ptx, a).unwrap_or_else(|e| panic!("{name}: ptxas rejects it: {e}"));
            for k in report.kernels() {
                let spilled = k.spill_stores_bytes + k.spill_loads_bytes;
                eprintln!(
                    "{name} {}: {} registers, {spilled} bytes spilled",
                    k.name, k.registers
                );
                if spilled > 0 {
                    spills.push(format!("{name} {}: {spilled} bytes", k.name));
                }
            }
        }
    }
    assert!(
        spills.is_empty(),
        "kernels spill registers:\n{}",
        spills.join("\n")
    );
}

/// The PTX of the ops of example `file` for sm_80 with their dimensions
/// bound by `dims`.
fn ptx_bound(file: &str, dims: &[(&str, i64)]) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    // Without `fn main`, whose calls would fix the shapes instead.
    let text = &text[..text.find("fn main").unwrap_or(text.len())];
    let mut c = compile_text(file, text, Stage::Check);
    let b: Bindings = dims.iter().map(|(n, v)| (n.to_string(), *v)).collect();
    let ptx = c.ptx(Arch::from_name("sm_80").unwrap(), &b);
    ptx.unwrap_or_else(|| panic!("{file}: {:?}", c.diagnostics.as_slice()))
}

/// Static specialisation: at sizes that are multiples of the tile, the
/// GEMM and attention kernels copy their tiles with unguarded `cp.async`
/// and never fall back to element-wise global loads, and attention's key
/// mask is gone; at ragged sizes the guards, the fallback and the mask
/// come back.
#[test]
fn whole_tiles_run_without_guards() {
    let guarded_copies = |p: &str| {
        p.lines()
            .filter(|l| l.contains("cp.async.cg") && l.trim_start().starts_with('@'))
            .count()
    };
    let scalar_loads = |p: &str| p.matches("ld.global.").count();
    let whole = ptx_bound("matmul.tsr", &[("M", 4096), ("K", 4096), ("N", 4096)]);
    assert!(whole.contains("cp.async.cg"));
    assert_eq!(
        guarded_copies(&whole),
        0,
        "whole GEMM tiles take guarded copies"
    );
    assert_eq!(
        scalar_loads(&whole),
        0,
        "whole GEMM tiles fall back to element loads"
    );
    let ragged = ptx_bound("matmul.tsr", &[("M", 300), ("K", 170), ("N", 200)]);
    assert!(guarded_copies(&ragged) > 0, "ragged GEMM tiles need guards");
    assert!(
        scalar_loads(&ragged) > 0,
        "ragged GEMM tiles need the fallback"
    );

    let attn = |n| {
        ptx_bound(
            "flash_attn.tsr",
            &[("B", 4), ("H", 16), ("N", n), ("D", 64)],
        )
    };
    let (whole, ragged) = (attn(4096), attn(4000));
    assert_eq!(
        guarded_copies(&whole),
        0,
        "whole attention tiles take guarded copies"
    );
    assert_eq!(
        scalar_loads(&whole),
        0,
        "whole attention tiles fall back to element loads"
    );
    assert!(
        guarded_copies(&ragged) > 0,
        "ragged attention tiles need guards"
    );
    // The key mask selects `-inf` past N: only where N is ragged (the
    // running maximum starts at `-inf` either way).
    let minus_inf = |p: &str| p.matches("0fFF800000").count();
    assert!(
        minus_inf(&ragged) > minus_inf(&whole),
        "the key mask is not folded away at whole tiles"
    );
}

/// The causal mask at the benchmark shape: its comparisons are 32-bit
/// (index ranges are known to fit), its stores address one register per
/// row block plus immediate offsets, and the output tile is rounded to
/// bf16 once, by the packing conversion of the store.
#[test]
fn causal_mask_and_epilogue_stay_narrow() {
    let p = ptx_bound(
        "causal_attn.tsr",
        &[("B", 4), ("H", 32), ("G", 8), ("N", 4096), ("D", 128)],
    );
    let wide = p.matches("setp.lt.s64").count() + p.matches("setp.ge.s64").count();
    let narrow = p.matches("setp.lt.s32").count();
    assert!(narrow >= 32, "the diagonal tile's mask is not 32-bit");
    assert!(
        wide <= 8,
        "{wide} 64-bit comparisons (loop bounds only expected)"
    );
    assert_eq!(
        p.matches("cvt.rn.bf16.f32").count(),
        0,
        "output rounded twice"
    );
    let stores = p.lines().filter(|l| l.contains("st.global.b32")).count();
    let offset = p
        .lines()
        .filter(|l| l.contains("st.global.b32") && l.contains('+'))
        .count();
    assert!(
        stores >= 32 && offset >= stores - 4,
        "{offset} of {stores} stores fold their offsets"
    );
}

/// `occupancy(min_warps, max_warps)` reaches the PTX: the programs per SM
/// it asks for become `.minnctapersm` and the register cap ptxas keeps
/// to, and a maximum below what would fit reserves shared memory.
#[test]
fn occupancy_reaches_the_ptx() {
    let text = |occ: &str| {
        format!(
            "import std.nn;
             op attention(q: tensor<B, H, N, D, bf16>, k: tensor<B, H, N, D, bf16>,
                          v: tensor<B, H, N, D, bf16>) -> tensor<B, H, N, D, bf16> {{
                 let s = (q @ k.T) * rsqrt(D);
                 return softmax(s, axis = -1) @ v;
             }}
             schedule attention on sm_90 {{
                 tile(bm = 128, bn = 64, bk = 64);
                 warps(8);
                 pipeline_stages(3);
                 async_copy;
                 {occ}
             }}"
        )
    };
    let ptx = |occ: &str| {
        let mut c = compile_text("occ.tsr", &text(occ), Stage::Check);
        let b: Bindings = [("B", 4), ("H", 16), ("N", 4096), ("D", 64)]
            .iter()
            .map(|(n, v)| (n.to_string(), *v))
            .collect();
        let ptx = c.ptx(Arch::from_name("sm_90").unwrap(), &b);
        ptx.unwrap_or_else(|| panic!("{occ}: {:?}", c.diagnostics.as_slice()))
    };
    let free = ptx("");
    assert!(!free.contains(".minnctapersm"));
    assert!(free.contains(".maxnreg 248"));
    assert!(!free.contains("occupancy_reserve"));
    // Two programs of 8 warps: 128 registers each at most.
    let two = ptx("occupancy(min_warps = 16, max_warps = 64);");
    assert!(
        two.contains(".minnctapersm 2\n.maxnreg 128\n"),
        "{}",
        &two[..600]
    );
    assert!(!two.contains("occupancy_reserve"));
    if find_ptxas().is_some() {
        let report = assemble(&two, "sm_90").expect("ptxas accepts it");
        let k = report.kernels().next().expect("one kernel");
        let spilled = k.spill_stores_bytes + k.spill_loads_bytes;
        assert!(
            k.registers <= 128
                && (spilled == 0 || tolerated_spill(&report.cubin, &k.name, spilled)),
            "{k:?}"
        );
    }
    // At most one program: 64 KiB of staged tiles would let three fit in
    // 228 KiB, so each reserves over half of it.
    let one = ptx("occupancy(max_warps = 8);");
    assert!(!one.contains(".minnctapersm"));
    let reserve = one
        .lines()
        .find(|l| l.contains("shared occupancy_reserve"))
        .expect("a reserve");
    let end: u64 = reserve
        .split("..")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("the reserve's end");
    let sm = Arch::from_name("sm_90").unwrap().smem_per_sm;
    assert!(2 * end > sm && end <= sm, "{reserve}");
}

/// Targets older than sm_80 (the generated code uses cp.async, bf16
/// conversions and max.NaN) are an E0800 naming the oldest target, not PTX
/// that ptxas rejects; sm_100 and sm_120 assemble.
#[test]
fn old_targets_are_a_diagnostic() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/vec_add.tsr");
    let text = std::fs::read_to_string(&path).unwrap();
    for old in ["sm_70", "sm_75"] {
        let mut c = compile_text("vec_add.tsr", &text, Stage::Check);
        assert!(c
            .ptx(Arch::from_name(old).unwrap(), &Bindings::new())
            .is_none());
        let d = c.diagnostics.as_slice();
        assert!(
            d.iter()
                .any(|d| d.code == tessera_driver::diagnostics::codes::E0800
                    && d.message.contains("sm_80")),
            "{old}: {d:?}"
        );
    }
    for new in ["sm_100", "sm_120"] {
        let ptx = ptx_of(&path, new);
        if find_ptxas().is_some() {
            assemble(&ptx, new).unwrap_or_else(|e| panic!("{new}: {e}"));
        }
    }
}

/// Every Hopper instruction as the printer writes it (wgmma in both forms,
/// mbarrier, TMA, the proxy fences) is what ptxas accepts for sm_90a: a
/// hand-written kernel read into Target IR, printed, and assembled.
#[test]
fn hopper_instructions_assemble() {
    use tessera_driver::ptx::{print_module, read_module};
    let text = ".version 8.3\n.target sm_90a\n.address_size 64\n\
        .extern .shared .align 1024 .b8 tsr_smem[];\n\n\
        .visible .entry k(\n\t.param .u64 map,\n\t.param .u64 out\n)\n.maxntid 128, 1, 1\n{\n\
        \t.reg .pred %p<4>;\n\t.reg .b32 %r<16>;\n\t.reg .b64 %rd<8>;\n\t.reg .f32 %f<8>;\n\
        \tld.param.u64 %rd1, [map];\n\
        \tld.param.u64 %rd2, [out];\n\
        \tmov.u32 %r0, %tid.x;\n\
        \telect.sync _|%p3, -1;\n\
        \tsetp.lt.u32 %p2, %r0, 32;\n\
        \tand.pred %p0, %p3, %p2;\n\
        \t@!%p0 bra $L1;\n\
        \tmbarrier.init.shared::cta.b64 [tsr_smem+8192], 1;\n\
        $L1:\n\
        \tbar.sync 0;\n\
        \tfence.proxy.tensormap::generic.acquire.gpu [%rd1], 128;\n\
        \tmov.u32 %r2, 0;\n\
        \t@%p0 mbarrier.arrive.expect_tx.shared::cta.b64 _, [tsr_smem+8192], 2048;\n\
        \t@%p0 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [tsr_smem], [%rd1, {%r2, %r2}], [tsr_smem+8192];\n\
        $L2:\n\
        \tmbarrier.try_wait.parity.shared::cta.b64 %p1, [tsr_smem+8192], 0;\n\
        \t@!%p1 bra $L2;\n\
        \tmov.u32 %r3, tsr_smem;\n\
        \tshr.u32 %r4, %r3, 4;\n\
        \tcvt.u64.u32 %rd3, %r4;\n\
        \tor.b64 %rd4, %rd3, 4611686293305360384;\n\
        \tmov.f32 %f0, 0f00000000;\n\tmov.f32 %f1, 0f00000000;\n\
        \tmov.f32 %f2, 0f00000000;\n\tmov.f32 %f3, 0f00000000;\n\
        \tmov.b32 %r5, 0;\n\
        \tfence.proxy.async.shared::cta;\n\
        \twgmma.fence.sync.aligned;\n\
        \twgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%f0, %f1, %f2, %f3}, %rd4, %rd4, 1, 1, 1, 0, 1;\n\
        \twgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%f0, %f1, %f2, %f3}, {%r5, %r5, %r5, %r5}, %rd4, 1, 1, 1, 1;\n\
        \twgmma.commit_group.sync.aligned;\n\
        \twgmma.wait_group.sync.aligned 0;\n\
        \tmbarrier.arrive.shared::cta.b64 _, [tsr_smem+8192];\n\
        \tst.global.f32 [%rd2], %f0;\n\
        \tret;\n}\n";
    let mut m = read_module(text).unwrap_or_else(|e| panic!("{e}"));
    // (Dynamic shared memory: the size is the launch's, not the text's.)
    m.functions[0].shared_bytes = 8200;
    let printed = print_module(&m);
    // The printer's text reads back to the same module.
    assert_eq!(
        read_module(&printed).unwrap().functions[0].body,
        m.functions[0].body
    );
    if find_ptxas().is_none() {
        eprintln!("note: ptxas not found (run .ci/install-cuda-tools.sh): checking the text only");
        return;
    }
    if let Err(e) = assemble(&printed, "sm_90a") {
        panic!("ptxas rejects the printed Hopper instructions: {e}\n{printed}");
    }
}

/// Blackwell targets take the sm_90-compatible path: the PTX for sm_100
/// and sm_120 declares an ISA that knows them and ptxas accepts it.
#[test]
fn blackwell_targets_assemble() {
    for path in example_files() {
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        if !["matmul", "flash_attn", "softmax"].contains(&stem.as_str()) {
            continue;
        }
        for a in ["sm_100", "sm_120"] {
            let ptx = ptx_of(&path, a);
            assert!(ptx.contains(&format!(".target {a}")), "{stem} {a}");
            assert!(
                !ptx.contains("wgmma") && !ptx.contains("cp.async.bulk"),
                "{stem} {a}"
            );
            if find_ptxas().is_some() {
                if let Err(e) = assemble(&ptx, a) {
                    panic!("{stem} for {a}: ptxas rejects it: {e}");
                }
            }
        }
    }
}

/// What `--emit schedule` says of a product's tensor cores (`wgmma`,
/// `mma.sync`, or none) is what the PTX does, for every kind of matmul the
/// numerics allow, on every target: 16-bit operands with fp32 and bf16
/// accumulators, fp8 K-major and not under both, fp32 with and without
/// tf32, int8, attention in bf16 and fp32; at symbolic sizes and, for a
/// GEMM, at one k-tile (where fp8 under an fp32 accumulator once took
/// wgmma, the main loop specialised away). (A bf16 accumulator once made the PTX fall back to scalar
/// FMAs while the schedule said `tensor_cores = wgmma`.)
#[test]
fn the_schedule_tells_which_tensor_cores_the_ptx_uses() {
    const OPS: [(&str, &str); 11] = [
        ("bf16", "op mm(a: tensor<M, K, bf16>, b: tensor<K, N, bf16>) -> tensor<M, N, bf16> { return a @ b; }"),
        ("bf16, bf16 accumulator", "op mm(a: tensor<M, K, bf16>, b: tensor<K, N, bf16>) -> tensor<M, N, bf16> { numerics aggressive; return a @ b; }"),
        ("fp16 NT, bf16 accumulator", "op mm(a: tensor<M, K, fp16>, b: tensor<N, K, fp16>) -> tensor<M, N, fp16> { numerics aggressive; return a @ b.T; }"),
        ("fp8 NT", "op mm(a: tensor<M, K, fp8_e4m3>, b: tensor<N, K, fp8_e4m3>) -> tensor<M, N, fp32> { return a @ b.T; }"),
        ("fp8 NT, bf16 accumulator", "op mm(a: tensor<M, K, fp8_e4m3>, b: tensor<N, K, fp8_e4m3>) -> tensor<M, N, fp32> { numerics aggressive; return a @ b.T; }"),
        ("fp8 NN, bf16 accumulator", "op mm(a: tensor<M, K, fp8_e5m2>, b: tensor<K, N, fp8_e5m2>) -> tensor<M, N, fp32> { numerics aggressive; return a @ b; }"),
        ("fp32", "op mm(a: tensor<M, K, fp32>, b: tensor<K, N, fp32>) -> tensor<M, N, fp32> { return a @ b; }"),
        ("fp32, tf32", "op mm(a: tensor<M, K, fp32>, b: tensor<K, N, fp32>) -> tensor<M, N, fp32> { numerics matmul = tf32; return a @ b; }"),
        ("int8", "op mm(a: tensor<M, K, int8>, b: tensor<K, N, int8>) -> tensor<M, N, int32> { return a @ b; }"),
        ("attention bf16", "import std.nn;\nop mm(q: tensor<H, N, D, bf16>, k: tensor<H, N, D, bf16>, v: tensor<H, N, D, bf16>) -> tensor<H, N, D, bf16> { return attention(q, k, v); }"),
        ("fp32 attention", "import std.nn;\nop mm(q: tensor<H, N, 64, fp32>, k: tensor<H, N, 64, fp32>, v: tensor<H, N, 64, fp32>) -> tensor<H, N, 64, fp32> { return attention(q, k, v); }"),
    ];
    for (what, op) in OPS {
        let text = format!("numerics aggressive, accumulate = fp32;\n{op}\n");
        for name in ["sm_80", "sm_90", "sm_90a"] {
            let arch = Arch::from_name(name).unwrap();
            let mut c = compile_text("t.tsr", &text, Stage::Check);
            if what.starts_with("fp8") && !arch.has_wgmma && name == "sm_80" {
                continue; // fp8 needs sm_89 (E0800)
            }
            let scheduled = c.schedule_of("mm", arch).expect("schedules");
            let claims: Vec<&str> = scheduled
                .schedule
                .kernels
                .iter()
                .map(|k| match (k.config.tensor_cores, k.takes_wgmma(arch)) {
                    (true, true) => "wgmma",
                    (true, false) => "mma.sync",
                    _ => "none",
                })
                .collect();
            // Symbolic sizes, and (for a GEMM) a single k-tile, where the
            // main loop is specialised away.
            let mut sizes = vec![Bindings::new()];
            if !what.contains("attention") {
                sizes.push(
                    [("M", 256), ("N", 256), ("K", 64)]
                        .map(|(d, v)| (d.to_string(), v))
                        .into(),
                );
            }
            for b in &sizes {
                let ptx = c
                    .ptx(arch, b)
                    .unwrap_or_else(|| panic!("{what} {name}: {:?}", c.diagnostics.as_slice()));
                let does = if ptx.contains("wgmma.mma_async") {
                    "wgmma"
                } else if ptx.contains("mma.sync.aligned") {
                    "mma.sync"
                } else {
                    "none"
                };
                eprintln!("{what} on {name} at {b:?}: schedule {claims:?}, PTX {does}");
                assert_eq!(claims, [does], "{what} on {name} at {b:?}");
            }
        }
        // The products that must reach tensor cores at all.
        if !what.starts_with("fp32") || what.contains("tf32") {
            let mut c = compile_text("t.tsr", &text, Stage::Check);
            let ptx = c
                .ptx(Arch::from_name("sm_90").unwrap(), &Bindings::new())
                .unwrap();
            assert!(
                ptx.contains("mma.sync.aligned"),
                "{what} on sm_90: no tensor cores"
            );
        }
    }
}

/// A schedule block that leaves `tensor_cores` unset keeps tensor cores
/// wherever a product's operands and tile take them: fp32 under `matmul =
/// tf32` and bf16 casts of fp32 parameters (a block with only a tile had
/// turned them off there); a tile that is not a multiple of 16 runs on the
/// CUDA cores; `tensor_cores(false)` turns them off, for GEMMs and
/// attention alike (the PTX had taken mma.sync whatever it said).
#[test]
fn a_schedule_block_keeps_tensor_cores_where_operands_take_them() {
    let tf32 = "op mm(a: tensor<M, K, fp32>, b: tensor<K, N, fp32>) -> tensor<M, N, fp32> { numerics matmul = tf32; return a @ b; }";
    let cast = "op mm(a: tensor<M, K, fp32>, b: tensor<K, N, fp32>) -> tensor<M, N, fp32> { return ((a as bf16) @ (b as bf16)) as fp32; }";
    let bf16 = "op mm(a: tensor<M, K, bf16>, b: tensor<K, N, bf16>) -> tensor<M, N, bf16> { return a @ b; }";
    let attn = "import std.nn;\nop mm(q: tensor<H, N, 64, bf16>, k: tensor<H, N, 64, bf16>, v: tensor<H, N, 64, bf16>) -> tensor<H, N, 64, bf16> { return attention(q, k, v); }";
    let cases = [
        (tf32, "tile(bm = 64, bn = 64, bk = 32);", true),
        (cast, "tile(bm = 64, bn = 64, bk = 32);", true),
        (tf32, "tile(bm = 40, bn = 64, bk = 32);", false),
        (
            tf32,
            "tile(bm = 64, bn = 64, bk = 32); tensor_cores(false);",
            false,
        ),
        (cast, "warps(8); tensor_cores(false);", false),
        (bf16, "tile(bm = 64, bn = 64, bk = 32);", true),
        (bf16, "tensor_cores(false);", false),
        (attn, "tile(bm = 64, bn = 64, bk = 64);", true),
        (
            attn,
            "tile(bm = 64, bn = 64, bk = 64); tensor_cores(false);",
            false,
        ),
    ];
    for (op, knobs, mma) in cases {
        let text = format!("{op}\nschedule mm {{ {knobs} }}\n");
        let mut c = compile_text("t.tsr", &text, Stage::Check);
        let ptx = c
            .ptx(Arch::from_name("sm_90").unwrap(), &Bindings::new())
            .unwrap_or_else(|| panic!("{text}: {:?}", c.diagnostics.as_slice()));
        assert_eq!(ptx.contains("mma.sync.aligned"), mma, "{text}");
    }
}

//! The NVIDIA backend without a GPU: every example compiles to one PTX
//! module for sm_80 and sm_90 that ptxas accepts with no spills (when
//! ptxas is installed: `.ci/install-cuda-tools.sh`), and PTX goldens of the
//! small examples.

use tessera_cuda::ptxas::{assemble, find_ptxas};
use tessera_driver::schedule::{arch, Bindings};
use tessera_driver::{compile_text, Stage};
use tessera_tests::example_files;

/// The PTX of an example for `arch_name`.
fn ptx_of(path: &std::path::Path, arch_name: &str) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let mut c = compile_text(&name, &text, Stage::Check);
    let ptx = c.ptx(arch(arch_name).unwrap(), &Bindings::new());
    ptx.unwrap_or_else(|| panic!("{name}: {:?}", c.diagnostics.as_slice()))
}

#[test]
fn every_example_assembles_for_sm_80_and_sm_90_without_spills() {
    let have = find_ptxas().is_some();
    if !have {
        eprintln!(
            "note: ptxas not found (run .ci/install-cuda-tools.sh): checking generation only"
        );
    }
    let mut spills = Vec::new();
    for path in example_files() {
        for a in ["sm_80", "sm_90"] {
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
                if spilled > 0 {
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
        if !["vec_add", "kahan"].contains(&stem.as_str()) {
            continue;
        }
        let ptx = ptx_of(&path, "sm_90");
        insta::with_settings!({snapshot_path => "snapshots/ptx", prepend_module_to_snapshot => false}, {
            insta::assert_snapshot!(stem, ptx);
        });
    }
}

/// The matrix kernels run on tensor cores: their SASS holds HMMA.
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
            let report = assemble(&ptx, a).unwrap();
            let sass = tessera_cuda::sass(&report.cubin).unwrap();
            let hmma = sass.matches("HMMA").count();
            eprintln!("{stem} {a}: {hmma} HMMA instructions");
            assert!(hmma > 0, "{stem} {a}: no HMMA in the SASS");
        }
    }
}

//! ptxas and cuobjdump on the hand-written test PTX: run when the tools are found (see
//! `.ci/install-cuda-tools.sh`), skipped with a printed note otherwise. No GPU needed.

use tessera_cuda::ptxas::{assemble, assemble_with_options, find_cuobjdump, find_ptxas, sass};

const FILES: [(&str, &str, &str); 3] = [
    ("add_one.ptx", include_str!("ptx/add_one.ptx"), "add_one"),
    (
        "smem_rotate.ptx",
        include_str!("ptx/smem_rotate.ptx"),
        "smem_rotate",
    ),
    ("fault.ptx", include_str!("ptx/fault.ptx"), "write_null"),
];

fn have_ptxas(test: &str) -> bool {
    match find_ptxas() {
        Some(path) => {
            eprintln!("note: {test}: using {}", path.display());
            true
        }
        None => {
            eprintln!("note: {test}: ptxas not found (run .ci/install-cuda-tools.sh), skipping");
            false
        }
    }
}

#[test]
fn test_ptx_assembles_for_sm_80_and_sm_90() {
    if !have_ptxas("test_ptx_assembles_for_sm_80_and_sm_90") {
        return;
    }
    for (file, ptx, kernel) in FILES {
        for arch in ["sm_80", "sm_90"] {
            let report = assemble(ptx, arch).unwrap_or_else(|e| panic!("{file} {arch}: {e}"));
            assert_eq!(report.arch, arch);
            let k = report.kernel(kernel).unwrap_or_else(|| {
                panic!("{file} {arch}: no report for {kernel}:\n{}", report.log)
            });
            assert!(k.registers > 0, "{file} {arch}: {k:?}");
            assert!(!k.spills(), "{file} {arch}: {k:?}");
            assert_eq!(k.stack_frame_bytes, 0, "{file} {arch}: {k:?}");
            assert!(
                report.warnings.is_empty(),
                "{file} {arch}: {:?}",
                report.warnings
            );
            assert_eq!(
                &report.cubin[..4],
                b"\x7fELF",
                "{file} {arch}: a cubin is an ELF file"
            );
        }
    }
    let smem = assemble(FILES[1].1, "sm_80").unwrap();
    assert_eq!(smem.kernel("smem_rotate").unwrap().barriers, 1);
    // Dynamic shared memory is not part of the static count.
    assert_eq!(smem.kernel("smem_rotate").unwrap().shared_bytes, 0);
}

#[test]
fn ptxas_reports_shared_memory_and_spills() {
    if !have_ptxas("ptxas_reports_shared_memory_and_spills") {
        return;
    }
    // 40 values live at once, with at most 24 registers: ptxas must spill.
    let mut ptx = String::from(
        ".version 8.0\n.target sm_80\n.address_size 64\n\n\
         .visible .entry spill_kernel(.param .u64 p)\n{\n\
         .reg .f32 %f<40>;\n.reg .b64 %rd<2>;\n\
         .shared .align 4 .f32 tile[256];\n\
         ld.param.u64 %rd1, [p];\n",
    );
    for i in 0..40 {
        ptx += &format!("ld.volatile.global.f32 %f{i}, [%rd1+{}];\n", 4 * i);
    }
    for i in 0..40 {
        ptx += &format!(
            "st.volatile.global.f32 [%rd1+{}], %f{};\n",
            4 * i + 1000,
            39 - i
        );
    }
    ptx += "st.shared.f32 [tile], %f0;\nret;\n}\n";
    let report = assemble_with_options(&ptx, "sm_80", &["-maxrregcount=24"]).unwrap();
    eprintln!("{}", report.log);
    let k = report.kernel("spill_kernel").unwrap();
    assert_eq!(k.registers, 24, "{k:?}");
    assert!(k.spill_stores_bytes > 0 && k.spill_loads_bytes > 0, "{k:?}");
    assert!(k.stack_frame_bytes > 0, "{k:?}");
    assert_eq!(k.shared_bytes, 1024, "{k:?}");
}

#[test]
fn ptxas_errors_are_readable() {
    if !have_ptxas("ptxas_errors_are_readable") {
        return;
    }
    let err = assemble("garbage\n", "sm_80").unwrap_err();
    assert!(err.starts_with("ptxas -arch=sm_80 failed"), "{err}");
    assert!(
        err.contains("<ptx>"),
        "the temporary file name is hidden: {err}"
    );
    // ptxas refuses an -arch below the PTX's .target.
    let sm90_only = FILES[0].1.replace(".target sm_80", ".target sm_90");
    assert!(assemble(&sm90_only, "sm_80").is_err());
}

#[test]
fn cubins_disassemble_to_sass() {
    if !have_ptxas("cubins_disassemble_to_sass") {
        return;
    }
    if find_cuobjdump().is_none() {
        eprintln!("note: cuobjdump not found, skipping");
        return;
    }
    let report = assemble(FILES[0].1, "sm_90").unwrap();
    let text = sass(&report.cubin).unwrap();
    assert!(text.contains("Function : add_one"), "{text}");
    assert!(text.contains("FADD"), "{text}");
    assert!(text.contains("LDG.E"), "{text}");
    assert!(sass(b"not a cubin").is_err());
}

//! The text form of the Schedule IR (`tsrc build --emit schedule`).

use crate::ir::{ConfigSource, KernelKind, SKernel, SStep, Schedule};
use std::fmt::Write;
use tessera_core::resources::kib;
use tessera_graph::{node_text, Graph, Op, ValueId};

/// Writes `s` (scheduled from `g`) as text.
pub fn print_schedule(g: &Graph, s: &Schedule) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "schedule {} on {} {{", s.name, s.arch);
    for step in &s.steps {
        match step {
            SStep::Kernel(i) => kernel(&mut out, g, s, &s.kernels[*i]),
            SStep::Collective(v) => {
                let n = g.node(*v);
                let _ = writeln!(out, "    collective {v} = {} : {}", node_text(g, n), n.ty);
            }
        }
    }
    let outs: Vec<String> = g.outputs.iter().map(|v| v.to_string()).collect();
    let _ = writeln!(out, "    return {}", outs.join(", "));
    out.push_str("}\n");
    out
}

fn value_name(g: &Graph, v: ValueId) -> String {
    match g.node(v).op {
        Op::Param(i) => format!("{v} {}", g.params[i].name),
        _ => v.to_string(),
    }
}

fn kernel(out: &mut String, g: &Graph, s: &Schedule, k: &SKernel) {
    let _ = writeln!(out, "    kernel {}: {} {{", k.name, k.kind.name());
    for v in &k.nodes {
        let n = g.node(*v);
        let _ = writeln!(out, "        {v} = {} : {}", node_text(g, n), n.ty);
    }
    let list = |vs: &[ValueId]| {
        vs.iter()
            .map(|v| value_name(g, *v))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let _ = writeln!(out, "        reads: {}", list(&k.inputs));
    let _ = writeln!(out, "        writes: {}", list(&k.outputs));
    let shape: Vec<String> = k.shape.iter().map(|d| d.to_string()).collect();
    let _ = writeln!(out, "        iteration: [{}]", shape.join(", "));
    let tile: Vec<String> = k
        .config
        .tile
        .extents()
        .iter()
        .map(|(n, v)| format!("{n} = {v}"))
        .collect();
    let _ = writeln!(out, "        tile: {}", tile.join(", "));
    let mut knobs = vec![
        format!("warps = {}", k.config.warps),
        format!("stages = {}", k.config.stages),
        format!("vectorize = {}", k.config.vectorize),
    ];
    if !k.config.warp_specialize {
        knobs.push("warp_specialize(false)".into());
    }
    if k.config.async_copy {
        knobs.push("async_copy".into());
    }
    match (&k.kind, k.config.tensor_cores) {
        // Whether a user kernel multiplies at all is its body's business.
        (KernelKind::User(_), true) => {}
        (KernelKind::User(_), false) => knobs.push("tensor_cores(false)".into()),
        (_, true) => knobs.push(tensor_path(s, k)),
        (_, false) => {}
    }
    if let Some((lo, hi)) = k.config.occupancy {
        knobs.push(format!("occupancy = {lo}..{hi} warps"));
    }
    if k.config.padding > 0 {
        knobs.push(format!("padding = {}", k.config.padding));
    }
    let _ = writeln!(out, "        {}", knobs.join(", "));
    let source = source_text(s, k);
    let _ = writeln!(out, "        from: {source}");
    if !k.staging.is_empty() {
        let parts: Vec<String> = k
            .staging
            .iter()
            .map(|st| {
                let shape: Vec<String> = st.shape.iter().map(|d| d.to_string()).collect();
                format!(
                    "{} {} x [{}] {} = {}",
                    st.operand,
                    st.stages,
                    shape.join(", "),
                    st.dtype,
                    kib(st.bytes())
                )
            })
            .collect();
        let _ = writeln!(
            out,
            "        shared: {}; total {}",
            parts.join(", "),
            kib(k.estimates.smem_bytes)
        );
    }
    let _ = writeln!(
        out,
        "        estimate: {} registers/thread, {} programs/SM ({}), occupancy {}%",
        k.estimates.regs_per_thread,
        k.estimates.blocks_per_sm,
        k.estimates.limited_by.name(),
        k.estimates.occupancy_pct
    );
    let grid: Vec<String> = k.grid.iter().map(|d| d.to_string()).collect();
    let _ = writeln!(out, "        grid: [{}]", grid.join(", "));
    out.push_str("    }\n");
}

/// Where kernel `k` of schedule `s` got its configuration, as the text
/// form's `from:` line says it.
pub fn source_text(s: &Schedule, k: &SKernel) -> String {
    match &k.config.source {
        ConfigSource::Schedule { arch: Some(a) } => format!("schedule {} on {a}", s.name),
        ConfigSource::Schedule { arch: None } => format!("schedule {}", s.name),
        ConfigSource::Default(why) => format!("default: {why}"),
        ConfigSource::Tuned(point) => format!("autotune candidate: {point}"),
        ConfigSource::Database { point, result } => format!("tuned: {result} ({point})"),
    }
}

/// Which tensor-core instructions kernel `k`'s products take on the
/// schedule's architecture (see [`SKernel::takes_wgmma`]).
fn tensor_path(s: &Schedule, k: &SKernel) -> String {
    match tessera_core::Arch::from_name(s.arch) {
        Some(arch) if k.takes_wgmma(arch) => "tensor_cores = wgmma".into(),
        Some(_) => "tensor_cores = mma.sync".into(),
        None => "tensor_cores".into(),
    }
}

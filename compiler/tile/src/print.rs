//! The text form of Tile IR (`tsrc build --emit tile`).

use crate::ir::*;
use std::fmt::Write;
use tessera_graph::float_text;

/// Writes a whole program.
pub fn print_program(p: &TileProgram) -> String {
    let mut out = String::new();
    let decl = |d: &BufferDecl| {
        let dims: Vec<String> = d.dims.iter().map(|s| s.to_string()).collect();
        format!("{}: {}[{}]", d.name, d.dtype, dims.join(", "))
    };
    let _ = writeln!(out, "program {} {{", p.name);
    let _ = writeln!(out, "    dims: {}", p.dims.join(", "));
    for (what, list) in [
        ("input", &p.inputs),
        ("temp", &p.temps),
        ("output", &p.outputs),
    ] {
        for d in list {
            let _ = writeln!(out, "    {what} {}", decl(d));
        }
    }
    for step in &p.steps {
        let _ = writeln!(out, "    {}", step_text(p, step));
    }
    out.push_str("}\n");
    for k in &p.kernels {
        out.push('\n');
        out.push_str(&print_kernel(k));
    }
    out
}

fn buffer_name(p: &TileProgram, b: BufferId) -> String {
    let d = match b {
        BufferId::Input(i) => p.inputs.get(i),
        BufferId::Temp(i) => p.temps.get(i),
        BufferId::Output(i) => p.outputs.get(i),
    };
    d.map(|d| d.name.clone())
        .unwrap_or_else(|| format!("{b:?}"))
}

fn step_text(p: &TileProgram, s: &Step) -> String {
    match s {
        Step::Launch { kernel, args } => {
            let name = p
                .kernels
                .get(*kernel)
                .map(|k| k.name.as_str())
                .unwrap_or("?");
            let args: Vec<String> = args.iter().map(|b| buffer_name(p, *b)).collect();
            format!("launch {name}({})", args.join(", "))
        }
        Step::Copy { src, dst } => {
            format!("copy {} -> {}", buffer_name(p, *src), buffer_name(p, *dst))
        }
        Step::Collective {
            kind,
            axis,
            devices,
            src,
            dst,
        } => format!(
            "collective {} over {axis} ({devices} devices) {} -> {}",
            kind.name(),
            buffer_name(p, *src),
            buffer_name(p, *dst)
        ),
    }
}

fn ty_text(t: &TileTy) -> String {
    if t.shape.is_empty() {
        return t.dtype.to_string();
    }
    let s: Vec<String> = t.shape.iter().map(|d| d.to_string()).collect();
    format!("{}[{}]", t.dtype, s.join(", "))
}

/// Writes one kernel.
pub fn print_kernel(k: &Kernel) -> String {
    let mut out = String::new();
    let params: Vec<String> = k
        .params
        .iter()
        .map(|p| {
            let dims: Vec<String> = p.dims.iter().map(|s| s.to_string()).collect();
            let access = match p.access {
                Access::In => "in",
                Access::Out => "out",
                Access::InOut => "inout",
            };
            let init = match p.init {
                Start::Held => None,
                Start::Value(v) => Some(format!(" = {}", float_text(v))),
                Start::Kept => Some(" = passed".to_owned()),
            };
            format!(
                "{access} {}: {}[{}]{}",
                p.name,
                p.dtype,
                dims.join(", "),
                init.unwrap_or_default()
            )
        })
        .collect();
    let grid: Vec<String> = k.grid.iter().map(|s| s.to_string()).collect();
    let _ = writeln!(
        out,
        "kernel {}({}) grid [{}] threads {}{}{}{}{}{} {{",
        k.name,
        params.join(", "),
        grid.join(", "),
        k.threads,
        if k.vectorize > 1 {
            format!(" vectorize {}", k.vectorize)
        } else {
            String::new()
        },
        match k.blocks_per_sm {
            Some((lo, hi)) => format!(" programs_per_sm {lo} to {hi}"),
            None => String::new(),
        },
        if k.warp_specialize {
            ""
        } else {
            " warp_specialize false"
        },
        if k.tensor_cores {
            ""
        } else {
            " tensor_cores false"
        },
        if k.fast_exp { " fast_exp" } else { "" }
    );
    for s in &k.shared {
        let shape: Vec<String> = s.shape.iter().map(|d| d.to_string()).collect();
        let _ = writeln!(
            out,
            "    shared {}: {}[{}] x {} stages, padding {} ({} bytes)",
            s.name,
            s.dtype,
            shape.join(", "),
            s.stages,
            s.padding,
            s.bytes()
        );
    }
    block(&mut out, k, &k.body, 1);
    out.push_str("}\n");
    out
}

fn list(vs: &[Value]) -> String {
    vs.iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn block(out: &mut String, k: &Kernel, b: &Block, depth: usize) {
    let pad = "    ".repeat(depth);
    for inst in &b.insts {
        let lhs = if inst.results.is_empty() {
            String::new()
        } else {
            format!("{} = ", list(&inst.results))
        };
        let ty = inst
            .results
            .first()
            .map(|r| format!(" : {}", ty_text(k.ty(*r))))
            .unwrap_or_default();
        let text = match &inst.op {
            TOp::ProgramId(a) => format!("program_id {a}"),
            TOp::NumPrograms(a) => format!("num_programs {a}"),
            TOp::Size(s) => format!("size {s}"),
            TOp::Const(c) => format!("const {}", float_text(*c)),
            TOp::Arange(s) => format!("arange {s}"),
            TOp::Unary(op, a) => format!("{} {a}", op.name()),
            TOp::Binary(op, a, b) => format!("{} {a}, {b}", op.name()),
            TOp::Rand { seed, counter } => format!("rand {counter} seed {seed}"),
            TOp::Select(c, a, b) => format!("select {c}, {a}, {b}"),
            TOp::Cast(a) => format!("cast {a}"),
            TOp::Broadcast(a) => format!("broadcast {a}"),
            TOp::Reshape(a) => format!("reshape {a}"),
            TOp::Permute(a, p) => format!("permute {a} {p:?}"),
            TOp::Load {
                param,
                index,
                mask,
                other,
            } => {
                let name = k.params.get(*param).map(|p| p.name.as_str()).unwrap_or("?");
                let mut s = format!("load {name}[{}]", list(index));
                if let Some(m) = mask {
                    let _ = write!(s, " mask {m}");
                }
                if *other != 0.0 {
                    let _ = write!(s, " other {}", float_text(*other));
                }
                s
            }
            TOp::Store {
                param,
                index,
                value,
                mask,
                atomic,
            } => {
                let name = k.params.get(*param).map(|p| p.name.as_str()).unwrap_or("?");
                let word = match atomic {
                    None => "store",
                    Some(Combine::Sum) => "atomic_add",
                    Some(Combine::Max) => "atomic_max",
                    Some(Combine::Min) => "atomic_min",
                    // Rejected by the verifier; shown as it is.
                    Some(Combine::Prod) => "atomic_prod",
                };
                let mut s = format!("{word} {name}[{}], {value}", list(index));
                if let Some(m) = mask {
                    let _ = write!(s, " mask {m}");
                }
                s
            }
            TOp::Dot {
                a,
                b,
                acc,
                tf32,
                bf16_acc,
            } => {
                let flag = |on: bool, word: &'static str| if on { word } else { "" };
                format!(
                    "dot {a}, {b}, {acc}{}{}",
                    flag(*tf32, " tf32"),
                    flag(*bf16_acc, " bf16_acc")
                )
            }
            TOp::Reduce {
                combine,
                value,
                axis,
                policy,
            } => format!(
                "reduce_{} {value} axis {axis} {{policy = {}}}",
                combine.name(),
                policy.name()
            ),
            TOp::KahanAdd { sum, comp, x } => format!("kahan_add {sum}, {comp}, {x}"),
            TOp::Sort { value, descending } => {
                format!(
                    "sort {value}{}",
                    if *descending { " descending" } else { "" }
                )
            }
            TOp::Stage { shared, value } => {
                let name = k
                    .shared
                    .get(*shared)
                    .map(|s| s.name.as_str())
                    .unwrap_or("?");
                format!("stage {value} via {name}")
            }
            TOp::Barrier => "barrier".into(),
            TOp::Assert(c, Check::Index, about) => match about[..] {
                [i, n] => format!("assert {c} index {i} below {n}"),
                _ => format!("assert {c}"),
            },
            TOp::Assert(c, Check::Step, _) => format!("assert_step {c}"),
            TOp::Yield(vs) => format!("yield {}", list(vs)),
            TOp::For {
                lo,
                hi,
                step,
                init,
                body,
            } => {
                let iv = body.args.first().map(|v| v.to_string()).unwrap_or_default();
                let carried: Vec<String> = body
                    .args
                    .iter()
                    .skip(1)
                    .zip(init)
                    .map(|(a, i)| format!("{a} = {i}"))
                    .collect();
                let _ = writeln!(
                    out,
                    "{pad}{lhs}for {iv} = {lo} to {hi} step {step} carry ({}) {{",
                    carried.join(", ")
                );
                block(out, k, body, depth + 1);
                let _ = writeln!(out, "{pad}}}");
                continue;
            }
            TOp::If { cond, then, els } => {
                let _ = writeln!(out, "{pad}{lhs}if {cond} {{");
                block(out, k, then, depth + 1);
                let _ = writeln!(out, "{pad}}} else {{");
                block(out, k, els, depth + 1);
                let _ = writeln!(out, "{pad}}}");
                continue;
            }
        };
        let _ = writeln!(out, "{pad}{lhs}{text}{ty}");
    }
}

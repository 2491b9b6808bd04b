//! The deterministic text form of Graph IR (`tsrc build --emit graph`).

use crate::ir::{Graph, Node, Op, ScalarKind, SliceAxis, Type, ValueId};
use std::fmt::Write;

/// Prints a graph.
pub fn print_graph(g: &Graph) -> String {
    let mut out = String::new();
    let params: Vec<String> = g
        .params
        .iter()
        .map(|p| format!("{}: {}", p.name, p.ty))
        .collect();
    let results: Vec<String> = g.outputs.iter().map(|o| g.ty(*o).to_string()).collect();
    let _ = writeln!(
        out,
        "graph {}({}) -> {} {{",
        g.name,
        params.join(", "),
        results.join(", ")
    );
    let _ = writeln!(out, "    // numerics: {}", g.numerics);
    for (i, n) in g.nodes.iter().enumerate() {
        let _ = writeln!(out, "    %{i} = {} : {}", node_text(g, n), n.ty);
    }
    let outs: Vec<String> = g.outputs.iter().map(ValueId::to_string).collect();
    let _ = writeln!(out, "    return {}", outs.join(", "));
    out.push_str("}\n");
    out
}

fn args(n: &Node) -> String {
    let a: Vec<String> = n.args.iter().map(ValueId::to_string).collect();
    a.join(", ")
}

/// A float as the shortest text that reads back as the same value.
pub fn float_text(v: f64) -> String {
    if v.is_finite() && v == v.trunc() && v.abs() < 1e15 {
        format!("{v:.1}")
    } else {
        format!("{v:?}")
    }
}

/// The op and operands of one node, without the result and type.
pub fn node_text(g: &Graph, n: &Node) -> String {
    match &n.op {
        Op::Param(i) => format!(
            "param {}",
            g.params.get(*i).map_or("?", |p| p.name.as_str())
        ),
        Op::Const(v) => match n.ty {
            Type::Scalar(ScalarKind::Int) => format!("const {}", *v as i64),
            Type::Scalar(ScalarKind::Bool) => format!("const {}", *v != 0.0),
            _ => format!("const {}", float_text(*v)),
        },
        Op::DimSize(d) => format!("dim {d}"),
        Op::Unary(u) => format!("{} {}", u.name(), args(n)),
        Op::Binary(b) => format!("{} {}", b.name(), args(n)),
        Op::Select => format!("select {}", args(n)),
        Op::Cast(d) => format!("cast<{d}> {}", args(n)),
        Op::Reduce {
            kind,
            axis,
            keepdims,
            policy,
            acc,
        } => format!(
            "reduce_{} {} {{axis = {axis}{}, policy = {}, acc = {acc}}}",
            kind.name(),
            args(n),
            if *keepdims { ", keepdims" } else { "" },
            policy.name()
        ),
        Op::MatMul { acc, tf32 } => format!(
            "matmul {} {{acc = {acc}{}}}",
            args(n),
            if *tf32 { ", tf32" } else { "" }
        ),
        Op::Transpose => format!("transpose {}", args(n)),
        Op::Permute(perm) => format!("permute {} {perm:?}", args(n)),
        Op::Scan {
            kind,
            axis,
            segment,
        } => format!(
            "{} {} {{axis = {axis}{}}}",
            kind.name(),
            args(n),
            match segment {
                0 => String::new(),
                s => format!(", segment = {s}"),
            }
        ),
        Op::Concat { axis } => format!("concat {} {{axis = {axis}}}", args(n)),
        Op::Gather { axis } => format!("gather {} {{axis = {axis}}}", args(n)),
        Op::Argsort {
            axis,
            descending,
            segment,
        }
        | Op::Merge {
            axis,
            descending,
            segment,
        } => format!(
            "{} {} {{axis = {axis}{}{}}}",
            if matches!(n.op, Op::Merge { .. }) {
                "merge"
            } else {
                "argsort"
            },
            args(n),
            if *descending { ", descending" } else { "" },
            match segment {
                0 => String::new(),
                s => format!(", segment = {s}"),
            }
        ),
        Op::Take { axis } => format!("take {} {{axis = {axis}}}", args(n)),
        Op::Scatter { axis, vector, add } => {
            let kind = if *vector { ", vector" } else { "" };
            let name = if *add { "scatter_add" } else { "scatter" };
            format!("{name} {} {{axis = {axis}{kind}}}", args(n))
        }
        Op::Reshape => format!("reshape {}", args(n)),
        Op::Slice(axes) => {
            let a: Vec<String> = axes
                .iter()
                .map(|a| match a {
                    SliceAxis::Index(i) => i.to_string(),
                    SliceAxis::Range(lo, hi) => format!("{lo}:{hi}"),
                    SliceAxis::Full => ":".to_owned(),
                })
                .collect();
            format!("slice {} [{}]", args(n), a.join(", "))
        }
        Op::Conv2d { geom, acc } => {
            // One number for both axes when they agree (the common case).
            let pair = |v: [u64; 2]| {
                if v[0] == v[1] {
                    v[0].to_string()
                } else {
                    format!("[{}, {}]", v[0], v[1])
                }
            };
            let mut knobs = format!(
                "stride = {}, padding = {}",
                pair(geom.stride),
                pair(geom.padding)
            );
            if geom.dilation != [1, 1] {
                knobs += &format!(", dilation = {}", pair(geom.dilation));
            }
            if geom.groups != 1 {
                knobs += &format!(", groups = {}", geom.groups);
            }
            format!("conv2d {} {{{knobs}, acc = {acc}}}", args(n))
        }
        Op::Collective { kind, axis } => {
            format!("{} {} {{axis = {}}}", kind.name(), args(n), axis)
        }
        Op::Kernel { name, consts } => {
            let c: Vec<String> = consts.iter().map(|(k, v)| format!("{k} = {v}")).collect();
            format!("kernel {name}({}) {{{}}}", args(n), c.join(", "))
        }
        Op::Arange { start } => format!("arange {{start = {start}}}"),
        Op::Rand { seed, offset } => format!("rand {{seed = {seed}, offset = {offset}}}"),
        Op::KernelOut(i) => format!("kernel_out {} {{index = {i}}}", args(n)),
        Op::Attention {
            acc,
            causal,
            bottom_right,
        } => format!(
            "attention {} {{acc = {acc}{}}}",
            args(n),
            match (causal, bottom_right) {
                (true, true) => ", causal, bottom_right",
                (true, false) => ", causal",
                (false, _) => "",
            }
        ),
    }
}

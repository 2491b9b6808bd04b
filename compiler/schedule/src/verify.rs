//! The Schedule IR verifier: every computing node is in exactly one kernel
//! or step, a kernel's further outputs in the kernel of their launch,
//! kernels read only values already in memory, every result is written,
//! and each kernel's tile is the shape its kind uses.

use crate::fuse::{class, is_generated, view_base, Class};
use crate::ir::{SStep, Schedule};
use tessera_graph::{Graph, ValueId};

/// Checks `s` against `g`; the error names the first broken invariant.
pub fn verify(g: &Graph, s: &Schedule) -> Result<(), String> {
    let n = g.nodes.len();
    let mut owner: Vec<Option<usize>> = vec![None; n];
    let mut in_memory = vec![false; n];
    for (i, node) in g.nodes.iter().enumerate() {
        if matches!(node.op, tessera_graph::Op::Param(_)) {
            in_memory[i] = true;
        }
    }
    for (si, step) in s.steps.iter().enumerate() {
        let (nodes, inputs, outputs): (Vec<ValueId>, Vec<ValueId>, Vec<ValueId>) = match step {
            SStep::Kernel(k) => {
                let k = s.kernels.get(*k).ok_or_else(|| {
                    format!("step {si} launches kernel {k}, which does not exist")
                })?;
                if k.nodes.first() != Some(&k.anchor) {
                    return Err(format!("kernel {} does not start at its anchor", k.name));
                }
                if !k.config.tile.suits(&k.kind) {
                    return Err(format!(
                        "kernel {} is {} but has the tile {:?}",
                        k.name,
                        k.kind.name(),
                        k.config.tile
                    ));
                }
                (k.nodes.clone(), k.inputs.clone(), k.outputs.clone())
            }
            SStep::Collective(v) => (vec![*v], g.node(*v).args.clone(), vec![*v]),
        };
        for v in &nodes {
            let slot = owner
                .get_mut(v.index())
                .ok_or_else(|| format!("step {si} names {v}, which is not in the graph"))?;
            if let Some(other) = slot {
                return Err(format!("{v} is computed by steps {other} and {si}"));
            }
            *slot = Some(si);
        }
        for v in &inputs {
            let base = view_base(g, *v);
            if !in_memory[base.index()] {
                return Err(format!("step {si} reads {base} before any step writes it"));
            }
        }
        for v in &nodes {
            for a in &g.node(*v).args {
                let base = view_base(g, *a);
                let c = class(g, base);
                if c == Class::Scalar
                    || is_generated(g, base)
                    || nodes.contains(&base) && base == *a
                {
                    continue;
                }
                if !in_memory[base.index()] && !nodes.contains(&base) {
                    return Err(format!(
                        "{v} in step {si} needs {base}, which is not in memory"
                    ));
                }
            }
        }
        for v in outputs {
            in_memory[v.index()] = true;
        }
    }
    for (i, slot) in owner.iter().enumerate() {
        let v = ValueId(i as u32);
        let c = class(g, v);
        if matches!(
            c,
            Class::Elementwise | Class::Reduce | Class::Anchor | Class::Collective | Class::Output
        ) && slot.is_none()
        {
            return Err(format!("{v} is computed by no kernel"));
        }
        if c == Class::Output {
            let launch = g.node(v).args[0];
            if *slot != owner[launch.index()] {
                return Err(format!(
                    "kernel output {v} is not computed by the launch {launch} it belongs to"
                ));
            }
        }
    }
    for o in &g.outputs {
        if !in_memory[o.index()] {
            return Err(format!("result {o} is never written"));
        }
    }
    Ok(())
}

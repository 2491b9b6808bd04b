//! Kernel arguments in memory: a view (transpose, slice, reshape, permute)
//! or a generated value (`arange`, `rand`) passed to a user kernel is copied
//! into a buffer of its own first, since a kernel reads its parameters as
//! dense row-major tensors.

use super::{Rebuild, Trace};
use crate::ir::{Graph, Node, Op, Type, ValueId};

/// Copies every view passed to a user kernel of `g` (a same-dtype cast,
/// which the partitioner stores as an elementwise kernel).
pub fn copy_kernel_args(g: &Graph) -> (Graph, Vec<Trace>) {
    let mut r = Rebuild::new(g);
    let mut trace = Vec::new();
    for (i, n) in g.nodes.iter().enumerate() {
        if !matches!(n.op, Op::Kernel { .. }) {
            let v = r.copy(i);
            r.set(ValueId(i as u32), v);
            continue;
        }
        let mut args = Vec::with_capacity(n.args.len());
        for a in &n.args {
            let arg = &g.nodes[a.index()];
            match &arg.ty {
                Type::Tensor(t) if arg.op.is_read_through() => {
                    trace.push(Trace {
                        rule: "kernel-args",
                        fired: true,
                        span: arg.span,
                        message: format!(
                            "`{}` is copied into a buffer for the kernel launch",
                            crate::print::node_text(g, arg)
                        ),
                    });
                    args.push(r.new.push(Node {
                        op: Op::Cast(t.dtype),
                        args: vec![r.get(*a)],
                        ty: arg.ty.clone(),
                        span: arg.span,
                    }));
                }
                _ => args.push(r.get(*a)),
            }
        }
        let v = r.new.push(Node {
            op: n.op.clone(),
            args,
            ty: n.ty.clone(),
            span: n.span,
        });
        r.set(ValueId(i as u32), v);
    }
    (r.finish(), trace)
}

//! Common-subexpression elimination: nodes with the same op, operands and
//! type are computed once.

use super::{Rebuild, Trace};
use crate::ir::{Graph, Op, ValueId};
use std::collections::HashMap;

/// Merges identical nodes of `g`.
pub fn cse(g: &Graph) -> (Graph, Vec<Trace>) {
    let mut r = Rebuild::new(g);
    let mut seen: HashMap<String, ValueId> = HashMap::new();
    let mut trace = Vec::new();
    for (i, n) in g.nodes.iter().enumerate() {
        let args: Vec<ValueId> = n.args.iter().map(|a| r.get(*a)).collect();
        // Parameters are distinct even when their types agree.
        let key = (!matches!(n.op, Op::Param(_))).then(|| {
            let op = match &n.op {
                // Compare constants by bits so that 0.0 and -0.0 stay apart.
                Op::Const(x) => format!("const {:x}", x.to_bits()),
                other => format!("{other:?}"),
            };
            format!("{op} {args:?} {:?}", n.ty)
        });
        let existing = key.as_ref().and_then(|k| seen.get(k).copied());
        let v = match existing {
            Some(v) => {
                if !matches!(n.op, Op::Const(_)) {
                    trace.push(Trace {
                        rule: "cse",
                        fired: true,
                        span: n.span,
                        message: format!("`{}` computed once", crate::print::node_text(g, n)),
                    });
                }
                v
            }
            None => {
                let v = r.copy(i);
                if let Some(k) = key {
                    seen.insert(k, v);
                }
                v
            }
        };
        r.set(ValueId(i as u32), v);
    }
    (r.finish(), trace)
}

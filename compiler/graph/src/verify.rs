//! The Graph IR verifier: SSA order, operand counts, and every node's type
//! equal to the one its op implies. Passes run it after every rewrite in
//! tests; a failure is a compiler bug, reported with the node's text.

use crate::infer::infer;
use crate::ir::{Graph, Op, Type};
use crate::print::node_text;
use tessera_sema::Dim;

/// Checks `g`; returns every violation found.
pub fn verify(g: &Graph) -> Result<(), Vec<String>> {
    let mut errors = Vec::new();
    for (i, n) in g.nodes.iter().enumerate() {
        let at = |msg: String| format!("%{i} = {}: {msg}", node_text(g, n));
        if let Some(bad) = n.args.iter().find(|a| a.index() >= i) {
            errors.push(at(format!("operand {bad} is not defined before its use")));
            continue;
        }
        let arg_tys: Vec<&Type> = n.args.iter().map(|a| g.ty(*a)).collect();
        match infer(&n.op, &arg_tys, &g.params) {
            Err(e) => errors.push(at(e.message)),
            Ok(Some(t)) if t != n.ty => {
                errors.push(at(format!("type is `{}`, the op implies `{t}`", n.ty)))
            }
            Ok(_) => {}
        }
        match &n.op {
            Op::Const(_) if !matches!(n.ty, Type::Scalar(_)) => {
                errors.push(at("a constant must be a scalar".into()))
            }
            Op::Reshape => match (arg_tys.first().and_then(|t| t.tensor()), n.ty.tensor()) {
                (Some(from), Some(to)) => {
                    if let (Some(a), Some(b)) = (product(&from.dims), product(&to.dims)) {
                        if a != b {
                            errors.push(at(format!(
                                "reshape changes the element count from {a} to {b}"
                            )));
                        }
                    }
                    if from.dtype != to.dtype {
                        errors.push(at("reshape changes the dtype".into()));
                    }
                }
                _ => errors.push(at(
                    "reshape needs one tensor operand and a tensor type".into()
                )),
            },
            Op::Scatter { axis, vector, .. } => {
                let ts: Vec<Option<&tessera_sema::TensorTy>> =
                    arg_tys.iter().map(|t| t.tensor()).collect();
                let ok = match (ts.as_slice(), n.ty.tensor()) {
                    ([Some(index), Some(src)], Some(out)) => {
                        index.dtype.is_int()
                            && src.dtype == out.dtype
                            && src.rank() == out.rank()
                            && *axis < out.rank()
                            && if *vector {
                                index.rank() == 1
                            } else {
                                index.rank() == src.rank()
                            }
                    }
                    _ => false,
                };
                if !ok {
                    errors.push(at(format!(
                        "scatter_add along axis {axis} needs an integer index ({}) and a source of the result's rank and dtype",
                        if *vector { "one vector" } else { "of the source's rank" }
                    )));
                }
            }
            Op::Kernel { .. } if n.ty.tensor().is_none() => {
                errors.push(at("a kernel call yields a tensor".into()))
            }
            Op::KernelOut(k) => {
                let of_kernel = n
                    .args
                    .first()
                    .is_some_and(|a| matches!(g.node(*a).op, Op::Kernel { .. }));
                if *k == 0 || !of_kernel || n.ty.tensor().is_none() {
                    errors.push(at(format!(
                        "kernel output {k} must be a tensor output (index 1 or more) of a kernel call"
                    )));
                }
            }
            _ => {}
        }
    }
    for o in &g.outputs {
        if o.index() >= g.nodes.len() {
            errors.push(format!("output {o} does not exist"));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// The product of dims, if every dim is known or symbolic (not unknown).
/// The element count of `dims` as a product of symbols, if it is one.
pub(crate) fn product(dims: &[Dim]) -> Option<Dim> {
    dims.iter().try_fold(Dim::known(1), |acc, d| match d {
        Dim::Unknown => None,
        d => acc.mul(d),
    })
}

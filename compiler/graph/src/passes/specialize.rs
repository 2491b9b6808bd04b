//! Shape specialisation: replaces dimension symbols with the sizes a call
//! binds, so that later passes see concrete shapes (and fold `dim D`).

use super::Rebuild;
use crate::ir::{Graph, Op, Type, ValueId};
use std::collections::HashMap;
use tessera_sema::{Dim, TensorTy};

fn dim(d: &Dim, sizes: &HashMap<String, u64>) -> Dim {
    match d {
        Dim::Expr { coeff, syms } => {
            let mut coeff = *coeff;
            let mut rest = Vec::new();
            for s in syms {
                match sizes.get(s) {
                    Some(n) => coeff = coeff.saturating_mul(*n),
                    None => rest.push(s.clone()),
                }
            }
            Dim::Expr { coeff, syms: rest }
        }
        Dim::Unknown => Dim::Unknown,
    }
}

fn ty(t: &Type, sizes: &HashMap<String, u64>) -> Type {
    match t {
        Type::Tensor(t) => Type::Tensor(TensorTy {
            dims: t.dims.iter().map(|d| dim(d, sizes)).collect(),
            ..t.clone()
        }),
        other => other.clone(),
    }
}

/// `g` with every dimension symbol in `sizes` replaced by its size.
pub fn specialize(g: &Graph, sizes: &HashMap<String, u64>) -> Graph {
    let mut r = Rebuild::new(g);
    for p in &mut r.new.params {
        p.ty = ty(&p.ty, sizes);
    }
    for i in 0..g.nodes.len() {
        let v = r.copy(i);
        let n = &mut r.new.nodes[v.index()];
        n.ty = ty(&n.ty, sizes);
        if let Op::DimSize(d) = &n.op {
            n.op = Op::DimSize(dim(d, sizes));
        }
        r.set(ValueId(i as u32), v);
    }
    r.finish()
}

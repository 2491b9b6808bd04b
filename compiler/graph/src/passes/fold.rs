//! Constant folding: scalar arithmetic on constants and known dimension
//! sizes becomes a constant, and `x * 1`, `x + 0`, `x - 0`, `x / 1` become
//! `x` where that keeps x's type.

use super::{Rebuild, Trace};
use crate::ir::{BinaryOp, Graph, Node, Op, ScalarKind, Type, ValueId};

/// Folds constants in `g`.
pub fn fold_constants(g: &Graph) -> (Graph, Vec<Trace>) {
    let mut r = Rebuild::new(g);
    let mut folded = 0;
    let mut trace = Vec::new();
    for (i, n) in g.nodes.iter().enumerate() {
        let args: Vec<ValueId> = n.args.iter().map(|a| r.get(*a)).collect();
        let konst = |v: ValueId| match &r.new.node(v).op {
            Op::Const(x) => Some(*x),
            _ => None,
        };
        let consts: Option<Vec<f64>> = args.iter().map(|a| konst(*a)).collect();
        let value = match (&n.op, &n.ty, consts.as_deref()) {
            (Op::DimSize(d), _, _) => d.as_known().map(|k| k as f64),
            (Op::Unary(u), Type::Scalar(_), Some([x])) => Some(u.eval(*x)),
            (Op::Binary(b), Type::Scalar(k), Some([x, y])) => {
                if *k == ScalarKind::Int && matches!(b, BinaryOp::Div | BinaryOp::Rem) {
                    (*y != 0.0).then(|| b.eval(*x, *y).trunc())
                } else {
                    Some(b.eval(*x, *y))
                }
            }
            (Op::Cast(_), Type::Scalar(k), Some([x])) => Some(match k {
                ScalarKind::Int => x.trunc(),
                ScalarKind::Bool => f64::from(*x != 0.0),
                ScalarKind::Float => *x,
            }),
            (Op::Select, Type::Scalar(_), Some([c, a, b])) => Some(if *c != 0.0 { *a } else { *b }),
            _ => None,
        };
        let new = match value {
            Some(x) => {
                if !matches!(n.op, Op::Const(_)) {
                    folded += 1;
                }
                r.new.push(Node {
                    op: Op::Const(x),
                    args: Vec::new(),
                    ty: n.ty.clone(),
                    span: n.span,
                })
            }
            None => match identity(&r, n, &args) {
                Some(v) => {
                    trace.push(Trace {
                        rule: "fold",
                        fired: true,
                        span: n.span,
                        message: format!(
                            "`{}` by a neutral constant is its operand",
                            match &n.op {
                                Op::Binary(b) => b.name(),
                                _ => "op",
                            }
                        ),
                    });
                    v
                }
                None => match unit_reduce(&mut r, n, &args) {
                    Some(v) => {
                        trace.push(Trace {
                            rule: "fold",
                            fired: true,
                            span: n.span,
                            message: "a reduction over an axis of extent 1 is its operand".into(),
                        });
                        v
                    }
                    None => r.copy(i),
                },
            },
        };
        r.set(ValueId(i as u32), new);
    }
    if folded > 0 {
        trace.insert(
            0,
            Trace {
                rule: "fold",
                fired: true,
                span: tessera_diagnostics::Span::default(),
                message: format!("folded {folded} scalar computation(s) to constants"),
            },
        );
    }
    (r.finish(), trace)
}

/// `x op c` (or `c op x`) equal to x, with x's type.
fn identity(r: &Rebuild<'_>, n: &Node, args: &[ValueId]) -> Option<ValueId> {
    let Op::Binary(b) = n.op else { return None };
    let c = |v: ValueId| match r.new.node(v).op {
        Op::Const(x) => Some(x),
        _ => None,
    };
    let keeps = |v: ValueId| r.new.ty(v) == &n.ty;
    let (x, y) = (args[0], args[1]);
    match (b, c(x), c(y)) {
        (BinaryOp::Mul, _, Some(k)) | (BinaryOp::Div, _, Some(k)) if k == 1.0 && keeps(x) => {
            Some(x)
        }
        (BinaryOp::Mul, Some(k), _) if k == 1.0 && keeps(y) => Some(y),
        (BinaryOp::Add, _, Some(k)) | (BinaryOp::Sub, _, Some(k)) if k == 0.0 && keeps(x) => {
            Some(x)
        }
        (BinaryOp::Add, Some(k), _) if k == 0.0 && keeps(y) => Some(y),
        _ => None,
    }
}

/// A reduction over an axis of extent 1 (`sum(m, axis, keepdims)` of a
/// kept statistic) is its operand, reshaped when the axis goes: it then
/// fuses like any view instead of needing a row kernel of its own.
fn unit_reduce(r: &mut Rebuild<'_>, n: &Node, args: &[ValueId]) -> Option<ValueId> {
    let Op::Reduce { axis, .. } = n.op else {
        return None;
    };
    let x = *args.first()?;
    let (Type::Tensor(xt), Type::Tensor(out)) = (r.new.ty(x), &n.ty) else {
        return None;
    };
    if xt.dims.get(axis)?.as_known() != Some(1) || xt.dtype != out.dtype {
        return None;
    }
    if xt.dims == out.dims {
        return Some(x);
    }
    Some(r.new.push(Node {
        op: Op::Reshape,
        args: vec![x],
        ty: n.ty.clone(),
        span: n.span,
    }))
}

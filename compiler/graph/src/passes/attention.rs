//! The attention rewrite: `softmax(q @ kᵀ · scale) @ v`, with the softmax
//! written out as the stdlib writes it (max, subtract, exp, sum, divide
//! along the last axis), becomes one `attention` node, which lowers to a
//! FlashAttention kernel: online softmax, the score matrix never stored.

use super::{Rebuild, Trace};
use crate::infer::infer;
use crate::ir::{BinaryOp, Graph, Node, Op, ReduceKind, ScalarKind, Type, UnaryOp, ValueId};

/// How the scores are scaled before the softmax.
enum Scale {
    One,
    Mul(ValueId),
    Div(ValueId),
}

/// A matched pattern, in old-graph values.
struct Found {
    q: ValueId,
    /// k itself when the scores use `transpose(k)`, else the right operand
    /// of the score matmul (to be transposed).
    k: ValueId,
    k_transposed: bool,
    v: ValueId,
    scale: Scale,
}

enum Match {
    /// Not a softmax feeding a matmul at all.
    No,
    /// The shape is there but a condition fails (reported in the trace).
    Rejected(String),
    Yes(Found),
}

/// Rewrites every attention pattern in `g`.
pub fn fuse_attention(g: &Graph) -> (Graph, Vec<Trace>) {
    let uses = g.use_counts();
    let mut r = Rebuild::new(g);
    let mut trace = Vec::new();
    for (i, n) in g.nodes.iter().enumerate() {
        let here = ValueId(i as u32);
        let v = match find(g, &uses, here) {
            Match::No => r.copy(i),
            Match::Rejected(why) => {
                trace.push(skipped(n, i, &why));
                r.copy(i)
            }
            Match::Yes(f) => match emit(&mut r, n, &f) {
                Ok(v) => {
                    trace.push(Trace {
                        rule: "attention",
                        fired: true,
                        span: n.span,
                        message: format!(
                            "softmax(q @ k.T * scale) @ v at %{i} is one FlashAttention node \
                             (online softmax; the score matrix is never stored)"
                        ),
                    });
                    v
                }
                Err(why) => {
                    trace.push(skipped(n, i, &why));
                    r.copy(i)
                }
            },
        };
        r.set(here, v);
    }
    (r.finish(), trace)
}

fn skipped(n: &Node, i: usize, why: &str) -> Trace {
    Trace {
        rule: "attention",
        fired: false,
        span: n.span,
        message: format!("softmax @ v at %{i} not fused: {why}"),
    }
}

fn last_axis_reduce(g: &Graph, v: ValueId, want: ReduceKind) -> Option<ValueId> {
    let n = g.node(v);
    match n.op {
        Op::Reduce {
            kind,
            axis,
            keepdims: true,
            ..
        } if kind == want => {
            let rank = g.tensor_ty(n.args[0])?.rank();
            (axis + 1 == rank).then_some(n.args[0])
        }
        _ => None,
    }
}

fn binary(g: &Graph, v: ValueId, want: BinaryOp) -> Option<(ValueId, ValueId)> {
    let n = g.node(v);
    match n.op {
        Op::Binary(b) if b == want => Some((n.args[0], n.args[1])),
        _ => None,
    }
}

/// The operand of `v` if `v` is a cast between float dtypes, to a wider
/// one if `widening`, else to a narrower one.
fn through_cast(g: &Graph, v: ValueId, widening: bool) -> Option<ValueId> {
    let n = g.node(v);
    let Op::Cast(to) = n.op else {
        return None;
    };
    let from = g.tensor_ty(n.args[0])?.dtype;
    let fits = from.is_float()
        && to.is_float()
        && if widening {
            to.size_bytes() > from.size_bytes()
        } else {
            to.size_bytes() < from.size_bytes()
        };
    fits.then_some(n.args[0])
}

fn is_scalar(g: &Graph, v: ValueId) -> bool {
    match g.ty(v) {
        Type::Scalar(k) => *k != ScalarKind::Bool,
        Type::Tensor(t) => t.dims.is_empty(),
    }
}

fn find(g: &Graph, uses: &[usize], at: ValueId) -> Match {
    let Op::MatMul { .. } = g.node(at).op else {
        return Match::No;
    };
    let (p, v) = (g.node(at).args[0], g.node(at).args[1]);
    // The stdlib's softmax of bf16 scores computes in fp32 and rounds P
    // once: p = cast<bf16>(e / sum(e)), x = cast<fp32>(scores). The
    // kernel does the same (P rounded when packed for the product).
    let (rounded, p) = match through_cast(g, p, false) {
        Some(inner) => (Some(p), inner),
        None => (None, p),
    };
    // p = e / sum(e), e = exp(x - max(x)), along the last axis.
    let Some((e, s)) = binary(g, p, BinaryOp::Div) else {
        return Match::No;
    };
    if last_axis_reduce(g, s, ReduceKind::Sum) != Some(e) {
        return Match::No;
    }
    let Op::Unary(UnaryOp::Exp) = g.node(e).op else {
        return Match::No;
    };
    let d = g.node(e).args[0];
    let Some((x, m)) = binary(g, d, BinaryOp::Sub) else {
        return Match::No;
    };
    if last_axis_reduce(g, m, ReduceKind::Max) != Some(x) {
        return Match::No;
    }
    let (widened, x) = match through_cast(g, x, true) {
        Some(inner) => (Some(x), inner),
        None => (None, x),
    };
    // x = scores * c, c * scores, scores / c, or the scores themselves.
    let (scores, scale) = match g.node(x).op {
        Op::Binary(BinaryOp::Mul) => {
            let [a, b] = [g.node(x).args[0], g.node(x).args[1]];
            if is_scalar(g, b) {
                (a, Scale::Mul(b))
            } else if is_scalar(g, a) {
                (b, Scale::Mul(a))
            } else {
                return Match::Rejected(
                    "the scores are multiplied by a tensor, not a scalar".into(),
                );
            }
        }
        Op::Binary(BinaryOp::Div) if is_scalar(g, g.node(x).args[1]) => {
            (g.node(x).args[0], Scale::Div(g.node(x).args[1]))
        }
        _ => (x, Scale::One),
    };
    let Op::MatMul { .. } = g.node(scores).op else {
        return Match::Rejected("the softmax input is not a matmul `q @ k.T`".into());
    };
    let scaled = !matches!(scale, Scale::One);
    let mut single = vec![(p, 1), (s, 1), (e, 2), (d, 1), (m, 1)];
    match widened {
        Some(c) => single.extend([(c, 2), (x, 1)]),
        None => single.push((x, 2)),
    }
    single.extend(rounded.map(|c| (c, 1)));
    for (val, want) in single {
        if uses[val.index()] != want {
            return Match::Rejected(format!(
                "%{} has uses outside the softmax; FlashAttention never materialises it",
                val.0
            ));
        }
    }
    if scaled && uses[scores.index()] != 1 {
        return Match::Rejected(format!(
            "the score matrix %{} has other uses; FlashAttention never materialises it",
            scores.0
        ));
    }
    let (q, kt) = (g.node(scores).args[0], g.node(scores).args[1]);
    let (k, k_transposed) = match g.node(kt).op {
        Op::Transpose => (g.node(kt).args[0], true),
        _ => (kt, false),
    };
    let sharded = [q, k, v]
        .iter()
        .any(|t| g.tensor_ty(*t).is_some_and(|t| t.shard.is_some()));
    if sharded {
        return Match::Rejected("the operands are sharded over a mesh".into());
    }
    Match::Yes(Found {
        q,
        k,
        k_transposed,
        v,
        scale,
    })
}

fn emit(r: &mut Rebuild<'_>, at: &Node, f: &Found) -> Result<ValueId, String> {
    let span = at.span;
    let q = r.get(f.q);
    let v = r.get(f.v);
    let mut k = r.get(f.k);
    if !f.k_transposed {
        let ty = transpose_ty(r.new.ty(k)).ok_or("k has rank < 2")?;
        k = r.new.push(Node {
            op: Op::Transpose,
            args: vec![k],
            ty,
            span,
        });
    }
    let float = |r: &mut Rebuild<'_>, x: f64| {
        r.new.push(Node {
            op: Op::Const(x),
            args: Vec::new(),
            ty: Type::Scalar(ScalarKind::Float),
            span,
        })
    };
    let scale = match f.scale {
        Scale::One => float(r, 1.0),
        Scale::Mul(c) => r.get(c),
        Scale::Div(c) => {
            let one = float(r, 1.0);
            let c = r.get(c);
            let ty = match r.new.ty(c) {
                Type::Tensor(t) => Type::Tensor(t.clone()),
                Type::Scalar(_) => Type::Scalar(ScalarKind::Float),
            };
            r.new.push(Node {
                op: Op::Binary(BinaryOp::Div),
                args: vec![one, c],
                ty,
                span,
            })
        }
    };
    let acc = match at.op {
        Op::MatMul { acc, .. } => acc,
        _ => unreachable!("matched on a matmul"),
    };
    let op = Op::Attention {
        acc,
        causal: false,
        bottom_right: false,
    };
    let args = vec![q, k, v, scale];
    let tys: Vec<&Type> = args.iter().map(|a| r.new.ty(*a)).collect();
    let ty = infer(&op, &tys, &r.new.params)
        .map_err(|e| e.message)?
        .ok_or("attention has no type")?;
    if ty != at.ty {
        return Err(format!("the fused type `{ty}` differs from `{}`", at.ty));
    }
    Ok(r.new.push(Node { op, args, ty, span }))
}

fn transpose_ty(t: &Type) -> Option<Type> {
    let mut t = t.tensor()?.clone();
    let r = t.rank();
    if r < 2 {
        return None;
    }
    t.dims.swap(r - 2, r - 1);
    Some(Type::Tensor(t))
}

//! The type rules of Graph IR ops: result shape, dtype and shard spec from
//! the operands. The builder uses them to type the nodes it makes, and the
//! verifier to check that every node's type is the one its op implies.
//!
//! These rules assume a program the checker accepted; they report violations
//! as [`InferError`]s, which the builder turns into diagnostics: a misfit of
//! sizes the checker could not compare (`x[D/2:D] * c` at an odd `D`) is the
//! user's, anything else a compiler bug.

use crate::ir::{CollectiveKind, Op, Param, ScalarKind, SliceAxis, Type};
use tessera_sema::{AxisRef, Dim, Shard, TensorTy};
use tessera_syntax::ast::Dtype;

/// Why an op does not apply to its operands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InferError {
    /// What is wrong, in words.
    pub message: String,
    /// Whether it is a misfit of extents (broadcasting, a matmul's inner
    /// dimensions, a slice past the end, ...) rather than a malformed op:
    /// the checker leaves some extents to the sizes of each call.
    pub misfit: bool,
}

impl InferError {
    /// A misfit of extents.
    fn misfit(message: String) -> InferError {
        InferError {
            message,
            misfit: true,
        }
    }
}

impl From<String> for InferError {
    fn from(message: String) -> InferError {
        InferError {
            message,
            misfit: false,
        }
    }
}

impl From<&str> for InferError {
    fn from(message: &str) -> InferError {
        InferError::from(message.to_owned())
    }
}

impl std::fmt::Display for InferError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// The type `op` produces on operands of types `args`, or `None` for ops
/// whose result type is part of the op itself (constants, reshapes, kernel
/// calls), which the caller takes from the node.
pub fn infer(op: &Op, args: &[&Type], params: &[Param]) -> Result<Option<Type>, InferError> {
    let arity = |n: usize| -> Result<(), String> {
        if args.len() == n {
            Ok(())
        } else {
            Err(format!("expects {n} operands, has {}", args.len()))
        }
    };
    let ty = match op {
        Op::Param(n) => {
            arity(0)?;
            let p = params
                .get(*n)
                .ok_or_else(|| format!("parameter {n} does not exist"))?;
            p.ty.clone()
        }
        Op::Const(_) | Op::Reshape | Op::Kernel { .. } | Op::Scatter { .. } => return Ok(None),
        // Its length is its own (given by the builder).
        Op::Arange { .. } | Op::Rand { .. } => {
            arity(0)?;
            return Ok(None);
        }
        Op::KernelOut(_) => {
            arity(1)?;
            return Ok(None);
        }
        Op::DimSize(_) => {
            arity(0)?;
            Type::Scalar(ScalarKind::Int)
        }
        Op::Unary(u) => {
            arity(1)?;
            match args[0] {
                Type::Scalar(k) => Type::Scalar(if u.is_transcendental() {
                    ScalarKind::Float
                } else {
                    *k
                }),
                Type::Tensor(t) => {
                    if u.is_transcendental() && !t.dtype.is_float() {
                        return Err(format!("`{}` of a `{}` tensor", u.name(), t.dtype).into());
                    }
                    Type::Tensor(t.clone())
                }
            }
        }
        Op::Binary(b) => {
            arity(2)?;
            let bool_result = b.is_comparison();
            elementwise(args, bool_result)?
        }
        Op::Select => {
            arity(3)?;
            let value = elementwise(&args[1..], false)?;
            if let Type::Tensor(c) = args[0] {
                if c.dtype != Dtype::Bool {
                    return Err("select condition is not boolean".into());
                }
            }
            match (&value, args[0]) {
                (Type::Tensor(v), Type::Tensor(c)) => {
                    let dims = broadcast(&v.dims, &c.dims).map_err(InferError::misfit)?;
                    let shard = merge_shards(&[v, c], dims.len());
                    Type::Tensor(TensorTy {
                        dims,
                        dtype: v.dtype,
                        shard,
                    })
                }
                // Scalars under a tensor condition take its shape, in the
                // scalars' default dtype (as the checker types it).
                (Type::Scalar(k), Type::Tensor(c)) => Type::Tensor(TensorTy {
                    dims: c.dims.clone(),
                    dtype: match k {
                        ScalarKind::Float => Dtype::Fp32,
                        ScalarKind::Int => Dtype::Int32,
                        ScalarKind::Bool => Dtype::Bool,
                    },
                    shard: c.shard.clone(),
                }),
                _ => value,
            }
        }
        Op::Cast(d) => {
            arity(1)?;
            match args[0] {
                Type::Tensor(t) => Type::Tensor(TensorTy {
                    dtype: *d,
                    ..t.clone()
                }),
                Type::Scalar(_) => Type::Scalar(scalar_kind(*d)),
            }
        }
        Op::Reduce {
            kind,
            axis,
            keepdims,
            ..
        } => {
            arity(1)?;
            let t = tensor(args[0])?;
            if *axis >= t.rank() {
                return Err(InferError::misfit(format!(
                    "axis {axis} of a rank-{} tensor",
                    t.rank()
                )));
            }
            let mut dims = t.dims.clone();
            if *keepdims {
                dims[*axis] = Dim::known(1);
            } else {
                dims.remove(*axis);
            }
            let shard = t.shard.as_ref().map(|s| {
                let mut s = s.clone();
                let split = s.dims[*axis].take();
                if let Some(a) = split {
                    if matches!(
                        kind,
                        crate::ir::ReduceKind::Sum | crate::ir::ReduceKind::Mean
                    ) {
                        s.partial.push(a);
                        s.partial.sort();
                    }
                }
                if !*keepdims {
                    s.dims.remove(*axis);
                }
                s
            });
            Type::Tensor(TensorTy {
                dims,
                dtype: t.dtype,
                shard,
            })
        }
        Op::MatMul { .. } => {
            arity(2)?;
            let (a, b) = (tensor(args[0])?, tensor(args[1])?);
            matmul(a, b)?
        }
        Op::Transpose => {
            arity(1)?;
            let t = tensor(args[0])?;
            let r = t.rank();
            if r < 2 {
                return Err("transpose of a tensor of rank < 2".into());
            }
            let mut t = t.clone();
            t.dims.swap(r - 2, r - 1);
            if let Some(s) = &mut t.shard {
                s.dims.swap(r - 2, r - 1);
            }
            Type::Tensor(t)
        }
        Op::Scan { kind, axis, .. } => {
            arity(1)?;
            let t = tensor(args[0])?;
            if *axis >= t.rank() {
                return Err(
                    format!("{} along axis {axis} of rank {}", kind.name(), t.rank()).into(),
                );
            }
            Type::Tensor(TensorTy::new(t.dims.clone(), t.dtype))
        }
        Op::Argsort { axis, .. } | Op::Merge { axis, .. } => {
            let merge = matches!(op, Op::Merge { .. });
            arity(1 + usize::from(merge))?;
            let t = tensor(args[0])?;
            if *axis >= t.rank() {
                return Err(format!("argsort along axis {axis} of rank {}", t.rank()).into());
            }
            if merge {
                let p = tensor(args[1])?;
                if p.dims != t.dims || p.dtype != Dtype::Int32 {
                    return Err("a merge takes int32 positions of its operand's shape".into());
                }
            }
            Type::Tensor(TensorTy::new(t.dims.clone(), Dtype::Int32))
        }
        Op::Concat { axis } => {
            let ts = args
                .iter()
                .map(|a| tensor(a))
                .collect::<Result<Vec<_>, _>>()?;
            let first = ts.first().ok_or("concat of nothing")?;
            if *axis >= first.rank() {
                return Err(format!("concat along axis {axis} of rank {}", first.rank()).into());
            }
            let mut along = Some(first.dims[*axis].clone());
            for t in &ts[1..] {
                let agree = t.rank() == first.rank()
                    && t.dims
                        .iter()
                        .zip(&first.dims)
                        .enumerate()
                        .all(|(d, (a, b))| d == *axis || a == b);
                if t.dtype != first.dtype {
                    return Err(format!("concat of {first} and {t} along axis {axis}").into());
                }
                if !agree {
                    return Err(InferError::misfit(format!(
                        "concat of {first} and {t} along axis {axis}"
                    )));
                }
                along = along.and_then(|a| a.add(&t.dims[*axis]));
            }
            let mut out = TensorTy::new(first.dims.clone(), first.dtype);
            out.dims[*axis] = along.unwrap_or(Dim::Unknown);
            Type::Tensor(out)
        }
        Op::Gather { axis } | Op::Take { axis } => {
            arity(2)?;
            let (x, i) = (tensor(args[0])?, tensor(args[1])?);
            if !i.dtype.is_int() || *axis >= x.rank() {
                return Err(format!("gather or take of {x} at {i} along axis {axis}").into());
            }
            let dims = if matches!(op, Op::Gather { .. }) {
                let larger = i.dims.iter().zip(&x.dims).enumerate().any(|(d, (a, b))| {
                    d != *axis
                        && matches!((a.as_known(), b.as_known()), (Some(a), Some(b)) if a > b)
                });
                if i.rank() != x.rank() || larger {
                    return Err(InferError::misfit(format!(
                        "gather of {x} at {i}: the index needs x's rank and no dim but \
                         axis {axis} larger than x's"
                    )));
                }
                i.dims.clone()
            } else {
                let mut d = x.dims[..*axis].to_vec();
                d.extend(i.dims.iter().cloned());
                d.extend(x.dims[axis + 1..].iter().cloned());
                d
            };
            Type::Tensor(TensorTy::new(dims, x.dtype))
        }
        Op::Permute(perm) => {
            arity(1)?;
            let t = tensor(args[0])?;
            let mut sorted = perm.clone();
            sorted.sort_unstable();
            if sorted != (0..t.rank()).collect::<Vec<_>>() {
                return Err(format!("{perm:?} is not a permutation of {} axes", t.rank()).into());
            }
            let mut out = t.clone();
            out.dims = perm.iter().map(|&d| t.dims[d].clone()).collect();
            if let (Some(s), Some(o)) = (&t.shard, &mut out.shard) {
                o.dims = perm.iter().map(|&d| s.dims[d].clone()).collect();
            }
            Type::Tensor(out)
        }
        Op::Slice(axes) => {
            arity(1)?;
            let t = tensor(args[0])?;
            if axes.len() > t.rank() {
                return Err(format!("{} slice axes for rank {}", axes.len(), t.rank()).into());
            }
            let mut dims = Vec::new();
            let mut sdims = Vec::new();
            for (i, d) in t.dims.iter().enumerate() {
                let axis = t.dim_axis(i).cloned();
                match axes.get(i).copied().unwrap_or(SliceAxis::Full) {
                    SliceAxis::Index(k) => {
                        if d.as_known().is_some_and(|n| k >= n) {
                            return Err(InferError::misfit(format!(
                                "index {k} out of bounds of dimension {d}"
                            )));
                        }
                    }
                    SliceAxis::Range(lo, hi) => {
                        if hi <= lo || d.as_known().is_some_and(|n| hi > n) {
                            return Err(InferError::misfit(format!(
                                "range {lo}..{hi} out of bounds of {d}"
                            )));
                        }
                        dims.push(Dim::known(hi - lo));
                        sdims.push(axis);
                    }
                    SliceAxis::Full => {
                        dims.push(d.clone());
                        sdims.push(axis);
                    }
                }
            }
            let shard = t.shard.as_ref().map(|s| Shard {
                dims: sdims,
                partial: s.partial.clone(),
            });
            Type::Tensor(TensorTy {
                dims,
                dtype: t.dtype,
                shard,
            })
        }
        Op::Conv2d { geom, .. } => {
            arity(2)?;
            let (x, w) = (tensor(args[0])?, tensor(args[1])?);
            if x.rank() != 4 || w.rank() != 4 {
                return Err("conv2d needs rank-4 input and weights".into());
            }
            let g = geom.groups.max(1);
            if let (Some(c), Some(cg)) = (x.dims[1].as_known(), w.dims[1].as_known()) {
                if c != cg.saturating_mul(g) {
                    return Err(InferError::misfit(format!(
                        "channels {c} != {cg} per group x {g} groups"
                    )));
                }
            } else if g == 1 && x.dims[1] != w.dims[1] {
                return Err(InferError::misfit(format!(
                    "channels {} != {}",
                    x.dims[1], w.dims[1]
                )));
            }
            if let Some(o) = w.dims[0].as_known() {
                if o % g != 0 {
                    return Err(InferError::misfit(format!(
                        "{o} output channels in {g} groups"
                    )));
                }
            }
            let out = |a: usize, n: &Dim, k: &Dim| -> Result<Dim, InferError> {
                match (n.as_known(), k.as_known()) {
                    (Some(n), Some(k)) => geom.out(a, n, k).map(Dim::known).ok_or_else(|| {
                        InferError::misfit(format!(
                            "a kernel of {k} (dilation {}) is larger than the input of {n} \
                             padded by {} on each side",
                            geom.dilation[a], geom.padding[a]
                        ))
                    }),
                    _ => Ok(Dim::Unknown),
                }
            };
            Type::Tensor(TensorTy::new(
                vec![
                    x.dims[0].clone(),
                    w.dims[0].clone(),
                    out(0, &x.dims[2], &w.dims[2])?,
                    out(1, &x.dims[3], &w.dims[3])?,
                ],
                x.dtype,
            ))
        }
        Op::Collective { kind, axis } => {
            arity(1)?;
            let t = tensor(args[0])?;
            Type::Tensor(collective(t, kind, axis)?)
        }
        Op::Attention { .. } => {
            arity(4)?;
            let (q, k, v) = (tensor(args[0])?, tensor(args[1])?, tensor(args[2])?);
            if args[3].tensor().is_some_and(|s| s.rank() != 0) {
                return Err("attention scale must be a scalar".into());
            }
            let r = q.rank();
            if r < 2 || k.rank() != r || v.rank() != r {
                return Err("attention operands must share a rank >= 2".into());
            }
            if k.dims[..r - 2] != v.dims[..r - 2] {
                return Err("attention key and value batch dimensions differ".into());
            }
            for (a, b) in q.dims[..r - 2].iter().zip(&k.dims[..r - 2]) {
                if !b.may_divide(a) {
                    return Err(format!(
                        "attention batch dimension {b} of k neither equals nor divides {a} of q"
                    )
                    .into());
                }
            }
            if q.dims[r - 1] != k.dims[r - 1] || k.dims[r - 2] != v.dims[r - 2] {
                return Err(InferError::misfit(
                    "attention inner dimensions differ".into(),
                ));
            }
            if q.dtype != k.dtype || k.dtype != v.dtype {
                return Err("attention operands differ in dtype".into());
            }
            let mut dims = q.dims.clone();
            dims[r - 1] = v.dims[r - 1].clone();
            Type::Tensor(TensorTy::new(dims, q.dtype))
        }
    };
    Ok(Some(ty))
}

/// The scalar kind a dtype converts a scalar to.
pub fn scalar_kind(d: Dtype) -> ScalarKind {
    if d.is_float() {
        ScalarKind::Float
    } else if d == Dtype::Bool {
        ScalarKind::Bool
    } else {
        ScalarKind::Int
    }
}

fn tensor(t: &Type) -> Result<&TensorTy, String> {
    t.tensor()
        .ok_or_else(|| format!("expects a tensor, has `{t}`"))
}

/// numpy broadcasting of two shapes, aligned at the right.
pub fn broadcast(a: &[Dim], b: &[Dim]) -> Result<Vec<Dim>, String> {
    let rank = a.len().max(b.len());
    let mut out = Vec::with_capacity(rank);
    for i in 0..rank {
        let da = (i + a.len()).checked_sub(rank).map(|j| &a[j]);
        let db = (i + b.len()).checked_sub(rank).map(|j| &b[j]);
        out.push(match (da, db) {
            (Some(x), None) | (None, Some(x)) => x.clone(),
            (Some(x), Some(y)) if x == y || y.is_one() => x.clone(),
            (Some(x), Some(y)) if x.is_one() => y.clone(),
            (Some(x), Some(y)) => return Err(format!("cannot broadcast {x} with {y}")),
            (None, None) => unreachable!("i < rank"),
        });
    }
    Ok(out)
}

/// The result of an elementwise op on tensors and scalars.
fn elementwise(args: &[&Type], bool_result: bool) -> Result<Type, InferError> {
    let tensors: Vec<&TensorTy> = args.iter().filter_map(|t| t.tensor()).collect();
    if tensors.is_empty() {
        let kinds: Vec<ScalarKind> = args
            .iter()
            .map(|t| match t {
                Type::Scalar(k) => *k,
                Type::Tensor(_) => unreachable!("no tensors"),
            })
            .collect();
        let kind = if bool_result || kinds.iter().all(|k| *k == ScalarKind::Bool) {
            ScalarKind::Bool
        } else if kinds.contains(&ScalarKind::Float) {
            ScalarKind::Float
        } else {
            ScalarKind::Int
        };
        return Ok(Type::Scalar(kind));
    }
    let dtype = tensors[0].dtype;
    if let Some(t) = tensors.iter().find(|t| t.dtype != dtype) {
        return Err(format!("operand dtypes differ: {} and {}", dtype, t.dtype).into());
    }
    let mut dims = tensors[0].dims.clone();
    for t in &tensors[1..] {
        dims = broadcast(&dims, &t.dims).map_err(InferError::misfit)?;
    }
    let shard = merge_shards(&tensors, dims.len());
    Ok(Type::Tensor(TensorTy {
        dims,
        dtype: if bool_result { Dtype::Bool } else { dtype },
        shard,
    }))
}

/// The shard spec of an elementwise result of `rank` dimensions: each
/// dimension is split the way an operand (aligned at the right) splits it,
/// and partial sums carry through.
fn merge_shards(tensors: &[&TensorTy], rank: usize) -> Option<Shard> {
    if tensors.iter().all(|t| t.shard.is_none()) {
        return None;
    }
    let mut out = Shard::replicated(rank);
    for t in tensors {
        let Some(s) = &t.shard else { continue };
        for (j, axis) in s.dims.iter().enumerate() {
            let i = rank - t.rank() + j;
            if out.dims[i].is_none() {
                out.dims[i] = axis.clone();
            }
        }
        for p in &s.partial {
            if !out.partial.contains(p) {
                out.partial.push(p.clone());
            }
        }
    }
    out.partial.sort();
    Some(out)
}

fn matmul(a: &TensorTy, b: &TensorTy) -> Result<Type, InferError> {
    let (ra, rb) = (a.rank(), b.rank());
    if ra < 2 || rb < 2 {
        return Err("matmul needs rank >= 2".into());
    }
    if a.dims[ra - 1] != b.dims[rb - 2] {
        return Err(InferError::misfit(format!(
            "inner dimensions differ: {} and {}",
            a.dims[ra - 1],
            b.dims[rb - 2]
        )));
    }
    if a.dtype != b.dtype {
        return Err(format!("dtypes differ: {} and {}", a.dtype, b.dtype).into());
    }
    let batch = broadcast(&a.dims[..ra - 2], &b.dims[..rb - 2]).map_err(InferError::misfit)?;
    let dtype = tessera_core::Dtype::matmul_result(a.dtype);
    let mut dims = batch.clone();
    dims.push(a.dims[ra - 2].clone());
    dims.push(b.dims[rb - 1].clone());
    let shard = if a.shard.is_none() && b.shard.is_none() {
        None
    } else {
        let axis_a = |i: usize| a.dim_axis(i).cloned();
        let axis_b = |i: usize| b.dim_axis(i).cloned();
        let mut s = Shard::replicated(dims.len());
        for (i, slot) in s.dims.iter_mut().enumerate().take(batch.len()) {
            let from_a = (i + ra - 2).checked_sub(batch.len()).and_then(axis_a);
            *slot = from_a.or_else(|| (i + rb - 2).checked_sub(batch.len()).and_then(axis_b));
        }
        let n = dims.len();
        s.dims[n - 2] = axis_a(ra - 2);
        s.dims[n - 1] = axis_b(rb - 1);
        let mut partial: Vec<AxisRef> = a.partial().to_vec();
        partial.extend(b.partial().iter().cloned());
        if let (Some(x), Some(y)) = (axis_a(ra - 1), axis_b(rb - 2)) {
            if x == y {
                partial.push(x);
            }
        }
        partial.sort();
        partial.dedup();
        s.partial = partial;
        Some(s)
    };
    Ok(Type::Tensor(TensorTy { dims, dtype, shard }))
}

fn collective(t: &TensorTy, kind: &CollectiveKind, axis: &AxisRef) -> Result<TensorTy, String> {
    let mut out = t.clone();
    let Some(s) = &mut out.shard else {
        return Ok(out);
    };
    let check_dim = |d: usize| {
        if d < t.rank() {
            Ok(())
        } else {
            Err(format!("dimension {d} of a rank-{} tensor", t.rank()))
        }
    };
    match kind {
        CollectiveKind::AllReduce => s.partial.retain(|p| p != axis),
        CollectiveKind::AllGather => {
            for d in &mut s.dims {
                if d.as_ref() == Some(axis) {
                    *d = None;
                }
            }
        }
        CollectiveKind::ReduceScatter { dim } => {
            check_dim(*dim)?;
            s.partial.retain(|p| p != axis);
            s.dims[*dim] = Some(axis.clone());
        }
        CollectiveKind::AllToAll {
            split_dim,
            concat_dim,
        } => {
            check_dim(*split_dim)?;
            check_dim(*concat_dim)?;
            s.dims[*concat_dim] = None;
            s.dims[*split_dim] = Some(axis.clone());
        }
        CollectiveKind::Send { .. } | CollectiveKind::Recv { .. } => {}
    }
    Ok(out)
}

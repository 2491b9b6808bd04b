//! Typing indexing: constant indices and slices (with steps and `None`
//! axes), numpy's integer-array indexing along one axis (`x[ids]`), and its
//! paired indices (`x[rows, cols]`).

use super::{Body, Cx, Val};
use crate::table::BodyKind;
use crate::ty::{Const, Dim, Shard, TensorTy, Ty};
use tessera_diagnostics::{codes, Diagnostic, Span};
use tessera_syntax::ast::{self, IndexArg};

impl Cx<'_, '_> {
    /// `x[ids]` or `x[:, ids]` in an op or host code: one index that is
    /// an integer tensor, every other a full `:`, picks along that axis
    /// (numpy's integer-array indexing, `take(x, ids, axis)`; an embedding
    /// is `table[ids]`). `None` when the indices are not of that form.
    fn tensor_index(&mut self, body: &mut Body, t: &TensorTy, indices: &[IndexArg]) -> Option<Val> {
        if body.kind == BodyKind::Kernel {
            return None;
        }
        let (axis, e) = IndexArg::sole_expr(indices)?;
        let errors = self.diags.error_count();
        let v = self.expr(body, e);
        if self.diags.error_count() > errors || v.is_error() {
            return Some(Val::error());
        }
        let Ty::Tensor(it) = &v.ty else {
            // A number: indexed as usual (evaluated again, without errors).
            return None;
        };
        if !it.dtype.is_int() || axis >= t.rank() {
            self.error(
                Diagnostic::error(codes::E0210, e.span, "indices must be integers")
                    .with_label(format!("this is a `{}` tensor", it.dtype))
                    .with_help(index_help(it.dtype)),
            );
            return Some(Val::error());
        }
        let mut dims = t.dims[..axis].to_vec();
        dims.extend(it.dims.iter().cloned());
        dims.extend(t.dims[axis + 1..].iter().cloned());
        Some(Val::of(Ty::Tensor(TensorTy::new(dims, t.dtype))))
    }

    /// `x[rows, cols]`, `x[ids, 0]` in an op or host code: two or more
    /// indices that are integers or integer tensors, one a tensor at least,
    /// every other a full `:` (numpy's paired, or advanced, indexing). The
    /// index tensors broadcast together, one element picked per position
    /// of their shape, which takes the place of the indexed axes where
    /// these are adjacent and comes first otherwise. `None` when the
    /// indices are not of that form.
    fn paired_index(&mut self, body: &mut Body, t: &TensorTy, indices: &[IndexArg]) -> Option<Val> {
        if body.kind == BodyKind::Kernel || indices.len() > t.rank() {
            return None;
        }
        let exprs = IndexArg::paired_exprs(indices)?;
        let errors = self.diags.error_count();
        let vals: Vec<Val> = exprs.iter().map(|(_, e)| self.expr(body, e)).collect();
        if self.diags.error_count() > errors || vals.iter().any(Val::is_error) {
            return Some(Val::error());
        }
        if !vals.iter().any(|v| matches!(v.ty, Ty::Tensor(_))) {
            // Numbers only: indexed as usual (evaluated again).
            return None;
        }
        let mut shape: Option<(TensorTy, Span)> = None;
        for ((axis, e), v) in exprs.iter().zip(&vals) {
            match &v.ty {
                Ty::Tensor(it) if it.dtype.is_int() => {
                    shape = match shape {
                        None => Some((it.clone(), e.span)),
                        Some((s, at)) => {
                            let Some(dims) =
                                self.broadcast(&s.dims, &it.dims, e.span, at, e.span, &s, it)
                            else {
                                return Some(Val::error());
                            };
                            Some((TensorTy::new(dims, it.dtype), at.to(e.span)))
                        }
                    };
                }
                Ty::Int => {
                    let k = v.konst.as_ref().and_then(Const::as_int);
                    if let (Some(k), Some(n)) = (k, t.dims[*axis].as_known()) {
                        if !(-(n as i64)..n as i64).contains(&k) {
                            self.error(
                                Diagnostic::error(
                                    codes::E0210,
                                    e.span,
                                    format!("index {k} is out of bounds for dimension {axis}"),
                                )
                                .with_label(format!("dimension {axis} has size {n}")),
                            );
                            return Some(Val::error());
                        }
                    }
                }
                other => {
                    let what = match other {
                        Ty::Tensor(it) => format!("this is a `{}` tensor", it.dtype),
                        other => format!("this is {}", other.describe()),
                    };
                    let help = match other {
                        Ty::Tensor(it) => index_help(it.dtype),
                        _ => "index with integers or integer tensors",
                    };
                    self.error(
                        Diagnostic::error(codes::E0210, e.span, "indices must be integers")
                            .with_label(what)
                            .with_help(help),
                    );
                    return Some(Val::error());
                }
            }
        }
        let picked = shape.map(|(s, _)| s.dims).unwrap_or_default();
        let axes: Vec<usize> = exprs.iter().map(|(a, _)| *a).collect();
        let adjacent = axes.windows(2).all(|w| w[1] == w[0] + 1);
        let rest = (0..t.rank()).filter(|a| !axes.contains(a));
        let dims: Vec<Dim> = if adjacent {
            let before = t.dims[..axes[0]].iter().cloned();
            let after = t.dims[axes[axes.len() - 1] + 1..].iter().cloned();
            before.chain(picked).chain(after).collect()
        } else {
            picked
                .into_iter()
                .chain(rest.map(|a| t.dims[a].clone()))
                .collect()
        };
        Some(Val::of(Ty::Tensor(TensorTy::new(dims, t.dtype))))
    }

    /// The type of `base[indices]`.
    pub(crate) fn index(
        &mut self,
        body: &mut Body,
        base: Val,
        indices: &[IndexArg],
        span: Span,
    ) -> Val {
        let t = match base.ty {
            Ty::Error => {
                for i in indices {
                    if let IndexArg::Expr(e) = i {
                        self.expr(body, e);
                    }
                }
                return Val::error();
            }
            Ty::Tensor(t) => t,
            other => {
                self.error(
                    Diagnostic::error(
                        codes::E0210,
                        span,
                        format!("cannot index {}", other.describe()),
                    )
                    .with_label("not a tensor"),
                );
                return Val::error();
            }
        };
        let mut dots = (indices.iter()).filter_map(|i| match i {
            IndexArg::Ellipsis(at) => Some(*at),
            _ => None,
        });
        if let (Some(first), Some(second)) = (dots.next(), dots.next()) {
            self.error(
                Diagnostic::error(codes::E0210, second, "an index has one `...` at most")
                    .with_label("a second `...`")
                    .with_secondary(first, "the first is here")
                    .with_help("`...` stands for every axis the other entries leave"),
            );
            return Val::error();
        }
        let indices = &*IndexArg::expand_ellipsis(indices, t.rank());
        if let Some(v) = self.tensor_index(body, &t, indices) {
            return v;
        }
        if let Some(v) = self.paired_index(body, &t, indices) {
            return v;
        }
        let errors_before = self.diags.error_count();
        let consumed = indices.iter().filter(|i| i.consumes_axis()).count();
        if body.kind == BodyKind::Kernel {
            // A tile is held by the program: it is reshaped, never
            // sliced (elements are selected by `load`'s index tiles).
            let bad = indices.iter().find_map(|i| match i {
                IndexArg::Expr(e) => Some(e.span),
                IndexArg::Slice { lo, hi, step, span }
                    if lo.is_some() || hi.is_some() || step.is_some() =>
                {
                    Some(*span)
                }
                _ => None,
            });
            if let Some(at) = bad {
                self.error(
                    Diagnostic::error(
                        codes::E0210,
                        at,
                        "a tile in a kernel is indexed only with `:` and `None`",
                    )
                    .with_label("selects elements of a tile")
                    .with_help(
                        "`x[:, None]` and `x[None, :]` add an axis of extent 1; select \
                         elements with the index tiles of `load`",
                    ),
                );
                return Val::error();
            }
        }
        if consumed > t.rank() {
            self.error(
                Diagnostic::error(
                    codes::E0210,
                    span,
                    format!("{consumed} indices for a tensor of rank {}", t.rank()),
                )
                .with_label(format!("this is `{t}`")),
            );
            return Val::error();
        }
        let mut dims = Vec::new();
        let mut axes = Vec::new();
        let mut i = 0;
        for index in indices {
            if let IndexArg::NewAxis(_) = index {
                dims.push(Dim::known(1));
                axes.push(None);
                continue;
            }
            i += 1;
            let i = i - 1;
            let size = t.dims[i].as_known();
            // The end of a slice, when it is symbolic (`0:D/2`), as a dim.
            let symbolic_end = std::cell::RefCell::new(None);
            let mut bound = |cx: &mut Self, e: &ast::Expr, inclusive_end: bool| -> Option<i64> {
                let v = cx.expr(body, e);
                if inclusive_end {
                    *symbolic_end.borrow_mut() = v.dim.clone();
                }
                if let Ty::Tensor(it) = &v.ty {
                    if it.dtype.is_int() && !inclusive_end {
                        cx.error(
                            Diagnostic::error(
                                codes::E0210,
                                e.span,
                                "an index tensor goes with integers, other index tensors and full `:` slices only",
                            )
                            .with_label(format!("this is `{it}`"))
                            .with_help(
                                "`x[ids]`, `x[:, ids]` and `x[rows, cols]` pick elements \
                                 (numpy's integer-array indexing); slice or add axes \
                                 before or after picking: `x[:, 1:5][ids]`, `x[ids][:, None]`",
                            ),
                        );
                        return None;
                    }
                }
                if !matches!(v.ty, Ty::Int | Ty::Error) {
                    cx.error(
                        Diagnostic::error(codes::E0210, e.span, "indices must be integers")
                            .with_label(format!("this is {}", v.ty.describe())),
                    );
                    return None;
                }
                let k = v.konst.as_ref().and_then(Const::as_int)?;
                let limit = size.map(|s| s as i64);
                // A negative index counts from the end (`-1` is the last).
                let ok = match limit {
                    Some(s) => {
                        if inclusive_end {
                            (-s..=s).contains(&k)
                        } else {
                            (-s..s).contains(&k)
                        }
                    }
                    None => true,
                };
                if !ok {
                    cx.error(
                        Diagnostic::error(
                            codes::E0210,
                            e.span,
                            format!("index {k} is out of bounds for dimension {i}"),
                        )
                        .with_label(format!("dimension {i} has size {}", t.dims[i])),
                    );
                }
                Some(k)
            };
            match index {
                IndexArg::Expr(e) => {
                    bound(self, e, false);
                }
                IndexArg::NewAxis(_) | IndexArg::Ellipsis(_) => unreachable!("handled above"),
                IndexArg::Slice { lo, hi, step, span } => {
                    let l = lo.as_ref().map_or(Some(0), |e| bound(self, e, true));
                    let h = match hi {
                        Some(e) => bound(self, e, true),
                        None => None,
                    };
                    let end = symbolic_end.borrow_mut().take().filter(|_| hi.is_some());
                    // Negative bounds from the end, where the size is known;
                    // `-k:` is k long whatever the size.
                    let from_end = |x: Option<i64>| match (x, size) {
                        (Some(x), Some(s)) if x < 0 => Some(x + s as i64),
                        (Some(x), None) if x < 0 => None,
                        (x, _) => x,
                    };
                    if let (Some(l), None, None) = (l, size, hi) {
                        if l < 0 {
                            dims.push(Dim::known(l.unsigned_abs()));
                            axes.push(t.dim_axis(i).cloned());
                            continue;
                        }
                    }
                    let negative = l.is_some_and(|x| x < 0) || h.is_some_and(|x| x < 0);
                    let (l, h) = (from_end(l), from_end(h));
                    let end = end.filter(|_| !negative);
                    let dim = match (l, h, hi) {
                        (Some(0), None, Some(_))
                            if end.as_ref().is_some_and(|d| !matches!(d, Dim::Unknown)) =>
                        {
                            end.unwrap_or(Dim::Unknown)
                        }
                        (Some(l), Some(h), _) if h > l => Dim::known((h - l) as u64),
                        (Some(l), Some(h), _) => {
                            self.error(
                                Diagnostic::error(
                                    codes::E0210,
                                    *span,
                                    format!("empty slice {l}:{h}"),
                                )
                                .with_label("the end must be greater than the start"),
                            );
                            return Val::error();
                        }
                        (Some(0), None, None) => t.dims[i].clone(),
                        (Some(l), None, None) => match size {
                            Some(s) if (l as u64) < s => Dim::known(s - l as u64),
                            _ => Dim::Unknown,
                        },
                        _ => Dim::Unknown,
                    };
                    // Every `step`-th element: ceil(extent / step) of them.
                    let dim = match step {
                        None => dim,
                        Some(e) => {
                            let v = self.expr(body, e);
                            match v.konst.as_ref().and_then(Const::as_int) {
                                Some(1) | Some(-1) if lo.is_none() && hi.is_none() => dim,
                                Some(1) => dim,
                                Some(k) if k > 1 || (k < 0 && lo.is_none() && hi.is_none()) => {
                                    match dim.as_known() {
                                        Some(n) => Dim::known(n.div_ceil(k.unsigned_abs())),
                                        None => Dim::Unknown,
                                    }
                                }
                                konst => {
                                    let label = match konst {
                                        Some(k) if k < 0 => {
                                            "a negative step with bounds".to_owned()
                                        }
                                        Some(_) => "a step of 0".to_owned(),
                                        None => format!("this is {}", v.ty.describe()),
                                    };
                                    self.error(
                                        Diagnostic::error(
                                            codes::E0210,
                                            e.span,
                                            "a slice's step is an integer constant: positive, or negative over the whole axis",
                                        )
                                        .with_label(label)
                                        .with_help("`x[0::2]` takes every other element, `x[::-1]` reverses (as `flip(x, axis)`); reverse first, then slice"),
                                    );
                                    return Val::error();
                                }
                            }
                        }
                    };
                    dims.push(dim);
                    axes.push(t.dim_axis(i).cloned());
                }
            }
        }
        if self.diags.error_count() > errors_before {
            // An index was reported: no type to carry on with.
            return Val::error();
        }
        dims.extend(t.dims[consumed..].iter().cloned());
        for j in consumed..t.rank() {
            axes.push(t.dim_axis(j).cloned());
        }
        let shard = t.shard.as_ref().map(|s| Shard {
            dims: axes,
            partial: s.partial.clone(),
        });
        Val::of(Ty::Tensor(TensorTy {
            dims,
            dtype: t.dtype,
            shard,
        }))
    }
}

/// The help for an index tensor of `dtype`, which is not an integer one: a
/// mask (torch's `x[mask]`) keeps a count of elements known only at run
/// time, which a tensor of static shape cannot hold.
fn index_help(dtype: tessera_syntax::ast::Dtype) -> &'static str {
    if dtype == tessera_syntax::ast::Dtype::Bool {
        "a mask picks a number of elements known only at run time: keep the shape and \
         zero the rest with `where(mask, x, 0)` (or `masked_fill(x, !mask, 0)`), or \
         count them with `sum(mask as int32)`; converting the mask to integers would \
         pick elements 0 and 1"
    } else {
        "convert it: `ids as int32`"
    }
}

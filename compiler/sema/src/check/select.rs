//! The type rules of the primitives that reorder, join, cut and select
//! elements: `permute`, `concat`, `stack`, `split`, `chunk`, `gather`,
//! `take` and `topk`.

use super::bind::Bound;
use super::call::tensor;
use super::{Cx, Val};
use crate::ty::{Const, Dim, Shard, TensorTy, Ty};
use tessera_diagnostics::{codes, Diagnostic, Span};

impl Cx<'_, '_> {
    /// `permute(x, dims)`: `dims` a constant permutation of x's axes.
    /// `transpose(x, dim0, dim1)`: x with those two axes swapped (torch's
    /// transpose; the last two by default, as `x.T`).
    pub(super) fn swap_axes(&mut self, x: &Bound, dim0: &Bound, dim1: &Bound) -> Val {
        let t = match &x.val.ty {
            Ty::Tensor(t) if t.rank() >= 2 => t,
            // An axis with itself (torch's `transpose(v, 0, -1)` of a
            // vector; std's `transpose(x, axis, -1)` around a last-axis
            // helper): the vector.
            Ty::Tensor(t) if t.rank() == 1 => {
                return match (self.axis_of(1, dim0), self.axis_of(1, dim1)) {
                    (Some(_), Some(_)) => x.val.clone(),
                    _ => Val::error(),
                };
            }
            _ => return self.transpose(x.val.clone(), x.span),
        };
        let (Some(a), Some(b)) = (self.axis_of(t.rank(), dim0), self.axis_of(t.rank(), dim1))
        else {
            return Val::error();
        };
        let mut out = t.clone();
        out.dims.swap(a, b);
        if let Some(s) = &mut out.shard {
            s.dims.swap(a, b);
        }
        Val::of(Ty::Tensor(out))
    }

    pub(super) fn permute(&mut self, x: &Bound, dims: &Bound) -> Val {
        let Ty::Tensor(t) = &x.val.ty else {
            return self.not_tensor("permute", x);
        };
        let r = t.rank() as i64;
        let items = match &dims.val.konst {
            Some(Const::List(items)) => items.iter().map(Const::as_int).collect::<Option<Vec<_>>>(),
            _ => None,
        };
        let Some(items) = items else {
            self.error(
                Diagnostic::error(codes::E0208, dims.span, "`dims` must be a constant list")
                    .with_label("not a list of integer constants")
                    .with_help("write the order of the axes: `permute(x, [0, 2, 1, 3])`"),
            );
            return Val::error();
        };
        let perm: Vec<i64> = items
            .iter()
            .map(|&d| if d < 0 { d + r } else { d })
            .collect();
        let mut seen = vec![false; t.rank()];
        let valid = perm.len() == t.rank()
            && perm
                .iter()
                .all(|&d| (0..r).contains(&d) && !std::mem::replace(&mut seen[d as usize], true));
        if !valid {
            self.error(
                Diagnostic::error(
                    codes::E0206,
                    dims.span,
                    format!("`dims` is not a permutation of the {r} axes of `{t}`"),
                )
                .with_label(format!("each of 0..{r} exactly once"))
                .with_secondary(x.span, format!("this is `{t}`")),
            );
            return Val::error();
        }
        let mut out = t.clone();
        out.dims = perm.iter().map(|&d| t.dims[d as usize].clone()).collect();
        out.shard = t.shard.as_ref().map(|s| Shard {
            dims: perm.iter().map(|&d| s.dims[d as usize].clone()).collect(),
            partial: s.partial.clone(),
        });
        Val::of(Ty::Tensor(out))
    }

    /// `concat(xs, axis)` (or `stack` when `new_axis`): a list literal of
    /// tensors of one dtype and rank whose dims agree but along `axis`
    /// (`stack`: agree everywhere; the result gains `axis`).
    pub(super) fn concat(&mut self, xs: &Bound, axis: &Bound, new_axis: bool) -> Val {
        let name = if new_axis { "stack" } else { "concat" };
        let tensors: Option<Vec<&TensorTy>> = xs.elems.iter().map(Ty::tensor).collect();
        let Some(ts) = tensors.filter(|t| !t.is_empty()) else {
            if xs.elems.iter().any(|t| matches!(t, Ty::Error)) {
                return Val::error();
            }
            self.error(
                Diagnostic::error(
                    codes::E0205,
                    xs.span,
                    format!("`{name}` joins a list of tensors such as `[a, b]`"),
                )
                .with_label(format!("this is {}", xs.val.ty.describe())),
            );
            return Val::error();
        };
        let first = ts[0];
        let rank = first.rank() + usize::from(new_axis);
        let Some(ax) = self.axis_of(rank, axis) else {
            return Val::error();
        };
        for (i, t) in ts.iter().enumerate().skip(1) {
            let agree = t.rank() == first.rank()
                && t.dims
                    .iter()
                    .zip(&first.dims)
                    .enumerate()
                    .all(|(d, (a, b))| (!new_axis && d == ax) || a.compatible(b));
            if t.dtype != first.dtype || !agree {
                let along = if new_axis {
                    "of one shape".to_string()
                } else {
                    format!("whose dims agree but along axis {ax}")
                };
                self.error(
                    Diagnostic::error(
                        if t.dtype != first.dtype {
                            codes::E0200
                        } else {
                            codes::E0201
                        },
                        xs.span,
                        format!("`{name}` of `{first}` and `{t}` (element {i})"),
                    )
                    .with_label(format!("`{name}` needs tensors of one dtype {along}")),
                );
                return Val::error();
            }
        }
        let mut dims = first.dims.clone();
        if new_axis {
            dims.insert(ax, Dim::known(ts.len() as u64));
        } else {
            dims[ax] = ts
                .iter()
                .skip(1)
                .try_fold(first.dims[ax].clone(), |a, t| a.add(&t.dims[ax]))
                .unwrap_or(Dim::Unknown);
        }
        tensor(dims, first.dtype)
    }

    /// `sort(x, axis)` / `argsort`: a float or integer tensor, sorted
    /// along a valid axis; the values keep `x`'s shape and dtype (with the
    /// indices when `let (values, indices) = sort(...)` binds both), the
    /// indices are int32.
    pub(super) fn sort(&mut self, name: &str, x: &Bound, axis: &Bound, span: Span) -> Val {
        let Ty::Tensor(t) = &x.val.ty else {
            return self.not_tensor(name, x);
        };
        if !t.dtype.is_float() && !t.dtype.is_int() {
            self.error(
                Diagnostic::error(codes::E0200, x.span, format!("`{name}` of `{}`", t.dtype))
                    .with_label(format!("{name} orders numbers"))
                    .with_help("convert with `as int32`"),
            );
            return Val::error();
        }
        if self.axis_of(t.rank(), axis).is_none() {
            return Val::error();
        }
        let (values, indices) = (
            tensor(t.dims.clone(), t.dtype),
            tensor(t.dims.clone(), tessera_core::Dtype::Int32),
        );
        if name == "sort" && self.tuple_call.is_some_and(|(s, _)| s == span) {
            // `let (values, indices) = sort(...)`, as torch.sort.
            return self.parts(vec![values, indices]);
        }
        if name == "sort" {
            values
        } else {
            indices
        }
    }

    /// `topk(x, k, axis)` / `topk_indices`: a float or integer tensor, `k` a constant
    /// from 1 to the axis' known extent; the axis becomes `k`.
    pub(super) fn topk(
        &mut self,
        name: &str,
        x: &Bound,
        k: &Bound,
        axis: &Bound,
        span: Span,
    ) -> Val {
        let Ty::Tensor(t) = &x.val.ty else {
            return self.not_tensor(name, x);
        };
        if !t.dtype.is_float() && !t.dtype.is_int() {
            self.error(
                Diagnostic::error(codes::E0200, x.span, format!("`{name}` of `{}`", t.dtype))
                    .with_label("topk ranks numbers")
                    .with_help("convert with `as int32`"),
            );
            return Val::error();
        }
        let Some(ax) = self.axis_of(t.rank(), axis) else {
            return Val::error();
        };
        // k is a constant, or a size known at each call: an attribute
        // (`k: int = 2`) or a dimension (`topk(x, V)`), checked against
        // the axis when the op compiles.
        let kv = match (k.val.konst.as_ref().and_then(Const::as_int), &k.val.dim) {
            (Some(kv), _) => kv,
            (None, Some(d)) => {
                let mut dims = t.dims.clone();
                dims[ax] = d.clone();
                return self.topk_result(name, (t, dims), span);
            }
            (None, None) if matches!(k.val.ty, Ty::Float | Ty::Str | Ty::Bool | Ty::List(_)) => {
                self.error(
                    Diagnostic::error(codes::E0201, k.span, "`k` must be an integer")
                        .with_label(format!("this is {}", k.val.ty.describe())),
                );
                return Val::error();
            }
            (None, None) => {
                self.error(
                    Diagnostic::error(
                        codes::E0208,
                        k.span,
                        "`k` must be known when the op compiles",
                    )
                    .with_label("not a constant, an attribute or a dimension")
                    .with_help(
                        "write a number, an `int` attribute of the op, or a size (`topk(x, V)`)",
                    ),
                );
                return Val::error();
            }
        };
        let extent = t.dims[ax].as_known();
        if kv < 1 || extent.is_some_and(|n| kv as u64 > n) {
            let label = match extent {
                Some(n) => format!("k must be in 1..={n}"),
                None => "k must be at least 1".to_owned(),
            };
            self.error(
                Diagnostic::error(
                    codes::E0206,
                    k.span,
                    format!("`{name}` of {kv} elements along an axis of {}", t.dims[ax]),
                )
                .with_label(label)
                .with_secondary(x.span, format!("this is `{t}`")),
            );
            return Val::error();
        }
        let mut dims = t.dims.clone();
        dims[ax] = Dim::known(kv as u64);
        self.topk_result(name, (t, dims), span)
    }

    /// The result of `topk` (values, or values and indices bound by
    /// `let (...)`) or `topk_indices` of `t`, of shape `dims`.
    fn topk_result(&mut self, name: &str, (t, dims): (&TensorTy, Vec<Dim>), span: Span) -> Val {
        if name == "topk" && self.tuple_call.is_some_and(|(s, _)| s == span) {
            // `let (values, indices) = topk(...)`, as torch.topk.
            let values = tensor(dims.clone(), t.dtype);
            return self.parts(vec![values, tensor(dims, tessera_core::Dtype::Int32)]);
        }
        let dtype = if name == "topk" {
            t.dtype
        } else {
            tessera_core::Dtype::Int32
        };
        tensor(dims, dtype)
    }

    /// Hands the parts of a call with several results to the
    /// `let (a, b, ...)` that binds them.
    fn parts(&mut self, parts: Vec<Val>) -> Val {
        self.tuple_parts = Some(parts);
        Val::of(Ty::Unit)
    }

    /// `split(x, size, axis)` (torch.split: parts of extent `size`, the
    /// last shorter where it does not divide, or a list of extents that
    /// add up to the axis') and `chunk(x, chunks, axis)` (torch.chunk:
    /// parts of extent cdiv(n, chunks), so maybe fewer than `chunks`).
    /// They give several tensors, so only `let (a, b, ...) = ` takes them.
    pub(super) fn split(
        &mut self,
        name: &str,
        x: &Bound,
        size: &Bound,
        axis: &Bound,
        span: Span,
    ) -> Val {
        let Some(names) = self.tuple_call.filter(|(s, _)| *s == span).map(|(_, n)| n) else {
            self.error(
                Diagnostic::error(
                    codes::E0211,
                    span,
                    format!("`{name}` gives several tensors"),
                )
                .with_label("its parts need names")
                .with_help(format!("bind them: `let (a, b) = {name}(...);`")),
            );
            return Val::error();
        };
        let Ty::Tensor(t) = &x.val.ty else {
            return self.not_tensor(name, x);
        };
        let Some(ax) = self.axis_of(t.rank(), axis) else {
            return Val::error();
        };
        if let Some(over) = t.dim_axis(ax) {
            self.error(
                Diagnostic::error(
                    codes::E0405,
                    span,
                    format!(
                        "`{name}` along dimension {ax}, which is split over `{}`",
                        over.axis
                    ),
                )
                .with_label("each device sees only its slice")
                .with_help(format!("gather it first: `all_gather(..., {})`", over.axis)),
            );
            return Val::error();
        }
        let n = t.dims[ax].clone();
        let extents = match (&size.val.konst, &size.elem_dims) {
            (_, Some(list)) if name == "split" => {
                if let Some(total) = list
                    .iter()
                    .skip(1)
                    .try_fold(list[0].clone(), |a, d| a.add(d))
                {
                    if !total.compatible(&n) {
                        self.error(
                            Diagnostic::error(
                                codes::E0201,
                                size.span,
                                format!("the parts add up to {total}, and axis {ax} has {n}"),
                            )
                            .with_label("these extents")
                            .with_secondary(x.span, format!("this is `{t}`"))
                            .with_help(if total.as_known().is_some() {
                                format!(
                                    "an axis that is always {total} is declared so; \
                                     or end the list with a size: `[..., {n} - k]`"
                                )
                            } else {
                                "the parts must add up to the axis".to_string()
                            }),
                        );
                        return Val::error();
                    }
                }
                list.clone()
            }
            (Some(c), _) if c.as_int().is_some_and(|c| c > 0) => {
                let c = c.as_int().unwrap_or(1) as u64;
                let size = match (name, n.as_known()) {
                    ("split", Some(_)) => Some(c),
                    ("chunk", Some(n)) => Some(n.div_ceil(c).max(1)),
                    _ => None,
                };
                let count = match (size, n.as_known()) {
                    (Some(size), Some(n)) => n.div_ceil(size),
                    _ if name == "chunk" => c,
                    _ => names as u64,
                };
                if count != names as u64 {
                    self.error(
                        Diagnostic::error(
                            codes::E0211,
                            span,
                            format!("{names} names for {count} parts"),
                        )
                        .with_label(format!("this gives {count} tensors"))
                        .with_secondary(x.span, format!("this is `{t}`"))
                        .with_help("write one name per part (`_` for a part you drop)"),
                    );
                    return Val::error();
                }
                match (size, n.as_known()) {
                    (Some(size), Some(n)) => cut(n, size),
                    // A symbolic extent: a part per name, checked when the
                    // sizes are known.
                    _ if name == "split" => {
                        let mut v = vec![Dim::known(c); names.saturating_sub(1)];
                        v.push(Dim::Unknown);
                        v
                    }
                    _ => {
                        let part = match n.div(c) {
                            Some(d @ Dim::Expr { .. }) => d,
                            _ => Dim::Unknown,
                        };
                        vec![part; names]
                    }
                }
            }
            _ => {
                let what = if name == "split" {
                    "a positive integer constant, or a list of extents"
                } else {
                    "a positive integer constant"
                };
                self.error(
                    Diagnostic::error(
                        codes::E0208,
                        size.span,
                        format!(
                            "`{}` of `{name}` must be {what}",
                            if name == "split" { "size" } else { "chunks" }
                        ),
                    )
                    .with_label("not that"),
                );
                return Val::error();
            }
        };
        if let Some(bad) = extents.iter().find(|d| d.as_known() == Some(0)) {
            self.error(
                Diagnostic::error(
                    codes::E0201,
                    size.span,
                    format!("`{name}` into a part of extent {bad}"),
                )
                .with_label("every part needs at least one element"),
            );
            return Val::error();
        }
        let parts = extents
            .into_iter()
            .map(|d| {
                let mut p = t.clone();
                p.dims[ax] = d;
                Val::of(Ty::Tensor(p))
            })
            .collect();
        self.parts(parts)
    }

    /// An integer tensor of indices.
    fn indices<'b>(&mut self, name: &str, index: &'b Bound) -> Option<&'b TensorTy> {
        match &index.val.ty {
            Ty::Tensor(t) if t.dtype.is_int() => Some(t),
            Ty::Error => None,
            other => {
                let mut d = Diagnostic::error(
                    codes::E0200,
                    index.span,
                    format!("the index of `{name}` must be an integer tensor"),
                )
                .with_label(format!("this is {}", other.describe()));
                // torch's `x.gather(1, idx)`: the axis where the index goes.
                let rest = match name {
                    "gather" | "take" => Some(""),
                    "index_add" | "index_copy" | "scatter_add" | "scatter" => Some(", src"),
                    _ => None,
                };
                if let (Ty::Int, true, Some(rest)) = (other, index.positional, rest) {
                    let k = index
                        .val
                        .konst
                        .as_ref()
                        .and_then(Const::as_int)
                        .unwrap_or(1);
                    d = d.with_help(format!(
                        "the index comes before the axis: `{name}(x, index{rest}, axis = {k})` \
                         is torch's `x.{name}({k}, index{rest})`"
                    ));
                }
                self.error(d);
                None
            }
        }
    }

    /// `gather(x, index, axis)` with torch.gather's rule: `index` has x's
    /// rank, each of its dims but `axis` at most x's; the result has
    /// index's shape and x's dtype.
    pub(super) fn gather(&mut self, x: &Bound, index: &Bound, axis: &Bound) -> Val {
        let Ty::Tensor(xt) = &x.val.ty else {
            return self.not_tensor("gather", x);
        };
        let Some(it) = self.indices("gather", index) else {
            return Val::error();
        };
        let Some(ax) = self.axis_of(xt.rank(), axis) else {
            return Val::error();
        };
        let fits = it.rank() == xt.rank()
            && it.dims.iter().zip(&xt.dims).enumerate().all(|(d, (i, n))| {
                d == ax
                    || match (i.as_known(), n.as_known()) {
                        (Some(i), Some(n)) => i <= n,
                        _ => i.compatible(n),
                    }
            });
        if !fits {
            self.error(
                Diagnostic::error(
                    codes::E0201,
                    index.span,
                    format!("`gather` of `{xt}` at indices `{it}` along axis {ax}"),
                )
                .with_label("the index has x's rank, and no dim but `axis` larger than x's")
                .with_secondary(x.span, format!("this is `{xt}`")),
            );
            return Val::error();
        }
        tensor(it.dims.clone(), xt.dtype)
    }

    /// `scatter_add(x, index, src, axis)` and `scatter` (torch's: `index`
    /// of src's rank, each dim at most src's and, but `axis`, x's), and
    /// `index_add` and `index_copy` (torch's: `index` one vector over src's
    /// `axis`, src x's shape elsewhere). The result is x's type.
    pub(super) fn scatter(
        &mut self,
        name: &str,
        (x, index, src): (&Bound, &Bound, &Bound),
        axis: &Bound,
    ) -> Val {
        let Ty::Tensor(xt) = &x.val.ty else {
            return self.not_tensor(name, x);
        };
        let Ty::Tensor(st) = &src.val.ty else {
            return self.not_tensor(name, src);
        };
        let Some(it) = self.indices(name, index) else {
            return Val::error();
        };
        let Some(ax) = self.axis_of(xt.rank(), axis) else {
            return Val::error();
        };
        if st.dtype != xt.dtype {
            self.error(
                Diagnostic::error(
                    codes::E0200,
                    src.span,
                    format!(
                        "`{name}` adds `{}` values into a `{}` tensor",
                        st.dtype, xt.dtype
                    ),
                )
                .with_label("dtype differs from x's")
                .with_help(format!("convert first: `... as {}`", xt.dtype)),
            );
            return Val::error();
        }
        let at_most = |a: &Dim, b: &Dim| match (a.as_known(), b.as_known()) {
            (Some(a), Some(b)) => a <= b,
            _ => a.compatible(b),
        };
        let fits = st.rank() == xt.rank()
            && if name.starts_with("index_") {
                it.rank() == 1
                    && it.dims[0].compatible(&st.dims[ax])
                    && st
                        .dims
                        .iter()
                        .zip(&xt.dims)
                        .enumerate()
                        .all(|(d, (s, n))| d == ax || s.compatible(n))
            } else {
                it.rank() == st.rank()
                    && it.dims.iter().zip(&st.dims).all(|(i, s)| at_most(i, s))
                    && it
                        .dims
                        .iter()
                        .zip(&xt.dims)
                        .enumerate()
                        .all(|(d, (i, n))| d == ax || at_most(i, n))
            };
        if !fits {
            let rule = if name.starts_with("index_") {
                "the index is one vector as long as src's axis, and src has x's shape elsewhere"
            } else {
                "the index has src's rank, no dim larger than src's, nor but `axis` than x's"
            };
            self.error(
                Diagnostic::error(
                    codes::E0201,
                    index.span,
                    format!("`{name}` of `{st}` into `{xt}` at indices `{it}` along axis {ax}"),
                )
                .with_label(rule)
                .with_secondary(src.span, format!("this is `{st}`")),
            );
            return Val::error();
        }
        Val::of(x.val.ty.clone())
    }

    /// `bincount(x, length)`: the count of each value of the integer
    /// vector `x` in `0..length`, a size known when the op compiles.
    pub(super) fn bincount(&mut self, x: &Bound, length: &Bound) -> Val {
        let Some(xt) = self.indices("bincount", x) else {
            return Val::error();
        };
        if xt.rank() != 1 {
            self.error(
                Diagnostic::error(
                    codes::E0202,
                    x.span,
                    format!("`bincount` counts the values of a vector, not of `{xt}`"),
                )
                .with_label("rank is not 1")
                .with_help("flatten it first: `reshape(x, [N * M])`"),
            );
            return Val::error();
        }
        let len = match (
            length.val.konst.as_ref().and_then(Const::as_int),
            &length.val.dim,
        ) {
            (Some(n), _) if n > 0 => Dim::known(n as u64),
            (None, Some(d)) => d.clone(),
            _ => {
                self.error(
                    Diagnostic::error(
                        codes::E0208,
                        length.span,
                        "the length of `bincount` must be a size known when the op compiles",
                    )
                    .with_label("not a positive constant or a dimension")
                    .with_help("give the number of bins: `bincount(x, 256)` or `bincount(x, V)`"),
                );
                return Val::error();
            }
        };
        Val::of(Ty::Tensor(TensorTy::new(
            vec![len],
            tessera_syntax::ast::Dtype::Int32,
        )))
    }

    /// `take(x, index, axis)` (numpy.take): the entries of x along `axis`
    /// at each element of `index`; the result's shape is x's with `axis`
    /// replaced by index's shape.
    pub(super) fn take(&mut self, x: &Bound, index: &Bound, axis: &Bound) -> Val {
        let Ty::Tensor(xt) = &x.val.ty else {
            return self.not_tensor("take", x);
        };
        let Some(it) = self.indices("take", index) else {
            return Val::error();
        };
        let Some(ax) = self.axis_of(xt.rank(), axis) else {
            return Val::error();
        };
        let mut dims = xt.dims[..ax].to_vec();
        dims.extend(it.dims.iter().cloned());
        dims.extend(xt.dims[ax + 1..].iter().cloned());
        tensor(dims, xt.dtype)
    }
}

/// `n` cut into parts of extent `size` (the last one shorter).
fn cut(n: u64, size: u64) -> Vec<Dim> {
    let mut parts = vec![Dim::known(size); (n / size) as usize];
    if n % size != 0 {
        parts.push(Dim::known(n % size));
    }
    parts
}

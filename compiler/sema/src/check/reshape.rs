//! Builtins that rearrange a tensor's shape: `reshape` (with an inferred
//! `-1`), `roll`, `repeat_interleave` and `repeat`.

use super::bind::Bound;
use super::call::tensor;
use super::{Body, Cx, Val};
use crate::ty::{Const, Dim, Ty};
use tessera_diagnostics::{codes, Diagnostic};

impl Cx<'_, '_> {
    /// `reshape(x, shape)`: the same elements in `shape`, one size of which
    /// may be `-1`; counts that differ by an op's `int` attributes are
    /// compared when the op compiles.
    pub(super) fn reshape(&mut self, body: &Body, x: &Bound, shape: &Bound) -> Val {
        let Ty::Tensor(t) = &x.val.ty else {
            return self.not_tensor("reshape", x);
        };
        let before = t.dims.iter().try_fold(Dim::known(1), |a, d| a.mul(d));
        let infer: Vec<usize> = (shape.elem_consts.iter().enumerate())
            .filter(|(_, c)| matches!(c, Some(Const::Int(-1))))
            .map(|(i, _)| i)
            .collect();
        let dims = match infer.as_slice() {
            [] => match self.shape_dims(shape, false) {
                Some(dims) => dims,
                None => return Val::error(),
            },
            [at] => match self.inferred_shape(shape, *at, before.as_ref()) {
                Some(dims) => dims,
                None => return Val::error(),
            },
            [_, second, ..] => {
                let at = shape.elem_spans.get(*second).copied().unwrap_or(shape.span);
                self.error(
                    Diagnostic::error(codes::E0207, at, "a second `-1` in a reshape")
                        .with_label("only one size can be inferred")
                        .with_help("give every other size"),
                );
                return Val::error();
            }
        };
        let after = dims.iter().try_fold(Dim::known(1), |a, d| a.mul(d));
        // An op's `int` attribute is known when the op is instantiated,
        // which compares the counts then (`[B, s, s, p, p, c]`).
        let attribute = |s: &String| {
            body.kind == crate::table::BodyKind::Op
                && body.local(s).is_some_and(|l| l.val.ty == Ty::Int)
        };
        if let (Some(b), Some(a)) = (&before, &after) {
            let deferred = b
                .unshared_syms(a)
                .is_some_and(|syms| syms.iter().any(attribute))
                || sizes_may_agree(b, a);
            if !b.compatible(a) && !dims.is_empty() && !deferred {
                self.error(
                    Diagnostic::error(
                        codes::E0201,
                        shape.span,
                        format!("reshape from {b} to {a} elements"),
                    )
                    .with_label("the element count must stay the same")
                    .with_secondary(x.span, format!("this is `{t}`")),
                );
                return Val::error();
            }
        }
        tensor(dims, t.dtype)
    }

    /// `broadcast_to(x, shape)` (numpy's; torch's `expand` and Triton's
    /// `broadcast_to`): x's axes, aligned at the end of `shape`, each equal
    /// to the target's extent or 1.
    pub(super) fn broadcast_to(&mut self, x: &Bound, shape: &Bound) -> Val {
        let Ty::Tensor(t) = &x.val.ty else {
            return self.not_tensor("broadcast_to", x);
        };
        let Some(dims) = self.shape_dims(shape, false) else {
            return Val::error();
        };
        let skip = dims.len().checked_sub(t.rank());
        let fits = skip.is_some_and(|skip| {
            (t.dims.iter().zip(&dims[skip..])).all(|(a, b)| a.compatible(b) || a.is_one())
        });
        if !fits {
            let target = (dims.iter().map(|d| d.to_string()))
                .collect::<Vec<_>>()
                .join(", ");
            self.error(
                Diagnostic::error(
                    codes::E0203,
                    x.span,
                    format!("`{t}` cannot be broadcast to [{target}]"),
                )
                .with_label("each axis, aligned at the end, must equal the target's or be 1")
                .with_secondary(shape.span, "the target shape"),
            );
            return Val::error();
        }
        tensor(dims, t.dtype)
    }

    /// The types of `roll` (x's), `repeat_interleave` (the axis grown
    /// `repeats`-fold) and `repeat` (each axis grown by its count, leading
    /// ones added): counts are positive constants or `int` attributes.
    pub(super) fn rearranged<'b>(&mut self, name: &str, arg: &dyn Fn(&str) -> &'b Bound) -> Val {
        let x = arg("x");
        let Ty::Tensor(t) = &x.val.ty else {
            return self.not_tensor(name, x);
        };
        // A count: a positive constant, or an integer known when the op
        // compiles: an attribute, a size, or arithmetic of them (`H / G`,
        // whose extent the call's sizes settle).
        let count = |cx: &mut Self, b: &Bound, what: &str, least: i64| -> Option<Dim> {
            match (b.val.konst.as_ref().and_then(Const::as_int), &b.val.dim) {
                (Some(n), _) if n >= least => Some(Dim::known(n as u64)),
                (None, Some(d)) if b.val.ty == Ty::Int => Some(d.clone()),
                (None, None) if b.val.ty == Ty::Int => Some(Dim::Unknown),
                (Some(n), _) => {
                    cx.error(
                        Diagnostic::error(codes::E0207, b.span, format!("`{what}` of {n}"))
                            .with_label(format!("`{name}` takes {what} of at least {least}")),
                    );
                    None
                }
                (None, _) => {
                    cx.error(
                        Diagnostic::error(
                            codes::E0208,
                            b.span,
                            format!("`{what}` of `{name}` must be a compile-time constant"),
                        )
                        .with_label(format!("this is {}", b.val.ty.describe())),
                    );
                    None
                }
            }
        };
        match name {
            "roll" => {
                // Any integer constant (negative too), or an attribute.
                let shifts = arg("shifts");
                if shifts.val.ty != Ty::Error && count(self, shifts, "shifts", i64::MIN).is_none() {
                    return Val::error();
                }
                self.axis_of(t.rank(), arg("axis"));
                x.val.clone()
            }
            "repeat_interleave" => {
                let Some(r) = count(self, arg("repeats"), "repeats", 1) else {
                    return Val::error();
                };
                let Some(axis) = self.axis_of(t.rank(), arg("axis")) else {
                    return Val::error();
                };
                let mut dims = t.dims.clone();
                dims[axis] = dims[axis].mul(&r).unwrap_or(Dim::Unknown);
                tensor(dims, t.dtype)
            }
            _ => {
                let reps = arg("reps");
                let counts: Vec<Option<Dim>> = match (&reps.val.konst, &reps.elem_dims) {
                    (Some(Const::List(items)), _) => (items.iter())
                        .map(|c| match c.as_int() {
                            Some(n) if n >= 1 => Some(Dim::known(n as u64)),
                            _ => None,
                        })
                        .collect(),
                    (_, Some(ds)) => ds.iter().map(|d| Some(d.clone())).collect(),
                    _ => vec![None; reps.elems.len()],
                };
                if counts.iter().any(Option::is_none) && reps.val.konst.is_some() {
                    self.error(
                        Diagnostic::error(codes::E0207, reps.span, "a count of `repeat` below 1")
                            .with_label("each axis is repeated at least once"),
                    );
                    return Val::error();
                }
                if counts.len() < t.rank() {
                    self.error(
                        Diagnostic::error(
                            codes::E0206,
                            reps.span,
                            format!(
                                "{} count{} for a tensor of rank {}",
                                counts.len(),
                                if counts.len() == 1 { "" } else { "s" },
                                t.rank()
                            ),
                        )
                        .with_label("one count per axis, at least")
                        .with_secondary(x.span, format!("this is `{t}`")),
                    );
                    return Val::error();
                }
                let extra = counts.len() - t.rank();
                let dims = (counts.iter().enumerate())
                    .map(|(i, c)| {
                        let d = if i < extra {
                            Dim::known(1)
                        } else {
                            t.dims[i - extra].clone()
                        };
                        c.as_ref().and_then(|c| d.mul(c)).unwrap_or(Dim::Unknown)
                    })
                    .collect();
                tensor(dims, t.dtype)
            }
        }
    }

    /// The sizes of a reshape whose element `at` is `-1`: the others as
    /// given (positive), and that one the element count `count` divided
    /// by their product, exactly (E0201 where it leaves a remainder).
    fn inferred_shape(
        &mut self,
        shape: &Bound,
        at: usize,
        count: Option<&Dim>,
    ) -> Option<Vec<Dim>> {
        let mut dims = Vec::new();
        for (i, c) in shape.elem_consts.iter().enumerate() {
            let span = shape.elem_spans.get(i).copied().unwrap_or(shape.span);
            dims.push(match c {
                _ if i == at => Dim::known(1),
                Some(Const::Int(n)) if *n >= 1 => Dim::known(*n as u64),
                Some(Const::Int(n)) => {
                    self.error(
                        Diagnostic::error(codes::E0207, span, format!("invalid dimension {n}"))
                            .with_label("dimensions must be positive integers, or one `-1`"),
                    );
                    return None;
                }
                _ => shape
                    .elem_dims
                    .as_ref()
                    .and_then(|ds| ds.get(i).cloned())
                    .unwrap_or(Dim::Unknown),
            });
        }
        let rest = dims.iter().try_fold(Dim::known(1), |a, d| a.mul(d));
        let inferred = match (count, &rest) {
            (Some(n), Some(r)) => match (n.div_exact(r), n.as_known(), r.as_known()) {
                (Some(q), _, _) => q,
                (None, Some(n), Some(r)) => {
                    self.error(
                        Diagnostic::error(
                            codes::E0201,
                            shape.span,
                            format!("{n} elements do not split into parts of {r}"),
                        )
                        .with_label(format!("`-1` would not be a whole number ({n} / {r})")),
                    );
                    return None;
                }
                (None, _, Some(r)) => n.div(r).unwrap_or(Dim::Unknown),
                _ => Dim::Unknown,
            },
            _ => Dim::Unknown,
        };
        dims[at] = inferred;
        Some(dims)
    }
}

/// Whether two element counts each hold a size the other lacks (`B*C*T`
/// and `B*T*H*D`, torch's `view(B, T, H, D)` with C = H·D): equal at the
/// calls whose sizes make them so, which compare them then.
fn sizes_may_agree(a: &Dim, b: &Dim) -> bool {
    let (Dim::Expr { syms: sa, .. }, Dim::Expr { syms: sb, .. }) = (a, b) else {
        return false;
    };
    let missing = |x: &[String], y: &[String]| x.iter().any(|s| !y.contains(s));
    missing(sa, sb) && missing(sb, sa)
}

//! The type of `einsum(equation, [a, b, ...])`: one letter per axis of each
//! operand (a `...` standing for the axes the letters leave out), a
//! letter's extent the same wherever it appears (twice in one operand: a
//! square diagonal), the result's axes those of its letters.

use super::bind::Bound;
use super::call::tensor;
use super::{Cx, Val};
use crate::einsum::Einsum;
use crate::ty::{Const, Dim, Ty};
use tessera_diagnostics::{codes, Diagnostic};

impl Cx<'_, '_> {
    /// `einsum(equation, xs)`: E0208 for an equation not known when the op
    /// compiles, E0206 for one that does not parse or does not fit the
    /// operands' count and ranks, E0201 for a letter of two extents, E0200
    /// for operands of two dtypes.
    pub(super) fn einsum(&mut self, equation: &Bound, xs: &Bound) -> Val {
        let Some(Const::Str(text)) = &equation.val.konst else {
            if equation.val.ty != Ty::Error {
                self.error(
                    Diagnostic::error(
                        codes::E0208,
                        equation.span,
                        "the einsum equation must be a string known when the op compiles",
                    )
                    .with_label(format!("this is {}", equation.val.ty.describe())),
                );
            }
            return Val::error();
        };
        let ts: Option<Vec<_>> = xs.elems.iter().map(Ty::tensor).collect();
        let Some(ts) = ts.filter(|t| !t.is_empty()) else {
            if !xs.elems.iter().any(|t| matches!(t, Ty::Error)) {
                self.error(
                    Diagnostic::error(
                        codes::E0205,
                        xs.span,
                        "`einsum` takes its operands as a list of tensors: `einsum(\"ij,jk->ik\", [a, b])`",
                    )
                    .with_label(format!("this is {}", xs.val.ty.describe())),
                );
            }
            return Val::error();
        };
        let ranks: Vec<usize> = ts.iter().map(|t| t.rank()).collect();
        let e = match Einsum::parse(text, &ranks) {
            Ok(e) => e,
            Err(why) => {
                self.error(
                    Diagnostic::error(codes::E0206, equation.span, format!("einsum: {why}"))
                        .with_label("in this equation"),
                );
                return Val::error();
            }
        };
        if e.inputs.len() != ts.len() {
            self.error(
                Diagnostic::error(
                    codes::E0206,
                    xs.span,
                    format!(
                        "the equation names {} operand{}, and {} {} given",
                        e.inputs.len(),
                        if e.inputs.len() == 1 { "" } else { "s" },
                        ts.len(),
                        if ts.len() == 1 { "is" } else { "are" }
                    ),
                )
                .with_secondary(equation.span, "the equation"),
            );
            return Val::error();
        }
        let mut extent: Vec<(char, Dim, usize)> = Vec::new();
        for (i, (letters, t)) in e.inputs.iter().zip(&ts).enumerate() {
            let at = xs.elem_spans.get(i).copied().unwrap_or(xs.span);
            if letters.len() != t.rank() {
                self.error(
                    Diagnostic::error(
                        codes::E0206,
                        at,
                        format!(
                            "operand {i} has {} letters in the equation and is `{t}`, of rank {}",
                            letters.len(),
                            t.rank()
                        ),
                    )
                    .with_label("one letter per axis")
                    .with_secondary(equation.span, "the equation"),
                );
                return Val::error();
            }
            if t.dtype != ts[0].dtype {
                self.error(
                    Diagnostic::error(
                        codes::E0200,
                        at,
                        format!("einsum of `{}` and `{}`", ts[0].dtype, t.dtype),
                    )
                    .with_label("every operand has one dtype")
                    .with_help(format!("convert first: `... as {}`", ts[0].dtype)),
                );
                return Val::error();
            }
            for (c, d) in letters.iter().zip(&t.dims) {
                match extent.iter().find(|(l, ..)| l == c) {
                    Some((_, prev, j)) if !prev.compatible(d) => {
                        let axis = if crate::einsum::is_ellipsis(*c) {
                            "an axis of `...`".to_owned()
                        } else {
                            format!("axis `{c}`")
                        };
                        self.error(
                            Diagnostic::error(
                                codes::E0201,
                                at,
                                format!("{axis} is {prev} in operand {j} and {d} in operand {i}"),
                            )
                            .with_label(format!("this is `{t}`"))
                            .with_secondary(equation.span, "the equation"),
                        );
                        return Val::error();
                    }
                    Some(_) => {}
                    None => extent.push((*c, d.clone(), i)),
                }
            }
        }
        let dims = (e.output.iter())
            .map(|c| {
                let (_, d, _) = extent.iter().find(|(l, ..)| l == c).expect("parsed");
                d.clone()
            })
            .collect();
        tensor(dims, ts[0].dtype)
    }
}

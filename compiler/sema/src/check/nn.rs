//! The rules of the products in `std.nn` that take tensor cores on the GPU
//! path: convolutions (`conv1d`, `conv2d`: shapes, groups, strides,
//! dilation) and attention (grouped-query batch dims, `causal`), and the
//! numerics policies they refuse.

use super::bind::Bound;
use super::builtins::dims_agree;
use super::call::tensor;
use super::{Body, Cx, Val};
use crate::numerics::Policy;
use crate::ty::{Const, Dim, Ty};
use tessera_diagnostics::{codes, Diagnostic, Span};

impl Cx<'_, '_> {
    /// Whether `what` (a matrix product, a convolution, attention) may run
    /// under the body's policy: `kahan_sum` compensates sums and
    /// reductions, but products accumulate their dot products on tensor
    /// cores uncompensated, so there it is E0502 rather than a policy that
    /// silently does nothing.
    pub(crate) fn compensable(&mut self, body: &Body, what: &str, span: Span) -> bool {
        self.compensated(
            body,
            (
                what,
                "dot products",
                "accumulated in fp32 (on tensor cores on a GPU), without compensation",
            ),
            span,
        )
    }

    /// [`compensable`](Self::compensable) for a computation whose `sums`
    /// (`what`'s dot products, running sums) are done as `how`.
    pub(crate) fn compensated(
        &mut self,
        body: &Body,
        (what, sums, how): (&str, &str, &str),
        span: Span,
    ) -> bool {
        if body.numerics.policy != Policy::KahanSum {
            return true;
        }
        self.error(
            Diagnostic::error(
                codes::E0502,
                span,
                format!("`kahan_sum` does not apply to `{what}`: its {sums} are not compensated"),
            )
            .with_label(how.to_string())
            .with_help(
                "compute it in an op of its own under `deterministic` or the default policy, and keep `kahan_sum` for the op's sums",
            ),
        );
        false
    }

    /// `conv2d` (`spatial` 2: x `[B, C, H, W]`, w `[O, C / groups, KH,
    /// KW]`) and `conv1d` (`spatial` 1: x `[B, C, L]`, w `[O, C / groups,
    /// K]`): one float dtype, channels split into `groups` that divide both
    /// counts; each output extent is `(n + 2 padding - dilation (k - 1) -
    /// 1) / stride + 1`.
    pub(super) fn conv(
        &mut self,
        name: &str,
        spatial: usize,
        args: [&Bound; 6],
        span: Span,
    ) -> Val {
        let [x, w, stride, padding, dilation, groups] = args;
        let (Ty::Tensor(xt), Ty::Tensor(wt)) = (&x.val.ty, &w.val.ty) else {
            return self.not_tensor(name, if x.val.ty.tensor().is_none() { x } else { w });
        };
        let rank = spatial + 2;
        if xt.rank() != rank || wt.rank() != rank {
            let (xs, ws) = if spatial == 2 {
                ("(N, C, H, W)", "(O, C / groups, KH, KW)")
            } else {
                ("(N, C, L)", "(O, C / groups, K)")
            };
            self.error(
                Diagnostic::error(
                    codes::E0202,
                    span,
                    format!("{name} needs {rank}-D input {xs} and weights {ws}"),
                )
                .with_secondary(x.span, format!("`{xt}`"))
                .with_secondary(w.span, format!("`{wt}`")),
            );
            return Val::error();
        }
        if xt.dtype != wt.dtype {
            self.error(
                Diagnostic::error(
                    codes::E0200,
                    span,
                    format!("{name} of `{}` and `{}`", xt.dtype, wt.dtype),
                )
                .with_help("convert one operand explicitly with `as`"),
            );
            return Val::error();
        }
        if !xt.dtype.is_float() {
            self.error(
                Diagnostic::error(
                    codes::E0200,
                    x.span,
                    format!("{name} of `{}` tensors", xt.dtype),
                )
                .with_label("convolutions take float tensors")
                .with_help("convert first: `x as fp32` (and the weights)"),
            );
            return Val::error();
        }
        // The geometry is integers: torch's `F.conv2d(x, w, b, ...)` puts a
        // bias tensor where `stride` goes, and a float or a boolean would
        // otherwise read as the default.
        for (b, what) in [
            (stride, "stride"),
            (padding, "padding"),
            (dilation, "dilation"),
            (groups, "groups"),
        ] {
            if matches!(b.val.ty, Ty::Int | Ty::Error) || b.defaulted {
                continue;
            }
            let mut d = Diagnostic::error(
                codes::E0201,
                b.span,
                format!("`{what}` of {name} must be an integer"),
            )
            .with_label(format!("this is {}", b.val.ty.describe()));
            if b.val.ty.tensor().is_some() && b.positional {
                let at = if spatial == 2 {
                    "[:, None, None]"
                } else {
                    "[:, None]"
                };
                d = d.with_help(format!(
                    "{name} takes no bias (torch's third argument): add it to the result, \
                     `{name}(x, w, ...) + b{at}`"
                ));
            }
            self.error(d);
            return Val::error();
        }
        let int = |b: &Bound, default: i64| {
            b.val
                .konst
                .as_ref()
                .and_then(Const::as_int)
                .unwrap_or(default)
        };
        let (st, p, d) = (int(stride, 1), int(padding, 0), int(dilation, 1));
        // `groups = C` (depthwise) is a size known at each call: checked
        // against the channels there.
        let g = groups.val.konst.as_ref().and_then(Const::as_int);
        for (b, v, least, what) in [
            (stride, st, 1, "stride"),
            (padding, p, 0, "padding"),
            (dilation, d, 1, "dilation"),
            (groups, g.unwrap_or(1), 1, "groups"),
        ] {
            if v < least {
                self.error(
                    Diagnostic::error(
                        codes::E0214,
                        b.span,
                        format!("{name} needs {what} >= {least}"),
                    )
                    .with_label(format!("{what} is {v}")),
                );
                return Val::error();
            }
        }
        // Input channels = weight channels x groups; groups divide outputs.
        let channels = match (xt.dims[1].as_known(), wt.dims[1].as_known(), g) {
            (Some(c), Some(cg), Some(g)) => c as i64 == cg as i64 * g,
            (_, _, Some(1)) => xt.dims[1].compatible(&wt.dims[1]),
            _ => true,
        };
        if !channels {
            let mut d = Diagnostic::error(
                codes::E0201,
                span,
                format!(
                    "{name} channels differ: {} in, {} per group",
                    xt.dims[1], wt.dims[1]
                ),
            )
            .with_secondary(x.span, "input channels")
            .with_secondary(w.span, "weight channels");
            if let Some(g) = g.filter(|g| *g > 1) {
                d = d.with_help(format!(
                    "with groups = {g}, the weights hold C / {g} input channels"
                ));
            }
            self.error(d);
            return Val::error();
        }
        if let (Some(o), Some(g)) = (wt.dims[0].as_known(), g) {
            if o as i64 % g != 0 {
                self.error(
                    Diagnostic::error(
                        codes::E0201,
                        groups.span,
                        format!("{o} output channels do not split into {g} groups"),
                    )
                    .with_secondary(w.span, format!("`{wt}`")),
                );
                return Val::error();
            }
        }
        let out = |size: &Dim, k: &Dim| match (size.as_known(), k.as_known()) {
            (Some(n), Some(k)) => {
                let span = d * (k as i64 - 1) + 1;
                let padded = n as i64 + 2 * p;
                (padded >= span).then(|| Dim::known(((padded - span) / st + 1) as u64))
            }
            _ => Some(Dim::Unknown),
        };
        let mut dims = vec![xt.dims[0].clone(), wt.dims[0].clone()];
        for a in 2..rank {
            match out(&xt.dims[a], &wt.dims[a]) {
                Some(o) => dims.push(o),
                None => {
                    self.error(
                        Diagnostic::error(
                            codes::E0201,
                            span,
                            format!("{name} kernel is larger than the padded input"),
                        )
                        .with_label("no output position"),
                    );
                    return Val::error();
                }
            }
        }
        tensor(dims, xt.dtype)
    }

    /// `attention(q, k, v, causal, scale)`: q `[..B, N, D]`, k `[..Bk, L, D]`,
    /// v `[..Bk, L, E]` of one float dtype, each batch dim of k and v equal
    /// to q's or dividing it (grouped-query attention); the result is
    /// `[..B, N, E]`.
    /// `causal` and `bottom_right` may be an op's `bool` attributes
    /// (`attribute`: checked in an op body), given at each call.
    pub(super) fn attention(
        &mut self,
        qkv: [&Bound; 3],
        (flags, attribute): ([&Bound; 2], bool),
        span: Span,
    ) -> Val {
        let [q, k, v] = qkv;
        let (Ty::Tensor(qt), Ty::Tensor(kt), Ty::Tensor(vt)) = (&q.val.ty, &k.val.ty, &v.val.ty)
        else {
            let bad = qkv
                .into_iter()
                .find(|b| b.val.ty.tensor().is_none())
                .unwrap_or(q);
            return self.not_tensor("attention", bad);
        };
        for (flag, name) in flags.iter().zip(["causal", "bottom_right"]) {
            if !matches!(flag.val.ty, Ty::Bool) || (flag.val.konst.is_none() && !attribute) {
                self.error(
                    Diagnostic::error(
                        codes::E0208,
                        flag.span,
                        format!("`{name}` must be a compile-time `true` or `false`"),
                    )
                    .with_label(format!("this is {}", flag.val.ty.describe())),
                );
                return Val::error();
            }
        }
        let r = qt.rank();
        if r < 2 || kt.rank() != r || vt.rank() != r {
            self.error(
                Diagnostic::error(
                    codes::E0202,
                    span,
                    "attention needs q, k and v of one rank, at least 2 ([..batch, rows, head dim])",
                )
                .with_secondary(q.span, format!("`{qt}`"))
                .with_secondary(k.span, format!("`{kt}`"))
                .with_secondary(v.span, format!("`{vt}`")),
            );
            return Val::error();
        }
        if qt.dtype != kt.dtype || kt.dtype != vt.dtype || !qt.dtype.is_float() {
            self.error(
                Diagnostic::error(
                    codes::E0200,
                    span,
                    format!(
                        "attention of `{}`, `{}` and `{}`: q, k and v share one float dtype",
                        qt.dtype, kt.dtype, vt.dtype
                    ),
                )
                .with_help("convert operands explicitly with `as`"),
            );
            return Val::error();
        }
        let mismatch = |cx: &mut Self, msg: String, a: (&Bound, String), b: (&Bound, String)| {
            cx.error(
                Diagnostic::error(codes::E0201, span, msg)
                    .with_secondary(a.0.span, a.1)
                    .with_secondary(b.0.span, b.1),
            );
            Val::error()
        };
        if !qt.dims[r - 1].compatible(&kt.dims[r - 1]) {
            let msg = format!(
                "attention head dims differ: q has {}, k has {}",
                qt.dims[r - 1],
                kt.dims[r - 1]
            );
            return mismatch(self, msg, (q, format!("`{qt}`")), (k, format!("`{kt}`")));
        }
        if !kt.dims[r - 2].compatible(&vt.dims[r - 2])
            || !dims_agree(&kt.dims[..r - 2], &vt.dims[..r - 2])
        {
            let msg = "attention keys and values differ in batch or length".to_string();
            return mismatch(self, msg, (k, format!("`{kt}`")), (v, format!("`{vt}`")));
        }
        for (a, b) in qt.dims[..r - 2].iter().zip(&kt.dims[..r - 2]) {
            if !b.may_divide(a) {
                let msg = format!(
                    "attention batch dim {b} of k and v neither equals nor divides {a} of q"
                );
                return mismatch(
                    self,
                    msg,
                    (q, format!("`{qt}`")),
                    (
                        k,
                        format!("`{kt}`: grouped-query attention needs Hq a multiple of Hk"),
                    ),
                );
            }
        }
        let mut dims = qt.dims.clone();
        dims[r - 1] = vt.dims[r - 1].clone();
        tensor(dims, qt.dtype)
    }
}

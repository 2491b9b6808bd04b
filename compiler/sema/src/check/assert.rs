//! `assert(cond, message)`: in an op, a condition on sizes and attributes
//! checked when the op compiles, at each call's sizes; in host code, a
//! condition checked when it runs.

use super::bind::Bound;
use super::{Body, Cx, Val};
use crate::table::BodyKind;
use crate::ty::{Const, Ty};
use tessera_diagnostics::{codes, Diagnostic, Span};

impl Cx<'_, '_> {
    /// Checks a call of `assert` whose condition is `cond` and message
    /// `message`. In an op, a condition known to be false is E0215, at the
    /// user's call when the assert is the stdlib's (`max_pool1d`'s window
    /// longer than the padded input); one not yet known (symbolic sizes) is
    /// checked again at each call's sizes, by this checker and when the
    /// graph is built.
    pub(crate) fn assert(&mut self, body: &Body, cond: &Bound, message: &Bound, span: Span) -> Val {
        let text = match &message.val.konst {
            Some(Const::Str(s)) => s.clone(),
            _ if message.val.ty == Ty::Error => return Val::error(),
            _ => {
                self.error(
                    Diagnostic::error(codes::E0208, message.span, "an assert's message is a string")
                        .with_label(format!("this is {}", message.val.ty.describe()))
                        .with_help("write the message as a literal: `assert(k <= L, \"the window is longer than the input\")`"),
                );
                return Val::error();
            }
        };
        match (&body.kind, &cond.val.ty) {
            (_, Ty::Error) => Val::error(),
            (BodyKind::Kernel, _) => {
                self.error(
                    Diagnostic::error(codes::E0600, span, "`assert` is not available in kernels")
                        .with_label("in a kernel")
                        .with_help(
                            "check sizes in the op or host code that launches the kernel, \
                             and guard a tile's lanes with `mask =`",
                        ),
                );
                Val::error()
            }
            (BodyKind::Op, Ty::Bool) => {
                if let Some(Const::Bool(false)) = cond.val.konst {
                    let at = if self.table.is_std(span.file) {
                        let user = self.sites.iter().rev().find(|s| !self.table.is_std(s.file));
                        user.copied().unwrap_or(span)
                    } else {
                        span
                    };
                    self.failed_assert = true;
                    self.error(
                        Diagnostic::error(codes::E0215, at, text)
                            .with_label("at the sizes and attributes of this call"),
                    );
                }
                Val::of(Ty::Unit)
            }
            (BodyKind::Op, other) => {
                self.error(
                    Diagnostic::error(
                        codes::E0211,
                        cond.span,
                        "an op's assert takes a condition known when the op compiles",
                    )
                    .with_label(format!("this is {}", other.describe()))
                    .with_help(
                        "assert on sizes and attributes (`assert(C % groups == 0, \"...\")`); \
                         a tensor's values are known only when it runs: check them in host code",
                    ),
                );
                Val::error()
            }
            (_, t) if t.is_truth() => Val::of(Ty::Unit),
            (_, other) => {
                self.error(
                    Diagnostic::error(codes::E0211, cond.span, "an assert's condition is a bool")
                        .with_label(format!("this is {}", other.describe()))
                        .with_help("compare, or reduce a tensor of bools with `all(...)`"),
                );
                Val::error()
            }
        }
    }
}

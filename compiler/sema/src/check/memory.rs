//! The rules of the kernel memory primitives: `load` and `store` through
//! index tiles (broadcast, or their outer product), their masks, and the
//! atomics, with the dtypes the hardware combines and the policies that
//! allow a float sum in a varying order.

use super::bind::Bound;
use super::call::tensor;
use super::{Body, Cx, Val};
use crate::numerics::Policy;
use crate::ty::{Dim, TensorTy, Ty};
use tessera_core::resources::MAX_TILE_ELEMENTS;
use tessera_diagnostics::{codes, Diagnostic, Span};
use tessera_syntax::ast::Dtype;

impl Cx<'_, '_> {
    /// The shape a load or store through `index` addresses: the
    /// concatenation of the index tiles' shapes.
    fn index_tiles(&mut self, src: &TensorTy, index: &Bound) -> Option<Vec<Dim>> {
        if !matches!(index.val.ty, Ty::List(_)) || index.elems.is_empty() {
            self.error(
                Diagnostic::error(
                    codes::E0211,
                    index.span,
                    "the index is a list literal with one integer tile per dimension",
                )
                .with_label(format!("this is {}", index.val.ty.describe()))
                .with_help("for example `[offs]`, or `[rows, cols]` for a 2-D tile"),
            );
            return None;
        }
        if index.elems.len() != src.rank() {
            self.error(
                Diagnostic::error(
                    codes::E0210,
                    index.span,
                    format!(
                        "{} indices for a tensor of rank {}",
                        index.elems.len(),
                        src.rank()
                    ),
                )
                .with_label(format!("the tensor is `{src}`")),
            );
            return None;
        }
        // Index tiles of two axes or more broadcast together (numpy's
        // rule); 1-D ones take an axis each (the outer product).
        let broadcast = index
            .elems
            .iter()
            .any(|t| matches!(t, Ty::Tensor(t) if t.rank() >= 2));
        let mut dims: Vec<Dim> = Vec::new();
        // The index tiles broadcast so far: their type and span.
        let mut seen: Option<(TensorTy, Span)> = None;
        for (k, ty) in index.elems.iter().enumerate() {
            let at = index.elem_spans.get(k).copied().unwrap_or(index.span);
            match ty {
                Ty::Int => {}
                Ty::Tensor(t) if t.dtype.is_int() && broadcast => {
                    let (prev, pspan) = seen.clone().unwrap_or((t.clone(), at));
                    dims = self.broadcast(&dims, &t.dims, index.span, pspan, at, &prev, t)?;
                    let joined = TensorTy {
                        dims: dims.clone(),
                        ..t.clone()
                    };
                    seen = Some((joined, pspan.to(at)));
                }
                Ty::Tensor(t) if t.dtype.is_int() => dims.extend(t.dims.iter().cloned()),
                Ty::Error => return None,
                other => {
                    self.error(
                        Diagnostic::error(
                            codes::E0210,
                            index.span,
                            format!(
                                "indices must be integers or integer tiles, found {}",
                                other.describe()
                            ),
                        )
                        .with_label("not an integer index"),
                    );
                    return None;
                }
            }
        }
        // Several 1-d index tiles address their outer product: past a
        // tile's limit, say so rather than "use a smaller block" (which
        // only shrinks a cube of it).
        let ones = (index.elems.iter())
            .filter(|t| matches!(t, Ty::Tensor(t) if t.rank() == 1))
            .count();
        let count = (dims.iter()).try_fold(1i64, |n, d| {
            d.as_known()
                .map_or(Some(n), |k| n.checked_mul(i64::try_from(k).ok()?))
        });
        if !broadcast && ones >= 2 && count.is_none_or(|n| n > MAX_TILE_ELEMENTS) {
            let shown = count.map_or("more than 2^63".to_owned(), |n| n.to_string());
            self.error(
                Diagnostic::error(
                    codes::E0604,
                    index.span,
                    format!("these {ones} index tiles address a tile of {shown} elements"),
                )
                .with_label("one 1-d index tile per axis indexes their outer product")
                .with_help(
                    "to pair the indices element by element (Triton's pointer arithmetic), \
                     give them a shared axis: `load(x, [b, c[:, None], h[:, None], w[:, None]])` \
                     is a [BLOCK, 1] tile",
                ),
            );
            return None;
        }
        Some(dims)
    }

    fn check_mask(&mut self, dims: &[Dim], mask: &Bound) -> bool {
        match &mask.val.ty {
            Ty::Bool | Ty::Error => true,
            Ty::Tensor(m) if m.dtype == Dtype::Bool => {
                let n = dims.len().max(m.rank());
                let fits = m.rank() <= dims.len()
                    && m.dims
                        .iter()
                        .zip(&dims[dims.len() - m.rank()..])
                        .all(|(a, b)| a.compatible(b) || a.is_one());
                if !fits {
                    self.error(
                        Diagnostic::error(
                            codes::E0203,
                            mask.span,
                            format!("mask `{m}` does not fit a tile of {} dimensions", n),
                        )
                        .with_label("the mask must broadcast to the tile's shape"),
                    );
                }
                fits
            }
            other => {
                self.error(
                    Diagnostic::error(codes::E0211, mask.span, "a mask must be boolean")
                        .with_label(format!("this is {}", other.describe())),
                );
                false
            }
        }
    }

    pub(super) fn load(&mut self, src: &Bound, index: &Bound, mask: &Bound) -> Val {
        let Ty::Global(t) = &src.val.ty else {
            self.error(
                Diagnostic::error(codes::E0211, src.span, "`load` reads a kernel parameter")
                    .with_label(format!("this is {}", src.val.ty.describe())),
            );
            return Val::error();
        };
        let Some(dims) = self.index_tiles(t, index) else {
            return Val::error();
        };
        if !self.check_mask(&dims, mask) {
            return Val::error();
        }
        tensor(dims, t.dtype)
    }

    pub(super) fn store(
        &mut self,
        body: &Body,
        dst: &Bound,
        index: &Bound,
        value: &Bound,
        mask: &Bound,
    ) -> Val {
        let Ty::Global(t) = &dst.val.ty else {
            self.error(
                Diagnostic::error(codes::E0211, dst.span, "`store` writes a kernel parameter")
                    .with_label(format!("this is {}", dst.val.ty.describe())),
            );
            return Val::error();
        };
        if let Some(name) = &dst.name {
            if !body.outs.contains(name) {
                self.error(
                    Diagnostic::error(
                        codes::E0602,
                        dst.span,
                        format!("`{name}` is an input of the kernel"),
                    )
                    .with_label("stored to here")
                    .with_help(format!(
                        "declare it `out {name}: ...` if the kernel writes it, or \
                         `inout {name}: ...` to update the tensor passed (read and write it)"
                    )),
                );
                return Val::error();
            }
        }
        let Some(dims) = self.index_tiles(t, index) else {
            return Val::error();
        };
        self.check_mask(&dims, mask);
        match &value.val.ty {
            Ty::Tensor(v) => {
                if v.dtype != t.dtype {
                    self.error(
                        Diagnostic::error(
                            codes::E0200,
                            value.span,
                            format!("storing `{}` values into a `{}` tensor", v.dtype, t.dtype),
                        )
                        .with_label("dtype differs")
                        .with_help(format!("convert first: `... as {}`", t.dtype)),
                    );
                } else if v.rank() > dims.len()
                    || v.dims
                        .iter()
                        .zip(&dims[dims.len() - v.rank()..])
                        .any(|(a, b)| !a.compatible(b) && !a.is_one())
                {
                    let mut d = Diagnostic::error(
                        codes::E0203,
                        value.span,
                        format!("value `{v}` does not fit the indexed tile"),
                    )
                    .with_label("shape differs from the index tiles");
                    if v.rank() > dims.len() {
                        d = d.with_help(
                            "one 1-d index tile per axis indexes their outer product: \
                             `load(x, [r, c])` with tiles of 8 is an 8 x 8 tile; to pair the \
                             indices element by element (Triton's `x_ptr + r * C + c`), give \
                             them a shared axis, `load(x, [r[:, None], c[:, None]])`, an 8 x 1 \
                             tile (`reshape(t, [8])` makes it 1-d)",
                        );
                    }
                    self.error(d);
                }
            }
            Ty::Int | Ty::Float | Ty::Error => {}
            Ty::Bool if t.dtype == Dtype::Bool => {}
            Ty::Bool => {
                self.error(
                    Diagnostic::error(
                        codes::E0200,
                        value.span,
                        format!("storing a boolean into a `{}` tensor", t.dtype),
                    )
                    .with_label("a boolean")
                    .with_help(format!("convert first: `... as {}`", t.dtype)),
                );
            }
            other => {
                self.error(
                    Diagnostic::error(codes::E0205, value.span, "`store` writes a tile")
                        .with_label(format!("this is {}", other.describe())),
                );
            }
        }
        Val::of(Ty::Unit)
    }

    /// A float sum in an order that varies run to run (`atomic_add`,
    /// `scatter_add`): only under the `fast` policy (E0502).
    pub(super) fn unordered_sum(&mut self, body: &Body, name: &str, dtype: Dtype, span: Span) {
        if !dtype.is_float() || body.numerics.policy == Policy::Fast {
            return;
        }
        let policy = match body.numerics.policy {
            Policy::KahanSum => "kahan_sum",
            _ => "deterministic",
        };
        self.error(
            Diagnostic::error(
                codes::E0502,
                span,
                format!("`{policy}` does not allow `{name}` of floats"),
            )
            .with_label(
                "the order in which programs add varies from run to run on a GPU, and so does the rounding",
            )
            .with_help(
                "accumulate in an integer tensor (exact in any order), or sum with `sum` under this policy",
            ),
        );
    }

    /// Checks an atomic `name` into a tensor of `dtype`: the dtypes the
    /// hardware combines (32- and 64-bit integers and floats), and a float
    /// sum only under a policy that allows its order to vary.
    pub(super) fn atomic(
        &mut self,
        body: &Body,
        name: &str,
        dtype: Dtype,
        (span, dst): (Span, Span),
    ) {
        if !matches!(
            dtype,
            Dtype::Int32 | Dtype::Int64 | Dtype::Fp32 | Dtype::Fp64
        ) {
            self.error(
                Diagnostic::error(
                    codes::E0200,
                    dst,
                    format!("`{name}` cannot combine `{dtype}` elements"),
                )
                .with_label(format!("a `{dtype}` tensor"))
                .with_help("atomics combine int32, int64, fp32 or fp64 tensors: accumulate into one of those and convert afterwards"),
            );
            return;
        }
        if name == "atomic_add" {
            self.unordered_sum(body, name, dtype, span);
        }
    }
}

//! Standard-library ops on bf16 and fp16 computed in the accumulation dtype, rounded once.
//!
//! `gelu`, `softmax`, `layernorm` and the rest of the stdlib's algebraic
//! ops are written once, generic over `T: float`. Evaluated literally at
//! `T = bf16`, every intermediate of their bodies would be rounded to bf16
//! (gelu's `x * 0.5 * (1 + erf(..))` four times), where PyTorch's kernels
//! compute in fp32 and round the result once: results up to 2^-7 apart
//! relative, and softmax rows that do not sum to one. So a stdlib op whose
//! float dtype parameter is bound to a float narrower than the accumulation
//! dtype is evaluated with that parameter bound to the accumulation dtype:
//! its arguments of that dtype are widened on entry and its results rounded
//! back on exit. The user's own ops are evaluated as written.

use super::*;

/// A dtype parameter of a stdlib op evaluated wider than it was given:
/// its name and the dtype its arguments had.
pub(super) type Widened = Vec<(String, Dtype)>;

/// Primitives that multiply matrices: a stdlib op calling one keeps its
/// narrow operands as they are, for the tensor cores (whose products are
/// summed in the accumulation dtype already).
const PRODUCTS: &[&str] = &["matmul", "einsum", "conv1d", "conv2d", "attention"];

/// Whether `op`'s body multiplies matrices (`@` or a product primitive).
fn computes_products(op: &ast::OpDef) -> bool {
    op.body.iter().any(|b| {
        !b.exprs_where(&|e| match &e.kind {
            ExprKind::Binary {
                op: ast::BinOp::MatMul,
                ..
            } => true,
            ExprKind::Call { callee, .. } => PRODUCTS.contains(&callee.text.as_str()),
            _ => false,
        })
        .is_empty()
    })
}

impl Builder<'_, '_> {
    /// Rebinds the `T: float` parameters of stdlib op `op` that its
    /// arguments bound to a float narrower than the accumulation dtype
    /// (bf16 and fp16 under fp32 accumulation) to the accumulation dtype,
    /// and widens the arguments `params` declared of those dtypes. Returns
    /// what was widened, for [`Builder::narrow_result`].
    pub(super) fn widen_arguments(
        &mut self,
        f: &mut Frame,
        op: &ast::OpDef,
        params: &[&ast::Param],
        span: Span,
    ) -> R<Widened> {
        let acc = f.numerics.accumulate;
        let narrow = |g: &&ast::Generic| {
            let float = matches!(
                g.bound.as_ref().map(|t| &t.kind),
                Some(ast::TypeKind::Float)
            );
            let d = *f.dtypes.get(&g.name.text)?;
            (float && d.is_float() && d.size_bytes() < acc.size_bytes())
                .then(|| (g.name.text.clone(), d))
        };
        let widened: Widened = op.generics.iter().filter_map(|g| narrow(&g)).collect();
        // The body is walked only for an op given a narrow float.
        if widened.is_empty() || !acc.is_float() || computes_products(op) {
            return Ok(Widened::new());
        }
        for (name, _) in &widened {
            f.dtypes.insert(name.clone(), acc);
        }
        for p in params {
            if let Some(given) = declared_in(&p.ty, &widened) {
                if let Some(v @ V::Node(id)) = f.local(&p.name.text).cloned() {
                    if self.graph.tensor_ty(id).is_some_and(|t| t.dtype == given) {
                        let wide = self.cast(f, v, acc, span)?;
                        f.bind(&p.name.text, wide);
                    }
                }
            }
        }
        Ok(widened)
    }

    /// Rounds the results of a stdlib op evaluated by
    /// [`Builder::widen_arguments`] back to the dtypes it was given: a
    /// result declared of a widened dtype parameter, or, undeclared, one in
    /// the accumulation dtype.
    pub(super) fn narrow_result(
        &mut self,
        f: &Frame,
        op: &ast::OpDef,
        widened: &Widened,
        v: V,
        span: Span,
    ) -> R<V> {
        let Some(&(_, first)) = widened.first() else {
            return Ok(v);
        };
        let acc = f.numerics.accumulate;
        let to = |b: &Self, ret: Option<&ast::Type>, id: ValueId| match ret {
            Some(ret) => declared_in(ret, widened),
            None => b
                .graph
                .tensor_ty(id)
                .is_some_and(|t| t.dtype == acc)
                .then_some(first),
        };
        let narrow = |b: &mut Self, ret: Option<&ast::Type>, v: V| match v {
            V::Node(id) => match to(b, ret, id) {
                Some(d) => b.cast(f, V::Node(id), d, span),
                None => Ok(V::Node(id)),
            },
            other => Ok(other),
        };
        match v {
            V::List(vs) => {
                let parts: Vec<Option<&ast::Type>> = match op.ret.as_ref().map(|t| &t.kind) {
                    Some(ast::TypeKind::Tuple(parts)) => parts.iter().map(Some).collect(),
                    _ => vec![None; vs.len()],
                };
                let out: R<Vec<V>> = (vs.into_iter().zip(parts))
                    .map(|(v, ret)| narrow(self, ret, v))
                    .collect();
                out.map(V::List)
            }
            one => narrow(self, op.ret.as_ref(), one),
        }
    }
}

/// The given dtype of the widened parameter a tensor type `ty` is declared
/// of (`tensor<..S, T>` with `T` widened), if any.
fn declared_in(ty: &ast::Type, widened: &Widened) -> Option<Dtype> {
    match &ty.kind {
        ast::TypeKind::Tensor {
            elem: ast::ElemType::Var(n),
            ..
        } => widened.iter().find(|(w, _)| *w == n.text).map(|&(_, d)| d),
        _ => None,
    }
}

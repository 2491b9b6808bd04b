//! Inclusive scans of tiles (`cumsum`, `cumprod`, `cummax`, `cummin`,
//! `logcumsumexp`) as builder operations, shared by the graph's scan
//! kernels (which walk a line in chunks, carrying the running value from
//! one chunk to the next) and by `cumsum` and its kin called in user
//! kernels (one tile at once).
//!
//! A sum is one product with a triangular matrix of ones
//! ([`KernelBuilder::selected_sums`]). The other scans compare each element
//! with every element of the tile along the axis in a three-dimensional
//! tile, the ones after it replaced by a value that leaves the result as
//! it is (the element itself for maxima and minima, one for products,
//! -inf for log-sum-exp), and reduce: work `n` times the tile's for `n`
//! along the axis, which the chunked kernels keep constant per element.

use crate::build::KernelBuilder;
use crate::ir::{Combine, TileTy, Value};
use tessera_core::ScanKind;
use tessera_graph::{BinaryOp, UnaryOp};
use tessera_schedule::Size;
use tessera_sema::Policy;
use tessera_syntax::ast::Dtype;

impl KernelBuilder {
    /// The inclusive `kind` scan of the 2-d tile `m` along `axis` (0 or 1),
    /// computed in `m`'s dtype; the same shape.
    pub fn scan_tile(&mut self, kind: ScanKind, m: Value, axis: usize) -> Value {
        let ty = self.ty(m).clone();
        let dtype = ty.dtype;
        let n = ty.shape[axis].clone();
        let one = Size::Const(1);
        let ar = self.arange(&n);
        let col = self.reshape(ar, vec![n.clone(), one.clone()]);
        let row = self.reshape(ar, vec![one.clone(), n.clone()]);
        if kind == ScanKind::Sum {
            return if axis == 1 {
                // out[r, i] = sum over j <= i of m[r, j]: m @ (j <= i).
                let le = self.binary(BinaryOp::Le, col, row);
                let tri = self.cast(le, dtype);
                self.selected_sums(m, tri, false)
            } else {
                // out[i, c] = sum over j <= i of m[j, c]: (j <= i)ᵀ @ m.
                let ge = self.binary(BinaryOp::Ge, col, row);
                let tri = self.cast(ge, dtype);
                self.selected_sums(m, tri, true)
            };
        }
        // upto[i, j]: whether j is in the prefix of i.
        let upto = self.binary(BinaryOp::Ge, col, row);
        let (r, c) = (ty.shape[0].clone(), ty.shape[1].clone());
        // Along axis 1: [r, i, j], the prefix at j, the element itself at
        // [r, i, 1]; along axis 0: [i, j, c] and [i, 1, c].
        let (seen, own, upto, over) = if axis == 1 {
            (
                self.reshape(m, vec![r.clone(), one.clone(), c.clone()]),
                self.reshape(m, vec![r, c, one.clone()]),
                self.reshape(upto, vec![one, n.clone(), n]),
                2,
            )
        } else {
            (
                self.reshape(m, vec![one.clone(), r.clone(), c.clone()]),
                self.reshape(m, vec![r, one.clone(), c]),
                self.reshape(upto, vec![n.clone(), n, one]),
                1,
            )
        };
        let after = match kind {
            ScanKind::Max | ScanKind::Min => own,
            ScanKind::Prod => self.constant(1.0, TileTy::scalar(dtype)),
            _ => self.constant(f64::NEG_INFINITY, TileTy::scalar(dtype)),
        };
        let masked = self.select(upto, seen, after, dtype);
        self.scan_total(kind, masked, over)
    }

    /// `kind` of all of `v` along `axis` (that axis removed): a chunk's
    /// contribution to the running value.
    pub fn scan_total(&mut self, kind: ScanKind, v: Value, axis: usize) -> Value {
        let combine = match kind {
            ScanKind::Sum => Combine::Sum,
            ScanKind::Prod => Combine::Prod,
            ScanKind::Max => Combine::Max,
            ScanKind::Min => Combine::Min,
            ScanKind::LogSumExp => return self.logsumexp(v, axis),
        };
        self.reduce(combine, v, axis, Policy::Deterministic)
    }

    /// The running values `a` and `b` combined by `kind` (broadcasting).
    pub fn scan_combine(&mut self, kind: ScanKind, a: Value, b: Value) -> Value {
        let op = match kind.binary() {
            Some(op) => op,
            None => {
                // log(e^a + e^b) = s + log(e^(a - s) + e^(b - s)), s the
                // larger where it is finite.
                let big = self.binary(BinaryOp::Max, a, b);
                let s = self.finite_or_zero(big);
                let da = self.binary(BinaryOp::Sub, a, s);
                let db = self.binary(BinaryOp::Sub, b, s);
                let ea = self.unary(UnaryOp::Exp, da);
                let eb = self.unary(UnaryOp::Exp, db);
                let sum = self.binary(BinaryOp::Add, ea, eb);
                let log = self.unary(UnaryOp::Log, sum);
                return self.binary(BinaryOp::Add, log, s);
            }
        };
        self.binary(op, a, b)
    }

    /// log(Σ e^v) along `axis`, shifted by the maximum where it is finite
    /// (all -inf gives -inf, a +inf gives +inf, a NaN NaN).
    fn logsumexp(&mut self, v: Value, axis: usize) -> Value {
        let m = self.reduce(Combine::Max, v, axis, Policy::Deterministic);
        let s = self.finite_or_zero(m);
        let mut kept = self.ty(v).shape.clone();
        kept[axis] = Size::Const(1);
        let s_kept = self.reshape(s, kept);
        let d = self.binary(BinaryOp::Sub, v, s_kept);
        let e = self.unary(UnaryOp::Exp, d);
        let sum = self.reduce(Combine::Sum, e, axis, Policy::Deterministic);
        let log = self.unary(UnaryOp::Log, sum);
        self.binary(BinaryOp::Add, log, s)
    }

    /// `x` where it is finite, else 0 (a shift that cannot make NaN of
    /// infinities).
    fn finite_or_zero(&mut self, x: Value) -> Value {
        let dtype = self.ty(x).dtype;
        let inf = self.constant(f64::INFINITY, TileTy::scalar(dtype));
        let zero = self.constant(0.0, TileTy::scalar(dtype));
        let magnitude = self.unary(UnaryOp::Abs, x);
        let finite = self.binary(BinaryOp::Lt, magnitude, inf);
        self.select(finite, x, zero, dtype)
    }
}

/// The dtype a `kind` scan of `dtype` runs in: sums and products of
/// floats in fp32 (fp64 for fp64), of integers as wide as their results;
/// maxima and minima in the dtype itself; log-sum-exp in fp32 or fp64.
pub fn scan_dtype(kind: ScanKind, dtype: Dtype) -> Dtype {
    match kind {
        ScanKind::Max | ScanKind::Min => dtype,
        ScanKind::LogSumExp if dtype != Dtype::Fp64 => Dtype::Fp32,
        _ => dtype.sum_dtype(),
    }
}

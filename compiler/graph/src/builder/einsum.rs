//! `einsum(equation, [a, b, ...])` as Graph IR the fusion and GEMM paths
//! already know: operands are contracted two at a time, left to right.
//! In each pair an axis only one side has, and nothing later needs, is
//! summed away first; the rest are permuted to [batch, free, contracted]
//! and [batch, contracted, free], reshaped to three axes and multiplied
//! (one batched matmul: the tensor cores on the GPU); the product is
//! reshaped back and, at the end, permuted to the result's letters.

use super::*;
use tessera_sema::einsum::Einsum;

/// A value and the letter of each of its axes.
struct Lettered {
    v: ValueId,
    letters: Vec<char>,
}

impl Builder<'_, '_> {
    pub(super) fn einsum(&mut self, f: &Frame, equation: V, xs: V, span: Span) -> R<V> {
        let (V::Str(text), V::List(items)) = (equation, xs) else {
            return Err(unsupported(
                self.span(f, span),
                "`einsum` takes an equation and a list of tensors",
                "here",
            ));
        };
        let mut nodes = Vec::new();
        for item in items {
            nodes.push(self.node(f, item, span)?);
        }
        let ranks: Vec<usize> = (nodes.iter())
            .map(|v| self.graph.tensor_ty(*v).map_or(0, TensorTy::rank))
            .collect();
        let e = Einsum::parse(&text, &ranks)
            .map_err(|why| unsupported(self.span(f, span), why, "here"))?;
        let mut operands = Vec::new();
        for (v, letters) in nodes.into_iter().zip(e.inputs.iter()) {
            let x = Lettered {
                v,
                letters: letters.clone(),
            };
            operands.push(self.diagonals(f, x, span)?);
        }
        let mut rest = operands.into_iter();
        let mut acc = rest
            .next()
            .ok_or_else(|| unsupported(self.span(f, span), "`einsum` of no operand", "here"))?;
        let later: Vec<Lettered> = rest.collect();
        for (k, next) in later.iter().enumerate() {
            // Letters the result or an operand after this pair needs.
            let mut needed: Vec<char> = e.output.clone();
            needed.extend(
                later[k + 1..]
                    .iter()
                    .flat_map(|o| o.letters.iter().copied()),
            );
            acc = self.contract(f, acc, next, &needed, span)?;
        }
        let acc = self.sum_unneeded(f, acc, &[], &e.output, span)?;
        let order: Vec<usize> = (e.output.iter())
            .map(|c| acc.letters.iter().position(|l| l == c).expect("kept"))
            .collect();
        self.permuted(f, acc.v, order, span).map(V::Node)
    }

    /// `x` with each letter it has twice (`ii`) taken once, along the
    /// diagonal of those two axes: they are moved last, joined into one
    /// of n * n elements, and element k (n + 1) of it taken for each k.
    fn diagonals(&mut self, f: &Frame, mut x: Lettered, span: Span) -> R<Lettered> {
        while let Some((p, q)) = (0..x.letters.len()).find_map(|p| {
            let later = x.letters[p + 1..].iter().position(|c| *c == x.letters[p])?;
            Some((p, p + 1 + later))
        }) {
            let dims = (self.graph.tensor_ty(x.v))
                .map(|t| t.dims.clone())
                .unwrap_or_default();
            let mut order: Vec<usize> = (0..x.letters.len())
                .filter(|i| *i != p && *i != q)
                .collect();
            order.extend([p, q]);
            let v = self.permuted(f, x.v, order.clone(), span)?;
            let n = dims[p].clone();
            let mut shape: Vec<V> = order[..order.len() - 2]
                .iter()
                .map(|i| V::Dim(dims[*i].clone()))
                .collect();
            shape.push(V::Dim(n.mul(&n).unwrap_or(Dim::Unknown)));
            let joined = self.reshape(f, V::Node(v), V::List(shape), span)?;
            let joined = self.node(f, joined, span)?;
            let k = self.line(f, n.clone(), span);
            let extent = self.node(f, V::Dim(n), span)?;
            let one = self.node(f, V::Int(1), span)?;
            let stride = self.push(f, Op::Binary(BinaryOp::Add), vec![extent, one], span)?;
            let at = self.push(f, Op::Binary(BinaryOp::Mul), vec![k, stride], span)?;
            let axis = order.len() - 2;
            let diag = self.push(f, Op::Take { axis }, vec![joined, at], span)?;
            let mut letters: Vec<char> = order[..axis].iter().map(|i| x.letters[*i]).collect();
            letters.push(x.letters[p]);
            x = Lettered { v: diag, letters };
        }
        Ok(x)
    }

    /// `a` times `b`, summed over the letters both have and `needed` lacks.
    fn contract(
        &mut self,
        f: &Frame,
        a: Lettered,
        b: &Lettered,
        needed: &[char],
        span: Span,
    ) -> R<Lettered> {
        let a = self.sum_unneeded(f, a, &b.letters, needed, span)?;
        let b = Lettered {
            v: b.v,
            letters: b.letters.clone(),
        };
        let b = self.sum_unneeded(f, b, &a.letters, needed, span)?;
        let shared = |c: &char| b.letters.contains(c);
        let batch: Vec<char> = (a.letters.iter())
            .filter(|c| shared(c) && needed.contains(c))
            .copied()
            .collect();
        let summed: Vec<char> = (a.letters.iter())
            .filter(|c| shared(c) && !needed.contains(c))
            .copied()
            .collect();
        let left: Vec<char> = a.letters.iter().filter(|c| !shared(c)).copied().collect();
        let right: Vec<char> = (b.letters.iter())
            .filter(|c| !a.letters.contains(c))
            .copied()
            .collect();
        let groups_a = [batch.as_slice(), left.as_slice(), summed.as_slice()];
        let groups_b = [batch.as_slice(), summed.as_slice(), right.as_slice()];
        let a3 = self.grouped(f, &a, &groups_a, span)?;
        let b3 = self.grouped(f, &b, &groups_b, span)?;
        let prod = self.matmul(f, V::Node(a3), V::Node(b3), span)?;
        let prod = self.node(f, prod, span)?;
        // Back to one axis a letter: [batch.., left.., right..].
        let extent = |c: &char| -> Dim {
            let (t, at) = match a.letters.iter().position(|l| l == c) {
                Some(i) => (a.v, i),
                None => (
                    b.v,
                    b.letters.iter().position(|l| l == c).expect("a letter"),
                ),
            };
            self.graph
                .tensor_ty(t)
                .map_or(Dim::Unknown, |t| t.dims[at].clone())
        };
        let letters: Vec<char> = batch.iter().chain(&left).chain(&right).copied().collect();
        let dims: Vec<V> = letters.iter().map(|c| V::Dim(extent(c))).collect();
        let v = self.reshape(f, V::Node(prod), V::List(dims), span)?;
        Ok(Lettered {
            v: self.node(f, v, span)?,
            letters,
        })
    }

    /// `x` with its axes whose letters neither `other` nor `needed` has
    /// summed away.
    fn sum_unneeded(
        &mut self,
        f: &Frame,
        x: Lettered,
        other: &[char],
        needed: &[char],
        span: Span,
    ) -> R<Lettered> {
        let gone: Vec<usize> = (x.letters.iter().enumerate())
            .filter(|(_, c)| !other.contains(c) && !needed.contains(c))
            .map(|(i, _)| i)
            .collect();
        if gone.is_empty() {
            return Ok(x);
        }
        let mut v = self.widen_for_sum(f, x.v, span)?;
        for &axis in gone.iter().rev() {
            let op = Op::Reduce {
                kind: tessera_core::ReduceKind::Sum,
                axis,
                keepdims: false,
                policy: f.numerics.policy,
                acc: self.reduce_accumulator(f, v),
            };
            v = self.push(f, op, vec![v], span)?;
        }
        let letters = (x.letters.iter().enumerate())
            .filter(|(i, _)| !gone.contains(i))
            .map(|(_, c)| *c)
            .collect();
        Ok(Lettered { v, letters })
    }

    /// `x` permuted so its letters run as `groups` do, then reshaped to
    /// one axis a group (the product of its extents; 1 for an empty one).
    fn grouped(
        &mut self,
        f: &Frame,
        x: &Lettered,
        groups: &[&[char]; 3],
        span: Span,
    ) -> R<ValueId> {
        let order: Vec<usize> = (groups.iter().flat_map(|g| g.iter()))
            .map(|c| {
                x.letters
                    .iter()
                    .position(|l| l == c)
                    .expect("a letter of x")
            })
            .collect();
        let dims = self
            .graph
            .tensor_ty(x.v)
            .map(|t| t.dims.clone())
            .unwrap_or_default();
        let v = self.permuted(f, x.v, order.clone(), span)?;
        let mut at = 0;
        let mut shape = Vec::new();
        for g in groups {
            let mut size = Some(Dim::known(1));
            for &i in &order[at..at + g.len()] {
                size = size.and_then(|s| s.mul(&dims[i]));
            }
            at += g.len();
            shape.push(V::Dim(size.unwrap_or(Dim::Unknown)));
        }
        let v = self.reshape(f, V::Node(v), V::List(shape), span)?;
        self.node(f, v, span)
    }

    /// `x` with its axes in `order` (itself when that is the identity).
    fn permuted(&mut self, f: &Frame, x: ValueId, order: Vec<usize>, span: Span) -> R<ValueId> {
        if order.iter().enumerate().all(|(i, &o)| i == o) {
            return Ok(x);
        }
        self.push(f, Op::Permute(order), vec![x], span)
    }
}

//! Types in op bodies: dimensions and declared types lowered to graph types, and parameters fitted to the types of their arguments.

use super::*;

impl Builder<'_, '_> {
    pub(super) fn dim(&self, f: &Frame, d: &ast::Dim) -> R<Vec<Dim>> {
        Ok(match &d.kind {
            ast::DimKind::Const(n) => vec![Dim::known(*n)],
            ast::DimKind::Sym(s) => vec![match (f.dims.get(s), f.local(s)) {
                (Some(d), _) => d.clone(),
                // An `int` attribute (`tensor<B, H / p, fp32>`).
                (None, Some(V::Int(n))) => u64::try_from(*n).map_or(Dim::Unknown, Dim::known),
                (None, _) => Dim::sym(s),
            }],
            ast::DimKind::Pack(s) => match f.packs.get(s) {
                Some(ds) => ds.clone(),
                None => {
                    return Err(unsupported(
                        d.span,
                        format!("the dimension pack `..{s}` is not bound"),
                        "a generic op needs argument types",
                    ))
                }
            },
            ast::DimKind::Div(a, k) => match self.dim(f, a)?.as_slice() {
                [a] => vec![a.div(*k).unwrap_or(Dim::Unknown)],
                _ => {
                    return Err(unsupported(
                        d.span,
                        "a quotient of a pack",
                        "not a dimension",
                    ))
                }
            },
            ast::DimKind::Quot { dim, by, ceil } => {
                match (self.dim(f, dim)?.as_slice(), self.dim(f, by)?.as_slice()) {
                    ([a], [k]) => {
                        let q = k
                            .as_known()
                            .and_then(|k| if *ceil { a.ceil_div(k) } else { a.div(k) });
                        vec![q.unwrap_or(Dim::Unknown)]
                    }
                    _ => {
                        return Err(unsupported(
                            d.span,
                            "a quotient of a pack",
                            "not a dimension",
                        ))
                    }
                }
            }
            ast::DimKind::Mul(a, b) | ast::DimKind::Add(a, b) | ast::DimKind::Sub(a, b) => {
                let (x, y) = (self.dim(f, a)?, self.dim(f, b)?);
                let ([x], [y]) = (x.as_slice(), y.as_slice()) else {
                    return Err(unsupported(
                        d.span,
                        "an expression of packs",
                        "not a dimension",
                    ));
                };
                let r = match &d.kind {
                    ast::DimKind::Mul(..) => x.mul(y),
                    ast::DimKind::Add(..) => x.add(y),
                    _ => x.sub(y),
                };
                vec![r.unwrap_or(Dim::Unknown)]
            }
        })
    }

    /// The graph type of a declared type, in the frame's bindings. `None` for
    /// types that are not values of a graph (axes, strings, lists).
    pub(super) fn lower_type(&self, f: &Frame, t: &ast::Type) -> R<Option<Type>> {
        Ok(Some(match &t.kind {
            ast::TypeKind::Tensor { dims, elem, shard } => {
                let mut ds = Vec::new();
                for d in dims {
                    ds.extend(self.dim(f, d)?);
                }
                let dtype = match elem {
                    ast::ElemType::Dtype(d, _) => *d,
                    ast::ElemType::Var(n) => match f.dtypes.get(&n.text) {
                        Some(d) => *d,
                        None => {
                            return Err(unsupported(
                                n.span,
                                format!("the dtype `{}` is not bound", n.text),
                                "a generic op needs argument types",
                            ))
                        }
                    },
                };
                let shard = shard.as_ref().map(|s| Shard {
                    dims: s
                        .entries
                        .iter()
                        .map(|e| match e {
                            ast::ShardEntry::Replicated(_) => None,
                            ast::ShardEntry::Axis(names) => names
                                .first()
                                .and_then(|n| self.program.axis(&n.text).cloned()),
                        })
                        .collect(),
                    partial: Vec::new(),
                });
                Type::Tensor(TensorTy {
                    dims: ds,
                    dtype,
                    shard,
                })
            }
            ast::TypeKind::Int => Type::Scalar(ScalarKind::Int),
            ast::TypeKind::Float => Type::Scalar(ScalarKind::Float),
            ast::TypeKind::Named(n) if n.text == "bool" => Type::Scalar(ScalarKind::Bool),
            _ => return Ok(None),
        }))
    }

    /// Binds the dimension symbols, packs and dtype variables of a declared
    /// type to an actual type.
    pub(super) fn bind_type(&self, f: &mut Frame, decl: &ast::Type, actual: &Type) {
        let (ast::TypeKind::Tensor { dims, elem, .. }, Type::Tensor(t)) = (&decl.kind, actual)
        else {
            return;
        };
        if let ast::ElemType::Var(n) = elem {
            f.dtypes.entry(n.text.clone()).or_insert(t.dtype);
        }
        let pack_len = (t.rank() + 1).saturating_sub(dims.len());
        let mut at = 0;
        for d in dims {
            match &d.kind {
                ast::DimKind::Pack(s) => {
                    let end = (at + pack_len).min(t.rank());
                    f.packs
                        .entry(s.clone())
                        .or_insert_with(|| t.dims[at..end].to_vec());
                    at = end;
                }
                ast::DimKind::Sym(s) => {
                    if let Some(actual) = t.dims.get(at) {
                        f.dims.entry(s.clone()).or_insert_with(|| actual.clone());
                    }
                    at += 1;
                }
                _ if d.is_compound() => {
                    // `2 * H` (or `S + T`) binds H from a known size when
                    // H is the expression's only unknown symbol.
                    let known = |s: &str| f.dims.get(s).and_then(Dim::as_known);
                    let solved = t.dims.get(at).and_then(Dim::as_known);
                    if let Some((s, n)) = solved.and_then(|n| d.solve(n, &known)) {
                        f.dims.insert(s, Dim::known(n));
                    } else if let (Some(actual), Ok([declared])) =
                        (t.dims.get(at), self.dim(f, d).as_deref())
                    {
                        // At symbolic sizes, an argument of exactly the
                        // declared product binds its unknown factors to
                        // themselves.
                        if declared == actual && actual.as_known().is_none() {
                            for (s, _) in d.symbols() {
                                f.dims.entry(s.to_owned()).or_insert_with(|| Dim::sym(s));
                            }
                        }
                    }
                    at += 1;
                }
                _ => at += 1,
            }
        }
    }

    /// [`Builder::bind_type`] for every parameter and its actual type, then
    /// again, so that a product (`H * D`) met before the parameter that
    /// binds one of its factors is solved for the other.
    ///
    /// Then checks every product: its factors known, it must equal the
    /// size; one still unknown, it must divide it. A misfit is E0201 at the
    /// parameter (an entry's arguments, `call` = `None`) or at the call.
    pub(super) fn bind_types(
        &self,
        f: &mut Frame,
        callee: &str,
        pairs: &[(&ast::Param, Type)],
        call: Option<Span>,
    ) -> R<()> {
        for _ in 0..2 {
            for (p, actual) in pairs {
                self.bind_type(f, &p.ty, actual);
            }
        }
        for (p, actual) in pairs {
            let why = symbol_misfit(f, &p.ty, actual).or_else(|| product_misfit(f, &p.ty, actual));
            if let Some(why) = why {
                let at = call.map_or(p.span, |s| self.span(f, s));
                return Err(super::misfit(callee, p, at, why));
            }
        }
        Ok(())
    }

    /// Checks a given argument type against a declared parameter type and
    /// binds its symbols: rank, literal dims, dims bound by earlier
    /// parameters, and the dtype.
    /// A dimension of `actual` that the shard spec of `decl` splits over a
    /// mesh axis it does not divide: `(dim, its size, the axis)`. The
    /// checker finds these where sizes are static; this is the same rule
    /// at the sizes an entry runs at.
    pub(super) fn uneven_split(
        &self,
        decl: &ast::Type,
        actual: &Type,
    ) -> Option<(usize, u64, AxisRef)> {
        let (
            ast::TypeKind::Tensor {
                shard: Some(spec), ..
            },
            Type::Tensor(t),
        ) = (&decl.kind, actual)
        else {
            return None;
        };
        spec.entries
            .iter()
            .zip(&t.dims)
            .enumerate()
            .find_map(|(i, (e, d))| {
                let ast::ShardEntry::Axis(names) = e else {
                    return None;
                };
                let axis = self.program.axis(&names.first()?.text)?.clone();
                let n = d.as_known()?;
                (axis.size > 0 && n % axis.size != 0).then_some((i, n, axis))
            })
    }

    pub(super) fn fit(&self, f: &mut Frame, decl: &ast::Type, actual: &Type) -> Result<(), String> {
        let (ast::TypeKind::Tensor { dims, elem, .. }, Type::Tensor(t)) = (&decl.kind, actual)
        else {
            return match (&decl.kind, actual) {
                (ast::TypeKind::Tensor { .. }, other) => {
                    Err(format!("expected a tensor, got `{other}`"))
                }
                _ => Ok(()),
            };
        };
        let has_pack = dims.iter().any(|d| matches!(d.kind, ast::DimKind::Pack(_)));
        let fixed = dims.len() - usize::from(has_pack);
        if t.rank() < fixed || (!has_pack && t.rank() != fixed) {
            return Err(format!(
                "expected {} dimensions, got {} in `{t}`",
                fixed,
                t.rank()
            ));
        }
        match elem {
            ast::ElemType::Dtype(d, _) if *d != t.dtype => {
                return Err(format!("expected dtype `{d}`, got `{}`", t.dtype));
            }
            ast::ElemType::Var(n) => match f.dtypes.get(&n.text) {
                Some(d) if *d != t.dtype => {
                    return Err(format!(
                        "`{}` is `{d}` from an earlier argument, got `{}`",
                        n.text, t.dtype
                    ));
                }
                _ => {}
            },
            _ => {}
        }
        let pack_len = t.rank() - fixed;
        let mut at = 0;
        for d in dims {
            match &d.kind {
                ast::DimKind::Pack(_) => at += pack_len,
                ast::DimKind::Const(n) => {
                    if t.dims[at] != Dim::known(*n) {
                        return Err(format!("dimension {at} must be {n}, got {}", t.dims[at]));
                    }
                    at += 1;
                }
                ast::DimKind::Sym(s) => {
                    if let Some(prev) = f.dims.get(s) {
                        if *prev != t.dims[at] {
                            return Err(format!(
                                "dimension {at} is `{s}`, which is {prev} from an earlier argument, but got {}",
                                t.dims[at]
                            ));
                        }
                    }
                    at += 1;
                }
                _ => at += 1,
            }
        }
        self.bind_type(f, decl, actual);
        Ok(())
    }
}

/// Why a product dimension of `decl` (`2 * H`, `H * D`) cannot be the size
/// `actual` gives it under the bindings of `f`, if it cannot.
fn product_misfit(f: &Frame, decl: &ast::Type, actual: &Type) -> Option<String> {
    let (ast::TypeKind::Tensor { dims, .. }, Type::Tensor(t)) = (&decl.kind, actual) else {
        return None;
    };
    let pack_len = (t.rank() + 1).saturating_sub(dims.len());
    let known = |s: &str| f.dims.get(s).and_then(Dim::as_known);
    let mut at = 0;
    for d in dims {
        if let ast::DimKind::Pack(_) = d.kind {
            at += pack_len;
            continue;
        }
        let size = t.dims.get(at).and_then(Dim::as_known);
        at += 1;
        let Some(n) = size.filter(|_| d.is_compound()) else {
            continue;
        };
        let why = match (d.factors(&known), d.eval(&known)) {
            (Some((k, free)), _) if free.len() == 1 && (k == 0 || n % k != 0) => {
                format!(": {n} is not a multiple of {k}")
            }
            (_, Some(k)) if k != n => format!("(it is {k})"),
            (_, Some(_)) => continue,
            // One unknown symbol reached through sums and products, which
            // no size makes `n` (`S + T` with S = 5 for n = 3).
            _ if d.solvable(&known) && d.solve(n, &known).is_none() => {
                let free = d.symbols().into_iter().find(|(s, _)| known(s).is_none());
                let name = free.map_or("", |(s, _)| s);
                format!(": no size of `{name}` makes it {n}")
            }
            _ => continue,
        };
        let text = tessera_syntax::printer::dim_text(d);
        let sep = if why.starts_with(':') { "" } else { " " };
        return Some(format!(
            "dimension {} is {n}, which `{text}` cannot be{sep}{why}",
            at - 1
        ));
    }
    None
}

/// Why a plain dimension `N` of `decl` cannot be the size `actual` gives
/// it: another argument bound `N` to another size first (a host call's
/// arguments, whose sizes the checker may not know: `x[0:n]`).
fn symbol_misfit(f: &Frame, decl: &ast::Type, actual: &Type) -> Option<String> {
    let (ast::TypeKind::Tensor { dims, .. }, Type::Tensor(t)) = (&decl.kind, actual) else {
        return None;
    };
    let pack_len = (t.rank() + 1).saturating_sub(dims.len());
    let mut at = 0;
    for d in dims {
        match &d.kind {
            ast::DimKind::Pack(_) => at += pack_len,
            ast::DimKind::Sym(s) => {
                let bound = f.dims.get(s).and_then(Dim::as_known);
                let got = t.dims.get(at).and_then(Dim::as_known);
                if let (Some(bound), Some(got)) = (bound, got) {
                    if bound != got {
                        return Some(format!(
                            "dimension {at} is {got}, but `{s}` is {bound} from another argument"
                        ));
                    }
                }
                at += 1;
            }
            _ => at += 1,
        }
    }
    None
}

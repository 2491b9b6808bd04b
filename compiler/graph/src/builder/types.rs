//! Types in op bodies: dimensions and declared types lowered to graph types, and parameters fitted to the types of their arguments.

use super::*;

impl Builder<'_, '_> {
    pub(super) fn dim(&self, f: &Frame, d: &ast::Dim) -> R<Vec<Dim>> {
        Ok(match &d.kind {
            ast::DimKind::Const(n) => vec![Dim::known(*n)],
            ast::DimKind::Sym(s) => vec![f.dims.get(s).cloned().unwrap_or_else(|| Dim::sym(s))],
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
            ast::DimKind::Mul(a, b) => {
                let (a, b) = (self.dim(f, a)?, self.dim(f, b)?);
                match (a.as_slice(), b.as_slice()) {
                    ([a], [b]) => vec![a.mul(b).unwrap_or(Dim::Unknown)],
                    _ => return Err(unsupported(d.span, "a product of packs", "not a dimension")),
                }
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
                ast::DimKind::Mul(..) => {
                    // `2 * H` binds H from a known size when H is the
                    // product's only unknown factor.
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
                            let mut free = Vec::new();
                            syms(d, &mut free);
                            for s in free {
                                f.dims.entry(s.clone()).or_insert_with(|| Dim::sym(&s));
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
    pub(super) fn bind_types(&self, f: &mut Frame, pairs: &[(&ast::Type, Type)]) {
        for _ in 0..2 {
            for (decl, actual) in pairs {
                self.bind_type(f, decl, actual);
            }
        }
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
                ast::DimKind::Mul(..) => {
                    // A product whose other factors are known must divide
                    // the size (and equal it once all are known).
                    let known = |s: &str| f.dims.get(s).and_then(Dim::as_known);
                    if let (Some((k, free)), Some(n)) = (d.factors(&known), t.dims[at].as_known()) {
                        let bad = match free.len() {
                            0 => k != n,
                            1 => k == 0 || n % k != 0,
                            _ => false,
                        };
                        if bad {
                            return Err(format!(
                                "dimension {at} is {n}, which `{}` cannot be{}",
                                tessera_syntax::printer::dim_text(d),
                                if free.is_empty() {
                                    format!(" (it is {k})")
                                } else {
                                    format!(": {n} is not a multiple of {k}")
                                }
                            ));
                        }
                    }
                    at += 1;
                }
            }
        }
        self.bind_type(f, decl, actual);
        Ok(())
    }
}

/// The symbols of dimension `d`, in order.
fn syms(d: &ast::Dim, out: &mut Vec<String>) {
    match &d.kind {
        ast::DimKind::Sym(s) => out.push(s.clone()),
        ast::DimKind::Mul(a, b) => {
            syms(a, out);
            syms(b, out);
        }
        ast::DimKind::Const(_) | ast::DimKind::Pack(_) => {}
    }
}

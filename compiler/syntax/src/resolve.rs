//! The rewrites of the AST before checking: kernel constants in types, and
//! torch's argument names (`dim`, `keepdim`) for numpy's (`axis`,
//! `keepdims`).
//!
//! A kernel's integer constants (`<BLOCK: int = 128>`) are compile-time
//! values, so a type that names one (`out partial: tensor<cdiv(N, BLOCK),
//! fp32>`, `x: tensor<BLOCK, fp32>`) means its value: [`kernel_consts`]
//! puts each value in place of the name in the kernel's parameter types,
//! where the checker, the graph builder and the launch read sizes. The
//! source text is untouched (`tsrc fmt` and the editor see the names);
//! `--const` changes a constant's default in the text before parsing, so
//! the value put here is the one the run uses.

use crate::ast::{
    ArgKind, Block, Dim, DimKind, Expr, ExprKind, File, Generic, IndexArg, Item, KernelDef, Param,
    StmtKind, Type, TypeKind,
};
use std::collections::HashMap;

/// torch's argument names and the numpy ones Tessera's signatures use
/// (`clamp(x, min = 0.0, max = 6.0)` is `clamp(x, lo = 0.0, hi = 6.0)`).
const TORCH_NAMES: [(&str, &str); 4] = [
    ("dim", "axis"),
    ("keepdim", "keepdims"),
    ("min", "lo"),
    ("max", "hi"),
];

/// Renames torch's `dim = ...` and `keepdim = ...` in the calls of `files`
/// to `axis` and `keepdims` where the callee (an item of `files` or
/// `others`, such as the standard library) has the numpy name and not the
/// torch one, so `softmax(x, dim = -1)` and `x.sum(dim = 1, keepdim =
/// true)` read as a PyTorch user writes them. The source text is
/// untouched (`tsrc fmt` keeps what was written).
pub fn torch_names(files: &mut [&mut File], others: &[&File]) {
    let mut params: HashMap<String, Vec<String>> = HashMap::new();
    let mut add = |f: &File| {
        for item in &f.items {
            let (name, ps): (&str, &[Param]) = match item {
                Item::Op(o) => (&o.name.text, &o.params),
                Item::Kernel(k) => (&k.name.text, &k.params),
                Item::Fn(f) => (&f.name.text, &f.params),
                _ => continue,
            };
            let entry = params.entry(name.to_owned()).or_default();
            entry.extend(ps.iter().map(|p| p.name.text.clone()));
        }
    };
    files.iter().for_each(|f| add(f));
    others.iter().for_each(|f| add(f));
    for file in files.iter_mut() {
        for item in &mut file.items {
            let body = match item {
                Item::Op(o) => o.body.as_mut(),
                Item::Kernel(k) => Some(&mut k.body),
                Item::Fn(f) => f.body.as_mut(),
                _ => None,
            };
            if let Some(b) = body {
                block_names(b, &params);
            }
        }
    }
}

fn block_names(b: &mut Block, params: &HashMap<String, Vec<String>>) {
    for s in &mut b.stmts {
        match &mut s.kind {
            StmtKind::Let { value, .. }
            | StmtKind::LetTuple { value, .. }
            | StmtKind::Assign { value, .. }
            | StmtKind::Expr(value)
            | StmtKind::Return(Some(value)) => expr_names(value, params),
            StmtKind::If {
                branches,
                otherwise,
            } => {
                for (c, body) in branches {
                    expr_names(c, params);
                    block_names(body, params);
                }
                if let Some(o) = otherwise {
                    block_names(o, params);
                }
            }
            StmtKind::For {
                start,
                end,
                step,
                body,
                ..
            } => {
                expr_names(start, params);
                expr_names(end, params);
                if let Some(st) = step {
                    expr_names(st, params);
                }
                block_names(body, params);
            }
            StmtKind::While { cond, body } => {
                expr_names(cond, params);
                block_names(body, params);
            }
            _ => {}
        }
    }
}

fn expr_names(e: &mut Expr, params: &HashMap<String, Vec<String>>) {
    match &mut e.kind {
        ExprKind::Call { callee, args, .. } => {
            let known = params.get(&callee.text);
            for a in args.iter_mut() {
                if let ArgKind::Named(n) = &mut a.kind {
                    let numpy = TORCH_NAMES
                        .iter()
                        .find(|(t, _)| *t == n.text)
                        .map(|(_, np)| *np);
                    let fits = |ps: &Vec<String>| {
                        numpy.is_some_and(|np| ps.iter().any(|p| p == np))
                            && !ps.iter().any(|p| *p == n.text)
                    };
                    if let (Some(np), true) = (numpy, known.is_some_and(fits)) {
                        n.text = np.to_owned();
                    }
                }
                expr_names(&mut a.value, params);
            }
        }
        ExprKind::Binary { lhs, rhs, .. } => {
            expr_names(lhs, params);
            expr_names(rhs, params);
        }
        ExprKind::Unary { operand, .. } => expr_names(operand, params),
        ExprKind::Index { base, indices } => {
            expr_names(base, params);
            for i in indices {
                match i {
                    IndexArg::Expr(e) => expr_names(e, params),
                    IndexArg::Slice { lo, hi, step, .. } => {
                        for e in lo.iter_mut().chain(hi.iter_mut()) {
                            expr_names(e, params);
                        }
                        if let Some(e) = step {
                            expr_names(e, params);
                        }
                    }
                    IndexArg::NewAxis(_) | IndexArg::Ellipsis(_) => {}
                }
            }
        }
        ExprKind::Field { base, .. } => expr_names(base, params),
        ExprKind::List(items) | ExprKind::Tuple(items) => {
            items.iter_mut().for_each(|i| expr_names(i, params))
        }
        ExprKind::Cast { value, .. } => expr_names(value, params),
        _ => {}
    }
}

/// Puts the value of each integer constant of each kernel of `file` in
/// place of its name in the kernel's parameter types.
pub fn kernel_consts(file: &mut File) {
    for item in &mut file.items {
        if let Item::Kernel(k) = item {
            resolve_kernel(k);
        }
    }
}

fn resolve_kernel(k: &mut KernelDef) {
    let consts: Vec<(String, u64)> = k.generics.iter().filter_map(int_value).collect();
    if consts.is_empty() {
        return;
    }
    let value = |s: &str| consts.iter().find(|(n, _)| n == s).map(|(_, v)| *v);
    for p in &mut k.params {
        resolve_type(&mut p.ty, &value);
    }
}

/// The name and value of an integer constant with a non-negative literal
/// default (`<BLOCK: int = 128>`); others are left to the checker.
fn int_value(g: &Generic) -> Option<(String, u64)> {
    let is_int = match &g.bound {
        Some(t) => matches!(t.kind, TypeKind::Int),
        None => false,
    };
    let default = g.default.as_ref()?;
    match &default.kind {
        ExprKind::Int(v) if is_int => Some((g.name.text.clone(), *v)),
        _ => None,
    }
}

fn resolve_type(t: &mut Type, value: &dyn Fn(&str) -> Option<u64>) {
    match &mut t.kind {
        TypeKind::Tensor { dims, .. } => dims.iter_mut().for_each(|d| resolve_dim(d, value)),
        TypeKind::List(inner) => resolve_type(inner, value),
        _ => {}
    }
}

fn resolve_dim(d: &mut Dim, value: &dyn Fn(&str) -> Option<u64>) {
    match &mut d.kind {
        DimKind::Sym(s) => {
            if let Some(v) = value(s) {
                d.kind = DimKind::Const(v);
            }
        }
        DimKind::Const(_) | DimKind::Pack(_) => {}
        DimKind::Div(a, _) => resolve_dim(a, value),
        DimKind::Mul(a, b) | DimKind::Add(a, b) | DimKind::Sub(a, b) => {
            resolve_dim(a, value);
            resolve_dim(b, value);
        }
        DimKind::Quot { dim, by, .. } => {
            resolve_dim(dim, value);
            resolve_dim(by, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::printer::dim_text;
    use tessera_diagnostics::FileId;

    fn param_types(src: &str) -> Vec<String> {
        let mut parsed = crate::parse(FileId(0), src);
        assert!(parsed.diagnostics.is_empty(), "{:?}", parsed.diagnostics);
        super::kernel_consts(&mut parsed.file);
        let crate::ast::Item::Kernel(k) = &parsed.file.items[0] else {
            panic!("not a kernel")
        };
        k.params
            .iter()
            .map(|p| match &p.ty.kind {
                crate::ast::TypeKind::Tensor { dims, .. } => {
                    dims.iter().map(dim_text).collect::<Vec<_>>().join(", ")
                }
                _ => String::new(),
            })
            .collect()
    }

    #[test]
    fn constants_in_types_take_their_values() {
        let src = "kernel k<B: int = 128, P: int = 2, S: float = 0.5>(x: tensor<N, B, fp32>, \
                   out y: tensor<cdiv(N, B), N + 2 * P, N / B, S, fp32>) grid(1) { }";
        assert_eq!(
            param_types(src),
            ["N, 128", "cdiv(N, 128), N + 2 * 2, N / 128, S"]
        );
    }
}

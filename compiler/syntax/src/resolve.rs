//! Kernel constants in types: the one rewrite of the AST before checking.
//!
//! A kernel's integer constants (`<BLOCK: int = 128>`) are compile-time
//! values, so a type that names one (`out partial: tensor<cdiv(N, BLOCK),
//! fp32>`, `x: tensor<BLOCK, fp32>`) means its value: [`kernel_consts`]
//! puts each value in place of the name in the kernel's parameter types,
//! where the checker, the graph builder and the launch read sizes. The
//! source text is untouched (`tsrc fmt` and the editor see the names);
//! `--const` changes a constant's default in the text before parsing, so
//! the value put here is the one the run uses.

use crate::ast::{Dim, DimKind, ExprKind, File, Generic, Item, KernelDef, Type, TypeKind};

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

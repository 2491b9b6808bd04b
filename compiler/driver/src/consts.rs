//! Kernel constants and op attributes set from the command line
//! (`--const NAME=VALUE`): each named constant's literal default is
//! replaced in the source text before it is compiled (an attribute with no
//! default gets one), so the checker, every lowering, the compile cache
//! and the source an executable carries (and re-checks) all see the new
//! value, and a value the rules reject is an ordinary diagnostic at the
//! place that rejects it.

use tessera_diagnostics::FileId;
use tessera_syntax::ast;

/// One kernel constant or op attribute of a source file.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelConst {
    /// The kernel or op that declares it.
    pub kernel: String,
    /// The constant's name.
    pub name: String,
    /// Its kind: `int`, `float` or `bool` (from its bound, else from its
    /// default).
    pub kind: &'static str,
    /// Where its default value is written (byte offsets into the text);
    /// an empty range after the type for an attribute with no default,
    /// where the value goes in as ` = VALUE`.
    pub default: (usize, usize),
}

/// The kernel constants declared in `text`, in source order; `None` if the
/// text does not parse (the compilation reports why).
pub fn kernel_consts(text: &str) -> Option<Vec<KernelConst>> {
    let parsed = tessera_syntax::parse(FileId(0), text);
    if parsed.diagnostics.iter().any(|d| d.is_error()) {
        return None;
    }
    let mut out = Vec::new();
    for item in &parsed.file.items {
        let ast::Item::Kernel(k) = item else { continue };
        for g in &k.generics {
            let Some(default) = &g.default else { continue };
            let kind = match g.bound.as_ref().map(|b| &b.kind) {
                Some(ast::TypeKind::Int) => "int",
                Some(ast::TypeKind::Float) => "float",
                // `bool` is written like a dtype: a rank-0 tensor type.
                Some(ast::TypeKind::Tensor {
                    dims,
                    elem: ast::ElemType::Dtype(ast::Dtype::Bool, _),
                    ..
                }) if dims.is_empty() => "bool",
                _ => match literal_kind(default) {
                    Some(kind) => kind,
                    None => continue,
                },
            };
            out.push(KernelConst {
                kernel: k.name.text.clone(),
                name: g.name.text.clone(),
                kind,
                default: (default.span.lo as usize, default.span.hi as usize),
            });
        }
    }
    // The attributes of ops (`eps: float = 1e-5`, `alpha: float`).
    for item in &parsed.file.items {
        let ast::Item::Op(op) = item else { continue };
        for p in op.params.iter().filter(|p| p.ty.is_attribute()) {
            let kind = match &p.ty.kind {
                ast::TypeKind::Int => "int",
                ast::TypeKind::Float => "float",
                ast::TypeKind::Str => "str",
                _ => "bool",
            };
            let default = match &p.default {
                Some(d) => (d.span.lo as usize, d.span.hi as usize),
                None => (p.ty.span.hi as usize, p.ty.span.hi as usize),
            };
            out.push(KernelConst {
                kernel: op.name.text.clone(),
                name: p.name.text.clone(),
                kind,
                default,
            });
        }
    }
    Some(out)
}

/// The kind of a literal default (`-` included), if it is one.
fn literal_kind(e: &ast::Expr) -> Option<&'static str> {
    match &e.kind {
        ast::ExprKind::Int(_) => Some("int"),
        ast::ExprKind::Float(_) => Some("float"),
        ast::ExprKind::Bool(_) => Some("bool"),
        ast::ExprKind::Unary {
            op: ast::UnOp::Neg,
            operand,
        } => literal_kind(operand).filter(|k| *k != "bool"),
        _ => None,
    }
}

/// `text` with the kernel constants and op attributes `settings` names
/// set: each setting is `NAME=VALUE` (every kernel's constant and every
/// op's attribute `NAME`) or `KERNEL.NAME=VALUE` (that kernel's or op's). The error, for a usage error, says which setting is
/// wrong and why: not `NAME=VALUE`, given twice, naming no constant of the
/// file (listing those there are), or a value that is not of the
/// constant's kind (an integer for `int`, a finite number for `float`,
/// `true` or `false` for `bool`). A text that does not parse is returned
/// unchanged: compiling it reports its errors.
pub fn set_kernel_consts(text: &str, settings: &[String]) -> Result<String, String> {
    if settings.is_empty() {
        return Ok(text.to_owned());
    }
    let Some(consts) = kernel_consts(text) else {
        return Ok(text.to_owned());
    };
    let mut edits: Vec<((usize, usize), String)> = Vec::new();
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for setting in settings {
        let Some((target, value)) = setting.split_once('=') else {
            return Err(format!("`--const {setting}` must be NAME=VALUE"));
        };
        let (kernel, name) = match target.split_once('.') {
            Some((k, n)) => (Some(k), n),
            None => (None, target),
        };
        let matching: Vec<&KernelConst> = consts
            .iter()
            .filter(|c| c.name == name && kernel.is_none_or(|k| c.kernel == k))
            .collect();
        if matching.is_empty() {
            let known: Vec<String> = consts
                .iter()
                .map(|c| format!("{}.{}", c.kernel, c.name))
                .collect();
            return Err(format!(
                "`--const {target}=...`: no kernel or op of this file has a constant or attribute `{name}`{} ({})",
                kernel
                    .map(|k| format!(" in `{k}`"))
                    .unwrap_or_default(),
                if known.is_empty() {
                    "it has no kernel constants or op attributes".to_owned()
                } else {
                    format!("its constants and attributes: {}", known.join(", "))
                }
            ));
        }
        for c in matching {
            if seen.contains(&(c.kernel.as_str(), c.name.as_str())) {
                return Err(format!(
                    "`--const`: constant `{}` of `{}` is set twice",
                    c.name, c.kernel
                ));
            }
            seen.push((&c.kernel, &c.name));
            let Some(literal) = literal(c.kind, value.trim()) else {
                return Err(format!(
                    "`--const {setting}`: `{}` of `{}` is a `{}` constant, and `{value}` is not {}",
                    c.name,
                    c.kernel,
                    c.kind,
                    match c.kind {
                        "int" => "a 64-bit integer",
                        "float" => "a finite number",
                        "str" => "a string without quotes or backslashes",
                        _ => "`true` or `false`",
                    }
                ));
            };
            let literal = if c.default.0 == c.default.1 {
                format!(" = {literal}")
            } else {
                literal
            };
            edits.push((c.default, literal));
        }
    }
    edits.sort_by_key(|e| std::cmp::Reverse(e.0 .0));
    let mut out = text.to_owned();
    for ((lo, hi), literal) in edits {
        out.replace_range(lo..hi, &literal);
    }
    Ok(out)
}

/// `value` as a literal of `kind` in Tessera's syntax, if it is one.
fn literal(kind: &str, value: &str) -> Option<String> {
    match kind {
        "int" => {
            // i64::MIN has no literal (its magnitude does not fit).
            let v = value.parse::<i64>().ok().filter(|v| *v != i64::MIN)?;
            Some(v.to_string())
        }
        "float" => {
            let v = value.parse::<f64>().ok().filter(|v| v.is_finite())?;
            // `{:?}` always writes a float form the lexer reads (`2.0`,
            // `1e-5`); a sign is the unary minus.
            let text = format!("{:?}", v.abs());
            Some(if v.is_sign_negative() {
                format!("-{text}")
            } else {
                text
            })
        }
        // `--const mode=reflect`: the string, quoted.
        "str" => (!value.contains(['"', '\\', '\n'])).then(|| format!("{value:?}")),
        _ => match value {
            "true" | "false" => Some(value.to_owned()),
            _ => None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "kernel k<B: int = 64, S: float = 0.5, F: bool = false>(a: tensor<N, fp32>, out c: tensor<N, fp32>) grid(cdiv(N, B)) {}\n\
                       kernel j<B: int = 32>(a: tensor<N, fp32>, out c: tensor<N, fp32>) grid(cdiv(N, B)) {}\n";

    fn set(settings: &[&str]) -> Result<String, String> {
        let s: Vec<String> = settings.iter().map(|s| s.to_string()).collect();
        set_kernel_consts(SRC, &s)
    }

    #[test]
    fn values_replace_the_defaults() {
        let out = set(&["B=128", "k.S=-2", "F=true"]).unwrap();
        assert!(out.contains("kernel k<B: int = 128, S: float = -2.0, F: bool = true>"));
        assert!(out.contains("kernel j<B: int = 128>"));
        let out = set(&["j.B=16", "S=1e-7"]).unwrap();
        assert!(
            out.contains("kernel k<B: int = 64, S: float = 1e-7,"),
            "{out}"
        );
        assert!(out.contains("kernel j<B: int = 16>"));
        assert_eq!(set(&[]).unwrap(), SRC);
    }

    #[test]
    fn bad_settings_say_why() {
        let err = |s: &[&str]| set(s).unwrap_err();
        assert!(err(&["B"]).contains("NAME=VALUE"));
        assert!(err(&["ZZ=1"]).contains("its constants and attributes: k.B, k.S, k.F, j.B"));
        assert!(err(&["j.S=1"]).contains("in `j`"));
        assert!(err(&["B=1.5"]).contains("is not a 64-bit integer"));
        assert!(err(&["B=abc"]).contains("`int` constant"));
        assert!(err(&["S=nan"]).contains("finite"));
        assert!(err(&["F=1"]).contains("`true` or `false`"));
        assert!(err(&["B=1", "k.B=2"]).contains("set twice"));
        assert!(err(&["B=-9223372036854775808"]).contains("not a 64-bit integer"));
        let none = set_kernel_consts("fn main() {}", &["B=1".into()]).unwrap_err();
        assert!(none.contains("it has no kernel constants"), "{none}");
    }

    #[test]
    fn op_attributes_take_values_with_or_without_defaults() {
        let src = "op f(x: tensor<N, fp32>, alpha: float, k: int = 2, flag: bool = true) -> tensor<N, fp32> { return x; }\n";
        let s = |v: &[&str]| {
            let v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
            set_kernel_consts(src, &v)
        };
        let out = s(&["alpha=0.5", "f.k=-3", "flag=false"]).unwrap();
        assert!(
            out.contains("alpha: float = 0.5, k: int = -3, flag: bool = false)"),
            "{out}"
        );
        let err = s(&["k=0.5"]).unwrap_err();
        assert!(err.contains("`k` of `f` is a `int` constant"), "{err}");
        let err = s(&["g.k=1"]).unwrap_err();
        assert!(err.contains("f.alpha, f.k, f.flag"), "{err}");
    }

    #[test]
    fn a_file_that_does_not_parse_is_left_alone() {
        let bad = "kernel k<B: int = 64>(";
        assert_eq!(set_kernel_consts(bad, &["B=1".into()]).unwrap(), bad);
    }
}

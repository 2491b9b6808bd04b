//! Numerics settings in source (seed tables A.3 and A.7): parsing `numerics`
//! declarations and checking declared dtypes against the mode in force. The
//! policies and modes themselves are `tessera-core`'s.

use tessera_core::Dtype;
pub use tessera_core::{MatmulPrecision, NumericsConfig, Policy, Precision};
use tessera_diagnostics::{codes, Diagnostic, Diagnostics, Span};
use tessera_syntax::ast;

/// The checker's side of a [`NumericsConfig`]: reading settings from
/// source and checking declared dtypes against them.
pub trait NumericsCheck {
    /// Applies the settings of `decl` on top of `self`, reporting unknown or
    /// conflicting ones.
    fn apply(&mut self, decl: &ast::Numerics, diags: &mut Diagnostics);

    /// Checks a declared tensor dtype against the precision mode.
    fn check_storage(&self, dtype: Dtype, span: Span, diags: &mut Diagnostics);
}

impl NumericsCheck for NumericsConfig {
    fn apply(&mut self, decl: &ast::Numerics, diags: &mut Diagnostics) {
        let mut seen: Vec<(&'static str, String, Span)> = Vec::new();
        let mut record = |key: &'static str, value: &str, span: Span, diags: &mut Diagnostics| {
            if let Some((_, prev, prev_span)) = seen.iter().find(|(k, _, _)| *k == key) {
                if prev != value {
                    diags.push(
                        Diagnostic::error(
                            codes::E0503,
                            span,
                            format!("conflicting numerics settings for `{key}`"),
                        )
                        .with_label(format!("`{key}` is set to `{value}` here"))
                        .with_secondary(*prev_span, format!("but to `{prev}` here")),
                    );
                    return false;
                }
            }
            seen.push((key, value.to_owned(), span));
            true
        };
        for setting in &decl.settings {
            let value = setting.value.text.as_str();
            let span = setting.span;
            match setting.key.as_ref().map(|k| k.text.as_str()) {
                None => {
                    let policy = Policy::from_name(value);
                    let precision = Precision::from_name(value);
                    if policy.is_none() && precision.is_none() {
                        diags.push(unknown_value(span, value, None));
                        continue;
                    }
                    if let Some(p) = policy {
                        if record("policy", value, span, diags) {
                            self.policy = p;
                        }
                    }
                    if let Some(p) = precision {
                        if record("precision", value, span, diags) {
                            self.precision = p;
                            self.accumulate = p.accumulate();
                        }
                    }
                }
                Some("policy") => match Policy::from_name(value) {
                    Some(p) if record("policy", value, span, diags) => self.policy = p,
                    Some(_) => {}
                    None => diags.push(unknown_value(span, value, Some("policy"))),
                },
                Some("precision") => match Precision::from_name(value) {
                    Some(p) if record("precision", value, span, diags) => {
                        self.precision = p;
                        self.accumulate = p.accumulate();
                    }
                    Some(_) => {}
                    None => diags.push(unknown_value(span, value, Some("precision"))),
                },
                Some(key @ ("accumulate" | "storage")) => match Dtype::from_name(value) {
                    Some(d) if d.is_float() => {
                        let key = if key == "storage" {
                            "storage"
                        } else {
                            "accumulate"
                        };
                        if record(key, value, span, diags) {
                            if key == "storage" {
                                self.storage = Some(d);
                            } else {
                                self.accumulate = d;
                            }
                        }
                    }
                    _ => diags.push(
                        Diagnostic::error(
                            codes::E0500,
                            setting.value.span,
                            format!("`{value}` is not a float dtype"),
                        )
                        .with_label(format!("`{key}` takes a float dtype"))
                        .with_help(format!("for example `{key} = fp32`")),
                    ),
                },
                Some("matmul") => match value {
                    "ieee" | "tf32" => {
                        if record("matmul", value, span, diags) {
                            self.matmul = if value == "ieee" {
                                MatmulPrecision::Ieee
                            } else {
                                MatmulPrecision::Tf32
                            };
                        }
                    }
                    _ => diags.push(unknown_value(span, value, Some("matmul"))),
                },
                Some(other) => {
                    let key = setting.key.as_ref().map_or(span, |k| k.span);
                    diags.push(
                        Diagnostic::error(
                            codes::E0500,
                            key,
                            format!("unknown numerics setting `{other}`"),
                        )
                        .with_label("not a numerics setting")
                        .with_note(
                            "the settings are `policy`, `precision`, `storage`, `accumulate` and `matmul`",
                        ),
                    );
                }
            }
        }
        if let Some(storage) = self.storage {
            if storage.size_bytes() > self.accumulate.size_bytes() {
                diags.push(
                    Diagnostic::error(
                        codes::E0503,
                        decl.span,
                        format!(
                            "accumulation in `{}` is narrower than storage in `{storage}`",
                            self.accumulate
                        ),
                    )
                    .with_label("these settings contradict each other")
                    .with_help(format!("accumulate in `{storage}` or wider")),
                );
            }
        }
    }

    fn check_storage(&self, dtype: Dtype, span: Span, diags: &mut Diagnostics) {
        if self.allows_storage(dtype) {
            return;
        }
        let suggestion = Precision::allowing(dtype);
        diags.push(
            Diagnostic::error(
                codes::E0501,
                span,
                format!(
                    "precision mode `{}` does not store `{dtype}`",
                    self.precision.name()
                ),
            )
            .with_label(format!("`{dtype}` tensor declared here"))
            .with_note(format!(
                "`{}` stores {}",
                self.precision.name(),
                self.precision
                    .storage()
                    .iter()
                    .map(|d| format!("`{d}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
            .with_help({
                // Keep the accumulation the file has, where the mode that
                // stores `dtype` would narrow it (aggressive: bf16).
                let keep = (suggestion.accumulate() != self.accumulate)
                    .then(|| format!(", accumulate = {}", self.accumulate))
                    .unwrap_or_default();
                let narrower = if keep.is_empty() {
                    String::new()
                } else {
                    format!(
                        " (`{}` alone also accumulates in `{}`)",
                        suggestion.name(),
                        suggestion.accumulate()
                    )
                };
                format!(
                    "declare `numerics {}{keep};` (or `numerics precision = {}{keep};` inside the op){narrower}",
                    suggestion.name(),
                    suggestion.name()
                )
            }),
        );
    }
}

fn unknown_value(span: Span, value: &str, key: Option<&str>) -> Diagnostic {
    let (what, choices) = match key {
        Some("policy") => ("numerics policy", "`fast`, `deterministic`, `kahan_sum`"),
        Some("precision") => (
            "precision mode",
            "`safe`, `standard`, `aggressive`, `deterministic`",
        ),
        Some("matmul") => ("matmul precision", "`ieee`, `tf32`"),
        _ => (
            "numerics policy or precision mode",
            "the policies `fast`, `deterministic`, `kahan_sum` and the modes `safe`, `standard`, `aggressive`, `deterministic`",
        ),
    };
    let all = [
        "fast",
        "deterministic",
        "kahan_sum",
        "safe",
        "standard",
        "aggressive",
        "ieee",
        "tf32",
    ];
    let mut d = Diagnostic::error(codes::E0500, span, format!("unknown {what} `{value}`"))
        .with_label(format!("not a {what}"))
        .with_note(format!("expected one of {choices}"));
    if let Some(s) = crate::suggest::closest(value, all) {
        d = d.with_help(format!("did you mean `{s}`?"));
    }
    d
}

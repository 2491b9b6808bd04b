//! Numerics policies and precision modes (seed tables A.3 and A.7): parsing
//! the settings, and the rules they impose on dtypes.

use std::fmt;
use tessera_diagnostics::{codes, Diagnostic, Diagnostics, Span};
use tessera_syntax::ast::{self, Dtype};

/// How reductions are carried out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Policy {
    /// Any order, for speed.
    Fast,
    /// A fixed order: bitwise-identical results run to run.
    Deterministic,
    /// Compensated (Kahan) summation.
    KahanSum,
}

impl Policy {
    fn from_name(name: &str) -> Option<Policy> {
        Some(match name {
            "fast" => Policy::Fast,
            "deterministic" => Policy::Deterministic,
            "kahan_sum" => Policy::KahanSum,
            _ => return None,
        })
    }

    /// The setting's spelling.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Fast => "fast",
            Policy::Deterministic => "deterministic",
            Policy::KahanSum => "kahan_sum",
        }
    }
}

/// Which dtypes may be stored and how they accumulate (seed table A.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Precision {
    /// FP32 everywhere: debugging, small models.
    Safe,
    /// BF16/FP16 storage with FP32 accumulation.
    Standard,
    /// FP8 storage with BF16 accumulation.
    Aggressive,
    /// Any storage, FP32 accumulation, reproducible.
    Deterministic,
}

impl Precision {
    fn from_name(name: &str) -> Option<Precision> {
        Some(match name {
            "safe" => Precision::Safe,
            "standard" => Precision::Standard,
            "aggressive" => Precision::Aggressive,
            "deterministic" => Precision::Deterministic,
            _ => return None,
        })
    }

    /// The setting's spelling.
    pub fn name(self) -> &'static str {
        match self {
            Precision::Safe => "safe",
            Precision::Standard => "standard",
            Precision::Aggressive => "aggressive",
            Precision::Deterministic => "deterministic",
        }
    }

    /// The float dtypes tensors may be stored in under this mode.
    pub fn storage(self) -> &'static [Dtype] {
        use Dtype::*;
        match self {
            Precision::Safe => &[Fp32, Fp64],
            Precision::Standard => &[Bf16, Fp16, Fp32, Fp64],
            Precision::Aggressive => &[Fp8E4m3, Fp8E5m2, Bf16, Fp16, Tf32, Fp32, Fp64],
            Precision::Deterministic => &[Fp8E4m3, Fp8E5m2, Bf16, Fp16, Tf32, Fp32, Fp64],
        }
    }

    /// The default accumulation dtype.
    pub fn accumulate(self) -> Dtype {
        match self {
            Precision::Aggressive => Dtype::Bf16,
            _ => Dtype::Fp32,
        }
    }

    /// The least permissive mode that stores `dtype`.
    fn allowing(dtype: Dtype) -> Precision {
        [Precision::Safe, Precision::Standard, Precision::Aggressive]
            .into_iter()
            .find(|p| p.storage().contains(&dtype))
            .unwrap_or(Precision::Deterministic)
    }
}

/// Whether fp32 matmuls may use tf32 tensor cores.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MatmulPrecision {
    /// IEEE fp32 products.
    Ieee,
    /// tf32 inputs (10-bit mantissa) on tensor cores.
    Tf32,
}

/// The numerics in force for one op or kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NumericsConfig {
    /// Reduction policy.
    pub policy: Policy,
    /// Precision mode.
    pub precision: Precision,
    /// Accumulation dtype of matmuls and reductions.
    pub accumulate: Dtype,
    /// Restriction of storage to one dtype (`storage = bf16`), if any.
    pub storage: Option<Dtype>,
    /// fp32 matmul precision.
    pub matmul: MatmulPrecision,
}

impl Default for NumericsConfig {
    fn default() -> NumericsConfig {
        NumericsConfig {
            policy: Policy::Fast,
            precision: Precision::Standard,
            accumulate: Dtype::Fp32,
            storage: None,
            matmul: MatmulPrecision::Ieee,
        }
    }
}

impl fmt::Display for NumericsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "policy = {}, precision = {}, accumulate = {}, matmul = {}",
            self.policy.name(),
            self.precision.name(),
            self.accumulate,
            match self.matmul {
                MatmulPrecision::Ieee => "ieee",
                MatmulPrecision::Tf32 => "tf32",
            }
        )?;
        if let Some(storage) = self.storage {
            write!(f, ", storage = {storage}")?;
        }
        Ok(())
    }
}

impl NumericsConfig {
    /// Applies the settings of `decl` on top of `self`, reporting unknown or
    /// conflicting ones.
    pub fn apply(&mut self, decl: &ast::Numerics, diags: &mut Diagnostics) {
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

    /// Whether tensors may be stored as `dtype`.
    pub fn allows_storage(&self, dtype: Dtype) -> bool {
        if !dtype.is_float() {
            return true;
        }
        match self.storage {
            Some(only) => dtype == only || dtype == self.accumulate || dtype == Dtype::Fp64,
            None => self.precision.storage().contains(&dtype),
        }
    }

    /// Checks a declared tensor dtype against the precision mode.
    pub fn check_storage(&self, dtype: Dtype, span: Span, diags: &mut Diagnostics) {
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
            .with_help(format!(
                "declare `numerics {};` (or `numerics precision = {};` inside the op)",
                suggestion.name(),
                suggestion.name()
            )),
        );
    }

    /// The dtype two different dtypes promote to, if the mode declares a
    /// promotion between them (storage to accumulation).
    pub fn promote(&self, a: Dtype, b: Dtype) -> Option<Dtype> {
        if a == b {
            return Some(a);
        }
        let acc = self.accumulate;
        let promotes = |from: Dtype| {
            from.is_float() && self.allows_storage(from) && from.size_bytes() < acc.size_bytes()
        };
        if a == acc && promotes(b) || b == acc && promotes(a) {
            Some(acc)
        } else {
            None
        }
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

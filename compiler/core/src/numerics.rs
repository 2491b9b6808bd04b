//! Numerics policies and precision modes (seed tables A.3 and A.7): what
//! each setting means for storage and accumulation dtypes. The checker
//! parses them from source (`tessera-sema`); every later layer reads them.

use crate::Dtype;
use std::fmt;

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
    /// The policy spelled `name` (`fast`, `deterministic`, `kahan_sum`).
    pub fn from_name(name: &str) -> Option<Policy> {
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
    /// The mode spelled `name` (`safe`, `standard`, `aggressive`,
    /// `deterministic`).
    pub fn from_name(name: &str) -> Option<Precision> {
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
    pub fn allowing(dtype: Dtype) -> Precision {
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

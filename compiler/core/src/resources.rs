//! Tile shapes and the one model of what a program costs on an SM: shared
//! memory of staged operands, registers per thread, and how many programs
//! fit side by side. The checker's schedule diagnostics, the scheduler's
//! feasibility checks and estimates, and the PTX lowering's final
//! shared-memory check all use these functions, so they cannot disagree.

use crate::{Arch, Size};

/// The tile of a GEMM-shaped kernel (matrix products, convolutions as
/// implicit GEMMs): `bm x bn` outputs per program, `bk` deep per step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GemmTile {
    /// Output rows per program.
    pub bm: u64,
    /// Output columns per program.
    pub bn: u64,
    /// Reduction depth per main-loop step.
    pub bk: u64,
}

impl GemmTile {
    /// Shared memory of the two staged operands (`bm x bk` of A and
    /// `bk x bn` of B) over `stages` buffers, rows padded by `padding`
    /// elements of `elem_bytes` bytes.
    pub fn smem_bytes(&self, elem_bytes: u64, stages: u64, padding: u64) -> u64 {
        staged_bytes(&[self.bm, self.bk], padding, elem_bytes, stages)
            + staged_bytes(&[self.bk, self.bn], padding, elem_bytes, stages)
    }
}

/// The knobs of a schedule, resolved: what one `schedule` block, or one
/// point of its autotune space, sets for the kernels of an op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Knobs {
    /// Tile rows, columns and depth (attention reads `bm` and `bn`).
    pub tile: GemmTile,
    /// Warps per program.
    pub warps: u64,
    /// Software pipeline stages.
    pub stages: u64,
    /// Whether global-to-shared copies are asynchronous.
    pub async_copy: bool,
    /// Shared-memory row padding, in elements.
    pub padding: u64,
    /// Elements per vector access.
    pub vectorize: u64,
    /// Whether GEMM-shaped products use tensor cores.
    pub tensor_cores: bool,
    /// Resident warps per SM the schedule asks for, at least and at most
    /// (`occupancy(min_warps = a, max_warps = b)`); `None`: whatever fits.
    pub occupancy: Option<(u64, u64)>,
    /// Whether a kernel that qualifies may be warp-specialised (a producer
    /// warpgroup issuing its TMA copies, on sm_90a); on unless
    /// `warp_specialize(false)`.
    pub warp_specialize: bool,
}

impl Knobs {
    /// The knobs an `autotune(...)` clause may vary, by name.
    pub const TUNABLE: &'static [&'static str] = &[
        "bm",
        "bn",
        "bk",
        "warps",
        "stages",
        "vectorize",
        "warp_specialize",
    ];

    /// What a `schedule` block leaves unset: a 128 x 128 x 64 tile, 4
    /// warps, 2 stages, synchronous copies, no padding, scalar accesses,
    /// tensor cores as given, and warp specialisation where it applies.
    pub fn unset(tensor_cores: bool) -> Knobs {
        Knobs {
            tile: GemmTile {
                bm: 128,
                bn: 128,
                bk: 64,
            },
            warps: 4,
            stages: 2,
            async_copy: false,
            padding: 0,
            vectorize: 1,
            tensor_cores,
            occupancy: None,
            warp_specialize: true,
        }
    }

    /// Shared memory of a GEMM's staged operands under these knobs.
    pub fn smem_bytes(&self, elem_bytes: u64) -> u64 {
        self.tile.smem_bytes(elem_bytes, self.stages, self.padding)
    }

    /// Sets the tunable knob `name` (one of [`Knobs::TUNABLE`]) to `v`;
    /// false, changing nothing, for any other name.
    pub fn set(&mut self, name: &str, v: u64) -> bool {
        match name {
            "bm" => self.tile.bm = v,
            "bn" => self.tile.bn = v,
            "bk" => self.tile.bk = v,
            "warps" => self.warps = v,
            "stages" => self.stages = v,
            "vectorize" => self.vectorize = v,
            "warp_specialize" => self.warp_specialize = v != 0,
            _ => return false,
        }
        true
    }

    /// The text form, one `name=value` per knob, which [`Knobs::parse`]
    /// reads back: `bm=128 bn=128 bk=64 warps=8 stages=3 async=true
    /// padding=0 vectorize=4 tensor_cores=true occupancy=none ws=true`.
    pub fn to_text(&self) -> String {
        let occupancy = match self.occupancy {
            Some((lo, hi)) => format!("{lo}..{hi}"),
            None => "none".into(),
        };
        format!(
            "bm={} bn={} bk={} warps={} stages={} async={} padding={} vectorize={} tensor_cores={} occupancy={occupancy} ws={}",
            self.tile.bm,
            self.tile.bn,
            self.tile.bk,
            self.warps,
            self.stages,
            self.async_copy,
            self.padding,
            self.vectorize,
            self.tensor_cores,
            self.warp_specialize,
        )
    }

    /// Reads [`Knobs::to_text`]'s form; every knob must be there once.
    pub fn parse(text: &str) -> Result<Knobs, String> {
        let mut k = Knobs::unset(false);
        let mut seen = Vec::new();
        for part in text.split_whitespace() {
            let (name, v) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}` is not NAME=VALUE"))?;
            if seen.contains(&name) {
                return Err(format!("`{name}` is given twice"));
            }
            seen.push(name);
            let int = || {
                v.parse::<u64>()
                    .ok()
                    .filter(|&n| n > 0 || name == "padding")
                    .ok_or_else(|| format!("`{name}={v}`: expected a positive integer"))
            };
            let flag = || match v {
                "true" => Ok(true),
                "false" => Ok(false),
                _ => Err(format!("`{name}={v}`: expected true or false")),
            };
            match name {
                "async" => k.async_copy = flag()?,
                "tensor_cores" => k.tensor_cores = flag()?,
                "ws" => k.warp_specialize = flag()?,
                "padding" => k.padding = int()?,
                "occupancy" => {
                    k.occupancy = match v {
                        "none" => None,
                        _ => {
                            let (lo, hi) = v
                                .split_once("..")
                                .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
                                .ok_or_else(|| {
                                    format!("`occupancy={v}`: expected none or LO..HI")
                                })?;
                            Some((lo, hi))
                        }
                    }
                }
                _ => {
                    let n = int()?;
                    if !k.set(name, n) {
                        return Err(format!("unknown knob `{name}`"));
                    }
                }
            }
        }
        const ALL: [&str; 11] = [
            "bm",
            "bn",
            "bk",
            "warps",
            "stages",
            "async",
            "padding",
            "vectorize",
            "tensor_cores",
            "occupancy",
            "ws",
        ];
        match ALL.iter().find(|n| !seen.contains(n)) {
            Some(missing) => Err(format!("knob `{missing}` is missing")),
            None => Ok(k),
        }
    }
}

/// The tile of a flash-attention kernel: `bm` query rows per program, `bn`
/// key rows per step, head dimensions `bd` (queries and keys) and `bdv`
/// (values) padded to a power of two.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AttentionTile {
    /// Query rows per program.
    pub bm: u64,
    /// Key and value rows per main-loop step.
    pub bn: u64,
    /// The query and key head dimension, padded.
    pub bd: Size,
    /// The value head dimension, padded.
    pub bdv: Size,
}

/// The tile of a row or elementwise kernel: `rows x cols` elements per
/// program step.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RowTile {
    /// Rows per program.
    pub rows: Size,
    /// Columns per step.
    pub cols: Size,
}

/// Bytes of one operand staged through shared memory: `shape` elements per
/// stage (its last extent padded by `padding` elements), `stages` buffers.
pub fn staged_bytes(shape: &[u64], padding: u64, elem_bytes: u64, stages: u64) -> u64 {
    let (last, outer) = shape.split_last().unwrap_or((&1, &[]));
    let rows: u64 = outer.iter().product();
    rows * (last + padding) * elem_bytes * stages
}

/// Registers per thread of double-buffered mma operand fragments for
/// `rows` rows of operands, k = 16 per step.
pub fn fragment_regs(rows: u64, elem_bytes: u64, threads: u64) -> u64 {
    (rows * 16 * elem_bytes).div_ceil(4 * threads.max(1)) * 2
}

/// The most elements one tile of a kernel may have: every backend holds a
/// program's tiles at once (the NVIDIA backend in registers, unrolled per
/// element), so a larger one is an error (at check time where its shape is
/// known, when the kernel compiles otherwise) rather than a compile that
/// runs out of memory.
pub const MAX_TILE_ELEMENTS: i64 = 1 << 16;

/// Registers every program needs beyond its tiles: indices, addresses,
/// loop counters.
pub const BASE_REGS: u64 = 24;

/// Registers per thread of a GEMM-shaped kernel with `warps` warps:
/// the fp32 accumulators, the operand fragments and [`BASE_REGS`].
pub fn gemm_regs(tile: &GemmTile, elem_bytes: u64, warps: u64) -> u64 {
    let threads = warps * 32;
    (tile.bm * tile.bn).div_ceil(threads.max(1))
        + fragment_regs(tile.bm + tile.bn, elem_bytes, threads)
        + BASE_REGS
}

/// Registers per thread of a flash-attention kernel with `warps` warps and
/// a padded value head dimension `dv`: the output accumulator, the score
/// tile, the operand fragments and [`BASE_REGS`].
pub fn attention_regs(bm: u64, bn: u64, dv: u64, elem_bytes: u64, warps: u64) -> u64 {
    let threads = (warps * 32).max(1);
    (bm * dv).div_ceil(threads)
        + (bm * bn).div_ceil(threads)
        + fragment_regs(bm, elem_bytes, threads)
        + BASE_REGS
}

/// The resource that bounds how many programs fit on an SM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// The SM's limit on resident blocks.
    Blocks,
    /// The SM's limit on resident warps.
    Warps,
    /// The register file.
    Registers,
    /// Shared memory.
    SharedMemory,
}

impl Limit {
    /// The name in messages and the Schedule IR text.
    pub fn name(self) -> &'static str {
        match self {
            Limit::Blocks => "blocks",
            Limit::Warps => "warps",
            Limit::Registers => "registers",
            Limit::SharedMemory => "shared memory",
        }
    }
}

/// How many programs of one kernel are resident on an SM at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Residency {
    /// Programs resident per SM.
    pub blocks: u64,
    /// Resident warps (`blocks x warps`).
    pub warps: u64,
    /// Resident warps over the SM's maximum, in percent.
    pub occupancy_pct: u64,
    /// The resource that bounds `blocks`.
    pub limited_by: Limit,
}

impl Arch {
    /// How many programs of `warps` warps fit on one SM when each thread
    /// holds `regs_per_thread` registers (0: not known, no bound) and each
    /// program `smem_bytes` of shared memory. Registers are allocated in
    /// units of 8 per thread.
    pub fn residency(&self, warps: u64, regs_per_thread: u64, smem_bytes: u64) -> Residency {
        let threads = warps * 32;
        let regs = regs_per_thread.div_ceil(8) * 8;
        let by_smem = self
            .smem_per_sm
            .checked_div(smem_bytes)
            .unwrap_or(self.max_blocks);
        let by_regs = self
            .regs_per_sm
            .checked_div(regs * threads)
            .unwrap_or(self.max_blocks);
        let by_warps = self.max_warps / warps.max(1);
        let (blocks, limited_by) = [
            (self.max_blocks, Limit::Blocks),
            (by_warps, Limit::Warps),
            (by_regs, Limit::Registers),
            (by_smem, Limit::SharedMemory),
        ]
        .into_iter()
        .min_by_key(|&(n, _)| n)
        .expect("four candidates");
        Residency {
            blocks,
            warps: blocks * warps,
            occupancy_pct: (blocks * warps * 100) / self.max_warps.max(1),
            limited_by,
        }
    }

    /// Whether a program using `smem_bytes` of shared memory can launch.
    pub fn fits_smem(&self, smem_bytes: u64) -> bool {
        smem_bytes <= self.smem_per_block
    }

    /// The most pipeline stages, below `stages`, with which `fixed` bytes
    /// plus `per_stage` bytes per stage fit in a block's shared memory;
    /// `None` when even one stage does not fit, or `stages` already fits.
    pub fn stages_that_fit(&self, fixed: u64, per_stage: u64, stages: u64) -> Option<u64> {
        let fit = self
            .smem_per_block
            .saturating_sub(fixed)
            .checked_div(per_stage)?;
        (fit >= 1 && fit < stages && !self.fits_smem(fixed + stages * per_stage)).then_some(fit)
    }
}

/// Bytes as KiB for messages: exact when whole, else one decimal.
pub fn kib(bytes: u64) -> String {
    if bytes.is_multiple_of(1024) {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knobs_text_reads_back_and_bad_text_says_why() {
        let mut k = Knobs::unset(true);
        k.occupancy = Some((8, 16));
        k.async_copy = true;
        k.warp_specialize = false;
        assert_eq!(Knobs::parse(&k.to_text()), Ok(k));
        let k = Knobs::unset(false);
        assert_eq!(Knobs::parse(&k.to_text()), Ok(k));
        assert!(Knobs::parse("bm=64").unwrap_err().contains("missing"));
        assert!(Knobs::parse("bm=0").unwrap_err().contains("positive"));
        assert!(Knobs::parse("bm=64 bm=64").unwrap_err().contains("twice"));
        assert!(Knobs::parse("zz=1").unwrap_err().contains("unknown"));
        assert!(Knobs::parse("async=yes")
            .unwrap_err()
            .contains("true or false"));
    }

    #[test]
    fn gemm_smem_counts_both_operands_and_padding() {
        let t = GemmTile {
            bm: 128,
            bn: 128,
            bk: 64,
        };
        assert_eq!(t.smem_bytes(2, 3, 0), 3 * (128 * 64 + 64 * 128) * 2);
        assert_eq!(t.smem_bytes(2, 1, 8), (128 * 72 + 64 * 136) * 2);
    }

    #[test]
    fn every_tunable_knob_is_settable() {
        let base = Knobs::unset(true);
        for name in Knobs::TUNABLE {
            let mut k = base;
            // (A flag: 0 turns it off.)
            let v = if *name == "warp_specialize" { 0 } else { 7 };
            assert!(k.set(name, v), "{name}");
            assert_ne!(k, base, "{name} changed nothing");
        }
        assert!(!base.clone().set("async_copy", 1));
    }

    #[test]
    fn residency_names_the_binding_resource() {
        let a = &Arch::SM_90;
        let r = a.residency(8, 0, 200 * 1024);
        assert_eq!((r.blocks, r.limited_by), (1, Limit::SharedMemory));
        let r = a.residency(4, 0, 0);
        assert_eq!(r.limited_by, Limit::Warps);
        assert_eq!(r.occupancy_pct, 100);
        let r = a.residency(8, 255, 0);
        assert_eq!(r.limited_by, Limit::Registers);
        assert_eq!(r.blocks, a.regs_per_sm / (256 * 256));
    }

    #[test]
    fn stages_that_fit_only_suggests_fewer() {
        let a = &Arch::SM_80;
        let per = 64 * 1024;
        assert_eq!(a.stages_that_fit(0, per, 4), Some(a.smem_per_block / per));
        assert_eq!(a.stages_that_fit(0, per, 2), None);
        assert_eq!(a.stages_that_fit(0, a.smem_per_block + 1, 2), None);
    }
}

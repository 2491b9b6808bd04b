//! Autotune spaces: the candidate configurations a schedule's
//! `autotune(knob in [...], ...)` clause spans ([`candidates`]), or, for an
//! op without one, the default space of its kind of kernel
//! ([`default_space`]), for the tuner to try one by one through
//! [`schedule_with`](crate::schedule_with). [`Tunings`] is how the
//! scheduler asks for what the tuner found.

use crate::config::Choice;
use crate::ir::{ConfigSource, KernelKind};
use tessera_core::resources::{attention_regs, gemm_regs};
use tessera_core::{Arch, GemmTile, Knobs};
use tessera_graph::Graph;
use tessera_sema::ScheduleInfo;

/// Tuned configurations by graph: the tuner's database on disk, or the
/// entries an executable embeds. The scheduler asks it before the
/// program's schedule blocks; it does the IO, the compiler none.
pub trait Tunings {
    /// The best configuration tuned for `g` (an op or kernel's graph at
    /// concrete shapes) on `arch`, if any.
    fn lookup(&self, g: &Graph, arch: &Arch) -> Option<Choice>;
}

impl std::fmt::Debug for dyn Tunings + Send + Sync {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tunings")
    }
}

/// Every configuration of `info`'s autotune space that fits `arch`: the
/// product of the candidate lists, in declaration order with the last knob
/// varying fastest, each applied over the schedule's other knobs. A point
/// whose GEMM operand staging (operands of `elem_bytes` bytes) overflows the
/// shared memory of a block is left out. A schedule without an autotune
/// clause spans one point: itself.
pub fn candidates(info: &ScheduleInfo, arch: &Arch, elem_bytes: u64) -> Vec<Choice> {
    let base = Choice::of_schedule(info);
    let fits = |k: &Knobs| arch.fits_smem(k.smem_bytes(elem_bytes));
    product(base, &info.autotune, arch, &fits)
}

/// The default spaces' knob for occupancy: programs resident per SM at
/// least (`occupancy(min_warps = warps x n)`), so that the register
/// allocation leaves room for `n` programs; 1 leaves occupancy unset.
pub const MIN_BLOCKS: &str = "min_blocks";

/// The points of `space` over `base`, those `keep` accepts, each named by
/// the knobs it sets.
fn product(
    base: Choice,
    space: &[(String, Vec<u64>)],
    arch: &Arch,
    keep: &dyn Fn(&Knobs) -> bool,
) -> Vec<Choice> {
    let mut points = vec![(base, Vec::new())];
    for (knob, values) in space {
        points = points
            .into_iter()
            .flat_map(|(choice, named): (Choice, Vec<String>)| {
                values.iter().map(move |&v| {
                    let mut c = choice.clone();
                    // sema accepts only `Knobs::TUNABLE` names (E0308
                    // otherwise), each of which `set` applies; the default
                    // spaces also vary `MIN_BLOCKS`, applied below once
                    // the warps are known.
                    c.knobs.set(knob, v);
                    let mut named = named.clone();
                    named.push(format!("{knob} = {v}"));
                    (c, named)
                })
            })
            .collect();
    }
    points
        .into_iter()
        .map(|(mut c, named)| {
            let blocks = named
                .iter()
                .find_map(|n| n.strip_prefix(MIN_BLOCKS)?.strip_prefix(" = "))
                .and_then(|v| v.parse::<u64>().ok());
            if let Some(n) = blocks.filter(|&n| n > 1) {
                c.knobs.occupancy = Some((c.knobs.warps * n, arch.max_warps));
            }
            (c, named)
        })
        .filter(|(c, _)| keep(&c.knobs) && c.knobs.occupancy.is_none_or(|(lo, hi)| lo <= hi))
        .map(|(mut c, named)| {
            if !named.is_empty() {
                c.source = ConfigSource::Tuned(named.join(", "));
            }
            c
        })
        .collect()
}

/// The kind of kernel whose knobs a default space varies: the first
/// GEMM-shaped or attention kernel of an op, else its first row kernel,
/// else its first elementwise or user kernel.
pub fn primary_kind(kinds: &[KernelKind]) -> Option<&KernelKind> {
    let heavy = |k: &&KernelKind| {
        matches!(
            k,
            KernelKind::MatMul | KernelKind::Conv2d | KernelKind::Attention
        )
    };
    kinds
        .iter()
        .find(heavy)
        .or_else(|| kinds.iter().find(|k| matches!(k, KernelKind::Row { .. })))
        .or_else(|| kinds.first())
}

/// The knobs the defaults of seed table A.1 give a kernel of `kind` with
/// operands of `elem_bytes` bytes: what a default space varies around.
pub fn default_knobs(kind: &KernelKind, elem_bytes: u64) -> Knobs {
    let tensor_cores = elem_bytes != 8;
    let mut k = Knobs {
        async_copy: true,
        vectorize: 4,
        ..Knobs::unset(tensor_cores)
    };
    match kind {
        KernelKind::MatMul | KernelKind::Conv2d => {
            k.tile = GemmTile {
                bm: 128,
                bn: 128,
                bk: if elem_bytes >= 4 { 32 } else { 64 },
            };
            (k.warps, k.stages) = (8, if *kind == KernelKind::Conv2d { 2 } else { 3 });
        }
        KernelKind::Attention => {
            k.tile = GemmTile {
                bm: 128,
                bn: 64,
                bk: 64,
            };
            (k.warps, k.stages) = (8, 2);
        }
        KernelKind::Row { .. } => k.warps = 8,
        KernelKind::Elementwise | KernelKind::User(_) => k.warps = 4,
    }
    k
}

/// The knobs and values a default space varies for a kernel of `kind`.
pub fn default_axes(kind: &KernelKind, elem_bytes: u64) -> Vec<(String, Vec<u64>)> {
    let axes: Vec<(&str, Vec<u64>)> = match kind {
        KernelKind::MatMul | KernelKind::Conv2d => vec![
            ("bm", vec![64, 128, 256]),
            ("bn", vec![64, 128, 256]),
            (
                "bk",
                match elem_bytes {
                    1 => vec![64, 128],
                    2 => vec![32, 64],
                    _ => vec![16, 32],
                },
            ),
            ("warps", vec![4, 8]),
            ("stages", vec![2, 3, 4]),
            (MIN_BLOCKS, vec![1, 2]),
        ],
        KernelKind::Attention => vec![
            ("bm", vec![64, 128]),
            ("bn", vec![32, 64, 128]),
            ("warps", vec![4, 8]),
            ("stages", vec![1, 2, 3]),
            (MIN_BLOCKS, vec![1, 2]),
        ],
        KernelKind::Row { .. } => vec![
            ("warps", vec![1, 2, 4, 8, 16]),
            ("vectorize", vec![1, 2, 4]),
        ],
        KernelKind::Elementwise => vec![("warps", vec![2, 4, 8]), ("vectorize", vec![1, 2, 4])],
        KernelKind::User(_) => vec![("warps", vec![1, 2, 4, 8])],
    };
    axes.into_iter().map(|(n, v)| (n.to_owned(), v)).collect()
}

/// The default space of an op whose kernels are of `kinds`, operands of
/// `elem_bytes` bytes, on `arch`: [`default_axes`] of its
/// [`primary_kind`] around [`default_knobs`], less the points whose staged
/// operands overflow a block's shared memory or whose estimated registers
/// exceed a thread's. Empty when there are no kernels.
pub fn default_space(kinds: &[KernelKind], arch: &Arch, elem_bytes: u64) -> Vec<Choice> {
    let Some(kind) = primary_kind(kinds) else {
        return Vec::new();
    };
    let base = Choice {
        knobs: default_knobs(kind, elem_bytes),
        source: ConfigSource::Default("the default space"),
        tensor_cores_at: None,
    };
    let gemm = matches!(kind, KernelKind::MatMul | KernelKind::Conv2d);
    let attention = *kind == KernelKind::Attention;
    let keep = |k: &Knobs| {
        let regs = if gemm {
            gemm_regs(&k.tile, elem_bytes, k.warps)
        } else if attention {
            // A head dimension of 128 for the estimate: the feasibility
            // checks see the real one.
            attention_regs(k.tile.bm, k.tile.bn, 128, elem_bytes, k.warps)
        } else {
            0
        };
        (!gemm || arch.fits_smem(k.smem_bytes(elem_bytes))) && regs <= arch.max_regs_per_thread
    };
    let mut axes = default_axes(kind, elem_bytes);
    // Where kernels may be warp-specialised, with and without it.
    if arch.has_wgmma && (gemm || attention) {
        axes.push(("warp_specialize".into(), vec![1, 0]));
    }
    product(base, &axes, arch, &keep)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(autotune: Vec<(&str, Vec<u64>)>) -> ScheduleInfo {
        ScheduleInfo {
            target: "gemm".into(),
            arch: None,
            knobs: Knobs {
                async_copy: true,
                vectorize: 4,
                ..Knobs::unset(true)
            },
            autotune: autotune
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
            smem_bytes: 0,
            tensor_cores_at: None,
        }
    }

    #[test]
    fn the_space_is_the_product_minus_what_does_not_fit() {
        let i = info(vec![("bm", vec![64, 128, 256]), ("stages", vec![2, 4])]);
        let c = candidates(&i, &Arch::SM_80, 2);
        // 256 x 64 + 64 x 128 bf16 elements over 4 stages is 192 KiB:
        // over sm_80's 163 KiB per block.
        assert_eq!(c.len(), 5);
        assert_eq!(
            c[0].source,
            ConfigSource::Tuned("bm = 64, stages = 2".into())
        );
        assert_eq!((c[4].knobs.tile.bm, c[4].knobs.stages), (256, 2));
        assert!(c
            .iter()
            .all(|c| c.knobs.tile.bn == 128 && c.knobs.warps == 4));
    }

    #[test]
    fn no_autotune_clause_is_one_point() {
        let i = info(Vec::new());
        assert_eq!(
            candidates(&i, &Arch::SM_90, 2),
            vec![Choice::of_schedule(&i)]
        );
    }

    #[test]
    fn default_spaces_follow_the_heaviest_kernel_and_fit_the_arch() {
        let kinds = [KernelKind::Row { axis: 1 }, KernelKind::MatMul];
        assert_eq!(primary_kind(&kinds), Some(&KernelKind::MatMul));
        let gemm = default_space(&kinds, &Arch::SM_90, 2);
        // 3 x 3 x 2 x 2 x 3 x 2 = 216 points, less those over 227 KiB of
        // shared memory or 255 registers a thread.
        assert!(gemm.len() > 80 && gemm.len() < 216, "{}", gemm.len());
        // Two programs per SM: occupancy asks for twice the warps.
        let two = gemm
            .iter()
            .find(|c| matches!(&c.source, ConfigSource::Tuned(p) if p.ends_with("min_blocks = 2")))
            .unwrap();
        assert_eq!(two.knobs.occupancy, Some((2 * two.knobs.warps, 64)));
        assert!(gemm
            .iter()
            .all(|c| Arch::SM_90.fits_smem(c.knobs.smem_bytes(2)) && c.knobs.async_copy));
        // sm_80 has less shared memory: fewer points.
        assert!(default_space(&kinds, &Arch::SM_80, 2).len() < gemm.len());
        // The A.1 default is one of the points.
        let a1 = default_knobs(&KernelKind::MatMul, 2);
        assert!(gemm.iter().any(|c| c.knobs == a1));
        let rows = default_space(&[KernelKind::Row { axis: 0 }], &Arch::SM_90, 4);
        assert_eq!(rows.len(), 15);
        assert_eq!(
            rows[0].source,
            ConfigSource::Tuned("warps = 1, vectorize = 1".into())
        );
        assert!(default_space(&[], &Arch::SM_90, 4).is_empty());
    }

    #[test]
    fn sm_90a_spaces_try_kernels_with_and_without_a_producer() {
        let kinds = [KernelKind::MatMul];
        let hopper = default_space(&kinds, &Arch::SM_90A, 2);
        assert_eq!(
            hopper.len(),
            2 * default_space(&kinds, &Arch::SM_90, 2).len()
        );
        let off = hopper.iter().filter(|c| !c.knobs.warp_specialize).count();
        assert_eq!(off, hopper.len() / 2);
        assert!(hopper.iter().any(|c| matches!(
            &c.source,
            ConfigSource::Tuned(p) if p.ends_with("warp_specialize = 0")
        )));
        // Row kernels have no pipelined products: one role only.
        let rows = [KernelKind::Row { axis: 1 }];
        assert_eq!(
            default_space(&rows, &Arch::SM_90A, 4).len(),
            default_space(&rows, &Arch::SM_90, 4).len()
        );
    }
}

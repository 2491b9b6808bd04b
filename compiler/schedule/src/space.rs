//! Autotune spaces: the candidate configurations a schedule's
//! `autotune(knob in [...], ...)` clause spans, for the tuner to time one
//! by one through [`schedule_with`](crate::schedule_with).

use crate::config::Choice;
use crate::ir::ConfigSource;
use tessera_core::Arch;
use tessera_sema::ScheduleInfo;

/// Every configuration of `info`'s autotune space that fits `arch`: the
/// product of the candidate lists, in declaration order with the last knob
/// varying fastest, each applied over the schedule's other knobs. A point
/// whose GEMM operand staging (operands of `elem_bytes` bytes) overflows the
/// shared memory of a block is left out. A schedule without an autotune
/// clause spans one point: itself.
pub fn candidates(info: &ScheduleInfo, arch: &Arch, elem_bytes: u64) -> Vec<Choice> {
    let base = Choice::of_schedule(info);
    let mut points = vec![(base, Vec::new())];
    for (knob, values) in &info.autotune {
        points = points
            .into_iter()
            .flat_map(|(choice, named): (Choice, Vec<String>)| {
                values.iter().map(move |&v| {
                    let mut c = choice.clone();
                    // sema accepts only `Knobs::TUNABLE` names (E0308
                    // otherwise), each of which `set` applies.
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
        .filter(|(c, _)| arch.fits_smem(c.knobs.smem_bytes(elem_bytes)))
        .map(|(mut c, named)| {
            if !named.is_empty() {
                c.source = ConfigSource::Tuned(named.join(", "));
            }
            c
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::Knobs;

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
}

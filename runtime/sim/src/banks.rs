//! Shared-memory bank conflicts: how many passes ("wavefronts") a
//! warp-wide shared access takes on NVIDIA hardware.
//!
//! Shared memory has 32 banks of 4-byte words (word `w` in bank `w % 32`).
//! A warp's access is split into phases by its width per lane: up to 4
//! bytes, all 32 lanes at once; 8 bytes, two halves of 16 lanes; 16 bytes
//! (`ld.v4.b32`, `cp.async`, one `ldmatrix` matrix), four quarters of 8
//! lanes. Within a phase, lanes reading the same word share it (a
//! broadcast), and a bank asked for `n` different words serves them in `n`
//! passes: the phase takes as many wavefronts as its busiest bank has
//! distinct words. A conflict-free access takes one wavefront per phase.

/// The number of banks.
const BANKS: u64 = 32;

/// The wavefronts of one warp-wide access in which lane `lane` touches
/// `size` bytes at shared offset `off`, for each `(lane, off)` of
/// `accesses` (the active lanes), and the least it could take (one per
/// phase with an active lane).
pub fn wavefronts(accesses: &[(usize, u64)], size: usize) -> (u64, u64) {
    let per_phase = match size {
        0..=4 => 32,
        5..=8 => 16,
        _ => 8,
    };
    let words = (size as u64).div_ceil(4).max(1);
    let (mut total, mut least) = (0, 0);
    // (bank, word) pairs of one phase, sorted to count distinct words.
    let mut touched: Vec<(u64, u64)> = Vec::with_capacity(32 * words as usize);
    for phase in 0..32 / per_phase {
        touched.clear();
        for (lane, off) in accesses {
            if lane / per_phase != phase {
                continue;
            }
            let first = off / 4;
            for w in first..(off + size as u64).div_ceil(4).max(first + 1) {
                touched.push((w % BANKS, w));
            }
        }
        if touched.is_empty() {
            continue;
        }
        touched.sort_unstable();
        touched.dedup();
        let mut busiest = 0;
        let mut run = 0;
        let mut bank = u64::MAX;
        for (b, _) in &touched {
            run = if *b == bank { run + 1 } else { 1 };
            bank = *b;
            busiest = busiest.max(run);
        }
        total += busiest;
        least += 1;
    }
    (total, least)
}

#[cfg(test)]
mod tests {
    use super::wavefronts;

    fn lanes(f: impl Fn(u64) -> u64) -> Vec<(usize, u64)> {
        (0..32).map(|l| (l as usize, f(l))).collect()
    }

    #[test]
    fn consecutive_words_take_one_pass() {
        assert_eq!(wavefronts(&lanes(|l| 4 * l), 4), (1, 1));
        // The same word in every lane is a broadcast.
        assert_eq!(wavefronts(&lanes(|_| 64), 4), (1, 1));
        // Two-byte elements: pairs of lanes share a word.
        assert_eq!(wavefronts(&lanes(|l| 2 * l), 2), (1, 1));
    }

    #[test]
    fn strided_words_conflict() {
        // A column of a 32-word-wide array: every lane in bank 0.
        assert_eq!(wavefronts(&lanes(|l| 128 * l), 4), (32, 1));
        // Stride of two words: two lanes per bank.
        assert_eq!(wavefronts(&lanes(|l| 8 * l), 4), (2, 1));
        // Padding the row by one word removes the conflict.
        assert_eq!(wavefronts(&lanes(|l| 132 * l), 4), (1, 1));
    }

    #[test]
    fn wide_accesses_go_by_phases() {
        // 16 bytes per lane, consecutive: four quarters, one pass each.
        assert_eq!(wavefronts(&lanes(|l| 16 * l), 16), (4, 4));
        // ldmatrix rows 128 bytes apart: the eight rows of a matrix in the
        // same four banks.
        assert_eq!(wavefronts(&lanes(|l| 128 * (l % 8)), 16), (32, 4));
        // Rows 144 bytes apart (16 bytes of padding) are spread out.
        assert_eq!(wavefronts(&lanes(|l| 144 * (l % 8)), 16), (4, 4));
        // 8 bytes per lane: two halves.
        assert_eq!(wavefronts(&lanes(|l| 8 * l), 8), (2, 2));
        // Only the first 16 lanes (an ldmatrix.x2).
        let half: Vec<(usize, u64)> = (0..16).map(|l| (l, 16 * l as u64)).collect();
        assert_eq!(wavefronts(&half, 16), (2, 2));
    }
}

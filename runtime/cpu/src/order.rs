//! The one order `sort`, `argsort` and `topk` place elements in, shared by
//! the graph executor and the tile interpreter: ascending or descending,
//! NaN as the largest value, -0 equal to +0, and equal values in the order
//! of their positions (stable), so that every backend gives one
//! permutation.

use std::cmp::Ordering;

/// Values a line is sorted by.
pub trait Key: Copy {
    /// The order of two values that are not NaN (`None` where either is).
    fn compare(self, other: Self) -> Option<Ordering>;
}

impl Key for f32 {
    fn compare(self, other: f32) -> Option<Ordering> {
        self.partial_cmp(&other)
    }
}

impl Key for f64 {
    fn compare(self, other: f64) -> Option<Ordering> {
        self.partial_cmp(&other)
    }
}

impl Key for i64 {
    fn compare(self, other: i64) -> Option<Ordering> {
        Some(self.cmp(&other))
    }
}

impl Key for bool {
    fn compare(self, other: bool) -> Option<Ordering> {
        Some(self.cmp(&other))
    }
}

/// The ascending order of `a` and `b`, NaN after every number and equal to
/// another NaN.
fn ascending<T: Key>(a: T, b: T) -> Ordering {
    a.compare(b).unwrap_or_else(|| {
        // A NaN is the only value not equal to itself.
        let nan = |x: T| x.compare(x).is_none();
        nan(a).cmp(&nan(b))
    })
}

/// The positions of `line`'s elements in sorted order: `order[p]` is the
/// position of the element placed `p`th.
pub fn permutation<T: Key>(line: &[T], descending: bool) -> Vec<usize> {
    let mut order: Vec<usize> = (0..line.len()).collect();
    // A stable sort: equal elements keep their positions' order.
    if descending {
        order.sort_by(|&i, &j| ascending(line[j], line[i]));
    } else {
        order.sort_by(|&i, &j| ascending(line[i], line[j]));
    }
    order
}

#[cfg(test)]
mod tests {
    use super::permutation;

    #[test]
    fn nan_is_largest_and_ties_keep_their_positions() {
        let xs = [
            1.0f32,
            f32::NAN,
            -0.0,
            0.0,
            f32::NEG_INFINITY,
            f32::NAN,
            1.0,
        ];
        assert_eq!(permutation(&xs, false), [4, 2, 3, 0, 6, 1, 5]);
        assert_eq!(permutation(&xs, true), [1, 5, 0, 6, 2, 3, 4]);
        assert_eq!(permutation(&[3i64, -1, 3, 2], true), [0, 2, 3, 1]);
    }
}
